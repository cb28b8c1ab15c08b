#include "core/mc/mixture_choice.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/accountants/spa_ledger_cgf.h"
#include "core/mc/mc_step.h"
#include "core/mc/tilt_choice.h"
#include "core/mc/truncated_loss_tilt.h"
#include "core/plrv/plrv.h"
#include "core/util/log_math.h"

namespace dpledger::core::mc {
namespace {

// EM grid: at least kGridPoints points, at most sigma/8 apart (the fitted normals
// have the step's sigma, so this resolves them), at most 2^20 points; spans 10
// sigma beyond both the untilted law and the loss tilt's far part at 1 + lambda.
constexpr int kGridPoints = 4001;
constexpr int kMaxGridPoints = 1 << 20;
constexpr int kEmIterations = 300;
// Far-plan grid: y_far = epsilon k / kFarSteps, k = 1 .. kFarMax.
constexpr int kFarSteps = 16;
constexpr int kFarMax = 24;
// At most this probability on the far component of one coordinate.
constexpr double kMaxAlpha = 0.5;

bool IsGaussianKind(const Mechanism& m) {
  return m.kind() == MechanismKind::kGaussian || m.kind() == MechanismKind::kSubsampledGaussian;
}

void SetComponents(McMix* mix, const double* weights, const double* means, int n) {
  mix->num = 0;
  double cum = 0;
  for (int k = 0; k < n; ++k) {
    if (!(weights[k] > 0)) continue;
    cum += weights[k];
    mix->log_pi[mix->num] = std::log(weights[k]);
    mix->mean[mix->num] = means[k];
    mix->cum[mix->num] = cum;
    ++mix->num;
  }
  if (mix->num > 0) mix->cum[mix->num - 1] = 1;  // rounding: the last bin ends at 1
}

// K_tot(lambda) - lambda * target: the Chernoff exponent of Pr[total > target].
absl::StatusOr<double> ChernoffExponent(const SpaLedgerCgf& cgf, double lambda, double target) {
  if (lambda == 0) return 0.0;
  absl::StatusOr<SpaCumulants> c = cgf.At(lambda);
  if (!c.ok()) return c.status();
  return c->k - lambda * target;
}

}  // namespace

McMix FitLossTilt(double sigma, double q, double lambda, Direction direction) {
  McMix mix;
  if (q == 1) {  // symmetric: both directions sample the remove law
    const double w = 1, m = 1 + lambda;
    SetComponents(&mix, &w, &m, 1);
    return mix;
  }
  const bool add = direction == Direction::kAdd;
  double w[2] = {1 - q, q}, m[2] = {0, 1};
  if (add) {
    w[0] = w[1] = 0.5;
    m[1] = -1;
  }
  if (lambda == 0) {
    if (add) {
      const double one = 1, zero = 0;
      SetComponents(&mix, &one, &zero, 1);
    } else {
      SetComponents(&mix, w, m, 2);
    }
    return mix;
  }
  // Remove: the far part sits near 1 + lambda. Add: the tilt e^{-lambda y} only
  // pushes mass left, by at most ~lambda sigma^2 q-scaled steps; 10 sigma + 1 + lambda
  // covers it.
  const double lo = add ? -10 * sigma - 1 - lambda : -10 * sigma;
  const double hi = add ? 1 + 10 * sigma : 1 + lambda + 10 * sigma;
  const int n = static_cast<int>(
      std::clamp((hi - lo) / (sigma / 8), static_cast<double>(kGridPoints),
                 static_cast<double>(kMaxGridPoints)));
  const double h = (hi - lo) / (n - 1), inv_s2 = 1 / (sigma * sigma);
  const double log_q = std::log(q), log_1mq = std::log1p(-q);
  std::vector<double> t(n), d(n);
  double top = -kInf;
  for (int i = 0; i < n; ++i) {
    t[i] = lo + i * h;
    const double y = LogAddExp(log_1mq, log_q + (t[i] - 0.5) * inv_s2);
    // log(phi_0 (p/phi_0)^{1+lambda}) (remove) or log(phi_0 (p/phi_0)^{-lambda}) (add)
    d[i] = -0.5 * t[i] * t[i] * inv_s2 + (add ? -lambda : 1 + lambda) * y;
    top = std::max(top, d[i]);
  }
  for (double& v : d) v = std::exp(v - top);
  for (int it = 0; it < kEmIterations; ++it) {
    double sw[2] = {0, 0}, st[2] = {0, 0};
    const double lw0 = std::log(std::max(w[0], 1e-300)), lw1 = std::log(std::max(w[1], 1e-300));
    for (int i = 0; i < n; ++i) {
      const double a = lw0 - 0.5 * (t[i] - m[0]) * (t[i] - m[0]) * inv_s2;
      const double b = lw1 - 0.5 * (t[i] - m[1]) * (t[i] - m[1]) * inv_s2;
      const double r1 = 1 / (1 + std::exp(a - b));  // responsibility of component 1
      sw[0] += d[i] * (1 - r1);
      sw[1] += d[i] * r1;
      st[0] += d[i] * (1 - r1) * t[i];
      st[1] += d[i] * r1 * t[i];
    }
    double change = 0;
    for (int k = 0; k < 2; ++k) {
      if (sw[k] > 0) {
        const double mk = st[k] / sw[k];
        change = std::max(change, std::fabs(mk - m[k]));
        m[k] = mk;
      }
    }
    w[0] = sw[0] / (sw[0] + sw[1]);
    w[1] = sw[1] / (sw[0] + sw[1]);
    if (change < 1e-10 * (1 + std::fabs(m[1]))) break;
  }
  SetComponents(&mix, w, m, 2);
  return mix;
}

absl::StatusOr<MixtureChoice> ChooseMixture(std::span<const MechanismEvent> events,
                                            double epsilon, Direction direction) {
  if (events.empty()) return absl::InvalidArgumentError("events must not be empty");
  if (!std::isfinite(epsilon) || epsilon < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("epsilon must be finite and >= 0, got %g", epsilon));
  }
  MixtureChoice out;
  out.mixes.assign(events.size(), McMix{});
  SpaLedgerCgf cgf(direction);
  cgf.SetLedger(events);
  absl::StatusOr<double> lambda_eps = SaddleLambda(cgf, epsilon);
  if (!lambda_eps.ok()) return lambda_eps.status();
  absl::StatusOr<double> bulk = ChernoffExponent(cgf, *lambda_eps, epsilon);
  if (!bulk.ok()) return bulk.status();

