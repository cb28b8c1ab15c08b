// Admission as a type (issue 10): the privacy filter that decides which new updates of a job
// are admitted, chosen once per job from its stored configuration (schedule, admission) and
// never from what its steps turn out to be.
//
//   kind     schedule   filter                                          soundness argument
//   natural  declared   a certifying accountant over the realised ledger   filter_policy.h
//   gdp      adaptive   sum of mu_i^2 against the budget's mu_B           filter_policy.h
//   renyi    adaptive   sum of RDP at one fixed order alpha               filter_policy.h
//   evr      declared   the EVR verifier over the realised ledger         evr_admission.h
//
// A policy holds the admitted ledger (an accountant composed over it) and the bound at the
// budget delta after it. Admit never changes the policy: it returns the state after the
// admitted prefix as a new policy, which the caller installs once the updates are committed.
// Thread safety: none; the ledger service holds one per job under the job's lock.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/accountants/accountant.h"
#include "core/registry/accountant_registry.h"
#include "server/committer.h"
#include "server/evr_admission.h"
#include "server/ledger_api.h"
#include "server/ledger_types.h"
#include "server/metrics.h"

namespace dpledger::server {

using UpdateSteps = std::vector<core::MechanismEvent>;

// What Admit decided for a run of new updates.
struct AdmitDecision {
  int admitted = 0;              // the first `admitted` updates are admitted
  core::EpsilonBound after;      // the bound at the budget delta after them (admitted > 0)
  // Update `admitted`, when the run has one: refused (refusal_kind/reason, candidate: its
  // bound when known) or, when `error` is set, an error of that update (e.g. UNIMPLEMENTED
  // for a mechanism the filter cannot bound); either way nothing after it is attempted.
  RefusalKind refusal_kind = RefusalKind::kNone;
  std::string refusal_reason;
  std::optional<core::EpsilonBound> candidate;
  absl::Status error;
  std::unique_ptr<class AdmissionPolicy> next;  // the policy over the admitted ledger
  bool evr_idle_with_updates = false;  // evr: the batch must return the job to kIdle
};

// What a policy may do beyond computing: evr's durable marks (evr_admission.h).
struct AdmitContext {
  const JobRow& job;
  int64_t last_seq = 0;
  // Records the job's evr state durably behind its earlier writes; the ticket is the job's
  // newest commit (acks wait for it).
  std::function<CommitTicketPtr(EvrState, std::string)> mark_evr;
  Metrics* metrics = nullptr;
  // Wall seconds the judging may take (the caller's deadline, capped by the server's
  // --query-max-seconds; 0: no cap). Past it Admit fails DEADLINE_EXCEEDED and admits
  // nothing (EVR verification keeps its own cap, evr_admission.h).
  double max_seconds = 0;
};

class AdmissionPolicy {
 public:
  virtual ~AdmissionPolicy() = default;

  virtual AdmissionKind kind() const = 0;
  // What backs admission, for acks, Spent and job get (e.g. "renyi filter at order 8.5").
  virtual const std::string& guarantee() const = 0;
  // The name that answers the job's own Spent queries ("pld", "renyi", "gdp", "mc" for evr).
  virtual std::string_view answering_accountant() const = 0;
  // The admitted ledger and the bound at the budget delta after it.
  virtual const core::Accountant& ledger() const = 0;
  virtual const core::EpsilonBound& spent() const = 0;

  // The longest admissible prefix of `run` (new updates in seq order, none empty).
  virtual absl::StatusOr<AdmitDecision> Admit(std::span<const UpdateSteps> run,
                                              const AdmitContext& ctx) const = 0;
  // Appends updates admitted elsewhere (another replica, found in the shared store):
  // `steps` in order, `stored_spent` the bound stored with the last of them. They were
  // judged when admitted, so they are composed, not judged again.
  virtual absl::Status Extend(std::span<const core::MechanismEvent> steps,
                              const core::EpsilonBound& stored_spent) = 0;
  // How many more applications of `mechanism` would be admitted now. max_seconds > 0 caps
  // the search (DEADLINE_EXCEEDED).
  virtual absl::StatusOr<RemainingAnswer> Remaining(const core::Mechanism& mechanism,
                                                    double max_seconds) const = 0;
  // Adaptive filters: delta(epsilon) on the curve their theorem gives the whole run at the
  // budget (any stopping time, any future steps), certified; a release is checked against
  // it. nullopt for declared schedules, whose releases verify the realised ledger.
  virtual std::optional<double> BudgetCurveDelta(double /*epsilon*/) const { return std::nullopt; }
  // An accountant over the admitted ledger for the job's own queries at other targets.
  virtual std::unique_ptr<core::Accountant> QueryAccountant() const { return ledger().Clone(); }
  virtual std::unique_ptr<AdmissionPolicy> Clone() const = 0;
  size_t CacheBytes() const { return ledger().CacheBytes(); }
  // Heap bytes the policy holds, for the job cache's cap: its accountant's caches, its
  // ledger of merged events and a fixed allowance for the objects themselves.
  size_t MemoryBytes() const {
    return CacheBytes() + ledger().events().size() * sizeof(core::MechanismEvent) + 2048;
  }
};

// What backs a job's admission, from its configuration alone (acks, Spent, job get/list):
// "natural filter over a declared schedule (pld)", "gdp filter", "renyi filter at order 8",
// "evr".
std::string AdmissionGuarantee(const JobRow& job);

// What a policy needs beyond the job row.
struct PolicyOptions {
  core::AccountantOptions accountant_options;  // the job's mc seed/samples already applied
  EvrAdmissionOptions evr;
};

// The job's policy over its stored ledger (`ledger`: its admitted steps in order).
// `stored_spent` is the spent bound stored with the last update (evr jobs report it; the
// others recompute theirs). Errors: an accountant that cannot replay the ledger
// (UNIMPLEMENTED, DATA_LOSS) or a stored configuration that is invalid (DATA_LOSS).
absl::StatusOr<std::unique_ptr<AdmissionPolicy>> CreateAdmissionPolicy(
    const JobRow& job, const PolicyOptions& options,
    std::span<const core::MechanismEvent> ledger,
    const std::optional<core::EpsilonBound>& stored_spent);

// The largest n in [0, n_max] with fits(n) (fits(0) is taken as true): with try_max_first,
// n_max first (one call when a whole group fits); then doubling from 1 and bisection, O(log n)
// calls. Exact when fits is monotone; otherwise some n with fits(n) and !fits(n + 1), or
// n_max. An error from fits stops the search. The one budget-fit search of admission and
// Remaining.
absl::StatusOr<int64_t> LargestFitting(int64_t n_max,
                                       const std::function<absl::StatusOr<bool>(int64_t)>& fits,
                                       bool try_max_first = true);

}  // namespace dpledger::server
