#include "dialects/aten/AtenDialect.h"

#include "dialects/aten/TypeRules.h"
#include "dialects/aten/Views.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;

namespace neuroncc::aten {

void AtenDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/aten/AtenOps.cpp.inc"
      >();
}

namespace {

RankedTensorType asRanked(Type t) { return llvm::dyn_cast_or_null<RankedTensorType>(t); }

enum class BinaryResult { Promoted, TrueDivide, Bool };

LogicalResult inferBinary(std::optional<Location> loc, Value self, Value other,
                          SmallVectorImpl<Type>& results, BinaryResult kind = BinaryResult::Promoted) {
  auto a = asRanked(self.getType()), b = asRanked(other.getType());
  if (!a || !b) return emitOptionalError(loc, "operands must be ranked tensors");
  auto shape = broadcastShapes(a.getShape(), b.getShape());
  if (!shape)
    return emitOptionalError(loc, "operands are not broadcast-compatible: ",
                             shapeToString(a.getShape()), " vs ", shapeToString(b.getShape()));
  Type elem = promoteTypes(a, b);
  if (kind == BinaryResult::TrueDivide && !isFloatType(elem)) elem = Float32Type::get(a.getContext());
  if (kind == BinaryResult::Bool) elem = IntegerType::get(a.getContext(), 1);
  results.push_back(RankedTensorType::get(*shape, elem));
  return success();
}

LogicalResult inferSameAsOperand(std::optional<Location> loc, Value self,
                                 SmallVectorImpl<Type>& results) {
  auto a = asRanked(self.getType());
  if (!a) return emitOptionalError(loc, "operand must be a ranked tensor");
  results.push_back(a);
  return success();
}

// Normalizes `dims` against `rank`, reporting out-of-range and repeated dims.
FailureOr<SmallVector<int64_t>> normalizeDims(std::optional<Location> loc, ArrayRef<int64_t> dims,
                                              int64_t rank) {
  SmallVector<int64_t> out;
  int64_t bound = std::max<int64_t>(rank, 1);  // a 0-d tensor accepts dim 0 / -1
  for (int64_t d : dims) {
    if (d < -bound || d >= bound)
      return emitOptionalError(loc, "dim ", d, " is out of range for a rank-", rank, " tensor");
    int64_t n = d < 0 ? d + bound : d;
    if (llvm::is_contained(out, n))
      return emitOptionalError(loc, "dim ", n, " appears more than once");
    out.push_back(n);
  }
  llvm::sort(out);
  return out;
}

LogicalResult inferReduction(std::optional<Location> loc, Value self, ArrayRef<int64_t> dims,
                             bool keepdim, SmallVectorImpl<Type>& results) {
  auto a = asRanked(self.getType());
  if (!a) return emitOptionalError(loc, "operand must be a ranked tensor");
  auto reduced = normalizeDims(loc, dims, a.getRank());
  if (failed(reduced)) return failure();
  // ATen reduces every dimension when the list is empty.
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < a.getRank(); ++i) {
    bool is_reduced = reduced->empty() || llvm::is_contained(*reduced, i);
    if (!is_reduced) shape.push_back(a.getDimSize(i));
    else if (keepdim) shape.push_back(1);
  }
  results.push_back(RankedTensorType::get(shape, a.getElementType()));
  return success();
}

}  // namespace

#define NEURON_INFER_SIGNATURE(OP)                                                   \
  LogicalResult OP::inferReturnTypes(MLIRContext*, std::optional<Location> loc,      \
                                     ValueRange operands, DictionaryAttr attributes, \
                                     OpaqueProperties properties, RegionRange regions, \
                                     SmallVectorImpl<Type>& results)

#define NEURON_BINARY_INFER(OP)                                        \
  NEURON_INFER_SIGNATURE(OP) {                                         \
    OP::Adaptor adaptor(operands, attributes, properties, regions);    \
    return inferBinary(loc, adaptor.getSelf(), adaptor.getOther(), results); \
  }
