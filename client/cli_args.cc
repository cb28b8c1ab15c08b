#include "client/cli_args.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace dpledger::cli {

absl::StatusOr<Args> Args::Parse(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& switches) {
  Args a;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& tok = argv[i];
    if (tok.rfind("--", 0) != 0 || tok.size() == 2) {
      a.positional_.push_back(tok);
      continue;
    }
    std::string name = tok.substr(2), value;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (std::find(switches.begin(), switches.end(), name) != switches.end()) {
      value = "true";
    } else {
      if (i + 1 >= argv.size()) {
        return absl::InvalidArgumentError(absl::StrFormat("--%s needs a value", name));
      }
      value = argv[++i];
    }
    a.flags_.emplace(name, value);
  }
  return a;
}

std::optional<std::string> Args::Get(const std::string& name) const {
  auto [lo, hi] = flags_.equal_range(name);
  if (lo == hi) return std::nullopt;
  return std::prev(hi)->second;
}

std::vector<std::string> Args::GetAll(const std::string& name) const {
  std::vector<std::string> out;
  auto [lo, hi] = flags_.equal_range(name);
  for (auto it = lo; it != hi; ++it) out.push_back(it->second);
  return out;
}

absl::StatusOr<std::optional<double>> Args::GetDouble(const std::string& name) const {
  auto v = Get(name);
  if (!v) return std::optional<double>();
  double d;
  if (!absl::SimpleAtod(*v, &d)) {
    return absl::InvalidArgumentError(absl::StrFormat("--%s must be a number, got '%s'", name, *v));
  }
  return std::optional<double>(d);
}

absl::StatusOr<std::optional<int64_t>> Args::GetInt(const std::string& name) const {
  auto v = Get(name);
  if (!v) return std::optional<int64_t>();
  int64_t d;
  if (!absl::SimpleAtoi(*v, &d)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--%s must be an integer, got '%s'", name, *v));
  }
  return std::optional<int64_t>(d);
}

absl::StatusOr<std::vector<core::MechanismEvent>> Args::Steps(bool required) const {
  std::vector<core::MechanismEvent> out;
  for (const std::string& spec : GetAll("step")) {
    auto e = core::ParseStep(spec);
    if (!e.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--step: %s", std::string(e.status().message())));
    }
    out.push_back(*std::move(e));
  }
  if (required && out.empty()) {
    return absl::InvalidArgumentError("--step is required (e.g. --step gaussian:sigma=1,count=10)");
  }
  return out;
}

absl::Status Args::CheckKnown(const std::vector<std::string>& known) const {
  for (const auto& [name, value] : flags_) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return absl::InvalidArgumentError(absl::StrFormat("unknown flag --%s", name));
    }
  }
  return absl::OkStatus();
}

}  // namespace dpledger::cli
