// Plain records shared by the ledger service and the stores: no gRPC, no protobuf.
// Proto <-> these conversions live in server/convert.{h,cc} only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/accountants/accountant.h"
#include "core/mechanisms/mechanism.h"

namespace dpledger::server {

enum class JobState { kOpen = 1, kClosed = 2 };
enum class Neighbouring { kAddRemove = 1, kReplaceOne = 2 };

// Where an "evr" job's step admission stands (server/evr_admission.h). Durable, because a
// verification that sampled and did not accept must never be followed by another one.
enum class EvrState {
  kIdle = 0,       // admitting; no verification in flight
  kVerifying = 1,  // a verification is drawing samples; found at load: its outcome was lost
  kStopped = 2,    // a verification did not accept: no more steps are admitted
};

// How a job's mechanisms are chosen (issue 10; README "Adaptive or declared?").
enum class Schedule {
  kDeclared = 1,  // fixed in advance: an explicit plan, or the first admitted mechanism repeated
  kAdaptive = 2,  // chosen at run time from earlier outputs
};
// The privacy filter that admits a job's steps (server/admission_policy.h).
enum class AdmissionKind {
  kNatural = 1,  // the admitting accountant over the realised (declared) ledger
  kGdp = 2,      // Gaussian-DP filter (adaptive)
  kRenyi = 3,    // Renyi filter at one fixed order (adaptive)
  kEvr = 4,      // EVR-verified natural filter (declared)
};
std::string_view ScheduleName(Schedule s);         // "declared", "adaptive"
std::string_view AdmissionKindName(AdmissionKind k);  // "natural", "gdp", "renyi", "evr"

// The identity of a job: job ids are unique per tenant.
struct JobKey {
  std::string tenant;
  std::string job_id;
  friend bool operator==(const JobKey&, const JobKey&) = default;
  friend auto operator<=>(const JobKey&, const JobKey&) = default;
};
std::string JobKeyString(const JobKey& key);  // "tenant/job_id", for logs and metric labels

// A job's stored configuration and life-cycle state.
struct JobRow {
  JobKey key;
  double budget_epsilon = 0;  // nats
  double budget_delta = 0;
  Neighbouring neighbouring = Neighbouring::kAddRemove;
  std::string accountant;     // admitting accountant name
  uint64_t mc_seed = 0;
  int64_t mc_num_samples = 0;
  JobState state = JobState::kOpen;
  int64_t create_time_ms = 0;  // unix ms
  int64_t close_time_ms = 0;   // 0 while open
  EvrState evr_state = EvrState::kIdle;  // "evr" jobs only
  std::string evr_note;        // why admission stopped (kStopped), else empty
  Schedule schedule = Schedule::kDeclared;
  AdmissionKind admission = AdmissionKind::kNatural;
  // Declared jobs: the plan as canonical steps (CanonicalSteps); empty = the implicit plan
  // "the first admitted mechanism, repeated".
  std::string plan;
  double rdp_order = 0;        // kRenyi: the filter's fixed order alpha
};

// One admitted ledger update and the ack it was answered with.
struct UpdateRow {
  JobKey key;
  int64_t seq = 0;
  std::string steps;           // canonical text, see CanonicalSteps
  core::EpsilonBound spent;    // epsilon at the job's delta after this update
  int64_t num_steps_after = 0; // job total after this update
  int64_t commit_time_ms = 0;
  std::string chain;           // head after this update (ledger_chain.h), lower-case hex
};

// Canonical text of an update's steps, "spec,count=N;spec,count=N": equal iff the steps are
// equal (Mechanism::ToSpec prints %.17g, which round-trips). Parsed back by ParseCanonicalSteps.
std::string CanonicalSteps(const std::vector<core::MechanismEvent>& steps);
absl::StatusOr<std::vector<core::MechanismEvent>> ParseCanonicalSteps(std::string_view text);

// The steps of a stored update: the one decoder of what the store returns. DATA_LOSS naming
// the job and seq when they do not parse.
absl::StatusOr<std::vector<core::MechanismEvent>> DecodeStoredSteps(const UpdateRow& row);

// A recorded release (EVR gate passed).
struct ReleaseRow {
  std::string release_id;
  JobKey key;
  std::string request_id;       // client retry key, may be empty
  double epsilon = 0;
  double delta = 0;             // the certified statement: delta_est / tau
  double delta_est = 0;
  double tau = 0;
  double rho = 0;
  core::Guarantee guarantee = core::Guarantee::kCertified;
  double failure_probability = 0;
  std::string verifier;         // "evr-mc" or "certified-accountant:<name>"
  bool fallback = false;
  int64_t num_samples = 0;
  double seconds = 0;
  std::string backend;
  uint64_t seed = 0;
  double delta_hat = 0;
  double threshold = 0;
  std::string note;
  std::string payload_sha256;   // lower-case hex of payload
  std::string payload;          // may be left empty when read back without it
  int64_t payload_size = 0;     // bytes of the stored payload
  int64_t ledger_seq = 0;
  int64_t num_steps = 0;
  int64_t create_time_ms = 0;
  std::string chain;            // the job's release chain after this one (ledger_chain.h)
};

// The ledger chain over stored rows (ledger_chain.h): head_0 of a job, the head after an
// update given the head before it, a release's link given the previous link and the update
// head at its ledger_seq.
std::string ChainGenesis(const JobRow& job);
std::string ChainUpdate(std::string_view prev_head, const UpdateRow& u);
std::string ChainRelease(std::string_view prev_release, std::string_view update_head,
                         const ReleaseRow& r);

// Lower-case hex SHA-256 of bytes.
std::string Sha256Hex(std::string_view bytes);

}  // namespace dpledger::server
