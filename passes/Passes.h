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

namespace neuroncc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

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

}  // namespace neuroncc
