// Usage texts of the `dpledger` commands, kept in one table so the global usages
// (`dpledger --help`, `dpledger --server H:P help`) and each command's own
// `--help` (`dpledger account --help`, `dpledger job create --help`) agree.
#pragma once

#include <string>

namespace dpledger::cli {

// The synopses of the offline commands (account, calibrate, verify), as listed
// by `dpledger --help`.
std::string OfflineSynopses();
// The synopses of the service commands, as listed by `dpledger --server H:P help`.
std::string ServiceSynopses();
// The SPEC syntax of --step.
std::string SpecHelp();
// The connection flags and environment of every service command.
std::string ConnectionHelp();

// The usage of `command` (`sub` narrows "job" / "release" to one subcommand; an
// unknown or empty `sub` lists them all), with the SPEC syntax and connection
// flags where the command takes them. Empty for an unknown command.
std::string CommandUsage(const std::string& command, const std::string& sub);

}  // namespace dpledger::cli
