// Saddle-point accountant: time per query against the number of composed steps
// (spa.md 7: K_tot = n K_1, so a query costs the same for 1e2 or 1e6 steps).
// DP-SGD ledger: subsampled Gaussian, sigma = 1, q = 1e-3, `range(0)` steps.
//
// "Cold" benchmarks build a fresh accountant per iteration (outside the timed
// region), so every query recomputes its cumulants; "Warm" ones repeat a query
// on one accountant, whose per-(mechanism, tilt) cache then answers it. The
// per-direction benchmarks also report `tilts` = Plrv::Tilted calls per query.
//
//   build-*/bench/spa_bench --benchmark_filter=Spa
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/accountants/spa_accountant.h"
#include "core/accountants/spa_epsilon.h"
#include "core/accountants/spa_ledger_cgf.h"

namespace dpledger::core {
namespace {

constexpr double kSigma = 1.0, kRate = 1e-3, kDelta = 1e-5, kEpsilon = 1.0;

Mechanism DpSgdStep() {
  auto m = Mechanism::SubsampledGaussian(kSigma, kRate);
  if (!m.ok()) std::abort();
  return *m;
}

std::unique_ptr<Accountant> Ledger(int64_t steps) {
  auto a = CreateSpaAccountant();
  if (!a.ok() || !(*a)->Compose(DpSgdStep(), steps).ok()) std::abort();
  return std::move(*a);
}

// eps(delta) through the Accountant (both directions, certified interval and
// SP-CLT estimate), cumulants recomputed every time.
void BM_SpaEpsilonForDeltaCold(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    auto a = Ledger(state.range(0));
    state.ResumeTiming();
    benchmark::DoNotOptimize(a->EpsilonForDelta(kDelta));
  }
}
BENCHMARK(BM_SpaEpsilonForDeltaCold)
    ->RangeMultiplier(10)
    ->Range(100, 1000000)
    ->Unit(benchmark::kMillisecond);

// The same query repeated: served from the cumulant cache.
void BM_SpaEpsilonForDeltaWarm(benchmark::State& state) {
  auto a = Ledger(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(a->EpsilonForDelta(kDelta));
}
BENCHMARK(BM_SpaEpsilonForDeltaWarm)
    ->RangeMultiplier(10)
    ->Range(100, 1000000)
    ->Unit(benchmark::kMillisecond);

// delta(eps): one saddle solve, one (43) solve, per direction.
void BM_SpaDeltaForEpsilonCold(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    auto a = Ledger(state.range(0));
    state.ResumeTiming();
    benchmark::DoNotOptimize(a->DeltaForEpsilon(kEpsilon));
  }
}
BENCHMARK(BM_SpaDeltaForEpsilonCold)
    ->RangeMultiplier(10)
    ->Range(100, 1000000)
    ->Unit(benchmark::kMillisecond);

// eps(delta) for the remove direction alone, counting Tilted calls.
void BM_SpaEpsilonRemoveDirection(benchmark::State& state) {
  const std::vector<MechanismEvent> events = {{DpSgdStep(), state.range(0)}};
  int64_t tilts = 0, queries = 0;
  for (auto _ : state) {
    state.PauseTiming();
    SpaLedgerCgf cgf(Direction::kRemove);
    cgf.SetLedger(events);
    state.ResumeTiming();
    benchmark::DoNotOptimize(SpaEpsilonForDelta(cgf, kDelta, SpaEstimator::kClt));
    tilts += cgf.tilt_evaluations();
    ++queries;
  }
  state.counters["tilts"] = static_cast<double>(tilts) / static_cast<double>(queries);
}
BENCHMARK(BM_SpaEpsilonRemoveDirection)
    ->RangeMultiplier(10)
    ->Range(100, 1000000)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dpledger::core
