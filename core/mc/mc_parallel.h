// A minimal parallel-for for the CPU backend: work items are handed out by an
// atomic counter, so which thread runs an item never affects what it computes.
// Callers keep reductions deterministic by writing one result per item and
// combining them in item order.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace dpledger::core::mc {

// Threads to use: `requested` if > 0, else all hardware threads (at least 1).
inline int ResolveThreads(int requested) {
  if (requested > 0) return requested;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

// Calls fn(i) for every i in [0, num_items) on up to num_threads threads
// (inline when one thread suffices). fn must not throw.
template <typename Fn>
void ParallelFor(int64_t num_items, int num_threads, Fn&& fn) {
  const int64_t threads = std::min<int64_t>(num_threads, num_items);
  if (threads <= 1) {
    for (int64_t i = 0; i < num_items; ++i) fn(i);
    return;
  }
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    for (int64_t i = next.fetch_add(1); i < num_items; i = next.fetch_add(1)) fn(i);
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& th : pool) th.join();
}

}  // namespace dpledger::core::mc
