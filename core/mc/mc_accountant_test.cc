#include "core/mc/mc_accountant.h"

#include <cmath>
#include <map>
#include <string>
#include <variant>

#include "core/accountants/analytic_gaussian.h"
#include "core/util/test_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// The reported interval is estimate -+ 1.96 SE; statistical checks accept
// |estimate - exact| <= 5 SE = 5/1.96 of the half-width (false-failure rate 6e-7
// per check), plus the reference's own precision.
constexpr double kZ = 5.0 / 1.959963984540054;

std::unique_ptr<Accountant> Make(McAccountantOptions o) {
  o.backend = McBackend::kCpu;
  auto a = CreateMcAccountant(o);
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? std::move(*a) : nullptr;
}

TEST(McAccountant, ImportanceSamplingDeltaMatchesSpecReference) {
  // mc-evr.md 9.6: sigma 0.6, q 1e-3, k 100, eps 1.5: delta 6.7935e-7 (5 digits).
  McAccountantOptions o;
  o.num_samples = 20000;
  o.seed = 21;
  o.estimator = McAccountantEstimator::kImportanceSampling;  // the paper's scheme
  auto acc = Make(o);
  ASSERT_TRUE(acc->Compose(*Mechanism::SubsampledGaussian(0.6, 1e-3), 100).ok());
  auto d = acc->DeltaForEpsilon(1.5);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->guarantee, Guarantee::kEstimate);
  EXPECT_NEAR(d->estimate, 6.7935e-7, kZ * (d->upper - d->estimate) + 1e-4 * 6.7935e-7);
  EXPECT_LT(d->upper - d->lower, 0.2 * d->estimate);  // IS: ~5% SE at m = 2e4
  // Add direction: eps 1.5 > 100 (-log(1 - 1e-3)) = 0.10005, so delta_add = 0.
}

TEST(McAccountant, EpsilonForDeltaInvertsTheSpecReference) {
  McAccountantOptions o;
  o.num_samples = 20000;
  o.seed = 22;
  o.estimator = McAccountantEstimator::kImportanceSampling;  // the paper's scheme
  auto acc = Make(o);
  ASSERT_TRUE(acc->Compose(*Mechanism::SubsampledGaussian(0.6, 1e-3), 100).ok());
  auto e = acc->EpsilonForDelta(6.7935e-7);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->guarantee, Guarantee::kEstimate);
  EXPECT_NEAR(e->estimate, 1.5, kZ * (e->upper - e->estimate) + 1e-3);
  EXPECT_LE(e->lower, e->estimate);
  EXPECT_GE(e->upper, e->estimate);
  EXPECT_LT(e->upper - e->lower, 0.1);
  for (const AnswerDiagnostic& x : acc->LastDiagnostics()) EXPECT_NE(x.name, "estimate_warning");
}

// Too few paths for a long ledger at tiny delta (one-coordinate IS weights turn
// heavy-tailed): the answer says its interval is unreliable (relative error ~17%).
TEST(McAccountant, WarnsWhenItsStandardErrorIsUnreliable) {
  McAccountantOptions o;
  o.num_samples = 1000;
  o.seed = 24;
  o.estimator = McAccountantEstimator::kImportanceSampling;
  auto acc = Make(o);
  ASSERT_TRUE(acc->Compose(*Mechanism::SubsampledGaussian(1.0, 1e-3), 5000).ok());
  ASSERT_TRUE(acc->EpsilonForDelta(1e-9).ok());
  std::string warnings;
  for (const AnswerDiagnostic& x : acc->LastDiagnostics()) {
    if (x.name == "estimate_warning") warnings += std::get<std::string>(x.value) + "\n";
  }
  EXPECT_THAT(warnings, HasSubstr("remove direction: relative standard error"));
  EXPECT_THAT(warnings, HasSubstr("of 1000"));
}

