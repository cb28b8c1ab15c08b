#include "core/accountants/edgeworth_accountant.h"

namespace dpledger::core {

absl::StatusOr<std::unique_ptr<Accountant>> CreateEdgeworthAccountant(const EdgeworthOptions& options) {
  return absl::UnimplementedError("EdgeworthAccountant is not built yet");
}

}  // namespace dpledger::core
