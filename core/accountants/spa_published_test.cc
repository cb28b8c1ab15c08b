// The published setting of the SPA paper (spa.md 8.2-8.3: sigma = 2, q = 0.01,
// remove direction) and the bound-only eps ends of spa.md 9.3-9.4: relative errors
// of every estimator against the authors' truth, the roots of SP-CLT -/+ err_SP,
// the moments-accountant and GDP baselines, and the authors' own bracket.
//
// The spec prints relative errors to 3 significant digits (2 for the roots at
// delta = 1e-5); each is asserted to that precision: |rel - printed| <= half a unit
// in its last digit.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/accountants/analytic_gaussian.h"
#include "core/accountants/spa_delta.h"
#include "core/accountants/spa_epsilon.h"
#include "core/accountants/spa_ledger_cgf.h"
#include "core/accountants/spa_ma_bound.h"
#include "core/plrv/plrv.h"
#include "core/util/log_math.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

// The roots below are refined to this (relative) by bisection; far below any
// printed digit.
constexpr double kRootTol = 1e-13;

SpaLedgerCgf Ledger(double sigma, double q, int64_t n) {
  SpaLedgerCgf cgf(Direction::kRemove);
  cgf.SetLedger(std::vector<MechanismEvent>{{*Mechanism::SubsampledGaussian(sigma, q), n}});
  return cgf;
}

// Half a unit in the last of `digits` significant digits of x.
double HalfUnit(double x, int digits) {
  return 0.5 * std::pow(10.0, std::floor(std::log10(std::fabs(x))) - (digits - 1));
}

// log(SP-CLT + err_SP) at eps: spa.md 5.2's upper bound without the MA_ref cap and
// without the floating-point margins, as the spec's "SP-CLT + err alone" and the
// authors' procedure (spa.md 8.3) take it. The margins matter at the printed
// digits: (1 + eta_P) on err_SP moves the 9.3 roots by 1.3e-7 (err_SP dominates
// there and d log err_SP / d eps = -t0 ~ -7.7), and the spec's 1.3066602 and
// 2.2039114 are the roots without them; the certified code keeps the margins.
double LogCltPlusErr(const SpaLedgerCgf& cgf, double eps) {
  SpaDeltaOptions options;
  options.with_ma_ref = false;
  absl::StatusOr<SpaDeltaPoint> p = EvaluateSpaDelta(cgf, eps, options);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return 0;
  return p->has_saddle ? LogAddExp(p->log_clt, p->log_err) : p->log_upper;
}

// The smallest eps with SP-CLT + err_SP <= delta ("root of CLT+err", spa.md 8.3;
// the first crossing, since the bound need not be monotone, spa.md 5.4): a
// 512-point scan of [0, 2 eps_MA], then bisection of the first sign change.
double RootOfCltPlusErr(const SpaLedgerCgf& cgf, double delta) {
  const double log_delta = std::log(delta);
  absl::StatusOr<MaBoundValue> ma = EpsilonMa(cgf, log_delta);
  EXPECT_TRUE(ma.ok());
  const double hi_end = 2 * ma->value;
  constexpr int kScan = 512;
  double lo = 0, hi = 0;
  for (int i = 1; i <= kScan; ++i) {
    hi = hi_end * i / kScan;
    if (LogCltPlusErr(cgf, hi) <= log_delta) break;
    lo = hi;
  }
  EXPECT_LT(lo, hi_end) << "no crossing below 2 eps_MA";
  while (hi - lo > kRootTol * hi) {
    const double mid = 0.5 * (lo + hi);
    (LogCltPlusErr(cgf, mid) <= log_delta ? hi : lo) = mid;
  }
  return hi;
}

// One row of spa.md 8.3: relative errors (eps - truth)/truth; nullopt where the
// spec prints none for this implementation (ICML k=3 is not implemented).
struct RelRow {
  int64_t n;
  std::optional<double> truth;  // spa.md 8.2 (authors' truth table) when printed
  double msd0, msd1, clt, ew2, root_minus, root_plus;
  std::optional<double> ma;
  double ma_ref;
  std::optional<double> gdp;
};

struct Observed {
  double msd0, msd1, clt, ew2, lower, root_plus, ma, ma_ref, gdp;
};

