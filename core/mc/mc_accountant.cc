#include "core/mc/mc_accountant.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "absl/strings/str_format.h"
#include "core/accountants/spa_epsilon.h"
#include "core/mc/pool_query.h"
#include "core/mc/sample_pool.h"
#include "core/plrv/plrv.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

bool IsGaussian(const Mechanism& m) {
  return m.kind() == MechanismKind::kGaussian || m.kind() == MechanismKind::kSubsampledGaussian;
}

class McAccountant final : public Accountant {
 public:
  explicit McAccountant(const McAccountantOptions& o) : options_(o) {}

  std::string_view Name() const override { return "mc"; }
  std::vector<AnswerDiagnostic> LastDiagnostics() const override { return diagnostics_; }
  size_t CacheBytes() const override {
    size_t b = 0;
    for (const PoolSlot* s : {&remove_, &add_}) b += s->pool ? s->pool->MemoryBytes() : 0;
    for (const PoolSlot& s : ladder_) b += s.pool ? s.pool->MemoryBytes() : 0;
    return b;
  }

  void SetQueryTimeCap(double seconds) override {
    Accountant::SetQueryTimeCap(seconds);
    options_.max_seconds = std::max(seconds, 0.0);
  }

  std::unique_ptr<Accountant> Clone() const override {
    // Pools are caches: the clone rebuilds them from (seed, ledger) on demand,
    // getting the same paths.
    auto c = std::make_unique<McAccountant>(options_);  // options_.max_seconds holds the cap
    c->Accountant::SetQueryTimeCap(query_time_cap());
    for (const MechanismEvent& e : events()) c->Compose(e).IgnoreError();
    return c;
  }

 protected:
  absl::Status CheckSupported(const Mechanism& m) const override {
    if (options_.estimator == McAccountantEstimator::kImportanceSampling && !IsGaussian(m)) {
      return absl::UnimplementedError(absl::StrFormat(
          "the mc accountant with importance sampling handles Gaussian and subsampled_gaussian "
          "steps only, got %s",
          std::string(MechanismKindName(m.kind()))));
    }
    return absl::OkStatus();
  }

  void OnLedgerChanged() override { add_cap_ = -1; }

  absl::StatusOr<DeltaBound> ComputeDelta(double epsilon) const override {
    StartQuery();
    ChooseRemoveKind(
        [&] { return options_.target_epsilon > 0 ? options_.target_epsilon : epsilon; });
    auto remove = DeltaFrom(/*add=*/false, epsilon);
    if (!remove.ok()) return remove.status();
    DeltaBound b{remove->lower, remove->delta_hat, remove->upper, Guarantee::kEstimate, 0};
    if (NoteAdd(epsilon < AddCap(), [&] { return AddBelow(epsilon, remove->lower); },
                remove->trustworthy)) {
      auto add = DeltaFrom(/*add=*/true, epsilon);
      if (!add.ok()) return add.status();
      b.lower = std::max(b.lower, add->lower);
      b.estimate = std::max(b.estimate, add->delta_hat);
      b.upper = std::max(b.upper, add->upper);
    }
    return b;
  }

  absl::StatusOr<EpsilonBound> ComputeEpsilon(double delta) const override {
    StartQuery();
    ChooseRemoveKind([&] { return LadderCenter(delta); });
    auto remove = EpsilonFrom(/*add=*/false, delta);
    if (!remove.ok()) return remove.status();
    EpsilonBound b{remove->lower, remove->epsilon, remove->upper, Guarantee::kEstimate, 0};
    // epsilon_add < sum -log(1 - q_i) always; skip it when remove already exceeds that,
    // or when delta_add(remove->lower) <= delta is proven: then epsilon_add <= remove->lower.
    // An untrustworthy remove answer is already [0, inf): sampling add cannot narrow it.
    if (NoteAdd(remove->lower < AddCap(), [&] { return AddBelow(remove->lower, delta); },
                remove->at_epsilon.trustworthy)) {
      auto add = EpsilonFrom(/*add=*/true, delta);
      if (!add.ok()) return add.status();
      b.lower = std::max(b.lower, add->lower);
      b.estimate = std::max(b.estimate, add->epsilon);
      b.upper = std::max(b.upper, add->upper);
    }
    return b;
  }

