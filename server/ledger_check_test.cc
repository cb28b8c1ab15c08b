#include "server/ledger_check.h"

#include "core/util/test_support.h"
#include "gtest/gtest.h"
#include "server/memory_store.h"
#include "server/test_util.h"

namespace dpledger::server {
namespace {

using ::dpledger::testing::IsOk;
using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

class LedgerCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    job_.key = {"t", "j"};
    job_.budget_epsilon = 1;
    job_.budget_delta = 1e-6;
    job_.accountant = "analytic";
    WriteBatch b;
    b.new_jobs.push_back(job_);
    b.updates.push_back(Row(1, 2, 0.5));
    DPL_CHECK_OK(store_.Apply(b));
  }
  // The next row, chained onto the previous one (ledger_chain.h).
  UpdateRow Row(int64_t seq, int64_t num_steps_after, double upper) {
    UpdateRow u{job_.key, seq, CanonicalSteps({testing::Gaussian(10, 2)}),
                {upper / 2, upper, upper, core::Guarantee::kCertified, 0}, num_steps_after, 0, ""};
    if (head_.empty()) head_ = ChainGenesis(job_);
    u.chain = head_ = ChainUpdate(head_, u);
    return u;
  }
  JobRow job_;
  std::string head_;
  MemoryStore store_;
};

TEST_F(LedgerCheck, AHealthyLedgerPasses) {
  LedgerCheckStats stats;
  EXPECT_THAT(CheckLedgerConsistency(store_, &stats), IsOk());
  EXPECT_EQ(stats.jobs, 1);
  EXPECT_EQ(stats.updates, 1);
}

TEST_F(LedgerCheck, AChargeAboveTheBudgetIsDataLoss) {
  WriteBatch b;
  b.updates.push_back(Row(2, 4, 1.5));
  ASSERT_THAT(store_.Apply(b), IsOk());
  EXPECT_THAT(CheckLedgerConsistency(store_),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("seq 2: charged epsilon 1.5 exceeds the budget 1")));
}

TEST_F(LedgerCheck, AWrongRunningStepCountIsDataLoss) {
  WriteBatch b;
  b.updates.push_back(Row(2, 5, 0.6));
  ASSERT_THAT(store_.Apply(b), IsOk());
  EXPECT_THAT(CheckLedgerConsistency(store_), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("expected 4")));
}

TEST_F(LedgerCheck, AReleaseWhosePayloadChangedIsDataLoss) {
  WriteBatch b;
  ReleaseRow r;
  r.release_id = "rel_x";
  r.key = job_.key;
  r.payload = "tampered";
  r.payload_sha256 = Sha256Hex("original");
  r.ledger_seq = 1;
  r.chain = ChainRelease(ChainGenesis(job_), head_, r);
  b.releases.push_back(r);
  ASSERT_THAT(store_.Apply(b), IsOk());
  EXPECT_THAT(CheckLedgerConsistency(store_), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("SHA-256")));
}

// Issue 11 (Hardening) defect 7: edits the old checks accepted break the chain.
TEST_F(LedgerCheck, AnEditedBudgetBreaksTheChainAtSeq1) {
  MemoryStore edited;
  JobRow job = job_;
  job.budget_epsilon = 2;  // the stored updates were chained under budget 1
  WriteBatch b;
  b.new_jobs.push_back(job);
  b.updates.push_back(*store_.GetUpdate(job_.key, 1).value());
  ASSERT_THAT(edited.Apply(b), IsOk());
  EXPECT_THAT(CheckLedgerConsistency(edited),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("job 't/j' is damaged at seq 1: chain head")));
  EXPECT_THAT(CheckLedgerConsistency(edited), StatusIs(absl::StatusCode::kDataLoss,
                                                       HasSubstr("configuration (budget")));
}

TEST_F(LedgerCheck, AnEditedSpentValueBreaksTheChain) {
  WriteBatch b;
  UpdateRow u = Row(2, 4, 0.8);
  u.spent.upper = 0.7;  // lowered after chaining, as an edit of the database would
  b.updates.push_back(u);
  ASSERT_THAT(store_.Apply(b), IsOk());
  EXPECT_THAT(CheckLedgerConsistency(store_),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("damaged at seq 2: chain head " + head_ + ", recomputed")));
}

TEST_F(LedgerCheck, AnEditedReleaseBreaksItsChain) {
  WriteBatch b;
  ReleaseRow r;
  r.release_id = "rel_x";
  r.key = job_.key;
  r.payload = "p";
  r.payload_sha256 = Sha256Hex("p");
  r.ledger_seq = 1;
  r.epsilon = 1;
  r.chain = ChainRelease(ChainGenesis(job_), head_, r);
  r.epsilon = 0.5;
  b.releases.push_back(r);
  ASSERT_THAT(store_.Apply(b), IsOk());
  EXPECT_THAT(CheckLedgerConsistency(store_),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("release 'rel_x' chain link")));
}

}  // namespace
}  // namespace dpledger::server
