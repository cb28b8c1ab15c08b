// EVR-verified admission ("evr" jobs, evr_admission.h) through the ledger service.
//
// Reference numbers: steps of a Gaussian mechanism with sigma = 4, so n steps are mu-GDP
// with mu = sqrt(n)/4 and delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)
// (closed form; the analytic accountant computes it exactly). At eps = 1:
//   n = 2: 0.00039777   n = 3: 0.00249481   n = 4: 0.00682959   (mpmath, 30 digits)
// A job with budget (1, 0.01) verifies delta_est = tau * 0.01 / 2 = 0.0025 at tau = 0.5:
// threshold T = delta_est/tau - Delta = 0.005 - 0.000667 = 0.004333, and the verifier's
// standard error at its sample size is at most Delta / sqrt(2 ln(tau/delta_est)) = 0.000205
// (its proven second moment bounds the variance). So 3 steps pass (T is 9 standard errors
// above delta) and 4 steps fail (12 below): the outcome is certain for any seed, although
// the verifier's seeds are fresh OS entropy. A pld job admits 4 steps (0.00683 <= 0.01):
// evr admits less, as its delta_B/2 split and its margin Delta require.
#include "server/evr_admission.h"

#include <atomic>

#include "core/mc/mc_estimate.h"
#include "core/util/test_support.h"
#include "gtest/gtest.h"
#include "server/ledger_service.h"
#include "server/memory_store.h"
#include "server/test_util.h"

namespace dpledger::server {
namespace {

using ::dpledger::testing::IsOk;
using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;
using testing::Gaussian;

constexpr double kBudgetEps = 1.0;
constexpr double kBudgetDelta = 0.01;

UpdateInput Upd(int64_t seq, double sigma = 4, int64_t count = 1) {
  return UpdateInput{seq, {Gaussian(sigma, count)}};
}

class EvrAdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.release_use_mc = false;
    Restart();
  }
  void Restart() {
    service_.reset();
    service_ = std::make_unique<LedgerService>(&store_, options_, &metrics_);
  }
  void Create(std::string id, std::string accountant = "evr") {
    JobSpec spec;
    spec.job_id = std::move(id);
    spec.budget_epsilon = kBudgetEps;
    spec.budget_delta = kBudgetDelta;
    spec.accountant = std::move(accountant);
    ASSERT_THAT(service_->CreateJob(Caller::Insecure(), spec), IsOk());
  }
  absl::StatusOr<std::vector<Ack>> Append(std::vector<UpdateInput> u, std::string job = "job") {
    return service_->AppendSteps(Caller::Insecure(), "", job, u);
  }
  absl::StatusOr<Ack> Append1(const UpdateInput& u, std::string job = "job") {
    absl::StatusOr<std::vector<Ack>> acks = Append({u}, std::move(job));
    if (!acks.ok()) return acks.status();
    return (*acks)[0];
  }
  EvrState StoredState(const std::string& job) {
    absl::StatusOr<std::optional<JobRow>> row = store_.GetJob({"default", job});
    DPL_CHECK_OK(row.status());
    return (*row)->evr_state;
  }
  std::string Counter(const std::string& outcome) {
    return "dpledger_verifications_total{outcome=\"" + outcome + "\",purpose=\"admission\"}";
  }

  LedgerOptions options_;
  Metrics metrics_;
  MemoryStore store_;
  std::unique_ptr<LedgerService> service_;
};

