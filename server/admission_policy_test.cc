// Issue 10: admission policies. Declared schedules (explicit and implicit plans) under the
// natural filter; adaptive schedules under the Gaussian-DP and Renyi filters, checked
// against independent computations of their sums; configuration errors; Remaining, Spent
// and Release through the same policies.
#include "server/admission_policy.h"

#include <cmath>
#include <numeric>

#include "absl/strings/str_format.h"
#include "core/util/test_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/ledger_service.h"
#include "server/memory_store.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dpledger::server {
namespace {

using ::dpledger::testing::IsOk;
using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

core::Mechanism G(double sigma) { return *core::Mechanism::Gaussian(sigma); }
core::Mechanism Sg(double sigma, double q) { return *core::Mechanism::SubsampledGaussian(sigma, q); }
core::Mechanism Lap(double scale) { return *core::Mechanism::Laplace(scale); }

// Standard normal CDF and the exact mu-GDP curve (Dong, Roth & Su 2022, Cor. 2.13), written
// here independently of core/accountants/analytic_gaussian.
double Phi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double GdpDelta(double mu, double eps) {
  return Phi(-eps / mu + mu / 2) - std::exp(eps) * Phi(-eps / mu - mu / 2);
}
// Largest mu with GdpDelta(mu, eps) <= delta, and epsilon(mu, delta), by bisection.
double GdpMu(double eps, double delta) {
  double lo = 1e-6, hi = 100;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (GdpDelta(mid, eps) <= delta ? lo : hi) = mid;
  }
  return lo;
}
double GdpEpsilon(double mu, double delta) {
  double lo = 0, hi = 100;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (GdpDelta(mu, mid) <= delta ? hi : lo) = mid;
  }
  return hi;
}

// RDP at integer order a, independently: Laplace (Mironov 2017, Prop. 6); Poisson-subsampled
// Gaussian by the exact binomial expansion (Mironov, Talwar & Zhang 2019, Sec. 3.3).
double RdpLaplace(double b, int a) {
  const double l = 1 / b;
  return std::log(a / (2.0 * a - 1) * std::exp((a - 1) * l) +
                  (a - 1) / (2.0 * a - 1) * std::exp(-a * l)) /
         (a - 1);
}
double RdpSubsampledGaussian(double sigma, double q, int a) {
  double sum = 0;
  for (int k = 0; k <= a; ++k) {
    sum += std::exp(std::lgamma(a + 1.0) - std::lgamma(k + 1.0) - std::lgamma(a - k + 1.0) +
                    (a - k) * std::log1p(-q) + k * std::log(q) + (k * k - k) / (2 * sigma * sigma));
  }
  return std::log(sum) / (a - 1);
}
// The RDP budget at order a: the largest rho whose (epsilon, delta) conversion (Canonne,
// Kamath & Steinke 2020 Prop. 12, capped by Mironov 2017 Prop. 3) is <= eps.
double RdpBudget(double eps, double delta, int a) {
  const double cks = std::log1p(-1.0 / a) - (std::log(delta) + std::log(a)) / (a - 1);
  const double classical = -std::log(delta) / (a - 1);
  return eps - std::min(cks, classical);
}

class AdmissionPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.release_use_mc = false;
    service_ = std::make_unique<LedgerService>(&store_, options_);
  }
  absl::StatusOr<JobInfo> Create(JobSpec spec) {
    return service_->CreateJob(Caller::Insecure(), spec);
  }
  absl::StatusOr<Ack> Append(const std::string& job, int64_t seq,
                             std::vector<core::MechanismEvent> steps) {
    absl::StatusOr<std::vector<Ack>> acks =
        service_->AppendSteps(Caller::Insecure(), "", job, {UpdateInput{seq, std::move(steps)}});
    if (!acks.ok()) return acks.status();
    return acks->front();
  }
  // Appends one update per step until the first refusal; returns how many were admitted.
  int AppendUntilRefused(const std::string& job, const std::vector<core::MechanismEvent>& steps,
                         Ack* refusal = nullptr) {
    int n = 0;
    for (const core::MechanismEvent& e : steps) {
      absl::StatusOr<Ack> a = Append(job, n + 1, {e});
      EXPECT_THAT(a, IsOk());
      if (!a.ok() || !a->admitted) {
        if (refusal && a.ok()) *refusal = *a;
        break;
      }
      ++n;
    }
    return n;
  }

  LedgerOptions options_;
  MemoryStore store_;
  std::unique_ptr<LedgerService> service_;
};

