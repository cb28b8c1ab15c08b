// dpledger_cache_memory: how much real memory a dpledgerd's job cache costs against its byte
// cap (issue 11 defect 5), measured from outside on loopback. Two phases, run against the
// same data directory with a restart in between (bench/cache_memory.sh does it all):
//   fill  creates --jobs N jobs (cm0, cm1, ...) and appends one update of --steps K
//         applications of --step to each;
//   read  reads every job (GetJob, which rebuilds its admission state, then Spent at another
//         delta, which composes a query accountant), --rounds times, and prints the server's
//         resident set (now and peak, from /proc/PID/status) after each round.
//   dpledger_cache_memory --server 127.0.0.1:PORT --pid PID --phase read --jobs 1000
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "proto/dpledger.grpc.pb.h"

namespace dpledger::bench {
namespace {

namespace v1 = ::dpledger::v1;

struct Options {
  std::string server;
  int pid = 0;
  std::string phase;
  int jobs = 1000;
  int steps = 1000;
  int rounds = 2;
  int threads = 4;
  std::string step = "subsampled_gaussian:sigma=1,q=0.01";
};

constexpr char kUsage[] =
    "usage: dpledger_cache_memory --server 127.0.0.1:PORT --pid PID --phase fill|read "
    "[--jobs N] [--steps K] [--rounds R] [--threads T] [--step SPEC]\n";

bool ParseOptions(int argc, char** argv, Options& o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    bool ok = true;
    if (flag == "--server") {
      o.server = value;
    } else if (flag == "--pid") {
      ok = absl::SimpleAtoi(value, &o.pid);
    } else if (flag == "--phase") {
      o.phase = value;
    } else if (flag == "--jobs") {
      ok = absl::SimpleAtoi(value, &o.jobs) && o.jobs >= 1 && o.jobs <= 100000;
    } else if (flag == "--steps") {
      ok = absl::SimpleAtoi(value, &o.steps) && o.steps >= 1 && o.steps <= 1000000;
    } else if (flag == "--rounds") {
      ok = absl::SimpleAtoi(value, &o.rounds) && o.rounds >= 1 && o.rounds <= 100;
    } else if (flag == "--threads") {
      ok = absl::SimpleAtoi(value, &o.threads) && o.threads >= 1 && o.threads <= 64;
    } else if (flag == "--step") {
      o.step = value;
    } else {
      ok = false;
    }
    if (!ok) return false;
  }
  // Loopback only: this tool must never be pointed at a shared server.
  return o.server.rfind("127.0.0.1:", 0) == 0 && (o.phase == "fill" || o.phase == "read");
}

// A line "Name:   123 kB" of /proc/PID/status, in MiB; -1 when absent.
double StatusMiB(int pid, const std::string& name) {
  std::ifstream in(absl::StrFormat("/proc/%d/status", pid));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + ":", 0) == 0) {
      int64_t kb = 0;
      std::string rest = line.substr(name.size() + 1);
      rest.erase(0, rest.find_first_not_of(" \t"));
      if (absl::SimpleAtoi(rest.substr(0, rest.find(' ')), &kb)) return kb / 1024.0;
    }
  }
  return -1;
}

// Runs fn(i) for i in [0, n) on `threads` threads; returns how many calls failed.
template <typename Fn>
int ForAll(int n, int threads, Fn fn) {
  std::atomic<int> next{0}, failed{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&] {
      for (int i = next++; i < n; i = next++) {
        if (!fn(i)) ++failed;
      }
    });
  }
  for (auto& t : ts) t.join();
  return failed;
}

int Run(const Options& o) {
  auto channel = grpc::CreateChannel(o.server, grpc::InsecureChannelCredentials());
  auto stub = v1::Ledger::NewStub(channel);
  std::atomic<int> reported{0};
  auto fail = [&](const std::string& what, const grpc::Status& s) {
    if (reported++ < 3) std::cerr << what << ": " << s.error_code() << " " << s.error_message() << "\n";
    return false;
  };
  int failed = 0;
  if (o.phase == "fill") {
    failed = ForAll(o.jobs, o.threads, [&](int i) {
      const std::string id = absl::StrFormat("cm%d", i);
      v1::CreateJobRequest create;
      create.set_job_id(id);
      create.mutable_budget()->set_epsilon(1000);
      create.mutable_budget()->set_delta(1e-5);
      v1::Job job;
      grpc::ClientContext c1;
      if (grpc::Status s = stub->CreateJob(&c1, create, &job); !s.ok()) return fail(id, s);
      v1::AppendStepsRequest append;
      append.set_job_id(id);
      v1::StepUpdate* u = append.add_updates();
      u->set_seq(1);
      v1::Step* step = u->add_steps();
      step->set_spec(absl::StrFormat("%s,count=%d", o.step, o.steps));
      v1::AppendStepsResponse acks;
      grpc::ClientContext c2;
      if (grpc::Status s = stub->AppendSteps(&c2, append, &acks); !s.ok()) return fail(id, s);
      return acks.acks_size() == 1 && acks.acks(0).admitted();
    });
    std::printf("phase=fill jobs=%d failed=%d rss_mib=%.0f peak_rss_mib=%.0f\n", o.jobs, failed,
                StatusMiB(o.pid, "VmRSS"), StatusMiB(o.pid, "VmHWM"));
    return failed == 0 ? 0 : 1;
  }
  for (int r = 1; r <= o.rounds; ++r) {
    failed += ForAll(o.jobs, o.threads, [&](int i) {
      const std::string id = absl::StrFormat("cm%d", i);
      v1::GetJobRequest get;
      get.set_job_id(id);
      v1::Job job;
      grpc::ClientContext c1;
      if (grpc::Status s = stub->GetJob(&c1, get, &job); !s.ok()) return fail(id, s);
      v1::SpentRequest spent;
      spent.set_job_id(id);
      spent.set_delta(1e-6);
      v1::SpentResponse answer;
      grpc::ClientContext c2;
      if (grpc::Status s = stub->Spent(&c2, spent, &answer); !s.ok()) return fail(id, s);
      return true;
    });
    std::printf("phase=read round=%d jobs=%d failed=%d rss_mib=%.0f peak_rss_mib=%.0f\n", r,
                o.jobs, failed, StatusMiB(o.pid, "VmRSS"), StatusMiB(o.pid, "VmHWM"));
    std::fflush(stdout);
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace dpledger::bench

int main(int argc, char** argv) {
  dpledger::bench::Options o;
  if (argc % 2 != 1 || !dpledger::bench::ParseOptions(argc, argv, o)) {
    std::fputs(dpledger::bench::kUsage, stderr);
    return 2;
  }
  return dpledger::bench::Run(o);
}
