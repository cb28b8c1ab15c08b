// dpledger C++ client: a synchronous API over the dpledger.v1.Ledger stubs
// (proto/dpledger.proto) with TLS, bearer tokens and retries.
//
// Retries. UNAVAILABLE and DEADLINE_EXCEEDED are retried with exponential backoff
// (RetryOptions). RESOURCE_EXHAUSTED is retried only when the server sent a
// retry-after-ms hint (its rate and stream limits, issue 11) of at most
// retry.max_retry_after_ms, after waiting that long (up to 1.5x, spread); without
// one (a quota, an oversized message) it is returned at once. Every retry resends the very same request, so the server's
// idempotency makes it safe: a step update is keyed by its sequence number (a
// retry of an admitted seq returns the original ack, charging nothing), a release
// by its request_id (the client fills one in when the caller leaves it empty).
// CreateJob and CloseJob are made idempotent on the client side: a retry that
// meets ALREADY_EXISTS / a closed job reads the job back and accepts it when it
// matches what was asked for.
//
// Errors are absl::Status with the gRPC code and message unchanged (the two enums
// agree value for value).
//
// Thread safety: a Client may be shared by threads; a StepStream may not.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/dpledger.grpc.pb.h"
#include "proto/dpledger.pb.h"

namespace dpledger::client {

namespace v1 = ::dpledger::v1;

struct RetryOptions {
  int max_attempts = 10;            // tries of one call, the first included; 1 = no retry
  int64_t initial_backoff_ms = 50;  // wait before the second try
  int64_t max_backoff_ms = 2000;    // cap of one wait
  double backoff_multiplier = 2.0;
  int64_t max_retry_after_ms = 10000;  // longest server-hinted wait honoured (else: returned)
};

struct ClientOptions {
  std::string target;           // "host:port"
  std::string bearer_token;     // sent as "authorization: Bearer <token>"; empty: none
  std::string tenant;           // put in requests that leave tenant empty; empty: the token's
  bool tls = false;             // false: plaintext (servers started with --insecure)
  std::string tls_ca_pem;       // PEM roots; empty with tls: the system roots
  std::string tls_server_name;  // checked against the certificate instead of the host
  int64_t timeout_ms = 30000;   // deadline of one unary attempt
  // Deadline of a whole StepStream connection; 0: none (streams are long-lived).
  int64_t stream_timeout_ms = 0;
  RetryOptions retry;
};

// Fills `options` from the environment where a field is still empty:
// DPLEDGER_CLIENT_TOKEN, DPLEDGER_CLIENT_TOKEN_FILE (its first line),
// DPLEDGER_CLIENT_TENANT, DPLEDGER_CLIENT_TLS_CA (a PEM file; implies tls),
// DPLEDGER_CLIENT_TLS_SERVER_NAME. (The CLIENT_ infix keeps them apart from
// dpledgerd's DPLEDGER_<FLAG> settings, e.g. its DPLEDGER_TOKEN_FILE.)
absl::Status ApplyEnvironment(ClientOptions& options);

// Reads a whole file (certificates, tokens, payloads). NOT_FOUND / INTERNAL naming `path`.
absl::StatusOr<std::string> ReadFile(const std::string& path);
// The token in a token file: its first line, trimmed.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// The status of a StreamSteps ack: OK, or its error_code and error_message.
absl::Status AckStatus(const v1::StepAck& ack);

// A call's gRPC status as an absl::Status: the one client-side conversion (the code enums
// share their values, both google.rpc.Code).
absl::Status FromGrpc(const grpc::Status& s);
// FromGrpc of a finished call, keeping the server's "retry-after-ms" trailer (RetryAfterMs).
absl::Status FromCall(const grpc::ClientContext& context, const grpc::Status& s);
// The server's retry hint carried by a FromCall status, in ms; -1 when none.
int64_t RetryAfterMs(const absl::Status& status);

// Whether `code` is retried (UNAVAILABLE, DEADLINE_EXCEEDED).
bool IsRetryable(absl::StatusCode code);

class StepStream;

class Client {
 public:
  // INVALID_ARGUMENT for an empty target or unreadable TLS settings.
  static absl::StatusOr<std::unique_ptr<Client>> Create(const ClientOptions& options);

  const ClientOptions& options() const { return options_; }

  absl::StatusOr<v1::Job> CreateJob(v1::CreateJobRequest request);
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id);
  absl::StatusOr<v1::ListJobsResponse> ListJobs(v1::ListJobsRequest request);
  absl::StatusOr<v1::Job> CloseJob(const std::string& job_id);

