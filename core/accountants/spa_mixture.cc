#include "core/accountants/spa_mixture.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

// Jump cells are tabulated while the tail beyond them is above this (or up to
// kMaxJumpLoss nats): beyond, no tilt in use can make them matter.
constexpr double kJumpTailFloor = 1e-300;
constexpr double kMaxJumpLoss = 100;
// Convolution entries below this fraction of the largest (after tilting) are
// dropped from the ends: the tilt puts the answer's region at the peak.
constexpr double kConvolutionFloor = 1e-25;
// Sums of jumps above eps + kLumpMargin are lumped: D is within e^-6 (0.25%) of 1
// there, and the estimate takes the middle of [D(-6), 1].
constexpr double kLumpMargin = 4;

// a * b (full linear convolution), directly: every entry is a sum of
// non-negative products, so it keeps full relative precision however small it
// is (an FFT's rounding is ~1e-16 of the LARGEST entry, and the tail values
// that decide small deltas lie far below it).
std::vector<double> Convolve(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> out(a.size() + b.size() - 1, 0.0);
  for (size_t i = 0; i < a.size(); ++i) {
    const double v = a[i];
    if (v == 0) continue;
    double* dst = out.data() + i;
    for (size_t j = 0; j < b.size(); ++j) dst[j] += v * b[j];
  }
  return out;
}

// v without its ends below kConvolutionFloor of its largest entry; `first` (the
// lattice index of v[0]) moves with the cut.
std::vector<double> Trimmed(const std::vector<double>& v, int64_t& first) {
  double top = 0;
  for (double x : v) top = std::max(top, x);
  size_t lo = 0, hi = v.size();
  while (lo < hi && !(v[lo] >= kConvolutionFloor * top)) ++lo;
  while (hi > lo && !(v[hi - 1] >= kConvolutionFloor * top)) --hi;
  first += static_cast<int64_t>(lo);
  return std::vector<double>(v.begin() + static_cast<std::ptrdiff_t>(lo),
                             v.begin() + static_cast<std::ptrdiff_t>(hi));
}

// Pr_P[|Y| > c] for c > 0.
double JumpTail(const Plrv& plrv, double c) { return plrv.SfP(c) + plrv.CdfP(-c); }

}  // namespace