NEURON_BINARY_INFER(MulTensorOp)
NEURON_BINARY_INFER(MaximumOp)
NEURON_BINARY_INFER(MinimumOp)
NEURON_BINARY_INFER(PowTensorTensorOp)
NEURON_BINARY_INFER(AddTensorOp)
NEURON_BINARY_INFER(SubTensorOp)

NEURON_INFER_SIGNATURE(DivTensorOp) {
  DivTensorOp::Adaptor adaptor(operands, attributes, properties, regions);
  return inferBinary(loc, adaptor.getSelf(), adaptor.getOther(), results, BinaryResult::TrueDivide);
}

#define NEURON_COMPARE_INFER(NAME)                                                       \
  NEURON_INFER_SIGNATURE(NAME##TensorOp) {                                               \
    NAME##TensorOp::Adaptor adaptor(operands, attributes, properties, regions);          \
    return inferBinary(loc, adaptor.getSelf(), adaptor.getOther(), results, BinaryResult::Bool); \
  }                                                                                      \
  NEURON_INFER_SIGNATURE(NAME##ScalarOp) {                                               \
    NAME##ScalarOp::Adaptor adaptor(operands, attributes, properties, regions);          \
    auto a = asRanked(adaptor.getSelf().getType());                                      \
    if (!a) return emitOptionalError(loc, "operand must be a ranked tensor");            \
    results.push_back(RankedTensorType::get(a.getShape(), IntegerType::get(a.getContext(), 1))); \
    return success();                                                                    \
  }
NEURON_COMPARE_INFER(Eq)
NEURON_COMPARE_INFER(Ne)
NEURON_COMPARE_INFER(Lt)
NEURON_COMPARE_INFER(Le)
NEURON_COMPARE_INFER(Gt)
NEURON_COMPARE_INFER(Ge)

NEURON_INFER_SIGNATURE(WhereSelfOp) {
  WhereSelfOp::Adaptor adaptor(operands, attributes, properties, regions);
  auto c = asRanked(adaptor.getCondition().getType());
  SmallVector<Type> value;
  if (!c || failed(inferBinary(loc, adaptor.getSelf(), adaptor.getOther(), value)))
    return failure();
  auto v = llvm::cast<RankedTensorType>(value.front());
  auto shape = broadcastShapes(c.getShape(), v.getShape());
  if (!shape)
    return emitOptionalError(loc, "condition of shape ", shapeToString(c.getShape()),
                             " does not broadcast with the values' shape ", shapeToString(v.getShape()));
  results.push_back(RankedTensorType::get(*shape, v.getElementType()));
  return success();
}

NEURON_INFER_SIGNATURE(MaskedFillScalarOp) {
  MaskedFillScalarOp::Adaptor adaptor(operands, attributes, properties, regions);
  auto a = asRanked(adaptor.getSelf().getType()), m = asRanked(adaptor.getMask().getType());
  if (!a || !m) return emitOptionalError(loc, "operands must be ranked tensors");
  auto shape = broadcastShapes(a.getShape(), m.getShape());
  if (!shape || ArrayRef<int64_t>(*shape) != a.getShape())
    return emitOptionalError(loc, "mask of shape ", shapeToString(m.getShape()),
                             " does not broadcast to self's shape ", shapeToString(a.getShape()));
  results.push_back(a);
  return success();
}

#define NEURON_SAME_INFER(OP)                                       \
  NEURON_INFER_SIGNATURE(OP) {                                      \
    OP::Adaptor adaptor(operands, attributes, properties, regions); \
    return inferSameAsOperand(loc, adaptor.getSelf(), results);     \
  }
