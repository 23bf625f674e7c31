#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Pass/PassRegistry.h"

namespace neuroncc {

void buildPipeline(mlir::OpPassManager& pm, const PipelineOptions& options) {
  mlir::OpPassManager& fpm = pm.nest<mlir::func::FuncOp>();
  // Every pass is followed by the IR check, which names the pass on failure.
  auto add = [&](std::unique_ptr<mlir::Pass> pass) {
    VerifyIrOptions verify;
    verify.after = pass->getArgument().str();
    fpm.addPass(std::move(pass));
    fpm.addPass(createVerifyIr(verify));
  };
  add(createDecomposeComposites());
  add(createFoldConstants());
  FormKernelsOptions form;
  form.fuse = options.optLevel > 0;
  form.report = options.fusionReport;
  add(createFormKernels(form));
  add(createLowerToIsa());
  add(createPlanMemory());
  ScheduleOptions schedule;
  schedule.target = options.target;
  schedule.acrossKernels = options.optLevel > 0;  // -O1/-O2: the whole graph is one dispatch
  add(createSchedule(schedule));
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
