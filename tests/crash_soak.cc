// dpledger_crash_soak (issue 16 "Crash soak"): several clients stream (StreamSteps) and
// append (unary AppendSteps, retried) on several jobs while dpledgerd is killed with SIGKILL
// at random moments; after every restart each invariant is checked on the quiesced system:
//   * each acknowledged update is in the ledger exactly once, as acknowledged (seqs 1..n, the
//     step that was sent, the spent bound and chain head of its ack): else "lost";
//   * nothing is charged twice: the job's num_steps and last_seq equal what the admitted
//     acks add up to, and the ledger holds no entry beyond them: else "double-charged";
//   * no job is above its budget: Spent at the budget's delta <= its epsilon: else "overspent";
//   * the store's integrity checks pass: SQLite's PRAGMA integrity_check on the killed
//     server's files (before the restart replays the WAL) and, on every backend, the
//     server's own start-up checks (--full-integrity-check, --replay-ledger: it refuses to
//     start on a chain or spent mismatch);
//   * answers equal an offline recomputation: `dpledger account --accountant analytic` on
//     the stored ledger's steps gives the server's Spent (analytic is exact for Gaussians).
//
// Each round: clients run; after a random delay (seeded) the server is SIGKILLed, restarted
// after a random pause (in --recovery-kills percent of the rounds it is first killed again
// 0-MAX ms into its restart, while it opens, checks or replays the store, and restarted once
// more), clients are paused (every update they sent resolved: acknowledged
// or refused, retrying through the restart), and the checks run. A job's budget holds a few
// hundred updates, so jobs fill up (refusals) and clients move on to new ones.
// The kill schedule is reproducible from --seed; client interleavings are not.
//
// Loopback only: dpledgerd and (with --store postgres) a throwaway PostgreSQL
// (server/test_postgres.h) on 127.0.0.1, with temporary directories removed at exit.
// Exit status: 0 all invariants held, 1 a violation, 2 bad usage or setup failure,
// 77 PostgreSQL asked for but not installed (ctest SKIP_RETURN_CODE).
//
//   dpledger_crash_soak --store sqlite --kills 60 --clients 4 --seed 1
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "client/client.h"
#include "server/test_postgres.h"
#include "tests/e2e_support.h"

namespace dpledger::e2e {
namespace {

namespace v1 = ::dpledger::v1;
using Clock = std::chrono::steady_clock;

constexpr double kBudgetEpsilon = 2.0;
constexpr double kBudgetDelta = 1e-6;

struct Options {
  std::string store = "sqlite";
  int kills = 50;
  int clients = 4;
  uint64_t seed = 1;
  int min_run_ms = 30, max_run_ms = 400;  // clients run this long before a kill
  int recovery_kill_percent = 50;          // rounds whose restart is itself killed ...
  int max_recovery_kill_ms = 300;          // ... this long (at most) into its start-up
  bool json = false;
};

// Step of update `seq`: two mechanisms alternate so a misplaced or doubled update changes
// the answer, not only the ledger's length.
std::string StepFor(int64_t seq) {
  return seq % 3 == 0 ? "gaussian:sigma=40,count=2" : "gaussian:sigma=60,count=1";
}
int64_t CountFor(int64_t seq) { return seq % 3 == 0 ? 2 : 1; }

// What the clients were told about one job.
struct JobRecord {
  std::map<int64_t, v1::StepAck> acked;  // admitted acks by seq
  bool exhausted = false;                // a refusal was seen
};

struct Figures {
  int kills = 0, recovery_kills = 0, rounds_checked = 0, jobs = 0;
  int64_t acknowledged = 0, refused = 0, lost = 0, double_charged = 0, overspent = 0;
  int64_t offline_mismatch = 0, integrity_failures = 0, reconnects = 0, retried_calls = 0;
  std::vector<std::string> violations;  // the first few, for the report
  void Violation(const std::string& what) {
    if (violations.size() < 20) violations.push_back(what);
  }
};

// Clients run while `running`; Pause() waits until each has resolved what it sent.
class Gate {
 public:
  void Run() {
    std::lock_guard<std::mutex> l(mu_);
    running_ = true;
    parked_ = 0;
    cv_.notify_all();
  }
  void Pause(int clients) {
    std::unique_lock<std::mutex> l(mu_);
    running_ = false;
    cv_.wait(l, [&] { return parked_ == clients; });
  }
  void Quit() {
    std::lock_guard<std::mutex> l(mu_);
    quit_ = true;
    running_ = true;
    cv_.notify_all();
  }
  bool running() const { return running_.load(); }
  // Called by a client with nothing unresolved; returns false at quit.
  bool Park() {
    std::unique_lock<std::mutex> l(mu_);
    ++parked_;
    cv_.notify_all();
    cv_.wait(l, [&] { return running_.load() || quit_; });
    return !quit_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> running_{false};
  bool quit_ = false;
  int parked_ = 0;
};

class Soak {
 public:
  explicit Soak(ServerProcess* server) : server_(server) {}

