#include "server/ledger_service.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "spdlog/spdlog.h"

namespace dpledger::server {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr int kLoadPage = 10000;
constexpr std::string_view kPageTokenPrefix = "after:";

}  // namespace

absl::Status ValidateJobId(std::string_view job_id) {
  bool ok = !job_id.empty() && job_id.size() <= 128;
  for (char c : job_id) {
    ok &= absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
          c == ':' || c == '-';
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job_id must be 1..128 characters of [A-Za-z0-9._:-], got '%s'",
        std::string(job_id.substr(0, 140))));
  }
  return absl::OkStatus();
}

absl::StatusOr<Ack> PendingAck::Wait() const {
  if (ticket_) {
    if (absl::Status s = ticket_->Wait(); !s.ok()) {
      return absl::UnavailableError(absl::StrFormat(
          "seq %d: the ledger write failed and nothing was acknowledged (%s); retry with the "
          "same seq",
          ack_.seq, std::string(s.message())));
    }
  }
  return ack_;
}

LedgerService::LedgerService(Store* store, LedgerOptions options, Metrics* metrics)
    : store_(store),
      options_(std::move(options)),
      metrics_(metrics),
      committer_(
          store, options_.committer,
          [metrics](double seconds, size_t batches, bool ok) {
            if (metrics) metrics->StoreCommit(seconds, batches);
            if (!ok) spdlog::warn("store commit failed batches={}", batches);
          },
          [this](const JobKey& key) { OnPoisoned(key); }),
      pools_(static_cast<size_t>(std::max<int64_t>(0, options_.max_pool_bytes)), metrics) {}

LedgerService::~LedgerService() { Shutdown(); }

void LedgerService::Shutdown() { committer_.Stop(); }

void LedgerService::OnPoisoned(const JobKey& key) {
  spdlog::warn("job={} a commit failed; its cached state will be rebuilt from the store",
               JobKeyString(key));
  std::lock_guard<std::mutex> lock(cache_mu_);
  auto it = cache_.find(key);
  if (it != cache_.end()) it->second->stale = true;
}

