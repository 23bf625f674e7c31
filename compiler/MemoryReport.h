// The HBM memory plan of a compiled module, for `neuron-cc compile
// --memory-report` (a text report) and `--memory-plan-csv` (the planning
// instance in the public benchmark format, with the plan's offsets).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "mlir/IR/BuiltinOps.h"
#include "passes/OffsetPlanner.h"

namespace neuroncc {

struct HbmPlanReport {
  struct Tensor {
    std::string kernel;  // the producing kernel
    std::string source;  // the ATen op that computed it (its result_sources entry)
    std::string type;    // shape and dtype, e.g. 4x512xbf16
    PlannedBuffer buffer;  // lifetime in kernel steps, bytes, arena offset
  };
  std::vector<std::string> steps;  // kernel names: HBM step i is steps[i]
  std::vector<Tensor> tensors;     // the arena tensors, by producing kernel then result
  int64_t arenaBytes = 0;          // the plan's arena (nc.arena_bytes)
  int64_t alignment = 0;           // every offset is a multiple of it
  unsigned graphInputs = 0, graphOutputs = 0;
};

// Reads the plan ncc-plan-memory left on the module (result_offsets on every
// kernel, nc.arena_bytes on the function); lifetimes come from
// collectHbmTensors, the same function the pass plans with.
absl::StatusOr<HbmPlanReport> readHbmPlan(mlir::ModuleOp module);

// Arena size, lower bound (peak live bytes), size without reuse, their
// ratios, the peak step and the tensors live there.
std::string formatMemoryReport(const HbmPlanReport& plan);

// `id,lower,upper,size,alignment,offset`, one row per arena tensor; lower and
// upper are the half-open lifetime in kernel steps.
std::string formatMemoryPlanCsv(const HbmPlanReport& plan);

}  // namespace neuroncc
