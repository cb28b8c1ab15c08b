// A fault-injecting SQLite VFS for tests (issue 16 "I/O faults"), in the manner of SQLite's
// own test_vfs/crash tests and leveldb's FaultInjectionEnv: it wraps the default VFS ("unix")
// and passes every call through, except that, while a fault is set, file writes, syncs and
// truncations fail as a real disk would make them fail:
//   kWriteError   xWrite returns SQLITE_IOERR_WRITE, nothing written (EIO)
//   kSyncError    xSync returns SQLITE_IOERR_FSYNC and the file's writes since its last
//                 sync are lost at once (Linux may drop the dirty pages of a failed writeback
//                 and report a later fsync as a success: the worst case)
//   kDiskFull     xWrite returns SQLITE_FULL, nothing written (ENOSPC)
//   kShortWrite   xWrite writes the first half of the buffer and returns SQLITE_FULL, as the
//                 unix VFS does when write(2) comes back short
//   kCrashAtSync  the next xSync "loses power": it fails, and from then on every write, sync,
//                 truncate and delete fails (the process is as good as dead) until
//                 DropUnsyncedWrites() restores each file to its state at its last
//                 successful sync, as the kernel's page cache would be lost; then reopen.
// Undoing unsynced writes needs their old bytes: the VFS keeps them for every file written
// through it (only tests use it; Reset() forgets them).
//
// The production path is unchanged: dpledgerd uses this VFS only when SqliteStoreOptions.vfs
// names it, which a test does directly, or end to end through the environment variable
// DPL_TEST_IO_FAULT_FILE (sqlite_store.h): the fault is then read from that file (one word:
// none, write, fsync, full, short) before each write and sync.
//
// Thread safety: all methods are thread-safe; one process-wide instance.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dpledger::server {

enum class IoFault { kNone, kWriteError, kSyncError, kDiskFull, kShortWrite, kCrashAtSync };

// "none", "write", "fsync", "full", "short", "crash" (INVALID_ARGUMENT otherwise).
absl::StatusOr<IoFault> ParseIoFault(std::string_view word);

class SqliteFaultVfs {
 public:
  static constexpr const char* kName = "dpledger-fault";

  // The instance, registered with SQLite (not as the default VFS) on first use.
  static SqliteFaultVfs& Get();

  // Every matching call fails from now until Clear() (kCrashAtSync: until DropUnsyncedWrites);
  // with `only_path`, only calls on that file (the name SQLite opened it by, e.g. the
  // database file but not its WAL).
  void Inject(IoFault fault, std::string only_path = "");
  void Clear() { Inject(IoFault::kNone); }
  // Read the fault from `path` before each write and sync ("" stops): the end-to-end seam.
  void SetControlFile(std::string path);

  // While set, opening a database file fails (SQLITE_CANTOPEN), beside any fault above.
  void FailOpens(bool fail);
  bool opens_fail() const;
  bool crashed() const;
  int64_t faults_hit() const;  // calls failed so far
  // Restores every file written since its last successful sync to that state (old bytes
  // back, old size) and ends the crash state. Call with every connection closed.
  absl::Status DropUnsyncedWrites();
  // Forgets unsynced writes, faults and counters (between tests).
  void Reset();

  // Used by the VFS callbacks (sqlite_fault_vfs.cc).
  IoFault CurrentFault(const char* path);  // path: null for temporary files
  void CountFault();
  void SetCrashed();
  // An undo record for a change of `path`: before [offset, offset + old_bytes.size()) held
  // old_bytes and the file was old_size long.
  void RecordUndo(const std::string& path, int64_t offset, std::string old_bytes,
                  int64_t old_size);
  void Synced(const std::string& path);
  // A failed fsync: `path`'s unsynced writes are undone now, under the open file.
  absl::Status LoseUnsyncedWrites(const std::string& path);

 private:
  SqliteFaultVfs() = default;
  struct Undo {
    int64_t offset;
    std::string old_bytes;
    int64_t old_size;
  };
  static absl::Status Revert(const std::string& path, const std::vector<Undo>& undos);
  mutable std::mutex mu_;
  IoFault fault_ = IoFault::kNone;
  std::string fault_path_;  // "" every file
  std::string control_file_;
  bool crashed_ = false;
  bool opens_fail_ = false;
  int64_t faults_hit_ = 0;
  std::map<std::string, std::vector<Undo>> unsynced_;  // by path, oldest first
};

}  // namespace dpledger::server
