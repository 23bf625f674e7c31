#include "race_check.h"

#include <algorithm>
#include <array>
#include <functional>
#include <iterator>
#include <map>
#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"
#include "access_history.h"
#include "device_model.h"
#include "neff_format.h"

namespace neuroncc::neff {
namespace {

using Region = OnChipRegion;
constexpr uint32_t Q = kMaxQueues;
// The most regions FootprintOf adds: an activation or tensor-scalar reads in0
// and writes out, and may also read a per-partition scale (in1) and bias (in2)
// and write a per-partition sum (accum).
constexpr int kMaxRegions = 5;

Region Whole(const TileRef& t, bool write) {
  return {write, t.space(), t.start_partition(), t.start_partition() + t.partitions(),
          t.byte_offset(), t.byte_offset() + TileSpanBytes(t)};
}

// Only element 0 of every partition (per-partition scalars and results).
Region First(const TileRef& t, bool write) {
  return {write, t.space(), t.start_partition(), t.start_partition() + t.partitions(),
          t.byte_offset(), t.byte_offset() + DTypeSize(t.dtype())};
}

// An instruction's footprint without allocating: at most kMaxRegions regions.
struct Footprint {
  std::array<Region, kMaxRegions> r;
  int n = 0;
  void Add(const Region& x) { r[size_t(n++)] = x; }
  const Region* begin() const { return r.data(); }
  const Region* end() const { return r.data() + n; }
};

Footprint FootprintOf(const Instruction& i) {
  Footprint f;
  switch (i.opcode()) {
    case DMA_LOAD:
    case DMA_GATHER: f.Add(Whole(i.out(), true)); break;  // reads only HBM
    case DMA_STORE: f.Add(Whole(i.in0(), false)); break;
    case TENSOR_TENSOR:
      f.Add(Whole(i.in0(), false));
      f.Add(Whole(i.in1(), false));
      f.Add(Whole(i.out(), true));
      break;
    case TENSOR_SCALAR:
    case ACTIVATION:
      f.Add(Whole(i.in0(), false));
      f.Add(Whole(i.out(), true));
      if (i.has_in1()) f.Add(First(i.in1(), false));
      if (i.has_in2()) f.Add(First(i.in2(), false));
      if (i.has_accum()) f.Add(First(i.accum(), true));
      break;
    case TENSOR_REDUCE:
      f.Add(Whole(i.in0(), false));
      f.Add(First(i.out(), true));
      break;
    case MATMUL:
      f.Add(Whole(i.in0(), false));
      f.Add(Whole(i.in1(), false));
      f.Add(Whole(i.out(), true));
      if (i.accumulate()) f.Add(Whole(i.out(), false));  // read-modify-write
      break;
    case TRANSPOSE:
      f.Add(Whole(i.in0(), false));
      f.Add(Whole(i.out(), true));
      break;
    case TENSOR_SELECT:
      f.Add(Whole(i.in0(), false));
      f.Add(Whole(i.in1(), false));
      f.Add(Whole(i.in2(), false));
      f.Add(Whole(i.out(), true));
      break;
    case IOTA: f.Add(Whole(i.out(), true)); break;
    default: break;
  }
  return f;
}

bool Empty(const Region& r) { return r.p0 >= r.p1 || r.b0 >= r.b1; }  // touches nothing

// The first conflicting pair of regions (a's regions in order, then b's).
bool Conflict(const Footprint& a, const Footprint& b, const Region** ra, const Region** rb) {
  for (const Region& x : a)
    for (const Region& y : b)
      if ((x.write || y.write) && x.space == y.space && x.p0 < y.p1 && y.p0 < x.p1 && x.b0 < y.b1 &&
          y.b0 < x.b1 && !Empty(x) && !Empty(y)) {
        *ra = &x;
        *rb = &y;
        return true;
      }
  return false;
}

// Records that the instruction at position `pos` of queue `q`, whose vector
// clock is `seen`, reads or writes bytes [b0, b1) of this history's
// partitions (positions are stored + 1), and ORs into *racy the queues whose
// latest conflicting access there it has not seen (each one a race with it,
// perhaps with earlier ones of that queue too).
void Access(AccessHistory& h, uint64_t b0, uint64_t b1, bool write, uint32_t q, uint32_t pos,
            const std::array<uint32_t, Q>& seen, uint32_t* racy) {
  h.Update(b0, b1, [&](QueueAccesses& s) {
    // Unordered: position >= seen[r], i.e. stored position + 1 > seen[r].
    for (uint32_t r = 0; r < Q; ++r)
      if (r != q && (s.write[r] > seen[r] || (write && s.read[r] > seen[r]))) *racy |= 1u << r;
    (write ? s.write : s.read)[q] = pos + 1;
  });
}

}  // namespace

std::vector<Region> OnChipFootprint(const Instruction& i) {
  Footprint f = FootprintOf(i);
  return std::vector<Region>(f.begin(), f.end());
}

bool SemaphoreReplayOrder(const Kernel& k, std::vector<uint32_t>* order) {
  const size_t n = size_t(k.instructions_size());
  order->reserve(order->size() + n);
  const size_t start = order->size();
  std::vector<std::vector<uint32_t>> queue(Q);
  for (uint32_t i = 0; i < n; ++i) {
    const Instruction& inst = k.instructions(int(i));
    uint32_t q = QueueIndex(inst.engine(), inst.queue());
    if (q >= Q) return false;
    queue[q].push_back(i);
  }
  // next[q]: q's instructions issued so far (its semaphore). A queue whose
  // head cannot issue is parked on the one queue and count it waits for
  // (waits already met stay met: cursor[q] skips them), and woken once that
  // count is reached. Each wait is passed once and parks at most once.
  std::vector<uint32_t> next(Q, 0);
  std::vector<int> cursor(Q, 0);
  using Parked = std::pair<uint32_t, uint32_t>;  // (count, waiting queue)
  std::vector<std::priority_queue<Parked, std::vector<Parked>, std::greater<Parked>>> parked(Q);
  std::vector<uint32_t> runnable;
  for (uint32_t q = Q; q-- > 0;)
    if (!queue[q].empty()) runnable.push_back(q);
  while (!runnable.empty()) {
    const uint32_t q = runnable.back();
    runnable.pop_back();
    while (next[q] < queue[q].size()) {
      const Instruction& inst = k.instructions(int(queue[q][next[q]]));
      int& c = cursor[q];
      auto met = [&](const Wait& w) { return w.queue() < Q && next[w.queue()] >= w.count(); };
      while (c < inst.waits_size() && met(inst.waits(c))) ++c;
      if (c < inst.waits_size()) {
        const Wait& w = inst.waits(c);
        // A wait on a queue or count that does not exist is never met.
        if (w.queue() < Q && w.count() <= queue[w.queue()].size()) parked[w.queue()].push({w.count(), q});
        break;
      }
      order->push_back(queue[q][next[q]]);
      ++next[q];
      c = 0;
      auto& p = parked[q];
      while (!p.empty() && p.top().first <= next[q]) {
        runnable.push_back(p.top().second);
        p.pop();
      }
    }
  }
  return order->size() - start == n;
}

// The search, FastTrack-style. Instructions are visited in the semaphore
// replay order, a topological order of happens-before: when instruction b is
// visited, everything ordered before it has been visited, so each racing
// pair is found when its later-visited instruction is.
//
// The partition axis is cut into the elementary intervals between all
// regions' partition boundaries in the kernel (usually 1-3; at most 128 for
// verified kernels), so that every region covers whole intervals; per
// (memory space, interval), an AccessHistory keeps for every byte the latest
// writer and reader of each queue. When b touches bytes written by queue r
// (or read by r, if b writes), only the latest such access on r needs a
// check: if b has seen it (seen[b][r] > its position) it has seen every
// earlier one of r too (a queue runs in order); if not, that is a race. The
// check is exact: the maps only decide which queues to look at, and then
// the instructions of r that b has not seen and that were visited before b
// (positions [seen[b][r], issued so far)) are tested against b's footprint
// directly, which yields every race of b with r (at least one).
//
// Cost, n instructions: replay O(n + waits * log queues); vector clocks
// O(queues) per instruction and per wait; each footprint region costs, per
// elementary interval it covers, O(log S + k * queues) for a map of S
// segments of which it overlaps k. Usual kernels (tiles reused at the same
// offsets, few partition boundaries) have k ~ 1 and a few intervals:
// O(n log n) in all. Worst case: a region covers at most 128 intervals (one
// per partition), and k is at most the number of distinct tile byte
// boundaries inside the region's bytes, so never more than the bytes of a
// partition (neighbours with equal histories are merged): O(n * 128 *
// (log n + K * queues)) with K that fragmentation, a constant set by the
// device geometry and the tile layout, not by n. Reporting: a queue is
// scanned (at most n instructions, each tested against b) only when it
// holds at least one race with b, and the search stops after `limit` races,
// so O(limit * n) more at worst and nothing for a race-free kernel. Memory:
// O(n) plus one vector clock per instruction that a wait names.
namespace {
absl::StatusOr<std::vector<SbufRace>> SearchRaces(const Kernel& k, size_t limit, uint64_t budget);
}  // namespace

std::vector<SbufRace> FindSbufRaces(const Kernel& k, size_t limit) {
  absl::StatusOr<std::vector<SbufRace>> races = SearchRaces(k, limit, UINT64_MAX);
  return races.ok() ? *std::move(races) : std::vector<SbufRace>{};
}

absl::StatusOr<std::vector<SbufRace>> CheckSbufRaces(const Kernel& k, size_t limit) {
  return SearchRaces(k, limit, RaceCheckBudget(uint64_t(k.instructions_size())));
}

namespace {

absl::StatusOr<std::vector<SbufRace>> SearchRaces(const Kernel& k, size_t limit, uint64_t budget) {
  const size_t n = size_t(k.instructions_size());
  std::vector<SbufRace> races;
  if (limit == 0 || n == 0) return races;
  std::vector<uint32_t> order;
  if (!SemaphoreReplayOrder(k, &order)) return races;  // the verifier refuses it

  // Per queue, its instructions in program order; per instruction, its queue
  // and position.
  std::vector<std::vector<uint32_t>> queue(Q);
  std::vector<uint8_t> qof(n);
  std::vector<uint32_t> pos(n);
  for (uint32_t i = 0; i < n; ++i) {
    const Instruction& inst = k.instructions(int(i));
    qof[i] = uint8_t(QueueIndex(inst.engine(), inst.queue()));
    pos[i] = uint32_t(queue[qof[i]].size());
    queue[qof[i]].push_back(i);
  }
  // Vector clocks (seen[q]: how many of q's instructions have completed
  // before the instruction starts) are kept for the instruction being
  // visited, the latest visited of each queue and the instructions that waits
  // name; no other is ever looked up.
  constexpr uint32_t kNone = ~0u;
  std::vector<uint32_t> slot(n, kNone);
  std::vector<std::array<uint32_t, Q>> clocks;
  for (const Instruction& inst : k.instructions())
    for (const Wait& w : inst.waits())
      if (w.count() > 0) {
        uint32_t& s = slot[queue[w.queue()][w.count() - 1]];  // exists: the replay completed
        if (s == kNone) {
          s = uint32_t(clocks.size());
          clocks.emplace_back();
        }
      }
  // Elementary partition intervals and memory spaces.
  std::vector<uint32_t> bounds;
  std::vector<MemorySpace> spaces;
  {
    std::vector<bool> small(257, false);  // verified kernels: partitions <= 128
    for (const Instruction& inst : k.instructions())
      for (const Region& r : FootprintOf(inst)) {
        if (Empty(r)) continue;
        for (uint32_t p : {r.p0, r.p1})
          if (p < small.size())
            small[p] = true;
          else
            bounds.push_back(p);
        if (std::find(spaces.begin(), spaces.end(), r.space) == spaces.end()) spaces.push_back(r.space);
      }
    for (uint32_t p = 0; p < small.size(); ++p)
      if (small[p]) bounds.push_back(p);
    std::sort(bounds.begin(), bounds.end());
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  }
  const size_t intervals = bounds.empty() ? 0 : bounds.size() - 1;
  auto interval = [&](uint32_t p) {  // p is a boundary
    return size_t(std::lower_bound(bounds.begin(), bounds.end(), p) - bounds.begin());
  };
  std::vector<AccessHistory> maps(spaces.size() * intervals);

  uint64_t visited = 0;
  std::array<std::array<uint32_t, Q>, Q> latest{};  // the clock of each queue's latest visited
  std::vector<uint32_t> issued(Q, 0);
  std::vector<std::pair<uint32_t, uint32_t>> found;
  for (uint32_t b : order) {
    const Instruction& inst = k.instructions(int(b));
    const uint32_t q = qof[b];
    std::array<uint32_t, Q> seen = latest[q];
    seen[q] = std::max(seen[q], pos[b]);  // the queue runs one instruction at a time
    for (const Wait& w : inst.waits()) {
      if (w.count() == 0) continue;
      const std::array<uint32_t, Q>& before = clocks[slot[queue[w.queue()][w.count() - 1]]];
      for (uint32_t r = 0; r < Q; ++r) seen[r] = std::max(seen[r], before[r]);
      seen[w.queue()] = std::max(seen[w.queue()], w.count());
    }
    latest[q] = seen;
    if (slot[b] != kNone) clocks[slot[b]] = seen;

    const Footprint fb = FootprintOf(inst);
    uint32_t racy = 0;
    for (const Region& r : fb) {
      if (Empty(r)) continue;
      const size_t base = size_t(std::find(spaces.begin(), spaces.end(), r.space) - spaces.begin()) * intervals;
      for (size_t e = interval(r.p0), e1 = interval(r.p1); e < e1; ++e) {
        AccessHistory& h = maps[base + e];
        const uint64_t before = h.visited();
        Access(h, r.b0, r.b1, r.write, q, pos[b], seen, &racy);
        visited += h.visited() - before;
      }
    }
    if (visited > budget)
      return absl::InvalidArgumentError(absl::StrCat(
          "kernel '", k.name(), "': the SBUF/PSUM race check would need more than ", budget,
          " steps (", kRaceCheckBaseVisits, " + ", kRaceCheckVisitsPerInstruction,
          " per instruction): by instruction ", b, " its accesses had cut the on-chip bytes into pieces "
          "that every later access revisits; such a kernel is refused rather than checked in quadratic time"));
    ++issued[q];
    for (uint32_t r = 0; racy != 0 && r < Q; ++r) {
      if (!(racy & (1u << r))) continue;
      racy &= ~(1u << r);
      for (uint32_t p = seen[r]; p < issued[r]; ++p) {
        const uint32_t a = queue[r][p];
        const Region *ra, *rb;
        if (!Conflict(FootprintOf(k.instructions(int(a))), fb, &ra, &rb)) continue;
        found.emplace_back(std::min(a, b), std::max(a, b));
        if (found.size() == limit) break;
      }
      if (found.size() == limit) break;
    }
    if (found.size() == limit) break;
  }

  std::sort(found.begin(), found.end());
  for (auto [a, b] : found) {
    const Footprint fa = FootprintOf(k.instructions(int(a))), fb = FootprintOf(k.instructions(int(b)));
    const Region *ra, *rb;
    Conflict(fa, fb, &ra, &rb);
    races.push_back({a, b, DescribeRace(k, a, qof[a], *ra, b, qof[b], *rb)});
  }
  return races;
}

}  // namespace

std::string DescribeRace(const Kernel& k, uint32_t a, uint32_t qa, const OnChipRegion& ra, uint32_t b,
                         uint32_t qb, const OnChipRegion& rb) {
  const Instruction& ia = k.instructions(int(a));
  const Instruction& ib = k.instructions(int(b));
  return absl::StrCat("kernel '", k.name(), "': instruction ", a, " (", OpcodeName(ia.opcode()), " on ",
                      QueueName(qa), ", ", ra.write ? "writes" : "reads", ") and instruction ", b, " (",
                      OpcodeName(ib.opcode()), " on ", QueueName(qb), ", ", rb.write ? "writes" : "reads",
                      ") both touch ", ra.space == PSUM ? "PSUM" : "SBUF", " partitions [",
                      std::max(ra.p0, rb.p0), ", ", std::min(ra.p1, rb.p1), ") bytes [", std::max(ra.b0, rb.b0),
                      ", ", std::min(ra.b1, rb.b1), ") and no semaphore wait orders them");
}

}  // namespace neuroncc::neff