absl::StatusOr<std::unique_ptr<ConditionedMixture>> ConditionedMixture::Build(
    std::span<const MechanismEvent> events, Direction direction, BulkEstimator estimator,
    const Deadline& deadline) {
  // Distinct mechanisms with their counts, in first-appearance order.
  std::vector<std::pair<Mechanism, double>> distinct;
  for (const MechanismEvent& e : events) {
    auto it = std::find_if(distinct.begin(), distinct.end(),
                           [&](const auto& d) { return d.first == e.mechanism; });
    if (it == distinct.end()) {
      distinct.emplace_back(e.mechanism, static_cast<double>(e.count));
    } else {
      it->second += static_cast<double>(e.count);
    }
  }
  auto mixture = std::unique_ptr<ConditionedMixture>(new ConditionedMixture());
  mixture->direction_ = direction;
  std::vector<BulkTerm> rest;
  for (const auto& [mechanism, count] : distinct) {
    if (mechanism.is_subsampled() && mechanism.sampling_rate() < 1) {
      if (mixture->jumping_ != nullptr) {
        return absl::FailedPreconditionError(
            "the ledger has more than one distinct Poisson-subsampled mechanism");
      }
      mixture->jumping_ = MakePlrv(mechanism, direction);
      mixture->k_ = count;
    } else {
      mixture->rest_plrvs_.push_back(MakePlrv(mechanism, direction));
      rest.push_back({mixture->rest_plrvs_.back().get(), count});
    }
  }
  if (mixture->jumping_ == nullptr) {
    return absl::FailedPreconditionError(
        "the ledger has no Poisson-subsampled mechanism with sampling_rate < 1");
  }
  const Plrv& plrv = *mixture->jumping_;
  const double k = mixture->k_;

  // Threshold: k Pr[|Y| > c] = kExpectedJumps, by bisection on log c.
  const double target = kExpectedJumps / k;
  double c = kMinJumpCellWidth;
  if (JumpTail(plrv, c) > target) {
    double lo = c, hi = 1;
    while (JumpTail(plrv, hi) > target && hi < kMaxJumpLoss) {
      lo = hi;
      hi *= 2;
    }
    for (int i = 0; i < 60; ++i) {
      const double mid = std::sqrt(lo * hi);
      (JumpTail(plrv, mid) > target ? lo : hi) = mid;
    }
    c = hi;
  }
  // Cells no wider than c/2 (the scale of the bulk/jump boundary; at q = 1e-4 and
  // 100 steps c is 6e-4 nats and 2e-3-wide cells put eps 5% off), within bounds
  // that keep the convolutions small.
  const double h = std::clamp(c / 2, kMinJumpCellWidth, kJumpCellWidth);
  mixture->h_ = h;
  c = std::ceil(c / h) * h;  // on the cell lattice
  mixture->threshold_ = c;
  mixture->p_ = JumpTail(plrv, c);

  // Jump cells [j h, (j + 1) h] outside [-c, c], mass given a jump.
  const int64_t jc = std::llround(c / h);
  int64_t j_lo = -jc, j_hi = jc - 1;  // empty when no tail
  std::vector<double> lower, upper;
  if (mixture->p_ > 0) {
    for (int64_t j = jc; plrv.LossMax() > j * h && j * h < kMaxJumpLoss; ++j) {
      upper.push_back(std::max(0.0, plrv.SfP(j * h) - plrv.SfP((j + 1) * h)));
      j_hi = j;
      if (plrv.SfP((j + 1) * h) < kJumpTailFloor) break;
    }
    for (int64_t j = -jc - 1; plrv.LossMin() < (j + 1) * h && -j * h < kMaxJumpLoss; --j) {
      lower.push_back(std::max(0.0, plrv.CdfP((j + 1) * h) - plrv.CdfP(j * h)));
      j_lo = j;
      if (plrv.CdfP(j * h) < kJumpTailFloor) break;
    }
  }
  mixture->first_cell_ = j_lo;
  const double log_p = std::log(mixture->p_);
  mixture->log_cell_mass_.assign(static_cast<size_t>(std::max<int64_t>(0, j_hi - j_lo + 1)), -kInf);
  for (size_t i = 0; i < lower.size(); ++i) {
    mixture->log_cell_mass_[static_cast<size_t>(-jc - 1 - static_cast<int64_t>(i) - j_lo)] =
        std::log(lower[i]) - log_p;
  }
  for (size_t i = 0; i < upper.size(); ++i) {
    mixture->log_cell_mass_[static_cast<size_t>(jc + static_cast<int64_t>(i) - j_lo)] =
        std::log(upper[i]) - log_p;
  }

  // delta = 0 at or above the largest total loss.
  mixture->ess_sup_ = k * plrv.LossMax();
  for (const BulkTerm& t : rest) mixture->ess_sup_ += t.count * t.plrv->LossMax();
  if (std::isnan(mixture->ess_sup_)) mixture->ess_sup_ = kInf;

  absl::StatusOr<MixtureBulk> bulk = MixtureBulk::Build(plrv, c, rest, estimator, deadline);
  if (!bulk.ok()) return bulk.status();
  mixture->bulk_ = std::move(*bulk);
  return mixture;
}

const BulkCurve& ConditionedMixture::Curve(int m) const {
  if (curves_.size() <= static_cast<size_t>(m)) curves_.resize(static_cast<size_t>(m) + 1);
  std::optional<BulkCurve>& c = curves_[static_cast<size_t>(m)];
  if (!c.has_value()) c = bulk_->ForCount(k_ - m);
  return *c;
}

double ConditionedMixture::CellLoss(int64_t offset) const {
  return h_ * (static_cast<double>(first_cell_ + offset) + 0.5);
}

