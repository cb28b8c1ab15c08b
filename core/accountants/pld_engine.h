// The PLD computation behind PldAccountant, per neighbouring direction, with the
// caches that make repeated and incremental queries cheap. Exposed separately so
// tests can check one direction against direction-specific references.
//
// Thread safety: not thread-safe (queries fill caches). Copies share the cached,
// immutable grids and spectra.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/accountants/accountant.h"
#include "core/accountants/pld_accountant.h"
#include "core/accountants/pld_convolve.h"
#include "core/accountants/pld_curve.h"
#include "core/accountants/pld_discretize.h"
#include "core/accountants/pld_grid.h"
#include "core/accountants/pld_plan.h"
#include "core/accountants/pld_precision.h"
#include "core/accountants/pld_window.h"
#include "core/plrv/plrv.h"
#include "core/util/deadline.h"

namespace dpledger::core {

// Certified interval for one direction plus what produced it (diagnostics).
struct PldInterval {
  double lower = 0, upper = 0;
  double step = 0;   // grid step used (nats)
  double tilt = 0;
  int64_t fft_size = 0;
  // Why refinement stopped (pld_precision.h): kTargetMet, or the cap that was hit.
  PldStop stop = PldStop::kTargetMet;
  // kGridCap: what the next finer grid would have needed (its OUT_OF_RANGE message).
  std::string stop_detail = "";
};

class PldEngine {
 public:
  explicit PldEngine(const PldOptions& options) : options_(options) {}

  // Certified [lower, upper] on delta(epsilon) / epsilon(delta) of the ledger in
  // `direction` (the pair in that order, core/plrv/plrv.h).
  // dominated_below: stop refining once upper <= this (another direction already
  // has a larger lower bound); pass 0 for none.
  absl::StatusOr<PldInterval> Delta(std::span<const MechanismEvent> events, Direction direction,
                                    double epsilon, double dominated_below = 0);
  // dominated_below: stop refining once upper <= this (another direction already
  // has a larger lower bound); pass 0 for none. A ledger whose losses are bounded
  // above by B <= dominated_below (sum of count * Plrv::LossMax, e.g. the add
  // direction of subsampled steps) gets [0, B] without a grid: delta(B) =
  // E[(1 - e^{B - S})_+] = Pr[S = +inf] < delta, so epsilon(delta) <= B.
  absl::StatusOr<PldInterval> Epsilon(std::span<const MechanismEvent> events, Direction direction,
                                      double delta, double dominated_below = 0);

  // The deadline of the query in progress (Accountant::SetQueryTimeCap): Delta and
  // Epsilon return DEADLINE_EXCEEDED once it passes, checked before each grid
  // (discretisation, tilt search, FFT composition).
  void SetDeadline(const Deadline& deadline) { deadline_ = deadline; }

  // Bytes held by the step, tilt and spectrum caches (at most 256 MiB). Copies of an
  // engine share the cached values, so this overstates what a copy adds.
  size_t CacheBytes() const {
    return steps_.total_bytes + tilts_.total_bytes + spectra_.total_bytes;
  }

 private:
  struct StepKey {
    Mechanism mechanism;
    Direction direction;
    double h, tail;
    friend bool operator==(const StepKey&, const StepKey&) = default;
  };
  struct TiltKey {
    StepKey step;
    double tilt;
    PldSide side;
    friend bool operator==(const TiltKey&, const TiltKey&) = default;
  };
  struct SpectrumKey {
    TiltKey tilted;
    int64_t n;
    friend bool operator==(const SpectrumKey&, const SpectrumKey&) = default;
  };
  struct StepEntry {
    StepDiscretization disc;
    StepPmf pess;
  };
  struct TiltEntry {
    StepPmf pmf;  // the untilted grid this tilt came from
    TiltedPmf tilted;
    double mean0 = 0, var0 = 0;
  };
  // A small LRU map (linear search: a ledger has few distinct mechanisms) holding
  // at most `cap_bytes` of values.
  template <typename K, typename V>
  struct Cache {
    explicit Cache(size_t cap) : cap_bytes(cap) {}
    std::shared_ptr<const V> Find(const K& key);
    void Put(const K& key, std::shared_ptr<const V> value, size_t bytes);
    struct Entry {
      K key;
      std::shared_ptr<const V> value;
      size_t bytes;
    };
    std::vector<Entry> entries;  // least recently used first
    size_t cap_bytes, total_bytes = 0;
  };
  struct Curves {
    PldCurve pess;
    std::optional<PldCurve> opt;  // left out until the plan is settled (AddOptimistic)
    int64_t n;
    double outside;  // pessimistic mass counted as +infinity
    double tail;     // per-step tail mass the grids were truncated at
  };

