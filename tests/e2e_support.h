// End-to-end test support: a temporary data directory, free loopback ports, and
// a dpledgerd child process that tests start, kill -9, restart and stop.
//
// Everything binds 127.0.0.1 only. Child servers die with the test process
// (PR_SET_PDEATHSIG), so a crashed or timed-out test leaves no server behind.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/client.h"

namespace dpledger::e2e {

// Paths of the binaries under test (compile definitions from tests/CMakeLists.txt).
std::string ServerBinary();  // dpledgerd
std::string CliBinary();     // dpledger

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A port on 127.0.0.1 that was free a moment ago (bound to port 0, then closed).
// Callers retry with a new one when a server then fails to bind it.
int PickFreePort();

// Writes `text` to `path` (mode 0600). Aborts the test binary on failure.
void WriteFileOrDie(const std::string& path, const std::string& text);

struct ServerConfig {
  std::string data_dir = {};
  // true: --insecure (plaintext, no auth). false: the TLS and token flags below.
  bool insecure = true;
  std::string tls_cert = {}, tls_key = {}, token_file = {};
  std::vector<std::string> extra_args = {};
  // How readiness is checked (TLS, CA, token); target is filled in by Start.
  client::ClientOptions probe = {};
  int64_t ready_timeout_ms = 30000;
};

class ServerProcess {
 public:
  explicit ServerProcess(ServerConfig config);
  ~ServerProcess();  // kills the child if it still runs
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Starts dpledgerd and waits until grpc.health.v1 says SERVING. Call it from a
  // thread that outlives the server: PR_SET_PDEATHSIG kills the child when the
  // thread that forked it ends. The first
  // start picks free ports (retrying a few times if the server cannot bind);
  // restarts reuse them so clients reconnect to the same address.
  absl::Status Start();
  // Restarts dpledgerd on the same ports without waiting for it to serve: it may still be
  // opening, checking or replaying its store (a crash during recovery when Kill9 follows).
  absl::Status Launch();
  // Sends `sig` (e.g. SIGHUP: reload) to the running server.
  void Signal(int sig);
  // SIGKILL and reap: a crash at an arbitrary point.
  void Kill9();
  // SIGTERM (graceful: drain streams, flush the store); SIGKILL after `timeout_ms`.
  // The exit status, as an error when it is not 0.
  absl::Status Stop(int64_t timeout_ms = 20000);
  bool running() const { return pid_ > 0; }

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  // The child's stdout and stderr (appended over restarts), for failure messages.
  std::string log_path() const { return config_.data_dir + ".log"; }
  std::string LogTail(size_t max_bytes = 4000) const;
  // Client options for this server: the probe settings with the target set.
  client::ClientOptions ClientOptionsFor() const;

 private:
  absl::Status StartOnce(bool wait_until_serving = true);
  std::vector<std::string> Argv() const;

  ServerConfig config_;
  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = 0;
  bool exited_early_ = false;  // the last StartOnce saw the child exit before serving
};

// Runs `argv` (argv[0] a path) with stdout and stderr captured; killed after
// `timeout_ms`. exit_code is the exit status, or 128 + the signal that ended it.
struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};
CommandResult RunCommand(const std::vector<std::string>& argv, int64_t timeout_ms = 60000);

}  // namespace dpledger::e2e