Observed Observe(double sigma, double q, int64_t n, double delta) {
  SpaLedgerCgf cgf = Ledger(sigma, q, n);
  Observed o{};
  auto estimate = [&](SpaEstimator e) {
    absl::StatusOr<SpaEpsilon> r = SpaEpsilonForDelta(cgf, delta, e);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : SpaEpsilon{};
  };
  const SpaEpsilon clt = estimate(SpaEstimator::kClt);
  o.clt = clt.estimate;
  // The certified lower end is the largest eps with SP-CLT - err_SP >= delta (with
  // margins): the spec's "root of CLT-err".
  o.lower = clt.lower;
  o.msd0 = estimate(SpaEstimator::kMsd0).estimate;
  o.msd1 = estimate(SpaEstimator::kMsd1).estimate;
  o.ew2 = estimate(SpaEstimator::kEw2).estimate;
  o.root_plus = RootOfCltPlusErr(cgf, delta);
  o.ma = EpsilonMa(cgf, std::log(delta))->value;
  o.ma_ref = EpsilonMaRef(cgf, std::log(delta))->value;
  // GDP baseline (spa.md 8.1 row 11): mu = q sqrt(n (e^{1/sigma^2} - 1)).
  const double mu = q * std::sqrt(n * std::expm1(1 / (sigma * sigma)));
  o.gdp = GaussianEpsilon(mu, delta).hi;
  return o;
}

// Asserts each printed relative error, to `digits` significant digits (the two
// roots to `root_digits`). `truth` is known to `truth_rel_tol` relative; that
// uncertainty is added to every column's tolerance.
void ExpectRelErrors(const RelRow& r, const Observed& o, double truth, double truth_rel_tol,
                     int digits, int root_digits) {
  auto check = [&](const char* name, double got, double printed, int d) {
    const double rel = (got - truth) / truth;
    EXPECT_NEAR(rel, printed, HalfUnit(printed, d) + truth_rel_tol * (1 + std::fabs(rel)))
        << name << " eps=" << got;
  };
  check("SP-MSD0", o.msd0, r.msd0, digits);
  check("SP-MSD1", o.msd1, r.msd1, digits);
  check("SP-CLT", o.clt, r.clt, digits);
  check("SP-EW2", o.ew2, r.ew2, digits);
  check("root of CLT-err", o.lower, r.root_minus, root_digits);
  check("root of CLT+err", o.root_plus, r.root_plus, root_digits);
  if (r.ma.has_value()) check("MA (40)", o.ma, *r.ma, digits);
  check("MA_ref (43)", o.ma_ref, r.ma_ref, digits);
  if (r.gdp.has_value()) check("GDP", o.gdp, *r.gdp, digits);
}

TEST(SpaPublished, RelativeErrorsMatchSpecTable83AtDelta1em15) {
  // spa.md 8.3, first table (delta = 1e-15). Truths from spa.md 8.2 where printed
  // (14 digits). For n = 1693, 1887, 2080 the spec prints no truth: it is recovered
  // from the printed SP-CLT error (n = 1693) or SP-EW2 error (1887, 2080), the
  // column with the smallest rounding, whose half unit becomes the truth's
  // tolerance (that column then checks itself and is no test).
  const std::vector<RelRow> rows = {
      {1500, 1.65535347172412, -1.47e-3, +1.72e-2, -1.47e-3, +1.72e-2, -4.61e-2, +7.03e-2, +1.18e-1,
       +3.72e-2, -5.50e-2},
      {1596, 1.70610310977042, -9.41e-5, +5.37e-3, -8.93e-5, +5.39e-3, -2.22e-2, +7.04e-2, +1.16e-1,
       +3.70e-2, -5.33e-2},
      {1693, std::nullopt, -1.48e-5, +2.06e-4, -9.88e-6, +2.06e-4, -1.46e-2, +9.46e-3, +1.15e-1,
       +3.68e-2, -5.18e-2},
      {1887, std::nullopt, -9.04e-6, +1.96e-6, -4.15e-6, +1.64e-6, -1.25e-2, +7.38e-3, +1.13e-1,
       +3.66e-2, -4.91e-2},
      {2080, std::nullopt, -8.58e-6, +3.77e-7, -3.69e-6, +6.01e-8, -1.15e-2, +7.00e-3, +1.12e-1,
       +3.64e-2, -4.67e-2},
      {2951, 2.30904537502705, -7.52e-6, +3.01e-7, -2.63e-6, +4.39e-9, -8.74e-3, +5.84e-3, +1.08e-1,
       +3.57e-2, -3.92e-2},
      {3048, 2.34648478669314, -7.44e-6, +2.99e-7, -2.55e-6, +3.97e-9, -8.54e-3, +5.75e-3, +1.07e-1,
       +3.57e-2, -3.86e-2},
      {4500, 2.85146362350295, -6.67e-6, +2.77e-7, -1.83e-6, +1.29e-9, -6.46e-3, +4.71e-3, +1.03e-1,
       +3.50e-2, -3.17e-2},
  };
  for (const RelRow& r : rows) {
    SCOPED_TRACE("n=" + std::to_string(r.n));
    const Observed o = Observe(2, 0.01, r.n, 1e-15);
    double truth = 0, truth_tol = 0;
    if (r.truth.has_value()) {
      truth = *r.truth;
      truth_tol = 1e-13;  // 14 printed digits; spa.md 8.2: consistent to 1e-12 in delta
    } else if (r.n == 1693) {
      truth = o.clt / (1 + r.clt);
      truth_tol = HalfUnit(r.clt, 3);
    } else {
      truth = o.ew2 / (1 + r.ew2);
      truth_tol = HalfUnit(r.ew2, 3);
    }
    ExpectRelErrors(r, o, truth, truth_tol, 3, 3);
  }
}

