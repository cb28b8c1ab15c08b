// The ledger service logic of dpledgerd (issue 4 "API"), free of gRPC: every operation takes
// plain inputs and returns absl::Status / StatusOr, so it is unit-tested without a socket.
// grpc_service.cc only converts (convert.h), authenticates and records metrics.
//
// State model. The store holds the truth (jobs, admitted updates with their acks, releases).
// Per job the service caches a JobEntry (job_cache.h): the job's admission policy composed
// over the ledger, last seq, and the recent updates, rebuilt from the store when needed, so
// a restarted server answers exactly as before.
//
// Admission (a privacy filter). Updates of one job are serialised by the job's mutex.
// AdmitLocked classifies the received updates (retry, new, gap, conflict), hands the new
// ones to the job's AdmissionPolicy (admission_policy.h: the natural filter over a declared
// schedule, the GDP or Renyi filter for adaptive schedules, or EVR verification), and builds
// the acks; a refused update changes nothing and consumes no seq. Several pipelined updates
// (one request, or what a stream has queued) are judged together: one accountant query on
// the whole group when it fits. Each admitted update's ack carries a certified interval for
// epsilon after it: exact for the last update of a group, [lower before the group, upper
// after the group] for earlier ones (true epsilon grows with the ledger, so this interval
// contains it).
//
// Durability. Admitted updates go to the group committer (committer.h); acks are released
// only after their commit (and every earlier commit of the job) is durable. Queries wait for
// the job's pending commits too, so nothing not yet durable is ever reported.
//
// Thread safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/accountants/accountant.h"
#include "core/registry/accountant_registry.h"
#include "server/admission_policy.h"
#include "server/auth.h"
#include "server/committer.h"
#include "server/evr_admission.h"
#include "server/job_cache.h"
#include "server/ledger_api.h"
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
  int64_t max_cached_bytes = int64_t{2} << 30;  // and the heap they hold (job_cache.h)
  int64_t max_pool_bytes = int64_t{1} << 30;  // MC query accountants' sample pools (LRU beyond)
  int max_admission_group = 1024;       // pipelined stream updates admitted together
  int64_t max_payload_bytes = 8 << 20;  // Release payload
  int recent_updates_window = 4096;     // per job, for retries without a store read
  bool release_use_mc = true;           // EVR Monte Carlo verifier first (release_verifier.h)
  double release_mc_max_seconds = 60;   // its predicted-time cap; beyond: certified fallback
  bool release_certify_directions = true;  // EVR: PLD-certified directions are not sampled
  // The most wall time one Spent or Remaining query may take (0: none); the caller's gRPC
  // deadline caps it further. Monte Carlo queries use accountant_options.mc.max_seconds.
  double query_max_seconds = 30;
  EvrAdmissionOptions evr_admission;    // "evr" jobs' admission verifications
  core::AccountantOptions accountant_options;
  CommitterOptions committer;
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
  // max_seconds > 0: the caller's time left (its deadline); admission judging is capped by
  // it and --query-max-seconds (DEADLINE_EXCEEDED, nothing admitted).
  absl::StatusOr<std::vector<Ack>> AppendSteps(const Caller& caller, std::string_view tenant,
                                               std::string_view job_id,
                                               const std::vector<UpdateInput>& updates,
                                               double max_seconds = 0);

  // A step stream on one job. Submit admits a group of received updates (each possibly a
  // conversion error) and returns one PendingAck per item, in order; per-update problems
  // come back as acks with `error` set. Not thread-safe: one reader per stream.
  class StepStream {
   public:
    // max_seconds as for AppendSteps: the stream's time left.
    std::vector<PendingAck> Submit(std::vector<absl::StatusOr<UpdateInput>> items,
                                   double max_seconds = 0);
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
  // max_seconds: the caller's remaining deadline (0: none), capped by query_max_seconds.
  absl::StatusOr<RemainingAnswer> Remaining(const Caller& caller, std::string_view tenant,
                                            std::string_view job_id,
                                            const core::Mechanism& mechanism,
                                            double max_seconds = 0);
  // Runs the verifier on the job's ledger; on success records the release (durably).
  // A failed verification stores nothing: FAILED_PRECONDITION saying why.
  absl::StatusOr<ReleaseRow> Release(const Caller& caller, const ReleaseInput& input);
  absl::StatusOr<ReleaseRow> GetRelease(const Caller& caller, std::string_view tenant,
                                        std::string_view release_id, bool include_payload);

  // Commits everything pending and stops the committer; later writes fail UNAVAILABLE.
  void Shutdown();

  const LedgerOptions& options() const { return options_; }
  // A job's admission policy options (its mc seed and samples applied).
  PolicyOptions PolicyOptionsFor(const JobRow& row) const;

 private:
  // Admission bookkeeping for one received update (admission.cc).
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

  JobInfo InfoLocked(const JobEntry& entry) const;
  // Waits for the job's pending commits (queries must not report what is not durable).
  static absl::Status WaitTail(CommitTicketPtr tail);
  // A query accountant `name` for the job (its MC options) with these PLD options.
  absl::StatusOr<std::unique_ptr<core::Accountant>> NewAccountant(
      const JobRow& row, std::string_view name, const core::PldOptions& pld) const;
  // The time cap of one query by `accountant`: the server's (--query-mc-max-seconds for mc,
  // --query-max-seconds for the others) or the caller's deadline, whichever is sooner (0
  // means none for both).
  double QueryCap(std::string_view accountant, double caller_seconds) const;
  // A new job's row from its spec: INVALID_ARGUMENT naming the field when inconsistent.
  absl::StatusOr<JobRow> JobRowFromSpec(const JobSpec& spec, const std::string& tenant) const;

  // admission.cc
  absl::StatusOr<std::vector<PendingAck>> AdmitLocked(JobEntry& entry,
                                                      std::vector<Item>& items, bool stream,
                                                      int64_t* stream_refused_seq,
                                                      double max_seconds);
  absl::StatusOr<std::optional<UpdateRow>> FindAdmitted(JobEntry& entry, int64_t seq);

  Store* store_;
  LedgerOptions options_;
  Metrics* metrics_;
  Committer committer_;
  JobCache cache_;
  PoolCache pools_;  // query accountants with sample pools, by (job, accountant)

  std::mutex create_mu_;  // job creation: count + existence check + insert
};

// Validates a job id: 1..128 characters of [A-Za-z0-9._:-] (INVALID_ARGUMENT naming job_id).
absl::Status ValidateJobId(std::string_view job_id);

}  // namespace dpledger::server
