#include "server/ledger_service.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "core/accountants/rdp_mechanisms.h"
#include "core/mc/mc_accountant.h"
#include "core/registry/accountant_option_names.h"
#include "server/renyi_order.h"
#include "server/schedule_plan.h"
#include "spdlog/spdlog.h"

namespace dpledger::server {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

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
      // A full disk stays RESOURCE_EXHAUSTED (issue 16): the operator must free space.
      return absl::Status(
          s.code() == absl::StatusCode::kResourceExhausted ? s.code()
                                                           : absl::StatusCode::kUnavailable,
          absl::StrFormat("seq %d: the ledger write failed and nothing was acknowledged (%s); "
                          "retry with the same seq",
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
          [this](const JobKey& key) {
            spdlog::warn("job={} a commit failed; its cached state will be rebuilt from the "
                         "store",
                         JobKeyString(key));
            cache_.MarkStale(key);
          }),
      cache_(store, &committer_, metrics,
             JobCacheOptions{options_.max_cached_jobs, options_.max_cached_bytes,
                             options_.recent_updates_window},
             [this](const JobRow& row) { return PolicyOptionsFor(row); }),
      pools_(static_cast<size_t>(std::max<int64_t>(0, options_.max_pool_bytes)), metrics) {}

LedgerService::~LedgerService() { Shutdown(); }

void LedgerService::Shutdown() { committer_.Stop(); }

absl::Status LedgerService::WaitTail(CommitTicketPtr tail) {
  if (!tail) return absl::OkStatus();
  if (absl::Status s = tail->Wait(); !s.ok()) {
    return absl::UnavailableError(absl::StrFormat(
        "a pending ledger write of this job failed (%s); retry", std::string(s.message())));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<core::Accountant>> LedgerService::NewAccountant(
    const JobRow& row, std::string_view name, const core::PldOptions& pld) const {
  core::AccountantOptions opts = PolicyOptionsFor(row).accountant_options;
  opts.pld = pld;
  return core::CreateAccountant(name, opts);
}

PolicyOptions LedgerService::PolicyOptionsFor(const JobRow& row) const {
  PolicyOptions p;
  p.accountant_options = options_.accountant_options;
  p.accountant_options.mc.seed = row.mc_seed;
  if (row.mc_num_samples > 0) p.accountant_options.mc.num_samples = row.mc_num_samples;
  p.evr = options_.evr_admission;
  return p;
}

double LedgerService::QueryCap(std::string_view accountant, double caller_seconds) const {
  const double server_cap = accountant == "mc" ? options_.accountant_options.mc.max_seconds
                                               : options_.query_max_seconds;
  return server_cap > 0 && caller_seconds > 0 ? std::min(server_cap, caller_seconds)
                                              : std::max(server_cap, caller_seconds);
}

JobInfo LedgerService::InfoLocked(const JobEntry& e) const {
  JobInfo info;
  info.row = e.row;
  info.num_steps = e.num_steps;
  info.last_seq = e.last_seq;
  info.num_releases = e.num_releases;
  info.spent = e.spent();
  info.admission_guarantee = e.policy->guarantee();
  info.chain_head = e.chain_head;
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
  if (spec.mc_num_samples < 0 || spec.mc_num_samples > core::kMaxMcSamples) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "mc.num_samples must be in [0, %d], got %d", core::kMaxMcSamples, spec.mc_num_samples));
  }
  absl::StatusOr<JobRow> made = JobRowFromSpec(spec, *tenant);
  if (!made.ok()) return made.status();
  const JobRow& row = *made;

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
  spdlog::info("job={} created schedule={} admission={} accountant={} budget_epsilon={} "
               "budget_delta={}",
               JobKeyString(row.key), ScheduleName(row.schedule),
               AdmissionKindName(row.admission), row.accountant, row.budget_epsilon,
               row.budget_delta);
  JobInfo info;
  info.row = row;
  info.spent = core::EpsilonBound{0, 0, 0, core::Guarantee::kCertified, 0};
  info.admission_guarantee = AdmissionGuarantee(row);
  info.chain_head = ChainGenesis(row);
  return info;
}

absl::StatusOr<JobRow> LedgerService::JobRowFromSpec(const JobSpec& spec,
                                                     const std::string& tenant) const {
  JobRow row;
  row.key = {tenant, spec.job_id};
  row.budget_epsilon = spec.budget_epsilon;
  row.budget_delta = spec.budget_delta;
  row.neighbouring = spec.neighbouring;
  row.mc_seed = spec.mc_seed;
  row.mc_num_samples = spec.mc_num_samples;
  row.state = JobState::kOpen;
  row.create_time_ms = NowMs();
  row.schedule = spec.schedule;
  if (spec.schedule == Schedule::kAdaptive) {
    if (!spec.plan.empty()) {
      return absl::InvalidArgumentError(
          "plan must be empty with schedule ADAPTIVE: a plan declares the schedule");
    }
    if (spec.accountant == kEvrAdmission) {
      return absl::InvalidArgumentError(
          "accountant 'evr' needs a declared schedule: EVR admission verifies the realised "
          "ledger, a natural filter, which is not sound when mechanisms are chosen from "
          "earlier outputs; use --filter renyi or gdp for an adaptive job");
    }
    if (!spec.accountant.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "accountant must be empty with schedule ADAPTIVE (got '%s'): the filter admits; any "
          "accountant still answers Spent for the realised ledger",
          spec.accountant));
    }
    const std::string filter = spec.filter.empty() ? "renyi" : spec.filter;
    if (filter == "gdp") {
      row.admission = AdmissionKind::kGdp;
      if (spec.rdp_order != 0 || spec.expected) {
        return absl::InvalidArgumentError(
            "rdp_order and expected_step apply to filter renyi only, not gdp");
      }
    } else if (filter == "renyi") {
      row.admission = AdmissionKind::kRenyi;
      if (spec.rdp_order == 0) {
        absl::StatusOr<double> order =
            ChooseRenyiOrder(spec.budget_epsilon, spec.budget_delta, spec.expected);
        if (!order.ok()) return order.status();
        row.rdp_order = *order;
      } else if (!(spec.rdp_order >= core::kMinRdpOrder && spec.rdp_order <= core::kMaxRdpOrder)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "rdp_order must be 0 (chosen from the budget) or in [%g, %g], got %g",
            core::kMinRdpOrder, core::kMaxRdpOrder, spec.rdp_order));
      } else if (!(RenyiBudget(spec.rdp_order, spec.budget_epsilon, spec.budget_delta) > 0)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "rdp_order %g leaves no Renyi-DP budget for (epsilon %g, delta %g); choose another "
            "order or 0",
            spec.rdp_order, spec.budget_epsilon, spec.budget_delta));
      } else {
        row.rdp_order = spec.rdp_order;
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrFormat("filter must be renyi or gdp, got '%s'", spec.filter));
    }
    row.accountant = filter;
  } else {
    if (!spec.filter.empty() || spec.rdp_order != 0 || spec.expected) {
      return absl::InvalidArgumentError(
          "filter, rdp_order and expected_step apply to schedule ADAPTIVE only");
    }
    row.accountant = spec.accountant.empty() ? options_.default_accountant : spec.accountant;
    row.admission =
        row.accountant == kEvrAdmission ? AdmissionKind::kEvr : AdmissionKind::kNatural;
    // Only certified or EVR-verified upper bounds admit steps: an estimate-only accountant
    // would accept the job and then refuse every step.
    if (row.admission == AdmissionKind::kNatural && !core::CanCertify(row.accountant)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "accountant '%s' gives estimates only and cannot admit steps; choose pld, rdp, "
          "analytic, spa, edgeworth, or evr for EVR-verified admission (query '%s' through "
          "Spent, verify through Release)",
          row.accountant, row.accountant));
    }
    if (absl::StatusOr<SchedulePlan> plan = SchedulePlan::Create(spec.plan); !plan.ok()) {
      return plan.status();
    }
    row.plan = spec.plan.empty() ? "" : CanonicalSteps(spec.plan);
  }
  // The policy must exist in this build and accept the job's options, and its accountant
  // every mechanism of the plan.
  absl::StatusOr<std::unique_ptr<AdmissionPolicy>> policy =
      CreateAdmissionPolicy(row, PolicyOptionsFor(row), {}, std::nullopt);
  if (!policy.ok()) {
    return absl::Status(policy.status().code(),
                        absl::StrFormat("accountant '%s': %s%s", row.accountant,
                                        std::string(policy.status().message()),
                                        policy.status().code() == absl::StatusCode::kInvalidArgument
                                            ? " (or evr: EVR-verified admission)"
                                            : ""));
  }
  for (size_t i = 0; i < spec.plan.size(); ++i) {
    if (absl::Status s = (*policy)->ledger().Clone()->Compose(spec.plan[i].mechanism, 1);
        !s.ok()) {
      return absl::Status(s.code(), absl::StrFormat("plan[%d]: %s", i, std::string(s.message())));
    }
  }
  return row;
}

