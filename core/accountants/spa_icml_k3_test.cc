// The opt-in ICML k=3 estimator (SpaEstimator::kIcmlK3; spa.md 4.2): SP-MSD0 *
// (1 + beta_2 + beta_3), the authors' compute_delta_msd(eps, n, k = 3). Every
// "ICML k=3" / "ICML-k3" value the spec prints is asserted here: the 9.2 prose
// rows and intermediate betas, the 9.3 and 9.4 delta columns, the 8.3 eps column.
// Also: where the factor is not positive there is no estimate (LogEstimate falls
// back to SP-CLT, the eps search reads the series), and only this estimator pays
// for the sixth-order cumulants.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/accountants/spa_accountant.h"
#include "core/accountants/spa_delta.h"
#include "core/accountants/spa_epsilon.h"
#include "core/accountants/spa_ledger_cgf.h"
#include "core/accountants/spa_ma_bound.h"
#include "core/plrv/plrv.h"
#include "core/util/log_math.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

// spa.md 9.1's suggested tolerance for estimators (the spec prints 12 digits).
constexpr double kEstimateTol = 1e-9;

Mechanism Gauss(double sigma) { return *Mechanism::Gaussian(sigma); }
Mechanism Sg(double sigma, double q) { return *Mechanism::SubsampledGaussian(sigma, q); }

SpaLedgerCgf Ledger(const std::vector<MechanismEvent>& events) {
  SpaLedgerCgf cgf(Direction::kRemove);
  cgf.SetLedger(events);
  return cgf;
}

double Rel(double got, double want) { return std::fabs(got - want) / std::fabs(want); }

SpaDeltaPoint EvaluateWithIcml(const SpaLedgerCgf& cgf, double eps) {
  SpaDeltaOptions options;
  options.with_icml_k3 = true;
  absl::StatusOr<SpaDeltaPoint> p = EvaluateSpaDelta(cgf, eps, options);
  EXPECT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p.ok() && p->has_saddle && p->has_icml_k3);
  return p.ok() ? *p : SpaDeltaPoint{};
}

// The series value SP-MSD0 * (1 + beta_2 + beta_3), sign included.
double IcmlK3Value(const SpaDeltaPoint& p) { return std::exp(p.log_msd0) * p.icml_k3_factor; }

// Asserts the printed value, and what the estimator reports for it: the value
// itself when positive, else no series (-inf) and SP-CLT as the delta estimate.
void ExpectIcmlK3(const SpaDeltaPoint& p, double printed) {
  EXPECT_LT(Rel(IcmlK3Value(p), printed), kEstimateTol) << IcmlK3Value(p);
  if (printed > 0) {
    EXPECT_LT(Rel(std::exp(p.LogEstimate(SpaEstimator::kIcmlK3)), printed), kEstimateTol);
  } else {
    EXPECT_EQ(p.LogSeriesEstimate(SpaEstimator::kIcmlK3), -kInf);
    EXPECT_EQ(p.LogEstimate(SpaEstimator::kIcmlK3), p.log_clt);
  }
}

TEST(SpaIcmlK3, GaussianBetasMatchSpecAtExactSaddle) {
  // spa.md 9.2, row sigma = 20, k = 10000, eps = 36 (t0 = 1, K''' = K6 = 0):
  // phi6 = 120 + 120/2^6 = 121.875, beta_2 = 1.15646258503401e-3,
  // beta_3 = -1.98682647662238e-4.
  SpaLedgerCgf cgf = Ledger({{Gauss(20), 10000}});
  const SpaDeltaPoint p = EvaluateWithIcml(cgf, 36);
  EXPECT_NEAR(p.t0, 1, 1e-13);
  EXPECT_EQ(p.at_t0.k5, 0);
  EXPECT_EQ(p.at_t0.k6, 0);
  EXPECT_NEAR(p.icml_beta2, 1.15646258503401e-3, 1e-16);
  EXPECT_NEAR(p.icml_beta3, -1.98682647662238e-4, 1e-17);
  // ICML k=3 = SP-MSD1 + the phi6 part of beta_3: beta_3 + 5 phi3^2/(24 phi2^3)
  // = -phi6/(48 phi2^3) (spa.md 4.2).
  const double phi2 = 26.25;
  EXPECT_NEAR(p.icml_k3_factor - p.msd1_factor, -121.875 / (48 * phi2 * phi2 * phi2), 1e-16);
}

