#include "core/accountants/spa_mixture.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

TEST(SpaMixtureExplore, Print) {
  const char* env = std::getenv("MIX_CASE");
  if (env == nullptr) GTEST_SKIP();
  double s, q, k, eps;
  ASSERT_EQ(std::sscanf(env, "%lf %lf %lf %lf", &s, &q, &k, &eps), 4);
  Mechanism m = *Mechanism::SubsampledGaussian(s, q);
  std::vector<MechanismEvent> ev = {{m, static_cast<int64_t>(k)}};
  for (Direction d : {Direction::kRemove, Direction::kAdd}) {
    auto t0 = std::chrono::steady_clock::now();
    auto mix = ConditionedMixture::Build(ev, d, std::getenv("MIX_EW2") ? BulkEstimator::kEw2 : BulkEstimator::kClt, Deadline());
    ASSERT_TRUE(mix.ok()) << mix.status();
    auto t1 = std::chrono::steady_clock::now();
    auto r = (*mix)->Delta(eps, Deadline());
    ASSERT_TRUE(r.ok()) << r.status();
    auto t2 = std::chrono::steady_clock::now();
    std::printf("%s c=%g p=%g delta=%.6e terms=%d trunc=%g build=%.1fms delta=%.1fms\n",
                d == Direction::kRemove ? "remove" : "add", (*mix)->threshold(),
                (*mix)->jump_probability(), std::exp(r->log_delta), r->terms, r->truncated_mass,
                std::chrono::duration<double, std::milli>(t1 - t0).count(),
                std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
}

}  // namespace
}  // namespace dpledger::core
