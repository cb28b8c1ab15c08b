// SP-EW2's building blocks (spa.md 4.4) against 40-digit references, and the
// identities it must keep. The spec's SP-EW2 columns (9.3, 9.4, 9.6) are asserted
// with the other estimators in spa_delta_test.cc and spa_epsilon_test.cc.
#include "core/accountants/spa_ew2.h"

#include <cmath>
#include <vector>

#include "core/accountants/analytic_gaussian.h"
#include "core/accountants/spa_delta.h"
#include "core/accountants/spa_ledger_cgf.h"
#include "core/accountants/spa_mills.h"
#include "core/plrv/plrv.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

// The table (from the composite Gauss-Legendre rule, Taylor steps of at most 1/16),
// the asymptotic series and the recursion are exact to rounding; the recursion for
// x < 0 sums positive terms, so a few ulps per step.
constexpr double kIntegralTol = 1e-14;

TEST(SpaEw2, TiltIntegralsMatch40DigitQuadrature) {
  // I_j(x) e^{-x^2/2 [x < 0]} = int_0^inf v^j e^{-x v - v^2/2} dv (scaled), by
  // mpmath.quad at 40 digits.
  struct Row {
    double x;
    std::vector<double> scaled;
  };
  const std::vector<Row> rows = {
      {-20.0, {2.5066282746310005, 50.13256549262001, 1005.1579381270312, 20203.423893525864,
               407083.95168489837, 8222492.7292720709, 166485274.34386591}},
      {-1.0, {2.1089385292076491, 2.7154691889202825, 4.8244077181279315, 10.255346095968496,
              24.728569250352291, 65.749953634226277, 189.39279988598773}},
      {0.0, {1.2533141373155003, 1.0, 1.2533141373155003, 2.0, 3.7599424119465008, 8.0,
             18.799712059732504}},
      {0.7, {0.77489384877939063, 0.45757430585442656, 0.45459183468129203, 0.5969343274319487,
             0.94592147484151201, 1.7255922773387364, 3.5216927800704446}},
      {0.0625, {1.1931829647319153, 0.92542606470425529, 1.1353438356878994, 1.7798931396780169,
                3.294788185833822, 6.9136482970974536, 16.041837910600519}},
      {3.0625, {0.29928924101087727, 0.083426699404188354, 0.043794974085550438,
                0.03273129067137849, 0.031145344575554689, 0.035542544922877724,
                0.046877679051460418}},
      // Table cell midpoint (the longest Taylor step), the last node, the series.
      {23.9375, {0.041702929273342709, 0.0017361305193588938, 0.00014430496618918895,
                 1.7960910564077067e-5, 2.9756019399720628e-6, 6.1517081822701623e-7,
                 1.5235823855111278e-7}},
      {24.0, {0.041594702232575505, 0.0017271464181878699, 0.00014318819606662714,
              1.7776130776688438e-5, 2.937449559358921e-6, 6.0573368213964721e-7,
              1.4963942544307182e-7}},
      {24.5, {0.040748664706979117, 0.0016577146790116418, 0.00013465507119389367,
              1.6380113772888618e-5, 2.6524261459098781e-6, 5.3601451676245739e-7,
              1.2977506886918433e-7}},
      {2.0, {0.42136922928805447, 0.15726154142389105, 0.10684614644027237, 0.10083078996723737,
             0.11887685938634235, 0.1655694410962648, 0.26324541473918214}},
      {2.5, {0.35426511132979367, 0.11433722167551583, 0.068422057141004084,
             0.057619300498521456, 0.061217920176708614, 0.077432401552314289,
             0.11250859700275735}},
      {9.0, {0.10978728257830829, 0.011914456795225379, 0.0025571714212798809,
             0.00081437079893182964, 0.000342177073453176, 0.00017788953464873458,
             0.00010987955542726876}},
      {150.0, {0.0066663704098677668, 4.4438519834981417e-5, 5.9243462055429228e-7,
               1.1846586818991564e-8, 3.1583881414220091e-10, 1.0525154636120126e-11,
               4.2087529298570593e-13}},
  };
  for (const Row& r : rows) {
    const SpaTiltIntegrals in = SpaTiltIntegralsAt(r.x);
    EXPECT_EQ(in.log_scale, r.x < 0 ? 0.5 * r.x * r.x : 0.0) << r.x;
    for (int j = 0; j <= 6; ++j) {
      EXPECT_NEAR(in.value[j], r.scaled[j], kIntegralTol * r.scaled[j]) << r.x << " j=" << j;
    }
    // I_0 is the Mills ratio.
    EXPECT_NEAR(std::log(in.value[0]) + in.log_scale, LogMillsRatio(r.x),
                kIntegralTol * (1 + std::fabs(LogMillsRatio(r.x))))
        << r.x;
  }
}

TEST(SpaEw2, TiltIntegralsAreContinuousWhereTheMethodSwitches) {
  // Recursion below 0, quadrature from 0 up. I_j moves by -x I_{j+1} ~ 2e-14 here.
  const SpaTiltIntegrals below = SpaTiltIntegralsAt(-1e-15), above = SpaTiltIntegralsAt(0.0);
  for (int j = 0; j <= 6; ++j) {
    EXPECT_NEAR(below.value[j], above.value[j], 1e-13 * above.value[j]) << j;
  }
}

