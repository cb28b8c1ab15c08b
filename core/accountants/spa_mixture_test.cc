// Issue 15 item 2: the conditioned mixture's estimates against PLD references.
// References: `dpledger account --accountant pld --pld-precision 1e-4 --epsilon E
// --step subsampled_gaussian:sigma=S,q=Q,count=K` (PLD accountant of this repo at
// commit 3fda708), certified relative width below 0.1% unless a row says otherwise.
#include "core/accountants/spa_mixture.h"

#include <cmath>
#include <string>
#include <variant>

#include "core/accountants/spa_accountant.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

struct Row {
  double sigma, q;
  int64_t steps;
  double epsilon, pld_delta;
};

// DP-SGD settings: small q (1e-4, 1e-3), moderate q (0.01, 0.1); the known-hard
// rows of issue 15 and docs/conditioned_mixture.md, and the spec settings
// (spa.md 9.3-9.4: sigma 1 or 2, q 0.01; edgeworth.md: sigma 0.8, q 0.01).
constexpr Row kRows[] = {
    {1, 1e-3, 1000, 0.4111, 1.000260290812581e-09},
    {0.6, 1e-3, 1000, 1.5, 7.705859018186475e-06},
    {0.6, 1e-3, 1000, 1.0, 4.83361255643134e-05},
    {0.6, 1e-3, 1000, 2.0, 1.4244455445840818e-06},
    {1, 1e-3, 10000, 1.0, 9.77301392616675e-12},
    {1, 1e-3, 10000, 2.0, 1.933780663274438e-16},
    {1, 1e-4, 1000, 0.2, 3.5425134170400383e-15},  // PLD width 0.37%
    {1, 1e-2, 100, 1.0, 6.67136077096739e-07},
    {1, 1e-2, 1000, 2.0, 2.6655461572469908e-06},
    {0.8, 1e-2, 1000, 1.0, 0.024167732992526475},
    {2, 1e-2, 3000, 2.0, 1.955736336335889e-12},
    {2, 1e-2, 10000, 2.0, 3.351916913199484e-05},
    {1, 0.1, 100, 2.0, 0.07268676929916801},
    {1, 0.1, 1000, 3.0, 0.7807385069835558},
};

std::unique_ptr<Accountant> Spa(const Row& r, SpaConditioning conditioning) {
  absl::StatusOr<std::unique_ptr<Accountant>> a =
      CreateSpaAccountant(SpaOptions{.conditioning = conditioning});
  EXPECT_TRUE(a.ok());
  EXPECT_TRUE((*a)->Compose(*Mechanism::SubsampledGaussian(r.sigma, r.q), r.steps).ok());
  return std::move(*a);
}

std::string Diagnostic(const Accountant& a, const std::string& name) {
  for (const AnswerDiagnostic& d : a.LastDiagnostics()) {
    if (d.name != name) continue;
    if (const std::string* s = std::get_if<std::string>(&d.value)) return *s;
    return std::to_string(std::get<double>(d.value));
  }
  return "";
}

TEST(SpaMixture, DeltaEstimateWithinOnePercentOfPld) {
  for (const Row& r : kRows) {
    auto a = Spa(r, SpaConditioning::kAuto);
    absl::StatusOr<DeltaBound> d = a->DeltaForEpsilon(r.epsilon);
    ASSERT_TRUE(d.ok()) << d.status();
    const std::string row = "sigma " + std::to_string(r.sigma) + " q " + std::to_string(r.q) +
                            " k " + std::to_string(r.steps) + " eps " + std::to_string(r.epsilon);
    EXPECT_NEAR(d->estimate / r.pld_delta, 1, 0.01) << row << ": " << d->estimate;
    EXPECT_EQ(d->guarantee, Guarantee::kCertified);
    EXPECT_LE(d->lower, r.pld_delta * (1 + 1e-3)) << row;
    EXPECT_GE(d->upper, r.pld_delta * (1 - 1e-3)) << row;
    EXPECT_EQ(Diagnostic(*a, "conditioned"), "yes") << row;
    EXPECT_EQ(Diagnostic(*a, "estimate_warning"), "") << row;  // about the unconditioned one
    EXPECT_NE(Diagnostic(*a, "remove_mixture_terms"), "") << row;
    EXPECT_NE(Diagnostic(*a, "add_truncated_mass"), "") << row;
  }
}

// Regression (issue 15): the published rows where the unconditioned SPA is far off
// (delta(1.5) 4.2e-5 against 7.7e-6) are what the conditioned path repairs.
TEST(SpaMixture, UnconditionedIsStillSelectableAndFarOffAtSmallQ) {
  const Row& r = kRows[1];
  auto off = Spa(r, SpaConditioning::kOff);
  absl::StatusOr<DeltaBound> d = off->DeltaForEpsilon(r.epsilon);
  ASSERT_TRUE(d.ok());
  EXPECT_GT(d->estimate / r.pld_delta, 3);
  EXPECT_EQ(Diagnostic(*off, "conditioned"), "no: conditioning off");
}

// Issue 15: sigma 1, q 1e-3, delta 1e-9, 1000 steps: true epsilon 0.411 (PLD:
// delta(0.4111) = 1.00026e-9, so eps(1e-9) lies just above 0.4111).
TEST(SpaMixture, EpsilonEstimateAtTheKnownHardRow) {
  auto a = Spa(kRows[0], SpaConditioning::kAuto);
  absl::StatusOr<EpsilonBound> e = a->EpsilonForDelta(1e-9);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_NEAR(e->estimate, 0.4111, 0.004);
  EXPECT_LE(e->lower, 0.4111);
  EXPECT_GE(e->upper, 0.4111);
  EXPECT_EQ(Diagnostic(*a, "conditioned"), "yes");
}

// 1e5 steps at q = 1e-4: PLD's certified interval stops at its grid cap, 10.7%
// wide, [1.2072e-20, 1.3521e-20]; the estimate must lie inside it.
TEST(SpaMixture, LongSmallQLedgerInsidePldInterval) {
  auto a = Spa(Row{1, 1e-4, 100000, 1.0, 0}, SpaConditioning::kAuto);
  absl::StatusOr<DeltaBound> d = a->DeltaForEpsilon(1.0);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_GE(d->estimate, 1.2071959823560759e-20);
  EXPECT_LE(d->estimate, 1.3521252754692963e-20);
}

TEST(SpaMixture, LedgersWithoutSubsampledMechanismsOrWithTooManyAreNotConditioned) {
  std::vector<MechanismEvent> gaussian = {{*Mechanism::Gaussian(1), 10}};
  EXPECT_EQ(ConditionedMixture::Build(gaussian, Direction::kRemove, BulkEstimator::kEw2, {})
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  std::vector<MechanismEvent> many;
  for (int i = 0; i <= kMaxJumpingMechanisms; ++i) {
    many.push_back({*Mechanism::SubsampledGaussian(1 + 0.1 * i, 0.01), 10});
  }
  EXPECT_EQ(
      ConditionedMixture::Build(many, Direction::kRemove, BulkEstimator::kEw2, {}).status().code(),
      absl::StatusCode::kFailedPrecondition);
  many.pop_back();
  absl::StatusOr<std::unique_ptr<ConditionedMixture>> four =
      ConditionedMixture::Build(many, Direction::kRemove, BulkEstimator::kEw2, {});
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ((*four)->mechanisms(), kMaxJumpingMechanisms);
}

}  // namespace
}  // namespace dpledger::core
