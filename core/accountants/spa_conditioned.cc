#include "core/accountants/spa_conditioned.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "absl/strings/str_format.h"
#include "core/plrv/plrv_components.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

// Relative width to which the epsilon ends are located: far below the certified
// interval's own width (~1e-3), so the search adds nothing visible to it.
constexpr double kEpsilonBoundRelTol = 1e-7;
constexpr double kEpsilonEstimateRelTol = 1e-9;
// A root search gives up after this many mixture evaluations (each root needs ~10).
constexpr int kMaxRootEvaluations = 80;

// Root of a decreasing f on [0, inf) located to relative width `tol`: returns the
// final bracket (a, b) with f(a) > 0 >= f(b); a = -1 when f(0) <= 0 already.
// Regula falsi with the Illinois modification (log delta is nearly linear in eps,
// so it converges in a handful of steps); bisection where a value is infinite.
struct Bracket {
  double a, b;
};
absl::StatusOr<Bracket> DecreasingRoot(const std::function<absl::StatusOr<double>(double)>& f,
                                       double guess, double tol) {
  int evaluations = 0;
  auto eval = [&](double x) -> absl::StatusOr<double> {
    if (++evaluations > kMaxRootEvaluations) {
      return absl::InternalError(
          absl::StrFormat("conditioned SPA: epsilon search did not converge after %d "
                          "evaluations (last eps = %g)",
                          kMaxRootEvaluations, x));
    }
    return f(x);
  };
  guess = std::max(guess, 0.0);
  double step = std::max(0.05 * guess, 1e-3);
  double a = guess, b = guess;
  absl::StatusOr<double> fa = eval(a), fb = fa;
  if (!fa.ok()) return fa.status();
  if (*fa > 0) {
    while (true) {
      b = a + step;
      fb = eval(b);
      if (!fb.ok()) return fb.status();
      if (*fb <= 0) break;
      a = b;
      fa = fb;
      step *= 2;
    }
  } else {
    while (true) {
      if (a == 0) return Bracket{-1, 0};
      b = a;
      fb = fa;
      a = std::max(0.0, b - step);
      fa = eval(a);
      if (!fa.ok()) return fa.status();
      if (*fa > 0) break;
      step *= 2;
    }
  }
  double va = *fa, vb = *fb;
  int side = 0;
  while (b - a > tol * std::max(b, 1e-3)) {
    double x = 0.5 * (a + b);
    if (std::isfinite(va) && std::isfinite(vb)) {
      x = b - vb * (b - a) / (vb - va);
      const double margin = 1e-3 * (b - a);
      x = std::clamp(x, a + margin, b - margin);
    }
    absl::StatusOr<double> fx = eval(x);
    if (!fx.ok()) return fx.status();
    if (*fx > 0) {
      a = x;
      va = *fx;
      if (side == 1) vb *= 0.5;
      side = 1;
    } else {
      b = x;
      vb = *fx;
      if (side == -1) va *= 0.5;
      side = -1;
    }
  }
  return Bracket{a, b};
}

// exp of a log upper bound that stays an upper bound (never rounds to 0).
double ExpUp(double log_value) {
  if (log_value == -kInf) return 0;
  const double v = std::exp(log_value);
  return v > 0 ? v : std::numeric_limits<double>::denorm_min();
}

}  // namespace

void SpaConditioned::SetLedger(std::span<const MechanismEvent> events) {
  std::vector<std::pair<Mechanism, int64_t>> sampled, fixed;
  for (const MechanismEvent& e : events) {
    auto& list = HasSampledComponents(e.mechanism) ? sampled : fixed;
    auto it = std::find_if(list.begin(), list.end(),
                           [&](const auto& p) { return p.first == e.mechanism; });
    if (it != list.end()) {
      it->second += e.count;
    } else {
      list.emplace_back(e.mechanism, e.count);
    }
  }
  groups_.clear();
  fixed_counts_.clear();
  std::vector<SpaLedgerCgf::LawTerm> laws;
  for (const auto& [m, n] : sampled) {
    groups_.push_back({n, m.sampling_rate()});
    const SampledComponents c = MakeSampledComponents(m, direction_);
    laws.push_back({c.sampled, 0});
    laws.push_back({c.unsampled, static_cast<double>(n)});
  }
  for (const auto& [m, n] : fixed) {
    std::shared_ptr<const TiltedLaw> law = MakePlrv(m, direction_);
    if (law->LossMin() == 0 && law->LossMax() == 0) continue;  // no privacy loss
    laws.push_back({law, static_cast<double>(n)});
    fixed_counts_.push_back(static_cast<double>(n));
  }
  cgf_.SetLaws(laws);
  t_start_.clear();
}

