#include "core/util/deadline.h"

#include <thread>

#include "core/util/test_support.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

using ::dpledger::testing::IsOk;
using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

TEST(Deadline, DefaultAndZeroNeverExpire) {
  EXPECT_FALSE(Deadline().Expired());
  EXPECT_FALSE(Deadline::In(0).is_set());
  EXPECT_FALSE(Deadline::In(-1).is_set());
  EXPECT_FALSE(Deadline::In(std::numeric_limits<double>::infinity()).is_set());
  EXPECT_FALSE(Deadline::In(std::nan("")).is_set());
  EXPECT_THAT(Deadline::In(0).Check("pld"), IsOk());
}

TEST(Deadline, ExpiresAfterItsCapWithANamedError) {
  // Not expired before its cap: an hour, since a loaded CI machine can stall a thread for
  // longer than a short cap between two lines.
  EXPECT_FALSE(Deadline::In(3600).Expired());
  const Deadline d = Deadline::In(0.01);
  EXPECT_TRUE(d.is_set());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(d.Expired());
  EXPECT_GE(d.Elapsed(), 0.01);
  EXPECT_THAT(d.Check("spa epsilon search"),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("spa epsilon search: stopped at the query time cap of 0.01 s")));
}

}  // namespace
}  // namespace dpledger::core
