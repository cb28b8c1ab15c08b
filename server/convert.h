// The one place that converts between the proto API (proto/dpledger.proto) and the service's
// plain types (ledger_api.h, core/). Errors are INVALID_ARGUMENT naming the field path,
// e.g. "updates[2].steps[0].mechanism.sigma".
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "proto/dpledger.pb.h"
#include "server/ledger_api.h"

namespace dpledger::server {

namespace v1 = ::dpledger::v1;

absl::StatusOr<core::Mechanism> MechanismFromProto(const v1::Mechanism& m, std::string_view field);
absl::StatusOr<core::MechanismEvent> StepFromProto(const v1::Step& step, std::string_view field);
absl::StatusOr<UpdateInput> UpdateFromProto(const v1::StepUpdate& update, std::string_view field);
absl::StatusOr<JobSpec> JobSpecFromProto(const v1::CreateJobRequest& request);
absl::StatusOr<SpentQuery> SpentQueryFromProto(const v1::SpentRequest& request);
ReleaseInput ReleaseInputFromProto(const v1::ReleaseRequest& request);

v1::Mechanism MechanismToProto(const core::Mechanism& m);
v1::Step StepToProto(const core::MechanismEvent& e);  // both spec (with count) and fields
v1::Guarantee GuaranteeToProto(core::Guarantee g);
v1::Bound BoundToProto(const core::EpsilonBound& b);
v1::Bound BoundToProto(const core::DeltaBound& b);
v1::Job JobToProto(const JobInfo& info);
v1::StepAck AckToProto(const Ack& ack);
// Stored steps are canonical specs; a row that does not parse is DATA_LOSS.
absl::StatusOr<v1::LedgerEntry> LedgerEntryToProto(const UpdateRow& row);
v1::SpentResponse SpentToProto(const SpentAnswer& answer, const SpentQuery& query);
v1::RemainingResponse RemainingToProto(const RemainingAnswer& answer);
v1::ReleaseRecord ReleaseToProto(const ReleaseRow& row);

}  // namespace dpledger::server
