// The saddle-point accountant conditioned on the number of sampled steps, for ONE
// neighbouring direction (docs/conditioned_mixture.md).
//
// With Poisson subsampling at small q the composed loss is a handful of rare
// jumps (was the record sampled?), and every expansion around a Gaussian fails
// (sigma 1, q 1e-3, 1000 steps, delta 1e-9: SP-CLT gives eps 1.11 against 0.411).
// Given the sampled counts j, though, the loss is a sum of smooth light-tailed
// terms, so this writes delta(eps) = sum_j w_j delta_j(eps) (conditioned_mixture.h)
// and evaluates each delta_j with EvaluateSpaDelta on the components' CGF
// (plrv_components.h). The SPA formulas, the Berry-Esseen interval and the
// moments-accountant cap hold for any finite measure, so each term keeps its
// certified [lower_j, upper_j], and
//   lower = (1 - e) sum_j w_j lower_j,
//   upper = (1 + e) sum_j w_j upper_j + excluded mass (e = kBinomialRelError),
//   estimate = sum_j w_j estimate_j (each clamped into its interval).
// Cost: one saddle solve per term; the box holds O(sqrt(n q log(1/delta)) +
// log(1/delta)) terms per group, independent of n for fixed n q.
//
// Not thread-safe (caches), as every Accountant.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/accountants/accountant.h"
#include "core/accountants/conditioned_mixture.h"
#include "core/accountants/spa_delta.h"
#include "core/accountants/spa_ledger_cgf.h"

namespace dpledger::core {

struct MixtureAnswer {
  double lower = 0, estimate = 0, upper = 0;
  int64_t num_terms = 0;      // terms of the mixture evaluated
  double excluded_mass = 0;   // binomial mass left out, added to the upper end
};

class SpaConditioned {
 public:
  explicit SpaConditioned(Direction direction) : direction_(direction), cgf_(direction) {}

  // Groups the ledger's subsampled mechanisms (plrv_components.h) and keeps the
  // others as they are.
  void SetLedger(std::span<const MechanismEvent> events);
  // True when the ledger has a subsampled mechanism (otherwise nothing to condition).
  bool applies() const { return !groups_.empty(); }

  // delta(eps) as above, the box planned for an excluded mass of
  // kMixtureTruncationFraction * delta_hint (delta_hint > 0: e.g. the
  // unconditioned estimate; a box too coarse for the answer is re-planned once).
  // FAILED_PRECONDITION when the box exceeds kMaxMixtureTerms.
  absl::StatusOr<MixtureAnswer> Delta(double epsilon, double delta_hint,
                                      SpaEstimator estimator) const;

  // epsilon(delta) by inverting the mixture (each end its own monotone root,
  // upper rounded up, lower down), starting the search at `eps_guess`.
  absl::StatusOr<MixtureAnswer> Epsilon(double delta, double eps_guess,
                                        SpaEstimator estimator) const;

 private:
  absl::StatusOr<MixtureAnswer> DeltaInBox(const MixtureBox& box, double epsilon,
                                           SpaEstimator estimator) const;

  Direction direction_;
  std::vector<SampledGroup> groups_;
  std::vector<double> fixed_counts_;  // counts of the laws after the 2M group laws
  mutable SpaLedgerCgf cgf_;
  // Warm starts for the saddle solver, per term index of the last box.
  mutable std::vector<double> t_start_;
};

}  // namespace dpledger::core
