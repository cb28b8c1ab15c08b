#include "core/plrv/plrv.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/plrv/tilted_moments.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

// --- Gaussian: Y ~ N(m, 2m) under P and N(-m, 2m) under Q, m = mu^2/2. ---
class GaussianPlrv final : public Plrv {
 public:
  explicit GaussianPlrv(double mu) : mu_(mu), mean_(mu * mu / 2) {}
  double LossMin() const override { return -kInf; }
  double LossMax() const override { return kInf; }
  double SfP(double y) const override { return NormalSf((y - mean_) / mu_); }
  double CdfP(double y) const override { return NormalCdf((y - mean_) / mu_); }
  double SfQ(double y) const override { return NormalSf((y + mean_) / mu_); }
  double CdfQ(double y) const override { return NormalCdf((y + mean_) / mu_); }
  double LogDeltaForEpsilon(double epsilon) const override {
    return GaussianLogDelta(mu_, epsilon);
  }
  // Every cumulant past K'' is 0, so k5 = k6 = 0 at either order.
  absl::StatusOr<TiltedMoments> TiltedUpTo(double t, CumulantOrder /*order*/) const override {
    const double s2 = mu_ * mu_;
    TiltedMoments r;
    r.k = s2 * t * (t + 1) / 2;
    r.k1 = s2 * (t + 0.5);
    r.k2 = s2;
    r.abs3 = 2 * std::sqrt(2 / 3.141592653589793) * s2 * mu_;
    return r;
  }

 private:
  double mu_, mean_;
};

// --- Atoms only: randomized response, pure DP, approximate DP. ---
// Each atom carries its loss and its masses under P and Q.
struct DiscreteAtom {
  double loss, p, q;
};

class DiscretePlrv final : public Plrv {
 public:
  DiscretePlrv(std::vector<DiscreteAtom> atoms, double inf_mass)
      : atoms_(std::move(atoms)), inf_mass_(inf_mass) {
    std::sort(atoms_.begin(), atoms_.end(),
              [](const DiscreteAtom& a, const DiscreteAtom& b) { return a.loss < b.loss; });
  }
  double LossMin() const override { return atoms_.front().loss; }
  double LossMax() const override { return atoms_.back().loss; }
  double InfiniteLossMass() const override { return inf_mass_; }
  double SfP(double y) const override { return Sum(y, true, true); }
  double CdfP(double y) const override { return Sum(y, true, false); }
  double SfQ(double y) const override { return Sum(y, false, true); }
  double CdfQ(double y) const override { return Sum(y, false, false); }
  absl::StatusOr<TiltedMoments> TiltedUpTo(double t, CumulantOrder order) const override {
    if (inf_mass_ > 0 && t != -1) {
      return absl::UnimplementedError(
          "approximate DP with delta > 0 has an infinite privacy loss; its cumulant "
          "generating function is infinite");
    }
    std::vector<LossAtom> parts;
    for (const DiscreteAtom& a : atoms_) {
      if (a.p > 0) parts.push_back({a.loss, std::log(a.p)});
    }
    return TiltedFromParts(t, parts, nullptr, order);
  }

 private:
  double Sum(double y, bool under_p, bool upper) const {
    double s = 0;
    for (const DiscreteAtom& a : atoms_) {
      if (upper ? a.loss > y : a.loss <= y) s += under_p ? a.p : a.q;
    }
    return s;
  }
  std::vector<DiscreteAtom> atoms_;
  double inf_mass_;
};

// Randomized-response pair with loss +-eps and the given finite mass (1 - delta).
std::unique_ptr<Plrv> MakeDiscrete(double epsilon, double delta) {
  // p = (1 - delta) e^eps / (1 + e^eps), written with the logistic function.
  const double hi = (1 - delta) / (1 + std::exp(-epsilon));
  const double lo = (1 - delta) / (1 + std::exp(epsilon));
  return std::make_unique<DiscretePlrv>(
      std::vector<DiscreteAtom>{{epsilon, hi, lo}, {-epsilon, lo, hi}}, delta);
}

