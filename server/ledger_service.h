// The ledger service logic of dpledgerd (issue 4 "API"), free of gRPC: every operation takes
// plain inputs and returns absl::Status / StatusOr, so it is unit-tested without a socket.
// grpc_service.cc only converts (convert.h), authenticates and records metrics.
//
// State model. The store holds the truth (jobs, admitted updates with their acks, releases).
// Per job the service caches a JobEntry: the admitting accountant composed over the ledger,
// the spent bound, last seq, and the recent updates. The cache is rebuilt from the store on
// first use, after eviction (LRU, max_cached_jobs and max_cached_bytes) and after a failed
// commit, so a restarted
// server answers exactly as before (deterministic accountants over the same event list).
//
// Admission (a privacy filter). Updates of one job are serialised by the job's mutex. New
// updates are composed on a Clone of the accountant; they are admitted only if the bound
// after them is certified (never an estimate) and its upper end is within the budget
// epsilon at the budget delta; a refused update changes nothing and consumes no seq. An
// "evr" job instead verifies the whole group with the EVR verifier (evr_admission.h: one
// verification, no prefix search, and the job stops admitting after a rejection); its
// entry accountant is the MC accountant, which only holds the ledger for it.
// Several pipelined updates (one request, or what a stream has queued) are admitted with ONE
// accountant query on the whole group when it fits (binary search for the longest fitting
// prefix otherwise), which keeps the cost per step small for expensive accountants. Each
// admitted update's ack carries a certified interval for epsilon after it: exact for the last
// update of a group, [lower before the group, upper after the group] for earlier ones (true
// epsilon grows with the ledger, so this interval contains it).
//
// Durability. Admitted updates go to the group committer (committer.h); acks are released
// only after their commit (and every earlier commit of the job) is durable. Queries wait for
// the job's pending commits too, so nothing not yet durable is ever reported.
//
// Thread safety: all methods are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/accountants/accountant.h"
#include "core/registry/accountant_registry.h"
#include "server/auth.h"
#include "server/committer.h"
#include "server/evr_admission.h"
#include "server/ledger_types.h"
#include "server/metrics.h"
#include "server/pool_cache.h"
#include "server/store.h"

namespace dpledger::server {

struct LedgerOptions {
  std::string default_accountant = "pld";
  int max_jobs_per_tenant = 10000;
  int max_updates_per_request = 1000;   // AppendSteps updates per request
  int max_steps_per_update = 64;        // (mechanism, count) entries per update
  int max_cached_jobs = 10000;          // accountant caches kept (LRU beyond)
  int64_t max_cached_bytes = int64_t{2} << 30;  // and their CacheBytes (PLD: ~7 MiB a job)
  int64_t max_pool_bytes = int64_t{1} << 30;  // MC query accountants' sample pools (LRU beyond)
  int max_admission_group = 1024;       // pipelined stream updates admitted together
  int64_t max_payload_bytes = 8 << 20;  // Release payload
  int recent_updates_window = 4096;     // per job, for retries without a store read
  bool release_use_mc = true;           // EVR Monte Carlo verifier first (release_verifier.h)
  double release_mc_max_seconds = 60;   // its predicted-time cap; beyond: certified fallback
  EvrAdmissionOptions evr_admission;    // "evr" jobs' admission verifications
  core::AccountantOptions accountant_options;
  CommitterOptions committer;
};

// CreateJob input.
struct JobSpec {
  std::string job_id;
  std::string tenant;                 // empty: the caller's
  double budget_epsilon = 0;
  double budget_delta = 0;
  Neighbouring neighbouring = Neighbouring::kAddRemove;
  std::string accountant;             // empty: options.default_accountant
  uint64_t mc_seed = 0;
  int64_t mc_num_samples = 0;
};

struct JobInfo {
  JobRow row;
  int64_t num_steps = 0;
  int64_t last_seq = 0;
  int64_t num_releases = 0;
  core::EpsilonBound spent;           // epsilon at budget delta by the admitting accountant
};

struct JobPage {
  std::vector<JobInfo> jobs;
  std::string next_page_token;
};

// One update as received.
struct UpdateInput {
  int64_t seq = 0;
  std::vector<core::MechanismEvent> steps;
};

struct Ack {
  int64_t seq = 0;
  bool admitted = false;
  bool duplicate = false;
  core::EpsilonBound spent;
  std::optional<core::EpsilonBound> candidate;
  int64_t num_steps = 0;
  int64_t last_seq = 0;
  std::string refusal_reason;
  absl::Status error;                 // streams: a per-update error; the ack is otherwise empty
  std::string accountant;
  double budget_epsilon = 0;
  double budget_delta = 0;
};

// An ack that becomes final once the job's commits up to it are durable.
class PendingAck {
 public:
  PendingAck(Ack ack, CommitTicketPtr ticket) : ack_(std::move(ack)), ticket_(std::move(ticket)) {}
  // The ack, or the commit's error (UNAVAILABLE: retry with the same seq).
  absl::StatusOr<Ack> Wait() const;

