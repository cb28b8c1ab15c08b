#include "core/accountants/spa_accountant.h"

#include <algorithm>
#include <array>
#include <optional>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/accountants/spa_epsilon.h"
#include "core/accountants/spa_ledger_cgf.h"
#include "core/accountants/spa_mixture.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

// Above this many expected sampled steps (k q) the unconditioned SPA is within 1%
// of PLD on every row of spa_accountant_test.cc (kq = 1000) and the mixture's bulk
// spreads over many nats (its convolutions grow), so auto leaves it
// unconditioned; at kq = 100 the unconditioned one is still 1.2% off.
constexpr double kMaxConditionedSampledSteps = 100;

// exp of a log upper bound, rounded so it stays an upper bound: below the
// smallest subnormal it becomes that subnormal instead of 0.
double ExpUpper(double log_value) {
  if (log_value == -kInf) return 0;
  const double v = std::exp(log_value);
  return v > 0 ? v : std::numeric_limits<double>::denorm_min();
}

class SpaAccountant final : public Accountant {
 public:
  explicit SpaAccountant(const SpaOptions& options) : options_(options) {}

  std::string_view Name() const override { return "spa"; }
  std::unique_ptr<Accountant> Clone() const override {
    auto clone = std::make_unique<SpaAccountant>(*this);
    clone->mixtures_ = {};  // their caches are not shared; rebuilt on use
    return clone;
  }
  std::vector<AnswerDiagnostic> LastDiagnostics() const override { return diagnostics_; }

 protected:
  absl::Status CheckSupported(const Mechanism& m) const override {
    if (m.kind() == MechanismKind::kApproxDp && m.delta() > 0) {
      return absl::UnimplementedError(absl::StrFormat(
          "the spa accountant needs a finite cumulant generating function; approx_dp with "
          "delta = %g > 0 has an infinite privacy loss",
          m.delta()));
    }
    return absl::OkStatus();
  }

  void OnLedgerChanged() override {
    remove_.SetLedger(events());
    bool symmetric = true;
    for (const MechanismEvent& e : events()) symmetric = symmetric && e.mechanism.is_symmetric();
    // Symmetric mechanisms have the same law in both directions: skip the second.
    use_add_ = !symmetric;
    if (use_add_) add_.SetLedger(events());
    mixtures_[0].reset();
    mixtures_[1].reset();
  }

  absl::StatusOr<DeltaBound> ComputeDelta(double epsilon) const override {
    diagnostics_.clear();
    DeltaBound out{0, 0, 0, Guarantee::kCertified, 0};
    const std::vector<const SpaLedgerCgf*> directions = Directions();
    std::vector<double> uncond_estimates;
    for (const SpaLedgerCgf* cgf : directions) {
      SpaDeltaOptions delta_options;
      delta_options.with_icml_k3 = options_.estimator == SpaEstimator::kIcmlK3;
      absl::StatusOr<SpaDeltaPoint> p = EvaluateSpaDelta(*cgf, epsilon, delta_options);
      if (!p.ok()) return p.status();
      NoteReliability(*cgf, *p);
      const double lower = p->log_lower == -kInf ? 0 : std::exp(p->log_lower);
      const double upper = ExpUpper(p->log_upper);
      const double estimate =
          std::clamp(std::exp(p->LogEstimate(options_.estimator)), lower, upper);
      // The composed mechanism's delta is the max over directions, so the max of
      // the lower bounds is still a lower bound (spa.md 10 item 11 says the smaller
      // lower; both are valid, the max is tighter).
      out.lower = std::max(out.lower, lower);
      out.estimate = std::max(out.estimate, estimate);
      out.upper = std::max(out.upper, upper);
      uncond_estimates.push_back(estimate);
    }
    absl::StatusOr<bool> conditioned = Conditioned(directions);
    if (!conditioned.ok()) return conditioned.status();
    if (*conditioned) {
      // The same max over directions, of the conditioned estimates, each clamped
      // into its direction's certified interval (the max of clamped values lies
      // in [out.lower, out.upper]).
      double estimate = 0, log_floor = -kInf;
      for (size_t i = 0; i < directions.size(); ++i) {
        log_floor = std::max(log_floor, std::log(uncond_estimates[i]) + std::log(1e-3));
      }
      for (const SpaLedgerCgf* cgf : directions) {
        const ConditionedMixture& mix = *Mixture(*cgf);
        absl::StatusOr<MixtureDelta> d = mix.Delta(epsilon, deadline(), log_floor);
        if (!d.ok()) return d.status();
        NoteMixture(mix, *d);
        estimate = std::max(estimate, std::exp(d->log_delta));
      }
      out.estimate = std::clamp(estimate, out.lower, out.upper);
    }
    return out;
  }

