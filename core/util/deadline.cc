#include "core/util/deadline.h"

#include <cmath>
#include <string>

#include "absl/strings/str_format.h"

namespace dpledger::core {

Deadline Deadline::In(double seconds) {
  Deadline d;
  if (!(seconds > 0) || !std::isfinite(seconds)) return d;
  d.cap_seconds_ = seconds;
  d.start_ = Clock::now();
  d.at_ = d.start_ + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(seconds));
  return d;
}

double Deadline::Elapsed() const {
  if (!is_set()) return 0;
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

absl::Status Deadline::Check(std::string_view what) const {
  if (!Expired()) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrFormat(
      "%s: stopped at the query time cap of %g s (after %.3g s); ask with a longer "
      "deadline, or use a faster accountant",
      std::string(what), cap_seconds_, Elapsed()));
}

}  // namespace dpledger::core
