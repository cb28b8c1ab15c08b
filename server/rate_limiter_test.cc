#include "server/rate_limiter.h"

#include "core/util/test_support.h"
#include "gtest/gtest.h"
#include "server/status_util.h"

namespace dpledger::server {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;
using std::chrono::milliseconds;

TEST(RateLimiterTest, BurstThenRateWithARetryHint) {
  RateLimiter limiter(10, 3);  // 10/s, bursts of 3
  const auto t0 = RateLimiter::Clock::time_point{} + std::chrono::hours(1);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Take("a", t0).ok()) << i;
  absl::Status refused = limiter.Take("a", t0);
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted,
                                HasSubstr("tenant 'a' is over its rate of 10 requests")));
  EXPECT_EQ(RetryAfterMs(refused), 100);  // one token per 100 ms
  EXPECT_TRUE(limiter.Take("b", t0).ok());  // another tenant has its own bucket
  EXPECT_FALSE(limiter.Take("a", t0 + milliseconds(50)).ok());
  EXPECT_EQ(RetryAfterMs(limiter.Take("a", t0 + milliseconds(60))), 40);
  EXPECT_TRUE(limiter.Take("a", t0 + milliseconds(100)).ok());
  // A long quiet spell refills only up to the burst.
  const auto later = t0 + std::chrono::seconds(60);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Take("a", later).ok()) << i;
  EXPECT_FALSE(limiter.Take("a", later).ok());
}

TEST(RateLimiterTest, ZeroRateIsUnlimited) {
  RateLimiter limiter(0, 1);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(limiter.Take("a").ok());
}

}  // namespace
}  // namespace dpledger::server
