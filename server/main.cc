// dpledgerd: the privacy-budget ledger service (issue 4).
//
//   dpledgerd --listen 127.0.0.1:50051 --data-dir var --metrics-listen 127.0.0.1:9464 --insecure
//   dpledgerd --store postgres --postgres-url postgresql://dpledger@127.0.0.1/dpledger --insecure
//
// Every flag can also come from the environment as DPLEDGER_<FLAG> (upper case, '-' -> '_'),
// e.g. DPLEDGER_DATA_DIR=/srv/dpledger; a command-line flag wins over the environment.
// SIGTERM / SIGINT: graceful shutdown (drain RPCs and streams, commit, close the store).
// SIGHUP: reload the token file, client certificate map and TLS files (server.h Reload); open
// streams and calls go on.
#include <algorithm>
#include <malloc.h>

#include <csignal>
#include <cstdlib>
#include <pthread.h>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "core/registry/accountant_option_names.h"
#include "server/log_format.h"
#include "server/server.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051", "gRPC address host:port (port 0: any free)");
ABSL_FLAG(std::string, data_dir, "var",
          "directory of the SQLite store (ledger.db); with store=postgres, of this replica's "
          "high-water mark of the database (postgres.mark)");
ABSL_FLAG(std::string, store, "sqlite",
          "store backend: sqlite (embedded, one replica), postgres (shared by several "
          "replicas) or memory (nothing persists)");
ABSL_FLAG(std::string, postgres_url, "",
          "libpq connection URI of the postgres store, e.g. "
          "postgresql://dpledger@127.0.0.1:5432/dpledger (a password belongs in ~/.pgpass or "
          "PGPASSWORD, or in DPLEDGER_POSTGRES_URL from a Secret)");
ABSL_FLAG(int, postgres_pool_size, 8, "connections to PostgreSQL at most");
ABSL_FLAG(int, store_ping_interval_ms, 1000,
          "how often the store is pinged; health is NOT_SERVING while it is unreachable");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "Prometheus /metrics address host:port; empty: disabled");
ABSL_FLAG(bool, insecure, false, "plaintext and no authentication (local use only)");
ABSL_FLAG(std::string, tls_cert, "", "PEM server certificate (required unless --insecure)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key (required unless --insecure)");
ABSL_FLAG(std::string, token_file, "",
          "bearer tokens, one 'sha256:HEX TENANT reader|writer' per line, HEX the token's SHA-256 "
          "(plaintext 'TOKEN ...' lines: deprecated); reloaded on SIGHUP (required unless "
          "--insecure)");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA of client certificates: mutual TLS (with --client-cert-map); a verified "
          "certificate's subject, SAN or common name names the caller, token callers keep "
          "working");
ABSL_FLAG(std::string, client_cert_map, "",
          "client certificates to callers, one 'NAME TENANT reader|writer' per line, NAME "
          "'subject:DN', 'san:VALUE' or a common name; reloaded on SIGHUP");
ABSL_FLAG(int, max_message_bytes, 16 << 20, "largest gRPC message accepted or sent");
ABSL_FLAG(int, shutdown_grace_ms, 10000, "how long shutdown waits for in-flight RPCs");
ABSL_FLAG(bool, full_integrity_check, false,
          "PRAGMA integrity_check at start-up instead of quick_check");
ABSL_FLAG(bool, check_ledger, true, "check ledger consistency at start-up");
ABSL_FLAG(bool, replay_ledger, false,
          "at start-up, replay every job's admission policy over its ledger and check each "
          "stored spent bound (one admission per stored update)");
ABSL_FLAG(bool, accept_data_loss, false,
          "start although the store lost data it acknowledged (missing WAL, emptied, replaced "
          "or restored database): logs what was lost and rewrites the high-water mark");
ABSL_FLAG(std::string, default_accountant, "pld", "admitting accountant when a job names none");
ABSL_FLAG(int, max_jobs_per_tenant, 10000, "jobs one tenant may create");
ABSL_FLAG(int, max_updates_per_request, 1000, "updates in one AppendSteps request");
ABSL_FLAG(int, max_steps_per_update, 64, "(mechanism, count) entries in one update");
ABSL_FLAG(int, max_cached_jobs, 10000, "jobs whose accountant state stays cached (LRU)");
ABSL_FLAG(int64_t, max_cached_bytes, int64_t{2} << 30,
          "heap bytes of cached jobs' state (accountant caches, ledgers, retry windows; LRU "
          "beyond; 0: keep none idle)");