ConditionedMixture::Tilt ConditionedMixture::TiltFor(double epsilon_lo, double epsilon_hi) const {
  // Sums below s_lo leave the bulk more than its reach to cover: D = 0 there.
  Tilt tilt{0, static_cast<int64_t>(log_cell_mass_.size()), epsilon_hi + kLumpMargin,
            epsilon_lo - Curve(0).reach() - 1};
  // Cells above s_hi are lumped.
  while (tilt.cap > 0 && CellLoss(tilt.cap - 1) > tilt.s_hi) --tilt.cap;
  // theta equalises the tilted weights of the lowest upper-jump cell and the
  // last kept one: log mass is convex in y for subsampled mechanisms, so every
  // kept cell then lies within a modest factor below both ends.
  int64_t first_up = -1, last_up = -1;
  for (int64_t i = 0; i < tilt.cap; ++i) {
    if (CellLoss(i) <= 0 || log_cell_mass_[static_cast<size_t>(i)] == -kInf) continue;
    if (first_up < 0) first_up = i;
    last_up = i;
  }
  if (first_up >= 0 && last_up > first_up) {
    tilt.theta = std::max(0.0, (log_cell_mass_[static_cast<size_t>(first_up)] -
                                log_cell_mass_[static_cast<size_t>(last_up)]) /
                                   (CellLoss(last_up) - CellLoss(first_up)));
  }
  return tilt;
}

void ConditionedMixture::EnsurePowers(const Tilt& tilt, int m) const {
  const double h = h_;
  const double theta = tilt.theta;
  Powers& pw = powers_;
  if (!(pw.theta == theta && pw.cap == tilt.cap && pw.s_hi == tilt.s_hi &&
        pw.s_lo == tilt.s_lo)) {
    pw = Powers{};
    pw.theta = theta;
    pw.cap = tilt.cap;
    pw.s_hi = tilt.s_hi;
    pw.s_lo = tilt.s_lo;
    pw.log_scale_cell = -kInf;
    pw.log_lump_cell = -kInf;
    for (size_t i = static_cast<size_t>(tilt.cap); i < log_cell_mass_.size(); ++i) {
      pw.log_lump_cell = LogAddExp(pw.log_lump_cell, log_cell_mass_[i]);
    }
    for (int64_t i = 0; i < tilt.cap; ++i) {
      pw.log_scale_cell =
          std::max(pw.log_scale_cell, log_cell_mass_[static_cast<size_t>(i)] + theta * CellLoss(i));
    }
    std::vector<double> cell(static_cast<size_t>(tilt.cap));
    for (int64_t i = 0; i < tilt.cap; ++i) {
      if (CellLoss(i) < tilt.s_lo) continue;  // dropped: S would stay below s_lo
      cell[static_cast<size_t>(i)] =
          std::exp(log_cell_mass_[static_cast<size_t>(i)] + theta * CellLoss(i) - pw.log_scale_cell);
    }
    int64_t first = first_cell_;
    pw.cell = Trimmed(cell, first);
    pw.cell_first = first;
    pw.sums.push_back({1.0});  // S_0 = 0
    pw.firsts.push_back(0);
    pw.log_scales.push_back(0);
    pw.log_lumped.push_back(-kInf);
  }
  while (static_cast<int>(pw.sums.size()) <= m) {
    const int mm = static_cast<int>(pw.sums.size());  // the m being built
    const std::vector<double>& prev = pw.sums.back();
    // Untilted mass of S_{m-1}'s kept part, for the lumped cells.
    double log_prev_mass = -kInf;
    for (size_t i = 0; i < prev.size(); ++i) {
      if (prev[i] <= 0) continue;
      const double s = h * (static_cast<double>(pw.firsts.back() + static_cast<int64_t>(i)) +
                            0.5 * (mm - 1));
      log_prev_mass = LogAddExp(log_prev_mass, std::log(prev[i]) + pw.log_scales.back() - theta * s);
    }
    std::vector<double> next = Convolve(prev, pw.cell);
    int64_t first = pw.firsts.back() + pw.cell_first;
    const double log_scale = pw.log_scales.back() + pw.log_scale_cell;
    // Entries above s_hi are lumped too (D is within e^-kLumpMargin of 1 there).
    double log_lumped = LogAddExp(pw.log_lumped.back(), log_prev_mass + pw.log_lump_cell);
    size_t keep = next.size();
    while (keep > 0 && h * (static_cast<double>(first + static_cast<int64_t>(keep) - 1) +
                            0.5 * mm) > pw.s_hi) {
      --keep;
      const double s = h * (static_cast<double>(first + static_cast<int64_t>(keep)) + 0.5 * mm);
      if (next[keep] > 0) {
        log_lumped = LogAddExp(log_lumped, std::log(next[keep]) + log_scale - theta * s);
      }
    }
    next.resize(keep);
    // Entries below s_lo are dropped (the bulk cannot reach eps from there).
    size_t drop = 0;
    while (drop < next.size() &&
           h * (static_cast<double>(first + static_cast<int64_t>(drop)) + 0.5 * mm) < pw.s_lo) {
      ++drop;
    }
    next.erase(next.begin(), next.begin() + static_cast<std::ptrdiff_t>(drop));
    first += static_cast<int64_t>(drop);
    double top = 0;
    for (double v : next) top = std::max(top, v);
    if (top > 0) {
      for (double& v : next) v /= top;
      next = Trimmed(next, first);
    }
    pw.sums.push_back(std::move(next));
    pw.firsts.push_back(first);
    pw.log_scales.push_back(top > 0 ? log_scale + std::log(top) : 0);
    pw.log_lumped.push_back(log_lumped);
  }
}

