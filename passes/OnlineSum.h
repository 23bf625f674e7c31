//===- OnlineSum.h - a softmax's normalizer, chunk by chunk -----------------===//
//
// The normalizer of a softmax, log-softmax or logsumexp, as FormKernels keeps
// it in the kernel of its row maximum and LowerToIsa.cpp lowers it chunk by
// chunk:
//
//   m = amax(y, -1)               (any keepdim; y's row maximum)
//   t = y - c                     (alpha 1; t has one use; c per row [..., 1],
//                                  computed from m or other reductions)
//   e = exp(t)                    (e has one use)
//   s = sum(e, -1)
//
// all in f32. The exponentials need c, known only once the whole row has
// been reduced, so a row too long to stay whole in SBUF would otherwise take
// three kernels (maximum, sum, result). Chunk by chunk, the lowering sums
// exp(y - r) against a running reference r (the running maximum clamped to
// the finite floats), rescaling the sum by exp(r_old - r_new) whenever r
// grows (the online normalizer of Milakov and Gimelshein, 2018), and at the
// end multiplies by exp(r - c): sum(exp(y - c)) up to f32 rounding. The
// clamp keeps chunks of -inf from giving -inf - -inf = NaN, and gives what
// eager gives for infinite maxima: NaN for c = m = +-inf (0 * inf or
// inf * 0), +inf for a +inf element under a finite c (logsumexp's masked
// maximum), 0 for a row of -inf under a finite c.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <optional>

#include "mlir/IR/Operation.h"

namespace neuroncc {

struct OnlineSum {
  mlir::Value input;  // y
  mlir::Operation *rowMax = nullptr, *shifted = nullptr, *exp = nullptr, *rowSum = nullptr;
  mlir::Value shift() const { return shifted->getOperand(1); }  // c
};

// The pattern whose `t = y - m` is `shifted`, if it is one.
std::optional<OnlineSum> matchOnlineSum(mlir::Operation* shifted);
// The pattern that `op` (its subtraction or its exp) belongs to.
std::optional<OnlineSum> onlineSumOf(mlir::Operation* op);

}  // namespace neuroncc
