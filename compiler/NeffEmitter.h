#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "mlir/IR/BuiltinOps.h"

namespace neuroncc {

struct EmitOptions {
  std::string target = "trn1";
  std::string optLevel = "O2";
  std::string name = "model";
};

// Serializes a fully scheduled module (one function of lowered nc.kernel ops)
// into NEFF bytes. Deterministic: the output depends only on the IR.
absl::StatusOr<std::string> emitNeff(mlir::ModuleOp module, const EmitOptions& options);

}  // namespace neuroncc
