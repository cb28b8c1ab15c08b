// The one conversion from absl::Status to grpc::Status (STYLE.md "Errors"). Codes map
// one to one (the enums agree, checked at compile time in status_util.cc); messages are
// capped at kMaxStatusMessageBytes so an error never carries an unbounded payload back.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace dpledger::server {

inline constexpr size_t kMaxStatusMessageBytes = 1024;

grpc::Status ToGrpcStatus(const absl::Status& status);

// The inverse, used by in-process tests and by the stream handler's per-update acks.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace dpledger::server
