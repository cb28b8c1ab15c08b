// Monte Carlo accountant. STUB: being written.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "core/accountants/accountant.h"

namespace dpledger::core {

struct McAccountantOptions {
};

absl::StatusOr<std::unique_ptr<Accountant>> CreateMcAccountant(const McAccountantOptions& options = {});

}  // namespace dpledger::core