  void Client(int index) {
    client::ClientOptions co = server_->ClientOptionsFor();
    co.retry.max_attempts = 50;
    co.retry.initial_backoff_ms = 10;
    co.retry.max_backoff_ms = 200;
    co.timeout_ms = 5000;
    auto c = client::Client::Create(co);
    if (!c.ok()) {
      std::cerr << c.status() << "\n";
      std::abort();
    }
    const bool streaming = index % 2 == 0;
    int generation = 0;
    std::string job;
    if (!gate_.Park()) return;
    for (;;) {
      if (job.empty()) job = absl::StrFormat("c%d-j%d", index, generation++);
      // Create (idempotent on retry) until it succeeds; the job exists from then on.
      if (!EnsureJob(**c, job)) continue;
      const bool done = streaming ? StreamRound(**c, job) : UnaryRound(**c, job);
      if (done) job.clear();  // exhausted: a new job next time
      if (!gate_.running() && !gate_.Park()) return;
    }
  }

  Figures& figures() { return f_; }
  Gate& gate() { return gate_; }
  std::mutex& mu() { return mu_; }
  std::map<std::string, JobRecord>& jobs() { return jobs_; }
  std::set<std::string>& touched() { return touched_; }

 private:
  bool EnsureJob(client::Client& c, const std::string& job) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (jobs_.contains(job)) return true;
    }
    v1::CreateJobRequest r;
    r.set_job_id(job);
    r.mutable_budget()->set_epsilon(kBudgetEpsilon);
    r.mutable_budget()->set_delta(kBudgetDelta);
    r.set_schedule(v1::SCHEDULE_ADAPTIVE);
    r.set_filter("gdp");
    for (;;) {
      auto created = c.CreateJob(r);
      if (created.ok()) break;
      // An earlier call created it and its answer was lost (the client accepts that only
      // between the retries of one call): job ids are this client's own, so it is ours.
      if (created.status().code() == absl::StatusCode::kAlreadyExists) {
        auto existing = c.GetJob(job);
        if (existing.ok() && existing->budget().epsilon() == kBudgetEpsilon &&
            existing->budget().delta() == kBudgetDelta && existing->num_updates() == 0) {
          break;
        }
      }
      CountRetry(job, created.status());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::lock_guard<std::mutex> l(mu_);
    jobs_[job];
    touched_.insert(job);
    return true;
  }

  // Records an ack; returns false when the update was refused (the job is full).
  bool Record(const std::string& job, const v1::StepAck& ack) {
    std::lock_guard<std::mutex> l(mu_);
    JobRecord& r = jobs_[job];
    touched_.insert(job);
    if (ack.admitted()) {
      if (!r.acked.contains(ack.seq())) ++f_.acknowledged;
      r.acked[ack.seq()] = ack;
      return true;
    }
    if (!r.exhausted) ++f_.refused;
    r.exhausted = true;
    return false;
  }
  int64_t NextSeq(const std::string& job) {
    std::lock_guard<std::mutex> l(mu_);
    const JobRecord& r = jobs_[job];
    return r.acked.empty() ? 1 : r.acked.rbegin()->first + 1;
  }
  void CountRetry(const std::string& job, const absl::Status& why) {
    std::lock_guard<std::mutex> l(mu_);
    // Every 50th retry is logged: a retry loop that never resolves shows what it meets.
    if (++f_.retried_calls % 50 == 0) {
      std::cerr << absl::StrFormat("retry %d (%s): %s\n", f_.retried_calls, job, why.ToString());
    }
  }