TEST_F(AdmissionPolicyTest, ADeclaredTwoPhasePlanAdmitsExactlyAsThePldFilter) {
  const core::MechanismEvent a{G(30), 20}, b{Sg(1.0, 0.02), 4000};
  ASSERT_THAT(Create({.job_id = "two", .budget_epsilon = 4, .budget_delta = 1e-5,
                      .plan = {a, b}}),
              IsOk());
  // Phase A in two updates, then phase B in updates of 100 steps.
  std::vector<core::MechanismEvent> steps = {{G(30), 10}, {G(30), 10}};
  for (int i = 0; i < 40; ++i) steps.push_back({Sg(1.0, 0.02), 100});
  // An off-plan step (another q) after phase A is refused and writes nothing.
  ASSERT_TRUE(Append("two", 1, {steps[0]})->admitted);
  ASSERT_TRUE(Append("two", 2, {steps[1]})->admitted);
  absl::StatusOr<Ack> off = Append("two", 3, {{Sg(1.0, 0.03), 100}});
  ASSERT_THAT(off, IsOk());
  EXPECT_FALSE(off->admitted);
  EXPECT_EQ(off->refusal_kind, RefusalKind::kPlan);
  EXPECT_THAT(off->refusal_reason, HasSubstr("plan position 21 (plan[1])"));
  EXPECT_FALSE(store_.GetUpdate({"default", "two"}, 3)->has_value());

  // The same prefixes judged offline by a PLD accountant: the last one within budget.
  auto pld = *core::CreateAccountant("pld");
  int expect = 0;
  for (const core::MechanismEvent& e : steps) {
    ASSERT_THAT(pld->Compose(e), IsOk());
    absl::StatusOr<core::EpsilonBound> bound = pld->EpsilonForDelta(1e-5);
    ASSERT_THAT(bound, IsOk());
    if (bound->upper > 4) break;
    ++expect;
  }
  ASSERT_GT(expect, 2);
  ASSERT_LT(expect, static_cast<int>(steps.size()));
  int admitted = 2;
  Ack refusal;
  for (size_t i = 2; i < steps.size(); ++i) {
    absl::StatusOr<Ack> ack = Append("two", admitted + 1, {steps[i]});
    ASSERT_THAT(ack, IsOk());
    if (!ack->admitted) {
      refusal = *ack;
      break;
    }
    ++admitted;
  }
  EXPECT_EQ(admitted, expect);
  EXPECT_EQ(refusal.refusal_kind, RefusalKind::kBudget);
  EXPECT_EQ(refusal.admission_guarantee, "natural filter over a declared schedule (pld)");
}

TEST_F(AdmissionPolicyTest, AnExplicitPlanEndsAndRemainingSaysWhy) {
  ASSERT_THAT(Create({.job_id = "p", .budget_epsilon = 10, .budget_delta = 1e-5,
                      .accountant = "analytic", .plan = {{G(10), 3}, {G(20), 2}}}),
              IsOk());
  absl::StatusOr<RemainingAnswer> r =
      service_->Remaining(Caller::Insecure(), "", "p", G(10));
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->max_additional_steps, 3);
  EXPECT_THAT(r->reason, HasSubstr("plan position 4 (plan[1]) expects gaussian:sigma=20"));
  ASSERT_TRUE(Append("p", 1, {{G(10), 3}, {G(20), 2}})->admitted);
  absl::StatusOr<Ack> past = Append("p", 2, {{G(20), 1}});
  ASSERT_THAT(past, IsOk());
  EXPECT_FALSE(past->admitted);
  EXPECT_THAT(past->refusal_reason, HasSubstr("the declared plan has 5 steps"));
  r = service_->Remaining(Caller::Insecure(), "", "p", G(20));
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->max_additional_steps, 0);
  EXPECT_THAT(r->reason, HasSubstr("ends at position 5"));
}

