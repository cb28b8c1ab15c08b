// The `dpledger` CLI contract (issue 4 "Exact command-line contracts"): runs the
// binary against a live server and checks exit codes and the JSON keys scripts
// rely on.
#include <nlohmann/json.hpp>

#include "gmock/gmock.h"
#include "tests/e2e_fixture.h"

namespace dpledger::e2e {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

class CliTest : public E2eTest {
 protected:
  // `dpledger --server ADDR args...`
  CommandResult Cli(std::vector<std::string> args) {
    std::vector<std::string> argv = {CliBinary(), "--server", server_->address()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, 120000);
  }
  // The same, expecting exit 0 and one JSON document on stdout.
  Json CliJson(std::vector<std::string> args) {
    CommandResult r = Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    Json j = Json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.out;
    return j;
  }
};

void ExpectBound(const Json& b) {
  ASSERT_TRUE(b.is_object()) << b;
  for (const char* key : {"lower", "estimate", "upper"}) {
    ASSERT_TRUE(b.contains(key) && b[key].is_number()) << key << " in " << b;
  }
  EXPECT_LE(b["lower"].get<double>(), b["estimate"].get<double>());
  EXPECT_LE(b["estimate"].get<double>(), b["upper"].get<double>());
  ASSERT_TRUE(b.contains("guarantee") && b["guarantee"].is_string()) << b;
}

TEST_F(CliTest, ServiceCommandsPrintTheContractedJson) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  CommandResult create =
      Cli({"job", "create", "--job", "cli-job", "--epsilon", "3", "--delta", "1e-6", "--plan",
           "subsampled_gaussian:sigma=1,q=0.01,count=100", "--plan", "gaussian:sigma=20",
           "--plan", "subsampled_gaussian:sigma=1,q=0.001,count=1000"});
  ASSERT_EQ(create.exit_code, 0) << create.err;

  Json job = CliJson({"job", "get", "--job", "cli-job", "--json"});
  EXPECT_EQ(job["job_id"], "cli-job");
  EXPECT_EQ(job["num_steps"], 0);
  EXPECT_EQ(job["last_seq"], 0);
  EXPECT_EQ(job["budget"]["epsilon"], 3.0);
  EXPECT_EQ(job["budget"]["delta"], 1e-6);
  EXPECT_EQ(job["accountant"], "pld");
  EXPECT_EQ(job["schedule"], "declared");
  EXPECT_EQ(job["admission"], "natural");
  EXPECT_EQ(job["plan"].size(), 3u);

  Json step = CliJson({"step", "--job", "cli-job", "--seq", "1", "--step",
                       "subsampled_gaussian:sigma=1,q=0.01,count=100", "--step",
                       "gaussian:sigma=20", "--json"});
  EXPECT_EQ(step["admitted"], true);
  EXPECT_EQ(step["seq"], 1);
  ExpectBound(step["epsilon"]);
  EXPECT_EQ(step["epsilon"]["guarantee"], "certified");
  EXPECT_LE(step["epsilon"]["upper"].get<double>(), 3.0);

  // A retry of seq 1 is answered, charged nothing.
  Json retry = CliJson({"step", "--job", "cli-job", "--seq", "1", "--step",
                        "subsampled_gaussian:sigma=1,q=0.01,count=100", "--step",
                        "gaussian:sigma=20", "--json"});
  EXPECT_EQ(retry["admitted"], true);
  EXPECT_EQ(retry["epsilon"]["upper"], step["epsilon"]["upper"]);
  // Issue 11: acks carry the ledger chain head at last_seq; a retry's is the original's.
  EXPECT_EQ(step["chain_head"].get<std::string>().size(), 64u);
  EXPECT_EQ(retry["chain_head"], step["chain_head"]);

  // A refused step exits 0 with "admitted": false.
  Json refused =
      CliJson({"step", "--job", "cli-job", "--seq", "2", "--step", "gaussian:sigma=0.1", "--json"});
  EXPECT_EQ(refused["admitted"], false);
  EXPECT_EQ(refused["seq"], 2);
  EXPECT_EQ(refused["refusal_kind"], "plan");  // issue 10: off the declared plan
  ExpectBound(refused["epsilon"]);
  EXPECT_EQ(refused["epsilon"]["upper"], step["epsilon"]["upper"]);  // unchanged
  EXPECT_EQ(refused["chain_head"], step["chain_head"]);                // so is the head

