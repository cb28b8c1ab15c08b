// PLD/FFT accountant with certified bounds. STUB: being written.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "core/accountants/accountant.h"

namespace dpledger::core {

struct PldOptions {
};

absl::StatusOr<std::unique_ptr<Accountant>> CreatePldAccountant(const PldOptions& options = {});

}  // namespace dpledger::core