// Regression test for issue 14: sigma 2, q 0.01, 1000 steps, delta 1e-10 with the
// paper's one-coordinate scheme at 2e5 paths answered 0.81383 [0.81379, 0.81387]
// (ESS 2) while PLD certifies [1.0420, 1.0439]. The interval must now contain the
// truth or say it knows nothing.
TEST(McAccountant, Issue14HeavyTailedWeightsGiveNoConfidentWrongInterval) {
  McAccountantOptions o;
  o.num_samples = 200000;
  o.seed = 7;
  o.estimator = McAccountantEstimator::kImportanceSampling;
  o.target_epsilon = 1.04;  // one pool build (the test is about the interval, not the tilt)
  auto acc = Make(o);
  ASSERT_TRUE(acc->Compose(*Mechanism::SubsampledGaussian(2.0, 0.01), 1000).ok());
  auto e = acc->EpsilonForDelta(1e-10);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_LE(e->lower, 1.0420) << e->estimate;
  EXPECT_GE(e->upper, 1.0439) << e->estimate;
  bool warned = false;
  for (const AnswerDiagnostic& x : acc->LastDiagnostics()) warned |= x.name == "estimate_warning";
  EXPECT_TRUE(warned);
}

std::map<std::string, std::variant<double, std::string>> Diagnostics(const Accountant& a) {
  std::map<std::string, std::variant<double, std::string>> d;
  for (const AnswerDiagnostic& x : a.LastDiagnostics()) d[x.name] = x.value;
  return d;
}

// Issue 14: on a long DP-SGD ledger the default picks the per-coordinate mixture
// (its pilot relative error beats the one-coordinate tilt's) and the answer's
// interval holds PLD's certified value [1.0420, 1.0439] with 2e4 paths.
TEST(McAccountant, AutoPicksTheMixtureOnALongDpSgdLedgerAndMatchesPld) {
  McAccountantOptions o;
  o.num_samples = 20000;
  o.seed = 25;
  o.ladder_rungs = 1;
  auto acc = Make(o);
  ASSERT_TRUE(acc->Compose(*Mechanism::SubsampledGaussian(2.0, 0.01), 1000).ok());
  auto e = acc->EpsilonForDelta(1e-10);
  ASSERT_TRUE(e.ok()) << e.status();
  auto diag = Diagnostics(*acc);
  EXPECT_EQ(std::get<std::string>(diag["remove_estimator"]), "tilt_mixture");
  EXPECT_LT(std::get<double>(diag["pilot_mixture_relative_std_error"]),
            std::get<double>(diag["pilot_is_relative_std_error"]));
  EXPECT_LE(e->lower, 1.0439);
  EXPECT_GE(e->upper, 1.0420);
  EXPECT_LT(e->upper - e->lower, 0.03);
  EXPECT_NEAR(e->estimate, 1.043, 0.015);

  // The spec's one-big-step ledger (mc-evr.md 9.6) goes to the one-coordinate tilt.
  auto spec = Make(o);
  ASSERT_TRUE(spec->Compose(*Mechanism::SubsampledGaussian(0.6, 1e-3), 100).ok());
  ASSERT_TRUE(spec->DeltaForEpsilon(1.5).ok());
  EXPECT_EQ(std::get<std::string>(Diagnostics(*spec)["remove_estimator"]), "importance_sampling");
}

