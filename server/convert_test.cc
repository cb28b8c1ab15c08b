// Proto -> core conversion: malformed mechanisms and steps are INVALID_ARGUMENT naming the
// field path; conversions round-trip.
#include "server/convert.h"

#include <cmath>

#include "core/util/test_support.h"
#include "gtest/gtest.h"

namespace dpledger::server {
namespace {

using ::dpledger::testing::IsOk;
using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

v1::Step Spec(const std::string& s) {
  v1::Step step;
  step.set_spec(s);
  return step;
}

v1::Step Structured(v1::MechanismKind kind, double sigma, std::optional<double> q, int64_t count) {
  v1::Step step;
  step.mutable_mechanism()->set_kind(kind);
  step.mutable_mechanism()->set_sigma(sigma);
  if (q) step.mutable_mechanism()->set_sampling_rate(*q);
  step.set_count(count);
  return step;
}

TEST(Convert, SpecAndStructuredStepsAgree) {
  absl::StatusOr<core::MechanismEvent> a =
      StepFromProto(Spec("subsampled_gaussian:sigma=1.1,q=0.01,count=1000"), "s");
  absl::StatusOr<core::MechanismEvent> b =
      StepFromProto(Structured(v1::MECHANISM_KIND_SUBSAMPLED_GAUSSIAN, 1.1, 0.01, 1000), "s");
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(a->count, 1000);
  // Back to proto and again: the same event.
  v1::Step back = StepToProto(*a);
  EXPECT_EQ(back.spec(), "subsampled_gaussian:sigma=1.1000000000000001,q=0.01,count=1000");
  v1::Step only_fields = back;
  only_fields.clear_spec();
  EXPECT_EQ(*StepFromProto(only_fields, "s"), *a);
  EXPECT_EQ(*StepFromProto(Spec(back.spec()), "s"), *a);
}

TEST(Convert, MalformedStepsNameTheirField) {
  struct Case {
    const char* name;
    v1::Step step;
    const char* field;
  };
  v1::Step both = Spec("gaussian:sigma=1");
  *both.mutable_mechanism() = Structured(v1::MECHANISM_KIND_GAUSSIAN, 1, std::nullopt, 0).mechanism();
  v1::Step spec_and_count = Spec("gaussian:sigma=1");
  spec_and_count.set_count(3);
  const Case cases[] = {
      {"empty", v1::Step(), "u.steps[0] must give a spec or a mechanism"},
      {"both", both, "not both"},
      {"spec and count", spec_and_count, "u.steps[0].count"},
      {"negative sigma", Structured(v1::MECHANISM_KIND_GAUSSIAN, -1, std::nullopt, 1), "sigma"},
      {"NaN sigma", Structured(v1::MECHANISM_KIND_GAUSSIAN, std::nan(""), std::nullopt, 1), "sigma"},
      {"q above 1", Structured(v1::MECHANISM_KIND_SUBSAMPLED_GAUSSIAN, 1, 1.5, 1), "sampling_rate"},
      {"q zero", Structured(v1::MECHANISM_KIND_SUBSAMPLED_GAUSSIAN, 1, 0.0, 1), "sampling_rate"},
      {"q missing", Structured(v1::MECHANISM_KIND_SUBSAMPLED_GAUSSIAN, 1, std::nullopt, 1), "sampling_rate is required"},
      {"q on a plain kind", Structured(v1::MECHANISM_KIND_GAUSSIAN, 1, 0.5, 1), "sampling_rate"},
      {"no kind", Structured(v1::MECHANISM_KIND_UNSPECIFIED, 1, std::nullopt, 1), "kind"},
      {"unknown kind", Structured(static_cast<v1::MechanismKind>(99), 1, std::nullopt, 1), "kind"},
      {"negative count", Structured(v1::MECHANISM_KIND_GAUSSIAN, 1, std::nullopt, -2), "count"},
      {"bad spec", Spec("gaussian:sigma=-3"), "u.steps[0].spec"},
      {"unknown spec kind", Spec("quantum:x=1"), "u.steps[0].spec"},
  };
  for (const Case& c : cases) {
    v1::StepUpdate u;
    u.set_seq(1);
    *u.add_steps() = c.step;
    EXPECT_THAT(UpdateFromProto(u, "u"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.field)))
        << c.name;
  }
}

TEST(Convert, CreateJobRequestNeedsABudget) {
  v1::CreateJobRequest r;
  r.set_job_id("j");
  EXPECT_THAT(JobSpecFromProto(r), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("budget")));
  r.mutable_budget()->set_epsilon(1);
  r.mutable_budget()->set_delta(1e-6);
  r.set_neighbouring(static_cast<v1::NeighbouringRelation>(42));
  EXPECT_THAT(JobSpecFromProto(r), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("neighbouring")));
}

TEST(Convert, SpentCarriesTheAnswersDiagnostics) {
  SpentAnswer a;
  a.accountant = "mc";
  a.diagnostics = {{"remove_samples", 20000.0}, {"backend", std::string("cpu")}};
  SpentQuery q;
  q.epsilon = 1.0;
  const v1::SpentResponse r = SpentToProto(a, q);
  ASSERT_EQ(r.diagnostics_size(), 2);
  EXPECT_EQ(r.diagnostics(0).name(), "remove_samples");
  EXPECT_EQ(r.diagnostics(0).number(), 20000.0);
  EXPECT_EQ(r.diagnostics(1).name(), "backend");
  EXPECT_EQ(r.diagnostics(1).text(), "cpu");
  EXPECT_FALSE(r.diagnostics(1).has_number());
}

TEST(Convert, AckCarriesErrorsOrBounds) {
  Ack a;
  a.seq = 3;
  a.error = absl::FailedPreconditionError("seq 3 leaves a gap");
  v1::StepAck p = AckToProto(a);
  EXPECT_EQ(p.error_code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_FALSE(p.admitted());
  Ack ok;
  ok.seq = 4;
  ok.admitted = true;
  ok.spent = {0.1, 0.2, 0.3, core::Guarantee::kCertified, 0};
  p = AckToProto(ok);
  EXPECT_EQ(p.error_code(), 0);
  EXPECT_EQ(p.spent().upper(), 0.3);
  EXPECT_EQ(p.spent().guarantee(), v1::GUARANTEE_CERTIFIED);
}

}  // namespace
}  // namespace dpledger::server
