// DPL_HOST_DEVICE marks inline functions shared by the CPU build and CUDA kernels,
// so CPU tests exercise exactly the math the GPU runs.
#pragma once

#if defined(__CUDACC__)
#define DPL_HOST_DEVICE __host__ __device__
#else
#define DPL_HOST_DEVICE
#endif
