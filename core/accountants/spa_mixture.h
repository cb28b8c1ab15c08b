// delta(eps) of one neighbouring direction conditioned on the number of jump
// steps of each subsampled mechanism (issue 15 item 2; derivation and
// measurements in docs/conditioned_mixture.md).
//
// For a ledger with G >= 1 distinct Poisson-subsampled mechanisms (q < 1), g
// applied k_g times (any other mechanisms enter in full), split each per-step
// loss Y_g at a threshold c_g: a jump when |Y_g| > c_g (probability p_g), else
// bulk. With M_g ~ Binomial(k_g, p_g) independent (the vector M = (M_g) has the
// law prod_g b(m_g; k_g, p_g)), S_M the sum of all jump losses and B_{k-M} the
// bulk (k_g - M_g restricted steps of each g plus the rest of the ledger),
//   delta(eps) = sum_m prod_g b(m_g; k_g, p_g) E[D_{k-m}(eps - S_m)],
//   D_n(x) = E[(1 - e^{x - B_n})_+]
// exactly (independence of the steps; given M = m the jump set of each mechanism
// is exchangeable). The law of S_m is computed numerically: each jump law given
// |Y_g| > c_g on a lattice of common width h = min(2e-3, min_g c_g/2) >= 2.5e-4
// nats, each cell's P-mass split between its two ends so that its P- and Q-masses
// are both kept (connect the dots: second order in h), convolved DIRECTLY
// (non-negative sums keep full relative precision at 1e-20, which an FFT does
// not). Every entry is a probability <= 1, so dropping the ends below 1e-60 of
// the largest loses less than 1e-55 per term (a tilt e^{theta y} that would keep
// fewer entries dropped mass that mattered: eps 1.3% low at q = 0.01, 1e4 steps,
// delta 1e-12). Sums above eps + 4 are lumped (D ~ 1 there), sums below eps
// minus the bulk's reach are dropped when no jump is positive (D ~ 0, and only
// negative jumps follow). D_n is the bulk's saddle-point approximation
// (spa_mixture_bulk.h; SP-EW2 measured within 0.1% of PLD, SP-CLT up to 2% off),
// accurate because the bulk has no jumps. c_g is chosen so that k_g p_g =
// kExpectedJumps / G: the number of terms then depends on delta (and G) only,
// not on k.
//
// Truncation (proven): terms are summed by the total count T = sum_g M_g, a
// Poisson-binomial variable (a sum of independent Bernoulli trials), whose pmf
// b_T is log-concave (Newton's inequalities, Hardy-Littlewood-Polya,
// "Inequalities", Thm 51), so b_T(j+1)/b_T(j) is non-increasing and
//   Pr[T > t] <= b_T(t+1) / (1 - r),  r = b_T(t+2) / b_T(t+1) < 1.
// Since D <= 1, the terms left out add at most that mass. They stop once it is
// below kMixtureTailFraction of the sum so far; it is reported, plus the lumps'
// uncertainty, as truncated_mass.
//
// What the number is: an ESTIMATE (the bulk's SPA carries no error bound here).
//
// Proven bounds (DeltaBounds; docs/conditioned_mixture.md "What is certified"):
// * Jumps: D is non-increasing in x. A second chain of the same convolutions puts
//   each jump cell's whole P-mass at its LOWER end (S_down <= S, per step); the
//   upper ends give S_up = S_down + T h exactly (T jumps). So
//   E[D(eps - S_down)] <= E[D(eps - S)] <= E[D(eps - S_up)], both read off one chain.
// * Bulk: at each lattice point the proven BulkBound (spa_mixture_bulk.h: cells at
//   their ends, Theorem 5 of spa.md 5.1 at the nearest tabulated tilt, the exact
//   complement below the mean).
// * Mass left out, all tracked exactly: the binomial tail beyond the totals summed
//   (log-concavity, above; upper only); jump cells beyond the tabulated ones
//   (Pr[some step lands there] <= sum_g k_g Pr[beyond]; upper only); entries
//   dropped below kConvolutionFloor (upper: D <= 1); sums lumped above s_hi
//   (upper: D <= 1; lower: D >= lower(eps - s_hi), only when no jump is negative,
//   so a lumped sum stays above s_hi); sums dropped below s_lo (only when no jump
//   is positive, so they stay below: upper D <= upper(eps - s_lo - T h)).
// The bounds rest on: the PLRV's CDF/SF (cell masses), Plrv::Tilted's cumulants
// and P_t for the other mechanisms (as the unconditioned SPA's certificate does),
// and floating-point margins (spa_mixture_bulk.h).
// Both directions use the same code: the add direction's PLRV is the law of the
// loss under Q (the e^{-L} change of measure of the doc), whose jumps are negative.
//
// Thread safety: not thread-safe (queries fill caches), like every Accountant.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/accountants/spa_mixture_bulk.h"
#include "core/mechanisms/mechanism.h"
#include "core/plrv/plrv.h"
#include "core/util/deadline.h"
#include "core/util/log_math.h"

