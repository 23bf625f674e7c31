//===- PlanMemory.cpp - HBM arena and SBUF tile placement -----------------===//
//
// HBM: the steps are kernels in program order; a tensor produced by kernel i
// and last read by kernel j is live over [i, j + 1). Graph outputs are bound
// by the caller and take no arena space.
//
// Both use the planner of OffsetPlanner.h (heuristics, then the exact search
// under a node budget), and every plan is checked by its independent
// verifier before offsets are written.
//
// SBUF: the steps are instructions of one kernel. A tile is live from its
// first to its last use; to let DMA for later row tiles overlap compute on
// this one, a tile of iteration k also stays reserved through iteration
// k + 16 (deep buffering), else as many as fit, down to k + 1 (double
// buffering), which is tried last with the tiles DMA loads or stores held
// through k + 4, 3 or 2 instead; matmul operand
// panels and single-use transposed slices marked `rotation` may instead
// rotate within their group when that does not fit. Every other kernel's
// tiles are placed mirrored (from the top down), clear of the previous
// kernel's when both fit, so that its first loads need not wait for it.
// PSUM tiles rotate over the 8 banks (each reserved until the 7th, else the
// 6th ... 2nd, PSUM tile first used after its last use). If nothing
// fits, the plan falls back to exact lifetimes (correct, less overlap)
// before giving up. When the deepest buffering does not fit, tiles whose
// uses follow one another (a result over its input's last read, unread
// activation results) may share bytes, if that buys deeper buffering.
//
//===----------------------------------------------------------------------===//

#include <functional>
#include <map>
#include <type_traits>

#include "passes/OffsetPlanner.h"
#include "passes/Passes.h"
#include "passes/IsaProto.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/MathExtras.h"

namespace neuroncc {
#define GEN_PASS_DEF_PLANMEMORY
#include "passes/Passes.h.inc"
}  // namespace neuroncc

using namespace mlir;

