// Client-side check of the tamper-evident ledger (server/ledger_chain.h; README "Security:
// the tamper-evident ledger"). A client that kept (seq, chain_head) from an ack or from
// `job get` later fetches the job (GetJob) and its ledger from seq 1 (GetLedger pages) and
// recomputes the chain: if the head it computes at `seq` is not the one it kept, the
// server's history was rewritten (an entry dropped, edited or reordered, or the job's
// budget or configuration changed) since it was told that head.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/dpledger.pb.h"

namespace dpledger::client {

// head_0 of `job` (its creation record as GetJob returns it).
std::string ChainGenesis(const v1::Job& job);
// The head after `entry` given the head before it (job: for its tenant and id).
std::string ChainNext(const v1::Job& job, std::string_view prev_head, const v1::LedgerEntry& entry);

// Recomputes `job`'s chain over `entries` (its ledger from seq 1, in order) and checks that
// (a) each entry's chain_head is the recomputed one, (b) the head at `held_seq` is
// `held_head` (held_seq 0: head_0), and (c) when the entries reach job.last_seq, the job's
// chain_head. Returns the recomputed head at the last entry; DATA_LOSS naming the first
// seq where the history differs.
absl::StatusOr<std::string> VerifyChain(const v1::Job& job,
                                        std::span<const v1::LedgerEntry> entries,
                                        int64_t held_seq, std::string_view held_head);

}  // namespace dpledger::client
