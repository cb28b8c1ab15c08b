#include "client/service_util.h"

#include <iostream>

#include "absl/strings/str_format.h"
#include "client/cli_commands.h"
#include "client/cli_output.h"

namespace dpledger::cli {

absl::StatusOr<Args> ParseServiceArgs(const std::vector<std::string>& argv,
                                      const std::vector<std::string>& known) {
  auto args = Args::Parse(argv, kServiceSwitches);
  if (!args.ok()) return args.status();
  std::vector<std::string> all = known;
  all.insert(all.end(), kConnectionFlags.begin(), kConnectionFlags.end());
  if (absl::Status s = args->CheckKnown(all); !s.ok()) return s;
  if (!args->positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("unexpected argument '%s'", args->positional().front()));
  }
  return args;
}

absl::StatusOr<std::unique_ptr<client::Client>> ConnectFromArgs(const std::string& server,
                                                                const Args& args) {
  client::ClientOptions options;
  options.target = server;
  if (auto token = args.Get("token")) options.bearer_token = *token;
  if (auto path = args.Get("token-file")) {
    auto token = client::ReadTokenFile(*path);
    if (!token.ok()) return token.status();
    if (token->empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("--token-file '%s' is empty", *path));
    }
    options.bearer_token = *token;
  }
  if (auto tenant = args.Get("tenant")) options.tenant = *tenant;
  options.tls = args.Has("tls");
  if (auto path = args.Get("tls-ca")) {
    auto pem = client::ReadFile(*path);
    if (!pem.ok()) return pem.status();
    options.tls_ca_pem = *pem;
    options.tls = true;
  }
  if (auto name = args.Get("tls-server-name")) options.tls_server_name = *name;
  auto timeout = args.GetInt("timeout-ms");
  if (!timeout.ok()) return timeout.status();
  if (timeout->has_value()) {
    if (**timeout < 1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--timeout-ms must be >= 1, got %d", **timeout));
    }
    options.timeout_ms = **timeout;
  }
  auto retries = args.GetInt("retries");
  if (!retries.ok()) return retries.status();
  if (retries->has_value()) {
    if (**retries < 1 || **retries > 1000) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--retries must be in [1, 1000], got %d", **retries));
    }
    options.retry.max_attempts = static_cast<int>(**retries);
  }
  if (absl::Status s = client::ApplyEnvironment(options); !s.ok()) return s;
  return client::Client::Create(options);
}

absl::StatusOr<std::string> RequiredString(const Args& args, const std::string& name) {
  auto v = args.Get(name);
  if (!v || v->empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("--%s is required", name));
  }
  return *v;
}

absl::StatusOr<double> RequiredDouble(const Args& args, const std::string& name) {
  auto v = args.GetDouble(name);
  if (!v.ok()) return v.status();
  if (!v->has_value()) return absl::InvalidArgumentError(absl::StrFormat("--%s is required", name));
  return **v;
}

std::string StepSpec(const core::MechanismEvent& event) {
  return absl::StrFormat("%s,count=%d", event.mechanism.ToSpec(), event.count);
}

int FailRpc(const std::string& command, const absl::Status& status) {
  std::cerr << "dpledger: " << command << ": " << absl::StatusCodeToString(status.code()) << ": "
            << status.message() << "\n";
  return 2;
}

std::string GuaranteeName(v1::Guarantee g) {
  switch (g) {
    case v1::GUARANTEE_CERTIFIED:
      return "certified";
    case v1::GUARANTEE_STATISTICAL:
      return "statistical";
    case v1::GUARANTEE_ESTIMATE:
      return "estimate";
    default:
      return "unspecified";
  }
}

Json BoundJson(const v1::Bound& b) {
  // An unset guarantee promises nothing: it prints as an estimate.
  const core::Guarantee g = b.guarantee() == v1::GUARANTEE_CERTIFIED     ? core::Guarantee::kCertified
                            : b.guarantee() == v1::GUARANTEE_STATISTICAL ? core::Guarantee::kStatistical
                                                                         : core::Guarantee::kEstimate;
  return BoundToJson(
      core::EpsilonBound{b.lower(), b.estimate(), b.upper(), g, b.failure_probability()});
}

Json BudgetJson(const v1::Budget& b) { return {{"epsilon", b.epsilon()}, {"delta", b.delta()}}; }

namespace {

std::string StateName(v1::JobState s) {
  switch (s) {
    case v1::JOB_STATE_OPEN:
      return "open";
    case v1::JOB_STATE_CLOSED:
      return "closed";
    default:
      return "unspecified";
  }
}

std::string NeighbouringName(v1::NeighbouringRelation r) {
  switch (r) {
    case v1::NEIGHBOURING_RELATION_REPLACE_ONE:
      return "replace_one";
    default:
      return "add_remove";
  }
}

}  // namespace