namespace neuroncc {
namespace {

constexpr int64_t kSbufAlignment = 32;
// Effort for the exact search when no heuristic reaches the lower bound: a
// node count, not a time limit, so the same graph always gets the same plan
// (and a byte-identical NEFF). A node costs about n log n for n buffers, so
// the count shrinks on large instances to keep the worst case near a second.
int64_t searchNodesFor(size_t buffers) {
  return std::min<int64_t>(200000, 100000000 / std::max<int64_t>(1, int64_t(buffers)));
}
constexpr int64_t kPsumBytes = 16 * 1024;  // per partition: 8 banks of 2 KiB [arch-v2]

int64_t tileBytes(Value tile) {
  auto t = llvm::cast<MemRefType>(tile.getType());
  return t.getDimSize(1) * (t.getElementType().getIntOrFloatBitWidth() / 8);
}

// The operands of an elementwise instruction read at the same (p, f) as the
// element it writes (the same shape as its output); empty for other ops.
SmallVector<Value, 3> elementwiseInputs(Operation* op) {
  if (auto o = llvm::dyn_cast<nc::TensorTensorOp>(op)) return {o.getIn0(), o.getIn1()};
  if (auto o = llvm::dyn_cast<nc::TensorScalarOp>(op)) return {o.getIn0()};
  if (auto o = llvm::dyn_cast<nc::ActivationOp>(op)) return {o.getIn0()};
  if (auto o = llvm::dyn_cast<nc::TensorSelectOp>(op)) return {o.getOnTrue(), o.getOnFalse(), o.getPred()};
  return {};
}

// SBUF tiles that may share bytes because their uses do not interleave,
// found before the tiles are placed (each maps to the tile whose bytes it
// takes), so that more row-tile iterations fit in flight:
// - in place: an elementwise instruction whose input tile is read for the
//   last time there writes its result into that tile (x * rstd over x, then
//   * weight over that), when both tiles have the same shape and dtype;
// - a result nothing reads (an activation computed for its accumulated row
//   sum, as the squares of RMSNorm) goes to one scratch tile per shape and
//   dtype, shared by every such activation: all run on the scalar engine,
//   in order, so the shared tile costs no waits.
// A tile takes part only if every use is a direct operand of an
// instruction (no column views), so the program order of its uses is exact.
// The host runs an instruction whose output maps each element to the same
// bytes as an input correctly (runtime.md: each block is read before it is
// written).
llvm::DenseMap<Value, Value> sharedTiles(nc::KernelOp kernel) {
  Block& body = kernel.getBody().front();
  struct Uses {
    int64_t first = INT64_MAX, last = -1, count = 0;
    bool direct = true;  // every use an instruction operand, no views
  };
  llvm::DenseMap<Value, Uses> uses;
  SmallVector<Operation*> insts;
  for (Operation& op : body) {
    if (auto a = llvm::dyn_cast<nc::AllocTileOp>(op)) {
      uses[a.getTile()];
      continue;
    }
    if (!isIsaInstruction(&op)) continue;
    int64_t at = int64_t(insts.size());
    insts.push_back(&op);
    for (Value v : op.getOperands()) {
      Value base = nc::tileBuffer(v);
      auto it = uses.find(base);
      if (it == uses.end()) continue;
      Uses& u = it->second;
      u.first = std::min(u.first, at);
      u.last = at;
      ++u.count;
      if (base != v) u.direct = false;
    }
  }
  for (Value tile : llvm::make_first_range(uses))
    for (Operation* user : tile.getUsers())
      if (!isIsaInstruction(user)) uses[tile].direct = false;

  // A tile's current root: the tile its uses now go to.
  llvm::DenseMap<Value, Value> alias;
  auto root = [&](Value v) {
    auto it = alias.find(v);
    return it == alias.end() ? v : it->second;
  };
  llvm::DenseMap<Type, Value> scratch;  // per tile type: the shared unread result
  for (auto [at, op] : llvm::enumerate(insts)) {
    SmallVector<Value, 3> inputs = elementwiseInputs(op);
    if (inputs.empty()) continue;
    Value out = op->getOperand(0);
    auto outIt = uses.find(out);
    if (outIt == uses.end() || !outIt->second.direct || outIt->second.first != int64_t(at)) continue;
    Value into;
    for (Value in : inputs) {
      auto it = uses.find(in);
      if (it == uses.end() || in == out || in.getType() != out.getType() || !it->second.direct ||
          it->second.last != int64_t(at))
        continue;
      // Read only as an elementwise operand here (not also as a per-row scalar).
      unsigned asOperand = 0, asInput = 0;
      for (Value v : op->getOperands()) asOperand += v == in;
      for (Value v : inputs) asInput += v == in;
      if (asOperand == asInput) {
        into = in;
        break;
      }
    }
    // (An unread result is used by its own instruction alone, so that
    // instruction reads neither the scratch tile nor anything mapped to it.)
    if (!into && llvm::isa<nc::ActivationOp>(op) && outIt->second.count == 1) {
      auto [slot, fresh] = scratch.try_emplace(out.getType(), out);
      if (fresh) continue;
      into = slot->second;
    }
    if (!into) continue;
    // `into` may itself have been mapped to another tile: out's uses follow
    // on from that one's (each tile is `into` at most once, at its last use).
    alias[out] = root(into);
  }
  return alias;
}

// Rewrites the tiles `alias` maps to their roots and erases their allocations.
void applySharedTiles(const llvm::DenseMap<Value, Value>& alias) {
  for (auto [tile, rootTile] : alias) {
    Operation* alloc = tile.getDefiningOp();
    tile.replaceAllUsesWith(rootTile);
    alloc->erase();
  }
}

struct PlanMemoryPass : impl::PlanMemoryBase<PlanMemoryPass> {
  using PlanMemoryBase::PlanMemoryBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // Per function: the pass manager may run one instance on several
    // functions (or clones on threads), and the placement must not depend
    // on which.
    kernelsPlanned = 0;
    if (failed(planHbm(func))) return signalPassFailure();
    int64_t peak = 0;
    WalkResult r = func.walk([&](nc::KernelOp k) {
      if (!k.isLowered()) return WalkResult::advance();
      FailureOr<int64_t> used = planSbuf(k);
      if (failed(used)) return WalkResult::interrupt();
      peak = std::max(peak, *used);
      return WalkResult::advance();
    });
    if (r.wasInterrupted()) return signalPassFailure();
    peakSbufBytes = uint64_t(peak);
  }