namespace dpledger::core {

// Expected number of jump steps sum_g k_g p_g that fixes the thresholds c_g
// (each mechanism gets an equal share).
inline constexpr double kExpectedJumps = 1;
// Most distinct subsampled mechanisms conditioned on. The count vectors of total
// <= T number C(T + G, G) (T ~ 10-18 for delta 1e-5..1e-12), each a convolution and a
// bulk curve (docs/conditioned_mixture.md "Cost"). Measured, whole process, SG(1 +
// 0.1 g, g 1e-3) x 1000 for g = 1..G, CPU time of delta(1) / eps(1e-9): G = 3 1.7 /
// 2.3 s, G = 4 6.1 / 10.5 s, G = 5 14 / 44 s, G = 6 27 / 184 s, all within 0.1% of PLD.
// At this machine's usual load (9-11) G = 4 would be ~20-35 s of wall time (G = 2 ran
// ~3x its CPU time there), at the service's 30 s query cap (and the query then fails),
// so at most 3.
inline constexpr int kMaxJumpingMechanisms = 3;
// Cell width of the jump law (nats): midpoint cells, O(h^2) error, measured
// <= 0.1% against PLD at 2e-3; narrower (down to the minimum) where c/2 is.
inline constexpr double kJumpCellWidth = 2e-3;
inline constexpr double kMinJumpCellWidth = 2.5e-4;
// Stop adding terms when Pr[M > m] <= this fraction of the sum so far.
inline constexpr double kMixtureTailFraction = 1e-4;
// Most totals evaluated (T = 0 .. kMaxMixtureTerms - 1).
inline constexpr int kMaxMixtureTerms = 400;

// Proven bounds on one direction's delta(eps) (log).
struct MixtureBounds {
  double log_lower = -kInf, log_upper = 0;
};

struct MixtureDelta {
  double log_delta = 0;       // the estimate
  int terms = 0;              // mixture terms summed (count vectors m)
  int totals = 0;             // of total jump count 0 .. totals - 1
  double truncated_mass = 0;  // binomial mass of the terms left out (bounds their sum)
};

class ConditionedMixture {
 public:
  // FAILED_PRECONDITION naming why when the ledger has no Poisson-subsampled
  // mechanism with q < 1 or more than kMaxJumpingMechanisms distinct ones (then
  // callers answer unconditioned); errors of the bulk build pass through.
  static absl::StatusOr<std::unique_ptr<ConditionedMixture>> Build(
      std::span<const MechanismEvent> events, Direction direction, BulkEstimator estimator,
      const Deadline& deadline);

  // `log_floor`: terms stop once the binomial mass left is below
  // kMixtureTailFraction of max(estimate, e^log_floor) (e.g. the other direction's
  // answer, which the max over directions keeps).
  absl::StatusOr<MixtureDelta> Delta(double epsilon, const Deadline& deadline,
                                     double log_floor = -kInf) const;
  // Proven bounds on delta(eps) (header comment); `log_floor` as for Delta (it
  // only decides where the terms stop: what is left out is added to the upper).
  absl::StatusOr<MixtureBounds> DeltaBounds(double epsilon, const Deadline& deadline,
                                            double log_floor = -kInf) const;
  // For a search over eps in [lo, hi]: the same with the convolutions shared.
  absl::StatusOr<MixtureBounds> DeltaBoundsIn(double epsilon, double lo, double hi,
                                              const Deadline& deadline, double log_floor) const;
  // The eps in [lo, hi] where the estimate crosses delta (bisection on log delta,
  // to 1e-7 relative); lo or hi when it does not cross inside.
  absl::StatusOr<double> Epsilon(double delta, double lo, double hi,
                                 const Deadline& deadline) const;

  // The smallest threshold c_g (the diagnostic jump_threshold).
  double threshold() const;
  int mechanisms() const { return static_cast<int>(jumps_.size()); }
  Direction direction() const { return direction_; }

