#include "core/accountants/spa_ledger_cgf.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

// Error model for K_j (see SpaCumulants::k_abs_error).
constexpr double kKRelError = 1e-12;
constexpr double kKAbsError = 1e-14;
// See SpaCumulants::degenerate.
constexpr double kMinRelativeSpread = 1e-6;
// ess sup is a sum of per-step maxima, each rounded: 1e-12 relative covers any
// ledger's rounding by many orders.
constexpr double kEssSupRoundUp = 1e-12;
// A query touches a few hundred tilts; past this the cache is dropped.
constexpr size_t kMaxCachedTilts = 1 << 14;

}  // namespace

void SpaLedgerCgf::SetLedger(std::span<const MechanismEvent> events) {
  std::vector<Term> terms;
  for (const MechanismEvent& e : events) {
    auto same = [&](const Term& t) { return t.mechanism == e.mechanism; };
    if (auto it = std::find_if(terms.begin(), terms.end(), same); it != terms.end()) {
      it->count += static_cast<double>(e.count);
      continue;
    }
    Term term{e.mechanism, nullptr, static_cast<double>(e.count), {}};
    if (auto old = std::find_if(terms_.begin(), terms_.end(), same); old != terms_.end()) {
      term.plrv = old->plrv;
      term.cache = std::move(old->cache);
    } else {
      term.plrv = MakePlrv(e.mechanism, direction_);
    }
    terms.push_back(std::move(term));
  }
  // ess sup over every mechanism, including those left out of the sums below.
  double ess = 0;
  for (const Term& t : terms) ess += t.count * t.plrv->LossMax();
  std::erase_if(terms, [](const Term& t) {
    if (t.plrv->LossMin() == 0 && t.plrv->LossMax() == 0) return true;  // no privacy loss
    // A Gaussian whose K(t) = t (t + 1) mu^2 / 2 stays below 1e-200 for |t| <=
    // kSpaMaxTilt (sigma ~ 1e300, issue 11) changes no sum beyond their modelled
    // error (k_abs_error >= 1e-14), but its ~0 spread made the tilt searches fail
    // and the answer lose its lower end and estimate.
    const Mechanism& m = t.mechanism;
    const bool gaussian = m.kind() == MechanismKind::kGaussian ||
                          (m.kind() == MechanismKind::kSubsampledGaussian && m.sampling_rate() == 1);
    const double inv = 1 / m.normalized_noise();
    return gaussian && t.count * 1e8 * (inv * inv) < 1e-200;  // 1e8 = kSpaMaxTilt^2
  });
  terms_ = std::move(terms);
  ess_sup_upper_ = std::isfinite(ess) ? ess * (1 + kEssSupRoundUp) : kInf;
}

absl::StatusOr<SpaCumulants> SpaLedgerCgf::At(double t, CumulantOrder order) const {
  const bool sixth = order == CumulantOrder::kSixth;
  SpaCumulants c;
  c.t = t;
  for (const Term& term : terms_) {
    auto it = term.cache.find(t);
    if (it == term.cache.end() || (sixth && it->second.order != CumulantOrder::kSixth)) {
      if (absl::Status s = deadline_.Check("spa: cumulant generating function"); !s.ok()) {
        return s;
      }
      ++tilt_evaluations_;
      absl::StatusOr<TiltedMoments> m = term.plrv->TiltedUpTo(t, order);
      if (!m.ok()) return m.status();
      if (term.cache.size() >= kMaxCachedTilts) term.cache.clear();
      it = term.cache.insert_or_assign(t, CachedTilt{*m, order}).first;
    }
    const TiltedMoments& m = it->second.moments;
    const double n = term.count;
    c.k += n * m.k;
    c.k1 += n * m.k1;
    c.k2 += n * m.k2;
    c.k3 += n * m.k3;
    c.k4 += n * m.k4;
    if (sixth) {
      c.k5 += n * m.k5;
      c.k6 += n * m.k6;
    }
    c.abs3 += n * m.abs3;
    c.k_abs_error += n * (kKRelError * std::fabs(m.k) + kKAbsError);
    const double min_spread = kMinRelativeSpread * std::fabs(m.k1);
    if (!(m.k2 > min_spread * min_spread)) c.degenerate = true;
  }
  for (double v : {c.k, c.k1, c.k2, c.k3, c.k4, c.k5, c.k6, c.abs3}) {
    if (!std::isfinite(v)) {
      return absl::InternalError(
          absl::StrFormat("composed cumulants are not finite at tilt t = %g", t));
    }
  }
  return c;
}

}  // namespace dpledger::core