  LogicalResult planHbm(func::FuncOp func) {
    SmallVector<nc::KernelOp> kernels = hbmSteps(func);
    std::vector<HbmTensor> tensors = collectHbmTensors(func);
    std::vector<PlannedBuffer> buffers;
    SmallVector<std::pair<nc::KernelOp, unsigned>> owners;
    for (const HbmTensor& t : tensors) {
      buffers.push_back(t.buffer);
      owners.push_back({t.kernel, t.resultNumber});
    }
    PlanOptions options;
    options.alignment = kHbmAlignment;
    options.nodeLimit = searchNodesFor(buffers.size());
    int64_t arena = planOffsets(buffers, options).arena;
    if (auto err = verifyPlan(buffers, kHbmAlignment, 0))
      return func.emitError("HBM plan is invalid: ") << *err;
    OpBuilder b(func);
    for (nc::KernelOp k : kernels)
      k->setAttr(kResultOffsetsAttr,
                 b.getDenseI64ArrayAttr(SmallVector<int64_t>(k.getNumResults(), -1)));
    for (auto [buf, owner] : llvm::zip(buffers, owners)) {
      SmallVector<int64_t> offs(owner.first->getAttrOfType<DenseI64ArrayAttr>(kResultOffsetsAttr).asArrayRef());
      offs[owner.second] = buf.offset;
      owner.first->setAttr(kResultOffsetsAttr, b.getDenseI64ArrayAttr(offs));
    }
    func->setAttr(kArenaBytesAttr, b.getI64IntegerAttr(arena));
    arenaBytes = uint64_t(arena);
    return success();
  }

  int64_t kernelsPlanned = 0;  // lowered kernels so far, in program order

  FailureOr<int64_t> planSbuf(nc::KernelOp kernel) {
    // Tiles share bytes only when that buys deeper buffering (or a fit):
    // a result written over its input waits for every other reader of it,
    // so sharing costs waits of its own.
    TilePlan<nc::AllocTileOp> sbuf = planTiles<nc::AllocTileOp>(kernel, sbufBytes, kSbufAlignment);
    if (sbuf.peak > sbufBytes || sbuf.candidate > 0) {
      llvm::DenseMap<Value, Value> alias = sharedTiles(kernel);
      if (!alias.empty()) {
        TilePlan<nc::AllocTileOp> shared = planTiles<nc::AllocTileOp>(kernel, sbufBytes, kSbufAlignment, &alias);
        if (shared.peak <= sbufBytes && (sbuf.peak > sbufBytes || shared.candidate < sbuf.candidate)) {
          applySharedTiles(alias);
          sbuf = std::move(shared);
        }
      }
    }
    bool mirror = kernelsPlanned++ % 2 == 1;
    if (failed(commitTiles(kernel, sbuf, sbufBytes, kSbufAlignment, "SBUF", mirror))) return failure();
    // PSUM tiles sit on 2 KiB bank boundaries, so a matmul's accumulator
    // (at most 2 KiB per partition) never straddles two banks.
    TilePlan<nc::AllocPsumOp> psum = planTiles<nc::AllocPsumOp>(kernel, kPsumBytes, nc::kPsumBankBytes);
    if (failed(commitTiles(kernel, psum, kPsumBytes, nc::kPsumBankBytes, "PSUM", mirror))) return failure();
    OpBuilder b(kernel);
    kernel->setAttr(kSbufBytesAttr, b.getI64IntegerAttr(sbuf.peak));
    return sbuf.peak;
  }

  // A placement of a kernel's tiles: offsets in `buffers` (one per alloc),
  // `peak` bytes per partition (above the capacity: no candidate fits), and
  // the index of the lifetime candidate used (0: the deepest buffering).
  template <typename AllocOp>
  struct TilePlan {
    SmallVector<AllocOp> allocs;
    std::vector<PlannedBuffer> buffers;
    int64_t peak = 0;
    size_t candidate = 0;
    int64_t peakLive = 0;  // of the exact lifetimes: a lower bound
  };

  template <typename AllocOp>
  LogicalResult commitTiles(nc::KernelOp kernel, const TilePlan<AllocOp>& plan, int64_t capacity,
                            int64_t alignment, StringRef memory, bool mirror) {
    if (plan.allocs.empty()) return success();
    if (plan.peak > capacity) {
      auto diag = kernel.emitError("kernel '") << kernel.getSymName() << "' needs " << plan.peak << " "
                                               << memory << " bytes per partition, more than the "
                                               << capacity << " available";
      diag.attachNote() << "peak live bytes (a lower bound): " << plan.peakLive;
      return failure();
    }
    // Mirrored (from the top of the memory down), every other kernel's
    // tiles keep clear of the bytes the previous kernel uses when both fit
    // together, so that the next kernel's first loads (weights, often) need
    // not wait for the previous kernel's last instructions at the boundary
    // (runtime.md: kernel-boundary waits compare byte ranges). Each buffer
    // keeps its aligned extent, so mirrored buffers stay disjoint.
    std::vector<PlannedBuffer> buffers = plan.buffers;
    if (mirror)
      for (PlannedBuffer& buf : buffers)
        buf.offset = capacity - buf.offset - int64_t(llvm::alignTo(buf.size, alignment));
    if (auto err = verifyPlan(buffers, alignment, capacity))
      return kernel.emitError(memory) << " plan is invalid: " << *err;
    OpBuilder b(kernel);
    for (auto [a, buf] : llvm::zip(plan.allocs, buffers))
      AllocOp(a).setOffsetAttr(b.getI64IntegerAttr(buf.offset));
    return success();
  }

