// I/O faults end to end (issue 16): dpledgerd started with DPL_TEST_IO_FAULT_FILE=<file>
// opens its SQLite store through the fault-injecting VFS (server/sqlite_fault_vfs.h) and reads
// the current fault from that file before each write and sync. A client then sees a clear
// status for each fault (RESOURCE_EXHAUSTED for a full disk or short write, UNAVAILABLE for a
// write or fsync error), nothing it was not acknowledged becomes visible, and the same server
// process serves again once the file says "none". The acknowledged ledger survives kill -9.
#include <cstdlib>

#include "absl/strings/match.h"
#include "tests/e2e_fixture.h"

namespace dpledger::e2e {
namespace {

using Code = absl::StatusCode;

class IoFaultTest : public E2eTest {
 protected:
  void SetUp() override {
    faults_ = dir_.File("faults");
    SetFault("none");
    // Inherited by the dpledgerd children (e2e_support strips only DPLEDGER_* variables).
    ::setenv("DPL_TEST_IO_FAULT_FILE", faults_.c_str(), 1);
  }
  void TearDown() override {
    E2eTest::TearDown();
    ::unsetenv("DPL_TEST_IO_FAULT_FILE");
  }
  void SetFault(const std::string& word) { WriteFileOrDie(faults_, word + "\n"); }

  std::string faults_;
};

TEST_F(IoFaultTest, EachFaultGetsAClearStatusAndTheSameServerRecovers) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  auto c = NewClient([](client::ClientOptions& o) { o.retry.max_attempts = 1; });
  ASSERT_TRUE(c->CreateJob(GdpJobRequest("io", 50.0, 1e-6)).ok());
  constexpr char kStep[] = "gaussian:sigma=50";
  auto first = c->AppendStep("io", 1, {kStep});
  ASSERT_TRUE(first.ok()) << first.status();

  struct Case {
    std::string fault;
    Code code;
    std::string cause;
  };
  const std::vector<Case> cases = {
      {"full", Code::kResourceExhausted, "disk is full"},
      {"short", Code::kResourceExhausted, "disk is full"},
      {"write", Code::kUnavailable, "disk I/O error"},
      {"fsync", Code::kUnavailable, "disk I/O error"},
  };
  int64_t seq = 1;
  for (const Case& k : cases) {
    SCOPED_TRACE(k.fault);
    SetFault(k.fault);
    auto refused = c->AppendStep("io", seq + 1, {kStep});
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), k.code) << refused.status();
    EXPECT_TRUE(absl::StrContains(refused.status().message(), k.cause)) << refused.status();
    EXPECT_TRUE(absl::StrContains(refused.status().message(), "nothing was acknowledged"))
        << refused.status();
    auto job = c->GetJob("io");
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->last_seq(), seq);
    // The fault clears: the very same retry is admitted by the same process, charged once.
    SetFault("none");
    auto ack = c->AppendStep("io", seq + 1, {kStep});
    ASSERT_TRUE(ack.ok()) << ack.status();
    EXPECT_TRUE(ack->admitted());
    EXPECT_FALSE(ack->duplicate());
    ++seq;
    EXPECT_EQ(ack->num_steps(), seq);
  }
  EXPECT_TRUE(c->CheckHealth().ok());

  // On a stream the failure is the update's ack (error_code, the stream goes on), and the
  // same seq written again on that stream once the fault clears is admitted.
  auto stream = c->OpenStream("io");
  auto write = [&](int64_t s) {
    v1::StepUpdate u;
    u.set_seq(s);
    u.add_steps()->set_spec(kStep);
    return stream->Write(u);
  };
  SetFault("full");
  ASSERT_TRUE(write(seq + 1).ok());
  auto failed = stream->Read();
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(client::AckStatus(*failed).code(), Code::kResourceExhausted)
      << client::AckStatus(*failed);
  EXPECT_FALSE(failed->admitted());
  SetFault("none");
  ASSERT_TRUE(write(seq + 1).ok());
  auto admitted = stream->Read();
  ASSERT_TRUE(admitted.ok()) << admitted.status();
  EXPECT_TRUE(client::AckStatus(*admitted).ok()) << client::AckStatus(*admitted);
  EXPECT_TRUE(admitted->admitted());
  ++seq;
  EXPECT_EQ(admitted->num_steps(), seq);
  EXPECT_TRUE(stream->Close().ok());

  server_->Kill9();
  ASSERT_TRUE(server_->Start().ok()) << server_->LogTail();
  auto reader = NewClient();
  auto ledger = FullLedger(*reader, "io");
  ASSERT_TRUE(ledger.ok()) << ledger.status();
  ASSERT_EQ(ledger->size(), static_cast<size_t>(seq));
  for (int64_t i = 0; i < seq; ++i) EXPECT_EQ((*ledger)[i].seq(), i + 1);
  EXPECT_TRUE(absl::StrContains(server_->LogTail(100000), "DPL_TEST_IO_FAULT_FILE is set"));
}

}  // namespace
}  // namespace dpledger::e2e
