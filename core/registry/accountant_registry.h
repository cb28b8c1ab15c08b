// Creates any accountant by name. This is the one place that knows them all.
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/accountants/accountant.h"
#include "core/accountants/edgeworth_accountant.h"
#include "core/accountants/pld_accountant.h"
#include "core/accountants/rdp_accountant.h"
#include "core/accountants/spa_accountant.h"
#include "core/mc/mc_accountant.h"

namespace dpledger::core {

struct AccountantOptions {
  PldOptions pld;
  RdpOptions rdp;
  McAccountantOptions mc;
  SpaOptions spa;
  EdgeworthOptions edgeworth;
};

// "analytic", "rdp", "pld", "mc", "spa", "edgeworth".
std::span<const std::string_view> AccountantNames();

// True when the named accountant can return certified upper bounds, so that it
// may admit steps; false for "mc", whose answers are estimates only (its
// statistical guarantee comes from the EVR verifier, per release).
bool CanCertify(std::string_view name);

// The options of an accountant whose certified ends are all that is read (admission):
// the SPA/Edgeworth conditioning is turned off (0.3-9 s per fresh ledger). The
// Edgeworth bounds do not depend on it; the SPA's certified interval is then the
// unconditioned one, wider than the conditioned answer's (which intersects it with
// the mixture's proven bounds) but still proven, so admission stays sound.
AccountantOptions ForBoundsOnly(AccountantOptions options);
// True when ForBoundsOnly(options) changes the named accountant's answers (its
// estimate; for spa also its certified interval).
bool BoundsOnlyChangesEstimate(std::string_view name, const AccountantOptions& options);

// INVALID_ARGUMENT naming `accountant` for an unknown name.
absl::StatusOr<std::unique_ptr<Accountant>> CreateAccountant(
    std::string_view name, const AccountantOptions& options = {});

}  // namespace dpledger::core