NEURON_SAME_INFER(MulScalarOp)
NEURON_SAME_INFER(AddScalarOp)
NEURON_SAME_INFER(SubScalarOp)
NEURON_SAME_INFER(DivScalarOp)
NEURON_SAME_INFER(RsubScalarOp)
NEURON_SAME_INFER(PowTensorScalarOp)
NEURON_SAME_INFER(NegOp)
NEURON_SAME_INFER(ExpOp)
NEURON_SAME_INFER(RsqrtOp)
NEURON_SAME_INFER(SqrtOp)
NEURON_SAME_INFER(LogOp)
NEURON_SAME_INFER(TanhOp)
NEURON_SAME_INFER(SigmoidOp)
NEURON_SAME_INFER(ReluOp)
NEURON_SAME_INFER(SiluOp)
NEURON_SAME_INFER(AbsOp)
NEURON_SAME_INFER(SinOp)
NEURON_SAME_INFER(CosOp)
NEURON_SAME_INFER(AtanOp)
NEURON_SAME_INFER(ErfOp)
NEURON_SAME_INFER(Expm1Op)
NEURON_SAME_INFER(Log1pOp)
NEURON_SAME_INFER(FloorOp)
NEURON_SAME_INFER(CeilOp)
NEURON_SAME_INFER(TruncOp)
NEURON_SAME_INFER(RoundOp)
NEURON_SAME_INFER(GeluOp)

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError("approximate must be \"none\" or \"tanh\", got \"") << getApproximate() << "\"";
  return success();
}

#define NEURON_REDUCTION(OP)                                                        \
  NEURON_INFER_SIGNATURE(OP) {                                                      \
    OP::Adaptor adaptor(operands, attributes, properties, regions);                 \
    return inferReduction(loc, adaptor.getSelf(), adaptor.getDim(), adaptor.getKeepdim(), \
                          results);                                                 \
  }                                                                                 \
  /* A 0-d operand has no dim to reduce (dim 0 or -1 name the scalar itself). */    \
  SmallVector<int64_t> OP::getReducedDims() {                                       \
    if (getSelf().getType().getRank() == 0) return {};                              \
    auto dims = normalizeDims(std::nullopt, getDim(), getSelf().getType().getRank()); \
    SmallVector<int64_t> all;                                                       \
    if (succeeded(dims) && !dims->empty()) return *dims;                            \
    for (int64_t i = 0; i < getSelf().getType().getRank(); ++i) all.push_back(i);   \
    return all;                                                                     \
  }
NEURON_REDUCTION(MeanDimOp)
NEURON_REDUCTION(SumDimIntListOp)
NEURON_REDUCTION(AmaxOp)

bool isElementwise(Operation* op) {
  return llvm::isa<MulTensorOp, DivTensorOp, AddTensorOp, SubTensorOp, MaximumOp, MinimumOp, PowTensorTensorOp, MulScalarOp, DivScalarOp, AddScalarOp,
                   SubScalarOp, RsubScalarOp, PowTensorScalarOp, NegOp, ExpOp, LogOp, SqrtOp, RsqrtOp, TanhOp,
                   SigmoidOp, ReluOp, SiluOp, GeluOp, AbsOp, SinOp, CosOp, AtanOp, ErfOp, Expm1Op, Log1pOp, FloorOp, CeilOp, TruncOp, RoundOp, ToCopyOp, EqTensorOp, NeTensorOp, LtTensorOp,
                   LeTensorOp, GtTensorOp, GeTensorOp, EqScalarOp, NeScalarOp, LtScalarOp, LeScalarOp, GtScalarOp,
                   GeScalarOp, WhereSelfOp, MaskedFillScalarOp>(op);
}

SmallVector<int64_t> reducedDims(Operation* op) {
  if (auto r = llvm::dyn_cast<MeanDimOp>(op)) return r.getReducedDims();
  if (auto r = llvm::dyn_cast<SumDimIntListOp>(op)) return r.getReducedDims();
  if (auto r = llvm::dyn_cast<AmaxOp>(op)) return r.getReducedDims();
  return {};
}

#define NEURON_SOFTMAX_INFER(OP)                                                       \
  NEURON_INFER_SIGNATURE(OP) {                                                         \
    OP::Adaptor adaptor(operands, attributes, properties, regions);                    \
    auto a = asRanked(adaptor.getSelf().getType());                                    \
    if (!a) return emitOptionalError(loc, "operand must be a ranked tensor");          \
    if (failed(normalizeDims(loc, {int64_t(adaptor.getDim())}, a.getRank()))) return failure(); \
    if (adaptor.getHalfToFloat())                                                      \
      return emitOptionalError(loc, "half_to_float is not supported");                 \
    results.push_back(a);                                                              \
    return success();                                                                  \
  }
