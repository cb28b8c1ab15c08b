// The PLD accountant against the numerical references of the specs: composed
// Poisson-subsampled Gaussian (mc-evr.md 9.4), the SPA truth tables (spa.md 9.3,
// 9.4) and Laplace / heterogeneous ledgers (spa.md 9.6). Every certified interval
// must contain the reference (up to the reference's own stated accuracy) and the
// upper bound must be within the 0.5% accuracy target.
#include <cmath>
#include <string>
#include <vector>

#include "core/accountants/pld_accountant.h"
#include "core/accountants/pld_engine.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

MechanismEvent Sg(double sigma, double q, int64_t count) {
  return {*Mechanism::SubsampledGaussian(sigma, q), count};
}
MechanismEvent Lap(double d, int64_t count) { return {*Mechanism::Laplace(1 / d), count}; }
MechanismEvent Gauss(double sigma, int64_t count) { return {*Mechanism::Gaussian(sigma), count}; }

// Target of PldOptions::relative_accuracy on the epsilon interval (default 5e-4:
// upper within 0.05% of the truth, issue 15).
constexpr double kEpsilonAccuracy = 5e-4;
// ... and of delta_relative_accuracy on the delta interval (upper within 1%).
constexpr double kDeltaAccuracy = 0.01;

struct DeltaRow {
  std::vector<MechanismEvent> ledger;
  Direction direction;
  double epsilon;
  double reference;
  double ref_tolerance;  // relative accuracy of the reference itself (from the spec)
  bool tight = true;     // also check the upper bound against the accuracy target
};

void ExpectDeltaBrackets(const DeltaRow& row) {
  PldEngine engine({});
  absl::StatusOr<PldInterval> b = engine.Delta(row.ledger, row.direction, row.epsilon);
  ASSERT_TRUE(b.ok()) << b.status();
  const double r = row.reference;
  EXPECT_LE(b->lower, r * (1 + row.ref_tolerance)) << "eps=" << row.epsilon;
  EXPECT_GE(b->upper, r * (1 - row.ref_tolerance)) << "eps=" << row.epsilon;
  // Tightness: the default delta target (issue 15: upper within 1% of the truth).
  if (!row.tight) return;
  EXPECT_LE(b->upper, r * (1 + row.ref_tolerance) * (1 + kDeltaAccuracy))
      << "eps=" << row.epsilon << " upper=" << b->upper;
}

// mc-evr.md 9.4, delta(eps), remove direction: "ref" with tolerances 1e-4 (k <= 100,
// q = 1e-3), 5e-4 (k = 1000), 3e-3 (q = 1e-5).
TEST(PldReference, ComposedSubsampledGaussianMatchesMcEvrTable) {
  const std::vector<DeltaRow> rows = {
      {{Sg(0.6, 1e-3, 10)}, Direction::kRemove, 0.5, 3.665078e-6, 1e-4},
      {{Sg(0.6, 1e-3, 10)}, Direction::kRemove, 1.0, 4.041094e-7, 1e-4},
      {{Sg(0.6, 1e-3, 10)}, Direction::kRemove, 2.0, 1.253420e-8, 1e-4},
      {{Sg(0.6, 1e-3, 100)}, Direction::kRemove, 0.0, 1.263598e-2, 1e-4},
      {{Sg(0.6, 1e-3, 100)}, Direction::kRemove, 0.05, 3.121061e-3, 1e-4},
      {{Sg(0.6, 1e-3, 100)}, Direction::kRemove, 1.0, 4.105495e-6, 1e-4},
      {{Sg(0.6, 1e-3, 100)}, Direction::kRemove, 2.0, 1.268062e-7, 1e-4},
      {{Sg(0.6, 1e-3, 1000)}, Direction::kRemove, 1.5, 7.706069e-6, 5e-4},
      {{Sg(0.5, 1e-3, 1000)}, Direction::kRemove, 2.0, 1.509960e-4, 5e-4},
      // q = 1e-5 (outside the DP-SGD target range): about one sampled step in 1000
      // runs, so delta comes from a deep valley of the tilted law and FFT round-off
      // limits the interval to about [0.7, 1.3] x delta; bracket only.
      {{Sg(0.5, 1e-5, 100)}, Direction::kRemove, 1.0, 6.781877e-11, 3e-3, false},
  };
  for (const DeltaRow& row : rows) ExpectDeltaBrackets(row);
}