// --- Laplace with d = sensitivity/scale (spa.md 6.2). Under P: atom +d (1/2),
// atom -d (e^{-d}/2), density e^{(l-d)/2}/4 on (-d, d). Q = e^{-l} P. ---
class LaplacePlrv final : public Plrv {
 public:
  explicit LaplacePlrv(double d) : d_(d) {}
  double LossMin() const override { return -d_; }
  double LossMax() const override { return d_; }
  double CdfP(double y) const override {
    if (y < -d_) return 0;
    if (y >= d_) return 1;
    return 0.5 * std::exp((y - d_) / 2);
  }
  double SfP(double y) const override {
    if (y < -d_) return 1;
    if (y >= d_) return 0;
    return -std::expm1((y - d_) / 2 - std::log(2.0));
  }
  double SfQ(double y) const override {
    if (y < -d_) return 1;
    if (y >= d_) return 0;
    return 0.5 * std::exp(-(y + d_) / 2);
  }
  double CdfQ(double y) const override {
    if (y < -d_) return 0;
    if (y >= d_) return 1;
    return -std::expm1(-(y + d_) / 2 - std::log(2.0));
  }
  double LogDeltaForEpsilon(double epsilon) const override {
    if (epsilon >= d_) return -kInf;
    return Log1mExp((epsilon - d_) / 2);  // 1 - e^{(eps - d)/2}
  }
  absl::StatusOr<TiltedMoments> TiltedUpTo(double t, CumulantOrder order) const override {
    const std::vector<LossAtom> atoms = {{d_, -std::log(2.0)}, {-d_, -d_ - std::log(2.0)}};
    LossDensity density;
    density.x_lo = -d_;
    density.x_hi = d_;
    density.loss = [](double l) { return l; };
    density.log_density = [d = d_](double l) { return (l - d) / 2 - std::log(4.0); };
    return TiltedFromParts(t, atoms, &density, order);
  }

 private:
  double d_;
};

// --- Poisson-subsampled Gaussian, sensitivity 1, noise s, rate q < 1
// (mc-evr.md 2.3). Remove: P = (1-q)N(0,s^2) + qN(1,s^2), Q = N(0,s^2),
// loss y(t) = log(1 - q + q e^{(2t-1)/(2s^2)}), increasing in t. Add: the pair
// swapped, loss -y(t) with t ~ Q. ---
class SubsampledGaussianPlrv final : public Plrv {
 public:
  SubsampledGaussianPlrv(double s, double q, Direction dir)
      : s_(s), q_(q), log_q_(std::log(q)), log_1mq_(std::log1p(-q)), add_(dir == Direction::kAdd) {}

  double LossMin() const override { return add_ ? -kInf : log_1mq_; }
  double LossMax() const override { return add_ ? -log_1mq_ : kInf; }

  double SfP(double y) const override {
    if (!add_) {
      if (y <= log_1mq_) return 1;
      const double t = TStar(y);
      return (1 - q_) * NormalSf(t / s_) + q_ * NormalSf((t - 1) / s_);
    }
    if (y >= -log_1mq_) return 0;  // Pr_Q[y(t) < -y]
    return NormalCdf(TStar(-y) / s_);
  }
  double CdfP(double y) const override {
    if (!add_) {
      if (y <= log_1mq_) return 0;
      const double t = TStar(y);
      return (1 - q_) * NormalCdf(t / s_) + q_ * NormalCdf((t - 1) / s_);
    }
    if (y >= -log_1mq_) return 1;
    return NormalSf(TStar(-y) / s_);
  }
  double SfQ(double y) const override {
    if (!add_) {
      if (y <= log_1mq_) return 1;
      return NormalSf(TStar(y) / s_);
    }
    if (y >= -log_1mq_) return 0;  // Pr_P[y(t) < -y]
    const double t = TStar(-y);
    return (1 - q_) * NormalCdf(t / s_) + q_ * NormalCdf((t - 1) / s_);
  }
  double CdfQ(double y) const override {
    if (!add_) {
      if (y <= log_1mq_) return 0;
      return NormalCdf(TStar(y) / s_);
    }
    if (y >= -log_1mq_) return 1;
    const double t = TStar(-y);
    return (1 - q_) * NormalSf(t / s_) + q_ * NormalSf((t - 1) / s_);
  }

