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
  UpdateRow Row(int64_t seq, int64_t num_steps_after, double upper) {
    return UpdateRow{job_.key, seq, CanonicalSteps({testing::Gaussian(10, 2)}),
                     {upper / 2, upper, upper, core::Guarantee::kCertified, 0}, num_steps_after, 0};
  }
  JobRow job_;
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
  b.releases.push_back(r);
  ASSERT_THAT(store_.Apply(b), IsOk());
  EXPECT_THAT(CheckLedgerConsistency(store_), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("SHA-256")));
}

}  // namespace
}  // namespace dpledger::server
