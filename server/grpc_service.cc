#include "server/grpc_service.h"

#include <grpcpp/support/method_handler.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "core/util/check.h"
#include "server/blocking_queue.h"
#include "server/convert.h"
#include "server/status_util.h"
#include "spdlog/spdlog.h"

namespace dpledger::server {

namespace {

// The position of `method` in the service, which is the index gRPC's generated code
// registers it under (both follow the order of dpledger.proto).
int MethodIndex(std::string_view method) {
  const google::protobuf::ServiceDescriptor* service =
      v1::CreateJobRequest::descriptor()->file()->FindServiceByName("Ledger");
  const google::protobuf::MethodDescriptor* m =
      service->FindMethodByName(std::string(method));
  DPL_CHECK(m != nullptr);
  return m->index();
}

bool Parse(grpc::ByteBuffer* bytes, google::protobuf::Message* msg) {
  grpc::ProtoBufferReader reader(bytes);
  return msg->ParseFromZeroCopyStream(&reader);
}

grpc::ByteBuffer Serialize(const google::protobuf::Message& msg) {
  grpc::ByteBuffer out;
  bool own = false;
  // Only fails for messages over 2 GiB, which max_message_bytes keeps us far from.
  DPL_CHECK(grpc::SerializationTraits<google::protobuf::Message>::Serialize(msg, &out, &own)
                .ok());
  return out;
}

std::string NotParsed(const google::protobuf::Message& msg) {
  return absl::StrFormat("does not parse as %s", msg.GetDescriptor()->full_name());
}

// The call's request id: the client's "x-request-id" metadata (at most 64 bytes of it), else
// the id of a Release request, else one made here.
std::string RequestId(const grpc::ServerContext& ctx, std::string_view from_request = "") {
  const auto& md = ctx.client_metadata();
  if (auto it = md.find("x-request-id"); it != md.end() && !it->second.empty()) {
    return std::string(it->second.data(), std::min<size_t>(it->second.size(), 64));
  }
  if (!from_request.empty()) return std::string(from_request.substr(0, 64));
  static std::atomic<uint64_t> counter{0};
  static const uint64_t boot = static_cast<uint64_t>(
      std::chrono::system_clock::now().time_since_epoch().count());
  return absl::StrFormat("srv-%x-%d", boot & 0xffffffffff, ++counter);
}

// One audit line per state change (issue 11): who (tenant of the credential, the tenant
// acted on), what (event, job), which request, and the outcome. The log formatter escapes
// caller-provided text.
void Audit(std::string_view event, const Caller& caller, std::string_view tenant,
           std::string_view job, std::string_view request_id, const absl::Status& outcome,
           std::string_view detail = "") {
  spdlog::info("audit event={} caller_tenant={} tenant={} job={} request_id={} outcome={}{}{}",
               event, caller.any_tenant ? "-" : caller.tenant,
               tenant.empty() ? caller.tenant : std::string(tenant), job, request_id,
               absl::StatusCodeToString(outcome.code()), detail.empty() ? "" : " ", detail);
}

}  // namespace

GrpcLedgerService::GrpcLedgerService(LedgerService* service, Metrics* metrics,
                                     std::shared_ptr<const TokenTable> tokens,
                                     GrpcServiceOptions options,
                                     std::shared_ptr<const ClientCertMap> cert_map)
    : service_(service),
      metrics_(metrics),
      tokens_(std::move(tokens)),
      cert_map_(std::move(cert_map)),
      options_(options),
      streams_(options.streams, metrics),
      gate_(options.max_tenant_inflight_updates),
      rate_(options.max_tenant_rps, options.tenant_rps_burst) {
  ParseRequestsHere("CreateJob", &GrpcLedgerService::CreateJob);
  ParseRequestsHere("GetJob", &GrpcLedgerService::GetJob);
  ParseRequestsHere("ListJobs", &GrpcLedgerService::ListJobs);
  ParseRequestsHere("CloseJob", &GrpcLedgerService::CloseJob);
  ParseRequestsHere("AppendSteps", &GrpcLedgerService::AppendSteps);
  ParseRequestsHere("GetLedger", &GrpcLedgerService::GetLedger);
  ParseRequestsHere("Spent", &GrpcLedgerService::Spent);
  ParseRequestsHere("Remaining", &GrpcLedgerService::Remaining);
  ParseRequestsHere("Release", &GrpcLedgerService::Release);
  ParseRequestsHere("GetRelease", &GrpcLedgerService::GetRelease);
  MarkMethodStreamed(MethodIndex("StreamSteps"),
                     new grpc::internal::BidiStreamingHandler<GrpcLedgerService, grpc::ByteBuffer,
                                                              grpc::ByteBuffer>(
                         [](GrpcLedgerService* self, grpc::ServerContext* ctx, RawStream* s) {
                           return self->StreamStepsRaw(ctx, s);
                         },
                         this));
}

// A unary method served as a one-message stream of bytes (gRPC's "streamed unary"): read the
// request, parse it here, run the typed handler, write its response.
template <typename Req, typename Resp>
void GrpcLedgerService::ParseRequestsHere(
    std::string_view method,
    grpc::Status (GrpcLedgerService::*handler)(grpc::ServerContext*, const Req*, Resp*)) {
  MarkMethodStreamed(
      MethodIndex(method),
      new grpc::internal::BidiStreamingHandler<GrpcLedgerService, grpc::ByteBuffer,
                                               grpc::ByteBuffer>(
          [method, handler](GrpcLedgerService* self, grpc::ServerContext* ctx,
                            RawStream* stream) -> grpc::Status {
            grpc::ByteBuffer bytes;
            Req req;
            if (!stream->Read(&bytes) || !Parse(&bytes, &req)) {
              return self->Handle(method, ctx, "", [&](const Caller&) {
                return absl::InvalidArgumentError(absl::StrFormat("the request %s", NotParsed(req)));
              });
            }
            Resp resp;
            grpc::Status status = (self->*handler)(ctx, &req, &resp);
            if (status.ok()) stream->Write(Serialize(resp));
            return status;
          },
          this));
}

void GrpcLedgerService::SetTokens(std::shared_ptr<const TokenTable> tokens) {
  std::lock_guard<std::mutex> lock(tokens_mu_);
  tokens_ = std::move(tokens);
}

std::shared_ptr<const TokenTable> GrpcLedgerService::tokens() const {
  std::lock_guard<std::mutex> lock(tokens_mu_);
  return tokens_;
}

void GrpcLedgerService::SetCertMap(std::shared_ptr<const ClientCertMap> cert_map) {
  std::lock_guard<std::mutex> lock(tokens_mu_);
  cert_map_ = std::move(cert_map);
}

std::shared_ptr<const ClientCertMap> GrpcLedgerService::cert_map() const {
  std::lock_guard<std::mutex> lock(tokens_mu_);
  return cert_map_;
}

absl::StatusOr<Caller> GrpcLedgerService::Authenticate(const grpc::ServerContext* ctx) const {
  const std::shared_ptr<const ClientCertMap> cert_map = this->cert_map();
  if (cert_map != nullptr) {
    // gRPC has verified the certificate against --tls-client-ca before the call starts.
    const std::shared_ptr<const grpc::AuthContext> auth = ctx->auth_context();
    if (auth != nullptr && auth->IsPeerAuthenticated()) {
      CertIdentity cert;
      auto values = [&](const char* property) {
        std::vector<std::string> out;
        for (const grpc::string_ref& v : auth->FindPropertyValues(property)) {
          out.emplace_back(v.data(), v.size());
        }
        return out;
      };
      cert.common_names = values("x509_common_name");
      cert.subjects = values("x509_subject");
      cert.sans = values("x509_subject_alternative_name");
      if (std::optional<Caller> c = cert_map->Find(cert)) return *c;
    }
  }
  const std::shared_ptr<const TokenTable> tokens = this->tokens();
  if (tokens == nullptr && cert_map != nullptr) {
    return absl::UnauthenticatedError(
        "a client certificate named in client_cert_map (subject, SAN or common name) is "
        "required");
  }
  if (tokens == nullptr) return Caller::Insecure();
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return tokens->Authenticate(std::nullopt);
  return tokens->Authenticate(std::string_view(it->second.data(), it->second.size()));
}

absl::Status GrpcLedgerService::TakeRate(const Caller& caller, std::string_view requested) {
  // A bound caller always spends its own tenant's rate, whatever the request names.
  const std::string tenant =
      caller.any_tenant && !requested.empty() ? std::string(requested) : caller.tenant;
  absl::Status s = rate_.Take(tenant);
  if (!s.ok() && metrics_) metrics_->Shed("rate_tenant");
  return s;
}

template <typename Fn>
grpc::Status GrpcLedgerService::Handle(std::string_view method, grpc::ServerContext* ctx,
                                       std::optional<std::string_view> requested_tenant,
                                       Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<Caller> caller = Authenticate(ctx);
  absl::Status status = caller.status();
  if (caller.ok() && requested_tenant.has_value()) status = TakeRate(*caller, *requested_tenant);
  if (status.ok()) status = fn(*caller);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string code = absl::StatusCodeToString(status.code());
  if (std::optional<int> retry = RetryAfterMs(status)) {
    ctx->AddTrailingMetadata(kRetryAfterMetadata, std::to_string(*retry));
  }
  if (metrics_) metrics_->Rpc(method, code, seconds);
  if (status.ok()) {
    spdlog::debug("rpc={} code=OK seconds={:.6f}", method, seconds);
  } else {
    const bool server_side = status.code() == absl::StatusCode::kInternal ||
                             status.code() == absl::StatusCode::kDataLoss ||
                             status.code() == absl::StatusCode::kUnavailable;
    spdlog::log(server_side ? spdlog::level::warn : spdlog::level::info,
                "rpc={} code={} seconds={:.6f} tenant={} peer={} msg=\"{}\"", method, code,
                seconds, caller.ok() ? caller->tenant : "-", ctx->peer(),
                absl::StrReplaceAll(status.message(), {{"\\", "\\\\"}, {"\"", "\\\""}}));
  }
  return ToGrpcStatus(status);
}

grpc::Status GrpcLedgerService::CreateJob(grpc::ServerContext* ctx,
                                          const v1::CreateJobRequest* req, v1::Job* resp) {
  return Handle("CreateJob", ctx, req->tenant(), [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<JobSpec> spec = JobSpecFromProto(*req);
    if (!spec.ok()) return spec.status();
    absl::StatusOr<JobInfo> info = service_->CreateJob(caller, *spec);
    Audit("job_create", caller, req->tenant(), req->job_id(), RequestId(*ctx), info.status());
    if (!info.ok()) return info.status();
    *resp = JobToProto(*info);
    return absl::OkStatus();
  });
}

grpc::Status GrpcLedgerService::GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req,
                                       v1::Job* resp) {
  return Handle("GetJob", ctx, req->tenant(), [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<JobInfo> info = service_->GetJob(caller, req->tenant(), req->job_id());
    if (!info.ok()) return info.status();
    *resp = JobToProto(*info);
    return absl::OkStatus();
  });
}

