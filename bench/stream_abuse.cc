// dpledger_stream_abuse: what misbehaving stream clients cost a running dpledgerd (issue 11
// "Streams"), measured from outside on loopback with bounded loops. Scenarios:
//   idle      --streams N streams each send one update, read its ack, then sit idle;
//             reports how many the server took and its thread count and RSS.
//   noread    --streams N streams write updates and never read an ack, for --seconds;
//             reports the server's peak RSS and threads, and how many streams it ended.
//   fairness  --streams N streams of tenant "busy" pipeline (--window in flight) while one
//             client of tenant "quiet" makes sequential unary appends, for --seconds;
//             reports the quiet tenant's latency percentiles and the busy throughput.
// Streams spread over --tenants tenants (t0, t1, ...; fairness: "busy"). The server's
// threads and RSS come from /proc/PID (--pid, the dpledgerd's process id). Time a
// shutdown from outside (kill -TERM, then wait) right after a scenario.
//
//   dpledger_stream_abuse --server 127.0.0.1:PORT --pid PID --scenario idle --streams 500
// bench/stream_abuse.sh starts a server for it and times the shutdown.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "proto/dpledger.grpc.pb.h"

namespace dpledger::bench {
namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = ::dpledger::v1;

struct Options {
  std::string server;
  int pid = 0;
  std::string scenario;
  int streams = 100;
  int tenants = 1;
  int window = 64;
  double seconds = 10;
};

constexpr char kUsage[] =
    "usage: dpledger_stream_abuse --server 127.0.0.1:PORT --pid PID "
    "--scenario idle|noread|fairness [--streams N] [--tenants K] [--window W] [--seconds S]\n";

bool ParseOptions(int argc, char** argv, Options& o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    bool ok = true;
    if (flag == "--server") {
      o.server = value;
    } else if (flag == "--pid") {
      ok = absl::SimpleAtoi(value, &o.pid);
    } else if (flag == "--scenario") {
      o.scenario = value;
    } else if (flag == "--streams") {
      ok = absl::SimpleAtoi(value, &o.streams) && o.streams >= 1 && o.streams <= 2000;
    } else if (flag == "--tenants") {
      ok = absl::SimpleAtoi(value, &o.tenants) && o.tenants >= 1 && o.tenants <= 1000;
    } else if (flag == "--window") {
      ok = absl::SimpleAtoi(value, &o.window) && o.window >= 1 && o.window <= 4096;
    } else if (flag == "--seconds") {
      ok = absl::SimpleAtod(value, &o.seconds) && o.seconds > 0 && o.seconds <= 120;
    } else {
      ok = false;
    }
    if (!ok) return false;
  }
  // Loopback only: this tool must never be pointed at a shared server.
  return o.server.rfind("127.0.0.1:", 0) == 0 &&
         (o.scenario == "idle" || o.scenario == "noread" || o.scenario == "fairness");
}

// Threads and resident set of a process, from /proc/PID/status.
struct ProcStats {
  int threads = 0;
  double rss_mb = 0;
};
ProcStats ReadProc(int pid) {
  ProcStats s;
  std::ifstream in(absl::StrFormat("/proc/%d/status", pid));
  std::string key;
  while (in >> key) {
    if (key == "Threads:") in >> s.threads;
    if (key == "VmRSS:") {
      double kb = 0;
      in >> kb;
      s.rss_mb = kb / 1024;
    }
  }
  return s;
}

std::shared_ptr<grpc::Channel> NewChannel(const std::string& server, int i) {
  grpc::ChannelArguments args;
  args.SetInt("dpledger.bench.connection", i);  // its own connection, as separate clients
  return grpc::CreateCustomChannel(server, grpc::InsecureChannelCredentials(), args);
}

std::string Tenant(const Options& o, int i) { return absl::StrFormat("t%d", i % o.tenants); }

bool CreateJob(v1::Ledger::Stub& stub, const std::string& tenant, const std::string& job) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::CreateJobRequest r;
  r.set_tenant(tenant);
  r.set_job_id(job);
  r.mutable_budget()->set_epsilon(1e9);
  r.mutable_budget()->set_delta(1e-6);
  r.set_accountant("analytic");
  v1::Job out;
  grpc::Status s = stub.CreateJob(&ctx, r, &out);
  return s.ok() || s.error_code() == grpc::StatusCode::ALREADY_EXISTS;
}

v1::StreamStepsRequest Update(const std::string& tenant, const std::string& job, int64_t seq) {
  v1::StreamStepsRequest m;
  if (seq == 1) {
    m.set_tenant(tenant);
    m.set_job_id(job);
  }
  m.mutable_update()->set_seq(seq);
  m.mutable_update()->add_steps()->set_spec("gaussian:sigma=1000,count=1");
  return m;
}

