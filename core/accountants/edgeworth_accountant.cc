#include "core/accountants/edgeworth_accountant.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/accountants/analytic_gaussian.h"
#include "core/plrv/plrv.h"
#include "core/util/check.h"
#include "core/util/log_math.h"
#include "core/util/status_macros.h"

namespace dpledger::core {
namespace {

constexpr std::array<Direction, 2> kDirections = {Direction::kRemove, Direction::kAdd};

bool IsPlainGaussian(const Mechanism& m) {
  return m.kind() == MechanismKind::kGaussian ||
         (m.kind() == MechanismKind::kSubsampledGaussian && m.sampling_rate() == 1);
}

// The largest CDF-error bound of the ledger, for messages.
struct WorstErrors {
  double error_x, error_y;
  Direction direction;
};
WorstErrors Worst(const std::array<EeaiDirection, 2>& dirs) {
  const int i = dirs[0].error_x + dirs[0].error_y >= dirs[1].error_x + dirs[1].error_y ? 0 : 1;
  return {dirs[i].error_x, dirs[i].error_y, kDirections[i]};
}

// Why the EEAI has no finite eps^+ at delta (S4.1, S4.6).
std::string EpsilonUncertifiedWhy(double delta, const std::array<EeaiDirection, 2>& eeai) {
  const WorstErrors w = Worst(eeai);
  return absl::StrFormat(
      "the finite-sample bound (first-order Edgeworth expansion with the DGG uniform error "
      "bound, edgeworth.md S4) never falls to delta=%g, because its CDF error bounds are "
      "Delta_X=%.3g, Delta_Y=%.3g (direction %s) and no delta below about Delta_Y can be "
      "certified",
      delta, w.error_x, w.error_y, std::string(DirectionName(w.direction)));
}

// Why the EEAI's delta^+ is 1 at epsilon (S4.1: e^eps amplifies Delta_X, S9.6).
std::string DeltaUncertifiedWhy(double epsilon, const std::array<EeaiDirection, 2>& eeai) {
  const WorstErrors w = Worst(eeai);
  return absl::StrFormat(
      "the finite-sample upper bound (edgeworth.md S4) is vacuous (1) at epsilon=%g, because "
      "its CDF error bounds are Delta_X=%.3g, Delta_Y=%.3g (direction %s), amplified by "
      "e^epsilon",
      epsilon, w.error_x, w.error_y, std::string(DirectionName(w.direction)));
}

// Basic composition: the ledger's largest possible total loss over both
// directions, sum_i count_i * max_d sup L_i,d (+inf when a loss is unbounded).
// delta(eps) = 0 at and above it (Dwork-Roth Thm 3.16 for pure DP; in general the
// loss never exceeds it), so it is a certified epsilon upper bound.
double MaxTotalLoss(std::span<const MechanismEvent> events) {
  double total = 0;
  for (const MechanismEvent& e : events) {
    double worst = 0;
    for (Direction d : kDirections) worst = std::max(worst, MakePlrv(e.mechanism, d)->LossMax());
    total += static_cast<double>(e.count) * worst;
  }
  return std::isnan(total) ? kInf : total;
}

// Why the Edgeworth series gives no number for this ledger (issue 11: e.g. a
// pure_dp step with epsilon = 700 has a loss variance of ~1e-298 nats^2 and
// standardised cumulants past the double range).
std::string SeriesUndefinedWhy(const absl::Status& s) {
  return absl::StrFormat(
      "the edgeworth accountant cannot handle this ledger: its Edgeworth expansion is not "
      "a number in double precision (%s); use the pld accountant",
      std::string(s.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Accountant>> CreateEdgeworthAccountant(
    const EdgeworthOptions& options) {
  if (options.order < 0 || options.order > kMaxEdgeworthOrder) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "edgeworth order must be in [0, %d], got %d", kMaxEdgeworthOrder, options.order));
  }
  if (options.mode != EdgeworthMode::kClamped && options.mode != EdgeworthMode::kPaperLiteral) {
    return absl::InvalidArgumentError(
        absl::StrFormat("edgeworth mode must be kClamped or kPaperLiteral, got %d",
                        static_cast<int>(options.mode)));
  }
  return std::make_unique<EdgeworthAccountant>(options);
}

std::unique_ptr<Accountant> EdgeworthAccountant::Clone() const {
  return std::make_unique<EdgeworthAccountant>(*this);
}

absl::Status EdgeworthAccountant::CheckSupported(const Mechanism& m) const {
  // The records are computed here, where an error can still refuse the step (a
  // mechanism whose cumulants are not finite in double precision, issue 11), and
  // cached for OnLedgerChanged.
  const std::string key = m.ToSpec();
  if (record_cache_.count(key) > 0) return absl::OkStatus();
  DPL_RETURN_IF_ERROR(deadline().Check("edgeworth: cumulants of a new mechanism"));
  std::array<PllrPair, 2> pairs;
  for (int d = 0; d < 2; ++d) {
    absl::StatusOr<PllrPair> pair = EdgeworthPllrPair(m, kDirections[d]);
    if (!pair.ok()) return pair.status();
    pairs[d] = *pair;
  }
  record_cache_.emplace(key, pairs);
  return absl::OkStatus();
}

void EdgeworthAccountant::OnLedgerChanged() {
  sums_.reset();
  mixture_.Reset();
  const auto events = this->events();
  // Compose only appends an event or grows the last one's count, so earlier
  // records stay valid; anything else (never expected) recomputes them all.
  if (records_.size() > events.size()) records_.clear();
  for (size_t i = records_.size(); i < events.size(); ++i) {
    auto it = record_cache_.find(events[i].mechanism.ToSpec());
    DPL_CHECK(it != record_cache_.end());  // CheckSupported cached every composed mechanism
    records_.push_back(it->second);
  }
}

const EdgeworthAccountant::LedgerSums& EdgeworthAccountant::Sums() const {
  if (sums_.has_value()) return *sums_;
  LedgerSums s;
  const auto events = this->events();
  DPL_CHECK(records_.size() == events.size());
  // Fixed order (the ledger's), so the sums are a function of the ledger.
  for (size_t i = 0; i < events.size(); ++i) {
    const double count = static_cast<double>(events[i].count);
    const Mechanism& m = events[i].mechanism;
    if (IsPlainGaussian(m)) {
      s.gaussian_mu2 += count / (m.normalized_noise() * m.normalized_noise());
    } else {
      s.all_gaussian = false;
    }
    if (!(m == events[0].mechanism)) s.homogeneous = false;
    for (int d = 0; d < 2; ++d) {
      const PllrPair& p = records_[i][d];
      // A step whose loss is identically 0 (pure DP with epsilon 0) changes no
      // sum; leaving it out keeps the DGG averages over informative steps.
      if (p.x.k2 == 0 && p.y.k2 == 0) continue;
      DirectionSums& ds = s.directions[d];
      ds.x.Add(p.x, count);
      ds.y.Add(p.y, count);
      ds.bound_x.Add(p.x, count);
      ds.bound_y.Add(p.y, count);
    }
  }
  sums_ = s;
  return *sums_;
}

std::array<DirectionTotals, 2> EdgeworthAccountant::AeaDirections() const {
  const LedgerSums& s = Sums();
  return {DirectionTotals{s.directions[0].x, s.directions[0].y},
          DirectionTotals{s.directions[1].x, s.directions[1].y}};
}

std::array<EeaiDirection, 2> EdgeworthAccountant::EeaiDirections() const {
  const LedgerSums& s = Sums();
  std::array<EeaiDirection, 2> out;
  for (int d = 0; d < 2; ++d) {
    const DirectionSums& ds = s.directions[d];
    out[d].x = ds.x;
    out[d].y = ds.y;
    // A zero-variance sequence is a point mass, which G_1 reproduces exactly.
    out[d].error_x = ds.x.variance > 0 ? UniformEdgeworthError(ds.bound_x, s.homogeneous) : 0;
    out[d].error_y = ds.y.variance > 0 ? UniformEdgeworthError(ds.bound_y, s.homogeneous) : 0;
  }
  return out;
}

absl::StatusOr<bool> EdgeworthAccountant::Conditioned(const Deadline& until) const {
  if (options_.conditioning == SpaConditioning::kOff || !clamp()) {
    diagnostics_.push_back({"conditioned", std::string(clamp() ? "no: conditioning off"
                                                               : "no: paper-literal mode")});
    return false;
  }
  return mixture_.Applies(events(), kDirections, BulkEstimator::kEw2, until, diagnostics_);
}

absl::Status EdgeworthAccountant::ConditionedEstimate(
    const std::function<absl::StatusOr<std::optional<double>>(const Deadline&)>& query,
    double& estimate) const {
  const Deadline until = MixtureDeadline(deadline());
  absl::StatusOr<bool> conditioned = Conditioned(until);
  absl::StatusOr<std::optional<double>> value = std::nullopt;
  if (!conditioned.ok()) {
    value = conditioned.status();
  } else if (*conditioned) {
    value = query(until);
  }
  if (!value.ok()) {
    // Past the mixture's share of the query time: keep the unconditioned estimate.
    return FallsBack(value.status(), deadline(), diagnostics_) ? absl::OkStatus()
                                                                : value.status();
  }
  if (value->has_value()) estimate = **value;
  return absl::OkStatus();
}

absl::StatusOr<EpsilonBound> EdgeworthAccountant::ComputeEpsilon(double delta) const {
  diagnostics_.clear();
  const LedgerSums& s = Sums();
  if (s.all_gaussian) {
    // Exact (S2.1): every Edgeworth order equals the mu-GDP closed form.
    return GaussianEpsilonBound(GaussianLedgerMu(events()), delta);
  }
  const auto aea = AeaDirections();
  absl::StatusOr<double> aea_epsilon = AeaEpsilon(delta, aea, options_.order, clamp());
  if (aea_epsilon.status().code() == absl::StatusCode::kInternal) {
    // Not a number: answer with basic composition where the losses are bounded.
    const double basic = MaxTotalLoss(events());
    if (!std::isfinite(basic)) {
      return absl::FailedPreconditionError(SeriesUndefinedWhy(aea_epsilon.status()));
    }
    diagnostics_.push_back({"method", std::string("basic composition (edgeworth series not a "
                                                  "number in double precision)")});
    return EpsilonBound{0, basic, basic, Guarantee::kCertified, 0};
  }
  if (!aea_epsilon.ok()) return aea_epsilon.status();
  double estimate = *aea_epsilon;
  // Each stage is bounded (a 401-point AEA scan, a 4000-interval EEAI scan); the
  // cap is checked between them.
  DPL_RETURN_IF_ERROR(deadline().Check("edgeworth: epsilon"));
  const auto eeai = EeaiDirections();
  const EpsilonInterval cert = EeaiEpsilon(delta, eeai);
  // Searched where the truth lies: the EEAI interval, or up to the largest
  // total loss (or well past the AEA estimate) where it has no upper end.
  const double hi = std::isfinite(cert.upper)
                        ? cert.upper
                        : std::min(MaxTotalLoss(events()), 4 * estimate + 10);
  DPL_RETURN_IF_ERROR(ConditionedEstimate(
      [&](const Deadline& until) {
        return mixture_.Epsilon(delta, cert.lower, hi, until, diagnostics_);
      },
      estimate));
  if (std::isfinite(cert.upper)) {
    const double est = clamp() ? std::clamp(estimate, cert.lower, cert.upper) : estimate;
    return EpsilonBound{cert.lower, est, cert.upper, Guarantee::kCertified, 0};
  }
  const std::string why = EpsilonUncertifiedWhy(delta, eeai);
  if (options_.require_certified) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "edgeworth: cannot certify epsilon at delta=%g: %s; the uncertified order-%d estimate is "
        "epsilon=%.6g, the certified lower bound %.6g",
        delta, why, options_.order, estimate, cert.lower));
  }
  diagnostics_.push_back({std::string(kUncertifiedReason), why});
  // The EEAI lower end stays a valid bound; no upper bound is known. Nor can the
  // truth exceed the largest total loss (issue 11: laplace:scale=0.001 estimated
  // 1011.8 nats with every loss at most 1000).
  const double est =
      clamp() ? std::min(std::max(estimate, cert.lower), MaxTotalLoss(events())) : estimate;
  return EpsilonBound{cert.lower, est, kInf, Guarantee::kEstimate, 0};
}

