// Pieces of the offset planner shared by its source files; not a public API.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstddef>
#include <vector>

#include "passes/OffsetPlanner.h"

namespace neuroncc::planner {

inline int64_t alignUp(int64_t v, int64_t a) { return a <= 1 ? v : (v + a - 1) / a * a; }

// A buffer as the placement algorithms see it: only buffers that take space
// (size > 0, start < end) are planned; the rest sit at offset 0.
struct Item {
  int64_t start, end, size, align;
};

// Time compressed into "sections": each section is the set of items live at
// one instant just before some item dies, recorded only when an item was
// born since the previous section. Every pair of items that overlap in time
// shares at least one section, the items of one section all overlap each
// other, and each item covers a contiguous run [first, last) of sections.
struct Sections {
  int count = 0;
  std::vector<int> first, last;            // per item
  std::vector<std::vector<int>> members;   // per section, if hasMembers
  bool hasMembers = false;
};
// Sections of `items`. The member lists (needed by the search and the
// repair) are dropped if they would hold more than `maxMembership` entries in
// all: many long-lived buffers make them quadratic.
Sections buildSections(const std::vector<Item>& items, size_t maxMembership = SIZE_MAX);

// Over sections: "raise every value in [lo, hi) to at least v" and "largest
// value in [lo, hi)", both O(log n), bottom-up without recursion. A raise
// leaves a tag on the O(log n) nodes that make up [lo, hi) (not pushed down)
// and lifts every node's maximum on the way to the root; a position's value
// is the largest tag on its path to the root. The nodes a query covers only
// lack the tags of their ancestors, which all lie on the paths from the two
// boundary leaves, so those two paths are read too.
class FloorTree {
 public:
  explicit FloorTree(int n) {
    while (size_ < size_t(std::max(n, 1))) size_ *= 2;
    max_.assign(2 * size_, 0);
    tags_.assign(2 * size_, 0);
  }
  int64_t maxOver(int lo, int hi) const {
    if (lo >= hi) return 0;
    int64_t best = 0;
    for (size_t l = size_t(lo) + size_, r = size_t(hi) + size_; l < r; l /= 2, r /= 2) {
      if (l & 1) best = std::max(best, max_[l++]);
      if (r & 1) best = std::max(best, max_[--r]);
    }
    for (size_t i = (size_t(lo) + size_) / 2; i > 0; i /= 2) best = std::max(best, tags_[i]);
    for (size_t i = (size_t(hi) - 1 + size_) / 2; i > 0; i /= 2) best = std::max(best, tags_[i]);
    return best;
  }
  void raise(int lo, int hi, int64_t v) {
    if (lo >= hi) return;
    for (size_t l = size_t(lo) + size_, r = size_t(hi) + size_; l < r; l /= 2, r /= 2) {
      if (l & 1) tag(l++, v);
      if (r & 1) tag(--r, v);
    }
    for (size_t i = (size_t(lo) + size_) / 2; i > 0; i /= 2) max_[i] = std::max(max_[i], v);
    for (size_t i = (size_t(hi) - 1 + size_) / 2; i > 0; i /= 2) max_[i] = std::max(max_[i], v);
  }

 private:
  void tag(size_t node, int64_t v) {
    max_[node] = std::max(max_[node], v);
    tags_[node] = std::max(tags_[node], v);
  }
  size_t size_ = 1;
  std::vector<int64_t> max_, tags_;  // per node: largest value below it; raise tags
};

// Shared limit on search effort: a node count (deterministic) and a
// wall-clock deadline (not).
class Budget {
 public:
  Budget(int64_t nodes, double seconds);
  // Counts one node; false once either limit is spent.
  bool spend();
  // Counts `nodes` nodes' worth of work done outside a search (a repair's
  // setup), so that a node limit bounds it too.
  void charge(int64_t nodes);
  bool exhausted();
  int64_t nodesUsed() const { return used_; }
  // Seconds to the deadline (at most 0 once passed; infinite without one).
  double secondsLeft() const;
  // A budget holding `fraction` of what is left; `absorb` its use afterwards.
  Budget share(double fraction) const;
  // For a search running beside others: `fraction` of the nodes left, and
  // all of the time left.
  Budget beside(double fraction) const;
  // Beside others too: at most `nodes`, and at most `fraction`, of the nodes
  // left, and all of the time left.
  Budget besideAtMost(int64_t nodes, double fraction = 1.0) const;
  // Once `*flag` is set, the budget counts as spent (checked with the clock).
  void cancelWhen(const std::atomic<bool>* flag) { cancel_ = flag; }
  void absorb(const Budget& part);

