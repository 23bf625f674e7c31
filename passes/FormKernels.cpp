//===- FormKernels.cpp - group ATen ops into device dispatches ------------===//
//
// Algorithm: greedy producer-consumer clustering in program order, in the
// spirit of IREE's dispatch-region formation. Every op has a row space: the
// flattened leading dims L and the length C of the innermost (or reduced)
// axis. An op joins the kernel of one of its producers when the row spaces
// agree (equal L; equal C, or one side is a per-row value with C == 1), when
// joining would not create a cycle between kernels, and when a kernel that
// reduces still keeps a row within the SBUF budget. Otherwise it starts a new
// kernel. Afterwards an elementwise op whose users all sit in one other
// kernel moves there when that saves HBM bytes (sinkIntoConsumers). Before
// grouping, elementwise epilogues of a head split move before its
// permutation so that they may join the matmul's kernel over split columns
// (movePermutationsPastEpilogues, joinsSplitColumns). Known weakness:
// greedy, first-fit over producers; it never splits a kernel to enable a
// better grouping, and it does not duplicate cheap producers into several
// consumers.
//
//===----------------------------------------------------------------------===//

#include <array>
#include <functional>
#include <map>
#include <optional>

#include "device_model.h"
#include "passes/Passes.h"
#include "passes/AttentionPattern.h"
#include "passes/OnlineSum.h"
#include "passes/WindowOperand.h"
#include "passes/PermutePlan.h"
#include "passes/ReductionCost.h"
#include "dialects/aten/TypeRules.h"
#include "dialects/aten/Views.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace neuroncc {
#define GEN_PASS_DEF_FORMKERNELS
#include "passes/Passes.h.inc"
}  // namespace neuroncc

using namespace mlir;

namespace neuroncc {
namespace {

struct RowSpace {
  SmallVector<int64_t> rows;  // leading dims
  int64_t cols = 1;
  bool reduces = false;
};

bool isMatmul(Operation* op) { return llvm::isa<aten::MmOp, aten::BmmOp, aten::AddmmOp>(op); }

bool isReduction(Operation* op) { return !aten::reducedDims(op).empty(); }

// One element, or one row of `cols` (every other dim 1): what broadcasts
// the same way against [rows, cols] and against split columns [.., h, d].
bool isScalarOrColumnsRow(Value v, int64_t cols) {
  auto t = llvm::cast<RankedTensorType>(v.getType());
  return t.getNumElements() == 1 || (t.getRank() > 0 && t.getShape().back() == cols && t.getNumElements() == cols);
}

// Output columns of one matmul tile (a PSUM bank of f32): an op over split
// columns needs its innermost dim within one.
constexpr int64_t kMatmulTileColumns = 512;
// LowerToIsa's budget of kept moving slices per partition: a matmul whose
// moving slices take more runs its column tiles in several blocks.
constexpr int64_t kMovingBlockBytes = 128 * 1024;

// Bytes per partition of all the moving slices of a [K, N] right operand.
int64_t movingSliceBytes(int64_t K, int64_t N, int64_t elemBytes) {
  return (K + nc::kNumPartitions - 1) / nc::kNumPartitions * kMatmulTileColumns * elemBytes *
         ((N + kMatmulTileColumns - 1) / kMatmulTileColumns);
}
// A cat over split columns copies its pieces head by head: below this
// innermost length the copies' fixed costs outweigh a kernel of its own.
constexpr int64_t kMinSplitCatLength = 32;

// Marks the reshapes sinkSqueezes makes (a per-row value in its rows' shape
// dropping the unit dims), so that only those move.
constexpr const char kSqueezeAttr[] = "nc.squeeze";

// Reduced lengths from which a reduction over few rows is spread across
// partitions (64 chunks of the lowering's 4096-element free size).
constexpr int64_t kLongReduction = int64_t(1) << 18;
// The lowering's column chunk (LowerToIsa's default max-free-elements):
// only rows longer than this are reduced chunk by chunk.
constexpr int64_t kLoweringChunk = 4096;

// A float sum, mean or amax over a run of middle dims ([A, R, C] reduced
// over R) with A and C large enough that, alone in its kernel, the lowering
// reduces rows of A in SBUF (LowerReductions.cpp): 128 rows or more (every
// partition busy), C of 2 or more. Its input is then read
// in runs of R x C instead of one run per element (the permuted rows), and
// no matmul per row of A runs (sumLeadingDimsByMatmul): bf16 [8192, 16, 2]
// took 3257 us as a matmul per row, 17.0 reduced in SBUF; [256, 16, 2048]
// 349.9 and 88.1.
// Blocks of C under this many elements are short: a reduction over them
// with the ops around it in the permuted frame reads rows of so few
// strided elements that kernels of their own do better (keptAlone), and a
// matmul per row of A costs far more than the SBUF rows.
constexpr int64_t kShortBlock = 32;

bool reducesInSbufRows(Operation* op, int64_t* keptColumns = nullptr, int64_t* reduced = nullptr) {
  if (!llvm::isa<aten::SumDimIntListOp, aten::MeanDimOp, aten::AmaxOp>(op)) return false;
  auto in = llvm::cast<RankedTensorType>(op->getOperand(0).getType());
  if (!llvm::isa<FloatType>(in.getElementType()) ||
      !llvm::isa<FloatType>(llvm::cast<RankedTensorType>(op->getResult(0).getType()).getElementType()))
    return false;
  SmallVector<int64_t> dims = aten::reducedDims(op);
  for (size_t i = 1; i < dims.size(); ++i)
    if (dims[i] != dims[0] + int64_t(i)) return false;
  ArrayRef<int64_t> shape = in.getShape();
  const size_t first = size_t(dims.front()), kept = size_t(dims.back() + 1);
  const int64_t A = ShapedType::getNumElements(shape.take_front(first)),
                R = ShapedType::getNumElements(shape.slice(first, dims.size())),
                C = ShapedType::getNumElements(shape.drop_front(kept));
  if (keptColumns) *keptColumns = C;
  if (reduced) *reduced = R;
  return A >= nc::kNumPartitions && C >= 2 && R >= 2;
}

// A cat along the last dim of float tensors of the result's dtype: inside a
// kernel (at -O1/-O2) its operands are loaded from HBM into column ranges of
// one tile; other cats are copy kernels of their own.
bool isInKernelCat(aten::CatOp cat) {
  auto type = llvm::cast<RankedTensorType>(cat.getType());
  int64_t rank = type.getRank(), dim = cat.getDim();
  if (rank == 0 || (dim != rank - 1 && dim != -1) || !aten::isFloatType(type.getElementType())) return false;
  return llvm::all_of(cat.getTensors(), [&](Value v) {
    return llvm::cast<RankedTensorType>(v.getType()).getElementType() == type.getElementType();
  });
}

// A reduction over more than one trailing dim (its kernel's columns are
// then several dims, which a cat's column ranges do not address).
bool reducesSeveralDims(Operation* op) { return aten::reducedDims(op).size() > 1; }

// An elementwise op that the rewrites below may move across views. The
// conversion of a narrow integer graph output (i32 -> ui8, si8, si16) stays
// where it is, the last op before the return: views take the types the
// graph computes in only.
bool movesAcrossViews(Operation* op) {
  if (!aten::isElementwise(op)) return false;
  auto narrow = [](Value v) { return nc::isNarrowInteger(llvm::cast<ShapedType>(v.getType()).getElementType()); };
  return !llvm::any_of(op->getResults(), narrow) && !llvm::any_of(op->getOperands(), narrow);
}

// The source op a rewrite's new op is attributed to (kernel names, profiles).
void copySourceTags(Operation* from, Operation* to) {
  for (StringRef name : {kSourceAttr, kSourceIdAttr})
    if (Attribute a = from->getAttr(name)) to->setAttr(name, a);
}

// A cat that stacks windows of one tensor into a bmm's right operand
// (WindowOperand.h) is read by the bmm's loads, not lowered as a cat.
bool isWindowCat(Operation* op) { return llvm::isa<aten::CatOp>(op) && op->hasAttr(nc::kWindowOperandAttr); }

bool holdsCat(ArrayRef<Operation*> ops) {
  return llvm::any_of(ops, [](Operation* o) { return llvm::isa<aten::CatOp>(o) && !isWindowCat(o); });
}

bool keepdimOf(Operation* op) {
  if (auto o = llvm::dyn_cast<aten::SumDimIntListOp>(op)) return o.getKeepdim();
  if (auto o = llvm::dyn_cast<aten::MeanDimOp>(op)) return o.getKeepdim();
  return llvm::cast<aten::AmaxOp>(op).getKeepdim();
}

// Row space of an op; std::nullopt when it cannot share a kernel (for
// example a reduction over non-trailing dims).
std::optional<RowSpace> rowSpaceOf(Operation* op) {
  RowSpace rs;
  if (auto cat = llvm::dyn_cast<aten::CatOp>(op); cat && !isInKernelCat(cat))
    return std::nullopt;  // a copy kernel of its own
  if (isReduction(op)) {
    auto in = llvm::cast<RankedTensorType>(op->getOperand(0).getType());
    SmallVector<int64_t> dims = aten::reducedDims(op);
    int64_t rank = in.getRank(), k = int64_t(dims.size());
    for (int64_t i = 0; i < k; ++i)
      if (dims[size_t(i)] != rank - k + i) return std::nullopt;
    rs.rows.assign(in.getShape().begin(), in.getShape().end() - k);
    for (int64_t i = rank - k; i < rank; ++i) rs.cols *= in.getDimSize(i);
    rs.reduces = true;
    return rs;
  }
  auto out = llvm::dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!out) return std::nullopt;
  if (out.getRank() > 0) {
    rs.rows.assign(out.getShape().begin(), out.getShape().end() - 1);
    rs.cols = out.getShape().back();
  }
  return rs;
}

struct Group {
  SmallVector<Operation*> ops;
  RowSpace space;
  bool fusible = true;
  llvm::SetVector<int> producers;  // groups this one reads from
  llvm::DenseSet<Value> derived;   // values computed from a reduction in this group
  // Values that are views of this group's inputs (folded into DMA access
  // patterns), with their view of the root input.
  bool hasMatmul = false;
  bool merged = false;  // emptied into a sibling kernel
  bool attention = false;  // one attention (AttentionPattern.h), lowered by LowerAttention.cpp
  // Ops around a reduction over middle dims in the input's own layout
  // (keepsNaturalFrame), lowered by LowerMiddleFrame.cpp.
  bool middleFrame = false;
  // Not empty: ops of this shape share the kernel of a matmul whose output
  // columns they split in two dims ([tokens, heads, head_dim] over the
  // matmul's [tokens, heads * head_dim]; see joinsSplitColumns).
  SmallVector<int64_t> splitShape;
  // Its whole rows fit the SBUF budget only spread over several partitions
  // each (spreadKeepsRows): ops that would keep the lowering from spreading
  // them stay out.
  bool spreadRows = false;
  // Its whole rows do not fit the SBUF budget, but its full-width inputs do
  // (residentRowsFit): lowered in passes over resident inputs.
  bool residentRows = false;
  llvm::SmallPtrSet<Operation*, 16> members;
};

std::string shortName(StringRef op_name) {
  StringRef s = op_name;
  s.consume_front("aten.");
  s = s.ltrim('_');
  return s.take_until([](char c) { return c == '.'; }).str();
}

StringRef sourceName(Operation* op) {
  if (auto s = op->getAttrOfType<StringAttr>(kSourceAttr)) return s.getValue();
  return op->getName().getStringRef();
}

// What a kernel result's `result_sources` entry says about the op that
// computed it: "aten.mul.Tensor", "aten.mean.dim of aten.native_layer_norm"
// for a decomposed composite, then " [node]" for an op from a graph node.
std::string resultSource(Operation* op) {
  std::string s = op->getName().getStringRef().str();
  if (auto src = op->getAttrOfType<StringAttr>(kSourceAttr); src && src.getValue() != s)
    s += " of " + src.getValue().str();
  if (auto named = llvm::dyn_cast<NameLoc>(op->getLoc())) s += " [" + named.getName().str() + "]";
  return s;
}

// A splat constant becomes an instruction immediate, except where the op
// reads the operand as a matrix or a table from memory (matmul operands,
// embedding tables and indices): there it is a constant tensor in HBM.
bool isInlineConstant(OpOperand& use) {
  auto c = use.get().getDefiningOp<arith::ConstantOp>();
  if (!c) return false;
  auto dense = llvm::dyn_cast<DenseElementsAttr>(c.getValue());
  if (!dense || !dense.isSplat()) return false;
  Operation* user = use.getOwner();
  if (llvm::isa<aten::MmOp, aten::BmmOp, aten::EmbeddingOp, aten::CatOp>(user)) return false;
  if (llvm::isa<aten::AddmmOp>(user)) return use.getOperandNumber() == 0;  // the bias
  // A view of a constant is read through an access pattern.
  if (aten::isViewOp(user)) return false;
  return true;
}

struct FormKernelsPass : impl::FormKernelsBase<FormKernelsPass> {
  using FormKernelsBase::FormKernelsBase;

  std::vector<Group> groups;
  llvm::DenseMap<Operation*, int> groupOf;  // computing ops only; views may sit in several groups
  llvm::DenseMap<Operation*, int> position;  // program order of every op
  SmallVector<Operation*> allOps;  // program order
  // View values that a copy kernel writes to HBM (a view of a view that is
  // not itself a view, or a view the graph returns): chains stop there.
  llvm::DenseMap<Value, int> materializedBy;
  llvm::DenseSet<Value> storedLayouts;  // of those, views a kernel stores its own value through
  // transposeMatmulOperands: an op -> the views (a reshape to [M, K], then
  // the transpose) through which its kernel stores its result transposed.
  llvm::DenseMap<Operation*, SmallVector<Operation*, 2>> transposedCopyOf;

  struct Chain {
    Value root;                    // the HBM value the views start from
    SmallVector<Operation*> ops;   // view ops from root to the value, in order
  };

  Chain chainOf(Value v) {
    Chain c;
    while (true) {
      Operation* def = v.getDefiningOp();
      if (!def || !aten::isViewOp(def) || materializedBy.count(v)) break;
      c.ops.push_back(def);
      v = def->getOperand(0);
    }
    c.root = v;
    std::reverse(c.ops.begin(), c.ops.end());
    return c;
  }

  int producerGroup(Value root) {
    if (auto it = materializedBy.find(root); it != materializedBy.end()) return it->second;
    if (Operation* def = root.getDefiningOp(); def && groupOf.count(def)) return groupOf[def];
    return -1;
  }

  // Index of the first view in the chain that cannot be folded (a reshape of
  // a non-contiguous view), or -1. With `keepBatchDims` (an attention's
  // matmul operand), views may regroup leading dims they cannot merge
  // (aten::applyBatchedView): the attention kernel splits its batch index
  // over them (LowerAttention.cpp).
  int firstUnfoldable(const Chain& c, bool keepBatchDims = false) {
    aten::StridedView v = aten::contiguousView(llvm::cast<RankedTensorType>(c.root.getType()).getShape());
    for (auto [i, op] : llvm::enumerate(c.ops)) {
      aten::StridedView next;
      std::string error;
      if (!(keepBatchDims ? aten::applyBatchedView(op, v, next, &error)
                          : aten::applyView(op, v, next, &error)))
        return int(i);
      v = next;
    }
    return -1;
  }

  // Whether an elementwise op should read the float view `c` from a copy
  // kernel rather than through an access pattern: the view reads its root
  // in tiny transposed blocks (PermutePlan.h), each a TensorEngine transpose
  // of a few columns in the op's kernel (x.transpose(-1, -2) + 1 of
  // [4096, 2, 64] bf16: 852.2 us), and a permute copy would rearrange it in
  // SBUF in long runs (11.2 us, and 10.3 for the add over the copy).
  bool copiesTinyTransposedBlocks(const Chain& c) {
    auto rootType = llvm::cast<RankedTensorType>(c.root.getType());
    if (c.ops.empty() || !llvm::isa<FloatType>(rootType.getElementType())) return false;
    std::optional<aten::StridedView> v = aten::viewThrough(c.ops, rootType.getShape());
    if (!v) return false;
    const int64_t bytes = std::max<int64_t>(1, rootType.getElementTypeBitWidth() / 8);
    std::optional<SmallVector<CopyDim>> dims = permuteCopyDims(v->shape, v->strides);
    PermuteSplit split;
    return dims && readsTinyTransposedBlocks(*dims, bytes) && choosePermuteSplit(*dims, bytes, kLoweringChunk, split);
  }

  // A kernel that copies a chain of views into a contiguous HBM tensor.
  int makeCopyGroup(ArrayRef<Operation*> chain) {
    int index = int(groups.size());
    groups.push_back(Group{});
    Group& g = groups.back();
    g.fusible = false;
    g.ops.assign(chain.begin(), chain.end());
    g.members.insert(chain.begin(), chain.end());
    int producer = producerGroup(chain.front()->getOperand(0));
    if (producer >= 0) g.producers.insert(producer);
    materializedBy[chain.back()->getResult(0)] = index;
    return index;
  }