TEST_F(AdmissionPolicyTest, TheGdpFilterAdmitsUntilTheSumOfInverseVariancesCrossesMuB) {
  const double eps = 1.0, delta = 1e-5;
  const double mu_b = GdpMu(eps, delta);
  const std::vector<double> sigmas = {10, 5, 20, 7, 3, 12, 4, 9, 6, 8, 2.5, 15};
  for (bool reversed : {false, true}) {
    std::vector<double> order = sigmas;
    if (reversed) std::reverse(order.begin(), order.end());
    const std::string job = reversed ? "gdp-rev" : "gdp";
    ASSERT_THAT(Create({.job_id = job, .budget_epsilon = eps, .budget_delta = delta,
                        .schedule = Schedule::kAdaptive, .filter = "gdp"}),
                IsOk());
    // Independently: the longest prefix with sum 1/sigma^2 <= mu_B^2, clear of the edge.
    double sum = 0;
    int expect = 0;
    for (double s : order) {
      if (sum + 1 / (s * s) > mu_b * mu_b) {
        ASSERT_GT(sum + 1 / (s * s), mu_b * mu_b * (1 + 1e-6));
        break;
      }
      sum += 1 / (s * s);
      ++expect;
    }
    ASSERT_LT(sum, mu_b * mu_b * (1 - 1e-6));
    int n = 0;
    double running = 0;
    for (double s : order) {
      absl::StatusOr<Ack> ack = Append(job, n + 1, {{G(s), 1}});
      ASSERT_THAT(ack, IsOk());
      if (!ack->admitted) {
        EXPECT_EQ(ack->refusal_kind, RefusalKind::kBudget);
        break;
      }
      running += 1 / (s * s);
      const double closed = GdpEpsilon(std::sqrt(running), delta);
      EXPECT_NEAR(ack->spent.upper, closed, 1e-9 * closed);
      EXPECT_EQ(ack->admission_guarantee, "gdp filter");
      ++n;
    }
    EXPECT_EQ(n, expect) << job;
  }
  absl::StatusOr<JobInfo> info = service_->GetJob(Caller::Insecure(), "", "gdp");
  ASSERT_THAT(info, IsOk());
  // Other kinds are not Gaussian-DP: an error naming the filter, nothing written.
  absl::StatusOr<Ack> lap = Append("gdp", info->last_seq + 1, {{Lap(1), 1}});
  EXPECT_THAT(lap, StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("gdp filter")));
  // Remaining is the closed form: floor((mu_B^2 - sum) sigma^2) more of sigma 30.
  double sum = 0;
  for (int i = 0; i < info->num_steps; ++i) sum += 1 / (sigmas[i] * sigmas[i]);
  absl::StatusOr<RemainingAnswer> r = service_->Remaining(Caller::Insecure(), "", "gdp", G(30));
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->max_additional_steps, static_cast<int64_t>(std::floor((mu_b * mu_b - sum) * 900)));
}

TEST_F(AdmissionPolicyTest, TheRenyiFilterAdmitsMixedStepsByTheSumAtItsOrder) {
  const double eps = 3.0, delta = 1e-6;
  const int alpha = 8;
  ASSERT_THAT(Create({.job_id = "r", .budget_epsilon = eps, .budget_delta = delta,
                      .schedule = Schedule::kAdaptive, .rdp_order = alpha}),
              IsOk());
  // Laplace steps, then subsampled Gaussians whose q changes every step.
  std::vector<core::MechanismEvent> steps;
  std::vector<double> rdp;
  for (int i = 0; i < 3; ++i) {
    steps.push_back({Lap(8), 1});
    rdp.push_back(RdpLaplace(8, alpha));
  }
  for (int i = 0; i < 400; ++i) {
    const double q = i % 2 ? 0.02 : 0.035;
    steps.push_back({Sg(1.1, q), 10});
    rdp.push_back(10 * RdpSubsampledGaussian(1.1, q, alpha));
  }
  const double budget = RdpBudget(eps, delta, alpha);
  int expect = 0;
  double sum = 0;
  while (expect < static_cast<int>(rdp.size()) && sum + rdp[expect] <= budget) sum += rdp[expect++];
  ASSERT_LT(expect, static_cast<int>(rdp.size()));
  ASSERT_GT(sum + rdp[expect], budget * (1 + 1e-6));
  ASSERT_LT(sum, budget * (1 - 1e-6));
  Ack refusal;
  EXPECT_EQ(AppendUntilRefused("r", steps, &refusal), expect);
  EXPECT_EQ(refusal.refusal_kind, RefusalKind::kBudget);
  EXPECT_EQ(refusal.admission_guarantee, "renyi filter at order 8");

  // Spent: the filter's own answer, and a tight accountant's curve marked as realised.
  absl::StatusOr<SpentAnswer> own =
      service_->Spent(Caller::Insecure(), "", "r", {.delta = delta});
  ASSERT_THAT(own, IsOk());
  EXPECT_FALSE(own->realised_curve);
  EXPECT_EQ(own->accountant, "renyi");
  EXPECT_LE(own->epsilon->upper, eps);
  absl::StatusOr<SpentAnswer> pld =
      service_->Spent(Caller::Insecure(), "", "r", {.delta = delta, .accountant = "pld"});
  ASSERT_THAT(pld, IsOk());
  EXPECT_TRUE(pld->realised_curve);
  EXPECT_EQ(pld->admission_guarantee, "renyi filter at order 8");
}

