#include "server/postgres_store.h"

#include <libpq-fe.h>

#include <algorithm>
#include <map>

#include "absl/strings/str_format.h"
#include "server/postgres_schema.h"
#include "server/postgres_util.h"
#include "spdlog/spdlog.h"

namespace dpledger::server {
namespace {

using pg::Params;
using pg::Result;

constexpr std::string_view kJobColumns =
    "tenant, job_id, budget_epsilon, budget_delta, neighbouring, accountant, mc_seed, "
    "mc_num_samples, state, create_time_ms, close_time_ms, evr_state, evr_note, schedule, "
    "admission, plan, rdp_order";
constexpr int kJobColumnCount = 17;

void AddJob(Params& p, const JobRow& j) {
  p.Add(j.key.tenant).Add(j.key.job_id).Add(j.budget_epsilon).Add(j.budget_delta)
      .Add(static_cast<int>(j.neighbouring)).Add(j.accountant).Add(j.mc_seed)
      .Add(j.mc_num_samples).Add(static_cast<int>(j.state)).Add(j.create_time_ms)
      .Add(j.close_time_ms).Add(static_cast<int>(j.evr_state)).Add(j.evr_note)
      .Add(static_cast<int>(j.schedule)).Add(static_cast<int>(j.admission)).Add(j.plan)
      .Add(j.rdp_order);
}

JobRow ReadJob(const PGresult* r, int row) {
  JobRow j;
  j.key = {pg::Text(r, row, 0), pg::Text(r, row, 1)};
  j.budget_epsilon = pg::Real(r, row, 2);
  j.budget_delta = pg::Real(r, row, 3);
  j.neighbouring = static_cast<Neighbouring>(pg::Int(r, row, 4));
  j.accountant = pg::Text(r, row, 5);
  j.mc_seed = static_cast<uint64_t>(pg::Int(r, row, 6));
  j.mc_num_samples = pg::Int(r, row, 7);
  j.state = static_cast<JobState>(pg::Int(r, row, 8));
  j.create_time_ms = pg::Int(r, row, 9);
  j.close_time_ms = pg::Int(r, row, 10);
  j.evr_state = static_cast<EvrState>(pg::Int(r, row, 11));
  j.evr_note = pg::Text(r, row, 12);
  j.schedule = static_cast<Schedule>(pg::Int(r, row, 13));
  j.admission = static_cast<AdmissionKind>(pg::Int(r, row, 14));
  j.plan = pg::Text(r, row, 15);
  j.rdp_order = pg::Real(r, row, 16);
  return j;
}

constexpr std::string_view kUpdateColumns =
    "tenant, job_id, seq, steps, spent_lower, spent_estimate, spent_upper, guarantee, "
    "failure_probability, num_steps_after, commit_time_ms, chain";
constexpr int kUpdateColumnCount = 12;

void AddUpdate(Params& p, const UpdateRow& u) {
  p.Add(u.key.tenant).Add(u.key.job_id).Add(u.seq).Add(u.steps).Add(u.spent.lower)
      .Add(u.spent.estimate).Add(u.spent.upper).Add(static_cast<int>(u.spent.guarantee))
      .Add(u.spent.failure_probability).Add(u.num_steps_after).Add(u.commit_time_ms)
      .Add(u.chain);
}

UpdateRow ReadUpdate(const PGresult* r, int row) {
  UpdateRow u;
  u.key = {pg::Text(r, row, 0), pg::Text(r, row, 1)};
  u.seq = pg::Int(r, row, 2);
  u.steps = pg::Text(r, row, 3);
  u.spent.lower = pg::Real(r, row, 4);
  u.spent.estimate = pg::Real(r, row, 5);
  u.spent.upper = pg::Real(r, row, 6);
  u.spent.guarantee = static_cast<core::Guarantee>(pg::Int(r, row, 7));
  u.spent.failure_probability = pg::Real(r, row, 8);
  u.num_steps_after = pg::Int(r, row, 9);
  u.commit_time_ms = pg::Int(r, row, 10);
  u.chain = pg::Text(r, row, 11);
  return u;
}

constexpr std::string_view kReleaseColumns =
    "release_id, tenant, job_id, request_id, epsilon, delta, delta_est, tau, rho, guarantee, "
    "failure_probability, verifier, fallback, num_samples, seconds, backend, seed, delta_hat, "
    "threshold, note, payload_sha256, payload, ledger_seq, num_steps, create_time_ms, chain";
constexpr int kReleaseColumnCount = 26;

void AddRelease(Params& p, const ReleaseRow& r) {
  p.Add(r.release_id).Add(r.key.tenant).Add(r.key.job_id).Add(r.request_id).Add(r.epsilon)
      .Add(r.delta).Add(r.delta_est).Add(r.tau).Add(r.rho).Add(static_cast<int>(r.guarantee))
      .Add(r.failure_probability).Add(r.verifier).Add(r.fallback ? "true" : "false")
      .Add(r.num_samples).Add(r.seconds).Add(r.backend).Add(r.seed).Add(r.delta_hat)
      .Add(r.threshold).Add(r.note).Add(r.payload_sha256).Bytes(r.payload).Add(r.ledger_seq)
      .Add(r.num_steps).Add(r.create_time_ms).Add(r.chain);
}

ReleaseRow ReadRelease(const PGresult* res, int row) {
  ReleaseRow r;
  int c = 0;
  r.release_id = pg::Text(res, row, c++);
  r.key.tenant = pg::Text(res, row, c++);
  r.key.job_id = pg::Text(res, row, c++);
  r.request_id = pg::Text(res, row, c++);
  r.epsilon = pg::Real(res, row, c++);
  r.delta = pg::Real(res, row, c++);
  r.delta_est = pg::Real(res, row, c++);
  r.tau = pg::Real(res, row, c++);
  r.rho = pg::Real(res, row, c++);
  r.guarantee = static_cast<core::Guarantee>(pg::Int(res, row, c++));
  r.failure_probability = pg::Real(res, row, c++);
  r.verifier = pg::Text(res, row, c++);
  r.fallback = pg::Bool(res, row, c++);
  r.num_samples = pg::Int(res, row, c++);
  r.seconds = pg::Real(res, row, c++);
  r.backend = pg::Text(res, row, c++);
  r.seed = static_cast<uint64_t>(pg::Int(res, row, c++));
  r.delta_hat = pg::Real(res, row, c++);
  r.threshold = pg::Real(res, row, c++);
  r.note = pg::Text(res, row, c++);
  r.payload_sha256 = pg::Text(res, row, c++);
  r.payload = pg::Bytea(res, row, c++);
  r.payload_size = static_cast<int64_t>(r.payload.size());
  r.ledger_seq = pg::Int(res, row, c++);
  r.num_steps = pg::Int(res, row, c++);
  r.create_time_ms = pg::Int(res, row, c++);
  r.chain = pg::Text(res, row, c++);
  return r;
}

// "($1,$2),($3,$4)": `rows` tuples of `width` placeholders starting at $first.
std::string Placeholders(int rows, int width, int first = 1) {
  std::string out;
  int n = first;
  for (int i = 0; i < rows; ++i) {
    absl::StrAppend(&out, i ? ",(" : "(");
    for (int c = 0; c < width; ++c) absl::StrAppend(&out, c ? ",$" : "$", n++);
    out += ')';
  }
  return out;
}

// Multi-row INSERT statements of `rows`, a bounded number per statement.
template <typename Row, typename AddFn>
void InsertRows(std::vector<pg::Statement>& out, std::string_view table, std::string_view columns,
                int width, const std::vector<const Row*>& rows, AddFn add, std::string_view what) {
  constexpr size_t kRowsPerStatement = 1000;
  for (size_t start = 0; start < rows.size(); start += kRowsPerStatement) {
    const size_t n = std::min(kRowsPerStatement, rows.size() - start);
    pg::Statement& st = out.emplace_back();
    for (size_t i = 0; i < n; ++i) add(st.params, *rows[start + i]);
    st.sql = absl::StrFormat("INSERT INTO %s (%s) VALUES %s", std::string(table),
                             std::string(columns), Placeholders(static_cast<int>(n), width));
    st.what = what;
  }
}

// Updates, the hot path: one INSERT ... SELECT FROM unnest(column arrays) of 11 array
// parameters, whatever the number of rows. (A multi-row VALUES list costs the server ~35 us
// per row to parse and plan; this does not.)
void InsertUpdates(std::vector<pg::Statement>& out, const std::vector<const UpdateRow*>& rows) {
  if (rows.empty()) return;
  // Every column as a text array literal of quoted elements ("..." with \\ and " escaped);
  // the casts below give them their types.
  std::vector<std::string> columns(kUpdateColumnCount, "{");
  for (size_t i = 0; i < rows.size(); ++i) {
    Params p;
    AddUpdate(p, *rows[i]);
    const char* const* values = p.values();
    for (int c = 0; c < kUpdateColumnCount; ++c) {
      std::string& col = columns[c];
      if (i) col += ',';
      col += '"';
      for (const char *v = values[c], *end = values[c] + p.lengths()[c]; v != end; ++v) {
        if (*v == '"' || *v == '\\') col += '\\';
        col += *v;
      }
      col += '"';
    }
  }
  pg::Statement& st = out.emplace_back();
  for (std::string& col : columns) st.params.Add((col += '}'));
  st.sql = absl::StrFormat(
      "INSERT INTO updates (%s) SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], "
      "$4::text[], $5::float8[], $6::float8[], $7::float8[], $8::int[], $9::float8[], "
      "$10::bigint[], $11::bigint[], $12::text[])",
      std::string(kUpdateColumns));
  st.what = "insert updates";
}

// What Apply knows of a job while the group's transaction holds its row lock.
struct LockedJob {
  bool exists = false;
  JobState state = JobState::kOpen;
  EvrState evr_state = EvrState::kIdle;
  int64_t last_seq = 0;
};

constexpr size_t kKeysPerStatement = 4000;

// Statements that lock the rows of the jobs in `keys` (sorted, so concurrent groups lock in
// one order and cannot deadlock) and read their state, then their last seqs. The last seqs
// come from a later statement, so they are read with a snapshot taken after the locks were
// granted (READ COMMITTED): it sees every update committed by the transactions we waited for.
// One index probe per job (max over the primary key's last column).
void LockJobs(std::vector<pg::Statement>& out, const std::vector<JobKey>& keys) {
  for (size_t start = 0; start < keys.size(); start += kKeysPerStatement) {
    const size_t n = std::min(kKeysPerStatement, keys.size() - start);
    Params p;
    for (size_t i = 0; i < n; ++i) p.Add(keys[start + i].tenant).Add(keys[start + i].job_id);
    std::string last_seqs;
    for (size_t i = 0; i < n; ++i) {
      absl::StrAppend(&last_seqs, i ? " UNION ALL " : "",
                      absl::StrFormat("SELECT %d, (SELECT max(seq) FROM updates WHERE tenant = $%d "
                                      "AND job_id = $%d)",
                                      start + i, 2 * i + 1, 2 * i + 2));
    }
    out.push_back({absl::StrFormat("SELECT tenant, job_id, state, evr_state FROM jobs WHERE (tenant, job_id) "
                                   "IN (%s) ORDER BY tenant, job_id FOR UPDATE",
                                   Placeholders(static_cast<int>(n), 2)),
                   p, "lock jobs"});
    out.push_back({last_seqs, p, "read last seqs"});
  }
}

// Reads LockJobs' results (pairs of lock, last-seq results) into `out`.
void ReadLockedJobs(const std::vector<JobKey>& keys, std::span<const Result> results,
                    std::map<JobKey, LockedJob>& out) {
  for (size_t k = 0; k + 1 < results.size(); k += 2) {
    const PGresult* locked = results[k].get();
    for (int i = 0; i < PQntuples(locked); ++i) {
      LockedJob& j = out[{pg::Text(locked, i, 0), pg::Text(locked, i, 1)}];
      j.exists = true;
      j.state = static_cast<JobState>(pg::Int(locked, i, 2));
      j.evr_state = static_cast<EvrState>(pg::Int(locked, i, 3));
    }
    const PGresult* seqs = results[k + 1].get();
    for (int i = 0; i < PQntuples(seqs); ++i) {
      if (PQgetisnull(seqs, i, 1)) continue;  // no updates yet
      out[keys[pg::Int(seqs, i, 0)]].last_seq = pg::Int(seqs, i, 1);
    }
  }
}

// The store's row checks, batch by batch in the order SqliteStore applies them, against the
// locked jobs (updated as the group would change them).
absl::Status Validate(std::span<const WriteBatch* const> batches, std::map<JobKey, LockedJob>& jobs) {
  for (const WriteBatch* b : batches) {
    for (const JobRow& j : b->new_jobs) {
      LockedJob& l = jobs[j.key];
      if (l.exists) {
        return absl::AlreadyExistsError(
            absl::StrFormat("job '%s' already exists", JobKeyString(j.key)));
      }
      l = {true, j.state, j.evr_state, 0};
    }
    auto find = [&](const JobKey& key) -> absl::StatusOr<LockedJob*> {
      LockedJob& l = jobs[key];
      if (!l.exists) {
        return absl::NotFoundError(absl::StrFormat("job '%s' not found", JobKeyString(key)));
      }
      return &l;
    };
    for (const JobStateChange& c : b->state_changes) {
      absl::StatusOr<LockedJob*> l = find(c.key);
      if (!l.ok()) return l.status();
      (*l)->state = c.state;
    }
    for (const EvrMark& m : b->evr_marks) {
      absl::StatusOr<LockedJob*> l = find(m.key);
      if (!l.ok()) return l.status();
      if (m.expected && (*l)->evr_state != *m.expected) return EvrStateChanged(m, (*l)->evr_state);
      (*l)->evr_state = m.state;
    }
    for (const UpdateRow& u : b->updates) {
      absl::StatusOr<LockedJob*> l = find(u.key);
      if (!l.ok()) return l.status();
      if ((*l)->state != JobState::kOpen) {
        return absl::FailedPreconditionError(
            absl::StrFormat("job '%s' is closed", JobKeyString(u.key)));
      }
      if (u.seq != (*l)->last_seq + 1) return SeqDoesNotFollow(u, (*l)->last_seq);
      (*l)->last_seq = u.seq;
    }
    for (const ReleaseRow& r : b->releases) {
      if (absl::StatusOr<LockedJob*> l = find(r.key); !l.ok()) return l.status();
    }
  }
  return absl::OkStatus();
}

// The statements writing a validated group: the inserts as multi-row statements, the (rare)
// row updates one by one, all in batch order within each kind (which gives the same final
// rows as applying batch by batch, because validation already passed). The row updates need
// no row-count check: their rows exist and are locked (validated above).
void Write(std::vector<pg::Statement>& out, std::span<const WriteBatch* const> batches) {
  std::vector<const JobRow*> jobs;
  std::vector<const UpdateRow*> updates;
  std::vector<const ReleaseRow*> releases;
  for (const WriteBatch* b : batches) {
    for (const JobRow& j : b->new_jobs) jobs.push_back(&j);
    for (const UpdateRow& u : b->updates) updates.push_back(&u);
    for (const ReleaseRow& r : b->releases) releases.push_back(&r);
  }
  InsertRows(out, "jobs", kJobColumns, kJobColumnCount, jobs, AddJob, "insert job");
  for (const WriteBatch* b : batches) {
    for (const JobStateChange& c : b->state_changes) {
      Params p;
      p.Add(static_cast<int>(c.state)).Add(c.close_time_ms).Add(c.key.tenant).Add(c.key.job_id);
      out.push_back({"UPDATE jobs SET state = $1, close_time_ms = $2 WHERE tenant = $3 AND "
                     "job_id = $4",
                     std::move(p), "update job state"});
    }
    for (const EvrMark& m : b->evr_marks) {
      Params p;
      p.Add(static_cast<int>(m.state)).Add(m.note).Add(m.key.tenant).Add(m.key.job_id);
      out.push_back({"UPDATE jobs SET evr_state = $1, evr_note = $2 WHERE tenant = $3 AND "
                     "job_id = $4",
                     std::move(p), "update job evr state"});
    }
  }
  InsertUpdates(out, updates);
  InsertRows(out, "releases", kReleaseColumns, kReleaseColumnCount, releases, AddRelease,
             "insert release");
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresStore>> PostgresStore::Open(
    const PostgresStoreOptions& options) {
  if (options.url.empty()) return absl::InvalidArgumentError("postgres_url must not be empty");
  if (options.pool_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("postgres pool_size must be >= 1, got %d", options.pool_size));
  }
  char* err = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(options.url.c_str(), &err);
  if (parsed == nullptr) {
    // The message names the problem, never the URL (it may hold a password).
    absl::Status s = absl::InvalidArgumentError(
        absl::StrFormat("postgres_url is not a libpq connection string: %s", err ? err : "?"));
    PQfreemem(err);
    return s;
  }
  PQconninfoFree(parsed);

  std::unique_ptr<PostgresStore> store(new PostgresStore(options));
  absl::StatusOr<PGconn*> conn = store->Acquire();
  if (!conn.ok()) return conn.status();
  absl::StatusOr<int> version = pg::Migrate(*conn, pg::kPostgresSchemaVersion);
  Result fsync;
  const bool fsync_known = pg::Exec(*conn, "SHOW fsync", nullptr, "show fsync", &fsync).ok();
  store->Release(*conn);
  if (!version.ok()) return version.status();
  store->schema_version_ = *version;
  if (fsync_known && pg::Text(fsync.get(), 0, 0) != "on") {
    spdlog::warn("postgres runs with fsync={}: acknowledged steps may be lost on power failure",
                 pg::Text(fsync.get(), 0, 0));
  }
  if (!options.mark_path.empty()) {
    if (absl::Status s = store->CheckMark(); !s.ok()) return s;
  }
  return store;
}

absl::Status PostgresStore::CheckMark() {
  StoreMark now;
  absl::Status s = Read<bool>([&](PGconn* c) -> absl::StatusOr<bool> {
    Params p;
    p.Add(static_cast<int>(JobState::kClosed)).Add(static_cast<int>(EvrState::kStopped));
    Result r;
    absl::Status e = pg::Exec(
        c,
        "SELECT (SELECT value FROM meta WHERE key = 'store_id'), (SELECT count(*) FROM jobs), "
        "(SELECT count(*) FROM updates), (SELECT count(*) FROM releases), "
        "(SELECT count(*) FROM jobs WHERE state = $1), "
        "(SELECT count(*) FROM jobs WHERE evr_state = $2)",
        &p, "read mark", &r);
    if (!e.ok()) return e;
    now.store_id = pg::Text(r.get(), 0, 0);
    now.jobs = pg::Int(r.get(), 0, 1);
    now.updates = pg::Int(r.get(), 0, 2);
    now.releases = pg::Int(r.get(), 0, 3);
    now.closed = pg::Int(r.get(), 0, 4);
    now.stopped = pg::Int(r.get(), 0, 5);
    return true;
  }).status();
  if (!s.ok()) return s;
  auto has_head = [&](const std::string& head) -> absl::StatusOr<bool> {
    return Read<bool>([&](PGconn* c) -> absl::StatusOr<bool> {
      Params p;
      p.Add(head);
      Result r;
      if (absl::Status e = pg::Exec(c, "SELECT 1 FROM updates WHERE chain = $1 LIMIT 1", &p,
                                    "find newest head", &r);
          !e.ok()) {
        return e;
      }
      return PQntuples(r.get()) > 0;
    });
  };
  absl::StatusOr<std::unique_ptr<StoreMarkFile>> file =
      CheckStoreMark(options_.mark_path, absl::StrFormat("(postgres store %s)", now.store_id),
                     now, has_head, options_.accept_data_loss);
  if (!file.ok()) return file.status();
  std::lock_guard<std::mutex> lock(mark_mu_);
  mark_file_ = *std::move(file);
  mark_ = now;
  return absl::OkStatus();
}

PostgresStore::~PostgresStore() {
  std::lock_guard<std::mutex> lock(mu_);
  for (PGconn* c : idle_) PQfinish(c);
}

absl::StatusOr<PGconn*> PostgresStore::Connect() {
  // Earlier keywords are defaults: the URL (expanded from dbname) overrides them.
  const std::string timeout = absl::StrFormat("%d", options_.connect_timeout_s);
  const char* keys[] = {"connect_timeout", "application_name", "keepalives_idle",
                        "keepalives_interval", "keepalives_count", "dbname", nullptr};
  const char* values[] = {timeout.c_str(), "dpledgerd", "10", "5", "3", options_.url.c_str(),
                          nullptr};
  PGconn* conn = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (conn == nullptr) return absl::UnavailableError("postgres connect: out of memory");
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn);
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    PQfinish(conn);
    return absl::UnavailableError(absl::StrFormat("postgres connect: %s", msg));
  }
  // Server notices (e.g. "terminating connection due to administrator command") go to the
  // log, not to bare stderr.
  PQsetNoticeProcessor(
      conn, [](void*, const char* message) {
        std::string m = message;
        while (!m.empty() && m.back() == '\n') m.pop_back();
        spdlog::info("postgres notice: {}", m);
      },
      nullptr);
  // A commit is acknowledged only once its WAL record is flushed, whatever the server's
  // default; the server's own fsync setting is checked at Open.
  if (absl::Status s = pg::Exec(conn, "SET synchronous_commit = on", "configure connection");
      !s.ok()) {
    PQfinish(conn);
    return s;
  }
  return conn;
}

