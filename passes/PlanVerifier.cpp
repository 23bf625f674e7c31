//===- PlanVerifier.cpp - independent check of an offset plan --------------===//
//
// Shares no code with the planner, so a planner bug cannot hide itself.
// Sweep over time with the live buffers kept in an ordered map by offset: in
// a valid plan the live buffers are disjoint in address, so a new buffer
// collides with one of them exactly when it collides with its neighbour
// below or above. O(n log n).
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <map>
#include <numeric>

#include "passes/OffsetPlanner.h"

namespace neuroncc {

std::optional<std::string> verifyPlan(const std::vector<PlannedBuffer>& buffers,
                                      int64_t alignment, int64_t capacity,
                                      const std::vector<std::string>* names) {
  auto id = [&](size_t i) { return names ? "'" + (*names)[i] + "'" : std::to_string(i); };
  auto name = [&](size_t i) { return "buffer " + id(i); };
  for (size_t i = 0; i < buffers.size(); ++i) {
    const PlannedBuffer& b = buffers[i];
    if (b.offset < 0) return name(i) + " has no offset";
    if (alignment > 1 && b.offset % alignment != 0)
      return name(i) + " at offset " + std::to_string(b.offset) + " is not a multiple of " +
             std::to_string(alignment);
    if (b.alignment > 1 && b.offset % b.alignment != 0)
      return name(i) + " at offset " + std::to_string(b.offset) +
             " is not a multiple of its alignment " + std::to_string(b.alignment);
    if (capacity > 0 && b.offset + b.size > capacity)
      return name(i) + " ends at byte " + std::to_string(b.offset + b.size) +
             ", beyond the capacity of " + std::to_string(capacity);
  }
  // Events: (time, kind, index) with ends (kind 0) before starts (kind 1) at
  // the same time, since lifetimes are half-open.
  std::vector<std::tuple<int64_t, int, size_t>> events;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const PlannedBuffer& b = buffers[i];
    if (b.size <= 0 || b.start >= b.end) continue;  // occupies nothing
    events.emplace_back(b.start, 1, i);
    events.emplace_back(b.end, 0, i);
  }
  std::sort(events.begin(), events.end());
  std::map<int64_t, size_t> live;  // offset -> buffer
  for (auto [time, kind, i] : events) {
    const PlannedBuffer& b = buffers[i];
    if (kind == 0) {
      live.erase(b.offset);
      continue;
    }
    auto clash = [&, i = i, time = time](size_t j) {
      const PlannedBuffer& o = buffers[j];
      return "buffers " + id(j) + " and " + id(i) +
             " are live together at step " + std::to_string(time) + " and overlap at bytes [" +
             std::to_string(std::max(b.offset, o.offset)) + ", " +
             std::to_string(std::min(b.offset + b.size, o.offset + o.size)) + ")";
    };
    auto above = live.lower_bound(b.offset);
    if (above != live.end() && above->first < b.offset + b.size) return clash(above->second);
    if (above != live.begin()) {
      auto below = std::prev(above);
      const PlannedBuffer& o = buffers[below->second];
      if (o.offset + o.size > b.offset) return clash(below->second);
    }
    live.emplace(b.offset, i);
  }
  return std::nullopt;
}

LivePeak findLivePeak(const std::vector<PlannedBuffer>& buffers) {
  std::vector<std::pair<int64_t, int64_t>> events;
  for (const PlannedBuffer& b : buffers) {
    if (b.start >= b.end) continue;
    events.emplace_back(b.start, b.size);
    events.emplace_back(b.end, -b.size);
  }
  std::sort(events.begin(), events.end());  // ends (negative) before starts at the same step
  int64_t live = 0;
  LivePeak peak;
  for (auto [t, d] : events) {
    live += d;
    if (live > peak.bytes) peak = {live, t};
  }
  return peak;
}

}  // namespace neuroncc
