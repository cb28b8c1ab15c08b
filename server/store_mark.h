// Store loss is not silent (issue 11 "Hardening", defect 7). A store has an identity (a
// random id created with it, kept in its meta table) and a high-water mark kept in a small
// file beside it ("<database>.mark"): the identity, the updates and jobs it has
// acknowledged, and the newest update chain head (ledger_chain.h) of the last commit.
//
// The mark is rewritten atomically (temp file, fsync, rename, fsync of the directory) after
// every commit group and before its acks are sent, so it never claims more than the
// database holds durably, and every acknowledged commit is covered by it. At start-up a
// database that has lost what the mark covers - a missing WAL after kill -9 (the commits
// in it are gone), an emptied or deleted database file (a new identity), fewer updates or
// jobs, or a newest head no update carries - is refused with DATA_LOSS naming what was
// lost, unless the operator passes --accept-data-loss (logged loudly; the mark is then
// rewritten from the database as it is).
//
// What it does not catch: the mark and the database deleted together (a whole data dir
// removed while the server is down) look like a new store; a data dir deleted while the
// server runs is caught by the next commit (CheckPath: the database file is no longer the
// one opened), which fails so that nothing more is acknowledged.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dpledger::server {

struct StoreMark {
  std::string store_id;
  int64_t jobs = 0;
  int64_t updates = 0;
  std::string head;  // the newest update head committed, "" before any update
};

// A fresh random store identity (32 hex digits).
std::string NewStoreId();

// nullopt when the file does not exist; DATA_LOSS when it exists but does not parse.
absl::StatusOr<std::optional<StoreMark>> ReadStoreMark(const std::string& path);
// Atomic and durable: temp file, fsync, rename, fsync of the directory.
absl::Status WriteStoreMark(const std::string& path, const StoreMark& mark);

}  // namespace dpledger::server
