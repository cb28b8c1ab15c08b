// The one conversion from absl::Status to grpc::Status (STYLE.md "Errors"). Codes map
// one to one (the enums agree, checked at compile time in status_util.cc); messages are
// capped at kMaxStatusMessageBytes so an error never carries an unbounded payload back.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace dpledger::server {

inline constexpr size_t kMaxStatusMessageBytes = 1024;

grpc::Status ToGrpcStatus(const absl::Status& status);

// The inverse, used by in-process tests and by the stream handler's per-update acks.
absl::Status FromGrpcStatus(const grpc::Status& status);

// A refusal that tells the client when to try again (RESOURCE_EXHAUSTED for limits,
// UNAVAILABLE while shutting down): the message ends "; retry after N ms", and the gRPC
// handler also sends N as trailing metadata "retry-after-ms" (RetryAfterMs reads it back).
inline constexpr char kRetryAfterMetadata[] = "retry-after-ms";
absl::Status RetryLaterError(absl::StatusCode code, std::string_view message, int retry_after_ms);
std::optional<int> RetryAfterMs(const absl::Status& status);

}  // namespace dpledger::server
