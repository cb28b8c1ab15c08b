// Minimal command-line parsing for the `dpledger` CLI: `--name value`,
// `--name=value`, repeated flags (e.g. --step) and boolean switches.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/mechanisms/mechanism.h"

namespace dpledger::cli {

class Args {
 public:
  // Parses argv[begin..end). Flags named in `switches` take no value.
  static absl::StatusOr<Args> Parse(const std::vector<std::string>& argv,
                                    const std::vector<std::string>& switches = {"json", "insecure",
                                                                                "help"});
  bool Has(const std::string& name) const { return flags_.count(name) > 0; }
  // The last value given for `name`, if any.
  std::optional<std::string> Get(const std::string& name) const;
  std::vector<std::string> GetAll(const std::string& name) const;
  // Typed getters: INVALID_ARGUMENT naming the flag when malformed.
  absl::StatusOr<std::optional<double>> GetDouble(const std::string& name) const;
  absl::StatusOr<std::optional<int64_t>> GetInt(const std::string& name) const;
  // All --step values parsed (at least one required when `required`).
  absl::StatusOr<std::vector<core::MechanismEvent>> Steps(bool required = true) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // INVALID_ARGUMENT naming the first flag not in `known`.
  absl::Status CheckKnown(const std::vector<std::string>& known) const;

 private:
  std::multimap<std::string, std::string> flags_;
  std::vector<std::string> positional_;
};

}  // namespace dpledger::cli
