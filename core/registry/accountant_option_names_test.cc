#include "core/registry/accountant_option_names.h"

#include <cmath>

#include "core/util/test_support.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

TEST(AccountantOptionNames, EdgeworthModesRoundTrip) {
  EXPECT_EQ(EdgeworthModeName(EdgeworthMode::kClamped), "clamped");
  EXPECT_EQ(EdgeworthModeName(EdgeworthMode::kPaperLiteral), "literal");
  for (EdgeworthMode m : {EdgeworthMode::kClamped, EdgeworthMode::kPaperLiteral}) {
    absl::StatusOr<EdgeworthMode> back = ParseEdgeworthMode(EdgeworthModeName(m), "mode");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, m);
  }
  // The default of EdgeworthOptions is the production mode.
  EXPECT_EQ(EdgeworthModeName(EdgeworthOptions{}.mode), "clamped");
}

TEST(AccountantOptionNames, SpaEstimatorsRoundTrip) {
  EXPECT_EQ(SpaEstimatorName(SpaEstimator::kClt), "sp-clt");
  EXPECT_EQ(SpaEstimatorName(SpaEstimator::kMsd0), "sp-msd0");
  EXPECT_EQ(SpaEstimatorName(SpaEstimator::kMsd1), "sp-msd1");
  EXPECT_EQ(SpaEstimatorName(SpaEstimator::kEw2), "sp-ew2");
  EXPECT_EQ(SpaEstimatorName(SpaEstimator::kIcmlK3), "icml-k3");
  for (SpaEstimator e : {SpaEstimator::kClt, SpaEstimator::kMsd0, SpaEstimator::kMsd1,
                         SpaEstimator::kEw2, SpaEstimator::kIcmlK3}) {
    absl::StatusOr<SpaEstimator> back = ParseSpaEstimator(SpaEstimatorName(e), "estimator");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, e);
  }
  EXPECT_EQ(SpaEstimatorName(SpaOptions{}.estimator), "sp-clt");
}

TEST(AccountantOptionNames, UnknownNamesListTheKnownOnes) {
  EXPECT_THAT(ParseEdgeworthMode("paper", "--edgeworth-mode"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--edgeworth-mode must be one of clamped, literal, got 'paper'")));
  EXPECT_THAT(ParseSpaEstimator("SP-CLT", "spa.estimator"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("spa.estimator must be one of sp-clt, sp-msd0, sp-msd1, sp-ew2, "
                                 "icml-k3, got 'SP-CLT'")));
  EXPECT_THAT(ParseSpaEstimator("", "--spa-estimator"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("got ''")));
}

TEST(AccountantOptionNames, PldPrecisionSetsBothTargetsOrNamesTheField) {
  PldOptions o;
  ASSERT_TRUE(ApplyPldPrecision(1e-4, "--pld-precision", &o).ok());
  EXPECT_EQ(o.relative_accuracy, 1e-4);
  EXPECT_EQ(o.delta_relative_accuracy, 1e-4);
  for (double bad : {0.0, -1.0, 0.6, std::nan("")}) {
    EXPECT_THAT(ApplyPldPrecision(bad, "--pld-precision", &o),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("--pld-precision must be in (0, 0.5]")));
  }
}

}  // namespace
}  // namespace dpledger::core
