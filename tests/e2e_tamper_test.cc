// Issue 11 (Hardening) defect 7, "Store loss is silent": end to end against a real
// dpledgerd and its SQLite store. Each test damages the store the way the issue saw it
// (tail dropped, budget or step edited, WAL deleted after kill -9, database emptied, data
// dir deleted while running) and asserts the server refuses with DATA_LOSS naming what is
// wrong; and that a client holding an old chain head detects a history rewritten so well
// that the server itself accepts it (server/ledger_chain.h, client/client_chain.h).
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "client/client_chain.h"
#include "gmock/gmock.h"
#include "server/ledger_chain.h"
#include "tests/e2e_fixture.h"

namespace dpledger::e2e {
namespace {

using ::testing::HasSubstr;

// Runs SQL on the (stopped) server's database.
void ExecSql(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class TamperTest : public E2eTest {
 protected:
  std::string DataDir() const { return dir_.File("data"); }
  std::string Db() const { return DataDir() + "/ledger.db"; }
  static v1::AppendStepsRequest Request(const v1::StepUpdate& u) {
    v1::AppendStepsRequest r;
    r.set_job_id("j");
    *r.add_updates() = u;
    return r;
  }

  // A declared job "j" with `n` admitted updates (sigma 5 + seq, so every step differs).
  // Returns the last ack.
  v1::StepAck CreateJobWithSteps(int n) {
    auto c = NewClient();
    EXPECT_TRUE(c->CreateJob(GdpJobRequest("j", 50, 1e-6)).ok());
    v1::StepAck last;
    for (int seq = 1; seq <= n; ++seq) {
      v1::StepUpdate u;
      u.set_seq(seq);
      u.add_steps()->set_spec(absl::StrFormat("gaussian:sigma=%d,count=1", 5 + seq));
      auto acks = c->AppendSteps(Request(u));
      EXPECT_TRUE(acks.ok()) << acks.status();
      if (acks.ok()) last = acks->acks(0);
      EXPECT_TRUE(last.admitted());
      EXPECT_EQ(last.chain_head().size(), 64u);
    }
    return last;
  }

  // Restarts the server (stopped by the caller) and expects it to refuse with DATA_LOSS
  // whose message contains `what`.
  void ExpectStartRefused(const std::string& what) {
    absl::Status s = server_->Start();
    EXPECT_FALSE(s.ok()) << "the server started on a damaged store";
    const std::string log = ReadFile(server_->log_path());
    EXPECT_THAT(log, HasSubstr("start failed code=DATA_LOSS"));
    EXPECT_THAT(log, HasSubstr(what));
  }

  // What an operator with write access can do: run `sql` (touching seq >= 2 of job "j"),
  // then recompute every head from seq 2 on as the server computes them, and delete the
  // high-water mark, so that the server finds nothing inconsistent.
  void Forge(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(Db().c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_stmt* q = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT seq, steps, spent_lower, spent_estimate, "
                                     "spent_upper, failure_probability, num_steps_after, "
                                     "commit_time_ms, chain FROM updates WHERE job_id = 'j' "
                                     "ORDER BY seq",
                                 -1, &q, nullptr), SQLITE_OK);
    std::string head;
    std::vector<std::pair<int64_t, std::string>> heads;
    while (sqlite3_step(q) == SQLITE_ROW) {
      const int64_t seq = sqlite3_column_int64(q, 0);
      if (seq == 1) {
        head = reinterpret_cast<const char*>(sqlite3_column_text(q, 8));
        continue;
      }
      chain::UpdateFields f;
      f.tenant = "default";
      f.job_id = "j";
      f.seq = seq;
      f.steps = reinterpret_cast<const char*>(sqlite3_column_text(q, 1));
      f.lower = sqlite3_column_double(q, 2);
      f.estimate = sqlite3_column_double(q, 3);
      f.upper = sqlite3_column_double(q, 4);
      f.guarantee = "certified";
      f.failure_probability = sqlite3_column_double(q, 5);
      f.num_steps_after = sqlite3_column_int64(q, 6);
      f.commit_time_ms = sqlite3_column_int64(q, 7);
      heads.emplace_back(seq, head = chain::NextUpdate(head, f));
    }
    sqlite3_finalize(q);
    for (const auto& [seq, h] : heads) {
      ASSERT_EQ(sqlite3_exec(db, absl::StrFormat("UPDATE updates SET chain = '%s' WHERE job_id = 'j' AND seq = %d",
                                                 h, seq).c_str(),
                             nullptr, nullptr, nullptr), SQLITE_OK);
    }
    sqlite3_close(db);
    // The server cannot tell a deleted mark from one never written (first start after an
    // upgrade): it writes a new one from the forged database.
    std::filesystem::remove(Db() + ".mark");
  }
};

TEST_F(TamperTest, DroppingTheLedgersTailIsDataLossAtStartUp) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  CreateJobWithSteps(10);
  ASSERT_TRUE(server_->Stop().ok());
  ExecSql(Db(), "DELETE FROM updates WHERE seq > 7");
  ExpectStartRefused(
      "holds 7 updates of 1 jobs and 0 releases but 10 updates of 1 jobs and 0 releases were "
      "acknowledged");
}

TEST_F(TamperTest, AnEditedBudgetIsDataLossAtStartUp) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  CreateJobWithSteps(3);
  ASSERT_TRUE(server_->Stop().ok());
  ExecSql(Db(), "UPDATE jobs SET budget_epsilon = 500");
  ExpectStartRefused("ledger of job 'default/j' is damaged at seq 1: chain head");
}