  double LogDeltaForEpsilon(double eps) const override {
    if (!add_) {
      // delta_R = q Sf((t*-1)/s) - (e^eps - 1 + q) Sf(t*/s), t* = t*(eps).
      const double t = TStar(eps);
      const double a = log_q_ + LogNormalSf((t - 1) / s_);
      const double b = LogExpm1PlusQ(eps) + LogNormalSf(t / s_);
      return b < a ? LogSubExp(a, b) : -kInf;
    }
    if (eps >= -log_1mq_) return -kInf;
    // delta_A = (1 - e^eps (1-q)) Phi(t'/s) - e^eps q Phi((t'-1)/s), t' = t*(-eps).
    const double t = TStar(-eps);
    const double a = Log1mExp(eps + log_1mq_) + LogNormalCdf(t / s_);
    const double b = eps + log_q_ + LogNormalCdf((t - 1) / s_);
    return b < a ? LogSubExp(a, b) : -kInf;
  }

  absl::StatusOr<TiltedMoments> TiltedUpTo(double t, CumulantOrder order) const override {
    // Remove-direction CGF via the trapezoid rule of spa.md 6.3, in u = output/s
    // under Q. The add direction is K_add(t) = K_remove(-1 - t).
    const double tr = add_ ? -1 - t : t;
    const double shift = (tr + 1) / s_;
    double u_lo = std::min(0.0, shift) - 38, u_hi = std::max(0.0, shift) + 38;
    if (add_ && t >= 0) {
      // The add-direction log-integrand -t L(u) - u^2/2 is 1-strongly concave (L is
      // convex in u and t >= 0), so its mass lies within 38 of its mode: the same
      // cut-off as above, without the range [-t/s, 0] that grows with t.
      const double mode = AddDirectionMode(t);
      u_lo = mode - 38;
      u_hi = mode + 38;
    }
    const double h = std::min(0.1, s_ / 8);
    auto loss = [this](double u) {
      return LogAddExp(log_1mq_, log_q_ + u / s_ - 1 / (2 * s_ * s_));
    };
    // E_P[e^{tL}] = E_Q[e^{(t+1)L}]: weight e^{L} changes measure from Q to P.
    // With c = tr + 1 >= 0, c L is convex (L is a log-sum-exp of u), so its chord
    // bounds it and the log-integrand c L(u) - u^2/2 is at most the concave chord
    // quadratic's maximum on [a, b]: the trapezoid may skip blocks below it.
    const double c = tr + 1;
    LogIntegrandBound bound;
    if (c >= 0) {
      bound = [&loss, c](double a, double b) {
        const double la = c * loss(a), lb = c * loss(b);
        if (!(b > a)) return std::max(la - 0.5 * a * a, lb - 0.5 * b * b);
        const double slope = (lb - la) / (b - a);
        const double u = std::clamp(slope, a, b);
        return la + slope * (u - a) - 0.5 * u * u;
      };
    }
    TiltedMoments m = TiltedTrapezoid(tr, u_lo, u_hi, h, loss, loss, order, bound);
    if (!std::isfinite(m.k)) {
      return absl::OutOfRangeError(absl::StrFormat(
          "subsampled_gaussian (sigma=%g, q=%g): the tilted quadrature at t=%g needs more than "
          "%d grid points",
          s_, q_, t, kMaxTrapezoidPoints));
    }
    if (add_) {  // d^j/dt^j K(-1 - t) = (-1)^j K^(j)(-1 - t)
      m.k1 = -m.k1;
      m.k3 = -m.k3;
      m.k5 = -m.k5;
    }
    return m;
  }

 private:
  // log(e^v - 1 + q), stable for large v.
  double LogExpm1PlusQ(double v) const {
    if (v > 700) return v + std::log1p((q_ - 1) * std::exp(-v));
    return std::log(std::expm1(v) + q_);
  }
  // t*(v): the output at which the remove-direction loss equals v > log(1-q).
  double TStar(double v) const { return 0.5 + s_ * s_ * (LogExpm1PlusQ(v) - log_q_); }

  // Root u* in [-t/s, 0] of u + t L'(u) = 0 (t >= 0), the mode of e^{-t L(u)} phi(u).
  // L'(u) = w(u)/s with w the sampled share q e^z/(1 - q + q e^z), z = u/s - 1/(2s^2);
  // the left side is increasing (slope >= 1), so bisection is safe; 1e-6 suffices.
  double AddDirectionMode(double t) const {
    double lo = -t / s_, hi = 0;
    // At most 200 halvings: for |lo| past ~1e10 the 1e-6 gap is below rounding.
    for (int it = 0; it < 200 && hi - lo > 1e-6; ++it) {
      const double u = 0.5 * (lo + hi);
      const double z = log_q_ + u / s_ - 1 / (2 * s_ * s_);
      const double w = std::exp(z - LogAddExp(log_1mq_, z));
      if (u + t * w / s_ > 0) {
        hi = u;
      } else {
        lo = u;
      }
    }
    return 0.5 * (lo + hi);
  }

