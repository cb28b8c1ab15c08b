#include "server/job_cache.h"

#include <malloc.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "server/ledger_check.h"
#include "spdlog/spdlog.h"

namespace dpledger::server {
namespace {

// glibc's per-allocation header, and what a string holds beyond its object (nothing while
// it fits inline).
constexpr size_t kChunk = 16;
size_t HeapBytes(const std::string& s) {
  return s.capacity() > 15 ? s.capacity() + 1 + kChunk : 0;
}

// An update row kept in the retry window (a deque stores rows in blocks: no header each).
size_t RowBytes(const UpdateRow& r) {
  return sizeof(UpdateRow) + HeapBytes(r.key.tenant) + HeapBytes(r.key.job_id) +
         HeapBytes(r.steps) + HeapBytes(r.chain);
}

// Everything a loaded entry holds: the entry object, its job row, its retry window and its
// admission policy (accountant caches and ledger), plus the cache map's node.
size_t EntryBytes(const JobEntry& e) {
  const JobRow& j = e.row;
  return sizeof(JobEntry) + 2 * kChunk + 128 /* map node, key */ + HeapBytes(j.key.tenant) +
         HeapBytes(j.key.job_id) + HeapBytes(j.accountant) + HeapBytes(j.evr_note) +
         HeapBytes(j.plan) + HeapBytes(e.chain_head) + HeapBytes(e.release_head) +
         e.recent_bytes + (e.policy ? e.policy->MemoryBytes() : 0);
}

}  // namespace

JobCache::JobCache(Store* store, Committer* committer, Metrics* metrics,
                   JobCacheOptions options, PolicyOptionsFn policy_options)
    : store_(store),
      committer_(committer),
      metrics_(metrics),
      options_(options),
      policy_options_(std::move(policy_options)) {}

void JobCache::MarkStale(const JobKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it != entries_.end()) it->second->stale = true;
}

void JobCache::Remember(JobEntry& entry, UpdateRow row) const {
  entry.recent_bytes += RowBytes(row);
  entry.recent.push_back(std::move(row));
  while (static_cast<int>(entry.recent.size()) > options_.recent_window) {
    entry.recent_bytes -= RowBytes(entry.recent.front());
    entry.recent.pop_front();
  }
}

size_t JobCache::bytes() const {
  std::lock_guard<std::mutex> g(mu_);
  return bytes_;
}

absl::Status JobCache::Load(JobEntry& entry, const JobKey& key) {
  absl::StatusOr<std::optional<JobRow>> row = store_->GetJob(key);
  if (!row.ok()) return row.status();
  if (!row->has_value()) {
    return absl::NotFoundError(absl::StrFormat("job '%s' not found", key.job_id));
  }
  std::vector<core::MechanismEvent> events;  // merged like an accountant's ledger
  std::optional<core::EpsilonBound> stored_spent;
  entry.recent.clear();
  entry.recent_bytes = 0;
  absl::Status s = ReplayLedger(
      *store_, key, [&](const UpdateRow& u, std::span<const core::MechanismEvent> steps) {
        for (const core::MechanismEvent& e : steps) {
          if (!events.empty() && events.back().mechanism == e.mechanism) {
            events.back().count += e.count;
          } else {
            events.push_back(e);
          }
        }
        stored_spent = u.spent;
        Remember(entry, u);
        return absl::OkStatus();
      });
  if (!s.ok()) return s;
  absl::StatusOr<std::unique_ptr<AdmissionPolicy>> policy =
      CreateAdmissionPolicy(**row, policy_options_(**row), events, stored_spent);
  if (!policy.ok()) {
    return absl::Status(policy.status().code(),
                        absl::StrFormat("job '%s' cannot be rebuilt from its ledger: %s",
                                        JobKeyString(key),
                                        std::string(policy.status().message())));
  }
  absl::StatusOr<int64_t> releases = store_->CountReleases(key);
  if (!releases.ok()) return releases.status();
  if ((*row)->evr_state == EvrState::kVerifying) {
    spdlog::warn("job={} an EVR admission verification was interrupted; it counts as a "
                 "rejection and the job admits no more steps", JobKeyString(key));
  }
  entry.row = **row;
  entry.policy = *std::move(policy);
  entry.last_seq = entry.recent.empty() ? 0 : entry.recent.back().seq;
  entry.num_steps = entry.policy->ledger().num_steps();
  entry.num_releases = *releases;
  entry.chain_head = entry.recent.empty() ? ChainGenesis(**row) : entry.recent.back().chain;
  entry.release_head = ChainGenesis(**row);
  if (*releases > 0) {
    absl::StatusOr<std::optional<std::string>> last = store_->LastReleaseChain(key);
    if (!last.ok()) return last.status();
    if (last->has_value()) entry.release_head = **last;
  }
  entry.tail = nullptr;
  entry.loaded = true;
  entry.stale = false;
  committer_->Unpoison(key);
  if (metrics_) {
    metrics_->PoolRebuild();
    if (entry.last_seq > 0) metrics_->JobEpsilon(JobKeyString(key), entry.spent().upper, entry.row.budget_epsilon);
  }
  return absl::OkStatus();
}

