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
// The same with no tilt (several mechanisms): every entry is a probability <= 1.
constexpr double kUntiltedFloor = 1e-60;
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

// v without its ends below `floor` times its largest entry; `first` (the lattice
// index of v[0]) moves with the cut.
std::vector<double> Trimmed(const std::vector<double>& v, int64_t& first, double floor) {
  double top = 0;
  for (double x : v) top = std::max(top, x);
  size_t lo = 0, hi = v.size();
  while (lo < hi && !(v[lo] >= floor * top)) ++lo;
  while (hi > lo && !(v[hi - 1] >= floor * top)) --hi;
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
      JumpLaw law;
      law.plrv = MakePlrv(mechanism, direction);
      law.k = count;
      mixture->jumps_.push_back(std::move(law));
    } else {
      mixture->rest_plrvs_.push_back(MakePlrv(mechanism, direction));
      rest.push_back({mixture->rest_plrvs_.back().get(), count});
    }
  }
  std::vector<JumpLaw>& jumps = mixture->jumps_;
  if (jumps.empty()) {
    return absl::FailedPreconditionError(
        "the ledger has no Poisson-subsampled mechanism with sampling_rate < 1");
  }
  if (jumps.size() > static_cast<size_t>(kMaxJumpingMechanisms)) {
    return absl::FailedPreconditionError(
        absl::StrFormat("the ledger has %d distinct Poisson-subsampled mechanisms (at most %d "
                        "are conditioned on)",
                        jumps.size(), kMaxJumpingMechanisms));
  }

  // Thresholds: k_g Pr[|Y_g| > c_g] = kExpectedJumps / G, by bisection on log c.
  double c_min = kInf;
  for (JumpLaw& law : jumps) {
    const Plrv& plrv = *law.plrv;
    const double target = kExpectedJumps / static_cast<double>(jumps.size()) / law.k;
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
    law.threshold = c;
    c_min = std::min(c_min, c);
  }
  // Cells no wider than c/2 (the scale of the bulk/jump boundary; at q = 1e-4 and
  // 100 steps c is 6e-4 nats and 2e-3-wide cells put eps 5% off), within bounds
  // that keep the convolutions small. One width for all: their sums share a lattice.
  const double h = std::clamp(c_min / 2, kMinJumpCellWidth, kJumpCellWidth);
  mixture->h_ = h;
  std::vector<RestrictedStep> restricted;
  for (JumpLaw& law : jumps) {
    const Plrv& plrv = *law.plrv;
    const double c = std::ceil(law.threshold / h) * h;  // on the cell lattice
    law.threshold = c;
    law.p = JumpTail(plrv, c);
    restricted.push_back({law.plrv.get(), c});
    // Jump cells [j h, (j + 1) h] outside [-c, c], mass given a jump.
    const int64_t jc = std::llround(c / h);
    int64_t j_lo = -jc, j_hi = jc - 1;  // empty when no tail
    std::vector<double> lower, upper;
    if (law.p > 0) {
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
    law.first_cell = j_lo;
    const double log_p = std::log(law.p);
    law.log_cell_mass.assign(static_cast<size_t>(std::max<int64_t>(0, j_hi - j_lo + 1)), -kInf);
    for (size_t i = 0; i < lower.size(); ++i) {
      law.log_cell_mass[static_cast<size_t>(-jc - 1 - static_cast<int64_t>(i) - j_lo)] =
          std::log(lower[i]) - log_p;
    }
    for (size_t i = 0; i < upper.size(); ++i) {
      law.log_cell_mass[static_cast<size_t>(jc + static_cast<int64_t>(i) - j_lo)] =
          std::log(upper[i]) - log_p;
    }
    law.max_jumps = law.p > 0 && !law.log_cell_mass.empty()
                        ? static_cast<int>(std::min<double>(law.k, kMaxMixtureTerms))
                        : 0;
  }

  // delta = 0 at or above the largest total loss.
  mixture->ess_sup_ = 0;
  for (const JumpLaw& law : jumps) mixture->ess_sup_ += law.k * law.plrv->LossMax();
  for (const BulkTerm& t : rest) mixture->ess_sup_ += t.count * t.plrv->LossMax();
  if (std::isnan(mixture->ess_sup_)) mixture->ess_sup_ = kInf;

  absl::StatusOr<MixtureBulk> bulk = MixtureBulk::Build(restricted, rest, estimator, deadline);
  if (!bulk.ok()) return bulk.status();
  mixture->bulk_ = std::move(*bulk);
  return mixture;
}

