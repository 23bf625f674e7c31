//===- AttentionPattern.cpp - softmax(f(Q @ K)) @ V in ATen ops ------------===//

#include "passes/AttentionPattern.h"

#include <functional>

#include "dialects/aten/AtenDialect.h"
#include "dialects/aten/TypeRules.h"
#include "dialects/aten/Views.h"

namespace neuroncc {

using namespace mlir;

namespace {

ArrayRef<int64_t> shapeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()).getShape(); }

// A reduction over the last dim only, keeping it.
bool lastDimKeepdim(Operation* op) {
  SmallVector<int64_t> dims = aten::reducedDims(op);
  int64_t rank = int64_t(shapeOf(op->getOperand(0)).size());
  auto keep = op->getAttrOfType<BoolAttr>("keepdim");
  return dims.size() == 1 && dims.front() == rank - 1 && keep && keep.getValue();
}

// `views` (in order, from a value of shape `from`) only regroup leading
// dims of a contiguous tensor: the last two dims stay, and element order is
// row-major throughout.
bool regroupsLeadingDims(ArrayRef<int64_t> from, ArrayRef<Operation*> views) {
  aten::StridedView v = aten::contiguousView(from);
  for (Operation* op : views) {
    aten::StridedView next;
    std::string error;
    if (!aten::applyView(op, v, next, &error)) return false;
    v = next;
  }
  if (v.shape.size() < 2 || from.size() < 2 || !aten::isContiguous(v) || v.offset != 0) return false;
  return v.shape.back() == from.back() && v.shape[v.shape.size() - 2] == from[from.size() - 2];
}

// Walks from `v` up through view ops whose results have one use (`v` itself
// may have more); returns the value above them.
Value viewsAbove(Value v, SmallVectorImpl<Operation*>& views) {
  Value start = v;
  while (Operation* def = v.getDefiningOp()) {
    if (!aten::isViewOp(def) || (v != start && !v.hasOneUse())) break;
    views.push_back(def);
    v = def->getOperand(0);
  }
  std::reverse(views.begin(), views.end());
  return v;
}

}  // namespace

Value AttentionMatch::shapedScores() const {
  return scoreViews.empty() ? scores->getResult(0) : scoreViews.back()->getResult(0);
}

Value AttentionMatch::softmaxInput() const {
  return transforms.empty() ? shapedScores() : transforms.back()->getResult(0);
}

SmallVector<Operation*> AttentionMatch::ops() const {
  SmallVector<Operation*> all{scores};
  all.append(scoreViews.begin(), scoreViews.end());
  all.append(transforms.begin(), transforms.end());
  all.append({rowMax, shifted, exp, rowSum, normalized});
  all.append(casts.begin(), casts.end());
  all.append(probViews.begin(), probViews.end());
  all.push_back(output);
  return all;
}

