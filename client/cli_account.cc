// `dpledger account`: offline accounting of a ledger given as --step specs.
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "absl/strings/str_format.h"
#include "client/cli_accountant_flags.h"
#include "client/cli_commands.h"
#include "client/cli_output.h"
#include "core/registry/accountant_registry.h"

namespace dpledger::cli {
namespace {

void PrintTable(const std::string& accountant, const std::string& query_name, double query,
                const std::string& result_name, double lower, double estimate, double upper,
                core::Guarantee guarantee, int64_t num_steps) {
  std::printf("accountant  %s\n", accountant.c_str());
  std::printf("steps       %lld\n", static_cast<long long>(num_steps));
  std::printf("%-11s %.6g\n", query_name.c_str(), query);
  std::printf("%-11s %.6g  [%.6g, %.6g]  (%s)\n", result_name.c_str(), estimate, lower, upper,
              std::string(core::GuaranteeName(guarantee)).c_str());
}

void PrintDiagnostics(const core::Accountant& accountant) {
  for (const core::AnswerDiagnostic& d : accountant.LastDiagnostics()) {
    if (const double* v = std::get_if<double>(&d.value)) {
      std::printf("  %-24s %.6g\n", d.name.c_str(), *v);
    } else {
      std::printf("  %-24s %s\n", d.name.c_str(), std::get<std::string>(d.value).c_str());
    }
  }
}

}  // namespace

int RunAccount(const Args& args) {
  if (auto s = args.CheckKnown(WithAccountantFlags({"accountant", "epsilon", "delta", "step", "json"}));
      !s.ok()) {
    return Fail(s);
  }
  const std::string name = args.Get("accountant").value_or("pld");
  auto epsilon = args.GetDouble("epsilon");
  if (!epsilon.ok()) return Fail(epsilon.status());
  auto delta = args.GetDouble("delta");
  if (!delta.ok()) return Fail(delta.status());
  if (epsilon->has_value() == delta->has_value()) {
    return Fail(absl::InvalidArgumentError("give exactly one of --epsilon or --delta"));
  }
  auto steps = args.Steps();
  if (!steps.ok()) return Fail(steps.status());

  core::AccountantOptions options;
  if (absl::Status s = AccountantFlags(args, name, &options); !s.ok()) return Fail(s);

  auto accountant = core::CreateAccountant(name, options);
  if (!accountant.ok()) return Fail(accountant.status());
  for (const core::MechanismEvent& e : *steps) {
    if (auto s = (*accountant)->Compose(e); !s.ok()) return Fail(s);
  }

  const bool json = args.Has("json");
  if (delta->has_value()) {
    auto b = (*accountant)->EpsilonForDelta(**delta);
    if (!b.ok()) return Fail(b.status());
    if (json) {
      nlohmann::ordered_json out = {{"accountant", name},
                            {"query", {{"delta", **delta}}},
                            {"num_steps", (*accountant)->num_steps()},
                            {"epsilon", BoundToJson(*b)}};
      AddDiagnostics(**accountant, &out);
      std::cout << out.dump() << "\n";
    } else {
      PrintTable(name, "delta", **delta, "epsilon", b->lower, b->estimate, b->upper, b->guarantee,
                 (*accountant)->num_steps());
      PrintDiagnostics(**accountant);
    }
  } else {
    auto b = (*accountant)->DeltaForEpsilon(**epsilon);
    if (!b.ok()) return Fail(b.status());
    if (json) {
      nlohmann::ordered_json out = {{"accountant", name},
                            {"query", {{"epsilon", **epsilon}}},
                            {"num_steps", (*accountant)->num_steps()},
                            {"delta", BoundToJson(*b)}};
      AddDiagnostics(**accountant, &out);
      std::cout << out.dump() << "\n";
    } else {
      PrintTable(name, "epsilon", **epsilon, "delta", b->lower, b->estimate, b->upper,
                 b->guarantee, (*accountant)->num_steps());
      PrintDiagnostics(**accountant);
    }
  }
  return 0;
}

}  // namespace dpledger::cli