grpc::Status GrpcLedgerService::ListJobs(grpc::ServerContext* ctx,
                                         const v1::ListJobsRequest* req,
                                         v1::ListJobsResponse* resp) {
  return Handle("ListJobs", ctx, req->tenant(), [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<JobPage> page =
        service_->ListJobs(caller, req->tenant(), req->page_size(), req->page_token());
    if (!page.ok()) return page.status();
    for (const JobInfo& j : page->jobs) *resp->add_jobs() = JobToProto(j);
    resp->set_next_page_token(page->next_page_token);
    return absl::OkStatus();
  });
}

grpc::Status GrpcLedgerService::CloseJob(grpc::ServerContext* ctx,
                                         const v1::CloseJobRequest* req, v1::Job* resp) {
  return Handle("CloseJob", ctx, req->tenant(), [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<JobInfo> info = service_->CloseJob(caller, req->tenant(), req->job_id());
    Audit("job_close", caller, req->tenant(), req->job_id(), RequestId(*ctx), info.status());
    if (!info.ok()) return info.status();
    *resp = JobToProto(*info);
    return absl::OkStatus();
  });
}

namespace {

// Seconds left before the call's deadline (0: none); DEADLINE_EXCEEDED once it has passed.
absl::StatusOr<double> DeadlineSeconds(const grpc::ServerContext& ctx) {
  const auto deadline = ctx.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return 0.0;
  const double left =
      std::chrono::duration<double>(deadline - std::chrono::system_clock::now()).count();
  if (left <= 0) return absl::DeadlineExceededError("the call's deadline has passed");
  return left < 1e9 ? left : 0.0;
}

}  // namespace

