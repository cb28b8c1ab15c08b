// dpledger_load: a bounded load generator for durable step appends (issue 4
// "bench/"). Starts its own dpledgerd on 127.0.0.1 with a temporary data
// directory (or uses --server, which must be a loopback address), creates one job
// per client, and appends updates until --updates in total or --seconds have
// passed, whichever comes first. Every ack it counts was durable (the server
// acknowledges only after its commit's fsync).
//
// Reports appends per second and ack latency percentiles (p50, p90, p99, max):
//   unary   one AppendSteps call per update; latency = the call
//   stream  StreamSteps with --window updates in flight; latency = write to ack
// and, from the spawned servers' /metrics, where the time goes: group commits (count, mean
// duration, mean batches per commit) and the share of the run spent committing.
//
// Store (issue 12): --store sqlite (default) or postgres; with postgres, --replicas N spawns N
// dpledgerd on one database and client i talks to replica i mod N (its own job, so each job
// has one writer). The database is --postgres-url (loopback only) or, without it, a
// throwaway server started here like the tests' (server/test_postgres.h).
//
//   dpledger_load --dpledgerd build/server/dpledgerd --mode stream --clients 4
//   dpledger_load --dpledgerd build/server/dpledgerd --store postgres --replicas 3 --clients 6
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "client/client.h"
#ifdef DPLEDGER_LOAD_TEST_POSTGRES
#include "server/test_postgres.h"
#endif

namespace dpledger::bench {
namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = ::dpledger::v1;

struct Options {
  std::string dpledgerd;  // spawn this server binary (default)
  std::string server;     // or use this running server (loopback only)
  std::string mode = "stream";
  int clients = 4;
  int window = 64;
  int64_t updates = 20000;  // total cap
  double seconds = 20;      // time cap
  std::string step = "gaussian:sigma=1000,count=1";
  std::string accountant = "analytic";
  std::string store = "sqlite";
  std::string postgres_url;  // empty with store=postgres: a throwaway server
  int replicas = 1;
  bool json = false;
};

constexpr char kUsage[] =
    "usage: dpledger_load (--dpledgerd PATH | --server 127.0.0.1:PORT) [--mode unary|stream]\n"
    "         [--clients N] [--window W] [--updates N] [--seconds S] [--step SPEC]\n"
    "         [--accountant NAME] [--store sqlite|postgres [--postgres-url URL] [--replicas N]]\n"
    "         [--json]\n";

// The host of a libpq URI (postgresql://[user[:pw]@]host[:port]/db), "" for a socket.
std::string UrlHost(const std::string& url) {
  size_t start = url.find("://");
  if (start == std::string::npos) return "?";
  start += 3;
  const size_t end = url.find_first_of("/?", start);
  std::string authority = url.substr(start, end == std::string::npos ? std::string::npos : end - start);
  if (const size_t at = authority.rfind('@'); at != std::string::npos) authority = authority.substr(at + 1);
  return authority.substr(0, authority.find(':'));
}

bool ParseOptions(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--json") {
      o.json = true;
      continue;
    }
    if (i + 1 >= argc) return false;
    const std::string value = argv[++i];
    bool ok = true;
    if (flag == "--dpledgerd") {
      o.dpledgerd = value;
    } else if (flag == "--server") {
      o.server = value;
    } else if (flag == "--mode") {
      o.mode = value;
    } else if (flag == "--clients") {
      ok = absl::SimpleAtoi(value, &o.clients) && o.clients >= 1 && o.clients <= 256;
    } else if (flag == "--window") {
      ok = absl::SimpleAtoi(value, &o.window) && o.window >= 1 && o.window <= 1024;
    } else if (flag == "--updates") {
      ok = absl::SimpleAtoi(value, &o.updates) && o.updates >= 1 && o.updates <= 10'000'000;
    } else if (flag == "--seconds") {
      ok = absl::SimpleAtod(value, &o.seconds) && o.seconds > 0 && o.seconds <= 600;
    } else if (flag == "--step") {
      o.step = value;
    } else if (flag == "--accountant") {
      o.accountant = value;
    } else if (flag == "--store") {
      o.store = value;
      ok = value == "sqlite" || value == "postgres";
    } else if (flag == "--postgres-url") {
      o.postgres_url = value;
      const std::string host = UrlHost(value);
      ok = host.empty() || host == "127.0.0.1" || host == "localhost";  // loopback only
    } else if (flag == "--replicas") {
      ok = absl::SimpleAtoi(value, &o.replicas) && o.replicas >= 1 && o.replicas <= 16;
    } else {
      std::cerr << "dpledger_load: unknown flag " << flag << "\n";
      return false;
    }
    if (!ok) {
      std::cerr << "dpledger_load: bad value for " << flag << ": '" << value << "'\n";
      return false;
    }
  }
  if (o.mode != "unary" && o.mode != "stream") return false;
  if (o.dpledgerd.empty() == o.server.empty()) return false;
  if (o.replicas > 1 && o.store != "postgres") {
    std::cerr << "dpledger_load: --replicas > 1 needs --store postgres (SQLite has one writer)\n";
    return false;
  }
  // Loopback only: this tool must never load a shared server.
  if (!o.server.empty() && o.server.rfind("127.0.0.1:", 0) != 0 &&
      o.server.rfind("localhost:", 0) != 0 && o.server.rfind("[::1]:", 0) != 0) {
    std::cerr << "dpledger_load: --server must be a loopback address, got " << o.server << "\n";
    return false;
  }
  return true;
}

