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
//===----------------------------------------------------------------------===//

#include "device_model.h"
#include "passes/KernelLowering.h"
#include "passes/ReductionCost.h"
#include "llvm/ADT/MapVector.h"

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

}  // namespace neuroncc

namespace neuroncc::lowering {

namespace {

// The axes a value varies along: bit 0 the columns (k), bit 1 the reduced
// elements (r).
enum Axes : unsigned { kRow = 0, kBlock = 1, kRVec = 2, kFull = 3 };

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
  int64_t R = 1;
  for (int64_t d = first; d <= last; ++d) R *= shape[size_t(d)];
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
  auto axesOfStrides = [&](ArrayRef<int64_t> strides) {
    unsigned axes = kRow;
    for (int64_t d = first; d < rank; ++d)
      if (strides[size_t(d)] != 0 && shape[size_t(d)] > 1) axes |= d <= last ? kRVec : kBlock;
    return Axes(axes);
  };
  // Each value's axes; the inputs' strides in the broadcast shape.
  llvm::DenseMap<Value, Axes> axesOf;
  llvm::DenseMap<Value, SmallVector<int64_t>> inputStrides;
  for (Operation* op : ops) {
    unsigned axes = kRow;
    for (Value v : op->getOperands()) {
      if (layouts.count(v) && layouts[v].kind == Kind::Imm) continue;
      if (!axesOf.count(v)) {
        auto view = viewOf.find(v);
        SmallVector<int64_t> strides;
        if (view == viewOf.end() || !broadcastStrides(view->second, strides))
          return op->emitError("internal: a middle-frame kernel reads a value that is not a view of its input");
        axesOf[v] = axesOfStrides(strides);
        inputStrides[v] = strides;
      }
      axes |= axesOf[v];
    }
    if (!aten::reducedDims(op).empty()) {
      if (aten::reducedDims(op) != dims)
        return op->emitError("internal: a middle-frame kernel's reductions over different dims");
      axes &= kBlock;
    }
    axesOf[op->getResult(0)] = Axes(axes);
  }

