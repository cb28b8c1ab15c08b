#include "core/accountants/spa_mixture_bulk.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/accountants/spa_delta.h"
#include "core/accountants/spa_ew2.h"
#include "core/accountants/spa_ma_bound.h"
#include "core/accountants/spa_mills.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

// Cells of the restricted per-step law. 8192 keeps the midpoint rule's variance
// error (h^2/12) below 1e-5 of the bulk variance in every measured ledger
// (q >= 1e-4: cell width <= c/4096 against a spread >= c/40); with the tilt grid a
// build takes ~150-250 ms here.
constexpr int kBulkCells = 8192;
// Tilt grid: 0, then +-1e-3 .. +-1e4 with ratio 1.04 (cubic interpolation in x
// between points keeps log D to ~1e-5 relative).
constexpr double kTiltMin = 1e-3, kTiltMax = 1e4, kTiltRatio = 1.04;
// log D below this is taken as 0 (beyond the bulk's reach).
constexpr double kBulkLogFloor = -700;
constexpr double kHalfLog2Pi = 0.91893853320467274;
// Relative floating-point margin on the proven bounds of D (BulkBound) and the
// absolute one on the complement's O(1) terms.
constexpr double kBulkBoundEta = 1e-6;
constexpr double kComplementRounding = 1e-15;
// Error of one restricted step's K (and K(-1)) from its 8192 cell sums, with
// 10x room; n such steps carry n times it (header comment).
constexpr double kStepKError = 1e-11;
// The bound cache grid starts this many standard deviations below the bulk mean
// (D ~ 1 below) and has at most this many points.
constexpr double kGridSpreads = 12;
constexpr double kBothFormsSpreads = 3;
constexpr double kMaxGridPoints = 1 << 22;

// Pr_P[a < Y <= b] from whichever tail keeps its digits.
double CellMass(const Plrv& plrv, double a, double b) {
  if (b <= 0) return std::max(0.0, plrv.CdfP(b) - plrv.CdfP(a));
  if (a >= 0) return std::max(0.0, plrv.SfP(a) - plrv.SfP(b));
  return std::max(0.0, plrv.CdfP(0) - plrv.CdfP(a)) + std::max(0.0, plrv.SfP(0) - plrv.SfP(b));
}

struct Cumulants {
  double k, k1, k2, k3, k4, abs3;
};

// Cumulants of the law sum_i mass_i delta_{y_i} (not normalised) at tilt t.
Cumulants CellCumulants(const std::vector<double>& y, const std::vector<double>& mass, double t) {
  double top = -kInf;
  for (size_t i = 0; i < y.size(); ++i) {
    if (mass[i] > 0) top = std::max(top, t * y[i]);
  }
  double z = 0, m1 = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double w = mass[i] * std::exp(t * y[i] - top);
    z += w;
    m1 += w * y[i];
  }
  const double mean = m1 / z;
  double c2 = 0, c3 = 0, c4 = 0, a3 = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double w = mass[i] * std::exp(t * y[i] - top), d = y[i] - mean, d2 = d * d;
    c2 += w * d2;
    c3 += w * d2 * d;
    c4 += w * d2 * d2;
    a3 += w * d2 * std::abs(d);
  }
  c2 /= z;
  c3 /= z;
  c4 /= z;
  a3 /= z;
  return {std::log(z) + top, mean, c2, c3, c4 - 3 * c2 * c2, a3};
}

std::vector<double> TiltGrid() {
  std::vector<double> pos;
  for (double t = kTiltMin; t <= kTiltMax * (1 + 1e-12); t *= kTiltRatio) pos.push_back(t);
  std::vector<double> grid;
  for (auto it = pos.rbegin(); it != pos.rend(); ++it) grid.push_back(-*it);
  grid.push_back(0);
  grid.insert(grid.end(), pos.begin(), pos.end());
  return grid;
}

