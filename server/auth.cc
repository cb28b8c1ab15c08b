#include "server/auth.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

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

}  // namespace

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
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(Av(text), '\n')) {
    ++line_no;
    if (size_t hash = line.find('#'); hash != absl::string_view::npos) line = line.substr(0, hash);
    std::vector<std::string> f = absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (f.empty()) continue;
    if (f.size() != 3) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "token file line %d: expected 'TOKEN TENANT ROLE', got %d fields", line_no, f.size()));
    }
    if (f[0].size() < 16) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "token file line %d: token must be at least 16 characters", line_no));
    }
    if (!ValidTenant(f[1])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "token file line %d: tenant must be 1..64 characters of [A-Za-z0-9._-], got '%s'",
          line_no, f[1]));
    }
    Role role;
    if (f[2] == "writer") {
      role = Role::kWriter;
    } else if (f[2] == "reader") {
      role = Role::kReader;
    } else {
      return absl::InvalidArgumentError(absl::StrFormat(
          "token file line %d: role must be reader or writer, got '%s'", line_no, f[2]));
    }
    if (!table.tokens_.emplace(f[0], Caller{f[1], role, false}).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("token file line %d: duplicate token", line_no));
    }
  }
  return table;
}

absl::StatusOr<TokenTable> TokenTable::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrFormat("token_file '%s' cannot be read", path));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return Parse(ss.str());
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
  const std::string_view token = authorization->substr(kBearer.size());
  auto it = tokens_.find(token);
  if (it == tokens_.end()) return absl::UnauthenticatedError("unknown bearer token");
  return it->second;
}

}  // namespace dpledger::server