absl::Status LedgerService::WaitTail(CommitTicketPtr tail) {
  if (!tail) return absl::OkStatus();
  if (absl::Status s = tail->Wait(); !s.ok()) {
    return absl::UnavailableError(absl::StrFormat(
        "a pending ledger write of this job failed (%s); retry", std::string(s.message())));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<core::Accountant>> LedgerService::NewAccountant(
    const JobRow& row, std::string_view name) const {
  core::AccountantOptions opts = options_.accountant_options;
  opts.mc.seed = row.mc_seed;
  if (row.mc_num_samples > 0) opts.mc.num_samples = row.mc_num_samples;
  return core::CreateAccountant(name, opts);
}

absl::Status LedgerService::LoadLocked(JobEntry& entry, const JobKey& key) {
  absl::StatusOr<std::optional<JobRow>> row = store_->GetJob(key);
  if (!row.ok()) return row.status();
  if (!row->has_value()) {
    return absl::NotFoundError(absl::StrFormat("job '%s' not found", key.job_id));
  }
  // An evr job's entry accountant only holds the ledger (ledger_service.h "Admission").
  const bool evr = (*row)->accountant == kEvrAdmission;
  absl::StatusOr<std::unique_ptr<core::Accountant>> acc =
      NewAccountant(**row, evr ? "mc" : (*row)->accountant);
  if (!acc.ok()) return acc.status();
  std::deque<RecentUpdate> recent;
  int64_t last_seq = 0, num_steps = 0;
  for (;;) {
    absl::StatusOr<std::vector<UpdateRow>> page = store_->ListUpdates(key, last_seq, kLoadPage);
    if (!page.ok()) return page.status();
    for (UpdateRow& u : *page) {
      if (u.seq != last_seq + 1) {
        return absl::DataLossError(absl::StrFormat(
            "job '%s': ledger has seq %d after seq %d", JobKeyString(key), u.seq, last_seq));
      }
      absl::StatusOr<std::vector<core::MechanismEvent>> steps = ParseCanonicalSteps(u.steps);
      if (!steps.ok()) {
        return absl::DataLossError(absl::StrFormat("job '%s' seq %d: stored steps unreadable: %s",
                                                   JobKeyString(key), u.seq,
                                                   std::string(steps.status().message())));
      }
      for (const core::MechanismEvent& e : *steps) {
        absl::Status s = (*acc)->Compose(e);
        if (!s.ok()) {
          return absl::Status(
              s.code() == absl::StatusCode::kUnimplemented ? s.code()
                                                           : absl::StatusCode::kDataLoss,
              absl::StrFormat("job '%s' seq %d cannot be replayed: %s", JobKeyString(key),
                              u.seq, std::string(s.message())));
        }
        num_steps += e.count;
      }
      last_seq = u.seq;
      recent.push_back({std::move(u)});
      if (static_cast<int>(recent.size()) > options_.recent_updates_window) recent.pop_front();
    }
    if (static_cast<int>(page->size()) < kLoadPage) break;
  }
  // An evr job's bound is the verified statement stored with its last admitted update.
  absl::StatusOr<core::EpsilonBound> spent =
      !evr              ? (*acc)->EpsilonForDelta((*row)->budget_delta)
      : recent.empty()  ? core::EpsilonBound{0, 0, 0, core::Guarantee::kCertified, 0}
                        : recent.back().row.spent;
  if (!spent.ok()) {
    return absl::Status(spent.status().code(),
                        absl::StrFormat("job '%s': spent epsilon cannot be recomputed: %s",
                                        JobKeyString(key), std::string(spent.status().message())));
  }
  absl::StatusOr<int64_t> releases = store_->CountReleases(key);
  if (!releases.ok()) return releases.status();
  if (!recent.empty() && recent.back().row.num_steps_after != num_steps) {
    return absl::DataLossError(absl::StrFormat(
        "job '%s': last ack says %d steps, the ledger holds %d", JobKeyString(key),
        recent.back().row.num_steps_after, num_steps));
  }
  if ((*row)->evr_state == EvrState::kVerifying) {
    spdlog::warn("job={} an EVR admission verification was interrupted; it counts as a "
                 "rejection and the job admits no more steps", JobKeyString(key));
  }
  entry.row = **row;
  entry.accountant = std::move(*acc);
  entry.spent = *spent;
  entry.last_seq = last_seq;
  entry.num_steps = num_steps;
  entry.num_releases = *releases;
  entry.recent = std::move(recent);
  entry.tail = nullptr;
  entry.loaded = true;
  entry.stale = false;
  committer_.Unpoison(key);
  if (metrics_) {
    metrics_->PoolRebuild();
    if (last_seq > 0) metrics_->JobEpsilonSpent(JobKeyString(key), spent->upper);
  }
  return absl::OkStatus();
}

absl::StatusOr<LedgerService::EntryPtr> LedgerService::Acquire(
    const JobKey& key, std::unique_lock<std::mutex>& lock) {
  EntryPtr e;
  {
    std::lock_guard<std::mutex> g(cache_mu_);
    EntryPtr& slot = cache_[key];
    if (!slot) slot = std::make_shared<JobEntry>();
    e = slot;
    e->last_used = ++tick_;
  }
  lock = std::unique_lock<std::mutex>(e->mu);
  if (!e->loaded || e->stale) {
    absl::Status s = LoadLocked(*e, key);
    if (!s.ok()) {
      e->loaded = false;
      lock.unlock();
      std::lock_guard<std::mutex> g(cache_mu_);
      auto it = cache_.find(key);
      if (it != cache_.end() && it->second == e && e.use_count() == 2) {
        cached_bytes_ -= e->bytes;
        cache_.erase(it);
      }
      return s;
    }
    UpdateBytesLocked(*e);
    EvictIfNeeded();
  }
  return e;
}

bool LedgerService::UpdateBytesLocked(JobEntry& entry) {
  const size_t now = entry.accountant ? entry.accountant->CacheBytes() : 0;
  std::lock_guard<std::mutex> g(cache_mu_);
  if (now == entry.bytes) return false;
  cached_bytes_ = cached_bytes_ - entry.bytes + now;
  entry.bytes = now;
  return true;
}

// Over either cap (jobs, bytes), drops the least recently used idle entries (no holder, no
// pending commit) down to 90% of both; a dropped job is rebuilt from the store on its next
// use. Entries in use are skipped, so the caps can be exceeded while they are busy.
void LedgerService::EvictIfNeeded() {
  std::lock_guard<std::mutex> g(cache_mu_);
  const size_t max_bytes = static_cast<size_t>(std::max<int64_t>(0, options_.max_cached_bytes));
  auto publish = [&] {
    if (metrics_) {
      metrics_->SetCachedJobs(static_cast<double>(cache_.size()),
                              static_cast<double>(cached_bytes_));
    }
  };
  publish();
  if (static_cast<int>(cache_.size()) <= options_.max_cached_jobs &&
      cached_bytes_ <= max_bytes) {
    return;
  }
  std::vector<std::pair<uint64_t, JobKey>> order;
  for (const auto& [k, e] : cache_) order.emplace_back(e->last_used, k);
  std::sort(order.begin(), order.end());
  const size_t target = static_cast<size_t>(options_.max_cached_jobs * 0.9);
  const size_t target_bytes = static_cast<size_t>(static_cast<double>(max_bytes) * 0.9);
  for (const auto& [tick, k] : order) {
    if (cache_.size() <= target && cached_bytes_ <= target_bytes) break;
    auto it = cache_.find(k);
    EntryPtr& e = it->second;
    if (e.use_count() != 1) continue;
    std::unique_lock<std::mutex> l(e->mu, std::try_to_lock);
    if (!l.owns_lock() || (e->tail && !e->tail->done())) continue;
    l.unlock();
    cached_bytes_ -= e->bytes;
    cache_.erase(it);
  }
  publish();
}

JobInfo LedgerService::InfoLocked(const JobEntry& e) const {
  JobInfo info;
  info.row = e.row;
  info.num_steps = e.num_steps;
  info.last_seq = e.last_seq;
  info.num_releases = e.num_releases;
  info.spent = e.spent;
  return info;
}

absl::StatusOr<JobInfo> LedgerService::CreateJob(const Caller& caller, const JobSpec& spec) {
  absl::StatusOr<std::string> tenant = Authorize(caller, spec.tenant, Role::kWriter);
  if (!tenant.ok()) return tenant.status();
  if (absl::Status s = ValidateJobId(spec.job_id); !s.ok()) return s;
  if (!(std::isfinite(spec.budget_epsilon) && spec.budget_epsilon > 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "budget.epsilon must be a finite number > 0, got %g", spec.budget_epsilon));
  }
  if (!(spec.budget_delta >= core::kMinQueryDelta && spec.budget_delta < 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "budget.delta must be in [%g, 1), got %g", core::kMinQueryDelta, spec.budget_delta));
  }
  if (spec.neighbouring != Neighbouring::kAddRemove) {
    return absl::UnimplementedError(
        "neighbouring must be ADD_REMOVE: only the add/remove relation is supported");
  }
  if (spec.mc_num_samples < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "mc.num_samples must be >= 0, got %d", spec.mc_num_samples));
  }
  JobRow row;
  row.key = {*tenant, spec.job_id};
  row.budget_epsilon = spec.budget_epsilon;
  row.budget_delta = spec.budget_delta;
  row.neighbouring = spec.neighbouring;
  row.accountant = spec.accountant.empty() ? options_.default_accountant : spec.accountant;
  row.mc_seed = spec.mc_seed;
  row.mc_num_samples = spec.mc_num_samples;
  row.state = JobState::kOpen;
  row.create_time_ms = NowMs();
  // Only certified or EVR-verified upper bounds admit steps: an estimate-only accountant
  // would accept the job and then refuse every step.
  if (!core::CanCertify(row.accountant)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "accountant '%s' gives estimates only and cannot admit steps; choose pld, rdp, "
        "analytic, spa, edgeworth, or evr for EVR-verified admission (query '%s' through "
        "Spent, verify through Release)",
        row.accountant, row.accountant));
  }
  // The admitting accountant must exist in this build and accept the job's options.
  const bool evr = row.accountant == kEvrAdmission;
  if (absl::StatusOr<std::unique_ptr<core::Accountant>> acc =
          NewAccountant(row, evr ? "mc" : row.accountant);
      !acc.ok()) {
    return absl::Status(acc.status().code(),
                        absl::StrFormat("accountant '%s': %s%s", row.accountant,
                                        std::string(acc.status().message()),
                                        acc.status().code() == absl::StatusCode::kInvalidArgument
                                            ? " (or evr: EVR-verified admission)"
                                            : ""));
  }

  std::lock_guard<std::mutex> create_lock(create_mu_);
  absl::StatusOr<std::optional<JobRow>> existing = store_->GetJob(row.key);
  if (!existing.ok()) return existing.status();
  if (existing->has_value()) {
    return absl::AlreadyExistsError(absl::StrFormat("job '%s' already exists in tenant '%s'",
                                                    spec.job_id, *tenant));
  }
  absl::StatusOr<int64_t> count = store_->CountJobs(*tenant);
  if (!count.ok()) return count.status();
  if (*count >= options_.max_jobs_per_tenant) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "tenant '%s' has %d jobs, the limit (max_jobs_per_tenant)", *tenant, *count));
  }
  WriteBatch batch;
  batch.new_jobs.push_back(row);
  if (absl::Status s = committer_.Submit(std::move(batch))->Wait(); !s.ok()) {
    // The create failed; its key was poisoned, but there is no state to rebuild.
    committer_.Unpoison(row.key);
    return s;
  }
  spdlog::info("job={} created accountant={} budget_epsilon={} budget_delta={}",
               JobKeyString(row.key), row.accountant, row.budget_epsilon, row.budget_delta);
  JobInfo info;
  info.row = row;
  info.spent = core::EpsilonBound{0, 0, 0, core::Guarantee::kCertified, 0};
  return info;
}