TEST(SpaIcmlK3, GaussianLargeDeltaRowsMatchSpecAndNegativeHasNoEstimate) {
  // spa.md 9.2 "more rows with large delta": ICML-k3 0.136014019348 (sigma = 1,
  // k = 10, eps = 1) and -0.412242170885 (sigma = 2, k = 100, eps = 2; t0 = 0.085,
  // the factor heads for 1 + 3/4 - 10/3 < 0 as t0 -> 0).
  struct Row {
    double sigma;
    int k;
    double eps, icml_k3;
  };
  for (const Row& r : {Row{1, 10, 1, 0.136014019348}, Row{2, 100, 2, -0.412242170885}}) {
    SCOPED_TRACE(absl::StrFormat("sigma=%g k=%d", r.sigma, r.k));
    SpaLedgerCgf cgf = Ledger({{Gauss(r.sigma), r.k}});
    ExpectIcmlK3(EvaluateWithIcml(cgf, r.eps), r.icml_k3);
  }
}

TEST(SpaIcmlK3, SubsampledGaussianMatchesSpecTables93And94) {
  // spa.md 9.3 (sigma = 1, q = 0.01) and 9.4 (sigma = 2, q = 0.01, n = 3000),
  // column "ICML k=3". 9.3's k = 100, eps = 0.5 entry is negative.
  struct Row {
    double sigma;
    int64_t n;
    double eps, icml_k3;
  };
  const std::vector<Row> rows = {
      {1, 100, 0.5, -2.54765494542e-4},  {1, 100, 1, 8.48937287959e-7},
      {1, 1000, 1, 1.80078920022e-3},    {1, 1000, 2, 5.24976779624e-7},
      {1, 10000, 2, 8.10045235661e-2},   {1, 10000, 4, 2.85367458695e-3},
      {2, 3000, 0.5, 6.77319668192e-3},  {2, 3000, 1, 4.64681751947e-5},
      {2, 3000, 2, 1.95576028618e-12},   {2, 3000, 3, 9.44066448404e-24},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(absl::StrFormat("sigma=%g n=%d eps=%g", r.sigma, r.n, r.eps));
    SpaLedgerCgf cgf = Ledger({{Sg(r.sigma, 0.01), r.n}});
    ExpectIcmlK3(EvaluateWithIcml(cgf, r.eps), r.icml_k3);
  }
}

// Half a unit in the last of `digits` significant digits of x.
double HalfUnit(double x, int digits) {
  return 0.5 * std::pow(10.0, std::floor(std::log10(std::fabs(x))) - (digits - 1));
}

double EpsilonEstimate(const SpaLedgerCgf& cgf, double delta, SpaEstimator estimator) {
  absl::StatusOr<SpaEpsilon> e = SpaEpsilonForDelta(cgf, delta, estimator);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? e->estimate : 0;
}

// The first eps where the ICML k=3 series falls to delta (spa.md 8.3 takes the
// estimators' own roots): a 512-point scan of [0, 2 eps_MA], then bisection to
// 1e-13 relative. A non-positive series counts as below delta, as in
// SpaEpsilonForDelta; unlike it, no clamping into the certified interval.
double IcmlK3SeriesRoot(const SpaLedgerCgf& cgf, double delta) {
  const double log_delta = std::log(delta);
  auto below = [&](double eps) {
    return EvaluateWithIcml(cgf, eps).LogSeriesEstimate(SpaEstimator::kIcmlK3) <= log_delta;
  };
  absl::StatusOr<MaBoundValue> ma = EpsilonMa(cgf, log_delta);
  EXPECT_TRUE(ma.ok());
  const double hi_end = ma.ok() ? 2 * ma->value : 0;
  constexpr int kScan = 512;
  double lo = 0, hi = 0;
  for (int i = 1; i <= kScan; ++i) {
    hi = hi_end * i / kScan;
    if (below(hi)) break;
    lo = hi;
  }
  EXPECT_LT(lo, hi_end) << "no crossing below 2 eps_MA";
  while (hi - lo > 1e-13 * hi) {
    const double mid = 0.5 * (lo + hi);
    (below(mid) ? hi : lo) = mid;
  }
  return hi;
}

