// Bearer-token authentication and role/tenant authorisation (issue 4 "Security").
//
// Token file: one token per line, "sha256:HEX TENANT ROLE", whitespace separated, where HEX
// is the 64 hex digits of the token's SHA-256 digest (`printf %s TOKEN | sha256sum`), so the
// file does not hold the secrets themselves (issue 11); '#' starts a comment; ROLE is
// "reader" (queries) or "writer" (also job creation, steps, releases, closing jobs).
// Requests carry "authorization: Bearer TOKEN" metadata; the server compares the presented
// token's digest with every line's in constant time (CRYPTO_memcmp, no early exit), so the
// time taken tells nothing about how close a guess came.
// Deprecated, accepted for one release: a plaintext "TOKEN TENANT ROLE" line (the token at
// least 16 characters); plaintext_lines() counts them so start-up can warn.
//
// With --insecure there is no authentication: every caller is a writer of any tenant, named
// by the request's tenant field ("default" when empty).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace dpledger::server {

enum class Role { kReader = 1, kWriter = 2 };
std::string_view RoleName(Role role);

inline constexpr std::string_view kDefaultTenant = "default";

// Who is calling. any_tenant: insecure mode (the request picks the tenant).
struct Caller {
  std::string tenant;
  Role role = Role::kReader;
  bool any_tenant = false;
  static Caller Insecure() { return {std::string(kDefaultTenant), Role::kWriter, true}; }
};

// Resolves the tenant a request acts on and checks the caller's role:
// requested empty -> the caller's tenant; different from a bound caller's tenant ->
// PERMISSION_DENIED; role too weak -> PERMISSION_DENIED naming the role needed.
// Tenant names: 1..64 characters of [A-Za-z0-9._-] (INVALID_ARGUMENT naming `tenant`).
absl::StatusOr<std::string> Authorize(const Caller& caller, std::string_view requested_tenant,
                                      Role needed);

class TokenTable {
 public:
  static absl::StatusOr<TokenTable> Parse(std::string_view text);
  static absl::StatusOr<TokenTable> Load(const std::string& path);

  // authorization header value -> Caller; UNAUTHENTICATED when missing, malformed or unknown.
  absl::StatusOr<Caller> Authenticate(std::optional<std::string_view> authorization) const;
  size_t size() const { return tokens_.size(); }
  int plaintext_lines() const { return plaintext_lines_; }
  // What a reload changed, for the log: "tokens=N added=A removed=R changed=C" (changed: the
  // same token with another tenant or role). Names no token.
  std::string DescribeChangeFrom(const TokenTable& before) const;

 private:
  using Digest = std::array<uint8_t, 32>;
  struct Entry {
    Digest digest;
    Caller caller;
  };
  std::vector<Entry> tokens_;
  int plaintext_lines_ = 0;
};

// What a verified client certificate says of its holder (gRPC's auth context properties).
struct CertIdentity {
  std::vector<std::string> common_names = {};  // x509_common_name
  std::vector<std::string> subjects = {};      // x509_subject, RFC 2253 ("CN=a,O=Acme")
  std::vector<std::string> sans = {};  // x509_subject_alternative_name (DNS, URI, email, IP)
};

// Mutual TLS (issue 11): client certificates, verified against --tls-client-ca, name their
// caller. Map file: one "NAME TENANT ROLE" per line (whitespace separated, so a NAME without
// spaces), '#' comments. NAME is "subject:DN" (the whole subject as RFC 2253 prints it),
// "san:VALUE" (any one subject alternative name: a DNS name, URI such as a SPIFFE id, email
// or IP) or "cn:NAME" / a bare NAME (the subject's common name). A certificate matching
// several lines is the first such line's caller. Reloaded on SIGHUP (server.h).
class ClientCertMap {
 public:
  static absl::StatusOr<ClientCertMap> Parse(std::string_view text);
  static absl::StatusOr<ClientCertMap> Load(const std::string& path);
  // The caller a verified certificate stands for; nullopt when unmapped.
  std::optional<Caller> Find(const CertIdentity& cert) const;
  // The caller of a certificate with only this common name (tests, bare-name lines).
  std::optional<Caller> Find(std::string_view common_name) const;
  size_t size() const { return names_.size(); }

 private:
  enum class Kind { kCommonName, kSubject, kSan };
  struct Name {
    Kind kind;
    std::string value;
    Caller caller;
  };
  std::vector<Name> names_;
};

// "sha256:" and the lower-case hex SHA-256 digest of `token`: what a token file line holds.
std::string TokenDigestHex(std::string_view token);

}  // namespace dpledger::server
