#include "server/store_mark.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "server/ledger_types.h"
#include "spdlog/spdlog.h"

namespace dpledger::server {
namespace {

constexpr size_t kSlot = 512;

absl::Status Errno(std::string_view what, const std::string& path) {
  // The directory or file vanished under a running server: the store is lost, not busy.
  const auto code = errno == ENOENT ? absl::StatusCode::kDataLoss : absl::StatusCode::kUnavailable;
  return absl::Status(code, absl::StrFormat("store mark: %s '%s': %s", std::string(what), path,
                                            std::strerror(errno)));
}

std::string Body(uint64_t generation, const StoreMark& m) {
  return absl::StrFormat(
      "dplmark1 gen=%d store_id=%s jobs=%d updates=%d releases=%d closed=%d stopped=%d head=%s",
      generation, m.store_id, m.jobs, m.updates, m.releases, m.closed, m.stopped,
      m.head.empty() ? "-" : m.head);
}

// One slot's record, when it is complete and its checksum matches.
std::optional<std::pair<uint64_t, StoreMark>> ParseSlot(std::string_view slot) {
  const size_t end = slot.find('\n');
  if (end == std::string_view::npos) return std::nullopt;
  const std::string_view line = slot.substr(0, end);
  const size_t sum = line.rfind(" sum=");
  if (sum == std::string_view::npos) return std::nullopt;
  const std::string_view body = line.substr(0, sum);
  if (Sha256Hex(body) != line.substr(sum + 5)) return std::nullopt;
  uint64_t gen = 0;
  StoreMark m;
  int fields = 0;
  for (absl::string_view kv : absl::StrSplit(absl::string_view(body.data(), body.size()), ' ')) {
    std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    if (p.first == "gen") fields += absl::SimpleAtoi(p.second, &gen);
    if (p.first == "store_id") fields += !(m.store_id = p.second).empty();
    if (p.first == "jobs") fields += absl::SimpleAtoi(p.second, &m.jobs);
    if (p.first == "updates") fields += absl::SimpleAtoi(p.second, &m.updates);
    if (p.first == "releases") fields += absl::SimpleAtoi(p.second, &m.releases);
    if (p.first == "head") ++fields, m.head = p.second == "-" ? "" : p.second;
    // Absent from marks written before they were counted: 0 then.
    if (p.first == "closed" && !absl::SimpleAtoi(p.second, &m.closed)) return std::nullopt;
    if (p.first == "stopped" && !absl::SimpleAtoi(p.second, &m.stopped)) return std::nullopt;
  }
  if (fields != 6) return std::nullopt;
  return std::make_pair(gen, m);
}

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

}  // namespace

std::string NewStoreId() {
  unsigned char b[16];
  if (RAND_bytes(b, sizeof b) != 1) {
    // OpenSSL's generator failing is not a state to serve from; fall back to /dev/urandom.
    std::ifstream("/dev/urandom", std::ios::binary).read(reinterpret_cast<char*>(b), sizeof b);
  }
  std::string out;
  for (unsigned char c : b) absl::StrAppendFormat(&out, "%02x", c);
  return out;
}

absl::StatusOr<std::unique_ptr<StoreMarkFile>> StoreMarkFile::Open(
    const std::string& path, std::optional<StoreMark>* existing) {
  existing->reset();
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return Errno("cannot create", path);
    // The new file's directory entry must be durable before a record in it counts.
    const std::string dir = DirOf(path);
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || ::fsync(dfd) != 0) {
      if (dfd >= 0) ::close(dfd);
      ::close(fd);
      return Errno("cannot fsync directory", dir);
    }
    ::close(dfd);
    return std::unique_ptr<StoreMarkFile>(new StoreMarkFile(path, fd));
  }
  if (fd < 0) return Errno("cannot open", path);
  std::unique_ptr<StoreMarkFile> file(new StoreMarkFile(path, fd));
  std::string data(2 * kSlot, '\0');
  const ssize_t n = ::pread(fd, data.data(), data.size(), 0);
  if (n < 0) return Errno("cannot read", path);
  data.resize(static_cast<size_t>(n));
  for (size_t off = 0; off < data.size(); off += kSlot) {
    std::optional<std::pair<uint64_t, StoreMark>> r =
        ParseSlot(std::string_view(data).substr(off, kSlot));
    if (r && r->first >= file->generation_) {
      file->generation_ = r->first;
      *existing = r->second;
    }
  }
  if (!existing->has_value()) {
    return absl::DataLossError(absl::StrFormat(
        "store mark '%s' holds no valid record (%d bytes): it was damaged or truncated", path,
        data.size()));
  }
  return file;
}

