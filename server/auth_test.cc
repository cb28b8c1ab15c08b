#include "server/auth.h"

#include "core/util/test_support.h"
#include "gtest/gtest.h"

namespace dpledger::server {
namespace {

using ::dpledger::testing::IsOk;
using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kTokens[] =
    "# token                 tenant  role\n"
    "alice-writer-0123456789 alice   writer\n"
    "alice-reader-0123456789 alice   reader   # dashboards\n"
    "\n"
    "bob-writer-000000000000 bob     writer\n";

TEST(Auth, TokensMapToTenantAndRole) {
  absl::StatusOr<TokenTable> t = TokenTable::Parse(kTokens);
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->size(), 3u);
  absl::StatusOr<Caller> c = t->Authenticate("Bearer alice-reader-0123456789");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->tenant, "alice");
  EXPECT_EQ(c->role, Role::kReader);
  EXPECT_THAT(t->Authenticate(std::nullopt), StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("missing")));
  EXPECT_THAT(t->Authenticate("alice-reader-0123456789"), StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("Bearer")));
  EXPECT_THAT(t->Authenticate("Bearer nobody-000000000000"), StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("unknown")));
}

TEST(Auth, MalformedTokenFilesNameTheLine) {
  EXPECT_THAT(TokenTable::Parse("short alice writer\n"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 1")));
  EXPECT_THAT(TokenTable::Parse("\nalice-writer-0123456789 alice admin\n"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 2: role")));
  EXPECT_THAT(TokenTable::Parse("alice-writer-0123456789 alice\n"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fields")));
  EXPECT_THAT(TokenTable::Parse("alice-writer-0123456789 a/b writer\n"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tenant")));
}

TEST(Auth, AuthorizeChecksTenantAndRole) {
  const Caller reader{"alice", Role::kReader, false};
  EXPECT_EQ(*Authorize(reader, "", Role::kReader), "alice");
  EXPECT_THAT(Authorize(reader, "", Role::kWriter), StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("writer")));
  EXPECT_THAT(Authorize(reader, "bob", Role::kReader), StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("bob")));
  EXPECT_EQ(*Authorize(Caller::Insecure(), "bob", Role::kWriter), "bob");
  EXPECT_EQ(*Authorize(Caller::Insecure(), "", Role::kWriter), "default");
}

}  // namespace
}  // namespace dpledger::server