grpc::Status GrpcLedgerService::AppendSteps(grpc::ServerContext* ctx,
                                            const v1::AppendStepsRequest* req,
                                            v1::AppendStepsResponse* resp) {
  return Handle("AppendSteps", ctx, req->tenant(), [&](const Caller& caller) -> absl::Status {
    if (req->updates_size() > service_->options().max_updates_per_request) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "updates has %d entries, more than max_updates_per_request %d", req->updates_size(),
          service_->options().max_updates_per_request));
    }
    std::vector<UpdateInput> updates;
    for (int i = 0; i < req->updates_size(); ++i) {
      absl::StatusOr<UpdateInput> u =
          UpdateFromProto(req->updates(i), absl::StrFormat("updates[%d]", i));
      if (!u.ok()) return u.status();
      updates.push_back(std::move(*u));
    }
    const std::string tenant = req->tenant().empty() ? caller.tenant : req->tenant();
    if (!gate_.Acquire(tenant, req->updates_size(), [ctx] { return ctx->IsCancelled(); })) {
      return absl::CancelledError("the call was cancelled while waiting for its tenant's share");
    }
    GateTicket share(&gate_, tenant, req->updates_size());
    // Judging stops at the client's deadline: nothing is admitted for a caller who left.
    absl::StatusOr<double> left = DeadlineSeconds(*ctx);
    if (!left.ok()) return left.status();
    absl::StatusOr<std::vector<Ack>> acks =
        service_->AppendSteps(caller, req->tenant(), req->job_id(), updates, *left);
    if (!acks.ok()) return acks.status();
    for (const Ack& a : *acks) {
      *resp->add_acks() = AckToProto(a);
      if (a.error.ok() && !a.admitted && !a.duplicate) {
        Audit("admission_refused", caller, req->tenant(), req->job_id(), RequestId(*ctx),
              absl::OkStatus(), absl::StrFormat("seq=%d reason=\"%s\"", a.seq, a.refusal_reason));
      }
    }
    return absl::OkStatus();
  });
}

