//===- KernelLowering.h - one kernel onto the NeuronCore (private) ---------===//
//
// Shared by the lowering's files: LowerToIsa.cpp (iteration space, layouts,
// DMA, the row/column tile loop), LowerElementwise.cpp (elementwise ops and
// reductions) and LowerMatmul.cpp (matmuls).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <array>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "dialects/aten/AtenDialect.h"
#include "dialects/aten/Views.h"
#include "dialects/nc/NcDialect.h"
#include "passes/AttentionPattern.h"
#include "passes/OnlineSum.h"
#include "passes/PermutePlan.h"
#include "passes/ReductionCost.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace neuroncc::lowering {

using namespace mlir;

// Short rows (LowerToIsa.cpp, "Short rows"): rows under kShortRowBytes are
// packed several to a partition, aiming for runs of kPackedRunBytes and
// keeping kMinShortRowTiles row tiles.
inline constexpr int64_t kShortRowBytes = 512, kPackedRunBytes = 1024, kMinShortRowTiles = 8;
// Stepped loads (LowerToIsa.cpp, emitDma): a load whose innermost dim steps
// 2 to kMaxStagedStep elements, at least kMinStagedSteps of them, is staged
// as its span, at most kMaxStagedOuter spans and kMaxStagingBytes a
// partition.
inline constexpr int64_t kMaxStagedStep = 64, kMinStagedSteps = 4, kMaxStagedOuter = 16,
                         kMaxStagingBytes = 16 * 1024;

// An instruction's engine and source op, set as one discardable-attribute
// dictionary (each setAttr rebuilds it; instructions number in the millions).
void setEngineAndSource(Operation* inst, Builder& b, StringRef engine, int64_t sourceIndex);

// The most SBUF bytes per partition a lowered body's tiles hold at once.
int64_t sbufPeakBytes(Block& body);

// Peepholes on a lowered kernel body (IsaPeepholes.cpp); each returns the
// number of instructions it removed.
int64_t foldIntoActivation(Block& body);
int64_t foldActivationSum(Block& body);
int64_t fuseSquareSum(Block& body);
SmallVector<int64_t> contiguousStrides(ArrayRef<int64_t> shape);
int64_t product(ArrayRef<int64_t> v);
int64_t reducedCount(Operation* reduction);
std::optional<double> splatValue(Value v);
// The free dims of an access pattern ((stride, count) pairs, outermost
// first) with unit counts dropped and contiguous neighbours merged.
SmallVector<int64_t> simplifyFreePattern(ArrayRef<int64_t> freeAp);
// Columns [column, column + n) of an SBUF or PSUM tile: the tile itself, or
// an nc.tile_columns view of it.
Value tileColumns(OpBuilder& b, Location loc, Value tile, int64_t column, int64_t n);

// A kernel input (its position) and the strides it is read with (emitDma's
// staging).
using SiblingKey = std::tuple<int64_t, std::vector<int64_t>, std::vector<int64_t>>;
// A staged load: the tensor, the tile's dtype, the iteration, each
// partition's first element, the pattern.
using StagedKey = std::tuple<const void*, const void*, int64_t, std::vector<int64_t>, std::vector<int64_t>>;

struct RowSegments {
  SmallVector<std::pair<int64_t, int64_t>, 4> segments;  // (first row, rows)
  int64_t stride = 0;                                    // between segments' first elements
  bool uniform = true;
  // With blocks > 1 (uniform rows only), `blocks` consecutive blocks of w
  // columns each, one after another in the free dim.
  SmallVector<std::tuple<int64_t, int64_t, SmallVector<int64_t>>, 4> transfers(int64_t colStride, int64_t w,
                                                                                int64_t blocks = 1) const;
};
RowSegments adjacentRowSegments(ArrayRef<int64_t> offs);
// The cluster of sibling first elements that holds `offset` (LowerToIsa.cpp).
std::pair<int64_t, int64_t> siblingCluster(ArrayRef<int64_t> offsets, int64_t offset, int64_t reach);
// The n columns column, column + step, ... of a tile (a stepped view when
// step > 1): the data inputs and the outputs of elementwise instructions.
Value steppedColumns(OpBuilder& b, Location loc, Value tile, int64_t column, int64_t n, int64_t step);

// Whether a copy kernel that returns `expand` (through reshapes that keep
// its element order) is lowered by widening rows in SBUF (LowerCopies.cpp):
// floats of one dtype, not empty.
bool lowersAsExpandCopy(aten::ExpandOp expand);

// A permuting copy's tiles (PermutePlan.h) and the copied view of the input.
struct PermuteCopyPlan : PermuteSplit {
  aten::StridedView view;
};

