// Fair share of the write path between tenants (issue 11 "Streams"): each tenant may have
// at most `max_inflight` updates admitted-or-being-admitted and not yet durable. A tenant's
// pipelining streams otherwise filled every group commit with their updates, and another
// tenant's single AppendSteps waited behind commits of thousands of rows (30 busy streams:
// p90 1.9 s). With the cap, a commit holds at most max_inflight updates of any one tenant,
// so one tenant's load delays another's append by a bounded amount; the busy tenant's
// streams simply wait for their turn (backpressure, no error).
//
// Thread safety: all methods are thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace dpledger::server {

class TenantGate {
 public:
  explicit TenantGate(int64_t max_inflight) : max_inflight_(max_inflight) {}

  // Takes `n` of `tenant`'s share, waiting while it is spent; a request larger than the whole
  // share goes alone (when nothing else of the tenant is in flight). Gives up, returning
  // false, once `cancelled()` is true (checked every few milliseconds while waiting).
  bool Acquire(const std::string& tenant, int64_t n, const std::function<bool()>& cancelled);
  void Release(const std::string& tenant, int64_t n);
  int64_t inflight(const std::string& tenant) const;

 private:
  const int64_t max_inflight_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, int64_t> inflight_;
};

// A share taken from a TenantGate, given back on destruction (or by Release).
class GateTicket {
 public:
  GateTicket() = default;
  GateTicket(TenantGate* gate, std::string tenant, int64_t n)
      : gate_(gate), tenant_(std::move(tenant)), n_(n) {}
  GateTicket(GateTicket&& o) noexcept { *this = std::move(o); }
  GateTicket& operator=(GateTicket&& o) noexcept {
    Release();
    gate_ = o.gate_;
    tenant_ = std::move(o.tenant_);
    n_ = o.n_;
    o.gate_ = nullptr;
    return *this;
  }
  ~GateTicket() { Release(); }
  void Release() {
    if (gate_ != nullptr) gate_->Release(tenant_, n_);
    gate_ = nullptr;
  }

 private:
  TenantGate* gate_ = nullptr;
  std::string tenant_;
  int64_t n_ = 0;
};

}  // namespace dpledger::server
