#include "compiler/MemoryReport.h"

#include <algorithm>
#include <set>

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "passes/Passes.h"

using namespace mlir;

namespace neuroncc {

namespace {

// "4x512xbf16"; a 0-d tensor is just its dtype. Bools and integers live in
// HBM as f32, which is what their bytes count.
std::string typeString(Type type) {
  auto t = llvm::cast<RankedTensorType>(type);
  std::string s;
  llvm::raw_string_ostream os(s);
  for (int64_t d : t.getShape()) os << d << "x";
  os << t.getElementType();
  Type device = nc::deviceElementType(t.getElementType());
  if (device != t.getElementType()) os << " (as " << device << ")";
  return s;
}

int64_t alignUp(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

std::string ratio(int64_t num, int64_t den) {
  if (den <= 0) return "-";
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%.3f", double(num) / double(den));
  return s;
}

std::string plural(size_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// A lower bound that knows offsets are multiples of `alignment`: at any step
// the live tensors sit one above the other, each starting on an aligned
// offset, so every one but the topmost takes its size rounded up.
int64_t alignedLowerBound(const std::vector<PlannedBuffer>& buffers, int64_t alignment) {
  // Sweep over the steps (ends before starts: lifetimes are half-open),
  // keeping the padded sum and the padding of every live tensor.
  std::vector<std::pair<int64_t, size_t>> events;  // (step * 2 + isStart, buffer)
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].start >= buffers[i].end) continue;
    events.push_back({buffers[i].start * 2 + 1, i});
    events.push_back({buffers[i].end * 2, i});
  }
  std::sort(events.begin(), events.end());
  std::multiset<int64_t> pads;
  int64_t padded = 0, best = 0;
  for (size_t k = 0; k < events.size(); ++k) {
    const PlannedBuffer& b = buffers[events[k].second];
    int64_t size = alignUp(b.size, alignment), pad = size - b.size;
    if (events[k].first % 2) {
      padded += size;
      pads.insert(pad);
    } else {
      padded -= size;
      pads.erase(pads.find(pad));
    }
    // After a group of ends the live set is a subset of a real step's, whose
    // value it cannot exceed, so checking after every group is safe.
    bool groupDone = k + 1 == events.size() || events[k + 1].first != events[k].first;
    if (groupDone && !pads.empty()) best = std::max(best, padded - *pads.rbegin());
  }
  return best;
}

}  // namespace

absl::StatusOr<HbmPlanReport> readHbmPlan(ModuleOp module) {
  SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
  if (funcs.size() != 1)
    return absl::InvalidArgumentError("expected exactly one function in the module, found " +
                                      std::to_string(funcs.size()));
  func::FuncOp func = funcs.front();
  auto arena = func->getAttrOfType<IntegerAttr>(kArenaBytesAttr);
  if (!arena) return absl::FailedPreconditionError("the module has no HBM plan (run ncc-plan-memory)");
  HbmPlanReport plan;
  plan.arenaBytes = arena.getInt();
  plan.alignment = kHbmAlignment;
  plan.graphInputs = func.getNumArguments();
  plan.graphOutputs = func.getNumResults();
  for (nc::KernelOp k : hbmSteps(func)) plan.steps.push_back(k.getSymName().str());
  for (HbmTensor t : collectHbmTensors(func)) {
    std::string kernel = t.kernel.getSymName().str();
    auto offsets = t.kernel->getAttrOfType<DenseI64ArrayAttr>(kResultOffsetsAttr);
    if (!offsets || size_t(offsets.size()) != t.kernel.getNumResults() || offsets[t.resultNumber] < 0)
      return absl::FailedPreconditionError("kernel '" + kernel + "' result " +
                                           std::to_string(t.resultNumber) + " has no arena offset");
    HbmPlanReport::Tensor r;
    r.kernel = kernel;
    if (auto sources = t.kernel.getResultSources())
      r.source = llvm::cast<StringAttr>((*sources)[t.resultNumber]).getValue().str();
    else
      r.source = "?";
    r.type = typeString(t.kernel->getResult(t.resultNumber).getType());
    r.buffer = t.buffer;
    r.buffer.offset = offsets[t.resultNumber];
    plan.tensors.push_back(std::move(r));
  }
  return plan;
}

