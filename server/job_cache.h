// The ledger service's per-job cache (ledger_service.h "State model"): each job's admission
// policy composed over its stored ledger, its counters and its newest admitted updates,
// rebuilt from the store on first use, after eviction and after a failed commit (the
// committer poisons the job: MarkStale). A rebuilt entry answers exactly as before
// (deterministic policies over the same ledger).
//
// Bounded by entries (max_jobs) and by the heap bytes the entries hold (max_bytes): each
// entry counts its accountant's caches (PLD grids and spectra: ~7 MiB for 10k DP-SGD
// steps), its ledger of events, its retry window of recent updates (up to recent_window
// rows with their step text and chain heads) and its job row (EntryBytes). Past either cap,
// idle entries (no holder, no pending commit) are dropped least recently used first, down to
// 90% of both, and the freed pages are handed back to the kernel (malloc_trim), so the
// resident set follows the cap (bench/cache_memory.sh measures it). Entries in use are
// skipped, so the caps can be exceeded while many jobs are busy at once; what queries build
// outside the cache (MC pools: pool_cache.h, its own cap; transient FFT buffers) is not
// counted here.
// A shared store (Store::Shared: PostgreSQL under several replicas) may hold updates, evr
// marks, closes and releases that another replica wrote. Such a cache checks the job's row,
// last seq and release count in the store on every Acquire and brings the entry up to date
// from the rows it lacks (AdmissionPolicy::Extend) before it is used, so a replica never
// admits, answers a retry or reports from a stale view. Correctness does not depend on it
// alone: the store refuses an update whose seq is not the stored last + 1 (ABORTED), which
// poisons the job here and rebuilds it.
// Thread safety: all methods are thread-safe; an entry's fields are guarded by its mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "absl/status/statusor.h"
#include "server/admission_policy.h"
#include "server/committer.h"
#include "server/ledger_types.h"
#include "server/metrics.h"
#include "server/store.h"

namespace dpledger::server {

struct JobEntry {
  std::mutex mu;
  bool loaded = false;
  std::atomic<bool> stale{false};
  uint64_t last_used = 0;             // LRU tick (under the cache mutex)
  size_t bytes = 0;                   // EntryBytes when last counted (under the cache mutex)
  size_t recent_bytes = 0;            // heap bytes of `recent` (RowBytes)
  JobRow row;
  std::unique_ptr<AdmissionPolicy> policy;  // over the admitted ledger
  int64_t last_seq = 0;
  int64_t num_steps = 0;
  int64_t num_releases = 0;
  std::deque<UpdateRow> recent;       // the newest admitted updates, by seq
  CommitTicketPtr tail;               // the job's newest commit, null when none pending
  // Last seq of a ledger prefix whose EVR release verification sampled and did not accept:
  // a retry would add false-positive exposure (mc-evr.md 4.8), so later releases of the same
  // prefix use the certified path only. In memory: a restart forgets it.
  int64_t evr_rejected_at_seq = -1;
  std::string chain_head;    // the ledger chain head at last_seq (ledger_chain.h)
  std::string release_head;  // the job's newest release link (head_0 when none)

  const core::EpsilonBound& spent() const { return policy->spent(); }
};
using EntryPtr = std::shared_ptr<JobEntry>;

struct JobCacheOptions {
  int max_jobs = 10000;
  int64_t max_bytes = int64_t{2} << 30;
  int recent_window = 4096;  // updates kept per job for retries without a store read
};

class JobCache {
 public:
  // The policy options of a job (its mc seed and samples applied).
  using PolicyOptionsFn = std::function<PolicyOptions(const JobRow&)>;
  // store, committer and metrics (may be null) must outlive the cache.
  JobCache(Store* store, Committer* committer, Metrics* metrics, JobCacheOptions options,
           PolicyOptionsFn policy_options);

  // The job's entry, loaded and locked into `lock`. NOT_FOUND when the job does not exist.
  absl::StatusOr<EntryPtr> Acquire(const JobKey& key, std::unique_lock<std::mutex>& lock);
  // The job's state must be rebuilt from the store before its next use.
  void MarkStale(const JobKey& key);
  // Call with the entry's lock held after its policy changed: re-counts its bytes and
  // evicts past the caps.
  void PolicyChanged(JobEntry& entry);
  // Appends admitted rows to the entry's retry window.
  void Remember(JobEntry& entry, UpdateRow row) const;
  // Heap bytes the cached entries hold, as counted against max_bytes.
  size_t bytes() const;

 private:
  absl::Status Load(JobEntry& entry, const JobKey& key);
  // Shared stores: brings a loaded entry up to date with the store.
  absl::Status Refresh(JobEntry& entry, const JobKey& key);
  bool UpdateBytes(JobEntry& entry);  // true if the entry's byte count changed
  void EvictIfNeeded();

  Store* store_;
  Committer* committer_;
  Metrics* metrics_;
  JobCacheOptions options_;
  PolicyOptionsFn policy_options_;

  mutable std::mutex mu_;
  std::map<JobKey, EntryPtr> entries_;
  uint64_t tick_ = 0;
  size_t bytes_ = 0;  // sum of the entries' bytes
  static constexpr size_t kTrimAfterBytes = size_t{32} << 20;
  size_t trim_pending_ = 0;  // bytes evicted since the last malloc_trim
};

}  // namespace dpledger::server