absl::StatusOr<JobInfo> LedgerService::GetJob(const Caller& caller, std::string_view tenant,
                                              std::string_view job_id) {
  absl::StatusOr<std::string> t = Authorize(caller, tenant, Role::kReader);
  if (!t.ok()) return t.status();
  if (absl::Status s = ValidateJobId(job_id); !s.ok()) return s;
  std::unique_lock<std::mutex> lock;
  absl::StatusOr<EntryPtr> e = Acquire({*t, std::string(job_id)}, lock);
  if (!e.ok()) return e.status();
  JobInfo info = InfoLocked(**e);
  CommitTicketPtr tail = (*e)->tail;
  lock.unlock();
  if (absl::Status s = WaitTail(tail); !s.ok()) return s;
  return info;
}

absl::StatusOr<JobPage> LedgerService::ListJobs(const Caller& caller, std::string_view tenant,
                                                int page_size, std::string_view page_token) {
  absl::StatusOr<std::string> t = Authorize(caller, tenant, Role::kReader);
  if (!t.ok()) return t.status();
  if (page_size < 0 || page_size > 1000) {
    return absl::InvalidArgumentError(
        absl::StrFormat("page_size must be in [0, 1000], got %d", page_size));
  }
  if (page_size == 0) page_size = 100;
  std::string after;
  if (!page_token.empty()) {
    if (page_token.substr(0, kPageTokenPrefix.size()) != kPageTokenPrefix) {
      return absl::InvalidArgumentError("page_token is not one this server issued");
    }
    after = std::string(page_token.substr(kPageTokenPrefix.size()));
  }
  absl::StatusOr<std::vector<JobRow>> rows = store_->ListJobs(*t, after, page_size + 1);
  if (!rows.ok()) return rows.status();
  JobPage page;
  const bool more = static_cast<int>(rows->size()) > page_size;
  if (more) rows->pop_back();
  for (const JobRow& r : *rows) {
    absl::StatusOr<JobInfo> info = GetJob(caller, *t, r.key.job_id);
    if (!info.ok()) return info.status();
    page.jobs.push_back(std::move(*info));
  }
  if (more) page.next_page_token = absl::StrFormat("%s%s", kPageTokenPrefix, rows->back().key.job_id);
  return page;
}

