#include "server/server.h"

#include <filesystem>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include "absl/strings/str_format.h"
#include "server/served_tls.h"
#include "core/mc/mc_estimate.h"
#include "core/registry/accountant_registry.h"
#include "server/ledger_check.h"
#include "server/memory_store.h"
#include "server/postgres_store.h"
#include "server/sqlite_store.h"
#include "spdlog/spdlog.h"

namespace dpledger::server {

absl::Status Server::OpenStore() {
  const ServerOptions& options = options_;
  if (options.store == "sqlite") {
    std::error_code ec;
    std::filesystem::create_directories(options.data_dir, ec);
    if (ec) {
      return absl::UnavailableError(absl::StrFormat("data_dir '%s' cannot be created: %s",
                                                    options.data_dir, ec.message()));
    }
    SqliteStoreOptions so;
    so.path = (std::filesystem::path(options.data_dir) / "ledger.db").string();
    so.full_check = options.full_integrity_check;
    so.accept_data_loss = options.accept_data_loss;
    absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(so);
    if (!store.ok()) return store.status();
    spdlog::info("store=sqlite path={} schema_version={}", so.path, (*store)->schema_version());
    store_ = std::move(*store);
  } else if (options.store == "postgres") {
    if (options.postgres_url.empty()) {
      return absl::InvalidArgumentError(
          "postgres_url is required with store=postgres (--postgres-url or "
          "DPLEDGER_POSTGRES_URL)");
    }
    // This replica's high-water mark of the shared database lives in its data dir.
    std::error_code ec;
    std::filesystem::create_directories(options.data_dir, ec);
    if (ec) {
      return absl::UnavailableError(absl::StrFormat("data_dir '%s' cannot be created: %s",
                                                    options.data_dir, ec.message()));
    }
    PostgresStoreOptions po;
    po.url = options.postgres_url;
    po.pool_size = options.postgres_pool_size;
    po.mark_path = (std::filesystem::path(options.data_dir) / "postgres.mark").string();
    po.accept_data_loss = options.accept_data_loss;
    absl::StatusOr<std::unique_ptr<PostgresStore>> store = PostgresStore::Open(po);
    if (!store.ok()) return store.status();
    // The URL is not logged: it may hold a password.
    spdlog::info("store=postgres schema_version={} pool_size={}", (*store)->schema_version(),
                 po.pool_size);
    store_ = std::move(*store);
  } else if (options.store == "memory") {
    store_ = std::make_unique<MemoryStore>();
    spdlog::warn("store=memory: nothing survives a restart");
  } else {
    return absl::InvalidArgumentError(
        absl::StrFormat("store must be sqlite, postgres or memory, got '%s'", options.store));
  }
  return absl::OkStatus();
}

void Server::WatchStore() {
  grpc::HealthCheckServiceInterface* health = grpc_server_->GetHealthCheckService();
  if (health == nullptr) return;
  bool serving = true;
  std::unique_lock<std::mutex> lock(watch_mu_);
  while (!watch_cv_.wait_for(lock, std::chrono::milliseconds(options_.store_ping_interval_ms),
                             [&] { return stop_watching_; })) {
    lock.unlock();
    const absl::Status ping = store_->Ping();
    lock.lock();
    if (stop_watching_ || ping.ok() == serving) continue;
    serving = ping.ok();
    health->SetServingStatus(serving);
    health->SetServingStatus("dpledger.v1.Ledger", serving);
    metrics_->SetReady(serving);
    if (serving) {
      spdlog::info("store reachable again: health SERVING");
    } else {
      spdlog::warn("store unreachable: health NOT_SERVING ({})", std::string(ping.message()));
    }
  }
}

void Server::StopWatchingStore() {
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    stop_watching_ = true;
  }
  watch_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  std::unique_ptr<Server> s(new Server());
  s->options_ = options;
  s->metrics_ = std::make_unique<Metrics>(options.metrics);
  // MC accountant pools and the EVR verifier run with McBackend::kAuto: the GPU
  // when a CUDA device is present, else every CPU core.
  const std::string_view backend = core::CudaDeviceAvailable() ? "cuda" : "cpu";
  s->metrics_->SetSamplePoolBackend(backend);