ABSL_FLAG(int64_t, max_pool_bytes, int64_t{1} << 30,
          "bytes of MC sample pools kept between Spent queries (LRU beyond; 0: none)");
ABSL_FLAG(int, max_admission_group, 1024, "pipelined stream updates admitted together");
ABSL_FLAG(int64_t, max_payload_bytes, 8 << 20, "largest release payload");
ABSL_FLAG(int, group_commit_max_batches, 4096, "writes merged into one commit at most");
ABSL_FLAG(int, group_commit_delay_us, 0,
          "extra wait for more writes before a commit (0: commit at once)");
ABSL_FLAG(int, max_stream_inflight, 256, "stream messages read ahead of their acks");
ABSL_FLAG(int, max_tenant_inflight_updates, 1024,
          "updates of one tenant being admitted or committed at once (streams and AppendSteps); "
          "more wait, so one tenant's load cannot fill every commit");
ABSL_FLAG(double, max_tenant_rps, 0,
          "RPCs per second one tenant may make (a stream counts once); beyond: "
          "RESOURCE_EXHAUSTED with a retry hint (0: no limit)");
ABSL_FLAG(double, tenant_rps_burst, 0,
          "RPCs one tenant may make at once after a quiet spell (0: max_tenant_rps)");
ABSL_FLAG(int, max_streams, 256,
          "StreamSteps calls open at once, server-wide (each holds 3 threads); beyond: "
          "RESOURCE_EXHAUSTED with a retry hint");
ABSL_FLAG(int, max_streams_per_tenant, 64, "StreamSteps calls one tenant may have open at once");
ABSL_FLAG(int, stream_idle_timeout_ms, 300000,
          "a stream with no message and no pending ack for this long is ended");
ABSL_FLAG(int, stream_stall_timeout_ms, 30000,
          "a stream whose client has not taken an ack for this long is ended (its reading "
          "stops as soon as max_stream_inflight acks wait)");
ABSL_FLAG(int, max_job_series, 1000, "jobs labelled in dpledger_job_epsilon_spent");
ABSL_FLAG(bool, release_use_mc, true, "run the EVR Monte Carlo verifier for releases");
ABSL_FLAG(bool, release_certify_directions, true,
          "EVR releases: a direction whose PLD certified delta is below the threshold is "
          "certified instead of sampled (core/evr/verifier.h)");
ABSL_FLAG(double, release_mc_max_seconds, 60,
          "EVR predicted-time cap per release; beyond it a certified accountant decides");
ABSL_FLAG(double, evr_admission_tau, 0.5,
          "tau of the EVR verification that admits steps of evr jobs, in (0, 1)");
ABSL_FLAG(int64_t, evr_admission_max_samples, 100'000'000,
          "most verification paths per direction for one evr admission (more: refused)");
ABSL_FLAG(double, evr_admission_max_seconds, 60,
          "predicted sampling-time cap of one evr admission (beyond: refused)");
ABSL_FLAG(double, query_mc_max_seconds, 30,
          "time cap on the MC accountant's sample growth per Spent query (0: none)");
ABSL_FLAG(double, query_max_seconds, 30,
          "time cap on one Spent or Remaining query of any other accountant (0: none); a "
          "caller's deadline caps it further");
ABSL_FLAG(int, edgeworth_order, 2,
          "Edgeworth accountant: order of its estimate, 0-3 (0: CLT with exact moments)");
ABSL_FLAG(std::string, edgeworth_mode, "clamped",
          "Edgeworth accountant estimate: clamped (production) or literal (as in the paper)");
ABSL_FLAG(std::string, spa_estimator, "sp-clt",
          "SPA accountant estimate: sp-clt, sp-msd0, sp-msd1, sp-ew2 or icml-k3");
ABSL_FLAG(double, pld_precision, 0,
          "PLD accountant: target relative width (upper - lower) / lower of its certified "
          "intervals, in (0, 0.5]: the upper end is at most this far above the truth "
          "(0: defaults, 5e-4 for epsilon and 0.01 for delta)");
