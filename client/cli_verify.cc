// `dpledger verify`: offline EVR verification of a proposed (epsilon, delta_est) for a
// ledger given as --step specs (mc-evr.md 4.8). Exit 0 for a decision (accepted,
// rejected or refused), 2 for an input error (the message names the flag).
// `--plan`: what the gate will cost, before any verification sample is drawn: per
// direction the estimator (or the certified bound that settles it), the proven nu, m
// and the predicted sampling time (core/evr PlanVerificationWithTime).
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <string>

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "client/cli_commands.h"
#include "core/evr/verifier.h"

namespace dpledger::cli {
namespace {

std::string EstimatorName(core::McEstimator e) { return std::string(core::McEstimatorName(e)); }

nlohmann::ordered_json DirectionJson(const core::DirectionCheck& d) {
  nlohmann::ordered_json j = {
      {"direction", std::string(core::DirectionName(d.direction))},
      {"estimator", EstimatorName(d.estimator)},
      {"nu", d.nu},
      {"log_nu", d.log_nu},
      {"nu_method", d.nu_method},
      {"samples", d.samples.num_samples},
      {"samples_exact", d.samples.exact},
      {"sampled", d.sampled},
      {"verified_by", core::DirectionVerifiedBy(d)},
      {"certified", d.certified},
      {"predicted_seconds", d.predicted_seconds}};
  if (d.certified_upper > 0) j["certified_upper"] = d.certified_upper;
  if (!d.thetas.empty()) j["thetas"] = d.thetas;
  if (!d.cell_lower.empty()) j["cut"] = d.cell_lower.front();
  if (d.threshold_offset > 0) j["threshold_offset"] = d.threshold_offset;
  if (d.sampled) {
    j["seed"] = d.seed;
    j["delta_hat"] = d.estimate.delta_hat;
    j["std_error"] = d.estimate.std_error;
    j["second_moment"] = d.estimate.second_moment;
    j["num_positive"] = d.estimate.num_positive;
    j["passed"] = d.passed;
    j["backend"] = d.estimate.backend;
    j["seconds"] = d.estimate.seconds;
  }
  return j;
}

nlohmann::ordered_json ResultJson(const core::VerificationResult& r) {
  const core::VerifierThresholds& t = r.thresholds;
  // samples: drawn in this run; samples_planned: m of every direction that is to be
  // sampled (certified directions draw nothing; their m stays in "directions"). A
  // refusal or an early rejection draws fewer than planned.
  int64_t samples = 0, planned = 0;
  double delta_hat = -1;
  for (const auto& d : r.directions) {
    if (!d.certified) planned += d.samples.num_samples;
    if (d.sampled) {
      samples += d.samples.num_samples;
      delta_hat = std::max(delta_hat, d.estimate.delta_hat);
    }
  }
  nlohmann::ordered_json j = {
      {"accepted", r.accepted},
      {"outcome", std::string(core::VerificationOutcomeName(r.outcome))},
      {"reason", r.reason},
      {"epsilon", r.epsilon},
      {"delta_est", t.delta_est},
      {"tau", t.tau},
      {"rho", t.rho},
      {"Delta", t.offset},
      {"threshold", t.threshold},
      {"samples", samples},
      {"samples_planned", planned}};
  j["delta_hat"] = delta_hat >= 0 ? nlohmann::ordered_json(delta_hat) : nlohmann::ordered_json();
  if (!r.directions.empty()) {
    const core::DirectionCheck& d0 = r.directions.front();
    j["nu"] = d0.nu;
    j["theta"] = d0.thetas.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(d0.thetas);
    j["seed"] = d0.sampled ? nlohmann::ordered_json(d0.seed) : nlohmann::ordered_json();
  }
  if (r.guarantee) {
    nlohmann::ordered_json g = {{"epsilon", r.guarantee->epsilon},
                                {"delta", r.guarantee->delta},
                                {"guarantee", std::string(core::GuaranteeName(r.guarantee->guarantee))}};
    if (r.guarantee->guarantee == core::Guarantee::kStatistical) {
      g["failure_probability"] = r.guarantee->failure_probability;
    }
    j["guarantee"] = g;
  }
  j["add_direction_zero"] = r.add_direction_zero;
  nlohmann::ordered_json dirs = nlohmann::ordered_json::array();
  for (const auto& d : r.directions) dirs.push_back(DirectionJson(d));
  j["directions"] = dirs;
  j["backend"] = r.backend;
  j["predicted_seconds"] = r.predicted_seconds;
  j["seconds"] = r.seconds;
  return j;
}

// --plan: one line per direction, nothing sampled yet.
void PrintPlan(const core::VerificationResult& r) {
  const core::VerifierThresholds& t = r.thresholds;
  if (r.outcome == core::VerificationOutcome::kAcceptedTrivially) {
    std::printf("plan        %s\n", r.reason.c_str());
    return;
  }
  std::printf("threshold   T = %.6g  (Delta %.4g, tau %g, rho %g)\n", t.threshold, t.offset, t.tau,
              t.rho);
  for (const auto& d : r.directions) {
    const std::string dir(core::DirectionName(d.direction));
    if (d.certified) {
      std::printf("%-11s %s: nothing to sample\n", dir.c_str(), core::DirectionVerifiedBy(d).c_str());
      continue;
    }
    std::printf("%-11s estimator %s  nu %.4g (%s)  m %.4g  predicted %.3g s\n", dir.c_str(),
                EstimatorName(d.estimator).c_str(), d.nu, d.nu_method.c_str(), d.samples.exact,
                d.predicted_seconds);
  }
  if (r.add_direction_zero) std::printf("add         provably zero at this epsilon\n");
  std::printf("total       predicted %.3g s of sampling\n", r.predicted_seconds);
}

void PrintSummary(const core::VerificationResult& r) {
  const core::VerifierThresholds& t = r.thresholds;
  std::printf("decision    %s\n", std::string(core::VerificationOutcomeName(r.outcome)).c_str());
  if (r.guarantee) {
    std::printf("guarantee   (epsilon %.6g, delta %.6g)  %s", r.guarantee->epsilon,
                r.guarantee->delta, std::string(core::GuaranteeName(r.guarantee->guarantee)).c_str());
    if (r.guarantee->guarantee == core::Guarantee::kStatistical) {
      std::printf(", failure probability %.3g", r.guarantee->failure_probability);
    }
    std::printf("\n");
  }
  std::printf("reason      %s\n", r.reason.c_str());
  std::printf("threshold   T = %.6g  (Delta %.4g, tau %g, rho %g)\n", t.threshold, t.offset, t.tau,
              t.rho);
  for (const auto& d : r.directions) {
    std::printf("%-11s %s  nu %.4g  m %lld", std::string(core::DirectionName(d.direction)).c_str(),
                EstimatorName(d.estimator).c_str(), d.nu, static_cast<long long>(d.samples.num_samples));
    if (d.sampled) {
      std::printf("  delta_hat %.6g +- %.2g  seed %llu  %.3g s", d.estimate.delta_hat,
                  d.estimate.std_error, static_cast<unsigned long long>(d.seed), d.estimate.seconds);
    } else if (d.predicted_seconds > 0) {
      std::printf("  (predicted %.3g s)", d.predicted_seconds);
    }
    std::printf("\n");
  }
  if (r.add_direction_zero) std::printf("add         provably zero at this epsilon\n");
  std::printf("time        %.3g s%s%s\n", r.seconds, r.backend.empty() ? "" : " on ",
              r.backend.c_str());
}

absl::StatusOr<core::VerifierOptions> ParseOptions(const Args& args) {
  core::VerifierOptions o;
  auto tau = args.GetDouble("tau");
  if (!tau.ok()) return tau.status();
  if (tau->has_value()) o.tau = **tau;
  auto rho = args.GetDouble("rho");
  if (!rho.ok()) return rho.status();
  if (rho->has_value()) o.rho = **rho;
  // --max-samples accepts 1e10 as well as 10000000000.
  auto max_samples = args.GetDouble("max-samples");
  if (!max_samples.ok()) return max_samples.status();
  if (max_samples->has_value()) {
    const double v = **max_samples;
    if (!(v >= 2 && v <= 9.2e18) || v != std::floor(v)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--max-samples must be an integer in [2, 9.2e18], got %g", v));
    }
    o.max_samples = static_cast<int64_t>(v);
  }
  auto max_seconds = args.GetDouble("max-seconds");
  if (!max_seconds.ok()) return max_seconds.status();
  if (max_seconds->has_value()) {
    if (!(**max_seconds > 0)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--max-seconds must be > 0, got %g", **max_seconds));
    }
    o.max_seconds = **max_seconds;
  }
  if (auto e = args.Get("estimator")) {
    if (*e == "auto") {
      o.estimator = core::VerifierEstimator::kAuto;
    } else if (*e == "smc") {
      o.estimator = core::VerifierEstimator::kSmc;
    } else if (*e == "is") {
      o.estimator = core::VerifierEstimator::kImportanceSampling;
    } else if (*e == "tilt") {
      o.estimator = core::VerifierEstimator::kTiltEvery;
    } else if (*e == "loss") {
      o.estimator = core::VerifierEstimator::kTiltLoss;
    } else if (*e == "largest") {
      o.estimator = core::VerifierEstimator::kLargest;
    } else {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--estimator must be auto, smc, is, tilt, loss or largest, got '%s'", *e));
    }
  }
  if (auto c = args.Get("certify")) {
    if (*c == "pld") {
      o.certification = core::DirectionCertification::kPld;
    } else if (*c == "pld-far") {
      o.certification = core::DirectionCertification::kPldFar;
    } else if (*c == "none") {
      o.certification = core::DirectionCertification::kNone;
    } else {
      return absl::InvalidArgumentError(
          absl::StrFormat("--certify must be pld, pld-far or none, got '%s'", *c));
    }
  }
  if (auto b = args.Get("backend")) {
    if (*b == "auto") {
      o.backend = core::McBackend::kAuto;
    } else if (*b == "cpu") {
      o.backend = core::McBackend::kCpu;
    } else if (*b == "cuda") {
      o.backend = core::McBackend::kCuda;
    } else {
      return absl::InvalidArgumentError(
          absl::StrFormat("--backend must be auto, cpu or cuda, got '%s'", *b));
    }
  }
  auto threads = args.GetInt("threads");
  if (!threads.ok()) return threads.status();
  if (threads->has_value()) {
    if (**threads < 0 || **threads > 4096) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--threads must be in [0, 4096], got %d", **threads));
    }
    o.num_threads = static_cast<int>(**threads);
  }
  return o;
}

}  // namespace

