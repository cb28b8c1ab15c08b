// Step admission: classification (retry / new / gap), the privacy filter on a Clone, and the
// hand-off of admitted updates to the group committer. See ledger_service.h for the rules.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>

#include "absl/strings/str_format.h"
#include "core/util/check.h"
#include "server/ledger_service.h"
#include "spdlog/spdlog.h"

namespace dpledger::server {

namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Whether a bound may charge the budget, and if not, why. With `explain` (the accountant
// that answered b), an estimate's refusal carries the accountant's own reason why it could
// not certify (e.g. Edgeworth: its finite-sample error bounds are too wide at this delta).
struct Verdict {
  bool fits = false;
  std::string reason;
};
Verdict Judge(const absl::StatusOr<core::EpsilonBound>& b, const core::Accountant* explain,
              std::string_view accountant, double budget_epsilon, double budget_delta) {
  if (!b.ok()) {
    return {false, absl::StrFormat("accountant '%s' cannot bound epsilon at delta %g: %s",
                                   std::string(accountant), budget_delta,
                                   std::string(b.status().message()))};
  }
  if (b->guarantee == core::Guarantee::kEstimate) {
    const std::string why = explain ? core::UncertifiedReason(*explain) : "";
    return {false, absl::StrFormat("accountant '%s' gave an estimate, not a certified bound, "
                                   "at delta %g (estimate %.6g, certified lower %.6g, no "
                                   "certified upper)%s; only certified or verified bounds "
                                   "admit steps",
                                   std::string(accountant), budget_delta, b->estimate, b->lower,
                                   why.empty() ? "" : ": " + why)};
  }
  if (!(b->upper <= budget_epsilon)) {  // also false for NaN
    return {false, absl::StrFormat("epsilon upper bound %.6g at delta %g would exceed the "
                                   "budget epsilon %g",
                                   b->upper, budget_delta, budget_epsilon)};
  }
  return {true, ""};
}

}  // namespace

absl::StatusOr<std::optional<UpdateRow>> LedgerService::FindAdmitted(JobEntry& entry,
                                                                    int64_t seq) {
  for (auto it = entry.recent.rbegin(); it != entry.recent.rend(); ++it) {
    if (it->row.seq == seq) return std::optional<UpdateRow>(it->row);
    if (it->row.seq < seq) break;
  }
  absl::StatusOr<std::optional<UpdateRow>> row = store_->GetUpdate(entry.row.key, seq);
  if (row.ok() && !row->has_value() && entry.tail) {
    // Older than the window but not durable yet: wait for the pending commits, then re-read.
    if (absl::Status s = WaitTail(entry.tail); !s.ok()) return s;
    row = store_->GetUpdate(entry.row.key, seq);
  }
  return row;
}

absl::StatusOr<EvrAdmissionResult> LedgerService::VerifyEvrLocked(
    JobEntry& entry, std::span<const core::MechanismEvent> candidate) {
  const JobRow& job = entry.row;
  const std::string job_name = JobKeyString(job.key);
  if (job.evr_state != EvrState::kIdle) {
    EvrAdmissionResult r;
    r.reason = absl::StrFormat("EVR admission of job '%s' has stopped for good: %s",
                               job.key.job_id, EvrStoppedReason(job.evr_state, job.evr_note));
    if (metrics_) metrics_->Verification("admission", "refused");
    return r;
  }
  // The marks go through the committer behind the job's earlier writes; acks wait on
  // entry.tail, so a refusal is sent only once its kStopped mark is durable.
  auto mark = [&](EvrState state, std::string note) {
    entry.row.evr_state = state;
    entry.row.evr_note = note;
    WriteBatch b;
    b.evr_marks.push_back({job.key, state, std::move(note)});
    entry.tail = committer_.Submit(std::move(b));
    return entry.tail;
  };
  absl::StatusOr<EvrAdmissionResult> r = VerifyForAdmission(
      candidate, job.budget_epsilon, job.budget_delta, options_.evr_admission,
      [&]() -> absl::Status {
        if (absl::Status s = mark(EvrState::kVerifying, "")->Wait(); !s.ok()) {
          return absl::UnavailableError(absl::StrFormat(
              "job '%s': the verification could not be marked durably before sampling (%s); "
              "retry",
              job_name, std::string(s.message())));
        }
        return absl::OkStatus();
      });
  const char* outcome = !r.ok()                                  ? "error"
                        : r->decision == EvrDecision::kAccepted ? "accepted"
                        : r->decision == EvrDecision::kRejected ? "rejected"
                                                                 : "refused";
  if (metrics_) metrics_->Verification("admission", outcome);
  if (!r.ok() || r->decision == EvrDecision::kRefused) {
    // Nothing was decided from verification samples: admitting may go on.
    if (entry.row.evr_state == EvrState::kVerifying) mark(EvrState::kIdle, "");
    return r;
  }
  if (r->decision == EvrDecision::kRejected) {
    mark(EvrState::kStopped,
         absl::StrFormat("the verification of the updates after seq %d did not accept (%s)",
                         entry.last_seq, r->reason));
    spdlog::warn("job={} evr admission stopped: {}", job_name, r->reason);
  } else {
    spdlog::info("job={} evr admission accepted samples={} seconds={:.3f} backend={}", job_name,
                 r->num_samples, r->seconds, r->backend);
  }
  return r;
}

absl::StatusOr<std::vector<PendingAck>> LedgerService::AdmitLocked(JobEntry& entry,
                                                                   std::vector<Item>& items,
                                                                   bool stream,
                                                                   int64_t* stream_refused_seq) {
  const JobRow& job = entry.row;
  const std::string job_name = JobKeyString(job.key);
  auto fail = [&](Item& it, absl::Status s) -> absl::Status {
    it.kind = Item::Kind::kError;
    it.error = std::move(s);
    return stream ? absl::OkStatus() : it.error;
  };

  // 1. Classify against the ledger as it would be if every new update were admitted.
  const int64_t base_last = entry.last_seq;
  int64_t expected = base_last + 1;
  std::map<int64_t, int> new_by_seq;
  std::vector<int> fresh;  // indices of new updates, in seq order
  for (int i = 0; i < static_cast<int>(items.size()); ++i) {
    Item& it = items[i];
    if (!it.input_error.ok()) {
      if (absl::Status s = fail(it, it.input_error); !s.ok()) return s;
      continue;
    }
    const int64_t seq = it.update.seq;
    if (seq < expected && seq > base_last) {
      const int j = new_by_seq.at(seq);
      if (items[j].canonical == it.canonical) {
        it.kind = Item::Kind::kSameAsEarlier;
        it.earlier = j;
      } else if (absl::Status s = fail(it, absl::AlreadyExistsError(absl::StrFormat(
                     "seq %d is used twice with different steps", seq)));
                 !s.ok()) {
        return s;
      }
    } else if (seq < expected) {
      absl::StatusOr<std::optional<UpdateRow>> row = FindAdmitted(entry, seq);
      if (!row.ok()) return row.status();
      if (!row->has_value()) {
        return absl::DataLossError(absl::StrFormat(
            "job '%s': admitted update seq %d is missing from the store", job_name, seq));
      }
      const UpdateRow& r = **row;
      if (r.steps != it.canonical) {
        if (absl::Status s = fail(it, absl::AlreadyExistsError(absl::StrFormat(
                "seq %d of job '%s' was already admitted with different steps (%s)", seq,
                job_name, r.steps.substr(0, 200))));
            !s.ok()) {
          return s;
        }
        continue;
      }
      it.kind = Item::Kind::kDuplicate;
      it.ack.seq = seq;
      it.ack.admitted = true;
      it.ack.duplicate = true;
      it.ack.spent = r.spent;
      it.ack.num_steps = r.num_steps_after;
      it.ack.last_seq = seq;
    } else if (seq == expected) {
      if (job.state != JobState::kOpen) {
        if (absl::Status s = fail(it, absl::FailedPreconditionError(absl::StrFormat(
                "job '%s' is closed: no more steps are admitted", job_name)));
            !s.ok()) {
          return s;
        }
        continue;
      }
      it.kind = Item::Kind::kNew;
      new_by_seq[seq] = i;
      fresh.push_back(i);
      ++expected;
    } else if (stream && *stream_refused_seq == expected) {
      it.kind = Item::Kind::kNotAttempted;
      it.ack.seq = seq;
      it.ack.refusal_reason = absl::StrFormat(
          "not attempted: seq %d on this stream was refused, so seq %d cannot follow yet",
          *stream_refused_seq, seq);
    } else if (absl::Status s = fail(it, absl::FailedPreconditionError(absl::StrFormat(
                   "seq %d leaves a gap: job '%s' expects seq %d next (last admitted seq %d)",
                   seq, job_name, expected, base_last)));
               !s.ok()) {
      return s;
    }
  }

  // 2. Compose the new updates on a clone; an update the accountant cannot take stops the run.
  const int m_all = static_cast<int>(fresh.size());
  int m = m_all;
  std::unique_ptr<core::Accountant> full = entry.accountant->Clone();
  for (int k = 0; k < m_all && m == m_all; ++k) {
    Item& it = items[fresh[k]];
    for (const core::MechanismEvent& e : it.update.steps) {
      absl::Status s = full->Compose(e);
      if (!s.ok()) {
        s = absl::Status(s.code(), absl::StrFormat("seq %d: %s", it.update.seq,
                                                   std::string(s.message())));
        if (absl::Status r = fail(it, s); !r.ok()) return r;
        m = k;
        full.reset();  // holds part of update k: prefixes are recomposed from the ledger
        break;
      }
    }
  }

  // 3. The privacy filter: the longest prefix of the run whose bound fits the budget
  //    (certified accountants), or the whole run if its verification accepts (evr).
  const double delta = job.budget_delta;
  const core::EpsilonBound before = entry.spent;
  int admitted = 0;
  Verdict refusal;
  core::EpsilonBound after = before;
  std::unique_ptr<core::Accountant> kept;         // the accountant over the admitted ledger
  std::optional<core::EpsilonBound> candidate;    // the refused update's bound, if known
  // The ledger with the first k new updates: `full` when k == m, else recomposed.
  auto prefix = [&](int k) {
    if (k == m && full) return std::move(full);
    std::unique_ptr<core::Accountant> acc = entry.accountant->Clone();
    for (int j = 0; j < k; ++j) {
      for (const core::MechanismEvent& e : items[fresh[j]].update.steps) {
        DPL_CHECK_OK(acc->Compose(e));  // composed once already in step 2
      }
    }
    return acc;
  };
  const bool evr = job.accountant == kEvrAdmission;
  if (evr && m > 0) {
    std::unique_ptr<core::Accountant> run = prefix(m);
    absl::StatusOr<EvrAdmissionResult> v = VerifyEvrLocked(entry, run->events());
    if (!v.ok()) {
      // Nothing was decided from samples; the error belongs to the run (e.g. a mechanism
      // without a proven moment bound), reported on its first update.
      Item& it = items[fresh[0]];
      const absl::Status s(v.status().code(),
                           absl::StrFormat("seq %d: %s", it.update.seq,
                                           std::string(v.status().message())));
      if (absl::Status r = fail(it, s); !r.ok()) return r;
      m = 0;
    } else if (v->decision == EvrDecision::kAccepted) {
      admitted = m;
      after = v->spent;
      kept = std::move(run);
    } else {
      refusal.reason = v->reason;
    }
  }
  if (!evr) {
    std::map<int, std::pair<absl::StatusOr<core::EpsilonBound>, std::unique_ptr<core::Accountant>>>
        evaluated;
    auto evaluate = [&](int k) -> const absl::StatusOr<core::EpsilonBound>& {
      auto it = evaluated.find(k);
      if (it != evaluated.end()) return it->second.first;
      std::unique_ptr<core::Accountant> acc = prefix(k);
      absl::StatusOr<core::EpsilonBound> b = acc->EpsilonForDelta(delta);
      return evaluated.emplace(k, std::make_pair(std::move(b), std::move(acc)))
          .first->second.first;
    };
    // Only the refusal that is reported is explained (the search judges many prefixes).
    auto fits = [&](int k, bool explain = false) {
      const absl::StatusOr<core::EpsilonBound>& b = evaluate(k);
      return Judge(b, explain ? evaluated.at(k).second.get() : nullptr, job.accountant,
                   job.budget_epsilon, delta);
    };
    if (m > 0) {
      refusal = fits(m);
      if (refusal.fits) {
        admitted = m;
      } else {
        int lo = 0, hi = m;  // prefix lo fits (the current ledger), prefix hi does not
        while (hi - lo > 1) {
          const int mid = lo + (hi - lo) / 2;
          if (fits(mid).fits) {
            lo = mid;
          } else {
            hi = mid;
          }
        }
        admitted = lo;
        refusal = fits(lo + 1, /*explain=*/true);
        if (const auto& c = evaluate(lo + 1); c.ok()) candidate = *c;
      }
    }
    if (admitted > 0) {
      after = *evaluate(admitted);
      kept = std::move(evaluated.at(admitted).second);
    }
  }

  // 4. Acks and rows.
  WriteBatch batch;
  // An accepted evr verification that sampled returns the job to idle with its updates.
  if (admitted > 0 && entry.row.evr_state == EvrState::kVerifying) {
    batch.evr_marks.push_back({job.key, EvrState::kIdle, ""});
  }
  int64_t num_steps = entry.num_steps;
  const int64_t now_ms = NowMs();
  for (int k = 0; k < m_all; ++k) {
    Item& it = items[fresh[k]];
    if (k < admitted) {
      num_steps += it.total_count;
      core::EpsilonBound b = after;
      if (k + 1 < admitted) {
        // Inside a group: [lower before the group, upper after it] contains the true epsilon.
        b.lower = std::min(before.lower, after.upper);
        b.estimate = std::clamp(after.estimate, b.lower, after.upper);
      }
      it.ack.seq = it.update.seq;
      it.ack.admitted = true;
      it.ack.spent = b;
      it.ack.num_steps = num_steps;
      it.ack.last_seq = it.update.seq;
      batch.updates.push_back(
          UpdateRow{job.key, it.update.seq, it.canonical, b, num_steps, now_ms});
    } else if (it.kind == Item::Kind::kNew) {
      it.kind = Item::Kind::kNotAttempted;
      it.ack.seq = it.update.seq;
      if (k == admitted && k < m) {
        it.ack.candidate = candidate;
        it.ack.refusal_reason = refusal.reason;
      } else {
        it.ack.refusal_reason = absl::StrFormat(
            "not attempted: seq %d before it in this request was refused or failed",
            items[fresh[admitted]].update.seq);
      }
    }
  }
  if (admitted < m_all && stream) *stream_refused_seq = items[fresh[admitted]].update.seq;

  if (admitted > 0) {
    entry.tail = committer_.Submit(std::move(batch));
    entry.row.evr_state = EvrState::kIdle;
    entry.accountant = std::move(kept);
    if (UpdateBytesLocked(entry)) EvictIfNeeded();
    entry.spent = after;
    entry.num_steps = num_steps;
    entry.last_seq = items[fresh[admitted - 1]].update.seq;
    for (int k = 0; k < admitted; ++k) {
      const Item& it = items[fresh[k]];
      entry.recent.push_back({UpdateRow{job.key, it.update.seq, it.canonical, it.ack.spent,
                                        it.ack.num_steps, now_ms}});
    }
    while (static_cast<int>(entry.recent.size()) > options_.recent_updates_window) {
      entry.recent.pop_front();
    }
    if (metrics_) metrics_->JobEpsilonSpent(job_name, after.upper);
  }

  // 5. Every ack waits for the job's newest commit: it (and all before it) must be durable.
  std::vector<PendingAck> out;
  out.reserve(items.size());
  for (Item& it : items) {
    if (it.kind == Item::Kind::kSameAsEarlier) {
      it.ack = items[it.earlier].ack;
      it.ack.duplicate = it.ack.admitted;
    }
    if (it.kind == Item::Kind::kNotAttempted) {
      it.ack.admitted = false;
      it.ack.spent = entry.spent;
      it.ack.num_steps = entry.num_steps;
      it.ack.last_seq = entry.last_seq;
    }
    if (it.kind == Item::Kind::kError) {
      it.ack = Ack{};
      it.ack.seq = it.update.seq;
      it.ack.error = it.error;
    }
    it.ack.accountant = job.accountant;
    it.ack.budget_epsilon = job.budget_epsilon;
    it.ack.budget_delta = job.budget_delta;
    if (metrics_) {
      const char* outcome = it.kind == Item::Kind::kError ? "error"
                            : it.ack.duplicate            ? "duplicate"
                            : it.ack.admitted             ? "admitted"
                                                          : "refused";
      metrics_->Update(outcome, it.total_count);
    }
    out.emplace_back(it.ack, entry.tail);
  }
  return out;
}

}  // namespace dpledger::server