  // A returned chain of reshapes that keep the element order, of a value a
  // copy kernel writes (an expand, a permutation) or a lone reduction over
  // middle dims computes, and nothing else reads: that kernel writes the
  // value's elements in order into the returned tensor (LowerToIsa.cpp),
  // instead of a second copy kernel. True if so.
  bool joinCopyKernel(const Chain& c, Value returned) {
    const int index = producerGroup(c.root);
    if (index < 0) return false;
    Group& grp = groups[size_t(index)];
    auto isView = [](Operation* op) { return aten::isViewOp(op); };
    if (grp.fusible || grp.merged || grp.ops.empty() || grp.ops.back() != c.root.getDefiningOp() ||
        !llvm::all_of(ArrayRef<Operation*>(grp.ops).drop_back(), isView) ||
        !(isView(grp.ops.back()) ||
          llvm::isa<aten::SumDimIntListOp, aten::MeanDimOp, aten::AmaxOp>(grp.ops.back())))
      return false;
    Value link = c.root;
    for (Operation* view : c.ops) {
      if (!llvm::isa<aten::ViewShapeOp, aten::UnsafeViewOp, aten::ReshapeOp, aten::ReshapeAliasOp,
                     aten::UnsqueezeOp, aten::SqueezeDimOp>(view) ||
          !link.hasOneUse())
        return false;
      link = view->getResult(0);
    }
    // (A view is cloned into each kernel that reads through it: another
    // kernel reading the broadcast through these views needs it in HBM.)
    for (const Group& other : groups)
      if (&other != &grp && llvm::any_of(c.ops, [&](Operation* view) { return other.members.contains(view); }))
        return false;
    for (Operation* view : c.ops)
      if (grp.members.insert(view).second) grp.ops.push_back(view);
    materializedBy.erase(c.root);
    materializedBy[returned] = index;
    return true;
  }

  // The operand's chain, after copying out any prefix that cannot be folded
  // (or having the producer store it, below).
  Chain foldableChain(Value v, bool keepBatchDims = false) {
    while (true) {
      Chain c = chainOf(v);
      int bad = firstUnfoldable(c, keepBatchDims);
      if (bad < 0) return c;
      ArrayRef<Operation*> prefix = ArrayRef<Operation*>(c.ops).take_front(size_t(bad));
      if (!storeThroughProducer(c.root, prefix)) makeCopyGroup(prefix);
    }
  }

  // Whether group g writes `v` to HBM as the layout of a view of a value it
  // computes (storeThroughProducer).
  bool storesLayout(Value v, int g) {
    auto it = materializedBy.find(v);
    return storedLayouts.contains(v) && it != materializedBy.end() && it->second == g;
  }

  // A value that is read only through `prefix` (one-to-one views, such as
  // the head merge's transpose before a reshape) is stored by the kernel
  // that computes it straight into the prefix's layout, through the
  // inverse access pattern, instead of being copied by a kernel of its own.
  // True if so.
  bool storeThroughProducer(Value root, ArrayRef<Operation*> prefix) {
    Operation* def = root.getDefiningOp();
    if (prefix.empty() || !def || !groupOf.count(def) || materializedBy.count(root)) return false;
    int g = groupOf[def];
    Group& grp = groups[size_t(g)];
    if (grp.merged || !(grp.fusible || grp.attention)) return false;
    // Nothing else reads the value or the links between.
    Value link = root;
    for (Operation* view : prefix) {
      if (!link.hasOneUse() || *link.getUsers().begin() != view) return false;
      link = view->getResult(0);
    }
    aten::StridedView inverse;
    if (!aten::invertViewChain(prefix, inverse, grp.attention)) return false;
    for (Operation* view : prefix)
      if (grp.members.insert(view).second) grp.ops.push_back(view);
    llvm::sort(grp.ops, [&](Operation* x, Operation* y) { return position.lookup(x) < position.lookup(y); });
    materializedBy[link] = g;
    storedLayouts.insert(link);
    return true;
  }

  // A step-1 slice along the last dim of a value group g computes over its
  // rows of `cols` elements (the running sums of a cumsum's scan, shifted
  // into a cat beside their padding): the lowering holds that value's whole
  // row in each row tile (rows of at most one column chunk) and copies the
  // slice's columns from its tile (LowerElementwise.cpp, heldSlice), so the
  // cat reading it need not wait for it in HBM.
  bool heldSliceOf(Value v, int g, aten::CatOp cat) {
    Chain c = chainOf(v);
    if (producerGroup(c.root) != g || c.ops.size() != 1 || !c.root.getDefiningOp()) return false;
    auto slice = llvm::dyn_cast<aten::SliceTensorOp>(c.ops.front());
    auto rt = llvm::cast<RankedTensorType>(cat.getType());
    auto st = llvm::cast<RankedTensorType>(c.root.getType());
    int64_t rank = st.getRank();
    return slice && rank > 0 && rank == rt.getRank() && (slice.getDim() == rank - 1 || slice.getDim() == -1) &&
           slice.getStep() == 1 && st.getElementType() == rt.getElementType() &&
           st.getShape().drop_back() == rt.getShape().drop_back() && st.getShape().back() == rt.getShape().back() &&
           rt.getShape().back() > 1 && !materializedBy.count(c.root) &&
           // (A matmul's kernel holds rows one PSUM bank wide at a time.)
           rt.getShape().back() <= (groups[size_t(g)].hasMatmul ? kMatmulTileColumns : kLoweringChunk);
  }

  // The kernel of a cat that `op` (a copy kernel's cat along dim d) may
  // take in with it, or -1: its one operand that is a cat along a later dim
  // e, read by nothing else, alone in its kernel, all of one float dtype.
  // The lowering assembles that cat's rows of dims e.. in SBUF, in the tile
  // the outer cat stores (LowerToIsa.cpp, lowerCat), so a pad over H and W
  // (two cats) is one copy kernel: each of its pieces must read its dims
  // e.. as one run, and those rows must fit a column chunk.
  int nestedCatGroup(Operation* op) {
    auto cat = llvm::dyn_cast<aten::CatOp>(op);
    if (!cat) return -1;
    auto rt = llvm::cast<RankedTensorType>(cat.getType());
    const int64_t rank = rt.getRank();
    auto normalized = [&](int64_t d) { return d < 0 ? d + rank : d; };
    auto oneFloatType = [&](aten::CatOp c) {
      return llvm::cast<RankedTensorType>(c.getType()).getElementType() == rt.getElementType() &&
             llvm::all_of(c.getTensors(), [&](Value v) {
               return llvm::cast<RankedTensorType>(v.getType()).getElementType() == rt.getElementType();
             });
    };
    if (rank < 2 || !aten::isFloatType(rt.getElementType()) || !oneFloatType(cat)) return -1;
    aten::CatOp inner;
    for (Value v : cat.getTensors()) {
      auto c = v.getDefiningOp<aten::CatOp>();
      if (!c || materializedBy.count(v)) continue;
      if (inner) return -1;
      inner = c;
    }
    if (!inner || !inner->hasOneUse() || isWindowCat(inner) || !oneFloatType(inner) ||
        normalized(inner.getDim()) <= normalized(cat.getDim()) || !groupOf.count(inner))
      return -1;
    const int g = groupOf[inner];
    const Group& grp = groups[size_t(g)];
    if (grp.merged || grp.attention || grp.hasMatmul ||
        llvm::any_of(grp.ops, [&](Operation* o) { return o != inner && !aten::isViewOp(o); }))
      return -1;
    const int64_t e = normalized(inner.getDim());
    ArrayRef<int64_t> shape = rt.getShape();
    if (ShapedType::getNumElements(shape.drop_front(size_t(e))) > kLoweringChunk) return -1;
    for (Value v : inner.getTensors()) {
      Chain c = chainOf(v);
      auto rootShape = llvm::cast<RankedTensorType>(c.root.getType()).getShape();
      std::optional<aten::StridedView> view = aten::viewThrough(c.ops, rootShape);
      if (!view) return -1;
      SmallVector<int64_t> rows(view->shape.begin(), view->shape.begin() + e);
      rows.push_back(ShapedType::getNumElements(ArrayRef<int64_t>(view->shape).drop_front(size_t(e))));
      if (!aten::reshapeStrides(view->shape, view->strides, rows)) return -1;
    }
    return g;
  }

  // True if `to` depends (transitively) on `from`.
  bool reaches(int from, int to) { return reachedFrom(from, {to}); }

  // True if `from` is among `stack` or what they depend on.
  bool reachedFrom(int from, SmallVector<int> stack) {
    llvm::DenseSet<int> seen;
    while (!stack.empty()) {
      int g = stack.pop_back_val();
      if (g == from) return true;
      if (!seen.insert(g).second) continue;
      for (int p : groups[size_t(g)].producers) stack.push_back(p);
    }
    return false;
  }

  // The same rows under another leading shape (a residual add after a
  // reshape of a matmul's result, the bias of nn.Linear on a 3-d input):
  // fine when every value the op reads from outside is a contiguous
  // full-size tensor, a scalar or one row of the columns, since those map
  // onto the kernel's rows by plain row-major order or broadcast alike.
  bool sameRowsReshaped(Operation* op, const RowSpace& s, Group& grp) {
    auto product = [](ArrayRef<int64_t> v) {
      int64_t p = 1;
      for (int64_t x : v) p *= x;
      return p;
    };
    if (s.cols != grp.space.cols || s.reduces || product(s.rows) != product(grp.space.rows)) return false;
    int64_t total = product(s.rows) * s.cols;
    for (Value v : op->getOperands()) {
      Chain c = chainOf(v);
      int g = int(&grp - groups.data());
      if (producerGroup(c.root) == g) continue;  // computed in the kernel: same rows
      auto type = llvm::cast<RankedTensorType>(v.getType());
      if (isScalarOrColumnsRow(v, s.cols)) continue;
      if (type.getNumElements() != total) return false;
      aten::StridedView view = aten::contiguousView(llvm::cast<RankedTensorType>(c.root.getType()).getShape());
      for (Operation* o : c.ops) {
        aten::StridedView next;
        std::string error;
        if (!aten::applyView(o, view, next, &error)) return false;
        view = next;
      }
      if (!aten::isContiguous(view)) return false;
    }
    // The kernel's iteration space may then take either leading shape, so
    // every broadcast operand in the group must broadcast against both: a
    // scalar or a row of `cols` values does; a per-row value or an operand
    // reduced along a leading dim ([2, 1, 2] beside rows [2, 2]) need not.
    // Unless a member's result has the same elements in more dims than op's:
    // the lowering takes the shape with the most dims among equal sizes, so
    // the group's stays (a group norm computed over [N, G, C / G, H, W],
    // its per-row scale and shift beside, then seen as [N, C, H, W] by the
    // activation after it).
    const int64_t opRank = op->getNumResults() == 1
                               ? llvm::cast<RankedTensorType>(op->getResult(0).getType()).getRank()
                               : INT64_MAX;
    bool groupShapeStays = llvm::any_of(grp.ops, [&](Operation* member) {
      if (aten::isViewOp(member) || isWindowCat(member) || member->getNumResults() != 1) return false;
      auto t = llvm::dyn_cast<RankedTensorType>(member->getResult(0).getType());
      return t && t.getNumElements() == total && t.getRank() > opRank;
    });
    if (groupShapeStays) return true;
    for (Operation* member : grp.ops) {
      if (aten::isViewOp(member) || isWindowCat(member) || llvm::isa<aten::MmOp, aten::AddmmOp, aten::BmmOp>(member))
        continue;
      for (Value v : member->getOperands()) {
        auto type = llvm::dyn_cast<RankedTensorType>(v.getType());
        if (!type) continue;
        const int64_t n = type.getNumElements();
        if (n == 1 || n == total || (type.getRank() > 0 && n == s.cols && type.getShape().back() == s.cols)) continue;
        return false;
      }
    }
    return true;
  }

  // Computed from a reduction in `grp`, directly or through views.
  bool isDerived(Group& grp, Value v) { return grp.derived.contains(v) || grp.derived.contains(chainOf(v).root); }

  int64_t rowBytes(const RowSpace& s) { return s.cols * 4 /*f32 in SBUF*/ * 4 /*live rows*/; }

  // True if `to` depends on `from` through at least one other kernel (a
  // direct edge from `from` does not count: merging the two makes it
  // internal).
  bool reachesIndirectly(int from, int to) {
    SmallVector<int> stack;
    for (int p : groups[size_t(to)].producers)
      if (p != from) stack.push_back(p);
    return reachedFrom(from, stack);
  }

  // Why kernel `other` cannot merge into kernel `into` (siblings whose
  // results meet in one elementwise op); empty if it can.
  std::string mergeRefusal(int other, int into) {
    Group &a = groups[size_t(other)], &b = groups[size_t(into)];
    if (!a.fusible || !b.fusible) return "the sibling kernel cannot be fused";
    if (!a.splitShape.empty() || !b.splitShape.empty()) return "a kernel's columns are split";
    if (a.hasMatmul && b.hasMatmul) return "both kernels hold a matmul";
    if ((a.hasMatmul && b.space.reduces) || (b.hasMatmul && a.space.reduces))
      return "reductions do not join a matmul's kernel yet";
    if (a.space.rows != b.space.rows) return "row spaces differ";
    if (a.space.cols != b.space.cols && a.space.cols != 1 && b.space.cols != 1)
      return "innermost lengths differ (" + std::to_string(a.space.cols) + " vs " + std::to_string(b.space.cols) + ")";
    RowSpace merged{b.space.rows, std::max(a.space.cols, b.space.cols), a.space.reduces || b.space.reduces};
    // A kernel that counts on spreading its rows keeps the flat rule (the
    // other kernel's ops might prevent the spread).
    if (merged.reduces && (a.spreadRows || b.spreadRows) && rowBytes(merged) > sbufBudgetBytes)
      return "a reduced row of " + std::to_string(merged.cols) + " elements exceeds the SBUF budget";
    // Reductions alone are chunked over rows of any length; a kernel with an
    // op that needs a reduced value at every element keeps whole rows,
    // which must fit (by the kernel's live values, wholeRowBytes).
    SmallVector<Operation*> ops(a.ops);
    ops.append(b.ops.begin(), b.ops.end());
    if (merged.reduces && keepsWholeRows(ops, merged.cols)) {
      if (!wholeRowsFit(ops, merged.cols) && !residentRowsFit(ops, merged.cols))
        return "the merged kernel's rows of " + std::to_string(merged.cols) + " elements exceed the SBUF budget";
    }
    if (reachesIndirectly(other, into) || reachesIndirectly(into, other))
      return "merging would create a cycle between kernels";
    // Ops that read their operands from HBM (matmul, embedding), and views
    // that fold only over HBM values, must not read what the other computes.
    auto severalDims = [](Group& g) { return llvm::any_of(g.ops, reducesSeveralDims); };
    if ((holdsCat(a.ops) && severalDims(b)) || (holdsCat(b.ops) && severalDims(a)))
      return "a cat's column ranges do not join a reduction over several dims";
    if ((holdsCat(a.ops) || holdsCat(b.ops)) && a.space.cols != b.space.cols)
      return "a cat's columns would be broadcast along the other kernel's";
    for (Group* g : {&a, &b})
      for (Operation* op : g->ops) {
        bool readsMemory = isMatmul(op) || llvm::isa<aten::EmbeddingOp, aten::CatOp>(op);
        for (Value v : op->getOperands()) {
          Chain c = chainOf(v);
          int pg = producerGroup(c.root);
          if (pg != other && pg != into) continue;
          if (storesLayout(c.root, pg)) return "a kernel would read a layout the other stores to HBM";
          auto cat = llvm::dyn_cast<aten::CatOp>(op);
          if (cat && heldSliceOf(v, pg, cat) &&
              llvm::cast<RankedTensorType>(cat.getType()).getShape().back() == merged.cols &&
              wholeRowsFit(ops, merged.cols))
            continue;
          if (readsMemory) return "a matmul, embedding or cat would read a value computed in the kernel";
          if (!llvm::all_of(c.ops, [](Operation* o) { return aten::isRowPreservingReshape(o); }))
            return "a view of a value computed in the kernel needs a copy through HBM";
        }
      }
    return "";
  }

  void mergeInto(int other, int into) {
    Group &a = groups[size_t(other)], &b = groups[size_t(into)];
    for (Operation* op : a.ops) {
      if (b.members.insert(op).second) b.ops.push_back(op);
      if (auto it = groupOf.find(op); it != groupOf.end()) it->second = into;
    }
    llvm::sort(b.ops, [&](Operation* x, Operation* y) { return position.lookup(x) < position.lookup(y); });
    b.space.cols = std::max(a.space.cols, b.space.cols);
    b.space.reduces |= a.space.reduces;
    b.hasMatmul |= a.hasMatmul;
    b.spreadRows |= a.spreadRows;
    b.residentRows |= a.residentRows;
    b.derived.insert(a.derived.begin(), a.derived.end());
    for (int p : a.producers)
      if (p != into) b.producers.insert(p);
    b.producers.remove(other);
    for (auto [g, grp] : llvm::enumerate(groups)) {
      if (int(g) == into || !grp.producers.contains(other)) continue;
      grp.producers.remove(other);
      grp.producers.insert(into);
    }
    for (auto& [v, g] : materializedBy)
      if (g == other) g = into;
    if (b.space.reduces && !b.residentRows && keepsWholeRows(b.ops, b.space.cols) &&
        !wholeRowsFit(b.ops, b.space.cols))
      b.residentRows = true;
    a.ops.clear();
    a.members.clear();
    a.producers.clear();
    a.merged = true;
  }

