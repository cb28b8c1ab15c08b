#include "core/accountants/accountant.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace dpledger::core {

std::string_view GuaranteeName(Guarantee g) {
  switch (g) {
    case Guarantee::kCertified: return "certified";
    case Guarantee::kStatistical: return "statistical";
    case Guarantee::kEstimate: return "estimate";
  }
  return "unknown";
}

std::string UncertifiedReason(const Accountant& acc) {
  for (const AnswerDiagnostic& d : acc.LastDiagnostics()) {
    if (d.name == kUncertifiedReason && std::holds_alternative<std::string>(d.value)) {
      return std::get<std::string>(d.value);
    }
  }
  return {};
}

namespace {

// A last line of defence for every accountant (issue 11): an answer with a NaN or
// with lower > upper is refused rather than charged. +inf upper ends are allowed
// (uncertified estimates report them).
template <typename Bound>
absl::StatusOr<Bound> Sane(absl::StatusOr<Bound> b, std::string_view accountant,
                           std::string_view query) {
  if (!b.ok()) return b;
  if (std::isnan(b->lower) || std::isnan(b->estimate) || std::isnan(b->upper) ||
      b->lower > b->upper) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the %s accountant cannot handle this ledger at %s: its answer [%g, %g] (estimate %g) "
        "is not a valid interval in double precision; use the pld accountant",
        std::string(accountant), std::string(query), b->lower, b->upper, b->estimate));
  }
  return b;
}

}  // namespace

absl::Status Accountant::Compose(const Mechanism& mechanism, int64_t count) {
  if (count < 1 || count > kMaxEventCount) {
    return absl::InvalidArgumentError(
        absl::StrFormat("count must be in [1, %d], got %d", kMaxEventCount, count));
  }
  if (num_steps_ > kMaxEventCount * 1024 - count) {
    return absl::InvalidArgumentError("ledger too long: total count would overflow");
  }
  deadline_ = Deadline::In(query_time_cap_);
  if (absl::Status s = CheckSupported(mechanism); !s.ok()) return s;
  if (!events_.empty() && events_.back().mechanism == mechanism) {
    events_.back().count += count;
  } else {
    events_.push_back({mechanism, count});
  }
  num_steps_ += count;
  OnLedgerChanged();
  return absl::OkStatus();
}

absl::StatusOr<EpsilonBound> Accountant::EpsilonForDelta(double delta) const {
  if (!std::isfinite(delta) || delta < kMinQueryDelta || delta >= 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("delta must be in [%g, 1), got %g", kMinQueryDelta, delta));
  }
  if (events_.empty()) return EpsilonBound{0, 0, 0, Guarantee::kCertified, 0};
  deadline_ = Deadline::In(query_time_cap_);
  return Sane(ComputeEpsilon(delta), Name(), absl::StrFormat("delta=%g", delta));
}

absl::StatusOr<DeltaBound> Accountant::DeltaForEpsilon(double epsilon) const {
  if (!std::isfinite(epsilon) || epsilon < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("epsilon must be a finite number >= 0, got %g", epsilon));
  }
  if (events_.empty()) return DeltaBound{0, 0, 0, Guarantee::kCertified, 0};
  deadline_ = Deadline::In(query_time_cap_);
  return Sane(ComputeDelta(epsilon), Name(), absl::StrFormat("epsilon=%g", epsilon));
}

}  // namespace dpledger::core