std::string formatMemoryReport(const HbmPlanReport& plan) {
  std::vector<PlannedBuffer> buffers;
  int64_t unpadded = 0, noReuse = 0;
  for (const HbmPlanReport::Tensor& t : plan.tensors) {
    buffers.push_back(t.buffer);
    unpadded += t.buffer.size;
    noReuse += alignUp(t.buffer.size, plan.alignment);
  }
  LivePeak peak = findLivePeak(buffers);
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "HBM memory report: " << plural(plan.tensors.size(), "arena tensor") << " over "
     << plural(plan.steps.size(), "kernel step") << " (the kernels in program order)\n";
  os << "  graph inputs (" << plan.graphInputs << ") and outputs (" << plan.graphOutputs
     << ") are bound by the caller and are not in the arena; constants live in the NEFF\n";
  os << "  arena:            " << plan.arenaBytes << " bytes\n";
  os << "  lower bound:      " << peak.bytes << " bytes (peak live bytes over the kernel schedule)\n";
  os << "  aligned bound:    " << alignedLowerBound(buffers, plan.alignment)
     << " bytes (the same peak with offsets multiples of " << plan.alignment << ")\n";
  os << "  no reuse:         " << noReuse << " bytes (every arena tensor in bytes of its own, "
     << plan.alignment << "-byte aligned; " << unpadded << " bytes unpadded)\n";
  os << "  arena / bound:    " << ratio(plan.arenaBytes, peak.bytes) << "\n";
  os << "  arena / no reuse: " << ratio(plan.arenaBytes, noReuse) << "\n";
  if (plan.arenaBytes > noReuse)
    os << "  note: the plan is larger than placing every tensor on its own\n";
  if (std::optional<std::string> err = verifyPlan(buffers, plan.alignment, plan.arenaBytes))
    os << "  check: INVALID PLAN: " << *err << "\n";
  if (plan.tensors.empty()) {
    os << "  peak: none (every kernel result is a graph output)\n";
    return s;
  }
  std::vector<const HbmPlanReport::Tensor*> live;
  for (const HbmPlanReport::Tensor& t : plan.tensors)
    if (t.buffer.start <= peak.step && peak.step < t.buffer.end) live.push_back(&t);
  std::stable_sort(live.begin(), live.end(), [](const auto* a, const auto* b) {
    return a->buffer.offset < b->buffer.offset;
  });
  os << "  peak:             " << peak.bytes << " bytes live at step " << peak.step << " ("
     << plan.steps[size_t(peak.step)] << "), " << plural(live.size(), "tensor") << ":\n";
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"kernel", "aten op [node]", "type", "bytes", "offset", "live [first, last kernel]"});
  for (const HbmPlanReport::Tensor* t : live)
    rows.push_back({t->kernel, t->source, t->type, std::to_string(t->buffer.size),
                    std::to_string(t->buffer.offset),
                    "[" + plan.steps[size_t(t->buffer.start)] + ", " +
                        plan.steps[size_t(t->buffer.end - 1)] + "]"});
  std::vector<size_t> width(rows.front().size(), 0);
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  for (const auto& row : rows) {
    std::string line = "   ";
    for (size_t c = 0; c < row.size(); ++c) {
      bool number = c == 3 || c == 4;
      std::string pad(width[c] - row[c].size(), ' ');
      line += " " + (number ? pad + row[c] : (c + 1 == row.size() ? row[c] : row[c] + pad));
    }
    os << line << "\n";
  }
  return s;
}

std::string formatMemoryPlanCsv(const HbmPlanReport& plan) {
  std::string s = "id,lower,upper,size,alignment,offset\n";
  for (auto [i, t] : llvm::enumerate(plan.tensors))
    s += std::to_string(i) + "," + std::to_string(t.buffer.start) + "," + std::to_string(t.buffer.end) + "," +
         std::to_string(t.buffer.size) + "," + std::to_string(plan.alignment) + "," +
         std::to_string(t.buffer.offset) + "\n";
  return s;
}

}  // namespace neuroncc
