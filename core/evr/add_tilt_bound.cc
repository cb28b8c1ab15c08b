#include "core/evr/add_tilt_bound.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "core/mc/largest_coordinate.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

constexpr int kCells = 1000;
constexpr double kHalfWidth = 10;  // cells cover m +- 10 s; the end cells are unbounded
constexpr double kRoundingMargin = 1e-9;

double LogC2(double lambda) {
  return std::log(4.0) + lambda * std::log(lambda) - (lambda + 2) * std::log(lambda + 2);
}

// log phi(theta, lambda) of one step (header (3)-(4)).
double LogPhi(double s, double q, double theta, double lambda) {
  const double s2 = s * s;
  if (q == 1) return theta * theta * s2 + lambda / (2 * s2) - lambda * theta + lambda * lambda / (2 * s2);
  const double m = theta * s2;
  const double log_q = std::log(q), log_1mq = std::log1p(-q);
  const double h = 2 * kHalfWidth * s / kCells;
  double best = -kInf, acc = 0;  // log-sum-exp over cells
  auto add = [&](double v) {
    if (v == -kInf) return;
    if (v > best) {
      acc = acc * std::exp(best - v) + 1;
      best = v;
    } else {
      acc += std::exp(v - best);
    }
  };
  for (int j = 0; j < kCells; ++j) {
    const double lo = j == 0 ? -kInf : m - kHalfWidth * s + j * h;
    const double hi = j + 1 == kCells ? kInf : m - kHalfWidth * s + (j + 1) * h;
    const double x = j == 0 ? hi : lo;  // tangent point inside the cell's closure
    const double u = (2 * x - 1) / (2 * s2);
    const double y = LogAddExp(log_1mq, log_q + u);
    const double dy = std::exp(log_q + u - y) / s2;  // y'(x) in (0, 1/s^2)
    const double a = -lambda * dy;
    const double mass = mc::NormalIntervalMass(lo, hi, m + a * s2, s);
    if (mass > 0) add(-lambda * y + a * (m - x) + a * a * s2 / 2 + std::log(mass));
  }
  return theta * theta * s2 + best + std::log(acc);
}

struct Term {
  double s = 1, q = 1, count = 0;
};

absl::StatusOr<std::vector<Term>> Terms(std::span<const MechanismEvent> ledger) {
  std::vector<Term> terms;
  for (size_t i = 0; i < ledger.size(); ++i) {
    const Mechanism& m = ledger[i].mechanism;
    if (m.kind() != MechanismKind::kGaussian && m.kind() != MechanismKind::kSubsampledGaussian) {
      return absl::UnimplementedError(absl::StrFormat(
          "ledger[%d]: the add-tilt bound covers gaussian and subsampled_gaussian steps only", i));
    }
    terms.push_back({m.normalized_noise(), m.sampling_rate(), static_cast<double>(ledger[i].count)});
  }
  if (terms.empty()) return absl::InvalidArgumentError("ledger must have at least one step");
  return terms;
}

double LogBound(const std::vector<Term>& terms, double epsilon, double mu, double lambda) {
  double v = LogC2(lambda) - lambda * epsilon;
  for (const Term& t : terms) v += t.count * LogPhi(t.s, t.q, mu / (t.s * t.s), lambda);
  return std::isnan(v) ? kInf : v;
}

// Golden section of f on [a, b] (f unimodal); returns {argmin, min}.
template <typename F>
std::pair<double, double> Golden(F f, double a, double b, int iters) {
  const double r = 0.6180339887498949;
  double c = b - r * (b - a), d = a + r * (b - a), fc = f(c), fd = f(d);
  for (int i = 0; i < iters; ++i) {
    if (fc < fd) {
      b = d, d = c, fd = fc, c = b - r * (b - a), fc = f(c);
    } else {
      a = c, c = d, fc = fd, d = a + r * (b - a), fd = f(d);
    }
  }
  return fc < fd ? std::pair{c, fc} : std::pair{d, fd};
}

// min over lambda at a fixed shift: golden section on log lambda in [log 0.05, log 5000].
std::pair<double, double> BestLambda(const std::vector<Term>& terms, double epsilon, double mu) {
  auto [log_l, v] = Golden([&](double ll) { return LogBound(terms, epsilon, mu, std::exp(ll)); },
                           std::log(0.05), std::log(5000.0), 40);
  return {std::exp(log_l), v};
}

}  // namespace

absl::StatusOr<double> AddTiltLogBound(std::span<const MechanismEvent> ledger, double epsilon,
                                       std::span<const double> thetas, double lambda) {
  auto terms = Terms(ledger);
  if (!terms.ok()) return terms.status();
  if (thetas.size() != ledger.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "thetas must have one entry per event (%d), got %d", ledger.size(), thetas.size()));
  }
  if (!(lambda > 0) || !std::isfinite(lambda)) {
    return absl::InvalidArgumentError(absl::StrFormat("lambda must be finite and > 0, got %g", lambda));
  }
  double v = LogC2(lambda) - lambda * epsilon;
  for (size_t i = 0; i < thetas.size(); ++i) {
    if (!(thetas[i] >= 0) || !std::isfinite(thetas[i])) {
      return absl::InvalidArgumentError(
          absl::StrFormat("thetas[%d] must be finite and >= 0, got %g", i, thetas[i]));
    }
    const Term& t = (*terms)[i];
    v += t.count * LogPhi(t.s, t.q, thetas[i], lambda);
  }
  return v + kRoundingMargin;
}

absl::StatusOr<AddTiltChoice> ChooseAddTilt(std::span<const MechanismEvent> ledger,
                                            double epsilon) {
  if (!(epsilon >= 0) || !std::isfinite(epsilon)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("epsilon must be finite and >= 0, got %g", epsilon));
  }
  auto terms = Terms(ledger);
  if (!terms.ok()) return terms.status();
  double s_max = 0;
  for (const Term& t : *terms) s_max = std::max(s_max, t.s);
  // Grid of shifts on [0, s_max], then golden section around the best grid point.
  constexpr int kGrid = 16;
  const double step = s_max / kGrid;
  int best_j = 0;
  double best_v = kInf;
  for (int j = 0; j <= kGrid; ++j) {
    const double v = BestLambda(*terms, epsilon, j * step).second;
    if (v < best_v) best_v = v, best_j = j;
  }
  const double lo = std::max(0.0, (best_j - 1) * step), hi = (best_j + 1) * step;
  auto [mu, v] = Golden([&](double m) { return BestLambda(*terms, epsilon, m).second; }, lo, hi, 20);
  if (best_v < v) mu = best_j * step;
  AddTiltChoice c;
  c.mu = mu;
  for (const Term& t : *terms) c.thetas.push_back(mu / (t.s * t.s));
  c.lambda = BestLambda(*terms, epsilon, mu).first;
  // The returned nu is exactly the public bound at the chosen point.
  auto exact = AddTiltLogBound(ledger, epsilon, c.thetas, c.lambda);
  if (!exact.ok()) return exact.status();
  c.log_nu = *exact;
  return c;
}

}  // namespace dpledger::core
