//===- GreedyPlacement.cpp - one-pass offset heuristics --------------------===//
//
// Two families, each run under several orders by the planner:
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
#include <queue>

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
  while (!queue.empty()) {
    auto [offset, r] = queue.top();
    queue.pop();
    int i = ranked[size_t(r)];
    const Item& b = items[size_t(i)];
    int64_t now = alignUp(floors.maxOver(sections.first[size_t(i)], sections.last[size_t(i)]), b.align);
    if (now > offset) {
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
