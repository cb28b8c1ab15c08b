// Fuzz target: mechanism parameters into every accountant (core/registry): the Mechanism
// factories, Compose with counts near the int64 limits, then EpsilonForDelta and
// DeltaForEpsilon at edge values (NaN, infinities, denormals, 1e308, 0 and 1).
// Checked beyond "no crash": an answer is never NaN and its interval is ordered
// (lower <= upper), epsilon >= 0 and delta within [0, 1] at its upper end; a refused
// Compose leaves the ledger as it was.
// Each call gets a short query time cap (kCapSeconds) so a slow input ends in
// DEADLINE_EXCEEDED rather than a libFuzzer timeout; a real hang still trips -timeout.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/registry/accountant_registry.h"
#include "core/util/check.h"
#include "fuzz/fuzz_values.h"

using namespace dpledger;

namespace {

constexpr double kCapSeconds = 0.25;
// FUZZ_VERBOSE=1 prints what an input does (to turn a finding into a regression test).
const bool kVerbose = std::getenv("FUZZ_VERBOSE") != nullptr;

template <typename Bound>
void CheckBound(const Bound& b) {
  DPL_CHECK(!std::isnan(b.lower));
  DPL_CHECK(!std::isnan(b.estimate));
  DPL_CHECK(!std::isnan(b.upper));
  DPL_CHECK(b.lower <= b.upper);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const auto names = core::AccountantNames();
  const std::string_view name = names[in.ConsumeIntegralInRange<size_t>(0, names.size() - 1)];

  core::AccountantOptions options;
  options.mc.max_samples = 1 << 12;  // a few thousand paths keep one execution short
  options.mc.max_seconds = kCapSeconds;
  absl::StatusOr<std::unique_ptr<core::Accountant>> acc = core::CreateAccountant(name, options);
  DPL_CHECK(acc.ok());
  (*acc)->SetQueryTimeCap(kCapSeconds);

  const int num_events = in.ConsumeIntegralInRange<int>(1, 4);
  for (int i = 0; i < num_events; ++i) {
    absl::StatusOr<core::Mechanism> m = fuzz::EdgeMechanism(in);
    const int64_t count = fuzz::EdgeCount(in);
    if (!m.ok()) continue;
    if (kVerbose) {
      std::fprintf(stderr, "%.*s Compose %s count=%lld\n", static_cast<int>(name.size()),
                   name.data(), m->ToSpec().c_str(), static_cast<long long>(count));
    }
    const int64_t steps_before = (*acc)->num_steps();
    const size_t events_before = (*acc)->events().size();
    if (!(*acc)->Compose(*m, count).ok()) {
      DPL_CHECK((*acc)->num_steps() == steps_before);
      DPL_CHECK((*acc)->events().size() == events_before);
    }
  }

  const int num_queries = in.ConsumeIntegralInRange<int>(1, 3);
  for (int i = 0; i < num_queries; ++i) {
    if (in.ConsumeBool()) {
      const double delta = fuzz::EdgeProbability(in);
      if (kVerbose) std::fprintf(stderr, "EpsilonForDelta(%.17g)\n", delta);
      absl::StatusOr<core::EpsilonBound> eps = (*acc)->EpsilonForDelta(delta);
      if (eps.ok()) {
        CheckBound(*eps);
        DPL_CHECK(eps->upper >= 0);
      }
    } else {
      const double epsilon = fuzz::EdgeDouble(in);
      if (kVerbose) std::fprintf(stderr, "DeltaForEpsilon(%.17g)\n", epsilon);
      absl::StatusOr<core::DeltaBound> delta = (*acc)->DeltaForEpsilon(epsilon);
      if (delta.ok()) {
        CheckBound(*delta);
        DPL_CHECK(delta->upper >= 0 && delta->lower <= 1);
      }
    }
  }
  return 0;
}