  double s_, q_, log_q_, log_1mq_;
  bool add_;
};

// Laplace CDF and survival of a standard Laplace variable (scale 1).
double LapCdf(double x) { return x < 0 ? 0.5 * std::exp(x) : -std::expm1(-x - std::log(2.0)); }
double LapSf(double x) { return LapCdf(-x); }

// --- Poisson-subsampled Laplace in units of the scale, d = sensitivity/scale.
// Remove: P = (1-q)Lap(0,1) + qLap(d,1), Q = Lap(0,1), loss
// L(o) = log(1 - q + q e^{l(o)}), l(o) = clamp(2o - d, -d, d). Add: swapped. ---
class SubsampledLaplacePlrv final : public Plrv {
 public:
  SubsampledLaplacePlrv(double d, double q, Direction dir)
      : d_(d), q_(q), log_q_(std::log(q)), log_1mq_(std::log1p(-q)), add_(dir == Direction::kAdd) {
    lmin_ = LossOfL(-d_);
    lmax_ = LossOfL(d_);
  }
  double LossMin() const override { return add_ ? -lmax_ : lmin_; }
  double LossMax() const override { return add_ ? -lmin_ : lmax_; }

  // Remove: Y = L. Add: Y' = -L with the pair swapped, so
  // Pr_{P'}[Y' > y] = Pr_Q[L < -y] and Pr_{Q'}[Y' > y] = Pr_P[L < -y].
  double CdfP(double y) const override { return add_ ? Prob(-y, false, false, false) : Prob(y, true, true, true); }
  double SfP(double y) const override { return add_ ? Prob(-y, false, true, false) : Prob(y, true, false, true); }
  double CdfQ(double y) const override { return add_ ? Prob(-y, true, false, false) : Prob(y, false, true, true); }
  double SfQ(double y) const override { return add_ ? Prob(-y, true, true, false) : Prob(y, false, false, true); }

  absl::StatusOr<TiltedMoments> TiltedUpTo(double t, CumulantOrder order) const override {
    // Base law under Q (Laplace(0,1)) with change of measure e^{L}: E_P[e^{tL}] =
    // E_Q[e^{(t+1)L}]. Atoms: o <= 0 (mass 1/2, l = -d), o >= d (mass e^{-d}/2, l = d);
    // density e^{-o}/2 on (0, d) with l = 2o - d.
    const double tr = add_ ? -1 - t : t;
    const std::vector<LossAtom> atoms = {{lmin_, -std::log(2.0) + lmin_},
                                         {lmax_, -d_ - std::log(2.0) + lmax_}};
    LossDensity density;
    density.x_lo = 0;
    density.x_hi = d_;
    density.loss = [this](double o) { return LossOfL(2 * o - d_); };
    density.log_density = [this](double o) { return -o - std::log(2.0) + LossOfL(2 * o - d_); };
    TiltedMoments m = TiltedFromParts(tr, atoms, &density, order);
    if (add_) {  // d^j/dt^j K(-1 - t) = (-1)^j K^(j)(-1 - t)
      m.k1 = -m.k1;
      m.k3 = -m.k3;
      m.k5 = -m.k5;
    }
    return m;
  }

 private:
  double LossOfL(double l) const { return LogAddExp(log_1mq_, log_q_ + l); }