TEST(SpaIcmlK3, EpsilonRelativeErrorsMatchSpecTable83) {
  // spa.md 8.3 (sigma = 2, q = 0.01, delta = 1e-15), column "ICML k=3", 3 digits,
  // against the authors' truth (spa.md 8.2, 14 digits). Where the spec prints no
  // truth (n = 1693, 1887, 2080) it is recovered, as in spa_published_test.cc,
  // from the printed SP-CLT error (1693) or SP-EW2 error (1887, 2080), whose half
  // unit widens the tolerance.
  // The column agrees with the code at every n. The prose of spa.md 4.5 ("n >=
  // 2000: errors in eps are ... MSD1/ICML-k3 ~3e-7") does not fit this column for
  // ICML k=3: it is ~3e-8 at n = 2951-4500 (only n = 2080 has -5.75e-7); the
  // table, asserted here, is what the code reproduces.
  struct Row {
    int64_t n;
    std::optional<double> truth;
    double recover_from;  // the printed SP-CLT (1693) or SP-EW2 error
    double icml_k3;
  };
  const std::vector<Row> rows = {
      {1500, 1.65535347172412, 0, -5.60e-2},   {1596, 1.70610310977042, 0, -2.46e-2},
      {1693, std::nullopt, -9.88e-6, -4.51e-3}, {1887, std::nullopt, +1.64e-6, -3.28e-5},
      {2080, std::nullopt, +6.01e-8, -5.75e-7}, {2951, 2.30904537502705, 0, +3.30e-8},
      {3048, 2.34648478669314, 0, +3.24e-8},   {4500, 2.85146362350295, 0, +2.24e-8},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE("n=" + std::to_string(r.n));
    SpaLedgerCgf cgf = Ledger({{Sg(2, 0.01), r.n}});
    double truth = 0, truth_tol = 1e-13;
    if (r.truth.has_value()) {
      truth = *r.truth;
    } else {
      const SpaEstimator from = r.n == 1693 ? SpaEstimator::kClt : SpaEstimator::kEw2;
      truth = EpsilonEstimate(cgf, 1e-15, from) / (1 + r.recover_from);
      truth_tol = HalfUnit(r.recover_from, 3);
    }
    // The spec's column is the series' own root.
    const double root = IcmlK3SeriesRoot(cgf, 1e-15);
    const double rel = (root - truth) / truth;
    EXPECT_NEAR(rel, r.icml_k3, HalfUnit(r.icml_k3, 3) + truth_tol * (1 + std::fabs(rel)));
    // At n = 1500 the root sits just before the series collapses through 0
    // (beta_3 ~ -1 at t0 ~ 32). Independent mpmath (30 digits, own quadrature and
    // saddle solve): ICML k=3 = 1.118e-15 at eps = 1.5625 and -7.29e-17 at
    // 1.5635, so the root is at rel -5.60e-2 as printed.
    // The accountant's estimate is that root clamped into the certified interval
    // (spa_epsilon.h). At n = 1500 and 1596 the root (-5.60e-2, -2.46e-2) lies
    // below the certified lower end (spa.md 8.3 "root of CLT-err": -4.61e-2,
    // -2.22e-2), so the reported estimate is that lower end.
    absl::StatusOr<SpaEpsilon> e = SpaEpsilonForDelta(cgf, 1e-15, SpaEstimator::kIcmlK3);
    ASSERT_TRUE(e.ok());
    EXPECT_NEAR(e->estimate, std::clamp(root, e->lower, e->upper), 1e-9 * root);
    if (r.n <= 1596) {
      EXPECT_LT(root, e->lower);
    }
  }
}