// A port on 127.0.0.1 that was free a moment ago (0 on failure).
int PickFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// A dpledgerd child on a free loopback port; stopped on destruction.
class SpawnedServer {
 public:
  ~SpawnedServer() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status;
      waitpid(pid_, &status, 0);
    }
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  absl::StatusOr<std::string> Start(const std::string& binary,
                                    const std::vector<std::string>& extra_args) {
    char tmpl[] = "/tmp/dpledger-load-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return absl::InternalError("mkdtemp failed");
    dir_ = tmpl;
    for (int attempt = 0; attempt < 5; ++attempt) {
      const std::string address = absl::StrFormat("127.0.0.1:%d", PickFreePort());
      const std::string metrics = absl::StrFormat("127.0.0.1:%d", PickFreePort());
      const std::string data = dir_ + "/data", log = dir_ + "/dpledgerd.log";
      std::vector<std::string> args = {binary, "--listen",         address, "--data-dir",
                                       data,   "--metrics-listen", metrics, "--insecure"};
      args.insert(args.end(), extra_args.begin(), extra_args.end());
      metrics_ = metrics;
      std::vector<char*> cargs;
      for (std::string& a : args) cargs.push_back(a.data());
      cargs.push_back(nullptr);
      const pid_t pid = fork();
      if (pid < 0) return absl::InternalError("fork failed");
      if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (FILE* f = std::freopen(log.c_str(), "a", stdout)) dup2(fileno(f), STDERR_FILENO);
        execv(cargs[0], cargs.data());
        _exit(127);
      }
      pid_ = pid;
      client::ClientOptions probe;
      probe.target = address;
      probe.retry.max_attempts = 1;
      auto c = client::Client::Create(probe);
      if (!c.ok()) return c.status();
      for (int i = 0; i < 300; ++i) {
        int status;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
          pid_ = -1;
          break;  // could not bind: next port
        }
        (*c)->WaitForConnected(100);  // drives the connection attempt
        if ((*c)->CheckHealth("", 1000).ok()) return address;
      }
      if (pid_ > 0) return absl::DeadlineExceededError("dpledgerd did not become healthy");
    }
    return absl::UnavailableError("dpledgerd could not start (see " + dir_ + "/dpledgerd.log)");
  }

  const std::string& metrics_address() const { return metrics_; }

 private:
  pid_t pid_ = -1;
  std::string dir_;
  std::string metrics_;
};

// The value of a Prometheus sample `name` (no labels) at http://address/metrics, or -1.
double ScrapeMetric(const std::string& address, const std::string& name) {
  const size_t colon = address.rfind(':');
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || colon == std::string::npos) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::atoi(address.c_str() + colon + 1)));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string body;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[65536];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) body.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  const std::string key = "\n" + name + " ";
  const size_t at = body.find(key);
  if (at == std::string::npos) return -1;
  return std::atof(body.c_str() + at + key.size());
}

