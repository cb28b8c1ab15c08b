// Bounds on StreamSteps calls (issue 11 "Streams"): each open stream holds three threads and
// up to max_stream_inflight messages, so their number is capped server-wide and per tenant
// (RESOURCE_EXHAUSTED with a retry hint beyond), and a reaper thread ends a stream that has
// been idle (no message and nothing pending) for idle_timeout_ms or whose client has not
// taken an ack for stall_timeout_ms (a client that does not read acks fills the send window;
// the stream then stops reading, which bounds its memory, and is ended here). Shutdown ends
// every stream at once (CancelAll): what was admitted is committed, what was not is dropped
// unacknowledged, and a client's retry of those seqs is answered from the ledger.
//
// Ending a stream: the stream's farewell (SetFarewell) sends a last StepAck with stream_end
// and the reason, so a client that half-closes gets the call's real status (UNAVAILABLE and
// the reason) rather than a bare CANCELLED; after farewell_grace_ms, or at once when the
// farewell cannot be sent (an ack write is blocked), grpc::ServerContext::TryCancel (the
// only way to unblock a sync Read) ends it and the client sees CANCELLED. The reason is
// logged and counted in dpledger_shed_total either way.
//
// Thread safety: all methods are thread-safe; a Slot is used by its stream's threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "server/metrics.h"

namespace grpc {
class ServerContext;
}

namespace dpledger::server {

struct StreamLimitOptions {
  int max_streams = 256;              // open StreamSteps calls, server-wide
  int max_streams_per_tenant = 64;    // open StreamSteps calls of one tenant
  int idle_timeout_ms = 300000;       // no message and no pending ack for this long: ended
  int stall_timeout_ms = 30000;       // one ack write blocked this long: ended
  int retry_after_ms = 1000;          // the hint sent with RESOURCE_EXHAUSTED
  int farewell_grace_ms = 500;        // after a farewell: the client's time to half-close
};

class StreamLimiter {
 public:
  // One open stream; unregisters itself when destroyed.
  class Slot {
   public:
    ~Slot();
    // Counts the stream against `tenant`'s cap; RESOURCE_EXHAUSTED when it is full.
    absl::Status SetTenant(const std::string& tenant);
    void MessageRead();     // a message arrived: one more pending ack
    void WriteBegin();      // an ack write starts (it blocks while the client does not read)
    void WriteEnd();        // it ended: one pending ack less
    // Why the limiter ended this stream; empty while it has not.
    std::string ended_reason() const;
    // How to say goodbye: queue a last message for the stream's writer; false when it
    // cannot be queued now. Called under the limiter's lock: it must not block.
    void SetFarewell(std::function<bool(const std::string& reason)> farewell);

   private:
    friend class StreamLimiter;
    Slot(StreamLimiter* limiter, grpc::ServerContext* ctx);
    StreamLimiter* limiter_;
    grpc::ServerContext* ctx_;
    std::string tenant_;
    int64_t pending_ = 0;
    std::chrono::steady_clock::time_point last_activity_;
    std::chrono::steady_clock::time_point write_since_;
    bool writing_ = false;
    std::string ended_;
    std::function<bool(const std::string&)> farewell_;
    bool cancelled_ = false;
    std::chrono::steady_clock::time_point ended_at_;
  };

  // metrics may be null.
  StreamLimiter(StreamLimitOptions options, Metrics* metrics);
  ~StreamLimiter();

  // A slot for a new stream; RESOURCE_EXHAUSTED when max_streams are open or after CancelAll.
  absl::StatusOr<std::unique_ptr<Slot>> Open(grpc::ServerContext* ctx);
  // Ends every open stream and refuses new ones (shutdown).
  void CancelAll();
  int open_streams() const;

 private:
  void Reap();
  void EndLocked(Slot* slot, std::string reason);
  absl::Status Exhausted(std::string what, std::string_view shed_reason);

  const StreamLimitOptions options_;
  Metrics* const metrics_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::set<Slot*> slots_;
  std::map<std::string, int> per_tenant_;
  bool closing_ = false;
  bool hurry_ = false;  // the reaper should look now (farewells to time)
  std::thread reaper_;
};

}  // namespace dpledger::server
