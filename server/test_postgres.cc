#include "server/test_postgres.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"

namespace dpledger::server::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// The bin directory of the newest installed PostgreSQL, or "".
std::string FindBinDir() {
  std::error_code ec;
  std::vector<std::pair<int, std::string>> found;
  for (const fs::directory_entry& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const fs::path bin = e.path() / "bin";
    if (!fs::exists(bin / "initdb") || !fs::exists(bin / "postgres")) continue;
    found.emplace_back(std::atoi(e.path().filename().c_str()), bin.string());
  }
  if (found.empty()) return "";
  return std::max_element(found.begin(), found.end())->second;
}

int PickFreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  if (fd >= 0) ::close(fd);
  return port;
}

// Forks and execs argv (argv[0] a path) as uid/gid when switch_user, with stdout and stderr
// appended to log_path and SIGKILL when this thread ends. Only async-signal-safe calls
// happen after fork: the test process has other threads.
absl::StatusOr<pid_t> SpawnAs(const std::vector<std::string>& argv, bool switch_user, uid_t uid,
                              gid_t gid, const std::string& log_path) {
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) return absl::UnavailableError(absl::StrFormat("open '%s' failed", log_path));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log);
    return absl::UnavailableError("fork failed");
  }
  if (pid == 0) {
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    if (switch_user && (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0)) {
      _exit(126);
    }
    // After the user switch: changing credentials clears the parent-death signal.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) _exit(125);
    ::execv(cargv[0], cargv.data());
    _exit(127);
  }
  ::close(log);
  return pid;
}

absl::Status RunAs(const std::vector<std::string>& argv, bool switch_user, uid_t uid, gid_t gid,
                   const std::string& log_path) {
  absl::StatusOr<pid_t> pid = SpawnAs(argv, switch_user, uid, gid, log_path);
  if (!pid.ok()) return pid.status();
  int status = 0;
  ::waitpid(*pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnavailableError(absl::StrFormat("'%s' failed (wait status %d); see %s",
                                                  argv[0], status, log_path));
  }
  return absl::OkStatus();
}

}  // namespace

std::string PostgresUnavailableReason() {
  if (FindBinDir().empty()) {
    return "PostgreSQL binaries not found under /usr/lib/postgresql/*/bin (Debian package "
           "postgresql; scripts/install-deps.sh installs it)";
  }
  return "";
}

absl::StatusOr<std::unique_ptr<TestPostgres>> TestPostgres::Start() {
  std::unique_ptr<TestPostgres> pg(new TestPostgres());
  pg->bin_dir_ = FindBinDir();
  if (pg->bin_dir_.empty()) return absl::FailedPreconditionError(PostgresUnavailableReason());
  if (::geteuid() == 0) {
    const passwd* pw = ::getpwnam("postgres");
    if (pw == nullptr) {
      return absl::FailedPreconditionError(
          "running as root, initdb needs an unprivileged user: no 'postgres' user (Debian's "
          "postgresql package creates it)");
    }
    pg->switch_user_ = true;
    pg->uid_ = pw->pw_uid;
    pg->gid_ = pw->pw_gid;
  }
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/dpledger-pg-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return absl::UnavailableError(absl::StrFormat("mkdtemp '%s' failed", tmpl));
  }
  pg->dir_ = tmpl;
  if (pg->switch_user_ && ::chown(pg->dir_.c_str(), pg->uid_, pg->gid_) != 0) {
    return absl::UnavailableError(absl::StrFormat("chown '%s' failed", pg->dir_));
  }
  if (absl::Status s = pg->InitDataDir(base && *base ? base : "/tmp"); !s.ok()) return s;
  for (int attempt = 0;; ++attempt) {
    pg->port_ = PickFreePort();
    absl::Status s = pg->Spawn();
    if (s.ok()) s = pg->WaitReady();
    if (s.ok()) return pg;
    (void)pg->Stop(/*immediate=*/true);
    if (attempt == 4) return s;  // else the port was taken meanwhile: another one
  }
}

