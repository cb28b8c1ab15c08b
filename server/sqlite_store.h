// The embedded default store: one SQLite database file (<data_dir>/ledger.db) in WAL mode
// with synchronous=FULL, so a committed transaction survives power loss once Apply returns.
//
// Schema: versioned (table schema_version) with forward migrations applied at Open
// (sqlite_schema.cc); a database newer than this binary is refused (FAILED_PRECONDITION).
// Open takes an exclusive lock on "<path>.lock" for the store's lifetime (released
// by the kernel if the process dies): a second process on the same file gets
// FAILED_PRECONDITION instead of serving a ledger another process writes.
// Open runs PRAGMA quick_check (integrity_check with `full_check`) and reports damage as
// DATA_LOSS instead of serving from it.
//
// Store loss (store_mark.h): Open refuses with DATA_LOSS a database that has lost what its
// mark "<path>.mark" says was acknowledged (unless accept_data_loss); Apply refuses to
// commit once the database file is no longer the one opened (deleted or replaced), and
// rewrites the mark after each commit group before returning OK.
// The mark lives in "<path>.mark" (store_mark.h).
//
// Failed fsync (issue 16): after an I/O error the files are trusted only as far as their
// last good fsync, since Linux may drop a failed writeback's dirty pages, earlier ones
// included, and report later fsyncs as fine. A checkpoint that copies WAL frames while a
// reader holds an older snapshot writes database pages without an fsync and records them as
// copied (nBackfill in the shared WAL index); if a later fsync of the database fails, those
// pages may be gone while the index says they are there, and the next successful checkpoint
// copies only the newer frames, syncs, and lets the WAL restart over the only copy of the
// older ones: acknowledged commits lost (found by sqlite_io_fault_test's random faults).
// So the store checkpoints itself after a commit (SQLite's autocheckpoint ignores a
// checkpoint's errors), with its reads held off meanwhile: no snapshot of this process is
// open, so the checkpoint copies the whole WAL and syncs the database before it records
// anything as copied (nBackfill then only moves after a good fsync; the next writer
// restarts the WAL). A partial checkpoint can still happen if another process reads the
// file (a sqlite3 shell, a backup tool). After an I/O error in a checkpoint the store closes
// both connections without SQLite's checkpoint-on-close and reopens them: the first
// connection of any process to map the WAL index (it takes the index's DMS lock) rebuilds
// it from the WAL file, and recovery starts nBackfill at 0 (SQLite's wal.c,
// walIndexRecover), so the next checkpoint copies every committed frame again. Recovery is
// safe there because a checkpoint runs right after a commit whose fsync succeeded: every
// valid frame in the WAL is synced. Not after a failed commit: its frames may sit in the
// WAL unsynced, and recovery would make visible a commit the caller was told failed
// (acknowledged on a retry as a duplicate, then lost with power). The rebuild needs the
// store's connections to be the only ones on the file: the lock below keeps other
// dpledgerd processes out, not other SQLite programs, which must not hold the file open
// while dpledgerd runs. SQLite's WAL format and recovery:
// https://sqlite.org/walformat.html; the fsync failure semantics: PostgreSQL's 2018
// "fsyncgate" analysis (https://wiki.postgresql.org/wiki/Fsync_Errors).
//
// Thread safety: one write connection (Apply, serialised by a mutex) and one read
// connection (reads, serialised by another mutex); WAL lets readers run beside a commit.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include <sys/types.h>

#include "server/store.h"
#include "server/store_mark.h"

struct sqlite3;

