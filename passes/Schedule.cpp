//===- Schedule.cpp - engines, DMA queues and semaphores ------------------===//
//
// Dependencies: two instructions conflict when one writes bytes the other
// reads or writes (SBUF: partition range x byte range from the memory plan;
// HBM: element range of the same tensor). A later instruction waits for every
// earlier conflicting one; per producer queue only the largest count matters,
// since a queue's semaphore counts completions in order.
//
// Placement: list scheduling with the shared device cost model
// (neff/device_model.h). Each instruction goes to the candidate engine
// or DMA queue where it would finish earliest given its dependencies; ties go
// to the first candidate. A tensor_scalar multiply or add may move to the
// scalar engine as an identity activation with scale or bias, which spreads
// elementwise work over two engines. Instructions are taken in the order
// their inputs become ready (program order on a tie), not in program order,
// and the kernel body is rewritten in that order.
//
//===----------------------------------------------------------------------===//

#include "device_model.h"
#include "passes/IsaProto.h"
#include "passes/Passes.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/bit.h"

#include <array>
#include <queue>
#include <map>
#include <optional>

namespace neuroncc {
#define GEN_PASS_DEF_SCHEDULE
#include "passes/Passes.h.inc"
}  // namespace neuroncc

using namespace mlir;

namespace neuroncc {
namespace {

struct Region {
  Value hbm;  // null for SBUF
  int64_t p0 = 0, p1 = 0, lo = 0, hi = 0;
  // HBM only, when rowStride > 0: the elements lie in columns [c0, c1) of
  // rows lo / rowStride .. (hi - 1) / rowStride of a row-major view with
  // rows of rowStride elements (a tile of a wider matrix); else anywhere in
  // [lo, hi).
  int64_t rowStride = 0, c0 = 0, c1 = 0;
  // HBM only, when runLength > 0: exactly the runs [first + i * runStride,
  // + runLength) for i < runCount (a transfer of runs, one per partition).
  int64_t first = 0, runStride = 0, runCount = 0, runLength = 0;
  // HBM only, when not empty: exactly the elements at `first` plus the
  // (stride, count) pairs of `pattern`, outermost first, each stride above
  // the reach of those inside it. Two transfers of the same pattern at
  // different offsets (the tiles of a copy whose dims interleave) overlap
  // only where the offsets differ by an element of the pattern's span.
  SmallVector<int64_t, 8> pattern;
  // Whether the pattern has no gaps (its elements fill [lo, hi)).
  bool dense() const {
    int64_t elements = 1;
    for (size_t k = 0; k < pattern.size(); k += 2) elements *= pattern[k + 1];
    return elements == hi - lo;
  }
  bool overlaps(const Region& o) const {
    if (hbm != o.hbm) return false;
    if (!hbm && (p1 <= o.p0 || o.p1 <= p0)) return false;
    if (!(lo < o.hi && o.lo < hi)) return false;
    if (hbm && !pattern.empty() && sameStrides(o)) return reaches(o, 0, o.first - first);
    // Patterns of other strides (a pad's rows of every plane, and rows of
    // a few planes between them): exact where one of them has few runs.
    if (hbm && !pattern.empty() && !o.pattern.empty())
      if (std::optional<bool> meet = patternsMeet(o)) return *meet;
    // Column tiles of the same rows are disjoint although their bounding
    // intervals interleave.
    if (hbm && rowStride > 0 && rowStride == o.rowStride && (c1 <= o.c0 || o.c1 <= c0)) return false;
    // So are runs at other strides that fall between each other (a cat's
    // padding rows, one per channel plane, and the rows of the planes).
    if (hbm && runLength > 0 && o.runLength > 0) return runsIntersect(o);
    return true;
  }
 private:
  // Whether `o`'s pattern has the same strides (its counts may differ: the
  // DMA pieces of one tile, a few partitions fewer in the last).
  bool sameStrides(const Region& o) const {
    if (pattern.size() != o.pattern.size()) return false;
    for (size_t k = 0; k < pattern.size(); k += 2)
      if (pattern[k] != o.pattern[k]) return false;
    return true;
  }
  // Whether d is a sum of (i_k - j_k) x stride_k over the pattern's dims
  // from k on (0 <= i_k < count_k here, 0 <= j_k < o's count_k). The
  // strides nest, so each dim's multiple leaves a few candidates for the
  // dims inside it.
  bool reaches(const Region& o, size_t k, int64_t d) const {
    if (k == pattern.size()) return d == 0;
    const int64_t stride = pattern[k], count = pattern[k + 1], otherCount = o.pattern[k + 1];
    int64_t innerHi = 0, innerLo = 0;  // the range of the sum over the dims inside
    for (size_t j = k + 2; j < pattern.size(); j += 2) {
      innerHi += (pattern[j + 1] - 1) * pattern[j];
      innerLo -= (o.pattern[j + 1] - 1) * pattern[j];
    }
    const int64_t lo = std::max(-(otherCount - 1), llvm::divideCeilSigned(d - innerHi, stride)),
                  hi = std::min(count - 1, llvm::divideFloorSigned(d - innerLo, stride));
    for (int64_t m = lo; m <= hi; ++m)
      if (reaches(o, k + 2, d - m * stride)) return true;
    return false;
  }
  // The runs of the pattern: its innermost dim where that is contiguous,
  // else single elements.
  int64_t runCountOfPattern() const {
    int64_t n = 1;
    for (size_t k = 0; k + 2 < pattern.size(); k += 2) n *= pattern[k + 1];
    return pattern[pattern.size() - 2] == 1 ? n : n * pattern.back();
  }
  // Whether an element of the pattern (dims from k on, from `base`) lies
  // in [x, x + length). The dims nest, so each dim leaves at most a few
  // indices whose elements can reach the interval.
  bool meetsInterval(size_t k, int64_t base, int64_t x, int64_t length) const {
    if (k == pattern.size()) return x <= base && base < x + length;
    const int64_t stride = pattern[k], count = pattern[k + 1];
    int64_t inner = 0;  // the reach of the dims inside
    for (size_t j = k + 2; j < pattern.size(); j += 2) inner += (pattern[j + 1] - 1) * pattern[j];
    const int64_t lo = std::max<int64_t>(0, llvm::divideCeilSigned(x - inner - base, stride));
    const int64_t hi = std::min(count - 1, llvm::divideFloorSigned(x + length - 1 - base, stride));
    for (int64_t i = lo; i <= hi; ++i)
      if (meetsInterval(k + 2, base + i * stride, x, length)) return true;
    return false;
  }
  // Whether two nested patterns share an element, checked run by run over
  // the one with fewer runs; nullopt where both have more than kMaxRuns.
  std::optional<bool> patternsMeet(const Region& o) const {
    constexpr int64_t kMaxRuns = 4096;
    const bool mine = runCountOfPattern() <= o.runCountOfPattern();
    const Region& a = mine ? *this : o;
    const Region& b = mine ? o : *this;
    if (a.runCountOfPattern() > kMaxRuns) return std::nullopt;
    const bool contiguous = a.pattern[a.pattern.size() - 2] == 1;
    const size_t dims = (contiguous ? a.pattern.size() - 2 : a.pattern.size()) / 2;
    const int64_t length = contiguous ? a.pattern.back() : 1;
    SmallVector<int64_t, 4> index(dims, 0);
    while (true) {
      int64_t x = a.first;
      for (size_t j = 0; j < dims; ++j) x += index[j] * a.pattern[2 * j];
      if (b.meetsInterval(0, b.first, x, length)) return true;
      size_t j = dims;
      while (j > 0 && ++index[j - 1] == a.pattern[2 * (j - 1) + 1]) index[--j] = 0;
      if (j == 0) return false;
    }
  }
  bool runsIntersect(const Region& o) const {
    const Region& a = runCount <= o.runCount ? *this : o;
    const Region& b = runCount <= o.runCount ? o : *this;
    for (int64_t i = 0; i < a.runCount; ++i) {
      const int64_t x = a.first + i * a.runStride;  // [x, x + a.runLength)
      if (b.runCount == 1) {
        if (b.first < x + a.runLength && x < b.first + b.runLength) return true;
        continue;
      }
      // b's runs j with first + j * stride < x + length and first + j * stride + b.length > x.
      int64_t jLo = std::max<int64_t>(llvm::divideFloorSigned(x - b.runLength - b.first, b.runStride) + 1, 0);
      int64_t jHi = std::min(llvm::divideFloorSigned(x + a.runLength - b.first - 1, b.runStride), b.runCount - 1);
      if (jLo <= jHi) return true;
    }
    return false;
  }
};

struct Access {
  SmallVector<Region, 3> reads, writes;
};

// On-chip tiles: SBUF and PSUM are separate memories; PSUM bytes are placed
// after a marker offset so the two never compare as overlapping.
constexpr int64_t kPsumRegionBase = int64_t(1) << 40;

Region tileRegion(Value tile, int64_t partStart = 0, int64_t parts = -1) {
  auto t = llvm::cast<MemRefType>(tile.getType());
  int64_t off = nc::tileByteOffset(tile) + (nc::isPsumTile(tile.getType()) ? kPsumRegionBase : 0);
  int64_t bytes = nc::tileSpanBytes(tile);
  return {Value(), partStart, partStart + (parts < 0 ? t.getDimSize(0) : parts), off, off + bytes};
}

Region hbmRegion(Value hbm, int64_t offset, ArrayRef<int64_t> ap) {
  int64_t lo = offset, hi = offset;
  for (size_t i = 0; i + 1 < ap.size(); i += 2) {
    int64_t span = (ap[i + 1] - 1) * ap[i];
    (span < 0 ? lo : hi) += span;
  }
  Region r{hbm, 0, 0, lo, hi + 1};
  // The pattern's dims by stride (unit counts dropped), if they nest.
  SmallVector<std::pair<int64_t, int64_t>, 6> dims;
  bool nested = true;
  for (size_t i = 0; i + 1 < ap.size(); i += 2) {
    if (ap[i + 1] == 1) continue;
    nested &= ap[i] > 0 && ap[i + 1] > 1;
    dims.push_back({ap[i], ap[i + 1]});
  }
  llvm::sort(dims, [](auto a, auto b) { return a.first > b.first; });
  int64_t reach = 0;
  for (auto it = dims.rbegin(); nested && it != dims.rend(); ++it) {
    nested &= it->first > reach;
    reach += (it->second - 1) * it->first;
  }
  if (nested && !dims.empty() && offset >= 0) {
    r.first = offset;
    for (auto [stride, count] : dims) r.pattern.append({stride, count});
  }
  if (ap.size() == 4 && ap[0] >= 0 && ap[1] >= 1 && ap[2] == 1 && ap[3] >= 1) {
    r.first = offset;
    r.runStride = ap[0];
    r.runCount = ap[0] == 0 ? 1 : ap[1];
    r.runLength = ap[3];
  }
  // [rows of stride S] x [C contiguous elements] that stay inside one row:
  // a rectangle of the row-major [.. x S] view.
  if (ap.size() == 4 && ap[0] > 0 && ap[2] == 1 && offset >= 0) {
    int64_t stride = ap[0], col = offset % ap[0], count = ap[3];
    if (col + count <= stride) {
      r.rowStride = stride;
      r.c0 = col;
      r.c1 = col + count;
    }
  }
  return r;
}

// The HBM regions of a transfer. Runs of partitions in a few segments (a
// transposed tile whose rows cross a batch: [partitions, segments, run]) are
// one region per segment, each exactly its runs; as one bounding interval
// they would overlap the transfers of the rows between, and every later
// transfer that waits for them would grow over them too (a chain of stores).
//
// Two partition dims ([planes, rows, run]: rows of several planes) are the
// same runs: one region per plane where there are few planes.
void addHbmRegions(SmallVectorImpl<Region>& regions, Value hbm, int64_t offset, ArrayRef<int64_t> ap,
                   int64_t partitionDims) {
  constexpr int64_t kMaxSegmentRegions = 8;
  if (ap.size() == 6 && partitionDims == 1 && ap[0] >= 0 && ap[1] >= 1 && ap[2] > 0 && ap[3] > 1 &&
      ap[3] <= kMaxSegmentRegions && ap[4] == 1 && ap[5] >= 1) {
    for (int64_t j = 0; j < ap[3]; ++j) regions.push_back(hbmRegion(hbm, offset + j * ap[2], {ap[0], ap[1], 1, ap[5]}));
    return;
  }
  if (partitionDims == 2 && ap.size() == 6 && ap[0] > 0 && ap[1] <= kMaxSegmentRegions && ap[2] >= 0 &&
      ap[4] == 1) {
    for (int64_t i = 0; i < ap[1]; ++i) regions.push_back(hbmRegion(hbm, offset + i * ap[0], {ap[2], ap[3], 1, ap[5]}));
    return;
  }
  regions.push_back(hbmRegion(hbm, offset, ap));
}

Access accessOf(Operation* op) {
  Access a;
  if (auto o = llvm::dyn_cast<nc::DmaLoadOp>(op)) {
    addHbmRegions(a.reads, o.getHbm(), o.getOffset(), o.getAp(), nc::partitionDims(o));
    a.writes.push_back(tileRegion(o.getTile(), o.getPartStart(), nc::dmaPartitions(o)));
  } else if (auto o = llvm::dyn_cast<nc::DmaGatherOp>(op)) {
    // Any row of the table may be read: the whole table, and the indices.
    auto table = llvm::cast<MemRefType>(o.getTable().getType());
    a.reads.push_back({o.getTable(), 0, 0, 0, table.getNumElements()});
    auto index = llvm::cast<MemRefType>(o.getIndex().getType());
    a.reads.push_back({o.getIndex(), 0, 0, 0, index.getNumElements()});
    a.writes.push_back(tileRegion(o.getTile(), o.getPartStart(), o.getAp()[1]));
  } else if (auto o = llvm::dyn_cast<nc::DmaStoreOp>(op)) {
    a.reads.push_back(tileRegion(o.getTile(), o.getPartStart(), nc::dmaPartitions(o)));
    addHbmRegions(a.writes, o.getHbm(), o.getOffset(), o.getAp(), nc::partitionDims(o));
  } else {
    // Compute instructions: operand 0 is the output tile, the rest are read,
    // except an activation's accumulator, which is written too.
    Value accum;
    if (auto act = llvm::dyn_cast<nc::ActivationOp>(op)) accum = act.getAccum();
    if (auto mm = llvm::dyn_cast<nc::MatmulOp>(op); mm && mm.getAccumulate())
      a.reads.push_back(tileRegion(mm.getOut()));
    a.writes.push_back(tileRegion(op->getOperand(0)));
    for (Value v : op->getOperands().drop_front())
      (v == accum ? a.writes : a.reads).push_back(tileRegion(v));
  }
  return a;
}

// Earlier accesses that later instructions may conflict with, per memory
// (SBUF, or one HBM tensor), ordered by start address. An access fully
// covered by a later write is retired: anything that conflicts with it also
// conflicts with that write, which is ordered after it. Tiles reuse the same
// bytes, so the SBUF lists stay short and finding dependencies is close to
// linear in the program length rather than quadratic. HBM regions are
// bounding intervals (refined to rectangles for tiles of a row-major matrix,
// so column tiles of the same rows do not conflict), so other strided
// patterns overlap each other without covering: there a write absorbs every access it
// waits for instead, and is recorded over the union of their intervals. A
// later access that conflicts with an absorbed one then conflicts with the
// write, which is ordered after it, so the lists stay short at the price of
// a few dependencies the exact patterns would not need.
class AccessTracker {
 public:
  // Instructions `access` must wait for.
  void dependencies(const Access& access, SmallVectorImpl<size_t>& deps) {
    for (const Region& r : access.reads) scanAll(memory(r).writes, r, deps, false, nullptr);
    grown.assign(access.writes.begin(), access.writes.end());
    for (auto [w, g] : llvm::zip(access.writes, grown)) {
      Region* absorb = w.hbm ? &g : nullptr;
      scanAll(memory(w).writes, w, deps, true, absorb);
      scanAll(memory(w).reads, w, deps, true, absorb);
    }
  }

