//===- OffsetPlanner.cpp - choose the smallest arena -----------------------===//
//
// 1. Heuristics (GreedyPlacement.cpp): an online best-fit allocator in time
//    order, the classic greedy orderings (size and lifetime descending, each
//    with first fit and best fit), then skyline placement and first fit
//    under more preorders; all about O(n log n). On instances too large for
//    the exact search, also the exact search of their long-lived buffers
//    alone, the rest placed around them (placeAroundCore). The smallest
//    arena wins; if it equals the lower bound (peak live bytes) it is
//    optimal and planning stops.
// 2. Otherwise, when a budget is given and the instance is small enough, the
//    exact canonical search (CanonicalSearch.cpp) answers "does a plan fit
//    in C bytes?" questions, on two threads, each with half the nodes and
//    all the time:
//    - the lower bound itself first (most instances reach it), with all of
//      its thread's share if it needs it; if that is disproved, halving the
//      gap [lower, best), each question with half of what is left;
//    - beside it, a quick question halfway to the bound (6% of its share),
//      then halving the gap between the presumed bound and the best plan
//      (gains where the optimum is far above the bound, which the question
//      at the bound cannot reach).
//    Capacities go in steps of the sizes' common divisor (granuleOf); each
//    question above the bound also tries one step below its capacity.
//    A found plan lowers `best` to its actual arena; a completed search
//    that finds nothing raises `lower` (a proof); a question that runs out
//    of its share proves nothing, but later questions presume it. The
//    threads share no state: their plans are compared after both end (ties
//    keep the first thread's), so a node limit gives the same plan on
//    every run.
// 3. Larger instances instead: under a time limit, where a skyline gave the
//    best plan, that skyline again with its ties reshuffled
//    (reshuffleSkyline); then the best plan repaired spot by spot
//    (RegionRepair.cpp) toward targets chosen the same way.
//
//===----------------------------------------------------------------------===//

#include "passes/OffsetPlanner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#include "passes/PlannerInternal.h"

namespace neuroncc {

using namespace planner;

namespace {

// Beyond this, the section member lists (memory ~ sections x live buffers)
// would be quadratic; the search and the repair, which need them, then do
// not run.
constexpr size_t kMaxMembership = 20000000;
// From this many buffers on, the classic heuristics run on threads of their own.
constexpr size_t kParallelItems = 4096;
// The narrowing's first question, halfway to the bound: a cheap gain where
// the optimum sits above the bound.
constexpr double kQuickShare = 0.06;
constexpr double kExtraHeuristicsShare = 0.3;
// The share of what is left that reshuffling the skyline's ties takes before
// region repair, and the seed of its first thread's stream of tries.
constexpr double kReshuffleShare = 0.5;
constexpr uint64_t kReshuffleSeed = 0x5ca1ab1e;
// Under a time limit, the share of the bound thread's budget that the
// question at the bound may take before that thread turns to
// descendByRestarts (every MiniMalloc instance with a known optimum reaches
// it in under 0.1 s of a one-second limit on this 2-core machine), and the
// seed of its restarts.
constexpr double kTimedBoundShare = 0.25;
constexpr uint64_t kRestartSeed = 0xd1ce5eed;

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
    case Preorder::SizeStart: return "size-start";
    case Preorder::Start: return "start";
  }
  return "?";
}

void lowerShared(std::atomic<int64_t>& shared, int64_t arena) {
  int64_t seen = shared.load();
  while (arena < seen && !shared.compare_exchange_weak(seen, arena)) {
  }
}

// One of the exact search's two threads (see planOffsets).
struct Narrowing {
  int64_t best;   // arena of `offsets`, or of the best heuristic plan if !found
  int64_t lower;  // proven: no plan below
  std::vector<int64_t> offsets;
  bool found;
  Budget budget;
  bool byRestarts = false;  // `offsets` came from descendByRestarts
};

