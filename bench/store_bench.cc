// Store::Apply cost per group commit (issue 12 "say where the time goes"): one group of
// `updates` step updates of one job, committed durably, on SQLite (WAL, synchronous=FULL) and
// on PostgreSQL (a throwaway local server, fsync=on, synchronous_commit=on). The counters give
// updates per second through the store alone, without gRPC or accountants.
#include <benchmark/benchmark.h>

#include <memory>

#include "core/util/check.h"
#include "server/postgres_store.h"
#include "server/sqlite_store.h"
#include "server/test_postgres.h"
#include "server/test_util.h"

namespace dpledger::server {
namespace {

std::unique_ptr<Store> OpenStore(const std::string& backend, const std::string& dir) {
  if (backend == "sqlite") {
    auto s = SqliteStore::Open({.path = dir + "/ledger.db"});
    DPL_CHECK_OK(s.status());
    return std::move(*s);
  }
  auto pg = testing::TestPostgres::Shared();
  DPL_CHECK_OK(pg.status());
  auto url = (*pg)->CreateDatabase();
  DPL_CHECK_OK(url.status());
  auto s = PostgresStore::Open({.url = *url});
  DPL_CHECK_OK(s.status());
  return std::move(*s);
}

void BM_ApplyGroup(benchmark::State& state, const std::string& backend) {
  const int updates = static_cast<int>(state.range(0));
  testing::TempDir dir;
  std::unique_ptr<Store> store = OpenStore(backend, dir.path());
  JobRow job;
  job.key = {"bench", "job"};
  job.budget_epsilon = 1e6;
  job.budget_delta = 0.5;
  job.accountant = "pld";
  WriteBatch create;
  create.new_jobs.push_back(job);
  DPL_CHECK_OK(store->Apply(create));
  UpdateRow u;
  u.key = job.key;
  u.steps = "subsampled_gaussian:sigma=1,q=0.01,count=1";
  u.spent = {0.1, 0.2, 0.3, core::Guarantee::kCertified, 0};
  int64_t seq = 0;
  for (auto _ : state) {
    WriteBatch b;
    for (int i = 0; i < updates; ++i) {
      u.seq = ++seq;
      u.num_steps_after = seq;
      b.updates.push_back(u);
    }
    DPL_CHECK_OK(store->Apply(b));
  }
  state.counters["updates_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * updates, benchmark::Counter::kIsRate);
}

BENCHMARK_CAPTURE(BM_ApplyGroup, sqlite, std::string("sqlite"))
    ->Arg(1)->Arg(64)->Arg(1024)->UseRealTime()->MinTime(1);
BENCHMARK_CAPTURE(BM_ApplyGroup, postgres, std::string("postgres"))
    ->Arg(1)->Arg(64)->Arg(1024)->UseRealTime()->MinTime(1);

}  // namespace
}  // namespace dpledger::server
