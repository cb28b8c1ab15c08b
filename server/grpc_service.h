// The gRPC face of the ledger: each handler authenticates, converts the request
// (convert.h), calls the gRPC-free LedgerService, converts back, and goes through ONE shared
// wrapper (Handle) that maps the status with ToGrpcStatus and records metrics and logs.
#pragma once

#include <string_view>

#include "proto/dpledger.grpc.pb.h"
#include "server/auth.h"
#include "server/ledger_service.h"
#include "server/metrics.h"

namespace dpledger::server {

struct GrpcServiceOptions {
  int max_stream_inflight = 4096;  // stream messages read ahead of their acks (backpressure)
};

class GrpcLedgerService final : public v1::Ledger::Service {
 public:
  // tokens == nullptr: insecure mode (no authentication). All pointers must outlive this.
  GrpcLedgerService(LedgerService* service, Metrics* metrics, const TokenTable* tokens,
                    GrpcServiceOptions options = {});

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
  grpc::Status StreamSteps(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::StepAck, v1::StreamStepsRequest>* stream) override;
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

 private:
  template <typename Fn>
  grpc::Status Handle(std::string_view method, grpc::ServerContext* ctx, Fn&& fn);
  absl::StatusOr<Caller> Authenticate(const grpc::ServerContext* ctx) const;
  absl::Status RunStream(const Caller& caller,
                         grpc::ServerReaderWriter<v1::StepAck, v1::StreamStepsRequest>* stream);

  LedgerService* service_;
  Metrics* metrics_;
  const TokenTable* tokens_;
  GrpcServiceOptions options_;
};

}  // namespace dpledger::server
