#include "server/served_tls.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include "absl/strings/str_format.h"
#include "server/read_file.h"
#include "server/tls_files.h"
#include "spdlog/spdlog.h"

namespace dpledger::server {
namespace {

constexpr unsigned int kWatchSeconds = 1;

// Writes `bytes` to `dir/name` atomically (temporary file, then rename), mode 0600.
absl::Status WriteAtomically(const std::string& dir, const std::string& name,
                             const std::string& bytes) {
  const std::string tmp = dir + "/." + name + ".tmp", path = dir + "/" + name;
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrFormat("cannot write '%s'", tmp));
  const bool ok = write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrFormat("cannot write '%s'", path));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServedTls>> ServedTls::Create(std::string cert_path,
                                                            std::string key_path,
                                                            std::string client_ca_path) {
  std::unique_ptr<ServedTls> t(new ServedTls());
  t->cert_path_ = std::move(cert_path);
  t->key_path_ = std::move(key_path);
  t->client_ca_path_ = std::move(client_ca_path);
  const char* tmpdir = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/dpledgerd-tls-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    return absl::InternalError(absl::StrFormat("cannot create a directory like '%s'", tmpl));
  }
  t->dir_ = tmpl;
  if (absl::Status s = t->Install(false); !s.ok()) return s;
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      t->dir_ + "/key.pem", t->dir_ + "/cert.pem",
      t->client_ca_path_.empty() ? "" : t->dir_ + "/ca.pem", kWatchSeconds);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (t->client_ca_path_.empty()) {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    // Verified when presented, optional otherwise: token clients keep working.
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  t->credentials_ = grpc::experimental::TlsServerCredentials(options);
  return t;
}

ServedTls::~ServedTls() {
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

absl::Status ServedTls::Install(bool log_change) {
  absl::StatusOr<std::string> cert = ReadFileToString(cert_path_, "tls_cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadFileToString(key_path_, "tls_key");
  if (!key.ok()) return key.status();
  if (absl::Status s = CheckCertificateAndKey(*cert, *key, cert_path_, key_path_); !s.ok()) {
    return s;
  }
  std::string ca;
  if (!client_ca_path_.empty()) {
    absl::StatusOr<std::string> c = ReadFileToString(client_ca_path_, "tls_client_ca");
    if (!c.ok()) return c.status();
    ca = std::move(*c);
  }
  // Key and certificate are renamed in one after the other; the watcher checks that the pair
  // it reads matches, so it never serves a half-replaced pair.
  for (const auto& [name, bytes] : {std::pair<const char*, const std::string*>{"key.pem", &*key},
                                    {"cert.pem", &*cert}, {"ca.pem", &ca}}) {
    if (std::string(name) == "ca.pem" && client_ca_path_.empty()) continue;
    if (absl::Status s = WriteAtomically(dir_, name, *bytes); !s.ok()) return s;
  }
  if (log_change) {
    spdlog::info("reload: TLS certificate '{}' {}", cert_path_,
                 *cert == cert_pem_ ? "unchanged" : "replaced; new handshakes use it");
  }
  cert_pem_ = std::move(*cert);
  return absl::OkStatus();
}

absl::Status ServedTls::Reload() {
  absl::Status s = Install(true);
  if (!s.ok()) {
    spdlog::error("reload: TLS files refused, the old certificate stays: {}",
                  std::string(s.message()));
  }
  return s;
}

}  // namespace dpledger::server