  // Appends one update at a time with the client's retries; an update whose call failed is
  // resent (same seq, same step) until it is resolved. True when the job is exhausted.
  bool UnaryRound(client::Client& c, const std::string& job) {
    int64_t seq = NextSeq(job);
    for (;;) {
      auto ack = c.AppendStep(job, seq, {StepFor(seq)});
      if (!ack.ok() || !client::AckStatus(*ack).ok()) {
        CountRetry(job, ack.ok() ? client::AckStatus(*ack) : ack.status());
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;  // unresolved: the same seq again, even when pausing
      }
      if (!Record(job, *ack)) return true;
      ++seq;
      if (!gate_.running()) return false;
    }
  }

  // Streams with a window of updates in flight until paused or refused; a broken stream is
  // reopened from the last acknowledged seq. True when the job is exhausted.
  bool StreamRound(client::Client& c, const std::string& job) {
    constexpr int kWindow = 32;
    for (;;) {
      auto stream = c.OpenStream(job);
      int64_t next = NextSeq(job);
      int64_t written = next - 1, read = next - 1;
      bool broken = false, refused = false;
      absl::Status why;
      while (!broken) {
        while (!refused && gate_.running() && written - read < kWindow) {
          v1::StepUpdate u;
          u.set_seq(++written);
          u.add_steps()->set_spec(StepFor(written));
          if (why = stream->Write(u); !why.ok()) {
            broken = true;
            break;
          }
        }
        if (broken || read == written) break;
        auto ack = stream->Read();
        if (!ack.ok()) {
          why = ack.status();
          broken = true;
          break;
        }
        ++read;
        if (refused) continue;  // acks after a refusal are gaps
        if (why = client::AckStatus(*ack); !why.ok()) {
          broken = true;  // resend from the last admitted seq
          break;
        }
        if (!Record(job, *ack)) refused = true;
      }
      {
        std::lock_guard<std::mutex> l(mu_);
        f_.reconnects += stream->reconnects();
      }
      if (broken && refused) return true;
      if (broken) {
        stream.reset();
        CountRetry(job, why);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      (void)stream->Close();
      return refused;
    }
  }

  ServerProcess* server_;
  Gate gate_;
  std::mutex mu_;
  Figures f_;
  std::map<std::string, JobRecord> jobs_;
  std::set<std::string> touched_;
};

// PRAGMA integrity_check on the files a killed server left (its WAL included).
std::string SqliteIntegrity(const std::string& path) {
  sqlite3* db = nullptr;
  std::string result;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    result = absl::StrFormat("open: %s", sqlite3_errmsg(db));
  } else {
    sqlite3_stmt* q = nullptr;
    sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, nullptr);
    while (sqlite3_step(q) == SQLITE_ROW) {
      result += reinterpret_cast<const char*>(sqlite3_column_text(q, 0));
    }
    sqlite3_finalize(q);
  }
  sqlite3_close(db);
  return result;
}

absl::StatusOr<std::vector<v1::LedgerEntry>> FullLedger(client::Client& c,
                                                        const std::string& job) {
  std::vector<v1::LedgerEntry> all;
  v1::GetLedgerRequest request;
  request.set_job_id(job);
  for (;;) {
    auto r = c.GetLedger(request);
    if (!r.ok()) return r.status();
    for (const v1::LedgerEntry& e : r->entries()) all.push_back(e);
    if (!r->more() || r->entries_size() == 0) return all;
    request.set_after_seq(r->entries(r->entries_size() - 1).seq());
  }
}

// The checks of one job on the quiesced server; violations are counted in `f`.
void CheckJob(client::Client& c, const std::string& job, const JobRecord& rec, bool full,
              Figures& f) {
  int64_t want_steps = 0;
  for (const auto& [seq, ack] : rec.acked) want_steps += CountFor(seq);
  const int64_t want_last = rec.acked.empty() ? 0 : rec.acked.rbegin()->first;
  if (want_last != static_cast<int64_t>(rec.acked.size())) {
    f.Violation(absl::StrFormat("%s: acks are not contiguous", job));
  }
  auto j = c.GetJob(job);
  if (!j.ok()) {
    ++f.lost;
    f.Violation(absl::StrFormat("%s: GetJob: %s", job, j.status().ToString()));
    return;
  }
  if (j->num_steps() > want_steps || j->last_seq() > want_last) {
    ++f.double_charged;
    f.Violation(absl::StrFormat("%s: num_steps %d last_seq %d, acknowledged %d and %d", job,
                                j->num_steps(), j->last_seq(), want_steps, want_last));
  } else if (j->num_steps() < want_steps || j->last_seq() < want_last) {
    f.lost += want_last - j->last_seq();
    f.Violation(absl::StrFormat("%s: num_steps %d last_seq %d, acknowledged %d and %d", job,
                                j->num_steps(), j->last_seq(), want_steps, want_last));
  }
  if (!full) return;
  auto ledger = FullLedger(c, job);
  if (!ledger.ok()) {
    f.Violation(absl::StrFormat("%s: GetLedger: %s", job, ledger.status().ToString()));
    ++f.lost;
    return;
  }
  std::vector<std::string> argv = {CliBinary(), "account", "--accountant", "analytic",
                                   "--delta", "1e-6", "--json"};
  int64_t expected_seq = 1;
  for (const v1::LedgerEntry& e : *ledger) {
    const std::string spec = e.steps_size() == 1 ? e.steps(0).spec() : "?";
    argv.push_back("--step");
    argv.push_back(spec);
    auto it = rec.acked.find(e.seq());
    if (e.seq() != expected_seq++ || it == rec.acked.end()) {
      ++f.double_charged;  // durable but never acknowledged (every sent update is resolved)
      f.Violation(absl::StrFormat("%s: ledger seq %d unexpected", job, e.seq()));
      continue;
    }
    if (it->second.spent().upper() != e.spent().upper() ||
        it->second.chain_head() != e.chain_head() || it->second.num_steps() != e.num_steps_after()) {
      ++f.lost;  // what was acknowledged is not what is stored
      f.Violation(absl::StrFormat("%s: seq %d differs from its ack", job, e.seq()));
    }
  }
  if (static_cast<int64_t>(ledger->size()) < want_last) {
    f.lost += want_last - static_cast<int64_t>(ledger->size());
    f.Violation(absl::StrFormat("%s: ledger has %d entries, %d acknowledged", job,
                                ledger->size(), want_last));
  }
  if (ledger->empty()) return;
  v1::SpentRequest sr;
  sr.set_job_id(job);
  sr.set_delta(kBudgetDelta);
  sr.set_accountant("analytic");
  auto spent = c.Spent(sr);
  if (!spent.ok()) {
    f.Violation(absl::StrFormat("%s: Spent: %s", job, spent.status().ToString()));
    ++f.offline_mismatch;
    return;
  }
  if (spent->epsilon().upper() > kBudgetEpsilon) {
    ++f.overspent;
    f.Violation(absl::StrFormat("%s: spent %.17g above budget %g", job,
                                spent->epsilon().upper(), kBudgetEpsilon));
  }
  const CommandResult offline = RunCommand(argv);
  double upper = -1;
  try {
    upper = nlohmann::json::parse(offline.out).at("epsilon").at("upper").get<double>();
  } catch (const std::exception& e) {
    f.Violation(absl::StrFormat("%s: dpledger account: exit %d %s %s", job, offline.exit_code,
                                offline.out, offline.err));
  }
  if (std::abs(upper - spent->epsilon().upper()) > 1e-12 * std::abs(upper)) {
    ++f.offline_mismatch;
    f.Violation(absl::StrFormat("%s: Spent %.17g, offline %.17g", job,
                                spent->epsilon().upper(), upper));
  }
}

bool ParseOptions(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--json") {
      o.json = true;
      continue;
    }
    if (i + 1 >= argc) return false;
    const std::string v = argv[++i];
    bool ok = true;
    if (flag == "--store") {
      o.store = v;
      ok = v == "sqlite" || v == "postgres";
    } else if (flag == "--kills") {
      ok = absl::SimpleAtoi(v, &o.kills) && o.kills >= 1 && o.kills <= 100000;
    } else if (flag == "--clients") {
      ok = absl::SimpleAtoi(v, &o.clients) && o.clients >= 1 && o.clients <= 64;
    } else if (flag == "--seed") {
      ok = absl::SimpleAtoi(v, &o.seed);
    } else if (flag == "--recovery-kills") {
      ok = absl::SimpleAtoi(v, &o.recovery_kill_percent) && o.recovery_kill_percent >= 0 &&
           o.recovery_kill_percent <= 100;
    } else if (flag == "--max-recovery-kill-ms") {
      ok = absl::SimpleAtoi(v, &o.max_recovery_kill_ms) && o.max_recovery_kill_ms >= 0;
    } else if (flag == "--max-run-ms") {
      ok = absl::SimpleAtoi(v, &o.max_run_ms) && o.max_run_ms >= o.min_run_ms;
    } else {
      ok = false;
    }
    if (!ok) {
      std::cerr << "dpledger_crash_soak: bad value for " << flag << ": '" << v << "'\n";
      return false;
    }
  }
  return true;
}

