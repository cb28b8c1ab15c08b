#include "core/accountants/pld_engine.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <cstdlib>
#include <limits>
#include <optional>

#include "absl/strings/str_format.h"
#include "core/accountants/pld_window.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

// Share of the certified delta that truncation may add (pessimistic) in total:
// it moves epsilon by about kTruncationShare / tilt, far inside the accuracy target.
// Tighter precision targets lower it (PldEngine::TruncationShare).
constexpr double kTruncationShare = 1e-4;
// Tilted mass allowed to wrap around the FFT circle, relative to the height of the
// composed tilted law (about h / sd). It is above the FFT round-off (~1e-16 of the
// peak) and is charged to both bounds (pld_window.h: wrap-around), so it costs width only.
constexpr double kWrapShare = 1e-12;
// Step-tail masses are kept within these (powers of 10, for cache reuse).
constexpr double kMinStepTail = 1e-250, kMaxStepTail = 1e-10;
// When a first grid does not fit max_grid_points, coarsen this many times.
constexpr int kMaxCoarsenings = 8;
constexpr double kU = std::numeric_limits<double>::epsilon() / 2;
// NarrowWindowTilt's bound on the share of the precision target that a smaller
// tilt's FFT round-off may take (in the queried quantity).
constexpr double kRoundOffShare = 0.05;
// Finest first grid step (nats). Steps are chosen from the ledger's spread, which
// is ~1e-300 for sigma = 1e300 or pure_dp epsilon = 1e-300 (issue 11: a zero step
// hung InitialStep's doubling loop); 2^-40 nats is far below any budget's
// resolution, and a coarser grid only widens the still certified interval.
constexpr double kMinStep = 0x1p-40;
// Most restarts of an epsilon query's first grid at a finer step (PldEngine::Epsilon).
constexpr int kMaxRestarts = 3;

double FloorPow2(double x) { return std::exp2(std::floor(std::log2(x))); }
double FloorPow10(double x) { return std::pow(10.0, std::floor(std::log10(x))); }

// The direction whose law a step of `m` has (symmetric mechanisms: one law).
Direction LawDirection(const Mechanism& m, Direction d) {
  return m.is_symmetric() ? Direction::kRemove : d;
}

// The sum of the steps' largest finite losses (+inf when some step's is unbounded)
// and the probability of an infinite loss.
struct LossBound {
  double max_loss = 0, inf_mass = 0;
};
LossBound LedgerLossBound(std::span<const MechanismEvent> events, Direction direction) {
  double max_loss = 0, log_finite = 0;
  for (const MechanismEvent& e : events) {
    std::unique_ptr<Plrv> plrv = MakePlrv(e.mechanism, direction);
    max_loss += static_cast<double>(e.count) * plrv->LossMax();
    log_finite += static_cast<double>(e.count) * std::log1p(-plrv->InfiniteLossMass());
  }
  // max with +0: -expm1(0) is -0, which would print as "-0.0".
  return {max_loss, std::max(0.0, -std::expm1(log_finite))};
}

}  // namespace

template <typename K, typename V>
std::shared_ptr<const V> PldEngine::Cache<K, V>::Find(const K& key) {
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].key == key) {
      Entry e = std::move(entries[i]);
      entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(i));
      entries.push_back(std::move(e));
      return entries.back().value;
    }
  }
  return nullptr;
}

template <typename K, typename V>
void PldEngine::Cache<K, V>::Put(const K& key, std::shared_ptr<const V> value, size_t bytes) {
  while (!entries.empty() && total_bytes + bytes > cap_bytes) {
    total_bytes -= entries.front().bytes;
    entries.erase(entries.begin());
  }
  entries.push_back({key, std::move(value), bytes});
  total_bytes += bytes;
}

