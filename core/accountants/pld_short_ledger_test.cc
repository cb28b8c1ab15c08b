// Cold PLD queries of short ledgers (issue 15, pld-cold: 1-10 steps at delta
// 1e-5..1e-12), which now start from coarser grids, compute the remove direction
// first and let the add direction stop at its loss bound. Each certified interval
// must contain the truth and meet the default precision target, in both query
// directions (epsilon(delta) and delta(epsilon)), against values computed here:
//  * k Gaussian steps: delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2),
//    mu = sqrt(k) / sigma (Balle & Wang 2018, Thm 8);
//  * one Poisson-subsampled Gaussian step (sensitivity 1, rate q): P = (1-q) N(0, s^2)
//    + q N(1, s^2), Q = N(0, s^2). The loss log(p/q)(x) = log(1 - q + q e^{(2x-1)/(2s^2)})
//    is increasing in x, so each direction's hockey stick is a pair of normal tails
//    at the point x where the loss crosses eps:
//      remove (P vs Q): x = s^2 log((e^eps - 1 + q) / q) + 1/2,
//        delta = (1-q) Phi_c(x/s) + q Phi_c((x-1)/s) - e^eps Phi_c(x/s);
//      add (Q vs P), only for e^-eps > 1 - q: x = s^2 log((e^-eps - 1 + q) / q) + 1/2,
//        delta = Phi(x/s) - e^eps ((1-q) Phi(x/s) + q Phi((x-1)/s)).
//    The ledger's delta is the larger of the two; epsilon(delta) by bisection;
//  * 2-10 subsampled steps: scripts/pld_reference_values.py (see the test below).
// The terms cancel by at most ~1e3 here, so these values are exact to ~1e-12
// relative; the checks allow 1e-9.
#include <cmath>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/accountants/pld_accountant.h"
#include "core/accountants/pld_engine.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

constexpr double kEpsilonTarget = 5e-4, kDeltaTarget = 0.01;  // PldOptions defaults
constexpr double kRefSlack = 1e-9;                            // relative, see above

double NormalSf(double x) { return 0.5 * std::erfc(x / std::sqrt(2.0)); }
double NormalCdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

struct Law {
  double sigma, q;  // q = 1: the Gaussian mechanism, `steps` times
  int64_t steps;
};

double TrueDelta(const Law& l, double eps) {
  const double s = l.sigma;
  if (l.q == 1) {
    const double mu = std::sqrt(static_cast<double>(l.steps)) / s;
    return NormalCdf(-eps / mu + mu / 2) - std::exp(eps) * NormalCdf(-eps / mu - mu / 2);
  }
  const double q = l.q;
  const double xr = s * s * std::log((std::exp(eps) - 1 + q) / q) + 0.5;
  const double rem = (1 - q) * NormalSf(xr / s) + q * NormalSf((xr - 1) / s) -
                     std::exp(eps) * NormalSf(xr / s);
  double add = 0;
  if (std::exp(-eps) > 1 - q) {
    const double xa = s * s * std::log((std::exp(-eps) - 1 + q) / q) + 0.5;
    add = NormalCdf(xa / s) -
          std::exp(eps) * ((1 - q) * NormalCdf(xa / s) + q * NormalCdf((xa - 1) / s));
  }
  return std::max(rem, add);
}

