// Deadline: a wall-clock cap on long computations (Accountant::SetQueryTimeCap).
// Loops that can run long (grid refinements, tilt and epsilon searches, quadrature
// widening, pool builds) call Check() once per iteration; one steady_clock read
// costs ~20 ns, so checking every outer iteration is free next to its work.
//
// A default-constructed Deadline never expires. Thread-safe (immutable value).
#pragma once

#include <chrono>
#include <string_view>

#include "absl/status/status.h"

namespace dpledger::core {

class Deadline {
 public:
  Deadline() = default;  // none
  // `seconds` from now; 0 (or negative, or not finite) means no cap.
  static Deadline In(double seconds);

  bool is_set() const { return cap_seconds_ > 0; }
  double cap_seconds() const { return cap_seconds_; }
  bool Expired() const { return is_set() && Clock::now() >= at_; }
  // Seconds since the deadline was started (0 when none is set).
  double Elapsed() const;

  // OK, or DEADLINE_EXCEEDED "<what>: stopped at the query time cap of S s".
  absl::Status Check(std::string_view what) const;

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_{}, at_{};
  double cap_seconds_ = 0;
};

}  // namespace dpledger::core
