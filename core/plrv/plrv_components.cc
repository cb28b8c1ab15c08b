#include "core/plrv/plrv_components.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/plrv/tilted_moments.h"
#include "core/util/check.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

// Both directions evaluate the remove-direction integral at tilt tr (remove: t;
// add: -1 - t, the e^{-Y} of the measure folded in) and flip the odd derivatives
// for add, as SubsampledGaussianPlrv does: d^j/dt^j K(-1 - t) = (-1)^j K^(j)(-1 - t).
double RemoveTilt(double t, bool add) { return add ? -1 - t : t; }
void FlipForAdd(TiltedMoments& m) {
  m.k1 = -m.k1;
  m.k3 = -m.k3;
  m.k5 = -m.k5;
}

// Subsampled Gaussian in u = output / s, u ~ N(0, 1) under Q; loss
// y(u) = log(1 - q + q e^{u/s - 1/(2 s^2)}) (increasing, convex). R has density
// ratio e^{u/s - 1/(2 s^2)} against Q.
class GaussianComponent final : public TiltedLaw {
 public:
  GaussianComponent(double s, double q, bool sampled, bool add)
      : s_(s), log_q_(std::log(q)), log_1mq_(std::log1p(-q)), sampled_(sampled), add_(add) {}

  double LossMin() const override { return add_ ? -kInf : log_1mq_; }
  double LossMax() const override { return add_ ? -log_1mq_ : kInf; }

  absl::StatusOr<TiltedMoments> TiltedUpTo(double t, CumulantOrder order) const override {
    const double tr = RemoveTilt(t, add_);
    // log-integrand g(u) = c u + tr y(u) - u^2/2 (+ const), c = 1/s for R, 0 for Q;
    // g'(u) = c + tr w(u)/s - u with w in (0, 1) the sampled share, so every mode
    // lies between c and c + tr/s, and g falls at least like -(u - that range)^2/2
    // outside it: 38 on each side leaves e^{-722}. For tr < 0, g is 1-strongly
    // concave (y convex): 38 around its single mode suffices.
    const double c = sampled_ ? 1 / s_ : 0;
    double u_lo = std::min(c, c + tr / s_) - 38, u_hi = std::max(c, c + tr / s_) + 38;
    if (tr < 0) {
      const double mode = Mode(c, tr);
      u_lo = mode - 38;
      u_hi = mode + 38;
    }
    const double h = std::min(0.1, s_ / 8);
    auto loss = [this](double u) { return Loss(u); };
    auto log_weight = [this, c](double u) { return c == 0 ? 0.0 : c * u - 1 / (2 * s_ * s_); };
    TiltedMoments m = TiltedTrapezoid(tr, u_lo, u_hi, h, loss, log_weight, order);
    if (add_) FlipForAdd(m);
    return m;
  }

 private:
  double Loss(double u) const { return LogAddExp(log_1mq_, log_q_ + u / s_ - 1 / (2 * s_ * s_)); }
  // The root of g'(u) = c + tr w(u)/s - u (decreasing in u) on [c + tr/s, c], tr < 0.
  double Mode(double c, double tr) const {
    double lo = c + tr / s_, hi = c;
    while (hi - lo > 1e-6) {
      const double u = 0.5 * (lo + hi);
      const double z = log_q_ + u / s_ - 1 / (2 * s_ * s_);
      const double w = std::exp(z - LogAddExp(log_1mq_, z));
      if (c + tr * w / s_ - u > 0) {
        lo = u;
      } else {
        hi = u;
      }
    }
    return 0.5 * (lo + hi);
  }

  double s_, log_q_, log_1mq_;
  bool sampled_, add_;
};

// Subsampled Laplace in units of the scale, d = sensitivity / scale: Q = Lap(0, 1),
// R = Lap(d, 1), loss y(o) = log(1 - q + q e^{l(o)}), l(o) = clamp(2o - d, -d, d).
// Atoms at o <= 0 (l = -d) and o >= d (l = d), a density between.
class LaplaceComponent final : public TiltedLaw {
 public:
  LaplaceComponent(double d, double q, bool sampled, bool add)
      : d_(d), log_q_(std::log(q)), log_1mq_(std::log1p(-q)), sampled_(sampled), add_(add) {
    lmin_ = LossOfL(-d_);
    lmax_ = LossOfL(d_);
  }
  double LossMin() const override { return add_ ? -lmax_ : lmin_; }
  double LossMax() const override { return add_ ? -lmin_ : lmax_; }

  absl::StatusOr<TiltedMoments> TiltedUpTo(double t, CumulantOrder order) const override {
    const double log_half = -std::log(2.0);
    // Q: mass 1/2 below 0, e^{-d}/2 above d, density e^{-o}/2 between; R mirrored.
    const double lw_lo = sampled_ ? log_half - d_ : log_half;
    const double lw_hi = sampled_ ? log_half : log_half - d_;
    const std::vector<LossAtom> atoms = {{lmin_, lw_lo}, {lmax_, lw_hi}};
    LossDensity density;
    density.x_lo = 0;
    density.x_hi = d_;
    density.loss = [this](double o) { return LossOfL(2 * o - d_); };
    const bool sampled = sampled_;
    const double d = d_;
    density.log_density = [sampled, d, log_half](double o) {
      return (sampled ? o - d : -o) + log_half;
    };
    TiltedMoments m = TiltedFromParts(RemoveTilt(t, add_), atoms, &density, order);
    if (add_) FlipForAdd(m);
    return m;
  }

 private:
  double LossOfL(double l) const { return LogAddExp(log_1mq_, log_q_ + l); }

  double d_, log_q_, log_1mq_, lmin_ = 0, lmax_ = 0;
  bool sampled_, add_;
};

}  // namespace

bool HasSampledComponents(const Mechanism& m) {
  return m.is_subsampled() && m.sampling_rate() < 1;
}

SampledComponents MakeSampledComponents(const Mechanism& m, Direction direction) {
  DPL_CHECK(HasSampledComponents(m));
  const bool add = direction == Direction::kAdd;
  const double q = m.sampling_rate();
  if (m.kind() == MechanismKind::kSubsampledGaussian) {
    const double s = m.normalized_noise();
    return {std::make_shared<GaussianComponent>(s, q, true, add),
            std::make_shared<GaussianComponent>(s, q, false, add)};
  }
  const double d = 1 / m.normalized_noise();
  return {std::make_shared<LaplaceComponent>(d, q, true, add),
          std::make_shared<LaplaceComponent>(d, q, false, add)};
}

}  // namespace dpledger::core
