// CUDA backend (mc_cuda.h). Kernels call the shared per-step math of
// mc_sample_math.h, which draws with cuRAND's Philox4x32-10 on the device, so a
// path's random bits are exactly the CPU's. Sums are fp64 Neumaier per fixed chunk; the host adds the
// chunk sums in chunk order, so results do not depend on the launch shape.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/mc/mc_cuda.h"

namespace dpledger::core::mc::cuda {
namespace {

constexpr int kThreadsPerBlock = 256;
constexpr int64_t kStreamBatchChunks = int64_t{1} << 20;  // 6.7e7 paths per launch

std::string Err(cudaError_t e, const char* what) {
  return std::string(what) + ": " + cudaGetErrorString(e);
}

#define DPL_CUDA_TRY(expr, what)                  \
  do {                                            \
    const cudaError_t dpl_e_ = (expr);            \
    if (dpl_e_ != cudaSuccess) return Err(dpl_e_, what); \
  } while (0)

int Blocks(int64_t n) { return static_cast<int>((n + kThreadsPerBlock - 1) / kThreadsPerBlock); }

__global__ void StreamKernel(const StreamEvent* events, int num_events, uint64_t total_steps,
                             int32_t kind, uint32_t stream, uint64_t seed, int64_t chunk0,
                             int64_t num_chunks, int64_t m, double eps, double* out_x,
                             double* out_x2, long long* out_pos) {
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= num_chunks) return;
  const int64_t p0 = (chunk0 + g) * kStreamChunkPaths;
  const int64_t p1 = p0 + kStreamChunkPaths < m ? p0 + kStreamChunkPaths : m;
  NeumaierSum a, a2;
  long long pos = 0;
  for (int64_t p = p0; p < p1; ++p) {
    const double x =
        StreamPath(kind, events, num_events, total_steps, stream, seed, static_cast<uint64_t>(p), eps);
    a.Add(x);
    a2.Add(x * x);
    pos += x > 0;
  }
  out_x[g] = a.Value();
  out_x2[g] = a2.Value();
  out_pos[g] = pos;
}

// Device buffer freed at scope exit.
template <typename T>
struct DeviceBuffer {
  T* ptr = nullptr;
  ~DeviceBuffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
  cudaError_t Allocate(size_t n) { return cudaMalloc(reinterpret_cast<void**>(&ptr), n * sizeof(T)); }
};

}  // namespace

int DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

std::string StreamEstimate(const StreamEvent* events, int num_events, int64_t total_steps,
                           int32_t kind, uint32_t stream, uint64_t seed, int64_t num_samples,
                           double epsilon, Totals* out) {
  DeviceBuffer<StreamEvent> d_events;
  DPL_CUDA_TRY(d_events.Allocate(num_events), "cudaMalloc events");
  DPL_CUDA_TRY(cudaMemcpy(d_events.ptr, events, num_events * sizeof(StreamEvent),
                          cudaMemcpyHostToDevice),
               "cudaMemcpy events");
  const int64_t num_chunks = (num_samples + kStreamChunkPaths - 1) / kStreamChunkPaths;
  const int64_t batch = std::min(num_chunks, kStreamBatchChunks);
  DeviceBuffer<double> d_x, d_x2;
  DeviceBuffer<long long> d_pos;
  DPL_CUDA_TRY(d_x.Allocate(batch), "cudaMalloc");
  DPL_CUDA_TRY(d_x2.Allocate(batch), "cudaMalloc");
  DPL_CUDA_TRY(d_pos.Allocate(batch), "cudaMalloc");
  std::vector<double> hx(batch), hx2(batch);
  std::vector<long long> hpos(batch);
  NeumaierSum sx, sx2;
  int64_t npos = 0;
  for (int64_t c0 = 0; c0 < num_chunks; c0 += batch) {
    const int64_t nc = std::min(batch, num_chunks - c0);
    StreamKernel<<<Blocks(nc), kThreadsPerBlock>>>(
        d_events.ptr, num_events, static_cast<uint64_t>(total_steps), kind, stream, seed,
        c0, nc, num_samples, epsilon, d_x.ptr, d_x2.ptr, d_pos.ptr);
    DPL_CUDA_TRY(cudaGetLastError(), "stream kernel launch");
    DPL_CUDA_TRY(cudaMemcpy(hx.data(), d_x.ptr, nc * sizeof(double), cudaMemcpyDeviceToHost),
                 "cudaMemcpy sums");
    DPL_CUDA_TRY(cudaMemcpy(hx2.data(), d_x2.ptr, nc * sizeof(double), cudaMemcpyDeviceToHost),
                 "cudaMemcpy sums");
    DPL_CUDA_TRY(cudaMemcpy(hpos.data(), d_pos.ptr, nc * sizeof(long long),
                            cudaMemcpyDeviceToHost),
                 "cudaMemcpy counts");
    for (int64_t c = 0; c < nc; ++c) {
      sx.Add(hx[c]);
      sx2.Add(hx2[c]);
      npos += hpos[c];
    }
  }
  out->sum_x = sx.Value();
  out->sum_x2 = sx2.Value();
  out->num_positive = npos;
  return "";
}