absl::StatusOr<JobInfo> LedgerService::GetJob(const Caller& caller, std::string_view tenant,
                                              std::string_view job_id) {
  absl::StatusOr<std::string> t = Authorize(caller, tenant, Role::kReader);
  if (!t.ok()) return t.status();
  if (absl::Status s = ValidateJobId(job_id); !s.ok()) return s;
  std::unique_lock<std::mutex> lock;
  absl::StatusOr<EntryPtr> e = cache_.Acquire({*t, std::string(job_id)}, lock);
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
  // From the store alone: listing must not compose ledgers (issue 11). The last update's
  // stored bound is the one its ack carried, which a cached entry holds too.
  for (const JobRow& r : *rows) {
    JobInfo info;
    info.row = r;
    info.admission_guarantee = AdmissionGuarantee(r);
    info.spent = core::EpsilonBound{0, 0, 0, core::Guarantee::kCertified, 0};
    info.chain_head = ChainGenesis(r);
    absl::StatusOr<std::optional<UpdateRow>> last = store_->LastUpdate(r.key);
    if (!last.ok()) return last.status();
    if (last->has_value()) {
      info.chain_head = (*last)->chain;
      info.last_seq = (*last)->seq;
      info.num_steps = (*last)->num_steps_after;
      info.spent = (*last)->spent;
    }
    absl::StatusOr<int64_t> releases = store_->CountReleases(r.key);
    if (!releases.ok()) return releases.status();
    info.num_releases = *releases;
    page.jobs.push_back(std::move(info));
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
  absl::StatusOr<EntryPtr> e = cache_.Acquire({*t, std::string(job_id)}, lock);
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
                                                            const std::vector<UpdateInput>& updates,
                                                            double max_seconds) {
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
    absl::StatusOr<EntryPtr> e = cache_.Acquire({*t, std::string(job_id)}, lock);
    if (!e.ok()) return e.status();
    absl::StatusOr<std::vector<PendingAck>> p =
        AdmitLocked(**e, items, false, nullptr, max_seconds);
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
    absl::StatusOr<EntryPtr> e = cache_.Acquire(key, lock);
    if (!e.ok()) return e.status();
  }
  return std::unique_ptr<StepStream>(new StepStream(this, std::move(key)));
}

