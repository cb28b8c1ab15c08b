// `--help` of the binaries (issue 13): `dpledger COMMAND --help` prints that command's
// usage (it used to say "unknown flag --help"), and `dpledgerd --help` lists every flag
// with its default and DPLEDGER_<FLAG> variable (it used to print "No flags matched").
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e_support.h"

namespace dpledger::e2e {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(CliHelp, AccountHelpPrintsItsUsage) {
  CommandResult r = RunCommand({CliBinary(), "account", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, HasSubstr("usage: dpledger account [flags]"));
  EXPECT_THAT(r.out, HasSubstr("--accountant analytic|rdp|pld|mc|spa|edgeworth"));
  EXPECT_THAT(r.out, HasSubstr("SPEC: KIND:key=value"));
  EXPECT_THAT(r.out, Not(HasSubstr("calibrate")));
}

TEST(CliHelp, EveryCommandHasItsOwnUsageWithoutAServer) {
  const std::vector<std::vector<std::string>> commands = {
      {"calibrate"}, {"verify"},    {"job", "create"}, {"job", "get"},     {"job", "list"},
      {"job", "close"}, {"step"},   {"ledger"},        {"spent"},          {"remaining"},
      {"release"},   {"release", "get"}, {"simulate"}, {"health"}};
  for (const auto& command : commands) {
    std::vector<std::string> argv = {CliBinary()};
    argv.insert(argv.end(), command.begin(), command.end());
    argv.push_back("--help");
    CommandResult r = RunCommand(argv);
    const std::string name = command.size() == 2 ? command[0] + " " + command[1] : command[0];
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
    EXPECT_THAT(r.out, HasSubstr(name + " [flags]")) << name;
    EXPECT_THAT(r.out, HasSubstr("\n  " + name + " ")) << name;
  }
  // With --server and -h too; the service commands list the connection flags.
  CommandResult r = RunCommand({CliBinary(), "--server", "127.0.0.1:1", "spent", "-h"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("--delta D | --epsilon E"));
  EXPECT_THAT(r.out, HasSubstr("DPLEDGER_CLIENT_TOKEN"));
}

TEST(ServerHelp, ListsEveryFlagWithItsDefaultAndEnvironmentVariable) {
  CommandResult r = RunCommand({ServerBinary(), "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("No flags matched")));
  EXPECT_THAT(r.out, HasSubstr("--listen  (default 127.0.0.1:50051; env DPLEDGER_LISTEN)"));
  EXPECT_THAT(r.out, HasSubstr("--token-file  (default \"\"; env DPLEDGER_TOKEN_FILE)"));
  EXPECT_THAT(r.out, HasSubstr("--insecure  (default false; env DPLEDGER_INSECURE)"));
  EXPECT_THAT(r.out, HasSubstr("--log-level  (default info; env DPLEDGER_LOG_LEVEL)"));
  // Every flag line names its variable: a flag missing from the environment list fails here.
  int flags = 0, with_env = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("  --", 0) != 0) continue;
    ++flags;
    with_env += line.find("; env DPLEDGER_") != std::string::npos;
  }
  EXPECT_GE(flags, 35);
  EXPECT_EQ(with_env, flags);
}

}  // namespace
}  // namespace dpledger::e2e