ABSL_FLAG(std::string, log_level, "info", "trace, debug, info, warn, error");

namespace {

constexpr const char* kFlagNames[] = {
    "listen", "data_dir", "store", "postgres_url", "postgres_pool_size",
    "store_ping_interval_ms", "metrics_listen", "insecure", "tls_cert", "tls_key",
    "token_file", "tls_client_ca", "client_cert_map", "max_message_bytes", "shutdown_grace_ms",
    "full_integrity_check", "check_ledger", "replay_ledger", "accept_data_loss",
    "default_accountant", "max_jobs_per_tenant", "max_updates_per_request",
    "max_steps_per_update", "max_cached_jobs", "max_cached_bytes", "max_pool_bytes", "max_admission_group", "max_payload_bytes",
    "group_commit_max_batches", "group_commit_delay_us", "max_stream_inflight",
    "max_tenant_inflight_updates", "max_tenant_rps", "tenant_rps_burst", "max_streams", "max_streams_per_tenant", "stream_idle_timeout_ms", "stream_stall_timeout_ms",
    "max_job_series", "release_use_mc", "release_certify_directions", "release_mc_max_seconds", "evr_admission_tau",
    "evr_admission_max_samples", "evr_admission_max_seconds", "query_mc_max_seconds",
    "query_max_seconds", "edgeworth_order", "edgeworth_mode", "spa_estimator", "pld_precision",
    "log_level"};

// DPLEDGER_<FLAG> from the environment, applied before the command line is parsed so the
// command line wins.
bool ApplyEnvironment() {
  bool ok = true;
  for (const char* name : kFlagNames) {
    const std::string env = "DPLEDGER_" + absl::AsciiStrToUpper(name);
    const char* value = std::getenv(env.c_str());
    if (value == nullptr) continue;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    std::string error;
    if (flag == nullptr || !flag->ParseFrom(value, &error)) {
      std::fprintf(stderr, "dpledgerd: environment %s='%s': %s\n", env.c_str(), value,
                   error.c_str());
      ok = false;
    }
  }
  return ok;
}

// The documented spelling is --data-dir / --metrics-listen (hyphens); Abseil flag names are
// identifiers, so hyphens in a flag's name (not its value) become underscores.
std::vector<std::string> NormalizeFlagNames(int argc, char** argv) {
  std::vector<std::string> out;
  bool only_args = false;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (i > 0 && !only_args && a == "--") only_args = true;
    if (i > 0 && !only_args && a.size() > 2 && a[0] == '-') {
      const size_t start = a[1] == '-' ? 2 : 1;
      const size_t end = std::min(a.find('='), a.size());
      for (size_t j = start; j < end; ++j) {
        if (a[j] == '-') a[j] = '_';
      }
    }
    out.push_back(std::move(a));
  }
  return out;
}

// --help: every flag of this file with its default and environment variable (Abseil's own
// --help lists only flags defined in a file named like the program: none here).
bool PrintHelpIfAsked(int argc, char** argv) {
  bool asked = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    asked |= a == "--help" || a == "-help" || a == "-h";
  }
  if (!asked) return false;
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::EndsWith(flag->Filename(), "server/main.cc")) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(), [](auto* a, auto* b) { return a->Name() < b->Name(); });
  std::printf("usage: %s\n\nFlags (a command-line flag wins over its environment variable):\n",
              std::string(absl::ProgramUsageMessage()).c_str());
  for (const absl::CommandLineFlag* flag : flags) {
    const std::string name(flag->Name());
    std::string dashed = name;
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    const bool has_env = std::find_if(std::begin(kFlagNames), std::end(kFlagNames), [&](auto* n) {
                           return name == n;
                         }) != std::end(kFlagNames);
    const std::string def = flag->DefaultValue().empty() ? "\"\"" : flag->DefaultValue();
    std::printf("  --%s  (default %s; %s)\n      %s\n", dashed.c_str(), def.c_str(),
                has_env ? ("env DPLEDGER_" + absl::AsciiStrToUpper(name)).c_str()
                        : "no environment variable",
                flag->Help().c_str());
  }
  return true;
}