  // Whether `op` joins the kernel `g` of a matmul [M, N] over split columns:
  // its shape ends in two dims that flatten into N over M leading elements
  // ([1, M, heads, head_dim]), so that each of the matmul's output tiles
  // holds whole [rows x head_dim] blocks of it. Values computed in the
  // kernel are read through reshapes that keep the tile, and a cat along
  // the last dim takes slices of such values (rotate_half), copied in SBUF.
  // Every other op of the kernel must broadcast its operands against the
  // split shape as well.
  bool joinsSplitColumns(Operation* op, const RowSpace& s, int g) {
    Group& grp = groups[size_t(g)];
    if (!grp.hasMatmul || grp.space.reduces || s.reduces || op->getNumResults() != 1 || isMatmul(op)) return false;
    auto rt = llvm::dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!rt) return false;
    ArrayRef<int64_t> shape = rt.getShape();
    int64_t rows = 1;
    for (int64_t d : grp.space.rows) rows *= d;
    if (aten::trailingDimsOf(shape, rows, grp.space.cols) != 2 || shape.back() > kMatmulTileColumns) return false;
    if (!grp.splitShape.empty() && ArrayRef<int64_t>(grp.splitShape) != shape) return false;
    auto computedHere = [&](Value v) { return producerGroup(chainOf(v).root) == g; };
    auto keepsTile = [&](Operation* view) {
      if (!llvm::isa<aten::ViewShapeOp, aten::UnsafeViewOp, aten::ReshapeOp, aten::ReshapeAliasOp>(view)) return false;
      for (Type t : {view->getOperand(0).getType(), view->getResult(0).getType()})
        if (aten::trailingDimsOf(llvm::cast<RankedTensorType>(t).getShape(), rows, grp.space.cols) == 0) return false;
      return true;
    };
    // The kernel's other ops: the matmul (its bias a scalar or a row of N),
    // ops of the split shape, others of a lower rank (so that the split
    // shape sets the lowering's space) reading scalars, rows of N or what the
    // kernel computes.
    for (Operation* member : grp.ops) {
      if (aten::isViewOp(member) || isWindowCat(member) || llvm::isa<aten::MmOp, aten::BmmOp>(member)) continue;
      if (auto addmm = llvm::dyn_cast<aten::AddmmOp>(member)) {
        if (!isScalarOrColumnsRow(addmm.getSelf(), grp.space.cols)) return false;
        continue;
      }
      auto mt = llvm::dyn_cast<RankedTensorType>(member->getResult(0).getType());
      if (mt && mt.getShape() == shape) continue;
      if (!mt || mt.getRank() >= rt.getRank()) return false;
      for (Value v : member->getOperands())
        if (!isScalarOrColumnsRow(v, grp.space.cols) && !computedHere(v)) return false;
    }
    auto cat = llvm::dyn_cast<aten::CatOp>(op);
    if (cat && ((cat.getDim() != rt.getRank() - 1 && cat.getDim() != -1) || shape.back() < kMinSplitCatLength))
      return false;
    // The lowering splits its columns by the shape with the most dims: one
    // of no more dims than the matmul's result leaves them whole, where an
    // operand broadcast along the split dims has no layout (graph_fuzz
    // 91929394 case 181: a sum as [1, 2] @ [2, 4], reshaped to [2, 2] and
    // divided by a [1, 2] input).
    const bool setsSplit = rt.getRank() > int64_t(grp.space.rows.size()) + 1;
    for (Value v : op->getOperands()) {
      Chain c = chainOf(v);
      if (!computedHere(v)) {
        if (cat) return false;  // a cat's pieces come from the kernel's tiles
        if (!setsSplit && !isScalarOrColumnsRow(v, grp.space.cols)) return false;
        continue;
      }
      ArrayRef<Operation*> views = c.ops;
      if (cat) {
        auto slice = views.empty() ? aten::SliceTensorOp() : llvm::dyn_cast<aten::SliceTensorOp>(views.back());
        auto st = slice ? llvm::cast<RankedTensorType>(slice.getSelf().getType()) : RankedTensorType();
        if (!slice || slice.getStep() != 1 || (slice.getDim() != st.getRank() - 1 && slice.getDim() != -1) ||
            st.getShape() != shape)
          return false;
        views = views.drop_back();
      }
      if (!llvm::all_of(views, keepsTile)) return false;
      auto root = llvm::cast<RankedTensorType>(c.root.getType());
      if (aten::trailingDimsOf(root.getShape(), rows, grp.space.cols) == 0) return false;
    }
    return true;
  }

  // SBUF bytes per partition that one row tile of a kernel of `ops` holds at
  // once when its rows of `cols` stay whole. Each full-width value (its last
  // dim `cols`, a broadcast row included) is live from its op, or for a
  // value read from HBM from the row tile's first load, to its last use in
  // the kernel, or to the row tile's end when something outside reads it
  // (it is stored). Computed values count 4 bytes an element (f32), loaded
  // ones their device dtype's width; per-row values and scalars are left
  // out. The lowering folds ops and reuses dying tiles, so it needs at most
  // about this (6 bytes an element for a bf16 RMSNorm, estimated at 10; 8
  // for a bf16 softmax, estimated at 8).
  int64_t wholeRowBytes(ArrayRef<Operation*> ops, int64_t cols) {
    SmallVector<Operation*> order;
    for (Operation* op : ops)
      if (!aten::isViewOp(op)) order.push_back(op);
    llvm::sort(order, [](Operation* a, Operation* b) { return a->isBeforeInBlock(b); });
    llvm::DenseMap<Operation*, int> indexOf;
    for (auto [i, op] : llvm::enumerate(order)) indexOf[op] = int(i);
    llvm::SmallPtrSet<Operation*, 16> views;
    for (Operation* op : ops)
      if (aten::isViewOp(op)) views.insert(op);
    auto isFull = [&](Value v) {
      auto t = llvm::dyn_cast<RankedTensorType>(v.getType());
      return t && t.getRank() > 0 && t.getShape().back() == cols;
    };
    auto elementBytes = [](Value v) {
      Type e = nc::deviceElementType(llvm::cast<RankedTensorType>(v.getType()).getElementType());
      return std::max<int64_t>(1, e.getIntOrFloatBitWidth() / 8);
    };
    std::function<bool(Value)> readOutside = [&](Value v) {
      return llvm::any_of(v.getUsers(), [&](Operation* u) {
        if (views.contains(u)) return readOutside(u->getResult(0));
        return !indexOf.count(u);
      });
    };
    const int last = int(order.size()) - 1;
    llvm::MapVector<Value, std::array<int64_t, 3>> live;  // value -> {first, last, bytes}
    for (auto [i, op] : llvm::enumerate(order)) {
      for (Value v : op->getOperands()) {
        if (!isFull(v)) continue;
        Value root = chainOf(v).root;
        Operation* def = root.getDefiningOp();
        bool computed = def && indexOf.count(def);
        auto it = live.find(computed ? root : v);
        if (it == live.end()) it = live.insert({v, {0, int64_t(i), elementBytes(v)}}).first;
        it->second[1] = std::max<int64_t>(it->second[1], int64_t(i));
      }
      for (Value r : op->getResults())
        if (isFull(r))
          live[r] = {int64_t(i), readOutside(r) ? last : int64_t(i), std::max<int64_t>(4, elementBytes(r))};
    }
    std::vector<std::pair<int64_t, int64_t>> events;  // (step, +/- bytes)
    for (auto& [v, range] : live) {
      events.push_back({range[0], range[2] * cols});
      events.push_back({range[1] + 1, -range[2] * cols});
    }
    llvm::sort(events);
    int64_t bytes = 0, peak = 0;
    for (auto [at, delta] : events) peak = std::max(peak, bytes += delta);
    return peak;
  }

  // A row tile of `ops` with whole rows of `cols` fits the budget, with
  // room left for its per-row values, constants and alignment (at exactly
  // half a partition the planner cannot double-buffer the tile).
  static constexpr int64_t kRowTileReserve = 4096;
  bool wholeRowsFit(ArrayRef<Operation*> ops, int64_t cols) {
    return wholeRowBytes(ops, cols) + kRowTileReserve <= sbufBudgetBytes;
  }

  // A row tile of `ops` over rows of `cols` lowered in passes (one per level
  // of reductions, LowerResident.cpp) with its full-width inputs resident in
  // SBUF fits the budget: each value the kernel reads from HBM whole at its
  // dtype's width (x of a bf16 norm: 2 bytes an element; a row shared by all
  // rows at half that), plus one chunk's share of the whole-row estimate.
  // Only rows the lowering chunks, in a kernel it can chunk (no matmul, cat,
  // embedding or reduction over several dims).
  bool residentRowsFit(ArrayRef<Operation*> ops, int64_t cols) {
    int64_t bytes = residentRowBytes(ops, cols);
    return bytes >= 0 && bytes + kRowTileReserve <= sbufBudgetBytes;
  }
  // (-1 where the lowering would not chunk the kernel.)
  int64_t residentRowBytes(ArrayRef<Operation*> ops, int64_t cols) {
    if (cols <= kLoweringChunk || llvm::any_of(ops, breaksSpread)) return -1;
    llvm::SmallPtrSet<Operation*, 16> members(ops.begin(), ops.end());
    llvm::DenseSet<Value> inputs;
    int64_t resident = 0;
    for (Operation* op : ops)
      for (Value v : op->getOperands()) {
        auto t = llvm::dyn_cast<RankedTensorType>(v.getType());
        Value root = chainOf(v).root;
        Operation* def = root.getDefiningOp();
        if (!t || t.getRank() == 0 || t.getShape().back() != cols || (def && members.contains(def)) ||
            !inputs.insert(root).second)
          continue;
        Type e = nc::deviceElementType(t.getElementType());
        int64_t bytes = std::max<int64_t>(1, e.getIntOrFloatBitWidth() / 8) * cols;
        // One row for all rows (a norm's weight): loaded once per kernel and
        // shared by the row tiles in flight, so half of it per row tile's
        // budget (half a partition).
        resident += t.getNumElements() == cols ? (bytes + 1) / 2 : bytes;
      }
    int64_t chunk = (wholeRowBytes(ops, cols) * kLoweringChunk + cols - 1) / cols;
    return resident + chunk;
  }

  // Joining `op` would put whole rows too long for the SBUF budget into the
  // kernel: it needs a reduced value at every element of the row (x - max
  // after the max), which no chunk-by-chunk reduction provides.
  bool needsLongWholeRows(Operation* op, const RowSpace& s, Group& grp) {
    if (joinsOnlineSum(op, s, grp)) return false;
    bool needsWholeRow = !s.reduces && s.cols > 1 &&
                         llvm::any_of(op->getOperands(), [&](Value v) { return isDerived(grp, v); });
    if (!needsWholeRow || !(s.reduces || grp.space.reduces)) return false;
    SmallVector<Operation*> ops(grp.ops);
    ops.push_back(op);
    return !wholeRowsFit(ops, std::max(s.cols, grp.space.cols));
  }

  // Whether a kernel of `ops` holds an op that needs a reduced value at
  // every element of its row (x - max after max), other than a softmax's
  // normalizer summed online, so that the lowering keeps its rows whole.
  bool keepsWholeRows(ArrayRef<Operation*> ops, int64_t cols) {
    SmallVector<Operation*> order(ops);
    llvm::sort(order, [&](Operation* x, Operation* y) { return position.lookup(x) < position.lookup(y); });
    llvm::SmallPtrSet<Operation*, 16> members(order.begin(), order.end());
    llvm::DenseSet<Value> derived;
    auto isDerivedValue = [&](Value v) { return derived.contains(v) || derived.contains(chainOf(v).root); };
    for (Operation* op : order) {
      if (aten::isViewOp(op) || op->getNumResults() != 1) continue;
      bool readsDerived = llvm::any_of(op->getOperands(), isDerivedValue);
      std::optional<RowSpace> s = rowSpaceOf(op);
      if (!s) continue;
      if (isReduction(op) || readsDerived) derived.insert(op->getResult(0));
      if (!readsDerived || s->reduces || s->cols <= 1) continue;
      std::optional<OnlineSum> m = onlineSumOf(op);
      if (!m || !members.contains(m->rowMax) || !members.contains(m->rowSum) || cols <= kLoweringChunk) return true;
    }
    return false;
  }

  // The subtraction and exp of a softmax's normalizer (passes/OnlineSum.h)
  // may join the kernel of its row maximum over rows of any length: over
  // chunked rows the lowering sums the exponentials against a running
  // maximum, and their sum's kernel reads the row once instead of twice.
  bool joinsOnlineSum(Operation* op, const RowSpace& s, Group& grp) {
    std::optional<OnlineSum> m = onlineSumOf(op);
    if (!m || std::max(s.cols, grp.space.cols) <= kLoweringChunk) return false;
    if (op == m->shifted) return grp.members.contains(m->rowMax) && !isDerived(grp, m->input);
    return grp.members.contains(m->shifted);
  }

  bool residentRowsWith(Operation* op, const RowSpace& s, Group& grp) {
    if (grp.spreadRows) return false;
    SmallVector<Operation*> ops(grp.ops);
    ops.push_back(op);
    return residentRowsFit(ops, std::max(s.cols, grp.space.cols));
  }

  // A partition's part of a row fits the budget once the lowering spreads
  // `rows` rows of `cols` over the partitions.
  bool spreadRowFits(int64_t rows, int64_t cols) {
    int64_t m = nc::spreadFactor(rows, cols);
    return cols >= nc::kMinSpreadReduction && m > 1 && rowBytes(RowSpace{{}, cols / m, true}) <= sbufBudgetBytes;
  }

  // Ops the lowering does not spread rows over (LowerToIsa.cpp, splitLongRows).
  static bool breaksSpread(Operation* op) {
    return llvm::isa<aten::CatOp, aten::EmbeddingOp>(op) || isMatmul(op) || reducesSeveralDims(op);
  }

  // The lowering spreads a kernel over few rows across the partitions
  // (nc::spreadFactor), so that each partition holds a part of a row: such
  // a kernel keeps its long whole rows (a softmax over a 32000-word
  // vocabulary for a few tokens) when a part fits the budget and nothing in
  // it keeps the lowering from spreading: one row space, no matmul, cat or
  // embedding, reductions over the last dim.
  bool spreadKeepsRows(Operation* op, const RowSpace& s, Group& grp) {
    int64_t rows = 1;
    for (int64_t d : s.rows) rows *= d;
    if (!spreadRowFits(rows, std::max(s.cols, grp.space.cols))) return false;
    if (grp.hasMatmul || grp.attention || !grp.splitShape.empty() || s.rows != grp.space.rows) return false;
    return !breaksSpread(op) && llvm::none_of(grp.ops, breaksSpread);
  }

  // Why `op` (with row space `s`) cannot join group `g`; empty if it can.
  std::string refusal(Operation* op, const RowSpace& s, int g, ArrayRef<int> producer_groups) {
    Group& grp = groups[size_t(g)];
    const bool split = grp.fusible && joinsSplitColumns(op, s, g);
    if (!split && !grp.splitShape.empty() &&
        (op->getNumResults() != 1 ||
         llvm::cast<RankedTensorType>(op->getResult(0).getType()).getRank() >= int64_t(grp.splitShape.size())))
      return "the kernel's columns are split; an op of another shape must have a lower rank";
    if (!split && !grp.splitShape.empty())
      for (Value v : op->getOperands())
        if (!isScalarOrColumnsRow(v, grp.space.cols) && producerGroup(chainOf(v).root) != g)
          return "the kernel's columns are split; an op of another shape may only read scalars, rows of all the "
                 "columns and what the kernel computes";
    if (!grp.fusible) return "the producer kernel cannot be fused";
    if (grp.spreadRows && (s.rows != grp.space.rows || breaksSpread(op)))
      return "the kernel's long rows fit SBUF only spread over partitions, which this op would prevent";
    if (grp.residentRows && !residentRowsWith(op, s, grp)) {
      SmallVector<Operation*> ops(grp.ops);
      ops.push_back(op);
      int64_t bytes = grp.spreadRows ? -1 : residentRowBytes(ops, std::max(s.cols, grp.space.cols));
      return "the kernel's long rows fit SBUF only with its inputs resident, which this op would prevent (" +
             (bytes < 0 ? std::string("the lowering does not chunk such a kernel")
                        : "about " + std::to_string(bytes) + " bytes per partition") +
             ")";
    }
    // A matmul is a root: it starts a kernel that its epilogue may join.
    if (isMatmul(op)) return "a matmul starts its own kernel";
    if (auto e = llvm::dyn_cast<aten::EmbeddingOp>(op))
      for (Value v : e->getOperands())
        if (producerGroup(chainOf(v).root) == g)
          return "an embedding reads its table and indices from HBM";
    if (grp.hasMatmul && isReduction(op)) return "reductions do not join a matmul's kernel yet";
    if (auto cat = llvm::dyn_cast<aten::CatOp>(op)) {
      bool held = false;
      for (Value v : op->getOperands())
        if (!split && producerGroup(chainOf(v).root) == g) {
          if (!heldSliceOf(v, g, cat)) return "a cat reads its operands from HBM";
          held = true;
        }
      if (held) {
        SmallVector<Operation*> ops(grp.ops);
        ops.push_back(op);
        if (!wholeRowsFit(ops, s.cols))
          return "a cat reading a slice of a value computed in the kernel needs its whole rows, which exceed the "
                 "SBUF budget";
      }
      if (llvm::any_of(grp.ops, reducesSeveralDims))
        return "a cat's column ranges do not join a reduction over several dims";
    }
    // A cat fills its column ranges of the kernel's tiles: it cannot stand
    // for a value broadcast along wider columns (a [4, 1] cat beside [4, 128]).
    if (!split && (llvm::isa<aten::CatOp>(op) || holdsCat(grp.ops)) && s.cols != grp.space.cols)
      return "a cat's columns would be broadcast along the kernel's (" + std::to_string(s.cols) + " vs " +
             std::to_string(grp.space.cols) + ")";
    if (reducesSeveralDims(op) && holdsCat(grp.ops))
      return "a reduction over several dims does not join a cat's column ranges";
    if (!split && s.rows != grp.space.rows && !sameRowsReshaped(op, s, grp))
      return "row spaces differ (" + std::to_string(s.rows.size()) + "-d vs " +
             std::to_string(grp.space.rows.size()) + "-d leading dims or different sizes)";
    if (!split && s.cols != grp.space.cols && s.cols != 1 && grp.space.cols != 1)
      return "innermost lengths differ (" + std::to_string(s.cols) + " vs " +
             std::to_string(grp.space.cols) + ")";
    if (needsLongWholeRows(op, s, grp) && !spreadKeepsRows(op, s, grp) && !residentRowsWith(op, s, grp)) {
      SmallVector<Operation*> ops(grp.ops);
      ops.push_back(op);
      int64_t cols = std::max(s.cols, grp.space.cols);
      return "whole rows of " + std::to_string(cols) + " elements would need about " +
             std::to_string(wholeRowBytes(ops, cols)) + " bytes per partition; the SBUF budget leaves " +
             std::to_string(sbufBudgetBytes - kRowTileReserve) + " (" + std::to_string(sbufBudgetBytes) +
             " less " + std::to_string(kRowTileReserve) + " for per-row values and constants)";
    }
    for (int p : producer_groups)
      if (p != g && reaches(g, p)) return "joining would create a cycle between kernels";
    // Views fold into access patterns only over HBM values: a view of a value
    // this kernel computes would need a copy through HBM first; so would a
    // layout this kernel stores (storeThroughProducer).
    for (Value v : op->getOperands()) {
      Chain c = chainOf(v);
      if (storesLayout(c.root, g)) return "it reads a layout its producer kernel stores to HBM";
      bool sameRows = split || llvm::all_of(c.ops, [](Operation* o) { return aten::isRowPreservingReshape(o); });
      if (!c.ops.empty() && producerGroup(c.root) == g && !sameRows)
        return "a view of a value computed in the kernel needs a copy through HBM";
    }
    return "";
  }

