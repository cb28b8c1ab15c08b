// Query accountants whose state is worth keeping between queries (the Monte Carlo
// accountant's sample pools, issue 4 "Durability and state"; also the PLD accountant's
// grids when a job admits with another accountant), per (job, accountant),
// bounded by bytes with least-recently-used eviction. An entry is only a cache: an
// evicted or discarded accountant is rebuilt from the job's seed and ledger and, its
// pools being deterministic in (seed, ledger), answers exactly as before.
//
// A query Borrows the job's accountant (so one query at a time uses it), brings it up
// to the current ledger (Extend), answers, and the lease Puts it back. A second query of
// the same (job, accountant) waits for the first one's lease and then finds the pools it
// built, rather than building its own in parallel (two concurrent MC Spent queries of a
// new job used to build two pools, issue 11). Accountants reporting no cache bytes
// (CacheBytes() == 0) are not worth keeping and are not stored.
//
// Thread safety: all methods are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "core/accountants/accountant.h"
#include "server/ledger_types.h"
#include "server/metrics.h"

namespace dpledger::server {

class PoolCache {
 public:
  // max_bytes 0 keeps nothing. metrics may be null.
  PoolCache(size_t max_bytes, Metrics* metrics) : max_bytes_(max_bytes), metrics_(metrics) {}

  // The use of (job, name)'s accountant by one query; destroying it Puts `acc` back (when
  // not null) and lets the next Borrow of the key go on.
  class Lease {
   public:
    Lease(Lease&& o) noexcept;
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    std::unique_ptr<core::Accountant> acc;  // the cached accountant, or null: build one

   private:
    friend class PoolCache;
    Lease(PoolCache* cache, JobKey job, std::string name, std::unique_ptr<core::Accountant> a);
    PoolCache* cache_;
    JobKey job_;
    std::string name_;
  };
  // Waits while another lease of (job, name) is held, then Takes its accountant.
  Lease Borrow(const JobKey& job, std::string_view name);

  // The cached accountant of (job, name), removed from the cache; null when none.
  std::unique_ptr<core::Accountant> Take(const JobKey& job, std::string_view name);
  // Stores `acc` as the newest entry, then evicts least recently used entries while the
  // total exceeds the cap (`acc` itself included, when it alone is larger).
  void Put(const JobKey& job, std::unique_ptr<core::Accountant> acc);
  size_t bytes() const;
  size_t size() const;

 private:
  using Key = std::pair<JobKey, std::string>;
  struct Entry {
    std::unique_ptr<core::Accountant> acc;
    size_t bytes = 0;
    uint64_t last_used = 0;
  };
  void EvictLocked();
  void PublishLocked();

  const size_t max_bytes_;
  Metrics* const metrics_;
  mutable std::mutex mu_;
  std::map<Key, Entry> entries_;
  size_t bytes_ = 0;
  uint64_t tick_ = 0;
  std::set<Key> borrowed_;  // keys with a Lease out
  std::condition_variable returned_;
};

// Brings `acc` (built over an earlier state of the same ledger) up to `ledger` by
// composing the steps it lacks. Returns false, leaving `acc` in an unspecified
// state, when its ledger is not a prefix of `ledger` (the job's ledger was rebuilt
// after a failed commit): the caller then builds a fresh accountant.
bool ExtendToLedger(core::Accountant& acc, std::span<const core::MechanismEvent> ledger);

}  // namespace dpledger::server