 private:
  struct PoolSlot {
    std::unique_ptr<SamplePool> pool;
    double tilt = -1;           // IS, mixture: target epsilon of the pool
    int64_t tilt_steps = 0;     // mixture: ledger steps when its proposal was chosen
    double last_epsilon = -1;   // warm start of the next epsilon search
  };

  // The remove direction's estimator for the query at hand (ChooseRemoveKind).
  McEstimator RemoveKind() const { return remove_kind_; }

  // kAuto: SMC unless every step is a (subsampled) Gaussian with a finite sigma^2
  // (issue 11: sigma = 1e300); then the mixture or the paper's one-coordinate tilt,
  // whichever has the smaller estimated relative error on a pilot run at `epsilon`
  // (trustworthy first; kPilotPaths streaming paths each, on their own seed, so the
  // pools' answers stay unbiased) - or SMC when its pilot error is at most twice
  // the better tilt's. Measured (issue 14): the mixture wins on long
  // DP-SGD ledgers (sigma 2, q 0.01, 1000 steps, delta 1e-10: 0.64% relative SE at
  // 1e5 paths, the one-coordinate tilt ESS 4 and 1e-9 times too small), the
  // one-coordinate tilt where one big step causes the tail (sigma 0.6, q 1e-3, 100
  // steps; sigma 1, q 1e-3, 1e4 steps: 15% vs 95% relative SE at 1e4 paths).
  template <typename Center>
  void ChooseRemoveKind(Center center) const {
    switch (options_.estimator) {
      case McAccountantEstimator::kSmc: remove_kind_ = McEstimator::kSmc; return;
      case McAccountantEstimator::kImportanceSampling:
        remove_kind_ = McEstimator::kImportanceSampling;
        return;
      case McAccountantEstimator::kTiltMixture: remove_kind_ = McEstimator::kTiltMixture; return;
      case McAccountantEstimator::kAuto: break;
    }
    remove_kind_ = McEstimator::kSmc;
    for (const MechanismEvent& e : events()) {
      const double s = e.mechanism.normalized_noise();
      if (!IsGaussian(e.mechanism) || !std::isfinite(s * s)) return;
    }
    // The pilot streams every step of its paths with no deadline inside: bound its work
    // (a 2^40-step ledger ran past every query cap); longer ledgers keep SMC, whose pool
    // builds are chunked and honour max_seconds. The bound is on the ledger, not on time,
    // so the choice (and every answer) stays the same under any time cap.
    if (num_steps() > kMaxPilotSteps) return;
    const double epsilon = center();
    if (pilot_steps_ == num_steps() && pilot_epsilon_ == epsilon) {
      remove_kind_ = pilot_kind_;
    } else {
      McEstimateRequest r;
      r.events.assign(events().begin(), events().end());
      r.epsilon = epsilon;
      r.seed = options_.seed ^ kPilotSeed;
      r.num_samples = kPilotPaths;
      r.num_threads = options_.num_threads;
      r.backend = options_.backend;
      PoolDeltaEstimate score[3];
      const McEstimator kinds[3] = {McEstimator::kTiltMixture, McEstimator::kImportanceSampling,
                                    McEstimator::kSmc};
      for (int i = 0; i < 3; ++i) {
        score[i].relative_std_error = pilot_rse_[i] = kInf;
        // The one-coordinate tilt competes only below kMaxIsSteps: on longer DP-SGD
        // ledgers its weights are heavy-tailed and its pilot error looks small while
        // the answer is off (issue 14; sigma 1, q 1e-3, 2000 steps, 1e5 paths: 0.77%
        // high with PLD outside its interval, the mixture pair 0.07% inside).
        if (kinds[i] == McEstimator::kImportanceSampling && num_steps() >= kMaxIsSteps) continue;
        r.estimator = kinds[i];
        auto e = EstimateDeltaStreaming(r);
        if (!e.ok()) continue;  // scored as untrustworthy with infinite error
        score[i].trustworthy = e->ess >= kMinEffectiveSamples && e->num_positive >= kMinPositivePaths;
        score[i].relative_std_error = e->delta_hat > 0 ? e->std_error / e->delta_hat : kInf;
        pilot_rse_[i] = score[i].relative_std_error;
      }
      const int tilted = Better(score[1], score[0]) ? 1 : 0;
      // SMC unless a tilt saves 4x the paths: its pool is half the bytes and needs no
      // ladder (moderate delta, e.g. the server's Spent on short ledgers).
      const bool smc = score[2].trustworthy &&
                       (!score[tilted].trustworthy ||
                        score[2].relative_std_error <= 2 * score[tilted].relative_std_error);
      pilot_kind_ = smc ? kinds[2] : kinds[tilted];
      pilot_steps_ = num_steps();
      pilot_epsilon_ = epsilon;
      remove_kind_ = pilot_kind_;
    }
    diagnostics_.push_back({"pilot_mixture_relative_std_error", pilot_rse_[0]});
    diagnostics_.push_back({"pilot_is_relative_std_error", pilot_rse_[1]});
    diagnostics_.push_back({"pilot_smc_relative_std_error", pilot_rse_[2]});
  }
  static constexpr int64_t kPilotPaths = 4096;
  static constexpr int64_t kMaxIsSteps = 1000;
  static constexpr int64_t kMaxPilotSteps = int64_t{1} << 14;  // <= 2^26 path-steps a kind
  static constexpr uint64_t kPilotSeed = 0x9E3779B97F4A7C15ull;  // any fixed constant