NEURON_SOFTMAX_INFER(SoftmaxOp)
NEURON_SOFTMAX_INFER(LogSoftmaxOp)

NEURON_INFER_SIGNATURE(NativeLayerNormOp) {
  NativeLayerNormOp::Adaptor adaptor(operands, attributes, properties, regions);
  auto input = asRanked(adaptor.getInput().getType());
  if (!input) return emitOptionalError(loc, "input must be a ranked tensor");
  ArrayRef<int64_t> normalized = adaptor.getNormalizedShape();
  if (normalized.empty() || int64_t(normalized.size()) > input.getRank() ||
      input.getShape().take_back(normalized.size()) != normalized)
    return emitOptionalError(loc, "normalized_shape ", shapeToString(normalized),
                             " does not match the trailing dims of input shape ",
                             shapeToString(input.getShape()));
  for (Value v : {adaptor.getWeight(), adaptor.getBias()})
    if (v && asRanked(v.getType()).getShape() != normalized)
      return emitOptionalError(loc, "weight and bias must have shape ", shapeToString(normalized));
  SmallVector<int64_t> stats(input.getShape());
  for (size_t i = 0; i < normalized.size(); ++i) stats[stats.size() - 1 - i] = 1;
  results.push_back(input);
  results.push_back(RankedTensorType::get(stats, input.getElementType()));
  results.push_back(RankedTensorType::get(stats, input.getElementType()));
  return success();
}

SmallVector<int64_t> VarMeanCorrectionOp::getReducedDims() {
  if (getSelf().getType().getRank() == 0) return {};  // a 0-d operand: nothing to reduce
  auto dims = normalizeDims(std::nullopt, getDim(), getSelf().getType().getRank());
  SmallVector<int64_t> all;
  if (succeeded(dims) && !dims->empty()) return *dims;
  for (int64_t i = 0; i < getSelf().getType().getRank(); ++i) all.push_back(i);
  return all;
}

NEURON_INFER_SIGNATURE(VarMeanCorrectionOp) {
  VarMeanCorrectionOp::Adaptor adaptor(operands, attributes, properties, regions);
  SmallVector<Type> reduced;
  if (failed(inferReduction(loc, adaptor.getSelf(), adaptor.getDim(), adaptor.getKeepdim(), reduced)))
    return failure();
  results.push_back(reduced.front());
  results.push_back(reduced.front());
  return success();
}

// Views: the result shape is the view's shape over a contiguous input.
#define NEURON_VIEW_INFER(OP, CALL)                                              \
  NEURON_INFER_SIGNATURE(OP) {                                                   \
    OP::Adaptor o(operands, attributes, properties, regions);                    \
    auto a = asRanked(o.getSelf().getType());                                    \
    if (!a) return emitOptionalError(loc, "operand must be a ranked tensor");    \
    StridedView in = contiguousView(a.getShape()), out;                          \
    std::string error;                                                           \
    if (!(CALL)) return emitOptionalError(loc, error);                           \
    results.push_back(RankedTensorType::get(out.shape, a.getElementType()));     \
    return success();                                                            \
  }
NEURON_VIEW_INFER(TransposeIntOp, viewTranspose(o.getDim0(), o.getDim1(), in, out, &error))
NEURON_VIEW_INFER(TOp, viewT(in, out, &error))
NEURON_VIEW_INFER(PermuteOp, viewPermute(o.getDims(), in, out, &error))
NEURON_VIEW_INFER(UnsqueezeOp, viewUnsqueeze(o.getDim(), in, out, &error))
NEURON_VIEW_INFER(SqueezeDimOp, viewSqueeze(o.getDim(), in, out, &error))
NEURON_VIEW_INFER(ExpandOp, viewExpand(o.getSize(), in, out, &error))
NEURON_VIEW_INFER(SliceTensorOp, viewSlice(o.getDim(), o.getStart(), o.getEnd(), o.getStep(), in, out, &error))
NEURON_VIEW_INFER(SelectIntOp, viewSelect(o.getDim(), o.getIndex(), in, out, &error))
NEURON_VIEW_INFER(ViewShapeOp, viewReshape(o.getSize(), in, out, &error))
NEURON_VIEW_INFER(UnsafeViewOp, viewReshape(o.getSize(), in, out, &error))
NEURON_VIEW_INFER(ReshapeOp, viewReshape(o.getSize(), in, out, &error))
NEURON_VIEW_INFER(ReshapeAliasOp, viewReshape(o.getSize(), in, out, &error))
NEURON_VIEW_INFER(CloneOp, (out = in, true))

