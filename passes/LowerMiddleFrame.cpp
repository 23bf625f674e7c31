//===- LowerMiddleFrame.cpp - ops around a reduction over middle dims ------===//
//
// A kernel marked nc.middle_frame (FormKernels.cpp, keepsNaturalFrame) holds
// reductions over one run of middle dims ([A, R, C] reduced over R) and the
// elementwise ops around them, computed in the input's own layout: each
// partition takes a row, an index of A and `c` columns of C
// (chooseMiddleFrameSplit), and holds its R x c elements as R blocks of c
// columns, read and written in runs of c.
//
// Each value varies along r, along the columns k, along both or neither
// (per row): a Full value ([p, R x c]), a Block ([p, c], a reduction's
// result), an RVec ([p, R], a per-channel weight) or a Row ([p, 1]). An op
// over operands that vary along the same axes is one instruction over their
// tiles; an op mixing a Full value with a Block or an RVec runs once per
// block (R instructions of c columns, the RVec's element as the per-row
// scalar) or once per column (c instructions over R elements stepped c
// apart, the Block's element as the scalar), whichever the engines take
// less time for, each writing its part of one Full tile. A reduction over R
// adds the blocks, or reduces each column, as LowerReductions.cpp does.
//
// Where a row of all R blocks does not fit SBUF and the kernel reads its
// input once (middleFrameReadsOnce), it runs over chunks of the first
// reduced dim: each chunk's values along r, then its part of each
// reduction added into f32 accumulators; the values that do not vary
// along r follow once their reductions are finished.
//
//===----------------------------------------------------------------------===//

#include "device_model.h"
#include "passes/KernelLowering.h"
#include "passes/ReductionCost.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace neuroncc {

int64_t middleFrameBytesPerElement(llvm::ArrayRef<mlir::Operation*> ops, int64_t fullElements) {
  using namespace mlir;
  llvm::DenseMap<Operation*, int64_t> indexOf;
  for (auto [i, op] : llvm::enumerate(ops)) indexOf[op] = int64_t(i);
  const int64_t end = int64_t(ops.size());
  auto isFull = [&](Value v) {
    auto t = llvm::dyn_cast<RankedTensorType>(v.getType());
    return t && t.getNumElements() == fullElements;
  };
  auto bytesOf = [](Value v) -> int64_t {
    Type e = llvm::cast<RankedTensorType>(v.getType()).getElementType();
    return e.isBF16() || e.isF16() ? 2 : 4;
  };
  llvm::MapVector<Value, std::array<int64_t, 3>> live;  // value -> {first, last, bytes}
  for (auto [i, op] : llvm::enumerate(ops)) {
    for (Value v : op->getOperands()) {
      if (!isFull(v)) continue;
      auto it = live.find(v);
      if (it == live.end()) it = live.insert({v, {int64_t(i), int64_t(i), bytesOf(v)}}).first;
      it->second[1] = std::max(it->second[1], int64_t(i));
    }
    for (Value r : op->getResults())
      if (isFull(r)) {
        const bool outside = llvm::any_of(r.getUsers(), [&](Operation* u) { return !indexOf.count(u); });
        live[r] = {int64_t(i), outside ? end : int64_t(i), bytesOf(r)};
      }
  }
  std::vector<std::pair<int64_t, int64_t>> events;
  for (auto& [v, range] : live) {
    events.emplace_back(range[0], range[2]);
    events.emplace_back(range[1] + 1, -range[2]);
  }
  llvm::sort(events);
  int64_t bytes = 0, peak = 0;
  for (auto [at, delta] : events) peak = std::max(peak, bytes += delta);
  return peak + 4;
}

bool middleFrameReadsOnce(llvm::ArrayRef<mlir::Operation*> ops, int64_t fullElements) {
  using namespace mlir;
  llvm::SmallPtrSet<Operation*, 16> own(ops.begin(), ops.end()), afterReduction;
  for (Operation* op : ops) {
    const bool after = !aten::reducedDims(op).empty() || llvm::any_of(op->getOperands(), [&](Value v) {
      return v.getDefiningOp() && afterReduction.contains(v.getDefiningOp());
    });
    if (after) afterReduction.insert(op);
    for (Value r : op->getResults()) {
      auto t = llvm::dyn_cast<RankedTensorType>(r.getType());
      if (!t || t.getNumElements() != fullElements) continue;
      if (after || llvm::any_of(r.getUsers(), [&](Operation* u) { return !own.contains(u); })) return false;
    }
  }
  return true;
}

}  // namespace neuroncc