absl::StatusOr<std::shared_ptr<const PldEngine::StepEntry>> PldEngine::Step(const StepKey& key) {
  if (auto hit = steps_.Find(key)) return hit;
  if (absl::Status s = deadline_.Check("pld: discretising a step"); !s.ok()) return s;
  absl::StatusOr<StepDiscretization> d = DiscretizeStep(
      *MakePlrv(key.mechanism, key.direction), key.h, key.tail, options_.max_grid_points);
  if (!d.ok()) {
    return absl::Status(d.status().code(), absl::StrFormat("%s: %s", key.mechanism.ToSpec(),
                                                           std::string(d.status().message())));
  }
  auto e = std::make_shared<StepEntry>();
  e->disc = std::move(*d);
  e->pess = PessimisticPmf(e->disc);
  const size_t bytes = 8 * (4 * e->disc.pess_mass.size() + 64);  // pess, opt (3 each), pmf
  steps_.Put(key, e, bytes);
  return std::shared_ptr<const StepEntry>(e);
}

absl::StatusOr<std::shared_ptr<const PldEngine::TiltEntry>> PldEngine::Tilted(const TiltKey& key) {
  if (auto hit = tilts_.Find(key)) return hit;
  absl::StatusOr<std::shared_ptr<const StepEntry>> step = Step(key.step);
  if (!step.ok()) return step.status();
  auto e = std::make_shared<TiltEntry>();
  e->pmf = key.side == PldSide::kPessimistic ? (*step)->pess
                                             : OptimisticPmf((*step)->disc, key.tilt);
  e->tilted = Tilt(e->pmf, key.tilt);
  const TiltedPmf untilted = Tilt(e->pmf, 0);
  e->mean0 = untilted.mean;
  e->var0 = untilted.var;
  tilts_.Put(key, e, 8 * (2 * e->pmf.log_mass.size() + 64));
  return std::shared_ptr<const TiltEntry>(e);
}

absl::StatusOr<std::shared_ptr<const Spectrum>> PldEngine::SpectrumFor(const SpectrumKey& key) {
  if (auto hit = spectra_.Find(key)) return hit;
  absl::StatusOr<std::shared_ptr<const TiltEntry>> t = Tilted(key.tilted);
  if (!t.ok()) return t.status();
  auto s = std::make_shared<Spectrum>(ComputeSpectrum((*t)->tilted, key.n));
  spectra_.Put(key, s, 16 * s->values.size() + 64);
  return std::shared_ptr<const Spectrum>(s);
}

absl::StatusOr<PldEngine::SideParts> PldEngine::PartsFor(std::span<const MechanismEvent> events,
                                                         Direction direction, const PldPlan& plan,
                                                         double h, double tail, PldSide side) {
  SideParts sp;
  for (const MechanismEvent& e : events) {
    TiltKey key{{e.mechanism, LawDirection(e.mechanism, direction), h, tail}, plan.tilt, side};
    absl::StatusOr<std::shared_ptr<const TiltEntry>> t = Tilted(key);
    if (!t.ok()) return t.status();
    sp.held.push_back(*t);
    sp.keys.push_back(key);
    sp.parts.push_back({&(*t)->pmf, &(*t)->tilted, (*t)->mean0, (*t)->var0, e.count});
  }
  return sp;
}

absl::StatusOr<WindowPlan> PldEngine::WindowFor(const SideParts& sp, const PldPlan& plan, double h,
                                                double log_budget) const {
  WindowBudget budget;
  budget.log_untilted = log_budget;
  budget.log_wrap = std::log(kWrapShare * h / std::max(plan.sd, h));
  return PlanWindow(sp.parts, h, plan.tilt, budget, options_.max_grid_points, deadline_);
}

absl::StatusOr<ComposedWindow> PldEngine::ComposeSide(std::span<const MechanismEvent> events,
                                                      Direction direction, const PldPlan& plan,
                                                      double h, double tail, double log_budget,
                                                      PldSide side) {
  absl::StatusOr<SideParts> sp = PartsFor(events, direction, plan, h, tail, side);
  if (!sp.ok()) return sp.status();
  if (absl::Status s = deadline_.Check("pld: composing the ledger"); !s.ok()) return s;
  absl::StatusOr<WindowPlan> wp = WindowFor(*sp, plan, h, log_budget);
  if (!wp.ok()) return wp.status();
  std::vector<std::shared_ptr<const Spectrum>> spectra;
  std::vector<SpectrumPower> powers;
  for (size_t i = 0; i < sp->keys.size(); ++i) {
    if (absl::Status s = deadline_.Check("pld: transforming a step"); !s.ok()) return s;
    absl::StatusOr<std::shared_ptr<const Spectrum>> s = SpectrumFor({sp->keys[i], wp->n});
    if (!s.ok()) return s.status();
    spectra.push_back(*s);
    powers.push_back({spectra.back().get(), sp->parts[i].count});
  }
  return AssembleWindow(*wp, ComposeCircular(powers), sp->parts, side);
}

