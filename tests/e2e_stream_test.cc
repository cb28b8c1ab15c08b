// End to end over loopback (issue 4 "Tests"): create a job, stream 10,000 DP-SGD
// steps, query, release; idempotent retries; restart answers the same.
#include <openssl/sha.h>

#include <cmath>
#include <cstdio>

#include "core/registry/accountant_registry.h"
#include "core/util/test_support.h"
#include "tests/e2e_fixture.h"

namespace dpledger::e2e {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kStep[] = "subsampled_gaussian:sigma=1,q=0.001,count=1";
constexpr int kNumUpdates = 10000;
// 10,000 steps spend about 0.555 (pld, delta 1e-6), so a budget of 0.6 admits
// them all and leaves room for a few thousand more (Remaining checks that count).
constexpr double kBudgetEpsilon = 0.6;
constexpr double kBudgetDelta = 1e-6;
// Two certified intervals for the same true epsilon must overlap; the server and
// the offline accountant run the same code on the same ledger, so their upper
// bounds should also agree closely (1e-6 relative: room for the order in which
// the server folded the 10,000 updates in).
constexpr double kSameAccountantRelTol = 1e-6;

std::string Sha256Hex(const std::string& data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  std::string hex;
  char buf[3];
  for (unsigned char b : digest) {
    std::snprintf(buf, sizeof(buf), "%02x", b);
    hex += buf;
  }
  return hex;
}

// The offline answer for `count` applications of kStep, by the named accountant.
core::EpsilonBound OfflineEpsilon(int64_t count, double delta) {
  auto accountant = core::CreateAccountant("pld");
  EXPECT_TRUE(accountant.ok()) << accountant.status();
  auto event = core::ParseStep(kStep);
  EXPECT_TRUE(event.ok()) << event.status();
  event->count = count;
  EXPECT_TRUE((*accountant)->Compose(*event).ok());
  auto b = (*accountant)->EpsilonForDelta(delta);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *b : core::EpsilonBound{};
}

class StreamTest : public E2eTest {};

TEST_F(StreamTest, TenThousandStreamedStepsAreAdmittedQueriedAndReleased) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  auto c = NewClient();
  ASSERT_TRUE(c->CreateJob(JobRequest("dpsgd-run", kBudgetEpsilon, kBudgetDelta)).ok());

  auto stream = c->OpenStream("dpsgd-run");
  v1::StepUpdate update;
  update.add_steps()->set_spec(kStep);
  constexpr int kWindow = 128;
  int written = 0;
  double previous_upper = 0;
  v1::StepAck last;
  for (int acked = 0; acked < kNumUpdates;) {
    while (written < kNumUpdates && written - acked < kWindow) {
      update.set_seq(++written);
      ASSERT_TRUE(stream->Write(update).ok());
    }
    auto ack = stream->Read();
    ASSERT_TRUE(ack.ok()) << ack.status();
    ++acked;
    ASSERT_TRUE(client::AckStatus(*ack).ok()) << client::AckStatus(*ack);
    ASSERT_TRUE(ack->admitted()) << "seq " << ack->seq() << ": " << ack->refusal_reason();
    ASSERT_EQ(ack->seq(), acked);
    ASSERT_FALSE(ack->duplicate());
    ASSERT_EQ(ack->num_steps(), acked);
    ASSERT_EQ(ack->last_seq(), acked);
    // Spent privacy only grows, and never past the budget.
    ASSERT_GE(ack->spent().upper(), previous_upper);
    ASSERT_LE(ack->spent().upper(), kBudgetEpsilon);
    ASSERT_EQ(ack->spent().guarantee(), v1::GUARANTEE_CERTIFIED);
    previous_upper = ack->spent().upper();
    last = *ack;
  }
  ASSERT_TRUE(stream->Close().ok());
  EXPECT_EQ(stream->reconnects(), 0);

