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

namespace {

// PyTorch's type categories: bool < integer < floating point.
int category(mlir::Type t) {
  if (t.isInteger(1)) return 0;
  if (llvm::isa<mlir::IntegerType>(t)) return 1;
  return 2;
}

}  // namespace

mlir::Type promoteElementTypes(mlir::Type a, mlir::Type b) {
  if (a == b) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 1)  // the wider integer
    return a.getIntOrFloatBitWidth() >= b.getIntOrFloatBitWidth() ? a : b;
  // Floats: the wider wins; the two 16-bit formats meet at f32 because
  // neither holds the other's range and precision.
  unsigned wa = a.getIntOrFloatBitWidth(), wb = b.getIntOrFloatBitWidth();
  if (wa != wb) return wa > wb ? a : b;
  return mlir::Float32Type::get(a.getContext());
}

mlir::Type promoteTypes(mlir::RankedTensorType a, mlir::RankedTensorType b) {
  mlir::Type ea = a.getElementType(), eb = b.getElementType();
  bool a_dims = a.getRank() > 0, b_dims = b.getRank() > 0;
  if (a_dims == b_dims) return promoteElementTypes(ea, eb);
  // A 0-d tensor only decides the dtype when its category is higher than the
  // dimensioned operand's (a 0-d f32 does not widen a bf16 tensor, but a 0-d
  // float does make an integer tensor's result float).
  mlir::Type dims = a_dims ? ea : eb, zero = a_dims ? eb : ea;
  return category(zero) > category(dims) ? zero : dims;
}

mlir::Type promoteWithScalar(mlir::Type tensorElem, bool scalarIsFloat) {
  if (scalarIsFloat && category(tensorElem) < 2) return mlir::Float32Type::get(tensorElem.getContext());
  return tensorElem;
}

bool isFloatType(mlir::Type t) { return category(t) == 2; }

std::string shapeToString(llvm::ArrayRef<int64_t> shape) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleaveComma(shape, os);
  os << "]";
  return s;
}

}  // namespace neuroncc::aten
