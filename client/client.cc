#include "client/client.h"

#include <grpcpp/generic/generic_stub.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace dpledger::client {
namespace {

// Jitter only spreads retries of many clients apart; it needs no reproducibility.
double Jitter() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.5, 1.0)(rng);
}

std::string RandomRequestId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrFormat("r-%016x%016x", rng(), rng());
}

// grpc.health.v1 messages, hand-encoded: the generated health stubs are not part
// of Debian's gRPC packages and the two messages are one field each.
// HealthCheckRequest { string service = 1; }  HealthCheckResponse { enum status = 1; }
grpc::ByteBuffer EncodeHealthRequest(const std::string& service) {
  std::string bytes;
  if (!service.empty() && service.size() < 128) {
    bytes.push_back(0x0A);  // field 1, length-delimited
    bytes.push_back(static_cast<char>(service.size()));
    bytes += service;
  }
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// The `status` field (1 = SERVING), or -1 when the bytes are not a response.
int DecodeHealthStatus(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return -1;
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  if (bytes.empty()) return 0;  // proto3 default: UNKNOWN
  if (bytes.size() >= 2 && bytes[0] == 0x08) return static_cast<unsigned char>(bytes[1]);
  return -1;
}

}  // namespace

absl::Status AckStatus(const v1::StepAck& ack) {
  if (ack.error_code() == 0) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(ack.error_code()), ack.error_message());
}

bool IsRetryable(absl::StatusCode code) {
  return code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded;
}

absl::StatusOr<std::unique_ptr<Client>> Client::Create(const ClientOptions& options) {
  if (options.target.empty()) {
    return absl::InvalidArgumentError("target must be HOST:PORT, got an empty string");
  }
  if (options.retry.max_attempts < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("retry.max_attempts must be >= 1, got %d", options.retry.max_attempts));
  }
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (options.tls) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls_ca_pem;
    creds = grpc::SslCredentials(ssl);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  grpc::ChannelArguments args;
  if (options.tls && !options.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(options.tls_server_name);
  }
  args.SetMaxReceiveMessageSize(64 << 20);  // GetRelease may carry a payload
  // Reconnect promptly after a server restart rather than after gRPC's default
  // (up to 120 s) connection backoff; our own backoff paces the retries. Not
  // GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC also uses it as the connect timeout,
  // and a TLS handshake on a loaded machine can take longer than a short one.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // After a failed connection the channel re-resolves the target before trying
  // again; gRPC's default 30 s cool-down between resolutions would stall the
  // reconnection to a restarted server for that long.
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 200);
  auto channel = grpc::CreateCustomChannel(options.target, creds, args);
  return std::unique_ptr<Client>(new Client(options, std::move(channel)));
}

Client::Client(ClientOptions options, std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)),
      channel_(std::move(channel)),
      stub_(v1::Ledger::NewStub(channel_)) {}

std::unique_ptr<grpc::ClientContext> Client::NewContext(int64_t timeout_ms) const {
  auto context = std::make_unique<grpc::ClientContext>();
  if (timeout_ms > 0) {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  }
  // Metadata rather than CallCredentials: gRPC refuses call credentials on a
  // plaintext channel, and tests run tokens over plaintext too.
  if (!options_.bearer_token.empty()) {
    context->AddMetadata("authorization", "Bearer " + options_.bearer_token);
  }
  return context;
}

void Client::Backoff(int next_attempt) const {
  const RetryOptions& r = options_.retry;
  double wait = static_cast<double>(r.initial_backoff_ms);
  for (int i = 2; i < next_attempt && wait < r.max_backoff_ms; ++i) wait *= r.backoff_multiplier;
  wait = std::min(wait, static_cast<double>(r.max_backoff_ms)) * Jitter();
  WaitUntil(std::chrono::system_clock::now() +
            std::chrono::microseconds(static_cast<int64_t>(wait * 1000)));
}

bool Client::Retryable(const absl::Status& status, int64_t* hint_ms) const {
  *hint_ms = -1;
  if (IsRetryable(status.code())) return true;
  const int64_t hint = RetryAfterMs(status);
  if (status.code() != absl::StatusCode::kResourceExhausted || hint < 0 ||
      hint > options_.retry.max_retry_after_ms) {
    return false;
  }
  *hint_ms = hint;
  return true;
}

