// Storage for arrays that FFTW reads or writes: fftw_malloc'd, so a transform can
// run directly on it (FFTW's new-array execute needs the planner's alignment) and
// the large spectra and composed laws are not copied to and from scratch arrays.
#pragma once

#include <fftw3.h>

#include <cstddef>
#include <new>
#include <vector>

namespace dpledger::core {

template <typename T>
struct FftwAllocator {
  using value_type = T;
  FftwAllocator() = default;
  template <typename U>
  FftwAllocator(const FftwAllocator<U>&) {}  // NOLINT: allocator rebinding
  T* allocate(size_t n) {
    void* p = fftw_malloc(sizeof(T) * n);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { fftw_free(p); }
  template <typename U>
  bool operator==(const FftwAllocator<U>&) const {
    return true;
  }
};

template <typename T>
using FftwVector = std::vector<T, FftwAllocator<T>>;

}  // namespace dpledger::core