// Why a smaller tilt: the tilt only decides where FFT round-off is smallest and how
// wide the window is, never validity (pld_window.h). The tilt that centres the grid
// law on epsilon can make its upper tail heavy (rare sampled steps: the tilted law
// has a Poisson number of jumps to the top of the step grids), so the window spans
// ~20 nats where the law's spread is ~1 (1e4 DP-SGD steps, q = 1e-3: 262144 points
// instead of 65536). A smaller tilt t is taken when its window needs fewer points
// and its round-off is still negligible, estimated as follows. The round-off bound
// on each composed entry is about k kappa(n) times the tilted peak h / (sd sqrt(2 pi))
// (k steps, pld_convolve.h); the pessimistic curve adds it to every entry above
// epsilon, untilted by e^{K(t) - t l}, which sums to about k kappa(n) e^{K(t) - t eps}
// / (sqrt(2 pi) sd t). Relative to delta it is at most that over delta, as the
// tilted mass above epsilon is at least e^{t eps - K(t)} delta. t is taken when this
// share is below max_share: kRoundOffShare (5%) of the precision target for delta
// queries; for epsilon queries the share moves epsilon by about share / lambda nats,
// lambda the tilt centred on epsilon (-d log delta / d eps ~ lambda, e.g. the
// Gaussian's Mills-ratio asymptotics), so there 5% of the target times
// max(1, lambda eps). The interval is then the same to a few percent of its width,
// in practice to ~1e-7 relative.
absl::StatusOr<PldPlan> PldEngine::NarrowWindowTilt(std::span<const MechanismEvent> events,
                                                    Direction direction, const PldPlan& plan,
                                                    double h, double log_delta_target,
                                                    double epsilon, double max_share,
                                                    double log_delta) {
  if (!(plan.tilt > 0)) return plan;
  const double tail = StepTail(plan, log_delta_target);
  const double log_budget = std::log(TruncationShare()) + log_delta_target;
  constexpr int64_t kNoFit = std::numeric_limits<int64_t>::max();
  struct Size {
    int64_t n;  // FFT size of the pessimistic window (kNoFit above the grid cap)
    double k;   // K(tilt) of the pessimistic grid laws
  };
  // Also sets p's centre and spread from the same tilted grid laws.
  auto size_at = [&](PldPlan& p) -> absl::StatusOr<Size> {
    absl::StatusOr<SideParts> sp = PartsFor(events, direction, p, h, tail, PldSide::kPessimistic);
    if (!sp.ok()) return sp.status();
    double center = 0, var = 0, k = 0;
    for (const WindowPart& part : sp->parts) {
      const double c = static_cast<double>(part.count);
      center += c * part.tilted->mean;
      var += c * part.tilted->var;
      k += c * part.tilted->log_norm;
    }
    p.center = center;
    p.sd = std::sqrt(var);
    absl::StatusOr<WindowPlan> wp = WindowFor(*sp, p, h, log_budget);
    if (!wp.ok()) {
      if (wp.status().code() == absl::StatusCode::kOutOfRange) return Size{kNoFit, k};
      return wp.status();
    }
    return Size{wp->n, k};
  };
  PldPlan top = plan;
  absl::StatusOr<Size> top_size = size_at(top);
  if (!top_size.ok()) return top_size.status();
  PldPlan best = plan;
  int64_t best_n = top_size->n;
  // The share of delta that round-off adds at p's tilt (see above).
  auto round_off_share = [&](const PldPlan& p, const Size& size) {
    const double kappa = 16 * kU * (std::log2(static_cast<double>(size.n)) + 2);
    return plan.num_steps * kappa * std::exp(size.k - p.tilt * epsilon - log_delta) /
           (2.5 * std::max(p.sd, h) * std::max(p.tilt, 1.0));
  };
  for (double scale : {std::sqrt(0.5), 0.5}) {
    PldPlan p = plan;
    p.tilt = plan.tilt * scale;
    absl::StatusOr<Size> size = size_at(p);
    if (!size.ok()) return size.status();
    if (size->n < best_n && round_off_share(p, *size) <= max_share) {
      best = p;
      best_n = size->n;
    }
  }
  return best;
}

