// The ledger service's plain request and response types (no gRPC, no protobuf, no service):
// what server/convert.cc converts to and from the proto API, and what LedgerService takes
// and returns. Field meanings follow proto/dpledger.proto.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "core/accountants/accountant.h"
#include "core/mechanisms/mechanism.h"
#include "server/ledger_types.h"

namespace dpledger::server {

// CreateJob input.
struct JobSpec {
  std::string job_id;
  std::string tenant;                 // empty: the caller's
  double budget_epsilon = 0;
  double budget_delta = 0;
  Neighbouring neighbouring = Neighbouring::kAddRemove;
  std::string accountant;             // empty: options.default_accountant (declared jobs)
  uint64_t mc_seed = 0;
  int64_t mc_num_samples = 0;
  Schedule schedule = Schedule::kDeclared;
  std::vector<core::MechanismEvent> plan;  // declared: empty = the implicit plan
  std::string filter;                 // adaptive: "renyi" (default) or "gdp"
  double rdp_order = 0;               // renyi: 0 = chosen from the budget (and `expected`)
  std::optional<core::Mechanism> expected;  // renyi: the mechanism alpha is chosen for
};

struct JobInfo {
  JobRow row;
  int64_t num_steps = 0;
  int64_t last_seq = 0;
  int64_t num_releases = 0;
  core::EpsilonBound spent;           // epsilon at budget delta by the admission policy
  std::string admission_guarantee;    // what backs admission (AdmissionGuarantee)
  std::string chain_head;             // ledger chain head at last_seq (ledger_chain.h)
};

struct JobPage {
  std::vector<JobInfo> jobs;
  std::string next_page_token;
};

// One update as received.
struct UpdateInput {
  int64_t seq = 0;
  std::vector<core::MechanismEvent> steps;
};

// Why an update was not admitted (proto RefusalKind).
enum class RefusalKind {
  kNone = 0,
  kBudget = 1,
  kPlan = 2,
  kUncertified = 3,
  kStopped = 4,
  kNotAttempted = 5,
  kUnverified = 6,
};
// The label of dpledger_refusals_total{reason} (the proto enum's suffix, lower case).
inline std::string_view RefusalKindName(RefusalKind kind) {
  switch (kind) {
    case RefusalKind::kNone: return "none";
    case RefusalKind::kBudget: return "budget";
    case RefusalKind::kPlan: return "plan";
    case RefusalKind::kUncertified: return "uncertified";
    case RefusalKind::kStopped: return "stopped";
    case RefusalKind::kNotAttempted: return "not_attempted";
    case RefusalKind::kUnverified: return "unverified";
  }
  return "unknown";
}

struct Ack {
  int64_t seq = 0;
  bool admitted = false;
  bool duplicate = false;
  core::EpsilonBound spent;
  std::optional<core::EpsilonBound> candidate;
  int64_t num_steps = 0;
  int64_t last_seq = 0;
  std::string refusal_reason;
  RefusalKind refusal_kind = RefusalKind::kNone;
  absl::Status error;                 // streams: a per-update error; the ack is otherwise empty
  std::string accountant;
  double budget_epsilon = 0;
  double budget_delta = 0;
  std::string admission_guarantee;
  std::string chain_head;             // ledger chain head at last_seq (ledger_chain.h)
};

struct SpentQuery {
  std::optional<double> delta;        // exactly one of delta / epsilon
  std::optional<double> epsilon;
  std::string accountant;             // empty: the job's admitting accountant
  double pld_precision = 0;           // pld: the interval's target relative width (0: default)
  // The caller's remaining deadline, seconds (0: none): the answer stops there with
  // DEADLINE_EXCEEDED (a Monte Carlo answer stops growing, keeping its pool's progress), as
  // at the server's --query-max-seconds.
  double max_seconds = 0;
};

struct SpentAnswer {
  std::string accountant;
  std::optional<core::EpsilonBound> epsilon;  // for a delta query
  std::optional<core::DeltaBound> delta;      // for an epsilon query
  int64_t num_steps = 0;
  int64_t last_seq = 0;
  std::vector<core::AnswerDiagnostic> diagnostics;  // of a computed answer (not the cached one)
  std::string admission_guarantee;
  bool realised_curve = false;  // another accountant's curve, not what admission rests on
};

struct RemainingAnswer {
  int64_t max_additional_steps = 0;
  core::EpsilonBound spent;
  core::EpsilonBound spent_at_max;
  double budget_epsilon = 0;
  double budget_delta = 0;
  std::string accountant;
  std::string reason;  // what limits max_additional_steps
};

struct ReleaseInput {
  std::string job_id;
  std::string tenant;
  std::string payload;
  double epsilon = 0;
  double delta_est = 0;
  double tau = 0;        // 0: 0.99
  double rho = 0;        // 0: (1 + tau) / 2
  std::string request_id;
  int64_t max_samples = 0;
};

struct LedgerPage {
  std::vector<UpdateRow> entries;
  bool more = false;
};

}  // namespace dpledger::server
