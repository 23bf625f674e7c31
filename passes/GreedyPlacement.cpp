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
// Both avoid comparing every pair of buffers: first fit looks at the offset
// ranges taken during a lifetime through a segment tree of range unions
// (OccupancyTree), skyline keeps per-section floors in a segment tree and a
// priority queue of lazily refreshed offsets. reshuffleSkyline reruns a
// skyline under orders with randomly broken ties, keeping smaller plans.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <map>
#include <queue>
#include <random>
#include <set>

#include "passes/PlannerInternal.h"

namespace neuroncc::planner {
namespace {

// Placed items indexed by time, to answer "which offsets are taken at some
// step of [start, end)?" without visiting every placed item live then.
// A segment tree over the distinct time points: an item is stored in the
// O(log n) nodes that make up its lifetime (`own`), and every node also
// keeps `sub`, the union of the offset ranges stored anywhere in its
// subtree. The items overlapping a lifetime are then those in `own` of the
// nodes on the way down that cover it partly and in `sub` of the nodes it
// covers whole: O(log n) interval sets, each a union of disjoint ranges, so
// a contiguous stack of buffers is one range however many buffers it holds.
// Disjoint, non-touching offset ranges [lo, hi), sorted: a union of buffers.
// A sorted vector: the sets stay short (a contiguous stack is one range), so
// inserting by moving the tail beats a node-based tree.
using Range = std::pair<int64_t, int64_t>;
using Ranges = std::vector<Range>;

void insertRange(Ranges& r, int64_t lo, int64_t hi) {
  // First range that ends at or after lo (it may touch or overlap).
  auto first = std::lower_bound(r.begin(), r.end(), lo, [](const Range& x, int64_t v) { return x.second < v; });
  auto last = first;
  while (last != r.end() && last->first <= hi) {
    lo = std::min(lo, last->first);
    hi = std::max(hi, last->second);
    ++last;
  }
  if (first == last) {
    r.insert(first, {lo, hi});
  } else {
    *first = {lo, hi};
    r.erase(first + 1, last);
  }
}

class OccupancyTree {
 public:
  explicit OccupancyTree(const std::vector<Item>& items) {
    for (const Item& b : items) {
      points_.push_back(b.start);
      points_.push_back(b.end);
    }
    std::sort(points_.begin(), points_.end());
    points_.erase(std::unique(points_.begin(), points_.end()), points_.end());
    leaves_ = std::max<int>(1, int(points_.size()) - 1);
    own_.resize(size_t(4 * leaves_));
    sub_.resize(size_t(4 * leaves_));
  }
  void add(const Item& b, int64_t offset) {
    add(1, 0, leaves_, leaf(b.start), leaf(b.end), offset, offset + b.size);
  }
  // The range sets whose union is every range taken during b's lifetime.
  void collect(const Item& b, std::vector<const Ranges*>& sets) const {
    sets.clear();
    collect(1, 0, leaves_, leaf(b.start), leaf(b.end), sets);
  }