  // After dependencies() for the same access.
  void record(const Access& access, size_t inst) {
    for (const Region& r : access.reads) insert(memory(r).reads, r, inst);
    for (const Region& w : grown) insert(memory(w).writes, w, inst);
  }

 private:
  // Entries are kept apart by length class (the bit length of hi - lo), each
  // class with the longest length it holds: a scan looks back from a region
  // only as far as each class reaches, so thousands of small tiles are not
  // walked because one large tile shares their memory.
  struct List {
    std::multimap<int64_t, std::pair<Region, size_t>> entries;
    int64_t maxLength = 0;
  };
  struct Memory {
    std::array<List, 64> reads, writes;
  };
  using Classes = std::array<List, 64>;

  static size_t lengthClass(const Region& r) { return size_t(llvm::bit_width(uint64_t(std::max<int64_t>(r.hi - r.lo, 0)))); }

  Memory& memory(const Region& r) { return memories[r.hbm.getAsOpaquePointer()]; }

  void scanAll(Classes& classes, const Region& r, SmallVectorImpl<size_t>& deps, bool retire, Region* absorb) {
    for (List& list : classes)
      if (!list.entries.empty()) scan(list, r, deps, retire, absorb);
  }

  static bool covers(const Region& outer, const Region& inner) {
    // A pattern with gaps covers another only if it is the same: a later
    // access between its elements conflicts with the other and not with it.
    if (outer.hbm && !outer.pattern.empty() && !outer.dense() &&
        !(outer.pattern == inner.pattern && outer.first == inner.first))
      return false;
    return outer.hbm == inner.hbm && outer.lo <= inner.lo && inner.hi <= outer.hi &&
           (outer.hbm || (outer.p0 <= inner.p0 && inner.p1 <= outer.p1));
  }

