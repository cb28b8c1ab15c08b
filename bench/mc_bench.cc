// Monte Carlo pool throughput (mc-evr.md 6.4, 7) next to the machine's limit for
// the same per-sample work, and online DP-SGD accounting.
//
//   BM_PoolAppend/{smc,is,tilt_mixture}: one subsampled-Gaussian step appended to every path
//     of a 2^16-path pool on ONE thread; items = path-steps, so items/s is the
//     per-core rate.
//   BM_Limit*: the same arithmetic in a register loop with no pool, no memory
//     and no threads: Philox alone, Philox + Box-Muller, and Philox + normal +
//     the loss log/exp (= one SMC step). Ratio pool / limit = pool efficiency.
//   BM_OnlineDpSgd/steps/paths: IS pool (all cores), DP-SGD sigma 1, q 1e-3;
//     append one step, then epsilon(delta = 1e-9) warm-started from the
//     previous answer, after every step. Reports total wall time, the largest
//     relative gap to the PLD accountant's estimate at 10 checkpoints, the
//     final answer's relative standard error and whether its 95% interval
//     holds PLD's, and the time PLD would need to answer after every step (its
//     query time at the checkpoints, summed over all steps by the trapezoid rule).
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/accountants/pld_accountant.h"
#include "core/mc/mc_sample_math.h"
#include "core/mc/mc_step.h"
#include "core/mc/pool_query.h"
#include "core/mc/sample_pool.h"