absl::StatusOr<JobInfo> LedgerService::CloseJob(const Caller& caller, std::string_view tenant,
                                                std::string_view job_id) {
  absl::StatusOr<std::string> t = Authorize(caller, tenant, Role::kWriter);
  if (!t.ok()) return t.status();
  if (absl::Status s = ValidateJobId(job_id); !s.ok()) return s;
  std::unique_lock<std::mutex> lock;
  absl::StatusOr<EntryPtr> e = Acquire({*t, std::string(job_id)}, lock);
  if (!e.ok()) return e.status();
  JobEntry& entry = **e;
  if (entry.row.state == JobState::kOpen) {
    WriteBatch batch;
    const int64_t now = NowMs();
    batch.state_changes.push_back({entry.row.key, JobState::kClosed, now});
    CommitTicketPtr ticket = committer_.Submit(std::move(batch));
    // Closing is rare: hold the job while it commits so no step slips in behind it.
    if (absl::Status s = ticket->Wait(); !s.ok()) return s;
    entry.tail = ticket;
    entry.row.state = JobState::kClosed;
    entry.row.close_time_ms = now;
    spdlog::info("job={} closed num_steps={}", JobKeyString(entry.row.key), entry.num_steps);
  }
  JobInfo info = InfoLocked(entry);
  CommitTicketPtr tail = entry.tail;
  lock.unlock();
  if (absl::Status s = WaitTail(tail); !s.ok()) return s;
  return info;
}

