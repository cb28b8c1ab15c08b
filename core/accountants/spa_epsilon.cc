#include "core/accountants/spa_epsilon.h"

#include <algorithm>
#include <boost/math/tools/roots.hpp>
#include <cmath>
#include <functional>
#include <vector>

#include "core/accountants/spa_ma_bound.h"
#include "core/util/log_math.h"
#include "core/util/math_policy.h"

namespace dpledger::core {
namespace {

constexpr int kGridPoints = 64;  // spa.md 5.4
// TOMS 748 stops at ~2^-35 = 2.9e-11 relative (spa.md 7 asks for 1e-10).
constexpr int kRootBits = 36;
constexpr boost::uintmax_t kMaxRootIterations = 100;
// Log-space values are clipped to this magnitude for the root finder's
// interpolation (a value of -inf, e.g. "no lower bound", would stall it).
constexpr double kClip = 50;

struct Sample {
  double eps;
  double log_upper, log_lower, log_estimate;
  double t0;  // warm start for the next evaluation (0 when there was no saddle)
};

// One (eps, f(eps)) value seen by the root finder.
struct Seen {
  double eps, f;
};

class Scanner {
 public:
  Scanner(const SpaLedgerCgf& cgf, SpaEstimator estimator) : cgf_(cgf), estimator_(estimator) {}

  absl::StatusOr<Sample> At(double eps) {
    SpaDeltaOptions options;
    options.t_start = t_warm_;
    // (43) is inverted separately (see spa_epsilon.h).
    options.with_ma_ref = false;
    options.with_icml_k3 = estimator_ == SpaEstimator::kIcmlK3;
    absl::StatusOr<SpaDeltaPoint> p = EvaluateSpaDelta(cgf_, eps, options);
    if (!p.ok()) return p.status();
    if (p->has_saddle) t_warm_ = p->t0;
    return Sample{eps, p->log_upper, p->log_lower, p->LogSeriesEstimate(estimator_),
                  p->has_saddle ? p->t0 : 0};
  }

  // Runs TOMS 748 on f(eps) = value(At(eps)) between two samples where f differs
  // in sign; returns every value it saw (callers keep only the ones that certify)
  // and the final bracket.
  absl::Status Refine(const Sample& a_sample, const Sample& b_sample,
                      const std::function<double(const Sample&)>& value, std::vector<Seen>* seen,
                      double* bracket_lo, double* bracket_hi) {
    const double a = a_sample.eps, b = b_sample.eps;
    const double fa = value(a_sample), fb = value(b_sample);
    // The saddle point moves little inside one grid cell.
    if (a_sample.t0 > 0) t_warm_ = a_sample.t0;
    absl::Status status;
    auto f = [&](double eps) {
      if (!status.ok()) return 0.0;
      absl::StatusOr<Sample> s = At(eps);
      if (!s.ok()) {
        status = s.status();
        return 0.0;
      }
      const double v = std::clamp(value(*s), -kClip, kClip);
      seen->push_back({eps, v});
      return v;
    };
    boost::uintmax_t iterations = kMaxRootIterations;
    const std::pair<double, double> r = boost::math::tools::toms748_solve(
        f, a, b, std::clamp(fa, -kClip, kClip), std::clamp(fb, -kClip, kClip),
        boost::math::tools::eps_tolerance<double>(kRootBits), iterations, NoThrowPolicy());
    *bracket_lo = r.first;
    *bracket_hi = r.second;
    return status;
  }

 private:
  const SpaLedgerCgf& cgf_;
  SpaEstimator estimator_;
  double t_warm_ = 0;
};

}  // namespace

absl::StatusOr<SpaEpsilon> SpaEpsilonForDelta(const SpaLedgerCgf& cgf, double delta,
                                              SpaEstimator estimator) {
  const double log_delta = std::log(delta);

  // Upper end from (43): at the minimising tilt t, every eps >= eps_m has
  // MA_ref(eps) e^{margin} <= delta, the margin covering eta and the error of K(t).
  absl::StatusOr<MaBoundValue> ma = EpsilonMaRef(cgf, log_delta - std::log1p(kSpaEta));
  if (!ma.ok()) return ma.status();
  absl::StatusOr<SpaCumulants> at_ma = cgf.At(ma->t);
  if (!at_ma.ok()) return at_ma.status();
  const double log_margin = std::log1p(kSpaEta) + at_ma->k_abs_error;
  double eps_m = (at_ma->k - (log_delta - log_margin) + LogThetaMax(ma->t)) / ma->t;
  eps_m = std::clamp(eps_m, 0.0, cgf.ess_sup_upper());
  if (!(eps_m > 0)) return SpaEpsilon{0, 0, 0};

  // Grid scan up to the first point whose CLT + err bound certifies.
  Scanner scanner(cgf, estimator);
  std::vector<Sample> grid;
  for (int i = 0; i <= kGridPoints; ++i) {
    const double eps = i == kGridPoints ? eps_m : eps_m * i / kGridPoints;
    absl::StatusOr<Sample> s = scanner.At(eps);
    if (!s.ok()) return s.status();
    grid.push_back(*s);
    if (s->log_upper <= log_delta) break;
  }
  const int last = static_cast<int>(grid.size()) - 1;
  auto upper_f = [log_delta](const Sample& s) { return s.log_upper - log_delta; };
  auto lower_f = [log_delta](const Sample& s) { return s.log_lower - log_delta; };
  auto estimate_f = [log_delta](const Sample& s) { return s.log_estimate - log_delta; };
  double lo = 0, hi = 0;

  // Certified upper end.
  SpaEpsilon r;
  r.upper = eps_m;
  if (upper_f(grid[last]) <= 0) {
    r.upper = grid[last].eps;
    if (last > 0) {
      std::vector<Seen> seen;
      absl::Status st = scanner.Refine(grid[last - 1], grid[last], upper_f, &seen, &lo, &hi);
      if (!st.ok()) return st;
      for (const Seen& s : seen) {
        if (s.f <= 0) r.upper = std::min(r.upper, s.eps);
      }
    }
  }

  // Certified lower end: the last grid point whose lower bound still exceeds delta.
  int j = last;
  while (j >= 0 && lower_f(grid[j]) < 0) --j;
  if (j >= 0) {
    r.lower = grid[j].eps;
    if (j < last) {
      std::vector<Seen> seen;
      absl::Status st = scanner.Refine(grid[j], grid[j + 1], lower_f, &seen, &lo, &hi);
      if (!st.ok()) return st;
      for (const Seen& s : seen) {
        if (s.f >= 0) r.lower = std::max(r.lower, s.eps);
      }
    }
  }
  r.lower = std::min(r.lower, r.upper);

  // Estimate: the first crossing of the chosen estimator (spa.md 7, 10 item 13: a
  // non-monotone estimator is handled by taking the first sign change).
  int k = 0;
  while (k <= last && estimate_f(grid[k]) > 0) ++k;
  if (k > last) {
    r.estimate = r.upper;  // the estimate's root lies beyond the certified upper end
  } else if (k == 0) {
    r.estimate = 0;
  } else {
    std::vector<Seen> seen;
    absl::Status st = scanner.Refine(grid[k - 1], grid[k], estimate_f, &seen, &lo, &hi);
    if (!st.ok()) return st;
    r.estimate = 0.5 * (lo + hi);
  }
  // The truth lies in [lower, upper]; an estimate outside it is known to be off.
  r.estimate = std::clamp(r.estimate, r.lower, r.upper);
  return r;
}

}  // namespace dpledger::core
