// CPU backend of SamplePool: structure-of-arrays path state, work split into
// fixed chunks of paths (ParallelFor), per-chunk Neumaier sums combined in chunk
// order, so every result is independent of the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/mc/mc_parallel.h"
#include "core/mc/mc_mixture_math.h"
#include "core/mc/mc_sample_math.h"
#include "core/mc/pool_ledger.h"

namespace dpledger::core::mc {
namespace {

// Paths per work item: large enough to amortise scheduling, small enough to
// balance 2-64 threads on 1e5-path pools.
constexpr int64_t kChunkPaths = 2048;

class CpuSamplePool final : public LedgerPool {
 public:
  explicit CpuSamplePool(const SamplePoolOptions& options)
      : LedgerPool(options), threads_(ResolveThreads(options.num_threads)) {
    Resize(options.num_paths);
  }

  std::string_view Backend() const override { return "cpu"; }
  int64_t num_paths() const override { return num_paths_; }

  absl::Status Append(const MechanismEvent& event) override {
    auto step = ledger_.StepFor(event);
    if (!step.ok()) return step.status();
    McMixPair mix;
    if (mixture()) {
      auto m = ledger_.MixFor(event);
      if (!m.ok()) return m.status();
      mix = *m;
    }
    int64_t first = 0;
    const int32_t e = ledger_.Add(event, *step, &first, mix);
    ForChunks(0, num_paths_, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) AdvancePath(p, e, first, event.count);
    });
    return absl::OkStatus();
  }

