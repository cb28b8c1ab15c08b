#include "core/accountants/pld_grid.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

double LogOrMinusInf(double x) { return x > 0 ? std::log(x) : -kInf; }

}  // namespace

StepPmf PessimisticPmf(const StepDiscretization& d) {
  StepPmf out;
  out.h = d.h;
  out.origin = static_cast<double>(d.first) * d.h;
  out.log_mass.resize(d.pess_mass.size());
  for (size_t i = 0; i < d.pess_mass.size(); ++i) out.log_mass[i] = LogOrMinusInf(d.pess_mass[i]);
  out.inf_mass = d.pess_inf_mass;
  return out;
}

namespace {

constexpr double kU = std::numeric_limits<double>::epsilon() / 2;
// Grid offsets tried per optimistic grid (per weighting).
constexpr size_t kOffsetCandidates = 3;

// An outcome assigned to grid cell [g_c, g_c + h), g_c = (c + f) h.
struct CellOutcome {
  int64_t cell;
  double loss, p_low, p_high;
  size_t first;         // index of its first outcome in d.opt
  bool merged = false;  // several outcomes share the cell
};

// Per-outcome values that do not depend on the grid offset, computed once for all
// offset candidates (the same expressions as before, so the same results).
struct OutcomeValues {
  std::vector<double> log_p_low;  // log p_low
  std::vector<double> q_high;     // p_high e^{-loss}: upper Q-mass
  std::vector<double> tilt_w;     // e^{tilt (loss - tilt_ref)}: the cost weight
};

// Balanced merges between consecutive outcomes (see the header). grid[i] is the
// mass at grid point cell_lo + i; outcome k sits in cell k.cell, between grid
// points k.cell and k.cell + 1.
// `cost` (optional) accumulates the loss moved by rounding down, weighted by the
// untilted mass plus the tilted mass (normalised by e^{tilt * tilt_ref}).
void MergeOntoGrid(const std::vector<CellOutcome>& bk, int64_t cell_lo, double f, double h,
                   std::vector<double>& grid, double tilt, double tilt_ref,
                   const OutcomeValues& pre, double* cost) {
  const size_t m = bk.size();
  constexpr double kSafe = 16 * kU;
  auto point = [&](int64_t c) { return (static_cast<double>(c) + f) * h; };
  // Point above outcome j: deficit capacity of j and surplus capacity of j+1.
  std::vector<double> dcap(m, 0), scap(m, 0);
  for (size_t j = 0; j + 1 < m; ++j) {
    const double g = point(bk[j].cell + 1);
    if (bk[j].loss < g && bk[j + 1].loss > g) {
      dcap[j] = bk[j].p_high * std::expm1(g - bk[j].loss) * (1 + kSafe);
      scap[j] = bk[j + 1].p_low * -std::expm1(g - bk[j + 1].loss) * (1 - kSafe);
    }
  }
  // The sweeps only choose the flows (the clamps below keep every outcome's shares
  // within 1), so they may use reciprocals: no division in their serial chain.
  std::vector<double> inv_d(m, 0), inv_s(m, 0);
  for (size_t j = 0; j + 1 < m; ++j) {
    if (dcap[j] > 0 && scap[j] > 0) inv_d[j] = 1 / dcap[j], inv_s[j] = 1 / scap[j];
  }
  std::vector<double> lr(m, 0), rl(m, 0), flow(m, 0);
  double r = 1;  // share of outcome j still free to go up
  for (size_t j = 0; j + 1 < m; ++j) {
    if (dcap[j] > 0 && scap[j] > 0) {
      lr[j] = std::min(r * dcap[j], scap[j]);
      r = 1 - lr[j] * inv_s[j];
    } else {
      r = 1;
    }
  }
  r = 1;  // share of outcome j+1 still free to go down
  for (size_t j = m - 1; j-- > 0;) {
    if (dcap[j] > 0 && scap[j] > 0) {
      rl[j] = std::min(r * scap[j], dcap[j]);
      r = 1 - rl[j] * inv_d[j];
    } else {
      r = 1;
    }
  }
  for (size_t j = 0; j + 1 < m; ++j) flow[j] = dcap[j] <= scap[j] ? lr[j] : rl[j];
  for (size_t j = 0; j + 1 < m; ++j) {  // outcome j: flow[j-1]/scap down, flow[j]/dcap up
    if (flow[j] <= 0) continue;
    const double down = j > 0 && flow[j - 1] > 0 ? flow[j - 1] / scap[j - 1] : 0;
    flow[j] = std::min(flow[j], std::max(0.0, 1 - down) * dcap[j]);
  }
  for (size_t j = 0; j < m; ++j) {
    const double down = j > 0 && flow[j - 1] > 0 ? flow[j - 1] / scap[j - 1] : 0;
    const double up = j + 1 < m && flow[j] > 0 ? flow[j] / dcap[j] : 0;
    const double left = std::max(0.0, 1 - down - up);
    // Outcome j's up share and outcome j+1's down share merge at the point above j.
    if (up > 0) {
      const size_t at = static_cast<size_t>(bk[j].cell + 1 - cell_lo);
      grid[at] += up * bk[j].p_low + flow[j] / scap[j] * bk[j + 1].p_low;
    }
    grid[static_cast<size_t>(bk[j].cell - cell_lo)] += left * bk[j].p_low;  // rounded down
    if (cost != nullptr && left > 0) {
      const double dist = bk[j].loss - point(bk[j].cell);
      const double w = bk[j].merged ? std::exp(tilt * (bk[j].loss - tilt_ref))
                                    : pre.tilt_w[bk[j].first];
      *cost += left * bk[j].p_low * dist * (1 + w);
    }
  }
}

// The outcomes of d assigned to cells of the grid {(c + f) h}, merging outcomes that
// share a cell: the merged loss is a lower bound from summed lower P-masses over
// summed upper Q-masses (q <= p_high e^{-loss}), and stays >= the cell's point.
std::vector<CellOutcome> CellsFor(const StepDiscretization& d, double f,
                                  const OutcomeValues& pre) {
  const double h = d.h;
  auto point = [&](int64_t c) { return (static_cast<double>(c) + f) * h; };
  std::vector<CellOutcome> cells;
  double q_high = 0;
  for (size_t i = 0; i < d.opt.size(); ++i) {
    const StepDiscretization::Outcome& o = d.opt[i];
    int64_t c = static_cast<int64_t>(std::floor(o.loss / h - f));
    while (point(c) > o.loss) --c;
    while (point(c + 1) <= o.loss) ++c;
    const double q = pre.q_high[i];
    if (!cells.empty() && cells.back().cell == c) {
      CellOutcome& m = cells.back();
      m.merged = true;
      m.p_low += o.p_low;
      m.p_high += o.p_high;
      q_high += q;
      const double l = std::log(m.p_low) - std::log(q_high);
      m.loss = std::max(point(c), l - 8 * kU * (1 + std::fabs(l)));
    } else {
      cells.push_back({c, o.loss, o.p_low, o.p_high, i});
      q_high = q;
    }
  }
  return cells;
}

}  // namespace

