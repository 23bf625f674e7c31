//===- LowerResident.cpp - kernels in passes over rows kept in SBUF --------===//
//
// A kernel marked nc.resident_rows (passes/FormKernels.cpp, residentRowsFit)
// holds ops that need a reduced value at every element of rows too long to
// stay whole in SBUF, but its inputs fit: each row tile loads them once into
// one tile per input and makes one pass over their column chunks per level
// of reductions (docs/compiler.md, "Lower to the ISA").
//
//===----------------------------------------------------------------------===//

#include "passes/KernelLowering.h"
#include "llvm/ADT/MapVector.h"

namespace neuroncc::lowering {

const OnlineSum* KernelLowering::onlineRole(Operation* op) const {
  for (const OnlineSum& m : onlineSums)
    if (op == m.shifted || op == m.exp || op == m.rowSum) return &m;
  return nullptr;
}

// The subtraction or exp of a softmax normalizer (its sum is not).
bool KernelLowering::isOnlinePart(Operation* op) const {
  const OnlineSum* m = onlineRole(op);
  return m && op != m->rowSum;
}

// A value of a full row (rows x cols elements) rather than one per row.
bool KernelLowering::fullWidth(Value v) const {
  auto t = llvm::dyn_cast<RankedTensorType>(v.getType());
  return t && space.cols > 1 && t.getNumElements() == space.rows * space.cols;
}

// What a pass lowers chunk by chunk: full-width ops, and reductions of
// full-width values (a reduction of a per-row value is a per-row op).
bool KernelLowering::inResidentPass(Operation* op) const {
  if (op->getNumResults() != 1) return false;
  if (!aten::reducedDims(op).empty()) return fullWidth(op->getOperand(0));
  return fullWidth(op->getResult(0));
}

// Levels of the ops. An op reading a reduction's result is one level above
// the reduction (a softmax normalizer's subtraction and exp keep its
// maximum's level: they run in the same pass, online, and its sum stands
// for a per-row op one level up). Views keep their source's level.
void KernelLowering::planResidentRows(Block& body) {
  residentLevel.clear();
  residentMaxLevel = 0;
  for (Operation& op : body.without_terminator()) {
    int level = 0;
    for (Value v : op.getOperands())
      if (Operation* def = v.getDefiningOp(); def && residentLevel.count(def)) {
        bool endsPass = !aten::reducedDims(def).empty() && inResidentPass(def) && !onlineRole(def);
        level = std::max(level, residentLevel[def] + (endsPass ? 1 : 0));
      }
    if (const OnlineSum* m = onlineRole(&op)) level = residentLevel.lookup(m->rowMax) + (&op == m->rowSum ? 1 : 0);
    residentLevel[&op] = level;
    residentMaxLevel = std::max(residentMaxLevel, level);
  }
}

// One row tile of p rows: pass L lowers, chunk by chunk, its level-L
// reductions and the full-width ops of level L or below that they or
// level-L full-width ops and outputs need (recomputed from the inputs);
// per-row ops of level L run once before it. Full-width outputs are stored
// by the pass of their level, per-row ones at the end.
LogicalResult KernelLowering::lowerResidentRows(Block& body, ArrayRef<Value> hbmValues, nc::YieldOp yield,
                                                ArrayRef<Value> outHbm, ArrayRef<Operation*> reductions,
                                                int64_t chunk, int64_t p) {
  llvm::DenseMap<Value, Value> rowTiles;  // per-row values so far
  // Full-width inputs read in whole rows (long contiguous runs, few
  // transfers) into one tile each; every pass reads its chunks' columns.
  // Other inputs (broadcast rows, strided columns) load per chunk.
  llvm::MapVector<Value, Value> wholeLoads;
  for (Value v : hbmValues) {
    const Layout l = layouts.lookup(v);
    bool broadcast = false;
    for (auto [stride, size] : llvm::zip(l.rowStrides, space.lead)) broadcast |= stride == 0 && size > 1;
    if (l.kind != Kind::Full || broadcast || l.colStrides.empty() || l.colStrides.back() != 1) continue;
    Value tile = alloc(p, space.cols, nc::deviceElementType(llvm::cast<RankedTensorType>(v.getType()).getElementType()));
    for (int64_t c = 0; c < space.cols; c += chunk)
      emitDma(/*load=*/true, hbmOf[v], tileColumns(*b, loc, tile, c, std::min(chunk, space.cols - c)), l, r0, p,
              c, std::min(chunk, space.cols - c));
    wholeLoads[v] = tile;
  }
  auto perRowStep = [&](int level) -> LogicalResult {
    tiles = rowTiles;
    c0 = 0;
    accumulating = false;
    for (Operation& op : body.without_terminator()) {
      if (op.getNumResults() != 1 || residentLevel.lookup(&op) != level || isOnlinePart(&op) ||
          llvm::isa<arith::ConstantOp>(op) || (aten::isViewOp(&op) ? fullWidth(op.getResult(0)) : inResidentPass(&op)))
        continue;
      if (aten::isViewOp(&op)) {
        aliasTile(op);
      } else if (const OnlineSum* m = summedOnline(&op)) {
        finalizeOnlineSum(*m, p);
      } else if (failed(lowerOp(&op, p, 1))) {
        return failure();
      }
    }
    rowTiles = tiles;
    return success();
  };
  for (int level = 0; level <= residentMaxLevel; ++level) {
    if (failed(perRowStep(level))) return failure();
    // What this pass lowers at full width: level-L ops and outputs, and
    // what they read at full width, transitively.
    llvm::DenseSet<Operation*> needed;
    SmallVector<Operation*> work;
    for (Operation& op : body.without_terminator())
      if (residentLevel.lookup(&op) == level && !isOnlinePart(&op) && inResidentPass(&op)) work.push_back(&op);
    for (const OnlineSum& m : onlineSums)
      if (residentLevel.lookup(m.rowMax) == level) work.push_back(m.input.getDefiningOp());
    while (!work.empty()) {
      Operation* op = work.pop_back_val();
      if (!op || op->getBlock() != &body || !needed.insert(op).second) continue;
      for (Value v : op->getOperands())
        if (Operation* def = v.getDefiningOp(); def && fullWidth(v) && aten::reducedDims(def).empty())
          work.push_back(def);
    }
    if (needed.empty()) continue;
    llvm::DenseMap<Value, Value> directResults;  // reductions of per-row values (no accumulation)
    for (c0 = 0; c0 < space.cols; c0 += chunk) {
      int64_t f = std::min(chunk, space.cols - c0);
      tiles = rowTiles;
      ++iteration;
      accumulating = true;
      for (auto [v, tile] : wholeLoads) tiles[v] = tileColumns(*b, loc, tile, c0, f);
      for (Operation& op : body.without_terminator()) {
        if (aliasTile(op) || llvm::isa<arith::ConstantOp>(op) || aten::isViewOp(&op)) continue;
        bool reduces = !aten::reducedDims(&op).empty();
        if (!needed.contains(&op) || (reduces && residentLevel.lookup(&op) != level) || summedOnline(&op)) continue;
        if (failed(lowerOp(&op, p, f))) return failure();
        if (Value r = op.getResult(0); reduces && !accumulators.count(r) && tiles.count(r)) directResults[r] = tiles[r];
      }
      for (const OnlineSum& m : onlineSums)
        if (residentLevel.lookup(m.rowMax) == level && summedOnline(m.shifted) && failed(lowerOnlineStep(m, p, f)))
          return failure();
      for (auto [v, hbm] : llvm::zip(yield.getValues(), outHbm))
        if (Operation* def = v.getDefiningOp(); def && fullWidth(v) && needed.contains(def) &&
                                                 residentLevel.lookup(def) == level &&
                                                 failed(storeOutput(v, hbm, p, f)))
          return failure();
    }
    tiles = rowTiles;
    for (auto [v, tile] : directResults) tiles[v] = tile;
    c0 = 0;
    accumulating = false;
    for (Operation* op : reductions)
      if (residentLevel.lookup(op) == level && !onlineRole(op)) {
        finalizeReduction(op, p);
        Value r = op->getResult(0);
        if (!tiles.count(r) && layouts.lookup(r).kind != Kind::Imm)
          return op->emitError("internal: a resident kernel's reduction has no value");
      }
    rowTiles = tiles;
  }
  for (auto [v, hbm] : llvm::zip(yield.getValues(), outHbm))
    if (!fullWidth(v) && failed(storeOutput(v, hbm, p, 1))) return failure();
  return success();
}

}  // namespace neuroncc::lowering
