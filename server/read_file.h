// Reading a whole configuration file (TLS PEMs, token file, client certificate map).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace dpledger::server {

// The file's bytes; INVALID_ARGUMENT naming `field` (the flag) when it cannot be read.
absl::StatusOr<std::string> ReadFileToString(const std::string& path, std::string_view field);

}  // namespace dpledger::server
