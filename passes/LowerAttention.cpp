//===- LowerAttention.cpp - one attention kernel as a flash attention -------===//
//
// softmax(f(Q @ K)) @ V (passes/AttentionPattern.h) for each batch b and
// block of up to 128 query rows, over blocks of up to 512 keys, with an
// online softmax: the scores of a block go from PSUM through f and the
// running row maximum m into exp(x - m) in SBUF, never to HBM. Per block:
//
//   S   = Q^T-slices x K^T-slices                     TensorEngine, PSUM [q x k]
//   x   = f(S)                                        the kernel's elementwise ops
//   m'  = max(m, rowmax(x));  a = exp(m - m')
//   E   = exp(x - m'),  l' = a * l + rowsum(E)        scalar engine (bias -m', accum)
//   E^T = transposes of E in 128-key chunks           TensorEngine, PSUM -> SBUF
//   O'  = a * O + E^T-chunks x V-chunks               TensorEngine, then vector
//
// and at the end O / l is stored. Q^T and K^T come from rows loaded with
// contiguous runs and transposed on the TensorEngine (LowerMatmul.cpp's
// operand slices); K^T and V stay in SBUF for all query blocks of a batch
// when they fit.
//
// Skipped blocks. Where f ends with a mask (masked_fill, or where with a
// constant branch; casts may follow) whose condition is a compile-time
// constant, each 128-key chunk of a query block is classified: a chunk the
// mask fills entirely with -inf contributes exp(-inf - m) = 0 and is never
// computed (the causal mask's upper chunks). Key blocks are runs of the
// other chunks within one 512-key block of K^T; the mask op is applied in
// place to the chunks it touches only (the causal diagonal), not to the
// block. A finite fill of -1e30 or below is skipped as well
// when every query row has an unmasked key: exp(fill - m) is then 0 in f32
// for any row maximum above fill + 104, as in eager.
//
// Interleaving. Query blocks go in groups of eight, step by step (see
// lowerAttention), so that the engines' in-order queues overlap.
//
// Diagonal packs. Short heads that read their own K and V go several to a
// pass, their scores side by side with the blocks off the diagonal set to
// -inf (lowerDiagonalPacks).
//
// A row whose every score is -inf gives 0 / 0 = NaN, as eager does: the
// running maximum starts at -FLT_MAX, so that a fully masked block gives
// exp(-inf) = 0 instead of NaN from -inf - -inf.
//
//===----------------------------------------------------------------------===//

#include <cfloat>
#include <cmath>

#include "passes/AttentionPattern.h"
#include "passes/KernelLowering.h"
#include "llvm/ADT/ScopeExit.h"

namespace neuroncc::lowering {

namespace {
constexpr int64_t kKeyBlock = 512;  // one PSUM bank of f32 scores per query row
constexpr int64_t kGroup = 8;       // query blocks interleaved step by step
// K^T and V of one batch stay in SBUF for all its query blocks up to this
// many bytes per partition; beyond, each block loads its own.
constexpr int64_t kKeepKeysBytes = 48 * 1024;
// Head groups (lowerAttention): heads whose rows are shorter than this
// share their loads and stores, up to kHeads of them, holding at most
// kHeadGroupBytes per partition of panels and outputs across the group.
// Short sequences gain (8 x 12 heads of 128 tokens, d = 64: the attention
// kernel 150.0 -> 97.8 us); over long ones the kernel is bound by its
// engines, and groups held longer only delay the next kernel (GPT-2-medium,
// 1024 tokens: 634.6 us ungrouped, 652.7 with groups of 4 heads, 648.2 of
// 2; benchmarks/roofline_bench.py): 4 KiB keeps its heads apart.
constexpr int64_t kMinHeadRunBytes = 512;
constexpr int64_t kHeads = 8;
constexpr int64_t kHeadGroupBytes = 4 * 1024;
// Diagonal packs (lowerDiagonalPacks) whose rows of Q and K load together:
// 64 x 12 heads of 16 tokens (bf16, d = 64) 134.7 us a pack at a time,
// 119.5 two at a time, 122.9 four (fewer, longer transfers over the queues).
constexpr int64_t kSharedPacks = 2;
// Finite fills at or below this count as -inf for skipping (see above).
constexpr double kSkippableFill = -1e30;

ArrayRef<int64_t> shapeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()).getShape(); }
// The element type the device holds a tensor value in.
Type deviceElem(Value v) { return nc::deviceElementType(llvm::cast<RankedTensorType>(v.getType()).getElementType()); }

// A batched matmul's operand or result in HBM, [batch..., rows, cols]: the
// leading dims flatten row-major into its one batch dim. There may be more
// of them than the tensor has (a head split of several sequences, [b, h]
// with strides that do not merge: aten::regroupsLeadingDims).
struct MatrixView {
  const aten::StridedView& v;
  size_t rank() const { return v.shape.size(); }
  int64_t rows() const { return v.shape[rank() - 2]; }
  int64_t cols() const { return v.shape[rank() - 1]; }
  int64_t rowStride() const { return v.strides[rank() - 2]; }
  int64_t colStride() const { return v.strides[rank() - 1]; }
  int64_t batches() const {
    int64_t n = 1;
    for (size_t j = 0; j + 2 < rank(); ++j) n *= v.shape[j];
    return n;
  }
  // The element offset of batch b's [0, 0].
  int64_t at(int64_t b) const {
    int64_t offset = v.offset;
    for (size_t j = rank() - 2; j-- > 0;) {
      offset += b % v.shape[j] * v.strides[j];
      b /= v.shape[j];
    }
    return offset;
  }
};

// The heads of the diagonal pack that starts at batch `first`, or 0 where
// none does (packs start at multiples of `heads` along the step's runs).
int64_t headsOfPackAt(int64_t first, const DiagonalPacking& packing) {
  const int64_t index = first / packing.step % packing.extent;
  return index % packing.heads == 0 ? std::min(packing.heads, packing.extent - index) : 0;
}