TEST_F(EvrAdmissionTest, AdmitsWhileTheVerifierAcceptsThenStopsForGoodEvenAfterARestart) {
  Create("job");
  for (int64_t seq = 1; seq <= 3; ++seq) {
    absl::StatusOr<Ack> ack = Append1(Upd(seq));
    ASSERT_THAT(ack, IsOk());
    EXPECT_TRUE(ack->admitted) << seq << ": " << ack->refusal_reason;
    EXPECT_EQ(ack->accountant, "evr");
    // The verified statement: epsilon(delta_B) <= epsilon_B, its exposure delta_B/2 inside.
    EXPECT_EQ(ack->spent.upper, kBudgetEps);
    EXPECT_EQ(ack->spent.lower, 0);
    EXPECT_EQ(ack->spent.guarantee, core::Guarantee::kStatistical);
    EXPECT_EQ(ack->spent.failure_probability, kBudgetDelta / 2);
  }
  EXPECT_EQ(StoredState("job"), EvrState::kIdle);
  // The admitted ledger really is within delta_B/2 at epsilon_B (closed form).
  auto exact = *core::CreateAccountant("analytic");
  ASSERT_THAT(exact->Compose(Gaussian(4, 3)), IsOk());
  EXPECT_NEAR(exact->DeltaForEpsilon(kBudgetEps)->upper, 0.00249481, 1e-8);

  absl::StatusOr<Ack> fourth = Append1(Upd(4));
  ASSERT_THAT(fourth, IsOk());
  EXPECT_FALSE(fourth->admitted);
  EXPECT_THAT(fourth->refusal_reason, HasSubstr("not below the threshold"));
  EXPECT_THAT(fourth->refusal_reason, HasSubstr("admits no more steps"));
  EXPECT_FALSE(fourth->candidate.has_value());
  EXPECT_EQ(fourth->num_steps, 3);
  EXPECT_EQ(StoredState("job"), EvrState::kStopped);  // durable before the ack

  // Even a harmless step is refused now, without another verification.
  absl::StatusOr<Ack> tiny = Append1(Upd(4, 1000));
  ASSERT_THAT(tiny, IsOk());
  EXPECT_FALSE(tiny->admitted);
  EXPECT_THAT(tiny->refusal_reason, HasSubstr("stopped for good"));
  const std::string m = metrics_.Serialize();
  EXPECT_THAT(m, HasSubstr(Counter("accepted") + " 3"));
  EXPECT_THAT(m, HasSubstr(Counter("rejected") + " 1"));
  EXPECT_THAT(m, HasSubstr(Counter("refused") + " 1"));

  Restart();
  absl::StatusOr<JobInfo> info = service_->GetJob(Caller::Insecure(), "", "job");
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->row.evr_state, EvrState::kStopped);
  EXPECT_THAT(EvrStoppedReason(info->row.evr_state, info->row.evr_note),
              HasSubstr("updates after seq 3 did not accept"));
  EXPECT_EQ(info->last_seq, 3);
  EXPECT_EQ(info->spent.upper, kBudgetEps);  // the stored statement, after a restart too
  absl::StatusOr<Ack> again = Append1(Upd(4, 1000));
  ASSERT_THAT(again, IsOk());
  EXPECT_FALSE(again->admitted);
  EXPECT_THAT(again->refusal_reason, HasSubstr("stopped for good"));
  // Retries of admitted updates still answer with their original acks.
  absl::StatusOr<Ack> retry = Append1(Upd(2));
  ASSERT_THAT(retry, IsOk());
  EXPECT_TRUE(retry->duplicate);

  // For comparison, PLD's certified filter admits the 4th step (0.00683 <= 0.01).
  Create("pld-job", "pld");
  for (int64_t seq = 1; seq <= 4; ++seq) {
    absl::StatusOr<Ack> ack = Append1(Upd(seq), "pld-job");
    ASSERT_THAT(ack, IsOk());
    EXPECT_TRUE(ack->admitted) << seq;
  }
}

TEST_F(EvrAdmissionTest, ABatchIsVerifiedOnceAsAWhole) {
  Create("job");
  absl::StatusOr<std::vector<Ack>> acks = Append({Upd(1), Upd(2), Upd(3)});
  ASSERT_THAT(acks, IsOk());
  for (const Ack& a : *acks) EXPECT_TRUE(a.admitted) << a.refusal_reason;
  EXPECT_THAT(metrics_.Serialize(), HasSubstr(Counter("accepted") + " 1"));
  // 5 steps fail as a whole; no prefix search (each extra verification would add exposure).
  acks = Append({Upd(4), Upd(5)});
  ASSERT_THAT(acks, IsOk());
  EXPECT_FALSE((*acks)[0].admitted);
  EXPECT_THAT((*acks)[0].refusal_reason, HasSubstr("admits no more steps"));
  EXPECT_FALSE((*acks)[1].admitted);
  EXPECT_THAT((*acks)[1].refusal_reason, HasSubstr("not attempted"));
}

TEST_F(EvrAdmissionTest, ARefusalForTheSampleBudgetDoesNotStopTheJob) {
  options_.evr_admission.max_samples = 100;
  Restart();
  Create("job");
  absl::StatusOr<Ack> ack = Append1(Upd(1, 4, 3));
  ASSERT_THAT(ack, IsOk());
  EXPECT_FALSE(ack->admitted);
  EXPECT_THAT(ack->refusal_reason, HasSubstr("max_samples = 100"));
  EXPECT_THAT(ack->refusal_reason, HasSubstr("keeps admitting"));
  EXPECT_EQ(StoredState("job"), EvrState::kIdle);
  options_.evr_admission.max_samples = 100'000'000;
  Restart();
  ack = Append1(Upd(1, 4, 3));
  ASSERT_THAT(ack, IsOk());
  EXPECT_TRUE(ack->admitted) << ack->refusal_reason;
}