  // A reduction whose reduced elements do not fit one SBUF row is staged
  // through HBM, one dim at a time, innermost first: sum(x, {0, 1}) becomes
  // sum(sum(x, {1}, keepdim), {0, 1}), since a sum of partial sums (a mean of
  // equal-sized partial means, a max of partial maxima) is the same value.
  // Each stage reduces one contiguous run that the lowering chunks along the
  // row. Partial results are kept in f32 whatever the input dtype. Reduced
  // dims of size 1 are dropped first (reduced with keepdim, then reshaped).
  void stageReductions(func::FuncOp func) {
    SmallVector<Operation*> work;
    for (Operation& op : func.getBody().front())
      if (llvm::isa<aten::SumDimIntListOp, aten::MeanDimOp, aten::AmaxOp>(op)) work.push_back(&op);
    int64_t nextId = 0;
    func.walk([&](Operation* op) {
      if (auto id = op->getAttrOfType<IntegerAttr>(kSourceIdAttr)) nextId = std::max(nextId, id.getInt() + 1);
    });
    while (!work.empty()) {
      Operation* op = work.pop_back_val();
      Value x = op->getOperand(0);
      auto in = llvm::cast<RankedTensorType>(x.getType());
      auto resultType = llvm::cast<RankedTensorType>(op->getResult(0).getType());
      SmallVector<int64_t> dims = aten::reducedDims(op), wide;
      if (in.getRank() == 0) continue;  // a reduction of a 0-d tensor is the identity
      int64_t count = 1;
      for (int64_t d : dims) {
        count *= in.getDimSize(d);
        if (in.getDimSize(d) > 1) wide.push_back(d);
      }
      bool tooLong = wide.size() > 1 && rowBytes(RowSpace{{}, count, true}) > sbufBudgetBytes;
      // One very long reduced dim over few rows is split across partitions:
      // [.., C, ..] viewed as [.., m, C / m, ..], reduced over C / m on
      // rows * m partitions, then over the m partials.
      int64_t rowsOut = in.getNumElements() / std::max<int64_t>(count, 1), split = 1;
      if (wide.size() == 1 && count >= kLongReduction && rowsOut < nc::kNumPartitions / 2)
        for (int64_t m = 2; m * rowsOut <= nc::kNumPartitions && m <= count / 2; ++m)
          if (count % m == 0) split = m;
      if (!tooLong && split == 1 && wide.size() == dims.size()) continue;
      if (wide.empty()) {
        // Every reduced dim has size 1: the reduction of one element is that
        // element where the dtype stays (+ 0 for a sum or mean, which eager
        // starts from 0: -0 becomes 0), in the operand's shape (keepdim),
        // or without those dims, a squeeze that sinks towards its uses as a
        // reduction's does (sinkSqueezes).
        if (in.getElementType() == resultType.getElementType() && llvm::isa<FloatType>(in.getElementType())) {
          OpBuilder b(op);
          Value same = x;
          if (!llvm::isa<aten::AmaxOp>(op)) {
            Operation* plus = b.create<aten::AddScalarOp>(op->getLoc(), in, x, b.getF64FloatAttr(0.0),
                                                          b.getF64FloatAttr(1.0));
            copySourceTags(op, plus);
            same = plus->getResult(0);
          }
          if (in != resultType) {
            Operation* r = b.create<aten::ReshapeOp>(op->getLoc(), resultType, same,
                                                     b.getDenseI64ArrayAttr(resultType.getShape()));
            r->setAttr(kSqueezeAttr, b.getUnitAttr());
            copySourceTags(op, r);
            same = r->getResult(0);
          }
          op->getResult(0).replaceAllUsesWith(same);
          op->erase();
        }
        continue;
      }
      OpBuilder b(op);
      Location loc = op->getLoc();
      auto src = op->getAttrOfType<StringAttr>(kSourceAttr);
      auto id = op->getAttrOfType<IntegerAttr>(kSourceIdAttr);
      StringAttr source = src ? src : b.getStringAttr(op->getName().getStringRef());
      IntegerAttr sourceId = id ? id : b.getI64IntegerAttr(nextId++);
      auto tag = [&](Operation* o) {
        o->setAttr(kSourceAttr, source);
        o->setAttr(kSourceIdAttr, sourceId);
        return o;
      };
      auto reduceOver = [&](Value v, ArrayRef<int64_t> over, bool keepdim, Type elem) -> Operation* {
        auto vt = llvm::cast<RankedTensorType>(v.getType());
        SmallVector<int64_t> shape;
        for (int64_t d = 0; d < vt.getRank(); ++d) {
          if (!llvm::is_contained(over, d)) shape.push_back(vt.getDimSize(d));
          else if (keepdim) shape.push_back(1);
        }
        auto type = RankedTensorType::get(shape, elem);
        auto d = b.getDenseI64ArrayAttr(over);
        auto k = b.getBoolAttr(keepdim);
        Operation* r;
        if (llvm::isa<aten::SumDimIntListOp>(op)) r = b.create<aten::SumDimIntListOp>(loc, type, v, d, k);
        else if (llvm::isa<aten::MeanDimOp>(op)) r = b.create<aten::MeanDimOp>(loc, type, v, d, k);
        else r = b.create<aten::AmaxOp>(loc, type, v, d, k);
        return tag(r);
      };
      Value result;
      if (split > 1) {
        int64_t d = wide.front();
        SmallVector<int64_t> shape(in.getShape());
        shape[size_t(d)] = count / split;
        shape.insert(shape.begin() + d, split);
        Value parts = tag(b.create<aten::ReshapeOp>(loc, in.clone(shape), x, b.getDenseI64ArrayAttr(shape)))
                          ->getResult(0);
        Type f32 = b.getF32Type();
        if (in.getElementType() != f32)
          parts = tag(b.create<aten::ToCopyOp>(loc, RankedTensorType::get(shape, f32), parts))->getResult(0);
        Operation* partial = reduceOver(parts, {d + 1}, /*keepdim=*/true, f32);
        bool keep = keepdimOf(op);
        Operation* rest = reduceOver(partial->getResult(0), {d, d + 1}, /*keepdim=*/false, f32);
        result = rest->getResult(0);
        if (keep)
          result = tag(b.create<aten::ReshapeOp>(loc, resultType.clone(f32), result,
                                                 b.getDenseI64ArrayAttr(resultType.getShape())))
                       ->getResult(0);
        if (resultType.getElementType() != f32)
          result = tag(b.create<aten::ToCopyOp>(loc, resultType, result))->getResult(0);
      } else if (tooLong) {
        Type f32 = b.getF32Type();
        Value wideX = x;
        if (in.getElementType() != f32)
          wideX = tag(b.create<aten::ToCopyOp>(loc, in.clone(f32), x))->getResult(0);
        Operation* partial = reduceOver(wideX, {wide.back()}, /*keepdim=*/true, f32);
        Operation* rest = reduceOver(partial->getResult(0), dims, keepdimOf(op), f32);
        work.push_back(rest);  // may need staging again
        result = rest->getResult(0);
        if (resultType.getElementType() != f32)
          result = tag(b.create<aten::ToCopyOp>(loc, resultType, result))->getResult(0);
      } else {
        Operation* r = reduceOver(x, wide, /*keepdim=*/true, resultType.getElementType());
        result = r->getResult(0);
        if (result.getType() != resultType)
          result = tag(b.create<aten::ReshapeOp>(loc, resultType, result, b.getDenseI64ArrayAttr(resultType.getShape())))
                       ->getResult(0);
      }
      op->getResult(0).replaceAllUsesWith(result);
      op->erase();
    }
  }

  // Per-row values in the rows' own shape: a reduction without keepdim
  // becomes one with keepdim and a reshape, and elementwise ops on such
  // reshapes run before them instead (the reshape sinks towards the uses).
  // So `log(sum(exp(x), -1))` of shape [n] is computed as [n, 1], in the rows
  // of the kernel that reduced, instead of as a 1-d tensor whose row space
  // matches nothing. Only a final reshape remains, which a returned value is
  // stored through and a reader in another kernel folds into its access.
  void sinkSqueezes(func::FuncOp func) {
    OpBuilder b(func.getContext());
    // A view that only drops unit dims of a value computed on the device.
    auto isSqueeze = [](Value v) -> Operation* {
      Operation* r = v.getDefiningOp();
      if (!r || !llvm::isa<aten::SqueezeDimOp, aten::ReshapeOp, aten::ViewShapeOp, aten::UnsafeViewOp,
                           aten::ReshapeAliasOp>(r))
        return nullptr;
      Value in = r->getOperand(0);
      if (llvm::isa<BlockArgument>(in) || in.getDefiningOp<arith::ConstantOp>()) return nullptr;
      auto without1 = [](Type t) {
        SmallVector<int64_t> s;
        for (int64_t d : llvm::cast<RankedTensorType>(t).getShape())
          if (d != 1) s.push_back(d);
        return s;
      };
      auto inType = llvm::cast<RankedTensorType>(in.getType()), outType = llvm::cast<RankedTensorType>(v.getType());
      if (outType.getRank() >= inType.getRank() || without1(inType) != without1(outType)) return nullptr;
      return r;
    };
    auto squeeze = [&](Operation* like, Value v, RankedTensorType type) {
      Operation* r = b.create<aten::ReshapeOp>(like->getLoc(), type, v, b.getDenseI64ArrayAttr(type.getShape()));
      r->setAttr(kSqueezeAttr, b.getUnitAttr());
      copySourceTags(like, r);
      return r;
    };
    // One pass in program order: the users of a new reshape come later, and
    // the ops made here go before the op being visited.
    for (Operation& current : llvm::make_early_inc_range(func.getBody().front())) {
      Operation* op = &current;
      auto resultType = op->getNumResults() == 1 ? llvm::dyn_cast<RankedTensorType>(op->getResult(0).getType())
                                                  : RankedTensorType();
      if (!resultType) continue;
      if (llvm::isa<aten::SumDimIntListOp, aten::MeanDimOp, aten::AmaxOp>(op) && !keepdimOf(op)) {
        auto in = llvm::cast<RankedTensorType>(op->getOperand(0).getType());
        SmallVector<int64_t> dims = aten::reducedDims(op);
        if (dims.empty()) continue;
        SmallVector<int64_t> kept(in.getShape());
        for (int64_t d : dims) kept[size_t(d)] = 1;
        b.setInsertionPoint(op);
        Operation* r = b.clone(*op);
        r->setAttr("keepdim", b.getBoolAttr(true));
        r->getResult(0).setType(RankedTensorType::get(kept, resultType.getElementType()));
        Operation* s = squeeze(op, r->getResult(0), resultType);
        op->getResult(0).replaceAllUsesWith(s->getResult(0));
        op->erase();
        continue;
      }
      if (!movesAcrossViews(op)) continue;
      // Mixed float dtypes: whether an operand is 0-d decides PyTorch's
      // promotion, and widening a 0-d result's operands would change that.
      // Left as it is. (Over a result of rank 1 or more, every operand that
      // widens has that rank already; one-element operands stay as they are.)
      if (resultType.getRank() == 0) {
        Type floatElem;
        bool mixed = false;
        for (Value v : op->getOperands()) {
          Type e = llvm::cast<RankedTensorType>(v.getType()).getElementType();
          if (!aten::isFloatType(e)) continue;
          mixed |= floatElem && floatElem != e;
          floatElem = e;
        }
        if (mixed) continue;
      }
      // The shape U the squeezed operands came from, and the one they have.
      RankedTensorType wide;
      for (Value v : op->getOperands())
        if (Operation* s = isSqueeze(v); s && v.getType() == RankedTensorType::get(resultType.getShape(),
                                                    llvm::cast<RankedTensorType>(v.getType()).getElementType())) {
          wide = llvm::cast<RankedTensorType>(s->getOperand(0).getType());
          break;
        }
      if (!wide) continue;
      SmallVector<Value> operands;
      bool ok = true;
      b.setInsertionPoint(op);
      for (Value v : op->getOperands()) {
        auto t = llvm::cast<RankedTensorType>(v.getType());
        Operation* s = isSqueeze(v);
        if (s && llvm::cast<RankedTensorType>(s->getOperand(0).getType()).getShape() == wide.getShape()) {
          operands.push_back(s->getOperand(0));
        } else if (t.getNumElements() == 1 && t.getRank() <= wide.getRank() &&
                   !(llvm::isa<aten::MaskedFillScalarOp>(op) && v == op->getOperand(0))) {
          // (masked_fill's result takes self's shape, so self must widen)
          operands.push_back(v);  // broadcasts the same way in either shape
        } else if (t.getShape() == resultType.getShape()) {
          Operation* r = b.create<aten::ReshapeOp>(op->getLoc(), t.clone(wide.getShape()), v,
                                                   b.getDenseI64ArrayAttr(wide.getShape()));
          copySourceTags(op, r);
          operands.push_back(r->getResult(0));
        } else {
          ok = false;  // broadcast inside the op: leave it
          break;
        }
      }
      if (!ok) continue;
      Operation* wideOp = b.clone(*op);
      wideOp->setOperands(operands);
      wideOp->getResult(0).setType(resultType.clone(wide.getShape()));
      Operation* s = squeeze(op, wideOp->getResult(0), resultType);
      op->getResult(0).replaceAllUsesWith(s->getResult(0));
      op->erase();
    }
    eraseDeadViews(func);  // a squeeze that every user sank past
  }

  // Views without uses go, chains of them too (users come after their
  // operands, so a reverse walk meets each view after its users).
  static void eraseDeadViews(func::FuncOp func) {
    for (Operation& op : llvm::make_early_inc_range(llvm::reverse(func.getBody().front())))
      if (aten::isViewOp(&op) && op.use_empty()) op.erase();
  }

