// The saddle-point accountant through the Accountant interface: both neighbouring
// directions, guarantees, closed forms and exact curves it must bracket, tiny
// deltas, ledger handling and bad input.
#include "core/accountants/spa_accountant.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/accountants/analytic_gaussian.h"
#include "core/accountants/spa_delta.h"
#include "core/accountants/spa_epsilon.h"
#include "core/accountants/spa_ledger_cgf.h"
#include "core/accountants/spa_mixture_estimate.h"
#include "core/plrv/plrv.h"
#include "core/util/test_support.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

std::unique_ptr<Accountant> Spa(const SpaOptions& options = {}) {
  absl::StatusOr<std::unique_ptr<Accountant>> a = CreateSpaAccountant(options);
  EXPECT_TRUE(a.ok());
  return std::move(*a);
}

Mechanism Gauss(double sigma) { return *Mechanism::Gaussian(sigma); }
Mechanism Sg(double sigma, double q) { return *Mechanism::SubsampledGaussian(sigma, q); }

TEST(SpaAccountant, IsNamedSpaAndStartsEmpty) {
  auto a = Spa();
  EXPECT_EQ(a->Name(), "spa");
  absl::StatusOr<EpsilonBound> e = a->EpsilonForDelta(1e-5);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->upper, 0);
}

TEST(SpaAccountant, GaussianCompositionMatchesClosedForm) {
  auto a = Spa();
  ASSERT_TRUE(a->Compose(Gauss(2), 30).ok());
  ASSERT_TRUE(a->Compose(Gauss(5), 100).ok());
  const double mu = std::sqrt(30 / 4.0 + 100 / 25.0);
  for (double eps : {0.5, 3.0, 12.0}) {
    absl::StatusOr<DeltaBound> d = a->DeltaForEpsilon(eps);
    ASSERT_TRUE(d.ok()) << d.status();
    const double exact = std::exp(GaussianLogDelta(mu, eps));
    EXPECT_EQ(d->guarantee, Guarantee::kCertified);
    EXPECT_NEAR(d->estimate, exact, 1e-12 * exact) << eps;
    EXPECT_LE(d->lower, exact);
    EXPECT_GE(d->upper, exact);
  }
  for (double delta : {1e-3, 1e-8, 1e-15, 1e-300}) {
    absl::StatusOr<EpsilonBound> e = a->EpsilonForDelta(delta);
    ASSERT_TRUE(e.ok()) << e.status();
    const EpsilonBracket exact = GaussianEpsilon(mu, delta);
    EXPECT_EQ(e->guarantee, Guarantee::kCertified);
    EXPECT_NEAR(e->estimate, exact.hi, 1e-9 * exact.hi) << delta;
    EXPECT_LE(e->lower, exact.lo);
    EXPECT_GE(e->upper, exact.hi);
  }
}

TEST(SpaAccountant, ReportsTheWorseOfBothDirections) {
  // The unconditioned estimates (the conditioned path is tested in spa_mixture_test.cc).
  auto a = Spa(SpaOptions{.conditioning = SpaConditioning::kOff});
  ASSERT_TRUE(a->Compose(Sg(1, 0.01), 1000).ok());
  SpaLedgerCgf remove(Direction::kRemove), add(Direction::kAdd);
  remove.SetLedger(a->events());
  add.SetLedger(a->events());
  for (double eps : {0.3, 1.0, 2.0}) {
    absl::StatusOr<DeltaBound> d = a->DeltaForEpsilon(eps);
    absl::StatusOr<SpaDeltaPoint> r = EvaluateSpaDelta(remove, eps);
    absl::StatusOr<SpaDeltaPoint> s = EvaluateSpaDelta(add, eps);
    ASSERT_TRUE(d.ok() && r.ok() && s.ok());
    EXPECT_DOUBLE_EQ(d->upper, std::exp(std::max(r->log_upper, s->log_upper)));
    EXPECT_DOUBLE_EQ(d->lower, std::exp(std::max(r->log_lower, s->log_lower)));
    // The two directions really differ for subsampled mechanisms.
    EXPECT_GT(std::fabs(r->log_clt - s->log_clt), 1e-3);
  }
  absl::StatusOr<EpsilonBound> e = a->EpsilonForDelta(1e-5);
  absl::StatusOr<SpaEpsilon> er = SpaEpsilonForDelta(remove, 1e-5, SpaEstimator::kClt);
  absl::StatusOr<SpaEpsilon> ea = SpaEpsilonForDelta(add, 1e-5, SpaEstimator::kClt);
  ASSERT_TRUE(e.ok() && er.ok() && ea.ok());
  EXPECT_EQ(e->upper, std::max(er->upper, ea->upper));
  EXPECT_EQ(e->estimate, std::max(er->estimate, ea->estimate));
  // spa.md 9.3: k=1000, delta=1e-5, true eps (remove ordering) 1.828236667.
  EXPECT_LE(e->lower, 1.828236667);
  EXPECT_GE(e->upper, 1.828236667);
}

