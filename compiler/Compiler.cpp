#include "compiler/Compiler.h"

#include "compiler/GraphImporter.h"

#include "llvm/Support/SourceMgr.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"

using namespace mlir;

namespace neuroncc {

OwningOpRef<ModuleOp> importGraph(const std::string& path, MLIRContext& context, bool* unsupportedOps) {
  llvm::StringRef ext = llvm::StringRef(path).rsplit('.').second;
  if (ext != "mlir" && ext != "pb" && ext != "pbtxt") {
    emitError(UnknownLoc::get(&context))
        << "unsupported graph file extension '." << ext << "' for '" << path
        << "' (supported: .mlir, .pb, .pbtxt)";
    return nullptr;
  }
  auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(path, /*IsText=*/false);
  if (!buffer) {
    emitError(UnknownLoc::get(&context)) << "cannot read '" << path << "': " << buffer.getError().message();
    return nullptr;
  }
  if (ext != "mlir")
    return importAtenGraph(std::string_view((*buffer)->getBufferStart(), (*buffer)->getBufferSize()), ext == "pbtxt",
                           path, context, unsupportedOps);
  llvm::SourceMgr sourceMgr;
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
  // The pipeline checks the IR after each pass itself (ncc-verify-ir), so
  // that an inconsistency is reported as an internal error naming the pass.
  pm.enableVerifier(false);
  buildPipeline(pm, options);
  return pm.run(module);
}

}  // namespace neuroncc
