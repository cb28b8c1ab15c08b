// In-process gRPC round trips against a real Server (loopback, port 0): the wire contract,
// streaming, auth metadata, health checking and metrics.
#include <functional>
#include <fstream>
#include <thread>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "core/util/test_support.h"
#include "gtest/gtest.h"
#include "proto/dpledger.grpc.pb.h"
#include "core/mc/mc_estimate.h"
#include "core/registry/accountant_registry.h"
#include "server/server.h"
#include "server/test_util.h"

namespace dpledger::server {
namespace {

using ::dpledger::testing::IsOk;
using ::testing::HasSubstr;

constexpr char kWriter[] = "alice-writer-0123456789";
constexpr char kReader[] = "alice-reader-0123456789";
constexpr char kBob[] = "bob-writer-000000000000";

class RoundTrip : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.file("tokens")) << kWriter << " alice writer\n"
                                       << kReader << " alice reader\n"
                                       << kBob << " bob writer\n";
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.data_dir = dir_.path();
    o.insecure = true;  // plaintext, but tokens are enforced because a token file is given
    o.token_file = dir_.file("tokens");
    o.shutdown_grace_ms = 2000;
    o.ledger.default_accountant = "analytic";
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
    ASSERT_THAT(s, IsOk());
    server_ = std::move(*s);
    channel_ = grpc::CreateChannel(absl::StrFormat("127.0.0.1:%d", server_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::Ledger::NewStub(channel_);
  }

  std::unique_ptr<grpc::ClientContext> Ctx(const char* token = kWriter) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    if (token) ctx->AddMetadata("authorization", std::string("Bearer ") + token);
    return ctx;
  }

  testing::TempDir dir_;
  std::unique_ptr<Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Ledger::Stub> stub_;
};

TEST_F(RoundTrip, CreateStreamQueryRelease) {
  v1::CreateJobRequest create;
  create.set_job_id("train");
  create.mutable_budget()->set_epsilon(100);
  create.mutable_budget()->set_delta(1e-6);
  v1::Job job;
  ASSERT_TRUE(stub_->CreateJob(Ctx().get(), create, &job).ok());
  EXPECT_EQ(job.tenant(), "alice");
  EXPECT_EQ(job.accountant(), "analytic");

  // 2000 pipelined stream updates; every one acknowledged in order.
  auto ctx = Ctx();
  auto stream = stub_->StreamSteps(ctx.get());
  constexpr int kUpdates = 2000;
  std::thread writer([&] {
    for (int seq = 1; seq <= kUpdates; ++seq) {
      v1::StreamStepsRequest r;
      if (seq == 1) r.set_job_id("train");
      r.mutable_update()->set_seq(seq);
      r.mutable_update()->add_steps()->set_spec("gaussian:sigma=50");
      if (!stream->Write(r)) break;
    }
    stream->WritesDone();
  });
  v1::StepAck ack;
  int n = 0;
  double last_upper = 0;
  while (stream->Read(&ack)) {
    ++n;
    EXPECT_EQ(ack.seq(), n);
    EXPECT_TRUE(ack.admitted()) << ack.error_message();
    EXPECT_GE(ack.spent().upper(), last_upper);
    last_upper = ack.spent().upper();
  }
  writer.join();
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_EQ(n, kUpdates);

  v1::GetJobRequest get;
  get.set_job_id("train");
  ASSERT_TRUE(stub_->GetJob(Ctx(kReader).get(), get, &job).ok());
  EXPECT_EQ(job.num_steps(), kUpdates);
  EXPECT_EQ(job.last_seq(), kUpdates);
  EXPECT_EQ(job.spent().upper(), last_upper);

  v1::SpentRequest spent;
  spent.set_job_id("train");
  spent.set_delta(1e-6);
  v1::SpentResponse sr;
  ASSERT_TRUE(stub_->Spent(Ctx(kReader).get(), spent, &sr).ok());
  EXPECT_EQ(sr.epsilon().upper(), last_upper);
  EXPECT_EQ(sr.epsilon().guarantee(), v1::GUARANTEE_CERTIFIED);

  v1::GetLedgerRequest lr;
  lr.set_job_id("train");
  lr.set_after_seq(1990);
  v1::GetLedgerResponse ledger;
  ASSERT_TRUE(stub_->GetLedger(Ctx(kReader).get(), lr, &ledger).ok());
  ASSERT_EQ(ledger.entries_size(), 10);
  EXPECT_EQ(ledger.entries(9).seq(), kUpdates);
  EXPECT_EQ(ledger.entries(9).steps(0).spec(), "gaussian:sigma=50,count=1");

  v1::ReleaseRequest rel;
  rel.set_job_id("train");
  rel.set_payload("model-weights");
  rel.set_epsilon(last_upper);
  rel.set_delta_est(1e-6 * 0.99);
  v1::ReleaseRecord record;
  grpc::Status rs = stub_->Release(Ctx().get(), rel, &record);
  ASSERT_TRUE(rs.ok()) << rs.error_message();
  EXPECT_EQ(record.ledger_seq(), kUpdates);
  EXPECT_TRUE(record.verifier().fallback());
  v1::GetReleaseRequest gr;
  gr.set_release_id(record.release_id());
  gr.set_include_payload(true);
  ASSERT_TRUE(stub_->GetRelease(Ctx(kReader).get(), gr, &record).ok());
  EXPECT_EQ(record.payload(), "model-weights");

  const std::string m = server_->metrics().Serialize();
  EXPECT_THAT(m, HasSubstr("dpledger_rpc_total{code=\"OK\",method=\"StreamSteps\"} 1"));
  EXPECT_THAT(m, HasSubstr("dpledger_steps_admitted_total 2000"));
  EXPECT_THAT(m, HasSubstr("dpledger_releases_total{outcome=\"recorded\"} 1"));
  // The backend the server picked at start-up (the GPU only when a device is present).
  const std::string backend = core::CudaDeviceAvailable() ? "cuda" : "cpu";
  EXPECT_THAT(m, HasSubstr("dpledger_sample_pool_backend{backend=\"" + backend + "\"} 1"));
}