// The law of one step of `plrv` given |Y| <= threshold on kBulkCells midpoint
// cells (y, mass), mass normalised.
// Returns the cell width (0 for a point mass).
double RestrictedCells(const Plrv& plrv, double threshold, std::vector<double>& y,
                       std::vector<double>& mass) {
  const double lo = std::max(-threshold, plrv.LossMin());
  const double hi = std::min(threshold, plrv.LossMax());
  if (!(hi > lo)) {
    y = {lo};  // a point mass (the restriction is a single value)
    mass = {1};
    return 0;
  }
  const double h = (hi - lo) / kBulkCells;
  double total = 0;
  for (int i = 0; i < kBulkCells; ++i) {
    const double a = lo + i * h, b = i + 1 == kBulkCells ? hi : a + h;
    y.push_back(0.5 * (a + b));
    // Cells are (a, b]; the first also holds an atom at the least loss (Laplace's
    // PLRV has atoms at both ends; without it the law lost 18% of its mass at q
    // 0.01, scale 1). An atom at -c belongs to the jumps (JumpTail counts it).
    const double from = i == 0 && lo > -threshold ? lo - 1 : a;
    mass.push_back(CellMass(plrv, from, b));
    total += mass.back();
  }
  for (double& m : mass) m /= total;  // the law given |Y| <= c
  return h;
}

}  // namespace

BulkCurve::BulkCurve(std::vector<double> x, std::vector<double> log_d, double log_mgf_minus1)
    : x_(std::move(x)), log_d_(std::move(log_d)), log_mgf_minus1_(log_mgf_minus1) {
  const size_t n = x_.size();
  slope_.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (n < 2) break;
    if (i == 0) {
      slope_[i] = (log_d_[1] - log_d_[0]) / (x_[1] - x_[0]);
    } else if (i + 1 == n) {
      slope_[i] = (log_d_[i] - log_d_[i - 1]) / (x_[i] - x_[i - 1]);
    } else {
      // Three-point derivative on a non-uniform grid.
      const double h0 = x_[i] - x_[i - 1], h1 = x_[i + 1] - x_[i];
      const double d0 = (log_d_[i] - log_d_[i - 1]) / h0, d1 = (log_d_[i + 1] - log_d_[i]) / h1;
      slope_[i] = (h1 * d0 + h0 * d1) / (h0 + h1);
    }
  }
  reach_ = n > 0 ? x_.front() : -kInf;
  for (size_t i = 0; i < n; ++i) {
    if (log_d_[i] > kBulkLogFloor) reach_ = x_[i];
  }
}

double BulkCurve::LogDelta(double x) const {
  if (x_.empty()) return -kInf;
  if (x <= x_.front()) {
    const double a = x + log_mgf_minus1_;
    const double exact = a < 0 ? Log1mExp(a) : -kInf;
    return std::max(exact, log_d_.front());
  }
  if (x >= x_.back()) return -kInf;
  const size_t i = static_cast<size_t>(std::upper_bound(x_.begin(), x_.end(), x) - x_.begin()) - 1;
  const double h = x_[i + 1] - x_[i], s = (x - x_[i]) / h;
  const double s2 = s * s, s3 = s2 * s;
  // Cubic Hermite on [x_i, x_{i+1}].
  return (2 * s3 - 3 * s2 + 1) * log_d_[i] + (s3 - 2 * s2 + s) * h * slope_[i] +
         (-2 * s3 + 3 * s2) * log_d_[i + 1] + (s3 - s2) * h * slope_[i + 1];
}

