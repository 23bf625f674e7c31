//===- IsaPeepholes.cpp - fold ISA sequences into fewer instructions -------===//
//
// Run on each kernel body after lowering (docs/compiler.md, "Peepholes after
// lowering"): tensor_scalars folded into an activation's scale and bias and a
// row sum of an activation's f32 results into its accumulator, each giving
// the same bits; x * x summed into one Square activation, whose accumulator
// sums the squares before they are rounded to a 2-byte dtype.
//
//===----------------------------------------------------------------------===//

#include "passes/KernelLowering.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;

namespace neuroncc::lowering {

// Moves the op defining `tile` (an allocation, or a column range of one and
// then its source first) before `op` where it comes after it.
static void defineBefore(Value tile, Operation* op) {
  Operation* def = tile.getDefiningOp();
  if (!def || def->isBeforeInBlock(op)) return;
  if (auto columns = llvm::dyn_cast<nc::TileColumnsOp>(def)) defineBefore(columns->getOperand(0), op);
  def->moveBefore(op);
}

// x * x feeding only a sum becomes one scalar-engine instruction: a Square
// activation whose accumulator collects the row sum. This takes a 2N-cycle
// tensor_tensor and an N-cycle tensor_reduce off the vector engine.
int64_t fuseSquareSum(Block& body) {
  SmallVector<std::pair<nc::TensorTensorOp, nc::TensorReduceOp>> matches;
  for (Operation& op : body) {
    auto reduce = llvm::dyn_cast<nc::TensorReduceOp>(op);
    if (!reduce || reduce.getAlu() != "add") continue;
    Value product = reduce.getIn0();
    nc::TensorTensorOp square;
    bool onlyThese = true;
    for (Operation* user : product.getUsers()) {
      if (user == reduce.getOperation()) continue;
      auto tt = llvm::dyn_cast<nc::TensorTensorOp>(user);
      if (tt && !square && tt.getOut() == product && tt.getAlu() == "mul" && tt.getIn0() == tt.getIn1())
        square = tt;
      else
        onlyThese = false;
    }
    if (square && onlyThese) matches.push_back({square, reduce});
  }
  for (auto [square, reduce] : matches) {
    // The accumulator's allocation may come after the square; hoist it.
    defineBefore(reduce.getOut(), square);
    OpBuilder b(square);
    auto act = b.create<nc::ActivationOp>(square.getLoc(), square.getOut(), square.getIn0(), "square", Value(),
                                          reduce.getOut());
    auto source = square->getAttrOfType<IntegerAttr>("source_op");
    setEngineAndSource(act, b, "scalar", source ? source.getInt() : -1);
    square.erase();
    reduce.erase();
  }
  return int64_t(matches.size());
}

namespace {

bool writes(Operation* op, Value buffer) {
  auto writesTile = [&](Value v) { return v && nc::tileBuffer(v) == buffer; };
  if (op->getNumOperands() > 0 && !llvm::isa<nc::DmaStoreOp>(op) && writesTile(op->getOperand(0))) return true;
  auto act = llvm::dyn_cast<nc::ActivationOp>(op);
  return act && writesTile(act.getAccum());
}

// The only instruction that writes `tile` (operand 0, or an activation's
// accumulator), or null when there are several or none, or when the tile
// has column views (whose writes are not followed here).
Operation* soleWriter(Value tile) {
  Operation* writer = nullptr;
  for (Operation* user : tile.getUsers()) {
    if (llvm::isa<nc::TileColumnsOp>(user)) return nullptr;
    if (!writes(user, tile)) continue;
    if (writer && writer != user) return nullptr;
    writer = user;
  }
  return writer;
}

// Whether an instruction strictly between `from` and `to` writes `tile`.
bool writtenBetween(Operation* from, Operation* to, Value tile) {
  Value buffer = nc::tileBuffer(tile);
  for (Operation* o = from->getNextNode(); o && o != to; o = o->getNextNode())
    if (writes(o, buffer)) return true;
  return false;
}

bool isF32Tile(Value tile) { return llvm::cast<MemRefType>(tile.getType()).getElementType().isF32(); }

int64_t sourceIndex(Operation* op) {
  auto source = op->getAttrOfType<IntegerAttr>("source_op");
  return source ? source.getInt() : -1;
}

// One fold of t = x op s (a tensor_scalar) into the activation that alone
// reads t: add/sub into its bias (when it has none and its scale is 1),
// mul into its scale (when that is 1).
bool foldable(nc::TensorScalarOp ts, nc::ActivationOp act) {
  bool unscaled = !act.getScaleTile() && act.getScale().convertToDouble() == 1.0;
  if (ts.getAlu() == "mul") return unscaled;
  return (ts.getAlu() == "add" || ts.getAlu() == "sub") && unscaled && !act.getBiasTile() &&
         act.getBias().convertToDouble() == 0.0;
}

}  // namespace

// func(x * s + b) written as tensor_scalars into an activation becomes that
// one activation, its scale and bias immediates or per-row tiles, when each
// intermediate is an f32 tile that nothing else reads: the activation
// computes x * s, then + b, in f32 just as the tensor_scalars did, so the
// result is the same bits, and full passes of the vector engine are gone
// (softmax's exp(x - max), exp(x * scale)). A per-row subtrahend is negated
// first, on a [p x 1] tile. Repeats until nothing folds, so chains go whole.
int64_t foldIntoActivation(Block& body) {
  int64_t removed = 0;
  for (bool changed = true; changed;) {
    SmallVector<std::pair<nc::TensorScalarOp, nc::ActivationOp>> matches;
    for (Operation& op : body) {
      auto act = llvm::dyn_cast<nc::ActivationOp>(op);
      if (!act) continue;
      Value t = act.getIn0();
      auto ts = llvm::dyn_cast_or_null<nc::TensorScalarOp>(soleWriter(t));
      if (!ts || ts.getReverse() || !isF32Tile(t) || ts.getOut() != t || !foldable(ts, act) ||
          !ts->isBeforeInBlock(act) || nc::tileBuffer(ts.getIn0()) == t ||
          (ts.getScalar() && nc::tileBuffer(ts.getScalar()) == t))
        continue;
      // t is read only by this activation, and what the tensor_scalar read
      // is unchanged when the activation reads it instead.
      if (!llvm::all_of(t.getUsers(), [&](Operation* u) { return u == ts.getOperation() || u == act.getOperation(); }) ||
          writtenBetween(ts, act, ts.getIn0()) || (ts.getScalar() && writtenBetween(ts, act, ts.getScalar())))
        continue;
      matches.push_back({ts, act});
    }
    changed = !matches.empty();
    for (auto [ts, act] : matches) {
      OpBuilder b(ts);
      Value scalar = ts.getScalar();
      double imm = ts.getImm().convertToDouble();
      if (ts.getAlu() == "mul") {
        if (scalar) act.getScaleTileMutable().assign(scalar);
        else act.setScaleAttr(b.getF64FloatAttr(imm));
        ++removed;
      } else if (!scalar) {
        act.setBiasAttr(b.getF64FloatAttr(ts.getAlu() == "sub" ? -imm : imm));
        ++removed;
      } else {
        if (ts.getAlu() == "sub") {
          auto negated = b.create<nc::AllocTileOp>(ts.getLoc(), scalar.getType(), IntegerAttr());
          if (auto rowAlloc = nc::tileBuffer(scalar).getDefiningOp())
            if (auto iteration = rowAlloc->getAttr("iteration")) negated->setAttr("iteration", iteration);
          auto neg = b.create<nc::TensorScalarOp>(ts.getLoc(), negated.getTile(), scalar, Value(),
                                                  b.getStringAttr("mul"), b.getF64FloatAttr(-1.0), b.getBoolAttr(false));
          setEngineAndSource(neg, b, "vector", sourceIndex(ts));
          scalar = negated.getTile();
        } else {
          ++removed;
        }
        act.getBiasTileMutable().assign(scalar);
      }
      act.getIn0Mutable().assign(ts.getIn0());
      Operation* alloc = ts.getOut().getDefiningOp();
      ts.erase();
      if (alloc && alloc->use_empty()) alloc->erase();
    }
  }
  return removed;
}

// A row sum of an activation's f32 results becomes that activation's
// accumulator: the engine sums the same f32 values in the same order, and
// the vector engine's tensor_reduce is gone (softmax's sum of exp).
int64_t foldActivationSum(Block& body) {
  SmallVector<std::pair<nc::ActivationOp, nc::TensorReduceOp>> matches;
  llvm::SmallPtrSet<Operation*, 16> claimed;  // one accumulator per activation
  for (Operation& op : body) {
    auto reduce = llvm::dyn_cast<nc::TensorReduceOp>(op);
    if (!reduce || reduce.getAlu() != "add" || !isF32Tile(reduce.getIn0())) continue;
    Value values = reduce.getIn0(), sum = reduce.getOut();
    auto act = llvm::dyn_cast_or_null<nc::ActivationOp>(soleWriter(values));
    if (!act || act.getAccum() || act.getOut() != values || soleWriter(sum) != reduce.getOperation() ||
        !act->isBeforeInBlock(reduce) || llvm::is_contained(act->getOperands(), sum))
      continue;
    // The sum is now written where the activation runs: nothing between may
    // read it.
    bool readBetween = false;
    for (Operation* o = act->getNextNode(); o != reduce.getOperation() && !readBetween; o = o->getNextNode())
      readBetween = llvm::any_of(o->getOperands(), [&](Value v) { return nc::tileBuffer(v) == sum; });
    if (!readBetween && claimed.insert(act).second) matches.push_back({act, reduce});
  }
  for (auto [act, reduce] : matches) {
    defineBefore(reduce.getOut(), act);
    act.getAccumMutable().assign(reduce.getOut());
    reduce.erase();
  }
  return int64_t(matches.size());
}

}  // namespace neuroncc::lowering