int RunVerify(const Args& args) {
  if (auto s = args.CheckKnown({"epsilon", "delta-est", "tau", "rho", "max-samples", "max-seconds",
                                "step", "json", "estimator", "backend", "threads", "plan", "certify"});
      !s.ok()) {
    return Fail(s);
  }
  auto epsilon = args.GetDouble("epsilon");
  if (!epsilon.ok()) return Fail(epsilon.status());
  if (!epsilon->has_value()) return Fail(absl::InvalidArgumentError("--epsilon is required"));
  auto delta_est = args.GetDouble("delta-est");
  if (!delta_est.ok()) return Fail(delta_est.status());
  if (!delta_est->has_value()) return Fail(absl::InvalidArgumentError("--delta-est is required"));
  auto steps = args.Steps();
  if (!steps.ok()) return Fail(steps.status());
  auto options = ParseOptions(args);
  if (!options.ok()) return Fail(options.status());

  const bool plan = args.Has("plan");
  auto result = plan ? core::PlanVerificationWithTime(*steps, **epsilon, **delta_est, *options)
                     : core::Verify(*steps, **epsilon, **delta_est, *options);
  if (!result.ok()) {
    // The library names fields in snake_case; say which flag that is.
    std::string msg(result.status().message());
    for (auto [field, flag] : {std::pair{"delta_est", "--delta-est"},
                               std::pair{"max_samples", "--max-samples"},
                               std::pair{"max_seconds", "--max-seconds"}}) {
      if (msg.rfind(field, 0) == 0) msg = std::string(flag) + ": " + msg;
    }
    if (msg.rfind("epsilon", 0) == 0 || msg.rfind("tau", 0) == 0 || msg.rfind("rho", 0) == 0) {
      msg = "--" + msg;
    }
    return Fail(absl::Status(result.status().code(), msg));
  }
  if (args.Has("json")) {
    nlohmann::ordered_json j = ResultJson(*result);
    if (plan && result->outcome != core::VerificationOutcome::kAcceptedTrivially) {
      j["outcome"] = "planned";
    }
    std::cout << j.dump() << "\n";
  } else if (plan) {
    PrintPlan(*result);
  } else {
    PrintSummary(*result);
  }
  return 0;
}

}  // namespace dpledger::cli
