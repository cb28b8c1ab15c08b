// Step admission: classification (retry / new / gap), the job's admission policy, and the
// hand-off of admitted updates to the group committer. See ledger_service.h for the rules.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>

#include "absl/strings/str_format.h"
#include "server/ledger_service.h"
#include "spdlog/spdlog.h"

namespace dpledger::server {

namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

absl::StatusOr<std::optional<UpdateRow>> LedgerService::FindAdmitted(JobEntry& entry,
                                                                    int64_t seq) {
  for (auto it = entry.recent.rbegin(); it != entry.recent.rend(); ++it) {
    if (it->seq == seq) return std::optional<UpdateRow>(*it);
    if (it->seq < seq) break;
  }
  absl::StatusOr<std::optional<UpdateRow>> row = store_->GetUpdate(entry.row.key, seq);
  if (row.ok() && !row->has_value() && entry.tail) {
    // Older than the window but not durable yet: wait for the pending commits, then re-read.
    if (absl::Status s = WaitTail(entry.tail); !s.ok()) return s;
    row = store_->GetUpdate(entry.row.key, seq);
  }
  return row;
}

absl::StatusOr<std::vector<PendingAck>> LedgerService::AdmitLocked(JobEntry& entry,
                                                                   std::vector<Item>& items,
                                                                   bool stream,
                                                                   int64_t* stream_refused_seq,
                                                                   double max_seconds) {
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
      it.ack.chain_head = r.chain;
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
      it.ack.refusal_kind = RefusalKind::kNotAttempted;
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

  // 2. The job's admission policy judges the new updates, in seq order.
  const int m_all = static_cast<int>(fresh.size());
  std::vector<UpdateSteps> run;
  run.reserve(m_all);
  for (int i : fresh) run.push_back(items[i].update.steps);
  AdmitContext ctx{job, entry.last_seq,
                   [&](EvrState state, std::string note) {
                     // Conditional on the state this replica saw: a shared store refuses
                     // the mark (ABORTED) if another replica moved the job meanwhile.
                     const EvrState seen = entry.row.evr_state;
                     entry.row.evr_state = state;
                     entry.row.evr_note = note;
                     WriteBatch b;
                     b.evr_marks.push_back({job.key, state, std::move(note), seen});
                     entry.tail = committer_.Submit(std::move(b));
                     return entry.tail;
                   },
                   metrics_,
                   QueryCap(entry.policy->ledger().Name(), max_seconds)};
  AdmitDecision d;
  if (m_all > 0) {
    absl::StatusOr<AdmitDecision> decided = entry.policy->Admit(run, ctx);
    if (!decided.ok()) return decided.status();
    d = *std::move(decided);
  }
  const int admitted = d.admitted;
  if (!d.error.ok()) {
    Item& it = items[fresh[admitted]];
    const absl::Status s(d.error.code(), absl::StrFormat("seq %d: %s", it.update.seq,
                                                         std::string(d.error.message())));
    if (absl::Status r = fail(it, s); !r.ok()) return r;
  }

  // 3. Acks and rows.
  const core::EpsilonBound before = entry.spent();
  const core::EpsilonBound after = d.after;
  WriteBatch batch;
  if (admitted > 0 && d.evr_idle_with_updates) {
    batch.evr_marks.push_back({job.key, EvrState::kIdle, "", EvrState::kVerifying});
  }
  int64_t num_steps = entry.num_steps;
  std::string head = entry.chain_head;  // ledger_chain.h
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
      UpdateRow row{job.key, it.update.seq, it.canonical, b, num_steps, now_ms, ""};
      row.chain = head = ChainUpdate(head, row);
      it.ack.chain_head = head;
      batch.updates.push_back(std::move(row));
    } else if (it.kind == Item::Kind::kNew) {
      it.kind = Item::Kind::kNotAttempted;
      it.ack.seq = it.update.seq;
      if (k == admitted) {
        it.ack.candidate = d.candidate;
        it.ack.refusal_reason = d.refusal_reason;
        it.ack.refusal_kind = d.refusal_kind;
      } else {
        it.ack.refusal_kind = RefusalKind::kNotAttempted;
        it.ack.refusal_reason = absl::StrFormat(
            "not attempted: seq %d before it in this request was refused or failed",
            items[fresh[admitted]].update.seq);
      }
    }
  }
  if (admitted < m_all && stream) *stream_refused_seq = items[fresh[admitted]].update.seq;

  if (admitted > 0) {
    for (const UpdateRow& row : batch.updates) cache_.Remember(entry, row);
    entry.chain_head = head;
    entry.tail = committer_.Submit(std::move(batch));
    entry.row.evr_state = EvrState::kIdle;
    entry.policy = std::move(d.next);
    cache_.PolicyChanged(entry);
    entry.num_steps = num_steps;
    entry.last_seq = items[fresh[admitted - 1]].update.seq;
    if (metrics_) metrics_->JobEpsilon(job_name, after.upper, job.budget_epsilon);
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
      it.ack.spent = entry.spent();
      it.ack.num_steps = entry.num_steps;
      it.ack.last_seq = entry.last_seq;
      it.ack.chain_head = entry.chain_head;
    }
    if (it.kind == Item::Kind::kError) {
      it.ack = Ack{};
      it.ack.seq = it.update.seq;
      it.ack.error = it.error;
    }
    it.ack.accountant = job.accountant;
    it.ack.admission_guarantee = entry.policy->guarantee();
    it.ack.budget_epsilon = job.budget_epsilon;
    it.ack.budget_delta = job.budget_delta;
    if (metrics_) {
      const char* outcome = it.kind == Item::Kind::kError ? "error"
                            : it.ack.duplicate            ? "duplicate"
                            : it.ack.admitted             ? "admitted"
                                                          : "refused";
      metrics_->Update(outcome, it.total_count);
      if (it.kind != Item::Kind::kError && !it.ack.admitted && !it.ack.duplicate) {
        metrics_->Refusal(RefusalKindName(it.ack.refusal_kind));
      }
    }
    out.emplace_back(it.ack, entry.tail);
  }
  return out;
}

}  // namespace dpledger::server
