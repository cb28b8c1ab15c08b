#include "server/tenant_gate.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace dpledger::server {
namespace {

TEST(TenantGateTest, SharesArePerTenantAndWaitForRelease) {
  TenantGate gate(10);
  ASSERT_TRUE(gate.Acquire("a", 8, nullptr));
  ASSERT_TRUE(gate.Acquire("b", 10, nullptr));  // another tenant is not held up by a
  EXPECT_EQ(gate.inflight("a"), 8);
  std::atomic<bool> got{false};
  std::thread t([&] {
    got = gate.Acquire("a", 5, nullptr);  // 8 + 5 > 10: waits
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(got);
  gate.Release("a", 8);
  t.join();
  EXPECT_TRUE(got);
  EXPECT_EQ(gate.inflight("a"), 5);
  gate.Release("a", 5);
  gate.Release("b", 10);
  EXPECT_EQ(gate.inflight("a"), 0);
}

TEST(TenantGateTest, OversizedRequestGoesAloneAndCancelStopsTheWait) {
  TenantGate gate(10);
  ASSERT_TRUE(gate.Acquire("a", 25, nullptr));  // larger than the share: goes alone
  {
    GateTicket held(&gate, "a", 25);
    EXPECT_FALSE(gate.Acquire("a", 1, [] { return true; }));  // would wait: cancelled
    EXPECT_EQ(gate.inflight("a"), 25);
  }
  EXPECT_EQ(gate.inflight("a"), 0);
}

}  // namespace
}  // namespace dpledger::server
