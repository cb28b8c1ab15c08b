#include "server/store.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace dpledger::server {

absl::Status SeqDoesNotFollow(const UpdateRow& u, int64_t last_seq) {
  return absl::AbortedError(
      absl::StrFormat("store: job '%s' update seq %d does not follow last seq %d",
                      JobKeyString(u.key), u.seq, last_seq));
}

absl::Status EvrStateChanged(const EvrMark& m, EvrState stored) {
  return absl::AbortedError(absl::StrFormat(
      "store: job '%s' evr state is %d, not the expected %d", JobKeyString(m.key),
      static_cast<int>(stored), static_cast<int>(*m.expected)));
}

std::vector<JobKey> WriteBatch::Jobs() const {
  std::vector<JobKey> out;
  for (const JobRow& j : new_jobs) out.push_back(j.key);
  for (const JobStateChange& c : state_changes) out.push_back(c.key);
  for (const EvrMark& m : evr_marks) out.push_back(m.key);
  for (const UpdateRow& u : updates) out.push_back(u.key);
  for (const ReleaseRow& r : releases) out.push_back(r.key);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace dpledger::server
