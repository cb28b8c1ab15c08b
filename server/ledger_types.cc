#include "server/ledger_types.h"

#include <openssl/sha.h>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "server/ledger_chain.h"

namespace dpledger::server {

std::string JobKeyString(const JobKey& key) {
  return absl::StrFormat("%s/%s", key.tenant, key.job_id);
}

std::string CanonicalSteps(const std::vector<core::MechanismEvent>& steps) {
  std::string out;
  for (const core::MechanismEvent& e : steps) {
    if (!out.empty()) out += ';';
    absl::StrAppendFormat(&out, "%s,count=%d", e.mechanism.ToSpec(), e.count);
  }
  return out;
}

absl::StatusOr<std::vector<core::MechanismEvent>> ParseCanonicalSteps(std::string_view text) {
  std::vector<core::MechanismEvent> out;
  for (absl::string_view part :
       absl::StrSplit(absl::string_view(text.data(), text.size()), ';', absl::SkipEmpty())) {
    absl::StatusOr<core::MechanismEvent> e = core::ParseStep(std::string_view(part.data(), part.size()));
    if (!e.ok()) return e.status();
    out.push_back(*e);
  }
  if (out.empty()) return absl::InvalidArgumentError("steps must not be empty");
  return out;
}

absl::StatusOr<std::vector<core::MechanismEvent>> DecodeStoredSteps(const UpdateRow& row) {
  absl::StatusOr<std::vector<core::MechanismEvent>> steps = ParseCanonicalSteps(row.steps);
  if (!steps.ok()) {
    return absl::DataLossError(
        absl::StrFormat("ledger of job '%s' is damaged at seq %d: stored steps unreadable: %s",
                        JobKeyString(row.key), row.seq, std::string(steps.status().message())));
  }
  return steps;
}

std::string_view ScheduleName(Schedule s) {
  return s == Schedule::kAdaptive ? "adaptive" : "declared";
}

std::string_view AdmissionKindName(AdmissionKind k) {
  switch (k) {
    case AdmissionKind::kNatural: return "natural";
    case AdmissionKind::kGdp: return "gdp";
    case AdmissionKind::kRenyi: return "renyi";
    case AdmissionKind::kEvr: return "evr";
  }
  return "unknown";
}

std::string ChainGenesis(const JobRow& j) {
  return chain::Genesis({j.key.tenant, j.key.job_id, j.budget_epsilon, j.budget_delta,
                         static_cast<int>(j.neighbouring), j.accountant, j.mc_seed,
                         j.mc_num_samples, static_cast<int>(j.schedule),
                         std::string(AdmissionKindName(j.admission)), j.plan, j.rdp_order,
                         j.create_time_ms});
}

std::string ChainUpdate(std::string_view prev_head, const UpdateRow& u) {
  return chain::NextUpdate(
      prev_head, {u.key.tenant, u.key.job_id, u.seq, u.steps, u.spent.lower, u.spent.estimate,
                  u.spent.upper, std::string(core::GuaranteeName(u.spent.guarantee)),
                  u.spent.failure_probability, u.num_steps_after, u.commit_time_ms});
}

std::string ChainRelease(std::string_view prev_release, std::string_view update_head,
                         const ReleaseRow& r) {
  return chain::NextRelease(prev_release, update_head,
                            {r.release_id, r.request_id, r.epsilon, r.delta, r.verifier,
                             r.payload_sha256, r.ledger_seq, r.num_steps, r.create_time_ms});
}

std::string Sha256Hex(std::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  std::string out;
  out.reserve(2 * SHA256_DIGEST_LENGTH);
  for (unsigned char c : digest) absl::StrAppendFormat(&out, "%02x", c);
  return out;
}

}  // namespace dpledger::server
