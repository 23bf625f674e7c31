// Offset assignment for buffers with known lifetimes ("memory planning"): the
// HBM arena between kernels and the SBUF/PSUM tiles inside one kernel use the
// same planner. No MLIR dependency: the `neuron-cc plan-memory` tool, the
// benchmarks and the unit tests link it alone.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace neuroncc {

struct PlannedBuffer {
  int64_t start = 0;      // first step the buffer is live
  int64_t end = 0;        // one past the last step (half-open)
  int64_t size = 0;       // bytes
  int64_t offset = -1;    // the plan's answer; -1 until placed
  int64_t alignment = 1;  // this buffer's offset must be a multiple of it
};

struct PlanOptions {
  // Every offset is a multiple of this as well as of the buffer's own alignment.
  int64_t alignment = 1;
  // Budgets for the exact search that runs when no heuristic reaches the lower
  // bound. A wall-clock limit makes the result depend on machine speed, so
  // the compiler (whose output must be byte-identical run to run) uses the
  // node limit only. Both zero: heuristics only.
  double timeLimitSeconds = 0;
  int64_t nodeLimit = 0;
  // Instances with more buffers skip the exact search (the heuristics and
  // the bound are already close on large real schedules).
  size_t exactSearchMaxBuffers = 4000;
  // Stop at the first plan whose arena is at most this (0: look for the
  // smallest). A caller that only needs a plan to fit a fixed capacity
  // (SBUF, PSUM) saves the remaining heuristics and the search.
  int64_t goodEnoughArena = 0;
};

struct HeuristicRun {
  std::string method;
  int64_t arena = 0;
  double seconds = 0;
  // Stopped once its arena passed that of a complete plan, so it could not
  // win; `arena` is then what it had reached (its own would be at least that).
  bool stopped = false;
  // Stopped (unfinished) because the planning call's time ran out.
  bool timedOut = false;
};

struct PlanResult {
  int64_t arena = 0;          // one past the highest byte used
  int64_t lowerBound = 0;     // peak live bytes: no plan can be smaller
  bool provenOptimal = false; // arena == lowerBound, or the search exhausted every smaller arena
  std::string method;         // which heuristic or search produced the plan
  int64_t searchNodes = 0;    // nodes the exact search expanded
  int reshuffleTries = 0;     // skyline placements with reshuffled ties (large instances, time limit)
  std::vector<HeuristicRun> heuristics;  // each heuristic that ran, in order
};

// Assigns every buffer an offset so that buffers live at the same time never
// share bytes, and returns the arena size with how it was reached.
PlanResult planOffsets(std::vector<PlannedBuffer>& buffers, const PlanOptions& options);

// Independent check of a plan: every buffer placed, aligned (to `alignment`
// and its own), inside `capacity` (when positive), and no two time-overlapping
// buffers overlap in address. Returns a description of the first violation,
// naming buffers by `names` when given (else by index).
std::optional<std::string> verifyPlan(const std::vector<PlannedBuffer>& buffers,
                                      int64_t alignment, int64_t capacity,
                                      const std::vector<std::string>* names = nullptr);

// The largest number of bytes live at any one step (a lower bound on any
// plan) and the first step where it is reached.
struct LivePeak {
  int64_t bytes = 0;
  int64_t step = 0;
};
LivePeak findLivePeak(const std::vector<PlannedBuffer>& buffers);
inline int64_t peakLiveBytes(const std::vector<PlannedBuffer>& buffers) {
  return findLivePeak(buffers).bytes;
}

}  // namespace neuroncc