// A lone sum, mean or amax over a run of middle dims, reduced in SBUF rows
// (LowerReductions.cpp): its input merged into [rows..., R, C] (`rows` the
// kept dims before the reduced ones, their strides in the input and in the
// [rows, C] output), `group` consecutive rows to a partition, C in chunks
// of `chunk` columns and R in steps of `rChunk` a tile, reduced per (row,
// column), across the rows, or block by block.
struct MiddleReductionPlan {
  Operation* reduction = nullptr;
  SmallVector<CopyDim> rows;
  int64_t R = 1, rStride = 0, C = 1, cStride = 0, offset = 0;
  int64_t group = 1, chunk = 1, rChunk = 1;
  MiddleReductionMethod method = MiddleReductionMethod::PerBlock;
};

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
  // Row tiles never cross a multiple of this (a bmm's batch, or a group of
  // its batches: groupSmallBatches); 0: no limit.
  int64_t rowBlock = 0;
  bool matmul = false;
  // > 1: the innermost dim of the kernel's shape was split into [split,
  // cols] and the first part moved onto the rows (few long rows spread over
  // the partitions); layouts are computed against the unsplit shape.
  int64_t split = 1;
  // An elementwise kernel (no reduction, matmul, embedding or cat): any
  // split of its dims into rows and columns computes the same elements.
  bool elementwise = false;
  // > 1: short rows packed several to a partition (packShortRows): the last
  // leading dim L of `unpacked` (the lead dims, then the trail dims, before
  // packing) was split into [L / pack, pack] and the second part moved onto
  // the columns, which are [pack, C] (C the one trailing dim longer than 1).
  // Layouts are computed against the unpacked shape.
  int64_t pack = 1;
  SmallVector<int64_t> unpacked;
  size_t unpackedLead = 0;
  // Non-empty where mergeChainedDims collapsed runs of adjacent dims that
  // every value steps through as one dim (an elementwise kernel over
  // [32768, 2, 2] is one over [65536, 2]; with a bias over [2, 2], one over
  // [32768, 4]): the dims before (lead, then trail), how many were lead,
  // and how many of them each dim of lead, then trail, covers. Layouts are
  // computed against `unmerged` and collapsed.
  SmallVector<int64_t> unmerged;
  size_t unmergedLead = 0;
  SmallVector<int64_t> mergedGroups;
  // Packed or interleaved: the index of L among the (unpacked) leading dims
  // (any after it are 1).
  size_t packDim = 0;
  // > 1: interleaved row tiles (interleaveShortRows): rows go in groups of
  // up to 128 x interleave, row tile j of a group holding rows start + j +
  // i * interleave on partition i, and values read or written in rows move
  // for the whole group at once, `interleave` rows per partition.
  int64_t interleave = 1;
  // Leading dims moved onto the columns (widenShortRows).
  bool widened = false;
  // A bmm of small matrices and its epilogue, a batch per partition: the
  // rows are the batches and the columns a batch's [M x N] product
  // (productsOnPartitions); the product is computed on the vector engines.
  bool batchRows = false;
};

// How a batch's small [M x K] @ [K x N] product is computed with a batch per
// partition (LowerMatmul.cpp): by columns (an instruction per k and n over
// M elements), by rows (per k and m over N), or by dot products (per m and
// n over K, reduced).
enum class SmallProductOrder { ByColumns, ByRows, ByDots };
struct SmallProductPlan {
  SmallProductOrder order = SmallProductOrder::ByColumns;
  double cycles = 0;  // engine cycles of one row tile's instructions
};
SmallProductPlan planSmallProduct(int64_t M, int64_t K, int64_t N);
// A batched operand's matrices loaded a batch per partition: as the span
// of HBM each lies in (span > 0 elements) or run by run (`runs` a
// partition), element (i, j) at column i * rowStep + j * colStep.
struct BatchRowsPlan {
  int64_t span = 0, rowStep = 0, colStep = 0, runs = 0;
};
BatchRowsPlan planBatchRows(const aten::StridedView& view, int64_t elemBytes);
// Estimated us of a bmm of small matrices (operands A, B) on the
// TensorEngine, and a batch per partition.
double tensorEngineBatchesMicros(const aten::StridedView& A, const aten::StridedView& B, int64_t elemBytes);
double smallProductsMicros(const aten::StridedView& A, const aten::StridedView& B, int64_t elemBytes);
// Batches of a bmm grouped into one row tile (groupSmallBatches), 1 for none.
int64_t batchGroupSize(int64_t batches, int64_t M, int64_t K, int64_t N);

// A row's columns as one varying dim (`count` elements `stride` apart)
// repeated `inner` times for each of its elements and the whole `outer`
// times (valid: exactly one varying dim and some repeat).
struct BroadcastColumns {
  int64_t stride = 0, count = 1, inner = 1, outer = 1;
  bool valid = false;
};
// Of a simplified (stride, count) pattern (simplifyFreePattern).
BroadcastColumns broadcastColumns(ArrayRef<int64_t> pattern);
// At most this many stepped copies widen a value's repeats inside its
// varying dim (loadBroadcastColumns).
inline constexpr int64_t kMaxWidenedCopies = 16;

