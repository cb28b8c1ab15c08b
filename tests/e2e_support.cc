#include "tests/e2e_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "absl/strings/str_format.h"

namespace dpledger::e2e {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& what) {
  std::cerr << "e2e_support: " << what << ": " << std::strerror(errno) << "\n";
  std::abort();
}

// A NULL-terminated argv built before fork: after fork only async-signal-safe
// calls are made (the test process has gRPC threads).
std::vector<char*> CArgv(const std::vector<std::string>& argv) {
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  return cargv;
}

// The test's environment without DPLEDGER_* settings (a developer's token or CA
// must not leak into what the tests run), as a NULL-terminated envp.
struct Environment {
  std::vector<std::string> entries;
  std::vector<char*> envp;
  Environment() {
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "DPLEDGER_", 9) != 0) entries.emplace_back(*e);
    }
    for (std::string& e : entries) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
};

// exec in a forked child; never returns.
[[noreturn]] void ExecChild(const std::vector<char*>& cargv, const Environment& env) {
  execve(cargv[0], cargv.data(), env.envp.data());
  constexpr char kMsg[] = "e2e_support: exec failed\n";
  (void)!write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
  _exit(127);
}

int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

std::string ServerBinary() { return DPLEDGERD_PATH; }
std::string CliBinary() { return DPLEDGER_CLI_PATH; }

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/dpledger-e2e-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) Die("mkdtemp " + tmpl);
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

int PickFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) Die("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) Die("bind 127.0.0.1:0");
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) Die("getsockname");
  close(fd);
  return ntohs(addr.sin_port);
}

void WriteFileOrDie(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) Die("open " + path);
  if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    Die("write " + path);
  close(fd);
}

ServerProcess::ServerProcess(ServerConfig config) : config_(std::move(config)) {}

ServerProcess::~ServerProcess() {
  if (running()) Kill9();
}

std::vector<std::string> ServerProcess::Argv() const {
  std::vector<std::string> argv = {ServerBinary(),
                                   "--listen",
                                   address(),
                                   "--data-dir",
                                   config_.data_dir,
                                   "--metrics-listen",
                                   "127.0.0.1:" + std::to_string(metrics_port_)};
  if (config_.insecure) {
    argv.push_back("--insecure");
  } else {
    argv.insert(argv.end(), {"--tls-cert", config_.tls_cert, "--tls-key", config_.tls_key,
                             "--token-file", config_.token_file});
  }
  argv.insert(argv.end(), config_.extra_args.begin(), config_.extra_args.end());
  return argv;
}

client::ClientOptions ServerProcess::ClientOptionsFor() const {
  client::ClientOptions options = config_.probe;
  options.target = address();
  return options;
}

absl::Status ServerProcess::Start() {
  if (running()) return absl::FailedPreconditionError("server already running");
  if (port_ != 0) return StartOnce();  // a restart keeps its address
  absl::Status last;
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = PickFreePort();
    metrics_port_ = PickFreePort();
    if (metrics_port_ == port_) continue;
    last = StartOnce();
    // Only a server that exited (e.g. could not bind) is retried on other ports.
    if (last.ok() || !exited_early_) return last;
  }
  return last;
}

absl::Status ServerProcess::Launch() {
  if (running()) return absl::FailedPreconditionError("server already running");
  if (port_ == 0) return absl::FailedPreconditionError("Launch restarts: call Start first");
  return StartOnce(/*wait_until_serving=*/false);
}

absl::Status ServerProcess::StartOnce(bool wait_until_serving) {
  const std::vector<std::string> argv = Argv();
  const std::vector<char*> cargv = CArgv(argv);
  const Environment env;
  const int log_fd = open(log_path().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0) Die("open " + log_path());
  const pid_t parent = getpid();
  exited_early_ = false;
  const pid_t pid = fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {
    // The server must not outlive the test, whatever happens to the test.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    ExecChild(cargv, env);
  }
  close(log_fd);
  pid_ = pid;
  if (!wait_until_serving) return absl::OkStatus();

  auto probe_client = client::Client::Create([&] {
    client::ClientOptions o = ClientOptionsFor();
    o.retry.max_attempts = 1;
    return o;
  }());
  if (!probe_client.ok()) return probe_client.status();
  const auto deadline = Clock::now() + std::chrono::milliseconds(config_.ready_timeout_ms);
  absl::Status health = absl::UnavailableError("not probed");
  while (Clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      exited_early_ = true;
      return absl::UnavailableError(
          absl::StrFormat("dpledgerd exited with %d before serving; log tail:\n%s",
                          DecodeWaitStatus(status), LogTail()));
    }
    // Waiting on the channel drives the connection attempt (a plain sleep would
    // leave it to gRPC's 5 s backup poller).
    (*probe_client)->WaitForConnected(200);
    health = (*probe_client)->CheckHealth("", 1000);
    if (health.ok()) return absl::OkStatus();
  }
  Kill9();
  return absl::DeadlineExceededError(
      absl::StrFormat("dpledgerd not SERVING after %d ms (%s); log tail:\n%s",
                      config_.ready_timeout_ms, std::string(health.message()), LogTail()));
}

void ServerProcess::Signal(int sig) {
  if (running()) kill(pid_, sig);
}

void ServerProcess::Kill9() {
  if (!running()) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

absl::Status ServerProcess::Stop(int64_t timeout_ms) {
  if (!running()) return absl::OkStatus();
  kill(pid_, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  int status = 0;
  while (Clock::now() < deadline) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      const int code = DecodeWaitStatus(status);
      if (code != 0) {
        return absl::InternalError(absl::StrFormat("dpledgerd exited with %d after SIGTERM", code));
      }
      return absl::OkStatus();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Kill9();
  return absl::DeadlineExceededError(
      absl::StrFormat("dpledgerd did not exit within %d ms of SIGTERM", timeout_ms));
}

std::string ServerProcess::LogTail(size_t max_bytes) const {
  std::ifstream in(log_path(), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str();
  return all.size() <= max_bytes ? all : all.substr(all.size() - max_bytes);
}

CommandResult RunCommand(const std::vector<std::string>& argv, int64_t timeout_ms) {
  const std::vector<char*> cargv = CArgv(argv);
  const Environment env;
  int out_pipe[2], err_pipe[2];
  // CLOEXEC: a server forked meanwhile by another thread must not hold the pipes open.
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) Die("pipe");
  const pid_t pid = fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    close(out_pipe[0]);
    close(err_pipe[0]);
    close(out_pipe[1]);
    close(err_pipe[1]);
    ExecChild(cargv, env);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  CommandResult result;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  bool killed = false;
  while (open_fds > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0 && !killed) {
      kill(pid, SIGKILL);
      killed = true;
    }
    if (poll(fds, 2, left > 0 ? static_cast<int>(std::min<int64_t>(left, 1000)) : 100) < 0) {
      if (errno == EINTR) continue;
      Die("poll");
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buf[4096];
      const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = DecodeWaitStatus(status);
  return result;
}

}  // namespace dpledger::e2e
