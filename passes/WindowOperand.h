//===- WindowOperand.h - a matmul operand stacked from windows of one tensor -===//
//
// A convolution's im2col (compiler/ComposedOps.cpp) is the right operand of a
// bmm whose contraction rows are stacked from windows of one tensor:
//
//   cols = reshape(cat([w_0, w_1, ...], d), [N, K, Q])    w_t views of x
//   out  = bmm(weight, cols)
//
// with the cat dim d and the dims after it (but the last) merged into K by
// the reshape, so that each window is a contiguous range of K rows (tap t's
// channels). Each window is a strided view of x with one stride along its K
// rows, so the matmul can load its rows straight from x instead of reading a
// stacked copy: ncc-form-kernels puts the cat into the bmm's kernel, and the
// lowering loads each window as a K segment of its own, or several windows of
// few rows stacked in one K slice (LowerMatmul.cpp). The columns that copy
// would have written ([8, 64, 56, 56] bf16 through a 3 x 3 kernel: 30 MB)
// never go through HBM.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dialects/aten/AtenDialect.h"
#include "dialects/aten/Views.h"

namespace neuroncc {

// The bmm whose right operand `cat` stacks, as above, or null. Checks the
// shape of the pattern only: each window a view chain of one common root.
inline mlir::Operation* windowedMatmul(aten::CatOp cat) {
  auto rt = llvm::cast<mlir::RankedTensorType>(cat.getType());
  int64_t rank = rt.getRank(), dim = cat.getDim();
  if (dim < 0) dim += rank;
  // [N, stacked..., Q]: a batch dim before the cat's, K dims, the columns.
  if (rank < 4 || dim != 1 || !cat->hasOneUse() || cat.getTensors().size() < 2) return nullptr;
  mlir::Operation* reshape = *cat->getUsers().begin();
  if (!llvm::isa<aten::ReshapeOp, aten::ViewShapeOp, aten::UnsafeViewOp>(reshape) || !reshape->hasOneUse())
    return nullptr;
  auto bt = llvm::cast<mlir::RankedTensorType>(reshape->getResult(0).getType());
  int64_t k = 1;
  for (int64_t d = 1; d < rank - 1; ++d) k *= rt.getDimSize(d);
  if (bt.getRank() != 3 || bt.getDimSize(0) != rt.getDimSize(0) || bt.getDimSize(1) != k ||
      bt.getDimSize(2) != rt.getDimSize(rank - 1))
    return nullptr;
  mlir::OpOperand& use = *reshape->getResult(0).getUses().begin();
  if (!llvm::isa<aten::BmmOp>(use.getOwner()) || use.getOperandNumber() != 1) return nullptr;
  mlir::Value root;
  for (mlir::Value piece : cat.getTensors()) {
    mlir::Value r = aten::viewChainRoot(piece);
    if (r == piece || (root && r != root)) return nullptr;
    root = r;
  }
  return use.getOwner();
}

// One window's K segment, from its view (of the cat's rank): the stride
// along its K rows, or nullopt where its K dims do not step as one.
inline std::optional<int64_t> windowRowStride(const aten::StridedView& v) {
  // (Its K dims, between the batch dim and the columns, merged into one
  // by PyTorch's view rule.)
  llvm::ArrayRef<int64_t> shape(v.shape), strides(v.strides);
  shape = shape.slice(1, shape.size() - 2);
  strides = strides.slice(1, strides.size() - 2);
  int64_t rows = 1;
  for (int64_t d : shape) rows *= d;
  std::optional<llvm::SmallVector<int64_t>> merged = aten::reshapeStrides(shape, strides, {rows});
  if (!merged) return std::nullopt;
  return merged->front();
}

}  // namespace neuroncc
