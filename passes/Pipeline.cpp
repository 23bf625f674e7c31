#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Pass/PassRegistry.h"

namespace neuroncc {

void buildPipeline(mlir::OpPassManager& pm, const PipelineOptions& options) {
  mlir::OpPassManager& fpm = pm.nest<mlir::func::FuncOp>();
  fpm.addPass(createDecomposeComposites());
  fpm.addPass(createFoldConstants());
  FormKernelsOptions form;
  form.fuse = options.optLevel > 0;
  form.report = options.fusionReport;
  fpm.addPass(createFormKernels(form));
  fpm.addPass(createLowerToIsa());
  fpm.addPass(createPlanMemory());
  ScheduleOptions schedule;
  schedule.target = options.target;
  fpm.addPass(createSchedule(schedule));
}

void registerDialects(mlir::DialectRegistry& registry) {
  registry.insert<aten::AtenDialect, nc::NcDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::memref::MemRefDialect>();
}

void registerPipelines() {
  registerNeuronPasses();
  for (int level : {0, 2}) {
    mlir::PassPipelineRegistration<>(
        level == 0 ? "ncc-pipeline-O0" : "ncc-pipeline-O2",
        level == 0 ? "The full compiler pipeline at -O0 (no fusion)"
                   : "The full compiler pipeline at -O2 (fusion)",
        [level](mlir::OpPassManager& pm) {
          PipelineOptions options;
          options.optLevel = level;
          buildPipeline(pm, options);
        });
  }
}

}  // namespace neuroncc