grpc::Status GrpcLedgerService::StreamStepsRaw(grpc::ServerContext* ctx, RawStream* stream) {
  return Handle("StreamSteps", ctx, std::nullopt,
                [&](const Caller& caller) { return RunStream(caller, ctx, stream); });
}

// Three stages so one stream pipelines: this thread reads (and is the only one that touches
// Read, so returning is safe once the others are joined); an admission thread admits
// whatever has queued up as one group; a writer thread waits for durability and writes the
// acks in order. A malformed stream stops reading, lets the pending acks out, then ends with
// its status. A cancelled stream (by its client, or by the limiter: idle, stalled, shutdown)
// admits nothing more; what it had admitted is still committed before the call returns.
absl::Status GrpcLedgerService::RunStream(const Caller& caller, grpc::ServerContext* ctx,
                                          RawStream* stream) {
  absl::StatusOr<std::unique_ptr<StreamLimiter::Slot>> slot = streams_.Open(ctx);
  if (!slot.ok()) return slot.status();
  absl::Status status;
  int64_t message_no = 0;
  // The next message; false at the end of the stream, or with `status` set when it does not
  // parse (the bytes after it are not read: their framing is the client's and may be off too).
  auto read = [&](v1::StreamStepsRequest* msg) {
    grpc::ByteBuffer bytes;
    if (!stream->Read(&bytes)) return false;
    ++message_no;
    (*slot)->MessageRead();
    if (Parse(&bytes, msg)) return true;
    status = absl::InvalidArgumentError(absl::StrFormat(
        "message %d of the stream %s; it and the messages after it were not admitted",
        message_no, NotParsed(*msg)));
    return false;
  };
  // Why the server ended the stream, in the client's words (the farewell and the status).
  auto why = [&](const std::string& reason) {
    std::string text = reason;
    if (reason == "stream_idle") {
      text = absl::StrFormat("idle (no update for %d ms, --stream-idle-timeout-ms); open a new "
                             "stream to go on",
                             options_.streams.idle_timeout_ms);
    } else if (reason == "shutdown") {
      text = "the server is shutting down; retry on another replica or after the restart";
    } else if (reason == "stream_stalled") {
      text = absl::StrFormat("the client took no ack for %d ms (--stream-stall-timeout-ms)",
                             options_.streams.stall_timeout_ms);
    }
    return absl::StrFormat("the server ended the stream: %s", text);
  };
  auto ended = [&]() -> absl::Status {
    const std::string reason = (*slot)->ended_reason();
    if (reason.empty()) return absl::OkStatus();
    return absl::UnavailableError(why(reason));
  };

  v1::StreamStepsRequest first;
  if (!read(&first)) return status.ok() ? ended() : status;  // closed before any update
  if (first.job_id().empty()) {
    return absl::InvalidArgumentError("job_id is required in the first stream message");
  }
  absl::StatusOr<std::unique_ptr<LedgerService::StepStream>> steps =
      service_->OpenStream(caller, first.tenant(), first.job_id());
  if (!steps.ok()) return steps.status();
  if (absl::Status s = (*slot)->SetTenant((*steps)->key().tenant); !s.ok()) return s;
  if (absl::Status s = TakeRate(caller, (*steps)->key().tenant); !s.ok()) return s;

  struct Pending {
    int64_t seq;  // the update's, so an error ack can carry it
    PendingAck ack;
    GateTicket share;  // the update's place in its tenant's share, until it is durable
    std::string farewell = "";  // set: not an ack but the stream_end message, with the reason
  };
  const std::string tenant = (*steps)->key().tenant;
  const std::string request_id = RequestId(*ctx);
  const size_t group = std::max(1, service_->options().max_admission_group);
  BlockingQueue<v1::StreamStepsRequest> in(options_.max_stream_inflight);
  BlockingQueue<Pending> out(options_.max_stream_inflight);
  std::thread admit([&] {
    for (;;) {
      std::vector<v1::StreamStepsRequest> msgs = in.PopSome(group);
      if (msgs.empty()) break;
      if (ctx->IsCancelled()) continue;  // nobody reads the acks: admit nothing more
      std::vector<absl::StatusOr<UpdateInput>> items;
      std::vector<int64_t> seqs;
      items.reserve(msgs.size());
      for (const v1::StreamStepsRequest& m : msgs) {
        seqs.push_back(m.update().seq());
        if (!m.has_update()) {
          items.push_back(absl::InvalidArgumentError("update is required in every message"));
        } else {
          items.push_back(UpdateFromProto(m.update(), "update"));
        }
      }
      const auto n = static_cast<int64_t>(items.size());
      if (!gate_.Acquire(tenant, n, [ctx] { return ctx->IsCancelled(); })) continue;
      // The stream's deadline caps each group's judging (a passed one fails the group).
      const absl::StatusOr<double> left = DeadlineSeconds(*ctx);
      std::vector<PendingAck> acks;
      if (left.ok()) {
        acks = (*steps)->Submit(std::move(items), *left);
      } else {
        for (size_t i = 0; i < items.size(); ++i) {
          Ack a;
          a.seq = seqs[i];
          a.error = left.status();
          acks.emplace_back(a, nullptr);
        }
      }
      for (size_t i = 0; i < acks.size(); ++i) {
        out.Push({seqs[i], std::move(acks[i]), GateTicket(&gate_, tenant, 1)});
      }
    }
    out.Close();
  });
  // The limiter's goodbye goes out through the writer, after the acks queued before it.
  (*slot)->SetFarewell([&out](const std::string& reason) {
    return out.TryPush(Pending{0, PendingAck(Ack{}, nullptr), GateTicket(), reason});
  });
  std::atomic<bool> write_failed{false};
  std::thread writer([&] {
    for (;;) {
      std::vector<Pending> acks = out.PopSome(64);
      if (acks.empty()) break;
      for (Pending& p : acks) {
        if (!p.farewell.empty()) {
          v1::StepAck bye;
          bye.set_stream_end(true);
          bye.set_error_code(static_cast<int>(absl::StatusCode::kUnavailable));
          bye.set_error_message(why(p.farewell));
          (*slot)->WriteBegin();
          if (!write_failed && !stream->Write(Serialize(bye))) write_failed = true;
          (*slot)->WriteEnd();
          continue;
        }
        absl::StatusOr<Ack> a = p.ack.Wait();
        p.share.Release();
        v1::StepAck msg;
        if (a.ok()) {
          msg = AckToProto(*a);
        } else {
          msg.set_error_code(static_cast<int>(a.status().code()));
          msg.set_error_message(std::string(a.status().message()));
        }
        // An update that did not convert has no seq of its own in the ack: use the message's.
        if (msg.error_code() != 0) msg.set_seq(p.seq);
        if (msg.error_code() == 0 && !msg.admitted() && !msg.duplicate()) {
          Audit("admission_refused", caller, tenant, (*steps)->key().job_id, request_id,
                absl::OkStatus(),
                absl::StrFormat("seq=%d reason=\"%s\"", msg.seq(), msg.refusal_reason()));
        }
        (*slot)->WriteBegin();
        if (!write_failed && !stream->Write(Serialize(msg))) write_failed = true;
        (*slot)->WriteEnd();
      }
    }
  });

  bool pushed_first = in.Push(std::move(first));
  v1::StreamStepsRequest msg;
  while (pushed_first && !write_failed && read(&msg)) {
    if ((!msg.job_id().empty() && msg.job_id() != (*steps)->key().job_id) ||
        (!msg.tenant().empty() && msg.tenant() != (*steps)->key().tenant)) {
      status = absl::InvalidArgumentError(absl::StrFormat(
          "job_id/tenant must stay '%s'/'%s' for the whole stream, got '%s'/'%s'",
          (*steps)->key().job_id, (*steps)->key().tenant, msg.job_id(), msg.tenant()));
      break;
    }
    if (!in.Push(std::move(msg))) break;
  }
  in.Close();
  admit.join();
  writer.join();
  (*slot)->SetFarewell(nullptr);  // `out` goes away before the slot
  if (absl::Status e = ended(); !e.ok()) return e;
  if (status.ok() && write_failed) return absl::CancelledError("the client stopped reading acks");
  return status;
}

