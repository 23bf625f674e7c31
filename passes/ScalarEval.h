// The value of an elementwise aten op at one element, in double precision:
// shared by constant folding and by the lowering of ops whose operands are
// all immediates.
#pragma once

#include <functional>
#include <optional>

#include "mlir/IR/Operation.h"

namespace neuroncc {

// The function from the op's tensor operands' elements (in operand order) to
// its result element; std::nullopt if the op is not elementwise.
std::optional<std::function<double(llvm::ArrayRef<double>)>> scalarFunction(mlir::Operation* op);

}  // namespace neuroncc
