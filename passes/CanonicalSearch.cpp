//===- CanonicalSearch.cpp - exact offset search within a capacity ---------===//
//
// Depth-first search over "canonical" plans, following the method published
// with MiniMalloc (Moffitt, ASPLOS 2023): any valid plan can be pushed down
// until every buffer rests on a buffer below it (or on 0); listing the
// buffers by offset then gives a sequence in which each buffer sits at the
// highest top among the already placed buffers it overlaps in time. So the
// search only chooses *which* buffer comes next, never an offset, and places
// buffers in non-decreasing offset order. Pruning:
//  - section bound: in every section, max(floor, current offset) plus the
//    sizes still unplaced there must fit the capacity;
//  - floor inference: a section's floor is at least the lowest offset any
//    of its unplaced buffers can take;
//  - dominance: placing a buffer at or above the top that another unplaced
//    buffer could reach now leaves a gap that buffer could always drop into,
//    so such branches are skipped;
//  - decomposition: once no unplaced buffer crosses a section boundary, the
//    two sides are independent problems and are solved one after the other.
// Candidates are tried by lowest offset, ties broken by a static preorder;
// the caller cycles preorders with growing node limits, each search pausing
// at its limit and going on from there on its next turn (on a fiber).
//
//===----------------------------------------------------------------------===//

#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <random>
#include <limits>
#include <memory>
#include <new>
#include <utility>

#include "passes/PlannerInternal.h"

namespace neuroncc::planner {

Sections buildSections(const std::vector<Item>& items, size_t maxMembership) {
  Sections result;
  size_t n = items.size();
  result.first.assign(n, -1);
  result.last.assign(n, -1);
  // Ends sort before starts at the same instant: lifetimes are half-open.
  struct Event {
    int64_t time;
    bool isStart;
    int item;
  };
  std::vector<Event> events;
  events.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    events.push_back({items[i].start, true, int(i)});
    events.push_back({items[i].end, false, int(i)});
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    if (a.time != b.time) return a.time < b.time;
    if (a.isStart != b.isStart) return !a.isStart;
    return a.item < b.item;
  });
  // Live items in a vector with positions, so removal is O(1). The first
  // sweep only counts: where the member lists would pass `maxMembership`
  // they are not built at all (on a trace of 62k buffers, building 20M
  // entries to drop them took a quarter of a second, mostly page faults).
  std::vector<int> live, position(n, -1);
  auto sweep = [&](bool keepMembers) {
    bool bornSinceLastSection = false;
    size_t membership = 0;
    result.count = 0;
    for (const Event& e : events) {
      if (e.isStart) {
        position[size_t(e.item)] = int(live.size());
        live.push_back(e.item);
        result.first[size_t(e.item)] = result.count;  // it is in the next section
        bornSinceLastSection = true;
        continue;
      }
      if (bornSinceLastSection) {
        ++result.count;
        membership += live.size();
        if (keepMembers) result.members.push_back(live);
        bornSinceLastSection = false;
      }
      result.last[size_t(e.item)] = result.count;
      int p = position[size_t(e.item)];
      live[size_t(p)] = live.back();
      position[size_t(live[size_t(p)])] = p;
      live.pop_back();
    }
    return membership;
  };
  result.hasMembers = sweep(false) <= maxMembership;
  if (result.hasMembers) {
    result.members.reserve(size_t(result.count));
    sweep(true);
  }
  return result;
}

Budget::Budget(int64_t nodes, double seconds)
    : limit_(nodes > 0 ? nodes : INT64_MAX), hasDeadline_(seconds > 0) {
  if (hasDeadline_)
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(seconds));
}

double Budget::secondsLeft() const {
  if (!hasDeadline_) return std::numeric_limits<double>::infinity();
  return std::chrono::duration<double>(deadline_ - std::chrono::steady_clock::now()).count();
}

Budget Budget::share(double fraction) const {
  int64_t nodes = limit_ == INT64_MAX ? 0 : std::max<int64_t>(1, int64_t(double(limit_ - used_) * fraction));
  double seconds = 0;
  if (hasDeadline_) {
    seconds = std::chrono::duration<double>(deadline_ - std::chrono::steady_clock::now()).count() * fraction;
    seconds = std::max(seconds, 1e-6);
  }
  Budget part(nodes, seconds);
  part.cancel_ = cancel_;
  return part;
}

Budget Budget::beside(double fraction) const {
  Budget part = share(fraction);
  part.hasDeadline_ = hasDeadline_;
  part.deadline_ = deadline_;
  part.cancel_ = cancel_;
  return part;
}

Budget Budget::besideAtMost(int64_t nodes, double fraction) const {
  Budget part = beside(fraction);
  part.limit_ = std::min(part.limit_, std::max<int64_t>(1, nodes));
  return part;
}

