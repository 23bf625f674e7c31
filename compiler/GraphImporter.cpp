//===- GraphImporter.cpp - ATen graph protobuf to the aten dialect --------===//
//
// A registry maps each supported ATen overload to a builder that reads the
// node's arguments (positional or keyword, with the schema's defaults) and
// creates the op with the node's recorded result type, so the op verifiers
// check the exporter's shapes and dtypes against our own inference.
//
//===----------------------------------------------------------------------===//

#include "compiler/GraphImporter.h"

#include "compiler/NodeImporter.h"
#include "neff_format.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <tuple>
#include "google/protobuf/text_format.h"
#include "llvm/ADT/StringSet.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace neuroncc {
using namespace importer;
namespace {

LogicalResult binaryArith(NodeImporter& n, StringRef kind) {
  NCC_TRY(self, n.tensor(0, "self"));
  FailureOr<double> alpha = n.number(2, "alpha", 1.0);
  if (failed(alpha)) return failure();
  auto alphaAttr = n.b.getF64FloatAttr(*alpha);
  if (n.isTensor(1, "other")) {
    NCC_TRY(other, n.tensor(1, "other"));
    if (kind == "add") return n.create<aten::AddTensorOp>(self, other, alphaAttr);
    if (kind == "sub") return n.create<aten::SubTensorOp>(self, other, alphaAttr);
    if (kind == "mul") return n.create<aten::MulTensorOp>(self, other);
    return n.create<aten::DivTensorOp>(self, other);
  }
  NCC_TRY(other, n.number(1, "other"));
  auto o = n.b.getF64FloatAttr(asTensorScalar(other, self));
  if (kind == "add") return n.createOnFloat<aten::AddScalarOp>(self, o, alphaAttr);
  if (kind == "sub") return n.createOnFloat<aten::SubScalarOp>(self, o, alphaAttr);
  if (kind == "mul") return n.createOnFloat<aten::MulScalarOp>(self, o);
  return n.createOnFloat<aten::DivScalarOp>(self, o);
}

template <typename TensorOp, typename ScalarOp>
LogicalResult compare(NodeImporter& n) {
  NCC_TRY(self, n.tensor(0, "self"));
  if (n.isTensor(1, "other")) {
    NCC_TRY(other, n.tensor(1, "other"));
    return n.create<TensorOp>(self, other);
  }
  NCC_TRY(other, scalarWith(n, 1, "other", self));
  return n.create<ScalarOp>(self, n.b.getF64FloatAttr(other));
}

// A matmul of integer tensors (eager computes it in the integer type) runs
// on f32 copies of its operands and is cast back: exact while the products
// and their sums stay below 2^24, as every integer on the device.
template <typename OpTy, size_t N, typename... Attrs>
LogicalResult matmulOp(NodeImporter& n, std::array<Value, N> operands, Attrs... attrs) {
  FailureOr<RankedTensorType> type = n.resultType();
  if (failed(type)) return failure();
  auto build = [&](Type resultType) {
    return std::apply([&](auto... v) { return n.b.create<OpTy>(n.loc, resultType, v..., attrs...); }, operands);
  };
  if (aten::isFloatType(type->getElementType())) return n.define(build(*type));
  for (Value& v : operands) {
    auto t = llvm::cast<RankedTensorType>(v.getType());
    if (!aten::isFloatType(t.getElementType())) v = n.b.create<aten::ToCopyOp>(n.loc, t.clone(n.b.getF32Type()), v);
  }
  Operation* op = build(type->clone(n.b.getF32Type()));
  return n.define(n.b.create<aten::ToCopyOp>(n.loc, *type, op->getResult(0)));
}

// Logical ops on masks: and, or, xor and not of bool tensors (bitwise_* on
// bools, as `m1 | m2`, `~m` write them; logical_* on any dtype, whose
// operands count as true where nonzero), composed of where and the
// comparisons: a and b = where(a, b, false), a or b = where(a, true, b),
// a xor b = a != b, not a = a == 0. Bitwise ops on integers are composed
// from arithmetic (ComposedBitwise.cpp).
LogicalResult logicalOp(NodeImporter& n, StringRef kind, bool bitwise) {
  FailureOr<RankedTensorType> type = n.resultType();
  if (failed(type)) return failure();
  if (bitwise && llvm::isa<IntegerType>(type->getElementType()) && !type->getElementType().isInteger(1))
    return integerBitwise(n, kind);
  Type i1 = n.b.getI1Type();
  auto name = [](Type t) {
    std::string text;
    llvm::raw_string_ostream os(text);
    t.print(os);
    return text;
  };
  auto toBool = [&](Value v) -> FailureOr<Value> {
    auto t = llvm::cast<RankedTensorType>(v.getType());
    if (t.getElementType().isInteger(1)) return v;
    if (bitwise)
      return n.error("bitwise ops take integer or bool tensors; this operand is " + name(t.getElementType()));
    return n.b.create<aten::NeScalarOp>(n.loc, t.clone(i1), v, n.b.getF64FloatAttr(0.0))->getResult(0);
  };
  if (!type->getElementType().isInteger(1))
    return n.error("bitwise ops take integer or bool tensors; the result is " + name(type->getElementType()));
  NCC_TRY(a0, n.tensor(0, "self"));
  NCC_TRY(a, toBool(a0));
  if (kind == "not")
    return n.define(n.b.create<aten::EqScalarOp>(n.loc, *type, a, n.b.getF64FloatAttr(0.0)));
  NCC_TRY(b0, n.tensor(1, "other"));
  NCC_TRY(b, toBool(b0));
  if (kind == "xor") return n.define(n.b.create<aten::NeTensorOp>(n.loc, *type, a, b));
  auto scalarType = RankedTensorType::get({}, i1);
  Value fixed = n.b.create<arith::ConstantOp>(n.loc, DenseElementsAttr::get(scalarType, kind == "or"));
  return n.define(kind == "or" ? n.b.create<aten::WhereSelfOp>(n.loc, *type, a, fixed, b)
                               : n.b.create<aten::WhereSelfOp>(n.loc, *type, a, b, fixed));
}

// clamp(x, min, max) with Scalar bounds (either may be None): values below
// min become min, then values above max become max, as masked_fills (a NaN
// compares false and stays NaN, as in eager). An integer tensor is clamped
// as f32 (exact: integers live as f32 on the device) and cast back.
// clamp_min and clamp_max take one bound (at position 1): the other's
// position is 0, none.
LogicalResult clamp(NodeImporter& n, size_t minPos, size_t maxPos) {
  NCC_TRY(self, n.tensor(0, "self"));
  FailureOr<RankedTensorType> type = n.resultType();
  if (failed(type)) return failure();
  auto bound = [&](size_t pos, const char* name) -> FailureOr<std::optional<double>> {
    const Argument* a = pos ? n.arg(pos, name) : nullptr;
    if (!a || a->value_case() == Argument::kNone) return std::optional<double>();
    FailureOr<double> v = n.number(pos, name);
    if (failed(v)) return failure();
    return std::optional<double>(asTensorScalar(*v, self));  // eager converts the bound to the tensor's dtype
  };
  NCC_TRY(lo, bound(minPos, "min"));
  NCC_TRY(hi, bound(maxPos, "max"));
  Type compute = aten::isFloatType(type->getElementType()) ? type->getElementType() : n.b.getF32Type();
  auto selfType = llvm::cast<RankedTensorType>(self.getType());
  Value x = self;
  if (selfType.getElementType() != compute) x = n.b.create<aten::ToCopyOp>(n.loc, selfType.clone(compute), x);
  auto xType = llvm::cast<RankedTensorType>(x.getType());
  auto maskType = xType.clone(n.b.getI1Type());
  if (lo) {
    Value below = n.b.create<aten::LtScalarOp>(n.loc, maskType, x, n.b.getF64FloatAttr(*lo));
    x = n.b.create<aten::MaskedFillScalarOp>(n.loc, xType, x, below, n.b.getF64FloatAttr(*lo));
  }
  if (hi) {
    Value above = n.b.create<aten::GtScalarOp>(n.loc, maskType, x, n.b.getF64FloatAttr(*hi));
    x = n.b.create<aten::MaskedFillScalarOp>(n.loc, xType, x, above, n.b.getF64FloatAttr(*hi));
  }
  if (xType != *type) x = n.b.create<aten::ToCopyOp>(n.loc, *type, x);
  else if (x == self) x = n.b.create<aten::CloneOp>(n.loc, *type, x);  // clamp(x) with no bounds: a copy
  return n.define(x.getDefiningOp());
}

// An op of two tensors, `self` and `other`.
template <typename OpTy>
LogicalResult binaryTensor(NodeImporter& n) {
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(other, n.tensor(1, "other"));
  return n.create<OpTy>(self, other);
}

// split.Tensor and split_with_sizes: each piece a slice of dim `dim` of
// `self` (pieces of `sizes`, the last one possibly shorter); getitem picks them.
LogicalResult splitPieces(NodeImporter& n, Value self, int64_t dim, ArrayRef<int64_t> sizes) {
  auto t = llvm::cast<RankedTensorType>(self.getType());
  if (t.getRank() == 0) return n.error("split of a 0-d tensor");
  int64_t d = dim < 0 ? dim + t.getRank() : dim;
  if (d < 0 || d >= t.getRank()) return n.error("split dim out of range");
  SmallVector<Value> pieces;
  int64_t start = 0;
  for (auto [i, size] : llvm::enumerate(sizes)) {
    NCC_TRY(type, n.resultType(i));
    pieces.push_back(n.b.create<aten::SliceTensorOp>(n.loc, type, self, n.b.getI64IntegerAttr(d),
                                                     n.b.getI64IntegerAttr(start),
                                                     n.b.getI64IntegerAttr(start + size), n.b.getI64IntegerAttr(1)));
    start += size;
  }
  n.values[n.node.name()] = pieces;
  return success();
}

// A view keeps its operand's dtype, whatever it is.
template <typename OpTy>
LogicalResult sameTypeView(NodeImporter& n) {
  NCC_TRY(self, n.tensor(0, "self"));
  return n.create<OpTy>(self);
}

template <typename OpTy>
LogicalResult unary(NodeImporter& n) {
  NCC_TRY(self, n.tensor(0, "self"));
  return n.createOnFloat<OpTy>(self);
}

// A reduction's dtype argument (sum(x, dtype=torch.float32) of a bf16 x, a
// bool mask summed as int32): eager converts the input to that dtype and
// reduces it there, so the input is cast to the recorded result's dtype
// first (an integer dtype truncates a float input, as eager's cast does).
FailureOr<Value> inReductionDtype(NodeImporter& n, Value self, int dtypeArg) {
  const Argument* d = n.arg(dtypeArg, "dtype");
  if (!d || d->value_case() == Argument::kNone) return self;
  FailureOr<RankedTensorType> result = n.resultType();
  if (failed(result)) return failure();
  auto type = llvm::cast<RankedTensorType>(self.getType());
  if (type.getElementType() == result->getElementType()) return self;
  return n.b.create<aten::ToCopyOp>(n.loc, type.clone(result->getElementType()), self).getResult();
}

template <typename OpTy>
LogicalResult reduction(NodeImporter& n) {
  NCC_TRY(input, n.tensor(0, "self"));
  NCC_TRY(dims, n.ints(1, "dim", SmallVector<int64_t>{}));
  NCC_TRY(keepdim, n.boolean(2, "keepdim", false));
  NCC_TRY(self, inReductionDtype(n, input, 3));  // mean.dim / sum.dim_IntList
  return n.createOnFloat<OpTy>(self, n.b.getDenseI64ArrayAttr(dims), n.b.getBoolAttr(keepdim));
}

// sum.default / mean.default: over every dim (no dim list), no keepdim.
template <typename OpTy>
LogicalResult fullReduction(NodeImporter& n) {
  NCC_TRY(input, n.tensor(0, "self"));
  NCC_TRY(self, inReductionDtype(n, input, 1));
  return n.createOnFloat<OpTy>(self, n.b.getDenseI64ArrayAttr({}), n.b.getBoolAttr(false));
}

template <typename OpTy>
LogicalResult softmax(NodeImporter& n) {
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(dim, n.integer(1, "dim"));
  NCC_TRY(halfToFloat, n.boolean(2, "half_to_float", false));
  return n.createOnFloat<OpTy>(self, n.b.getI64IntegerAttr(dim), n.b.getBoolAttr(halfToFloat));
}

template <typename OpTy>
LogicalResult viewWithSize(NodeImporter& n, StringRef name) {
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(size, n.ints(1, name));
  return n.create<OpTy>(self, n.b.getDenseI64ArrayAttr(size));
}

// Tensors made from nothing (ones, zeros, full, scalar_tensor, arange) are
// compile-time constants of the node's recorded type.
LogicalResult constantFill(NodeImporter& n, std::optional<double> fill, size_t fillPos, StringRef fillName) {
  NCC_TRY(type, n.resultType());
  double value = fill ? *fill : 0.0;
  if (!fill) {
    NCC_TRY(v, n.number(fillPos, fillName));
    value = v;
  }
  Type elem = type.getElementType();
  Attribute scalar;
  if (elem.isInteger(1)) scalar = n.b.getBoolAttr(value != 0);
  else if (auto it = llvm::dyn_cast<IntegerType>(elem)) scalar = n.b.getIntegerAttr(it, int64_t(value));
  else scalar = n.b.getFloatAttr(elem, value);
  return n.define(n.b.create<arith::ConstantOp>(n.loc, DenseElementsAttr::get(type, scalar)));
}

// arange: a constant of start, start + step, ... in the recorded dtype.
LogicalResult arange(NodeImporter& n, bool hasStart, bool hasStep) {
  NCC_TRY(type, n.resultType());
  double start = 0, step = 1;
  // An integer arange's start and step are truncated first, as eager's are
  // (arange(-2.5, 5.5, dtype=int64) counts from -2).
  if (hasStart) {
    NCC_TRY(v, n.numberAsResult(0, "start"));
    start = v;
  }
  if (hasStep) {
    NCC_TRY(v, n.numberAsResult(2, "step", 1.0));  // (make_fx leaves out a step of 1)
    step = v;
  }
  if (type.getRank() != 1) return n.error("arange must produce a 1-d tensor");
  Type elem = type.getElementType();
  SmallVector<Attribute> values;
  for (int64_t i = 0; i < type.getDimSize(0); ++i) {
    double v = start + double(i) * step;
    if (auto it = llvm::dyn_cast<IntegerType>(elem)) values.push_back(n.b.getIntegerAttr(it, int64_t(v)));
    else values.push_back(n.b.getFloatAttr(elem, v));
  }
  return n.define(n.b.create<arith::ConstantOp>(n.loc, DenseElementsAttr::get(type, values)));
}

// tril_indices/triu_indices(row, col, offset): a [2, N] constant, the row
// and column indices of the kept elements of a row x col matrix in
// row-major order (kept where col - row <= offset for tril, >= for triu).
LogicalResult triangleIndices(NodeImporter& n, bool lower) {
  NCC_TRY(type, n.resultType());
  NCC_TRY(rows, n.integer(0, "row"));
  NCC_TRY(cols, n.integer(1, "col"));
  NCC_TRY(offset, n.integer(2, "offset", 0));
  if (rows < 0 || cols < 0) return n.error("row and col must be 0 or more");
  auto elem = llvm::dyn_cast<IntegerType>(type.getElementType());
  if (!elem || elem.getWidth() < 2) return n.error("must produce an integer tensor");
  // Counted row by row before anything is built, so that a graph file's
  // sizes cannot make it enumerate more than its recorded result holds.
  constexpr int64_t kMaxSide = int64_t(1) << 24;
  if (rows > kMaxSide || cols > kMaxSide || offset < -kMaxSide || offset > kMaxSide)
    return n.error("row, col and offset must be within 2^24");
  // Row r keeps the columns [first, end).
  auto kept = [&](int64_t r) -> std::pair<int64_t, int64_t> {
    return lower ? std::make_pair(int64_t(0), std::clamp<int64_t>(r + offset + 1, 0, cols))
                 : std::make_pair(std::clamp<int64_t>(r + offset, 0, cols), cols);
  };
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) count += kept(r).second - kept(r).first;
  if (type.getRank() != 2 || type.getDimSize(0) != 2 || type.getDimSize(1) != count)
    return n.error("the recorded result is not [2, " + std::to_string(count) + "]");
  // (A compile-time constant of 2^27 i64 indices would already take a GiB.)
  constexpr int64_t kMaxIndices = int64_t(1) << 26;
  if (count > kMaxIndices)
    return n.error(std::to_string(count) + " index pairs are too many for a constant (at most 2^26)");
  SmallVector<int64_t> rowIndex, colIndex;
  for (int64_t r = 0; r < rows; ++r) {
    const auto [first, end] = kept(r);
    for (int64_t c = first; c < end; ++c) {
      rowIndex.push_back(r);
      colIndex.push_back(c);
    }
  }
  SmallVector<Attribute> values;
  for (ArrayRef<int64_t> index : {ArrayRef<int64_t>(rowIndex), ArrayRef<int64_t>(colIndex)})
    for (int64_t v : index) values.push_back(n.b.getIntegerAttr(elem, v));
  return n.define(n.b.create<arith::ConstantOp>(n.loc, DenseElementsAttr::get(type, values)));
}

