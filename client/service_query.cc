// `dpledger spent` and `dpledger remaining`.
#include <cstdio>
#include <iostream>

#include "absl/strings/str_format.h"
#include "client/cli_commands.h"
#include "client/service_util.h"

namespace dpledger::cli {

int RunSpent(const std::string& server, const std::vector<std::string>& argv) {
  auto args =
      ParseServiceArgs(argv, {"job", "delta", "epsilon", "accountant", "pld-precision", "json"});
  if (!args.ok()) return Fail(args.status());
  auto job_id = RequiredString(*args, "job");
  if (!job_id.ok()) return Fail(job_id.status());
  auto epsilon = args->GetDouble("epsilon");
  if (!epsilon.ok()) return Fail(epsilon.status());
  auto delta = args->GetDouble("delta");
  if (!delta.ok()) return Fail(delta.status());
  if (epsilon->has_value() == delta->has_value()) {
    return Fail(absl::InvalidArgumentError("give exactly one of --epsilon or --delta"));
  }
  v1::SpentRequest request;
  request.set_job_id(*job_id);
  request.set_accountant(args->Get("accountant").value_or(""));
  auto precision = args->GetDouble("pld-precision");
  if (!precision.ok()) return Fail(precision.status());
  if (precision->has_value()) request.set_pld_precision(**precision);
  if (delta->has_value()) {
    request.set_delta(**delta);
  } else {
    request.set_epsilon(**epsilon);
  }
  auto client = ConnectFromArgs(server, *args);
  if (!client.ok()) return Fail(client.status());
  auto r = (*client)->Spent(request);
  if (!r.ok()) return FailRpc("spent", r.status());

  // The shape of `dpledger account --json`, so tools read both alike.
  const bool for_delta = delta->has_value();
  const v1::Bound& b = for_delta ? r->epsilon() : r->delta();
  if (args->Has("json")) {
    Json out = {{"accountant", r->accountant()},
                {"query", for_delta ? Json{{"delta", **delta}} : Json{{"epsilon", **epsilon}}},
                {"num_steps", r->num_steps()},
                {for_delta ? "epsilon" : "delta", BoundJson(b)},
                {"admission_guarantee", r->admission_guarantee()},
                {"realised_curve", r->realised_curve()}};
    if (r->diagnostics_size() > 0) {
      Json d = Json::object();
      for (const v1::Diagnostic& x : r->diagnostics()) {
        if (x.has_number()) {
          d[x.name()] = x.number();
        } else {
          d[x.name()] = x.text();
        }
      }
      out["diagnostics"] = d;
    }
    std::cout << out.dump() << "\n";
  } else {
    std::printf("job         %s (last seq %lld)\n", job_id->c_str(),
                static_cast<long long>(r->last_seq()));
    std::printf("accountant  %s\n", r->accountant().c_str());
    std::printf("steps       %lld\n", static_cast<long long>(r->num_steps()));
    std::printf("%-11s %.6g\n", for_delta ? "delta" : "epsilon", for_delta ? **delta : **epsilon);
    std::printf("%-11s %s\n", for_delta ? "epsilon" : "delta", BoundText(b).c_str());
    for (const v1::Diagnostic& x : r->diagnostics()) {
      if (x.has_number()) {
        std::printf("  %s %.6g\n", x.name().c_str(), x.number());
      } else {
        std::printf("  %s %s\n", x.name().c_str(), x.text().c_str());
      }
    }
  }
  return 0;
}

int RunRemaining(const std::string& server, const std::vector<std::string>& argv) {
  auto args = ParseServiceArgs(argv, {"job", "step", "json"});
  if (!args.ok()) return Fail(args.status());
  auto job_id = RequiredString(*args, "job");
  if (!job_id.ok()) return Fail(job_id.status());
  auto steps = args->Steps();
  if (!steps.ok()) return Fail(steps.status());
  if (steps->size() != 1) {
    return Fail(absl::InvalidArgumentError(
        absl::StrFormat("--step: give exactly one mechanism, got %d", steps->size())));
  }
  v1::RemainingRequest request;
  request.set_job_id(*job_id);
  // The count is ignored by the server: the answer counts single applications.
  request.mutable_step()->set_spec(std::string(steps->front().mechanism.ToSpec()));
  auto client = ConnectFromArgs(server, *args);
  if (!client.ok()) return Fail(client.status());
  auto r = (*client)->Remaining(request);
  if (!r.ok()) return FailRpc("remaining", r.status());
  if (args->Has("json")) {
    Json out = {{"job_id", *job_id},
                {"accountant", r->accountant()},
                {"step", request.step().spec()},
                {"max_additional_steps", r->max_additional_steps()},
                {"budget", BudgetJson(r->budget())},
                {"spent", BoundJson(r->spent())},
                {"spent_at_max", BoundJson(r->spent_at_max())},
                {"reason", r->reason()}};
    std::cout << out.dump() << "\n";
  } else {
    std::printf("%lld more steps of %s fit the budget (epsilon %.6g at delta %.6g)\n",
                static_cast<long long>(r->max_additional_steps()), request.step().spec().c_str(),
                r->budget().epsilon(), r->budget().delta());
    std::printf("spent now   %s\n", BoundText(r->spent()).c_str());
    std::printf("spent then  %s\n", BoundText(r->spent_at_max()).c_str());
    std::printf("limited by  %s\n", r->reason().c_str());
  }
  return 0;
}

}  // namespace dpledger::cli
