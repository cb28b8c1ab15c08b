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
absl::Status ReplayLedger(Store& store, const JobKey& key, const LedgerVisitor& visit);

// DATA_LOSS naming the job and seq of the first problem; I/O errors as the store reports them.
absl::Status CheckLedgerConsistency(Store& store, LedgerCheckStats* stats = nullptr);

}  // namespace dpledger::server
