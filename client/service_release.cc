// `dpledger release` (Release: EVR-gated) and `dpledger release get`.
#include <cstdio>
#include <fstream>
#include <iostream>

#include "absl/strings/str_format.h"
#include "client/cli_commands.h"
#include "client/service_util.h"

namespace dpledger::cli {
namespace {

void PrintRelease(const v1::ReleaseRecord& r) {
  std::printf("release     %s (job %s, ledger seq %lld, %lld steps)\n", r.release_id().c_str(),
              r.job_id().c_str(), static_cast<long long>(r.ledger_seq()),
              static_cast<long long>(r.num_steps()));
  std::printf("statement   (epsilon %.6g, delta %.6g) %s", r.epsilon(), r.delta(),
              GuaranteeName(r.guarantee()).c_str());
  if (r.guarantee() == v1::GUARANTEE_STATISTICAL) {
    std::printf(", failure probability %.3g", r.failure_probability());
  }
  std::printf("\nclaimed     delta_est %.6g, tau %.6g, rho %.6g\n", r.delta_est(), r.tau(),
              r.rho());
  const v1::VerifierReport& v = r.verifier();
  std::printf("verifier    %s%s: %lld samples in %.3f s on %s, delta_hat %.6g, threshold %.6g\n",
              v.verifier().c_str(), v.fallback() ? " (fallback)" : "",
              static_cast<long long>(v.num_samples()), v.seconds(), v.backend().c_str(),
              v.delta_hat(), v.threshold());
  if (!v.note().empty()) std::printf("note        %s\n", v.note().c_str());
  std::printf("payload     %lld bytes, sha256 %s\n", static_cast<long long>(r.payload_size()),
              r.payload_sha256().c_str());
}

}  // namespace

int RunRelease(const std::string& server, const std::vector<std::string>& argv) {
  auto args = ParseServiceArgs(argv, {"job", "payload", "payload-file", "epsilon", "delta-est",
                                      "tau", "rho", "request-id", "max-samples", "json"});
  if (!args.ok()) return Fail(args.status());
  auto job_id = RequiredString(*args, "job");
  if (!job_id.ok()) return Fail(job_id.status());
  if (args->Has("payload") == args->Has("payload-file")) {
    return Fail(absl::InvalidArgumentError("give exactly one of --payload or --payload-file"));
  }
  std::string payload;
  if (auto p = args->Get("payload")) {
    payload = *p;
  } else {
    auto data = client::ReadFile(*args->Get("payload-file"));
    if (!data.ok()) return Fail(data.status());
    payload = *std::move(data);
  }
  auto epsilon = RequiredDouble(*args, "epsilon");
  if (!epsilon.ok()) return Fail(epsilon.status());
  auto delta_est = RequiredDouble(*args, "delta-est");
  if (!delta_est.ok()) return Fail(delta_est.status());
  auto tau = args->GetDouble("tau");
  if (!tau.ok()) return Fail(tau.status());
  auto rho = args->GetDouble("rho");
  if (!rho.ok()) return Fail(rho.status());
  auto max_samples = args->GetInt("max-samples");
  if (!max_samples.ok()) return Fail(max_samples.status());

  v1::ReleaseRequest request;
  request.set_job_id(*job_id);
  request.set_payload(payload);
  request.set_epsilon(*epsilon);
  request.set_delta_est(*delta_est);
  request.set_tau(tau->value_or(0));  // 0: the server's default
  request.set_rho(rho->value_or(0));
  request.set_request_id(args->Get("request-id").value_or(""));
  request.set_max_samples(max_samples->value_or(0));

  auto client = ConnectFromArgs(server, *args);
  if (!client.ok()) return Fail(client.status());
  auto record = (*client)->Release(request);
  if (!record.ok()) return FailRpc("release", record.status());
  if (args->Has("json")) {
    std::cout << ReleaseJson(*record).dump() << "\n";
  } else {
    PrintRelease(*record);
  }
  return 0;
}

int RunReleaseGet(const std::string& server, const std::vector<std::string>& argv) {
  auto args = ParseServiceArgs(argv, {"release", "include-payload", "payload-out", "json"});
  if (!args.ok()) return Fail(args.status());
  auto release_id = RequiredString(*args, "release");
  if (!release_id.ok()) return Fail(release_id.status());
  v1::GetReleaseRequest request;
  request.set_release_id(*release_id);
  request.set_include_payload(args->Has("include-payload") || args->Has("payload-out"));
  auto client = ConnectFromArgs(server, *args);
  if (!client.ok()) return Fail(client.status());
  auto record = (*client)->GetRelease(request);
  if (!record.ok()) return FailRpc("release get", record.status());

  if (auto path = args->Get("payload-out")) {
    std::ofstream out(*path, std::ios::binary | std::ios::trunc);
    out.write(record->payload().data(), static_cast<std::streamsize>(record->payload().size()));
    if (!out) {
      return Fail(absl::InternalError(absl::StrFormat("--payload-out: cannot write '%s'", *path)));
    }
  }
  if (args->Has("json")) {
    Json j = ReleaseJson(*record);
    // Payloads may be binary; JSON carries them only when asked and only as text.
    if (args->Has("include-payload")) j["payload"] = record->payload();
    std::cout << j.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
  } else {
    PrintRelease(*record);
    if (args->Has("include-payload") && !args->Has("payload-out")) {
      std::cout << record->payload() << "\n";
    }
  }
  return 0;
}

}  // namespace dpledger::cli
