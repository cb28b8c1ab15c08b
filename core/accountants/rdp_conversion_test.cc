#include "core/accountants/rdp_conversion.h"

#include <cmath>
#include <vector>

#include "core/util/test_support.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

std::vector<double> GaussianCurve(const std::vector<double>& orders, double mu) {
  std::vector<double> rdp;
  for (double a : orders) rdp.push_back(a * mu * mu / 2);
  return rdp;
}

TEST(RdpConversion, DefaultGridCoversFineLowAndSparseHighOrders) {
  const std::vector<double> orders = DefaultRdpOrders();
  EXPECT_EQ(orders.size(), 219u);
  EXPECT_DOUBLE_EQ(orders.front(), 1.01);
  EXPECT_DOUBLE_EQ(orders[98], 1.99);
  EXPECT_DOUBLE_EQ(orders.back(), 1e4);
  for (size_t i = 1; i < orders.size(); ++i) EXPECT_LT(orders[i - 1], orders[i]);
  EXPECT_TRUE(ValidateRdpOrders(orders).ok());
}

TEST(RdpConversion, SingleOrderIsTheImprovedFormula) {
  // alpha = 2, rho = 1: eps = 1 + log(1/2) - (log delta + log 2), below the
  // classical 1 - log delta; delta for eps = 3: e^{rho - eps} (1/2)^2 / 1.
  const std::vector<double> orders = {2.0}, rdp = {1.0};
  auto e = RdpToEpsilon(orders, rdp, 1e-5);
  ASSERT_TRUE(e.ok());
  EXPECT_NEAR(e->value, 1 + std::log(0.5) - std::log(1e-5) - std::log(2.0), 1e-14);
  EXPECT_EQ(e->order, 2.0);
  auto d = RdpToLogDelta(orders, rdp, 3.0);
  ASSERT_TRUE(d.ok());
  EXPECT_NEAR(d->value, -2 + 2 * std::log(0.5), 1e-14);
}

TEST(RdpConversion, GaussianCurveMatchesMpmath) {
  // mpmath (30 digits): min over DefaultRdpOrders() of
  // a mu^2/2 + log1p(-1/a) - (log delta + log a)/(a - 1).
  struct Case {
    double mu, delta, eps;
  };
  const std::vector<double> orders = DefaultRdpOrders();
  for (const Case& c : {Case{0.5, 1e-5, 2.1658783256384501}, Case{0.5, 1e-10, 3.2441069201789857},
                        Case{1.0, 1e-5, 4.7289242762560273}, Case{1.0, 1e-10, 6.8393526808821255},
                        Case{2.0, 1e-5, 10.725284317042941}, Case{2.0, 1e-10, 14.871407381714284},
                        Case{10.0, 1e-5, 96.035593874887883},
                        Case{10.0, 1e-10, 116.18823209579778}}) {
    auto e = RdpToEpsilon(orders, GaussianCurve(orders, c.mu), c.delta);
    ASSERT_TRUE(e.ok());
    EXPECT_NEAR(e->value, c.eps, 1e-13 * c.eps) << c.mu << " " << c.delta;
  }
}

TEST(RdpConversion, DeltaAndEpsilonAreInverse) {
  const std::vector<double> orders = DefaultRdpOrders();
  const std::vector<double> rdp = GaussianCurve(orders, 0.7);
  for (double delta : {1e-3, 1e-5, 1e-15, 1e-100, 1e-300}) {
    auto e = RdpToEpsilon(orders, rdp, delta);
    ASSERT_TRUE(e.ok());
    auto d = RdpToLogDelta(orders, rdp, e->value);
    ASSERT_TRUE(d.ok());
    EXPECT_NEAR(d->value, std::log(delta), 1e-9 * std::fabs(std::log(delta))) << delta;
    EXPECT_EQ(d->order, e->order);
  }
}

TEST(RdpConversion, TinyDeltaGivesFiniteGrowingEpsilon) {
  const std::vector<double> orders = DefaultRdpOrders();
  const std::vector<double> rdp = GaussianCurve(orders, 0.1);
  double prev = 0;
  for (double delta : {1e-5, 1e-15, 1e-100, 1e-300}) {
    auto e = RdpToEpsilon(orders, rdp, delta);
    ASSERT_TRUE(e.ok());
    EXPECT_TRUE(std::isfinite(e->value));
    EXPECT_GT(e->value, prev);
    prev = e->value;
  }
  // At delta = 1e-300 the optimum alpha ~ sqrt(2 log(1/delta))/mu ~ 372 is inside the grid.
  EXPECT_LT(prev, 0.1 * std::sqrt(2 * 690.8) + 0.5);
}

TEST(RdpConversion, ResultsAreClampedToValidRanges) {
  const std::vector<double> orders = {2.0, 10.0};
  // A tiny curve: the formula goes negative, (0, delta)-DP holds.
  auto e = RdpToEpsilon(orders, std::vector<double>{1e-12, 5e-12}, 0.5);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->value, 0);
  // A huge curve: delta is capped at 1.
  auto d = RdpToLogDelta(orders, std::vector<double>{100, 500}, 0.0);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->value, 0);
}

TEST(RdpConversion, InfiniteOrdersAreSkippedAndAllInfiniteIsAnError) {
  const std::vector<double> orders = {2.0, 1000.0};
  const double inf = std::numeric_limits<double>::infinity();
  auto e = RdpToEpsilon(orders, std::vector<double>{1.0, inf}, 1e-5);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->order, 2.0);
  EXPECT_THAT(RdpToEpsilon(orders, std::vector<double>{inf, inf}, 1e-5),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("infinite")));
  EXPECT_THAT(RdpToLogDelta(orders, std::vector<double>{inf, inf}, 1.0),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("infinite")));
}

TEST(RdpConversion, BadOrdersAreRejected) {
  EXPECT_THAT(ValidateRdpOrders(std::vector<double>{}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("orders")));
  for (double bad : {1.0, 0.0, -3.0, 1e6, std::nan("")}) {
    EXPECT_THAT(ValidateRdpOrders(std::vector<double>{2.0, bad}),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("orders")));
  }
}

}  // namespace
}  // namespace dpledger::core