  job = CliJson({"job", "get", "--job", "cli-job", "--json"});
  EXPECT_EQ(job["num_steps"], 101);
  EXPECT_EQ(job["last_seq"], 1);
  EXPECT_EQ(job["chain_head"], step["chain_head"]);

  // spent --json has the shape of the offline `account --json` on the same ledger.
  Json spent = CliJson({"spent", "--job", "cli-job", "--delta", "1e-9", "--json"});
  CommandResult offline_run = RunCommand({CliBinary(), "account", "--delta", "1e-9", "--step",
                                          "subsampled_gaussian:sigma=1,q=0.01,count=100", "--step",
                                          "gaussian:sigma=20", "--json"});
  ASSERT_EQ(offline_run.exit_code, 0) << offline_run.err;
  Json offline = Json::parse(offline_run.out);
  std::vector<std::string> spent_keys, offline_keys;
  // ... plus what only a job has (issue 10): what backs its admission, and whether the
  // answer is another accountant's curve of the realised ledger.
  EXPECT_EQ(spent["admission_guarantee"], "natural filter over a declared schedule (pld)");
  EXPECT_EQ(spent["realised_curve"], false);
  for (auto& [k, v] : spent.items()) {
    if (k != "admission_guarantee" && k != "realised_curve") spent_keys.push_back(k);
  }
  for (auto& [k, v] : offline.items()) offline_keys.push_back(k);
  EXPECT_EQ(spent_keys, offline_keys);
  EXPECT_EQ(spent["accountant"], "pld");
  EXPECT_EQ(spent["query"], Json({{"delta", 1e-9}}));
  EXPECT_EQ(spent["num_steps"], 101);
  ExpectBound(spent["epsilon"]);
  EXPECT_EQ(spent["epsilon"]["guarantee"], "certified");
  // Same accountant, same ledger: certified intervals overlap and agree closely.
  EXPECT_LE(spent["epsilon"]["lower"].get<double>(), offline["epsilon"]["upper"].get<double>());
  EXPECT_LE(offline["epsilon"]["lower"].get<double>(), spent["epsilon"]["upper"].get<double>());
  EXPECT_NEAR(spent["epsilon"]["upper"].get<double>(), offline["epsilon"]["upper"].get<double>(),
              1e-6 * offline["epsilon"]["upper"].get<double>());

  Json spent_delta = CliJson({"spent", "--job", "cli-job", "--epsilon", "1.0", "--json"});
  EXPECT_EQ(spent_delta["query"], Json({{"epsilon", 1.0}}));
  ExpectBound(spent_delta["delta"]);
  EXPECT_FALSE(spent_delta.contains("epsilon"));

  // Another accountant's answer carries its diagnostics, as the offline command does.
  Json spent_spa =
      CliJson({"spent", "--job", "cli-job", "--delta", "1e-9", "--accountant", "spa", "--json"});
  CommandResult offline_spa = RunCommand({CliBinary(), "account", "--accountant", "spa", "--delta",
                                          "1e-9", "--step",
                                          "subsampled_gaussian:sigma=1,q=0.01,count=100", "--step",
                                          "gaussian:sigma=20", "--json"});
  ASSERT_EQ(offline_spa.exit_code, 0) << offline_spa.err;
  ASSERT_TRUE(spent_spa.contains("diagnostics")) << spent_spa;
  EXPECT_TRUE(spent_spa["diagnostics"].contains("remove_err_sp_over_sp_clt")) << spent_spa;
  EXPECT_EQ(spent_spa["diagnostics"], Json::parse(offline_spa.out)["diagnostics"]);

  Json rem = CliJson({"remaining", "--job", "cli-job", "--step",
                      "subsampled_gaussian:sigma=1,q=0.001", "--json"});
  EXPECT_GT(rem["max_additional_steps"].get<int64_t>(), 0);
  ExpectBound(rem["spent"]);

  // simulate streams N updates and prints epsilon as it goes.
  CommandResult sim = Cli({"simulate", "--job", "cli-job", "--steps", "200", "--step",
                           "subsampled_gaussian:sigma=1,q=0.001"});
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_THAT(sim.out, HasSubstr("epsilon"));
  EXPECT_THAT(sim.out, HasSubstr("200 updates admitted"));
  job = CliJson({"job", "get", "--job", "cli-job", "--json"});
  EXPECT_EQ(job["num_steps"], 301);
  EXPECT_EQ(job["last_seq"], 201);