TEST(SpaAccountant, SingleStepIntervalsContainTheExactCurve) {
  // One step: the exact delta is Plrv::LogDeltaForEpsilon, max over directions.
  const std::vector<Mechanism> mechs = {Sg(1, 0.01), Sg(0.7, 0.2), Sg(3, 0.5),
                                        *Mechanism::Laplace(1.5),
                                        *Mechanism::SubsampledLaplace(0.5, 0.1)};
  for (const Mechanism& m : mechs) {
    auto a = Spa();
    ASSERT_TRUE(a->Compose(m, 1).ok());
    for (double eps : {0.05, 0.3, 1.0, 2.5}) {
      const double exact =
          std::exp(std::max(MakePlrv(m, Direction::kRemove)->LogDeltaForEpsilon(eps),
                            MakePlrv(m, Direction::kAdd)->LogDeltaForEpsilon(eps)));
      absl::StatusOr<DeltaBound> d = a->DeltaForEpsilon(eps);
      ASSERT_TRUE(d.ok()) << d.status();
      EXPECT_LE(d->lower, exact) << m.ToSpec() << " eps=" << eps;
      EXPECT_GE(d->upper, exact) << m.ToSpec() << " eps=" << eps;
      EXPECT_LE(d->lower, d->estimate);
      EXPECT_LE(d->estimate, d->upper);
    }
  }
}

TEST(SpaAccountant, RandomizedResponseCompositionIsBracketed) {
  // k-fold randomized response (pure DP eps0): the loss is eps0 (k - 2j) with
  // binomial weights, so delta(eps) = sum_j P(j) (1 - e^{eps - L_j})^+ exactly.
  const double eps0 = 0.2;
  const int k = 60;
  auto a = Spa();
  ASSERT_TRUE(a->Compose(*Mechanism::PureDp(eps0), k).ok());
  const double p = 1 / (1 + std::exp(-eps0));
  for (double eps : {1.0, 3.0, 6.0}) {
    double exact = 0;
    for (int j = 0; j <= k; ++j) {
      const double loss = eps0 * (k - 2 * j);
      if (loss <= eps) continue;
      const double log_pj = std::lgamma(k + 1.0) - std::lgamma(j + 1.0) - std::lgamma(k - j + 1.0) +
                            (k - j) * std::log(p) + j * std::log1p(-p);
      exact += std::exp(log_pj) * -std::expm1(eps - loss);
    }
    absl::StatusOr<DeltaBound> d = a->DeltaForEpsilon(eps);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_LE(d->lower, exact) << eps;
    EXPECT_GE(d->upper, exact) << eps;
  }
  // Past the largest loss k eps0 = 12, delta is exactly 0.
  absl::StatusOr<DeltaBound> zero = a->DeltaForEpsilon(12.5);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->upper, 0);
  EXPECT_EQ(zero->guarantee, Guarantee::kCertified);
}

TEST(SpaAccountant, LaplaceEpsilonContainsExactSingleStepInverse) {
  // One Laplace step with d = 1: delta(eps) = 1 - e^{(eps - 1)/2}, so
  // eps(delta) = 1 + 2 log(1 - delta); eps(delta) <= n d always.
  auto a = Spa();
  ASSERT_TRUE(a->Compose(*Mechanism::Laplace(1.0), 1).ok());
  for (double delta : {0.1, 1e-3, 1e-12}) {
    absl::StatusOr<EpsilonBound> e = a->EpsilonForDelta(delta);
    ASSERT_TRUE(e.ok()) << e.status();
    const double exact = 1 + 2 * std::log1p(-delta);
    EXPECT_LE(e->lower, exact) << delta;
    EXPECT_GE(e->upper, exact) << delta;
    EXPECT_LE(e->upper, 1 + 1e-9) << delta;
  }
}

