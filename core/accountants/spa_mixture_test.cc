// Issue 15 item 2: the conditioned mixture's estimates against PLD references.
// References: `dpledger account --accountant pld --pld-precision 1e-4 --epsilon E
// --step subsampled_gaussian:sigma=S,q=Q,count=K` (PLD accountant of this repo at
// commit 3fda708), certified relative width below 0.1% unless a row says otherwise.
#include "core/accountants/spa_mixture.h"

#include <cmath>
#include <cstdio>
#include <iterator>
#include <string>
#include <variant>

#include "absl/strings/str_format.h"
#include "core/accountants/pld_accountant.h"
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

// Issue 15 item 2, certified: the interval from the mixture (spa_mixture.h) is
// intersected with the unconditioned one. On every row it contains PLD's value
// (width < 0.1%) and is narrower than the unconditioned interval; its width is
// asserted per row (measured, +5%) so that a loosening fails. Where the
// unconditioned interval is already the tighter one (sigma 2 at q 0.01:
// near-Gaussian ledgers) the answer keeps it.
TEST(SpaMixture, CertifiedDeltaIntervalFromTheMixtureContainsPldAndIsNarrower) {
  // Measured (upper - lower) / PLD delta of each kRows row (the unconditioned
  // interval's in brackets where it is narrower).
  constexpr double kMeasuredWidth[] = {0.5123, 0.1608, 0.2073, 0.1478, 0.8564, 0.6698, 0.0836,
                                       0.9033, 1.1869, 1.1135, 0.6758, 0.2159, 1.3619, 0.2850};
  constexpr bool kMixtureNarrower[] = {true, true, true, true,  true,  true, true,
                                       true, true, true, false, false, true, true};
  for (size_t i = 0; i < std::size(kRows); ++i) {
    const Row& r = kRows[i];
    const std::string row = absl::StrFormat("sigma %g q %g k %d eps %g", r.sigma, r.q, r.steps,
                                            r.epsilon);
    auto a = Spa(r, SpaConditioning::kAuto);
    auto off = Spa(r, SpaConditioning::kOff);
    absl::StatusOr<DeltaBound> d = a->DeltaForEpsilon(r.epsilon);
    absl::StatusOr<DeltaBound> u = off->DeltaForEpsilon(r.epsilon);
    ASSERT_TRUE(d.ok() && u.ok()) << row;
    EXPECT_EQ(d->guarantee, Guarantee::kCertified) << row;
    EXPECT_LE(d->lower, r.pld_delta * (1 + 1e-3)) << row;
    EXPECT_GE(d->upper, r.pld_delta * (1 - 1e-3)) << row;
    EXPECT_GE(d->lower, u->lower) << row;
    EXPECT_LE(d->upper, u->upper) << row;
    const double width = (d->upper - d->lower) / r.pld_delta;
    if (kMixtureNarrower[i]) {
      EXPECT_LT(d->upper - d->lower, 0.95 * (u->upper - u->lower)) << row;
      EXPECT_EQ(Diagnostic(*a, "interval_lower"), "mixture") << row;
      EXPECT_EQ(Diagnostic(*a, "interval_upper"), "mixture") << row;
    }
    EXPECT_LE(width, 1.05 * kMeasuredWidth[i]) << row << ": width " << width;
    EXPECT_NE(Diagnostic(*a, "mixture_relative_width"), "") << row;
    std::printf("%s: [%.6g, %.6g] width %.4f (unconditioned [%.6g, %.6g]) %s %s\n", row.c_str(),
                d->lower, d->upper, width, u->lower, u->upper,
                Diagnostic(*a, "interval_lower").c_str(), Diagnostic(*a, "interval_upper").c_str());
  }
}

// The headline row of issue 15 as an epsilon query: sigma 1, q 1e-3, 1000 steps,
// delta 1e-9. PLD (--pld-precision 1e-4) certifies [0.41106, 0.411143]; the
// unconditioned SPA certified [0.178846, 1.39449]; the mixture gives
// [0.399646, 0.425262] (measured; 6.2% wide).
TEST(SpaMixture, CertifiedEpsilonIntervalAtTheHeadlineRow) {
  auto a = Spa(kRows[0], SpaConditioning::kAuto);
  absl::StatusOr<EpsilonBound> e = a->EpsilonForDelta(1e-9);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->guarantee, Guarantee::kCertified);
  EXPECT_LE(e->lower, 0.41106);
  EXPECT_GE(e->upper, 0.411143);
  EXPECT_GT(e->lower, 0.3990);
  EXPECT_LT(e->upper, 0.4260);
  EXPECT_EQ(Diagnostic(*a, "interval_lower"), "mixture");
  EXPECT_EQ(Diagnostic(*a, "interval_upper"), "mixture");
}

