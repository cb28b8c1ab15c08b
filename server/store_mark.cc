#include "server/store_mark.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace dpledger::server {
namespace {

absl::Status Errno(std::string_view what, const std::string& path) {
  // The directory or file vanished under a running server: the store is lost, not busy.
  const auto code = errno == ENOENT ? absl::StatusCode::kDataLoss : absl::StatusCode::kUnavailable;
  return absl::Status(code, absl::StrFormat("store mark: %s '%s': %s", std::string(what), path,
                                            std::strerror(errno)));
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

absl::StatusOr<std::optional<StoreMark>> ReadStoreMark(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return std::optional<StoreMark>();
    return Errno("cannot read", path);
  }
  std::stringstream text;
  text << in.rdbuf();
  StoreMark m;
  bool id = false, jobs = false, updates = false, head = false;
  for (absl::string_view line : absl::StrSplit(text.str(), '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits(' ', 1));
    if (kv.first == "store_id") id = !(m.store_id = kv.second).empty();
    if (kv.first == "jobs") jobs = absl::SimpleAtoi(kv.second, &m.jobs);
    if (kv.first == "updates") updates = absl::SimpleAtoi(kv.second, &m.updates);
    if (kv.first == "head") head = true, m.head = kv.second;
  }
  if (!id || !jobs || !updates || !head) {
    return absl::DataLossError(absl::StrFormat(
        "store mark '%s' is damaged (needs store_id, jobs, updates, head lines)", path));
  }
  return std::optional<StoreMark>(m);
}

absl::Status WriteStoreMark(const std::string& path, const StoreMark& m) {
  const std::string tmp = path + ".tmp";
  const std::string text = absl::StrFormat("store_id %s\njobs %d\nupdates %d\nhead %s\n",
                                           m.store_id, m.jobs, m.updates, m.head);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("cannot create", tmp);
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  errno = saved;
  if (!ok) return Errno("cannot write", tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Errno("cannot rename to", path);
  const std::string dir = DirOf(path);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return Errno("cannot open directory", dir);
  const bool synced = ::fsync(dfd) == 0;
  ::close(dfd);
  if (!synced) return Errno("cannot fsync directory", dir);
  return absl::OkStatus();
}

}  // namespace dpledger::server