  absl::StatusOr<EpsilonBound> ComputeEpsilon(double delta) const override {
    diagnostics_.clear();
    EpsilonBound out{0, 0, 0, Guarantee::kCertified, 0};
    for (const SpaLedgerCgf* cgf : Directions()) {
      absl::StatusOr<SpaEpsilon> e = SpaEpsilonForDelta(*cgf, delta, options_.estimator);
      if (!e.ok()) return e.status();
      if (absl::StatusOr<SpaDeltaPoint> p = EvaluateSpaDelta(*cgf, e->estimate); p.ok()) {
        NoteReliability(*cgf, *p);
      }
      out.lower = std::max(out.lower, e->lower);
      out.estimate = std::max(out.estimate, e->estimate);
      out.upper = std::max(out.upper, e->upper);
    }
    const std::vector<const SpaLedgerCgf*> directions = Directions();
    absl::StatusOr<bool> conditioned = Conditioned(directions);
    if (!conditioned.ok()) return conditioned.status();
    if (*conditioned) {
      // eps(delta) of the composed ledger is the max over directions; each
      // direction's root lies in the certified [lower, upper] of the answer.
      double estimate = out.lower;
      for (const SpaLedgerCgf* cgf : directions) {
        const ConditionedMixture& mix = *Mixture(*cgf);
        absl::StatusOr<double> eps = mix.Epsilon(delta, out.lower, out.upper, deadline());
        if (!eps.ok()) return eps.status();
        absl::StatusOr<MixtureDelta> d = mix.Delta(*eps, deadline());
        if (!d.ok()) return d.status();
        NoteMixture(mix, *d);
        estimate = std::max(estimate, *eps);
      }
      out.estimate = std::clamp(estimate, out.lower, out.upper);
    }
    return out;
  }

 private:
  // Notes, per direction, err_SP / SP-CLT at the answer. Above 1 the method's own
  // error bound exceeds the estimate: few effective compositions (small q, see
  // spa_accountant.h), where every Gaussian-based estimate can be far off and
  // only the certified interval means anything; the answer then says so.
  void NoteReliability(const SpaLedgerCgf& cgf, const SpaDeltaPoint& p) const {
    if (p.zero || !p.has_saddle) return;
    const std::string dir = cgf.direction() == Direction::kRemove ? "remove_" : "add_";
    const double ratio = std::exp(p.log_err - p.log_clt);
    diagnostics_.push_back({dir + "err_sp_over_sp_clt", ratio});
    if (ratio > 1) {
      diagnostics_.push_back(
          {"estimate_warning",
           std::string("the saddle-point error bound exceeds the estimate (few effective "
                       "compositions, e.g. small q): the estimate may be far off; rely on "
                       "the certified interval")});
    }
  }

