#include "core/evr/tilt_moment_bound.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "core/evr/subsampled_gaussian_moments.h"

namespace dpledger::core {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// log c(lambda) = log 4 + lambda log lambda - (lambda + 2) log(lambda + 2); c(0) = 1
// (f^2 <= 1).
double LogC(double lambda) {
  if (lambda == 0) return 0;
  return std::log(4.0) + lambda * std::log(lambda) - (lambda + 2) * std::log(lambda + 2);
}

struct Term {
  GaussianStep step;
  double count = 0;
  double theta = 0;
};

double LogBoundAt(const std::vector<Term>& terms, double epsilon, double lambda) {
  double v = LogC(lambda) - lambda * epsilon;
  for (const Term& t : terms) v += t.count * LogOutputTiltFactor(t.theta, lambda, t.step);
  return std::isnan(v) ? kInf : v;
}

absl::StatusOr<std::vector<GaussianStep>> Steps(std::span<const MechanismEvent> ledger) {
  std::vector<GaussianStep> steps;
  for (size_t i = 0; i < ledger.size(); ++i) {
    const Mechanism& m = ledger[i].mechanism;
    if (m.kind() != MechanismKind::kGaussian && m.kind() != MechanismKind::kSubsampledGaussian) {
      return absl::UnimplementedError(absl::StrFormat(
          "ledger[%d]: the every-coordinate tilt bound covers gaussian and "
          "subsampled_gaussian steps only",
          i));
    }
    steps.push_back(GaussianStep{m.normalized_noise(), m.sampling_rate()});
  }
  return steps;
}

// The bound for fixed tilts: log nu is convex in lambda (log c and each log-factor, a
// log-MGF, are convex; -lambda eps is linear), so the integer scan stops at the first
// increase.
TiltEveryBound Minimise(const std::vector<Term>& terms, double epsilon, int max_lambda) {
  // lambda = 0: nu <= E_P[w] = prod_i (M_i(theta_i) M_i(-theta_i))^count_i (1 at theta = 0).
  TiltEveryBound best{LogBoundAt(terms, epsilon, 0), 0};
  double prev = kInf;
  for (int lambda = 1; lambda <= max_lambda; ++lambda) {
    const double v = LogBoundAt(terms, epsilon, lambda);
    if (v < best.log_nu) best = {v, static_cast<double>(lambda)};
    if (v > prev) break;
    prev = v;
  }
  bool all_plain = true;
  for (const Term& t : terms) all_plain &= t.step.q == 1;
  if (all_plain && best.lambda > 0) {
    // Real lambda: golden section on [lambda - 1, lambda + 1] (convex).
    double a = std::max(best.lambda - 1, 1e-9), b = best.lambda + 1;
    const double g = (std::sqrt(5.0) - 1) / 2;
    for (int it = 0; it < 60; ++it) {
      const double c = b - g * (b - a), d = a + g * (b - a);
      if (LogBoundAt(terms, epsilon, c) < LogBoundAt(terms, epsilon, d)) {
        b = d;
      } else {
        a = c;
      }
    }
    const double l = (a + b) / 2, v = LogBoundAt(terms, epsilon, l);
    if (v < best.log_nu) best = {v, l};
  }
  return best;
}

}  // namespace

absl::StatusOr<TiltEveryBound> TiltEveryMomentBound(std::span<const MechanismEvent> ledger,
                                                    double epsilon,
                                                    std::span<const double> thetas,
                                                    int max_lambda) {
  if (!(epsilon >= 0) || !std::isfinite(epsilon)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("epsilon must be finite and >= 0, got %g", epsilon));
  }
  if (max_lambda < 1) {
    return absl::InvalidArgumentError(absl::StrFormat("max_lambda must be >= 1, got %d", max_lambda));
  }
  if (thetas.size() != ledger.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "thetas must have one entry per ledger event (%d), got %d", ledger.size(), thetas.size()));
  }
  auto steps = Steps(ledger);
  if (!steps.ok()) return steps.status();
  std::vector<Term> terms;
  for (size_t i = 0; i < ledger.size(); ++i) {
    if (!std::isfinite(thetas[i])) {
      return absl::InvalidArgumentError(absl::StrFormat("thetas[%d] must be finite", i));
    }
    terms.push_back(Term{(*steps)[i], static_cast<double>(ledger[i].count), thetas[i]});
  }
  return Minimise(terms, epsilon, max_lambda);
}