// tril/triu of a constant: folded here (keeps element [.., i, j] when
// j - i <= diagonal for tril, >= for triu).
LogicalResult triangle(NodeImporter& n, bool lower) {
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(diagonal, n.integer(1, "diagonal", 0));
  auto cst = self.getDefiningOp<arith::ConstantOp>();
  auto dense = cst ? llvm::dyn_cast<DenseElementsAttr>(cst.getValue()) : DenseElementsAttr();
  auto selfType = llvm::cast<RankedTensorType>(self.getType());
  if (selfType.getRank() < 2) return n.error("tril/triu needs a tensor of rank 2 or more");
  if (!dense) {
    // A computed tensor: where(mask, self, 0) with the [rows x cols] mask a
    // compile-time constant that broadcasts over the leading dims.
    int64_t rank = selfType.getRank();
    int64_t rows = selfType.getDimSize(rank - 2), cols = selfType.getDimSize(rank - 1);
    SmallVector<bool> keep;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) keep.push_back(lower ? c - r <= diagonal : c - r >= diagonal);
    auto maskType = RankedTensorType::get({rows, cols}, n.b.getI1Type());
    Value mask = n.b.create<arith::ConstantOp>(n.loc, DenseElementsAttr::get(maskType, ArrayRef<bool>(keep)));
    Type elem = selfType.getElementType();
    auto zeroType = RankedTensorType::get({}, elem);
    Attribute zero = llvm::isa<FloatType>(elem) ? Attribute(n.b.getFloatAttr(elem, 0.0))
                     : elem.isInteger(1)        ? Attribute(n.b.getBoolAttr(false))
                                                : Attribute(n.b.getIntegerAttr(elem, 0));
    Value zeroValue = n.b.create<arith::ConstantOp>(n.loc, DenseElementsAttr::get(zeroType, zero));
    return n.create<aten::WhereSelfOp>(mask, self, zeroValue);
  }
  auto type = llvm::cast<RankedTensorType>(dense.getType());
  int64_t rows = type.getDimSize(type.getRank() - 2), cols = type.getDimSize(type.getRank() - 1);
  SmallVector<Attribute> values(dense.getValues<Attribute>());
  Attribute zero = llvm::isa<FloatType>(type.getElementType())
                       ? Attribute(n.b.getFloatAttr(type.getElementType(), 0.0))
                       : type.getElementType().isInteger(1) ? Attribute(n.b.getBoolAttr(false))
                                                            : Attribute(n.b.getIntegerAttr(type.getElementType(), 0));
  for (size_t i = 0; i < values.size(); ++i) {
    int64_t r = int64_t(i) / cols % rows, c = int64_t(i) % cols;
    bool keep = lower ? c - r <= diagonal : c - r >= diagonal;
    if (!keep) values[i] = zero;
  }
  return n.define(n.b.create<arith::ConstantOp>(n.loc, DenseElementsAttr::get(type, values)));
}