// delta(eps) decreases in eps: bisection to double precision.
double TrueEpsilon(const Law& l, double delta) {
  double lo = 0, hi = 1;
  while (TrueDelta(l, hi) > delta) lo = hi, hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-15 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (TrueDelta(l, mid) > delta ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

std::unique_ptr<Accountant> LedgerOf(const Law& l) {
  std::unique_ptr<Accountant> acc = *CreatePldAccountant();
  const Mechanism m = l.q == 1 ? *Mechanism::Gaussian(l.sigma)
                               : *Mechanism::SubsampledGaussian(l.sigma, l.q);
  EXPECT_TRUE(acc->Compose(m, l.steps).ok());
  return acc;
}

// The refinement stop the last answer reported ("" when it met its target).
std::string RefinementWarning(const Accountant& acc) {
  for (const AnswerDiagnostic& d : acc.LastDiagnostics()) {
    if (d.name == "precision_warning") return std::get<std::string>(d.value);
  }
  return "";
}

// Known short of the target (main too, issue 15): one step at q = 1e-4 and delta =
// 1e-12, where the FFT round-off floor stops the refinement (refinement "round_off",
// said in the answer's precision_warning) at up to 2x the target width.
struct Expect {
  bool epsilon_round_off = false, delta_round_off = false;
};

void ExpectWidth(const Accountant& acc, double lower, double upper, double target,
                 bool round_off, const std::string& what) {
  if (!round_off) {
    EXPECT_LE(upper - lower, target * lower) << what;
    EXPECT_EQ(RefinementWarning(acc), "") << what;
    return;
  }
  EXPECT_LE(upper - lower, 2 * target * lower) << what;
  EXPECT_NE(RefinementWarning(acc).find("stopped by round_off"), std::string::npos) << what;
}

// Epsilon at `delta`, then delta at the true epsilon of that delta (so both query
// directions land in 1e-5..1e-12).
void ExpectCertified(const Law& l, double delta, Expect expect = {}) {
  const std::string what =
      absl::StrFormat("sigma %g, q %g, %d steps, delta %g", l.sigma, l.q, l.steps, delta);
  const double eps = TrueEpsilon(l, delta);
  ASSERT_GT(eps, 0) << what;
  {
    std::unique_ptr<Accountant> acc = LedgerOf(l);
    absl::StatusOr<EpsilonBound> b = acc->EpsilonForDelta(delta);
    ASSERT_TRUE(b.ok()) << what << ": " << b.status();
    EXPECT_LE(b->lower, eps * (1 + kRefSlack)) << what;
    EXPECT_GE(b->upper, eps * (1 - kRefSlack)) << what;
    ExpectWidth(*acc, b->lower, b->upper, kEpsilonTarget, expect.epsilon_round_off, what);
  }
  {
    const double d = TrueDelta(l, eps);
    const std::string at = absl::StrFormat("%s, epsilon %.17g", what, eps);
    std::unique_ptr<Accountant> acc = LedgerOf(l);
    absl::StatusOr<DeltaBound> b = acc->DeltaForEpsilon(eps);
    ASSERT_TRUE(b.ok()) << at << ": " << b.status();
    EXPECT_LE(b->lower, d * (1 + kRefSlack)) << at;
    EXPECT_GE(b->upper, d * (1 - kRefSlack)) << at;
    ExpectWidth(*acc, b->lower, b->upper, kDeltaTarget, expect.delta_round_off, at);
  }
}

TEST(PldShortLedger, ReferenceValuesAreRight) {
  // Spot values: the Gaussian's at mu = 1 (Balle & Wang's curve), and one subsampled
  // step against core/plrv's closed form (pld_speed.md's case, 0.12354 at 1e-9).
  EXPECT_NEAR(TrueDelta({1, 1, 1}, 0), 2 * NormalCdf(0.5) - 1, 1e-15);
  EXPECT_NEAR(TrueEpsilon({1, 1e-3, 1}, 1e-9), 0.1235408, 1e-6);
  // Large q: the add direction's curve is the larger one near eps = 0.
  EXPECT_GT(TrueDelta({1, 0.5, 1}, 0.01), 0);
}

TEST(PldShortLedger, GaussianStepsMatchClosedForm) {
  for (double sigma : {0.5, 1.0, 4.0}) {
    for (int64_t k : {1, 2, 5, 10}) {
      for (double delta : {1e-5, 1e-9, 1e-12}) ExpectCertified({sigma, 1, k}, delta);
    }
  }
}

TEST(PldShortLedger, OneSubsampledGaussianStepMatchesExactCurve) {
  for (double sigma : {0.5, 1.0, 2.0, 4.0}) {
    for (double q : {1e-4, 1e-3, 1e-2, 0.1, 0.5}) {
      for (double delta : {1e-5, 1e-9, 1e-12}) {
        const Law l{sigma, q, 1};
        if (TrueDelta(l, 0) <= delta) continue;  // epsilon 0: nothing to bracket
        const bool floor = q == 1e-4 && delta == 1e-12;
        ExpectCertified(l, delta, {.epsilon_round_off = floor && sigma == 2,
                                   .delta_round_off = floor && (sigma == 1 || sigma == 2)});
      }
    }
  }
}

// 2-10 subsampled-Gaussian steps, per neighbouring direction, against
// scripts/pld_reference_values.py (numpy: connect-the-dots grids at h and h/2,
// Richardson-extrapolated; ref_acc its own error estimate), computed as
// richardson(lambda hh: sg_eps(sigma, q, k, direction, query, hh), h) (sg_delta for
// delta queries) at the h in the comment.
TEST(PldShortLedger, SubsampledGaussianStepsMatchFineGridReference) {
  struct Row {
    double sigma, q;
    int64_t steps;
    Direction direction;
    bool epsilon_query;
    double query, ref, ref_acc;
  };
  const std::vector<Row> rows = {
      {1.0, 1e-3, 2, Direction::kRemove, true, 1e-9, 0.1415113909, 2.7e-09},      // h 4e-5
      {1.0, 1e-3, 10, Direction::kRemove, true, 1e-9, 0.1904849812, 1.1e-08},     // 4e-5
      {0.5, 1e-3, 10, Direction::kRemove, true, 1e-12, 7.37160325, 1.3e-09},      // 4e-5
      {0.5, 1e-4, 2, Direction::kRemove, true, 1e-5, 0.00954702289, 8.2e-10},     // 1e-5
      {1.0, 1e-4, 10, Direction::kRemove, true, 1e-12, 0.04680707875, 2.8e-09},   // 1e-5
      {1.0, 1e-3, 10, Direction::kRemove, false, 0.2, 7.561884733e-10, 2.2e-16},  // 4e-5
      {0.5, 1e-3, 2, Direction::kRemove, false, 5.0, 2.037442626e-10, 6.3e-20},   // 4e-5
      {1.0, 1e-3, 10, Direction::kAdd, false, 0.005, 2.86192402e-05, 1e-09},      // 1e-5
  };
  for (const Row& r : rows) {
    const std::string what = absl::StrFormat(
        "sigma %g, q %g, %d steps, %s, %s(%g)", r.sigma, r.q, r.steps,
        DirectionName(r.direction), r.epsilon_query ? "epsilon" : "delta", r.query);
    const std::vector<MechanismEvent> ledger = {
        {*Mechanism::SubsampledGaussian(r.sigma, r.q), r.steps}};
    PldEngine engine({});
    absl::StatusOr<PldInterval> b = r.epsilon_query
                                        ? engine.Epsilon(ledger, r.direction, r.query)
                                        : engine.Delta(ledger, r.direction, r.query);
    ASSERT_TRUE(b.ok()) << what << ": " << b.status();
    EXPECT_LE(b->lower, r.ref + r.ref_acc) << what;
    EXPECT_GE(b->upper, r.ref - r.ref_acc) << what;
    const double target = r.epsilon_query ? kEpsilonTarget : kDeltaTarget;
    EXPECT_LE(b->upper - b->lower, target * b->lower) << what;
    EXPECT_EQ(b->stop, PldStop::kTargetMet) << what;
  }
}

// The add direction's losses are at most -log(1 - q) a step, so its epsilon is too:
// once another direction's lower end is above that, it is the whole answer (no grid).
TEST(PldShortLedger, DominatedAddDirectionStopsAtItsLossBound) {
  const std::vector<MechanismEvent> ledger = {{*Mechanism::SubsampledGaussian(1, 1e-3), 3}};
  const double bound = -3 * std::log1p(-1e-3);
  PldEngine engine({});
  absl::StatusOr<PldInterval> b = engine.Epsilon(ledger, Direction::kAdd, 1e-9, 0.1);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->lower, 0);
  EXPECT_GE(b->upper, bound);
  EXPECT_LE(b->upper, bound * (1 + 2e-9));
  EXPECT_EQ(b->fft_size, 0);  // no grid
  // Not dominated (another direction's lower end below the bound): computed.
  absl::StatusOr<PldInterval> c = engine.Epsilon(ledger, Direction::kAdd, 1e-9, 0.001);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_GT(c->fft_size, 0);
  EXPECT_GT(c->lower, 0);
  EXPECT_LE(c->upper, bound * (1 + 2e-9));
  // The accountant's answer is the remove direction's (the add one is dominated).
  std::unique_ptr<Accountant> acc = *CreatePldAccountant();
  ASSERT_TRUE(acc->Compose(ledger[0]).ok());
  absl::StatusOr<EpsilonBound> e = acc->EpsilonForDelta(1e-9);
  PldEngine remove({});
  absl::StatusOr<PldInterval> r = remove.Epsilon(ledger, Direction::kRemove, 1e-9);
  ASSERT_TRUE(e.ok() && r.ok());
  EXPECT_EQ(e->lower, r->lower);
  EXPECT_EQ(e->upper, r->upper);
}

}  // namespace
}  // namespace dpledger::core
