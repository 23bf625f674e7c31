// The mlir-opt of neuron-cc: every dialect and pass of the compiler, for lit tests.
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "passes/Passes.h"

int main(int argc, char** argv) {
  mlir::DialectRegistry registry;
  neuroncc::registerDialects(registry);
  neuroncc::registerPipelines();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "neuron-cc optimizer driver\n", registry));
}