absl::StatusOr<MixtureBulk> MixtureBulk::Build(std::span<const RestrictedStep> jumping,
                                               std::span<const BulkTerm> rest,
                                               BulkEstimator estimator,
                                               const Deadline& deadline) {
  MixtureBulk bulk;
  bulk.estimator_ = estimator;
  std::vector<std::vector<double>> ys(jumping.size()), masses(jumping.size());
  for (size_t g = 0; g < jumping.size(); ++g) {
    bulk.cell_width_.push_back(
        RestrictedCells(*jumping[g].plrv, jumping[g].threshold, ys[g], masses[g]));
  }
  auto rest_at = [&](double t) -> absl::StatusOr<std::array<double, 6>> {
    std::array<double, 6> r{0, 0, 0, 0, 0, 0};
    for (const BulkTerm& term : rest) {
      absl::StatusOr<TiltedMoments> m = term.plrv->Tilted(t);
      if (!m.ok()) return m.status();
      r[0] += term.count * m->k;
      r[1] += term.count * m->k1;
      r[2] += term.count * m->k2;
      r[3] += term.count * m->k3;
      r[4] += term.count * m->k4;
      r[5] += term.count * m->abs3;
    }
    return r;
  };
  for (double t : TiltGrid()) {
    if (absl::Status s = deadline.Check("conditioned mixture: bulk cumulants"); !s.ok()) return s;
    absl::StatusOr<std::array<double, 6>> r = rest_at(t);
    if (!r.ok()) continue;  // beyond where the rest has finite cumulants
    Row row{t, {}, {(*r)[0], (*r)[1], (*r)[2], (*r)[3], (*r)[4]}};
    std::vector<double> pb;
    for (size_t g = 0; g < jumping.size(); ++g) {
      const Cumulants b = CellCumulants(ys[g], masses[g], t);
      row.kb.push_back({b.k, b.k1, b.k2, b.k3, b.k4});
      pb.push_back(b.abs3);
    }
    bulk.rows_.push_back(std::move(row));
    bulk.pb_.push_back(std::move(pb));
    bulk.pr_.push_back((*r)[5]);
  }
  if (bulk.rows_.empty()) {
    return absl::InternalError("conditioned mixture: no tilt with finite bulk cumulants");
  }
  for (size_t g = 0; g < jumping.size(); ++g) {
    bulk.kb_minus1_.push_back(CellCumulants(ys[g], masses[g], -1).k);
  }
  // K_rest(-1) <= 0 enters the complement form's head 1 - e^{x + K(-1)}, which
  // the proven upper bound uses: without it there is no bound (0 would be the
  // unsafe side), so the mixture does not apply.
  absl::StatusOr<std::array<double, 6>> r = rest_at(-1);
  if (!r.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "conditioned mixture: K(-1) of the other mechanisms is not known: ", r.status().message()));
  }
  bulk.kr_minus1_ = (*r)[0];
  return bulk;
}

BulkCurve MixtureBulk::ForCount(std::span<const double> counts) const {
  double k_minus1 = kr_minus1_;
  for (size_t g = 0; g < counts.size(); ++g) k_minus1 += counts[g] * kb_minus1_[g];
  std::vector<double> xs, log_ds;
  for (const Row& row : rows_) {
    const double t = row.t;
    std::array<double, 5> c = row.kr;  // K and its first four derivatives, of the bulk sum
    for (size_t g = 0; g < counts.size(); ++g) {
      for (size_t i = 0; i < 5; ++i) c[i] += counts[g] * row.kb[g][i];
    }
    const double k = c[0], x = c[1], k2 = c[2];
    if (!(k2 > 0) || !std::isfinite(k) || !std::isfinite(x)) continue;
    if (!xs.empty() && !(x > xs.back())) continue;
    const double s = std::sqrt(k2);
    double log_d;
    if (t >= -0.5) {
      // SP-CLT at the saddle (gamma = 0): e^{K - t x} E[theta_t(Z)], Z ~ N(0, K'').
      // (R(ts), the gap to R((t + 1) s) and SP-EW2's integrals: one table pair.)
      const SpaTiltPair pair = SpaTiltPairAt(t * s, s);
      log_d = k - t * x + pair.log_mills_a + pair.log_gap - kHalfLog2Pi;
      if (estimator_ == BulkEstimator::kEw2 && t > 0) {
        const double f = SpaEw2Factor(pair, 0, c[3] / (s * s * s), c[4] / (k2 * k2));
        if (std::isfinite(f) && f > 0) log_d += std::log(f);
      }
    } else {
      // D = 1 - e^{x + K_B(-1)} + E[(e^{x - B} - 1)_+], the last term by the
      // Gaussian at t: e^{K - t x} (R(a) - R(b)) / sqrt(2 pi), a = -(t+1)s < b = -ts.
      const double a = -(t + 1) * s, b = -t * s;
      const double low = k - t * x + LogMillsRatio(a) + LogMillsRatioGap(a, b) - kHalfLog2Pi;
      const double head = -std::expm1(x + k_minus1);
      const double d = head + std::exp(low);
      if (!(d > 0)) continue;
      log_d = std::log(d);
    }
    if (!std::isfinite(log_d)) continue;
    xs.push_back(x);
    log_ds.push_back(log_d);
  }
  return BulkCurve(std::move(xs), std::move(log_ds), k_minus1);
}

