// The tamper-evident ledger (issue 11 "Hardening", defect 7): every job's updates form a
// hash chain, and its releases a second chain bound to the first.
//
//   head_0 = H(genesis record: tenant, job_id, budget, neighbouring, accountant, mc options,
//              schedule, admission, plan, rdp_order, create time)
//   head_n = H("update", head_{n-1}, tenant, job_id, seq n, steps text, stored spent bound
//              (lower, estimate, upper, guarantee, failure probability), num_steps_after,
//              commit time)
//   rel_0  = head_0;  rel_k = H("release", rel_{k-1}, head at the release's ledger_seq,
//              its fields and payload SHA-256)
// H is SHA-256 over a length-prefixed encoding ("<bytes>:<text>" per field; integers in
// decimal, doubles as the 16 hex digits of their IEEE-754 bits, so the encoding is
// injective and exact); heads are lower-case hex. Every ack and `job get` carries the head
// at its last_seq.
//
// What it proves (collision resistance of SHA-256): a client that kept (seq k, head_k) from
// an ack and later recomputes the chain from GetJob + GetLedger finds head_k again only if
// the job's configuration and its first k entries are exactly those it was answered about -
// a dropped, edited or reordered entry, or an edited budget/plan, changes head_k. At
// start-up the server recomputes every chain against the stored heads, so an edit of any
// stored field (without recomputing the later heads) is DATA_LOSS naming job, seq and
// field. What it does NOT prove: whoever can write the database can recompute every head
// after an edit (the chain is not signed); only a party outside the store holding an old
// head (a client, or the high-water mark beside the store: store_mark.h) catches that. It
// says nothing about entries after the newest head a client holds (dropping the tail is
// caught by the high-water mark, not by the chain), nor that the accounting was right:
// replaying the spent values is ledger_check.h's job.
//
// Why releases get their own chain: releases are written by the release path (minutes of
// verification, no job lock held meanwhile) beside admissions. Interleaving them into the
// update chain would make every release move the head a concurrent admission builds on;
// a separate chain whose genesis is the job's head_0, each link binding the update head it
// covers, keeps admission's head independent while still binding every release to the
// ledger prefix it was verified for.
//
// No gRPC, no server types: the client's verifier (client/chain_verify.*) uses this too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dpledger::chain {

// The fields of a job's creation record (enums as their proto numbers; admission by name).
struct JobFields {
  std::string tenant, job_id;
  double budget_epsilon = 0, budget_delta = 0;
  int neighbouring = 0;       // 1 add-remove, 2 replace-one
  std::string accountant;
  uint64_t mc_seed = 0;
  int64_t mc_num_samples = 0;
  int schedule = 0;           // 1 declared, 2 adaptive
  std::string admission;      // "natural", "gdp", "renyi", "evr"
  std::string plan;           // canonical steps text, "" = the implicit plan
  double rdp_order = 0;
  int64_t create_time_ms = 0;
};

struct UpdateFields {
  std::string tenant, job_id;
  int64_t seq = 0;
  std::string steps;          // canonical steps text "spec,count=N;spec,count=N"
  double lower = 0, estimate = 0, upper = 0;
  std::string guarantee;      // "certified", "statistical", "estimate"
  double failure_probability = 0;
  int64_t num_steps_after = 0;
  int64_t commit_time_ms = 0;
};

struct ReleaseFields {
  std::string release_id, request_id;
  double epsilon = 0, delta = 0;
  std::string verifier;
  std::string payload_sha256;
  int64_t ledger_seq = 0, num_steps = 0, create_time_ms = 0;
};

std::string Genesis(const JobFields& job);
std::string NextUpdate(std::string_view prev_head, const UpdateFields& u);
std::string NextRelease(std::string_view prev_release, std::string_view update_head,
                        const ReleaseFields& r);

}  // namespace dpledger::chain