double PldEngine::TruncationShare() const {
  // A twentieth of the tighter target: 1e-4 for the defaults (unchanged), 5e-6 at 1e-4.
  if (truncation_relaxed_) return kTruncationShare;
  return std::min(kTruncationShare,
                  0.05 * std::min(options_.relative_accuracy, options_.delta_relative_accuracy));
}

bool PldEngine::RelaxTruncation() {
  if (truncation_relaxed_ || TruncationShare() >= kTruncationShare) return false;
  truncation_relaxed_ = true;
  return true;
}

double PldEngine::StepTail(const PldPlan& plan, double log_delta_target) const {
  if (options_.tail_mass_truncation > 0) return options_.tail_mass_truncation;
  const double t = std::exp(std::log(TruncationShare()) + log_delta_target) /
                   std::max(plan.num_steps, 1.0);
  return FloorPow10(std::clamp(t, kMinStepTail, kMaxStepTail));
}

absl::StatusOr<PldPlan> PldEngine::PlanOnGrid(std::span<const MechanismEvent> events,
                                              Direction direction, const PldPlan& plan, double h,
                                              double tail, double epsilon) {
  std::vector<std::shared_ptr<const StepEntry>> steps;
  for (const MechanismEvent& e : events) {
    absl::StatusOr<std::shared_ptr<const StepEntry>> s =
        Step({e.mechanism, LawDirection(e.mechanism, direction), h, tail});
    if (!s.ok()) return s.status();
    steps.push_back(*s);
  }
  PldPlan out = plan;
  auto moments_at = [&](double t) {
    out.tilt = t;
    out.center = 0;
    double var = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
      const TiltedPmf tp = Tilt(steps[i]->pess, t);
      const double c = static_cast<double>(events[i].count);
      out.center += c * tp.mean;
      var += c * tp.var;
    }
    out.sd = std::sqrt(var);
    return out.center;
  };
  if (std::fabs(moments_at(plan.tilt) - epsilon) <= 3 * std::max(out.sd, h)) return out;
  // The tilted mean of the grid law increases with the tilt: bisect (in log tilt,
  // as the mean can jump by orders of magnitude where rare large losses take over).
  if (moments_at(0) >= epsilon) return out;
  double lo = 0, hi = 1;
  while (moments_at(hi) < epsilon) {
    lo = hi;
    hi *= 2;
    if (hi > kMaxTilt) return out;  // keep the largest tilt's moments
  }
  for (int it = 0; it < 60 && hi - lo > 1e-4 * hi; ++it) {
    const double mid = lo > 0 ? std::sqrt(lo * hi) : 0.5 * hi;
    (moments_at(mid) < epsilon ? lo : hi) = mid;
  }
  // Round onto the cached tilt lattice unless that moves the centre by more than
  // 1.5 standard deviations (the mean is steep here).
  const double raw = hi, raw_center = moments_at(hi), raw_sd = out.sd;
  if (std::fabs(moments_at(QuantizeTilt(raw)) - raw_center) > 1.5 * std::max(out.sd, h)) {
    out.tilt = raw;
    out.center = raw_center;
    out.sd = raw_sd;
  }
  return out;
}