// Diagonal packs (KernelLowering::lowerDiagonalPacks): the batches along a
// step of the flattened batch index whose query rows and keys run on, one
// batch after another, at one stride (the heads of `[b, h, s, d]`, step 1;
// the sequences of one head of `[b, s, h * d]` read per head, step h), in
// packs of up to `heads`; none (heads 1) where no step gives two.
DiagonalPacking planDiagonalPacks(const MatrixView& Q, const MatrixView& K, const MatrixView& V, const MatrixView& O,
                                  int64_t maxHeads) {
  DiagonalPacking best;
  const int64_t batches = Q.batches(), S = Q.rows(), T = K.cols();
  if (maxHeads < 2 || batches < 2) return best;
  // The pack of `first` (its index along the step a multiple of the pack's
  // size) holds batches first + i * step, i < count: their rows of Q, keys
  // of K, and V's and the output's rows each at one distance.
  auto packs = [&](int64_t step, int64_t extent, int64_t heads) {
    for (int64_t first = 0; first < batches; ++first) {
      const int64_t count = headsOfPackAt(first, {step, extent, heads});
      if (count < 2) continue;
      const int64_t q = Q.at(first + step) - Q.at(first), k = K.at(first + step) - K.at(first);
      const int64_t v = V.at(first + step) - V.at(first), o = O.at(first + step) - O.at(first);
      if ((S > 1 && q != S * Q.rowStride()) || (T > 1 && k != T * K.colStride())) return false;
      for (int64_t i = 2; i < count; ++i) {
        const int64_t n = first + i * step;
        if (Q.at(n) != Q.at(first) + i * q || K.at(n) != K.at(first) + i * k || V.at(n) != V.at(first) + i * v ||
            O.at(n) != O.at(first) + i * o)
          return false;
      }
    }
    return true;
  };
  // Steps and extents: the batch dims of Q's view from dim j to dim i
  // (innermost first), flattened.
  const size_t dims = Q.rank() - 2;
  for (size_t j = dims; j-- > 0;) {
    int64_t step = 1;
    for (size_t d = j + 1; d < dims; ++d) step *= Q.v.shape[d];
    int64_t extent = 1;
    for (size_t i = j + 1; i-- > 0;) {
      extent *= Q.v.shape[i];
      if (extent < 2) continue;
      // Packs of equal size as far as the extent allows.
      const int64_t count = (extent + maxHeads - 1) / maxHeads, heads = (extent + count - 1) / count;
      if (heads > best.heads && packs(step, extent, heads)) best = {step, extent, heads};
    }
  }
  return best;
}

}  // namespace

// A mask at the end of f with a compile-time condition: per block, whether
// it fills everything (the block is skipped), nothing (the op is skipped),
// or some elements.
struct KernelLowering::AttentionMask {
  Operation* op = nullptr;
  std::vector<char> fills;  // per [batch row, key] of the softmax's space: 1 where the fill is taken
  bool perBatch = false;    // the condition varies along the batch dims
  bool skippable = false;   // fully filled blocks may be skipped
  int64_t S = 0, T = 0;
  enum Class { None, Some, All };
  // Rows q0 .. q0 + p of batch `batch` and the batches after it (a query
  // block of packed batches runs on into them).
  Class classify(int64_t batch, int64_t q0, int64_t p, int64_t k0, int64_t nk) const {
    bool any = false, all = true;
    for (int64_t q = q0; q < q0 + p; ++q)
      for (int64_t k = k0; k < k0 + nk; ++k) {
        bool f = fills[size_t((perBatch ? batch * S + q : q % S) * T + k)];
        any |= f;
        all &= f;
      }
    return all ? All : any ? Some : None;
  }
};

std::optional<KernelLowering::AttentionMask> KernelLowering::attentionMask(const AttentionMatch& m) {
  // The last op before the softmax other than casts (a cast keeps -inf).
  size_t last = m.transforms.size();
  while (last > 0 && llvm::isa<aten::ToCopyOp>(m.transforms[last - 1])) --last;
  if (last == 0) return std::nullopt;
  Operation* op = m.transforms[last - 1];
  Value cond, fillValue;
  bool fillWhenTrue = true;
  double fill = 0;
  Value chainIn = last > 1 ? m.transforms[last - 2]->getResult(0) : m.shapedScores();
  if (auto mf = llvm::dyn_cast<aten::MaskedFillScalarOp>(op)) {
    if (mf.getSelf() != chainIn) return std::nullopt;
    cond = mf.getMask();
    fill = mf.getValue().convertToDouble();
  } else if (auto w = llvm::dyn_cast<aten::WhereSelfOp>(op)) {
    cond = w.getCondition();
    fillWhenTrue = w.getOther() == chainIn;
    fillValue = fillWhenTrue ? w.getSelf() : w.getOther();
    if ((fillWhenTrue ? w.getOther() : w.getSelf()) != chainIn) return std::nullopt;
    auto it = layouts.find(fillValue);
    if (it == layouts.end() || it->second.kind != Kind::Imm) return std::nullopt;
    fill = it->second.imm;
  } else {
    return std::nullopt;
  }
  // The condition: a constant kernel input (or a view of one).
  auto vit = viewOf.find(cond);
  if (vit == viewOf.end()) return std::nullopt;
  Value root = cond;
  while (Operation* def = root.getDefiningOp()) root = def->getOperand(0);
  auto arg = llvm::dyn_cast<BlockArgument>(root);
  if (!arg) return std::nullopt;
  auto constant = kernel.getInputs()[arg.getArgNumber()].getDefiningOp<arith::ConstantOp>();
  auto dense = constant ? llvm::dyn_cast<DenseElementsAttr>(constant.getValue()) : DenseElementsAttr();
  if (!dense || !dense.getElementType().isInteger(1)) return std::nullopt;
  SmallVector<bool> values(dense.getValues<bool>());
  Layout l;
  if (failed(layoutOfView(vit->second, l))) return std::nullopt;
  AttentionMask mask;
  mask.op = op;
  ArrayRef<int64_t> shape = shapeOf(m.softmaxInput());
  mask.S = shape[shape.size() - 2];
  mask.T = shape.back();
  // The batch dims are all but the last row dim.
  mask.perBatch = llvm::any_of(ArrayRef<int64_t>(l.rowStrides).drop_back(), [](int64_t s) { return s != 0; });
  int64_t rows = mask.perBatch ? space.rows : mask.S;
  int64_t colStride = l.colStrides.back();
  mask.fills.resize(size_t(rows * mask.T));
  SmallVector<int64_t> offs = rowOffsets(l, 0, rows);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < mask.T; ++k) {
      int64_t at = l.offset + offs[size_t(r)] + k * colStride;
      if (at < 0 || at >= int64_t(values.size())) return std::nullopt;
      mask.fills[size_t(r * mask.T + k)] = values[size_t(at)] == fillWhenTrue;
    }
  // Only casts may follow the mask for its fill to reach the softmax as is.
  if (std::isinf(fill) && fill < 0) {
    mask.skippable = true;
  } else if (fill <= kSkippableFill) {
    mask.skippable = true;
    for (int64_t r = 0; r < rows && mask.skippable; ++r)
      mask.skippable = llvm::any_of(ArrayRef<char>(mask.fills).slice(size_t(r * mask.T), size_t(mask.T)),
                                    [](char f) { return !f; });
  }
  return mask;
}

