// `dpledger --server HOST:PORT <command>`: dispatch of the service subcommands,
// one per RPC of dpledger.v1.Ledger, plus `health` and `simulate`.
#include <iostream>

#include "client/cli_commands.h"
#include "client/cli_usage.h"
#include "client/service_util.h"

namespace dpledger::cli {
namespace {

std::string ServiceUsage() {
  return "usage: dpledger --server HOST:PORT COMMAND [flags]\n\n" + ServiceSynopses() +
         "\n`dpledger COMMAND --help` prints one command's usage.\n\n" + ConnectionHelp();
}

std::vector<std::string> After(const std::vector<std::string>& argv, size_t n) {
  return std::vector<std::string>(argv.begin() + std::min(n, argv.size()), argv.end());
}

}  // namespace

int RunServiceCommand(const std::string& server, const std::vector<std::string>& argv) {
  if (argv.empty()) {
    std::cerr << ServiceUsage();
    return 2;
  }
  const std::string& command = argv[0];
  const std::string sub = argv.size() > 1 ? argv[1] : "";
  if (command == "help" || command == "--help") {
    std::cout << ServiceUsage();
    return 0;
  }
  if (command == "job") {
    if (sub == "create") return RunJobCreate(server, After(argv, 2));
    if (sub == "get") return RunJobGet(server, After(argv, 2));
    if (sub == "list") return RunJobList(server, After(argv, 2));
    if (sub == "close") return RunJobClose(server, After(argv, 2));
    std::cerr << "dpledger: job needs a subcommand: create, get, list or close (got '" << sub
              << "')\n";
    return 2;
  }
  if (command == "release") {
    if (sub == "get") return RunReleaseGet(server, After(argv, 2));
    return RunRelease(server, After(argv, 1));
  }
  if (command == "step") return RunStep(server, After(argv, 1));
  if (command == "ledger") return RunLedger(server, After(argv, 1));
  if (command == "spent") return RunSpent(server, After(argv, 1));
  if (command == "remaining") return RunRemaining(server, After(argv, 1));
  if (command == "simulate") return RunSimulate(server, After(argv, 1));
  if (command == "health") return RunHealth(server, After(argv, 1));
  std::cerr << "dpledger: unknown command '" << command << "'\n" << ServiceUsage();
  return 2;
}

int RunHealth(const std::string& server, const std::vector<std::string>& argv) {
  auto args = ParseServiceArgs(argv, {"service"});
  if (!args.ok()) return Fail(args.status());
  auto client = ConnectFromArgs(server, *args);
  if (!client.ok()) return Fail(client.status());
  absl::Status s = (*client)->CheckHealth(args->Get("service").value_or(""));
  if (!s.ok()) return FailRpc("health", s);
  std::cout << "SERVING\n";
  return 0;
}

}  // namespace dpledger::cli
