// Fuzz target: the token file and the client-certificate map (server/auth.h), both read from
// disk at start-up and on SIGHUP, and the "authorization" header checked against the table.
// Input: the file text, then (after the first NUL byte, if any) the header value.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/util/check.h"
#include "server/auth.h"

using namespace dpledger::server;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view file = input.substr(0, nul);
  const std::optional<std::string_view> header =
      nul == std::string_view::npos ? std::nullopt
                                    : std::optional<std::string_view>(input.substr(nul + 1));

  absl::StatusOr<TokenTable> tokens = TokenTable::Parse(file);
  if (tokens.ok()) {
    absl::StatusOr<Caller> caller = tokens->Authenticate(header);
    if (caller.ok()) {
      DPL_CHECK(!caller->tenant.empty());
      DPL_CHECK(!caller->any_tenant);
      // A caller acts on its own tenant; a writer may do what a reader may.
      DPL_CHECK(Authorize(*caller, "", Role::kReader).ok());
    }
    (void)tokens->DescribeChangeFrom(*tokens);
  }
  absl::StatusOr<ClientCertMap> certs = ClientCertMap::Parse(file);
  if (certs.ok() && header) (void)certs->Find(*header);
  return 0;
}
