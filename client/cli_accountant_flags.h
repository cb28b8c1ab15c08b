// The accountant's own flags, shared by `dpledger account` and `dpledger calibrate`:
// --samples/--seed (mc), --edgeworth-order/--edgeworth-mode (edgeworth),
// --spa-estimator (spa), --pld-precision (pld). Each is refused with another accountant, so a flag never
// silently does nothing.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/cli_args.h"
#include "core/registry/accountant_registry.h"

namespace dpledger::cli {

// `known` plus the accountant flags, for Args::CheckKnown.
std::vector<std::string> WithAccountantFlags(std::vector<std::string> known);

// Reads the accountant flags for accountant `name` into `options`; INVALID_ARGUMENT
// naming the flag for a bad value or a flag of another accountant.
absl::Status AccountantFlags(const Args& args, const std::string& name,
                             core::AccountantOptions* options);

}  // namespace dpledger::cli
