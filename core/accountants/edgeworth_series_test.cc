#include "core/accountants/edgeworth_series.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

// edgeworth.md S8: AEA values reproduce to 1e-9 relative (1e-12 typical).
constexpr double kAeaRelTol = 1e-11;

TEST(EdgeworthSeries, MillsRatioMatchesSpecReferenceValues) {
  // S3.3 reference values (erfcx-based, 17 digits).
  struct Row {
    double z, r;
  };
  for (const Row& row : std::vector<Row>{{0, 1.2533141373155003},
                                         {1, 0.65567954241879847},
                                         {5, 0.19280810471531576},
                                         {10, 0.099028596471731921},
                                         {30, 0.033296419072497213},
                                         {40, 0.024984404205720571}}) {
    EXPECT_NEAR(MillsRatio(row.z), row.r, 1e-15 * row.r) << "z=" << row.z;
  }
}

// TV-D (S8): totals of the remove direction, p = 0.01, sigma = 0.8, m = 1000.
const CumulantTotals kTvDX = {.mean = -0.1671653048184469,
                              .variance = 0.3171046803149026,
                              .c3 = 0.04707668361680861,
                              .c4 = 0.01619816751375452,
                              .c5 = 0.009466433686391241};
const CumulantTotals kTvDY = {.mean = 0.1766525368156466,
                              .variance = 0.3742797721825538,
                              .c3 = 0.06981175061291905,
                              .c4 = 0.03172821603365153,
                              .c5 = 0.02465409656065387};

TEST(EdgeworthSeries, TailsOfEveryOrderMatchSpecTvD) {
  struct Row {
    const CumulantTotals* t;
    double x;
    double tail[4];  // 1 - G_k(x), k = 0..3
  };
  const std::vector<Row> rows = {
      {&kTvDX, 1,
       {1.910130482692848e-02, 2.584480232238281e-02, 2.579884454841402e-02,
        2.545003346754557e-02}},
      {&kTvDX, 3,
       {9.312437704683614e-09, 8.191547351849798e-08, 3.450183265347040e-07,
        9.312489384638331e-07}},
      {&kTvDY, 1,
       {8.918128876040782e-02, 9.582986056103406e-02, 9.344181006465233e-02,
        9.303396575886258e-02}},
  };
  for (const Row& row : rows) {
    for (int k = 0; k <= 3; ++k) {
      EXPECT_NEAR(EdgeworthSf(row.x, *row.t, k), row.tail[k], kAeaRelTol * row.tail[k])
          << "x=" << row.x << " order=" << k;
    }
  }
  // z of the spec's X rows.
  EXPECT_NEAR((1 - kTvDX.mean) / std::sqrt(kTvDX.variance), 2.072674208241853, 1e-14);
}

TEST(EdgeworthSeries, ScaledTailKeepsHugeFactorsAndTinyTailsApart) {
  // e^{700} * Q(40): neither factor is representable in a product of doubles
  // computed naively in that order (e^{710} overflows), the log form is exact.
  const CumulantTotals std_normal = {.mean = 0, .variance = 1};
  const SignedLog t = ScaledEdgeworthTail(40, std_normal, 0, 750, false);
  EXPECT_EQ(t.sign, 1);
  // log Q(40) = log R(40) - 800 - log sqrt(2 pi).
  EXPECT_NEAR(t.log_abs, 750 + std::log(0.024984404205720571) - 800 - 0.91893853320467274,
              1e-12);
}

TEST(EdgeworthSeries, ClampForcesNegativeTailsToZero) {
  // A strongly negatively skewed sum has a negative order-1 upper tail far out.
  const CumulantTotals skewed = {.mean = 0, .variance = 1, .c3 = -1};
  EXPECT_LT(EdgeworthSf(4, skewed, 1), 0);
  EXPECT_EQ(ScaledEdgeworthTail(4, skewed, 1, 0, true).sign, 0);
  // And the lower side above one.
  EXPECT_GT(EdgeworthSf(-4, {.mean = 0, .variance = 1, .c3 = 1}, 1), 1);
  EXPECT_DOUBLE_EQ(ScaledEdgeworthTail(-4, {.mean = 0, .variance = 1, .c3 = 1}, 1, 0, true).value(),
                   1.0);
}

TEST(EdgeworthSeries, ZeroVarianceIsAPointMass) {
  const CumulantTotals point = {.mean = 0.5};
  EXPECT_EQ(EdgeworthSf(0.4, point, 2), 1);
  EXPECT_EQ(EdgeworthSf(0.5, point, 2), 0);
}

}  // namespace
}  // namespace dpledger::core
