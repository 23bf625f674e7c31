// PyTorch's broadcasting and type-promotion rules, shared by the aten ops'
// result-type inference and by passes that build new ops.
#pragma once

#include <optional>
#include <string>

#include "mlir/IR/BuiltinTypes.h"

namespace neuroncc::aten {

// Right-aligned broadcast of two shapes; std::nullopt if incompatible.
std::optional<llvm::SmallVector<int64_t>> broadcastShapes(llvm::ArrayRef<int64_t> a,
                                                          llvm::ArrayRef<int64_t> b);

// torch.result_type for two tensor operands. Categories bool < integer <
// float; operands with dimensions outrank 0-d tensors of the same category;
// within a category, bf16 with f16 promotes to f32 and otherwise the wider
// type wins.
mlir::Type promoteTypes(mlir::RankedTensorType a, mlir::RankedTensorType b);
mlir::Type promoteElementTypes(mlir::Type a, mlir::Type b);

// Result dtype of a tensor combined with a Python number: a float scalar
// makes a bool or integer tensor's result the default float dtype (f32).
mlir::Type promoteWithScalar(mlir::Type tensorElem, bool scalarIsFloat);

bool isFloatType(mlir::Type t);

std::string shapeToString(llvm::ArrayRef<int64_t> shape);

}  // namespace neuroncc::aten
