// Online accuracy target of issue 14 item 4 for the MC accountant: 1e4 DP-SGD steps
// (sigma 1, q 1e-3) appended in chunks, epsilon(1e-9) asked after every chunk, each
// answer compared with PLD's (precision 1e-4, certified width ~1e-5 relative).
//
//   BM_McOnline/paths/every/mixture: one accountant (seed 7, num_samples = paths;
//   mixture 0: the default estimator choice, 1: the tilt_mixture estimator, 2: it with
//   one ladder rung instead of three), a query
//   every `every` steps up to 1e4. Counters:
//   max_rel_error = max over checkpoints of |estimate - pld| / pld, intervals_holding
//   = checkpoints whose reported 95% interval contains PLD's estimate (of
//   `checkpoints`), mc_seconds = time in the MC accountant (compose + queries).
//   Target: max_rel_error <= 0.02 and intervals_holding = checkpoints at 1e5 paths.
//   Each checkpoint is printed to stderr (estimate, interval, estimator, ESS).
//
// Run: build/bench/mc_online_bench --benchmark_filter='BM_McOnline/100000/1000/0'
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <variant>

#include "benchmark/benchmark.h"
#include "core/accountants/pld_accountant.h"
#include "core/mc/mc_accountant.h"

namespace dpledger::core {
namespace {

constexpr int64_t kSteps = 10000;
constexpr double kDelta = 1e-9;

std::string Diagnostic(const Accountant& a, const std::string& name) {
  for (const AnswerDiagnostic& d : a.LastDiagnostics()) {
    if (d.name != name) continue;
    if (const auto* s = std::get_if<std::string>(&d.value)) return *s;
    return std::to_string(std::get<double>(d.value));
  }
  return "-";
}

void BM_McOnline(benchmark::State& state) {
  const Mechanism m = *Mechanism::SubsampledGaussian(1.0, 1e-3);
  const int64_t every = state.range(1);
  PldOptions po;
  SetPldPrecision(1e-4, &po);
  McAccountantOptions o;
  o.num_samples = state.range(0);
  o.seed = 7;
  if (state.range(2) >= 1) o.estimator = McAccountantEstimator::kTiltMixture;
  if (state.range(2) == 2) o.ladder_rungs = 1;
  for (auto _ : state) {
    auto pld = CreatePldAccountant(po);
    auto mc = CreateMcAccountant(o);
    if (!pld.ok() || !mc.ok()) {
      state.SkipWithError("create");
      return;
    }
    double max_rel = 0, mc_seconds = 0;
    int holding = 0, checkpoints = 0;
    for (int64_t k = every; k <= kSteps; k += every) {
      const auto t0 = std::chrono::steady_clock::now();
      auto e = (*mc)->Compose(m, every).ok() ? (*mc)->EpsilonForDelta(kDelta)
                                             : absl::StatusOr<EpsilonBound>(absl::InternalError("compose"));
      mc_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!e.ok() || !(*pld)->Compose(m, every).ok()) {
        state.SkipWithError(std::string(e.status().message()).c_str());
        return;
      }
      auto ref = (*pld)->EpsilonForDelta(kDelta);
      if (!ref.ok()) {
        state.SkipWithError("pld query");
        return;
      }
      const double rel = std::fabs(e->estimate - ref->estimate) / ref->estimate;
      const bool holds = e->lower <= ref->estimate && ref->estimate <= e->upper;
      max_rel = std::max(max_rel, rel);
      holding += holds;
      ++checkpoints;
      std::fprintf(stderr,
                   "steps %6lld  mc %.6f [%.6f, %.6f]  pld %.6f  rel %+.2e  %s  %s ess %s\n",
                   static_cast<long long>(k), e->estimate, e->lower, e->upper, ref->estimate,
                   (e->estimate - ref->estimate) / ref->estimate, holds ? "holds" : "MISSES",
                   Diagnostic(**mc, "remove_estimator").c_str(),
                   Diagnostic(**mc, "remove_ess").c_str());
    }
    state.counters["max_rel_error"] = max_rel;
    state.counters["intervals_holding"] = holding;
    state.counters["checkpoints"] = checkpoints;
    state.counters["mc_seconds"] = mc_seconds;
  }
}
BENCHMARK(BM_McOnline)
    ->ArgsProduct({{10000, 100000}, {500, 1000}, {0, 1, 2}})
    ->Unit(benchmark::kSecond)
    ->Iterations(1);

}  // namespace
}  // namespace dpledger::core
