// Assembles dpledgerd: store (integrity + ledger checks), LedgerService, gRPC server (TLS or
// --insecure, bearer tokens, health checking, reflection, message size limits) and the
// Prometheus endpoint. main.cc fills ServerOptions from flags and environment.
//
// Thread safety: Start once; Shutdown may be called from any thread (e.g. a signal waiter).
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "server/grpc_service.h"
#include "server/ledger_service.h"
#include "server/metrics.h"
#include "server/served_tls.h"
#include "server/store.h"

namespace grpc {
class Server;
}
namespace prometheus {
class Exposer;
}

namespace dpledger::server {

struct ServerOptions {
  std::string listen = "127.0.0.1:50051";     // host:port; port 0 picks a free one
  std::string data_dir = "var";               // SQLite store: <data_dir>/ledger.db
  std::string store = "sqlite";               // "sqlite", "postgres" or "memory" (throwaway)
  std::string postgres_url;                   // libpq URI; required with store "postgres"
  int postgres_pool_size = 8;                 // connections to PostgreSQL at most
  int store_ping_interval_ms = 1000;          // readiness: health NOT_SERVING while the
                                              // store's Ping fails (database unreachable)
  std::string metrics_listen;                 // host:port of /metrics; empty: none
  bool insecure = false;                      // plaintext; no authentication unless token_file
  std::string tls_cert;                       // PEM files; required unless insecure
  std::string tls_key;
  std::string token_file;                     // required unless insecure (auth.h format);
                                              // with insecure: tokens over plaintext (tests)
  std::string tls_client_ca;                  // PEM CA of client certificates (mutual TLS);
  std::string client_cert_map;                // with it: COMMON_NAME TENANT ROLE (auth.h)
  int max_message_bytes = 16 << 20;           // gRPC receive/send limit
  int shutdown_grace_ms = 10000;              // drain time for in-flight RPCs and streams
  bool full_integrity_check = false;          // PRAGMA integrity_check instead of quick_check
  bool accept_data_loss = false;              // serve a store that lost acked data (store_mark.h)
  bool replay_ledger = false;                 // ReplaySpent at start-up (ledger_check.h)
  bool check_ledger = true;                   // CheckLedgerConsistency at start-up
  LedgerOptions ledger;
  MetricsOptions metrics;
  GrpcServiceOptions grpc;
};

class Server {
 public:
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options);
  ~Server();

  int port() const { return port_; }                // the bound gRPC port
  Metrics& metrics() { return *metrics_; }
  LedgerService& ledger() { return *ledger_; }

  // Stops accepting RPCs, drains in-flight ones (up to shutdown_grace_ms, then cancels),
  // commits everything pending and closes the store. Idempotent.
  void Shutdown();
  // Blocks until Shutdown has completed.
  void Wait();
  // SIGHUP: reads the token file, the client certificate map and the TLS files again and
  // swaps them in without touching
  // open calls and streams, logging what changed; a file that does not load is refused (the
  // error says why, the first one is returned) and the old tokens or certificate stay.
  absl::Status Reload();

 private:
  Server() = default;
  absl::Status OpenStore();
  absl::Status ReloadTokens();
  absl::Status ReloadCertMap();
  // Pings the store every store_ping_interval_ms and sets the health status to match.
  void WatchStore();
  void StopWatchingStore();

  ServerOptions options_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<ServedTls> tls_;  // null with --insecure
  std::unique_ptr<Store> store_;
  std::unique_ptr<LedgerService> ledger_;
  std::unique_ptr<GrpcLedgerService> service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
  std::mutex shutdown_mu_;
  bool shut_down_ = false;
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool stop_watching_ = false;
  std::thread watcher_;
};

}  // namespace dpledger::server
