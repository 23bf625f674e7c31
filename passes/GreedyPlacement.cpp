//===- GreedyPlacement.cpp - one-pass offset heuristics --------------------===//
//
// An online allocator simulation (time order, best fit over a free list) as
// an always-O(n log n) baseline, and two families run under several orders:
//  - first fit: take buffers in a fixed order (size descending is TFLite's
//    GreedyBySize and XLA's heap simulator) and put each at the lowest
//    offset where it collides with no placed buffer live at the same time;
//  - skyline: build the plan bottom-up, always placing the buffer that can
//    go lowest right now on top of the placed buffers under it (the first
//    leaf of the canonical search in CanonicalSearch.cpp).
// Both avoid comparing every pair of buffers: first fit looks at placed
// buffers through a time-bucket index, skyline keeps per-section floors in
// a segment tree and a priority queue of lazily refreshed offsets.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <map>
#include <queue>
#include <set>

#include "passes/PlannerInternal.h"

namespace neuroncc::planner {
namespace {

// Placed items indexed by time: bucket k holds every placed item live at
// some step in [origin + k * width, origin + (k + 1) * width).
class TimeIndex {
 public:
  explicit TimeIndex(const std::vector<Item>& items) {
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    double total = 0;  // lifetimes may reach 2^61 each
    for (const Item& b : items) {
      lo = std::min(lo, b.start);
      hi = std::max(hi, b.end);
      total += double(b.end - b.start);
    }
    origin_ = lo;
    // Buckets about one average lifetime wide, but never more than 4 per
    // buffer however sparse the timeline.
    double n = double(std::max<size_t>(1, items.size()));
    width_ = std::max<int64_t>({1, int64_t(total / n), (hi - lo) / int64_t(4 * n) + 1});
    buckets_.resize(size_t((hi - lo) / width_ + 1));
    seen_.assign(items.size(), 0);
  }
  void add(int i, const Item& b) {
    for (int64_t k = first(b); k <= last(b); ++k) buckets_[size_t(k)].push_back(i);
  }
  template <typename Fn>
  void forEachNear(const Item& b, Fn fn) {
    ++epoch_;
    for (int64_t k = first(b); k <= last(b); ++k)
      for (int j : buckets_[size_t(k)]) {
        if (seen_[size_t(j)] == epoch_) continue;
        seen_[size_t(j)] = epoch_;
        fn(j);
      }
  }

 private:
  int64_t first(const Item& b) const { return (b.start - origin_) / width_; }
  int64_t last(const Item& b) const { return (b.end - 1 - origin_) / width_; }
  int64_t origin_ = 0, width_ = 1;
  std::vector<std::vector<int>> buckets_;
  std::vector<uint32_t> seen_;
  uint32_t epoch_ = 0;
};

}  // namespace

int64_t placeOnline(const std::vector<Item>& items, std::vector<int64_t>& offsets) {
  offsets.assign(items.size(), -1);
  struct Event {
    int64_t time;
    bool isStart;
    int item;
  };
  std::vector<Event> events;
  events.reserve(2 * items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    events.push_back({items[i].start, true, int(i)});
    events.push_back({items[i].end, false, int(i)});
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    if (a.time != b.time) return a.time < b.time;
    if (a.isStart != b.isStart) return !a.isStart;  // half-open: free before allocating
    return a.item < b.item;
  });
  std::map<int64_t, int64_t> freeByOffset;           // offset -> size
  std::set<std::pair<int64_t, int64_t>> freeBySize;  // (size, offset)
  int64_t top = 0, arena = 0;                        // [top, inf) is free too
  auto takeBlock = [&](std::map<int64_t, int64_t>::iterator it) {
    freeBySize.erase({it->second, it->first});
    freeByOffset.erase(it);
  };
  auto addBlock = [&](int64_t offset, int64_t size) {
    if (size <= 0) return;
    freeByOffset[offset] = size;
    freeBySize.insert({size, offset});
  };
  for (const Event& e : events) {
    const Item& b = items[size_t(e.item)];
    if (!e.isStart) {
      int64_t lo = offsets[size_t(e.item)], hi = lo + b.size;
      auto next = freeByOffset.lower_bound(lo);
      if (next != freeByOffset.end() && next->first == hi) {
        hi += next->second;
        takeBlock(next);
      }
      auto prev = freeByOffset.lower_bound(lo);
      if (prev != freeByOffset.begin() && std::prev(prev)->first + std::prev(prev)->second == lo) {
        --prev;
        lo = prev->first;
        takeBlock(prev);
      }
      if (hi == top) {
        top = lo;  // give the block back to the open top
      } else {
        addBlock(lo, hi - lo);
      }
      continue;
    }
    // Best fit: the smallest free block that holds the buffer once aligned.
    int64_t chosen = -1;
    for (auto it = freeBySize.lower_bound({b.size, INT64_MIN}); it != freeBySize.end(); ++it) {
      auto [size, offset] = *it;
      int64_t at = alignUp(offset, b.align);
      if (at + b.size <= offset + size) {
        chosen = at;
        takeBlock(freeByOffset.find(offset));
        addBlock(offset, at - offset);
        addBlock(at + b.size, offset + size - at - b.size);
        break;
      }
      if (size > 64 * b.size) break;  // far larger blocks: keep them whole
    }
    if (chosen < 0) {
      chosen = alignUp(top, b.align);
      addBlock(top, chosen - top);
      top = chosen + b.size;
    }
    offsets[size_t(e.item)] = chosen;
    arena = std::max(arena, chosen + b.size);
  }
  return arena;
}