namespace {

absl::Status ValidateUpdate(const UpdateInput& u, int index, const LedgerOptions& options) {
  const std::string field = index >= 0 ? absl::StrFormat("updates[%d]", index) : "update";
  if (u.seq < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s.seq must be >= 1, got %d", field, u.seq));
  }
  if (u.steps.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s.steps must not be empty", field));
  }
  if (static_cast<int>(u.steps.size()) > options.max_steps_per_update) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s.steps has %d entries, more than max_steps_per_update %d", field, u.steps.size(),
        options.max_steps_per_update));
  }
  for (size_t j = 0; j < u.steps.size(); ++j) {
    const int64_t c = u.steps[j].count;
    if (c < 1 || c > core::kMaxEventCount) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s.steps[%d].count must be in [1, %d], got %d", field, j, core::kMaxEventCount, c));
    }
  }
  return absl::OkStatus();
}

int64_t TotalCount(const UpdateInput& u) {
  int64_t n = 0;
  for (const core::MechanismEvent& e : u.steps) n += e.count;
  return n;
}

}  // namespace

absl::StatusOr<std::vector<Ack>> LedgerService::AppendSteps(const Caller& caller,
                                                            std::string_view tenant,
                                                            std::string_view job_id,
                                                            const std::vector<UpdateInput>& updates) {
  absl::StatusOr<std::string> t = Authorize(caller, tenant, Role::kWriter);
  if (!t.ok()) return t.status();
  if (absl::Status s = ValidateJobId(job_id); !s.ok()) return s;
  if (updates.empty()) return absl::InvalidArgumentError("updates must not be empty");
  if (static_cast<int>(updates.size()) > options_.max_updates_per_request) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "updates has %d entries, more than max_updates_per_request %d", updates.size(),
        options_.max_updates_per_request));
  }
  std::vector<Item> items(updates.size());
  for (size_t i = 0; i < updates.size(); ++i) {
    if (absl::Status s = ValidateUpdate(updates[i], static_cast<int>(i), options_); !s.ok()) {
      return s;
    }
    items[i].update = updates[i];
    items[i].canonical = CanonicalSteps(updates[i].steps);
    items[i].total_count = TotalCount(updates[i]);
  }
  std::vector<PendingAck> pending;
  {
    std::unique_lock<std::mutex> lock;
    absl::StatusOr<EntryPtr> e = Acquire({*t, std::string(job_id)}, lock);
    if (!e.ok()) return e.status();
    absl::StatusOr<std::vector<PendingAck>> p = AdmitLocked(**e, items, false, nullptr);
    if (!p.ok()) return p.status();
    pending = std::move(*p);
  }
  std::vector<Ack> acks;
  for (const PendingAck& p : pending) {
    absl::StatusOr<Ack> a = p.Wait();
    if (!a.ok()) return a.status();
    acks.push_back(std::move(*a));
  }
  return acks;
}

