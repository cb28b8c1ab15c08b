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

}  // namespace dpledger::cli
