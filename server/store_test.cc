// One suite, every Store backend (issue 4: "one test suite runs against every backend").
#include "server/store.h"

#include <functional>
#include <limits>
#include <memory>

#include "absl/strings/str_format.h"
#include "core/util/test_support.h"
#include "gtest/gtest.h"
#include "server/memory_store.h"
#include "server/postgres_store.h"
#include "server/sqlite_store.h"
#include "server/test_postgres.h"
#include "server/test_util.h"

namespace dpledger::server {
namespace {

using ::dpledger::testing::IsOk;
using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;
using testing::PostgresUnavailableReason;
using testing::TestPostgres;

struct Backend {
  std::string name;
  std::function<std::unique_ptr<Store>(const std::string& dir)> open;
  // Why this backend cannot run here ("" when it can): the test is skipped.
  std::function<std::string()> unavailable = [] { return std::string(); };
};

void PrintTo(const Backend& b, std::ostream* os) { *os << b.name; }

class StoreSuite : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (const std::string why = GetParam().unavailable(); !why.empty()) GTEST_SKIP() << why;
    store_ = GetParam().open(dir_.path());
  }
  testing::TempDir dir_;
  std::unique_ptr<Store> store_;
};

JobRow Job(std::string tenant, std::string id) {
  JobRow j;
  j.key = {std::move(tenant), std::move(id)};
  j.budget_epsilon = 8;
  j.budget_delta = 1e-9;
  j.accountant = "analytic";
  j.mc_seed = 0xfedcba9876543210ull;  // above INT64_MAX: stored as its bit pattern
  j.create_time_ms = 1700000000000;
  return j;
}

UpdateRow Update(const JobRow& j, int64_t seq, int64_t num_steps_after) {
  UpdateRow u;
  u.key = j.key;
  u.seq = seq;
  u.steps = CanonicalSteps({testing::Gaussian(2.0, 1)});
  u.spent = {0.25, 0.5, 0.75, core::Guarantee::kCertified, 0};
  u.num_steps_after = num_steps_after;
  u.commit_time_ms = 1700000000001;
  return u;
}

TEST_P(StoreSuite, JobRoundTripsEveryField) {
  JobRow j = Job("t1", "job-a");
  WriteBatch b;
  b.new_jobs.push_back(j);
  ASSERT_THAT(store_->Apply(b), IsOk());
  absl::StatusOr<std::optional<JobRow>> got = store_->GetJob(j.key);
  ASSERT_THAT(got, IsOk());
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->key, j.key);
  EXPECT_EQ((*got)->budget_epsilon, 8);
  EXPECT_EQ((*got)->budget_delta, 1e-9);
  EXPECT_EQ((*got)->accountant, "analytic");
  EXPECT_EQ((*got)->mc_seed, 0xfedcba9876543210ull);
  EXPECT_EQ((*got)->state, JobState::kOpen);
  EXPECT_EQ((*got)->create_time_ms, 1700000000000);
  EXPECT_FALSE(store_->GetJob({"t2", "job-a"})->has_value());  // tenants are separate

  // Issue 10: the schedule and admission filter come back exactly (an adaptive job read back
  // as declared would be admitted by an unsound filter).
  JobRow a = Job("t1", "job-b");
  a.schedule = Schedule::kAdaptive;
  a.admission = AdmissionKind::kRenyi;
  a.rdp_order = 8.25;
  JobRow d = Job("t1", "job-c");
  d.plan = "gaussian:sigma=1,count=3;laplace:scale=2,count=1";
  WriteBatch b2;
  b2.new_jobs = {a, d};
  ASSERT_THAT(store_->Apply(b2), IsOk());
  const JobRow ga = **store_->GetJob(a.key);
  EXPECT_EQ(ga.schedule, Schedule::kAdaptive);
  EXPECT_EQ(ga.admission, AdmissionKind::kRenyi);
  EXPECT_EQ(ga.rdp_order, 8.25);
  const JobRow gd = **store_->GetJob(d.key);
  EXPECT_EQ(gd.schedule, Schedule::kDeclared);
  EXPECT_EQ(gd.admission, AdmissionKind::kNatural);
  EXPECT_EQ(gd.plan, d.plan);
}