std::vector<PendingAck> LedgerService::StepStream::Submit(
    std::vector<absl::StatusOr<UpdateInput>> inputs, double max_seconds) {
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
  absl::StatusOr<EntryPtr> e = svc.cache_.Acquire(key_, lock);
  if (!e.ok()) return all_failed(e.status());
  absl::StatusOr<std::vector<PendingAck>> p =
      svc.AdmitLocked(**e, items, true, &refused_seq_, max_seconds);
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
  // A precision of its own makes the answer a fresh PLD accountant's (never the cached one).
  core::PldOptions pld = options_.accountant_options.pld;
  if (query.pld_precision != 0) {
    if (absl::Status s = core::ApplyPldPrecision(query.pld_precision, "pld_precision", &pld);
        !s.ok()) {
      return s;
    }
  }
  SpentAnswer ans;
  std::unique_ptr<core::Accountant> acc;
  bool other = false;  // an accountant other than the policy's answers
  std::vector<core::MechanismEvent> ledger;  // its ledger
  CommitTicketPtr tail;
  JobRow row;
  const JobKey key{*t, std::string(job_id)};
  {
    std::unique_lock<std::mutex> lock;
    absl::StatusOr<EntryPtr> e = cache_.Acquire(key, lock);
    if (!e.ok()) return e.status();
    JobEntry& entry = **e;
    const AdmissionPolicy& policy = *entry.policy;
    row = entry.row;
    ans.admission_guarantee = policy.guarantee();
    ans.num_steps = entry.num_steps;
    ans.last_seq = entry.last_seq;
    tail = entry.tail;
    // The admission accountant is bounds-only (core::ForBoundsOnly): where that changes
    // the estimate, a query composes a fresh accountant with the service's options.
    const bool same = (query.accountant.empty() || query.accountant == row.accountant) &&
                      query.pld_precision == 0;
    const bool own =
        same && !core::BoundsOnlyChangesEstimate(row.accountant, options_.accountant_options);
    if (query.pld_precision != 0 && query.accountant != "pld" &&
        !(query.accountant.empty() && row.accountant == "pld")) {
      return absl::InvalidArgumentError("pld_precision applies only to accountant pld");
    }
    if (own && query.delta == row.budget_delta) {
      ans.accountant = row.accountant;
      ans.epsilon = policy.spent();  // the cached answer: identical to a recomputation
    } else if (own && policy.answering_accountant() == row.accountant) {
      ans.accountant = row.accountant;
      acc = policy.QueryAccountant();
    } else {
      // Another accountant's curve of the realised ledger (an evr job's own queries at other
      // targets are the MC accountant's estimates).
      ans.accountant = own                      ? std::string(policy.answering_accountant())
                       : query.accountant.empty() ? row.accountant
                                                  : query.accountant;
      ans.realised_curve = own || !same;  // not when re-composing the admission accountant
      other = true;
      const auto events = policy.ledger().events();
      ledger.assign(events.begin(), events.end());
    }
  }
  // Compute outside the job lock: a slow query must not hold up admission. Another
  // accountant is the cached one (MC sample pools) brought up to date, else a new one.
  std::optional<PoolCache::Lease> lease;  // gives the accountant back to the cache at return
  if (other) {
    if (query.pld_precision == 0) {  // a precision of its own is never the kept accountant
      lease.emplace(pools_.Borrow(key, ans.accountant));
      acc = std::move(lease->acc);
    }
    if (acc == nullptr || !ExtendToLedger(*acc, ledger)) {
      absl::StatusOr<std::unique_ptr<core::Accountant>> fresh =
          NewAccountant(row, ans.accountant, pld);
      if (!fresh.ok()) return fresh.status();
      // Composing a long ledger counts against the query's time too.
      (*fresh)->SetQueryTimeCap(QueryCap(ans.accountant, query.max_seconds));
      for (const core::MechanismEvent& ev : ledger) {
        if (absl::Status s = (*fresh)->Compose(ev); !s.ok()) return s;
      }
      acc = std::move(*fresh);
    }
  }
  if (acc) {
    acc->SetQueryTimeCap(QueryCap(acc->Name(), query.max_seconds));
  }
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
  if (lease) {
    lease->acc = std::move(acc);
    lease.reset();
  }
  if (!status.ok()) return status;
  if (absl::Status s = WaitTail(tail); !s.ok()) return s;
  return ans;
}

