#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/aten/AtenDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/aten/AtenOps.h.inc"

namespace neuroncc::aten {

// The normalized dims a reduction op (mean.dim, sum.dim_IntList, amax)
// reduces; empty for any other op.
llvm::SmallVector<int64_t> reducedDims(mlir::Operation* op);

// One result element from the operands' elements at the same (broadcast)
// index: unary math, binary and Scalar arithmetic, comparisons, where,
// masked_fill and casts.
bool isElementwise(mlir::Operation* op);

}  // namespace neuroncc::aten
