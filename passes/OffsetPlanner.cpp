//===- OffsetPlanner.cpp - choose the smallest arena -----------------------===//
//
// 1. Heuristics (GreedyPlacement.cpp): an online best-fit allocator in time
//    order (always O(n log n)), first fit in several orders, best fit, and
//    skyline placement under several preorders (skipped where they would be
//    quadratic). The smallest arena wins; if it equals the lower bound (peak
//    live bytes) it is optimal and planning stops.
// 2. Otherwise, when a budget is given and the instance is small enough, the
//    exact canonical search (CanonicalSearch.cpp) runs as a sequence of
//    "does a plan fit in C bytes?" questions, narrowing [lower, best):
//    first at the lower bound itself with a third of the budget (most
//    instances reach it), then halving the gap, each question with half of
//    what is left. A found plan lowers `best` to its actual arena; a
//    completed search that finds nothing raises `lower` (a proof); a
//    question that runs out of its share counts as "not found" for choosing
//    the next question but proves nothing.
// 3. Larger instances instead get the best heuristic plan repaired spot by
//    spot (RegionRepair.cpp) toward targets chosen the same way.
//
//===----------------------------------------------------------------------===//

#include "passes/OffsetPlanner.h"

#include <algorithm>
#include <numeric>

#include "passes/PlannerInternal.h"

