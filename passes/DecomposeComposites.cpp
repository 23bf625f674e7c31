#include "passes/Passes.h"
#include "dialects/aten/Views.h"
#include "mlir/IR/Builders.h"

namespace neuroncc {
#define GEN_PASS_DEF_DECOMPOSECOMPOSITES
#include "passes/Passes.h.inc"
}  // namespace neuroncc

using namespace mlir;

namespace neuroncc {
namespace {

// PyTorch's rms_norm computes bf16 and f16 inputs in f32 and, without an
// eps, uses the machine epsilon of that f32 computation (2^-23), not the
// input dtype's (aten/src/ATen/native/layer_norm.cpp, rms_norm_composite:
// eps.value_or(std::numeric_limits<float>::epsilon())).
constexpr double kDefaultRmsNormEps = 1.1920928955078125e-07;  // 2^-23

struct DecomposeCompositesPass
    : impl::DecomposeCompositesBase<DecomposeCompositesPass> {
  using DecomposeCompositesBase::DecomposeCompositesBase;

  void runOnOperation() override {
    dropIdentitySlices();
    int64_t next_id = 0;
    getOperation().walk([&](Operation* op) {
      if (auto id = op->getAttrOfType<IntegerAttr>(kSourceIdAttr))
        next_id = std::max(next_id, id.getInt() + 1);
    });
    SmallVector<Operation*> composites;
    getOperation().walk([&](Operation* op) {
      if ((llvm::isa<aten::RmsNormOp, aten::SoftmaxOp, aten::LogSoftmaxOp, aten::NativeLayerNormOp,
                     aten::VarMeanCorrectionOp>(op) ||
           isMatVec(op) || isOuterProduct(op)) &&
          !llvm::is_contained(legalOps, op->getName().getStringRef().str()))
        composites.push_back(op);
    });
    for (Operation* op : composites) {
      Expansion x(op, next_id++);
      SmallVector<Value> results;
      if (auto o = llvm::dyn_cast<aten::RmsNormOp>(op)) results = decomposeRmsNorm(x, o);
      else if (auto o = llvm::dyn_cast<aten::SoftmaxOp>(op)) results = decomposeSoftmax(x, o.getSelf(), o.getDim(), false);
      else if (auto o = llvm::dyn_cast<aten::LogSoftmaxOp>(op)) results = decomposeSoftmax(x, o.getSelf(), o.getDim(), true);
      else if (auto o = llvm::dyn_cast<aten::NativeLayerNormOp>(op)) results = decomposeLayerNorm(x, o);
      else if (auto o = llvm::dyn_cast<aten::VarMeanCorrectionOp>(op)) results = decomposeVarMean(x, o);
      else if (isOuterProduct(op)) results = decomposeOuterProduct(x, op);
      else results = decomposeMatVec(x, op);
      x.finish(results);
      ++numDecomposed;
    }
  }

  // `x[:, a:]` of a matrix traces to a slice of all of dim 0 and then the
  // slice of dim 1. The first is x itself; readers take x, so that patterns
  // that look at what a slice slices (rotate_half's halves of a row that
  // the kernel holds) see it. A returned one stays (the return's copy).
  void dropIdentitySlices() {
    SmallVector<aten::SliceTensorOp> identities;
    // (A step-1 slice as large as its input keeps every element in order.)
    getOperation().walk([&](aten::SliceTensorOp op) {
      if (op.getType() == op.getSelf().getType() && op.getStep() == 1) identities.push_back(op);
    });
    for (aten::SliceTensorOp op : identities) {
      op.getResult().replaceUsesWithIf(op.getSelf(),
                                       [](OpOperand& use) { return !llvm::isa<func::ReturnOp>(use.getOwner()); });
      if (op->use_empty()) op->erase();
    }
  }

  // Builds the ops one composite expands into and tags each with its source.
  struct Expansion {
    Expansion(Operation* op, int64_t id) : op(op), b(op), loc(op->getLoc()), id(id) {}
    template <typename OpTy, typename... Args>
    Value make(Args&&... args) {
      Operation* o = b.create<OpTy>(loc, std::forward<Args>(args)...);
      o->setAttr(kSourceAttr, b.getStringAttr(op->getName().getStringRef()));
      o->setAttr(kSourceIdAttr, b.getI64IntegerAttr(id));
      return o->getResult(0);
    }
    Value reduce(StringRef kind, Value v, ArrayRef<int64_t> dims, bool keepdim) {
      auto d = b.getDenseI64ArrayAttr(dims);
      auto k = b.getBoolAttr(keepdim);
      if (kind == "mean") return make<aten::MeanDimOp>(v, d, k);
      if (kind == "sum") return make<aten::SumDimIntListOp>(v, d, k);
      return make<aten::AmaxOp>(v, d, k);
    }
    FloatAttr f64(double v) { return b.getF64FloatAttr(v); }
    // bf16 and f16 composites compute in f32, as PyTorch's CPU kernels do
    // (their opmath type): a variance over many elements or an rstd of
    // 1/sqrt(1e-12) would overflow f16 and lose bits in bf16.
    Value widen(Value v) {
      auto t = llvm::cast<RankedTensorType>(v.getType());
      if (!t.getElementType().isBF16() && !t.getElementType().isF16()) return v;
      return make<aten::ToCopyOp>(t.clone(b.getF32Type()), v);
    }
    // Results go back to the composite's own result types.
    void finish(ArrayRef<Value> results) {
      for (auto [from, to] : llvm::zip(op->getResults(), results)) {
        Value v = to;
        if (v.getType() != from.getType()) v = make<aten::ToCopyOp>(from.getType(), v);
        from.replaceAllUsesWith(v);
      }
      op->erase();
    }
    Operation* op;
    OpBuilder b;
    Location loc;
    int64_t id;
  };

  // A matrix times a single column (nn.Linear(k, 1), a score or value head,
  // `mm` of [m, k] by [k, 1], `bmm` likewise per batch) is a product with
  // the column broadcast along the rows and a sum over k: an elementwise
  // and reduction kernel that reads the matrix in its own row-major layout,
  // where the TensorEngine would first transpose all of it to put k on the
  // partitions, for one output column per matmul (mm 4096 x 4096 x 1:
  // 419.0 us against an HBM bound of 81.9). Only where the matrix's rows
  // are its last dim in memory (no transposing view before it: a
  // transposed matrix is what the TensorEngine reads directly).
  static bool isMatVec(Operation* op) {
    if (!llvm::isa<aten::MmOp, aten::AddmmOp, aten::BmmOp>(op)) return false;
    unsigned lhs = llvm::isa<aten::AddmmOp>(op) ? 1 : 0;
    auto at = llvm::cast<RankedTensorType>(op->getOperand(lhs).getType());
    auto bt = llvm::cast<RankedTensorType>(op->getOperand(lhs + 1).getType());
    if (bt.getShape().back() != 1 || at.getShape().back() < 2) return false;
    for (Value v = op->getOperand(lhs); Operation* def = v.getDefiningOp(); v = def->getOperand(0)) {
      if (!aten::isViewOp(def)) break;
      if (!aten::isRowPreservingReshape(def)) return false;
    }
    return true;
  }

  // sum(a * b laid along the rows, -1), in f32 as PyTorch's CPU matmul
  // accumulates bf16 and f16; addmm then scales by alpha and adds beta times
  // its input (left out when beta is 0, as PyTorch does, NaN included).
  SmallVector<Value> decomposeMatVec(Expansion& x, Operation* op) {
    unsigned lhs = llvm::isa<aten::AddmmOp>(op) ? 1 : 0;
    Value a = op->getOperand(lhs), b = op->getOperand(lhs + 1);
    auto bt = llvm::cast<RankedTensorType>(b.getType());
    // [k, 1] -> [k]; [B, k, 1] -> [B, 1, k] (the same elements in order).
    SmallVector<int64_t> rowShape(bt.getShape());
    rowShape.back() = rowShape[rowShape.size() - 2];
    rowShape[rowShape.size() - 2] = 1;
    if (bt.getRank() == 2) rowShape.erase(rowShape.begin());
    Value row = x.make<aten::ReshapeOp>(bt.clone(rowShape), b, x.b.getDenseI64ArrayAttr(rowShape));
    // (The column is not cast itself: f32 times bf16 is f32, computed from
    // the exact f32 value of each bf16 element, and a cast of the column
    // alone would be a kernel of its own, its rows not the matrix's.)
    Value product = x.make<aten::MulTensorOp>(x.widen(a), row);
    int64_t rank = llvm::cast<RankedTensorType>(a.getType()).getRank();
    return {addmmTail(x, op, x.reduce("sum", product, {rank - 1}, true))};
  }

  // addmm's alpha and beta around the product.
  static Value addmmTail(Expansion& x, Operation* op, Value product) {
    auto addmm = llvm::dyn_cast<aten::AddmmOp>(op);
    if (!addmm) return product;
    if (addmm.getAlpha().convertToDouble() != 1.0) product = x.make<aten::MulScalarOp>(product, addmm.getAlphaAttr());
    if (addmm.getBeta().convertToDouble() != 0.0)
      product = x.make<aten::AddTensorOp>(product, addmm.getSelf(), addmm.getBetaAttr());
    return product;
  }

  // A matrix product over a contraction of one (`mm` of [m, 1] by [1, n],
  // `bmm` likewise per batch: an outer product, as HF's rotary tables and
  // `x[..., None] @ y[..., None, :]` make) is each element's one product:
  // an elementwise multiply of the column by the row, broadcast, which
  // rounds as the matmul does. The TensorEngine would contract over one
  // partition, a matmul per batch and row tile ([256, 256, 1] x [256, 1,
  // 33]: 512 matmuls, 248.3 us; as a multiply 36.9).
  static bool isOuterProduct(Operation* op) {
    if (!llvm::isa<aten::MmOp, aten::AddmmOp, aten::BmmOp>(op)) return false;
    unsigned lhs = llvm::isa<aten::AddmmOp>(op) ? 1 : 0;
    return llvm::cast<RankedTensorType>(op->getOperand(lhs).getType()).getShape().back() == 1;
  }

  // (addmm's scale and sum in f32 for bf16 and f16, then rounded once; a
  // bmm with an f32 result of bf16 or f16 operands, baddbmm's, keeps its
  // products in f32 as well.)
  SmallVector<Value> decomposeOuterProduct(Expansion& x, Operation* op) {
    const bool addmm = llvm::isa<aten::AddmmOp>(op);
    Value a = op->getOperand(addmm ? 1 : 0), b = op->getOperand(addmm ? 2 : 1);
    const bool wider = llvm::cast<RankedTensorType>(op->getResult(0).getType()).getElementType() !=
                       llvm::cast<RankedTensorType>(a.getType()).getElementType();
    return {addmmTail(x, op, x.make<aten::MulTensorOp>(addmm || wider ? x.widen(a) : a, b))};
  }

  static SmallVector<int64_t> trailingDims(Value input, size_t count) {
    int64_t rank = llvm::cast<RankedTensorType>(input.getType()).getRank();
    SmallVector<int64_t> dims;
    for (size_t i = 0; i < count; ++i) dims.push_back(rank - int64_t(count) + int64_t(i));
    return dims;
  }

  // In f32 for bf16/f16 inputs (the weight multiplies the f32 value), then
  // cast back to the input's dtype, as PyTorch does.
  SmallVector<Value> decomposeRmsNorm(Expansion& x, aten::RmsNormOp op) {
    Value input = op.getInput();
    auto inType = llvm::cast<RankedTensorType>(input.getType());
    SmallVector<int64_t> dims = trailingDims(input, op.getNormalizedShape().size());
    double eps = op.getEps() ? op.getEps()->convertToDouble() : kDefaultRmsNormEps;
    Value wide = x.widen(input);
    Value sq = x.make<aten::MulTensorOp>(wide, wide);
    Value mean = x.reduce("mean", sq, dims, true);
    Value shifted = x.make<aten::AddScalarOp>(mean, x.f64(eps), x.f64(1.0));
    Value inv = x.make<aten::RsqrtOp>(shifted);
    Value normed = x.make<aten::MulTensorOp>(wide, inv);
    if (Value weight = op.getWeight()) normed = x.make<aten::MulTensorOp>(normed, weight);
    return {normed};
  }

  // softmax: exp(x - max) / sum(exp(x - max)); log_softmax: (x - max) - log(sum(...)).
  SmallVector<Value> decomposeSoftmax(Expansion& x, Value input, int64_t dim, bool log) {
    input = x.widen(input);
    Value m = x.reduce("max", input, {dim}, true);
    Value shifted = x.make<aten::SubTensorOp>(input, m, x.f64(1.0));
    Value e = x.make<aten::ExpOp>(shifted);
    Value s = x.reduce("sum", e, {dim}, true);
    if (!log) return {x.make<aten::DivTensorOp>(e, s)};
    return {x.make<aten::SubTensorOp>(shifted, x.make<aten::LogOp>(s), x.f64(1.0))};
  }

  SmallVector<Value> decomposeLayerNorm(Expansion& x, aten::NativeLayerNormOp op) {
    Value input = x.widen(op.getInput());
    SmallVector<int64_t> dims = trailingDims(input, op.getNormalizedShape().size());
    Value mean = x.reduce("mean", input, dims, true);
    Value centered = x.make<aten::SubTensorOp>(input, mean, x.f64(1.0));
    Value var = x.reduce("mean", x.make<aten::MulTensorOp>(centered, centered), dims, true);
    Value rstd = x.make<aten::RsqrtOp>(x.make<aten::AddScalarOp>(var, op.getEpsAttr(), x.f64(1.0)));
    Value out = x.make<aten::MulTensorOp>(centered, rstd);
    if (Value w = op.getWeight()) out = x.make<aten::MulTensorOp>(out, w);
    if (Value b = op.getBias()) out = x.make<aten::AddTensorOp>(out, b, x.f64(1.0));
    return {out, mean, rstd};
  }

  SmallVector<Value> decomposeVarMean(Expansion& x, aten::VarMeanCorrectionOp op) {
    Value input = x.widen(op.getSelf());
    SmallVector<int64_t> dims = op.getReducedDims();
    auto inType = llvm::cast<RankedTensorType>(input.getType());
    int64_t n = 1;
    for (int64_t d : dims) n *= inType.getDimSize(d);
    Value meanKeep = x.reduce("mean", input, dims, true);
    Value centered = x.make<aten::SubTensorOp>(input, meanKeep, x.f64(1.0));
    Value ss = x.reduce("sum", x.make<aten::MulTensorOp>(centered, centered), dims, op.getKeepdim());
    // PyTorch divides by max(0, N - correction): 0/0 gives NaN, as here.
    double divisor = std::max<double>(0.0, double(n - int64_t(op.getCorrection())));
    Value var = x.make<aten::DivScalarOp>(ss, x.f64(divisor));
    Value mean = op.getKeepdim() ? meanKeep : x.reduce("mean", input, dims, false);
    return {var, mean};
  }
};

}  // namespace
}  // namespace neuroncc
