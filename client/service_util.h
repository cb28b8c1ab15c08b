// Shared pieces of the `dpledger` service subcommands (service_*.cc): connection
// settings from flags and the environment, and the JSON shapes of the answers.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cli_args.h"
#include "client/client.h"
#include "core/mechanisms/mechanism.h"

namespace dpledger::cli {

namespace v1 = ::dpledger::v1;
using Json = nlohmann::ordered_json;

// Flags every service command accepts (after the command name); where one is
// absent, client::ApplyEnvironment reads DPLEDGER_CLIENT_* (client.h):
//   --token T | --token-file F   bearer token
//   --tenant NAME                tenant put in requests
//   --tls                        TLS with the system roots
//   --tls-ca F                   TLS with these PEM roots
//   --tls-server-name N          name checked in the certificate
//   --timeout-ms N               deadline of one attempt (default 30000)
//   --retries N                  attempts per call, the first included (default 10)
inline const std::vector<std::string> kConnectionFlags = {
    "token", "token-file", "tenant", "tls", "tls-ca", "tls-server-name", "timeout-ms", "retries"};
// Switches (flags without a value) of the service commands.
inline const std::vector<std::string> kServiceSwitches = {"json", "help", "tls", "include-payload"};

// Parses argv (after the subcommand words) and checks every flag is in `known`
// or kConnectionFlags.
absl::StatusOr<Args> ParseServiceArgs(const std::vector<std::string>& argv,
                                      const std::vector<std::string>& known);

// A client for `server` with the connection flags of `args` applied over the environment.
absl::StatusOr<std::unique_ptr<client::Client>> ConnectFromArgs(const std::string& server,
                                                                const Args& args);

// A required string flag: INVALID_ARGUMENT "--name is required" when missing or empty.
absl::StatusOr<std::string> RequiredString(const Args& args, const std::string& name);
absl::StatusOr<double> RequiredDouble(const Args& args, const std::string& name);

// A parsed step as the SPEC the server takes: "KIND:params,count=N".
std::string StepSpec(const core::MechanismEvent& event);

// Prints "dpledger: <command>: <message>" (the gRPC status message unchanged) to
// stderr and returns 2; UNAVAILABLE also says the server could not be reached.
int FailRpc(const std::string& command, const absl::Status& status);

std::string GuaranteeName(v1::Guarantee g);  // "certified", "statistical", "estimate"
Json BoundJson(const v1::Bound& b);  // cli_output.h's BoundToJson of the proto bound
std::string RefusalKindName(v1::RefusalKind k);  // "budget", "plan", ...; "" when unset
Json BudgetJson(const v1::Budget& b);
Json JobJson(const v1::Job& job);
Json AckJson(const v1::StepAck& ack);
Json ReleaseJson(const v1::ReleaseRecord& r);  // without the payload bytes

// "0.532 [0.531, 0.533] (certified)"
std::string BoundText(const v1::Bound& b);

// Subcommand groups (service_job.cc, service_step.cc, ...). `argv` starts after
// the subcommand words (e.g. after "job create").
int RunJobCreate(const std::string& server, const std::vector<std::string>& argv);
int RunJobGet(const std::string& server, const std::vector<std::string>& argv);
int RunJobList(const std::string& server, const std::vector<std::string>& argv);
int RunJobClose(const std::string& server, const std::vector<std::string>& argv);
int RunStep(const std::string& server, const std::vector<std::string>& argv);
int RunLedger(const std::string& server, const std::vector<std::string>& argv);
int RunSpent(const std::string& server, const std::vector<std::string>& argv);
int RunRemaining(const std::string& server, const std::vector<std::string>& argv);
int RunRelease(const std::string& server, const std::vector<std::string>& argv);
int RunReleaseGet(const std::string& server, const std::vector<std::string>& argv);
int RunSimulate(const std::string& server, const std::vector<std::string>& argv);
int RunHealth(const std::string& server, const std::vector<std::string>& argv);

}  // namespace dpledger::cli
