//===- Passes.td - neuron-cc compiler passes --------------------*- tablegen -*-===//

#ifndef NEURON_PASSES
#define NEURON_PASSES

include "mlir/Pass/PassBase.td"

def DecomposeComposites : Pass<"ncc-decompose-composites", "mlir::func::FuncOp"> {
  let summary = "Rewrite composite ATen ops into primitive elementwise and reduction ops";
  let description = [{
    First, a slice that keeps every element of its input stands for its
    input (except where returned). `aten.rms_norm` becomes
    `x * rsqrt(mean(x * x) + eps) * weight`; a matmul
    with one output column becomes a product and a sum over k. Every op a
    composite expands into is tagged with `nc.source` (the composite's name) and
    `nc.source_id` (one id per expanded composite), so that kernel formation at
    -O0 keeps a composite in one kernel and the profiler attributes time to it.
  }];
  let dependentDialects = ["::neuroncc::aten::AtenDialect"];
  let options = [
    ListOption<"legalOps", "legal-ops", "std::string",
               "Composite ops the backend keeps as they are (e.g. aten.rms_norm)">
  ];
  let statistics = [
    Statistic<"numDecomposed", "decomposed", "Composite ops decomposed">
  ];
}

def VerifyIr : Pass<"ncc-verify-ir", "mlir::func::FuncOp"> {
  let summary = "Check the IR between passes and report an inconsistency as an internal compiler error";
  let description = [{
    Runs every op's verifier (value shapes and dtypes, reductions against
    their operand's shape, tile shapes, and the HBM extents of every DMA
    access pattern). A failure is a compiler bug, not a property of the
    user's graph: the op's error names the node, and this pass adds which pass
    produced the IR, tags the function `nc.internal_error` and stops the
    pipeline before a later pass can crash on the bad IR. The pipeline runs it
    after every pass (the pass manager's own verifier is off there).
  }];
  let options = [
    Option<"after", "after", "std::string", /*default=*/"\"\"", "The pass whose output is checked">
  ];
}

def FoldConstants : Pass<"ncc-fold-constants", "mlir::func::FuncOp"> {
  let summary = "Evaluate ops whose operands are all compile-time constants";
  let description = [{
    Elementwise ops, reductions, casts, cats and views whose every operand is
    a dense constant are computed at compile time, in double precision, and
    replaced by a constant rounded once to the result's dtype. A splat stays a
    splat. Results above `max-elements` elements, and views that would repeat
    the elements of a non-splat constant, are left to the device.

    ```mlir
    %c = arith.constant dense<1.0> : tensor<8xf32>
    %r = aten.mul.Scalar %c, 2.0 : tensor<8xf32> -> tensor<8xf32>
    // becomes
    %r = arith.constant dense<2.0> : tensor<8xf32>
    ```
  }];
  let options = [
    Option<"maxElements", "max-elements", "int64_t", /*default=*/"4194304",
           "Largest non-splat result (in elements) computed at compile time">
  ];
  let statistics = [
    Statistic<"numFolded", "folded", "Ops replaced by constants">
  ];
}

def FormKernels : Pass<"ncc-form-kernels", "mlir::func::FuncOp"> {
  let summary = "Group ATen ops into nc.kernel dispatch regions";
  let description = [{
    Without fusion (-O0) every source ATen op is its own kernel (a decomposed
    composite stays one). With fusion (-O2) elementwise and reduction ops whose
    row spaces line up join one kernel, including a reduction that is broadcast
    back over its reduced axis, as long as a row fits the SBUF budget.
  }];
  let dependentDialects = ["::neuroncc::nc::NcDialect", "::mlir::arith::ArithDialect"];
  let options = [
    Option<"fuse", "fuse", "bool", /*default=*/"true", "Fuse ops into shared kernels">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark for every fusion refused, with its reason">,
    Option<"sbufBudgetBytes", "sbuf-budget-bytes", "int64_t", /*default=*/"98304",
           "Per-partition SBUF bytes a row tile of whole reduced rows may use "
           "(the kernel's live full-width values, 4 KiB kept for the rest)">
  ];
  let statistics = [
    Statistic<"numKernels", "kernels", "Kernels formed">,
    Statistic<"numFused", "fused-ops", "Ops that joined an existing kernel">,
    Statistic<"numPrologues", "prologues", "Kernels that joined a matmul's kernel as its left operand's prologue">
  ];
}

def LowerToIsa : Pass<"ncc-lower-to-isa", "mlir::func::FuncOp"> {
  let summary = "Tile each kernel onto the 128 SBUF partitions and emit ISA ops";
  let description = [{
    Rows (all dims but the last, flattened) go on partitions in tiles of 128,
    the last dim on the free dimension. Inputs come in by DMA with access
    patterns that express broadcasting with zero strides; values that do not
    depend on the column become one element per partition. Intermediates stay
    in SBUF in f32; results are stored in their own dtype.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
  let options = [
    Option<"maxFreeElements", "max-free-elements", "int64_t", /*default=*/"4096",
           "Longest row chunk of an elementwise-only kernel">,
    Option<"rowBudgetBytes", "row-budget-bytes", "int64_t", /*default=*/"98304",
           "Per-partition SBUF bytes a whole reduced row may use (4 live f32 copies); "
           "longer rows are reduced chunk by chunk unless the kernel needs them whole">,
    Option<"fewBytes", "few-bytes", "int64_t", /*default=*/"-1",
           "A kernel whose operands and results hold fewer bytes is lowered as one whose "
           "DMA queues are idle (fewer row tiles, transfers split over the queues); "
           "-1: the bytes the trn1 queues move in one transfer's fixed cost, 0: none">
  ];
  let statistics = [
    Statistic<"numInstructions", "instructions", "ISA instructions emitted">,
    Statistic<"numDmas", "dmas", "DMA instructions emitted">
  ];
}

def PlanMemory : Pass<"ncc-plan-memory", "mlir::func::FuncOp"> {
  let summary = "Assign HBM arena offsets and SBUF tile offsets from liveness";
  let description = [{
    HBM: every tensor that lives between kernels gets a byte offset in one
    arena; SBUF: every tile gets a per-partition byte offset. Both use the same
    greedy offset planner over several orderings, and an independent check
    proves that no two simultaneously live buffers overlap.
  }];
  let options = [
    Option<"sbufBytes", "sbuf-bytes", "int64_t", /*default=*/"196608",
           "SBUF bytes per partition">
  ];
  let statistics = [
    Statistic<"arenaBytes", "arena-bytes", "HBM arena size">,
    Statistic<"peakSbufBytes", "peak-sbuf-bytes", "Largest per-partition SBUF use of a kernel">
  ];
}

def Schedule : Pass<"ncc-schedule", "mlir::func::FuncOp"> {
  let summary = "Assign engines and DMA queues and insert semaphore waits";
  let description = [{
    List scheduling with the device cost model: each movable instruction goes
    to the engine where it would finish first, each DMA to the queue that frees
    up first. Read/write conflicts on SBUF bytes and HBM tensors become
    semaphore waits on the producing queue, so DMA overlaps compute wherever
    the data allows.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"trn1\"", "Device model">,
    Option<"acrossKernels", "across-kernels", "bool", /*default=*/"false",
           "Start each kernel's schedule where the kernels before it left the engines and DMA queues "
           "(the kernels share one dispatch)">
  ];
  let statistics = [
    Statistic<"numWaits", "waits", "Semaphore waits inserted">
  ];
}

#endif // NEURON_PASSES