void Budget::absorb(const Budget& part) {
  used_ += part.used_;
  if (used_ >= limit_ || (hasDeadline_ && std::chrono::steady_clock::now() >= deadline_)) out_ = true;
}

bool Budget::exhausted() {
  if (!out_ && hasDeadline_ && std::chrono::steady_clock::now() >= deadline_) out_ = true;
  if (cancel_ && cancel_->load(std::memory_order_relaxed)) out_ = true;
  return out_;
}

bool Budget::spend() {
  if (out_) return false;
  if (++used_ > limit_) out_ = true;
  // Reading the clock costs more than a node; look every 256 nodes.
  if ((used_ & 255) == 0) {
    if (hasDeadline_ && std::chrono::steady_clock::now() >= deadline_) out_ = true;
    if (cancel_ && cancel_->load(std::memory_order_relaxed)) out_ = true;
  }
  return !out_;
}

void Budget::charge(int64_t nodes) {
  used_ = used_ > INT64_MAX - nodes ? INT64_MAX : used_ + nodes;
  if (used_ > limit_) out_ = true;
}

std::vector<int64_t> sectionTotals(const std::vector<Item>& items, const Sections& sections) {
  // Each item adds its size over [first, last): a difference array.
  std::vector<int64_t> total(size_t(sections.count) + 1, 0);
  for (size_t i = 0; i < items.size(); ++i) {
    total[size_t(sections.first[i])] += items[i].size;
    total[size_t(sections.last[i])] -= items[i].size;
  }
  for (size_t s = 1; s < total.size(); ++s) total[s] += total[s - 1];
  total.pop_back();
  return total;
}

namespace {
int floorLog2(size_t v) {
  int k = 0;
  while (v >>= 1) ++k;
  return k;
}
}  // namespace

std::vector<int> preorderItems(const std::vector<Item>& items, const Sections& sections,
                               const std::vector<int>& subset, Preorder order,
                               const std::vector<int64_t>& sectionTotal) {
  // An item's total is the largest section total over its run of sections.
  // Scanning each run is quadratic when many long buffers span most of the
  // sections; then a sparse table of range maxima (O(1) per item after
  // O(S log S)) is built instead.
  bool needsTotal = order == Preorder::TotalLengthArea || order == Preorder::TotalAreaLength ||
                    order == Preorder::LengthAreaTotal;
  size_t spans = 0, count = sectionTotal.size();
  if (needsTotal)
    for (int i : subset) spans += size_t(sections.last[size_t(i)] - sections.first[size_t(i)]);
  std::vector<std::vector<int64_t>> levels;  // levels[k][s]: max over [s, s + 2^k)
  if (needsTotal && count > 1 && spans > 4 * count * size_t(floorLog2(count) + 1)) {
    levels.push_back(sectionTotal);
    for (size_t width = 2; width <= count; width *= 2) {
      const std::vector<int64_t>& below = levels.back();
      std::vector<int64_t> level(count - width + 1);
      for (size_t s = 0; s < level.size(); ++s) level[s] = std::max(below[s], below[s + width / 2]);
      levels.push_back(std::move(level));
    }
  }
  auto total = [&](int i) {
    size_t lo = size_t(sections.first[size_t(i)]), hi = size_t(sections.last[size_t(i)]);
    if (lo >= hi) return int64_t(0);
    if (!levels.empty()) {
      size_t k = size_t(floorLog2(hi - lo));
      return std::max(levels[k][lo], levels[k][hi - (size_t(1) << k)]);
    }
    int64_t t = 0;
    for (size_t s = lo; s < hi; ++s) t = std::max(t, sectionTotal[s]);
    return t;
  };
  struct Key {
    int64_t a, b, c;
    int item;
  };
  std::vector<Key> keys;
  keys.reserve(subset.size());
  for (int i : subset) {
    const Item& it = items[size_t(i)];
    int64_t length = it.end - it.start;
    // Saturate: lifetimes up to 2^61 times sizes up to 2^50 overflow int64.
    int64_t area = it.size > 0 && length > INT64_MAX / it.size ? INT64_MAX : length * it.size;
    switch (order) {
      case Preorder::TotalLengthArea: keys.push_back({total(i), length, area, i}); break;
      case Preorder::TotalAreaLength: keys.push_back({total(i), area, length, i}); break;
      case Preorder::LengthAreaTotal: keys.push_back({length, area, total(i), i}); break;
      case Preorder::Size: keys.push_back({it.size, length, 0, i}); break;
      case Preorder::SizeStart: keys.push_back({it.size, -it.start, 0, i}); break;
      case Preorder::Start: keys.push_back({-it.start, it.size, 0, i}); break;
    }
  }
  std::sort(keys.begin(), keys.end(), [](const Key& x, const Key& y) {
    if (x.a != y.a) return x.a > y.a;
    if (x.b != y.b) return x.b > y.b;
    if (x.c != y.c) return x.c > y.c;
    return x.item < y.item;
  });
  std::vector<int> result;
  result.reserve(keys.size());
  for (const Key& k : keys) result.push_back(k.item);
  return result;
}