 private:
  ConditionedMixture() = default;
  // One distinct subsampled mechanism: k steps, threshold c, jump probability p,
  // jump cells y = h (j + 1/2), j >= first_cell, log of their mass given a jump,
  // log b(m; k, p) for m = 0.. (extended on demand).
  struct JumpLaw {
    std::unique_ptr<Plrv> plrv;
    double k = 0, threshold = 0, p = 0;
    int64_t first_cell = 0;
    std::vector<double> log_cell_mass;
    std::vector<double> log_cell_mass_down;  // each cell's P-mass at its lower end
    double beyond = 0;  // P-mass of jumps beyond the tabulated cells
    int max_jumps = 0;  // largest m with b(m) > 0 (0 when it has no jump cells)
    mutable std::vector<double> log_binomial;
  };
  double LogBinomial(const JumpLaw& law, int m) const;
  // A count vector m; its parent is m minus one jump of mechanism `via` (the
  // last with m_g > 0); log_weight = sum_g log b(m_g; k_g, p_g).
  struct Composition {
    std::vector<int> m;
    int total = 0, parent = -1, via = -1;
    double log_weight = 0;
  };
  // Appends every composition of each total up to `total` (by total, then
  // lexicographically); returns the index one past the last of `total`.
  size_t EnsureCompositions(int total) const;
  // log b_T(total) of the total count (-inf when no composition has it).
  double LogTotalMass(int total) const;
  // The bulk's restricted steps of each mechanism for a count vector: k_g - m_g.
  std::vector<double> BulkCounts(size_t composition) const;
  const BulkCurve& Curve(size_t composition) const;
  const BulkBound& Bound(size_t composition) const;
  // The lump and drop limits of the jump sums (for a range of queries).
  struct Limits {
    std::vector<int64_t> caps;  // jump cells of g from this offset on are lumped
    double s_hi;  // sums above this are lumped
    double s_lo;  // sums below this are dropped
    bool operator==(const Limits&) const = default;
  };
  // For queries at eps in [epsilon_lo, epsilon_hi].
  Limits LimitsFor(double epsilon_lo, double epsilon_hi) const;
  double CellLoss(const JumpLaw& law, int64_t offset) const;  // midpoint of a jump cell
  // The laws of S_m for compositions 0..index for these limits (cached;
  // extended on demand): the estimate's chain (connect-the-dots cells) or the
  // bounds' (each cell at its lower end).
  enum class Chain { kEstimate, kLowerEnds };
  void EnsurePowers(const Limits& limits, size_t index, Chain chain = Chain::kEstimate) const;
  absl::StatusOr<MixtureDelta> DeltaWithLimits(double epsilon, const Limits& limits,
                                             const Deadline& deadline, double log_floor) const;

  Direction direction_ = Direction::kRemove;
  std::vector<JumpLaw> jumps_;
  std::vector<std::unique_ptr<Plrv>> rest_plrvs_;
  double h_ = kJumpCellWidth;  // jump cell width
  double ess_sup_ = kInf;  // largest total loss
  std::optional<MixtureBulk> bulk_;
  mutable std::vector<Composition> compositions_;
  mutable std::vector<size_t> total_ends_;  // compositions of total t end at total_ends_[t]
  mutable std::vector<std::optional<BulkCurve>> curves_;
  mutable std::vector<std::optional<BulkBound>> bounds_;
  bool negative_jumps_ = false, positive_jumps_ = false;
  // S_m's law: sums[c][i] e^{log_scales[c]} = Pr[S_m = s_i], s_i = h (firsts[c] + i),
  // for composition c.
  struct Powers {
    std::optional<Limits> limits;
    std::vector<double> log_lump_cell;  // per g: log jump mass beyond the cap (given a jump)
    std::vector<std::vector<double>> cell;  // per g: jump lattice masses, largest 1
    std::vector<int64_t> cell_first;        // per g: lattice index of cell[g][0]
    std::vector<double> log_scale_cell;
    std::vector<double> log_lumped;  // log Pr[lumped | M = m]
    std::vector<double> log_drop_cell, log_below_cell;  // per g: cells trimmed / below s_lo
    std::vector<double> log_dropped;  // log Pr[trimmed away | M = m] (exact sums)
    std::vector<double> log_below;    // log Pr[dropped below s_lo | M = m]
    std::vector<std::vector<double>> sums;
    std::vector<int64_t> firsts;
    std::vector<double> log_scales;
  };
  mutable Powers powers_, bound_powers_;
};

}  // namespace dpledger::core
