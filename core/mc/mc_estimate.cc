#include "core/mc/mc_estimate.h"

#include <chrono>
#include <cmath>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/mc/add_tilt.h"
#include "core/mc/largest_coordinate.h"
#include "core/mc/loss_tilt.h"
#include "core/mc/mc_cuda.h"
#include "core/mc/mc_parallel.h"
#include "core/mc/mc_step.h"
#include "core/mc/mc_stream_math.h"
#include "core/mc/mixture_choice.h"
#include "core/mc/path_sum.h"
#include "core/mc/request_checks.h"
#include "core/mc/tilt_choice.h"

namespace dpledger::core {
namespace {

using mc::StreamEvent;

bool IsGaussianKind(const Mechanism& m) {
  return m.kind() == MechanismKind::kGaussian || m.kind() == MechanismKind::kSubsampledGaussian;
}

// The tilts the request asks for: given, theta_MM per event (IS), or the saddle
// point's (kTiltEvery); empty for SMC.
absl::StatusOr<std::vector<double>> ResolveThetas(const McEstimateRequest& r) {
  if (r.estimator == McEstimator::kSmc || r.estimator == McEstimator::kTiltMixture ||
      !r.thetas.empty()) {
    return r.thetas;
  }
  if (r.estimator == McEstimator::kTiltEvery) {
    auto tilt = mc::ChooseSaddleTilt(r.events, r.epsilon);
    if (!tilt.ok()) return tilt.status();
    return std::move(tilt->thetas);
  }
  std::vector<double> thetas;
  for (const MechanismEvent& ev : r.events) {
    thetas.push_back(
        mc::ThetaMm(ev.mechanism.normalized_noise(), ev.mechanism.sampling_rate(), r.epsilon));
  }
  return thetas;
}

// The step law of one event for the every-coordinate tilt: tilted Gaussian kinds;
// theta = 0 is the untilted law written as a tilt (pi1 = q, no shift, log M = 0).
absl::StatusOr<mc::McStep> TiltEveryStep(const Mechanism& m, double theta, size_t i) {
  if (theta != 0) {
    if (!IsGaussianKind(m)) {
      return absl::UnimplementedError(absl::StrFormat(
          "thetas[%d] = %g: the tilt_every estimator tilts Gaussian and subsampled_gaussian "
          "steps only, got %s (give it theta 0)",
          i, theta, std::string(MechanismKindName(m.kind()))));
    }
    return mc::MakeTiltedMcStep(m, theta);
  }
  mc::McStep s = mc::MakeMcStep(m, Direction::kRemove);
  s.pi1 = s.q;
  return s;
}

absl::StatusOr<std::vector<StreamEvent>> BuildEvents(const McEstimateRequest& r,
                                                     const std::vector<double>& thetas,
                                                     const std::vector<mc::McMix>& mixes,
                                                     const std::vector<mc::McMix>& second,
                                                     int64_t* total_steps) {
  std::vector<StreamEvent> out;
  int64_t steps = 0;
  for (size_t i = 0; i < r.events.size(); ++i) {
    const MechanismEvent& ev = r.events[i];
    if (ev.count < 1 || ev.count > kMaxEventCount) {
      return absl::InvalidArgumentError(
          absl::StrFormat("events[%d].count must be in [1, 2^40], got %d", i, ev.count));
    }
    StreamEvent se;
    if (r.estimator == McEstimator::kTiltMixture) {
      se.step = mc::MakeMcStep(ev.mechanism, r.direction);
      se.mix = mixes[i];
      if (!second.empty()) {
        se.mix2 = second[i];
        se.two = true;
      }
    } else if (r.estimator == McEstimator::kTiltLoss) {
      se.step = mc::MakeMcStep(ev.mechanism, Direction::kRemove);
      auto loss = mc::MakeLossTilt(ev.mechanism, thetas[i], i);
      if (!loss.ok()) return loss.status();
      se.loss = *loss;
    } else if (r.estimator == McEstimator::kTiltEvery) {
      auto step = TiltEveryStep(ev.mechanism, thetas[i], i);
      if (!step.ok()) return step.status();
      se.step = *step;
    } else if (r.estimator == McEstimator::kImportanceSampling) {
      const double theta = thetas[i];
      auto step = mc::MakeTiltedMcStep(ev.mechanism, theta);
      if (!step.ok()) {
        if (step.status().code() == absl::StatusCode::kInvalidArgument &&
            std::isfinite(theta)) {
          return absl::UnimplementedError(std::string(step.status().message()));
        }
        return step.status();
      }
      se.step = *step;
    } else {
      se.step = mc::MakeMcStep(ev.mechanism, r.direction);
    }
    se.count = ev.count;
    se.first_step = steps;
    steps += ev.count;
    out.push_back(se);
  }
  *total_steps = steps;
  return out;
}

absl::Status Validate(const McEstimateRequest& r) {
  if (absl::Status s = mc::CheckCommonRequest(r); !s.ok()) return s;
  if (r.estimator != McEstimator::kSmc) {
    if (r.direction != Direction::kRemove && r.estimator != McEstimator::kTiltMixture) {
      return absl::UnimplementedError(absl::StrFormat(
          "the %s estimator covers the remove direction only (mc-evr.md 4.8); use SMC for "
          "direction add",
          std::string(McEstimatorName(r.estimator))));
    }
    for (size_t i = 0; i < r.thetas.size(); ++i) {
      if (!std::isfinite(r.thetas[i])) {
        return absl::InvalidArgumentError(
            absl::StrFormat("thetas[%d] must be finite, got %g", i, r.thetas[i]));
      }
    }
    if (!r.thetas.empty() && r.thetas.size() != r.events.size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "thetas must be empty or have one entry per event (%d), got %d", r.events.size(),
          r.thetas.size()));
    }
  }
  if (r.estimator == McEstimator::kTiltLoss && r.thetas.empty()) {
    return absl::InvalidArgumentError(
        "thetas (the loss-tilt orders, one per event) are required by the tilt_loss estimator");
  }
  if (!r.thetas.empty() && (r.estimator == McEstimator::kSmc ||
                            r.estimator == McEstimator::kTiltMixture)) {
    return absl::InvalidArgumentError(
        "thetas apply to the is, tilt_every and tilt_loss estimators only");
  }
  return absl::OkStatus();
}