 private:
  int leaf(int64_t t) const { return int(std::lower_bound(points_.begin(), points_.end(), t) - points_.begin()); }
  void add(int node, int l, int r, int a, int b, int64_t lo, int64_t hi) {
    if (b <= l || r <= a) return;
    insertRange(sub_[size_t(node)], lo, hi);
    if (a <= l && r <= b) {
      insertRange(own_[size_t(node)], lo, hi);
      return;
    }
    int m = (l + r) / 2;
    add(2 * node, l, m, a, b, lo, hi);
    add(2 * node + 1, m, r, a, b, lo, hi);
  }
  void collect(int node, int l, int r, int a, int b, std::vector<const Ranges*>& sets) const {
    if (b <= l || r <= a || sub_[size_t(node)].empty()) return;
    if (a <= l && r <= b) {
      sets.push_back(&sub_[size_t(node)]);
      return;
    }
    if (!own_[size_t(node)].empty()) sets.push_back(&own_[size_t(node)]);
    int m = (l + r) / 2;
    collect(2 * node, l, m, a, b, sets);
    collect(2 * node + 1, m, r, a, b, sets);
  }
  std::vector<int64_t> points_;
  int leaves_ = 1;
  std::vector<Ranges> own_, sub_;
};

using RangeSets = std::vector<const Ranges*>;

// The first range of `r` that ends after `offset` (r.end() if none): a
// binary search without branches on the data, whose outcome a processor
// cannot predict.
Ranges::const_iterator firstEndingAfter(const Ranges& r, int64_t offset) {
  if (r.empty()) return r.end();
  const Range* base = r.data();
  for (size_t n = r.size(); n > 1;) {
    const size_t half = n / 2;
    base = base[half].second <= offset ? base + half : base;
    n -= half;
  }
  return r.begin() + (base - r.data()) + (base->second <= offset ? 1 : 0);
}

// The lowest offset, a multiple of `align`, where `size` bytes collide with
// no range of `sets`: move above whatever blocks the candidate until nothing
// does. Each move passes a whole range of one set.
int64_t lowestFit(const RangeSets& sets, int64_t size, int64_t align) {
  int64_t candidate = 0;
  for (size_t quiet = 0, k = 0; quiet < sets.size(); k = k + 1 == sets.size() ? 0 : k + 1) {
    const Ranges& r = *sets[k];
    // The first range ending after the candidate; it blocks if it starts
    // below candidate + size. Keep climbing this set while it blocks.
    auto it = firstEndingAfter(r, candidate);
    bool moved = false;
    while (it != r.end() && it->first < candidate + size) {
      candidate = alignUp(it->second, align);
      moved = true;
      while (it != r.end() && it->second <= candidate) ++it;
    }
    quiet = moved ? 1 : quiet + 1;
  }
  return candidate;
}

// The ranges of every set in one list ordered by start (ties in any order:
// the scans below read only the starts' order). Each set is sorted already,
// so the sets are merged pairwise, log(sets) passes, rather than sorted
// afresh: the cost of best fit on large instances.
struct MergeScratch {
  Ranges merged, spare;
  std::vector<size_t> runs, nextRuns;
};

const Ranges& mergeSets(const RangeSets& sets, MergeScratch& m) {
  m.merged.clear();
  m.runs.clear();
  for (const Ranges* r : sets) {
    m.runs.push_back(m.merged.size());
    m.merged.insert(m.merged.end(), r->begin(), r->end());
  }
  m.runs.push_back(m.merged.size());
  auto byStart = [](const Range& x, const Range& y) { return x.first < y.first; };
  while (m.runs.size() > 2) {
    m.spare.resize(m.merged.size());
    m.nextRuns.clear();
    size_t j = 0;
    for (; j + 2 < m.runs.size(); j += 2) {
      m.nextRuns.push_back(m.runs[j]);
      std::merge(m.merged.begin() + long(m.runs[j]), m.merged.begin() + long(m.runs[j + 1]),
                 m.merged.begin() + long(m.runs[j + 1]), m.merged.begin() + long(m.runs[j + 2]),
                 m.spare.begin() + long(m.runs[j]), byStart);
    }
    if (j + 1 < m.runs.size()) {  // an odd run out: carried over as it is
      m.nextRuns.push_back(m.runs[j]);
      std::copy(m.merged.begin() + long(m.runs[j]), m.merged.begin() + long(m.runs[j + 1]),
                m.spare.begin() + long(m.runs[j]));
    }
    m.nextRuns.push_back(m.merged.size());
    std::swap(m.merged, m.spare);
    std::swap(m.runs, m.nextRuns);
  }
  return m.merged;
}

// The tightest gap between the union's ranges that holds `size` bytes once
// aligned (the lowest such gap on ties), or the offset above every range:
// the best fit of TFLite's and XLA's size-ordered planners. A gap of exactly
// `size` ends the scan.
int64_t tightestFit(const RangeSets& sets, int64_t size, int64_t align, MergeScratch& scratch) {
  int64_t candidate = 0, chosen = -1, chosenGap = INT64_MAX;
  for (auto [lo, hi] : mergeSets(sets, scratch)) {
    if (candidate + size <= lo && lo - candidate < chosenGap) {
      chosenGap = lo - candidate;
      chosen = candidate;
      if (chosenGap == size) return chosen;  // nothing fits tighter
    }
    candidate = std::max(candidate, alignUp(hi, align));
  }
  return chosen >= 0 ? chosen : candidate;
}

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

int64_t placeFirstFit(const std::vector<Item>& items, const std::vector<int>& order,
                      std::vector<int64_t>& offsets, bool bestFit, PlacementLimit* limit) {
  offsets.assign(items.size(), -1);
  if (items.empty()) return 0;
  OccupancyTree occupied(items);
  RangeSets sets;
  MergeScratch scratch;
  int64_t arena = 0;
  for (int i : order) {
    const Item& b = items[size_t(i)];
    occupied.collect(b, sets);
    int64_t chosen = bestFit ? tightestFit(sets, b.size, b.align, scratch) : lowestFit(sets, b.size, b.align);
    offsets[size_t(i)] = chosen;
    arena = std::max(arena, chosen + b.size);
    if (limit && limit->reached(arena)) return arena;
    occupied.add(b, chosen);
  }
  return arena;
}

int64_t placeSkyline(const std::vector<Item>& items, const Sections& sections,
                     const std::vector<int>& ranked, std::vector<int64_t>& offsets,
                     PlacementLimit* limit) {
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
  // has the online heuristic to fall back on). Many long buffers under many
  // short ones (trace-28k in memplan_bench.py) need about 40 refreshes per
  // buffer, and the skyline is then the best plan, so the limit is 64.
  int64_t refreshesLeft = 64 * int64_t(items.size()) + 1000000;
  while (!queue.empty()) {
    auto [offset, r] = queue.top();
    queue.pop();
    int i = ranked[size_t(r)];
    const Item& b = items[size_t(i)];
    int64_t now = alignUp(floors.maxOver(sections.first[size_t(i)], sections.last[size_t(i)]), b.align);
    if (now > offset) {
      if (--refreshesLeft < 0) return INT64_MAX;
      if (limit && limit->outOfTime()) return arena;
      queue.push({now, r});
      continue;
    }
    offsets[size_t(i)] = offset;
    floors.raise(sections.first[size_t(i)], sections.last[size_t(i)], offset + b.size);
    arena = std::max(arena, offset + b.size);
    if (limit && limit->reached(arena)) return arena;
  }
  return arena;
}

void reshuffleSkyline(const std::vector<Item>& items, const Sections& sections, std::vector<int>& order,
                      std::vector<int64_t>& offsets, int64_t* arena, Budget& budget, uint64_t seed, int* tries) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> shift(0.0, 1.0);
  std::vector<std::pair<double, int>> keys(order.size());
  std::vector<int> trial(order.size());
  std::vector<int64_t> placed;
  std::atomic<int64_t> stopAbove{0};
  *tries = 0;
  while (true) {
    budget.charge(1 + int64_t(items.size()) / 64);
    if (budget.exhausted()) break;
    ++*tries;
    for (size_t r = 0; r < order.size(); ++r) keys[r] = {double(r) + shift(rng), order[r]};
    std::sort(keys.begin(), keys.end());
    for (size_t r = 0; r < keys.size(); ++r) trial[r] = keys[r].second;
    // A try that reaches the best arena can no longer beat it.
    stopAbove = *arena - 1;
    PlacementLimit limit{&stopAbove, &budget};
    int64_t reached = placeSkyline(items, sections, trial, placed, &limit);
    if (limit.stopped || reached >= *arena) continue;
    *arena = reached;
    order = trial;
    offsets = placed;
  }
}

}  // namespace neuroncc::planner
