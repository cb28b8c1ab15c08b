// A throwaway PostgreSQL server for tests (issue 12: real parts, not mocks): initdb into a
// temporary directory, then `postgres` on 127.0.0.1 with a free port (and its socket in that
// directory), fsync=on, trust authentication for the superuser "dpledger". Stopped and
// removed when the object goes away; the server also dies with the process that started it
// (PR_SET_PDEATHSIG), so a crashed test leaves no server behind (only its directory). The
// cluster is a copy of one that initdb made once (a template kept in the temp directory).
//
// initdb refuses to run as root: as root the server runs as the `postgres` system user that
// Debian's postgresql package creates. Binaries come from /usr/lib/postgresql/<newest>/bin.
//
// Used by server unit tests (store_test.cc) and tests/ end-to-end tests. Thread safety: one
// thread drives an instance; call Start from a thread that outlives the server (the main
// test thread), because the parent-death signal fires when that thread ends.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace dpledger::server::testing {

// Why no test server can run here (no PostgreSQL binaries), or "" when one can. Tests skip
// with this message; scripts/install-deps.sh installs the binaries, so CI never skips.
std::string PostgresUnavailableReason();

class TestPostgres {
 public:
  static absl::StatusOr<std::unique_ptr<TestPostgres>> Start();
  // One server per test binary: started at first use, stopped at exit.
  static absl::StatusOr<TestPostgres*> Shared();
  ~TestPostgres();
  TestPostgres(const TestPostgres&) = delete;
  TestPostgres& operator=(const TestPostgres&) = delete;

  // A fresh, empty database; returns its connection URL.
  absl::StatusOr<std::string> CreateDatabase();
  std::string Url(const std::string& database) const;
  int port() const { return port_; }
  bool running() const { return pid_ > 0; }

  // Stops the server, keeping its data: fast shutdown (SIGINT), or immediate (SIGQUIT: like
  // a crash, recovery replays the WAL at the next start).
  absl::Status Stop(bool immediate = false);
  // Starts the stopped server again on the same port.
  absl::Status Restart();
  std::string LogTail(size_t max_bytes = 4000) const;

 private:
  TestPostgres() = default;
  // data/ in dir_: a copy of a cluster initdb made once per machine (tmp/dpledger-pg-template-*).
  absl::Status InitDataDir(const std::string& tmp);
  absl::Status Spawn();
  absl::Status WaitReady();

  std::string bin_dir_;
  std::string dir_;  // temporary directory: data/, the socket, postgres.log
  uid_t uid_ = 0;    // the user the server runs as
  gid_t gid_ = 0;
  bool switch_user_ = false;
  int port_ = 0;
  pid_t pid_ = -1;
  int next_database_ = 0;
};

}  // namespace dpledger::server::testing
