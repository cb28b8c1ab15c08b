// Fuzz target: stored ledger rows, as a damaged or tampered database could hand them back.
// A job row (budget, accountant, schedule, filter, plan text, ...) and its update rows (step
// text, stored spent bounds, running step counts, chain heads, valid or not) go into a
// MemoryStore, then everything that decodes what a store returns runs over them: the
// start-up checks (CheckLedgerConsistency, then ReplaySpent, as dpledgerd does), the ledger
// read (LedgerEntryToProto), and a LedgerService loading the job to answer GetJob and Spent
// and to admit one more step. Damage must come back as a status (DATA_LOSS naming the job),
// never as a crash or a hang.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/registry/accountant_registry.h"
#include "core/util/check.h"
#include "fuzz/fuzz_values.h"
#include "server/convert.h"
#include "server/ledger_check.h"
#include "server/ledger_service.h"
#include "server/memory_store.h"

using namespace dpledger;
using namespace dpledger::server;

namespace {

constexpr double kCapSeconds = 0.25;

std::string StepsText(FuzzedDataProvider& in) {
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) return fuzz::SmallString(in, 80);
  std::vector<core::MechanismEvent> steps;
  const int n = in.ConsumeIntegralInRange<int>(0, 3);
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<core::Mechanism> m = fuzz::EdgeMechanism(in);
    const int64_t count = in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(1, 100)
                                           : fuzz::EdgeCount(in);
    if (m.ok()) steps.push_back({*m, count});
  }
  return CanonicalSteps(steps);
}

core::EpsilonBound StoredBound(FuzzedDataProvider& in) {
  core::EpsilonBound b;
  b.lower = fuzz::EdgeDouble(in);
  b.estimate = fuzz::EdgeDouble(in);
  b.upper = fuzz::EdgeDouble(in);
  b.guarantee = static_cast<core::Guarantee>(in.ConsumeIntegralInRange<int>(0, 2));
  b.failure_probability = fuzz::EdgeProbability(in);
  return b;
}

JobRow FuzzJob(FuzzedDataProvider& in) {
  static constexpr std::string_view kAccountants[] = {"pld", "rdp", "analytic", "spa",
                                                      "edgeworth", "mc", "evr", ""};
  JobRow job;
  job.key = {"default", "job"};
  job.budget_epsilon = fuzz::EdgeDouble(in);
  job.budget_delta = fuzz::EdgeProbability(in);
  job.neighbouring = static_cast<Neighbouring>(in.ConsumeIntegralInRange<int>(1, 2));
  job.accountant = in.ConsumeBool() ? std::string(in.PickValueInArray(kAccountants))
                                    : fuzz::SmallString(in);
  job.mc_seed = in.ConsumeIntegral<uint64_t>();
  job.mc_num_samples = in.ConsumeBool() ? 0 : fuzz::EdgeCount(in);
  job.evr_state = static_cast<EvrState>(in.ConsumeIntegralInRange<int>(0, 2));
  job.schedule = static_cast<Schedule>(in.ConsumeIntegralInRange<int>(1, 2));
  job.admission = static_cast<AdmissionKind>(in.ConsumeIntegralInRange<int>(1, 4));
  job.plan = in.ConsumeBool() ? std::string() : StepsText(in);
  job.rdp_order = fuzz::EdgeDouble(in);
  return job;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  MemoryStore store;
  const JobRow job = FuzzJob(in);
  {
    WriteBatch b;
    b.new_jobs.push_back(job);
    DPL_CHECK_OK(store.Apply(b));
  }
  std::string head = ChainGenesis(job);
  int64_t num_steps = 0;
  const int num_updates = in.ConsumeIntegralInRange<int>(0, 6);
  for (int seq = 1; seq <= num_updates; ++seq) {
    UpdateRow u;
    u.key = job.key;
    u.seq = seq;
    u.steps = StepsText(in);
    u.spent = StoredBound(in);
    absl::StatusOr<std::vector<core::MechanismEvent>> steps = ParseCanonicalSteps(u.steps);
    if (steps.ok()) {
      for (const core::MechanismEvent& e : *steps) num_steps += e.count;  // counts <= 2^40
    }
    u.num_steps_after = in.ConsumeBool() ? num_steps : fuzz::EdgeCount(in);
    u.commit_time_ms = in.ConsumeIntegral<int64_t>();
    u.chain = in.ConsumeBool() ? ChainUpdate(head, u) : fuzz::SmallString(in, 64);
    head = u.chain;
    WriteBatch b;
    b.updates.push_back(u);
    DPL_CHECK_OK(store.Apply(b));
    (void)LedgerEntryToProto(u);
  }

  LedgerOptions options;
  options.query_max_seconds = kCapSeconds;
  options.release_use_mc = false;
  options.accountant_options.mc.max_samples = 1 << 12;
  options.accountant_options.mc.max_seconds = kCapSeconds;
  options.accountant_options.pld.relative_accuracy = 0.05;  // coarse grids: more executions
  options.accountant_options.pld.max_refinements = 1;
  LedgerService service(&store, options);
  if (CheckLedgerConsistency(store).ok()) {
    (void)ReplaySpent(store, [&](const JobRow& row) { return service.PolicyOptionsFor(row); });
  }
  const Caller caller = Caller::Insecure();
  (void)service.GetJob(caller, "", "job");
  (void)service.GetLedger(caller, "", "job", 0, 100);
  SpentQuery query;
  query.delta = 1e-6;
  (void)service.Spent(caller, "", "job", query);
  if (in.ConsumeBool()) {  // admission is not time-capped: one PLD admission can take seconds
    absl::StatusOr<core::Mechanism> next = core::Mechanism::SubsampledGaussian(1.0, 0.01);
    DPL_CHECK(next.ok());
    (void)service.AppendSteps(caller, "", "job", {UpdateInput{num_updates + 1, {{*next, 1}}}});
  }
  return 0;
}