absl::StatusOr<PGconn*> PostgresStore::Acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !idle_.empty() || open_ < options_.pool_size; });
  if (!idle_.empty()) {
    PGconn* c = idle_.back();
    idle_.pop_back();
    return c;
  }
  const auto now = std::chrono::steady_clock::now();
  if (now < next_connect_) {
    return absl::UnavailableError(absl::StrFormat(
        "postgres unreachable (next connection attempt in %d ms): %s",
        std::chrono::duration_cast<std::chrono::milliseconds>(next_connect_ - now).count(),
        last_connect_error_));
  }
  ++open_;
  lock.unlock();
  absl::StatusOr<PGconn*> conn = Connect();
  lock.lock();
  if (conn.ok()) {
    backoff_ = std::chrono::milliseconds(0);
    return conn;
  }
  --open_;
  backoff_ = backoff_.count() == 0 ? options_.reconnect_initial_delay
                                   : std::min(2 * backoff_, options_.reconnect_max_delay);
  next_connect_ = std::chrono::steady_clock::now() + backoff_;
  last_connect_error_ = std::string(conn.status().message());
  cv_.notify_one();
  return conn.status();
}

void PostgresStore::Release(PGconn* conn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pg::ConnectionLost(conn) || PQtransactionStatus(conn) != PQTRANS_IDLE) {
      PQfinish(conn);
      --open_;
    } else {
      idle_.push_back(conn);
    }
  }
  cv_.notify_one();
}