BulkBound MixtureBulk::BoundForCount(std::span<const double> counts, double x_hi,
                                     double step) const {
  double k_minus1 = kr_minus1_, shift = 0;
  for (size_t g = 0; g < counts.size(); ++g) {
    k_minus1 += counts[g] * kb_minus1_[g];
    shift += counts[g] * cell_width_[g] / 2;
  }
  std::vector<BulkBound::Tilt> tilts;
  double mean = 0, band = 0;
  double x_lo = x_hi;  // the grid starts kGridSpreads standard deviations below the mean
  for (size_t r = 0; r < rows_.size(); ++r) {
    const Row& row = rows_[r];
    double k = row.kr[0], k1 = row.kr[1], k2 = row.kr[2], p3 = pr_[r];
    for (size_t g = 0; g < counts.size(); ++g) {
      k += counts[g] * row.kb[g][0];
      k1 += counts[g] * row.kb[g][1];
      k2 += counts[g] * row.kb[g][2];
      p3 += counts[g] * pb_[r][g];
    }
    if (!(k2 > 0) || !std::isfinite(k) || !std::isfinite(k1) || !std::isfinite(p3)) continue;
    const double log_be =
        std::log(kSpaBerryEsseenFactor * p3 * (1 + kSpaEtaP)) - 1.5 * std::log(k2);
    tilts.push_back({row.t, k, k1, std::sqrt(k2), log_be});
    if (row.t == 0) {
      mean = k1;
      band = kBothFormsSpreads * std::sqrt(k2);
      x_lo = std::min(x_lo, k1 - kGridSpreads * std::sqrt(k2));
    }
  }
  double steps = 0;  // restricted steps (the rest's K is Plrv::Tilted's, as in spa.md 5.2)
  for (double c : counts) steps += c;
  const double eta = std::min(0.5, std::max(kBulkBoundEta, kStepKError * steps));
  const double rounding = std::min(0.5, std::max(kComplementRounding, kStepKError * steps));
  return BulkBound(std::move(tilts), k_minus1, shift, mean, band, x_lo, x_hi, step, eta, rounding);
}

BulkBound::BulkBound(std::vector<Tilt> rows, double log_mgf_minus1, double shift, double mean,
                     double band, double x0, double x1, double step, double eta, double rounding)
    : log_mgf_minus1_(log_mgf_minus1), shift_(shift), mean_(mean), band_(band), x0_(x0),
      step_(step), eta_(eta), rounding_(rounding) {
  const double n = std::ceil((x1 - x0) / step) + 1;
  const size_t size = n > 0 && n < kMaxGridPoints ? static_cast<size_t>(n) : 0;
  lower_.assign(size, kNaN);
  upper_.assign(size, kNaN);
  for (const Tilt& r : rows) {
    // K' is increasing in t; a row that is not (rounding at the extremes) is skipped.
    std::vector<Tilt>& side = r.t > 0 ? pos_ : neg_;
    if (!(r.t > 0) && !(r.t < -1)) continue;
    if (!side.empty() && !(r.k1 > side.back().k1)) continue;
    side.push_back(r);
  }
}

double BulkBound::LogUpper(double x) const {
  const double u = (x - shift_ - x0_) / step_;
  if (upper_.empty() || !(u >= 0)) return LogUpperMid(x - shift_);
  // The grid point at or below x (the last one above the grid), and the one
  // below it (D is non-increasing, so its bound holds at x too: the better of the
  // two evens out a grid point where every tilt form is loose, measured +35%).
  const size_t j = std::min(static_cast<size_t>(u), upper_.size() - 1);
  auto at = [&](size_t i) {
    if (std::isnan(upper_[i])) upper_[i] = LogUpperMid(x0_ + step_ * static_cast<double>(i));
    return upper_[i];
  };
  return j > 0 ? std::min(at(j), at(j - 1)) : at(j);
}

