#include "server/metrics.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dpledger::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(Metrics, RpcCountsAndStepTotalsAreExported) {
  Metrics m;
  m.Rpc("AppendSteps", "OK", 0.001);
  m.Rpc("AppendSteps", "OK", 0.002);
  m.Rpc("AppendSteps", "INVALID_ARGUMENT", 0.001);
  m.Update("admitted", 1000);
  m.Update("refused", 7);
  const std::string text = m.Serialize();
  EXPECT_THAT(text, HasSubstr("dpledger_rpc_total{code=\"OK\",method=\"AppendSteps\"} 2"));
  EXPECT_THAT(text, HasSubstr("dpledger_rpc_total{code=\"INVALID_ARGUMENT\",method=\"AppendSteps\"} 1"));
  EXPECT_THAT(text, HasSubstr("dpledger_rpc_seconds_count{code=\"OK\",method=\"AppendSteps\"} 2"));
  EXPECT_THAT(text, HasSubstr(
      "dpledger_rpc_seconds_count{code=\"INVALID_ARGUMENT\",method=\"AppendSteps\"} 1"));
  EXPECT_THAT(text, HasSubstr("dpledger_steps_admitted_total 1000"));
  EXPECT_THAT(text, HasSubstr("dpledger_steps_refused_total 7"));
}

TEST(Metrics, PerJobSeriesAreCapped) {
  Metrics m({.max_job_series = 2});
  m.JobEpsilonSpent("t/a", 0.5);
  m.JobEpsilonSpent("t/b", 0.25);
  m.JobEpsilonSpent("t/c", 0.125);  // over the cap: not labelled
  m.JobEpsilonSpent("t/a", 0.75);   // existing series still update
  const std::string text = m.Serialize();
  EXPECT_THAT(text, HasSubstr("dpledger_job_epsilon_spent{job=\"t/a\"} 0.75"));
  EXPECT_THAT(text, HasSubstr("dpledger_job_epsilon_spent{job=\"t/b\"} 0.25"));
  EXPECT_THAT(text, Not(HasSubstr("t/c")));
  EXPECT_THAT(text, HasSubstr("dpledger_job_series_dropped_total 1"));
}

TEST(Metrics, JobBudgetAndRatioFollowTheSpentSeriesCap) {
  Metrics m({.max_job_series = 1});
  m.JobEpsilon("t/a", 0.5, 2.0);
  m.JobEpsilon("t/b", 1.0, 1.0);  // over the cap: none of its three series
  m.JobEpsilon("t/a", 1.9, 2.0);
  const std::string text = m.Serialize();
  EXPECT_THAT(text, HasSubstr("dpledger_job_epsilon_spent{job=\"t/a\"} 1.9"));
  EXPECT_THAT(text, HasSubstr("dpledger_job_epsilon_budget{job=\"t/a\"} 2"));
  EXPECT_THAT(text, HasSubstr("dpledger_job_epsilon_spent_ratio{job=\"t/a\"} 0.95"));
  EXPECT_THAT(text, Not(HasSubstr("t/b")));
  EXPECT_THAT(text, HasSubstr("dpledger_job_series_dropped_total 1"));
}

TEST(Metrics, RefusalsAreCountedByReasonAndReadinessIsAGauge) {
  Metrics m;
  m.Refusal("budget");
  m.Refusal("budget");
  m.Refusal("uncertified");
  m.SetReady(true);
  m.SetReady(false);
  const std::string text = m.Serialize();
  EXPECT_THAT(text, HasSubstr("dpledger_refusals_total{reason=\"budget\"} 2"));
  EXPECT_THAT(text, HasSubstr("dpledger_refusals_total{reason=\"uncertified\"} 1"));
  EXPECT_THAT(text, HasSubstr("dpledger_ready 0"));
}

}  // namespace
}  // namespace dpledger::server