// ------------------------------------------------------------------- pools

struct DevicePool {
  bool importance = false;
  int64_t num_paths = 0;
  double* s = nullptr;  // SMC: loss sum; IS: S_u
  double* l_u = nullptr;
  double* y_t = nullptr;
  double* a_t = nullptr;
  int32_t* tilted = nullptr;
  McStep* steps = nullptr;
  int steps_capacity = 0;
};

namespace {

__global__ void InitKernel(double* s, double* l_u, double* y_t, double* a_t, int32_t* tilted,
                           int64_t begin, int64_t end) {
  const int64_t p = begin + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= end) return;
  s[p] = 0;
  if (l_u != nullptr) {
    l_u[p] = -kInf;
    y_t[p] = 0;
    a_t[p] = 0;
    tilted[p] = -1;
  }
}

__global__ void AppendKernel(DevicePool pool, int32_t event, int64_t first, int64_t count,
                             uint32_t stream, uint64_t seed, int64_t begin, int64_t end) {
  const int64_t p = begin + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= end) return;
  const uint64_t path = static_cast<uint64_t>(p);
  if (!pool.importance) {
    const McStep s = pool.steps[event];
    double y = pool.s[p];
    for (int64_t i = 0; i < count; ++i) {
      y += SampleLoss(s, DrawBlock(seed, path, static_cast<uint64_t>(first + i), stream, kDrawMain));
    }
    pool.s[p] = y;
    return;
  }
  IsPathState st{pool.s[p], pool.l_u[p], pool.y_t[p], pool.a_t[p], pool.tilted[p]};
  for (int64_t i = 0; i < count; ++i) {
    IsAppendStep(st, pool.steps, event, static_cast<uint64_t>(first + i), seed, path);
  }
  pool.s[p] = st.s_u;
  pool.l_u[p] = st.l_u;
  pool.y_t[p] = st.y_t;
  pool.a_t[p] = st.a_t;
  pool.tilted[p] = st.tilted_event;
}

__device__ void PathValue(const DevicePool& pool, int64_t p, uint64_t n, double* y, double* log_w) {
  if (!pool.importance || n == 0) {
    *y = pool.importance ? 0.0 : pool.s[p];
    *log_w = 0;
    return;
  }
  const IsPathState st{pool.s[p], pool.l_u[p], pool.y_t[p], pool.a_t[p], pool.tilted[p]};
  *y = IsPathLoss(st);
  *log_w = IsPathLogWeight(st, n);
}

// Chunk c sums paths c, c + kPoolChunks, ... (coalesced reads, fixed order).
__global__ void EvaluateKernel(DevicePool pool, uint64_t n, const double* eps, int ne, bool mirror,
                               double* out_x, double* out_x2, double* out_slope, long long* out_pos,
                               double* out_max, double* out_min) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= kPoolChunks) return;
  double mx = -kInf, mn = kInf;
  for (int i = 0; i < ne; ++i) {
    NeumaierSum sx, sx2, ss;
    long long pos = 0;
    for (int64_t p = c; p < pool.num_paths; p += kPoolChunks) {
      double y, log_w;
      PathValue(pool, p, n, &y, &log_w);
      if (i == 0) {
        mx = fmax(mx, y);
        mn = fmin(mn, y);
      }
      const PathTerm t = EvaluatePath(y, log_w, eps[i], mirror);
      sx.Add(t.x);
      sx2.Add(t.x * t.x);
      ss.Add(t.slope);
      pos += t.x > 0;
    }
    out_x[i * kPoolChunks + c] = sx.Value();
    out_x2[i * kPoolChunks + c] = sx2.Value();
    out_slope[i * kPoolChunks + c] = ss.Value();
    out_pos[i * kPoolChunks + c] = pos;
  }
  out_max[c] = mx;
  out_min[c] = mn;
}

