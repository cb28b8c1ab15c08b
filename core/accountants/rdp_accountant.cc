#include "core/accountants/rdp_accountant.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/accountants/rdp_conversion.h"
#include "core/accountants/rdp_mechanisms.h"

namespace dpledger::core {
namespace {

// Per-step RDP of one mechanism at every order.
absl::StatusOr<std::vector<double>> StepRdp(const Mechanism& m, std::span<const double> orders,
                                            const Deadline& deadline) {
  std::vector<double> out;
  out.reserve(orders.size());
  for (double a : orders) {
    if (absl::Status s = deadline.Check("rdp: per-order Renyi divergence"); !s.ok()) return s;
    absl::StatusOr<double> r = MechanismRdp(m, a);
    if (!r.ok()) return r.status();
    out.push_back(*r);
  }
  return out;
}

class RdpAccountant final : public Accountant {
 public:
  explicit RdpAccountant(std::vector<double> orders) : orders_(std::move(orders)) {}

  std::string_view Name() const override { return "rdp"; }
  std::unique_ptr<Accountant> Clone() const override {
    return std::make_unique<RdpAccountant>(*this);
  }

 protected:
  absl::Status CheckSupported(const Mechanism& m) const override {
    if (m.kind() == MechanismKind::kApproxDp && m.delta() > 0) {
      return absl::UnimplementedError(absl::StrFormat(
          "the rdp accountant cannot represent approx_dp with delta > 0 (got delta=%g): its "
          "Renyi divergence is infinite at every order; use the pld accountant",
          m.delta()));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<EpsilonBound> ComputeEpsilon(double delta) const override {
    absl::StatusOr<const std::vector<double>*> total = Total();
    if (!total.ok()) return total.status();
    absl::StatusOr<RdpConversion> eps = RdpToEpsilon(orders_, **total, delta);
    if (!eps.ok()) return eps.status();
    // RDP gives no lower bound: lower = 0 (see the header).
    return EpsilonBound{0, eps->value, eps->value, Guarantee::kCertified, 0};
  }

  absl::StatusOr<DeltaBound> ComputeDelta(double epsilon) const override {
    absl::StatusOr<const std::vector<double>*> total = Total();
    if (!total.ok()) return total.status();
    absl::StatusOr<RdpConversion> log_delta = RdpToLogDelta(orders_, **total, epsilon);
    if (!log_delta.ok()) return log_delta.status();
    const double d = std::exp(log_delta->value);
    return DeltaBound{0, d, d, Guarantee::kCertified, 0};
  }

 private:
  struct CachedStep {
    Mechanism mechanism;
    std::vector<double> rdp;  // per application, at orders_
  };

  // Brings the per-event cache in line with events() (consecutive equal
  // mechanisms are merged by Compose, so an unchanged prefix keeps its entries)
  // and returns the composed curve.
  absl::StatusOr<const std::vector<double>*> Total() const {
    const std::span<const MechanismEvent> ev = events();
    if (steps_.size() > ev.size()) steps_.erase(steps_.begin() + static_cast<std::ptrdiff_t>(ev.size()), steps_.end());
    for (size_t i = 0; i < ev.size(); ++i) {
      if (i < steps_.size() && steps_[i].mechanism == ev[i].mechanism) continue;
      absl::StatusOr<std::vector<double>> rdp = StepRdp(ev[i].mechanism, orders_, deadline());
      if (!rdp.ok()) return rdp.status();
      steps_.erase(steps_.begin() + static_cast<std::ptrdiff_t>(std::min(i, steps_.size())), steps_.end());
      steps_.push_back({ev[i].mechanism, *std::move(rdp)});
    }
    total_.assign(orders_.size(), 0.0);
    for (size_t i = 0; i < ev.size(); ++i) {
      const double count = static_cast<double>(ev[i].count);
      for (size_t j = 0; j < orders_.size(); ++j) total_[j] += count * steps_[i].rdp[j];
    }
    return &total_;
  }

  std::vector<double> orders_;
  mutable std::vector<CachedStep> steps_;
  mutable std::vector<double> total_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Accountant>> CreateRdpAccountant(const RdpOptions& options) {
  std::vector<double> orders = options.orders.empty() ? DefaultRdpOrders() : options.orders;
  if (absl::Status s = ValidateRdpOrders(orders); !s.ok()) return s;
  return std::make_unique<RdpAccountant>(std::move(orders));
}

absl::StatusOr<std::vector<double>> ComposedRdp(std::span<const MechanismEvent> ledger,
                                                std::span<const double> orders) {
  if (absl::Status s = ValidateRdpOrders(orders); !s.ok()) return s;
  std::vector<double> total(orders.size(), 0.0);
  for (const MechanismEvent& e : ledger) {
    absl::StatusOr<std::vector<double>> rdp = StepRdp(e.mechanism, orders, Deadline());
    if (!rdp.ok()) return rdp.status();
    for (size_t j = 0; j < orders.size(); ++j) total[j] += static_cast<double>(e.count) * (*rdp)[j];
  }
  return total;
}

}  // namespace dpledger::core
