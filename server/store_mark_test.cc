#include "server/store_mark.h"

#include <fstream>

#include "core/util/test_support.h"
#include "gtest/gtest.h"
#include "server/ledger_types.h"
#include "server/test_util.h"

namespace dpledger::server {
namespace {

using ::dpledger::testing::IsOk;
using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

StoreMark Mark(int64_t updates) {
  return {.store_id = "0123456789abcdef0123456789abcdef",
          .jobs = 2,
          .updates = updates,
          .releases = 3,
          .head = std::string(64, static_cast<char>('a' + updates % 6))};
}

TEST(StoreMark, TheNewestRecordIsReadBack) {
  testing::TempDir dir;
  const std::string path = dir.file("l.db.mark");
  std::optional<StoreMark> existing;
  {
    auto f = StoreMarkFile::Open(path, &existing);
    ASSERT_THAT(f, IsOk());
    EXPECT_FALSE(existing.has_value());
    for (int64_t u = 1; u <= 5; ++u) ASSERT_THAT((*f)->Write(Mark(u)), IsOk());
  }
  auto f = StoreMarkFile::Open(path, &existing);
  ASSERT_THAT(f, IsOk());
  ASSERT_TRUE(existing.has_value());
  EXPECT_EQ(existing->updates, 5);
  EXPECT_EQ(existing->jobs, 2);
  EXPECT_EQ(existing->releases, 3);
  EXPECT_EQ(existing->head, Mark(5).head);
  EXPECT_EQ(existing->store_id, Mark(5).store_id);
}

// A torn write spoils only the slot being written: the other slot's record (one commit
// behind, still covered by the database) is read instead.
TEST(StoreMark, ATornSlotFallsBackToThePreviousRecord) {
  testing::TempDir dir;
  const std::string path = dir.file("l.db.mark");
  std::optional<StoreMark> existing;
  {
    auto f = StoreMarkFile::Open(path, &existing);
    ASSERT_THAT(f, IsOk());
    ASSERT_THAT((*f)->Write(Mark(1)), IsOk());  // generation 1: slot 1
    ASSERT_THAT((*f)->Write(Mark(2)), IsOk());  // generation 2: slot 0
  }
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(40);
    file.write("XXXX", 4);  // inside slot 0
  }
  auto f = StoreMarkFile::Open(path, &existing);
  ASSERT_THAT(f, IsOk());
  EXPECT_EQ(existing->updates, 1);
}

TEST(StoreMark, AFileWithNoValidRecordIsDataLoss) {
  testing::TempDir dir;
  const std::string path = dir.file("l.db.mark");
  std::ofstream(path) << "store_id x\n";
  std::optional<StoreMark> existing;
  EXPECT_THAT(StoreMarkFile::Open(path, &existing),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("holds no valid record")));
}

// Issue 11: the mark counts job closes and EVR stops, and a store behind it on either is
// DATA_LOSS (a closed job reopened, a stopped EVR job admitting again).
TEST(StoreMark, AStoreBehindTheMarksClosesOrStopsIsDataLoss) {
  testing::TempDir dir;
  const std::string path = dir.file("l.db.mark");
  StoreMark mark = Mark(4);
  mark.head.clear();
  {
    WriteBatch close, stop, idle;
    close.state_changes.push_back({{"t", "a"}, JobState::kClosed, 1});
    stop.evr_marks.push_back({{"t", "b"}, EvrState::kStopped, "did not accept"});
    idle.evr_marks.push_back({{"t", "c"}, EvrState::kIdle, ""});
    const WriteBatch* group[] = {&close, &stop, &idle};
    AddCommitted(mark, group);
    EXPECT_EQ(mark.closed, 1);
    EXPECT_EQ(mark.stopped, 1);
    std::optional<StoreMark> existing;
    auto f = StoreMarkFile::Open(path, &existing);
    ASSERT_THAT(f, IsOk());
    ASSERT_THAT((*f)->Write(mark), IsOk());
  }
  auto no_head = [](const std::string&) -> absl::StatusOr<bool> { return true; };
  StoreMark now = mark;
  EXPECT_THAT(CheckStoreMark(path, "'l.db'", now, no_head, false), IsOk());
  now = mark;
  now.closed = 0;
  EXPECT_THAT(CheckStoreMark(path, "'l.db'", now, no_head, false),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("holds 0 closed jobs and 1 EVR-stopped jobs but 1 closes")));
  now = mark;
  now.stopped = 0;
  EXPECT_THAT(CheckStoreMark(path, "'l.db'", now, no_head, false),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("and 1 EVR stops were")));
  now = mark;
  now.stopped = 0;
  EXPECT_THAT(CheckStoreMark(path, "'l.db'", now, no_head, /*accept_data_loss=*/true), IsOk());
}

// Marks written before closes and stops were counted still read (as 0 of each).
TEST(StoreMark, AnOlderRecordWithoutClosesReadsAsZero) {
  testing::TempDir dir;
  const std::string path = dir.file("l.db.mark");
  const std::string body =
      "dplmark1 gen=1 store_id=0123456789abcdef0123456789abcdef jobs=2 updates=7 releases=0 "
      "head=-";
  std::string slot = body + " sum=" + Sha256Hex(body) + "\n";
  slot.resize(1024, ' ');
  std::ofstream(path, std::ios::binary) << slot;
  std::optional<StoreMark> existing;
  ASSERT_THAT(StoreMarkFile::Open(path, &existing), IsOk());
  ASSERT_TRUE(existing.has_value());
  EXPECT_EQ(existing->updates, 7);
  EXPECT_EQ(existing->closed, 0);
  EXPECT_EQ(existing->stopped, 0);
}

}  // namespace
}  // namespace dpledger::server