TEST(SpaAccountant, TinyDeltasWorkInLogSpace) {
  auto a = Spa();
  ASSERT_TRUE(a->Compose(Sg(1, 1e-3), 100000).ok());
  double previous = 0;
  for (double delta : {1e-5, 1e-15, 1e-100, 1e-300}) {
    absl::StatusOr<EpsilonBound> e = a->EpsilonForDelta(delta);
    ASSERT_TRUE(e.ok()) << delta << " " << e.status();
    EXPECT_EQ(e->guarantee, Guarantee::kCertified);
    EXPECT_LE(e->lower, e->estimate);
    EXPECT_LE(e->estimate, e->upper);
    EXPECT_GT(e->estimate, previous) << delta;
    previous = e->estimate;
    // The certified upper end really certifies: delta_upper(eps_upper) <= delta.
    absl::StatusOr<DeltaBound> back = a->DeltaForEpsilon(e->upper);
    ASSERT_TRUE(back.ok()) << delta << " " << back.status();
    EXPECT_LE(back->upper, delta * (1 + 1e-6)) << delta;
  }
}

TEST(SpaAccountant, SmallSamplingRateIntervalsContainPldTruth) {
  // Regression for the small-q report (sigma = 1, q = 1e-3, 1e4 steps, delta = 1e-9:
  // estimate 1.264 vs truth 0.766). The estimate there is SP-CLT computed correctly
  // (spa_delta_test.cc, spa_epsilon_test.cc check it against 32-digit references);
  // SP-CLT itself is far off because the tilted law is a rare-jump mixture, not near
  // Gaussian. What must hold everywhere is the certified interval: it contains the
  // truth. Truth brackets: the PLD accountant's certified [lower, upper] for the
  // same ledger (dpledger account --accountant pld, commit 4857685), rounded
  // outwards to 7 digits; at (1e-3, 1e-9, 1e4), (1e-3, 1e-9, 1e5), (1e-4, 1e-9, 1e5)
  // and (1e-2, 1e-5, 1e5) both ends were confirmed by the contour integral of
  // spa.md 2.3 (delta above / below the target at the lower / upper end).
  struct Row {
    double q, delta;
    int64_t steps;
    double truth_lower, truth_upper;
    double width;  // (upper - lower) / truth_lower of the certified interval, measured
  };
  const std::vector<Row> rows = {
      {1e-4, 1e-5, 100, 0.003461532, 0.003474037, 0.5105},
      {1e-4, 1e-5, 1000, 0.01115199, 0.01118882, 0.3093},
      {1e-4, 1e-5, 10000, 0.03727059, 0.0380611, 0.1946},
      {1e-4, 1e-5, 100000, 0.1315711, 0.1318846, 0.3253},
      {1e-4, 1e-9, 100, 0.02100256, 0.02101339, 0.0439},
      {1e-4, 1e-9, 1000, 0.03355784, 0.033652, 0.1035},
      {1e-4, 1e-9, 10000, 0.0693779, 0.06972309, 0.1305},
      {1e-4, 1e-9, 100000, 0.217705, 0.2180324, 0.2170},
      {1e-4, 1e-12, 100, 0.06726524, 0.06746259, 0.0101},
      {1e-4, 1e-12, 1000, 0.09531941, 0.09542898, 0.0261},
      {1e-4, 1e-12, 10000, 0.1356804, 0.136026, 0.0625},
      {1e-4, 1e-12, 100000, 0.2678435, 0.2681793, 0.1940},
      {1e-3, 1e-5, 100, 0.05510206, 0.05518095, 0.2846},
      {1e-3, 1e-5, 1000, 0.1483688, 0.1489852, 0.1525},
      {1e-3, 1e-5, 10000, 0.4750974, 0.4761046, 0.1083},
      {1e-3, 1e-5, 100000, 1.636783, 1.637276, 0.0318},
      {1e-3, 1e-9, 100, 0.2808721, 0.2812394, 0.0294},
      {1e-3, 1e-9, 1000, 0.4110597, 0.4111487, 0.0623},
      {1e-3, 1e-9, 10000, 0.7653824, 0.7666718, 0.0716},
      {1e-3, 1e-9, 100000, 2.422473, 2.42778, 0.1177},
      {1e-3, 1e-12, 100, 0.6891592, 0.6910617, 0.0088},
      {1e-3, 1e-12, 1000, 0.8803819, 0.8838352, 0.0231},
      {1e-3, 1e-12, 10000, 1.180218, 1.18466, 0.0551},
      {1e-3, 1e-12, 100000, 2.890023, 2.896187, 0.1428},
      {1e-2, 1e-5, 100, 0.7156766, 0.7184473, 0.1453},
      {1e-2, 1e-5, 1000, 1.825263, 1.828923, 0.0867},
      {1e-2, 1e-5, 10000, 6.182335, 6.190891, 0.0485},
      {1e-2, 1e-5, 100000, 25.54544, 25.58917, 0.0095},
      {1e-2, 1e-9, 100, 1.842169, 1.844614, 0.0487},
      {1e-2, 1e-9, 1000, 2.988396, 2.990309, 0.0553},
      {1e-2, 1e-9, 10000, 8.758628, 8.769454, 0.0447},
      {1e-2, 1e-9, 100000, 33.01798, 33.047, 0.0072},
      {1e-2, 1e-12, 100, 2.790421, 2.792868, 0.0323},
      {1e-2, 1e-12, 1000, 3.911336, 3.91498, 0.0423},
      {1e-2, 1e-12, 10000, 10.33909, 10.35117, 0.0408},
      {1e-2, 1e-12, 100000, 37.50489, 37.56204, 0.0064},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(absl::StrFormat("q=%g delta=%g steps=%d", r.q, r.delta, r.steps));
    auto a = Spa();
    ASSERT_TRUE(a->Compose(Sg(1, r.q), r.steps).ok());
    absl::StatusOr<EpsilonBound> e = a->EpsilonForDelta(r.delta);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(e->guarantee, Guarantee::kCertified);
    EXPECT_LE(e->lower, r.truth_lower);
    EXPECT_GE(e->upper, r.truth_upper);
    EXPECT_LE(e->lower, e->estimate);
    EXPECT_LE(e->estimate, e->upper);
    // Issue 15 item 2: the estimate (conditioned where k q <= 100) within 1% of the
    // truth bracket. Regression: q = 1e-4, delta = 1e-5, 100 and 1000 steps were
    // 1.5% high (jump masses at cell midpoints, h 7% of eps) and q = 0.01, delta =
    // 1e-12, 1e4 steps 1.3% low (a tilt that dropped mass that mattered).
    const double tolerance = 0.01;
    EXPECT_GE(e->estimate, (1 - tolerance) * r.truth_lower);
    EXPECT_LE(e->estimate, (1 + tolerance) * r.truth_upper);
    // Issue 15 item 2, certified: the mixture's proven interval, intersected with
    // the unconditioned one, is within 5% of its measured width (a loosening
    // fails), and strictly narrower below k q = 100 (at k q = 100 the
    // unconditioned interval is as tight or tighter and is what answers).
    std::unique_ptr<Accountant> off =
        *CreateSpaAccountant(SpaOptions{.conditioning = SpaConditioning::kOff});
    ASSERT_TRUE(off->Compose(Sg(1, r.q), r.steps).ok());
    absl::StatusOr<EpsilonBound> u = off->EpsilonForDelta(r.delta);
    ASSERT_TRUE(u.ok());
    const double width = (e->upper - e->lower) / r.truth_lower;
    std::printf("q=%g delta=%g steps=%d: [%.7g, %.7g] width %.4f, unconditioned [%.7g, %.7g]\n",
                r.q, r.delta, static_cast<int>(r.steps), e->lower, e->upper, width, u->lower,
                u->upper);
    EXPECT_LE(width, 1.05 * r.width);
    if (r.q * static_cast<double>(r.steps) < kMaxConditionedSampledSteps) {
      EXPECT_LT(e->upper - e->lower, 0.5 * (u->upper - u->lower));
    }
  }
}

