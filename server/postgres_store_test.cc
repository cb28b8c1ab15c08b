// PostgreSQL-only store behaviour (issue 12): several stores (replicas) on one database, a
// database that goes away and comes back, migrations, start-up validation. The
// backend-wide contract is in store_test.cc.
#include "server/postgres_store.h"

#include <libpq-fe.h>

#include <atomic>
#include <thread>

#include "core/util/test_support.h"
#include "gtest/gtest.h"
#include "server/postgres_schema.h"
#include "server/test_postgres.h"
#include "server/test_util.h"

namespace dpledger::server {
namespace {

using ::dpledger::testing::IsOk;
using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;
using testing::PostgresUnavailableReason;
using testing::TestPostgres;

JobRow Job(const std::string& id) {
  JobRow j;
  j.key = {"t", id};
  j.budget_epsilon = 8;
  j.budget_delta = 1e-9;
  j.accountant = "analytic";
  return j;
}

UpdateRow Update(const JobKey& key, int64_t seq) {
  UpdateRow u;
  u.key = key;
  u.seq = seq;
  u.steps = CanonicalSteps({testing::Gaussian(2.0, 1)});
  u.spent = {0.25, 0.5, 0.75, core::Guarantee::kCertified, 0};
  u.num_steps_after = seq;
  return u;
}

class PostgresStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = PostgresUnavailableReason(); !why.empty()) GTEST_SKIP() << why;
    absl::StatusOr<TestPostgres*> pg = TestPostgres::Shared();
    ASSERT_THAT(pg.status(), IsOk());
    pg_ = *pg;
    absl::StatusOr<std::string> url = pg_->CreateDatabase();
    ASSERT_THAT(url.status(), IsOk());
    url_ = *url;
  }
  std::unique_ptr<PostgresStore> Open(PostgresStoreOptions o = {}) {
    o.url = url_;
    absl::StatusOr<std::unique_ptr<PostgresStore>> s = PostgresStore::Open(o);
    EXPECT_THAT(s.status(), IsOk());
    return s.ok() ? std::move(*s) : nullptr;
  }
  TestPostgres* pg_ = nullptr;
  std::string url_;
};

TEST_F(PostgresStoreTest, BadUrlsAreRefusedNamingTheFlag) {
  EXPECT_THAT(PostgresStore::Open({.url = ""}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("postgres_url")));
  EXPECT_THAT(PostgresStore::Open({.url = "postgresql://x/?nonsense_option=1"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("postgres_url")));
  EXPECT_THAT(PostgresStore::Open({.url = url_, .pool_size = 0}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pool_size")));
}

TEST_F(PostgresStoreTest, UnreachableDatabaseIsUnavailableAtOpen) {
  // A port nobody listens on (the shared server's port + 1 is not guaranteed free, so a
  // socket directory that does not exist).
  EXPECT_THAT(PostgresStore::Open({.url = "postgresql:///x?host=/nonexistent-dpledger-dir",
                                   .connect_timeout_s = 2}),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("connect")));
}

TEST_F(PostgresStoreTest, ReplicasStartingTogetherMigrateOnce) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      absl::StatusOr<std::unique_ptr<PostgresStore>> s = PostgresStore::Open({.url = url_});
      if (s.ok() && (*s)->schema_version() == pg::kPostgresSchemaVersion) ++ok;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 4);
}

TEST_F(PostgresStoreTest, ANewerSchemaIsRefused) {
  ASSERT_NE(Open(), nullptr);
  PGconn* c = PQconnectdb(url_.c_str());
  PQclear(PQexec(c, "UPDATE schema_version SET version = 99"));
  PQfinish(c);
  EXPECT_THAT(PostgresStore::Open({.url = url_}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("99")));
}

// Two replicas admit the same seq of one job: the job row lock and the in-transaction seq
// check let exactly one through; the other writes nothing.
TEST_F(PostgresStoreTest, TwoReplicasCannotBothAppendTheSameSeq) {
  std::unique_ptr<PostgresStore> a = Open(), b = Open();
  WriteBatch create;
  create.new_jobs.push_back(Job("j"));
  ASSERT_THAT(a->Apply(create), IsOk());
  WriteBatch from_a, from_b;
  from_a.updates.push_back(Update({"t", "j"}, 1));
  from_b.updates.push_back(Update({"t", "j"}, 1));
  from_b.updates.back().steps = "laplace:b=1,count=1";
  ASSERT_THAT(a->Apply(from_a), IsOk());
  EXPECT_THAT(b->Apply(from_b), StatusIs(absl::StatusCode::kAborted,
                                         HasSubstr("does not follow last seq 1")));
  EXPECT_EQ((*b->GetUpdate({"t", "j"}, 1))->steps, from_a.updates[0].steps);
}

