// EVR verifier cost (mc-evr.md 4.8, 8 E4/E12). The paper's setting (E1/E3/E4): 1200
// Gaussian steps with sigma = 70 (mu = 0.49487), eps = 2, delta_est = the exact
// delta(2) = 7.772356946e-6 (spec 9.1), tau in [0.9, 0.99], rho = (1 + tau)/2.
// At tau = 0.99 the verifier needs ~4.6e11 paths, hours on a CPU: the benchmarks
// measure the planning cost, the sampler's throughput (paths/s) and report the
// predicted verification time m / throughput as counters; full verifications run only
// where m is small (tau = 0.5) to check the prediction. Also the spec's Fig. 6 setting
// (subsampled Gaussian, IS) for its predicted time.
//
//   build-*/bench/evr_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/evr/verifier.h"
#include "core/mc/mc_estimate.h"

namespace dpledger::core {
namespace {

std::vector<MechanismEvent> Fig1Ledger() { return {MechanismEvent{*Mechanism::Gaussian(70.0), 1200}}; }
constexpr double kFig1Epsilon = 2.0;
constexpr double kFig1Delta = 7.772356946e-6;  // closed form, spec 9.1

std::vector<MechanismEvent> Fig6Ledger() {
  return {MechanismEvent{*Mechanism::SubsampledGaussian(0.6, 1e-3), 1000}};
}
constexpr double kFig6Epsilon = 1.5;
constexpr double kFig6Delta = 7.706069e-6;  // spec 9.4 ref

VerifierOptions Options(double tau) {
  VerifierOptions o;
  o.tau = tau;
  o.max_samples = std::numeric_limits<int64_t>::max();
  o.max_seconds = std::numeric_limits<double>::infinity();
  return o;
}

// Planning (bounds, theta search, m) only; counters: m and nu of the remove direction.
void BM_PlanFig1(benchmark::State& state) {
  const double tau = state.range(0) / 100.0;
  const auto ledger = Fig1Ledger();
  VerificationResult plan;
  for (auto _ : state) {
    auto r = PlanVerification(ledger, kFig1Epsilon, kFig1Delta, Options(tau));
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    plan = *r;
  }
  state.counters["tau"] = tau;
  state.counters["m"] = static_cast<double>(plan.directions[0].samples.num_samples);
  state.counters["nu"] = plan.directions[0].nu;
}
BENCHMARK(BM_PlanFig1)->Arg(90)->Arg(95)->Arg(99)->Unit(benchmark::kMillisecond);

// Sampler throughput for a plan's remove direction, and the predicted verification
// time at tau = 0.9, 0.95, 0.99 (m/throughput, seconds).
void Throughput(benchmark::State& state, const std::vector<MechanismEvent>& ledger, double epsilon,
                double delta_est, int64_t paths_per_iteration) {
  auto plan = PlanVerification(ledger, epsilon, delta_est, Options(0.99));
  if (!plan.ok()) {
    state.SkipWithError(std::string(plan.status().message()).c_str());
    return;
  }
  const DirectionCheck& d = plan->directions[0];
  McEstimateRequest req;
  req.events = ledger;
  req.epsilon = epsilon;
  req.estimator = d.estimator;
  req.thetas = d.thetas;
  req.num_samples = paths_per_iteration;
  double seconds = 0;
  int64_t paths = 0;
  std::string backend;
  for (auto _ : state) {
    req.seed += 1;
    auto est = EstimateDeltaStreaming(req);
    if (!est.ok()) {
      state.SkipWithError(std::string(est.status().message()).c_str());
      return;
    }
    seconds += est->seconds;
    paths += paths_per_iteration;
    backend = est->backend;
    benchmark::DoNotOptimize(est->delta_hat);
  }
  const double rate = paths / seconds;
  state.SetItemsProcessed(paths);
  state.SetLabel(backend + (d.estimator == McEstimator::kSmc ? " smc" : " is"));
  state.counters["paths_per_s"] = rate;
  for (int tau_pct : {90, 95, 99}) {
    auto p = PlanVerification(ledger, epsilon, delta_est, Options(tau_pct / 100.0));
    if (!p.ok()) continue;
    double m = 0;
    for (const DirectionCheck& c : p->directions) m += static_cast<double>(c.samples.num_samples);
    state.counters["m_tau" + std::to_string(tau_pct)] = m;
    state.counters["pred_s_tau" + std::to_string(tau_pct)] = m / rate;
  }
}

void BM_ThroughputFig1(benchmark::State& state) {
  Throughput(state, Fig1Ledger(), kFig1Epsilon, kFig1Delta, int64_t{1} << 24);
}
BENCHMARK(BM_ThroughputFig1)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ThroughputFig6(benchmark::State& state) {
  Throughput(state, Fig6Ledger(), kFig6Epsilon, kFig6Delta, int64_t{1} << 15);
}
BENCHMARK(BM_ThroughputFig6)->Unit(benchmark::kMillisecond)->UseRealTime();

// A full verification (planning, throughput run, fresh sampling) where m is small
// enough for a CPU: Fig. 1 ledger at tau = 0.5 (m ~ 1.7e7) and tau = 0.8. Counters:
// measured vs predicted sampling seconds.
void BM_VerifyFig1(benchmark::State& state) {
  const double tau = state.range(0) / 100.0;
  VerifierOptions o = Options(tau);
  o.max_seconds = 3600;  // enables the throughput run that predicts the time
  const auto ledger = Fig1Ledger();
  VerificationResult last;
  for (auto _ : state) {
    auto r = Verify(ledger, kFig1Epsilon, kFig1Delta, o);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    last = *r;
  }
  state.SetLabel(std::string(VerificationOutcomeName(last.outcome)) + " on " + last.backend);
  state.counters["m"] = static_cast<double>(last.directions[0].samples.num_samples);
  state.counters["predicted_s"] = last.predicted_seconds;
  state.counters["sampling_s"] = last.directions[0].estimate.seconds;
  state.counters["total_s"] = last.seconds;
}
BENCHMARK(BM_VerifyFig1)->Arg(50)->Arg(80)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
}  // namespace dpledger::core
