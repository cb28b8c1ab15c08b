#include "server/rate_limiter.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "server/status_util.h"

namespace dpledger::server {
namespace {

// Buckets kept before full ones (tenants quiet for a while) are dropped: bounds the memory
// that requests naming made-up tenants could take.
constexpr size_t kMaxBuckets = 10000;

}  // namespace

RateLimiter::RateLimiter(double rate, double burst)
    : rate_(rate), burst_(std::max(1.0, burst > 0 ? burst : rate)) {}

absl::Status RateLimiter::Take(const std::string& tenant, Clock::time_point now) {
  if (rate_ <= 0) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buckets_.find(tenant);
  if (it == buckets_.end()) {
    if (buckets_.size() >= kMaxBuckets) PruneLocked(now);
    it = buckets_.emplace(tenant, Bucket{burst_, now}).first;
  }
  Bucket& b = it->second;
  const double elapsed = std::chrono::duration<double>(now - b.updated).count();
  b.tokens = std::min(burst_, b.tokens + std::max(0.0, elapsed) * rate_);
  b.updated = now;
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return absl::OkStatus();
  }
  const int wait_ms = static_cast<int>(std::ceil((1 - b.tokens) / rate_ * 1000));
  return RetryLaterError(
      absl::StatusCode::kResourceExhausted,
      absl::StrFormat("tenant '%s' is over its rate of %g requests per second (max_tenant_rps)",
                      tenant.substr(0, 80), rate_),
      std::max(1, wait_ms));
}

void RateLimiter::PruneLocked(Clock::time_point now) {
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    const double elapsed = std::chrono::duration<double>(now - it->second.updated).count();
    if (it->second.tokens + elapsed * rate_ >= burst_) {
      it = buckets_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace dpledger::server
