//===- VerifyIr.cpp - the IR check between passes -------------------------===//

#include "passes/Passes.h"
#include "mlir/IR/Verifier.h"

namespace neuroncc {
#define GEN_PASS_DEF_VERIFYIR
#include "passes/Passes.h.inc"
}  // namespace neuroncc

using namespace mlir;

namespace neuroncc {
namespace {

struct VerifyIrPass : impl::VerifyIrBase<VerifyIrPass> {
  using VerifyIrBase::VerifyIrBase;
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (succeeded(mlir::verify(func))) return;
    func.emitError() << "internal compiler error: the IR after pass '" << after
                     << "' is inconsistent (the error above names the op and its node)";
    func->setAttr(kInternalErrorAttr, UnitAttr::get(func.getContext()));
    signalPassFailure();
  }
};

}  // namespace
}  // namespace neuroncc