// Where err_SP exceeds SP-CLT the answer says its estimate is unreliable; in the
// paper's regime (q = 0.01) it does not.
TEST(SpaAccountant, DiagnosticsWarnWhereTheErrorBoundExceedsTheEstimate) {
  auto warned = [](const Accountant& acc) {
    for (const AnswerDiagnostic& d : acc.LastDiagnostics()) {
      if (d.name == "estimate_warning") return true;
    }
    return false;
  };
  auto ratio = [](const Accountant& acc) {
    for (const AnswerDiagnostic& d : acc.LastDiagnostics()) {
      if (d.name == "remove_err_sp_over_sp_clt") return std::get<double>(d.value);
    }
    return -1.0;
  };
  // The unconditioned estimate warns; the conditioned one (the default) does not.
  std::unique_ptr<Accountant> small_q =
      *CreateSpaAccountant(SpaOptions{.conditioning = SpaConditioning::kOff});
  std::unique_ptr<Accountant> conditioned = *CreateSpaAccountant();
  ASSERT_TRUE(conditioned->Compose(Sg(1, 1e-3), 10000).ok());
  ASSERT_TRUE(conditioned->EpsilonForDelta(1e-9).ok());
  EXPECT_FALSE(warned(*conditioned));
  ASSERT_TRUE(small_q->Compose(Sg(1, 1e-3), 10000).ok());
  ASSERT_TRUE(small_q->EpsilonForDelta(1e-9).ok());  // estimate 1.264, truth 0.766
  EXPECT_TRUE(warned(*small_q));
  EXPECT_GT(ratio(*small_q), 1);
  ASSERT_TRUE(small_q->DeltaForEpsilon(0.766).ok());  // err_SP 4.26e-5 vs SP-CLT 5.53e-7
  EXPECT_NEAR(ratio(*small_q), 4.261e-5 / 5.52763087e-7, 0.01 * 4.261e-5 / 5.52763087e-7);
  EXPECT_TRUE(warned(*small_q));

  std::unique_ptr<Accountant> paper = *CreateSpaAccountant();
  ASSERT_TRUE(paper->Compose(Sg(2, 0.01), 1000).ok());
  ASSERT_TRUE(paper->EpsilonForDelta(1e-5).ok());
  EXPECT_FALSE(warned(*paper));
  EXPECT_GT(ratio(*paper), 0);
  EXPECT_LT(ratio(*paper), 1);
}

