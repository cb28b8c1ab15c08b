#include "client/cli_usage.h"

namespace dpledger::cli {
namespace {

struct CommandHelp {
  const char* command;
  const char* sub;  // "" for a command without subcommands
  bool service;     // needs --server
  bool steps;       // takes --step SPEC
  const char* synopsis;
};

constexpr CommandHelp kCommands[] = {
    {"account", "", false, true,
     R"(  account   [--accountant analytic|rdp|pld|mc|spa|edgeworth] (--epsilon E | --delta D)
            --step SPEC [--step SPEC ...] [--json]
            mc: [--samples N] [--seed S]
            edgeworth: [--edgeworth-order 0-3 (default 2)] [--edgeworth-mode clamped|literal]
            spa: [--spa-estimator sp-clt|sp-msd0|sp-msd1|sp-ew2|icml-k3]
            spa, edgeworth: [--conditioning auto|off]
            pld: [--pld-precision P] the certified upper end is at most P above the
                 truth, relative: (upper - lower) <= P * lower (default 5e-4 for
                 epsilon, 0.01 for delta; 1e-4 costs ~1.5-3x)
)"},
    {"calibrate", "", false, true,
     R"(  calibrate [--accountant NAME] [its flags, as for account] --epsilon E --delta D --step SPEC ... [--json]
)"},
    {"verify", "", false, true,
     R"(  verify    --epsilon E --delta-est D [--tau T] [--rho R] [--max-samples N]
            [--estimator auto|smc|is|tilt|loss|largest] [--certify pld|pld-far|none] [--plan]
            --step SPEC ... [--json]
            --certify pld (default): a direction PLD certifies below the threshold
                    is not sampled; pld-far: only one PLD puts 100x below it
            --plan: per direction the estimator or certified bound, nu, m and the
                    predicted time, before any verification sample is drawn
)"},
    {"job", "create", true, false,
     R"(  job create --job ID --epsilon E --delta D [--accountant pld|rdp|analytic|spa|edgeworth|evr]
             [--plan SPEC ...]          (declared schedule; none: the first mechanism, repeated)
             [--neighbouring add_remove] [--seed S] [--samples N] [--json]
  job create --job ID --epsilon E --delta D --schedule adaptive [--filter renyi|gdp]
             [--rdp-order A] [--expect SPEC]   (mechanisms chosen at run time)
)"},
    {"job", "get", true, false, "  job get    --job ID [--json]\n"},
    {"job", "list", true, false, "  job list   [--page-size N] [--json]\n"},
    {"job", "close", true, false, "  job close  --job ID [--json]\n"},
    {"step", "", true, true,
     R"(  step       --job ID [--seq N] --step SPEC [--step SPEC ...] [--json]
             (one update; --seq defaults to the job's last_seq + 1; a refused
             step exits 0 with "admitted": false)
)"},
    {"ledger", "", true, false, "  ledger     --job ID [--after-seq N] [--json]\n"},
    {"spent", "", true, false,
     "  spent      --job ID (--delta D | --epsilon E) [--accountant NAME] [--pld-precision P] [--json]\n"},
    {"remaining", "", true, true, "  remaining  --job ID --step SPEC [--json]\n"},
    {"release", "", true, false,
     R"(  release    --job ID (--payload TEXT | --payload-file F) --epsilon E --delta-est D
             [--tau T] [--rho R] [--request-id ID] [--max-samples N] [--json]
)"},
    {"release", "get", true, false,
     "  release get --release ID [--include-payload] [--payload-out F] [--json]\n"},
    {"simulate", "", true, true,
     R"(  simulate   --job ID --steps N --step SPEC [--step SPEC ...] [--start-seq S]
             [--window W] [--every K] [--json]
             (streams N updates over StreamSteps, printing epsilon as it goes)
)"},
    {"health", "", true, false, "  health     [--service NAME] [--timeout-ms N]\n"},
};

std::string Synopses(bool service) {
  std::string out;
  for (const CommandHelp& c : kCommands) {
    if (c.service == service) out += c.synopsis;
  }
  return out;
}

}  // namespace

std::string OfflineSynopses() { return Synopses(false); }
std::string ServiceSynopses() { return Synopses(true); }

std::string SpecHelp() {
  return R"(SPEC: KIND:key=value,...  with count=N (default 1), e.g.
  gaussian:sigma=1.0,count=100          (sensitivity defaults to 1)
  laplace:scale=10,count=100
  subsampled_gaussian:sigma=1.0,q=0.001,count=1000
  subsampled_laplace:scale=2,q=0.01,count=100
  randomized_response:p=0.75   pure_dp:epsilon=0.5   approx_dp:epsilon=0.5,delta=1e-6
)";
}

std::string ConnectionHelp() {
  return R"(Connection flags (any command): --token T | --token-file F, --tenant NAME,
  --tls, --tls-ca F, --tls-server-name N, --timeout-ms N, --retries N.
  Environment: DPLEDGER_CLIENT_TOKEN, DPLEDGER_CLIENT_TOKEN_FILE, DPLEDGER_CLIENT_TENANT,
  DPLEDGER_CLIENT_TLS_CA, DPLEDGER_CLIENT_TLS_SERVER_NAME.
)";
}

std::string CommandUsage(const std::string& command, const std::string& sub) {
  bool sub_known = false;
  for (const CommandHelp& c : kCommands) sub_known |= command == c.command && sub == c.sub;
  std::string synopses;
  bool service = false, steps = false;
  for (const CommandHelp& c : kCommands) {
    if (command != c.command || (sub_known && sub != c.sub)) continue;
    synopses += c.synopsis;
    service |= c.service;
    steps |= c.steps;
  }
  if (synopses.empty()) return "";
  const std::string name = sub_known && !sub.empty() ? command + " " + sub : command;
  std::string out = "usage: dpledger " + std::string(service ? "--server HOST:PORT " : "") +
                    name + " [flags]\n\n" + synopses;
  if (steps) out += "\n" + SpecHelp();
  if (service) out += "\n" + ConnectionHelp();
  return out;
}

}  // namespace dpledger::cli
