#include "server/grpc_service.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_format.h"
#include "server/blocking_queue.h"
#include "server/convert.h"
#include "server/status_util.h"
#include "spdlog/spdlog.h"

namespace dpledger::server {

GrpcLedgerService::GrpcLedgerService(LedgerService* service, Metrics* metrics,
                                     const TokenTable* tokens, GrpcServiceOptions options)
    : service_(service), metrics_(metrics), tokens_(tokens), options_(options) {}

absl::StatusOr<Caller> GrpcLedgerService::Authenticate(const grpc::ServerContext* ctx) const {
  if (tokens_ == nullptr) return Caller::Insecure();
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return tokens_->Authenticate(std::nullopt);
  return tokens_->Authenticate(std::string_view(it->second.data(), it->second.size()));
}

template <typename Fn>
grpc::Status GrpcLedgerService::Handle(std::string_view method, grpc::ServerContext* ctx,
                                       Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<Caller> caller = Authenticate(ctx);
  const absl::Status status = caller.ok() ? fn(*caller) : caller.status();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string code = absl::StatusCodeToString(status.code());
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
                std::string(status.message()));
  }
  return ToGrpcStatus(status);
}

grpc::Status GrpcLedgerService::CreateJob(grpc::ServerContext* ctx,
                                          const v1::CreateJobRequest* req, v1::Job* resp) {
  return Handle("CreateJob", ctx, [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<JobSpec> spec = JobSpecFromProto(*req);
    if (!spec.ok()) return spec.status();
    absl::StatusOr<JobInfo> info = service_->CreateJob(caller, *spec);
    if (!info.ok()) return info.status();
    *resp = JobToProto(*info);
    return absl::OkStatus();
  });
}

grpc::Status GrpcLedgerService::GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req,
                                       v1::Job* resp) {
  return Handle("GetJob", ctx, [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<JobInfo> info = service_->GetJob(caller, req->tenant(), req->job_id());
    if (!info.ok()) return info.status();
    *resp = JobToProto(*info);
    return absl::OkStatus();
  });
}