double ConditionedMixture::threshold() const {
  double c = kInf;
  for (const JumpLaw& law : jumps_) c = std::min(c, law.threshold);
  return c;
}

double ConditionedMixture::LogBinomial(const JumpLaw& law, int m) const {
  if (m > law.max_jumps) return -kInf;
  std::vector<double>& b = law.log_binomial;
  if (b.empty()) b.push_back(law.k * std::log1p(-law.p));  // b(0)
  const double log_p = std::log(law.p), log_1mp = std::log1p(-law.p);
  double log_choose = 0;  // log C(k, j), kept for the step from j to j + 1
  for (size_t j = 1; j < b.size(); ++j) log_choose += std::log((law.k - (j - 1)) / j);
  while (static_cast<int>(b.size()) <= m) {
    const int j = static_cast<int>(b.size());
    log_choose += std::log((law.k - (j - 1)) / j);
    b.push_back(log_choose + j * log_p + (law.k - j) * log_1mp);
  }
  return b[static_cast<size_t>(m)];
}

size_t ConditionedMixture::EnsureCompositions(int total) const {
  while (static_cast<int>(total_ends_.size()) <= total) {
    const int t = static_cast<int>(total_ends_.size());
    const size_t first_of_prev = t >= 2 ? total_ends_[static_cast<size_t>(t - 2)] : 0;
    if (t == 0) {
      Composition zero;
      zero.m.assign(jumps_.size(), 0);
      for (const JumpLaw& law : jumps_) zero.log_weight += LogBinomial(law, 0);
      compositions_.push_back(std::move(zero));
    } else {
      // Every composition of total t is a unique one of total t - 1 plus one jump
      // of a mechanism at or after that one's last nonzero entry.
      const size_t end_prev = total_ends_[static_cast<size_t>(t - 1)];
      for (size_t parent = first_of_prev; parent < end_prev; ++parent) {
        if (compositions_[parent].total != t - 1) continue;
        int last = 0;
        for (size_t g = 0; g < jumps_.size(); ++g) {
          if (compositions_[parent].m[g] > 0) last = static_cast<int>(g);
        }
        for (size_t g = static_cast<size_t>(last); g < jumps_.size(); ++g) {
          if (compositions_[parent].m[g] + 1 > jumps_[g].max_jumps) continue;
          Composition c;
          c.m = compositions_[parent].m;
          ++c.m[g];
          c.total = t;
          c.parent = static_cast<int>(parent);
          c.via = static_cast<int>(g);
          for (size_t i = 0; i < jumps_.size(); ++i) c.log_weight += LogBinomial(jumps_[i], c.m[i]);
          compositions_.push_back(std::move(c));
        }
      }
    }
    total_ends_.push_back(compositions_.size());
  }
  return total_ends_[static_cast<size_t>(total)];
}

double ConditionedMixture::LogTotalMass(int total) const {
  const size_t end = EnsureCompositions(total);
  const size_t begin = total > 0 ? total_ends_[static_cast<size_t>(total - 1)] : 0;
  double log_mass = -kInf;
  for (size_t i = begin; i < end; ++i) log_mass = LogAddExp(log_mass, compositions_[i].log_weight);
  return log_mass;
}

const BulkCurve& ConditionedMixture::Curve(size_t composition) const {
  if (curves_.size() <= composition) curves_.resize(composition + 1);
  std::optional<BulkCurve>& c = curves_[composition];
  if (!c.has_value()) {
    std::vector<double> counts;
    for (size_t g = 0; g < jumps_.size(); ++g) {
      counts.push_back(jumps_[g].k - compositions_[composition].m[g]);
    }
    c = bulk_->ForCount(counts);
  }
  return *c;
}

double ConditionedMixture::CellLoss(const JumpLaw& law, int64_t offset) const {
  return h_ * (static_cast<double>(law.first_cell + offset) + 0.5);
}

