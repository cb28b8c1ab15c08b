// The offline `dpledger account` (mc, and the edgeworth/spa option flags),
// `dpledger calibrate` and `dpledger verify` contracts (issue 3 "CLI"): run the binary and check exit codes,
// JSON keys and numbers.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e_support.h"

namespace dpledger::e2e {
namespace {

using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using Json = nlohmann::json;

Json RunJson(std::vector<std::string> args) {
  args.insert(args.begin(), CliBinary());
  CommandResult r = RunCommand(args, 240000);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  Json j = Json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.out;
  return j;
}

// mc-evr.md 9.4: sigma 1, q 1e-3, k 100, delta 1e-9 -> eps_ref 0.2812200. The
// default rule reaches 1% relative error on the IS pool alone.
TEST(OfflineCli, McAccountMatchesTheSpecReferenceAndSaysHowItGotThere) {
  Json j = RunJson({"account", "--accountant", "mc", "--delta", "1e-9", "--seed", "7", "--step",
                    "subsampled_gaussian:sigma=1,q=0.001,count=100", "--json"});
  ASSERT_TRUE(j.contains("epsilon")) << j;
  const Json& e = j["epsilon"];
  EXPECT_EQ(e["guarantee"], "estimate");
  // The interval is a 95% CI; 3 half-widths keeps the false-failure rate < 1e-8.
  const double half = (e["upper"].get<double>() - e["lower"].get<double>()) / 2;
  EXPECT_NEAR(e["estimate"].get<double>(), 0.2812200, 3 * half + 1e-4);
  EXPECT_LT(half, 0.01);
  const Json& d = j["diagnostics"];
  // eps = 0.28 is above sum -log(1 - q) = 0.10005: the add direction is exactly 0.
  EXPECT_THAT(d["add_direction"].get<std::string>(), HasSubstr("above sum"));
  EXPECT_EQ(d["remove_estimator"], "importance_sampling");
  EXPECT_EQ(d["remove_sample_rule"], "reached 1% relative error");
  EXPECT_GE(d["remove_num_positive"].get<double>(), 100);
  EXPECT_THAT(d["backend"].get<std::string>(), AnyOf("cpu", "cuda"));
}

// k = 1000: eps_ref 0.4111141 lies below the add cap 1.0005, so the add direction
// could matter; a Chernoff bound on its CGF proves delta_add(eps) <= 1e-9 there,
// so no add pool is sampled (an SMC add pool could not resolve 1e-9 at all).
TEST(OfflineCli, McAccountSkipsTheAddDirectionWhenChernoffProvesItSmaller) {
  Json j = RunJson({"account", "--accountant", "mc", "--delta", "1e-9", "--seed", "7",
                    "--samples", "20000", "--step",
                    "subsampled_gaussian:sigma=1,q=0.001,count=1000", "--json"});
  const Json& e = j["epsilon"];
  const double half = (e["upper"].get<double>() - e["lower"].get<double>()) / 2;
  EXPECT_NEAR(e["estimate"].get<double>(), 0.4111141, 3 * half + 1e-4);
  EXPECT_THAT(j["diagnostics"]["add_direction"].get<std::string>(), HasSubstr("Chernoff"));
  EXPECT_EQ(j["diagnostics"]["remove_sample_rule"], "fixed");
}

TEST(OfflineCli, McAccountWithFixedSamplesSaysSo) {
  Json j = RunJson({"account", "--accountant", "mc", "--epsilon", "1", "--samples", "20000",
                    "--seed", "3", "--step", "gaussian:sigma=2,count=4", "--json"});
  // mu = 1: delta(1) = Phi(-1/2) - e Phi(-3/2) = 0.12693674 (closed form, spec 9.1).
  const Json& dl = j["delta"];
  const double half = (dl["upper"].get<double>() - dl["lower"].get<double>()) / 2;
  EXPECT_NEAR(dl["estimate"].get<double>(), 0.12693674, 3 * half);
  EXPECT_EQ(j["diagnostics"]["remove_samples"], 20000);
  EXPECT_EQ(j["diagnostics"]["remove_sample_rule"], "fixed");
  EXPECT_EQ(j["diagnostics"]["add_direction"], "not needed: symmetric ledger");
}

TEST(OfflineCli, McAccountRejectsTooFewSamples) {
  CommandResult r = RunCommand({CliBinary(), "account", "--accountant", "mc", "--delta", "1e-5",
                                "--samples", "1", "--step", "gaussian:sigma=1"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--samples"));
}

// edgeworth.md TV-C, p = 0.01, sigma = 0.8, 10000 steps, delta = 1e-5: the estimate of
// each order and mode (10 printed decimals; the published estimator, so --conditioning
// off: 100 expected sampled steps would otherwise be conditioned, issue 15). The
// finite-sample bound cannot certify at 1e-5, so upper is null and the
// (mode-independent) certified lower end is reported.
TEST(OfflineCli, EdgeworthOrderAndModeFlagsChooseTheEstimate) {
  struct Case {
    std::vector<std::string> flags;
    double estimate;
  };
  const std::vector<Case> cases = {
      {{}, 10.4310023538},  // order 2, clamped (the defaults)
      {{"--edgeworth-order", "1"}, 10.3368324189},
      {{"--edgeworth-order", "1", "--edgeworth-mode", "literal"}, 10.6129103573},
      {{"--edgeworth-order=3", "--edgeworth-mode=literal"}, 10.9752105090},
      {{"--edgeworth-order", "0", "--edgeworth-mode", "clamped"}, 9.9910552756},
  };
  std::optional<double> lower;
  for (const Case& c : cases) {
    std::vector<std::string> args = {"account", "--accountant", "edgeworth", "--delta", "1e-5",
                                     "--step", "subsampled_gaussian:sigma=0.8,q=0.01,count=10000",
                                     "--json", "--conditioning", "off"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    Json j = RunJson(args);
    const Json& e = j["epsilon"];
    ASSERT_TRUE(e.is_object()) << j;
    EXPECT_NEAR(e["estimate"].get<double>(), c.estimate, 5e-11) << j;
    EXPECT_EQ(e["guarantee"], "estimate");
    EXPECT_TRUE(e["upper"].is_null()) << j;
    if (!lower) lower = e["lower"].get<double>();
    EXPECT_EQ(e["lower"].get<double>(), *lower) << j;
  }
}

// spa.md Table 9.2, one Gaussian step of sigma 1 at delta 1e-5: the estimate follows
// --spa-estimator; the certified bounds do not depend on it.
TEST(OfflineCli, SpaEstimatorFlagChoosesTheEstimate) {
  struct Case {
    std::string estimator;
    double estimate, tol;
  };
  const std::vector<Case> cases = {
      {"", 4.3771780957, 5e-11},  // sp-clt, the default
      {"sp-clt", 4.3771780957, 5e-11},
      {"sp-msd0", 4.3766710687, 5e-11},
      {"sp-msd1", 4.3772333975, 5e-11},
      // Gaussian PLRVs have no cumulant beyond the second: the Edgeworth-corrected
      // SP-CLT is the exact closed form (TV-A: 4.377178095681225).
      {"sp-ew2", 4.377178095681225, 1e-9},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"account", "--accountant", "spa", "--delta", "1e-5",
                                     "--step", "gaussian:sigma=1", "--json"};
    if (!c.estimator.empty()) {
      args.push_back("--spa-estimator");
      args.push_back(c.estimator);
    }
    Json j = RunJson(args);
    const Json& e = j["epsilon"];
    ASSERT_TRUE(e.is_object()) << j;
    EXPECT_NEAR(e["estimate"].get<double>(), c.estimate, c.tol) << c.estimator;
    EXPECT_EQ(e["guarantee"], "certified");
    EXPECT_NEAR(e["upper"].get<double>(), 4.728386987, 5e-9) << c.estimator;
  }
}

TEST(OfflineCli, AccountantOptionFlagsRejectBadValuesNamingTheFlag) {
  const std::string sg = "subsampled_gaussian:sigma=1,q=0.01,count=100";
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--accountant", "edgeworth", "--edgeworth-order", "4"},
       "--edgeworth-order must be in [0, 3]"},
      {{"--accountant", "edgeworth", "--edgeworth-order", "-1"}, "--edgeworth-order"},
      {{"--accountant", "edgeworth", "--edgeworth-order", "two"}, "--edgeworth-order"},
      {{"--accountant", "edgeworth", "--edgeworth-mode", "paper"},
       "--edgeworth-mode must be one of clamped, literal, got 'paper'"},
      {{"--accountant", "spa", "--spa-estimator", "clt"}, "--spa-estimator must be one of sp-clt"},
      {{"--accountant", "pld", "--edgeworth-mode", "literal"},
       "apply only to --accountant edgeworth"},
      {{"--edgeworth-order", "1"}, "apply only to --accountant edgeworth"},  // pld, the default
      {{"--accountant", "edgeworth", "--spa-estimator", "sp-msd0"},
       "--spa-estimator applies only to --accountant spa"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {CliBinary(), "account", "--delta", "1e-5", "--step", sg};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    CommandResult r = RunCommand(argv);
    EXPECT_EQ(r.exit_code, 2) << c.message;
    EXPECT_THAT(r.err, HasSubstr(c.message));
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

// 100 Gaussian steps of unit noise scaled by c are mu-GDP with mu = 10/c; epsilon 1 at
// delta 1e-5 needs mu = 0.268051123211294 (mpmath), so c = 37.3063163481594. The
// analytic accountant is exact: its factor is that, rounded up by at most 1e-4.
TEST(OfflineCli, CalibrateFindsTheClosedFormNoiseAndTakesTheAccountantFlags) {
  const std::vector<std::string> base = {"calibrate", "--epsilon", "1", "--delta", "1e-5",
                                         "--step", "gaussian:sigma=1,count=100", "--json"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return RunJson(a);
  };
  Json exact = with({"--accountant", "analytic"});
  const double c = exact["noise_scale"].get<double>();
  EXPECT_GE(c, 37.3063163481594 * (1 - 1e-12));
  EXPECT_LE(c, 37.3063163481594 * (1 + 1.001e-4));
  ASSERT_EQ(exact["steps"].size(), 1u);
  EXPECT_THAT(exact["steps"][0].get<std::string>(),
              AllOf(HasSubstr("gaussian:sigma=37.3"), HasSubstr("count=100")));
  EXPECT_LE(exact["epsilon"]["upper"].get<double>(), 1.0);
  // The SPA's certified end is its Berry-Esseen interval (spa.md 5; nonzero err_SP even
  // on Gaussian ledgers, spa.md 9.2(a)), so it asks for more noise (38.55, 3% more). Its
  // estimator flag changes no certified end.
  Json spa = with({"--accountant", "spa", "--spa-estimator", "sp-msd1"});
  Json spa_clt = with({"--accountant", "spa"});
  EXPECT_EQ(spa["accountant"], "spa");
  EXPECT_EQ(spa["noise_scale"], spa_clt["noise_scale"]);
  EXPECT_GT(spa["noise_scale"].get<double>(), c);
  EXPECT_LT(spa["noise_scale"].get<double>(), 1.05 * c);
  // A flag of another accountant is refused, naming it.
  std::vector<std::string> argv = {CliBinary()};
  argv.insert(argv.end(), base.begin(), base.end());
  argv.insert(argv.end(), {"--accountant", "pld", "--spa-estimator", "sp-msd1"});
  CommandResult r = RunCommand(argv);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--spa-estimator applies only to --accountant spa"));
}

// 1200 Gaussian steps, sigma 70 (the paper's setting): mu = sqrt(1200)/70, and the
// closed form gives delta(1) = 6.396e-3. At tau 0.9 the verifier needs ~1.8e6 samples.
TEST(OfflineCli, VerifyAcceptsTheTrueDeltaAndPrintsTheContractedFields) {
  // --certify none: PLD would certify this claim without sampling (next test).
  Json j = RunJson({"verify", "--epsilon", "1", "--delta-est", "6.4e-3", "--tau", "0.9",
                    "--certify", "none", "--step", "gaussian:sigma=70,count=1200", "--json"});
  EXPECT_EQ(j["accepted"], true) << j;
  for (const char* key : {"reason", "samples", "threshold", "delta_hat", "backend", "seconds"}) {
    EXPECT_TRUE(j.contains(key)) << key << " missing in " << j;
  }
  EXPECT_EQ(j["guarantee"]["epsilon"], 1.0);
  EXPECT_NEAR(j["guarantee"]["delta"].get<double>(), 6.4e-3 / 0.9, 1e-12);
  EXPECT_NEAR(j["delta_hat"].get<double>(), 6.396e-3, 2e-4);
  // Pure Gaussian ledger: symmetric, so one direction is sampled and drawn in full.
  EXPECT_GT(j["samples"].get<double>(), 1e5);
  EXPECT_EQ(j["samples"], j["samples_planned"]);
}

// Issue 14 item 3: with the default --certify pld the same claim is certified (PLD's
// upper bound on delta(1) ~6.40e-3 is below T = 6.96e-3): nothing sampled, no failure
// probability; the direction says how it was verified.
TEST(OfflineCli, VerifyCertifiesADirectionThatPldBoundsBelowTheThreshold) {
  Json j = RunJson({"verify", "--epsilon", "1", "--delta-est", "6.4e-3", "--tau", "0.9",
                    "--step", "gaussian:sigma=70,count=1200", "--json"});
  EXPECT_EQ(j["accepted"], true) << j;
  EXPECT_EQ(j["samples"], 0);
  EXPECT_EQ(j["guarantee"]["guarantee"], "certified");
  ASSERT_EQ(j["directions"].size(), 1u);
  EXPECT_THAT(j["directions"][0]["verified_by"].get<std::string>(),
              HasSubstr("certified by pld upper bound 0.0064"));
}

// --plan: per direction the estimator, nu, m and the predicted time, nothing drawn. DP-SGD
// (sigma 1, q 0.01, 1000 steps) with a false claim in the remove direction (so PLD cannot
// certify it): remove is planned for sampling, add is certified.
TEST(OfflineCli, VerifyPlanShowsTheCostBeforeSampling) {
  Json j = RunJson({"verify", "--plan", "--epsilon", "1.9187", "--delta-est", "2.4e-6", "--tau",
                    "0.5", "--step", "subsampled_gaussian:sigma=1,q=0.01,count=1000", "--json"});
  EXPECT_EQ(j["outcome"], "planned") << j;
  EXPECT_EQ(j["samples"], 0);
  ASSERT_EQ(j["directions"].size(), 2u);
  const Json& remove = j["directions"][0];
  EXPECT_EQ(remove["certified"], false);
  EXPECT_GT(remove["nu"].get<double>(), 0);
  EXPECT_GT(remove["samples"].get<double>(), 1e3);
  EXPECT_GT(remove["predicted_seconds"].get<double>(), 0);
  EXPECT_EQ(j["directions"][1]["certified"], true);
  EXPECT_EQ(j["directions"][1]["predicted_seconds"], 0);
  // Issue 14: samples_planned counts only what will be sampled (the certified add
  // direction's m stays in its own record).
  EXPECT_GT(j["directions"][1]["samples"].get<double>(), 0);
  EXPECT_EQ(j["samples_planned"], remove["samples"]);
}

TEST(OfflineCli, VerifyRejectsAClearUnderestimate) {
  Json j = RunJson({"verify", "--epsilon", "1", "--delta-est", "3e-3", "--tau", "0.9", "--step",
                    "gaussian:sigma=70,count=1200", "--json"});
  EXPECT_EQ(j["accepted"], false) << j;
  EXPECT_FALSE(j.contains("guarantee")) << j;
  EXPECT_GT(j["delta_hat"].get<double>(), j["threshold"].get<double>());
}

// A 640x underestimate needs ~2e14 samples: refused up front, nothing drawn.
TEST(OfflineCli, VerifyRefusesWhenTheSampleBudgetIsTooSmallAndDrawsNothing) {
  Json j = RunJson({"verify", "--epsilon", "1", "--delta-est", "1e-5", "--step",
                    "gaussian:sigma=70,count=1200", "--json"});
  EXPECT_EQ(j["accepted"], false) << j;
  EXPECT_EQ(j["samples"], 0);
  EXPECT_GT(j["samples_planned"].get<double>(), 1e10);
}

}  // namespace
}  // namespace dpledger::e2e