const std::map<std::string, Builder>& registry() {
  static const std::map<std::string, Builder> table = [] {
    std::map<std::string, Builder> t = {
      {"aten::add.Tensor", [](NodeImporter& n) { return binaryArith(n, "add"); }},
      {"aten::add.Scalar", [](NodeImporter& n) { return binaryArith(n, "add"); }},
      {"aten::sub.Tensor", [](NodeImporter& n) { return binaryArith(n, "sub"); }},
      {"aten::sub.Scalar", [](NodeImporter& n) { return binaryArith(n, "sub"); }},
      {"aten::mul.Tensor", [](NodeImporter& n) { return binaryArith(n, "mul"); }},
      {"aten::mul.Scalar", [](NodeImporter& n) { return binaryArith(n, "mul"); }},
      {"aten::div.Tensor", [](NodeImporter& n) { return binaryArith(n, "div"); }},
      {"aten::div.Scalar", [](NodeImporter& n) { return binaryArith(n, "div"); }},
      {"aten::rsub.Scalar",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(self, n.tensor(0, "self"));
         NCC_TRY(other, n.number(1, "other"));
         NCC_TRY(alpha, n.number(2, "alpha", 1.0));
         return n.createOnFloat<aten::RsubScalarOp>(self, n.b.getF64FloatAttr(asTensorScalar(other, self)),
                                                    n.b.getF64FloatAttr(alpha));
       }},
      {"aten::pow.Tensor_Scalar",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(self, n.tensor(0, "self"));
         NCC_TRY(exponent, n.number(1, "exponent"));
         return n.createOnFloat<aten::PowTensorScalarOp>(self, n.b.getF64FloatAttr(exponent));
       }},
      {"aten::eq.Tensor", compare<aten::EqTensorOp, aten::EqScalarOp>},
      {"aten::eq.Scalar", compare<aten::EqTensorOp, aten::EqScalarOp>},
      {"aten::ne.Tensor", compare<aten::NeTensorOp, aten::NeScalarOp>},
      {"aten::ne.Scalar", compare<aten::NeTensorOp, aten::NeScalarOp>},
      {"aten::lt.Tensor", compare<aten::LtTensorOp, aten::LtScalarOp>},
      {"aten::lt.Scalar", compare<aten::LtTensorOp, aten::LtScalarOp>},
      {"aten::le.Tensor", compare<aten::LeTensorOp, aten::LeScalarOp>},
      {"aten::le.Scalar", compare<aten::LeTensorOp, aten::LeScalarOp>},
      {"aten::gt.Tensor", compare<aten::GtTensorOp, aten::GtScalarOp>},
      {"aten::gt.Scalar", compare<aten::GtTensorOp, aten::GtScalarOp>},
      {"aten::ge.Tensor", compare<aten::GeTensorOp, aten::GeScalarOp>},
      {"aten::ge.Scalar", compare<aten::GeTensorOp, aten::GeScalarOp>},
      {"aten::maximum", binaryTensor<aten::MaximumOp>},
      {"aten::minimum", binaryTensor<aten::MinimumOp>},
      {"aten::clamp", [](NodeImporter& n) { return clamp(n, 1, 2); }},
      {"aten::clamp_min", [](NodeImporter& n) { return clamp(n, 1, 0); }},
      {"aten::clamp_max", [](NodeImporter& n) { return clamp(n, 0, 1); }},
      {"aten::max.other", binaryTensor<aten::MaximumOp>},
      {"aten::min.other", binaryTensor<aten::MinimumOp>},
      {"aten::split_with_sizes",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(self, n.tensor(0, "self"));
         NCC_TRY(sizes, n.ints(1, "split_sizes"));
         NCC_TRY(dim, n.integer(2, "dim", 0));
         auto t = llvm::cast<RankedTensorType>(self.getType());
         int64_t total = 0;
         for (int64_t size : sizes) {
           if (size < 0) return n.error("split_with_sizes: a negative size");
           total += size;
         }
         int64_t d = dim < 0 ? dim + t.getRank() : dim;
         if (t.getRank() > 0 && d >= 0 && d < t.getRank() && total != t.getDimSize(d))
           return n.error("split_with_sizes: the sizes add up to " + std::to_string(total) + ", the dim has " +
                          std::to_string(t.getDimSize(d)));
         return splitPieces(n, self, dim, sizes);
       }},
      {"aten::bitwise_and.Tensor", [](NodeImporter& n) { return logicalOp(n, "and", true); }},
      {"aten::bitwise_or.Tensor", [](NodeImporter& n) { return logicalOp(n, "or", true); }},
      {"aten::bitwise_xor.Tensor", [](NodeImporter& n) { return logicalOp(n, "xor", true); }},
      {"aten::bitwise_not", [](NodeImporter& n) { return logicalOp(n, "not", true); }},
      {"aten::logical_and", [](NodeImporter& n) { return logicalOp(n, "and", false); }},
      {"aten::logical_or", [](NodeImporter& n) { return logicalOp(n, "or", false); }},
      {"aten::logical_xor", [](NodeImporter& n) { return logicalOp(n, "xor", false); }},
      {"aten::logical_not", [](NodeImporter& n) { return logicalOp(n, "not", false); }},
      {"aten::where.self",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(cond, n.tensor(0, "condition"));
         NCC_TRY(self, n.tensor(1, "self"));
         NCC_TRY(other, n.tensor(2, "other"));
         return n.create<aten::WhereSelfOp>(cond, self, other);
       }},
      {"aten::masked_fill.Scalar",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(self, n.tensor(0, "self"));
         NCC_TRY(mask, n.tensor(1, "mask"));
         NCC_TRY(value, n.numberAsResult(2, "value"));
         // A mask of more dims or longer ones than self broadcasts self to
         // the result's shape, as eager does (masked_fill(x[5], m[5, 5])).
         auto selfType = llvm::cast<RankedTensorType>(self.getType());
         auto shape = aten::broadcastShapes(selfType.getShape(), llvm::cast<RankedTensorType>(mask.getType()).getShape());
         if (shape && ArrayRef<int64_t>(*shape) != selfType.getShape())
           self = n.b.create<aten::ExpandOp>(n.loc, selfType.clone(*shape), self, n.b.getDenseI64ArrayAttr(*shape));
         return n.create<aten::MaskedFillScalarOp>(self, mask, n.b.getF64FloatAttr(value));
       }},
      {"aten::neg", unary<aten::NegOp>},
      {"aten::exp", unary<aten::ExpOp>},
      {"aten::log", unary<aten::LogOp>},
      {"aten::rsqrt", unary<aten::RsqrtOp>},
      {"aten::sqrt", unary<aten::SqrtOp>},
      {"aten::tanh", unary<aten::TanhOp>},
      {"aten::sigmoid", unary<aten::SigmoidOp>},
      {"aten::relu", unary<aten::ReluOp>},
      {"aten::silu", unary<aten::SiluOp>},
      {"aten::abs", unary<aten::AbsOp>},
      {"aten::sin", unary<aten::SinOp>},
      {"aten::cos", unary<aten::CosOp>},
      {"aten::atan", unary<aten::AtanOp>},
      {"aten::erf", unary<aten::ErfOp>},
      {"aten::expm1", unary<aten::Expm1Op>},
      {"aten::log1p", unary<aten::Log1pOp>},
      {"aten::floor", unary<aten::FloorOp>},
      {"aten::ceil", unary<aten::CeilOp>},
      {"aten::trunc", unary<aten::TruncOp>},
      {"aten::round", unary<aten::RoundOp>},
      {"aten::gelu",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(self, n.tensor(0, "self"));
         NCC_TRY(approximate, n.string(1, "approximate", "none"));
         return n.createOnFloat<aten::GeluOp>(self, n.b.getStringAttr(approximate));
       }},
      {"aten::mean.dim", reduction<aten::MeanDimOp>},
      {"aten::mean", fullReduction<aten::MeanDimOp>},
      {"aten::sum", fullReduction<aten::SumDimIntListOp>},
      {"aten::sum.dim_IntList", reduction<aten::SumDimIntListOp>},
      {"aten::amax", reduction<aten::AmaxOp>},
      {"aten::_softmax", softmax<aten::SoftmaxOp>},
      {"aten::_log_softmax", softmax<aten::LogSoftmaxOp>},
      {"aten::native_layer_norm",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(input, n.tensor(0, "input"));
         NCC_TRY(shape, n.ints(1, "normalized_shape"));
         Value weight, bias;
         if (n.isTensor(2, "weight")) {
           NCC_TRY(w, n.tensor(2, "weight"));
           weight = w;
         }
         if (n.isTensor(3, "bias")) {
           NCC_TRY(b, n.tensor(3, "bias"));
           bias = b;
         }
         NCC_TRY(eps, n.number(4, "eps"));
         NCC_TRY(types, n.resultTypes(3));
         return n.define(n.b.create<aten::NativeLayerNormOp>(n.loc, types, input, weight, bias,
                                                             n.b.getDenseI64ArrayAttr(shape),
                                                             n.b.getF64FloatAttr(eps)));
       }},
      {"aten::var_mean.correction",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(self, n.tensor(0, "self"));
         NCC_TRY(dims, n.ints(1, "dim", SmallVector<int64_t>{}));
         NCC_TRY(correction, n.integer(2, "correction", 1));
         NCC_TRY(keepdim, n.boolean(3, "keepdim", false));
         NCC_TRY(types, n.resultTypes(2));
         return n.define(n.b.create<aten::VarMeanCorrectionOp>(n.loc, types, self, n.b.getDenseI64ArrayAttr(dims),
                                                               n.b.getI64IntegerAttr(correction),
                                                               n.b.getBoolAttr(keepdim)));
       }},
      {"aten::t", sameTypeView<aten::TOp>},
      {"aten::clone", sameTypeView<aten::CloneOp>},  // memory_format does not matter for values
      {"aten::transpose.int",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(self, n.tensor(0, "self"));
         NCC_TRY(d0, n.integer(1, "dim0"));
         NCC_TRY(d1, n.integer(2, "dim1"));
         return n.create<aten::TransposeIntOp>(self, n.b.getI64IntegerAttr(d0), n.b.getI64IntegerAttr(d1));
       }},
      {"aten::permute",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(self, n.tensor(0, "self"));
         NCC_TRY(dims, n.ints(1, "dims"));
         return n.create<aten::PermuteOp>(self, n.b.getDenseI64ArrayAttr(dims));
       }},
      {"aten::unsqueeze",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(self, n.tensor(0, "self"));
         NCC_TRY(dim, n.integer(1, "dim"));
         return n.create<aten::UnsqueezeOp>(self, n.b.getI64IntegerAttr(dim));
       }},
      {"aten::squeeze",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(self, n.tensor(0, "self"));
         NCC_TRY(type, n.resultType());
         auto t = llvm::cast<RankedTensorType>(self.getType());
         SmallVector<int64_t> kept;
         for (int64_t d : t.getShape())
           if (d != 1) kept.push_back(d);
         if (type.getShape() != ArrayRef<int64_t>(kept) || type.getElementType() != t.getElementType())
           return n.error("squeeze of " + aten::shapeToString(t.getShape()) + " recorded as " +
                          aten::shapeToString(type.getShape()));
         return n.create<aten::ReshapeOp>(self, n.b.getDenseI64ArrayAttr(kept));
       }},
      {"aten::squeeze.dim",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(self, n.tensor(0, "self"));
         NCC_TRY(dim, n.integer(1, "dim"));
         return n.create<aten::SqueezeDimOp>(self, n.b.getI64IntegerAttr(dim));
       }},
      {"aten::expand", [](NodeImporter& n) { return viewWithSize<aten::ExpandOp>(n, "size"); }},
      {"aten::view", [](NodeImporter& n) { return viewWithSize<aten::ViewShapeOp>(n, "size"); }},
      {"aten::_unsafe_view", [](NodeImporter& n) { return viewWithSize<aten::UnsafeViewOp>(n, "size"); }},
      {"aten::reshape", [](NodeImporter& n) { return viewWithSize<aten::ReshapeOp>(n, "shape"); }},
      {"aten::_reshape_alias",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(self, n.tensor(0, "self"));
         NCC_TRY(size, n.ints(1, "size"));
         NCC_TRY(stride, n.ints(2, "stride"));
         return n.create<aten::ReshapeAliasOp>(self, n.b.getDenseI64ArrayAttr(size), n.b.getDenseI64ArrayAttr(stride));
       }},
      {"aten::slice.Tensor",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(self, n.tensor(0, "self"));
         NCC_TRY(dim, n.integer(1, "dim", 0));
         NCC_TRY(start, n.integer(2, "start", 0));
         NCC_TRY(end, n.integer(3, "end", INT64_MAX));
         NCC_TRY(step, n.integer(4, "step", 1));
         return n.create<aten::SliceTensorOp>(self, n.b.getI64IntegerAttr(dim), n.b.getI64IntegerAttr(start),
                                              n.b.getI64IntegerAttr(end), n.b.getI64IntegerAttr(step));
       }},
      {"aten::select.int",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(self, n.tensor(0, "self"));
         NCC_TRY(dim, n.integer(1, "dim"));
         NCC_TRY(index, n.integer(2, "index"));
         return n.create<aten::SelectIntOp>(self, n.b.getI64IntegerAttr(dim), n.b.getI64IntegerAttr(index));
       }},
      {"aten::_to_copy",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(self, n.tensor(0, "self"));
         return n.create<aten::ToCopyOp>(self);  // the recorded result type carries the dtype
       }},
      {"aten::cat",
       [](NodeImporter& n) -> LogicalResult {
         const Argument* list = n.arg(0, "tensors");
         if (!list || list->value_case() != Argument::kTensorList)
           return n.error("argument 'tensors' must be a list of tensors");
         SmallVector<Value> tensors;
         for (const std::string& name : list->tensor_list().values()) {
           auto it = n.values.find(name);
           if (name.empty() || it == n.values.end() || it->second.size() != 1)
             return n.error("cat names unknown value '" + name + "'");
           // Empty pieces add nothing (PyTorch also skips 1-d empty tensors
           // of any other shape, its legacy rule).
           auto t = llvm::cast<RankedTensorType>(it->second.front().getType());
           if (t.getNumElements() == 0) continue;
           tensors.push_back(it->second.front());
         }
         NCC_TRY(dim, n.integer(1, "dim", 0));
         // cat promotes its operands to one dtype (the recorded result's).
         NCC_TRY(type, n.resultType());
         for (Value& t : tensors) {
           auto tt = llvm::cast<RankedTensorType>(t.getType());
           if (tt.getElementType() != type.getElementType())
             t = n.b.create<aten::ToCopyOp>(n.loc, tt.clone(type.getElementType()), t);
           else  // (cat's copies do not convert an integer input's HBM dtype)
             t = readIntegerInput(n.b, n.loc, t, /*wholeInputInPlace=*/false);
         }
         // One piece left (the others empty): a copy, which fuses as a view.
         if (tensors.size() == 1) return n.create<aten::CloneOp>(tensors.front());
         return n.create<aten::CatOp>(tensors, n.b.getI64IntegerAttr(dim));
       }},
      {"aten::split.Tensor",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(self, n.tensor(0, "self"));
         NCC_TRY(splitSize, n.integer(1, "split_size"));
         NCC_TRY(dim, n.integer(2, "dim", 0));
         auto t = llvm::cast<RankedTensorType>(self.getType());
         if (t.getRank() == 0 || splitSize <= 0) return n.error("split of a 0-d tensor or by a non-positive size");
         int64_t d = dim < 0 ? dim + t.getRank() : dim;
         if (d < 0 || d >= t.getRank()) return n.error("split dim out of range");
         // Pieces of splitSize; the last one ends at the dim's end (a slice
         // past the end is clamped), and a dim of 0 still gives one piece.
         SmallVector<int64_t> sizes;
         for (int64_t start = 0; start < std::max<int64_t>(t.getDimSize(d), 1); start += splitSize)
           sizes.push_back(splitSize);
         return splitPieces(n, self, dim, sizes);
       }},
      {"aten::embedding",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(weight, n.tensor(0, "weight"));
         NCC_TRY(indices, n.tensor(1, "indices"));
         NCC_TRY(padding, n.integer(2, "padding_idx", -1));
         return n.create<aten::EmbeddingOp>(weight, gatherableIndices(n.b, n.loc, indices),
                                            n.b.getI64IntegerAttr(padding));
       }},
      {"aten::mm",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(a, n.tensor(0, "self"));
         NCC_TRY(b, n.tensor(1, "mat2"));
         return matmulOp<aten::MmOp>(n, std::array<Value, 2>{a, b});
       }},
      {"aten::bmm",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(a, n.tensor(0, "self"));
         NCC_TRY(b, n.tensor(1, "mat2"));
         return matmulOp<aten::BmmOp>(n, std::array<Value, 2>{a, b});
       }},
      {"aten::addmm",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(bias, n.tensor(0, "self"));
         NCC_TRY(a, n.tensor(1, "mat1"));
         NCC_TRY(b, n.tensor(2, "mat2"));
         NCC_TRY(beta, n.numberAsResult(3, "beta", 1.0));
         NCC_TRY(alpha, n.numberAsResult(4, "alpha", 1.0));
         return matmulOp<aten::AddmmOp>(n, std::array<Value, 3>{bias, a, b}, n.b.getF64FloatAttr(beta),
                                        n.b.getF64FloatAttr(alpha));
       }},
      {"aten::ones", [](NodeImporter& n) { return constantFill(n, 1.0, 0, ""); }},
      {"aten::zeros", [](NodeImporter& n) { return constantFill(n, 0.0, 0, ""); }},
      {"aten::full", [](NodeImporter& n) { return constantFill(n, std::nullopt, 1, "fill_value"); }},
      {"aten::scalar_tensor", [](NodeImporter& n) { return constantFill(n, std::nullopt, 0, "s"); }},
      // Tensors shaped like another: only the recorded type is read (an
      // empty tensor's values are unspecified; zeros here).
      {"aten::zeros_like", [](NodeImporter& n) { return constantFill(n, 0.0, 0, ""); }},
      {"aten::ones_like", [](NodeImporter& n) { return constantFill(n, 1.0, 0, ""); }},
      {"aten::empty_like", [](NodeImporter& n) { return constantFill(n, 0.0, 0, ""); }},
      {"aten::full_like", [](NodeImporter& n) { return constantFill(n, std::nullopt, 1, "fill_value"); }},
      {"aten::new_zeros", [](NodeImporter& n) { return constantFill(n, 0.0, 0, ""); }},
      {"aten::new_ones", [](NodeImporter& n) { return constantFill(n, 1.0, 0, ""); }},
      {"aten::new_empty", [](NodeImporter& n) { return constantFill(n, 0.0, 0, ""); }},
      {"aten::new_full", [](NodeImporter& n) { return constantFill(n, std::nullopt, 2, "fill_value"); }},
      {"aten::empty.memory_format", [](NodeImporter& n) { return constantFill(n, 0.0, 0, ""); }},
      {"aten::fill.Scalar", [](NodeImporter& n) { return constantFill(n, std::nullopt, 1, "value"); }},
      {"aten::tril", [](NodeImporter& n) { return triangle(n, true); }},
      {"aten::arange", [](NodeImporter& n) { return arange(n, false, false); }},
      {"aten::arange.start", [](NodeImporter& n) { return arange(n, true, false); }},
      {"aten::arange.start_step", [](NodeImporter& n) { return arange(n, true, true); }},
      {"aten::tril_indices", [](NodeImporter& n) { return triangleIndices(n, true); }},
      {"aten::triu_indices", [](NodeImporter& n) { return triangleIndices(n, false); }},
      {"aten::triu", [](NodeImporter& n) { return triangle(n, false); }},
      {"aten::rms_norm",
       [](NodeImporter& n) -> LogicalResult {
         NCC_TRY(input, n.tensor(0, "input"));
         NCC_TRY(shape, n.ints(1, "normalized_shape"));
         Value weight;
         if (n.isTensor(2, "weight")) {
           NCC_TRY(w, n.tensor(2, "weight"));
           weight = w;
         }
         FloatAttr eps;
         if (const Argument* e = n.arg(3, "eps"); e && e->value_case() != Argument::kNone) {
           NCC_TRY(v, n.number(3, "eps"));
           eps = n.b.getF64FloatAttr(v);
         }
         return n.create<aten::RmsNormOp>(input, weight, n.b.getDenseI64ArrayAttr(shape), eps);
       }},
    };
    addComposedOps(t);
    addComposedMathOps(t);
    addComposedIndexingOps(t);
    addComposedBitwiseOps(t);
    // The unsafe_ variants (LSTM and GRU cells use them) differ only in
    // aliasing, which values do not see.
    t["aten::unsafe_split.Tensor"] = t.at("aten::split.Tensor");
    t["aten::unsafe_split_with_sizes"] = t.at("aten::split_with_sizes");
    return t;
  }();
  return table;
}

