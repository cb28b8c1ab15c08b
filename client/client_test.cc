// The client library's retry and reconnect logic against a scripted in-process
// fake of the Ledger service on 127.0.0.1 (no dpledgerd needed).
#include "client/client.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "core/util/test_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dpledger::client {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Scripted behaviour; every field is read under mu.
class FakeLedger final : public v1::Ledger::Service {
 public:
  std::mutex mu;
  int append_failures = 0;                              // answer UNAVAILABLE this many times first
  grpc::StatusCode append_code = grpc::StatusCode::OK;  // then this (OK: acks)
  std::vector<int64_t> append_seqs;                     // first seq of every call
  std::vector<std::string> authorization;               // metadata seen by AppendSteps
  int create_calls = 0;
  std::string job_accountant = "pld";  // what GetJob reports
  int stream_calls = 0;
  std::vector<int64_t> stream_seqs;  // every seq received over every stream
  int64_t admitted_seq = 0;          // highest seq "durably admitted"

  grpc::Status AppendSteps(grpc::ServerContext* context, const v1::AppendStepsRequest* request,
                           v1::AppendStepsResponse* response) override {
    std::lock_guard<std::mutex> lock(mu);
    append_seqs.push_back(request->updates(0).seq());
    auto it = context->client_metadata().find("authorization");
    authorization.push_back(it == context->client_metadata().end()
                                ? ""
                                : std::string(it->second.data(), it->second.size()));
    if (append_failures > 0) {
      --append_failures;
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "store briefly unreachable");
    }
    if (append_code != grpc::StatusCode::OK) return grpc::Status(append_code, "seq 0 is bad");
    v1::StepAck* ack = response->add_acks();
    ack->set_seq(request->updates(0).seq());
    ack->set_admitted(true);
    return grpc::Status::OK;
  }

  // The first call creates the job but its answer is "lost" (UNAVAILABLE); later
  // calls find it (ALREADY_EXISTS), as a real server would after a lost answer.
  grpc::Status CreateJob(grpc::ServerContext*, const v1::CreateJobRequest* request,
                         v1::Job* job) override {
    std::lock_guard<std::mutex> lock(mu);
    ++create_calls;
    if (create_calls == 1) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "lost answer");
    return grpc::Status(grpc::StatusCode::ALREADY_EXISTS, "job exists");
  }

  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* request,
                      v1::Job* job) override {
    std::lock_guard<std::mutex> lock(mu);
    job->set_job_id(request->job_id());
    job->mutable_budget()->set_epsilon(2.0);
    job->mutable_budget()->set_delta(1e-6);
    job->set_accountant(job_accountant);
    return grpc::Status::OK;
  }

  // Stream 1 admits seqs 1..4 but breaks (UNAVAILABLE) after acking only 1..3;
  // later streams answer admitted seqs as duplicates and admit the rest.
  grpc::Status StreamSteps(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::StepAck, v1::StreamStepsRequest>* stream) override {
    int call;
    {
      std::lock_guard<std::mutex> lock(mu);
      call = ++stream_calls;
    }
    v1::StreamStepsRequest request;
    while (stream->Read(&request)) {
      const int64_t seq = request.update().seq();
      v1::StepAck ack;
      ack.set_seq(seq);
      ack.set_admitted(true);
      {
        std::lock_guard<std::mutex> lock(mu);
        stream_seqs.push_back(seq);
        if (request.job_id() != "job") {
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job_id missing");
        }
        if (seq <= admitted_seq) {
          ack.set_duplicate(true);
        } else {
          admitted_seq = seq;
        }
      }
      if (call == 1 && seq == 4) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "server restarting");
      }
      stream->Write(ack);
    }
    return grpc::Status::OK;
  }
};

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&fake_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
  }
  void TearDown() override { server_->Shutdown(); }

  std::unique_ptr<Client> NewClient(int max_attempts = 5) {
    ClientOptions o;
    o.target = "127.0.0.1:" + std::to_string(port_);
    o.bearer_token = "secret-token-0123456789";
    o.retry.max_attempts = max_attempts;
    o.retry.initial_backoff_ms = 1;
    o.retry.max_backoff_ms = 5;
    o.timeout_ms = 10000;
    auto c = Client::Create(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return *std::move(c);
  }

  // The tests set and read the fake's state under its mutex, as its handlers do. gRPC orders
  // a call before its handler and the handler before the answer, but ThreadSanitizer cannot
  // see that order (Debian's gRPC is not instrumented: scripts/tsan.supp).
  std::unique_lock<std::mutex> LockFake() { return std::unique_lock<std::mutex>(fake_.mu); }

  FakeLedger fake_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(ClientTest, UnavailableIsRetriedWithTheSameSeqAndToken) {
  {
    auto lock = LockFake();
    fake_.append_failures = 2;
  }
  auto c = NewClient();
  auto ack = c->AppendStep("job", 7, {"gaussian:sigma=1"});
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->seq(), 7);
  auto lock = LockFake();
  EXPECT_THAT(fake_.append_seqs, ElementsAre(7, 7, 7));
  EXPECT_THAT(fake_.authorization,
              ElementsAre("Bearer secret-token-0123456789", "Bearer secret-token-0123456789",
                          "Bearer secret-token-0123456789"));
}

