#include "server/postgres_schema.h"

#include <array>
#include <string_view>

#include "server/postgres_util.h"

namespace dpledger::server::pg {
namespace {

// Any constant works: it names the migration lock among the database's advisory locks.
constexpr int64_t kMigrationLockId = 0x64706c6467657231;  // "dpldger1"

// Never edit a shipped migration: add a new one. Version 1 holds what SQLite reached in its
// versions 1-3. Identifiers use the "C" collation so ordering (ListJobs paging) is byte
// order, as in SQLite.
constexpr std::array<std::string_view, 1> kMigrations = {
    R"sql(
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version (version) VALUES (0);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta (key, value) VALUES ('created_by', 'dpledgerd');
-- The store's identity (store_mark.h); the hash chain below is ledger_chain.h's.
INSERT INTO meta (key, value) VALUES ('store_id', md5(random()::text || clock_timestamp()::text));
CREATE TABLE jobs (
  tenant TEXT COLLATE "C" NOT NULL,
  job_id TEXT COLLATE "C" NOT NULL,
  budget_epsilon DOUBLE PRECISION NOT NULL,
  budget_delta DOUBLE PRECISION NOT NULL,
  neighbouring INTEGER NOT NULL,
  accountant TEXT NOT NULL,
  mc_seed BIGINT NOT NULL,
  mc_num_samples BIGINT NOT NULL,
  state INTEGER NOT NULL,
  create_time_ms BIGINT NOT NULL,
  close_time_ms BIGINT NOT NULL,
  evr_state INTEGER NOT NULL DEFAULT 0,
  evr_note TEXT NOT NULL DEFAULT '',
  schedule INTEGER NOT NULL DEFAULT 1,
  admission INTEGER NOT NULL DEFAULT 1,
  plan TEXT NOT NULL DEFAULT '',
  rdp_order DOUBLE PRECISION NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant, job_id)
);
-- The primary key is the last line of defence: no (tenant, job_id, seq) is admitted twice,
-- whatever the replicas do.
CREATE TABLE updates (
  tenant TEXT COLLATE "C" NOT NULL,
  job_id TEXT COLLATE "C" NOT NULL,
  seq BIGINT NOT NULL CHECK (seq > 0),
  steps TEXT NOT NULL,
  spent_lower DOUBLE PRECISION NOT NULL,
  spent_estimate DOUBLE PRECISION NOT NULL,
  spent_upper DOUBLE PRECISION NOT NULL,
  guarantee INTEGER NOT NULL,
  failure_probability DOUBLE PRECISION NOT NULL,
  num_steps_after BIGINT NOT NULL,
  commit_time_ms BIGINT NOT NULL,
  chain TEXT NOT NULL,
  PRIMARY KEY (tenant, job_id, seq),
  FOREIGN KEY (tenant, job_id) REFERENCES jobs (tenant, job_id)
);
CREATE TABLE releases (
  release_id TEXT PRIMARY KEY,
  tenant TEXT COLLATE "C" NOT NULL,
  job_id TEXT COLLATE "C" NOT NULL,
  request_id TEXT NOT NULL,
  epsilon DOUBLE PRECISION NOT NULL,
  delta DOUBLE PRECISION NOT NULL,
  delta_est DOUBLE PRECISION NOT NULL,
  tau DOUBLE PRECISION NOT NULL,
  rho DOUBLE PRECISION NOT NULL,
  guarantee INTEGER NOT NULL,
  failure_probability DOUBLE PRECISION NOT NULL,
  verifier TEXT NOT NULL,
  fallback BOOLEAN NOT NULL,
  num_samples BIGINT NOT NULL,
  seconds DOUBLE PRECISION NOT NULL,
  backend TEXT NOT NULL,
  seed BIGINT NOT NULL,
  delta_hat DOUBLE PRECISION NOT NULL,
  threshold DOUBLE PRECISION NOT NULL,
  note TEXT NOT NULL,
  payload_sha256 TEXT NOT NULL,
  payload BYTEA NOT NULL,
  ledger_seq BIGINT NOT NULL,
  num_steps BIGINT NOT NULL,
  create_time_ms BIGINT NOT NULL,
  chain TEXT NOT NULL,
  insert_order BIGINT GENERATED ALWAYS AS IDENTITY,  -- ties in create_time_ms
  FOREIGN KEY (tenant, job_id) REFERENCES jobs (tenant, job_id)
);
CREATE UNIQUE INDEX releases_by_request ON releases (tenant, request_id) WHERE request_id <> '';
CREATE INDEX releases_by_job ON releases (tenant, job_id, create_time_ms, insert_order);
)sql",
};

absl::StatusOr<int> ReadVersion(PGconn* conn) {
  Result r;
  if (absl::Status s = Exec(conn, "SELECT to_regclass('schema_version') IS NOT NULL", nullptr,
                            "read catalog", &r);
      !s.ok()) {
    return s;
  }
  if (!Bool(r.get(), 0, 0)) return 0;
  if (absl::Status s = Exec(conn, "SELECT version FROM schema_version", nullptr,
                            "read schema_version", &r);
      !s.ok()) {
    return s;
  }
  if (PQntuples(r.get()) != 1) {
    return absl::DataLossError("postgres: table schema_version must hold one row");
  }
  return static_cast<int>(Int(r.get(), 0, 0));
}

// One step under the migration lock: reads the version and applies migration `version+1`
// when it is below target. Returns the version reached.
absl::StatusOr<int> MigrateStep(PGconn* conn, int target_version) {
  if (absl::Status s = Exec(conn, "BEGIN", "begin migration"); !s.ok()) return s;
  auto fail = [&](absl::Status s) {
    (void)Exec(conn, "ROLLBACK", "rollback migration");
    return s;
  };
  Params lock;
  lock.Add(kMigrationLockId);
  if (absl::Status s = Exec(conn, "SELECT pg_advisory_xact_lock($1)", &lock, "migration lock");
      !s.ok()) {
    return fail(s);
  }
  absl::StatusOr<int> version = ReadVersion(conn);
  if (!version.ok()) return fail(version.status());
  if (*version > target_version) {
    return fail(absl::FailedPreconditionError(absl::StrFormat(
        "database schema version %d is newer than this server's %d; upgrade dpledgerd",
        *version, target_version)));
  }
  if (*version == target_version) {
    (void)Exec(conn, "ROLLBACK", "end migration");
    return *version;
  }
  const int v = *version + 1;
  absl::Status s = Exec(conn, kMigrations[v - 1], "migration");
  if (s.ok()) s = Exec(conn, absl::StrFormat("UPDATE schema_version SET version = %d", v), "migration");
  if (s.ok()) s = Exec(conn, "COMMIT", "commit migration");
  if (!s.ok()) {
    return fail(absl::Status(s.code(), absl::StrFormat("migration to schema version %d: %s", v,
                                                       std::string(s.message()))));
  }
  return v;
}

}  // namespace

absl::StatusOr<int> Migrate(PGconn* conn, int target_version) {
  if (target_version < 0 || target_version > static_cast<int>(kMigrations.size())) {
    return absl::InvalidArgumentError(absl::StrFormat("target_version must be in [0, %d], got %d",
                                                      kMigrations.size(), target_version));
  }
  for (;;) {
    absl::StatusOr<int> v = MigrateStep(conn, target_version);
    if (!v.ok() || *v == target_version) return v;
  }
}

}  // namespace dpledger::server::pg
