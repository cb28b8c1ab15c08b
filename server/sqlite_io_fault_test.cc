// Issue 16 "I/O faults": the ledger service on a SqliteStore whose file I/O goes through the
// fault-injecting VFS (sqlite_fault_vfs.h). For each fault (write error, fsync error, disk
// full, short write, a crash between write and fsync): nothing acknowledged that is not
// durable, a status naming the cause (UNAVAILABLE, or RESOURCE_EXHAUSTED for a full disk),
// and recovery once the fault clears, in the same process (no restart) unless the store
// says DATA_LOSS. After each case the database is reopened without the VFS: the ledger holds
// exactly the acknowledged updates, the chain and integrity checks pass.
#include "server/sqlite_fault_vfs.h"

#include <sqlite3.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "core/util/test_support.h"
#include "gtest/gtest.h"
#include "server/ledger_check.h"
#include "server/ledger_service.h"
#include "server/sqlite_store.h"
#include "server/test_util.h"

namespace dpledger::server {
namespace {

using ::dpledger::testing::IsOk;
using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;
using Code = absl::StatusCode;

constexpr double kSigma = 10;

JobSpec Spec(const std::string& id) {
  JobSpec spec;
  spec.job_id = id;
  spec.budget_epsilon = 100;
  spec.budget_delta = 1e-5;
  return spec;
}

// The store as dpledgerd opens it, with the default VFS and the full integrity check.
absl::StatusOr<std::unique_ptr<SqliteStore>> OpenPlain(const std::string& path) {
  SqliteStoreOptions o;
  o.path = path;
  o.full_check = true;
  return SqliteStore::Open(o);
}

class SqliteIoFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    vfs_.Reset();
    options_.default_accountant = "analytic";
    options_.release_use_mc = false;
    Open();
    ASSERT_THAT(service_->CreateJob(Caller::Insecure(), Spec("j")), IsOk());
  }
  void TearDown() override { vfs_.Reset(); }

  void Open() {
    SqliteStoreOptions o;
    o.path = path_;
    o.vfs = SqliteFaultVfs::kName;
    o.wal_autocheckpoint_pages = checkpoint_pages_;
    auto store = SqliteStore::Open(o);
    ASSERT_THAT(store, IsOk());
    store_ = *std::move(store);
    service_ = std::make_unique<LedgerService>(store_.get(), options_);
  }
  // Every commit then checkpoints (1 WAL page), so faults on the database file hit them.
  void ReopenCheckpointingEveryCommit() {
    Close();
    checkpoint_pages_ = 1;
    Open();
  }
  void Close() {
    service_.reset();
    store_.reset();
  }

  absl::StatusOr<Ack> Append(int64_t seq) {
    absl::StatusOr<std::vector<Ack>> acks = service_->AppendSteps(
        Caller::Insecure(), "", "j", {UpdateInput{seq, {testing::Gaussian(kSigma)}}});
    if (!acks.ok()) return acks.status();
    return (*acks)[0];
  }
  void AppendOk(int64_t seq) {
    absl::StatusOr<Ack> a = Append(seq);
    ASSERT_THAT(a, IsOk());
    ASSERT_TRUE(a->admitted);
    EXPECT_EQ(a->num_steps, seq) << "seq " << seq << " charged once";
  }
  int64_t LastSeq() {
    absl::StatusOr<JobInfo> info = service_->GetJob(Caller::Insecure(), "", "j");
    return info.ok() ? info->last_seq : -1;
  }

  // Reopens with the default VFS: the stored ledger is seqs 1..n, each once, the integrity
  // and chain checks pass.
  void ExpectStoredLedger(int64_t n) {
    Close();
    auto store = OpenPlain(path_);
    ASSERT_THAT(store, IsOk());
    absl::StatusOr<std::vector<UpdateRow>> rows = (*store)->ListUpdates({"default", "j"}, 0, 1000);
    ASSERT_THAT(rows, IsOk());
    ASSERT_EQ(rows->size(), static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ((*rows)[i].seq, i + 1);
      EXPECT_EQ((*rows)[i].num_steps_after, i + 1);
    }
    EXPECT_THAT(CheckLedgerConsistency(**store), IsOk());
  }