// Many replicas race to extend one job, each reading the last seq and writing the next:
// the ledger ends up one contiguous serial order with exactly the acknowledged rows.
TEST_F(PostgresStoreTest, ConcurrentReplicasKeepOneSerialOrder) {
  constexpr int kReplicas = 4;
  constexpr int kAttemptsEach = 40;
  std::vector<std::unique_ptr<PostgresStore>> stores;
  for (int i = 0; i < kReplicas; ++i) stores.push_back(Open({.url = url_, .pool_size = 2}));
  const JobKey key{"t", "race"};
  WriteBatch create;
  create.new_jobs.push_back(Job("race"));
  ASSERT_THAT(stores[0]->Apply(create), IsOk());
  std::atomic<int> acked{0}, conflicts{0}, other{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < kReplicas; ++r) {
    threads.emplace_back([&, r] {
      for (int i = 0; i < kAttemptsEach; ++i) {
        absl::StatusOr<std::optional<UpdateRow>> last = stores[r]->LastUpdate(key);
        if (!last.ok()) {
          ++other;
          continue;
        }
        WriteBatch b;
        b.updates.push_back(Update(key, (*last ? (*last)->seq : 0) + 1));
        b.updates.back().commit_time_ms = r;  // which replica wrote it
        absl::Status s = stores[r]->Apply(b);
        if (s.ok()) {
          ++acked;
        } else if (s.code() == absl::StatusCode::kAborted) {
          ++conflicts;
        } else {
          ++other;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(acked + conflicts, kReplicas * kAttemptsEach);
  absl::StatusOr<std::vector<UpdateRow>> rows = stores[0]->ListUpdates(key, 0, 100000);
  ASSERT_THAT(rows.status(), IsOk());
  ASSERT_EQ(static_cast<int>(rows->size()), acked.load());
  for (size_t i = 0; i < rows->size(); ++i) EXPECT_EQ((*rows)[i].seq, static_cast<int64_t>(i + 1));
  EXPECT_GE(acked.load(), kAttemptsEach);  // at least one replica's worth got through
}

// Two groups locking the same jobs from different replicas in opposite batch orders must not
// deadlock (rows are locked in key order).
TEST_F(PostgresStoreTest, GroupsTouchingManyJobsDoNotDeadlock) {
  std::unique_ptr<PostgresStore> a = Open(), b = Open();
  WriteBatch create;
  for (int i = 0; i < 20; ++i) create.new_jobs.push_back(Job(absl::StrFormat("j%02d", i)));
  ASSERT_THAT(a->Apply(create), IsOk());
  std::atomic<int> failed{0};
  auto run = [&](PostgresStore* s, bool reverse) {
    for (int round = 0; round < 20; ++round) {
      std::vector<WriteBatch> batches(20);
      std::vector<const WriteBatch*> group;
      for (int i = 0; i < 20; ++i) {
        const int j = reverse ? 19 - i : i;
        batches[i].evr_marks.push_back({{"t", absl::StrFormat("j%02d", j)}, EvrState::kIdle, ""});
        group.push_back(&batches[i]);
      }
      if (!s->Apply(group).ok()) ++failed;
    }
  };
  std::thread ta(run, a.get(), false), tb(run, b.get(), true);
  ta.join();
  tb.join();
  EXPECT_EQ(failed.load(), 0);
}

// The database stops: every call is UNAVAILABLE (no crash, no hang), nothing of a failed
// Apply is written, everything acknowledged before is still there after the restart, and the
// same store object works again without being reopened.
TEST_F(PostgresStoreTest, ADeadDatabaseIsUnavailableAndTheStoreRecovers) {
  std::unique_ptr<PostgresStore> store =
      Open({.url = url_, .pool_size = 2, .reconnect_initial_delay = std::chrono::milliseconds(10),
            .reconnect_max_delay = std::chrono::milliseconds(100)});
  const JobKey key{"t", "j"};
  WriteBatch create;
  create.new_jobs.push_back(Job("j"));
  for (int s = 1; s <= 3; ++s) create.updates.push_back(Update(key, s));
  ASSERT_THAT(store->Apply(create), IsOk());
  ASSERT_THAT(store->Ping(), IsOk());

  ASSERT_THAT(pg_->Stop(/*immediate=*/true), IsOk());  // like a crash of the database
  WriteBatch next;
  next.updates.push_back(Update(key, 4));
  EXPECT_THAT(store->Apply(next), StatusIs(absl::StatusCode::kUnavailable, ::testing::_));
  EXPECT_THAT(store->Ping(), StatusIs(absl::StatusCode::kUnavailable, ::testing::_));
  EXPECT_THAT(store->GetJob(key).status(), StatusIs(absl::StatusCode::kUnavailable, ::testing::_));
  EXPECT_THAT(store->ListUpdates(key, 0, 10).status(), StatusIs(absl::StatusCode::kUnavailable, ::testing::_));

  ASSERT_THAT(pg_->Restart(), IsOk());
  // The backoff is at most 100 ms here; Ping succeeds once it has passed.
  absl::Status ping;
  for (int i = 0; i < 100 && !(ping = store->Ping()).ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_THAT(ping, IsOk());
  EXPECT_EQ((*store->LastUpdate(key))->seq, 3);  // acknowledged: kept; failed: absent
  ASSERT_THAT(store->Apply(next), IsOk());
  EXPECT_EQ((*store->LastUpdate(key))->seq, 4);
}

}  // namespace
}  // namespace dpledger::server