mc::cuda::Totals CpuStream(const std::vector<StreamEvent>& events, int64_t total_steps, int32_t kind,
                           uint32_t stream, uint64_t seed, int64_t m, double eps, int threads) {
  return mc::SumPaths(m, threads, [&](uint64_t p) {
    return mc::StreamPath(kind, events.data(), static_cast<int>(events.size()),
                          static_cast<uint64_t>(total_steps), stream, seed, p, eps);
  });
}

}  // namespace

std::string_view McEstimatorName(McEstimator estimator) {
  switch (estimator) {
    case McEstimator::kSmc: return "smc";
    case McEstimator::kImportanceSampling: return "is";
    case McEstimator::kTiltEvery: return "tilt_every";
    case McEstimator::kTiltMixture: return "tilt_mixture";
    case McEstimator::kTiltLoss: return "tilt_loss";
    case McEstimator::kLargestCoordinate: return "largest";
    case McEstimator::kAddTilt: return "add_tilt";
  }
  return "unknown";
}

std::string_view McBackendName(McBackend backend) {
  switch (backend) {
    case McBackend::kAuto: return "auto";
    case McBackend::kCpu: return "cpu";
    case McBackend::kCuda: return "cuda";
  }
  return "unknown";
}

bool CudaDeviceAvailable() {
#if defined(DPLEDGER_HAVE_CUDA)
  static const bool available = mc::cuda::DeviceCount() > 0;
  return available;
#else
  return false;
#endif
}

