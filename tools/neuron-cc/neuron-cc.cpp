// neuron-cc: compile an ATen graph into a NEFF executable.
//
//   neuron-cc compile <model> --framework ATEN --target trn1 -O2 --output file.neff
//       [--memory-report] [--memory-plan-csv plan.csv]
//   neuron-cc list-operators --framework ATEN
#include <cstdio>
#include <string>

#include "compiler/Compiler.h"
#include "compiler/GraphImporter.h"
#include "compiler/MemoryReport.h"
#include "compiler/NeffEmitter.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "device_model.h"
#include "neff_format.h"
#include "tools/neuron-cc/PlanMemoryCommand.h"

namespace cl = llvm::cl;

namespace {

// Stable error codes, printed with every failure so scripts can match them.
constexpr const char* kErrUsage = "NCC-E001";
constexpr const char* kErrImport = "NCC-E002";
constexpr const char* kErrCompile = "NCC-E003";
constexpr const char* kErrEmit = "NCC-E004";
constexpr const char* kErrWrite = "NCC-E005";
constexpr const char* kErrUnsupported = "NCC-E006";
constexpr const char* kErrInternal = "NCC-E007";

cl::OptionCategory category("neuron-cc options");
cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.mlir|model.pb|model.pbtxt>"), cl::cat(category));
cl::opt<std::string> framework("framework", cl::desc("Source framework of the graph (ATEN)"),
                               cl::init("ATEN"), cl::cat(category));
cl::opt<std::string> target("target", cl::desc("Device: trn1 or trn2"), cl::init("trn1"),
                            cl::cat(category));
cl::opt<char> optLevel("O", cl::Prefix, cl::desc("Optimization level: -O0 (no fusion), -O1, -O2"),
                       cl::init('2'), cl::cat(category));
cl::opt<std::string> outputPath("output", cl::desc("Output NEFF path"), cl::init("file.neff"),
                                cl::cat(category));
cl::opt<std::string> verbose("verbose", cl::desc("Log level (info prints pass statistics)"),
                             cl::init(""), cl::cat(category));
cl::opt<std::string> logFile("logfile", cl::desc("Also write the log to this file"), cl::init(""),
                             cl::cat(category));
cl::opt<bool> fusionReport("fusion-report", cl::desc("Report every fusion refused, with its reason"),
                           cl::init(false), cl::cat(category));
cl::opt<bool> memoryReport("memory-report",
                           cl::desc("After compiling, print the HBM arena plan: its size, the lower "
                                    "bound (peak live bytes), the size without reuse, and the "
                                    "tensors live at the peak with the ATen ops that made them"),
                           cl::init(false), cl::cat(category));
cl::opt<std::string> memoryPlanCsv("memory-plan-csv",
                                   cl::desc("Write the HBM planning instance with the plan's offsets "
                                            "to this file (id,lower,upper,size,alignment,offset; "
                                            "lifetimes in kernel steps, half-open)"),
                                   cl::value_desc("file"), cl::init(""), cl::cat(category));

// Everything the compiler reports, for --logfile (written on success and failure).
std::string logText;

int fail(const char* code, const std::string& msg) {
  std::string line = std::string("error ") + code + ": " + msg + "\n";
  llvm::errs() << line;
  logText += line + "Compiler status FAIL\n";
  llvm::outs() << "Compiler status FAIL\n";
  return 1;
}

// "file:line:col: " for .mlir input, "file: node 'name': " for graph files.
void printLocation(llvm::raw_ostream& os, mlir::Location loc) {
  std::string node;
  if (auto named = llvm::dyn_cast<mlir::NameLoc>(loc)) {
    node = named.getName().str();
    loc = named.getChildLoc();
  }
  if (auto fl = llvm::dyn_cast<mlir::FileLineColLoc>(loc)) {
    os << fl.getFilename().getValue();
    if (fl.getLine() > 0) os << ":" << fl.getLine() << ":" << fl.getColumn();
  } else if (!llvm::isa<mlir::UnknownLoc>(loc)) {
    os << loc;
  } else {
    os << "neuron-cc";
  }
  if (!node.empty()) os << ": node '" << node << "'";
  os << ": ";
}

int compile() {
  if (framework != "ATEN") return fail(kErrUsage, "unsupported --framework '" + framework + "' (supported: ATEN)");
  if (!neuroncc::neff::DeviceForTarget(target))
    return fail(kErrUsage, "unknown --target '" + target + "' (supported: trn1, trn2)");
  if (optLevel != '0' && optLevel != '1' && optLevel != '2')
    return fail(kErrUsage, std::string("unknown optimization level -O") + optLevel.getValue() + " (use -O0, -O1 or -O2)");
  if (inputPath.empty()) return fail(kErrUsage, "no input graph given");

  mlir::DialectRegistry registry;
  neuroncc::registerDialects(registry);
  // Never freed, like the module below: the process ends right after one
  // compile, and tearing down a production graph's millions of operations
  // and uniqued attributes costs as much as a pass (clang's -disable-free
  // makes the same choice).
  mlir::MLIRContext& context = *new mlir::MLIRContext(registry);
  context.loadAllAvailableDialects();
  context.printOpOnDiagnostic(false);  // users see their graph's names, not our IR

  llvm::raw_string_ostream logStream(logText);
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic& diag) {
    std::string text;
    llvm::raw_string_ostream os(text);
    printLocation(os, diag.getLocation());
    switch (diag.getSeverity()) {
      case mlir::DiagnosticSeverity::Error: os << "error: "; break;
      case mlir::DiagnosticSeverity::Warning: os << "warning: "; break;
      case mlir::DiagnosticSeverity::Remark: os << "remark: "; break;
      default: os << "note: "; break;
    }
    os << diag << "\n";
    for (auto& note : diag.getNotes()) os << note.getLocation() << ": note: " << note << "\n";
    llvm::errs() << text;
    logStream << text;
    return mlir::success();
  });

  bool unsupportedOps = false;
  auto module = neuroncc::importGraph(inputPath, context, &unsupportedOps);
  if (!module && unsupportedOps)
    return fail(kErrUnsupported, "'" + inputPath + "' uses operators neuron-cc does not support");
  if (!module) return fail(kErrImport, "could not import '" + inputPath + "'");
  neuroncc::PipelineOptions options;
  options.optLevel = optLevel - '0';
  options.target = target;
  options.fusionReport = fusionReport;
  if (mlir::failed(neuroncc::compileModule(*module, options))) {
    bool internal = false;
    module->walk([&](mlir::Operation* op) { internal |= op->hasAttr(neuroncc::kInternalErrorAttr); });
    if (internal)
      return fail(kErrInternal, "internal compiler error while compiling '" + inputPath +
                                    "': the compiler produced inconsistent IR; please report it with the graph");
    return fail(kErrCompile, "compilation of '" + inputPath + "' failed");
  }

  neuroncc::EmitOptions emit;
  emit.target = target;
  emit.optLevel = std::string("O") + optLevel.getValue();
  emit.name = llvm::sys::path::stem(inputPath).str();
  absl::StatusOr<std::string> neff = neuroncc::emitNeff(*module, emit);
  if (!neff.ok()) return fail(kErrEmit, std::string(neff.status().message()));
  if (absl::Status st = neuroncc::neff::WriteFileAtomic(outputPath, *neff); !st.ok())
    return fail(kErrWrite, std::string(st.message()));
  std::string summary = "wrote " + outputPath + " (" + std::to_string(neff->size()) + " bytes)\n";
  // Only the verbose summary needs the NEFF back (parsing re-verifies it all).
  const bool verboseSummary = verbose == "info" || verbose == "debug";
  absl::StatusOr<neuroncc::neff::Neff> parsed = absl::CancelledError("not needed");
  if (verboseSummary) parsed = neuroncc::neff::ParseNeff(*neff);
  if (parsed.ok()) {
    // Pass statistics are compiled out of Debian's LLVM, so summarize here.
    const auto& exe = parsed->executable;
    size_t instructions = 0;
    uint64_t sbuf = 0;
    for (const auto& k : exe.kernels()) {
      instructions += size_t(k.instructions_size());
      sbuf = std::max<uint64_t>(sbuf, k.sbuf_bytes_per_partition());
    }
    summary += "kernels: " + std::to_string(exe.kernels_size()) + ", instructions: " +
               std::to_string(instructions) + ", HBM arena: " + std::to_string(exe.arena_bytes()) +
               " bytes, peak SBUF: " + std::to_string(sbuf) + " bytes per partition\n";
    for (const auto& k : exe.kernels()) {
      summary += "  " + k.name() + ": " + std::to_string(k.instructions_size()) + " instructions, from";
      for (const std::string& op : k.source_ops()) summary += " " + op;
      summary += "\n";
    }
  }
  if (verboseSummary) llvm::outs() << summary;
  if (memoryReport || !memoryPlanCsv.empty()) {
    absl::StatusOr<neuroncc::HbmPlanReport> plan = neuroncc::readHbmPlan(*module);
    if (!plan.ok()) return fail(kErrCompile, "memory report: " + std::string(plan.status().message()));
    if (!memoryPlanCsv.empty())
      if (absl::Status st = neuroncc::neff::WriteFileAtomic(memoryPlanCsv, neuroncc::formatMemoryPlanCsv(*plan));
          !st.ok())
        return fail(kErrWrite, std::string(st.message()));
    if (memoryReport) {
      std::string report = neuroncc::formatMemoryReport(*plan);
      llvm::outs() << report;
      summary += report;
    }
  }
  logText += summary + "Compiler status PASS\n";
  llvm::outs() << "Compiler status PASS\n";
  (void)module.release();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  llvm::InitLLVM init(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "plan-memory") return neuroncc::runPlanMemory(argc - 2, argv + 2);
  if (argc < 2 || (std::string(argv[1]) != "compile" && std::string(argv[1]) != "list-operators")) {
    llvm::errs() << "usage: neuron-cc compile <model.pb|model.pbtxt|model.mlir> [--framework ATEN] [--target trn1] "
                    "[-O0|-O1|-O2] [--output file.neff] [--memory-report] [--memory-plan-csv FILE]\n"
                    "       neuron-cc list-operators --framework ATEN\n"
                    "       neuron-cc plan-memory FILE.csv [--time-limit S] [--output PLANNED.csv]\n"
                    "       neuron-cc plan-memory --verify PLANNED.csv\n";
    return 2;
  }
  std::string command = argv[1];
  // Let llvm::cl parse the rest, with MLIR's debugging flags registered.
  neuroncc::registerPipelines();  // pass names for --mlir-print-ir-before=... and friends
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  // --help lists this tool's options, not the hundreds that the LLVM and
  // MLIR libraries register; those still parse (--help-hidden lists them).
  cl::HideUnrelatedOptions(category);
  std::string title = "neuron-cc " + command +
                      "\n\n  MLIR's debugging options (--mlir-timing, --mlir-print-ir-after-all, ...) are accepted "
                      "too; --help-hidden lists every option";
  argv[1] = argv[0];
  if (!cl::ParseCommandLineOptions(argc - 1, argv + 1, title, &llvm::errs())) return 2;
  if (command == "list-operators") {
    if (framework != "ATEN") return fail(kErrUsage, "unsupported --framework '" + framework + "'");
    for (const std::string& op : neuroncc::supportedAtenOperators()) llvm::outs() << op << "\n";
    return 0;
  }
  int rc = compile();
  if (!logFile.empty())
    if (absl::Status st = neuroncc::neff::WriteFileAtomic(logFile, logText); !st.ok()) {
      llvm::errs() << "error " << kErrWrite << ": " << std::string(st.message()) << "\n";
      return 1;
    }
  return rc;
}