TEST(SpaIcmlK3, OnlyTheIcmlEstimatorEvaluatesSixthOrderCumulants) {
  // The default query leaves K5, K6 unset and makes the same Plrv calls as
  // before; asking for ICML k=3 costs one more call per distinct mechanism at t0.
  const std::vector<MechanismEvent> ledger = {{Sg(1, 0.01), 500}, {Sg(2, 0.02), 1000},
                                              {Gauss(10), 20}};
  SpaLedgerCgf plain = Ledger(ledger), icml = Ledger(ledger);
  absl::StatusOr<SpaDeltaPoint> p = EvaluateSpaDelta(plain, 1);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->has_icml_k3);
  EXPECT_EQ(p->at_t0.k6, 0);
  const SpaDeltaPoint q = EvaluateWithIcml(icml, 1);
  EXPECT_EQ(icml.tilt_evaluations(), plain.tilt_evaluations() + plain.num_distinct());
  // Everything else is bit-identical.
  EXPECT_EQ(q.t0, p->t0);
  EXPECT_EQ(q.log_clt, p->log_clt);
  EXPECT_EQ(q.log_upper, p->log_upper);
  EXPECT_EQ(q.msd1_factor, p->msd1_factor);
  // The composed K6 is the count-weighted sum of the per-mechanism ones.
  double k6 = 0;
  for (const MechanismEvent& e : ledger) {
    absl::StatusOr<TiltedMoments> m =
        MakePlrv(e.mechanism, Direction::kRemove)->TiltedUpTo(q.t0, CumulantOrder::kSixth);
    ASSERT_TRUE(m.ok());
    k6 += static_cast<double>(e.count) * m->k6;
  }
  EXPECT_NEAR(q.at_t0.k6, k6, 1e-14 * std::fabs(k6));
}

TEST(SpaIcmlK3, AccountantReportsSpCltWhereTheFactorIsNegative) {
  // sigma = 2, k = 100 Gaussian at eps = 2: ICML k=3 is -0.412 (spa.md 9.2), no
  // estimate; the accountant answers SP-CLT (exact here, 0.968348980291), and the
  // certified bounds do not depend on the estimator.
  SpaOptions icml_options;
  icml_options.estimator = SpaEstimator::kIcmlK3;
  absl::StatusOr<std::unique_ptr<Accountant>> icml = CreateSpaAccountant(icml_options);
  absl::StatusOr<std::unique_ptr<Accountant>> clt = CreateSpaAccountant();
  ASSERT_TRUE(icml.ok());
  ASSERT_TRUE(clt.ok());
  for (Accountant* a : {icml->get(), clt->get()}) {
    ASSERT_TRUE(a->Compose(Gauss(2), 100).ok());
  }
  absl::StatusOr<DeltaBound> d = (*icml)->DeltaForEpsilon(2);
  absl::StatusOr<DeltaBound> d_clt = (*clt)->DeltaForEpsilon(2);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE(d_clt.ok());
  EXPECT_LT(Rel(d->estimate, 0.968348980291), kEstimateTol);
  EXPECT_EQ(d->lower, d_clt->lower);
  EXPECT_EQ(d->upper, d_clt->upper);
  // Where the factor is positive the accountant reports the ICML value,
  // clamped into the certified interval: sigma = 1, k = 10, eps = 1 gives
  // 0.136014019348 (spa.md 9.2), far below the exact 0.818517815513.
  SpaOptions options;
  options.estimator = SpaEstimator::kIcmlK3;
  absl::StatusOr<std::unique_ptr<Accountant>> b = CreateSpaAccountant(options);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE((*b)->Compose(Gauss(1), 10).ok());
  absl::StatusOr<DeltaBound> e = (*b)->DeltaForEpsilon(1);
  ASSERT_TRUE(e.ok());
  EXPECT_LE(e->lower, 0.818517815513);
  EXPECT_GE(e->upper, 0.818517815513);
  EXPECT_NEAR(e->estimate, std::clamp(0.136014019348, e->lower, e->upper), 1e-12);
}

TEST(SpaIcmlK3, AccountantEpsilonUsesTheIcmlRoot) {
  // Through the accountant (both directions, the larger reported): n = 2951,
  // delta = 1e-15 gives the spa.md 8.3 ICML k=3 error +3.30e-8 against the
  // authors' truth 2.30904537502705, inside the certified interval.
  SpaOptions options;
  options.estimator = SpaEstimator::kIcmlK3;
  options.conditioning = SpaConditioning::kOff;  // the published estimator
  absl::StatusOr<std::unique_ptr<Accountant>> a = CreateSpaAccountant(options);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE((*a)->Compose(Sg(2, 0.01), 2951).ok());
  absl::StatusOr<EpsilonBound> e = (*a)->EpsilonForDelta(1e-15);
  ASSERT_TRUE(e.ok()) << e.status();
  const double truth = 2.30904537502705;
  EXPECT_NEAR((e->estimate - truth) / truth, 3.30e-8, HalfUnit(3.30e-8, 3) + 1e-13);
  EXPECT_LE(e->lower, truth);
  EXPECT_GE(e->upper, truth);
}

}  // namespace
}  // namespace dpledger::core