// Elementwise ops whose result depends on an operand's value beyond its low
// bits, so that converting a wider 0-d integer operand into a narrow
// operand's dtype first (as eager does) changes it.
bool wrapsOperandsIntoItsDtype(StringRef target) {
  static const llvm::StringSet<> kOps = {
      "aten::maximum",         "aten::minimum",         "aten::fmax",           "aten::fmin",
      "aten::where.self",      "aten::clamp.Tensor",    "aten::clamp_min.Tensor", "aten::clamp_max.Tensor",
      "aten::floor_divide",    "aten::remainder.Tensor", "aten::fmod.Tensor",   "aten::div.Tensor_mode",
      "aten::eq.Tensor",       "aten::ne.Tensor",       "aten::lt.Tensor",      "aten::le.Tensor",
      "aten::gt.Tensor",       "aten::ge.Tensor"};
  return kOps.contains(target);
}

// Eager's wrap-around of a uint8, int8 or int16 result (200 + 100 is 44 in
// uint8): v, an i32 value (exact on the device below 2^24), reduced modulo
// 2^bits into the narrow type's range through f32, where each step is exact:
// t = v + offset, t - 2^bits * floor(t / 2^bits) - offset, the offset being
// 2^(bits - 1) for the signed types and 0 for uint8.
Value wrapNarrowInteger(OpBuilder& b, Location loc, Value v, IntegerType narrow) {
  auto type = llvm::cast<RankedTensorType>(v.getType());
  auto f32 = type.clone(b.getF32Type());
  const double modulus = std::ldexp(1.0, int(narrow.getWidth())), offset = narrow.isSigned() ? modulus / 2 : 0.0;
  auto addScalar = [&](Value x, double s) -> Value {
    return b.create<aten::AddScalarOp>(loc, f32, x, b.getF64FloatAttr(s), b.getF64FloatAttr(1.0));
  };
  Value x = b.create<aten::ToCopyOp>(loc, f32, v);
  if (offset != 0.0) x = addScalar(x, offset);
  Value scaled = b.create<aten::MulScalarOp>(loc, f32, x, b.getF64FloatAttr(1.0 / modulus));
  Value whole = b.create<aten::FloorOp>(loc, f32, scaled);
  Value r = b.create<aten::SubTensorOp>(loc, f32, x, whole, b.getF64FloatAttr(modulus));
  if (offset != 0.0) r = addScalar(r, -offset);
  return b.create<aten::ToCopyOp>(loc, type, r);
}

