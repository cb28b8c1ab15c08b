#include "core/accountants/pld_plan.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "absl/strings/str_format.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

// K, K', K'' of approximate DP's finite part: atoms +-eps with masses
// (1 - delta)/(1 + e^{-+eps}) (the randomized-response pair of core/plrv).
LedgerCgf ApproxDpCgf(const Mechanism& m, double t) {
  const double eps = m.epsilon();
  const double l1md = std::log1p(-m.delta());
  const double a = l1md - std::log1p(std::exp(-eps)) + t * eps;  // loss +eps
  const double b = l1md - std::log1p(std::exp(eps)) - t * eps;   // loss -eps
  LedgerCgf r;
  r.k = LogAddExp(a, b);
  const double pa = std::exp(a - r.k), pb = std::exp(b - r.k);
  r.k1 = eps * (pa - pb);
  r.k2 = 4 * eps * eps * pa * pb;
  return r;
}

}  // namespace

absl::StatusOr<LedgerCgf> LedgerCgfAt(std::span<const MechanismEvent> events, Direction direction,
                                      double t) {
  LedgerCgf total;
  for (const MechanismEvent& e : events) {
    LedgerCgf one;
    if (e.mechanism.kind() == MechanismKind::kApproxDp) {
      one = ApproxDpCgf(e.mechanism, t);
    } else {
      absl::StatusOr<TiltedMoments> m = MakePlrv(e.mechanism, direction)->Tilted(t);
      if (!m.ok()) return m.status();
      one = {m->k, m->k1, m->k2};
    }
    if (!std::isfinite(one.k) || !std::isfinite(one.k1) || !std::isfinite(one.k2)) {
      return absl::OutOfRangeError(absl::StrFormat(
          "cumulant generating function of %s is not finite at tilt %g",
          e.mechanism.ToSpec(), t));
    }
    const double c = static_cast<double>(e.count);
    total.k += c * one.k;
    total.k1 += c * one.k1;
    total.k2 += c * std::max(one.k2, 0.0);
  }
  return total;
}

