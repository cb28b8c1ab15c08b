#include "core/mc/add_tilt.h"

#include <chrono>
#include <cmath>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/mc/mc_parallel.h"
#include "core/mc/mc_step.h"
#include "core/mc/path_sum.h"
#include "core/mc/request_checks.h"
#include "core/util/log_math.h"

namespace dpledger::core::mc {

absl::StatusOr<McEstimateResult> EstimateAddTilt(const McEstimateRequest& r) {
  const auto start = std::chrono::steady_clock::now();
  if (absl::Status s = CheckCommonRequest(r); !s.ok()) return s;
  if (r.direction != Direction::kAdd) {
    return absl::UnimplementedError("the add_tilt estimator covers the add direction only");
  }
  if (r.thetas.size() != r.events.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "thetas must have one entry per event (%d), got %d", r.events.size(), r.thetas.size()));
  }
  struct Event {
    McStep step;
    int64_t count = 0;
    double shift = 0, log_w_const = 0, theta = 0;
  };
  std::vector<Event> events;
  for (size_t i = 0; i < r.events.size(); ++i) {
    const Mechanism& m = r.events[i].mechanism;
    if (m.kind() != MechanismKind::kGaussian && m.kind() != MechanismKind::kSubsampledGaussian) {
      return absl::UnimplementedError(absl::StrFormat(
          "events[%d]: the add_tilt estimator covers gaussian and subsampled_gaussian steps only",
          i));
    }
    if (r.events[i].count < 1 || r.events[i].count > kMaxEventCount) {
      return absl::InvalidArgumentError(
          absl::StrFormat("events[%d].count must be in [1, 2^40], got %d", i, r.events[i].count));
    }
    const double theta = r.thetas[i];
    if (!std::isfinite(theta) || theta < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("thetas[%d] must be finite and >= 0, got %g", i, theta));
    }
    Event e;
    e.step = MakeMcStep(m, Direction::kAdd);
    const double s2 = e.step.sigma * e.step.sigma;
    e.count = r.events[i].count;
    e.theta = theta;
    e.shift = -theta * s2;
    e.log_w_const = theta * theta * s2 / 2;
    events.push_back(e);
  }
  auto path_x = [&](uint64_t p) {
    double loss = 0, log_w = 0;
    uint64_t j = 0;
    for (const Event& e : events) {
      for (int64_t c = 0; c < e.count; ++c, ++j) {
        const PhiloxBlock w = DrawBlock(r.seed, p, j, kStreamStreamAddTilt, kDrawMain);
        const double t = e.shift + e.step.sigma * StandardNormal(w);
        loss -= GaussianKindLoss(e.step, t);
        log_w += e.theta * t + e.log_w_const;
      }
    }
    const double f = ExcessLoss(loss, r.epsilon);
    return f > 0 ? std::exp(log_w + std::log(f)) : 0.0;
  };
  const cuda::Totals t = SumPaths(r.num_samples, ResolveThreads(r.num_threads), path_x);
  McEstimateResult result;
  FinishEstimate(t.sum_x, t.sum_x2, t.num_positive, r.num_samples, &result);
  result.thetas = r.thetas;
  result.backend = "cpu";
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace dpledger::core::mc