// mc-evr.md 9.4, "remove vs add, composed" (h = 2e-5 references, ~1e-5 accurate).
TEST(PldReference, BothDirectionsMatchMcEvrTable) {
  const double eps[] = {0, 0.5, 1, 2, 3};
  const double rem[] = {0.5682824, 0.4701968, 0.3752935, 0.2142024, 0.1057136};
  const double add[] = {0.5682824, 0.4450937, 0.3197408, 0.1146268, 0.01939917};
  for (int i = 0; i < 5; ++i) {
    ExpectDeltaBrackets({{Sg(1, 0.5, 10)}, Direction::kRemove, eps[i], rem[i], 1e-5});
    ExpectDeltaBrackets({{Sg(1, 0.5, 10)}, Direction::kAdd, eps[i], add[i], 1e-5});
  }
  ExpectDeltaBrackets({{Sg(0.8, 0.2, 50)}, Direction::kAdd, 2, 0.2681879, 1e-5});
  ExpectDeltaBrackets({{Sg(2, 0.9, 20)}, Direction::kAdd, 1, 0.5087723, 1e-5});
  // Add direction, sigma = 0.6, q = 1e-3, k = 100: 7.33083e-3 at eps = 0.01 and
  // exactly 0 from eps = 100 * -log(1 - 1e-3).
  ExpectDeltaBrackets({{Sg(0.6, 1e-3, 100)}, Direction::kAdd, 0.01, 7.33083e-3, 1e-4});
  PldEngine engine({});
  const std::vector<MechanismEvent> ledger = {Sg(0.6, 1e-3, 100)};
  absl::StatusOr<PldInterval> zero = engine.Delta(ledger, Direction::kAdd, 0.10006);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->upper, 0);
}

// mc-evr.md 9.4, eps(delta): eps_ref within 1.3e-6 (sigma = 1 rows), 1e-4 (sigma =
// 0.5, q = 1e-3), 2e-4 (q = 1e-5, whose ref is h-limited).
TEST(PldReference, EpsilonForDeltaMatchesMcEvrTable) {
  struct Row {
    MechanismEvent event;
    double delta, eps_ref, abs_tol;
  };
  const std::vector<Row> rows = {
      {Sg(1.0, 1e-3, 100), 1e-9, 0.2812200, 2e-6},
      {Sg(1.0, 1e-3, 1000), 1e-9, 0.4111141, 2e-6},
      {Sg(0.5, 1e-3, 1000), 1e-5, 3.238953, 1e-4},
      {Sg(2.0, 1e-2, 1000), 1e-5, 0.6220303, 2e-6},
  };
  for (const Row& row : rows) {
    absl::StatusOr<std::unique_ptr<Accountant>> acc = CreatePldAccountant();
    ASSERT_TRUE(acc.ok());
    ASSERT_TRUE((*acc)->Compose(row.event).ok());
    absl::StatusOr<EpsilonBound> b = (*acc)->EpsilonForDelta(row.delta);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->guarantee, Guarantee::kCertified);
    EXPECT_LE(b->lower, row.eps_ref + row.abs_tol) << row.event.mechanism.ToSpec();
    EXPECT_GE(b->upper, row.eps_ref - row.abs_tol) << row.event.mechanism.ToSpec();
    EXPECT_LE(b->upper, row.eps_ref * (1 + kEpsilonAccuracy)) << row.event.mechanism.ToSpec();
  }
}

// spa.md 9.3 / 9.4: q = 0.01 truth by contour integral (1e-12 relative).
TEST(PldReference, SubsampledGaussianMatchesSpaTruth) {
  const std::vector<DeltaRow> rows = {
      {{Sg(1, 0.01, 100)}, Direction::kRemove, 0.5, 1.27498130988e-4, 1e-9},
      {{Sg(1, 0.01, 100)}, Direction::kRemove, 1, 6.67139891555e-7, 1e-9},
      {{Sg(1, 0.01, 1000)}, Direction::kRemove, 1, 2.61242057863e-3, 1e-9},
      {{Sg(1, 0.01, 1000)}, Direction::kRemove, 2, 2.66557192476e-6, 1e-9},
      {{Sg(1, 0.01, 10000)}, Direction::kRemove, 4, 2.85662868831e-3, 1e-9},
      {{Sg(2, 0.01, 3000)}, Direction::kRemove, 1, 4.64853066235e-5, 1e-9},
      {{Sg(2, 0.01, 3000)}, Direction::kRemove, 2, 1.95575720572e-12, 1e-9},
      {{Sg(2, 0.01, 3000)}, Direction::kRemove, 3, 9.45180165423e-24, 1e-9},
  };
  for (const DeltaRow& row : rows) ExpectDeltaBrackets(row);
}