// Prepared matmul operand slices ([k slice x columns] SBUF tiles, see
// LowerMatmul.cpp) and the panels they were loaded in, by operand and k (for
// a panel: its first k and its partitions).
struct OperandKey {
  void* hbm;
  int64_t offset, kStride, fStride, k0, n;
  bool operator<(const OperandKey& o) const {
    return std::tie(hbm, offset, kStride, fStride, k0, n) <
           std::tie(o.hbm, o.offset, o.kStride, o.fStride, o.k0, o.n);
  }
};
// The panel operandPanel loads for a slice: its cache key, shape, the
// slice's first column in it, and the DMA (first element, access pattern).
struct PanelSpec {
  OperandKey key{};
  int64_t partitions = 0, cols = 0, column = 0, startOffset = 0;
  SmallVector<int64_t> ap;
};
struct OperandCache {
  std::map<OperandKey, Value> slices, panels;
  // Slices serve one output tile only (they die at its matmuls), so
  // transposed slices may rotate like panels (PlanMemory.cpp).
  bool singleTile = false;
  void clear() {
    slices.clear();
    panels.clear();
  }
};
// A matmul operand: element (k, j) of the [K x n] matrix the TensorEngine
// needs is at offset + k * kStride + j * fStride of hbm.
struct MatmulOperand {
  Value hbm;
  int64_t offset, kStride, fStride, K, n;
  Type elem;
  // A direct moving operand whose slices each serve a single row tile
  // (M <= 128: a weight read for a few tokens) is streamed: its loads, not
  // the TensorEngine, bound the kernel. Its bytes (all batches and columns),
  // or 0 for any other operand (one read in rows is bound by its transposes).
  int64_t streamedBytes = 0;
  int64_t elemBytes() const { return elem.getIntOrFloatBitWidth() / 8; }
  bool inRows() const { return kStride == 1 && fStride != 1; }
};

// Whether every element of `v`, a value of an unlowered kernel body, is a
// whole number on the device: a value of an integer or bool type, or one
// computed from such by ops that keep whole numbers whole (+, -, *, neg, abs,
// relu, sum, amax, where, masked_fill, cat, views and casts, with whole
// scalars). A cast of it to an integer type then has nothing to round.
// `wholeResults`: kernel results (function values) known to be whole;
// `memo` caches answers.
bool isWholeValued(Value v, const llvm::DenseSet<Value>& wholeResults, llvm::DenseMap<Value, bool>& memo);

// An attention's short heads packed several to a pass (LowerAttention.cpp):
// the batches along `step` of the flattened batch index, runs of `extent`
// of them, `heads` to a pack.
struct DiagonalPacking {
  int64_t step = 0, extent = 0, heads = 1;
};

class KernelLowering {
 public:
  // fewBytesLimit: movesFewBytes's threshold (-1: from the device model).
  KernelLowering(nc::KernelOp kernel, int64_t maxFree, int64_t rowBudget,
                 const llvm::DenseSet<Value>* wholeResults = nullptr, int64_t fewBytesLimit = -1)
      : kernel(kernel), maxFree(maxFree), rowBudget(rowBudget), fewBytesLimit(fewBytesLimit),
        wholeResults(wholeResults) {}

  LogicalResult run(int64_t& instructions, int64_t& dmas);

