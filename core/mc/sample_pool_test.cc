#include "core/mc/sample_pool.h"

#include <cmath>
#include <vector>

#include "core/accountants/analytic_gaussian.h"
#include "core/mc/mc_step.h"
#include "core/mc/pool_query.h"
#include "core/mc/mc_test_support.h"
#include "core/util/test_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

// Options are written as designated initializers naming only what matters.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dpledger::core {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

using mc_test::Event;
using mc_test::kZ;

std::unique_ptr<SamplePool> Pool(const SamplePoolOptions& o) {
  auto p = CreateSamplePool(o);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::move(*p) : nullptr;
}

PoolDeltaEstimate Delta(const SamplePool& pool, double eps, Direction d) {
  auto r = PoolDeltaForEpsilon(pool, eps, d);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : PoolDeltaEstimate{};
}

struct OnlineRow {
  int64_t n;
  double epsilon;
  double reference;  // mc-evr.md 9.6 (5 digits)
};

TEST(SamplePool, OnlineImportanceSamplingMatchesReferencesAtEveryHorizon) {
  // Spec 9.6: sigma 0.6, q 1e-3, theta_MM(1.5), one pool read at n = 1, 10, 100,
  // 1000 (m = 1e4 here instead of 2e5 to keep the test fast).
  constexpr OnlineRow kRows[] = {
      {.n = 10, .epsilon = 1.0, .reference = 4.0411e-7},
      {.n = 10, .epsilon = 1.5, .reference = 6.7093e-8},
      {.n = 10, .epsilon = 2.0, .reference = 1.2534e-8},
      {.n = 100, .epsilon = 1.0, .reference = 4.1055e-6},
      {.n = 100, .epsilon = 1.5, .reference = 6.7935e-7},
      {.n = 100, .epsilon = 2.0, .reference = 1.2681e-7},
      {.n = 1000, .epsilon = 1.5, .reference = 7.7061e-6},
  };
  const Mechanism m = *Mechanism::SubsampledGaussian(0.6, 1e-3);
  auto pool = Pool({.estimator = McEstimator::kImportanceSampling, .num_paths = 10000,
                    .seed = 11, .target_epsilon = 1.5, .backend = McBackend::kCpu});
  ASSERT_TRUE(pool->Append({m, 1}).ok());
  const auto plrv = MakePlrv(m, Direction::kRemove);
  for (double eps : {1.0, 1.5, 2.0}) {  // n = 1: the exact one-step closed form
    const PoolDeltaEstimate d = Delta(*pool, eps, Direction::kRemove);
    const double exact = std::exp(plrv->LogDeltaForEpsilon(eps));
    EXPECT_NEAR(d.delta_hat, exact, kZ * d.std_error) << eps;
    EXPECT_LT(d.relative_std_error, 0.03) << eps;
  }
  int64_t n = 1;
  for (const OnlineRow& row : kRows) {
    if (row.n > n) {
      for (; n < row.n; ++n) ASSERT_TRUE(pool->Append({m, 1}).ok());
    }
    ASSERT_EQ(pool->num_steps(), row.n);
    const PoolDeltaEstimate d = Delta(*pool, row.epsilon, Direction::kRemove);
    EXPECT_NEAR(d.delta_hat, row.reference, kZ * d.std_error + 1e-4 * row.reference)
        << "n " << row.n << " eps " << row.epsilon;
    EXPECT_LT(d.relative_std_error, 0.06) << "n " << row.n << " eps " << row.epsilon;
  }
  EXPECT_EQ(pool->events().size(), 1u);  // 1000 single steps merged into one event
}

TEST(SamplePool, SmcGivesBothDirectionsFromOneLaw) {
  // Spec 9.4 table, sigma 1, q 0.5, k 10; add by change of measure on the
  // remove samples, x' = (e^{-y} - e^eps)_+ (spec 2.3), and by an add pool.
  struct Row {
    double eps, remove, add;
  };
  constexpr Row kRows[] = {{0.5, 0.4701968, 0.4450937},
                           {1.0, 0.3752935, 0.3197408},
                           {2.0, 0.2142024, 0.1146268}};
  auto remove = Pool({.num_paths = 50000, .seed = 12, .backend = McBackend::kCpu});
  auto add = Pool({.direction = Direction::kAdd, .num_paths = 50000, .seed = 12,
                   .backend = McBackend::kCpu});
  const MechanismEvent ev = Event(Mechanism::SubsampledGaussian(1.0, 0.5), 10);
  ASSERT_TRUE(remove->Append(ev).ok());
  ASSERT_TRUE(add->Append(ev).ok());
  for (const Row& row : kRows) {
    const PoolDeltaEstimate r = Delta(*remove, row.eps, Direction::kRemove);
    const PoolDeltaEstimate a = Delta(*remove, row.eps, Direction::kAdd);
    const PoolDeltaEstimate a2 = Delta(*add, row.eps, Direction::kAdd);
    const PoolDeltaEstimate r2 = Delta(*add, row.eps, Direction::kRemove);
    EXPECT_NEAR(r.delta_hat, row.remove, kZ * r.std_error + 1e-6) << row.eps;
    EXPECT_NEAR(a.delta_hat, row.add, kZ * a.std_error + 1e-6) << row.eps;
    EXPECT_NEAR(a2.delta_hat, row.add, kZ * a2.std_error + 1e-6) << row.eps;
    EXPECT_NEAR(r2.delta_hat, row.remove, kZ * r2.std_error + 1e-6) << row.eps;
  }
}

