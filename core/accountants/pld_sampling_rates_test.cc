// The PLD accountant across sampling rates, step counts and deltas (issue 15): small
// q (1e-4, 1e-3), moderate q (0.01, 0.1), 1e2..1e4 steps, delta 1e-5..1e-12, in both
// query directions (epsilon(delta) and delta(epsilon)) and both neighbouring
// directions. References computed independently:
//  * subsampled Gaussians: scripts/pld_reference_values.py (numpy: connect-the-dots
//    grids at h = 4e-5 and 2e-5 in the output space, tilted FFT composition,
//    Richardson-extrapolated; ref_acc is its own error estimate |v(h/2) - v(h)| / 3,
//    and it reproduces spa.md 9.3's contour-integral value to 1e-11 relative);
//  * Gaussians: the closed form delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu
//    - mu/2), mu = sqrt(k) / sigma (Balle & Wang 2018, Thm 8), from the same script.
// Every certified interval must contain the reference (up to ref_acc) and meet the
// default precision target (issue 15: epsilon upper within 0.05% of the truth,
// delta upper within 1%). The 1e5-step
// case runs in bench/pld_bench.cc (BM_DpSgdEpsilonCold, BM_SmallQEpsilon).
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/accountants/pld_accountant.h"
#include "core/accountants/pld_engine.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

constexpr double kEpsilonTarget = 5e-4, kDeltaTarget = 0.01;  // PldOptions defaults

struct Row {
  double sigma, q;
  int64_t steps;
  Direction direction;
  bool epsilon_query;  // epsilon(query) if true, else delta(query)
  double query, ref, ref_acc;
};

void ExpectBrackets(const std::vector<MechanismEvent>& ledger, Direction direction,
                    bool epsilon_query, double query, double ref, double ref_acc,
                    const std::string& what) {
  PldEngine engine({});
  absl::StatusOr<PldInterval> b = epsilon_query ? engine.Epsilon(ledger, direction, query)
                                                : engine.Delta(ledger, direction, query);
  ASSERT_TRUE(b.ok()) << what << ": " << b.status();
  EXPECT_LE(b->lower, ref + ref_acc) << what;
  EXPECT_GE(b->upper, ref - ref_acc) << what;
  // upper - lower <= target * lower and lower <= ref: upper <= ref (1 + target).
  const double target = epsilon_query ? kEpsilonTarget : kDeltaTarget;
  EXPECT_LE(b->upper, (ref + ref_acc) * (1 + target)) << what;
  EXPECT_EQ(b->stop, PldStop::kTargetMet) << what;
}

TEST(PldSamplingRates, SubsampledGaussianMatchesFineGridReference) {
  // scripts/pld_reference_values.py, SG_CASES.
  const std::vector<Row> rows = {
      {1.0, 0.0001, 10000, Direction::kRemove, true, 1e-12, 0.1360107123, 1.3e-06},
      {1.0, 0.0001, 10000, Direction::kAdd, true, 1e-12, 0.0755558832, 1.1e-05},
      {1.0, 0.001, 1000, Direction::kRemove, false, 0.5, 2.058241215e-10, 2.2e-15},
      {1.0, 0.001, 1000, Direction::kAdd, false, 0.05, 0.00202935419, 1.7e-07},
      {1.0, 0.001, 10000, Direction::kRemove, true, 1e-09, 0.7662327511, 1.2e-05},
      {1.0, 0.001, 10000, Direction::kAdd, true, 1e-09, 0.6713639619, 1.6e-05},
      {1.0, 0.01, 100, Direction::kRemove, true, 1e-10, 2.162819903, 2.8e-08},
      {1.0, 0.01, 1000, Direction::kAdd, false, 1.5, 3.416314068e-06, 2.1e-11},
      {2.0, 0.1, 1000, Direction::kRemove, true, 1e-05, 8.279290614, 1.1e-07},
      {2.0, 0.1, 100, Direction::kAdd, false, 1.0, 0.006593128914, 6.2e-10},
  };
  for (const Row& r : rows) {
    const std::string what = absl::StrFormat(
        "sigma=%g q=%g k=%d %s %s(%g)", r.sigma, r.q, r.steps,
        r.direction == Direction::kRemove ? "remove" : "add",
        r.epsilon_query ? "epsilon" : "delta", r.query);
    ExpectBrackets({{*Mechanism::SubsampledGaussian(r.sigma, r.q), r.steps}}, r.direction,
                   r.epsilon_query, r.query, r.ref, r.ref_acc, what);
  }
}

// The knob at 1e-4 where the grid cap used to stop it (issue 15: 4M points gave a
// 1.5e-3 wide interval; the narrower window now reaches the target). Reference:
// scripts/pld_reference_values.py at h = 2e-5 and 1e-5, 1.5097140133e-4 +- 9e-12.
TEST(PldSamplingRates, PrecisionKnobReachesOneInTenThousandAtSmallQ) {
  PldOptions o;
  SetPldPrecision(1e-4, &o);
  PldEngine engine(o);
  const std::vector<MechanismEvent> ledger = {{*Mechanism::SubsampledGaussian(0.5, 1e-3), 1000}};
  absl::StatusOr<PldInterval> b = engine.Delta(ledger, Direction::kRemove, 2.0);
  ASSERT_TRUE(b.ok()) << b.status();
  const double ref = 1.5097140133e-4, acc = 1e-11;
  EXPECT_LE(b->lower, ref + acc);
  EXPECT_GE(b->upper, ref - acc);
  EXPECT_LE(b->upper - b->lower, 1e-4 * b->lower);
  EXPECT_EQ(b->stop, PldStop::kTargetMet);
}

TEST(PldSamplingRates, GaussianMatchesClosedForm) {
  struct GaussRow {
    double sigma;
    int64_t steps;
    bool epsilon_query;
    double query, exact;
  };
  // scripts/pld_reference_values.py (closed form, brentq to 1e-14 for epsilon).
  const std::vector<GaussRow> rows = {
      {70.0, 1200, true, 1e-05, 1.97028192913},
      {70.0, 1200, true, 1e-09, 2.87781868838},
      {70.0, 1200, true, 1e-12, 3.41171888379},
      {70.0, 1200, false, 1.0, 0.00639604264654},
      {70.0, 1200, false, 2.0, 7.77235694645e-06},
      {70.0, 1200, false, 4.0, 1.3489930875e-16},
      {10.0, 100, true, 1e-05, 4.37717809568},
      {10.0, 100, true, 1e-09, 6.17393504667},
      {10.0, 100, true, 1e-12, 7.23849442018},
      {10.0, 100, false, 1.0, 0.126936737507},
      {10.0, 100, false, 2.0, 0.0209236358211},
      {10.0, 100, false, 4.0, 4.71224120079e-05},
      {300.0, 100000, true, 1e-05, 4.65298453097},
      {300.0, 100000, true, 1e-09, 6.5443576114},
      {300.0, 100000, true, 1e-12, 7.66548102886},
      {300.0, 100000, false, 1.0, 0.146342831667},
      {300.0, 100000, false, 2.0, 0.02864466892},
      {300.0, 100000, false, 4.0, 0.000119627456113},
  };
  for (const GaussRow& r : rows) {
    const std::string what = absl::StrFormat("gaussian sigma=%g k=%d %s(%g)", r.sigma, r.steps,
                                             r.epsilon_query ? "epsilon" : "delta", r.query);
    ExpectBrackets({{*Mechanism::Gaussian(r.sigma), r.steps}}, Direction::kRemove,
                   r.epsilon_query, r.query, r.exact, 1e-12 * r.exact, what);
  }
}

}  // namespace
}  // namespace dpledger::core
