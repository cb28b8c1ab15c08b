// PLD accountant timings: EpsilonForDelta for DP-SGD (sigma = 1, q = 1e-3) at
// k = 1e3, 1e4, 1e5 steps and delta = 1e-5, 1e-9, short ledgers (1-10 steps), a
// Remaining-style search, plus one heterogeneous ledger.
// Each iteration uses a fresh accountant (cold caches: discretisation, spectra,
// composition); the "warm" variant re-queries after appending one step, the
// server's admission pattern. Counters report the certified interval. CPU time is
// the process's (the two directions of an asymmetric ledger run on two threads).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/accountants/pld_accountant.h"

namespace dpledger::core {
namespace {

std::unique_ptr<Accountant> Ledger(const std::vector<MechanismEvent>& events) {
  std::unique_ptr<Accountant> acc = *CreatePldAccountant();
  for (const MechanismEvent& e : events) (void)acc->Compose(e);
  return acc;
}

void Report(benchmark::State& state, const absl::StatusOr<EpsilonBound>& b) {
  if (!b.ok()) {
    state.SkipWithError(std::string(b.status().message()).c_str());
    return;
  }
  state.counters["eps_upper"] = b->upper;
  state.counters["eps_lower"] = b->lower;
  state.counters["rel_width"] = (b->upper - b->lower) / b->upper;
}

void BM_DpSgdEpsilonCold(benchmark::State& state) {
  const int64_t steps = state.range(0);
  const double delta = state.range(1) == 5 ? 1e-5 : 1e-9;
  const MechanismEvent e{*Mechanism::SubsampledGaussian(1.0, 1e-3), steps};
  absl::StatusOr<EpsilonBound> b;
  for (auto _ : state) {
    std::unique_ptr<Accountant> acc = Ledger({e});
    b = acc->EpsilonForDelta(delta);
    benchmark::DoNotOptimize(b);
  }
  Report(state, b);
}
BENCHMARK(BM_DpSgdEpsilonCold)
    ->ArgsProduct({{1000, 10000, 100000}, {5, 9}})
    ->ArgNames({"steps", "neg_log10_delta"})
    ->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);

// Issue 15 item 3: the small-q case, 1e5 steps of sigma = 1, q = 1e-4 at delta =
// 1e-12 (6.5 s in a loaded `dpledger account` process before; target < 1 s).
void BM_SmallQEpsilon(benchmark::State& state) {
  const MechanismEvent e{*Mechanism::SubsampledGaussian(1.0, 1e-4), state.range(0)};
  absl::StatusOr<EpsilonBound> b;
  for (auto _ : state) {
    std::unique_ptr<Accountant> acc = Ledger({e});
    b = acc->EpsilonForDelta(1e-12);
    benchmark::DoNotOptimize(b);
  }
  Report(state, b);
}
BENCHMARK(BM_SmallQEpsilon)->Arg(10000)->Arg(100000)->ArgName("steps")->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);

// Issue 15 (pld-cold): a short ledger's cold epsilon(delta), what a new job's first
// admissions at a tiny delta pay. Cases: 0 = sigma 1, q 1e-3, delta 1e-9 (0.58 s in a
// whole process before); 1 = sigma 0.5, q 1e-3, delta 1e-12 (10.6 s); 2 = sigma 1,
// q 1e-4, delta 1e-5; 3 = sigma 0.5, q 1e-4, delta 1e-5; 4 = Gaussian sigma 1,
// delta 1e-9.
void BM_ShortLedgerEpsilonCold(benchmark::State& state) {
  struct Case {
    double sigma, q, delta;
  };
  constexpr Case kCases[] = {
      {1, 1e-3, 1e-9}, {0.5, 1e-3, 1e-12}, {1, 1e-4, 1e-5}, {0.5, 1e-4, 1e-5}, {1, 1, 1e-9}};
  const Case& c = kCases[state.range(1)];
  const Mechanism m =
      c.q == 1 ? *Mechanism::Gaussian(c.sigma) : *Mechanism::SubsampledGaussian(c.sigma, c.q);
  const MechanismEvent e{m, state.range(0)};
  absl::StatusOr<EpsilonBound> b;
  for (auto _ : state) {
    std::unique_ptr<Accountant> acc = Ledger({e});
    b = acc->EpsilonForDelta(c.delta);
    benchmark::DoNotOptimize(b);
  }
  Report(state, b);
}
BENCHMARK(BM_ShortLedgerEpsilonCold)
    ->ArgsProduct({{1, 2, 10}, {0, 1, 2, 3, 4}})
    ->ArgNames({"steps", "case"})
    ->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);