std::optional<AttentionMatch> matchAttention(Operation* output) {
  AttentionMatch m;
  if (!llvm::isa_and_nonnull<aten::BmmOp>(output)) return std::nullopt;
  m.output = output;
  // Probabilities: views of casts of e / sum(e).
  Value probs = viewsAbove(output->getOperand(0), m.probViews);
  if (!probs.hasOneUse()) return std::nullopt;
  while (auto cast = probs.getDefiningOp<aten::ToCopyOp>()) {
    if (!cast->getResult(0).hasOneUse() || !aten::isFloatType(cast.getType().getElementType()) ||
        !aten::isFloatType(llvm::cast<RankedTensorType>(cast.getSelf().getType()).getElementType()))
      return std::nullopt;
    m.casts.insert(m.casts.begin(), cast);
    probs = cast.getSelf();
  }
  auto div = probs.getDefiningOp<aten::DivTensorOp>();
  if (!div || !div->getResult(0).hasOneUse()) return std::nullopt;
  auto sum = div.getOther().getDefiningOp<aten::SumDimIntListOp>();
  auto exp = div.getSelf().getDefiningOp<aten::ExpOp>();
  if (!sum || !exp || sum.getSelf() != exp.getResult() || !lastDimKeepdim(sum) ||
      !sum->getResult(0).hasOneUse())
    return std::nullopt;
  if (llvm::any_of(exp->getUsers(), [&](Operation* u) { return u != div && u != sum; }) ||
      std::distance(exp->getUsers().begin(), exp->getUsers().end()) != 2)
    return std::nullopt;
  auto sub = exp.getSelf().getDefiningOp<aten::SubTensorOp>();
  if (!sub || !sub->getResult(0).hasOneUse() || sub.getAlpha().convertToDouble() != 1.0) return std::nullopt;
  auto amax = sub.getOther().getDefiningOp<aten::AmaxOp>();
  Value x = sub.getSelf();
  if (!amax || amax.getSelf() != x || !lastDimKeepdim(amax) || !amax->getResult(0).hasOneUse())
    return std::nullopt;
  if (llvm::any_of(x.getUsers(), [&](Operation* u) { return u != sub && u != amax; }) ||
      std::distance(x.getUsers().begin(), x.getUsers().end()) != 2)
    return std::nullopt;
  m.rowMax = amax;
  m.shifted = sub;
  m.exp = exp;
  m.rowSum = sum;
  m.normalized = div;
  auto shape = shapeOf(x);
  if (shapeOf(probs) != shape || !aten::isFloatType(llvm::cast<RankedTensorType>(x.getType()).getElementType()))
    return std::nullopt;
  // Elementwise ops on the scores, each with the scores as one operand and
  // their shape as its result's; the scores, through views regrouping
  // their batch dims, come from a bmm. Tried operand by operand: a side
  // operand may be computed too.
  std::function<bool(Value, bool)> chain = [&](Value v, bool top) -> bool {
    if (!top && !v.hasOneUse()) return false;
    SmallVector<Operation*> views;
    Value root = viewsAbove(v, views);
    if (auto bmm = root.getDefiningOp<aten::BmmOp>(); bmm && ((top && views.empty()) || root.hasOneUse())) {
      m.scores = bmm;
      m.scoreViews = views;
      return true;
    }
    Operation* def = v.getDefiningOp();
    if (!def || !aten::isElementwise(def) || shapeOf(def->getResult(0)) != shape) return false;
    for (Value operand : def->getOperands())
      if (shapeOf(operand) == shape && chain(operand, false)) {
        m.transforms.push_back(def);
        return true;
      }
    return false;
  };
  if (!chain(x, true)) return std::nullopt;
  auto qk = llvm::cast<aten::BmmOp>(m.scores);
  Value scores = qk.getResult();
  if (shapeOf(m.shapedScores()) != shape) return std::nullopt;
  // Shapes: Q [B, S, D], K [B, D, T], V [B, T, Dv]; the views only regroup B.
  ArrayRef<int64_t> q = shapeOf(qk.getSelf()), k = shapeOf(qk.getMat2()), vv = shapeOf(m.value());
  ArrayRef<int64_t> pv = shapeOf(output->getOperand(0));
  if (q.size() != 3 || k.size() != 3 || vv.size() != 3 || pv.size() != 3) return std::nullopt;
  if (pv[0] != q[0] || pv[1] != q[1] || pv[2] != k[2] || vv[1] != k[2] || shape.size() < 2 ||
      shape[shape.size() - 2] != q[1] || shape.back() != k[2])
    return std::nullopt;
  if (!regroupsLeadingDims(shapeOf(scores), m.scoreViews) || !regroupsLeadingDims(shape, m.probViews))
    return std::nullopt;
  if (q[1] == 0 || k[2] == 0 || q[2] == 0 || vv[2] == 0 || q[0] == 0) return std::nullopt;
  return m;
}

}  // namespace neuroncc
