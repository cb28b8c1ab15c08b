// The mechanisms a ledger can record. A Mechanism is an immutable value built by a
// validating factory; every parameter is in units of the L2 (or L1 for Laplace)
// sensitivity. Neighbouring relation: add/remove one record (DP-SGD convention).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace dpledger::core {

enum class MechanismKind {
  kGaussian,             // N(0, (sigma * sensitivity)^2) noise on a sensitivity-bounded sum
  kLaplace,              // Laplace(scale) noise, sensitivity in the same units
  kSubsampledGaussian,   // Poisson sampling at rate q, then Gaussian (one DP-SGD step)
  kSubsampledLaplace,    // Poisson sampling at rate q, then Laplace
  kRandomizedResponse,   // binary randomized response: truthful with probability p
  kPureDp,               // an arbitrary eps-DP mechanism (dominated by randomized response)
  kApproxDp,             // an arbitrary (eps, delta)-DP mechanism
};

std::string_view MechanismKindName(MechanismKind kind);  // "gaussian", "laplace", ...

class Mechanism {
 public:
  // sigma: noise standard deviation in units of the sensitivity (noise multiplier).
  static absl::StatusOr<Mechanism> Gaussian(double sigma, double sensitivity = 1.0);
  // scale: Laplace scale b (same units as sensitivity).
  static absl::StatusOr<Mechanism> Laplace(double scale, double sensitivity = 1.0);
  // sampling_rate q in (0, 1]; q = 1 is the plain mechanism.
  static absl::StatusOr<Mechanism> SubsampledGaussian(double sigma, double sampling_rate,
                                                      double sensitivity = 1.0);
  static absl::StatusOr<Mechanism> SubsampledLaplace(double scale, double sampling_rate,
                                                     double sensitivity = 1.0);
  // p: probability of answering truthfully, in (1/2, 1).
  static absl::StatusOr<Mechanism> RandomizedResponse(double p);
  // epsilon > 0 (nats).
  static absl::StatusOr<Mechanism> PureDp(double epsilon);
  // epsilon >= 0, delta in [0, 1).
  static absl::StatusOr<Mechanism> ApproxDp(double epsilon, double delta);

  MechanismKind kind() const { return kind_; }
  double sigma() const { return sigma_; }            // Gaussian kinds
  double scale() const { return scale_; }            // Laplace kinds
  double sensitivity() const { return sensitivity_; }
  double sampling_rate() const { return sampling_rate_; }  // 1 unless subsampled
  double truth_probability() const { return p_; }    // randomized response
  double epsilon() const { return epsilon_; }        // pure / approximate DP
  double delta() const { return delta_; }            // approximate DP

  // Noise in units of the sensitivity: sigma/sensitivity or scale/sensitivity.
  double normalized_noise() const;
  bool is_subsampled() const {
    return kind_ == MechanismKind::kSubsampledGaussian ||
           kind_ == MechanismKind::kSubsampledLaplace;
  }
  // True when the add and remove directions have the same privacy-loss law.
  bool is_symmetric() const { return !is_subsampled() || sampling_rate_ == 1.0; }

  // The SPEC syntax of `dpledger account --step`, without count, e.g.
  // "subsampled_gaussian:sigma=1,q=0.001". Round-trips through ParseStep.
  std::string ToSpec() const;

  friend bool operator==(const Mechanism&, const Mechanism&) = default;

 private:
  Mechanism(MechanismKind kind) : kind_(kind) {}

  MechanismKind kind_;
  double sigma_ = 0;
  double scale_ = 0;
  double sensitivity_ = 1;
  double sampling_rate_ = 1;
  double p_ = 0;
  double epsilon_ = 0;
  double delta_ = 0;
};

// One ledger entry: a mechanism applied `count` times in a row.
struct MechanismEvent {
  Mechanism mechanism;
  int64_t count = 1;
  friend bool operator==(const MechanismEvent&, const MechanismEvent&) = default;
};

// Largest count one event may carry (keeps sums of counts far from overflow).
inline constexpr int64_t kMaxEventCount = int64_t{1} << 40;

// Parses "KIND:key=value,..." (keys: sigma, scale, sensitivity, q, p, epsilon|eps,
// delta, count). Errors name the offending field.
absl::StatusOr<MechanismEvent> ParseStep(std::string_view spec);

}  // namespace dpledger::core
