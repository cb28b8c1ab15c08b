// Small RAII helpers over the SQLite C API for sqlite_store.cc and sqlite_schema.cc.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace dpledger::server::sqlite {

// Maps an SQLite result code to a status: damage is DATA_LOSS, a full disk (or a short
// write, which the unix VFS reports as SQLITE_FULL) RESOURCE_EXHAUSTED, I/O and locking
// problems UNAVAILABLE (a retry may succeed), everything else INTERNAL.
inline absl::Status Error(sqlite3* db, int rc, std::string_view what) {
  const std::string msg = absl::StrFormat("sqlite %s: %s (code %d)", std::string(what),
                                          db ? sqlite3_errmsg(db) : sqlite3_errstr(rc), rc);
  switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(msg);
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(msg);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_PROTOCOL:
    case SQLITE_READONLY:
      return absl::UnavailableError(msg);
    case SQLITE_CONSTRAINT:
      return absl::AlreadyExistsError(msg);
    default:
      return absl::InternalError(msg);
  }
}

inline absl::Status Exec(sqlite3* db, std::string_view sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db, std::string(sql).c_str(), nullptr, nullptr, &err);
  if (err) sqlite3_free(err);
  if (rc != SQLITE_OK) return Error(db, rc, absl::StrFormat("exec '%s'", std::string(sql.substr(0, 60))));
  return absl::OkStatus();
}

// A prepared statement. Bind with 1-based indices; Step returns SQLITE_ROW / SQLITE_DONE or
// an error code.
class Stmt {
 public:
  // A null `db` (a store whose reopen failed) gives a statement whose status() is
  // UNAVAILABLE; binding and stepping it are harmless no-ops that return SQLITE_MISUSE.
  Stmt(sqlite3* db, std::string_view sql) : db_(db) {
    rc_ = db == nullptr ? SQLITE_CANTOPEN
                        : sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()),
                                             &stmt_, nullptr);
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  absl::Status status() const {
    if (db_ == nullptr) {
      return absl::UnavailableError(
          "sqlite: the store has no open connection (its reopen after an I/O error failed; "
          "it retries at the next commit or health check)");
    }
    return rc_ == SQLITE_OK ? absl::OkStatus() : Error(db_, rc_, "prepare");
  }
  Stmt& Bind(int i, std::string_view v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& BindBlob(int i, std::string_view v) {
    sqlite3_bind_blob(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Stmt& Bind(int i, int v) { return Bind(i, static_cast<int64_t>(v)); }
  Stmt& Bind(int i, uint64_t v) { return Bind(i, static_cast<int64_t>(v)); }  // bit pattern
  Stmt& Bind(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  int Step() { return sqlite3_step(stmt_); }
  // Runs a statement that returns no rows.
  absl::Status Run(std::string_view what) {
    if (rc_ != SQLITE_OK) return status();
    const int rc = Step();
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) return Error(db_, rc, what);
    return absl::OkStatus();
  }

  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Real(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string Text(int col) const {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(stmt_, col))
             : std::string();
  }
  std::string Blob(int col) const {
    const void* p = sqlite3_column_blob(stmt_, col);
    return p ? std::string(static_cast<const char*>(p), sqlite3_column_bytes(stmt_, col))
             : std::string();
  }
  sqlite3* db() const { return db_; }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

}  // namespace dpledger::server::sqlite
