// A failure-injecting Store wrapper for tests: it can fail the next N Apply calls, and it can
// hold Apply calls at a gate so a test can look at the service while a commit is "in the
// middle of its fsync". Reads pass through.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "server/store.h"

namespace dpledger::server::testing {

class FaultyStore final : public Store {
 public:
  explicit FaultyStore(Store* inner) : inner_(inner) {}

  void FailNextApplies(int n) { fail_next_ = n; }
  // While closed, Apply blocks before touching the inner store.
  void CloseGate() {
    std::lock_guard<std::mutex> l(mu_);
    gate_open_ = false;
  }
  void OpenGate() {
    {
      std::lock_guard<std::mutex> l(mu_);
      gate_open_ = true;
    }
    cv_.notify_all();
  }
  // Blocks until an Apply is waiting at the closed gate.
  void WaitForBlockedApply() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return blocked_ > 0; });
  }
  int applies() const { return applies_; }
  int failed_applies() const { return failed_; }

  std::string_view Backend() const override { return "faulty"; }
  using Store::Apply;
  absl::Status Apply(std::span<const WriteBatch* const> batches) override {
    {
      std::unique_lock<std::mutex> l(mu_);
      ++blocked_;
      cv_.notify_all();
      cv_.wait(l, [&] { return gate_open_; });
      --blocked_;
    }
    ++applies_;
    if (fail_next_ > 0) {
      --fail_next_;
      ++failed_;
      return absl::UnavailableError("injected: disk I/O error during commit");
    }
    return inner_->Apply(batches);
  }
  absl::StatusOr<std::optional<JobRow>> GetJob(const JobKey& k) override { return inner_->GetJob(k); }
  absl::StatusOr<std::vector<JobRow>> ListJobs(std::string_view t, std::string_view a, int l) override {
    return inner_->ListJobs(t, a, l);
  }
  absl::StatusOr<std::vector<JobRow>> ListAllJobs(const JobKey& a, int l) override {
    return inner_->ListAllJobs(a, l);
  }
  absl::StatusOr<int64_t> CountJobs(std::string_view t) override { return inner_->CountJobs(t); }
  absl::StatusOr<std::vector<UpdateRow>> ListUpdates(const JobKey& k, int64_t a, int l) override {
    return inner_->ListUpdates(k, a, l);
  }
  absl::StatusOr<std::optional<UpdateRow>> GetUpdate(const JobKey& k, int64_t s) override {
    return inner_->GetUpdate(k, s);
  }
  absl::StatusOr<std::optional<UpdateRow>> LastUpdate(const JobKey& k) override {
    return inner_->LastUpdate(k);
  }
  absl::StatusOr<std::optional<ReleaseRow>> GetRelease(std::string_view id) override {
    return inner_->GetRelease(id);
  }
  absl::StatusOr<std::optional<ReleaseRow>> FindReleaseByRequest(std::string_view t,
                                                                 std::string_view r) override {
    return inner_->FindReleaseByRequest(t, r);
  }
  absl::StatusOr<std::vector<ReleaseRow>> ListReleases(const JobKey& k) override {
    return inner_->ListReleases(k);
  }
  absl::StatusOr<int64_t> CountReleases(const JobKey& k) override { return inner_->CountReleases(k); }
  absl::StatusOr<std::optional<std::string>> LastReleaseChain(const JobKey& k) override {
    return inner_->LastReleaseChain(k);
  }
  absl::Status CheckIntegrity(bool full) override { return inner_->CheckIntegrity(full); }
  absl::Status Ping() override { return inner_->Ping(); }

 private:
  Store* inner_;
  std::atomic<int> fail_next_{0};
  std::atomic<int> applies_{0};
  std::atomic<int> failed_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool gate_open_ = true;
  int blocked_ = 0;
};

}  // namespace dpledger::server::testing
