#include "core/accountants/edgeworth_tail.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/util/test_support.h"

namespace dpledger::core {
namespace {

using ::dpledger::testing::ExpectPrinted;
using ::dpledger::testing::StatusIs;

using ::testing::HasSubstr;

// TV-I (S8): Theorem 4.5 constants, remove direction, and the tail bound at
// m = 1000 for eps = 1 (exactly 1: the bound is capped), 100, 1000; all to the
// printed digits.
TEST(EdgeworthTail, TheoremFourFiveConstantsMatchSpecTvI) {
  struct Row {
    double p, sigma;
    const char* a;
    const char* a_plus;
    const char* eta;
    const char* sigma_a2;
    double tau2;  // exact: mu^2
    const char* tail_100;
    const char* tail_1000;
  };
  const std::vector<Row> rows = {
      {0.01, 0.8, "3.374149745", "3.632896671", "8.358265241e-05", "0.08893308916", 1.5625,
       "0.8975", "3.562e-35"},
      {0.0005, 1, "4.859970003", "5.051160967", "1.071049601e-07", "0.01317802024", 1, "0.573",
       "1.033e-54"},
      {0.05, 1, "2.609996939", "2.92320837", "8.945331208e-04", "0.1134883043", 1, "0.5603",
       "8.261e-55"},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(::testing::Message() << "p=" << r.p << " sigma=" << r.sigma);
    auto c = TheoremFourFiveConstants(r.p, r.sigma);
    ASSERT_TRUE(c.ok()) << c.status();
    ExpectPrinted(c->a, r.a, "a");
    ExpectPrinted(c->a_plus, r.a_plus, "a+");
    ExpectPrinted(c->eta, r.eta, "eta");
    ExpectPrinted(c->sigma_a2, r.sigma_a2, "sigma_A^2");
    EXPECT_NEAR(c->sigma_b2, 1 / (r.sigma * r.sigma), 1e-15);
    EXPECT_NEAR(c->tau2, r.tau2, 1e-15);
    EXPECT_EQ(TheoremFourFiveTail(1, 1000, *c), 1);
    ExpectPrinted(TheoremFourFiveTail(100, 1000, *c), r.tail_100, "tail at eps = 100");
    ExpectPrinted(TheoremFourFiveTail(1000, 1000, *c), r.tail_1000, "tail at eps = 1000");
  }
}

TEST(EdgeworthTail, TruncationVarianceRatioMatchesSpecFigureSix) {
  // S7 (Fig. 6, with the sign fixed) and S4.4: the ratio is below 1, so
  // sigma_B^2 = mu^2.
  struct Row {
    double a;
    const char* ratio;
  };
  for (const Row& r : std::vector<Row>{
           {0.01, "0.252"}, {0.5, "0.120"}, {1, "0.0586"}, {2, "0.0163"}, {3, "0.00565"}}) {
    ExpectPrinted(TruncationVarianceRatio(r.a), r.ratio, "ratio");
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
    double p, mu, m;
    const char* eta;
    double tau2;  // exact for p = 1: (2 mu)^2
    const char* tail;
  };
  const std::vector<Row> rows = {
      {1, 1, 100, "0.3678794411714", 4, "7.930347e-04"},
      {1, 0.1, 1000, "4.837418035960e-03", 0.04, "1.819957e-01"},
      {0.1, 1, 10000, "4.033066085602e-03", 5.011482845872e-02, "1.094741e-03"},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(::testing::Message() << "p=" << r.p << " mu=" << r.mu);
    const LaplaceTailConstants c = PropositionFourNineConstants(r.p, r.mu);
    ExpectPrinted(c.eta, r.eta, "eta");
    // tau^2 = 5.011482845872e-02 is printed to 13 digits; the others are exact.
    EXPECT_NEAR(c.tau2, r.tau2, r.p == 1 ? 1e-15 * r.tau2 : 5e-15);
    ExpectPrinted(PropositionFourNineTail(1.0, r.m, c), r.tail, "tail at eps = 1");
  }
  EXPECT_EQ(PropositionFourNineTail(-1000, 100, PropositionFourNineConstants(1, 1)), 1);
}

}  // namespace
}  // namespace dpledger::core