// Streams `n` DP-SGD steps as fast as the stream takes them; returns the acks' last bound.
// Prints the durable append rate (not asserted: a unit test is no benchmark).
double StreamDpSgd(v1::Ledger::Stub& stub, std::unique_ptr<grpc::ClientContext> ctx,
                   const std::string& job, int n, Server& server) {
  const auto start = std::chrono::steady_clock::now();
  auto stream = stub.StreamSteps(ctx.get());
  std::thread writer([&] {
    for (int seq = 1; seq <= n; ++seq) {
      v1::StreamStepsRequest r;
      if (seq == 1) r.set_job_id(job);
      r.mutable_update()->set_seq(seq);
      r.mutable_update()->add_steps()->set_spec("subsampled_gaussian:sigma=1,q=0.001");
      if (!stream->Write(r)) break;
    }
    stream->WritesDone();
  });
  v1::StepAck ack;
  int acks = 0;
  double upper = 0;
  while (stream->Read(&ack)) {
    ++acks;
    EXPECT_TRUE(ack.admitted()) << ack.seq() << " " << ack.error_message() << ack.refusal_reason();
    upper = ack.spent().upper();
  }
  writer.join();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(acks, n);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("streamed %d durable steps in %.3f s (%.0f steps/s); final epsilon upper %.6g\n", n, s,
              n / s, upper);
  return upper;
}