absl::StatusOr<PldEngine::Curves> PldEngine::Compute(std::span<const MechanismEvent> events,
                                                     Direction direction, const PldPlan& plan,
                                                     double h, double log_delta_target,
                                                     bool with_opt) {
  const double log_budget = std::log(TruncationShare()) + log_delta_target;
  const double tail = StepTail(plan, log_delta_target);
  absl::StatusOr<ComposedWindow> pess =
      ComposeSide(events, direction, plan, h, tail, log_budget, PldSide::kPessimistic);
  if (!pess.ok()) return pess.status();
  Curves c{PldCurve(*pess), std::nullopt, static_cast<int64_t>(pess->w.size()), pess->outside,
           tail};
  if (with_opt) {
    if (absl::Status s = AddOptimistic(events, direction, plan, h, log_delta_target, &c); !s.ok()) {
      return s;
    }
  }
  return c;
}

absl::Status PldEngine::AddOptimistic(std::span<const MechanismEvent> events,
                                      Direction direction, const PldPlan& plan, double h,
                                      double log_delta_target, Curves* c) {
  const double log_budget = std::log(TruncationShare()) + log_delta_target;
  absl::StatusOr<ComposedWindow> opt =
      ComposeSide(events, direction, plan, h, c->tail, log_budget, PldSide::kOptimistic);
  if (!opt.ok()) return opt.status();
  c->opt.emplace(*opt);
  return absl::OkStatus();
}

double PldEngine::InitialStep(std::span<const MechanismEvent> events, Direction direction,
                              const PldPlan& plan, double epsilon_scale, double accuracy,
                              bool tilted) const {
  if (options_.value_discretization_interval > 0) {
    return FloorPow2(options_.value_discretization_interval);
  }
  double h = ChooseStep(plan, 0.25 * accuracy * epsilon_scale, tilted);
  if (!(h >= kMinStep)) h = kMinStep;  // also when NaN
  // A window of ~40 standard deviations, and each bounded step's whole support,
  // must fit the grid cap (a lopsided two-atom law has a tiny sd but a wide support).
  const double cap = static_cast<double>(options_.max_grid_points);
  double min_h = 40 * plan.sd / cap;
  for (const MechanismEvent& e : events) {
    std::unique_ptr<Plrv> plrv = MakePlrv(e.mechanism, direction);
    const double width = plrv->LossMax() - plrv->LossMin();
    if (std::isfinite(width)) min_h = std::max(min_h, 4 * width / cap);
  }
  if (!std::isfinite(min_h)) return h;  // no finite spread to fit: keep the budget's step
  while (h < min_h) h *= 2;
  return h;
}