StepPmf OptimisticPmf(const StepDiscretization& d, double tilt) {
  StepPmf out;
  out.h = d.h;
  out.inf_mass = d.opt_inf_mass;
  const double h = d.h;
  if (d.opt.empty()) {
    out.origin = static_cast<double>(d.first) * h;
    out.log_mass = {-kInf};
    return out;
  }
  // Offset candidates: put one of the heaviest outcomes (untilted or tilted) on a
  // grid point; keep the one whose merge rounds down the least.
  std::vector<size_t> order(d.opt.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const size_t m = d.opt.size();
  OutcomeValues pre;
  pre.log_p_low.resize(m);
  pre.q_high.resize(m);
  pre.tilt_w.resize(m);
  double tilt_ref = -kInf;
  for (size_t i = 0; i < m; ++i) {
    const auto& o = d.opt[i];
    pre.log_p_low[i] = std::log(o.p_low);
    pre.q_high[i] = o.p_high * std::exp(-o.loss);
    tilt_ref = std::max(tilt_ref, pre.log_p_low[i] / std::max(tilt, 1e-300) + o.loss);
  }
  const double ref = tilt == 0 ? 0 : tilt_ref;
  for (size_t i = 0; i < m; ++i) pre.tilt_w[i] = std::exp(tilt * (d.opt[i].loss - ref));
  std::vector<double> candidates = {0.0};
  for (int pass = 0; pass < 2; ++pass) {
    auto weight = [&](size_t i) {
      return pre.log_p_low[i] + (pass == 1 ? tilt * d.opt[i].loss : 0.0);
    };
    std::partial_sort(order.begin(), order.begin() + std::min<size_t>(kOffsetCandidates, order.size()),
                      order.end(), [&](size_t a, size_t b) { return weight(a) > weight(b); });
    for (size_t k = 0; k < std::min<size_t>(kOffsetCandidates, order.size()); ++k) {
      const double x = d.opt[order[k]].loss / h;
      candidates.push_back(std::max(0.0, x - std::floor(x) - 1e-9));
    }
  }
  double best_cost = kInf, f = 0;
  std::vector<double> grid;
  int64_t lo = 0;
  for (size_t ci = 0; ci < candidates.size(); ++ci) {
    const double cand = candidates[ci];
    // The heaviest outcomes tilted and untilted are often the same: evaluate once.
    if (std::find(candidates.begin(), candidates.begin() + ci, cand) != candidates.begin() + ci) {
      continue;
    }
    std::vector<CellOutcome> cells = CellsFor(d, cand, pre);
    const int64_t c_lo = cells.front().cell, c_hi = cells.back().cell + 1;
    std::vector<double> g(static_cast<size_t>(c_hi - c_lo + 1), 0.0);
    double cost = 0;
    MergeOntoGrid(cells, c_lo, cand, h, g, tilt, ref, pre, &cost);
    if (cost < best_cost) best_cost = cost, f = cand, grid = std::move(g), lo = c_lo;
  }
  auto point = [&](int64_t c) { return (static_cast<double>(c) + f) * h; };
  out.origin = point(lo);
  out.log_mass.resize(grid.size());
  for (size_t i = 0; i < grid.size(); ++i) out.log_mass[i] = LogOrMinusInf(grid[i]);
  return out;
}

double LogMgf(const StepPmf& pmf, double t) {
  double m = -kInf;
  const size_t n = pmf.log_mass.size();
  for (size_t i = 0; i < n; ++i) m = std::max(m, pmf.log_mass[i] + t * pmf.loss(i));
  if (m == -kInf) return -kInf;
  // Terms below e^{-kMgfCut} of the largest are bounded rather than summed: the
  // result stays an upper bound (Chernoff bounds need one) and most exp() calls go.
  constexpr double kMgfCut = 40;
  double s = 0;
  size_t skipped = 0;
  for (size_t i = 0; i < n; ++i) {
    const double x = pmf.log_mass[i] + t * pmf.loss(i) - m;
    if (x > -kMgfCut) {
      s += std::exp(x);
    } else {
      ++skipped;
    }
  }
  return m + std::log(s + static_cast<double>(skipped) * std::exp(-kMgfCut));
}

TiltedPmf Tilt(const StepPmf& pmf, double tilt) {
  TiltedPmf out;
  out.h = pmf.h;
  out.origin = pmf.origin;
  out.tilt = tilt;
  out.inf_mass = pmf.inf_mass;
  out.log_norm = LogMgf(pmf, tilt);
  const size_t n = pmf.log_mass.size();
  out.w.resize(n);
  double sum = 0, mean = 0;
  for (size_t i = 0; i < n; ++i) {
    out.w[i] = std::exp(pmf.log_mass[i] + tilt * pmf.loss(i) - out.log_norm);
    sum += out.w[i];
  }
  // Renormalise away the last rounding of log_norm, then moments about the origin.
  double l2 = 0;
  for (size_t i = 0; i < n; ++i) {
    out.w[i] /= sum;
    mean += out.w[i] * static_cast<double>(i);
    l2 += out.w[i] * out.w[i];
  }
  out.log_norm += std::log(sum);
  double var = 0;
  for (size_t i = 0; i < n; ++i) {
    const double dx = static_cast<double>(i) - mean;
    var += out.w[i] * dx * dx;
  }
  out.mean = pmf.origin + mean * pmf.h;
  out.var = var * pmf.h * pmf.h;
  out.l2 = std::sqrt(l2);
  return out;
}

}  // namespace dpledger::core
