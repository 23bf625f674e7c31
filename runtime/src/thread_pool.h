// The worker threads that one execution's instructions are split across.
//
// Results never depend on the thread count: work is split only where the
// pieces write disjoint bytes and each piece computes exactly what the
// serial loop would (an instruction's partitions, a matmul's output
// columns), so 1 thread and N threads give the same bits.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace neuroncc::rt {

class ThreadPool {
 public:
  // The process-wide pool. Its size is NEURONCC_RT_THREADS when set (1..256),
  // else the number of cores the process may run on; read once, at first use.
  static ThreadPool& Shared();

  explicit ThreadPool(unsigned threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  unsigned threads() const { return unsigned(workers_.size()) + 1; }

  // Calls body(begin, end) over [0, n) in pieces of at most `grain` items,
  // on this thread and the workers, and returns when all are done. When
  // another thread is already using the pool, n <= grain, or this is a child
  // process forked after the workers started, this thread runs all of it.
  void ParallelFor(uint32_t n, uint32_t grain, absl::FunctionRef<void(uint32_t, uint32_t)> body);

 private:
  void WorkerLoop();
  void RunPieces(const absl::FunctionRef<void(uint32_t, uint32_t)>& body, uint32_t n, uint32_t grain);

  std::vector<std::thread> workers_;
  const int owner_pid_;  // the process the workers belong to
  std::mutex owner_;  // held by the thread whose loop the pool is running

  std::mutex mu_;
  std::condition_variable wake_, done_;
  // Bumped (under mu_) for every loop; idle workers poll it, then sleep.
  std::atomic<uint64_t> generation_{0};
  bool stop_ = false;
  std::atomic<unsigned> busy_workers_{0};  // workers inside the current loop

  // The current loop, set under mu_; body_ is null between loops.
  const absl::FunctionRef<void(uint32_t, uint32_t)>* body_ = nullptr;
  uint32_t n_ = 0, grain_ = 1;
  std::atomic<uint32_t> next_{0};
};

// The thread count the shared pool would have, from NEURONCC_RT_THREADS or
// the cores available. Exposed for tests and tools that report it.
unsigned DefaultThreadCount();

}  // namespace neuroncc::rt