 private:
  Ack ack_;
  CommitTicketPtr ticket_;
};

struct SpentQuery {
  std::optional<double> delta;        // exactly one of delta / epsilon
  std::optional<double> epsilon;
  std::string accountant;             // empty: the job's admitting accountant
  // The caller's remaining deadline, seconds (0: none): a Monte Carlo answer stops growing
  // there, or its pool build stops with DEADLINE_EXCEEDED, as at --query-mc-max-seconds.
  double max_seconds = 0;
};

struct SpentAnswer {
  std::string accountant;
  std::optional<core::EpsilonBound> epsilon;  // for a delta query
  std::optional<core::DeltaBound> delta;      // for an epsilon query
  int64_t num_steps = 0;
  int64_t last_seq = 0;
  std::vector<core::AnswerDiagnostic> diagnostics;  // of a computed answer (not the cached one)
};

struct RemainingAnswer {
  int64_t max_additional_steps = 0;
  core::EpsilonBound spent;
  core::EpsilonBound spent_at_max;
  double budget_epsilon = 0;
  double budget_delta = 0;
  std::string accountant;
};

struct ReleaseInput {
  std::string job_id;
  std::string tenant;
  std::string payload;
  double epsilon = 0;
  double delta_est = 0;
  double tau = 0;        // 0: 0.99
  double rho = 0;        // 0: (1 + tau) / 2
  std::string request_id;
  int64_t max_samples = 0;
};

struct LedgerPage {
  std::vector<UpdateRow> entries;
  bool more = false;
};

class LedgerService {
 public:
  // store must outlive the service. metrics may be null.
  LedgerService(Store* store, LedgerOptions options, Metrics* metrics = nullptr);
  ~LedgerService();  // Shutdown()

  absl::StatusOr<JobInfo> CreateJob(const Caller& caller, const JobSpec& spec);
  absl::StatusOr<JobInfo> GetJob(const Caller& caller, std::string_view tenant,
                                 std::string_view job_id);
  absl::StatusOr<JobPage> ListJobs(const Caller& caller, std::string_view tenant,
                                   int page_size, std::string_view page_token);
  absl::StatusOr<JobInfo> CloseJob(const Caller& caller, std::string_view tenant,
                                   std::string_view job_id);

  // Unary batch: validation errors, gaps and conflicting retries fail the whole request
  // with nothing written; otherwise one ack per update once durable.
  absl::StatusOr<std::vector<Ack>> AppendSteps(const Caller& caller, std::string_view tenant,
                                               std::string_view job_id,
                                               const std::vector<UpdateInput>& updates);

  // A step stream on one job. Submit admits a group of received updates (each possibly a
  // conversion error) and returns one PendingAck per item, in order; per-update problems
  // come back as acks with `error` set. Not thread-safe: one reader per stream.
  class StepStream {
   public:
    std::vector<PendingAck> Submit(std::vector<absl::StatusOr<UpdateInput>> items);
    const JobKey& key() const { return key_; }

   private:
    friend class LedgerService;
    StepStream(LedgerService* service, JobKey key) : service_(service), key_(std::move(key)) {}
    LedgerService* service_;
    JobKey key_;
    int64_t refused_seq_ = 0;  // seq of the last refused update on this stream, 0 if none
  };
  // Checks the caller (writer) and that the job exists.
  absl::StatusOr<std::unique_ptr<StepStream>> OpenStream(const Caller& caller,
                                                         std::string_view tenant,
                                                         std::string_view job_id);

  absl::StatusOr<LedgerPage> GetLedger(const Caller& caller, std::string_view tenant,
                                       std::string_view job_id, int64_t after_seq,
                                       int page_size);
  absl::StatusOr<SpentAnswer> Spent(const Caller& caller, std::string_view tenant,
                                    std::string_view job_id, const SpentQuery& query);
  // How many more applications of `mechanism` fit in the budget.
  absl::StatusOr<RemainingAnswer> Remaining(const Caller& caller, std::string_view tenant,
                                            std::string_view job_id,
                                            const core::Mechanism& mechanism);
  // Runs the verifier on the job's ledger; on success records the release (durably).
  // A failed verification stores nothing: FAILED_PRECONDITION saying why.
  absl::StatusOr<ReleaseRow> Release(const Caller& caller, const ReleaseInput& input);
  absl::StatusOr<ReleaseRow> GetRelease(const Caller& caller, std::string_view tenant,
                                        std::string_view release_id, bool include_payload);

