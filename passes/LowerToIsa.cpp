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

#include "device_model.h"
#include "passes/KernelLowering.h"
#include "passes/WindowOperand.h"
#include "llvm/ADT/ScopeExit.h"
#include "passes/Passes.h"
#include "dialects/aten/TypeRules.h"

namespace neuroncc {
#define GEN_PASS_DEF_LOWERTOISA
#include "passes/Passes.h.inc"
}  // namespace neuroncc

using namespace mlir;

namespace neuroncc {
namespace lowering {

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
    SmallVector<Value> views{alloc.getResult()};
    while (!views.empty())
      for (Operation* user : views.pop_back_val().getUsers()) {
        last = std::max(last, position.lookup(user));
        if (auto view = llvm::dyn_cast<nc::TileColumnsOp>(user)) views.push_back(view.getView());
      }
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


// The ops of a matmul's prologue (see formPrologues in FormKernels.cpp):
// what computes its left operand inside the kernel, which nothing else in the
// kernel reads.
LogicalResult KernelLowering::findPrologue(Block& body) {
  for (Operation& op : body.without_terminator()) {
    if (!llvm::isa<aten::MmOp, aten::AddmmOp>(op)) continue;
    // Views of kernel inputs are access patterns, not ops of either part.
    auto readsHbm = [](Value v) {
      while (Operation* d = v.getDefiningOp()) {
        if (llvm::isa<arith::ConstantOp>(d)) return true;
        if (!aten::isViewOp(d)) return false;
        v = d->getOperand(0);
      }
      return true;
    };
    Value lhs = op.getOperand(llvm::isa<aten::AddmmOp>(op) ? 1 : 0);
    if (readsHbm(lhs)) continue;
    SmallVector<Value> work{lhs};
    while (!work.empty()) {
      Value v = work.pop_back_val();
      Operation* d = v.getDefiningOp();
      if (readsHbm(v) || !prologueOps.insert(d).second) continue;
      for (Value o : d->getOperands()) work.push_back(o);
    }
    prologueOperand = lhs;
    for (Operation* p : prologueOps)
      for (OpOperand& use : p->getResult(0).getUses())
        if (!prologueOps.contains(use.getOwner()) && !(use.get() == lhs && use.getOwner() == &op))
          return p->emitError("internal: a value of a matmul's prologue is read outside it");
    return success();
  }
  return success();
}

// A copy kernel's columns take the trailing dims that are one run in the
// copied view as well as in the (contiguous) result, while 128 rows remain:
// NHWC to NCHW of [4, 56, 56, 64] copies [256 x 3136] (its rows adjacent
// in the input: transposed loads) rather than [14336 x 56] rows of
// elements 64 apart. The merged dims stay merged in `full`.
void KernelLowering::mergeCopiedColumns(Value copied, SmallVectorImpl<int64_t>& full) {
  // (A copied view of a kernel input, through at least one view op.)
  if (!copied.getDefiningOp() || !llvm::isa<BlockArgument>(aten::viewChainRoot(copied))) return;
  std::optional<aten::StridedView> chained = aten::viewOfChain(copied);
  // (Two dims at least: a 0-d or 1-d copy has no columns to merge.)
  if (!chained || chained->shape.size() != full.size() || full.size() < 2) return;
  const aten::StridedView& view = *chained;
  auto chains = [&](size_t d) { return full[d - 1] > 1 && view.strides[d - 1] == view.strides[d] * full[d]; };
  size_t first = full.size() - 1;
  while (first > 0 && product(ArrayRef<int64_t>(full).take_front(first - 1)) >= nc::kNumPartitions && chains(first))
    --first;
  // Fewer rows where then the rows are adjacent in the input and the others
  // are not: the last dim moved to the front of [16, 8, 7, 12, 32] copies
  // [32 x 10752] (transposed loads), not [512 x 672] rows of elements 32
  // apart (one run each: 439.4 us).
  size_t whole = first;
  while (whole > 0 && chains(whole)) --whole;
  if (whole < first && whole > 0 && view.strides[whole - 1] == 1 && view.strides[first - 1] != 1) first = whole;
  if (first + 1 == full.size()) return;
  int64_t columns = product(ArrayRef<int64_t>(full).drop_front(first));
  full.resize(first);
  full.push_back(columns);
}

LogicalResult KernelLowering::computeSpace(bool prologue) {
  Block& body = kernel.getBody().front();
  // A matmul's prologue and the rest of the kernel have a space each.
  auto other = [&](Operation& op) { return prologueOps.contains(&op) != prologue; };
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
      mergeCopiedColumns(yield.getValues().front(), full);
    }
  }
  for (Operation& op : body.without_terminator()) {
    if (llvm::isa<arith::ConstantOp>(op) || aten::isViewOp(&op) || other(op) || windowOps.contains(&op)) continue;
    SmallVector<int64_t> shape;
    if (SmallVector<int64_t> dims = aten::reducedDims(&op); !dims.empty()) {
      auto in = llvm::cast<RankedTensorType>(op.getOperand(0).getType());
      int64_t rank = in.getRank(), k = int64_t(dims.size());
      bool trailingDims = true;
      for (int64_t i = 0; i < k; ++i) trailingDims &= dims[size_t(i)] == rank - k + i;
      bool alone = llvm::all_of(body.without_terminator(), [&](Operation& o) {
        return &o == &op || aten::isViewOp(&o) || llvm::isa<arith::ConstantOp>(o);
      });
      // The kept dims moved before the reduced ones, in order.
      auto keptFirst = [&] {
        SmallVector<int64_t> perm;
        for (int64_t d = 0; d < rank; ++d)
          if (!llvm::is_contained(dims, d)) perm.push_back(d);
        perm.append(dims.begin(), dims.end());
        return perm;
      };
      // Kept dims of size 1 among or after the reduced ones ([A, R, 1] over
      // R) change nothing: the columns are those dims too, read as they lie.
      if (!trailingDims) {
        trailingDims = true;
        for (int64_t d = dims.front(); d < rank; ++d)
          trailingDims &= in.getDimSize(d) == 1 || llvm::is_contained(dims, d);
        if (trailingDims && alone) {
          // Alone, such a reduction takes the space [kept..., reduced...]
          // (moving unit dims is a reshape: every value reads as it lies),
          // whose one trailing dim lets a long reduction of few rows spread
          // over the partitions (splitLongRows): the sum over dim 0 of
          // [52000, 1] held its whole column on one partition, more than
          // SBUF has.
          SmallVector<int64_t> kept;
          for (int64_t d : keptFirst()) kept.push_back(in.getDimSize(d));
          space.reduces = true;
          trailing = int64_t(dims.size());
          if (product(kept) >= product(full)) full = kept;
          continue;
        }
        if (trailingDims) k = rank - dims.front();
      }
      if (!trailingDims) {
        // Alone in its kernel, a reduction over other dims reads its input
        // through a permuted access pattern that puts the reduced dims last.
        if (!alone || !llvm::isa<BlockArgument>(op.getOperand(0)) && !op.getOperand(0).getDefiningOp<arith::ConstantOp>() &&
                          !aten::isViewOp(op.getOperand(0).getDefiningOp()))
          return op.emitError("reductions over non-trailing dims are only supported alone in a kernel (dims ")
                 << aten::shapeToString(dims) << " of a rank-" << rank << " tensor)";
        SmallVector<int64_t> perm = keptFirst();
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
    if (other(op)) continue;
    else if (llvm::isa<aten::BmmOp>(op)) {
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
  // A matmul's epilogue over split columns (FormKernels' joinsSplitColumns):
  // the columns are the trailing dims that flatten into the matmul's N.
  for (Operation& op : body.without_terminator()) {
    if (!llvm::isa<aten::MmOp, aten::AddmmOp, aten::BmmOp>(op) || space.reduces || other(op)) continue;
    auto mm = llvm::cast<RankedTensorType>(op.getResult(0).getType());
    int64_t rank = mm.getRank();
    if (int64_t split = aten::trailingDimsOf(full, mm.getNumElements() / mm.getDimSize(rank - 1), mm.getDimSize(rank - 1)))
      k = split;
    break;
  }
  // An elementwise kernel whose trailing dims are 1 ([B, S, 1] values)
  // would run one column per partition: its columns take the innermost dim
  // longer than 1 as well (any split of the dims into rows and columns
  // computes the same elements; [129, 129, 1] took 131 row tiles of one
  // column each, 21,000 instructions for two digammas).
  if (!prologue && productsOnPartitions(body, full)) {
    space.batchRows = true;
    space.matmul = false;
    space.rowBlock = 0;
    k = 2;
  }
  bool elementwise = !prologue && !space.reduces && !space.matmul && !space.batchRows &&
                     llvm::none_of(body.without_terminator(), [](Operation& op) {
                       return llvm::isa<aten::EmbeddingOp, aten::CatOp>(op);
                     });
  // (Only where the widened columns fit one tile: column chunks take a
  // single innermost dim.)
  space.elementwise = elementwise;
  if (elementwise) {
    int64_t widened = k;
    while (widened < int64_t(full.size()) && product(ArrayRef<int64_t>(full).take_back(size_t(widened))) == 1)
      ++widened;
    if (product(ArrayRef<int64_t>(full).take_back(size_t(widened))) <= maxFree) k = widened;
  }
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
  if (!prologue) {
    splitLongRows();
    groupSmallBatches(body);
  }
  int64_t iterations = (space.rows + nc::kNumPartitions - 1) / nc::kNumPartitions *
                       ((space.cols + maxFree - 1) / maxFree);
  if (iterations > (int64_t(1) << 20))
    return kernel.emitError("kernel needs ") << iterations
           << " row-tile iterations; programs are unrolled and at most 2^20 are supported";
  return success();
}

// A kernel over fewer rows than partitions spreads each row over several
// partitions: the innermost dim C becomes [m, C / m] with m =
// nc::spreadFactor(rows, C). Every value is read and written through strides
// of the unsplit shape, so any broadcast still works. An elementwise kernel
// does so when its rows are longer than one chunk (a 1 x 2^31 tensor); a
// reducing one from nc::kMinSpreadReduction columns (a softmax over a 32000-word
// vocabulary for one token ran on one partition: 75.5 us; form-kernels
// counts on it to keep such a softmax whole). Each reduction then reduces
// its partition's part of the row and combines the m partials
// (combineSpreadPartials), so a per-row value is held by each of its row's
// partitions and stored from one of them.
void KernelLowering::splitLongRows() {
  Block& body = kernel.getBody().front();
  if (space.matmul || permutedInput || space.trail.size() != 1 || space.rows >= nc::kNumPartitions ||
      space.cols <= (space.reduces ? nc::kMinSpreadReduction - 1 : maxFree))
    return;
  bool computes = false;
  for (Operation& op : body.without_terminator()) {
    if (llvm::isa<aten::EmbeddingOp, aten::CatOp>(op)) return;
    // A reduction over the whole row, or over a per-row value.
    if (!aten::reducedDims(&op).empty() && reducedCount(&op) != space.cols && reducedCount(&op) != 1) return;
    computes |= !aten::isViewOp(&op) && !llvm::isa<arith::ConstantOp>(op);
  }
  if (!computes) return;
  for (Value v : body.getTerminator()->getOperands()) {
    int64_t n = llvm::cast<RankedTensorType>(v.getType()).getNumElements();
    if (n != space.rows * space.cols && !(space.reduces && n == space.rows)) return;
  }
  int64_t best = nc::spreadFactor(space.rows, space.cols);
  if (best == 1) return;
  space.split = best;
  space.lead.push_back(best);
  space.trail.back() /= best;
  space.rows *= best;
  space.cols /= best;
}

// Short rows. A row under 512 bytes read or written on its own partition is
// a DMA run that costs its descriptor (20 ns) more than its bytes: a
// [16384 x 64] bf16 tensor moves at a quarter of the bandwidth in 128 row
// tiles. Two ways put several consecutive rows on each partition, so that
// they are one run: an elementwise kernel packs them into its columns
// (packShortRows); any other kernel over whole rows interleaves its row
// tiles (interleaveShortRows). Both take g, the rows per partition, as the
// smallest divisor of L (shortRowDim) that makes the narrowest value's runs
// 1 KiB, keeping at least kMinShortRowTiles row tiles and the g rows within
// one column tile; or the largest that fits, if none reaches it (the
// constants are in KernelLowering.h). Fewer than kMinShortRowTiles row
// tiles overlap too little: the loads, compute and
// stores of successive tiles, and a kernel that reads the results, which
// starts on the first ones (a LayerNorm over 1576 rows of 192, 13 row tiles
// as it was: 16.5 us, 4 tiles of 4 rows a partition: 17.2 us; BERT-tiny's
// LayerNorm over 2048 rows of 128 in 4 groups of 4 rows a partition slowed
// the layer from 150.1 to 151.9 us, in 8 of 2 not). A kernel that moves few
// bytes (movesFewBytes) keeps one (minShortRowTiles()): its fixed costs, not
// overlap, bound it.

static Type hbmTypeOf(Value outer);

int64_t KernelLowering::narrowestElementBytes(ArrayRef<Value> hbmValues) {
  auto bytesOf = [](Type elem) { return std::max<int64_t>(1, int64_t(elem.getIntOrFloatBitWidth()) / 8); };
  int64_t narrowest = 8;
  for (Value v : hbmValues) {
    Value root = v;
    while (Operation* def = root.getDefiningOp()) root = def->getOperand(0);
    if (auto arg = llvm::dyn_cast<BlockArgument>(root)) narrowest = std::min(narrowest, bytesOf(hbmElementType(arg)));
  }
  for (Value outer : kernel.getResults()) narrowest = std::min(narrowest, bytesOf(hbmTypeOf(outer)));
  return narrowest;
}

// Whether the kernel's operands and results together hold fewer bytes than
// the DMA queues move, all at once, in one transfer's fixed cost (16 x 2 us
// at 25.6 GB/s: 800 KiB on trn1). Such a kernel's time is mostly fixed
// costs and latency: its row tiles need not overlap (one transfer each way
// already costs more than moving all its bytes), and its transfers find the
// queues idle. (An operand read only in part counts whole: such a kernel
// keeps the rules of large ones.)
bool KernelLowering::movesFewBytes() {
  const neff::DeviceParams& d = neff::Trn1();
  const double budget = fewBytesLimit >= 0 ? double(fewBytesLimit)
                                           : double(d.dma_queues) * neff::DmaQueueBytesPerNs(d) * d.dma_fixed_ns;
  double bytes = 0;
  auto add = [&](Type t) {
    if (auto shaped = llvm::dyn_cast<ShapedType>(t); shaped && shaped.hasStaticShape())
      bytes += double(shaped.getNumElements()) * double(std::max<int64_t>(1, shaped.getElementTypeBitWidth() / 8));
  };
  llvm::for_each(kernel->getOperandTypes(), add);
  llvm::for_each(kernel->getResultTypes(), add);
  return bytes < budget;
}

int64_t KernelLowering::shortRowDim() const {
  for (int64_t k = int64_t(space.lead.size()) - 1; k >= 0; --k)
    if (space.lead[size_t(k)] > 1) return k;
  return -1;
}

// The rows per partition for rows of `cols` elements stepping along a dim
// of L (of `rows` in all), as shortRowFactor describes.
static int64_t packFactor(int64_t L, int64_t rows, int64_t cols, int64_t maxFree, int64_t narrowest,
                          int64_t runBytes, int64_t minTiles, int64_t maxRows = std::numeric_limits<int64_t>::max()) {
  if (cols * narrowest >= kShortRowBytes) return 1;
  int64_t g = 1;
  for (int64_t d = 2; d <= std::min(L, maxRows) && d * cols <= maxFree &&
                      rows / d >= nc::kNumPartitions * minTiles;
       ++d) {
    if (L % d != 0) continue;
    g = d;
    if (d * cols * narrowest >= runBytes) break;
  }
  return g;
}

int64_t KernelLowering::shortRowFactor(int64_t rowDim, int64_t narrowest, int64_t runBytes, int64_t maxRows) {
  if (rowDim < 0) return 1;
  return packFactor(space.lead[size_t(rowDim)], space.rows, space.cols, maxFree, narrowest, runBytes,
                    minShortRowTiles(), maxRows);
}

SmallVector<int64_t> KernelLowering::rowPattern(const Layout& l) const {
  SmallVector<int64_t> ap;
  for (auto [size, stride] : llvm::zip(space.trail, l.colStrides)) ap.append({stride, size});
  return simplifyFreePattern(ap);
}

bool KernelLowering::rowIsOneRun(const Layout& l) const {
  if (l.kind != Kind::Full) return true;
  SmallVector<int64_t> ap = rowPattern(l);
  return ap.size() == 2 && ap[0] == 1;
}

// Whether `ok` holds for the layout of every returned view a result is
// stored through (of it, or of the value whose tile it shares).
bool KernelLowering::storedViewsAllow(llvm::function_ref<bool(const Layout&)> ok) {
  for (Value inner : llvm::cast<nc::YieldOp>(kernel.getBody().front().getTerminator()).getValues()) {
    Value root = inner;
    for (auto it = sameTileAs.find(root); it != sameTileAs.end(); it = sameTileAs.find(root)) root = it->second;
    for (Value v : {inner, root})
      if (auto it = storedThrough.find(v); it != storedThrough.end()) {
        Layout store;
        if (failed(layoutOfView(it->second, store)) || !ok(store)) return false;
      }
  }
  return true;
}

// Whether every op that keeps the kernel from being elementwise is a cat
// along the last dim of slices of rows the kernel loads whole (rotate_half
// of an input): packed, each cat copies its pieces from those values' tiles
// once per packed row (the columns are then [g, C], as a matmul epilogue's
// split columns are, and the cat's lowering takes them the same way).
bool KernelLowering::catsOfLoadedRowsOnly() {
  if (space.reduces || space.matmul || space.elementwise || space.batchRows) return false;
  bool any = false;
  for (Operation& op : kernel.getBody().front().without_terminator()) {
    if (llvm::isa<aten::EmbeddingOp>(op)) return false;
    auto cat = llvm::dyn_cast<aten::CatOp>(op);
    if (!cat) continue;
    auto rt = llvm::cast<RankedTensorType>(cat.getType());
    int64_t rank = rt.getRank();
    if (rank == 0 || (cat.getDim() != rank - 1 && cat.getDim() != -1) || rt.getShape().back() != space.cols ||
        rt.getNumElements() != space.rows * space.cols)
      return false;
    for (Value piece : cat.getTensors())
      if (!sliceOfFullRows(piece, llvm::cast<RankedTensorType>(piece.getType()).getShape().back(),
                           rt.getElementType(), space.cols)
               .first)
        return false;
    any = true;
  }
  return any;
}

// Merging, before packing: an elementwise kernel computes the same elements
// over any dims, so runs of adjacent dims that every value read or written
// steps through as one dim (the outer stride is the inner one times the
// inner extent: contiguous runs, and broadcasts along all of them) become
// one. A row shorter than kShortRowBytes takes the leading dims before it
// that chain onto it, while kMinShortRowTiles row tiles remain and the row
// fits a column tile (x + b of [32768, 2, 2] and [2, 2]: rows of 4); then
// the leading dims before the innermost one chain onto it ([32768, 2, 2]
// alone: 65536 rows of 2), so that packing finds rows to put together
// (those kernels had packed 2 rows of 2 to a partition: 146.3 us for
// x + 1, against 9.5 us for the same bytes as [65536, 2]). Not where the
// innermost one packs to full runs alone: its divisors may give fewer,
// longer runs (x * 2 of [4, 64, 300, 1, 16], packed 50 rows a partition in
// 12 row tiles: 23.4 us; over 76800 rows, 32 a partition in 19: 28.4).
// True if it merged (the layouts are then stale).
bool KernelLowering::mergeChainedDims(ArrayRef<Value> hbmValues) {
  if (!space.elementwise || space.split > 1 || space.pack > 1 || !space.unmerged.empty() || permutedInput ||
      prologueOperand)
    return false;
  SmallVector<int64_t> dims(space.lead);
  dims.append(space.trail);
  const size_t numLead = space.lead.size();
  SmallVector<SmallVector<int64_t>> strides;
  auto collect = [&](const Layout& l) {
    if (l.kind == Kind::Imm) return true;
    SmallVector<int64_t> s(l.rowStrides);
    s.append(l.colStrides);
    strides.push_back(std::move(s));
    return strides.back().size() == dims.size();
  };
  for (Value v : hbmValues)
    if (!collect(layouts.lookup(v))) return false;
  // (A result written without a view is contiguous: every dim chains.)
  if (!storedViewsAllow(collect)) return false;
  auto chained = [&](size_t outer, size_t inner) {
    return llvm::all_of(strides, [&](ArrayRef<int64_t> s) { return s[outer] == s[inner] * dims[inner]; });
  };
  SmallVector<size_t> lead, trail;  // the dims longer than 1
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] > 1) (i < numLead ? lead : trail).push_back(i);
  if (trail.size() != 1 || lead.empty()) return false;
  size_t trailBegin = numLead, inner = trail.front();
  int64_t rows = space.rows, cols = space.cols;
  const int64_t narrowest = narrowestElementBytes(hbmValues);
  while (!lead.empty() && cols * narrowest < kShortRowBytes && chained(lead.back(), inner) &&
         rows / dims[lead.back()] >= nc::kNumPartitions * minShortRowTiles() && cols * dims[lead.back()] <= maxFree) {
    inner = trailBegin = lead.pop_back_val();
    rows /= dims[inner];
    cols *= dims[inner];
  }
  size_t first = trailBegin, at = lead.size();
  if (!lead.empty()) {
    --at;
    const int64_t L = dims[lead[at]], g = packFactor(L, rows, cols, maxFree, narrowest, kPackedRunBytes, minShortRowTiles());
    if (g * cols * narrowest < kPackedRunBytes)
      while (at > 0 && chained(lead[at - 1], lead[at])) --at;
    first = lead[at];
  }
  if (trailBegin == numLead && at + 1 >= lead.size()) return false;  // nothing merged
  space.unmerged = dims;
  space.unmergedLead = numLead;
  space.mergedGroups.clear();
  space.lead.assign(dims.begin(), dims.begin() + int64_t(first));
  space.mergedGroups.assign(first, 1);
  if (first < trailBegin) {
    space.lead.push_back(product(ArrayRef<int64_t>(dims).slice(first, trailBegin - first)));
    space.mergedGroups.push_back(int64_t(trailBegin - first));
  }
  space.mergedGroups.push_back(int64_t(dims.size() - trailBegin));
  space.trail = {cols};
  space.rows = rows;
  space.cols = cols;
  return true;
}

// The (stride, count) pairs of a value laid out as `l` over the space's
// dims `dims[first..]` as columns, simplified (simplifyFreePattern).
static SmallVector<int64_t> columnPattern(const Layout& l, ArrayRef<int64_t> dims, size_t first) {
  SmallVector<int64_t> strides(l.rowStrides), ap;
  strides.append(l.colStrides);
  for (size_t d = first; d < dims.size(); ++d) ap.append({strides[d], dims[d]});
  return simplifyFreePattern(ap);
}

BroadcastColumns broadcastColumns(ArrayRef<int64_t> pattern) {
  BroadcastColumns b;
  int64_t varying = 0;
  for (size_t i = 0; i + 1 < pattern.size(); i += 2) {
    const int64_t stride = pattern[i], count = pattern[i + 1];
    if (stride != 0) {
      ++varying;
      b.stride = stride;
      b.count = count;
    } else {
      (varying ? b.inner : b.outer) *= count;
    }
  }
  b.valid = varying == 1 && (b.inner > 1 || b.outer > 1);
  return b;
}

// An elementwise kernel whose short rows neither merge with the dims
// before them (some value steps through those differently: a scale over
// the middle dim of [32768, 2, 2]) nor pack to full runs along the
// innermost leading dim (it is too short: 2) would run row tiles of a few
// columns each, three transfers of a few hundred bytes per 128 rows (151.3
// us for that scale). The innermost leading dims move onto the columns
// instead, as dims of their own, while the row stays short, fits a column
// tile and kMinShortRowTiles row tiles remain: the rows then step along a
// longer dim, which interleaving (interleaveShortRows) groups several to a
// partition. Only where every value then reads a row as one run, or as
// one strided dim broadcast over the others (the scale: loaded compact and
// widened on chip, loadBroadcastColumns). Layouts keep their strides,
// split at the new place. True if it widened (the layouts are then stale).
bool KernelLowering::widenShortRows(ArrayRef<Value> hbmValues) {
  if (!space.elementwise || space.split > 1 || space.pack > 1 || !space.unmerged.empty() || permutedInput ||
      prologueOperand)
    return false;
  const int64_t narrowest = narrowestElementBytes(hbmValues);
  SmallVector<int64_t> dims(space.lead);
  dims.append(space.trail);
  auto readable = [&](const Layout& l, size_t first) {
    if (l.kind == Kind::Imm) return true;
    SmallVector<int64_t> columns = columnPattern(l, dims, first);
    if (columns.size() <= 2) return true;
    BroadcastColumns b = broadcastColumns(columns);
    return b.valid && b.inner <= kMaxWidenedCopies;
  };
  bool widened = false;
  for (int64_t k = shortRowDim(); k >= 0 && space.cols * narrowest < kShortRowBytes; k = shortRowDim()) {
    const int64_t L = space.lead[size_t(k)];
    if (space.cols * L > maxFree || space.rows / L < nc::kNumPartitions * minShortRowTiles() ||
        packFactor(L, space.rows, space.cols, maxFree, narrowest, kPackedRunBytes, minShortRowTiles()) * space.cols *
                narrowest >=
            kPackedRunBytes)
      break;
    if (!llvm::all_of(hbmValues, [&](Value v) { return readable(layouts.lookup(v), size_t(k)); }) ||
        !storedViewsAllow([&](const Layout& l) { return readable(l, size_t(k)); }))
      break;
    space.trail.insert(space.trail.begin(), space.lead.begin() + k, space.lead.end());
    space.lead.resize(size_t(k));
    space.rows /= L;
    space.cols *= L;
    widened = true;
  }
  space.widened = widened;
  return widened;
}

// A value of a widened kernel that varies along one dim of its columns and
// is broadcast over the others ([1, 2, 1] beside [32768, 2, 2]) would cost
// a DMA descriptor per element (or per repeat); its varying elements load
// as one compact run per row instead, and copies widen them on chip: one
// stepped copy per repeat inside the varying dim, then copies doubling the
// filled block over the repeats outside it. False where the value is not
// so (or the tile is a column range of a wider one).
bool KernelLowering::loadBroadcastColumns(Value v, Value tile, const Layout& l, int64_t p, int64_t f) {
  if (!space.widened || l.kind != Kind::Full || f != space.cols || c0 != 0) return false;
  BroadcastColumns bc = broadcastColumns(rowPattern(l));
  if (!bc.valid) return false;
  Type elem = llvm::cast<MemRefType>(tile.getType()).getElementType();
  const int64_t n = bc.count;
  Value compact = bc.inner == 1 ? tileColumns(*b, loc, tile, 0, n) : alloc(p, n, elem);
  emitDma(/*load=*/true, hbmOf[v], compact, l, r0, p, 0, n, 1, std::make_pair(bc.stride, int64_t(0)));
  if (bc.inner > 1) spreadColumns(tile, compact, n, bc.inner);
  repeatColumns(tile, n * bc.inner, f);
  return true;
}

// Packing: L (shortRowDim) becomes [L / g, g] and g moves onto the
// columns. Every value keeps its strides (split like L's), so broadcasts
// still work; it needs every HBM value one run per row (a transposed one
// would turn into element-wise runs). A value constant along the row but
// varying with L (a per-row scalar) is no longer one per partition: it is
// widened across its packed rows (loadWidenedRows), only where C <= g.
// Called with the unpacked layouts; true if it packed (the layouts are
// then stale).
bool KernelLowering::packShortRows(ArrayRef<Value> hbmValues) {
  const int64_t k = shortRowDim();
  if (!(space.elementwise || catsOfLoadedRowsOnly()) || space.split > 1 || space.pack > 1 || permutedInput ||
      prologueOperand || k < 0)
    return false;
  if (llvm::count_if(space.trail, [](int64_t d) { return d != 1; }) != 1) return false;
  // (A value constant along the row but varying with L, a per-row scale,
  // is then constant along each packed row of an elementwise kernel:
  // loadWidenedRows.)
  // A row read along a step (a strided slice: pooling windows) is loaded
  // as its span (emitDma's stepped loads), g spans a tile, one copy each:
  // g is then at most what that staging takes.
  int64_t maxRows = std::numeric_limits<int64_t>::max();
  auto packable = [&](const Layout& l) {
    if (l.kind == Kind::Row) return space.elementwise || l.rowStrides[size_t(k)] == 0;
    if (rowIsOneRun(l)) return true;
    SmallVector<int64_t> ap = rowPattern(l);
    if (!space.elementwise || ap.size() != 2 || ap[0] < 2 || ap[0] > kMaxStagedStep || ap[1] < kMinStagedSteps)
      return false;
    maxRows = std::min(maxRows, std::min(kMaxStagedOuter, kMaxStagingBytes / (((ap[1] - 1) * ap[0] + 1) * 4)));
    return true;
  };
  for (Value v : hbmValues)
    if (!packable(layouts.lookup(v))) return false;
  for (Value inner : llvm::cast<nc::YieldOp>(kernel.getBody().front().getTerminator()).getValues())
    if (llvm::cast<RankedTensorType>(inner.getType()).getNumElements() != space.rows * space.cols) return false;
  if (!storedViewsAllow([&](const Layout& l) { return l.kind == Kind::Full && rowIsOneRun(l); })) return false;
  const int64_t g = shortRowFactor(k, narrowestElementBytes(hbmValues), kPackedRunBytes, maxRows);
  if (g == 1) return false;
  // Each such value takes C copies a tile (loadWidenedRows); where C > g,
  // interleaving (g instructions a tile for each op) costs less: a per-row
  // scale over [4096, 2, 64] bf16, packed 8 rows a partition, 14.5 -> 26.9 us.
  if (space.cols > g && llvm::any_of(hbmValues, [&](Value v) {
        const Layout& l = layouts.lookup(v);
        return l.kind == Kind::Row && l.rowStrides[size_t(k)] != 0;
      }))
    return false;
  const int64_t columns = space.cols;
  space.unpacked.assign(space.lead.begin(), space.lead.end());
  space.unpacked.append(space.trail.begin(), space.trail.end());
  space.unpackedLead = space.lead.size();
  space.packDim = size_t(k);
  space.pack = g;
  space.lead.resize(size_t(k) + 1);  // (the dims of 1 after L go)
  space.lead.back() /= g;
  space.trail = {g, columns};
  space.rows /= g;
  space.cols *= g;
  return true;
}

// Interleaving, for kernels that reduce their short rows or read per-row
// values: the iteration space and the ops' lowering stay as they are, but
// row tile j of a group of 128 x g rows holds rows start + j + i * g on
// partition i. Each value read in rows (varying with L) is loaded once per
// group into a [p x g x width] tile, g rows per partition in one run, and
// each row tile reads its column range; each value written in rows goes
// into its group's tile (the op computing it writes there directly) and is
// stored once the group's last row tile is done. A value not one run per
// row (a transposed input) keeps the kernel from interleaving; one
// broadcast along L is loaded per row tile as before. Chunked, spread,
// matmul and gather kernels never interleave.
bool KernelLowering::interleaveShortRows(ArrayRef<Value> hbmValues) {
  const int64_t k = shortRowDim();
  if (space.pack > 1 || space.split > 1 || space.matmul || space.batchRows || space.rowBlock > 0 || permutedInput ||
      prologueOperand || k < 0 || space.cols > maxFree)
    return false;
  Block& body = kernel.getBody().front();
  if (llvm::any_of(body.without_terminator(),
                   [](Operation& op) { return llvm::isa<aten::EmbeddingOp, aten::CatOp>(op); }))
    return false;
  SmallVector<Value> grouped;
  for (Value v : hbmValues) {
    const Layout l = layouts.lookup(v);
    if (l.kind == Kind::Imm || l.rowStrides[size_t(k)] == 0) continue;
    if (!rowIsOneRun(l)) return false;
    grouped.push_back(v);
  }
  if (!storedViewsAllow([&](const Layout& l) { return rowIsOneRun(l); })) return false;
  const int64_t g = shortRowFactor(k, narrowestElementBytes(hbmValues), kPackedRunBytes);
  if (g == 1) return false;
  space.interleave = g;
  space.packDim = size_t(k);
  groupedInputs.clear();
  groupedInputs.insert(grouped.begin(), grouped.end());
  return true;
}

// Broadcast strides of an HBM input against the iteration space.
// An HBM value (a kernel input, or a chain of views of one) seen from the
// iteration space: its strides broadcast against the space's dims.
// A value that broadcasts against its readers' full-size shape but not
// against the space's (a group norm's space [N, G, C / G, H, W], read
// beside an operand [C, H, 1] of an op over [N, C, H, W]) is read as its
// expansion to that shape, which the space's shape then regroups: where
// every reader (other than views) has a result of that one shape.
LogicalResult KernelLowering::layoutOfInput(Value v, Layout& out) {
  auto it = viewOf.find(v);
  aten::StridedView view = it != viewOf.end()
                               ? it->second
                               : aten::contiguousView(llvm::cast<RankedTensorType>(v.getType()).getShape());
  if (product(view.shape) != space.rows * space.cols) {
    {  // (Most values broadcast against the space itself.)
      ScopedDiagnosticHandler quiet(kernel->getContext(), [](Diagnostic&) { return success(); });
      if (succeeded(layoutOfView(view, out))) return success();
    }
    std::optional<SmallVector<int64_t>> readAs;
    bool one = true;
    for (Operation* user : v.getUsers()) {
      if (aten::isViewOp(user)) continue;
      auto t = user->getNumResults() == 1 ? llvm::dyn_cast<RankedTensorType>(user->getResult(0).getType())
                                          : RankedTensorType();
      if (!t || t.getNumElements() != space.rows * space.cols ||
          (readAs && ArrayRef<int64_t>(*readAs) != t.getShape()))
        one = false;
      else
        readAs = SmallVector<int64_t>(t.getShape().begin(), t.getShape().end());
    }
    if (readAs && one && readAs->size() >= view.shape.size()) {
      const size_t lead = readAs->size() - view.shape.size();
      aten::StridedView expanded{*readAs, SmallVector<int64_t>(readAs->size(), 0), view.offset};
      bool broadcasts = true;
      for (size_t i = 0; i < view.shape.size() && broadcasts; ++i) {
        if (view.shape[i] == (*readAs)[lead + i]) expanded.strides[lead + i] = view.strides[i];
        else broadcasts = view.shape[i] == 1;
      }
      const SmallVector<int64_t> full = layoutShape();
      if (broadcasts && ArrayRef<int64_t>(*readAs) != ArrayRef<int64_t>(full) &&
          aten::reshapeStrides(expanded.shape, expanded.strides, full))
        view = expanded;
    }
  }
  return layoutOfView(view, out);
}

LogicalResult KernelLowering::layoutOfView(const aten::StridedView& given, Layout& out) {
  // A full-size value under another leading shape covers the same rows in
  // row-major order: read it in the space's own shape when its strides allow
  // (always for a contiguous value; also for a permuted one whose merged or
  // split dims stay contiguous among themselves).
  aten::StridedView view = given;
  if (product(given.shape) == space.rows * space.cols && !given.shape.empty()) {
    const SmallVector<int64_t> full = layoutShape();
    if (ArrayRef<int64_t>(full) != ArrayRef<int64_t>(given.shape))
      if (auto strides = aten::reshapeStrides(given.shape, given.strides, full)) {
        view.shape = full;
        view.strides = *strides;
      }
  }
  // Split columns [heads, d]: a value whose last dim is all the columns (a
  // matmul's bias over [heads * d]) is read as [heads, d].
  if (space.matmul && space.trail.size() == 2 && space.split == 1 && !view.shape.empty() &&
      view.shape.back() == space.cols && space.cols > 1) {
    int64_t s = view.strides.back();
    view.shape.back() = space.trail[0];
    view.strides.back() = s * space.trail[1];
    view.shape.push_back(space.trail[1]);
    view.strides.push_back(s);
  }
  ArrayRef<int64_t> shape = view.shape;
  ArrayRef<int64_t> strides = view.strides;
  out.offset = view.offset;
  SmallVector<int64_t> dims = layoutShape();
  ArrayRef<int64_t> leadDims = space.lead;
  if (!space.unmerged.empty())  // broadcast against the unmerged shape
    leadDims = ArrayRef<int64_t>(space.unmerged).take_front(space.unmergedLead);
  else if (space.pack > 1)  // broadcast against the unpacked shape
    leadDims = ArrayRef<int64_t>(space.unpacked).take_front(space.unpackedLead);
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
  if (!align(dims) && (space.split > 1 || !align(leadDims)))
    return kernel.emitError("input of shape ") << aten::shapeToString(shape)
           << " does not broadcast to the iteration space " << aten::shapeToString(dims);
  if (!space.unmerged.empty()) {
    // Each merged dim steps as its innermost dim longer than 1 does
    // (mergeChainedDims checked that the others chain onto it).
    SmallVector<int64_t> merged;
    size_t d = 0;
    for (int64_t count : space.mergedGroups) {
      int64_t stride = 0;
      for (int64_t i = 0; i < count; ++i, ++d)
        if (space.unmerged[d] > 1) stride = all[d];
      merged.push_back(stride);
    }
    all = std::move(merged);
  }
  if (space.pack > 1) {
    // Split L's stride s over [L / pack, pack] (s * pack, s); the columns
    // [pack, C] take s and the stride of C.
    size_t last = space.packDim;
    int64_t s = all[last], c = 0;
    for (size_t j = space.unpackedLead; j < all.size(); ++j)
      if (space.unpacked[j] != 1) c = all[j];
    all.resize(last);
    all.append({s * space.pack, s, c});
  } else if (all.size() != space.lead.size() + space.trail.size()) {
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
  for (int64_t i = 0; i < p; ++i) {
    int64_t rem = diagonalRows > 0 ? first + i / diagonalRows * diagonalRowStride + i % diagonalRows
                                     : first + i * rowStep,
            off = 0;
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
                             int64_t p, int64_t col0, int64_t f, int64_t packedRows,
                             std::optional<std::pair<int64_t, int64_t>> stepped) {
  SmallVector<int64_t> offs = rowOffsets(l, first, p);
  if (!load && storeTransposed(hbm, tile, l, offs, col0, f)) return;
  if (!load && l.kind == Kind::Row && space.split > 1 && storeSpreadRows(hbm, tile, l, offs, p)) return;
  SmallVector<int64_t> freeAp;  // (stride, count) pairs
  int64_t colBase = 0;
  if (stepped) {
    freeAp = {stepped->first, f};
    colBase = stepped->second;
  } else if (l.kind == Kind::Row) {
    freeAp = {1, 1};
  } else if (space.trail.size() == 2 && f != space.cols) {
    // Whole innermost rows of split columns (run() keeps column tiles to
    // multiples of the innermost dim).
    int64_t inner = space.trail[1];
    freeAp = {l.colStrides[0], f / inner, l.colStrides[1], inner};
    colBase = col0 / inner * l.colStrides[0];
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
  if (packedRows > 1) freeAp.insert(freeAp.begin(), {l.rowStrides[space.packDim], packedRows});
  auto elem = llvm::cast<MemRefType>(tile.getType()).getElementType();
  int64_t bytesPerRow = (l.kind == Kind::Row ? 1 : f) * packedRows * (elem.getIntOrFloatBitWidth() / 8);
  // Each transfer pays the device model's fixed cost (2 us): 512 KiB pieces
  // spend 9% of their time on it; smaller pieces start compute sooner but
  // cost more queue time (RMSNorm 8192 x 4096 bf16: 81% MBU with 256 KiB
  // pieces, 86% with 512 KiB).
  constexpr int64_t kSplitBytes = 512 * 1024;
  // A kernel with few row tiles (all its transfers of this value together
  // under 64 pieces of that size) splits finer, down to 64 KiB, so that its
  // first tiles arrive sooner and all 16 queues take part (GPT-2-medium's
  // layer norms, 8 row tiles of 1024: the block 38.2% -> 40.7% MFU; 32 or
  // 128 pieces instead of 64 change nothing measurable).
  // The stores of the last row tile's last columns are the kernel's drain,
  // which nothing overlaps: they take pieces of 64 KiB or more over as many
  // as all 16 queues (a bf16 softmax over rows of 8192: 2 MiB row tiles in 4
  // pieces of 512 KiB took 22.5 us each, in 16 of 128 KiB 7.1 us). Earlier
  // column chunks of that row tile are not the drain (a softmax over one
  // row tile of 50257 columns, stored in chunks of 4096 that way: 197.5 ->
  // 212.7 us, from the pieces' fixed costs). Splitting the first row
  // tile's loads the same way helps a kernel with two row tiles in flight
  // but slows one that keeps many in flight (RMSNorm over 8192 rows of
  // 4096: 381.8 -> 390.3 us), whose loads are not on its critical path.
  // The rule above counts a matmul kernel's output by its column tile (a
  // PSUM bank wide, 128 KiB of bf16 for a row tile) as if it were the whole
  // value, and splits its stores in two. Where each output tile is a single
  // matmul (K <= 128), those stores bound the kernel and count whole rows
  // (mm 4096 x 128 x 4096: 173.1 -> 144.0 us; with K = 256 the TensorEngine
  // keeps pace and the split was no slower). A tile stored several times
  // (an expand's copies, timesStored) counts each store.
  const bool storeBound = !load && space.matmul && largestMatmulK > 0 && largestMatmulK <= nc::kNumPartitions &&
                          l.kind != Kind::Row;
  const int64_t valueRowBytes =
      storeBound ? space.cols * (elem.getIntOrFloatBitWidth() / 8) : bytesPerRow / packedRows;
  const bool pipelineEnd = !load && first + (p - 1) * rowStep + packedRows >= space.rows && col0 + f >= space.cols;
  const int64_t splitBytes =
      pipelineEnd ? 64 * 1024
                  : std::clamp<int64_t>(space.rows * timesStored * valueRowBytes / 64, 64 * 1024, kSplitBytes);
  const int64_t maxPieces = pipelineEnd ? int64_t(neff::Trn1().dma_queues) : 8;
  const SmallVector<int64_t> freePattern = simplifyFreePattern(freeAp);
  // A load whose innermost dim steps through HBM (a strided slice: pooling
  // windows, x[..., ::2]) would move one element per DMA run, 20 ns each.
  // It loads the contiguous span of each run of steps instead (at most
  // kMaxStagedStep times the bytes, one run per outer index) into a staging
  // tile, and one engine instruction per outer index reads every step-th
  // element of it into the tile (a stepped tile_columns view).
  const int64_t step = freePattern[freePattern.size() - 2], steps = freePattern.back();
  int64_t outer = 1;
  for (size_t i = 1; i + 2 < freePattern.size(); i += 2) outer *= freePattern[i];
  const int64_t span = (steps - 1) * step + 1, elemBytes = std::max<int64_t>(1, elem.getIntOrFloatBitWidth() / 8);
  Value staging;
  SmallVector<int64_t> stagedPattern;
  // Values read at other first elements of the same strides (the 3 x 3
  // windows of a pooling: three along each row) share one staging of the
  // span they all need, where the spans overlap: `shift` is this value's
  // place in it.
  int64_t stagedSpan = span, shift = 0, firstOffset = l.offset;
  // (The copies cover the tile's partitions: only for a load that fills them all.)
  if (load && step >= 2 && step <= kMaxStagedStep && steps >= kMinStagedSteps && outer <= kMaxStagedOuter &&
      outer * span * elemBytes <= kMaxStagingBytes && llvm::cast<MemRefType>(tile.getType()).getDimSize(0) == p) {
    std::optional<StagedKey> sharedKey;
    if (auto it = l.kind == Kind::Full && packedRows == 1 && llvm::isa<BlockArgument>(hbm)
                      ? stagedSiblings.find(siblingKey(hbm, l))
                      : stagedSiblings.end();
        it != stagedSiblings.end() && it->second.size() > 1) {
      // Siblings in clusters of first elements less than a span apart (the
      // three windows along a row); over several spans a partition (packed
      // rows), as far apart as keeps the union of a cluster's spans within
      // the spans' stride (a 2 x 2 pooling's windows in both input rows,
      // which then load as one run a partition).
      const int64_t outerStride = outer > 1 ? freePattern[freePattern.size() - 4] : 0;
      auto [lo, hi] = siblingCluster(it->second, l.offset, std::max(span, outerStride - span + 1));
      // The shared span reads this value's span from the last sibling's
      // first element; a narrower sibling at a tensor's end would have it
      // read past the end.
      int64_t lastRead = hi + *llvm::max_element(offs) + colBase + span - 1;
      for (size_t i = 0; i + 2 < freePattern.size(); i += 2)
        lastRead += std::max<int64_t>(freePattern[i], 0) * (freePattern[i + 1] - 1);
      if (hi > lo && outer * (span + hi - lo) * elemBytes <= kMaxStagingBytes &&
          lastRead < llvm::cast<ShapedType>(hbm.getType()).getNumElements()) {
        stagedSpan = span + (hi - lo);
        shift = l.offset - lo;
        firstOffset = lo;
        // What the staging DMAs read, exactly (the tensor, each partition's
        // first element, the pattern: the outer dims and the span), into a
        // tile of this dtype, in this iteration of the memory plan.
        std::vector<int64_t> starts;
        for (int64_t o : offs) starts.push_back(lo + o + colBase);
        std::vector<int64_t> pattern(freePattern.begin(), freePattern.end() - 2);
        pattern.push_back(stagedSpan);
        sharedKey = StagedKey{hbm.getAsOpaquePointer(), elem.getAsOpaquePointer(), iteration, std::move(starts),
                              std::move(pattern)};
        if (auto hit = stagedTiles.find(*sharedKey); hit != stagedTiles.end()) {
          compactStaged(tile, hit->second, outer, stagedSpan, shift, steps, step);
          return;
        }
      }
    }
    staging = alloc(llvm::cast<MemRefType>(tile.getType()).getDimSize(0), outer * stagedSpan, elem);
    stagedPattern.assign(freePattern.begin(), freePattern.end() - 2);
    stagedPattern.append({1, stagedSpan});
    if (sharedKey) stagedTiles[*sharedKey] = staging;
  }
  // A load of short rows a small gap apart (a view that cuts a few columns
  // off each row: a convolution's wide positions cut to its output width)
  // moves a DMA run per row. Where the device model prices the runs saved
  // above the engine copies it adds, each span of `gapRows` rows is loaded
  // as one run, gaps included (at most as many bytes again), and the rows
  // are copied into the tile: a copy per row, or per column where the rows
  // are longer than they are many.
  int64_t gapRows = 0, gapStride = 0, gapOuter = 0;
  if (load && !staging && step == 1 && freePattern.size() >= 4 && l.kind == Kind::Full && packedRows == 1 &&
      llvm::cast<MemRefType>(tile.getType()).getDimSize(0) == p) {
    const int64_t n = steps, s = freePattern[freePattern.size() - 4], m = freePattern[freePattern.size() - 3];
    const int64_t rest = outer / std::max<int64_t>(m, 1), rowSpan = (m - 1) * s + n;
    if (s > n && s <= 2 * n && m >= 2 && n * elemBytes < kShortRowBytes &&
        rest * rowSpan * elemBytes <= kMaxStagingBytes) {
      const neff::DeviceParams& d = neff::Trn1();
      const double bytesPerNs = neff::DmaQueueBytesPerNs(d);
      auto queueNs = [&](int64_t runs, int64_t bytes) { return std::max(bytes / bytesPerNs, runs * d.dma_run_ns); };
      const double savedNs = (queueNs(p * rest * m, p * rest * m * n * elemBytes) -
                              queueNs(p * rest, p * rest * rowSpan * elemBytes)) / d.dma_queues;
      const double copyNs = double(rest * std::min(m, n)) * (d.sbuf_access_cycles + std::max(m, n)) / d.vector_ghz;
      if (savedNs > copyNs) {
        gapRows = m;
        gapStride = s;
        gapOuter = rest;
        staging = alloc(p, rest * rowSpan, elem);
        stagedPattern.assign(freePattern.begin(), freePattern.end() - 4);
        stagedPattern.append({1, rowSpan});
        stagedSpan = rowSpan;
      }
    }
  }
  // The partitions in runs whose HBM offsets advance by a constant stride.
  struct Run {
    int64_t start, count, stride;
  };
  SmallVector<Run> runs;
  auto gap = [&](int64_t i) { return offs[size_t(i + 1)] - offs[size_t(i)]; };
  for (int64_t start = 0; start < p;) {
    int64_t end = start + 1;
    int64_t stride = end < p ? gap(start) : 0;
    while (end < p && gap(end - 1) == stride) ++end;
    // The last row of a plane and the first of the next are no run when the
    // next plane's rows continue one (a row tile starting a row before a
    // plane's end).
    if (end == start + 2 && end + 1 < p && gap(start + 1) == gap(start + 2)) end = start + 1, stride = 0;
    runs.push_back({start, end - start, stride});
    start = end;
  }
  const ArrayRef<int64_t> free = staging ? stagedPattern : freePattern;
  // Pieces for `rows` partitions: by their bytes, and where the runs are
  // under 128 bytes (their descriptors take four times their bytes' time or
  // more) by their DMA runs too, a piece's runs taking about the fixed cost
  // of a transfer, as far as the queues are idle otherwise: in the drain,
  // and where the value's tiles are fewer than the queues (a small permute
  // copy's three stores of 512 runs of 34 bytes: 10 us each on three
  // queues, where their pieces run side by side). Where more tiles are in
  // flight, their transfers keep the queues busy and each piece would add
  // its fixed cost (runs of 256 bytes, a LLaMA projection's heads, cut so:
  // a layer at seq 512 7 us slower).
  int64_t runsPerRow = 1;
  for (size_t i = 0; i + 1 < free.size(); i += 2)
    if (i + 2 < free.size() || free[i] != 1) runsPerRow *= free[i + 1];
  const int64_t columnTiles = l.kind == Kind::Row ? 1 : (space.cols + f - 1) / f;
  const int64_t queues = int64_t(neff::Trn1().dma_queues),
                valueTiles = (space.rows + nc::kNumPartitions * packedRows - 1) / (nc::kNumPartitions * packedRows) *
                             columnTiles * spaceRepeats;
  const int64_t maxRunPieces = pipelineEnd ? maxPieces : std::min(maxPieces, queues / std::max<int64_t>(valueTiles, 1));
  const bool shortRuns = bytesPerRow < runsPerRow * (kShortRowBytes / 4);
  // In a kernel that moves few bytes (movesFewBytes), each value tile's
  // transfers go in as many pieces of partitions as bring each piece's data
  // time (bytes or descriptors) under a quarter of the fixed cost, over the
  // queues its tiles, their runs of partitions and the kernel's other
  // values leave (x + 1 over [300, 7, 3] bf16: 9 row tiles of 128 runs of
  // 12 bytes, 9.4 us; one tile of 32-partition pieces, 5.4 us; a permute
  // copy storing each tile as 7 runs of partitions already fills them).
  const int64_t kernelValues = int64_t(kernel->getNumOperands() + kernel->getNumResults());
  const int64_t idlePieces =
      fewBytes ? queues / std::max<int64_t>(valueTiles * kernelValues * int64_t(runs.size()), 1) : 1;
  auto piecesOf = [&](int64_t rows) {
    const neff::DeviceParams& d = neff::Trn1();
    int64_t pieces = std::clamp<int64_t>(rows * bytesPerRow / splitBytes, 1, maxPieces);
    if (shortRuns && maxRunPieces > 1) {
      const double runPieces = double(rows * runsPerRow) * d.dma_run_ns / d.dma_fixed_ns;
      pieces = std::max(pieces, std::clamp<int64_t>(int64_t(runPieces), 1, maxRunPieces));
    }
    if (idlePieces > 1) {
      const double dataNs = std::max(double(rows * bytesPerRow) / neff::DmaQueueBytesPerNs(d),
                                     double(rows * runsPerRow) * d.dma_run_ns);
      pieces = std::max(pieces, std::clamp<int64_t>(int64_t(4 * dataNs / d.dma_fixed_ns), 1, idlePieces));
    }
    return std::min(pieces, rows);
  };
  auto emit = [&](int64_t partStart, ArrayRef<int64_t> partitionPairs) {
    SmallVector<int64_t> ap(partitionPairs);
    ap.append(free.begin(), free.end());
    auto offset = b->getI64IntegerAttr((staging ? firstOffset : l.offset) + offs[size_t(partStart)] + colBase);
    auto apAttr = b->getDenseI64ArrayAttr(ap);
    auto startAttr = b->getI64IntegerAttr(partStart);
    Operation* dma;
    if (load) dma = b->create<nc::DmaLoadOp>(loc, hbm, staging ? staging : tile, startAttr, offset, apAttr);
    else dma = b->create<nc::DmaStoreOp>(loc, tile, hbm, startAttr, offset, apAttr);
    if (partitionPairs.size() == 4) dma->setAttr("partition_dims", b->getI64IntegerAttr(2));
    if (load) {
      int64_t partitions = 1;
      for (size_t i = 1; i < partitionPairs.size(); i += 2) partitions *= partitionPairs[i];
      const neff::DeviceParams& d = neff::Trn1();
      loadQueueNs += d.dma_fixed_ns + std::max(double(partitions * bytesPerRow) / neff::DmaQueueBytesPerNs(d),
                                               double(partitions * runsPerRow) * d.dma_run_ns);
    }
    setEngineAndSource(dma, *b, "dma", -1);
    ++numInst;
    ++numDma;
  };
  // Equal runs whose first offsets advance by a constant stride too (the
  // rows of several planes of a padded or sliced tensor, a plane not the
  // rows' stride after the last) move in one transfer with two partition
  // dims: each transfer pays the fixed cost once, where a run per plane
  // paid it per plane (a 3 x 3 average pooling over [4, 64, 56, 56] loaded
  // four rows per transfer: 539.7 -> 308.4 us). Only in kernels that issue
  // more such transfers than the queues take at once: in a small one, the
  // runs' transfers run side by side on several queues and one transfer of
  // all their descriptors would finish later (a tiny encoder layer's head
  // split: 7.0 -> 9.2 us).
  constexpr size_t kMaxFreePairs = 3;  // beside two partition dims, of the DMA's five
  const int64_t transfers =
      int64_t(runs.size()) * ((space.rows + nc::kNumPartitions - 1) / nc::kNumPartitions) * columnTiles;
  const bool groupRuns = transfers > 2 * int64_t(neff::Trn1().dma_queues);
  for (size_t r = 0; r < runs.size();) {
    const Run run = runs[r];
    // A per-row value of a spread kernel is held by each partition of its
    // row: one of them stores it.
    const bool once = !load && run.stride == 0 && space.split > 1 && l.kind == Kind::Row;
    size_t group = 1;
    if (groupRuns && !once && run.count > 1 && free.size() / 2 <= kMaxFreePairs) {
      const int64_t planeStride = r + 1 < runs.size() ? offs[size_t(runs[r + 1].start)] - offs[size_t(run.start)] : 0;
      while (r + group < runs.size() && runs[r + group].count == run.count && runs[r + group].stride == run.stride &&
             offs[size_t(runs[r + group].start)] - offs[size_t(runs[r + group - 1].start)] == planeStride)
        ++group;
      if (group > 1) {
        int64_t pieces = piecesOf(int64_t(group) * run.count);
        int64_t per = (int64_t(group) + pieces - 1) / pieces;
        for (int64_t g = 0; g < int64_t(group); g += per) {
          int64_t planes = std::min(per, int64_t(group) - g);
          int64_t first = run.start + g * run.count;
          if (planes == 1) emit(first, {run.stride, run.count});
          else emit(first, {planeStride, planes, run.stride, run.count});
        }
        r += group;
        continue;
      }
    }
    const int64_t count = once ? 1 : run.count;
    int64_t pieces = piecesOf(count);
    int64_t per = (count + pieces - 1) / pieces;
    for (int64_t s = run.start; s < run.start + count; s += per) emit(s, {run.stride, std::min(per, run.start + count - s)});
    ++r;
  }
  if (staging && gapRows) {
    for (int64_t o = 0; o < gapOuter; ++o)
      placeInRows(tile, staging, std::nullopt, gapRows, steps, o * gapRows * steps, steps, nullptr, o * stagedSpan,
                  gapStride);
  } else if (staging) {
    compactStaged(tile, staging, outer, stagedSpan, shift, steps, step);
  }
}

// Every step-th element of each staged run (`outer` runs of `span`
// elements, read from `shift` on) into the tile's columns.
void KernelLowering::compactStaged(Value tile, Value staging, int64_t outer, int64_t span, int64_t shift,
                                   int64_t steps, int64_t step) {
  for (int64_t o = 0; o < outer; ++o)
    copyTile(tileColumns(*b, loc, tile, o * steps, steps),
             steppedColumns(*b, loc, staging, o * span + shift, steps, step), nullptr);
}

// The first and last of the first elements `offsets` in the cluster that
// holds `offset`: clusters taken greedily in order, each of elements less
// than `reach` after its first. (0, -1) where `offset` is in none.
std::pair<int64_t, int64_t> siblingCluster(ArrayRef<int64_t> offsets, int64_t offset, int64_t reach) {
  SmallVector<int64_t, 4> sorted(offsets);
  llvm::sort(sorted);
  int64_t first = 0, last = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i == 0 || sorted[i] - first >= reach) {
      if (i > 0 && first <= offset && offset <= last) break;
      first = sorted[i];
    }
    last = sorted[i];
  }
  if (sorted.empty() || offset < first || offset > last) return {0, -1};
  return {first, last};
}

// By the kernel input's position: the lowered body's inputs are the
// unlowered body's arguments in order.
SiblingKey KernelLowering::siblingKey(Value input, const Layout& l) {
  auto arg = llvm::dyn_cast<BlockArgument>(input);
  return SiblingKey{arg ? int64_t(arg.getArgNumber()) : -1,
                    std::vector<int64_t>(l.rowStrides.begin(), l.rowStrides.end()),
                    std::vector<int64_t>(l.colStrides.begin(), l.colStrides.end())};
}

Value KernelLowering::alloc(int64_t p, int64_t f, Type elem) {
  auto type = MemRefType::get({p, f}, elem, MemRefLayoutAttrInterface{},
                              b->getI64IntegerAttr(nc::kSbufMemorySpace));
  auto tile = b->create<nc::AllocTileOp>(loc, type, IntegerAttr());
  tile->setAttr("iteration", b->getI64IntegerAttr(iteration));
  if (rowStep > 1) rowTileAllocs.insert(tile);
  return tile;
}

// Columns per tile: a whole row where a reduction needs it, else one PSUM
// bank for a matmul or the free-size limit. Split columns (a matmul's
// epilogue over [heads, head_dim]) take whole innermost rows.
int64_t KernelLowering::columnTile() const {
  if (wholeRows || catReadsComputedRows) return space.cols;
  int64_t chunk = space.reduces && !chunked ? space.cols
                                            : std::min(space.cols, space.matmul        ? matmulColumns
                                                                   : chunkColumns > 0 ? chunkColumns
                                                                                      : maxFree);
  if (space.trail.size() == 2 && !space.reduces && chunk < space.cols && space.trail[1] <= chunk)
    chunk = chunk / space.trail[1] * space.trail[1];
  return chunk;
}

Value KernelLowering::tileOf(Value v) {
  auto it = tiles.find(v);
  if (it != tiles.end()) return it->second;
  // A kernel input: load it for this iteration (or reuse a row-invariant load).
  const Layout l = layouts.lookup(v);  // a copy: `layouts` may grow below
  int64_t p = std::min<int64_t>(nc::kNumPartitions, (space.rows - (rowStep > 1 ? groupStart : r0)) / rowStep);
  if (space.rowBlock > 0) p = std::min(p, space.rowBlock - r0 % space.rowBlock);
  if (tileRows > 0) p = tileRows;
  int64_t f = l.kind == Kind::Row ? 1 : inputColumns > 0 ? inputColumns : std::min(space.cols - c0, columnTile());
  auto elem = nc::deviceElementType(llvm::cast<RankedTensorType>(v.getType()).getElementType());
  if (rowStep > 1 && groupedInputs.contains(v)) {  // its group's rows, loaded by the group's first row tile
    Value& group = groupTiles[v];
    if (!group) {
      group = alloc(p, f * rowStep, elem);
      emitDma(/*load=*/true, hbmOf[v], group, l, groupStart, p, c0, f, rowStep);
    }
    return tiles[v] = tileColumns(*b, loc, group, groupRow * f, f);
  }
  bool rowInvariant = llvm::all_of(l.rowStrides, [](int64_t s) { return s == 0; });
  bool broadcast = llvm::is_contained(l.rowStrides, 0);
  // Over split columns [heads, d], a value broadcast over the heads (a
  // rotary table) is the same in every column tile of a row tile: loaded by
  // its first one, read by the others.
  bool sameInRowTile = l.kind == Kind::Full && space.trail.size() == 2 && l.colStrides[0] == 0 && !rowInvariant &&
                       f == columnTile();
  if (sameInRowTile) {
    if (rowTileLoadsRow != r0) {
      rowTileLoads.clear();
      rowTileLoadsRow = r0;
    }
    if (auto h = rowTileLoads.find(v); h != rowTileLoads.end()) return tiles[v] = h->second;
  }
  std::tuple<void*, std::vector<int64_t>, int64_t, int64_t> key;
  if (broadcast) {
    SmallVector<int64_t> offs = rowOffsets(l, r0, p);
    key = {v.getAsOpaquePointer(), std::vector<int64_t>(offs.begin(), offs.end()), c0, f};
    if (auto h = repeatedLoads.find(key); h != repeatedLoads.end()) return tiles[v] = h->second;
  }
  if (Value window = sharedWindow(v, l, p, f)) return tiles[v] = window;
  Value tile = alloc(p, f, elem);
  if (diagonalKeys > 0 && l.kind == Kind::Full && f > diagonalKeys)
    loadRepeatedRows(hbmOf[v], tile, l, p, f, diagonalKeys);
  else if (space.pack > 1 && l.kind == Kind::Full && l.colStrides[0] == 0 && f > space.trail[1])
    loadRepeatedRows(hbmOf[v], tile, l, p, f, space.trail[1]);
  else if (space.pack > 1 && l.kind == Kind::Full && l.colStrides[0] != 0 && l.colStrides[1] == 0 &&
           space.trail[1] > 1 && f % space.trail[1] == 0)
    loadWidenedRows(hbmOf[v], tile, l, p, f);
  else if (!loadBroadcastColumns(v, tile, l, p, f) && !loadTransposed(v, tile, l, p, f))
    emitDma(/*load=*/true, hbmOf[v], tile, l, r0, p, c0, f);
  int64_t bytes = f * (elem.getIntOrFloatBitWidth() / 8);
  if (sameInRowTile) rowTileLoads[v] = tile;
  if (rowInvariant ? invariantLoadBytes + bytes <= kInvariantLoadBytes
                   : broadcast && repeatedLoadBytes + bytes <= kRepeatedLoadBytes) {
    repeatedLoads[key] = tile;
    (rowInvariant ? invariantLoadBytes : repeatedLoadBytes) += bytes;
  }
  return tiles[v] = tile;
}

// Windows of one kernel input read with the same strides, contiguous
// columns and first elements at most half a tile's columns apart (a
// depthwise convolution's taps: shifted views of its padded, flattened
// input) share one load per tile of the union of their columns; each is a
// column range of it. Null where the value has no such siblings.
Value KernelLowering::sharedWindow(Value v, const Layout& l, int64_t p, int64_t f) {
  if (l.kind != Kind::Full || l.colStrides.size() != 1 || l.colStrides[0] != 1 || space.pack > 1 || rowStep > 1 ||
      space.split > 1 || !llvm::isa<BlockArgument>(hbmOf[v]))
    return Value();
  // (Of one shape: each reads the same columns of its rows, so the union
  // ends where the last one's do.)
  ArrayRef<int64_t> shape = llvm::cast<RankedTensorType>(v.getType()).getShape();
  auto it = windowSiblings.find({siblingKey(hbmOf[v], l), std::vector<int64_t>(shape.begin(), shape.end())});
  if (it == windowSiblings.end() || it->second.size() < 2) return Value();
  // Clusters of first elements, each within half a tile of its first.
  auto [lo, hi] = siblingCluster(it->second, l.offset, f / 2 + 1);
  if (hi <= lo) return Value();
  Type elem = llvm::cast<MemRefType>(hbmOf[v].getType()).getElementType();
  std::vector<int64_t> starts;
  for (int64_t o : rowOffsets(l, r0, p)) starts.push_back(lo + o + c0);
  StagedKey key{hbmOf[v].getAsOpaquePointer(), elem.getAsOpaquePointer(), iteration, std::move(starts),
                std::vector<int64_t>{1, f + hi - lo}};
  Value& shared = stagedTiles[key];
  if (!shared) {
    shared = alloc(p, f + hi - lo, elem);
    Layout all = l;
    all.offset = lo;
    emitDma(/*load=*/true, hbmOf[v], shared, all, r0, p, c0, f + hi - lo);
  }
  return tileColumns(*b, loc, shared, l.offset - lo, f);
}

// Its rows each a run of their own, the g copies of one value would cost g
// descriptors per partition (a bias over 64 columns packed 8 rows to a
// partition: 1024 runs for one row tile); one copy of `row` columns is
// loaded and doubled across the tile instead (also an input of an
// attention's diagonal pack over one head's keys, which each head of the
// pack reads the same).
void KernelLowering::loadRepeatedRows(Value hbm, Value tile, const Layout& l, int64_t p, int64_t f, int64_t row) {
  emitDma(/*load=*/true, hbm, tileColumns(*b, loc, tile, 0, row), l, r0, p, c0, row);
  repeatColumns(tile, row, f);
}

void KernelLowering::repeatColumns(Value tile, int64_t filled, int64_t f) {
  for (; filled < f; filled *= 2) {
    const int64_t n = std::min(filled, f - filled);
    copyTile(tileColumns(*b, loc, tile, filled, n), tileColumns(*b, loc, tile, 0, n), nullptr);
  }
}

void KernelLowering::spreadColumns(Value tile, Value values, int64_t n, int64_t copies) {
  for (int64_t j = 0; j < copies; ++j) copyTile(steppedColumns(*b, loc, tile, j, n, copies), values, nullptr);
}

// Its C columns the same (stride 0) and its packed rows s apart: the f / C
// values of this column tile are loaded as one run per partition where s is
// 1 (not f runs of one element), then copied into each of the C columns of
// their rows with stepped views (C copies: a per-row scale over rows of 2,
// packed 64 to a partition, takes 2).
void KernelLowering::loadWidenedRows(Value hbm, Value tile, const Layout& l, int64_t p, int64_t f) {
  const int64_t row = space.trail[1], rows = f / row, s = l.colStrides[0];
  Value values = alloc(p, rows, llvm::cast<MemRefType>(tile.getType()).getElementType());
  emitDma(/*load=*/true, hbm, values, l, r0, p, c0, rows, 1, std::make_pair(s, c0 / row * s));
  spreadColumns(tile, values, rows, row);
}

// Rows at `offs` as segments of adjacent elements, (first row, count), and
// whether they are equal and equally spaced (`stride` apart), so that one
// transfer moves them all.
RowSegments adjacentRowSegments(ArrayRef<int64_t> offs) {
  RowSegments r;
  for (size_t i = 0; i < offs.size(); ++i) {
    if (i > 0 && offs[i] == offs[i - 1] + 1) ++r.segments.back().second;
    else r.segments.push_back({int64_t(i), 1});
  }
  r.stride = r.segments.size() > 1 ? offs[size_t(r.segments[1].first)] - offs[0] : 0;
  r.uniform = llvm::all_of(llvm::enumerate(r.segments), [&](auto e) {
    return e.value().second == r.segments[0].second &&
           offs[size_t(e.value().first)] == offs[0] + int64_t(e.index()) * r.stride;
  });
  return r;
}

// The transfers moving a transposed block's w columns (partitions, `colStride`
// apart in HBM) for these rows: (first row, rows, access pattern), one for
// all of them where uniform, else one per segment.
SmallVector<std::tuple<int64_t, int64_t, SmallVector<int64_t>>, 4> RowSegments::transfers(int64_t colStride,
                                                                                      int64_t w,
                                                                                      int64_t blocks) const {
  SmallVector<std::tuple<int64_t, int64_t, SmallVector<int64_t>>, 4> out;
  assert((uniform || blocks == 1) && "blocks of rows in several transfers");
  if (uniform) {
    SmallVector<int64_t> ap{colStride, w};
    if (blocks > 1) ap.append({w * colStride, blocks});
    if (segments.size() > 1) ap.append({stride, int64_t(segments.size())});
    ap.append({1, segments[0].second});
    out.push_back({0, segments[0].second * int64_t(segments.size()), ap});
  } else {
    for (auto [first, rows] : segments) out.push_back({first, rows, SmallVector<int64_t>{colStride, w, 1, rows}});
  }
  return out;
}

// Rows longer than this load far more than their per-row results store.
constexpr int64_t kLongRowColumns = 2048;

// A transposed input (the tile's rows in runs of adjacent elements, its
// columns strided) read element by element would cost one DMA descriptor
// per element. Instead, blocks of up to 128 columns are loaded with the
// columns on the partitions (each partition a contiguous run per segment of
// the tile's rows: one segment, or one per batch where the rows cross a
// batch, as `x.flatten(2).transpose(1, 2)` of [8, 768, 14, 14] does every
// 196 rows), transposed on the TensorEngine into a PSUM bank (exact), and
// copied into the tile. Worth it where the segments average two rows or
// more. True if the tile was loaded so.
bool KernelLowering::loadTransposed(Value v, Value tile, const Layout& l, int64_t p, int64_t f) {
  const int64_t P = nc::kNumPartitions, bank = 512;
  // A per-row value (one column) whose rows lie in runs of adjacent
  // elements loads the same way, as a block of one column: one run per
  // segment of rows (row tiles gathered as below) instead of a descriptor
  // per row, under the conditions storeTransposed sets for storing one.
  const bool perRow = l.kind == Kind::Row && f == 1 && p == P && space.rows >= 2 * p &&
                      space.cols <= kLongRowColumns && !space.matmul;
  if ((l.kind != Kind::Full && !perRow) || (space.trail.size() != 1 && !perRow) || space.split > 1 || p < 2 ||
      (f < 2 && !perRow))
    return false;
  // (A per-row value's one column is at its rows' offsets.)
  const int64_t colStride = perRow ? 0 : l.colStrides.back();
  if (colStride <= 1 && !perRow) return false;
  SmallVector<int64_t> offs = rowOffsets(l, r0, p);
  const RowSegments rows = adjacentRowSegments(offs);
  if (int64_t(rows.segments.size()) * 2 > p) return false;
  // (A per-row value's one column saves descriptors only in one transfer:
  // each pays the fixed cost.)
  if (perRow && !rows.uniform) return false;
  Type elem = llvm::cast<MemRefType>(tile.getType()).getElementType();
  // Full row tiles whose rows continue this one's single run in HBM (the
  // positions of a channel plane, 128 at a time) load their blocks of
  // columns together, up to kGatheredLoadTiles of them: each partition's
  // run spans the row tiles (runs of 256 bytes of bf16 cost their
  // descriptor more than their bytes: a softmax over the 128 channels of
  // [256, 128, 256] loaded 512 row tiles in 128 runs each). Later row
  // tiles take their part of the gathered columns.
  int64_t gatherTiles = 1;
  const int64_t elemBytes = std::max<int64_t>(1, elem.getIntOrFloatBitWidth() / 8);
  if (p == P && rows.segments.size() == 1 && tileRows == 0 && rowStep == 1 && c0 == 0 && (f >= space.cols || perRow) &&
      !space.matmul && !prologueOperand)
    for (int64_t k = 1; k < kGatheredLoadTiles && k * P * elemBytes < kGatheredRunBytes; ++k) {
      const int64_t next = r0 + k * P;
      if (next + P > space.rows || (space.rowBlock > 0 && next / space.rowBlock != (next + P - 1) / space.rowBlock))
        break;
      SmallVector<int64_t> nextOffs = rowOffsets(l, next, P);
      const RowSegments nextRows = adjacentRowSegments(nextOffs);
      if (nextRows.segments.size() != 1 || nextOffs.front() != offs.front() + k * P) break;
      gatherTiles = k + 1;
    }
  // The gathered block of a transfer whose first column is at `column` (an
  // HBM offset) and whose rows hold this row tile's: its part for this row
  // tile, loaded with the first row tile it serves.
  auto gatheredColumns = [&](int64_t column, int64_t w, int64_t blocks, int64_t block) -> Value {
    const auto key = std::make_pair(hbmOf[v].getAsOpaquePointer(), column);
    auto it = gatheredLoads.find(key);
    // (The gathered rows are one run: this tile's rows must be too.)
    if (it != gatheredLoads.end() && p == P && rows.segments.size() == 1) {
      const GatheredLoad& g = it->second;
      const int64_t at = offs.front() - g.firstRow;
      if (g.colStride == colStride && g.columns == w && g.blocks == blocks && at >= 0 && at < g.rows && at % P == 0)
        return tileColumns(*b, loc, g.tile, block * g.rows + at, P);
    }
    // (A new gather only from a row tile that starts an iteration: one that
    // shares an earlier gather's iteration would extend it, and staggered
    // gathers of two inputs would chain every row tile into one.)
    if (gatherTiles < 2 || blocks * w * gatherTiles * P * elemBytes > kGatheredLoadBytes ||
        (r0 < gatheredIterationEnd && r0 != gatheredIterationStart))
      return Value();
    GatheredLoad g{alloc(w, blocks * gatherTiles * P, elem), offs.front(), gatherTiles * P, colStride, w, blocks};
    SmallVector<int64_t> ap{colStride, w};
    if (blocks > 1) ap.append({w * colStride, blocks});
    ap.append({1, g.rows});
    Operation* dma = b->create<nc::DmaLoadOp>(loc, hbmOf[v], g.tile, b->getI64IntegerAttr(0),
                                              b->getI64IntegerAttr(column + offs.front()), b->getDenseI64ArrayAttr(ap));
    setEngineAndSource(dma, *b, "dma", -1);
    ++numInst;
    ++numDma;
    gatheredLoads[key] = g;
    if (r0 >= gatheredIterationEnd) gatheredIterationStart = r0;
    gatheredIterationEnd = std::max(gatheredIterationEnd, r0 + g.rows);
    return tileColumns(*b, loc, g.tile, block * g.rows, P);
  };
  // A block's transfer (`ap`: the block's columns on the partitions first).
  // Where its runs are short and would keep one queue busy long after a
  // small kernel's other transfers end, it goes in pieces of partitions,
  // each about the fixed cost's worth of runs, at most as many as the
  // queues left to each of the value's tiles (an add of a transposed
  // [16, 300, 16]: two row tiles, each a block of 2048 runs of 32 bytes,
  // 43 us on one queue); a larger kernel's tiles keep the queues busy.
  const int64_t valueTiles = (space.rows + P - 1) / P * (perRow ? 1 : (space.cols + f - 1) / f);
  auto loadBlock = [&](Value columns, int64_t offset, ArrayRef<int64_t> ap) {
    const neff::DeviceParams& d = neff::Trn1();
    const int64_t partitions = ap[1];
    int64_t runs = 1;
    for (size_t i = 2; i + 1 < ap.size(); i += 2)
      if (i + 2 < ap.size() || ap[i] != 1) runs *= ap[i + 1];
    const int64_t runBytes = ap.back() * elemBytes;
    const int64_t maxPieces = std::min<int64_t>({8, int64_t(d.dma_queues) / valueTiles, partitions});
    int64_t pieces = 1;
    if (runBytes < kShortRowBytes / 4 && maxPieces > 1)
      pieces = std::clamp<int64_t>(int64_t(double(partitions * runs) * d.dma_run_ns / d.dma_fixed_ns), 1, maxPieces);
    for (int64_t k = 0; k < pieces; ++k) {
      const int64_t first = partitions * k / pieces, count = partitions * (k + 1) / pieces - first;
      SmallVector<int64_t> piece(ap);
      piece[1] = count;
      Operation* dma = b->create<nc::DmaLoadOp>(loc, hbmOf[v], columns, b->getI64IntegerAttr(first),
                                                b->getI64IntegerAttr(offset + first * ap[0]),
                                                b->getDenseI64ArrayAttr(piece));
      setEngineAndSource(dma, *b, "dma", -1);
      ++numInst;
      ++numDma;
    }
  };
  for (int64_t j = 0; j < f; j += bank) {
    int64_t n = std::min(bank, f - j);
    Value psum = allocPsum(p, n);
    // The whole blocks of a bank in one transfer where the rows allow
    // (each transfer pays the fixed cost: a softmax over dim 1 of
    // [32, 2048, 128] loads 16 blocks a row tile).
    int64_t together = rows.uniform ? n / P : 0;
    if (together < 2) together = 0;
    // Where the tile's rows are one run and a column's rows end where the
    // next column's begin (a tall, narrow matrix transposed: [4096, 16]),
    // partition q takes the blocks' consecutive columns q x T .. q x T + T
    // - 1 (one run of T x p elements, not T runs of p), and T stepped copies
    // put them in order: [4096, 16] bf16 transposed loaded 512 runs of 32
    // bytes a bank. Only for rows shorter than kShortRowBytes: a longer run
    // moves at the queue's rate anyway, and the copies would cost more.
    const bool interleaved =
        together > 0 && rows.segments.size() == 1 && colStride == p && p * elemBytes < kShortRowBytes;
    const int64_t blockColumn = l.offset + (c0 + j) * colStride;
    if (together > 0 && !interleaved && gatheredColumns(blockColumn, P, together, 0)) {
      for (int64_t k = 0; k < together; ++k) {
        setSource(b->create<nc::TransposeOp>(loc, tileColumns(*b, loc, psum, k * P, P),
                                             gatheredColumns(blockColumn, P, together, k)),
                  nullptr);
        ++numInst;
      }
    } else if (together > 0) {
      Value columns = alloc(P, together * p, elem);
      SmallVector<int64_t> ap = std::get<2>(rows.transfers(colStride, P, together).front());
      if (interleaved) ap = {together * colStride, P, 1, together * p};
      loadBlock(columns, blockColumn + offs[0], ap);
      for (int64_t k = 0; k < together; ++k) {
        setSource(b->create<nc::TransposeOp>(loc, tileColumns(*b, loc, psum, k * P, P),
                                             tileColumns(*b, loc, columns, k * p, p)),
                  nullptr);
        ++numInst;
      }
    }
    for (int64_t c = j + together * P; c < j + n; c += P) {
      int64_t w = std::min(P, j + n - c);
      if (Value gathered = gatheredColumns(l.offset + (c0 + c) * colStride, w, 1, 0)) {
        setSource(b->create<nc::TransposeOp>(loc, tileColumns(*b, loc, psum, c - j, w), gathered), nullptr);
        ++numInst;
        continue;
      }
      Value columns = alloc(w, p, elem);
      for (auto [first, count, ap] : rows.transfers(colStride, w))
        loadBlock(tileColumns(*b, loc, columns, first, count),
                  l.offset + offs[size_t(first)] + (c0 + c) * colStride, ap);
      setSource(b->create<nc::TransposeOp>(loc, tileColumns(*b, loc, psum, c - j, w), columns), nullptr);
      ++numInst;
    }
    if (!interleaved) {
      copyTile(tileColumns(*b, loc, tile, j, n), psum, nullptr);
      continue;
    }
    for (int64_t k = 0; k < together; ++k)
      copyTile(steppedColumns(*b, loc, tile, j + k, P, together), tileColumns(*b, loc, psum, k * P, P), nullptr);
    if (n > together * P)
      copyTile(tileColumns(*b, loc, tile, j + together * P, n - together * P),
               tileColumns(*b, loc, psum, together * P, n - together * P), nullptr);
  }
  return true;
}

// Each of a spread row's m partitions holds its per-row value
// (combineSpreadPartials); stored from one partition a row, a row cost a
// transfer, each paying the DMA's fixed cost (x.amax(1) of [64, 3000]: 64
// stores, 8 us on 16 queues, where the unspread kernel took 9.7 us in
// all). Where the rows are more than the DMA queues (fewer store side by
// side in one fixed cost: a sum over [16, 3000] 8.9 us that way, 9.1
// gathered) and their elements lie evenly spaced in HBM, the TensorEngine
// transposes the [p x 1] values onto one partition, a stepped copy keeps
// each row's first, and one transfer stores them.
bool KernelLowering::storeSpreadRows(Value hbm, Value tile, const Layout& l, ArrayRef<int64_t> offs, int64_t p) {
  const int64_t m = space.split, rows = p / m;
  auto type = llvm::cast<MemRefType>(tile.getType());
  if (rows <= int64_t(neff::Trn1().dma_queues) || p % m != 0 || type.getDimSize(0) != p || type.getDimSize(1) != 1)
    return false;
  const int64_t stride = offs[size_t(m)] - offs[0];
  if (stride <= 0) return false;
  for (int64_t r = 1; r < rows; ++r)
    if (offs[size_t(r * m)] - offs[size_t((r - 1) * m)] != stride) return false;
  Value transposed = allocPsum(1, p);
  setSource(b->create<nc::TransposeOp>(loc, transposed, tile), nullptr);
  Value row = alloc(1, rows, type.getElementType());
  copyTile(row, steppedColumns(*b, loc, transposed, 0, rows, m), nullptr);
  auto dma = b->create<nc::DmaStoreOp>(loc, row, hbm, b->getI64IntegerAttr(0), b->getI64IntegerAttr(l.offset + offs[0]),
                                       b->getDenseI64ArrayAttr({0, 1, stride, rows}));
  setEngineAndSource(dma, *b, "dma", -1);
  ++numInst;
  ++numDma;
  return true;
}

// The mirror of loadTransposed for a store whose columns are strided in
// memory and whose rows come in runs of adjacent elements (a value stored
// through a transpose, `(x * 2).t()` returned; a projection's result stored
// as per-head K^T, [batch, heads, head_dim, tokens], where a row tile's
// tokens run in one segment per batch): blocks of up to 128 columns with
// one stride between them are transposed on the TensorEngine, copied out
// of PSUM and stored with the columns on the partitions, each row segment
// one contiguous run. Stored element by element, each element would cost a
// DMA descriptor. True if stored so.
bool KernelLowering::storeTransposed(Value hbm, Value tile, const Layout& l, ArrayRef<int64_t> offs, int64_t col0,
                                     int64_t f) {
  const int64_t P = nc::kNumPartitions;
  constexpr size_t kBlocksTogether = 4;
  const int64_t p = int64_t(offs.size());
  // A per-row value (one column) whose rows lie in runs of adjacent
  // elements goes the same way: a block of one column, stored as one run
  // per segment of rows (row tiles gathered as below) instead of one
  // descriptor per row (a sum of squares over the 128 channels of
  // [256, 128, 256] in the permuted frame stored 512 row tiles of 128
  // elements, 4.6 us of a DMA queue each). Only with two full row tiles or
  // more (a few rows cost a few descriptors, less than the transpose's
  // wait), rows of at most kLongRowColumns (with longer ones the loads
  // dwarf the descriptors, while the gathered tiles and the transposes
  // slow the loads' overlap: softmax over [2048, 32000] 1321.8 -> 1339.9
  // us, a [4096, 4096] x [4096, 1] product 190.0 -> 201.9; with 2048
  // columns 103.0 -> 100.7), and not in a matmul's kernel, whose
  // TensorEngine is busy. (A Row layout's tile has one column, whatever the
  // iteration's width.)
  const bool perRow = (l.kind == Kind::Row || (l.kind == Kind::Full && f == 1)) &&
                      llvm::cast<MemRefType>(tile.getType()).getDimSize(1) == 1 && p == nc::kNumPartitions &&
                      space.rows >= 2 * p && space.cols <= kLongRowColumns && !space.matmul;
  if (perRow) f = 1;
  if ((l.kind != Kind::Full && !perRow) || space.split > 1 || p < 2 ||
      (!perRow && (f < 2 || l.colStrides.empty() || l.colStrides.back() <= 1)) || nc::isPsumTile(tile.getType()) ||
      llvm::cast<MemRefType>(tile.getType()).getElementType() != llvm::cast<MemRefType>(hbm.getType()).getElementType())
    return false;
  // Worth a transpose where the rows' segments average two elements or more.
  const RowSegments rows = adjacentRowSegments(offs);
  if (int64_t(rows.segments.size()) * 2 > p) return false;
  // The HBM offset of the tile's column c (from the view's first element).
  auto columnOffset = [&](int64_t c) {
    if (l.kind == Kind::Row) return int64_t(0);
    int64_t index = col0 + c, offset = 0;
    for (size_t j = space.trail.size(); j-- > 0;) {
      offset += index % space.trail[j] * l.colStrides[j];
      index /= space.trail[j];
    }
    return offset;
  };
  Type elem = llvm::cast<MemRefType>(hbm.getType()).getElementType();
  // The rows of a transposed block are the tile's rows: 128 of them are
  // runs of 256 bytes (bf16), each costing its descriptor more than its
  // bytes. The blocks of consecutive row tiles (one segment each) are
  // gathered, per column block, into one tile of up to kTransposedRows
  // columns and stored once: runs of up to 1 KiB, one fixed cost for four
  // row tiles (LLaMA-7B's RMSNorm kernels, which store the projections'
  // operand transposed: 204 to 136 us). Not in a matmul's kernel: there the
  // gathered tiles held across row tiles cost the TensorEngine more waits
  // than the stores save (LLaMA-7B's up projection 3064 to 3106 us).
  // Blocks (first column, columns, stride): up to 128 columns at one
  // positive stride.
  SmallVector<std::array<int64_t, 3>> blocks;
  for (int64_t c = 0; c < f;) {
    int64_t w = 1, colStride = 1;
    if (c + 1 < f) {
      colStride = columnOffset(c + 1) - columnOffset(c);
      while (w < P && c + w < f && columnOffset(c + w) - columnOffset(c + w - 1) == colStride) ++w;
    }
    if (colStride < 1) return false;
    blocks.push_back({c, w, colStride});
    c += w;
  }
  const bool lastRows = r0 + p >= space.rows || (space.rowBlock > 0 && (r0 + p) % space.rowBlock == 0);
  const bool gather = rows.segments.size() == 1;
  // Where no row tile before or after continues these rows (a softmax over
  // dim 1 of [32, 2048, 128]: a row tile per batch), up to four whole
  // blocks at one distance are stored together instead (a 128 KiB transfer
  // for bf16), except from the last row tile, whose stores nothing overlaps.
  bool continued = false;
  if (gather && !lastRows && r0 + p < space.rows)
    continued = rowOffsets(l, r0 + p, 1).front() == offs.back() + 1;
  const bool blocksTogether = gather && !continued && !lastRows && !space.matmul &&
                              llvm::none_of(pendingTransposed, [&](auto& e) { return e.second.hbm == hbm; });
  for (size_t i = 0; i < blocks.size();) {
    auto [c, w, colStride] = blocks[i];
    int64_t colOffset = l.offset + columnOffset(c);
    size_t together = 1;
    while (blocksTogether && w == P && together < kBlocksTogether && i + together < blocks.size() &&
           blocks[i + together][1] == P &&
           blocks[i + together][2] == colStride &&
           columnOffset(blocks[i + together][0]) == columnOffset(c) + int64_t(together) * P * colStride)
      ++together;
    if (together > 1) {
      Value gathered = alloc(P, int64_t(together) * p, elem);
      for (size_t k = 0; k < together; ++k) {
        Value psum = allocPsum(P, p);
        setSource(b->create<nc::TransposeOp>(loc, psum, tileColumns(*b, loc, tile, blocks[i + k][0], P)), nullptr);
        copyTile(tileColumns(*b, loc, gathered, int64_t(k) * p, p), psum, nullptr);
        numInst += 2;
      }
      Operation* dma = b->create<nc::DmaStoreOp>(
          loc, gathered, hbm, b->getI64IntegerAttr(0), b->getI64IntegerAttr(colOffset + offs[0]),
          b->getDenseI64ArrayAttr({colStride, P, P * colStride, int64_t(together), 1, p}));
      setEngineAndSource(dma, *b, "dma", -1);
      ++numInst;
      ++numDma;
      i += together;
      continue;
    }
    ++i;
    auto transpose = [&] {
      Value psum = allocPsum(w, p);
      setSource(b->create<nc::TransposeOp>(loc, psum, tileColumns(*b, loc, tile, c, w)), nullptr);
      ++numInst;
      return psum;
    };
    if (!gather) {
      Value psum = transpose();
      Value transposed = alloc(w, p, elem);
      copyTile(transposed, psum, nullptr);
      ++numInst;
      for (auto [first, count, ap] : rows.transfers(colStride, w)) {
        Operation* dma = b->create<nc::DmaStoreOp>(loc, tileColumns(*b, loc, transposed, first, count), hbm,
                                                   b->getI64IntegerAttr(0),
                                                   b->getI64IntegerAttr(colOffset + offs[size_t(first)]),
                                                   b->getDenseI64ArrayAttr(ap));
        setEngineAndSource(dma, *b, "dma", -1);
        ++numInst;
        ++numDma;
      }
      continue;
    }
    auto output = llvm::dyn_cast<BlockArgument>(hbm);  // (the kernel's results are)
    auto key = std::make_pair(output ? int64_t(output.getArgNumber()) : -1, colOffset);
    auto it = pendingTransposed.find(key);
    if (it != pendingTransposed.end() &&
        (it->second.firstRow + it->second.rows != offs[0] || it->second.partitions != w ||
         it->second.colStride != colStride)) {
      flushTransposed(it->second);
      pendingTransposed.erase(it);
      it = pendingTransposed.end();
    }
    if (it == pendingTransposed.end()) {
      // Room for the row tiles up to kTransposedRows rows, the end of the
      // rows, or of a batch.
      int64_t end = space.rowBlock > 0 ? std::min(space.rows, (r0 / space.rowBlock + 1) * space.rowBlock) : space.rows;
      int64_t capacity = space.matmul || !output ? p : std::min(kTransposedRows, end - r0);
      PendingTransposedStore fresh{hbm, alloc(w, capacity, elem), colOffset, colStride, offs[0], 0, w, capacity};
      it = pendingTransposed.emplace(key, fresh).first;
    }
    PendingTransposedStore& pending = it->second;
    copyTile(tileColumns(*b, loc, pending.tile, pending.rows, p), transpose(), nullptr);
    ++numInst;
    pending.rows += p;
    if (lastRows || p < P || pending.rows + P > pending.capacity) {
      flushTransposed(pending);
      pendingTransposed.erase(it);
    }
  }
  return true;
}

void KernelLowering::flushTransposed(const PendingTransposedStore& pending) {
  Operation* dma = b->create<nc::DmaStoreOp>(
      loc, tileColumns(*b, loc, pending.tile, 0, pending.rows), pending.hbm, b->getI64IntegerAttr(0),
      b->getI64IntegerAttr(pending.colOffset + pending.firstRow),
      b->getDenseI64ArrayAttr({pending.colStride, pending.partitions, 1, pending.rows}));
  setEngineAndSource(dma, *b, "dma", -1);
  ++numInst;
  ++numDma;
}

LogicalResult KernelLowering::markImmediates(Block& old) {
  for (Operation& op : old.without_terminator())
    if (auto v = splatValue(op.getNumResults() ? op.getResult(0) : Value())) {
      layouts[op.getResult(0)].kind = Kind::Imm;
      layouts[op.getResult(0)].imm = *v;
    } else if (llvm::isa<arith::ConstantOp>(op)) {
      return op.emitError("non-splat constants must be kernel inputs");
    }
  return success();
}

void KernelLowering::tensorScalar(Value out, Value in, Value scalar, StringRef alu, double imm, Operation* src,
                                  bool reverse) {
  // x / 2^k is x * 2^-k, the same bits (both round the same real value), and
  // a multiply may run on the scalar engine or fold into an activation's
  // scale (attention's scores / 8 for 64-wide heads).
  int exponent = 0;
  if (alu == "div" && !scalar && !reverse && std::isfinite(imm) && imm != 0.0 &&
      std::fabs(std::frexp(imm, &exponent)) == 0.5 && std::abs(exponent) < 120) {
    alu = "mul";
    imm = 1.0 / imm;
  }
  setSource(b->create<nc::TensorScalarOp>(loc, out, in, scalar, b->getStringAttr(alu), b->getF64FloatAttr(imm),
                                          b->getBoolAttr(reverse)),
            src);
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

// Values that cross the graph boundary (graph inputs such as token ids or
// masks, and results the graph returns) have their boundary type in HBM
// (integers and bools keep their dtype: loads convert them into f32 tiles
// and stores convert back); every other value lives in HBM in its device
// type (bools and integers computed on the device as f32).
static Type hbmTypeOf(Value outer) {
  Type elem = llvm::cast<RankedTensorType>(outer.getType()).getElementType();
  bool crosses = llvm::isa<BlockArgument>(outer) ||
                 llvm::any_of(outer.getUsers(), [](Operation* u) { return llvm::isa<func::ReturnOp>(u); });
  return crosses ? nc::boundaryElementType(elem) : nc::deviceElementType(elem);
}

Type KernelLowering::hbmElementType(BlockArgument arg) { return hbmTypeOf(kernel.getInputs()[arg.getArgNumber()]); }

// The tile type of data bound for (or read from) an HBM memref: integers are
// f32 on the device.
static Type tileTypeFor(Value hbm) {
  return nc::deviceElementType(llvm::cast<MemRefType>(hbm.getType()).getElementType());
}

// In an interleaved kernel a value written in rows goes into its group's
// tile, at the row tile's column range: the op that computed it (its tile
// allocated in this row tile) writes there directly, anything else is
// copied; the group's last row tile stores the group, g rows per partition.
void KernelLowering::storeRows(Value hbm, Value tile, const Layout& store, int64_t p, int64_t f, bool computed) {
  if (rowStep == 1 || store.kind == Kind::Imm || store.rowStrides[space.packDim] == 0 ||
      !rowIsOneRun(store)) {
    emitDma(/*load=*/false, hbm, tile, store, r0, p, c0, f);
    return;
  }
  const int64_t width = store.kind == Kind::Row ? 1 : f;
  auto type = llvm::cast<MemRefType>(tile.getType());
  Value& group = groupTiles[hbm];
  auto allocated = tile.getDefiningOp<nc::AllocTileOp>();
  // Not a constant's tile nor a load that later tiles reuse (a row-invariant
  // input a cast passed on as its result's tile): retargeting erases its alloc.
  auto holdsTile = [&](const auto& e) { return e.second == tile; };
  bool retarget = computed && allocated && rowTileAllocs.contains(allocated) &&
                  llvm::none_of(constantTiles, holdsTile) && llvm::none_of(repeatedLoads, holdsTile) &&
                  llvm::none_of(rowTileLoads, holdsTile) &&
                  type.getShape()[0] == p && type.getShape()[1] == width &&
                  (!group || llvm::cast<MemRefType>(group.getType()).getElementType() == type.getElementType());
  {
    OpBuilder::InsertionGuard guard(*b);
    if (retarget) b->setInsertionPoint(allocated);
    if (!group) group = alloc(p, width * rowStep, type.getElementType());
    Value columns = tileColumns(*b, loc, group, groupRow * width, width);
    if (retarget) {
      allocated.getResult().replaceAllUsesWith(columns);
      for (auto& entry : tiles)
        if (entry.second == tile) entry.second = columns;
      rowTileAllocs.erase(allocated);
      allocated.erase();
    } else {
      copyTile(columns, tile, nullptr);
    }
  }
  if (groupRow == rowStep - 1) emitDma(/*load=*/false, hbm, group, store, groupStart, p, c0, width, rowStep);
}

LogicalResult KernelLowering::storeOutput(Value v, Value hbm, int64_t p, int64_t f) {
  const Layout l = layouts.lookup(v);  // a copy: see LowerElementwise's layoutOf
  if (l.kind == Kind::Imm) {  // written across the tile (or one per row)
    Layout fill;
    if (failed(layoutOfView(aten::contiguousView(llvm::cast<RankedTensorType>(v.getType()).getShape()), fill)))
      return failure();
    int64_t width = fill.kind == Kind::Full ? f : 1;
    Value tile = broadcastRow(Value(), l.imm, p, width, tileTypeFor(hbm),
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
      Value full = broadcastRow(tiles[v], 0.0, p, f, tileTypeFor(hbm),
                                v.getDefiningOp());
      if (failed(layoutOfView(w, store))) return failure();
      store.kind = Kind::Full;
      emitDma(/*load=*/false, hbm, full, store, r0, p, c0, f);
      return success();
    }
    if (l.kind == Kind::Row) {
      // One element per row: the root holds the rows in row-major order
      // (a reduction's result, with or without keepdim), though its dims may
      // split or merge them differently from the space's leading dims.
      SmallVector<int64_t> shape, strides;
      for (auto [size, stride] : llvm::zip(w.shape, w.strides))
        if (size != 1) {
          shape.push_back(size);
          strides.push_back(stride);
        }
      std::optional<SmallVector<int64_t>> rowStrides;
      if (product(w.shape) == product(unsplitLead()))
        rowStrides = aten::reshapeStrides(shape, strides, unsplitLead());
      if (!rowStrides)
        return kernel.emitError("a returned view of a per-row value cannot be stored in the kernel's rows ")
               << aten::shapeToString(unsplitLead()) << " with one access pattern";
      store.rowStrides = *rowStrides;
      if (space.split > 1) store.rowStrides.push_back(0);  // the same value on each partition of a row
      for (auto [size, stride] : llvm::zip(space.lead, store.rowStrides))
        if (size == 1) stride = 0;
      store.colStrides.assign(space.trail.size(), 0);
      store.offset = w.offset;
    } else if (failed(layoutOfView(w, store))) {
      return failure();
    }
    store.kind = l.kind;
    storeRows(hbm, tiles[v], store, p, f, !viewOf.count(v));
    return success();
  }
  if (l.kind == Kind::Row && t.getNumElements() == space.rows * space.cols && space.cols > 1) {
    // A per-row value returned at full width (an expanded column): write the
    // row value across the tile first.
    Value full = broadcastRow(tiles[v], 0.0, p, f, tileTypeFor(hbm),
                              v.getDefiningOp());
    Layout fullStore;
    if (failed(layoutOfView(aten::contiguousView(t.getShape()), fullStore))) return failure();
    fullStore.kind = Kind::Full;
    emitDma(/*load=*/false, hbm, full, fullStore, r0, p, c0, f);
    return success();
  }
  if (l.kind == Kind::Row) {
    // Per-row results are stored densely: element r of a rows-long tensor.
    if (t.getNumElements() != product(unsplitLead()))
      return kernel.emitError("per-row result of shape ") << aten::shapeToString(t.getShape())
             << " does not have one element per row";
    store.rowStrides = contiguousStrides(unsplitLead());
    if (space.split > 1) store.rowStrides.push_back(0);  // the same value on each partition of a row
    store.colStrides.assign(space.trail.size(), 0);
  } else if (failed(layoutOfView(aten::contiguousView(t.getShape()), store)) ||
             t.getNumElements() != space.rows * space.cols) {
    return kernel.emitError("result of shape ") << aten::shapeToString(t.getShape())
           << " does not cover the iteration space";
  }
  storeRows(hbm, tiles[v], store, p, f, !viewOf.count(v));
  return success();
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
// A reshape of a computed value between shapes whose trailing dims both
// flatten into the space's columns over its rows: the same tile.
bool KernelLowering::keepsTile(Operation* view) {
  const Space& s = prologueOps.contains(view) ? prologueSpace : space;
  if (!llvm::isa<aten::ViewShapeOp, aten::UnsafeViewOp, aten::ReshapeOp, aten::ReshapeAliasOp>(view) || s.split > 1)
    return false;
  for (Type t : {view->getOperand(0).getType(), view->getResult(0).getType()})
    if (aten::trailingDimsOf(llvm::cast<RankedTensorType>(t).getShape(), s.rows, s.cols) == 0) return false;
  return true;
}

LogicalResult KernelLowering::foldViews(Block& old, bool allowTileAliases) {
  for (BlockArgument arg : old.getArguments())
    viewOf[arg] = aten::contiguousView(llvm::cast<RankedTensorType>(arg.getType()).getShape());
  for (Operation& op : old.without_terminator()) {
    if (!aten::isViewOp(&op) || windowOps.contains(&op)) continue;
    // (A copy kernel writes the value its returned reshapes keep in order.)
    if (returnedReshapes.contains(&op)) continue;
    auto in = viewOf.find(op.getOperand(0));
    if (in == viewOf.end()) {
      // A returned view is stored through its chain's inverse pattern; a
      // reshape that keeps the rows of a value with a tile reuses the tile.
      bool returnedOnly = allowTileAliases && yielded.contains(op.getResult(0)) && storedViewChain(&op);
      if (returnedOnly) continue;
      if (allowTileAliases && (aten::isRowPreservingReshape(&op) || keepsTile(&op)) &&
          !tilelessViews.contains(op.getOperand(0))) {
        sameTileAs[op.getResult(0)] = op.getOperand(0);
        continue;
      }
      // A slice along the last dim that only cats read: they copy its
      // columns from the tile of the value it slices (LowerElementwise.cpp).
      if (auto slice = llvm::dyn_cast<aten::SliceTensorOp>(op);
          allowTileAliases && slice && !op.use_empty() &&
          llvm::all_of(op.getUsers(), [](Operation* u) { return llvm::isa<aten::CatOp>(u); }))
        continue;
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
  stagedTiles.clear();  // (of a body lowered before, if this one is a retry)
  gatheredLoads.clear();
  gatheredIterationStart = gatheredIterationEnd = 0;
  Block* body = new Block();
  for (BlockArgument arg : old.getArguments()) {
    auto t = llvm::cast<RankedTensorType>(arg.getType());
    hbmOf[arg] = body->addArgument(MemRefType::get(t.getShape(), hbmElementType(arg)), arg.getLoc());
  }
  for (Operation& op : old.without_terminator())
    if (aten::isViewOp(&op) && viewOf.count(op.getResult(0))) hbmOf[op.getResult(0)] = hbmOf.lookup(op.getOperand(0));
  for (Value v : kernel.getResults()) {
    auto t = llvm::cast<RankedTensorType>(v.getType());
    outHbm.push_back(body->addArgument(MemRefType::get(t.getShape(), hbmTypeOf(v)), loc));
  }
  kernel.getBody().push_back(body);
  return body;
}

void KernelLowering::finishBody(Block& old, int64_t& instructions, int64_t& dmas) {
  // Gathered transposed stores that no later row tile flushed (a copy
  // kernel's row tile of one run, then rows that take another store).
  for (auto& [key, pending] : pendingTransposed) flushTransposed(pending);
  pendingTransposed.clear();
  b->create<nc::YieldOp>(loc);
  old.dropAllDefinedValueUses();
  old.erase();
  instructions += numInst;
  dmas += numDma;
}

// A cat's dim, counted from the first.
static int64_t catDimOf(aten::CatOp cat) {
  int64_t dim = int64_t(cat.getDim());
  return dim < 0 ? dim + llvm::cast<RankedTensorType>(cat.getType()).getRank() : dim;
}

// A kernel that is one cat: each input is copied, tile by tile, into its slab
// of the output (the output's strides with an offset along the cat dim).
// Inputs that are the same view of one tensor at first elements a few
// columns apart (the shifted windows of a convolution's im2col: one per
// tap, `kernel_w` and a padded row apart) are loaded once per tile, the
// union of their columns, and each is stored from its column range: one
// load for the group instead of one per input. A float splat input is
// filled in SBUF; a cat along a later dim that is an input (nested by
// ncc-form-kernels) is assembled in SBUF (assembleNestedCat).
LogicalResult KernelLowering::lowerCat(aten::CatOp cat, Block* body, ArrayRef<Value> outHbm) {
  auto outType = llvm::cast<RankedTensorType>(cat.getType());
  aten::StridedView outView = aten::contiguousView(outType.getShape());
  int64_t dim = int64_t(cat.getDim());
  if (dim < 0) dim += outType.getRank();
  const bool floats = aten::isFloatType(outType.getElementType());
  struct Piece {
    Space space;
    Layout load, store;
    Value src;
    // A cat along a later dim that ncc-form-kernels nested in this one
    // (nestedCatGroup): its rows are assembled in SBUF, not loaded.
    aten::CatOp inner;
    // A float splat: filled in SBUF, not loaded.
    std::optional<double> fill;
  };
  std::vector<Piece> pieces;
  int64_t position = 0;
  for (Value in : cat.getTensors()) {
    auto t = llvm::cast<RankedTensorType>(in.getType());
    aten::StridedView slab = outView;
    slab.shape.assign(t.getShape().begin(), t.getShape().end());
    slab.offset = position * outView.strides[size_t(dim)];
    position += t.getDimSize(dim);
    aten::StridedView source = viewOf.count(in) ? viewOf[in] : aten::contiguousView(t.getShape());
    auto inner = in.getDefiningOp<aten::CatOp>();
    const int64_t innerDim = inner ? catDimOf(inner) : t.getRank();
    // The iteration space of this input: its columns are the trailing dims
    // that are one run in both the input and its slab, as long as a row
    // tile's partitions remain (a cat along the height of [N, C, H, W]
    // planes copies rows of H x W, not of W: [8, 256, 14, 14] bf16 padded
    // by a row each side, 660 -> 31.9 us). A nested cat's columns hold
    // whole rows of its dims from its own cat dim on.
    space = Space{};
    if (t.getRank() > 0) {
      ArrayRef<int64_t> shape = t.getShape();
      int64_t first = t.getRank() - 1;
      auto merged = [&](ArrayRef<int64_t> dims, int64_t from) {
        SmallVector<int64_t> m(dims.begin(), dims.begin() + from);
        m.push_back(product(dims.drop_front(size_t(from))));
        return m;
      };
      auto piecesMerge = [&](int64_t from) {
        return !inner || llvm::all_of(inner.getTensors(), [&](Value v) {
          auto vt = llvm::cast<RankedTensorType>(v.getType());
          aten::StridedView view = viewOf.count(v) ? viewOf[v] : aten::contiguousView(vt.getShape());
          return splatPiece(v) || aten::reshapeStrides(view.shape, view.strides, merged(vt.getShape(), from));
        });
      };
      while (first > 0 && (first > innerDim || product(shape.take_front(size_t(first - 1))) >= nc::kNumPartitions) &&
             aten::reshapeStrides(source.shape, source.strides, merged(shape, first - 1)) &&
             aten::reshapeStrides(slab.shape, slab.strides, merged(shape, first - 1)) && piecesMerge(first - 1))
        --first;
      if (first > innerDim) return cat.emitError("internal: a nested cat whose pieces' rows are not one run each");
      space.lead.assign(shape.begin(), shape.begin() + first);
      space.trail.assign(1, product(shape.drop_front(size_t(first))));
    }
    space.rows = product(space.lead);
    space.cols = product(space.trail);
    if (space.rows == 0 || space.cols == 0) continue;
    Piece piece{space, {}, {}, inner ? Value() : hbmOf[in], inner, floats ? splatPiece(in) : std::nullopt};
    if ((!inner && failed(layoutOfView(source, piece.load))) || failed(layoutOfView(slab, piece.store)))
      return failure();
    piece.load.kind = piece.store.kind = Kind::Full;
    pieces.push_back(std::move(piece));
  }
  // Siblings: the same tensor, space and strides, contiguous columns, first
  // elements at most a tile's columns apart.
  const int64_t chunk = maxFree;
  auto siblings = [&](const Piece& a, const Piece& c) {
    return a.src && !a.fill && !c.fill && a.src == c.src && a.space.lead == c.space.lead &&
           a.space.trail == c.space.trail && a.load.rowStrides == c.load.rowStrides &&
           a.load.colStrides == c.load.colStrides && a.load.colStrides.size() == 1 && a.load.colStrides[0] == 1;
  };
  const Type deviceElem = nc::deviceElementType(outType.getElementType());
  for (size_t i = 0; i < pieces.size();) {
    size_t n = 1;
    int64_t lo = pieces[i].load.offset, hi = lo;
    while (i + n < pieces.size() && siblings(pieces[i], pieces[i + n])) {
      int64_t o = pieces[i + n].load.offset;
      if (std::max(hi, o) - std::min(lo, o) > std::min(chunk, pieces[i].space.cols) / 2) break;
      lo = std::min(lo, o);
      hi = std::max(hi, o);
      ++n;
    }
    space = pieces[i].space;
    Type elem = pieces[i].src ? llvm::cast<MemRefType>(pieces[i].src.getType()).getElementType() : deviceElem;
    // One piece, or a group: the group's tiles take `hi - lo` more columns.
    const int64_t extra = hi - lo;
    int64_t cols = std::min(space.cols, chunk - extra);
    // A nested cat's tiles hold whole rows of its dims from its cat dim on.
    int64_t period = 1;
    if (aten::CatOp inner = pieces[i].inner) {
      period = product(llvm::cast<RankedTensorType>(inner.getType()).getShape().drop_front(size_t(catDimOf(inner))));
      cols = cols / period * period;
      if (cols == 0) return cat.emitError("internal: a nested cat's rows exceed a column chunk");
    }
    Layout windows = pieces[i].load;  // the group's union of columns
    windows.offset = lo;
    for (r0 = 0; r0 < space.rows; r0 += nc::kNumPartitions) {
      int64_t p = std::min<int64_t>(nc::kNumPartitions, space.rows - r0);
      for (c0 = 0; c0 < space.cols; c0 += cols) {
        int64_t f = std::min(cols, space.cols - c0);
        ++iteration;
        Value tile = alloc(p, f + extra, elem);
        if (pieces[i].fill) {
          fillConstant(tile, *pieces[i].fill, cat);
        } else if (pieces[i].inner) {
          if (failed(assembleNestedCat(pieces[i].inner, tile, r0, p, c0 / period, f / period)))
            return failure();
          space = pieces[i].space;
        } else {
          emitDma(/*load=*/true, pieces[i].src, tile, n > 1 ? windows : pieces[i].load, r0, p, c0, f + extra);
        }
        for (size_t k = i; k < i + n; ++k)
          emitDma(/*load=*/false, outHbm.front(), tileColumns(*b, loc, tile, pieces[k].load.offset - lo, f),
                  pieces[k].store, r0, p, c0, f);
      }
    }
    i += n;
  }
  (void)body;
  return success();
}

// Rows r0 .. r0 + p of a cat nested in a copy kernel's cat, `count` of its
// rows of dims e.. (e its cat dim) from row `first` on, assembled in `tile`:
// each piece loaded in one run per partition and copied into its column
// range of each row (placeInRows), or filled. The space's lead dims are the
// tile's rows; it is left set to the last piece's.
LogicalResult KernelLowering::assembleNestedCat(aten::CatOp inner, Value tile, int64_t r0, int64_t p, int64_t first,
                                                int64_t count) {
  auto rt = llvm::cast<RankedTensorType>(inner.getType());
  const int64_t e = catDimOf(inner);
  const int64_t innerSize = product(rt.getShape().drop_front(size_t(e + 1)));
  const int64_t width = rt.getShape()[size_t(e)] * innerSize;
  const SmallVector<int64_t> lead(space.lead);
  std::optional<double> fill;
  bool oneFill = true;
  for (Value piece : inner.getTensors())
    if (auto v = splatPiece(piece); v && llvm::cast<RankedTensorType>(piece.getType()).getNumElements() > 0) {
      if (fill && llvm::bit_cast<uint64_t>(*fill) != llvm::bit_cast<uint64_t>(*v)) oneFill = false;
      fill = v;
    }
  if (fill && oneFill) fillConstant(tile, *fill, inner);
  Type elem = llvm::cast<MemRefType>(tile.getType()).getElementType();
  int64_t start = 0;
  for (Value piece : inner.getTensors()) {
    auto t = llvm::cast<RankedTensorType>(piece.getType());
    const int64_t w = t.getShape()[size_t(e)] * innerSize;
    if (w == 0 || t.getNumElements() == 0) {
      start += w;
      continue;
    }
    if (std::optional<double> v = splatPiece(piece)) {
      if (!oneFill) placeInRows(tile, Value(), v, count, width, start, w, inner);
    } else {
      space = Space{};
      space.lead = lead;
      space.rows = product(lead);
      space.cols = t.getNumElements() / space.rows;
      space.trail = {space.cols};
      Layout l;
      aten::StridedView view = viewOf.count(piece) ? viewOf[piece] : aten::contiguousView(t.getShape());
      if (failed(layoutOfView(view, l))) return failure();
      l.kind = Kind::Full;
      Value staging = alloc(p, count * w, elem);
      emitDma(/*load=*/true, hbmOf[piece], staging, l, r0, p, first * w, count * w);
      placeInRows(tile, staging, std::nullopt, count, width, start, w, inner);
    }
    start += w;
  }
  return success();
}

// A piece `w` columns wide written into columns [start, start + w) of each
// of the g rows of `width` a partition of `out` holds: copied from
// `staging` (its g rows of w from column `from`, `stride` apart; 0: w) or
// filled with `fill`. Column by column along a step where the piece is
// narrower than g (w instructions, each over its column of all g rows),
// else row by row (g instructions): a stack of two values along a new last
// dim, flattened, interleaves them one column each.
void KernelLowering::placeInRows(Value out, Value staging, std::optional<double> fill, int64_t g, int64_t width,
                                 int64_t start, int64_t w, Operation* source, int64_t from, int64_t stride) {
  if (stride == 0) stride = w;
  auto place = [&](Value to, Value in) {
    if (fill) fillConstant(to, *fill, source);
    else copyTile(to, in, source);
  };
  if (w < g) {
    for (int64_t k = 0; k < w; ++k)
      place(steppedColumns(*b, loc, out, start + k, g, width),
            fill ? Value() : steppedColumns(*b, loc, staging, from + k, g, stride));
  } else {
    for (int64_t j = 0; j < g; ++j)
      place(tileColumns(*b, loc, out, j * width + start, w),
            fill ? Value() : tileColumns(*b, loc, staging, from + j * stride, w));
  }
}

// A cat along the last dim of rows shorter than kShortRowBytes (padding a
// feature map by a column each side: rows of 58) stores a run per row
// however it is assembled. With g consecutive rows on each partition, the
// output's rows are one run per partition: each piece whose rows are
// consecutive in HBM is loaded g rows at a time, one run per partition, into
// a staging tile and copied row by row into its column ranges; a splat
// piece is written by iota. g is the smallest divisor of the rows that makes
// the output's runs kPackedRunBytes, keeping kMinShortRowTiles row tiles
// (or the largest that fits).
int64_t KernelLowering::rowCatFactor(ArrayRef<Value> pieces, RankedTensorType rt) {
  const int64_t width = rt.getShape().back(), rows = rt.getNumElements() / std::max<int64_t>(width, 1);
  const int64_t bytes = std::max<int64_t>(1, rt.getElementTypeBitWidth() / 8);
  if (width == 0 || rows == 0 || width * bytes >= kShortRowBytes) return 1;
  // Every loaded piece must hold its rows one after another, so that g of
  // them are one run.
  for (Value piece : pieces) {
    auto t = llvm::cast<RankedTensorType>(piece.getType());
    if (t.getShape().back() == 0 || splatPiece(piece)) continue;
    aten::StridedView view = viewOf.count(piece) ? viewOf[piece] : aten::contiguousView(t.getShape());
    if (!aten::reshapeStrides(view.shape, view.strides, {rows * t.getShape().back()})) return 1;
  }
  // The rows as one leading dim, as shortRowFactor divides it.
  space = Space{};
  space.lead = {rows};
  space.trail = {width};
  space.rows = rows;
  space.cols = width;
  return shortRowFactor(0, bytes, kPackedRunBytes);
}

LogicalResult KernelLowering::lowerRowCat(ArrayRef<Value> pieces, RankedTensorType rt, Operation* cat, int64_t g,
                                          ArrayRef<Value> outHbm) {
  Type elem = nc::deviceElementType(rt.getElementType());
  const int64_t width = rt.getShape().back(), rows = rt.getNumElements() / width, groups = rows / g;
  // Each value seen as [rows / g, g x its width]: one row of the space per
  // partition, its columns g consecutive rows.
  auto layoutOf = [&](const aten::StridedView& view, int64_t w, Layout& l) {
    space = Space{};
    space.lead = {groups};
    space.trail = {g * w};
    space.rows = groups;
    space.cols = g * w;
    aten::StridedView packed = view;
    auto strides = aten::reshapeStrides(view.shape, view.strides, {groups, g * w});
    if (!strides) return failure();
    packed.shape = {groups, g * w};
    packed.strides = *strides;
    if (failed(layoutOfView(packed, l))) return failure();
    l.kind = Kind::Full;
    return success();
  };
  // One fill of the whole tile when every splat piece has the same value.
  std::optional<double> fill;
  bool oneFill = true;
  for (Value piece : pieces)
    if (auto v = splatPiece(piece); v && llvm::cast<RankedTensorType>(piece.getType()).getShape().back() > 0) {
      if (fill && llvm::bit_cast<uint64_t>(*fill) != llvm::bit_cast<uint64_t>(*v)) oneFill = false;
      fill = v;
    }
  for (r0 = 0; r0 < groups; r0 += nc::kNumPartitions) {
    const int64_t p = std::min<int64_t>(nc::kNumPartitions, groups - r0);
    ++iteration;
    Value out = alloc(p, g * width, elem);
    if (fill && oneFill) fillConstant(out, *fill, cat);
    int64_t start = 0;
    // A piece given more than once (an expand) is loaded once per row tile.
    llvm::SmallDenseMap<Value, Value, 4> staged;
    for (Value piece : pieces) {
      auto t = llvm::cast<RankedTensorType>(piece.getType());
      const int64_t w = t.getShape().back();
      if (w == 0) continue;
      if (std::optional<double> v = splatPiece(piece)) {
        if (!oneFill) placeInRows(out, Value(), v, g, width, start, w, cat);
      } else {
        Value& staging = staged[piece];
        if (!staging) {
          Layout l;
          if (failed(layoutOf(viewOf.count(piece) ? viewOf[piece] : aten::contiguousView(t.getShape()), w, l)))
            return cat->emitError("internal: a cat piece whose rows are not consecutive");
          staging = alloc(p, g * w, elem);
          emitDma(/*load=*/true, hbmOf[piece], staging, l, r0, p, 0, g * w);
        }
        placeInRows(out, staging, std::nullopt, g, width, start, w, cat);
      }
      start += w;
    }
    Layout store;
    if (failed(layoutOf(aten::contiguousView(rt.getShape()), width, store))) return failure();
    emitDma(/*load=*/false, outHbm.front(), out, store, r0, p, 0, g * width);
  }
  return success();
}

bool KernelLowering::aliasTile(Operation& op) {
  auto alias = sameTileAs.find(op.getNumResults() ? op.getResult(0) : Value());
  if (alias == sameTileAs.end()) return false;
  tiles[alias->first] = tiles.lookup(alias->second);
  layouts[alias->first] = layouts.lookup(alias->second);
  return true;
}

LogicalResult KernelLowering::run(int64_t& instructions, int64_t& dmas) {
  if (kernel.isLowered()) return success();
  fewBytes = movesFewBytes();
  if (kernel->hasAttr(nc::kAttentionAttr)) return runAttention(instructions, dmas);
  if (kernel->hasAttr(nc::kMiddleFrameAttr)) return runMiddleFrame(instructions, dmas);
  {
    Block& old = kernel.getBody().front();
    aten::CatOp cat;
    bool others = false;
    for (Operation& op : old.without_terminator()) {
      if (auto c = llvm::dyn_cast<aten::CatOp>(op)) cat = c;
      else if (!aten::isViewOp(&op)) others = true;
    }
    // A kernel of one cat is a copy kernel; a cat along the last dim inside
    // a kernel of other ops is lowered with them (loads into column ranges).
    // So is one alone along the last dim of floats of one dtype: each row
    // tile is assembled whole from the pieces' column ranges and stored in
    // one run per row, where piece by piece each row took a run per piece
    // (the padding of a [4, 64, 56, 56] bf16 image by a column each side:
    // 247 -> 89.4 us, the constant pieces filled by iota rather than loaded).
    auto yield = llvm::cast<nc::YieldOp>(old.getTerminator());
    auto rowsAssembled = [&] {
      auto rt = llvm::cast<RankedTensorType>(cat.getType());
      int64_t rank = rt.getRank(), dim = int64_t(cat.getDim());
      if (dim < 0) dim += rank;
      return rank > 0 && dim == rank - 1 && llvm::isa<FloatType>(rt.getElementType()) &&
             llvm::all_of(cat.getTensors(), [&](Value v) {
               return llvm::cast<RankedTensorType>(v.getType()).getElementType() == rt.getElementType();
             });
    };
    // The kernel returns the cat, or a reshape of it that keeps the order of
    // its elements (a stack along a new dim, flattened): the output buffer
    // holds the cat's elements in order either way.
    Value returned = yield.getValues().size() == 1 && !others ? yield.getValues()[0] : Value();
    returnedReshapes.clear();
    // The value a chain of reshapes (each read once) that ends at `v` reshapes.
    auto throughReshapes = [&](Value v, Value stop, llvm::DenseSet<Operation*>& chain) {
      while (v && v != stop) {
        Operation* def = v.getDefiningOp();
        if (!def || !def->hasOneUse() ||
            !llvm::isa<aten::UnsqueezeOp, aten::SqueezeDimOp, aten::ViewShapeOp, aten::UnsafeViewOp, aten::ReshapeOp,
                       aten::ReshapeAliasOp, aten::CloneOp>(def))
          break;
        chain.insert(def);
        v = def->getOperand(0);
      }
      return v;
    };
    if (returned) returned = throughReshapes(returned, cat ? cat.getResult() : Value(), returnedReshapes);
    const bool alone = cat && !others && returned == cat.getResult();
    // A copy kernel that broadcasts (nearest upsampling, repeat) widens
    // rows in SBUF (LowerCopies.cpp).
    aten::ExpandOp expand = !cat && returned ? returned.getDefiningOp<aten::ExpandOp>() : aten::ExpandOp();
    if (expand && !lowersAsExpandCopy(expand)) expand = aten::ExpandOp();
    // The kernel's ISA body, written by `lower` (given the outputs in HBM).
    auto lowerCopy = [&](llvm::function_ref<LogicalResult(Block*, ArrayRef<Value>)> lower) -> LogicalResult {
      SmallVector<Value> outHbm;
      Block* body = createIsaBody(old, outHbm);
      OpBuilder builder = OpBuilder::atBlockEnd(body);
      b = &builder;
      if (failed(lower(body, outHbm))) {
        body->erase();
        return failure();
      }
      finishBody(old, instructions, dmas);
      return success();
    };
    if (expand) {
      if (failed(foldViews(old, /*allowTileAliases=*/false))) return failure();
      return lowerCopy([&](Block*, ArrayRef<Value> outHbm) { return lowerExpandCopy(expand, outHbm); });
    }
    if (!cat && !expand && returned && returned.getDefiningOp() && aten::isViewOp(returned.getDefiningOp())) {
      if (failed(foldViews(old, /*allowTileAliases=*/false))) return failure();
      PermuteCopyPlan plan;
      if (planPermuteCopy(returned, plan))
        return lowerCopy([&](Block*, ArrayRef<Value> outHbm) { return lowerPermuteCopy(returned, plan, outHbm); });
      viewOf.clear();
      space = Space{};
    }
    if (alone && rowsAssembled()) {
      if (failed(foldViews(old, /*allowTileAliases=*/false))) return failure();
      SmallVector<Value> pieces(cat.getTensors());
      auto rt = llvm::cast<RankedTensorType>(cat.getType());
      if (int64_t g = rowCatFactor(pieces, rt); g > 1)
        return lowerCopy([&](Block*, ArrayRef<Value> outHbm) { return lowerRowCat(pieces, rt, cat, g, outHbm); });
      viewOf.clear();
      space = Space{};
    }
    if (alone && !rowsAssembled()) {
      auto rt = llvm::cast<RankedTensorType>(kernel.getResult(0).getType());
      if (llvm::any_of(cat.getTensors(), [&](Value v) {
            return nc::deviceElementType(llvm::cast<RankedTensorType>(v.getType()).getElementType()) !=
                   nc::deviceElementType(rt.getElementType());
          }))
        return cat.emitError("cat of tensors with different dtypes is not supported yet");
      if (failed(foldViews(old, /*allowTileAliases=*/false))) return failure();
      return lowerCopy([&](Block* body, ArrayRef<Value> outHbm) { return lowerCat(cat, body, outHbm); });
    }
    // A lone sum, mean or amax over middle dims, returned through reshapes
    // that keep its elements' order, reduces rows in SBUF
    // (LowerReductions.cpp).
    Operation* reduction = nullptr;
    int computing = 0;
    for (Operation& op : old.without_terminator())
      if (!aten::isViewOp(&op) && !llvm::isa<arith::ConstantOp>(op)) reduction = &op, ++computing;
    if (!cat && computing == 1 && llvm::isa<aten::SumDimIntListOp, aten::MeanDimOp, aten::AmaxOp>(reduction) &&
        yield.getValues().size() == 1 && reduction->getResult(0).hasOneUse()) {
      llvm::DenseSet<Operation*> chain;
      if (throughReshapes(yield.getValues()[0], reduction->getResult(0), chain) == reduction->getResult(0)) {
        returnedReshapes = std::move(chain);
        if (failed(foldViews(old, /*allowTileAliases=*/false))) return failure();
        MiddleReductionPlan plan;
        if (planMiddleReduction(reduction, plan))
          return lowerCopy([&](Block*, ArrayRef<Value> outHbm) { return lowerMiddleReduction(plan, outHbm); });
        viewOf.clear();
        space = Space{};
      }
    }
    // Any other copy kernel returning reshapes that keep its copied view's
    // element order, where they do not fold into the view (ncc-form-kernels
    // lets it write them, joinCopyKernel): the general lowering copies that
    // view into the output buffer, whose bytes are the same in either shape.
    if (!cat && returned && returned.getDefiningOp() && !returnedReshapes.empty() &&
        !aten::viewOfChain(yield.getValues().front())) {
      yield->setOperand(0, returned);
      SmallVector<Operation*> reshapes(returnedReshapes.begin(), returnedReshapes.end());
      llvm::sort(reshapes, [](Operation* a, Operation* b) { return b->isBeforeInBlock(a); });
      for (Operation* op : reshapes) op->erase();
    }
  }
  // The general lowering folds a returned reshape of a cat itself.
  returnedReshapes.clear();
  Block& oldBody = kernel.getBody().front();
  windowOps.clear();
  windowPieces.clear();
  for (auto cat : oldBody.getOps<aten::CatOp>()) {
    if (!cat->hasAttr(nc::kWindowOperandAttr)) continue;
    if (!windowedMatmul(cat)) return cat.emitError("internal: a window operand's cat that no bmm reads as stacked");
    Operation* reshape = *cat->getUsers().begin();
    windowOps.insert(cat);
    windowOps.insert(reshape);
    windowPieces[reshape->getResult(0)] = SmallVector<Value>(cat.getTensors());
  }
  if (failed(findPrologue(oldBody))) return failure();
  if (prologueOperand) {
    if (failed(computeSpace(/*prologue=*/true))) return failure();
    prologueSpace = space;
    space = Space{};
    if (prologueSpace.rows == 0 || prologueSpace.matmul || prologueSpace.split > 1 || permutedInput)
      return kernel.emitError("internal: a matmul's prologue that is not a kernel of whole rows");
  }
  if (failed(computeSpace())) return failure();
  if (prologueOperand && (prologueSpace.rows != space.rows || space.rowBlock > 0 || space.reduces))
    return kernel.emitError("internal: a matmul's prologue over rows other than the matmul's");
  auto yield = llvm::cast<nc::YieldOp>(oldBody.getTerminator());
  for (Value v : yield.getValues()) yielded.insert(v);

  if (failed(foldViews(oldBody, /*allowTileAliases=*/true))) return failure();
  // A cat that copies a slice of a value the kernel computes takes that
  // value's whole row from its tile (form-kernels joined it only where whole
  // rows fit): one column tile per row.
  // (Over split columns, a matmul's epilogue or packed rows, each column
  // tile holds whole periods already.)
  catReadsComputedRows = false;
  if (space.trail.size() == 1 && !space.matmul)
    for (auto cat : oldBody.getOps<aten::CatOp>())
      for (Value piece : cat.getTensors())
        catReadsComputedRows |= !viewOf.count(piece) && !splatPiece(piece);
  // A value returned through a reshape that reuses its tile is computed in
  // the returned dtype.
  for (Value v : yield.getValues())
    for (auto it = sameTileAs.find(v); it != sameTileAs.end(); it = sameTileAs.find(it->second))
      yielded.insert(it->second);
  // Integer graph inputs stay integers in HBM: embedding indices are read in
  // place by the gather; elementwise ops and reductions load them (through
  // any views) into float32 tiles, the DMA converting each value. The ops
  // that read HBM themselves (matmul operands, cat operands, an embedding
  // table) take only the dtype their tiles hold.
  for (BlockArgument arg : oldBody.getArguments()) {
    Type elem = hbmElementType(arg);
    if (!llvm::isa<IntegerType>(elem) || !llvm::isa<BlockArgument>(kernel.getInputs()[arg.getArgNumber()])) continue;
    SmallVector<Value> reached{arg};
    while (!reached.empty()) {
      Value v = reached.pop_back_val();
      for (OpOperand& use : v.getUses()) {
        Operation* user = use.getOwner();
        if (aten::isViewOp(user)) {
          reached.push_back(user->getResult(0));
          continue;
        }
        bool index = llvm::isa<aten::EmbeddingOp>(user) && use.getOperandNumber() == 1 && v == arg;
        if (llvm::isa<aten::MmOp, aten::BmmOp, aten::AddmmOp, aten::CatOp, aten::EmbeddingOp>(user) && !index)
          return user->emitError("an integer graph input can only be read by elementwise ops and reductions, or "
                                 "as embedding indices; convert it (.float()) before a matmul, cat or embedding "
                                 "table");
      }
    }
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
  // (A matmul reads its two matrix operands itself, slice by slice, and a
  // cat its operands, each into its column range.)
  auto loadedFor = [](OpOperand& use) {
    Operation* u = use.getOwner();
    if (aten::isViewOp(u)) return false;
    if (llvm::isa<aten::MmOp, aten::BmmOp, aten::EmbeddingOp, aten::CatOp>(u)) return false;
    if (llvm::isa<aten::AddmmOp>(u)) return use.getOperandNumber() == 0;  // the bias
    return true;
  };
  for (auto& [v, view] : viewOf)
    if (llvm::any_of(v.getUses(), loadedFor)) hbmValues.push_back(v);
  // DenseMap order is not deterministic; issue loads in program order.
  llvm::sort(hbmValues, [&](Value a, Value b) {
    auto argA = llvm::dyn_cast<BlockArgument>(a), argB = llvm::dyn_cast<BlockArgument>(b);
    if (argA && argB) return argA.getArgNumber() < argB.getArgNumber();
    if (argA || argB) return bool(argA);
    return a.getDefiningOp()->isBeforeInBlock(b.getDefiningOp());
  });
  // The prologue's inputs are laid out against its own space and loaded by
  // it (a value both parts read, in each).
  SmallVector<Value> prologueHbm;
  if (prologueOperand) {
    SmallVector<Value> rest;
    for (Value v : hbmValues) {
      bool inPrologue = false, outside = false;
      for (OpOperand& use : v.getUses())
        if (loadedFor(use)) (prologueOps.contains(use.getOwner()) ? inPrologue : outside) = true;
      if (inPrologue) prologueHbm.push_back(v);
      if (outside || !inPrologue) rest.push_back(v);
    }
    hbmValues = std::move(rest);
    swapPrologueState();
    LogicalResult laidOut = success();
    for (Value v : prologueHbm)
      if (failed(layoutOfInput(v, layouts[v]))) laidOut = failure();
    laidOut = succeeded(laidOut) ? markImmediates(oldBody) : laidOut;
    swapPrologueState();
    if (failed(laidOut)) return failure();
  }
  for (Value v : hbmValues)
    if (failed(layoutOfInput(v, layouts[v]))) return failure();
  if (failed(markImmediates(oldBody))) return failure();
  if (mergeChainedDims(hbmValues) || widenShortRows(hbmValues))
    for (Value v : hbmValues)
      if (failed(layoutOfInput(v, layouts[v]))) return failure();
  if (packShortRows(hbmValues)) {
    for (Value v : hbmValues)
      if (failed(layoutOfInput(v, layouts[v]))) return failure();
  } else {
    interleaveShortRows(hbmValues);
  }
  // Loaded values that differ only in their first element (the window
  // slices of a pooling): a stepped load stages the span all of them need
  // once per row tile (emitDma).
  stagedSiblings.clear();
  windowSiblings.clear();
  for (Value v : hbmValues) {
    const Layout& l = layouts[v];
    if (auto arg = llvm::dyn_cast<BlockArgument>(aten::viewChainRoot(v)); arg && l.kind == Kind::Full) {
      stagedSiblings[siblingKey(arg, l)].push_back(l.offset);
      ArrayRef<int64_t> shape = llvm::cast<RankedTensorType>(v.getType()).getShape();
      windowSiblings[{siblingKey(arg, l), std::vector<int64_t>(shape.begin(), shape.end())}].push_back(l.offset);
    }
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
  // An op after a reduction with a full-width result (x - max) needs the
  // reduced value at every element: form-kernels admitted such a kernel
  // because its row tile fits SBUF (wholeRowBytes there), so its rows stay
  // whole. Other kernels reduce rows too long for the budget chunk by chunk.
  // Softmax normalizers (passes/OnlineSum.h): over chunked rows their
  // subtraction and exp run chunk by chunk against a running maximum.
  onlineSums.clear();
  for (Operation& op : oldBody.without_terminator())
    if (std::optional<OnlineSum> m = matchOnlineSum(&op))
      if (m->rowMax->getBlock() == &oldBody && m->rowSum->getBlock() == &oldBody &&
          !afterReduction.contains(m->rowMax) && afterReduction.contains(m->shifted))
        onlineSums.push_back(*m);
  const bool needsWholeRows = llvm::any_of(afterReduction, [&](Operation* op) {
    if (isOnlinePart(op)) return false;
    if (aten::isViewOp(op) || op->getNumResults() != 1) return false;
    auto t = llvm::dyn_cast<RankedTensorType>(op->getResult(0).getType());
    return t && t.getNumElements() == space.rows * space.cols && space.cols > 1;
  });
  // Form-kernels found the inputs of such a kernel's rows fit SBUF where its
  // whole rows do not: chunked, in passes over resident inputs.
  const bool resident = needsWholeRows && kernel->hasAttr(nc::kResidentRowsAttr) && space.reduces &&
                        space.trail.size() == 1 && space.cols > maxFree && !space.matmul;
  chunked = !catReadsComputedRows && space.reduces && space.trail.size() == 1 && space.cols > maxFree &&
            ((!needsWholeRows && space.cols * 4 * 4 > rowBudget) || resident);
  // A matmul's output tile is one 2 KiB PSUM bank: 512 f32 columns.
  int64_t chunk = columnTile();
  if (space.trail.size() == 2 && !space.reduces && chunk % space.trail[1] != 0)
    return kernel.emitError("internal: split columns of ") << space.trail[1] << " exceed one column tile";
  auto fail = [&]() {
    body->erase();
    return failure();
  };
  // A row tile of the prologue: its inputs loaded and its ops lowered over
  // whole [p x K] rows; the left operand's tile serves every column tile.
  auto lowerPrologue = [&](int64_t p, llvm::DenseMap<Value, Value>& rowTiles) -> LogicalResult {
    swapPrologueState();
    bool wasChunked = chunked;
    int64_t column = c0;
    chunked = false;
    wholeRows = true;
    c0 = 0;
    auto restore = llvm::make_scope_exit([&] {
      swapPrologueState();
      chunked = wasChunked;
      wholeRows = false;
      c0 = column;
    });
    tiles.clear();
    ++iteration;
    for (Value v : prologueHbm) tileOf(v);
    for (Operation& op : oldBody.without_terminator()) {
      if (!prologueOps.contains(&op) || aliasTile(op) || llvm::isa<arith::ConstantOp>(op) || aten::isViewOp(&op) ||
          windowOps.contains(&op))
        continue;
      if (failed(lowerOp(&op, p, space.cols))) return failure();
    }
    // An operand that is the same along each row (a [M, 1] value expanded
    // over K) is held as one column per row; the stationary slices are
    // transposed from every column, so it is broadcast over K first.
    Value tile = tiles.lookup(prologueOperand);
    if (tile && layouts.lookup(prologueOperand).kind == Kind::Row)
      tile = broadcastRow(tile, 0.0, p, space.cols, b->getF32Type(), prologueOperand.getDefiningOp());
    if (!tile) return kernel.emitError("internal: a matmul's prologue left its operand without a tile");
    // A widening cast keeps its input's tile (bf16 values cast to f32 for an
    // f32 matmul): the TensorEngine takes the operand in its own dtype.
    Type want = nc::deviceElementType(llvm::cast<RankedTensorType>(prologueOperand.getType()).getElementType());
    if (llvm::cast<MemRefType>(tile.getType()).getElementType() != want) {
      Value converted = alloc(p, space.cols, want);
      copyTile(converted, tile, prologueOperand.getDefiningOp());
      tile = converted;
    }
    rowTiles[prologueOperand] = tile;
    return success();
  };
  // With chunked rows, only full-width values computed before the reductions
  // are stored chunk by chunk; the rest once the row is done.
  auto storedPerChunk = [&](Value v) {
    Operation* def = v.getDefiningOp();
    return def && !afterReduction.contains(def) && aten::reducedDims(def).empty() &&
           layouts[v].kind == Kind::Full;
  };
  if (resident) planResidentRows(oldBody);
  // Kept moving slices, bytes per partition: halved, and at last none, each
  // time they make the kernel's tiles too large for SBUF (below).
  int64_t movingBudget = 128 * 1024;
relower:
  // Column blocks (see movingCache): one block of all columns unless the
  // kernel's moving operands are worth keeping across row tiles.
  int64_t blockCols = space.cols;
  bool movingInRows = false;
  if (movingBudget > 0 && space.matmul && !space.reduces && !chunked && space.rows > nc::kNumPartitions) {
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
      // (An operand read in rows is transposed on the TensorEngine by the
      // first row tile, which then has work for each panel it waits for.)
      if (auto view = viewOf.find(moving); view != viewOf.end() && view->second.strides.size() >= 2 &&
                                           view->second.strides[view->second.strides.size() - 2] == 1 &&
                                           view->second.strides.back() != 1)
        movingInRows = true;
    }
    if (bytesPerColumnTile > 0) {
      reuseMoving = true;
      blockCols = std::max<int64_t>(1, movingBudget / bytesPerColumnTile) * chunk;
    }
  }
  // Blocks of as even a width as their number allows (22 column tiles in
  // blocks of at most 3: six of 3 and two of 2, not seven of 3 and one of
  // 1): a narrow last block's row tiles do little TensorEngine work for the
  // stationary slices each loads again, so its DMA, not the TensorEngine,
  // would set its pace.
  int64_t columnTiles = (space.cols + chunk - 1) / chunk;
  int64_t maxBlockTiles = (blockCols + chunk - 1) / chunk;
  int64_t numBlocks = (columnTiles + maxBlockTiles - 1) / maxBlockTiles;
  SmallVector<int64_t> blockStarts;
  for (int64_t b = 0, tile = 0; b < numBlocks; ++b) {
    blockStarts.push_back(tile * chunk);
    tile += columnTiles / numBlocks + (b < columnTiles % numBlocks ? 1 : 0);
  }
  blockStarts.push_back(space.cols);
  blockColumnTiles = (columnTiles + numBlocks - 1) / numBlocks;
  // One output tile of row tile r0 (p rows) and column tile c0.
  auto lowerOutputTile = [&](int64_t p, llvm::DenseMap<Value, Value>& perRowTiles,
                             bool newIteration = true) -> LogicalResult {
    int64_t f = std::min(chunk, space.cols - c0);
    tiles.clear();
    for (auto [v, tile] : perRowTiles) tiles[v] = tile;
    // (Row tiles that share a gathered load share its iteration: the
    // memory plan's depth counts iterations, and so DMAs in flight.)
    if (newIteration && r0 >= gatheredIterationEnd) ++iteration;
    accumulating = chunked;
    // Issue every input load up front so the DMA queues start while the
    // engines are still busy with the previous row tile.
    for (Value v : hbmValues) {
      tileOf(v);
      if (!chunked && layouts[v].kind == Kind::Row) perRowTiles[v] = tiles[v];
    }
    for (Operation& op : oldBody.without_terminator()) {
      if ((chunked && afterReduction.contains(&op)) || prologueOps.contains(&op)) continue;
      if (aliasTile(op) || llvm::isa<arith::ConstantOp>(op) || aten::isViewOp(&op) || windowOps.contains(&op)) continue;
      if (op.getNumResults() == 1 && perRowTiles.count(op.getResult(0))) continue;
      if (failed(lowerOp(&op, p, f))) return failure();
      if (!chunked && op.getNumResults() == 1 && layouts[op.getResult(0)].kind == Kind::Row)
        if (auto t = tiles.find(op.getResult(0)); t != tiles.end()) perRowTiles[t->first] = t->second;
    }
    // (After the chunk's ops: its row maxima are accumulated by then.)
    for (const OnlineSum& m : onlineSums)
      if (summedOnline(m.shifted) && failed(lowerOnlineStep(m, p, f))) return failure();
    for (auto [v, hbm] : llvm::zip(yield.getValues(), outHbm))
      if ((!chunked || storedPerChunk(v)) && failed(storeOutput(v, hbm, p, f))) return failure();
    return success();
  };
  auto rowTileRows = [&](int64_t row) {
    int64_t p = std::min<int64_t>(nc::kNumPartitions, space.rows - row);
    return space.rowBlock > 0 ? std::min(p, space.rowBlock - row % space.rowBlock) : p;
  };
  // The first row tile of a block (or of a bmm's batch in it) reads the
  // block's moving slices as they arrive: its TensorEngine work on each
  // panel is shorter than the panel's load (GPT-2-medium's MLP down
  // projection: 17 us of matmuls against 36 us for its 8 MiB weight). So
  // the first two row tiles run column tile by column tile, the second on
  // each column tile's panels while the next column tile's panels load.
  const bool pairFirstRows = reuseMoving && !movingInRows && !chunked && space.matmul && !space.reduces;
  // A spread kernel's constants for combining partials depend on nothing:
  // written first, they are ready before the first load arrives rather
  // than on the reductions' critical path.
  if (space.split > 1 && space.reduces) {
    Type f32 = builder.getF32Type();
    sameRowMask = spreadMask(space.rows);
    broadcastRow(Value(), 1.0, space.rows, space.rows, f32, nullptr);
    for (Operation* op : reductions)
      broadcastRow(Value(), llvm::isa<aten::AmaxOp>(op) ? -std::numeric_limits<double>::infinity() : 0.0,
                   space.rows, space.rows, f32, nullptr);
  }
  for (size_t b = 0; b + 1 < blockStarts.size(); ++b) {
    int64_t block = blockStarts[b], blockEnd = blockStarts[b + 1];
    movingCache.clear();
    for (r0 = 0; r0 < space.rows;) {
      int64_t p = rowTileRows(r0);
      if (int64_t second = r0 + p;
          pairFirstRows && blockEnd - block > chunk && (space.rowBlock > 0 ? r0 % space.rowBlock == 0 : r0 == 0) &&
          second < space.rows && (space.rowBlock == 0 || second % space.rowBlock != 0)) {
        std::array<RowTileState, 2> rows;
        rows[0].row = r0;
        rows[0].p = p;
        rows[1].row = second;
        rows[1].p = rowTileRows(second);
        // With a prologue, the two output tiles of a column tile share an
        // iteration. The memory plan buffers tiles over iterations
        // (PlanMemory.cpp); the row tile after the pair starts with its
        // prologue, whose input tiles (unlike matmul operand panels, which
        // rotate among themselves) could otherwise share bytes with the
        // pair's first output tiles and wait for their stores while the
        // TensorEngine waits for the prologue (GPT-2-medium's layer norm
        // and MLP up projection: 153 us, against 134 us so and 147 us
        // unpaired). Without a prologue, counting each output tile gave
        // the 4096^3 matmul 2115 us against 2093 us, SwiGLU 8438 against
        // 8500 us.
        for (c0 = block; c0 < blockEnd; c0 += chunk)
          for (RowTileState& row : rows) {
            r0 = row.row;
            swapRowTileState(row);
            auto swapBack = llvm::make_scope_exit([&] { swapRowTileState(row); });
            if (c0 == block) {
              accumulators.clear();
              if (prologueOperand && failed(lowerPrologue(row.p, row.perRowTiles))) return fail();
            }
            bool newIteration = !prologueOperand || &row == &rows[0];
            if (failed(lowerOutputTile(row.p, row.perRowTiles, newIteration)))
              return fail();
          }
        r0 = rows[1].row + rows[1].p;
        continue;
      }
      accumulators.clear();
      if (resident) {
        if (failed(lowerResidentRows(oldBody, hbmValues, yield, outHbm, reductions, chunk, p))) return fail();
        r0 += p;
        continue;
      }
      // Per-row values of this row tile's first column tile (loads of
      // inputs broadcast along the row, a matmul with one column, and what
      // is computed from such values alone): the later column tiles read
      // their tiles instead of loading or computing them again. Without
      // chunking, a row tile with several column tiles has no reduction, so
      // every per-row value depends on the row alone.
      if (space.interleave > 1) {
        // A group of interleaved row tiles (interleaveShortRows).
        groupStart = r0;
        rowStep = space.interleave;
        groupTiles.clear();
        const int64_t parts = std::min<int64_t>(nc::kNumPartitions, (space.rows - groupStart) / rowStep);
        // The group's row tiles share an iteration: the memory plan holds
        // tiles through the iterations after theirs, so that as many groups
        // as row tiles stay in flight.
        for (groupRow = 0; groupRow < rowStep; ++groupRow) {
          r0 = groupStart + groupRow;
          rowTileAllocs.clear();
          llvm::DenseMap<Value, Value> perRowTiles;
          for (c0 = block; c0 < blockEnd; c0 += chunk)
            if (failed(lowerOutputTile(parts, perRowTiles, /*newIteration=*/groupRow == 0))) return fail();
        }
        rowTileAllocs.clear();
        r0 = groupStart + parts * rowStep;
        rowStep = 1;
        groupRow = 0;
        continue;
      }
      llvm::DenseMap<Value, Value> perRowTiles;
      if (prologueOperand && failed(lowerPrologue(p, perRowTiles))) return fail();
      for (c0 = block; c0 < blockEnd; c0 += chunk)
        if (failed(lowerOutputTile(p, perRowTiles))) return fail();
      if (!chunked) {
        r0 += p;
        continue;
      }
      c0 = 0;
      accumulating = false;
      for (Operation* op : reductions) finalizeReduction(op, p);
      for (Operation& op : oldBody.without_terminator()) {
        if (!afterReduction.contains(&op) || aliasTile(op) || llvm::isa<arith::ConstantOp>(op) ||
            aten::isViewOp(&op) || windowOps.contains(&op))
          continue;
        if (const OnlineSum* m = summedOnline(&op)) {
          if (&op == m->rowSum) finalizeOnlineSum(*m, p);
          continue;
        }
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
  for (auto& [key, pending] : pendingTransposed) flushTransposed(pending);  // (none: the last rows flush)
  pendingTransposed.clear();
  // A reduction over rows longer than one column tile whose whole-row
  // tiles overflow SBUF all the same (a long elementwise chain before the
  // reduction: a digamma's 70 ops over 10,000 columns) is lowered again in
  // column chunks, each reducing into a per-row accumulator; chunks half as
  // wide while their tiles still overflow (down to 256 columns).
  const bool mayChunk = space.reduces && space.trail.size() == 1 && space.cols > maxFree && !space.matmul &&
                        (!needsWholeRows || resident) && prologueOps.empty() && (!chunked || chunk > 256);
  // Likewise an elementwise kernel whose column tiles overflow (the same
  // digamma over rows of 8192 in column tiles of 4096 needed 229 KB per
  // partition): column tiles half as wide, down to 256 columns.
  const bool mayNarrow = !space.reduces && !space.matmul && prologueOps.empty() && chunk > 256 &&
                         space.interleave == 1 &&
                         (space.trail.size() == 1 || (space.pack > 1 && chunk / 2 >= space.trail[1]));
  const bool overflows =
      (mayChunk || mayNarrow || reuseMoving || streamedAhead) && sbufPeakBytes(*body) > rowBudget * 3 / 2;
  const bool chunkInstead = mayChunk && overflows;
  if (overflows) {
    if (chunkInstead) {
      if (chunked) chunkColumns = chunk / 2;
      chunked = true;
      chunk = columnTile();
    } else if (mayNarrow) {
      chunkColumns = chunk / 2;
      chunk = columnTile();
    }
    body->erase();
    outHbm.clear();
    body = createIsaBody(oldBody, outHbm);
    builder.setInsertionPointToEnd(body);
    tiles.clear();
    repeatedLoads.clear();
    prologueRepeatedLoads.clear();
    repeatedLoadBytes = 0;
    invariantLoadBytes = 0;
    rowTileLoads.clear();
    rowTileLoadsRow = -1;
    constantTiles.clear();  // (written in the body just erased)
    sameRowMask = Value();
    stationaryCache.clear();
    stationaryRow = -1;
    movingCache.clear();
    accumulators.clear();
    numInst = numDma = 0;
    // A streamed operand's deep prefetch goes first (LowerMatmul.cpp).
    if (streamedAhead) streamAhead = false;
    else if (!chunkInstead) movingBudget = blockCols > chunk ? movingBudget * 3 / 4 : 0;
    streamedAhead = false;
    reuseMoving = false;
    goto relower;
  }
  finishBody(oldBody, instructions, dmas);
  return success();
}

}  // namespace lowering

namespace {

using lowering::KernelLowering;
using lowering::foldIntoActivation;
using lowering::foldActivationSum;
using lowering::fuseSquareSum;

}  // namespace

static bool wholeNumber(double x) { return std::isfinite(x) && x == std::trunc(x); }

bool lowering::isWholeValued(Value v, const llvm::DenseSet<Value>& wholeResults,
                             llvm::DenseMap<Value, bool>& memo) {
  if (llvm::isa<IntegerType>(llvm::cast<RankedTensorType>(v.getType()).getElementType())) return true;
  if (auto it = memo.find(v); it != memo.end()) return it->second;
  memo[v] = false;  // cycles cannot occur in SSA; this also bounds the work
  bool whole = false;
  auto all = [&](ValueRange vs) {
    return llvm::all_of(vs, [&](Value x) { return isWholeValued(x, wholeResults, memo); });
  };
  if (auto arg = llvm::dyn_cast<BlockArgument>(v)) {
    if (auto k = llvm::dyn_cast<nc::KernelOp>(arg.getOwner()->getParentOp()))
      if (arg.getArgNumber() < k.getInputs().size()) {
        // Another kernel's result, or a constant or graph input outside.
        Value in = k.getInputs()[arg.getArgNumber()];
        whole = wholeResults.contains(in) || isWholeValued(in, wholeResults, memo);
      }
  } else {
    Operation* op = v.getDefiningOp();
    if (auto c = llvm::dyn_cast<arith::ConstantOp>(op)) {
      if (auto d = llvm::dyn_cast<DenseFPElementsAttr>(c.getValue()))
        whole = d.isSplat() ? wholeNumber(d.getSplatValue<APFloat>().convertToDouble())
                            : d.getNumElements() <= (1 << 20) &&
                                  llvm::all_of(d.getValues<APFloat>(),
                                               [](const APFloat& x) { return wholeNumber(x.convertToDouble()); });
    } else if (llvm::isa<aten::FloorOp, aten::CeilOp, aten::TruncOp, aten::RoundOp>(op)) {
      whole = true;
    } else if (aten::isViewOp(op) || llvm::isa<aten::CloneOp, aten::ToCopyOp, aten::NegOp, aten::AbsOp,
                                               aten::ReluOp, aten::SumDimIntListOp, aten::AmaxOp>(op)) {
      whole = all(op->getOperand(0));
    } else if (llvm::isa<aten::MulTensorOp, aten::CatOp, aten::MaximumOp, aten::MinimumOp, aten::MmOp,
                         aten::BmmOp>(op)) {
      // A rounded product or sum of whole numbers is whole (every float
      // beyond the mantissa's reach is).
      whole = all(op->getOperands());
    } else if (auto o = llvm::dyn_cast<aten::EmbeddingOp>(op)) {
      whole = all(o.getWeight());
    } else if (auto o = llvm::dyn_cast<aten::AddTensorOp>(op)) {
      whole = wholeNumber(o.getAlpha().convertToDouble()) && all(op->getOperands());
    } else if (auto o = llvm::dyn_cast<aten::SubTensorOp>(op)) {
      whole = wholeNumber(o.getAlpha().convertToDouble()) && all(op->getOperands());
    } else if (auto o = llvm::dyn_cast<aten::MulScalarOp>(op)) {
      whole = wholeNumber(o.getOther().convertToDouble()) && all(o.getSelf());
    } else if (auto o = llvm::dyn_cast<aten::AddScalarOp>(op)) {
      whole = wholeNumber(o.getOther().convertToDouble() * o.getAlpha().convertToDouble()) && all(o.getSelf());
    } else if (auto o = llvm::dyn_cast<aten::SubScalarOp>(op)) {
      whole = wholeNumber(o.getOther().convertToDouble() * o.getAlpha().convertToDouble()) && all(o.getSelf());
    } else if (auto o = llvm::dyn_cast<aten::RsubScalarOp>(op)) {
      whole = wholeNumber(o.getOther().convertToDouble()) && wholeNumber(o.getAlpha().convertToDouble()) &&
              all(o.getSelf());
    } else if (auto o = llvm::dyn_cast<aten::PowTensorScalarOp>(op)) {
      double e = o.getOther().convertToDouble();
      whole = wholeNumber(e) && e >= 0 && all(o.getSelf());
    } else if (auto o = llvm::dyn_cast<aten::WhereSelfOp>(op)) {
      whole = all(ValueRange{o.getSelf(), o.getOther()});
    } else if (auto o = llvm::dyn_cast<aten::MaskedFillScalarOp>(op)) {
      whole = wholeNumber(o.getValue().convertToDouble()) && all(o.getSelf());
    }
  }
  return memo[v] = whole;
}

namespace {

struct LowerToIsaPass : impl::LowerToIsaBase<LowerToIsaPass> {
  using LowerToIsaBase::LowerToIsaBase;
  void runOnOperation() override {
    SmallVector<nc::KernelOp> kernels;
    getOperation().walk([&](nc::KernelOp k) { kernels.push_back(k); });
    // Kernel results that hold whole numbers, found before any body is
    // lowered (a later kernel's cast to an integer type reads them).
    llvm::DenseSet<Value> wholeResults;
    llvm::DenseMap<Value, bool> memo;
    for (nc::KernelOp k : kernels) {
      if (k.isLowered()) continue;
      auto yield = llvm::cast<nc::YieldOp>(k.getBody().front().getTerminator());
      for (auto [i, v] : llvm::enumerate(yield.getValues()))
        if (lowering::isWholeValued(v, wholeResults, memo)) wholeResults.insert(k.getResult(unsigned(i)));
    }
    for (nc::KernelOp k : kernels) {
      KernelLowering lowering(k, maxFreeElements, rowBudgetBytes, &wholeResults, fewBytes);
      int64_t inst = 0, dmas = 0;
      if (failed(lowering.run(inst, dmas))) return signalPassFailure();
      inst -= foldIntoActivation(k.getBody().front());
      inst -= foldActivationSum(k.getBody().front());
      inst -= fuseSquareSum(k.getBody().front());
      numInstructions += inst;
      numDmas += dmas;
    }
  }
};

}  // namespace
}  // namespace neuroncc