absl::StatusOr<std::unique_ptr<LedgerService::StepStream>> LedgerService::OpenStream(
    const Caller& caller, std::string_view tenant, std::string_view job_id) {
  absl::StatusOr<std::string> t = Authorize(caller, tenant, Role::kWriter);
  if (!t.ok()) return t.status();
  if (absl::Status s = ValidateJobId(job_id); !s.ok()) return s;
  JobKey key{*t, std::string(job_id)};
  {
    std::unique_lock<std::mutex> lock;
    absl::StatusOr<EntryPtr> e = Acquire(key, lock);
    if (!e.ok()) return e.status();
  }
  return std::unique_ptr<StepStream>(new StepStream(this, std::move(key)));
}

std::vector<PendingAck> LedgerService::StepStream::Submit(
    std::vector<absl::StatusOr<UpdateInput>> inputs) {
  LedgerService& svc = *service_;
  std::vector<Item> items(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].ok()) {
      items[i].input_error = inputs[i].status();
      continue;
    }
    items[i].update = std::move(*inputs[i]);
    items[i].input_error = ValidateUpdate(items[i].update, -1, svc.options_);
    items[i].canonical = CanonicalSteps(items[i].update.steps);
    items[i].total_count = TotalCount(items[i].update);
  }
  auto all_failed = [&](const absl::Status& s) {
    std::vector<PendingAck> out;
    for (Item& it : items) {
      Ack a;
      a.seq = it.update.seq;
      a.error = s;
      out.emplace_back(a, nullptr);
    }
    return out;
  };
  std::unique_lock<std::mutex> lock;
  absl::StatusOr<EntryPtr> e = svc.Acquire(key_, lock);
  if (!e.ok()) return all_failed(e.status());
  absl::StatusOr<std::vector<PendingAck>> p = svc.AdmitLocked(**e, items, true, &refused_seq_);
  if (!p.ok()) return all_failed(p.status());
  return std::move(*p);
}

absl::StatusOr<LedgerPage> LedgerService::GetLedger(const Caller& caller, std::string_view tenant,
                                                    std::string_view job_id, int64_t after_seq,
                                                    int page_size) {
  absl::StatusOr<std::string> t = Authorize(caller, tenant, Role::kReader);
  if (!t.ok()) return t.status();
  if (absl::Status s = ValidateJobId(job_id); !s.ok()) return s;
  if (after_seq < 0) {
    return absl::InvalidArgumentError(absl::StrFormat("after_seq must be >= 0, got %d", after_seq));
  }
  if (page_size < 0 || page_size > 10000) {
    return absl::InvalidArgumentError(
        absl::StrFormat("page_size must be in [0, 10000], got %d", page_size));
  }
  if (page_size == 0) page_size = 1000;
  const JobKey key{*t, std::string(job_id)};
  absl::StatusOr<std::optional<JobRow>> row = store_->GetJob(key);
  if (!row.ok()) return row.status();
  if (!row->has_value()) return absl::NotFoundError(absl::StrFormat("job '%s' not found", job_id));
  // The store holds exactly what is durable, which is what a ledger read may show.
  absl::StatusOr<std::vector<UpdateRow>> rows = store_->ListUpdates(key, after_seq, page_size + 1);
  if (!rows.ok()) return rows.status();
  LedgerPage page;
  page.more = static_cast<int>(rows->size()) > page_size;
  if (page.more) rows->pop_back();
  page.entries = std::move(*rows);
  return page;
}

