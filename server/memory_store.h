// An in-memory Store: same contract as the SQLite store except that "durable" means "in
// this process". Used by tests and by `--store memory` for throwaway runs.
#pragma once

#include <functional>
#include <map>
#include <mutex>

#include "server/store.h"

namespace dpledger::server {

class MemoryStore final : public Store {
 public:
  std::string_view Backend() const override { return "memory"; }
  using Store::Apply;
  absl::Status Apply(std::span<const WriteBatch* const> batches) override;
  absl::StatusOr<std::optional<JobRow>> GetJob(const JobKey& key) override;
  absl::StatusOr<std::vector<JobRow>> ListJobs(std::string_view tenant,
                                               std::string_view after_job_id,
                                               int limit) override;
  absl::StatusOr<std::vector<JobRow>> ListAllJobs(const JobKey& after, int limit) override;
  absl::StatusOr<int64_t> CountJobs(std::string_view tenant) override;
  absl::StatusOr<std::vector<UpdateRow>> ListUpdates(const JobKey& key, int64_t after_seq,
                                                     int limit) override;
  absl::StatusOr<std::optional<UpdateRow>> GetUpdate(const JobKey& key, int64_t seq) override;
  absl::StatusOr<std::optional<UpdateRow>> LastUpdate(const JobKey& key) override;
  absl::StatusOr<std::optional<ReleaseRow>> GetRelease(std::string_view release_id) override;
  absl::StatusOr<std::optional<ReleaseRow>> FindReleaseByRequest(
      std::string_view tenant, std::string_view request_id) override;
  absl::StatusOr<std::vector<ReleaseRow>> ListReleases(const JobKey& key) override;
  absl::StatusOr<int64_t> CountReleases(const JobKey& key) override;
  absl::StatusOr<std::optional<std::string>> LastReleaseChain(const JobKey& key) override;
  absl::Status CheckIntegrity(bool full) override { return absl::OkStatus(); }

 private:
  struct Tables {
    std::map<JobKey, JobRow> jobs;
    std::map<JobKey, std::map<int64_t, UpdateRow>> updates;
    std::map<std::string, ReleaseRow> releases;
    std::vector<std::string> release_order;
  };
  static absl::Status ApplyTo(Tables& t, const WriteBatch& batch,
                              std::vector<std::function<void()>>& undo);

  std::mutex mu_;
  Tables tables_;
};

}  // namespace dpledger::server
