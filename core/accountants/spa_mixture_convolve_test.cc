// The jump-sum convolution (issue 15): every entry to the ulp however small, and
// the ends trimmed at 1e-60 of the largest.
#include "core/accountants/spa_mixture_convolve.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

TEST(SpaMixtureConvolve, DirectKeepsEveryDigit) {
  // A law with 1e-20 and 1e-40 entries: each output entry to the ulp.
  const std::vector<double> a = {1, 1e-20, 1e-40}, b = {0.5, 1e-30};
  const std::vector<double> out = ConvolveDirect(a, b);
  const std::vector<double> expect = {0.5, 1e-30 + 0.5e-20, 1e-50 + 0.5e-40, 1e-70};
  ASSERT_EQ(out.size(), expect.size());
  for (size_t k = 0; k < out.size(); ++k) EXPECT_DOUBLE_EQ(out[k], expect[k]) << k;
  EXPECT_TRUE(ConvolveDirect({}, b).empty());
}

TEST(SpaMixtureConvolve, TrimmedDropsEndsBelow1eMinus60) {
  int64_t first = 10;
  const std::vector<double> v = {1e-70, 0, 1e-59, 1, 0.5, 1e-61, 0};
  const std::vector<double> t = Trimmed(v, first);
  EXPECT_EQ(first, 12);
  EXPECT_EQ(t, (std::vector<double>{1e-59, 1, 0.5}));
}

}  // namespace
}  // namespace dpledger::core
