#include "core/evr/smc_moment_bound.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/evr/subsampled_gaussian_moments.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

// Laplace with d = sensitivity/scale (spec 2.2): M(l) = (l+1)/(2l+1) e^{l d}
// + l/(2l+1) e^{-(l+1) d}; both terms in log space, with their l-derivatives.
void LaplaceLogTerms(double lambda, double d, double* t1, double* t2, double* dt1, double* dt2) {
  *t1 = std::log((lambda + 1) / (2 * lambda + 1)) + lambda * d;
  *t2 = lambda > 0 ? std::log(lambda / (2 * lambda + 1)) - (lambda + 1) * d : -kInf;
  *dt1 = 1 / (lambda + 1) - 2 / (2 * lambda + 1) + d;
  *dt2 = lambda > 0 ? 1 / lambda - 2 / (2 * lambda + 1) - d : 0;
}

// Two atoms +-e0 with P-masses p = 1/(1 + e^{-e0}) and 1 - p (randomized response).
void TwoPointLogTerms(double lambda, double e0, double* t1, double* t2) {
  const double log_norm = std::log1p(std::exp(-e0));
  *t1 = -log_norm + lambda * e0;
  *t2 = -e0 - log_norm - lambda * e0;
}

double Softmax1(double t1, double t2) {  // e^{t1}/(e^{t1} + e^{t2})
  if (t2 == -kInf) return 1;
  const double z = t1 - t2;
  return z >= 0 ? 1 / (1 + std::exp(-z)) : std::exp(z) / (1 + std::exp(z));
}

// log of u^u l^l/(u + l)^{u + l} - eps l + log M, with 0 log 0 = 0.
double LogBound(const LedgerMgf& mgf, double epsilon, double u, double lambda) {
  const double l_log_l = lambda > 0 ? lambda * std::log(lambda) : 0;
  return mgf.LogMgf(lambda) - epsilon * lambda + u * std::log(u) + l_log_l -
         (u + lambda) * std::log(u + lambda);
}

}  // namespace

absl::StatusOr<LedgerMgf> LedgerMgf::Create(std::span<const MechanismEvent> ledger) {
  LedgerMgf mgf;
  for (const MechanismEvent& e : ledger) {
    const Mechanism& m = e.mechanism;
    Term t;
    t.count = static_cast<double>(e.count);
    switch (m.kind()) {
      case MechanismKind::kGaussian:
        t.kind = Kind::kGaussian;
        t.a = m.normalized_noise();
        break;
      case MechanismKind::kSubsampledGaussian:
        if (m.sampling_rate() == 1) {
          t.kind = Kind::kGaussian;
          t.a = m.normalized_noise();
        } else {
          t.kind = Kind::kSubsampledGaussian;
          t.a = m.normalized_noise();
          t.b = m.sampling_rate();
          mgf.real_orders_ = false;
        }
        break;
      case MechanismKind::kLaplace:
        t.kind = Kind::kLaplace;
        t.a = 1 / m.normalized_noise();
        break;
      case MechanismKind::kSubsampledLaplace:
        if (m.sampling_rate() != 1) {
          return absl::UnimplementedError(absl::StrFormat(
              "the verifier has no proven moment bound for step '%s' (subsampled Laplace)",
              m.ToSpec()));
        }
        t.kind = Kind::kLaplace;
        t.a = 1 / m.normalized_noise();
        break;
      case MechanismKind::kRandomizedResponse:
      case MechanismKind::kPureDp:
        t.kind = Kind::kTwoPoint;
        t.a = m.epsilon();
        break;
      case MechanismKind::kApproxDp:
        if (m.delta() > 0) {
          return absl::UnimplementedError(absl::StrFormat(
              "the verifier cannot bound step '%s': approximate DP with delta > 0 has an "
              "infinite privacy loss",
              m.ToSpec()));
        }
        t.kind = Kind::kTwoPoint;
        t.a = m.epsilon();
        break;
    }
    mgf.terms_.push_back(t);
  }
  return mgf;
}

double LedgerMgf::LogMgf(double lambda) const {
  double total = 0;
  for (const Term& t : terms_) {
    double per_step = 0;
    switch (t.kind) {
      case Kind::kGaussian:
        per_step = lambda * (lambda + 1) / (2 * t.a * t.a);
        break;
      case Kind::kLaplace: {
        double t1, t2, d1, d2;
        LaplaceLogTerms(lambda, t.a, &t1, &t2, &d1, &d2);
        per_step = LogAddExp(t1, t2);
        break;
      }
      case Kind::kTwoPoint: {
        double t1, t2;
        TwoPointLogTerms(lambda, t.a, &t1, &t2);
        per_step = LogAddExp(t1, t2);
        break;
      }
      case Kind::kSubsampledGaussian:
        per_step = LogA(static_cast<int>(std::lround(lambda)) + 1, GaussianStep{t.a, t.b});
        break;
    }
    total += t.count * per_step;
  }
  return total;
}

double LedgerMgf::LogMgfDerivative(double lambda) const {
  double total = 0;
  for (const Term& t : terms_) {
    double per_step = 0;
    switch (t.kind) {
      case Kind::kGaussian:
        per_step = (2 * lambda + 1) / (2 * t.a * t.a);
        break;
      case Kind::kLaplace: {
        double t1, t2, d1, d2;
        LaplaceLogTerms(lambda, t.a, &t1, &t2, &d1, &d2);
        const double w = Softmax1(t1, t2);
        per_step = w * d1 + (1 - w) * d2;
        break;
      }
      case Kind::kTwoPoint: {
        double t1, t2;
        TwoPointLogTerms(lambda, t.a, &t1, &t2);
        const double w = Softmax1(t1, t2);
        per_step = t.a * (2 * w - 1);
        break;
      }
      case Kind::kSubsampledGaussian:
        per_step = kNaN;  // integer orders only
        break;
    }
    total += t.count * per_step;
  }
  return total;
}

MomentBound SmcMomentBound(const LedgerMgf& mgf, double epsilon, double u, int max_lambda) {
  MomentBound best;  // lambda = 0: the trivial bound E[x^u] <= 1
  if (!mgf.real_orders()) {
    for (int lambda = 1; lambda <= max_lambda; ++lambda) {
      const double v = LogBound(mgf, epsilon, u, lambda);
      if (v < best.log_value) best = {v, static_cast<double>(lambda)};
    }
    return best;
  }
  // log B is convex in lambda; its derivative K'(l) - eps + log(l/(u + l)) increases
  // from -inf at 0+. Bisection on the derivative; any lambda is a valid bound, so the
  // accuracy of the root affects tightness only.
  auto derivative = [&](double l) {
    return mgf.LogMgfDerivative(l) - epsilon + std::log(l / (u + l));
  };
  double hi = 1;
  while (derivative(hi) < 0 && hi < 1e9) hi *= 2;
  double lo = 0;
  if (derivative(hi) < 0) {
    lo = hi;  // bounded loss below eps: the bound keeps falling; take the cap
  } else {
    for (int i = 0; i < 200 && hi - lo > 1e-15 * hi; ++i) {
      const double mid = 0.5 * (lo + hi);
      (derivative(mid) < 0 ? lo : hi) = mid;
    }
  }
  const double lambda = 0.5 * (lo + hi);
  const double v = LogBound(mgf, epsilon, u, lambda);
  if (v < best.log_value) best = {v, lambda};
  return best;
}

}  // namespace dpledger::core