absl::StatusOr<PldInterval> PldEngine::Delta(std::span<const MechanismEvent> events,
                                             Direction direction, double epsilon,
                                             double dominated_below) {
  truncation_relaxed_ = false;
  // At or above the largest finite loss, delta(eps) = Pr[S = +inf] exactly.
  const LossBound bound = LedgerLossBound(events, direction);
  if (epsilon >= bound.max_loss) return PldInterval{bound.inf_mass, bound.inf_mass, 0, 0, 0};
  absl::StatusOr<PldPlan> plan = PlanForEpsilon(events, direction, epsilon);
  if (!plan.ok()) return plan.status();
  const bool fixed = options_.value_discretization_interval > 0;
  // The first grid as for an epsilon target of half the delta target (what the
  // accountant used before the delta knob); the refinement below jumps from there.
  const double delta_accuracy = 0.5 * options_.delta_relative_accuracy;
  double h = InitialStep(events, direction, *plan, std::max(epsilon, plan->sd), delta_accuracy);
  double h_done = kInf;  // the step of the last grid that fitted
  // Truncation budgets are relative to the delta being computed, unknown at first:
  // start from the plan's estimate and tighten once if truncation came too close.
  double log_target = plan->log_delta_ref;
  PldInterval result;
  bool have = false, retargeted = false, replanned = false;
  int coarsenings = 0;
  for (int r = 0; r <= (fixed ? 0 : options_.max_refinements);) {
    absl::StatusOr<Curves> c = Compute(events, direction, *plan, h, log_target, replanned);
    if (!c.ok()) {
      // Past the deadline a finer grid is abandoned: the coarser interval stands.
      if (have && c.status().code() == absl::StatusCode::kDeadlineExceeded) break;
      if (c.status().code() != absl::StatusCode::kOutOfRange) return c.status();
      // A tight target's smaller truncation share widens the window: before giving
      // up this step, retry it with the default share (a tighter grid matters more).
      if (RelaxTruncation()) continue;
      if (have && 2 * h < h_done) {  // a jump too far: try one halving less
        h *= 2;
        continue;
      }
      if (have) {  // refining further does not fit: keep the certified answer
        result.stop = PldStop::kGridCap;
        result.stop_detail = std::string(c.status().message());
        break;
      }
      if (fixed || ++coarsenings > kMaxCoarsenings) return c.status();
      h *= 2;
      continue;
    }
    h_done = h;
    const double up = std::min(1.0, std::exp(c->pess.LogDelta(epsilon)));
    // Truncated mass above a tenth of the delta target (1e-3 of delta by default).
    const double outside_share = 0.1 * options_.delta_relative_accuracy;
    if (!retargeted && c->outside > outside_share * up && up > 0) {
      retargeted = true;
      log_target = std::log(up) + std::log(outside_share * up / c->outside);
      if (log_target < plan->log_delta_ref) continue;
    }
    if (!replanned) {  // as in Epsilon, once the truncation is settled
      replanned = true;
      absl::StatusOr<PldPlan> again = PlanOnGrid(events, direction, *plan, h, c->tail, epsilon);
      if (!again.ok()) return again.status();
      const bool moved = again->tilt != plan->tilt;
      plan = again;
      if (moved) {
        h = std::min(h, InitialStep(events, direction, *plan, std::max(epsilon, plan->sd),
                                    delta_accuracy));
      }
      absl::StatusOr<PldPlan> narrow =
          NarrowWindowTilt(events, direction, *plan, h, log_target, epsilon,
                           kRoundOffShare * options_.delta_relative_accuracy, std::log(up));
      // A moved plan's finer step whose grids exceed the cap (issue 15: 1e5 steps at
      // q = 1e-4, delta(1) at --pld-precision 1e-4 was this OUT_OF_RANGE error): keep
      // the tilt; the loop coarsens the step, or keeps the certified answer it has.
      if (!narrow.ok() && narrow.status().code() != absl::StatusCode::kOutOfRange) {
        return narrow.status();
      }
      const bool narrowed = narrow.ok() && narrow->tilt != plan->tilt;
      if (narrowed) plan = narrow;
      if (moved || narrowed) continue;
    }
    // The plan is settled: this grid's optimistic side (a failure is handled as for
    // the whole grid above, by computing both sides again).
    if (!c->opt && !AddOptimistic(events, direction, *plan, h, log_target, &*c).ok()) continue;
    const double low = std::min(up, std::exp(c->opt->LogDelta(epsilon)));
    // Every grid gives a certified interval: keep their intersection, and stop
    // refining once a finer grid no longer narrows it (round-off has taken over).
    const double prev_gap = have ? result.upper - result.lower : kInf;
    if (!have || up - low < prev_gap) result = {low, up, h, plan->tilt, c->n};
    if (have) {
      result.lower = std::max(result.lower, low);
      result.upper = std::min(result.upper, up);
    }
    have = true;
    const double target = options_.delta_relative_accuracy;
    const double width = RelativeExcess(result.lower, result.upper);
    if (MeetsPrecision(result.lower, result.upper, target) || result.upper <= 1e-300 ||
        result.upper <= dominated_below) {
      result.stop = PldStop::kTargetMet;
      break;
    }
    result.stop = fixed ? PldStop::kFixedStep
                  : up - low >= prev_gap ? PldStop::kRoundOff
                                         : PldStop::kRefinementCap;
    if (fixed || up - low >= prev_gap) break;
    const int halvings = HalvingsToTarget(width, target, options_.max_refinements - r);
    h = std::ldexp(h, -halvings);
    r += halvings;
  }
  return result;
}

