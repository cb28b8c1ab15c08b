// The jump-sum convolutions (issue 15): the tilted FFT against the direct sum
// (exact to a few ulps per entry) on laws spanning 1e-40 and more, and the error
// statement of the header: relative to the tilted law, so the entries near the
// tilted peak keep their digits however small they are untilted.
#include "core/accountants/spa_mixture_convolve.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

// A discretised Gaussian tail: a_i = e^{-(i h - mu)^2 / (2 s^2)}, i < n (largest 1
// at i = mu / h): at n = 2000, h = 5e-3, s = 1 it falls to ~1e-22 at the far end.
std::vector<double> GaussianCells(int n, double h, double mu, double s) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const double y = i * h - mu;
    v[static_cast<size_t>(i)] = std::exp(-y * y / (2 * s * s));
  }
  return v;
}

TEST(SpaMixtureConvolve, TiltedFftKeepsTheDigitsTheTiltFavours) {
  // a: a jump law falling e^{-y^2/2} over 10 nats (to 1e-22); b: the same,
  // narrower (to ~1e-40 at its end). Their sum's upper end is ~1e-60 of the peak.
  const double h = 5e-3;
  const std::vector<double> a = GaussianCells(2000, h, 0, 1);
  const std::vector<double> b = GaussianCells(1500, h, 0, 0.55);
  const std::vector<double> direct = ConvolveDirect(a, b);
  ASSERT_EQ(direct.size(), a.size() + b.size() - 1);
  EXPECT_LT(direct.back(), 1e-40 * direct.front());
  // ||a'||_1 ||b'||_1 at a tilt, in untilted units: the header's bound on every
  // entry is ~1e-13 of it, times e^{-tau k}.
  auto l1_product = [&](double tau) {
    double la = 0, lb = 0;
    for (size_t i = 0; i < a.size(); ++i) la += a[i] * std::exp(tau * static_cast<double>(i));
    for (size_t j = 0; j < b.size(); ++j) lb += b[j] * std::exp(tau * static_cast<double>(j));
    return la * lb;
  };
  // Untilted: only entries near the largest keep their digits.
  const std::vector<double> flat = ConvolveTiltedFft(a, b, 0);
  ASSERT_EQ(flat.size(), direct.size());
  for (size_t k = 0; k < direct.size(); ++k) {
    EXPECT_NEAR(flat[k], direct[k], 1e-13 * l1_product(0)) << k;
  }
  EXPECT_EQ(flat.back(), 0);  // 1e-40 of the peak: below the bound, so 0
  // Tilted toward the top (theta = 10 per nat: the tilted peak of a * b, whose log
  // slope is -(y / 1.15^2), near y = 13): the entries there, 1e-6 of the untilted
  // bound (so without a digit in an untilted FFT),
  // come out to 1e-9 relative, and every entry is within the bound.
  const double tau = 10 * h;
  const std::vector<double> tilted = ConvolveTiltedFft(a, b, tau);
  ASSERT_EQ(tilted.size(), direct.size());
  double peak_log = -1e300;  // log of the largest tilted entry
  for (size_t k = 0; k < direct.size(); ++k) {
    peak_log = std::max(peak_log, std::log(direct[k]) + tau * static_cast<double>(k));
  }
  int checked_near_peak = 0;
  for (size_t k = 0; k < direct.size(); ++k) {
    const double rel_to_peak = std::log(direct[k]) + tau * static_cast<double>(k) - peak_log;
    EXPECT_NEAR(tilted[k], direct[k],
                1e-13 * l1_product(tau) * std::exp(-tau * static_cast<double>(k)))
        << k;
    if (rel_to_peak > -2) {  // within e^2 of the tilted peak
      EXPECT_NEAR(tilted[k], direct[k], 1e-9 * direct[k]) << k;
      ++checked_near_peak;
      EXPECT_LT(direct[k], 1e-6 * 1e-13 * l1_product(0));  // no digits untilted
    }
  }
  EXPECT_GT(checked_near_peak, 50);
}

TEST(SpaMixtureConvolve, NoiseIsZeroNotNegative) {
  // Entries far below the tilted peak have no digits: they come out 0, never
  // negative or a rounding residue blown up by the untilt.
  const double h = 5e-3;
  const std::vector<double> a = GaussianCells(1200, h, 0, 0.5);
  const std::vector<double> b = GaussianCells(1200, h, 0, 0.5);
  const double tau = 20 * h;
  const std::vector<double> tilted = ConvolveTiltedFft(a, b, tau);
  const std::vector<double> direct = ConvolveDirect(a, b);
  double la = 0, lb = 0;
  for (size_t i = 0; i < a.size(); ++i) la += a[i] * std::exp(tau * static_cast<double>(i));
  for (size_t j = 0; j < b.size(); ++j) lb += b[j] * std::exp(tau * static_cast<double>(j));
  int zeros = 0;
  for (size_t k = 0; k < direct.size(); ++k) {
    EXPECT_GE(tilted[k], 0) << k;
    EXPECT_NEAR(tilted[k], direct[k], 1e-13 * la * lb * std::exp(-tau * static_cast<double>(k)))
        << k;
    zeros += tilted[k] == 0;
  }
  EXPECT_GT(zeros, 100);
  EXPECT_EQ(tilted.front(), 0);  // 1 untilted, ~e^{-170} of the tilted peak
}

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