double BulkBound::LogLower(double x) const {
  const double u = (x + shift_ - x0_) / step_;
  if (lower_.empty() || !(u >= 0)) return LogLowerMid(x + shift_);
  // The grid point at or above x (none above the grid: D >= 0).
  const double j = std::ceil(u);
  if (j >= static_cast<double>(lower_.size())) return -kInf;
  auto at = [&](size_t i) {
    if (std::isnan(lower_[i])) lower_[i] = LogLowerMid(x0_ + step_ * static_cast<double>(i));
    return lower_[i];
  };
  const size_t i = static_cast<size_t>(j);
  return i + 1 < lower_.size() ? std::max(at(i), at(i + 1)) : at(i);
}

std::array<const BulkBound::Tilt*, 2> BulkBound::Near(const std::vector<Tilt>& side,
                                                      double x) {
  // The row whose K' is nearest x (the two bracketing rows cost twice as much for
  // a measured gain below 1%).
  if (side.empty()) return {nullptr, nullptr};
  auto it = std::lower_bound(side.begin(), side.end(), x,
                             [](const Tilt& r, double v) { return r.k1 < v; });
  if (it == side.end()) return {&side.back(), nullptr};
  if (it != side.begin() && x - std::prev(it)->k1 < it->k1 - x) --it;
  return {&*it, nullptr};
}

double BulkBound::LogUpperMid(double x) const {
  double best = 0;  // D <= 1
  // Above the mean the tilt is positive, below it the complement's (< -1): the
  // other form is valid too but worse there, and evaluated only within
  // kBothFormsSpreads standard deviations of the mean (where either may win).
  if (x >= mean_ - band_ || neg_.empty()) {
    for (const Tilt* r : Near(pos_, x)) {
      if (r == nullptr) continue;
      // e^{K - tx} (E theta_t(Z - x) + err), and the plain e^{K - tx} max theta_t.
      const double base = r->k - r->t * x, log_max = base + LogThetaMax(r->t);
      const double clt = base + LogGaussianThetaMean(r->t, r->s, (r->k1 - x) / r->s);
      best = std::min(best, std::min(LogAddExp(clt, log_max + r->log_be), log_max));
    }
  }
  if (x < mean_ + band_ || pos_.empty()) {
    for (const Tilt* r : Near(neg_, x)) {
      if (r == nullptr) continue;
      // 1 - e^{x + K(-1)} + e^{K - tx} E theta_tau(x - B_t), tau = -t - 1.
      const double tau = -r->t - 1, base = r->k - r->t * x, log_max = base + LogThetaMax(tau);
      const double clt = base + LogGaussianThetaMean(tau, r->s, (x - r->k1) / r->s);
      const double low = std::exp(std::min(LogAddExp(clt, log_max + r->log_be), log_max));
      const double head = -std::expm1(x + log_mgf_minus1_);
      const double d = head + low + rounding_ * (1 + std::abs(head) + low);
      if (d > 0) best = std::min(best, std::log(d));
    }
  }
  return std::min(0.0, best + std::log1p(eta_));
}

double BulkBound::LogLowerMid(double x) const {
  // The complement's first terms alone (its last term is >= 0).
  const double head = -std::expm1(x + log_mgf_minus1_) - rounding_;
  double best = head > 0 ? std::log(head) : -kInf;
  if (x >= mean_ - band_ || neg_.empty()) {
    for (const Tilt* r : Near(pos_, x)) {
      if (r == nullptr) continue;
      const double base = r->k - r->t * x, log_max = base + LogThetaMax(r->t);
      const double clt = base + LogGaussianThetaMean(r->t, r->s, (r->k1 - x) / r->s);
      const double err = log_max + r->log_be;
      if (clt > err) best = std::max(best, LogSubExp(clt, err));
    }
  }
  if (x < mean_ + band_ || pos_.empty()) {
    for (const Tilt* r : Near(neg_, x)) {
      if (r == nullptr) continue;
      const double tau = -r->t - 1, base = r->k - r->t * x, log_max = base + LogThetaMax(tau);
      const double clt = base + LogGaussianThetaMean(tau, r->s, (x - r->k1) / r->s);
      const double err = log_max + r->log_be;
      const double low = clt > err ? std::exp(LogSubExp(clt, err)) : 0;
      const double head_exact = -std::expm1(x + log_mgf_minus1_);
      const double d = head_exact + low - rounding_ * (1 + std::abs(head_exact) + low);
      if (d > 0) best = std::max(best, std::log(d));
    }
  }
  return best + std::log1p(-eta_);
}

}  // namespace dpledger::core