  bool UseIs() const { return RemoveKind() == McEstimator::kImportanceSampling; }
  bool UseLadder() const { return RemoveKind() == McEstimator::kTiltMixture; }
  bool NeedAdd() const {
    for (const MechanismEvent& e : events()) {
      if (!e.mechanism.is_symmetric()) return true;
    }
    return false;
  }
  // Sum over steps of the add-direction loss supremum (-log(1 - q) for a
  // subsampled Gaussian, spec 2.3): delta_add(eps) = 0 above it. Infinite when
  // a step's add loss is unbounded (Gaussian) or can be infinite (approx DP).
  double AddCap() const {
    if (add_cap_ >= 0) return add_cap_;
    double cap = 0;
    for (const MechanismEvent& e : events()) {
      const auto plrv = MakePlrv(e.mechanism, Direction::kAdd);
      cap += plrv->InfiniteLossMass() > 0 ? kInf : static_cast<double>(e.count) * plrv->LossMax();
    }
    add_cap_ = std::isnan(cap) ? kInf : cap;
    return add_cap_;
  }

  // Decides whether the add direction must be sampled, and notes why (not).
  template <typename Proven>
  bool NoteAdd(bool below_cap, Proven proven_below, bool remove_trustworthy) const {
    const char* why = !NeedAdd()       ? "not needed: symmetric ledger"
                      : !below_cap     ? "zero: above sum -log(1 - q_i)"
                      : !remove_trustworthy ? "skipped: the remove direction is untrustworthy"
                      : proven_below() ? "skipped: Chernoff bound proves it smaller"
                                       : nullptr;
    diagnostics_.push_back({"add_direction", std::string(why != nullptr ? why : "sampled")});
    return why == nullptr;
  }

