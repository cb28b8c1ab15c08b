// Store loss is not silent (issue 11 "Hardening", defect 7). A store has an identity (a
// random id created with it, kept in its meta table) and a high-water mark kept in a small
// file beside it (SQLite: "<database>.mark"; PostgreSQL: "<data dir>/postgres.mark", local
// to the replica): the identity, the jobs, updates, releases, job closes and EVR stops it
// has acknowledged, and the newest update chain head (ledger_chain.h) of the last commit.
// Every count is monotone in the store (jobs are never deleted or reopened, an EVR stop is
// for good), so a mark is a lower bound of the store even when several replicas write it:
// each replica's mark is the store at its start plus what it acknowledged since.
//
// The mark is rewritten after every commit group and before its acks are sent, so every
// acknowledged commit is covered by it and it never claims more than the database holds
// durably (it is written after the commit). It costs one small overwrite and fdatasync per
// commit group: the file holds two fixed 512-byte slots, each a record with a generation and
// a SHA-256 checksum, written alternately in place (no rename, no directory fsync: those
// cost ~10 ms per commit here). A torn write spoils only the slot being written; the other
// holds the previous record, one commit behind, which the database still covers. At
// start-up a
// database that has lost what the mark covers - a missing WAL after kill -9 (the commits
// in it are gone), an emptied or deleted database file (a new identity), fewer updates or
// jobs, or a newest head no update carries - is refused with DATA_LOSS naming what was
// lost, unless the operator passes --accept-data-loss (logged loudly; the mark is then
// rewritten from the database as it is).
//
// What it does not catch: an EVR "verifying" mark lost on its own (its outcome, an accepted
// group's updates or a stop, is counted); the mark and the database deleted together (a whole data dir
// removed while the server is down) look like a new store; a data dir deleted while the
// server runs is caught by the next commit (CheckPath: the database file is no longer the
// one opened), which fails so that nothing more is acknowledged.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <functional>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/store.h"

namespace dpledger::server {

struct StoreMark {
  std::string store_id;
  int64_t jobs = 0;
  int64_t updates = 0;
  int64_t releases = 0;
  int64_t closed = 0;   // jobs closed
  int64_t stopped = 0;  // jobs whose EVR admission stopped (EvrState::kStopped)
  std::string head;  // the newest update head committed, "" before any update
};

// A fresh random store identity (32 hex digits).
std::string NewStoreId();

// Adds committed groups to `mark`: jobs created, updates, releases, closes, EVR stops, and
// the newest update head.
void AddCommitted(StoreMark& mark, std::span<const WriteBatch* const> batches);

// The mark file, kept open for the store's lifetime.
class StoreMarkFile {
 public:
  // Opens `path`, creating it when missing (then `*existing` is nullopt; otherwise the
  // newest valid record). DATA_LOSS when the file exists but holds no valid record.
  static absl::StatusOr<std::unique_ptr<StoreMarkFile>> Open(const std::string& path,
                                                              std::optional<StoreMark>* existing);
  ~StoreMarkFile();
  StoreMarkFile(const StoreMarkFile&) = delete;
  StoreMarkFile& operator=(const StoreMarkFile&) = delete;

  // Durable once it returns OK (pwrite into the older slot, fdatasync).
  absl::Status Write(const StoreMark& mark);

 private:
  StoreMarkFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
  uint64_t generation_ = 0;
};

// The start-up check of a store against its mark file at `mark_path` (created when
// missing). `now`: the store's identity and counts as it holds them (`head` ignored);
// `has_head(h)`: whether some update carries chain head h; `database`: how to name the
// store in messages. DATA_LOSS naming what was lost unless `accept_data_loss` (then logged
// loudly). On success the mark file is open and holds `now` with the head to keep, the
// mark to go on from.
absl::StatusOr<std::unique_ptr<StoreMarkFile>> CheckStoreMark(
    const std::string& mark_path, const std::string& database, StoreMark& now,
    const std::function<absl::StatusOr<bool>(const std::string& head)>& has_head,
    bool accept_data_loss);

}  // namespace dpledger::server
