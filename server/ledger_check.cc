#include "server/ledger_check.h"

#include <cmath>
#include <functional>

#include "absl/strings/str_format.h"

namespace dpledger::server {
namespace {

constexpr int kPage = 10000;

absl::Status Damaged(const JobKey& key, int64_t seq, std::string_view what) {
  return absl::DataLossError(absl::StrFormat("ledger of job '%s' is damaged at seq %d: %s",
                                             JobKeyString(key), seq, std::string(what)));
}

}  // namespace

absl::Status ReplayLedger(Store& store, const JobKey& key, const LedgerVisitor& visit,
                          int64_t after_seq, int64_t num_steps_before) {
  int64_t last = after_seq, num_steps = num_steps_before;
  for (;;) {
    absl::StatusOr<std::vector<UpdateRow>> rows = store.ListUpdates(key, last, kPage);
    if (!rows.ok()) return rows.status();
    for (const UpdateRow& u : *rows) {
      if (u.seq != last + 1) return Damaged(key, u.seq, absl::StrFormat("follows seq %d", last));
      absl::StatusOr<std::vector<core::MechanismEvent>> steps = DecodeStoredSteps(u);
      if (!steps.ok()) return steps.status();
      for (const core::MechanismEvent& e : *steps) num_steps += e.count;
      if (u.num_steps_after != num_steps) {
        return Damaged(key, u.seq, absl::StrFormat("num_steps_after %d, expected %d",
                                                   u.num_steps_after, num_steps));
      }
      if (absl::Status s = visit(u, *steps); !s.ok()) return s;
      last = u.seq;
    }
    if (static_cast<int>(rows->size()) < kPage) return absl::OkStatus();
  }
}

namespace {

constexpr double kReplayRelTolerance = 1e-9;

absl::Status ReplayJob(Store& store, const JobRow& job, const PolicyOptions& options,
                       LedgerCheckStats& stats) {
  absl::StatusOr<std::unique_ptr<AdmissionPolicy>> policy =
      CreateAdmissionPolicy(job, options, {}, std::nullopt);
  if (!policy.ok()) return Damaged(job.key, 0, std::string(policy.status().message()));
  std::optional<UpdateRow> last;
  core::EpsilonBound replayed;
  absl::Status s = ReplayLedger(
      store, job.key,
      [&](const UpdateRow& u, std::span<const core::MechanismEvent> steps) -> absl::Status {
        ++stats.updates;
        const UpdateSteps one[] = {UpdateSteps(steps.begin(), steps.end())};
        AdmitContext ctx{job, u.seq - 1, [](EvrState, std::string) { return CommitTicketPtr(); },
                         nullptr};
        absl::StatusOr<AdmitDecision> d = (*policy)->Admit(one, ctx);
        if (!d.ok()) return d.status();
        if (d->admitted != 1) {
          return Damaged(job.key, u.seq, absl::StrFormat(
              "the admission policy refuses this stored update on replay: %s",
              d->error.ok() ? d->refusal_reason : std::string(d->error.message())));
        }
        replayed = d->after;
        if (u.spent.upper < replayed.upper * (1 - kReplayRelTolerance)) {
          return Damaged(job.key, u.seq, absl::StrFormat(
              "stored spent upper %.17g is below the replayed %.17g", u.spent.upper,
              replayed.upper));
        }
        *policy = std::move(d->next);
        last = u;
        return absl::OkStatus();
      });
  if (!s.ok()) return s;
  if (last && std::abs(last->spent.upper - replayed.upper) >
                  kReplayRelTolerance * std::abs(replayed.upper)) {
    return Damaged(job.key, last->seq, absl::StrFormat(
        "stored spent upper %.17g of the last update is not the replayed %.17g",
        last->spent.upper, replayed.upper));
  }
  return absl::OkStatus();
}

// Calls visit for every job of every tenant in key order, a page of jobs at a time.
absl::Status ForEachJob(Store& store, const std::function<absl::Status(const JobRow&)>& visit) {
  JobKey after;
  for (;;) {
    absl::StatusOr<std::vector<JobRow>> jobs = store.ListAllJobs(after, kPage);
    if (!jobs.ok()) return jobs.status();
    for (const JobRow& job : *jobs) {
      if (absl::Status s = visit(job); !s.ok()) return s;
    }
    if (static_cast<int>(jobs->size()) < kPage) return absl::OkStatus();
    after = jobs->back().key;
  }
}

}  // namespace

absl::Status ReplaySpent(Store& store, const PolicyOptionsFn& policy_options,
                         LedgerCheckStats* stats) {
  LedgerCheckStats local;
  absl::Status s = ForEachJob(store, [&](const JobRow& job) -> absl::Status {
    if (job.admission == AdmissionKind::kEvr) return absl::OkStatus();
    ++local.jobs;
    return ReplayJob(store, job, policy_options(job), local);
  });
  if (!s.ok()) return s;
  if (stats) *stats = local;
  return absl::OkStatus();
}

absl::Status CheckLedgerConsistency(Store& store, LedgerCheckStats* stats) {
  LedgerCheckStats local;
  absl::Status status = ForEachJob(store, [&](const JobRow& job) -> absl::Status {
    ++local.jobs;
    if (!(job.budget_epsilon > 0) || !(job.budget_delta > 0 && job.budget_delta < 1)) {
      return Damaged(job.key, 0, absl::StrFormat("budget (%g, %g) is invalid",
                                                 job.budget_epsilon, job.budget_delta));
    }
    int64_t last = 0;
    std::vector<std::string> heads = {ChainGenesis(job)};  // heads[seq] (ledger_chain.h)
    absl::Status s = ReplayLedger(
        store, job.key,
        [&](const UpdateRow& u, std::span<const core::MechanismEvent>) -> absl::Status {
          ++local.updates;
          last = u.seq;
          heads.push_back(ChainUpdate(heads.back(), u));
          if (u.chain != heads.back()) {
            return Damaged(job.key, u.seq, absl::StrFormat(
                "chain head %s, recomputed %s: %s", u.chain.empty() ? "(none)" : u.chain,
                heads.back(),
                u.seq == 1 ? "the job's configuration (budget, accountant, schedule, plan) "
                             "or this entry was edited"
                           : "this entry (steps, spent, num_steps_after) or one before it "
                             "was edited, dropped or reordered"));
          }
          const core::EpsilonBound& b = u.spent;
          if (std::isnan(b.lower) || std::isnan(b.upper) || std::isnan(b.estimate) ||
              b.lower > b.upper) {
            return Damaged(job.key, u.seq, absl::StrFormat("spent bound [%g, %g] is invalid",
                                                           b.lower, b.upper));
          }
          if (b.upper > job.budget_epsilon) {
            return Damaged(job.key, u.seq,
                           absl::StrFormat("charged epsilon %g exceeds the budget %g", b.upper,
                                           job.budget_epsilon));
          }
          return absl::OkStatus();
        });
    if (!s.ok()) return s;
    absl::StatusOr<std::vector<ReleaseRow>> releases = store.ListReleases(job.key);
    if (!releases.ok()) return releases.status();
    std::string link = heads[0];
    for (const ReleaseRow& r : *releases) {
      ++local.releases;
      if (r.ledger_seq > last || r.ledger_seq < 0) {
        return Damaged(job.key, r.ledger_seq,
                       absl::StrFormat("release '%s' covers seq %d beyond the ledger",
                                       r.release_id, r.ledger_seq));
      }
      link = ChainRelease(link, heads[r.ledger_seq], r);
      if (r.chain != link) {
        return Damaged(job.key, r.ledger_seq, absl::StrFormat(
            "release '%s' chain link does not match its recomputation: it or a release "
            "before it was edited or dropped", r.release_id));
      }
      if (Sha256Hex(r.payload) != r.payload_sha256) {
        return Damaged(job.key, r.ledger_seq, absl::StrFormat(
            "release '%s' payload does not match its SHA-256", r.release_id));
      }
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  if (stats) *stats = local;
  return absl::OkStatus();
}

}  // namespace dpledger::server