int64_t countOverlappingPairs(const std::vector<Item>& items) {
  std::vector<int64_t> starts, ends;
  starts.reserve(items.size());
  ends.reserve(items.size());
  for (const Item& b : items) {
    starts.push_back(b.start);
    ends.push_back(b.end);
  }
  std::sort(starts.begin(), starts.end());
  std::sort(ends.begin(), ends.end());
  // j overlaps i iff start_j < end_i and end_j > start_i; count, minus i itself.
  int64_t total = 0;
  for (const Item& b : items) {
    int64_t startedBefore = std::lower_bound(starts.begin(), starts.end(), b.end) - starts.begin();
    int64_t endedBefore = std::upper_bound(ends.begin(), ends.end(), b.start) - ends.begin();
    total += startedBefore - endedBefore - 1;
  }
  return total / 2;
}

int64_t placeFirstFit(const std::vector<Item>& items, const std::vector<int>& order,
                      std::vector<int64_t>& offsets, bool bestFit) {
  offsets.assign(items.size(), -1);
  if (items.empty()) return 0;
  TimeIndex index(items);
  std::vector<std::pair<int64_t, int64_t>> busy;  // [offset, offset + size)
  int64_t arena = 0;
  for (int i : order) {
    const Item& b = items[size_t(i)];
    busy.clear();
    index.forEachNear(b, [&](int j) {
      const Item& o = items[size_t(j)];
      if (b.start < o.end && o.start < b.end) busy.emplace_back(offsets[size_t(j)], offsets[size_t(j)] + o.size);
    });
    std::sort(busy.begin(), busy.end());
    int64_t candidate = 0, chosen = -1, chosenGap = INT64_MAX;
    for (auto [lo, hi] : busy) {
      if (candidate + b.size <= lo) {
        if (!bestFit) {
          chosen = candidate;
          break;
        }
        // Best fit: the tightest gap, as TFLite's and XLA's size-ordered planners do.
        if (lo - candidate < chosenGap) {
          chosenGap = lo - candidate;
          chosen = candidate;
        }
      }
      candidate = std::max(candidate, alignUp(hi, b.align));
    }
    if (chosen < 0) chosen = candidate;  // above every busy range
    offsets[size_t(i)] = chosen;
    int64_t placedTop = chosen + b.size;
    arena = std::max(arena, placedTop);
    index.add(i, b);
  }
  return arena;
}

int64_t placeSkyline(const std::vector<Item>& items, const Sections& sections,
                     const std::vector<int>& ranked, std::vector<int64_t>& offsets) {
  offsets.assign(items.size(), -1);
  std::vector<int> rank(items.size());
  for (size_t r = 0; r < ranked.size(); ++r) rank[size_t(ranked[r])] = int(r);
  // Entries hold the offset known when pushed; floors only rise, so a popped
  // entry whose offset went stale is pushed again with the fresh value.
  using Entry = std::pair<int64_t, int>;  // (offset, rank)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
  for (size_t i = 0; i < items.size(); ++i) queue.push({0, rank[i]});
  FloorTree floors(sections.count);
  int64_t arena = 0;
  // When most buffers overlap most others, every placement makes nearly every
  // entry stale and the refreshes turn quadratic; give up then (the caller
  // has the online heuristic to fall back on).
  int64_t refreshesLeft = 8 * int64_t(items.size()) + 1000000;
  while (!queue.empty()) {
    auto [offset, r] = queue.top();
    queue.pop();
    int i = ranked[size_t(r)];
    const Item& b = items[size_t(i)];
    int64_t now = alignUp(floors.maxOver(sections.first[size_t(i)], sections.last[size_t(i)]), b.align);
    if (now > offset) {
      if (--refreshesLeft < 0) return INT64_MAX;
      queue.push({now, r});
      continue;
    }
    offsets[size_t(i)] = offset;
    floors.raise(sections.first[size_t(i)], sections.last[size_t(i)], offset + b.size);
    arena = std::max(arena, offset + b.size);
  }
  return arena;
}

}  // namespace neuroncc::planner
