// Start-up consistency check of the ledger (issue 4: "Corruption detected at start-up is
// reported (DATA_LOSS), not ignored"). Works on any Store backend, above the storage-level
// check (Store::CheckIntegrity). Per job: seqs contiguous from 1; stored steps parse;
// num_steps_after is the running sum of the counts; every stored bound is ordered
// (lower <= upper, no NaN); no ack's charged upper bound exceeds the budget epsilon (the
// privacy filter's invariant). Per release: its job exists, ledger_seq <= the job's last seq,
// and the payload's SHA-256 matches. The hash chains (ledger_chain.h) recompute: every
// update's stored head and every release's link must match, so an edited budget, step or
// spent value, or a dropped or reordered entry, is DATA_LOSS naming the job and seq.
#pragma once

#include <functional>
#include <span>

#include <cstdint>

#include "absl/status/status.h"
#include "server/admission_policy.h"
#include "server/store.h"

namespace dpledger::server {

struct LedgerCheckStats {
  int64_t jobs = 0;
  int64_t updates = 0;
  int64_t releases = 0;
};

// Reads one job's stored ledger in seq order, checking what every reader of it relies on:
// seqs contiguous from 1, steps that decode (DecodeStoredSteps), num_steps_after the running
// sum of the counts. `visit` sees each update with its steps. DATA_LOSS "ledger of job '...'
// is damaged at seq N: ..."; I/O errors as the store reports them; visit's errors as they are.
using LedgerVisitor =
    std::function<absl::Status(const UpdateRow&, std::span<const core::MechanismEvent>)>;
// From a known prefix: after_seq updates holding num_steps_before steps (the default: all).
absl::Status ReplayLedger(Store& store, const JobKey& key, const LedgerVisitor& visit,
                          int64_t after_seq = 0, int64_t num_steps_before = 0);

// DATA_LOSS naming the job and seq of the first problem; I/O errors as the store reports them.
absl::Status CheckLedgerConsistency(Store& store, LedgerCheckStats* stats = nullptr);

// Replays every job's admission policy over its stored ledger, one update at a time, and
// checks the stored spent bounds against it (issue 11 defect 7: "the stored per-entry spent
// is never checked against a replay"). The policies are deterministic over the same ledger
// (job_cache.h), so the replayed bound P_k after update k is the one the service computed
// for any request ending at k. The service stores, for each update of a request admitted
// as a group ending at j >= k, upper = P_j.upper >= P_k.upper (charges only grow). So:
// (a) every update: stored upper >= P_k.upper (a lowered charge is caught), and
// (b) the job's last update, always the end of its group: stored upper == P_n.upper;
// both up to a relative 1e-9 for floating-point association in grouped composition. A
// stored update the policy refuses on replay is DATA_LOSS too. "evr" jobs are skipped (their
// admission drew Monte Carlo samples; CheckLedgerConsistency's upper <= budget holds them).
// Costs one admission per stored update: run with dpledgerd --replay-ledger.
using PolicyOptionsFn = std::function<PolicyOptions(const JobRow&)>;
absl::Status ReplaySpent(Store& store, const PolicyOptionsFn& policy_options,
                         LedgerCheckStats* stats = nullptr);

}  // namespace dpledger::server