  // Appends the instructions in `list` overlapping `r`; with `retire`, drops
  // the entries `r` (a write) fully covers, and with `absorb` every entry it
  // overlaps, growing *absorb over them.
  void scan(List& classList, const Region& r, SmallVectorImpl<size_t>& deps, bool retire, Region* absorb) {
    auto& list = classList.entries;
    int64_t reach = classList.maxLength;
    auto it = list.lower_bound(r.hi);
    while (it != list.begin()) {
      --it;
      if (it->first + reach <= r.lo) break;
      if (!it->second.first.overlaps(r)) continue;
      deps.push_back(it->second.second);
      if (absorb) {
        const Region& e = it->second.first;
        absorb->lo = std::min(absorb->lo, e.lo);
        absorb->hi = std::max(absorb->hi, e.hi);
        absorb->runLength = 0;  // the union: its bounding interval
        absorb->pattern.clear();
        // The union stays inside the bounding rectangle of both, or, for
        // different shapes, inside the bounding interval.
        if (absorb->rowStride > 0 && absorb->rowStride == e.rowStride) {
          absorb->c0 = std::min(absorb->c0, e.c0);
          absorb->c1 = std::max(absorb->c1, e.c1);
        } else {
          absorb->rowStride = 0;
        }
        it = list.erase(it);
      } else if (retire && covers(r, it->second.first)) {
        it = list.erase(it);
      } else if (retire) {
        // A write over the same bytes and some partitions at one end (DMA
        // pieces of a tile, in partition order) trims the entry to the rest.
        Region& e = it->second.first;
        bool sameBytes = !r.hbm && r.lo <= e.lo && e.hi <= r.hi;
        if (sameBytes && r.p0 <= e.p0 && r.p1 > e.p0 && r.p1 < e.p1) e.p0 = r.p1;
        else if (sameBytes && r.p1 >= e.p1 && r.p0 < e.p1 && r.p0 > e.p0) e.p1 = r.p0;
      }
    }
  }

