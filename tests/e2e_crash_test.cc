// Crash safety (issue 4 "Tests"): kill -9 the server at random points (fixed
// seed) while a client streams and retries. After restart every acknowledged
// step is present exactly once, in order, and answers are unchanged.
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "core/registry/accountant_registry.h"
#include "tests/e2e_fixture.h"

namespace dpledger::e2e {
namespace {

constexpr uint64_t kSeed = 20240601;  // kill points; fixed so a failure reproduces
constexpr int kNumKills = 6;
constexpr int kNumUpdates = 6000;

// Step `seq` of the run: two mechanisms alternate so a misplaced or doubled
// update changes the ledger's answer, not only its length.
std::string StepFor(int64_t seq) {
  return seq % 3 == 0 ? "gaussian:sigma=40,count=2" : "gaussian:sigma=60,count=1";
}
int64_t CountFor(int64_t seq) { return seq % 3 == 0 ? 2 : 1; }

class CrashTest : public E2eTest {};

TEST_F(CrashTest, KilledServerKeepsEveryAcknowledgedStepExactlyOnce) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  // Analytic accountant: pure Gaussian composition is exact, so the answer after
  // recovery can also be checked against the closed form.
  auto setup = NewClient();
  ASSERT_TRUE(setup->CreateJob(GdpJobRequest("crash", 50.0, 1e-6)).ok());

  // The streamer retries through every crash: generous attempts, short backoff.
  auto streamer = NewClient([](client::ClientOptions& o) {
    o.retry.max_attempts = 200;
    o.retry.initial_backoff_ms = 20;
    o.retry.max_backoff_ms = 250;
    o.timeout_ms = 10000;
  });
  std::mutex mu;
  std::map<int64_t, v1::StepAck> acked;  // seq -> the ack the client saw
  std::atomic<bool> done{false};
  absl::Status stream_status;
  int reconnects = 0;
  std::thread writer([&] {
    auto stream = streamer->OpenStream("crash");
    constexpr int kWindow = 32;
    int64_t written = 0, read = 0;
    while (read < kNumUpdates) {
      while (written < kNumUpdates && written - read < kWindow) {
        v1::StepUpdate u;
        u.set_seq(++written);
        u.add_steps()->set_spec(StepFor(written));
        if (absl::Status s = stream->Write(u); !s.ok()) {
          stream_status = s;
          done = true;
          return;
        }
      }
      auto ack = stream->Read();
      if (!ack.ok()) {
        stream_status = ack.status();
        break;
      }
      ++read;
      std::lock_guard<std::mutex> lock(mu);
      acked[ack->seq()] = *ack;
      if (!client::AckStatus(*ack).ok() || !ack->admitted()) {
        stream_status = absl::InternalError(absl::StrFormat("seq %d: admitted=%d %s", ack->seq(),
                                                            ack->admitted(), ack->error_message()));
        break;
      }
    }
    if (stream_status.ok()) stream_status = stream->Close();
    reconnects = stream->reconnects();
    done = true;
  });

