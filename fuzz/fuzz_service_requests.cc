// Fuzz target: requests into the ledger service, as dpledgerd's gRPC handlers pass them on:
// a sequence of CreateJob, AppendSteps, StreamSteps, Spent, Remaining, Release, GetLedger and
// CloseJob requests, each a proto message either built field by field from the input (edge
// values included, see fuzz_values.h) or parsed from raw input bytes, converted by
// server/convert.h and handed to a LedgerService over a MemoryStore, the same path as
// grpc_service.cc without the socket. Checked: no crash or hang, and the store's ledger stays
// consistent (CheckLedgerConsistency: contiguous seqs, decodable steps, no charged upper
// bound above the budget) after every sequence.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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

std::string JobId(FuzzedDataProvider& in) {
  static constexpr std::string_view kIds[] = {"j1", "j2", "", "bad id"};
  return in.ConsumeIntegralInRange<int>(0, 7) != 0 ? std::string(kIds[in.ConsumeBool()])
                                                   : fuzz::SmallString(in);
}

// Parses a raw chunk into `m` (any bytes, as a client could send) or leaves it to be built.
template <typename Message>
bool FromRawBytes(FuzzedDataProvider& in, Message& m) {
  if (in.ConsumeIntegralInRange<int>(0, 7) != 0) return false;
  (void)m.ParseFromString(in.ConsumeRandomLengthString(256));
  return true;
}

void FillStep(FuzzedDataProvider& in, v1::Step& step) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: step.set_spec(fuzz::SmallString(in, 64)); break;
    case 1: {
      absl::StatusOr<core::Mechanism> m = fuzz::EdgeMechanism(in);
      if (m.ok()) *step.mutable_mechanism() = MechanismToProto(*m);
      break;
    }
    default: {
      v1::Mechanism& m = *step.mutable_mechanism();
      m.set_kind(static_cast<v1::MechanismKind>(in.ConsumeIntegralInRange<int>(0, 8)));
      m.set_sigma(fuzz::EdgeDouble(in));
      m.set_scale(fuzz::EdgeDouble(in));
      if (in.ConsumeBool()) m.set_sensitivity(fuzz::EdgeDouble(in));
      if (in.ConsumeBool()) m.set_sampling_rate(fuzz::EdgeProbability(in));
      m.set_truth_probability(fuzz::EdgeProbability(in));
      m.set_epsilon(fuzz::EdgeDouble(in));
      m.set_delta(fuzz::EdgeProbability(in));
    }
  }
  step.set_count(in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(0, 100)
                                  : fuzz::EdgeCount(in));
}

void FillUpdate(FuzzedDataProvider& in, int64_t* next_seq, v1::StepUpdate& u) {
  u.set_seq(in.ConsumeIntegralInRange<int>(0, 7) != 0 ? (*next_seq)++ : fuzz::EdgeCount(in));
  const int n = in.ConsumeIntegralInRange<int>(0, 3);
  for (int i = 0; i < n; ++i) FillStep(in, *u.add_steps());
}

void CreateJob(FuzzedDataProvider& in, LedgerService& service, const Caller& caller) {
  static constexpr std::string_view kAccountants[] = {"", "pld", "rdp", "analytic", "spa",
                                                      "edgeworth", "mc", "evr"};
  v1::CreateJobRequest req;
  if (!FromRawBytes(in, req)) {
    req.set_job_id(JobId(in));
    req.mutable_budget()->set_epsilon(in.ConsumeBool() ? 8.0 : fuzz::EdgeDouble(in));
    req.mutable_budget()->set_delta(in.ConsumeBool() ? 1e-5 : fuzz::EdgeProbability(in));
    req.set_neighbouring(
        static_cast<v1::NeighbouringRelation>(in.ConsumeIntegralInRange<int>(0, 3)));
    req.set_accountant(in.ConsumeBool() ? std::string(in.PickValueInArray(kAccountants))
                                        : fuzz::SmallString(in));
    if (in.ConsumeBool()) {
      req.mutable_mc()->set_seed(in.ConsumeIntegral<uint64_t>());
      req.mutable_mc()->set_num_samples(fuzz::EdgeCount(in));
    }
    req.set_schedule(static_cast<v1::Schedule>(in.ConsumeIntegralInRange<int>(0, 3)));
    const int plan = in.ConsumeIntegralInRange<int>(0, 2);
    for (int i = 0; i < plan; ++i) FillStep(in, *req.add_plan());
    if (in.ConsumeBool()) req.set_filter(in.ConsumeBool() ? "gdp" : fuzz::SmallString(in, 8));
    if (in.ConsumeBool()) req.set_rdp_order(fuzz::EdgeDouble(in));
    if (in.ConsumeBool()) FillStep(in, *req.mutable_expected_step());
  }
  absl::StatusOr<JobSpec> spec = JobSpecFromProto(req);
  if (spec.ok()) (void)service.CreateJob(caller, *spec);
}