  // The common case: seqs 1..3 durable; `fault` makes seq 4 fail with `code`, naming `cause`;
  // nothing of seq 4 is acknowledged or visible; once cleared, seq 4 (the same retry) and 5
  // are admitted by the same service, and the stored ledger is 1..5.
  void FailThenRecover(IoFault fault, Code code, const std::string& cause) {
    for (int64_t seq = 1; seq <= 3; ++seq) ASSERT_NO_FATAL_FAILURE(AppendOk(seq));
    vfs_.Inject(fault);
    EXPECT_THAT(Append(4), StatusIs(code, HasSubstr(cause)));
    EXPECT_GT(vfs_.faults_hit(), 0);
    // Still failing while the fault lasts, and nothing of seq 4 became visible.
    EXPECT_THAT(Append(4), StatusIs(code, HasSubstr(cause)));
    EXPECT_EQ(LastSeq(), 3);
    vfs_.Clear();
    ASSERT_NO_FATAL_FAILURE(AppendOk(4));
    ASSERT_NO_FATAL_FAILURE(AppendOk(5));
    absl::StatusOr<Ack> dup = Append(5);
    ASSERT_THAT(dup, IsOk());
    EXPECT_TRUE(dup->duplicate);
    ExpectStoredLedger(5);
  }

  int checkpoint_pages_ = 4;  // checkpoints every few commits meet the faults too
  SqliteFaultVfs& vfs_ = SqliteFaultVfs::Get();
  testing::TempDir dir_;
  std::string path_ = dir_.file("ledger.db");
  LedgerOptions options_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<LedgerService> service_;
};

TEST_F(SqliteIoFaultTest, WriteErrorIsUnavailableAndClearsWithoutRestart) {
  FailThenRecover(IoFault::kWriteError, Code::kUnavailable, "disk I/O error");
}

TEST_F(SqliteIoFaultTest, FsyncErrorIsUnavailableAndClearsWithoutRestart) {
  FailThenRecover(IoFault::kSyncError, Code::kUnavailable, "disk I/O error");
}

TEST_F(SqliteIoFaultTest, DiskFullIsResourceExhaustedAndClearsWithoutRestart) {
  FailThenRecover(IoFault::kDiskFull, Code::kResourceExhausted, "disk is full");
}

TEST_F(SqliteIoFaultTest, ShortWriteIsResourceExhaustedAndClearsWithoutRestart) {
  FailThenRecover(IoFault::kShortWrite, Code::kResourceExhausted, "disk is full");
}

TEST_F(SqliteIoFaultTest, CreateJobOnAFullDiskFailsAndSucceedsOnceSpaceReturns) {
  vfs_.Inject(IoFault::kDiskFull);
  EXPECT_THAT(service_->CreateJob(Caller::Insecure(), Spec("k")),
              StatusIs(Code::kResourceExhausted, HasSubstr("disk is full")));
  EXPECT_THAT(service_->GetJob(Caller::Insecure(), "", "k"), StatusIs(Code::kNotFound, HasSubstr("k")));
  vfs_.Clear();
  EXPECT_THAT(service_->CreateJob(Caller::Insecure(), Spec("k")), IsOk());
  EXPECT_THAT(service_->GetJob(Caller::Insecure(), "", "k"), IsOk());
}

// A torn write left on disk by a short write, then the process dies: the half-written WAL
// frame fails its checksum and is ignored at reopen; the acknowledged updates are all there.
TEST_F(SqliteIoFaultTest, ShortWriteThenCrashKeepsExactlyTheAcknowledgedUpdates) {
  for (int64_t seq = 1; seq <= 3; ++seq) ASSERT_NO_FATAL_FAILURE(AppendOk(seq));
  vfs_.Inject(IoFault::kShortWrite);
  EXPECT_THAT(Append(4), StatusIs(Code::kResourceExhausted, HasSubstr("disk is full")));
  vfs_.Inject(IoFault::kCrashAtSync);
  ASSERT_NO_FATAL_FAILURE(Close());  // the torn bytes stay: only what a later sync wrote is lost
  vfs_.Clear();
  ASSERT_NO_FATAL_FAILURE(ExpectStoredLedger(3));
}