 private:
  LogicalResult computeSpace(bool prologue = false);
  void mergeCopiedColumns(Value copied, SmallVectorImpl<int64_t>& full);
  LogicalResult findPrologue(Block& body);
  void splitLongRows();
  bool packShortRows(ArrayRef<Value> hbmValues);
  bool mergeChainedDims(ArrayRef<Value> hbmValues);
  bool widenShortRows(ArrayRef<Value> hbmValues);
  bool loadBroadcastColumns(Value v, Value tile, const Layout& l, int64_t p, int64_t f);
  bool catsOfLoadedRowsOnly();
  std::pair<Value, int64_t> sliceOfFullRows(Value piece, int64_t width, Type elem, int64_t period);
  Layout slicedValueLayout(Value piece);
  bool interleaveShortRows(ArrayRef<Value> hbmValues);
  // Short-row helpers: the narrowest HBM element among the kernel's inputs
  // and results, in bytes; the rows per partition for runs of `runBytes`.
  int64_t narrowestElementBytes(ArrayRef<Value> hbmValues);
  bool movesFewBytes();
  int64_t shortRowFactor(int64_t rowDim, int64_t narrowest, int64_t runBytes,
                         int64_t maxRows = std::numeric_limits<int64_t>::max());
  // The innermost leading dim longer than 1 if only dims of 1 follow it
  // (where consecutive rows step), else -1.
  int64_t shortRowDim() const;
  // The (stride, count) pairs of a row of the space in layout `l`, merged.
  SmallVector<int64_t> rowPattern(const Layout& l) const;
  // Whether a value read or written in rows through `l` is one run per row.
  bool rowIsOneRun(const Layout& l) const;
  bool storedViewsAllow(llvm::function_ref<bool(const Layout&)> ok);
  // A row tile's store of a value laid out as `store` (an interleaved
  // kernel's goes through its group's tile).
  void storeRows(Value hbm, Value tile, const Layout& store, int64_t p, int64_t f, bool computed);
  // A packed kernel's input that is the same in each of a partition's rows
  // (a bias over the columns): one row loaded, then copied across the tile.
  void loadRepeatedRows(Value hbm, Value tile, const Layout& l, int64_t p, int64_t f, int64_t row);
  // A packed kernel's input that is constant along each row but varies
  // with the packed rows (a per-row scalar): one value per packed row
  // loaded, then each copied across its row.
  void loadWidenedRows(Value hbm, Value tile, const Layout& l, int64_t p, int64_t f);
  // Tile columns [0, filled) copied over the tile's first f, doubling.
  void repeatColumns(Value tile, int64_t filled, int64_t f);
  // values' n columns each copied into `copies` adjacent tile columns
  // (column c of values into c * copies .. c * copies + copies - 1).
  void spreadColumns(Value tile, Value values, int64_t n, int64_t copies);
  // The shape values' layouts are computed against: the space's dims before
  // packing (packShortRows) and merging (mergeChainedDims).
  SmallVector<int64_t> layoutShape() const {
    if (!space.unmerged.empty()) return space.unmerged;
    if (space.pack > 1) return space.unpacked;
    SmallVector<int64_t> dims(space.lead);
    dims.append(space.trail);
    return dims;
  }
  // The kernel's leading dims before a spread added its partitions' dim.
  ArrayRef<int64_t> unsplitLead() const {
    return space.split > 1 ? ArrayRef<int64_t>(space.lead).drop_back() : ArrayRef<int64_t>(space.lead);
  }
  // A spread kernel's reduction: f32 partials [p x 1], one per partition, to
  // their row's result on each of the row's partitions.
  Value combineSpreadPartials(Value partials, StringRef alu, int64_t p, Operation* src);
  Value spreadMask(int64_t p);
  // A [p x f] f32 tile: 1 where floor(partition / rows) == floor(column /
  // columns), else 0 (rows and columns of one block on the diagonal).
  Value blockDiagonalMask(int64_t p, int64_t f, int64_t rows, int64_t columns);
  LogicalResult layoutOfInput(Value v, Layout& out);
  LogicalResult layoutOfView(const aten::StridedView& view, Layout& out);
  LogicalResult lowerCat(aten::CatOp cat, Block* body, ArrayRef<Value> outHbm);
  LogicalResult assembleNestedCat(aten::CatOp inner, Value tile, int64_t r0, int64_t p, int64_t first,
                                  int64_t count);
  void placeInRows(Value out, Value staging, std::optional<double> fill, int64_t g, int64_t width, int64_t start,
                   int64_t w, Operation* source, int64_t from = 0, int64_t stride = 0);
  // A cat along the last dim of `pieces` into `result` whose output rows are
  // short, with g rows per partition (rowCatFactor: 1, not applicable,
  // leaves it to the general lowering). `source`: the op the instructions
  // are attributed to.
  int64_t rowCatFactor(ArrayRef<Value> pieces, RankedTensorType result);
  // A copy kernel returning `expand` (lowersAsExpandCopy): LowerCopies.cpp.
  LogicalResult lowerExpandCopy(aten::ExpandOp expand, ArrayRef<Value> outHbm);
  // A copy kernel of a permuting view with short runs, rearranged in SBUF
  // (LowerCopies.cpp): planned (false where the direct copy is as good),
  // then lowered.
  bool planPermuteCopy(Value copied, PermuteCopyPlan& plan);
  LogicalResult lowerPermuteCopy(Value copied, const PermuteCopyPlan& plan, ArrayRef<Value> outHbm);
  // Sets the space to a tile of rows, then columns ((size, stride) pairs,
  // outermost first), and with `l` the layout of the HBM view they make from
  // `offset` (copy and reduction kernels that lay out their own tiles).
  LogicalResult tileSpace(ArrayRef<std::pair<int64_t, int64_t>> rows, ArrayRef<std::pair<int64_t, int64_t>> columns,
                          int64_t offset, Layout* l);
  bool planMiddleReduction(Operation* reduction, MiddleReductionPlan& plan);
  LogicalResult lowerMiddleReduction(const MiddleReductionPlan& plan, ArrayRef<Value> outHbm);
  // acc[j * c + k] = alu over i < r of tile[j, i, k] (g rows of r x c per
  // partition; added into acc's values where `started`).
  void reduceMiddleTile(Value acc, Value tile, int64_t g, int64_t r, int64_t c, MiddleReductionMethod method,
                        StringRef alu, bool started, Operation* src);
  // Step `step` of `steps` of a reduction taken a tile at a time, reduced
  // into one of two f32 [p x g * c] accumulators by its parity (allocated
  // where null); after the last, the accumulators combined (returned; null
  // before).
  Value reduceMiddleStep(std::array<Value, 2>& accs, int64_t step, int64_t steps, Value tile, int64_t p, int64_t g,
                         int64_t r, int64_t c, MiddleReductionMethod method, StringRef alu, Operation* src);
  // LowerMiddleFrame.cpp: a kernel marked nc.middle_frame, its values
  // varying along some of the axes of [g packed rows, R, c columns].
  LogicalResult runMiddleFrame(int64_t& instructions, int64_t& dmas);
  LogicalResult lowerFramePieces(Operation* op, unsigned resultAxes, ArrayRef<std::pair<Value, unsigned>> operands,
                                 int64_t p, int64_t g, int64_t R, int64_t c);
  // A reduction over R of a tile of R (of totalR) elements, chunk `chunk`
  // of `chunks`: chunks alternate between the two accumulators `acc` (two
  // chains of adds, which the Vector and GpSimd engines share); the last
  // combines them and gives the result. Its adds are priced over the
  // Vector and GpSimd engines together where, on the Vector engine alone,
  // the reduction would take longer than `tileLoadNs` (0: never).
  LogicalResult lowerFrameReduction(Operation* op, int64_t p, int64_t g, int64_t R, int64_t c, unsigned inAxes,
                                    std::array<Value, 2>& acc, int64_t chunk, int64_t chunks, int64_t totalR,
                                    double tileLoadNs);
  // The tile of `v` (its axes `have`) laid out along the axes `want` of a
  // value stored to `hbm`.
  FailureOr<Value> materializeFrameValue(Value v, unsigned have, unsigned want, int64_t p, int64_t g, int64_t R,
                                         int64_t c, MemRefType hbm);
  bool isImmediate(Value v) const {
    auto it = layouts.find(v);
    return it != layouts.end() && it->second.kind == Kind::Imm;
  }
  LogicalResult lowerRowCat(ArrayRef<Value> pieces, RankedTensorType result, Operation* source, int64_t g,
                            ArrayRef<Value> outHbm);
  // The HBM offsets of rows r0 + i * rowStep, i < p.
  SmallVector<int64_t> rowOffsets(const Layout& l, int64_t r0, int64_t p);
  // `packedRows` > 1: each partition holds that many consecutive rows of f
  // columns each (an interleaved kernel's group tile). `stepped` (stride,
  // first element): each partition's f elements that many apart from there
  // instead of the layout's columns.
  void emitDma(bool load, Value hbm, Value tile, const Layout& l, int64_t r0, int64_t p,
               int64_t c0, int64_t f, int64_t packedRows = 1,
               std::optional<std::pair<int64_t, int64_t>> stepped = std::nullopt);
  Value alloc(int64_t p, int64_t f, Type elem);
  Value allocPsum(int64_t p, int64_t f);
  Value tileOf(Value v);
  int64_t columnTile() const;
  bool loadTransposed(Value v, Value tile, const Layout& l, int64_t p, int64_t f);
  // Blocks of columns loadTransposed loaded for consecutive row tiles at
  // once (one run per column across them), by input and the HBM offset of
  // the block's first column: the rows covered from `firstRow` (an HBM
  // offset), the columns and blocks of a transfer.
  struct GatheredLoad {
    Value tile;
    int64_t firstRow, rows, colStride, columns, blocks;
  };
  // Row tiles gathered until a run reaches the bytes a DMA descriptor costs
  // as much time as (device_model.cc: 20 ns, 512 bytes at a queue's rate),
  // and only into transfers of up to kGatheredLoadBytes (four blocks of 128
  // bf16 columns for two row tiles): four row tiles of four blocks, 512 KiB
  // transfers, slowed a softmax over the 512 channels of [16, 512, 1024]
  // (181.5 -> 223.4 us, before the row tiles shared an iteration).
  static constexpr int64_t kGatheredLoadTiles = 4, kGatheredRunBytes = 512, kGatheredLoadBytes = 256 * 1024;
  std::map<std::pair<void*, int64_t>, GatheredLoad> gatheredLoads;
  // The rows of the row tiles that share the last gathered loads' iteration.
  int64_t gatheredIterationStart = 0, gatheredIterationEnd = 0;
  bool storeTransposed(Value hbm, Value tile, const Layout& l, ArrayRef<int64_t> offs, int64_t col0, int64_t f);
  // A spread kernel's per-row values gathered onto one partition and
  // stored in one transfer (false: not evenly spaced in HBM).
  bool storeSpreadRows(Value hbm, Value tile, const Layout& l, ArrayRef<int64_t> offs, int64_t p);
  // Transposed blocks of consecutive row tiles gathered for one store.
  struct PendingTransposedStore {
    Value hbm, tile;
    int64_t colOffset, colStride, firstRow, rows, partitions, capacity;
  };
  static constexpr int64_t kTransposedRows = 4 * 128;
  // By output (argument number) and column offset: a deterministic order.
  std::map<std::pair<int64_t, int64_t>, PendingTransposedStore> pendingTransposed;
  void flushTransposed(const PendingTransposedStore& pending);
  LogicalResult lowerOp(Operation* op, int64_t p, int64_t f);
  LogicalResult lowerMatmul(Operation* op, Value a, Value bm, Value bias, double beta, double alpha,
                            int64_t p, int64_t f, Type elem);
  Value operandSlice(OperandCache& cache, const MatmulOperand& o, int64_t k0, Operation* op);
  Value computedSlice(OperandCache& cache, Value tile, int64_t k0, Operation* op);
  Value operandPanel(OperandCache& cache, const MatmulOperand& o, int64_t k0, int64_t chunk, int64_t& column);
  PanelSpec panelSpec(const MatmulOperand& o, int64_t k0, int64_t chunk) const;
  void loadPanel(Value hbm, Value panel, int64_t startOffset, ArrayRef<int64_t> ap, int64_t split);
  Value sharePanels(ArrayRef<MatmulOperand> operands, ArrayRef<OperandCache*> caches, int64_t k0, int64_t chunk,
                    bool atAnyDistance = false);
  void loadRuns(Value hbm, Value panel, int64_t startOffset, ArrayRef<int64_t> ap);
  void groupSmallBatches(Block& body);
  bool productsOnPartitions(Block& body, ArrayRef<int64_t> full);
  LogicalResult lowerSmallProducts(Operation* op, Value a, Value bm, int64_t p, int64_t fullWidth, Type elem);
  struct BatchRowsTile {
    Value tile;
    BatchRowsPlan plan;  // how it was loaded: its steps between a matrix's rows and columns
  };
  BatchRowsTile loadBatchRows(Value hbm, const aten::StridedView& view, int64_t p, Type elem);
  SmallVector<Value> batchGroupOperand(const MatmulOperand& o, int64_t batchStride, int64_t g, Operation* op);
  Value batchGroupProduct(Operation* op, const MatmulOperand& a, const MatmulOperand& bm, int64_t sAb, int64_t sBb,
                          int64_t g);
  void setSource(Operation* inst, Operation* src);
  // Emits out = alu(in, scalar[p, 0] or imm) (operands swapped with reverse), attributed to src.
  void tensorScalar(Value out, Value in, Value scalar, StringRef alu, double imm, Operation* src,
                    bool reverse = false);
  // out = in, exact when out holds in's values' dtype (a PSUM result or a
  // column range); a multiply by one, so that either the vector or the
  // scalar engine may run it.
  void copyTile(Value out, Value in, Operation* src) { tensorScalar(out, in, Value(), "mul", 1.0, src); }
  // Splat constants of the kernel body become immediates; other constants must be kernel inputs.
  LogicalResult markImmediates(Block& old);

