#include "core/accountants/spa_accountant.h"

namespace dpledger::core {

absl::StatusOr<std::unique_ptr<Accountant>> CreateSpaAccountant(const SpaOptions& options) {
  return absl::UnimplementedError("SpaAccountant is not built yet");
}

}  // namespace dpledger::core