ConditionedMixture::Tilt ConditionedMixture::TiltFor(double epsilon_lo, double epsilon_hi) const {
  EnsureCompositions(0);
  // Sums below s_lo leave the bulk more than its reach to cover: D = 0 there,
  // and so for every later sum when no jump is positive.
  Tilt tilt{0, {}, epsilon_hi + kLumpMargin, epsilon_lo - Curve(0).reach() - 1};
  for (const JumpLaw& law : jumps_) {
    // Cells above s_hi are lumped.
    int64_t cap = static_cast<int64_t>(law.log_cell_mass.size());
    while (cap > 0 && CellLoss(law, cap - 1) > tilt.s_hi) --cap;
    tilt.caps.push_back(cap);
    for (int64_t i = 0; i < cap; ++i) {
      if (CellLoss(law, i) > 0 && law.log_cell_mass[static_cast<size_t>(i)] > -kInf) {
        tilt.s_lo = -kInf;
      }
    }
  }
  if (jumps_.size() != 1) return tilt;  // theta = 0 (Powers::floor says why)
  // theta equalises the tilted weights of the lowest upper-jump cell and the
  // last kept one: log mass is convex in y for subsampled mechanisms, so every
  // kept cell then lies within a modest factor below both ends.
  const JumpLaw& law = jumps_[0];
  int64_t first_up = -1, last_up = -1;
  for (int64_t i = 0; i < tilt.caps[0]; ++i) {
    if (CellLoss(law, i) <= 0 || law.log_cell_mass[static_cast<size_t>(i)] == -kInf) continue;
    if (first_up < 0) first_up = i;
    last_up = i;
  }
  if (first_up >= 0 && last_up > first_up) {
    tilt.theta = std::max(0.0, (law.log_cell_mass[static_cast<size_t>(first_up)] -
                                law.log_cell_mass[static_cast<size_t>(last_up)]) /
                                   (CellLoss(law, last_up) - CellLoss(law, first_up)));
  }
  return tilt;
}