TEST(SamplePool, PathsAreBitIdenticalForAnyThreadCountAndAppendOrder) {
  const std::vector<MechanismEvent> ledger = {
      Event(Mechanism::SubsampledGaussian(0.9, 0.02), 7), Event(Mechanism::Gaussian(3.0), 2),
      Event(Mechanism::SubsampledGaussian(1.2, 0.1), 5)};
  for (McEstimator est : {McEstimator::kSmc, McEstimator::kImportanceSampling,
                         McEstimator::kTiltMixture}) {
    // A mixture pool's proposal depends on the ledger it is chosen for: given as
    // tilt_ledger, batch and one-by-one appends draw the same paths.
    const std::vector<MechanismEvent> plan =
        est == McEstimator::kTiltMixture ? ledger : std::vector<MechanismEvent>{};
    std::vector<double> y1, w1;
    auto batch = Pool({.estimator = est, .num_paths = 5000, .seed = 77, .target_epsilon = 2,
                       .tilt_ledger = plan, .backend = McBackend::kCpu, .num_threads = 1});
    ASSERT_TRUE(batch->AppendAll(ledger).ok());
    ASSERT_TRUE(batch->ReadPaths(&y1, &w1).ok());
    for (int threads : {2, 8}) {
      // Step by step, other thread counts.
      auto online = Pool({.estimator = est, .num_paths = 5000, .seed = 77, .target_epsilon = 2,
                          .tilt_ledger = plan, .backend = McBackend::kCpu,
                          .num_threads = threads});
      for (const MechanismEvent& e : ledger) {
        for (int64_t i = 0; i < e.count; ++i) ASSERT_TRUE(online->Append({e.mechanism, 1}).ok());
      }
      std::vector<double> y2, w2;
      ASSERT_TRUE(online->ReadPaths(&y2, &w2).ok());
      EXPECT_EQ(y1, y2) << threads;
      EXPECT_EQ(w1, w2) << threads;
      const double eps[] = {0.3, 1.0};
      auto e1 = batch->Evaluate(eps, Direction::kRemove);
      auto e2 = online->Evaluate(eps, Direction::kRemove);
      ASSERT_TRUE(e1.ok() && e2.ok());
      for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(e1->sums[i].sum_x, e2->sums[i].sum_x);
        EXPECT_EQ(e1->sums[i].sum_x2, e2->sums[i].sum_x2);
      }
    }
    // Growing a small pool gives the paths of a pool built that large.
    auto small = Pool({.estimator = est, .num_paths = 1234, .seed = 77, .target_epsilon = 2,
                       .tilt_ledger = plan, .backend = McBackend::kCpu});
    ASSERT_TRUE(small->AppendAll(ledger).ok());
    ASSERT_TRUE(small->Grow(5000).ok());
    std::vector<double> y3, w3;
    ASSERT_TRUE(small->ReadPaths(&y3, &w3).ok());
    EXPECT_EQ(y1, y3);
    EXPECT_EQ(w1, w3);
  }
}

