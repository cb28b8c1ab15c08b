#include "server/sqlite_schema.h"

#include <array>
#include <string_view>

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "server/store_mark.h"
#include "server/ledger_types.h"
#include "server/renyi_order.h"
#include "server/sqlite_util.h"

namespace dpledger::server::sqlite {
namespace {

// The order stored for a legacy mixed job whose budget leaves no Renyi budget at any order
// (it admits nothing more either way).
constexpr double kMaxRdpOrderForNone = 2;

// Migration 4's data step (issue 10: declared vs adaptive schedules). Jobs created before
// schedules existed were admitted by the natural filter, which is sound only for mechanisms
// fixed in advance. A job whose ledger repeats one mechanism is consistent with that: it
// becomes `declared` with the implicit plan (its ledger is a prefix of "the first mechanism,
// repeated"), and keeps its accountant. A job whose ledger mixes mechanisms may have chosen
// them from outputs, so it becomes `adaptive` under the Renyi filter at an order chosen from
// its budget alone: if its past fits that filter's budget, the whole run is one the filter
// could have admitted and its guarantee covers it; if not, it admits nothing more. An `evr`
// job with a mixed ledger cannot turn adaptive (evr needs a declared schedule): its
// admission stops, as after a rejected verification.
absl::Status ClassifyLegacySchedules(sqlite3* db) {
  struct Legacy {
    std::string tenant, job_id, accountant;
    double epsilon, delta;
  };
  std::vector<Legacy> jobs;
  {
    Stmt q(db, "SELECT tenant, job_id, accountant, budget_epsilon, budget_delta FROM jobs "
               "WHERE schedule = 0");
    if (!q.status().ok()) return q.status();
    int rc;
    while ((rc = q.Step()) == SQLITE_ROW) {
      jobs.push_back({q.Text(0), q.Text(1), q.Text(2), q.Real(3), q.Real(4)});
    }
    if (rc != SQLITE_DONE) return Error(db, rc, "read legacy jobs");
  }
  for (const Legacy& j : jobs) {
    std::optional<core::Mechanism> first;
    bool mixed = false;
    Stmt u(db, "SELECT seq, steps FROM updates WHERE tenant = ? AND job_id = ? ORDER BY seq");
    if (!u.status().ok()) return u.status();
    u.Bind(1, j.tenant).Bind(2, j.job_id);
    int rc = SQLITE_ROW;
    while (!mixed && (rc = u.Step()) == SQLITE_ROW) {
      absl::StatusOr<std::vector<core::MechanismEvent>> steps = ParseCanonicalSteps(u.Text(1));
      if (!steps.ok()) {
        return absl::DataLossError(absl::StrFormat(
            "job '%s/%s' seq %d: stored steps unreadable: %s", j.tenant, j.job_id, u.Int(0),
            std::string(steps.status().message())));
      }
      for (const core::MechanismEvent& e : *steps) {
        if (!first) first = e.mechanism;
        mixed |= !(e.mechanism == *first);
      }
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Error(db, rc, "read legacy ledger");
    Stmt w(db, "UPDATE jobs SET schedule = ?, admission = ?, accountant = ?, rdp_order = ?, "
               "evr_state = CASE WHEN ? THEN 2 ELSE evr_state END, "
               "evr_note = CASE WHEN ? THEN ? ELSE evr_note END "
               "WHERE tenant = ? AND job_id = ?");
    const bool evr = j.accountant == "evr";
    Schedule schedule = Schedule::kDeclared;
    AdmissionKind admission = evr ? AdmissionKind::kEvr : AdmissionKind::kNatural;
    std::string accountant = j.accountant;
    double order = 0;
    if (mixed && !evr) {
      schedule = Schedule::kAdaptive;
      admission = AdmissionKind::kRenyi;
      accountant = "renyi";
      // A budget too small for every order keeps the job but admits nothing more.
      order = ChooseRenyiOrder(j.epsilon, j.delta, std::nullopt).value_or(kMaxRdpOrderForNone);
    }
    const int stop = mixed && evr ? 1 : 0;
    w.Bind(1, static_cast<int>(schedule)).Bind(2, static_cast<int>(admission))
        .Bind(3, accountant).Bind(4, order).Bind(5, stop).Bind(6, stop)
        .Bind(7, std::string_view("schema migration 4: the ledger mixes mechanisms, so its "
                                  "schedule was not declared in advance, which evr admission "
                                  "needs"))
        .Bind(8, j.tenant).Bind(9, j.job_id);
    if (absl::Status s = w.Run("classify legacy job"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Migration 5's data step (issue 11: the tamper-evident ledger, ledger_chain.h). Rows
// written before the chain existed are chained as they stand: they are trusted at migration
// time (start-up checked them just before), so the chain proves nothing about edits made
// before this migration, only about every change after it. Also gives the store its
// identity (store_mark.h).
absl::Status ChainExistingRows(sqlite3* db) {
  std::vector<JobRow> jobs;
  {
    Stmt q(db, "SELECT tenant, job_id, budget_epsilon, budget_delta, neighbouring, accountant, "
               "mc_seed, mc_num_samples, create_time_ms, schedule, admission, plan, rdp_order "
               "FROM jobs ORDER BY tenant, job_id");
    if (!q.status().ok()) return q.status();
    int rc;
    while ((rc = q.Step()) == SQLITE_ROW) {
      JobRow j;
      j.key = {q.Text(0), q.Text(1)};
      j.budget_epsilon = q.Real(2);
      j.budget_delta = q.Real(3);
      j.neighbouring = static_cast<Neighbouring>(q.Int(4));
      j.accountant = q.Text(5);
      j.mc_seed = static_cast<uint64_t>(q.Int(6));
      j.mc_num_samples = q.Int(7);
      j.create_time_ms = q.Int(8);
      j.schedule = static_cast<Schedule>(q.Int(9));
      j.admission = static_cast<AdmissionKind>(q.Int(10));
      j.plan = q.Text(11);
      j.rdp_order = q.Real(12);
      jobs.push_back(std::move(j));
    }
    if (rc != SQLITE_DONE) return Error(db, rc, "read jobs");
  }
  for (const JobRow& j : jobs) {
    std::vector<std::string> heads = {ChainGenesis(j)};  // heads[seq]
    std::vector<UpdateRow> rows;
    {
      Stmt u(db, "SELECT seq, steps, spent_lower, spent_estimate, spent_upper, guarantee, "
                 "failure_probability, num_steps_after, commit_time_ms FROM updates "
                 "WHERE tenant = ? AND job_id = ? ORDER BY seq");
      if (!u.status().ok()) return u.status();
      u.Bind(1, j.key.tenant).Bind(2, j.key.job_id);
      int rc;
      while ((rc = u.Step()) == SQLITE_ROW) {
        UpdateRow r{j.key, u.Int(0), u.Text(1),
                    core::EpsilonBound{u.Real(2), u.Real(3), u.Real(4),
                                       static_cast<core::Guarantee>(u.Int(5)), u.Real(6)},
                    u.Int(7), u.Int(8), ""};
        if (r.seq != static_cast<int64_t>(heads.size())) {
          return absl::DataLossError(absl::StrFormat("job '%s' seq %d follows seq %d",
                                                     JobKeyString(j.key), r.seq,
                                                     heads.size() - 1));
        }
        heads.push_back(ChainUpdate(heads.back(), r));
      }
      if (rc != SQLITE_DONE) return Error(db, rc, "read updates");
    }
    for (size_t seq = 1; seq < heads.size(); ++seq) {
      Stmt w(db, "UPDATE updates SET chain = ? WHERE tenant = ? AND job_id = ? AND seq = ?");
      w.Bind(1, heads[seq]).Bind(2, j.key.tenant).Bind(3, j.key.job_id)
          .Bind(4, static_cast<int64_t>(seq));
      if (absl::Status s = w.Run("chain update"); !s.ok()) return s;
    }
    std::vector<std::pair<int64_t, ReleaseRow>> releases;
    {
      Stmt r(db, "SELECT rowid, release_id, request_id, epsilon, delta, verifier, "
                 "payload_sha256, ledger_seq, num_steps, create_time_ms FROM releases "
                 "WHERE tenant = ? AND job_id = ? ORDER BY create_time_ms, rowid");
      if (!r.status().ok()) return r.status();
      r.Bind(1, j.key.tenant).Bind(2, j.key.job_id);
      int rc;
      while ((rc = r.Step()) == SQLITE_ROW) {
        ReleaseRow x;
        x.release_id = r.Text(1);
        x.request_id = r.Text(2);
        x.epsilon = r.Real(3);
        x.delta = r.Real(4);
        x.verifier = r.Text(5);
        x.payload_sha256 = r.Text(6);
        x.ledger_seq = r.Int(7);
        x.num_steps = r.Int(8);
        x.create_time_ms = r.Int(9);
        releases.emplace_back(r.Int(0), std::move(x));
      }
      if (rc != SQLITE_DONE) return Error(db, rc, "read releases");
    }
    std::string prev = heads[0];
    for (const auto& [rowid, x] : releases) {
      if (x.ledger_seq < 0 || x.ledger_seq >= static_cast<int64_t>(heads.size())) {
        return absl::DataLossError(absl::StrFormat(
            "job '%s': release '%s' covers seq %d beyond the ledger", JobKeyString(j.key),
            x.release_id, x.ledger_seq));
      }
      prev = ChainRelease(prev, heads[x.ledger_seq], x);
      Stmt w(db, "UPDATE releases SET chain = ? WHERE rowid = ?");
      w.Bind(1, prev).Bind(2, rowid);
      if (absl::Status s = w.Run("chain release"); !s.ok()) return s;
    }
  }
  Stmt id(db, "INSERT OR REPLACE INTO meta (key, value) VALUES ('store_id', ?)");
  id.Bind(1, NewStoreId());
  return id.Run("store identity");
}

struct Migration {
  std::string_view sql;
  absl::Status (*then)(sqlite3*) = nullptr;  // a data step in the same transaction
};

// Never edit a shipped migration: add a new one.
constexpr std::array<Migration, 5> kMigrations = {{
    // 1: the ledger.
    {R"sql(
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version (version) VALUES (0);
CREATE TABLE jobs (
  tenant TEXT NOT NULL,
  job_id TEXT NOT NULL,
  budget_epsilon REAL NOT NULL,
  budget_delta REAL NOT NULL,
  neighbouring INTEGER NOT NULL,
  accountant TEXT NOT NULL,
  mc_seed INTEGER NOT NULL,
  mc_num_samples INTEGER NOT NULL,
  state INTEGER NOT NULL,
  create_time_ms INTEGER NOT NULL,
  close_time_ms INTEGER NOT NULL,
  PRIMARY KEY (tenant, job_id)
) WITHOUT ROWID;
CREATE TABLE updates (
  tenant TEXT NOT NULL,
  job_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  steps TEXT NOT NULL,
  spent_lower REAL NOT NULL,
  spent_estimate REAL NOT NULL,
  spent_upper REAL NOT NULL,
  guarantee INTEGER NOT NULL,
  failure_probability REAL NOT NULL,
  num_steps_after INTEGER NOT NULL,
  commit_time_ms INTEGER NOT NULL,
  PRIMARY KEY (tenant, job_id, seq)
) WITHOUT ROWID;
CREATE TABLE releases (
  release_id TEXT PRIMARY KEY NOT NULL,
  tenant TEXT NOT NULL,
  job_id TEXT NOT NULL,
  request_id TEXT NOT NULL,
  epsilon REAL NOT NULL,
  delta REAL NOT NULL,
  delta_est REAL NOT NULL,
  tau REAL NOT NULL,
  rho REAL NOT NULL,
  guarantee INTEGER NOT NULL,
  failure_probability REAL NOT NULL,
  verifier TEXT NOT NULL,
  fallback INTEGER NOT NULL,
  num_samples INTEGER NOT NULL,
  seconds REAL NOT NULL,
  backend TEXT NOT NULL,
  seed INTEGER NOT NULL,
  delta_hat REAL NOT NULL,
  threshold REAL NOT NULL,
  note TEXT NOT NULL,
  payload_sha256 TEXT NOT NULL,
  payload BLOB NOT NULL,
  ledger_seq INTEGER NOT NULL,
  num_steps INTEGER NOT NULL,
  create_time_ms INTEGER NOT NULL
);
CREATE UNIQUE INDEX releases_by_request ON releases (tenant, request_id) WHERE request_id != '';
)sql"},
    // 2: releases listed per job; a meta table for the store's identity.
    {R"sql(
CREATE INDEX releases_by_job ON releases (tenant, job_id, create_time_ms);
CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;
INSERT INTO meta (key, value) VALUES ('created_by', 'dpledgerd');
)sql"},
    // 3: "evr" jobs' admission state (ledger_types.h EvrState).
    {R"sql(
ALTER TABLE jobs ADD COLUMN evr_state INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN evr_note TEXT NOT NULL DEFAULT '';
)sql"},
    // 4: schedules and admission policies (ledger_types.h Schedule, AdmissionKind); 0 marks
    // a job from before them, classified by ClassifyLegacySchedules.
    {R"sql(
ALTER TABLE jobs ADD COLUMN schedule INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN admission INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN plan TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN rdp_order REAL NOT NULL DEFAULT 0;
)sql",
     ClassifyLegacySchedules},
    // 5: the ledger hash chain (ledger_chain.h) and the store's identity (store_mark.h).
    {R"sql(
ALTER TABLE updates ADD COLUMN chain TEXT NOT NULL DEFAULT '';
ALTER TABLE releases ADD COLUMN chain TEXT NOT NULL DEFAULT '';
)sql",
     ChainExistingRows},
}};

}  // namespace

absl::StatusOr<int> ReadSchemaVersion(sqlite3* db) {
  Stmt exists(db, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='schema_version'");
  if (!exists.status().ok()) return exists.status();
  if (exists.Step() != SQLITE_ROW) return Error(db, sqlite3_errcode(db), "read sqlite_master");
  if (exists.Int(0) == 0) return 0;
  Stmt v(db, "SELECT version FROM schema_version");
  if (!v.status().ok()) return v.status();
  const int rc = v.Step();
  if (rc != SQLITE_ROW) {
    return absl::DataLossError("sqlite: table schema_version has no row");
  }
  return static_cast<int>(v.Int(0));
}

absl::StatusOr<int> Migrate(sqlite3* db, int target_version) {
  if (target_version < 0 || target_version > static_cast<int>(kMigrations.size())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("target_version must be in [0, %d], got %d", kMigrations.size(),
                        target_version));
  }
  absl::StatusOr<int> version = ReadSchemaVersion(db);
  if (!version.ok()) return version.status();
  if (*version > target_version) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "database schema version %d is newer than this server's %d; upgrade dpledgerd",
        *version, target_version));
  }
  for (int v = *version + 1; v <= target_version; ++v) {
    if (absl::Status s = Exec(db, "BEGIN IMMEDIATE"); !s.ok()) return s;
    absl::Status s = Exec(db, kMigrations[v - 1].sql);
    if (s.ok() && kMigrations[v - 1].then) s = kMigrations[v - 1].then(db);
    if (s.ok()) s = Exec(db, absl::StrFormat("UPDATE schema_version SET version = %d", v));
    if (s.ok()) s = Exec(db, "COMMIT");
    if (!s.ok()) {
      (void)Exec(db, "ROLLBACK");
      return absl::Status(s.code(), absl::StrFormat("migration to schema version %d: %s", v,
                                                    std::string(s.message())));
    }
  }
  return target_version;
}

}  // namespace dpledger::server::sqlite
