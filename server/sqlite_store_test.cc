// SQLite-specific behaviour: durability settings, persistence, migrations, corruption.
#include "server/renyi_order.h"
#include "server/sqlite_store.h"
#include "server/ledger_check.h"

#include <sqlite3.h>

#include <fstream>

#include "core/util/test_support.h"
#include "gtest/gtest.h"
#include "server/sqlite_util.h"
#include "server/test_util.h"

namespace dpledger::server {
namespace {

using ::dpledger::testing::IsOk;
using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

std::string Pragma(const std::string& path, const std::string& pragma) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, ("PRAGMA " + pragma).c_str(), -1, &st, nullptr);
  std::string out;
  if (sqlite3_step(st) == SQLITE_ROW) out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

// Issue 16: a full disk is RESOURCE_EXHAUSTED, other I/O and locking problems UNAVAILABLE.
TEST(SqliteError, MapsResultCodesToStatusCodes) {
  const struct {
    int rc;
    absl::StatusCode code;
  } kCases[] = {
      {SQLITE_FULL, absl::StatusCode::kResourceExhausted},
      {SQLITE_BUSY, absl::StatusCode::kUnavailable},
      {SQLITE_LOCKED, absl::StatusCode::kUnavailable},
      {SQLITE_IOERR_WRITE, absl::StatusCode::kUnavailable},
      {SQLITE_IOERR_FSYNC, absl::StatusCode::kUnavailable},
      {SQLITE_READONLY, absl::StatusCode::kUnavailable},
      {SQLITE_CORRUPT, absl::StatusCode::kDataLoss},
      {SQLITE_NOTADB, absl::StatusCode::kDataLoss},
      {SQLITE_CONSTRAINT_UNIQUE, absl::StatusCode::kAlreadyExists},
      {SQLITE_MISUSE, absl::StatusCode::kInternal},
  };
  for (const auto& c : kCases) {
    const absl::Status s = sqlite::Error(nullptr, c.rc, "commit");
    EXPECT_EQ(s.code(), c.code) << c.rc << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr("sqlite commit: "));
  }
  EXPECT_THAT(sqlite::Error(nullptr, SQLITE_FULL, "commit").message(), HasSubstr("full"));
}

TEST(SqliteStore, UsesWalAndTheCurrentSchemaVersion) {
  testing::TempDir dir;
  absl::StatusOr<std::unique_ptr<SqliteStore>> s = SqliteStore::Open({.path = dir.file("l.db")});
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ((*s)->schema_version(), kSqliteSchemaVersion);
  EXPECT_EQ(Pragma(dir.file("l.db"), "journal_mode"), "wal");  // persistent per database
}

TEST(SqliteStore, CommittedRowsSurviveReopening) {
  testing::TempDir dir;
  JobRow j;
  j.key = {"t", "a"};
  j.budget_epsilon = 1;
  j.budget_delta = 1e-6;
  j.accountant = "analytic";
  {
    absl::StatusOr<std::unique_ptr<SqliteStore>> s = SqliteStore::Open({.path = dir.file("l.db")});
    ASSERT_THAT(s, IsOk());
    WriteBatch b;
    b.new_jobs.push_back(j);
    ASSERT_THAT((*s)->Apply(b), IsOk());
  }
  absl::StatusOr<std::unique_ptr<SqliteStore>> s = SqliteStore::Open({.path = dir.file("l.db")});
  ASSERT_THAT(s, IsOk());
  EXPECT_TRUE((*s)->GetJob(j.key)->has_value());
}

// Issue 4 audit: a second dpledgerd on the same data_dir used to start.
TEST(SqliteStore, ASecondOpenOfTheSameFileIsRefusedUntilTheFirstCloses) {
  testing::TempDir dir;
  absl::StatusOr<std::unique_ptr<SqliteStore>> first = SqliteStore::Open({.path = dir.file("l.db")});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_THAT(SqliteStore::Open({.path = dir.file("l.db")}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("in use")));
  first->reset();
  EXPECT_TRUE(SqliteStore::Open({.path = dir.file("l.db")}).ok());
}

TEST(SqliteStore, MigratesAVersionOneDatabase) {
  testing::TempDir dir;
  ASSERT_THAT(CreateSqliteSchemaForTest(dir.file("l.db"), 1), IsOk());
  absl::StatusOr<std::unique_ptr<SqliteStore>> s = SqliteStore::Open({.path = dir.file("l.db")});
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ((*s)->schema_version(), kSqliteSchemaVersion);
}

