// Group commit (issue 4 "Durability and state"): service threads Submit write batches; one
// committer thread takes everything pending and writes it in a single Store::Apply (one
// transaction, one fsync), then completes each batch's ticket. Tickets of one job complete
// in submission order.
//
// Failure: when a group fails, each batch is retried alone so one bad batch cannot fail
// unrelated jobs. A job whose batch failed is POISONED: its later pending batches fail too and
// new Submits for it fail at once, so a later update can never become durable after an
// earlier one failed (that would leave a gap). The service clears the poison (Unpoison) after
// it has rebuilt that job's state from the store.
//
// Thread safety: all methods are thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "absl/status/status.h"
#include "server/store.h"

namespace dpledger::server {

// Completion of one submitted batch.
class CommitTicket {
 public:
  // Blocks until the batch is durable (OK) or has failed.
  absl::Status Wait() const;
  bool done() const;

 private:
  friend class Committer;
  void Complete(absl::Status status);
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  absl::Status status_;
};
using CommitTicketPtr = std::shared_ptr<CommitTicket>;

struct CommitterOptions {
  int max_batches_per_commit = 4096;  // upper bound on one group
  // Extra wait for more batches after the first arrives (0: commit at once; batching then
  // comes from writes that queue up while the previous fsync runs).
  std::chrono::microseconds max_delay{0};
};

class Committer {
 public:
  // observer: called after each Store::Apply with its duration in seconds and batch count
  // (metrics); on_poison: called (without locks held) with each job that became poisoned.
  Committer(Store* store, CommitterOptions options,
            std::function<void(double seconds, size_t batches, bool ok)> observer = {},
            std::function<void(const JobKey&)> on_poison = {});
  ~Committer();  // Stop()

  CommitTicketPtr Submit(WriteBatch batch);
  void Unpoison(const JobKey& key);
  bool IsPoisoned(const JobKey& key) const;

  // Commits everything pending, then stops the thread. Later Submits fail UNAVAILABLE.
  void Stop();

 private:
  struct Pending {
    WriteBatch batch;
    std::vector<JobKey> jobs;
    CommitTicketPtr ticket;
  };
  void Run();
  void CommitGroup(std::vector<Pending>& group);

  Store* store_;
  CommitterOptions options_;
  std::function<void(double, size_t, bool)> observer_;
  std::function<void(const JobKey&)> on_poison_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  std::set<JobKey> poisoned_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace dpledger::server
