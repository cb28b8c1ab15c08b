#include "core/accountants/spa_mixture.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/accountants/spa_mixture_convolve.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

// Jump cells are tabulated while the tail beyond them is above this (or up to
// kMaxJumpLoss nats): beyond, they cannot matter.
constexpr double kJumpTailFloor = 1e-300;
constexpr double kMaxJumpLoss = 100;
// Sums of jumps above eps + kLumpMargin are lumped: D is within e^-6 (0.25%) of 1
// there, and the estimate takes the middle of [D(-6), 1].
constexpr double kLumpMargin = 4;
// The bounds evaluate D only at jump sums whose weight is at least this fraction
// of the floor (the target delta, or the estimate); the others count as D in [0, 1].
constexpr double kSkipFraction = 1e-14;
// log(1 + 1e-6): relative margin of the bounds for the rounding of the binomial
// weights and the convolution sums (relative errors ~1e-13).
constexpr double kSumMargin = 1e-6;

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
  // delta(eps) >= Pr[S = +inf] > 0 for every eps then; the bounds below (e.g. 0
  // at or above ess_sup_) assume every loss is finite.
  bool infinite = false;
  for (const std::unique_ptr<Plrv>& plrv : mixture->rest_plrvs_) {
    infinite = infinite || plrv->InfiniteLossMass() > 0;
  }
  for (const JumpLaw& law : jumps) infinite = infinite || law.plrv->InfiniteLossMass() > 0;
  if (infinite) {
    return absl::FailedPreconditionError("the ledger has a step with an infinite loss");
  }
  if (jumps.empty()) {
    return absl::FailedPreconditionError(
        "the ledger has no Poisson-subsampled mechanism with sampling_rate < 1");
  }
  if (jumps.size() > static_cast<size_t>(kMaxJumpingMechanisms)) {
    return absl::FailedPreconditionError(
        absl::StrFormat("the ledger has %d distinct Poisson-subsampled mechanisms (at most %d "
                        "are conditioned on: their count vectors, C(T + G, G) of total <= T, would "
                        "run past the query cap)",
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
    // Jump cells [j h, (j + 1) h] outside [-c, c]. Each cell's P-mass is split
    // between its two ends so that both its P-mass and its Q-mass (= E_P[e^{-Y}]
    // over the cell) are kept: "connect the dots" (Doroshenko et al., PETS 2022),
    // second order in h where a mass at the midpoint is first order (measured: eps
    // 1.5% high at q = 1e-4, delta = 1e-5, 100 steps, where h is 7% of eps).
    const int64_t jc = std::llround(c / h);
    std::vector<std::pair<int64_t, double>> points;  // (lattice index, mass)
    std::vector<std::pair<int64_t, double>> down;    // the whole P-mass at the lower end
    auto split = [&](int64_t j, double p_mass, double q_mass) {
      if (!(p_mass > 0)) return;
      const double to_lo =
          std::clamp((std::exp((j + 1) * h) * q_mass - p_mass) / std::expm1(h), 0.0, p_mass);
      points.emplace_back(j, to_lo);
      points.emplace_back(j + 1, p_mass - to_lo);
      down.emplace_back(j, p_mass);
    };
    if (law.p > 0) {
      double hi_end = jc * h, lo_end = -jc * h;  // the tabulated cells' outer ends
      for (int64_t j = jc; plrv.LossMax() > j * h && j * h < kMaxJumpLoss; ++j) {
        split(j, plrv.SfP(j * h) - plrv.SfP((j + 1) * h), plrv.SfQ(j * h) - plrv.SfQ((j + 1) * h));
        hi_end = (j + 1) * h;
        if (plrv.SfP((j + 1) * h) < kJumpTailFloor) break;
      }
      for (int64_t j = -jc - 1; plrv.LossMin() < (j + 1) * h && -j * h < kMaxJumpLoss; --j) {
        split(j, plrv.CdfP((j + 1) * h) - plrv.CdfP(j * h),
              plrv.CdfQ((j + 1) * h) - plrv.CdfQ(j * h));
        lo_end = j * h;
        if (plrv.CdfP(j * h) < kJumpTailFloor) break;
      }
      law.beyond = plrv.SfP(hi_end) + plrv.CdfP(lo_end);
      for (const auto& [j, m] : down) {
        if (m > 0) (j < 0 ? mixture->negative_jumps_ : mixture->positive_jumps_) = true;
      }
    }
    int64_t pt_lo = 0, pt_hi = -1;
    if (!points.empty()) {
      pt_lo = pt_hi = points[0].first;
      for (const auto& [j, m] : points) {
        pt_lo = std::min(pt_lo, j);
        pt_hi = std::max(pt_hi, j);
      }
    }
    law.first_cell = pt_lo;
    std::vector<double> mass(static_cast<size_t>(std::max<int64_t>(0, pt_hi - pt_lo + 1)), 0.0);
    for (const auto& [j, m] : points) mass[static_cast<size_t>(j - pt_lo)] += m;
    const double log_p = std::log(law.p);
    law.log_cell_mass.assign(mass.size(), -kInf);
    for (size_t i = 0; i < mass.size(); ++i) {
      if (mass[i] > 0) law.log_cell_mass[i] = std::log(mass[i]) - log_p;
    }
    std::vector<double> mass_down(mass.size(), 0.0);
    for (const auto& [j, m] : down) mass_down[static_cast<size_t>(j - pt_lo)] += m;
    law.log_cell_mass_down.assign(mass.size(), -kInf);
    for (size_t i = 0; i < mass.size(); ++i) {
      if (mass_down[i] > 0) law.log_cell_mass_down[i] = std::log(mass_down[i]) - log_p;
    }
    // (Totals stop at kMaxMixtureTerms, so counts beyond it are never enumerated.)
    law.max_jumps = law.p > 0 && !law.log_cell_mass.empty()
                        ? static_cast<int>(std::min<double>(law.k, 4 * kMaxMixtureTerms))
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

std::vector<double> ConditionedMixture::BulkCounts(size_t composition) const {
  std::vector<double> counts;
  for (size_t g = 0; g < jumps_.size(); ++g) {
    counts.push_back(jumps_[g].k - compositions_[composition].m[g]);
  }
  return counts;
}

const BulkBound& ConditionedMixture::Bound(size_t composition) const {
  if (bounds_.size() <= composition) bounds_.resize(composition + 1);
  std::optional<BulkBound>& b = bounds_[composition];
  if (!b.has_value()) {
    // The cache grid ends one nat past the estimate's reach, with a step of h/4.
    b = bulk_->BoundForCount(BulkCounts(composition), Curve(composition).reach() + 1, h_ / 4);
  }
  return *b;
}

const BulkCurve& ConditionedMixture::Curve(size_t composition) const {
  if (curves_.size() <= composition) curves_.resize(composition + 1);
  std::optional<BulkCurve>& c = curves_[composition];
  if (!c.has_value()) {
    c = bulk_->ForCount(BulkCounts(composition));
  }
  return *c;
}

double ConditionedMixture::CellLoss(const JumpLaw& law, int64_t offset) const {
  return h_ * static_cast<double>(law.first_cell + offset);
}

ConditionedMixture::Limits ConditionedMixture::LimitsFor(double epsilon_lo, double epsilon_hi) const {
  EnsureCompositions(0);
  // Sums below s_lo leave the bulk more than its reach to cover: D = 0 there,
  // and so for every later sum when no jump is positive (lumped cells included:
  // a lumped positive jump would lift a dropped sum above s_lo).
  Limits limits{{}, epsilon_hi + kLumpMargin, epsilon_lo - Curve(0).reach() - 1};
  for (const JumpLaw& law : jumps_) {
    // Cells above s_hi are lumped.
    int64_t cap = static_cast<int64_t>(law.log_cell_mass.size());
    while (cap > 0 && CellLoss(law, cap - 1) > limits.s_hi) --cap;
    limits.caps.push_back(cap);
    for (size_t i = 0; i < law.log_cell_mass.size(); ++i) {
      if (CellLoss(law, static_cast<int64_t>(i)) > 0 && law.log_cell_mass[i] > -kInf) {
        limits.s_lo = -kInf;
      }
    }
  }
  return limits;
}

// log of the sum of v[i] e^{log_scale} over i outside [keep_lo, keep_hi).
static double LogSumOutside(const std::vector<double>& v, size_t keep_lo, size_t keep_hi,
                     double log_scale) {
  double sum = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i < keep_lo || i >= keep_hi) sum += v[i];
  }
  return sum > 0 ? std::log(sum) + log_scale : -kInf;
}

void ConditionedMixture::EnsurePowers(const Limits& limits, size_t index, Chain chain) const {
  const double h = h_;
  Powers& pw = chain == Chain::kEstimate ? powers_ : bound_powers_;
  if (!(pw.limits.has_value() && *pw.limits == limits)) {
    pw = Powers{};
    pw.limits = limits;
    for (size_t g = 0; g < jumps_.size(); ++g) {
      const JumpLaw& law = jumps_[g];
      const std::vector<double>& log_mass =
          chain == Chain::kEstimate ? law.log_cell_mass : law.log_cell_mass_down;
      const int64_t cap = limits.caps[g];
      double log_lump = -kInf, log_scale = -kInf, log_below = -kInf;
      for (size_t i = static_cast<size_t>(cap); i < log_mass.size(); ++i) {
        log_lump = LogAddExp(log_lump, log_mass[i]);
      }
      for (int64_t i = 0; i < cap; ++i) {
        log_scale =
            std::max(log_scale, log_mass[static_cast<size_t>(i)]);
      }
      std::vector<double> cell(static_cast<size_t>(cap));
      for (int64_t i = 0; i < cap; ++i) {
        if (CellLoss(law, i) < limits.s_lo) {  // dropped: S would stay below s_lo
          log_below = LogAddExp(log_below, log_mass[static_cast<size_t>(i)]);
          continue;
        }
        cell[static_cast<size_t>(i)] = std::exp(log_mass[static_cast<size_t>(i)] + - log_scale);
      }
      int64_t first = law.first_cell;
      std::vector<double> kept = Trimmed(cell, first);
      const size_t lo = static_cast<size_t>(first - law.first_cell);
      pw.log_drop_cell.push_back(LogSumOutside(cell, lo, lo + kept.size(), log_scale));
      pw.log_below_cell.push_back(log_below);
      pw.cell.push_back(std::move(kept));
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
      pw.log_dropped.push_back(-kInf);
      pw.log_below.push_back(-kInf);
      continue;
    }
    const size_t parent = static_cast<size_t>(comp.parent), g = static_cast<size_t>(comp.via);
    const std::vector<double>& prev = pw.sums[parent];
    // Mass of the parent's kept part, for the lumped cells.
    double log_prev_mass = -kInf;
    for (size_t i = 0; i < prev.size(); ++i) {
      if (prev[i] <= 0) continue;
      log_prev_mass = LogAddExp(log_prev_mass, std::log(prev[i]) + pw.log_scales[parent]);
    }
    std::vector<double> next =
        pw.cell[g].empty() ? std::vector<double>{} : ConvolveDirect(prev, pw.cell[g]);
    int64_t first = pw.firsts[parent] + pw.cell_first[g];
    const double log_scale = pw.log_scales[parent] + pw.log_scale_cell[g];
    // Entries above s_hi are lumped too (D is within e^-kLumpMargin of 1 there).
    double log_lumped = LogAddExp(pw.log_lumped[parent], log_prev_mass + pw.log_lump_cell[g]);
    size_t keep = next.size();
    while (keep > 0 && h * static_cast<double>(first + static_cast<int64_t>(keep) - 1) > limits.s_hi) {
      --keep;
      if (next[keep] > 0) {
        log_lumped = LogAddExp(log_lumped, std::log(next[keep]) + log_scale);
      }
    }
    next.resize(keep);
    // Entries below s_lo are dropped (the bulk cannot reach eps from there).
    size_t drop = 0;
    while (drop < next.size() &&
           h * static_cast<double>(first + static_cast<int64_t>(drop)) < limits.s_lo) {
      ++drop;
    }
    // What leaves the chain, for the bounds: the parent's, this jump's cells
    // left out of its kept part, and the entries cut here.
    double log_below = LogAddExp(pw.log_below[parent], log_prev_mass + pw.log_below_cell[g]);
    log_below = LogAddExp(log_below, LogSumOutside(next, drop, next.size(), log_scale));
    double log_dropped = LogAddExp(pw.log_dropped[parent], log_prev_mass + pw.log_drop_cell[g]);
    next.erase(next.begin(), next.begin() + static_cast<std::ptrdiff_t>(drop));
    first += static_cast<int64_t>(drop);
    double top = 0;
    for (double v : next) top = std::max(top, v);
    if (top > 0) {
      for (double& v : next) v /= top;
      const int64_t first_before = first;
      std::vector<double> kept = Trimmed(next, first);
      const size_t lo = static_cast<size_t>(first - first_before);
      log_dropped = LogAddExp(
          log_dropped, LogSumOutside(next, lo, lo + kept.size(), log_scale + std::log(top)));
      next = std::move(kept);
    }
    pw.sums.push_back(std::move(next));
    pw.firsts.push_back(first);
    pw.log_scales.push_back(top > 0 ? log_scale + std::log(top) : 0);
    pw.log_lumped.push_back(log_lumped);
    pw.log_dropped.push_back(log_dropped);
    pw.log_below.push_back(log_below);
  }
}

absl::StatusOr<MixtureDelta> ConditionedMixture::Delta(double epsilon, const Deadline& deadline,
                                                       double log_floor) const {
  return DeltaWithLimits(epsilon, LimitsFor(epsilon, epsilon), deadline, log_floor);
}

absl::StatusOr<MixtureDelta> ConditionedMixture::DeltaWithLimits(double epsilon, const Limits& limits,
                                                               const Deadline& deadline,
                                                               double log_floor) const {
  const double h = h_;
  MixtureDelta out;
  out.log_delta = -kInf;
  if (epsilon >= ess_sup_) return out;  // delta = 0 exactly
  double lump_gap = 0;
  int max_total = 0;
  for (const JumpLaw& law : jumps_) max_total = std::min(max_total + law.max_jumps, kMaxMixtureTerms - 1);
  for (int t = 0; t <= max_total; ++t) {
    const size_t end = EnsureCompositions(t);
    for (size_t c = t > 0 ? total_ends_[static_cast<size_t>(t - 1)] : 0; c < end; ++c) {
      if (absl::Status s = deadline.Check("conditioned mixture: terms"); !s.ok()) return s;
      EnsurePowers(limits, c);
      const std::vector<double>& sum = powers_.sums[c];
      const int64_t first = powers_.firsts[c];
      const double log_scale = powers_.log_scales[c];
      const double log_weight = compositions_[c].log_weight;
      // E[D(eps - S_m)] = e^{log_scale} sum_i sum[i] D(eps - s_i).
      const BulkCurve& curve = Curve(c);
      double inner_top = -kInf;
      std::vector<double> logs(sum.size(), -kInf);
      for (size_t i = 0; i < sum.size(); ++i) {
        if (sum[i] <= 0) continue;
        const double s = h * static_cast<double>(first + static_cast<int64_t>(i));
        logs[i] = std::log(sum[i]) + curve.LogDelta(epsilon - s);
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
        const double d_lo = std::exp(curve.LogDelta(epsilon - limits.s_hi));
        out.log_delta = LogAddExp(out.log_delta, log_lumped + std::log(0.5 * (1 + d_lo)));
        lump_gap += std::exp(log_lumped) * 0.5 * (1 - d_lo);
      }
      out.terms += 1;
    }
    out.totals = t + 1;
    out.truncated_mass = 0;
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

absl::StatusOr<MixtureBounds> ConditionedMixture::DeltaBounds(double epsilon,
                                                              const Deadline& deadline,
                                                              double log_floor) const {
  return DeltaBoundsIn(epsilon, epsilon, epsilon, deadline, log_floor);
}

absl::StatusOr<MixtureBounds> ConditionedMixture::DeltaBoundsIn(double epsilon, double lo,
                                                                double hi,
                                                                const Deadline& deadline,
                                                                double log_floor) const {
  const double h = h_;
  const Limits limits = LimitsFor(lo, hi);
  MixtureBounds out;
  out.log_upper = -kInf;
  if (epsilon >= ess_sup_) return out;  // delta = 0 exactly
  // Jumps beyond the tabulated cells: Pr[some step has one] <= sum_g k_g beyond_g.
  // A law with p > 0 but no tabulated cell (rounding) has all its jumps beyond.
  double beyond = 0;
  for (const JumpLaw& law : jumps_) beyond += law.k * (law.max_jumps > 0 ? law.beyond : law.p);
  int max_total = 0;
  for (const JumpLaw& law : jumps_) max_total = std::min(max_total + law.max_jumps, kMaxMixtureTerms - 1);
  double truncated = 0;
  for (int t = 0; t <= max_total; ++t) {
    const size_t end = EnsureCompositions(t);
    const double shift = h * t;  // S_up = S_down + T h
    for (size_t c = t > 0 ? total_ends_[static_cast<size_t>(t - 1)] : 0; c < end; ++c) {
      if (absl::Status s = deadline.Check("conditioned mixture: bounds"); !s.ok()) return s;
      EnsurePowers(limits, c, Chain::kLowerEnds);
      const Powers& pw = bound_powers_;
      const std::vector<double>& sum = pw.sums[c];
      const double log_w = compositions_[c].log_weight + pw.log_scales[c];
      const BulkBound& bound = Bound(c);
      double lower = -kInf, upper = -kInf, skipped = 0;
      // Entries below kSkipFraction of the floor are counted with D in [0, 1].
      const double skip_below =
          log_floor + std::log(kSkipFraction) - compositions_[c].log_weight - pw.log_scales[c];
      for (size_t i = 0; i < sum.size(); ++i) {
        if (sum[i] <= 0) continue;
        const double log_p = std::log(sum[i]);
        if (log_p < skip_below) {
          skipped += sum[i];
          continue;
        }
        const double s = h * static_cast<double>(pw.firsts[c] + static_cast<int64_t>(i));
        lower = LogAddExp(lower, log_p + bound.LogLower(epsilon - s));
        upper = LogAddExp(upper, log_p + bound.LogUpper(epsilon - s - shift));
      }
      if (skipped > 0) upper = LogAddExp(upper, std::log(skipped));
      out.log_lower = LogAddExp(out.log_lower, log_w + lower);
      out.log_upper = LogAddExp(out.log_upper, log_w + upper);
      const double log_weight = compositions_[c].log_weight;
      // Lumped (above s_hi): D <= 1; D >= its lower bound at s_hi when no jump is
      // negative (a lumped sum then stays above s_hi).
      if (pw.log_lumped[c] > -kInf) {
        out.log_upper = LogAddExp(out.log_upper, log_weight + pw.log_lumped[c]);
        if (!negative_jumps_) {
          out.log_lower = LogAddExp(out.log_lower, log_weight + pw.log_lumped[c] +
                                                       bound.LogLower(epsilon - limits.s_hi));
        }
      }
      // Trimmed entries: D <= 1. Below s_lo (no jump positive, so they stay below):
      // S_up < s_lo + T h.
      out.log_upper = LogAddExp(out.log_upper, log_weight + pw.log_dropped[c]);
      if (pw.log_below[c] > -kInf) {
        out.log_upper =
            LogAddExp(out.log_upper, log_weight + pw.log_below[c] +
                                         bound.LogUpper(epsilon - limits.s_lo - shift));
      }
    }
    // Pr[T > t] <= b_T(t+1) / (1 - r), r = b_T(t+2) / b_T(t+1) (log-concavity).
    const double log_next = LogTotalMass(t + 1);
    truncated = 0;
    if (log_next == -kInf) break;
    const double r = std::exp(LogTotalMass(t + 2) - log_next);
    truncated = r < 1 ? std::exp(log_next - std::log1p(-r)) : 1;
    if (r < 1 && log_next - std::log1p(-r) <=
                     std::log(kMixtureTailFraction) + std::max(out.log_upper, log_floor)) {
      break;
    }
  }
  // The weights and sums carry rounding too: the same relative margin as D's.
  out.log_upper =
      std::min(0.0, LogAddExp(out.log_upper, std::log(truncated + beyond)) + kSumMargin);
  out.log_lower -= kSumMargin;
  return out;
}

absl::StatusOr<double> ConditionedMixture::Epsilon(double delta, double lo, double hi,
                                                   const Deadline& deadline) const {
  const double log_target = std::log(delta);
  // One set of limits for the whole search, so the convolution powers are
  // computed once.
  const Limits limits = LimitsFor(lo, hi);
  auto f = [&](double eps) -> absl::StatusOr<double> {
    // Terms below kMixtureTailFraction of the target cannot move the crossing.
    absl::StatusOr<MixtureDelta> d = DeltaWithLimits(eps, limits, deadline, log_target);
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
