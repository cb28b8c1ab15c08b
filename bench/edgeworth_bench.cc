// Edgeworth accountant: time per query against the number of composed steps
// (spec edgeworth.md S6: cumulants add, so a query costs the same for 1e2 or 1e6
// steps of one mechanism). Each benchmark builds one DP-SGD ledger
// (subsampled Gaussian, sigma = 0.8, q = 0.01) of `range(0)` steps outside the
// timed loop, then times one query.
//
//   build-*/bench/edgeworth_bench --benchmark_filter=Edgeworth
#include <cstdint>
#include <memory>

#include <benchmark/benchmark.h>

#include "core/accountants/edgeworth_accountant.h"

namespace dpledger::core {
namespace {

std::unique_ptr<Accountant> Ledger(int64_t steps, int order = 2) {
  auto a = CreateEdgeworthAccountant({.order = order});
  auto m = Mechanism::SubsampledGaussian(0.8, 0.01);
  if (!a.ok() || !m.ok() || !(*a)->Compose(*m, steps).ok()) std::abort();
  return std::move(*a);
}

// eps(delta) at delta = 1e-5: the AEA root search (~400 evaluations) plus the
// EEAI scan (4001 points) that decides whether the answer can be certified.
void BM_EdgeworthEpsilonForDelta(benchmark::State& state) {
  auto a = Ledger(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(a->EpsilonForDelta(1e-5));
}
BENCHMARK(BM_EdgeworthEpsilonForDelta)->RangeMultiplier(10)->Range(100, 1000000)
    ->Unit(benchmark::kMicrosecond);

// delta(eps) at eps = 1: closed form, a few tail evaluations.
void BM_EdgeworthDeltaForEpsilon(benchmark::State& state) {
  auto a = Ledger(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(a->DeltaForEpsilon(1.0));
}
BENCHMARK(BM_EdgeworthDeltaForEpsilon)->RangeMultiplier(10)->Range(100, 1000000)
    ->Unit(benchmark::kMicrosecond);

// Composing one more step and querying: the per-step moment integrals are
// cached per mechanism, so an update is O(1) whatever the ledger length.
void BM_EdgeworthComposeThenQuery(benchmark::State& state) {
  auto a = Ledger(state.range(0));
  auto m = Mechanism::SubsampledGaussian(0.8, 0.01);
  for (auto _ : state) {
    if (!a->Compose(*m, 1).ok()) std::abort();
    benchmark::DoNotOptimize(a->DeltaForEpsilon(1.0));
  }
}
BENCHMARK(BM_EdgeworthComposeThenQuery)->RangeMultiplier(10)->Range(100, 1000000)
    ->Unit(benchmark::kMicrosecond);

// The first composition of a new mechanism: the S2.4 quadrature (both laws,
// both directions), paid once per (mechanism, parameters).
void BM_EdgeworthFirstCompose(benchmark::State& state) {
  auto m = Mechanism::SubsampledGaussian(0.8, 0.01);
  for (auto _ : state) {
    auto a = CreateEdgeworthAccountant({});
    benchmark::DoNotOptimize((*a)->Compose(*m, 1000));
  }
}
BENCHMARK(BM_EdgeworthFirstCompose)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace dpledger::core
