#include "core/util/test_support.h"

#include "gtest/gtest.h"

namespace dpledger::testing {
namespace {

// The printed-digit tolerance decides how strictly every spec vector is checked,
// so a wrong half unit would silently loosen them all.
TEST(TestSupport, PrintedGivesHalfAUnitInTheLastPrintedDigit) {
  struct Row {
    const char* printed;
    double value, half_unit;
  };
  const Row rows[] = {
      {"0.1445099100", 0.14450991, 5e-11},
      {"1.068883e-06", 1.068883e-6, 5e-13},
      {"164.08703275", 164.08703275, 5e-9},
      {"-4.417563842607e-03", -4.417563842607e-3, 5e-16},
      {"1.788e-4", 1.788e-4, 5e-8},
      {"1.193851616484e+00", 1.193851616484, 5e-13},
      {"0.0950", 0.095, 5e-5},
      {"2", 2, 0.5},
      {"0", 0, 0},
  };
  for (const Row& r : rows) {
    const PrintedValue p = Printed(r.printed);
    EXPECT_EQ(p.value, r.value) << r.printed;
    EXPECT_NEAR(p.half_unit, r.half_unit, 1e-6 * r.half_unit) << r.printed;
  }
}

}  // namespace
}  // namespace dpledger::testing