TEST(SpaAccountant, HeterogeneousLedgerContainsSpecTruth) {
  // spa.md 9.6 H2 = 50 x Laplace(d=0.1) + 10 x Gaussian(sigma=5) (symmetric).
  auto a = Spa();
  ASSERT_TRUE(a->Compose(*Mechanism::Laplace(10.0), 50).ok());
  ASSERT_TRUE(a->Compose(Gauss(5), 10).ok());
  absl::StatusOr<DeltaBound> d = a->DeltaForEpsilon(2);
  ASSERT_TRUE(d.ok());
  EXPECT_LE(d->lower, 0.0138677020147);
  EXPECT_GE(d->upper, 0.0138677020147);
  EXPECT_NEAR(d->estimate, 0.0138960095906, 1e-9 * 0.0138960095906);  // SP-CLT
}

TEST(SpaAccountant, EstimatorOptionChangesOnlyTheEstimate) {
  // Spec values of the unconditioned estimators (spa.md 9.4).
  auto clt = Spa(SpaOptions{.conditioning = SpaConditioning::kOff});
  auto msd1 = Spa(SpaOptions{.estimator = SpaEstimator::kMsd1,
                             .conditioning = SpaConditioning::kOff});
  auto ew2 = Spa(SpaOptions{.estimator = SpaEstimator::kEw2,
                            .conditioning = SpaConditioning::kOff});
  for (Accountant* a : {clt.get(), msd1.get(), ew2.get()}) {
    ASSERT_TRUE(a->Compose(Sg(2, 0.01), 3000).ok());
  }
  absl::StatusOr<DeltaBound> c = clt->DeltaForEpsilon(1);
  absl::StatusOr<DeltaBound> m = msd1->DeltaForEpsilon(1);
  absl::StatusOr<DeltaBound> w = ew2->DeltaForEpsilon(1);
  ASSERT_TRUE(c.ok() && m.ok() && w.ok());
  EXPECT_EQ(c->upper, m->upper);
  EXPECT_EQ(c->lower, m->lower);
  EXPECT_EQ(c->upper, w->upper);
  EXPECT_EQ(c->lower, w->lower);
  // spa.md 9.4, eps = 1 (the add direction is smaller here, so these are remove's).
  EXPECT_NEAR(c->estimate, 4.64579952629e-5, 1e-9 * 4.64579952629e-5);
  EXPECT_NEAR(m->estimate, 4.65106339866e-5, 1e-9 * 4.65106339866e-5);
  EXPECT_NEAR(w->estimate, 4.64853128835e-5, 1e-9 * 4.64853128835e-5);
}

