#include "server/stream_limiter.h"

#include <grpcpp/server_context.h>

#include <algorithm>

#include "absl/strings/str_format.h"
#include "server/status_util.h"
#include "spdlog/spdlog.h"

namespace dpledger::server {

using Clock = std::chrono::steady_clock;

StreamLimiter::Slot::Slot(StreamLimiter* limiter, grpc::ServerContext* ctx)
    : limiter_(limiter), ctx_(ctx), last_activity_(Clock::now()) {}

StreamLimiter::Slot::~Slot() {
  std::lock_guard<std::mutex> lock(limiter_->mu_);
  limiter_->slots_.erase(this);
  if (!tenant_.empty() && --limiter_->per_tenant_[tenant_] == 0) {
    limiter_->per_tenant_.erase(tenant_);
  }
  if (limiter_->metrics_) limiter_->metrics_->SetOpenStreams(limiter_->slots_.size());
}

absl::Status StreamLimiter::Slot::SetTenant(const std::string& tenant) {
  std::lock_guard<std::mutex> lock(limiter_->mu_);
  int& n = limiter_->per_tenant_[tenant];
  if (n >= limiter_->options_.max_streams_per_tenant) {
    if (n == 0) limiter_->per_tenant_.erase(tenant);
    return limiter_->Exhausted(
        absl::StrFormat("tenant '%s' has %d streams open, its limit (max_streams_per_tenant)",
                        tenant, limiter_->options_.max_streams_per_tenant),
        "streams_tenant");
  }
  ++n;
  tenant_ = tenant;
  return absl::OkStatus();
}

void StreamLimiter::Slot::MessageRead() {
  std::lock_guard<std::mutex> lock(limiter_->mu_);
  ++pending_;
  last_activity_ = Clock::now();
}

void StreamLimiter::Slot::WriteBegin() {
  std::lock_guard<std::mutex> lock(limiter_->mu_);
  writing_ = true;
  write_since_ = Clock::now();
}

void StreamLimiter::Slot::WriteEnd() {
  std::lock_guard<std::mutex> lock(limiter_->mu_);
  writing_ = false;
  pending_ = std::max<int64_t>(0, pending_ - 1);
  last_activity_ = Clock::now();
}

void StreamLimiter::Slot::SetFarewell(std::function<bool(const std::string&)> farewell) {
  std::lock_guard<std::mutex> lock(limiter_->mu_);
  farewell_ = std::move(farewell);
}

std::string StreamLimiter::Slot::ended_reason() const {
  std::lock_guard<std::mutex> lock(limiter_->mu_);
  return ended_;
}

StreamLimiter::StreamLimiter(StreamLimitOptions options, Metrics* metrics)
    : options_(options), metrics_(metrics) {
  reaper_ = std::thread([this] { Reap(); });
}

StreamLimiter::~StreamLimiter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
  }
  cv_.notify_all();
  reaper_.join();
}

absl::Status StreamLimiter::Exhausted(std::string what, std::string_view shed_reason) {
  if (metrics_) metrics_->Shed(shed_reason);
  return RetryLaterError(absl::StatusCode::kResourceExhausted, what, options_.retry_after_ms);
}

absl::StatusOr<std::unique_ptr<StreamLimiter::Slot>> StreamLimiter::Open(
    grpc::ServerContext* ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closing_) {
    if (metrics_) metrics_->Shed("shutdown");
    return RetryLaterError(absl::StatusCode::kUnavailable, "the server is shutting down",
                           options_.retry_after_ms);
  }
  if (static_cast<int>(slots_.size()) >= options_.max_streams) {
    return Exhausted(absl::StrFormat("%d streams are open, the server's limit (max_streams)",
                                     options_.max_streams),
                     "streams_server");
  }
  std::unique_ptr<Slot> slot(new Slot(this, ctx));
  slots_.insert(slot.get());
  if (metrics_) metrics_->SetOpenStreams(slots_.size());
  return slot;
}

void StreamLimiter::EndLocked(Slot* slot, std::string reason) {
  if (!slot->ended_.empty()) {
    // Said goodbye before; a stalled write or shutdown does not wait for the grace.
    if (!slot->cancelled_ && (reason == "stream_stalled" || reason == "shutdown")) {
      slot->cancelled_ = true;
      slot->ctx_->TryCancel();
    }
    return;
  }
  spdlog::info("stream ended by the server reason={} tenant={} peer={}", reason,
               slot->tenant_.empty() ? "-" : slot->tenant_, slot->ctx_->peer());
  if (metrics_) metrics_->Shed(reason);
  slot->ended_ = std::move(reason);
  slot->ended_at_ = Clock::now();
  if (!slot->writing_ && slot->farewell_ && slot->farewell_(slot->ended_)) return;
  slot->cancelled_ = true;
  slot->ctx_->TryCancel();
}

void StreamLimiter::CancelAll() {
  std::lock_guard<std::mutex> lock(mu_);
  closing_ = true;
  for (Slot* s : slots_) EndLocked(s, "shutdown");
  hurry_ = true;  // the reaper cancels them after the farewell grace
  cv_.notify_all();
}

int StreamLimiter::open_streams() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(slots_.size());
}

void StreamLimiter::Reap() {
  const auto idle = std::chrono::milliseconds(options_.idle_timeout_ms);
  const auto stall = std::chrono::milliseconds(options_.stall_timeout_ms);
  // Check often enough that a stream outlives its timeout by at most a quarter of it.
  const auto period = std::clamp<std::chrono::milliseconds>(std::min(idle, stall) / 4,
                                                            std::chrono::milliseconds(10),
                                                            std::chrono::milliseconds(1000));
  const auto grace = std::chrono::milliseconds(options_.farewell_grace_ms);
  bool farewells = false;  // some stream was told goodbye and is not cancelled yet
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    const auto wait = farewells ? std::min<std::chrono::milliseconds>(
                                      period, grace / 4 + std::chrono::milliseconds(1))
                                : period;
    cv_.wait_for(lock, wait, [&] { return (closing_ && slots_.empty()) || hurry_; });
    if (closing_ && slots_.empty()) break;
    hurry_ = false;
    const auto now = Clock::now();
    farewells = false;
    for (Slot* s : slots_) {
      if (!s->ended_.empty()) {
        // Told goodbye: cancelled once the client had its grace to half-close.
        if (!s->cancelled_ && now - s->ended_at_ > grace) {
          s->cancelled_ = true;
          s->ctx_->TryCancel();
        }
        farewells |= !s->cancelled_;
        if (s->writing_ && now - s->write_since_ > stall) EndLocked(s, "stream_stalled");
      } else if (s->writing_ && now - s->write_since_ > stall) {
        EndLocked(s, "stream_stalled");
      } else if (!s->writing_ && s->pending_ == 0 && now - s->last_activity_ > idle) {
        EndLocked(s, "stream_idle");
        farewells |= !s->cancelled_;
      }
    }
  }
}

}  // namespace dpledger::server
