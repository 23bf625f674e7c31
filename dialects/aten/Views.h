// Views as affine re-indexings: a view's element at index i is the input's
// element at offset + sum(i[d] * strides[d]). Shared by the aten ops' shape
// inference and by the passes that fold chains of views into DMA access
// patterns.
#pragma once

#include <optional>
#include <string>

#include "mlir/IR/Operation.h"

namespace neuroncc::aten {

struct StridedView {
  llvm::SmallVector<int64_t> shape;
  llvm::SmallVector<int64_t> strides;  // in elements; 0 for broadcast dims
  int64_t offset = 0;
};

StridedView contiguousView(llvm::ArrayRef<int64_t> shape);
bool isContiguous(const StridedView& view);
bool isViewOp(mlir::Operation* op);

// The value `v` is a chain of view ops of (v itself if it is no view),
// appending the chain's ops to `chain`, when given, in the order they apply.
mlir::Value viewChainRoot(mlir::Value v, llvm::SmallVectorImpl<mlir::Operation*>* chain = nullptr);
// The strided view `v` is of its chain's root (contiguous): nullopt where a
// view of the chain does not fold into one (a reshape of a permutation).
std::optional<StridedView> viewOfChain(mlir::Value v);
// The same for the view ops `chain` applied in order to a contiguous tensor
// of `rootShape`.
std::optional<StridedView> viewThrough(llvm::ArrayRef<mlir::Operation*> chain, llvm::ArrayRef<int64_t> rootShape);

// A reshape (or clone) that keeps the innermost dim: flattening the leading
// dims gives the same rows, so on the device it is the same tile.
bool isRowPreservingReshape(mlir::Operation* op);

// The fewest trailing dims of `shape` that flatten into `cols` over `rows`
// leading elements, or 0 if none do ([1, s, h, d] over rows s and cols
// h * d: 2). Two shapes with such a split hold the same [rows x cols] tile.
int64_t trailingDimsOf(llvm::ArrayRef<int64_t> shape, int64_t rows, int64_t cols);

// Applies the view op `op` (one of the ops isViewOp accepts) to `in`.
// Returns false with `*error` set for invalid arguments, and false with
// `*notAView` set when the result is well defined but not expressible as a
// view of `in` (a reshape of a non-contiguous view: it needs a copy).
bool applyView(mlir::Operation* op, const StridedView& in, StridedView& out, std::string* error,
               bool* notAView = nullptr);

// Strides that show the elements of (shape, strides) in `newShape` without
// moving them, or std::nullopt when no such view exists (PyTorch's rule for
// view(): dims merge only where they are contiguous among themselves).
std::optional<llvm::SmallVector<int64_t>> reshapeStrides(llvm::ArrayRef<int64_t> shape,
                                                         llvm::ArrayRef<int64_t> strides,
                                                         llvm::ArrayRef<int64_t> newShape);

// The buffer of the chain's final value (contiguous) seen in the shape of
// the chain's root: the access pattern through which a value computed as the
// root is stored straight into its view. Only chains of one-to-one views
// (reshapes, permutations, squeezes and unsqueezes of size-1 dims, expands
// that repeat nothing) have one; slices, selects, broadcasts and reshapes
// after a permutation return false.
//
// With `keepBatchDims`, the chain's first op may be a reshape that only
// regroups leading dims (regroupsLeadingDims) whose strides do not merge:
// `out` then keeps the leading dims of the view, standing for the root's
// leading dims flattened row-major (a batched matmul's result split into
// [batch, heads] and merged into the tokens: LowerAttention.cpp).
bool invertViewChain(llvm::ArrayRef<mlir::Operation*> chain, StridedView& out, bool keepBatchDims = false);

// Whether `to` is `from` with its leading dims regrouped: the same last
// two dims, the same product of the others ([b, h, s, d] and [b * h, s, d]).
// A view of `from`'s shape then reads `to` where only the flattened index
// of the leading dims matters (the batch of a batched matmul).
bool regroupsLeadingDims(llvm::ArrayRef<int64_t> from, llvm::ArrayRef<int64_t> to);

// applyView for the views that lead to a batched matmul's operand, which
// may keep leading dims apart: where a reshape only regroups leading dims
// whose strides do not merge (the [b, h] of heads split out of rows, the
// [kv heads, repeats] of grouped-query attention's repeated keys), `out`
// keeps `in`'s leading dims, which then stand for the op's leading dims
// flattened row-major. Such a view (more dims than the tensor) only takes
// ops on its last two dims (a transpose of them, an expand that repeats
// nothing) and further regroupings.
bool applyBatchedView(mlir::Operation* op, const StridedView& in, StridedView& out, std::string* error);

// One function per kind of view, on attribute values (shape inference calls
// these through the op adaptors).
bool viewTranspose(int64_t dim0, int64_t dim1, const StridedView& in, StridedView& out, std::string* error);
bool viewT(const StridedView& in, StridedView& out, std::string* error);
bool viewPermute(llvm::ArrayRef<int64_t> dims, const StridedView& in, StridedView& out, std::string* error);
bool viewUnsqueeze(int64_t dim, const StridedView& in, StridedView& out, std::string* error);
bool viewSqueeze(int64_t dim, const StridedView& in, StridedView& out, std::string* error);
bool viewExpand(llvm::ArrayRef<int64_t> size, const StridedView& in, StridedView& out, std::string* error);
bool viewSlice(int64_t dim, int64_t start, int64_t end, int64_t step, const StridedView& in, StridedView& out,
               std::string* error);
bool viewSelect(int64_t dim, int64_t index, const StridedView& in, StridedView& out, std::string* error);
bool viewReshape(llvm::ArrayRef<int64_t> size, const StridedView& in, StridedView& out, std::string* error,
                 bool* notAView = nullptr);

}  // namespace neuroncc::aten
