#include "thread_pool.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace neuroncc::rt {

unsigned DefaultThreadCount() {
  if (const char* env = std::getenv("NEURONCC_RT_THREADS"); env && *env) {
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end && *end == '\0' && v >= 1 && v <= 256) return unsigned(v);
    // An unusable value falls back to the default rather than failing every
    // execution (docs/runtime.md says so).
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return unsigned(std::max(1, CPU_COUNT(&set)));
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool& ThreadPool::Shared() {
  // Never destroyed: executions may still run from other threads' static
  // destructors at exit, and joining workers there could deadlock.
  static ThreadPool* pool = new ThreadPool(DefaultThreadCount());
  return *pool;
}

ThreadPool::ThreadPool(unsigned threads) : owner_pid_(getpid()) {
  for (unsigned i = 1; i < std::max(1u, threads); ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunPieces(const absl::FunctionRef<void(uint32_t, uint32_t)>& body, uint32_t n,
                           uint32_t grain) {
  while (true) {
    uint32_t begin = next_.fetch_add(grain, std::memory_order_relaxed);
    if (begin >= n) return;
    body(begin, std::min(n, begin + grain));
  }
}

namespace {

// How long an idle thread polls before it sleeps: an execution issues its
// loops back to back, and a futex wake-up costs more than the pieces.
constexpr int kSpins = 4000;

inline void Pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  while (true) {
    for (int i = 0; i < kSpins && generation_.load(std::memory_order_acquire) == seen; ++i) Pause();
    std::unique_lock<std::mutex> lock(mu_);
    wake_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_relaxed) != seen; });
    if (stop_) return;
    seen = generation_.load(std::memory_order_relaxed);
    // A worker that wakes after the loop ended finds no body: the loop's
    // caller has returned and its counters belong to no one.
    if (!body_) continue;
    const absl::FunctionRef<void(uint32_t, uint32_t)>& body = *body_;
    const uint32_t n = n_, grain = grain_;
    busy_workers_.fetch_add(1, std::memory_order_relaxed);
    lock.unlock();
    RunPieces(body, n, grain);
    lock.lock();
    if (busy_workers_.fetch_sub(1, std::memory_order_acq_rel) == 1) done_.notify_one();
  }
}

void ThreadPool::ParallelFor(uint32_t n, uint32_t grain, absl::FunctionRef<void(uint32_t, uint32_t)> body) {
  grain = std::max(1u, grain);
  std::unique_lock<std::mutex> owner(owner_, std::try_to_lock);
  // A child process after fork() has none of the workers: it runs alone.
  if (workers_.empty() || n <= grain || !owner.owns_lock() || getpid() != owner_pid_) {
    for (uint32_t b = 0; b < n; b += grain) body(b, std::min(n, b + grain));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    body_ = &body;
    n_ = n;
    grain_ = grain;
    next_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  RunPieces(body, n, grain);
  for (int i = 0; i < kSpins && busy_workers_.load(std::memory_order_acquire) != 0; ++i) Pause();
  std::unique_lock<std::mutex> lock(mu_);
  // Wait for every worker that joined this loop; one that wakes later sees
  // no body and goes back to sleep.
  done_.wait(lock, [&] { return busy_workers_.load(std::memory_order_relaxed) == 0; });
  body_ = nullptr;
}

}  // namespace neuroncc::rt