  // Whether the conditioned mixture answers this ledger's estimate; builds the
  // mixtures on first use after a ledger change and notes the path taken.
  absl::StatusOr<bool> Conditioned(const std::vector<const SpaLedgerCgf*>& directions) const {
    if (options_.conditioning == SpaConditioning::kOff) {
      diagnostics_.push_back({"conditioned", std::string("no: conditioning off")});
      return false;
    }
    // The small-q regime: at most kMaxConditionedSampledSteps expected sampled
    // steps of the subsampled mechanisms (sum of count * q).
    double sampled = 0;
    for (const MechanismEvent& e : events()) {
      if (e.mechanism.is_subsampled()) sampled += static_cast<double>(e.count) * e.mechanism.sampling_rate();
    }
    if (sampled > kMaxConditionedSampledSteps) {
      diagnostics_.push_back(
          {"conditioned", absl::StrFormat("no: %g expected sampled steps (> %g: the unconditioned "
                                          "saddle point is accurate there)",
                                          sampled, kMaxConditionedSampledSteps)});
      return false;
    }
    for (const SpaLedgerCgf* cgf : directions) {
      const int i = cgf->direction() == Direction::kRemove ? 0 : 1;
      if (mixtures_[i].has_value()) continue;
      absl::StatusOr<std::unique_ptr<ConditionedMixture>> built = ConditionedMixture::Build(
          events(), cgf->direction(), BulkEstimator::kEw2, deadline());
      if (built.ok()) {
        mixtures_[i] = std::shared_ptr<ConditionedMixture>(std::move(*built));
      } else {
        mixtures_[i] = built.status();
      }
      if (mixtures_[i]->status().code() == absl::StatusCode::kDeadlineExceeded) {
        absl::Status s = mixtures_[i]->status();
        mixtures_[i].reset();
        return s;
      }
    }
    for (const SpaLedgerCgf* cgf : directions) {
      const absl::Status& s = mixtures_[cgf->direction() == Direction::kRemove ? 0 : 1]->status();
      if (!s.ok()) {
        diagnostics_.push_back({"conditioned", "no: " + std::string(s.message())});
        return false;
      }
    }
    diagnostics_.push_back({"conditioned", std::string("yes")});
    return true;
  }
  const ConditionedMixture* Mixture(const SpaLedgerCgf& cgf) const {
    return mixtures_[cgf.direction() == Direction::kRemove ? 0 : 1]->value().get();
  }
  void NoteMixture(const ConditionedMixture& mix, const MixtureDelta& d) const {
    const std::string dir = mix.direction() == Direction::kRemove ? "remove_" : "add_";
    diagnostics_.push_back({dir + "mixture_terms", static_cast<double>(d.terms)});
    diagnostics_.push_back({dir + "truncated_mass", d.truncated_mass});
    diagnostics_.push_back({dir + "jump_threshold", mix.threshold()});
  }

  // The directions to query, carrying this query's deadline.
  std::vector<const SpaLedgerCgf*> Directions() const {
    remove_.SetDeadline(deadline());
    add_.SetDeadline(deadline());
    if (use_add_) return {&remove_, &add_};
    return {&remove_};
  }

  SpaOptions options_;
  SpaLedgerCgf remove_{Direction::kRemove};
  SpaLedgerCgf add_{Direction::kAdd};
  bool use_add_ = false;
  mutable std::vector<AnswerDiagnostic> diagnostics_;
  // Conditioned mixtures per direction (remove, add), built on first use; a
  // FAILED_PRECONDITION status says why a ledger has none.
  // Not shared with clones.
  mutable std::array<std::optional<absl::StatusOr<std::shared_ptr<ConditionedMixture>>>, 2>
      mixtures_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Accountant>> CreateSpaAccountant(const SpaOptions& options) {
  switch (options.estimator) {
    case SpaEstimator::kClt:
    case SpaEstimator::kMsd0:
    case SpaEstimator::kMsd1:
    case SpaEstimator::kEw2:
    case SpaEstimator::kIcmlK3:
      return std::make_unique<SpaAccountant>(options);
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("estimator must be clt, msd0, msd1, ew2 or icml-k3, got %d",
                      static_cast<int>(options.estimator)));
}

}  // namespace dpledger::core