// The mask of a key block applied to the column ranges it touches
// (`masked`, from the block's start k0), each written in place over the
// scores; the other columns keep them as they are. The whole block is
// masked instead where the scores' tile cannot take the result in place
// (in PSUM, or of another dtype): the result is the same, at the cost of
// the wider select.
LogicalResult KernelLowering::lowerMaskInPlace(Operation* op, Value chainIn, int64_t p, int64_t k0, int64_t nk,
                                               ArrayRef<std::pair<int64_t, int64_t>> masked) {
  Value scores = tiles[chainIn], result = op->getResult(0);
  auto type = llvm::dyn_cast<MemRefType>(scores.getType());
  Type elem = nc::deviceElementType(llvm::cast<RankedTensorType>(result.getType()).getElementType());
  bool whole = masked.size() == 1 && masked.front().first == 0 && masked.front().second == nk;
  if (whole || !type || nc::isPsumTile(type) || type.getElementType() != elem || layouts[chainIn].kind != Kind::Full)
    return lowerOp(op, p, nk);
  // The mask's condition is loaded for each column range.
  auto forgetLoads = [&] {
    for (Value v : op->getOperands())
      if (v != chainIn && viewOf.count(v)) tiles.erase(v);
  };
  const int64_t blockC0 = c0, blockColumns = inputColumns;
  for (auto [column, n] : masked) {
    forgetLoads();
    Value slice = tileColumns(*b, loc, scores, column, n);
    tiles[chainIn] = slice;
    c0 = k0 + column;
    inputColumns = n;
    if (failed(lowerOp(op, p, n))) return failure();
    Value out = tiles[result];
    auto alloc = out.getDefiningOp<nc::AllocTileOp>();
    if (!alloc || out.getType() != slice.getType())
      return op->emitError("internal: an attention mask's result is not a tile of its scores' type");
    out.replaceAllUsesWith(slice);
    alloc.erase();
  }
  forgetLoads();
  c0 = blockC0;
  inputColumns = blockColumns;
  tiles[chainIn] = scores;
  tiles[result] = scores;
  layouts[result] = layouts.lookup(chainIn);
  return success();
}

LogicalResult KernelLowering::runAttention(int64_t& instructions, int64_t& dmas) {
  Block& old = kernel.getBody().front();
  auto yield = llvm::cast<nc::YieldOp>(old.getTerminator());
  std::optional<AttentionMatch> match;
  // The kernel returns the attention's output, or a one-to-one view of it
  // (the head merge's transpose) that it stores through the inverse pattern.
  SmallVector<Operation*> outputViews;
  if (yield.getValues().size() == 1) {
    Value v = yield.getValues().front();
    while (Operation* def = v.getDefiningOp()) {
      if (!aten::isViewOp(def)) break;
      outputViews.push_back(def);
      v = def->getOperand(0);
    }
    std::reverse(outputViews.begin(), outputViews.end());
    match = matchAttention(v.getDefiningOp());
  }
  if (!match) return kernel.emitError("internal: the ops of an attention kernel do not form an attention");
  const AttentionMatch& m = *match;
  aten::StridedView outLayout = aten::contiguousView(shapeOf(m.output->getResult(0)));
  if (!outputViews.empty() && !aten::invertViewChain(outputViews, outLayout, /*keepBatchDims=*/true))
    return kernel.emitError("internal: an attention kernel returns a view of its output that is not one-to-one");
  // Views of the inputs fold into access patterns; the pattern's own views
  // (of the scores and the probabilities) are regroupings the loop follows.
  for (BlockArgument arg : old.getArguments())
    viewOf[arg] = aten::contiguousView(shapeOf(arg));
  // The views that lead to the matmuls' operands may keep batch dims that
  // do not merge apart (the batch index splits over them: MatrixView).
  llvm::DenseSet<Value> towardOperands;
  for (Value v : {m.query(), m.key(), m.value()})
    for (Operation* def = v.getDefiningOp(); def && aten::isViewOp(def); def = def->getOperand(0).getDefiningOp())
      towardOperands.insert(def->getResult(0));
  for (Operation& op : old.without_terminator()) {
    if (!aten::isViewOp(&op) || llvm::is_contained(outputViews, &op)) continue;
    auto in = viewOf.find(op.getOperand(0));
    if (in == viewOf.end()) continue;
    std::string error;
    aten::StridedView out;
    bool ok = towardOperands.contains(op.getResult(0))
                  ? aten::applyBatchedView(&op, in->second, out, &error)
                  : aten::applyView(&op, in->second, out, &error);
    if (!ok) return op.emitError(error);
    viewOf[op.getResult(0)] = out;
    // A view that keeps batch dims apart reads right only along the chain
    // to a matmul operand.
    if (ArrayRef<int64_t>(out.shape) != shapeOf(op.getResult(0)))
      for (Operation* user : op.getResult(0).getUsers())
        if (!(user == m.scores || user == m.output ||
              (aten::isViewOp(user) && towardOperands.contains(user->getResult(0)))))
          return op.emitError("internal: a view of heads with unmerged batch dims is read outside the attention's "
                              "matmuls");
  }
  for (Value v : {m.query(), m.key(), m.value()})
    if (!viewOf.count(v)) return kernel.emitError("internal: an attention operand is not read from HBM");
  // The iteration space: the softmax's rows [L..., S] by its T columns.
  ArrayRef<int64_t> shape = shapeOf(m.softmaxInput());
  space = Space{};
  space.lead.assign(shape.begin(), shape.end() - 1);
  space.trail.assign(1, shape.back());
  space.rows = product(space.lead);
  space.cols = shape.back();
  space.rowBlock = shape[shape.size() - 2];
  space.matmul = true;  // input tiles of one key block: at most 512 columns
  if (failed(markImmediates(old))) return failure();
  llvm::DenseSet<Value> internal;
  for (Operation* op : m.ops())
    for (Value r : op->getResults()) internal.insert(r);
  for (Operation* op : m.transforms)
    for (Value v : op->getOperands()) {
      if (internal.contains(v) || layouts.count(v)) continue;
      if (!viewOf.count(v)) return op->emitError("internal: an attention operand is not read from HBM");
      if (failed(layoutOfInput(v, layouts[v]))) return failure();
    }
  SmallVector<Value> outHbm;
  Block* body = createIsaBody(old, outHbm);
  OpBuilder builder = OpBuilder::atBlockEnd(body);
  b = &builder;
  if (failed(lowerAttention(m, outHbm.front(), outLayout))) {
    body->erase();
    return failure();
  }
  finishBody(old, instructions, dmas);
  return success();
}

