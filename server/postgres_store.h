// The shared store (issue 12 "Scale out"): the ledger in a PostgreSQL database that several
// dpledgerd replicas use at once. Same contract as store.h and sqlite_store.h.
//
// Durability: Apply is one transaction; OK only after COMMIT returned, i.e. the commit
// record is flushed (synchronous_commit on, the server default; fsync must be on). When the
// connection drops during COMMIT the outcome is unknown: Apply returns UNAVAILABLE, and the
// caller re-reads the ledger (a retry of the same seq then finds the original row).
//
// Several replicas, one truth: Apply first locks the row of every existing job the group
// touches (SELECT ... FOR UPDATE, in (tenant, job_id) order so two groups cannot deadlock)
// and reads each job's last seq under that lock. The safety-net checks (job exists and is
// open, seq == last seq + 1) therefore hold across replicas, not only within one; a group
// whose seq another replica has taken fails with ABORTED and writes nothing. The
// primary key (tenant, job_id, seq) of `updates` is the last line of defence.
//
// Connections: a pool of at most pool_size connections (one is the writer while Apply runs).
// A connection found broken is dropped; reconnecting backs off exponentially (initial to max
// delay) and, while backing off, callers get UNAVAILABLE at once instead of waiting on a
// dead server. Every error from an unreachable database is UNAVAILABLE; nothing crashes.
//
// Store loss (store_mark.h): with mark_path set, Open compares the database with this
// replica's high-water mark (its identity, counts and newest head) and refuses a database
// that lost what the replica acknowledged (e.g. restored from an older dump) with DATA_LOSS
// unless accept_data_loss; every commit group then advances the mark before it is
// acknowledged.
//
// Schema: versioned, migrated at Open (postgres_schema.h); a database newer than this binary
// is refused (FAILED_PRECONDITION). The URL may pick a schema with
// `?options=-csearch_path%3Dname`.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/store.h"
#include "server/store_mark.h"

typedef struct pg_conn PGconn;

namespace dpledger::server {

struct PostgresStoreOptions {
  std::string url;             // libpq connection URI or key=value string
  int pool_size = 8;           // connections at most
  int connect_timeout_s = 5;   // libpq connect_timeout, unless the URL sets one
  std::chrono::milliseconds reconnect_initial_delay{100};
  std::chrono::milliseconds reconnect_max_delay{2000};
  std::string mark_path = "";     // this replica's high-water mark; empty: none
  bool accept_data_loss = false;  // serve a database behind the mark (logged loudly)
};

class PostgresStore final : public Store {
 public:
  // Connects, migrates and checks the schema. UNAVAILABLE when the database cannot be
  // reached, INVALID_ARGUMENT for a malformed URL or option.
  static absl::StatusOr<std::unique_ptr<PostgresStore>> Open(const PostgresStoreOptions& options);
  ~PostgresStore() override;

  std::string_view Backend() const override { return "postgres"; }
  bool Shared() const override { return true; }
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
  // PostgreSQL checks pages itself (checksums, when the cluster has them); this verifies that
  // the database answers and holds the expected schema version.
  absl::Status CheckIntegrity(bool full) override;
  absl::Status Ping() override;

  int schema_version() const { return schema_version_; }

 private:
  class Lease;
  explicit PostgresStore(PostgresStoreOptions options) : options_(std::move(options)) {}
  // A pooled connection, or UNAVAILABLE (database unreachable, or backing off).
  absl::StatusOr<PGconn*> Acquire();
  void Release(PGconn* conn);
  absl::StatusOr<PGconn*> Connect();
  // Runs `read` on a pooled connection; once more on a fresh one when the pooled connection
  // turned out to be dead (e.g. the database restarted since it was last used).
  template <typename T, typename F>
  absl::StatusOr<T> Read(F read);
  absl::Status CheckMark();  // at Open, with mark_path set


  PostgresStoreOptions options_;
  int schema_version_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<PGconn*> idle_;
  int open_ = 0;  // connections handed out or idle
  std::chrono::steady_clock::time_point next_connect_{};
  std::chrono::milliseconds backoff_{0};
  std::string last_connect_error_;
  std::mutex mark_mu_;
  StoreMark mark_;  // guarded by mark_mu_
  std::unique_ptr<StoreMarkFile> mark_file_;  // null without mark_path
};

}  // namespace dpledger::server
