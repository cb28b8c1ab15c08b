// JSON shapes shared by every command that prints an accounting answer, so
// `dpledger account --json` and `dpledger spent --json` agree.
#pragma once

#include <nlohmann/json.hpp>

#include "core/accountants/accountant.h"

namespace dpledger::cli {

// {"lower":..,"estimate":..,"upper":..,"guarantee":"certified"[,"failure_probability":..]}
template <typename Bound>
nlohmann::ordered_json BoundToJson(const Bound& b) {
  nlohmann::ordered_json j = {{"lower", b.lower},
                      {"estimate", b.estimate},
                      {"upper", b.upper},
                      {"guarantee", std::string(core::GuaranteeName(b.guarantee))}};
  if (b.guarantee == core::Guarantee::kStatistical) j["failure_probability"] = b.failure_probability;
  return j;
}

// {"name": value, ...} from an accountant's LastDiagnostics(); absent when empty.
inline void AddDiagnostics(const core::Accountant& accountant, nlohmann::ordered_json* out) {
  const std::vector<core::AnswerDiagnostic> diagnostics = accountant.LastDiagnostics();
  if (diagnostics.empty()) return;
  nlohmann::ordered_json d = nlohmann::ordered_json::object();
  for (const core::AnswerDiagnostic& x : diagnostics) {
    std::visit([&](const auto& v) { d[x.name] = v; }, x.value);
  }
  (*out)["diagnostics"] = d;
}

}  // namespace dpledger::cli