  // Distinct Gaussian-kind mechanisms and their total counts, first-appearance order.
  std::vector<std::pair<Mechanism, double>> distinct;
  for (const MechanismEvent& e : events) {
    if (!IsGaussianKind(e.mechanism)) continue;
    auto same = [&](const auto& d) { return d.first == e.mechanism; };
    auto it = std::find_if(distinct.begin(), distinct.end(), same);
    if (it == distinct.end()) {
      distinct.emplace_back(e.mechanism, static_cast<double>(e.count));
    } else {
      it->second += static_cast<double>(e.count);
    }
  }

  double best_far = -kInf, lambda_far = 0;
  const Mechanism* far = nullptr;
  double far_count = 0;
  for (const auto& [m, count] : distinct) {
    // Gaussian tails are light, add-direction losses bounded: no far plan.
    if (m.sampling_rate() == 1 || direction == Direction::kAdd) continue;
    const auto plrv = MakePlrv(m, Direction::kRemove);
    double warm = 0;
    for (int k = 1; k <= kFarMax && epsilon > 0; ++k) {
      const double y = epsilon * k / kFarSteps, rest = epsilon - y;
      const double log_sf = std::log(plrv->SfP(y));
      if (!std::isfinite(log_sf)) break;
      absl::StatusOr<double> lr = SaddleLambda(cgf, rest, warm);
      if (!lr.ok()) return lr.status();
      warm = *lr;
      absl::StatusOr<double> ch = ChernoffExponent(cgf, *lr, rest);
      if (!ch.ok()) return ch.status();
      const double score = std::log(count) + log_sf + *ch;
      if (score > best_far) {
        best_far = score;
        out.y_far = y;
        lambda_far = *lr;
        far = &m;
        far_count = count;
      }
    }
  }
  out.lambda = *lambda_eps;
  if (far != nullptr) {
    out.far_share = std::max(kMinFarShare, 1 / (1 + std::exp(*bulk - best_far)));
    if (out.far_share > 0.5) out.lambda = lambda_far;
  }
  for (const auto& [m, count] : distinct) {
    McMix mix = FitLossTilt(m.normalized_noise(), m.sampling_rate(), out.lambda, direction);
    if (far != nullptr && m == *far) {
      const double alpha = std::min(kMaxAlpha, out.far_share / far_count);
      double w[kMaxMixComponents], mean[kMaxMixComponents];
      for (int k = 0; k < mix.num; ++k) {
        w[k] = (1 - alpha) * std::exp(mix.log_pi[k]);
        mean[k] = mix.mean[k];
      }
      w[mix.num] = alpha;
      mean[mix.num] = TiltTStar(m.normalized_noise(), m.sampling_rate(), out.y_far);
      SetComponents(&mix, w, mean, mix.num + 1);
    }
    for (size_t i = 0; i < events.size(); ++i) {
      if (events[i].mechanism == m) {
        out.mixes[i] = mix;
        if (far != nullptr && m == *far && out.far_event < 0) out.far_event = static_cast<int>(i);
      }
    }
  }
  if (direction == Direction::kRemove) {
    TruncatedPair pair = ChooseTruncatedPair(events, epsilon, *lambda_eps);
    if (!pair.b.empty()) {
      out.mixes = std::move(pair.a);
      out.second = std::move(pair.b);
    }
  }
  return out;
}

}  // namespace dpledger::core::mc