TEST(SpaPublished, RelativeErrorsMatchSpecTable83AtDelta1em5) {
  // spa.md 8.3, second table (delta = 1e-5, n = 100, 300, 1600 = 1, 3, 16 epochs):
  // estimators to 3 digits, the roots of CLT -/+ err to 2 (the spec prints them so),
  // MA_ref to 3. The spec prints no MA (40) or GDP column here.
  // At n = 100 and 300 the SP-MSD1 and SP-EW2 entries (-0.68, -0.10) are where those
  // series fall through delta on their way to negative values (factor zero near
  // t0 = 34): mpmath gives SP-MSD1(eps = 0.0609) = 1.0367e-3 and SP-EW2 = -3.701e-3
  // at n = 100, as the code does. The code used to answer SP-CLT's root there (it
  // fell back to SP-CLT once the factor was negative, and its grid stepped over the
  // 5e-5 wide window); it now takes the series' own first root, as the spec does
  // (spa_epsilon.h). Both are far from the truth: few compositions (spa.md 10 item 7).
  const std::vector<RelRow> rows = {
      {100, 0.1897944747, -1.10e-1, -6.79e-1, -1.10e-1, -6.80e-1, -7.5e-1, +5.9e-1, std::nullopt,
       +3.55e-1, std::nullopt},
      {300, 0.3313520174, -6.75e-2, -1.04e-1, -6.75e-2, -1.04e-1, -2.0e-1, +2.8e-1, std::nullopt,
       +1.22e-1, std::nullopt},
      {1600, 0.7986948682, -2.58e-4, +2.98e-5, -5.20e-5, +3.89e-8, -2.3e-2, +1.7e-2, std::nullopt,
       +9.92e-2, std::nullopt},
  };
  for (const RelRow& r : rows) {
    SCOPED_TRACE("n=" + std::to_string(r.n));
    const Observed o = Observe(2, 0.01, r.n, 1e-5);
    // The truths are printed to 10 digits.
    const double truth = *r.truth;
    ExpectRelErrors(r, o, truth, 1e-10 / truth, 3, 2);
    // The certified interval contains the truth.
    SpaLedgerCgf cgf = Ledger(2, 0.01, r.n);
    absl::StatusOr<SpaEpsilon> e = SpaEpsilonForDelta(cgf, 1e-5, SpaEstimator::kClt);
    ASSERT_TRUE(e.ok());
    EXPECT_LE(e->lower, truth);
    EXPECT_GE(e->upper, truth);
  }
}

TEST(SpaPublished, CltPlusErrUpperEndsMatchSpec) {
  // spa.md 9.3 (sigma = 1, q = 0.01, delta = 1e-5) and 9.4 (sigma = 2, n = 1500,
  // delta = 1e-15): where the certified upper end is the MA_ref term, SP-CLT + err
  // alone would give these (8 printed digits).
  struct Row {
    double sigma;
    int64_t n;
    double delta, root;
  };
  for (const Row& r : {Row{1, 100, 1e-5, 1.3066602}, Row{1, 1000, 1e-5, 2.2039114},
                       Row{2, 1500, 1e-15, 1.7716920}}) {
    SpaLedgerCgf cgf = Ledger(r.sigma, 0.01, r.n);
    const double root = RootOfCltPlusErr(cgf, r.delta);
    EXPECT_NEAR(root, r.root, 5e-8) << r.n;
    // ... and the certified upper end is below it (MA_ref is the smaller bound).
    absl::StatusOr<SpaEpsilon> e = SpaEpsilonForDelta(cgf, r.delta, SpaEstimator::kClt);
    ASSERT_TRUE(e.ok());
    EXPECT_LT(e->upper, root) << r.n;
  }
}

