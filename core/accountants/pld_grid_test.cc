// Building blocks of the PLD accountant: one step's pessimistic / optimistic grids
// bracket the exact one-step curve, and the FFT composition's round-off bound
// covers its actual error against an exact (long double) convolution.
#include <cmath>
#include <vector>

#include "core/accountants/pld_convolve.h"
#include "core/accountants/pld_discretize.h"
#include "core/accountants/pld_grid.h"
#include "core/plrv/plrv.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

// delta(eps) = inf + sum_{l > eps} m (1 - e^{eps - l}) of an untilted grid.
double GridDelta(const StepPmf& pmf, double eps) {
  double d = pmf.inf_mass;
  for (size_t i = 0; i < pmf.log_mass.size(); ++i) {
    const double l = pmf.loss(i);
    if (l > eps) d += std::exp(pmf.log_mass[i]) * -std::expm1(eps - l);
  }
  return d;
}

TEST(PldGrid, StepGridsBracketTheExactOneStepCurve) {
  struct Case {
    Mechanism m;
    Direction d;
    double h;
  };
  const std::vector<Case> cases = {
      {*Mechanism::Gaussian(1.0), Direction::kRemove, 1.0 / 64},
      {*Mechanism::SubsampledGaussian(1.0, 0.01), Direction::kRemove, 1.0 / 512},
      {*Mechanism::SubsampledGaussian(1.0, 0.01), Direction::kAdd, 1.0 / 512},
      {*Mechanism::SubsampledGaussian(0.6, 1e-3), Direction::kRemove, 1.0 / 2048},
      {*Mechanism::Laplace(1.0), Direction::kRemove, 1.0 / 64},
      {*Mechanism::SubsampledLaplace(1.0, 0.1), Direction::kAdd, 1.0 / 256},
  };
  for (const Case& c : cases) {
    std::unique_ptr<Plrv> plrv = MakePlrv(c.m, c.d);
    absl::StatusOr<StepDiscretization> disc = DiscretizeStep(*plrv, c.h, 1e-20, 1 << 22);
    ASSERT_TRUE(disc.ok()) << disc.status();
    const StepPmf pess = PessimisticPmf(*disc);
    const StepPmf opt = OptimisticPmf(*disc, 1.0);
    double total = pess.inf_mass;
    for (double lm : pess.log_mass) total += std::exp(lm);
    EXPECT_NEAR(total, 1, 1e-9) << c.m.ToSpec();
    // Off-grid epsilons too: the bound holds everywhere, not just at grid points.
    for (double eps = 0; eps < 3; eps += 0.0937) {
      const double exact = std::exp(plrv->LogDeltaForEpsilon(eps));
      EXPECT_GE(GridDelta(pess, eps), exact * (1 - 1e-12)) << c.m.ToSpec() << " eps=" << eps;
      EXPECT_LE(GridDelta(opt, eps), exact * (1 + 1e-12) + 1e-300) << c.m.ToSpec() << " eps=" << eps;
    }
  }
}

// The pessimistic grid is exact at grid points ("connect the dots").
TEST(PldGrid, PessimisticGridIsExactAtGridPoints) {
  std::unique_ptr<Plrv> plrv = MakePlrv(*Mechanism::SubsampledGaussian(1.0, 0.01), Direction::kRemove);
  absl::StatusOr<StepDiscretization> disc = DiscretizeStep(*plrv, 1.0 / 256, 1e-25, 1 << 22);
  ASSERT_TRUE(disc.ok());
  const StepPmf pess = PessimisticPmf(*disc);
  for (double eps : {0.0, 0.5, 1.0, 2.0}) {
    const double exact = std::exp(plrv->LogDeltaForEpsilon(eps));
    EXPECT_NEAR(GridDelta(pess, eps) / exact, 1, 1e-9) << eps;
  }
}

TEST(PldGrid, RejectsBadStepAndOversizedGrid) {
  std::unique_ptr<Plrv> plrv = MakePlrv(*Mechanism::Gaussian(1.0), Direction::kRemove);
  EXPECT_EQ(DiscretizeStep(*plrv, 0, 1e-20, 1 << 20).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status big = DiscretizeStep(*plrv, 1e-9, 1e-20, 1 << 20).status();
  EXPECT_EQ(big.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(big.message().find("max_grid_points"), std::string::npos);
}

// ComposeCircular(a^k * b) against an exact long-double circular convolution.
TEST(PldConvolve, RoundOffBoundCoversActualError) {
  TiltedPmf a, b;
  a.h = b.h = 1;
  for (int i = 0; i < 40; ++i) a.w.push_back(std::exp(-0.5 * (i - 20) * (i - 20) / 16.0));
  for (int i = 0; i < 7; ++i) b.w.push_back(1.0 / (1 + i));
  for (TiltedPmf* p : {&a, &b}) {
    double s = 0;
    for (double v : p->w) s += v;
    for (double& v : p->w) v /= s;
  }
  const int64_t n = 512;
  const int k = 5;
  const Spectrum sa = ComputeSpectrum(a, n), sb = ComputeSpectrum(b, n);
  const CircularPmf got = ComposeCircular({{&sa, k}, {&sb, 1}});
  std::vector<long double> exact(n, 0);
  exact[0] = 1;
  auto convolve = [&](const std::vector<double>& w) {
    std::vector<long double> out(n, 0);
    for (int64_t i = 0; i < n; ++i) {
      if (exact[i] == 0) continue;
      for (size_t j = 0; j < w.size(); ++j) out[(i + static_cast<int64_t>(j)) % n] += exact[i] * w[j];
    }
    exact = out;
  };
  for (int r = 0; r < k; ++r) convolve(a.w);
  convolve(b.w);
  double max_err = 0;
  for (int64_t i = 0; i < n; ++i) {
    max_err = std::max(max_err, static_cast<double>(std::fabs(got.w[i] - exact[i])));
  }
  EXPECT_GT(got.err, 0);
  EXPECT_LE(max_err, got.err);
  EXPECT_LT(got.err, 1e-12);  // and the bound is not vacuous
}

}  // namespace
}  // namespace dpledger::core
