// `dpledger calibrate`: STUB until noise calibration lands.
#include "client/cli_commands.h"

namespace dpledger::cli {

int RunCalibrate(const Args& args) {
  return Fail(absl::UnimplementedError("calibrate: not built yet"));
}

}  // namespace dpledger::cli
