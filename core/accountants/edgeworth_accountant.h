// Edgeworth accountant. STUB: being written.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "core/accountants/accountant.h"

namespace dpledger::core {

struct EdgeworthOptions {
};

absl::StatusOr<std::unique_ptr<Accountant>> CreateEdgeworthAccountant(const EdgeworthOptions& options = {});

}  // namespace dpledger::core
