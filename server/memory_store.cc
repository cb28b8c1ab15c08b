#include "server/memory_store.h"

#include "absl/strings/str_format.h"

namespace dpledger::server {

// Applies in place and records how to undo each change, so a failing group leaves nothing
// behind (all-or-nothing) without copying the tables on every commit.
absl::Status MemoryStore::Apply(std::span<const WriteBatch* const> batches) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::function<void()>> undo;
  for (const WriteBatch* b : batches) {
    if (absl::Status s = ApplyTo(tables_, *b, undo); !s.ok()) {
      for (auto it = undo.rbegin(); it != undo.rend(); ++it) (*it)();
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status MemoryStore::ApplyTo(Tables& t, const WriteBatch& batch,
                                  std::vector<std::function<void()>>& undo) {
  for (const JobRow& j : batch.new_jobs) {
    if (t.jobs.emplace(j.key, j).second) {
      undo.push_back([&t, key = j.key] { t.jobs.erase(key); });
    } else {
      return absl::AlreadyExistsError(
          absl::StrFormat("job '%s' already exists", JobKeyString(j.key)));
    }
  }
  for (const JobStateChange& c : batch.state_changes) {
    auto it = t.jobs.find(c.key);
    if (it == t.jobs.end()) {
      return absl::NotFoundError(absl::StrFormat("job '%s' not found", JobKeyString(c.key)));
    }
    undo.push_back([row = &it->second, old = it->second] { *row = old; });
    it->second.state = c.state;
    it->second.close_time_ms = c.close_time_ms;
  }
  for (const EvrMark& m : batch.evr_marks) {
    auto it = t.jobs.find(m.key);
    if (it == t.jobs.end()) {
      return absl::NotFoundError(absl::StrFormat("job '%s' not found", JobKeyString(m.key)));
    }
    if (m.expected && it->second.evr_state != *m.expected) {
      return EvrStateChanged(m, it->second.evr_state);
    }
    undo.push_back([row = &it->second, old = it->second] { *row = old; });
    it->second.evr_state = m.state;
    it->second.evr_note = m.note;
  }
  for (const UpdateRow& u : batch.updates) {
    auto it = t.jobs.find(u.key);
    if (it == t.jobs.end()) {
      return absl::NotFoundError(absl::StrFormat("job '%s' not found", JobKeyString(u.key)));
    }
    if (it->second.state != JobState::kOpen) {
      return absl::FailedPreconditionError(
          absl::StrFormat("job '%s' is closed", JobKeyString(u.key)));
    }
    auto& rows = t.updates[u.key];
    const int64_t last = rows.empty() ? 0 : rows.rbegin()->first;
    if (u.seq != last + 1) {
      return SeqDoesNotFollow(u, last);
    }
    rows.emplace(u.seq, u);
    undo.push_back([&rows, seq = u.seq] { rows.erase(seq); });
  }
  for (const ReleaseRow& r : batch.releases) {
    if (!t.jobs.contains(r.key)) {
      return absl::NotFoundError(absl::StrFormat("job '%s' not found", JobKeyString(r.key)));
    }
    if (!r.request_id.empty()) {
      for (const auto& [id, other] : t.releases) {
        if (other.key.tenant == r.key.tenant && other.request_id == r.request_id) {
          return absl::AlreadyExistsError(
              absl::StrFormat("release request_id '%s' already exists", r.request_id));
        }
      }
    }
    if (!t.releases.emplace(r.release_id, r).second) {
      return absl::AlreadyExistsError(
          absl::StrFormat("release '%s' already exists", r.release_id));
    }
    t.release_order.push_back(r.release_id);
    undo.push_back([&t, id = r.release_id] {
      t.releases.erase(id);
      t.release_order.pop_back();
    });
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<JobRow>> MemoryStore::GetJob(const JobKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tables_.jobs.find(key);
  if (it == tables_.jobs.end()) return std::optional<JobRow>();
  return std::optional<JobRow>(it->second);
}

absl::StatusOr<std::vector<JobRow>> MemoryStore::ListJobs(std::string_view tenant,
                                                          std::string_view after_job_id,
                                                          int limit) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<JobRow> out;
  for (auto it = tables_.jobs.upper_bound(JobKey{std::string(tenant), std::string(after_job_id)});
       it != tables_.jobs.end() && it->first.tenant == tenant &&
       static_cast<int>(out.size()) < limit;
       ++it) {
    out.push_back(it->second);
  }
  return out;
}

absl::StatusOr<std::vector<JobRow>> MemoryStore::ListAllJobs(const JobKey& after, int limit) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<JobRow> out;
  for (auto it = tables_.jobs.upper_bound(after);
       it != tables_.jobs.end() && static_cast<int>(out.size()) < limit; ++it) {
    out.push_back(it->second);
  }
  return out;
}

absl::StatusOr<int64_t> MemoryStore::CountJobs(std::string_view tenant) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  for (const auto& [key, row] : tables_.jobs) n += key.tenant == tenant;
  return n;
}

absl::StatusOr<std::vector<UpdateRow>> MemoryStore::ListUpdates(const JobKey& key,
                                                                int64_t after_seq, int limit) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<UpdateRow> out;
  auto it = tables_.updates.find(key);
  if (it == tables_.updates.end()) return out;
  for (auto u = it->second.upper_bound(after_seq);
       u != it->second.end() && static_cast<int>(out.size()) < limit; ++u) {
    out.push_back(u->second);
  }
  return out;
}

absl::StatusOr<std::optional<UpdateRow>> MemoryStore::GetUpdate(const JobKey& key,
                                                                int64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tables_.updates.find(key);
  if (it == tables_.updates.end()) return std::optional<UpdateRow>();
  auto u = it->second.find(seq);
  if (u == it->second.end()) return std::optional<UpdateRow>();
  return std::optional<UpdateRow>(u->second);
}

absl::StatusOr<std::optional<UpdateRow>> MemoryStore::LastUpdate(const JobKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tables_.updates.find(key);
  if (it == tables_.updates.end() || it->second.empty()) return std::optional<UpdateRow>();
  return std::optional<UpdateRow>(it->second.rbegin()->second);
}

absl::StatusOr<int64_t> MemoryStore::CountReleases(const JobKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  for (const auto& [id, r] : tables_.releases) n += r.key == key;
  return n;
}

absl::StatusOr<std::optional<std::string>> MemoryStore::LastReleaseChain(const JobKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = tables_.release_order.rbegin(); it != tables_.release_order.rend(); ++it) {
    const ReleaseRow& r = tables_.releases.at(*it);
    if (r.key == key) return std::optional<std::string>(r.chain);
  }
  return std::optional<std::string>();
}

absl::StatusOr<std::optional<ReleaseRow>> MemoryStore::GetRelease(std::string_view release_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tables_.releases.find(std::string(release_id));
  if (it == tables_.releases.end()) return std::optional<ReleaseRow>();
  return std::optional<ReleaseRow>(it->second);
}

absl::StatusOr<std::optional<ReleaseRow>> MemoryStore::FindReleaseByRequest(
    std::string_view tenant, std::string_view request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, r] : tables_.releases) {
    if (r.key.tenant == tenant && r.request_id == request_id) return std::optional<ReleaseRow>(r);
  }
  return std::optional<ReleaseRow>();
}

absl::StatusOr<std::vector<ReleaseRow>> MemoryStore::ListReleases(const JobKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ReleaseRow> out;
  for (const std::string& id : tables_.release_order) {
    const ReleaseRow& r = tables_.releases.at(id);
    if (r.key == key) out.push_back(r);
  }
  return out;
}

}  // namespace dpledger::server