void AddCommitted(StoreMark& mark, std::span<const WriteBatch* const> batches) {
  for (const WriteBatch* b : batches) {
    mark.jobs += static_cast<int64_t>(b->new_jobs.size());
    mark.updates += static_cast<int64_t>(b->updates.size());
    mark.releases += static_cast<int64_t>(b->releases.size());
    for (const JobStateChange& c : b->state_changes) mark.closed += c.state == JobState::kClosed;
    for (const EvrMark& m : b->evr_marks) mark.stopped += m.state == EvrState::kStopped;
    if (!b->updates.empty()) mark.head = b->updates.back().chain;
  }
}

absl::StatusOr<std::unique_ptr<StoreMarkFile>> CheckStoreMark(
    const std::string& mark_path, const std::string& database, StoreMark& now,
    const std::function<absl::StatusOr<bool>(const std::string& head)>& has_head,
    bool accept_data_loss) {
  std::optional<StoreMark> stored;
  absl::StatusOr<std::unique_ptr<StoreMarkFile>> file = StoreMarkFile::Open(mark_path, &stored);
  if (!file.ok()) return file.status();
  std::string lost;
  if (!stored.has_value()) {
    if (now.jobs > 0) {
      spdlog::warn("store mark '{}' is missing beside a database with {} jobs: writing it "
                   "(first start since the mark was introduced, or the mark was deleted)",
                   mark_path, now.jobs);
    }
  } else if (stored->store_id != now.store_id) {
    lost = absl::StrFormat(
        "database %s is not the store its mark '%s' describes (store id '%s', the mark "
        "says '%s'): the database was deleted, emptied or replaced, losing %d acknowledged "
        "updates of %d jobs",
        database, mark_path, now.store_id, stored->store_id, stored->updates, stored->jobs);
  } else if (now.updates < stored->updates || now.jobs < stored->jobs ||
             now.releases < stored->releases) {
    lost = absl::StrFormat(
        "database %s holds %d updates of %d jobs and %d releases but %d updates of %d jobs "
        "and %d releases were acknowledged (mark '%s'): the newest commits are lost (a WAL "
        "deleted after a crash, or a database restored from an older backup?)",
        database, now.updates, now.jobs, now.releases, stored->updates, stored->jobs,
        stored->releases, mark_path);
  } else if (now.closed < stored->closed || now.stopped < stored->stopped) {
    lost = absl::StrFormat(
        "database %s holds %d closed jobs and %d EVR-stopped jobs but %d closes and %d EVR "
        "stops were acknowledged (mark '%s'): acknowledged job state changes are lost",
        database, now.closed, now.stopped, stored->closed, stored->stopped, mark_path);
  } else if (!stored->head.empty()) {
    absl::StatusOr<bool> found = has_head(stored->head);
    if (!found.ok()) return found.status();
    if (!*found) {
      lost = absl::StrFormat(
          "database %s has no update with the newest acknowledged chain head %s (mark "
          "'%s'): acknowledged updates were lost or rewritten",
          database, stored->head, mark_path);
    }
  }
  if (!lost.empty()) {
    if (!accept_data_loss) {
      return absl::DataLossError(absl::StrFormat(
          "%s. Restore the store from a backup, or start with --accept-data-loss to serve "
          "what is left",
          lost));
    }
    spdlog::critical("ACCEPTING DATA LOSS (--accept-data-loss): {}", lost);
  }
  now.head = stored.has_value() && lost.empty() ? stored->head : "";
  if (absl::Status s = (*file)->Write(now); !s.ok()) return s;
  return file;
}

StoreMarkFile::~StoreMarkFile() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status StoreMarkFile::Write(const StoreMark& mark) {
  const uint64_t gen = generation_ + 1;
  const std::string body = Body(gen, mark);
  std::string slot = absl::StrFormat("%s sum=%s\n", body, Sha256Hex(body));
  if (slot.size() > kSlot) {
    return absl::InternalError(absl::StrFormat("store mark record of %d bytes", slot.size()));
  }
  slot.resize(kSlot, ' ');
  const off_t off = static_cast<off_t>((gen % 2) * kSlot);
  if (::pwrite(fd_, slot.data(), slot.size(), off) != static_cast<ssize_t>(slot.size()) ||
      ::fdatasync(fd_) != 0) {
    return Errno("cannot write", path_);
  }
  generation_ = gen;
  return absl::OkStatus();
}

}  // namespace dpledger::server