grpc::Status GrpcLedgerService::ListJobs(grpc::ServerContext* ctx,
                                         const v1::ListJobsRequest* req,
                                         v1::ListJobsResponse* resp) {
  return Handle("ListJobs", ctx, [&](const Caller& caller) -> absl::Status {
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
  return Handle("CloseJob", ctx, [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<JobInfo> info = service_->CloseJob(caller, req->tenant(), req->job_id());
    if (!info.ok()) return info.status();
    *resp = JobToProto(*info);
    return absl::OkStatus();
  });
}

grpc::Status GrpcLedgerService::AppendSteps(grpc::ServerContext* ctx,
                                            const v1::AppendStepsRequest* req,
                                            v1::AppendStepsResponse* resp) {
  return Handle("AppendSteps", ctx, [&](const Caller& caller) -> absl::Status {
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
    absl::StatusOr<std::vector<Ack>> acks =
        service_->AppendSteps(caller, req->tenant(), req->job_id(), updates);
    if (!acks.ok()) return acks.status();
    for (const Ack& a : *acks) *resp->add_acks() = AckToProto(a);
    return absl::OkStatus();
  });
}

grpc::Status GrpcLedgerService::StreamSteps(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<v1::StepAck, v1::StreamStepsRequest>* stream) {
  return Handle("StreamSteps", ctx,
                [&](const Caller& caller) { return RunStream(caller, stream); });
}

// Three stages so one stream pipelines: this thread reads (and is the only one that touches
// Read, so returning is safe once the others are joined); an admission thread admits
// whatever has queued up as one group; a writer thread waits for durability and writes the
// acks in order. A malformed stream stops reading, lets the pending acks out, then ends with
// its status.
absl::Status GrpcLedgerService::RunStream(
    const Caller& caller, grpc::ServerReaderWriter<v1::StepAck, v1::StreamStepsRequest>* stream) {
  v1::StreamStepsRequest first;
  if (!stream->Read(&first)) return absl::OkStatus();  // closed before any update
  if (first.job_id().empty()) {
    return absl::InvalidArgumentError("job_id is required in the first stream message");
  }
  absl::StatusOr<std::unique_ptr<LedgerService::StepStream>> steps =
      service_->OpenStream(caller, first.tenant(), first.job_id());
  if (!steps.ok()) return steps.status();

  const size_t group = std::max(1, service_->options().max_admission_group);
  BlockingQueue<v1::StreamStepsRequest> in(options_.max_stream_inflight);
  BlockingQueue<PendingAck> out(options_.max_stream_inflight);
  std::thread admit([&] {
    for (;;) {
      std::vector<v1::StreamStepsRequest> msgs = in.PopSome(group);
      if (msgs.empty()) break;
      std::vector<absl::StatusOr<UpdateInput>> items;
      items.reserve(msgs.size());
      for (const v1::StreamStepsRequest& m : msgs) {
        if (!m.has_update()) {
          items.push_back(absl::InvalidArgumentError("update is required in every message"));
        } else {
          items.push_back(UpdateFromProto(m.update(), "update"));
          if (!items.back().ok()) {
            // Keep the seq so the error ack can name it.
            items.back() = absl::Status(items.back().status().code(),
                                        absl::StrFormat("seq %d: %s", m.update().seq(),
                                                        std::string(items.back().status().message())));
          }
        }
      }
      for (PendingAck& p : (*steps)->Submit(std::move(items))) out.Push(std::move(p));
    }
    out.Close();
  });
  std::atomic<bool> write_failed{false};
  std::thread writer([&] {
    for (;;) {
      std::vector<PendingAck> acks = out.PopSome(64);
      if (acks.empty()) break;
      for (const PendingAck& p : acks) {
        absl::StatusOr<Ack> a = p.Wait();
        v1::StepAck msg;
        if (a.ok()) {
          msg = AckToProto(*a);
        } else {
          msg.set_error_code(static_cast<int>(a.status().code()));
          msg.set_error_message(std::string(a.status().message()));
        }
        if (!write_failed && !stream->Write(msg)) write_failed = true;
      }
    }
  });

  absl::Status status;
  bool pushed_first = in.Push(std::move(first));
  v1::StreamStepsRequest msg;
  while (pushed_first && !write_failed && stream->Read(&msg)) {
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
  if (status.ok() && write_failed) return absl::CancelledError("the client stopped reading acks");
  return status;
}

grpc::Status GrpcLedgerService::GetLedger(grpc::ServerContext* ctx,
                                          const v1::GetLedgerRequest* req,
                                          v1::GetLedgerResponse* resp) {
  return Handle("GetLedger", ctx, [&](const Caller& caller) -> absl::Status {
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

grpc::Status GrpcLedgerService::Spent(grpc::ServerContext* ctx, const v1::SpentRequest* req,
                                      v1::SpentResponse* resp) {
  return Handle("Spent", ctx, [&](const Caller& caller) -> absl::Status {
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
  return Handle("Remaining", ctx, [&](const Caller& caller) -> absl::Status {
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
  return Handle("Release", ctx, [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<ReleaseRow> r = service_->Release(caller, ReleaseInputFromProto(*req));
    if (!r.ok()) return r.status();
    *resp = ReleaseToProto(*r);
    return absl::OkStatus();
  });
}

grpc::Status GrpcLedgerService::GetRelease(grpc::ServerContext* ctx,
                                           const v1::GetReleaseRequest* req,
                                           v1::ReleaseRecord* resp) {
  return Handle("GetRelease", ctx, [&](const Caller& caller) -> absl::Status {
    absl::StatusOr<ReleaseRow> r =
        service_->GetRelease(caller, req->tenant(), req->release_id(), req->include_payload());
    if (!r.ok()) return r.status();
    *resp = ReleaseToProto(*r);
    return absl::OkStatus();
  });
}

}  // namespace dpledger::server
