#include "core/registry/accountant_option_names.h"

#include <string>

#include "absl/strings/str_format.h"

namespace dpledger::core {
namespace {

// The enumerators are 0, 1, ...: the first value without a name ends the list,
// so a value added to an enum is parsed as soon as its Name() case is written
// (and -Wswitch points at the missing case).
template <typename Enum>
absl::StatusOr<Enum> ParseByName(std::string_view name, std::string_view field,
                                 std::string_view (*name_of)(Enum)) {
  std::string known;
  for (int i = 0;; ++i) {
    const Enum value = static_cast<Enum>(i);
    const std::string_view n = name_of(value);
    if (n.empty()) break;
    if (n == name) return value;
    absl::StrAppend(&known, known.empty() ? "" : ", ", std::string(n));
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s must be one of %s, got '%s'", std::string(field), known, std::string(name)));
}

}  // namespace

std::string_view EdgeworthModeName(EdgeworthMode mode) {
  switch (mode) {
    case EdgeworthMode::kClamped:
      return "clamped";
    case EdgeworthMode::kPaperLiteral:
      return "literal";
  }
  return {};
}

absl::StatusOr<EdgeworthMode> ParseEdgeworthMode(std::string_view name, std::string_view field) {
  return ParseByName(name, field, &EdgeworthModeName);
}

std::string_view SpaEstimatorName(SpaEstimator estimator) {
  switch (estimator) {
    case SpaEstimator::kClt:
      return "sp-clt";
    case SpaEstimator::kMsd0:
      return "sp-msd0";
    case SpaEstimator::kMsd1:
      return "sp-msd1";
    case SpaEstimator::kEw2:
      return "sp-ew2";
    case SpaEstimator::kIcmlK3:
      return "icml-k3";
  }
  return {};
}

absl::StatusOr<SpaEstimator> ParseSpaEstimator(std::string_view name, std::string_view field) {
  return ParseByName(name, field, &SpaEstimatorName);
}

absl::Status ApplyPldPrecision(double precision, std::string_view field, PldOptions* options) {
  if (!(precision > 0 && precision <= 0.5)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s must be in (0, 0.5], got %g", std::string(field), precision));
  }
  SetPldPrecision(precision, options);
  return absl::OkStatus();
}

}  // namespace dpledger::core