// Version 3 added the evr admission columns: a job written by a version-2 server reads back
// idle, and the new state round-trips.
TEST(SqliteStore, MigratesAVersionTwoJobToIdleEvrState) {
  testing::TempDir dir;
  ASSERT_THAT(CreateSqliteSchemaForTest(dir.file("l.db"), 2), IsOk());
  sqlite3* db = nullptr;
  sqlite3_open(dir.file("l.db").c_str(), &db);
  ASSERT_EQ(sqlite3_exec(db,
                         "INSERT INTO jobs VALUES ('t', 'old', 1.0, 1e-6, 1, 'pld', 0, 0, 1, 5, 0)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  absl::StatusOr<std::unique_ptr<SqliteStore>> s = SqliteStore::Open({.path = dir.file("l.db")});
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ((*s)->schema_version(), kSqliteSchemaVersion);
  absl::StatusOr<std::optional<JobRow>> j = (*s)->GetJob({"t", "old"});
  ASSERT_THAT(j, IsOk());
  ASSERT_TRUE(j->has_value());
  EXPECT_EQ((*j)->evr_state, EvrState::kIdle);
  EXPECT_EQ((*j)->evr_note, "");
  EXPECT_EQ((*j)->accountant, "pld");
  WriteBatch b;
  b.evr_marks.push_back({{"t", "old"}, EvrState::kStopped, "rejected at seq 4"});
  ASSERT_THAT((*s)->Apply(b), IsOk());
  j = (*s)->GetJob({"t", "old"});
  ASSERT_THAT(j, IsOk());
  EXPECT_EQ((*j)->evr_state, EvrState::kStopped);
  EXPECT_EQ((*j)->evr_note, "rejected at seq 4");
}

TEST(SqliteStore, RefusesADatabaseFromANewerServer) {
  testing::TempDir dir;
  ASSERT_THAT(CreateSqliteSchemaForTest(dir.file("l.db"), 2), IsOk());
  sqlite3* db = nullptr;
  sqlite3_open(dir.file("l.db").c_str(), &db);
  sqlite3_exec(db, "UPDATE schema_version SET version = 99", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  EXPECT_THAT(SqliteStore::Open({.path = dir.file("l.db")}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("99")));
}

TEST(SqliteStore, GarbageFileIsDataLoss) {
  testing::TempDir dir;
  std::ofstream(dir.file("l.db")) << std::string(8192, 'x');
  EXPECT_THAT(SqliteStore::Open({.path = dir.file("l.db")}),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("sqlite")));
}

// Issue 10: version 4 gives every job a schedule. A version-3 job whose ledger repeats one
// mechanism becomes declared (implicit plan) and keeps its accountant; one that mixes
// mechanisms becomes adaptive under the Renyi filter at the order its budget alone chooses;
// an evr job with a mixed ledger stops admitting (evr needs a declared schedule).
TEST(SqliteStore, MigratesVersionThreeJobsToDeclaredOrAdaptiveSchedules) {
  testing::TempDir dir;
  ASSERT_THAT(CreateSqliteSchemaForTest(dir.file("l.db"), 3), IsOk());
  sqlite3* db = nullptr;
  sqlite3_open(dir.file("l.db").c_str(), &db);
  const char* sql = R"sql(
INSERT INTO jobs VALUES ('t', 'same', 1.0, 1e-6, 1, 'pld', 0, 0, 1, 5, 0, 0, '');
INSERT INTO jobs VALUES ('t', 'mixed', 2.0, 1e-6, 1, 'pld', 0, 0, 1, 5, 0, 0, '');
INSERT INTO jobs VALUES ('t', 'evrmixed', 2.0, 1e-2, 1, 'evr', 0, 0, 1, 5, 0, 0, '');
INSERT INTO jobs VALUES ('t', 'empty', 1.0, 1e-6, 1, 'rdp', 0, 0, 1, 5, 0, 0, '');
INSERT INTO updates VALUES ('t', 'same', 1, 'gaussian:sigma=10,count=2', 0, 0, 0.1, 0, 0, 2, 5);
INSERT INTO updates VALUES ('t', 'same', 2, 'gaussian:sigma=10,count=1', 0, 0, 0.2, 0, 0, 3, 6);
INSERT INTO updates VALUES ('t', 'mixed', 1, 'gaussian:sigma=10,count=1', 0, 0, 0.1, 0, 0, 1, 5);
INSERT INTO updates VALUES ('t', 'mixed', 2, 'laplace:scale=20,count=1', 0, 0, 0.2, 0, 0, 2, 6);
INSERT INTO updates VALUES ('t', 'evrmixed', 1, 'gaussian:sigma=10,count=1;gaussian:sigma=9,count=1', 0, 0, 2, 2, 0, 2, 5);
)sql";
  ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
  absl::StatusOr<std::unique_ptr<SqliteStore>> s = SqliteStore::Open({.path = dir.file("l.db")});
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ((*s)->schema_version(), kSqliteSchemaVersion);
  auto job = [&](const char* id) { return **(*s)->GetJob({"t", id}); };
  EXPECT_EQ(job("same").schedule, Schedule::kDeclared);
  EXPECT_EQ(job("same").admission, AdmissionKind::kNatural);
  EXPECT_EQ(job("same").accountant, "pld");
  EXPECT_EQ(job("same").plan, "");
  EXPECT_EQ(job("empty").schedule, Schedule::kDeclared);
  EXPECT_EQ(job("empty").accountant, "rdp");
  EXPECT_EQ(job("mixed").schedule, Schedule::kAdaptive);
  EXPECT_EQ(job("mixed").admission, AdmissionKind::kRenyi);
  EXPECT_EQ(job("mixed").accountant, "renyi");
  absl::StatusOr<double> order = ChooseRenyiOrder(2.0, 1e-6, std::nullopt);
  ASSERT_THAT(order, IsOk());
  EXPECT_EQ(job("mixed").rdp_order, *order);
  EXPECT_EQ(job("evrmixed").schedule, Schedule::kDeclared);
  EXPECT_EQ(job("evrmixed").admission, AdmissionKind::kEvr);
  EXPECT_EQ(job("evrmixed").evr_state, EvrState::kStopped);
  EXPECT_THAT(job("evrmixed").evr_note, ::testing::HasSubstr("mixes mechanisms"));
}

// Issue 11 (Hardening) defect 7: migration 5 chains the rows it finds (trusted at migration
// time), so the start-up check passes on a migrated ledger and every later edit breaks it;
// the store gets its identity.
TEST(SqliteStore, MigrationFiveChainsExistingRows) {
  testing::TempDir dir;
  ASSERT_THAT(CreateSqliteSchemaForTest(dir.file("l.db"), 4), IsOk());
  sqlite3* db = nullptr;
  sqlite3_open(dir.file("l.db").c_str(), &db);
  const char* sql = R"sql(
INSERT INTO jobs VALUES ('t', 'j', 1.0, 1e-6, 1, 'pld', 0, 0, 1, 5, 0, 0, '', 1, 1, '', 0);
INSERT INTO updates VALUES ('t', 'j', 1, 'gaussian:sigma=10,count=2', 0, 0, 0.1, 0, 0, 2, 5);
INSERT INTO updates VALUES ('t', 'j', 2, 'gaussian:sigma=10,count=1', 0, 0, 0.2, 0, 0, 3, 6);
INSERT INTO releases VALUES ('r1', 't', 'j', '', 1, 1e-3, 1e-3, 0.99, 0.995, 0, 0, 'v', 0, 0,
  0, '', 0, 0, 0, '', '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d', x'00', 1, 2, 7);
)sql";
  ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
  absl::StatusOr<std::unique_ptr<SqliteStore>> s = SqliteStore::Open({.path = dir.file("l.db")});
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ((*s)->store_id().size(), 32u);
  const JobRow job = **(*s)->GetJob({"t", "j"});
  const UpdateRow u1 = **(*s)->GetUpdate(job.key, 1);
  const UpdateRow u2 = **(*s)->GetUpdate(job.key, 2);
  EXPECT_EQ(u1.chain, ChainUpdate(ChainGenesis(job), u1));
  EXPECT_EQ(u2.chain, ChainUpdate(u1.chain, u2));
  const ReleaseRow r = **(*s)->GetRelease("r1");
  EXPECT_EQ(r.chain, ChainRelease(ChainGenesis(job), u1.chain, r));
  EXPECT_THAT(CheckLedgerConsistency(**s), IsOk());
}

TEST(SqliteStore, DamagedPagesAreDataLoss) {
  testing::TempDir dir;
  const std::string path = dir.file("l.db");
  {
    absl::StatusOr<std::unique_ptr<SqliteStore>> s = SqliteStore::Open({.path = path});
    ASSERT_THAT(s, IsOk());
    WriteBatch b;
    for (int i = 0; i < 400; ++i) {
      JobRow j;
      j.key = {"t", absl::StrFormat("job-%04d-%s", i, std::string(100, 'p'))};
      j.budget_epsilon = 1;
      j.budget_delta = 1e-6;
      j.accountant = "analytic";
      b.new_jobs.push_back(j);
    }
    ASSERT_THAT((*s)->Apply(b), IsOk());
  }  // closed: WAL checkpointed into the file
  // Overwrite the middle of the file (b-tree pages of the jobs table) with junk.
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(4096 * 3);
  const std::string junk(4096 * 4, '\x5a');
  f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  f.close();
  absl::StatusOr<std::unique_ptr<SqliteStore>> s = SqliteStore::Open({.path = path, .full_check = true});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kDataLoss, ::testing::_));
}

}  // namespace
}  // namespace dpledger::server
