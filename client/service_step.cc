// `dpledger step` (one AppendSteps update) and `dpledger ledger` (GetLedger).
#include <cstdio>
#include <iostream>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli_commands.h"
#include "client/service_util.h"

namespace dpledger::cli {

int RunStep(const std::string& server, const std::vector<std::string>& argv) {
  auto args = ParseServiceArgs(argv, {"job", "seq", "step", "json"});
  if (!args.ok()) return Fail(args.status());
  auto job_id = RequiredString(*args, "job");
  if (!job_id.ok()) return Fail(job_id.status());
  auto seq = args->GetInt("seq");
  if (!seq.ok()) return Fail(seq.status());
  if (seq->has_value() && **seq < 1) {
    return Fail(absl::InvalidArgumentError(absl::StrFormat("--seq must be >= 1, got %d", **seq)));
  }
  // Parsed here so a bad SPEC is reported before any traffic, naming its field.
  auto steps = args->Steps();
  if (!steps.ok()) return Fail(steps.status());
  std::vector<std::string> specs;
  for (const core::MechanismEvent& e : *steps) specs.push_back(StepSpec(e));

  auto client = ConnectFromArgs(server, *args);
  if (!client.ok()) return Fail(client.status());
  int64_t next_seq = seq->value_or(0);
  if (next_seq == 0) {
    // Convenience for interactive use; scripts pass --seq so a rerun is a retry.
    auto job = (*client)->GetJob(*job_id);
    if (!job.ok()) return FailRpc("step", job.status());
    next_seq = job->last_seq() + 1;
  }
  auto ack = (*client)->AppendStep(*job_id, next_seq, specs);
  if (!ack.ok()) return FailRpc("step", ack.status());
  if (absl::Status s = client::AckStatus(*ack); !s.ok()) return FailRpc("step", s);

  if (args->Has("json")) {
    std::cout << AckJson(*ack).dump() << "\n";
  } else if (ack->admitted()) {
    std::printf("seq %lld %s: epsilon %s at delta %.6g; %lld steps\n",
                static_cast<long long>(ack->seq()),
                ack->duplicate() ? "already admitted" : "admitted", BoundText(ack->spent()).c_str(),
                ack->budget().delta(), static_cast<long long>(ack->num_steps()));
  } else {
    std::printf("seq %lld refused: %s\n  epsilon would be %s, budget %.6g; spent stays %s\n",
                static_cast<long long>(ack->seq()), ack->refusal_reason().c_str(),
                BoundText(ack->candidate()).c_str(), ack->budget().epsilon(),
                BoundText(ack->spent()).c_str());
  }
  return 0;  // a refused step is an answer, not an error
}

int RunLedger(const std::string& server, const std::vector<std::string>& argv) {
  auto args = ParseServiceArgs(argv, {"job", "after-seq", "json"});
  if (!args.ok()) return Fail(args.status());
  auto job_id = RequiredString(*args, "job");
  if (!job_id.ok()) return Fail(job_id.status());
  auto after = args->GetInt("after-seq");
  if (!after.ok()) return Fail(after.status());
  auto client = ConnectFromArgs(server, *args);
  if (!client.ok()) return Fail(client.status());

  v1::GetLedgerRequest request;
  request.set_job_id(*job_id);
  request.set_after_seq(after->value_or(0));
  Json entries = Json::array();
  while (true) {
    auto page = (*client)->GetLedger(request);
    if (!page.ok()) return FailRpc("ledger", page.status());
    for (const v1::LedgerEntry& e : page->entries()) {
      std::vector<std::string> specs;
      for (const v1::Step& s : e.steps()) specs.push_back(s.spec());
      if (args->Has("json")) {
        entries.push_back({{"seq", e.seq()},
                           {"steps", specs},
                           {"epsilon", BoundJson(e.spent())},
                           {"commit_time_unix_ms", e.commit_time_unix_ms()},
                           {"num_steps_after", e.num_steps_after()},
                           {"chain_head", e.chain_head()}});
      } else {
        std::printf("%8lld  %-60s epsilon %.6g\n", static_cast<long long>(e.seq()),
                    absl::StrJoin(specs, " ").c_str(), e.spent().upper());
      }
      request.set_after_seq(e.seq());
    }
    if (!page->more() || page->entries_size() == 0) break;
  }
  if (args->Has("json"))
    std::cout << Json{{"job_id", *job_id}, {"entries", entries}}.dump() << "\n";
  return 0;
}

}  // namespace dpledger::cli