TEST(SamplePool, EpsilonSearchInvertsThePoolAndMatchesGaussianClosedForm) {
  auto pool = Pool({.num_paths = 100000, .seed = 13, .backend = McBackend::kCpu});
  ASSERT_TRUE(pool->Append(Event(Mechanism::Gaussian(2.0), 4)).ok());  // mu = 1
  const double delta = 1e-2;
  auto e = PoolEpsilonForDelta(*pool, delta, Direction::kRemove);
  ASSERT_TRUE(e.ok()) << e.status();
  // On the pool, D(eps_hat) = delta up to the search tolerance.
  EXPECT_NEAR(e->at_epsilon.delta_hat, delta, 1e-8);
  const EpsilonBracket exact = GaussianEpsilon(1.0, delta);
  EXPECT_NEAR(e->epsilon, exact.hi, kZ * e->std_error);
  EXPECT_LE(e->lower, e->epsilon);
  EXPECT_GE(e->upper, e->epsilon);
  EXPECT_LT(e->std_error, 0.02);
  // Warm-started from the answer: same answer, fewer passes.
  auto w = PoolEpsilonForDelta(*pool, delta, Direction::kRemove, e->epsilon + 1e-3);
  ASSERT_TRUE(w.ok());
  EXPECT_NEAR(w->epsilon, e->epsilon, 1e-8);
  EXPECT_LE(w->evaluations, 5);
  // delta above D(0) gives epsilon 0.
  auto z = PoolEpsilonForDelta(*pool, 0.9, Direction::kRemove);
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->epsilon, 0.0);
}

// Regression (issue 3 audit): on a symmetric ledger the add-direction search
// used the mirrored bracket top (-min y) instead of max y, capping epsilon.
TEST(SamplePool, SymmetricLedgerAnswersTheSameInBothDirections) {
  auto pool = Pool({.num_paths = 100000, .seed = 5, .backend = McBackend::kCpu});
  ASSERT_TRUE(pool->Append(Event(Mechanism::Gaussian(1.0), 1)).ok());
  EXPECT_TRUE(pool->symmetric());
  EXPECT_FALSE(pool->Mirrors(Direction::kAdd));
  // Before the fix the add answer was capped at -min y (about 3.9 here).
  auto remove = PoolEpsilonForDelta(*pool, 1e-5, Direction::kRemove);
  auto add = PoolEpsilonForDelta(*pool, 1e-5, Direction::kAdd);
  ASSERT_TRUE(remove.ok() && add.ok());
  EXPECT_DOUBLE_EQ(add->epsilon, remove->epsilon);
  // Against the closed form for mu = 1 at delta 1e-3, within 5 SE.
  auto mid = PoolEpsilonForDelta(*pool, 1e-3, Direction::kAdd);
  ASSERT_TRUE(mid.ok());
  EXPECT_NEAR(mid->epsilon, GaussianEpsilon(1.0, 1e-3).hi, kZ * mid->std_error);
}

TEST(SamplePool, MixturePoolMatchesGaussianClosedFormAtTinyDelta) {
  // Issue 14: 1200 Gaussian steps of sigma 70 at delta 1e-10 gave no positive SMC
  // path. The mixture pool tilts every step exactly (q = 1): its inverted band
  // contains the closed form, and is narrow.
  auto pool = Pool({.estimator = McEstimator::kTiltMixture, .num_paths = 20000, .seed = 31,
                    .target_epsilon = 3.5, .backend = McBackend::kCpu});
  ASSERT_TRUE(pool->Append(Event(Mechanism::Gaussian(70.0), 1200)).ok());
  const double mu = std::sqrt(1200.0) / 70;
  const EpsilonBracket exact = GaussianEpsilon(mu, 1e-10);
  auto e = PoolEpsilonForDelta(*pool, 1e-10, Direction::kRemove);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE(e->at_epsilon.trustworthy);
  EXPECT_LE(e->lower, exact.lo);
  EXPECT_GE(e->upper, exact.hi);
  EXPECT_LT(e->upper - e->lower, 0.02 * exact.hi);
  EXPECT_EQ(pool->MemoryBytes(), 20000u * 24 + sizeof(mc::McStep));
}

TEST(SamplePool, ReportsItsMemory) {
  auto smc = Pool({.num_paths = 1000, .backend = McBackend::kCpu});
  auto is = Pool({.estimator = McEstimator::kImportanceSampling, .num_paths = 1000,
                  .backend = McBackend::kCpu});
  EXPECT_EQ(smc->MemoryBytes(), 8000u);
  EXPECT_EQ(is->MemoryBytes(), 36000u);
  EXPECT_EQ(smc->Backend(), "cpu");
}