// An evr job's admission state changes together with its updates, all or nothing.
TEST_P(StoreSuite, EvrMarksApplyAtomicallyWithUpdates) {
  JobRow j = Job("t", "e");
  j.accountant = "evr";
  WriteBatch create;
  create.new_jobs.push_back(j);
  ASSERT_THAT(store_->Apply(create), IsOk());
  EXPECT_EQ((*store_->GetJob(j.key))->evr_state, EvrState::kIdle);

  WriteBatch verifying;
  verifying.evr_marks.push_back({j.key, EvrState::kVerifying, ""});
  ASSERT_THAT(store_->Apply(verifying), IsOk());
  EXPECT_EQ((*store_->GetJob(j.key))->evr_state, EvrState::kVerifying);

  // A failing update (seq 2 does not follow 0) rolls the mark back too.
  WriteBatch bad;
  bad.evr_marks.push_back({j.key, EvrState::kIdle, ""});
  bad.updates.push_back(Update(j, 2, 1));
  EXPECT_THAT(store_->Apply(bad), StatusIs(absl::StatusCode::kAborted, HasSubstr("seq")));
  EXPECT_EQ((*store_->GetJob(j.key))->evr_state, EvrState::kVerifying);

  WriteBatch stop;
  stop.evr_marks.push_back({j.key, EvrState::kStopped, "verification rejected seq 1"});
  ASSERT_THAT(store_->Apply(stop), IsOk());
  absl::StatusOr<std::optional<JobRow>> got = store_->GetJob(j.key);
  EXPECT_EQ((*got)->evr_state, EvrState::kStopped);
  EXPECT_EQ((*got)->evr_note, "verification rejected seq 1");
  WriteBatch missing;
  missing.evr_marks.push_back({{"t", "nope"}, EvrState::kStopped, ""});
  EXPECT_THAT(store_->Apply(missing), StatusIs(absl::StatusCode::kNotFound, HasSubstr("nope")));
}

// Issue 12: a mark that expects a state the job has left (another replica changed it) is
// refused with ABORTED and rolls back its whole group; one without `expected` applies.
TEST_P(StoreSuite, EvrMarksWithAnExpectedStateApplyOnlyFromIt) {
  JobRow j = Job("t", "e");
  j.accountant = "evr";
  WriteBatch create;
  create.new_jobs.push_back(j);
  ASSERT_THAT(store_->Apply(create), IsOk());
  WriteBatch start;
  start.evr_marks.push_back({j.key, EvrState::kVerifying, "", EvrState::kIdle});
  ASSERT_THAT(store_->Apply(start), IsOk());
  // A second verifier (another replica with a stale view) cannot start too.
  WriteBatch second;
  second.evr_marks.push_back({j.key, EvrState::kVerifying, "", EvrState::kIdle});
  EXPECT_THAT(store_->Apply(second),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("not the expected 0")));
  WriteBatch stop;
  stop.evr_marks.push_back({j.key, EvrState::kStopped, "rejected", EvrState::kVerifying});
  ASSERT_THAT(store_->Apply(stop), IsOk());
  // After the stop, an admission from a stale view (idle -> verifying) and everything in its
  // group are refused; the stop stays.
  WriteBatch stale;
  stale.updates.push_back(Update(j, 1, 1));
  stale.evr_marks.push_back({j.key, EvrState::kVerifying, "", EvrState::kIdle});
  EXPECT_THAT(store_->Apply(stale), StatusIs(absl::StatusCode::kAborted, HasSubstr("evr state")));
  EXPECT_FALSE(store_->LastUpdate(j.key)->has_value());
  EXPECT_EQ((*store_->GetJob(j.key))->evr_state, EvrState::kStopped);
  // Marks in one group chain: the second expects what the first set.
  WriteBatch chain;
  chain.evr_marks.push_back({j.key, EvrState::kIdle, "", EvrState::kStopped});
  chain.evr_marks.push_back({j.key, EvrState::kVerifying, "", EvrState::kIdle});
  ASSERT_THAT(store_->Apply(chain), IsOk());
  EXPECT_EQ((*store_->GetJob(j.key))->evr_state, EvrState::kVerifying);
}

TEST_P(StoreSuite, DuplicateJobFailsAndTheWholeGroupIsRolledBack) {
  WriteBatch first;
  first.new_jobs.push_back(Job("t", "a"));
  ASSERT_THAT(store_->Apply(first), IsOk());
  WriteBatch fresh, dup;
  fresh.new_jobs.push_back(Job("t", "b"));
  dup.new_jobs.push_back(Job("t", "a"));
  const WriteBatch* group[] = {&fresh, &dup};
  EXPECT_THAT(store_->Apply(group), StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("a")));
  EXPECT_FALSE(store_->GetJob({"t", "b"})->has_value());  // all or nothing
  EXPECT_EQ(*store_->CountJobs("t"), 1);
}

