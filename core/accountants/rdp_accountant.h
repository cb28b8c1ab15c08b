// RDP (moments) accountant (Mironov 2017; Abadi et al. 2016; Mironov, Talwar,
// Zhang 2019 for the subsampled Gaussian). For each order alpha of a fixed grid it
// sums the per-step Renyi-DP epsilon(alpha) over the ledger (heterogeneous
// composition is additive), then converts to (epsilon, delta) with the improved
// conversion of rdp_conversion.h, minimised over the grid.
//
// Guarantee: every answer is kCertified as an UPPER bound: `upper` is a proven
// epsilon (or delta) for the ledger under add/remove neighbours, `estimate` equals
// `upper`. RDP gives no lower bound at all, so `lower` is always 0.
//
// Mechanisms: everything in rdp_mechanisms.h, i.e. all kinds except approx_dp
// with delta > 0, which Compose refuses with UNIMPLEMENTED (its Renyi divergence
// is infinite).
//
// Cost: per distinct mechanism one pass over the grid (a few ms for the default
// grid: quadrature at fractional orders, exact sums at integer ones), cached per
// ledger event; a query is O(events x orders) then O(orders).
// Thread safety: as Accountant (queries fill a cache; not thread-safe).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/accountants/accountant.h"

namespace dpledger::core {

struct RdpOptions {
  // Orders alpha at which the RDP curve is evaluated, each in [1.001, 1e5]
  // (rdp_mechanisms.h). Empty: DefaultRdpOrders() (rdp_conversion.h).
  std::vector<double> orders;
};

// INVALID_ARGUMENT naming `orders` when an order is out of range.
absl::StatusOr<std::unique_ptr<Accountant>> CreateRdpAccountant(const RdpOptions& options = {});

// The composed RDP curve of `ledger` at `orders`: sum over events of count x
// per-step RDP (certified upper bounds; +inf where it overflows). Errors as
// MechanismRdp (UNIMPLEMENTED for approx_dp with delta > 0).
absl::StatusOr<std::vector<double>> ComposedRdp(std::span<const MechanismEvent> ledger,
                                                std::span<const double> orders);

}  // namespace dpledger::core
