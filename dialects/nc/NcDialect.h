#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/nc/NcDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/nc/NcOps.h.inc"

namespace neuroncc::nc {

// Memory space of SBUF tiles (rank-2 memrefs, partitions x elements).
inline constexpr unsigned kSbufMemorySpace = 1;
inline constexpr int64_t kNumPartitions = 128;

bool isSbufTile(mlir::Type type);

}  // namespace neuroncc::nc
