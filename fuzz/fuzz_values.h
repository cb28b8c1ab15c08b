// Values the fuzz targets draw from the input bytes: either a raw value, or one of the edge
// cases issue 16 names (NaN, infinities, denormals, 1e308, counts near the int64 limits,
// probabilities at their 0 / 1 edges), which random bytes would rarely hit.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <limits>
#include <string>

#include "core/mechanisms/mechanism.h"

namespace dpledger::fuzz {

inline double EdgeDouble(FuzzedDataProvider& in) {
  static constexpr double kEdges[] = {
      0.0, -0.0, 1.0, -1.0, 0.5, 1e-300, 1e-320 /* denormal */,
      std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::min(), 1e308,
      std::numeric_limits<double>::max(), std::numeric_limits<double>::infinity(),
      -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN(),
      std::numeric_limits<double>::epsilon(), 1.0 - std::numeric_limits<double>::epsilon() / 2,
      1.0 + std::numeric_limits<double>::epsilon(), 1e-9, 1e-5, 1e-3, 0.01, 0.1, 2.0, 10.0,
      100.0, 1e6};
  if (in.ConsumeBool()) return in.PickValueInArray(kEdges);
  return in.ConsumeFloatingPoint<double>();
}

// A probability-like value: mostly in [0, 1] with its edges, sometimes anything.
inline double EdgeProbability(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: return in.ConsumeProbability<double>();
    case 1: return EdgeDouble(in);
    default: {
      static constexpr double kEdges[] = {0.0, 1.0, 1e-300, 1e-12, 0.5, 0.999999, 1 - 1e-16};
      return in.PickValueInArray(kEdges);
    }
  }
}

inline int64_t EdgeCount(FuzzedDataProvider& in) {
  static constexpr int64_t kEdges[] = {
      0, 1, 2, 10, 1000, -1, core::kMaxEventCount, core::kMaxEventCount + 1,
      std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max() - 1,
      std::numeric_limits<int64_t>::min(), int64_t{1} << 31, int64_t{1} << 53};
  if (in.ConsumeBool()) return in.PickValueInArray(kEdges);
  return in.ConsumeIntegral<int64_t>();
}

// A mechanism through its validating factory (the factories are part of what is fuzzed);
// an error status when the parameters are refused.
inline absl::StatusOr<core::Mechanism> EdgeMechanism(FuzzedDataProvider& in) {
  using core::Mechanism;
  switch (in.ConsumeIntegralInRange<int>(0, 6)) {
    case 0: return Mechanism::Gaussian(EdgeDouble(in), EdgeDouble(in));
    case 1: return Mechanism::Laplace(EdgeDouble(in), EdgeDouble(in));
    case 2: return Mechanism::SubsampledGaussian(EdgeDouble(in), EdgeProbability(in),
                                                 EdgeDouble(in));
    case 3: return Mechanism::SubsampledLaplace(EdgeDouble(in), EdgeProbability(in),
                                                EdgeDouble(in));
    case 4: return Mechanism::RandomizedResponse(EdgeProbability(in));
    case 5: return Mechanism::PureDp(EdgeDouble(in));
    default: return Mechanism::ApproxDp(EdgeDouble(in), EdgeProbability(in));
  }
}

inline std::string SmallString(FuzzedDataProvider& in, size_t max_length = 24) {
  return in.ConsumeRandomLengthString(max_length);
}

}  // namespace dpledger::fuzz
