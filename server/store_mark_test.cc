#include "server/store_mark.h"

#include <fstream>

#include "core/util/test_support.h"
#include "gtest/gtest.h"
#include "server/test_util.h"

namespace dpledger::server {
namespace {

using ::dpledger::testing::IsOk;
using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

StoreMark Mark(int64_t updates) {
  return {"0123456789abcdef0123456789abcdef", 2, updates, 3,
          std::string(64, static_cast<char>('a' + updates % 6))};
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

}  // namespace
}  // namespace dpledger::server