TEST(SpaEw2, TiltIntegralsKeepTheirIdentitiesAcrossTheTable) {
  // Issue 15: x >= 0 is a table with Taylor steps (step 1/8, to 24), then an
  // asymptotic series. Every x on a fine sweep (node, midpoint, both sides of
  // each switch) keeps I_1 = 1 - x I_0 and I_j = (j - 1) I_{j-2} - x I_{j-1}
  // where the recursion does not cancel (x <= 1: every term is O(1)), and is
  // continuous where the method changes (at a cell's midpoint and at x = 24).
  for (double x = 0; x <= 1; x += 1.0 / 64) {
    const SpaTiltIntegrals in = SpaTiltIntegralsAt(x);
    EXPECT_NEAR(in.value[1], 1 - x * in.value[0], 1e-14) << x;
    for (int j = 2; j <= 6; ++j) {
      EXPECT_NEAR(in.value[j], (j - 1) * in.value[j - 2] - x * in.value[j - 1],
                  4e-15 * in.value[j] * j)
          << x << " j=" << j;
    }
  }
  // (I_j moves by I_{j+1}/I_j <= ~2.5 relative per unit x: 2e-14 apart is <= 5e-14.)
  for (double x : {0.0625, 3.0625, 11.9375, 23.9375, 24.0}) {
    const SpaTiltIntegrals below = SpaTiltIntegralsAt(x - 1e-14);
    const SpaTiltIntegrals above = SpaTiltIntegralsAt(x + 1e-14);
    for (int j = 0; j <= 6; ++j) {
      EXPECT_NEAR(below.value[j], above.value[j], 1e-13 * above.value[j]) << x << " j=" << j;
    }
  }
  // I_0 is the Mills ratio (an independent erfc / continued fraction) everywhere.
  for (double x = 0; x < 60; x += 0.37) {
    EXPECT_NEAR(std::log(SpaTiltIntegralsAt(x).value[0]), LogMillsRatio(x), 2e-15 * (1 + x))
        << x;
  }
}

TEST(SpaEw2, TiltPairMatchesTheMillsRatioFunctions) {
  // The bulk curves' pair (issue 15) against spa_mills.h: log R(a) to 1e-14, the gap
  // log(1 - R(a + s)/R(a)) to 3e-12 relative where it comes from the table (gap
  // >= 1e-4) and exactly LogMillsRatioGap's below; and the factor from the pair
  // equals the one from (t, s, gamma) up to that gap's rounding.
  int from_table = 0, from_gap = 0;
  for (double a : {-30.0, -3.0, -0.4, 0.0, 0.3, 2.0, 7.5, 23.99, 24.01, 300.0, 1e5}) {
    for (double s : {1e-7, 1e-3, 0.05, 1.0, 30.0}) {
      const SpaTiltPair p = SpaTiltPairAt(a, s);
      EXPECT_NEAR(p.log_mills_a, LogMillsRatio(a), 1e-14 * (1 + std::fabs(LogMillsRatio(a))))
          << a;
      const double exact = LogMillsRatioGap(a, a + s);
      const double gap = std::exp(exact);  // 1 - R(a + s)/R(a)
      if (gap >= kTiltPairGapMin * 1.01) {
        EXPECT_NEAR(std::expm1(p.log_gap - exact), 0, 3e-12) << a << " " << s;
        ++from_table;
      } else if (gap < kTiltPairGapMin * 0.99) {
        EXPECT_EQ(p.log_gap, exact) << a << " " << s;
        ++from_gap;
      }
      if (a > 0) {
        const double t = 0.7;  // a = t s - gamma
        const double gamma = t * s - a;
        EXPECT_NEAR(SpaEw2Factor(p, gamma, 0.3, 0.1) - 1,
                    SpaEw2Factor(t, s, gamma, 0.3, 0.1) - 1,
                    3e-12 * std::fabs(SpaEw2Factor(t, s, gamma, 0.3, 0.1) - 1) + 1e-300)
            << a << " " << s;
      }
    }
  }
  EXPECT_GT(from_table, 20);
  EXPECT_GT(from_gap, 10);
}

TEST(SpaEw2, VanishingCumulantsGiveSpCltExactly) {
  // l3 = l4 = 0 leaves only I_0: the factor is exactly 1 (spa.md 4.4), for any
  // sign of the Mills-ratio arguments.
  for (double gamma : {-3.0, 0.1, 5.0}) {
    EXPECT_EQ(SpaEw2Factor(2.0, 0.7, gamma, 0, 0), 1) << gamma;
    EXPECT_EQ(SpaEw2Factor(0.01, 30.0, gamma, 0, 0), 1) << gamma;
  }
  // So SP-EW2 is exact for a Gaussian ledger, like SP-CLT (spa.md 4.5).
  SpaLedgerCgf cgf(Direction::kRemove);
  cgf.SetLedger(std::vector<MechanismEvent>{{*Mechanism::Gaussian(5), 100}});
  for (double eps : {6.0, 12.0}) {
    absl::StatusOr<SpaDeltaPoint> p = EvaluateSpaDelta(cgf, eps);
    ASSERT_TRUE(p.ok());
    const double exact = GaussianLogDelta(2, eps);
    EXPECT_NEAR(p->LogEstimate(SpaEstimator::kEw2), exact, 1e-12 * std::fabs(exact)) << eps;
  }
}

}  // namespace
}  // namespace dpledger::core
