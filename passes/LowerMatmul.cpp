//===- LowerMatmul.cpp - matmuls onto the TensorEngine ---------------------===//
//
// One [p x f] output tile of A @ B (f <= 512, one PSUM bank of f32): the
// contraction dim K in slices of 128 partitions accumulated in PSUM, then
// alpha * product + beta * bias into an SBUF tile.
//
// Orientation. The TensorEngine takes both operands with k on the
// partitions: the stationary slice [kt x p] (rows of A) and the moving slice
// [kt x f] (columns of B). An operand whose free dim (m or n) is contiguous
// in HBM, or whose k is not, is loaded that way. One whose k alone is
// contiguous (a row-major activation as A, an nn.Linear weight stored
// (out, in) as B = W.t()) is loaded in rows, [up to 128 rows x k] with each
// row contiguous, transposed on the TensorEngine into PSUM (up to four
// 128-row transposes side by side in one bank, so a moving slice stays 512
// columns wide; a full row tile's [128 x 128] stationary slices likewise four
// k slices to a bank) and copied to SBUF by whichever of the vector and
// scalar engines the schedule finds free. An element-strided DMA would instead
// cost a descriptor per element.
//
// Panels. One DMA loads a panel of several slices, at most kPanelBytes per
// partition: [128 x S*n] (S consecutive k slices side by side) for a direct
// operand, [rows x KB] (KB consecutive k) for one loaded in rows. Slices are
// column ranges of it (nc.tile_columns), so the per-transfer DMA cost is
// paid once per panel instead of once per slice.
//
// Reuse. A row tile's stationary slices serve all its column tiles while
// they take at most 32 KiB per partition; a column block's moving slices
// serve every row tile (the column blocks of LowerToIsa.cpp).
//
// Pipelining. The slices for k + 1 .. k + kLookahead are prepared before the
// matmul of slice k: the TensorEngine transposes ahead while other engines
// copy earlier slices out of PSUM, and PSUM tiles rotate over the banks
// (PlanMemory.cpp), so no TensorEngine instruction waits for an evacuation.
//
//===----------------------------------------------------------------------===//

#include "device_model.h"
#include "passes/KernelLowering.h"
#include "passes/WindowOperand.h"

