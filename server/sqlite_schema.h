// Schema versions and forward migrations of the SQLite store. Version N is reached by
// applying migrations 1..N in order, each in its own transaction together with the
// schema_version update, so a crash mid-migration leaves the previous version intact.
#pragma once

#include "absl/status/statusor.h"

struct sqlite3;

namespace dpledger::server::sqlite {

// The version stored in schema_version, 0 for an empty database.
absl::StatusOr<int> ReadSchemaVersion(sqlite3* db);

// Migrates up to target_version; FAILED_PRECONDITION when the database is newer than
// target_version (written by a newer server). Returns the resulting version.
absl::StatusOr<int> Migrate(sqlite3* db, int target_version);

}  // namespace dpledger::server::sqlite
