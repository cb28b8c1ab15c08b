// `dpledger simulate`: streams a DP-SGD run of N updates (each one the given
// --step SPECs) over StreamSteps and prints the spent epsilon as it goes. Stops
// at the first refused update (the budget is exhausted): that is an answer, so
// it exits 0; transport errors and per-update errors exit non-zero.
#include <chrono>
#include <cstdio>
#include <iostream>

#include "absl/strings/str_format.h"
#include "client/cli_commands.h"
#include "client/service_util.h"

namespace dpledger::cli {

int RunSimulate(const std::string& server, const std::vector<std::string>& argv) {
  auto args =
      ParseServiceArgs(argv, {"job", "steps", "step", "start-seq", "window", "every", "json"});
  if (!args.ok()) return Fail(args.status());
  auto job_id = RequiredString(*args, "job");
  if (!job_id.ok()) return Fail(job_id.status());
  auto num = args->GetInt("steps");
  if (!num.ok()) return Fail(num.status());
  if (!num->has_value() || **num < 1) {
    return Fail(absl::InvalidArgumentError("--steps N (N >= 1) is required"));
  }
  const int64_t n = **num;
  auto steps = args->Steps();
  if (!steps.ok()) return Fail(steps.status());
  auto start = args->GetInt("start-seq");
  if (!start.ok()) return Fail(start.status());
  auto window_flag = args->GetInt("window");
  if (!window_flag.ok()) return Fail(window_flag.status());
  const int64_t window = window_flag->value_or(64);
  if (window < 1 || window > 1024) {
    return Fail(absl::InvalidArgumentError(
        absl::StrFormat("--window must be in [1, 1024], got %d", window)));
  }
  auto every_flag = args->GetInt("every");
  if (!every_flag.ok()) return Fail(every_flag.status());
  const int64_t every = std::max<int64_t>(1, every_flag->value_or(std::max<int64_t>(1, n / 20)));
  const bool json = args->Has("json");

  auto client = ConnectFromArgs(server, *args);
  if (!client.ok()) return Fail(client.status());
  int64_t first_seq = start->value_or(0);
  if (first_seq < 1) {
    auto job = (*client)->GetJob(*job_id);
    if (!job.ok()) return FailRpc("simulate", job.status());
    first_seq = job->last_seq() + 1;
  }
  v1::StepUpdate update;
  for (const core::MechanismEvent& e : *steps) update.add_steps()->set_spec(StepSpec(e));

  const auto t0 = std::chrono::steady_clock::now();
  auto stream = (*client)->OpenStream(*job_id);
  int64_t written = 0, acked = 0, admitted = 0;
  bool refused = false;
  v1::StepAck last;
  // Keeps up to `window` updates in flight; after a refusal writes nothing more
  // and drains (later in-flight seqs then report a gap, which is expected).
  while (acked < written || (!refused && written < n)) {
    while (!refused && written < n && written - acked < window) {
      update.set_seq(first_seq + written);
      if (absl::Status s = stream->Write(update); !s.ok()) return FailRpc("simulate", s);
      ++written;
    }
    auto ack = stream->Read();
    if (!ack.ok()) return FailRpc("simulate", ack.status());
    ++acked;
    if (refused) continue;
    if (absl::Status s = client::AckStatus(*ack); !s.ok()) {
      return FailRpc(absl::StrFormat("simulate: seq %d", ack->seq()), s);
    }
    if (!ack->admitted()) {
      refused = true;
      last = *ack;
      if (json) {
        std::cout << AckJson(*ack).dump() << "\n";
      } else {
        std::printf("refused at seq %lld: %s\n", static_cast<long long>(ack->seq()),
                    ack->refusal_reason().c_str());
      }
      continue;
    }
    ++admitted;
    last = *ack;
    if (admitted % every == 0 || admitted == n) {
      if (json) {
        std::cout << AckJson(*ack).dump() << "\n";
      } else {
        std::printf("update %8lld/%lld  seq %8lld  steps %10lld  epsilon %s\n",
                    static_cast<long long>(admitted), static_cast<long long>(n),
                    static_cast<long long>(ack->seq()), static_cast<long long>(ack->num_steps()),
                    BoundText(ack->spent()).c_str());
      }
    }
  }
  if (absl::Status s = stream->Close(); !s.ok()) return FailRpc("simulate", s);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (json) {
    Json summary = {{"job_id", *job_id},           {"admitted_updates", admitted},
                    {"refused", refused},          {"num_steps", last.num_steps()},
                    {"last_seq", last.last_seq()}, {"epsilon", BoundJson(last.spent())},
                    {"seconds", seconds},          {"reconnects", stream->reconnects()}};
    std::cout << summary.dump() << "\n";
  } else {
    std::printf("%lld updates admitted%s in %.2f s (%.0f/s); epsilon %s at delta %.6g\n",
                static_cast<long long>(admitted), refused ? " (budget exhausted)" : "", seconds,
                admitted / std::max(seconds, 1e-9), BoundText(last.spent()).c_str(),
                last.budget().delta());
  }
  return 0;
}

}  // namespace dpledger::cli
