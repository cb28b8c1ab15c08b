// The ledger store interface (issue 4 "Durability and state"). Backends: SQLite
// (sqlite_store.h, the embedded default), PostgreSQL (postgres_store.h, shared by several
// replicas) and memory (memory_store.h, tests). store_test.cc runs one suite against every backend.
//
// Contract
// * Apply writes a group of batches in ONE atomic transaction and returns OK only once it is
//   durable (SQLite: WAL commit with synchronous=FULL). On error nothing of the group is
//   applied. Rows are validated as a safety net: a new job must not exist (ALREADY_EXISTS);
//   an update's job must exist and be open (FAILED_PRECONDITION) and its seq must be the
//   job's last seq + 1 (ABORTED otherwise: the writer's view of the ledger is stale, e.g.
//   another replica wrote first; re-read the rows after its last seq and decide again); an
//   evr mark with `expected` set needs the job still in that state (ABORTED otherwise); a
//   release's job must exist. Shared backends check all this inside the transaction, so it
//   holds across processes.
// * Reads see every group whose Apply returned OK.
// * Thread safety: every method may be called from any thread; Apply calls are serialised by
//   the caller (the group committer) but the backend must tolerate concurrent reads. A shared
//   backend (PostgreSQL) also takes Apply calls from other processes at once and keeps the
//   row checks above true across them.
// * I/O problems are UNAVAILABLE; damaged data is DATA_LOSS.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/ledger_types.h"

namespace dpledger::server {

struct JobStateChange {
  JobKey key;
  JobState state = JobState::kClosed;
  int64_t close_time_ms = 0;
};

// An "evr" job's admission state (ledger_types.h EvrState).
struct EvrMark {
  JobKey key;
  EvrState state = EvrState::kIdle;
  std::string note;
  // The state the writer saw. When set, the mark applies only if the job is still in it
  // (ABORTED otherwise): with several replicas, two cannot both start a verification, and
  // none admits after another one stopped the job.
  std::optional<EvrState> expected = std::nullopt;
};

// Everything one service operation writes.
struct WriteBatch {
  std::vector<JobRow> new_jobs;
  std::vector<JobStateChange> state_changes;
  std::vector<EvrMark> evr_marks;
  std::vector<UpdateRow> updates;       // in seq order per job
  std::vector<ReleaseRow> releases;
  bool empty() const {
    return new_jobs.empty() && state_changes.empty() && evr_marks.empty() && updates.empty() &&
           releases.empty();
  }
  // The jobs this batch touches (a failed commit poisons them, see committer.h).
  std::vector<JobKey> Jobs() const;
};

// The row checks' ABORTED errors, worded alike by every backend.
absl::Status SeqDoesNotFollow(const UpdateRow& u, int64_t last_seq);
absl::Status EvrStateChanged(const EvrMark& m, EvrState stored);

class Store {
 public:
  virtual ~Store() = default;

  virtual std::string_view Backend() const = 0;  // "sqlite", "memory", ...
  // True when other processes may write to the same store (PostgreSQL shared by replicas):
  // a cached view of a job must then be checked against the store before it is used.
  virtual bool Shared() const { return false; }

  virtual absl::Status Apply(std::span<const WriteBatch* const> batches) = 0;
  absl::Status Apply(const WriteBatch& batch) {
    const WriteBatch* one[] = {&batch};
    return Apply(one);
  }

  virtual absl::StatusOr<std::optional<JobRow>> GetJob(const JobKey& key) = 0;
  // One tenant's jobs with job_id > after_job_id, ordered by job_id, at most limit.
  virtual absl::StatusOr<std::vector<JobRow>> ListJobs(std::string_view tenant,
                                                       std::string_view after_job_id,
                                                       int limit) = 0;
  // Every tenant's jobs with key > after, ordered by (tenant, job_id): start-up checks.
  virtual absl::StatusOr<std::vector<JobRow>> ListAllJobs(const JobKey& after, int limit) = 0;
  virtual absl::StatusOr<int64_t> CountJobs(std::string_view tenant) = 0;

  // Updates with seq > after_seq in seq order, at most limit.
  virtual absl::StatusOr<std::vector<UpdateRow>> ListUpdates(const JobKey& key,
                                                             int64_t after_seq,
                                                             int limit) = 0;
  virtual absl::StatusOr<std::optional<UpdateRow>> GetUpdate(const JobKey& key,
                                                             int64_t seq) = 0;
  // The update with the highest seq, if any.
  virtual absl::StatusOr<std::optional<UpdateRow>> LastUpdate(const JobKey& key) = 0;

  virtual absl::StatusOr<std::optional<ReleaseRow>> GetRelease(
      std::string_view release_id) = 0;
  virtual absl::StatusOr<std::optional<ReleaseRow>> FindReleaseByRequest(
      std::string_view tenant, std::string_view request_id) = 0;
  // A job's releases in creation order (payloads included).
  virtual absl::StatusOr<std::vector<ReleaseRow>> ListReleases(const JobKey& key) = 0;
  virtual absl::StatusOr<int64_t> CountReleases(const JobKey& key) = 0;
  // The chain link (ReleaseRow::chain) of the job's newest release, the last ListReleases
  // would return, without reading any payload; nullopt when the job has none.
  virtual absl::StatusOr<std::optional<std::string>> LastReleaseChain(const JobKey& key) = 0;

  // Storage-level integrity (SQLite: PRAGMA quick_check or integrity_check). DATA_LOSS
  // with the first problems when damaged.
  virtual absl::Status CheckIntegrity(bool full) = 0;

  // Cheap reachability check for readiness (health NOT_SERVING while it fails): UNAVAILABLE
  // when the database cannot be reached. Embedded stores are always reachable.
  virtual absl::Status Ping() { return absl::OkStatus(); }
};

}  // namespace dpledger::server