  // Notes the figures of a direction's final estimate and why growth stopped.
  void Note(bool add, const SamplePool& pool, const PoolDeltaEstimate& d, bool enough) const {
    const std::string p = add ? "add_" : "remove_";
    const McEstimator kind = pool.options().estimator;
    diagnostics_.push_back({p + "estimator", std::string(kind == McEstimator::kImportanceSampling
                                                             ? "importance_sampling"
                                                             : McEstimatorName(kind))});
    diagnostics_.push_back({p + "samples", static_cast<double>(pool.num_paths())});
    diagnostics_.push_back({p + "relative_std_error", d.relative_std_error});
    diagnostics_.push_back({p + "num_positive", static_cast<double>(d.num_positive)});
    diagnostics_.push_back({p + "ess", d.ess});
    diagnostics_.push_back(
        {p + "sample_rule", std::string(options_.num_samples > 0 ? "fixed"
                                        : enough           ? "reached 1% relative error"
                                        : stopped_by_time_ ? "stopped at max_seconds cap"
                                                           : "stopped at max_samples cap")});
    if (!add) diagnostics_.push_back({"backend", std::string(pool.Backend())});
    // Above 10% relative error (or with few positive paths) the standard error itself
    // is unreliable, mostly from heavy-tailed IS weights on long ledgers (mc-evr.md
    // 10.2). Below kMinEffectiveSamples effective paths the interval is unbounded
    // (pool_query.h); between, it is the ESS-floored band, which may still miss.
    if (d.relative_std_error > 0.1 || !d.trustworthy) {
      diagnostics_.push_back(
          {"estimate_warning",
           absl::StrFormat("%s direction: relative standard error %.3g, effective sample size "
                           "%.3g, %d positive paths of %d; %s (use more samples, another "
                           "estimator, or a certified accountant)",
                           add ? "add" : "remove", d.relative_std_error, d.ess, d.num_positive,
                           pool.num_paths(),
                           d.trustworthy ? "the interval may miss the truth"
                                         : "too few effective paths to trust the estimate: "
                                           "the interval is unbounded")});
    }
  }

  // True when a Chernoff bound proves delta_add(epsilon) <= delta, so the add
  // direction cannot raise the reported maximum (spec 2.3):
  // delta_A(eps) = E[(1 - e^{eps - Y'})_+] <= exp(K'(t) - t eps) t^t / (t+1)^{t+1}
  // for every t > 0, with K' the add-direction CGF summed over the ledger: for
  // u = Y' - eps >= 0, (1 - e^{-u}) <= e^{t u} max_u (1 - e^{-u}) e^{-t u}, and the
  // maximum is at e^{-u} = t/(t+1) (the RDP-to-DP conversion of Canonne, Kamath and
  // Steinke 2020, Prop. 12; it saves log(e (t+1)) nats over Markov's Pr[Y' > eps],
  // which proves the add direction at 7000-1e4 steps of sigma 1, q 1e-3, delta 1e-9:
  // exponent -25.7 at 7000 steps vs log 1e-9 = -20.7, Markov -20.5). This spares the
  // add pool, whose estimate cannot resolve the tiny add-direction delta of DP-SGD
  // ledgers (the spec's 9.4 rows have delta_A <= delta_R), at tiny delta.
  bool AddBelow(double epsilon, double delta) const {
    if (!(delta > 0)) return false;
    const double log_delta = std::log(delta);
    for (double t = 0.25; t <= 512; t *= 1.25) {
      if (TimeUp()) return false;  // not proven: the add direction is sampled (time-capped)
      double k = 0;
      for (const MechanismEvent& e : events()) {
        auto m = MakePlrv(e.mechanism, Direction::kAdd)->Tilted(t);
        if (!m.ok() || !std::isfinite(m->k)) return false;
        k += static_cast<double>(e.count) * m->k;
      }
      if (k - t * epsilon + t * std::log(t) - (t + 1) * std::log1p(t) <= log_delta) return true;
    }
    return false;
  }

  int64_t StartPaths() const {
    return options_.num_samples > 0 ? options_.num_samples
                                    : std::min(options_.initial_samples, options_.max_samples);
  }

