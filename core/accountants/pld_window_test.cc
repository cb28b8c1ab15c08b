// PlanWindow (pld_window.h): the loss window's planning honours the query deadline.
#include "core/accountants/pld_window.h"

#include <cmath>
#include <vector>

#include "core/accountants/pld_grid.h"
#include "core/util/deadline.h"
#include "core/util/test_support.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// Regression (issue 15, found by issue 16's fuzzing): PlanWindow's Chernoff searches
// did not check the deadline; `randomized_response:p=0.99999999999999989,
// count=1099511627776` ran ~1 s of CPU past a 0.25 s query cap under ASan there.
TEST(PldWindow, PlanningStopsAtAPassedDeadlineNamingTheCap) {
  StepPmf pmf;  // losses -0.5, 0, 0.5 with masses 1/4, 1/2, 1/4
  pmf.h = 0.5;
  pmf.origin = -0.5;
  pmf.log_mass = {std::log(0.25), std::log(0.5), std::log(0.25)};
  const TiltedPmf tilted = Tilt(pmf, 1.0);
  const std::vector<WindowPart> parts = {{&pmf, &tilted, 0.0, 0.125, 1000}};
  const WindowBudget budget{std::log(1e-12), std::log(1e-12)};

  absl::StatusOr<WindowPlan> plan = PlanWindow(parts, 0.5, 1.0, budget, 1 << 20);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // 1000 steps of loss in [-0.5, 0.5]: the window lies inside [-500, 500].
  EXPECT_GE(plan->lo, -500);
  EXPECT_LE(plan->hi, 500);
  EXPECT_LT(plan->lo, plan->hi);

  const Deadline passed = Deadline::In(1e-9);
  while (!passed.Expired()) {
  }
  EXPECT_THAT(PlanWindow(parts, 0.5, 1.0, budget, 1 << 20, passed),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       AllOf(HasSubstr("planning the composed loss window"),
                             HasSubstr("query time cap of 1e-09 s"))));
}

}  // namespace
}  // namespace dpledger::core
