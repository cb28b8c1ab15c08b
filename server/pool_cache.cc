#include "server/pool_cache.h"

#include <algorithm>
#include <vector>

namespace dpledger::server {

PoolCache::Lease::Lease(PoolCache* cache, JobKey job, std::string name,
                        std::unique_ptr<core::Accountant> a)
    : acc(std::move(a)), cache_(cache), job_(std::move(job)), name_(std::move(name)) {}

PoolCache::Lease::Lease(Lease&& o) noexcept
    : acc(std::move(o.acc)), cache_(o.cache_), job_(std::move(o.job_)), name_(std::move(o.name_)) {
  o.cache_ = nullptr;
}

PoolCache::Lease::~Lease() {
  if (cache_ == nullptr) return;
  cache_->Put(job_, std::move(acc));
  {
    std::lock_guard<std::mutex> lock(cache_->mu_);
    cache_->borrowed_.erase(Key{job_, name_});
  }
  cache_->returned_.notify_all();
}

PoolCache::Lease PoolCache::Borrow(const JobKey& job, std::string_view name) {
  Key key{job, std::string(name)};
  {
    std::unique_lock<std::mutex> lock(mu_);
    returned_.wait(lock, [&] { return borrowed_.count(key) == 0; });
    borrowed_.insert(key);
  }
  return Lease(this, job, std::string(name), Take(job, name));
}

std::unique_ptr<core::Accountant> PoolCache::Take(const JobKey& job, std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(Key{job, std::string(name)});
  if (it == entries_.end()) return nullptr;
  std::unique_ptr<core::Accountant> acc = std::move(it->second.acc);
  bytes_ -= it->second.bytes;
  entries_.erase(it);
  PublishLocked();
  return acc;
}

void PoolCache::Put(const JobKey& job, std::unique_ptr<core::Accountant> acc) {
  if (acc == nullptr) return;
  const size_t b = acc->CacheBytes();
  if (b == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = entries_[Key{job, std::string(acc->Name())}];
  // Two concurrent queries of one job each built an accountant: keep the newest.
  bytes_ -= e.bytes;
  e.acc = std::move(acc);
  e.bytes = b;
  e.last_used = ++tick_;
  bytes_ += b;
  EvictLocked();
  PublishLocked();
}

void PoolCache::EvictLocked() {
  if (bytes_ <= max_bytes_) return;
  std::vector<std::pair<uint64_t, Key>> order;
  for (const auto& [k, e] : entries_) order.emplace_back(e.last_used, k);
  std::sort(order.begin(), order.end());
  for (const auto& [tick, k] : order) {
    if (bytes_ <= max_bytes_) break;
    auto it = entries_.find(k);
    bytes_ -= it->second.bytes;
    entries_.erase(it);
    if (metrics_) metrics_->PoolEvicted();
  }
}

void PoolCache::PublishLocked() {
  if (metrics_) metrics_->SetPoolBytes(static_cast<double>(bytes_));
}

size_t PoolCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t PoolCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

bool ExtendToLedger(core::Accountant& acc, std::span<const core::MechanismEvent> ledger) {
  // Both ledgers merge consecutive equal mechanisms the same way, so acc's is a prefix
  // exactly when its events equal ledger's but for a shorter last one.
  const std::span<const core::MechanismEvent> have = acc.events();
  if (have.size() > ledger.size()) return false;
  for (size_t i = 0; i < have.size(); ++i) {
    const bool last = i + 1 == have.size();
    if (!(have[i].mechanism == ledger[i].mechanism)) return false;
    if (last ? have[i].count > ledger[i].count : have[i].count != ledger[i].count) return false;
  }
  for (size_t i = have.empty() ? 0 : have.size() - 1; i < ledger.size(); ++i) {
    const int64_t missing =
        i + 1 == have.size() ? ledger[i].count - have[i].count : ledger[i].count;
    if (missing == 0) continue;
    if (!acc.Compose(ledger[i].mechanism, missing).ok()) return false;
  }
  return true;
}

}  // namespace dpledger::server