__global__ void ReadKernel(DevicePool pool, uint64_t n, double* y, double* log_w) {
  const int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= pool.num_paths) return;
  PathValue(pool, p, n, &y[p], &log_w[p]);
}

void FreeArrays(DevicePool* p) {
  for (void* ptr : {static_cast<void*>(p->s), static_cast<void*>(p->l_u),
                    static_cast<void*>(p->y_t), static_cast<void*>(p->a_t),
                    static_cast<void*>(p->tilted)}) {
    if (ptr != nullptr) cudaFree(ptr);
  }
  p->s = p->l_u = p->y_t = p->a_t = nullptr;
  p->tilted = nullptr;
}

template <typename T>
cudaError_t GrowArray(T** ptr, int64_t old_n, int64_t new_n) {
  T* fresh = nullptr;
  cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&fresh), new_n * sizeof(T));
  if (e != cudaSuccess) return e;
  if (*ptr != nullptr && old_n > 0) {
    e = cudaMemcpy(fresh, *ptr, old_n * sizeof(T), cudaMemcpyDeviceToDevice);
    if (e != cudaSuccess) {
      cudaFree(fresh);
      return e;
    }
  }
  if (*ptr != nullptr) cudaFree(*ptr);
  *ptr = fresh;
  return cudaSuccess;
}

}  // namespace

std::string PoolCreate(bool importance, int64_t num_paths, DevicePool** out) {
  auto* p = new DevicePool;
  p->importance = importance;
  const std::string err = PoolResize(p, num_paths);
  if (!err.empty()) {
    PoolDestroy(p);
    return err;
  }
  *out = p;
  return "";
}

void PoolDestroy(DevicePool* pool) {
  if (pool == nullptr) return;
  FreeArrays(pool);
  if (pool->steps != nullptr) cudaFree(pool->steps);
  delete pool;
}

std::string PoolResize(DevicePool* pool, int64_t num_paths) {
  const int64_t old = pool->num_paths;
  if (num_paths <= old) return "";
  DPL_CUDA_TRY(GrowArray(&pool->s, old, num_paths), "pool resize");
  if (pool->importance) {
    DPL_CUDA_TRY(GrowArray(&pool->l_u, old, num_paths), "pool resize");
    DPL_CUDA_TRY(GrowArray(&pool->y_t, old, num_paths), "pool resize");
    DPL_CUDA_TRY(GrowArray(&pool->a_t, old, num_paths), "pool resize");
    DPL_CUDA_TRY(GrowArray(&pool->tilted, old, num_paths), "pool resize");
  }
  InitKernel<<<Blocks(num_paths - old), kThreadsPerBlock>>>(pool->s, pool->l_u, pool->y_t,
                                                            pool->a_t, pool->tilted, old, num_paths);
  DPL_CUDA_TRY(cudaGetLastError(), "init kernel launch");
  pool->num_paths = num_paths;
  return "";
}

std::string PoolAppend(DevicePool* pool, const McStep* steps, int num_events, int32_t event,
                       int64_t first_step, int64_t count, uint32_t stream, uint64_t seed,
                       int64_t path_begin, int64_t path_end) {
  if (num_events > pool->steps_capacity) {
    if (pool->steps != nullptr) cudaFree(pool->steps);
    pool->steps = nullptr;
    const int cap = std::max(2 * num_events, 16);
    DPL_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&pool->steps), cap * sizeof(McStep)),
                 "cudaMalloc steps");
    pool->steps_capacity = cap;
  }
  DPL_CUDA_TRY(cudaMemcpy(pool->steps, steps, num_events * sizeof(McStep), cudaMemcpyHostToDevice),
               "cudaMemcpy steps");
  if (path_end > path_begin) {
    AppendKernel<<<Blocks(path_end - path_begin), kThreadsPerBlock>>>(
        *pool, event, first_step, count, stream, seed, path_begin, path_end);
    DPL_CUDA_TRY(cudaGetLastError(), "append kernel launch");
  }
  DPL_CUDA_TRY(cudaDeviceSynchronize(), "append kernel");
  return "";
}

