#include "core/accountants/spa_delta.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/accountants/spa_ew2.h"
#include "core/accountants/spa_ma_bound.h"
#include "core/accountants/spa_mills.h"
#include "core/accountants/spa_tilt_solver.h"
#include "core/util/check.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

constexpr double kLog2Pi = 1.8378770664093453;

// The certified caps that do not need the saddle point: (43) and
// delta <= E[(1 - e^{eps - L})^+] <= 1 - e^{eps - ess sup}.
struct Caps {
  double log_cap = 0;  // log of the smallest cap (<= 0)
  double k_abs_error = 0;
  double log_ma_ref = kInf;
};

absl::StatusOr<Caps> UpperCaps(const SpaLedgerCgf& cgf, double epsilon, bool with_ma_ref,
                               double t_start) {
  Caps caps;
  if (std::isfinite(cgf.ess_sup_upper())) {
    caps.log_cap = Log1mExp(epsilon - cgf.ess_sup_upper());
  }
  if (with_ma_ref) {
    absl::StatusOr<MaBoundValue> ma = LogDeltaMaRef(cgf, epsilon, t_start);
    if (!ma.ok()) return ma.status();
    caps.log_ma_ref = ma->value;
    caps.k_abs_error = ma->k_abs_error;
    caps.log_cap = std::min(caps.log_cap, ma->value);
  }
  return caps;
}

}  // namespace

double SpaDeltaPoint::LogSeriesEstimate(SpaEstimator estimator) const {
  if (zero) return -kInf;
  if (!has_saddle) return log_upper;
  switch (estimator) {
    case SpaEstimator::kClt:
      return log_clt;
    case SpaEstimator::kMsd0:
      return log_msd0;
    case SpaEstimator::kMsd1:
      // The factor tends to 11/12 as t0 -> 0 (spa.md 4.2) but the higher-order
      // terms can blow up at large tilts and turn it negative.
      return msd1_factor > 0 ? log_msd0 + std::log(msd1_factor) : -kInf;
    case SpaEstimator::kEw2:
      // Likewise the Edgeworth terms (spa.md 4.4).
      return ew2_factor > 0 ? log_clt + std::log(ew2_factor) : -kInf;
    case SpaEstimator::kIcmlK3: {
      DPL_CHECK(has_icml_k3);
      // Negative as t0 -> 0 (spa.md 4.2: 1 + 3/4 - 10/3) and at large tilts.
      return icml_k3_factor > 0 ? log_msd0 + std::log(icml_k3_factor) : -kInf;
    }
  }
  return log_clt;
}

double SpaDeltaPoint::LogEstimate(SpaEstimator estimator) const {
  const double v = LogSeriesEstimate(estimator);
  return v == -kInf && !zero ? log_clt : v;
}

