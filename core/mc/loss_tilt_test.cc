// The loss-tilt estimator of issue 14 (McEstimator::kTiltLoss, mc_loss_tilt_math.h):
// the exact mixture, its normaliser, unbiasedness against closed forms and PLD, and
// the request errors. Statistical checks allow kZ = 5 SE (false-failure rate 6e-7
// each, mc_test_support.h).
#include "core/mc/loss_tilt.h"

#include <cmath>
#include <vector>

#include "core/accountants/pld_accountant.h"
#include "core/mc/mc_estimate.h"
#include "core/mc/mc_test_support.h"
#include "core/util/test_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dpledger::core {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

using mc_test::Estimate;
using mc_test::Event;
using mc_test::kZ;

TEST(LossTiltLogA, ClosedForms) {
  // A_1 = E_Q[p/q] = 1; A_2 = 1 + q^2 (e^{1/s^2} - 1) (the chi-square divergence + 1);
  // plain Gaussian A_alpha = e^{alpha (alpha - 1)/(2 s^2)}.
  EXPECT_NEAR(mc::LossTiltLogA(1.5, 0.03, 1), 0, 1e-15);
  EXPECT_NEAR(mc::LossTiltLogA(1.5, 0.03, 2), std::log1p(0.03 * 0.03 * std::expm1(1 / 2.25)),
              1e-15);
  EXPECT_NEAR(mc::LossTiltLogA(2.0, 1.0, 4.5), 4.5 * 3.5 / 8, 1e-15);
}

TEST(MakeLossTilt, OrderOneComponents) {
  // n = 1: W_0 = (1-q)^2, W_1 = 2 q (1-q), W_2 = q^2 e^{1/s^2}, means 0, 1, 2.
  const double s = 0.8, q = 0.2;
  auto lt = mc::MakeLossTilt(*Mechanism::SubsampledGaussian(s, q), 1, 0);
  ASSERT_TRUE(lt.ok()) << lt.status();
  const double w0 = (1 - q) * (1 - q), w1 = 2 * q * (1 - q), w2 = q * q * std::exp(1 / (s * s));
  const double a = w0 + w1 + w2;
  EXPECT_EQ(lt->num, 3);
  EXPECT_NEAR(lt->log_a, std::log(a), 1e-14);
  EXPECT_NEAR(lt->cum[0], w0 / a, 1e-15);
  EXPECT_NEAR(lt->cum[1], (w0 + w1) / a, 1e-15);
  EXPECT_EQ(lt->cum[2], 1);
}

TEST(MakeLossTilt, RejectsBadOrders) {
  const auto sg = *Mechanism::SubsampledGaussian(1.0, 0.01);
  EXPECT_THAT(mc::MakeLossTilt(sg, 2.5, 3).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("thetas[3]")));
  EXPECT_THAT(mc::MakeLossTilt(sg, -1, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[0, 62]")));
  EXPECT_THAT(mc::MakeLossTilt(sg, 63, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[0, 62]")));
  EXPECT_THAT(mc::MakeLossTilt(*Mechanism::Laplace(1.0), 1, 1).status(),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("laplace")));
  EXPECT_TRUE(mc::MakeLossTilt(*Mechanism::Gaussian(2.0), 2.5, 0).ok());  // q = 1: any real
  EXPECT_TRUE(mc::MakeLossTilt(*Mechanism::Laplace(1.0), 0, 0).ok());
}

TEST(TiltLoss, RequestErrors) {
  McEstimateRequest r{.events = {Event(Mechanism::SubsampledGaussian(1.0, 0.01), 10)},
                      .epsilon = 1, .estimator = McEstimator::kTiltLoss, .seed = 1,
                      .num_samples = 100, .backend = McBackend::kCpu};
  EXPECT_THAT(EstimateDeltaStreaming(r).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("required")));
  r.thetas = {1, 2};
  EXPECT_THAT(EstimateDeltaStreaming(r).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("one entry per event")));
  r.thetas = {1.5};
  EXPECT_THAT(EstimateDeltaStreaming(r).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("integer")));
  r.thetas = {2};
  r.direction = Direction::kAdd;
  EXPECT_THAT(EstimateDeltaStreaming(r).status(),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("remove direction")));
}

TEST(TiltLoss, PureGaussianLedgerMatchesTheClosedForm) {
  // 1200 steps of sigma 70 at eps 3.3 (delta 4.655e-12): the loss tilt of a Gaussian is
  // N(1 + n, s^2); at n = 13 the tilted mean loss c (n + 1/2)/s^2 = 3.31 is near eps
  // (measured: 0.6% relative SE with 1e5 paths, one merged draw per path).
  const double mu = std::sqrt(1200.0) / 70, eps = 3.3;
  const double exact = std::exp(GaussianLogDelta(mu, eps));
  McEstimateRequest r{.events = {Event(Mechanism::Gaussian(70.0), 1200)}, .epsilon = eps,
                      .estimator = McEstimator::kTiltLoss, .thetas = {13}, .seed = 21,
                      .num_samples = 100000, .backend = McBackend::kCpu};
  const McEstimateResult res = Estimate(r);
  EXPECT_NEAR(res.delta_hat, exact, kZ * res.std_error);
  EXPECT_LT(res.std_error, 0.01 * exact);
  EXPECT_THAT(res.thetas, ::testing::ElementsAre(13));
}

TEST(TiltLoss, SubsampledLedgerMatchesPld) {
  // 200 DP-SGD steps (sigma 2, q 0.05) at eps 2.5 plus a Gaussian event and an
  // untilted Laplace step riding along at order 0: PLD's delta 1.0306e-8 (to 1e-5
  // relative). Order 12 minimises the path-weight cap A_13^200 e^{-12 eps} of the
  // subsampled part (measured: 1.7% relative SE and ESS ~3000 with 2e4 paths).
  const std::vector<MechanismEvent> ev = {Event(Mechanism::SubsampledGaussian(2.0, 0.05), 200),
                                          Event(Mechanism::Gaussian(8.0), 3),
                                          Event(Mechanism::Laplace(20.0), 1)};
  PldOptions po;
  SetPldPrecision(1e-4, &po);
  auto pld = CreatePldAccountant(po);
  ASSERT_TRUE(pld.ok());
  for (const MechanismEvent& e : ev) ASSERT_TRUE((*pld)->Compose(e).ok());
  auto ref = (*pld)->DeltaForEpsilon(2.5);
  ASSERT_TRUE(ref.ok()) << ref.status();
  McEstimateRequest r{.events = ev, .epsilon = 2.5, .estimator = McEstimator::kTiltLoss,
                      .thetas = {12, 12, 0}, .seed = 22, .num_samples = 20000,
                      .backend = McBackend::kCpu};
  const McEstimateResult res = Estimate(r);
  EXPECT_GE(res.delta_hat + kZ * res.std_error, ref->lower);
  EXPECT_LE(res.delta_hat - kZ * res.std_error, ref->upper);
  EXPECT_LT(res.std_error, 0.05 * ref->estimate);
  // Bit-identical for any thread count (fixed chunk order).
  r.num_threads = 1;
  EXPECT_EQ(Estimate(r).delta_hat, res.delta_hat);
}

}  // namespace
}  // namespace dpledger::core
