// Client settings from files and the environment.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_format.h"
#include "client/client.h"

namespace dpledger::client {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// The first line of a token file, without surrounding white space.
std::string FirstLine(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  const auto first = line.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  const auto last = line.find_last_not_of(" \t\r");
  return line.substr(first, last - first + 1);
}

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    if (err == ENOENT)
      return absl::NotFoundError(absl::StrFormat("file '%s' does not exist", path));
    return absl::InternalError(
        absl::StrFormat("cannot read file '%s': %s", path, std::strerror(err)));
  }
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return absl::InternalError(absl::StrFormat("error reading file '%s'", path));
  return out.str();
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  return FirstLine(*text);
}

absl::Status ApplyEnvironment(ClientOptions& options) {
  if (options.bearer_token.empty()) options.bearer_token = Env("DPLEDGER_CLIENT_TOKEN");
  if (options.bearer_token.empty()) {
    if (const std::string path = Env("DPLEDGER_CLIENT_TOKEN_FILE"); !path.empty()) {
      auto token = ReadTokenFile(path);
      if (!token.ok()) return token.status();
      options.bearer_token = *token;
    }
  }
  if (options.tenant.empty()) options.tenant = Env("DPLEDGER_CLIENT_TENANT");
  if (options.tls_ca_pem.empty()) {
    if (const std::string path = Env("DPLEDGER_CLIENT_TLS_CA"); !path.empty()) {
      auto pem = ReadFile(path);
      if (!pem.ok()) return pem.status();
      options.tls_ca_pem = *pem;
      options.tls = true;
    }
  }
  if (options.tls_server_name.empty()) {
    options.tls_server_name = Env("DPLEDGER_CLIENT_TLS_SERVER_NAME");
  }
  return absl::OkStatus();
}

}  // namespace dpledger::client