absl::StatusOr<TiltEveryChoice> ChooseTiltEvery(std::span<const MechanismEvent> ledger,
                                                double epsilon, int max_lambda,
                                                std::span<const double> extra) {
  auto steps = Steps(ledger);
  if (!steps.ok()) return steps.status();
  auto at = [&](double mu) -> absl::StatusOr<TiltEveryChoice> {
    TiltEveryChoice c;
    c.mu = mu;
    for (const GaussianStep& s : *steps) c.thetas.push_back(mu / (s.sigma * s.sigma));
    auto b = TiltEveryMomentBound(ledger, epsilon, c.thetas, max_lambda);
    if (!b.ok()) return b.status();
    c.bound = *b;
    return c;
  };
  // mu = 0 (SMC) and a geometric grid 1e-4 .. 64 (factor ~1.4).
  std::vector<double> grid = {0};
  for (double mu = 1e-4; mu <= 64; mu *= 1.4) grid.push_back(mu);
  auto best = at(0);
  if (!best.ok()) return best.status();
  size_t best_i = 0;
  for (size_t i = 1; i < grid.size(); ++i) {
    auto c = at(grid[i]);
    if (!c.ok()) return c.status();
    if (c->bound.log_nu < best->bound.log_nu) {
      best = std::move(c);
      best_i = i;
    }
  }
  // Golden section between the best point's neighbours (any mu is valid; this only
  // tightens the bound).
  double a = grid[best_i == 0 ? 0 : best_i - 1];
  double b = grid[std::min(best_i + 1, grid.size() - 1)];
  const double g = (std::sqrt(5.0) - 1) / 2;
  for (int it = 0; it < 30 && b > a; ++it) {
    const double c = b - g * (b - a), d = a + g * (b - a);
    auto vc = at(c), vd = at(d);
    if (!vc.ok()) return vc.status();
    if (!vd.ok()) return vd.status();
    if (vc->bound.log_nu < vd->bound.log_nu) {
      b = d;
      if (vc->bound.log_nu < best->bound.log_nu) best = std::move(vc);
    } else {
      a = c;
      if (vd->bound.log_nu < best->bound.log_nu) best = std::move(vd);
    }
  }
  if (!extra.empty()) {
    auto b = TiltEveryMomentBound(ledger, epsilon, extra, max_lambda);
    if (!b.ok()) return b.status();
    if (b->log_nu < best->bound.log_nu) {
      best->thetas.assign(extra.begin(), extra.end());
      best->mu = std::nan("");
      best->bound = *b;
    }
  }
  return best;
}

absl::StatusOr<LossTiltChoice> ChooseLossTilt(std::span<const MechanismEvent> ledger,
                                              double epsilon, int max_order, int max_lambda) {
  if (!(epsilon >= 0) || !std::isfinite(epsilon)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("epsilon must be finite and >= 0, got %g", epsilon));
  }
  auto steps = Steps(ledger);
  if (!steps.ok()) return steps.status();
  // log nu(n, lambda) = log c(lambda) - lambda eps + sum_i count_i (log A_{n+1} + log A_{lambda-n+1}),
  // convex in lambda: the scan stops at the first increase.
  auto log_nu = [&](int n, int lambda) {
    double v = LogC(lambda) - lambda * epsilon;
    for (size_t i = 0; i < ledger.size(); ++i) {
      v += static_cast<double>(ledger[i].count) *
           (LogA(n + 1, (*steps)[i]) + LogA(lambda - n + 1, (*steps)[i]));
    }
    return std::isnan(v) ? kInf : v;
  };
  LossTiltChoice best{0, {0, 0}};  // order 0, lambda 0: nu <= 1
  for (int n = 0; n <= max_order; ++n) {
    double prev = kInf;
    for (int lambda = std::max(1, n - 1); lambda <= max_lambda; ++lambda) {
      const double v = log_nu(n, lambda);
      if (v < best.bound.log_nu) best = {n, {v, static_cast<double>(lambda)}};
      if (v > prev) break;
      prev = v;
    }
  }
  return best;
}

}  // namespace dpledger::core
