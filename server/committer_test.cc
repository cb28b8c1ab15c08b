#include "server/committer.h"

#include <thread>

#include "core/util/test_support.h"
#include "gtest/gtest.h"
#include "server/faulty_store.h"
#include "server/memory_store.h"
#include "server/test_util.h"

namespace dpledger::server {
namespace {

using ::dpledger::testing::IsOk;
using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

WriteBatch NewJob(const std::string& id) {
  WriteBatch b;
  JobRow j;
  j.key = {"t", id};
  j.budget_epsilon = 1;
  j.budget_delta = 1e-6;
  j.accountant = "analytic";
  b.new_jobs.push_back(j);
  return b;
}

WriteBatch Step(const std::string& id, int64_t seq) {
  WriteBatch b;
  UpdateRow u;
  u.key = {"t", id};
  u.seq = seq;
  u.steps = CanonicalSteps({testing::Gaussian(1.0)});
  u.num_steps_after = seq;
  b.updates.push_back(u);
  return b;
}

TEST(Committer, TicketCompletesOnlyAfterTheStoreReturns) {
  MemoryStore inner;
  testing::FaultyStore store(&inner);
  Committer c(&store, {});
  store.CloseGate();
  CommitTicketPtr t = c.Submit(NewJob("a"));
  store.WaitForBlockedApply();
  EXPECT_FALSE(t->done());                         // commit in progress: nothing acknowledged
  EXPECT_FALSE(inner.GetJob({"t", "a"})->has_value());
  store.OpenGate();
  EXPECT_THAT(t->Wait(), IsOk());
  EXPECT_TRUE(inner.GetJob({"t", "a"})->has_value());  // OK means it is in the store
}

TEST(Committer, WritesQueuedDuringACommitShareTheNextOne) {
  MemoryStore inner;
  testing::FaultyStore store(&inner);
  Committer c(&store, {});
  ASSERT_THAT(c.Submit(NewJob("a"))->Wait(), IsOk());
  const int before = store.applies();
  store.CloseGate();
  CommitTicketPtr first = c.Submit(Step("a", 1));
  store.WaitForBlockedApply();
  std::vector<CommitTicketPtr> queued;
  for (int s = 2; s <= 50; ++s) queued.push_back(c.Submit(Step("a", s)));
  store.OpenGate();
  for (auto& t : queued) EXPECT_THAT(t->Wait(), IsOk());
  EXPECT_EQ(store.applies() - before, 2);  // one for seq 1, one group for seqs 2..50
  EXPECT_EQ((*inner.LastUpdate({"t", "a"}))->seq, 50);
}

TEST(Committer, AFailedCommitPoisonsTheJobUntilUnpoisoned) {
  MemoryStore inner;
  testing::FaultyStore store(&inner);
  Committer c(&store, {});
  ASSERT_THAT(c.Submit(NewJob("a"))->Wait(), IsOk());
  ASSERT_THAT(c.Submit(NewJob("b"))->Wait(), IsOk());
  store.CloseGate();
  store.FailNextApplies(1);  // the commit holding seq 1 alone
  CommitTicketPtr t1 = c.Submit(Step("a", 1));
  store.WaitForBlockedApply();
  CommitTicketPtr t2 = c.Submit(Step("a", 2));  // queued behind the failing commit
  store.OpenGate();
  EXPECT_THAT(t1->Wait(), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("injected")));
  EXPECT_THAT(t2->Wait(), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("earlier write")));
  EXPECT_TRUE(c.IsPoisoned({"t", "a"}));
  // Seq 2 can never land after seq 1 failed: new writes fail at once.
  EXPECT_THAT(c.Submit(Step("a", 2))->Wait(), StatusIs(absl::StatusCode::kUnavailable, ::testing::_));
  // Other jobs are unaffected.
  EXPECT_THAT(c.Submit(Step("b", 1))->Wait(), IsOk());
  EXPECT_FALSE(inner.GetUpdate({"t", "a"}, 1)->has_value());
  c.Unpoison({"t", "a"});
  EXPECT_THAT(c.Submit(Step("a", 1))->Wait(), IsOk());
}

TEST(Committer, OneBadBatchDoesNotFailOthersInItsGroup) {
  MemoryStore inner;
  testing::FaultyStore store(&inner);
  Committer c(&store, {});
  ASSERT_THAT(c.Submit(NewJob("a"))->Wait(), IsOk());
  store.CloseGate();
  CommitTicketPtr blocker = c.Submit(NewJob("b"));
  store.WaitForBlockedApply();
  CommitTicketPtr dup = c.Submit(NewJob("a"));     // ALREADY_EXISTS in the store
  CommitTicketPtr good = c.Submit(NewJob("c"));
  store.OpenGate();
  EXPECT_THAT(blocker->Wait(), IsOk());
  EXPECT_THAT(dup->Wait(), StatusIs(absl::StatusCode::kAlreadyExists, ::testing::_));
  EXPECT_THAT(good->Wait(), IsOk());
  EXPECT_TRUE(inner.GetJob({"t", "c"})->has_value());
}

TEST(Committer, StopCommitsWhatIsPendingThenRefuses) {
  MemoryStore inner;
  Committer c(&inner, {});
  CommitTicketPtr t = c.Submit(NewJob("a"));
  c.Stop();
  EXPECT_THAT(t->Wait(), IsOk());
  EXPECT_THAT(c.Submit(NewJob("b"))->Wait(), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("shutting down")));
}

}  // namespace
}  // namespace dpledger::server
