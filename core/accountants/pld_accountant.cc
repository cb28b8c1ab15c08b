#include "core/accountants/pld_accountant.h"

namespace dpledger::core {

absl::StatusOr<std::unique_ptr<Accountant>> CreatePldAccountant(const PldOptions& options) {
  return absl::UnimplementedError("PldAccountant is not built yet");
}

}  // namespace dpledger::core
