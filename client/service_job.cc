// `dpledger job create|get|list|close`.
#include <cstdio>
#include <iostream>

#include "absl/strings/str_format.h"
#include "client/cli_commands.h"
#include "client/service_util.h"

namespace dpledger::cli {
namespace {

void PrintJob(const v1::Job& job) {
  std::printf("job         %s (tenant %s, %s)\n", job.job_id().c_str(), job.tenant().c_str(),
              job.state() == v1::JOB_STATE_CLOSED ? "closed" : "open");
  std::printf("accountant  %s\n", job.accountant().c_str());
  std::printf("schedule    %s, admitted by the %s\n",
              job.schedule() == v1::SCHEDULE_ADAPTIVE ? "adaptive" : "declared",
              job.admission_guarantee().c_str());
  for (const v1::Step& s : job.plan()) std::printf("plan        %s\n", s.spec().c_str());
  std::printf("budget      epsilon %.6g at delta %.6g\n", job.budget().epsilon(),
              job.budget().delta());
  std::printf("steps       %lld in %lld updates (last seq %lld)\n",
              static_cast<long long>(job.num_steps()), static_cast<long long>(job.num_updates()),
              static_cast<long long>(job.last_seq()));
  std::printf("spent       epsilon %s\n", BoundText(job.spent()).c_str());
  std::printf("releases    %lld\n", static_cast<long long>(job.num_releases()));
  if (!job.admission_stopped().empty()) {
    std::printf("admission   stopped: %s\n", job.admission_stopped().c_str());
  }
}

int PrintJobResult(const Args& args, const v1::Job& job) {
  if (args.Has("json")) {
    std::cout << JobJson(job).dump() << "\n";
  } else {
    PrintJob(job);
  }
  return 0;
}

}  // namespace

int RunJobCreate(const std::string& server, const std::vector<std::string>& argv) {
  auto args = ParseServiceArgs(
      argv, {"job", "epsilon", "delta", "accountant", "neighbouring", "seed", "samples", "json",
             "schedule", "plan", "filter", "rdp-order", "expect"});
  if (!args.ok()) return Fail(args.status());
  auto job_id = RequiredString(*args, "job");
  if (!job_id.ok()) return Fail(job_id.status());
  auto epsilon = RequiredDouble(*args, "epsilon");
  if (!epsilon.ok()) return Fail(epsilon.status());
  auto delta = RequiredDouble(*args, "delta");
  if (!delta.ok()) return Fail(delta.status());

  v1::CreateJobRequest request;
  request.set_job_id(*job_id);
  request.mutable_budget()->set_epsilon(*epsilon);
  request.mutable_budget()->set_delta(*delta);
  request.set_accountant(args->Get("accountant").value_or(""));
  if (auto n = args->Get("neighbouring")) {
    if (*n == "add_remove") {
      request.set_neighbouring(v1::NEIGHBOURING_RELATION_ADD_REMOVE);
    } else if (*n == "replace_one") {
      request.set_neighbouring(v1::NEIGHBOURING_RELATION_REPLACE_ONE);
    } else {
      return Fail(absl::InvalidArgumentError(
          absl::StrFormat("--neighbouring must be add_remove or replace_one, got '%s'", *n)));
    }
  }
  const std::string schedule = args->Get("schedule").value_or("declared");
  if (schedule == "adaptive") {
    request.set_schedule(v1::SCHEDULE_ADAPTIVE);
  } else if (schedule == "declared") {
    request.set_schedule(v1::SCHEDULE_DECLARED);
  } else {
    return Fail(absl::InvalidArgumentError(
        absl::StrFormat("--schedule must be declared or adaptive, got '%s'", schedule)));
  }
  for (const std::string& spec : args->GetAll("plan")) request.add_plan()->set_spec(spec);
  request.set_filter(args->Get("filter").value_or(""));
  auto order = args->GetDouble("rdp-order");
  if (!order.ok()) return Fail(order.status());
  if (order->has_value()) request.set_rdp_order(**order);
  if (auto expect = args->Get("expect")) request.mutable_expected_step()->set_spec(*expect);
  auto seed = args->GetInt("seed");
  if (!seed.ok()) return Fail(seed.status());
  if (seed->has_value()) request.mutable_mc()->set_seed(static_cast<uint64_t>(**seed));
  auto samples = args->GetInt("samples");
  if (!samples.ok()) return Fail(samples.status());
  if (samples->has_value()) request.mutable_mc()->set_num_samples(**samples);

  auto client = ConnectFromArgs(server, *args);
  if (!client.ok()) return Fail(client.status());
  auto job = (*client)->CreateJob(request);
  if (!job.ok()) return FailRpc("job create", job.status());
  return PrintJobResult(*args, *job);
}

int RunJobGet(const std::string& server, const std::vector<std::string>& argv) {
  auto args = ParseServiceArgs(argv, {"job", "json"});
  if (!args.ok()) return Fail(args.status());
  auto job_id = RequiredString(*args, "job");
  if (!job_id.ok()) return Fail(job_id.status());
  auto client = ConnectFromArgs(server, *args);
  if (!client.ok()) return Fail(client.status());
  auto job = (*client)->GetJob(*job_id);
  if (!job.ok()) return FailRpc("job get", job.status());
  return PrintJobResult(*args, *job);
}

int RunJobClose(const std::string& server, const std::vector<std::string>& argv) {
  auto args = ParseServiceArgs(argv, {"job", "json"});
  if (!args.ok()) return Fail(args.status());
  auto job_id = RequiredString(*args, "job");
  if (!job_id.ok()) return Fail(job_id.status());
  auto client = ConnectFromArgs(server, *args);
  if (!client.ok()) return Fail(client.status());
  auto job = (*client)->CloseJob(*job_id);
  if (!job.ok()) return FailRpc("job close", job.status());
  return PrintJobResult(*args, *job);
}

int RunJobList(const std::string& server, const std::vector<std::string>& argv) {
  auto args = ParseServiceArgs(argv, {"page-size", "json"});
  if (!args.ok()) return Fail(args.status());
  auto page_size = args->GetInt("page-size");
  if (!page_size.ok()) return Fail(page_size.status());
  auto client = ConnectFromArgs(server, *args);
  if (!client.ok()) return Fail(client.status());

  // Every page, in job_id order.
  Json jobs = Json::array();
  v1::ListJobsRequest request;
  if (page_size->has_value()) request.set_page_size(static_cast<int32_t>(**page_size));
  while (true) {
    auto page = (*client)->ListJobs(request);
    if (!page.ok()) return FailRpc("job list", page.status());
    for (const v1::Job& job : page->jobs()) {
      if (args->Has("json")) {
        jobs.push_back(JobJson(job));
      } else {
        std::printf("%-32s %-6s %-10s steps %-10lld epsilon %.6g / %.6g\n", job.job_id().c_str(),
                    job.state() == v1::JOB_STATE_CLOSED ? "closed" : "open",
                    job.accountant().c_str(), static_cast<long long>(job.num_steps()),
                    job.spent().upper(), job.budget().epsilon());
      }
    }
    if (page->next_page_token().empty()) break;
    request.set_page_token(page->next_page_token());
  }
  if (args->Has("json")) std::cout << Json{{"jobs", jobs}}.dump() << "\n";
  return 0;
}

}  // namespace dpledger::cli
