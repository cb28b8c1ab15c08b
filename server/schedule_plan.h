// A declared schedule (issue 10): the ordered list of (mechanism, count) a job fixed at
// CreateJob, or the implicit plan "the first admitted mechanism, repeated" when it named
// none. The natural filter and EVR admission are sound only for mechanisms fixed in advance
// (admission_policy.h), so a declared job's steps must follow its plan in order: a step that
// departs from it is refused (FAILED_PRECONDITION class, RefusalKind::kPlan) naming the plan
// position, and changes nothing.
//
// Positions count single applications from 1: the ledger's step n is plan position n.
// Mechanisms match when equal (Mechanism::operator==: same kind and parameters, bit for bit).
// Thread safety: immutable after Create; Check is const.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/mechanisms/mechanism.h"

namespace dpledger::server {

// Most entries a declared plan may have.
inline constexpr int kMaxPlanEntries = 1000;

class SchedulePlan {
 public:
  // An explicit plan (non-empty), or the implicit plan (empty). INVALID_ARGUMENT naming
  // plan[i] for a count outside [1, kMaxEventCount], a total above kMaxEventCount, or more
  // than kMaxPlanEntries entries.
  static absl::StatusOr<SchedulePlan> Create(std::vector<core::MechanismEvent> plan);

  bool implicit() const { return entries_.empty(); }
  std::span<const core::MechanismEvent> entries() const { return entries_; }

  // OK when `steps` may follow a ledger of `ledger_steps` applications whose first mechanism
  // is `first` (nullopt for an empty ledger); else FAILED_PRECONDITION naming the position.
  absl::Status Check(int64_t ledger_steps, const std::optional<core::Mechanism>& first,
                     std::span<const core::MechanismEvent> steps) const;

  // How many applications of `mechanism` may follow such a ledger in a row (0 when the next
  // position expects another mechanism or the plan has ended), with why it stops there.
  struct Room {
    int64_t count = 0;
    std::string limit;  // empty when unlimited (the implicit plan)
  };
  Room RoomFor(int64_t ledger_steps, const std::optional<core::Mechanism>& first,
               const core::Mechanism& mechanism) const;

 private:
  explicit SchedulePlan(std::vector<core::MechanismEvent> entries);
  // Index of the entry holding 0-based position p, or entries_.size() past the end.
  size_t EntryAt(int64_t p) const;

  std::vector<core::MechanismEvent> entries_;
  std::vector<int64_t> ends_;  // ends_[i]: 0-based position just past entry i
};

}  // namespace dpledger::server
