// The host Philox stream (mc_sample_math.h) is cuRAND's: checked against cuRAND's
// own header compiled for the host, so the CPU backend and the CUDA kernels (which
// call curand_Philox4x32_10) draw identical bits. Built against the CUDA toolkit's
// headers when CMake found it (DPLEDGER_TEST_CURAND); skipped otherwise.
#if defined(DPLEDGER_TEST_CURAND)
// cuRAND's functions are __device__ by default; QUALIFIERS makes them host code.
#define QUALIFIERS static inline
#include <cuda_runtime.h>
#include <curand_kernel.h>
#endif

#include <cstdint>

#include "core/mc/mc_sample_math.h"
#include "gtest/gtest.h"

namespace dpledger::core::mc {
namespace {

#if defined(DPLEDGER_TEST_CURAND)

PhiloxBlock CurandBlock(uint64_t seed, uint64_t path, uint64_t step, uint32_t stream,
                        uint32_t draw) {
  curandStatePhilox4_32_10_t state;
  curand_init(seed, CurandSubsequence(step, stream, draw), 4 * path, &state);
  const uint4 r = curand4(&state);
  return PhiloxBlock{{r.x, r.y, r.z, r.w}};
}

void ExpectSameBlock(const PhiloxBlock& got, const PhiloxBlock& want) {
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got.v[i], want.v[i]) << "word " << i;
}

TEST(CurandStream, HostPhiloxEqualsCurandPrimitive) {
  // Random123's known-answer counter/key, then a spread of others.
  uint32_t c[4] = {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344};
  uint32_t k[2] = {0xa4093822, 0x299f31d0};
  for (int i = 0; i < 1000; ++i) {
    const uint4 r = curand_Philox4x32_10(make_uint4(c[0], c[1], c[2], c[3]), make_uint2(k[0], k[1]));
    ExpectSameBlock(Philox4x32x10(PhiloxBlock{{c[0], c[1], c[2], c[3]}}, k[0], k[1]),
                    PhiloxBlock{{r.x, r.y, r.z, r.w}});
    c[0] = r.x; c[1] = r.y; c[2] = r.z; c[3] = r.w ^ static_cast<uint32_t>(i);
    k[0] += r.x; k[1] ^= r.y;
  }
}

TEST(CurandStream, DrawBlockIsCurand4AfterCurandInit) {
  const uint64_t seeds[] = {0, 1, 0x299f31d0a4093822ull, ~uint64_t{0}};
  const uint64_t paths[] = {0, 1, 77, (uint64_t{1} << 32) + 5, (uint64_t{1} << 40) - 1};
  const uint64_t steps[] = {0, 1, 9999, (uint64_t{0x12} << 32) | 7, (uint64_t{1} << 56) - 1};
  for (uint64_t seed : seeds) {
    for (uint64_t path : paths) {
      for (uint64_t step : steps) {
        for (uint32_t stream : {0u, 3u, 15u}) {
          for (uint32_t draw : {0u, 2u, 15u}) {
            SCOPED_TRACE(testing::Message() << "seed " << seed << " path " << path << " step "
                                            << step << " stream " << stream << " draw " << draw);
            ExpectSameBlock(DrawBlock(seed, path, step, stream, draw),
                            CurandBlock(seed, path, step, stream, draw));
          }
        }
      }
    }
  }
}

#else

TEST(CurandStream, NeedsTheCudaToolkitHeaders) {
  GTEST_SKIP() << "built without the CUDA toolkit: cuRAND's header is not available";
}

#endif

}  // namespace
}  // namespace dpledger::core::mc
