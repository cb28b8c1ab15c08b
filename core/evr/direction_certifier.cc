#include "core/evr/direction_certifier.h"

#include "core/accountants/pld_engine.h"
#include "core/util/deadline.h"

namespace dpledger::core {

absl::StatusOr<double> PldDirectionUpper(std::span<const MechanismEvent> ledger,
                                         Direction direction, double epsilon,
                                         double stop_below, double max_seconds) {
  PldEngine engine{PldOptions{}};
  engine.SetDeadline(Deadline::In(max_seconds));
  // dominated_below stops refining once upper <= stop_below: enough to decide.
  absl::StatusOr<PldInterval> interval = engine.Delta(ledger, direction, epsilon, stop_below);
  if (!interval.ok()) return interval.status();
  return interval->upper;
}

}  // namespace dpledger::core
