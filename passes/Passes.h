#pragma once

#include <memory>
#include <string>

#include "dialects/aten/AtenDialect.h"
#include "dialects/nc/NcDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "passes/OffsetPlanner.h"

namespace neuroncc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

inline constexpr const char kInternalErrorAttr[] = "nc.internal_error";

struct PipelineOptions {
  int optLevel = 2;           // 0: one kernel per source op; 1, 2: fuse
  std::string target = "trn1";
  bool fusionReport = false;
};

// The whole compiler pipeline, from aten ops to a scheduled ISA program. Built
// here once so that neuron-cc and neuron-opt run the same passes.
void buildPipeline(mlir::OpPassManager& pm, const PipelineOptions& options);
void registerPipelines();
void registerDialects(mlir::DialectRegistry& registry);

// Attribute names shared between passes and the NEFF emitter.
inline constexpr const char kSourceAttr[] = "nc.source";
inline constexpr const char kSourceIdAttr[] = "nc.source_id";
inline constexpr const char kResultOffsetsAttr[] = "result_offsets";
inline constexpr const char kArenaBytesAttr[] = "nc.arena_bytes";
inline constexpr const char kSbufBytesAttr[] = "sbuf_bytes";

// HBM tensors between kernels. The steps of HBM planning are the kernels of
// the function in program order; a kernel result that is not a graph output
// (graph inputs and outputs are bound by the caller) lives in the arena from
// its producing kernel's step to one past its last reading kernel's step.
inline constexpr int64_t kHbmAlignment = 64;  // every arena offset is a multiple of this

struct HbmTensor {
  nc::KernelOp kernel;    // the producer
  unsigned resultNumber;  // which of its results
  PlannedBuffer buffer;   // [start, end) in kernel steps, size in bytes; offset -1 (unplanned)
};

// The kernels of `func` in program order: HBM step i is kernels[i].
llvm::SmallVector<nc::KernelOp> hbmSteps(mlir::func::FuncOp func);
// Every arena tensor of `func`, by producing kernel then result number.
std::vector<HbmTensor> collectHbmTensors(mlir::func::FuncOp func);
// Bytes of a tensor in HBM (bools and integers are stored as the device's f32).
int64_t hbmTensorBytes(mlir::Type type);

}  // namespace neuroncc