absl::StatusOr<SpentAnswer> LedgerService::Spent(const Caller& caller, std::string_view tenant,
                                                 std::string_view job_id,
                                                 const SpentQuery& query) {
  absl::StatusOr<std::string> t = Authorize(caller, tenant, Role::kReader);
  if (!t.ok()) return t.status();
  if (absl::Status s = ValidateJobId(job_id); !s.ok()) return s;
  if (query.delta.has_value() == query.epsilon.has_value()) {
    return absl::InvalidArgumentError("exactly one of delta and epsilon must be given");
  }
  if (query.delta && !(*query.delta >= core::kMinQueryDelta && *query.delta < 1)) {
    return absl::InvalidArgumentError(absl::StrFormat("delta must be in [%g, 1), got %g",
                                                      core::kMinQueryDelta, *query.delta));
  }
  if (query.epsilon && !(std::isfinite(*query.epsilon) && *query.epsilon >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("epsilon must be a finite number >= 0, got %g", *query.epsilon));
  }
  if (!(std::isfinite(query.max_seconds) && query.max_seconds >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_seconds must be a finite number >= 0, got %g", query.max_seconds));
  }
  SpentAnswer ans;
  std::unique_ptr<core::Accountant> acc;
  bool other = false;  // another accountant than the admitting one answers
  std::vector<core::MechanismEvent> ledger;  // its ledger
  CommitTicketPtr tail;
  JobRow row;
  const JobKey key{*t, std::string(job_id)};
  {
    std::unique_lock<std::mutex> lock;
    absl::StatusOr<EntryPtr> e = Acquire(key, lock);
    if (!e.ok()) return e.status();
    JobEntry& entry = **e;
    row = entry.row;
    ans.accountant = query.accountant.empty() ? entry.row.accountant : query.accountant;
    // An evr job knows its verified statement at the budget delta only; other queries of
    // its own accountant are the MC accountant's estimates (the "mc" of "mc/evr").
    if (ans.accountant == kEvrAdmission && entry.row.accountant == kEvrAdmission &&
        query.delta != entry.row.budget_delta) {
      ans.accountant = "mc";
    }
    ans.num_steps = entry.num_steps;
    ans.last_seq = entry.last_seq;
    tail = entry.tail;
    if (ans.accountant == entry.row.accountant && query.delta == entry.row.budget_delta) {
      ans.epsilon = entry.spent;  // the cached answer: identical to a recomputation
    } else if (ans.accountant == entry.row.accountant) {
      acc = entry.accountant->Clone();
    } else {
      other = true;
      const auto events = entry.accountant->events();
      ledger.assign(events.begin(), events.end());
    }
  }
  // Compute outside the job lock: a slow query must not hold up admission. Another
  // accountant is the cached one (MC sample pools) brought up to date, else a new one.
  if (other) {
    acc = pools_.Take(key, ans.accountant);
    if (acc == nullptr || !ExtendToLedger(*acc, ledger)) {
      absl::StatusOr<std::unique_ptr<core::Accountant>> fresh = NewAccountant(row, ans.accountant);
      if (!fresh.ok()) return fresh.status();
      for (const core::MechanismEvent& ev : ledger) {
        if (absl::Status s = (*fresh)->Compose(ev); !s.ok()) return s;
      }
      acc = std::move(*fresh);
    }
  }
  // The tighter of the server's cap and the caller's deadline (0 means none for both).
  const double server_cap = options_.accountant_options.mc.max_seconds;
  const double cap = server_cap > 0 && query.max_seconds > 0 ? std::min(server_cap, query.max_seconds)
                                                             : std::max(server_cap, query.max_seconds);
  if (acc) acc->SetQueryTimeCap(cap);
  absl::Status status;
  if (acc && query.delta) {
    absl::StatusOr<core::EpsilonBound> b = acc->EpsilonForDelta(*query.delta);
    if (b.ok()) ans.epsilon = *b;
    status = b.status();
  } else if (acc) {
    absl::StatusOr<core::DeltaBound> b = acc->DeltaForEpsilon(*query.epsilon);
    if (b.ok()) ans.delta = *b;
    status = b.status();
  }
  if (acc) ans.diagnostics = acc->LastDiagnostics();
  if (other) pools_.Put(key, std::move(acc));
  if (!status.ok()) return status;
  if (absl::Status s = WaitTail(tail); !s.ok()) return s;
  return ans;
}

absl::StatusOr<RemainingAnswer> LedgerService::Remaining(const Caller& caller,
                                                         std::string_view tenant,
                                                         std::string_view job_id,
                                                         const core::Mechanism& mechanism) {
  absl::StatusOr<std::string> t = Authorize(caller, tenant, Role::kReader);
  if (!t.ok()) return t.status();
  if (absl::Status s = ValidateJobId(job_id); !s.ok()) return s;
  std::unique_ptr<core::Accountant> base;
  RemainingAnswer ans;
  CommitTicketPtr tail;
  {
    std::unique_lock<std::mutex> lock;
    absl::StatusOr<EntryPtr> e = Acquire({*t, std::string(job_id)}, lock);
    if (!e.ok()) return e.status();
    if ((*e)->row.accountant == kEvrAdmission) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "job '%s' admits with evr: each admission is a fresh Monte Carlo verification, so "
          "how many more steps fit cannot be certified in advance; ask Spent (e.g. with "
          "accountant pld) where the ledger stands",
          job_id));
    }
    base = (*e)->accountant->Clone();
    ans.spent = (*e)->spent;
    ans.budget_epsilon = (*e)->row.budget_epsilon;
    ans.budget_delta = (*e)->row.budget_delta;
    ans.accountant = (*e)->row.accountant;
    tail = (*e)->tail;
  }
  ans.spent_at_max = ans.spent;
  // fits(n): n more applications keep the certified bound within budget. Exponential then
  // binary search: O(log n) accountant queries.
  absl::Status hard_error;
  auto probe = [&](int64_t n) -> std::optional<core::EpsilonBound> {
    std::unique_ptr<core::Accountant> acc = base->Clone();
    if (absl::Status s = acc->Compose(mechanism, n); !s.ok()) {
      hard_error = s;
      return std::nullopt;
    }
    absl::StatusOr<core::EpsilonBound> b = acc->EpsilonForDelta(ans.budget_delta);
    if (!b.ok() || b->guarantee == core::Guarantee::kEstimate ||
        !(b->upper <= ans.budget_epsilon)) {
      return std::nullopt;
    }
    return *b;
  };
  int64_t lo = 0, hi = 1;
  std::optional<core::EpsilonBound> best;
  while (hi <= core::kMaxEventCount) {
    std::optional<core::EpsilonBound> b = probe(hi);
    if (!hard_error.ok()) return hard_error;
    if (!b) break;
    lo = hi;
    best = b;
    hi *= 2;
  }
  if (hi > core::kMaxEventCount) hi = core::kMaxEventCount + 1;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    std::optional<core::EpsilonBound> b = probe(mid);
    if (b) {
      lo = mid;
      best = b;
    } else {
      hi = mid;
    }
  }
  ans.max_additional_steps = lo;
  if (best) ans.spent_at_max = *best;
  if (absl::Status s = WaitTail(tail); !s.ok()) return s;
  return ans;
}

}  // namespace dpledger::server