absl::StatusOr<RemainingAnswer> LedgerService::Remaining(const Caller& caller,
                                                         std::string_view tenant,
                                                         std::string_view job_id,
                                                         const core::Mechanism& mechanism,
                                                         double max_seconds) {
  absl::StatusOr<std::string> t = Authorize(caller, tenant, Role::kReader);
  if (!t.ok()) return t.status();
  if (absl::Status s = ValidateJobId(job_id); !s.ok()) return s;
  if (!(std::isfinite(max_seconds) && max_seconds >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_seconds must be a finite number >= 0, got %g", max_seconds));
  }
  std::unique_ptr<AdmissionPolicy> policy;
  CommitTicketPtr tail;
  {
    std::unique_lock<std::mutex> lock;
    absl::StatusOr<EntryPtr> e = cache_.Acquire({*t, std::string(job_id)}, lock);
    if (!e.ok()) return e.status();
    policy = (*e)->policy->Clone();  // searched outside the job lock
    tail = (*e)->tail;
  }
  absl::StatusOr<RemainingAnswer> ans =
      policy->Remaining(mechanism, QueryCap(policy->ledger().Name(), max_seconds));
  if (!ans.ok()) {
    return absl::Status(ans.status().code(), absl::StrFormat("job '%s': %s", job_id,
                                                             std::string(ans.status().message())));
  }
  if (absl::Status s = WaitTail(tail); !s.ok()) return s;
  return ans;
}

}  // namespace dpledger::server