TEST(SpaPublished, BracketMatchesOursAndTheAuthors) {
  // spa.md 8.2: at n = 1500 (delta = 1e-15) the spec's bracket is
  // [1.57905, 1.65293, 1.77169] (lower end, SP-CLT, root of CLT + err), the
  // authors' pickle [1.57998, 1.65294, 1.77170]. Ours to the 6 printed digits.
  SpaLedgerCgf cgf = Ledger(2, 0.01, 1500);
  absl::StatusOr<SpaEpsilon> e = SpaEpsilonForDelta(cgf, 1e-15, SpaEstimator::kClt);
  ASSERT_TRUE(e.ok());
  const double root_plus = RootOfCltPlusErr(cgf, 1e-15);
  EXPECT_NEAR(e->lower, 1.57905, 5e-6);
  EXPECT_NEAR(e->estimate, 1.65293, 5e-6);
  EXPECT_NEAR(root_plus, 1.77169, 5e-6);
  // The authors' ends differ by their bounded 1-D minimiser (xatol 1e-5) and their
  // P_t quadrature (spa.md 8.2): 9.3e-4 at the lower end, ~1e-5 at the others.
  EXPECT_NEAR(e->lower, 1.57998, 1e-3);
  EXPECT_NEAR(e->estimate, 1.65294, 2e-5);
  EXPECT_NEAR(root_plus, 1.77170, 2e-5);
}

TEST(SpaPublished, AuthorsTruthTableHasDeltaInsideTheCertifiedInterval) {
  // spa.md 8.2: delta(eps_true) = 1e-15 (to 1e-12) at the authors' truths, so the
  // certified delta interval at each eps_true must contain 1e-15.
  struct Truth {
    int64_t n;
    double eps;
  };
  for (const Truth& t :
       {Truth{1500, 1.65535347172412}, Truth{1596, 1.70610310977042}, Truth{2951, 2.30904537502705},
        Truth{3048, 2.34648478669314}, Truth{4500, 2.85146362350295}}) {
    SpaLedgerCgf cgf = Ledger(2, 0.01, t.n);
    absl::StatusOr<SpaDeltaPoint> p = EvaluateSpaDelta(cgf, t.eps);
    ASSERT_TRUE(p.ok());
    EXPECT_LE(p->log_lower, std::log(1e-15)) << t.n;
    EXPECT_GE(p->log_upper, std::log(1e-15)) << t.n;
  }
}

TEST(SpaPublished, AuthorsCodeAgreesAtEps2) {
  // spa.md 9.4, cross-check with the authors' compute_delta_clt / compute_delta_msd
  // at n = 3000, eps = 2: CLT 1.955397370e-12 (ours 1.955397353e-12), err
  // 6.608482e-13, MSD k=1 1.954468961e-12; "they agree to ~1e-8 relative" (their
  // looser saddle solver), so theirs within 1e-8, ours to the printed digits.
  SpaLedgerCgf cgf = Ledger(2, 0.01, 3000);
  absl::StatusOr<SpaDeltaPoint> p = EvaluateSpaDelta(cgf, 2);
  ASSERT_TRUE(p.ok());
  const double clt = std::exp(p->log_clt), err = std::exp(p->log_err);
  const double msd0 = std::exp(p->log_msd0);
  EXPECT_NEAR(clt, 1.955397353e-12, 5e-22);
  EXPECT_NEAR(clt, 1.955397370e-12, 1e-8 * clt);
  EXPECT_NEAR(msd0, 1.954468961e-12, 1e-8 * msd0);
  // err_SP to 7 digits, widened by the < 2e-7 that the spec's finer P_t grid moves
  // it (spa.md 9.1).
  EXPECT_NEAR(err, 6.608482e-13, 5e-20 + 2e-7 * err);
}

}  // namespace
}  // namespace dpledger::core