struct ClientResult {
  std::vector<double> latencies_ms;
  int64_t refused = 0;
  absl::Status status;
};

// One client: its own job, updates until the shared budget of updates or time runs out.
void RunClient(const Options& o, const std::string& target, int index,
               std::atomic<int64_t>& remaining, Clock::time_point deadline, ClientResult& out) {
  client::ClientOptions co;
  co.target = target;
  auto c = client::Client::Create(co);
  if (!c.ok()) {
    out.status = c.status();
    return;
  }
  const std::string job_id = absl::StrFormat("load-%d-%d", getpid(), index);
  v1::CreateJobRequest create;
  create.set_job_id(job_id);
  create.mutable_budget()->set_epsilon(1e6);
  create.mutable_budget()->set_delta(0.5);
  create.set_accountant(o.accountant);
  if (auto j = (*c)->CreateJob(create); !j.ok()) {
    out.status = j.status();
    return;
  }
  auto take = [&] { return Clock::now() < deadline && remaining.fetch_sub(1) > 0; };
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  int64_t seq = 0;
  if (o.mode == "unary") {
    while (take()) {
      const auto t0 = Clock::now();
      auto ack = (*c)->AppendStep(job_id, ++seq, {o.step});
      if (!ack.ok()) {
        out.status = ack.status();
        return;
      }
      out.latencies_ms.push_back(ms_since(t0));
      if (!ack->admitted()) ++out.refused;
    }
    return;
  }
  auto stream = (*c)->OpenStream(job_id);
  std::deque<Clock::time_point> sent;
  v1::StepUpdate u;
  u.add_steps()->set_spec(o.step);
  bool more = true;
  while (more || !sent.empty()) {
    while (more && static_cast<int>(sent.size()) < o.window) {
      if (!take()) {
        more = false;
        break;
      }
      u.set_seq(++seq);
      sent.push_back(Clock::now());
      if (absl::Status s = stream->Write(u); !s.ok()) {
        out.status = s;
        return;
      }
    }
    if (sent.empty()) break;
    auto ack = stream->Read();
    if (!ack.ok()) {
      out.status = ack.status();
      return;
    }
    out.latencies_ms.push_back(ms_since(sent.front()));
    sent.pop_front();
    if (!ack->admitted()) ++out.refused;
  }
  out.status = stream->Close();
}

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(p * (sorted.size() - 1) + 0.5));
  return sorted[i];
}

