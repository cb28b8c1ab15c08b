// Small helpers over libpq for postgres_store.cc and postgres_schema.cc: text-format
// parameters, result ownership, and SQLSTATE -> status mapping.
#pragma once

#include <libpq-fe.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace dpledger::server::pg {

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

// Parameters of one statement, all sent as text except those added with Bytes (binary).
class Params {
 public:
  Params& Add(std::string_view v) {
    values_.emplace_back(v);
    formats_.push_back(0);
    return *this;
  }
  Params& Add(const char* v) { return Add(std::string_view(v)); }
  Params& Add(int64_t v) { return Add(std::string_view(absl::StrFormat("%d", v))); }
  Params& Add(int v) { return Add(static_cast<int64_t>(v)); }
  Params& Add(uint64_t v) { return Add(static_cast<int64_t>(v)); }  // stored as its bit pattern
  // %.17g round-trips every finite double; PostgreSQL spells the others Infinity / NaN.
  Params& Add(double v) {
    if (std::isnan(v)) return Add("NaN");
    if (std::isinf(v)) return Add(v > 0 ? "Infinity" : "-Infinity");
    return Add(std::string_view(absl::StrFormat("%.17g", v)));
  }
  Params& Bytes(std::string_view v) {
    values_.emplace_back(v);
    formats_.push_back(1);
    return *this;
  }
  int size() const { return static_cast<int>(values_.size()); }

  // Pointer arrays for PQexecParams; valid until the next Add.
  const char* const* values() {
    ptrs_.clear();
    lengths_.clear();
    for (const std::string& v : values_) {
      ptrs_.push_back(v.data());
      lengths_.push_back(static_cast<int>(v.size()));
    }
    return ptrs_.data();
  }
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const { return formats_.data(); }

 private:
  std::vector<std::string> values_;
  std::vector<int> formats_;
  std::vector<const char*> ptrs_;
  std::vector<int> lengths_;
};

// True when the connection is gone (server stopped, network cut): the pool drops it.
inline bool ConnectionLost(PGconn* conn) { return conn == nullptr || PQstatus(conn) != CONNECTION_OK; }

// Maps a failed result (or a lost connection) to a status. SQLSTATE classes: 08 connection,
// 57P0x shutdown, 53 resources, 40 rollback (serialisation, deadlock): UNAVAILABLE, a retry
// may succeed; 23505 unique violation: ALREADY_EXISTS; XX001/XX002 damaged data: DATA_LOSS;
// the rest INTERNAL.
inline absl::Status Error(PGconn* conn, const PGresult* res, std::string_view what) {
  const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  const std::string sqlstate = state ? state : "";
  std::string msg = res ? PQresultErrorMessage(res) : "";
  if (msg.empty() && conn) msg = PQerrorMessage(conn);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  if (const char* detail = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL) : nullptr) {
    msg = absl::StrFormat("%s (%s)", msg, detail);
  }
  const std::string text = absl::StrFormat("postgres %s: %s%s", std::string(what), msg,
                                           sqlstate.empty() ? "" : " [" + sqlstate + "]");
  if (ConnectionLost(conn) || sqlstate.empty() || sqlstate.rfind("08", 0) == 0 ||
      sqlstate.rfind("57P", 0) == 0 || sqlstate.rfind("53", 0) == 0 ||
      sqlstate.rfind("40", 0) == 0) {
    return absl::UnavailableError(text);
  }
  if (sqlstate == "23505") return absl::AlreadyExistsError(text);
  if (sqlstate == "XX001" || sqlstate == "XX002") return absl::DataLossError(text);
  return absl::InternalError(text);
}

// Runs one statement; OK for PGRES_COMMAND_OK / PGRES_TUPLES_OK.
inline absl::Status Exec(PGconn* conn, std::string_view sql, Params* params, std::string_view what,
                         Result* out = nullptr) {
  const std::string text(sql);
  PGresult* raw = nullptr;
  if (params) {
    const char* const* values = params->values();  // fills lengths() too
    raw = PQexecParams(conn, text.c_str(), params->size(), nullptr, values, params->lengths(),
                       params->formats(), /*resultFormat=*/0);
  } else {
    raw = PQexec(conn, text.c_str());
  }
  Result res(raw);
  const ExecStatusType st = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return Error(conn, res.get(), what);
  if (out) *out = std::move(res);
  return absl::OkStatus();
}
inline absl::Status Exec(PGconn* conn, std::string_view sql, std::string_view what) {
  return Exec(conn, sql, nullptr, what);
}

// One statement of a pipeline.
struct Statement {
  std::string sql;
  Params params;
  std::string_view what;  // for error messages
};

// Sends `statements` in one libpq pipeline (one round trip) and collects their results in
// order. Returns the first statement's error; the server skips the statements after it (and
// an explicit transaction is then aborted: the caller rolls back). Statements execute in
// order, each with its own snapshot (READ COMMITTED), as if sent one by one.
inline absl::Status RunPipeline(PGconn* conn, std::vector<Statement>& statements,
                                std::vector<Result>* results) {
  if (PQenterPipelineMode(conn) != 1) return Error(conn, nullptr, "enter pipeline mode");
  for (Statement& st : statements) {
    const char* const* values = st.params.values();
    if (PQsendQueryParams(conn, st.sql.c_str(), st.params.size(), nullptr, values,
                          st.params.lengths(), st.params.formats(), /*resultFormat=*/0) != 1) {
      return Error(conn, nullptr, st.what);
    }
  }
  if (PQpipelineSync(conn) != 1) return Error(conn, nullptr, "pipeline sync");
  absl::Status first_error;
  results->clear();
  for (Statement& st : statements) {
    Result res(PQgetResult(conn));
    if (!res) return Error(conn, nullptr, st.what);  // connection lost
    const ExecStatusType status = PQresultStatus(res.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK && first_error.ok() &&
        status != PGRES_PIPELINE_ABORTED) {
      first_error = Error(conn, res.get(), st.what);
    }
    results->push_back(std::move(res));
    while (PGresult* extra = PQgetResult(conn)) PQclear(extra);  // the NULL ending this query
  }
  Result sync(PQgetResult(conn));
  if (!sync || PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC) {
    return Error(conn, sync.get(), "pipeline sync");
  }
  if (PQexitPipelineMode(conn) != 1) return Error(conn, nullptr, "exit pipeline mode");
  return first_error;
}

// Text-format column readers.
inline std::string Text(const PGresult* r, int row, int col) {
  return std::string(PQgetvalue(r, row, col), PQgetlength(r, row, col));
}
inline int64_t Int(const PGresult* r, int row, int col) {
  return std::strtoll(PQgetvalue(r, row, col), nullptr, 10);
}
inline double Real(const PGresult* r, int row, int col) {
  return std::strtod(PQgetvalue(r, row, col), nullptr);  // also Infinity, NaN
}
inline bool Bool(const PGresult* r, int row, int col) { return PQgetvalue(r, row, col)[0] == 't'; }
// bytea in text format ("\x..." hex).
inline std::string Bytea(const PGresult* r, int row, int col) {
  size_t n = 0;
  unsigned char* p = PQunescapeBytea(reinterpret_cast<const unsigned char*>(PQgetvalue(r, row, col)), &n);
  if (p == nullptr) return {};
  std::string out(reinterpret_cast<const char*>(p), n);
  PQfreemem(p);
  return out;
}

}  // namespace dpledger::server::pg