TEST(SpaAccountant, CountOnlyScalesAndSplitLedgersAgree) {
  // One event of 1e6 steps equals the same steps interleaved with another
  // mechanism in many events (grouped by distinct mechanism).
  auto one = Spa();
  auto split = Spa();
  ASSERT_TRUE(one->Compose(Sg(1, 1e-3), 1000000).ok());
  ASSERT_TRUE(one->Compose(Gauss(50), 100).ok());
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(split->Compose(Sg(1, 1e-3), 10000).ok());
    ASSERT_TRUE(split->Compose(Gauss(50), 1).ok());
  }
  absl::StatusOr<EpsilonBound> a = one->EpsilonForDelta(1e-6);
  absl::StatusOr<EpsilonBound> b = split->EpsilonForDelta(1e-6);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NEAR(a->upper, b->upper, 1e-12 * a->upper);
  EXPECT_NEAR(a->estimate, b->estimate, 1e-12 * a->estimate);
  // A very long ledger still answers (cost does not grow with the count).
  auto huge = Spa();
  ASSERT_TRUE(huge->Compose(Sg(1, 1e-3), int64_t{1} << 40).ok());
  absl::StatusOr<EpsilonBound> h = huge->EpsilonForDelta(1e-6);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_LE(h->lower, h->upper);
}

TEST(SpaAccountant, CloneIsIndependent) {
  auto a = Spa();
  ASSERT_TRUE(a->Compose(Sg(1, 0.01), 500).ok());
  absl::StatusOr<EpsilonBound> before = a->EpsilonForDelta(1e-5);
  std::unique_ptr<Accountant> b = a->Clone();
  ASSERT_TRUE(b->Compose(Sg(1, 0.01), 500).ok());
  absl::StatusOr<EpsilonBound> after_a = a->EpsilonForDelta(1e-5);
  absl::StatusOr<EpsilonBound> after_b = b->EpsilonForDelta(1e-5);
  ASSERT_TRUE(before.ok() && after_a.ok() && after_b.ok());
  EXPECT_EQ(before->upper, after_a->upper);
  EXPECT_GT(after_b->upper, after_a->upper);
}

TEST(SpaAccountant, RejectsBadInputNamingTheField) {
  auto a = Spa();
  ASSERT_TRUE(a->Compose(Sg(1, 0.01), 10).ok());
  EXPECT_THAT(a->EpsilonForDelta(0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("delta")));
  EXPECT_THAT(a->EpsilonForDelta(1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("delta")));
  EXPECT_THAT(a->EpsilonForDelta(std::nan("")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("delta")));
  EXPECT_THAT(a->DeltaForEpsilon(-1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("epsilon")));
  EXPECT_THAT(a->Compose(Sg(1, 0.01), 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("count")));
  // Approximate DP with delta > 0 has an infinite CGF: refused, ledger unchanged.
  EXPECT_THAT(a->Compose(*Mechanism::ApproxDp(1, 1e-6), 1),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("approx_dp")));
  EXPECT_EQ(a->num_steps(), 10);
  // ... but delta = 0 is pure DP and fine.
  EXPECT_TRUE(a->Compose(*Mechanism::ApproxDp(0.5, 0), 1).ok());
}

}  // namespace
}  // namespace dpledger::core