  // Accountant settings (e.g. --query-mc-max-seconds) are checked once here, not
  // at the first query that uses them.
  for (std::string_view name : core::AccountantNames()) {
    if (auto a = core::CreateAccountant(name, options.ledger.accountant_options); !a.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s accountant settings: %s", std::string(name), std::string(a.status().message())));
    }
  }

  const EvrAdmissionOptions& evr = options.ledger.evr_admission;
  if (!(evr.tau > 0 && evr.tau < 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("evr_admission_tau must be in (0, 1), got %g", evr.tau));
  }
  if (evr.max_samples <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "evr_admission_max_samples must be > 0, got %d", evr.max_samples));
  }
  if (!(evr.max_seconds > 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "evr_admission_max_seconds must be > 0, got %g", evr.max_seconds));
  }
  if (options.ledger.max_cached_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max_cached_bytes must be >= 0, got %d", options.ledger.max_cached_bytes));
  }
  if (options.store_ping_interval_ms <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "store_ping_interval_ms must be > 0, got %d", options.store_ping_interval_ms));
  }
  for (const auto& [name, value] :
       {std::pair<const char*, int>{"max_stream_inflight", options.grpc.max_stream_inflight},
        {"max_tenant_inflight_updates", options.grpc.max_tenant_inflight_updates},
        {"max_streams", options.grpc.streams.max_streams},
        {"max_streams_per_tenant", options.grpc.streams.max_streams_per_tenant},
        {"stream_idle_timeout_ms", options.grpc.streams.idle_timeout_ms},
        {"stream_stall_timeout_ms", options.grpc.streams.stall_timeout_ms}}) {
    if (value <= 0) {
      return absl::InvalidArgumentError(absl::StrFormat("%s must be > 0, got %d", name, value));
    }
  }
  if (!(options.grpc.max_tenant_rps >= 0) || !(options.grpc.tenant_rps_burst >= 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max_tenant_rps and tenant_rps_burst must be >= 0, got %g and %g",
        options.grpc.max_tenant_rps, options.grpc.tenant_rps_burst));
  }
  if (options.ledger.max_pool_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max_pool_bytes must be >= 0, got %d", options.ledger.max_pool_bytes));
  }

  // Security settings first: refuse to start half-configured.
  std::shared_ptr<const ClientCertMap> cert_map;
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (options.insecure) {
    creds = grpc::InsecureServerCredentials();
    spdlog::warn("--insecure: plaintext transport{}; for local use only",
                 options.token_file.empty() ? " and no authentication" : "");
  } else {
    if (options.tls_cert.empty() || options.tls_key.empty()) {
      return absl::InvalidArgumentError(
          "tls_cert and tls_key are required (or --insecure for plaintext without auth)");
    }
    if (options.token_file.empty() && options.client_cert_map.empty()) {
      return absl::InvalidArgumentError(
          "token_file (or tls_client_ca with client_cert_map) is required unless --insecure");
    }
    if (options.tls_client_ca.empty() != options.client_cert_map.empty()) {
      return absl::InvalidArgumentError(
          "tls_client_ca and client_cert_map go together (mutual TLS)");
    }
    if (!options.tls_client_ca.empty()) {
      absl::StatusOr<ClientCertMap> map = ClientCertMap::Load(options.client_cert_map);
      if (!map.ok()) return map.status();
      cert_map = std::make_shared<const ClientCertMap>(std::move(*map));
    }
    absl::StatusOr<std::unique_ptr<ServedTls>> tls =
        ServedTls::Create(options.tls_cert, options.tls_key, options.tls_client_ca);
    if (!tls.ok()) return tls.status();
    s->tls_ = std::move(*tls);
    creds = s->tls_->credentials();
  }
  // Tokens whenever a token file is given; --insecure alone means no authentication.
  std::shared_ptr<const TokenTable> initial_tokens;
  if (!options.token_file.empty()) {
    absl::StatusOr<TokenTable> tokens = TokenTable::Load(options.token_file);
    if (!tokens.ok()) return tokens.status();
    if (tokens->size() == 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("token_file '%s' holds no tokens", options.token_file));
    }
    if (tokens->plaintext_lines() > 0) {
      spdlog::warn("token_file '{}' holds {} plaintext token(s): replace each with "
                   "sha256:<hex digest> (printf %s TOKEN | sha256sum); plaintext lines are "
                   "deprecated and will be refused in a later release",
                   options.token_file, tokens->plaintext_lines());
    }
    initial_tokens = std::make_shared<const TokenTable>(std::move(*tokens));
  }

  // Store: integrity, migrations, ledger consistency.
  if (absl::Status st = s->OpenStore(); !st.ok()) return st;
  if (options.check_ledger) {
    LedgerCheckStats stats;
    if (absl::Status c = CheckLedgerConsistency(*s->store_, &stats); !c.ok()) return c;
    spdlog::info("ledger check ok jobs={} updates={} releases={}", stats.jobs, stats.updates,
                 stats.releases);
  }

  s->ledger_ = std::make_unique<LedgerService>(s->store_.get(), options.ledger, s->metrics_.get());
  if (options.replay_ledger) {
    LedgerCheckStats stats;
    const LedgerService& ledger = *s->ledger_;
    if (absl::Status c = ReplaySpent(
            *s->store_, [&](const JobRow& row) { return ledger.PolicyOptionsFor(row); }, &stats);
        !c.ok()) {
      return c;
    }
    spdlog::info("ledger replay ok jobs={} updates={}", stats.jobs, stats.updates);
  }
  s->service_ = std::make_unique<GrpcLedgerService>(s->ledger_.get(), s->metrics_.get(),
                                                    initial_tokens, options.grpc, cert_map);

  // Metrics before the gRPC server: the default health service reports SERVING as soon
  // as that starts, and a failed bind must not follow it.
  if (!options.metrics_listen.empty()) {
    // prometheus-cpp (civetweb) reports a bind failure by throwing.
    try {
      s->exposer_ = std::make_unique<prometheus::Exposer>(options.metrics_listen);
      s->exposer_->RegisterCollectable(s->metrics_->registry());
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrFormat(
          "cannot serve metrics on '%s': %s", options.metrics_listen, e.what()));
    }
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, creds, &s->port_);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  // No BDP probing: it grows a stream's HTTP/2 receive window to megabytes, which the
  // transport fills with messages a stream has not read yet (a client that does not read its
  // acks stops the stream's reading, and its window kept filling: ~9 MB per stream, issue 11).
  // At the fixed 64 KiB window a stalled stream holds little and its writes block, which the
  // stream limiter sees.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder.RegisterService(s->service_.get());
  s->grpc_server_ = builder.BuildAndStart();
  if (!s->grpc_server_ || s->port_ == 0) {
    return absl::UnavailableError(
        absl::StrFormat("cannot listen on '%s' (in use or not an address)", options.listen));
  }
  if (grpc::HealthCheckServiceInterface* health = s->grpc_server_->GetHealthCheckService()) {
    health->SetServingStatus(true);
    health->SetServingStatus("dpledger.v1.Ledger", true);
  }
  s->metrics_->SetReady(true);
  s->watcher_ = std::thread([srv = s.get()] { srv->WatchStore(); });
  spdlog::info(
      "dpledgerd listening={} port={} metrics={} tls={} auth={} accountant={} sample_backend={}",
      options.listen, s->port_, options.metrics_listen.empty() ? "-" : options.metrics_listen,
      options.insecure ? "off" : "on",
      std::string(initial_tokens ? "tokens" : "") + (cert_map ? "+client-certs" : "") +
          (initial_tokens || cert_map ? "" : "off"),
      options.ledger.default_accountant, backend);
  return s;
}

