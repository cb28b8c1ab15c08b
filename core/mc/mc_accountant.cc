#include "core/mc/mc_accountant.h"

namespace dpledger::core {

absl::StatusOr<std::unique_ptr<Accountant>> CreateMcAccountant(const McAccountantOptions& options) {
  return absl::UnimplementedError("McAccountant is not built yet");
}

}  // namespace dpledger::core