class GraphImporter {
 public:
  GraphImporter(const graph::Graph& g, const std::string& filename, MLIRContext& ctx)
      : g(g), filename(filename), ctx(ctx), b(&ctx) {}

  OwningOpRef<ModuleOp> run();
  bool sawUnsupported = false;

 private:
  // Errors point at the graph file and the node (or input, or constant).
  Location nodeLoc(const std::string& node) {
    return NameLoc::get(StringAttr::get(&ctx, node), FileLineColLoc::get(&ctx, filename, 0, 0));
  }
  InFlightDiagnostic error(const std::string& where) { return emitError(nodeLoc(where)); }
  FailureOr<RankedTensorType> typeOf(const graph::TensorMeta& m, const std::string& where);
  LogicalResult checkSupported();
  FailureOr<Value> constant(const graph::Constant& c);
  Value emptyConstant(ShapedType type, Location loc) {
    return b.create<arith::ConstantOp>(loc, DenseElementsAttr::get(type, ArrayRef<Attribute>{})).getResult();
  }
  bool allResultsEmpty(const graph::Node& node);
  LogicalResult checkEmptyOperands(const graph::Node& node);
  LogicalResult foldEmptyValues(Block& entry);

  const graph::Graph& g;
  std::string filename;
  MLIRContext& ctx;
  OpBuilder b;
  llvm::StringMap<SmallVector<Value>> values;
};