// Soundness of the mixture's bounds, against PLD at --pld-precision 1e-4 computed
// here (independent code: FFT of discretised PLRVs with its own certified
// bracket): the SPA's certified interval must contain PLD's, in both query
// directions, at q 1e-4 .. 0.1 and delta 1e-5 .. 1e-12. A bound that is not one
// (a sign, a shift the wrong way, a dropped mass) fails here.
TEST(SpaMixture, CertifiedIntervalsContainPldAtFinePrecision) {
  struct Case {
    double sigma, q;
    int64_t steps;
    double delta;
  };
  constexpr Case kCases[] = {
      {1, 1e-4, 10000, 1e-5}, {1, 1e-4, 1000, 1e-12}, {1, 1e-3, 1000, 1e-9},
      {0.8, 1e-3, 5000, 1e-6}, {1, 1e-2, 1000, 1e-12}, {2, 1e-2, 2000, 1e-5},
      {1, 0.1, 100, 1e-5},    {2, 0.1, 300, 1e-8},
  };
  PldOptions fine;
  fine.relative_accuracy = 1e-4;
  fine.delta_relative_accuracy = 1e-4;
  for (const Case& c : kCases) {
    const std::string row =
        absl::StrFormat("sigma %g q %g k %d delta %g", c.sigma, c.q, c.steps, c.delta);
    auto spa = Spa(Row{c.sigma, c.q, c.steps, 0, 0}, SpaConditioning::kAuto);
    absl::StatusOr<std::unique_ptr<Accountant>> pld = CreatePldAccountant(fine);
    ASSERT_TRUE(pld.ok());
    ASSERT_TRUE((*pld)->Compose(*Mechanism::SubsampledGaussian(c.sigma, c.q), c.steps).ok());
    absl::StatusOr<EpsilonBound> pe = (*pld)->EpsilonForDelta(c.delta);
    absl::StatusOr<EpsilonBound> se = spa->EpsilonForDelta(c.delta);
    ASSERT_TRUE(pe.ok() && se.ok()) << row;
    EXPECT_EQ(Diagnostic(*spa, "conditioned"), "yes") << row;
    EXPECT_LE(se->lower, pe->lower) << row;
    EXPECT_GE(se->upper, pe->upper) << row;
    // delta at PLD's epsilon estimate.
    absl::StatusOr<DeltaBound> pd = (*pld)->DeltaForEpsilon(pe->estimate);
    absl::StatusOr<DeltaBound> sd = spa->DeltaForEpsilon(pe->estimate);
    ASSERT_TRUE(pd.ok() && sd.ok()) << row;
    EXPECT_LE(sd->lower, pd->lower) << row;
    EXPECT_GE(sd->upper, pd->upper) << row;
    std::printf("%s: eps [%.6g, %.6g] pld [%.6g, %.6g]; delta [%.5g, %.5g] pld [%.5g, %.5g]\n",
                row.c_str(), se->lower, se->upper, pe->lower, pe->upper, sd->lower, sd->upper,
                pd->lower, pd->upper);
  }
}