TEST_F(AdmissionPolicyTest, OnDpSgdStepsTheRenyiFilterAdmitsNoMoreThanThePldFilter) {
  const std::vector<core::MechanismEvent> steps(300, {Sg(1.0, 0.01), 20});
  ASSERT_THAT(Create({.job_id = "renyi", .budget_epsilon = 2, .budget_delta = 1e-5,
                      .schedule = Schedule::kAdaptive, .expected = Sg(1.0, 0.01)}),
              IsOk());
  ASSERT_THAT(Create({.job_id = "pld", .budget_epsilon = 2, .budget_delta = 1e-5}), IsOk());
  const int renyi = AppendUntilRefused("renyi", steps);
  const int pld = AppendUntilRefused("pld", steps);
  EXPECT_GT(renyi, 0);
  EXPECT_LT(pld, 300);
  EXPECT_LE(renyi, pld);
}

TEST_F(AdmissionPolicyTest, InconsistentSchedulesAreRefusedAtCreate) {
  EXPECT_THAT(Create({.job_id = "a", .budget_epsilon = 1, .budget_delta = 1e-5,
                      .accountant = "evr", .schedule = Schedule::kAdaptive}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("declared schedule")));
  EXPECT_THAT(Create({.job_id = "b", .budget_epsilon = 1, .budget_delta = 1e-5,
                      .schedule = Schedule::kAdaptive, .plan = {{G(1), 1}}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("plan")));
  EXPECT_THAT(Create({.job_id = "c", .budget_epsilon = 1, .budget_delta = 1e-5, .filter = "gdp"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("schedule ADAPTIVE")));
  EXPECT_THAT(Create({.job_id = "d", .budget_epsilon = 1, .budget_delta = 1e-5,
                      .schedule = Schedule::kAdaptive, .filter = "pld"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("filter")));
  EXPECT_THAT(Create({.job_id = "e", .budget_epsilon = 1, .budget_delta = 1e-5,
                      .accountant = "analytic", .plan = {{Lap(1), 1}}}),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("plan[0]")));
  EXPECT_THAT(Create({.job_id = "f", .budget_epsilon = 1, .budget_delta = 1e-5,
                      .schedule = Schedule::kAdaptive, .rdp_order = 0.5}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rdp_order")));
}

TEST_F(AdmissionPolicyTest, AnAdaptiveJobsReleaseIsCheckedAgainstItsFiltersBudgetCurve) {
  const double eps = 1.0, delta = 1e-5;
  ASSERT_THAT(Create({.job_id = "g", .budget_epsilon = eps, .budget_delta = delta,
                      .schedule = Schedule::kAdaptive, .filter = "gdp"}),
              IsOk());
  ASSERT_TRUE(Append("g", 1, {{G(10), 1}})->admitted);
  // The filter proves mu_B-GDP for the whole run: delta(eps) = delta_B at eps_B.
  ReleaseInput in{.job_id = "g", .payload = "x", .epsilon = eps, .delta_est = delta * 1.001,
                  .tau = 1};
  absl::StatusOr<ReleaseRow> ok = service_->Release(Caller::Insecure(), in);
  ASSERT_THAT(ok, IsOk());
  EXPECT_EQ(ok->verifier, "filter:gdp");
  EXPECT_EQ(ok->guarantee, core::Guarantee::kCertified);
  // Tighter than the budget: not provable for an adaptive run, whatever its realised ledger.
  in.delta_est = delta * 0.5;
  EXPECT_THAT(service_->Release(Caller::Insecure(), in),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
}

}  // namespace
}  // namespace dpledger::server