template <typename T, typename F>
absl::StatusOr<T> PostgresStore::Read(F read) {
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<PGconn*> conn = Acquire();
    if (!conn.ok()) return conn.status();
    absl::StatusOr<T> out = read(*conn);
    const bool lost = pg::ConnectionLost(*conn);
    Release(*conn);
    if (out.ok() || !lost || attempt == 1) return out;
  }
}

// Two round trips: (BEGIN, lock the jobs, read their last seqs), validate here, then (the
// writes, COMMIT), each as one libpq pipeline.
absl::Status PostgresStore::Apply(std::span<const WriteBatch* const> batches) {
  std::vector<JobKey> keys;
  for (const WriteBatch* b : batches) {
    for (JobKey& k : b->Jobs()) keys.push_back(std::move(k));
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  // A pooled connection may have died since its last use (database restarted): when the first
  // pipeline fails on a lost connection nothing was committed, so one retry on a fresh one is
  // safe.
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<PGconn*> conn = Acquire();
    if (!conn.ok()) return conn.status();
    std::vector<pg::Statement> read;
    read.push_back({"BEGIN", {}, "begin"});
    LockJobs(read, keys);
    std::vector<Result> results;
    absl::Status s = pg::RunPipeline(*conn, read, &results);
    if (!s.ok() && pg::ConnectionLost(*conn)) {
      Release(*conn);
      if (attempt == 0) continue;
      return s;
    }
    std::map<JobKey, LockedJob> jobs;
    if (s.ok()) {
      ReadLockedJobs(keys, std::span<const Result>(results).subspan(1), jobs);
      s = Validate(batches, jobs);
    }
    if (s.ok()) {
      std::vector<pg::Statement> write;
      Write(write, batches);
      write.push_back({"COMMIT", {}, "commit"});
      s = pg::RunPipeline(*conn, write, &results);
      // A COMMIT that ran after a failed statement reports ROLLBACK, and the failure is s.
    }
    if (!s.ok() && !pg::ConnectionLost(*conn)) {
      (void)pg::Exec(*conn, "ROLLBACK", "rollback");
    }
    Release(*conn);
    if (s.ok() && mark_file_) {
      // The mark covers the group before it is acknowledged (store_mark.h).
      std::lock_guard<std::mutex> lock(mark_mu_);
      AddCommitted(mark_, batches);
      s = mark_file_->Write(mark_);
    }
    return s;
  }
}

