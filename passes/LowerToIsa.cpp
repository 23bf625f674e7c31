//===- LowerToIsa.cpp - tile kernels onto the NeuronCore ------------------===//
//
// Each kernel's iteration space is a [rows x cols] matrix: rows are the
// flattened leading dims, cols the innermost dim (or the flattened reduced
// trailing dims of a reduction). Rows go on SBUF partitions, 128 at a time;
// cols go on the free dimension, whole when the kernel reduces (a reduction
// needs its full row) and in chunks of at most max-free-elements otherwise.
//
// Every value in the kernel is one of
//   Full: varies along cols      -> a [p x f] tile
//   Row:  constant along cols    -> a [p x 1] tile, used as a per-partition scalar
//   Imm:  a compile-time scalar  -> an instruction immediate
// and every input is fetched with an HBM access pattern derived from its
// broadcast strides: zero strides replicate along broadcast dims, and runs of
// rows whose offsets are affine become one DMA each.
//
//===----------------------------------------------------------------------===//

#include <map>

#include "passes/Passes.h"
#include "passes/ScalarEval.h"
#include "dialects/aten/TypeRules.h"
#include "dialects/aten/Views.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

namespace neuroncc {
#define GEN_PASS_DEF_LOWERTOISA
#include "passes/Passes.h.inc"
}  // namespace neuroncc

using namespace mlir;

namespace neuroncc {
namespace {

// An instruction's engine and source op, set as one discardable-attribute
// dictionary (each setAttr rebuilds it; instructions number in the millions).
void setEngineAndSource(Operation* inst, Builder& b, StringRef engine, int64_t sourceIndex) {
  NamedAttrList attrs(inst->getDiscardableAttrDictionary());
  attrs.set("source_op", b.getI64IntegerAttr(sourceIndex));
  attrs.set("engine", b.getStringAttr(engine));
  inst->setDiscardableAttrs(attrs.getDictionary(inst->getContext()));
}

// The most SBUF bytes per partition that a block's tiles hold at once, each
// tile live from its allocation to its last use.
int64_t sbufPeakBytes(Block& body) {
  llvm::DenseMap<Operation*, int64_t> position;
  int64_t step = 0;
  for (Operation& op : body) position[&op] = step++;
  std::vector<std::pair<int64_t, int64_t>> events;  // (step, +/- bytes)
  for (Operation& op : body) {
    auto alloc = llvm::dyn_cast<nc::AllocTileOp>(op);
    if (!alloc) continue;
    auto type = llvm::cast<MemRefType>(alloc.getResult().getType());
    int64_t bytes = type.getDimSize(1) * int64_t(type.getElementTypeBitWidth() / 8);
    int64_t last = position[&op];
    for (Operation* user : alloc.getResult().getUsers()) last = std::max(last, position.lookup(user));
    events.push_back({position[&op], bytes});
    events.push_back({last + 1, -bytes});
  }
  llvm::sort(events);
  int64_t live = 0, peak = 0;
  for (auto [at, delta] : events) {
    live += delta;
    peak = std::max(peak, live);
  }
  return peak;
}

enum class Kind { Full, Row, Imm };

// How one kernel value maps onto the [rows x cols] iteration space.
struct Layout {
  Kind kind = Kind::Full;
  double imm = 0;
  // HBM values only: element strides per iteration-space dim (0 = broadcast).
  SmallVector<int64_t> rowStrides;  // one per leading dim
  SmallVector<int64_t> colStrides;  // one per trailing dim
  int64_t offset = 0;               // element offset of the (view's) first element
};

struct Space {
  SmallVector<int64_t> lead;   // leading dims
  SmallVector<int64_t> trail;  // trailing dims flattened into cols
  int64_t rows = 1, cols = 1;
  bool reduces = false;
  int64_t rowBlock = 0;  // row tiles never cross a multiple of this (a bmm's batch); 0: no limit
  bool matmul = false;
  // > 1: the innermost dim of the kernel's shape was split into [split,
  // cols] and the first part moved onto the rows (few long rows spread over
  // the partitions); layouts are computed against the unsplit shape.
  int64_t split = 1;
};

SmallVector<int64_t> contiguousStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i)
    strides[size_t(i)] = strides[size_t(i + 1)] * shape[size_t(i + 1)];
  return strides;
}