TEST_F(RoundTrip, TenThousandStreamedDpSgdStepsWithPld) {
  if (!core::CreateAccountant("pld").ok()) GTEST_SKIP() << "pld accountant not built yet";
  v1::CreateJobRequest create;
  create.set_job_id("dpsgd");
  create.set_accountant("pld");
  create.mutable_budget()->set_epsilon(10);
  create.mutable_budget()->set_delta(1e-9);
  v1::Job job;
  ASSERT_TRUE(stub_->CreateJob(Ctx().get(), create, &job).ok());
  const double upper = StreamDpSgd(*stub_, Ctx(), "dpsgd", 10000, *server_);
  v1::SpentRequest spent;
  spent.set_job_id("dpsgd");
  spent.set_delta(1e-9);
  v1::SpentResponse sr;
  ASSERT_TRUE(stub_->Spent(Ctx(kReader).get(), spent, &sr).ok());
  EXPECT_EQ(sr.epsilon().upper(), upper);
  EXPECT_EQ(sr.num_steps(), 10000);
  const std::string m = server_->metrics().Serialize();
  const size_t at = m.find("dpledger_store_commit_seconds_count");
  std::printf("%s\n", m.substr(at, m.find('\n', at) - at).c_str());

  // Lockstep unary appends (one durable commit and one PLD query each): latency per step.
  const auto start = std::chrono::steady_clock::now();
  constexpr int kLockstep = 20;
  for (int seq = 10001; seq < 10001 + kLockstep; ++seq) {
    v1::AppendStepsRequest req;
    req.set_job_id("dpsgd");
    v1::StepUpdate* u = req.add_updates();
    u->set_seq(seq);
    u->add_steps()->set_spec("subsampled_gaussian:sigma=1,q=0.001");
    v1::AppendStepsResponse resp;
    ASSERT_TRUE(stub_->AppendSteps(Ctx().get(), req, &resp).ok());
    ASSERT_TRUE(resp.acks(0).admitted());
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("lockstep unary appends: %.2f ms per durable step\n", 1e3 * s / kLockstep);
}

TEST_F(RoundTrip, StepErrorsComeBackAsStatusesOrAcks) {
  v1::CreateJobRequest create;
  create.set_job_id("j");
  create.mutable_budget()->set_epsilon(1);
  create.mutable_budget()->set_delta(1e-5);
  v1::Job job;
  ASSERT_TRUE(stub_->CreateJob(Ctx().get(), create, &job).ok());
  v1::AppendStepsRequest req;
  req.set_job_id("j");
  v1::StepUpdate* u = req.add_updates();
  u->set_seq(1);
  u->add_steps()->set_spec("gaussian:sigma=-1");
  v1::AppendStepsResponse resp;
  grpc::Status s = stub_->AppendSteps(Ctx().get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("updates[0].steps[0].spec"));
  // A step the budget cannot admit is an OK response with admitted = false.
  u->mutable_steps(0)->set_spec("gaussian:sigma=0.1");
  s = stub_->AppendSteps(Ctx().get(), req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(resp.acks(0).admitted());
  EXPECT_THAT(resp.acks(0).refusal_reason(), HasSubstr("budget"));
  // On a stream, a gap is an ack with an error code and the stream goes on.
  auto ctx = Ctx();
  auto stream = stub_->StreamSteps(ctx.get());
  v1::StreamStepsRequest r;
  r.set_job_id("j");
  r.mutable_update()->set_seq(5);
  r.mutable_update()->add_steps()->set_spec("gaussian:sigma=10");
  ASSERT_TRUE(stream->Write(r));
  r.mutable_update()->set_seq(1);
  ASSERT_TRUE(stream->Write(r));
  stream->WritesDone();
  v1::StepAck ack;
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_EQ(ack.error_code(), static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_THAT(ack.error_message(), HasSubstr("gap"));
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_TRUE(ack.admitted());
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(RoundTrip, AuthIsEnforcedOnTheWire) {
  v1::CreateJobRequest create;
  create.set_job_id("j");
  create.mutable_budget()->set_epsilon(1);
  create.mutable_budget()->set_delta(1e-5);
  v1::Job job;
  EXPECT_EQ(stub_->CreateJob(Ctx(nullptr).get(), create, &job).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(stub_->CreateJob(Ctx(kReader).get(), create, &job).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(stub_->CreateJob(Ctx(kWriter).get(), create, &job).ok());
  v1::GetJobRequest get;
  get.set_job_id("j");
  get.set_tenant("alice");
  EXPECT_EQ(stub_->GetJob(Ctx(kBob).get(), get, &job).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  get.clear_tenant();
  EXPECT_EQ(stub_->GetJob(Ctx(kBob).get(), get, &job).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(RoundTrip, HealthCheckSaysServing) {
  grpc::GenericStub generic(channel_);
  grpc::ClientContext ctx;
  grpc::Slice empty("", 0);  // HealthCheckRequest{service: ""} encodes to zero bytes
  grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  grpc::Status status;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                    &response, [&](grpc::Status s) {
                      std::lock_guard<std::mutex> l(mu);
                      status = s;
                      done = true;
                      cv.notify_one();
                    });
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return done; });
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));  // status: SERVING
}

// Settings are checked at start-up, not at the first request using them.
TEST(ServerStart, RefusesBadSettingsNamingThem) {
  const struct {
    const char* field;
    std::function<void(ServerOptions&)> set;
  } cases[] = {
      {"max_seconds", [](ServerOptions& o) { o.ledger.accountant_options.mc.max_seconds = -1; }},
      {"max_pool_bytes", [](ServerOptions& o) { o.ledger.max_pool_bytes = -1; }},
      {"max_cached_bytes", [](ServerOptions& o) { o.ledger.max_cached_bytes = -1; }},
      {"evr_admission_tau must be in (0, 1), got 0",
       [](ServerOptions& o) { o.ledger.evr_admission.tau = 0; }},
      {"evr_admission_max_seconds", [](ServerOptions& o) { o.ledger.evr_admission.max_seconds = 0; }},
      // --edgeworth-order: orders are 0..3 (edgeworth.md S3.2).
      {"edgeworth order must be in [0, 3], got 4",
       [](ServerOptions& o) { o.ledger.accountant_options.edgeworth.order = 4; }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.field);
    testing::TempDir dir;
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.data_dir = dir.path();
    o.insecure = true;
    o.metrics_listen = "";
    c.set(o);
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(c.field));
  }
}

}  // namespace
// dpledger_ready follows health to NOT_SERVING when the server shuts down (it stayed 1).
TEST_F(RoundTrip, ReadyDropsToZeroAtShutdown) {
  auto ready = [&] {
    const std::string m = server_->metrics().Serialize();
    const size_t at = m.find("\ndpledger_ready ");
    return at == std::string::npos ? -1.0 : std::stod(m.substr(at + 16));
  };
  EXPECT_EQ(ready(), 1.0);
  server_->Shutdown();
  EXPECT_EQ(ready(), 0.0);
}

}  // namespace dpledger::server
