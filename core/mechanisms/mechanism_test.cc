#include "core/mechanisms/mechanism.h"

#include <cmath>
#include <limits>

#include "core/util/test_support.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;
constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

TEST(Mechanism, FactoriesRejectBadParametersNamingTheField) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(Mechanism::Gaussian(0.0), StatusIs(kInvalid, HasSubstr("sigma")));
  EXPECT_THAT(Mechanism::Gaussian(-1.0), StatusIs(kInvalid, HasSubstr("sigma")));
  EXPECT_THAT(Mechanism::Gaussian(nan), StatusIs(kInvalid, HasSubstr("sigma")));
  EXPECT_THAT(Mechanism::Gaussian(1.0, 0.0), StatusIs(kInvalid, HasSubstr("sensitivity")));
  EXPECT_THAT(Mechanism::Laplace(-2.0), StatusIs(kInvalid, HasSubstr("scale")));
  EXPECT_THAT(Mechanism::SubsampledGaussian(1.0, 0.0), StatusIs(kInvalid, HasSubstr("q")));
  EXPECT_THAT(Mechanism::SubsampledGaussian(1.0, 1.5), StatusIs(kInvalid, HasSubstr("q")));
  EXPECT_THAT(Mechanism::SubsampledGaussian(1.0, nan), StatusIs(kInvalid, HasSubstr("q")));
  EXPECT_THAT(Mechanism::RandomizedResponse(0.4), StatusIs(kInvalid, HasSubstr("p")));
  EXPECT_THAT(Mechanism::PureDp(0.0), StatusIs(kInvalid, HasSubstr("epsilon")));
  EXPECT_THAT(Mechanism::ApproxDp(1.0, 1.0), StatusIs(kInvalid, HasSubstr("delta")));
}

TEST(Mechanism, ParseStepReadsEveryKind) {
  auto e = ParseStep("subsampled_gaussian:sigma=1.0,q=0.001,count=1000");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->mechanism.kind(), MechanismKind::kSubsampledGaussian);
  EXPECT_EQ(e->mechanism.sigma(), 1.0);
  EXPECT_EQ(e->mechanism.sampling_rate(), 0.001);
  EXPECT_EQ(e->count, 1000);
  auto g = ParseStep("gaussian:sigma=2");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->count, 1);
  EXPECT_EQ(g->mechanism.sensitivity(), 1.0);
  EXPECT_TRUE(ParseStep("laplace:scale=10,count=100").ok());
  EXPECT_TRUE(ParseStep("subsampled_laplace:scale=2,q=0.01,count=100").ok());
  EXPECT_TRUE(ParseStep("randomized_response:p=0.75").ok());
  EXPECT_TRUE(ParseStep("pure_dp:eps=0.5").ok());
  EXPECT_TRUE(ParseStep("approx_dp:epsilon=0.5,delta=1e-6").ok());
}

TEST(Mechanism, ParseStepErrorsNameTheField) {
  EXPECT_THAT(ParseStep("gaussian:sigma=1,count=0"), StatusIs(kInvalid, HasSubstr("count")));
  EXPECT_THAT(ParseStep("gaussian:sigma=abc"), StatusIs(kInvalid, HasSubstr("sigma")));
  EXPECT_THAT(ParseStep("gaussian:count=3"), StatusIs(kInvalid, HasSubstr("sigma")));
  EXPECT_THAT(ParseStep("gaussian:sigma=-1"), StatusIs(kInvalid, HasSubstr("sigma")));
  EXPECT_THAT(ParseStep("subsampled_gaussian:sigma=1,q=2"), StatusIs(kInvalid, HasSubstr("q")));
  EXPECT_THAT(ParseStep("gaussian:sigma=1,bogus=2"), StatusIs(kInvalid, HasSubstr("bogus")));
  EXPECT_THAT(ParseStep("cauchy:scale=1"), StatusIs(kInvalid, HasSubstr("cauchy")));
  EXPECT_THAT(ParseStep("gaussian:sigma=nan"), StatusIs(kInvalid, HasSubstr("sigma")));
}

TEST(Mechanism, SpecRoundTrips) {
  for (const char* spec : {"gaussian:sigma=1.5", "subsampled_gaussian:sigma=0.8,q=0.01",
                           "laplace:scale=3,sensitivity=2", "approx_dp:epsilon=1,delta=1e-06",
                           "randomized_response:p=0.75"}) {
    auto e = ParseStep(spec);
    ASSERT_TRUE(e.ok()) << spec;
    auto again = ParseStep(e->mechanism.ToSpec());
    ASSERT_TRUE(again.ok()) << e->mechanism.ToSpec();
    EXPECT_EQ(again->mechanism, e->mechanism) << spec;
  }
}

}  // namespace
}  // namespace dpledger::core
