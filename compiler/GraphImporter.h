// Import of the ATen graph interchange format (compiler/graph/aten_graph.proto)
// into a module holding one func.func @main of aten ops.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace neuroncc {

// `bytes` is a serialized Graph (binary when `text` is false, else protobuf
// text format). Diagnostics go to the context's handler, located at
// "file:node". Every unsupported operator is reported in one error that
// lists each with its number of uses and its first node.
// `*unsupportedOps` (when given) is set when the failure is unsupported
// operators, so drivers can report it under its own error code.
mlir::OwningOpRef<mlir::ModuleOp> importAtenGraph(std::string_view bytes, bool text,
                                                  const std::string& filename,
                                                  mlir::MLIRContext& context,
                                                  bool* unsupportedOps = nullptr);

// The ATen overloads the importer accepts, sorted ("aten::mul.Tensor", ...).
std::vector<std::string> supportedAtenOperators();

}  // namespace neuroncc