namespace {

// Each item's list of the items that overlap it in time. Items that share a
// section overlap. Those that begin no later than `i` are all live in its
// first section; the others begin inside its run. Listing both is
// O(overlapping pairs), where scanning every section of every item was
// O(items x sections x live).
std::vector<std::vector<int>> overlapLists(const std::vector<Item>& items, const Sections& sections) {
  size_t n = items.size();
  std::vector<std::vector<int>> overlaps(n), beginning(size_t(sections.count));
  for (size_t i = 0; i < n; ++i) beginning[size_t(sections.first[i])].push_back(int(i));
  for (size_t i = 0; i < n; ++i) {
    for (int j : sections.members[size_t(sections.first[i])])
      if (j != int(i)) overlaps[i].push_back(j);
    for (int sec = sections.first[i] + 1; sec < sections.last[i]; ++sec)
      overlaps[i].insert(overlaps[i].end(), beginning[size_t(sec)].begin(), beginning[size_t(sec)].end());
  }
  return overlaps;
}

// A function run on a stack of its own, which it can leave in the middle
// (pause) and be resumed at later, with glibc's ucontext. It lets a
// recursive search stop at its node limit and go on from there when given
// more, instead of starting over.
class Fiber {
 public:
  explicit Fiber(std::function<void()> body) : body_(std::move(body)) {}
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;
  // A fiber left paused is resumed with pause() returning false, so that
  // its body unwinds (and frees what it holds) before its stack goes.
  ~Fiber() {
    if (started_ && !ended_) {
      cancelled_ = true;
      resume();
    }
    if (stack_) releaseStack(stack_);
  }
  // Runs the body until it pauses or ends; true once it has ended. An
  // exception that leaves the body is thrown again here.
  bool resume() {
    if (ended_) return true;
    if (!started_) {
      stack_ = takeStack();
      if (getcontext(&self_) != 0) throw std::bad_alloc();
      self_.uc_stack.ss_sp = stack_;
      self_.uc_stack.ss_size = kStackBytes;
      self_.uc_link = &caller_;  // where the body's end returns to
      auto address = reinterpret_cast<uintptr_t>(this);
      makecontext(&self_, reinterpret_cast<void (*)()>(&Fiber::entry), 2, unsigned(address >> 32),
                  unsigned(address & 0xffffffffu));
      started_ = true;
    }
    swapcontext(&caller_, &self_);
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
    return ended_;
  }
  // From the body: back to whoever resumed it. False if the fiber is being
  // destroyed: the body must then return without pausing again.
  bool pause() {
    swapcontext(&self_, &caller_);
    return !cancelled_;
  }

 private:
  // As deep as a thread's default stack: the search recurses once per
  // placed buffer, and ran on such stacks before it ran on fibers. Only the
  // pages it touches are backed by memory.
  static constexpr size_t kStackBytes = size_t(8) << 20;
  static constexpr size_t kGuardBytes = size_t(64) << 10;

  static void entry(unsigned high, unsigned low) {
    auto* self = reinterpret_cast<Fiber*>((uintptr_t(high) << 32) | uintptr_t(low));
    try {
      self->body_();
    } catch (...) {
      self->failure_ = std::current_exception();
    }
    self->ended_ = true;
  }

  // Stacks are kept for reuse by the thread that used them (a search of a
  // few nodes would otherwise spend more on mapping a stack than on itself).
  struct StackPool {
    std::vector<void*> free;
    ~StackPool() {
      for (void* s : free) munmap(static_cast<char*>(s) - kGuardBytes, kStackBytes + kGuardBytes);
    }
  };
  static StackPool& pool() {
    thread_local StackPool p;
    return p;
  }
  static void* takeStack() {
    StackPool& p = pool();
    if (!p.free.empty()) {
      void* s = p.free.back();
      p.free.pop_back();
      return s;
    }
    // The lowest pages stay inaccessible, so an overflow faults instead of
    // writing over other memory.
    void* base = mmap(nullptr, kStackBytes + kGuardBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) throw std::bad_alloc();
    char* stack = static_cast<char*>(base) + kGuardBytes;
    if (mprotect(stack, kStackBytes, PROT_READ | PROT_WRITE) != 0) {
      munmap(base, kStackBytes + kGuardBytes);
      throw std::bad_alloc();
    }
    return stack;
  }
  static void releaseStack(void* stack) {
    StackPool& p = pool();
    if (p.free.size() < 16) {
      p.free.push_back(stack);
      return;
    }
    munmap(static_cast<char*>(stack) - kGuardBytes, kStackBytes + kGuardBytes);
  }