  auto job = c->GetJob("dpsgd-run");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->num_steps(), kNumUpdates);
  EXPECT_EQ(job->last_seq(), kNumUpdates);
  EXPECT_EQ(job->num_updates(), kNumUpdates);
  EXPECT_EQ(job->state(), v1::JOB_STATE_OPEN);
  EXPECT_DOUBLE_EQ(job->spent().upper(), last.spent().upper());

  // Spent at the job's delta is the last ack's bound, and matches the offline
  // accountant on the same 10,000 steps.
  v1::SpentRequest spent;
  spent.set_job_id("dpsgd-run");
  spent.set_delta(kBudgetDelta);
  auto s = c->Spent(spent);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->accountant(), "pld");
  EXPECT_EQ(s->num_steps(), kNumUpdates);
  EXPECT_DOUBLE_EQ(s->epsilon().upper(), last.spent().upper());
  const core::EpsilonBound offline = OfflineEpsilon(kNumUpdates, kBudgetDelta);
  EXPECT_LE(s->epsilon().lower(), offline.upper);
  EXPECT_LE(offline.lower, s->epsilon().upper());
  EXPECT_NEAR(s->epsilon().upper(), offline.upper, kSameAccountantRelTol * offline.upper);

  // delta for epsilon inverts it: the true delta at the spent upper epsilon is at
  // most the budget delta, so a certified lower bound must be too; the upper bound
  // carries its own discretisation slack (a few percent, kInverseSlack).
  constexpr double kInverseSlack = 1.05;
  v1::SpentRequest inverse;
  inverse.set_job_id("dpsgd-run");
  inverse.set_epsilon(s->epsilon().upper());
  auto d = c->Spent(inverse);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_LE(d->delta().lower(), kBudgetDelta);
  EXPECT_LE(d->delta().upper(), kBudgetDelta * kInverseSlack);

  // Remaining: exactly that many more steps fit (checked by appending them).
  v1::RemainingRequest remaining;
  remaining.set_job_id("dpsgd-run");
  remaining.mutable_step()->set_spec(kStep);
  auto rem = c->Remaining(remaining);
  ASSERT_TRUE(rem.ok()) << rem.status();
  ASSERT_GT(rem->max_additional_steps(), 0);
  EXPECT_LE(rem->spent_at_max().upper(), kBudgetEpsilon);
  const int64_t fit = rem->max_additional_steps();
  auto too_many =
      c->AppendStep("dpsgd-run", kNumUpdates + 1,
                    {absl::StrFormat("subsampled_gaussian:sigma=1,q=0.001,count=%d", fit + 1)});
  ASSERT_TRUE(too_many.ok()) << too_many.status();
  EXPECT_FALSE(too_many->admitted());
  EXPECT_GT(too_many->candidate().upper(), kBudgetEpsilon);
  auto exactly =
      c->AppendStep("dpsgd-run", kNumUpdates + 1,
                    {absl::StrFormat("subsampled_gaussian:sigma=1,q=0.001,count=%d", fit)});
  ASSERT_TRUE(exactly.ok()) << exactly.status();
  EXPECT_TRUE(exactly->admitted()) << exactly->refusal_reason();
  EXPECT_EQ(exactly->num_steps(), kNumUpdates + fit);

  // Release: a claim above the certified bound passes; the payload is stored.
  v1::SpentRequest at_release;
  at_release.set_job_id("dpsgd-run");
  at_release.set_delta(1e-5);
  auto spent_release = c->Spent(at_release);
  ASSERT_TRUE(spent_release.ok()) << spent_release.status();
  const std::string payload("model-weights\0v1\xff", 17);
  v1::ReleaseRequest release;
  release.set_job_id("dpsgd-run");
  release.set_payload(payload);
  release.set_epsilon(1.1 * spent_release->epsilon().upper());
  release.set_delta_est(1e-5);
  auto record = c->Release(release);
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_FALSE(record->release_id().empty());
  EXPECT_EQ(record->job_id(), "dpsgd-run");
  EXPECT_EQ(record->ledger_seq(), kNumUpdates + 1);
  EXPECT_EQ(record->num_steps(), kNumUpdates + fit);
  EXPECT_DOUBLE_EQ(record->epsilon(), 1.1 * spent_release->epsilon().upper());
  EXPECT_DOUBLE_EQ(record->tau(), 0.99);  // the documented default
  EXPECT_NEAR(record->delta(), 1e-5 / record->tau(), 1e-20);
  EXPECT_EQ(record->payload_sha256(), Sha256Hex(payload));
  EXPECT_EQ(record->payload_size(), 17);

  v1::GetReleaseRequest get;
  get.set_release_id(record->release_id());
  get.set_include_payload(true);
  auto fetched = c->GetRelease(get);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(fetched->payload(), payload);
  EXPECT_EQ(fetched->payload_sha256(), record->payload_sha256());
  EXPECT_EQ(fetched->ledger_seq(), record->ledger_seq());

  // A claim below what the ledger certainly spent fails and stores nothing.
  release.set_epsilon(0.5 * spent_release->epsilon().lower());
  release.set_request_id("");
  EXPECT_THAT(c->Release(release), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("")));
  auto after = c->GetJob("dpsgd-run");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->num_releases(), 1);
}

