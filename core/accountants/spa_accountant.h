// Saddle-point accountant. STUB: being written.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "core/accountants/accountant.h"

namespace dpledger::core {

struct SpaOptions {
};

absl::StatusOr<std::unique_ptr<Accountant>> CreateSpaAccountant(const SpaOptions& options = {});

}  // namespace dpledger::core
