#include "core/accountants/pld_convolve.h"

#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <numbers>

#include "core/util/check.h"
#include "pld_fftw_wisdom.h"  // generated (core/accountants/CMakeLists.txt)

namespace dpledger::core {
namespace {

constexpr double kU = std::numeric_limits<double>::epsilon() / 2;

// fftw_malloc'd storage: FFTW's new-array execute needs the planner's alignment.
template <typename T>
struct FftwArray {
  explicit FftwArray(size_t n) : p(static_cast<T*>(fftw_malloc(sizeof(T) * n))) { DPL_CHECK(p); }
  ~FftwArray() { fftw_free(p); }
  FftwArray(const FftwArray&) = delete;
  FftwArray& operator=(const FftwArray&) = delete;
  T* p;
};

struct Plans {
  fftw_plan forward;   // r2c
  fftw_plan backward;  // c2r
};

// One pair of plans per size, made once under a lock (the FFTW planner is not
// thread-safe) and kept for the life of the process. The first call imports the
// build machine's wisdom for these plans (fftw_wisdom_gen.cc: the same plans in
// ~1 ms instead of ~8 ms a process; a failed import only leaves planning as it was).
const Plans& PlansFor(int64_t n) {
  static std::mutex mu;
  static std::map<int64_t, Plans>* plans = new std::map<int64_t, Plans>();
  std::lock_guard<std::mutex> lock(mu);
  if (plans->empty()) fftw_import_wisdom_from_string(kPldFftwWisdom);
  auto it = plans->find(n);
  if (it != plans->end()) return it->second;
  FftwArray<double> r(static_cast<size_t>(n));
  FftwArray<fftw_complex> c(static_cast<size_t>(n / 2 + 1));
  Plans p;
  p.forward = fftw_plan_dft_r2c_1d(static_cast<int>(n), r.p, c.p, FFTW_ESTIMATE);
  p.backward = fftw_plan_dft_c2r_1d(static_cast<int>(n), c.p, r.p, FFTW_ESTIMATE);
  DPL_CHECK(p.forward != nullptr && p.backward != nullptr);
  return plans->emplace(n, p).first->second;
}

double Kappa(int64_t n) { return 16 * kU * (std::log2(static_cast<double>(n)) + 2); }

// Bound on |Ahat_j - A_j| for every j: the transform's componentwise error
// kappa ||x||_1, plus a few ulps of ||x||_1 for the rounding of the tilted input.
double SpectrumError(const Spectrum& s) { return (Kappa(s.n) + 4 * kU) * s.l1; }

// |z| rounded up: sqrt(re^2 + im^2) is within 2u of |z| unless the squares lose
// range (then hypot, within 1 ulp); 4u covers either.
double Magnitude(std::complex<double> z) {
  const double nrm = z.real() * z.real() + z.imag() * z.imag();
  const double r = nrm > 1e-290 && nrm < 1e290 ? std::sqrt(nrm) : std::hypot(z.real(), z.imag());
  return r * (1 + 4 * kU);
}

// Below e^{kLogNegligible} a composed frequency is dropped (its error bound stays).
constexpr double kLogNegligible = -200;
constexpr double kULong = std::numeric_limits<long double>::epsilon() / 2;

// z^k via polar form, with a bound on its relative error. k log|z| and k arg z
// (reduced mod 2 pi) are formed in long double, where their error is a few
// long-double ulps of |k log|z|| + |k arg z| + 1; rounding them to double and the
// double exp/cos/sin add a few u of |k log|z|| + 2 pi + 1.
struct PowResult {
  std::complex<double> value;
  double rel_err;
};
PowResult Pow(std::complex<double> z, int64_t k) {
  const long double r = std::hypot(static_cast<long double>(z.real()),
                                   static_cast<long double>(z.imag()));
  if (r == 0) return {0, 0};
  const long double kd = static_cast<long double>(k);
  const long double log_mag = kd * std::log(r);
  const long double arg = std::atan2(static_cast<long double>(z.imag()),
                                     static_cast<long double>(z.real()));
  const long double ang = std::fmod(kd * arg, 2 * std::numbers::pi_v<long double>);
  const double lm = static_cast<double>(log_mag);
  const double rel = 8 * kULong * static_cast<double>(std::fabs(log_mag) + std::fabs(kd * arg) + 4) +
                     4 * kU * (std::fabs(lm) + 2 * std::numbers::pi + 2);
  return {std::polar(std::exp(lm), static_cast<double>(ang)), rel};
}

// Largest power taken by repeated squaring (its bound below needs k u <= 1e-10).
constexpr int64_t kMaxSquaringPower = int64_t{1} << 20;

// z^k by repeated squaring, about 4x faster than the polar form (no transcendental).
// A complex product of values with relative errors a and b is within a + b + ab +
// sqrt(2) gamma_2 (1 + a)(1 + b) of the exact one (Higham 2002, Lemma 3.5: the usual
// formula is within sqrt(2) gamma_2 |x||y|); by induction over the squarings and
// products, z^m is within (m - 1) 2.9u for m <= kMaxSquaringPower (the second-order
// terms are below 1% of it), so 3u k bounds it. |z| <= 1 (up to rounding), so every
// intermediate power is at least |z|^k in modulus: when the result is far above the
// double range's floor, nothing underflowed; otherwise the polar form is used.
PowResult PowBySquaring(std::complex<double> z, int64_t k) {
  if (k > kMaxSquaringPower) return Pow(z, k);
  double re = 1, im = 0, br = z.real(), bi = z.imag();
  for (int64_t e = k;;) {
    if (e & 1) {
      const double r = re * br - im * bi;
      im = re * bi + im * br;
      re = r;
    }
    e >>= 1;
    if (e == 0) break;
    const double r = br * br - bi * bi;
    bi = 2 * br * bi;
    br = r;
  }
  if (!(re * re + im * im > 1e-280)) return Pow(z, k);
  return {{re, im}, 3 * kU * static_cast<double>(k)};
}

}  // namespace

Spectrum ComputeSpectrum(const TiltedPmf& pmf, int64_t n) {
  DPL_CHECK(n >= 2 && (n & (n - 1)) == 0);
  const Plans& plans = PlansFor(n);
  FftwArray<double> in(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) in.p[i] = 0;
  // Entry i sits at origin + i h; wrapping modulo n keeps the residue of i.
  for (size_t i = 0; i < pmf.w.size(); ++i) in.p[static_cast<int64_t>(i) % n] += pmf.w[i];
  Spectrum s;
  s.n = n;
  double l2 = 0, l1 = 0;
  for (int64_t i = 0; i < n; ++i) {
    l2 += in.p[i] * in.p[i];
    l1 += std::fabs(in.p[i]);
  }
  s.l2 = std::sqrt(l2);
  s.l1 = l1;
  // std::complex<double> has fftw_complex's layout; both arrays are fftw_malloc'd.
  s.values.resize(static_cast<size_t>(n / 2 + 1));
  fftw_execute_dft_r2c(plans.forward, in.p, reinterpret_cast<fftw_complex*>(s.values.data()));
  return s;
}

CircularPmf ComposeCircular(const std::vector<SpectrumPower>& parts) {
  DPL_CHECK(!parts.empty());
  const int64_t n = parts[0].spectrum->n;
  const size_t m = static_cast<size_t>(n / 2 + 1);
  const double kappa = Kappa(n);
  FftwArray<fftw_complex> prod(m);
  // Componentwise bound: sum_j of |C_j - Chat_j| (spectrum and power errors) and of
  // |Chat_j| (inverse-transform error), over all n frequencies.
  double sum_err = 0, sum_abs = 0;
  double growth_exp = 0, fft_term = 0, rel_norm = 0;
  for (const SpectrumPower& part : parts) {
    DPL_CHECK(part.spectrum->n == n && part.count >= 1);
    const double k = static_cast<double>(part.count);
    growth_exp += k * kappa * std::sqrt(static_cast<double>(n)) * part.spectrum->l2;
    fft_term += k * kappa * part.spectrum->l2;
    rel_norm += 10 * k * kU + 2 * kU;
  }
  std::vector<double> log_rho(parts.size());
  double total_count = 0;
  for (const SpectrumPower& part : parts) total_count += static_cast<double>(part.count);
  // A negligible frequency (below) is off by at most (sum_e k_e + 1) e^{kLogNegligible}.
  const double negligible_err = (total_count + 1) * std::exp(kLogNegligible);
  for (size_t i = 0; i < m; ++i) {
    double log_rho_sum = 0;
    for (size_t e = 0; e < parts.size(); ++e) {
      const Spectrum& s = *parts[e].spectrum;
      // |A_j| and |Ahat_j| are both <= rho = |Ahat_j| + the transform's error bound.
      log_rho[e] = std::log(Magnitude(s.values[i]) + SpectrumError(s));
      log_rho_sum += static_cast<double>(parts[e].count) * log_rho[e];
    }
    const double weight = (i == 0 || 2 * i == static_cast<size_t>(n)) ? 1 : 2;
    // Where |C_j| <= e^{log_rho_sum} is negligible, C_j is taken as 0 and the costly
    // powers are skipped (most frequencies of a long composition). Its error, |C_j|
    // plus sum_e k_e |A_e - Ahat_e| rho_e^{k_e - 1} prod_{f != e} rho_f^{k_f} (below),
    // is at most (sum_e k_e + 1) e^{log_rho_sum}, as |A_e - Ahat_e| <= rho_e.
    if (log_rho_sum < kLogNegligible) {
      prod.p[i][0] = 0;
      prod.p[i][1] = 0;
      sum_err += weight * negligible_err;
      continue;
    }
    std::complex<double> c = 1;
    double rel = 0;
    for (size_t e = 0; e < parts.size(); ++e) {
      const std::complex<double> z = parts[e].spectrum->values[i];
      if (parts[e].count > 1) {
        const PowResult p = PowBySquaring(z, parts[e].count);
        c *= p.value;
        rel += p.rel_err + 4 * kU;  // and the complex product
      } else {
        c *= z;
        rel += 4 * kU;
      }
    }
    prod.p[i][0] = c.real();
    prod.p[i][1] = c.imag();
    // |prod A^k - prod Ahat^k| <= sum_e k_e |A_e - Ahat_e| rho_e^{k_e - 1}
    // prod_{f != e} rho_f^{k_f}; the computed powers and products add rel |C|.
    double err = 0;
    for (size_t e = 0; e < parts.size(); ++e) {
      const double k = static_cast<double>(parts[e].count);
      err += k * SpectrumError(*parts[e].spectrum) * std::exp(log_rho_sum - log_rho[e]);
    }
    err += rel * std::exp(log_rho_sum);
    sum_err += weight * err;
    sum_abs += weight * std::abs(c);
  }
  CircularPmf r;
  r.w.resize(static_cast<size_t>(n));
  fftw_execute_dft_c2r(PlansFor(n).backward, prod.p, r.w.data());
  const double scale = 1.0 / static_cast<double>(n);  // exact: n is a power of 2
  double c2 = 0;
  for (double& x : r.w) {
    x *= scale;
    c2 += x * x;
  }
  c2 = std::sqrt(c2);
  // Componentwise: each output is (1/n) sum_j e^{..} C_j, so the spectrum errors
  // reach it as at most sum_err / n and the inverse transform adds kappa ||Chat||_1 / n.
  const double componentwise =
      (sum_err + (kappa + 2 * kU) * sum_abs) * scale * (1 + 4 * kappa);
  // Normwise (header): ||chat - c||_2 <= A + B ||c||_2, ||c||_2 <= ||chat||_2 + ||chat - c||_2.
  const double growth = std::exp(growth_exp);
  const double a = (1 + kappa) * (fft_term * growth + static_cast<double>(parts.size()) * kU);
  const double b = (1 + kappa) * rel_norm + kappa;
  const double normwise =
      b < 0.5 ? (a + b * c2) / (1 - b) : std::numeric_limits<double>::infinity();
  r.err = 2 * std::min(componentwise, normwise);  // safety factor 2 over either bound
  return r;
}

}  // namespace dpledger::core
