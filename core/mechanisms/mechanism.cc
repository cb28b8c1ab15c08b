#include "core/mechanisms/mechanism.h"

#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace dpledger::core {
namespace {

// Keeps every loss finite in double precision: 1/sigma^2 and e^{1/scale} stay far
// from overflow.
constexpr double kMinNoise = 1e-3;

absl::Status CheckPositive(std::string_view field, double v) {
  if (!std::isfinite(v) || v <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s must be a finite number > 0, got %g", std::string(field), v));
  }
  return absl::OkStatus();
}

absl::Status CheckNoise(std::string_view field, double noise, double sensitivity) {
  if (auto s = CheckPositive(field, noise); !s.ok()) return s;
  if (auto s = CheckPositive("sensitivity", sensitivity); !s.ok()) return s;
  if (noise / sensitivity < kMinNoise) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s/sensitivity must be >= %g, got %g", std::string(field), kMinNoise,
        noise / sensitivity));
  }
  return absl::OkStatus();
}

absl::Status CheckRate(double q) {
  if (!std::isfinite(q) || q <= 0 || q > 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("sampling_rate q must be in (0, 1], got %g", q));
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view MechanismKindName(MechanismKind kind) {
  switch (kind) {
    case MechanismKind::kGaussian: return "gaussian";
    case MechanismKind::kLaplace: return "laplace";
    case MechanismKind::kSubsampledGaussian: return "subsampled_gaussian";
    case MechanismKind::kSubsampledLaplace: return "subsampled_laplace";
    case MechanismKind::kRandomizedResponse: return "randomized_response";
    case MechanismKind::kPureDp: return "pure_dp";
    case MechanismKind::kApproxDp: return "approx_dp";
  }
  return "unknown";
}

absl::StatusOr<Mechanism> Mechanism::Gaussian(double sigma, double sensitivity) {
  if (auto s = CheckNoise("sigma", sigma, sensitivity); !s.ok()) return s;
  Mechanism m(MechanismKind::kGaussian);
  m.sigma_ = sigma;
  m.sensitivity_ = sensitivity;
  return m;
}

absl::StatusOr<Mechanism> Mechanism::Laplace(double scale, double sensitivity) {
  if (auto s = CheckNoise("scale", scale, sensitivity); !s.ok()) return s;
  Mechanism m(MechanismKind::kLaplace);
  m.scale_ = scale;
  m.sensitivity_ = sensitivity;
  return m;
}

absl::StatusOr<Mechanism> Mechanism::SubsampledGaussian(double sigma, double sampling_rate,
                                                        double sensitivity) {
  if (auto s = CheckNoise("sigma", sigma, sensitivity); !s.ok()) return s;
  if (auto s = CheckRate(sampling_rate); !s.ok()) return s;
  Mechanism m(MechanismKind::kSubsampledGaussian);
  m.sigma_ = sigma;
  m.sensitivity_ = sensitivity;
  m.sampling_rate_ = sampling_rate;
  return m;
}

absl::StatusOr<Mechanism> Mechanism::SubsampledLaplace(double scale, double sampling_rate,
                                                       double sensitivity) {
  if (auto s = CheckNoise("scale", scale, sensitivity); !s.ok()) return s;
  if (auto s = CheckRate(sampling_rate); !s.ok()) return s;
  Mechanism m(MechanismKind::kSubsampledLaplace);
  m.scale_ = scale;
  m.sensitivity_ = sensitivity;
  m.sampling_rate_ = sampling_rate;
  return m;
}

absl::StatusOr<Mechanism> Mechanism::RandomizedResponse(double p) {
  if (!std::isfinite(p) || p <= 0.5 || p >= 1) {
    return absl::InvalidArgumentError(absl::StrFormat("p must be in (0.5, 1), got %g", p));
  }
  Mechanism m(MechanismKind::kRandomizedResponse);
  m.p_ = p;
  m.epsilon_ = std::log(p) - std::log1p(-p);
  return m;
}

absl::StatusOr<Mechanism> Mechanism::PureDp(double epsilon) {
  if (auto s = CheckPositive("epsilon", epsilon); !s.ok()) return s;
  if (epsilon > 700) {
    return absl::InvalidArgumentError(absl::StrFormat("epsilon must be <= 700, got %g", epsilon));
  }
  Mechanism m(MechanismKind::kPureDp);
  m.epsilon_ = epsilon;
  return m;
}

absl::StatusOr<Mechanism> Mechanism::ApproxDp(double epsilon, double delta) {
  if (!std::isfinite(epsilon) || epsilon < 0 || epsilon > 700) {
    return absl::InvalidArgumentError(
        absl::StrFormat("epsilon must be in [0, 700], got %g", epsilon));
  }
  if (!std::isfinite(delta) || delta < 0 || delta >= 1) {
    return absl::InvalidArgumentError(absl::StrFormat("delta must be in [0, 1), got %g", delta));
  }
  if (epsilon == 0 && delta == 0) {
    return absl::InvalidArgumentError("epsilon and delta cannot both be 0 (a no-op mechanism)");
  }
  Mechanism m(MechanismKind::kApproxDp);
  m.epsilon_ = epsilon;
  m.delta_ = delta;
  return m;
}

double Mechanism::normalized_noise() const {
  switch (kind_) {
    case MechanismKind::kGaussian:
    case MechanismKind::kSubsampledGaussian:
      return sigma_ / sensitivity_;
    case MechanismKind::kLaplace:
    case MechanismKind::kSubsampledLaplace:
      return scale_ / sensitivity_;
    default:
      return 0;
  }
}

std::string Mechanism::ToSpec() const {
  std::string out(MechanismKindName(kind_));
  switch (kind_) {
    case MechanismKind::kGaussian:
      absl::StrAppendFormat(&out, ":sigma=%.17g", sigma_);
      break;
    case MechanismKind::kLaplace:
      absl::StrAppendFormat(&out, ":scale=%.17g", scale_);
      break;
    case MechanismKind::kSubsampledGaussian:
      absl::StrAppendFormat(&out, ":sigma=%.17g,q=%.17g", sigma_, sampling_rate_);
      break;
    case MechanismKind::kSubsampledLaplace:
      absl::StrAppendFormat(&out, ":scale=%.17g,q=%.17g", scale_, sampling_rate_);
      break;
    case MechanismKind::kRandomizedResponse:
      absl::StrAppendFormat(&out, ":p=%.17g", p_);
      return out;
    case MechanismKind::kPureDp:
      absl::StrAppendFormat(&out, ":epsilon=%.17g", epsilon_);
      return out;
    case MechanismKind::kApproxDp:
      absl::StrAppendFormat(&out, ":epsilon=%.17g,delta=%.17g", epsilon_, delta_);
      return out;
  }
  if (sensitivity_ != 1.0) absl::StrAppendFormat(&out, ",sensitivity=%.17g", sensitivity_);
  return out;
}

absl::StatusOr<MechanismEvent> ParseStep(std::string_view spec) {
  const size_t colon = spec.find(':');
  const std::string kind(spec.substr(0, colon));
  std::map<std::string, double> kv;
  int64_t count = 1;
  if (colon != std::string_view::npos) {
    const std::string rest(spec.substr(colon + 1));
    for (const std::string& part :
         std::vector<std::string>(absl::StrSplit(rest, ',', absl::SkipEmpty()))) {
      std::vector<std::string> key_value = absl::StrSplit(part, absl::MaxSplits('=', 1));
      if (key_value.size() != 2 || key_value[0].empty()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "step '%s': expected key=value, got '%s'", std::string(spec), part));
      }
      const std::string& key = key_value[0];
      if (key == "count") {
        int64_t c;
        if (!absl::SimpleAtoi(key_value[1], &c) || c < 1 || c > kMaxEventCount) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "count must be an integer in [1, %d], got '%s'", kMaxEventCount, key_value[1]));
        }
        count = c;
        continue;
      }
      double v;
      if (!absl::SimpleAtod(key_value[1], &v)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s must be a number, got '%s'", key, key_value[1]));
      }
      const std::string canonical = key == "eps" ? "epsilon" : key == "sampling_rate" ? "q" : key;
      if (!kv.emplace(canonical, v).second) {
        return absl::InvalidArgumentError(absl::StrFormat("%s given twice", canonical));
      }
    }
  }
  auto take = [&](const std::string& key, double fallback, bool required,
                  absl::Status* status) -> double {
    auto it = kv.find(key);
    if (it == kv.end()) {
      if (required && status->ok()) {
        *status = absl::InvalidArgumentError(
            absl::StrFormat("step '%s': missing %s", std::string(spec), key));
      }
      return fallback;
    }
    const double v = it->second;
    kv.erase(it);
    return v;
  };
  absl::Status missing;
  absl::StatusOr<Mechanism> mech = absl::InvalidArgumentError(absl::StrFormat(
      "unknown mechanism kind '%s' (expected gaussian, laplace, subsampled_gaussian, "
      "subsampled_laplace, randomized_response, pure_dp, approx_dp)",
      kind));
  if (kind == "gaussian") {
    const double sigma = take("sigma", 0, true, &missing);
    const double sens = take("sensitivity", 1, false, &missing);
    if (missing.ok()) mech = Mechanism::Gaussian(sigma, sens);
  } else if (kind == "laplace") {
    const double scale = take("scale", 0, true, &missing);
    const double sens = take("sensitivity", 1, false, &missing);
    if (missing.ok()) mech = Mechanism::Laplace(scale, sens);
  } else if (kind == "subsampled_gaussian") {
    const double sigma = take("sigma", 0, true, &missing);
    const double q = take("q", 0, true, &missing);
    const double sens = take("sensitivity", 1, false, &missing);
    if (missing.ok()) mech = Mechanism::SubsampledGaussian(sigma, q, sens);
  } else if (kind == "subsampled_laplace") {
    const double scale = take("scale", 0, true, &missing);
    const double q = take("q", 0, true, &missing);
    const double sens = take("sensitivity", 1, false, &missing);
    if (missing.ok()) mech = Mechanism::SubsampledLaplace(scale, q, sens);
  } else if (kind == "randomized_response") {
    const double p = take("p", 0, true, &missing);
    if (missing.ok()) mech = Mechanism::RandomizedResponse(p);
  } else if (kind == "pure_dp") {
    const double eps = take("epsilon", 0, true, &missing);
    if (missing.ok()) mech = Mechanism::PureDp(eps);
  } else if (kind == "approx_dp") {
    const double eps = take("epsilon", 0, true, &missing);
    const double delta = take("delta", 0, true, &missing);
    if (missing.ok()) mech = Mechanism::ApproxDp(eps, delta);
  }
  if (!missing.ok()) return missing;
  if (!mech.ok()) return mech.status();
  if (!kv.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "step '%s': unknown key '%s' for %s", std::string(spec), kv.begin()->first, kind));
  }
  return MechanismEvent{*std::move(mech), count};
}

}  // namespace dpledger::core
