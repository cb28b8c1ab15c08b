#include "core/evr/add_moment_bound.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

constexpr double kZMax = 12;          // grid on |z| <= 12 (z = o / s)
constexpr int kCells = 240000;        // cell width 1e-4
constexpr double kRoundingSlack = 1e-9;  // per-step log slack for erfc-difference rounding

// log Q(z < -kZMax) <= log(phi(kZMax)/kZMax) (Mills' ratio).
double LogTail() { return -0.5 * kZMax * kZMax - std::log(kZMax * std::sqrt(2 * M_PI)); }

// Standard normal mass of [a, b], without cancellation.
double CellMass(double a, double b) {
  if (a >= 0) return 0.5 * (std::erfc(a / M_SQRT2) - std::erfc(b / M_SQRT2));
  return 0.5 * (std::erfc(-b / M_SQRT2) - std::erfc(-a / M_SQRT2));
}

// One subsampled step on the grid: log cell masses and y at the left ends.
struct Grid {
  std::vector<double> log_mass, y;
  double y_last = 0, log_1mq = 0;
};

Grid MakeGrid(const GaussianStep& s) {
  Grid g;
  g.log_1mq = std::log1p(-s.q);
  const double h = 2 * kZMax / kCells, log_q = std::log(s.q);
  g.log_mass.resize(kCells);
  g.y.resize(kCells);
  for (int j = 0; j < kCells; ++j) {
    const double a = -kZMax + j * h, b = j + 1 == kCells ? kZMax : -kZMax + (j + 1) * h;
    g.log_mass[j] = std::log(CellMass(a, b));
    g.y[j] = LogAddExp(g.log_1mq, log_q + (2 * s.sigma * a - 1) / (2 * s.sigma * s.sigma));
  }
  g.y_last = LogAddExp(g.log_1mq, log_q + (2 * s.sigma * kZMax - 1) / (2 * s.sigma * s.sigma));
  return g;
}

double LogBFromGrid(double lambda, const Grid& g) {
  // Every term is <= e^{-lambda log(1-q)}: factor it out so the sum cannot overflow.
  const double top = -lambda * g.log_1mq;
  double sum = std::exp(LogTail()) + std::exp(LogTail() - lambda * g.y_last - top);
  for (size_t j = 0; j < g.y.size(); ++j) sum += std::exp(g.log_mass[j] - lambda * g.y[j] - top);
  return top + std::log(sum) + kRoundingSlack;
}

double LogC(double lambda) {
  return std::log(4.0) + lambda * std::log(lambda) - (lambda + 2) * std::log(lambda + 2);
}

}  // namespace

double LogAddMgfUpper(double lambda, const GaussianStep& step) {
  if (step.q >= 1) return 0.5 * lambda * (lambda + 1) / (step.sigma * step.sigma);
  return LogBFromGrid(lambda, MakeGrid(step));
}

absl::StatusOr<MomentBound> AddSmcMomentBound(std::span<const MechanismEvent> ledger,
                                              double epsilon, int max_lambda) {
  if (!(epsilon >= 0) || !std::isfinite(epsilon)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("epsilon must be finite and >= 0, got %g", epsilon));
  }
  if (max_lambda < 1) {
    return absl::InvalidArgumentError(absl::StrFormat("max_lambda must be >= 1, got %d", max_lambda));
  }
  struct Term {
    GaussianStep step;
    double count;
    Grid grid;  // subsampled steps only
  };
  std::vector<Term> terms;
  int distinct = 0;
  for (size_t i = 0; i < ledger.size(); ++i) {
    const Mechanism& m = ledger[i].mechanism;
    if (m.kind() != MechanismKind::kGaussian && m.kind() != MechanismKind::kSubsampledGaussian) {
      return absl::UnimplementedError(absl::StrFormat(
          "ledger[%d]: the add-direction moment bound covers gaussian and subsampled_gaussian "
          "steps only",
          i));
    }
    const GaussianStep step{m.normalized_noise(), m.sampling_rate()};
    bool merged = false;  // equal steps share one grid
    for (Term& t : terms) {
      if (t.step.sigma == step.sigma && t.step.q == step.q) {
        t.count += static_cast<double>(ledger[i].count);
        merged = true;
        break;
      }
    }
    if (merged) continue;
    if (step.q < 1 && ++distinct > kMaxDistinctSteps) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "the add-direction moment bound takes at most %d distinct subsampled steps",
          kMaxDistinctSteps));
    }
    Term t{step, static_cast<double>(ledger[i].count), {}};
    if (t.step.q < 1) t.grid = MakeGrid(t.step);
    terms.push_back(std::move(t));
  }
  auto log_nu = [&](int lambda) {
    double v = LogC(lambda) - lambda * epsilon;
    for (const Term& t : terms) {
      v += t.count * (t.step.q < 1 ? LogBFromGrid(lambda, t.grid)
                                   : LogAddMgfUpper(lambda, t.step));
    }
    return std::isnan(v) ? kInf : v;
  };
  // Convex in lambda (log c and each log-sum-exp of linear functions are): bisect on the
  // sign of the forward difference for the integer minimum.
  int lo = 1, hi = max_lambda;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (log_nu(mid + 1) < log_nu(mid)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  MomentBound best;  // lambda 0: E[x^2] <= 1
  const double v = log_nu(lo);
  if (v < best.log_value) best = {v, static_cast<double>(lo)};
  return best;
}

}  // namespace dpledger::core
