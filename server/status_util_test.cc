#include "server/status_util.h"

#include "gtest/gtest.h"

namespace dpledger::server {
namespace {

TEST(StatusUtil, CodesMapOneToOneAndBack) {
  for (int c = 0; c <= 16; ++c) {
    const absl::Status s(static_cast<absl::StatusCode>(c), c == 0 ? "" : "why");
    const grpc::Status g = ToGrpcStatus(s);
    EXPECT_EQ(static_cast<int>(g.error_code()), c);
    EXPECT_EQ(FromGrpcStatus(g), s);
  }
}

TEST(StatusUtil, LongMessagesAreCapped) {
  const grpc::Status g = ToGrpcStatus(absl::InvalidArgumentError(std::string(5000, 'x')));
  EXPECT_EQ(g.error_message().size(), kMaxStatusMessageBytes);
  EXPECT_NE(g.error_message().find("(truncated)"), std::string::npos);
}

}  // namespace
}  // namespace dpledger::server
