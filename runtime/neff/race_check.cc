#include "race_check.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"
#include "device_model.h"
#include "neff_format.h"

namespace neuroncc::neff {
namespace {

using Region = OnChipRegion;

Region Whole(const TileRef& t, bool write) {
  return {write, t.space(), t.start_partition(), t.start_partition() + t.partitions(),
          t.byte_offset(), t.byte_offset() + uint64_t(t.num_elements()) * DTypeSize(t.dtype())};
}

// Only element 0 of every partition (per-partition scalars and results).
Region First(const TileRef& t, bool write) {
  return {write, t.space(), t.start_partition(), t.start_partition() + t.partitions(),
          t.byte_offset(), t.byte_offset() + DTypeSize(t.dtype())};
}

}  // namespace

std::vector<Region> OnChipFootprint(const Instruction& i) {
  switch (i.opcode()) {
    case DMA_LOAD:
    case DMA_GATHER: return {Whole(i.out(), true)};  // reads only HBM
    case DMA_STORE: return {Whole(i.in0(), false)};
    case TENSOR_TENSOR: return {Whole(i.in0(), false), Whole(i.in1(), false), Whole(i.out(), true)};
    case TENSOR_SCALAR:
    case ACTIVATION: {
      std::vector<Region> r = {Whole(i.in0(), false), Whole(i.out(), true)};
      if (i.has_in1()) r.push_back(First(i.in1(), false));
      if (i.has_accum()) r.push_back(First(i.accum(), true));
      return r;
    }
    case TENSOR_REDUCE: return {Whole(i.in0(), false), First(i.out(), true)};
    case MATMUL: {
      std::vector<Region> r = {Whole(i.in0(), false), Whole(i.in1(), false), Whole(i.out(), true)};
      if (i.accumulate()) r.push_back(Whole(i.out(), false));  // read-modify-write
      return r;
    }
    case TRANSPOSE: return {Whole(i.in0(), false), Whole(i.out(), true)};
    case TENSOR_SELECT:
      return {Whole(i.in0(), false), Whole(i.in1(), false), Whole(i.in2(), false),
              Whole(i.out(), true)};
    case IOTA: return {Whole(i.out(), true)};
    default: return {};
  }
}

namespace {

bool Conflict(const std::vector<Region>& a, const std::vector<Region>& b, const Region** ra,
              const Region** rb) {
  for (const Region& x : a)
    for (const Region& y : b)
      if ((x.write || y.write) && x.space == y.space && x.p0 < y.p1 && y.p0 < x.p1 && x.b0 < y.b1 && y.b0 < x.b1) {
        *ra = &x;
        *rb = &y;
        return true;
      }
  return false;
}

}  // namespace

std::vector<SbufRace> FindSbufRaces(const Kernel& k, size_t limit, size_t max_instructions) {
  const size_t n = size_t(k.instructions_size());
  std::vector<SbufRace> races;
  if (n > max_instructions) return races;
  constexpr uint32_t Q = kMaxQueues;
  // Per queue, its instructions in program order; per instruction, its queue
  // and position.
  std::vector<std::vector<uint32_t>> queue(Q);
  std::vector<uint32_t> qof(n), pos(n);
  for (uint32_t i = 0; i < n; ++i) {
    const Instruction& inst = k.instructions(int(i));
    qof[i] = QueueIndex(inst.engine(), inst.queue());
    pos[i] = uint32_t(queue[qof[i]].size());
    queue[qof[i]].push_back(i);
  }
  // seen[i][q]: how many of q's instructions have completed before i starts.
  // Computed in an order where waits are resolved first (the semaphore
  // replay of the verifier); a wait that can never be met leaves the kernel
  // to the verifier, which refuses it.
  std::vector<std::array<uint32_t, Q>> seen(n);
  std::vector<size_t> next(Q, 0);
  for (size_t remaining = n; remaining > 0;) {
    bool progressed = false;
    for (uint32_t q = 0; q < Q; ++q) {
      while (next[q] < queue[q].size()) {
        uint32_t i = queue[q][next[q]];
        const Instruction& inst = k.instructions(int(i));
        bool ready = std::all_of(inst.waits().begin(), inst.waits().end(), [&](const Wait& w) {
          return w.queue() < Q && next[w.queue()] >= w.count();
        });
        if (!ready) break;
        std::array<uint32_t, Q> s{};
        if (pos[i] > 0) s = seen[queue[q][pos[i] - 1]];
        s[q] = std::max(s[q], pos[i]);  // the queue runs one instruction at a time
        for (const Wait& w : inst.waits()) {
          if (w.count() == 0) continue;
          const std::array<uint32_t, Q>& before = seen[queue[w.queue()][w.count() - 1]];
          for (uint32_t r = 0; r < Q; ++r) s[r] = std::max(s[r], before[r]);
          s[w.queue()] = std::max(s[w.queue()], w.count());
        }
        seen[i] = s;
        ++next[q];
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) return races;
  }
  auto ordered = [&](uint32_t a, uint32_t b) {  // a completes before b starts
    return seen[b][qof[a]] > pos[a];
  };
  std::vector<std::vector<Region>> fp(n);
  for (uint32_t i = 0; i < n; ++i) fp[i] = OnChipFootprint(k.instructions(int(i)));
  for (uint32_t a = 0; a < n && races.size() < limit; ++a) {
    for (uint32_t b = a + 1; b < n && races.size() < limit; ++b) {
      if (qof[a] == qof[b]) continue;
      const Region *ra, *rb;
      if (!Conflict(fp[a], fp[b], &ra, &rb) || ordered(a, b) || ordered(b, a)) continue;
      const Instruction& ia = k.instructions(int(a));
      const Instruction& ib = k.instructions(int(b));
      races.push_back(
          {a, b,
           absl::StrCat("kernel '", k.name(), "': instruction ", a, " (", OpcodeName(ia.opcode()), " on ",
                        QueueName(qof[a]), ", ", ra->write ? "writes" : "reads", ") and instruction ", b,
                        " (", OpcodeName(ib.opcode()), " on ", QueueName(qof[b]), ", ",
                        rb->write ? "writes" : "reads", ") both touch ",
                        ra->space == PSUM ? "PSUM" : "SBUF", " partitions [",
                        std::max(ra->p0, rb->p0), ", ", std::min(ra->p1, rb->p1), ") bytes [",
                        std::max(ra->b0, rb->b0), ", ", std::min(ra->b1, rb->b1),
                        ") and no semaphore wait orders them")});
    }
  }
  return races;
}

}  // namespace neuroncc::neff
