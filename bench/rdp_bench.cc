// RDP accountant: epsilon(delta = 1e-5) for DP-SGD ledgers (subsampled Gaussian,
// sigma = 1, q = 1e-3, `range(0)` steps), reporting the answer as counter `epsilon`.
//
// "Cold" builds a fresh accountant per iteration (outside the timed region), so
// every query evaluates the per-step RDP curve over the default 219 orders
// (quadrature at the fractional ones, exact sums at the integer ones); the step
// count only scales that curve, so the cost does not depend on it. "Warm" repeats
// the query on one accountant (per-event cache: conversion only). "Calibrate"
// times a full noise calibration to epsilon = 1 (about 40 cold evaluations).
//
//   build-*/bench/rdp_bench --benchmark_filter=Rdp
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/accountants/rdp_accountant.h"
#include "core/accountants/rdp_subsampled_gaussian.h"
#include "core/registry/calibration.h"

namespace dpledger::core {
namespace {

constexpr double kSigma = 1.0, kRate = 1e-3, kDelta = 1e-5;

std::unique_ptr<Accountant> Ledger(int64_t steps) {
  auto m = Mechanism::SubsampledGaussian(kSigma, kRate);
  auto a = CreateRdpAccountant();
  if (!m.ok() || !a.ok() || !(*a)->Compose(*m, steps).ok()) std::abort();
  return std::move(*a);
}

void BM_RdpEpsilonForDeltaCold(benchmark::State& state) {
  double eps = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto a = Ledger(state.range(0));
    state.ResumeTiming();
    auto e = a->EpsilonForDelta(kDelta);
    if (!e.ok()) std::abort();
    eps = e->upper;
  }
  state.counters["epsilon"] = eps;
}
BENCHMARK(BM_RdpEpsilonForDeltaCold)->Arg(1000)->Arg(10000)->Arg(100000)
    ->Unit(benchmark::kMillisecond);

void BM_RdpEpsilonForDeltaWarm(benchmark::State& state) {
  auto a = Ledger(state.range(0));
  double eps = 0;
  for (auto _ : state) {
    auto e = a->EpsilonForDelta(kDelta);
    if (!e.ok()) std::abort();
    eps = e->upper;
  }
  state.counters["epsilon"] = eps;
}
BENCHMARK(BM_RdpEpsilonForDeltaWarm)->Arg(1000)->Arg(10000)->Arg(100000)
    ->Unit(benchmark::kMicrosecond);

// One fractional order by quadrature vs one integer order by the exact sum.
void BM_RdpSubsampledGaussianMoment(benchmark::State& state) {
  const double alpha = static_cast<double>(state.range(0)) / 100;
  for (auto _ : state) benchmark::DoNotOptimize(SubsampledGaussianLogMoment(kSigma, kRate, alpha));
}
BENCHMARK(BM_RdpSubsampledGaussianMoment)->Arg(150)->Arg(1025)->Arg(800)->Arg(1000000)
    ->Unit(benchmark::kMicrosecond);

void BM_RdpCalibrate(benchmark::State& state) {
  auto m = Mechanism::SubsampledGaussian(kSigma, kRate);
  if (!m.ok()) std::abort();
  const std::vector<MechanismEvent> ledger = {{*m, state.range(0)}};
  double scale = 0;
  for (auto _ : state) {
    auto r = CalibrateNoise(ledger, 1.0, kDelta, "rdp");
    if (!r.ok()) std::abort();
    scale = r->noise_scale;
  }
  state.counters["noise_scale"] = scale;
}
BENCHMARK(BM_RdpCalibrate)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dpledger::core