FailureOr<RankedTensorType> GraphImporter::typeOf(const graph::TensorMeta& m, const std::string& where) {
  Type elem = elementType(m.dtype(), &ctx);
  if (!elem) return (error(where) << "unsupported dtype " << graph::DType_Name(m.dtype()), failure());
  SmallVector<int64_t> shape;
  for (int64_t d : m.shape()) {
    if (d < 0 || d > (int64_t(1) << 40)) return (error(where) << "bad dimension " << d, failure());
    shape.push_back(d);
  }
  if (shape.size() > size_t(neff::kMaxTensorRank))
    return (error(where) << "rank " << shape.size() << " is above " << neff::kMaxTensorRank, failure());
  return RankedTensorType::get(shape, elem);
}

// A node whose every result has no elements computes nothing: its results
// are empty constants, whatever it is.
bool GraphImporter::allResultsEmpty(const graph::Node& node) {
  if (node.outputs_size() == 0) return false;
  return llvm::all_of(node.outputs(), [](const graph::TensorMeta& m) {
    return llvm::is_contained(m.shape(), int64_t(0));
  });
}

// A node that makes something of nothing: only the ops whose import folds
// an empty operand (foldEmptyValues) or skips it (cat) may read one. Any
// other importer would build its composition over a 0-sized dim (a graph
// whose recorded shapes disagree, flip of an empty input recorded [3, 4],
// aborted in one), so it is refused instead.
LogicalResult GraphImporter::checkEmptyOperands(const graph::Node& node) {
  static const std::set<std::string> kTakesEmpty = {
      "aten::cat", "aten::sum", "aten::sum.dim_IntList", "aten::mean", "aten::mean.dim", "aten::nansum",
      "aten::prod", "aten::prod.dim_int", "aten::any", "aten::any.dim", "aten::all", "aten::all.dim",
      "aten::count_nonzero", "aten::count_nonzero.dim_IntList", "aten::norm.Scalar", "aten::norm.ScalarOpt_dim",
      "aten::linalg_vector_norm", "aten::var", "aten::var.dim", "aten::var.correction", "aten::std",
      "aten::std.dim", "aten::std.correction", "aten::var_mean.correction", "aten::std_mean.correction",
      "aten::mm", "aten::addmm", "aten::bmm",
      // writes of nothing give self; no test element finds nothing
      "aten::index_add", "aten::index_copy", "aten::index_reduce", "aten::scatter.src", "aten::scatter.value",
      "aten::scatter_add", "aten::scatter_reduce.two", "aten::masked_scatter", "aten::isin.Tensor_Tensor",
      "aten::isin.Scalar_Tensor"};
  if (kTakesEmpty.count(node.target())) return success();
  auto check = [&](const std::string& name) -> LogicalResult {
    auto it = values.find(name);
    if (it == values.end()) return success();  // (the importer reports unknown names)
    for (Value v : it->second)
      if (auto t = llvm::dyn_cast<RankedTensorType>(v.getType()); t && t.getNumElements() == 0)
        return error(node.name()) << node.target() << ": an operand of shape " << aten::shapeToString(t.getShape())
                                  << " is an empty tensor (0 elements) and the result is not; only reductions, "
                                     "matmuls, cat, writes and isin take empty operands into a result with elements";
    return success();
  };
  for (const Argument& a : node.args()) {
    if (a.value_case() == Argument::kTensor && failed(check(a.tensor()))) return failure();
    if (a.value_case() == Argument::kTensorList)
      for (const std::string& name : a.tensor_list().values())
        if (failed(check(name))) return failure();
  }
  return success();
}

