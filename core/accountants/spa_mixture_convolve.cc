#include "core/accountants/spa_mixture_convolve.h"

#include <algorithm>

namespace dpledger::core {
namespace {

constexpr double kConvolutionFloor = 1e-60;

}  // namespace

// Compiled twice, picked at load time by the CPU (GCC/Clang function multiversioning):
// the AVX2 version runs the inner loop 4 doubles wide (measured: 44% -> 34% of a
// G = 3 query). Same operations in the same order (no fused multiply-add), so the
// same bits.
__attribute__((target_clones("avx2", "default")))
std::vector<double> ConvolveDirect(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.empty() || b.empty()) return {};
  std::vector<double> out(a.size() + b.size() - 1, 0.0);
  for (size_t i = 0; i < a.size(); ++i) {
    const double v = a[i];
    if (v == 0) continue;
    double* dst = out.data() + i;
    for (size_t j = 0; j < b.size(); ++j) dst[j] += v * b[j];
  }
  return out;
}

std::vector<double> Trimmed(const std::vector<double>& v, int64_t& first) {
  double top = 0;
  for (double x : v) top = std::max(top, x);
  size_t lo = 0, hi = v.size();
  while (lo < hi && !(v[lo] >= kConvolutionFloor * top)) ++lo;
  while (hi > lo && !(v[hi - 1] >= kConvolutionFloor * top)) --hi;
  first += static_cast<int64_t>(lo);
  return std::vector<double>(v.begin() + static_cast<std::ptrdiff_t>(lo),
                             v.begin() + static_cast<std::ptrdiff_t>(hi));
}

}  // namespace dpledger::core
