#include "server/tenant_gate.h"

#include <chrono>

namespace dpledger::server {

bool TenantGate::Acquire(const std::string& tenant, int64_t n,
                         const std::function<bool()>& cancelled) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    int64_t& used = inflight_[tenant];
    if (used == 0 || used + n <= max_inflight_) {
      used += n;
      return true;
    }
    if (cancelled && cancelled()) return false;
    cv_.wait_for(lock, std::chrono::milliseconds(20));
  }
}

void TenantGate::Release(const std::string& tenant, int64_t n) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = inflight_.find(tenant);
    if (it == inflight_.end()) return;
    it->second -= n;
    if (it->second <= 0) inflight_.erase(it);
  }
  cv_.notify_all();
}

int64_t TenantGate::inflight(const std::string& tenant) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = inflight_.find(tenant);
  return it == inflight_.end() ? 0 : it->second;
}

}  // namespace dpledger::server