  // Kill at random points while the stream runs, restart after a random pause.
  std::mt19937_64 rng(kSeed);
  int kills = 0;
  absl::Status restart_status;
  for (; kills < kNumKills && !done; ++kills) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(20, 300)(rng)));
    if (done) break;
    server_->Kill9();
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 150)(rng)));
    restart_status = server_->Start();
    if (!restart_status.ok()) break;  // the writer then runs out of retries and stops
  }
  writer.join();
  ASSERT_TRUE(restart_status.ok()) << restart_status;
  ASSERT_TRUE(stream_status.ok()) << stream_status;
  ASSERT_EQ(acked.size(), static_cast<size_t>(kNumUpdates));
  EXPECT_GE(kills, 1) << "the stream finished before the first kill; raise kNumUpdates";
  EXPECT_GE(reconnects, 1);
  RecordProperty("kills", kills);
  RecordProperty("reconnects", reconnects);

  // The ledger: seqs 1..N exactly once, in order, each with its own step, and
  // each entry's recorded spent equal to what the client was told.
  auto check_ledger = [&](client::Client& c) {
    auto ledger = FullLedger(c, "crash");
    ASSERT_TRUE(ledger.ok()) << ledger.status();
    ASSERT_EQ(ledger->size(), static_cast<size_t>(kNumUpdates));
    for (int64_t i = 0; i < kNumUpdates; ++i) {
      const v1::LedgerEntry& e = (*ledger)[i];
      ASSERT_EQ(e.seq(), i + 1);
      ASSERT_EQ(e.steps_size(), 1);
      auto parsed = core::ParseStep(e.steps(0).spec());
      ASSERT_TRUE(parsed.ok()) << e.steps(0).spec();
      auto expected = core::ParseStep(StepFor(e.seq()));
      ASSERT_EQ(*parsed, *expected) << "seq " << e.seq() << ": " << e.steps(0).spec();
      ASSERT_EQ(e.spent().upper(), acked[e.seq()].spent().upper()) << "seq " << e.seq();
    }
  };
  auto reader = NewClient();
  check_ledger(*reader);

  int64_t total = 0;
  for (int64_t s = 1; s <= kNumUpdates; ++s) total += CountFor(s);
  auto spent = [&] {
    v1::SpentRequest r;
    r.set_job_id("crash");
    r.set_delta(1e-6);
    auto s = reader->Spent(r);
    EXPECT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->num_steps(), total);
    return s.ok() ? s->epsilon().upper() : -1.0;
  };
  const double before = spent();
  EXPECT_EQ(before, acked[kNumUpdates].spent().upper());

  // Closed form: N(0, sigma^2) steps compose to a Gaussian with
  // mu = sqrt(sum 1/sigma_i^2); the analytic accountant is exact for it.
  double inv_var = 0;
  for (int64_t s = 1; s <= kNumUpdates; ++s) {
    inv_var += s % 3 == 0 ? 2.0 / (40.0 * 40.0) : 1.0 / (60.0 * 60.0);
  }
  auto closed = core::CreateAccountant("analytic");
  ASSERT_TRUE(closed.ok());
  ASSERT_TRUE((*closed)->Compose({*core::Mechanism::Gaussian(1.0 / std::sqrt(inv_var)), 1}).ok());
  auto exact = (*closed)->EpsilonForDelta(1e-6);
  ASSERT_TRUE(exact.ok());
  EXPECT_NEAR(before, exact->upper, 1e-9 * exact->upper);

  // One more crash with nothing in flight: the same answers, bit for bit.
  server_->Kill9();
  ASSERT_TRUE(server_->Start().ok());
  check_ledger(*reader);
  EXPECT_EQ(spent(), before);
  auto job = reader->GetJob("crash");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->num_steps(), total);
  EXPECT_EQ(job->last_seq(), kNumUpdates);
}

TEST_F(CrashTest, UnaryRetriesAcrossARestartAreNotChargedTwice) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  auto c = NewClient([](client::ClientOptions& o) {
    o.retry.max_attempts = 100;
    o.retry.initial_backoff_ms = 20;
    o.retry.max_backoff_ms = 200;
    o.timeout_ms = 5000;
  });
  ASSERT_TRUE(c->CreateJob(GdpJobRequest("unary", 50.0, 1e-6)).ok());
  // Append from a worker while this thread kills and restarts the server. (The
  // server must be started from a thread that outlives it: the child's
  // PR_SET_PDEATHSIG fires when the forking thread ends.)
  constexpr int kUpdates = 300;
  absl::Status append_status;
  std::atomic<bool> appending{true};
  std::thread appender([&] {
    for (int seq = 1; seq <= kUpdates && append_status.ok(); ++seq) {
      auto ack = c->AppendStep("unary", seq, {"gaussian:sigma=50,count=1"});
      if (!ack.ok()) {
        append_status = ack.status();
      } else if (!ack->admitted() || ack->num_steps() != seq) {
        // num_steps != seq would be a doubled (or lost) charge.
        append_status = absl::InternalError(absl::StrFormat("seq %d: admitted=%d num_steps=%d", seq,
                                                            ack->admitted(), ack->num_steps()));
      }
    }
    appending = false;
  });
  std::mt19937_64 rng(kSeed + 1);
  absl::Status restart_status;
  int kills = 0;
  for (; kills < 3 && appending; ++kills) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(50, 200)(rng)));
    server_->Kill9();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    restart_status = server_->Start();
    if (!restart_status.ok()) break;  // the appender then runs out of retries
  }
  appender.join();
  ASSERT_TRUE(restart_status.ok()) << restart_status;
  ASSERT_TRUE(append_status.ok()) << append_status;
  EXPECT_GE(kills, 1);
  auto job = c->GetJob("unary");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->num_steps(), kUpdates);
  EXPECT_EQ(job->last_seq(), kUpdates);
}

}  // namespace
}  // namespace dpledger::e2e