// Empty values are constants from import on (graph inputs with no elements
// too), so that no kernel ever reads or writes one: what an op's composition
// computes with no elements becomes an empty constant, and the ops that make
// something of nothing fold here. A reduction over no elements is its
// identity (sum 0, mean NaN, as eager gives); a matmul contracting over no
// elements (K = 0) is beta * bias, or zeros.
LogicalResult GraphImporter::foldEmptyValues(Block& entry) {
  auto isEmpty = [](Value v) {
    auto t = llvm::dyn_cast<RankedTensorType>(v.getType());
    return t && t.getNumElements() == 0;
  };
  for (Operation& op : llvm::make_early_inc_range(entry)) {
    if (llvm::isa<arith::ConstantOp, func::ReturnOp>(op) || op.getNumResults() == 0) continue;
    b.setInsertionPoint(&op);
    if (llvm::all_of(op.getResults(), isEmpty)) {
      for (Value r : op.getResults())
        r.replaceAllUsesWith(emptyConstant(llvm::cast<ShapedType>(r.getType()), op.getLoc()));
      op.erase();
      continue;
    }
    auto type = llvm::cast<RankedTensorType>(op.getResult(0).getType());
    auto splat = [&](double value) {
      Attribute a = llvm::isa<FloatType>(type.getElementType())
                        ? Attribute(b.getFloatAttr(type.getElementType(), value))
                        : Attribute(b.getIntegerAttr(type.getElementType(), int64_t(value)));
      return b.create<arith::ConstantOp>(op.getLoc(), DenseElementsAttr::get(type, a)).getResult();
    };
    Value result;
    const bool emptyInput = op.getNumOperands() > 0 && isEmpty(op.getOperand(0));
    if (llvm::isa<aten::SumDimIntListOp>(op) && emptyInput) {
      result = splat(0.0);
    } else if (llvm::isa<aten::MeanDimOp>(op) && emptyInput) {
      result = splat(std::nan(""));
    } else if (llvm::isa<aten::AmaxOp>(op) && emptyInput) {
      // Eager refuses amax over nothing; the compositions that reach it
      // reduce values of at least 0 (any and all over 0/1 flags, the
      // inf-norm over |x|: 0 over nothing, as eager gives), and logsumexp's
      // log(0) + m is -inf whatever m.
      result = splat(0.0);
    } else if (llvm::isa<aten::VarMeanCorrectionOp>(op) && emptyInput) {
      Value nan = splat(std::nan(""));
      op.getResult(1).replaceAllUsesWith(nan);
      result = nan;
    } else if (llvm::isa<aten::MmOp, aten::BmmOp, aten::AddmmOp>(op)) {
      unsigned lhs = llvm::isa<aten::AddmmOp>(op) ? 1 : 0;
      if (llvm::cast<RankedTensorType>(op.getOperand(lhs).getType()).getShape().back() != 0) continue;
      result = splat(0.0);
      if (auto addmm = llvm::dyn_cast<aten::AddmmOp>(op); addmm && addmm.getBeta().convertToDouble() != 0.0) {
        Value bias = addmm.getSelf();
        if (addmm.getBeta().convertToDouble() != 1.0)
          bias = b.create<aten::MulScalarOp>(op.getLoc(), bias.getType(), bias, addmm.getBetaAttr()).getResult();
        result = b.create<aten::AddTensorOp>(op.getLoc(), type, result, bias, b.getF64FloatAttr(1.0)).getResult();
      }
    } else {
      continue;
    }
    op.getResult(0).replaceAllUsesWith(result);
    op.erase();
  }
  return success();
}

LogicalResult GraphImporter::checkSupported() {
  struct Use { int count = 0; std::string first; };
  std::map<std::string, Use> unsupported;
  for (const graph::Node& node : g.nodes()) {
    if (node.target() == "getitem" || registry().count(node.target())) continue;
    Use& u = unsupported[node.target()];
    if (u.count++ == 0) u.first = node.name();
  }
  if (unsupported.empty()) return success();
  sawUnsupported = true;
  auto diag = emitError(FileLineColLoc::get(&ctx, filename, 0, 0))
              << unsupported.size() << " unsupported operator" << (unsupported.size() > 1 ? "s" : "")
              << ":";
  for (auto& [target, use] : unsupported)
    diag << "\n  " << target << " (" << use.count << " use" << (use.count > 1 ? "s" : "")
         << ", first at node '" << use.first << "')";
  return failure();
}

FailureOr<Value> GraphImporter::constant(const graph::Constant& c) {
  FailureOr<RankedTensorType> type = typeOf(c.meta(), c.name());
  if (failed(type)) return failure();
  if (IntegerType narrow = narrowIntegerType(c.meta().dtype(), &ctx)) {  // held as i32 (elementType)
    const size_t width = narrow.getWidth() / 8;
    if (c.data().size() != uint64_t(type->getNumElements()) * width)
      return (error(c.name()) << "constant has " << c.data().size() << " bytes, its shape and dtype need "
                              << uint64_t(type->getNumElements()) * width, failure());
    SmallVector<int32_t> ints;
    for (size_t i = 0; i < c.data().size(); i += width) {
      const auto* p = reinterpret_cast<const uint8_t*>(c.data().data() + i);
      ints.push_back(width == 2                ? int32_t(int16_t(uint16_t(p[0] | p[1] << 8)))  // little-endian
                     : narrow.isUnsigned() ? int32_t(p[0])
                                           : int32_t(int8_t(p[0])));
    }
    return b.create<arith::ConstantOp>(nodeLoc(c.name()), DenseElementsAttr::get(*type, ArrayRef<int32_t>(ints)))
        .getResult();
  }
  int64_t bits = type->getElementType().getIntOrFloatBitWidth();
  uint64_t expected = uint64_t(type->getNumElements()) * uint64_t(bits == 1 ? 8 : bits) / 8;
  if (c.data().size() != expected)
    return (error(c.name()) << "constant has " << c.data().size() << " bytes, its shape and dtype need "
                            << expected, failure());
  DenseElementsAttr attr;
  if (bits == 1) {
    SmallVector<bool> bools;
    for (char byte : c.data()) bools.push_back(byte != 0);
    attr = DenseElementsAttr::get(*type, bools);
  } else {
    attr = DenseElementsAttr::getFromRawBuffer(*type, ArrayRef<char>(c.data().data(), c.data().size()));
  }
  return b.create<arith::ConstantOp>(nodeLoc(c.name()), attr).getResult();
}