void BM_DpSgdEpsilonAfterAppend(benchmark::State& state) {
  const int64_t steps = state.range(0);
  const Mechanism m = *Mechanism::SubsampledGaussian(1.0, 1e-3);
  std::unique_ptr<Accountant> acc = Ledger({{m, steps}});
  absl::StatusOr<EpsilonBound> b = acc->EpsilonForDelta(1e-9);
  for (auto _ : state) {
    (void)acc->Compose(m, 1);
    b = acc->EpsilonForDelta(1e-9);
    benchmark::DoNotOptimize(b);
  }
  Report(state, b);
}
BENCHMARK(BM_DpSgdEpsilonAfterAppend)->Arg(10000)->ArgName("steps")->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);

// The warm path of dpledgerd's `Remaining` (server/filter_policy.cc): how many more
// DP-SGD steps (sigma 1, q 1e-3) fit a budget of epsilon 1 at delta 1e-9 after
// `spent` steps, probing k by doubling then bisection, each probe on a clone of the
// job's accountant (clones share its grid and spectrum caches). The counter is the
// answer, k.
void BM_RemainingSearch(benchmark::State& state) {
  const Mechanism m = *Mechanism::SubsampledGaussian(1.0, 1e-3);
  int64_t fit = 0;
  for (auto _ : state) {
    std::unique_ptr<Accountant> job = *CreatePldAccountant();
    if (state.range(0) > 0) (void)job->Compose(m, state.range(0));
    auto fits = [&](int64_t k) {
      std::unique_ptr<Accountant> acc = job->Clone();
      (void)acc->Compose(m, k);
      absl::StatusOr<EpsilonBound> b = acc->EpsilonForDelta(1e-9);
      return b.ok() && b->upper <= 1.0;
    };
    int64_t lo = 0, hi = 1;
    while (fits(hi)) lo = hi, hi *= 2;
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      (fits(mid) ? lo : hi) = mid;
    }
    fit = lo;
  }
  state.counters["fit"] = static_cast<double>(fit);
}
BENCHMARK(BM_RemainingSearch)->Arg(0)->Arg(1000)->ArgName("spent")->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);

// spa.md 9.6 "H1": 500 x SG(1, 0.01) + 1000 x SG(2, 0.02) + 20 x Gaussian(10).
void BM_HeterogeneousEpsilon(benchmark::State& state) {
  const std::vector<MechanismEvent> h1 = {{*Mechanism::SubsampledGaussian(1, 0.01), 500},
                                          {*Mechanism::SubsampledGaussian(2, 0.02), 1000},
                                          {*Mechanism::Gaussian(10), 20}};
  absl::StatusOr<EpsilonBound> b;
  for (auto _ : state) {
    std::unique_ptr<Accountant> acc = Ledger(h1);
    b = acc->EpsilonForDelta(1e-9);
    benchmark::DoNotOptimize(b);
  }
  Report(state, b);
}
BENCHMARK(BM_HeterogeneousEpsilon)->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);

// delta(epsilon) at the default delta target (1%) and with the knob at 1e-4
// (issue 15): 1200 Gaussian steps (sigma 70, mc-evr.md E1) at eps = 2, 3, and
// 1000 DP-SGD steps (sigma 0.6, q 1e-3) at eps = 1.5 (mc-evr.md E8).
void BM_DeltaForEpsilon(benchmark::State& state) {
  const bool dp_sgd = state.range(0) == 1;
  const double eps = state.range(1) / 10.0;
  PldOptions o;
  if (state.range(2) == 4) SetPldPrecision(1e-4, &o);
  const MechanismEvent e = dp_sgd ? MechanismEvent{*Mechanism::SubsampledGaussian(0.6, 1e-3), 1000}
                                  : MechanismEvent{*Mechanism::Gaussian(70), 1200};
  absl::StatusOr<DeltaBound> b;
  for (auto _ : state) {
    std::unique_ptr<Accountant> acc = *CreatePldAccountant(o);
    (void)acc->Compose(e);
    b = acc->DeltaForEpsilon(eps);
    benchmark::DoNotOptimize(b);
  }
  if (!b.ok()) {
    state.SkipWithError(std::string(b.status().message()).c_str());
    return;
  }
  state.counters["delta_upper"] = b->upper;
  state.counters["rel_width"] = (b->upper - b->lower) / b->upper;
}
BENCHMARK(BM_DeltaForEpsilon)
    ->Args({0, 20, 2})
    ->Args({0, 30, 2})
    ->Args({1, 15, 2})
    ->Args({0, 20, 4})
    ->Args({0, 30, 4})
    ->Args({1, 15, 4})
    ->ArgNames({"dp_sgd", "eps_x10", "neg_log10_precision"})
    ->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dpledger::core
