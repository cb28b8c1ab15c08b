#include "core/evr/is_moment_bound.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

// Per-grid-point evaluation of log G_ub = min_lambda sum_e n_e log r_e(lambda, x_e) -
// lambda eps. log Phi((x_e - j)/s_e) is computed lazily and shared across orders.
class PointEvaluator {
 public:
  PointEvaluator(size_t num_groups, int max_lambda) : log_phi_(num_groups), filled_(num_groups) {
    for (auto& v : log_phi_) v.resize(max_lambda + 2);
  }
  void Reset(std::span<const double> xs) {
    xs_ = xs;
    std::fill(filled_.begin(), filled_.end(), 0);
  }
  double LogR(size_t e, int lambda, const GaussianStep& step) {
    auto& v = log_phi_[e];
    for (int& f = filled_[e]; f <= lambda + 1; ++f) {
      v[f] = LogNormalCdf((xs_[e] - f) / step.sigma);
    }
    return LogRFromLogPhi(lambda, std::span<const double>(v.data(), lambda + 2), step);
  }

 private:
  std::vector<std::vector<double>> log_phi_;
  std::vector<int> filled_;
  std::span<const double> xs_;
};

}  // namespace

absl::StatusOr<IsMomentBoundCalculator> IsMomentBoundCalculator::Create(
    std::span<const MechanismEvent> ledger, double epsilon, const IsBoundOptions& options) {
  if (!(epsilon >= 0) || !std::isfinite(epsilon)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("epsilon must be finite and >= 0, got %g", epsilon));
  }
  if (ledger.empty()) return absl::InvalidArgumentError("ledger must not be empty");
  if (options.num_cells < 1 || options.max_lambda < 0 || options.smc_max_lambda < 1) {
    return absl::InvalidArgumentError("IsBoundOptions: num_cells, max_lambda, smc_max_lambda");
  }
  IsMomentBoundCalculator c;
  c.ledger_.assign(ledger.begin(), ledger.end());
  c.epsilon_ = epsilon;
  c.options_ = options;
  for (const MechanismEvent& e : ledger) {
    const Mechanism& m = e.mechanism;
    if (m.kind() != MechanismKind::kGaussian && m.kind() != MechanismKind::kSubsampledGaussian) {
      return absl::UnimplementedError(absl::StrFormat(
          "importance sampling applies to Gaussian and subsampled Gaussian steps only, got '%s'",
          m.ToSpec()));
    }
    c.steps_.push_back(GaussianStep{m.normalized_noise(), m.sampling_rate()});
    c.num_steps_ += static_cast<double>(e.count);
  }
  auto mgf = LedgerMgf::Create(ledger);
  if (!mgf.ok()) return mgf.status();
  c.log_s2_ = SmcMomentBound(*mgf, epsilon, 2, options.smc_max_lambda).log_value;
  for (double a : options.holder_a) {
    if (!(a > 1)) {
      return absl::InvalidArgumentError(absl::StrFormat("holder_a must be > 1, got %g", a));
    }
    c.log_s_holder_.push_back(SmcMomentBound(*mgf, epsilon, 2 * a, options.smc_max_lambda).log_value);
  }
  // G <= Pr[y >= eps] <= min(1, min_lambda M_Y(lambda) e^{-lambda eps}) (Chernoff).
  c.log_g_inf_ = 0;
  for (int lambda = 1; lambda <= options.smc_max_lambda; ++lambda) {
    c.log_g_inf_ = std::min(c.log_g_inf_, mgf->LogMgf(lambda) - lambda * epsilon);
  }

  c.homogeneous_ = std::all_of(c.steps_.begin(), c.steps_.end(), [&](const GaussianStep& s) {
    return s.sigma == c.steps_[0].sigma && s.q == c.steps_[0].q;
  });
  if (c.homogeneous_) {
    // One step type: G on a grid uniform in t does not depend on theta (spec 4.7.3).
    const GaussianStep& step = c.steps_[0];
    const double theta_ref = options.s_max * core::ThetaH(epsilon, step);
    std::tie(c.x_lo_, c.x_hi_) = c.XRange(step, theta_ref);
    std::vector<Group> groups = {
        {step, c.num_steps_, theta_ref, LogMgfP(theta_ref, step)}};
    c.ComputeGrid(groups, options.num_cells, &c.homogeneous_log_g_);
  }
  return c;
}

std::pair<double, double> IsMomentBoundCalculator::XRange(const GaussianStep& step,
                                                          double theta) const {
  double b_max = 1;
  for (double a : options_.holder_a) b_max = std::max(b_max, a / (a - 1));
  const double s = step.sigma;
  const double x_lo = -(10 * s + 2) - b_max * theta * s * s;
  const double x_hi = std::max(ThresholdPoint(epsilon_, step), 1.0) + 40 * s + 10;
  return {x_lo, x_hi};
}

