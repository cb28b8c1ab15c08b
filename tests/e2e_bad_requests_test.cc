// A table of bad requests (issue 4 "Tests"), each with its expected status code
// and the field its message must name; afterwards the job is exactly as before
// (nothing half-written).
#include <cmath>
#include <functional>
#include <limits>

#include "core/util/test_support.h"
#include "tests/e2e_fixture.h"

namespace dpledger::e2e {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

using Call = std::function<absl::Status(client::Client&)>;

struct BadRequest {
  const char* name;
  Call call;
  absl::StatusCode code;
  const char* names_field;  // a substring the message must contain
};

template <typename T>
absl::Status StatusOf(const absl::StatusOr<T>& r) {
  return r.status();
}

v1::CreateJobRequest Job(const std::string& id, double epsilon, double delta,
                         const std::string& accountant = "") {
  v1::CreateJobRequest r;
  r.set_job_id(id);
  r.mutable_budget()->set_epsilon(epsilon);
  r.mutable_budget()->set_delta(delta);
  r.set_accountant(accountant);
  return r;
}

Call CreateJob(v1::CreateJobRequest r) {
  return [r](client::Client& c) { return StatusOf(c.CreateJob(r)); };
}

// AppendSteps on job "j" (last_seq 1) with one update of `specs` at `seq`.
Call Append(int64_t seq, std::vector<std::string> specs, const std::string& job = "j") {
  return [=](client::Client& c) {
    v1::AppendStepsRequest r;
    r.set_job_id(job);
    v1::StepUpdate* u = r.add_updates();
    u->set_seq(seq);
    for (const std::string& s : specs) u->add_steps()->set_spec(s);
    return StatusOf(c.AppendSteps(r));
  };
}

// AppendSteps with one structured mechanism.
Call AppendMechanism(v1::Mechanism m, int64_t count) {
  return [=](client::Client& c) {
    v1::AppendStepsRequest r;
    r.set_job_id("j");
    v1::StepUpdate* u = r.add_updates();
    u->set_seq(2);
    v1::Step* s = u->add_steps();
    *s->mutable_mechanism() = m;
    s->set_count(count);
    return StatusOf(c.AppendSteps(r));
  };
}

v1::Mechanism Gaussian(double sigma) {
  v1::Mechanism m;
  m.set_kind(v1::MECHANISM_KIND_GAUSSIAN);
  m.set_sigma(sigma);
  return m;
}

Call Spent(std::function<void(v1::SpentRequest&)> edit) {
  return [=](client::Client& c) {
    v1::SpentRequest r;
    r.set_job_id("j");
    edit(r);
    return StatusOf(c.Spent(r));
  };
}

Call Release(std::function<void(v1::ReleaseRequest&)> edit) {
  return [=](client::Client& c) {
    v1::ReleaseRequest r;
    r.set_job_id("j");
    r.set_payload("p");
    r.set_epsilon(5);
    r.set_delta_est(1e-6);
    edit(r);
    return StatusOf(c.Release(r));
  };
}

using Code = absl::StatusCode;

const std::vector<BadRequest>& Table() {
  static const auto* table = new std::vector<BadRequest>{
      // CreateJob
      {"empty job id", CreateJob(Job("", 1, 1e-6)), Code::kInvalidArgument, "job_id"},
      {"job id with a space", CreateJob(Job("a b", 1, 1e-6)), Code::kInvalidArgument, "job_id"},
      {"job id too long", CreateJob(Job(std::string(129, 'x'), 1, 1e-6)),
       Code::kInvalidArgument, "job_id"},
      {"NaN budget epsilon", CreateJob(Job("n1", kNaN, 1e-6)), Code::kInvalidArgument, "epsilon"},
      {"negative budget epsilon", CreateJob(Job("n2", -1, 1e-6)), Code::kInvalidArgument,
       "epsilon"},
      {"infinite budget epsilon", CreateJob(Job("n3", kInf, 1e-6)), Code::kInvalidArgument,
       "epsilon"},
      {"zero budget delta", CreateJob(Job("n4", 1, 0)), Code::kInvalidArgument, "delta"},
      {"budget delta of one", CreateJob(Job("n5", 1, 1)), Code::kInvalidArgument, "delta"},
      {"NaN budget delta", CreateJob(Job("n6", 1, kNaN)), Code::kInvalidArgument, "delta"},
      {"unknown accountant", CreateJob(Job("n7", 1, 1e-6, "nope")), Code::kInvalidArgument,
       "accountant"},
      {"duplicate job", CreateJob(Job("j", 1, 1e-6)), Code::kAlreadyExists, "j"},
      {"replace-one neighbouring",
       CreateJob([] {
         auto r = Job("n8", 1, 1e-6);
         r.set_neighbouring(v1::NEIGHBOURING_RELATION_REPLACE_ONE);
         return r;
       }()),
       Code::kUnimplemented, "neighbouring"},
      {"tenant with a slash",
       CreateJob([] {
         auto r = Job("n9", 1, 1e-6);
         r.set_tenant("a/b");
         return r;
       }()),
       Code::kInvalidArgument, "tenant"},
      // GetJob / CloseJob
      {"unknown job", [](client::Client& c) { return StatusOf(c.GetJob("missing")); },
       Code::kNotFound, "missing"},
      {"close unknown job", [](client::Client& c) { return StatusOf(c.CloseJob("missing")); },
       Code::kNotFound, "missing"},
      // AppendSteps: steps
      {"negative sigma", Append(2, {"gaussian:sigma=-1"}), Code::kInvalidArgument, "sigma"},
      {"NaN sigma", Append(2, {"gaussian:sigma=nan"}), Code::kInvalidArgument, "sigma"},
      {"q above one", Append(2, {"subsampled_gaussian:sigma=1,q=1.5"}), Code::kInvalidArgument,
       "q"},
      {"q of zero", Append(2, {"subsampled_gaussian:sigma=1,q=0"}), Code::kInvalidArgument, "q"},
      {"unknown mechanism", Append(2, {"cauchy:scale=1"}), Code::kInvalidArgument, "cauchy"},
      {"negative count", Append(2, {"gaussian:sigma=1,count=-3"}), Code::kInvalidArgument,
       "count"},
      {"update without steps", Append(2, {}), Code::kInvalidArgument, "steps"},
      {"structured NaN sigma", AppendMechanism(Gaussian(kNaN), 1), Code::kInvalidArgument,
       "sigma"},
      {"structured kind unspecified", AppendMechanism(v1::Mechanism(), 1),
       Code::kInvalidArgument, "kind"},
      {"structured negative count", AppendMechanism(Gaussian(1), -1), Code::kInvalidArgument,
       "count"},
      {"both spec and mechanism",
       [](client::Client& c) {
         v1::AppendStepsRequest r;
         r.set_job_id("j");
         v1::StepUpdate* u = r.add_updates();
         u->set_seq(2);
         v1::Step* s = u->add_steps();
         s->set_spec("gaussian:sigma=1");
         *s->mutable_mechanism() = Gaussian(1);
         return StatusOf(c.AppendSteps(r));
       },
       Code::kInvalidArgument, "spec"},
      // AppendSteps: sequence numbers and batches
      {"seq zero", Append(0, {"gaussian:sigma=1"}), Code::kInvalidArgument, "seq"},
      {"seq gap", Append(5, {"gaussian:sigma=1"}), Code::kFailedPrecondition, "seq"},
      {"conflicting retry", Append(1, {"gaussian:sigma=3"}), Code::kAlreadyExists, "seq"},
      {"steps to unknown job", Append(1, {"gaussian:sigma=1"}, "missing"), Code::kNotFound,
       "missing"},
      {"no updates",
       [](client::Client& c) {
         v1::AppendStepsRequest r;
         r.set_job_id("j");
         return StatusOf(c.AppendSteps(r));
       },
       Code::kInvalidArgument, "updates"},
      {"oversize batch",
       [](client::Client& c) {
         v1::AppendStepsRequest r;
         r.set_job_id("j");
         for (int i = 0; i < 5000; ++i) {
           v1::StepUpdate* u = r.add_updates();
           u->set_seq(2 + i);
           u->add_steps()->set_spec("gaussian:sigma=1000");
         }
         return StatusOf(c.AppendSteps(r));
       },
       Code::kInvalidArgument, "updates"},
      {"too many steps in one update",
       Append(2, std::vector<std::string>(1000, "gaussian:sigma=1000")), Code::kInvalidArgument,
       "steps"},
      {"missing job id on steps", Append(2, {"gaussian:sigma=1"}, ""), Code::kInvalidArgument,
       "job_id"},
      // Spent / Remaining
      {"spent without a query", Spent([](v1::SpentRequest&) {}), Code::kInvalidArgument,
       "delta"},
      {"spent at delta zero", Spent([](v1::SpentRequest& r) { r.set_delta(0); }),
       Code::kInvalidArgument, "delta"},
      {"spent at NaN delta", Spent([](v1::SpentRequest& r) { r.set_delta(kNaN); }),
       Code::kInvalidArgument, "delta"},
      {"spent at delta one", Spent([](v1::SpentRequest& r) { r.set_delta(1.0); }),
       Code::kInvalidArgument, "delta"},
      {"spent at negative epsilon", Spent([](v1::SpentRequest& r) { r.set_epsilon(-0.5); }),
       Code::kInvalidArgument, "epsilon"},
      {"spent by unknown accountant",
       Spent([](v1::SpentRequest& r) {
         r.set_delta(1e-6);
         r.set_accountant("nope");
       }),
       Code::kInvalidArgument, "accountant"},
      {"remaining without a step",
       [](client::Client& c) {
         v1::RemainingRequest r;
         r.set_job_id("j");
         return StatusOf(c.Remaining(r));
       },
       Code::kInvalidArgument, "step"},
      // Release
      {"release delta_est zero", Release([](v1::ReleaseRequest& r) { r.set_delta_est(0); }),
       Code::kInvalidArgument, "delta_est"},
      {"release NaN epsilon", Release([](v1::ReleaseRequest& r) { r.set_epsilon(kNaN); }),
       Code::kInvalidArgument, "epsilon"},
      {"release tau above one", Release([](v1::ReleaseRequest& r) { r.set_tau(1.5); }),
       Code::kInvalidArgument, "tau"},
      {"release rho below tau",
       Release([](v1::ReleaseRequest& r) {
         r.set_tau(0.9);
         r.set_rho(0.5);
       }),
       Code::kInvalidArgument, "rho"},
      {"release of unknown job", Release([](v1::ReleaseRequest& r) { r.set_job_id("missing"); }),
       Code::kNotFound, "missing"},
      {"release claim below the spent privacy",
       Release([](v1::ReleaseRequest& r) {
         r.set_epsilon(1e-6);
         r.set_delta_est(1e-9);
       }),
       Code::kFailedPrecondition, "verification failed"},
      // Size limits are INVALID_ARGUMENT naming the limit (as for batches above).
      {"oversize payload",
       Release([](v1::ReleaseRequest& r) { r.set_payload(std::string(9 << 20, 'x')); }),
       Code::kInvalidArgument, "max_payload_bytes"},
      {"unknown release",
       [](client::Client& c) {
         v1::GetReleaseRequest r;
         r.set_release_id("no-such-release");
         return StatusOf(c.GetRelease(r));
       },
       Code::kNotFound, "no-such-release"},
      // ListJobs
      {"negative page size",
       [](client::Client& c) {
         v1::ListJobsRequest r;
         r.set_page_size(-1);
         return StatusOf(c.ListJobs(r));
       },
       Code::kInvalidArgument, "page_size"},
      {"garbage page token",
       [](client::Client& c) {
         v1::ListJobsRequest r;
         r.set_page_token("\x01garbage");
         return StatusOf(c.ListJobs(r));
       },
       Code::kInvalidArgument, "page_token"},
  };
  return *table;
}

class BadRequestTest : public E2eTest {};

TEST_F(BadRequestTest, EachBadRequestGetsItsStatusAndChangesNothing) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  auto c = NewClient([](client::ClientOptions& o) { o.retry.max_attempts = 1; });
  ASSERT_TRUE(c->CreateJob(Job("j", 10, 1e-6)).ok());
  auto first = c->AppendStep("j", 1, {"gaussian:sigma=2,count=4"});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->admitted());
  auto before = c->GetJob("j");
  ASSERT_TRUE(before.ok());

  for (const BadRequest& bad : Table()) {
    SCOPED_TRACE(bad.name);
    EXPECT_THAT(bad.call(*c), StatusIs(bad.code, HasSubstr(bad.names_field)));
  }

  auto after = c->GetJob("j");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->num_steps(), before->num_steps());
  EXPECT_EQ(after->last_seq(), before->last_seq());
  EXPECT_EQ(after->num_updates(), 1);
  EXPECT_EQ(after->num_releases(), 0);
  EXPECT_EQ(after->spent().upper(), before->spent().upper());
  v1::ListJobsRequest list;
  auto jobs = c->ListJobs(list);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->jobs_size(), 1) << "a refused CreateJob left a job behind";
}