absl::StatusOr<SpaDeltaPoint> EvaluateSpaDelta(const SpaLedgerCgf& cgf, double epsilon,
                                               const SpaDeltaOptions& options) {
  SpaDeltaPoint p;
  p.epsilon = epsilon;
  p.log_ma_ref = kInf;
  // spa.md 3.2: no saddle point and delta = 0 exactly at or past the ess sup.
  if (epsilon >= cgf.ess_sup_upper()) {
    p.zero = true;
    p.log_lower = p.log_upper = p.log_clt = p.log_msd0 = -kInf;
    return p;
  }
  // spa.md 3.1: K'(t0) = eps + 1/t0 + 1/(1 + t0).
  auto saddle = [epsilon](const SpaCumulants& c) {
    const double t = c.t, u = 1 + t;
    return TiltEquationValue{c.k1 - epsilon - 1 / t - 1 / u, c.k2 + 1 / (t * t) + 1 / (u * u),
                             std::fabs(c.k1) + std::fabs(epsilon) + 1 / t + 1 / u};
  };
  absl::StatusOr<std::optional<double>> t0 = SolveTiltEquation(cgf, saddle, options.t_start);
  if (!t0.ok()) return t0.status();
  absl::StatusOr<SpaCumulants> at =
      t0->has_value() ? cgf.At(**t0) : absl::StatusOr<SpaCumulants>(SpaCumulants{});
  if (!at.ok()) return at.status();

  if (!t0->has_value() || at->degenerate || !(at->k2 > 0)) {
    // Far tail (saddle beyond the cap) or a numerically degenerate tilted law:
    // no SPA estimate, but (43) at its own minimiser (or at the cap) and the
    // ess-sup bound still certify an upper bound.
    const double t_start = t0->has_value() ? **t0 : kSpaMaxTilt;
    absl::StatusOr<Caps> caps = UpperCaps(cgf, epsilon, /*with_ma_ref=*/true, t_start);
    if (!caps.ok()) return caps.status();
    p.t0 = t_start;
    p.log_ma_ref = caps->log_ma_ref;
    p.log_margin = std::log1p(kSpaEta) + caps->k_abs_error;
    p.log_upper = std::min(caps->log_cap + p.log_margin, 0.0);
    p.log_lower = -kInf;
    p.log_clt = p.log_msd0 = p.log_upper;
    p.msd1_factor = p.ew2_factor = 1;
    return p;
  }

  p.has_saddle = true;
  p.t0 = **t0;
  const SpaCumulants& c = *at;
  p.at_t0 = c;
  const double t = p.t0, u = 1 + t;
  const double base = c.k - epsilon * t;  // log of exp(K(t0) - t0 eps)

  // SP-CLT (spa.md 4.3, Appendix B).
  const double s = std::sqrt(c.k2);
  const double gamma = (c.k1 - epsilon) / s;
  p.log_clt = base + LogGaussianThetaMean(t, s, gamma);
  // SP-EW2 (spa.md 4.4): normalised third and fourth cumulants of the tilted law.
  // It is computed whatever the chosen estimator, so a non-finite factor (huge
  // normalised cumulants of a nearly degenerate law) must not fail the query: it
  // becomes "no EW2 estimate" (0), which LogEstimate answers with SP-CLT.
  // (The eps search then reads it as a series below delta: only reachable for
  // normalised cumulants beyond ~1e100, where no estimate means anything.)
  p.ew2_factor = SpaEw2Factor(t, s, gamma, c.k3 / (s * s * s), c.k4 / (c.k2 * c.k2));
  if (!std::isfinite(p.ew2_factor)) p.ew2_factor = 0;

  // err_SP (spa.md 5.1): exp(K - t eps) theta_max(t) 1.12 P_t / K''^{3/2}.
  p.log_err =
      base + LogThetaMax(t) + std::log(kSpaBerryEsseenFactor * c.abs3) - 1.5 * std::log(c.k2);

  // SP-MSD0 and SP-MSD1 (spa.md 4.1-4.2).
  const double phi2 = c.k2 + 1 / (t * t) + 1 / (u * u);
  const double phi3 = c.k3 - 2 / (t * t * t) - 2 / (u * u * u);
  const double phi4 = c.k4 + 6 / (t * t * t * t) + 6 / (u * u * u * u);
  p.log_msd0 = base - std::log(t) - std::log1p(t) - 0.5 * (kLog2Pi + std::log(phi2));
  p.msd1_factor = 1 + phi4 / (8 * phi2 * phi2) - 5 * phi3 * phi3 / (24 * phi2 * phi2 * phi2);
  if (options.with_icml_k3) {
    // ICML k=3 (spa.md 4.2): the whole Bell terms beta_m = (-1)^m B_2m(0, 0,
    // phi3, ..., phi_2m) / (2^m m! phi2^m) for m = 2, 3. B_6 with x1 = x2 = 0 is
    // x6 + 10 x3^2: phi5 (K^(5)) does not enter. A non-finite value (huge
    // cumulants of a nearly degenerate law) is "no estimate", as for SP-EW2.
    absl::StatusOr<SpaCumulants> six = cgf.At(t, CumulantOrder::kSixth);
    if (!six.ok()) return six.status();
    p.at_t0.k5 = six->k5;
    p.at_t0.k6 = six->k6;
    const double t3 = t * t * t, u3 = u * u * u;
    const double phi6 = six->k6 + 120 / (t3 * t3) + 120 / (u3 * u3);
    p.has_icml_k3 = true;
    p.icml_beta2 = phi4 / (8 * phi2 * phi2);
    p.icml_beta3 = -(phi6 + 10 * phi3 * phi3) / (48 * phi2 * phi2 * phi2);
    p.icml_k3_factor = 1 + p.icml_beta2 + p.icml_beta3;
    if (!std::isfinite(p.icml_k3_factor)) p.icml_k3_factor = 0;
  }

  // Certified interval (spa.md 5.2): the factors (1 +- eta) become e^{+-margin},
  // margin = log(1 + eta) + the modelled error of K_tot (which shifts log delta
  // by at most that much).
  absl::StatusOr<Caps> caps = UpperCaps(cgf, epsilon, options.with_ma_ref, t);
  if (!caps.ok()) return caps.status();
  p.log_ma_ref = caps->log_ma_ref;
  const double k_error = std::max(c.k_abs_error, caps->k_abs_error);
  p.log_margin = std::log1p(kSpaEta) + k_error;
  const double log_err_margin = p.log_err + std::log1p(kSpaEtaP);
  const double log_clt_plus = LogAddExp(p.log_clt, log_err_margin);
  // delta <= 1 exactly, so the margin never lifts the bound above 1.
  p.log_upper = std::min(std::min(log_clt_plus, caps->log_cap) + p.log_margin, 0.0);
  p.log_lower = log_err_margin < p.log_clt
                    ? LogSubExp(p.log_clt, log_err_margin) + std::log1p(-kSpaEta) - k_error
                    : -kInf;
  for (double v : {p.log_clt, p.log_err, p.log_msd0, p.msd1_factor, p.log_upper}) {
    if (std::isnan(v) || v == kInf) {
      return absl::InternalError(
          absl::StrFormat("SPA evaluation at eps = %g is not finite (t0 = %g)", epsilon, t));
    }
  }
  return p;
}

}  // namespace dpledger::core