  // A lone sum or mean over a run of leading dims (the frame above takes
  // those with elementwise ops around them) reads its operand through a
  // permuted pattern: rows of the reduced elements, each a row length apart,
  // one DMA run per element or transposed 256-byte runs ([16, 512, 1024]
  // bf16 over dim 1: 150.7 us, [64, 16, 4096]: 892.0). Seen as [A, R, C]
  // (R the reduced elements), it is the matrix product of a row of R ones
  // with each [R, C] block instead: the operand read in its own layout,
  // the TensorEngine summing over the partitions in f32 (PSUM), one
  // rounding at the end as eager's sum (66.3 and 171.1 us). The products
  // with 1 are exact and the sums those of a sum, NaN and infinities
  // included. A mean scales the sum by 1 / R. Not where C = 1 (the reduced
  // elements are adjacent: rows of the kernel) nor where the lowering
  // reduces SBUF rows for less (reducesInSbufRows, priced as
  // passes/ReductionCost.h says: a matmul per row of A, with its PSUM
  // evacuation and transfers, costs far more for short blocks; bf16
  // [8192, 16, 2] took 3257.3 us as matmuls, 17.0 in SBUF rows, and
  // [128, 128, 768] stays a matmul).
  //
  // With `weighted`, before the frame: a sum of a product whose one factor
  // is constant along the kept trailing dims (a masked mean over tokens,
  // `(x * mask[..., None]).sum(1)`) is that factor's row times each block
  // (eager rounds each product to the dtype first; the TensorEngine keeps
  // it exact). Only where the product has no other reader, and not where
  // the product and the sum form a middle frame (keepsNaturalFrame) priced
  // lower: bf16 [1024, 8, 512] with channel weights took 281.5 us as
  // matmuls, 46.6 in the frame.
  void sumLeadingDimsByMatmul(func::FuncOp func, bool weighted) {
    SmallVector<Operation*> sums;
    for (Operation& op : func.getBody().front())
      if (llvm::isa<aten::SumDimIntListOp, aten::MeanDimOp>(op) && !rowSpaceOf(&op) && !inMiddleFrames.contains(&op))
        sums.push_back(&op);
    for (Operation* op : sums) {
      Value x = op->getOperand(0);
      auto in = llvm::cast<RankedTensorType>(x.getType());
      auto resultType = llvm::cast<RankedTensorType>(op->getResult(0).getType());
      Type elem = in.getElementType();
      if (resultType.getElementType() != elem || !llvm::isa<FloatType>(elem)) continue;
      SmallVector<int64_t> dims = aten::reducedDims(op);
      const int64_t rank = in.getRank();
      if (dims.empty() || dims.back() >= rank - 1) continue;
      bool run = true;
      for (size_t i = 1; i < dims.size(); ++i) run &= dims[i] == dims[0] + int64_t(i);
      if (!run) continue;
      ArrayRef<int64_t> shape = in.getShape();
      const size_t first = size_t(dims.front()), kept = size_t(dims.back() + 1);
      const int64_t A = ShapedType::getNumElements(shape.take_front(first)),
                    R = ShapedType::getNumElements(shape.slice(first, dims.size())),
                    C = ShapedType::getNumElements(shape.drop_front(kept));
      // (C = 1: the reduced elements are adjacent, rows of the kernel.)
      if (R <= 1 || C <= 1 || A == 0) continue;
      // Rows reduced in SBUF where the device model prices them below the
      // matmuls; a weighted sum only with short blocks (C under 32), whose
      // product then has a kernel of its own (keptAlone) or a frame of
      // short strided rows, both far cheaper than a matmul per row: with
      // longer blocks the frame's rows would be slower than the matmuls.
      const double matmulNs = matmulRowsSumNs(A, R, C, elem.isF32());
      if (reducesInSbufRows(op) && (!weighted || C < kShortBlock) &&
          sbufRowsReductionNs(A, R, C, elem.isBF16(), kLoweringChunk) < matmulNs)
        continue;
      // The weights: [A dims or 1, R dims or 1, 1...] (left-padded to the rank).
      Value blocks = x, weights;
      SmallVector<int64_t> weightShape;
      if (weighted) {
        auto mul = x.getDefiningOp<aten::MulTensorOp>();
        if (!mul || !x.hasOneUse()) continue;
        for (auto [full, w] : {std::pair(mul.getSelf(), mul.getOther()), std::pair(mul.getOther(), mul.getSelf())}) {
          auto ft = llvm::cast<RankedTensorType>(full.getType()), wt = llvm::cast<RankedTensorType>(w.getType());
          if (ft != in || wt.getElementType() != elem || wt.getRank() > rank) continue;
          SmallVector<int64_t> padded(size_t(rank - wt.getRank()), 1);
          padded.append(wt.getShape().begin(), wt.getShape().end());
          bool fits = true;
          for (size_t d = 0; d < size_t(rank); ++d)
            fits &= padded[d] == 1 || (d < kept && padded[d] == shape[d]);
          if (!fits) continue;
          blocks = full, weights = w, weightShape = padded;
          break;
        }
        if (!weights) continue;
        // With longer blocks, a product and sum that form a middle frame
        // stay for it where it costs less: the product a pass over the
        // elements there.
        if (C >= kShortBlock)
          if (std::optional<MiddleFrameSplit> split = middleFrameOf(op)) {
            const neff::DeviceParams& d = neff::Trn1();
            const int64_t rows = split->rows, columns = split->columns;
            const double productNs = double((rows + nc::kNumPartitions - 1) / nc::kNumPartitions) * double(R) *
                                     double(std::max<int64_t>(columns, 64)) / d.vector_ghz;
            if (sbufRowsReductionNs(rows, R, columns, elem.isBF16(), kLoweringChunk) + productNs < matmulNs) continue;
          }
      }
      OpBuilder b(op);
      Location loc = op->getLoc();
      auto tagged = [&](Operation* o) -> Value {
        copySourceTags(op, o);
        return o->getResult(0);
      };
      auto reshape = [&](Value v, ArrayRef<int64_t> to) {
        if (llvm::cast<RankedTensorType>(v.getType()).getShape() == to) return v;
        return tagged(b.create<aten::ReshapeOp>(loc, RankedTensorType::get(to, elem), v, b.getDenseI64ArrayAttr(to)));
      };
      auto expand = [&](Value v, ArrayRef<int64_t> to) {
        if (llvm::cast<RankedTensorType>(v.getType()).getShape() == to) return v;
        return tagged(b.create<aten::ExpandOp>(loc, RankedTensorType::get(to, elem), v, b.getDenseI64ArrayAttr(to)));
      };
      Value rows;  // [A, 1, R]
      if (weights) {
        SmallVector<int64_t> full(shape.take_front(kept));
        full.append(size_t(rank) - kept, 1);
        rows = reshape(expand(reshape(weights, weightShape), full), {A, 1, R});
      } else {
        auto onesType = RankedTensorType::get({1, 1, R}, elem);
        rows = expand(tagged(b.create<arith::ConstantOp>(loc, DenseElementsAttr::get(onesType, b.getFloatAttr(elem, 1.0)))),
                      {A, 1, R});
      }
      Value sum;
      if (A == 1)
        sum = tagged(
            b.create<aten::MmOp>(loc, RankedTensorType::get({1, C}, elem), reshape(rows, {1, R}), reshape(blocks, {R, C})));
      else
        sum = tagged(b.create<aten::BmmOp>(loc, RankedTensorType::get({A, 1, C}, elem), rows, reshape(blocks, {A, R, C})));
      if (llvm::isa<aten::MeanDimOp>(op))
        sum = tagged(b.create<aten::MulScalarOp>(loc, sum.getType(), sum, b.getF64FloatAttr(1.0 / double(R))));
      op->getResult(0).replaceAllUsesWith(reshape(sum, resultType.getShape()));
      op->erase();
      if (Operation* product = x.getDefiningOp(); product && product->use_empty()) product->erase();
    }
  }

  // cat(neg(a), b) along the last dim becomes cat(a, b) * [-1.., 1..]: the
  // same bits (a product with +-1 is exact), and a cat of views then folds
  // into the loads of the kernel that reads it (rotate_half in rotary
  // embeddings). Only cats that can sit inside a kernel are rewritten.
  void hoistNegationsOutOfCats(func::FuncOp func) {
    SmallVector<aten::CatOp> cats;
    func.walk([&](aten::CatOp cat) {
      if (isInKernelCat(cat) && llvm::any_of(cat.getTensors(), [](Value v) { return v.getDefiningOp<aten::NegOp>(); }) &&
          llvm::none_of(cat.getTensors(), [&](Value v) { return inMiddleFrames.contains(v.getDefiningOp()); }))
        cats.push_back(cat);
    });
    for (aten::CatOp cat : cats) {
      auto type = llvm::cast<RankedTensorType>(cat.getType());
      Type elem = type.getElementType();
      SmallVector<Value> operands;
      SmallVector<APFloat> signs;
      const llvm::fltSemantics& sem = llvm::cast<FloatType>(elem).getFloatSemantics();
      Operation* firstNeg = nullptr;
      for (Value v : cat.getTensors()) {
        auto neg = v.getDefiningOp<aten::NegOp>();
        if (neg && !firstNeg) firstNeg = neg;
        operands.push_back(neg ? neg.getSelf() : v);
        int64_t width = llvm::cast<RankedTensorType>(v.getType()).getShape().back();
        signs.append(size_t(width), APFloat(sem, neg ? "-1" : "1"));
      }
      OpBuilder b(cat);
      auto signType = RankedTensorType::get({type.getShape().back()}, elem);
      Value sign = b.create<arith::ConstantOp>(cat.getLoc(), DenseElementsAttr::get(signType, signs));
      auto plain = b.create<aten::CatOp>(cat.getLoc(), type, operands, cat.getDimAttr());
      plain->setAttrs(cat->getAttrs());
      auto product = b.create<aten::MulTensorOp>(firstNeg->getLoc(), type, plain.getResult(), sign);
      copySourceTags(firstNeg, product);
      if (!product->hasAttr(kSourceAttr)) product->setAttr(kSourceAttr, b.getStringAttr("aten.neg"));
      cat.getResult().replaceAllUsesWith(product.getResult());
      cat.erase();
    }
    // Negations left without uses go.
    SmallVector<Operation*> dead;
    for (Operation& op : func.getBody().front())
      if (llvm::isa<aten::NegOp>(op) && op.use_empty()) dead.push_back(&op);
    for (Operation* op : dead) op->erase();
  }

  // Recomputes `moving` (in program order) in a permuted frame: dim i of each
  // new value is dim frame[i] of the value it replaces. An operand from
  // outside is broadcast to the op's shape and permuted, unless the
  // permutation leaves its dims alone; readers outside `moving` read the new
  // value through `readBack` (the inverse view). `mapped` holds the values
  // already in the frame and gains the moved ones; the old ops are erased.
  // With `tagViews`, the views made for an op's operands are attributed to it.
  template <typename ReadBack>
  static void moveIntoFrame(ArrayRef<Operation*> moving, ArrayRef<int64_t> frame, IRMapping& mapped,
                            ReadBack readBack, bool tagViews = false) {
    int64_t rank = int64_t(frame.size());
    SmallVector<int64_t> inverse(rank, 0);
    for (int64_t i = 0; i < rank; ++i) inverse[size_t(frame[size_t(i)])] = i;
    auto framed = [&](ArrayRef<int64_t> shape) {
      SmallVector<int64_t> s(rank);
      for (int64_t i = 0; i < rank; ++i) s[size_t(i)] = shape[size_t(frame[size_t(i)])];
      return s;
    };
    auto normalized = [&](int64_t d) { return d < 0 ? d + rank : d; };
    OpBuilder b(moving.front()->getContext());
    // One view per value and shape: a kernel loads each view of its own.
    std::map<std::pair<void*, SmallVector<int64_t>>, Value> views;
    for (Operation* op : moving) {
      b.setInsertionPoint(op);
      auto rt = llvm::cast<RankedTensorType>(op->getResult(0).getType());
      SmallVector<Value> operands;
      for (Value v : op->getOperands()) {
        if (Value m = mapped.lookupOrNull(v)) {
          operands.push_back(m);
          continue;
        }
        auto vt = llvm::cast<RankedTensorType>(v.getType());
        int64_t q = vt.getRank();
        bool unaffected = vt.getNumElements() == 1;
        if (!unaffected) {
          unaffected = true;
          for (int64_t i = rank - q; i < rank; ++i) unaffected &= frame[size_t(i)] == i;
        }
        if (unaffected) {
          operands.push_back(v);
          continue;
        }
        // (A reduction's operand has the frame's rank already.)
        ArrayRef<int64_t> target = isReduction(op) ? vt.getShape() : rt.getShape();
        Value& view = views[{v.getAsOpaquePointer(), SmallVector<int64_t>(target)}];
        if (view) {
          operands.push_back(view);
          continue;
        }
        Value full = v;
        if (vt.getShape() != target) {
          full = b.create<aten::ExpandOp>(op->getLoc(), vt.clone(rt.getShape()), v, b.getDenseI64ArrayAttr(rt.getShape()));
          if (tagViews) copySourceTags(op, full.getDefiningOp());
        }
        auto fullShape = llvm::cast<RankedTensorType>(full.getType()).getShape();
        auto permuted = b.create<aten::PermuteOp>(op->getLoc(), vt.clone(framed(fullShape)), full,
                                                  b.getDenseI64ArrayAttr(frame));
        if (tagViews) copySourceTags(op, permuted);
        operands.push_back(view = permuted);
      }
      Operation* moved = b.clone(*op);
      moved->setOperands(operands);
      moved->getResult(0).setType(rt.clone(framed(rt.getShape())));
      if (auto s = llvm::dyn_cast<aten::SliceTensorOp>(moved)) s.setDim(inverse[size_t(normalized(s.getDim()))]);
      if (auto c = llvm::dyn_cast<aten::CatOp>(moved)) c.setDim(inverse[size_t(normalized(c.getDim()))]);
      if (isReduction(moved)) {
        SmallVector<int64_t> dims;
        for (int64_t d : aten::reducedDims(op)) dims.push_back(inverse[size_t(d)]);
        llvm::sort(dims);
        moved->setAttr("dim", b.getDenseI64ArrayAttr(dims));
      }
      mapped.map(op->getResult(0), moved->getResult(0));
    }
    llvm::SmallPtrSet<Operation*, 16> moved(moving.begin(), moving.end());
    for (Operation* op : moving) {
      Value r = op->getResult(0);
      if (llvm::all_of(r.getUsers(), [&](Operation* u) { return moved.contains(u); })) continue;
      Value m = mapped.lookup(r);
      b.setInsertionPointAfterValue(m);
      Value again = readBack(b, m, r.getType());
      r.replaceUsesWithIf(again, [&](OpOperand& use) { return !moved.contains(use.getOwner()); });
    }
    for (Operation* op : llvm::reverse(moving)) op->erase();
  }

  // Elementwise ops, slices and cats applied to a permutation of a matmul's
  // result (the head split: view [s, h, d], transpose to [h, s, d]) run on
  // the unpermuted value instead, and the permutation moves after them:
  // op(permute(y), c) = permute(op(y, permute^-1(c))) elementwise, where an
  // operand c that the permutation affects is read through the inverse
  // permutation of its broadcast (a view, folded into its loads). The ops
  // then see the matmul's rows (tokens), so they may join its kernel as an
  // epilogue over split columns (the rotary embedding of q and k), and the
  // readers of the result see the permutation as a view, as they see v's.
  void movePermutationsPastEpilogues(func::FuncOp func) {
    SmallVector<Operation*> perms;
    for (Operation& op : func.getBody().front())
      if (llvm::isa<aten::TransposeIntOp, aten::PermuteOp>(op)) perms.push_back(&op);
    for (Operation* permOp : perms) {
      auto tType = llvm::cast<RankedTensorType>(permOp->getResult(0).getType());
      int64_t rank = tType.getRank();
      if (rank < 2) continue;
      // perm[i]: the dim of the operand that dim i of the result is.
      SmallVector<int64_t> perm(rank, 0);
      for (int64_t i = 0; i < rank; ++i) perm[size_t(i)] = i;
      if (auto t = llvm::dyn_cast<aten::TransposeIntOp>(permOp)) {
        int64_t a = t.getDim0() < 0 ? t.getDim0() + rank : t.getDim0();
        int64_t c = t.getDim1() < 0 ? t.getDim1() + rank : t.getDim1();
        if (a < 0 || c < 0 || a >= rank || c >= rank) continue;
        std::swap(perm[size_t(a)], perm[size_t(c)]);
      } else {
        ArrayRef<int64_t> dims = llvm::cast<aten::PermuteOp>(permOp).getDims();
        if (int64_t(dims.size()) != rank) continue;
        for (int64_t i = 0; i < rank; ++i) perm[size_t(i)] = dims[size_t(i)] < 0 ? dims[size_t(i)] + rank : dims[size_t(i)];
      }
      SmallVector<int64_t> inverse(rank, 0);
      for (int64_t i = 0; i < rank; ++i) inverse[size_t(perm[size_t(i)])] = i;
      // The permuted value must be a reshape of a matmul's result.
      Value y = permOp->getOperand(0);
      Operation* root = y.getDefiningOp();
      while (root && llvm::isa<aten::ViewShapeOp, aten::UnsafeViewOp, aten::ReshapeOp, aten::ReshapeAliasOp>(root))
        root = root->getOperand(0).getDefiningOp();
      if (!root || !llvm::isa<aten::MmOp, aten::AddmmOp>(root)) continue;
      // Only where the ops can then join the matmul's kernel (joinsSplitColumns).
      auto mmType = llvm::cast<RankedTensorType>(root->getResult(0).getType());
      if (auto addmm = llvm::dyn_cast<aten::AddmmOp>(root);
          addmm && !isScalarOrColumnsRow(addmm.getSelf(), mmType.getDimSize(1)))
        continue;
      ArrayRef<int64_t> yShape = llvm::cast<RankedTensorType>(y.getType()).getShape();
      if (aten::trailingDimsOf(yShape, mmType.getDimSize(0), mmType.getDimSize(1)) != 2 ||
          yShape.back() > kMatmulTileColumns)
        continue;
      auto normalized = [&](int64_t d) { return d < 0 ? d + rank : d; };
      // Which ops move: in program order, those whose permuted operands
      // are the permutation or ops that move.
      llvm::DenseSet<Value> domain{permOp->getResult(0)};
      SmallVector<Operation*> moving;
      bool computes = false;
      for (Operation* op = permOp->getNextNode(); op; op = op->getNextNode()) {
        if (op->getNumResults() != 1 || llvm::none_of(op->getOperands(), [&](Value v) { return domain.contains(v); }) ||
            inMiddleFrames.contains(op))
          continue;
        auto rt = llvm::dyn_cast<RankedTensorType>(op->getResult(0).getType());
        if (!rt || rt.getRank() != rank) continue;
        bool ok = false;
        if (auto s = llvm::dyn_cast<aten::SliceTensorOp>(op)) {
          // Along the last dim (the halves of rotate_half), kept last.
          ok = normalized(s.getDim()) == rank - 1 && perm[size_t(rank - 1)] == rank - 1 && s.getStep() == 1;
        } else if (auto c = llvm::dyn_cast<aten::CatOp>(op)) {
          // Only along a dim the permutation keeps last (a cat inside a kernel).
          ok = normalized(c.getDim()) == rank - 1 && perm[size_t(rank - 1)] == rank - 1 &&
               llvm::all_of(c.getTensors(), [&](Value v) { return domain.contains(v); });
        } else if (movesAcrossViews(op)) {
          ok = llvm::all_of(op->getOperands(), [&](Value v) {
            auto vt = llvm::cast<RankedTensorType>(v.getType());
            return domain.contains(v) ? vt.getShape() == rt.getShape() : vt.getRank() <= rank;
          });
          computes |= ok;
        }
        if (!ok) continue;
        domain.insert(op->getResult(0));
        moving.push_back(op);
      }
      if (!computes || (yShape.back() < kMinSplitCatLength &&
                        holdsCat(moving)))
        continue;
      IRMapping mapped;
      mapped.map(permOp->getResult(0), y);
      moveIntoFrame(moving, inverse, mapped, [&](OpBuilder& b, Value m, Type t) {
        Operation* again = b.clone(*permOp);
        again->setOperand(0, m);
        again->getResult(0).setType(t);
        return again->getResult(0);
      });
      if (permOp->use_empty()) permOp->erase();
    }
  }

