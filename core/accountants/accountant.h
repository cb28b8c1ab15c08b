// The accountant interface: compose mechanisms into a ledger, then ask
// delta(epsilon) or epsilon(delta). Every answer is an interval plus what kind of
// guarantee it carries; only certified (or EVR-verified) upper bounds may be
// charged against a budget.
//
// Thread safety: an Accountant is not thread-safe; callers serialise access
// (the server holds one per job under the job's lock). Queries may fill caches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/mechanisms/mechanism.h"
#include "core/util/deadline.h"

namespace dpledger::core {

enum class Guarantee {
  kCertified,    // a proven bound: the truth lies in [lower, upper]
  kStatistical,  // holds except with probability failure_probability (EVR)
  kEstimate,     // a point estimate with no guarantee (MC, SPA/Edgeworth estimates)
};
std::string_view GuaranteeName(Guarantee g);  // "certified", "statistical", "estimate"

struct EpsilonBound {
  double lower = 0, estimate = 0, upper = 0;  // nats; budgets are charged with `upper`
  Guarantee guarantee = Guarantee::kEstimate;
  double failure_probability = 0;             // when kStatistical
};

struct DeltaBound {
  double lower = 0, estimate = 0, upper = 0;
  Guarantee guarantee = Guarantee::kEstimate;
  double failure_probability = 0;
};

// One named figure about how an answer was reached: a number or a word.
struct AnswerDiagnostic {
  std::string name;
  std::variant<double, std::string> value;
};

// The diagnostic naming why the last answer is only an estimate, in the
// accountant's own words (e.g. Edgeworth: which finite-sample error bounds are too
// wide), so that certified-only uses (step admission, the certified release
// fallback) can say why they refuse it.
inline constexpr std::string_view kUncertifiedReason = "uncertified_reason";

// Smallest delta any query accepts: far below every practical target, far above
// the double-precision floor so log-space code keeps its digits.
inline constexpr double kMinQueryDelta = 1e-300;

class Accountant {
 public:
  virtual ~Accountant() = default;

  virtual std::string_view Name() const = 0;  // "analytic", "rdp", "pld", ...

  // Appends `count` applications of `mechanism` to the ledger. UNIMPLEMENTED when
  // this accountant cannot handle the mechanism; the ledger is then unchanged.
  absl::Status Compose(const Mechanism& mechanism, int64_t count);
  absl::Status Compose(const MechanismEvent& event) {
    return Compose(event.mechanism, event.count);
  }

  // delta in (0, 1): epsilon such that the ledger is (epsilon, delta)-DP.
  // Input errors are INVALID_ARGUMENT naming `delta`/`epsilon`.
  absl::StatusOr<EpsilonBound> EpsilonForDelta(double delta) const;
  // epsilon >= 0: the smallest delta with (epsilon, delta)-DP.
  absl::StatusOr<DeltaBound> DeltaForEpsilon(double epsilon) const;

  // A copy with the same ledger (used to test admission of a step before charging).
  virtual std::unique_ptr<Accountant> Clone() const = 0;

  // How the last answer was reached, for reports and logs (e.g. the MC
  // accountant's sample count, backend and relative standard error). Empty by
  // default; never part of the answer itself.
  virtual std::vector<AnswerDiagnostic> LastDiagnostics() const { return {}; }

  // The most wall time, in seconds, each following Compose / EpsilonForDelta /
  // DeltaForEpsilon may spend (0 or less: no cap). Every accountant checks it in its
  // long work (grid refinements, searches, quadrature, pool builds) and returns
  // DEADLINE_EXCEEDED naming what it stopped (the ledger unchanged for Compose)
  // when the cap passes; the MC accountant instead stops growing its pools and
  // answers with the larger error (core/mc/mc_accountant.h max_seconds); PLD keeps
  // the last grid's certified interval when a finer one is cut short. The analytic
  // accountant's work is O(1) per call. The cap restarts with each call; Clone
  // copies it.
  virtual void SetQueryTimeCap(double seconds) { query_time_cap_ = seconds; }
  double query_time_cap() const { return query_time_cap_; }

  // Bytes held in caches that are worth keeping between queries (the MC
  // accountant's sample pools); 0 for accountants whose state is cheap to rebuild.
  virtual size_t CacheBytes() const { return 0; }

  // The ledger: consecutive events with the same mechanism are merged.
  std::span<const MechanismEvent> events() const { return events_; }
  int64_t num_steps() const { return num_steps_; }

 protected:
  // OK when this accountant handles `mechanism`, else UNIMPLEMENTED with why.
  virtual absl::Status CheckSupported(const Mechanism& mechanism) const = 0;
  // Called after events() changed; drop caches here.
  virtual void OnLedgerChanged() {}
  // Called only with a non-empty ledger and validated arguments.
  virtual absl::StatusOr<EpsilonBound> ComputeEpsilon(double delta) const = 0;
  virtual absl::StatusOr<DeltaBound> ComputeDelta(double epsilon) const = 0;

  // The deadline of the call in progress (started from the query time cap when
  // Compose, EpsilonForDelta or DeltaForEpsilon was entered).
  const Deadline& deadline() const { return deadline_; }

 private:
  double query_time_cap_ = 0;
  mutable Deadline deadline_;
  std::vector<MechanismEvent> events_;
  int64_t num_steps_ = 0;
};

// The kUncertifiedReason diagnostic of acc's last answer; empty when it has none.
std::string UncertifiedReason(const Accountant& acc);

}  // namespace dpledger::core