TEST_F(TamperTest, AnEditedStepIsDataLossAtStartUp) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  CreateJobWithSteps(5);
  ASSERT_TRUE(server_->Stop().ok());
  // A larger sigma charges less: the edit the issue saw accepted.
  ExecSql(Db(), "UPDATE updates SET steps = replace(steps, 'sigma=8', 'sigma=80') WHERE seq = 3");
  ExpectStartRefused("ledger of job 'default/j' is damaged at seq 3: chain head");
}

TEST_F(TamperTest, DeletingTheWalAfterAKillIsDataLossUnlessAccepted) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  CreateJobWithSteps(200);
  server_->Kill9();
  ASSERT_TRUE(std::filesystem::exists(Db() + "-wal"));
  std::filesystem::remove(Db() + "-wal");
  std::filesystem::remove(Db() + "-shm");
  ExpectStartRefused("200 acknowledged updates of 1 jobs");
  // Once the operator accepts the loss, the job is gone and the server serves again.
  server_ = std::make_unique<ServerProcess>(
      ServerConfig{.data_dir = DataDir(), .extra_args = {"--accept-data-loss"}});
  ASSERT_TRUE(server_->Start().ok()) << server_->LogTail();
  EXPECT_THAT(server_->LogTail(), HasSubstr("ACCEPTING DATA LOSS"));
  auto c = NewClient();
  EXPECT_EQ(c->GetJob("j").status().code(), absl::StatusCode::kNotFound);
}

// The mark counts job closes: a closed job opened again (its budget usable anew) is loss.
TEST_F(TamperTest, AReopenedClosedJobIsDataLossAtStartUp) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  CreateJobWithSteps(2);
  ASSERT_TRUE(NewClient()->CloseJob("j").ok());
  ASSERT_TRUE(server_->Stop().ok());
  ExecSql(Db(), "UPDATE jobs SET state = 1, close_time_ms = 0");
  ExpectStartRefused("holds 0 closed jobs and 0 EVR-stopped jobs but 1 closes and 0 EVR stops "
                     "were acknowledged");
}

TEST_F(TamperTest, AnEmptiedDatabaseFileIsDataLossAtStartUp) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  CreateJobWithSteps(4);
  ASSERT_TRUE(server_->Stop().ok());
  std::filesystem::resize_file(Db(), 0);
  ExpectStartRefused("the database was deleted, emptied or replaced, losing 4 acknowledged "
                     "updates of 1 jobs");
}

TEST_F(TamperTest, ADataDirDeletedWhileRunningAcknowledgesNothingMore) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  CreateJobWithSteps(3);
  std::filesystem::remove_all(DataDir());
  auto c = NewClient([](client::ClientOptions& o) { o.retry.max_attempts = 1; });
  for (int attempt = 0; attempt < 3; ++attempt) {
    v1::StepUpdate u;
    u.set_seq(4);
    u.add_steps()->set_spec("gaussian:sigma=9,count=1");
    auto acks = c->AppendSteps(Request(u));
    ASSERT_FALSE(acks.ok()) << "attempt " << attempt << ": seq 4 was acknowledged into deleted files";
    // The service answers a failed commit UNAVAILABLE ("nothing was acknowledged").
    EXPECT_EQ(acks.status().code(), absl::StatusCode::kUnavailable) << acks.status();
    EXPECT_THAT(acks.status().message(), HasSubstr("was deleted or replaced while the server runs"));
  }
  server_->Kill9();
}