TEST(SamplePool, RejectsWhatItCannotDo) {
  auto is = Pool({.estimator = McEstimator::kImportanceSampling, .num_paths = 100,
                  .backend = McBackend::kCpu});
  EXPECT_THAT(is->Append(Event(Mechanism::Laplace(1.0), 1)),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("laplace")));
  EXPECT_EQ(is->num_steps(), 0);
  auto smc = Pool({.num_paths = 100, .backend = McBackend::kCpu});
  ASSERT_TRUE(smc->Append(Event(Mechanism::ApproxDp(0.5, 1e-3), 1)).ok());
  ASSERT_TRUE(smc->Append(Event(Mechanism::SubsampledGaussian(1.0, 0.1), 1)).ok());
  EXPECT_THAT(PoolDeltaForEpsilon(*smc, 1.0, Direction::kAdd),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("approx_dp")));
  EXPECT_THAT(smc->Append(Event(Mechanism::Laplace(1.0), 0)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("count")));
  EXPECT_THAT(CreateSamplePool({.num_paths = 1}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_paths")));
  EXPECT_THAT(CreateSamplePool({.estimator = McEstimator::kImportanceSampling,
                                .direction = Direction::kAdd}),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("remove")));
  EXPECT_THAT(CreateSamplePool({.estimator = McEstimator::kTiltEvery}),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("streaming")));
  auto mix = Pool({.estimator = McEstimator::kTiltMixture, .num_paths = 100,
                   .backend = McBackend::kCpu});
  EXPECT_THAT(mix->Append(Event(Mechanism::ApproxDp(0.5, 1e-3), 1)),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("approx_dp")));
  EXPECT_EQ(mix->num_steps(), 0);
  EXPECT_THAT(PoolEpsilonForDelta(*smc, 0, Direction::kRemove),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("delta")));
}

}  // namespace
}  // namespace dpledger::core

namespace dpledger::core {
namespace {

TEST(SamplePoolBackend, AutoPicksCudaOnlyWhenADeviceIsPresent) {
  auto pool = CreateSamplePool({.num_paths = 100});
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ((*pool)->Backend(), CudaDeviceAvailable() ? "cuda" : "cpu");
}

// Runs only on machines with a GPU: both backends draw the same Philox bits, so
// paths agree to libm rounding (1e-12 relative) and sums to the same.
TEST(SamplePoolBackend, CudaPoolMatchesCpuPool) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  const std::vector<MechanismEvent> ledger = {
      MechanismEvent{*Mechanism::SubsampledGaussian(0.9, 0.02), 50},
      MechanismEvent{*Mechanism::Gaussian(3.0), 2}};
  for (McEstimator est : {McEstimator::kSmc, McEstimator::kImportanceSampling}) {
    std::vector<double> yc, wc, yg, wg;
    auto cpu = CreateSamplePool({.estimator = est, .num_paths = 3000, .seed = 5,
                                 .target_epsilon = 2, .backend = McBackend::kCpu});
    auto gpu = CreateSamplePool({.estimator = est, .num_paths = 1000, .seed = 5,
                                 .target_epsilon = 2, .backend = McBackend::kCuda});
    ASSERT_TRUE(cpu.ok() && gpu.ok());
    ASSERT_TRUE((*cpu)->AppendAll(ledger).ok());
    ASSERT_TRUE((*gpu)->AppendAll(ledger).ok());
    ASSERT_TRUE((*gpu)->Grow(3000).ok());
    ASSERT_TRUE((*cpu)->ReadPaths(&yc, &wc).ok());
    ASSERT_TRUE((*gpu)->ReadPaths(&yg, &wg).ok());
    for (size_t i = 0; i < yc.size(); ++i) {
      ASSERT_NEAR(yc[i], yg[i], 1e-12 * (1 + std::fabs(yc[i]))) << i;
      ASSERT_NEAR(wc[i], wg[i], 1e-12 * (1 + std::fabs(wc[i]))) << i;
    }
    const double eps[] = {0.5, 1.0};
    auto ec = (*cpu)->Evaluate(eps, Direction::kRemove);
    auto eg = (*gpu)->Evaluate(eps, Direction::kRemove);
    ASSERT_TRUE(ec.ok() && eg.ok());
    for (int i = 0; i < 2; ++i) {
      EXPECT_NEAR(ec->sums[i].sum_x, eg->sums[i].sum_x, 1e-10 * ec->sums[i].sum_x);
    }
  }
  McEstimateRequest r{.events = ledger, .epsilon = 1.0, .seed = 3, .num_samples = 100000};
  r.backend = McBackend::kCpu;
  auto c = EstimateDeltaStreaming(r);
  r.backend = McBackend::kCuda;
  auto g = EstimateDeltaStreaming(r);
  ASSERT_TRUE(c.ok() && g.ok());
  EXPECT_NEAR(c->delta_hat, g->delta_hat, 1e-10 * c->delta_hat);
  EXPECT_EQ(g->backend, "cuda");
}

}  // namespace
}  // namespace dpledger::core
