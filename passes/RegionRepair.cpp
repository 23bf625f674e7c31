//===- RegionRepair.cpp - improve a large plan one time window at a time ---===//
//
// On instances too large for the exact search, a heuristic plan's arena is
// set by a few bad spots in time. Each spot is searched again: take the
// buffers live in a window of sections around it, add every buffer stacked
// above any of them that overlaps it in time (transitively), and let the
// exact search re-place that set above the fixed buffers beneath it, within
// the target height. Freeing whole "upward closed" sets keeps the model
// exact: a fixed buffer is never above a free one it overlaps, so the fixed
// buffers act as per-buffer floors, which the canonical search handles.
// Windows grow when a small one cannot be repaired.
//
//===----------------------------------------------------------------------===//

#include <algorithm>

#include "passes/PlannerInternal.h"

namespace neuroncc::planner {
namespace {

// Buffers one repair may search. At 600, uniform in memplan_bench.py stays
// at 1.0127 of its bound however long the repair runs: its worst spot needs
// a larger set; at 1000 it reaches 1.0058 in 2 s.
constexpr size_t kMaxFree = 1000;
constexpr int kRadii[] = {2, 6, 16, 40};      // window half-widths, in sections

class Repairer {
 public:
  Repairer(const std::vector<Item>& items, const Sections& sections, std::vector<int64_t>& offsets)
      : items_(items), sections_(sections), offsets_(offsets),
        height_(size_t(sections.count), 0), freeMark_(items.size(), 0) {
    for (int s = 0; s < sections.count; ++s) refreshHeight(s);
  }

  bool repairAll(int64_t target, Budget& budget) {
    bool ok = true;
    for (int s = 0; s < sections_.count; ++s) {
      if (height_[size_t(s)] <= target) continue;
      bool repaired = false;
      for (int radius : kRadii) {
        // From the floor up first; if that set is too large (long-lived
        // buffers pull in everything above them), only the upper slabs.
        for (int64_t slab : {int64_t(0), target / 2, target / 4 * 3, target / 8 * 7}) {
          if (budget.exhausted()) return false;
          if (repairAround(s, radius, slab, target, budget)) {
            repaired = true;
            break;
          }
        }
        if (repaired) break;
      }
      if (!repaired) ok = false;  // keep repairing the others: each repair helps
    }
    return ok;
  }

 private:
  void refreshHeight(int s) {
    int64_t h = 0;
    for (int i : sections_.members[size_t(s)]) h = std::max(h, offsets_[size_t(i)] + items_[size_t(i)].size);
    height_[size_t(s)] = h;
  }

  // Window members reaching above `slab`, plus everything above them that
  // they overlap; false if the set grows past kMaxFree. Walking the buffers
  // bottom-up, one is free iff it is a seed or overlaps a free buffer below
  // it, which a tree over the sections answers without visiting pairs.
  bool collectFree(int lo, int hi, int64_t slab, std::vector<int>& free) {
    ++epoch_;
    free.clear();
    int64_t bottom = INT64_MAX;
    for (int s = lo; s < hi; ++s)
      for (int i : sections_.members[size_t(s)])
        if (offsets_[size_t(i)] + items_[size_t(i)].size > slab && freeMark_[size_t(i)] != epoch_) {
          freeMark_[size_t(i)] = epoch_;  // a seed
          bottom = std::min(bottom, offsets_[size_t(i)]);
        }
    if (bottom == INT64_MAX) return false;
    if (byOffsetStale_) {
      byOffset_.resize(items_.size());
      for (size_t i = 0; i < items_.size(); ++i) byOffset_[i] = int(i);
      std::sort(byOffset_.begin(), byOffset_.end(), [&](int a, int b) {
        return offsets_[size_t(a)] != offsets_[size_t(b)] ? offsets_[size_t(a)] < offsets_[size_t(b)] : a < b;
      });
      byOffsetStale_ = false;
    }
    auto from = std::lower_bound(byOffset_.begin(), byOffset_.end(), bottom,
                                 [&](int i, int64_t v) { return offsets_[size_t(i)] < v; });
    FloorTree covered(sections_.count);
    for (auto it = from; it != byOffset_.end(); ++it) {
      int g = *it, first = sections_.first[size_t(g)], last = sections_.last[size_t(g)];
      if (freeMark_[size_t(g)] != epoch_ && covered.maxOver(first, last) == 0) continue;
      freeMark_[size_t(g)] = epoch_;
      covered.raise(first, last, 1);
      free.push_back(g);
      if (free.size() > kMaxFree) return false;
    }
    return true;
  }

  bool repairAround(int s, int radius, int64_t slab, int64_t target, Budget& budget) {
    // The setup below visits every buffer: charge it as search nodes (one
    // per 64 buffers), or a node limit alone would not bound the attempts.
    budget.charge(1 + int64_t(items_.size()) / 64);
    if (budget.exhausted()) return false;
    int lo = std::max(0, s - radius), hi = std::min(sections_.count, s + radius + 1);
    std::vector<int> free;
    if (!collectFree(lo, hi, slab, free)) return false;
    // Every fixed buffer a free one overlaps lies under it (the free set is
    // closed upwards), so the highest such top is the free one's floor.
    FloorTree fixedTops(sections_.count);
    for (size_t g = 0; g < items_.size(); ++g)
      if (freeMark_[g] != epoch_)
        fixedTops.raise(sections_.first[g], sections_.last[g], offsets_[g] + items_[g].size);
    std::vector<Item> sub;
    std::vector<int64_t> lowest;
    sub.reserve(free.size());
    lowest.reserve(free.size());
    for (int f : free) {
      sub.push_back(items_[size_t(f)]);
      lowest.push_back(fixedTops.maxOver(sections_.first[size_t(f)], sections_.last[size_t(f)]));
    }
    Sections subSections = buildSections(sub);
    Budget part = budget.share(0.25);
    std::vector<int64_t> placed;
    SearchOutcome outcome = searchWithin(sub, subSections, target, part, placed, &lowest);
    budget.absorb(part);
    if (outcome != SearchOutcome::kFound) return false;
    int touchedLo = hi, touchedHi = lo;
    for (size_t k = 0; k < free.size(); ++k) {
      int f = free[k];
      offsets_[size_t(f)] = placed[k];
      touchedLo = std::min(touchedLo, sections_.first[size_t(f)]);
      touchedHi = std::max(touchedHi, sections_.last[size_t(f)]);
    }
    for (int sec = touchedLo; sec < touchedHi; ++sec) refreshHeight(sec);
    byOffsetStale_ = true;
    return true;
  }

  const std::vector<Item>& items_;
  const Sections& sections_;
  std::vector<int64_t>& offsets_;
  std::vector<int64_t> height_;
  std::vector<uint32_t> freeMark_;
  uint32_t epoch_ = 0;
  std::vector<int> byOffset_;  // items by offset, rebuilt after a repair
  bool byOffsetStale_ = true;
};

}  // namespace

bool repairPlan(const std::vector<Item>& items, const Sections& sections, int64_t target,
                Budget& budget, std::vector<int64_t>& offsets) {
  Repairer repairer(items, sections, offsets);
  return repairer.repairAll(target, budget);
}

}  // namespace neuroncc::planner