namespace dpledger::core {
namespace {

constexpr int64_t kPaths = int64_t{1} << 16;

void BM_PoolAppend(benchmark::State& state) {
  const McEstimator kinds[] = {McEstimator::kSmc, McEstimator::kImportanceSampling,
                               McEstimator::kTiltMixture};
  SamplePoolOptions o;
  o.estimator = kinds[state.range(0)];
  o.num_paths = kPaths;
  o.seed = 1;
  o.target_epsilon = 2.0;
  o.backend = McBackend::kCpu;
  o.num_threads = 1;
  auto pool = CreateSamplePool(o);
  const Mechanism m = *Mechanism::SubsampledGaussian(1.0, 1e-3);
  for (auto _ : state) {
    if (!(*pool)->Append({m, 1}).ok()) state.SkipWithError("append failed");
  }
  state.SetItemsProcessed(state.iterations() * kPaths);
  state.SetLabel(std::string(McEstimatorName(o.estimator)));
}
BENCHMARK(BM_PoolAppend)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

mc::McStep DpSgdStep() { return mc::MakeMcStep(*Mechanism::SubsampledGaussian(1.0, 1e-3), Direction::kRemove); }

void BM_LimitPhilox(benchmark::State& state) {
  uint32_t acc = 0;
  uint64_t i = 0;
  for (auto _ : state) {
    for (int j = 0; j < 1024; ++j) acc ^= mc::DrawBlock(7, i++, 3, 0, 0).v[1];
  }
  benchmark::DoNotOptimize(acc);
  state.SetItemsProcessed(state.iterations() * 1024);
}
BENCHMARK(BM_LimitPhilox);

void BM_LimitPhiloxNormal(benchmark::State& state) {
  double acc = 0;
  uint64_t i = 0;
  for (auto _ : state) {
    for (int j = 0; j < 1024; ++j) acc += mc::StandardNormal(mc::DrawBlock(7, i++, 3, 0, 0));
  }
  benchmark::DoNotOptimize(acc);
  state.SetItemsProcessed(state.iterations() * 1024);
}
BENCHMARK(BM_LimitPhiloxNormal);

void BM_LimitSmcStep(benchmark::State& state) {
  const mc::McStep s = DpSgdStep();
  double acc = 0;
  uint64_t i = 0;
  for (auto _ : state) {
    for (int j = 0; j < 1024; ++j) acc += mc::SampleLoss(s, mc::DrawBlock(7, i++, 3, 0, 0));
  }
  benchmark::DoNotOptimize(acc);
  state.SetItemsProcessed(state.iterations() * 1024);
}
BENCHMARK(BM_LimitSmcStep);

// The untilted IS step's arithmetic: loss plus the running LSE of a(t).
void BM_LimitIsStep(benchmark::State& state) {
  mc::McStep s = *mc::MakeTiltedMcStep(*Mechanism::SubsampledGaussian(1.0, 1e-3),
                                       mc::ThetaMm(1.0, 1e-3, 2.0));
  double acc = 0, lse = -kInf;
  uint64_t i = 0;
  for (auto _ : state) {
    for (int j = 0; j < 1024; ++j) {
      const double t = mc::GaussianKindOutput(s, mc::DrawBlock(7, i++, 3, 0, 0), false);
      acc += mc::GaussianKindLoss(s, t);
      lse = LogAddExp(lse, mc::TiltLogRatio(s, t));
    }
  }
  benchmark::DoNotOptimize(acc);
  benchmark::DoNotOptimize(lse);
  state.SetItemsProcessed(state.iterations() * 1024);
}
BENCHMARK(BM_LimitIsStep);

void BM_OnlineDpSgd(benchmark::State& state) {
  const int64_t steps = state.range(0);
  const Mechanism m = *Mechanism::SubsampledGaussian(1.0, 1e-3);
  double eps = 0, lower = 0, upper = 0, rse = 0;
  std::vector<std::pair<int64_t, double>> checkpoints;  // (steps, MC epsilon)
  for (auto _ : state) {
    SamplePoolOptions o;
    o.estimator = McEstimator::kImportanceSampling;
    o.num_paths = state.range(1);
    o.seed = 2;
    o.target_epsilon = 0.75;  // theta_MM(0.75): near the final epsilon(1e-9) at 1e4 steps
    o.backend = McBackend::kAuto;
    auto pool = CreateSamplePool(o);
    double last = -1;
    int64_t evaluations = 0;
    checkpoints.clear();
    for (int64_t n = 1; n <= steps; ++n) {
      if (!(*pool)->Append({m, 1}).ok()) state.SkipWithError("append failed");
      auto e = PoolEpsilonForDelta(**pool, 1e-9, Direction::kRemove, last);
      if (!e.ok()) state.SkipWithError("epsilon failed");
      last = e->epsilon;
      lower = e->lower;
      upper = e->upper;
      rse = e->at_epsilon.relative_std_error;
      evaluations += e->evaluations;
      if (n % (steps / 10) == 0) checkpoints.push_back({n, last});
    }
    eps = last;
    state.counters["passes_per_step"] = static_cast<double>(evaluations) / steps;
    state.SetLabel((*pool)->Backend() == "cuda" ? "cuda" : "cpu");
  }
  state.counters["final_epsilon"] = eps;
  state.counters["final_rel_std_error"] = rse;
  // Outside the timed loop: PLD at each checkpoint, for accuracy and cost.
  double max_gap = 0, pld_seconds = 0, prev_seconds = 0;
  int64_t prev_n = 0;
  for (const auto& [n, mc] : checkpoints) {
    auto pld = *CreatePldAccountant();
    (void)pld->Compose(m, n);
    const auto t0 = std::chrono::steady_clock::now();
    auto b = pld->EpsilonForDelta(1e-9);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!b.ok()) {
      state.SkipWithError("pld failed");
      return;
    }
    max_gap = std::max(max_gap, std::fabs(mc - b->estimate) / b->estimate);
    if (n == steps) state.counters["final_interval_holds_pld"] = lower <= b->estimate && b->estimate <= upper;
    pld_seconds += 0.5 * (dt + prev_seconds) * static_cast<double>(n - prev_n);
    prev_seconds = dt;
    prev_n = n;
  }
  state.counters["max_rel_gap_vs_pld"] = max_gap;
  state.counters["pld_every_step_s"] = pld_seconds;
}
BENCHMARK(BM_OnlineDpSgd)
    ->Args({1000, 10000})
    ->Args({10000, 10000})
    ->Args({10000, 100000})
    ->Unit(benchmark::kSecond)
    ->Iterations(1);

}  // namespace
}  // namespace dpledger::core