absl::StatusOr<PldInterval> PldEngine::Epsilon(std::span<const MechanismEvent> events,
                                               Direction direction, double delta,
                                               double dominated_below) {
  truncation_relaxed_ = false;
  // Losses bounded above by B (the add direction of subsampled mechanisms, -log(1 - q)
  // a step) give delta(B) = Pr[S = +inf] < delta, so epsilon(delta) <= B: when another
  // direction's lower end is already >= B, B settles this one without a grid (the
  // answer's ends are then the other direction's). B is rounded up by 1e-9 relative
  // (the sum of count * LossMax() is exact to far less).
  if (dominated_below > 0) {
    const LossBound bound = LedgerLossBound(events, direction);
    const double b = std::max(0.0, bound.max_loss) * (1 + 1e-9);
    if (b <= dominated_below && bound.inf_mass < delta) {
      return PldInterval{0, b, 0, 0, 0, PldStop::kTargetMet};
    }
  }
  absl::StatusOr<PldPlan> plan = PlanForDelta(events, direction, delta);
  if (!plan.ok()) return plan.status();
  const bool fixed = options_.value_discretization_interval > 0;
  const double accuracy = options_.relative_accuracy;
  double h = InitialStep(events, direction, *plan, std::max(plan->center, plan->sd), accuracy,
                         /*tilted=*/true);
  double h_done = kInf;  // the step of the last grid that fitted
  const double log_delta = std::log(delta);
  PldInterval result;
  bool have = false, replanned = false;
  int restarts = 0;
  double log_target = log_delta;
  int coarsenings = 0;
  // The smallest certified upper end seen before the first whole interval (a
  // restart or re-plan drops its grid): past the deadline it still answers [0, it].
  std::optional<PldInterval> upper_only;
  for (int r = 0; r <= (fixed ? 0 : options_.max_refinements);) {
    absl::StatusOr<Curves> c = Compute(events, direction, *plan, h, log_target, replanned);
    if (!c.ok()) {
      // Past the deadline a finer grid is abandoned: the coarser interval stands.
      if (have && c.status().code() == absl::StatusCode::kDeadlineExceeded) break;
      if (upper_only.has_value() && c.status().code() == absl::StatusCode::kDeadlineExceeded) {
        upper_only->stop = PldStop::kRefinementCap;
        upper_only->stop_detail = std::string(c.status().message());
        return *upper_only;
      }
      if (c.status().code() != absl::StatusCode::kOutOfRange) return c.status();
      if (RelaxTruncation()) continue;  // as in Delta
      if (have && 2 * h < h_done) {  // a jump too far: try one halving less
        h *= 2;
        continue;
      }
      if (have) {
        result.stop = PldStop::kGridCap;
        result.stop_detail = std::string(c.status().message());
        break;
      }
      if (fixed || ++coarsenings > kMaxCoarsenings) return c.status();
      h *= 2;
      continue;
    }
    h_done = h;
    absl::StatusOr<double> up = c->pess.Epsilon(log_delta);
    if (!up.ok()) {
      // Truncated mass reached delta (tails heavier than budgeted): shrink once.
      if (log_target < log_delta || up.status().code() != absl::StatusCode::kFailedPrecondition) {
        return up.status();
      }
      log_target = log_delta + std::log(1e-3) + log_delta - c->pess.log_outside();
      continue;
    }
    if (!have && (!upper_only.has_value() || *up < upper_only->upper)) {
      upper_only = PldInterval{0, *up, h, plan->tilt, c->n};
    }
    if (!replanned && !fixed && restarts < kMaxRestarts && *up > 0) {
      // The first step came from the saddle-point guess of epsilon. Where the
      // certified upper end is far below it (a short ledger of rare sampled steps:
      // sigma = 1, q = 1e-4, one step, delta = 1e-9 guesses 0.72 for 0.0078), that grid
      // is too coarse to place the tilt on: start again at the step for the epsilon
      // found when that is a quarter of the step or less (long ledgers guess within
      // that), at most kMaxRestarts times (each grid costs a quarter of the next).
      const double h_up = InitialStep(events, direction, *plan, *up, accuracy, /*tilted=*/true);
      if (h_up <= h / 4) {
        h = h_up;
        ++restarts;
        continue;
      }
      restarts = kMaxRestarts;
    }
    if (!replanned) {
      // The saddle-point guess of epsilon was off, or the exact CGF that guided it
      // is ruled by losses beyond the truncated tails (rare sampled steps: per step
      // K(t) ~ t^2/2 + (t + 1) log q): tilt the grid law for the epsilon found.
      replanned = true;
      absl::StatusOr<PldPlan> again = PlanOnGrid(events, direction, *plan, h, c->tail, *up);
      if (!again.ok()) return again.status();
      const bool moved = again->tilt != plan->tilt;
      plan = again;
      if (moved) {
        h = std::min(h, InitialStep(events, direction, *plan, std::max(plan->center, plan->sd),
                                    accuracy, /*tilted=*/true));
      }
      const double max_share = kRoundOffShare * accuracy * std::max(1.0, plan->tilt * *up);
      absl::StatusOr<PldPlan> narrow =
          NarrowWindowTilt(events, direction, *plan, h, log_target, *up, max_share, log_delta);
      // A moved plan's finer step whose grids exceed the cap (issue 15: 1e5 steps at
      // q = 1e-4, delta(1) at --pld-precision 1e-4 was this OUT_OF_RANGE error): keep
      // the tilt; the loop coarsens the step, or keeps the certified answer it has.
      if (!narrow.ok() && narrow.status().code() != absl::StatusCode::kOutOfRange) {
        return narrow.status();
      }
      const bool narrowed = narrow.ok() && narrow->tilt != plan->tilt;
      if (narrowed) plan = narrow;
      if (moved || narrowed) continue;
    }
    // As in Delta: the optimistic side once the plan is settled.
    if (!c->opt && !AddOptimistic(events, direction, *plan, h, log_target, &*c).ok()) continue;
    absl::StatusOr<double> low = c->opt->Epsilon(log_delta);
    if (!low.ok()) return low.status();
    const double prev_gap = have ? result.upper - result.lower : kInf;
    const double lo = std::min(*low, *up);
    if (!have || *up - lo < prev_gap) result = {lo, *up, h, plan->tilt, c->n};
    if (have) {  // intersection of certified intervals (see Delta)
      result.lower = std::max(result.lower, lo);
      result.upper = std::min(result.upper, *up);
    }
    have = true;
    const double width = RelativeExcess(result.lower, result.upper);
    if (MeetsPrecision(result.lower, result.upper, accuracy) || result.upper <= dominated_below) {
      result.stop = PldStop::kTargetMet;
      break;
    }
    result.stop = fixed ? PldStop::kFixedStep
                  : *up - lo >= prev_gap ? PldStop::kRoundOff
                                         : PldStop::kRefinementCap;
    if (fixed || *up - lo >= prev_gap) break;
    const int halvings = HalvingsToTarget(width, accuracy, options_.max_refinements - r);
    h = std::ldexp(h, -halvings);
    r += halvings;
  }
  // Still too wide (typically rare sampled steps and tiny delta, where the
  // saddle-point tilt puts delta in a valley of the tilted law and FFT round-off
  // dominates): certified intervals from other tilts intersect with this one.
  if (!fixed && have && !MeetsPrecision(result.lower, result.upper, accuracy) &&
      result.upper > dominated_below) {
    std::vector<double> tilts = {plan->tilt / 2, plan->tilt / 4};
    absl::StatusOr<PldPlan> mid = PlanForEpsilon(events, direction, 0.5 * (result.lower + result.upper));
    if (mid.ok()) tilts.push_back(mid->tilt);
    for (double t : tilts) {
      if (t == plan->tilt) continue;
      // These only tighten a certified interval: past the deadline keep it as is.
      if (deadline_.Expired()) break;
      absl::StatusOr<PldPlan> alt = PlanAtTilt(events, direction, t);
      if (!alt.ok()) continue;
      absl::StatusOr<Curves> c = Compute(events, direction, *alt, result.step, log_target);
      if (!c.ok()) continue;
      absl::StatusOr<double> up = c->pess.Epsilon(log_delta);
      absl::StatusOr<double> low = c->opt->Epsilon(log_delta);
      if (up.ok()) result.upper = std::min(result.upper, *up);
      if (low.ok()) result.lower = std::max(result.lower, std::min(*low, result.upper));
    }
    if (MeetsPrecision(result.lower, result.upper, accuracy)) result.stop = PldStop::kTargetMet;
  }
  return result;
}

}  // namespace dpledger::core
