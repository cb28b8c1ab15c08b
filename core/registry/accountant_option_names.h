// Accountant options as the `dpledger` CLI and dpledgerd's start-up flags spell
// them (--edgeworth-mode, --spa-estimator), in one place so both accept the same
// words. Pure functions; thread-safe.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "core/accountants/edgeworth_accountant.h"
#include "core/accountants/pld_accountant.h"
#include "core/accountants/spa_accountant.h"

namespace dpledger::core {

// "clamped" (production default) or "literal" (paper-literal; edgeworth.md S3.3).
std::string_view EdgeworthModeName(EdgeworthMode mode);
// INVALID_ARGUMENT naming `field` (the flag parsed) and listing the names:
// "--edgeworth-mode must be one of clamped, literal, got 'x'".
absl::StatusOr<EdgeworthMode> ParseEdgeworthMode(std::string_view name, std::string_view field);

// "sp-clt" (default), "sp-msd0", "sp-msd1", "sp-ew2" (spa.md 4.1-4.4), "icml-k3"
// (opt-in, spa.md 4.2).
std::string_view SpaEstimatorName(SpaEstimator estimator);
// INVALID_ARGUMENT naming `field` and listing the names, as ParseEdgeworthMode.
absl::StatusOr<SpaEstimator> ParseSpaEstimator(std::string_view name, std::string_view field);

// The PLD precision knob (--pld-precision; pld_accountant.h SetPldPrecision):
// sets both targets; INVALID_ARGUMENT naming `field` unless precision is in (0, 0.5].
absl::Status ApplyPldPrecision(double precision, std::string_view field, PldOptions* options);

}  // namespace dpledger::core