namespace dpledger::server {

struct SqliteStoreOptions {
  std::string path;            // database file; created when missing
  bool full_check = false;     // integrity_check instead of quick_check at Open
  int busy_timeout_ms = 5000;  // wait for a lock held by another process
  // Serve a database that has lost acknowledged data (store_mark.h) instead of refusing;
  // logs what was lost and rewrites the mark.
  bool accept_data_loss = false;
  // SQLite VFS of both connections; "" the default. Tests name SqliteFaultVfs::kName
  // (sqlite_fault_vfs.h). Open also uses that VFS when the environment variable
  // DPL_TEST_IO_FAULT_FILE is set (end-to-end fault tests), reading the fault from that file.
  std::string vfs = {};
  // WAL pages after which a commit checkpoints into the database file; 0: 1000 (SQLite's
  // default). Fault tests set a few pages so that faults also hit checkpoints.
  int wal_autocheckpoint_pages = 0;
};

// The newest schema version this binary writes.
inline constexpr int kSqliteSchemaVersion = 5;

class SqliteStore final : public Store {
 public:
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const SqliteStoreOptions& given);
  ~SqliteStore() override;

  std::string_view Backend() const override { return "sqlite"; }
  using Store::Apply;
  absl::Status Apply(std::span<const WriteBatch* const> batches) override;
  absl::StatusOr<std::optional<JobRow>> GetJob(const JobKey& key) override;
  absl::StatusOr<std::vector<JobRow>> ListJobs(std::string_view tenant,
                                               std::string_view after_job_id,
                                               int limit) override;
  absl::StatusOr<std::vector<JobRow>> ListAllJobs(const JobKey& after, int limit) override;
  absl::StatusOr<int64_t> CountJobs(std::string_view tenant) override;
  absl::StatusOr<std::vector<UpdateRow>> ListUpdates(const JobKey& key, int64_t after_seq,
                                                     int limit) override;
  absl::StatusOr<std::optional<UpdateRow>> GetUpdate(const JobKey& key, int64_t seq) override;
  absl::StatusOr<std::optional<UpdateRow>> LastUpdate(const JobKey& key) override;
  absl::StatusOr<std::optional<ReleaseRow>> GetRelease(std::string_view release_id) override;
  absl::StatusOr<std::optional<ReleaseRow>> FindReleaseByRequest(
      std::string_view tenant, std::string_view request_id) override;
  absl::StatusOr<std::vector<ReleaseRow>> ListReleases(const JobKey& key) override;
  absl::StatusOr<int64_t> CountReleases(const JobKey& key) override;
  absl::StatusOr<std::optional<std::string>> LastReleaseChain(const JobKey& key) override;
  absl::Status CheckIntegrity(bool full) override;
  // Readiness fails once the database file was deleted or replaced (CheckPath), or while
  // the connections are closed after a failed reopen (which Ping retries).
  absl::Status Ping() override;

  int schema_version() const { return schema_version_; }
  const std::string& store_id() const { return mark_.store_id; }

 private:
  SqliteStore() = default;
  absl::Status ApplyOne(const WriteBatch& batch);
  int CheckpointPages() const;
  // A checkpoint after a good commit, reads held off; an I/O error in it reconnects. With
  // write_mu_; takes read_mu_.
  void Checkpoint();
  // Closes both connections without a checkpoint and reopens them (see the header comment).
  // With write_mu_ held; takes read_mu_. On failure both are null until a later call works.
  absl::Status Reconnect();
  absl::Status CheckMark(const SqliteStoreOptions& options);  // at Open
  absl::Status CheckPath() const;  // the database file is still the one opened

  std::string path_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  StoreMark mark_;  // guarded by write_mu_
  std::unique_ptr<StoreMarkFile> mark_file_;

  SqliteStoreOptions options_;  // as opened, for Reconnect
  std::mutex write_mu_;
  sqlite3* write_db_ = nullptr;
  int wal_frames_ = 0;  // WAL frames after the last commit (OnWalCommit); write_mu_
  int checkpoint_at_ = 1000;  // checkpoint once wal_frames_ reaches it; write_mu_
  bool stuck_ = false;  // a connection could not be closed (Reconnect); write_mu_
  std::mutex read_mu_;
  sqlite3* read_db_ = nullptr;
  int schema_version_ = 0;
  int lock_fd_ = -1;  // exclusive flock on "<path>.lock": one process per store
};

// Opens `path` and applies migrations up to `target_version` only (tests of the migration
// path create old databases with this).
absl::Status CreateSqliteSchemaForTest(const std::string& path, int target_version);

}  // namespace dpledger::server