// spa.md 9.3 / 9.4 eps(delta), including delta = 1e-15 (both directions composed).
TEST(PldReference, EpsilonDownToDelta1e15MatchesSpaTruth) {
  struct Row {
    MechanismEvent event;
    double delta, eps_true;
  };
  const std::vector<Row> rows = {
      {Sg(1, 0.01, 1000), 1e-5, 1.828236667},
      {Sg(2, 0.01, 300), 1e-5, 0.3313520174},
      {Sg(2, 0.01, 1500), 1e-15, 1.65535347172},
      {Sg(2, 0.01, 4500), 1e-15, 2.85146362350},
  };
  for (const Row& row : rows) {
    absl::StatusOr<std::unique_ptr<Accountant>> acc = CreatePldAccountant();
    ASSERT_TRUE(acc.ok());
    ASSERT_TRUE((*acc)->Compose(row.event).ok());
    absl::StatusOr<EpsilonBound> b = (*acc)->EpsilonForDelta(row.delta);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_LE(b->lower, row.eps_true);
    EXPECT_GE(b->upper, row.eps_true);
    EXPECT_LE(b->upper, row.eps_true * (1 + kEpsilonAccuracy));
  }
}

// spa.md 9.6: Laplace compositions (exact truth) and heterogeneous ledgers H1, H2.
TEST(PldReference, LaplaceAndHeterogeneousMatchSpaTruth) {
  const std::vector<MechanismEvent> h1 = {Sg(1, 0.01, 500), Sg(2, 0.02, 1000), Gauss(10, 20)};
  const std::vector<MechanismEvent> h2 = {Lap(0.1, 50), Gauss(5, 10)};
  const std::vector<DeltaRow> rows = {
      // spa.md 9.6 lists 0.363244433683 and 0.0991426826512 for d = 0.5, n = 20; a
      // fixed-seed Monte Carlo of the same pair (2e7 and 8e6 draws of
      // sum_i (|o_i - 1| - |o_i|) d, o_i ~ Laplace(0, 1/d)) gives 0.361073 +- 0.000088
      // and 0.097185 +- 0.000084, 25 standard errors from the spec and consistent
      // with this accountant, so the spec rows are taken to be wrong (reported). The
      // test uses the Monte Carlo values with 5 standard errors as the tolerance.
      {{Lap(0.5, 20)}, Direction::kRemove, 2, 0.361073, 5 * 0.000088 / 0.361073},
      {{Lap(0.5, 20)}, Direction::kRemove, 4, 0.097185, 5 * 0.000084 / 0.097185},
      {{Lap(0.2, 60)}, Direction::kRemove, 3, 0.0447463106275, 1e-9},
      {{Lap(0.1, 100)}, Direction::kRemove, 1.5, 0.0525922175663, 1e-9},
      {h1, Direction::kRemove, 1, 0.0247277388008, 1e-9},
      {h1, Direction::kRemove, 2, 4.09694823861e-4, 1e-9},
      {h2, Direction::kRemove, 1, 0.106361843376, 1e-9},
      {h2, Direction::kRemove, 2, 0.0138677020147, 1e-9},
  };
  for (const DeltaRow& row : rows) ExpectDeltaBrackets(row);
}

// Issue 2 audit: rare sampled steps (q = 1e-4) at tiny delta, where delta sits in a
// deep valley of every tilted law. References: an independent uncertified FFT at
// h = 1e-5 and 5e-6, Richardson-extrapolated (second order); abs_tol covers the
// spread between first- and second-order extrapolation.
TEST(PldReference, RareSampledStepsAtTinyDeltaAreTight) {
  struct Row {
    MechanismEvent event;
    double delta, eps_ref, abs_tol;
  };
  const std::vector<Row> rows = {
      {Sg(1, 1e-4, 100000), 1e-8, 0.199351, 3e-5},
      {Sg(1, 1e-4, 1000), 1e-12, 0.0954180, 1e-6},
      {Sg(1, 1e-4, 100000), 1e-12, 0.268159, 3e-5},
      {Sg(2, 1e-3, 1000), 1e-12, 0.110158, 3e-6},
      {Sg(2, 1e-4, 1000), 1e-12, 0.0103143, 1.4e-5},
      {Sg(4, 1e-4, 1000), 1e-12, 0.0046585, 1.5e-5},
  };
  for (const Row& row : rows) {
    absl::StatusOr<std::unique_ptr<Accountant>> acc = CreatePldAccountant();
    ASSERT_TRUE(acc.ok());
    ASSERT_TRUE((*acc)->Compose(row.event).ok());
    absl::StatusOr<EpsilonBound> b = (*acc)->EpsilonForDelta(row.delta);
    ASSERT_TRUE(b.ok()) << b.status();
    const std::string what = row.event.mechanism.ToSpec() + " delta=" + std::to_string(row.delta);
    EXPECT_LE(b->lower, row.eps_ref + row.abs_tol) << what;
    EXPECT_GE(b->upper, row.eps_ref - row.abs_tol) << what;
    EXPECT_LE(b->upper, (row.eps_ref + row.abs_tol) * (1 + kEpsilonAccuracy)) << what;
  }
}

}  // namespace
}  // namespace dpledger::core
