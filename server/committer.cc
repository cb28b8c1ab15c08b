#include "server/committer.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace dpledger::server {

absl::Status CommitTicket::Wait() const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_; });
  return status_;
}

bool CommitTicket::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void CommitTicket::Complete(absl::Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    status_ = std::move(status);
  }
  cv_.notify_all();
}

Committer::Committer(Store* store, CommitterOptions options,
                     std::function<void(double, size_t, bool)> observer,
                     std::function<void(const JobKey&)> on_poison)
    : store_(store),
      options_(options),
      observer_(std::move(observer)),
      on_poison_(std::move(on_poison)),
      thread_([this] { Run(); }) {}

Committer::~Committer() { Stop(); }

CommitTicketPtr Committer::Submit(WriteBatch batch) {
  auto ticket = std::make_shared<CommitTicket>();
  std::vector<JobKey> jobs = batch.Jobs();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      ticket->Complete(absl::UnavailableError("the server is shutting down"));
      return ticket;
    }
    for (const JobKey& k : jobs) {
      if (poisoned_.contains(k)) {
        ticket->Complete(absl::UnavailableError(absl::StrFormat(
            "an earlier write of job '%s' failed; retry", JobKeyString(k))));
        return ticket;
      }
    }
    pending_.push_back({std::move(batch), std::move(jobs), ticket});
  }
  cv_.notify_one();
  return ticket;
}

void Committer::Unpoison(const JobKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  poisoned_.erase(key);
}

bool Committer::IsPoisoned(const JobKey& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  return poisoned_.contains(key);
}

void Committer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Committer::Run() {
  for (;;) {
    std::vector<Pending> group;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stopping and drained
      if (options_.max_delay.count() > 0 && !stopping_) {
        cv_.wait_for(lock, options_.max_delay, [this] {
          return stopping_ ||
                 static_cast<int>(pending_.size()) >= options_.max_batches_per_commit;
        });
      }
      const size_t n = std::min<size_t>(pending_.size(), options_.max_batches_per_commit);
      for (size_t i = 0; i < n; ++i) {
        group.push_back(std::move(pending_.front()));
        pending_.pop_front();
      }
    }
    CommitGroup(group);
  }
}

void Committer::CommitGroup(std::vector<Pending>& group) {
  std::vector<const WriteBatch*> batches;
  for (const Pending& p : group) batches.push_back(&p.batch);
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = store_->Apply(batches);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (observer_) observer_(seconds, batches.size(), status.ok());
  if (status.ok()) {
    for (Pending& p : group) p.ticket->Complete(absl::OkStatus());
    return;
  }
  // Isolate the failure: retry each batch alone, in order, skipping jobs already failed.
  std::set<JobKey> failed_jobs;
  std::vector<std::pair<CommitTicketPtr, absl::Status>> results;
  for (Pending& p : group) {
    absl::Status s;
    for (const JobKey& k : p.jobs) {
      if (failed_jobs.contains(k)) {
        s = absl::UnavailableError(absl::StrFormat(
            "an earlier write of job '%s' failed; retry", JobKeyString(k)));
        break;
      }
    }
    if (s.ok()) {
      s = group.size() == 1 ? status : store_->Apply(p.batch);
    }
    if (!s.ok()) failed_jobs.insert(p.jobs.begin(), p.jobs.end());
    results.emplace_back(p.ticket, s);
  }
  // Poison under the queue lock, failing queued batches of the same jobs, BEFORE any ticket
  // completes: a waiter that sees the failure and resubmits must find the job poisoned.
  std::vector<CommitTicketPtr> also_failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    poisoned_.insert(failed_jobs.begin(), failed_jobs.end());
    for (auto it = pending_.begin(); it != pending_.end();) {
      const bool hit = std::any_of(it->jobs.begin(), it->jobs.end(),
                                   [&](const JobKey& k) { return failed_jobs.contains(k); });
      if (hit) {
        also_failed.push_back(it->ticket);
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const JobKey& k : failed_jobs) {
    if (on_poison_) on_poison_(k);
  }
  for (auto& [ticket, s] : results) ticket->Complete(s);
  for (const CommitTicketPtr& t : also_failed) {
    t->Complete(absl::UnavailableError("an earlier write of the same job failed; retry"));
  }
}

}  // namespace dpledger::server