void AppendSteps(FuzzedDataProvider& in, LedgerService& service, const Caller& caller,
                 int64_t* next_seq) {
  v1::AppendStepsRequest req;
  if (!FromRawBytes(in, req)) {
    req.set_job_id(JobId(in));
    const int n = in.ConsumeIntegralInRange<int>(1, 3);
    for (int i = 0; i < n; ++i) FillUpdate(in, next_seq, *req.add_updates());
  }
  if (req.updates_size() > service.options().max_updates_per_request) return;
  std::vector<UpdateInput> updates;
  for (int i = 0; i < req.updates_size(); ++i) {
    absl::StatusOr<UpdateInput> u = UpdateFromProto(req.updates(i), "updates");
    if (!u.ok()) return;  // the handler refuses the whole request
    updates.push_back(*std::move(u));
  }
  (void)service.AppendSteps(caller, req.tenant(), req.job_id(), updates);
}

void StreamSteps(FuzzedDataProvider& in, LedgerService& service, const Caller& caller,
                 int64_t* next_seq) {
  absl::StatusOr<std::unique_ptr<LedgerService::StepStream>> stream =
      service.OpenStream(caller, "", JobId(in));
  if (!stream.ok()) return;
  const int groups = in.ConsumeIntegralInRange<int>(1, 3);
  for (int g = 0; g < groups; ++g) {
    std::vector<absl::StatusOr<UpdateInput>> items;
    const int n = in.ConsumeIntegralInRange<int>(1, 4);
    for (int i = 0; i < n; ++i) {
      v1::StreamStepsRequest req;
      if (!FromRawBytes(in, req)) FillUpdate(in, next_seq, *req.mutable_update());
      items.push_back(UpdateFromProto(req.update(), "update"));
    }
    for (const PendingAck& ack : (*stream)->Submit(std::move(items))) (void)ack.Wait();
  }
}

void Spent(FuzzedDataProvider& in, LedgerService& service, const Caller& caller) {
  v1::SpentRequest req;
  if (!FromRawBytes(in, req)) {
    req.set_job_id(JobId(in));
    if (in.ConsumeBool()) {
      req.set_delta(fuzz::EdgeProbability(in));
    } else {
      req.set_epsilon(fuzz::EdgeDouble(in));
    }
    if (in.ConsumeBool()) req.set_accountant(in.ConsumeBool() ? "rdp" : fuzz::SmallString(in));
    if (in.ConsumeBool()) req.set_pld_precision(fuzz::EdgeDouble(in));
  }
  absl::StatusOr<SpentQuery> query = SpentQueryFromProto(req);
  if (query.ok()) (void)service.Spent(caller, req.tenant(), req.job_id(), *query);
}

void Remaining(FuzzedDataProvider& in, LedgerService& service, const Caller& caller) {
  v1::RemainingRequest req;
  if (!FromRawBytes(in, req)) {
    req.set_job_id(JobId(in));
    FillStep(in, *req.mutable_step());
  }
  absl::StatusOr<core::MechanismEvent> step = StepFromProto(req.step(), "step");
  if (step.ok()) (void)service.Remaining(caller, req.tenant(), req.job_id(), step->mechanism);
}

void Release(FuzzedDataProvider& in, LedgerService& service, const Caller& caller) {
  v1::ReleaseRequest req;
  if (!FromRawBytes(in, req)) {
    req.set_job_id(JobId(in));
    req.set_payload(fuzz::SmallString(in, 32));
    req.set_epsilon(fuzz::EdgeDouble(in));
    req.set_delta_est(fuzz::EdgeProbability(in));
    if (in.ConsumeBool()) req.set_tau(fuzz::EdgeProbability(in));
    if (in.ConsumeBool()) req.set_rho(fuzz::EdgeProbability(in));
    if (in.ConsumeBool()) req.set_request_id(fuzz::SmallString(in, 8));
    req.set_max_samples(in.ConsumeBool() ? 0 : fuzz::EdgeCount(in));
  }
  (void)service.Release(caller, ReleaseInputFromProto(req));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  MemoryStore store;
  LedgerOptions options;
  options.query_max_seconds = kCapSeconds;
  options.release_use_mc = false;  // the certified fallback: Monte Carlo is bench/ material
  options.release_mc_max_seconds = kCapSeconds;
  options.accountant_options.mc.max_samples = 1 << 12;
  options.accountant_options.mc.max_seconds = kCapSeconds;
  options.accountant_options.pld.relative_accuracy = 0.05;  // coarse grids: more executions
  options.accountant_options.pld.max_refinements = 1;
  options.max_updates_per_request = 8;
  {
    LedgerService service(&store, options);
    const Caller caller = Caller::Insecure();
    int64_t next_seq = 1;
    const int ops = in.ConsumeIntegralInRange<int>(1, 12);
    for (int i = 0; i < ops && in.remaining_bytes() > 0; ++i) {
      switch (in.ConsumeIntegralInRange<int>(0, 7)) {
        case 0: CreateJob(in, service, caller); break;
        case 1: AppendSteps(in, service, caller, &next_seq); break;
        case 2: StreamSteps(in, service, caller, &next_seq); break;
        case 3: Spent(in, service, caller); break;
        case 4: Remaining(in, service, caller); break;
        case 5: Release(in, service, caller); break;
        case 6: (void)service.GetLedger(caller, "", JobId(in), fuzz::EdgeCount(in), 10); break;
        default: (void)service.CloseJob(caller, "", JobId(in)); break;
      }
    }
  }
  DPL_CHECK_OK(CheckLedgerConsistency(store));
  return 0;
}