int Main(int argc, char** argv) {
  Options o;
  if (!ParseOptions(argc, argv, o)) {
    std::cerr << "usage: dpledger_crash_soak [--store sqlite|postgres] [--kills N] "
                 "[--clients N] [--seed S] [--max-run-ms MS] [--recovery-kills PERCENT] "
                 "[--max-recovery-kill-ms MS] [--json]\n";
    return 2;
  }
  TempDir dir;
  ServerConfig config;
  config.data_dir = dir.File("data");
  config.extra_args = {"--full-integrity-check", "--replay-ledger"};
  std::unique_ptr<server::testing::TestPostgres> pg;
  if (o.store == "postgres") {
    if (const std::string why = server::testing::PostgresUnavailableReason(); !why.empty()) {
      std::cerr << "dpledger_crash_soak: skipped: " << why << "\n";
      return 77;
    }
    auto started = server::testing::TestPostgres::Start();
    if (!started.ok()) {
      std::cerr << "dpledger_crash_soak: postgres: " << started.status() << "\n";
      return 2;
    }
    pg = *std::move(started);
    auto url = pg->CreateDatabase();
    if (!url.ok()) {
      std::cerr << "dpledger_crash_soak: postgres: " << url.status() << "\n";
      return 2;
    }
    config.extra_args.insert(config.extra_args.end(),
                             {"--store", "postgres", "--postgres-url", *url});
  }
  ServerProcess server(config);
  if (absl::Status s = server.Start(); !s.ok()) {
    std::cerr << "dpledger_crash_soak: start: " << s << "\n" << server.LogTail();
    return 2;
  }
  Soak soak(&server);
  std::vector<std::thread> clients;
  for (int i = 0; i < o.clients; ++i) clients.emplace_back([&soak, i] { soak.Client(i); });
  soak.gate().Pause(o.clients);  // every client started and parked

  auto checker = client::Client::Create(server.ClientOptionsFor());
  if (!checker.ok()) return 2;
  std::mt19937_64 rng(o.seed);
  Figures& f = soak.figures();
  const auto start = Clock::now();
  const std::string db_path = config.data_dir + "/ledger.db";
  bool stopped_early = false;
  for (int round = 0; round < o.kills; ++round) {
    soak.gate().Run();
    std::this_thread::sleep_for(std::chrono::milliseconds(
        std::uniform_int_distribution<int>(o.min_run_ms, o.max_run_ms)(rng)));
    server.Kill9();
    ++f.kills;
    auto check_files = [&](const char* when) {
      if (o.store != "sqlite") return;
      if (const std::string r = SqliteIntegrity(db_path); r != "ok") {
        ++f.integrity_failures;
        f.Violation(absl::StrFormat("kill %d%s: integrity_check: %s", f.kills, when, r));
      }
    };
    check_files("");
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 100)(rng)));
    // A crash during recovery: the restart is killed while it opens, checks (--full-
    // integrity-check) or replays (--replay-ledger) the store, or just after it serves.
    if (o.recovery_kill_percent > 0 &&
        std::uniform_int_distribution<int>(0, 99)(rng) < o.recovery_kill_percent) {
      const int after_ms = std::uniform_int_distribution<int>(0, o.max_recovery_kill_ms)(rng);
      if (absl::Status s = server.Launch(); !s.ok()) {
        f.Violation(absl::StrFormat("launch after kill %d: %s", f.kills, s.ToString()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(after_ms));
      server.Kill9();
      ++f.recovery_kills;
      check_files(" (during recovery)");
    }
    if (absl::Status s = server.Start(); !s.ok()) {
      // The server's own start-up checks (integrity, chain, replay) refused the store.
      ++f.integrity_failures;
      f.Violation(absl::StrFormat("restart after kill %d: %s\n%s", f.kills, s.ToString(),
                                  server.LogTail()));
      stopped_early = true;
      break;
    }
    soak.gate().Pause(o.clients);
    // Quiesced: every update sent has been answered. Full checks of the jobs touched this
    // round, counters of all jobs.
    std::lock_guard<std::mutex> l(soak.mu());
    for (const auto& [job, rec] : soak.jobs()) {
      CheckJob(**checker, job, rec, soak.touched().contains(job), f);
    }
    soak.touched().clear();
    ++f.rounds_checked;
  }
  soak.gate().Quit();
  for (std::thread& t : clients) t.join();
  // The checker itself can fail: a forged extra ack must count as lost, a forgotten one as
  // double-charged (the server holds what the forged record does not).
  bool checker_ok = false;
  for (const auto& [job, rec] : soak.jobs()) {
    if (rec.acked.empty() || stopped_early) continue;
    JobRecord forged = rec;
    v1::StepAck extra = rec.acked.rbegin()->second;
    extra.set_seq(extra.seq() + 1);
    forged.acked[extra.seq()] = extra;
    Figures lost, doubled;
    CheckJob(**checker, job, forged, true, lost);
    forged = rec;
    forged.acked.erase(std::prev(forged.acked.end()));
    CheckJob(**checker, job, forged, true, doubled);
    checker_ok = lost.lost > 0 && doubled.double_charged > 0;
    if (!checker_ok) f.Violation("the checker missed a forged loss or double charge");
    break;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  f.jobs = static_cast<int>(soak.jobs().size());
  if (!stopped_early) {
    if (absl::Status s = server.Stop(); !s.ok()) f.Violation("graceful stop: " + s.ToString());
  }
  const bool ok = checker_ok && f.lost == 0 && f.double_charged == 0 && f.overspent == 0 &&
                  f.offline_mismatch == 0 && f.integrity_failures == 0 && f.violations.empty();
  nlohmann::json out = {{"store", o.store},
                        {"seed", o.seed},
                        {"clients", o.clients},
                        {"kills", f.kills},
                        {"recovery_kills", f.recovery_kills},
                        {"rounds_checked", f.rounds_checked},
                        {"jobs", f.jobs},
                        {"acknowledged", f.acknowledged},
                        {"refused", f.refused},
                        {"lost", f.lost},
                        {"double_charged", f.double_charged},
                        {"overspent", f.overspent},
                        {"offline_mismatch", f.offline_mismatch},
                        {"integrity_failures", f.integrity_failures},
                        {"stream_reconnects", f.reconnects},
                        {"retried_calls", f.retried_calls},
                        {"checker_self_test", checker_ok},
                        {"seconds", seconds},
                        {"ok", ok}};
  if (o.json) {
    std::cout << out.dump() << "\n";
  } else {
    std::cout << absl::StrFormat(
        "crash soak (%s, seed %d, %d clients): %d kills (and %d during recovery), %d jobs, %d "
        "updates acknowledged, %d refused; lost %d, double-charged %d, overspent %d, offline "
        "mismatches %d, integrity failures %d (%.1f s)\n",
        o.store, o.seed, o.clients, f.kills, f.recovery_kills, f.jobs, f.acknowledged, f.refused,
        f.lost, f.double_charged, f.overspent, f.offline_mismatch, f.integrity_failures, seconds);
  }
  for (const std::string& v : f.violations) std::cerr << "VIOLATION: " << v << "\n";
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace dpledger::e2e

int main(int argc, char** argv) { return dpledger::e2e::Main(argc, argv); }
