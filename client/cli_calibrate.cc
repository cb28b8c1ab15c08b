// `dpledger calibrate`: the smallest common noise factor that meets an
// (epsilon, delta) target (core/registry/calibration.h). The noise written in each
// --step is multiplied by the factor, so a unit-noise spec yields the noise
// multiplier itself.
#include <cstdio>
#include <iostream>
#include <string>

#include "absl/strings/str_format.h"
#include "client/cli_accountant_flags.h"
#include "client/cli_commands.h"
#include "client/cli_output.h"
#include "core/registry/accountant_registry.h"
#include "core/registry/calibration.h"

namespace dpledger::cli {
namespace {

std::string StepSpec(const core::MechanismEvent& e) {
  return absl::StrFormat("%s,count=%d", e.mechanism.ToSpec(), e.count);
}

void PrintTable(const std::string& accountant, double target_epsilon, double target_delta,
                const core::CalibrationResult& r) {
  std::printf("accountant   %s\n", accountant.c_str());
  std::printf("target       epsilon %.6g at delta %.6g\n", target_epsilon, target_delta);
  std::printf("noise_scale  %.6g\n", r.noise_scale);
  std::printf("epsilon      %.6g  [%.6g, %.6g]  (%s)\n", r.epsilon.estimate, r.epsilon.lower,
              r.epsilon.upper, std::string(core::GuaranteeName(r.epsilon.guarantee)).c_str());
  std::printf("steps\n");
  for (const core::MechanismEvent& e : r.events) std::printf("  %s\n", StepSpec(e).c_str());
}

}  // namespace

int RunCalibrate(const Args& args) {
  if (auto s = args.CheckKnown(WithAccountantFlags({"accountant", "epsilon", "delta", "step", "json"}));
      !s.ok()) {
    return Fail(s);
  }
  const std::string name = args.Get("accountant").value_or("pld");
  auto epsilon = args.GetDouble("epsilon");
  if (!epsilon.ok()) return Fail(epsilon.status());
  if (!epsilon->has_value()) return Fail(absl::InvalidArgumentError("--epsilon is required"));
  auto delta = args.GetDouble("delta");
  if (!delta.ok()) return Fail(delta.status());
  if (!delta->has_value()) return Fail(absl::InvalidArgumentError("--delta is required"));
  auto steps = args.Steps();
  if (!steps.ok()) return Fail(steps.status());

  core::AccountantOptions options;
  if (absl::Status s = AccountantFlags(args, name, &options); !s.ok()) return Fail(s);

  auto result = core::CalibrateNoise(*steps, **epsilon, **delta, name, options);
  if (!result.ok()) {
    // Name the flag the core error refers to.
    std::string msg(result.status().message());
    if (msg.rfind("target_epsilon", 0) == 0) msg = "--epsilon: " + msg;
    if (msg.rfind("target_delta", 0) == 0) msg = "--delta: " + msg;
    return Fail(absl::Status(result.status().code(), msg));
  }

  if (args.Has("json")) {
    nlohmann::ordered_json spec_list = nlohmann::ordered_json::array();
    for (const core::MechanismEvent& e : result->events) spec_list.push_back(StepSpec(e));
    nlohmann::ordered_json out = {{"accountant", name},
                                  {"target", {{"epsilon", **epsilon}, {"delta", **delta}}},
                                  {"noise_scale", result->noise_scale},
                                  {"steps", spec_list},
                                  {"epsilon", BoundToJson(result->epsilon)}};
    std::cout << out.dump() << "\n";
  } else {
    PrintTable(name, **epsilon, **delta, *result);
  }
  return 0;
}

}  // namespace dpledger::cli