void ConditionedMixture::EnsurePowers(const Tilt& tilt, size_t index) const {
  const double h = h_;
  const double theta = tilt.theta;
  Powers& pw = powers_;
  if (!(pw.tilt.has_value() && *pw.tilt == tilt)) {
    pw = Powers{};
    pw.tilt = tilt;
    // One mechanism: the tilt puts the answer's region near the peak, so 1e-25 of
    // the largest entry is negligible. Several: theta = 0 and the largest entry is
    // at most 1, so entries below 1e-60 are (mass below 1e-55 per term).
    pw.floor = jumps_.size() == 1 ? kConvolutionFloor : kUntiltedFloor;
    for (size_t g = 0; g < jumps_.size(); ++g) {
      const JumpLaw& law = jumps_[g];
      const int64_t cap = tilt.caps[g];
      double log_lump = -kInf, log_scale = -kInf;
      for (size_t i = static_cast<size_t>(cap); i < law.log_cell_mass.size(); ++i) {
        log_lump = LogAddExp(log_lump, law.log_cell_mass[i]);
      }
      for (int64_t i = 0; i < cap; ++i) {
        log_scale =
            std::max(log_scale, law.log_cell_mass[static_cast<size_t>(i)] + theta * CellLoss(law, i));
      }
      std::vector<double> cell(static_cast<size_t>(cap));
      for (int64_t i = 0; i < cap; ++i) {
        if (CellLoss(law, i) < tilt.s_lo) continue;  // dropped: S would stay below s_lo
        cell[static_cast<size_t>(i)] = std::exp(law.log_cell_mass[static_cast<size_t>(i)] +
                                                theta * CellLoss(law, i) - log_scale);
      }
      int64_t first = law.first_cell;
      pw.cell.push_back(Trimmed(cell, first, pw.floor));
      pw.cell_first.push_back(first);
      pw.log_scale_cell.push_back(log_scale);
      pw.log_lump_cell.push_back(log_lump);
    }
  }
  while (pw.sums.size() <= index) {
    const size_t c = pw.sums.size();
    const Composition& comp = compositions_[c];
    if (comp.parent < 0) {  // S_0 = 0
      pw.sums.push_back({1.0});
      pw.firsts.push_back(0);
      pw.log_scales.push_back(0);
      pw.log_lumped.push_back(-kInf);
      continue;
    }
    const size_t parent = static_cast<size_t>(comp.parent), g = static_cast<size_t>(comp.via);
    const int mm = comp.total;
    const std::vector<double>& prev = pw.sums[parent];
    // Untilted mass of the parent's kept part, for the lumped cells.
    double log_prev_mass = -kInf;
    for (size_t i = 0; i < prev.size(); ++i) {
      if (prev[i] <= 0) continue;
      const double s = h * (static_cast<double>(pw.firsts[parent] + static_cast<int64_t>(i)) +
                            0.5 * (mm - 1));
      log_prev_mass = LogAddExp(log_prev_mass, std::log(prev[i]) + pw.log_scales[parent] - theta * s);
    }
    std::vector<double> next =
        pw.cell[g].empty() ? std::vector<double>{} : Convolve(prev, pw.cell[g]);
    int64_t first = pw.firsts[parent] + pw.cell_first[g];
    const double log_scale = pw.log_scales[parent] + pw.log_scale_cell[g];
    // Entries above s_hi are lumped too (D is within e^-kLumpMargin of 1 there).
    double log_lumped = LogAddExp(pw.log_lumped[parent], log_prev_mass + pw.log_lump_cell[g]);
    size_t keep = next.size();
    while (keep > 0 && h * (static_cast<double>(first + static_cast<int64_t>(keep) - 1) +
                            0.5 * mm) > tilt.s_hi) {
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
           h * (static_cast<double>(first + static_cast<int64_t>(drop)) + 0.5 * mm) < tilt.s_lo) {
      ++drop;
    }
    next.erase(next.begin(), next.begin() + static_cast<std::ptrdiff_t>(drop));
    first += static_cast<int64_t>(drop);
    double top = 0;
    for (double v : next) top = std::max(top, v);
    if (top > 0) {
      for (double& v : next) v /= top;
      next = Trimmed(next, first, pw.floor);
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
  double lump_gap = 0;
  int max_total = 0;
  for (const JumpLaw& law : jumps_) max_total += law.max_jumps;
  max_total = std::min(max_total, kMaxMixtureTerms - 1);
  for (int t = 0; t <= max_total; ++t) {
    const size_t end = EnsureCompositions(t);
    for (size_t c = t > 0 ? total_ends_[static_cast<size_t>(t - 1)] : 0; c < end; ++c) {
      if (absl::Status s = deadline.Check("conditioned mixture: terms"); !s.ok()) return s;
      EnsurePowers(tilt, c);
      const std::vector<double>& sum = powers_.sums[c];
      const int64_t first = powers_.firsts[c];
      const double log_scale = powers_.log_scales[c];
      const double log_weight = compositions_[c].log_weight;
      // E[D(eps - S_m)] = e^{log_scale} sum_i sum[i] e^{-theta s_i} D(eps - s_i).
      const BulkCurve& curve = Curve(c);
      double inner_top = -kInf;
      std::vector<double> logs(sum.size(), -kInf);
      for (size_t i = 0; i < sum.size(); ++i) {
        if (sum[i] <= 0) continue;
        const double s = h * (static_cast<double>(first + static_cast<int64_t>(i)) + 0.5 * t);
        logs[i] = std::log(sum[i]) - theta * s + curve.LogDelta(epsilon - s);
        inner_top = std::max(inner_top, logs[i]);
      }
      if (inner_top > -kInf) {
        double acc = 0;
        for (double v : logs) acc += std::exp(v - inner_top);
        out.log_delta = LogAddExp(out.log_delta, log_weight + log_scale + inner_top + std::log(acc));
      }
      if (powers_.log_lumped[c] > -kInf) {
        // Lumped configurations (S above s_hi): D in [D(eps - s_hi), 1]; the
        // estimate takes the middle, the half-gap joins the uncertain mass.
        const double log_lumped = log_weight + powers_.log_lumped[c];
        const double d_lo = std::exp(curve.LogDelta(epsilon - tilt.s_hi));
        out.log_delta = LogAddExp(out.log_delta, log_lumped + std::log(0.5 * (1 + d_lo)));
        lump_gap += std::exp(log_lumped) * 0.5 * (1 - d_lo);
      }
      out.terms += 1;
    }
    out.totals = t + 1;
    out.truncated_mass = 0;
    if (t == max_total) {
      // Totals beyond max_total: none exist unless kMaxMixtureTerms cut them.
      const double log_next = LogTotalMass(t + 1);
      out.truncated_mass = log_next > -kInf ? 1 : 0;
      break;
    }
    // Pr[T > t] <= b_T(t+1) / (1 - r), r = b_T(t+2) / b_T(t+1) (log-concavity).
    const double log_next = LogTotalMass(t + 1);
    if (log_next == -kInf) break;
    const double r = std::exp(LogTotalMass(t + 2) - log_next);
    out.truncated_mass = r < 1 ? std::exp(log_next - std::log1p(-r)) : 1;
    if (r < 1 && log_next - std::log1p(-r) <=
                     std::log(kMixtureTailFraction) + std::max(out.log_delta, log_floor)) {
      break;
    }
  }
  out.truncated_mass += lump_gap;
  if (out.truncated_mass > kMixtureTailFraction * std::exp(std::max(out.log_delta, log_floor)) &&
      out.totals >= kMaxMixtureTerms) {
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
    // Terms below kMixtureTailFraction of the target cannot move the crossing.
    absl::StatusOr<MixtureDelta> d = DeltaWithTilt(eps, theta, deadline, log_target);
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