LogicalResult KernelLowering::lowerAttention(const AttentionMatch& m, Value out, const aten::StridedView& outLayout) {
  const int64_t P = nc::kNumPartitions;
  const MatrixView Q{viewOf[m.query()]}, K{viewOf[m.key()]}, V{viewOf[m.value()]}, O{outLayout};
  Type qe = deviceElem(m.query()), ve = deviceElem(m.value()), oe = deviceElem(m.output->getResult(0));
  Type f32 = b->getF32Type();
  if (qe != deviceElem(m.key())) return m.scores->emitError("matmul operands of different dtypes are not supported yet");
  const int64_t batches = Q.batches(), S = Q.rows(), D = Q.cols(), T = K.cols(), Dv = V.cols();
  if (K.batches() != batches || V.batches() != batches || O.batches() != batches || K.rows() != D ||
      V.rows() != T || O.rows() != S || O.cols() != Dv)
    return m.scores->emitError("internal: an attention's operands have mismatched shapes");
  const int64_t dPieces = (Dv + kKeyBlock - 1) / kKeyBlock;
  // Short heads that do not share K and V (which the packed batches below
  // serve) go several to a pass.
  if (2 * S <= P && T <= P && 2 * T <= kKeyBlock && 2 * Dv <= kKeyBlock &&
      !(batches > 1 && K.at(1) == K.at(0) && V.at(1) == V.at(0)))
    if (DiagonalPacking packing = planDiagonalPacks(Q, K, V, O, std::min({P / S, kKeyBlock / T, kKeyBlock / Dv}));
        packing.heads > 1)
      return lowerDiagonalPacks(m, out, outLayout, packing);
  std::optional<AttentionMask> mask = attentionMask(m);
  Operation *qk = m.scores, *pv = m.output, *softmax = m.exp;

  auto tensorTensor = [&](Value o, Value x, Value y, StringRef alu, Operation* src) {
    setSource(b->create<nc::TensorTensorOp>(loc, o, x, y, b->getStringAttr(alu)), src);
  };
  int64_t keyBytes = ((D + P - 1) / P) * T * (qe.getIntOrFloatBitWidth() / 8) +
                     ((T + P - 1) / P) * Dv * (ve.getIntOrFloatBitWidth() / 8);
  bool keepKeys = keyBytes <= kKeepKeysBytes;
  // Key blocks: runs of computed 128-key chunks within one 512-key block of
  // K^T, with the column ranges (from the block's start) the mask must be
  // applied to: the chunks it fills some or all of. Chunks it fills entirely
  // are not computed when skippable. The same for every batch unless the
  // mask varies along the batch dims.
  struct KeyBlock {
    int64_t k0, nk;
    SmallVector<std::pair<int64_t, int64_t>, 2> masked;  // (column, count)
  };
  std::map<std::tuple<int64_t, int64_t, int64_t>, SmallVector<KeyBlock>> keyBlocksOf;
  auto keyBlocks = [&](int64_t batch, int64_t q0, int64_t p) -> const SmallVector<KeyBlock>& {
    auto [it, added] = keyBlocksOf.try_emplace({mask && mask->perBatch ? batch : 0, q0, p});
    SmallVector<KeyBlock>& blocks = it->second;
    if (!added) return blocks;
    for (int64_t k = 0; k < T; k += P) {
      const int64_t n = std::min(P, T - k);
      AttentionMask::Class cls = mask ? mask->classify(batch, q0, p, k, n) : AttentionMask::None;
      if (mask && mask->skippable && cls == AttentionMask::All) continue;
      if (blocks.empty() || blocks.back().k0 + blocks.back().nk != k || blocks.back().k0 / kKeyBlock != k / kKeyBlock)
        blocks.push_back({k, 0, {}});
      KeyBlock& block = blocks.back();
      if (cls != AttentionMask::None) {
        if (!block.masked.empty() && block.masked.back().first + block.masked.back().second == block.nk)
          block.masked.back().second += n;
        else
          block.masked.push_back({block.nk, n});
      }
      block.nk += n;
    }
    return blocks;
  };
  // The query blocks of a batch go in groups of kGroup, step by step:
  // each step emits the scores of every block of the group, then their
  // softmax statistics, transposes and products with V, so that in each
  // engine's in-order queue the work of one block waits on another engine
  // while the next block's is ready.
  struct QueryBlock {
    int64_t q0, p;
    OperandCache queries;
    const SmallVector<KeyBlock>* blocks;
    Value rowMax, rowSum;  // running, f32 [p x 1]
    SmallVector<Value> acc;  // O, f32 [p x dn] per piece of Dv
    // The current step's values.
    Value x, probs, scale;
    SmallVector<Value> chunks;
  };
  // Heads side by side. Where consecutive batches (the heads of `[b, s, h,
  // d]` read per head) have their rows of Q right after one another, and a
  // head's rows are shorter than a DMA descriptor's worth, up to kHeads
  // batches form a head group: each panel of Q, K and V they read is loaded
  // once for the group, `heads` times as wide (runs of heads x d elements),
  // and their outputs are gathered into one tile per query block and
  // stored together. The group's panels stay in SBUF until its last batch,
  // so a group is as large as kHeadGroupBytes per partition allows.
  auto bytesOf = [](Type t) { return int64_t(t.getIntOrFloatBitWidth() / 8); };
  const int64_t queryBlocks = (S + P - 1) / P, keyChunks = (T + P - 1) / P;
  const int64_t headBytes = (queryBlocks + keyChunks) * D * bytesOf(qe) + keyChunks * Dv * bytesOf(ve) +
                            queryBlocks * Dv * bytesOf(oe);
  const bool shortRows = D * bytesOf(qe) < kMinHeadRunBytes && Q.colStride() == 1;
  const int64_t maxHeads = !keepKeys || !shortRows || headBytes <= 0
                               ? 1
                               : std::clamp<int64_t>(kHeadGroupBytes / headBytes, 1, kHeads);
  auto groupEnd = [&](int64_t b0) {
    int64_t e = b0 + 1;
    while (e < batches && e - b0 < maxHeads && Q.at(e) == Q.at(e - 1) + D) ++e;
    return e;
  };
  const bool gatherOutputs = dPieces == 1 && O.colStride() == 1;
  // Packed batches. Consecutive batches that read the same K and V, with
  // few query rows each (grouped-query attention's query heads over an
  // expanded key head, at decoding: one row each), are one batch of their
  // rows together, up to 128, where their rows of Q and of the output are
  // at one stride (the batches' own rows one after another, or rows of one
  // each): one query block computes their scores against K^T at once, and
  // its softmax, transposes and product with V serve them all (32 query
  // heads over 8 key heads of 512 tokens, d = 128, at decoding: 45.6 us
  // with a block per head, 25.8 packed). Each row is its own softmax; a
  // compile-time mask is classified over the block's rows of every batch in
  // it.
  auto packedBatches = [&](int64_t b0) -> int64_t {
    if (b0 + 1 >= batches || 2 * S > P) return 1;
    const int64_t qStep = Q.at(b0 + 1) - Q.at(b0), oStep = O.at(b0 + 1) - O.at(b0);
    if (S > 1 && (qStep != S * Q.rowStride() || oStep != S * O.rowStride())) return 1;
    if (qStep <= 0 || oStep <= 0) return 1;
    int64_t r = 1;
    while (b0 + r < batches && (r + 1) * S <= P && K.at(b0 + r) == K.at(b0) && V.at(b0 + r) == V.at(b0) &&
           Q.at(b0 + r) == Q.at(b0) + r * qStep && O.at(b0 + r) == O.at(b0) + r * oStep)
      ++r;
    return r;
  };
  // Consecutive batches that read the same K and V (a batch dim the keys
  // broadcast over: the query heads of a grouped-query attention, whose key
  // and value heads are expanded, or one K and V for several queries) keep
  // the K^T and V slices the first of them prepared, as one batch's query
  // blocks do, instead of loading and transposing them again (LLaMA-style
  // decoding, 32 query heads over 8 key heads of 512 tokens, d = 128:
  // 96.9 us, K and V read four times).
  OperandCache carriedKeys;
  int64_t carriedFrom = -1;  // the batch whose K and V carriedKeys holds
  for (int64_t group0 = 0, groupLast = 0; group0 < batches; group0 = groupLast) {
    // A packed unit of batches, or a head group (of single batches).
    const int64_t unit = packedBatches(group0);
    groupLast = unit > 1 ? group0 + unit : groupEnd(group0);
    const int64_t heads = unit > 1 ? 1 : groupLast - group0;
    // The query rows of one pass of the batch loop, and the strides of its rows of Q and O.
    const int64_t rows = unit * S;
    const int64_t qRowStride = unit > 1 && S == 1 ? Q.at(group0 + 1) - Q.at(group0) : Q.rowStride();
    const int64_t oRowStride = unit > 1 && S == 1 ? O.at(group0 + 1) - O.at(group0) : O.rowStride();
    std::vector<OperandCache> groupKeys(static_cast<size_t>(heads));
    std::map<std::pair<int64_t, int64_t>, OperandCache> groupQueries;  // (head, q0)
    bool gathered = false;
    std::map<int64_t, Value> gatheredOut;  // q0 -> [p x heads * Dv]
    SmallVector<Value> groupTiles;         // the shared panels
    if (heads > 1) {
      auto share = [&](auto operandOf, auto cacheOf, int64_t K, int64_t n) {
        SmallVector<MatmulOperand> operands;
        SmallVector<OperandCache*> caches;
        for (int64_t h = 0; h < heads; ++h) {
          operands.push_back(operandOf(group0 + h));
          caches.push_back(&cacheOf(h));
        }
        const bool inRows = operands.front().inRows();
        for (int64_t chunk = 0; chunk * P < (inRows ? n : 1); ++chunk)
          for (int64_t k0 = 0; k0 < K; k0 += P)
            if (Value wide = sharePanels(operands, caches, k0, chunk)) groupTiles.push_back(wide);
      };
      for (int64_t q0 = 0; q0 < S; q0 += P) {
        const int64_t p = std::min(P, S - q0);
        share([&](int64_t b) { return MatmulOperand{hbmOf[m.query()], Q.at(b) + q0 * Q.rowStride(), Q.colStride(),
                                                    Q.rowStride(), D, p, qe}; },
              [&](int64_t h) -> OperandCache& { return groupQueries[{h, q0}]; }, D, p);
      }
      for (int64_t kb = 0; kb < T; kb += kKeyBlock) {
        const int64_t n = std::min(kKeyBlock, T - kb);
        share([&](int64_t b) { return MatmulOperand{hbmOf[m.key()], K.at(b) + kb * K.colStride(), K.rowStride(),
                                                    K.colStride(), D, n, qe}; },
              [&](int64_t h) -> OperandCache& { return groupKeys[size_t(h)]; }, D, n);
      }
      if (dPieces == 1)
        share([&](int64_t b) { return MatmulOperand{hbmOf[m.value()], V.at(b), V.rowStride(), V.colStride(), T, Dv,
                                                    ve}; },
              [&](int64_t h) -> OperandCache& { return groupKeys[size_t(h)]; }, T, Dv);
      gathered = gatherOutputs;
      for (int64_t h = 1; h < heads && gathered; ++h) gathered = O.at(group0 + h) == O.at(group0 + h - 1) + Dv;
    }
    for (int64_t batch = group0; batch < groupLast; batch += unit) {
      const int64_t head = batch - group0;
      OperandCache& keys = groupKeys[size_t(head)];
      if (keepKeys && batch > 0 && K.at(batch) == K.at(batch - 1) && V.at(batch) == V.at(batch - 1)) {
        if (head > 0)
          keys = groupKeys[size_t(head) - 1];
        else if (carriedFrom == batch - 1)
          keys = std::move(carriedKeys);
      }
      auto carry = llvm::make_scope_exit([&] {
        if (!keepKeys || batch + unit != groupLast) return;
        carriedKeys = std::move(keys);
        carriedFrom = groupLast - 1;
      });
      for (int64_t g0 = 0; g0 < rows; g0 += kGroup * P) {
        std::vector<QueryBlock> group;
        for (int64_t q0 = g0; q0 < std::min(rows, g0 + kGroup * P); q0 += P) {
          QueryBlock qb;
          qb.q0 = q0;
          qb.p = std::min(P, rows - q0);
          qb.blocks = &keyBlocks(batch, q0, qb.p);
          qb.acc.resize(size_t(dPieces));
          if (auto it = groupQueries.find({head, q0}); it != groupQueries.end()) qb.queries = std::move(it->second);
          group.push_back(std::move(qb));
        }
        size_t steps = 0;
        for (QueryBlock& qb : group) steps = std::max(steps, qb.blocks->size());
        for (size_t step = 0; step < steps; ++step) {
          OperandCache blockKeys;
          OperandCache& kc = keepKeys ? keys : blockKeys;
          auto active = [&](QueryBlock& qb) { return step < qb.blocks->size(); };
          // Scores, and the kernel's ops on them.
          for (QueryBlock& qb : group) {
            if (!active(qb)) continue;
            const KeyBlock& block = (*qb.blocks)[step];
            const int64_t p = qb.p, k0 = block.k0, nk = block.nk, kb = k0 / kKeyBlock * kKeyBlock;
            r0 = batch * S + qb.q0;
            c0 = k0;
            inputColumns = nk;
            tileRows = p;
            ++iteration;
            tiles.clear();
            MatmulOperand query{hbmOf[m.query()], Q.at(batch) + qb.q0 * qRowStride, Q.colStride(), qRowStride, D, p,
                                qe};
            MatmulOperand key{hbmOf[m.key()], K.at(batch) + kb * K.colStride(), K.rowStride(), K.colStride(), D,
                              std::min(kKeyBlock, T - kb), qe};
            Value scores = allocPsum(p, nk);
            for (int64_t d0 = 0; d0 < D; d0 += P)
              setSource(b->create<nc::MatmulOp>(loc, scores, operandSlice(qb.queries, query, d0, qk),
                                                tileColumns(*b, loc, operandSlice(kc, key, d0, qk), k0 - kb, nk),
                                                b->getBoolAttr(d0 > 0)),
                        qk);
            tiles[m.shapedScores()] = scores;
            layouts[m.shapedScores()].kind = Kind::Full;
            for (auto [i, op] : llvm::enumerate(m.transforms)) {
              if (mask && op == mask->op) {
                Value chainIn = i == 0 ? m.shapedScores() : m.transforms[i - 1]->getResult(0);
                if (block.masked.empty()) {
                  tiles[op->getResult(0)] = tiles.lookup(chainIn);
                  layouts[op->getResult(0)] = layouts.lookup(chainIn);
                  continue;
                }
                if (failed(lowerMaskInPlace(op, chainIn, p, k0, nk, block.masked))) return failure();
              } else if (failed(lowerOp(op, p, nk))) {
                return failure();
              }
              if (layouts[op->getResult(0)].kind != Kind::Full)
                return op->emitError("internal: an attention's score op gave a per-row value");
            }
            qb.x = tiles[m.softmaxInput()];
          }
          // Running maximum, the rescale factor of what came before, exp and
          // the running sum.
          for (QueryBlock& qb : group) {
            if (!active(qb)) continue;
            const int64_t p = qb.p, nk = (*qb.blocks)[step].nk;
            const bool first = step == 0;
            Value blockMax = alloc(p, 1, f32), newMax = alloc(p, 1, f32), negMax = alloc(p, 1, f32);
            setSource(b->create<nc::TensorReduceOp>(loc, blockMax, qb.x, b->getStringAttr("max")), m.rowMax);
            if (first) tensorScalar(newMax, blockMax, Value(), "max", -FLT_MAX, m.rowMax);
            else tensorTensor(newMax, blockMax, qb.rowMax, "max", m.rowMax);
            tensorScalar(negMax, newMax, Value(), "mul", -1.0, m.shifted);
            // exp(x - m') as one activation: -m' is its bias tile.
            Value blockSum = alloc(p, 1, f32);
            qb.probs = alloc(p, nk, ve);
            expWithBias(qb.probs, qb.x, negMax, blockSum, softmax);
            if (first) {
              qb.rowSum = blockSum;
            } else {
              Value sum = alloc(p, 1, f32);
              qb.scale = alloc(p, 1, f32);
              expWithBias(qb.scale, qb.rowMax, negMax, Value(), softmax);
              tensorScalar(sum, qb.rowSum, qb.scale, "mul", 0.0, m.rowSum);
              tensorTensor(sum, sum, blockSum, "add", m.rowSum);
              qb.rowSum = sum;
            }
            qb.rowMax = newMax;
          }
          // The probabilities transposed: keys on the partitions, 128 per
          // chunk; whole chunks side by side in one PSUM bank.
          for (QueryBlock& qb : group) {
            if (!active(qb)) continue;
            const int64_t p = qb.p, nk = (*qb.blocks)[step].nk, whole = nk / P, rest = nk % P;
            qb.chunks.clear();
            if (whole > 0) {
              Value psum = allocPsum(P, whole * p);
              for (int64_t c = 0; c < whole; ++c)
                setSource(b->create<nc::TransposeOp>(loc, tileColumns(*b, loc, psum, c * p, p),
                                                     tileColumns(*b, loc, qb.probs, c * P, P)),
                          pv);
              Value sb = alloc(P, whole * p, ve);
              copyTile(sb, psum, pv);
              for (int64_t c = 0; c < whole; ++c) qb.chunks.push_back(tileColumns(*b, loc, sb, c * p, p));
            }
            if (rest > 0) {
              Value psum = allocPsum(rest, p);
              setSource(b->create<nc::TransposeOp>(loc, psum, tileColumns(*b, loc, qb.probs, whole * P, rest)), pv);
              Value sb = alloc(rest, p, ve);
              copyTile(sb, psum, pv);
              qb.chunks.push_back(sb);
            }
          }
          // O = scale * O + E^T x V.
          for (QueryBlock& qb : group) {
            if (!active(qb)) continue;
            const int64_t p = qb.p, k0 = (*qb.blocks)[step].k0;
            for (int64_t piece = 0; piece < dPieces; ++piece) {
              const int64_t dv0 = piece * kKeyBlock, dn = std::min(kKeyBlock, Dv - dv0);
              MatmulOperand value{hbmOf[m.value()], V.at(batch) + dv0 * V.colStride(), V.rowStride(), V.colStride(),
                                  T, dn, ve};
              Value o = allocPsum(p, dn);
              for (auto [c, chunk] : llvm::enumerate(qb.chunks))
                setSource(b->create<nc::MatmulOp>(loc, o, chunk, operandSlice(kc, value, k0 + int64_t(c) * P, pv),
                                                  b->getBoolAttr(c > 0)),
                          pv);
              Value& a = qb.acc[size_t(piece)];
              if (step == 0) {
                a = alloc(p, dn, f32);
                copyTile(a, o, pv);
              } else {
                tensorScalar(a, a, qb.scale, "mul", 0.0, pv);
                tensorTensor(a, a, o, "add", pv);
              }
            }
          }
        }
        // O / l, stored; NaN where every key was masked with -inf.
        inputColumns = 0;
        tileRows = 0;
        ++iteration;
        for (QueryBlock& qb : group)
          for (int64_t piece = 0; piece < dPieces; ++piece) {
            const int64_t dv0 = piece * kKeyBlock, dn = std::min(kKeyBlock, Dv - dv0);
            Value result;
            if (gathered) {
              Value& all = gatheredOut[qb.q0];
              if (!all) groupTiles.push_back(all = alloc(qb.p, heads * Dv, oe));
              result = tileColumns(*b, loc, all, head * Dv, Dv);
            } else {
              result = alloc(qb.p, dn, oe);
            }
            if (qb.blocks->empty())
              setSource(b->create<nc::IotaOp>(loc, result, b->getF64FloatAttr(std::nan("")),
                                              b->getF64FloatAttr(0.0), b->getF64FloatAttr(0.0)),
                        m.normalized);
            else
              tensorScalar(result, qb.acc[size_t(piece)], qb.rowSum, "div", 0.0, m.normalized);
            if (gathered && batch + 1 < groupLast) continue;  // stored with the group's last head
            int64_t first = gathered ? O.at(group0) : O.at(batch) + dv0 * O.colStride();
            int64_t width = gathered ? heads * Dv : dn;
            Operation* dma = b->create<nc::DmaStoreOp>(
                loc, gathered ? gatheredOut[qb.q0] : result, out, b->getI64IntegerAttr(0),
                b->getI64IntegerAttr(first + qb.q0 * oRowStride),
                b->getDenseI64ArrayAttr({oRowStride, qb.p, O.colStride(), width}));
            setEngineAndSource(dma, *b, "dma", -1);
            ++numInst;
            ++numDma;
          }
      }
    }
    // The group's tiles count as its last iteration's, so that they are
    // held through the iterations after it (PlanMemory.cpp) and the next
    // group's loads need not wait for this group's last readers.
    for (Value tile : groupTiles) tile.getDefiningOp()->setAttr("iteration", b->getI64IntegerAttr(iteration));
  }
  return success();
}

