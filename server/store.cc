#include "server/store.h"

#include <algorithm>

namespace dpledger::server {

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
