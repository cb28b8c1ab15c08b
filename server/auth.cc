#include "server/auth.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <functional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "server/read_file.h"

namespace dpledger::server {
namespace {

// Debian 12's Abseil has its own string_view type: convert explicitly at the boundary.
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool ValidTenant(std::string_view t) {
  if (t.empty() || t.size() > 64) return false;
  for (char c : t) {
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

constexpr std::string_view kDigestPrefix = "sha256:";

using EntryFn = std::function<absl::Status(int line_no, const std::string& key,
                                           const std::string& tenant, Role role)>;

// Each "KEY TENANT ROLE" line of `text` ('#' comments and blank lines skipped) checked for
// its field count, tenant and role, then handed to `fn`; the first error stops.
absl::Status ForEachEntry(std::string_view text, std::string_view file, std::string_view key_name,
                          const EntryFn& fn);

absl::StatusOr<Role> ParseRole(std::string_view role, std::string_view file, int line_no) {
  if (role == "writer") return Role::kWriter;
  if (role == "reader") return Role::kReader;
  return absl::InvalidArgumentError(absl::StrFormat("%s line %d: role must be reader or writer, got '%s'",
                                                    std::string(file), line_no, std::string(role)));
}


std::array<uint8_t, 32> Sha256(std::string_view text) {
  std::array<uint8_t, 32> d;
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), d.data());
  return d;
}

// The digest a "sha256:HEX" field names; nullopt when it is not 64 hex digits.
std::optional<std::array<uint8_t, 32>> ParseDigest(std::string_view hex) {
  if (hex.size() != 64) return std::nullopt;
  std::array<uint8_t, 32> d;
  for (size_t i = 0; i < 32; ++i) {
    int v = 0;
    for (size_t j = 0; j < 2; ++j) {
      const char c = absl::ascii_tolower(static_cast<unsigned char>(hex[2 * i + j]));
      if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
      v = v * 16 + (c <= '9' ? c - '0' : c - 'a' + 10);
    }
    d[i] = static_cast<uint8_t>(v);
  }
  return d;
}

absl::Status ForEachEntry(std::string_view text, std::string_view file, std::string_view key_name,
                          const EntryFn& fn) {
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(Av(text), '\n')) {
    ++line_no;
    if (size_t hash = line.find('#'); hash != absl::string_view::npos) line = line.substr(0, hash);
    std::vector<std::string> f = absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (f.empty()) continue;
    if (f.size() != 3) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s line %d: expected '%s TENANT ROLE', got %d fields", std::string(file),
                          line_no, std::string(key_name), f.size()));
    }
    if (!ValidTenant(f[1])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s line %d: tenant must be 1..64 characters of [A-Za-z0-9._-], got '%s'",
          std::string(file), line_no, f[1]));
    }
    absl::StatusOr<Role> role = ParseRole(f[2], file, line_no);
    if (!role.ok()) return role.status();
    if (absl::Status s = fn(line_no, f[0], f[1], *role); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

std::string TokenDigestHex(std::string_view token) {
  const std::array<uint8_t, 32> d = Sha256(token);
  return std::string(kDigestPrefix) +
         absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
}

std::string_view RoleName(Role role) { return role == Role::kWriter ? "writer" : "reader"; }

absl::StatusOr<std::string> Authorize(const Caller& caller, std::string_view requested_tenant,
                                      Role needed) {
  std::string tenant = requested_tenant.empty() ? caller.tenant : std::string(requested_tenant);
  if (!ValidTenant(tenant)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tenant must be 1..64 characters of [A-Za-z0-9._-], got '%s'", tenant.substr(0, 80)));
  }
  if (!caller.any_tenant && tenant != caller.tenant) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "the token's tenant '%s' may not act on tenant '%s'", caller.tenant, tenant));
  }
  if (static_cast<int>(caller.role) < static_cast<int>(needed)) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "this call needs the %s role; the token has %s", std::string(RoleName(needed)),
        std::string(RoleName(caller.role))));
  }
  return tenant;
}