// initdb takes seconds; a copy of a cluster made once takes a fraction of one. The template
// sits beside the instances' directories, named for the binaries' version and the initdb
// options (bump kTemplateVersion when they change), and is published by an atomic rename, so
// concurrent test processes either find a complete one or make their own.
absl::Status TestPostgres::InitDataDir(const std::string& tmp) {
  constexpr int kTemplateVersion = 1;
  const std::string tmpl = absl::StrFormat(
      "%s/dpledger-pg-template-v%d-%s-uid%d", tmp, kTemplateVersion,
      fs::path(bin_dir_).parent_path().filename().string(),
      static_cast<int>(switch_user_ ? uid_ : ::geteuid()));
  if (!fs::exists(tmpl + "/data/PG_VERSION")) {
    const std::string staging = dir_ + "/template";
    // --no-sync: initdb's own files need no fsync for a throwaway cluster; the server runs
    // with fsync=on, so commits are flushed as in production.
    if (absl::Status s = RunAs({bin_dir_ + "/initdb", "-D", staging + "/data", "-U", "dpledger",
                                "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync",
                                "--no-instructions"},
                               switch_user_, uid_, gid_, dir_ + "/initdb.log");
        !s.ok()) {
      return s;
    }
    std::error_code ec;
    fs::rename(staging, tmpl, ec);  // fails harmlessly when another process published first
    if (ec) fs::remove_all(staging, ec);
  }
  // As the server's user, so the copy belongs to it; -a keeps the 0700 modes initdb set.
  return RunAs({"/bin/cp", "-a", tmpl + "/data", dir_ + "/data"}, switch_user_, uid_, gid_,
               dir_ + "/initdb.log");
}

absl::StatusOr<TestPostgres*> TestPostgres::Shared() {
  static absl::StatusOr<std::unique_ptr<TestPostgres>>* shared =
      new absl::StatusOr<std::unique_ptr<TestPostgres>>(Start());
  // Stopped at exit; a static unique_ptr would also do, but this keeps the order explicit.
  static const bool registered = [] {
    std::atexit([] {
      if (shared->ok()) shared->value().reset();
    });
    return true;
  }();
  (void)registered;
  if (!shared->ok()) return shared->status();
  return shared->value().get();
}

TestPostgres::~TestPostgres() {
  // Immediate: the directory is removed next, so the shutdown checkpoint would be wasted.
  if (pid_ > 0) (void)Stop(/*immediate=*/true);
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
}

absl::Status TestPostgres::Spawn() {
  absl::StatusOr<pid_t> pid = SpawnAs(
      {bin_dir_ + "/postgres", "-D", dir_ + "/data", "-p", std::to_string(port_), "-k", dir_,
       "-c", "listen_addresses=127.0.0.1", "-c", "fsync=on", "-c", "synchronous_commit=on",
       "-c", "max_connections=200", "-c", "log_min_messages=warning",
       // Small, and no /dev/shm (64 MiB in containers) for parallel test processes.
       "-c", "shared_buffers=32MB", "-c", "dynamic_shared_memory_type=mmap"},
      switch_user_, uid_, gid_, dir_ + "/postgres.log");
  if (!pid.ok()) return pid.status();
  pid_ = *pid;
  return absl::OkStatus();
}

absl::Status TestPostgres::WaitReady() {
  const std::string conninfo = Url("postgres");
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    if (PQping(conninfo.c_str()) == PQPING_OK) return absl::OkStatus();
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::UnavailableError(
          absl::StrFormat("postgres exited while starting (status %d): %s", status, LogTail()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError("postgres not ready after 60 s: " + LogTail());
}

absl::Status TestPostgres::Stop(bool immediate) {
  if (pid_ <= 0) return absl::OkStatus();
  ::kill(pid_, immediate ? SIGQUIT : SIGINT);
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) != pid_) {
    if (Clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
  return absl::OkStatus();
}

absl::Status TestPostgres::Restart() {
  if (pid_ > 0) return absl::FailedPreconditionError("postgres is running");
  if (absl::Status s = Spawn(); !s.ok()) return s;
  return WaitReady();
}

std::string TestPostgres::Url(const std::string& database) const {
  return absl::StrFormat("postgresql://dpledger@127.0.0.1:%d/%s", port_, database);
}

absl::StatusOr<std::string> TestPostgres::CreateDatabase() {
  const std::string name = absl::StrFormat("t%d", ++next_database_);
  PGconn* conn = PQconnectdb(Url("postgres").c_str());
  absl::Status s;
  if (PQstatus(conn) != CONNECTION_OK) {
    s = absl::UnavailableError(absl::StrFormat("connect: %s", PQerrorMessage(conn)));
  } else {
    PGresult* r = PQexec(conn, ("CREATE DATABASE " + name).c_str());
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
      s = absl::UnavailableError(absl::StrFormat("create database: %s", PQerrorMessage(conn)));
    }
    PQclear(r);
  }
  PQfinish(conn);
  if (!s.ok()) return s;
  return Url(name);
}

std::string TestPostgres::LogTail(size_t max_bytes) const {
  std::ifstream in(dir_ + "/postgres.log");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str();
  return all.size() <= max_bytes ? all : all.substr(all.size() - max_bytes);
}

}  // namespace dpledger::server::testing