  std::function<void()> body_;
  ucontext_t self_{}, caller_{};
  void* stack_ = nullptr;
  bool started_ = false, ended_ = false, cancelled_ = false;
  std::exception_ptr failure_;
};

class CanonicalSearch {
 public:
  // `lowest`, when given, holds each item's lowest allowed offset;
  // `overlaps` is overlapLists(items, sections).
  CanonicalSearch(const std::vector<Item>& items, const Sections& sections,
                  const std::vector<std::vector<int>>& overlaps, int64_t capacity,
                  const std::vector<int64_t>* lowest)
      : items_(items), sections_(sections), overlaps_(overlaps), capacity_(capacity) {
    size_t n = items.size(), s = size_t(sections.count);
    offset_.assign(n, -1);
    minOffset_.assign(n, 0);
    raisedBy_.assign(n, 0);
    if (lowest)
      for (size_t i = 0; i < n; ++i) minOffset_[i] = alignUp((*lowest)[i], items[i].align);
    floor_.assign(s, 0);
    unplaced_.assign(s, 0);
    for (size_t sec = 0; sec < s; ++sec)
      for (int i : sections.members[sec]) unplaced_[sec] += items[size_t(i)].size;

    cuts_.assign(s, 0);
    for (size_t i = 0; i < n; ++i)
      for (int b = sections.first[i]; b + 1 < sections.last[i]; ++b) ++cuts_[size_t(b)];
    // Each section's unplaced items first in `open_[sec]`, so the floor
    // inference scans only those; `slot_` finds an item's place in each of
    // its sections (flat, from `slotBase_`).
    open_ = sections.members;
    openCount_.resize(s);
    slotBase_.resize(n + 1, 0);
    for (size_t i = 0; i < n; ++i) slotBase_[i + 1] = slotBase_[i] + size_t(sections.last[i] - sections.first[i]);
    slot_.resize(slotBase_[n]);
    for (size_t sec = 0; sec < s; ++sec) {
      openCount_[sec] = int(open_[sec].size());
      for (size_t k = 0; k < open_[sec].size(); ++k) slotOf(open_[sec][k], int(sec)) = int(k);
    }
    witness_.assign(s, -1);
    for (size_t sec = 0; sec < s; ++sec) raiseToLowestFree(int(sec));
    floorLog_.clear();  // the starting state is never undone
    floorValues_.clear();
    floorLog_.reserve(64 * s + 1024);
    floorValues_.reserve(64 * s + 1024);
    offsetLog_.reserve(64 * n + 1024);
  }

  // Runs the search with one preorder; the state is restored afterwards.
  // Each time it has used the node limit (allow), it pauses on
  // `fiber` (if it runs on one) and goes on from there once resumed, or
  // returns kOutOfBudget.
  // With a `noiseSeed`, each subproblem's ranking is shifted by Gaussian
  // noise of one rank (a restart's own tie-breaks; see searchWithRestarts).
  SearchOutcome run(Preorder order, Fiber* fiber, std::vector<int64_t>& offsets, uint64_t noiseSeed = 0) {
    fiber_ = fiber;
    nodes_ = 0;
    order_ = order;
    noisy_ = noiseSeed != 0;
    rng_.seed(noiseSeed);
    for (int sec = 0; sec < sections_.count; ++sec)
      if (floor_[size_t(sec)] + unplaced_[size_t(sec)] > capacity_) return SearchOutcome::kInfeasible;
    solution_.assign(items_.size(), -1);
    int lo = 0;
    for (int b = 0; b <= sections_.count - 1; ++b) {
      if (b + 1 < sections_.count && cuts_[size_t(b)] > 0) continue;
      SearchOutcome o = solvePart(lo, b + 1);
      if (o != SearchOutcome::kFound) return o;
      lo = b + 1;
    }
    offsets = solution_;
    return SearchOutcome::kFound;
  }
  // What the search runs on until it ends or pauses: the nodes it may have
  // used in all (from its start), and the budget each node is charged to.
  void allow(int64_t nodeLimit, Budget* budget) {
    nodeLimit_ = nodeLimit;
    budget_ = budget;
  }

 private:
  // A buffer not yet placed, in a node's list of them: sorted by the lowest
  // offset it can take (minOffset_, as it was at that node: the nodes below
  // put it back) and then by rank. Eight bytes, with the offset left out: a
  // dense core of 2,500 buffers keeps 2,500 such lists along one dive.
  struct Candidate {
    int rank;
    int item;
  };
  // descend()'s scratch: a raised candidate with its new offset.
  struct Raised {
    int64_t offset;
    int rank;
    int item;
  };