std::string PoolEvaluate(const DevicePool* pool, int64_t num_steps, const double* epsilons,
                         int num_epsilons, bool mirror, PoolTotals* out) {
  const int64_t cells = kPoolChunks * num_epsilons;
  DeviceBuffer<double> d_eps, d_x, d_x2, d_slope, d_max, d_min;
  DeviceBuffer<long long> d_pos;
  DPL_CUDA_TRY(d_eps.Allocate(num_epsilons), "cudaMalloc");
  DPL_CUDA_TRY(d_x.Allocate(cells), "cudaMalloc");
  DPL_CUDA_TRY(d_x2.Allocate(cells), "cudaMalloc");
  DPL_CUDA_TRY(d_slope.Allocate(cells), "cudaMalloc");
  DPL_CUDA_TRY(d_pos.Allocate(cells), "cudaMalloc");
  DPL_CUDA_TRY(d_max.Allocate(kPoolChunks), "cudaMalloc");
  DPL_CUDA_TRY(d_min.Allocate(kPoolChunks), "cudaMalloc");
  DPL_CUDA_TRY(cudaMemcpy(d_eps.ptr, epsilons, num_epsilons * sizeof(double),
                          cudaMemcpyHostToDevice),
               "cudaMemcpy epsilons");
  EvaluateKernel<<<Blocks(kPoolChunks), kThreadsPerBlock>>>(
      *pool, static_cast<uint64_t>(num_steps), d_eps.ptr, num_epsilons, mirror, d_x.ptr, d_x2.ptr,
      d_slope.ptr, d_pos.ptr, d_max.ptr, d_min.ptr);
  DPL_CUDA_TRY(cudaGetLastError(), "evaluate kernel launch");
  std::vector<double> hx(cells), hx2(cells), hs(cells), hmax(kPoolChunks), hmin(kPoolChunks);
  std::vector<long long> hpos(cells);
  DPL_CUDA_TRY(cudaMemcpy(hx.data(), d_x.ptr, cells * sizeof(double), cudaMemcpyDeviceToHost), "copy");
  DPL_CUDA_TRY(cudaMemcpy(hx2.data(), d_x2.ptr, cells * sizeof(double), cudaMemcpyDeviceToHost), "copy");
  DPL_CUDA_TRY(cudaMemcpy(hs.data(), d_slope.ptr, cells * sizeof(double), cudaMemcpyDeviceToHost), "copy");
  DPL_CUDA_TRY(cudaMemcpy(hpos.data(), d_pos.ptr, cells * sizeof(long long), cudaMemcpyDeviceToHost), "copy");
  DPL_CUDA_TRY(cudaMemcpy(hmax.data(), d_max.ptr, kPoolChunks * sizeof(double), cudaMemcpyDeviceToHost), "copy");
  DPL_CUDA_TRY(cudaMemcpy(hmin.data(), d_min.ptr, kPoolChunks * sizeof(double), cudaMemcpyDeviceToHost), "copy");
  for (int i = 0; i < num_epsilons; ++i) {
    NeumaierSum sx, sx2, ss;
    long long pos = 0;
    for (int64_t c = 0; c < kPoolChunks; ++c) {
      sx.Add(hx[i * kPoolChunks + c]);
      sx2.Add(hx2[i * kPoolChunks + c]);
      ss.Add(hs[i * kPoolChunks + c]);
      pos += hpos[i * kPoolChunks + c];
    }
    out[i].sum_x = sx.Value();
    out[i].sum_x2 = sx2.Value();
    out[i].sum_slope = ss.Value();
    out[i].num_positive = pos;
    out[i].max_loss = *std::max_element(hmax.begin(), hmax.end());
    out[i].min_loss = *std::min_element(hmin.begin(), hmin.end());
  }
  return "";
}

std::string PoolRead(const DevicePool* pool, int64_t num_steps, double* y, double* log_w) {
  DeviceBuffer<double> d_y, d_w;
  DPL_CUDA_TRY(d_y.Allocate(pool->num_paths), "cudaMalloc");
  DPL_CUDA_TRY(d_w.Allocate(pool->num_paths), "cudaMalloc");
  ReadKernel<<<Blocks(pool->num_paths), kThreadsPerBlock>>>(*pool, static_cast<uint64_t>(num_steps),
                                                             d_y.ptr, d_w.ptr);
  DPL_CUDA_TRY(cudaGetLastError(), "read kernel launch");
  DPL_CUDA_TRY(cudaMemcpy(y, d_y.ptr, pool->num_paths * sizeof(double), cudaMemcpyDeviceToHost),
               "copy");
  DPL_CUDA_TRY(cudaMemcpy(log_w, d_w.ptr, pool->num_paths * sizeof(double), cudaMemcpyDeviceToHost),
               "copy");
  return "";
}

}  // namespace dpledger::core::mc::cuda