absl::StatusOr<TokenTable> TokenTable::Parse(std::string_view text) {
  TokenTable table;
  absl::Status s = ForEachEntry(
      text, "token file", "TOKEN",
      [&](int line_no, const std::string& token, const std::string& tenant, Role role) {
        Digest digest;
        if (absl::StartsWith(token, Av(kDigestPrefix))) {
          std::optional<Digest> d = ParseDigest(std::string_view(token).substr(kDigestPrefix.size()));
          if (!d.has_value()) {
            return absl::InvalidArgumentError(absl::StrFormat(
                "token file line %d: a digest must be sha256: and 64 hex digits", line_no));
          }
          digest = *d;
        } else {
          if (token.size() < 16) {
            return absl::InvalidArgumentError(absl::StrFormat(
                "token file line %d: token must be at least 16 characters", line_no));
          }
          digest = Sha256(token);
          ++table.plaintext_lines_;
        }
        for (const Entry& e : table.tokens_) {
          if (e.digest == digest) {
            return absl::InvalidArgumentError(
                absl::StrFormat("token file line %d: duplicate token", line_no));
          }
        }
        table.tokens_.push_back({digest, Caller{tenant, role, false}});
        return absl::OkStatus();
      });
  if (!s.ok()) return s;
  return table;
}

std::string TokenTable::DescribeChangeFrom(const TokenTable& before) const {
  int added = 0, changed = 0, kept = 0;
  for (const Entry& e : tokens_) {
    const Entry* old = nullptr;
    for (const Entry& b : before.tokens_) {
      if (b.digest == e.digest) old = &b;
    }
    if (old == nullptr) {
      ++added;
    } else if (old->caller.tenant != e.caller.tenant || old->caller.role != e.caller.role) {
      ++changed;
    } else {
      ++kept;
    }
  }
  const int removed = static_cast<int>(before.tokens_.size()) - kept - changed;
  return absl::StrFormat("tokens=%d added=%d removed=%d changed=%d", tokens_.size(), added,
                         removed, changed);
}

absl::StatusOr<TokenTable> TokenTable::Load(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path, "token_file");
  if (!text.ok()) return text.status();
  return Parse(*text);
}

absl::StatusOr<ClientCertMap> ClientCertMap::Parse(std::string_view text) {
  ClientCertMap map;
  absl::Status s = ForEachEntry(
      text, "client_cert_map", "NAME",
      [&](int line_no, const std::string& field, const std::string& tenant, Role role) {
        Name n{Kind::kCommonName, field, Caller{tenant, role, false}};
        for (const auto& [prefix, kind] : {std::pair<std::string_view, Kind>{"subject:", Kind::kSubject},
                                           {"san:", Kind::kSan},
                                           {"cn:", Kind::kCommonName}}) {
          if (absl::StartsWith(field, Av(prefix))) {
            n = {kind, field.substr(prefix.size()), n.caller};
            break;
          }
        }
        if (n.value.empty()) {
          return absl::InvalidArgumentError(
              absl::StrFormat("client_cert_map line %d: empty name after its prefix", line_no));
        }
        for (const Name& e : map.names_) {
          if (e.kind == n.kind && e.value == n.value) {
            return absl::InvalidArgumentError(
                absl::StrFormat("client_cert_map line %d: duplicate name", line_no));
          }
        }
        map.names_.push_back(std::move(n));
        return absl::OkStatus();
      });
  if (!s.ok()) return s;
  return map;
}

absl::StatusOr<ClientCertMap> ClientCertMap::Load(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path, "client_cert_map");
  if (!text.ok()) return text.status();
  return Parse(*text);
}

std::optional<Caller> ClientCertMap::Find(const CertIdentity& cert) const {
  for (const Name& n : names_) {
    const std::vector<std::string>& values = n.kind == Kind::kSubject ? cert.subjects
                                             : n.kind == Kind::kSan   ? cert.sans
                                                                      : cert.common_names;
    for (const std::string& v : values) {
      if (v == n.value) return n.caller;
    }
  }
  return std::nullopt;
}

std::optional<Caller> ClientCertMap::Find(std::string_view common_name) const {
  return Find(CertIdentity{.common_names = {std::string(common_name)}});
}

absl::StatusOr<Caller> TokenTable::Authenticate(
    std::optional<std::string_view> authorization) const {
  if (!authorization.has_value() || authorization->empty()) {
    return absl::UnauthenticatedError("missing 'authorization: Bearer TOKEN' metadata");
  }
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization->size() <= kBearer.size() ||
      !absl::EqualsIgnoreCase(Av(authorization->substr(0, kBearer.size())), Av(kBearer))) {
    return absl::UnauthenticatedError("authorization metadata must be 'Bearer TOKEN'");
  }
  const Digest presented = Sha256(authorization->substr(kBearer.size()));
  const Entry* found = nullptr;
  for (const Entry& e : tokens_) {  // every entry, no early exit: constant time
    const bool same = CRYPTO_memcmp(e.digest.data(), presented.data(), presented.size()) == 0;
    if (same) found = &e;
  }
  if (found == nullptr) return absl::UnauthenticatedError("unknown bearer token");
  return found->caller;
}

}  // namespace dpledger::server
