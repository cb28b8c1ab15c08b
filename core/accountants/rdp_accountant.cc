#include "core/accountants/rdp_accountant.h"

namespace dpledger::core {

absl::StatusOr<std::unique_ptr<Accountant>> CreateRdpAccountant(const RdpOptions& options) {
  return absl::UnimplementedError("RdpAccountant is not built yet");
}

}  // namespace dpledger::core
