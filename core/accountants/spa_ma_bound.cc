#include "core/accountants/spa_ma_bound.h"

#include <algorithm>
#include <cmath>

#include "core/accountants/spa_tilt_solver.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

// Evaluates `value(c)` at the solved tilt, or at the cap when the root lies beyond.
template <typename Value>
absl::StatusOr<MaBoundValue> AtSolvedTilt(const SpaLedgerCgf& cgf, const TiltEquation& g,
                                          double t_start, Value value) {
  absl::StatusOr<std::optional<double>> root = SolveTiltEquation(cgf, g, t_start);
  if (!root.ok()) return root.status();
  const double t = root->value_or(kSpaMaxTilt);
  absl::StatusOr<SpaCumulants> c = cgf.At(t);
  if (!c.ok()) return c.status();
  return MaBoundValue{value(*c), t, c->k_abs_error};
}

}  // namespace

double LogThetaMax(double t) { return -std::log1p(t) - t * std::log1p(1 / t); }

absl::StatusOr<MaBoundValue> LogDeltaMaRef(const SpaLedgerCgf& cgf, double epsilon,
                                           double t_start) {
  if (epsilon >= cgf.ess_sup_upper()) return MaBoundValue{-kInf, 0, 0};
  // d/dt [K - t eps + log theta_max(t)] = K' - eps - log1p(1/t)   (44)
  auto g = [epsilon](const SpaCumulants& c) {
    return TiltEquationValue{c.k1 - epsilon - std::log1p(1 / c.t), c.k2 + 1 / (c.t * (c.t + 1)),
                             std::fabs(c.k1) + std::fabs(epsilon) + std::log1p(1 / c.t)};
  };
  return AtSolvedTilt(cgf, g, t_start, [epsilon](const SpaCumulants& c) {
    return c.k - c.t * epsilon + LogThetaMax(c.t);
  });
}

absl::StatusOr<MaBoundValue> EpsilonMa(const SpaLedgerCgf& cgf, double log_delta) {
  const double l = -log_delta;
  // d/dt [(K + L)/t] = 0  <=>  t K' - K - L = 0; the left side has slope t K''.
  auto g = [l](const SpaCumulants& c) {
    return TiltEquationValue{c.t * c.k1 - c.k - l, c.t * c.k2,
                             std::fabs(c.t * c.k1) + std::fabs(c.k) + std::fabs(l), c.k_abs_error};
  };
  absl::StatusOr<MaBoundValue> r =
      AtSolvedTilt(cgf, g, 0, [l](const SpaCumulants& c) { return (c.k + l) / c.t; });
  if (r.ok()) r->value = std::min(r->value, cgf.ess_sup_upper());
  return r;
}

absl::StatusOr<MaBoundValue> EpsilonMaRef(const SpaLedgerCgf& cgf, double log_delta) {
  const double l = -log_delta;
  // F(t) = K + L + log theta_max(t); d/dt [F/t] = 0  <=>  t K' - K + log1p(t) - L = 0.
  auto g = [l](const SpaCumulants& c) {
    return TiltEquationValue{
        c.t * c.k1 - c.k + std::log1p(c.t) - l, c.t * c.k2 + 1 / (1 + c.t),
        std::fabs(c.t * c.k1) + std::fabs(c.k) + std::log1p(c.t) + std::fabs(l), c.k_abs_error};
  };
  absl::StatusOr<MaBoundValue> r = AtSolvedTilt(
      cgf, g, 0, [l](const SpaCumulants& c) { return (c.k + l + LogThetaMax(c.t)) / c.t; });
  if (r.ok()) r->value = std::min(r->value, cgf.ess_sup_upper());
  return r;
}

}  // namespace dpledger::core
