#include "server/sqlite_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_format.h"
#include "server/sqlite_fault_vfs.h"
#include "server/sqlite_schema.h"
#include "server/sqlite_util.h"
#include "spdlog/spdlog.h"

namespace dpledger::server {
namespace {

using sqlite::Error;
using sqlite::Exec;
using sqlite::Stmt;

// `create`: the writer at Open may create the file; a reopen must find the one it had.
absl::StatusOr<sqlite3*> OpenConnection(const SqliteStoreOptions& options, bool writer,
                                        bool create = false) {
  sqlite3* db = nullptr;
  const int flags = (writer ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY) |
                    (writer && create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX;
  const int rc = sqlite3_open_v2(options.path.c_str(), &db, flags,
                                 options.vfs.empty() ? nullptr : options.vfs.c_str());
  if (rc != SQLITE_OK) {
    absl::Status s = Error(db, rc, absl::StrFormat("open '%s'", options.path));
    sqlite3_close(db);
    return s;
  }
  sqlite3_busy_timeout(db, options.busy_timeout_ms);
  sqlite3_extended_result_codes(db, 1);
  return db;
}

// Records the WAL's size after each commit (the hook SQLite's own autocheckpoint would
// use): Apply checkpoints itself, so that it sees the checkpoint's errors.
int OnWalCommit(void* frames, sqlite3*, const char*, int wal_frames) {
  *static_cast<int*>(frames) = wal_frames;
  return SQLITE_OK;
}

// An error after which a file's state is unknown past its last good fsync.
bool IsIoError(int rc) { return (rc & 0xff) == SQLITE_IOERR || (rc & 0xff) == SQLITE_FULL; }

// Closes `db` (null: nothing) without SQLite's checkpoint-on-close, which would trust the
// connection's WAL index (sqlite_store.h, "Failed fsync"). Statements still open are
// finalized first, so SQLITE_BUSY cannot keep the connection (and the WAL index) alive.
bool CloseConnection(sqlite3* db) {
  if (db == nullptr) return true;
  sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  while (sqlite3_stmt* st = sqlite3_next_stmt(db, nullptr)) sqlite3_finalize(st);
  return sqlite3_close(db) == SQLITE_OK;
}

// WAL with synchronous=FULL: each COMMIT fsyncs the WAL, so Apply's OK means durable.
absl::Status ConfigureWriter(sqlite3* db, int* wal_frames) {
  Stmt wal(db, "PRAGMA journal_mode=WAL");
  if (!wal.status().ok()) return wal.status();
  if (wal.Step() != SQLITE_ROW) return Error(db, sqlite3_errcode(db), "journal_mode");
  if (wal.Text(0) != "wal") {
    return absl::UnavailableError(
        absl::StrFormat("sqlite: journal_mode WAL refused (got '%s')", wal.Text(0)));
  }
  if (absl::Status s = Exec(db, "PRAGMA synchronous=FULL"); !s.ok()) return s;
  sqlite3_wal_hook(db, OnWalCommit, wal_frames);  // replaces SQLite's autocheckpoint
  return Exec(db, "PRAGMA foreign_keys=OFF");
}

JobRow ReadJob(const Stmt& q) {
  JobRow j;
  j.key = {q.Text(0), q.Text(1)};
  j.budget_epsilon = q.Real(2);
  j.budget_delta = q.Real(3);
  j.neighbouring = static_cast<Neighbouring>(q.Int(4));
  j.accountant = q.Text(5);
  j.mc_seed = static_cast<uint64_t>(q.Int(6));
  j.mc_num_samples = q.Int(7);
  j.state = static_cast<JobState>(q.Int(8));
  j.create_time_ms = q.Int(9);
  j.close_time_ms = q.Int(10);
  j.evr_state = static_cast<EvrState>(q.Int(11));
  j.evr_note = q.Text(12);
  j.schedule = static_cast<Schedule>(q.Int(13));
  j.admission = static_cast<AdmissionKind>(q.Int(14));
  j.plan = q.Text(15);
  j.rdp_order = q.Real(16);
  return j;
}
constexpr std::string_view kJobColumns =
    "tenant, job_id, budget_epsilon, budget_delta, neighbouring, accountant, mc_seed, "
    "mc_num_samples, state, create_time_ms, close_time_ms, evr_state, evr_note, schedule, "
    "admission, plan, rdp_order";

UpdateRow ReadUpdate(const Stmt& q) {
  UpdateRow u;
  u.key = {q.Text(0), q.Text(1)};
  u.seq = q.Int(2);
  u.steps = q.Text(3);
  u.spent.lower = q.Real(4);
  u.spent.estimate = q.Real(5);
  u.spent.upper = q.Real(6);
  u.spent.guarantee = static_cast<core::Guarantee>(q.Int(7));
  u.spent.failure_probability = q.Real(8);
  u.num_steps_after = q.Int(9);
  u.commit_time_ms = q.Int(10);
  u.chain = q.Text(11);
  return u;
}
constexpr std::string_view kUpdateColumns =
    "tenant, job_id, seq, steps, spent_lower, spent_estimate, spent_upper, guarantee, "
    "failure_probability, num_steps_after, commit_time_ms, chain";

ReleaseRow ReadRelease(const Stmt& q) {
  ReleaseRow r;
  int c = 0;
  r.release_id = q.Text(c++);
  r.key.tenant = q.Text(c++);
  r.key.job_id = q.Text(c++);
  r.request_id = q.Text(c++);
  r.epsilon = q.Real(c++);
  r.delta = q.Real(c++);
  r.delta_est = q.Real(c++);
  r.tau = q.Real(c++);
  r.rho = q.Real(c++);
  r.guarantee = static_cast<core::Guarantee>(q.Int(c++));
  r.failure_probability = q.Real(c++);
  r.verifier = q.Text(c++);
  r.fallback = q.Int(c++) != 0;
  r.num_samples = q.Int(c++);
  r.seconds = q.Real(c++);
  r.backend = q.Text(c++);
  r.seed = static_cast<uint64_t>(q.Int(c++));
  r.delta_hat = q.Real(c++);
  r.threshold = q.Real(c++);
  r.note = q.Text(c++);
  r.payload_sha256 = q.Text(c++);
  r.payload = q.Blob(c++);
  r.payload_size = static_cast<int64_t>(r.payload.size());
  r.ledger_seq = q.Int(c++);
  r.num_steps = q.Int(c++);
  r.create_time_ms = q.Int(c++);
  r.chain = q.Text(c++);
  return r;
}
constexpr std::string_view kReleaseColumns =
    "release_id, tenant, job_id, request_id, epsilon, delta, delta_est, tau, rho, guarantee, "
    "failure_probability, verifier, fallback, num_samples, seconds, backend, seed, delta_hat, "
    "threshold, note, payload_sha256, payload, ledger_seq, num_steps, create_time_ms, chain";

std::string Sql(std::string_view fmt_prefix, std::string_view columns, std::string_view rest) {
  return absl::StrFormat("%s%s%s", std::string(fmt_prefix), std::string(columns),
                         std::string(rest));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(
    const SqliteStoreOptions& given) {
  if (given.path.empty()) return absl::InvalidArgumentError("sqlite path must not be empty");
  SqliteStoreOptions options = given;
  if (const char* faults = std::getenv("DPL_TEST_IO_FAULT_FILE"); faults && *faults) {
    spdlog::warn("DPL_TEST_IO_FAULT_FILE is set: the store's I/O goes through the "
                 "fault-injecting test VFS, faults read from '{}'",
                 faults);
    SqliteFaultVfs::Get().SetControlFile(faults);
    options.vfs = SqliteFaultVfs::kName;
  }
  std::unique_ptr<SqliteStore> store(new SqliteStore());
  const std::string lock_path = options.path + ".lock";
  store->lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (store->lock_fd_ < 0) {
    return absl::UnavailableError(absl::StrFormat("cannot open lock file '%s': %s", lock_path,
                                                  std::strerror(errno)));
  }
  if (::flock(store->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "sqlite store '%s' is in use by another process (lock '%s' is held): run one "
        "dpledgerd per data_dir",
        options.path, lock_path));
  }
  store->options_ = options;
  store->checkpoint_at_ = store->CheckpointPages();
  absl::StatusOr<sqlite3*> w = OpenConnection(options, /*writer=*/true, /*create=*/true);
  if (!w.ok()) return w.status();
  store->write_db_ = *w;
  // Integrity first: a damaged file must not be migrated or served.
  if (absl::Status s = store->CheckIntegrity(options.full_check); !s.ok()) return s;
  if (absl::Status s = ConfigureWriter(store->write_db_, &store->wal_frames_); !s.ok()) {
    return s;
  }
  absl::StatusOr<int> version = sqlite::Migrate(store->write_db_, kSqliteSchemaVersion);
  if (!version.ok()) return version.status();
  store->schema_version_ = *version;
  absl::StatusOr<sqlite3*> r = OpenConnection(options, /*writer=*/false);
  if (!r.ok()) return r.status();
  store->read_db_ = *r;
  store->path_ = options.path;
  struct stat st;
  if (::stat(options.path.c_str(), &st) != 0) {
    return absl::UnavailableError(absl::StrFormat("cannot stat '%s': %s", options.path,
                                                  std::strerror(errno)));
  }
  store->dev_ = st.st_dev;
  store->ino_ = st.st_ino;
  if (absl::Status s = store->CheckMark(options); !s.ok()) return s;
  return store;
}

absl::Status SqliteStore::CheckMark(const SqliteStoreOptions& options) {
  std::lock_guard<std::mutex> lock(write_mu_);
  StoreMark now;
  {
    Stmt q(write_db_, "SELECT (SELECT value FROM meta WHERE key = 'store_id'), "
                      "(SELECT count(*) FROM jobs), (SELECT count(*) FROM updates), "
                      "(SELECT count(*) FROM releases), "
                      "(SELECT count(*) FROM jobs WHERE state = ?), "
                      "(SELECT count(*) FROM jobs WHERE evr_state = ?)");
    q.Bind(1, static_cast<int>(JobState::kClosed)).Bind(2, static_cast<int>(EvrState::kStopped));
    if (!q.status().ok()) return q.status();
    if (q.Step() != SQLITE_ROW) return Error(write_db_, sqlite3_errcode(write_db_), "read mark");
    now.store_id = q.Text(0);
    now.jobs = q.Int(1);
    now.updates = q.Int(2);
    now.releases = q.Int(3);
    now.closed = q.Int(4);
    now.stopped = q.Int(5);
  }
  auto has_head = [&](const std::string& head) -> absl::StatusOr<bool> {
    Stmt q(write_db_, "SELECT tenant, job_id, seq FROM updates WHERE chain = ? LIMIT 1");
    q.Bind(1, head);
    const int rc = q.Step();
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) return Error(write_db_, rc, "find newest head");
    return rc == SQLITE_ROW;
  };
  absl::StatusOr<std::unique_ptr<StoreMarkFile>> file = CheckStoreMark(
      options.path + ".mark", "'" + options.path + "'", now, has_head, options.accept_data_loss);
  if (!file.ok()) return file.status();
  mark_file_ = *std::move(file);
  mark_ = now;
  return absl::OkStatus();
}

absl::Status SqliteStore::CheckPath() const {
  struct stat st;
  if (::stat(path_.c_str(), &st) != 0 || st.st_dev != dev_ || st.st_ino != ino_ ||
      st.st_nlink == 0) {
    return absl::DataLossError(absl::StrFormat(
        "database file '%s' was deleted or replaced while the server runs: nothing more is "
        "committed or acknowledged; restart to have the loss checked",
        path_));
  }
  return absl::OkStatus();
}

SqliteStore::~SqliteStore() {
  CloseConnection(read_db_);
  if (write_db_) {
    // Fold the WAL back into the database so the directory holds one tidy file. If that
    // fails, the WAL stays for the next Open's recovery: closing must not checkpoint again
    // from this connection's index.
    sqlite3_wal_checkpoint_v2(write_db_, nullptr, SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
    CloseConnection(write_db_);
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

absl::Status SqliteStore::CheckIntegrity(bool full) {
  std::lock_guard<std::mutex> lock(write_mu_);
  Stmt q(write_db_, full ? "PRAGMA integrity_check(20)" : "PRAGMA quick_check(20)");
  if (!q.status().ok()) return q.status();
  std::string problems;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    const std::string line = q.Text(0);
    if (line == "ok") continue;
    absl::StrAppend(&problems, problems.empty() ? "" : "; ", line);
  }
  if (rc != SQLITE_DONE) return Error(write_db_, rc, full ? "integrity_check" : "quick_check");
  if (!problems.empty()) {
    return absl::DataLossError(absl::StrFormat("sqlite %s failed: %s",
                                               full ? "integrity_check" : "quick_check", problems));
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::Apply(std::span<const WriteBatch* const> batches) {
  std::lock_guard<std::mutex> lock(write_mu_);
  if (absl::Status s = CheckPath(); !s.ok()) return s;
  if (write_db_ == nullptr) {  // an earlier Reconnect failed
    if (absl::Status s = Reconnect(); !s.ok()) return s;
  }
  absl::Status s = Exec(write_db_, "BEGIN IMMEDIATE");
  for (const WriteBatch* b : batches) {
    if (!s.ok()) break;
    s = ApplyOne(*b);
  }
  if (s.ok()) s = Exec(write_db_, "COMMIT");
  if (!s.ok()) {
    // After a failed COMMIT SQLite may already have rolled back; ROLLBACK then fails
    // harmlessly with "no transaction is active". No Reconnect here (sqlite_store.h).
    (void)Exec(write_db_, "ROLLBACK");
    return s;
  }
  // The mark covers the group before it is acknowledged (store_mark.h).
  AddCommitted(mark_, batches);
  s = mark_file_->Write(mark_);
  // The group is durable in the WAL; a failed checkpoint leaves it there.
  if (s.ok() && wal_frames_ >= checkpoint_at_) Checkpoint();
  return s;
}

absl::Status SqliteStore::Ping() {
  if (absl::Status s = CheckPath(); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(write_mu_);
  return write_db_ == nullptr ? Reconnect() : absl::OkStatus();
}

int SqliteStore::CheckpointPages() const {
  return options_.wal_autocheckpoint_pages > 0 ? options_.wal_autocheckpoint_pages : 1000;
}

void SqliteStore::Checkpoint() {
  int rc;
  {
    // No read of this process holds a snapshot meanwhile, so the checkpoint copies the
    // whole WAL and syncs the database before it records anything as copied.
    std::lock_guard<std::mutex> reads(read_mu_);
    rc = sqlite3_wal_checkpoint_v2(write_db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr,
                                   nullptr);
  }
  if (rc == SQLITE_OK) {
    checkpoint_at_ = CheckpointPages();
    return;
  }
  // Try again only after as many new pages (a disk that keeps failing is not hit at
  // every commit).
  checkpoint_at_ = wal_frames_ + CheckpointPages();
  spdlog::warn("sqlite checkpoint of '{}' failed: {} (code {}); the WAL keeps every commit",
               path_, sqlite3_errmsg(write_db_), rc);
  if (IsIoError(rc)) (void)Reconnect();
}

absl::Status SqliteStore::Reconnect() {
  std::lock_guard<std::mutex> lock(read_mu_);
  // A connection that did not close keeps the old WAL index alive: a reopen would join it
  // instead of rebuilding it, so the store stops committing.
  const bool read_closed = CloseConnection(read_db_);
  if (!CloseConnection(write_db_) || !read_closed) stuck_ = true;
  read_db_ = write_db_ = nullptr;
  wal_frames_ = 0;
  if (stuck_) {
    const absl::Status s = absl::InternalError(absl::StrFormat(
        "sqlite: a connection to '%s' could not be closed after an I/O error, so its WAL "
        "index cannot be rebuilt: nothing more is committed until dpledgerd restarts",
        path_));
    spdlog::error("{}", std::string(s.message()));
    return s;
  }
  absl::StatusOr<sqlite3*> w = OpenConnection(options_, /*writer=*/true);
  absl::Status s = w.status();
  if (s.ok()) {
    write_db_ = *w;
    s = ConfigureWriter(write_db_, &wal_frames_);
  }
  if (s.ok()) {
    absl::StatusOr<sqlite3*> r = OpenConnection(options_, /*writer=*/false);
    s = r.status();
    if (s.ok()) read_db_ = *r;
  }
  if (s.ok()) s = CheckPath();  // the file it found is the one it had
  if (!s.ok()) {
    // Both or neither: a writer without its configuration must not commit.
    CloseConnection(read_db_);
    CloseConnection(write_db_);
    read_db_ = write_db_ = nullptr;
    spdlog::error("sqlite: reopening '{}' after an I/O error failed: {}; retried at the "
                  "next commit or health check",
                  path_, s.ToString());
    return s;
  }
  spdlog::warn("sqlite: reopened '{}' after an I/O error; its WAL index was rebuilt from the "
               "WAL",
               path_);
  return absl::OkStatus();
}

absl::Status SqliteStore::ApplyOne(const WriteBatch& batch) {
  for (const JobRow& j : batch.new_jobs) {
    Stmt q(write_db_,
           Sql("INSERT INTO jobs (", kJobColumns, ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"));
    q.Bind(1, j.key.tenant).Bind(2, j.key.job_id).Bind(3, j.budget_epsilon)
        .Bind(4, j.budget_delta).Bind(5, static_cast<int>(j.neighbouring)).Bind(6, j.accountant)
        .Bind(7, j.mc_seed).Bind(8, j.mc_num_samples).Bind(9, static_cast<int>(j.state))
        .Bind(10, j.create_time_ms).Bind(11, j.close_time_ms)
        .Bind(12, static_cast<int>(j.evr_state)).Bind(13, j.evr_note)
        .Bind(14, static_cast<int>(j.schedule)).Bind(15, static_cast<int>(j.admission))
        .Bind(16, j.plan).Bind(17, j.rdp_order);
    if (absl::Status s = q.Run("insert job"); !s.ok()) {
      if (s.code() == absl::StatusCode::kAlreadyExists) {
        return absl::AlreadyExistsError(
            absl::StrFormat("job '%s' already exists", JobKeyString(j.key)));
      }
      return s;
    }
  }
  for (const JobStateChange& c : batch.state_changes) {
    Stmt q(write_db_, "UPDATE jobs SET state = ?, close_time_ms = ? WHERE tenant = ? AND job_id = ?");
    q.Bind(1, static_cast<int>(c.state)).Bind(2, c.close_time_ms).Bind(3, c.key.tenant)
        .Bind(4, c.key.job_id);
    if (absl::Status s = q.Run("update job state"); !s.ok()) return s;
    if (sqlite3_changes(write_db_) != 1) {
      return absl::NotFoundError(absl::StrFormat("job '%s' not found", JobKeyString(c.key)));
    }
  }
  for (const EvrMark& m : batch.evr_marks) {
    if (m.expected) {
      Stmt chk(write_db_, "SELECT evr_state FROM jobs WHERE tenant = ? AND job_id = ?");
      chk.Bind(1, m.key.tenant).Bind(2, m.key.job_id);
      if (!chk.status().ok()) return chk.status();
      const int rc = chk.Step();
      if (rc == SQLITE_DONE) {
        return absl::NotFoundError(absl::StrFormat("job '%s' not found", JobKeyString(m.key)));
      }
      if (rc != SQLITE_ROW) return Error(write_db_, rc, "check evr state");
      if (static_cast<EvrState>(chk.Int(0)) != *m.expected) {
        return EvrStateChanged(m, static_cast<EvrState>(chk.Int(0)));
      }
    }
    Stmt q(write_db_, "UPDATE jobs SET evr_state = ?, evr_note = ? WHERE tenant = ? AND job_id = ?");
    q.Bind(1, static_cast<int>(m.state)).Bind(2, m.note).Bind(3, m.key.tenant)
        .Bind(4, m.key.job_id);
    if (absl::Status s = q.Run("update job evr state"); !s.ok()) return s;
    if (sqlite3_changes(write_db_) != 1) {
      return absl::NotFoundError(absl::StrFormat("job '%s' not found", JobKeyString(m.key)));
    }
  }
  for (const UpdateRow& u : batch.updates) {
    // Safety net under the service's own checks: the job exists, is open, and seq is next.
    Stmt chk(write_db_,
             "SELECT j.state, (SELECT coalesce(max(seq), 0) FROM updates u "
             "WHERE u.tenant = j.tenant AND u.job_id = j.job_id) "
             "FROM jobs j WHERE j.tenant = ? AND j.job_id = ?");
    chk.Bind(1, u.key.tenant).Bind(2, u.key.job_id);
    if (!chk.status().ok()) return chk.status();
    const int rc = chk.Step();
    if (rc == SQLITE_DONE) {
      return absl::NotFoundError(absl::StrFormat("job '%s' not found", JobKeyString(u.key)));
    }
    if (rc != SQLITE_ROW) return Error(write_db_, rc, "check update");
    if (static_cast<JobState>(chk.Int(0)) != JobState::kOpen) {
      return absl::FailedPreconditionError(
          absl::StrFormat("job '%s' is closed", JobKeyString(u.key)));
    }
    if (u.seq != chk.Int(1) + 1) return SeqDoesNotFollow(u, chk.Int(1));
    Stmt q(write_db_, Sql("INSERT INTO updates (", kUpdateColumns, ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"));
    q.Bind(1, u.key.tenant).Bind(2, u.key.job_id).Bind(3, u.seq).Bind(4, u.steps)
        .Bind(5, u.spent.lower).Bind(6, u.spent.estimate).Bind(7, u.spent.upper)
        .Bind(8, static_cast<int>(u.spent.guarantee)).Bind(9, u.spent.failure_probability)
        .Bind(10, u.num_steps_after).Bind(11, u.commit_time_ms).Bind(12, u.chain);
    if (absl::Status s = q.Run("insert update"); !s.ok()) return s;
  }
  for (const ReleaseRow& r : batch.releases) {
    Stmt chk(write_db_, "SELECT 1 FROM jobs WHERE tenant = ? AND job_id = ?");
    chk.Bind(1, r.key.tenant).Bind(2, r.key.job_id);
    if (chk.Step() != SQLITE_ROW) {
      return absl::NotFoundError(absl::StrFormat("job '%s' not found", JobKeyString(r.key)));
    }
    Stmt q(write_db_, Sql("INSERT INTO releases (", kReleaseColumns,
                          ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"));
    q.Bind(1, r.release_id).Bind(2, r.key.tenant).Bind(3, r.key.job_id).Bind(4, r.request_id)
        .Bind(5, r.epsilon).Bind(6, r.delta).Bind(7, r.delta_est).Bind(8, r.tau).Bind(9, r.rho)
        .Bind(10, static_cast<int>(r.guarantee)).Bind(11, r.failure_probability)
        .Bind(12, r.verifier).Bind(13, r.fallback ? 1 : 0).Bind(14, r.num_samples)
        .Bind(15, r.seconds).Bind(16, r.backend).Bind(17, r.seed).Bind(18, r.delta_hat)
        .Bind(19, r.threshold).Bind(20, r.note).Bind(21, r.payload_sha256);
    q.BindBlob(22, r.payload);
    q.Bind(23, r.ledger_seq).Bind(24, r.num_steps).Bind(25, r.create_time_ms).Bind(26, r.chain);
    if (absl::Status s = q.Run("insert release"); !s.ok()) {
      if (s.code() == absl::StatusCode::kAlreadyExists) {
        return absl::AlreadyExistsError(absl::StrFormat(
            "release '%s' (request_id '%s') already exists", r.release_id, r.request_id));
      }
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<JobRow>> SqliteStore::GetJob(const JobKey& key) {
  std::lock_guard<std::mutex> lock(read_mu_);
  Stmt q(read_db_, Sql("SELECT ", kJobColumns, " FROM jobs WHERE tenant = ? AND job_id = ?"));
  q.Bind(1, key.tenant).Bind(2, key.job_id);
  if (!q.status().ok()) return q.status();
  const int rc = q.Step();
  if (rc == SQLITE_DONE) return std::optional<JobRow>();
  if (rc != SQLITE_ROW) return Error(read_db_, rc, "get job");
  return std::optional<JobRow>(ReadJob(q));
}

absl::StatusOr<std::vector<JobRow>> SqliteStore::ListJobs(std::string_view tenant,
                                                          std::string_view after_job_id,
                                                          int limit) {
  std::lock_guard<std::mutex> lock(read_mu_);
  Stmt q(read_db_, Sql("SELECT ", kJobColumns,
                       " FROM jobs WHERE tenant = ? AND job_id > ? ORDER BY job_id LIMIT ?"));
  q.Bind(1, tenant).Bind(2, after_job_id).Bind(3, limit);
  if (!q.status().ok()) return q.status();
  std::vector<JobRow> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) out.push_back(ReadJob(q));
  if (rc != SQLITE_DONE) return Error(read_db_, rc, "list jobs");
  return out;
}

absl::StatusOr<std::vector<JobRow>> SqliteStore::ListAllJobs(const JobKey& after, int limit) {
  std::lock_guard<std::mutex> lock(read_mu_);
  Stmt q(read_db_, Sql("SELECT ", kJobColumns,
                       " FROM jobs WHERE (tenant, job_id) > (?, ?) ORDER BY tenant, job_id LIMIT ?"));
  q.Bind(1, after.tenant).Bind(2, after.job_id).Bind(3, limit);
  if (!q.status().ok()) return q.status();
  std::vector<JobRow> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) out.push_back(ReadJob(q));
  if (rc != SQLITE_DONE) return Error(read_db_, rc, "list all jobs");
  return out;
}

absl::StatusOr<int64_t> SqliteStore::CountJobs(std::string_view tenant) {
  std::lock_guard<std::mutex> lock(read_mu_);
  Stmt q(read_db_, "SELECT count(*) FROM jobs WHERE tenant = ?");
  q.Bind(1, tenant);
  if (!q.status().ok()) return q.status();
  const int rc = q.Step();
  if (rc != SQLITE_ROW) return Error(read_db_, rc, "count jobs");
  return q.Int(0);
}

absl::StatusOr<std::vector<UpdateRow>> SqliteStore::ListUpdates(const JobKey& key,
                                                                int64_t after_seq, int limit) {
  std::lock_guard<std::mutex> lock(read_mu_);
  Stmt q(read_db_, Sql("SELECT ", kUpdateColumns,
                       " FROM updates WHERE tenant = ? AND job_id = ? AND seq > ? "
                       "ORDER BY seq LIMIT ?"));
  q.Bind(1, key.tenant).Bind(2, key.job_id).Bind(3, after_seq).Bind(4, limit);
  if (!q.status().ok()) return q.status();
  std::vector<UpdateRow> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) out.push_back(ReadUpdate(q));
  if (rc != SQLITE_DONE) return Error(read_db_, rc, "list updates");
  return out;
}

absl::StatusOr<std::optional<UpdateRow>> SqliteStore::GetUpdate(const JobKey& key, int64_t seq) {
  std::lock_guard<std::mutex> lock(read_mu_);
  Stmt q(read_db_, Sql("SELECT ", kUpdateColumns,
                       " FROM updates WHERE tenant = ? AND job_id = ? AND seq = ?"));
  q.Bind(1, key.tenant).Bind(2, key.job_id).Bind(3, seq);
  if (!q.status().ok()) return q.status();
  const int rc = q.Step();
  if (rc == SQLITE_DONE) return std::optional<UpdateRow>();
  if (rc != SQLITE_ROW) return Error(read_db_, rc, "get update");
  return std::optional<UpdateRow>(ReadUpdate(q));
}

absl::StatusOr<std::optional<UpdateRow>> SqliteStore::LastUpdate(const JobKey& key) {
  std::lock_guard<std::mutex> lock(read_mu_);
  Stmt q(read_db_, Sql("SELECT ", kUpdateColumns,
                       " FROM updates WHERE tenant = ? AND job_id = ? ORDER BY seq DESC LIMIT 1"));
  q.Bind(1, key.tenant).Bind(2, key.job_id);
  if (!q.status().ok()) return q.status();
  const int rc = q.Step();
  if (rc == SQLITE_DONE) return std::optional<UpdateRow>();
  if (rc != SQLITE_ROW) return Error(read_db_, rc, "last update");
  return std::optional<UpdateRow>(ReadUpdate(q));
}

absl::StatusOr<int64_t> SqliteStore::CountReleases(const JobKey& key) {
  std::lock_guard<std::mutex> lock(read_mu_);
  Stmt q(read_db_, "SELECT count(*) FROM releases WHERE tenant = ? AND job_id = ?");
  q.Bind(1, key.tenant).Bind(2, key.job_id);
  if (!q.status().ok()) return q.status();
  const int rc = q.Step();
  if (rc != SQLITE_ROW) return Error(read_db_, rc, "count releases");
  return q.Int(0);
}

absl::StatusOr<std::optional<std::string>> SqliteStore::LastReleaseChain(const JobKey& key) {
  std::lock_guard<std::mutex> lock(read_mu_);
  Stmt q(read_db_, "SELECT chain FROM releases WHERE tenant = ? AND job_id = ? "
                   "ORDER BY create_time_ms DESC, rowid DESC LIMIT 1");
  q.Bind(1, key.tenant).Bind(2, key.job_id);
  if (!q.status().ok()) return q.status();
  const int rc = q.Step();
  if (rc == SQLITE_DONE) return std::optional<std::string>();
  if (rc != SQLITE_ROW) return Error(read_db_, rc, "last release chain");
  return std::optional<std::string>(q.Text(0));
}

absl::StatusOr<std::optional<ReleaseRow>> SqliteStore::GetRelease(std::string_view release_id) {
  std::lock_guard<std::mutex> lock(read_mu_);
  Stmt q(read_db_, Sql("SELECT ", kReleaseColumns, " FROM releases WHERE release_id = ?"));
  q.Bind(1, release_id);
  if (!q.status().ok()) return q.status();
  const int rc = q.Step();
  if (rc == SQLITE_DONE) return std::optional<ReleaseRow>();
  if (rc != SQLITE_ROW) return Error(read_db_, rc, "get release");
  return std::optional<ReleaseRow>(ReadRelease(q));
}

absl::StatusOr<std::optional<ReleaseRow>> SqliteStore::FindReleaseByRequest(
    std::string_view tenant, std::string_view request_id) {
  std::lock_guard<std::mutex> lock(read_mu_);
  Stmt q(read_db_, Sql("SELECT ", kReleaseColumns,
                       " FROM releases WHERE tenant = ? AND request_id = ?"));
  q.Bind(1, tenant).Bind(2, request_id);
  if (!q.status().ok()) return q.status();
  const int rc = q.Step();
  if (rc == SQLITE_DONE) return std::optional<ReleaseRow>();
  if (rc != SQLITE_ROW) return Error(read_db_, rc, "find release");
  return std::optional<ReleaseRow>(ReadRelease(q));
}

absl::StatusOr<std::vector<ReleaseRow>> SqliteStore::ListReleases(const JobKey& key) {
  std::lock_guard<std::mutex> lock(read_mu_);
  Stmt q(read_db_, Sql("SELECT ", kReleaseColumns,
                       " FROM releases WHERE tenant = ? AND job_id = ? "
                       "ORDER BY create_time_ms, rowid"));
  q.Bind(1, key.tenant).Bind(2, key.job_id);
  if (!q.status().ok()) return q.status();
  std::vector<ReleaseRow> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) out.push_back(ReadRelease(q));
  if (rc != SQLITE_DONE) return Error(read_db_, rc, "list releases");
  return out;
}

absl::Status CreateSqliteSchemaForTest(const std::string& path, int target_version) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    sqlite3_close(db);
    return absl::UnavailableError("open failed");
  }
  absl::StatusOr<int> v = sqlite::Migrate(db, target_version);
  sqlite3_close(db);
  return v.status();
}

}  // namespace dpledger::server
