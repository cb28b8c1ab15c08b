// Requests per second per tenant (issue 11 "limits"): a token bucket per tenant, refilled
// at `rate` per second up to `burst`. A request finding the bucket empty is refused with
// RESOURCE_EXHAUSTED and how long until a token is back, so one tenant's flood is shed
// before it costs the server work and other tenants keep their share.
//
// Thread safety: all methods are thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/status.h"

namespace dpledger::server {

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  // rate <= 0: unlimited. burst: requests allowed at once after a quiet spell (at least 1;
  // <= 0: one second's worth, `rate`).
  RateLimiter(double rate, double burst);

  // OK and one token taken, or RESOURCE_EXHAUSTED (RetryLaterError) naming the tenant.
  absl::Status Take(const std::string& tenant, Clock::time_point now = Clock::now());

 private:
  struct Bucket {
    double tokens;
    Clock::time_point updated;
  };
  void PruneLocked(Clock::time_point now);

  const double rate_, burst_;
  std::mutex mu_;
  std::map<std::string, Bucket> buckets_;
};

}  // namespace dpledger::server
