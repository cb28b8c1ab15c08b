#include "server/read_file.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_format.h"

namespace dpledger::server {

absl::StatusOr<std::string> ReadFileToString(const std::string& path, std::string_view field) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s '%s' cannot be read", std::string(field), path));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace dpledger::server