  static void insert(Classes& classes, const Region& r, size_t inst) {
    List& list = classes[lengthClass(r)];
    list.maxLength = std::max(list.maxLength, r.hi - r.lo);
    list.entries.insert({r.lo, {r, inst}});
  }

  llvm::DenseMap<void*, Memory> memories;
  SmallVector<Region, 2> grown;  // the current access's writes, grown by what they absorb
};

// A tensor_scalar the scalar engine can run as identity(in * scale + bias)
// (a per-row scale or bias is an activation's scale or bias tile).
bool scalarEngineCanRun(nc::TensorScalarOp op) {
  if (op.getReverse()) return false;
  if (op.getAlu() == "mul" || op.getAlu() == "add") return true;
  return op.getAlu() == "sub" && !op.getScalar();
}

// NKI ISA: tensor_tensor, tensor_scalar and the selects run on the GpSimd
// engine as well as the vector engine, but GpSimd cannot access PSUM
// (NeuronCore-v2 compute engines), so a tile in PSUM keeps the op off it.
// Reductions stay on the vector engine (the ISA's tensor_reduce is a vector
// instruction).
bool gpsimdCanRun(const neff::Instruction& inst) {
  switch (inst.opcode()) {
    case neff::TENSOR_TENSOR:
    case neff::TENSOR_SCALAR:
    case neff::TENSOR_SELECT: break;
    default: return false;
  }
  for (const neff::TileRef* t : {&inst.out(), &inst.in0(), &inst.in1(), &inst.in2()})
    if (t->space() == neff::PSUM) return false;
  return true;
}

// x * x (one operand twice, a float dtype) the scalar engine can run as
// Square(x): both compute the product in f32 and round it once to the
// output's dtype, so the bits are the same (runtime.md). A third engine for
// the squares of sums of squares, next to the vector and GpSimd engines'
// adds.
bool scalarEngineCanSquare(nc::TensorTensorOp op) {
  if (op.getAlu() != "mul" || op.getIn0() != op.getIn1()) return false;
  auto isFloat = [](Value v) { return llvm::isa<FloatType>(llvm::cast<MemRefType>(v.getType()).getElementType()); };
  return isFloat(op.getIn0()) && isFloat(op.getOut());
}

Operation* moveSquareToScalarEngine(nc::TensorTensorOp op) {
  OpBuilder b(op);
  auto act = b.create<nc::ActivationOp>(op.getLoc(), op.getOut(), op.getIn0(), "square");
  for (NamedAttribute attr : op->getDiscardableAttrs()) act->setAttr(attr.getName(), attr.getValue());
  op.erase();
  return act;
}

Operation* moveToScalarEngine(nc::TensorScalarOp op) {
  OpBuilder b(op);
  double imm = op.getImm().convertToDouble();
  bool mul = op.getAlu() == "mul";
  double scale = mul && !op.getScalar() ? imm : 1.0;
  double bias = mul ? nc::kNoBias : (op.getAlu() == "add" ? imm : -imm);
  auto act = b.create<nc::ActivationOp>(op.getLoc(), op.getOut(), op.getIn0(), mul ? op.getScalar() : Value(),
                                        mul ? Value() : op.getScalar(), Value(), b.getStringAttr("identity"),
                                        b.getF64FloatAttr(scale), b.getF64FloatAttr(bias));
  for (NamedAttribute attr : op->getDiscardableAttrs()) act->setAttr(attr.getName(), attr.getValue());
  op.erase();
  return act;
}

struct SchedulePass : impl::ScheduleBase<SchedulePass> {
  using ScheduleBase::ScheduleBase;

