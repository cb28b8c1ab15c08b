// StepStream: StreamSteps with reconnection and resend by sequence number.
#include <chrono>
#include <thread>

#include "absl/strings/str_format.h"
#include "client/client.h"

namespace dpledger::client {

StepStream::StepStream(const Client* client, std::string job_id)
    : client_(client), job_id_(std::move(job_id)) {}

StepStream::~StepStream() { Finish(/*cancel=*/true).IgnoreError(); }

absl::Status StepStream::Finish(bool cancel) {
  if (!stream_) return absl::OkStatus();
  if (cancel) context_->TryCancel();
  // gRPC wants every incoming message read before Finish.
  v1::StepAck discard;
  while (stream_->Read(&discard)) {
  }
  grpc::Status status = stream_->Finish();
  absl::Status out = FromCall(*context_, status);
  stream_.reset();
  context_.reset();
  return out;
}

bool StepStream::WriteOne(const v1::StepUpdate& update) {
  // job_id and tenant on every message: allowed by the API, and it keeps each
  // resend independent of where the previous stream broke.
  v1::StreamStepsRequest request;
  request.set_job_id(job_id_);
  request.set_tenant(client_->options().tenant);
  *request.mutable_update() = update;
  return stream_->Write(request);
}

absl::Status StepStream::OpenAndResend() {
  context_ = client_->NewContext(client_->options().stream_timeout_ms);
  stream_ = client_->stub_->StreamSteps(context_.get());
  broken_ = false;
  for (const v1::StepUpdate& update : pending_) {
    if (!WriteOne(update)) {
      // The call failed (server down, refused); its status says why.
      absl::Status s = Finish(/*cancel=*/false);
      return s.ok() ? absl::UnavailableError("stream closed while resending") : s;
    }
  }
  return absl::OkStatus();
}

absl::Status StepStream::Reconnect(absl::Status cause) {
  const int max_attempts = client_->options().retry.max_attempts;
  while (true) {
    int64_t hint_ms = -1;
    if (!client_->Retryable(cause, &hint_ms) || failures_ + 1 >= max_attempts) return cause;
    ++failures_;
    if (hint_ms >= 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(hint_ms));
    } else {
      client_->Backoff(failures_ + 1);
    }
    if (stream_) Finish(/*cancel=*/true).IgnoreError();
    ++reconnects_;
    cause = OpenAndResend();
    if (cause.ok()) return absl::OkStatus();
  }
}

absl::Status StepStream::Write(v1::StepUpdate update) {
  pending_.push_back(std::move(update));
  if (broken_) return absl::OkStatus();  // Read() reconnects and resends it
  if (!stream_) {
    absl::Status s = OpenAndResend();
    if (!s.ok()) return Reconnect(s);
    return absl::OkStatus();
  }
  if (!WriteOne(pending_.back())) broken_ = true;
  return absl::OkStatus();
}

absl::StatusOr<v1::StepAck> StepStream::Read() {
  if (pending_.empty()) {
    return absl::FailedPreconditionError("Read: no update is awaiting an ack");
  }
  while (true) {
    if (!stream_ || broken_) {
      absl::Status cause = absl::UnavailableError("stream broken while writing");
      if (stream_) {
        absl::Status s = Finish(/*cancel=*/true);
        // A write failed because the call ended: report the call's own status.
        if (!s.ok() && s.code() != absl::StatusCode::kCancelled) cause = s;
      }
      if (absl::Status s = Reconnect(cause); !s.ok()) return s;
      continue;
    }
    v1::StepAck ack;
    const bool got = stream_->Read(&ack);
    if (got && ack.stream_end()) {
      // The server is ending this stream (idle, shutting down): half-close so the call ends
      // with the server's status, then carry on as after any broken stream.
      stream_->WritesDone();
      absl::Status s = Finish(/*cancel=*/false);
      if (s.ok() || s.code() == absl::StatusCode::kCancelled) {
        s = absl::Status(static_cast<absl::StatusCode>(ack.error_code()), ack.error_message());
      }
      if (absl::Status r = Reconnect(s); !r.ok()) return r;
      continue;
    }
    if (got) {
      const v1::StepUpdate& front = pending_.front();
      if (ack.seq() != front.seq() && ack.error_code() == 0) {
        return absl::InternalError(absl::StrFormat(
            "StreamSteps: ack for seq %d while seq %d was awaited", ack.seq(), front.seq()));
      }
      pending_.pop_front();
      failures_ = 0;
      return ack;
    }
    absl::Status s = Finish(/*cancel=*/false);
    if (s.ok()) s = absl::UnavailableError("StreamSteps ended with updates unacknowledged");
    if (absl::Status r = Reconnect(s); !r.ok()) return r;
  }
}

absl::Status StepStream::Close() {
  if (!stream_) return absl::OkStatus();
  if (!broken_) stream_->WritesDone();
  absl::Status s = Finish(/*cancel=*/broken_);
  pending_.clear();
  return s;
}

}  // namespace dpledger::client