absl::StatusOr<std::optional<JobRow>> PostgresStore::GetJob(const JobKey& key) {
  return Read<std::optional<JobRow>>([&](PGconn* c) -> absl::StatusOr<std::optional<JobRow>> {
    Params p;
    p.Add(key.tenant).Add(key.job_id);
    Result r;
    if (absl::Status s = pg::Exec(c, absl::StrFormat("SELECT %s FROM jobs WHERE tenant = $1 AND "
                                                     "job_id = $2", std::string(kJobColumns)),
                                  &p, "get job", &r);
        !s.ok()) {
      return s;
    }
    if (PQntuples(r.get()) == 0) return std::optional<JobRow>();
    return std::optional<JobRow>(ReadJob(r.get(), 0));
  });
}

namespace {
template <typename Row, typename ReadFn>
absl::StatusOr<std::vector<Row>> Rows(PGconn* c, const std::string& sql, Params& p,
                                      std::string_view what, ReadFn read_row) {
  Result r;
  if (absl::Status s = pg::Exec(c, sql, &p, what, &r); !s.ok()) return s;
  std::vector<Row> out;
  out.reserve(PQntuples(r.get()));
  for (int i = 0; i < PQntuples(r.get()); ++i) out.push_back(read_row(r.get(), i));
  return out;
}

absl::StatusOr<int64_t> Count(PGconn* c, const std::string& sql, Params& p, std::string_view what) {
  Result r;
  if (absl::Status s = pg::Exec(c, sql, &p, what, &r); !s.ok()) return s;
  return pg::Int(r.get(), 0, 0);
}
}  // namespace