LogicalResult ToCopyOp::verify() {
  if (getSelf().getType().getShape() != getResult().getType().getShape())
    return emitOpError("result shape must equal the operand's");
  auto narrow = [](Type t) {
    auto it = llvm::dyn_cast<IntegerType>(llvm::cast<ShapedType>(t).getElementType());
    return it && !it.isSignless();
  };
  auto i32 = [](Type t) { return llvm::cast<ShapedType>(t).getElementType().isSignlessInteger(32); };
  if ((narrow(getSelf().getType()) && !i32(getResult().getType())) ||
      (narrow(getResult().getType()) && !i32(getSelf().getType())))
    return emitOpError("converts a ui8, si8 or si16 graph input or output only from or to i32");
  return success();
}

NEURON_INFER_SIGNATURE(CatOp) {
  CatOp::Adaptor adaptor(operands, attributes, properties, regions);
  if (operands.empty()) return emitOptionalError(loc, "cat needs at least one tensor");
  auto first = asRanked(operands[0].getType());
  if (!first || first.getRank() == 0) return emitOptionalError(loc, "cat of 0-d tensors");
  int64_t rank = first.getRank(), dim = adaptor.getDim();
  if (dim < -rank || dim >= rank) return emitOptionalError(loc, "dim ", dim, " is out of range");
  if (dim < 0) dim += rank;
  SmallVector<int64_t> shape(first.getShape());
  Type elem = first.getElementType();
  shape[size_t(dim)] = 0;
  for (Value v : operands) {
    auto t = asRanked(v.getType());
    if (!t || t.getRank() != rank) return emitOptionalError(loc, "cat operands must have equal ranks");
    for (int64_t i = 0; i < rank; ++i)
      if (i != dim && t.getDimSize(i) != first.getDimSize(i))
        return emitOptionalError(loc, "cat operands differ in dim ", i);
    shape[size_t(dim)] += t.getDimSize(dim);
    elem = promoteElementTypes(elem, t.getElementType());
  }
  results.push_back(RankedTensorType::get(shape, elem));
  return success();
}

namespace {
LogicalResult inferMatmul(std::optional<Location> loc, Value lhs, Value rhs, int64_t batchDims,
                          SmallVectorImpl<Type>& results) {
  auto a = asRanked(lhs.getType()), b = asRanked(rhs.getType());
  if (!a || !b || a.getRank() != 2 + batchDims || b.getRank() != 2 + batchDims)
    return emitOptionalError(loc, "operands must be ", 2 + batchDims, "-d tensors");
  if (batchDims && a.getDimSize(0) != b.getDimSize(0))
    return emitOptionalError(loc, "batch sizes differ: ", a.getDimSize(0), " vs ", b.getDimSize(0));
  if (a.getShape().back() != b.getDimSize(batchDims))
    return emitOptionalError(loc, "contraction sizes differ: ", shapeToString(a.getShape()), " x ",
                             shapeToString(b.getShape()));
  SmallVector<int64_t> shape(a.getShape().drop_back());
  shape.push_back(b.getShape().back());
  results.push_back(RankedTensorType::get(shape, promoteElementTypes(a.getElementType(), b.getElementType())));
  return success();
}
}  // namespace

