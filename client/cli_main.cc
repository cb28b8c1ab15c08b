// `dpledger`: offline accounting (account, calibrate, verify) and, when built
// with the server, a subcommand for every RPC (`--server HOST:PORT <command>`).
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "client/cli_commands.h"
#include "client/cli_usage.h"

namespace dpledger::cli {
namespace {

std::string Usage() {
  return "usage: dpledger [--server HOST:PORT] COMMAND [flags]\n\n"
         "Offline commands (no server needed):\n" +
         OfflineSynopses() +
         "\nService commands (with --server): job create|get|list|close, step, ledger, spent,\n"
         "  remaining, release, release get, simulate, health. Run `dpledger --server H:P help`.\n"
         "`dpledger COMMAND --help` prints one command's usage.\n\n" +
         SpecHelp();
}

}  // namespace

int Fail(const absl::Status& status) {
  std::cerr << "dpledger: " << status.message() << "\n";
  return 2;
}

int Main(int argc, char** argv) {
  std::vector<std::string> rest(argv + 1, argv + argc);
  std::string server;
  // Global flags come before the command.
  while (!rest.empty() && rest.front().rfind("--", 0) == 0) {
    std::string flag = rest.front();
    rest.erase(rest.begin());
    if (flag == "--help" || flag == "-h") {
      std::cout << Usage();
      return 0;
    }
    if (flag.rfind("--server=", 0) == 0) {
      server = flag.substr(9);
    } else if (flag == "--server" && !rest.empty()) {
      server = rest.front();
      rest.erase(rest.begin());
    } else {
      std::cerr << "dpledger: unknown global flag " << flag << "\n" << Usage();
      return 2;
    }
  }
  if (rest.empty()) {
    std::cerr << Usage();
    return 2;
  }
  const std::string command = rest.front();
  // `dpledger COMMAND [SUB] --help`: that command's usage, with or without --server.
  for (size_t i = 1; i < rest.size(); ++i) {
    if (rest[i] != "--help" && rest[i] != "-h") continue;
    const std::string sub = rest.size() > 1 && rest[1].rfind("-", 0) != 0 ? rest[1] : "";
    const std::string usage = CommandUsage(command, sub);
    if (usage.empty()) break;  // an unknown command: reported below
    std::cout << usage;
    return 0;
  }
  if (command == "help" && server.empty()) {
    std::cout << Usage();
    return 0;
  }
  if (command == "account" || command == "calibrate" || command == "verify") {
    std::vector<std::string> switches = {"json", "insecure", "help"};
    if (command == "verify") switches.push_back("plan");
    auto args = Args::Parse(std::vector<std::string>(rest.begin() + 1, rest.end()), switches);
    if (!args.ok()) return Fail(args.status());
    if (command == "account") return RunAccount(*args);
    if (command == "calibrate") return RunCalibrate(*args);
    return RunVerify(*args);
  }
#ifdef DPLEDGER_WITH_SERVICE
  if (server.empty()) {
    std::cerr << "dpledger: '" << command << "' needs --server HOST:PORT\n";
    return 2;
  }
  return RunServiceCommand(server, rest);
#else
  std::cerr << "dpledger: unknown command '" << command
            << "' (this build has no service commands)\n";
  return 2;
#endif
}

}  // namespace dpledger::cli

int main(int argc, char** argv) { return dpledger::cli::Main(argc, argv); }