  void runOnOperation() override {
    const neff::DeviceParams* device = neff::DeviceForTarget(target);
    if (!device) {
      getOperation().emitError("unknown target '") << target << "'";
      return signalPassFailure();
    }
    // One dispatch runs its kernels' instruction streams back to back on
    // each queue, and the DMA queues finish a kernel's last transfers at
    // different times: the next kernel's first transfers (its weights) should
    // go to the queues that free up first. So each kernel's schedule starts
    // with the DMA queues as the previous kernel left them, relative to the
    // first to free up. The engines start idle: carrying their times as
    // well shifted each kernel's whole list schedule and left LLaMA-7B's
    // layer at seq 16 2.1% slower than this (2081.6 against 2038.4 us,
    // benchmarks/roofline_bench.py); also making loads of an earlier
    // kernel's results wait for its end, 4.9% slower on GPT-2-medium.
    std::vector<uint64_t> carried(neff::kMaxQueues, 0);
    getOperation().walk([&](nc::KernelOp k) {
      if (!k.isLowered()) return;
      std::vector<uint64_t> queueFree(neff::kMaxQueues, 0);
      if (acrossKernels) {
        uint64_t first = UINT64_MAX;
        for (uint32_t q = neff::kComputeQueues; q < neff::kMaxQueues; ++q) first = std::min(first, carried[q]);
        for (uint32_t q = neff::kComputeQueues; q < neff::kMaxQueues; ++q) queueFree[q] = carried[q] - first;
      }
      scheduleKernel(k, *device, queueFree);
      carried = queueFree;
    });
  }

