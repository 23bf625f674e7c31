#include "TypeRules.h"

#include "llvm/Support/raw_ostream.h"

namespace neuroncc::aten {

std::optional<llvm::SmallVector<int64_t>> broadcastShapes(llvm::ArrayRef<int64_t> a,
                                                          llvm::ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  llvm::SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

mlir::Type promoteElementTypes(mlir::Type a, mlir::Type b) {
  if (a == b) return a;
  // Only float types reach here (the ops' operand constraint): f32 absorbs
  // everything, and the two 16-bit formats meet at f32 because neither holds
  // the other's range and precision.
  return mlir::Float32Type::get(a.getContext());
}

mlir::Type promoteTypes(mlir::RankedTensorType a, mlir::RankedTensorType b) {
  bool a_dims = a.getRank() > 0, b_dims = b.getRank() > 0;
  // All operands are floats, so the category never differs; a 0-d tensor only
  // participates when no operand has dimensions.
  if (a_dims && !b_dims) return a.getElementType();
  if (b_dims && !a_dims) return b.getElementType();
  return promoteElementTypes(a.getElementType(), b.getElementType());
}

std::string shapeToString(llvm::ArrayRef<int64_t> shape) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleaveComma(shape, os);
  os << "]";
  return s;
}

}  // namespace neuroncc::aten
