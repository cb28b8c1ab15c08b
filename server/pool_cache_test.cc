// PoolCache: byte accounting, least-recently-used eviction at the cap, and
// ExtendToLedger's prefix rule.
#include "server/pool_cache.h"

#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/test_util.h"

namespace dpledger::server {
namespace {

using testing::Gaussian;

// An accountant that only holds a ledger and claims `bytes` of cache.
class FakeAccountant final : public core::Accountant {
 public:
  FakeAccountant(std::string name, size_t bytes) : name_(std::move(name)), bytes_(bytes) {}
  std::string_view Name() const override { return name_; }
  std::unique_ptr<core::Accountant> Clone() const override {
    return std::make_unique<FakeAccountant>(name_, bytes_);
  }
  size_t CacheBytes() const override { return bytes_; }

 protected:
  absl::Status CheckSupported(const core::Mechanism&) const override { return absl::OkStatus(); }
  absl::StatusOr<core::EpsilonBound> ComputeEpsilon(double) const override {
    return absl::UnimplementedError("fake");
  }
  absl::StatusOr<core::DeltaBound> ComputeDelta(double) const override {
    return absl::UnimplementedError("fake");
  }

 private:
  std::string name_;
  size_t bytes_;
};

std::unique_ptr<core::Accountant> Fake(size_t bytes, std::string name = "mc") {
  return std::make_unique<FakeAccountant>(std::move(name), bytes);
}

const JobKey kA{"t", "a"}, kB{"t", "b"}, kC{"t", "c"};

// Issue 11: two concurrent queries of one job each built a pool.
TEST(PoolCache, Issue11SecondBorrowWaitsAndFindsTheFirstOnesAccountant) {
  PoolCache cache(1000, nullptr);
  std::atomic<int> builds{0};
  std::atomic<bool> second_done{false};
  size_t second_bytes = 0;
  std::optional<PoolCache::Lease> first(cache.Borrow(kA, "mc"));
  ASSERT_EQ(first->acc, nullptr);
  std::thread second([&] {
    PoolCache::Lease l = cache.Borrow(kA, "mc");
    if (l.acc == nullptr) {
      ++builds;
      l.acc = Fake(7);
    }
    second_bytes = l.acc->CacheBytes();
    second_done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(second_done);  // waits for the first lease
  ++builds;
  first->acc = Fake(300);  // the first query built it
  first.reset();           // and returns it
  second.join();
  EXPECT_EQ(builds, 1);
  EXPECT_EQ(second_bytes, 300u);
  EXPECT_EQ(cache.bytes(), 300u);  // back in the cache
  // A lease given back empty (a failed build) lets the next one build.
  { PoolCache::Lease l = cache.Borrow(kB, "mc"); }
  EXPECT_EQ(cache.Borrow(kB, "mc").acc, nullptr);
}

TEST(PoolCache, TakeReturnsWhatWasPutAndReleasesItsBytes) {
  PoolCache cache(1000, nullptr);
  cache.Put(kA, Fake(300));
  cache.Put(kA, Fake(200, "other"));
  EXPECT_EQ(cache.bytes(), 500u);
  EXPECT_EQ(cache.Take(kB, "mc"), nullptr);
  std::unique_ptr<core::Accountant> a = cache.Take(kA, "mc");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->CacheBytes(), 300u);
  EXPECT_EQ(cache.Take(kA, "mc"), nullptr);  // taken: one user at a time
  EXPECT_EQ(cache.bytes(), 200u);
  cache.Put(kA, Fake(0));  // nothing worth keeping
  EXPECT_EQ(cache.size(), 1u);
}

TEST(PoolCache, EvictsTheLeastRecentlyUsedAtTheByteCap) {
  PoolCache cache(250, nullptr);
  cache.Put(kA, Fake(100));
  cache.Put(kB, Fake(100));
  cache.Put(kA, cache.Take(kA, "mc"));  // a is now the most recent
  cache.Put(kC, Fake(100));             // 300 > 250: b goes
  EXPECT_EQ(cache.bytes(), 200u);
  EXPECT_EQ(cache.Take(kB, "mc"), nullptr);
  EXPECT_NE(cache.Take(kA, "mc"), nullptr);
  EXPECT_NE(cache.Take(kC, "mc"), nullptr);
  cache.Put(kA, Fake(251));  // larger than the cap on its own
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.bytes(), 0u);
}

TEST(ExtendToLedger, ComposesTheMissingStepsOfAPrefix) {
  const std::vector<core::MechanismEvent> ledger = {Gaussian(1, 5), Gaussian(2, 3), Gaussian(1, 4)};
  for (int64_t have : {0, 1, 5, 6, 8, 11, 12}) {
    SCOPED_TRACE(have);
    FakeAccountant acc("mc", 1);
    int64_t left = have;
    for (const core::MechanismEvent& e : ledger) {
      const int64_t n = std::min(left, e.count);
      if (n > 0) {
        ASSERT_TRUE(acc.Compose(e.mechanism, n).ok());
      }
      left -= n;
    }
    ASSERT_TRUE(ExtendToLedger(acc, ledger));
    ASSERT_EQ(acc.events().size(), ledger.size());
    for (size_t i = 0; i < ledger.size(); ++i) {
      EXPECT_EQ(acc.events()[i].mechanism, ledger[i].mechanism);
      EXPECT_EQ(acc.events()[i].count, ledger[i].count);
    }
    EXPECT_EQ(acc.num_steps(), 12);
  }
}

TEST(ExtendToLedger, RefusesALedgerThatIsNotAPrefix) {
  const std::vector<core::MechanismEvent> ledger = {Gaussian(1, 5), Gaussian(2, 3)};
  FakeAccountant longer("mc", 1);
  ASSERT_TRUE(longer.Compose(Gaussian(1, 6)).ok());
  EXPECT_FALSE(ExtendToLedger(longer, ledger));
  FakeAccountant other("mc", 1);
  ASSERT_TRUE(other.Compose(Gaussian(3, 1)).ok());
  EXPECT_FALSE(ExtendToLedger(other, ledger));
  FakeAccountant beyond("mc", 1);
  ASSERT_TRUE(beyond.Compose(Gaussian(1, 5)).ok());
  ASSERT_TRUE(beyond.Compose(Gaussian(2, 3)).ok());
  ASSERT_TRUE(beyond.Compose(Gaussian(1, 1)).ok());
  EXPECT_FALSE(ExtendToLedger(beyond, ledger));
}

}  // namespace
}  // namespace dpledger::server
