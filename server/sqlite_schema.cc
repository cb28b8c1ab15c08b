#include "server/sqlite_schema.h"

#include <array>
#include <string_view>

#include "server/sqlite_util.h"

namespace dpledger::server::sqlite {
namespace {

// Never edit a shipped migration: add a new one.
constexpr std::array<std::string_view, 3> kMigrations = {
    // 1: the ledger.
    R"sql(
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
)sql",
    // 2: releases listed per job; a meta table for the store's identity.
    R"sql(
CREATE INDEX releases_by_job ON releases (tenant, job_id, create_time_ms);
CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;
INSERT INTO meta (key, value) VALUES ('created_by', 'dpledgerd');
)sql",
    // 3: "evr" jobs' admission state (ledger_types.h EvrState).
    R"sql(
ALTER TABLE jobs ADD COLUMN evr_state INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN evr_note TEXT NOT NULL DEFAULT '';
)sql",
};

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
    absl::Status s = Exec(db, kMigrations[v - 1]);
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
