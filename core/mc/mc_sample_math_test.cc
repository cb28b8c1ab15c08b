#include "core/mc/mc_sample_math.h"

#include <cmath>

#include "gtest/gtest.h"

namespace dpledger::core::mc {
namespace {

struct PhiloxVector {
  uint32_t ctr[4];
  uint32_t key[2];
  uint32_t out[4];
};

// Known-answer vectors of Random123 (kat_vectors, philox4x32_10).
constexpr PhiloxVector kPhiloxKat[] = {
    {.ctr = {0, 0, 0, 0}, .key = {0, 0}, .out = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {.ctr = {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     .key = {0xffffffff, 0xffffffff},
     .out = {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {.ctr = {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     .key = {0xa4093822, 0x299f31d0},
     .out = {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

TEST(Philox4x32x10, MatchesRandom123KnownAnswers) {
  for (const PhiloxVector& v : kPhiloxKat) {
    const PhiloxBlock out = Philox4x32x10(
        PhiloxBlock{{v.ctr[0], v.ctr[1], v.ctr[2], v.ctr[3]}}, v.key[0], v.key[1]);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out.v[i], v.out[i]) << "word " << i;
  }
}

TEST(DrawBlock, PacksSeedPathStepStreamAndDrawIntoKeyAndCounter) {
  const uint64_t seed = 0x299f31d0a4093822ull;
  const PhiloxBlock got = DrawBlock(seed, 0x85a308d3243f6a88ull, 0x0000000013198a2eull, 0, 0);
  const PhiloxBlock want =
      Philox4x32x10(PhiloxBlock{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0}}, 0xa4093822, 0x299f31d0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got.v[i], want.v[i]);
  // High step bits, stream and draw all land in the last counter word.
  const PhiloxBlock hi = DrawBlock(seed, 1, (uint64_t{0x12} << 32) | 7, 3, 2);
  const PhiloxBlock hi_want =
      Philox4x32x10(PhiloxBlock{{1, 0, 7, (0x12u << 8) | (3u << 4) | 2u}}, 0xa4093822, 0x299f31d0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(hi.v[i], hi_want.v[i]);
}

TEST(Uniforms, StayStrictlyInsideTheUnitInterval) {
  const PhiloxBlock zeros{{0, 0, 0, 0}};
  const PhiloxBlock ones{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}};
  EXPECT_EQ(MainUniform(zeros), 0x1p-53);
  EXPECT_EQ(MainUniform(ones), 1 - 0x1p-53);
  EXPECT_EQ(SideUniform(zeros), 0x1p-45);
  EXPECT_EQ(SideUniform(ones), 1 - 0x1p-45);
  EXPECT_TRUE(std::isfinite(StandardNormal(zeros)));
  EXPECT_NEAR(StandardNormal(zeros), std::sqrt(2 * 53 * std::log(2.0)), 1e-6);
  EXPECT_TRUE(std::isfinite(StandardLaplace(zeros)));
  EXPECT_TRUE(std::isfinite(StandardLaplace(ones)));
}

TEST(UniformIndex, CoversTheRangeWithoutOverflow) {
  EXPECT_EQ(UniformIndex(PhiloxBlock{{0, 0, 0, 0}}, 1000), 0u);
  EXPECT_EQ(UniformIndex(PhiloxBlock{{0xffffffff, 0xffffffff, 0, 0}}, 1000), 999u);
  EXPECT_EQ(UniformIndex(PhiloxBlock{{0x80000000, 0, 0, 0}}, 1000), 500u);
}

// Moments of 2^17 draws: each check is a 6-sigma band (false-failure rate ~2e-9).
TEST(StandardNormal, HasUnitVarianceAndZeroMean) {
  constexpr int kN = 1 << 17;
  double s = 0, s2 = 0;
  for (int i = 0; i < kN; ++i) {
    const double z = StandardNormal(DrawBlock(42, i, 0, 0, 0));
    s += z;
    s2 += z * z;
  }
  EXPECT_NEAR(s / kN, 0, 6 / std::sqrt(kN));
  EXPECT_NEAR(s2 / kN, 1, 6 * std::sqrt(2.0 / kN));
}

TEST(StandardLaplace, HasVarianceTwoAndZeroMean) {
  constexpr int kN = 1 << 17;
  double s = 0, s2 = 0;
  for (int i = 0; i < kN; ++i) {
    const double z = StandardLaplace(DrawBlock(43, i, 0, 0, 0));
    s += z;
    s2 += z * z;
  }
  EXPECT_NEAR(s / kN, 0, 6 * std::sqrt(2.0 / kN));
  EXPECT_NEAR(s2 / kN, 2, 6 * std::sqrt(20.0 / kN));  // Var(x^2) = 24 - 4
}

TEST(ExcessLoss, UsesExpm1AndVanishesBelowTheThreshold) {
  EXPECT_EQ(ExcessLoss(1.0, 1.0), 0.0);
  EXPECT_EQ(ExcessLoss(0.5, 1.0), 0.0);
  EXPECT_DOUBLE_EQ(ExcessLoss(1.0 + 0x1p-40, 1.0), -std::expm1(-0x1p-40));  // y - eps exact
  EXPECT_EQ(ExcessLoss(kInf, 2.0), 1.0);
  EXPECT_DOUBLE_EQ(MirrorExcessLoss(-2.0, 1.0), std::exp(2.0) - std::exp(1.0));
  EXPECT_EQ(MirrorExcessLoss(-1.0, 1.0), 0.0);
}

TEST(NeumaierSum, KeepsSmallTermsNextToLargeOnes) {
  NeumaierSum s;
  s.Add(1.0);
  for (int i = 0; i < 1000; ++i) s.Add(1e-17);
  s.Add(-1.0);
  EXPECT_NEAR(s.Value(), 1e-14, 1e-26);  // a naive sum returns 0 or 1.1e-16 multiples
}

TEST(GaussianKindLoss, SubsampledLossMatchesTheNaiveFormulaWhereItIsSafe) {
  McStep s;
  s.kind = kStepSubsampledGaussian;
  s.sigma = 0.8;
  s.inv_s2 = 1 / 0.64;
  s.q = 0.2;
  s.log_q = std::log(0.2);
  s.log_1mq = std::log1p(-0.2);
  for (double t : {-3.0, -0.5, 0.0, 0.5, 1.0, 2.5}) {
    const double u = (2 * t - 1) / (2 * 0.64);
    EXPECT_NEAR(GaussianKindLoss(s, t), std::log(1 - 0.2 + 0.2 * std::exp(u)), 1e-14);
  }
  // No overflow where e^u would overflow (spec 10.1).
  EXPECT_NEAR(GaussianKindLoss(s, 600.0), (600 - 0.5) / 0.64 + std::log(0.2), 1e-9);
}

}  // namespace
}  // namespace dpledger::core::mc
