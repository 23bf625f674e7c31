// Offset assignment for buffers with known lifetimes: the HBM arena between
// kernels and the SBUF tiles inside one kernel use the same planner.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace neuroncc {

struct PlannedBuffer {
  int64_t start = 0;  // first step the buffer is live
  int64_t end = 0;    // one past the last step (half-open)
  int64_t size = 0;   // bytes
  int64_t offset = -1;
};

// Assigns offsets (multiples of `alignment`) so that buffers live at the same
// time never share bytes; returns the peak (one past the highest byte used).
int64_t planOffsets(std::vector<PlannedBuffer>& buffers, int64_t alignment);

// Independent check of a plan: every buffer placed, aligned, inside
// `capacity` (when positive), and no two time-overlapping buffers overlap in
// address. Returns a description of the first violation.
std::optional<std::string> verifyPlan(const std::vector<PlannedBuffer>& buffers,
                                      int64_t alignment, int64_t capacity);

// The largest number of bytes live at any one step: a lower bound on any plan.
int64_t peakLiveBytes(const std::vector<PlannedBuffer>& buffers);

}  // namespace neuroncc