std::vector<double> IsMomentBoundCalculator::ThetaH() const {
  std::vector<double> out;
  for (const GaussianStep& s : steps_) out.push_back(core::ThetaH(epsilon_, s));
  return out;
}

std::vector<IsMomentBoundCalculator::Group> IsMomentBoundCalculator::MakeGroups(
    std::span<const double> thetas) const {
  std::vector<Group> groups;
  for (size_t i = 0; i < steps_.size(); ++i) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
      return g.step.sigma == steps_[i].sigma && g.step.q == steps_[i].q && g.theta == thetas[i];
    });
    if (it != groups.end()) {
      it->count += static_cast<double>(ledger_[i].count);
    } else {
      groups.push_back({steps_[i], static_cast<double>(ledger_[i].count), thetas[i],
                        LogMgfP(thetas[i], steps_[i])});
    }
  }
  return groups;
}

IsMomentBoundCalculator::GridValues IsMomentBoundCalculator::ComputeGrid(
    const std::vector<Group>& groups, int num_cells, std::vector<double>* storage) const {
  // z = theta_e x - log M_e maps each group's t-range into z; cover them all.
  double z_lo = kInf, z_hi = -kInf;
  for (const Group& g : groups) {
    const auto [x_lo, x_hi] = XRange(g.step, g.theta);
    z_lo = std::min(z_lo, g.theta * x_lo - g.log_mgf);
    z_hi = std::max(z_hi, g.theta * x_hi - g.log_mgf);
  }
  const int n = num_cells;
  const double h = (z_hi - z_lo) / n;
  storage->assign(n + 1, 0.0);
  PointEvaluator eval(groups.size(), options_.max_lambda);
  std::vector<double> xs(groups.size());
  int lambda = 0;  // warm start: the optimal order moves slowly along the grid
  for (int j = 0; j <= n; ++j) {
    const double z = z_lo + j * h;
    for (size_t e = 0; e < groups.size(); ++e) {
      xs[e] = (z + groups[e].log_mgf) / groups[e].theta;
    }
    eval.Reset(xs);
    // g(lambda) is convex in lambda (a sum of log-MGFs of sub-probability measures
    // minus a linear term), so a local integer minimum is the global one.
    auto g = [&](int l) {
      double v = -l * epsilon_;
      for (size_t e = 0; e < groups.size(); ++e) v += groups[e].count * eval.LogR(e, l, groups[e].step);
      return v;
    };
    double best = g(lambda);
    int dir = 0;
    if (lambda < options_.max_lambda) {
      const double up = g(lambda + 1);
      if (up < best) { best = up; lambda += 1; dir = 1; }
    }
    if (dir == 0 && lambda > 0) {
      const double down = g(lambda - 1);
      if (down < best) { best = down; lambda -= 1; dir = -1; }
    }
    while (dir != 0) {
      const int next = lambda + dir;
      if (next < 0 || next > options_.max_lambda) break;
      const double v = g(next);
      if (!(v < best)) break;
      best = v;
      lambda = next;
    }
    (*storage)[j] = std::min(best, log_g_inf_);
  }
  return GridValues{z_lo, h, *storage};
}

double IsMomentBoundCalculator::LogI(double b, const std::vector<Group>& groups,
                                     const GridValues& grid) const {
  const int n = static_cast<int>(grid.log_g.size()) - 1;
  const double log_cell = std::log(-std::expm1(-b * grid.h));
  auto left_tail = [&](double z) {
    double best = kInf;
    for (const Group& g : groups) {
      const double x = (z + g.log_mgf) / g.theta;
      best = std::min(best, b * g.log_mgf + LogLeftTailF(x, b * g.theta, g.step));
    }
    return best;
  };
  // Cells above the cut [z_{j-1}, z_j] use G(z_j) (G is non-decreasing); the right tail
  // is G_inf e^{-b z_n}; the left tail below the cut is closed-form. Every cut gives an
  // upper bound; take the smallest among a few thousand cuts.
  const int stride = std::max(1, n / 2000);
  double suffix = log_g_inf_ - b * (grid.z_lo + n * grid.h);
  double best = kInf;
  for (int j = n; j >= 0; --j) {
    if (j % stride == 0 || j == n) {
      best = std::min(best, LogAddExp(left_tail(grid.z_lo + j * grid.h), suffix));
    }
    if (j > 0) {
      suffix = LogAddExp(suffix, grid.log_g[j] - b * (grid.z_lo + (j - 1) * grid.h) + log_cell);
    }
  }
  return best;
}

absl::StatusOr<IsMomentBound> IsMomentBoundCalculator::Bound(std::span<const double> thetas) const {
  return BoundWithCells(thetas, options_.num_cells);
}