// The tilt ladder re-centres on a deterministic center (the queried epsilon for
// delta(eps)), never on pool values: a clone, rebuilt from (seed, ledger), and a
// fresh accountant asked the same question answer bit-identically.
TEST(McAccountant, LadderIsDeterministicAndAnswersFromTheBestRung) {
  McAccountantOptions o;
  o.num_samples = 5000;
  o.seed = 26;
  o.estimator = McAccountantEstimator::kTiltMixture;
  auto acc = Make(o);
  ASSERT_TRUE(acc->Compose(*Mechanism::Gaussian(70.0), 1200).ok());
  const double mu = std::sqrt(1200.0) / 70;
  for (const double eps : {3.0, 3.05, 3.6}) {  // 3.05 stays on the ladder, 3.6 re-centres
    auto d = acc->DeltaForEpsilon(eps);
    ASSERT_TRUE(d.ok()) << d.status();
    const double exact = std::exp(GaussianLogDelta(mu, eps));
    EXPECT_LE(d->lower, exact) << eps;
    EXPECT_GE(d->upper, exact) << eps;
    EXPECT_LT(d->upper - d->lower, 0.2 * exact) << eps;
    auto diag = Diagnostics(*acc);
    EXPECT_EQ(std::get<double>(diag["remove_ladder_center"]), eps);
    // 3.05 is answered from the ladder built around 3.0 (rungs 3/1.1, 3, 3.3).
    const double tilt = std::get<double>(diag["remove_tilt"]);
    const double base = eps == 3.05 ? 3.0 : eps;
    EXPECT_TRUE(tilt == base || std::fabs(tilt - base / 1.1) < 1e-12 ||
                std::fabs(tilt - base * 1.1) < 1e-12)
        << tilt;
    auto fresh = Make(o);
    ASSERT_TRUE(fresh->Compose(*Mechanism::Gaussian(70.0), 1200).ok());
    if (eps != 3.05) {
      EXPECT_EQ(fresh->DeltaForEpsilon(eps)->estimate, d->estimate) << eps;
    }
  }
}

TEST(McAccountant, DefaultRuleGrowsToOnePercentOnAGaussianLedger) {
  // Pure Gaussian ledger: SMC. mu = 1, eps = 1: delta = 0.1269 (closed form);
  // 1% at 95% needs m ~ 4e4 * (1 - delta)/delta ~ 2.6e5 paths: the rule must grow
  // from its start of 1e4 (capped at 2^19).
  McAccountantOptions o;
  o.seed = 23;
  o.initial_samples = 10000;
  o.max_samples = 1 << 19;
  auto acc = Make(o);
  ASSERT_TRUE(acc->Compose(*Mechanism::Gaussian(2.0), 4).ok());
  auto d = acc->DeltaForEpsilon(1.0);
  ASSERT_TRUE(d.ok()) << d.status();
  const double exact = std::exp(GaussianLogDelta(1.0, 1.0));
  EXPECT_LE(d->upper - d->estimate, 0.0101 * d->estimate);
  EXPECT_NEAR(d->estimate, exact, kZ * (d->upper - d->estimate));
  // The same accountant cloned answers identically (pools rebuilt from the seed).
  auto d2 = acc->Clone()->DeltaForEpsilon(1.0);
  ASSERT_TRUE(d2.ok());
  EXPECT_EQ(d2->estimate, d->estimate);
}