absl::StatusOr<std::vector<JobRow>> PostgresStore::ListJobs(std::string_view tenant,
                                                            std::string_view after_job_id,
                                                            int limit) {
  return Read<std::vector<JobRow>>([&](PGconn* c) {
    Params p;
    p.Add(tenant).Add(after_job_id).Add(limit);
    return Rows<JobRow>(c,
                        absl::StrFormat("SELECT %s FROM jobs WHERE tenant = $1 AND job_id > $2 "
                                        "ORDER BY job_id LIMIT $3",
                                        std::string(kJobColumns)),
                        p, "list jobs", ReadJob);
  });
}

absl::StatusOr<std::vector<JobRow>> PostgresStore::ListAllJobs(const JobKey& after, int limit) {
  return Read<std::vector<JobRow>>([&](PGconn* c) {
    Params p;
    p.Add(after.tenant).Add(after.job_id).Add(limit);
    return Rows<JobRow>(c,
                        absl::StrFormat("SELECT %s FROM jobs WHERE (tenant, job_id) > ($1, $2) "
                                        "ORDER BY tenant, job_id LIMIT $3",
                                        std::string(kJobColumns)),
                        p, "list all jobs", ReadJob);
  });
}

absl::StatusOr<int64_t> PostgresStore::CountJobs(std::string_view tenant) {
  return Read<int64_t>([&](PGconn* c) {
    Params p;
    p.Add(tenant);
    return Count(c, "SELECT count(*) FROM jobs WHERE tenant = $1", p, "count jobs");
  });
}