  // `alias`: tiles that take another tile's bytes (sharedTiles); they get no
  // buffer of their own, their uses count as uses of the tile they map to.
  template <typename AllocOp>
  TilePlan<AllocOp> planTiles(nc::KernelOp kernel, int64_t capacity, int64_t alignment,
                              const llvm::DenseMap<Value, Value>* alias = nullptr) {
    TilePlan<AllocOp> result;
    Block& body = kernel.getBody().front();
    SmallVector<AllocOp>& allocs = result.allocs;
    llvm::DenseMap<Value, size_t> indexOf;
    for (Operation& op : body)
      if (auto a = llvm::dyn_cast<AllocOp>(op); a && !(alias && alias->count(a.getTile()))) {
        indexOf[a.getTile()] = allocs.size();
        allocs.push_back(a);
      }
    if (alias)
      for (auto [tile, rootTile] : *alias) indexOf[tile] = indexOf.lookup(rootTile);
    if (allocs.empty()) return result;
    std::vector<PlannedBuffer> exact(allocs.size());
    for (auto [i, a] : llvm::enumerate(allocs)) exact[i] = {INT64_MAX, -1, tileBytes(a.getTile())};
    std::map<int64_t, int64_t> iterationEnd;  // iteration -> last step, in order
    int64_t step = 0;
    for (Operation& op : body) {
      if (!isIsaInstruction(&op)) continue;
      int64_t iter = -1;
      for (Value v : op.getOperands()) {
        auto it = indexOf.find(nc::tileBuffer(v));
        if (it == indexOf.end()) continue;
        PlannedBuffer& buf = exact[it->second];
        buf.start = std::min(buf.start, step);
        buf.end = std::max(buf.end, step + 1);
        if (auto a = allocs[it->second]->template getAttrOfType<IntegerAttr>("iteration"))
          iter = std::max(iter, a.getInt());
      }
      if (iter >= 0) iterationEnd[iter] = std::max(iterationEnd[iter], step + 1);
      ++step;
    }
    for (PlannedBuffer& buf : exact)
      if (buf.end < 0) buf = {0, 1, buf.size};  // never used: give it a slot anyway
    // A tile of iteration k stays reserved through iteration k + depth, so
    // that the next iterations' instructions need not wait for its last
    // readers (a store still draining it, typically).
    const int64_t lastIteration = iterationEnd.empty() ? -1 : iterationEnd.rbegin()->first;
    // Tiles a DMA fills or drains: the loads of later iterations wait for
    // their bytes, and a store holds them for microseconds.
    llvm::DenseSet<size_t> transferred;
    for (Operation& op : body)
      if (llvm::isa<nc::DmaLoadOp, nc::DmaStoreOp>(op))
        for (Value v : op.getOperands())
          if (auto it = indexOf.find(nc::tileBuffer(v)); it != indexOf.end()) transferred.insert(it->second);
    auto buffered = [&](int64_t computedDepth, bool skipMarked, int64_t transferredDepth = 0) {
      std::vector<PlannedBuffer> buffers = exact;
      for (auto [i, a] : llvm::enumerate(allocs))
        if (auto it = a->template getAttrOfType<IntegerAttr>("iteration");
            it && !(skipMarked && a->hasAttr("rotation"))) {
          int64_t depth = transferred.contains(i) ? std::max(computedDepth, transferredDepth) : computedDepth;
          // The last iteration's tiles are held to its own end (where there
          // are several): with exact lifetimes, its tiles would share bytes,
          // and each would wait for the store draining the one before it (a
          // chain of transfers that ended RMSNorm kernels storing 32
          // transposed blocks per row tile). Iterations in flight hold as
          // many bytes already.
          int64_t target = it.getInt() + depth;
          if (depth > 1 || it.getInt() == lastIteration) target = std::min(target, lastIteration);
          if (target < it.getInt()) continue;
          // (The first iteration at or after the target that has
          // instructions: an instruction counts for the latest iteration of
          // the tiles it touches, so tiles that serve several iterations (an
          // attention's head group) leave some without any.)
          auto next = iterationEnd.lower_bound(target);
          if (next != iterationEnd.end()) buffers[i].end = std::max(buffers[i].end, next->second);
        }
      return buffers;
    };
    // Rotation: a tile stays reserved until the `depth`-th tile after it
    // (in first use) of the same rotation is first used. PSUM tiles all
    // rotate over the banks, so a TensorEngine instruction filling a bank
    // never waits for the evacuation of the tile that used it before
    // (transposed operand slices, row tiles' accumulators). SBUF tiles
    // marked `rotation` (matmul operand panels, which die a few matmuls
    // after their load) rotate among themselves instead of being held
    // through whole iterations.
    std::vector<size_t> byStart(allocs.size());
    for (size_t i = 0; i < byStart.size(); ++i) byStart[i] = i;
    llvm::stable_sort(byStart, [&](size_t a, size_t b) { return exact[a].start < exact[b].start; });
    // Marked tiles rotate within their group (the attribute's value: panels
    // of rows, transposed slices), so that one kind does not crowd out the
    // other.
    auto rotated = [&](std::vector<PlannedBuffer> buffers, int64_t depth, bool onlyMarked, bool fromLastUse) {
      llvm::MapVector<Attribute, std::vector<size_t>> groups;
      for (size_t i : byStart) {
        Attribute group = allocs[i]->getAttr("rotation");
        if (!onlyMarked || group) groups[onlyMarked ? group : Attribute()].push_back(i);
      }
      // The last `depth` tiles of a group (all of them in a group of fewer)
      // have no such successor: they are held to the end of the kernel, or
      // they would share bytes and each wait for the one before it.
      // PSUM counts the successors from the tile's last use, not its first:
      // an accumulator lives through a whole output tile, while the slices
      // transposed meanwhile start and die, so counted from its first use
      // its bank was free again at its evacuation, and the next row tile's
      // first transpose or accumulator (the next tile placed) took that
      // bank and waited for the evacuation (61 such waits of 0.4 us in the
      // 4096^3 matmul). SBUF panels, loaded just before their few matmuls,
      // keep the count from the first use (from the last one, LLaMA-7B at
      // seq 16 was slower: 2046.2 us against 2025.6).
      for (auto& [group, order] : groups)
        for (size_t i = 0; i < order.size(); ++i) {
          size_t first = i + 1;
          if (fromLastUse) {
            int64_t lastUse = exact[order[i]].end;
            first = std::max(first, size_t(llvm::partition_point(order, [&](size_t t) {
                                               return exact[t].start < lastUse;
                                             }) - order.begin()));
          }
          size_t successor = first + size_t(depth) - 1;
          buffers[order[i]].end =
              std::max(buffers[order[i]].end, successor < order.size() ? exact[order[successor]].start + 1 : step);
        }
      return buffers;
    };
    // SBUF is large next to one iteration's tiles: sixteen iterations in
    // flight keep every DMA queue busy when the kernel is bound by its
    // transfers; when they do not fit, as many as do, so that wide rows
    // still overlap loads, compute and stores (a depth whose peak live bytes
    // exceed the capacity is rejected in O(n log n)). PSUM (8 banks) rotates
    // over all of them when it can. The candidates go from most overlap to
    // exact lifetimes and are built when tried.
    SmallVector<std::function<std::vector<PlannedBuffer>()>> candidates;
    if constexpr (std::is_same_v<AllocOp, nc::AllocTileOp>) {
      const bool anyMarked = llvm::any_of(allocs, [](AllocOp a) { return a->hasAttr("rotation"); });
      for (int64_t depth = 16; depth >= 1; --depth) {
        // Before plain double buffering, the transferred tiles alone held
        // deeper (a bf16 softmax over rows of 8192: the next row tiles' loads
        // and the last ones' stores overlap, while the f32 exponentials of
        // only two row tiles fit beside them). Not in a matmul's kernel,
        // whose operand panels rotate instead (below): held through
        // iterations they crowd out the rotation (LLaMA-7B at seq 16:
        // 2008.8 -> 2092.5 us).
        if (depth == 1 && !anyMarked)
          for (int64_t transferredDepth : {4, 3, 2})
            candidates.push_back([&, transferredDepth] { return buffered(1, false, transferredDepth); });
        candidates.push_back([&, depth] { return buffered(depth, false); });
      }
      for (int64_t rotation : {32, 16, 8})
        candidates.push_back([&, rotation] { return rotated(buffered(16, true), rotation, true, false); });
      for (int64_t panels : {8, 4, 2})
        candidates.push_back([&, panels] { return rotated(buffered(1, true), panels, true, false); });
    } else {
      for (int64_t depth = kPsumBytes / nc::kPsumBankBytes - 1; depth >= 2; --depth)
        candidates.push_back([&, depth] { return rotated(exact, depth, false, true); });
    }
    candidates.push_back([&] { return exact; });
    // Any plan within the capacity will do, so the search only runs when the
    // heuristics do not fit.
    PlanOptions options;
    options.alignment = alignment;
    options.goodEnoughArena = capacity;
    // The heuristics run on both lifetimes before the search runs on either:
    // the search costs far more than losing some DMA overlap.
    // Lifetimes whose peak live bytes (a lower bound, found in O(n log n))
    // exceed the capacity cannot fit, whatever the placement.
    // Offsets are multiples of the alignment, so every live tile but the
    // topmost takes its size rounded up to it: thousands of 4-byte tiles at
    // 32-byte alignment need eight times their bytes, which the plain peak
    // does not see (a 1 x 22500 matmul's lifetimes were each placed, for 1.5
    // s, before failing to fit).
    std::vector<PlannedBuffer> rounded;
    auto neededBytes = [&](const std::vector<PlannedBuffer>& buffers) {
      rounded = buffers;
      for (PlannedBuffer& r : rounded) r.size = llvm::alignTo(r.size, alignment);
      return std::max(peakLiveBytes(buffers), peakLiveBytes(rounded) - (alignment - 1));
    };
    auto plan = [&](std::vector<PlannedBuffer>& buffers, bool search) {
      if (int64_t need = neededBytes(buffers); need > capacity) return need;
      options.nodeLimit = search ? searchNodesFor(buffers.size()) : 0;
      return planOffsets(buffers, options).arena;
    };
    int64_t peak = 0;
    std::vector<PlannedBuffer> chosen;
    // The search only for the last two candidates (the shallowest
    // buffering, then exact lifetimes): deeper buffering only if the
    // heuristics place it.
    for (bool search : {false, true}) {
      for (size_t i = search ? candidates.size() - 2 : 0; i < candidates.size(); ++i) {
        chosen = candidates[i]();
        peak = plan(chosen, search);
        result.candidate = i;
        if (peak <= capacity) break;
      }
      if (peak <= capacity) break;
    }
    result.buffers = std::move(chosen);
    result.peak = peak;
    result.peakLive = peakLiveBytes(exact);
    return result;
  }
};

}  // namespace