  // A reduction over dims that are not the trailing ones (softmax over dim 1,
  // a channel norm of NCHW maps: `x - x.mean(1, keepdim=True)`) has no row
  // space, so it would run alone and every op around it in kernels of its
  // own. The reduction and the elementwise ops connected to it whose result
  // has its operand's shape or its result's (the values it reads, those that
  // read it, and so on, with the reductions over the same dims among them)
  // are computed instead in a frame whose last dims are the reduced ones:
  // their inputs are read through a permutation (a view, folded into the
  // loads) and their results, where read outside, through the inverse one.
  // They then form one kernel of whole rows, as a softmax over the last dim
  // does. A lone reduction keeps its permuted access pattern (the same
  // reads), but for a float sum or mean, which becomes a matrix product
  // (sumLeadingDimsByMatmul), and one that reduces SBUF rows
  // (reducesInSbufRows). Ops of other shapes stay out: in this frame,
  // full-size values around a reduction over (0, 2, 3) staged over dim 0
  // would have rows of a few strided elements.
  //
  // A reduction that reduces SBUF rows alone (reducesInSbufRows) with C
  // under 32 stays out of the frame, whose rows would be runs of fewer
  // than 32 elements a row length apart: the ops around it run as kernels
  // of their own, in runs of R x C. bf16 `softmax(x, 1)` of [8192, 16, 2]
  // took 361.2 us in the frame and 171.2 in five kernels, [1024, 64, 16]
  // 197.6 and 150.4, but [512, 16, 32] 54.0 and 58.6 and
  // [128, 128, 128] 76.7 and 404.0; `x - x.mean(1, keepdim=True)` of
  // [8192, 16, 2] 361.1 and 70.7. Not where R x C is under 32: those
  // kernels pack at most R rows of C to a partition (the innermost leading
  // dim), runs shorter still (`softmax(x, 1)` of [32768, 2, 2]: 293.4 us
  // in the frame, 607.2 in kernels).
  // Such a component (in program order) is instead computed in the input's
  // own layout, as one kernel (LowerMiddleFrame.cpp), where a row of R x c
  // elements fits SBUF for some split of C (chooseMiddleFrameSplit): each
  // partition then reads R runs of c elements (short blocks: several rows
  // of R x C in one run), where the permuted frame reads rows of R
  // elements a row apart (runs of one element, or 128-column blocks
  // transposed on the TensorEngine) and short blocks ran as kernels of
  // their own (keptAlone). bf16 `softmax(x, 1)` of [256, 16, 2048] took
  // 1451.3 us in the permuted frame, of [32768, 2, 2] 306.8 in kernels of
  // their own; 273.3 and 13.4 this way. Its ops must read no view of its
  // own values, and every op outside it that reads its values must come
  // after its last op, so that the kernel can be formed there.
  SmallVector<SmallVector<Operation*>> middleFrames;
  // Their ops: the rewrites after reduceInPermutedFrame leave them alone.
  llvm::DenseSet<Operation*> inMiddleFrames;
  // (The split the kernel takes, if it keeps the natural frame.)
  std::optional<MiddleFrameSplit> keepsNaturalFrame(ArrayRef<Operation*> ops, ArrayRef<int64_t> dims,
                                                    ArrayRef<int64_t> fullShape) {
    for (size_t i = 1; i < dims.size(); ++i)
      if (dims[i] != dims[0] + int64_t(i)) return std::nullopt;
    const int64_t C = ShapedType::getNumElements(fullShape.drop_front(size_t(dims.back() + 1)));
    if (C < 2 || ShapedType::getNumElements(fullShape) == 0) return std::nullopt;
    llvm::SmallPtrSet<Operation*, 16> own(ops.begin(), ops.end());
    for (Operation* op : ops) {
      if (isReduction(op) && (!llvm::isa<FloatType>(llvm::cast<RankedTensorType>(op->getOperand(0).getType()).getElementType()) ||
                              !llvm::isa<FloatType>(llvm::cast<RankedTensorType>(op->getResult(0).getType()).getElementType())))
        return std::nullopt;
      for (Value v : op->getOperands()) {
        Operation* def = v.getDefiningOp();
        if (def && !own.contains(def) && aten::isViewOp(def))
          if (Operation* root = chainOf(v).root.getDefiningOp(); root && own.contains(root)) return std::nullopt;
      }
    }
    std::function<bool(Value)> readLate = [&](Value v) {
      return llvm::all_of(v.getUsers(), [&](Operation* user) {
        if (own.contains(user) || llvm::isa<func::ReturnOp>(user)) return true;
        if (aten::isViewOp(user)) return readLate(user->getResult(0));
        return ops.back()->isBeforeInBlock(user);
      });
    };
    if (!llvm::all_of(ops, [&](Operation* op) { return op->getNumResults() == 1 && readLate(op->getResult(0)); }))
      return std::nullopt;
    const int64_t bytes = middleFrameBytesPerElement(ops, ShapedType::getNumElements(fullShape));
    return chooseMiddleFrameSplit(fullShape, dims.front(), dims.back(), bytes, sbufBudgetBytes,
                                  middleFrameReadsOnce(ops, ShapedType::getNumElements(fullShape)));
  }

  // The ops that move into the permuted frame with `reduction` (or form its
  // middle frame): the values of its operand's shape or its result's
  // connected to it through elementwise ops, and the reductions over the
  // same dims among them; none of `visited`.
  llvm::SetVector<Operation*> frameComponent(Operation* reduction, const llvm::DenseSet<Operation*>& visited) {
    SmallVector<int64_t> dims = aten::reducedDims(reduction);
    auto inType = llvm::cast<RankedTensorType>(reduction->getOperand(0).getType());
    int64_t rank = inType.getRank();
    // Values of the reduction's operand shape (whole rows in the frame)
    // and of its result's (per row).
    ArrayRef<int64_t> fullShape = inType.getShape(),
                      rowShape = llvm::cast<RankedTensorType>(reduction->getResult(0).getType()).getShape();
    auto joins = [&](Operation* op) {
      if (op->getBlock() != reduction->getBlock() || op->getNumResults() != 1) return false;
      auto rt = llvm::dyn_cast<RankedTensorType>(op->getResult(0).getType());
      if (!rt || (rt.getShape() != fullShape && rt.getShape() != rowShape)) return false;
      if (isReduction(op))
        return keepdimOf(op) && aten::reducedDims(op) == dims &&
               llvm::cast<RankedTensorType>(op->getOperand(0).getType()).getShape() == fullShape;
      return movesAcrossViews(op) && llvm::all_of(op->getOperands(), [&](Value v) {
               auto vt = llvm::dyn_cast<RankedTensorType>(v.getType());
               return vt && vt.getRank() <= rank;
             });
    };
    llvm::SetVector<Operation*> component;
    component.insert(reduction);
    for (size_t i = 0; i < component.size(); ++i) {
      Operation* op = component[i];
      SmallVector<Operation*> near;
      for (Value v : op->getOperands())
        if (Operation* def = v.getDefiningOp()) near.push_back(def);
      for (Operation* user : op->getResult(0).getUsers()) near.push_back(user);
      for (Operation* n : near)
        if (!component.contains(n) && !visited.contains(n) && joins(n)) component.insert(n);
    }
    return component;
  }

  // The split of the middle frame `reduction` would form in
  // reduceInPermutedFrame (keepsNaturalFrame), if any.
  std::optional<MiddleFrameSplit> middleFrameOf(Operation* reduction) {
    if (!isReduction(reduction) || !keepdimOf(reduction) || rowSpaceOf(reduction)) return std::nullopt;
    SmallVector<int64_t> dims = aten::reducedDims(reduction);
    ArrayRef<int64_t> fullShape = llvm::cast<RankedTensorType>(reduction->getOperand(0).getType()).getShape();
    llvm::SetVector<Operation*> component = frameComponent(reduction, {});
    if (component.size() < 2) return std::nullopt;
    SmallVector<Operation*> ops(component.begin(), component.end());
    llvm::sort(ops, [](Operation* a, Operation* c) { return a->isBeforeInBlock(c); });
    return keepsNaturalFrame(ops, dims, fullShape);
  }

  static bool keptAlone(Operation* op) {
    int64_t columns = 0, reduced = 0;
    return reducesInSbufRows(op, &columns, &reduced) && columns < kShortBlock && reduced * columns >= kShortBlock;
  }
  void reduceInPermutedFrame(func::FuncOp func) {
    SmallVector<Operation*> reductions;
    for (Operation& op : func.getBody().front())
      if (isReduction(&op) && keepdimOf(&op) && !rowSpaceOf(&op)) reductions.push_back(&op);
    llvm::DenseSet<Operation*> visited;
    for (Operation* reduction : reductions) {
      if (visited.contains(reduction)) continue;
      SmallVector<int64_t> dims = aten::reducedDims(reduction);
      const int64_t rank = llvm::cast<RankedTensorType>(reduction->getOperand(0).getType()).getRank();
      ArrayRef<int64_t> fullShape = llvm::cast<RankedTensorType>(reduction->getOperand(0).getType()).getShape();
      llvm::SetVector<Operation*> component = frameComponent(reduction, visited);
      if (component.size() < 2) continue;
      SmallVector<Operation*> moving(component.begin(), component.end());
      llvm::sort(moving, [](Operation* a, Operation* c) { return a->isBeforeInBlock(c); });
      if (keepsNaturalFrame(moving, dims, fullShape)) {
        visited.insert(component.begin(), component.end());
        middleFrames.push_back(moving);
        inMiddleFrames.insert(moving.begin(), moving.end());
        continue;
      }
      // (Another reduction of the component may still take it into the
      // permuted frame.)
      if (keptAlone(reduction)) continue;
      visited.insert(component.begin(), component.end());
      // The frame: the kept dims in order, then the reduced ones.
      SmallVector<int64_t> frame;
      for (int64_t d = 0; d < rank; ++d)
        if (!llvm::is_contained(dims, d)) frame.push_back(d);
      frame.append(dims.begin(), dims.end());
      SmallVector<int64_t> back(rank, 0);
      for (int64_t i = 0; i < rank; ++i) back[size_t(frame[size_t(i)])] = i;
      IRMapping mapped;
      auto readBack = [&](OpBuilder& b, Value m, Type t) -> Value {
        auto view = b.create<aten::PermuteOp>(m.getLoc(), t, m, b.getDenseI64ArrayAttr(back));
        copySourceTags(m.getDefiningOp(), view);
        return view;
      };
      moveIntoFrame(moving, frame, mapped, readBack, /*tagViews=*/true);
    }
  }

  // A matmul transposes its left operand [M, K] (K contiguous) on the
  // TensorEngine, 128 x 128 blocks at a time, once for every block of output
  // columns whose right-operand slices it keeps in SBUF: several times when
  // those slices do not all fit. When the operand is a value computed by
  // another kernel and read only by such matmuls, that kernel stores it
  // transposed ([K, M], through its TensorEngine) and the matmuls read it
  // K-major with no transposes at all (LLaMA's projections after RMSNorm).
  // Read K-major, a [128 x 128] block of the operand has rows of 256 bytes
  // (bf16), so every pass loads it at the DMA's per-run cost: the rewrite is
  // made only where those loads, spread over the DMA queues, stay under the
  // matmuls' TensorEngine time (priced with trn1's device model), so that a
  // kernel bound by the TensorEngine does not become bound by its loads.
  void transposeMatmulOperands(func::FuncOp func) {
    const neff::DeviceParams& device = neff::Trn1();
    const int64_t P = nc::kNumPartitions;
    SmallVector<Operation*> producers;
    for (Operation& op : func.getBody().front())
      if (op.getDialect() && op.getDialect()->getNamespace() == "aten" && !aten::isViewOp(&op) &&
          op.getNumResults() == 1 && !isMatmul(&op) && !inMiddleFrames.contains(&op))
        producers.push_back(&op);
    for (Operation* op : producers) {
      Value r = op->getResult(0);
      auto rt = llvm::dyn_cast<RankedTensorType>(r.getType());
      if (!rt || rt.getRank() < 2 || !aten::isFloatType(rt.getElementType())) continue;
      int64_t K = rt.getShape().back(), M = rt.getNumElements() / std::max<int64_t>(K, 1);
      if (M < 2 * nc::kNumPartitions || K < nc::kNumPartitions) continue;
      // Every use: reshapes keeping the rows, then the left operand of a matmul.
      SmallVector<OpOperand*> lhsUses;
      bool ok = !r.use_empty(), worth = false;
      std::function<void(Value)> visit = [&](Value v) {
        for (OpOperand& use : v.getUses()) {
          Operation* user = use.getOwner();
          if (aten::isRowPreservingReshape(user) && !llvm::isa<aten::CloneOp>(user)) {
            visit(user->getResult(0));
            continue;
          }
          unsigned lhs = llvm::isa<aten::AddmmOp>(user) ? 1 : 0;
          auto vt = llvm::cast<RankedTensorType>(v.getType());
          if (!llvm::isa<aten::MmOp, aten::AddmmOp>(user) || use.getOperandNumber() != lhs || vt.getRank() != 2) {
            ok = false;
            continue;
          }
          auto bt = llvm::cast<RankedTensorType>(user->getOperand(lhs + 1).getType());
          int64_t N = bt.getShape().back(), elemBytes = bt.getElementType().isF32() ? 4 : 2;
          int64_t kTiles = (K + P - 1) / P, nTiles = (N + 511) / 512, mTiles = (M + P - 1) / P;
          // Passes over the operand: one per block of moving slices that fits.
          int64_t passes = (movingSliceBytes(K, N, elemBytes) + kMovingBlockBytes - 1) / kMovingBlockBytes;
          double blockLoadNs = device.dma_fixed_ns + std::max(double(P * P * elemBytes) / neff::DmaQueueBytesPerNs(device),
                                                              double(P) * device.dma_run_ns);
          double matmulNs = (64.0 + 512.0 * (elemBytes == 4 ? 4 : 1) + device.sbuf_access_cycles) / device.tensor_ghz;
          double loadsNs = double(passes * mTiles * kTiles) * blockLoadNs / device.dma_queues;
          double tensorNs = double(mTiles * kTiles * nTiles) * matmulNs;
          worth |= passes > 1 && loadsNs < tensorNs;
          lhsUses.push_back(&use);
        }
      };
      visit(r);
      if (!ok || !worth || lhsUses.empty()) continue;
      OpBuilder b(op->getContext());
      b.setInsertionPointAfter(op);
      Location loc = op->getLoc();
      auto flatType = RankedTensorType::get({M, K}, rt.getElementType());
      Value flat = r;
      if (rt.getRank() != 2)
        flat = b.create<aten::ReshapeOp>(loc, flatType, r, b.getDenseI64ArrayAttr({M, K}))->getResult(0);
      auto tType = RankedTensorType::get({K, M}, rt.getElementType());
      Operation* stored = b.create<aten::TOp>(loc, tType, flat);
      SmallVector<Operation*, 2>& chain = transposedCopyOf[op];
      if (flat != r) chain.push_back(flat.getDefiningOp());
      chain.push_back(stored);
      for (OpOperand* use : lhsUses) {
        b.setInsertionPoint(use->getOwner());
        use->set(b.create<aten::TOp>(loc, flatType, stored->getResult(0))->getResult(0));
      }
    }
    eraseDeadViews(func);  // the reshapes the matmuls no longer read
  }

  // The transposed copy (transposeMatmulOperands) of `op`'s result that the
  // kernel `g` computing it stores: its views join g, which returns it.
  void storeTransposedCopies(Operation* op, int g) {
    auto it = transposedCopyOf.find(op);
    if (it == transposedCopyOf.end()) return;
    Group& grp = groups[size_t(g)];
    for (Operation* view : it->second)
      if (grp.members.insert(view).second) grp.ops.push_back(view);
    Value stored = it->second.back()->getResult(0);
    materializedBy[stored] = g;
    storedLayouts.insert(stored);
  }

  static int64_t bytesOf(Value v) {
    auto t = llvm::cast<RankedTensorType>(v.getType());
    return t.getNumElements() * std::max<int64_t>(1, t.getElementTypeBitWidth() / 8);
  }

  // An elementwise op joins its producer's kernel greedily, before its
  // users are seen. Where every user then sits in one other kernel, that
  // kernel may compute the op itself from the op's operands: fewer HBM
  // bytes when the operands are smaller than the result (a cast to f32) or
  // are written out anyway (the residual sum that a layer norm after a
  // matmul's epilogue reads: before, the matmul kernel also wrote the sum
  // in f32 and its square, 4x the bytes of the sum each). Reverse program
  // order, so a chain moves from its last op back.
  void sinkIntoConsumers() {
    for (Operation* op : llvm::reverse(allOps)) {
      auto git = groupOf.find(op);
      if (git == groupOf.end() || op->getNumResults() != 1 || !movesAcrossViews(op) ||
          transposedCopyOf.count(op) || materializedBy.count(op->getResult(0)))
        continue;
      int from = git->second;
      Group& src = groups[size_t(from)];
      if (!src.fusible || src.merged || src.attention) continue;
      Value result = op->getResult(0);
      int to = -1;
      bool ok = !result.use_empty();
      for (Operation* user : result.getUsers()) {
        auto uit = groupOf.find(user);
        if (uit == groupOf.end() || aten::isViewOp(user) || isMatmul(user) ||
            llvm::isa<aten::EmbeddingOp, aten::CatOp>(user) || (to >= 0 && uit->second != to)) {
          ok = false;
          break;
        }
        to = uit->second;
      }
      if (!ok || to == from) continue;
      Group& dst = groups[size_t(to)];
      if (!dst.fusible || dst.merged || dst.attention || !dst.splitShape.empty() || !src.splitShape.empty()) continue;
      // The kernel keeps another op: emptying it would need its edges redone.
      if (llvm::none_of(src.ops, [&](Operation* o) { return o != op && !aten::isViewOp(o); })) continue;
      auto inGroup = [&](Operation* o, int g) { return o && groupOf.count(o) && groupOf.lookup(o) == g; };
      int64_t before = 2 * bytesOf(result), after = 0;
      for (OpOperand& use : op->getOpOperands()) {
        Value v = use.get();
        if (isInlineConstant(use)) continue;
        Operation* def = v.getDefiningOp();
        bool computedHere = inGroup(def, from) && !aten::isViewOp(def);
        if (!computedHere && def && !llvm::isa<arith::ConstantOp>(def)) {
          ok = false;  // another kernel's value, or one read through views
          break;
        }
        bool readThere = false, writtenAnyway = !computedHere;
        for (Operation* user : v.getUsers()) {
          if (user == op) continue;
          readThere |= inGroup(user, to);
          writtenAnyway |= !inGroup(user, from);
        }
        if (!readThere) after += bytesOf(v);
        if (!writtenAnyway) after += bytesOf(v);
      }
      if (!ok || after >= before) continue;
      std::optional<RowSpace> space = rowSpaceOf(op);
      if (!space || !refusal(op, *space, to, {from}).empty()) continue;
      src.ops.erase(llvm::find(src.ops, op));
      src.members.erase(op);
      src.derived.erase(result);
      dst.ops.push_back(op);
      dst.members.insert(op);
      llvm::sort(dst.ops, [&](Operation* x, Operation* y) { return position.lookup(x) < position.lookup(y); });
      dst.space.cols = std::max(dst.space.cols, space->cols);
      groupOf[op] = to;
    }
  }

