// Concurrency (issue 4 "Tests"): several clients append to one job until the
// budget refuses them. The budget is never exceeded, and the ledger is a serial
// order of exactly the admitted updates: replaying it offline in seq order gives
// each entry's recorded spent and the final answer.
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/registry/accountant_registry.h"
#include "tests/e2e_fixture.h"

namespace dpledger::e2e {
namespace {

constexpr int kNumClients = 6;
constexpr double kBudgetEpsilon = 1.0;
constexpr double kBudgetDelta = 1e-6;
// The analytic accountant is exact for Gaussian composition (a closed form), so
// replaying the ledger must reproduce the recorded bounds up to rounding.
constexpr double kReplayRelTol = 1e-12;

// Client i's mechanism: a distinct sigma, so two clients that race for one seq
// never send identical content (that would read as a retry of the winner's).
std::string StepFor(int client) {
  return absl::StrFormat("gaussian:sigma=%d,count=1", 40 + client);
}

struct Admitted {
  int client;
  int64_t seq;
  double spent_upper;
};

class ConcurrencyTest : public E2eTest {};

TEST_F(ConcurrencyTest, ConcurrentWritersNeverOverspendAndLedgerIsSerial) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  auto setup = NewClient();
  ASSERT_TRUE(
      setup->CreateJob(GdpJobRequest("shared", kBudgetEpsilon, kBudgetDelta)).ok());