  // LowerAttention.cpp: a kernel holding one attention.
  LogicalResult runAttention(int64_t& instructions, int64_t& dmas);
  LogicalResult lowerAttention(const AttentionMatch& m, Value out, const aten::StridedView& outLayout);
  LogicalResult lowerDiagonalPacks(const AttentionMatch& m, Value out, const aten::StridedView& outLayout,
                                   const DiagonalPacking& packing);
  struct AttentionMask;
  std::optional<AttentionMask> attentionMask(const AttentionMatch& m);
  LogicalResult lowerMaskInPlace(Operation* op, Value chainIn, int64_t p, int64_t k0, int64_t nk,
                                 ArrayRef<std::pair<int64_t, int64_t>> masked);

  LogicalResult storeOutput(Value v, Value hbm, int64_t p, int64_t f);
  Type hbmElementType(BlockArgument arg);
  LogicalResult foldViews(Block& old, bool allowTileAliases);
  bool storedViewChain(Operation* view);
  bool keepsTile(Operation* view);
  Block* createIsaBody(Block& old, SmallVectorImpl<Value>& outHbm);
  void finishBody(Block& old, int64_t& instructions, int64_t& dmas);
  Value broadcastRow(Value rowTile, double imm, int64_t p, int64_t f, Type elem, Operation* source);
  // Writes `value` into every element of `tile` (an iota with zero steps).
  void fillConstant(Value tile, double value, Operation* source);
  // The value of a kernel input (or a view of one) that is a splat
  // constant, inside the kernel or passed in; nullopt otherwise.
  std::optional<double> splatPiece(Value v);
  void finalizeReduction(Operation* op, int64_t p);
  // Over chunked rows, a softmax's normalizer (passes/OnlineSum.h) is summed
  // chunk by chunk against a running reference; the reference and the sum
  // are kept in `accumulators` under the subtraction's and the exp's results
  // (values nothing else reads).
  LogicalResult lowerOnlineStep(const OnlineSum& m, int64_t p, int64_t f);
  void finalizeOnlineSum(const OnlineSum& m, int64_t p);
  void expWithBias(Value out, Value in, Value bias, Value accum, Operation* src);
  // The normalizer whose subtraction, exp or sum `op` is, when the kernel's
  // chunks sum it online (its input is a full-width tile).
  const OnlineSum* summedOnline(Operation* op);
  const OnlineSum* onlineRole(Operation* op) const;
  bool isOnlinePart(Operation* op) const;
  // A row-preserving reshape of a computed value takes over its tile.
  bool aliasTile(Operation& op);

