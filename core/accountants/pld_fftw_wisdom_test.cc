// The build-time FFTW wisdom (fftw_wisdom_gen.cc) covers every FFT size the PLD
// accountant plans by default, so those plans skip the planner's search.
#include <fftw3.h>

#include "gtest/gtest.h"
#include "pld_fftw_wisdom.h"

namespace dpledger::core {
namespace {

// FFTW_WISDOM_ONLY returns a null plan unless wisdom has this exact problem.
TEST(PldFftwWisdom, CoversTheDefaultFftSizes) {
  ASSERT_EQ(fftw_import_wisdom_from_string(kPldFftwWisdom), 1);
  for (int e = 10; e <= 22; ++e) {
    const int n = 1 << e;
    double* r = static_cast<double*>(fftw_malloc(sizeof(double) * n));
    auto* c = static_cast<fftw_complex*>(fftw_malloc(sizeof(fftw_complex) * (n / 2 + 1)));
    fftw_plan f = fftw_plan_dft_r2c_1d(n, r, c, FFTW_ESTIMATE | FFTW_WISDOM_ONLY);
    fftw_plan b = fftw_plan_dft_c2r_1d(n, c, r, FFTW_ESTIMATE | FFTW_WISDOM_ONLY);
    EXPECT_NE(f, nullptr) << "n = " << n;
    EXPECT_NE(b, nullptr) << "n = " << n;
    if (f != nullptr) fftw_destroy_plan(f);
    if (b != nullptr) fftw_destroy_plan(b);
    fftw_free(r);
    fftw_free(c);
  }
  // Not in the wisdom: 2^23.
  const int n = 1 << 23;
  double* r = static_cast<double*>(fftw_malloc(sizeof(double) * n));
  auto* c = static_cast<fftw_complex*>(fftw_malloc(sizeof(fftw_complex) * (n / 2 + 1)));
  EXPECT_EQ(fftw_plan_dft_r2c_1d(n, r, c, FFTW_ESTIMATE | FFTW_WISDOM_ONLY), nullptr);
  fftw_free(r);
  fftw_free(c);
}

}  // namespace
}  // namespace dpledger::core