int64_t product(ArrayRef<int64_t> v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// The number of input elements one result element of a reduction covers:
// the product of its operand's reduced extents, which is 1 for a dim an
// earlier reduction in the kernel already collapsed, even though the
// kernel's rows are longer.
int64_t reducedCount(Operation* reduction) {
  auto in = llvm::cast<RankedTensorType>(reduction->getOperand(0).getType());
  int64_t count = 1;
  for (int64_t d : aten::reducedDims(reduction)) count *= in.getDimSize(d);
  return count;
}

std::optional<double> splatValue(Value v) {
  auto c = v.getDefiningOp<arith::ConstantOp>();
  if (!c) return std::nullopt;
  auto dense = llvm::dyn_cast<DenseElementsAttr>(c.getValue());
  if (!dense || !dense.isSplat()) return std::nullopt;
  Type elem = dense.getElementType();
  if (llvm::isa<FloatType>(elem)) return dense.getSplatValue<APFloat>().convertToDouble();
  if (elem.isInteger(1)) return dense.getSplatValue<bool>() ? 1.0 : 0.0;
  if (llvm::isa<IntegerType>(elem)) return double(dense.getSplatValue<APInt>().getSExtValue());
  return std::nullopt;
}

class KernelLowering {
 public:
  KernelLowering(nc::KernelOp kernel, int64_t maxFree, int64_t rowBudget)
      : kernel(kernel), maxFree(maxFree), rowBudget(rowBudget) {}

  LogicalResult run(int64_t& instructions, int64_t& dmas);

 private:
  LogicalResult computeSpace();
  void splitLongRows();
  LogicalResult layoutOfInput(Value v, Layout& out);
  LogicalResult layoutOfView(const aten::StridedView& view, Layout& out);
  LogicalResult lowerCat(aten::CatOp cat, Block* body, ArrayRef<Value> outHbm);
  SmallVector<int64_t> rowOffsets(const Layout& l, int64_t r0, int64_t p);
  void emitDma(bool load, Value hbm, Value tile, const Layout& l, int64_t r0, int64_t p,
               int64_t c0, int64_t f);
  Value alloc(int64_t p, int64_t f, Type elem);
  Value tileOf(Value v);
  LogicalResult lowerOp(Operation* op, int64_t p, int64_t f);
  void setSource(Operation* inst, Operation* src);

  LogicalResult storeOutput(Value v, Value hbm, int64_t p, int64_t f);
  Type hbmElementType(BlockArgument arg);
  LogicalResult foldViews(Block& old, bool allowTileAliases);
  bool storedViewChain(Operation* view);
  Block* createIsaBody(Block& old, SmallVectorImpl<Value>& outHbm);
  void finishBody(Block& old, int64_t& instructions, int64_t& dmas);
  Value broadcastRow(Value rowTile, double imm, int64_t p, int64_t f, Type elem, Operation* source);
  void finalizeReduction(Operation* op, int64_t p);

  nc::KernelOp kernel;
  int64_t maxFree;
  int64_t rowBudget;
  Space space;
  // Chunked reduction: a row too long for SBUF is reduced chunk by chunk into
  // per-row accumulators; ops that need the reduced value run after the last
  // chunk and must themselves be per-row.
  bool chunked = false;
  bool accumulating = false;  // lowering a chunk (not the ops after the last one)
  llvm::DenseMap<Value, Value> accumulators;  // reduction result -> f32 [p x 1]
  // A lone reduction over non-trailing dims: its input, read with this
  // permutation of dims (kept dims, then reduced dims).
  Value permutedInput;
  SmallVector<int64_t> inputPermutation;
  llvm::DenseMap<Value, Value> sameTileAs;  // row-preserving reshapes of computed values
  // Returned one-to-one views of computed values: the root's tile is stored
  // through this view of the output buffer in the root's shape.
  llvm::DenseMap<Value, aten::StridedView> storedThrough;
  llvm::DenseSet<Value> tilelessViews;  // inner links of such chains: no tile of their own
  // Output columns per matmul tile: one PSUM bank (512 f32), or 128 when the
  // moving operand is transposed on the TensorEngine (one transpose a tile).
  int64_t matmulColumns = nc::kPsumBankBytes / 4;
  OpBuilder* b = nullptr;
  Location loc = kernel.getLoc();
  llvm::DenseMap<Value, Layout> layouts;
  llvm::DenseMap<Value, Value> hbmOf;      // kernel input (or view of one) -> HBM memref
  llvm::DenseMap<Value, aten::StridedView> viewOf;  // its elements within that memref
  llvm::DenseMap<Value, Value> tiles;      // value -> tile for the current iteration
  std::map<std::tuple<void*, int64_t, int64_t>, Value> hoisted;  // row-invariant loads
  // Stationary matmul operand tiles of the current row tile ([k slice x
  // rows], transposed on the TensorEngine when needed), reused by every
  // column tile of that row tile: keyed by (HBM memref, element offset, k
  // slice, rows). They replace the per-column-tile copies they save, so the
  // SBUF they hold stays about what one column tile's copies held.
  using OperandTiles = std::map<std::tuple<void*, int64_t, int64_t, int64_t>, Value>;
  OperandTiles stationaryTiles;
  int64_t stationaryRow = -1;
  // Moving matmul operand tiles ([k slice x columns]) of the current block of
  // column tiles, reused by every row tile (of the same batch, for a bmm): a
  // kernel of matmuls without reductions runs its column tiles in blocks, all
  // row tiles of one block before the next, and keeps that block's moving
  // slices (at most movingBudget bytes per partition). Keyed like
  // stationaryTiles.
  OperandTiles movingTiles;
  bool reuseMoving = false;
  llvm::DenseSet<Value> yielded;
  int64_t r0 = 0, c0 = 0, iteration = 0;
  int64_t numInst = 0, numDma = 0;
};

LogicalResult KernelLowering::computeSpace() {
  Block& body = kernel.getBody().front();
  // The widest value fixes the iteration space; a reduction fixes which
  // trailing dims are the columns.
  SmallVector<int64_t> full;
  int64_t trailing = 1;
  // Views are read through access patterns and do not shape the iteration
  // space, unless the kernel only copies a view out.
  bool onlyViews = llvm::all_of(body.without_terminator(), [](Operation& op) {
    return aten::isViewOp(&op) || llvm::isa<arith::ConstantOp>(op);
  });
  if (onlyViews) {  // a copy kernel: the space is the copied view's shape
    auto yield = llvm::cast<nc::YieldOp>(body.getTerminator());
    if (yield.getValues().size() == 1) {
      auto t = llvm::cast<RankedTensorType>(yield.getValues().front().getType());
      full.assign(t.getShape().begin(), t.getShape().end());
    }
  }
  for (Operation& op : body.without_terminator()) {
    if (llvm::isa<arith::ConstantOp>(op) || aten::isViewOp(&op)) continue;
    SmallVector<int64_t> shape;
    if (SmallVector<int64_t> dims = aten::reducedDims(&op); !dims.empty()) {
      auto in = llvm::cast<RankedTensorType>(op.getOperand(0).getType());
      int64_t rank = in.getRank(), k = int64_t(dims.size());
      bool trailingDims = true;
      for (int64_t i = 0; i < k; ++i) trailingDims &= dims[size_t(i)] == rank - k + i;
      if (!trailingDims) {
        // Alone in its kernel, a reduction over other dims reads its input
        // through a permuted access pattern that puts the reduced dims last.
        bool alone = llvm::all_of(body.without_terminator(), [&](Operation& o) {
          return &o == &op || aten::isViewOp(&o) || llvm::isa<arith::ConstantOp>(o);
        });
        if (!alone || !llvm::isa<BlockArgument>(op.getOperand(0)) && !op.getOperand(0).getDefiningOp<arith::ConstantOp>() &&
                          !aten::isViewOp(op.getOperand(0).getDefiningOp()))
          return op.emitError("reductions over non-trailing dims are only supported alone in a kernel (dims ")
                 << aten::shapeToString(dims) << " of a rank-" << rank << " tensor)";
        SmallVector<int64_t> perm;
        for (int64_t d = 0; d < rank; ++d)
          if (!llvm::is_contained(dims, d)) perm.push_back(d);
        perm.append(dims.begin(), dims.end());
        permutedInput = op.getOperand(0);
        inputPermutation = perm;
        SmallVector<int64_t> permuted;
        for (int64_t d : perm) permuted.push_back(in.getDimSize(d));
        space.reduces = true;
        trailing = k;
        if (product(permuted) >= product(full)) full = permuted;
        continue;
      }
      // Reductions over different numbers of trailing dims may share a
      // kernel when each reduces a whole row (or a per-row value): the
      // widest input sets the columns, and each reduction checks its count.
      shape.assign(in.getShape().begin(), in.getShape().end());
      if (!space.reduces || product(shape) > product(full) ||
          (product(shape) == product(full) && shape.size() > full.size()))
        trailing = k;
      space.reduces = true;
    } else {
      auto t = llvm::cast<RankedTensorType>(op.getResult(0).getType());
      shape.assign(t.getShape().begin(), t.getShape().end());
    }
    if (product(shape) > product(full) || (product(shape) == product(full) && shape.size() > full.size()))
      full = shape;
  }
  for (Operation& op : body.without_terminator())
    if (llvm::isa<aten::BmmOp>(op)) {
      space.matmul = true;
      space.rowBlock = llvm::cast<RankedTensorType>(op.getResult(0).getType()).getDimSize(1);
    } else if (llvm::isa<aten::MmOp, aten::AddmmOp>(op)) {
      space.matmul = true;
    }
  if (full.empty()) {  // 0-d kernel: one row, one column
    space.rows = space.cols = 1;
    return success();
  }
  int64_t k = std::min<int64_t>(trailing, int64_t(full.size()));
  space.lead.assign(full.begin(), full.end() - k);
  space.trail.assign(full.end() - k, full.end());
  // Every instruction is unrolled, so the iteration space must stay sane.
  int64_t elements = 1;
  for (int64_t d : full)
    if (d < 0 || __builtin_mul_overflow(elements, d, &elements) || elements > (int64_t(1) << 40))
      return kernel.emitError("kernel iteration space ") << aten::shapeToString(full)
             << " is too large (more than 2^40 elements)";
  space.rows = product(space.lead);
  space.cols = product(space.trail);
  if (space.rows == 0 || space.cols == 0)
    return kernel.emitError("kernels over empty tensors are not supported");
  splitLongRows();
  int64_t iterations = (space.rows + nc::kNumPartitions - 1) / nc::kNumPartitions *
                       ((space.cols + maxFree - 1) / maxFree);
  if (iterations > (int64_t(1) << 20))
    return kernel.emitError("kernel needs ") << iterations
           << " row-tile iterations; programs are unrolled and at most 2^20 are supported";
  return success();
}

// An elementwise kernel over fewer rows than partitions whose rows are
// longer than one chunk (a 1 x 2^31 tensor) spreads each row over several
// partitions: the innermost dim C becomes [m, C / m] with m the largest
// divisor of C that keeps rows * m within 128. Every value is read and
// written through strides of the unsplit shape, so any broadcast still
// works; only full-size results are allowed, since a per-row result would
// no longer have one element per row.
void KernelLowering::splitLongRows() {
  Block& body = kernel.getBody().front();
  if (space.reduces || space.matmul || space.trail.size() != 1 || space.rows >= nc::kNumPartitions ||
      space.cols <= maxFree)
    return;
  bool computes = false;
  for (Operation& op : body.without_terminator()) {
    if (llvm::isa<aten::EmbeddingOp, aten::CatOp>(op)) return;
    computes |= !aten::isViewOp(&op) && !llvm::isa<arith::ConstantOp>(op);
  }
  if (!computes) return;
  for (Value v : body.getTerminator()->getOperands())
    if (llvm::cast<RankedTensorType>(v.getType()).getNumElements() != space.rows * space.cols) return;
  int64_t best = 1;
  for (int64_t m = 2; m * space.rows <= nc::kNumPartitions; ++m)
    if (space.cols % m == 0) best = m;
  if (best == 1) return;
  space.split = best;
  space.lead.push_back(best);
  space.trail.back() /= best;
  space.rows *= best;
  space.cols /= best;
}

// Broadcast strides of an HBM input against the iteration space.
// An HBM value (a kernel input, or a chain of views of one) seen from the
// iteration space: its strides broadcast against the space's dims.
LogicalResult KernelLowering::layoutOfInput(Value v, Layout& out) {
  auto it = viewOf.find(v);
  if (it != viewOf.end()) return layoutOfView(it->second, out);
  return layoutOfView(aten::contiguousView(llvm::cast<RankedTensorType>(v.getType()).getShape()), out);
}

LogicalResult KernelLowering::layoutOfView(const aten::StridedView& given, Layout& out) {
  // A full-size value under another leading shape covers the same rows in
  // row-major order: read it in the space's own shape when its strides allow
  // (always for a contiguous value; also for a permuted one whose merged or
  // split dims stay contiguous among themselves).
  aten::StridedView view = given;
  if (product(given.shape) == space.rows * space.cols && !given.shape.empty()) {
    SmallVector<int64_t> full(space.lead);
    full.append(space.trail);
    if (ArrayRef<int64_t>(full) != ArrayRef<int64_t>(given.shape))
      if (auto strides = aten::reshapeStrides(given.shape, given.strides, full)) {
        view.shape = full;
        view.strides = *strides;
      }
  }
  ArrayRef<int64_t> shape = view.shape;
  ArrayRef<int64_t> strides = view.strides;
  out.offset = view.offset;
  SmallVector<int64_t> dims(space.lead);
  dims.append(space.trail);
  if (space.split > 1 && view.shape != dims) {  // broadcast against the unsplit shape
    dims.erase(dims.end() - 2);
    dims.back() *= space.split;
  }
  int64_t n = int64_t(dims.size()), m = int64_t(shape.size());
  // Leading unit dims beyond the space's rank broadcast to nothing.
  while (m > n && shape.front() == 1) {
    shape = shape.drop_front();
    strides = strides.drop_front();
    --m;
  }
  if (m > n)
    return kernel.emitError("input of shape ") << aten::shapeToString(shape)
           << " has more dims than the kernel's iteration space " << aten::shapeToString(dims);
  // Broadcast right-aligned against `target`, the first dims of `all`.
  SmallVector<int64_t> all(size_t(n), 0);
  auto align = [&](ArrayRef<int64_t> target) {
    if (m > int64_t(target.size())) return false;
    std::fill(all.begin(), all.end(), 0);
    for (int64_t i = 0; i < m; ++i) {
      int64_t d = int64_t(target.size()) - m + i;
      if (shape[size_t(i)] == 1) continue;
      if (shape[size_t(i)] != target[size_t(d)]) return false;
      all[size_t(d)] = strides[size_t(i)];
    }
    return true;
  };
  // A value that broadcasts only against the rows is an operand of an op
  // on per-row values (the result of a reduction without keepdim): it is
  // constant along the row.
  if (!align(dims) && (space.split > 1 || !align(space.lead)))
    return kernel.emitError("input of shape ") << aten::shapeToString(shape)
           << " does not broadcast to the iteration space " << aten::shapeToString(dims);
  if (int64_t(dims.size()) != int64_t(space.lead.size() + space.trail.size())) {
    // Split the innermost stride s over [split, cols]: (s * cols, s).
    int64_t s = all.back();
    all.back() = s * space.cols;
    all.push_back(s);
  }
  out.rowStrides.assign(all.begin(), all.begin() + int64_t(space.lead.size()));
  out.colStrides.assign(all.begin() + int64_t(space.lead.size()), all.end());
  bool varies = space.cols > 1 && llvm::any_of(out.colStrides, [](int64_t s) { return s != 0; });
  out.kind = varies ? Kind::Full : Kind::Row;
  return success();
}

SmallVector<int64_t> KernelLowering::rowOffsets(const Layout& l, int64_t first, int64_t p) {
  SmallVector<int64_t> offs;
  for (int64_t r = first; r < first + p; ++r) {
    int64_t rem = r, off = 0;
    for (int64_t i = int64_t(space.lead.size()) - 1; i >= 0; --i) {
      off += (rem % space.lead[size_t(i)]) * l.rowStrides[size_t(i)];
      rem /= space.lead[size_t(i)];
    }
    offs.push_back(off);
  }
  return offs;
}

// The free dims of an access pattern ((stride, count) pairs, outermost
// first) with unit counts dropped and neighbours merged where the outer one
// steps over exactly the inner one's extent, so that a reduction over many
// trailing dims of a contiguous tensor is one free dim.
SmallVector<int64_t> simplifyFreePattern(ArrayRef<int64_t> freeAp) {
  SmallVector<int64_t> out;
  for (size_t i = 0; i + 1 < freeAp.size(); i += 2) {
    int64_t stride = freeAp[i], count = freeAp[i + 1];
    if (count == 1) continue;
    out.push_back(stride);
    out.push_back(count);
  }
  SmallVector<int64_t> merged;
  for (size_t i = 0; i + 1 < out.size(); i += 2) {
    merged.push_back(out[i]);
    merged.push_back(out[i + 1]);
    // Merge the last two pairs while the outer one spans the inner one.
    while (merged.size() >= 4) {
      size_t n = merged.size();
      int64_t outerStride = merged[n - 4], outerCount = merged[n - 3];
      int64_t innerStride = merged[n - 2], innerCount = merged[n - 1];
      if (outerStride != innerStride * innerCount) break;
      merged.resize(n - 4);
      merged.push_back(innerStride);
      merged.push_back(outerCount * innerCount);
    }
  }
  if (merged.empty()) merged = {1, 1};
  return merged;
}

// Splits the rows into runs whose HBM offsets advance by a constant stride,
// one DMA per run; large runs are split further so that several DMA queues
// can share the transfer.
void KernelLowering::emitDma(bool load, Value hbm, Value tile, const Layout& l, int64_t first,
                             int64_t p, int64_t col0, int64_t f) {
  SmallVector<int64_t> offs = rowOffsets(l, first, p);
  SmallVector<int64_t> freeAp;  // (stride, count) pairs
  int64_t colBase = 0;
  if (l.kind == Kind::Row) {
    freeAp = {1, 1};
  } else if (space.trail.size() == 1 || f != space.cols) {
    // A chunk of one innermost dim (chunking only happens without reductions,
    // where the columns are a single dim).
    int64_t s = l.colStrides.back();
    freeAp = {s, f};
    colBase = col0 * s;
  } else {
    for (size_t j = 0; j < space.trail.size(); ++j) {
      freeAp.push_back(l.colStrides[j]);
      freeAp.push_back(space.trail[j]);
    }
  }
  auto elem = llvm::cast<MemRefType>(tile.getType()).getElementType();
  int64_t bytesPerRow = (l.kind == Kind::Row ? 1 : f) * (elem.getIntOrFloatBitWidth() / 8);
  constexpr int64_t kSplitBytes = 256 * 1024;
  int64_t start = 0;
  while (start < p) {
    int64_t end = start + 1;
    int64_t stride = end < p ? offs[size_t(end)] - offs[size_t(start)] : 0;
    while (end < p && offs[size_t(end)] - offs[size_t(end - 1)] == stride) ++end;
    int64_t count = end - start;
    int64_t pieces = std::clamp<int64_t>(count * bytesPerRow / kSplitBytes, 1, 8);
    int64_t per = (count + pieces - 1) / pieces;
    for (int64_t s = start; s < end; s += per) {
      int64_t c = std::min(per, end - s);
      SmallVector<int64_t> ap{stride, c};
      ap.append(simplifyFreePattern(freeAp));
      auto partStart = b->getI64IntegerAttr(s);
      auto offset = b->getI64IntegerAttr(l.offset + offs[size_t(s)] + colBase);
      auto apAttr = b->getDenseI64ArrayAttr(ap);
      Operation* dma;
      if (load) dma = b->create<nc::DmaLoadOp>(loc, hbm, tile, partStart, offset, apAttr);
      else dma = b->create<nc::DmaStoreOp>(loc, tile, hbm, partStart, offset, apAttr);
      setEngineAndSource(dma, *b, "dma", -1);
      ++numInst;
      ++numDma;
    }
    start = end;
  }
}

Value KernelLowering::alloc(int64_t p, int64_t f, Type elem) {
  auto type = MemRefType::get({p, f}, elem, MemRefLayoutAttrInterface{},
                              b->getI64IntegerAttr(nc::kSbufMemorySpace));
  auto tile = b->create<nc::AllocTileOp>(loc, type, IntegerAttr());
  tile->setAttr("iteration", b->getI64IntegerAttr(iteration));
  return tile;
}

Value KernelLowering::tileOf(Value v) {
  auto it = tiles.find(v);
  if (it != tiles.end()) return it->second;
  // A kernel input: load it for this iteration (or reuse a row-invariant load).
  const Layout& l = layouts[v];
  int64_t p = std::min<int64_t>(nc::kNumPartitions, space.rows - r0);
  if (space.rowBlock > 0) p = std::min(p, space.rowBlock - r0 % space.rowBlock);
  int64_t f = l.kind == Kind::Row ? 1
              : std::min(space.cols - c0, space.reduces && !chunked ? space.cols
                                          : space.matmul ? matmulColumns : maxFree);
  bool rowInvariant = llvm::all_of(l.rowStrides, [](int64_t s) { return s == 0; });
  auto key = std::make_tuple(v.getAsOpaquePointer(), p, c0);
  if (rowInvariant) {
    if (auto h = hoisted.find(key); h != hoisted.end()) return tiles[v] = h->second;
  }
  auto elem = nc::deviceElementType(llvm::cast<RankedTensorType>(v.getType()).getElementType());
  Value tile = alloc(p, f, elem);
  emitDma(/*load=*/true, hbmOf[v], tile, l, r0, p, c0, f);
  if (rowInvariant) hoisted[key] = tile;
  return tiles[v] = tile;
}

void KernelLowering::setSource(Operation* inst, Operation* src) {
  int64_t idx = -1;
  if (src)
    if (auto a = src->getAttrOfType<IntegerAttr>("nc.source_index")) idx = a.getInt();
  StringRef engine = llvm::isa<nc::ActivationOp>(inst)                  ? "scalar"
                     : llvm::isa<nc::MatmulOp, nc::TransposeOp>(inst) ? "tensor"
                     : llvm::isa<nc::IotaOp>(inst)                    ? "gpsimd"
                                                                      : "vector";
  setEngineAndSource(inst, *b, engine, idx);
  ++numInst;
}

LogicalResult KernelLowering::lowerOp(Operation* op, int64_t p, int64_t f) {
  const int64_t fullWidth = f;
  // An elementwise op on immediates only is an immediate (constant folding
  // normally got there first).
  if (aten::isElementwise(op) && llvm::all_of(op->getOperands(), [&](Value v) {
        auto it = layouts.find(v);
        return it != layouts.end() && it->second.kind == Kind::Imm;
      }))
    if (auto fn = scalarFunction(op)) {
      SmallVector<double> args;
      for (Value v : op->getOperands()) args.push_back(layouts[v].imm);
      layouts[op->getResult(0)].kind = Kind::Imm;
      layouts[op->getResult(0)].imm = (*fn)(args);
      return success();
    }
  Value result = op->getResult(0);
  auto resultElem = nc::deviceElementType(llvm::cast<RankedTensorType>(result.getType()).getElementType());
  Type elem = yielded.contains(result) ? resultElem : b->getF32Type();
  // A value whose only use is a returned cast is computed straight into the
  // cast's dtype (one rounding, and the cast becomes free).
  if (result.hasOneUse())
    if (auto cast = llvm::dyn_cast<aten::ToCopyOp>(*result.getUsers().begin());
        cast && yielded.contains(cast.getResult()) && aten::isFloatType(cast.getType().getElementType()) &&
        aten::isFloatType(llvm::cast<RankedTensorType>(result.getType()).getElementType()))
      elem = nc::deviceElementType(cast.getType().getElementType());
  auto layoutOf = [&](Value v) -> Layout& { return layouts[v]; };

  auto tensorScalar = [&](Value out, Value in, Value scalar, StringRef alu, double imm, bool reverse) {
    auto inst = b->create<nc::TensorScalarOp>(loc, out, in, scalar, b->getStringAttr(alu),
                                              b->getF64FloatAttr(imm), b->getBoolAttr(reverse));
    setSource(inst, op);
  };
  auto activation = [&](Value out, Value in, StringRef func, double scale, double bias) {
    auto inst = b->create<nc::ActivationOp>(loc, out, in, Value(), Value(), b->getStringAttr(func),
                                            b->getF64FloatAttr(scale), b->getF64FloatAttr(bias));
    setSource(inst, op);
  };

  // Binary: combine two operands of any kind with `alu`.
  auto binary = [&](Value lhs, Value rhs, StringRef alu, double alpha) -> LogicalResult {
    Layout &ll = layoutOf(lhs), &rl = layoutOf(rhs);
    if (ll.kind == Kind::Imm && rl.kind == Kind::Imm)
      return op->emitError("operations on two compile-time constants are not supported yet");
    Kind outKind = (ll.kind == Kind::Full || rl.kind == Kind::Full) ? Kind::Full : Kind::Row;
    layouts[result].kind = outKind;
    int64_t width = outKind == Kind::Full ? f : 1;
    Value out = alloc(p, width, elem);
    Value rhsTile;
    double rhsImm = rl.imm * alpha;
    if (rl.kind != Kind::Imm) {
      rhsTile = tileOf(rhs);
      if (alpha != 1.0) {  // alpha * other, kept in f32
        Value scaled = alloc(p, rl.kind == Kind::Full ? f : 1, b->getF32Type());
        tensorScalar(scaled, rhsTile, Value(), "mul", alpha, false);
        rhsTile = scaled;
      }
    }
    if (ll.kind == Kind::Imm) {
      tensorScalar(out, rhsTile, Value(), alu, ll.imm, /*reverse=*/true);
    } else if (rl.kind == Kind::Imm) {
      tensorScalar(out, tileOf(lhs), Value(), alu, rhsImm, false);
    } else if (ll.kind == rl.kind) {
      auto inst = b->create<nc::TensorTensorOp>(loc, out, tileOf(lhs), rhsTile, b->getStringAttr(alu));
      setSource(inst, op);
    } else if (ll.kind == Kind::Full) {
      tensorScalar(out, tileOf(lhs), rhsTile, alu, 0.0, false);
    } else {
      tensorScalar(out, rhsTile, tileOf(lhs), alu, 0.0, /*reverse=*/true);
    }
    tiles[result] = out;
    return success();
  };

  auto unary = [&](Value in, auto emit) -> LogicalResult {
    Layout& il = layoutOf(in);
    if (il.kind == Kind::Imm)
      return op->emitError("operations on compile-time constants are not supported yet");
    layouts[result].kind = il.kind;
    Value out = alloc(p, il.kind == Kind::Full ? f : 1, elem);
    emit(out, tileOf(in));
    tiles[result] = out;
    return success();
  };

  // A Full [p x f] tile holding `v` (laid out as `l`): broadcasts a per-row
  // value or an immediate across the row (iota writes the constant, an add
  // the row value).
  auto fullTile = [&](Value v, const Layout& l) -> Value {
    if (l.kind == Kind::Full) return tileOf(v);
    return broadcastRow(l.kind == Kind::Row ? tileOf(v) : Value(), l.kind == Kind::Imm ? l.imm : 0.0, p, f,
                        b->getF32Type(), op);
  };

  // cond ? a : b with the kinds lined up. Layouts are passed in because an
  // operand may be an immediate that has no value of its own.
  auto select = [&](Value cond, Layout lc, Value onTrue, Layout lt, Value onFalse,
                    Layout lf) -> LogicalResult {
    bool anyFull = lc.kind == Kind::Full || lt.kind == Kind::Full || lf.kind == Kind::Full;
    if (lc.kind == Kind::Imm && lt.kind == Kind::Imm && lf.kind == Kind::Imm)
      return op->emitError("operations on compile-time constants are not supported yet");
    int64_t width = anyFull ? f : 1;
    auto operand = [&](Value v, const Layout& l) -> Value {
      if (anyFull) return fullTile(v, l);
      if (l.kind == Kind::Row) return tileOf(v);
      Value t = alloc(p, 1, b->getF32Type());  // an immediate as a per-row value
      setSource(b->create<nc::IotaOp>(loc, t, b->getF64FloatAttr(l.imm), b->getF64FloatAttr(0.0),
                                      b->getF64FloatAttr(0.0)), op);
      return t;
    };
    Value c = operand(cond, lc), t = operand(onTrue, lt), e = operand(onFalse, lf);
    layouts[result].kind = anyFull ? Kind::Full : Kind::Row;
    Value out = alloc(p, width, elem);
    setSource(b->create<nc::TensorSelectOp>(loc, out, t, e, c), op);
    tiles[result] = out;
    return success();
  };

  // One [p x f] output tile of A @ B (batched: the tile's rows lie in one
  // batch): the K dim in slices of 128 partitions, accumulated in a PSUM
  // bank, then alpha * product + beta * bias into an SBUF tile. The operands
  // are read straight from HBM through their (view) access patterns: A as
  // [k partitions x m], B as [k partitions x n].
  auto matmul = [&](Value a, Value bm, Value bias, double beta, double alpha) -> LogicalResult {
    auto av = viewOf.find(a), bv = viewOf.find(bm);
    if (av == viewOf.end() || bv == viewOf.end())
      return op->emitError("matmul operands must come from HBM (kernel inputs or views of them)");
    const aten::StridedView &A = av->second, &B = bv->second;
    Type ae = nc::deviceElementType(llvm::cast<RankedTensorType>(a.getType()).getElementType());
    Type be = nc::deviceElementType(llvm::cast<RankedTensorType>(bm.getType()).getElementType());
    if (ae != be) return op->emitError("matmul operands of different dtypes are not supported yet");
    bool batched = A.shape.size() == 3;
    int64_t M = A.shape[batched ? 1 : 0], K = A.shape.back();
    int64_t batch = batched ? r0 / M : 0, m0 = batched ? r0 % M : r0;
    int64_t sAb = batched ? A.strides[0] : 0, sAm = A.strides[batched ? 1 : 0], sAk = A.strides.back();
    int64_t sBb = batched ? B.strides[0] : 0, sBk = B.strides[batched ? 1 : 0], sBn = B.strides.back();
    // A product with one column in a kernel with longer rows (its epilogue
    // broadcasts it) is a per-row value: computed once, one column wide.
    bool perRow = B.shape.back() == 1 && space.cols > 1;
    int64_t f = perRow ? 1 : fullWidth, c0 = perRow ? 0 : this->c0;
    Value psum = b->create<nc::AllocPsumOp>(
        loc, MemRefType::get({p, f}, b->getF32Type(), MemRefLayoutAttrInterface{},
                             b->getI64IntegerAttr(nc::kPsumMemorySpace)),
        IntegerAttr());
    psum.getDefiningOp()->setAttr("iteration", b->getI64IntegerAttr(iteration));
    // An operand tile [kt partitions (k) x n (m or n)]: read directly when
    // its free dim is contiguous in HBM; when only k is contiguous, read the
    // other orientation [n partitions x kt] (contiguous rows) and transpose it
    // on the TensorEngine, since an element-strided DMA costs a descriptor
    // per element.
    auto operandTile = [&](Value hbm, int64_t offset, int64_t kStride, int64_t fStride, int64_t kt,
                           int64_t n, Type et) -> Value {
      auto dma = [&](Value tile, int64_t pStride, int64_t pCount, int64_t fs, int64_t fc) {
        SmallVector<int64_t> ap{pStride, pCount, fs, fc};
        Operation* d = b->create<nc::DmaLoadOp>(loc, hbm, tile, b->getI64IntegerAttr(0),
                                                b->getI64IntegerAttr(offset), b->getDenseI64ArrayAttr(ap));
        setEngineAndSource(d, *b, "dma", -1);
        ++numInst;
        ++numDma;
      };
      Value tile = alloc(kt, n, et);
      if (fStride == 1 || kStride != 1 || n > nc::kNumPartitions) {
        dma(tile, kStride, kt, fStride, n);
        return tile;
      }
      Value rows = alloc(n, kt, et);
      dma(rows, fStride, n, kStride, kt);
      Value psum = b->create<nc::AllocPsumOp>(
          loc, MemRefType::get({kt, n}, b->getF32Type(), MemRefLayoutAttrInterface{},
                               b->getI64IntegerAttr(nc::kPsumMemorySpace)),
          IntegerAttr());
      psum.getDefiningOp()->setAttr("iteration", b->getI64IntegerAttr(iteration));
      setSource(b->create<nc::TransposeOp>(loc, psum, rows), op);
      // Exact: the values came from `et` and return to it.
      tensorScalar(tile, psum, Value(), "bypass", 0.0, false);
      return tile;
    };
    // Reuse within a row tile only while the row tile's stationary slices
    // stay small next to a partition (one slice: p elements per partition).
    constexpr int64_t kStationaryCacheBytes = 32 * 1024;
    if (stationaryRow != r0) {
      stationaryTiles.clear();
      stationaryRow = r0;
    }
    const bool reuseStationary =
        (K + nc::kNumPartitions - 1) / nc::kNumPartitions * p * int64_t(ae.getIntOrFloatBitWidth() / 8) <=
        kStationaryCacheBytes;
    // An operand slice, from `cache` when kept there, else prepared (and kept
    // when `keep`).
    auto slice = [&](OperandTiles& cache, bool keep, Value hbm, int64_t offset, int64_t kStride,
                     int64_t fStride, int64_t kt, int64_t n, Type et) {
      auto key = std::make_tuple(hbm.getAsOpaquePointer(), offset, kt, n);
      if (auto hit = cache.find(key); keep && hit != cache.end()) return hit->second;
      Value tile = operandTile(hbm, offset, kStride, fStride, kt, n, et);
      if (keep) cache[key] = tile;
      return tile;
    };
    for (int64_t k0 = 0; k0 < K; k0 += nc::kNumPartitions) {
      int64_t kt = std::min<int64_t>(nc::kNumPartitions, K - k0);
      Value st = slice(stationaryTiles, reuseStationary, hbmOf[a], A.offset + batch * sAb + m0 * sAm + k0 * sAk,
                       sAk, sAm, kt, p, ae);
      Value mv = slice(movingTiles, reuseMoving, hbmOf[bm], B.offset + batch * sBb + k0 * sBk + c0 * sBn, sBk,
                       sBn, kt, f, be);
      auto mm = b->create<nc::MatmulOp>(loc, psum, st, mv, b->getBoolAttr(k0 > 0));
      setSource(mm, op);
    }
    layouts[result].kind = perRow ? Kind::Row : Kind::Full;
    Value out = alloc(p, f, elem);
    if (!bias) {
      auto act = b->create<nc::ActivationOp>(loc, out, psum, Value(), Value(), b->getStringAttr("identity"),
                                             b->getF64FloatAttr(alpha), b->getF64FloatAttr(0.0));
      setSource(act, op);
    } else if (Layout& bl = layoutOf(bias); bl.kind == Kind::Imm) {  // a splat bias
      tensorScalar(out, psum, Value(), "mul", alpha, false);
      if (bl.imm * beta != 0.0) tensorScalar(out, out, Value(), "add", bl.imm * beta, false);
    } else {
      Value scaled = psum;
      if (alpha != 1.0) {
        scaled = alloc(p, f, b->getF32Type());
        tensorScalar(scaled, psum, Value(), "mul", alpha, false);
      }
      Value biasTile = tileOf(bias);
      if (beta != 1.0) {
        Value t = alloc(p, bl.kind == Kind::Full ? f : 1, b->getF32Type());
        tensorScalar(t, biasTile, Value(), "mul", beta, false);
        biasTile = t;
      }
      if (bl.kind == Kind::Full)
        setSource(b->create<nc::TensorTensorOp>(loc, out, scaled, biasTile, b->getStringAttr("add")), op);
      else
        tensorScalar(out, scaled, biasTile, "add", 0.0, false);
    }
    tiles[result] = out;
    return success();
  };

  auto activationOf = [&](Value in, StringRef func) {
    return unary(in, [&](Value out, Value t) { activation(out, t, func, 1.0, 0.0); });
  };
  auto scalarOp = [&](Value in, StringRef alu, double imm, bool reverse) {
    return unary(in, [&](Value out, Value t) { tensorScalar(out, t, Value(), alu, imm, reverse); });
  };

  auto reduce = [&](Value in, StringRef alu, bool mean) -> LogicalResult {
    Layout& il = layoutOf(in);
    int64_t count = reducedCount(op);
    if (il.kind == Kind::Imm) {  // a splat reduces to a splat
      layouts[result].kind = Kind::Imm;
      layouts[result].imm = alu == "add" && !mean ? il.imm * double(count) : il.imm;
      return success();
    }
    layouts[result].kind = Kind::Row;
    if (il.kind == Kind::Row) {
      // Constant along the row: one value stands for `count` equal ones, so
      // no chunk-by-chunk accumulation is needed even in a chunked kernel.
      Value out = alloc(p, 1, elem);
      double factor = alu == "add" && !mean ? double(count) : 1.0;
      tensorScalar(out, tileOf(in), Value(), factor == 1.0 ? "bypass" : "mul", factor, false);
      tiles[result] = out;
      return success();
    }
    if (count != space.cols)
      return op->emitError("internal: a reduction over ") << count << " elements in a kernel whose rows have "
                                                           << space.cols;
    if (chunked && accumulating) {
      Value part = alloc(p, 1, b->getF32Type());
      setSource(b->create<nc::TensorReduceOp>(loc, part, tileOf(in), b->getStringAttr(alu)), op);
      auto it = accumulators.find(result);
      if (it == accumulators.end())
        accumulators[result] = part;
      else
        setSource(b->create<nc::TensorTensorOp>(loc, it->second, it->second, part, b->getStringAttr(alu)), op);
      return success();
    }
    Value out = alloc(p, 1, elem);
    double scale = mean ? 1.0 / double(count) : 1.0;
    if (scale != 1.0) {
      Value acc = alloc(p, 1, b->getF32Type());
      auto inst = b->create<nc::TensorReduceOp>(loc, acc, tileOf(in), b->getStringAttr(alu));
      setSource(inst, op);
      tensorScalar(out, acc, Value(), "mul", scale, false);
    } else {
      auto inst = b->create<nc::TensorReduceOp>(loc, out, tileOf(in), b->getStringAttr(alu));
      setSource(inst, op);
    }
    tiles[result] = out;
    return success();
  };

  return llvm::TypeSwitch<Operation*, LogicalResult>(op)
      .Case([&](aten::MulTensorOp o) { return binary(o.getSelf(), o.getOther(), "mul", 1.0); })
      .Case([&](aten::DivTensorOp o) { return binary(o.getSelf(), o.getOther(), "div", 1.0); })
      .Case([&](aten::AddTensorOp o) {
        return binary(o.getSelf(), o.getOther(), "add", o.getAlpha().convertToDouble());
      })
      .Case([&](aten::SubTensorOp o) {
        return binary(o.getSelf(), o.getOther(), "sub", o.getAlpha().convertToDouble());
      })
      .Case([&](aten::MulScalarOp o) {
        double v = o.getOther().convertToDouble();
        return unary(o.getSelf(), [&](Value out, Value in) { tensorScalar(out, in, Value(), "mul", v, false); });
      })
      .Case([&](aten::AddScalarOp o) {
        double v = o.getOther().convertToDouble() * o.getAlpha().convertToDouble();
        return unary(o.getSelf(), [&](Value out, Value in) { tensorScalar(out, in, Value(), "add", v, false); });
      })
      .Case([&](aten::NegOp o) {
        return unary(o.getSelf(), [&](Value out, Value in) { activation(out, in, "negate", 1.0, 0.0); });
      })
      .Case([&](aten::ExpOp o) {
        return unary(o.getSelf(), [&](Value out, Value in) { activation(out, in, "exp", 1.0, 0.0); });
      })
      .Case([&](aten::RsqrtOp o) {
        return unary(o.getSelf(), [&](Value out, Value in) { activation(out, in, "rsqrt", 1.0, 0.0); });
      })
      .Case([&](aten::SqrtOp o) {
        return unary(o.getSelf(), [&](Value out, Value in) { activation(out, in, "sqrt", 1.0, 0.0); });
      })
      .Case([&](aten::SubScalarOp o) {
        return scalarOp(o.getSelf(), "sub", o.getOther().convertToDouble() * o.getAlpha().convertToDouble(), false);
      })
      .Case([&](aten::DivScalarOp o) { return scalarOp(o.getSelf(), "div", o.getOther().convertToDouble(), false); })
      .Case([&](aten::RsubScalarOp o) -> LogicalResult {
        double other = o.getOther().convertToDouble(), alpha = o.getAlpha().convertToDouble();
        if (alpha == 1.0) return scalarOp(o.getSelf(), "sub", other, /*reverse=*/true);
        // other - alpha * self == (self * -alpha) + other
        return unary(o.getSelf(), [&](Value out, Value t) {
          Value scaled = alloc(p, llvm::cast<MemRefType>(t.getType()).getDimSize(1), b->getF32Type());
          tensorScalar(scaled, t, Value(), "mul", -alpha, false);
          tensorScalar(out, scaled, Value(), "add", other, false);
        });
      })
      .Case([&](aten::PowTensorScalarOp o) -> LogicalResult {
        double e = o.getOther().convertToDouble();
        if (e == 2.0) return activationOf(o.getSelf(), "square");
        if (e == 0.5) return activationOf(o.getSelf(), "sqrt");
        if (e == -0.5) return activationOf(o.getSelf(), "rsqrt");
        if (e == 1.0) return activationOf(o.getSelf(), "identity");
        return scalarOp(o.getSelf(), "pow", e, false);
      })
      .Case([&](aten::LogOp o) { return activationOf(o.getSelf(), "log"); })
      .Case([&](aten::ToCopyOp o) -> LogicalResult {
        // Rounds to the target dtype even inside a kernel, as eager does. A
        // tile that already holds the target dtype, or a widening to an f32
        // intermediate (exact), is reused as it is.
        elem = resultElem;
        Layout& il = layoutOf(o.getSelf());
        Type to = o.getType().getElementType();
        Type from = llvm::cast<RankedTensorType>(o.getSelf().getType()).getElementType();
        if (to.isInteger(1) && !from.isInteger(1))  // != 0, as PyTorch's bool cast
          return scalarOp(o.getSelf(), "not_equal", 0.0, false);
        if (llvm::isa<IntegerType>(to) && aten::isFloatType(from))
          return op->emitError("casting a computed float to an integer dtype on the device is not supported "
                               "(it needs rounding toward zero)");
        if (il.kind != Kind::Imm) {
          Value in = tileOf(o.getSelf());
          Type inElem = llvm::cast<MemRefType>(in.getType()).getElementType();
          bool widening = !yielded.contains(result) && resultElem.isF32() && (inElem.isBF16() || inElem.isF16()) &&
                          aten::isFloatType(llvm::cast<RankedTensorType>(o.getSelf().getType()).getElementType());
          if (inElem == resultElem || widening) {
            layouts[result] = il;
            tiles[result] = in;
            return success();
          }
        }
        return activationOf(o.getSelf(), "identity");
      })
      .Case([&](aten::TanhOp o) { return activationOf(o.getSelf(), "tanh"); })
      .Case([&](aten::SigmoidOp o) { return activationOf(o.getSelf(), "sigmoid"); })
      .Case([&](aten::ReluOp o) { return activationOf(o.getSelf(), "relu"); })
      .Case([&](aten::SiluOp o) { return activationOf(o.getSelf(), "silu"); })
      .Case([&](aten::AbsOp o) { return activationOf(o.getSelf(), "abs"); })
      .Case([&](aten::GeluOp o) {
        return activationOf(o.getSelf(), o.getApproximate() == "tanh" ? "gelu_tanh" : "gelu");
      })
      .Case([&](aten::EqTensorOp o) { return binary(o.getSelf(), o.getOther(), "is_equal", 1.0); })
      .Case([&](aten::NeTensorOp o) { return binary(o.getSelf(), o.getOther(), "not_equal", 1.0); })
      .Case([&](aten::LtTensorOp o) { return binary(o.getSelf(), o.getOther(), "is_lt", 1.0); })
      .Case([&](aten::LeTensorOp o) { return binary(o.getSelf(), o.getOther(), "is_le", 1.0); })
      .Case([&](aten::GtTensorOp o) { return binary(o.getSelf(), o.getOther(), "is_gt", 1.0); })
      .Case([&](aten::GeTensorOp o) { return binary(o.getSelf(), o.getOther(), "is_ge", 1.0); })
      .Case([&](aten::EqScalarOp o) { return scalarOp(o.getSelf(), "is_equal", o.getOther().convertToDouble(), false); })
      .Case([&](aten::NeScalarOp o) { return scalarOp(o.getSelf(), "not_equal", o.getOther().convertToDouble(), false); })
      .Case([&](aten::LtScalarOp o) { return scalarOp(o.getSelf(), "is_lt", o.getOther().convertToDouble(), false); })
      .Case([&](aten::LeScalarOp o) { return scalarOp(o.getSelf(), "is_le", o.getOther().convertToDouble(), false); })
      .Case([&](aten::GtScalarOp o) { return scalarOp(o.getSelf(), "is_gt", o.getOther().convertToDouble(), false); })
      .Case([&](aten::GeScalarOp o) { return scalarOp(o.getSelf(), "is_ge", o.getOther().convertToDouble(), false); })
      .Case([&](aten::WhereSelfOp o) {
        Layout lc = layoutOf(o.getCondition()), lt = layoutOf(o.getSelf()), lf = layoutOf(o.getOther());
        return select(o.getCondition(), lc, o.getSelf(), lt, o.getOther(), lf);
      })
      .Case([&](aten::MaskedFillScalarOp o) {
        Layout fill;
        fill.kind = Kind::Imm;
        fill.imm = o.getValue().convertToDouble();
        Layout lm = layoutOf(o.getMask()), ls = layoutOf(o.getSelf());
        return select(o.getMask(), lm, Value(), fill, o.getSelf(), ls);
      })
      .Case([&](aten::EmbeddingOp o) -> LogicalResult {
        // One gather per row tile: partition p gets row ids[r0 + p].
        auto tv = viewOf.find(o.getWeight()), iv = viewOf.find(o.getIndices());
        if (tv == viewOf.end() || iv == viewOf.end() || !aten::isContiguous(iv->second))
          return op->emitError("embedding table and indices must be HBM tensors (contiguous indices)");
        const aten::StridedView& T = tv->second;
        layouts[result].kind = Kind::Full;
        Value out = alloc(p, f, elem);
        Value raw = out;
        Type tableElem = llvm::cast<MemRefType>(hbmOf[o.getWeight()].getType()).getElementType();
        if (tableElem != elem) raw = alloc(p, f, tableElem);
        SmallVector<int64_t> ap{T.strides[0], p, T.strides[1], f};
        Operation* g = b->create<nc::DmaGatherOp>(
            loc, hbmOf[o.getWeight()], hbmOf[o.getIndices()], raw, b->getI64IntegerAttr(0),
            b->getI64IntegerAttr(T.offset + c0 * T.strides[1]), b->getDenseI64ArrayAttr(ap),
            b->getI64IntegerAttr(iv->second.offset + r0), b->getI64IntegerAttr(T.shape[0]));
        setEngineAndSource(g, *b, "dma", -1);
        ++numInst;
        ++numDma;
        if (raw != out) activation(out, raw, "identity", 1.0, 0.0);
        tiles[result] = out;
        return success();
      })
      .Case([&](aten::MmOp o) { return matmul(o.getSelf(), o.getMat2(), Value(), 1.0, 1.0); })
      .Case([&](aten::BmmOp o) { return matmul(o.getSelf(), o.getMat2(), Value(), 1.0, 1.0); })
      .Case([&](aten::AddmmOp o) {
        return matmul(o.getMat1(), o.getMat2(), o.getSelf(), o.getBeta().convertToDouble(),
                      o.getAlpha().convertToDouble());
      })
      .Case([&](aten::MeanDimOp o) { return reduce(o.getSelf(), "add", true); })
      .Case([&](aten::SumDimIntListOp o) { return reduce(o.getSelf(), "add", false); })
      .Case([&](aten::AmaxOp o) { return reduce(o.getSelf(), "max", false); })
      .Default([&](Operation* o) {
        return o->emitError("op has no NeuronCore lowering yet: ") << o->getName();
      });
}

// Integer graph inputs (token ids) stay integers in HBM; the gather of an
// embedding reads them directly. Every other value lives on the device in
// its device type (bools and integers computed on the device as f32).
Type KernelLowering::hbmElementType(BlockArgument arg) {
  Type elem = llvm::cast<RankedTensorType>(arg.getType()).getElementType();
  Value outer = kernel.getInputs()[arg.getArgNumber()];
  bool graphInput = llvm::isa<BlockArgument>(outer);
  if (graphInput && llvm::isa<IntegerType>(elem) && !elem.isInteger(1)) return elem;
  return nc::deviceElementType(elem);
}

// After the last chunk: scale a mean and round into the result's tile.
void KernelLowering::finalizeReduction(Operation* op, int64_t p) {
  Value result = op->getResult(0);
  Value acc = accumulators.lookup(result);
  if (!acc) return;  // reduced without accumulation (a per-row or constant input)
  int64_t count = reducedCount(op);
  bool isMean = llvm::isa<aten::MeanDimOp>(op);
  Type elem = yielded.contains(result)
                  ? nc::deviceElementType(llvm::cast<RankedTensorType>(result.getType()).getElementType())
                  : b->getF32Type();
  if (!isMean && elem.isF32()) {
    tiles[result] = acc;
    return;
  }
  Value out = alloc(p, 1, elem);
  auto inst = b->create<nc::TensorScalarOp>(loc, out, acc, Value(), b->getStringAttr("mul"),
                                            b->getF64FloatAttr(isMean ? 1.0 / double(count) : 1.0),
                                            b->getBoolAttr(false));
  setSource(inst, op);
  tiles[result] = out;
}

LogicalResult KernelLowering::storeOutput(Value v, Value hbm, int64_t p, int64_t f) {
  Layout& l = layouts[v];
  if (l.kind == Kind::Imm) {  // written across the tile (or one per row)
    Layout fill;
    if (failed(layoutOfView(aten::contiguousView(llvm::cast<RankedTensorType>(v.getType()).getShape()), fill)))
      return failure();
    int64_t width = fill.kind == Kind::Full ? f : 1;
    Value tile = broadcastRow(Value(), l.imm, p, width, llvm::cast<MemRefType>(hbm.getType()).getElementType(),
                              v.getDefiningOp());
    emitDma(/*load=*/false, hbm, tile, fill, r0, p, c0, width);
    return success();
  }
  auto t = llvm::cast<RankedTensorType>(v.getType());
  Layout store;
  store.kind = l.kind;
  if (auto it = storedThrough.find(v); it != storedThrough.end()) {
    const aten::StridedView& w = it->second;
    if (l.kind == Kind::Row && product(w.shape) == space.rows * space.cols && space.cols > 1) {
      // A row-constant value of full size: written across the row first.
      Value full = broadcastRow(tiles[v], 0.0, p, f, llvm::cast<MemRefType>(hbm.getType()).getElementType(),
                                v.getDefiningOp());
      if (failed(layoutOfView(w, store))) return failure();
      store.kind = Kind::Full;
      emitDma(/*load=*/false, hbm, full, store, r0, p, c0, f);
      return success();
    }
    if (l.kind == Kind::Row) {
      // One element per row: the root's non-unit dims are the rows' non-unit
      // dims, in order (a reduction's result, with or without keepdim).
      SmallVector<int64_t> strides;
      for (auto [size, stride] : llvm::zip(w.shape, w.strides))
        if (size != 1) strides.push_back(stride);
      store.rowStrides.clear();
      size_t next = 0;
      for (int64_t d : space.lead) store.rowStrides.push_back(d == 1 || next >= strides.size() ? 0 : strides[next++]);
      if (next != strides.size() || product(w.shape) != space.rows)
        return kernel.emitError("internal: a returned view of a per-row value does not match the rows");
      store.colStrides.assign(space.trail.size(), 0);
      store.offset = w.offset;
    } else if (failed(layoutOfView(w, store))) {
      return failure();
    }
    store.kind = l.kind;
    emitDma(/*load=*/false, hbm, tiles[v], store, r0, p, c0, f);
    return success();
  }
  if (l.kind == Kind::Row && t.getNumElements() == space.rows * space.cols && space.cols > 1) {
    // A per-row value returned at full width (an expanded column): write the
    // row value across the tile first.
    Value full = broadcastRow(tiles[v], 0.0, p, f, llvm::cast<MemRefType>(hbm.getType()).getElementType(),
                              v.getDefiningOp());
    Layout fullStore;
    if (failed(layoutOfView(aten::contiguousView(t.getShape()), fullStore))) return failure();
    fullStore.kind = Kind::Full;
    emitDma(/*load=*/false, hbm, full, fullStore, r0, p, c0, f);
    return success();
  }
  if (l.kind == Kind::Row) {
    // Per-row results are stored densely: element r of a rows-long tensor.
    if (t.getNumElements() != space.rows)
      return kernel.emitError("per-row result of shape ") << aten::shapeToString(t.getShape())
             << " does not have one element per row";
    store.rowStrides = contiguousStrides(space.lead);
    store.colStrides.assign(space.trail.size(), 0);
  } else if (failed(layoutOfView(aten::contiguousView(t.getShape()), store)) ||
             t.getNumElements() != space.rows * space.cols) {
    return kernel.emitError("result of shape ") << aten::shapeToString(t.getShape())
           << " does not cover the iteration space";
  }
  emitDma(/*load=*/false, hbm, tiles[v], store, r0, p, c0, f);
  return success();
}

// A Full [p x f] tile holding `imm` plus, when given, the per-row value of
// `rowTile` (iota writes the constant, an add the row value).
Value KernelLowering::broadcastRow(Value rowTile, double imm, int64_t p, int64_t f, Type elem,
                                   Operation* source) {
  Value t = alloc(p, f, elem);
  setSource(b->create<nc::IotaOp>(loc, t, b->getF64FloatAttr(imm), b->getF64FloatAttr(0.0),
                                  b->getF64FloatAttr(0.0)),
            source);
  if (rowTile)
    setSource(b->create<nc::TensorScalarOp>(loc, t, t, rowTile, b->getStringAttr("add"),
                                            b->getF64FloatAttr(0.0), b->getBoolAttr(false)),
              source);
  return t;
}

// A view of a computed value that only the kernel's results (or further
// such views) use: returned values at the end of the chain are stored
// through the chain's inverse access pattern. True if that is the case.
bool KernelLowering::storedViewChain(Operation* view) {
  std::function<bool(Value)> onlyReturned = [&](Value v) {
    return llvm::all_of(v.getUsers(), [&](Operation* u) {
      return llvm::isa<nc::YieldOp>(u) || (aten::isViewOp(u) && onlyReturned(u->getResult(0)));
    });
  };
  Value result = view->getResult(0);
  if (!onlyReturned(result)) return false;
  if (!yielded.contains(result)) return true;  // an inner link; the returned view is checked on its own
  SmallVector<Operation*> chain;
  Value v = result;
  while (Operation* def = v.getDefiningOp()) {
    if (!aten::isViewOp(def) || viewOf.count(def->getOperand(0))) break;
    chain.push_back(def);
    v = def->getOperand(0);
  }
  std::reverse(chain.begin(), chain.end());
  aten::StridedView inverse;
  if (chain.empty() || !aten::invertViewChain(chain, inverse)) return false;
  storedThrough[result] = inverse;
  sameTileAs[result] = v;
  yielded.insert(v);  // computed in the result's dtype, as a returned value is
  return true;
}

// Views of inputs are folded into access patterns: they emit nothing. With
// `allowTileAliases`, a reshape that keeps the rows of a value computed in
// the kernel is that value's tile.
LogicalResult KernelLowering::foldViews(Block& old, bool allowTileAliases) {
  for (BlockArgument arg : old.getArguments())
    viewOf[arg] = aten::contiguousView(llvm::cast<RankedTensorType>(arg.getType()).getShape());
  for (Operation& op : old.without_terminator()) {
    if (!aten::isViewOp(&op)) continue;
    auto in = viewOf.find(op.getOperand(0));
    if (in == viewOf.end()) {
      // A returned view is stored through its chain's inverse pattern; a
      // reshape that keeps the rows of a value with a tile reuses the tile.
      bool returnedOnly = allowTileAliases && yielded.contains(op.getResult(0)) && storedViewChain(&op);
      if (returnedOnly) continue;
      if (allowTileAliases && aten::isRowPreservingReshape(&op) && !tilelessViews.contains(op.getOperand(0))) {
        sameTileAs[op.getResult(0)] = op.getOperand(0);
        continue;
      }
      if (allowTileAliases && storedViewChain(&op)) {
        tilelessViews.insert(op.getResult(0));
        continue;
      }
      return op.emitError("internal: a view of a value computed in the same kernel that is neither a "
                          "row-preserving reshape nor a returned one-to-one view");
    }
    std::string error;
    aten::StridedView out;
    if (!aten::applyView(&op, in->second, out, &error)) return op.emitError(error);
    viewOf[op.getResult(0)] = out;
  }
  return success();
}

// The lowered body: HBM memrefs for the inputs, then the outputs.
Block* KernelLowering::createIsaBody(Block& old, SmallVectorImpl<Value>& outHbm) {
  Block* body = new Block();
  for (BlockArgument arg : old.getArguments()) {
    auto t = llvm::cast<RankedTensorType>(arg.getType());
    hbmOf[arg] = body->addArgument(MemRefType::get(t.getShape(), hbmElementType(arg)), arg.getLoc());
  }
  for (Operation& op : old.without_terminator())
    if (aten::isViewOp(&op) && viewOf.count(op.getResult(0))) hbmOf[op.getResult(0)] = hbmOf[op.getOperand(0)];
  for (Value v : kernel.getResults()) {
    auto t = llvm::cast<RankedTensorType>(v.getType());
    outHbm.push_back(body->addArgument(MemRefType::get(t.getShape(), nc::deviceElementType(t.getElementType())), loc));
  }
  kernel.getBody().push_back(body);
  return body;
}

void KernelLowering::finishBody(Block& old, int64_t& instructions, int64_t& dmas) {
  b->create<nc::YieldOp>(loc);
  old.dropAllDefinedValueUses();
  old.erase();
  instructions += numInst;
  dmas += numDma;
}

// A kernel that is one cat: each input is copied, tile by tile, into its slab
// of the output (the output's strides with an offset along the cat dim).
LogicalResult KernelLowering::lowerCat(aten::CatOp cat, Block* body, ArrayRef<Value> outHbm) {
  auto outType = llvm::cast<RankedTensorType>(cat.getType());
  aten::StridedView outView = aten::contiguousView(outType.getShape());
  int64_t dim = int64_t(cat.getDim());
  if (dim < 0) dim += outType.getRank();
  int64_t position = 0;
  for (Value in : cat.getTensors()) {
    auto t = llvm::cast<RankedTensorType>(in.getType());
    // The iteration space of this input.
    space = Space{};
    if (t.getRank() > 0) {
      space.lead.assign(t.getShape().begin(), t.getShape().end() - 1);
      space.trail.assign(1, t.getShape().back());
    }
    space.rows = product(space.lead);
    space.cols = product(space.trail);
    aten::StridedView slab = outView;
    slab.shape.assign(t.getShape().begin(), t.getShape().end());
    slab.offset = position * outView.strides[size_t(dim)];
    position += t.getDimSize(dim);
    if (space.rows == 0 || space.cols == 0) continue;
    Layout load, store;
    if (failed(layoutOfView(viewOf.count(in) ? viewOf[in] : aten::contiguousView(t.getShape()), load)) ||
        failed(layoutOfView(slab, store)))
      return failure();
    load.kind = store.kind = Kind::Full;
    Value src = hbmOf[in];
    Type elem = llvm::cast<MemRefType>(src.getType()).getElementType();
    int64_t chunk = std::min(space.cols, maxFree);
    for (r0 = 0; r0 < space.rows; r0 += nc::kNumPartitions) {
      int64_t p = std::min<int64_t>(nc::kNumPartitions, space.rows - r0);
      for (c0 = 0; c0 < space.cols; c0 += chunk) {
        int64_t f = std::min(chunk, space.cols - c0);
        ++iteration;
        Value tile = alloc(p, f, elem);
        emitDma(/*load=*/true, src, tile, load, r0, p, c0, f);
        emitDma(/*load=*/false, outHbm.front(), tile, store, r0, p, c0, f);
      }
    }
  }
  (void)body;
  return success();
}

LogicalResult KernelLowering::run(int64_t& instructions, int64_t& dmas) {
  if (kernel.isLowered()) return success();
  {
    Block& old = kernel.getBody().front();
    aten::CatOp cat;
    bool others = false;
    for (Operation& op : old.without_terminator()) {
      if (auto c = llvm::dyn_cast<aten::CatOp>(op)) cat = c;
      else if (!aten::isViewOp(&op)) others = true;
    }
    if (cat) {
      if (others || kernel.getNumResults() != 1)
        return kernel.emitError("a cat kernel must hold only the cat and views of its inputs");
      auto rt = llvm::cast<RankedTensorType>(kernel.getResult(0).getType());
      if (llvm::any_of(cat.getTensors(), [&](Value v) {
            return nc::deviceElementType(llvm::cast<RankedTensorType>(v.getType()).getElementType()) !=
                   nc::deviceElementType(rt.getElementType());
          }))
        return cat.emitError("cat of tensors with different dtypes is not supported yet");
      if (failed(foldViews(old, /*allowTileAliases=*/false))) return failure();
      SmallVector<Value> outHbm;
      Block* body = createIsaBody(old, outHbm);
      OpBuilder builder = OpBuilder::atBlockEnd(body);
      b = &builder;
      if (failed(lowerCat(cat, body, outHbm))) {
        body->erase();
        return failure();
      }
      finishBody(old, instructions, dmas);
      return success();
    }
  }
  if (failed(computeSpace())) return failure();
  Block& oldBody = kernel.getBody().front();
  auto yield = llvm::cast<nc::YieldOp>(oldBody.getTerminator());
  for (Value v : yield.getValues()) yielded.insert(v);

  if (failed(foldViews(oldBody, /*allowTileAliases=*/true))) return failure();
  // A value returned through a reshape that reuses its tile is computed in
  // the returned dtype.
  for (Value v : yield.getValues())
    for (auto it = sameTileAs.find(v); it != sameTileAs.end(); it = sameTileAs.find(it->second))
      yielded.insert(it->second);
  for (BlockArgument arg : oldBody.getArguments()) {
    Type elem = hbmElementType(arg);
    if (!llvm::isa<IntegerType>(elem)) continue;
    for (OpOperand& use : arg.getUses())
      if (!llvm::isa<aten::EmbeddingOp>(use.getOwner()) || use.getOperandNumber() != 1)
        return use.getOwner()->emitError("an integer graph input can only be used as embedding indices for now");
  }
  for (Operation& op : oldBody.without_terminator()) {
    Value moving;
    if (auto o = llvm::dyn_cast<aten::MmOp>(op)) moving = o.getMat2();
    if (auto o = llvm::dyn_cast<aten::BmmOp>(op)) moving = o.getMat2();
    if (auto o = llvm::dyn_cast<aten::AddmmOp>(op)) moving = o.getMat2();
    if (!moving || !viewOf.count(moving)) continue;
    const aten::StridedView& v = viewOf[moving];
    if (v.strides.back() != 1 && v.strides[v.strides.size() - 2] == 1) matmulColumns = nc::kNumPartitions;
  }
  if (permutedInput) {
    auto it = viewOf.find(permutedInput);
    if (it == viewOf.end()) return kernel.emitError("the permuted reduction input is not in HBM");
    aten::StridedView permuted;
    std::string error;
    if (!aten::viewPermute(inputPermutation, it->second, permuted, &error)) return kernel.emitError(error);
    it->second = permuted;
  }
  // The values read from HBM: those used by a computing op or returned.
  SmallVector<Value> hbmValues;
  // (A matmul reads its two matrix operands itself, slice by slice.)
  for (auto& [v, view] : viewOf) {
    bool used = llvm::any_of(v.getUses(), [](OpOperand& use) {
      Operation* u = use.getOwner();
      if (aten::isViewOp(u)) return false;
      if (llvm::isa<aten::MmOp, aten::BmmOp, aten::EmbeddingOp>(u)) return false;
      if (llvm::isa<aten::AddmmOp>(u)) return use.getOperandNumber() == 0;  // the bias
      return true;
    });
    if (used) hbmValues.push_back(v);
  }
  // DenseMap order is not deterministic; issue loads in program order.
  llvm::sort(hbmValues, [&](Value a, Value b) {
    auto argA = llvm::dyn_cast<BlockArgument>(a), argB = llvm::dyn_cast<BlockArgument>(b);
    if (argA && argB) return argA.getArgNumber() < argB.getArgNumber();
    if (argA || argB) return bool(argA);
    return a.getDefiningOp()->isBeforeInBlock(b.getDefiningOp());
  });
  for (Value v : hbmValues)
    if (failed(layoutOfInput(v, layouts[v]))) return failure();
  for (Operation& op : oldBody.without_terminator())
    if (auto v = splatValue(op.getNumResults() ? op.getResult(0) : Value())) {
      layouts[op.getResult(0)].kind = Kind::Imm;
      layouts[op.getResult(0)].imm = *v;
    } else if (llvm::isa<arith::ConstantOp>(op)) {
      return op.emitError("non-splat constants must be kernel inputs");
    }

  SmallVector<Value> outHbm;
  Block* body = createIsaBody(oldBody, outHbm);
  OpBuilder builder = OpBuilder::atBlockEnd(body);
  b = &builder;

  // Ops that need a reduction's result (directly or not).
  llvm::DenseSet<Operation*> afterReduction;
  SmallVector<Operation*> reductions;
  for (Operation& op : oldBody.without_terminator()) {
    if (!aten::reducedDims(&op).empty()) reductions.push_back(&op);
    for (Value v : op.getOperands())
      if (Operation* def = v.getDefiningOp();
          def && (afterReduction.contains(def) || !aten::reducedDims(def).empty()))
        afterReduction.insert(&op);
  }
  chunked = space.reduces && space.trail.size() == 1 && space.cols > maxFree &&
            space.cols * 4 * 4 > rowBudget;
  // A matmul's output tile is one 2 KiB PSUM bank: 512 f32 columns.
  int64_t chunk = space.reduces && !chunked ? space.cols
                  : std::min(space.cols, space.matmul ? matmulColumns : maxFree);
  auto fail = [&]() {
    body->erase();
    return failure();
  };
  // A row-preserving reshape of a computed value takes over its tile.
  auto aliasTile = [&](Operation& op) {
    auto alias = sameTileAs.find(op.getNumResults() ? op.getResult(0) : Value());
    if (alias == sameTileAs.end()) return false;
    tiles[alias->first] = tiles[alias->second];
    layouts[alias->first] = layouts[alias->second];
    return true;
  };
  // With chunked rows, only full-width values computed before the reductions
  // are stored chunk by chunk; the rest once the row is done.
  auto storedPerChunk = [&](Value v) {
    Operation* def = v.getDefiningOp();
    return def && !afterReduction.contains(def) && aten::reducedDims(def).empty() &&
           layouts[v].kind == Kind::Full;
  };
  // Kept moving slices, bytes per partition: halved, and at last none, each
  // time they make the kernel's tiles too large for SBUF (below).
  int64_t movingBudget = 128 * 1024;
relower:
  // Column blocks (see movingTiles): one block of all columns unless the
  // kernel's moving operands are worth keeping across row tiles.
  int64_t blockCols = space.cols;
  if (movingBudget > 0 && space.matmul && !space.reduces && !chunked && space.rows > nc::kNumPartitions &&
      space.cols > chunk) {
    int64_t bytesPerColumnTile = 0;
    for (Operation& op : oldBody.without_terminator()) {
      Value moving;
      if (auto o = llvm::dyn_cast<aten::MmOp>(op)) moving = o.getMat2();
      if (auto o = llvm::dyn_cast<aten::AddmmOp>(op)) moving = o.getMat2();
      if (auto o = llvm::dyn_cast<aten::BmmOp>(op)) moving = o.getMat2();
      if (!moving) continue;
      // A bmm's slices belong to one batch: a block keeps those of the batch
      // its row tiles are in, and they die when the rows move on.
      auto type = llvm::cast<RankedTensorType>(moving.getType());
      int64_t k = type.getDimSize(type.getRank() - 2);
      int64_t elemBytes = nc::deviceElementType(type.getElementType()).getIntOrFloatBitWidth() / 8;
      bytesPerColumnTile += (k + nc::kNumPartitions - 1) / nc::kNumPartitions * chunk * elemBytes;
    }
    if (bytesPerColumnTile > 0) {
      reuseMoving = true;
      blockCols = std::max<int64_t>(1, movingBudget / bytesPerColumnTile) * chunk;
    }
  }
  for (int64_t block = 0; block < space.cols; block += blockCols) {
    movingTiles.clear();
    for (r0 = 0; r0 < space.rows;) {
      int64_t p = std::min<int64_t>(nc::kNumPartitions, space.rows - r0);
      if (space.rowBlock > 0) p = std::min(p, space.rowBlock - r0 % space.rowBlock);
      accumulators.clear();
      for (c0 = block; c0 < std::min(space.cols, block + blockCols); c0 += chunk) {
        int64_t f = std::min(chunk, space.cols - c0);
        tiles.clear();
        ++iteration;
        accumulating = chunked;
        // Issue every input load up front so the DMA queues start while the
        // engines are still busy with the previous row tile.
        for (Value v : hbmValues) tileOf(v);
        for (Operation& op : oldBody.without_terminator()) {
          if (chunked && afterReduction.contains(&op)) continue;
          if (aliasTile(op) || llvm::isa<arith::ConstantOp>(op) || aten::isViewOp(&op)) continue;
          if (failed(lowerOp(&op, p, f))) return fail();
        }
        for (auto [v, hbm] : llvm::zip(yield.getValues(), outHbm))
          if ((!chunked || storedPerChunk(v)) && failed(storeOutput(v, hbm, p, f))) return fail();
      }
      if (!chunked) {
        r0 += p;
        continue;
      }
      c0 = 0;
      accumulating = false;
      for (Operation* op : reductions) finalizeReduction(op, p);
      for (Operation& op : oldBody.without_terminator()) {
        if (!afterReduction.contains(&op) || aliasTile(op) || llvm::isa<arith::ConstantOp>(op) ||
            aten::isViewOp(&op))
          continue;
        if (failed(lowerOp(&op, p, 1))) return fail();
        if (layouts[op.getResult(0)].kind == Kind::Full) {
          op.emitError("a row of ") << space.cols << " elements is too long for SBUF, and this op needs "
                                    << "the reduced value at every element; it cannot be chunked";
          return fail();
        }
      }
      for (auto [v, hbm] : llvm::zip(yield.getValues(), outHbm))
        if (!storedPerChunk(v) && failed(storeOutput(v, hbm, p, 1))) return fail();
      r0 += p;
    }
  }
  // Kept moving slices live across a block; if the tiles then need more than
  // one and a half row budgets (three quarters of a trn1 partition with the
  // default budget) at some point, the planner may lack room for
  // fragmentation and double buffering: lower the kernel again with blocks
  // half as wide, and with none once a block is a single column tile.
  if (reuseMoving && sbufPeakBytes(*body) > rowBudget * 3 / 2) {
    body->erase();
    outHbm.clear();
    body = createIsaBody(oldBody, outHbm);
    builder.setInsertionPointToEnd(body);
    tiles.clear();
    hoisted.clear();
    stationaryTiles.clear();
    stationaryRow = -1;
    movingTiles.clear();
    accumulators.clear();
    numInst = numDma = 0;
    movingBudget = blockCols > chunk ? movingBudget / 2 : 0;
    reuseMoving = false;
    goto relower;
  }
  finishBody(oldBody, instructions, dmas);
  return success();
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
    if (Operation* alloc = reduce.getOut().getDefiningOp()) alloc->moveBefore(square);
    OpBuilder b(square);
    auto act = b.create<nc::ActivationOp>(square.getLoc(), square.getOut(), square.getIn0(), Value(),
                                          reduce.getOut(), b.getStringAttr("square"),
                                          b.getF64FloatAttr(1.0), b.getF64FloatAttr(0.0));
    auto source = square->getAttrOfType<IntegerAttr>("source_op");
    setEngineAndSource(act, b, "scalar", source ? source.getInt() : -1);
    square.erase();
    reduce.erase();
  }
  return int64_t(matches.size());
}

struct LowerToIsaPass : impl::LowerToIsaBase<LowerToIsaPass> {
  using LowerToIsaBase::LowerToIsaBase;
  void runOnOperation() override {
    SmallVector<nc::KernelOp> kernels;
    getOperation().walk([&](nc::KernelOp k) { kernels.push_back(k); });
    for (nc::KernelOp k : kernels) {
      KernelLowering lowering(k, maxFreeElements, rowBudgetBytes);
      int64_t inst = 0, dmas = 0;
      if (failed(lowering.run(inst, dmas))) return signalPassFailure();
      inst -= fuseSquareSum(k.getBody().front());
      numInstructions += inst;
      numDmas += dmas;
    }
  }
};

}  // namespace
}  // namespace neuroncc