  Json rel = CliJson({"release", "--job", "cli-job", "--payload", "hello", "--epsilon", "2.9",
                      "--delta-est", "1e-6", "--json"});
  ASSERT_TRUE(rel.contains("release_id")) << rel;
  EXPECT_EQ(rel["payload_size"], 5);
  EXPECT_EQ(rel["payload_sha256"],
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");  // sha256("hello")
  Json got = CliJson({"release", "get", "--release", rel["release_id"].get<std::string>(),
                      "--include-payload", "--json"});
  EXPECT_EQ(got["payload"], "hello");
  EXPECT_EQ(got["release_id"], rel["release_id"]);

  Json list = CliJson({"job", "list", "--json"});
  ASSERT_EQ(list["jobs"].size(), 1u);
  EXPECT_EQ(list["jobs"][0]["job_id"], "cli-job");

  Json ledger = CliJson({"ledger", "--job", "cli-job", "--json"});
  EXPECT_EQ(ledger["entries"].size(), 201u);

  Json closed = CliJson({"job", "close", "--job", "cli-job", "--json"});
  EXPECT_EQ(closed["state"], "closed");
  CommandResult health = Cli({"health"});
  EXPECT_EQ(health.exit_code, 0) << health.err;
}

TEST_F(CliTest, HelpWithAServerListsTheServiceCommands) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  CommandResult help = Cli({"help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_THAT(help.out, HasSubstr("job create --job ID"));
  EXPECT_THAT(help.out, HasSubstr("simulate"));
}

TEST_F(CliTest, ErrorsExitNonZeroAndNameTheField) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  CommandResult unknown = Cli({"job", "get", "--job", "nope", "--json"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_THAT(unknown.err, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(unknown.err, HasSubstr("nope"));

  ASSERT_EQ(Cli({"job", "create", "--job", "j", "--epsilon", "1", "--delta", "1e-6"}).exit_code, 0);
  CommandResult bad_spec = Cli({"step", "--job", "j", "--seq", "1", "--step", "gaussian:sigma=-1"});
  EXPECT_NE(bad_spec.exit_code, 0);
  EXPECT_THAT(bad_spec.err, HasSubstr("sigma"));
  CommandResult gap = Cli({"step", "--job", "j", "--seq", "9", "--step", "gaussian:sigma=5"});
  EXPECT_NE(gap.exit_code, 0);
  EXPECT_THAT(gap.err, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(gap.err, HasSubstr("seq"));
  CommandResult bad_budget =
      Cli({"job", "create", "--job", "k", "--epsilon", "-1", "--delta", "1e-6"});
  EXPECT_NE(bad_budget.exit_code, 0);
  EXPECT_THAT(bad_budget.err, HasSubstr("epsilon"));
  CommandResult missing_flag = Cli({"spent", "--job", "j", "--json"});
  EXPECT_NE(missing_flag.exit_code, 0);
  EXPECT_THAT(missing_flag.err, HasSubstr("--delta"));
  CommandResult unknown_flag = Cli({"job", "get", "--job", "j", "--bogus", "1"});
  EXPECT_NE(unknown_flag.exit_code, 0);
  EXPECT_THAT(unknown_flag.err, HasSubstr("--bogus"));

  // Transport errors: nothing listens there.
  CommandResult down =
      RunCommand({CliBinary(), "--server", "127.0.0.1:" + std::to_string(PickFreePort()), "job",
                  "get", "--job", "j", "--retries", "2", "--timeout-ms", "2000"});
  EXPECT_NE(down.exit_code, 0);
  EXPECT_THAT(down.err, HasSubstr("UNAVAILABLE"));
}

// dpledgerd's accountant flags reach its answers: Spent with the edgeworth or spa
// accountant reports the chosen estimate (edgeworth.md TV-C: p 0.01, sigma 0.8, 10000
// steps, delta 1e-5, order 1 paper-literal 10.6129103573; spa.md Table 9.2: one
// Gaussian step of sigma 1, SP-MSD0 4.3766710687). An edgeworth job refuses a step it
// cannot certify, and the refusal carries the accountant's own reason.
TEST_F(CliTest, ServerAccountantFlagsChooseEstimatesAndRefusalsSayWhy) {
  ServerConfig config;
  config.extra_args = {"--edgeworth-order", "1", "--edgeworth-mode", "literal",
                       "--spa-estimator", "sp-msd0"};
  ASSERT_NO_FATAL_FAILURE(StartServer(config));
  const std::string sg = "subsampled_gaussian:sigma=0.8,q=0.01,count=10000";
  ASSERT_EQ(Cli({"job", "create", "--job", "p", "--epsilon", "100", "--delta", "1e-5"}).exit_code,
            0);
  Json step = CliJson({"step", "--job", "p", "--seq", "1", "--step", sg, "--json"});
  ASSERT_EQ(step["admitted"], true) << step;
  Json ew = CliJson({"spent", "--job", "p", "--delta", "1e-5", "--accountant", "edgeworth",
                     "--json"});
  EXPECT_NEAR(ew["epsilon"]["estimate"].get<double>(), 10.6129103573, 5e-11) << ew;
  EXPECT_EQ(ew["epsilon"]["guarantee"], "estimate");

  ASSERT_EQ(Cli({"job", "create", "--job", "g", "--epsilon", "100", "--delta", "1e-5"}).exit_code,
            0);
  ASSERT_EQ(CliJson({"step", "--job", "g", "--seq", "1", "--step", "gaussian:sigma=1", "--json"})
                ["admitted"],
            true);
  Json spa = CliJson({"spent", "--job", "g", "--delta", "1e-5", "--accountant", "spa", "--json"});
  EXPECT_NEAR(spa["epsilon"]["estimate"].get<double>(), 4.3766710687, 5e-11) << spa;

  // The finite-sample bound cannot certify delta 1e-5 (edgeworth.md S4.6): refused, with
  // the CDF error bounds that prevent it.
  ASSERT_EQ(Cli({"job", "create", "--job", "e", "--epsilon", "100", "--delta", "1e-5",
                 "--accountant", "edgeworth"})
                .exit_code,
            0);
  Json refused = CliJson({"step", "--job", "e", "--seq", "1", "--step", sg, "--json"});
  EXPECT_EQ(refused["admitted"], false) << refused;
  const std::string reason = refused["refusal_reason"].get<std::string>();
  EXPECT_THAT(reason, HasSubstr("not a certified bound"));
  EXPECT_THAT(reason, HasSubstr("never falls to delta=1e-05"));
  EXPECT_THAT(reason, HasSubstr("Delta_Y="));
  EXPECT_EQ(refused["num_steps"], 0);
}

// An evr job over the CLI and gRPC (server/evr_admission.h): Gaussian sigma 4 at budget
// (1, 0.01) passes its verification for 3 steps (delta(1) = 0.00249481 below the threshold
// 0.00433 by 9 standard errors) and fails for 4 (0.00682959, 12 above); after that the job
// refuses everything and `job get` says why.
TEST_F(CliTest, AnEvrJobAdmitsByVerificationAndStopsAfterARejection) {
  ASSERT_NO_FATAL_FAILURE(StartServer({}));
  ASSERT_EQ(Cli({"job", "create", "--job", "v", "--epsilon", "1", "--delta", "0.01",
                 "--accountant", "evr"})
                .exit_code,
            0);
  Json ok = CliJson({"step", "--job", "v", "--seq", "1", "--step", "gaussian:sigma=4,count=3",
                     "--json"});
  ASSERT_EQ(ok["admitted"], true) << ok;
  EXPECT_EQ(ok["accountant"], "evr");
  EXPECT_EQ(ok["epsilon"]["upper"], 1.0);
  EXPECT_EQ(ok["epsilon"]["guarantee"], "statistical");
  Json no = CliJson({"step", "--job", "v", "--seq", "2", "--step", "gaussian:sigma=4", "--json"});
  EXPECT_EQ(no["admitted"], false) << no;
  EXPECT_THAT(no["refusal_reason"].get<std::string>(), HasSubstr("admits no more steps"));
  Json job = CliJson({"job", "get", "--job", "v", "--json"});
  EXPECT_EQ(job["num_steps"], 3);
  EXPECT_THAT(job["admission_stopped"].get<std::string>(), HasSubstr("did not accept"));
  Json pld = CliJson({"spent", "--job", "v", "--delta", "0.01", "--accountant", "pld", "--json"});
  EXPECT_LT(pld["epsilon"]["upper"].get<double>(), 1.0) << pld;
  CommandResult rem = Cli({"remaining", "--job", "v", "--step", "gaussian:sigma=4"});
  EXPECT_NE(rem.exit_code, 0);
  EXPECT_THAT(rem.err, HasSubstr("FAILED_PRECONDITION"));
}

// Bad accountant flags stop dpledgerd before it serves, naming the flag.
TEST(ServerFlags, BadAccountantFlagsStopStartUpNamingTheFlag) {
  TempDir dir;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--edgeworth-mode", "paper"}, "--edgeworth-mode must be one of clamped, literal"},
      {{"--spa-estimator=msd0"}, "--spa-estimator must be one of sp-clt"},
      {{"--edgeworth-order", "4"}, "--edgeworth-order must be in [0, 3], got 4"},
      {{"--evr-admission-tau", "1"}, "evr_admission_tau must be in (0, 1), got 1"},
      {{"--evr-admission-max-samples", "0"}, "evr_admission_max_samples must be > 0"},
  };
  for (const auto& [flags, message] : cases) {
    std::vector<std::string> argv = {ServerBinary(),      "--insecure",       "--listen",
                                     "127.0.0.1:0",       "--data-dir",       dir.File("data"),
                                     "--metrics-listen", ""};
    argv.insert(argv.end(), flags.begin(), flags.end());
    CommandResult r = RunCommand(argv, 60000);
    EXPECT_EQ(r.exit_code, 1) << message << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr(message));
  }
}

}  // namespace
// Issue 10's exact contracts: `job create --schedule adaptive [--filter] [--rdp-order]`,
// `--plan`, and `job get --json` naming the schedule and the admission filter; a filter
// refusal exits 0 with "admitted": false.
TEST_F(CliTest, JobsDeclareTheirScheduleAndAdmissionFilter) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  ASSERT_EQ(Cli({"job", "create", "--job", "gdp", "--epsilon", "1", "--delta", "1e-5",
                 "--schedule", "adaptive", "--filter", "gdp"}).exit_code, 0);
  ASSERT_EQ(Cli({"job", "create", "--job", "ren", "--epsilon", "2", "--delta", "1e-6",
                 "--schedule", "adaptive", "--rdp-order", "12"}).exit_code, 0);
  ASSERT_EQ(Cli({"job", "create", "--job", "imp", "--epsilon", "2", "--delta", "1e-6"}).exit_code,
            0);
  Json gdp = CliJson({"job", "get", "--job", "gdp", "--json"});
  EXPECT_EQ(gdp["schedule"], "adaptive");
  EXPECT_EQ(gdp["admission"], "gdp");
  Json ren = CliJson({"job", "get", "--job", "ren", "--json"});
  EXPECT_EQ(ren["schedule"], "adaptive");
  EXPECT_EQ(ren["admission"], "renyi");
  EXPECT_EQ(ren["rdp_order"], 12.0);
  EXPECT_EQ(ren["admission_guarantee"], "renyi filter at order 12");
  Json imp = CliJson({"job", "get", "--job", "imp", "--json"});
  EXPECT_EQ(imp["schedule"], "declared");
  EXPECT_EQ(imp["admission"], "natural");
  // sigma 2 alone is mu = 0.5; sigma 1 next would reach mu = 1.118 > mu_B(1, 1e-5) = 0.26.
  Json over = CliJson({"step", "--job", "gdp", "--step", "gaussian:sigma=1", "--json"});
  EXPECT_EQ(over["admitted"], false);
  EXPECT_EQ(over["refusal_kind"], "budget");
  Json ok = CliJson({"step", "--job", "gdp", "--step", "gaussian:sigma=20", "--json"});
  EXPECT_EQ(ok["admitted"], true);
  EXPECT_EQ(ok["admission_guarantee"], "gdp filter");
  // evr verifies the realised ledger: it needs a declared schedule.
  CommandResult evr = Cli({"job", "create", "--job", "e", "--epsilon", "1", "--delta", "1e-5",
                           "--schedule", "adaptive", "--accountant", "evr"});
  EXPECT_NE(evr.exit_code, 0);
  EXPECT_THAT(evr.err, HasSubstr("declared schedule"));
}

}  // namespace dpledger::e2e
