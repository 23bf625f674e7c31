//===- ReductionCost.h - prices of reducing middle dims ---------------------===//
//
// A sum, mean or amax over the middle dim R of [A, R, C] can run as rows of
// A reduced in SBUF (LowerReductions.cpp) or, for a float sum, as a matmul
// of a row of ones with each [R, C] block (FormKernels'
// sumLeadingDimsByMatmul). Both are priced here with trn1's device model
// (runtime/neff/device_model.cc), so that the two passes agree.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "llvm/ADT/ArrayRef.h"

namespace mlir {
class Operation;
}

namespace neuroncc {

// How a tile's rows of [g, r, c] elements reduce over r: a tensor_reduce
// per (row, column) over a stepped view, an add per (step, column) across
// the g rows, or an add per (row, step) over the c columns.
enum class MiddleReductionMethod { PerColumn, AcrossRows, PerBlock };

// The cheapest method for tiles of g rows of [rChunk, chunk] elements per
// partition, over R in steps of rChunk, and its engine time per tile (ns).
// tensor_reduce runs on the vector engine only; the adds of the other two
// run on the GpSimd engine too, and where the kernel has two independent
// chains of them or more (`sharedEngines`: row tiles, column tiles, steps
// with their two accumulators) both engines share them.
std::pair<MiddleReductionMethod, double> cheapestMiddleReduction(int64_t g, int64_t R, int64_t rChunk, int64_t chunk,
                                                                 bool bf16Input, bool sharedEngines);

// The tile of [rChunk, chunk] elements a row of R x C takes within maxFree
// elements (whole C blocks where they fit, as many steps of R as fit).
std::pair<int64_t, int64_t> middleReductionTile(int64_t R, int64_t C, int64_t maxFree);

// Rough engine time (ns) of [A, R, C] reduced over R in SBUF rows (the
// reduction's instructions) and as a matmul per row of A (each row's
// TensorEngine passes or their PSUM evacuation, whichever is longer, and the
// fixed cost of its load and store spread over the DMA queues).
double sbufRowsReductionNs(int64_t A, int64_t R, int64_t C, bool bf16Input, int64_t maxFree);
double matmulRowsSumNs(int64_t A, int64_t R, int64_t C, bool f32Input);

// A kernel computed around a reduction over the middle dims [first, last]
// of `shape` ([A, R, C] reduced over R) in the input's own layout
// (LowerMiddleFrame.cpp): each partition holds one row of R blocks of
// `columns` elements, the dims after `dim` and `width` consecutive indices
// of `dim` (a divisor of its size); the rest of C joins A in the `rows`.
// Where a row of all R blocks does not fit, the kernel runs in chunks of
// the reduced elements, `chunk` indices of the first reduced dim at a time
// (the whole dim otherwise).
struct MiddleFrameSplit {
  int64_t dim = 0, width = 1, columns = 1, rows = 1, chunk = 1;
  bool chunked(llvm::ArrayRef<int64_t> shape, int64_t first) const { return chunk < shape[size_t(first)]; }
};
// Blocks at least this long (or all of C): runs of 256 bytes or more (bf16)
// keep a DMA queue's descriptors under twice its bytes' time (20 ns a run,
// 25.6 bytes a ns on trn1), where rows of R x 56 elements ([8, 96, 56, 56]
// normalized over its 96 channels) took 148.3 us, the permuted frame 123.6.
inline constexpr int64_t kMinMiddleFrameColumns = 128;
// Rows at least this many: with fewer, most partitions would idle while
// each busy one ran long instructions ([3, 16, 8, 24] normalized over its
// 16 channels: 3 rows of 16 x 192, where the permuted frame has 576 rows).
inline constexpr int64_t kMinMiddleFrameRows = 64;
// The split whose rows fill the partitions best for the engines' time
// (whole row tiles of long blocks), among those of kMinMiddleFrameRows rows
// or more whose row of R x columns elements at `bytesPerElement` fits
// `budget` bytes a partition and whose columns are at most `maxColumns`;
// where none fits and `allowChunks`, the same among chunked rows (the
// largest chunk up to `maxChunk` that fits, the chunks balanced); nullopt
// if none does.
std::optional<MiddleFrameSplit> chooseMiddleFrameSplit(llvm::ArrayRef<int64_t> shape, int64_t first, int64_t last,
                                                       int64_t bytesPerElement, int64_t budget, bool allowChunks,
                                                       int64_t maxColumns = INT64_MAX, int64_t maxChunk = INT64_MAX);
// Whether `ops` (in program order) compute their reductions in one pass
// over the reduced elements: no value of `fullElements` elements depends on
// a reduction or is read by an op outside them. Only such kernels run in
// chunks: with more passes, each would read the input again and compute its
// values again (bf16 softmax over dim 1 of [256, 128, 256] took 730.2 us so,
// 225.9 in the permuted frame).
bool middleFrameReadsOnce(llvm::ArrayRef<mlir::Operation*> ops, int64_t fullElements);
// The bytes per element of such a row that `ops` (their computing ops, in
// program order) hold at once: the values of `fullElements` elements live
// together at their device dtypes' widths, plus an f32 temporary.
int64_t middleFrameBytesPerElement(llvm::ArrayRef<mlir::Operation*> ops, int64_t fullElements);

}  // namespace neuroncc
