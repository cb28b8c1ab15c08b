#include "core/accountants/edgeworth_tail.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/util/test_support.h"

namespace dpledger::core {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

// TV-I (S8): Theorem 4.5 constants, remove direction, 10 significant digits;
// tail bound at m = 1000 for eps = 1, 100, 1000 (4 digits).
TEST(EdgeworthTail, TheoremFourFiveConstantsMatchSpecTvI) {
  struct Row {
    double p, sigma, a, a_plus, eta, sigma_a2, tau2;
    double tail[3];
  };
  const std::vector<Row> rows = {
      {0.01, 0.8, 3.374149745, 3.632896671, 8.358265241e-05, 0.08893308916, 1.5625,
       {1, 0.8975, 3.562e-35}},
      {0.0005, 1, 4.859970003, 5.051160967, 1.071049601e-07, 0.01317802024, 1, {1, 0.573, 1.033e-54}},
      {0.05, 1, 2.609996939, 2.92320837, 8.945331208e-04, 0.1134883043, 1, {1, 0.5603, 8.261e-55}},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(::testing::Message() << "p=" << r.p << " sigma=" << r.sigma);
    auto c = TheoremFourFiveConstants(r.p, r.sigma);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_NEAR(c->a, r.a, 1e-9 * r.a);
    EXPECT_NEAR(c->a_plus, r.a_plus, 1e-9 * r.a_plus);
    // eta = -E X / 2 at the root: 10 digits of a give ~9 of eta.
    EXPECT_NEAR(c->eta, r.eta, 1e-8 * r.eta);
    EXPECT_NEAR(c->sigma_a2, r.sigma_a2, 1e-9 * r.sigma_a2);
    EXPECT_NEAR(c->sigma_b2, 1 / (r.sigma * r.sigma), 1e-15);
    EXPECT_NEAR(c->tau2, r.tau2, 1e-12);
    const double eps[3] = {1, 100, 1000};
    for (int i = 0; i < 3; ++i) {
      EXPECT_NEAR(TheoremFourFiveTail(eps[i], 1000, *c), r.tail[i], 6e-4 * r.tail[i])
          << "eps=" << eps[i];
    }
  }
}

TEST(EdgeworthTail, TheoremFourFiveRejectsBadInput) {
  EXPECT_THAT(TheoremFourFiveConstants(1.0, 1.0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sampling_rate")));
  EXPECT_THAT(TheoremFourFiveConstants(0.01, -1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sigma")));
}

// TV-H (S8): Proposition 4.9 constants and the tail at eps = 1.
TEST(EdgeworthTail, PropositionFourNineMatchesSpecTvH) {
  struct Row {
    double p, mu, m, eta, tau2, tail;
  };
  const std::vector<Row> rows = {
      {1, 1, 100, 0.3678794411714, 4, 7.930347e-04},
      {1, 0.1, 1000, 4.837418035960e-03, 0.04, 1.819957e-01},
      {0.1, 1, 10000, 4.033066085602e-03, 5.011482845872e-02, 1.094741e-03},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(::testing::Message() << "p=" << r.p << " mu=" << r.mu);
    const LaplaceTailConstants c = PropositionFourNineConstants(r.p, r.mu);
    EXPECT_NEAR(c.eta, r.eta, 1e-12 * r.eta);
    EXPECT_NEAR(c.tau2, r.tau2, 1e-12 * r.tau2);
    EXPECT_NEAR(PropositionFourNineTail(1.0, r.m, c), r.tail, 1e-6 * r.tail);
  }
  EXPECT_EQ(PropositionFourNineTail(-1000, 100, PropositionFourNineConstants(1, 1)), 1);
}

}  // namespace
}  // namespace dpledger::core