namespace neuroncc {

using namespace planner;

namespace {

// Beyond these, first/best fit (work ~ overlapping pairs) and the section
// member lists (memory ~ sections x live buffers) would be quadratic; the
// skyline heuristic alone then plans, in O(n log n).
constexpr int64_t kMaxPairsForFit = 20000000;
constexpr size_t kMaxMembership = 20000000;

int64_t arenaOf(const std::vector<Item>& items, const std::vector<int64_t>& offsets) {
  int64_t arena = 0;
  for (size_t i = 0; i < items.size(); ++i) arena = std::max(arena, offsets[i] + items[i].size);
  return arena;
}

const char* preorderName(Preorder p) {
  switch (p) {
    case Preorder::TotalLengthArea: return "total-length-area";
    case Preorder::TotalAreaLength: return "total-area-length";
    case Preorder::LengthAreaTotal: return "length-area-total";
    case Preorder::Size: return "size";
    case Preorder::Start: return "start";
  }
  return "?";
}

}  // namespace

PlanResult planOffsets(std::vector<PlannedBuffer>& buffers, const PlanOptions& options) {
  PlanResult result;
  result.lowerBound = peakLiveBytes(buffers);
  std::vector<Item> items;
  std::vector<size_t> itemOf;  // item -> buffer
  for (size_t i = 0; i < buffers.size(); ++i) {
    PlannedBuffer& b = buffers[i];
    if (b.size <= 0 || b.start >= b.end) {
      b.offset = 0;  // takes no space
      continue;
    }
    int64_t align = std::lcm(std::max<int64_t>(1, options.alignment), std::max<int64_t>(1, b.alignment));
    items.push_back({b.start, b.end, b.size, align});
    itemOf.push_back(i);
  }
  if (items.empty()) {
    result.method = "trivial";
    result.provenOptimal = true;
    return result;
  }
  Sections sections = buildSections(items, kMaxMembership);
  bool pairwiseAffordable = countOverlappingPairs(items) <= kMaxPairsForFit;
  std::vector<int64_t> totals = sectionTotals(items, sections);

  std::vector<int64_t> best, trial;
  int64_t bestArena = INT64_MAX;
  auto consider = [&](int64_t arena, std::string method) {
    if (arena >= bestArena) return;
    bestArena = arena;
    best = trial;
    result.method = std::move(method);
  };
  // The budget covers the heuristics too, so a time limit bounds the whole call.
  bool budgeted = options.timeLimitSeconds > 0 || options.nodeLimit > 0;
  Budget budget(options.nodeLimit, options.timeLimitSeconds);
  std::vector<int> all(items.size());
  std::iota(all.begin(), all.end(), 0);
  auto ranked = [&](Preorder p) { return preorderItems(items, sections, all, p, totals); };
  struct Heuristic {
    enum { kFirstFit, kBestFit, kSkyline } kind;
    Preorder order;
  };
  const Heuristic heuristics[] = {
      {Heuristic::kFirstFit, Preorder::Size},          {Heuristic::kSkyline, Preorder::TotalAreaLength},
      {Heuristic::kFirstFit, Preorder::LengthAreaTotal}, {Heuristic::kSkyline, Preorder::TotalLengthArea},
      {Heuristic::kBestFit, Preorder::TotalLengthArea},  {Heuristic::kSkyline, Preorder::LengthAreaTotal},
      {Heuristic::kFirstFit, Preorder::Start},           {Heuristic::kBestFit, Preorder::Size},
      {Heuristic::kFirstFit, Preorder::TotalAreaLength}, {Heuristic::kSkyline, Preorder::Size},
  };
  consider(placeOnline(items, trial), "online best-fit");
  auto goodEnough = [&] { return options.goodEnoughArena > 0 && bestArena <= options.goodEnoughArena; };
  for (const Heuristic& h : heuristics) {
    if (bestArena == result.lowerBound || goodEnough() || (budgeted && budget.exhausted())) break;
    if (h.kind != Heuristic::kSkyline && !pairwiseAffordable) continue;
    if (h.kind == Heuristic::kSkyline)
      consider(placeSkyline(items, sections, ranked(h.order), trial), std::string("skyline by ") + preorderName(h.order));
    else
      consider(placeFirstFit(items, ranked(h.order), trial, h.kind == Heuristic::kBestFit),
               std::string(h.kind == Heuristic::kBestFit ? "best-fit by " : "first-fit by ") + preorderName(h.order));
  }

  int64_t lower = result.lowerBound;
  if (bestArena > lower && budgeted && sections.hasMembers && !goodEnough()) {
    // Arenas below `probe` are presumed (not proven) infeasible: a question
    // there ran out of its share of the budget.
    int64_t probe = lower;
    if (items.size() <= options.exactSearchMaxBuffers) {
      bool firstQuestion = true;
      while (probe < bestArena && !budget.exhausted()) {
        int64_t capacity = firstQuestion ? probe : probe + (bestArena - probe) / 2;
        Budget part = budget.share(firstQuestion ? 1.0 / 3 : 1.0 / 2);
        firstQuestion = false;
        SearchOutcome outcome = searchWithin(items, sections, capacity, part, trial);
        budget.absorb(part);
        if (outcome == SearchOutcome::kFound) {
          consider(arenaOf(items, trial), "exact search");
        } else {
          probe = capacity + 1;
          if (outcome == SearchOutcome::kInfeasible) lower = capacity + 1;
        }
      }
    } else {
      // Too large to search whole: repair the worst spots of the best plan,
      // aiming halfway between the presumed bound and the current arena.
      bool repaired = false;
      while (probe < bestArena && !budget.exhausted()) {
        int64_t target = probe + (bestArena - probe) / 2;
        Budget part = budget.share(1.0 / 2);
        bool reached = repairPlan(items, sections, target, part, best);
        budget.absorb(part);
        int64_t arena = arenaOf(items, best);
        repaired |= arena < bestArena;
        bestArena = arena;
        if (!reached) probe = target + 1;
      }
      if (repaired) result.method += " + region repair";
    }
    result.searchNodes = budget.nodesUsed();
    if (lower >= bestArena) result.provenOptimal = true;
  }
  if (bestArena == result.lowerBound) result.provenOptimal = true;
  for (size_t k = 0; k < items.size(); ++k) buffers[itemOf[k]].offset = best[k];
  result.arena = bestArena;
  return result;
}

}  // namespace neuroncc
