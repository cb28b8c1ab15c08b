#include "core/accountants/pld_convolve.h"

#include <fftw3.h>

#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <numbers>

#include "core/util/check.h"

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
// thread-safe) and kept for the life of the process.
const Plans& PlansFor(int64_t n) {
  static std::mutex mu;
  static std::map<int64_t, Plans>* plans = new std::map<int64_t, Plans>();
  std::lock_guard<std::mutex> lock(mu);
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

// z^k via polar form; relative error <= k u (|log|z|| + 10).
std::complex<double> Pow(std::complex<double> z, int64_t k) {
  const double r = std::abs(z);
  if (r == 0) return 0;
  const double kd = static_cast<double>(k);
  const double mag = std::exp(kd * std::log(r));
  const double ang = std::fmod(kd * std::arg(z), 2 * std::numbers::pi);
  return std::polar(mag, ang);
}

}  // namespace

Spectrum ComputeSpectrum(const TiltedPmf& pmf, int64_t n) {
  DPL_CHECK(n >= 2 && (n & (n - 1)) == 0);
  const Plans& plans = PlansFor(n);
  FftwArray<double> in(static_cast<size_t>(n));
  FftwArray<fftw_complex> out(static_cast<size_t>(n / 2 + 1));
  for (int64_t i = 0; i < n; ++i) in.p[i] = 0;
  // Entry i sits at origin + i h; wrapping modulo n keeps the residue of i.
  for (size_t i = 0; i < pmf.w.size(); ++i) in.p[static_cast<int64_t>(i) % n] += pmf.w[i];
  Spectrum s;
  s.n = n;
  double l2 = 0;
  for (int64_t i = 0; i < n; ++i) l2 += in.p[i] * in.p[i];
  s.l2 = std::sqrt(l2);
  fftw_execute_dft_r2c(plans.forward, in.p, out.p);
  s.values.resize(static_cast<size_t>(n / 2 + 1));
  for (int64_t i = 0; i <= n / 2; ++i) s.values[static_cast<size_t>(i)] = {out.p[i][0], out.p[i][1]};
  return s;
}

CircularPmf ComposeCircular(const std::vector<SpectrumPower>& parts) {
  DPL_CHECK(!parts.empty());
  const int64_t n = parts[0].spectrum->n;
  const size_t m = static_cast<size_t>(n / 2 + 1);
  const double kappa = Kappa(n);
  FftwArray<fftw_complex> prod(m);
  for (size_t i = 0; i < m; ++i) prod.p[i][0] = 1, prod.p[i][1] = 0;
  double growth_exp = 0, fft_term = 0, rel = 0;
  for (const SpectrumPower& part : parts) {
    DPL_CHECK(part.spectrum->n == n && part.count >= 1);
    const double k = static_cast<double>(part.count);
    for (size_t i = 0; i < m; ++i) {
      std::complex<double> z = part.spectrum->values[i];
      if (part.count > 1) z = Pow(z, part.count);
      const std::complex<double> p = std::complex<double>(prod.p[i][0], prod.p[i][1]) * z;
      prod.p[i][0] = p.real();
      prod.p[i][1] = p.imag();
    }
    growth_exp += k * kappa * std::sqrt(static_cast<double>(n)) * part.spectrum->l2;
    fft_term += k * kappa * part.spectrum->l2;
    rel += 10 * k * kU + 2 * kU;
  }
  FftwArray<double> out(static_cast<size_t>(n));
  fftw_execute_dft_c2r(PlansFor(n).backward, prod.p, out.p);
  CircularPmf r;
  r.w.resize(static_cast<size_t>(n));
  const double scale = 1.0 / static_cast<double>(n);  // exact: n is a power of 2
  double c2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    r.w[static_cast<size_t>(i)] = out.p[i] * scale;
    c2 += r.w[static_cast<size_t>(i)] * r.w[static_cast<size_t>(i)];
  }
  c2 = std::sqrt(c2);
  // ||chat - c||_2 <= A + B ||c||_2 with ||c||_2 <= ||chat||_2 + ||chat - c||_2.
  const double growth = std::exp(growth_exp);
  const double a = (1 + kappa) * (fft_term * growth +
                                  static_cast<double>(parts.size()) * kU);
  const double b = (1 + kappa) * rel + kappa;
  const double e = b < 0.5 ? (a + b * c2) / (1 - b) : std::numeric_limits<double>::infinity();
  r.err = 2 * e;  // safety factor 2 over the bound derived in the header
  return r;
}

}  // namespace dpledger::core