  // LowerResident.cpp: a kernel marked nc.resident_rows, in passes over its
  // inputs kept in SBUF, one per level of reductions.
  void planResidentRows(Block& body);
  LogicalResult lowerResidentRows(Block& body, ArrayRef<Value> hbmValues, nc::YieldOp yield, ArrayRef<Value> outHbm,
                                  ArrayRef<Operation*> reductions, int64_t chunk, int64_t p);
  bool fullWidth(Value v) const;
  bool inResidentPass(Operation* op) const;
  llvm::DenseMap<Operation*, int> residentLevel;
  int residentMaxLevel = 0;

  nc::KernelOp kernel;
  int64_t maxFree;
  int64_t rowBudget;
  int64_t fewBytesLimit;
  const llvm::DenseSet<Value>* wholeResults;
  llvm::DenseMap<Value, bool> wholeMemo;
  Space space;
  // Chunked reduction: a row too long for SBUF is reduced chunk by chunk into
  // per-row accumulators; ops that need the reduced value run after the last
  // chunk and must themselves be per-row.
  bool chunked = false;
  // Chunked rows: the columns of a chunk, when less than maxFree (halved
  // while a chunk's tiles overflow SBUF); 0: maxFree.
  int64_t chunkColumns = 0;
  // A kernel that moves few bytes (movesFewBytes): its transfers leave the
  // DMA queues idle, so its short rows need not keep kMinShortRowTiles row
  // tiles for overlap, and its transfers split over the idle queues.
  bool fewBytes = false;
  int64_t minShortRowTiles() const { return fewBytes ? 1 : kMinShortRowTiles; }
  bool accumulating = false;  // lowering a chunk (not the ops after the last one)
  llvm::DenseMap<Value, Value> accumulators;  // reduction result -> f32 [p x 1]
  SmallVector<OnlineSum> onlineSums;          // the kernel's softmax normalizers
  // A lone reduction over non-trailing dims: its input, read with this
  // permutation of dims (kept dims, then reduced dims).
  Value permutedInput;
  SmallVector<int64_t> inputPermutation;
  llvm::DenseMap<Value, Value> sameTileAs;  // row-preserving reshapes of computed values
  // Returned one-to-one views of computed values: the root's tile is stored
  // through this view of the output buffer in the root's shape.
  llvm::DenseMap<Value, aten::StridedView> storedThrough;
  llvm::DenseSet<Value> tilelessViews;  // inner links of such chains: no tile of their own
  // Reshapes between a copy kernel's cat (or last-dim expand) and its
  // result (a stack flattened): the output holds the cat's elements in
  // order, so they emit nothing.
  llvm::DenseSet<Operation*> returnedReshapes;
  // Loaded values by HBM tensor and strides: their first elements (emitDma
  // stages one span for those of a stepped load), and the staging tiles of
  // the kernel body's loads, by what they read.
  std::map<SiblingKey, SmallVector<int64_t, 4>> stagedSiblings;
  std::map<StagedKey, Value> stagedTiles;
  // Siblings of one shape too (sharedWindow).
  std::map<std::pair<SiblingKey, std::vector<int64_t>>, SmallVector<int64_t, 4>> windowSiblings;
  static SiblingKey siblingKey(Value input, const Layout& l);
  Value sharedWindow(Value v, const Layout& l, int64_t p, int64_t f);
  void compactStaged(Value tile, Value staging, int64_t outer, int64_t span, int64_t shift, int64_t steps,
                     int64_t step);
  // Tiles holding only a splat constant (broadcastRow without a row value),
  // by (value bits, partitions, columns, dtype): written once per kernel and
  // read by every row tile that needs them.
  std::map<std::tuple<uint64_t, int64_t, int64_t, const void*>, Value> constantTiles;
  // A spread kernel's [p x p] mask: 1 where two partitions hold the same row.
  Value sameRowMask;
  // Output columns per matmul tile: one PSUM bank (512 f32).
  static constexpr int64_t matmulColumns = nc::kPsumBankBytes / 4;
  OpBuilder* b = nullptr;
  Location loc = kernel.getLoc();
  llvm::DenseMap<Value, Layout> layouts;
  llvm::DenseMap<Value, Value> hbmOf;      // kernel input (or view of one) -> HBM memref
  llvm::DenseMap<Value, aten::StridedView> viewOf;  // its elements within that memref
  llvm::DenseMap<Value, Value> tiles;      // value -> tile for the current iteration
  // Loads of values broadcast along rows, by the HBM offsets of their rows
  // and their columns: a row tile that reads the same rows again reuses the
  // tile. Row-invariant values (a weight row) up to kInvariantLoadBytes per
  // partition; values broadcast along some row dims (a rotary table over the
  // heads) up to kRepeatedLoadBytes. Past those, a load is repeated per row
  // tile: a row-invariant operand of a long row (a bias over a 60000-word
  // vocabulary, 234 KiB of f32 per partition) kept whole would not fit SBUF.
  std::map<std::tuple<void*, std::vector<int64_t>, int64_t, int64_t>, Value> repeatedLoads;
  int64_t repeatedLoadBytes = 0;
  int64_t invariantLoadBytes = 0;
  static constexpr int64_t kRepeatedLoadBytes = 16 * 1024;
  static constexpr int64_t kInvariantLoadBytes = 64 * 1024;
  // Loads that every column tile of the current row tile shares (tileOf).
  llvm::DenseMap<Value, Value> rowTileLoads;
  int64_t rowTileLoadsRow = -1;
  int64_t inputColumns = 0;  // > 0: the width of input tiles (an attention's key block)
  int64_t tileRows = 0;      // > 0: the rows of input tiles (an attention's query block)
  // > 0 while an attention's diagonal packs are lowered (lowerDiagonalPacks):
  // each head's query rows (rowOffsets: tile row i is row r0 + (i / rows)
  // * stride + i % rows of the space) and keys (an input varying along the
  // keys is loaded for one head's keys and repeated for each head).
  int64_t diagonalRows = 0, diagonalRowStride = 0, diagonalKeys = 0;
  // The stationary slices of the current row tile, reused by each of its
  // column tiles while they stay small next to a partition.
  OperandCache stationaryCache;
  int64_t stationaryRow = -1;
  // A row tile lowered alternately with another (the first two row tiles
  // of a column block, LowerToIsa.cpp): its per-row values and caches,
  // swapped in while one of its output tiles is lowered.
  struct RowTileState {
    int64_t row = 0, p = 0;
    llvm::DenseMap<Value, Value> perRowTiles, rowTileLoads;
    int64_t rowTileLoadsRow = -1, stationaryRow = -1;
    OperandCache stationaryCache;
  };
  void swapRowTileState(RowTileState& s) {
    std::swap(rowTileLoads, s.rowTileLoads);
    std::swap(rowTileLoadsRow, s.rowTileLoadsRow);
    std::swap(stationaryCache, s.stationaryCache);
    std::swap(stationaryRow, s.stationaryRow);
  }
  // The moving slices of the current block of column tiles, reused by every
  // row tile (of the same batch, for a bmm): a kernel of matmuls without
  // reductions runs its column tiles in blocks, all row tiles of one block
  // before the next, and keeps that block's moving slices (at most
  // movingBudget bytes per partition).
  OperandCache movingCache;
  bool reuseMoving = false;
  // Whether a streamed operand's slices may be prepared far ahead
  // (kStreamedAheadBytes, LowerMatmul.cpp), and whether the body being
  // lowered did: if it then overflows SBUF, it is lowered again without.
  bool streamAhead = true, streamedAhead = false;
  int64_t blockColumnTiles = 1;  // column tiles that share a row tile's stationary slices
  llvm::DenseSet<Value> yielded;
  // A matmul's prologue (FormKernels' formPrologues): the ops that compute
  // its left operand, lowered once per row tile in their own space (rows
  // [M], columns [K], whole rows) before the row tile's column tiles.
  llvm::DenseSet<Operation*> prologueOps;
  Value prologueOperand;
  Space prologueSpace;
  // The prologue's layouts and kept loads (a value both read may have a
  // layout in each space), swapped in while it is lowered.
  llvm::DenseMap<Value, Layout> prologueLayouts;
  std::map<std::tuple<void*, std::vector<int64_t>, int64_t, int64_t>, Value> prologueRepeatedLoads;
  void swapPrologueState() {
    std::swap(space, prologueSpace);
    std::swap(layouts, prologueLayouts);
    std::swap(repeatedLoads, prologueRepeatedLoads);
  }
  // Window operands (WindowOperand.h): the cat and its reshape, which no
  // walk of the body lowers, and by the bmm's right operand, its windows in
  // K order.
  llvm::DenseSet<Operation*> windowOps;
  llvm::DenseMap<Value, SmallVector<Value>> windowPieces;
  bool catReadsComputedRows = false;  // a cat copies columns of a computed value's rows
  bool wholeRows = false;  // lowering the prologue: one column tile per row
  int64_t r0 = 0, c0 = 0, iteration = 0;
  // Interleaved row tiles (Space::interleave): the step between a row
  // tile's rows, its group's first row and its index in the group; the
  // group tiles by input value or output HBM memref.
  int64_t rowStep = 1, groupStart = 0, groupRow = 0;
  // How many times each row tile is stored (an expand's copies): emitDma
  // sizes its pieces by all the bytes the stores move.
  int64_t timesStored = 1;
  // How many times the current space is lowered over (a permute copy's
  // loop dims, a tile each): emitDma counts the value's tiles by them.
  int64_t spaceRepeats = 1;
  llvm::DenseSet<Value> groupedInputs;
  llvm::DenseMap<Value, Value> groupTiles;
  llvm::DenseSet<Operation*> rowTileAllocs;  // the tiles allocated by the current row tile
  int64_t numInst = 0, numDma = 0;
  // The DMA queue time of the loads emitted so far (each transfer's fixed
  // cost, and its bytes or its runs, whichever take longer), all queues
  // together.
  double loadQueueNs = 0;
  int64_t largestMatmulK = 0;  // of the kernel's matmuls lowered so far
};

}  // namespace neuroncc::lowering
