#include "server/sqlite_fault_vfs.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "core/util/check.h"

namespace dpledger::server {
namespace {

// An open file: the wrapped VFS's file lives right behind this header (szOsFile).
struct FaultFile {
  sqlite3_file base;
  sqlite3_file* real;
  const char* path;  // SQLite keeps it valid until xClose; null for temporary files
};

sqlite3_vfs* Root(sqlite3_vfs* vfs) { return static_cast<sqlite3_vfs*>(vfs->pAppData); }
sqlite3_file* Real(sqlite3_file* f) { return reinterpret_cast<FaultFile*>(f)->real; }
SqliteFaultVfs& State() { return SqliteFaultVfs::Get(); }

// Remembers what [offset, offset + amt) held before a write, for DropUnsyncedWrites.
void RecordBeforeWrite(sqlite3_file* file, int64_t offset, int amt) {
  const FaultFile* f = reinterpret_cast<FaultFile*>(file);
  if (f->path == nullptr) return;
  sqlite3_int64 size = 0;
  if (f->real->pMethods->xFileSize(f->real, &size) != SQLITE_OK) size = 0;
  std::string old;
  if (offset < size) {
    old.resize(static_cast<size_t>(std::min<int64_t>(amt, size - offset)));
    // A short read zero-fills; the bytes past EOF are not restored but cut by old_size.
    (void)f->real->pMethods->xRead(f->real, old.data(), static_cast<int>(old.size()), offset);
  }
  State().RecordUndo(f->path, offset, std::move(old), size);
}

int Close(sqlite3_file* f) { return Real(f)->pMethods->xClose(Real(f)); }
int Read(sqlite3_file* f, void* buf, int amt, sqlite3_int64 off) {
  return Real(f)->pMethods->xRead(Real(f), buf, amt, off);
}

int Write(sqlite3_file* f, const void* buf, int amt, sqlite3_int64 off) {
  SqliteFaultVfs& s = State();
  const IoFault fault = s.crashed() ? IoFault::kCrashAtSync
                                    : s.CurrentFault(reinterpret_cast<FaultFile*>(f)->path);
  switch (fault) {
    case IoFault::kCrashAtSync:
      if (!s.crashed()) break;  // the crash happens at the next sync
      s.CountFault();
      return SQLITE_IOERR_WRITE;
    case IoFault::kWriteError:
      s.CountFault();
      return SQLITE_IOERR_WRITE;
    case IoFault::kDiskFull:
      s.CountFault();
      return SQLITE_FULL;
    case IoFault::kShortWrite: {
      s.CountFault();
      const int half = amt / 2;
      RecordBeforeWrite(f, off, half);
      if (half > 0) (void)Real(f)->pMethods->xWrite(Real(f), buf, half, off);
      return SQLITE_FULL;
    }
    case IoFault::kSyncError:
    case IoFault::kNone:
      break;
  }
  RecordBeforeWrite(f, off, amt);
  return Real(f)->pMethods->xWrite(Real(f), buf, amt, off);
}

int Truncate(sqlite3_file* file, sqlite3_int64 size) {
  SqliteFaultVfs& s = State();
  if (s.crashed()) {
    s.CountFault();
    return SQLITE_IOERR_TRUNCATE;
  }
  const FaultFile* f = reinterpret_cast<FaultFile*>(file);
  sqlite3_int64 old_size = 0;
  if (f->path != nullptr && f->real->pMethods->xFileSize(f->real, &old_size) == SQLITE_OK &&
      size < old_size) {
    std::string old(static_cast<size_t>(old_size - size), '\0');
    (void)f->real->pMethods->xRead(f->real, old.data(), static_cast<int>(old.size()), size);
    s.RecordUndo(f->path, size, std::move(old), old_size);
  }
  return f->real->pMethods->xTruncate(f->real, size);
}

int Sync(sqlite3_file* file, int flags) {
  SqliteFaultVfs& s = State();
  const FaultFile* f = reinterpret_cast<FaultFile*>(file);
  const IoFault fault = s.crashed() ? IoFault::kCrashAtSync : s.CurrentFault(f->path);
  if (fault == IoFault::kCrashAtSync) {
    s.SetCrashed();
    s.CountFault();
    return SQLITE_IOERR_FSYNC;
  }
  if (fault == IoFault::kSyncError) {
    s.CountFault();
    if (f->path != nullptr) (void)s.LoseUnsyncedWrites(f->path);
    return SQLITE_IOERR_FSYNC;
  }
  const int rc = Real(file)->pMethods->xSync(Real(file), flags);
  if (rc == SQLITE_OK && f->path != nullptr) s.Synced(f->path);
  return rc;
}

int FileSize(sqlite3_file* f, sqlite3_int64* size) {
  return Real(f)->pMethods->xFileSize(Real(f), size);
}
int Lock(sqlite3_file* f, int l) { return Real(f)->pMethods->xLock(Real(f), l); }
int Unlock(sqlite3_file* f, int l) { return Real(f)->pMethods->xUnlock(Real(f), l); }
int CheckReservedLock(sqlite3_file* f, int* out) {
  return Real(f)->pMethods->xCheckReservedLock(Real(f), out);
}
int FileControl(sqlite3_file* f, int op, void* arg) {
  return Real(f)->pMethods->xFileControl(Real(f), op, arg);
}
int SectorSize(sqlite3_file* f) { return Real(f)->pMethods->xSectorSize(Real(f)); }
int DeviceCharacteristics(sqlite3_file* f) {
  return Real(f)->pMethods->xDeviceCharacteristics(Real(f));
}
int ShmMap(sqlite3_file* f, int page, int size, int extend, void volatile** out) {
  return Real(f)->pMethods->xShmMap(Real(f), page, size, extend, out);
}
int ShmLock(sqlite3_file* f, int offset, int n, int flags) {
  return Real(f)->pMethods->xShmLock(Real(f), offset, n, flags);
}
void ShmBarrier(sqlite3_file* f) { Real(f)->pMethods->xShmBarrier(Real(f)); }
int ShmUnmap(sqlite3_file* f, int del) { return Real(f)->pMethods->xShmUnmap(Real(f), del); }
int Fetch(sqlite3_file* f, sqlite3_int64 off, int amt, void** out) {
  return Real(f)->pMethods->xFetch(Real(f), off, amt, out);
}
int Unfetch(sqlite3_file* f, sqlite3_int64 off, void* p) {
  return Real(f)->pMethods->xUnfetch(Real(f), off, p);
}

const sqlite3_io_methods kIoMethods = {
    3,           Close,     Read,   Write,     Truncate,   Sync,       FileSize,
    Lock,        Unlock,    CheckReservedLock, FileControl, SectorSize, DeviceCharacteristics,
    ShmMap,      ShmLock,   ShmBarrier,        ShmUnmap,    Fetch,      Unfetch};

int Open(sqlite3_vfs* vfs, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  FaultFile* f = reinterpret_cast<FaultFile*>(file);
  f->base.pMethods = nullptr;  // SQLite closes nothing of a failed open
  if ((flags & SQLITE_OPEN_MAIN_DB) != 0 && State().opens_fail()) {
    State().CountFault();
    return SQLITE_CANTOPEN;
  }
  f->real = reinterpret_cast<sqlite3_file*>(f + 1);
  f->path = name;
  const int rc = Root(vfs)->xOpen(Root(vfs), name, f->real, flags, out_flags);
  // The wrapped file's methods must be version 3 (the unix VFS's are): WAL needs xShm*.
  f->base.pMethods =
      f->real->pMethods != nullptr && f->real->pMethods->iVersion >= 3 ? &kIoMethods : nullptr;
  if (rc == SQLITE_OK && f->base.pMethods == nullptr) {
    if (f->real->pMethods != nullptr) f->real->pMethods->xClose(f->real);
    return SQLITE_CANTOPEN;
  }
  return rc;
}

int Delete(sqlite3_vfs* vfs, const char* name, int sync_dir) {
  SqliteFaultVfs& s = State();
  if (s.crashed()) {
    s.CountFault();
    return SQLITE_IOERR_DELETE;
  }
  s.Synced(name);  // a deleted file has nothing to restore
  return Root(vfs)->xDelete(Root(vfs), name, sync_dir);
}
int Access(sqlite3_vfs* v, const char* n, int f, int* out) {
  return Root(v)->xAccess(Root(v), n, f, out);
}
int FullPathname(sqlite3_vfs* v, const char* n, int size, char* out) {
  return Root(v)->xFullPathname(Root(v), n, size, out);
}
void* DlOpen(sqlite3_vfs* v, const char* n) { return Root(v)->xDlOpen(Root(v), n); }
void DlError(sqlite3_vfs* v, int n, char* out) { Root(v)->xDlError(Root(v), n, out); }
void (*DlSym(sqlite3_vfs* v, void* h, const char* s))(void) {
  return Root(v)->xDlSym(Root(v), h, s);
}
void DlClose(sqlite3_vfs* v, void* h) { Root(v)->xDlClose(Root(v), h); }
int Randomness(sqlite3_vfs* v, int n, char* out) { return Root(v)->xRandomness(Root(v), n, out); }
int Sleep(sqlite3_vfs* v, int us) { return Root(v)->xSleep(Root(v), us); }
int CurrentTime(sqlite3_vfs* v, double* out) { return Root(v)->xCurrentTime(Root(v), out); }
int GetLastError(sqlite3_vfs* v, int n, char* out) {
  return Root(v)->xGetLastError(Root(v), n, out);
}
int CurrentTimeInt64(sqlite3_vfs* v, sqlite3_int64* out) {
  return Root(v)->xCurrentTimeInt64(Root(v), out);
}

}  // namespace

absl::StatusOr<IoFault> ParseIoFault(std::string_view word) {
  std::string w(word);
  absl::StripAsciiWhitespace(&w);
  absl::AsciiStrToLower(&w);
  if (w == "none" || w.empty()) return IoFault::kNone;
  if (w == "write") return IoFault::kWriteError;
  if (w == "fsync") return IoFault::kSyncError;
  if (w == "full") return IoFault::kDiskFull;
  if (w == "short") return IoFault::kShortWrite;
  if (w == "crash") return IoFault::kCrashAtSync;
  return absl::InvalidArgumentError(absl::StrFormat(
      "io fault must be none, write, fsync, full, short or crash, got '%s'", w));
}

SqliteFaultVfs& SqliteFaultVfs::Get() {
  static SqliteFaultVfs* const instance = [] {
    static sqlite3_vfs vfs;
    sqlite3_vfs* root = sqlite3_vfs_find(nullptr);
    DPL_CHECK(root != nullptr && root->iVersion >= 2);
    vfs = sqlite3_vfs{};
    vfs.iVersion = 2;
    vfs.szOsFile = static_cast<int>(sizeof(FaultFile)) + root->szOsFile;
    vfs.mxPathname = root->mxPathname;
    vfs.zName = kName;
    vfs.pAppData = root;
    vfs.xOpen = Open;
    vfs.xDelete = Delete;
    vfs.xAccess = Access;
    vfs.xFullPathname = FullPathname;
    vfs.xDlOpen = DlOpen;
    vfs.xDlError = DlError;
    vfs.xDlSym = DlSym;
    vfs.xDlClose = DlClose;
    vfs.xRandomness = Randomness;
    vfs.xSleep = Sleep;
    vfs.xCurrentTime = CurrentTime;
    vfs.xGetLastError = GetLastError;
    vfs.xCurrentTimeInt64 = CurrentTimeInt64;
    DPL_CHECK(sqlite3_vfs_register(&vfs, /*makeDflt=*/0) == SQLITE_OK);
    return new SqliteFaultVfs();
  }();
  return *instance;
}

void SqliteFaultVfs::Inject(IoFault fault, std::string only_path) {
  std::lock_guard<std::mutex> l(mu_);
  fault_ = fault;
  fault_path_ = std::move(only_path);
}

void SqliteFaultVfs::SetControlFile(std::string path) {
  std::lock_guard<std::mutex> l(mu_);
  control_file_ = std::move(path);
}

IoFault SqliteFaultVfs::CurrentFault(const char* path) {
  std::lock_guard<std::mutex> l(mu_);
  if (!control_file_.empty()) {
    std::ifstream in(control_file_);
    std::string word;
    in >> word;
    absl::StatusOr<IoFault> f = ParseIoFault(word);
    fault_ = f.ok() ? *f : IoFault::kNone;
  }
  if (!fault_path_.empty() && (path == nullptr || fault_path_ != path)) return IoFault::kNone;
  return fault_;
}

void SqliteFaultVfs::FailOpens(bool fail) {
  std::lock_guard<std::mutex> l(mu_);
  opens_fail_ = fail;
}

bool SqliteFaultVfs::opens_fail() const {
  std::lock_guard<std::mutex> l(mu_);
  return opens_fail_;
}

bool SqliteFaultVfs::crashed() const {
  std::lock_guard<std::mutex> l(mu_);
  return crashed_;
}

int64_t SqliteFaultVfs::faults_hit() const {
  std::lock_guard<std::mutex> l(mu_);
  return faults_hit_;
}

void SqliteFaultVfs::CountFault() {
  std::lock_guard<std::mutex> l(mu_);
  ++faults_hit_;
}

void SqliteFaultVfs::SetCrashed() {
  std::lock_guard<std::mutex> l(mu_);
  crashed_ = true;
}

void SqliteFaultVfs::RecordUndo(const std::string& path, int64_t offset, std::string old_bytes,
                                int64_t old_size) {
  std::lock_guard<std::mutex> l(mu_);
  unsynced_[path].push_back({offset, std::move(old_bytes), old_size});
}

void SqliteFaultVfs::Synced(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  unsynced_.erase(path);
}

absl::Status SqliteFaultVfs::Revert(const std::string& path, const std::vector<Undo>& undos) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::UnavailableError(absl::StrFormat("open '%s': %s", path, std::strerror(errno)));
  }
  // Newest first: each record restores the bytes and size from before its change.
  for (auto it = undos.rbegin(); it != undos.rend(); ++it) {
    const bool ok = ::pwrite(fd, it->old_bytes.data(), it->old_bytes.size(), it->offset) ==
                        static_cast<ssize_t>(it->old_bytes.size()) &&
                    ::ftruncate(fd, it->old_size) == 0;
    if (!ok) {
      const int e = errno;
      ::close(fd);
      return absl::UnavailableError(absl::StrFormat("restore '%s': %s", path, std::strerror(e)));
    }
  }
  ::fsync(fd);
  ::close(fd);
  return absl::OkStatus();
}

absl::Status SqliteFaultVfs::LoseUnsyncedWrites(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = unsynced_.find(path);
  if (it == unsynced_.end()) return absl::OkStatus();
  absl::Status s = Revert(path, it->second);
  unsynced_.erase(it);
  return s;
}

absl::Status SqliteFaultVfs::DropUnsyncedWrites() {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& [path, undos] : unsynced_) {
    if (absl::Status s = Revert(path, undos); !s.ok()) return s;
  }
  unsynced_.clear();
  crashed_ = false;
  fault_ = IoFault::kNone;
  fault_path_.clear();
  return absl::OkStatus();
}

void SqliteFaultVfs::Reset() {
  std::lock_guard<std::mutex> l(mu_);
  unsynced_.clear();
  crashed_ = false;
  fault_ = IoFault::kNone;
  fault_path_.clear();
  control_file_.clear();
  faults_hit_ = 0;
  opens_fail_ = false;
}

}  // namespace dpledger::server
