// Shared test helpers: gMock matchers for absl::Status / absl::StatusOr, and
// spec values asserted to the digits a spec prints.
#pragma once

#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

// Sanitizer builds (make check-asan / check-tsan: -O1, instrumented) run 5-30x slower.
// Hang tests multiply their wall-clock bounds by kSanitizerSlowdown, so that they still
// catch a hang there but not a slow build.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DPL_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define DPL_TEST_SANITIZED 1
#endif
#endif

namespace dpledger::testing {

#ifdef DPL_TEST_SANITIZED
inline constexpr double kSanitizerSlowdown = 10;
#else
inline constexpr double kSanitizerSlowdown = 1;
#endif

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

// EXPECT_THAT(Foo(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sigma")));
MATCHER_P2(StatusIs, code, message_matcher, "") {
  const absl::Status& s = GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.code() == code &&
         ::testing::ExplainMatchResult(message_matcher, std::string(s.message()),
                                       result_listener);
}

MATCHER(IsOk, "") {
  const absl::Status& s = GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.ok();
}

// A number as a spec prints it, and half a unit in its last printed digit:
// "0.1445099100" -> 5e-11, "1.068883e-06" -> 5e-13, "164.08703275" -> 5e-9,
// "2" -> 0.5. EXPECT_NEAR(x, p.value, p.half_unit) asserts x to the printed
// digits. A bare "0" is exact (half_unit 0): specs print an exact zero that way.
struct PrintedValue {
  double value = 0, half_unit = 0;
};
inline PrintedValue Printed(std::string_view printed) {
  const std::string s(printed);
  PrintedValue p;
  p.value = std::strtod(s.c_str(), nullptr);
  if (s == "0") return p;
  const size_t e = s.find_first_of("eE");
  const std::string mantissa = s.substr(0, e);
  const int exponent = e == std::string::npos ? 0 : std::atoi(s.c_str() + e + 1);
  const size_t dot = mantissa.find('.');
  const int decimals = dot == std::string::npos ? 0 : static_cast<int>(mantissa.size() - dot - 1);
  p.half_unit = 0.5 * std::pow(10.0, exponent - decimals);
  return p;
}

// EXPECT that `actual` equals a printed spec value to its printed digits.
inline void ExpectPrinted(double actual, std::string_view printed, std::string_view what) {
  const PrintedValue want = Printed(printed);
  EXPECT_NEAR(actual, want.value, want.half_unit) << what << " (spec prints " << printed << ")";
}

}  // namespace dpledger::testing
