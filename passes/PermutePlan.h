//===- PermutePlan.h - how a permuting copy is tiled ------------------------===//
//
// A copy of a permuting view whose common innermost run is short is
// rearranged in SBUF (LowerCopies.cpp, lowerPermuteCopy): each tile takes
// some output dims onto its partitions and others into its columns, loads
// them in the input's order and copies them into the output's. The choice
// of those dims is here, so that ncc-form-kernels can ask whether a view
// would be copied that way (a view read in tiny transposed blocks is copied
// out of its elementwise consumer's kernel only where it would).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

namespace neuroncc {

// A dim of a copy kernel's output (outermost first), with its strides in
// the input and in the (contiguous) output.
struct CopyDim {
  int64_t size, inStride, outStride;
};

// The output dims of a copy of a view (`shape`, strides in elements of its
// input) into a contiguous tensor, dims of 1 dropped and neighbours merged
// where they continue each other in both; nullopt where a dim broadcasts.
std::optional<llvm::SmallVector<CopyDim>> permuteCopyDims(llvm::ArrayRef<int64_t> shape,
                                                          llvm::ArrayRef<int64_t> strides);

// A permuting copy's tiles: output dims on the partitions, in the columns,
// and iterated (a tile per index).
struct PermuteSplit {
  llvm::SmallVector<CopyDim> rows, columns, loops;
};

// The split of `dims` (permuteCopyDims) that the device model prices lowest
// among those that fit `maxFree` columns, if it beats the direct copy by a
// quarter; false where none does (LowerCopies.cpp says how).
bool choosePermuteSplit(llvm::ArrayRef<CopyDim> dims, int64_t elementBytes, int64_t maxFree, PermuteSplit& split);

// Whether a view with these output dims steps across its input's
// contiguous dim in blocks narrower than a short row both ways (the
// output's innermost dim strided in the input, and the input's contiguous
// dim short): read in place, each such block is its own transposed load.
bool readsTinyTransposedBlocks(llvm::ArrayRef<CopyDim> dims, int64_t elementBytes);

}  // namespace neuroncc