Json JobJson(const v1::Job& job) {
  Json j = {{"job_id", job.job_id()},
            {"tenant", job.tenant()},
            {"state", StateName(job.state())},
            {"accountant", job.accountant()},
            {"neighbouring", NeighbouringName(job.neighbouring())},
            {"budget", BudgetJson(job.budget())},
            {"num_steps", job.num_steps()},
            {"last_seq", job.last_seq()},
            {"num_updates", job.num_updates()},
            {"num_releases", job.num_releases()},
            {"spent", BoundJson(job.spent())},
            {"create_time_unix_ms", job.create_time_unix_ms()},
            {"close_time_unix_ms", job.close_time_unix_ms()}};
  j["schedule"] = job.schedule() == v1::SCHEDULE_ADAPTIVE ? "adaptive" : "declared";
  j["admission"] = job.admission();
  j["admission_guarantee"] = job.admission_guarantee();
  j["chain_head"] = job.chain_head();
  if (job.plan_size() > 0) {
    Json plan = Json::array();
    for (const v1::Step& s : job.plan()) plan.push_back(s.spec());
    j["plan"] = plan;
  }
  if (job.rdp_order() > 0) j["rdp_order"] = job.rdp_order();
  if (!job.admission_stopped().empty()) j["admission_stopped"] = job.admission_stopped();
  if (job.has_mc()) j["mc"] = {{"seed", job.mc().seed()}, {"num_samples", job.mc().num_samples()}};
  return j;
}

std::string RefusalKindName(v1::RefusalKind k) {
  switch (k) {
    case v1::REFUSAL_KIND_BUDGET: return "budget";
    case v1::REFUSAL_KIND_PLAN: return "plan";
    case v1::REFUSAL_KIND_UNCERTIFIED: return "uncertified";
    case v1::REFUSAL_KIND_STOPPED: return "stopped";
    case v1::REFUSAL_KIND_NOT_ATTEMPTED: return "not_attempted";
    case v1::REFUSAL_KIND_UNVERIFIED: return "unverified";
    default: return "";
  }
}

Json AckJson(const v1::StepAck& ack) {
  Json j = {{"admitted", ack.admitted()},     {"seq", ack.seq()},
            {"duplicate", ack.duplicate()},   {"epsilon", BoundJson(ack.spent())},
            {"num_steps", ack.num_steps()},   {"last_seq", ack.last_seq()},
            {"accountant", ack.accountant()}, {"budget", BudgetJson(ack.budget())},
            {"admission_guarantee", ack.admission_guarantee()},
            {"chain_head", ack.chain_head()}};
  if (!ack.admitted()) {
    if (ack.has_candidate()) j["candidate"] = BoundJson(ack.candidate());
    j["refusal_reason"] = ack.refusal_reason();
    j["refusal_kind"] = RefusalKindName(ack.refusal_kind());
  }
  if (ack.error_code() != 0) {
    j["error"] = {
        {"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(ack.error_code()))},
        {"message", ack.error_message()}};
  }
  return j;
}

Json ReleaseJson(const v1::ReleaseRecord& r) {
  const v1::VerifierReport& v = r.verifier();
  return {{"release_id", r.release_id()},
          {"job_id", r.job_id()},
          {"tenant", r.tenant()},
          {"epsilon", r.epsilon()},
          {"delta", r.delta()},
          {"delta_est", r.delta_est()},
          {"tau", r.tau()},
          {"rho", r.rho()},
          {"guarantee", GuaranteeName(r.guarantee())},
          {"failure_probability", r.failure_probability()},
          {"verifier",
           {{"verifier", v.verifier()},
            {"fallback", v.fallback()},
            {"num_samples", v.num_samples()},
            {"seconds", v.seconds()},
            {"backend", v.backend()},
            {"seed", v.seed()},
            {"delta_hat", v.delta_hat()},
            {"threshold", v.threshold()},
            {"note", v.note()}}},
          {"payload_sha256", r.payload_sha256()},
          {"payload_size", r.payload_size()},
          {"ledger_seq", r.ledger_seq()},
          {"num_steps", r.num_steps()},
          {"request_id", r.request_id()},
          {"create_time_unix_ms", r.create_time_unix_ms()}};
}

std::string BoundText(const v1::Bound& b) {
  return absl::StrFormat("%.6g [%.6g, %.6g] (%s)", b.estimate(), b.lower(), b.upper(),
                         GuaranteeName(b.guarantee()));
}

}  // namespace dpledger::cli