TEST_F(ClientTest, RetriesStopAfterMaxAttempts) {
  {
    auto lock = LockFake();
    fake_.append_failures = 100;
  }
  auto c = NewClient(/*max_attempts=*/4);
  EXPECT_THAT(c->AppendStep("job", 1, {"gaussian:sigma=1"}),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("unreachable")));
  auto lock = LockFake();
  EXPECT_EQ(fake_.append_seqs.size(), 4u);
}

TEST_F(ClientTest, OtherErrorsAreNotRetried) {
  {
    auto lock = LockFake();
    fake_.append_code = grpc::StatusCode::INVALID_ARGUMENT;
  }
  auto c = NewClient();
  EXPECT_THAT(c->AppendStep("job", 1, {"gaussian:sigma=1"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("seq")));
  auto lock = LockFake();
  EXPECT_EQ(fake_.append_seqs.size(), 1u);
}

TEST_F(ClientTest, CreateJobWhoseAnswerWasLostIsAcceptedWhenItMatches) {
  auto c = NewClient();
  v1::CreateJobRequest r;
  r.set_job_id("job");
  r.mutable_budget()->set_epsilon(2.0);
  r.mutable_budget()->set_delta(1e-6);
  auto job = c->CreateJob(r);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->job_id(), "job");
  {
    auto lock = LockFake();
    EXPECT_EQ(fake_.create_calls, 2);
    fake_.create_calls = 0;
  }

  // A different budget is a real conflict.
  r.mutable_budget()->set_epsilon(3.0);
  EXPECT_THAT(c->CreateJob(r), StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("exists")));

  // No accountant asked: the server's choice (an adaptive job reports its filter) matches;
  // a named one must be the job's (the crash soak found the first case refused).
  r.mutable_budget()->set_epsilon(2.0);
  {
    auto lock = LockFake();
    fake_.job_accountant = "renyi";
    fake_.create_calls = 0;
  }
  EXPECT_TRUE(c->CreateJob(r).ok());
  {
    auto lock = LockFake();
    fake_.create_calls = 0;
  }
  r.set_accountant("pld");
  EXPECT_THAT(c->CreateJob(r), StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("exists")));
}

TEST_F(ClientTest, BrokenStreamReconnectsAndResendsUnackedSeqs) {
  auto c = NewClient();
  auto stream = c->OpenStream("job");
  v1::StepUpdate u;
  u.add_steps()->set_spec("gaussian:sigma=1");
  std::vector<v1::StepAck> acks;
  // Six updates in flight at once, then their acks.
  for (int seq = 1; seq <= 6; ++seq) {
    u.set_seq(seq);
    ASSERT_TRUE(stream->Write(u).ok());
  }
  for (int i = 0; i < 6; ++i) {
    auto ack = stream->Read();
    ASSERT_TRUE(ack.ok()) << ack.status();
    acks.push_back(*ack);
  }
  for (int i = 0; i < 6; ++i) EXPECT_EQ(acks[i].seq(), i + 1);
  // Seq 4 was admitted before the break and never acknowledged: its resend is
  // answered as a duplicate; 5 and 6 are new. (Acks written just before an error
  // status may be dropped by gRPC, so 1..3 may come back as duplicates too.)
  EXPECT_TRUE(acks[3].duplicate());
  EXPECT_FALSE(acks[4].duplicate());
  EXPECT_FALSE(acks[5].duplicate());
  EXPECT_EQ(stream->reconnects(), 1);
  std::unique_lock<std::mutex> lock = LockFake();
  EXPECT_EQ(fake_.stream_calls, 2);
  // Stream 1 read seqs 1..4; stream 2 resent from the first unacknowledged seq
  // (at most 4) through 6, in order, nothing skipped.
  ASSERT_GE(fake_.stream_seqs.size(), 7u);
  std::vector<int64_t> second(fake_.stream_seqs.begin() + 4, fake_.stream_seqs.end());
  EXPECT_LE(second.front(), 4);
  for (size_t i = 0; i < second.size(); ++i) EXPECT_EQ(second[i], second.front() + int64_t(i));
  EXPECT_EQ(second.back(), 6);
  lock.unlock();
  EXPECT_TRUE(stream->Close().ok());
}

