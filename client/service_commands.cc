// `dpledger --server HOST:PORT <command>`: dispatch of the service subcommands,
// one per RPC of dpledger.v1.Ledger, plus `health` and `simulate`.
#include <iostream>

#include "client/cli_commands.h"
#include "client/service_util.h"

namespace dpledger::cli {
namespace {

constexpr char kServiceUsage[] = R"(usage: dpledger --server HOST:PORT COMMAND [flags]

  job create --job ID --epsilon E --delta D [--accountant pld|rdp|analytic|spa|edgeworth|evr]
             [--plan SPEC ...]          (declared schedule; none: the first mechanism, repeated)
             [--neighbouring add_remove] [--seed S] [--samples N] [--json]
  job create --job ID --epsilon E --delta D --schedule adaptive [--filter renyi|gdp]
             [--rdp-order A] [--expect SPEC]   (mechanisms chosen at run time)
  job get    --job ID [--json]
  job list   [--page-size N] [--json]
  job close  --job ID [--json]
  step       --job ID [--seq N] --step SPEC [--step SPEC ...] [--json]
             (one update; --seq defaults to the job's last_seq + 1; a refused
             step exits 0 with "admitted": false)
  ledger     --job ID [--after-seq N] [--json]
  spent      --job ID (--delta D | --epsilon E) [--accountant NAME] [--json]
  remaining  --job ID --step SPEC [--json]
  release    --job ID (--payload TEXT | --payload-file F) --epsilon E --delta-est D
             [--tau T] [--rho R] [--request-id ID] [--max-samples N] [--json]
  release get --release ID [--include-payload] [--payload-out F] [--json]
  simulate   --job ID --steps N --step SPEC [--step SPEC ...] [--start-seq S]
             [--window W] [--every K] [--json]
             (streams N updates over StreamSteps, printing epsilon as it goes)
  health     [--service NAME] [--timeout-ms N]

Connection flags (any command): --token T | --token-file F, --tenant NAME,
  --tls, --tls-ca F, --tls-server-name N, --timeout-ms N, --retries N.
  Environment: DPLEDGER_CLIENT_TOKEN, DPLEDGER_CLIENT_TOKEN_FILE, DPLEDGER_CLIENT_TENANT,
  DPLEDGER_CLIENT_TLS_CA, DPLEDGER_CLIENT_TLS_SERVER_NAME.
)";

std::vector<std::string> After(const std::vector<std::string>& argv, size_t n) {
  return std::vector<std::string>(argv.begin() + std::min(n, argv.size()), argv.end());
}

}  // namespace

int RunServiceCommand(const std::string& server, const std::vector<std::string>& argv) {
  if (argv.empty()) {
    std::cerr << kServiceUsage;
    return 2;
  }
  const std::string& command = argv[0];
  const std::string sub = argv.size() > 1 ? argv[1] : "";
  if (command == "help" || command == "--help") {
    std::cout << kServiceUsage;
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
  std::cerr << "dpledger: unknown command '" << command << "'\n" << kServiceUsage;
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
