// ncc-verify-ir: IR that a pass left inconsistent is reported as an internal
// compiler error naming that pass, and the pipeline stops.
#include <string>

#include <gtest/gtest.h>

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"

namespace {

constexpr const char kKernel[] = R"mlir(
func.func @f(%w: memref<512x1xf32>) {
  %t = nc.alloc_tile : memref<128x4xf32, 1>
  nc.dma_load %w -> %t {part_start = 0, offset = 0, ap = array<i64: 4, 128, 1, 4>} : memref<512x1xf32>, memref<128x4xf32, 1>
  return
}
)mlir";

struct VerifyIrTest : ::testing::Test {
  VerifyIrTest() {
    mlir::DialectRegistry registry;
    neuroncc::registerDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }
  // Runs ncc-verify-ir on `module`; returns the diagnostics it printed.
  std::string run(mlir::ModuleOp module, bool& ok) {
    std::string text;
    mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic& d) {
      text += d.str() + "\n";
      return mlir::success();
    });
    mlir::PassManager pm(&context);
    pm.enableVerifier(false);
    neuroncc::VerifyIrOptions options;
    options.after = "ncc-lower-to-isa";
    pm.nest<mlir::func::FuncOp>().addPass(neuroncc::createVerifyIr(options));
    ok = mlir::succeeded(pm.run(module));
    return text;
  }
  mlir::MLIRContext context;
};

TEST_F(VerifyIrTest, ConsistentIrPasses) {
  auto module = mlir::parseSourceString<mlir::ModuleOp>(kKernel, &context);
  ASSERT_TRUE(module);
  bool ok = false;
  EXPECT_EQ(run(*module, ok), "");
  EXPECT_TRUE(ok);
}

TEST_F(VerifyIrTest, OutOfBoundsDmaIsAnInternalErrorNamingThePass) {
  auto module = mlir::parseSourceString<mlir::ModuleOp>(kKernel, &context);
  ASSERT_TRUE(module);
  // What a buggy lowering could leave: a pattern past the end of the tensor.
  module->walk([&](neuroncc::nc::DmaLoadOp dma) {
    dma.setOffset(600);
  });
  bool ok = true;
  std::string text = run(*module, ok);
  EXPECT_FALSE(ok);
  EXPECT_NE(text.find("access pattern reaches elements [600, 1111] of an HBM tensor with 512 elements"),
            std::string::npos) << text;
  EXPECT_NE(text.find("internal compiler error: the IR after pass 'ncc-lower-to-isa' is inconsistent"),
            std::string::npos) << text;
  bool tagged = false;
  module->walk([&](mlir::func::FuncOp f) { tagged |= f->hasAttr(neuroncc::kInternalErrorAttr); });
  EXPECT_TRUE(tagged);
}

}  // namespace
