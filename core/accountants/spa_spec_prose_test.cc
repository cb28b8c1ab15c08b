// Numbers that spa.md states in its prose rather than in the tables of sec. 9:
// limits, asymptotics, worked examples and pitfalls, each to the digits printed.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/accountants/spa_delta.h"
#include "core/accountants/spa_ledger_cgf.h"
#include "core/plrv/plrv.h"
#include "core/util/log_math.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

SpaLedgerCgf Ledger(const Mechanism& m, int64_t n) {
  SpaLedgerCgf cgf(Direction::kRemove);
  cgf.SetLedger(std::vector<MechanismEvent>{{m, n}});
  return cgf;
}

TEST(SpaSpecProse, SaddlePointFollowsProposition8) {
  // spa.md 3.3: with eps = n mu1 + r s1 sqrt(n) (mu1 = K_1'(0), s1^2 = K_1''(0)),
  // t0 s1 sqrt(n) -> (r + sqrt(r^2 + 4))/2; for sigma = 2, q = 0.01, r = 2 the ratio
  // to that limit is 1.09 at n = 1e4 and 1.018 at n = 1e7.
  const Mechanism m = *Mechanism::SubsampledGaussian(2, 0.01);
  absl::StatusOr<SpaCumulants> at0 = Ledger(m, 1).At(0);
  ASSERT_TRUE(at0.ok());
  const double mu1 = at0->k1, s1 = std::sqrt(at0->k2), r = 2;
  const double limit = (r + std::sqrt(r * r + 4)) / 2;
  struct Row {
    int64_t n;
    double ratio, half_unit;
  };
  for (const Row& row : {Row{10000, 1.09, 0.005}, Row{10000000, 1.018, 0.0005}}) {
    const double n = static_cast<double>(row.n);
    absl::StatusOr<SpaDeltaPoint> p =
        EvaluateSpaDelta(Ledger(m, row.n), n * mu1 + r * s1 * std::sqrt(n));
    ASSERT_TRUE(p.ok());
    EXPECT_NEAR(p->t0 * s1 * std::sqrt(n) / limit, row.ratio, row.half_unit) << row.n;
  }
}

TEST(SpaSpecProse, Msd1FactorTendsToElevenTwelfthsAsTheTiltVanishes) {
  // spa.md 4.2: as t0 -> 0, beta_2 -> 3/4 and the phi3^2 term -> -5/6, so SP-MSD1's
  // factor -> 11/12. Gaussian mu = 1000 at eps = 0: t0 ~ 2/mu^2 = 2e-6, and the
  // corrections are O(K'' t0^2) = O(4e-6).
  absl::StatusOr<SpaDeltaPoint> p = EvaluateSpaDelta(Ledger(*Mechanism::Gaussian(1), 1000000), 0);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->t0, 2e-6, 1e-8);
  EXPECT_NEAR(p->msd1_factor, 11.0 / 12, 2e-5);
}

TEST(SpaSpecProse, GaussianIntermediateBeta2MatchesSpec) {
  // spa.md 9.2, row sigma = 20, k = 10000, eps = 36 (t0 = 1): beta_2 = phi4/(8 phi2^2)
  // = 1.15646258503401e-3, and the MSD1 factor 1 + 1.09815354713314e-3 is beta_2 minus
  // 5 phi3^2/(24 phi2^3). (beta_3 = -1.98682647662238e-4 and phi6 = 121.875 belong to
  // the ICML orders >= 3, which are not implemented: spa.md 4.2 asks for them only
  // behind a flag.)
  absl::StatusOr<SpaDeltaPoint> p = EvaluateSpaDelta(Ledger(*Mechanism::Gaussian(20), 10000), 36);
  ASSERT_TRUE(p.ok());
  const SpaCumulants& c = p->at_t0;
  const double t = p->t0, u = 1 + t;
  const double phi2 = c.k2 + 1 / (t * t) + 1 / (u * u);
  const double phi3 = c.k3 - 2 / (t * t * t) - 2 / (u * u * u);
  const double phi4 = c.k4 + 6 / (t * t * t * t) + 6 / (u * u * u * u);
  const double beta2 = phi4 / (8 * phi2 * phi2);
  EXPECT_NEAR(beta2, 1.15646258503401e-3, 1e-16);
  EXPECT_NEAR(p->msd1_factor - 1, beta2 - 5 * phi3 * phi3 / (24 * phi2 * phi2 * phi2), 1e-16);
}

TEST(SpaSpecProse, UninformativeIntervalExampleMatchesSpec) {
  // spa.md 5.2: sigma = 1, q = 0.01, n = 100, eps = 1 has truth 6.67e-7, CLT 3.58e-6,
  // err 1.2e-4, MA_ref 5.3e-5: the lower bound is 0 and MA_ref is the upper bound.
  absl::StatusOr<SpaDeltaPoint> p =
      EvaluateSpaDelta(Ledger(*Mechanism::SubsampledGaussian(1, 0.01), 100), 1);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(std::exp(p->log_clt), 3.58e-6, 0.005e-6);
  EXPECT_NEAR(std::exp(p->log_err), 1.2e-4, 0.05e-4);
  EXPECT_NEAR(std::exp(p->log_ma_ref), 5.3e-5, 0.05e-5);
  EXPECT_EQ(p->log_lower, -kInf);
  EXPECT_LE(6.67e-7, std::exp(p->log_upper));
  // The upper bound is MA_ref (with the margin), not CLT + err.
  EXPECT_NEAR(p->log_upper, p->log_ma_ref + p->log_margin, 1e-12);
}

TEST(SpaSpecProse, SingleStepMgfLeavesTheDoubleRangeWhereSpecSays) {
  // spa.md 10 item 1: one subsampled-Gaussian step (q = 0.01) has K > log(DBL_MAX)
  // = 709.78 from t ~ 19.5 at sigma = 0.5 and t ~ 42 at sigma = 1; the cumulants
  // stay finite there because the quadrature works in log space.
  struct Row {
    double sigma, t_cross, tolerance;
  };
  for (const Row& r : {Row{0.5, 19.5, 0.1}, Row{1, 42, 0.5}}) {
    SpaLedgerCgf cgf = Ledger(*Mechanism::SubsampledGaussian(r.sigma, 0.01), 1);
    const double log_max = std::log(std::numeric_limits<double>::max());
    absl::StatusOr<SpaCumulants> below = cgf.At(r.t_cross - r.tolerance);
    absl::StatusOr<SpaCumulants> above = cgf.At(r.t_cross + r.tolerance);
    ASSERT_TRUE(below.ok() && above.ok());
    EXPECT_LT(below->k, log_max) << r.sigma;
    EXPECT_GT(above->k, log_max) << r.sigma;
    EXPECT_TRUE(std::isfinite(above->k1) && above->k2 > 0) << r.sigma;
  }
}

}  // namespace
}  // namespace dpledger::core