  SearchOutcome solvePart(int lo, int hi) {
    std::vector<int> members;
    for (int sec = lo; sec < hi; ++sec)
      for (int i : sections_.members[size_t(sec)])
        if (offset_[size_t(i)] < 0 && sections_.first[size_t(i)] == sec) members.push_back(i);
    if (members.empty()) return SearchOutcome::kFound;
    // Rank this subproblem's buffers afresh: the section totals that the
    // preorder looks at now count only what is left to place.
    std::vector<int> ranked = preorderItems(items_, sections_, members, order_, unplaced_);
    if (noisy_) {
      std::normal_distribution<double> shift(0.0, 1.0);
      std::vector<std::pair<double, int>> keys(ranked.size());
      for (size_t r = 0; r < ranked.size(); ++r) keys[r] = {double(r) + shift(rng_), ranked[r]};
      std::sort(keys.begin(), keys.end());
      for (size_t r = 0; r < keys.size(); ++r) ranked[r] = keys[r].second;
    }
    std::vector<Candidate> candidates;
    candidates.reserve(ranked.size());
    for (size_t r = 0; r < ranked.size(); ++r) candidates.push_back({int(r), ranked[r]});
    std::stable_sort(candidates.begin(), candidates.end(), [&](const Candidate& x, const Candidate& y) {
      return minOffset_[size_t(x.item)] < minOffset_[size_t(y.item)];
    });
    return descend(lo, hi, members, candidates, 0, -1);
  }

  SearchOutcome descend(int lo, int hi, const std::vector<int>& members,
                        const std::vector<Candidate>& parent, int64_t lastOffset, int lastRank) {
    if ((++nodes_ > nodeLimit_ || !budget_->spend()) && !pauseForMore()) return SearchOutcome::kOutOfBudget;
    // The parent's order, less the placed item and those the placement
    // raised (marked with its stamp): the others keep their order, the
    // raised ones (often a thousand, all to the same top) are sorted apart
    // and merged in from the back.
    std::vector<Candidate> candidates(parent.size());
    raised_.clear();
    size_t open = 0;
    for (const Candidate& c : parent) {
      if (offset_[size_t(c.item)] >= 0) continue;
      if (raisedBy_[size_t(c.item)] == placements_) {
        raised_.push_back({minOffset_[size_t(c.item)], c.rank, c.item});
        continue;
      }
      candidates[open++] = c;
    }
    size_t total = open + raised_.size();
    candidates.resize(total);
    if (candidates.empty()) {
      for (int i : members) solution_[size_t(i)] = offset_[size_t(i)];
      return SearchOutcome::kFound;
    }
    std::sort(raised_.begin(), raised_.end(), [](const Raised& x, const Raised& y) {
      return x.offset < y.offset || (x.offset == y.offset && x.rank < y.rank);
    });
    for (size_t out = total, kept = open, up = raised_.size(); up > 0;) {
      const Raised& r = raised_[up - 1];
      if (kept > 0) {
        const Candidate& k = candidates[kept - 1];
        int64_t offset = minOffset_[size_t(k.item)];
        if (r.offset < offset || (r.offset == offset && r.rank < k.rank)) {
          candidates[--out] = candidates[--kept];
          continue;
        }
      }
      candidates[--out] = {r.rank, r.item};
      --up;
    }
    // Placing a buffer at `offset` leaves every section of [lo, hi) needing
    // at least offset + what was unplaced there before: its own sections get
    // the buffer's top as their floor and lose its size, the others keep
    // their unplaced amounts and floors at least `offset` high. So no
    // candidate at or above capacity - (the largest unplaced amount) can fit,
    // and the candidates come by offset: the first such one ends the node,
    // before any placement. Every candidate below it fits in the sections
    // that the placement leaves alone (the parent checked their floors), so
    // only the sections it changes need checking after placing.
    int64_t mostUnplaced = 0;
    for (int sec = lo; sec < hi; ++sec) mostUnplaced = std::max(mostUnplaced, unplaced_[size_t(sec)]);
    int64_t lowestTop = INT64_MAX;
    for (const Candidate& c : candidates)
      lowestTop = std::min(lowestTop, minOffset_[size_t(c.item)] + items_[size_t(c.item)].size);
    for (const Candidate& c : candidates) {
      const int64_t offset = minOffset_[size_t(c.item)];
      if (offset >= lowestTop) break;  // dominated: see the file comment
      if (offset + mostUnplaced > capacity_) break;
      if (offset < lastOffset || (offset == lastOffset && c.rank < lastRank)) continue;
      size_t floorMark = floorLog_.size(), offsetMark = offsetLog_.size();
      auto [changedLo, changedHi] = place(c.item, offset);
      changedLo = std::clamp(changedLo, lo, hi);
      changedHi = std::clamp(changedHi, changedLo, hi);
      SearchOutcome outcome = SearchOutcome::kInfeasible;
      if (fits(changedLo, changedHi, offset))
        outcome = afterPlacing(lo, hi, members, candidates, c, offset);
      unplace(c.item, floorMark, offsetMark);
      if (outcome != SearchOutcome::kInfeasible) return outcome;
    }
    return SearchOutcome::kInfeasible;
  }