absl::StatusOr<DeltaBound> EdgeworthAccountant::ComputeDelta(double epsilon) const {
  diagnostics_.clear();
  const LedgerSums& s = Sums();
  if (s.all_gaussian) {
    return GaussianDeltaBound(GaussianLedgerMu(events()), epsilon);
  }
  const auto aea = AeaDirections();
  double estimate = AeaDelta(epsilon, aea, options_.order, clamp());
  if (std::isnan(estimate)) {
    if (epsilon >= MaxTotalLoss(events())) return DeltaBound{0, 0, 0, Guarantee::kCertified, 0};
    return absl::FailedPreconditionError(SeriesUndefinedWhy(absl::InternalError(
        absl::StrFormat("delta_AEA(epsilon=%g) is not a number", epsilon))));
  }
  if (clamp()) estimate = std::clamp(estimate, 0.0, 1.0);
  DPL_RETURN_IF_ERROR(deadline().Check("edgeworth: delta"));
  const auto eeai = EeaiDirections();
  const DeltaInterval cert = EeaiDelta(epsilon, eeai);
  DPL_RETURN_IF_ERROR(ConditionedEstimate(
      [&](const Deadline& until) {
        return mixture_.Delta(epsilon, -kInf, until, diagnostics_);
      },
      estimate));
  if (cert.upper < 1) {
    const double est = clamp() ? std::clamp(estimate, cert.lower, cert.upper) : estimate;
    return DeltaBound{cert.lower, est, cert.upper, Guarantee::kCertified, 0};
  }
  const std::string why = DeltaUncertifiedWhy(epsilon, eeai);
  if (options_.require_certified) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "edgeworth: cannot certify delta at epsilon=%g: %s; the uncertified order-%d estimate "
        "is delta=%.6g, the certified lower bound %.6g",
        epsilon, why, options_.order, estimate, cert.lower));
  }
  diagnostics_.push_back({std::string(kUncertifiedReason), why});
  const double est = clamp() ? std::max(estimate, cert.lower) : estimate;
  return DeltaBound{cert.lower, est, 1.0, Guarantee::kEstimate, 0};
}

}  // namespace dpledger::core