  absl::Status Grow(int64_t num_paths) override {
    if (absl::Status s = ValidateGrow(num_paths_, num_paths); !s.ok()) return s;
    const int64_t old = num_paths_;
    Resize(num_paths);
    const auto& events = ledger_.events();
    ForChunks(old, num_paths_, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        for (size_t e = 0; e < events.size(); ++e) {
          AdvancePath(p, static_cast<int32_t>(e), ledger_.first_steps()[e], events[e].count);
        }
      }
    });
    return absl::OkStatus();
  }

  absl::StatusOr<PoolEvaluation> Evaluate(std::span<const double> epsilons,
                                          Direction query) const override {
    if (absl::Status s = CheckQueryDirection(query); !s.ok()) return s;
    const bool mirror = Mirrors(query);
    const size_t ne = epsilons.size();
    const int64_t num_chunks = (num_paths_ + kChunkPaths - 1) / kChunkPaths;
    struct Partial {
      std::vector<double> x, x2, slope;
      std::vector<int64_t> pos;
      double max_y = -kInf, min_y = kInf;
    };
    std::vector<Partial> partial(num_chunks);
    const uint64_t n = static_cast<uint64_t>(ledger_.num_steps());
    ParallelFor(num_chunks, threads_, [&](int64_t c) {
      Partial& out = partial[c];
      std::vector<NeumaierSum> sx(ne), sx2(ne), ss(ne);
      out.pos.assign(ne, 0);
      const int64_t p1 = std::min(num_paths_, (c + 1) * kChunkPaths);
      for (int64_t p = c * kChunkPaths; p < p1; ++p) {
        double y, log_w;
        PathValue(p, n, &y, &log_w);
        out.max_y = std::max(out.max_y, y);
        out.min_y = std::min(out.min_y, y);
        for (size_t i = 0; i < ne; ++i) {
          const PathTerm t = EvaluatePath(y, log_w, epsilons[i], mirror);
          sx[i].Add(t.x);
          sx2[i].Add(t.x * t.x);
          ss[i].Add(t.slope);
          out.pos[i] += t.x > 0;
        }
      }
      out.x.resize(ne);
      out.x2.resize(ne);
      out.slope.resize(ne);
      for (size_t i = 0; i < ne; ++i) {
        out.x[i] = sx[i].Value();
        out.x2[i] = sx2[i].Value();
        out.slope[i] = ss[i].Value();
      }
    });
    PoolEvaluation r;
    r.sums.resize(ne);
    r.max_loss = -kInf;
    r.min_loss = kInf;
    for (size_t i = 0; i < ne; ++i) {
      NeumaierSum sx, sx2, ss;
      for (const Partial& pc : partial) {
        sx.Add(pc.x[i]);
        sx2.Add(pc.x2[i]);
        ss.Add(pc.slope[i]);
        r.sums[i].num_positive += pc.pos[i];
      }
      r.sums[i].sum_x = sx.Value();
      r.sums[i].sum_x2 = sx2.Value();
      r.sums[i].sum_slope = ss.Value();
    }
    for (const Partial& pc : partial) {
      r.max_loss = std::max(r.max_loss, pc.max_y);
      r.min_loss = std::min(r.min_loss, pc.min_y);
    }
    return r;
  }

  absl::Status ReadPaths(std::vector<double>* loss,
                         std::vector<double>* log_weight) const override {
    loss->resize(num_paths_);
    log_weight->resize(num_paths_);
    const uint64_t n = static_cast<uint64_t>(ledger_.num_steps());
    for (int64_t p = 0; p < num_paths_; ++p) PathValue(p, n, &(*loss)[p], &(*log_weight)[p]);
    return absl::OkStatus();
  }

 private:
  bool is() const { return options_.estimator == McEstimator::kImportanceSampling; }
  bool mixture() const { return options_.estimator == McEstimator::kTiltMixture; }

  void Resize(int64_t m) {
    num_paths_ = m;
    s_.resize(m, 0.0);
    if (mixture()) {
      l_u_.resize(m, 0.0);  // running log(p/a)
      y_t_.resize(m, 0.0);  // running log(p/b) (MixDrawStepPair)
    }
    if (is()) {
      l_u_.resize(m, -kInf);
      y_t_.resize(m, 0.0);
      a_t_.resize(m, 0.0);
      tilted_.resize(m, -1);
    }
  }

  template <typename Fn>
  void ForChunks(int64_t begin, int64_t end, Fn&& fn) const {
    const int64_t num_chunks = (end - begin + kChunkPaths - 1) / kChunkPaths;
    ParallelFor(num_chunks, threads_, [&](int64_t c) {
      const int64_t p0 = begin + c * kChunkPaths;
      fn(p0, std::min(end, p0 + kChunkPaths));
    });
  }

  // Applies steps [first, first + count) of merged event e to path p.
  void AdvancePath(int64_t p, int32_t e, int64_t first, int64_t count) {
    const uint64_t seed = options_.seed, path = static_cast<uint64_t>(p);
    const McStep* steps = ledger_.steps().data();
    if (mixture()) {
      const McStep& s = steps[e];
      const McMixPair& mix = ledger_.mixes()[e];
      const uint32_t stream = kStreamPoolMix;  // both directions (as before the pair)
      double y = s_[p], lw = l_u_[p], lw2 = y_t_[p];
      if (mix.two) {
        const bool from_b = (path & 1) != 0;
        for (int64_t i = 0; i < count; ++i) {
          y += MixDrawStepPair(
              mix.a, mix.b, from_b, s,
              DrawBlock(seed, path, static_cast<uint64_t>(first + i), stream, kDrawMain), &lw,
              &lw2);
        }
      } else {
        const double before = lw;
        for (int64_t i = 0; i < count; ++i) {
          y += MixDrawStep(
              mix.a, s,
              DrawBlock(seed, path, static_cast<uint64_t>(first + i), stream, kDrawMain), &lw);
        }
        lw2 += lw - before;  // one proposal: the same factor under both
      }
      s_[p] = y;
      l_u_[p] = lw;
      y_t_[p] = lw2;
      return;
    }
    if (!is()) {
      const McStep& s = steps[e];
      const uint32_t stream = ledger_.stream();
      double y = s_[p];
      for (int64_t i = 0; i < count; ++i) {
        y += SampleLoss(s, DrawBlock(seed, path, static_cast<uint64_t>(first + i), stream,
                                     kDrawMain));
      }
      s_[p] = y;
      return;
    }
    IsPathState st{s_[p], l_u_[p], y_t_[p], a_t_[p], tilted_[p]};
    for (int64_t i = 0; i < count; ++i) {
      IsAppendStep(st, steps, e, static_cast<uint64_t>(first + i), seed, path);
    }
    s_[p] = st.s_u;
    l_u_[p] = st.l_u;
    y_t_[p] = st.y_t;
    a_t_[p] = st.a_t;
    tilted_[p] = st.tilted_event;
  }

  void PathValue(int64_t p, uint64_t n, double* y, double* log_w) const {
    if (mixture()) {
      *y = s_[p];
      *log_w = ledger_.two() ? MixPairLogWeight(l_u_[p], y_t_[p]) : l_u_[p];
      return;
    }
    if (!is()) {
      *y = s_[p];
      *log_w = 0;
      return;
    }
    if (n == 0) {
      *y = 0;
      *log_w = 0;
      return;
    }
    const IsPathState st{s_[p], l_u_[p], y_t_[p], a_t_[p], tilted_[p]};
    *y = IsPathLoss(st);
    *log_w = IsPathLogWeight(st, n);
  }

  int threads_;
  int64_t num_paths_ = 0;
  std::vector<double> s_;  // SMC, mixture: loss sum; IS: S_u
  std::vector<double> l_u_, y_t_, a_t_;  // IS: L_u, y_T, a_T; mixture: log(p/a), log(p/b)
  std::vector<int32_t> tilted_;
};

}  // namespace

std::unique_ptr<SamplePool> CreateCpuSamplePool(const SamplePoolOptions& options) {
  return std::make_unique<CpuSamplePool>(options);
}

}  // namespace dpledger::core::mc
