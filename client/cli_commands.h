// Subcommands of the `dpledger` CLI. Each returns the process exit code and
// prints its own errors (a message naming the bad field) to stderr.
#pragma once

#include <string>
#include <vector>

#include "client/cli_args.h"

namespace dpledger::cli {

int RunAccount(const Args& args);    // cli_account.cc: offline accounting
int RunCalibrate(const Args& args);  // cli_calibrate.cc: noise calibration
int RunVerify(const Args& args);     // cli_verify.cc: offline EVR verification

#ifdef DPLEDGER_WITH_SERVICE
// service_commands.cc: every RPC of the server (job, step, spent, release, simulate...).
// `argv` is everything after the global flags, starting with the command name.
int RunServiceCommand(const std::string& server, const std::vector<std::string>& argv);
#endif

// Prints "dpledger: <message>" to stderr and returns 2.
int Fail(const absl::Status& status);

}  // namespace dpledger::cli