absl::StatusOr<std::vector<UpdateRow>> PostgresStore::ListUpdates(const JobKey& key,
                                                                  int64_t after_seq, int limit) {
  return Read<std::vector<UpdateRow>>([&](PGconn* c) {
    Params p;
    p.Add(key.tenant).Add(key.job_id).Add(after_seq).Add(limit);
    return Rows<UpdateRow>(c,
                           absl::StrFormat("SELECT %s FROM updates WHERE tenant = $1 AND "
                                           "job_id = $2 AND seq > $3 ORDER BY seq LIMIT $4",
                                           std::string(kUpdateColumns)),
                           p, "list updates", ReadUpdate);
  });
}

absl::StatusOr<std::optional<UpdateRow>> PostgresStore::GetUpdate(const JobKey& key,
                                                                  int64_t seq) {
  absl::StatusOr<std::vector<UpdateRow>> rows = Read<std::vector<UpdateRow>>([&](PGconn* c) {
    Params p;
    p.Add(key.tenant).Add(key.job_id).Add(seq);
    return Rows<UpdateRow>(c,
                           absl::StrFormat("SELECT %s FROM updates WHERE tenant = $1 AND "
                                           "job_id = $2 AND seq = $3",
                                           std::string(kUpdateColumns)),
                           p, "get update", ReadUpdate);
  });
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return std::optional<UpdateRow>();
  return std::optional<UpdateRow>(std::move(rows->front()));
}

