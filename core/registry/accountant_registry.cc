#include "core/registry/accountant_registry.h"

#include <array>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/accountants/analytic_gaussian.h"

namespace dpledger::core {
namespace {
constexpr std::array<std::string_view, 6> kNames = {"analytic", "rdp", "pld",
                                                    "mc",       "spa", "edgeworth"};
}  // namespace

std::span<const std::string_view> AccountantNames() { return kNames; }

bool CanCertify(std::string_view name) { return name != "mc"; }

AccountantOptions ForBoundsOnly(AccountantOptions options) {
  options.spa.conditioning = SpaConditioning::kOff;
  options.edgeworth.conditioning = SpaConditioning::kOff;
  return options;
}

bool BoundsOnlyChangesEstimate(std::string_view name, const AccountantOptions& options) {
  if (name == "spa") return options.spa.conditioning != SpaConditioning::kOff;
  if (name == "edgeworth") return options.edgeworth.conditioning != SpaConditioning::kOff;
  return false;
}

absl::StatusOr<std::unique_ptr<Accountant>> CreateAccountant(std::string_view name,
                                                             const AccountantOptions& options) {
  if (name == "analytic") return std::make_unique<AnalyticGaussianAccountant>();
  if (name == "rdp") return CreateRdpAccountant(options.rdp);
  if (name == "pld") return CreatePldAccountant(options.pld);
  if (name == "mc") return CreateMcAccountant(options.mc);
  if (name == "spa") return CreateSpaAccountant(options.spa);
  if (name == "edgeworth") return CreateEdgeworthAccountant(options.edgeworth);
  std::string known;
  for (std::string_view n : kNames) absl::StrAppend(&known, known.empty() ? "" : ", ", std::string(n));
  return absl::InvalidArgumentError(absl::StrFormat(
      "accountant must be one of %s, got '%s'", known, std::string(name)));
}

}  // namespace dpledger::core
