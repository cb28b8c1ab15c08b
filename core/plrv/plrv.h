// Privacy-loss random variables (PLRVs). For one mechanism and one neighbouring
// direction with dominating pair (P, Q), Y = log(p(o)/q(o)) with o ~ P. Every
// accountant reads a mechanism only through this interface.
//
// Directions (spec mc-evr.md 2.3, spa.md 1.4): kRemove is the ordered pair
// (M(D), M(D')) with D = D' + {z}; for Poisson-subsampled Gaussian that is
// P = (1-q)N(0,s^2) + qN(1,s^2), Q = N(0,s^2). kAdd is the swapped pair (Q, P).
// Symmetric mechanisms (Gaussian, Laplace, randomized response, pure/approx DP)
// have the same law in both directions.
//
// Thread safety: implementations are immutable after construction.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "core/mechanisms/mechanism.h"

namespace dpledger::core {

enum class Direction { kRemove, kAdd };
std::string_view DirectionName(Direction d);  // "remove" / "add"

// Cumulant generating function K(t) = log E_P[e^{tY}] (= log E_Q[e^{(t+1)Y}]) and
// the moments of the t-tilted law of Y (density prop. to e^{tY} dP), spa.md 6.
// t = 0 gives the cumulants of Y under P; t = -1 those under Q.
struct TiltedMoments {
  double k = 0;     // K(t)
  double k1 = 0;    // K'(t) = tilted mean
  double k2 = 0;    // K''(t) = tilted variance
  double k3 = 0;    // K'''(t)
  double k4 = 0;    // K''''(t) = 4th cumulant
  double abs3 = 0;  // E_t|Y - K'(t)|^3 (tilted third absolute central moment, P_t)
  // K^(5)(t), K^(6)(t): computed only for CumulantOrder::kSixth, else 0.
  double k5 = 0;
  double k6 = 0;
};

// How many cumulants Plrv::TiltedUpTo computes. K^(5), K^(6) feed only the SPA's
// opt-in ICML order-3 estimator (spa.md 4.2, 6); they cost two more sums per
// quadrature point, which the default path skips.
enum class CumulantOrder { kFourth, kSixth };

class Plrv {
 public:
  virtual ~Plrv() = default;

  // Essential infimum / supremum of the finite part of Y under P (may be -inf/+inf).
  virtual double LossMin() const = 0;
  virtual double LossMax() const = 0;
  // Pr_P[Y = +inf]: mass where q = 0 (approximate DP's delta); 0 otherwise.
  virtual double InfiniteLossMass() const { return 0; }

  // Tails and CDFs of the finite part of Y, each computed from the complementary
  // function so both tails keep full relative precision:
  // SfP(y) = Pr_P[y < Y < inf], CdfP(y) = Pr_P[Y <= y]; likewise under Q.
  // SfP(y) + CdfP(y) + InfiniteLossMass() = 1.
  virtual double SfP(double y) const = 0;
  virtual double CdfP(double y) const = 0;
  virtual double SfQ(double y) const = 0;
  virtual double CdfQ(double y) const = 0;

  // log delta(eps) for ONE application: log E_P[(1 - e^{eps - Y})_+] (exact,
  // -inf when delta = 0). The default evaluates SfP(eps) - e^eps SfQ(eps) + inf mass
  // as a difference of logs; mechanisms with a closed form override it.
  virtual double LogDeltaForEpsilon(double epsilon) const;

  // K(t) and tilted moments through K''''. Finite for every real t for
  // Gaussian-type mechanisms; for bounded losses too. Error when not finite
  // (e.g. approx DP).
  absl::StatusOr<TiltedMoments> Tilted(double t) const {
    return TiltedUpTo(t, CumulantOrder::kFourth);
  }
  // The same; with kSixth also k5, k6 (from tilted central moments, spa.md 6:
  // K5 = mu5 - 10 mu3 mu2, K6 = mu6 - 15 mu4 mu2 - 10 mu3^2 + 30 mu2^3).
  virtual absl::StatusOr<TiltedMoments> TiltedUpTo(double t, CumulantOrder order) const = 0;
};

// log delta(eps) of the mu-GDP curve (the Gaussian mechanism composed to total
// mu = sqrt(sum (sensitivity/sigma)^2)), exact as a difference of logs; -inf when
// delta is 0 to double precision.
double GaussianLogDelta(double mu, double epsilon);

// The same with a certified bracket [lo, hi] on the true log delta: the two log
// terms carry a rounding bound, and log(e^a - e^b) is evaluated at both ends of
// their ranges (the difference amplifies their error by 1/(1 - e^{b-a}), up to
// 1e-10 relative where delta is a small difference of huge tails).
struct LogDeltaBracket {
  double lo, estimate, hi;
};
LogDeltaBracket GaussianLogDeltaBracket(double mu, double epsilon);

// The PLRV of `mechanism` in `direction`. Never fails for a valid Mechanism.
std::unique_ptr<Plrv> MakePlrv(const Mechanism& mechanism, Direction direction);

}  // namespace dpledger::core
