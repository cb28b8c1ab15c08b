// Monte Carlo accountant. STUB: being written.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "core/accountants/accountant.h"

namespace dpledger::core {

struct McAccountantOptions {
  int64_t num_samples = 0;  // 0: the default rule
  uint64_t seed = 0;
};

absl::StatusOr<std::unique_ptr<Accountant>> CreateMcAccountant(const McAccountantOptions& options = {});

}  // namespace dpledger::core