absl::StatusOr<MixtureDelta> ConditionedMixture::Delta(double epsilon, const Deadline& deadline,
                                                       double log_floor) const {
  return DeltaWithTilt(epsilon, TiltFor(epsilon, epsilon), deadline, log_floor);
}

absl::StatusOr<MixtureDelta> ConditionedMixture::DeltaWithTilt(double epsilon, const Tilt& tilt,
                                                               const Deadline& deadline,
                                                               double log_floor) const {
  const double h = h_;
  const double theta = tilt.theta;
  MixtureDelta out;
  out.log_delta = -kInf;
  if (epsilon >= ess_sup_) return out;  // delta = 0 exactly
  const double log_p = std::log(p_), log_1mp = std::log1p(-p_);
  double log_choose = 0;  // log C(k, m)
  const bool jumps = p_ > 0 && !log_cell_mass_.empty();
  double lump_gap = 0;
  const int max_m = jumps ? static_cast<int>(std::min<double>(k_, kMaxMixtureTerms - 1)) : 0;
  for (int m = 0; m <= max_m; ++m) {
    if (absl::Status s = deadline.Check("conditioned mixture: terms"); !s.ok()) return s;
    if (m > 0) log_choose += std::log((k_ - (m - 1)) / m);
    if (jumps) EnsurePowers(tilt, m);
    const std::vector<double> zero_jumps = {1.0};
    const std::vector<double>& sum = jumps ? powers_.sums[static_cast<size_t>(m)] : zero_jumps;
    const int64_t first = jumps ? powers_.firsts[static_cast<size_t>(m)] : 0;
    const double log_scale = jumps ? powers_.log_scales[static_cast<size_t>(m)] : 0;
    const double log_weight = log_choose + (m > 0 ? m * log_p : 0) + (k_ - m) * log_1mp;
    // E[D(eps - S_m)] = e^{log_scale} sum_i sum[i] e^{-theta s_i} D(eps - s_i).
    const BulkCurve& curve = Curve(m);
    double inner_top = -kInf;
    std::vector<double> logs(sum.size(), -kInf);
    for (size_t i = 0; i < sum.size(); ++i) {
      if (sum[i] <= 0) continue;
      const double s = h * (static_cast<double>(first + static_cast<int64_t>(i)) + 0.5 * m);
      logs[i] = std::log(sum[i]) - theta * s + curve.LogDelta(epsilon - s);
      inner_top = std::max(inner_top, logs[i]);
    }
    if (inner_top > -kInf) {
      double acc = 0;
      for (double v : logs) acc += std::exp(v - inner_top);
      out.log_delta = LogAddExp(out.log_delta, log_weight + log_scale + inner_top + std::log(acc));
    }
    if (jumps && powers_.log_lumped[static_cast<size_t>(m)] > -kInf) {
      // Lumped configurations (S above s_hi): D in [D(eps - s_hi), 1]; the
      // estimate takes the middle, the half-gap joins the uncertain mass.
      const double log_lumped = log_weight + powers_.log_lumped[static_cast<size_t>(m)];
      const double d_lo = std::exp(curve.LogDelta(epsilon - tilt.s_hi));
      out.log_delta = LogAddExp(out.log_delta, log_lumped + std::log(0.5 * (1 + d_lo)));
      lump_gap += std::exp(log_lumped) * 0.5 * (1 - d_lo);
    }
    out.terms = m + 1;
    out.truncated_mass = 0;
    if (m + 1 > k_ || !jumps) break;
    // Pr[M > m] <= b(m+1) / (1 - r), r >= b(j+1)/b(j) for every j > m.
    const double log_next = log_choose + std::log((k_ - m) / (m + 1)) + (m + 1) * log_p +
                            (k_ - m - 1) * log_1mp;
    const double r = (k_ - m - 1) * p_ / ((m + 2) * (1 - p_));
    out.truncated_mass = r < 1 ? std::exp(log_next - std::log1p(-r)) : 1;
    if (r < 1 && log_next - std::log1p(-r) <=
                     std::log(kMixtureTailFraction) + std::max(out.log_delta, log_floor)) {
      break;
    }
  }
  out.truncated_mass += lump_gap;
  if (out.truncated_mass > kMixtureTailFraction * std::exp(std::max(out.log_delta, log_floor)) &&
      out.terms >= kMaxMixtureTerms) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "conditioned mixture: %d terms leave binomial mass %g, above %g of the estimate %g",
        out.terms, out.truncated_mass, kMixtureTailFraction, std::exp(out.log_delta)));
  }
  return out;
}

