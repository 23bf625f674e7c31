// The compiler driver as a library: import a graph, run the pipeline, emit a NEFF.
#pragma once

#include <string>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "passes/Passes.h"

namespace neuroncc {

// Reads a graph file; the format follows the extension: .mlir (the aten
// dialect), .pb (binary ATen graph protobuf), .pbtxt (its text format).
// Diagnostics go to the context's handler; null on failure, with
// `*unsupportedOps` set when the graph uses operators we lack.
mlir::OwningOpRef<mlir::ModuleOp> importGraph(const std::string& path, mlir::MLIRContext& context,
                                              bool* unsupportedOps = nullptr);

// Runs the whole pipeline, honouring MLIR's pass-manager command-line flags
// (--mlir-print-ir-after-all, --mlir-timing, ...) when they were registered.
mlir::LogicalResult compileModule(mlir::ModuleOp module, const PipelineOptions& options);

}  // namespace neuroncc
