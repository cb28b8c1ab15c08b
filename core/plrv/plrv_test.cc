#include "core/plrv/plrv.h"

#include <cmath>

#include "core/util/log_math.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

Mechanism Make(absl::StatusOr<Mechanism> m) {
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

double Delta(const Plrv& p, double eps) { return std::exp(p.LogDeltaForEpsilon(eps)); }
// The generic formula from the tails (exercises SfP/SfQ against closed forms).
double DeltaFromTails(const Plrv& p, double eps) {
  return std::exp(p.Plrv::LogDeltaForEpsilon(eps));
}

// References: mpmath (30 digits) quadrature of E_P[(1 - e^{eps - Y})_+] over the
// output density from the kink t*(eps) outwards, for each (sigma, q, eps) and direction.
struct SubsampledCase {
  double sigma, q, eps, remove, add;
};
constexpr SubsampledCase kSubsampledGaussian[] = {
    {.sigma = 1, .q = 0.5, .eps = 0.5, .remove = 0.07994462460138235, .add = 0.009157102783108617},
    {.sigma = 1, .q = 0.5, .eps = 0.0, .remove = 0.1914624612740131, .add = 0.1914624612740131},
    {.sigma = 0.8, .q = 0.2, .eps = 1.0, .remove = 0.009318462033267853, .add = 0.0},
    {.sigma = 2, .q = 0.01, .eps = 0.1, .remove = 1.599633405186109e-9, .add = 0.0},
    {.sigma = 0.6, .q = 1e-3, .eps = 0.01, .remove = 0.0001449260437474365, .add = 0.0},
};

TEST(Plrv, SubsampledGaussianSingleStepMatchesQuadrature) {
  for (const auto& c : kSubsampledGaussian) {
    const Mechanism m = Make(Mechanism::SubsampledGaussian(c.sigma, c.q));
    auto rem = MakePlrv(m, Direction::kRemove);
    auto add = MakePlrv(m, Direction::kAdd);
    EXPECT_NEAR(Delta(*rem, c.eps), c.remove, 1e-10 * c.remove) << c.sigma << " " << c.q;
    EXPECT_NEAR(DeltaFromTails(*rem, c.eps), c.remove, 1e-8 * c.remove + 1e-16);
    EXPECT_NEAR(Delta(*add, c.eps), c.add, 1e-10 * c.add) << c.sigma << " " << c.q;
    EXPECT_NEAR(DeltaFromTails(*add, c.eps), c.add, 1e-8 * c.add + 1e-16);
  }
}

TEST(Plrv, SubsampledLaplaceSingleStepMatchesQuadrature) {
  // {d = sensitivity/scale, q, eps, remove, add}, mpmath quadrature as above.
  struct Case {
    double d, q, eps, remove, add;
  };
  for (const Case& c : {Case{1, 0.3, 0.1, 0.08853791054617651, 0.06021232354522544},
                        Case{2, 0.5, 0.5, 0.2211967373486068, 0.03565643790044146},
                        Case{0.5, 0.9, 0.2, 0.1176007162328118, 0.1128100323401723}}) {
    const Mechanism m = Make(Mechanism::SubsampledLaplace(1 / c.d, c.q));
    EXPECT_NEAR(Delta(*MakePlrv(m, Direction::kRemove), c.eps), c.remove, 1e-12);
    EXPECT_NEAR(Delta(*MakePlrv(m, Direction::kAdd), c.eps), c.add, 1e-12);
  }
}

TEST(Plrv, GaussianAndLaplaceMatchClosedForms) {
  auto g = MakePlrv(Make(Mechanism::Gaussian(2.0, 1.0)), Direction::kRemove);
  for (double eps : {0.0, 0.3, 1.0, 3.0}) {
    EXPECT_NEAR(DeltaFromTails(*g, eps), Delta(*g, eps), 1e-12) << eps;
  }
  const double d = 0.7;  // sensitivity/scale
  auto l = MakePlrv(Make(Mechanism::Laplace(2.0, 1.4)), Direction::kAdd);
  for (double eps : {0.0, 0.2, 0.69}) {
    EXPECT_NEAR(Delta(*l, eps), 1 - std::exp((eps - d) / 2), 1e-14) << eps;
    EXPECT_NEAR(DeltaFromTails(*l, eps), 1 - std::exp((eps - d) / 2), 1e-14) << eps;
  }
  EXPECT_EQ(Delta(*l, 0.7), 0.0);
}

TEST(Plrv, DiscreteMechanismsHaveRandomizedResponseCurves) {
  // Pure eps-DP: delta(e) = (1 - e^{e - eps}) e^eps/(1 + e^eps) ... closed form of RR.
  const double eps0 = 1.0;
  auto p = MakePlrv(Make(Mechanism::PureDp(eps0)), Direction::kRemove);
  const double hi = std::exp(eps0) / (1 + std::exp(eps0)), lo = 1 / (1 + std::exp(eps0));
  EXPECT_NEAR(Delta(*p, 0.0), hi - lo, 1e-15);  // total variation
  EXPECT_NEAR(Delta(*p, 0.4), hi - std::exp(0.4) * lo, 1e-15);
  EXPECT_EQ(Delta(*p, 1.0), 0.0);
  auto a = MakePlrv(Make(Mechanism::ApproxDp(1.0, 1e-6)), Direction::kRemove);
  EXPECT_NEAR(Delta(*a, 1.0), 1e-6, 1e-20);
  EXPECT_NEAR(Delta(*a, 5.0), 1e-6, 1e-20);
  auto rr = MakePlrv(Make(Mechanism::RandomizedResponse(0.75)), Direction::kAdd);
  EXPECT_NEAR(Delta(*rr, 0.0), 0.5, 1e-15);
}

TEST(Plrv, TailsAreComplementaryAndMonotone) {
  for (const Mechanism& m :
       {Make(Mechanism::SubsampledGaussian(0.8, 0.05)), Make(Mechanism::SubsampledLaplace(1.5, 0.3)),
        Make(Mechanism::Laplace(1.0)), Make(Mechanism::Gaussian(1.0))}) {
    for (Direction dir : {Direction::kRemove, Direction::kAdd}) {
      auto p = MakePlrv(m, dir);
      double prev = 0;
      for (double y = -4; y <= 4; y += 0.25) {
        EXPECT_NEAR(p->SfP(y) + p->CdfP(y), 1.0, 1e-14) << m.ToSpec() << " " << y;
        EXPECT_NEAR(p->SfQ(y) + p->CdfQ(y), 1.0, 1e-14) << m.ToSpec() << " " << y;
        EXPECT_GE(p->CdfP(y), prev);
        prev = p->CdfP(y);
        // Q puts less mass on large losses than P (E_Q[1{Y>y}] = E_P[e^{-Y} 1{Y>y}]).
        if (y >= 0) { EXPECT_LE(p->SfQ(y), p->SfP(y) + 1e-15); }
      }
    }
  }
}

TEST(Plrv, SubsampledGaussianCgfMatchesIntegerOrderMoments) {
  // K(alpha - 1) = log A_alpha(sigma, q); values from mc-evr.md 9.7.
  struct Case {
    double sigma, q;
    int alpha;
    double a;
  };
  for (const Case& c : {Case{0.6, 1e-3, 2, 1.000015083}, Case{0.6, 1e-3, 5, 1.001436414},
                        Case{0.6, 1e-3, 8, 6.004435373e9}, Case{1, 0.5, 3, 4.030047801},
                        Case{0.5, 0.2, 5, 7.532345493e13}}) {
    auto p = MakePlrv(Make(Mechanism::SubsampledGaussian(c.sigma, c.q)), Direction::kRemove);
    auto t = p->Tilted(c.alpha - 1);
    ASSERT_TRUE(t.ok());
    EXPECT_NEAR(t->k, std::log(c.a), 2e-9 * std::max(1.0, std::log(c.a))) << c.sigma << c.alpha;
  }
}

TEST(Plrv, CgfVanishesAtZeroAndMinusOne) {
  for (const Mechanism& m :
       {Make(Mechanism::SubsampledGaussian(0.8, 0.05)), Make(Mechanism::SubsampledLaplace(1.5, 0.3)),
        Make(Mechanism::Laplace(0.3)), Make(Mechanism::Gaussian(1.3)), Make(Mechanism::PureDp(2))}) {
    for (Direction dir : {Direction::kRemove, Direction::kAdd}) {
      auto p = MakePlrv(m, dir);
      EXPECT_NEAR(p->Tilted(0)->k, 0, 1e-12) << m.ToSpec();
      EXPECT_NEAR(p->Tilted(-1)->k, 0, 1e-12) << m.ToSpec();
      EXPECT_GT(p->Tilted(0)->k1, 0) << m.ToSpec();   // KL(P||Q) > 0
      EXPECT_LT(p->Tilted(-1)->k1, 0) << m.ToSpec();  // -KL(Q||P) < 0
    }
  }
}

TEST(Plrv, LaplaceCgfMatchesClosedForm) {
  // spa.md 6.2: K(t) = t d + log1p((t/(2t+1)) expm1(-(2t+1) d)).
  for (double d : {0.01, 0.5, 2.0}) {
    auto p = MakePlrv(Make(Mechanism::Laplace(1 / d)), Direction::kRemove);
    for (double t : {0.1, 2.0, 30.0}) {
      const double k = t * d + std::log1p(t / (2 * t + 1) * std::expm1(-(2 * t + 1) * d));
      auto m = p->Tilted(t);
      ASSERT_TRUE(m.ok());
      EXPECT_NEAR(m->k, k, 1e-12 * std::max(1.0, k)) << d << " " << t;
      // K' by central difference.
      const double h = 1e-5;
      const double kp = (p->Tilted(t + h)->k - p->Tilted(t - h)->k) / (2 * h);
      EXPECT_NEAR(m->k1, kp, 1e-7 * std::max(1.0, std::fabs(kp)));
    }
  }
}

TEST(Plrv, GaussianCgfIsExact) {
  auto p = MakePlrv(Make(Mechanism::Gaussian(0.5)), Direction::kRemove);  // mu = 2
  auto m = p->Tilted(1.5);
  ASSERT_TRUE(m.ok());
  EXPECT_DOUBLE_EQ(m->k, 4 * 1.5 * 2.5 / 2);
  EXPECT_DOUBLE_EQ(m->k1, 4 * 2.0);
  EXPECT_DOUBLE_EQ(m->k2, 4.0);
  EXPECT_EQ(m->k3, 0.0);
}

TEST(Plrv, AddDirectionCgfIsReflectedRemove) {
  const Mechanism m = Make(Mechanism::SubsampledGaussian(1.0, 0.1));
  auto rem = MakePlrv(m, Direction::kRemove);
  auto add = MakePlrv(m, Direction::kAdd);
  const double t = 2.0;
  auto a = add->Tilted(t), r = rem->Tilted(-1 - t);
  EXPECT_NEAR(a->k, r->k, 1e-14);
  EXPECT_NEAR(a->k1, -r->k1, 1e-14);
  // Add-direction loss is bounded by -log(1 - q).
  EXPECT_NEAR(add->LossMax(), -std::log1p(-0.1), 1e-15);
  EXPECT_EQ(add->SfP(-std::log1p(-0.1)), 0.0);
}

TEST(Plrv, ApproxDpHasInfiniteMassAndNoCgf) {
  auto p = MakePlrv(Make(Mechanism::ApproxDp(0.5, 1e-5)), Direction::kRemove);
  EXPECT_EQ(p->InfiniteLossMass(), 1e-5);
  EXPECT_NEAR(p->SfP(-1) + p->InfiniteLossMass(), 1.0, 1e-15);
  EXPECT_FALSE(p->Tilted(1).ok());
}

}  // namespace
}  // namespace dpledger::core
