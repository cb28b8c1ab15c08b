#include "server/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace dpledger::server {
namespace {

prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  // 50 us .. ~26 s, factor 2: covers a cached query up to a long verification.
  prometheus::Histogram::BucketBoundaries b;
  for (double v = 50e-6; v < 30; v *= 2) b.push_back(v);
  return b;
}

}  // namespace

Metrics::Metrics(MetricsOptions options)
    : options_(options), registry_(std::make_shared<prometheus::Registry>()) {
  using namespace prometheus;
  rpc_total_ = &BuildCounter().Name("dpledger_rpc_total").Help("RPCs by method and status code").Register(*registry_);
  rpc_seconds_ = &BuildHistogram().Name("dpledger_rpc_seconds").Help("RPC latency by method and status code").Register(*registry_);
  steps_admitted_ = &BuildCounter().Name("dpledger_steps_admitted_total").Help("Admitted steps (sum of counts)").Register(*registry_).Add({});
  steps_refused_ = &BuildCounter().Name("dpledger_steps_refused_total").Help("Refused steps (sum of counts)").Register(*registry_).Add({});
  updates_ = &BuildCounter().Name("dpledger_updates_total").Help("Ledger updates by outcome").Register(*registry_);
  verifications_ = &BuildCounter().Name("dpledger_verifications_total").Help("EVR verifications by purpose (release, admission) and outcome").Register(*registry_);
  releases_ = &BuildCounter().Name("dpledger_releases_total").Help("Releases by outcome").Register(*registry_);
  pool_bytes_ = &BuildGauge().Name("dpledger_pool_bytes").Help("Bytes held by MC sample pools").Register(*registry_).Add({});
  pool_rebuilds_ = &BuildCounter().Name("dpledger_pool_rebuilds_total").Help("Accountant state rebuilt from the ledger").Register(*registry_).Add({});
  pool_evictions_ = &BuildCounter().Name("dpledger_pool_evictions_total").Help("MC accountants (sample pools) evicted at the byte cap").Register(*registry_).Add({});
  backend_info_ = &BuildGauge().Name("dpledger_sample_pool_backend").Help("Sample-pool backend in use (info)").Register(*registry_);
  commit_seconds_ = &BuildHistogram().Name("dpledger_store_commit_seconds").Help("Duration of one group commit").Register(*registry_).Add({}, LatencyBuckets());
  commit_batches_ = &BuildHistogram().Name("dpledger_store_commit_batches").Help("Batches per group commit").Register(*registry_).Add({}, Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096});
  job_epsilon_ = &BuildGauge().Name("dpledger_job_epsilon_spent").Help("Spent epsilon at the job's delta (upper bound)").Register(*registry_);
  job_series_dropped_ = &BuildCounter().Name("dpledger_job_series_dropped_total").Help("Updates of jobs beyond the dpledger_job_epsilon_spent label cap").Register(*registry_).Add({});
  job_budget_ = &BuildGauge().Name("dpledger_job_epsilon_budget").Help("The job's epsilon budget (labelled for the jobs dpledger_job_epsilon_spent labels)").Register(*registry_);
  job_ratio_ = &BuildGauge().Name("dpledger_job_epsilon_spent_ratio").Help("dpledger_job_epsilon_spent / dpledger_job_epsilon_budget").Register(*registry_);
  refusals_ = &BuildCounter().Name("dpledger_refusals_total").Help("Refused updates by reason (budget, plan, uncertified, stopped, not_attempted, unverified)").Register(*registry_);
  ready_ = &BuildGauge().Name("dpledger_ready").Help("1 while the server reports SERVING (store reachable)").Register(*registry_).Add({});
  cached_jobs_ = &BuildGauge().Name("dpledger_cached_jobs").Help("Jobs whose accountant state is cached").Register(*registry_).Add({});
  cached_job_bytes_ = &BuildGauge().Name("dpledger_cached_job_bytes").Help("Heap bytes the cached jobs hold (accountant caches, ledgers, retry windows)").Register(*registry_).Add({});
  shed_ = &BuildCounter().Name("dpledger_shed_total").Help("Requests refused and streams ended by a limit, by reason").Register(*registry_);
  open_streams_ = &BuildGauge().Name("dpledger_open_streams").Help("StreamSteps calls open").Register(*registry_).Add({});
}

