// Several replicas, one truth (issue 12): three dpledgerd on one PostgreSQL database (started
// by the test, server/test_postgres.h), all on 127.0.0.1.
// * Clients append to the same job through different replicas at once: the budget is never
//   exceeded and the ledger is one serial order, the same through every replica.
// * kill -9 one replica while clients stream; they move to another replica and retry with
//   the same seqs: every acknowledged step is present exactly once, nothing charged twice.
// * The database stopped and restarted under load: every replica answers UNAVAILABLE and
//   NOT_SERVING while it is down, and afterwards everything acknowledged is there once.
#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <thread>

#include "client/client_chain.h"
#include "core/registry/accountant_registry.h"
#include "server/test_postgres.h"
#include "tests/e2e_fixture.h"

namespace dpledger::e2e {
namespace {

using server::testing::PostgresUnavailableReason;
using server::testing::TestPostgres;

constexpr int kReplicas = 3;
constexpr double kSigma = 100;  // every step: gaussian sigma 100, count 1 (~330 fit in epsilon 1)

class ReplicasTest : public E2eTest {
 protected:
  void SetUp() override {
    if (const std::string why = PostgresUnavailableReason(); !why.empty()) GTEST_SKIP() << why;
    absl::StatusOr<TestPostgres*> pg = TestPostgres::Shared();
    ASSERT_TRUE(pg.ok()) << pg.status();
    pg_ = *pg;
    absl::StatusOr<std::string> url = (*pg)->CreateDatabase();
    ASSERT_TRUE(url.ok()) << url.status();
    for (int r = 0; r < kReplicas; ++r) {
      ServerConfig c;
      c.data_dir = dir_.File(absl::StrFormat("replica-%d", r));  // holds only its log
      c.extra_args = {"--store", "postgres", "--postgres-url", *url};
      replicas_.push_back(std::make_unique<ServerProcess>(c));
      absl::Status s = replicas_.back()->Start();
      ASSERT_TRUE(s.ok()) << s << replicas_.back()->LogTail();
    }
  }
  void TearDown() override {
    for (auto& r : replicas_) {
      if (r->running()) {
        EXPECT_TRUE(r->Stop().ok()) << r->LogTail();
      }
      if (HasFailure()) std::cerr << "---- " << r->log_path() << "\n" << r->LogTail() << "\n";
    }
  }
  std::unique_ptr<client::Client> ClientOf(int replica, int max_attempts = 1) {
    client::ClientOptions o = replicas_[replica]->ClientOptionsFor();
    o.timeout_ms = 20000;
    o.retry.max_attempts = max_attempts;
    o.retry.initial_backoff_ms = 20;
    o.retry.max_backoff_ms = 200;
    auto c = client::Client::Create(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }
  // The exact epsilon of n Gaussian(kSigma) steps at delta (analytic accountant, closed form).
  static double ExactEpsilon(int64_t n, double delta) {
    auto a = core::CreateAccountant("analytic");
    EXPECT_TRUE(a.ok());
    EXPECT_TRUE((*a)->Compose({*core::Mechanism::Gaussian(kSigma / std::sqrt(double(n))), 1}).ok());
    auto e = (*a)->EpsilonForDelta(delta);
    EXPECT_TRUE(e.ok());
    return e.ok() ? e->upper : -1;
  }

  std::vector<std::unique_ptr<ServerProcess>> replicas_;
  TestPostgres* pg_ = nullptr;  // this test process's own server (Shared() is per process)
};

// Three clients, each on its own replica, race to extend one job until its budget refuses:
// every append names the seq the client believes is next and retries after a conflict.
TEST_F(ReplicasTest, ClientsOnDifferentReplicasShareOneBudgetAndOneSerialLedger) {
  constexpr double kBudget = 1.0, kDelta = 1e-6;
  auto setup = ClientOf(0);
  ASSERT_TRUE(setup->CreateJob(JobRequest("shared", kBudget, kDelta, "analytic")).ok());
  std::atomic<int> admitted{0}, conflicts{0}, failures{0};
  std::vector<std::thread> clients;
  for (int r = 0; r < kReplicas; ++r) {
    clients.emplace_back([&, r] {
      auto c = ClientOf(r);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
      while (std::chrono::steady_clock::now() < deadline) {
        auto job = c->GetJob("shared");
        if (!job.ok()) {
          ++conflicts;
          continue;
        }
        auto ack = c->AppendStep("shared", job->last_seq() + 1,
                                 {absl::StrFormat("gaussian:sigma=%g,count=1", kSigma)});
        if (!ack.ok()) {
          // Another replica took that seq first: the caller's view was stale.
          if (ack.status().code() == absl::StatusCode::kAborted ||
              ack.status().code() == absl::StatusCode::kFailedPrecondition ||
              ack.status().code() == absl::StatusCode::kAlreadyExists ||
              ack.status().code() == absl::StatusCode::kUnavailable) {
            ++conflicts;
            continue;
          }
          ADD_FAILURE() << "replica " << r << ": " << ack.status();
          ++failures;
          return;
        }
        if (!ack->admitted()) return;  // the budget is spent: done
        EXPECT_LE(ack->spent().upper(), kBudget);
        // The same seq with the same step, admitted through another replica first: its
        // original ack (the replica brought its view up to date), nothing charged.
        if (ack->duplicate()) {
          ++conflicts;
          continue;
        }
        ++admitted;
      }
      ADD_FAILURE() << "replica " << r << " did not reach the end of the budget";
    });
  }
  for (std::thread& t : clients) t.join();
  ASSERT_EQ(failures.load(), 0);
  RecordProperty("conflicts", conflicts.load());

  // One serial ledger, the same through every replica, within the budget, and as long as
  // the closed form allows: n steps fit, n + 1 do not.
  std::vector<v1::LedgerEntry> first;
  for (int r = 0; r < kReplicas; ++r) {
    auto c = ClientOf(r, 5);
    auto ledger = FullLedger(*c, "shared");
    ASSERT_TRUE(ledger.ok()) << ledger.status();
    if (r == 0) first = *ledger;
    ASSERT_EQ(ledger->size(), first.size());
    for (size_t i = 0; i < ledger->size(); ++i) {
      ASSERT_EQ((*ledger)[i].seq(), static_cast<int64_t>(i + 1));
      ASSERT_EQ((*ledger)[i].spent().upper(), first[i].spent().upper());
    }
    // Issue 11: one hash chain, whichever replica wrote each entry (job_cache.h Refresh).
    auto job = c->GetJob("shared");
    ASSERT_TRUE(job.ok());
    EXPECT_TRUE(client::VerifyChain(*job, *ledger, job->last_seq(), job->chain_head()).ok());
    v1::SpentRequest q;
    q.set_job_id("shared");
    q.set_delta(kDelta);
    auto spent = c->Spent(q);
    ASSERT_TRUE(spent.ok()) << spent.status();
    EXPECT_EQ(spent->num_steps(), static_cast<int64_t>(first.size())) << "replica " << r;
    EXPECT_LE(spent->epsilon().upper(), kBudget);
  }
  const int64_t n = static_cast<int64_t>(first.size());
  EXPECT_EQ(n, admitted.load());
  EXPECT_LE(ExactEpsilon(n, kDelta), kBudget);
  EXPECT_GT(ExactEpsilon(n + 1, kDelta), kBudget);
}

// Clients stream through replica 0; replica 1 has already read (and cached) their jobs. kill
// -9 replica 0 mid-stream: the clients move to replica 1 and resend their unacknowledged
// updates with the same seqs. Every acknowledged update is in the ledger exactly once, and a
// resent update that replica 0 had committed is answered with its original ack.
// Replica 1 cached the jobs before replica 0 admitted into them: its job cache brings its
// stale copy up to date from the stored rows before answering (job_cache.h), so resent seqs
// get their original acks and nothing is charged twice.
TEST_F(ReplicasTest, KilledReplicaClientsRetryElsewhereWithoutDoubleCharges) {
  constexpr int kClients = 3;
  constexpr int kUpdates = 400;
  auto setup = ClientOf(0);
  auto other = ClientOf(1, 5);
  for (int i = 0; i < kClients; ++i) {
    const std::string job = absl::StrFormat("s%d", i);
    ASSERT_TRUE(setup->CreateJob(JobRequest(job, 1e6, 1e-6, "analytic")).ok());
    ASSERT_TRUE(other->GetJob(job).ok());  // replica 1 caches the job now
  }
  std::mutex mu;
  std::map<std::pair<int, int64_t>, v1::StepAck> acked;
  std::atomic<int> progress{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      const std::string job = absl::StrFormat("s%d", i);
      int64_t next = 1;  // the first seq not yet acknowledged
      int retries = 0;
      for (int replica = 0; replica < kReplicas && next <= kUpdates; ++replica) {
        if (!replicas_[replica]->running()) continue;
        auto c = ClientOf(replica);
        auto stream = c->OpenStream(job);
        int64_t written = next - 1;
        bool broken = false;
        while (next <= kUpdates && !broken) {
          while (written < kUpdates && written - next + 1 < 32) {
            v1::StepUpdate u;
            u.set_seq(++written);
            u.add_steps()->set_spec(absl::StrFormat("gaussian:sigma=%g,count=1", kSigma));
            if (!stream->Write(u).ok()) broken = true;
          }
          auto ack = stream->Read();
          if (!ack.ok()) break;  // the replica died: move on, resend from `next`
          // The dead replica's last commit can land in the store after replica 1 refreshed
          // the job: replica 1's write of the same seq then fails and is answered UNAVAILABLE
          // "retry" (the documented protocol); the resent seq gets its original ack.
          if (absl::IsUnavailable(client::AckStatus(*ack)) && ++retries <= 10) {
            --replica;  // reopen on the same replica and resend from `next`
            break;
          }
          if (!client::AckStatus(*ack).ok() || !ack->admitted() || ack->num_steps() != ack->seq()) {
            ADD_FAILURE() << job << " seq " << ack->seq() << ": " << ack->error_message()
                          << " num_steps " << ack->num_steps();
            ++failures;
            return;
          }
          std::lock_guard<std::mutex> lock(mu);
          acked[{i, ack->seq()}] = *ack;
          ++progress;
          ++next;
        }
      }
      if (next <= kUpdates) {
        ADD_FAILURE() << job << " stopped at seq " << next;
        ++failures;
      }
    });
  }
  while (progress < kClients * kUpdates / 4 && failures == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  replicas_[0]->Kill9();
  for (std::thread& t : clients) t.join();
  ASSERT_EQ(failures.load(), 0);
  auto reader = ClientOf(2, 5);
  for (int i = 0; i < kClients; ++i) {
    auto ledger = FullLedger(*reader, absl::StrFormat("s%d", i));
    ASSERT_TRUE(ledger.ok()) << ledger.status();
    ASSERT_EQ(ledger->size(), static_cast<size_t>(kUpdates));
    for (int64_t s = 1; s <= kUpdates; ++s) {
      ASSERT_EQ((*ledger)[s - 1].seq(), s);
      ASSERT_EQ((*ledger)[s - 1].spent().upper(), (acked[{i, s}].spent().upper()));
      // Issue 11: every ack's chain head, from whichever replica, is the ledger's.
      ASSERT_EQ((*ledger)[s - 1].chain_head(), (acked[{i, s}].chain_head()));
    }
    auto job = reader->GetJob(absl::StrFormat("s%d", i));
    ASSERT_TRUE(job.ok());
    EXPECT_TRUE(client::VerifyChain(*job, *ledger, job->last_seq(), job->chain_head()).ok());
  }
}

// Issue 12: stop and restart the database while clients append through all three replicas.
TEST_F(ReplicasTest, StoppedDatabaseIsUnavailableOnEveryReplicaAndNothingAckedIsLost) {
  constexpr int kUpdates = 150;  // per client, one job each, each client on its own replica
  auto setup = ClientOf(0, 5);
  for (int r = 0; r < kReplicas; ++r) {
    ASSERT_TRUE(setup->CreateJob(JobRequest(absl::StrFormat("d%d", r), 1e6, 1e-6, "analytic")).ok());
  }
  std::mutex mu;
  std::map<std::pair<int, int64_t>, v1::StepAck> acked;
  std::atomic<int> progress{0}, unavailable{0}, failures{0};
  std::vector<std::unique_ptr<client::Client>> writers;
  for (int r = 0; r < kReplicas; ++r) writers.push_back(ClientOf(r));  // no client retries
  std::vector<std::thread> clients;
  for (int r = 0; r < kReplicas; ++r) {
    clients.emplace_back([&, r] {
      const std::string job = absl::StrFormat("d%d", r);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(150);
      for (int64_t seq = 1; seq <= kUpdates && std::chrono::steady_clock::now() < deadline;) {
        auto ack = writers[r]->AppendStep(job, seq,
                                          {absl::StrFormat("gaussian:sigma=%g,count=1", kSigma)});
        if (!ack.ok()) {
          if (ack.status().code() != absl::StatusCode::kUnavailable &&
              ack.status().code() != absl::StatusCode::kDeadlineExceeded) {
            ++failures;
            ADD_FAILURE() << job << " seq " << seq << ": " << ack.status();
            return;
          }
          ++unavailable;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          continue;  // the same seq again
        }
        if (!ack->admitted() || ack->num_steps() != seq) {
          ++failures;  // a retried seq charged twice, or one lost
          ADD_FAILURE() << job << " seq " << seq << ": admitted=" << ack->admitted()
                        << " num_steps=" << ack->num_steps();
          return;
        }
        std::lock_guard<std::mutex> lock(mu);
        acked[{r, seq}] = *ack;
        ++progress;
        ++seq;
      }
    });
  }
  while (progress < kReplicas * 20 && failures == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(pg_->Stop(/*immediate=*/true).ok());
  const int unavailable_at_stop = unavailable;
  std::vector<bool> not_serving(kReplicas, false);
  for (int i = 0; i < 300; ++i) {
    bool all = true;
    for (int r = 0; r < kReplicas; ++r) {
      not_serving[r] = not_serving[r] || !writers[r]->CheckHealth("", 1000).ok();
      all = all && not_serving[r];
    }
    if (all && unavailable > unavailable_at_stop + kReplicas) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int r = 0; r < kReplicas; ++r) {
    EXPECT_TRUE(not_serving[r]) << "replica " << r << " stayed SERVING with the database down";
    EXPECT_TRUE(replicas_[r]->running()) << "replica " << r;
  }
  EXPECT_GT(unavailable.load(), unavailable_at_stop + kReplicas);
  ASSERT_TRUE(pg_->Restart().ok()) << pg_->LogTail();
  for (std::thread& t : clients) t.join();
  ASSERT_EQ(failures.load(), 0);
  ASSERT_EQ(progress.load(), kReplicas * kUpdates);

  // Every acknowledged update exactly once, with the bound its ack carried, read through a
  // replica that did not write it.
  for (int r = 0; r < kReplicas; ++r) {
    auto reader = ClientOf((r + 1) % kReplicas, 5);
    auto ledger = FullLedger(*reader, absl::StrFormat("d%d", r));
    ASSERT_TRUE(ledger.ok()) << ledger.status();
    ASSERT_EQ(ledger->size(), static_cast<size_t>(kUpdates));
    for (int64_t s = 1; s <= kUpdates; ++s) {
      ASSERT_EQ((*ledger)[s - 1].seq(), s);
      ASSERT_EQ((*ledger)[s - 1].spent().upper(), (acked[{r, s}].spent().upper())) << "seq " << s;
    }
  }
}

}  // namespace
}  // namespace dpledger::e2e
