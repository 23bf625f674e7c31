#include "compiler/NeffEmitter.h"

#include <deque>

#include "absl/strings/str_cat.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Threading.h"
#include "neff_format.h"
#include "race_check.h"
#include "passes/IsaProto.h"
#include "passes/Passes.h"

using namespace mlir;

namespace neuroncc {

inline constexpr char kCompilerVersion[] = "neuron-cc 0.1.0";

namespace {

absl::Status fail(const std::string& msg) { return absl::InvalidArgumentError(msg); }

std::string typeString(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::cast<RankedTensorType>(type).getElementType();
  return s;
}

neff::Tensor* addTensor(neff::Executable& exe, const std::string& name, neff::TensorKind kind,
                        Type type) {
  auto t = llvm::cast<RankedTensorType>(type);
  // Graph inputs and outputs keep integer and bool dtypes in HBM.
  Type device = kind == neff::INPUT || kind == neff::OUTPUT ? nc::boundaryElementType(t.getElementType())
                                                            : nc::deviceElementType(t.getElementType());
  neff::Tensor* tensor = exe.add_tensors();
  tensor->set_name(name);
  tensor->set_kind(kind);
  tensor->set_dtype(dtypeOf(device));
  // A value inside the graph may have more dims than a NEFF tensor lists (a
  // repeat's interleaved [r0, d0, r1, d1, ...] expand of a rank-5 input: 10).
  // Its shape is only a description (the DMAs address it by element), so
  // its leading dims are folded into one; graph inputs and outputs keep
  // theirs (the importer takes at most kMaxTensorRank).
  ArrayRef<int64_t> shape = t.getShape();
  const size_t folded = shape.size() > size_t(neff::kMaxTensorRank) && kind != neff::INPUT && kind != neff::OUTPUT
                            ? shape.size() - size_t(neff::kMaxTensorRank) + 1
                            : 0;
  if (folded > 0) tensor->add_shape(ShapedType::getNumElements(shape.take_front(folded)));
  for (int64_t d : shape.drop_front(folded)) tensor->add_shape(d);
  tensor->set_size_bytes(uint64_t(t.getNumElements()) * (device.getIntOrFloatBitWidth() / 8));
  return tensor;
}

}  // namespace

absl::StatusOr<std::string> emitNeff(ModuleOp module, const EmitOptions& options) {
  SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
  if (funcs.size() != 1)
    return fail(absl::StrCat("expected exactly one function in the module, found ", funcs.size()));
  func::FuncOp func = funcs.front();
  neff::Executable exe;
  exe.set_target(options.target);
  exe.set_name(options.name);
  exe.set_opt_level(options.optLevel);
  exe.set_compiler_version(kCompilerVersion);
  if (auto arena = func->getAttrOfType<IntegerAttr>(kArenaBytesAttr))
    exe.set_arena_bytes(uint64_t(arena.getInt()));

  auto isDeviceIoType = [](Type type) {
    Type e = llvm::cast<RankedTensorType>(type).getElementType();
    return e.isF32() || e.isBF16() || e.isF16();
  };
  auto isIntegerIoType = [](Type type) {
    Type e = llvm::cast<RankedTensorType>(type).getElementType();
    return e.isInteger(1) || e.isInteger(32) || e.isInteger(64) || nc::isNarrowInteger(e);
  };
  llvm::DenseMap<Value, uint32_t> tensorOf;
  for (BlockArgument arg : func.getArguments()) {
    if (!isDeviceIoType(arg.getType()) && !isIntegerIoType(arg.getType()))
      return fail(absl::StrCat("graph input ", arg.getArgNumber(), " has element type ",
                               typeString(arg.getType()),
                               "; graph inputs must be f32, bf16, f16, i64, i32, si16, si8, ui8 or bool (i1)"));
    std::string name = absl::StrCat("input", arg.getArgNumber());
    if (auto n = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "nc.name"))
      name = n.getValue().str();
    tensorOf[arg] = uint32_t(exe.tensors_size());
    exe.add_graph_inputs(uint32_t(exe.tensors_size()));
    addTensor(exe, name, neff::INPUT, arg.getType());
  }
  Operation* ret = func.getBody().front().getTerminator();
  for (auto [i, v] : llvm::enumerate(ret->getOperands())) {
    // An output with no elements: declared (0 bytes), written by nothing.
    bool empty = llvm::cast<RankedTensorType>(v.getType()).getNumElements() == 0;
    if (!v.getDefiningOp<nc::KernelOp>() && !empty)
      return fail(absl::StrCat("graph output ", i,
                               " is not computed on the device (it is an input or a constant); "
                               "this is not supported yet"));
    if (tensorOf.count(v) && !empty)
      return fail(absl::StrCat("graph output ", i, " repeats an earlier output; not supported yet"));
    if (!isDeviceIoType(v.getType()) && !isIntegerIoType(v.getType()))
      return fail(absl::StrCat("graph output ", i, " has element type ", typeString(v.getType()),
                               "; graph outputs must be f32, bf16, f16, i64, i32, si16, si8, ui8 or bool (i1)"));
    std::string name = absl::StrCat("output", i);
    if (auto n = func.getResultAttrOfType<StringAttr>(unsigned(i), "nc.name")) name = n.getValue().str();
    if (!empty) tensorOf[v] = uint32_t(exe.tensors_size());
    exe.add_graph_outputs(uint32_t(exe.tensors_size()));
    addTensor(exe, name, neff::OUTPUT, v.getType());
  }

