// Checks of the TLS PEM files before gRPC sees them (issue 11): gRPC reports a bad or
// mismatched certificate/key pair only as a failure to bind the listening port, which read
// "cannot listen on ... (in use or not an address)".
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace dpledger::server {

// INVALID_ARGUMENT naming the file when `cert_pem` holds no certificate or `key_pem` no
// private key, or saying that they do not match (the key is not the certificate's).
absl::Status CheckCertificateAndKey(std::string_view cert_pem, std::string_view key_pem,
                                    const std::string& cert_path, const std::string& key_path);

}  // namespace dpledger::server