void Client::WaitUntil(std::chrono::system_clock::time_point until) const {
  // Wait on the channel rather than merely sleep: with the sync API a connection
  // attempt makes progress only while some thread polls for it (otherwise only
  // gRPC's 5 s backup poller does), so reconnecting to a restarted server would
  // take seconds. The full backoff is kept even when the channel is ready early.
  channel_->WaitForConnected(until);
  std::this_thread::sleep_until(until);
}

bool Client::WaitForConnected(int64_t timeout_ms) {
  return channel_->WaitForConnected(std::chrono::system_clock::now() +
                                    std::chrono::milliseconds(timeout_ms));
}

template <typename Fn>
absl::Status Client::WithRetries(Fn attempt) const {
  absl::Status status;
  int64_t hint_ms = -1;  // the server's wait before the next attempt; -1: the backoff
  for (int i = 1; i <= options_.retry.max_attempts; ++i) {
    if (i > 1) {
      if (hint_ms >= 0) {
        // Never earlier than asked; spread so shed clients do not come back together.
        WaitUntil(std::chrono::system_clock::now() +
                  std::chrono::microseconds(static_cast<int64_t>(hint_ms * 1000 * (2 - Jitter()))));
      } else {
        Backoff(i);
      }
    }
    status = attempt(i);
    if (status.ok() || !Retryable(status, &hint_ms)) return status;
  }
  return status;
}

// One retried unary call: fills `out` from stub method `method`.
#define DPL_UNARY_CALL(method, request, out)                                     \
  WithRetries([&](int) {                                                         \
    auto context = NewContext(options_.timeout_ms);                              \
    return FromCall(*context, stub_->method(context.get(), (request), &(out)));  \
  })

absl::StatusOr<v1::Job> Client::CreateJob(v1::CreateJobRequest request) {
  if (request.tenant().empty()) request.set_tenant(options_.tenant);
  v1::Job job;
  bool retried = false;
  absl::Status s = WithRetries([&](int attempt) {
    retried = attempt > 1;
    auto context = NewContext(options_.timeout_ms);
    return FromCall(*context, stub_->CreateJob(context.get(), request, &job));
  });
  // An earlier attempt may have created the job before its answer was lost:
  // accept the existing job when it is the one asked for.
  if (retried && s.code() == absl::StatusCode::kAlreadyExists) {
    auto existing = GetJob(request.job_id());
    // An empty accountant is the server's choice (its --default-accountant, or the
    // filter of an adaptive schedule), so only a named one is compared.
    if (existing.ok() && existing->budget().epsilon() == request.budget().epsilon() &&
        existing->budget().delta() == request.budget().delta() &&
        (request.accountant().empty() || existing->accountant() == request.accountant()) &&
        existing->num_updates() == 0) {
      return *existing;
    }
  }
  if (!s.ok()) return s;
  return job;
}

absl::StatusOr<v1::Job> Client::GetJob(const std::string& job_id) {
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  request.set_tenant(options_.tenant);
  v1::Job job;
  absl::Status s = DPL_UNARY_CALL(GetJob, request, job);
  if (!s.ok()) return s;
  return job;
}

