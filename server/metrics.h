// Prometheus metrics of dpledgerd (issue 4 "Operations"). Served by prometheus-cpp's
// Exposer on its own port (server.cc); tests read them back through Serialize().
//
//   dpledger_rpc_total{method,code}            counter
//   dpledger_rpc_seconds{method}               histogram
//   dpledger_steps_admitted_total              counter (sum of step counts)
//   dpledger_steps_refused_total               counter
//   dpledger_updates_total{outcome}            counter: admitted|refused|duplicate|error
//   dpledger_verifications_total{purpose,outcome}  counter: purpose release|admission (evr
//                                              jobs); outcome accepted|rejected|refused|error
//   dpledger_releases_total{outcome}           counter: recorded|duplicate|failed
//   dpledger_pool_bytes                        gauge (MC sample pools held)
//   dpledger_pool_rebuilds_total               counter (accountant state rebuilt from the ledger)
//   dpledger_pool_evictions_total              counter (MC accountants dropped at the byte cap)
//   dpledger_sample_pool_backend{backend}      gauge = 1 (info)
//   dpledger_store_commit_seconds              histogram (one group commit)
//   dpledger_store_commit_batches              histogram (batches per group commit)
//   dpledger_job_epsilon_spent{job}            gauge, at most max_job_series jobs labelled;
//   dpledger_job_epsilon_budget{job}           gauge, the job's epsilon budget (same jobs)
//   dpledger_job_epsilon_spent_ratio{job}      gauge, spent / budget (same jobs; 1 = exhausted)
//   dpledger_job_series_dropped_total          counter of jobs beyond the cap
//   dpledger_refusals_total{reason}            counter of refused updates by RefusalKind:
//                                              budget|plan|uncertified|stopped|not_attempted|
//                                              unverified
//   dpledger_ready                             gauge: 1 while health is SERVING (store reachable)
//   dpledger_cached_jobs                       gauge
//   dpledger_cached_job_bytes                  gauge (the heap bytes they hold, job_cache.h)
//   dpledger_shed_total{reason}                counter: requests refused or streams ended by a
//                                              limit (issue 11): streams_server|streams_tenant|
//                                              rate_tenant|stream_idle|
//                                              stream_stalled|shutdown
//   dpledger_open_streams                      gauge (StreamSteps calls open)
//
// Thread safety: every method is thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace dpledger::server {

struct MetricsOptions {
  int max_job_series = 1000;  // cap on dpledger_job_epsilon_spent label values
};

class Metrics {
 public:
  explicit Metrics(MetricsOptions options = {});
  ~Metrics();

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  void Rpc(std::string_view method, std::string_view code, double seconds);
  void Update(std::string_view outcome, int64_t steps);  // steps admitted or refused
  void Verification(std::string_view purpose, std::string_view outcome);
  void Release(std::string_view outcome);
  void SetPoolBytes(double bytes);
  void PoolRebuild();
  void PoolEvicted();
  void SetSamplePoolBackend(std::string_view backend);
  void StoreCommit(double seconds, size_t batches);
  void JobEpsilonSpent(const std::string& job, double epsilon);
  // Spent (upper bound) next to the budget and their ratio; the same cap as JobEpsilonSpent.
  void JobEpsilon(const std::string& job, double spent, double budget);
  void Refusal(std::string_view reason);  // one refused update, by RefusalKind name
  void SetReady(bool ready);
  void SetCachedJobs(double n, double bytes);
  void Shed(std::string_view reason);
  void SetOpenStreams(size_t n);

  // The text exposition format of everything registered (tests, debugging).
  std::string Serialize() const;

 private:
  MetricsOptions options_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* rpc_total_;
  prometheus::Family<prometheus::Histogram>* rpc_seconds_;
  prometheus::Counter* steps_admitted_;
  prometheus::Counter* steps_refused_;
  prometheus::Family<prometheus::Counter>* updates_;
  prometheus::Family<prometheus::Counter>* verifications_;
  prometheus::Family<prometheus::Counter>* releases_;
  prometheus::Gauge* pool_bytes_;
  prometheus::Counter* pool_rebuilds_;
  prometheus::Counter* pool_evictions_;
  prometheus::Family<prometheus::Gauge>* backend_info_;
  prometheus::Histogram* commit_seconds_;
  prometheus::Histogram* commit_batches_;
  prometheus::Family<prometheus::Gauge>* job_epsilon_;
  prometheus::Counter* job_series_dropped_;
  prometheus::Family<prometheus::Gauge>* job_budget_;
  prometheus::Family<prometheus::Gauge>* job_ratio_;
  prometheus::Family<prometheus::Counter>* refusals_;
  prometheus::Gauge* ready_;
  prometheus::Gauge* cached_jobs_;
  prometheus::Gauge* cached_job_bytes_;
  prometheus::Family<prometheus::Counter>* shed_;
  prometheus::Gauge* open_streams_;

  std::mutex mu_;
  std::map<std::string, prometheus::Gauge*> job_gauges_;
  struct JobBudgetGauges {
    prometheus::Gauge* budget;
    prometheus::Gauge* ratio;
  };
  std::map<std::string, JobBudgetGauges> job_budget_gauges_;
  std::map<std::string, prometheus::Gauge*> backend_gauges_;
};

}  // namespace dpledger::server
