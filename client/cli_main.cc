// `dpledger`: offline accounting (account, calibrate, verify) and, when built
// with the server, a subcommand for every RPC (`--server HOST:PORT <command>`).
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "client/cli_commands.h"

namespace dpledger::cli {
namespace {

constexpr char kUsage[] = R"(usage: dpledger [--server HOST:PORT] COMMAND [flags]

Offline commands (no server needed):
  account   [--accountant analytic|rdp|pld|mc|spa|edgeworth] (--epsilon E | --delta D)
            --step SPEC [--step SPEC ...] [--json]
            mc: [--samples N] [--seed S]
            edgeworth: [--edgeworth-order 0-3 (default 2)] [--edgeworth-mode clamped|literal]
            spa: [--spa-estimator sp-clt|sp-msd0|sp-msd1|sp-ew2|icml-k3]
            pld: [--pld-precision P] target relative width of the certified interval
                 (default 0.005 for epsilon, 0.01 for delta; 1e-4 costs ~4-25x)
  calibrate [--accountant NAME] [its flags, as for account] --epsilon E --delta D --step SPEC ... [--json]
  verify    --epsilon E --delta-est D [--tau T] [--rho R] [--max-samples N]
            --step SPEC ... [--json]

Service commands (with --server): job create|get|list|close, step, spent,
  remaining, release, release get, simulate. Run `dpledger --server H:P help`.

SPEC: KIND:key=value,...  with count=N (default 1), e.g.
  gaussian:sigma=1.0,count=100          (sensitivity defaults to 1)
  laplace:scale=10,count=100
  subsampled_gaussian:sigma=1.0,q=0.001,count=1000
  subsampled_laplace:scale=2,q=0.01,count=100
  randomized_response:p=0.75   pure_dp:epsilon=0.5   approx_dp:epsilon=0.5,delta=1e-6
)";

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
      std::cout << kUsage;
      return 0;
    }
    if (flag.rfind("--server=", 0) == 0) {
      server = flag.substr(9);
    } else if (flag == "--server" && !rest.empty()) {
      server = rest.front();
      rest.erase(rest.begin());
    } else {
      std::cerr << "dpledger: unknown global flag " << flag << "\n" << kUsage;
      return 2;
    }
  }
  if (rest.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string command = rest.front();
  if (command == "help" && server.empty()) {
    std::cout << kUsage;
    return 0;
  }
  if (command == "account" || command == "calibrate" || command == "verify") {
    auto args = Args::Parse(std::vector<std::string>(rest.begin() + 1, rest.end()));
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