void FinishEstimate(double sum_x, double sum_x2, int64_t num_positive, int64_t m,
                    McEstimateResult* r) {
  const double md = static_cast<double>(m);
  r->num_samples = m;
  r->num_positive = num_positive;
  r->delta_hat = sum_x / md;
  r->second_moment = sum_x2 / md;
  const double var = r->second_moment - r->delta_hat * r->delta_hat;
  r->std_error = m > 1 ? std::sqrt(std::max(var, 0.0) / (md - 1)) : kInf;
  r->ess = sum_x2 > 0 ? sum_x * sum_x / sum_x2 : 0;
}

absl::StatusOr<McEstimateResult> EstimateDeltaStreaming(const McEstimateRequest& request) {
  if (request.estimator == McEstimator::kLargestCoordinate) {
    return mc::EstimateLargestCoordinate(request);
  }
  if (request.estimator == McEstimator::kAddTilt) return mc::EstimateAddTilt(request);
  const auto start = std::chrono::steady_clock::now();
  if (absl::Status s = Validate(request); !s.ok()) return s;
  auto thetas = ResolveThetas(request);
  if (!thetas.ok()) return thetas.status();
  std::vector<mc::McMix> mixes, second;
  if (request.estimator == McEstimator::kTiltMixture) {
    auto choice = mc::ChooseMixture(request.events, request.epsilon, request.direction);
    if (!choice.ok()) return choice.status();
    mixes = std::move(choice->mixes);
    second = std::move(choice->second);
  }
  int64_t total_steps = 0;
  auto events = BuildEvents(request, *thetas, mixes, second, &total_steps);
  if (!events.ok()) return events.status();
  if (total_steps >= (int64_t{1} << 56)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("the ledger has %d steps; at most 2^56 are supported", total_steps));
  }
  const int32_t kind = request.estimator == McEstimator::kImportanceSampling ? mc::kStreamKindOneTilt
                       : request.estimator == McEstimator::kTiltEvery      ? mc::kStreamKindEveryTilt
                       : request.estimator == McEstimator::kTiltMixture    ? mc::kStreamKindMixture
                       : request.estimator == McEstimator::kTiltLoss       ? mc::kStreamKindLoss
                                                                           : mc::kStreamKindSmc;
  const uint32_t stream = kind == mc::kStreamKindOneTilt     ? mc::kStreamStreamIs
                          : kind == mc::kStreamKindEveryTilt ? mc::kStreamStreamTilt
                          : kind == mc::kStreamKindLoss      ? mc::kStreamStreamLoss
                          : kind == mc::kStreamKindMixture
                              ? (request.direction == Direction::kAdd ? mc::kStreamStreamMixAdd
                                                                      : mc::kStreamStreamMix)
                          : request.direction == Direction::kAdd ? mc::kStreamStreamAdd
                                                                 : mc::kStreamStreamRemove;
  bool use_cuda = false;
  if (request.backend == McBackend::kCuda) {
    if (!CudaDeviceAvailable()) {
      return absl::FailedPreconditionError(
          "backend cuda requested but this build has no CUDA backend or no device was found");
    }
    use_cuda = true;
  } else if (request.backend == McBackend::kAuto) {
    use_cuda = CudaDeviceAvailable();
  }

  McEstimateResult result;
  mc::cuda::Totals totals;
  if (use_cuda) {
#if defined(DPLEDGER_HAVE_CUDA)
    const std::string err = mc::cuda::StreamEstimate(
        events->data(), static_cast<int>(events->size()), total_steps, kind, stream,
        request.seed, request.num_samples, request.epsilon, &totals);
    if (!err.empty()) return absl::InternalError("CUDA streaming estimate failed: " + err);
#endif
    result.backend = "cuda";
  } else {
    totals = CpuStream(*events, total_steps, kind, stream, request.seed, request.num_samples,
                       request.epsilon, mc::ResolveThreads(request.num_threads));
    result.backend = "cpu";
  }
  FinishEstimate(totals.sum_x, totals.sum_x2, totals.num_positive, request.num_samples, &result);
  result.thetas = std::move(*thetas);
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace dpledger::core