  // Probability, under P or Q, that the remove loss L is below v: Pr[L <= v]
  // (closed) or Pr[L < v] (open); with below = false, its complement. The atoms
  // sit at L = lmin (o <= 0) and L = lmax (o >= d), so closed/open matters there.
  double Prob(double v, bool under_p, bool below, bool closed) const {
    // l*(v) = log(e^v - 1 + q) - log q; o* = (l* + d)/2.
    double lstar;
    if (v <= log_1mq_) {
      lstar = -kInf;
    } else {
      lstar = (v > 700 ? v + std::log1p((q_ - 1) * std::exp(-v)) : std::log(std::expm1(v) + q_)) -
              log_q_;
    }
    // Pr[L <= v] = Pr[l(o) <= l*].
    double cdf, sf;
    if (closed ? lstar < -d_ : lstar <= -d_) {
      cdf = 0, sf = 1;
    } else if (closed ? lstar >= d_ : lstar > d_) {
      cdf = 1, sf = 0;
    } else {
      const double o = (lstar + d_) / 2;
      if (under_p) {
        cdf = (1 - q_) * LapCdf(o) + q_ * LapCdf(o - d_);
        sf = (1 - q_) * LapSf(o) + q_ * LapSf(o - d_);
      } else {
        cdf = LapCdf(o);
        sf = LapSf(o);
      }
    }
    return below ? cdf : sf;
  }

  double d_, q_, log_q_, log_1mq_;
  bool add_;
  double lmin_ = 0, lmax_ = 0;
};

}  // namespace

std::string_view DirectionName(Direction d) { return d == Direction::kRemove ? "remove" : "add"; }

double GaussianLogDelta(double mu, double epsilon) {
  return GaussianLogDeltaBracket(mu, epsilon).estimate;
}

LogDeltaBracket GaussianLogDeltaBracket(double mu, double epsilon) {
  // delta = Phi(a) - e^eps Phi(b), a = -eps/mu + mu/2, b = -eps/mu - mu/2.
  const double la = LogNormalCdf(-epsilon / mu + mu / 2);
  const double lb = epsilon + LogNormalCdf(-epsilon / mu - mu / 2);
  if (la == -kInf) return {-kInf, -kInf, -kInf};
  // Absolute error of each log term: a few ulps of the log-CDF (erfc or the
  // asymptotic series, both within 1e-16 relative) and of the sums, scaled by
  // their size; 16 ulps is a generous allowance.
  const double err = 16 * std::numeric_limits<double>::epsilon() *
                     (1 + std::fabs(la) + (std::isfinite(lb) ? std::fabs(lb) : 0));
  const double x = lb - la;  // log(e^eps Phi(b) / Phi(a)) < 0 in exact arithmetic
  LogDeltaBracket r;
  r.estimate = x < 0 ? la + Log1mExp(x) : -kInf;  // x >= 0 only by rounding
  // delta = e^{la} (1 - e^{x}) falls in x; the true x lies in [x - 2 err, min(x + 2 err, 0)).
  r.hi = la + err + Log1mExp(std::min(x - 2 * err, -2 * err));
  r.lo = x + 2 * err < 0 ? la - err + Log1mExp(x + 2 * err) : -kInf;
  return r;
}

double Plrv::LogDeltaForEpsilon(double epsilon) const {
  const double inf = InfiniteLossMass();
  const double sp = SfP(epsilon);
  if (sp + inf <= 0) return -kInf;
  const double a = std::log(sp + inf);
  const double sq = SfQ(epsilon);
  if (sq <= 0) return a;
  const double b = epsilon + std::log(sq);
  return b < a ? LogSubExp(a, b) : -kInf;
}

std::unique_ptr<Plrv> MakePlrv(const Mechanism& m, Direction direction) {
  switch (m.kind()) {
    case MechanismKind::kGaussian:
      return std::make_unique<GaussianPlrv>(1 / m.normalized_noise());
    case MechanismKind::kSubsampledGaussian:
      if (m.sampling_rate() == 1) return std::make_unique<GaussianPlrv>(1 / m.normalized_noise());
      return std::make_unique<SubsampledGaussianPlrv>(m.normalized_noise(), m.sampling_rate(),
                                                      direction);
    case MechanismKind::kLaplace:
      return std::make_unique<LaplacePlrv>(1 / m.normalized_noise());
    case MechanismKind::kSubsampledLaplace:
      if (m.sampling_rate() == 1) return std::make_unique<LaplacePlrv>(1 / m.normalized_noise());
      return std::make_unique<SubsampledLaplacePlrv>(1 / m.normalized_noise(), m.sampling_rate(),
                                                     direction);
    case MechanismKind::kRandomizedResponse:
    case MechanismKind::kPureDp:
      return MakeDiscrete(m.epsilon(), 0);
    case MechanismKind::kApproxDp:
      return MakeDiscrete(m.epsilon(), m.delta());
  }
  return nullptr;
}

}  // namespace dpledger::core