namespace neuroncc::lowering {

namespace {
constexpr int64_t kPanelBytes = 4096;  // per partition, one DMA
constexpr int64_t kStationaryCacheBytes = 32 * 1024;  // per partition, one row tile's slices
constexpr int64_t kLookahead = 4;
// A DMA run shorter than this costs its descriptor time rather than its
// bytes (device model: 20 ns per run, 512 B at one queue's bandwidth).
constexpr int64_t kMinRunBytes = 512;
constexpr int64_t kWideRunBytes = 1024;  // rows of a K-major left operand loaded for several row tiles
// Larger panels load on several DMA queues. Panels are on the TensorEngine's
// critical path (it waits for the first slices), so they are split finer
// than elementwise tiles (LowerToIsa.cpp): 128 KiB pieces, although each
// spends 28% of its queue time on the fixed 2 us (256 KiB: 16%), gave the
// LLaMA-7B layer 59.7% MFU against 59.3% and at seq 16 46.6% MBU against
// 45.3% (benchmarks/roofline_bench.py; 64 KiB and 512 KiB were slower).
constexpr int64_t kSplitBytes = 128 * 1024;
// A streamed operand (MatmulOperand::streamedBytes) bounds its kernel by its
// loads, where each piece's fixed 2 us counts: 512 KiB pieces spend 9% of
// their queue time on it, 128 KiB ones 28% (a SwiGLU FFN for 16 tokens,
// 4096 -> 11008 -> 4096 with (in, out) weights: 953.3 -> 792.8 us). A small
// one keeps 128 KiB pieces, so that its few panels still load over several
// queues at once: pieces grow only past kStreamedPieces of them (as
// LowerToIsa.cpp's elementwise tiles do). Weights loaded in rows (nn.Linear's
// (out, in)) keep 128 KiB: their transposes bound the TensorEngine, and
// larger pieces made it wait (LLaMA-7B at seq 16: 2008.8 -> 2191.1 us).
constexpr int64_t kStreamedSplitBytes = 512 * 1024;
constexpr int64_t kStreamedPieces = 64;
// The slices of a streamed operand prepared ahead of the matmul that takes
// them, in bytes per partition: kLookahead slices keep a few of its larger
// pieces in flight, too few for 16 queues (128 x 11008 x 4096: 755.6 us;
// prepared 64 KiB ahead 388.8, 96 KiB 273.6, against a 229.4 us HBM bound).
// A body that then overflows SBUF is lowered again with kLookahead
// (LowerToIsa.cpp).
constexpr int64_t kStreamedAheadBytes = 96 * 1024;
// A panel of a matmul operand's windows (a convolution's taps, loaded once
// for all of them: lowerMatmul), at most this many bytes per partition.
constexpr int64_t kMaxWindowPanelBytes = 16 * 1024;

// A batch group's loads (batchGroupOperand): runs per DMA, their
// descriptors then costing about the transfer's fixed 2 us (20 ns a run).
constexpr int64_t kRunsPerPiece = 100;
// A group's chain is a step longer (the product's transpose) and its
// transfers have more runs each, so few batches run faster one by one
// (their transfers spread over more queues): groups of at most batches / 8,
// and none under 32 batches (16 x [1 x 64] @ [64 x 16] bf16: 8.9 us per
// batch, 9.2 in 8 groups of 2; 32 x [16 x 128] @ [128 x 16]: 21.0 us per
// batch, 16.3 in 8 groups of 4, 19.1 in 4 groups of 8).
constexpr int64_t kMinBatchGroups = 8, kMinGroupedBatches = 32;
}  // namespace

// Columns [column, column + n) of a tile: itself, or an nc.tile_columns view.
Value tileColumns(OpBuilder& b, Location loc, Value tile, int64_t column, int64_t n) {
  auto t = llvm::cast<MemRefType>(tile.getType());
  if (column == 0 && n == t.getDimSize(1)) return tile;
  auto type = MemRefType::get({t.getDimSize(0), n}, t.getElementType(), MemRefLayoutAttrInterface{},
                              t.getMemorySpace());
  return b.create<nc::TileColumnsOp>(loc, type, tile, b.getI64IntegerAttr(column), IntegerAttr());
}

Value steppedColumns(OpBuilder& b, Location loc, Value tile, int64_t column, int64_t n, int64_t step) {
  if (step == 1) return tileColumns(b, loc, tile, column, n);
  auto t = llvm::cast<MemRefType>(tile.getType());
  auto type = MemRefType::get({t.getDimSize(0), n}, t.getElementType(), MemRefLayoutAttrInterface{},
                              t.getMemorySpace());
  return b.create<nc::TileColumnsOp>(loc, type, tile, b.getI64IntegerAttr(column), b.getI64IntegerAttr(step));
}

// An f32 PSUM tile. PSUM tiles rotate over the banks in the memory plan;
// they carry no iteration.
Value KernelLowering::allocPsum(int64_t p, int64_t f) {
  auto type = MemRefType::get({p, f}, b->getF32Type(), MemRefLayoutAttrInterface{},
                              b->getI64IntegerAttr(nc::kPsumMemorySpace));
  return b->create<nc::AllocPsumOp>(loc, type, IntegerAttr());
}

// The panel holding slice k0 of `o` (of rows chunk `chunk` for an operand
// loaded in rows), loading it on first use; `column` is where the slice
// starts in it.
PanelSpec KernelLowering::panelSpec(const MatmulOperand& o, int64_t k0, int64_t chunk) const {
  const int64_t P = nc::kNumPartitions;
  PanelSpec spec;
  int64_t offset = o.offset, first = k0;
  SmallVector<int64_t>& ap = spec.ap;
  if (o.inRows()) {
    offset += chunk * P * o.fStride;
    spec.partitions = std::min(P, o.n - chunk * P);
    int64_t width = std::max(P, kPanelBytes / o.elemBytes() / P * P);
    first = k0 / width * width;
    spec.cols = std::min(width, o.K - first);
    spec.column = k0 - first;
    ap = {o.fStride, spec.partitions, o.kStride, spec.cols};
  } else if (int64_t full = o.K / P; k0 / P < full) {
    // Slices with rows shorter than a DMA descriptor's worth (kMinRunBytes)
    // are bound by their runs, not by the fixed cost: one DMA each, so
    // that several queues share them.
    int64_t rowBytes = o.n * o.elemBytes();
    int64_t perPanel = rowBytes < kMinRunBytes ? 1 : std::clamp<int64_t>(kPanelBytes / rowBytes, 1, full);
    int64_t firstSlice = k0 / P / perPanel * perPanel, count = std::min(perPanel, full - firstSlice);
    first = firstSlice * P;
    spec.partitions = P;
    spec.cols = count * o.n;
    spec.column = (k0 / P - firstSlice) * o.n;
    ap = {o.kStride, P};
    if (count > 1) ap.append({P * o.kStride, count});
    ap.append({o.fStride, o.n});
  } else {  // the last, partial slice
    spec.partitions = o.K - k0;
    spec.cols = o.n;
    spec.column = 0;
    ap = {o.kStride, spec.partitions, o.fStride, o.n};
  }
  spec.key = OperandKey{o.hbm.getAsOpaquePointer(), offset, o.kStride, o.fStride, first, spec.partitions};
  spec.startOffset = offset + first * o.kStride;
  return spec;
}

Value KernelLowering::operandPanel(OperandCache& cache, const MatmulOperand& o, int64_t k0, int64_t chunk,
                                   int64_t& column) {
  PanelSpec spec = panelSpec(o, k0, chunk);
  column = spec.column;
  if (auto hit = cache.panels.find(spec.key); hit != cache.panels.end()) return hit->second;
  Value panel = alloc(spec.partitions, spec.cols, o.elem);
  // A panel of rows dies once its slices are transposed, a few matmuls
  // later: when holding tiles through the next iterations does not fit, it
  // rotates with the other such panels instead (PlanMemory.cpp). (A direct
  // panel holds the slices themselves.)
  if (o.inRows()) panel.getDefiningOp()->setAttr("rotation", b->getUnitAttr());
  int64_t split = kSplitBytes;
  if (o.streamedBytes > 0)
    split = std::clamp<int64_t>(o.streamedBytes / kStreamedPieces, kSplitBytes, kStreamedSplitBytes);
  loadPanel(o.hbm, panel, spec.startOffset, spec.ap, split);
  cache.panels[spec.key] = panel;
  return panel;
}

// One panel's load, in up to 8 pieces of about `split` bytes over the
// partitions (each its own DMA, so that several queues share them).
void KernelLowering::loadPanel(Value hbm, Value panel, int64_t startOffset, ArrayRef<int64_t> ap, int64_t split) {
  auto type = llvm::cast<MemRefType>(panel.getType());
  const int64_t partitions = ap[1], bytes = type.getNumElements() * (type.getElementTypeBitWidth() / 8);
  SmallVector<int64_t> freeAp = simplifyFreePattern(ap.drop_front(2));
  int64_t pieces = std::clamp<int64_t>(bytes / split, 1, 8);
  int64_t per = (partitions + pieces - 1) / pieces;
  for (int64_t s = 0; s < partitions; s += per) {
    SmallVector<int64_t> pieceAp{ap[0], std::min(per, partitions - s)};
    pieceAp.append(freeAp);
    Operation* dma = b->create<nc::DmaLoadOp>(loc, hbm, panel, b->getI64IntegerAttr(s),
                                              b->getI64IntegerAttr(startOffset + s * ap[0]),
                                              b->getDenseI64ArrayAttr(pieceAp));
    setEngineAndSource(dma, *b, "dma", -1);
    ++numInst;
    ++numDma;
  }
}

// Panels of the same operand for `count` batches at one distance from one
// another in HBM (attention heads side by side in a row: `[b, s, h, d]`
// read per head, each batch's columns right after the last's; or an
// attention's diagonal packs, one after another), loaded once as one panel
// `count` times as wide and seeded into each batch's cache as its column
// range: one transfer (of count x width-element runs where the columns
// continue one another) instead of count transfers. `operands[i]` is batch
// i's operand and `caches[i]` its cache; the panels are those
// operandPanel would load for (k0, chunk). Returns the shared panel, or
// null, with nothing emitted, where the panels are not at one distance
// (without `atAnyDistance`, not side by side).
Value KernelLowering::sharePanels(ArrayRef<MatmulOperand> operands, ArrayRef<OperandCache*> caches, int64_t k0,
                                 int64_t chunk, bool atAnyDistance) {
  if (operands.size() < 2) return Value();
  SmallVector<PanelSpec> specs;
  for (const MatmulOperand& o : operands) specs.push_back(panelSpec(o, k0, chunk));
  const PanelSpec& first = specs.front();
  // One run of the panel's columns per partition, each batch's at one distance from the last's.
  const int64_t distance = specs[1].startOffset - first.startOffset;
  if (first.ap.size() != 4 || first.ap[2] != 1 || first.ap[3] != first.cols || distance <= 0 ||
      (!atAnyDistance && distance != first.cols))
    return Value();
  for (auto [i, spec] : llvm::enumerate(specs))
    if (spec.ap != first.ap || spec.column != first.column ||
        spec.startOffset != first.startOffset + int64_t(i) * distance)
      return Value();
  for (auto [cache, spec] : llvm::zip(caches, specs))
    if (cache->panels.count(spec.key)) return Value();  // (already loaded, or shared)
  const int64_t n = int64_t(specs.size());
  Value wide = alloc(first.partitions, n * first.cols, operands.front().elem);
  SmallVector<int64_t> ap{first.ap[0], first.partitions, distance, n, 1, first.cols};
  loadPanel(operands.front().hbm, wide, first.startOffset, ap, kSplitBytes);
  for (int64_t i = 0; i < n; ++i)
    caches[size_t(i)]->panels[specs[size_t(i)].key] = tileColumns(*b, loc, wide, i * first.cols, first.cols);
  return wide;
}

// Batch groups. A bmm of small matrices ran a row tile per batch, each
// paying its own loads of both operands, their TensorEngine transposes and
// its own store: a DMA's fixed 2 us three times for M rows ([1024, 4, 16] x
// [1024, 16, 4]: 3072 transfers, 415.8 us). Where M <= 64, N <= 128 and K
// <= 1024 (8 slices of 128), a row tile instead takes g = 128 / M whole batches
// (rowBlock = g * M; at most 512 / N, so that a group's N-wide operands fit
// a PSUM bank), whose operands load with one DMA each and whose rows store
// with one. Each batch keeps its own matmul: packing batches block-diagonally
// into one matmul would multiply zeros by the other batches' values, and
// an inf or NaN there would reach every batch of the group.
void KernelLowering::groupSmallBatches(Block& body) {
  const int64_t P = nc::kNumPartitions;
  if (space.rowBlock == 0 || !space.matmul || space.reduces) return;
  const int64_t M = space.rowBlock;
  int64_t N = 0, K = 0;
  if (!windowPieces.empty()) return;  // (a group loads each operand whole)
  for (Operation& op : body.without_terminator()) {
    if (llvm::isa<aten::MmOp, aten::AddmmOp>(op)) return;
    auto bmm = llvm::dyn_cast<aten::BmmOp>(op);
    if (!bmm) continue;
    ArrayRef<int64_t> out = llvm::cast<RankedTensorType>(bmm.getType()).getShape();
    ArrayRef<int64_t> lhs = llvm::cast<RankedTensorType>(bmm.getSelf().getType()).getShape();
    if (out[1] != M || (N != 0 && out[2] != N) || (K != 0 && lhs[2] != K)) return;
    N = out[2];
    K = lhs[2];
  }
  if (space.cols != N || space.rows % M != 0) return;
  if (int64_t g = batchGroupSize(space.rows / M, M, K, N); g > 1) space.rowBlock = g * M;
}

int64_t batchGroupSize(int64_t batches, int64_t M, int64_t K, int64_t N) {
  const int64_t P = nc::kNumPartitions;
  constexpr int64_t kMaxGroupedRows = 64, kMaxGroupedK = 8 * P;
  if (M < 1 || M > kMaxGroupedRows || N < 1 || N > P || K < 1 || K > kMaxGroupedK) return 1;
  const int64_t g = std::min({P / M, nc::kPsumBankBytes / 4 / N, batches / kMinBatchGroups});
  return g < 2 || batches < kMinGroupedBatches ? 1 : g;
}

// A panel's load (as loadPanel) in pieces of about kRunsPerPiece runs
// each, on queues of their own: where its runs are short (a batch's n or K
// elements), one DMA of all of them would spend their
// descriptors' time on one queue.
void KernelLowering::loadRuns(Value hbm, Value panel, int64_t startOffset, ArrayRef<int64_t> ap) {
  SmallVector<int64_t> freeAp = simplifyFreePattern(ap.drop_front(2));
  int64_t runs = ap[1], elements = ap[1];
  for (size_t d = 0; d + 2 < freeAp.size(); d += 2) runs *= freeAp[d + 1];
  if (!freeAp.empty() && freeAp[freeAp.size() - 2] != 1) runs *= freeAp.back();
  for (size_t d = 1; d < freeAp.size(); d += 2) elements *= freeAp[d];
  const int64_t bytes = elements * (llvm::cast<MemRefType>(panel.getType()).getElementTypeBitWidth() / 8);
  loadPanel(hbm, panel, startOffset, ap,
            std::clamp<int64_t>(bytes * kRunsPerPiece / std::max<int64_t>(runs, 1), 1, kSplitBytes));
}

// The [kt x g*n] tiles of operand `o`'s k slices (of 128) for g
// consecutive batches (`o` is the first one's; each next one batchStride
// elements on), batch i's [kt x n] at columns [i*n, (i+1)*n): a DMA a
// slice, or, where k alone is contiguous, whole rows of as many batches as
// 128 partitions hold a DMA, each slice's columns transposed on the
// TensorEngine.
SmallVector<Value> KernelLowering::batchGroupOperand(const MatmulOperand& o, int64_t batchStride, int64_t g,
                                                     Operation* op) {
  const int64_t P = nc::kNumPartitions;
  SmallVector<Value> slices;
  if (!o.inRows()) {
    for (int64_t k0 = 0; k0 < o.K; k0 += P) {
      const int64_t kt = std::min(P, o.K - k0);
      slices.push_back(alloc(kt, g * o.n, o.elem));
      loadRuns(o.hbm, slices.back(), o.offset + k0 * o.kStride, {o.kStride, kt, batchStride, g, o.fStride, o.n});
    }
    return slices;
  }
  SmallVector<std::pair<int64_t, Value>> rowTiles;  // (first batch, rows of its chunk)
  const int64_t perLoad = std::max<int64_t>(1, P / o.n);
  for (int64_t i0 = 0; i0 < g; i0 += perLoad) {
    const int64_t c = std::min(perLoad, g - i0), start = o.offset + i0 * batchStride;
    Value rows = alloc(c * o.n, o.K, o.elem);
    if (c == 1 || batchStride == o.n * o.fStride) {
      loadRuns(o.hbm, rows, start, {o.fStride, c * o.n, o.kStride, o.K});
    } else {  // partition (i, j) at i * batchStride + j * fStride
      Operation* dma = b->create<nc::DmaLoadOp>(loc, o.hbm, rows, b->getI64IntegerAttr(0), b->getI64IntegerAttr(start),
                                                b->getDenseI64ArrayAttr({batchStride, c, o.fStride, o.n, o.kStride, o.K}));
      dma->setAttr("partition_dims", b->getI64IntegerAttr(2));
      setEngineAndSource(dma, *b, "dma", -1);
      ++numInst;
      ++numDma;
    }
    rowTiles.push_back({i0, rows});
  }
  // Slice by slice, so that one PSUM bank at a time holds transposes.
  for (int64_t k0 = 0; k0 < o.K; k0 += P) {
    const int64_t kt = std::min(P, o.K - k0);
    Value psum = allocPsum(kt, g * o.n);
    for (auto [i0, rows] : rowTiles) {
      const int64_t count = llvm::cast<MemRefType>(rows.getType()).getDimSize(0);
      setSource(b->create<nc::TransposeOp>(loc, tileColumns(*b, loc, psum, i0 * o.n, count),
                                           tileColumns(*b, loc, rows, k0, kt)),
                op);
    }
    slices.push_back(alloc(kt, g * o.n, o.elem));
    copyTile(slices.back(), psum, op);
  }
  return slices;
}

// The [g*M x N] PSUM product of a batch group (`a` and `bm` its first
// batch's operands, [K x M] and [K x N]). Each batch's product is computed
// transposed, C_i^T = B_i^T A_i^T (B_i stationary, A_i^T moving), into
// columns [i*M, (i+1)*M) of one [N x g*M] bank, so that a single transpose
// (of its f32 copy: no rounding) puts batch i's rows on partitions
// [i*M, (i+1)*M), as the row tile holds them.
Value KernelLowering::batchGroupProduct(Operation* op, const MatmulOperand& a, const MatmulOperand& bm, int64_t sAb,
                                        int64_t sBb, int64_t g) {
  const int64_t M = a.n, N = bm.n;
  // K in slices of 128, each batch's products accumulated in its columns.
  SmallVector<Value> moving = batchGroupOperand(a, sAb, g, op), stationary = batchGroupOperand(bm, sBb, g, op);
  Value products = allocPsum(N, g * M);
  for (size_t s = 0; s < moving.size(); ++s)
    for (int64_t i = 0; i < g; ++i)
      setSource(b->create<nc::MatmulOp>(loc, tileColumns(*b, loc, products, i * M, M),
                                        tileColumns(*b, loc, stationary[s], i * N, N),
                                        tileColumns(*b, loc, moving[s], i * M, M), b->getBoolAttr(s > 0)),
                op);
  Value copied = alloc(N, g * M, b->getF32Type());
  copyTile(copied, products, op);
  Value psum = allocPsum(g * M, N);
  setSource(b->create<nc::TransposeOp>(loc, psum, copied), op);
  return psum;
}

// The [kt x n] SBUF slice k0 of `o`, prepared on first use.
Value KernelLowering::operandSlice(OperandCache& cache, const MatmulOperand& o, int64_t k0, Operation* op) {
  OperandKey key{o.hbm.getAsOpaquePointer(), o.offset, o.kStride, o.fStride, k0, o.n};
  if (auto hit = cache.slices.find(key); hit != cache.slices.end()) return hit->second;
  const int64_t P = nc::kNumPartitions;
  int64_t kt = std::min(P, o.K - k0), column = 0;
  Value slice;
  // Slices of 128 columns read in rows (a full row tile's stationary
  // slices, [128 x 128] each) are transposed four at a time, side by side
  // into one PSUM bank, and copied out to SBUF at once. A bank per slice
  // crowded PSUM's 8 banks: a
  // bank came back to the rotation (PlanMemory.cpp) soon after its copy, and
  // the next transposes waited for it (the 4096^3 matmul: 2092.6 us so,
  // 2064.4 us grouped). Partial row tiles keep a bank per slice: their
  // kernels start with these transposes, and the first matmul would wait
  // for the whole group (LLaMA-7B at seq 16, 16 rows: 2035.0 us against
  // 2025.6); so do a prologue's slices (computedSlice), which wait for the
  // row tile's layer norm first (GPT-2-medium: 643.1 us against 634.6).
  if (int64_t perBank = matmulColumns / P, full = o.K / P; o.inRows() && o.n == P && k0 / P < full) {
    int64_t first = k0 / P / perBank * perBank, count = std::min(perBank, full - first);
    Value psum = allocPsum(P, count * P);
    for (int64_t s = 0; s < count; ++s) {
      Value panel = operandPanel(cache, o, (first + s) * P, 0, column);
      setSource(b->create<nc::TransposeOp>(loc, tileColumns(*b, loc, psum, s * P, P),
                                           tileColumns(*b, loc, panel, column, P)),
                op);
    }
    Value group = alloc(P, count * P, o.elem);
    if (cache.singleTile) group.getDefiningOp()->setAttr("rotation", b->getI64IntegerAttr(1));
    copyTile(group, psum, op);
    for (int64_t s = 0; s < count; ++s)
      cache.slices[OperandKey{key.hbm, key.offset, key.kStride, key.fStride, (first + s) * P, key.n}] =
          tileColumns(*b, loc, group, s * P, P);
    return cache.slices[key];
  }
  if (!o.inRows()) {
    Value panel = operandPanel(cache, o, k0, 0, column);
    slice = tileColumns(*b, loc, panel, column, o.n);
  } else {
    Value psum = allocPsum(kt, o.n);
    for (int64_t chunk = 0; chunk * P < o.n; ++chunk) {
      int64_t rows = std::min(P, o.n - chunk * P);
      Value panel = operandPanel(cache, o, k0, chunk, column);
      Value in = tileColumns(*b, loc, panel, column, kt);
      Value out = tileColumns(*b, loc, psum, chunk * P, rows);
      setSource(b->create<nc::TransposeOp>(loc, out, in), op);
    }
    slice = alloc(kt, o.n, o.elem);
    if (cache.singleTile) slice.getDefiningOp()->setAttr("rotation", b->getI64IntegerAttr(1));
    copyTile(slice, psum, op);
  }
  cache.slices[key] = slice;
  return slice;
}

// The [kt x p] stationary slice k0 of a left operand computed in the kernel
// (a prologue's [p x K] row tile): transposed on the TensorEngine, as a
// slice loaded in rows is.
Value KernelLowering::computedSlice(OperandCache& cache, Value tile, int64_t k0, Operation* op) {
  auto type = llvm::cast<MemRefType>(tile.getType());
  int64_t p = type.getDimSize(0), K = type.getDimSize(1), kt = std::min(nc::kNumPartitions, K - k0);
  OperandKey key{tile.getAsOpaquePointer(), 0, 1, K, k0, p};
  if (auto hit = cache.slices.find(key); hit != cache.slices.end()) return hit->second;
  Value psum = allocPsum(kt, p);
  setSource(b->create<nc::TransposeOp>(loc, psum, tileColumns(*b, loc, tile, k0, kt)), op);
  Value slice = alloc(kt, p, type.getElementType());
  if (cache.singleTile) slice.getDefiningOp()->setAttr("rotation", b->getI64IntegerAttr(1));
  copyTile(slice, psum, op);
  cache.slices[key] = slice;
  return slice;
}

// Products on partitions. A bmm of many small matrices ([100, 128, 4] @
// [100, 4, 4], [1024, 4, 16] @ [1024, 16, 4]) spends its time on DMA
// transfers, not on the TensorEngine: each batch's operands go in with
// their k on the partitions, a descriptor per row of a few bytes and a
// transfer's fixed 2 us per operand and batch (72 and 85 us against HBM
// bounds under 1 us). With a batch per partition instead, each operand's
// matrices load as one run per partition, and the vector, scalar and GpSimd
// engines compute the products from those tiles with stepped column views:
// an instruction per (k, n) over a column of M elements, per (k, m) over a
// row of N, or per (m, n) over K (a product and its sum). Products are
// computed in f32 (a bf16 x bf16 product is exact there) and accumulated in
// f32 in k order, rounded once into the result's dtype, as the TensorEngine's
// PSUM accumulation is.
namespace {
// Engine cycles of one instruction (the formulas of
// runtime/neff/device_model.cc): a tensor_scalar, an f32 tensor_tensor and
// a tensor_reduce over n elements per partition, each with the SBUF access.
double access() { return double(neff::Trn1().sbuf_access_cycles); }
double scalarCycles(int64_t n) { return double(std::max<int64_t>(64, n)) + access(); }
double tensorCycles(int64_t n) { return double(std::max<int64_t>(64, 2 * n)) + access(); }
double reduceCycles(int64_t n) { return double(std::max<int64_t>(1, n)) + access(); }
// A tensor_scalar runs on any of three engines, a tensor_tensor on two.
constexpr double kScalarEngines = 3, kTensorEngines = 2;
// Operand matrices and products of at most this many elements: a row
// tile's operands (spans of at most 8192 elements, planBatchRows), product
// and f32 sums stay within SBUF's row budget (the widest spans, 8096 and
// 4032 f32 elements, lowered and ran).
constexpr int64_t kMaxSmallOperand = 2048, kMaxSmallProduct = 1024;
}  // namespace

// Estimates, in us, of a bmm's two lowerings, to choose between them. On the
// TensorEngine such a bmm is bound by its transfers or by its matmuls. Each
// batch (or batch group, groupSmallBatches) loads its operands and stores
// its rows, a transfer's fixed 2 us each (and one more per about 100 runs,
// kRunsPerPiece), 20 ns a run, spread over the 16 queues; an operand's runs
// are its rows where they are contiguous (A's M, B's K), loaded in rows
// where its k is (A's M again, B's N), else one an element. Each batch takes
// a matmul per 128 k, at least 64 columns' time (4 times that in f32: the
// device model's MatmulCycles) plus the SBUF access, at 2.8 GHz. A batch per
// partition is bound by its instructions (planSmallProduct, at the vector
// engine's 1.12 GHz) or its transfers (planBatchRows' runs a partition).
// Both pay the latency of a first load and a last store, about 6 us. The
// shorter estimate wins. Checked against the profiles of both lowerings on
// 52 random bmms (1 to 1024 batches of M, K, N from 1 to 256, plain or with
// a transposed operand, bf16 and f32): the choice was within 5% of the
// faster one for 49, and 0.5% slower in all (1034.4 us against 1029.5);
// preferring the TensorEngine unless a batch per partition is estimated a
// fifth faster, 6 choices were off and 3.6%. Examples (trn1; estimated,
// then measured us, TensorEngine then a batch per partition): [100, 128, 4]
// @ [100, 4, 4] bf16 77 and 9, 72 and 13; [256, 16, 16] @ [256, 16, 16]
// bf16 38 and 51, 34 and 47; [64, 32, 64] @ [64, 64, 32] bf16 26 and 193,
// 21 and 365; [300, 1, 8] @ [300, 8, 3] f32 47 and 8, 50 and 10.
namespace {
constexpr double kLatencyMicros = 6.0;
// Queue time, in us, of `transfers` of `runs` descriptors in all, spread
// over the queues.
double dmaMicros(double transfers, double runs) {
  const neff::DeviceParams& d = neff::Trn1();
  return (transfers * d.dma_fixed_ns + runs * d.dma_run_ns) / 1000.0 / double(d.dma_queues);
}
// A batch's runs of an operand's [I x J] matrix on the TensorEngine.
int64_t tensorEngineRuns(const aten::StridedView& v) {
  const int64_t I = v.shape[1], J = v.shape[2];
  if (J == 1 || v.strides[2] == 1) return I;  // rows (or k slices) of contiguous elements
  if (I == 1 || v.strides[1] == 1) return J;  // loaded along its other dim
  return I * J;
}
}  // namespace

double tensorEngineBatchesMicros(const aten::StridedView& A, const aten::StridedView& B, int64_t elemBytes) {
  const int64_t batches = A.shape[0], M = A.shape[1], K = A.shape[2], N = B.shape[2];
  const int64_t g = batchGroupSize(batches, M, K, N), groups = (batches + g - 1) / g;
  const double runs = double(g * (tensorEngineRuns(A) + tensorEngineRuns(B) + M));
  const double transfers = std::max(3.0, runs / double(kRunsPerPiece));
  const double dma = double(groups) * dmaMicros(transfers, runs);
  // A group's matmuls move A's M columns (the product transposed); a lone
  // batch's move B's N.
  const double columns = double(std::max<int64_t>(64, g > 1 ? M : N)) * (elemBytes == 4 ? 4 : 1);
  const double matmuls = double(batches * ((K + nc::kNumPartitions - 1) / nc::kNumPartitions));
  return std::max(dma, matmuls * (64 + columns + access()) / (neff::Trn1().tensor_ghz * 1000.0)) + kLatencyMicros;
}

double smallProductsMicros(const aten::StridedView& A, const aten::StridedView& B, int64_t elemBytes) {
  const int64_t P = nc::kNumPartitions, batches = A.shape[0], tiles = (batches + P - 1) / P;
  const int64_t M = A.shape[1], K = A.shape[2], N = B.shape[2];
  const double runs = double(std::min(batches, P) * (planBatchRows(A, elemBytes).runs +
                                                        planBatchRows(B, elemBytes).runs + 1));
  return double(tiles) * std::max(planSmallProduct(M, K, N).cycles / (neff::Trn1().vector_ghz * 1000.0),
                                  dmaMicros(3, runs)) +
         kLatencyMicros;
}

SmallProductPlan planSmallProduct(int64_t M, int64_t K, int64_t N) {
  auto accumulated = [&](int64_t lines, int64_t length) {  // `lines` sums of K multiples of `length` elements
    return double(lines) * (double(K) * scalarCycles(length) / kScalarEngines +
                            double(K - 1) * tensorCycles(length) / kTensorEngines);
  };
  SmallProductPlan best{SmallProductOrder::ByColumns, accumulated(N, M)};
  if (double rows = accumulated(M, N); rows < best.cycles) best = {SmallProductOrder::ByRows, rows};
  // A dot product's multiply (two engines) and sum (the vector engine only).
  if (double dots = double(M * N) * (tensorCycles(K) / kTensorEngines + reduceCycles(K)); dots < best.cycles)
    best = {SmallProductOrder::ByDots, dots};
  return best;
}

// Whether the kernel is one bmm of small matrices and an elementwise
// epilogue over its product, better computed a batch per partition.
bool KernelLowering::productsOnPartitions(Block& body, ArrayRef<int64_t> full) {
  if (prologueOperand || !windowPieces.empty() || space.reduces || full.size() != 3) return false;
  aten::BmmOp bmm;
  for (Operation& op : body.without_terminator()) {
    if (llvm::isa<aten::MmOp, aten::AddmmOp, aten::CatOp, aten::EmbeddingOp>(op)) return false;
    if (auto o = llvm::dyn_cast<aten::BmmOp>(op)) {
      if (bmm) return false;
      bmm = o;
    }
  }
  if (!bmm) return false;
  ArrayRef<int64_t> out = llvm::cast<RankedTensorType>(bmm.getType()).getShape();
  auto lhs = llvm::cast<RankedTensorType>(bmm.getSelf().getType());
  auto rhs = llvm::cast<RankedTensorType>(bmm.getMat2().getType());
  if (out != full || lhs.getElementType() != rhs.getElementType()) return false;
  const int64_t B = out[0], M = out[1], N = out[2], K = lhs.getDimSize(2);
  if (B < 1 || M < 1 || N < 1 || K < 1 || M * K > kMaxSmallOperand || K * N > kMaxSmallOperand ||
      M * N > kMaxSmallProduct || M * N > maxFree)
    return false;
  // (The operands' strides as the lowering will read them: views of the
  // kernel's contiguous inputs.)
  std::optional<aten::StridedView> a = aten::viewOfChain(bmm.getSelf()), b = aten::viewOfChain(bmm.getMat2());
  if (!a || !b) return false;
  const int64_t elemBytes = nc::deviceElementType(lhs.getElementType()).getIntOrFloatBitWidth() / 8;
  return smallProductsMicros(*a, *b, elemBytes) < tensorEngineBatchesMicros(*a, *b, elemBytes);
}

// How rows [r0, r0 + p) of a batched operand `view` ([B, I, J]) load a
// batch per partition: element (i, j) of a batch's matrix at column i *
// rowStep + j * colStep. A matrix loads as the span of HBM it lies in, one
// run a partition (contiguous, transposed, or a slice of longer rows),
// unless that span is longer than the matrix's own runs are worth (a run
// costs 20 ns, 540 bytes at a queue's 27 GB/s) or than kMaxSpan; then run
// by run, in [I, J] order.
BatchRowsPlan planBatchRows(const aten::StridedView& view, int64_t elemBytes) {
  constexpr int64_t kRunBytes = 512, kMaxSpan = 8192;
  const int64_t I = view.shape[1], J = view.shape[2];
  // A dim of one element steps nowhere.
  const int64_t si = I > 1 ? view.strides[1] : 1, sj = J > 1 ? view.strides[2] : 1;
  const int64_t runs = sj == 1 ? (si == J ? 1 : I) : si == 1 && sj == I ? 1 : I * J;
  if (si >= 1 && sj >= 1 && si != sj) {
    const int64_t span = (I - 1) * si + (J - 1) * sj + 1;
    if (span <= kMaxSpan && (span <= 2 * I * J || span * elemBytes <= runs * kRunBytes))
      return {span, si, sj, 1};
  }
  return {0, J, 1, runs};
}

KernelLowering::BatchRowsTile KernelLowering::loadBatchRows(Value hbm, const aten::StridedView& view, int64_t p,
                                                            Type elem) {
  constexpr int64_t kPieceBytes = 16 * 1024;  // pieces on several queues: the kernel waits for them
  const BatchRowsPlan plan = planBatchRows(view, elem.getIntOrFloatBitWidth() / 8);
  const int64_t start = view.offset + r0 * view.strides[0];
  BatchRowsTile t{Value(), plan};
  if (plan.span > 0) {
    t.tile = alloc(p, plan.span, elem);
    loadPanel(hbm, t.tile, start, {view.strides[0], p, 1, plan.span}, kPieceBytes);
  } else {
    t.tile = alloc(p, view.shape[1] * view.shape[2], elem);
    loadPanel(hbm, t.tile, start,
              {view.strides[0], p, view.strides[1], view.shape[1], view.strides[2], view.shape[2]}, kPieceBytes);
  }
  return t;
}

LogicalResult KernelLowering::lowerSmallProducts(Operation* op, Value a, Value bm, int64_t p, int64_t fullWidth,
                                                 Type elem) {
  auto av = viewOf.find(a), bv = viewOf.find(bm);
  if (av == viewOf.end() || bv == viewOf.end())
    return op->emitError("internal: a bmm computed a batch per partition reads an operand not in HBM");
  const aten::StridedView &A = av->second, &B = bv->second;
  const int64_t M = A.shape[1], K = A.shape[2], N = B.shape[2];
  if (c0 != 0 || fullWidth != M * N)
    return op->emitError("internal: a bmm computed a batch per partition over a partial product");
  Type ae = nc::deviceElementType(llvm::cast<RankedTensorType>(a.getType()).getElementType());
  Type be = nc::deviceElementType(llvm::cast<RankedTensorType>(bm.getType()).getElementType());
  if (ae != be) return op->emitError("matmul operands of different dtypes are not supported yet");
  const BatchRowsTile left = loadBatchRows(hbmOf[a], A, p, ae), right = loadBatchRows(hbmOf[bm], B, p, be);
  // Element (i, j) of a batch's left or right matrix, or `count` of them
  // along a row or a column from it.
  auto line = [&](const BatchRowsTile& t, int64_t i, int64_t j, int64_t count, bool alongRow) {
    const int64_t step = alongRow ? t.plan.colStep : t.plan.rowStep;
    return steppedColumns(*b, loc, t.tile, i * t.plan.rowStep + j * t.plan.colStep, count, count > 1 ? step : 1);
  };
  auto element = [&](const BatchRowsTile& t, int64_t i, int64_t j) { return line(t, i, j, 1, true); };
  Value out = alloc(p, M * N, elem);
  Type f32 = b->getF32Type();
  auto add = [&](Value into, Value x, Value y) {
    setSource(b->create<nc::TensorTensorOp>(loc, into, x, y, b->getStringAttr("add")), op);
  };
  // sum over k of lineOf(k) * scalarOf(k) into `into`: the first product
  // straight into an f32 accumulator, each next one added to it, the last
  // addition rounded into the result.
  auto accumulate = [&](Value into, int64_t length, auto lineOf, auto scalarOf) {
    if (K == 1) {
      tensorScalar(into, lineOf(0), scalarOf(0), "mul", 0.0, op);
      return;
    }
    Value sum = alloc(p, length, f32);
    tensorScalar(sum, lineOf(0), scalarOf(0), "mul", 0.0, op);
    for (int64_t k = 1; k < K; ++k) {
      Value product = alloc(p, length, f32);
      tensorScalar(product, lineOf(k), scalarOf(k), "mul", 0.0, op);
      add(k + 1 == K ? into : sum, sum, product);
    }
  };
  switch (planSmallProduct(M, K, N).order) {
    case SmallProductOrder::ByColumns:
      for (int64_t n = 0; n < N; ++n)
        accumulate(steppedColumns(*b, loc, out, n, M, M > 1 ? N : 1), M,
                   [&](int64_t k) { return line(left, 0, k, M, /*alongRow=*/false); },
                   [&](int64_t k) { return element(right, k, n); });
      break;
    case SmallProductOrder::ByRows:
      for (int64_t m = 0; m < M; ++m)
        accumulate(tileColumns(*b, loc, out, m * N, N), N,
                   [&](int64_t k) { return line(right, k, 0, N, /*alongRow=*/true); },
                   [&](int64_t k) { return element(left, m, k); });
      break;
    case SmallProductOrder::ByDots:
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          Value products = alloc(p, K, f32);
          setSource(b->create<nc::TensorTensorOp>(loc, products, line(left, m, 0, K, /*alongRow=*/true),
                                                  line(right, 0, n, K, /*alongRow=*/false), b->getStringAttr("mul")),
                    op);
          setSource(b->create<nc::TensorReduceOp>(loc, tileColumns(*b, loc, out, m * N + n, 1), products,
                                                  b->getStringAttr("add")),
                    op);
        }
      break;
  }
  layouts[op->getResult(0)].kind = Kind::Full;
  tiles[op->getResult(0)] = out;
  return success();
}