// Power lost after SQLite wrote a commit and before its fsync returned: the update was never
// acknowledged, and after dropping every unsynced write the store opens without DATA_LOSS
// (its mark counts only acknowledged updates) and holds exactly seqs 1..3.
TEST_F(SqliteIoFaultTest, CrashBetweenWriteAndFsyncLosesOnlyTheUnacknowledged) {
  for (int64_t seq = 1; seq <= 3; ++seq) ASSERT_NO_FATAL_FAILURE(AppendOk(seq));
  vfs_.Inject(IoFault::kCrashAtSync);
  EXPECT_THAT(Append(4), StatusIs(Code::kUnavailable, HasSubstr("disk I/O error")));
  EXPECT_TRUE(vfs_.crashed());
  EXPECT_EQ(LastSeq(), 3);
  Close();  // its checkpoint fails: the process is as good as dead
  ASSERT_THAT(vfs_.DropUnsyncedWrites(), IsOk());
  ASSERT_NO_FATAL_FAILURE(Open());  // through the VFS again, faults cleared
  EXPECT_EQ(LastSeq(), 3);
  ASSERT_NO_FATAL_FAILURE(AppendOk(4));
  ExpectStoredLedger(4);
}

// The same crash under group commit: several jobs commit together when power is lost; none
// of that group was acknowledged and everything acknowledged before it survives.
TEST_F(SqliteIoFaultTest, CrashDuringAGroupCommitLosesNoAcknowledgedUpdate) {
  for (int64_t seq = 1; seq <= 20; ++seq) ASSERT_NO_FATAL_FAILURE(AppendOk(seq));
  for (int k = 0; k < 4; ++k) {
    ASSERT_THAT(service_->CreateJob(Caller::Insecure(), Spec(absl::StrFormat("g%d", k))), IsOk());
  }
  vfs_.Inject(IoFault::kCrashAtSync);
  std::vector<std::thread> writers;
  std::atomic<int> acked{0};
  for (int k = 0; k < 4; ++k) {
    writers.emplace_back([&, k] {
      auto r = service_->AppendSteps(Caller::Insecure(), "", absl::StrFormat("g%d", k),
                                     {UpdateInput{1, {testing::Gaussian(kSigma)}}});
      acked += r.ok();
    });
  }
  for (std::thread& t : writers) t.join();
  EXPECT_EQ(acked, 0);
  Close();
  ASSERT_THAT(vfs_.DropUnsyncedWrites(), IsOk());
  auto store = OpenPlain(path_);
  ASSERT_THAT(store, IsOk());
  for (int k = 0; k < 4; ++k) {
    EXPECT_FALSE((*store)->LastUpdate({"default", absl::StrFormat("g%d", k)})->has_value());
  }
  store->reset();
  ExpectStoredLedger(20);
}

