// epsilon(delta) from every certifying accountant on the same DP-SGD ledgers
// (issue 5's comparison table): one benchmark per (setting, accountant), each
// reporting its interval and its cold query time (compose + one query).
// scripts/bench_table.sh prints them side by side.
#include <benchmark/benchmark.h>

#include <array>
#include <string>

#include "absl/strings/str_format.h"
#include "core/registry/accountant_registry.h"

namespace dpledger::core {
namespace {

struct Setting {
  double sigma, q;
  int64_t steps;
  double delta;
};

// DP-SGD settings across the range (sigma 0.5-4, q 1e-4-0.1, delta 1e-3..1e-12).
constexpr std::array<Setting, 5> kSettings = {{
    {1.0, 1e-3, 10000, 1e-9},
    {0.8, 1e-2, 10000, 1e-5},
    {2.0, 1e-2, 1000, 1e-5},
    {0.6, 1e-3, 100000, 1e-12},
    {4.0, 1e-1, 1000, 1e-3},
}};

void Run(benchmark::State& state, std::string name, Setting s) {
  absl::StatusOr<EpsilonBound> b;
  for (auto _ : state) {
    auto acc = CreateAccountant(name);
    if (!acc.ok()) {
      state.SkipWithError(std::string(acc.status().message()).c_str());
      return;
    }
    (void)(*acc)->Compose(*Mechanism::SubsampledGaussian(s.sigma, s.q), s.steps);
    b = (*acc)->EpsilonForDelta(s.delta);
  }
  if (!b.ok()) {
    state.SkipWithError(std::string(b.status().message()).c_str());
    return;
  }
  state.counters["eps_lower"] = b->lower;
  state.counters["eps_estimate"] = b->estimate;
  state.counters["eps_upper"] = b->upper;
  state.SetLabel(std::string(GuaranteeName(b->guarantee)));
}

const bool kRegistered = [] {
  for (const Setting& s : kSettings) {
    for (const char* name : {"pld", "rdp", "spa", "edgeworth"}) {
      const std::string bench = absl::StrFormat("Compare/sigma=%g/q=%g/steps=%d/delta=%g/%s",
                                                s.sigma, s.q, s.steps, s.delta, name);
      benchmark::RegisterBenchmark(bench.c_str(), Run, std::string(name), s)
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond);
    }
  }
  return true;
}();

}  // namespace
}  // namespace dpledger::core