// Questions narrowing [lower, best), each plan found also lowering `*shared`
// (when given) for descendByRestarts on the other thread; the questions
// themselves do not read it (the narrowing's path stays its own, so the
// two together never do worse than the narrowing alone). Arenas below `probe` are presumed (not
// proven) infeasible: a question there ran out of its share. The first
// question is either the lower bound itself, with all of the budget if it
// needs it (`fromBound`), or a quick one halfway, with a small share, which
// presumes nothing when it runs out (the optimum may well lie below it).
// Then each asks halfway between the presumed bound and the best plan, with
// half of what is left. Capacities are multiples of `granule`, as `lower` is
// (see granuleOf). Each question above the bound also searches one granule
// below its capacity, in turns (searchWithinAny): the nodes a search needs
// swing by 10x and more between neighbouring capacities (MiniMalloc's J:
// 7k nodes find a plan within 1036288 bytes, 16k within 1035264, but 240k
// find none within 1037312 or 1034240), so two tries miss less often than
// one.
void narrow(const std::vector<Item>& items, const Sections& sections, int64_t granule, bool fromBound,
            Narrowing& n, std::atomic<int64_t>* shared = nullptr, double boundShare = 1.0) {
  int64_t probe = n.lower;
  bool first = true;
  std::vector<int64_t> trial;
  while (n.best > probe && !n.budget.exhausted()) {
    bool atBound = first && fromBound, quick = first && !fromBound;
    int64_t capacity = atBound ? probe : probe + (n.best - probe) / 2 / granule * granule;
    Budget part = n.budget.share(atBound ? boundShare : quick ? kQuickShare : 1.0 / 2);
    std::vector<int64_t> capacities{capacity};
    if (!atBound && capacity - granule >= probe) capacities.push_back(capacity - granule);
    SearchOutcome outcome = searchWithinAny(items, sections, capacities, part, trial);
    n.budget.absorb(part);
    if (outcome == SearchOutcome::kFound) {
      n.best = arenaOf(items, trial);
      n.offsets = trial;
      n.found = true;
      if (shared) lowerShared(*shared, n.best);
    } else if (outcome == SearchOutcome::kInfeasible) {
      n.lower = probe = capacity + granule;
    } else if (atBound && boundShare < 1.0) {
      return;  // the rest of the budget goes to descendByRestarts
    } else if (!quick) {
      probe = capacity + granule;
    }
    first = false;
  }
}

// One granule below the best plan either thread has (`shared`), again and
// again, each question by restarts (searchWithRestarts), dropped as soon as
// the other thread's plan answers it. Beside a narrowing whose questions
// halve a gap, this keeps asking just below the best plan: on MiniMalloc's
// D the narrowing reaches 1031168 in about half a second and its later
// questions, each with half of what is left, find nothing more, where
// restarts find a plan within 1030144 in 36k to 760k nodes depending on
// their seed (median about 250k; the static preorders need more than 400k).
void descendByRestarts(const std::vector<Item>& items, const Sections& sections, int64_t granule,
                       std::atomic<int64_t>& shared, Narrowing& n) {
  std::vector<int64_t> trial;
  while (!n.budget.exhausted()) {
    int64_t best = std::min(n.best, shared.load());
    int64_t capacity = (best - 1) / granule * granule;
    if (capacity < n.lower) return;
    Budget part = n.budget.share(1.0);
    SearchOutcome outcome =
        searchWithRestarts(items, sections, capacity, part, trial, kRestartSeed ^ uint64_t(capacity), &shared);
    n.budget.absorb(part);
    if (outcome == SearchOutcome::kFound) {
      n.best = arenaOf(items, trial);
      n.offsets = trial;
      n.found = true;
      n.byRestarts = true;
      lowerShared(shared, n.best);
    } else if (outcome == SearchOutcome::kInfeasible) {
      n.lower = capacity + granule;
    }
  }
}

// Large instances whose bound is set by long-lived buffers: those buffers
// (the "core": lifetimes at least kCoreLengthFactor times the median, at
// most `maxCore` of them, the longest first) are an instance small enough
// for the exact search, with far fewer overlapping pairs than the whole.
// Their plan, taken by offset, then leads a first-fit pass that places every
// other buffer, largest first, in the gaps around them: a first fit in
// offset order puts no core buffer above where the search put it.
constexpr int64_t kCoreLengthFactor = 10;
constexpr size_t kMinCore = 32;
// Each question to the core search gets this many nodes per core buffer: a
// dive takes one per buffer, and the search gives each of its three
// preorders two at first.
constexpr int64_t kCoreSearchNodesPerItem = 6;
// The core's capacities asked: its bound, and beside it the bound plus
// 1/256 of it, doubling that margin until a plan is found, up to
// kCoreMaxMargin; then halving the interval between the tightest failure and the loosest
// success while it is wider than kCoreFinestMargin. The tighter the core,
// the more room the short buffers find beside it, mostly: on long-lived
// (memplan_bench.py) a core at +0.8% gives 1.0052 of the whole bound, +1.7%
// 1.0088, +2.5% 1.0242. A core that needs more than 3% rarely leaves a
// whole plan the heuristics do not beat, and its questions would take the
// time of the repair after them (llama-8x64: 1.0005 -> 1.0305 with 25%).
constexpr double kCoreFirstMargin = 1.0 / 256, kCoreMaxMargin = 1.0 / 32, kCoreFinestMargin = 1.0 / 1024;