absl::StatusOr<v1::ListJobsResponse> Client::ListJobs(v1::ListJobsRequest request) {
  if (request.tenant().empty()) request.set_tenant(options_.tenant);
  v1::ListJobsResponse response;
  absl::Status s = DPL_UNARY_CALL(ListJobs, request, response);
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<v1::Job> Client::CloseJob(const std::string& job_id) {
  v1::CloseJobRequest request;
  request.set_job_id(job_id);
  request.set_tenant(options_.tenant);
  v1::Job job;
  bool retried = false;
  absl::Status s = WithRetries([&](int attempt) {
    retried = attempt > 1;
    auto context = NewContext(options_.timeout_ms);
    return FromCall(*context, stub_->CloseJob(context.get(), request, &job));
  });
  // A lost answer to an earlier attempt that did close the job.
  if (retried && s.code() == absl::StatusCode::kFailedPrecondition) {
    auto existing = GetJob(job_id);
    if (existing.ok() && existing->state() == v1::JOB_STATE_CLOSED) return *existing;
  }
  if (!s.ok()) return s;
  return job;
}

absl::StatusOr<v1::AppendStepsResponse> Client::AppendSteps(v1::AppendStepsRequest request) {
  if (request.tenant().empty()) request.set_tenant(options_.tenant);
  v1::AppendStepsResponse response;
  // The same seqs on every attempt: the server answers admitted ones from its ledger.
  absl::Status s = DPL_UNARY_CALL(AppendSteps, request, response);
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<v1::StepAck> Client::AppendStep(const std::string& job_id, int64_t seq,
                                               const std::vector<std::string>& specs) {
  v1::AppendStepsRequest request;
  request.set_job_id(job_id);
  v1::StepUpdate* update = request.add_updates();
  update->set_seq(seq);
  for (const std::string& spec : specs) update->add_steps()->set_spec(spec);
  auto response = AppendSteps(std::move(request));
  if (!response.ok()) return response.status();
  if (response->acks_size() != 1) {
    return absl::InternalError(
        absl::StrFormat("AppendSteps answered %d acks for 1 update", response->acks_size()));
  }
  return response->acks(0);
}

absl::StatusOr<v1::GetLedgerResponse> Client::GetLedger(v1::GetLedgerRequest request) {
  if (request.tenant().empty()) request.set_tenant(options_.tenant);
  v1::GetLedgerResponse response;
  absl::Status s = DPL_UNARY_CALL(GetLedger, request, response);
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<v1::SpentResponse> Client::Spent(v1::SpentRequest request) {
  if (request.tenant().empty()) request.set_tenant(options_.tenant);
  v1::SpentResponse response;
  absl::Status s = DPL_UNARY_CALL(Spent, request, response);
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<v1::RemainingResponse> Client::Remaining(v1::RemainingRequest request) {
  if (request.tenant().empty()) request.set_tenant(options_.tenant);
  v1::RemainingResponse response;
  absl::Status s = DPL_UNARY_CALL(Remaining, request, response);
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<v1::ReleaseRecord> Client::Release(v1::ReleaseRequest request) {
  if (request.tenant().empty()) request.set_tenant(options_.tenant);
  if (request.request_id().empty()) request.set_request_id(RandomRequestId());
  v1::ReleaseRecord record;
  absl::Status s = DPL_UNARY_CALL(Release, request, record);
  if (!s.ok()) return s;
  return record;
}

absl::StatusOr<v1::ReleaseRecord> Client::GetRelease(v1::GetReleaseRequest request) {
  if (request.tenant().empty()) request.set_tenant(options_.tenant);
  v1::ReleaseRecord record;
  absl::Status s = DPL_UNARY_CALL(GetRelease, request, record);
  if (!s.ok()) return s;
  return record;
}

#undef DPL_UNARY_CALL

absl::Status Client::CheckHealth(const std::string& service, int64_t timeout_ms) {
  grpc::GenericStub stub(channel_);
  auto context = NewContext(timeout_ms > 0 ? timeout_ms : options_.timeout_ms);
  grpc::CompletionQueue cq;
  grpc::ByteBuffer response;
  grpc::Status status;
  auto call = stub.PrepareUnaryCall(context.get(), "/grpc.health.v1.Health/Check",
                                    EncodeHealthRequest(service), &cq);
  call->StartCall();
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  if (!cq.Next(&tag, &ok) || !ok) return absl::UnavailableError("health check did not complete");
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (!status.ok()) return FromGrpc(status);
  const int health = DecodeHealthStatus(response);
  if (health != 1) {
    return absl::UnavailableError(
        absl::StrFormat("server health status is %d, not SERVING (1)", health));
  }
  return absl::OkStatus();
}

std::unique_ptr<StepStream> Client::OpenStream(const std::string& job_id) {
  return std::unique_ptr<StepStream>(new StepStream(this, job_id));
}

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

namespace {
constexpr char kRetryPayload[] = "type.dpledger.dev/retry-after-ms";
}  // namespace

absl::Status FromCall(const grpc::ClientContext& context, const grpc::Status& s) {
  absl::Status out = FromGrpc(s);
  if (out.ok()) return out;
  const auto& trailers = context.GetServerTrailingMetadata();
  auto it = trailers.find("retry-after-ms");
  int64_t ms = 0;
  if (it != trailers.end() &&
      absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), &ms) && ms >= 0) {
    out.SetPayload(kRetryPayload, absl::Cord(std::to_string(ms)));
  }
  return out;
}

int64_t RetryAfterMs(const absl::Status& status) {
  auto p = status.GetPayload(kRetryPayload);
  int64_t ms = 0;
  if (!p.has_value() || !absl::SimpleAtoi(std::string(*p), &ms)) return -1;
  return ms;
}

}  // namespace dpledger::client
