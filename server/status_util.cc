#include "server/status_util.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace dpledger::server {
namespace {

// absl::StatusCode and grpc::StatusCode both follow google.rpc.Code; a cast is only
// correct while every value agrees.
#define DPL_SAME_CODE(name, grpc_name) \
  static_assert(static_cast<int>(absl::StatusCode::name) == static_cast<int>(grpc::StatusCode::grpc_name))
DPL_SAME_CODE(kOk, OK);
DPL_SAME_CODE(kCancelled, CANCELLED);
DPL_SAME_CODE(kUnknown, UNKNOWN);
DPL_SAME_CODE(kInvalidArgument, INVALID_ARGUMENT);
DPL_SAME_CODE(kDeadlineExceeded, DEADLINE_EXCEEDED);
DPL_SAME_CODE(kNotFound, NOT_FOUND);
DPL_SAME_CODE(kAlreadyExists, ALREADY_EXISTS);
DPL_SAME_CODE(kPermissionDenied, PERMISSION_DENIED);
DPL_SAME_CODE(kResourceExhausted, RESOURCE_EXHAUSTED);
DPL_SAME_CODE(kFailedPrecondition, FAILED_PRECONDITION);
DPL_SAME_CODE(kAborted, ABORTED);
DPL_SAME_CODE(kOutOfRange, OUT_OF_RANGE);
DPL_SAME_CODE(kUnimplemented, UNIMPLEMENTED);
DPL_SAME_CODE(kInternal, INTERNAL);
DPL_SAME_CODE(kUnavailable, UNAVAILABLE);
DPL_SAME_CODE(kDataLoss, DATA_LOSS);
DPL_SAME_CODE(kUnauthenticated, UNAUTHENTICATED);
#undef DPL_SAME_CODE

std::string Capped(std::string_view message) {
  if (message.size() <= kMaxStatusMessageBytes) return std::string(message);
  constexpr std::string_view kEllipsis = "...(truncated)";
  return std::string(message.substr(0, kMaxStatusMessageBytes - kEllipsis.size())) +
         std::string(kEllipsis);
}

constexpr char kRetryPayload[] = "type.dpledger.dev/retry-after-ms";

}  // namespace

absl::Status RetryLaterError(absl::StatusCode code, std::string_view message,
                             int retry_after_ms) {
  absl::Status s(code, absl::StrFormat("%s; retry after %d ms", std::string(message),
                                       retry_after_ms));
  s.SetPayload(kRetryPayload, absl::Cord(std::to_string(retry_after_ms)));
  return s;
}

std::optional<int> RetryAfterMs(const absl::Status& status) {
  auto p = status.GetPayload(kRetryPayload);
  int ms = 0;
  if (!p.has_value() || !absl::SimpleAtoi(std::string(*p), &ms)) return std::nullopt;
  return ms;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), Capped(std::string(status.message())));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      Capped(status.error_message()));
}

}  // namespace dpledger::server
