// delta(eps) by the saddle-point accountant for the composed ledger of ONE
// neighbouring direction (spa.md 3-5): the saddle point t0, the estimates SP-CLT,
// SP-MSD0, SP-MSD1, SP-EW2 (and on request ICML k=3) at t0, the Berry-Esseen error bound err_SP (Theorem 5) and
// the certified interval of spa.md 5.2, capped by the moments-accountant bound (43)
// and by the elementary bound delta <= 1 - e^{eps - ess sup}.
//
// Which numbers are certified: log_lower and log_upper (floating-point margins
// eta and eta_P included). The estimates carry no guarantee.
#pragma once

#include "absl/status/statusor.h"
#include "core/accountants/spa_ledger_cgf.h"

namespace dpledger::core {

enum class SpaEstimator {
  kClt,   // SP-CLT (spa.md 4.3): exact for Gaussian PLRVs; the default (spa.md 4.5)
  kMsd0,  // SP-MSD0 (spa.md 4.1)
  kMsd1,  // SP-MSD0 with the O(1/n) Daniels correction (spa.md 4.2)
  kEw2,   // SP-CLT with the second-order Edgeworth correction (spa.md 4.4)
  // Opt-in, never the default: the authors' ICML code's compute_delta_msd(k = 3),
  // SP-MSD0 * (1 + beta_2 + beta_3) (spa.md 4.2). Needs K_tot^(6) at t0, so only
  // this estimator pays for the sixth-order cumulants. Its factor tends to
  // 1 + 3/4 - 10/3 < 0 as t0 -> 0 (large delta): there it has no estimate.
  kIcmlK3,
};

// Berry-Esseen constant per interval, 2 * 0.56 (Shevtsova 2010; spa.md 5.1, 10 item 8).
inline constexpr double kSpaBerryEsseenFactor = 1.12;
// Floating-point margins of spa.md 5.2: eta on delta, eta_P on P_t. eta is raised
// by the modelled error of K_tot (SpaCumulants::k_abs_error) for very long ledgers.
inline constexpr double kSpaEta = 1e-8;
inline constexpr double kSpaEtaP = 1e-6;

struct SpaDeltaPoint {
  double epsilon = 0;
  // eps >= ess sup of the composed loss: delta = 0 exactly, nothing else is set.
  bool zero = false;
  // false when the saddle point lies beyond kSpaMaxTilt (eps far in the tail) or
  // the tilted law there is numerically degenerate (SpaCumulants::degenerate):
  // then only the upper bound ((43), valid at any tilt, and the ess-sup bound) is
  // available; lower = 0 and every estimate is set to the upper.
  bool has_saddle = false;
  double t0 = 0;
  SpaCumulants at_t0;      // K_tot and derivatives at t0
  double log_clt = 0;      // SP-CLT
  double log_err = 0;      // err_SP (without eta_P)
  double log_msd0 = 0;     // SP-MSD0
  double msd1_factor = 0;  // SP-MSD1 = SP-MSD0 * msd1_factor (may be <= 0)
  double ew2_factor = 0;   // SP-EW2 = SP-CLT * ew2_factor (may be <= 0; spa_ew2.h)
  // ICML k=3 = SP-MSD0 * (1 + icml_beta2 + icml_beta3) (spa.md 4.2; may be <= 0):
  // beta_2 = phi4/(8 phi2^2), beta_3 = -(phi6 + 10 phi3^2)/(48 phi2^3). Set only
  // when SpaDeltaOptions::with_icml_k3 (then at_t0.k5, at_t0.k6 are set too).
  // icml_k3_factor = 1 + icml_beta2 + icml_beta3, or 0 where that is not finite.
  bool has_icml_k3 = false;
  double icml_beta2 = 0, icml_beta3 = 0, icml_k3_factor = 0;
  double log_ma_ref = 0;   // (43) at its minimiser; +inf when not computed
  // log of the margin factor on the upper bound: log(1 + eta) + the modelled
  // error of K_tot (SpaCumulants::k_abs_error); the lower bound uses
  // log(1 - eta) - that error.
  double log_margin = 0;
  double log_lower = 0, log_upper = 0;  // certified
  // log of the chosen estimator's value: -inf where SP-MSD1's, SP-EW2's or ICML
  // k=3's series is not positive (kIcmlK3 requires has_icml_k3 when there is a
  // saddle point: asking for it without is a bug). Continuous in eps (log -> -inf as the factor -> 0+), so the
  // eps search finds the estimator's own first root (spa_epsilon.h).
  double LogSeriesEstimate(SpaEstimator estimator) const;
  // log of the chosen estimate of delta: LogSeriesEstimate, with SP-CLT where that
  // series is not positive (a delta estimate <= 0 is none).
  double LogEstimate(SpaEstimator estimator) const;
};

struct SpaDeltaOptions {
  // Warm start for the saddle solver (e.g. the previous t0 when scanning eps).
  double t_start = 0;
  // Also minimise (43) and cap the upper bound by it (one more tilt solve).
  bool with_ma_ref = true;
  // Also compute the ICML k=3 terms (one more Plrv evaluation per mechanism at
  // t0, with K^(5), K^(6)). Set it when the estimator is kIcmlK3.
  bool with_icml_k3 = false;
};

// Requires a non-empty ledger; eps may be any finite number. Errors: those of
// SpaLedgerCgf::At, INTERNAL when a result is not finite.
absl::StatusOr<SpaDeltaPoint> EvaluateSpaDelta(const SpaLedgerCgf& cgf, double epsilon,
                                               const SpaDeltaOptions& options = {});

}  // namespace dpledger::core