absl::StatusOr<std::optional<UpdateRow>> PostgresStore::LastUpdate(const JobKey& key) {
  absl::StatusOr<std::vector<UpdateRow>> rows = Read<std::vector<UpdateRow>>([&](PGconn* c) {
    Params p;
    p.Add(key.tenant).Add(key.job_id);
    return Rows<UpdateRow>(c,
                           absl::StrFormat("SELECT %s FROM updates WHERE tenant = $1 AND "
                                           "job_id = $2 ORDER BY seq DESC LIMIT 1",
                                           std::string(kUpdateColumns)),
                           p, "last update", ReadUpdate);
  });
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return std::optional<UpdateRow>();
  return std::optional<UpdateRow>(std::move(rows->front()));
}

absl::StatusOr<std::optional<ReleaseRow>> PostgresStore::GetRelease(std::string_view release_id) {
  absl::StatusOr<std::vector<ReleaseRow>> rows = Read<std::vector<ReleaseRow>>([&](PGconn* c) {
    Params p;
    p.Add(release_id);
    return Rows<ReleaseRow>(c,
                            absl::StrFormat("SELECT %s FROM releases WHERE release_id = $1",
                                            std::string(kReleaseColumns)),
                            p, "get release", ReadRelease);
  });
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return std::optional<ReleaseRow>();
  return std::optional<ReleaseRow>(std::move(rows->front()));
}

