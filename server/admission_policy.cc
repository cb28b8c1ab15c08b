#include "server/admission_policy.h"

#include "absl/strings/str_format.h"
#include "server/evr_policy.h"
#include "server/filter_policy.h"

namespace dpledger::server {

std::string AdmissionGuarantee(const JobRow& job) {
  switch (job.admission) {
    case AdmissionKind::kNatural:
      return absl::StrFormat("natural filter over a declared schedule (%s)", job.accountant);
    case AdmissionKind::kGdp:
      return "gdp filter";
    case AdmissionKind::kRenyi:
      return absl::StrFormat("renyi filter at order %g", job.rdp_order);
    case AdmissionKind::kEvr:
      return "evr";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<AdmissionPolicy>> CreateAdmissionPolicy(
    const JobRow& job, const PolicyOptions& options,
    std::span<const core::MechanismEvent> ledger,
    const std::optional<core::EpsilonBound>& stored_spent) {
  if (job.admission == AdmissionKind::kEvr) {
    return CreateEvrPolicy(job, options, ledger, stored_spent);
  }
  return CreateFilterPolicy(job, options, ledger);
}

absl::StatusOr<int64_t> LargestFitting(int64_t n_max,
                                       const std::function<absl::StatusOr<bool>(int64_t)>& fits,
                                       bool try_max_first) {
  if (n_max <= 0) return 0;
  if (try_max_first) {
    absl::StatusOr<bool> all = fits(n_max);
    if (!all.ok()) return all.status();
    if (*all) return n_max;
  }
  int64_t lo = 0, hi = 1;  // fits(lo); hi not yet known
  for (;;) {
    if (hi >= n_max) {
      if (try_max_first) break;  // n_max is known not to fit
      absl::StatusOr<bool> f = fits(n_max);
      if (!f.ok()) return f.status();
      if (*f) return n_max;
      hi = n_max;
      break;
    }
    absl::StatusOr<bool> f = fits(hi);
    if (!f.ok()) return f.status();
    if (!*f) break;
    lo = hi;
    hi = hi > n_max / 2 ? n_max : hi * 2;
  }
  hi = std::min(hi, n_max);
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    absl::StatusOr<bool> f = fits(mid);
    if (!f.ok()) return f.status();
    (*f ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace dpledger::server