  absl::StatusOr<std::shared_ptr<const StepEntry>> Step(const StepKey& key);
  absl::StatusOr<std::shared_ptr<const TiltEntry>> Tilted(const TiltKey& key);
  absl::StatusOr<std::shared_ptr<const Spectrum>> SpectrumFor(const SpectrumKey& key);
  // The pessimistic curve, and the optimistic one when with_opt (a grid whose plan
  // then moves needs only its pessimistic side: the optimistic one is never read).
  absl::StatusOr<Curves> Compute(std::span<const MechanismEvent> events, Direction direction,
                                 const PldPlan& plan, double h, double log_delta_target,
                                 bool with_opt = true);
  absl::Status AddOptimistic(std::span<const MechanismEvent> events, Direction direction,
                             const PldPlan& plan, double h, double log_delta_target, Curves* c);
  // One side's tilted step laws at `plan.tilt` (held) as window parts.
  struct SideParts {
    std::vector<TiltKey> keys;
    std::vector<std::shared_ptr<const TiltEntry>> held;
    std::vector<WindowPart> parts;
  };
  absl::StatusOr<SideParts> PartsFor(std::span<const MechanismEvent> events, Direction direction,
                                     const PldPlan& plan, double h, double tail, PldSide side);
  absl::StatusOr<WindowPlan> WindowFor(const SideParts& sp, const PldPlan& plan, double h,
                                       double log_budget) const;
  // The plan at a smaller tilt (plan.tilt / sqrt 2 or / 2) when its composed window
  // needs fewer FFT points and its FFT round-off at `epsilon`, where delta is about
  // e^{log_delta}, stays below `max_share` of delta (see the .cc); otherwise `plan`.
  absl::StatusOr<PldPlan> NarrowWindowTilt(std::span<const MechanismEvent> events,
                                           Direction direction, const PldPlan& plan, double h,
                                           double log_delta_target, double epsilon,
                                           double max_share, double log_delta);
  absl::StatusOr<ComposedWindow> ComposeSide(std::span<const MechanismEvent> events,
                                             Direction direction, const PldPlan& plan, double h,
                                             double tail, double log_budget, PldSide side);
  // Share of delta the truncated tails may add: 1e-4, less for tight targets
  // unless RelaxTruncation() went back to 1e-4 for the current query (it returns
  // false when there is nothing to relax).
  double TruncationShare() const;
  bool RelaxTruncation();
  double StepTail(const PldPlan& plan, double log_delta_target) const;
  // The plan on the discretised law actually composed (pessimistic grids at step h,
  // tails truncated at `tail`): at the tilt of the current plan if that law's
  // tilted centre is within 3 of its standard deviations of `epsilon`, else at the
  // tilt that centres it on `epsilon`.
  absl::StatusOr<PldPlan> PlanOnGrid(std::span<const MechanismEvent> events, Direction direction,
                                     const PldPlan& plan, double h, double tail, double epsilon);
  // Grid step for an epsilon error of about accuracy * epsilon_scale / 4
  // (ChooseStep; `tilted` for epsilon queries).
  double InitialStep(std::span<const MechanismEvent> events, Direction direction,
                     const PldPlan& plan, double epsilon_scale, double accuracy,
                     bool tilted = false) const;

  PldOptions options_;
  Deadline deadline_;
  bool truncation_relaxed_ = false;  // per query, see TruncationShare
  Cache<StepKey, StepEntry> steps_{size_t{64} << 20};
  Cache<TiltKey, TiltEntry> tilts_{size_t{64} << 20};
  Cache<SpectrumKey, Spectrum> spectra_{size_t{128} << 20};
};

}  // namespace dpledger::core