grpc::Status GrpcLedgerService::GetLedger(grpc::ServerContext* ctx,
                                          const v1::GetLedgerRequest* req,
                                          v1::GetLedgerResponse* resp) {
  return Handle("GetLedger", ctx, req->tenant(), [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<LedgerPage> page = service_->GetLedger(
        caller, req->tenant(), req->job_id(), req->after_seq(), req->page_size());
    if (!page.ok()) return page.status();
    for (const UpdateRow& row : page->entries) {
      absl::StatusOr<v1::LedgerEntry> e = LedgerEntryToProto(row);
      if (!e.ok()) return e.status();
      *resp->add_entries() = std::move(*e);
    }
    resp->set_more(page->more);
    return absl::OkStatus();
  });
}


grpc::Status GrpcLedgerService::Spent(grpc::ServerContext* ctx, const v1::SpentRequest* req,
                                      v1::SpentResponse* resp) {
  return Handle("Spent", ctx, req->tenant(), [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<SpentQuery> q = SpentQueryFromProto(*req);
    if (!q.ok()) return q.status();
    // A query stops at the client's deadline rather than computing on for an answer nobody
    // will read.
    absl::StatusOr<double> left = DeadlineSeconds(*ctx);
    if (!left.ok()) return left.status();
    q->max_seconds = *left;
    absl::StatusOr<SpentAnswer> a = service_->Spent(caller, req->tenant(), req->job_id(), *q);
    if (!a.ok()) return a.status();
    *resp = SpentToProto(*a, *q);
    return absl::OkStatus();
  });
}

