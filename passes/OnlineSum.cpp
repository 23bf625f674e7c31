//===- OnlineSum.cpp - a softmax's normalizer, chunk by chunk ---------------===//

#include "passes/OnlineSum.h"

#include "dialects/aten/AtenDialect.h"

namespace neuroncc {

using namespace mlir;

namespace {

RankedTensorType f32Tensor(Value v) {
  auto t = llvm::dyn_cast<RankedTensorType>(v.getType());
  return t && t.getRank() > 0 && t.getElementType().isF32() ? t : RankedTensorType();
}

// A reduction over the last dim of its input only.
bool reducesLastDim(Operation* op) {
  SmallVector<int64_t> dims = aten::reducedDims(op);
  auto in = llvm::dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  return in && dims.size() == 1 && dims.front() == in.getRank() - 1;
}

}  // namespace

std::optional<OnlineSum> matchOnlineSum(Operation* shifted) {
  auto sub = llvm::dyn_cast_or_null<aten::SubTensorOp>(shifted);
  if (!sub || sub.getAlpha().convertToDouble() != 1.0 || !sub->getResult(0).hasOneUse()) return std::nullopt;
  RankedTensorType t = f32Tensor(sub->getResult(0)), y = f32Tensor(sub.getSelf()), c = f32Tensor(sub.getOther());
  if (!t || !y || !c || y.getShape() != t.getShape() || t.getShape().back() <= 1) return std::nullopt;
  SmallVector<int64_t> perRow(t.getShape());
  perRow.back() = 1;
  if (c.getShape() != ArrayRef<int64_t>(perRow)) return std::nullopt;
  Operation* amax = nullptr;
  for (Operation* user : sub.getSelf().getUsers())
    if (llvm::isa<aten::AmaxOp>(user) && reducesLastDim(user) && user->getBlock() == sub->getBlock() &&
        (!amax || user->isBeforeInBlock(amax)))
      amax = user;
  if (!amax) return std::nullopt;
  auto exp = llvm::dyn_cast<aten::ExpOp>(*sub->getResult(0).getUsers().begin());
  if (!exp || !f32Tensor(exp->getResult(0)) || !exp->getResult(0).hasOneUse()) return std::nullopt;
  auto sum = llvm::dyn_cast<aten::SumDimIntListOp>(*exp->getResult(0).getUsers().begin());
  if (!sum || !reducesLastDim(sum) || !f32Tensor(sum->getResult(0))) return std::nullopt;
  return OnlineSum{sub.getSelf(), amax, sub, exp, sum};
}

std::optional<OnlineSum> onlineSumOf(Operation* op) {
  if (llvm::isa_and_nonnull<aten::ExpOp>(op)) op = op->getOperand(0).getDefiningOp();
  return matchOnlineSum(op);
}

}  // namespace neuroncc