  // Commits everything pending and stops the committer; later writes fail UNAVAILABLE.
  void Shutdown();

  const LedgerOptions& options() const { return options_; }

 private:
  struct RecentUpdate {
    UpdateRow row;
  };
  struct JobEntry {
    std::mutex mu;
    bool loaded = false;
    std::atomic<bool> stale{false};
    uint64_t last_used = 0;             // LRU tick (under the cache mutex)
    size_t bytes = 0;                   // accountant->CacheBytes() (under the cache mutex)
    JobRow row;
    std::unique_ptr<core::Accountant> accountant;
    core::EpsilonBound spent;
    int64_t last_seq = 0;
    int64_t num_steps = 0;
    int64_t num_releases = 0;
    std::deque<RecentUpdate> recent;    // the newest admitted updates, by seq
    CommitTicketPtr tail;               // the job's newest commit, null when none pending
    // Last seq of a ledger prefix whose EVR verification sampled and did not accept: a
    // retry would add false-positive exposure (mc-evr.md 4.8), so later releases of the
    // same prefix use the certified path only. In memory: a restart forgets it.
    int64_t evr_rejected_at_seq = -1;
  };
  using EntryPtr = std::shared_ptr<JobEntry>;
  // Admission bookkeeping for one update (admission.cc).
  struct Item {
    absl::Status input_error;  // conversion / validation error of this update
    UpdateInput update;
    std::string canonical;     // CanonicalSteps(update.steps)
    int64_t total_count = 0;
    enum class Kind { kError, kDuplicate, kNew, kNotAttempted, kSameAsEarlier };
    Kind kind = Kind::kError;
    absl::Status error;
    int earlier = -1;          // kSameAsEarlier: index of the item with the same seq
    Ack ack;
  };

  // The job's entry, loaded and locked. NOT_FOUND when the job does not exist.
  absl::StatusOr<EntryPtr> Acquire(const JobKey& key, std::unique_lock<std::mutex>& lock);
  absl::Status LoadLocked(JobEntry& entry, const JobKey& key);
  void EvictIfNeeded();
  // Records the entry's accountant's CacheBytes in the cache total; true if it changed.
  // Call with the job's lock held, after its accountant changed.
  bool UpdateBytesLocked(JobEntry& entry);
  void OnPoisoned(const JobKey& key);
  JobInfo InfoLocked(const JobEntry& entry) const;
  // Waits for the job's pending commits (queries must not report what is not durable).
  static absl::Status WaitTail(CommitTicketPtr tail);
  absl::StatusOr<std::unique_ptr<core::Accountant>> NewAccountant(const JobRow& row,
                                                                  std::string_view name) const;

  // admission.cc
  absl::StatusOr<std::vector<PendingAck>> AdmitLocked(JobEntry& entry,
                                                      std::vector<Item>& items, bool stream,
                                                      int64_t* stream_refused_seq);
  absl::StatusOr<std::optional<UpdateRow>> FindAdmitted(JobEntry& entry, int64_t seq);
  // An "evr" job's verification of `candidate` (evr_admission.h), with the durable marks:
  // kVerifying before sampling, kStopped after a rejection (entry.tail waits for it), and
  // back to kIdle after a refusal or an error. The kIdle mark of an acceptance goes with
  // the admitted updates (the caller's batch).
  absl::StatusOr<EvrAdmissionResult> VerifyEvrLocked(
      JobEntry& entry, std::span<const core::MechanismEvent> candidate);

  Store* store_;
  LedgerOptions options_;
  Metrics* metrics_;
  Committer committer_;
  PoolCache pools_;  // query accountants with sample pools, by (job, accountant)

  std::mutex cache_mu_;
  std::map<JobKey, EntryPtr> cache_;
  uint64_t tick_ = 0;
  size_t cached_bytes_ = 0;  // sum of the entries' bytes

  std::mutex create_mu_;  // job creation: count + existence check + insert
};

// Validates a job id: 1..128 characters of [A-Za-z0-9._:-] (INVALID_ARGUMENT naming job_id).
absl::Status ValidateJobId(std::string_view job_id);

}  // namespace dpledger::server