TEST_F(BadRequestTest, ClosedJobRefusesStepsAndReleasesButAnswersQueries) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  auto c = NewClient([](client::ClientOptions& o) { o.retry.max_attempts = 1; });
  ASSERT_TRUE(c->CreateJob(Job("j", 10, 1e-6)).ok());
  ASSERT_TRUE(c->AppendStep("j", 1, {"gaussian:sigma=2"}).ok());
  auto closed = c->CloseJob("j");
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_EQ(closed->state(), v1::JOB_STATE_CLOSED);
  EXPECT_GT(closed->close_time_unix_ms(), 0);
  EXPECT_THAT(c->AppendStep("j", 2, {"gaussian:sigma=2"}),
              StatusIs(Code::kFailedPrecondition, HasSubstr("closed")));
  EXPECT_THAT(Release([](v1::ReleaseRequest&) {})(*c),
              StatusIs(Code::kFailedPrecondition, HasSubstr("closed")));
  v1::SpentRequest s;
  s.set_job_id("j");
  s.set_delta(1e-6);
  EXPECT_TRUE(c->Spent(s).ok());
  // A retry of an admitted seq still answers from the ledger.
  auto retry = c->AppendStep("j", 1, {"gaussian:sigma=2"});
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_TRUE(retry->duplicate());
}