OwningOpRef<ModuleOp> GraphImporter::run() {
  if (g.outputs().empty()) {
    emitError(FileLineColLoc::get(&ctx, filename, 0, 0)) << "the graph is empty: it returns no values (" << g.nodes_size() << " nodes, "
                    << g.inputs_size() << " inputs)";
    return nullptr;
  }
  if (failed(checkSupported())) return nullptr;
  OwningOpRef<ModuleOp> module = ModuleOp::create(FileLineColLoc::get(&ctx, filename, 0, 0));
  b.setInsertionPointToEnd(module->getBody());
  SmallVector<Type> inputTypes;
  for (const graph::Placeholder& p : g.inputs()) {
    FailureOr<RankedTensorType> t = typeOf(p.meta(), p.name());
    if (failed(t)) return nullptr;
    if (t->getElementType().isF64())
      return (error(p.name()) << "float64 graph inputs are not supported (the device computes in f32, "
                                 "bf16 and f16); cast to float32 before exporting",
              nullptr);
    IntegerType narrow = narrowIntegerType(p.meta().dtype(), &ctx);
    inputTypes.push_back(narrow ? t->clone(narrow) : *t);
  }
  // Values of uint8, int8 or int16 (graph inputs, node results): i32 inside
  // the graph, in their type's range.
  llvm::DenseMap<Value, IntegerType> narrowValues;
  SmallVector<Type> outputTypes;  // filled after the body is built
  auto func = b.create<func::FuncOp>(FileLineColLoc::get(&ctx, filename, 0, 0), "main",
                                     b.getFunctionType(inputTypes, {}));
  Block* entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  for (auto [i, p] : llvm::enumerate(g.inputs())) {
    if (values.count(p.name())) return (error(p.name()) << "value defined twice", nullptr);
    // An input with no elements is bound by the caller (0 bytes) and read by
    // nothing: the graph sees an empty constant.
    auto inputType = llvm::cast<RankedTensorType>(inputTypes[i]);
    Value input = entry->getArgument(unsigned(i));
    IntegerType narrow = narrowIntegerType(p.meta().dtype(), &ctx);
    if (narrow) inputType = inputType.clone(b.getI32Type());
    if (inputType.getNumElements() == 0)
      input = emptyConstant(inputType, nodeLoc(p.name()));
    else if (narrow)
      input = b.create<aten::ToCopyOp>(nodeLoc(p.name()), inputType, input);
    if (narrow) narrowValues[input] = narrow;
    values[p.name()] = {input};
    func.setArgAttr(unsigned(i), "nc.name", b.getStringAttr(p.name()));
  }
  for (const graph::Constant& c : g.constants()) {
    if (values.count(c.name())) return (error(c.name()) << "value defined twice", nullptr);
    FailureOr<Value> v = constant(c);
    if (failed(v)) return nullptr;
    values[c.name()] = {*v};
    if (IntegerType narrow = narrowIntegerType(c.meta().dtype(), &ctx)) narrowValues[*v] = narrow;
  }
  // Narrow integer results wrap as eager's do; views and cats of values
  // already in range need not.
  std::function<bool(Value)> inRange = [&](Value v) {
    if (narrowValues.count(v)) return true;
    Operation* def = v.getDefiningOp();
    if (def && aten::isViewOp(def) && def->getNumOperands() == 1) return inRange(def->getOperand(0));
    if (def && llvm::isa<aten::CatOp>(def)) return llvm::all_of(def->getOperands(), inRange);
    return false;
  };
  auto wrapNarrowResults = [&](const graph::Node& node) {
    SmallVector<Value>& results = values[node.name()];
    for (auto [i, m] : llvm::enumerate(node.outputs())) {
      IntegerType narrow = narrowIntegerType(m.dtype(), &ctx);
      if (!narrow || i >= results.size()) continue;
      Value& v = results[i];
      if (!inRange(v) && llvm::cast<RankedTensorType>(v.getType()).getNumElements() != 0)
        v = wrapNarrowInteger(b, nodeLoc(node.name()), v, narrow);
      narrowValues[v] = narrow;
    }
  };
  // Eager converts an elementwise op's operands to the dtype it computes
  // in. A 0-d int64 tensor does not promote a uint8/int8/int16 one, so it
  // is wrapped into the narrow dtype first: maximum(u8, tensor(300))
  // compares with 44, u8 > tensor(-1) with 255. (Add, sub and mul wrap the
  // same either way; indices and shift amounts are not converted.) The
  // wrapped operand stands in for the original while the node imports;
  // returns the originals to put back.
  auto wrapZeroDimOperands = [&](const graph::Node& node) {
    SmallVector<std::pair<std::string, SmallVector<Value>>> originals;
    if (!wrapsOperandsIntoItsDtype(node.target())) return originals;
    auto single = [&](const Argument& a) {
      auto it = a.value_case() == Argument::kTensor ? values.find(a.tensor()) : values.end();
      return it != values.end() && it->second.size() == 1 ? it->second.front() : Value();
    };
    IntegerType narrow;
    for (const Argument& a : node.args())
      if (Value v = single(a); v && llvm::cast<RankedTensorType>(v.getType()).getRank() > 0)
        if (IntegerType t = narrowValues.lookup(v)) narrow = t;
    if (!narrow) return originals;
    for (const Argument& a : node.args()) {
      Value v = single(a);
      if (!v) continue;
      auto type = llvm::cast<RankedTensorType>(v.getType());
      if (type.getRank() != 0 || !type.getElementType().isSignlessInteger() || type.getElementType().isInteger(1) ||
          inRange(v) || llvm::any_of(originals, [&](auto& o) { return o.first == a.tensor(); }))
        continue;
      originals.emplace_back(a.tensor(), values[a.tensor()]);
      values[a.tensor()] = {wrapNarrowInteger(b, nodeLoc(node.name()), v, narrow)};
    }
    return originals;
  };
  for (const graph::Node& node : g.nodes()) {
    if (values.count(node.name())) return (error(node.name()) << "value defined twice", nullptr);
    if (node.target() == "getitem") {
      if (node.args_size() != 2 || node.args(0).value_case() != Argument::kTensor ||
          node.args(1).value_case() != Argument::kIntValue)
        return (error(node.name()) << "getitem takes a tuple value and an index", nullptr);
      auto it = values.find(node.args(0).tensor());
      int64_t index = node.args(1).int_value();
      if (it == values.end() || index < 0 || index >= int64_t(it->second.size()))
        return (error(node.name()) << "getitem of an unknown value or index " << index, nullptr);
      values[node.name()] = {it->second[size_t(index)]};
      continue;
    }
    if (allResultsEmpty(node)) {
      SmallVector<Value> empties;
      for (const graph::TensorMeta& m : node.outputs()) {
        FailureOr<RankedTensorType> t = typeOf(m, node.name());
        if (failed(t)) return nullptr;
        empties.push_back(emptyConstant(*t, nodeLoc(node.name())));
      }
      values[node.name()] = empties;
      wrapNarrowResults(node);
      continue;
    }
    if (failed(checkEmptyOperands(node))) return nullptr;
    SmallVector<std::pair<std::string, SmallVector<Value>>> originals = wrapZeroDimOperands(node);
    NodeImporter importer(node, b, nodeLoc(node.name()), values);
    importer.narrowValues = &narrowValues;
    LogicalResult imported = registry().at(node.target())(importer);
    for (auto& [name, original] : originals) values[name] = original;
    if (failed(imported)) return nullptr;
    wrapNarrowResults(node);
  }
  SmallVector<Value> results;
  for (const std::string& name : g.outputs()) {
    auto it = values.find(name);
    if (it == values.end() || it->second.size() != 1)
      return (error(name) << "graph output names unknown value '" << name << "'", nullptr);
    Value v = it->second.front();
    const int64_t rank = llvm::cast<RankedTensorType>(v.getType()).getRank();
    if (rank > neff::kMaxTensorRank)
      return (error(name) << "graph output rank " << rank << " is above " << neff::kMaxTensorRank, nullptr);
    if (auto narrow = narrowValues.lookup(v)) {  // back to the graph's dtype in HBM
      auto type = llvm::cast<RankedTensorType>(v.getType()).clone(narrow);
      v = type.getNumElements() == 0 ? emptyConstant(type, nodeLoc(name))
                                     : b.create<aten::ToCopyOp>(nodeLoc(name), type, v).getResult();
    }
    results.push_back(v);
    outputTypes.push_back(results.back().getType());
  }
  b.create<func::ReturnOp>(FileLineColLoc::get(&ctx, filename, 0, 0), results);
  func.setFunctionType(b.getFunctionType(inputTypes, outputTypes));
  // Values nothing reads (a result of a multi-result op the graph never
  // picks, such as max pooling's indices, or pieces a composition built
  // and did not use) are dropped before any pass sees them. In reverse
  // order, so that what only they read goes too.
  if (failed(foldEmptyValues(*entry))) return nullptr;
  for (Operation& op : llvm::make_early_inc_range(llvm::reverse(*entry)))
    if (isOpTriviallyDead(&op)) op.erase();
  // What an op's composition made of an empty value and still computes
  // something empty is past what the passes take.
  for (Operation& op : *entry)
    if (!llvm::isa<arith::ConstantOp, func::ReturnOp>(op))
      for (Value r : op.getResults())
        if (auto t = llvm::dyn_cast<RankedTensorType>(r.getType()); t && t.getNumElements() == 0)
          return (emitError(op.getLoc()) << op.getName() << ": an intermediate result of shape "
                                          << aten::shapeToString(t.getShape())
                                          << " is an empty tensor (0 elements) that the compiler does not fold; "
                                             "empty tensors are supported as graph inputs, outputs and node results",
                  nullptr);
  if (failed(verify(*module))) return nullptr;
  return module;
}

}  // namespace

OwningOpRef<ModuleOp> importAtenGraph(std::string_view bytes, bool text, const std::string& filename,
                                      MLIRContext& context, bool* unsupportedOps) {
  context.loadDialect<aten::AtenDialect, func::FuncDialect, arith::ArithDialect>();
  graph::Graph g;
  // Binary graphs are parsed from the caller's bytes where they lie (a
  // mapped file): a copy of a 100 MB model first cost 0.3 s of page faults.
  bool ok = text ? google::protobuf::TextFormat::ParseFromString(std::string(bytes), &g)
                 : (bytes.size() < (size_t(1) << 31) && g.ParseFromArray(bytes.data(), int(bytes.size())));
  if (!ok) {
    emitError(FileLineColLoc::get(&context, filename, 0, 0))
        << "not a valid ATen graph " << (text ? "text protobuf" : "protobuf") << " file";
    return nullptr;
  }
  GraphImporter importer(g, filename, context);
  OwningOpRef<ModuleOp> module = importer.run();
  if (unsupportedOps) *unsupportedOps = importer.sawUnsupported;
  return module;
}

std::vector<std::string> supportedAtenOperators() {
  std::vector<std::string> ops;
  for (auto& [name, builder] : registry()) ops.push_back(name);
  return ops;
}

}  // namespace neuroncc