  // Continues below a placement, splitting the problem where it falls apart.
  SearchOutcome afterPlacing(int lo, int hi, const std::vector<int>& members,
                             const std::vector<Candidate>& candidates, const Candidate& placed, int64_t offset) {
    int first = sections_.first[size_t(placed.item)], last = sections_.last[size_t(placed.item)];
    std::vector<int> splits;
    for (int b = first; b + 1 < last; ++b)
      if (--cuts_[size_t(b)] == 0) splits.push_back(b + 1);
    solution_[size_t(placed.item)] = offset;
    SearchOutcome outcome;
    if (splits.empty()) {
      outcome = descend(lo, hi, members, candidates, offset, placed.rank);
    } else {
      splits.push_back(hi);
      int from = lo;
      outcome = SearchOutcome::kFound;
      for (int to : splits) {
        outcome = solvePart(from, to);
        if (outcome != SearchOutcome::kFound) break;
        from = to;
      }
    }
    for (int b = first; b + 1 < last; ++b) ++cuts_[size_t(b)];
    return outcome;
  }

  // Places `item`; returns the run of sections whose floor or unplaced
  // amount it may have changed.
  [[gnu::noinline]] std::pair<int, int> place(int item, int64_t offset) {
    const Item& it = items_[size_t(item)];
    offset_[size_t(item)] = offset;
    int64_t top = offset + it.size;
    ++placements_;
    // Every raised buffer overlaps `item`, so the sections they cover form
    // one run around `item`'s own.
    int touchedLo = INT32_MAX, touchedHi = -1;
    for (int o : overlaps_[size_t(item)]) {
      if (offset_[size_t(o)] >= 0) continue;
      int64_t raised = alignUp(top, items_[size_t(o)].align);
      if (minOffset_[size_t(o)] >= raised) continue;
      offsetLog_.push_back({o, minOffset_[size_t(o)]});
      minOffset_[size_t(o)] = raised;
      raisedBy_[size_t(o)] = placements_;
      touchedLo = std::min(touchedLo, sections_.first[size_t(o)]);
      touchedHi = std::max(touchedHi, sections_.last[size_t(o)]);
    }
    const int first = sections_.first[size_t(item)], last = sections_.last[size_t(item)];
    saveFloors(first, last);
    std::fill(floor_.begin() + first, floor_.begin() + last, top);
    for (int sec = first; sec < last; ++sec) {
      unplaced_[size_t(sec)] -= it.size;
      closeSlot(item, sec);
    }
    for (int sec = touchedLo; sec < touchedHi; ++sec) raiseToLowestFree(sec);
    return {std::min(first, touchedLo), std::max(last, touchedHi)};
  }

  // No unplaced item of a section can go below the lowest offset any of
  // them can take, so that is the section's floor too. Raising it only
  // matters if it makes the section overflow the capacity (now or later:
  // what is unplaced only shrinks), so the scan stops at the first item low
  // enough to rule that out.
  void raiseToLowestFree(int sec) {
    int64_t floor = floor_[size_t(sec)];
    int64_t harmless = std::max(floor, capacity_ - unplaced_[size_t(sec)]);
    // The open item that answered last time usually still does: low
    // enough, and not placed since (a dense core's sections hold thousands
    // of open items, which the scan below would otherwise pass again).
    int seen = witness_[size_t(sec)];
    if (seen >= 0 && offset_[size_t(seen)] < 0 && minOffset_[size_t(seen)] <= harmless) return;
    const int* open = open_[size_t(sec)].data();
    int count = openCount_[size_t(sec)];
    int at = 0;
    int64_t lowest = lowestOpenOffset(open, count, harmless, &at);
    if (lowest <= harmless) {
      witness_[size_t(sec)] = open[at];
      return;
    }
    if (lowest != INT64_MAX && lowest > floor) {
      saveFloors(sec, sec + 1);
      floor_[size_t(sec)] = lowest;
    }
  }

