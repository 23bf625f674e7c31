#include "dialects/aten/Views.h"

#include "dialects/aten/AtenDialect.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>

namespace neuroncc::aten {
namespace {

bool normalizeDim(int64_t dim, int64_t rank, int64_t& out, std::string* error) {
  int64_t bound = std::max<int64_t>(rank, 1);
  if (dim < -bound || dim >= bound) {
    *error = "dim " + std::to_string(dim) + " is out of range for a rank-" + std::to_string(rank) + " tensor";
    return false;
  }
  out = dim < 0 ? dim + bound : dim;
  return true;
}

// A new shape for the same elements; -1 takes what is left.
bool resolveShape(llvm::ArrayRef<int64_t> size, int64_t numel, llvm::SmallVector<int64_t>& out,
                  std::string* error) {
  int64_t known = 1, infer = -1;
  out.assign(size.begin(), size.end());
  for (size_t i = 0; i < size.size(); ++i) {
    if (size[i] == -1) {
      if (infer >= 0) return (*error = "only one dim may be -1", false);
      infer = int64_t(i);
    } else if (size[i] < 0) {
      return (*error = "invalid size " + std::to_string(size[i]), false);
    } else {
      known *= size[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      return (*error = "cannot infer the -1 dim of a view of " + std::to_string(numel) + " elements", false);
    out[size_t(infer)] = numel / known;
    known *= out[size_t(infer)];
  }
  if (known != numel)
    return (*error = "shape of " + std::to_string(known) + " elements for a tensor of " +
                     std::to_string(numel), false);
  return true;
}

int64_t numel(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

// Strides for seeing the elements of a strided (shape, strides) in another
// shape without moving them, as PyTorch's view() decides it: the old dims
// split into runs that are contiguous among themselves (each stride equals
// the next one times its size); each run must map onto a run of new dims
// with the same number of elements, which then take strides inside it.
std::optional<llvm::SmallVector<int64_t>> reshapeStrides(llvm::ArrayRef<int64_t> shape,
                                                         llvm::ArrayRef<int64_t> strides,
                                                         llvm::ArrayRef<int64_t> newShape) {
  llvm::SmallVector<int64_t> out(newShape.size(), 0);
  if (numel(shape) != numel(newShape)) return std::nullopt;
  if (numel(shape) == 0 || shape.empty()) {
    StridedView c = contiguousView(newShape);
    return c.strides;
  }
  int64_t newDim = int64_t(newShape.size()) - 1;
  int64_t runStride = strides.back();  // stride of the innermost dim of the current run
  int64_t runElems = 1, newElems = 1;
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    runElems *= shape[size_t(d)];
    bool runEnds = d == 0 || (shape[size_t(d - 1)] != 1 && strides[size_t(d - 1)] != runElems * runStride);
    if (!runEnds) continue;
    while (newDim >= 0 && (newElems < runElems || newShape[size_t(newDim)] == 1)) {
      out[size_t(newDim)] = newElems * runStride;
      newElems *= newShape[size_t(newDim)];
      --newDim;
    }
    if (newElems != runElems) return std::nullopt;
    if (d > 0) {
      runStride = strides[size_t(d - 1)];
      runElems = newElems = 1;
    }
  }
  if (newDim != -1) return std::nullopt;
  return out;
}

StridedView contiguousView(llvm::ArrayRef<int64_t> shape) {
  StridedView v;
  v.shape.assign(shape.begin(), shape.end());
  v.strides.assign(shape.size(), 1);
  for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i)
    v.strides[size_t(i)] = v.strides[size_t(i + 1)] * shape[size_t(i + 1)];
  return v;
}

bool isContiguous(const StridedView& view) {
  int64_t expected = 1;
  for (int64_t i = int64_t(view.shape.size()) - 1; i >= 0; --i) {
    if (view.shape[size_t(i)] == 1) continue;  // the stride of a size-1 dim never matters
    if (view.strides[size_t(i)] != expected) return false;
    expected *= view.shape[size_t(i)];
  }
  return true;
}

bool isRowPreservingReshape(mlir::Operation* op) {
  if (!llvm::isa<ViewShapeOp, UnsafeViewOp, ReshapeOp, ReshapeAliasOp, CloneOp>(op)) return false;
  auto in = llvm::cast<mlir::RankedTensorType>(op->getOperand(0).getType());
  auto out = llvm::cast<mlir::RankedTensorType>(op->getResult(0).getType());
  if (in.getRank() == 0 || out.getRank() == 0) return in.getNumElements() == 1 && out.getNumElements() == 1;
  return in.getShape().back() == out.getShape().back();
}

int64_t trailingDimsOf(llvm::ArrayRef<int64_t> shape, int64_t rows, int64_t cols) {
  int64_t inner = 1;
  for (int64_t k = 1; k <= int64_t(shape.size()); ++k) {
    inner *= shape[shape.size() - size_t(k)];
    if (inner == cols) {
      int64_t outer = 1;
      for (size_t i = 0; i + size_t(k) < shape.size(); ++i) outer *= shape[i];
      if (outer == rows) return k;
    }
    if (inner > cols) break;
  }
  return 0;
}

bool isViewOp(mlir::Operation* op) {
  return llvm::isa<TransposeIntOp, TOp, PermuteOp, UnsqueezeOp, SqueezeDimOp, ExpandOp, SliceTensorOp,
                   SelectIntOp, ViewShapeOp, UnsafeViewOp, ReshapeOp, ReshapeAliasOp, CloneOp>(op);
}

mlir::Value viewChainRoot(mlir::Value v, llvm::SmallVectorImpl<mlir::Operation*>* chain) {
  size_t first = chain ? chain->size() : 0;
  while (mlir::Operation* def = v.getDefiningOp()) {
    if (!isViewOp(def)) break;
    if (chain) chain->push_back(def);
    v = def->getOperand(0);
  }
  if (chain) std::reverse(chain->begin() + long(first), chain->end());
  return v;
}

std::optional<StridedView> viewOfChain(mlir::Value v) {
  llvm::SmallVector<mlir::Operation*> chain;
  mlir::Value root = viewChainRoot(v, &chain);
  return viewThrough(chain, llvm::cast<mlir::RankedTensorType>(root.getType()).getShape());
}

std::optional<StridedView> viewThrough(llvm::ArrayRef<mlir::Operation*> chain, llvm::ArrayRef<int64_t> rootShape) {
  StridedView view = contiguousView(rootShape);
  for (mlir::Operation* op : chain) {
    StridedView next;
    std::string error;
    if (!applyView(op, view, next, &error)) return std::nullopt;
    view = next;
  }
  return view;
}

bool viewTranspose(int64_t dim0, int64_t dim1, const StridedView& in, StridedView& out, std::string* error) {
  out = in;
  int64_t rank = int64_t(in.shape.size()), a, b;
  if (!normalizeDim(dim0, rank, a, error) || !normalizeDim(dim1, rank, b, error)) return false;
  if (rank == 0) return true;
  std::swap(out.shape[size_t(a)], out.shape[size_t(b)]);
  std::swap(out.strides[size_t(a)], out.strides[size_t(b)]);
  return true;
}

bool viewT(const StridedView& in, StridedView& out, std::string* error) {
  out = in;
  if (in.shape.size() > 2) return (*error = "t() takes a tensor of rank 2 or less", false);
  if (in.shape.size() == 2) return viewTranspose(0, 1, in, out, error);
  return true;
}

bool viewPermute(llvm::ArrayRef<int64_t> dims, const StridedView& in, StridedView& out, std::string* error) {
  out = in;
  int64_t rank = int64_t(in.shape.size());
  if (int64_t(dims.size()) != rank) return (*error = "permute needs one entry per dim", false);
  llvm::SmallVector<bool> seen(size_t(rank), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d;
    if (!normalizeDim(dims[i], rank, d, error)) return false;
    if (seen[size_t(d)]) return (*error = "permute repeats dim " + std::to_string(d), false);
    seen[size_t(d)] = true;
    out.shape[i] = in.shape[size_t(d)];
    out.strides[i] = in.strides[size_t(d)];
  }
  return true;
}

bool viewUnsqueeze(int64_t d, const StridedView& in, StridedView& out, std::string* error) {
  out = in;
  int64_t rank = int64_t(in.shape.size());
  if (d < -rank - 1 || d > rank) return (*error = "unsqueeze dim " + std::to_string(d) + " out of range", false);
  if (d < 0) d += rank + 1;
  out.shape.insert(out.shape.begin() + d, 1);
  out.strides.insert(out.strides.begin() + d, 0);
  return true;
}

bool viewSqueeze(int64_t dim, const StridedView& in, StridedView& out, std::string* error) {
  out = in;
  int64_t rank = int64_t(in.shape.size()), d;
  if (!normalizeDim(dim, rank, d, error)) return false;
  if (rank > 0 && in.shape[size_t(d)] == 1) {
    out.shape.erase(out.shape.begin() + d);
    out.strides.erase(out.strides.begin() + d);
  }
  return true;
}

bool viewExpand(llvm::ArrayRef<int64_t> size, const StridedView& in, StridedView& out, std::string* error) {
  int64_t rank = int64_t(in.shape.size()), n = int64_t(size.size());
  out = in;
  if (n < rank) return (*error = "expand to fewer dims than the tensor has", false);
  out.shape.assign(size.begin(), size.end());
  out.strides.assign(size_t(n), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t j = i - (n - rank);  // the input dim aligned with i, if any
    if (j < 0) {
      if (size[size_t(i)] < 0) return (*error = "a new leading dim cannot be -1", false);
      continue;
    }
    int64_t have = in.shape[size_t(j)];
    int64_t want = size[size_t(i)] == -1 ? have : size[size_t(i)];
    if (want != have && have != 1)
      return (*error = "cannot expand dim " + std::to_string(j) + " of size " + std::to_string(have) +
                       " to " + std::to_string(want), false);
    out.shape[size_t(i)] = want;
    out.strides[size_t(i)] = have == 1 && want != 1 ? 0 : in.strides[size_t(j)];
  }
  return true;
}

bool viewSlice(int64_t dim, int64_t start, int64_t end, int64_t step, const StridedView& in, StridedView& out,
               std::string* error) {
  out = in;
  int64_t rank = int64_t(in.shape.size()), d;
  if (!normalizeDim(dim, rank, d, error)) return false;
  if (rank == 0) return (*error = "slice of a 0-d tensor", false);
  int64_t size = in.shape[size_t(d)];
  if (step <= 0) return (*error = "slice step must be positive", false);
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  out.shape[size_t(d)] = (end - start + step - 1) / step;
  out.offset += start * in.strides[size_t(d)];
  out.strides[size_t(d)] *= step;
  return true;
}

bool viewSelect(int64_t dim, int64_t index, const StridedView& in, StridedView& out, std::string* error) {
  out = in;
  int64_t rank = int64_t(in.shape.size()), d;
  if (rank == 0) return (*error = "select on a 0-d tensor", false);
  if (!normalizeDim(dim, rank, d, error)) return false;
  int64_t size = in.shape[size_t(d)];
  if (index < -size || index >= size)
    return (*error = "index " + std::to_string(index) + " is out of range for a dim of size " +
                     std::to_string(size), false);
  if (index < 0) index += size;
  out.offset += index * in.strides[size_t(d)];
  out.shape.erase(out.shape.begin() + d);
  out.strides.erase(out.strides.begin() + d);
  return true;
}

bool viewReshape(llvm::ArrayRef<int64_t> size, const StridedView& in, StridedView& out, std::string* error,
                 bool* notAView) {
  llvm::SmallVector<int64_t> shape;
  out = in;
  if (!resolveShape(size, numel(in.shape), shape, error)) return false;
  if (llvm::ArrayRef<int64_t>(shape) == llvm::ArrayRef<int64_t>(in.shape)) return true;  // the same view
  std::optional<llvm::SmallVector<int64_t>> strides = reshapeStrides(in.shape, in.strides, shape);
  if (!strides) {
    if (notAView) *notAView = true;
    *error = "a reshape of a non-contiguous view needs a copy";
    return false;
  }
  out.shape = shape;
  out.strides = *strides;
  out.offset = in.offset;
  return true;
}

bool regroupsLeadingDims(llvm::ArrayRef<int64_t> from, llvm::ArrayRef<int64_t> to) {
  if (from.size() < 2 || to.size() < 2 || from.take_back(2) != to.take_back(2)) return false;
  return numel(from.drop_back(2)) == numel(to.drop_back(2));
}

bool applyBatchedView(mlir::Operation* op, const StridedView& in, StridedView& out, std::string* error) {
  auto inShape = llvm::cast<mlir::RankedTensorType>(op->getOperand(0).getType()).getShape();
  auto outShape = llvm::cast<mlir::RankedTensorType>(op->getResult(0).getType()).getShape();
  const bool regroup = llvm::isa<ViewShapeOp, UnsafeViewOp, ReshapeOp, ReshapeAliasOp, CloneOp>(op) &&
                       regroupsLeadingDims(in.shape, outShape);
  if (llvm::ArrayRef<int64_t>(in.shape) == inShape) {
    bool notAView = false;
    if (applyView(op, in, out, error, &notAView)) return true;
    if (!notAView || !regroup) return false;
    out = in;
    return true;
  }
  // `in` keeps leading dims apart.
  if (regroup || (llvm::isa<ExpandOp>(op) && inShape == outShape)) {
    out = in;
    return true;
  }
  if (auto t = llvm::dyn_cast<TransposeIntOp>(op)) {
    int64_t rank = int64_t(inShape.size()), d0 = t.getDim0(), d1 = t.getDim1();
    d0 = d0 < 0 ? d0 + rank : d0;
    d1 = d1 < 0 ? d1 + rank : d1;
    if (std::min(d0, d1) == rank - 2 && std::max(d0, d1) == rank - 1) {
      int64_t keptRank = int64_t(in.shape.size());
      return viewTranspose(keptRank - 2, keptRank - 1, in, out, error);
    }
    if (d0 == d1 && d0 >= 0 && d0 < rank) return (out = in, true);
  }
  *error = "a view of heads whose batch dims do not merge";
  return false;
}

bool invertViewChain(llvm::ArrayRef<mlir::Operation*> chain, StridedView& out, bool keepBatchDims) {
  if (chain.empty()) return false;
  auto shapeOf = [](mlir::Value v) { return llvm::cast<mlir::RankedTensorType>(v.getType()).getShape(); };
  StridedView cur = contiguousView(shapeOf(chain.back()->getResult(0)));
  std::string error;
  for (mlir::Operation* op : llvm::reverse(chain)) {
    llvm::ArrayRef<int64_t> inShape = shapeOf(op->getOperand(0));
    StridedView next;
    bool ok = llvm::TypeSwitch<mlir::Operation*, bool>(op)
                  .Case([&](TransposeIntOp o) { return viewTranspose(o.getDim0(), o.getDim1(), cur, next, &error); })
                  .Case([&](TOp) { return viewT(cur, next, &error); })
                  .Case([&](PermuteOp o) {
                    llvm::SmallVector<int64_t> inverse(o.getDims().size(), 0);
                    int64_t rank = int64_t(inverse.size());
                    for (auto [i, d] : llvm::enumerate(o.getDims())) inverse[size_t(d < 0 ? d + rank : d)] = int64_t(i);
                    return viewPermute(inverse, cur, next, &error);
                  })
                  .Case([&](UnsqueezeOp o) {
                    int64_t rank = int64_t(cur.shape.size()), d = o.getDim();
                    return viewSqueeze(d < 0 ? d + rank : d, cur, next, &error);
                  })
                  .Case([&](SqueezeDimOp o) {
                    int64_t rank = int64_t(inShape.size()), d = o.getDim();
                    if (rank == 0) return (next = cur, true);
                    d = d < 0 ? d + rank : d;
                    if (inShape[size_t(d)] != 1) return (next = cur, true);
                    return viewUnsqueeze(d, cur, next, &error);
                  })
                  .Case([&](ExpandOp) {
                    if (numel(inShape) != numel(cur.shape)) return false;  // repeats elements
                    return viewReshape(inShape, cur, next, &error);
                  })
                  .Case<ViewShapeOp, UnsafeViewOp, ReshapeOp, ReshapeAliasOp, CloneOp>(
                      [&](mlir::Operation*) { return viewReshape(inShape, cur, next, &error); })
                  .Default([](mlir::Operation*) { return false; });
    if (!ok && keepBatchDims && op == chain.front() && numel(inShape) == numel(cur.shape) &&
        regroupsLeadingDims(cur.shape, inShape) &&
        llvm::isa<ViewShapeOp, UnsafeViewOp, ReshapeOp, ReshapeAliasOp, ExpandOp, CloneOp>(op)) {
      next = cur;
      ok = true;
    }
    if (!ok) return false;
    cur = next;
  }
  llvm::ArrayRef<int64_t> rootShape = shapeOf(chain.front()->getOperand(0));
  if (llvm::ArrayRef<int64_t>(cur.shape) != rootShape && !(keepBatchDims && regroupsLeadingDims(cur.shape, rootShape)))
    return false;
  out = cur;
  return true;
}

bool applyView(mlir::Operation* op, const StridedView& in, StridedView& out, std::string* error,
               bool* notAView) {
  return llvm::TypeSwitch<mlir::Operation*, bool>(op)
      .Case([&](TransposeIntOp o) { return viewTranspose(o.getDim0(), o.getDim1(), in, out, error); })
      .Case([&](TOp) { return viewT(in, out, error); })
      .Case([&](PermuteOp o) { return viewPermute(o.getDims(), in, out, error); })
      .Case([&](UnsqueezeOp o) { return viewUnsqueeze(o.getDim(), in, out, error); })
      .Case([&](SqueezeDimOp o) { return viewSqueeze(o.getDim(), in, out, error); })
      .Case([&](ExpandOp o) { return viewExpand(o.getSize(), in, out, error); })
      .Case([&](SliceTensorOp o) {
        return viewSlice(o.getDim(), o.getStart(), o.getEnd(), o.getStep(), in, out, error);
      })
      .Case([&](SelectIntOp o) { return viewSelect(o.getDim(), o.getIndex(), in, out, error); })
      .Case([&](ViewShapeOp o) { return viewReshape(o.getSize(), in, out, error, notAView); })
      .Case([&](UnsafeViewOp o) { return viewReshape(o.getSize(), in, out, error, notAView); })
      .Case([&](ReshapeOp o) { return viewReshape(o.getSize(), in, out, error, notAView); })
      .Case([&](ReshapeAliasOp o) { return viewReshape(o.getSize(), in, out, error, notAView); })
      .Case([&](CloneOp) { return (out = in, true); })
      .Default([&](mlir::Operation*) { return (*error = "not a view op", false); });
}

}  // namespace neuroncc::aten
