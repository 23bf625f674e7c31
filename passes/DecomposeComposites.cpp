#include "passes/Passes.h"
#include "mlir/IR/Builders.h"

namespace neuroncc {
#define GEN_PASS_DEF_DECOMPOSECOMPOSITES
#include "passes/Passes.h.inc"
}  // namespace neuroncc

using namespace mlir;

namespace neuroncc {
namespace {

// PyTorch's default rms_norm eps is the input dtype's machine epsilon.
double defaultEps(Type elem) {
  if (elem.isBF16()) return 0.0078125;         // 2^-7
  if (elem.isF16()) return 0.0009765625;       // 2^-10
  return 1.1920928955078125e-07;               // 2^-23
}

struct DecomposeCompositesPass
    : impl::DecomposeCompositesBase<DecomposeCompositesPass> {
  using DecomposeCompositesBase::DecomposeCompositesBase;

  void runOnOperation() override {
    int64_t next_id = 0;
    getOperation().walk([&](Operation* op) {
      if (auto id = op->getAttrOfType<IntegerAttr>(kSourceIdAttr))
        next_id = std::max(next_id, id.getInt() + 1);
    });
    SmallVector<aten::RmsNormOp> norms;
    getOperation().walk([&](aten::RmsNormOp op) { norms.push_back(op); });
    if (llvm::is_contained(legalOps, std::string("aten.rms_norm"))) return;
    for (aten::RmsNormOp op : norms) {
      decomposeRmsNorm(op, next_id++);
      ++numDecomposed;
    }
  }

  void decomposeRmsNorm(aten::RmsNormOp op, int64_t id) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    auto input = op.getInput();
    auto in_type = llvm::cast<RankedTensorType>(input.getType());
    SmallVector<int64_t> dims;
    for (size_t i = 0; i < op.getNormalizedShape().size(); ++i)
      dims.push_back(in_type.getRank() - 1 - int64_t(i));
    llvm::sort(dims);
    double eps = op.getEps() ? op.getEps()->convertToDouble() : defaultEps(in_type.getElementType());

    SmallVector<Operation*> created;
    auto track = [&](Operation* o) { created.push_back(o); return o->getResult(0); };
    Value sq = track(b.create<aten::MulTensorOp>(loc, input, input));
    Value mean = track(b.create<aten::MeanDimOp>(loc, sq, b.getDenseI64ArrayAttr(dims),
                                                 b.getBoolAttr(true)));
    Value shifted = track(b.create<aten::AddScalarOp>(loc, mean, b.getF64FloatAttr(eps),
                                                      b.getF64FloatAttr(1.0)));
    Value inv = track(b.create<aten::RsqrtOp>(loc, shifted));
    Value normed = track(b.create<aten::MulTensorOp>(loc, input, inv));
    if (Value weight = op.getWeight()) normed = track(b.create<aten::MulTensorOp>(loc, normed, weight));
    for (Operation* o : created) {
      o->setAttr(kSourceAttr, b.getStringAttr("aten.rms_norm"));
      o->setAttr(kSourceIdAttr, b.getI64IntegerAttr(id));
    }
    op.getResult().replaceAllUsesWith(normed);
    op.erase();
  }
};

}  // namespace
}  // namespace neuroncc