  // The lowest minOffset_ of the first `count` items of `open`, or any
  // value <= `harmless` as soon as one is found. Out of line, so that the
  // running minimum stays in a register (inlined into descend() it was kept
  // in memory, a store-to-load chain through every item).
  // `*at` is where it stopped.
  [[gnu::noinline]] int64_t lowestOpenOffset(const int* open, int count, int64_t harmless, int* at) const {
    const int64_t* minOffset = minOffset_.data();
    int64_t lowest = INT64_MAX;
    int k = 0;
    for (; k < count; ++k)
      if ((lowest = std::min(lowest, minOffset[open[k]])) <= harmless) break;
    *at = k;
    return lowest;
  }

  void unplace(int item, size_t floorMark, size_t offsetMark) {
    while (floorLog_.size() > floorMark) {
      // Runs come back in the reverse order they were saved in.
      auto [first, count] = floorLog_.back();
      floorLog_.pop_back();
      std::copy(floorValues_.end() - count, floorValues_.end(), floor_.begin() + first);
      floorValues_.resize(floorValues_.size() - size_t(count));
    }
    while (offsetLog_.size() > offsetMark) {
      minOffset_[size_t(offsetLog_.back().index)] = offsetLog_.back().value;
      offsetLog_.pop_back();
    }
    const Item& it = items_[size_t(item)];
    for (int sec = sections_.first[size_t(item)]; sec < sections_.last[size_t(item)]; ++sec) {
      unplaced_[size_t(sec)] += it.size;
      ++openCount_[size_t(sec)];  // `item` is still just past the open ones
    }
    offset_[size_t(item)] = -1;
  }

  // Every later placement is at `offset` or above, so each section needs at
  // least max(floor, offset) plus what is still unplaced in it.
  bool fits(int lo, int hi, int64_t offset) const {
    for (int sec = lo; sec < hi; ++sec)
      if (std::max(floor_[size_t(sec)], offset) + unplaced_[size_t(sec)] > capacity_) return false;
    return true;
  }

  // At the node limit or out of budget: waits, paused, for more (a higher
  // limit and a budget with nodes left, maybe another one). False if there
  // is none to wait for (no fiber, or the fiber is being destroyed).
  bool pauseForMore() {
    while (fiber_ && fiber_->pause())
      if (nodes_ <= nodeLimit_ && budget_->spend()) return true;
    return false;
  }

  int& slotOf(int item, int sec) {
    return slot_[slotBase_[size_t(item)] + size_t(sec - sections_.first[size_t(item)])];
  }

  // Moves `item` just past the open items of `sec`. Unplacing runs in the
  // reverse order of placing, so reopening is a count increment.
  void closeSlot(int item, int sec) {
    std::vector<int>& open = open_[size_t(sec)];
    int last = --openCount_[size_t(sec)], at = slotOf(item, sec);
    int other = open[size_t(last)];
    std::swap(open[size_t(at)], open[size_t(last)]);
    slotOf(other, sec) = at;
    slotOf(item, sec) = last;
  }

  struct Change {
    int index;
    int64_t value;
  };

  // Saves floor_[first, last) as one run, to be put back by unplace().
  void saveFloors(int first, int last) {
    if (first >= last) return;
    floorLog_.push_back({first, last - first});
    floorValues_.insert(floorValues_.end(), floor_.begin() + first, floor_.begin() + last);
  }

  const std::vector<Item>& items_;
  const Sections& sections_;
  int64_t capacity_;
  Budget* budget_ = nullptr;
  const std::vector<std::vector<int>>& overlaps_;
  std::vector<int64_t> offset_, minOffset_, solution_;
  std::vector<int64_t> floor_, unplaced_;
  std::vector<int> cuts_;
  std::vector<std::vector<int>> open_;
  std::vector<int> openCount_, slot_;
  std::vector<int> witness_;  // per section: an open item found low enough (a hint, checked before use)
  std::vector<size_t> slotBase_;
  std::vector<std::pair<int, int>> floorLog_;  // runs (first section, count) of floorValues_
  std::vector<int64_t> floorValues_;
  std::vector<Change> offsetLog_;
  std::vector<Raised> raised_;  // descend()'s scratch, read only before it recurses
  // Placements so far, and for each buffer the placement that last raised
  // it: the buffers a node's child finds raised are those of its placement.
  uint64_t placements_ = 0;
  std::vector<uint64_t> raisedBy_;
  int64_t nodeLimit_ = 0, nodes_ = 0;
  Preorder order_ = Preorder::TotalLengthArea;
  bool noisy_ = false;
  std::mt19937_64 rng_;
  Fiber* fiber_ = nullptr;
};

}  // namespace

SearchOutcome searchWithin(const std::vector<Item>& items, const Sections& sections,
                           int64_t capacity, Budget& budget, std::vector<int64_t>& offsets,
                           const std::vector<int64_t>* lowest) {
  return searchWithinAny(items, sections, {capacity}, budget, offsets, lowest);
}