SmallVector<nc::KernelOp> hbmSteps(func::FuncOp func) {
  SmallVector<nc::KernelOp> kernels;
  for (Operation& op : func.getBody().front())
    if (auto k = llvm::dyn_cast<nc::KernelOp>(op)) kernels.push_back(k);
  return kernels;
}

int64_t hbmTensorBytes(Type type) {
  auto t = llvm::cast<RankedTensorType>(type);
  return t.getNumElements() * (nc::deviceElementType(t.getElementType()).getIntOrFloatBitWidth() / 8);
}

std::vector<HbmTensor> collectHbmTensors(func::FuncOp func) {
  SmallVector<nc::KernelOp> kernels = hbmSteps(func);
  llvm::DenseMap<Operation*, int64_t> step;
  for (auto [i, k] : llvm::enumerate(kernels)) step[k] = int64_t(i);
  Operation* ret = func.getBody().front().getTerminator();
  std::vector<HbmTensor> tensors;
  for (nc::KernelOp k : kernels) {
    for (OpResult r : k.getResults()) {
      if (llvm::is_contained(ret->getOperands(), Value(r))) continue;  // bound by the caller
      int64_t last = step[k];
      for (Operation* user : r.getUsers())
        if (auto it = step.find(user); it != step.end()) last = std::max(last, it->second);
      HbmTensor t{k, r.getResultNumber(), {}};
      t.buffer.start = step[k];
      t.buffer.end = last + 1;
      t.buffer.size = hbmTensorBytes(r.getType());
      tensors.push_back(t);
    }
  }
  return tensors;
}

}  // namespace neuroncc
