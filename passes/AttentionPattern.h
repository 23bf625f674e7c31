//===- AttentionPattern.h - softmax(f(Q @ K)) @ V in ATen ops --------------===//
//
// The ops of one attention, as FormKernels groups them into one kernel and
// LowerAttention.cpp lowers that kernel:
//
//   s = bmm(Q [B, S, D], K [B, D, T])          the scores
//   r = view(s) as [L..., S, T]                 (optional; prod(L) == B)
//   x = f(r)                                    elementwise ops, one operand on
//                                               the chain, the others from outside
//                                               (scale, mask, bias, casts)
//   m = amax(x, -1, keepdim); e = exp(x - m)
//   p = e / sum(e, -1, keepdim)                 a decomposed softmax
//   q = casts(p); v3 = view(q) as [B, S, T]
//   o = bmm(v3, V [B, T, Dv])                   the result
//
// Every intermediate value is used only by the next op of the pattern, so
// none of them needs to exist outside the kernel.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <optional>

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

namespace neuroncc {

struct AttentionMatch {
  mlir::Operation* scores = nullptr;            // bmm(Q, K)
  llvm::SmallVector<mlir::Operation*> scoreViews;  // s -> r
  llvm::SmallVector<mlir::Operation*> transforms;  // r -> x, in order
  mlir::Operation *rowMax = nullptr, *shifted = nullptr, *exp = nullptr, *rowSum = nullptr,
                  *normalized = nullptr;
  llvm::SmallVector<mlir::Operation*> casts;       // p -> q
  llvm::SmallVector<mlir::Operation*> probViews;   // q -> v3
  mlir::Operation* output = nullptr;            // bmm(v3, V)

  mlir::Value query() const { return scores->getOperand(0); }
  mlir::Value key() const { return scores->getOperand(1); }
  mlir::Value value() const { return output->getOperand(1); }
  // r: the scores in the softmax's shape.
  mlir::Value shapedScores() const;
  // x: what the softmax reads.
  mlir::Value softmaxInput() const;
  // Every op of the pattern.
  llvm::SmallVector<mlir::Operation*> ops() const;
};

// The attention whose result is `output` (an aten.bmm), if it is one.
std::optional<AttentionMatch> matchAttention(mlir::Operation* output);

}  // namespace neuroncc
