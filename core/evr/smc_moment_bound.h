// Proven moment bounds of the simple Monte Carlo estimator, from the MGF of the
// composed privacy loss (mc-evr.md 1.8, 4.7.1; paper Thm E.2 / Cor. 19):
//
//   E[(1 - e^{eps - Y})_+^u] <= S(u) = min_lambda M_Y(lambda) e^{-eps lambda}
//                                         u^u lambda^lambda / (u + lambda)^{u + lambda}
//
// for u >= 1 and every lambda >= 0. u = 2 is the SMC second moment nu_SMC used by the
// verifier; u = 1 is an RDP-style upper bound on delta itself; S(2a) enters the
// Hoelder IS bound (is_moment_bound.h). The remove-direction MGF also bounds the add
// direction (B_alpha <= A_alpha, spec 2.3), so one LedgerMgf serves both directions.
//
// These are certified upper bounds (exact closed forms, no quadrature). Thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/mechanisms/mechanism.h"

namespace dpledger::core {

// log M_Y(lambda) = log E_P[e^{lambda Y}] of the remove-direction PLRV of a ledger:
// the sum over events of count * (per-step log MGF).
//   Gaussian:             lambda (lambda + 1)/(2 s^2)                     (real lambda)
//   Laplace (scale b):    spec 2.2 closed form                            (real lambda)
//   randomized response / pure DP (loss +-eps0): log(p e^{l eps0} + (1-p) e^{-l eps0})
//   subsampled Gaussian:  log A_{lambda+1}(s, q)                          (integer lambda)
// Subsampled Laplace (q < 1) and approximate DP with delta > 0 have no proven MGF
// here: Create returns UNIMPLEMENTED naming the step.
class LedgerMgf {
 public:
  static absl::StatusOr<LedgerMgf> Create(std::span<const MechanismEvent> ledger);

  // True when every event has a closed form at real lambda; otherwise only integer
  // lambda may be passed to LogMgf.
  bool real_orders() const { return real_orders_; }
  double LogMgf(double lambda) const;
  // d/dlambda log M_Y; only when real_orders().
  double LogMgfDerivative(double lambda) const;

 private:
  enum class Kind { kGaussian, kLaplace, kTwoPoint, kSubsampledGaussian };
  struct Term {
    Kind kind;
    double a = 0, b = 0;  // Gaussian: s; Laplace: d = 1/b; two-point: eps0; SG: s, q
    double count = 0;
  };
  std::vector<Term> terms_;
  bool real_orders_ = true;
};

struct MomentBound {
  double log_value = 0;  // log S(u); <= 0 (x <= 1 bounds every moment by 1)
  double lambda = 0;     // the order attaining it (0: the trivial bound 1)
};

// Default cap on integer orders (spec 4.7.1: lambda_max = 256).
inline constexpr int kDefaultSmcMaxLambda = 256;

// S(u) for epsilon >= 0, u >= 1. Real orders: lambda* is the root of
// K'(lambda) - eps + log(lambda/(u + lambda)) = 0 (log S is convex in lambda), found by
// bisection. Integer orders: the minimum over lambda = 1..max_lambda.
MomentBound SmcMomentBound(const LedgerMgf& mgf, double epsilon, double u,
                           int max_lambda = kDefaultSmcMaxLambda);

}  // namespace dpledger::core