// Diagonal packs. A head of few query rows and keys (2 S <= 128, T <= 128)
// that reads its own K and V takes a pass of about twenty instructions and
// three loads, whose fixed costs bind (64 x 12 heads of 16 tokens: 507 us).
// A pack of u heads (planDiagonalPacks) takes one pass:
//
//   scores [u S x u T]     all its query rows against all its keys (one
//                          matmul per 128 of d); the blocks on the diagonal
//                          are the heads' own scores
//   x = f(scores)          the kernel's ops, an input varying along the keys
//                          loaded for one head's keys and repeated
//   x' = diagonal ? x : -inf   a select, so that a NaN or infinite score
//                          between two heads never reaches a row
//   P = exp(x' - m) / l    in V's dtype (one key block: nothing to rescale)
//   P^T                    transposed in chunks of whole heads (up to 128
//                          keys: [w x u S] each)
//   per head h: its S query columns of its chunk's P^T times the chunk's V
//   rows [w x Dv] with the other heads' rows selected to 0, into columns
//   h Dv of O [S x u Dv]
//
// Each product reads only its head's queries, and V rows of its own head
// (the others are 0 x 0), so that no head's V meets another head's zero
// probabilities (0 x inf is NaN). Q and K are read once a pack, V once per
// chunk and O stored as [S x u Dv], one transfer each.
LogicalResult KernelLowering::lowerDiagonalPacks(const AttentionMatch& m, Value out,
                                                 const aten::StridedView& outLayout, const DiagonalPacking& packing) {
  const int64_t P = nc::kNumPartitions;
  const MatrixView Q{viewOf[m.query()]}, K{viewOf[m.key()]}, V{viewOf[m.value()]}, O{outLayout};
  Type qe = deviceElem(m.query()), ve = deviceElem(m.value()), oe = deviceElem(m.output->getResult(0));
  Type f32 = b->getF32Type();
  const int64_t batches = Q.batches(), S = Q.rows(), D = Q.cols(), T = K.cols(), Dv = V.cols();
  const int64_t step = packing.step;
  Operation *qk = m.scores, *pv = m.output;
  struct Pack {
    int64_t first, heads;
    OperandCache queries, keys;
    Value x, probs;
    SmallVector<Value> transposed;  // per chunk of heads
  };
  std::vector<Pack> packs;
  for (int64_t first = 0; first < batches; ++first)
    if (int64_t heads = headsOfPackAt(first, packing)) packs.push_back({first, heads, {}, {}, {}, {}, {}});
  diagonalRows = S;
  diagonalRowStride = step * S;
  diagonalKeys = T;
  auto unpack = llvm::make_scope_exit([&] { diagonalRows = diagonalRowStride = diagonalKeys = 0; });
  // Masks by shape: the diagonal blocks of the scores, each head's V rows.
  std::map<std::pair<int64_t, int64_t>, Value> diagonals, ownRows;
  auto dma = [&](bool load, Value tile, Value hbm, int64_t offset, ArrayRef<int64_t> ap, int64_t partitionDims = 1) {
    Operation* op = load ? b->create<nc::DmaLoadOp>(loc, hbm, tile, b->getI64IntegerAttr(0),
                                                    b->getI64IntegerAttr(offset), b->getDenseI64ArrayAttr(ap))
                               .getOperation()
                         : b->create<nc::DmaStoreOp>(loc, tile, hbm, b->getI64IntegerAttr(0),
                                                     b->getI64IntegerAttr(offset), b->getDenseI64ArrayAttr(ap))
                               .getOperation();
    if (partitionDims > 1) op->setAttr("partition_dims", b->getI64IntegerAttr(partitionDims));
    setEngineAndSource(op, *b, "dma", -1);
    ++numInst;
    ++numDma;
  };
  auto queryOf = [&](const Pack& pk) {
    const int64_t n = pk.first, qRow = S > 1 ? Q.rowStride() : Q.at(n + step) - Q.at(n);
    return MatmulOperand{hbmOf[m.query()], Q.at(n), Q.colStride(), qRow, D, pk.heads * S, qe};
  };
  auto keyOf = [&](const Pack& pk) {
    const int64_t n = pk.first, kCol = T > 1 ? K.colStride() : K.at(n + step) - K.at(n);
    return MatmulOperand{hbmOf[m.key()], K.at(n), K.rowStride(), kCol, D, pk.heads * T, qe};
  };
  // As in lowerAttention, packs go in groups of kGroup, step by step.
  for (size_t g0 = 0; g0 < packs.size(); g0 += kGroup) {
    MutableArrayRef<Pack> group = MutableArrayRef<Pack>(packs).slice(g0, std::min<size_t>(kGroup, packs.size() - g0));
    // The rows of Q and K of kSharedPacks packs (of as many heads) at a
    // time, each in one transfer (sharePanels): one fixed cost for their
    // runs instead of one each.
    for (size_t i = 0; i < group.size(); i += kSharedPacks) {
      MutableArrayRef<Pack> shared = group.slice(i, std::min<size_t>(kSharedPacks, group.size() - i));
      if (llvm::any_of(shared, [&](const Pack& pk) { return pk.heads != shared.front().heads; })) continue;
      for (bool queries : {true, false}) {
        SmallVector<MatmulOperand> operands;
        SmallVector<OperandCache*> caches;
        for (Pack& pk : shared) {
          operands.push_back(queries ? queryOf(pk) : keyOf(pk));
          caches.push_back(queries ? &pk.queries : &pk.keys);
        }
        for (int64_t chunk = 0; chunk * P < operands.front().n; ++chunk)
          for (int64_t d0 = 0; d0 < D; d0 += P) sharePanels(operands, caches, d0, chunk, /*atAnyDistance=*/true);
      }
    }
    for (Pack& pk : group) {
      const int64_t n = pk.first, p = pk.heads * S, nk = pk.heads * T;
      r0 = n * S;
      c0 = 0;
      inputColumns = nk;
      tileRows = p;
      ++iteration;
      tiles.clear();
      const MatmulOperand query = queryOf(pk), key = keyOf(pk);
      Value scores = allocPsum(p, nk);
      for (int64_t d0 = 0; d0 < D; d0 += P)
        setSource(b->create<nc::MatmulOp>(loc, scores, operandSlice(pk.queries, query, d0, qk),
                                          operandSlice(pk.keys, key, d0, qk), b->getBoolAttr(d0 > 0)),
                  qk);
      tiles[m.shapedScores()] = scores;
      layouts[m.shapedScores()].kind = Kind::Full;
      for (Operation* op : m.transforms) {
        if (failed(lowerOp(op, p, nk))) return failure();
        if (layouts[op->getResult(0)].kind != Kind::Full)
          return op->emitError("internal: an attention's score op gave a per-row value");
      }
      Value& diagonal = diagonals[{p, nk}];
      if (!diagonal) diagonal = blockDiagonalMask(p, nk, S, T);
      pk.x = alloc(p, nk, f32);
      setSource(b->create<nc::TensorSelectOp>(loc, pk.x, tiles[m.softmaxInput()],
                                              broadcastRow(Value(), -INFINITY, p, nk, f32, m.rowMax), diagonal),
                m.rowMax);
    }
    // The softmax of each row over its head's keys, in V's dtype.
    for (Pack& pk : group) {
      const int64_t p = pk.heads * S, nk = pk.heads * T;
      Value rowMax = alloc(p, 1, f32), negMax = alloc(p, 1, f32), rowSum = alloc(p, 1, f32);
      setSource(b->create<nc::TensorReduceOp>(loc, rowMax, pk.x, b->getStringAttr("max")), m.rowMax);
      // (At least -FLT_MAX: a row of -inf gives exp(-inf) = 0, then 0 / 0.)
      tensorScalar(rowMax, rowMax, Value(), "max", -FLT_MAX, m.rowMax);
      tensorScalar(negMax, rowMax, Value(), "mul", -1.0, m.shifted);
      expWithBias(pk.x, pk.x, negMax, rowSum, m.exp);
      pk.probs = alloc(p, nk, ve);
      tensorScalar(pk.probs, pk.x, rowSum, "div", 0.0, m.normalized);
    }
    // The probabilities transposed (keys on the partitions) in chunks of
    // whole heads, up to 128 keys: [w x u S] each.
    const int64_t perChunk = std::max<int64_t>(1, P / T);
    for (Pack& pk : group) {
      const int64_t p = pk.heads * S;
      pk.transposed.clear();
      for (int64_t h0 = 0; h0 < pk.heads; h0 += perChunk) {
        const int64_t w = std::min(perChunk, pk.heads - h0) * T;
        Value psum = allocPsum(w, p);
        setSource(b->create<nc::TransposeOp>(loc, psum, tileColumns(*b, loc, pk.probs, h0 * T, w)), pv);
        Value sb = alloc(w, p, ve);
        copyTile(sb, psum, pv);
        pk.transposed.push_back(sb);
      }
    }
    // O = P V per head, stored for the pack at once. Each head's product
    // takes its chunk's V rows with every other head's rows selected to 0,
    // and its own query columns of the chunk's probabilities: the other
    // heads' keys then add 0 x 0.
    inputColumns = 0;
    tileRows = 0;
    ++iteration;
    for (Pack& pk : group) {
      const int64_t n = pk.first, u = pk.heads;
      const int64_t vStep = V.at(n + step) - V.at(n);
      Value o = allocPsum(S, u * Dv);
      for (int64_t h0 = 0, c = 0; h0 < u; h0 += perChunk, ++c) {
        const int64_t heads = std::min(perChunk, u - h0), w = heads * T;
        Value values = alloc(w, Dv, ve);
        dma(/*load=*/true, values, hbmOf[m.value()], V.at(n + h0 * step),
            {vStep, heads, V.rowStride(), T, V.colStride(), Dv}, /*partitionDims=*/2);
        Value& own = ownRows[{w, heads * Dv}];
        if (!own) own = blockDiagonalMask(w, heads * Dv, T, Dv);
        for (int64_t j = 0; j < heads; ++j) {
          const int64_t h = h0 + j;
          Value selected = values;
          if (heads > 1) {
            selected = alloc(w, Dv, ve);
            setSource(b->create<nc::TensorSelectOp>(loc, selected, values,
                                                    broadcastRow(Value(), 0.0, w, Dv, ve, pv),
                                                    tileColumns(*b, loc, own, j * Dv, Dv)),
                      pv);
          }
          setSource(b->create<nc::MatmulOp>(loc, tileColumns(*b, loc, o, h * Dv, Dv),
                                            tileColumns(*b, loc, pk.transposed[size_t(c)], h * S, S), selected,
                                            b->getBoolAttr(false)),
                    pv);
        }
      }
      Value result = alloc(S, u * Dv, oe);
      copyTile(result, o, m.normalized);
      dma(/*load=*/false, result, out, O.at(n), {O.rowStride(), S, O.at(n + step) - O.at(n), u, O.colStride(), Dv});
    }
  }
  return success();
}

}  // namespace neuroncc::lowering