double Pct(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

struct StreamOutcome {
  std::atomic<int> opened{0}, refused{0}, ended_by_server{0};
  std::atomic<int64_t> writes{0};
};

// idle and noread: one thread per stream.
void RunAbusive(const Options& o, bool read_acks) {
  StreamOutcome out;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < o.streams; ++i) channels.push_back(NewChannel(o.server, i));
  auto stub = v1::Ledger::NewStub(channels[0]);
  for (int i = 0; i < o.streams; ++i) {
    if (!CreateJob(*stub, Tenant(o, i), absl::StrFormat("s%d", i))) {
      std::cerr << "CreateJob failed\n";
      return;
    }
  }
  ProcStats peak = ReadProc(o.pid);
  const ProcStats before = peak;
  for (int i = 0; i < o.streams; ++i) {
    threads.emplace_back([&, i] {
      auto st = v1::Ledger::NewStub(channels[i]);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(o.seconds * 1000) + 60000));
      auto rw = st->StreamSteps(&ctx);
      const std::string tenant = Tenant(o, i), job = absl::StrFormat("s%d", i);
      if (read_acks) {
        v1::StepAck ack;
        if (!rw->Write(Update(tenant, job, 1)) || !rw->Read(&ack)) {
          out.refused++;
          ctx.TryCancel();
          rw->Finish();
          return;
        }
        out.opened++;
        while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        // The server may have ended it meanwhile (idle timeout).
        if (!rw->Write(Update(tenant, job, 2)) || !rw->Read(&ack)) out.ended_by_server++;
      } else {
        out.opened++;
        int64_t seq = 0;
        while (!stop && rw->Write(Update(tenant, job, ++seq))) out.writes++;
        if (!stop) out.ended_by_server++;
      }
      ctx.TryCancel();
      rw->Finish();
    });
  }
  const auto end = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(o.seconds * 1000));
  while (Clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    const ProcStats now = ReadProc(o.pid);
    peak.threads = std::max(peak.threads, now.threads);
    peak.rss_mb = std::max(peak.rss_mb, now.rss_mb);
  }
  const ProcStats at_end = ReadProc(o.pid);
  stop = true;
  for (std::thread& t : threads) t.join();
  std::printf(
      "scenario=%s streams=%d tenants=%d seconds=%.0f: %s=%d refused_or_failed=%d "
      "ended_by_server=%d writes=%lld | server threads before=%d peak=%d end=%d, rss_mb before=%.0f "
      "peak=%.0f end=%.0f\n",
      o.scenario.c_str(), o.streams, o.tenants, o.seconds, read_acks ? "acked_first" : "opened",
      out.opened.load(), out.refused.load(), out.ended_by_server.load(),
      static_cast<long long>(out.writes.load()), before.threads,
      peak.threads, at_end.threads, before.rss_mb, peak.rss_mb, at_end.rss_mb);
}

void RunFairness(const Options& o) {
  auto quiet_channel = NewChannel(o.server, -1);
  auto quiet = v1::Ledger::NewStub(quiet_channel);
  if (!CreateJob(*quiet, "quiet", "q")) return;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < o.streams; ++i) {
    channels.push_back(NewChannel(o.server, i));
    if (!CreateJob(*quiet, "busy", absl::StrFormat("b%d", i))) return;
  }
  std::atomic<bool> stop{false};
  std::atomic<int64_t> busy_acks{0};
  std::atomic<int> busy_refused{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < o.streams; ++i) {
    threads.emplace_back([&, i] {
      auto st = v1::Ledger::NewStub(channels[i]);
      grpc::ClientContext ctx;
      auto rw = st->StreamSteps(&ctx);
      const std::string job = absl::StrFormat("b%d", i);
      int64_t written = 0, acked = 0;
      v1::StepAck ack;
      while (!stop) {
        while (written - acked < o.window && rw->Write(Update("busy", job, ++written))) {
        }
        if (!rw->Read(&ack)) {
          busy_refused++;
          break;
        }
        ++acked;
        busy_acks++;
      }
      ctx.TryCancel();
      rw->Finish();
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let the busy ones ramp up
  std::vector<double> ms;
  int errors = 0;
  const auto start = Clock::now();
  const auto end = start + std::chrono::milliseconds(static_cast<int64_t>(o.seconds * 1000));
  for (int64_t seq = 1; Clock::now() < end; ++seq) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::AppendStepsRequest r;
    r.set_tenant("quiet");
    r.set_job_id("q");
    r.add_updates()->CopyFrom(Update("", "", seq).update());
    v1::AppendStepsResponse resp;
    const auto t0 = Clock::now();
    grpc::Status s = quiet->AppendSteps(&ctx, r, &resp);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if (!s.ok()) {
      ++errors;
      --seq;
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  stop = true;
  for (std::thread& t : threads) t.join();
  const size_t n = ms.size();
  std::printf(
      "scenario=fairness busy_streams=%d window=%d seconds=%.0f: quiet appends=%zu errors=%d "
      "p50=%.1f ms p90=%.1f ms p99=%.1f ms max=%.1f ms | busy acks/s=%.0f busy streams "
      "refused=%d\n",
      o.streams, o.window, o.seconds, n, errors, Pct(ms, 0.5), Pct(ms, 0.9), Pct(ms, 0.99),
      Pct(ms, 1.0), static_cast<double>(busy_acks.load()) / elapsed, busy_refused.load());
}

}  // namespace
}  // namespace dpledger::bench

int main(int argc, char** argv) {
  dpledger::bench::Options o;
  if (!dpledger::bench::ParseOptions(argc, argv, o)) {
    std::fputs(dpledger::bench::kUsage, stderr);
    return 2;
  }
  if (o.scenario == "fairness") {
    dpledger::bench::RunFairness(o);
  } else {
    dpledger::bench::RunAbusive(o, o.scenario == "idle");
  }
  return 0;
}
