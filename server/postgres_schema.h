// Schema versions and forward migrations of the PostgreSQL store, like sqlite_schema.h:
// version N is reached by applying migrations 1..N in order, each in one transaction with
// the schema_version update (PostgreSQL DDL is transactional), so a failure mid-migration
// leaves the previous version intact. Replicas starting together take a transaction-level
// advisory lock, so exactly one of them migrates and the others then see the result.
#pragma once

#include <libpq-fe.h>

#include "absl/status/statusor.h"

namespace dpledger::server::pg {

// The newest schema version this binary writes.
inline constexpr int kPostgresSchemaVersion = 1;

// Migrates up to target_version; FAILED_PRECONDITION when the database is newer than
// target_version (written by a newer server). Returns the resulting version.
absl::StatusOr<int> Migrate(PGconn* conn, int target_version);

}  // namespace dpledger::server::pg