namespace neuroncc::lowering {

namespace {

// The axes a value varies along, in the order of its tile's columns: the
// rows packed on a partition (J, only where several are), the reduced
// elements (R) and the kept columns (K).
enum : unsigned { kK = 1, kR = 2, kJ = 4 };
constexpr unsigned kAxesOuterFirst[] = {kJ, kR, kK};

struct FrameSizes {
  int64_t g = 1, R = 1, c = 1;
  int64_t size(unsigned axis) const { return axis == kJ ? g : axis == kR ? R : c; }
  int64_t width(unsigned axes) const {
    int64_t n = 1;
    for (unsigned a : kAxesOuterFirst)
      if (axes & a) n *= size(a);
    return n;
  }
  // Call number `call` of a loop over `axes` (innermost fastest) as an
  // index per axis (by its bit).
  void indices(int64_t call, unsigned axes, int64_t* index) const {
    for (unsigned a : {kK, kR, kJ})
      if (axes & a) {
        index[a] = call % size(a);
        call /= size(a);
      }
  }
  // The step of `axis` in a tile of `axes`: the sizes of the axes inside it.
  int64_t step(unsigned axes, unsigned axis) const {
    int64_t n = 1;
    for (unsigned a : {kK, kR, kJ}) {
      if (a == axis) return n;
      if (axes & a) n *= size(a);
    }
    return n;
  }
};

// Whether the axes `vec` of a tile of `axes` are consecutive in its columns
// (one stepped run of elements for each index of the others).
bool consecutive(unsigned vec, unsigned axes) {
  bool started = false, ended = false;
  for (unsigned a : kAxesOuterFirst) {
    if (vec & a) {
      if (ended) return false;
      started = true;
    } else if (started && (axes & a)) {
      ended = true;
    }
  }
  return true;
}

// Whether the instructions from `from` on read and write stepped views only
// where the NEFF allows them (neff_format.cc: the data inputs and outputs of
// tensor_tensor, tensor_scalar and activation, a reduction's input, an
// iota's output).
bool stepsAllowed(Operation* from) {
  auto stepped = [](Value v) {
    auto view = v ? v.getDefiningOp<nc::TileColumnsOp>() : nc::TileColumnsOp();
    return view && view.getStep().value_or(1) > 1;
  };
  for (Operation* op = from; op; op = op->getNextNode()) {
    SmallVector<Value, 4> allowed;
    if (auto t = llvm::dyn_cast<nc::TensorTensorOp>(op)) allowed = {t.getOut(), t.getIn0(), t.getIn1()};
    else if (auto t = llvm::dyn_cast<nc::TensorScalarOp>(op)) allowed = {t.getOut(), t.getIn0()};
    else if (auto t = llvm::dyn_cast<nc::ActivationOp>(op)) allowed = {t.getOut(), t.getIn0()};
    else if (auto t = llvm::dyn_cast<nc::TensorReduceOp>(op)) allowed = {t.getIn0()};
    else if (auto t = llvm::dyn_cast<nc::IotaOp>(op)) allowed = {t.getOut()};
    else if (llvm::isa<nc::TileColumnsOp, nc::AllocTileOp>(op)) continue;
    for (Value v : op->getOperands())
      if (stepped(v) && !llvm::is_contained(allowed, v)) return false;
  }
  return true;
}

}  // namespace

LogicalResult KernelLowering::runMiddleFrame(int64_t& instructions, int64_t& dmas) {
  Block& old = kernel.getBody().front();
  auto yield = llvm::cast<nc::YieldOp>(old.getTerminator());
  SmallVector<Operation*> ops;  // the computing ops, in order
  Operation* firstReduction = nullptr;
  for (Operation& op : old.without_terminator()) {
    if (aten::isViewOp(&op) || llvm::isa<arith::ConstantOp>(op)) continue;
    ops.push_back(&op);
    if (!firstReduction && !aten::reducedDims(&op).empty()) firstReduction = &op;
  }
  if (!firstReduction) return kernel.emitError("internal: a middle-frame kernel without a reduction");
  const SmallVector<int64_t> dims = aten::reducedDims(firstReduction);
  const SmallVector<int64_t> shape(llvm::cast<RankedTensorType>(firstReduction->getOperand(0).getType()).getShape());
  const int64_t rank = int64_t(shape.size()), first = dims.front(), last = dims.back();
  int64_t R = 1, C = 1;
  for (int64_t d = first; d < rank; ++d) (d <= last ? R : C) *= shape[size_t(d)];
  // The innermost kept dim before the reduced ones longer than 1, whose
  // consecutive rows may share a partition.
  int64_t packDim = -1;
  for (int64_t d = 0; d < first; ++d)
    if (shape[size_t(d)] > 1) packDim = d;
  // Each returned value is a computed one, or a chain of reshapes of one
  // (its elements in order).
  returnedReshapes.clear();
  SmallVector<Value> storedValues;
  for (Value v : yield.getValues()) {
    Value root = v;
    while (Operation* def = root.getDefiningOp()) {
      if (!aten::isViewOp(def)) break;
      returnedReshapes.insert(def);
      root = def->getOperand(0);
    }
    storedValues.push_back(root);
    // Stored in its dtype: an f32 value whose only use is its returned cast
    // is computed straight into the cast's dtype (lowerOp), one rounding and
    // no copy (softmax's quotients, cast to bf16).
    yielded.insert(root);
  }
  if (failed(foldViews(old, /*allowTileAliases=*/false)) || failed(markImmediates(old))) return failure();

  // The strides of a view broadcast to `shape` (0 along broadcast dims).
  auto broadcastStrides = [&](const aten::StridedView& view, SmallVector<int64_t>& strides) {
    strides.assign(size_t(rank), 0);
    const int64_t offset = rank - int64_t(view.shape.size());
    if (offset < 0) return false;
    for (size_t j = 0; j < view.shape.size(); ++j) {
      const size_t i = size_t(offset) + j;
      if (view.shape[j] == shape[i]) strides[i] = shape[i] == 1 ? 0 : view.strides[j];
      else if (view.shape[j] != 1) return false;
    }
    return true;
  };
  llvm::DenseMap<Value, SmallVector<int64_t>> inputStrides;
  for (Operation* op : ops)
    for (Value v : op->getOperands()) {
      if (isImmediate(v) || inputStrides.count(v) || (v.getDefiningOp() && llvm::is_contained(ops, v.getDefiningOp())))
        continue;
      auto view = viewOf.find(v);
      SmallVector<int64_t> strides;
      if (view == viewOf.end() || !broadcastStrides(view->second, strides))
        return op->emitError("internal: a middle-frame kernel reads a value that is not a view of its input");
      inputStrides[v] = strides;
    }
  for (Operation* op : ops)
    if (!aten::reducedDims(op).empty() && aten::reducedDims(op) != dims)
      return op->emitError("internal: a middle-frame kernel's reductions over different dims");

  const int64_t budget = rowBudget;
  const int64_t bytesPerElement = middleFrameBytesPerElement(ops, product(shape));
  const bool readsOnce = middleFrameReadsOnce(ops, product(shape));
  std::optional<MiddleFrameSplit> split = chooseMiddleFrameSplit(shape, first, last, bytesPerElement, budget, readsOnce);
  if (!split) return kernel.emitError("internal: a middle-frame kernel's rows do not fit SBUF");
  SmallVector<Value> outHbm;
  Block* body = nullptr;
  // (Outlives the loop: finishBody ends the last body with it.)
  OpBuilder builder(kernel.getContext());
  b = &builder;
  for (;;) {
    const int64_t dim = split->dim, width = split->width, outer = shape[size_t(first)], inner = R / outer;
    const bool chunked = split->chunked(shape, first);
    FrameSizes sizes{1, R, split->columns};
    int64_t rows = split->rows;
    // The chunk's indices of the first reduced dim (all of them unchunked).
    int64_t chunkStart = 0, chunkLength = outer;
    // Short rows of all of C: g consecutive rows to a partition, aiming at
    // runs of kPackedRunBytes while 128 partitions stay busy.
    if (!chunked && sizes.c == C && packDim >= 0 && R * C * 2 < kShortRowBytes)
      for (int64_t g = 2; g <= shape[size_t(packDim)]; ++g) {
        if (shape[size_t(packDim)] % g) continue;
        if (rows / g < nc::kNumPartitions || g * R * C * bytesPerElement + 4096 > budget) break;
        sizes.g = g;
        if (g * R * C * 2 >= kPackedRunBytes) break;
      }
    rows /= sizes.g;
    const int64_t g = sizes.g, c = sizes.c;
    // The reductions' adds may take the GpSimd engine as well as the Vector
    // engine where no op over the full rows follows a reduction
    // (readsOnce) to keep those engines busy, the kernel has several tiles
    // (row tiles or chunks: their chains of adds are independent), and the
    // reduction would take the Vector engine longer than the tile's loads
    // take the DMA queues, so that the tiles' chains overlap (a sum of
    // squares over the 128 channels of [256, 128, 256], two row tiles of 3
    // chunks: 140.8 -> 108.7 us). Chains that wait for their loads run one
    // at a time, each on the faster GpSimd engine (the list scheduler's
    // choice), slower than tensor_reduce on the Vector engine: shared, a
    // sum of squares over the 512 channels of [16, 512, 1024] took 130.1 ->
    // 137.3 us. Ops after the reductions keep the engines busy: shared, a
    // softmax over dim 1 of [8192, 16, 2] took 29.1 -> 33.6 us, a centring
    // 20.0 -> 21.3.
    const bool severalTiles = chunked || rows > nc::kNumPartitions;
    const neff::DeviceParams& device = neff::Trn1();
    double tileLoadsFrom = 0;  // loadQueueNs when the row tile (the chunk) began
    auto tileLoadNs = [&] {
      if (!readsOnce || !severalTiles) return 0.0;
      return (loadQueueNs - tileLoadsFrom) / double(device.dma_queues);
    };
    auto axesOfStrides = [&](ArrayRef<int64_t> strides) {
      unsigned axes = 0;
      for (int64_t d = first; d < rank; ++d)
        if (strides[size_t(d)] != 0 && shape[size_t(d)] > 1) axes |= d <= last ? kR : kK;
      if (g > 1 && strides[size_t(packDim)] != 0) axes |= kJ;
      return axes;
    };
    // Each value's axes.
    llvm::DenseMap<Value, unsigned> axesOf;
    for (auto& [v, strides] : inputStrides) axesOf[v] = axesOfStrides(strides);
    for (Operation* op : ops) {
      unsigned axes = 0;
      for (Value v : op->getOperands())
        if (!isImmediate(v)) axes |= axesOf.lookup(v);
      axesOf[op->getResult(0)] = aten::reducedDims(op).empty() ? axes : axes & ~kR;
    }
    // The rows (the kept dims before the reduced ones, the packed one in
    // steps of g; the dims of C before the split one and its outer part)
    // and the columns of a tile of `axes`, as (size, stride) in a view
    // whose strides in the broadcast shape are `strides`.
    auto pairs = [&](ArrayRef<int64_t> strides, bool rowPart, unsigned axes) {
      SmallVector<std::pair<int64_t, int64_t>> out;
      if (rowPart) {
        for (int64_t d = 0; d < dim; ++d)
          if (d < first || d > last)
            out.push_back(d == packDim && g > 1 ? std::pair(shape[size_t(d)] / g, strides[size_t(d)] * g)
                                                : std::pair(shape[size_t(d)], strides[size_t(d)]));
        out.push_back({shape[size_t(dim)] / width, strides[size_t(dim)] * width});
        return out;
      }
      if (axes & kJ) out.push_back({g, strides[size_t(packDim)]});
      if (axes & kR)
        for (int64_t d = first; d <= last; ++d)
          out.push_back({d == first ? chunkLength : shape[size_t(d)], strides[size_t(d)]});
      if (axes & kK) {
        out.push_back({width, strides[size_t(dim)]});
        for (int64_t d = dim + 1; d < rank; ++d) out.push_back({shape[size_t(d)], strides[size_t(d)]});
      }
      if (out.empty()) out.push_back({1, 0});
      return out;
    };
    // A DMA of `tile` (the value's axes) to or from `hbm` through `strides`.
    auto transfer = [&](bool load, Value hbm, Value tile, ArrayRef<int64_t> strides, int64_t offset, unsigned axes,
                        int64_t row0, int64_t p) -> LogicalResult {
      Layout l;
      if (axes & kR) offset += chunkStart * strides[size_t(first)];
      if (failed(tileSpace(pairs(strides, true, axes), pairs(strides, false, axes), offset, &l))) return failure();
      emitDma(load, hbm, tile, l, row0, p, 0, sizes.width(axes));
      return success();
    };

    body = createIsaBody(old, outHbm);
    builder.setInsertionPointToEnd(body);
    auto fail = [&]() {
      body->erase();
      return failure();
    };
    // The tiles of an op's operands, inputs loaded on first use (those
    // that vary along r, the chunk of them).
    auto operandTiles = [&](Operation* op, int64_t row0, int64_t p,
                            SmallVector<std::pair<Value, unsigned>>& operands) -> LogicalResult {
      for (Value v : op->getOperands()) {
        if (isImmediate(v)) continue;
        if (!tiles.count(v)) {
          auto strides = inputStrides.find(v);
          if (strides == inputStrides.end()) return op->emitError("internal: a middle-frame operand without a tile");
          const unsigned axes = axesOf[v];
          Value tile = alloc(p, sizes.width(axes),
                             nc::deviceElementType(llvm::cast<RankedTensorType>(v.getType()).getElementType()));
          if (failed(transfer(/*load=*/true, hbmOf[v], tile, strides->second, viewOf[v].offset, axes, row0, p)))
            return failure();
          tiles[v] = tile;
        }
        operands.push_back({v, axesOf[v]});
      }
      return success();
    };
    // A returned value, in its own shape's order.
    auto store = [&](Value root, Value hbm, int64_t row0, int64_t p) -> LogicalResult {
      auto t = llvm::cast<RankedTensorType>(root.getType());
      SmallVector<int64_t> strides;
      if (!broadcastStrides(aten::contiguousView(t.getShape()), strides))
        return kernel.emitError("internal: a middle-frame kernel returns a value of another shape");
      const unsigned axes = axesOfStrides(strides);
      if (chunked && (axes & kR)) return kernel.emitError("internal: a chunked middle-frame kernel returns a full value");
      FailureOr<Value> tile = materializeFrameValue(root, axesOf.lookup(root), axes, p, sizes.g, R, c,
                                                    llvm::cast<MemRefType>(hbm.getType()));
      if (failed(tile)) return failure();
      return transfer(/*load=*/false, hbm, *tile, strides, 0, axes, row0, p);
    };
    // Chunked: the ops along r and the reductions over them, a chunk at a
    // time (the kernel reads its input once: none depends on a reduction).
    auto inChunks = [&](Operation* op) {
      return (axesOf[op->getResult(0)] & kR) ||
             (!aten::reducedDims(op).empty() && (axesOf[op->getOperand(0)] & kR));
    };
    for (int64_t row0 = 0; row0 < rows; row0 += nc::kNumPartitions) {
      const int64_t p = std::min<int64_t>(nc::kNumPartitions, rows - row0);
      r0 = row0;
      tiles.clear();
      tileLoadsFrom = loadQueueNs;
      if (!chunked) ++iteration;
      // The ops outside the chunks whose operands are ready (all of them
      // unchunked, in order), then (chunked) the chunks, then the rest.
      llvm::DenseSet<Operation*> done;
      auto lowerReady = [&]() -> LogicalResult {
        for (Operation* op : ops) {
          if (done.contains(op) || (chunked && inChunks(op))) continue;
          if (!llvm::all_of(op->getOperands(), [&](Value v) {
                Operation* def = v.getDefiningOp();
                return !def || !llvm::is_contained(ops, def) || done.contains(def);
              }))
            continue;
          SmallVector<std::pair<Value, unsigned>> operands;
          if (failed(operandTiles(op, row0, p, operands))) return failure();
          std::array<Value, 2> acc;
          if (!aten::reducedDims(op).empty()
                  ? failed(lowerFrameReduction(op, p, sizes.g, R, c, axesOf[op->getOperand(0)], acc, 0, 1, R,
                                               tileLoadNs()))
                  : failed(lowerFramePieces(op, axesOf[op->getResult(0)], operands, p, sizes.g, R, c)))
            return failure();
          done.insert(op);
        }
        return success();
      };
      if (failed(lowerReady())) return fail();
      if (chunked) {
        llvm::DenseMap<Operation*, std::array<Value, 2>> partial;
        const int64_t chunks = (outer + split->chunk - 1) / split->chunk;
        for (chunkStart = 0; chunkStart < outer; chunkStart += split->chunk) {
          ++iteration;
          tileLoadsFrom = loadQueueNs;
          chunkLength = std::min(split->chunk, outer - chunkStart);
          sizes.R = chunkLength * inner;
          // (The previous chunk's tiles along r.)
          SmallVector<Value> stale;
          for (auto& [v, tile] : tiles)
            if (axesOf.lookup(v) & kR) stale.push_back(v);
          for (Value v : stale) tiles.erase(v);
          for (Operation* op : ops) {
            if (!inChunks(op)) continue;
            SmallVector<std::pair<Value, unsigned>> operands;
            if (failed(operandTiles(op, row0, p, operands))) return fail();
            if (aten::reducedDims(op).empty()) {
              if (failed(lowerFramePieces(op, axesOf[op->getResult(0)], operands, p, 1, sizes.R, c))) return fail();
              continue;
            }
            if (failed(lowerFrameReduction(op, p, 1, sizes.R, c, axesOf[op->getOperand(0)], partial[op],
                                           chunkStart / split->chunk, chunks, R, tileLoadNs())))
              return fail();
          }
        }
        chunkStart = 0, chunkLength = outer, sizes.R = R;
        for (Operation* op : ops)
          if (inChunks(op)) done.insert(op);
        if (failed(lowerReady())) return fail();
      }
      for (auto [root, hbm] : llvm::zip(storedValues, outHbm))
        if (failed(store(root, hbm, row0, p))) return fail();
    }
    // A row tile whose values overflow SBUF after all (the estimate misses
    // a lowering's temporaries) is lowered again with narrower blocks.
    if (sbufPeakBytes(*body) <= rowBudget * 3 / 2) break;
    std::optional<MiddleFrameSplit> narrower =
        chunked ? (split->chunk > 1 ? chooseMiddleFrameSplit(shape, first, last, bytesPerElement, budget, true,
                                                             INT64_MAX, split->chunk / 2)
                                    : std::nullopt)
                : chooseMiddleFrameSplit(shape, first, last, bytesPerElement, budget, readsOnce, split->columns - 1);
    if (!narrower) break;
    split = narrower;
    body->erase();
    outHbm.clear();
    tiles.clear();
    constantTiles.clear();
    pendingTransposed.clear();
    numInst = 0;
    numDma = 0;
  }
  finishBody(old, instructions, dmas);
  return success();
}

// An elementwise op over values of the given axes: in pieces over some of
// the result's axes, once for every index of the others, the pieces chosen
// so that each operand is one stepped run of elements in a piece (or one
// element, a per-row scalar) and the engines take least time for them (at
// least 64 cycles an instruction). Each piece writes its part of one
// result tile.
LogicalResult KernelLowering::lowerFramePieces(Operation* op, unsigned resultAxes,
                                               ArrayRef<std::pair<Value, unsigned>> operands, int64_t p, int64_t g,
                                               int64_t R, int64_t c) {
  const FrameSizes sizes{g, R, c};
  Value result = op->getResult(0);
  const double access = neff::Trn1().sbuf_access_cycles;
  unsigned vec = 0;
  double best = std::numeric_limits<double>::infinity();
  for (unsigned candidate = 1; candidate <= 7; ++candidate) {
    if ((candidate & resultAxes) != candidate || !consecutive(candidate, resultAxes)) continue;
    if (!llvm::all_of(operands, [&](const auto& o) {
          const unsigned shared = o.second & candidate;
          return shared == 0 || (shared == candidate && consecutive(candidate, o.second));
        }))
      continue;
    const double n = double(sizes.width(candidate)), calls = double(sizes.width(resultAxes & ~candidate));
    const double cost = calls * (std::max(64.0, n) + access);
    if (cost < best) best = cost, vec = candidate;
  }
  if (resultAxes == 0) vec = 0;  // per-row values: one instruction over [p, 1]
  else if (!vec) return op->emitError("internal: a middle-frame op whose operands no piece reads in runs");
  const unsigned loop = resultAxes & ~vec;
  const int64_t n = sizes.width(vec), calls = sizes.width(loop);
  // The part of a tile of `axes` for loop indices `index` (per axis): a
  // stepped run of n elements, or one element.
  auto part = [&](Value tile, unsigned axes, ArrayRef<int64_t> index) -> std::pair<Value, bool> {
    int64_t start = 0;
    for (unsigned a : kAxesOuterFirst)
      if (axes & loop & a) start += index[a] * sizes.step(axes, a);
    if (!(axes & vec)) return {tileColumns(*b, loc, tile, start, 1), true};
    unsigned inner = 0;
    for (unsigned a : kAxesOuterFirst)
      if (vec & a) inner = a;
    return {steppedColumns(*b, loc, tile, start, n, sizes.step(axes, inner)), false};
  };
  Value whole;
  for (int64_t call = 0; call < calls; ++call) {
    int64_t index[8] = {0};
    sizes.indices(call, loop, index);
    Operation* before = b->getInsertionBlock()->empty() ? nullptr : &b->getInsertionBlock()->back();
    const auto cachedConstants = constantTiles;
    const Value wholeBefore = whole;
    // One piece: the operands bound to their parts (copied first into tiles
    // of their own where `contiguous`), the op lowered, and its result
    // written into the whole result tile's part (by the instructions that
    // compute it where they may, else copied).
    auto piece = [&](bool contiguous) -> LogicalResult {
      llvm::DenseMap<Value, Value> saved;
      for (auto [v, axes] : operands) {
        if (saved.count(v)) continue;
        saved[v] = tiles[v];
        auto [view, scalar] = part(tiles[v], axes, index);
        if (auto stepped = view.getDefiningOp<nc::TileColumnsOp>();
            contiguous && stepped && stepped.getStep().value_or(1) > 1) {
          Value copy = alloc(p, n, llvm::cast<MemRefType>(view.getType()).getElementType());
          copyTile(copy, view, op);
          view = copy;
        }
        tiles[v] = view;
        layouts[v].kind = scalar ? Kind::Row : Kind::Full;
      }
      Operation* last = b->getInsertionBlock()->empty() ? nullptr : &b->getInsertionBlock()->back();
      LogicalResult lowered = lowerOp(op, p, n);
      for (auto [v, t] : saved) tiles[v] = t;
      if (failed(lowered) || isImmediate(result)) return lowered;
      layouts[result].kind = resultAxes == 0 ? Kind::Row : Kind::Full;
      if (calls == 1) return success();
      Value computed = tiles[result];
      auto fresh = contiguous ? nc::AllocTileOp() : computed.getDefiningOp<nc::AllocTileOp>();
      if (fresh) {
        bool after = false;
        for (Operation* o = last ? last->getNextNode() : &b->getInsertionBlock()->front(); o && !after;
             o = o->getNextNode())
          after = o == fresh.getOperation();
        if (!after) fresh = nc::AllocTileOp();
      }
      Type elem = llvm::cast<MemRefType>(computed.getType()).getElementType();
      if (whole && llvm::cast<MemRefType>(whole.getType()).getElementType() != elem) fresh = nc::AllocTileOp();
      OpBuilder::InsertionGuard guard(*b);
      if (fresh) b->setInsertionPoint(fresh);
      if (!whole) whole = alloc(p, sizes.width(resultAxes), elem);
      Value into = part(whole, resultAxes, index).first;
      if (fresh) {
        fresh.getResult().replaceAllUsesWith(into);
        fresh.erase();
      } else {
        b->setInsertionPointToEnd(b->getInsertionBlock());
        copyTile(into, computed, op);
      }
      tiles[result] = whole;
      return success();
    };
    if (failed(piece(/*contiguous=*/false))) return failure();
    if (isImmediate(result)) return success();
    Operation* firstNew = before ? before->getNextNode() : &b->getInsertionBlock()->front();
    if (!stepsAllowed(firstNew)) {
      // An instruction that may not step (a select) read or wrote a stepped
      // part: the piece again, through contiguous copies.
      SmallVector<Operation*> emitted;
      for (Operation* o = firstNew; o; o = o->getNextNode()) emitted.push_back(o);
      for (Operation* o : llvm::reverse(emitted)) {
        o->dropAllUses();
        o->erase();
      }
      constantTiles = cachedConstants;
      whole = wholeBefore;
      if (failed(piece(/*contiguous=*/true))) return failure();
    }
    if (calls == 1) return success();
  }
  return success();
}

LogicalResult KernelLowering::lowerFrameReduction(Operation* op, int64_t p, int64_t g, int64_t R, int64_t c,
                                                  unsigned inAxes, std::array<Value, 2>& accs, int64_t chunk,
                                                  int64_t chunks, int64_t totalR, double tileLoadNs) {
  Value x = op->getOperand(0), result = op->getResult(0);
  const bool mean = llvm::isa<aten::MeanDimOp>(op), sum = llvm::isa<aten::SumDimIntListOp>(op);
  StringRef alu = llvm::isa<aten::AmaxOp>(op) ? "max" : "add";
  Type elem = nc::deviceElementType(llvm::cast<RankedTensorType>(result.getType()).getElementType());
  if (isImmediate(x)) {
    layouts[result].kind = Kind::Imm;
    layouts[result].imm = sum ? layouts[x].imm * double(totalR) : layouts[x].imm;
    return success();
  }
  Value in = tiles[x];
  const int64_t gj = inAxes & kJ ? g : 1, ck = inAxes & kK ? c : 1;
  Value acc;
  if (inAxes & kR) {
    const bool bf16 = llvm::cast<MemRefType>(in.getType()).getElementType().isBF16();
    auto [method, vectorNs] = cheapestMiddleReduction(gj, R, R, ck, bf16, false);
    if (vectorNs > tileLoadNs && tileLoadNs > 0) method = cheapestMiddleReduction(gj, R, R, ck, bf16, true).first;
    acc = reduceMiddleStep(accs, chunk, chunks, in, p, gj, R, ck, method, alu, op);
    if (!acc) return success();
  }
  // A sum of R equal values is R times the value; a mean or maximum, the value.
  const double scale = mean && acc ? 1.0 / double(totalR) : sum && !acc ? double(totalR) : 1.0;
  Value source = acc ? acc : in;
  Value out = source;
  if (scale != 1.0 || llvm::cast<MemRefType>(source.getType()).getElementType() != elem || !acc) {
    out = alloc(p, gj * ck, elem);
    tensorScalar(out, source, Value(), "mul", scale, op);
  }
  tiles[result] = out;
  layouts[result].kind = (inAxes & ~kR) == 0 ? Kind::Row : Kind::Full;
  return success();
}

FailureOr<Value> KernelLowering::materializeFrameValue(Value v, unsigned have, unsigned want, int64_t p, int64_t g,
                                                       int64_t R, int64_t c, MemRefType hbm) {
  const FrameSizes sizes{g, R, c};
  Operation* src = v.getDefiningOp();
  const int64_t width = sizes.width(want);
  Type elem = nc::deviceElementType(hbm.getElementType());
  if (isImmediate(v)) return broadcastRow(Value(), layouts[v].imm, p, width, elem, src);
  Value t = tiles.lookup(v);
  if (!t || (have & ~want)) return kernel.emitError("internal: a middle-frame value without a tile of its axes");
  Type tileElem = llvm::cast<MemRefType>(t.getType()).getElementType();
  if (have != want) {
    // Copied into a tile of all the axes, a piece at a time: runs of the
    // value where it varies along the piece, else each element written
    // across it (its difference with zeros: exact, -0 and NaN included).
    Value full = alloc(p, width, tileElem);
    Value zeros;
    unsigned vec = 0;
    for (unsigned candidate : {7u, 3u, 6u, 1u, 2u, 4u}) {
      const unsigned shared = have & candidate;
      if ((candidate & want) == candidate && consecutive(candidate, want) &&
          (shared == 0 || (shared == candidate && consecutive(candidate, have)))) {
        vec = candidate;
        break;
      }
    }
    if (!vec) return kernel.emitError("internal: a middle-frame value that no piece copies in runs");
    const unsigned loop = want & ~vec;
    const int64_t n = sizes.width(vec);
    unsigned inner = 0;
    for (unsigned a : kAxesOuterFirst)
      if (vec & a) inner = a;
    for (int64_t call = 0; call < sizes.width(loop); ++call) {
      int64_t index[8] = {0};
      sizes.indices(call, loop, index);
      int64_t to = 0, from = 0;
      for (unsigned a : kAxesOuterFirst)
        if (loop & a) to += index[a] * sizes.step(want, a), from += have & a ? index[a] * sizes.step(have, a) : 0;
      Value into = steppedColumns(*b, loc, full, to, n, sizes.step(want, inner));
      if (have & vec) {
        copyTile(into, steppedColumns(*b, loc, t, from, n, sizes.step(have, inner)), src);
      } else {
        if (!zeros) {
          zeros = alloc(p, n, tileElem);
          fillConstant(zeros, 0.0, src);
        }
        tensorScalar(into, zeros, tileColumns(*b, loc, t, from, 1), "sub", 0.0, src, /*reverse=*/true);
      }
    }
    t = full;
  }
  // The DMA converts from f32 tiles only (a cast of an f16 value to f32
  // keeps the f16 tile).
  if (tileElem != elem && !tileElem.isF32()) {
    Value converted = alloc(p, width, llvm::isa<FloatType>(elem) ? elem : b->getF32Type());
    copyTile(converted, t, src);
    t = converted;
  }
  return t;
}

}  // namespace neuroncc::lowering