TEST_F(EvrAdmissionTest, ASamplerFailureDecidesNothingAndTheRetryIsVerified) {
  std::atomic<int> calls{0};
  options_.evr_admission.hooks.sampler =
      [&](const core::McEstimateRequest& r) -> absl::StatusOr<core::McEstimateResult> {
    if (calls++ == 0) return absl::UnavailableError("simulated device failure");
    return core::EstimateDeltaStreaming(r);
  };
  Restart();
  Create("job");
  EXPECT_THAT(Append1(Upd(1)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("simulated device failure")));
  absl::StatusOr<Ack> ack = Append1(Upd(1));
  ASSERT_THAT(ack, IsOk());
  EXPECT_TRUE(ack->admitted) << ack->refusal_reason;
  EXPECT_EQ(StoredState("job"), EvrState::kIdle);
  EXPECT_THAT(metrics_.Serialize(), HasSubstr(Counter("error") + " 1"));
}

// A crash while a verification samples leaves the durable kVerifying mark: the outcome is
// unknown, so it counts as a rejection.
TEST_F(EvrAdmissionTest, AVerificationInterruptedByACrashCountsAsARejection) {
  Create("job");
  ASSERT_TRUE(Append1(Upd(1))->admitted);
  Restart();  // everything pending is committed
  // What the store holds when the process dies while a verification samples.
  WriteBatch as_left;
  as_left.evr_marks.push_back({{"default", "job"}, EvrState::kVerifying, ""});
  ASSERT_THAT(store_.Apply(as_left), IsOk());
  Restart();
  absl::StatusOr<JobInfo> info = service_->GetJob(Caller::Insecure(), "", "job");
  ASSERT_THAT(info, IsOk());
  EXPECT_THAT(EvrStoppedReason(info->row.evr_state, info->row.evr_note),
              HasSubstr("interrupted"));
  EXPECT_EQ(info->last_seq, 1);
  absl::StatusOr<Ack> ack = Append1(Upd(2, 1000));
  ASSERT_THAT(ack, IsOk());
  EXPECT_FALSE(ack->admitted);
  EXPECT_THAT(ack->refusal_reason, HasSubstr("interrupted"));
}

TEST_F(EvrAdmissionTest, QueriesOfAnEvrJob) {
  Create("job");
  ASSERT_TRUE(Append1(Upd(1, 4, 2))->admitted);
  // At the budget delta: the verified statement.
  SpentQuery q;
  q.delta = kBudgetDelta;
  absl::StatusOr<SpentAnswer> a = service_->Spent(Caller::Insecure(), "", "job", q);
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ(a->accountant, "evr");
  EXPECT_EQ(a->epsilon->upper, kBudgetEps);
  // Elsewhere: the MC accountant's estimate; its interval holds the closed form 0.00039777.
  SpentQuery e;
  e.epsilon = 1.0;
  a = service_->Spent(Caller::Insecure(), "", "job", e);
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ(a->accountant, "mc");
  EXPECT_EQ(a->delta->guarantee, core::Guarantee::kEstimate);
  auto exact = *core::CreateAccountant("analytic");
  ASSERT_THAT(exact->Compose(Gaussian(4, 2)), IsOk());
  const double truth = exact->DeltaForEpsilon(1.0)->upper;
  EXPECT_NEAR(truth, 0.00039777, 1e-8);
  EXPECT_LE(a->delta->lower, truth);
  EXPECT_GE(a->delta->upper, truth);
  // A certified accountant answers as for any job.
  SpentQuery p;
  p.delta = kBudgetDelta;
  p.accountant = "pld";
  a = service_->Spent(Caller::Insecure(), "", "job", p);
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ(a->epsilon->guarantee, core::Guarantee::kCertified);
  EXPECT_LT(a->epsilon->upper, kBudgetEps);
  EXPECT_THAT(service_->Remaining(Caller::Insecure(), "", "job", Gaussian(4).mechanism),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("evr")));
}

TEST_F(EvrAdmissionTest, AStepWithoutAProvenMomentBoundIsUnimplementedAndWritesNothing) {
  Create("job");
  const core::MechanismEvent approx{*core::Mechanism::ApproxDp(0.1, 1e-6), 1};
  EXPECT_THAT(Append1(UpdateInput{1, {approx}}), StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("approx")));
  EXPECT_EQ(StoredState("job"), EvrState::kIdle);
  absl::StatusOr<Ack> ack = Append1(Upd(1));
  ASSERT_THAT(ack, IsOk());
  EXPECT_TRUE(ack->admitted) << ack->refusal_reason;
}

TEST_F(EvrAdmissionTest, CreateJobNamesEvrAmongTheChoices) {
  JobSpec spec;
  spec.job_id = "j";
  spec.budget_epsilon = 1;
  spec.budget_delta = 1e-5;
  spec.accountant = "mc";
  EXPECT_THAT(service_->CreateJob(Caller::Insecure(), spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("evr")));
  spec.accountant = "nope";
  EXPECT_THAT(service_->CreateJob(Caller::Insecure(), spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("evr")));
}

}  // namespace
}  // namespace dpledger::server