grpc::Status GrpcLedgerService::Remaining(grpc::ServerContext* ctx,
                                          const v1::RemainingRequest* req,
                                          v1::RemainingResponse* resp) {
  return Handle("Remaining", ctx, req->tenant(), [&](const Caller& caller) -> absl::Status {
    if (!req->has_step()) return absl::InvalidArgumentError("step must be set");
    v1::Step step = req->step();
    step.clear_count();  // ignored by contract
    absl::StatusOr<core::MechanismEvent> e = StepFromProto(step, "step");
    if (!e.ok()) return e.status();
    absl::StatusOr<double> left = DeadlineSeconds(*ctx);
    if (!left.ok()) return left.status();
    absl::StatusOr<RemainingAnswer> a =
        service_->Remaining(caller, req->tenant(), req->job_id(), e->mechanism, *left);
    if (!a.ok()) return a.status();
    *resp = RemainingToProto(*a);
    return absl::OkStatus();
  });
}

grpc::Status GrpcLedgerService::Release(grpc::ServerContext* ctx, const v1::ReleaseRequest* req,
                                        v1::ReleaseRecord* resp) {
  return Handle("Release", ctx, req->tenant(), [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<ReleaseRow> r = service_->Release(caller, ReleaseInputFromProto(*req));
    Audit("release", caller, req->tenant(), req->job_id(), RequestId(*ctx, req->request_id()),
          r.status(), r.ok() ? absl::StrFormat("release_id=%s", r->release_id) : "");
    if (!r.ok()) return r.status();
    *resp = ReleaseToProto(*r);
    return absl::OkStatus();
  });
}

grpc::Status GrpcLedgerService::GetRelease(grpc::ServerContext* ctx,
                                           const v1::GetReleaseRequest* req,
                                           v1::ReleaseRecord* resp) {
  return Handle("GetRelease", ctx, req->tenant(), [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<ReleaseRow> r =
        service_->GetRelease(caller, req->tenant(), req->release_id(), req->include_payload());
    if (!r.ok()) return r.status();
    *resp = ReleaseToProto(*r);
    return absl::OkStatus();
  });
}

}  // namespace dpledger::server