// The largest number dividing every size and every alignment above one: the
// offsets of a plan whose buffers each rest on another's top (or on zero),
// aligned up, are all multiples of it, and so is its arena. Any plan can be
// pushed down into such a plan, so no arena between two multiples needs
// asking about: a question at a multiple answers for the whole step above it.
int64_t granuleOf(const std::vector<Item>& items) {
  int64_t g = 0;
  for (const Item& it : items) {
    g = std::gcd(g, it.size);
    if (it.align > 1) g = std::gcd(g, it.align);
  }
  return std::max<int64_t>(g, 1);
}

std::vector<int> allOf(size_t n) {
  std::vector<int> all(n);
  std::iota(all.begin(), all.end(), 0);
  return all;
}

std::vector<int> coreItems(const std::vector<Item>& items, size_t maxCore) {
  std::vector<int64_t> lengths;
  lengths.reserve(items.size());
  for (const Item& it : items) lengths.push_back(it.end - it.start);
  std::nth_element(lengths.begin(), lengths.begin() + lengths.size() / 2, lengths.end());
  int64_t median = lengths[lengths.size() / 2];
  int64_t threshold = median > INT64_MAX / kCoreLengthFactor ? INT64_MAX : median * kCoreLengthFactor;
  std::vector<int> core;
  for (size_t i = 0; i < items.size(); ++i)
    if (items[i].end - items[i].start >= threshold) core.push_back(int(i));
  std::sort(core.begin(), core.end(), [&](int a, int b) {
    int64_t la = items[size_t(a)].end - items[size_t(a)].start, lb = items[size_t(b)].end - items[size_t(b)].start;
    return la != lb ? la > lb : a < b;
  });
  if (core.size() > maxCore) core.resize(maxCore);
  if (core.size() < kMinCore || core.size() * 2 > items.size()) core.clear();
  return core;
}

