// `dpledger verify`: STUB until the EVR verifier lands (issue 3).
#include <iostream>

#include "client/cli_commands.h"

namespace dpledger::cli {

int RunVerify(const Args& args) {
  return Fail(absl::UnimplementedError("verify: the EVR verifier is not built yet"));
}

}  // namespace dpledger::cli