absl::StatusOr<MixtureAnswer> SpaConditioned::DeltaInBox(const MixtureBox& box, double epsilon,
                                                         SpaEstimator estimator) const {
  if (t_start_.size() != static_cast<size_t>(box.num_terms)) {
    t_start_.assign(box.num_terms, 0.0);
  }
  MixtureAnswer out;
  out.num_terms = box.num_terms;
  out.excluded_mass = box.excluded_mass;
  std::vector<double> counts(2 * groups_.size());
  counts.insert(counts.end(), fixed_counts_.begin(), fixed_counts_.end());
  size_t index = 0;
  double lower = 0, upper = 0, estimate = 0;
  absl::Status s = ForEachMixtureTerm(box, [&](std::span<const int64_t> j, double w) {
    for (size_t g = 0; g < groups_.size(); ++g) {
      counts[2 * g] = static_cast<double>(j[g]);
      counts[2 * g + 1] = static_cast<double>(groups_[g].count - j[g]);
    }
    cgf_.SetCounts(counts);
    SpaDeltaOptions options;
    options.t_start = t_start_[index];
    options.with_icml_k3 = estimator == SpaEstimator::kIcmlK3;
    absl::StatusOr<SpaDeltaPoint> p = EvaluateSpaDelta(cgf_, epsilon, options);
    if (!p.ok()) return p.status();
    if (p->has_saddle) t_start_[index] = p->t0;
    ++index;
    if (p->zero) return absl::OkStatus();
    const double lo = p->log_lower == -kInf ? 0 : std::exp(p->log_lower);
    const double up = ExpUp(p->log_upper);
    lower += w * lo;
    upper += w * up;
    estimate += w * std::clamp(std::exp(p->LogEstimate(estimator)), lo, up);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  out.lower = lower * (1 - kBinomialRelError);
  out.upper = std::min(1.0, upper * (1 + kBinomialRelError) + box.excluded_mass);
  out.estimate = std::clamp(estimate, out.lower, out.upper);
  return out;
}

absl::StatusOr<MixtureAnswer> SpaConditioned::Delta(double epsilon, double delta_hint,
                                                    SpaEstimator estimator) const {
  double budget = kMixtureTruncationFraction * std::max(delta_hint, kMinQueryDelta);
  absl::StatusOr<MixtureAnswer> answer;
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::StatusOr<MixtureBox> box = PlanMixtureBox(groups_, budget);
    if (!box.ok()) return box.status();
    answer = DeltaInBox(*box, epsilon, estimator);
    if (!answer.ok()) return answer.status();
    // The hint was far above the answer: the excluded mass would dominate.
    const double wanted = kMixtureTruncationFraction * answer->estimate;
    if (box->excluded_mass <= 10 * wanted || !(wanted > kMinQueryDelta)) break;
    budget = wanted;
  }
  return answer;
}

absl::StatusOr<MixtureAnswer> SpaConditioned::Epsilon(double delta, double eps_guess,
                                                      SpaEstimator estimator) const {
  absl::StatusOr<MixtureBox> box = PlanMixtureBox(groups_, kMixtureTruncationFraction * delta);
  if (!box.ok()) return box.status();
  std::map<double, MixtureAnswer> memo;
  auto at = [&](double eps) -> absl::StatusOr<MixtureAnswer> {
    if (auto it = memo.find(eps); it != memo.end()) return it->second;
    absl::StatusOr<MixtureAnswer> a = DeltaInBox(*box, eps, estimator);
    if (a.ok()) memo.emplace(eps, *a);
    return a;
  };
  const double log_delta = std::log(delta);
  auto log_of = [](double v) { return v > 0 ? std::log(v) : -kInf; };
  auto root = [&](double MixtureAnswer::*end, double guess,
                  double tol) -> absl::StatusOr<Bracket> {
    return DecreasingRoot(
        [&](double eps) -> absl::StatusOr<double> {
          absl::StatusOr<MixtureAnswer> a = at(eps);
          if (!a.ok()) return a.status();
          return log_of((*a).*end) - log_delta;
        },
        guess, tol);
  };
  absl::StatusOr<Bracket> est = root(&MixtureAnswer::estimate, eps_guess, kEpsilonEstimateRelTol);
  if (!est.ok()) return est.status();
  const double eps_est = std::max(est->b, 0.0);
  absl::StatusOr<Bracket> up = root(&MixtureAnswer::upper, eps_est, kEpsilonBoundRelTol);
  if (!up.ok()) return up.status();
  absl::StatusOr<Bracket> lo = root(&MixtureAnswer::lower, eps_est, kEpsilonBoundRelTol);
  if (!lo.ok()) return lo.status();
  MixtureAnswer out;
  out.num_terms = box->num_terms;
  out.excluded_mass = box->excluded_mass;
  // upper: an eps whose certified delta is <= delta (b); lower: one whose
  // certified lower delta is still > delta (a), or 0.
  out.upper = up->b;
  out.lower = std::max(lo->a, 0.0);
  out.estimate = std::clamp(est->a < 0 ? 0.0 : 0.5 * (est->a + est->b), out.lower, out.upper);
  return out;
}

}  // namespace dpledger::core