TEST_F(BadRequestTest, MalformedStreamsEndWithAStatusAndPerUpdateErrorsDoNot) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  auto c = NewClient([](client::ClientOptions& o) { o.retry.max_attempts = 1; });
  ASSERT_TRUE(c->CreateJob(Job("j", 10, 1e-6)).ok());

  // Unknown job: the stream ends NOT_FOUND.
  {
    auto stream = c->OpenStream("missing");
    v1::StepUpdate u;
    u.set_seq(1);
    u.add_steps()->set_spec("gaussian:sigma=1");
    ASSERT_TRUE(stream->Write(u).ok());
    EXPECT_THAT(stream->Read(), StatusIs(Code::kNotFound, HasSubstr("missing")));
  }
  // No job id in the first message: INVALID_ARGUMENT naming job_id.
  {
    auto stream = c->OpenStream("");
    v1::StepUpdate u;
    u.set_seq(1);
    u.add_steps()->set_spec("gaussian:sigma=1");
    ASSERT_TRUE(stream->Write(u).ok());
    EXPECT_THAT(stream->Read(), StatusIs(Code::kInvalidArgument, HasSubstr("job_id")));
  }
  // Per-update errors are reported in the ack and the stream goes on.
  auto stream = c->OpenStream("j");
  v1::StepUpdate bad;
  bad.set_seq(1);
  bad.add_steps()->set_spec("gaussian:sigma=-2");
  v1::StepUpdate gap;
  gap.set_seq(7);
  gap.add_steps()->set_spec("gaussian:sigma=2");
  v1::StepUpdate good;
  good.set_seq(1);
  good.add_steps()->set_spec("gaussian:sigma=2");
  ASSERT_TRUE(stream->Write(bad).ok());
  auto a1 = stream->Read();
  ASSERT_TRUE(a1.ok()) << a1.status();
  EXPECT_THAT(client::AckStatus(*a1), StatusIs(Code::kInvalidArgument, HasSubstr("sigma")));
  EXPECT_FALSE(a1->admitted());
  ASSERT_TRUE(stream->Write(gap).ok());
  auto a2 = stream->Read();
  ASSERT_TRUE(a2.ok()) << a2.status();
  EXPECT_THAT(client::AckStatus(*a2), StatusIs(Code::kFailedPrecondition, HasSubstr("seq")));
  ASSERT_TRUE(stream->Write(good).ok());
  auto a3 = stream->Read();
  ASSERT_TRUE(a3.ok()) << a3.status();
  EXPECT_TRUE(client::AckStatus(*a3).ok()) << a3->error_message();
  EXPECT_TRUE(a3->admitted());
  EXPECT_EQ(a3->num_steps(), 1);
  EXPECT_TRUE(stream->Close().ok());
}

}  // namespace
}  // namespace dpledger::e2e
