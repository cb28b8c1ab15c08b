#include "server/tls_files.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

#include "absl/strings/str_format.h"

namespace dpledger::server {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

std::unique_ptr<BIO, BioFree> Bio(std::string_view pem) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

}  // namespace

absl::Status CheckCertificateAndKey(std::string_view cert_pem, std::string_view key_pem,
                                    const std::string& cert_path, const std::string& key_path) {
  auto cert_bio = Bio(cert_pem);
  std::unique_ptr<X509, X509Free> cert(
      cert_bio ? PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tls_cert '%s' holds no PEM certificate", cert_path));
  }
  auto key_bio = Bio(key_pem);
  std::unique_ptr<EVP_PKEY, KeyFree> key(
      key_bio ? PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tls_key '%s' holds no PEM private key (or one protected by a passphrase)", key_path));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tls_cert '%s' and tls_key '%s' do not match: the key is not the certificate's",
        cert_path, key_path));
  }
  return absl::OkStatus();
}

}  // namespace dpledger::server