absl::StatusOr<IsMomentBound> IsMomentBoundCalculator::BoundWithCells(std::span<const double> thetas,
                                                                      int num_cells) const {
  if (thetas.size() != ledger_.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "thetas must have one entry per ledger event (%d), got %d", ledger_.size(), thetas.size()));
  }
  for (double t : thetas) {
    if (!(t > 0) || !std::isfinite(t)) {
      return absl::InvalidArgumentError(absl::StrFormat("theta must be finite and > 0, got %g", t));
    }
  }
  const std::vector<Group> groups = MakeGroups(thetas);
  std::vector<double> storage;
  GridValues grid;
  if (homogeneous_ && groups.size() == 1) {
    const Group& g = groups[0];
    const double hx = (x_hi_ - x_lo_) / options_.num_cells;
    grid = GridValues{g.theta * x_lo_ - g.log_mgf, g.theta * hx, homogeneous_log_g_};
  } else {
    grid = ComputeGrid(groups, num_cells, &storage);
  }
  const double log_k = std::log(num_steps_);
  IsMomentBound best;
  best.candidates.emplace_back("max (b=1)", log_k + LogI(1, groups, grid));
  for (size_t i = 0; i < options_.holder_a.size(); ++i) {
    const double a = options_.holder_a[i], b = a / (a - 1);
    best.candidates.emplace_back(absl::StrFormat("hoelder a=%g", a),
                                 log_k + log_s_holder_[i] / a + LogI(b, groups, grid) / b);
  }
  if (groups.size() == 1) {
    // Jensen bound (paper Lemma 20 / Thm E.3 with eps/q, [fix] P4; needs theta s^2 >= 1,
    // [fix] P18).
    const Group& g = groups[0];
    const double p = g.theta * g.step.sigma * g.step.sigma;
    if (p >= 1) {
      best.candidates.emplace_back(
          "jensen", g.log_mgf - p * std::log1p(epsilon_ / (g.step.q * num_steps_)) -
                        g.theta / 2 + log_s2_);
    }
  }
  best.log_nu = kInf;
  for (const auto& [method, v] : best.candidates) {
    if (v < best.log_nu) {
      best.log_nu = v;
      best.method = method;
    }
  }
  return best;
}

IsTiltChoice IsMomentBoundCalculator::ChooseTilt() const {
  const std::vector<double> theta_h = ThetaH();
  // One step type: the t-grid is cached, so the search uses the full grid. Several: a
  // coarser grid during the search (any grid gives a valid bound), full grid at the end.
  const int search_cells = homogeneous_ ? options_.num_cells : std::max(500, options_.num_cells / 8);
  const int points = std::max(2, homogeneous_ ? options_.search_points
                                              : options_.heterogeneous_search_points);
  const int refine =
      homogeneous_ ? options_.refine_iterations : options_.heterogeneous_refine_iterations;
  auto evaluate = [&](double s) {
    std::vector<double> thetas(theta_h.size());
    for (size_t i = 0; i < thetas.size(); ++i) thetas[i] = s * theta_h[i];
    auto b = BoundWithCells(thetas, search_cells);
    // Fails only on invalid thetas, which s > 0 cannot produce.
    return IsTiltChoice{thetas, s, b.ok() ? *b : IsMomentBound{kInf, "invalid", {}}};
  };
  const double step = (options_.s_max - options_.s_min) / (points - 1);
  IsTiltChoice best = evaluate(options_.s_min);
  int best_i = 0;
  for (int i = 1; i < points; ++i) {
    IsTiltChoice c = evaluate(options_.s_min + i * step);
    if (c.bound.log_nu < best.bound.log_nu) {
      best = std::move(c);
      best_i = i;
    }
  }
  // Golden-section refinement on the neighbouring grid cells; keep the best seen.
  double lo = options_.s_min + std::max(0, best_i - 1) * step;
  double hi = options_.s_min + std::min(points - 1, best_i + 1) * step;
  const double ratio = 0.6180339887498949;
  double x1 = hi - ratio * (hi - lo), x2 = lo + ratio * (hi - lo);
  IsTiltChoice c1 = evaluate(x1), c2 = evaluate(x2);
  for (int it = 0; it < refine; ++it) {
    if (c1.bound.log_nu < c2.bound.log_nu) {
      hi = x2;
      x2 = x1;
      c2 = std::move(c1);
      x1 = hi - ratio * (hi - lo);
      c1 = evaluate(x1);
    } else {
      lo = x1;
      x1 = x2;
      c1 = std::move(c2);
      x2 = lo + ratio * (hi - lo);
      c2 = evaluate(x2);
    }
    if (c1.bound.log_nu < best.bound.log_nu) best = c1;
    if (c2.bound.log_nu < best.bound.log_nu) best = c2;
  }
  if (search_cells != options_.num_cells) {
    auto full = BoundWithCells(best.thetas, options_.num_cells);
    if (full.ok() && full->log_nu < best.bound.log_nu) best.bound = *full;
  }
  return best;
}

}  // namespace dpledger::core
