#include "core/evr/verifier_arithmetic.h"

#include <cmath>
#include <limits>

#include "core/util/test_support.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

TEST(VerifierArithmetic, MatchesSpecTable95Exactly) {
  // mc-evr.md 9.5: Delta, T, ln(tau/delta_est) to 10 digits; m exact for the listed nu.
  struct Row {
    double delta_est, tau, rho, offset, threshold, log_ratio, nu;
    int64_t m;
  };
  const Row rows[] = {
      {.delta_est = 7.706e-6, .tau = 0.99, .rho = 0.995, .offset = 1.56459063e-8,
       .threshold = 7.768192478e-6, .log_ratio = 11.76346098, .nu = 1.5558e-7, .m = 14952624561},
      {.delta_est = 7.706e-6, .tau = 0.99, .rho = 0.995, .offset = 1.56459063e-8,
       .threshold = 7.768192478e-6, .log_ratio = 11.76346098, .nu = 5.9382436e-10, .m = 57071814},
      {.delta_est = 1e-5, .tau = 0.99, .rho = 0.995, .offset = 2.030353789e-8,
       .threshold = 1.008070656e-5, .log_ratio = 11.50287513, .nu = 1e-9, .m = 55807551},
      {.delta_est = 1e-5, .tau = 0.99, .rho = 0.995, .offset = 2.030353789e-8,
       .threshold = 1.008070656e-5, .log_ratio = 11.50287513, .nu = 1e-5, .m = 558075504206},
      {.delta_est = 1e-10, .tau = 0.9, .rho = 0.95, .offset = 2.339181287e-12,
       .threshold = 1.087719298e-10, .log_ratio = 22.92049041, .nu = 1e-19, .m = 837773},
  };
  for (const Row& r : rows) {
    auto t = ComputeThresholds(r.delta_est, r.tau, r.rho);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_NEAR(t->offset, r.offset, 1e-9 * r.offset);
    EXPECT_NEAR(t->threshold, r.threshold, 1e-9 * r.threshold);
    EXPECT_NEAR(t->log_ratio, r.log_ratio, 1e-9 * r.log_ratio);
    EXPECT_FALSE(t->trivial);
    const SampleCount c = RequiredSamples(r.nu, *t);
    EXPECT_EQ(c.num_samples, r.m) << r.nu;
    EXPECT_FALSE(c.saturated);
    // The count meets the Bennett requirement: exp(-m Delta^2/(2 nu)) <= delta_est/tau.
    EXPECT_LE(BennettLowerTail(c.num_samples, r.nu, t->offset), r.delta_est / r.tau * (1 + 1e-12));
    EXPECT_GT(BennettLowerTail(c.num_samples - 1, r.nu, t->offset) * (1 + 1e-9), r.delta_est / r.tau);
  }
}

TEST(VerifierArithmetic, SmcBoundAtSpecSettingNeedsTwoTimesTenToTheThirteenPaths) {
  // mc-evr.md 9.5 text: with nu = S(2) = 2.285623893e-4, m = 21966882605787 (Fig. 6
  // setting). At 2.2e13 the last unit depends on double rounding of Delta^2, so +-2.
  auto t = ComputeThresholds(7.706e-6, 0.99, 0.995);
  ASSERT_TRUE(t.ok());
  EXPECT_NEAR(static_cast<double>(RequiredSamples(2.285623893e-4, *t).num_samples),
              21966882605787.0, 2.0);
}

TEST(VerifierArithmetic, OffsetGrowsAboutElevenfoldFromTau099To09) {
  // Spec 9.5: Delta at tau = 0.9 is ~11.5x that at 0.99 (default rho), so m is ~130x smaller.
  auto a = ComputeThresholds(1e-6, 0.99, (1 + 0.99) / 2);
  auto b = ComputeThresholds(1e-6, 0.9, (1 + 0.9) / 2);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NEAR(b->offset / a->offset, 11.5, 0.1);
  const double ratio = static_cast<double>(RequiredSamples(1e-9, *a).num_samples) /
                       static_cast<double>(RequiredSamples(1e-9, *b).num_samples);
  EXPECT_NEAR(ratio, 130, 5);
}

TEST(VerifierArithmetic, TrivialWhenDeltaEstOverTauReachesOne) {
  auto t = ComputeThresholds(0.95, 0.9, 0.95);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->trivial);
  EXPECT_LE(t->log_ratio, 0);
  auto u = ComputeThresholds(0.85, 0.9, 0.95);
  ASSERT_TRUE(u.ok());
  EXPECT_FALSE(u->trivial);
}

TEST(VerifierArithmetic, HugeRequirementsSaturateInsteadOfOverflowing) {
  auto t = ComputeThresholds(1e-300, 0.99, 0.995);
  ASSERT_TRUE(t.ok());
  const SampleCount c = RequiredSamples(1e-3, *t);
  EXPECT_TRUE(c.saturated);
  EXPECT_EQ(c.num_samples, kMaxSampleCount);
  // 3e9 > 2^31: 64-bit counts.
  auto u = ComputeThresholds(1e-5, 0.99, 0.995);
  EXPECT_EQ(RequiredSamples(5.4e-8, *u).num_samples, 3013607723);  // python, double
}

TEST(VerifierArithmetic, RejectsBadParametersNamingTheField) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(ComputeThresholds(1e-5, 0, 0.5), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tau")));
  EXPECT_THAT(ComputeThresholds(1e-5, 1.5, 1), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tau")));
  EXPECT_THAT(ComputeThresholds(1e-5, nan, 1), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tau")));
  EXPECT_THAT(ComputeThresholds(1e-5, 0.9, 0.9), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rho")));
  EXPECT_THAT(ComputeThresholds(1e-5, 0.9, 1.1), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rho")));
  EXPECT_THAT(ComputeThresholds(1e-5, 0.9, nan), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rho")));
  // tau = 1 leaves no valid rho.
  EXPECT_THAT(ComputeThresholds(1e-5, 1, 1), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rho")));
  EXPECT_THAT(ComputeThresholds(0, 0.9, 0.95), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("delta_est")));
  EXPECT_THAT(ComputeThresholds(-1e-5, 0.9, 0.95), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("delta_est")));
  EXPECT_THAT(ComputeThresholds(nan, 0.9, 0.95), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("delta_est")));
  EXPECT_THAT(ComputeThresholds(1.5, 0.9, 0.95), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("delta_est")));
}

}  // namespace
}  // namespace dpledger::core