  // `queueFree`: each queue's free time, in and out.
  void scheduleKernel(nc::KernelOp kernel, const neff::DeviceParams& device, std::vector<uint64_t>& queueFree) {
    SmallVector<Operation*> insts;
    for (Operation& op : kernel.getBody().front())
      if (isIsaInstruction(&op)) insts.push_back(&op);
    AccessTracker tracker;

    auto noTensor = [](Value) { return 0u; };
    std::vector<uint32_t> queueCount(neff::kMaxQueues, 0);
    std::vector<uint64_t> finish(insts.size(), 0);
    std::vector<uint32_t> queueOf(insts.size(), 0), positionOf(insts.size(), 0);
    using QueueCounts = std::array<uint32_t, neff::kMaxQueues>;
    std::vector<QueueCounts> clock(insts.size());
    std::vector<size_t> lastOnQueue(neff::kMaxQueues, 0);
    std::vector<std::vector<size_t>> instAt(neff::kMaxQueues);
    OpBuilder b(kernel);

    // The dependence graph, found in program order; any order that respects
    // it reads and writes every byte as the program order does.
    std::vector<SmallVector<size_t, 4>> depsOf(insts.size()), usersOf(insts.size());
    std::vector<uint32_t> waitingOn(insts.size(), 0);
    for (size_t i = 0; i < insts.size(); ++i) {
      Access access = accessOf(insts[i]);
      tracker.dependencies(access, depsOf[i]);
      tracker.record(access, i);
      llvm::sort(depsOf[i]);
      depsOf[i].erase(std::unique(depsOf[i].begin(), depsOf[i].end()), depsOf[i].end());
      waitingOn[i] = uint32_t(depsOf[i].size());
      for (size_t j : depsOf[i]) usersOf[j].push_back(i);
    }
    // List scheduling: the instruction whose inputs are ready first goes
    // next (program order on a tie), so an engine's in-order queue takes
    // the next iteration's work while the current one waits on another
    // engine.
    using Ready = std::pair<uint64_t, size_t>;  // (ready time, program index)
    std::priority_queue<Ready, std::vector<Ready>, std::greater<Ready>> readyQueue;
    for (size_t i = 0; i < insts.size(); ++i)
      if (waitingOn[i] == 0) readyQueue.push({0, i});
    SmallVector<Operation*> order;
    order.reserve(insts.size());

    while (!readyQueue.empty()) {
      auto [ready, i] = readyQueue.top();
      readyQueue.pop();
      const SmallVector<size_t, 4>& deps = depsOf[i];

      Operation* op = insts[i];
      neff::Instruction proto = toProtoInstruction(op, noTensor);
      SmallVector<std::pair<uint32_t, neff::Engine>> candidates;
      bool isDma = llvm::isa<nc::DmaLoadOp, nc::DmaStoreOp, nc::DmaGatherOp>(op);
      if (isDma) {
        for (uint32_t q = 0; q < device.dma_queues; ++q)
          candidates.push_back({neff::QueueIndex(neff::DMA, q), neff::DMA});
      } else if (llvm::isa<nc::ActivationOp>(op)) {
        candidates.push_back({neff::QueueIndex(neff::SCALAR, 0), neff::SCALAR});
      } else if (llvm::isa<nc::MatmulOp, nc::TransposeOp>(op)) {
        candidates.push_back({neff::QueueIndex(neff::TENSOR, 0), neff::TENSOR});
      } else if (llvm::isa<nc::IotaOp>(op)) {
        // GpSimd generates indices; the vector engine stays free for math.
        candidates.push_back({neff::QueueIndex(neff::GPSIMD, 0), neff::GPSIMD});
      } else {
        candidates.push_back({neff::QueueIndex(neff::VECTOR, 0), neff::VECTOR});
        if (auto ts = llvm::dyn_cast<nc::TensorScalarOp>(op); ts && scalarEngineCanRun(ts))
          candidates.push_back({neff::QueueIndex(neff::SCALAR, 0), neff::SCALAR});
        if (auto tt = llvm::dyn_cast<nc::TensorTensorOp>(op); tt && scalarEngineCanSquare(tt))
          candidates.push_back({neff::QueueIndex(neff::SCALAR, 0), neff::SCALAR});
        if (gpsimdCanRun(proto))
          candidates.push_back({neff::QueueIndex(neff::GPSIMD, 0), neff::GPSIMD});
      }
      uint32_t bestQueue = 0;
      neff::Engine bestEngine = neff::ENGINE_INVALID;
      uint64_t bestEnd = UINT64_MAX;
      // The cost depends on the engine, not on the queue (every DMA queue
      // prices a transfer alike): priced once per engine.
      neff::Engine pricedEngine = neff::ENGINE_INVALID;
      uint64_t cost = 0;
      for (auto [queue, engine] : candidates) {
        if (engine != pricedEngine) {
          pricedEngine = engine;
          if (engine == neff::SCALAR && proto.opcode() == neff::TENSOR_SCALAR) {
            proto.set_opcode(neff::ACTIVATION);
            cost = neff::CostOnEnginePs(proto, engine, device);
            proto.set_opcode(neff::TENSOR_SCALAR);
          } else if (engine == neff::SCALAR && proto.opcode() == neff::TENSOR_TENSOR) {
            neff::Instruction square = proto;
            square.set_opcode(neff::ACTIVATION);
            square.set_func(neff::SQUARE);
            cost = neff::CostOnEnginePs(square, engine, device);
          } else {
            cost = neff::CostOnEnginePs(proto, engine, device);
          }
        }
        uint64_t start = std::max(ready, queueFree[queue]);
        uint64_t end = start + cost;
        // Among DMA queues that would finish it at the same time (all idle
        // when it becomes ready), the one idle longest: always the first
        // would stack every such transfer on one queue, which then sets the
        // kernel's length wherever the timeline runs differently.
        if (end < bestEnd || (end == bestEnd && engine == neff::DMA && bestEngine == neff::DMA &&
                              queueFree[queue] < queueFree[bestQueue])) {
          bestEnd = end;
          bestQueue = queue;
          bestEngine = engine;
        }
      }
      if (auto ts = llvm::dyn_cast<nc::TensorScalarOp>(op); ts && bestEngine == neff::SCALAR)
        op = insts[i] = moveToScalarEngine(ts);
      if (auto tt = llvm::dyn_cast<nc::TensorTensorOp>(op); tt && bestEngine == neff::SCALAR)
        op = insts[i] = moveSquareToScalarEngine(tt);
      queueFree[bestQueue] = bestEnd;
      finish[i] = bestEnd;
      queueOf[i] = bestQueue;
      positionOf[i] = queueCount[bestQueue]++;
      // One discardable-attribute dictionary per op (each setAttr would
      // rebuild it; the full dictionary would also materialize the op's
      // properties).
      NamedAttrList attrs(op->getDiscardableAttrDictionary());
      attrs.set("engine", b.getStringAttr(neff::EngineName(bestEngine)));
      if (isDma) attrs.set("queue", b.getI64IntegerAttr(bestQueue - neff::kComputeQueues));

      // Waits: per producer queue, the latest conflicting instruction. A
      // wait is dropped when another wait (or the previous instruction on
      // this queue) already guarantees it, tracked with vector clocks:
      // clock[i][q] = instructions of queue q known complete when i completes.
      QueueCounts need{};
      for (size_t j : deps)
        if (queueOf[j] != bestQueue)
          need[queueOf[j]] = std::max(need[queueOf[j]], positionOf[j] + 1);
      QueueCounts implied{};
      auto absorb = [&](size_t j) {
        for (uint32_t q = 0; q < neff::kMaxQueues; ++q) implied[q] = std::max(implied[q], clock[j][q]);
      };
      if (positionOf[i] > 0) absorb(lastOnQueue[bestQueue]);
      for (uint32_t q = 0; q < neff::kMaxQueues; ++q)
        if (need[q] > 0) absorb(instAt[q][need[q] - 1]);
      SmallVector<int64_t> waits;
      QueueCounts ownClock{};
      if (positionOf[i] > 0) ownClock = clock[lastOnQueue[bestQueue]];
      for (uint32_t q = 0; q < neff::kMaxQueues; ++q) {
        if (need[q] == 0 || ownClock[q] >= need[q]) continue;
        bool impliedByOthers = false;
        for (uint32_t r = 0; r < neff::kMaxQueues && !impliedByOthers; ++r)
          if (r != q && need[r] > 0 && clock[instAt[r][need[r] - 1]][q] >= need[q]) impliedByOthers = true;
        if (!impliedByOthers) {
          waits.push_back(q);
          waits.push_back(need[q]);
          ++numWaits;
        }
      }
      for (uint32_t q = 0; q < neff::kMaxQueues; ++q) implied[q] = std::max(implied[q], need[q]);
      implied[bestQueue] = positionOf[i] + 1;
      clock[i] = implied;
      lastOnQueue[bestQueue] = i;
      instAt[bestQueue].push_back(i);
      if (!waits.empty()) attrs.set("waits", b.getDenseI64ArrayAttr(waits));
      op->setDiscardableAttrs(attrs.getDictionary(op->getContext()));
      order.push_back(op);
      for (size_t u : usersOf[i])
        if (--waitingOn[u] == 0) {
          uint64_t at = 0;
          for (size_t j : depsOf[u]) at = std::max(at, finish[j]);
          readyQueue.push({at, u});
        }
    }
    // The block in schedule order: each queue's instructions in the order
    // their positions (and so the waits) count them. Tiles are allocated
    // before the first instruction, so every use stays dominated.
    Operation* end = kernel.getBody().front().getTerminator();
    for (Operation* op : order) op->moveBefore(end);
  }
};

}  // namespace
}  // namespace neuroncc
