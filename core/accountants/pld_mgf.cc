#include "core/accountants/pld_mgf.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

constexpr double kU = std::numeric_limits<double>::epsilon() / 2;
// Largest |t h j| inside a block: e^{+-300} keeps every product in range.
constexpr double kBlockSpan = 300;
// Relative slack on the sum (see the header): covers the block roundings and the
// underflowed terms many times over.
constexpr double kRelSlack = 1e-12;

// `terms`: how many roundings a sum accumulates (recursive summation: <= terms u).
double Slack(double largest_exponent, size_t terms) {
  return kRelSlack + 2 * kU * static_cast<double>(terms + 16) +
         8 * kU * (std::fabs(largest_exponent) + 1);
}

}  // namespace

double LogMgfUpper(const StepPmf& pmf, double t) {
  const double k = LogMgf(pmf, t);
  if (k == -kInf) return k;
  double largest = 0;
  for (size_t i = 0; i < pmf.log_mass.size(); ++i) {
    if (pmf.log_mass[i] > -kInf) largest = std::max(largest, std::fabs(pmf.log_mass[i] + t * pmf.loss(i)));
  }
  return k + Slack(largest, pmf.log_mass.size());
}

MgfTable::MgfTable(const StepPmf& pmf) : pmf_(&pmf) {
  const size_t n = pmf.log_mass.size();
  const size_t blocks = (n + kBlock - 1) / kBlock;
  scaled_.assign(blocks * kBlock, 0.0);
  block_max_.assign(blocks, -kInf);
  for (size_t b = 0; b < blocks; ++b) {
    const size_t end = std::min(n, (b + 1) * kBlock);
    double m = -kInf;
    for (size_t i = b * kBlock; i < end; ++i) m = std::max(m, pmf.log_mass[i]);
    block_max_[b] = m;
    if (m == -kInf) continue;
    for (size_t i = b * kBlock; i < end; ++i) scaled_[i] = std::exp(pmf.log_mass[i] - m);
  }
}

double MgfTable::operator()(double t) const {
  const StepPmf& pmf = *pmf_;
  const double th = t * pmf.h;
  if (!(std::fabs(th) * kBlock <= kBlockSpan)) return LogMgfUpper(pmf, t);
  // e^{t h j} = e^{t h 8a} e^{t h b}, j = 8a + b: 40 exps per call instead of kBlock.
  alignas(64) std::array<double, kBlock> p;
  std::array<double, 8> fine;
  for (size_t b = 0; b < 8; ++b) fine[b] = std::exp(th * static_cast<double>(b));
  for (size_t a = 0; a < kBlock; a += 8) {
    const double coarse = std::exp(th * static_cast<double>(a));
    for (size_t b = 0; b < 8; ++b) p[a + b] = coarse * fine[b];
  }
  const size_t blocks = block_max_.size();
  // Exponent of each block's factor, and the largest.
  double top = -kInf, largest = 0;
  std::vector<double> sums(blocks, 0.0), expo(blocks, -kInf);
  for (size_t b = 0; b < blocks; ++b) {
    if (block_max_[b] == -kInf) continue;
    const double* s = &scaled_[b * kBlock];
    std::array<double, 8> acc{};
    for (size_t j = 0; j < kBlock; j += 8) {
      for (size_t l = 0; l < 8; ++l) acc[l] += s[j + l] * p[j + l];
    }
    double sum = 0;
    for (double a : acc) sum += a;
    sums[b] = sum;
    expo[b] = block_max_[b] + t * pmf.loss(b * kBlock);
    top = std::max(top, expo[b] + std::log(sum));
    largest = std::max(largest, std::fabs(expo[b]) + std::fabs(th) * kBlock);
  }
  if (top == -kInf) return -kInf;
  double total = 0;
  for (size_t b = 0; b < blocks; ++b) {
    if (sums[b] > 0) total += sums[b] * std::exp(expo[b] - top);
  }
  return top + std::log(total) + Slack(largest, blocks + kBlock);
}

}  // namespace dpledger::core