  std::mutex mu;
  std::vector<Admitted> admitted;  // every non-duplicate admitted ack any client saw
  std::vector<std::string> errors;
  std::vector<int> conflicts(kNumClients, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kNumClients; ++i) {
    threads.emplace_back([&, i] {
      auto c = NewClient();
      if (!c) return;
      const std::string step = StepFor(i);
      // Read the tail, claim the next seq; a lost race answers ALREADY_EXISTS
      // (another client's content at that seq) or a gap, and the client re-reads.
      for (int attempt = 0; attempt < 2000; ++attempt) {
        auto job = c->GetJob("shared");
        if (!job.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          errors.push_back(std::string(job.status().message()));
          return;
        }
        auto ack = c->AppendStep("shared", job->last_seq() + 1, {step});
        if (!ack.ok()) {
          if (ack.status().code() == absl::StatusCode::kAlreadyExists ||
              ack.status().code() == absl::StatusCode::kFailedPrecondition) {
            ++conflicts[i];
            continue;
          }
          std::lock_guard<std::mutex> lock(mu);
          errors.push_back(std::string(ack.status().message()));
          return;
        }
        if (!ack->admitted()) {
          // Refused: the candidate bound would overspend; nothing was charged.
          if (ack->candidate().upper() <= kBudgetEpsilon) {
            std::lock_guard<std::mutex> lock(mu);
            errors.push_back(absl::StrFormat("seq %d refused below budget: %g", ack->seq(),
                                             ack->candidate().upper()));
          }
          return;
        }
        std::lock_guard<std::mutex> lock(mu);
        if (ack->duplicate()) {
          errors.push_back(
              absl::StrFormat("client %d got a duplicate ack for seq %d", i, ack->seq()));
          return;
        }
        admitted.push_back({i, ack->seq(), ack->spent().upper()});
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(errors.empty()) << errors.front();

  auto reader = NewClient();
  auto ledger = FullLedger(*reader, "shared");
  ASSERT_TRUE(ledger.ok()) << ledger.status();
  // Exactly the admitted updates, one per seq 1..M, each holding its client's step.
  ASSERT_EQ(ledger->size(), admitted.size());
  ASSERT_GT(admitted.size(), 20u);
  std::map<int64_t, Admitted> by_seq;
  for (const Admitted& a : admitted) ASSERT_TRUE(by_seq.emplace(a.seq, a).second) << a.seq;
  std::set<int> writers;
  auto replay = core::CreateAccountant("analytic");
  ASSERT_TRUE(replay.ok());
  double previous = 0;
  for (size_t k = 0; k < ledger->size(); ++k) {
    const v1::LedgerEntry& e = (*ledger)[k];
    ASSERT_EQ(e.seq(), static_cast<int64_t>(k + 1));
    const Admitted& a = by_seq.at(e.seq());
    writers.insert(a.client);
    ASSERT_EQ(e.steps_size(), 1);
    auto step = core::ParseStep(e.steps(0).spec());
    ASSERT_TRUE(step.ok()) << e.steps(0).spec();
    EXPECT_EQ(*step, *core::ParseStep(StepFor(a.client))) << "seq " << e.seq();
    // Serial: each entry's bound is the replay of entries 1..k in seq order.
    ASSERT_TRUE((*replay)->Compose(*step).ok());
    auto b = (*replay)->EpsilonForDelta(kBudgetDelta);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_NEAR(e.spent().upper(), b->upper, kReplayRelTol * b->upper) << "seq " << e.seq();
    EXPECT_EQ(e.spent().upper(), a.spent_upper) << "seq " << e.seq();
    EXPECT_GE(e.spent().upper(), previous);
    EXPECT_LE(e.spent().upper(), kBudgetEpsilon) << "budget exceeded at seq " << e.seq();
    previous = e.spent().upper();
  }
  EXPECT_GE(writers.size(), 2u) << "no interleaving happened";

  // The budget is nearly used: no client's step fits any more.
  v1::SpentRequest spent;
  spent.set_job_id("shared");
  spent.set_delta(kBudgetDelta);
  auto s = reader->Spent(spent);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_LE(s->epsilon().upper(), kBudgetEpsilon);
  EXPECT_EQ(s->epsilon().upper(), previous);
  for (int i = 0; i < kNumClients; ++i) {
    v1::RemainingRequest r;
    r.set_job_id("shared");
    r.mutable_step()->set_spec(StepFor(i));
    auto rem = reader->Remaining(r);
    ASSERT_TRUE(rem.ok()) << rem.status();
    EXPECT_EQ(rem->max_additional_steps(), 0) << "client " << i;
  }
}

TEST_F(ConcurrencyTest, ConcurrentJobsOnOneServerStayIndependent) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  constexpr int kJobs = 4, kUpdates = 200;
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(kJobs);
  for (int j = 0; j < kJobs; ++j) {
    threads.emplace_back([&, j] {
      auto c = NewClient();
      const std::string id = absl::StrFormat("job-%d", j);
      if (auto s = c->CreateJob(GdpJobRequest(id, 100.0, 1e-6)); !s.ok()) {
        results[j] = s.status();
        return;
      }
      auto stream = c->OpenStream(id);
      for (int seq = 1; seq <= kUpdates; ++seq) {
        v1::StepUpdate u;
        u.set_seq(seq);
        u.add_steps()->set_spec(absl::StrFormat("gaussian:sigma=%d,count=%d", 10 + j, j + 1));
        if (auto s = stream->Write(u); !s.ok()) {
          results[j] = s;
          return;
        }
        auto ack = stream->Read();
        if (!ack.ok() || !ack->admitted()) {
          results[j] = ack.ok() ? absl::InternalError("refused") : ack.status();
          return;
        }
      }
      results[j] = stream->Close();
    });
  }
  for (std::thread& t : threads) t.join();
  auto c = NewClient();
  for (int j = 0; j < kJobs; ++j) {
    ASSERT_TRUE(results[j].ok()) << "job " << j << ": " << results[j];
    auto job = c->GetJob(absl::StrFormat("job-%d", j));
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->num_steps(), kUpdates * (j + 1));
    // mu = sqrt(T * count) / sigma: the exact Gaussian answer for this job alone.
    const double mu = std::sqrt(static_cast<double>(kUpdates * (j + 1))) / (10 + j);
    auto exact = core::CreateAccountant("analytic");
    ASSERT_TRUE(exact.ok());
    ASSERT_TRUE((*exact)->Compose({*core::Mechanism::Gaussian(1.0 / mu), 1}).ok());
    auto b = (*exact)->EpsilonForDelta(1e-6);
    ASSERT_TRUE(b.ok());
    EXPECT_NEAR(job->spent().upper(), b->upper, 1e-9 * b->upper) << "job " << j;
  }
}

}  // namespace
}  // namespace dpledger::e2e
