// A gtest fixture that runs one dpledgerd per test case (plaintext, no auth unless
// the test configures TLS and tokens) and hands out clients.
#pragma once

#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "client/client.h"
#include "gtest/gtest.h"
#include "tests/e2e_support.h"

namespace dpledger::e2e {

namespace v1 = ::dpledger::v1;

class E2eTest : public ::testing::Test {
 protected:
  // Starts the server; call from the test body (ASSERT_NO_FATAL_FAILURE).
  void StartServer(ServerConfig config = {}) {
    if (config.data_dir.empty()) config.data_dir = dir_.File("data");
    server_ = std::make_unique<ServerProcess>(std::move(config));
    absl::Status s = server_->Start();
    ASSERT_TRUE(s.ok()) << s;
  }

  void TearDown() override {
    if (server_ && server_->running()) {
      absl::Status s = server_->Stop();
      EXPECT_TRUE(s.ok()) << s << "\n" << server_->LogTail();
    }
    if (HasFailure() && server_) {
      std::cerr << "---- dpledgerd log tail (" << server_->log_path() << ")\n"
                << server_->LogTail() << "\n----\n";
    }
  }

  // A client of the running server; `edit` adjusts its options (token, retries).
  template <typename Edit>
  std::unique_ptr<client::Client> NewClient(Edit edit) {
    client::ClientOptions options = server_->ClientOptionsFor();
    options.timeout_ms = 60000;
    edit(options);
    auto c = client::Client::Create(options);
    if (!c.ok()) {
      ADD_FAILURE() << c.status();
      return nullptr;
    }
    return *std::move(c);
  }
  std::unique_ptr<client::Client> NewClient() {
    return NewClient([](client::ClientOptions&) {});
  }

  static v1::CreateJobRequest JobRequest(const std::string& job_id, double epsilon, double delta,
                                         const std::string& accountant = "") {
    v1::CreateJobRequest r;
    r.set_job_id(job_id);
    r.mutable_budget()->set_epsilon(epsilon);
    r.mutable_budget()->set_delta(delta);
    r.set_accountant(accountant);
    return r;
  }

  // An adaptive job under the Gaussian-DP filter (issue 10): any order of Gaussian sigmas,
  // admitted by the exact analytic curve.
  static v1::CreateJobRequest GdpJobRequest(const std::string& job_id, double epsilon,
                                            double delta) {
    v1::CreateJobRequest r = JobRequest(job_id, epsilon, delta);
    r.set_schedule(v1::SCHEDULE_ADAPTIVE);
    r.set_filter("gdp");
    return r;
  }

  // Every ledger entry of `job_id`, paging through GetLedger.
  static absl::StatusOr<std::vector<v1::LedgerEntry>> FullLedger(client::Client& c,
                                                                 const std::string& job_id) {
    std::vector<v1::LedgerEntry> all;
    v1::GetLedgerRequest request;
    request.set_job_id(job_id);
    for (int page = 0; page < 100000; ++page) {
      auto r = c.GetLedger(request);
      if (!r.ok()) return r.status();
      for (const v1::LedgerEntry& e : r->entries()) all.push_back(e);
      if (!r->more() || r->entries_size() == 0) return all;
      request.set_after_seq(r->entries(r->entries_size() - 1).seq());
    }
    return absl::InternalError("GetLedger: too many pages");
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

}  // namespace dpledger::e2e
