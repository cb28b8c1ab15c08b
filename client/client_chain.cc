#include "client/client_chain.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "server/ledger_chain.h"

namespace dpledger::client {
namespace {

// Canonical steps text (server CanonicalSteps): each Step's spec already ends ",count=N".
std::string StepsText(const google::protobuf::RepeatedPtrField<v1::Step>& steps) {
  return absl::StrJoin(steps, ";", [](std::string* out, const v1::Step& s) { out->append(s.spec()); });
}

std::string GuaranteeName(v1::Guarantee g) {
  switch (g) {
    case v1::GUARANTEE_CERTIFIED: return "certified";
    case v1::GUARANTEE_STATISTICAL: return "statistical";
    case v1::GUARANTEE_ESTIMATE: return "estimate";
    default: return "unspecified";
  }
}

absl::Status Rewritten(const v1::Job& job, int64_t seq, std::string_view what) {
  return absl::DataLossError(absl::StrFormat(
      "ledger of job '%s/%s' was rewritten at or before seq %d: %s", job.tenant(), job.job_id(),
      seq, std::string(what)));
}

}  // namespace

std::string ChainGenesis(const v1::Job& job) {
  chain::JobFields f;
  f.tenant = job.tenant();
  f.job_id = job.job_id();
  f.budget_epsilon = job.budget().epsilon();
  f.budget_delta = job.budget().delta();
  f.neighbouring = job.neighbouring() == v1::NEIGHBOURING_RELATION_REPLACE_ONE ? 2 : 1;
  f.accountant = job.accountant();
  f.mc_seed = job.mc().seed();
  f.mc_num_samples = job.mc().num_samples();
  f.schedule = job.schedule() == v1::SCHEDULE_ADAPTIVE ? 2 : 1;
  f.admission = job.admission();
  f.plan = StepsText(job.plan());
  f.rdp_order = job.rdp_order();
  f.create_time_ms = job.create_time_unix_ms();
  return chain::Genesis(f);
}

std::string ChainNext(const v1::Job& job, std::string_view prev_head, const v1::LedgerEntry& e) {
  chain::UpdateFields f;
  f.tenant = job.tenant();
  f.job_id = job.job_id();
  f.seq = e.seq();
  f.steps = StepsText(e.steps());
  f.lower = e.spent().lower();
  f.estimate = e.spent().estimate();
  f.upper = e.spent().upper();
  f.guarantee = GuaranteeName(e.spent().guarantee());
  f.failure_probability = e.spent().failure_probability();
  f.num_steps_after = e.num_steps_after();
  f.commit_time_ms = e.commit_time_unix_ms();
  return chain::NextUpdate(prev_head, f);
}

absl::StatusOr<std::string> VerifyChain(const v1::Job& job,
                                        std::span<const v1::LedgerEntry> entries,
                                        int64_t held_seq, std::string_view held_head) {
  std::string head = ChainGenesis(job);
  if (held_seq == 0 && head != held_head) {
    return Rewritten(job, 0, "the job's configuration (budget, accountant, schedule, plan) "
                             "is not the one the held head was computed from");
  }
  int64_t seq = 0;
  for (const v1::LedgerEntry& e : entries) {
    if (e.seq() != seq + 1) {
      return Rewritten(job, e.seq(), absl::StrFormat("seq %d follows seq %d", e.seq(), seq));
    }
    seq = e.seq();
    head = ChainNext(job, head, e);
    if (e.chain_head() != head) {
      return Rewritten(job, seq, absl::StrFormat("the entry's chain_head %s is not the "
                                                 "recomputed %s", e.chain_head(), head));
    }
    if (seq == held_seq && head != held_head) {
      return Rewritten(job, seq, absl::StrFormat(
          "the held head %s is not the recomputed %s: an entry up to seq %d or the job's "
          "configuration changed", std::string(held_head), head, seq));
    }
  }
  if (seq < held_seq) {
    return Rewritten(job, seq, absl::StrFormat(
        "the ledger ends at seq %d but seq %d was acknowledged", seq, held_seq));
  }
  if (seq == job.last_seq() && job.chain_head() != head) {
    return Rewritten(job, seq, "the job's chain_head is not the recomputed head");
  }
  return head;
}

}  // namespace dpledger::client
