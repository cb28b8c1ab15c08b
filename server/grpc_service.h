// The gRPC face of the ledger: each handler authenticates, converts the request
// (convert.h), calls the gRPC-free LedgerService, converts back, and goes through ONE shared
// wrapper (Handle) that maps the status with ToGrpcStatus and records metrics and logs.
//
// Every method is registered with a handler that receives the request as raw bytes
// (grpc::ByteBuffer) and parses it itself (issue 11): gRPC's own parse failure is INTERNAL
// with an empty message, and inside a stream it looks like a half-close (the stream ended OK
// and the messages after the bad one were silently dropped). Here a request that does not
// parse is INVALID_ARGUMENT naming the message type (and, in a stream, its position).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string_view>

#include "proto/dpledger.grpc.pb.h"
#include "server/auth.h"
#include "server/ledger_service.h"
#include "server/metrics.h"
#include "server/rate_limiter.h"
#include "server/stream_limiter.h"
#include "server/tenant_gate.h"

namespace dpledger::server {

struct GrpcServiceOptions {
  int max_stream_inflight = 256;  // stream messages read ahead of their acks (backpressure)
  int max_tenant_inflight_updates = 1024;  // one tenant's updates not yet durable (tenant_gate.h)
  double max_tenant_rps = 0;     // RPCs (a stream counts once) per second per tenant; 0: no limit
  double tenant_rps_burst = 0;   // bucket size (rate_limiter.h); 0: one second's worth
  StreamLimitOptions streams;
};

class GrpcLedgerService final : public v1::Ledger::Service {
 public:
  // tokens == nullptr: insecure mode (no authentication). All pointers must outlive this.
  // cert_map: callers named by verified client certificates (mutual TLS), tried before tokens.
  GrpcLedgerService(LedgerService* service, Metrics* metrics,
                    std::shared_ptr<const TokenTable> tokens, GrpcServiceOptions options = {},
                    std::shared_ptr<const ClientCertMap> cert_map = nullptr);
  // Replaces the token table (SIGHUP); calls in progress keep the one they authenticated with.
  void SetTokens(std::shared_ptr<const TokenTable> tokens);
  // Swaps the client-certificate map (SIGHUP); calls in progress keep the one they read.
  void SetCertMap(std::shared_ptr<const ClientCertMap> cert_map);
  std::shared_ptr<const ClientCertMap> cert_map() const;
  std::shared_ptr<const TokenTable> tokens() const;

  grpc::Status CreateJob(grpc::ServerContext* ctx, const v1::CreateJobRequest* req,
                         v1::Job* resp) override;
  grpc::Status GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req,
                      v1::Job* resp) override;
  grpc::Status ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req,
                        v1::ListJobsResponse* resp) override;
  grpc::Status CloseJob(grpc::ServerContext* ctx, const v1::CloseJobRequest* req,
                        v1::Job* resp) override;
  grpc::Status AppendSteps(grpc::ServerContext* ctx, const v1::AppendStepsRequest* req,
                           v1::AppendStepsResponse* resp) override;
  grpc::Status GetLedger(grpc::ServerContext* ctx, const v1::GetLedgerRequest* req,
                         v1::GetLedgerResponse* resp) override;
  grpc::Status Spent(grpc::ServerContext* ctx, const v1::SpentRequest* req,
                     v1::SpentResponse* resp) override;
  grpc::Status Remaining(grpc::ServerContext* ctx, const v1::RemainingRequest* req,
                         v1::RemainingResponse* resp) override;
  grpc::Status Release(grpc::ServerContext* ctx, const v1::ReleaseRequest* req,
                       v1::ReleaseRecord* resp) override;
  grpc::Status GetRelease(grpc::ServerContext* ctx, const v1::GetReleaseRequest* req,
                          v1::ReleaseRecord* resp) override;
  // StreamSteps, with messages as bytes (see the header comment).
  grpc::Status StreamStepsRaw(grpc::ServerContext* ctx,
                              grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream);

  // Ends every open stream at once (shutdown): see stream_limiter.h.
  void CancelStreams() { streams_.CancelAll(); }

 private:
  using RawStream = grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;
  template <typename Req, typename Resp>
  void ParseRequestsHere(std::string_view method,
                         grpc::Status (GrpcLedgerService::*handler)(grpc::ServerContext*,
                                                                    const Req*, Resp*));
  // requested_tenant: the request's tenant field, whose rate the call spends (rate_limiter.h);
  // nullopt: the handler takes the rate itself (StreamSteps, once its tenant is known).
  template <typename Fn>
  grpc::Status Handle(std::string_view method, grpc::ServerContext* ctx,
                      std::optional<std::string_view> requested_tenant, Fn&& fn);
  absl::Status TakeRate(const Caller& caller, std::string_view requested_tenant);
  absl::StatusOr<Caller> Authenticate(const grpc::ServerContext* ctx) const;
  absl::Status RunStream(const Caller& caller, grpc::ServerContext* ctx, RawStream* stream);

  LedgerService* service_;
  Metrics* metrics_;
  mutable std::mutex tokens_mu_;
  std::shared_ptr<const TokenTable> tokens_;  // null: no authentication (insecure)
  std::shared_ptr<const ClientCertMap> cert_map_;  // guarded by tokens_mu_; null: no mTLS
  GrpcServiceOptions options_;
  StreamLimiter streams_;
  TenantGate gate_;
  RateLimiter rate_;
};

}  // namespace dpledger::server
