// The largest-coordinate estimator of issue 14 (McEstimator::kLargestCoordinate,
// largest_coordinate.h): cell masses, unbiasedness against closed forms, reproducibility
// and the request errors. Statistical checks allow kZ = 5 SE (false-failure rate 6e-7
// each, mc_test_support.h).
#include "core/mc/largest_coordinate.h"

#include <cmath>
#include <vector>

#include "core/mc/mc_estimate.h"
#include "core/mc/mc_test_support.h"
#include "core/util/test_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

using mc_test::Estimate;
using mc_test::Event;
using mc_test::kZ;

TEST(LargestCoordinate, IntervalMassesAreAccurateInBothTails) {
  // Q(5) = 2.866515718791939e-7, Phi(-3) = 1.349898031630095e-3 (closed forms).
  EXPECT_NEAR(mc::NormalIntervalMass(5, INFINITY, 0, 1), 2.866515718791939e-7, 1e-20);
  EXPECT_NEAR(mc::NormalIntervalMass(-INFINITY, -3, 0, 1), 1.349898031630095e-3, 1e-17);
  // Far tail: relative accuracy, not absolute (Q(20) = 2.753624118606233e-89).
  EXPECT_NEAR(mc::NormalIntervalMass(21, INFINITY, 1, 1) / 2.753624118606233e-89, 1, 1e-12);
  EXPECT_NEAR(mc::NormalIntervalMass(-1, 1, 0, 1), 0.6826894921370859, 1e-15);
  // P = (1 - q) N(0, s^2) + q N(1, s^2): the mixture of both.
  EXPECT_NEAR(mc::StepIntervalMass(0, 1, 0.5, 0.25),
              0.75 * (0.9772498680518208 - 0.5) + 0.25 * (0.5 - 0.022750131948179195), 1e-15);
}

McEstimateRequest Request(std::vector<MechanismEvent> events, double eps, int64_t m) {
  McEstimateRequest r;
  r.events = std::move(events);
  r.epsilon = eps;
  r.estimator = McEstimator::kLargestCoordinate;
  // Cells on [2.5, 8] with an increasing rho (any positive rho is unbiased).
  for (int b = 0; b < 56; ++b) {
    r.cell_lower.push_back(2.5 + 0.1 * b);
    r.cell_rho.push_back(1 + b);
  }
  r.seed = 11;
  r.num_samples = m;
  return r;
}

TEST(LargestCoordinate, OneStepIsUnbiasedAgainstTheClosedForm) {
  // One step, s 0.6, q 1e-3: delta(eps) = P_P[t > t*] - e^eps Q(t*/s), t* = 3.436 at
  // eps 1.5 and 2.832 at eps 0.5 (mpmath, 40 digits). The cut 2.5 is below both t*, so
  // no mass is missed and the estimate is unbiased for delta itself.
  for (const auto& [eps, delta] : {std::pair{1.5, 6.700961305871511e-9},
                                   std::pair{0.5, 3.654073010574958e-7}}) {
    const McEstimateResult r =
        Estimate(Request({Event(Mechanism::SubsampledGaussian(0.6, 1e-3), 1)}, eps, 100000));
    EXPECT_NEAR(r.delta_hat, delta, kZ * r.std_error) << eps;
    EXPECT_LT(r.std_error, 0.1 * delta) << eps;  // the proposal covers the tail (4.4% measured)
  }
}

TEST(LargestCoordinate, TenStepsMatchTheSpecReference) {
  // Spec 9.4: s 0.6, q 1e-3, k 10, eps 1.5: ref 6.709313e-8. Two events of the same
  // mechanism are one ledger of 10 steps. The mass missed below the cut 2.5 is at most
  // 4.4e-34 (the Chernoff bound (A) of core/evr/largest_moment_bound.h, numpy), far below
  // the test's resolution.
  const McEstimateResult r =
      Estimate(Request({Event(Mechanism::SubsampledGaussian(0.6, 1e-3), 4),
                        Event(Mechanism::SubsampledGaussian(0.6, 1e-3), 6)},
                       1.5, 100000));
  EXPECT_NEAR(r.delta_hat, 6.709313e-8, kZ * r.std_error + 1e-4 * 6.709313e-8);
  EXPECT_LT(r.std_error, 0.1 * 6.709313e-8);
  EXPECT_EQ(r.backend, "cpu");
}

TEST(LargestCoordinate, ResultDoesNotDependOnThreads) {
  McEstimateRequest r =
      Request({Event(Mechanism::SubsampledGaussian(0.6, 1e-3), 50)}, 1.0, 5000);
  r.num_threads = 1;
  const McEstimateResult one = Estimate(r);
  r.num_threads = 2;
  const McEstimateResult two = Estimate(r);
  EXPECT_EQ(one.delta_hat, two.delta_hat);
  EXPECT_EQ(one.second_moment, two.second_moment);
  EXPECT_GT(one.num_positive, 0);
}

TEST(LargestCoordinate, RequestErrorsNameTheField) {
  auto base = [] {
    return Request({Event(Mechanism::SubsampledGaussian(0.6, 1e-3), 10)}, 1.0, 100);
  };
  McEstimateRequest r = base();
  r.cell_rho.pop_back();
  EXPECT_THAT(EstimateDeltaStreaming(r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cell_rho")));
  r = base();
  r.cell_lower[3] = r.cell_lower[2];
  EXPECT_THAT(EstimateDeltaStreaming(r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cell_lower[3]")));
  r = base();
  r.cell_rho[0] = 0;
  EXPECT_THAT(EstimateDeltaStreaming(r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cell_rho[0]")));
  r = base();
  r.direction = Direction::kAdd;
  EXPECT_THAT(EstimateDeltaStreaming(r), StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("largest")));
  r = base();
  r.events.push_back(Event(Mechanism::SubsampledGaussian(0.7, 1e-3), 1));
  EXPECT_THAT(EstimateDeltaStreaming(r),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("events[1]")));
  r = base();
  r.events = {Event(Mechanism::Gaussian(1.0), 3)};
  EXPECT_THAT(EstimateDeltaStreaming(r), StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("largest")));
  r = base();
  r.num_samples = 1;
  EXPECT_THAT(EstimateDeltaStreaming(r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_samples")));
}

}  // namespace
}  // namespace dpledger::core