// Regression (issue 15, found checking the bounds): Laplace's PLRV has atoms at
// both ends of its loss, and the bulk's first cell (a, b] left out the one at the
// least loss (18% of the mass at scale 1, q 0.01), so the conditioned estimate was
// 1% high (eps(1e-8) 1.10954; delta(1) clamped to the unconditioned upper 1.287e-7)
// and the mixture's lower end above the truth. PLD (--pld-precision 1e-4):
// eps(1e-8) in [1.0978871, 1.0981100], delta(1) in [9.86359e-8, 9.90612e-8].
TEST(SpaMixture, SubsampledLaplaceAtomsAreInTheBulk) {
  absl::StatusOr<std::unique_ptr<Accountant>> a = CreateSpaAccountant();
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE((*a)->Compose(*Mechanism::SubsampledLaplace(1, 0.01), 500).ok());
  absl::StatusOr<EpsilonBound> e = (*a)->EpsilonForDelta(1e-8);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(Diagnostic(**a, "conditioned"), "yes");
  EXPECT_NEAR(e->estimate, 1.098, 0.001 * 1.098);
  EXPECT_LE(e->lower, 1.0978871);
  EXPECT_GE(e->upper, 1.0981100);
  absl::StatusOr<DeltaBound> d = (*a)->DeltaForEpsilon(1.0);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_NEAR(d->estimate, 9.8849e-8, 0.01 * 9.8849e-8);
  EXPECT_LE(d->lower, 9.86359e-8);
  EXPECT_GE(d->upper, 9.90612e-8);
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

// Issue 15 item 2, heterogeneous ledgers: several distinct subsampled mechanisms
// (and plain Gaussian steps, q = 1) are conditioned on the vector of jump counts.
// References: scripts/hetero_reference_values.py (numpy, independent; max over
// both directions, Richardson accuracy in the comment) and the PLD accountant's
// certified bracket (`dpledger account --accountant pld --pld-precision 1e-4`).
struct Part {
  double sigma, q;  // q = 1: a plain Gaussian step
  int64_t count;
};
struct HeteroRow {
  const char* name;
  std::vector<Part> parts;
  bool epsilon_query;  // eps(value) when true, else delta(value)
  double value, reference, pld_lower, pld_upper;
  // (upper - lower) / reference of the certified interval (measured; the
  // unconditioned upper end at H4 delta, the mixture's ends elsewhere).
  double measured_width;
};

std::vector<HeteroRow> HeteroRows() {
  const std::vector<Part> h1 = {{1, 1e-3, 1000}, {0.8, 2e-3, 500}};
  const std::vector<Part> h2 = {{1, 1e-4, 10000}, {0.7, 1e-4, 5000}, {30, 1, 10}};
  const std::vector<Part> h3 = {{1, 0.01, 1000}, {1.5, 0.01, 2000}};
  const std::vector<Part> h4 = {{2, 0.1, 200}, {1, 0.01, 500}, {20, 1, 20}};
  const std::vector<Part> h5 = {{1, 0.1, 100}, {1, 1e-3, 2000}};
  return {
      {"H1", h1, false, 1.0, 2.249700279e-07, 2.2492681e-07, 2.2497619e-07, 0.3775},  // +- 4e-12
      {"H1", h1, true, 1e-9, 1.899940997, 1.8999171, 1.8999550, 0.0260},             // +- 2e-6
      // PLD stops at its grid cap here (2% wide); numpy +- 3.4e-10 (0.6%).
      {"H2", h2, false, 0.5, 5.808207448e-08, 5.6882154e-08, 5.8089065e-08, 4.2544},
      {"H2", h2, true, 1e-12, 1.62828414, 1.6275903, 1.6283065, 0.0855},             // +- 2.3e-5
      {"H3", h3, false, 2.0, 6.407835593e-05, 6.4077082e-05, 6.4079231e-05, 0.9471},  // +- 1.7e-9
      {"H3", h3, true, 1e-5, 2.287550335, 2.2874946, 2.2875793, 0.0676},             // +- 4.7e-6
      {"H4", h4, false, 1.5, 0.02530583261, 0.025305505, 0.025306144, 0.7547},       // +- 2.7e-8
      {"H4", h4, true, 1e-9, 5.50204877, 5.5019903, 5.5020743, 0.0541},              // +- 1e-6
      {"H5", h5, false, 2.0, 0.07297940481, 0.072978939, 0.072979875, 1.5805},       // +- 7.5e-8
      {"H5", h5, true, 1e-12, 13.37508533, 13.375065, 13.375098, 0.1224},            // +- 1.7e-6
  };
}

TEST(SpaMixture, HeterogeneousLedgersWithinOnePercentOfIndependentReferences) {
  for (const HeteroRow& r : HeteroRows()) {
    {
      SCOPED_TRACE(std::string(r.name) + (r.epsilon_query ? " eps" : " delta"));
      absl::StatusOr<std::unique_ptr<Accountant>> a = CreateSpaAccountant();
      absl::StatusOr<std::unique_ptr<Accountant>> off =
          CreateSpaAccountant(SpaOptions{.conditioning = SpaConditioning::kOff});
      ASSERT_TRUE(a.ok() && off.ok());
      for (const Part& p : r.parts) {
        absl::StatusOr<Mechanism> m = p.q < 1 ? Mechanism::SubsampledGaussian(p.sigma, p.q)
                                              : Mechanism::Gaussian(p.sigma);
        ASSERT_TRUE(m.ok());
        ASSERT_TRUE((*a)->Compose(*m, p.count).ok());
        ASSERT_TRUE((*off)->Compose(*m, p.count).ok());
      }
      double lower, estimate, upper, off_width;
      if (r.epsilon_query) {
        absl::StatusOr<EpsilonBound> e = (*a)->EpsilonForDelta(r.value);
        absl::StatusOr<EpsilonBound> u = (*off)->EpsilonForDelta(r.value);
        ASSERT_TRUE(e.ok() && u.ok()) << e.status();
        lower = e->lower;
        estimate = e->estimate;
        upper = e->guarantee == Guarantee::kCertified ? e->upper : kInf;
        off_width = u->upper - u->lower;
      } else {
        absl::StatusOr<DeltaBound> d = (*a)->DeltaForEpsilon(r.value);
        absl::StatusOr<DeltaBound> u = (*off)->DeltaForEpsilon(r.value);
        ASSERT_TRUE(d.ok() && u.ok()) << d.status();
        lower = d->lower;
        estimate = d->estimate;
        upper = d->guarantee == Guarantee::kCertified ? d->upper : kInf;
        off_width = u->upper - u->lower;
      }
      EXPECT_LT(upper - lower, 0.95 * off_width);
      EXPECT_NEAR(estimate / r.reference, 1, 0.01) << estimate;
      // The certified interval (now the mixture's, intersected with the
      // unconditioned one) contains PLD's bracket, and the mixture's ends answer.
      EXPECT_LE(lower, r.pld_lower);
      EXPECT_GE(upper, r.pld_upper);
      const double width = (upper - lower) / r.reference;
      EXPECT_LE(width, 1.05 * r.measured_width);
      std::printf("%s %s: [%.7g, %.7g] width %.4f\n", r.name, r.epsilon_query ? "eps" : "delta",
                  lower, upper, width);
      EXPECT_EQ(Diagnostic(**a, "conditioned"), "yes");
      EXPECT_EQ(Diagnostic(**a, "remove_jump_mechanisms"), "2.000000");
      EXPECT_NE(Diagnostic(**a, "add_truncated_mass"), "");
    }
  }
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