// A server that comes up after the client's first attempts is reached by the
// retries (connection refused is UNAVAILABLE, retried with backoff).
TEST(ClientReconnectTest, RetriesReachAServerThatStartsLate) {
  int port = 0;
  {
    // Reserve a port number by binding it once with gRPC itself.
    FakeLedger probe;
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(&probe);
    auto s = b.BuildAndStart();
    ASSERT_NE(s, nullptr);
    s->Shutdown();
  }
  ClientOptions o;
  o.target = "127.0.0.1:" + std::to_string(port);
  o.retry.max_attempts = 60;
  o.retry.initial_backoff_ms = 50;
  o.retry.max_backoff_ms = 100;
  auto c = Client::Create(o);
  ASSERT_TRUE(c.ok());
  FakeLedger fake;
  std::unique_ptr<grpc::Server> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    grpc::ServerBuilder b;
    b.AddListeningPort(o.target, grpc::InsecureServerCredentials());
    b.RegisterService(&fake);
    server = b.BuildAndStart();
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto ack = (*c)->AppendStep("job", 1, {"gaussian:sigma=1"});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  starter.join();
  ASSERT_NE(server, nullptr) << "port " << port << " was taken meanwhile";
  ASSERT_TRUE(ack.ok()) << ack.status();
  // 0.3 s until the server exists, plus a backoff or two (60 tries of <= 0.1 s
  // backoff would end near 6 s had the server never been reached).
  EXPECT_LT(seconds, 4.0);
  server->Shutdown();
}

TEST_F(ClientTest, ReadWithNothingInFlightIsAnError) {
  auto c = NewClient();
  auto stream = c->OpenStream("job");
  EXPECT_THAT(stream->Read(), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("Read")));
}

TEST(ClientOptionsTest, EnvironmentFillsOnlyEmptyFields) {
  setenv("DPLEDGER_CLIENT_TOKEN", "env-token", 1);
  setenv("DPLEDGER_CLIENT_TENANT", "env-tenant", 1);
  setenv("DPLEDGER_CLIENT_TLS_SERVER_NAME", "svc.local", 1);
  ClientOptions o;
  o.tenant = "flag-tenant";
  ASSERT_TRUE(ApplyEnvironment(o).ok());
  EXPECT_EQ(o.bearer_token, "env-token");
  EXPECT_EQ(o.tenant, "flag-tenant");
  EXPECT_EQ(o.tls_server_name, "svc.local");
  EXPECT_FALSE(o.tls);
  setenv("DPLEDGER_CLIENT_TLS_CA", "/nonexistent/ca.pem", 1);
  ClientOptions o2;
  EXPECT_THAT(ApplyEnvironment(o2),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/ca.pem")));
  unsetenv("DPLEDGER_CLIENT_TOKEN");
  unsetenv("DPLEDGER_CLIENT_TENANT");
  unsetenv("DPLEDGER_CLIENT_TLS_SERVER_NAME");
  unsetenv("DPLEDGER_CLIENT_TLS_CA");
}

TEST(ClientOptionsTest, CreateRejectsAnEmptyTarget) {
  EXPECT_THAT(Client::Create(ClientOptions()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("target")));
}

TEST(AckStatusTest, CarriesThePerUpdateError) {
  v1::StepAck ack;
  EXPECT_TRUE(AckStatus(ack).ok());
  ack.set_error_code(9);
  ack.set_error_message("seq 5 leaves a gap");
  EXPECT_THAT(AckStatus(ack), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("gap")));
}

}  // namespace
}  // namespace dpledger::client