absl::StatusOr<EntryPtr> JobCache::Acquire(const JobKey& key, std::unique_lock<std::mutex>& lock) {
  EntryPtr e;
  {
    std::lock_guard<std::mutex> g(mu_);
    EntryPtr& slot = entries_[key];
    if (!slot) slot = std::make_shared<JobEntry>();
    e = slot;
    e->last_used = ++tick_;
  }
  lock = std::unique_lock<std::mutex>(e->mu);
  if (!e->loaded || e->stale) {
    absl::Status s = Load(*e, key);
    if (!s.ok()) {
      e->loaded = false;
      lock.unlock();
      std::lock_guard<std::mutex> g(mu_);
      auto it = entries_.find(key);
      if (it != entries_.end() && it->second == e && e.use_count() == 2) {
        bytes_ -= e->bytes;
        entries_.erase(it);
      }
      return s;
    }
    UpdateBytes(*e);
    EvictIfNeeded();
  } else if (store_->Shared()) {
    if (absl::Status s = Refresh(*e, key); !s.ok()) {
      e->stale = true;  // rebuilt from scratch next time
      lock.unlock();
      return s;
    }
  }
  return e;
}

absl::Status JobCache::Refresh(JobEntry& entry, const JobKey& key) {
  // This replica's own writes still in flight come first: the store may not show them yet,
  // and if another replica wrote in between they fail (ABORTED) and poison the job.
  if (entry.tail && !entry.tail->done()) return absl::OkStatus();
  absl::StatusOr<std::optional<JobRow>> row = store_->GetJob(key);
  if (!row.ok()) return row.status();
  if (!row->has_value()) {
    return absl::NotFoundError(absl::StrFormat("job '%s' not found", key.job_id));
  }
  absl::StatusOr<std::optional<UpdateRow>> last = store_->LastUpdate(key);
  if (!last.ok()) return last.status();
  const int64_t stored_last = last->has_value() ? (*last)->seq : 0;
  if (stored_last < entry.last_seq) {
    return absl::DataLossError(absl::StrFormat(
        "job '%s': the store's ledger ends at seq %d, behind the %d this replica saw committed",
        JobKeyString(key), stored_last, entry.last_seq));
  }
  if (stored_last > entry.last_seq) {
    std::vector<core::MechanismEvent> steps;
    core::EpsilonBound spent = entry.spent();
    absl::Status s = ReplayLedger(
        *store_, key,
        [&](const UpdateRow& u, std::span<const core::MechanismEvent> st) {
          steps.insert(steps.end(), st.begin(), st.end());
          spent = u.spent;
          Remember(entry, u);
          return absl::OkStatus();
        },
        entry.last_seq, entry.num_steps);
    if (!s.ok()) return s;
    if (absl::Status e = entry.policy->Extend(steps, spent); !e.ok()) return e;
    entry.last_seq = entry.recent.back().seq;
    entry.chain_head = entry.recent.back().chain;
    entry.num_steps = entry.policy->ledger().num_steps();
    PolicyChanged(entry);
  }
  absl::StatusOr<int64_t> releases = store_->CountReleases(key);
  if (!releases.ok()) return releases.status();
  if (*releases != entry.num_releases) {
    // Another replica's releases moved the job's release chain (ledger_chain.h).
    absl::StatusOr<std::optional<std::string>> last = store_->LastReleaseChain(key);
    if (!last.ok()) return last.status();
    entry.release_head = last->value_or(ChainGenesis(**row));
  }
  entry.row = **row;
  entry.num_releases = *releases;
  return absl::OkStatus();
}

void JobCache::PolicyChanged(JobEntry& entry) {
  if (UpdateBytes(entry)) EvictIfNeeded();
}

bool JobCache::UpdateBytes(JobEntry& entry) {
  const size_t now = EntryBytes(entry);
  std::lock_guard<std::mutex> g(mu_);
  if (now == entry.bytes) return false;
  bytes_ = bytes_ - entry.bytes + now;
  entry.bytes = now;
  return true;
}

void JobCache::EvictIfNeeded() {
  std::unique_lock<std::mutex> g(mu_);
  const size_t max_bytes = static_cast<size_t>(std::max<int64_t>(0, options_.max_bytes));
  auto publish = [&] {
    if (metrics_) {
      metrics_->SetCachedJobs(static_cast<double>(entries_.size()), static_cast<double>(bytes_));
    }
  };
  publish();
  if (static_cast<int>(entries_.size()) <= options_.max_jobs && bytes_ <= max_bytes) return;
  std::vector<std::pair<uint64_t, JobKey>> order;
  for (const auto& [k, e] : entries_) order.emplace_back(e->last_used, k);
  std::sort(order.begin(), order.end());
  const size_t target = static_cast<size_t>(options_.max_jobs * 0.9);
  const size_t target_bytes = static_cast<size_t>(static_cast<double>(max_bytes) * 0.9);
  size_t freed = 0;
  for (const auto& [tick, k] : order) {
    if (entries_.size() <= target && bytes_ <= target_bytes) break;
    auto it = entries_.find(k);
    EntryPtr& e = it->second;
    if (e.use_count() != 1) continue;
    std::unique_lock<std::mutex> l(e->mu, std::try_to_lock);
    if (!l.owns_lock() || (e->tail && !e->tail->done())) continue;
    l.unlock();
    bytes_ -= e->bytes;
    freed += e->bytes;
    entries_.erase(it);
  }
  publish();
  // glibc keeps freed heap pages mapped; hand them back once a sizeable amount was freed
  // (the trim walks the arenas: not after every small eviction).
  trim_pending_ += freed;
  if (trim_pending_ < kTrimAfterBytes) return;
  trim_pending_ = 0;
  g.unlock();
  malloc_trim(0);
}

}  // namespace dpledger::server
