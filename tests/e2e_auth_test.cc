// Auth (issue 4 "Security"): a server with TLS and a token file. No token, an
// unknown token, another tenant's job and a reader writing are each refused with
// the right status; plaintext and untrusted-certificate clients cannot connect.
// The certificates are made in the test with the openssl command line (a
// self-signed CA and a server certificate for 127.0.0.1).
#include <grpcpp/grpcpp.h>
#include <openssl/sha.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

#include "core/util/test_support.h"
#include "tests/e2e_fixture.h"

namespace dpledger::e2e {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;
using Code = absl::StatusCode;

constexpr char kWriterA[] = "writer-token-team-a-0123456789";
constexpr char kReaderA[] = "reader-token-team-a-0123456789";
constexpr char kWriterB[] = "writer-token-team-b-0123456789";

// A token file line's first field for `token` (as server/auth.h TokenDigestHex).
std::string ServerDigest(const std::string& token) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), d);
  std::string hex = "sha256:";
  for (unsigned char b : d) hex += absl::StrFormat("%02x", b);
  return hex;
}

std::string OpenSsl() {
  for (const char* p : {"/usr/bin/openssl", "/usr/local/bin/openssl", "/bin/openssl"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

// A CA and a server certificate (SAN IP:127.0.0.1, DNS:localhost) signed by it.
absl::Status MakeCertificates(const std::string& openssl, const TempDir& dir,
                              const std::string& prefix) {
  const std::string ca_key = dir.File(prefix + "ca.key"), ca_crt = dir.File(prefix + "ca.crt");
  const std::string key = dir.File(prefix + "server.key"), csr = dir.File(prefix + "server.csr");
  const std::string crt = dir.File(prefix + "server.crt"), ext = dir.File(prefix + "san.ext");
  WriteFileOrDie(ext, "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  const std::vector<std::vector<std::string>> steps = {
      {openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca_crt,
       "-days", "2", "-subj", "/CN=dpledger-test-ca"},
      {openssl, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj",
       "/CN=localhost"},
      {openssl, "x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial",
       "-out", crt, "-days", "2", "-extfile", ext},
  };
  for (const auto& argv : steps) {
    CommandResult r = RunCommand(argv, 60000);
    if (r.exit_code != 0) {
      return absl::InternalError(
          absl::StrFormat("%s %s failed (%d): %s", argv[0], argv[1], r.exit_code, r.err));
    }
  }
  return absl::OkStatus();
}

class AuthTest : public E2eTest {
 protected:
  void SetUp() override {
    const std::string openssl = OpenSsl();
    if (openssl.empty()) GTEST_SKIP() << "openssl not found: TLS auth test skipped";
    ASSERT_TRUE(MakeCertificates(openssl, dir_, "").ok());
    ca_pem_ = *client::ReadFile(dir_.File("ca.crt"));
    WriteFileOrDie(dir_.File("tokens"),
                   absl::StrFormat("# token tenant role\n%s team-a writer\n%s team-a reader\n"
                                   "%s team-b writer\n",
                                   kWriterA, kReaderA, kWriterB));
    ServerConfig config;
    config.insecure = false;
    config.tls_cert = dir_.File("server.crt");
    config.tls_key = dir_.File("server.key");
    config.token_file = dir_.File("tokens");
    config.probe.tls = true;
    config.probe.tls_ca_pem = ca_pem_;
    ASSERT_NO_FATAL_FAILURE(StartServer(config));
  }

  // A stream on a new job "held" whose first update (seq 1) was acknowledged.
  void OpenHeldStream(client::Client& c, std::unique_ptr<client::StepStream>& stream) {
    ASSERT_TRUE(c.CreateJob(JobRequest("held", 10, 1e-6, "analytic")).ok());
    stream = c.OpenStream("held");
    ASSERT_TRUE(stream->Write(HeldUpdate(1)).ok());
    auto ack = stream->Read();
    ASSERT_TRUE(ack.ok() && ack->admitted()) << ack.status();
  }
  // Seq 2 on that stream is admitted without a reconnection.
  static void ExpectHeldStreamGoesOn(client::StepStream& stream) {
    ASSERT_TRUE(stream.Write(HeldUpdate(2)).ok());
    auto ack = stream.Read();
    ASSERT_TRUE(ack.ok()) << ack.status();
    EXPECT_TRUE(ack->admitted());
    EXPECT_EQ(stream.reconnects(), 0);
    EXPECT_TRUE(stream.Close().ok());
  }
  static v1::StepUpdate HeldUpdate(int64_t seq) {
    v1::StepUpdate u;
    u.set_seq(seq);
    u.add_steps()->set_spec("gaussian:sigma=100");
    return u;
  }
  // The server's log once it holds `text` (up to 10 s).
  std::string WaitForLog(const std::string& text) {
    std::string log;
    for (int i = 0; i < 100 && log.find(text) == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      log = server_->LogTail(100000);
    }
    return log;
  }

  std::unique_ptr<client::Client> As(const std::string& token) {
    return NewClient([&](client::ClientOptions& o) {
      o.bearer_token = token;
      o.retry.max_attempts = 1;
    });
  }

  std::string ca_pem_;
};

TEST_F(AuthTest, TokensMapToTenantsAndRoles) {
  auto writer_a = As(kWriterA);
  auto reader_a = As(kReaderA);
  auto writer_b = As(kWriterB);
  auto anonymous = As("");
  auto stranger = As("not-a-known-token-0000000000");

  v1::CreateJobRequest create;
  create.set_job_id("secret");
  create.mutable_budget()->set_epsilon(5);
  create.mutable_budget()->set_delta(1e-6);
  auto job = writer_a->CreateJob(create);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->tenant(), "team-a");
  auto ack = writer_a->AppendStep("secret", 1, {"gaussian:sigma=3,count=2"});
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_TRUE(ack->admitted());

  // No token / an unknown token: UNAUTHENTICATED, on reads and writes alike.
  EXPECT_THAT(anonymous->GetJob("secret"), StatusIs(Code::kUnauthenticated, HasSubstr("")));
  EXPECT_THAT(anonymous->AppendStep("secret", 2, {"gaussian:sigma=3"}),
              StatusIs(Code::kUnauthenticated, HasSubstr("")));
  EXPECT_THAT(stranger->GetJob("secret"), StatusIs(Code::kUnauthenticated, HasSubstr("token")));

  // Reader: queries yes, writes no.
  auto read = reader_a->GetJob("secret");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->num_steps(), 2);
  v1::SpentRequest spent;
  spent.set_job_id("secret");
  spent.set_delta(1e-6);
  EXPECT_TRUE(reader_a->Spent(spent).ok());
  EXPECT_THAT(reader_a->AppendStep("secret", 2, {"gaussian:sigma=3"}),
              StatusIs(Code::kPermissionDenied, HasSubstr("writer")));
  v1::CreateJobRequest other = create;
  other.set_job_id("by-reader");
  EXPECT_THAT(reader_a->CreateJob(other), StatusIs(Code::kPermissionDenied, HasSubstr("writer")));
  v1::ReleaseRequest release;
  release.set_job_id("secret");
  release.set_payload("x");
  release.set_epsilon(4);
  release.set_delta_est(1e-6);
  EXPECT_THAT(reader_a->Release(release), StatusIs(Code::kPermissionDenied, HasSubstr("writer")));
  EXPECT_THAT(reader_a->CloseJob("secret"), StatusIs(Code::kPermissionDenied, HasSubstr("writer")));
  {
    auto stream = reader_a->OpenStream("secret");
    v1::StepUpdate u;
    u.set_seq(2);
    u.add_steps()->set_spec("gaussian:sigma=3");
    ASSERT_TRUE(stream->Write(u).ok());
    EXPECT_THAT(stream->Read(), StatusIs(Code::kPermissionDenied, HasSubstr("writer")));
  }

  // Another tenant: naming team-a is PERMISSION_DENIED; its own tenant has no such job.
  auto b_as_a = NewClient([&](client::ClientOptions& o) {
    o.bearer_token = kWriterB;
    o.tenant = "team-a";
    o.retry.max_attempts = 1;
  });
  EXPECT_THAT(b_as_a->GetJob("secret"), StatusIs(Code::kPermissionDenied, HasSubstr("tenant")));
  EXPECT_THAT(b_as_a->AppendStep("secret", 2, {"gaussian:sigma=3"}),
              StatusIs(Code::kPermissionDenied, HasSubstr("tenant")));
  EXPECT_THAT(writer_b->GetJob("secret"), StatusIs(Code::kNotFound, HasSubstr("secret")));
  EXPECT_THAT(writer_b->AppendStep("secret", 2, {"gaussian:sigma=3"}),
              StatusIs(Code::kNotFound, HasSubstr("secret")));
  auto b_jobs = writer_b->ListJobs(v1::ListJobsRequest());
  ASSERT_TRUE(b_jobs.ok()) << b_jobs.status();
  EXPECT_EQ(b_jobs->jobs_size(), 0);
  // Jobs are per tenant: team-b may use the same job id for its own job.
  auto b_job = writer_b->CreateJob(create);
  ASSERT_TRUE(b_job.ok()) << b_job.status();
  EXPECT_EQ(b_job->tenant(), "team-b");
  EXPECT_EQ(b_job->num_steps(), 0);

  // Nothing the refused calls tried was written.
  auto final_job = writer_a->GetJob("secret");
  ASSERT_TRUE(final_job.ok());
  EXPECT_EQ(final_job->num_steps(), 2);
  EXPECT_EQ(final_job->last_seq(), 1);
  EXPECT_EQ(final_job->num_releases(), 0);
}

TEST_F(AuthTest, HealthAnswersWithoutAToken) {
  auto anonymous = As("");
  EXPECT_TRUE(anonymous->CheckHealth().ok());
}

TEST_F(AuthTest, PlaintextAndUntrustedClientsCannotConnect) {
  auto plaintext = NewClient([&](client::ClientOptions& o) {
    o.tls = false;
    o.bearer_token = kWriterA;
    o.retry.max_attempts = 1;
    o.timeout_ms = 3000;
  });
  EXPECT_THAT(plaintext->GetJob("any"), StatusIs(Code::kUnavailable, HasSubstr("")));

  // A client that trusts a different CA refuses the server's certificate.
  ASSERT_TRUE(MakeCertificates(OpenSsl(), dir_, "other-").ok());
  auto untrusting = NewClient([&](client::ClientOptions& o) {
    o.tls_ca_pem = *client::ReadFile(dir_.File("other-ca.crt"));
    o.bearer_token = kWriterA;
    o.retry.max_attempts = 1;
    o.timeout_ms = 3000;
  });
  EXPECT_THAT(untrusting->GetJob("any"), StatusIs(Code::kUnavailable, HasSubstr("")));
}

// Issue 11: a certificate/key mismatch said "cannot listen on ... (in use or not an address)".
TEST_F(AuthTest, Issue11MismatchedCertificateAndKeyAreNamedAtStart) {
  ASSERT_TRUE(MakeCertificates(OpenSsl(), dir_, "other-").ok());
  auto start = [&](const std::string& cert, const std::string& key) {
    return RunCommand({ServerBinary(), "--listen", absl::StrFormat("127.0.0.1:%d", PickFreePort()),
                       "--data-dir", dir_.File("other-data"), "--metrics-listen=",
                       "--tls-cert", cert, "--tls-key", key, "--token-file",
                       dir_.File("tokens")},
                      30000);
  };
  CommandResult mismatch = start(dir_.File("server.crt"), dir_.File("other-server.key"));
  EXPECT_EQ(mismatch.exit_code, 1);
  EXPECT_THAT(mismatch.err, HasSubstr("do not match"));
  EXPECT_THAT(mismatch.err, ::testing::Not(HasSubstr("cannot listen")));
  CommandResult swapped = start(dir_.File("server.key"), dir_.File("server.crt"));
  EXPECT_EQ(swapped.exit_code, 1);
  EXPECT_THAT(swapped.err, HasSubstr("tls_cert '" + dir_.File("server.key") +
                                     "' holds no PEM certificate"));
}

// Issue 11: SIGHUP reloads the token file (SHA-256 digest lines) without dropping a stream;
// a malformed file is refused and the old tokens stay.
TEST_F(AuthTest, Issue11SighupReloadsTokensAndKeepsStreams) {
  constexpr char kWriterC[] = "writer-token-team-c-0123456789";
  auto a = As(kWriterA);
  std::unique_ptr<client::StepStream> stream;
  ASSERT_NO_FATAL_FAILURE(OpenHeldStream(*a, stream));

  // New file: A kept (as a digest), B gone, C new.
  WriteFileOrDie(dir_.File("tokens"),
                 absl::StrFormat("%s team-a writer\n%s team-c writer\n",
                                 ServerDigest(kWriterA), ServerDigest(kWriterC)));
  server_->Signal(SIGHUP);
  auto c = As(kWriterC);
  absl::StatusOr<v1::ListJobsResponse> listed;
  for (int i = 0; i < 100; ++i) {  // the reload is asynchronous: up to 10 s
    listed = c->ListJobs({});
    if (listed.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(listed.ok()) << listed.status();
  EXPECT_THAT(As(kWriterB)->GetJob("any"), StatusIs(Code::kUnauthenticated, HasSubstr("unknown")));
  // The stream opened under the old table goes on.
  ExpectHeldStreamGoesOn(*stream);

  // A malformed file is refused; C still works.
  WriteFileOrDie(dir_.File("tokens"), "sha256:nothex team-c writer\n");
  server_->Signal(SIGHUP);
  const std::string log = WaitForLog("token file refused");
  EXPECT_THAT(log, HasSubstr("reload: token file refused, the old tokens stay"));
  EXPECT_THAT(log, HasSubstr("tokens=2 added=1 removed=2 changed=0"));
  EXPECT_TRUE(c->ListJobs({}).ok());
}

// Issue 11: mutual TLS. A client certificate signed by --tls-client-ca whose common name is
// in --client-cert-map is that tenant and role, without a token; an unmapped certificate
// needs a token as before.
TEST_F(AuthTest, Issue11ClientCertificatesMapToTenantAndRole) {
  const std::string openssl = OpenSsl();
  for (const std::string cn : {"runner-a", "dash-a", "stranger"}) {
    const std::string key = dir_.File(cn + ".key"), csr = dir_.File(cn + ".csr");
    for (const auto& argv : std::vector<std::vector<std::string>>{
             {openssl, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
              "-subj", "/CN=" + cn},
             {openssl, "x509", "-req", "-in", csr, "-CA", dir_.File("ca.crt"), "-CAkey",
              dir_.File("ca.key"), "-CAcreateserial", "-out", dir_.File(cn + ".crt"), "-days",
              "2"}}) {
      CommandResult r = RunCommand(argv, 60000);
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
  }
  WriteFileOrDie(dir_.File("certmap"), "runner-a team-a writer\ndash-a team-a reader\n");
  ASSERT_TRUE(server_->Stop().ok());
  ServerConfig config;
  config.insecure = false;
  config.tls_cert = dir_.File("server.crt");
  config.tls_key = dir_.File("server.key");
  config.token_file = dir_.File("tokens");
  config.extra_args = {"--tls-client-ca", dir_.File("ca.crt"), "--client-cert-map",
                       dir_.File("certmap")};
  config.probe.tls = true;
  config.probe.tls_ca_pem = ca_pem_;
  ASSERT_NO_FATAL_FAILURE(StartServer(config));

  auto stub_as = [&](const std::string& cn) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ca_pem_;
    ssl.pem_private_key = *client::ReadFile(dir_.File(cn + ".key"));
    ssl.pem_cert_chain = *client::ReadFile(dir_.File(cn + ".crt"));
    return v1::Ledger::NewStub(
        grpc::CreateChannel(server_->address(), grpc::SslCredentials(ssl)));
  };
  auto create = [&](v1::Ledger::Stub& stub, const std::string& job) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::CreateJobRequest r = JobRequest(job, 1, 1e-6);
    v1::Job out;
    grpc::Status s = stub.CreateJob(&ctx, r, &out);
    return std::make_pair(s, out);
  };
  auto runner = stub_as("runner-a");
  auto [made, job] = create(*runner, "by-cert");
  ASSERT_TRUE(made.ok()) << made.error_message();
  EXPECT_EQ(job.tenant(), "team-a");
  // The token holder of team-a sees it; the reader certificate may not write.
  EXPECT_TRUE(As(kReaderA)->GetJob("by-cert").ok());
  auto dash = stub_as("dash-a");
  EXPECT_EQ(create(*dash, "x").first.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // An unmapped certificate is no identity: without a token, UNAUTHENTICATED.
  auto stranger = stub_as("stranger");
  EXPECT_EQ(create(*stranger, "y").first.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // Token clients (no certificate) keep working.
  EXPECT_TRUE(As(kWriterB)->CreateJob(JobRequest("by-token", 1, 1e-6)).ok());

  // SIGHUP reloads the map (it was read at start only): "stranger" is now named by its
  // whole subject, runner-a no longer mapped.
  WriteFileOrDie(dir_.File("certmap"), "subject:CN=stranger team-b writer\ndash-a team-a reader\n");
  server_->Signal(SIGHUP);
  WaitForLog("client certificate map '" + dir_.File("certmap") + "' loaded: names=2");
  auto [by_subject, job_b] = create(*stub_as("stranger"), "by-subject");
  ASSERT_TRUE(by_subject.ok()) << by_subject.error_message();
  EXPECT_EQ(job_b.tenant(), "team-b");
  EXPECT_EQ(create(*stub_as("runner-a"), "z").first.error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // A malformed map is refused and the one in use stays.
  WriteFileOrDie(dir_.File("certmap"), "stranger team-b admin\n");
  server_->Signal(SIGHUP);
  EXPECT_THAT(WaitForLog("client certificate map refused"),
              HasSubstr("the old map stays: client_cert_map line 1: role"));
  EXPECT_TRUE(create(*stub_as("stranger"), "still-mapped").first.ok());
}

// Issue 11: SIGHUP reloads the TLS certificate without dropping a stream; a mismatched pair
// is refused and the certificate in use stays.
TEST_F(AuthTest, Issue11SighupReloadsTheCertificate) {
  auto a = As(kWriterA);
  std::unique_ptr<client::StepStream> stream;
  ASSERT_NO_FATAL_FAILURE(OpenHeldStream(*a, stream));

  // Serve a certificate of another CA from the same paths.
  ASSERT_TRUE(MakeCertificates(OpenSsl(), dir_, "other-").ok());
  const std::string original_key = *client::ReadFile(dir_.File("server.key"));
  WriteFileOrDie(dir_.File("server.crt"), *client::ReadFile(dir_.File("other-server.crt")));
  WriteFileOrDie(dir_.File("server.key"), *client::ReadFile(dir_.File("other-server.key")));
  server_->Signal(SIGHUP);
  absl::StatusOr<v1::Job> got;
  for (int i = 0; i < 50; ++i) {  // the new certificate is served within a few seconds
    // A fresh channel per try: a channel whose handshake failed waits out gRPC's
    // growing reconnect backoff (1 s, 1.6 s, 2.6 s, ...), which made this test ~10 s
    // and flaky on a loaded machine.
    auto trusting_other = NewClient([&](client::ClientOptions& o) {
      o.tls_ca_pem = *client::ReadFile(dir_.File("other-ca.crt"));
      o.bearer_token = kWriterA;
      o.retry.max_attempts = 1;
      o.timeout_ms = 3000;
    });
    if ((got = trusting_other->GetJob("held")).ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(got.ok()) << got.status();
  // The stream's connection keeps its session.
  ExpectHeldStreamGoesOn(*stream);

  // A key that is not the certificate's is refused; the served certificate stays.
  WriteFileOrDie(dir_.File("server.key"), original_key);
  server_->Signal(SIGHUP);
  const std::string log = WaitForLog("TLS files refused");
  EXPECT_THAT(log, HasSubstr("reload: TLS files refused, the old certificate stays"));
  EXPECT_THAT(log, HasSubstr("do not match"));
  std::this_thread::sleep_for(std::chrono::seconds(2));  // past the watcher's period
  auto fresh = NewClient([&](client::ClientOptions& o) {
    o.tls_ca_pem = *client::ReadFile(dir_.File("other-ca.crt"));
    o.bearer_token = kWriterA;
    o.retry.max_attempts = 1;
  });
  EXPECT_TRUE(fresh->GetJob("held").ok());
}

TEST_F(AuthTest, CliReadsTokenAndCaFromFlags) {
  WriteFileOrDie(dir_.File("writer.token"), std::string(kWriterA) + "\n");
  const std::string server = server_->address();
  CommandResult create =
      RunCommand({CliBinary(), "--server", server, "job", "create", "--job", "cli", "--epsilon",
                  "2", "--delta", "1e-6", "--tls-ca", dir_.File("ca.crt"), "--token-file",
                  dir_.File("writer.token"), "--json"});
  EXPECT_EQ(create.exit_code, 0) << create.err;
  EXPECT_THAT(create.out, HasSubstr("\"tenant\":\"team-a\""));
  CommandResult denied = RunCommand({CliBinary(), "--server", server, "step", "--job", "cli",
                                     "--seq", "1", "--step", "gaussian:sigma=2", "--tls-ca",
                                     dir_.File("ca.crt"), "--token", kReaderA, "--retries", "1"});
  EXPECT_NE(denied.exit_code, 0);
  EXPECT_THAT(denied.err, HasSubstr("PERMISSION_DENIED"));
  CommandResult anonymous = RunCommand({CliBinary(), "--server", server, "job", "get", "--job",
                                        "cli", "--tls-ca", dir_.File("ca.crt"), "--retries", "1"});
  EXPECT_NE(anonymous.exit_code, 0);
  EXPECT_THAT(anonymous.err, HasSubstr("UNAUTHENTICATED"));
  CommandResult health = RunCommand({CliBinary(), "--server", server, "health", "--tls-ca",
                                     dir_.File("ca.crt"), "--tls-server-name", "localhost"});
  EXPECT_EQ(health.exit_code, 0) << health.err;
}

}  // namespace
}  // namespace dpledger::e2e