SearchOutcome searchWithinAny(const std::vector<Item>& items, const Sections& sections,
                              const std::vector<int64_t>& capacities, Budget& budget,
                              std::vector<int64_t>& offsets, const std::vector<int64_t>* lowest) {
  if (items.empty()) return SearchOutcome::kFound;
  std::vector<std::vector<int>> overlaps = overlapLists(items, sections);
  // One search per preorder and capacity, each on a fiber of its own,
  // taking turns with a doubling node limit: a preorder that suits the
  // instance usually finishes fast, so none may monopolize the budget. A
  // search paused at its limit goes on from there on its next turn, so no
  // node is spent twice (restarting from the root, as before fibers, spent
  // half of every search on ground already covered: MiniMalloc's D needs
  // 156k nodes that way to find a plan within 1025024 bytes, 76k with
  // fibers). A completed search with any preorder is a proof.
  // A search's state (a copy of the section member lists among it) is
  // built on its first turn: often the first preorder's first dive finds a
  // plan, and the others are never needed.
  struct Task {
    size_t capacity;  // index into `capacities`
    Preorder order;
    SearchOutcome outcome = SearchOutcome::kOutOfBudget;
    std::vector<int64_t> offsets;
    std::unique_ptr<CanonicalSearch> search;
    std::unique_ptr<Fiber> fiber;  // declared last: destroyed first, while its search still exists
  };
  std::vector<Task> tasks;
  for (Preorder order : kSearchPreorders)
    for (size_t k = 0; k < capacities.size(); ++k) tasks.push_back({k, order});
  std::vector<bool> refuted(capacities.size(), false);
  for (int64_t limit = 2 * int64_t(items.size());; limit *= 2) {
    for (Task& t : tasks) {
      if (refuted[t.capacity]) continue;
      if (!t.search) {
        // `tasks` no longer grows, so the fiber may hold a reference to `t`.
        t.search = std::make_unique<CanonicalSearch>(items, sections, overlaps, capacities[t.capacity], lowest);
        t.fiber = std::make_unique<Fiber>([&t] { t.outcome = t.search->run(t.order, t.fiber.get(), t.offsets); });
      }
      t.search->allow(limit, &budget);
      if (t.fiber->resume()) {
        if (t.outcome == SearchOutcome::kFound) {
          offsets = std::move(t.offsets);
          return SearchOutcome::kFound;
        }
        // Out of budget, a search on a fiber pauses; it ends only so when
        // its fiber is being destroyed.
        if (t.outcome != SearchOutcome::kInfeasible) return SearchOutcome::kOutOfBudget;
        if (t.capacity == 0) return SearchOutcome::kInfeasible;
        refuted[t.capacity] = true;
      }
      if (budget.exhausted()) return SearchOutcome::kOutOfBudget;
    }
  }
}

namespace {
// The Luby sequence 1, 1, 2, 1, 1, 2, 4, 1, ...: restart limits whose total
// is within a log factor of the best fixed limit, whatever that is.
int64_t luby(int64_t i) {
  for (int64_t k = 1;; ++k) {
    int64_t full = (int64_t(1) << k) - 1;
    if (i == full) return int64_t(1) << (k - 1);
    if (i < full) return luby(i - (full >> 1));
  }
}
}  // namespace

SearchOutcome searchWithRestarts(const std::vector<Item>& items, const Sections& sections, int64_t capacity,
                                 Budget& budget, std::vector<int64_t>& offsets, uint64_t seed,
                                 const std::atomic<int64_t>* supersededAt) {
  if (items.empty()) return SearchOutcome::kFound;
  std::vector<std::vector<int>> overlaps = overlapLists(items, sections);
  const int64_t unit = 2 * int64_t(items.size());
  // One search state for every restart: a run that ends (found, refuted or
  // out of nodes) leaves it as it found it.
  CanonicalSearch search(items, sections, overlaps, capacity, nullptr);
  for (int64_t run = 1; !budget.exhausted(); ++run) {
    if (supersededAt && supersededAt->load(std::memory_order_relaxed) <= capacity) break;
    int64_t limit = luby(run);
    search.allow(limit > INT64_MAX / unit ? INT64_MAX : limit * unit, &budget);
    Preorder order = kSearchPreorders[size_t(run) % std::size(kSearchPreorders)];
    SearchOutcome outcome = search.run(order, nullptr, offsets, seed + uint64_t(run) * 0x9e3779b97f4a7c15ull);
    if (outcome != SearchOutcome::kOutOfBudget) return outcome;
  }
  return SearchOutcome::kOutOfBudget;
}

}  // namespace neuroncc::planner