  // The pool for a direction with its ledger brought up to date; IS pools are
  // (re)built when `tilt` differs from theirs.
  absl::StatusOr<SamplePool*> Pool(bool add, double tilt) const {
    return SlotPool(add ? add_ : remove_, add ? AddKind() : RemoveKind(),
                    add ? Direction::kAdd : Direction::kRemove, tilt);
  }
  // The add direction: the mixture (its add-direction tilt, mixture_choice.h) with
  // a mixture remove direction, else SMC of the add law (spec 2.3).
  McEstimator AddKind() const {
    return RemoveKind() == McEstimator::kTiltMixture ? McEstimator::kTiltMixture
                                                     : McEstimator::kSmc;
  }
  // `slot`'s pool, (re)built when its kind or tilt differs, and for a mixture pool
  // also when the ledger has more than doubled since its proposal was chosen (a
  // deterministic re-tilt: the proposal depends on the ledger, never on samples).
  absl::StatusOr<SamplePool*> SlotPool(PoolSlot& slot, McEstimator kind, Direction direction,
                                       double tilt) const {
    const bool tilted = kind != McEstimator::kSmc;
    if (slot.pool != nullptr) {
      const bool wrong_kind = slot.pool->options().estimator != kind;
      const bool stale = kind == McEstimator::kTiltMixture && num_steps() > 2 * slot.tilt_steps;
      if (wrong_kind || (tilted && slot.tilt != tilt) || stale ||
          slot.pool->num_steps() > num_steps()) {
        slot.pool.reset();
      }
    }
    if (slot.pool == nullptr) {
      SamplePoolOptions o;
      o.estimator = kind;
      o.direction = direction;
      o.num_paths = StartPaths();
      o.seed = options_.seed;
      o.target_epsilon = tilted ? tilt : 1.0;
      if (kind == McEstimator::kTiltMixture) o.tilt_ledger.assign(events().begin(), events().end());
      o.backend = options_.backend;
      o.num_threads = options_.num_threads;
      auto p = CreateSamplePool(o);
      if (!p.ok()) return p.status();
      slot.pool = std::move(*p);
      slot.tilt = tilted ? tilt : -1;
      slot.tilt_steps = num_steps();
      slot.last_epsilon = -1;
    }
    // Append the ledger's tail the pool has not seen (Compose only appends), in
    // chunks of about 2^20 path-steps, so that max_seconds also bounds a build over
    // a very long ledger. A build stopped there keeps its progress (appending in
    // chunks gives the same paths as at once); the next query continues it.
    const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 20) / slot.pool->num_paths());
    int64_t seen = slot.pool->num_steps(), start = 0;
    for (const MechanismEvent& e : events()) {
      const int64_t end = start + e.count;
      while (seen < end) {
        const int64_t from = std::max(seen, start);
        const int64_t n = std::min(end - from, chunk);
        if (absl::Status s = slot.pool->Append({e.mechanism, n}); !s.ok()) return s;
        seen = from + n;
        if (seen < num_steps() && options_.max_seconds > 0 && Elapsed() > options_.max_seconds) {
          return absl::DeadlineExceededError(absl::StrFormat(
              "mc: after max_seconds=%g the sample pool covers %d of the ledger's %d steps; "
              "it is kept, so asking again continues the build",
              options_.max_seconds, seen, num_steps()));
        }
      }
      start = end;
    }
    return slot.pool.get();
  }

  bool Enough(const PoolDeltaEstimate& d, double target) const {
    // Spec 6.3: z SE / target <= 1% and n_pos >= 100.
    return d.num_positive >= 100 && options_.confidence_z * d.band_std_error <= 0.01 * target;
  }
  bool CanGrow(const SamplePool& p) const {
    if (options_.num_samples != 0 || p.num_paths() >= options_.max_samples) return false;
    if (options_.max_seconds > 0 && 2 * Elapsed() > options_.max_seconds) {
      stopped_by_time_ = true;
      return false;
    }
    return true;
  }
  // Per-step CGFs of steep mechanisms (sigma ~ 1e-3) cost ~0.1 s each: the tilt
  // guess and the add-direction proof stop at the time cap too.
  bool TimeUp() const { return options_.max_seconds > 0 && Elapsed() > options_.max_seconds; }
  double Elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - query_start_).count();
  }
  void StartQuery() const {
    diagnostics_.clear();
    query_start_ = std::chrono::steady_clock::now();
    stopped_by_time_ = false;
  }

  absl::StatusOr<PoolDeltaEstimate> DeltaFrom(bool add, double epsilon) const {
    if (!add && UseLadder()) return DeltaFromLadder(epsilon);
    const double tilt = options_.target_epsilon > 0 ? options_.target_epsilon : epsilon;
    auto pool = Pool(add, tilt);
    if (!pool.ok()) return pool.status();
    const Direction d = add ? Direction::kAdd : Direction::kRemove;
    while (true) {
      auto r = PoolDeltaForEpsilon(**pool, epsilon, d, options_.confidence_z);
      if (!r.ok()) return r.status();
      const bool enough = Enough(*r, r->delta_hat);
      if (enough || !CanGrow(**pool)) {
        Note(add, **pool, *r, enough);
        return *r;
      }
      const int64_t m = std::min(2 * (*pool)->num_paths(), options_.max_samples);
      if (absl::Status s = (*pool)->Grow(m); !s.ok()) return s;
    }
  }

  // Chernoff/RDP upper bound on epsilon from the exact per-step CGFs: first
  // guess for the IS tilt.
  double RdpGuess(double delta) const {
    double best = kInf;
    for (double lambda = 0.25; lambda <= 256; lambda *= 1.25) {
      if (TimeUp()) break;  // a tilt guess only: the best so far will do
      double k = 0;
      for (const MechanismEvent& e : events()) {
        auto t = MakePlrv(e.mechanism, Direction::kRemove)->Tilted(lambda);
        if (!t.ok() || !std::isfinite(t->k)) {
          k = kInf;
          break;
        }
        k += static_cast<double>(e.count) * t->k;
      }
      best = std::min(best, (k - std::log(delta)) / lambda);
    }
    return std::isfinite(best) ? std::max(best, 0.05) : 1.0;
  }

  absl::StatusOr<PoolEpsilonEstimate> EpsilonFrom(bool add, double delta) const {
    if (!add && UseLadder()) return EpsilonFromLadder(delta);
    const Direction d = add ? Direction::kAdd : Direction::kRemove;
    const bool is = !add && UseIs();
    double tilt = -1;
    if (add && AddKind() == McEstimator::kTiltMixture) {
      // A deterministic center (never the remove pool's answer): the ladder's.
      tilt = options_.target_epsilon > 0 ? options_.target_epsilon : LadderCenter(delta);
    }
    if (is) {
      tilt = options_.target_epsilon > 0 ? options_.target_epsilon
             : remove_.pool != nullptr   ? remove_.tilt
                                         : RdpGuess(delta);
    }
    for (int round = 0;; ++round) {
      auto pool = Pool(add, tilt);
      if (!pool.ok()) return pool.status();
      PoolSlot& slot = add ? add_ : remove_;
      // Re-tilt as soon as the answer is >10% from the tilt, before growing: the
      // growth is only worth paying for at the tilt that is kept.
      auto retilt = [&](const PoolEpsilonEstimate& e) {
        return is && options_.target_epsilon == 0 && round < 3 && e.epsilon > 0 &&
               std::fabs(e.epsilon - tilt) > 0.1 * e.epsilon &&
               !(options_.max_seconds > 0 && 2 * Elapsed() > options_.max_seconds);
      };
      absl::StatusOr<PoolEpsilonEstimate> r;
      while (true) {
        r = PoolEpsilonForDelta(**pool, delta, d, slot.last_epsilon, options_.confidence_z);
        if (!r.ok()) return r.status();
        slot.last_epsilon = r->epsilon;
        // An infinite answer (delta below the ledger's infinite-loss mass, issue 11:
        // approx_dp delta=0.999999 grew every pool to max_samples) stays infinite.
        if (r->epsilon == 0 || std::isinf(r->epsilon) || Enough(r->at_epsilon, delta) ||
            retilt(*r) || !CanGrow(**pool)) {
          break;
        }
        const int64_t m = std::min(2 * (*pool)->num_paths(), options_.max_samples);
        if (absl::Status s = (*pool)->Grow(m); !s.ok()) return s;
      }
      if (!retilt(*r)) {
        Note(add, **pool, r->at_epsilon,
             r->epsilon == 0 || std::isinf(r->epsilon) || Enough(r->at_epsilon, delta));
        return r;
      }
      tilt = r->epsilon;
    }
  }

  // ---------------------------------------------------------- tilt ladder
  // Issue 14 item 2: mixture pools at targets c * kLadderRatio^(k - (n-1)/2),
  // k < n = ladder_rungs, around a deterministic center c: the queried epsilon for
  // delta(eps), the SPA's SP-CLT estimate of epsilon(delta) (spa_epsilon.h) for
  // epsilon(delta), or target_epsilon when set. The answer comes from the rung with
  // the smallest estimated relative error (trustworthy rungs first). When c leaves
  // the ladder (by more than half a rung) the ladder is re-centred on it: the
  // tilts depend on (ledger, query) only, never on the pools' values.
  static constexpr double kLadderRatio = 1.1;

  double LadderCenter(double delta) const {
    if (options_.target_epsilon > 0) return options_.target_epsilon;
    if (center_steps_ == num_steps() && center_delta_ == delta) return center_;
    SpaLedgerCgf cgf(Direction::kRemove);
    cgf.SetLedger(events());
    // The SPA's tilt solves on extreme mechanisms (sigma 1e-3) can take tens of
    // seconds: they stop at the query's deadline, and the centre is then the RDP
    // guess (which stops there too), not cached, so a later query without a cap
    // gets the SPA centre again.
    cgf.SetDeadline(deadline());
    auto e = SpaEpsilonForDelta(cgf, delta, SpaEstimator::kClt);
    if (!e.ok() && e.status().code() == absl::StatusCode::kDeadlineExceeded) return RdpGuess(delta);
    center_ = e.ok() && e->estimate > 0 && std::isfinite(e->estimate) ? e->estimate
                                                                      : RdpGuess(delta);
    center_steps_ = num_steps();
    center_delta_ = delta;
    return center_;
  }

  void CenterLadder(double c) const {
    const int n = options_.ladder_rungs;
    ladder_.resize(n);
    const double half = std::sqrt(kLadderRatio);
    if (static_cast<int>(targets_.size()) == n && c >= targets_[0] / half &&
        c <= targets_[n - 1] * half) {
      return;
    }
    targets_.resize(n);
    for (int k = 0; k < n; ++k) targets_[k] = c * std::pow(kLadderRatio, k - (n - 1) / 2.0);
  }

  // Rung a is the better answer than rung b.
  static bool Better(const PoolDeltaEstimate& a, const PoolDeltaEstimate& b) {
    if (a.trustworthy != b.trustworthy) return a.trustworthy;
    return a.relative_std_error < b.relative_std_error;
  }

  void NoteLadder(double center, double tilt) const {
    diagnostics_.push_back({"remove_ladder_center", center});
    diagnostics_.push_back({"remove_tilt", tilt});
  }

  absl::StatusOr<PoolDeltaEstimate> DeltaFromLadder(double epsilon) const {
    const double c = options_.target_epsilon > 0 ? options_.target_epsilon : epsilon;
    CenterLadder(c);
    int best = -1;
    PoolDeltaEstimate r;
    for (int k = 0; k < static_cast<int>(ladder_.size()); ++k) {
      auto pool = SlotPool(ladder_[k], McEstimator::kTiltMixture, Direction::kRemove,
                           targets_[k]);
      if (!pool.ok()) return pool.status();
      auto e = PoolDeltaForEpsilon(**pool, epsilon, Direction::kRemove, options_.confidence_z);
      if (!e.ok()) return e.status();
      if (best < 0 || Better(*e, r)) {
        best = k;
        r = *e;
      }
    }
    SamplePool& pool = *ladder_[best].pool;
    while (!Enough(r, r.delta_hat) && CanGrow(pool)) {
      if (absl::Status s = pool.Grow(std::min(2 * pool.num_paths(), options_.max_samples));
          !s.ok()) {
        return s;
      }
      auto e = PoolDeltaForEpsilon(pool, epsilon, Direction::kRemove, options_.confidence_z);
      if (!e.ok()) return e.status();
      r = *e;
    }
    Note(false, pool, r, Enough(r, r.delta_hat));
    NoteLadder(c, ladder_[best].tilt);  // the pool's tilt
    return r;
  }

  absl::StatusOr<PoolEpsilonEstimate> EpsilonFromLadder(double delta) const {
    const double c = LadderCenter(delta);
    CenterLadder(c);
    int best = -1;
    PoolEpsilonEstimate r;
    for (int k = 0; k < static_cast<int>(ladder_.size()); ++k) {
      PoolSlot& slot = ladder_[k];
      auto pool = SlotPool(slot, McEstimator::kTiltMixture, Direction::kRemove, targets_[k]);
      if (!pool.ok()) return pool.status();
      auto e = PoolEpsilonForDelta(**pool, delta, Direction::kRemove, slot.last_epsilon,
                                   options_.confidence_z);
      if (!e.ok()) return e.status();
      slot.last_epsilon = e->epsilon;
      if (best < 0 || Better(e->at_epsilon, r.at_epsilon)) {
        best = k;
        r = *e;
      }
    }
    PoolSlot& slot = ladder_[best];
    auto done = [&] {
      return r.epsilon == 0 || std::isinf(r.epsilon) || Enough(r.at_epsilon, delta);
    };
    while (!done() && CanGrow(*slot.pool)) {
      if (absl::Status s =
              slot.pool->Grow(std::min(2 * slot.pool->num_paths(), options_.max_samples));
          !s.ok()) {
        return s;
      }
      auto e = PoolEpsilonForDelta(*slot.pool, delta, Direction::kRemove, slot.last_epsilon,
                                   options_.confidence_z);
      if (!e.ok()) return e.status();
      slot.last_epsilon = e->epsilon;
      r = *e;
    }
    Note(false, *slot.pool, r.at_epsilon, done());
    NoteLadder(c, slot.tilt);
    return r;
  }

  McAccountantOptions options_;
  mutable PoolSlot remove_, add_;
  mutable std::vector<PoolSlot> ladder_;
  mutable std::vector<double> targets_;  // the ladder's tilts (its pools follow them)
  mutable double center_ = 0, center_delta_ = -1;
  mutable int64_t center_steps_ = -1;
  mutable McEstimator remove_kind_ = McEstimator::kSmc, pilot_kind_ = McEstimator::kSmc;
  mutable int64_t pilot_steps_ = -1;
  mutable double pilot_epsilon_ = -1, pilot_rse_[3] = {0, 0, 0};
  mutable double add_cap_ = -1;
  mutable std::vector<AnswerDiagnostic> diagnostics_;
  mutable std::chrono::steady_clock::time_point query_start_;
  mutable bool stopped_by_time_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Accountant>> CreateMcAccountant(const McAccountantOptions& o) {
  if (o.num_samples < 0 || o.num_samples == 1 || o.num_samples > kMaxMcSamples) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "num_samples must be 0 (default rule) or in [2, %d] (kMaxMcSamples, bounding pool "
        "memory), got %d",
        kMaxMcSamples, o.num_samples));
  }
  for (const auto& [name, value] :
       {std::pair{"initial_samples", o.initial_samples}, std::pair{"max_samples", o.max_samples}}) {
    if (value < 2 || value > kMaxMcSamples) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s must be in [2, %d] (kMaxMcSamples, bounding pool memory), got %d", name,
          kMaxMcSamples, value));
    }
  }
  if (!std::isfinite(o.max_seconds) || o.max_seconds < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_seconds must be a finite number >= 0, got %g", o.max_seconds));
  }
  if (!std::isfinite(o.target_epsilon) || o.target_epsilon < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("target_epsilon must be finite and >= 0, got %g", o.target_epsilon));
  }
  if (o.ladder_rungs != 1 && o.ladder_rungs != 3) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ladder_rungs must be 1 or 3, got %d", o.ladder_rungs));
  }
  if (!(o.confidence_z > 0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("confidence_z must be > 0, got %g", o.confidence_z));
  }
  return std::make_unique<McAccountant>(o);
}

}  // namespace dpledger::core
