// Bearer-token authentication and role/tenant authorisation (issue 4 "Security").
//
// Token file: one token per line, "TOKEN TENANT ROLE", whitespace separated; '#' starts a
// comment; ROLE is "reader" (queries) or "writer" (also job creation, steps, releases,
// closing jobs). Tokens must be at least 16 characters. Requests carry
// "authorization: Bearer TOKEN" metadata.
//
// With --insecure there is no authentication: every caller is a writer of any tenant, named
// by the request's tenant field ("default" when empty).
#pragma once

#include <map>
#include <optional>
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

 private:
  std::map<std::string, Caller, std::less<>> tokens_;
};

}  // namespace dpledger::server
