#include "compiler/Compiler.h"

#include "llvm/Support/SourceMgr.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"

using namespace mlir;

namespace neuroncc {

OwningOpRef<ModuleOp> importGraph(const std::string& path, MLIRContext& context) {
  llvm::StringRef ext = llvm::StringRef(path).rsplit('.').second;
  if (ext != "mlir") {
    emitError(UnknownLoc::get(&context))
        << "unsupported graph file extension '." << ext << "' for '" << path
        << "' (supported: .mlir)";
    return nullptr;
  }
  llvm::SourceMgr sourceMgr;
  std::string err;
  auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(path);
  if (!buffer) {
    emitError(UnknownLoc::get(&context)) << "cannot read '" << path << "': " << buffer.getError().message();
    return nullptr;
  }
  sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, &context);
}

LogicalResult compileModule(ModuleOp module, const PipelineOptions& options) {
  PassManager pm(module.getContext());
  if (failed(applyPassManagerCLOptions(pm))) return failure();
  DefaultTimingManager tm;
  applyDefaultTimingManagerCLOptions(tm);
  TimingScope timing = tm.getRootScope();
  pm.enableTiming(timing);
  buildPipeline(pm, options);
  return pm.run(module);
}

}  // namespace neuroncc