absl::StatusOr<std::optional<ReleaseRow>> PostgresStore::FindReleaseByRequest(
    std::string_view tenant, std::string_view request_id) {
  absl::StatusOr<std::vector<ReleaseRow>> rows = Read<std::vector<ReleaseRow>>([&](PGconn* c) {
    Params p;
    p.Add(tenant).Add(request_id);
    return Rows<ReleaseRow>(c,
                            absl::StrFormat("SELECT %s FROM releases WHERE tenant = $1 AND "
                                            "request_id = $2",
                                            std::string(kReleaseColumns)),
                            p, "find release", ReadRelease);
  });
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return std::optional<ReleaseRow>();
  return std::optional<ReleaseRow>(std::move(rows->front()));
}

absl::StatusOr<std::vector<ReleaseRow>> PostgresStore::ListReleases(const JobKey& key) {
  return Read<std::vector<ReleaseRow>>([&](PGconn* c) {
    Params p;
    p.Add(key.tenant).Add(key.job_id);
    return Rows<ReleaseRow>(c,
                            absl::StrFormat("SELECT %s FROM releases WHERE tenant = $1 AND "
                                            "job_id = $2 ORDER BY create_time_ms, insert_order",
                                            std::string(kReleaseColumns)),
                            p, "list releases", ReadRelease);
  });
}

absl::StatusOr<std::optional<std::string>> PostgresStore::LastReleaseChain(const JobKey& key) {
  return Read<std::optional<std::string>>(
      [&](PGconn* c) -> absl::StatusOr<std::optional<std::string>> {
        Params p;
        p.Add(key.tenant).Add(key.job_id);
        Result r;
        if (absl::Status s = pg::Exec(c,
                                      "SELECT chain FROM releases WHERE tenant = $1 AND "
                                      "job_id = $2 ORDER BY create_time_ms DESC, insert_order "
                                      "DESC LIMIT 1",
                                      &p, "last release chain", &r);
            !s.ok()) {
          return s;
        }
        if (PQntuples(r.get()) == 0) return std::optional<std::string>();
        return std::optional<std::string>(pg::Text(r.get(), 0, 0));
      });
}

absl::StatusOr<int64_t> PostgresStore::CountReleases(const JobKey& key) {
  return Read<int64_t>([&](PGconn* c) {
    Params p;
    p.Add(key.tenant).Add(key.job_id);
    return Count(c, "SELECT count(*) FROM releases WHERE tenant = $1 AND job_id = $2", p,
                 "count releases");
  });
}

absl::Status PostgresStore::CheckIntegrity(bool full) {
  absl::StatusOr<int64_t> version = Read<int64_t>([&](PGconn* c) {
    Params p;
    return Count(c, "SELECT version FROM schema_version", p, "read schema_version");
  });
  if (!version.ok()) return version.status();
  if (*version != schema_version_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "postgres schema version changed from %d to %d while this server runs", schema_version_,
        *version));
  }
  return absl::OkStatus();
}

absl::Status PostgresStore::Ping() {
  return Read<int64_t>([&](PGconn* c) {
           Params p;
           return Count(c, "SELECT 1", p, "ping");
         })
      .status();
}

}  // namespace dpledger::server
