#include "client/cli_accountant_flags.h"

#include <optional>

#include "absl/strings/str_format.h"
#include "core/registry/accountant_option_names.h"

namespace dpledger::cli {

std::vector<std::string> WithAccountantFlags(std::vector<std::string> known) {
  for (const char* f : {"samples", "seed", "edgeworth-order", "edgeworth-mode", "spa-estimator",
                        "pld-precision", "conditioning"}) {
    known.push_back(f);
  }
  return known;
}

absl::Status AccountantFlags(const Args& args, const std::string& name,
                             core::AccountantOptions* options) {
  auto samples = args.GetInt("samples");
  if (!samples.ok()) return samples.status();
  if (samples->has_value()) {
    if (**samples < 2) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--samples must be >= 2, got %d", **samples));
    }
    options->mc.num_samples = **samples;
  }
  auto seed = args.GetInt("seed");
  if (!seed.ok()) return seed.status();
  if (seed->has_value()) options->mc.seed = static_cast<uint64_t>(**seed);
  if ((samples->has_value() || seed->has_value()) && name != "mc") {
    return absl::InvalidArgumentError("--samples and --seed apply only to --accountant mc");
  }

  auto order = args.GetInt("edgeworth-order");
  if (!order.ok()) return order.status();
  if (order->has_value()) {
    if (**order < 0 || **order > core::kMaxEdgeworthOrder) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--edgeworth-order must be in [0, %d], got %d", core::kMaxEdgeworthOrder, **order));
    }
    options->edgeworth.order = static_cast<int>(**order);
  }
  const std::optional<std::string> mode = args.Get("edgeworth-mode");
  if (mode.has_value()) {
    absl::StatusOr<core::EdgeworthMode> m = core::ParseEdgeworthMode(*mode, "--edgeworth-mode");
    if (!m.ok()) return m.status();
    options->edgeworth.mode = *m;
  }
  if ((order->has_value() || mode.has_value()) && name != "edgeworth") {
    return absl::InvalidArgumentError(
        "--edgeworth-order and --edgeworth-mode apply only to --accountant edgeworth");
  }

  auto precision = args.GetDouble("pld-precision");
  if (!precision.ok()) return precision.status();
  if (precision->has_value()) {
    if (name != "pld") {
      return absl::InvalidArgumentError("--pld-precision applies only to --accountant pld");
    }
    if (absl::Status s = core::ApplyPldPrecision(**precision, "--pld-precision", &options->pld);
        !s.ok()) {
      return s;
    }
  }

  const std::optional<std::string> estimator = args.Get("spa-estimator");
  if (estimator.has_value()) {
    absl::StatusOr<core::SpaEstimator> e = core::ParseSpaEstimator(*estimator, "--spa-estimator");
    if (!e.ok()) return e.status();
    options->spa.estimator = *e;
    if (name != "spa") {
      return absl::InvalidArgumentError("--spa-estimator applies only to --accountant spa");
    }
  }

  // Issue 15: the conditioned (small-q) estimate of spa and edgeworth, or off.
  const std::optional<std::string> conditioning = args.Get("conditioning");
  if (conditioning.has_value()) {
    if (*conditioning != "auto" && *conditioning != "off") {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--conditioning must be one of auto, off, got '%s'", *conditioning));
    }
    if (name != "spa" && name != "edgeworth") {
      return absl::InvalidArgumentError(
          "--conditioning applies only to --accountant spa or edgeworth");
    }
    const core::SpaConditioning c =
        *conditioning == "off" ? core::SpaConditioning::kOff : core::SpaConditioning::kAuto;
    options->spa.conditioning = c;
    options->edgeworth.conditioning = c;
  }
  return absl::OkStatus();
}

}  // namespace dpledger::cli
