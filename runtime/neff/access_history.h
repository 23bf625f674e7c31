// Which instruction of each queue last wrote and last read each byte of one
// memory: the bookkeeping behind the race check (race_check.cc) and the
// runtime's kernel-boundary waits (runtime/src/schedule.cc). Disjoint byte
// segments, each with its per-queue history; neighbours with equal histories
// are merged, so the map grows with the distinct access boundaries, not with
// the number of accesses.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>
#include <map>

#include "device_model.h"

namespace neuroncc::neff {

// Per queue, a number identifying the latest instruction of that queue that
// wrote / read the bytes (0: none). Callers choose the numbering (a queue
// position + 1, a semaphore count); it must grow along each queue.
struct QueueAccesses {
  std::array<uint32_t, kMaxQueues> write{}, read{};
  bool operator==(const QueueAccesses& o) const { return write == o.write && read == o.read; }
};

class AccessHistory {
 public:
  // Calls fn(const QueueAccesses&) for every segment that overlaps [lo, hi)
  // and has been accessed.
  template <typename Fn>
  void ForEach(uint64_t lo, uint64_t hi, Fn fn) const {
    auto it = segments_.upper_bound(lo);
    if (it != segments_.begin() && std::prev(it)->second.end > lo) --it;
    for (; it != segments_.end() && it->first < hi; ++it) {
      ++visited_;
      fn(it->second.accesses);
    }
  }

  // Segments visited by ForEach and Update so far: the work done, which
  // callers bound (a kernel can cut a partition into thousands of segments
  // and then touch them all at every instruction).
  uint64_t visited() const { return visited_; }

  // Calls fn(QueueAccesses&) for every segment of [lo, hi), bytes never
  // accessed before included (with an empty history), so that fn can read
  // and update each; then merges equal neighbours around the range.
  template <typename Fn>
  void Update(uint64_t lo, uint64_t hi, Fn fn) {
    if (lo >= hi) return;
    SplitAt(lo);
    SplitAt(hi);
    auto it = segments_.lower_bound(lo);
    for (uint64_t at = lo; at < hi;) {
      if (it == segments_.end() || it->first > at)  // a gap: never accessed
        it = segments_.emplace_hint(it, at, Segment{it == segments_.end() ? hi : std::min(hi, it->first), {}});
      ++visited_;
      fn(it->second.accesses);
      at = it->second.end;
      ++it;
    }
    auto cur = segments_.lower_bound(lo);
    if (cur != segments_.begin() && std::prev(cur)->second.end == cur->first) --cur;
    while (cur != segments_.end() && cur->first <= hi) {
      auto next = std::next(cur);
      if (next != segments_.end() && next->first == cur->second.end &&
          next->second.accesses == cur->second.accesses) {
        cur->second.end = next->second.end;
        segments_.erase(next);
      } else {
        cur = next;
      }
    }
  }

 private:
  struct Segment {
    uint64_t end;
    QueueAccesses accesses;
  };
  // Makes x a segment boundary (if a segment straddles it).
  void SplitAt(uint64_t x) {
    auto it = segments_.upper_bound(x);
    if (it == segments_.begin()) return;
    --it;
    if (it->first < x && x < it->second.end) {
      Segment right = it->second;
      it->second.end = x;
      segments_.emplace_hint(std::next(it), x, right);
    }
  }
  std::map<uint64_t, Segment> segments_;  // keyed by the first byte
  mutable uint64_t visited_ = 0;
};

}  // namespace neuroncc::neff
