//===- OffsetPlanner.cpp - greedy offset assignment -----------------------===//
//
// Algorithm: greedy placement ("first fit by offset") as in TFLite's
// GreedyBySize memory planner and XLA's heap simulator: take buffers in some
// order; put each at the lowest aligned offset that does not collide with an
// already placed buffer whose lifetime overlaps. The result depends on the
// order, so several orderings are tried (size, start time, lifetime area,
// lifetime length) and the smallest peak wins.
// Known weakness: no backtracking; on adversarial instances (the MiniMalloc
// "challenging" set) it can sit a few percent above the optimum.
//
//===----------------------------------------------------------------------===//

#include "passes/OffsetPlanner.h"

#include <algorithm>
#include <functional>
#include <numeric>

namespace neuroncc {
namespace {

int64_t alignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

bool timeOverlap(const PlannedBuffer& a, const PlannedBuffer& b) {
  return a.start < b.end && b.start < a.end;
}

// Placed buffers indexed by time: bucket b holds every placed buffer live
// at some step in [b * width, (b + 1) * width). A query looks only at the
// buckets its lifetime spans, so placement costs about the number of buffers
// live at the same time instead of the number placed so far.
class TimeIndex {
 public:
  TimeIndex(const std::vector<PlannedBuffer>& bufs) {
    int64_t lo = INT64_MAX, hi = INT64_MIN, total = 0;
    for (const PlannedBuffer& b : bufs) {
      lo = std::min(lo, b.start);
      hi = std::max(hi, b.end);
      total += b.end - b.start;
    }
    origin = lo;
    width = std::max<int64_t>(1, total / std::max<int64_t>(1, int64_t(bufs.size())));
    buckets.resize(size_t((hi - lo) / width + 1));
  }
  void add(size_t i, const PlannedBuffer& b) {
    for (int64_t k = first(b); k <= last(b); ++k) buckets[size_t(k)].push_back(i);
  }
  template <typename Fn>
  void forEachNear(const PlannedBuffer& b, Fn fn) {
    ++epoch;
    for (int64_t k = first(b); k <= last(b); ++k)
      for (size_t j : buckets[size_t(k)]) {
        if (seen.size() <= j) seen.resize(j + 1, 0);
        if (seen[j] == epoch) continue;
        seen[j] = epoch;
        fn(j);
      }
  }

 private:
  int64_t first(const PlannedBuffer& b) const { return (b.start - origin) / width; }
  int64_t last(const PlannedBuffer& b) const { return (std::max(b.end - 1, b.start) - origin) / width; }
  int64_t origin = 0, width = 1;
  std::vector<std::vector<size_t>> buckets;
  std::vector<uint32_t> seen;
  uint32_t epoch = 0;
};

int64_t placeInOrder(std::vector<PlannedBuffer>& bufs, const std::vector<size_t>& order,
                     int64_t alignment) {
  TimeIndex index(bufs);
  std::vector<std::pair<int64_t, int64_t>> busy;  // [offset, offset + size)
  int64_t peak = 0;
  for (size_t i : order) {
    PlannedBuffer& b = bufs[i];
    busy.clear();
    index.forEachNear(b, [&](size_t j) {
      if (timeOverlap(b, bufs[j])) busy.emplace_back(bufs[j].offset, bufs[j].offset + bufs[j].size);
    });
    std::sort(busy.begin(), busy.end());
    int64_t candidate = 0;
    for (auto [lo, hi] : busy) {
      if (candidate + b.size <= lo) break;
      candidate = std::max(candidate, alignUp(hi, alignment));
    }
    b.offset = candidate;
    peak = std::max(peak, candidate + b.size);
    index.add(i, b);
  }
  return peak;
}

}  // namespace

PlanResult planOffsets(std::vector<PlannedBuffer>& buffers, const PlanOptions& options) {
  PlanResult result;
  result.lowerBound = peakLiveBytes(buffers);
  result.method = "greedy";
  if (buffers.empty()) return result;
  int64_t alignment = options.alignment;
  using Key = std::function<bool(const PlannedBuffer&, const PlannedBuffer&)>;
  const Key orderings[] = {
      [](const PlannedBuffer& a, const PlannedBuffer& b) {
        return a.size != b.size ? a.size > b.size : a.start < b.start;
      },
      [](const PlannedBuffer& a, const PlannedBuffer& b) {
        return a.start != b.start ? a.start < b.start : a.size > b.size;
      },
      [](const PlannedBuffer& a, const PlannedBuffer& b) {
        int64_t x = a.size * (a.end - a.start), y = b.size * (b.end - b.start);
        return x != y ? x > y : a.start < b.start;
      },
      [](const PlannedBuffer& a, const PlannedBuffer& b) {
        int64_t x = a.end - a.start, y = b.end - b.start;
        return x != y ? x > y : a.size > b.size;
      },
  };
  std::vector<PlannedBuffer> best;
  int64_t bestPeak = -1;
  for (const Key& key : orderings) {
    std::vector<size_t> order(buffers.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return key(buffers[a], buffers[b]); });
    std::vector<PlannedBuffer> trial = buffers;
    int64_t peak = placeInOrder(trial, order, alignment);
    if (bestPeak < 0 || peak < bestPeak) {
      bestPeak = peak;
      best = std::move(trial);
    }
  }
  buffers = std::move(best);
  result.arena = bestPeak;
  result.provenOptimal = bestPeak == result.lowerBound;
  return result;
}

std::optional<std::string> verifyPlan(const std::vector<PlannedBuffer>& buffers,
                                      int64_t alignment, int64_t capacity) {
  // Sweep in start order; an active set ordered by end keeps this
  // O(n * active) instead of comparing every pair.
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return buffers[a].start < buffers[b].start; });
  std::vector<size_t> active;
  for (size_t i : order) {
    const PlannedBuffer& b = buffers[i];
    if (b.offset < 0) return "buffer " + std::to_string(i) + " has no offset";
    if (alignment > 0 && b.offset % alignment != 0)
      return "buffer " + std::to_string(i) + " is misaligned";
    if (capacity > 0 && b.offset + b.size > capacity)
      return "buffer " + std::to_string(i) + " ends at byte " + std::to_string(b.offset + b.size) +
             ", beyond the capacity of " + std::to_string(capacity);
    active.erase(std::remove_if(active.begin(), active.end(),
                                [&](size_t j) { return buffers[j].end <= b.start; }),
                 active.end());
    for (size_t j : active) {
      const PlannedBuffer& o = buffers[j];
      if (b.offset < o.offset + o.size && o.offset < b.offset + b.size && timeOverlap(b, o))
        return "buffers " + std::to_string(j) + " and " + std::to_string(i) +
               " are live together and overlap at bytes [" +
               std::to_string(std::max(b.offset, o.offset)) + ", " +
               std::to_string(std::min(b.offset + b.size, o.offset + o.size)) + ")";
    }
    active.push_back(i);
  }
  return std::nullopt;
}

LivePeak findLivePeak(const std::vector<PlannedBuffer>& buffers) {
  std::vector<std::pair<int64_t, int64_t>> events;
  for (const PlannedBuffer& b : buffers) {
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