// The sequence behind a lost acknowledged update that the random test below found once in
// about 100 runs (sqlite_store.h, "Failed fsync"): a checkpoint beside an open read snapshot
// copies a commit's pages into the database file without an fsync and records them as
// copied; a later fsync of the database file fails, which drops them; the next good
// checkpoint copies only newer frames and the WAL restarts over the only copy. Here the
// commit is CreateJob("a") (the jobs table) and the later ones append to "j" (the updates
// table), so no later frame carries the lost page.
TEST_F(SqliteIoFaultTest, FailedDatabaseFsyncAfterAPartialCheckpointLosesNoCommit) {
  ASSERT_NO_FATAL_FAILURE(ReopenCheckpointingEveryCommit());
  ASSERT_NO_FATAL_FAILURE(AppendOk(1));
  // C1's checkpoint fails at its first write to the database file: C1 stays in the WAL only.
  vfs_.Inject(IoFault::kWriteError, path_);
  ASSERT_THAT(service_->CreateJob(Caller::Insecure(), Spec("a")), IsOk());
  vfs_.Clear();
  // A reader's snapshot at C1's end: C2's checkpoint can copy only up to it (a partial
  // checkpoint, no fsync of the database file).
  sqlite3* reader = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path_.c_str(), &reader, SQLITE_OPEN_READONLY, SqliteFaultVfs::kName),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(reader, "BEGIN; SELECT count(*) FROM jobs;", nullptr, nullptr, nullptr),
            SQLITE_OK);
  ASSERT_NO_FATAL_FAILURE(AppendOk(2));
  ASSERT_EQ(sqlite3_exec(reader, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_close(reader), SQLITE_OK);
  // C3 is durable in the WAL; its checkpoint's fsync of the database file fails.
  const int64_t faults_before = vfs_.faults_hit();
  vfs_.Inject(IoFault::kSyncError, path_);
  ASSERT_NO_FATAL_FAILURE(AppendOk(3));
  EXPECT_GT(vfs_.faults_hit(), faults_before);
  vfs_.Clear();
  // The sequence happened: C2's partial checkpoint had copied job "a" into the database
  // file, and the failed fsync dropped it (a copy of the file alone, without its WAL).
  {
    const std::string copy = dir_.file("db-file-only.db");
    std::filesystem::copy_file(path_, copy);
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open_v2(copy.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
    int jobs = -1;
    ASSERT_EQ(sqlite3_exec(
                  db, "SELECT count(*) FROM jobs WHERE job_id = 'a'",
                  [](void* out, int, char** v, char**) {
                    *static_cast<int*>(out) = std::atoi(v[0]);
                    return 0;
                  },
                  &jobs, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
    EXPECT_EQ(jobs, 0) << "the scenario did not happen: 'a' is in the database file";
  }
  // Good checkpoints again; the WAL restarts.
  for (int64_t seq = 4; seq <= 8; ++seq) ASSERT_NO_FATAL_FAILURE(AppendOk(seq));
  Close();
  auto store = OpenPlain(path_);
  ASSERT_THAT(store, IsOk()) << "no acknowledged commit may be lost";
  absl::StatusOr<std::optional<JobRow>> a = (*store)->GetJob({"default", "a"});
  ASSERT_THAT(a, IsOk());
  EXPECT_TRUE(a->has_value()) << "job 'a' was acknowledged";
  EXPECT_THAT(CheckLedgerConsistency(**store), IsOk());
  store->reset();
  ExpectStoredLedger(8);
}

// A reopen after a failed checkpoint that fails itself: the commit that preceded it stays
// acknowledged; reads, commits and readiness answer UNAVAILABLE (no crash) until the
// database can be opened again, then the health check's retry reconnects and the service
// goes on from where it was.
TEST_F(SqliteIoFaultTest, AFailedReopenIsUnavailableUntilTheDatabaseOpensAgain) {
  ASSERT_NO_FATAL_FAILURE(ReopenCheckpointingEveryCommit());
  ASSERT_NO_FATAL_FAILURE(AppendOk(1));
  vfs_.FailOpens(true);
  vfs_.Inject(IoFault::kSyncError, path_);  // the checkpoint's fsync of the database
  ASSERT_NO_FATAL_FAILURE(AppendOk(2));
  vfs_.Clear();
  EXPECT_THAT(store_->ListUpdates({"default", "j"}, 0, 10),
              StatusIs(Code::kUnavailable, HasSubstr("no open connection")));
  EXPECT_THAT(store_->Ping(), StatusIs(Code::kUnavailable, HasSubstr("unable to open")));
  EXPECT_THAT(Append(3), StatusIs(Code::kUnavailable, HasSubstr("unable to open")));
  vfs_.FailOpens(false);
  EXPECT_THAT(store_->Ping(), IsOk());
  absl::StatusOr<std::vector<UpdateRow>> rows = store_->ListUpdates({"default", "j"}, 0, 10);
  ASSERT_THAT(rows, IsOk());
  EXPECT_EQ(rows->size(), 2u);
  ASSERT_NO_FATAL_FAILURE(AppendOk(3));
  ExpectStoredLedger(3);
}

// Faults switched at random (fixed seed) under concurrent writers and group commit, then a
// crash between write and fsync: every acknowledged update is stored as acknowledged, each
// job's ledger is contiguous, and nothing beyond what was sent is stored.
TEST_F(SqliteIoFaultTest, RandomFaultsUnderConcurrentWritersLoseNoAcknowledgedUpdate) {
  constexpr int kJobs = 4;
  for (int k = 0; k < kJobs; ++k) {
    ASSERT_THAT(service_->CreateJob(Caller::Insecure(), Spec(absl::StrFormat("w%d", k))), IsOk());
  }
  std::mutex mu;
  std::vector<std::map<int64_t, double>> acked(kJobs);  // seq -> acknowledged spent.upper
  std::vector<int64_t> sent(kJobs, 0);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> failures{0};
  std::vector<std::thread> writers;
  for (int k = 0; k < kJobs; ++k) {
    writers.emplace_back([&, k] {
      const std::string job = absl::StrFormat("w%d", k);
      int64_t seq = 1;
      while (!stop) {
        {
          std::lock_guard<std::mutex> l(mu);
          sent[k] = std::max(sent[k], seq);
        }
        auto r = service_->AppendSteps(Caller::Insecure(), "", job,
                                       {UpdateInput{seq, {testing::Gaussian(kSigma)}}});
        if (r.ok() && (*r)[0].admitted) {
          std::lock_guard<std::mutex> l(mu);
          acked[k][seq] = (*r)[0].spent.upper;
          ++seq;
        } else {
          ++failures;  // the same seq again
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
      }
    });
  }
  std::mt19937_64 rng(16);
  const IoFault kFaults[] = {IoFault::kNone,      IoFault::kNone,     IoFault::kWriteError,
                             IoFault::kSyncError, IoFault::kDiskFull, IoFault::kShortWrite};
  for (int i = 0; i < 300; ++i) {
    vfs_.Inject(kFaults[std::uniform_int_distribution<int>(0, 5)(rng)]);
    std::this_thread::sleep_for(
        std::chrono::microseconds(std::uniform_int_distribution<int>(0, 3000)(rng)));
  }
  vfs_.Inject(IoFault::kCrashAtSync);
  for (int i = 0; i < 1000 && !vfs_.crashed(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(vfs_.crashed());
  stop = true;
  for (std::thread& t : writers) t.join();
  Close();
  ASSERT_THAT(vfs_.DropUnsyncedWrites(), IsOk());
  auto store = OpenPlain(path_);
  ASSERT_THAT(store, IsOk()) << "no acknowledged update may be lost";
  EXPECT_THAT(CheckLedgerConsistency(**store), IsOk());
  int64_t total_acked = 0;
  for (int k = 0; k < kJobs; ++k) {
    auto rows = (*store)->ListUpdates({"default", absl::StrFormat("w%d", k)}, 0, 100000);
    ASSERT_THAT(rows, IsOk());
    ASSERT_GE(rows->size(), acked[k].size()) << "job " << k;
    ASSERT_LE(static_cast<int64_t>(rows->size()), sent[k]) << "job " << k;
    for (size_t i = 0; i < rows->size(); ++i) {
      const UpdateRow& row = (*rows)[i];
      ASSERT_EQ(row.seq, static_cast<int64_t>(i) + 1);
      EXPECT_EQ(row.num_steps_after, row.seq);
      if (auto it = acked[k].find(row.seq); it != acked[k].end()) {
        EXPECT_EQ(row.spent.upper, it->second) << "job " << k << " seq " << row.seq;
      }
    }
    total_acked += static_cast<int64_t>(acked[k].size());
  }
  EXPECT_GT(total_acked, 10);  // faults are off about a third of the time
  EXPECT_GT(failures, 10);
  RecordProperty("acknowledged", static_cast<int>(total_acked));
  RecordProperty("failed_calls", static_cast<int>(failures));
}

}  // namespace
}  // namespace dpledger::server
