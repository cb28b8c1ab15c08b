// Helpers shared by the Monte Carlo unit tests.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/mc/mc_estimate.h"
#include "core/mechanisms/mechanism.h"
#include "gtest/gtest.h"

namespace dpledger::core::mc_test {

// Statistical checks allow 5 SE: with an approximately normal mean the
// false-failure rate is 6e-7 per check (fixed seeds make a pass reproducible; the
// bound says how unlikely a correct implementation fails).
inline constexpr double kZ = 5.0;

inline MechanismEvent Event(absl::StatusOr<Mechanism> m, int64_t count) {
  return MechanismEvent{*m, count};
}

// EstimateDeltaStreaming, failing the test on an error.
inline McEstimateResult Estimate(const McEstimateRequest& r) {
  auto res = EstimateDeltaStreaming(r);
  EXPECT_TRUE(res.ok()) << res.status();
  return res.ok() ? *res : McEstimateResult{};
}

}  // namespace dpledger::core::mc_test
