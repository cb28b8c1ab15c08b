#include "core/util/log_math.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

TEST(LogMath, LogNormalCdfMatchesErfcWhereBothWork) {
  for (double z : {-36.0, -20.0, -5.0, -1.0, 0.0, 1.0, 5.0}) {
    EXPECT_NEAR(LogNormalCdf(z), std::log(0.5 * std::erfc(-z / std::sqrt(2.0))),
                1e-12 * std::max(1.0, std::fabs(LogNormalCdf(z))))
        << z;
  }
}

TEST(LogMath, LogNormalCdfIsContinuousAcrossTheAsymptoticBranch) {
  const double below = LogNormalCdf(-37.0 - 1e-9);
  const double above = LogNormalCdf(-37.0 + 1e-9);
  EXPECT_NEAR(below, above, 1e-6);
  // log Phi(-40) from a 50-digit reference: -804.6084420137538
  EXPECT_NEAR(LogNormalCdf(-40.0), -804.6084420137538, 1e-9);
}

TEST(LogMath, LogAddAndSubAreInverse) {
  const double a = std::log(3.0), b = std::log(1e-20);
  EXPECT_NEAR(LogSubExp(LogAddExp(a, b), b), a, 1e-15);
  EXPECT_EQ(LogSubExp(a, a), -kInf);
  EXPECT_DOUBLE_EQ(LogAddExp(-kInf, a), a);
}

TEST(LogMath, LogSumExpHandlesHugeAndEmpty) {
  std::vector<double> xs = {1000.0, 1000.0};
  EXPECT_NEAR(LogSumExp(xs), 1000.0 + std::log(2.0), 1e-12);
  EXPECT_EQ(LogSumExp(std::span<const double>()), -kInf);
}

TEST(LogMath, Log1mExpIsAccurateNearZeroAndFar) {
  EXPECT_NEAR(Log1mExp(-1e-10), std::log(1e-10), 1e-9);
  EXPECT_NEAR(Log1mExp(-50.0), -std::exp(-50.0), 1e-30);
}

}  // namespace
}  // namespace dpledger::core