NEURON_INFER_SIGNATURE(EmbeddingOp) {
  EmbeddingOp::Adaptor o(operands, attributes, properties, regions);
  auto w = asRanked(o.getWeight().getType()), idx = asRanked(o.getIndices().getType());
  if (!w || !idx || w.getRank() != 2) return emitOptionalError(loc, "weight must be a 2-d tensor");
  if (isFloatType(idx.getElementType()) || idx.getElementType().isInteger(1))
    return emitOptionalError(loc, "indices must be an integer tensor");
  SmallVector<int64_t> shape(idx.getShape());
  shape.push_back(w.getDimSize(1));
  results.push_back(RankedTensorType::get(shape, w.getElementType()));
  return success();
}

NEURON_INFER_SIGNATURE(MmOp) {
  MmOp::Adaptor o(operands, attributes, properties, regions);
  return inferMatmul(loc, o.getSelf(), o.getMat2(), 0, results);
}
NEURON_INFER_SIGNATURE(BmmOp) {
  BmmOp::Adaptor o(operands, attributes, properties, regions);
  return inferMatmul(loc, o.getSelf(), o.getMat2(), 1, results);
}
// The inferred type, or its shape in f32 where the operands are bf16 or f16.
bool BmmOp::isCompatibleReturnTypes(TypeRange inferred, TypeRange actual) {
  if (inferred == actual) return true;
  if (inferred.size() != 1 || actual.size() != 1) return false;
  auto i = llvm::dyn_cast<RankedTensorType>(inferred.front());
  auto a = llvm::dyn_cast<RankedTensorType>(actual.front());
  return i && a && i.getShape() == a.getShape() && (i.getElementType().isBF16() || i.getElementType().isF16()) &&
         a.getElementType().isF32();
}
NEURON_INFER_SIGNATURE(AddmmOp) {
  AddmmOp::Adaptor o(operands, attributes, properties, regions);
  SmallVector<Type> product;
  if (failed(inferMatmul(loc, o.getMat1(), o.getMat2(), 0, product))) return failure();
  auto p = llvm::cast<RankedTensorType>(product.front());
  auto bias = asRanked(o.getSelf().getType());
  auto shape = broadcastShapes(bias.getShape(), p.getShape());
  if (!shape || ArrayRef<int64_t>(*shape) != p.getShape())
    return emitOptionalError(loc, "bias of shape ", shapeToString(bias.getShape()),
                             " does not broadcast to ", shapeToString(p.getShape()));
  results.push_back(RankedTensorType::get(p.getShape(), promoteTypes(bias, p)));
  return success();
}

NEURON_INFER_SIGNATURE(RmsNormOp) {
  RmsNormOp::Adaptor adaptor(operands, attributes, properties, regions);
  auto input = asRanked(adaptor.getInput().getType());
  if (!input) return emitOptionalError(loc, "input must be a ranked tensor");
  ArrayRef<int64_t> normalized = adaptor.getNormalizedShape();
  if (normalized.empty())
    return emitOptionalError(loc, "normalized_shape must not be empty");
  if (int64_t(normalized.size()) > input.getRank() ||
      input.getShape().take_back(normalized.size()) != normalized)
    return emitOptionalError(loc, "normalized_shape ", shapeToString(normalized),
                             " does not match the trailing dims of input shape ",
                             shapeToString(input.getShape()));
  if (Value weight = adaptor.getWeight()) {
    auto w = asRanked(weight.getType());
    if (!w || w.getShape() != normalized)
      return emitOptionalError(loc, "weight shape ", shapeToString(w ? w.getShape() : ArrayRef<int64_t>{}),
                               " must equal normalized_shape ", shapeToString(normalized));
  }
  if (auto eps = adaptor.getEps(); eps && !(eps->convertToDouble() >= 0))
    return emitOptionalError(loc, "eps must be non-negative, got ", eps->convertToDouble());
  // PyTorch computes in f32 (for bf16/f16 inputs) and casts the result back
  // to the input's dtype, whatever the weight's dtype.
  results.push_back(input);
  return success();
}

}  // namespace neuroncc::aten

#include "dialects/aten/AtenDialect.cpp.inc"
#define GET_OP_CLASSES
#include "dialects/aten/AtenOps.cpp.inc"