LogicalResult KernelLowering::lowerMatmul(Operation* op, Value a, Value bm, Value bias, double beta,
                                          double alpha, int64_t p, int64_t fullWidth, Type elem) {
  if (space.batchRows) return lowerSmallProducts(op, a, bm, p, fullWidth, elem);
  Value result = op->getResult(0);
  auto av = viewOf.find(a), bv = viewOf.find(bm);
  // The left operand of a matmul with a prologue is computed in the kernel.
  Value computedA = a == prologueOperand ? tiles.lookup(a) : Value();
  // A right operand stacked from windows of one tensor (WindowOperand.h):
  // each window a K segment of its own, loaded from that tensor.
  auto windows = windowPieces.find(bm);
  if ((av == viewOf.end() && !computedA) || (bv == viewOf.end() && windows == windowPieces.end()))
    return op->emitError("matmul operands must come from HBM (kernel inputs or views of them)");
  const aten::StridedView A = computedA ? aten::contiguousView(llvm::cast<RankedTensorType>(a.getType()).getShape())
                                        : av->second;
  const aten::StridedView B = bv != viewOf.end() ? bv->second
                                                 : aten::contiguousView(llvm::cast<RankedTensorType>(bm.getType()).getShape());
  Type ae = nc::deviceElementType(llvm::cast<RankedTensorType>(a.getType()).getElementType());
  Type be = nc::deviceElementType(llvm::cast<RankedTensorType>(bm.getType()).getElementType());
  if (ae != be) return op->emitError("matmul operands of different dtypes are not supported yet");
  if (computedA && llvm::cast<MemRefType>(computedA.getType()).getElementType() != ae)
    return op->emitError("internal: a matmul's prologue computed its operand in another dtype");
  bool batched = A.shape.size() == 3;
  int64_t M = A.shape[batched ? 1 : 0], K = A.shape.back();
  int64_t batch = batched ? r0 / M : 0, m0 = batched ? r0 % M : r0;
  int64_t sAb = batched ? A.strides[0] : 0, sAm = A.strides[batched ? 1 : 0], sAk = A.strides.back();
  int64_t sBb = batched ? B.strides[0] : 0, sBk = B.strides[batched ? 1 : 0], sBn = B.strides.back();
  // A product with one column in a kernel with longer rows (its epilogue
  // broadcasts it) is a per-row value: computed once, one column wide.
  bool perRow = B.shape.back() == 1 && space.cols > 1;
  int64_t f = perRow ? 1 : fullWidth, col0 = perRow ? 0 : c0;
  const int64_t P = nc::kNumPartitions, slices = (K + P - 1) / P;
  largestMatmulK = std::max(largestMatmulK, K);
  // alpha * product + beta * bias, from PSUM into the result's tile.
  auto finishMatmul = [&](Value psum) {
    layouts[result].kind = perRow ? Kind::Row : Kind::Full;
    Value out = alloc(p, f, elem);
    Kind biasKind = bias ? layouts[bias].kind : Kind::Imm;
    double biasImm = bias ? layouts[bias].imm : 0.0;
    if (biasKind == Kind::Imm && biasImm * beta != 0.0) {
      // A splat bias: alpha * (A B) + bias in f32, rounded once into the
      // result's dtype (two instructions on a bf16 or f16 tile would round
      // twice).
      setSource(b->create<nc::ActivationOp>(loc, out, psum, Value(), Value(), Value(), b->getStringAttr("identity"),
                                            b->getF64FloatAttr(alpha), b->getF64FloatAttr(biasImm * beta)),
                op);
    } else if (biasKind == Kind::Imm) {  // none
      tensorScalar(out, psum, Value(), "mul", alpha, op);
    } else {
      Value scaled = psum;
      if (alpha != 1.0) {
        scaled = alloc(p, f, b->getF32Type());
        tensorScalar(scaled, psum, Value(), "mul", alpha, op);
      }
      Value biasTile = tileOf(bias);
      if (beta != 1.0) {
        Value t = alloc(p, biasKind == Kind::Full ? f : 1, b->getF32Type());
        tensorScalar(t, biasTile, Value(), "mul", beta, op);
        biasTile = t;
      }
      if (biasKind == Kind::Full)
        setSource(b->create<nc::TensorTensorOp>(loc, out, scaled, biasTile, b->getStringAttr("add")), op);
      else
        tensorScalar(out, scaled, biasTile, "add", 0.0, op);
    }
    tiles[result] = out;
  };
  if (batched && p > M) {  // a batch group (groupSmallBatches)
    if (computedA || m0 != 0 || p % M != 0 || perRow || c0 != 0 || f != B.shape.back())
      return op->emitError("internal: a batch group's row tile does not hold whole batches of the bmm");
    MatmulOperand left{hbmOf[a], A.offset + batch * sAb, sAk, sAm, K, M, ae};
    MatmulOperand right{hbmOf[bm], B.offset + batch * sBb, sBk, sBn, K, f, be};
    finishMatmul(batchGroupProduct(op, left, right, sAb, sBb, p / M));
    return success();
  }
  // The K segments: one of all K rows, or one per window.
  struct Segment {
    int64_t k0, K;
    MatmulOperand moving;
  };
  SmallVector<Segment> segments;
  if (windows != windowPieces.end()) {
    if (computedA || perRow || !batched)
      return op->emitError("internal: a windowed matmul operand beside a computed or per-row operand");
    int64_t k0 = 0;
    for (Value piece : windows->second) {
      auto pv = viewOf.find(piece);
      std::optional<int64_t> rowStride = pv != viewOf.end() ? windowRowStride(pv->second) : std::nullopt;
      if (!rowStride) return op->emitError("internal: a window of a matmul operand that is not one strided view");
      const aten::StridedView& W = pv->second;
      int64_t rows = 1;
      for (size_t d = 1; d + 1 < W.shape.size(); ++d) rows *= W.shape[d];
      segments.push_back({k0, rows,
                          MatmulOperand{hbmOf[piece], W.offset + batch * W.strides[0] + col0 * W.strides.back(),
                                        *rowStride, W.strides.back(), rows, f, be}});
      k0 += rows;
    }
    if (k0 != K) return op->emitError("internal: the windows of a matmul operand do not stack to its K rows");
  }
  // Stationary slices per output tile: a segment's slices start at its rows.
  int64_t stationarySlices = segments.empty() ? slices : 0;
  for (const Segment& seg : segments) stationarySlices += (seg.K + P - 1) / P;
  MatmulOperand stationary{computedA ? Value() : hbmOf[a], A.offset + batch * sAb + m0 * sAm, sAk, sAm, K, p, ae};
  MatmulOperand moving{hbmOf[bm], B.offset + batch * sBb + col0 * sBn, sBk, sBn, K, f, be};
  if (M <= P && !moving.inRows()) moving.streamedBytes = llvm::cast<RankedTensorType>(bm.getType()).getNumElements() * moving.elemBytes();
  // A K-major left operand has rows of p elements, shorter than a DMA
  // descriptor's worth, so its loads cost about a run per partition row.
  // When a row tile's slices serve a single column tile (a long K leaves no
  // room for a wider block of moving slices), those loads outweigh the
  // matmuls: the slices are then loaded for up to four row tiles at once
  // (rows of up to 1 KiB) and kept while those row tiles run, within twice
  // the stationary cache.
  // (A left operand broadcast over the batch, a convolution's weight, has
  // the same slices for every batch: they stay cached across its batches.)
  int64_t wideColumn = 0, cacheRow = batched && sAb == 0 ? m0 : r0;
  if (!computedA && !stationary.inRows() && sAm == 1 && p == P && !batched && blockColumnTiles <= 1) {
    int64_t width = std::min<int64_t>(4 * P, kWideRunBytes / stationary.elemBytes()) / P * P;
    while (width > P && slices * width * stationary.elemBytes() > 2 * kStationaryCacheBytes) width -= P;
    int64_t first = m0 / width * width;
    if (width > P && first + width <= M) {
      wideColumn = m0 - first;
      cacheRow = first;
      stationary = MatmulOperand{hbmOf[a], A.offset + first, sAk, sAm, K, width, ae};
    }
  }
  if (stationaryRow != cacheRow) {
    stationaryCache.clear();
    stationaryRow = cacheRow;
  }
  OperandCache oneTileStationary, oneTileMoving;
  oneTileStationary.singleTile = oneTileMoving.singleTile = true;
  // (Wide slices fit twice the cache by construction.)
  OperandCache& sc = stationary.n != p ||
                             stationarySlices * p * stationary.elemBytes() <= kStationaryCacheBytes
                         ? stationaryCache
                         : oneTileStationary;
  OperandCache& mc = reuseMoving ? movingCache : oneTileMoving;

  int64_t lookahead = kLookahead;
  if (moving.streamedBytes > 0 && streamAhead) {
    lookahead = std::max(kLookahead, kStreamedAheadBytes / (moving.n * moving.elemBytes()));
    streamedAhead |= lookahead > kLookahead && slices > kLookahead + 1;
  }
  if (segments.empty()) segments.push_back({0, K, moving});
  // The K loop's units: a slice of 128 rows of one segment, or a pack of
  // consecutive windows of at most 64 rows each (a convolution's taps over
  // 64 channels or fewer) stacked on the partitions, up to 128 rows: one
  // matmul for several taps (the TensorEngine costs the same per slice of
  // any height; 3 x 3 over 64 channels: 5 matmuls per output tile, not 9).
  struct Unit {
    size_t first, count;
    int64_t k0, rows;
  };
  auto packable = [&](const Segment& x, const Segment& y) {
    return windows != windowPieces.end() && x.K * 2 <= P && y.K == x.K && x.moving.fStride == 1 &&
           y.moving.fStride == 1 && y.moving.hbm == x.moving.hbm && y.moving.kStride == x.moving.kStride;
  };
  SmallVector<Unit> units;
  for (size_t i = 0; i < segments.size();) {
    size_t j = i + 1;
    int64_t rows = segments[i].K;
    while (j < segments.size() && rows + segments[j].K <= P && packable(segments[i], segments[j]))
      rows += segments[j++].K;
    if (j - i > 1) {
      units.push_back({i, j - i, 0, rows});
      i = j;
      continue;
    }
    for (int64_t k0 = 0; k0 < segments[i].K; k0 += P) units.push_back({i, 1, k0, std::min(P, segments[i].K - k0)});
    ++i;
  }
  // Units that read the same rows at first elements a few columns apart (a
  // convolution's taps: a padded row and a tap apart; packs whose windows
  // lie the same distances apart) share one load of the union of their
  // columns, and each unit's slice is a column range of it: units of one
  // shape (their windows' distances from their first, the K slice) in
  // clusters of first elements, each union at most kMaxWindowPanelBytes a
  // partition and narrower than the units' columns loaded one by one
  // (taps in different phases of a strided convolution are a plane apart).
  auto shapeOf = [&](const Unit& u) {
    std::vector<int64_t> shape{int64_t(u.count), u.k0, u.rows};
    for (size_t j = 0; j < u.count; ++j)
      shape.push_back(segments[u.first + j].moving.offset - segments[u.first].moving.offset);
    return shape;
  };
  auto windowed = [&](const Unit& u) {
    const Segment& s = segments[u.first];
    return segments.size() > 1 && s.moving.fStride == 1 && s.moving.hbm == segments.front().moving.hbm &&
           s.moving.kStride == segments.front().moving.kStride;
  };
  // Per unit: its cluster's first and last first elements, and the first
  // unit of its shape (which names the shape in the panel cache).
  struct Cluster {
    int64_t lo, hi, shapeId;
  };
  DenseMap<size_t, Cluster> clusterOf;
  {
    std::map<std::vector<int64_t>, SmallVector<size_t>> byShape;
    for (size_t u = 0; u < units.size(); ++u)
      if (windowed(units[u])) byShape[shapeOf(units[u])].push_back(u);
    const int64_t maxWidth = kMaxWindowPanelBytes / moving.elemBytes();
    for (auto& [shape, members] : byShape) {
      auto firstOf = [&](size_t u) { return segments[units[u].first].moving.offset; };
      SmallVector<size_t> order(members);
      llvm::sort(order, [&](size_t x, size_t y) { return firstOf(x) < firstOf(y) || (firstOf(x) == firstOf(y) && x < y); });
      for (size_t i = 0; i < order.size();) {
        size_t j = i + 1;
        while (j < order.size()) {
          int64_t width = firstOf(order[j]) - firstOf(order[i]) + f;
          if (width > maxWidth || width > int64_t(j - i + 1) * f) break;
          ++j;
        }
        // (A pack loads a panel of its own even alone: its windows' rows.)
        if (j - i > 1 || units[order[i]].count > 1)
          for (size_t k = i; k < j; ++k)
            clusterOf[order[k]] = Cluster{firstOf(order[i]), firstOf(order[j - 1]), int64_t(members.front())};
        i = j;
      }
    }
  }
  auto movingSlice = [&](size_t ui) -> Value {
    const Unit& u = units[ui];
    const Segment& s = segments[u.first];
    auto cl = clusterOf.find(ui);
    if (cl == clusterOf.end()) return operandSlice(mc, s.moving, u.k0, op);
    const int64_t lo = cl->second.lo, width = f + cl->second.hi - lo, kStride = s.moving.kStride;
    // (A negative column stride marks a panel of windows in the cache, its
    // k0 the unit's slice, or for a pack, minus one less its shape's id.)
    OperandKey key{s.moving.hbm.getAsOpaquePointer(), lo, kStride, -width,
                   u.count > 1 ? -1 - cl->second.shapeId : u.k0, u.rows};
    Value& panel = mc.panels[key];
    if (!panel) {
      panel = alloc(u.rows, width, be);
      if (u.count == 1) {
        loadPanel(s.moving.hbm, panel, lo + u.k0 * kStride, {kStride, u.rows, 1, width}, kSplitBytes);
      } else {
        // Each window's rows from its first element; runs of windows whose
        // first elements advance by one distance (the taps along a kernel
        // row) in one transfer with two partition dims.
        const int64_t block = s.K;
        auto relOf = [&](size_t j) { return segments[u.first + j].moving.offset - s.moving.offset; };
        for (size_t j = 0; j < u.count;) {
          size_t e = j + 1;
          const int64_t step = j + 1 < u.count ? relOf(j + 1) - relOf(j) : 0;
          while (step > 0 && e < u.count && relOf(e) - relOf(e - 1) == step) ++e;
          SmallVector<int64_t> ap;
          if (e - j > 1) ap = {step, int64_t(e - j), kStride, block, 1, width};
          else ap = {kStride, block, 1, width};
          Operation* dma = b->create<nc::DmaLoadOp>(loc, s.moving.hbm, panel, b->getI64IntegerAttr(int64_t(j) * block),
                                                    b->getI64IntegerAttr(lo + relOf(j)), b->getDenseI64ArrayAttr(ap));
          if (e - j > 1) dma->setAttr("partition_dims", b->getI64IntegerAttr(2));
          setEngineAndSource(dma, *b, "dma", -1);
          ++numInst;
          ++numDma;
          j = e;
        }
      }
    }
    return tileColumns(*b, loc, panel, s.moving.offset - lo, f);
  };
  // The units in turn, all accumulated into one PSUM tile; a unit's
  // stationary slice is A's columns of its K rows.
  const int64_t count = int64_t(units.size());
  Value psum = allocPsum(p, f);
  SmallVector<std::pair<Value, Value>> prepared;
  for (int64_t i = 0; i < count; ++i) {
    while (int64_t(prepared.size()) < std::min(count, i + 1 + lookahead)) {
      const size_t ui = prepared.size();
      const Unit& u = units[ui];
      Value left;
      if (computedA) {
        left = computedSlice(sc, computedA, u.k0, op);
      } else if (segments.size() == 1) {
        left = operandSlice(sc, stationary, u.k0, op);
      } else {
        MatmulOperand part = stationary;
        part.offset += segments[u.first].k0 * sAk;
        part.K = u.count > 1 ? u.rows : segments[u.first].K;
        left = operandSlice(sc, part, u.k0, op);
      }
      if (stationary.n != p) left = tileColumns(*b, loc, left, wideColumn, p);
      prepared.push_back({left, movingSlice(ui)});
    }
    setSource(b->create<nc::MatmulOp>(loc, psum, prepared[size_t(i)].first, prepared[size_t(i)].second,
                                      b->getBoolAttr(i > 0)),
              op);
  }

  finishMatmul(psum);
  return success();
}

}  // namespace neuroncc::lowering