// INVALID_ARGUMENT naming the flag for an accountant setting out of its range (Server::Start
// checks the options again, for callers that build them without flags).
absl::StatusOr<dpledger::server::ServerOptions> OptionsFromFlags() {
  dpledger::server::ServerOptions o;
  o.listen = absl::GetFlag(FLAGS_listen);
  o.data_dir = absl::GetFlag(FLAGS_data_dir);
  o.store = absl::GetFlag(FLAGS_store);
  o.postgres_url = absl::GetFlag(FLAGS_postgres_url);
  o.postgres_pool_size = absl::GetFlag(FLAGS_postgres_pool_size);
  o.store_ping_interval_ms = absl::GetFlag(FLAGS_store_ping_interval_ms);
  o.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  o.insecure = absl::GetFlag(FLAGS_insecure);
  o.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  o.tls_key = absl::GetFlag(FLAGS_tls_key);
  o.token_file = absl::GetFlag(FLAGS_token_file);
  o.tls_client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  o.client_cert_map = absl::GetFlag(FLAGS_client_cert_map);
  o.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  o.shutdown_grace_ms = absl::GetFlag(FLAGS_shutdown_grace_ms);
  o.full_integrity_check = absl::GetFlag(FLAGS_full_integrity_check);
  o.check_ledger = absl::GetFlag(FLAGS_check_ledger);
  o.accept_data_loss = absl::GetFlag(FLAGS_accept_data_loss);
  o.replay_ledger = absl::GetFlag(FLAGS_replay_ledger);
  o.ledger.default_accountant = absl::GetFlag(FLAGS_default_accountant);
  o.ledger.max_jobs_per_tenant = absl::GetFlag(FLAGS_max_jobs_per_tenant);
  o.ledger.max_updates_per_request = absl::GetFlag(FLAGS_max_updates_per_request);
  o.ledger.max_steps_per_update = absl::GetFlag(FLAGS_max_steps_per_update);
  o.ledger.max_cached_jobs = absl::GetFlag(FLAGS_max_cached_jobs);
  o.ledger.max_cached_bytes = absl::GetFlag(FLAGS_max_cached_bytes);
  o.ledger.max_pool_bytes = absl::GetFlag(FLAGS_max_pool_bytes);
  o.ledger.max_admission_group = absl::GetFlag(FLAGS_max_admission_group);
  o.ledger.max_payload_bytes = absl::GetFlag(FLAGS_max_payload_bytes);
  o.ledger.committer.max_batches_per_commit = absl::GetFlag(FLAGS_group_commit_max_batches);
  o.ledger.committer.max_delay = std::chrono::microseconds(absl::GetFlag(FLAGS_group_commit_delay_us));
  o.ledger.release_use_mc = absl::GetFlag(FLAGS_release_use_mc);
  o.ledger.release_mc_max_seconds = absl::GetFlag(FLAGS_release_mc_max_seconds);
  o.ledger.release_certify_directions = absl::GetFlag(FLAGS_release_certify_directions);
  o.ledger.evr_admission.tau = absl::GetFlag(FLAGS_evr_admission_tau);
  o.ledger.evr_admission.max_samples = absl::GetFlag(FLAGS_evr_admission_max_samples);
  o.ledger.evr_admission.max_seconds = absl::GetFlag(FLAGS_evr_admission_max_seconds);
  // Bounds how long an MC Spent query runs, and with it how long shutdown waits.
  o.ledger.accountant_options.mc.max_seconds = absl::GetFlag(FLAGS_query_mc_max_seconds);
  o.ledger.query_max_seconds = absl::GetFlag(FLAGS_query_max_seconds);
  if (!(o.ledger.query_max_seconds >= 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--query_max_seconds must be >= 0, got %g", o.ledger.query_max_seconds));
  }
  const int order = absl::GetFlag(FLAGS_edgeworth_order);
  if (order < 0 || order > dpledger::core::kMaxEdgeworthOrder) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--edgeworth-order must be in [0, %d], got %d", dpledger::core::kMaxEdgeworthOrder, order));
  }
  o.ledger.accountant_options.edgeworth.order = order;
  absl::StatusOr<dpledger::core::EdgeworthMode> mode =
      dpledger::core::ParseEdgeworthMode(absl::GetFlag(FLAGS_edgeworth_mode), "--edgeworth-mode");
  if (!mode.ok()) return mode.status();
  o.ledger.accountant_options.edgeworth.mode = *mode;
  absl::StatusOr<dpledger::core::SpaEstimator> estimator =
      dpledger::core::ParseSpaEstimator(absl::GetFlag(FLAGS_spa_estimator), "--spa-estimator");
  if (!estimator.ok()) return estimator.status();
  o.ledger.accountant_options.spa.estimator = *estimator;
  if (const double p = absl::GetFlag(FLAGS_pld_precision); p != 0) {
    absl::Status s = dpledger::core::ApplyPldPrecision(p, "--pld-precision",
                                                       &o.ledger.accountant_options.pld);
    if (!s.ok()) return s;
  }
  o.grpc.max_stream_inflight = absl::GetFlag(FLAGS_max_stream_inflight);
  o.grpc.max_tenant_inflight_updates = absl::GetFlag(FLAGS_max_tenant_inflight_updates);
  o.grpc.max_tenant_rps = absl::GetFlag(FLAGS_max_tenant_rps);
  o.grpc.tenant_rps_burst = absl::GetFlag(FLAGS_tenant_rps_burst);
  o.grpc.streams.max_streams = absl::GetFlag(FLAGS_max_streams);
  o.grpc.streams.max_streams_per_tenant = absl::GetFlag(FLAGS_max_streams_per_tenant);
  o.grpc.streams.idle_timeout_ms = absl::GetFlag(FLAGS_stream_idle_timeout_ms);
  o.grpc.streams.stall_timeout_ms = absl::GetFlag(FLAGS_stream_stall_timeout_ms);
  o.metrics.max_job_series = absl::GetFlag(FLAGS_max_job_series);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  // Large buffers (PLD grids and spectra, FFT scratch, MC pools) get mappings of their own,
  // returned to the kernel when freed. glibc's default raises this threshold after the first
  // such free; later ones then stay in the heap and the resident set drifted to ~2.3x the job
  // cache's cap (issue 11 defect 5, bench/cache_memory.sh).
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  absl::SetProgramUsageMessage(
      "dpledgerd --listen HOST:PORT --data-dir DIR --metrics-listen HOST:PORT "
      "(--insecure | --tls-cert F --tls-key F --token-file F); env DPLEDGER_<FLAG> also works");
  if (PrintHelpIfAsked(argc, argv)) return 0;
  if (!ApplyEnvironment()) return 2;
  std::vector<std::string> args = NormalizeFlagNames(argc, argv);
  std::vector<char*> arg_ptrs;
  for (std::string& a : args) arg_ptrs.push_back(a.data());
  absl::ParseCommandLine(static_cast<int>(arg_ptrs.size()), arg_ptrs.data());

  auto logger = spdlog::stderr_logger_mt("dpledgerd");
  logger->set_formatter(dpledger::server::NewLogFormatter());
  const spdlog::level::level_enum level = spdlog::level::from_str(absl::GetFlag(FLAGS_log_level));
  logger->set_level(level);
  spdlog::set_default_logger(logger);
  spdlog::flush_on(spdlog::level::info);

  // Block the shutdown signals in every thread; one thread waits for them with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const absl::StatusOr<dpledger::server::ServerOptions> options = OptionsFromFlags();
  absl::StatusOr<std::unique_ptr<dpledger::server::Server>> server =
      options.ok() ? dpledger::server::Server::Start(*options)
                   : absl::StatusOr<std::unique_ptr<dpledger::server::Server>>(options.status());
  if (!server.ok()) {
    spdlog::critical("start failed code={} msg=\"{}\"",
                     absl::StatusCodeToString(server.status().code()),
                     std::string(server.status().message()));
    return server.status().code() == absl::StatusCode::kDataLoss ? 3 : 1;
  }
  std::thread waiter([&] {
    int sig = 0;
    for (;;) {
      sigwait(&signals, &sig);
      if (sig != SIGHUP) break;
      spdlog::info("signal=SIGHUP received: reloading the token file, client certificate map and TLS files");
      (void)(*server)->Reload();  // logs the outcome; a bad file keeps the old one
    }
    spdlog::info("signal={} received", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    (*server)->Shutdown();
  });
  waiter.join();
  server->reset();
  spdlog::info("dpledgerd exited cleanly");
  return 0;
}
