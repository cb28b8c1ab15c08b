#include "core/mc/pool_ledger.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/mc/mc_step.h"
#include "core/mc/mixture_choice.h"

namespace dpledger::core::mc {

absl::Status LedgerPool::CheckQueryDirection(Direction query) const {
  if (Mirrors(query) && ledger_.has_infinite_loss()) {
    return absl::FailedPreconditionError(
        "the other direction by change of measure needs finite losses; this ledger has an "
        "approx_dp step with delta > 0 (use a pool sampling that direction)");
  }
  return absl::OkStatus();
}

absl::StatusOr<McStep> PoolLedger::StepFor(const MechanismEvent& event) const {
  if (event.count < 1 || event.count > kMaxEventCount) {
    return absl::InvalidArgumentError(
        absl::StrFormat("count must be in [1, 2^40], got %d", event.count));
  }
  if (num_steps_ + event.count >= (int64_t{1} << 56)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "count %d would take the pool past 2^56 steps", event.count));
  }
  if (options_.estimator == McEstimator::kSmc || options_.estimator == McEstimator::kTiltMixture) {
    return MakeMcStep(event.mechanism, options_.direction);
  }
  const Mechanism& m = event.mechanism;
  const double theta = ThetaMm(m.normalized_noise(), m.sampling_rate(), options_.target_epsilon);
  auto step = MakeTiltedMcStep(m, theta);
  if (!step.ok()) return absl::UnimplementedError(std::string(step.status().message()));
  return *step;
}

absl::StatusOr<McMixPair> PoolLedger::MixFor(const MechanismEvent& event) {
  auto same = [&](const auto& c) { return c.first == event.mechanism; };
  if (auto it = std::find_if(mix_cache_.begin(), mix_cache_.end(), same); it != mix_cache_.end()) {
    return it->second;
  }
  const auto& tl = options_.tilt_ledger;
  const bool in_plan = std::any_of(tl.begin(), tl.end(), [&](const MechanismEvent& e) {
    return e.mechanism == event.mechanism;
  });
  std::vector<MechanismEvent> ledger = in_plan ? tl : events_;
  if (!in_plan) ledger.push_back(event);
  auto choice = ChooseMixture(ledger, options_.target_epsilon, options_.direction);
  if (!choice.ok()) {
    return absl::UnimplementedError(absl::StrFormat(
        "the tilt_mixture pool cannot choose a proposal for %s: %s",
        std::string(MechanismKindName(event.mechanism.kind())), choice.status().message()));
  }
  for (size_t i = 0; i < ledger.size(); ++i) {
    if (ledger[i].mechanism == event.mechanism) {
      McMixPair pair{choice->mixes[i], choice->mixes[i], !choice->second.empty()};
      if (pair.two) pair.b = choice->second[i];
      mix_cache_.emplace_back(event.mechanism, pair);
      return pair;
    }
  }
  return McMixPair{};
}

int32_t PoolLedger::Add(const MechanismEvent& event, const McStep& step, int64_t* first_step,
                        const McMixPair& mix) {
  *first_step = num_steps_;
  if (!events_.empty() && events_.back().mechanism == event.mechanism) {
    events_.back().count += event.count;
  } else {
    events_.push_back(event);
    steps_.push_back(step);
    mixes_.push_back(mix);
    first_steps_.push_back(num_steps_);
  }
  num_steps_ += event.count;
  if (step.kind == kStepDiscrete && step.p_inf > 0) has_infinite_loss_ = true;
  if (!event.mechanism.is_symmetric()) symmetric_ = false;
  if (mix.two) two_ = true;
  return static_cast<int32_t>(events_.size() - 1);
}

uint32_t PoolLedger::stream() const {
  if (options_.estimator == McEstimator::kImportanceSampling) return kStreamPoolIs;
  if (options_.estimator == McEstimator::kTiltMixture) {
    return options_.direction == Direction::kAdd ? kStreamPoolMixAdd : kStreamPoolMix;
  }
  return options_.direction == Direction::kAdd ? kStreamPoolAdd : kStreamPoolRemove;
}

absl::Status ValidatePoolOptions(const SamplePoolOptions& o) {
  if (o.num_paths < 2 || o.num_paths > kMaxMcSamples) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "num_paths must be in [2, %d] (kMaxMcSamples, bounding pool memory), got %d",
        kMaxMcSamples, o.num_paths));
  }
  if (o.estimator == McEstimator::kTiltEvery || o.estimator == McEstimator::kTiltLoss) {
    return absl::UnimplementedError(
        "sample pools hold smc, is or tilt_mixture paths; tilt_every and tilt_loss are "
        "streaming only");
  }
  if (o.estimator == McEstimator::kImportanceSampling || o.estimator == McEstimator::kTiltMixture) {
    if (o.direction != Direction::kRemove && o.estimator == McEstimator::kImportanceSampling) {
      return absl::UnimplementedError(absl::StrFormat(
          "an %s pool samples the remove direction only (mc-evr.md 6.5)",
          std::string(McEstimatorName(o.estimator))));
    }
    if (!std::isfinite(o.target_epsilon) || o.target_epsilon < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "target_epsilon must be finite and >= 0, got %g", o.target_epsilon));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateGrow(int64_t current, int64_t num_paths) {
  if (num_paths < current || num_paths > kMaxMcSamples) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "num_paths must be in [%d (the current count), %d (kMaxMcSamples)], got %d", current,
        kMaxMcSamples, num_paths));
  }
  return absl::OkStatus();
}

}  // namespace dpledger::core::mc
