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
#include <utility>

namespace neuroncc {

// How a tile's rows of [g, r, c] elements reduce over r: a tensor_reduce
// per (row, column) over a stepped view, an add per (step, column) across
// the g rows, or an add per (row, step) over the c columns.
enum class MiddleReductionMethod { PerColumn, AcrossRows, PerBlock };

// The cheapest method for tiles of g rows of [rChunk, chunk] elements per
// partition, over R in steps of rChunk, and its engine cycles per tile.
std::pair<MiddleReductionMethod, double> cheapestMiddleReduction(int64_t g, int64_t R, int64_t rChunk, int64_t chunk,
                                                                 bool bf16Input);

// The tile of [rChunk, chunk] elements a row of R x C takes within maxFree
// elements (whole C blocks where they fit, as many steps of R as fit).
std::pair<int64_t, int64_t> middleReductionTile(int64_t R, int64_t C, int64_t maxFree);

// Rough engine time (ns) of [A, R, C] reduced over R in SBUF rows (the
// reduction's instructions) and as a matmul per row of A (each row's
// TensorEngine passes or their PSUM evacuation, whichever is longer, and the
// fixed cost of its load and store spread over the DMA queues).
double sbufRowsReductionNs(int64_t A, int64_t R, int64_t C, bool bf16Input, int64_t maxFree);
double matmulRowsSumNs(int64_t A, int64_t R, int64_t C, bool f32Input);

}  // namespace neuroncc