 private:
  int64_t limit_, used_ = 0;  // limit_ == INT64_MAX: no node limit
  bool hasDeadline_, out_ = false;
  const std::atomic<bool>* cancel_ = nullptr;
  std::chrono::steady_clock::time_point deadline_;
};

// Static orders the searches and greedy passes try (ties: lower index).
// "Total" is the largest sum of sizes over the sections an item covers,
// "length" its lifetime, "area" size times lifetime; all descending. Size
// breaks ties by length; SizeStart by start, ascending (buffers of one size
// placed in start order pack as an interval colouring does, with no gaps).
enum class Preorder { TotalLengthArea, TotalAreaLength, LengthAreaTotal, Size, SizeStart, Start };
inline constexpr Preorder kSearchPreorders[] = {Preorder::LengthAreaTotal, Preorder::TotalAreaLength,
                                                Preorder::TotalLengthArea};
// Sum of item sizes per section.
std::vector<int64_t> sectionTotals(const std::vector<Item>& items, const Sections& sections);
// The items of `subset` sorted by `order`, judging "total" by `sectionTotal`.
std::vector<int> preorderItems(const std::vector<Item>& items, const Sections& sections,
                               const std::vector<int>& subset, Preorder order,
                               const std::vector<int64_t>& sectionTotal);

// When a placement heuristic stops early. Placements only raise their arena
// as they go, so once it passes the arena of a complete plan (`*stopAbove`,
// which another thread may lower meanwhile) they cannot win: they then set
// `stopped` and return the arena reached so far (a lower bound on what they
// would have reached); their offsets are partial. With a `deadline`, they
// also stop (setting `timedOut` too) once its time is spent: the budget of
// the whole planning call, which a heuristic started late must not overrun.
struct PlacementLimit {
  const std::atomic<int64_t>* stopAbove = nullptr;
  Budget* deadline = nullptr;
  bool stopped = false, timedOut = false;
  uint32_t steps = 0;
  // Whether a placement that has reached `arena` stops.
  bool reached(int64_t arena) {
    if (stopAbove && arena > stopAbove->load(std::memory_order_relaxed)) stopped = true;
    return stopped || outOfTime();
  }
  // Whether the deadline has passed (the clock is read every 1024 calls).
  bool outOfTime() {
    if (deadline && (++steps & 1023) == 0 && deadline->exhausted()) stopped = timedOut = true;
    return timedOut;
  }
};

// Bottom-up "skyline" placement without backtracking: repeatedly place the
// unplaced item with the lowest feasible offset (ties: earlier in `ranked`)
// on top of everything placed under it. O(n log n) with a segment tree over
// sections. Returns the arena (INT64_MAX if it gave up because nearly all
// buffers overlap); offsets are written to `offsets`.
int64_t placeSkyline(const std::vector<Item>& items, const Sections& sections,
                     const std::vector<int>& ranked, std::vector<int64_t>& offsets,
                     PlacementLimit* limit = nullptr);

// Skyline placement again and again under orders near `order`, for as long
// as `budget` lasts: each try shifts every item of the best order so far by
// Gaussian noise of one rank (so it mostly breaks ties between buffers that
// could go equally low another way) and keeps the order if its plan has a
// smaller arena than `*arena`. On return `order`, `offsets` and `*arena` hold
// the best try (unchanged if none was smaller); `*tries` counts them. Each try
// is charged to `budget` as 1 + n/64 nodes; the random stream is fixed by
// `seed`, so a node limit gives the same result on every run.
void reshuffleSkyline(const std::vector<Item>& items, const Sections& sections, std::vector<int>& order,
                      std::vector<int64_t>& offsets, int64_t* arena, Budget& budget, uint64_t seed, int* tries);

// Items in time order, each in the smallest free block of a free list that
// holds it (as a run-time best-fit allocator would), freed blocks merged.
// O(n log n) whatever the overlap.
int64_t placeOnline(const std::vector<Item>& items, std::vector<int64_t>& offsets);

// Placement in the given item order, each at the lowest offset that fits
// ("first fit") or in the tightest gap that fits ("best fit"), seeing the
// placed items through a segment tree of offset-range unions over time:
// O(n log^2 n) plus the gaps passed, whatever the overlap.
int64_t placeFirstFit(const std::vector<Item>& items, const std::vector<int>& order,
                      std::vector<int64_t>& offsets, bool bestFit = false, PlacementLimit* limit = nullptr);

enum class SearchOutcome { kFound, kInfeasible, kOutOfBudget };

// Exact search for a plan within `capacity` bytes, over canonical solutions
// (items placed in non-decreasing offset order, each resting on the highest
// item below it), with section bounds, dominance and decomposition pruning.
// kInfeasible is a proof that no plan fits; kFound writes `offsets`.
// `lowest`, when given, is each item's lowest allowed offset (the top of
// fixed buffers under it, when only part of a plan is searched again).
SearchOutcome searchWithin(const std::vector<Item>& items, const Sections& sections,
                           int64_t capacity, Budget& budget, std::vector<int64_t>& offsets,
                           const std::vector<int64_t>* lowest = nullptr);
// The same question with searches at several capacities, the first the
// largest, taking turns: a plan found by any answers it (searches at nearby
// capacities differ widely in the nodes they need); only the first one's
// failure proves there is none.
SearchOutcome searchWithinAny(const std::vector<Item>& items, const Sections& sections,
                              const std::vector<int64_t>& capacities, Budget& budget,
                              std::vector<int64_t>& offsets, const std::vector<int64_t>* lowest = nullptr);

// The same question by restarts: searches of the three preorders in turn,
// each with its subproblems' rankings shifted by Gaussian noise of one rank
// (the stream fixed by `seed`), under node limits of twice the item count
// times the Luby sequence. Where a static order's search sinks its nodes
// into one bad early choice, some restart usually avoids it. A restart that
// completes is a proof either way. Stops, out of budget, once
// `*supersededAt` (another search's best arena) is at or below `capacity`.
SearchOutcome searchWithRestarts(const std::vector<Item>& items, const Sections& sections, int64_t capacity,
                                 Budget& budget, std::vector<int64_t>& offsets, uint64_t seed,
                                 const std::atomic<int64_t>* supersededAt = nullptr);

// Large-neighbourhood improvement of a complete plan: every section whose
// height exceeds `target` is repaired by searching again the buffers of a
// time window around it together with every buffer stacked above them, the
// rest staying fixed. Returns true if all of them got down to `target`;
// either way `offsets` keeps every repair made (none raises the arena).
bool repairPlan(const std::vector<Item>& items, const Sections& sections, int64_t target,
                Budget& budget, std::vector<int64_t>& offsets);

}  // namespace neuroncc::planner