  // -O0 keeps the eager picture, one dispatch per source ATen op (the
  // kernels of one expanded composite share its source id); fused code runs
  // as one dispatch.
  const bool eager = options.optLevel == "O0";
  exe.set_dispatch_model(eager ? neff::DISPATCH_PER_SOURCE_OP : neff::DISPATCH_WHOLE_GRAPH);
  IntegerAttr previousSourceId;
  // Segments are views: of a constant's own bytes where the device keeps
  // them as they are (no copy of a model's weights), else of `converted`.
  std::vector<std::string_view> segments;
  std::deque<std::string> converted;
  for (Operation& op : func.getBody().front()) {
    auto kernel = llvm::dyn_cast<nc::KernelOp>(op);
    if (!kernel) continue;
    if (!kernel.isLowered())
      return fail(absl::StrCat("kernel '", kernel.getSymName().str(), "' was not lowered"));
    neff::Kernel* k = exe.add_kernels();
    k->set_name(kernel.getSymName().str());
    if (eager) {
      auto id = kernel->getAttrOfType<IntegerAttr>(kSourceIdAttr);
      const bool sameOp = id && id == previousSourceId;
      if (exe.kernels_size() > 1) k->set_dispatch(exe.kernels(exe.kernels_size() - 2).dispatch() + (sameOp ? 0 : 1));
      previousSourceId = id;
    }
    for (Attribute a : kernel.getSourceOps()) k->add_source_ops(llvm::cast<StringAttr>(a).getValue().str());
    if (auto s = kernel->getAttrOfType<IntegerAttr>(kSbufBytesAttr))
      k->set_sbuf_bytes_per_partition(uint64_t(s.getInt()));
    auto offsets = kernel->getAttrOfType<DenseI64ArrayAttr>(kResultOffsetsAttr);
    for (Value in : kernel.getInputs()) {
      if (!tensorOf.count(in)) {
        auto cst = in.getDefiningOp<arith::ConstantOp>();
        auto dense = cst ? llvm::dyn_cast<DenseElementsAttr>(cst.getValue()) : DenseElementsAttr();
        if (!dense)
          return fail(absl::StrCat("kernel '", kernel.getSymName().str(),
                                   "' reads a value that is neither an input, a kernel result "
                                   "nor a dense constant"));
        Type elem = dense.getElementType();
        if (nc::deviceElementType(elem) == elem) {
          // A splat stores its one element; the segment holds every element.
          ArrayRef<char> raw = dense.getRawData();
          if (!dense.isSplat()) {
            segments.push_back(std::string_view(raw.data(), raw.size()));
          } else {
            std::string& bytes = converted.emplace_back();
            bytes.reserve(raw.size() * size_t(dense.getNumElements()));
            for (int64_t i = 0; i < dense.getNumElements(); ++i) bytes.append(raw.begin(), raw.end());
            segments.push_back(bytes);
          }
        } else {
          // Bools, integers and f64 live on the device as f32.
          std::string& bytes = converted.emplace_back();
          bytes.reserve(size_t(dense.getNumElements()) * 4);
          auto push = [&](float f) { bytes.append(reinterpret_cast<const char*>(&f), 4); };
          if (elem.isInteger(1)) {
            for (bool v : dense.getValues<bool>()) push(v ? 1.0f : 0.0f);
          } else if (llvm::isa<IntegerType>(elem)) {
            for (const APInt& v : dense.getValues<APInt>()) push(float(v.getSExtValue()));
          } else {
            for (const APFloat& v : dense.getValues<APFloat>()) push(float(v.convertToDouble()));
          }
          segments.push_back(bytes);
        }
        tensorOf[in] = uint32_t(exe.tensors_size());
        neff::Tensor* t = addTensor(exe, absl::StrCat("const", segments.size() - 1), neff::CONSTANT,
                                    in.getType());
        t->set_segment(uint32_t(segments.size() - 1));
      }
      k->add_inputs(tensorOf[in]);
    }
    for (OpResult r : kernel.getResults()) {
      if (!tensorOf.count(r)) {
        if (!offsets || offsets[r.getResultNumber()] < 0)
          return fail(absl::StrCat("kernel '", kernel.getSymName().str(),
                                   "' has a result without an HBM placement (run ncc-plan-memory)"));
        tensorOf[r] = uint32_t(exe.tensors_size());
        neff::Tensor* t = addTensor(exe, absl::StrCat(kernel.getSymName().str(), ".out", r.getResultNumber()),
                                    neff::INTERMEDIATE, r.getType());
        t->set_arena_offset(uint64_t(offsets[r.getResultNumber()]));
      }
      k->add_outputs(tensorOf[r]);
    }
    Block& body = kernel.getBody().front();
    llvm::DenseMap<Value, uint32_t> argTensor;
    for (auto [i, v] : llvm::enumerate(kernel.getInputs())) argTensor[body.getArgument(unsigned(i))] = tensorOf[v];
    for (auto [i, r] : llvm::enumerate(kernel.getResults()))
      argTensor[body.getArgument(unsigned(kernel.getInputs().size() + i))] = tensorOf[r];
    for (Operation& inst : body)
      if (isIsaInstruction(&inst))
        *k->add_instructions() = toProtoInstruction(&inst, [&](Value v) { return argTensor.lookup(v); });
  }
  // Self-check: the schedule must order every pair of SBUF accesses that
  // conflict; the runtime refuses a NEFF that does not. Kernels are checked
  // on the context's threads; the first kernel with a race is reported.
  std::vector<std::string> raceOf(size_t(exe.kernels_size()));
  mlir::parallelFor(module.getContext(), 0, exe.kernels_size(), [&](size_t i) {
    absl::StatusOr<std::vector<neff::SbufRace>> races = neff::CheckSbufRaces(exe.kernels(int(i)), 1);
    if (!races.ok())
      raceOf[i] = absl::StrCat("its race check was refused: ", races.status().message());
    else if (!races->empty())
      raceOf[i] = absl::StrCat("an unordered SBUF access: ", races->front().description);
  });
  for (int i = 0; i < exe.kernels_size(); ++i)
    if (!raceOf[size_t(i)].empty())
      return absl::InternalError(absl::StrCat("internal error: kernel '", exe.kernels(i).name(),
                                              "' has ", raceOf[size_t(i)]));
  return neff::SerializeNeff(std::move(exe), segments, options.name, kCompilerVersion);
}

}  // namespace neuroncc
