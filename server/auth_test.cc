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

// Issue 11: the token file holds SHA-256 digests; plaintext lines still work, counted.
TEST(Auth, Issue11DigestLinesAuthenticateTheirTokens) {
  EXPECT_EQ(TokenDigestHex("abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");  // FIPS 180-2
  const std::string text = TokenDigestHex("carol-writer-0123456789") + " carol writer\n" +
                           "alice-reader-0123456789 alice reader\n";
  absl::StatusOr<TokenTable> t = TokenTable::Parse(text);
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->size(), 2u);
  EXPECT_EQ(t->plaintext_lines(), 1);
  absl::StatusOr<Caller> c = t->Authenticate("Bearer carol-writer-0123456789");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->tenant, "carol");
  EXPECT_EQ(c->role, Role::kWriter);
  // The digest itself is not a token.
  EXPECT_THAT(t->Authenticate("Bearer " + TokenDigestHex("carol-writer-0123456789")),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("unknown")));
  EXPECT_THAT(t->Authenticate("Bearer alice-reader-0123456789"), IsOk());
  EXPECT_THAT(TokenTable::Parse("sha256:12ab carol writer\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 1: a digest")));
  EXPECT_THAT(TokenTable::Parse(text + "carol-writer-0123456789 carol reader\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 3: duplicate")));
}

TEST(Auth, Issue11ClientCertMapNamesCallersByCommonName) {
  absl::StatusOr<ClientCertMap> m =
      ClientCertMap::Parse("# cn tenant role\nrunner-a team-a writer\ndash-a team-a reader\n");
  ASSERT_THAT(m, IsOk());
  EXPECT_EQ(m->size(), 2u);
  std::optional<Caller> c = m->Find("dash-a");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->tenant, "team-a");
  EXPECT_EQ(c->role, Role::kReader);
  EXPECT_FALSE(c->any_tenant);
  EXPECT_FALSE(m->Find("runner").has_value());
  EXPECT_THAT(ClientCertMap::Parse("a team-a admin\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("client_cert_map line 1: role")));
  EXPECT_THAT(ClientCertMap::Parse("a t writer\na t reader\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 2: duplicate")));
}

// Issue 11: a map line may name the whole subject or a subject alternative name, not only
// the common name.
TEST(Auth, Issue11ClientCertMapMatchesSubjectOrSan) {
  absl::StatusOr<ClientCertMap> m = ClientCertMap::Parse(
      "subject:CN=runner,O=Acme team-a writer\n"
      "san:spiffe://acme/dash team-b reader\n"
      "cn:plain team-c writer\n");
  ASSERT_THAT(m, IsOk());
  std::optional<Caller> c = m->Find(CertIdentity{.common_names = {"runner"},
                                                 .subjects = {"CN=runner,O=Acme"}});
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->tenant, "team-a");
  // The same common name under another organisation is not that caller.
  EXPECT_FALSE(m->Find(CertIdentity{.common_names = {"runner"}, .subjects = {"CN=runner,O=Evil"}})
                   .has_value());
  c = m->Find(CertIdentity{.common_names = {"x"}, .sans = {"dash.acme", "spiffe://acme/dash"}});
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->tenant, "team-b");
  EXPECT_EQ(c->role, Role::kReader);
  EXPECT_EQ(m->Find("plain")->tenant, "team-c");
  EXPECT_THAT(ClientCertMap::Parse("san: t writer\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 1: empty name")));
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
