#include "server/schedule_plan.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace dpledger::server {
namespace {

constexpr std::string_view kHowToChange =
    "declare the whole plan at job create (--plan SPEC ...), or create the job with "
    "--schedule adaptive to choose mechanisms at run time";

}  // namespace

SchedulePlan::SchedulePlan(std::vector<core::MechanismEvent> entries)
    : entries_(std::move(entries)) {
  int64_t end = 0;
  for (const core::MechanismEvent& e : entries_) ends_.push_back(end += e.count);
}

absl::StatusOr<SchedulePlan> SchedulePlan::Create(std::vector<core::MechanismEvent> plan) {
  if (static_cast<int>(plan.size()) > kMaxPlanEntries) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "plan has %d entries, more than %d", plan.size(), kMaxPlanEntries));
  }
  int64_t total = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const int64_t c = plan[i].count;
    if (c < 1 || c > core::kMaxEventCount) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "plan[%d].count must be in [1, %d], got %d", i, core::kMaxEventCount, c));
    }
    total += c;
    if (total > core::kMaxEventCount) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "plan has more than %d steps in all", core::kMaxEventCount));
    }
  }
  return SchedulePlan(std::move(plan));
}

size_t SchedulePlan::EntryAt(int64_t p) const {
  return static_cast<size_t>(std::upper_bound(ends_.begin(), ends_.end(), p) - ends_.begin());
}

absl::Status SchedulePlan::Check(int64_t ledger_steps, const std::optional<core::Mechanism>& first,
                                 std::span<const core::MechanismEvent> steps) const {
  int64_t p = ledger_steps;  // 0-based position of the next application
  if (implicit()) {
    const core::Mechanism& expect = first ? *first : steps.front().mechanism;
    for (const core::MechanismEvent& s : steps) {
      if (!(s.mechanism == expect)) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "plan position %d: the job declared no plan, so its implicit plan is the first "
            "admitted mechanism (%s) repeated, but this step is %s; %s",
            p + 1, expect.ToSpec(), s.mechanism.ToSpec(), kHowToChange));
      }
      p += s.count;
    }
    return absl::OkStatus();
  }
  for (const core::MechanismEvent& s : steps) {
    int64_t left = s.count;
    while (left > 0) {
      const size_t i = EntryAt(p);
      if (i == entries_.size()) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "plan position %d: the declared plan has %d steps and ends before this step (%s); "
            "%s",
            p + 1, ends_.back(), s.mechanism.ToSpec(), kHowToChange));
      }
      if (!(entries_[i].mechanism == s.mechanism)) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "plan position %d (plan[%d]) expects %s, but this step is %s; steps must follow "
            "the declared plan in order",
            p + 1, i, entries_[i].mechanism.ToSpec(), s.mechanism.ToSpec()));
      }
      const int64_t take = std::min(left, ends_[i] - p);
      p += take;
      left -= take;
    }
  }
  return absl::OkStatus();
}

SchedulePlan::Room SchedulePlan::RoomFor(int64_t ledger_steps,
                                         const std::optional<core::Mechanism>& first,
                                         const core::Mechanism& mechanism) const {
  if (implicit()) {
    if (first && !(*first == mechanism)) {
      return {0, absl::StrFormat("the implicit plan repeats %s only", first->ToSpec())};
    }
    return {core::kMaxEventCount, ""};
  }
  int64_t p = ledger_steps;
  for (size_t i = EntryAt(p); i < entries_.size() && entries_[i].mechanism == mechanism; ++i) {
    p = ends_[i];
  }
  const size_t next = EntryAt(p);
  return {p - ledger_steps,
          next == entries_.size()
              ? absl::StrFormat("the declared plan ends at position %d", ends_.back())
              : absl::StrFormat("plan position %d (plan[%d]) expects %s", p + 1, next,
                                entries_[next].mechanism.ToSpec())};
}

}  // namespace dpledger::server
