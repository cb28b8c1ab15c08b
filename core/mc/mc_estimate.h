// Streaming Monte Carlo estimate of delta(epsilon) for a ledger (mc-evr.md 3.1,
// 3.2-A, 3.3): draws `num_samples` fresh paths without storing them. Used by the
// EVR verifier (core/evr), which needs up to ~1e10 paths and must never reuse
// the estimator's samples. This header is the agreed contract between core/mc
// and core/evr.
//
// Semantics:
// * SMC (spec 3.1) samples the PRV of `direction` directly: remove draws o ~ P
//   and y(o); add draws o ~ Q and -y(o) (spec 4.7.1 (i)). Any mechanism.
//   Pure-Gaussian events are drawn as one merged normal (spec 2.4).
// * IS (spec 3.2, exponential tilt A, one uniformly chosen tilted coordinate):
//   remove direction, Gaussian and subsampled Gaussian steps only (else
//   UNIMPLEMENTED); thetas[i] applies to every step of events[i].
// * kTiltEvery (issue 14): every coordinate drawn from its output-tilted law
//   P_theta, log w = sum_i (log M_i(theta_i) - theta_i t_i) (mc_stream_math.h
//   StreamTiltPath); unbiased for any thetas (exact likelihood ratios). Remove
//   direction. thetas[i] applies to every step of events[i]; empty means the
//   saddle-point tilts of tilt_choice.h at `epsilon`. Gaussian kinds are tilted;
//   other mechanisms are drawn untilted and need theta 0 (else UNIMPLEMENTED).
//   Pure-Gaussian events are one merged draw, so their cost does not grow with
//   the count. The CUDA backend runs the same per-path math.
// * kTiltMixture (issue 14): every coordinate drawn from the per-coordinate
//   defensive mixture of mixture_choice.h (saddle-point loss tilt of the bulk,
//   plus a far component for the one-big-step regime), weighted by the exact
//   running log(p/g) (mc_mixture_math.h). Both directions; no thetas (the
//   proposal is chosen from (ledger, epsilon)). Other mechanisms ride along
//   untilted. Unbiased for any proposal. Where the saddle-point loss tilt is
//   explosive (mixture_choice.h), the remove direction draws odd paths from the
//   truncated loss tilt and even ones from a one-big-step proposal, weighted by the
//   balance heuristic (truncated_loss_tilt.h, MixDrawStepPair).
// * kTiltLoss (issue 14): every (subsampled) Gaussian step drawn from its LOSS tilt
//   p e^{n y}/A_{n+1} at order n = thetas[i] for the steps of events[i] (required, one
//   per event; integers in [0, 62] for subsampled steps, any real >= 0 for plain
//   Gaussian ones), an exact normal mixture; log w = sum (log A_{n+1} - n y_i) exactly
//   (mc_loss_tilt_math.h). Remove direction. Other mechanisms ride along untilted
//   (order 0, else UNIMPLEMENTED). Its proven second-moment bound for the EVR
//   verifier is core/evr/tilt_moment_bound.h ChooseLossTilt.
// * kLargestCoordinate (issue 14): a uniformly chosen coordinate drawn from P above a
//   cut, reweighted by cells; unbiased for delta minus the mass with every output below
//   the cut (core/mc/largest_coordinate.h; CPU only). Proven bounds for the EVR verifier:
//   core/evr/largest_moment_bound.h.
// * kAddTilt (issue 14): add direction, every Gaussian-kind output shifted down by
//   thetas[i] s_i^2 (required, >= 0), exact weights (core/mc/add_tilt.h; CPU only).
// * Reproducible: path j uses Philox4x32-10 counters (seed, j, step, ...) only
//   (mc_sample_math.h), and sums are reduced in a fixed chunk order, so the
//   result is bit-identical for any num_threads; the CUDA backend draws the same
//   random bits (its doubles may differ from the CPU's in the last ulps of libm).
// * Sums are Neumaier-compensated doubles; counts are 64-bit.
// * INVALID_ARGUMENT for an empty ledger, num_samples < 2, a negative or
//   non-finite epsilon, thetas of the wrong size, or a non-finite theta.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/mechanisms/mechanism.h"
#include "core/plrv/plrv.h"

namespace dpledger::core {

// Where the samples are drawn. kAuto: CUDA when the build has it and
// cudaGetDeviceCount() finds a device, else the CPU (all cores).
enum class McBackend { kAuto, kCpu, kCuda };
std::string_view McBackendName(McBackend backend);  // "auto", "cpu", "cuda"
// True when this build has the CUDA backend and a device is present.
bool CudaDeviceAvailable();

enum class McEstimator {
  kSmc,                 // simple Monte Carlo, any mechanism with a sampler
  kImportanceSampling,  // exponential tilt of one random coordinate (spec 3.2-A)
  kTiltEvery,           // exponential tilt of every coordinate (issue 14)
  kTiltMixture,         // per-coordinate defensive mixture (issue 14, mixture_choice.h)
  kTiltLoss,            // loss tilt of every coordinate at integer order (issue 14)
  kLargestCoordinate,   // one coordinate drawn above a cut, ledger of one subsampled
                        // Gaussian mechanism (issue 14, largest_coordinate.h)
  kAddTilt,             // add direction, every output shifted (issue 14, add_tilt.h)
};
// "smc", "is", "tilt_every", "tilt_mixture", "tilt_loss", "largest",
// "add_tilt"
std::string_view McEstimatorName(McEstimator estimator);

struct McEstimateRequest {
  std::vector<MechanismEvent> events;  // the ledger, in order
  Direction direction = Direction::kRemove;
  double epsilon = 0;
  McEstimator estimator = McEstimator::kSmc;
  // IS and kTiltEvery: tilt theta_i (exponent units) for each entry of `events`;
  // empty means theta_MM(epsilon) per event (IS, spec 3.2-A) or the saddle-point
  // tilts (kTiltEvery, tilt_choice.h). kTiltLoss: the loss-tilt order of each event
  // (required). kAddTilt: the add-direction output tilt of each event (required).
  std::vector<double> thetas;
  // kLargestCoordinate (required): the proposal's cells, lower ends (strictly
  // increasing) and density ratios h/p (> 0), one per cell (largest_coordinate.h).
  std::vector<double> cell_lower{};
  std::vector<double> cell_rho{};
  uint64_t seed = 0;
  int64_t num_samples = 0;
  int num_threads = 0;  // 0: all cores (CPU backend)
  McBackend backend = McBackend::kAuto;
};

struct McEstimateResult {
  double delta_hat = 0;      // mean of x_j
  double second_moment = 0;  // mean of x_j^2
  double std_error = 0;      // sqrt((s2 - delta_hat^2)/(m - 1))
  int64_t num_positive = 0;  // #{x_j > 0}
  double ess = 0;            // (sum x)^2 / sum x^2
  int64_t num_samples = 0;
  std::vector<double> thetas;  // IS, kTiltEvery, kTiltLoss: the tilts used, per event
  std::string backend;       // "cpu" or "cuda"
  double seconds = 0;
};

absl::StatusOr<McEstimateResult> EstimateDeltaStreaming(const McEstimateRequest& request);

// Fills delta_hat, second_moment, std_error and ess from the sums (spec 3.3).
void FinishEstimate(double sum_x, double sum_x2, int64_t num_positive, int64_t num_samples,
                    McEstimateResult* result);

}  // namespace dpledger::core