TEST_F(StreamTest, RetriedSeqReturnsOriginalAckAndChargesNothing) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  auto c = NewClient();
  ASSERT_TRUE(c->CreateJob(JobRequest("retry", 5.0, 1e-6)).ok());
  const std::vector<std::string> step = {"gaussian:sigma=4,count=3"};
  auto first = c->AppendStep("retry", 1, step);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->admitted());
  EXPECT_FALSE(first->duplicate());

  auto again = c->AppendStep("retry", 1, step);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->admitted());
  EXPECT_TRUE(again->duplicate());
  EXPECT_EQ(again->spent().upper(), first->spent().upper());
  EXPECT_EQ(again->num_steps(), 3);

  // The same seq with other content is a conflict, not a retry.
  EXPECT_THAT(c->AppendStep("retry", 1, {"gaussian:sigma=4,count=4"}),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("seq")));
  // A gap is refused with a clear message.
  EXPECT_THAT(c->AppendStep("retry", 3, step),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("seq")));
  auto job = c->GetJob("retry");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->num_steps(), 3);
  EXPECT_EQ(job->last_seq(), 1);

  // Over a stream too: the retry is answered as a duplicate.
  auto stream = c->OpenStream("retry");
  v1::StepUpdate u;
  u.set_seq(1);
  u.add_steps()->set_spec(step[0]);
  ASSERT_TRUE(stream->Write(u).ok());
  u.set_seq(2);
  ASSERT_TRUE(stream->Write(u).ok());
  auto a1 = stream->Read();
  ASSERT_TRUE(a1.ok()) << a1.status();
  EXPECT_TRUE(a1->duplicate());
  EXPECT_EQ(a1->spent().upper(), first->spent().upper());
  auto a2 = stream->Read();
  ASSERT_TRUE(a2.ok()) << a2.status();
  EXPECT_TRUE(a2->admitted());
  EXPECT_FALSE(a2->duplicate());
  EXPECT_EQ(a2->num_steps(), 6);
  EXPECT_TRUE(stream->Close().ok());
}

TEST_F(StreamTest, RestartedServerAnswersExactlyAsBefore) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  auto c = NewClient();
  // The alternating mechanisms are declared as the job's plan (issue 10), which the restart
  // must keep too.
  v1::CreateJobRequest create = JobRequest("restart", 6.0, 1e-7);
  v1::AppendStepsRequest batch;
  batch.set_job_id("restart");
  for (int i = 1; i <= 50; ++i) {
    v1::StepUpdate* u = batch.add_updates();
    u->set_seq(i);
    const char* spec = i % 2 ? "subsampled_gaussian:sigma=0.9,q=0.01,count=20"
                             : "gaussian:sigma=30,count=2";
    u->add_steps()->set_spec(spec);
    create.add_plan()->set_spec(spec);
  }
  ASSERT_TRUE(c->CreateJob(create).ok());
  auto acks = c->AppendSteps(batch);
  ASSERT_TRUE(acks.ok()) << acks.status();
  ASSERT_EQ(acks->acks_size(), 50);
  for (const auto& a : acks->acks()) ASSERT_TRUE(a.admitted()) << a.seq();

  auto ask = [&] {
    std::vector<double> out;
    for (double delta : {1e-7, 1e-10, 1e-15}) {
      v1::SpentRequest r;
      r.set_job_id("restart");
      r.set_delta(delta);
      auto s = c->Spent(r);
      EXPECT_TRUE(s.ok()) << s.status();
      if (s.ok()) out.insert(out.end(), {s->epsilon().lower(), s->epsilon().upper()});
    }
    v1::SpentRequest r;
    r.set_job_id("restart");
    r.set_epsilon(1.0);
    auto s = c->Spent(r);
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) out.insert(out.end(), {s->delta().lower(), s->delta().upper()});
    return out;
  };
  const std::vector<double> before = ask();
  ASSERT_TRUE(server_->Stop().ok());
  ASSERT_TRUE(server_->Start().ok());
  EXPECT_EQ(ask(), before);  // bit for bit: state is rebuilt from the ledger
  auto job = c->GetJob("restart");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->num_steps(), 25 * 20 + 25 * 2);
  EXPECT_EQ(job->last_seq(), 50);
}

}  // namespace
}  // namespace dpledger::e2e