int Main(int argc, char** argv) {
  Options o;
  if (!ParseOptions(argc, argv, o)) {
    std::cerr << kUsage;
    return 2;
  }
#ifdef DPLEDGER_LOAD_TEST_POSTGRES
  std::unique_ptr<server::testing::TestPostgres> database;
  if (o.store == "postgres" && o.postgres_url.empty() && o.server.empty()) {
    auto pg = server::testing::TestPostgres::Start();
    auto url = pg.ok() ? (*pg)->CreateDatabase() : absl::StatusOr<std::string>(pg.status());
    if (!url.ok()) {
      std::cerr << "dpledger_load: throwaway postgres: " << url.status().message() << "\n";
      return 1;
    }
    database = std::move(*pg);
    o.postgres_url = *url;
  }
#endif
  if (o.store == "postgres" && o.postgres_url.empty() && o.server.empty()) {
    std::cerr << "dpledger_load: --store postgres needs --postgres-url (built without tests)\n";
    return 1;
  }
  std::vector<std::string> store_args = {"--store", o.store};
  if (o.store == "postgres") {
    store_args.insert(store_args.end(), {"--postgres-url", o.postgres_url});
  }
  std::vector<std::unique_ptr<SpawnedServer>> spawned;
  std::vector<std::string> targets;
  if (!o.server.empty()) targets.push_back(o.server);
  for (int r = 0; o.server.empty() && r < o.replicas; ++r) {
    spawned.push_back(std::make_unique<SpawnedServer>());
    auto address = spawned.back()->Start(o.dpledgerd, store_args);
    if (!address.ok()) {
      std::cerr << "dpledger_load: " << address.status().message() << "\n";
      return 1;
    }
    targets.push_back(*address);
  }
  std::atomic<int64_t> remaining{o.updates};
  std::vector<ClientResult> results(o.clients);
  const auto t0 = Clock::now();
  const auto deadline =
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  std::vector<std::thread> threads;
  for (int i = 0; i < o.clients; ++i) {
    threads.emplace_back(RunClient, std::cref(o), std::cref(targets[i % targets.size()]), i,
                         std::ref(remaining), deadline, std::ref(results[i]));
  }
  for (std::thread& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();

  std::vector<double> all;
  int64_t refused = 0;
  for (const ClientResult& r : results) {
    if (!r.status.ok()) {
      std::cerr << "dpledger_load: client failed: " << r.status << "\n";
      return 1;
    }
    all.insert(all.end(), r.latencies_ms.begin(), r.latencies_ms.end());
    refused += r.refused;
  }
  std::sort(all.begin(), all.end());
  const double rate = all.size() / elapsed;
  // Where the time goes: the replicas' group commits (summed over replicas).
  double commits = 0, commit_seconds = 0, commit_batches = 0;
  for (const auto& s : spawned) {
    commits += std::max(0.0, ScrapeMetric(s->metrics_address(), "dpledger_store_commit_seconds_count"));
    commit_seconds += std::max(0.0, ScrapeMetric(s->metrics_address(), "dpledger_store_commit_seconds_sum"));
    commit_batches += std::max(0.0, ScrapeMetric(s->metrics_address(), "dpledger_store_commit_batches_sum"));
  }
  const double commit_ms = commits > 0 ? 1000 * commit_seconds / commits : 0;
  const double batches_per_commit = commits > 0 ? commit_batches / commits : 0;
  // Share of each replica's wall time its committer thread spent inside Store::Apply.
  const double commit_busy = spawned.empty() ? 0 : commit_seconds / (elapsed * spawned.size());
  if (o.json) {
    nlohmann::ordered_json j = {{"mode", o.mode},
                                {"store", o.store},
                                {"replicas", static_cast<int>(targets.size())},
                                {"clients", o.clients},
                                {"window", o.mode == "stream" ? o.window : 1},
                                {"step", o.step},
                                {"accountant", o.accountant},
                                {"acks", all.size()},
                                {"refused", refused},
                                {"seconds", elapsed},
                                {"appends_per_second", rate},
                                {"latency_ms",
                                 {{"p50", Percentile(all, 0.50)},
                                  {"p90", Percentile(all, 0.90)},
                                  {"p99", Percentile(all, 0.99)},
                                  {"max", all.empty() ? 0.0 : all.back()}}},
                                {"commits", commits},
                                {"commit_ms_mean", commit_ms},
                                {"batches_per_commit", batches_per_commit},
                                {"committer_busy", commit_busy}};
    std::cout << j.dump() << "\n";
  } else {
    std::printf("store %s, %zu replica(s); ", o.store.c_str(), targets.size());
    std::printf("mode %s, %d clients%s, step %s (%s)\n", o.mode.c_str(), o.clients,
                o.mode == "stream" ? absl::StrFormat(", window %d", o.window).c_str() : "",
                o.step.c_str(), o.accountant.c_str());
    std::printf("%zu durable appends in %.2f s: %.0f appends/s (%lld refused)\n", all.size(),
                elapsed, rate, static_cast<long long>(refused));
    std::printf("ack latency ms: p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n", Percentile(all, 0.5),
                Percentile(all, 0.9), Percentile(all, 0.99), all.empty() ? 0.0 : all.back());
    if (commits > 0) {
      std::printf("group commits: %.0f, mean %.3f ms, %.1f write batches each; committer "
                  "busy %.0f%% of the run\n",
                  commits, commit_ms, batches_per_commit, 100 * commit_busy);
    }
  }
  return 0;
}

}  // namespace
}  // namespace dpledger::bench

int main(int argc, char** argv) { return dpledger::bench::Main(argc, argv); }