// The time cap ends the default rule's growth (the server bounds query time
// with it) and the diagnostics say so.
TEST(McAccountant, TimeCapStopsGrowthAndSaysSo) {
  McAccountantOptions o;
  o.seed = 3;
  o.initial_samples = 1000;
  o.max_seconds = 1e-9;  // any doubling would overrun
  auto acc = Make(o);
  ASSERT_TRUE(acc->Compose(*Mechanism::Gaussian(1.0), 1).ok());
  auto d = acc->DeltaForEpsilon(4.0);  // delta 1e-4: 1000 paths cannot reach 1% error
  ASSERT_TRUE(d.ok()) << d.status();
  std::map<std::string, std::variant<double, std::string>> diag;
  for (const AnswerDiagnostic& x : acc->LastDiagnostics()) diag[x.name] = x.value;
  EXPECT_EQ(std::get<std::string>(diag["remove_sample_rule"]), "stopped at max_seconds cap");
  EXPECT_EQ(std::get<std::string>(diag["remove_estimator"]), "tilt_mixture");
  EXPECT_EQ(std::get<double>(diag["remove_samples"]), 1000);
  o.max_seconds = -1;
  EXPECT_THAT(CreateMcAccountant(o).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_seconds")));
}

// A pool build over a long ledger stops at the time cap, keeps its progress, and
// the query that completes it answers exactly as an uncapped accountant.
TEST(McAccountant, TimeCapStopsALongPoolBuildWhichTheNextQueryContinues) {
  McAccountantOptions o;
  o.seed = 5;
  o.num_samples = 1 << 14;  // chunks of 2^20 / 2^14 = 64 steps
  auto uncapped = Make(o);
  o.max_seconds = 1e-9;  // every chunk overruns
  auto capped = Make(o);
  for (Accountant* a : {uncapped.get(), capped.get()}) {
    ASSERT_TRUE(a->Compose(*Mechanism::Gaussian(8.0), 150).ok());
    ASSERT_TRUE(a->Compose(*Mechanism::Laplace(20.0), 50).ok());
  }
  // 200 steps in chunks of 64 (the Laplace event starts a new chunk): 64, 128,
  // 150, 200 - three stops, then the answer.
  for (const char* covered : {"covers 64 of", "covers 128 of", "covers 150 of"}) {
    EXPECT_THAT(capped->DeltaForEpsilon(1.0),
                StatusIs(absl::StatusCode::kDeadlineExceeded,
                         AllOf(HasSubstr(covered), HasSubstr("200 steps"))));
  }
  auto got = capped->DeltaForEpsilon(1.0);
  auto want = uncapped->DeltaForEpsilon(1.0);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(got->estimate, want->estimate);
  EXPECT_EQ(got->upper, want->upper);
  EXPECT_GT(got->estimate, 0);
}

TEST(McAccountant, ReportsTheWorseDirectionForSubsampledSteps) {
  // Spec 9.4: sigma 1, q 0.5, k 10, eps 1: remove 0.3752935 > add 0.3197408.
  McAccountantOptions o;
  o.num_samples = 50000;
  o.seed = 24;
  auto acc = Make(o);
  ASSERT_TRUE(acc->Compose(*Mechanism::SubsampledGaussian(1.0, 0.5), 10).ok());
  McAccountantOptions smc = o;
  smc.estimator = McAccountantEstimator::kSmc;
  auto acc_smc = Make(smc);
  ASSERT_TRUE(acc_smc->Compose(*Mechanism::SubsampledGaussian(1.0, 0.5), 10).ok());
  for (Accountant* a : {acc.get(), acc_smc.get()}) {
    auto d = a->DeltaForEpsilon(1.0);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_NEAR(d->estimate, 0.3752935, kZ * (d->upper - d->estimate) + 1e-6);
  }
}

TEST(McAccountant, HandlesLaplaceBySmc) {
  // One Laplace step, scale 1: delta(0.5) = 1 - e^{-1/4} (spec 2.2).
  McAccountantOptions o;
  o.num_samples = 50000;
  o.seed = 25;
  auto acc = Make(o);
  ASSERT_TRUE(acc->Compose(*Mechanism::Laplace(1.0), 1).ok());
  auto d = acc->DeltaForEpsilon(0.5);
  ASSERT_TRUE(d.ok());
  EXPECT_NEAR(d->estimate, -std::expm1(-0.25), kZ * (d->upper - d->estimate));
}

TEST(McAccountant, RejectsBadOptionsAndUnsupportedSteps) {
  McAccountantOptions o;
  o.num_samples = 1;
  EXPECT_THAT(CreateMcAccountant(o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_samples")));
  o.num_samples = 0;
  o.target_epsilon = -1;
  EXPECT_THAT(CreateMcAccountant(o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("target_epsilon")));
  o.target_epsilon = 0;
  o.estimator = McAccountantEstimator::kImportanceSampling;
  auto acc = Make(o);
  EXPECT_THAT(acc->Compose(*Mechanism::Laplace(1.0), 1),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("laplace")));
}

}  // namespace
}  // namespace dpledger::core