TEST_P(StoreSuite, UpdatesMustBeContiguousAndTheJobOpen) {
  JobRow j = Job("t", "a");
  WriteBatch b;
  b.new_jobs.push_back(j);
  b.updates.push_back(Update(j, 1, 1));
  b.updates.push_back(Update(j, 2, 2));
  ASSERT_THAT(store_->Apply(b), IsOk());

  WriteBatch gap;
  gap.updates.push_back(Update(j, 4, 3));
  EXPECT_THAT(store_->Apply(gap), StatusIs(absl::StatusCode::kAborted, HasSubstr("seq 4")));
  WriteBatch again;
  again.updates.push_back(Update(j, 2, 3));
  EXPECT_THAT(store_->Apply(again),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("does not follow last seq 2")));
  WriteBatch orphan;
  orphan.updates.push_back(Update(Job("t", "nope"), 1, 1));
  EXPECT_THAT(store_->Apply(orphan), StatusIs(absl::StatusCode::kNotFound, HasSubstr("nope")));

  WriteBatch close;
  close.state_changes.push_back({j.key, JobState::kClosed, 1700000000500});
  ASSERT_THAT(store_->Apply(close), IsOk());
  WriteBatch after_close;
  after_close.updates.push_back(Update(j, 3, 3));
  EXPECT_THAT(store_->Apply(after_close), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("closed")));
  EXPECT_EQ((*store_->GetJob(j.key))->state, JobState::kClosed);
  EXPECT_EQ((*store_->GetJob(j.key))->close_time_ms, 1700000000500);
}

TEST_P(StoreSuite, UpdatesReadBackInSeqOrderWithTheirAcks) {
  JobRow j = Job("t", "a");
  WriteBatch b;
  b.new_jobs.push_back(j);
  for (int s = 1; s <= 5; ++s) b.updates.push_back(Update(j, s, s));
  ASSERT_THAT(store_->Apply(b), IsOk());
  absl::StatusOr<std::vector<UpdateRow>> page = store_->ListUpdates(j.key, 2, 2);
  ASSERT_THAT(page, IsOk());
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].seq, 3);
  EXPECT_EQ((*page)[1].seq, 4);
  EXPECT_EQ((*page)[0].steps, "gaussian:sigma=2,count=1");
  EXPECT_EQ((*page)[0].spent.upper, 0.75);
  EXPECT_EQ((*page)[0].spent.guarantee, core::Guarantee::kCertified);
  EXPECT_EQ((*store_->LastUpdate(j.key))->seq, 5);
  EXPECT_EQ((*store_->GetUpdate(j.key, 3))->num_steps_after, 3);
  EXPECT_FALSE(store_->GetUpdate(j.key, 6)->has_value());
}

// Stored text and doubles come back unchanged, whatever their characters (PostgreSQL sends
// updates as array literals, which quote and escape them) and special values.
TEST_P(StoreSuite, UpdateFieldsRoundTripExactly) {
  JobRow j = Job("t", "a \"quoted\" \\ {job}, id");
  WriteBatch b;
  b.new_jobs.push_back(j);
  UpdateRow u = Update(j, 1, 1);
  u.steps = "odd \"text\" with \\ backslash, {braces}, NULL and unicode \u00e9";
  u.spent = {-0.0, 1.0 / 3.0, std::numeric_limits<double>::infinity(), core::Guarantee::kStatistical,
             5e-324};
  b.updates.push_back(u);
  b.updates.push_back(Update(j, 2, 2));
  ASSERT_THAT(store_->Apply(b), IsOk());
  absl::StatusOr<std::optional<UpdateRow>> got = store_->GetUpdate(j.key, 1);
  ASSERT_THAT(got, IsOk());
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->key, j.key);
  EXPECT_EQ((*got)->steps, u.steps);
  EXPECT_EQ((*got)->spent.lower, 0.0);
  EXPECT_EQ((*got)->spent.estimate, 1.0 / 3.0);
  EXPECT_EQ((*got)->spent.upper, std::numeric_limits<double>::infinity());
  EXPECT_EQ((*got)->spent.guarantee, core::Guarantee::kStatistical);
  EXPECT_EQ((*got)->spent.failure_probability, 5e-324);
  EXPECT_EQ((*store_->LastUpdate(j.key))->seq, 2);
}

TEST_P(StoreSuite, JobsListInIdOrderPerTenant) {
  WriteBatch b;
  for (const char* id : {"c", "a", "b"}) b.new_jobs.push_back(Job("t", id));
  b.new_jobs.push_back(Job("u", "z"));
  ASSERT_THAT(store_->Apply(b), IsOk());
  absl::StatusOr<std::vector<JobRow>> page = store_->ListJobs("t", "a", 10);
  ASSERT_THAT(page, IsOk());
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].key.job_id, "b");
  EXPECT_EQ((*page)[1].key.job_id, "c");
  absl::StatusOr<std::vector<JobRow>> all = store_->ListAllJobs({"t", "c"}, 10);
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].key, (JobKey{"u", "z"}));
}

