// Release and GetRelease: the EVR gate (release_verifier.h) in front of the releases table.
#include <chrono>
#include <cmath>
#include <random>

#include "absl/strings/str_format.h"
#include "server/ledger_service.h"
#include "server/release_verifier.h"
#include "spdlog/spdlog.h"

namespace dpledger::server {
namespace {

std::string NewReleaseId() {
  std::random_device rd;  // OS entropy: ids must not be guessable across tenants
  std::string id = "rel_";
  for (int i = 0; i < 4; ++i) absl::StrAppendFormat(&id, "%08x", rd());
  return id;
}

bool SameClaim(const ReleaseRow& r, const ReleaseInput& in, const std::string& digest,
               double tau, double rho) {
  return r.key.job_id == in.job_id && r.payload_sha256 == digest && r.epsilon == in.epsilon &&
         r.delta_est == in.delta_est && r.tau == tau && r.rho == rho;
}

// Accepts iff the filter's certified delta(epsilon) is within the claimed delta_est / tau.
absl::StatusOr<VerifyOutcome> FilterReleaseOutcome(double curve_delta,
                                                   const std::string& filter,
                                                   const VerifyInput& vin) {
  if (!(std::isfinite(vin.epsilon) && vin.epsilon >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("epsilon must be a finite number >= 0, got %g", vin.epsilon));
  }
  if (!(vin.delta_est > 0 && vin.delta_est < 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("delta_est must be in (0, 1), got %g", vin.delta_est));
  }
  if (!(vin.tau > 0 && vin.tau <= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat("tau must be in (0, 1], got %g", vin.tau));
  }
  VerifyOutcome v;
  v.threshold = vin.delta_est / vin.tau;
  v.delta_hat = curve_delta;
  v.accepted = curve_delta <= v.threshold;
  v.guarantee = core::Guarantee::kCertified;
  v.verifier = absl::StrFormat("filter:%s", filter);
  v.reason = absl::StrFormat(
      "the %s filter's budget curve gives delta %.6g at epsilon %g for the whole adaptive run; "
      "the claim is delta_est/tau = %.6g",
      filter, curve_delta, vin.epsilon, v.threshold);
  return v;
}

}  // namespace

absl::StatusOr<ReleaseRow> LedgerService::Release(const Caller& caller, const ReleaseInput& in) {
  absl::StatusOr<std::string> t = Authorize(caller, in.tenant, Role::kWriter);
  if (!t.ok()) return t.status();
  if (absl::Status s = ValidateJobId(in.job_id); !s.ok()) return s;
  if (static_cast<int64_t>(in.payload.size()) > options_.max_payload_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "payload has %d bytes, more than max_payload_bytes %d", in.payload.size(),
        options_.max_payload_bytes));
  }
  if (in.request_id.size() > 128) {
    return absl::InvalidArgumentError("request_id must be at most 128 characters");
  }
  if (in.max_samples < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_samples must be >= 0, got %d", in.max_samples));
  }
  const double tau = in.tau == 0 ? 0.99 : in.tau;
  const double rho = in.rho == 0 ? (1 + tau) / 2 : in.rho;
  const std::string digest = Sha256Hex(in.payload);
  const JobKey key{*t, in.job_id};

  if (!in.request_id.empty()) {
    absl::StatusOr<std::optional<ReleaseRow>> prior = store_->FindReleaseByRequest(*t, in.request_id);
    if (!prior.ok()) return prior.status();
    if (prior->has_value()) {
      if (!SameClaim(**prior, in, digest, tau, rho)) {
        return absl::AlreadyExistsError(absl::StrFormat(
            "request_id '%s' was already used for a different release (%s)", in.request_id,
            (*prior)->release_id));
      }
      if (metrics_) metrics_->Release("duplicate");
      (*prior)->payload.clear();
      return **prior;
    }
  }

  // Snapshot the durable ledger; verification runs without the job lock (it may be long) and
  // covers exactly this prefix (mc-evr.md 4.8: verify the released prefix).
  VerifyInput vin;
  int64_t ledger_seq = 0, num_steps = 0;
  std::string ledger_head;  // the update chain head at ledger_seq (ledger_chain.h)
  std::optional<double> budget_curve_delta;  // adaptive jobs: their filter's guarantee
  std::string filter_name;
  {
    std::unique_lock<std::mutex> lock;
    absl::StatusOr<EntryPtr> e = cache_.Acquire(key, lock);
    if (!e.ok()) return e.status();
    JobEntry& entry = **e;
    if (entry.row.state != JobState::kOpen) {
      return absl::FailedPreconditionError(
          absl::StrFormat("job '%s' is closed: no more releases", in.job_id));
    }
    const auto events = entry.policy->ledger().events();
    vin.events.assign(events.begin(), events.end());
    // The certified fallback tries the admitting accountant first (the filters' and evr's
    // are not registry accountants).
    if (entry.row.admission == AdmissionKind::kNatural) {
      vin.admitting_accountant = entry.row.accountant;
    }
    budget_curve_delta = entry.policy->BudgetCurveDelta(in.epsilon);
    filter_name = entry.row.accountant;
    ledger_seq = entry.last_seq;
    ledger_head = entry.chain_head;
    vin.use_mc = options_.release_use_mc && entry.evr_rejected_at_seq != ledger_seq;
    num_steps = entry.num_steps;
    CommitTicketPtr tail = entry.tail;
    lock.unlock();
    if (absl::Status s = WaitTail(tail); !s.ok()) return s;
  }
  vin.epsilon = in.epsilon;
  vin.delta_est = in.delta_est;
  vin.tau = tau;
  vin.rho = rho;
  vin.max_samples = in.max_samples;
  vin.accountant_options = options_.accountant_options;
  vin.mc_max_seconds = options_.release_mc_max_seconds;
  vin.certify_directions = options_.release_certify_directions;
  // An adaptive job's realised ledger is no guarantee (its mechanisms were chosen from
  // outputs): the claim is checked against the curve its filter proves for the whole run.
  absl::StatusOr<VerifyOutcome> v =
      budget_curve_delta ? FilterReleaseOutcome(*budget_curve_delta, filter_name, vin)
                         : VerifyRelease(vin);
  if (v.ok() && v->mc_attempted && v->verifier != "evr-mc") {
    std::unique_lock<std::mutex> lock;
    if (absl::StatusOr<EntryPtr> e = cache_.Acquire(key, lock); e.ok()) {
      (*e)->evr_rejected_at_seq = ledger_seq;
    }
  }
  if (!v.ok()) {
    if (metrics_) metrics_->Verification("release", "error");
    return v.status();
  }
  if (metrics_) metrics_->Verification("release", v->accepted ? "accepted" : "rejected");
  if (!v->accepted) {
    if (metrics_) metrics_->Release("failed");
    spdlog::info("job={} release rejected verifier={} reason=\"{}\"", JobKeyString(key),
                 v->verifier, v->reason);
    return absl::FailedPreconditionError(v->reason);
  }

  ReleaseRow r;
  r.release_id = NewReleaseId();
  r.key = key;
  r.request_id = in.request_id;
  r.epsilon = in.epsilon;
  r.delta = in.delta_est / tau;
  r.delta_est = in.delta_est;
  r.tau = tau;
  r.rho = rho;
  r.guarantee = v->guarantee;
  r.failure_probability = v->failure_probability;
  r.verifier = v->verifier;
  r.fallback = v->fallback;
  r.num_samples = v->num_samples;
  r.seconds = v->seconds;
  r.backend = v->backend;
  r.seed = v->seed;
  r.delta_hat = v->delta_hat;
  r.threshold = v->threshold;
  r.note = v->reason;
  r.payload_sha256 = digest;
  r.payload = in.payload;
  r.payload_size = static_cast<int64_t>(in.payload.size());
  r.ledger_seq = ledger_seq;
  r.num_steps = num_steps;
  {
    std::unique_lock<std::mutex> lock;
    absl::StatusOr<EntryPtr> e = cache_.Acquire(key, lock);
    if (!e.ok()) return e.status();
    // Stamped and chained under the job lock, so the release chain follows the store's
    // listing order (create time, then insertion).
    r.create_time_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
    r.chain = ChainRelease((*e)->release_head, ledger_head, r);
    (*e)->release_head = r.chain;
    WriteBatch batch;
    batch.releases.push_back(r);
    CommitTicketPtr ticket = committer_.Submit(std::move(batch));
    (*e)->tail = ticket;
    ++(*e)->num_releases;
    lock.unlock();
    if (absl::Status s = ticket->Wait(); !s.ok()) {
      if (metrics_) metrics_->Release("failed");
      return absl::Status(s.code(), absl::StrFormat("release not recorded: %s",
                                                    std::string(s.message())));
    }
  }
  if (metrics_) metrics_->Release("recorded");
  spdlog::info("job={} release={} epsilon={} delta={} verifier={} ledger_seq={}",
               JobKeyString(key), r.release_id, r.epsilon, r.delta, r.verifier, r.ledger_seq);
  r.payload.clear();
  return r;
}

absl::StatusOr<ReleaseRow> LedgerService::GetRelease(const Caller& caller,
                                                     std::string_view tenant,
                                                     std::string_view release_id,
                                                     bool include_payload) {
  absl::StatusOr<std::string> t = Authorize(caller, tenant, Role::kReader);
  if (!t.ok()) return t.status();
  if (release_id.empty() || release_id.size() > 64) {
    return absl::InvalidArgumentError("release_id must be 1..64 characters");
  }
  absl::StatusOr<std::optional<ReleaseRow>> r = store_->GetRelease(release_id);
  if (!r.ok()) return r.status();
  // Another tenant's release is reported as missing: ids must not leak across tenants.
  if (!r->has_value() || (*r)->key.tenant != *t) {
    return absl::NotFoundError(absl::StrFormat("release '%s' not found", std::string(release_id)));
  }
  if (!include_payload) (*r)->payload.clear();
  return **r;
}

}  // namespace dpledger::server