  // A kernel of elementwise ops and row reductions whose one product is the
  // left operand [M, K] of a matmul (a LayerNorm or RMSNorm before a
  // projection) joins that matmul's kernel as its prologue: the lowering
  // computes a row tile of the operand in SBUF, in the prologue's own
  // [M x K] rows, and transposes it on the TensorEngine into the stationary
  // slices, as it would a row tile loaded from HBM. The operand then makes
  // no HBM round trip, and the TensorEngine does not idle through a kernel
  // that has no matmul (each kernel's DMA queues run in order, so the next
  // kernel's first loads wait for the norm's last stores). Only where the
  // operand is computed once per row tile: the matmul keeps all its moving
  // slices in one block (or has one row tile), the prologue's rows fit SBUF
  // whole, and nothing else reads what the prologue computes.
  void formPrologues() {
    const int64_t P = nc::kNumPartitions;
    for (size_t ti = 0; ti < groups.size(); ++ti) {
      Group& target = groups[ti];
      if (target.merged || !target.fusible || target.attention || !target.hasMatmul) continue;
      Operation* matmul = nullptr;
      int matmuls = 0;
      for (Operation* op : target.ops)
        if (isMatmul(op)) {
          matmul = op;
          ++matmuls;
        }
      if (matmuls != 1 || !llvm::isa<aten::MmOp, aten::AddmmOp>(matmul)) continue;
      unsigned lhsIndex = llvm::isa<aten::AddmmOp>(matmul) ? 1 : 0;
      Value lhs = matmul->getOperand(lhsIndex), rhs = matmul->getOperand(lhsIndex + 1);
      auto lt = llvm::cast<RankedTensorType>(lhs.getType());
      auto bt = llvm::cast<RankedTensorType>(rhs.getType());
      if (lt.getRank() != 2 || bt.getRank() != 2) continue;
      int64_t M = lt.getDimSize(0), K = lt.getDimSize(1), N = bt.getDimSize(1);
      Chain chain = chainOf(lhs);
      if (!llvm::all_of(chain.ops, [](Operation* o) { return aten::isRowPreservingReshape(o); })) continue;

      Operation* def = chain.root.getDefiningOp();
      if (!def || materializedBy.count(chain.root) || !groupOf.count(def)) continue;
      int gi = groupOf.lookup(def);
      Group& g = groups[size_t(gi)];
      if (gi == int(ti) || g.merged || !g.fusible || g.attention || g.hasMatmul || !g.splitShape.empty()) continue;

      int64_t rows = 1;
      for (int64_t d : g.space.rows) rows *= d;
      if (rows != M || g.space.cols != K || rowBytes(RowSpace{{}, K, true}) > sbufBudgetBytes) continue;
      // One block of moving slices: each row tile's operand is computed once.
      int64_t elemBytes = std::max<int64_t>(2, bt.getElementTypeBitWidth() / 8);
      if (M > P && movingSliceBytes(K, N, elemBytes) > kMovingBlockBytes) continue;
      bool ok = llvm::none_of(g.ops, [&](Operation* o) {
        return llvm::isa<aten::CatOp, aten::EmbeddingOp>(o) || transposedCopyOf.count(o);
      });
      for (auto& [v, owner] : materializedBy) ok &= owner != gi;
      // Everything the prologue computes is read inside it, or is the
      // matmul's left operand (through the chain): nothing is stored.
      std::function<bool(Value)> readInside = [&](Value v) {
        for (OpOperand& use : v.getUses()) {
          Operation* user = use.getOwner();
          if (aten::isViewOp(user) && !llvm::isa<aten::CloneOp>(user)) {
            if (!readInside(user->getResult(0))) return false;
          } else if (!(user == matmul && use.getOperandNumber() == lhsIndex) &&
                     !(g.members.contains(user) && !aten::isViewOp(user))) {
            return false;
          }
        }
        return true;
      };
      for (Operation* o : g.ops)
        if (!aten::isViewOp(o))
          for (Value r : o->getResults()) ok &= !r.use_empty() && readInside(r);
      if (!ok || reachesIndirectly(gi, int(ti))) continue;
      for (Operation* o : g.ops) {
        if (target.members.insert(o).second) target.ops.push_back(o);
        if (auto it = groupOf.find(o); it != groupOf.end()) it->second = int(ti);
      }
      llvm::sort(target.ops, [&](Operation* x, Operation* y) { return position.lookup(x) < position.lookup(y); });
      target.producers.remove(gi);
      for (int p : g.producers)
        if (p != int(ti)) target.producers.insert(p);
      for (Group& other : groups)
        if (other.producers.remove(gi)) other.producers.insert(int(ti));
      target.producers.remove(int(ti));
      g.ops.clear();
      g.members.clear();
      g.producers.clear();
      g.merged = true;
      ++numPrologues;
      if (report)
        matmul->emitRemark() << "computes its left operand in its own kernel (a prologue over [" << M << " x " << K
                             << "] rows)";
    }
  }

  // One kernel for `ops` (a matched pattern, in program order), with the
  // views its inputs are read through (batch dims kept apart along the
  // chains to the values `keepBatchDims` names); its index.
  int formMatchedGroup(ArrayRef<Operation*> ops, llvm::function_ref<bool(Value)> keepBatchDims) {
    int index = int(groups.size());
    groups.push_back(Group{});
    groups.back().fusible = false;
    llvm::SmallPtrSet<Operation*, 16> own(ops.begin(), ops.end());
    for (Operation* op : ops) {
      Group& grp = groups[size_t(index)];
      if (grp.members.insert(op).second) grp.ops.push_back(op);
      groupOf[op] = index;
    }
    for (Operation* op : ops)
      for (Value v : op->getOperands()) {
        if (Operation* def = v.getDefiningOp(); def && own.contains(def)) continue;
        Chain c = foldableChain(v, keepBatchDims(v));
        Group& g = groups[size_t(index)];  // foldableChain may add copy kernels
        for (Operation* view : c.ops)
          if (g.members.insert(view).second) g.ops.push_back(view);
        int producer = producerGroup(c.root);
        if (producer >= 0 && producer != index) g.producers.insert(producer);
      }
    Group& g = groups[size_t(index)];
    llvm::sort(g.ops, [&](Operation* x, Operation* y) { return position.lookup(x) < position.lookup(y); });
    ++numFused;
    return index;
  }

  void formAttention(const AttentionMatch& m) {
    const int index = formMatchedGroup(m.ops(), [&](Value v) { return v == m.query() || v == m.key() || v == m.value(); });
    groups[size_t(index)].hasMatmul = true;
    groups[size_t(index)].attention = true;
  }

  // The ops a kernel ending at `op` would hold if fusion kept its rows
  // whole: `op` and, transitively, the elementwise ops and reductions over
  // the last dim that compute its operands; none if more than 64 (too many
  // to count: taken as a row that cannot stay whole).
  SmallVector<Operation*> rowKernelOf(Operation* op) {
    constexpr size_t kMaxOps = 64;
    SmallVector<Operation*> ops{op};
    llvm::SmallPtrSet<Operation*, 16> seen{op};
    for (size_t i = 0; i < ops.size(); ++i)
      for (Value v : ops[i]->getOperands()) {
        Operation* def = v.getDefiningOp();
        if (!def || seen.contains(def) || def->getNumResults() != 1 || !(aten::isElementwise(def) || isReduction(def)))
          continue;
        SmallVector<int64_t> dims = aten::reducedDims(def);
        auto in = llvm::dyn_cast<RankedTensorType>(def->getOperand(0).getType());
        if (!dims.empty() && (dims.size() != 1 || !in || dims[0] != in.getRank() - 1)) continue;
        if (ops.size() == kMaxOps) return {};
        seen.insert(def);
        ops.push_back(def);
      }
    return ops;
  }

