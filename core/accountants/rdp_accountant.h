// RDP (moments) accountant. STUB: being written.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "core/accountants/accountant.h"

namespace dpledger::core {

struct RdpOptions {
};

absl::StatusOr<std::unique_ptr<Accountant>> CreateRdpAccountant(const RdpOptions& options = {});

}  // namespace dpledger::core
