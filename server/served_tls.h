// The TLS credentials dpledgerd serves, reloadable on SIGHUP (issue 11). gRPC's
// FileWatcherCertificateProvider re-reads a key/certificate pair (and the client CA of mutual
// TLS) about once a second; it watches private copies here, which only Reload replaces, and
// only after the new pair passed CheckCertificateAndKey (tls_files.h): a missing, malformed
// or mismatched pair is refused with its error and the old one stays. New handshakes get a
// reloaded certificate within about a second; open connections and streams keep theirs.
//
// Thread safety: Reload may run concurrently with serving.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace grpc {
class ServerCredentials;
}

namespace dpledger::server {

class ServedTls {
 public:
  // client_ca empty: no client certificates; otherwise they are requested and, when
  // presented, verified against it.
  static absl::StatusOr<std::unique_ptr<ServedTls>> Create(std::string cert_path,
                                                          std::string key_path,
                                                          std::string client_ca_path);
  ~ServedTls();  // removes the private copies

  std::shared_ptr<grpc::ServerCredentials> credentials() const { return credentials_; }
  // Reads the configured files again; OK and a log line saying what changed, or the error.
  absl::Status Reload();

 private:
  ServedTls() = default;
  // Checks the configured files and, when good, installs them as the watched copies.
  absl::Status Install(bool log_change);

  std::string cert_path_, key_path_, client_ca_path_;
  std::string dir_;  // private copies: cert.pem, key.pem, ca.pem (mode 0600, dir 0700)
  std::string cert_pem_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
};

}  // namespace dpledger::server