  // An op that needs a reduced value at every element of its row (x - max,
  // e / sum, d * rstd) cannot share the reduction's kernel when the row is
  // too long to stay whole in SBUF (wholeRowsFit, not spread either), so
  // it starts a kernel of its own and reads its full-width operand from
  // HBM: an f32 intermediate (a softmax's exp of a bf16 input, 4 bytes an
  // element) written by the reduction's kernel and read back. Where that
  // operand is a short chain of elementwise ops over graph inputs,
  // constants and per-row values, the op gets a copy of the chain instead,
  // reading the chain's inputs (2 bytes an element for a bf16 input) when
  // that moves fewer bytes; the original chain stays for its other users
  // (the reduction), which then often need not write it out at all. A
  // softmax over 128 rows of 50257 went from 122.7 to 49 MiB of HBM
  // traffic.
  void recomputeLongRowOperands(func::FuncOp func) {
    constexpr int kMaxChain = 8;
    auto shapeOf = [](Value v) { return llvm::cast<RankedTensorType>(v.getType()).getShape(); };
    auto computedElementwise = [](Value v) -> Operation* {
      Operation* def = v.getDefiningOp();
      return def && aten::isElementwise(def) && !isReduction(def) && def->getNumResults() == 1 ? def : nullptr;
    };
    SmallVector<Operation*> candidates;
    for (Operation& op : func.getBody().front())
      if (aten::isElementwise(&op) && !isReduction(&op) && op.getNumResults() == 1 && !inMiddleFrames.contains(&op))
        candidates.push_back(&op);
    // Last op first: once a softmax's division reads its own copy of
    // exp(y - m), the subtraction is left to the normalizer alone and joins
    // the row maximum's kernel with y itself (joinsOnlineSum).
    for (Operation* op : llvm::reverse(candidates)) {
      auto type = llvm::dyn_cast<RankedTensorType>(op->getResult(0).getType());
      if (!type || type.getRank() == 0) continue;
      ArrayRef<int64_t> shape = type.getShape();
      int64_t cols = shape.back(), rows = type.getNumElements() / std::max<int64_t>(cols, 1);
      if (cols <= 1 || spreadRowFits(rows, cols)) continue;
      if (cols > kLoweringChunk && matchOnlineSum(op)) continue;
      std::optional<bool> fitsWhole;  // (estimated once an operand needs it)
      SmallVector<int64_t> perRow(shape);
      perRow.back() = 1;
      // The op's full-width operand e and its per-row operand r, where r is
      // derived from a reduction over the last dim of a value computed from e.
      for (OpOperand& use : op->getOpOperands()) {
        Value e = use.get();
        Operation* eDef = computedElementwise(e);
        if (!eDef || shapeOf(e) != shape || e.hasOneUse()) continue;
        auto reaches = [&](Value from, Value to) {  // through full-width elementwise ops
          SmallVector<Value> stack{from};
          for (int steps = 0; !stack.empty() && steps < 4 * kMaxChain; ++steps) {
            Value v = stack.pop_back_val();
            if (v == to) return true;
            if (Operation* d = computedElementwise(v))
              for (Value o : d->getOperands()) stack.push_back(o);
          }
          return false;
        };
        bool needsReduced = llvm::any_of(op->getOperands(), [&](Value r) {
          if (shapeOf(r) != ArrayRef<int64_t>(perRow)) return false;
          for (int steps = 0; steps < kMaxChain; ++steps) {
            Operation* d = r.getDefiningOp();
            if (!d) return false;
            if (isReduction(d)) {
              SmallVector<int64_t> dims = aten::reducedDims(d);
              auto in = llvm::cast<RankedTensorType>(d->getOperand(0).getType());
              return dims.size() == 1 && dims[0] == in.getRank() - 1 && reaches(d->getOperand(0), e);
            }
            if (!computedElementwise(r)) return false;
            Value next;
            for (Value o : d->getOperands())
              if (shapeOf(o) == ArrayRef<int64_t>(perRow) && o.getDefiningOp()) next = o;
            if (!next) return false;
            r = next;
          }
          return false;
        });
        if (!needsReduced) continue;
        if (!fitsWhole) {
          SmallVector<Operation*> kernelOps = rowKernelOf(op);
          fitsWhole = !kernelOps.empty() && (wholeRowsFit(kernelOps, cols) || residentRowsFit(kernelOps, cols));
        }
        if (*fitsWhole) break;
        // The chain computing e from graph inputs, constants, per-row values
        // and other values read from HBM (its leaves).
        SmallVector<Operation*> chain;
        llvm::SetVector<Value> leaves;
        SmallVector<Value> stack{e};
        bool ok = true;
        while (ok && !stack.empty()) {
          Value v = stack.pop_back_val();
          Operation* d = computedElementwise(v);
          if (!d || shapeOf(v) != shape) {  // an input, constant, view, per-row or other kernel's value
            leaves.insert(v);
            continue;
          }
          if (llvm::is_contained(chain, d)) continue;
          if (int(chain.size()) == kMaxChain) {
            ok = false;
            break;
          }
          chain.push_back(d);
          for (Value o : d->getOperands()) stack.push_back(o);
        }
        if (!ok) continue;
        int64_t leafBytes = 0;
        for (Value l : leaves)
          if (shapeOf(l) == shape) leafBytes += bytesOf(l);
        // e's other users all reductions: once the op reads the copy, the
        // reduction's kernel need not write e either.
        bool onlyReduced = llvm::all_of(e.getUsers(), [&](Operation* u) { return u == op || isReduction(u); });
        if (leafBytes >= bytesOf(e) * (onlyReduced ? 2 : 1)) continue;
        llvm::sort(chain, [](Operation* a, Operation* b) { return a->isBeforeInBlock(b); });
        OpBuilder b(op);
        IRMapping map;
        for (Operation* d : chain) b.clone(*d, map);
        use.set(map.lookup(e));
      }
    }
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // Results nothing reads (a decomposed layer norm's mean and rstd, cast
    // to the input's dtype) would be computed for nothing.
    SmallVector<Operation*> unread;
    for (Operation& op : llvm::reverse(func.getBody().front()))
      if (op.getDialect() && op.getDialect()->getNamespace() == "aten" && op.use_empty()) unread.push_back(&op);
    while (!unread.empty()) {
      Operation* op = unread.pop_back_val();
      SmallVector<Operation*> operands;
      for (Value v : op->getOperands())
        if (Operation* def = v.getDefiningOp()) operands.push_back(def);
      op->erase();
      for (Operation* def : operands)
        if (def->use_empty() && def->getDialect() && def->getDialect()->getNamespace() == "aten" &&
            !llvm::is_contained(unread, def))
          unread.push_back(def);
    }
    groups.clear();
    middleFrames.clear();
    inMiddleFrames.clear();
    groupOf.clear();
    transposedCopyOf.clear();
    materializedBy.clear();
    stageReductions(func);
    if (fuse) {
      sinkSqueezes(func);
      sumLeadingDimsByMatmul(func, /*weighted=*/true);
      reduceInPermutedFrame(func);
      sumLeadingDimsByMatmul(func, /*weighted=*/false);
      recomputeLongRowOperands(func);
      hoistNegationsOutOfCats(func);
      movePermutationsPastEpilogues(func);
      transposeMatmulOperands(func);
    }
    // A returned compile-time constant or graph input, or a value returned
    // a second time, is written out through a clone, like a returned view.
    Operation* ret = func.getBody().front().getTerminator();
    llvm::DenseSet<Value> returned;
    for (OpOperand& operand : ret->getOpOperands()) {
      Value v = operand.get();
      if (returned.insert(v).second && !v.getDefiningOp<arith::ConstantOp>() && !llvm::isa<BlockArgument>(v))
        continue;
      // An output with no elements has nothing to write (the emitter
      // declares it with no kernel).
      if (llvm::cast<RankedTensorType>(v.getType()).getNumElements() == 0) continue;
      OpBuilder b(ret);
      operand.set(b.create<aten::CloneOp>(v.getLoc(), v.getType(), v));
    }
    SmallVector<Operation*> work;
    for (Operation& op : func.getBody().front())
      if (op.getDialect() && op.getDialect()->getNamespace() == "aten") work.push_back(&op);
    llvm::DenseMap<int64_t, int> groupOfSourceId;

    allOps = work;
    materializedBy.clear();
    storedLayouts.clear();
    position.clear();
    for (Operation& op : func.getBody().front()) position[&op] = int(position.size());
    // -O2: each attention is one kernel, formed at its last op (the second
    // bmm), when every value it reads is already computed.
    llvm::DenseMap<Operation*, AttentionMatch> attentionAt;
    llvm::DenseSet<Operation*> inAttention;
    if (fuse)
      for (Operation* op : work)
        if (auto m = matchAttention(op)) {
          SmallVector<Operation*> ops = m->ops();
          if (llvm::any_of(ops, [&](Operation* o) { return inAttention.contains(o); })) continue;
          inAttention.insert(ops.begin(), ops.end());
          attentionAt[op] = *m;
        }
    // A middle-frame component is formed at its last op (keepsNaturalFrame:
    // no op outside it reads its values before that).
    llvm::DenseMap<Operation*, size_t> middleFrameAt;
    llvm::DenseSet<Operation*> inMiddleFrame;
    for (auto [i, ops] : llvm::enumerate(middleFrames)) {
      if (llvm::any_of(ops, [&](Operation* o) { return inAttention.contains(o); })) continue;
      inMiddleFrame.insert(ops.begin(), ops.end());
      middleFrameAt[ops.back()] = i;
    }
    for (Operation* op : work) {
      if (auto it = attentionAt.find(op); it != attentionAt.end()) {
        formAttention(it->second);
        continue;
      }
      if (auto it = middleFrameAt.find(op); it != middleFrameAt.end()) {
        const int index = formMatchedGroup(middleFrames[it->second], [](Value) { return false; });
        groups[size_t(index)].middleFrame = true;
        continue;
      }
      if (inMiddleFrame.contains(op)) continue;
      // -O2: a cat stacking windows of one tensor into a bmm's right operand
      // (WindowOperand.h) is placed with the bmm, as views are, where each
      // window folds into a view of that tensor with one stride along its
      // rows (after a copy of any prefix of views that does not fold: the
      // phases of a strided convolution's input, permuted out of it).
      if (auto cat = llvm::dyn_cast<aten::CatOp>(op); fuse && cat && !inAttention.contains(op)) {
        Operation* bmm = windowedMatmul(cat);
        bool windows = bmm && !inAttention.contains(bmm);
        Value root;
        for (Value piece : cat.getTensors()) {
          if (!windows) break;
          Chain c = foldableChain(piece);
          std::optional<aten::StridedView> v;
          if (!c.ops.empty()) v = aten::viewThrough(c.ops, llvm::cast<RankedTensorType>(c.root.getType()).getShape());
          windows &= v && windowRowStride(*v).has_value() && (!root || c.root == root);
          root = c.root;
        }
        if (windows) op->setAttr(nc::kWindowOperandAttr, UnitAttr::get(op->getContext()));
      }
      // Views are placed with the ops that consume them.
      if (aten::isViewOp(op) || inAttention.contains(op) || isWindowCat(op)) continue;
      std::optional<RowSpace> space = rowSpaceOf(op);
      if (!fuse && llvm::isa<aten::CatOp>(op)) space = std::nullopt;  // -O0: a copy kernel
      SmallVector<int> producer_groups;
      SmallVector<Chain> chains;
      const bool elementwise = space && !space->reduces &&
                               !llvm::isa<aten::MmOp, aten::BmmOp, aten::AddmmOp, aten::EmbeddingOp, aten::CatOp>(op);
      for (Value v : op->getOperands()) {
        chains.push_back(foldableChain(v));
        if (elementwise && copiesTinyTransposedBlocks(chains.back())) {
          makeCopyGroup(chains.back().ops);
          chains.back() = foldableChain(v);
        }
        int g = producerGroup(chains.back().root);
        if (g >= 0 && !llvm::is_contained(producer_groups, g)) producer_groups.push_back(g);
      }
      // The windows a bmm's right operand stacks join its kernel with it.
      Operation* windowCat = nullptr;
      if (auto* def = llvm::isa<aten::BmmOp>(op) ? chains[1].root.getDefiningOp() : nullptr; def && isWindowCat(def)) {
        windowCat = def;
        for (Value piece : def->getOperands()) {
          chains.push_back(chainOf(piece));
          int g = producerGroup(chains.back().root);
          if (g >= 0 && !llvm::is_contained(producer_groups, g)) producer_groups.push_back(g);
        }
      }

      int target = -1;
      if (!fuse) {
        // -O0: ops of one expanded composite share a kernel, nothing else.
        // A composite whose reduced rows exceed the SBUF budget is split.
        if (auto id = op->getAttrOfType<IntegerAttr>(kSourceIdAttr)) {
          auto it = groupOfSourceId.find(id.getInt());
          if (it != groupOfSourceId.end()) {
            std::string why = space ? refusal(op, *space, it->second, producer_groups)
                                    : std::string("it cannot share a kernel");
            if (why.empty()) target = it->second;
            else if (report)
              op->emitRemark() << "composite split into another kernel: " << why;
          }
        }
      } else if (int nested = space ? -1 : nestedCatGroup(op); nested >= 0) {
        target = nested;
      } else if (!space) {
        if (report)
          op->emitRemark(llvm::isa<aten::CatOp>(op)
                             ? "cannot share a kernel: a cat other than along the last dim of one float dtype is "
                               "a copy kernel of its own"
                             : "cannot share a kernel: reductions over non-trailing dims are not fused");
      } else {
        // Latest producer first: it is the one most likely to hold live rows.
        for (int g : llvm::reverse(producer_groups)) {
          std::string why = refusal(op, *space, g, producer_groups);
          if (why.empty()) { target = g; break; }
          if (report)
            op->emitRemark() << "not fused into kernel of '"
                             << groups[size_t(g)].ops.front()->getName() << "': " << why;
        }
      }
      bool started = target < 0;
      if (target < 0) {
        target = int(groups.size());
        groups.push_back(Group{});
        groups.back().space = space.value_or(RowSpace{});
        groups.back().fusible = space.has_value();
        if (auto id = op->getAttrOfType<IntegerAttr>(kSourceIdAttr))
          groupOfSourceId[id.getInt()] = target;
      } else {
        ++numFused;
        if (!space) groups[size_t(target)].fusible = false;  // a nested cat: its copy kernel takes nothing more
        if (space) {
          if (Group& grp = groups[size_t(target)]; needsLongWholeRows(op, *space, grp)) {
            if (spreadKeepsRows(op, *space, grp)) grp.spreadRows = true;
            else grp.residentRows = true;
          }
          RowSpace& gs = groups[size_t(target)].space;
          gs.cols = std::max(gs.cols, space->cols);
          gs.reduces |= space->reduces;
        }
      }
      if (fuse && space && !started && joinsSplitColumns(op, *space, target))
        groups[size_t(target)].splitShape.assign(llvm::cast<RankedTensorType>(op->getResult(0).getType()).getShape().begin(),
                                                 llvm::cast<RankedTensorType>(op->getResult(0).getType()).getShape().end());
      Group& grp = groups[size_t(target)];
      grp.hasMatmul |= isMatmul(op);
      for (const Chain& c : chains)
        for (Operation* view : c.ops)
          if (grp.members.insert(view).second) grp.ops.push_back(view);
      if (windowCat) {
        grp.members.insert(windowCat);
        grp.ops.push_back(windowCat);
        groupOf[windowCat] = target;
        llvm::sort(grp.ops, [&](Operation* x, Operation* y) { return position.lookup(x) < position.lookup(y); });
      }
      if (isReduction(op) ||
          llvm::any_of(op->getOperands(), [&](Value v) { return isDerived(grp, v); }))
        grp.derived.insert(op->getResult(0));
      grp.ops.push_back(op);
      grp.members.insert(op);
      groupOf[op] = target;
      if (fuse && space) storeTransposedCopies(op, target);
      for (int p : producer_groups)
        if (p != target) grp.producers.insert(p);
      // Sibling kernels whose results meet here (exp(x) * tanh(x)) become one.
      if (fuse && space && !started && groups[size_t(target)].fusible)
        for (int p : producer_groups) {
          if (p == target || groups[size_t(p)].merged) continue;
          std::string why = mergeRefusal(p, target);
          if (why.empty()) {
            mergeInto(p, target);
            continue;
          }
          if (report)
            op->emitRemark() << "sibling kernel of '" << groups[size_t(p)].ops.front()->getName()
                             << "' not merged: " << why;
        }
      if (report && fuse && started && space && producer_groups.empty())
        op->emitRemark("starts a kernel: it reads no value computed in another kernel");
    }
    if (fuse) sinkIntoConsumers();
    if (fuse) formPrologues();
    // A view the graph returns of a value a kernel computes is stored by
    // that kernel through the view's inverse access pattern when the view is
    // one-to-one; any other returned view is written out by a copy kernel.
    for (Value v : func.getBody().front().getTerminator()->getOperands()) {
      Chain c = chainOf(v);
      if (c.ops.empty() || materializedBy.count(v)) continue;
      int g = producerGroup(c.root);
      // The lowering stores through the whole chain back to the computed
      // value (through returned views too), so that chain must invert.
      SmallVector<Operation*> whole;
      aten::viewChainRoot(v, &whole);
      aten::StridedView inverse;
      // Whether each view of the chain is the only reader of the value
      // before it (and one `fits`).
      auto readOnceThrough = [&](llvm::function_ref<bool(Operation*)> fits) {
        Value link = c.root;
        for (Operation* view : c.ops) {
          if (!fits(view) || !link.hasOneUse() || *link.getUsers().begin() != view) return false;
          link = view->getResult(0);
        }
        return true;
      };
      // An attention kernel returns one value (LowerAttention.cpp): it may
      // store a returned view of its output that nothing else reads.
      auto onlyThisView = [&]() {
        return readOnceThrough([](Operation*) { return true; }) &&
               llvm::all_of(v.getUsers(), [](Operation* u) { return llvm::isa<func::ReturnOp>(u); }) &&
               llvm::none_of(materializedBy, [&](const auto& entry) { return entry.second == g; });
      };
      // A middle-frame kernel writes a returned chain of reshapes (each
      // read once) of its value as that value's elements in order.
      const bool reshapedMiddleFrame = g >= 0 && groups[size_t(g)].middleFrame && readOnceThrough([](Operation* view) {
        return llvm::isa<aten::ViewShapeOp, aten::UnsafeViewOp, aten::ReshapeOp, aten::ReshapeAliasOp,
                         aten::UnsqueezeOp, aten::SqueezeDimOp>(view);
      });
      bool storable = g >= 0 && (groups[size_t(g)].fusible || (groups[size_t(g)].attention && onlyThisView()));
      if (reshapedMiddleFrame || (storable && !groups[size_t(g)].merged && !llvm::isa<BlockArgument>(c.root) &&
                                  aten::invertViewChain(whole, inverse, groups[size_t(g)].attention))) {
        Group& grp = groups[size_t(g)];
        for (Operation* o : c.ops)
          if (grp.members.insert(o).second) grp.ops.push_back(o);
        llvm::sort(grp.ops, [&](Operation* x, Operation* y) { return position.lookup(x) < position.lookup(y); });
        materializedBy[v] = g;
        continue;
      }
      c = foldableChain(v);
      const bool joined = !c.ops.empty() && joinCopyKernel(c, v);
      if (report && g >= 0 && !joined)
        v.getDefiningOp()->emitRemark("returned view is written by a copy kernel: it is not one-to-one "
                                      "or its producer kernel cannot be fused");
      if (!c.ops.empty() && !joined) makeCopyGroup(c.ops);
    }
    if (failed(materialize(func))) {
      func->setAttr(kInternalErrorAttr, UnitAttr::get(func.getContext()));
      signalPassFailure();
    }
  }

  // Kahn's algorithm; among ready kernels the one whose first op came first.
  SmallVector<int> topologicalOrder() {
    size_t n = groups.size(), live = 0;
    SmallVector<int> indegree(n, 0), order;
    std::vector<bool> done(n, false);
    for (size_t g = 0; g < n; ++g) {
      indegree[g] = int(groups[g].producers.size());
      done[g] = groups[g].merged;
      live += !groups[g].merged;
    }
    while (order.size() < live) {
      int pick = -1;
      for (size_t g = 0; g < n; ++g)
        if (!done[g] && indegree[g] == 0) { pick = int(g); break; }
      assert(pick >= 0 && "kernel graph has a cycle");
      done[size_t(pick)] = true;
      order.push_back(pick);
      for (size_t g = 0; g < n; ++g)
        if (groups[g].producers.contains(pick)) --indegree[g];
    }
    return order;
  }

  LogicalResult materialize(func::FuncOp func) {
    Operation* terminator = func.getBody().front().getTerminator();
    OpBuilder b(terminator);
    IRMapping outer;  // original value -> kernel result
    // A view is cloned into every kernel that reads through it.
    llvm::DenseMap<Operation*, SmallVector<int, 2>> groupsOfView;
    for (auto [g, grp] : llvm::enumerate(groups))
      for (Operation* op : grp.ops)
        if (aten::isViewOp(op)) groupsOfView[op].push_back(int(g));
    int index = 0;
    for (int g : topologicalOrder()) {
      Group& grp = groups[size_t(g)];
      llvm::SmallPtrSet<Operation*, 16> members(grp.ops.begin(), grp.ops.end());
      // Used outside the kernel: by an op of another kernel (a view may be a
      // member here and in another kernel at once) or by the return.
      auto usedOutside = [&](Operation* user) {
        if (!members.contains(user)) return true;
        auto it = groupsOfView.find(user);
        return it != groupsOfView.end() && llvm::any_of(it->second, [&](int other) { return other != g; });
      };
      llvm::SetVector<Value> inputs, outputs;
      for (Operation* op : grp.ops) {
        for (OpOperand& use : op->getOpOperands()) {
          Operation* def = use.get().getDefiningOp();
          if ((def && members.contains(def)) || isInlineConstant(use)) continue;
          inputs.insert(use.get());
        }
        for (Value r : op->getResults()) {
          if (aten::isViewOp(op)) {
            // Views are cloned into every kernel that reads them; only a copy
            // kernel's final view leaves its kernel.
            if (materializedBy.lookup(r) == g && materializedBy.count(r)) outputs.insert(r);
            continue;
          }
          if (llvm::any_of(r.getUsers(), usedOutside)) outputs.insert(r);
        }
      }
      // Source ops, one entry per original ATen op (an expanded composite once).
      SmallVector<Attribute> sources;
      llvm::DenseMap<int64_t, int> sourceIndexOfId;
      SmallVector<int> sourceIndex;
      for (Operation* op : grp.ops) {
        auto id = op->getAttrOfType<IntegerAttr>(kSourceIdAttr);
        if (id && sourceIndexOfId.count(id.getInt())) {
          sourceIndex.push_back(sourceIndexOfId[id.getInt()]);
          continue;
        }
        if (id) sourceIndexOfId[id.getInt()] = int(sources.size());
        sourceIndex.push_back(int(sources.size()));
        sources.push_back(b.getStringAttr(sourceName(op)));
      }
      SmallVector<Value> kernel_inputs;
      for (Value v : inputs) {
        // Every input is a graph input, a constant or an earlier kernel's result.
        Value mapped = outer.lookupOrDefault(v);
        Operation* def = mapped.getDefiningOp();
        if (def && !llvm::isa<arith::ConstantOp, nc::KernelOp>(def))
          return grp.ops.front()->emitError("internal compiler error in ncc-form-kernels: kernel ")
                 << index << " reads a value no earlier kernel produces";
        kernel_inputs.push_back(mapped);
      }
      SmallVector<Type> result_types;
      SmallVector<Attribute> result_sources;
      for (Value v : outputs) {
        result_types.push_back(v.getType());
        result_sources.push_back(b.getStringAttr(resultSource(v.getDefiningOp())));
      }
      // A kernel is named after its op, or after the distinct ops it fuses.
      std::string name = "k" + std::to_string(index++) + "_";
      if (grp.attention) {
        name += "attention";
      } else if (sources.size() == 1) {
        name += shortName(llvm::cast<StringAttr>(sources.front()).getValue());
      } else {
        SmallVector<std::string> parts;
        for (Attribute a : sources) {
          std::string part = shortName(llvm::cast<StringAttr>(a).getValue());
          if (!llvm::is_contained(parts, part)) parts.push_back(part);
        }
        name += "fused";
        for (size_t i = 0; i < parts.size() && i < 4; ++i) name += "_" + parts[i];
        if (parts.size() > 4) name += "_etc";
      }
      auto kernel = b.create<nc::KernelOp>(grp.ops.front()->getLoc(), result_types,
                                           b.getStringAttr(name), kernel_inputs,
                                           b.getArrayAttr(sources), b.getArrayAttr(result_sources));
      if (grp.attention) kernel->setAttr(nc::kAttentionAttr, b.getUnitAttr());
      if (grp.residentRows) kernel->setAttr(nc::kResidentRowsAttr, b.getUnitAttr());
      if (grp.middleFrame) kernel->setAttr(nc::kMiddleFrameAttr, b.getUnitAttr());
      Block* body = new Block();
      kernel.getBody().push_back(body);
      IRMapping inner;
      for (Value v : inputs) inner.map(v, body->addArgument(v.getType(), v.getLoc()));
      OpBuilder kb = OpBuilder::atBlockEnd(body);
      for (auto [i, op] : llvm::enumerate(grp.ops)) {
        for (OpOperand& use : op->getOpOperands())
          if (isInlineConstant(use) && !inner.contains(use.get())) kb.clone(*use.get().getDefiningOp(), inner);
        Operation* copy = kb.clone(*op, inner);
        copy->setAttr("nc.source_index", kb.getI64IntegerAttr(sourceIndex[i]));
      }
      SmallVector<Value> yielded;
      for (Value v : outputs) yielded.push_back(inner.lookup(v));
      kb.create<nc::YieldOp>(kernel.getLoc(), yielded);
      for (auto [v, r] : llvm::zip(outputs, kernel.getResults())) outer.map(v, r);
      // The pieces of one expanded composite share its source id: at -O0 the
      // emitter launches consecutive kernels of one source op as one dispatch.
      auto firstId = grp.ops.front()->getAttrOfType<IntegerAttr>(kSourceIdAttr);
      if (firstId && llvm::all_of(grp.ops, [&](Operation* op) {
            return op->getAttrOfType<IntegerAttr>(kSourceIdAttr) == firstId;
          }))
        kernel->setAttr(kSourceIdAttr, firstId);
      ++numKernels;
    }
    for (OpOperand& operand : terminator->getOpOperands())
      operand.set(outer.lookupOrDefault(operand.get()));
    for (Operation* op : llvm::reverse(allOps)) {
      for (Value r : op->getResults())
        if (outer.contains(r)) r.replaceAllUsesWith(outer.lookup(r));
      op->erase();
    }
    SmallVector<Operation*> dead;
    for (Operation& op : func.getBody().front())
      if (llvm::isa<arith::ConstantOp>(op) && op.use_empty()) dead.push_back(&op);
    for (Operation* op : dead) op->erase();
    return success();
  }
};

}  // namespace
}  // namespace neuroncc