absl::StatusOr<double> ConditionedMixture::Epsilon(double delta, double lo, double hi,
                                                   const Deadline& deadline) const {
  const double log_target = std::log(delta);
  // One tilt for the whole search (at the bracket's middle), so the convolution
  // powers are computed once.
  const Tilt theta = TiltFor(lo, hi);
  auto f = [&](double eps) -> absl::StatusOr<double> {
    absl::StatusOr<MixtureDelta> d = DeltaWithTilt(eps, theta, deadline, -kInf);
    if (!d.ok()) return d.status();
    return d->log_delta - log_target;
  };
  absl::StatusOr<double> f_lo = f(lo);
  if (!f_lo.ok()) return f_lo.status();
  if (*f_lo <= 0) return lo;
  absl::StatusOr<double> f_hi = f(hi);
  if (!f_hi.ok()) return f_hi.status();
  if (*f_hi >= 0) return hi;
  // Illinois regula falsi on log delta (nearly linear in eps).
  double a = lo, b = hi, fa = *f_lo, fb = *f_hi;
  int side = 0;
  for (int i = 0; i < 100 && b - a > 1e-7 * std::max(1.0, b); ++i) {
    double x = (a * fb - b * fa) / (fb - fa);
    if (!(x > a && x < b)) x = 0.5 * (a + b);
    absl::StatusOr<double> fx = f(x);
    if (!fx.ok()) return fx.status();
    if (*fx > 0) {
      a = x;
      fa = *fx;
      if (side == -1) fb *= 0.5;
      side = -1;
    } else {
      b = x;
      fb = *fx;
      if (side == 1) fa *= 0.5;
      side = 1;
    }
  }
  return 0.5 * (a + b);
}

}  // namespace dpledger::core
