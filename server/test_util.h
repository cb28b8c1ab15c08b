// Helpers shared by the server's unit tests (not linked into dpledgerd).
#pragma once

#include <filesystem>
#include <random>
#include <string>

#include "absl/strings/str_format.h"
#include "core/mechanisms/mechanism.h"
#include "core/util/check.h"

namespace dpledger::server::testing {

// A fresh directory under the system temp dir, removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            absl::StrFormat("dpledger_test_%08x%08x", rd(), rd());
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string path() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline core::MechanismEvent Gaussian(double sigma, int64_t count = 1) {
  absl::StatusOr<core::Mechanism> m = core::Mechanism::Gaussian(sigma);
  DPL_CHECK(m.ok());
  return {*m, count};
}

}  // namespace dpledger::server::testing