Metrics::~Metrics() = default;

void Metrics::Rpc(std::string_view method, std::string_view code, double seconds) {
  rpc_total_->Add({{"method", std::string(method)}, {"code", std::string(code)}}).Increment();
  rpc_seconds_->Add({{"method", std::string(method)}, {"code", std::string(code)}}, LatencyBuckets()).Observe(seconds);
}

void Metrics::Update(std::string_view outcome, int64_t steps) {
  updates_->Add({{"outcome", std::string(outcome)}}).Increment();
  if (outcome == "admitted") steps_admitted_->Increment(static_cast<double>(steps));
  if (outcome == "refused") steps_refused_->Increment(static_cast<double>(steps));
}

void Metrics::Verification(std::string_view purpose, std::string_view outcome) {
  verifications_->Add({{"purpose", std::string(purpose)}, {"outcome", std::string(outcome)}})
      .Increment();
}

void Metrics::Release(std::string_view outcome) {
  releases_->Add({{"outcome", std::string(outcome)}}).Increment();
}

void Metrics::SetPoolBytes(double bytes) { pool_bytes_->Set(bytes); }
void Metrics::PoolRebuild() { pool_rebuilds_->Increment(); }
void Metrics::PoolEvicted() { pool_evictions_->Increment(); }
void Metrics::SetCachedJobs(double n, double bytes) {
  cached_jobs_->Set(n);
  cached_job_bytes_->Set(bytes);
}

void Metrics::Shed(std::string_view reason) {
  shed_->Add({{"reason", std::string(reason)}}).Increment();
}
void Metrics::SetOpenStreams(size_t n) { open_streams_->Set(static_cast<double>(n)); }

void Metrics::SetSamplePoolBackend(std::string_view backend) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [name, g] : backend_gauges_) g->Set(0);
  auto [it, fresh] = backend_gauges_.try_emplace(std::string(backend), nullptr);
  if (fresh) it->second = &backend_info_->Add({{"backend", std::string(backend)}});
  it->second->Set(1);
}

void Metrics::StoreCommit(double seconds, size_t batches) {
  commit_seconds_->Observe(seconds);
  commit_batches_->Observe(static_cast<double>(batches));
}

void Metrics::JobEpsilonSpent(const std::string& job, double epsilon) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = job_gauges_.find(job);
  if (it == job_gauges_.end()) {
    if (static_cast<int>(job_gauges_.size()) >= options_.max_job_series) {
      job_series_dropped_->Increment();
      return;
    }
    it = job_gauges_.emplace(job, &job_epsilon_->Add({{"job", job}})).first;
  }
  it->second->Set(epsilon);
}

void Metrics::JobEpsilon(const std::string& job, double spent, double budget) {
  JobEpsilonSpent(job, spent);
  std::lock_guard<std::mutex> lock(mu_);
  if (job_gauges_.find(job) == job_gauges_.end()) return;  // beyond the cap (counted above)
  auto [it, fresh] = job_budget_gauges_.try_emplace(job, JobBudgetGauges{nullptr, nullptr});
  if (fresh) {
    it->second.budget = &job_budget_->Add({{"job", job}});
    it->second.ratio = &job_ratio_->Add({{"job", job}});
  }
  it->second.budget->Set(budget);
  // A zero budget admits nothing: any spend is "all of it".
  it->second.ratio->Set(budget > 0 ? spent / budget : 1.0);
}

void Metrics::Refusal(std::string_view reason) {
  refusals_->Add({{"reason", std::string(reason)}}).Increment();
}

void Metrics::SetReady(bool ready) { ready_->Set(ready ? 1 : 0); }

std::string Metrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace dpledger::server