  // Updates must carry contiguous seqs (the first: the job's last_seq + 1, or an
  // already admitted seq for a retry). A refused update is an ack with
  // admitted = false, not an error.
  absl::StatusOr<v1::AppendStepsResponse> AppendSteps(v1::AppendStepsRequest request);
  // One update of one or more steps given as SPEC strings, e.g.
  // "subsampled_gaussian:sigma=1,q=0.001,count=100".
  absl::StatusOr<v1::StepAck> AppendStep(const std::string& job_id, int64_t seq,
                                         const std::vector<std::string>& specs);
  absl::StatusOr<v1::GetLedgerResponse> GetLedger(v1::GetLedgerRequest request);

  absl::StatusOr<v1::SpentResponse> Spent(v1::SpentRequest request);
  absl::StatusOr<v1::RemainingResponse> Remaining(v1::RemainingRequest request);

  // Fills request_id with a fresh random id when empty, so retries are safe.
  absl::StatusOr<v1::ReleaseRecord> Release(v1::ReleaseRequest request);
  absl::StatusOr<v1::ReleaseRecord> GetRelease(v1::GetReleaseRequest request);

  // grpc.health.v1.Health/Check: OK when the server says SERVING,
  // UNAVAILABLE otherwise. Not retried (probes want a prompt answer).
  absl::Status CheckHealth(const std::string& service = "", int64_t timeout_ms = 0);

  // Connects the channel (if needed) and waits until it is READY or `timeout_ms`
  // passes; true when READY. Useful while waiting for a server to come up.
  bool WaitForConnected(int64_t timeout_ms);

  // Opens a StreamSteps connection for `job_id` (lazily: the first Write connects).
  std::unique_ptr<StepStream> OpenStream(const std::string& job_id);

 private:
  friend class StepStream;
  Client(ClientOptions options, std::shared_ptr<grpc::Channel> channel);

  // A context with the deadline (0: none) and the bearer token.
  std::unique_ptr<grpc::ClientContext> NewContext(int64_t timeout_ms) const;
  // Runs `attempt` until it succeeds, fails with a code that is not retried, or
  // the attempts run out. `attempt` receives the 1-based attempt number.
  template <typename Fn>
  absl::Status WithRetries(Fn attempt) const;
  // Waits the backoff before attempt `next_attempt` (2, 3, ...).
  void Backoff(int next_attempt) const;
  // Whether a failed attempt's status may be retried; sets `hint_ms` to the server's
  // retry-after wait to honour, or -1 for the backoff.
  bool Retryable(const absl::Status& status, int64_t* hint_ms) const;
  // Waits until `until` (keeping the channel connecting meanwhile).
  void WaitUntil(std::chrono::system_clock::time_point until) const;

  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Ledger::Stub> stub_;
};

// A StreamSteps connection that survives server restarts. Updates written and
// not yet acknowledged are kept; when the stream breaks with a retryable code,
// Read() opens a new one after a backoff and resends them in order with their
// original seqs. The server answers an already admitted seq with its original
// ack (duplicate = true), so a retried update is never charged twice. A stream
// the server ends itself (idle, shutting down: a StepAck with stream_end) is
// half-closed and treated the same way; when no retry is left, Read() returns
// the server's status and reason (UNAVAILABLE), not a bare CANCELLED.
//
// Use from one thread: Write() some updates (keep at most a few hundred in
// flight so flow control cannot stall), then Read() their acks, which come in
// write order. Not thread-safe.
class StepStream {
 public:
  ~StepStream();

  // Sends one update. An error only when the stream cannot be re-established.
  absl::Status Write(v1::StepUpdate update);
  // The ack of the oldest unacknowledged update. A per-update error (gap,
  // conflict, bad step) is in the ack (see AckStatus), not in the returned status.
  absl::StatusOr<v1::StepAck> Read();
  // Half-closes and returns the final status. Unread acks are lost.
  absl::Status Close();

  size_t in_flight() const { return pending_.size(); }
  int reconnects() const { return reconnects_; }

 private:
  friend class Client;
  StepStream(const Client* client, std::string job_id);

  // Ends the current stream (if any) and returns its final status.
  absl::Status Finish(bool cancel);
  // Opens a fresh stream and writes every pending update, retrying with backoff
  // while the failures are retryable; `cause` is returned when tries run out.
  absl::Status Reconnect(absl::Status cause);
  absl::Status OpenAndResend();
  bool WriteOne(const v1::StepUpdate& update);

  const Client* client_;
  std::string job_id_;
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::StreamStepsRequest, v1::StepAck>> stream_;
  bool broken_ = false;                 // a write failed: the next Read reconnects
  std::deque<v1::StepUpdate> pending_;  // written, not yet acknowledged, in seq order
  int failures_ = 0;                    // consecutive failed connections since the last ack
  int reconnects_ = 0;
};

}  // namespace dpledger::client