void Server::Shutdown() {
  std::lock_guard<std::mutex> lock(shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  spdlog::info("shutting down: draining RPCs (grace {} ms)", options_.shutdown_grace_ms);
  StopWatchingStore();
  if (grpc::HealthCheckServiceInterface* health = grpc_server_->GetHealthCheckService()) {
    health->Shutdown();  // NOT_SERVING to health checkers while we drain
  }
  metrics_->SetReady(false);  // and to scrapes (the exposer lives until the end)
  // Streams end at once (their clients reconnect and retry, answered from the ledger); unary
  // RPCs get the grace period.
  service_->CancelStreams();
  grpc_server_->Shutdown(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(options_.shutdown_grace_ms));
  ledger_->Shutdown();  // commits everything pending
  exposer_.reset();
  spdlog::info("shutdown complete: store flushed");
}

absl::Status Server::Reload() {
  absl::Status tls = tls_ ? tls_->Reload() : absl::OkStatus();
  absl::Status tokens = ReloadTokens();
  absl::Status certs = ReloadCertMap();
  return !tokens.ok() ? tokens : !certs.ok() ? certs : tls;
}

absl::Status Server::ReloadCertMap() {
  if (options_.client_cert_map.empty()) return absl::OkStatus();
  absl::StatusOr<ClientCertMap> fresh = ClientCertMap::Load(options_.client_cert_map);
  if (fresh.ok() && fresh->size() == 0) {
    fresh = absl::InvalidArgumentError(
        absl::StrFormat("client_cert_map '%s' names no certificate", options_.client_cert_map));
  }
  if (!fresh.ok()) {
    spdlog::error("reload: client certificate map refused, the old map stays: {}",
                  std::string(fresh.status().message()));
    return fresh.status();
  }
  const std::shared_ptr<const ClientCertMap> old = service_->cert_map();
  spdlog::info("reload: client certificate map '{}' loaded: names={} (was {})",
               options_.client_cert_map, fresh->size(), old ? old->size() : 0);
  service_->SetCertMap(std::make_shared<const ClientCertMap>(std::move(*fresh)));
  return absl::OkStatus();
}

absl::Status Server::ReloadTokens() {
  if (options_.token_file.empty()) return absl::OkStatus();
  absl::StatusOr<TokenTable> fresh = TokenTable::Load(options_.token_file);
  if (fresh.ok() && fresh->size() == 0) {
    fresh = absl::InvalidArgumentError(
        absl::StrFormat("token_file '%s' holds no tokens", options_.token_file));
  }
  if (!fresh.ok()) {
    spdlog::error("reload: token file refused, the old tokens stay: {}",
                  std::string(fresh.status().message()));
    return fresh.status();
  }
  const std::shared_ptr<const TokenTable> old = service_->tokens();
  spdlog::info("reload: token file '{}' loaded: {}{}", options_.token_file,
               old ? fresh->DescribeChangeFrom(*old) : "tokens=" + std::to_string(fresh->size()),
               fresh->plaintext_lines() > 0
                   ? absl::StrFormat(" (%d plaintext lines: deprecated)", fresh->plaintext_lines())
                   : "");
  service_->SetTokens(std::make_shared<const TokenTable>(std::move(*fresh)));
  return absl::OkStatus();
}

void Server::Wait() {
  if (grpc_server_) grpc_server_->Wait();
}

Server::~Server() {
  StopWatchingStore();
  if (grpc_server_) Shutdown();
  // Shutdown ends every handler, ordered by gRPC's own locks (which TSan cannot see: Debian's
  // gRPC is not instrumented); destroying the server joins its threads, an order TSan sees,
  // before the service they used is freed.
  grpc_server_.reset();
  ledger_.reset();
  store_.reset();  // SQLite checkpoints and closes
}

}  // namespace dpledger::server
