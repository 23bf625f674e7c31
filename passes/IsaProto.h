// Translation of one nc ISA op into the NEFF instruction record. The
// scheduler uses it to price instructions with the shared device model, the
// NEFF emitter to serialize them, so both see the same encoding.
#pragma once

#include "llvm/ADT/STLFunctionalExtras.h"
#include "mlir/IR/Operation.h"
#include "neff.pb.h"

namespace neuroncc {

bool isIsaInstruction(mlir::Operation* op);

// `tensorIdOf` maps an HBM memref (a kernel block argument) to the NEFF
// tensor index it is bound to.
neff::Instruction toProtoInstruction(mlir::Operation* op,
                                     llvm::function_ref<uint32_t(mlir::Value)> tensorIdOf);

neff::Engine engineFromName(llvm::StringRef name);
neff::DType dtypeOf(mlir::Type elem);

}  // namespace neuroncc