  // The rows: the dims before the reduced ones, the dims of C before the
  // split one and its outer part; the columns of each kind of value.
  const int64_t budget = rowBudget;
  const int64_t bytesPerElement = middleFrameBytesPerElement(ops, product(shape));
  std::optional<MiddleFrameSplit> split = chooseMiddleFrameSplit(shape, first, last, bytesPerElement, budget);
  if (!split) return kernel.emitError("internal: a middle-frame kernel's rows do not fit SBUF");
  SmallVector<Value> outHbm;
  Block* body = nullptr;
  for (;;) {
    const int64_t c = split->columns, rows = split->rows, dim = split->dim, width = split->width;
    auto pairs = [&](ArrayRef<int64_t> strides, bool rowPart, unsigned axes) {
      SmallVector<std::pair<int64_t, int64_t>> out;
      if (rowPart) {
        for (int64_t d = 0; d < dim; ++d)
          if (d < first || d > last) out.push_back({shape[size_t(d)], strides[size_t(d)]});
        out.push_back({shape[size_t(dim)] / width, strides[size_t(dim)] * width});
        return out;
      }
      if (axes & kRVec)
        for (int64_t d = first; d <= last; ++d) out.push_back({shape[size_t(d)], strides[size_t(d)]});
      if (axes & kBlock) {
        out.push_back({width, strides[size_t(dim)]});
        for (int64_t d = dim + 1; d < rank; ++d) out.push_back({shape[size_t(d)], strides[size_t(d)]});
      }
      if (out.empty()) out.push_back({1, 0});
      return out;
    };
    auto widthOf = [&](unsigned axes) { return (axes & kRVec ? R : 1) * (axes & kBlock ? c : 1); };
    // A DMA of `tile` (the value's axes) to or from `hbm` through `strides`.
    auto transfer = [&](bool load, Value hbm, Value tile, ArrayRef<int64_t> strides, int64_t offset, unsigned axes,
                         int64_t row0, int64_t p) -> LogicalResult {
      Layout l;
      if (failed(tileSpace(pairs(strides, true, axes), pairs(strides, false, axes), offset, &l))) return failure();
      emitDma(load, hbm, tile, l, row0, p, 0, widthOf(axes));
      return success();
    };

    body = createIsaBody(old, outHbm);
    OpBuilder builder = OpBuilder::atBlockEnd(body);
    b = &builder;
    auto fail = [&]() {
      body->erase();
      return failure();
    };
    const double access = neff::Trn1().sbuf_access_cycles;
    for (int64_t row0 = 0; row0 < rows; row0 += nc::kNumPartitions) {
      const int64_t p = std::min<int64_t>(nc::kNumPartitions, rows - row0);
      ++iteration;
      r0 = row0;
      tiles.clear();
      // The tile of `v` (an input loaded on first use).
      auto tileFor = [&](Value v) -> FailureOr<Value> {
        if (auto it = tiles.find(v); it != tiles.end()) return it->second;
        auto strides = inputStrides.find(v);
        if (strides == inputStrides.end()) return Value();
        const unsigned axes = axesOf[v];
        Value tile = alloc(p, widthOf(axes), nc::deviceElementType(llvm::cast<RankedTensorType>(v.getType()).getElementType()));
        if (failed(transfer(/*load=*/true, hbmOf[v], tile, strides->second, viewOf[v].offset, axes, row0, p)))
          return failure();
        return tiles[v] = tile;
      };
      for (Operation* op : ops) {
        Value result = op->getResult(0);
        const unsigned resultAxes = axesOf[result];
        SmallVector<Value> operands;
        for (Value v : op->getOperands()) {
          if (layouts.count(v) && layouts[v].kind == Kind::Imm) continue;
          FailureOr<Value> t = tileFor(v);
          if (failed(t)) return fail();
          if (!*t) {
            op->emitError("internal: a middle-frame operand without a tile");
            return fail();
          }
          operands.push_back(v);
        }
        if (!aten::reducedDims(op).empty()) {
          if (failed(lowerFrameReduction(op, p, R, c, axesOf[op->getOperand(0)]))) return fail();
          continue;
        }
        // Binds each operand as the part `bind` gives (a tile and whether
        // it is a per-row scalar), lowers the op over `n` columns, and
        // restores the whole tiles.
        auto lowerBound = [&](int64_t n, llvm::function_ref<std::pair<Value, bool>(Value)> bind) -> LogicalResult {
          llvm::DenseMap<Value, Value> whole;
          for (Value v : operands) {
            if (whole.count(v)) continue;
            whole[v] = tiles[v];
            auto [part, scalar] = bind(v);
            tiles[v] = part;
            layouts[v].kind = scalar ? Kind::Row : Kind::Full;
          }
          LogicalResult ok = lowerOp(op, p, n);
          for (auto [v, t] : whole) tiles[v] = t;
          return ok;
        };
        const bool mixed = resultAxes == kFull && llvm::any_of(operands, [&](Value v) {
                             return axesOf[v] == kBlock || axesOf[v] == kRVec;
                           });
        if (!mixed) {
          if (failed(lowerBound(widthOf(resultAxes), [&](Value v) {
                return std::pair(tiles[v], axesOf[v] == kRow);
              })))
            return fail();
          if (layouts[result].kind != Kind::Imm) layouts[result].kind = resultAxes == kRow ? Kind::Row : Kind::Full;
          continue;
        }
        // Per block (R instructions of c) or per column (c of R), the
        // cheaper under the engines' per-instruction cost.
        const bool perBlock = double(R) * (std::max(64.0, double(c)) + access) <=
                              double(c) * (std::max(64.0, double(R)) + access);
        Value full;
        const int64_t parts = perBlock ? R : c;
        for (int64_t i = 0; i < parts; ++i) {
          auto bind = [&](Value v) -> std::pair<Value, bool> {
            Value t = tiles[v];
            switch (axesOf[v]) {
              case kFull:
                return {perBlock ? tileColumns(*b, loc, t, i * c, c) : steppedColumns(*b, loc, t, i, R, c), false};
              case kBlock:
                return perBlock ? std::pair(t, false) : std::pair(tileColumns(*b, loc, t, i, 1), true);
              case kRVec:
                return perBlock ? std::pair(tileColumns(*b, loc, t, i, 1), true) : std::pair(t, false);
              default:
                return {t, true};
            }
          };
          Operation* before = builder.getInsertionBlock()->empty() ? nullptr : &builder.getInsertionBlock()->back();
          if (failed(lowerBound(perBlock ? c : R, bind))) return fail();
          Value part = tiles[result];
          auto fresh = part.getDefiningOp<nc::AllocTileOp>();
          if (fresh) {
            bool after = false;
            for (Operation* o = before ? before->getNextNode() : &builder.getInsertionBlock()->front(); o && !after;
                 o = o->getNextNode())
              after = o == fresh.getOperation();
            if (!after) fresh = nc::AllocTileOp();
          }
          Type elem = llvm::cast<MemRefType>(part.getType()).getElementType();
          if (full && llvm::cast<MemRefType>(full.getType()).getElementType() != elem) fresh = nc::AllocTileOp();
          // The part's instructions write the full tile's columns directly.
          OpBuilder::InsertionGuard guard(builder);
          if (fresh) builder.setInsertionPoint(fresh);
          if (!full) full = alloc(p, R * c, elem);
          Value into = perBlock ? tileColumns(*b, loc, full, i * c, c) : steppedColumns(*b, loc, full, i, R, c);
          if (fresh) {
            fresh.getResult().replaceAllUsesWith(into);
            fresh.erase();
          } else {
            builder.setInsertionPointToEnd(builder.getInsertionBlock());
            copyTile(into, part, op);
          }
        }
        tiles[result] = full;
        layouts[result].kind = Kind::Full;
      }
      // The returned values, each in its own shape's order.
      for (auto [root, hbm] : llvm::zip(storedValues, outHbm)) {
        auto t = llvm::cast<RankedTensorType>(root.getType());
        SmallVector<int64_t> strides;
        aten::StridedView out = aten::contiguousView(t.getShape());
        if (!broadcastStrides(out, strides)) {
          kernel.emitError("internal: a middle-frame kernel returns a value of another shape");
          return fail();
        }
        const unsigned axes = axesOfStrides(strides);
        FailureOr<Value> tile = materializeFrameValue(root, axesOf.lookup(root), axes, p, R, c,
                                                      llvm::cast<MemRefType>(hbm.getType()));
        if (failed(tile) || failed(transfer(/*load=*/false, hbm, *tile, strides, 0, axes, row0, p))) return fail();
      }
    }
    // A row tile whose values overflow SBUF after all (the estimate misses
    // a lowering's temporaries) is lowered again with narrower blocks.
    if (sbufPeakBytes(*body) <= rowBudget * 3 / 2) break;
    std::optional<MiddleFrameSplit> narrower =
        chooseMiddleFrameSplit(shape, first, last, bytesPerElement, budget, split->columns - 1);
    if (!narrower) break;
    split = narrower;
    body->erase();
    outHbm.clear();
    tiles.clear();
    constantTiles.clear();
    numInst = 0;
    numDma = 0;
  }
  finishBody(old, instructions, dmas);
  return success();
}

LogicalResult KernelLowering::lowerFrameReduction(Operation* op, int64_t p, int64_t R, int64_t c, unsigned inAxes) {
  Value x = op->getOperand(0), result = op->getResult(0);
  const bool mean = llvm::isa<aten::MeanDimOp>(op), sum = llvm::isa<aten::SumDimIntListOp>(op);
  StringRef alu = llvm::isa<aten::AmaxOp>(op) ? "max" : "add";
  Type elem = nc::deviceElementType(llvm::cast<RankedTensorType>(result.getType()).getElementType());
  Type f32 = b->getF32Type();
  if (layouts.count(x) && layouts[x].kind == Kind::Imm) {
    layouts[result].kind = Kind::Imm;
    layouts[result].imm = sum ? layouts[x].imm * double(R) : layouts[x].imm;
    return success();
  }
  Value in = tiles[x];
  const int64_t width = llvm::cast<MemRefType>(in.getType()).getDimSize(1);
  Value acc;
  if (inAxes & kRVec) {
    // Over the R elements: one per column (or per row).
    const int64_t n = inAxes & kBlock ? c : 1;
    acc = alloc(p, n, f32);
    if (n == 1) {
      setSource(b->create<nc::TensorReduceOp>(loc, acc, in, b->getStringAttr(alu)), op);
    } else {
      const auto method = cheapestMiddleReduction(1, R, R, c, llvm::cast<MemRefType>(in.getType()).getElementType().isBF16()).first;
      reduceMiddleTile(acc, in, 1, R, c, method == MiddleReductionMethod::PerColumn ? method : MiddleReductionMethod::PerBlock,
                       alu, /*started=*/false, op);
    }
  }
  // A sum of R equal values is R times the value; a mean or maximum, the value.
  const double scale = mean && (inAxes & kRVec) ? 1.0 / double(R) : sum && !(inAxes & kRVec) ? double(R) : 1.0;
  Value source = acc ? acc : in;
  const int64_t n = acc ? llvm::cast<MemRefType>(acc.getType()).getDimSize(1) : width;
  Value out = source;
  if (scale != 1.0 || llvm::cast<MemRefType>(source.getType()).getElementType() != elem || !acc) {
    out = alloc(p, n, elem);
    tensorScalar(out, source, Value(), "mul", scale, op);
  }
  tiles[result] = out;
  layouts[result].kind = n == 1 ? Kind::Row : Kind::Full;
  return success();
}

FailureOr<Value> KernelLowering::materializeFrameValue(Value v, unsigned have, unsigned want, int64_t p, int64_t R,
                                                       int64_t c, MemRefType hbm) {
  Operation* src = v.getDefiningOp();
  const int64_t width = (want & kRVec ? R : 1) * (want & kBlock ? c : 1);
  Type elem = nc::deviceElementType(hbm.getElementType());
  if (layouts.count(v) && layouts[v].kind == Kind::Imm) return broadcastRow(Value(), layouts[v].imm, p, width, elem, src);
  Value t = tiles.lookup(v);
  if (!t) return kernel.emitError("internal: a middle-frame value without a tile");
  Type tileElem = llvm::cast<MemRefType>(t.getType()).getElementType();
  if (have == kRow && want != kRow) {
    t = broadcastRow(t, 0.0, p, width, tileElem, src);
  } else if (have != want) {
    // A Block or an RVec across the blocks or the columns of a Full tile.
    Value full = alloc(p, width, tileElem);
    if (have == kBlock) {
      for (int64_t i = 0; i < R; ++i) copyTile(tileColumns(*b, loc, full, i * c, c), t, src);
    } else {
      for (int64_t k = 0; k < c; ++k) copyTile(steppedColumns(*b, loc, full, k, R, c), t, src);
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