// Searches the core within capacities from its own lower bound (the most
// its buffers hold at once) up, each plan found filled in with the rest;
// returns the smallest whole arena (INT64_MAX if no question found a plan,
// or every fill stopped as `limit` says; `limit` then says why).
int64_t placeAroundCore(const std::vector<Item>& items, const std::vector<int>& core, Budget& budget,
                        std::vector<int64_t>& offsets, PlacementLimit* limit) {
  std::vector<Item> coreItemsOnly;
  coreItemsOnly.reserve(core.size());
  for (int i : core) coreItemsOnly.push_back(items[size_t(i)]);
  Sections coreSections = buildSections(coreItemsOnly, kMaxMembership);
  if (!coreSections.hasMembers) return INT64_MAX;
  std::vector<int64_t> totals = sectionTotals(coreItemsOnly, coreSections);
  int64_t coreBound = *std::max_element(totals.begin(), totals.end());
  std::vector<char> inCore(items.size(), 0);
  for (int i : core) inCore[size_t(i)] = 1;
  std::vector<int> rest;
  for (size_t i = 0; i < items.size(); ++i)
    if (!inCore[i]) rest.push_back(int(i));
  std::stable_sort(rest.begin(), rest.end(), [&](int a, int b) { return items[size_t(a)].size > items[size_t(b)].size; });

  int64_t best = INT64_MAX;
  bool stopped = false, timedOut = false;
  std::vector<int64_t> coreOffsets, filled;
  // Fills in around a core plan; keeps the whole plan if it is the best.
  auto fill = [&] {
    std::vector<int> order(core.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      return coreOffsets[size_t(a)] != coreOffsets[size_t(b)] ? coreOffsets[size_t(a)] < coreOffsets[size_t(b)]
                                                              : a < b;
    });
    for (int& k : order) k = core[size_t(k)];
    order.insert(order.end(), rest.begin(), rest.end());
    // Under a time limit a fill starts only before the deadline, and then
    // runs to its end (a tenth of a second on trace-28k), so at most one
    // runs past it: a core plan found late is worth that much. It still
    // stops once it cannot win, with a fresh limit per fill (one that
    // stopped says nothing of the next).
    if (limit && limit->deadline && limit->deadline->exhausted()) {
      timedOut = true;
      return;
    }
    PlacementLimit once{limit ? limit->stopAbove : nullptr};
    int64_t arena = placeFirstFit(items, order, filled, false, &once);
    stopped |= once.stopped;
    timedOut |= once.timedOut;
    if (!once.stopped && arena < best) {
      best = arena;
      offsets.swap(filled);
    }
  };
  // Where a cheap placement already fits the core within its bound (as
  // online best fit does for a core of one size: an interval colouring),
  // that is the plan, with no search (which may not find it in its nodes).
  bool placedCheaply = false;
  for (int cheap = 0; cheap < 2 && !placedCheaply; ++cheap) {
    int64_t arena = cheap == 0 ? placeOnline(coreItemsOnly, coreOffsets)
                               : placeFirstFit(coreItemsOnly,
                                               preorderItems(coreItemsOnly, coreSections, allOf(core.size()),
                                                             Preorder::SizeStart, totals),
                                               coreOffsets);
    if (arena <= coreBound) {
      fill();
      placedCheaply = true;
    }
  }
  // The question at the core's own bound runs on a thread of its own,
  // beside the looser ones: the heuristics' threads are mostly done by now,
  // and a failed question costs a fifth of a second on long-lived
  // (memplan_bench.py). Each side has half of the nodes left, so that under
  // a node limit both ask the same questions on every run.
  const int64_t questionNodes = kCoreSearchNodesPerItem * int64_t(core.size());
  const bool timeLimited = limit && limit->deadline;
  // Under a time limit the bound question's first dive (the first
  // preorder's first turn: two nodes per core buffer) comes first, alone:
  // where it finds a plan, the looser questions would only have repeated
  // the same dive beside it. On trace-28k both find a plan in that one
  // dive, which takes 0.4-0.8 s on a slow machine; run side by side, they
  // split one core between them and neither was done by the deadline. On
  // long-lived the dive fails and costs 0.03 s before the questions below.
  if (!placedCheaply && timeLimited) {
    Budget firstDive = budget.besideAtMost(2 * int64_t(core.size()));
    if (searchWithin(coreItemsOnly, coreSections, coreBound, firstDive, coreOffsets) == SearchOutcome::kFound) {
      fill();
      placedCheaply = true;
    }
    budget.absorb(firstDive);
  }
  std::atomic<bool> boundFound{false};
  std::vector<int64_t> boundOffsets;
  Budget boundQuestion = budget.besideAtMost(questionNodes, 0.5), looser = budget.beside(0.5);
  std::thread atBound;
  if (!placedCheaply)
    atBound = std::thread([&] {
      if (searchWithin(coreItemsOnly, coreSections, coreBound, boundQuestion, boundOffsets) == SearchOutcome::kFound)
        boundFound = true;
    });
  // Then the margins from kCoreFirstMargin: the tightest that failed (the
  // bound presumed so), the loosest that found.
  double failed = 0, found = -1;
  for (double margin = kCoreFirstMargin; !placedCheaply && margin <= kCoreMaxMargin && !looser.exhausted() &&
                                         !timedOut && !(timeLimited && boundFound);) {
    int64_t capacity = coreBound + int64_t(double(coreBound) * margin);
    Budget question = looser.besideAtMost(questionNodes);
    // Under a time limit, a plan at the bound ends the looser questions. A
    // looser plan is filled at once: on trace-28k both questions find a
    // plan in one dive, and on a slow machine (page faults at 12 us each,
    // both cores shared with the classic four) the bound's takes until the
    // deadline. A looser plan that waited for it was never filled there
    // (1.0204, first fit by size); filled at once it gives 1.0020, and the
    // bound's fill, where the bound question ends in time, 1.0000.
    if (timeLimited) question.cancelWhen(&boundFound);
    SearchOutcome outcome = searchWithin(coreItemsOnly, coreSections, capacity, question, coreOffsets);
    looser.absorb(question);
    if (timeLimited && boundFound) break;
    if (outcome == SearchOutcome::kFound) {
      found = margin;
      fill();
    } else {
      failed = margin;
    }
    if (found < 0)
      margin *= 2;
    else if (found - failed > kCoreFinestMargin)
      margin = (failed + found) / 2;
    else
      break;
  }
  if (atBound.joinable()) atBound.join();
  budget.absorb(boundQuestion);
  budget.absorb(looser);
  if (boundFound) {  // fill() itself declines after the deadline
    coreOffsets = std::move(boundOffsets);
    fill();
  }
  if (best == INT64_MAX && limit) {
    limit->stopped = stopped;
    limit->timedOut = timedOut;
  }
  return best;
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
  const int64_t granule = granuleOf(items);
  Sections sections = buildSections(items, kMaxMembership);
  std::vector<int64_t> totals = sectionTotals(items, sections);

  std::vector<int64_t> best, trial;
  int64_t bestArena = INT64_MAX;
  auto consider = [&](int64_t arena, std::string method) {
    if (arena >= bestArena) return;
    bestArena = arena;
    best = trial;
    result.method = std::move(method);
  };
  // A heuristic's arena and seconds, and whether it stopped early; `report`
  // lists it whether or not it wins (its offsets are in `trial`).
  struct Run {
    int64_t arena = 0;
    double seconds = 0;
    bool stopped = false, timedOut = false;
  };
  auto timed = [](auto place, PlacementLimit limit = {}) {
    Run run;
    auto t0 = std::chrono::steady_clock::now();
    run.arena = place(&limit);
    run.stopped = limit.stopped;
    run.timedOut = limit.timedOut;
    run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return run;
  };
  struct Heuristic {
    enum { kFirstFit, kBestFit, kSkyline } kind;
    Preorder order;
  };
  // The heuristic whose plan is the best so far (null: the online one).
  const Heuristic* winner = nullptr;
  auto report = [&](std::string method, Run run, const Heuristic* h = nullptr) {
    result.heuristics.push_back({method, run.arena, run.seconds, run.stopped, run.timedOut});
    if (run.stopped) return;
    if (run.arena < bestArena) winner = h;
    consider(run.arena, std::move(method));
  };
  // The budget covers the heuristics too, so a time limit bounds the whole call.
  bool budgeted = options.timeLimitSeconds > 0 || options.nodeLimit > 0;
  Budget budget(options.nodeLimit, options.timeLimitSeconds);
  std::vector<int> all = allOf(items.size());
  auto ranked = [&](Preorder p) { return preorderItems(items, sections, all, p, totals); };
  // The classic greedy orderings first (size and lifetime descending, each
  // with first and best fit): every plan is at least as good as the best of
  // them. All are O(n log n) in practice (OccupancyTree), whatever the number
  // of overlapping pairs.
  static constexpr Heuristic heuristics[] = {
      {Heuristic::kFirstFit, Preorder::Size},            {Heuristic::kFirstFit, Preorder::LengthAreaTotal},
      {Heuristic::kBestFit, Preorder::Size},             {Heuristic::kBestFit, Preorder::LengthAreaTotal},
      {Heuristic::kFirstFit, Preorder::SizeStart},       {Heuristic::kSkyline, Preorder::TotalAreaLength},
      {Heuristic::kSkyline, Preorder::TotalLengthArea},  {Heuristic::kBestFit, Preorder::TotalLengthArea},
      {Heuristic::kSkyline, Preorder::LengthAreaTotal},  {Heuristic::kFirstFit, Preorder::Start},
      {Heuristic::kFirstFit, Preorder::TotalAreaLength}, {Heuristic::kSkyline, Preorder::Size},
  };
  constexpr size_t kClassic = 4;
  // First fit by size with ties by start runs only where sizes come in few
  // classes (kSameSizeBuffers buffers per distinct size or more, as a
  // compiler's tensors do; llama-16x32 in memplan_bench.py: 1.0092 against
  // 1.0792 with ties by length); elsewhere it is nearly the classic one.
  constexpr size_t kSizeStart = 4;
  constexpr size_t kSameSizeBuffers = 32;
  // On large instances the first skyline runs beside the classic four: it
  // often gives the best plan there, and takes longest (0.6 s on trace-28k
  // in memplan_bench.py).
  constexpr size_t kFirstSkyline = 5;
  constexpr size_t kParallel = kFirstSkyline + 1;
  static_assert(heuristics[kSizeStart].order == Preorder::SizeStart);
  static_assert(heuristics[kFirstSkyline].kind == Heuristic::kSkyline);
  bool fewSizes = false;
  {
    std::vector<int64_t> sizes;
    for (const Item& it : items) sizes.push_back(it.size);
    std::sort(sizes.begin(), sizes.end());
    size_t distinct = size_t(std::unique(sizes.begin(), sizes.end()) - sizes.begin());
    fewSizes = items.size() >= kSameSizeBuffers * distinct;
  }
  auto name = [&](const Heuristic& h) {
    return std::string(h.kind == Heuristic::kSkyline ? "skyline by "
                       : h.kind == Heuristic::kBestFit ? "best-fit by "
                                                       : "first-fit by ") +
           preorderName(h.order);
  };
  // Every heuristic stops once its arena passes that of a complete plan
  // (it can no longer win): `smallest` holds the smallest complete arena so
  // far. Threads lower it as they finish; which of them stop early then
  // depends on timing, but not the plan: a stopped heuristic could neither
  // beat nor tie the winner.
  std::atomic<int64_t> smallest{INT64_MAX};
  auto place = [&](const Heuristic& h, std::vector<int64_t>& offsets, PlacementLimit* limit) {
    return h.kind == Heuristic::kSkyline
               ? placeSkyline(items, sections, ranked(h.order), offsets, limit)
               : placeFirstFit(items, ranked(h.order), offsets, h.kind == Heuristic::kBestFit, limit);
  };
  // Under a time limit, a plan at the lower bound ends the placements still
  // running at once (through the budget they watch for the time): none can
  // do better. Ties could: one earlier in the fixed order would have won,
  // so this is only done where the plan may depend on timing anyway.
  std::atomic<bool> boundReached{false};
  if (options.timeLimitSeconds > 0) budget.cancelWhen(&boundReached);
  auto lowerSmallest = [&](const Run& run) {
    if (run.stopped) return;
    int64_t seen = smallest.load();
    while (run.arena < seen && !smallest.compare_exchange_weak(seen, run.arena)) {
    }
    if (run.arena == result.lowerBound) boundReached = true;
  };
  report("online best-fit", timed([&](PlacementLimit*) { return placeOnline(items, trial); }));
  smallest = bestArena;
  auto goodEnough = [&] { return options.goodEnoughArena > 0 && bestArena <= options.goodEnoughArena; };
  size_t k = 0;
  bool skylineGaveUp = false;
  if (items.size() >= kParallelItems && bestArena > result.lowerBound && !goodEnough()) {
    // Large instances: the classic four and the first skyline on threads,
    // their results taken in the fixed order (the plan does not depend on
    // timing). Where the instance is too large for the exact search, its
    // long-lived core is searched too (placeAroundCore).
    std::vector<int> core;
    if (budgeted && (items.size() > options.exactSearchMaxBuffers || !sections.hasMembers))
      core = coreItems(items, options.exactSearchMaxBuffers);
    // Jobs: heuristics[0, kParallel) by index, kCoreJob the core. The core
    // goes on the first thread free after the first two orderings (and
    // first fit by size-start, where it runs), so that it has time to
    // finish (0.5-0.7 s on trace-28k) while the other thread runs the rest
    // of them; but under a time limit, if those took more than
    // kCoreLateShare of it, after all of them (the classic four run to
    // their end, and on trace-62k they take the whole second on both
    // threads).
    constexpr size_t kCoreJob = SIZE_MAX;
    constexpr double kCoreLateShare = 0.25, kCoreMinShare = 0.25;
    std::vector<size_t> queue = {0, 1};
    if (fewSizes) queue.push_back(kSizeStart);
    if (!core.empty()) queue.push_back(kCoreJob);
    for (size_t j = 2; j < kClassic; ++j) queue.push_back(j);
    queue.push_back(kFirstSkyline);
    std::mutex queueLock;
    size_t taken = 0;
    auto started = std::chrono::steady_clock::now();
    auto nextJob = [&]() -> std::optional<size_t> {
      std::lock_guard<std::mutex> hold(queueLock);
      if (taken == queue.size()) return std::nullopt;
      if (queue[taken] == kCoreJob && options.timeLimitSeconds > 0 && queue[taken + 1] != kFirstSkyline &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() >
              kCoreLateShare * options.timeLimitSeconds)
        std::rotate(queue.begin() + ptrdiff_t(taken), queue.begin() + ptrdiff_t(taken) + 1, queue.end() - 1);
      return queue[taken++];
    };
    std::vector<Run> runs(kParallel);
    std::vector<std::vector<int64_t>> offsets(kParallel);
    std::vector<int64_t> coreOffsets;
    Run coreRun;
    coreRun.arena = INT64_MAX;  // no plan unless its search finds one
    // Its questions take their nodes from here (all that is left, and all
    // the time).
    Budget coreBudget = budget.beside(1.0);
    // As many threads as cores, taking jobs in order: the first ones (first
    // fit, usually the fastest) finish early, and their arena stops the
    // others sooner; the skyline then starts on the first thread free.
    std::vector<std::thread> threads;
    size_t cores = std::max<size_t>(1, std::thread::hardware_concurrency());
    for (size_t w = 0; w < std::min(cores, queue.size()); ++w)
      threads.emplace_back([&] {
        while (std::optional<size_t> job = nextJob()) {
          if (*job == kCoreJob) {
            // The classic four took all the time, or so much that the core
            // job could not end before the limit (it would overrun it: its
            // search's setup and its fill take a quarter of a second and
            // more on trace-62k, whose classic four take nearly a second).
            if (coreBudget.exhausted() || coreBudget.secondsLeft() < kCoreMinShare * options.timeLimitSeconds)
              continue;
            // Its first fit stops like the heuristics (it passes the gaps
            // around the core: 1.2 s on trace-62k, beside the others).
            PlacementLimit limit{&smallest, options.timeLimitSeconds > 0 ? &coreBudget : nullptr};
            coreRun = timed([&](PlacementLimit* l) { return placeAroundCore(items, core, coreBudget, coreOffsets, l); },
                            limit);
            if (coreRun.arena != INT64_MAX) lowerSmallest(coreRun);
            continue;
          }
          size_t j = *job;
          // The classic four run to their end; the skyline stops at the
          // time limit, as the heuristics after them do (only its thread
          // reads `budget` meanwhile).
          PlacementLimit limit{&smallest, j == kFirstSkyline && options.timeLimitSeconds > 0 ? &budget : nullptr};
          runs[j] = timed([&](PlacementLimit* l) { return place(heuristics[j], offsets[j], l); }, limit);
          lowerSmallest(runs[j]);
        }
      });
    for (std::thread& t : threads) t.join();
    for (size_t j = 0; j < kParallel; ++j) {
      if (j == kSizeStart && !fewSizes) continue;
      trial = std::move(offsets[j]);
      report(name(heuristics[j]), runs[j], &heuristics[j]);
    }
    // Listed only if its search found a plan within its nodes.
    if (!core.empty() && coreRun.arena != INT64_MAX) {
      trial = std::move(coreOffsets);
      report("search of a long-lived core of " + std::to_string(core.size()) + ", the rest by first fit", coreRun);
    }
    if (!core.empty()) budget.absorb(coreBudget);
    skylineGaveUp = runs[kFirstSkyline].arena == INT64_MAX;
    k = kParallel;
  }
  // The classic ones always run; the others start only within a share of
  // the budget (a wall-clock one: they cost no search nodes), so that the
  // search or the repair that follows keeps most of it. One that has
  // started runs to its end (or until it cannot win): the plan it gives is
  // often the one region repair does best from. But not past the budget's
  // own time: a skyline started late on a large instance could otherwise
  // run on for longer than the whole time limit.
  // A skyline that gave up (nearly every buffer overlaps) is not tried
  // under other orders.
  std::optional<Budget> extra;
  for (; k < std::size(heuristics); ++k) {
    const Heuristic& h = heuristics[k];
    if (bestArena == result.lowerBound || goodEnough()) break;
    if (k >= kClassic && !extra && budgeted) extra = budget.share(kExtraHeuristicsShare);
    // The budget itself first: a share of a spent budget still gets a moment.
    if (extra && (budget.exhausted() || extra->exhausted())) break;
    if (h.kind == Heuristic::kSkyline && skylineGaveUp) continue;
    if (k == kSizeStart && !fewSizes) continue;
    // Only a time limit stops them: under a node limit alone the plan stays
    // the same on every run.
    PlacementLimit limit{&smallest, options.timeLimitSeconds > 0 ? &budget : nullptr};
    Run run = timed([&](PlacementLimit* l) { return place(h, trial, l); }, limit);
    skylineGaveUp |= h.kind == Heuristic::kSkyline && run.arena == INT64_MAX;
    lowerSmallest(run);
    report(name(h), run, &h);
  }

  int64_t lower = result.lowerBound;
  if (bestArena > lower && budgeted && !goodEnough()) {
    if (items.size() <= options.exactSearchMaxBuffers && sections.hasMembers) {
      // Two searches side by side, each on a thread with half the nodes
      // (and all the time). Here: the lower bound itself (every MiniMalloc
      // instance with a known optimum reaches it), with all of this share
      // if it needs it, then, if that is disproved, halving the gap. Beside
      // it: a quick question halfway to the bound (a cheap gain where the
      // optimum sits above it), then halving the gap between the best plan
      // and the presumed bound, so that instances whose optimum is far
      // above the bound keep improving while the question at the bound
      // runs.
      std::atomic<bool> proven{false};
      Narrowing atBound{bestArena, lower, {}, false, budget.beside(0.5)};
      Narrowing beside{bestArena, lower, {}, false, budget.beside(0.5)};
      beside.budget.cancelWhen(&proven);
      // Under a time limit (the result depends on timing anyway), the
      // question at the bound takes part of its thread's budget, the rest
      // going to restarts one granule below the best plan of either thread.
      // Under a node limit alone the threads share nothing, so the plan is
      // the same on every run.
      const bool timed = options.timeLimitSeconds > 0;
      std::atomic<int64_t> shared{bestArena};
      std::thread narrower([&] { narrow(items, sections, granule, false, beside, timed ? &shared : nullptr); });
      narrow(items, sections, granule, true, atBound, timed ? &shared : nullptr, timed ? kTimedBoundShare : 1.0);
      if (timed && atBound.lower < std::min(atBound.best, shared.load()))
        descendByRestarts(items, sections, granule, shared, atBound);
      // Nothing the other thread finds can beat a proven optimum (and equal
      // arenas keep this thread's plan), so stopping it then changes no
      // result.
      if (atBound.lower >= atBound.best) proven = true;
      narrower.join();
      budget.absorb(atBound.budget);
      // A stopped narrowing's node count depends on timing; it is left out.
      if (!proven) budget.absorb(beside.budget);
      lower = std::max(atBound.lower, beside.lower);
      for (auto [n, method] : {std::pair{&atBound, atBound.byRestarts ? "exact search (restarts)" : "exact search"},
                               std::pair{&beside, "exact search (narrowing)"}})
        if (n->found && n->best < bestArena) {
          trial = std::move(n->offsets);
          consider(n->best, method);
        }
    } else {
      // Too large to search whole. Where a skyline gave the best plan,
      // first that skyline again under orders with reshuffled ties, on two
      // threads (each its own stream of tries), with half of the time, or
      // all of it where the repair below cannot run; only under a time
      // limit, since each try costs as much as a whole heuristic (the
      // compiler plans under a node limit and keeps its compile time).
      if (winner && winner->kind == Heuristic::kSkyline && options.timeLimitSeconds > 0 && !budget.exhausted()) {
        const Heuristic& skyline = *winner;
        Budget phase = budget.share(sections.hasMembers ? kReshuffleShare : 1.0);
        struct Chain {
          std::vector<int> order;
          std::vector<int64_t> offsets;
          int64_t arena;
          Budget budget;
          int tries = 0;
        };
        std::vector<int> start = ranked(skyline.order);
        Chain chains[2] = {{start, {}, bestArena, phase.beside(0.5)}, {start, {}, bestArena, phase.beside(0.5)}};
        auto run = [&](int c) {
          reshuffleSkyline(items, sections, chains[c].order, chains[c].offsets, &chains[c].arena, chains[c].budget,
                           kReshuffleSeed + uint64_t(c), &chains[c].tries);
        };
        std::thread second(run, 1);
        run(0);
        second.join();
        for (Chain& c : chains) {
          phase.absorb(c.budget);
          result.reshuffleTries += c.tries;
        }
        budget.absorb(phase);
        for (Chain& c : chains)
          if (!c.offsets.empty() && c.arena < bestArena) {
            trial = std::move(c.offsets);
            consider(c.arena, name(skyline) + ", ties reshuffled");
          }
      }
      // Then repair the worst spots of the best plan, aiming halfway
      // between the presumed bound and the current arena (arenas below
      // `probe` are presumed infeasible: a repair there fell short).
      int64_t probe = lower;
      bool repaired = false;
      while (sections.hasMembers && probe < bestArena && !budget.exhausted()) {
        int64_t target = probe + (bestArena - probe) / 2 / granule * granule;
        Budget part = budget.share(1.0 / 2);
        bool reached = repairPlan(items, sections, target, part, best);
        budget.absorb(part);
        int64_t arena = arenaOf(items, best);
        repaired |= arena < bestArena;
        bestArena = arena;
        if (!reached) probe = target + granule;
      }
      if (repaired) result.method += " + region repair";
    }
    if (lower >= bestArena) result.provenOptimal = true;
  }
  result.searchNodes = budget.nodesUsed();
  if (bestArena == result.lowerBound) result.provenOptimal = true;
  for (size_t k = 0; k < items.size(); ++k) buffers[itemOf[k]].offset = best[k];
  result.arena = bestArena;
  return result;
}

}  // namespace neuroncc