namespace {

double NumSteps(std::span<const MechanismEvent> events) {
  double n = 0;
  for (const MechanismEvent& e : events) n += static_cast<double>(e.count);
  return n;
}

// Saddle-point estimate of log delta at eps = K'(t), t >= 0.
double LogDeltaEstimate(const LedgerCgf& c, double t) {
  const double pref = t * (t + 1) * std::sqrt(2 * std::numbers::pi * std::max(c.k2, 1e-300));
  return c.k - t * c.k1 - std::log(std::max(1.0, pref));
}

// The plan at `raw_tilt`, rounded by QuantizeTilt unless that moves the tilted
// centre by more than 1.5 tilted standard deviations (steep CGFs, e.g. the
// subsampled Gaussian where "every step sampled" takes over).
absl::StatusOr<PldPlan> Finish(std::span<const MechanismEvent> events, Direction direction,
                               double raw_tilt) {
  absl::StatusOr<LedgerCgf> raw = LedgerCgfAt(events, direction, raw_tilt);
  if (!raw.ok()) return raw.status();
  double tilt = QuantizeTilt(raw_tilt);
  absl::StatusOr<LedgerCgf> c = LedgerCgfAt(events, direction, tilt);
  if (!c.ok()) return c.status();
  if (std::fabs(c->k1 - raw->k1) > 1.5 * std::sqrt(c->k2)) {
    tilt = raw_tilt;
    c = raw;
  }
  PldPlan p;
  p.tilt = tilt;
  p.center = c->k1;
  p.sd = std::sqrt(c->k2);
  p.log_delta_ref = LogDeltaEstimate(*c, tilt);
  p.num_steps = NumSteps(events);
  absl::StatusOr<LedgerCgf> c0 = LedgerCgfAt(events, direction, 0);
  if (!c0.ok()) return c0.status();
  p.sd0 = std::sqrt(c0->k2);
  return p;
}

// Bisection for the root of a monotone function of the tilt on [0, kMaxTilt];
// `above(t)` says whether t is still below the root.
template <typename F>
absl::StatusOr<double> SolveTilt(F above) {
  double lo = 0, hi = 1;
  while (true) {
    absl::StatusOr<bool> a = above(hi);
    if (!a.ok()) return a.status();
    if (!*a) break;
    lo = hi;
    hi *= 2;
    if (hi > kMaxTilt) return kMaxTilt;
  }
  for (int it = 0; it < 60 && hi - lo > 1e-6 * hi; ++it) {
    const double mid = 0.5 * (lo + hi);
    absl::StatusOr<bool> a = above(mid);
    if (!a.ok()) return a.status();
    (*a ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace

absl::StatusOr<PldPlan> PlanForEpsilon(std::span<const MechanismEvent> events, Direction direction,
                                       double epsilon) {
  absl::StatusOr<LedgerCgf> c0 = LedgerCgfAt(events, direction, 0);
  if (!c0.ok()) return c0.status();
  double tilt = 0;
  if (epsilon > c0->k1) {
    absl::StatusOr<double> t = SolveTilt([&](double t) -> absl::StatusOr<bool> {
      absl::StatusOr<LedgerCgf> c = LedgerCgfAt(events, direction, t);
      if (!c.ok()) return c.status();
      return c->k1 < epsilon;
    });
    if (!t.ok()) return t.status();
    tilt = *t;
  }
  return Finish(events, direction, tilt);
}

absl::StatusOr<PldPlan> PlanForDelta(std::span<const MechanismEvent> events, Direction direction,
                                     double delta) {
  const double log_delta = std::log(delta);
  absl::StatusOr<double> t = SolveTilt([&](double t) -> absl::StatusOr<bool> {
    absl::StatusOr<LedgerCgf> c = LedgerCgfAt(events, direction, t);
    if (!c.ok()) return c.status();
    return LogDeltaEstimate(*c, t) > log_delta;
  });
  if (!t.ok()) return t.status();
  return Finish(events, direction, *t);
}

absl::StatusOr<PldPlan> PlanAtTilt(std::span<const MechanismEvent> events, Direction direction,
                                   double tilt) {
  absl::StatusOr<LedgerCgf> c = LedgerCgfAt(events, direction, tilt);
  if (!c.ok()) return c.status();
  absl::StatusOr<LedgerCgf> c0 = LedgerCgfAt(events, direction, 0);
  if (!c0.ok()) return c0.status();
  PldPlan p;
  p.tilt = tilt;
  p.center = c->k1;
  p.sd = std::sqrt(c->k2);
  p.log_delta_ref = LogDeltaEstimate(*c, tilt);
  p.num_steps = NumSteps(events);
  p.sd0 = std::sqrt(c0->k2);
  return p;
}

double QuantizeTilt(double tilt) {
  if (tilt < 0.05) return 0;
  return std::exp2(std::round(8 * std::log2(tilt)) / 8);
}

double ChooseStep(const PldPlan& plan, double epsilon_error, bool tilted) {
  const double n = std::max(plan.num_steps, 1.0);
  double h = std::sqrt(8 * epsilon_error / (n * (1 + plan.tilt)));
  // Resolve the composed law itself, whatever the error budget allows. Epsilon
  // queries resolve the wider of its untilted spread and its tilted one (what the FFT
  // composes, where delta(epsilon) gets its mass): the tilted one is far wider for
  // short ledgers of rare sampled steps (sigma = 1, q = 1e-3, one step: 0.0013
  // untilted, ~0.3 tilted at delta = 1e-9, where the untilted one asked for 2^-14
  // nats and a 4e-6 wide interval against a 5e-4 target). Delta queries keep the
  // untilted spread: at a tilt that is not yet centred, a grid that coarse ends
  // their refinement early (10 steps of sigma = 1, q = 1e-3 at epsilon 2: 3.2% wide
  // for a 1% target).
  const double spread = tilted ? std::max(plan.sd0, plan.sd) : plan.sd0;
  if (spread > 0) h = std::min(h, spread / 16);
  h = std::min(h, 0.25);
  return std::exp2(std::floor(std::log2(h)));
}

}  // namespace dpledger::core