// Loading a job reads only its newest release's chain link (it used to list every release,
// payloads included): the link is the one ListReleases ends with, in every backend.
TEST_P(StoreSuite, LastReleaseChainIsTheNewestReleasesLink) {
  JobRow j = Job("t", "a");
  WriteBatch b;
  b.new_jobs.push_back(j);
  ASSERT_THAT(store_->Apply(b), IsOk());
  EXPECT_EQ(*store_->LastReleaseChain(j.key), std::nullopt);
  for (int i = 1; i <= 3; ++i) {
    ReleaseRow r;
    r.release_id = absl::StrFormat("rel_%d", i);
    r.key = j.key;
    r.request_id = absl::StrFormat("req-%d", i);
    r.epsilon = 1;
    r.delta = 1e-9;
    r.create_time_ms = 1000 + i;
    r.chain = std::string(64, static_cast<char>('a' + i));
    r.payload = std::string(1000, 'p');
    r.payload_sha256 = Sha256Hex(r.payload);
    WriteBatch w;
    w.releases.push_back(r);
    ASSERT_THAT(store_->Apply(w), IsOk());
  }
  const std::vector<ReleaseRow> all = *store_->ListReleases(j.key);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(*store_->LastReleaseChain(j.key), std::optional<std::string>(all.back().chain));
  EXPECT_EQ(all.back().chain, std::string(64, 'd'));
  EXPECT_EQ(*store_->LastReleaseChain({"t", "other"}), std::nullopt);
}

TEST_P(StoreSuite, ReleasesRoundTripAndRequestIdsAreUniquePerTenant) {
  JobRow j = Job("t", "a");
  WriteBatch b;
  b.new_jobs.push_back(j);
  ReleaseRow r;
  r.release_id = "rel_1";
  r.key = j.key;
  r.request_id = "req-1";
  r.epsilon = 1.5;
  r.delta = 1e-9 / 0.99;
  r.delta_est = 1e-9;
  r.tau = 0.99;
  r.rho = 0.995;
  r.verifier = "certified-accountant:analytic";
  r.fallback = true;
  r.payload = std::string("\0binary\xff", 8);
  r.payload_sha256 = Sha256Hex(r.payload);
  b.releases.push_back(r);
  ASSERT_THAT(store_->Apply(b), IsOk());
  absl::StatusOr<std::optional<ReleaseRow>> got = store_->GetRelease("rel_1");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->payload, r.payload);
  EXPECT_EQ((*got)->delta, r.delta);
  EXPECT_TRUE((*got)->fallback);
  EXPECT_EQ((*store_->FindReleaseByRequest("t", "req-1"))->release_id, "rel_1");
  EXPECT_FALSE(store_->FindReleaseByRequest("other", "req-1")->has_value());
  EXPECT_EQ(*store_->CountReleases(j.key), 1);
  WriteBatch again;
  r.release_id = "rel_2";
  again.releases.push_back(r);
  EXPECT_THAT(store_->Apply(again), StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("req-1")));
  EXPECT_EQ(store_->ListReleases(j.key)->size(), 1u);
}

TEST_P(StoreSuite, IntegrityCheckPassesOnAHealthyStore) {
  EXPECT_THAT(store_->CheckIntegrity(false), IsOk());
  EXPECT_THAT(store_->CheckIntegrity(true), IsOk());
}

INSTANTIATE_TEST_SUITE_P(
    Backends, StoreSuite,
    ::testing::Values(
        Backend{"memory", [](const std::string&) -> std::unique_ptr<Store> {
                  return std::make_unique<MemoryStore>();
                }},
        Backend{"sqlite", [](const std::string& dir) -> std::unique_ptr<Store> {
                  absl::StatusOr<std::unique_ptr<SqliteStore>> s =
                      SqliteStore::Open({.path = dir + "/ledger.db"});
                  DPL_CHECK_OK(s.status());
                  return std::move(*s);
                }},
        // One server per test binary, a fresh database per test case.
        Backend{"postgres",
                [](const std::string&) -> std::unique_ptr<Store> {
                  absl::StatusOr<TestPostgres*> pg = TestPostgres::Shared();
                  DPL_CHECK_OK(pg.status());
                  absl::StatusOr<std::string> url = (*pg)->CreateDatabase();
                  DPL_CHECK_OK(url.status());
                  absl::StatusOr<std::unique_ptr<PostgresStore>> s =
                      PostgresStore::Open({.url = *url});
                  DPL_CHECK_OK(s.status());
                  return std::move(*s);
                },
                PostgresUnavailableReason}),
    [](const ::testing::TestParamInfo<Backend>& info) { return info.param.name; });

}  // namespace
}  // namespace dpledger::server