// An operator with write access rewrites seq 2's step and recomputes every later head and
// the high-water mark, so the server itself starts cleanly; the client that kept the head
// of seq 4 from its ack still detects the rewrite.
TEST_F(TamperTest, AClientHoldingAnOldHeadDetectsARewrittenHistory) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  const v1::StepAck held = CreateJobWithSteps(4);
  {
    auto c = NewClient();
    auto job = c->GetJob("j");
    ASSERT_TRUE(job.ok());
    EXPECT_EQ(job->chain_head(), held.chain_head());
    auto ledger = FullLedger(*c, "j");
    ASSERT_TRUE(ledger.ok());
    auto ok = client::VerifyChain(*job, *ledger, held.seq(), held.chain_head());
    ASSERT_TRUE(ok.ok()) << ok.status();
    EXPECT_EQ(*ok, held.chain_head());
  }
  ASSERT_TRUE(server_->Stop().ok());

  ASSERT_NO_FATAL_FAILURE(
      Forge("UPDATE updates SET steps = 'gaussian:sigma=70,count=1' WHERE seq = 2"));

  ASSERT_TRUE(server_->Start().ok()) << server_->LogTail();  // the forgery is consistent
  auto c = NewClient();
  auto job = c->GetJob("j");
  ASSERT_TRUE(job.ok());
  EXPECT_NE(job->chain_head(), held.chain_head());
  auto ledger = FullLedger(*c, "j");
  ASSERT_TRUE(ledger.ok());
  auto verdict = client::VerifyChain(*job, *ledger, held.seq(), held.chain_head());
  EXPECT_EQ(verdict.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(verdict.status().message(),
              HasSubstr("ledger of job 'default/j' was rewritten at or before seq 4: the held "
                        "head " + held.chain_head() + " is not the recomputed"));
}

// The forgery above that lowers a charge: the chain and the mark are consistent, and only
// replaying the admission policy (--replay-ledger) shows the stored spent is wrong.
TEST_F(TamperTest, AForgedSpentValueIsDataLossWhenTheLedgerIsReplayed) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  CreateJobWithSteps(4);
  {
    // A declared PLD job whose 5 updates were admitted as one group: their stored bounds
    // are the group's, and the replay accepts them.
    auto c = NewClient();
    ASSERT_TRUE(c->CreateJob(JobRequest("g", 5, 1e-6)).ok());
    v1::AppendStepsRequest r;
    r.set_job_id("g");
    for (int seq = 1; seq <= 5; ++seq) {
      v1::StepUpdate* u = r.add_updates();
      u->set_seq(seq);
      u->add_steps()->set_spec("gaussian:sigma=10,count=2");
    }
    auto acks = c->AppendSteps(r);
    ASSERT_TRUE(acks.ok()) << acks.status();
    ASSERT_TRUE(acks->acks(4).admitted());
  }
  ASSERT_TRUE(server_->Stop().ok());
  server_ = std::make_unique<ServerProcess>(
      ServerConfig{.data_dir = DataDir(), .extra_args = {"--replay-ledger"}});
  ASSERT_TRUE(server_->Start().ok()) << server_->LogTail();
  EXPECT_THAT(server_->LogTail(), HasSubstr("ledger replay ok jobs=2 updates=9"));
  ASSERT_TRUE(server_->Stop().ok());
  ASSERT_NO_FATAL_FAILURE(Forge(
      "UPDATE updates SET spent_lower = spent_lower / 2, spent_estimate = spent_estimate / 2, "
      "spent_upper = spent_upper / 2 WHERE job_id = 'j' AND seq = 3"));
  ExpectStartRefused("ledger of job 'default/j' is damaged at seq 3: stored spent upper");
  EXPECT_THAT(ReadFile(server_->log_path()), HasSubstr("is below the replayed"));
}

}  // namespace
}  // namespace dpledger::e2e
