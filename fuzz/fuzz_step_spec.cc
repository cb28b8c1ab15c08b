// Fuzz target: the step SPEC grammar (core::ParseStep: `dpledger account --step`, the proto
// Step.spec field) and the canonical step text the stores hold (ParseCanonicalSteps).
// Checked beyond "no crash": an accepted step prints (ToSpec) to text that parses back to the
// same step, and canonical text round-trips through CanonicalSteps.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/mechanisms/mechanism.h"
#include "core/util/check.h"
#include "server/ledger_types.h"

using namespace dpledger;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  absl::StatusOr<core::MechanismEvent> step = core::ParseStep(text);
  if (step.ok()) {
    const std::string printed =
        step->mechanism.ToSpec() + ",count=" + std::to_string(step->count);
    absl::StatusOr<core::MechanismEvent> again = core::ParseStep(printed);
    DPL_CHECK(again.ok());
    DPL_CHECK(*again == *step);
  }

  absl::StatusOr<std::vector<core::MechanismEvent>> steps = server::ParseCanonicalSteps(text);
  if (steps.ok()) {
    absl::StatusOr<std::vector<core::MechanismEvent>> again =
        server::ParseCanonicalSteps(server::CanonicalSteps(*steps));
    DPL_CHECK(again.ok());
    DPL_CHECK(*again == *steps);
  }
  return 0;
}
