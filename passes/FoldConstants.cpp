//===- FoldConstants.cpp - evaluate ops on compile-time constants ---------===//
//
// Default-initialised parameters (zero biases, unit weights), `arange`,
// `full` and the masks built from them make ops whose every operand is known
// at compile time. Such an op is evaluated here, once, instead of on the
// device: an elementwise op, a reduction, a cast, a cat, or a view.
//
// Method: a direct interpreter over DenseElementsAttr. Values are computed in
// double precision and rounded once to the result's element type (round to
// nearest even for floats, toward zero for integers, != 0 for bools), which
// matches PyTorch eager to within one rounding of the result dtype. A splat
// stays a splat (one evaluation, whatever the shape). Known weakness: a
// non-splat result is materialised element by element, so results above
// `max-elements` are left to the device, and views that would duplicate a
// non-splat constant (expand) are left to DMA access patterns, which read the
// constant in place.
//
//===----------------------------------------------------------------------===//

#include <cmath>
#include <cstring>
#include <functional>

#include "passes/Passes.h"
#include "passes/ScalarEval.h"
#include "dialects/aten/TypeRules.h"
#include "dialects/aten/Views.h"
#include "dialects/nc/NcDialect.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

namespace neuroncc {
#define GEN_PASS_DEF_FOLDCONSTANTS
#include "passes/Passes.h.inc"
}  // namespace neuroncc

using namespace mlir;

namespace neuroncc {
namespace {

// A constant's elements as doubles; a splat holds one.
struct Values {
  SmallVector<int64_t> shape;
  std::vector<double> data;
  bool splat = false;
  double at(int64_t i) const { return splat ? data[0] : data[size_t(i)]; }
};

int64_t numElements(ArrayRef<int64_t> shape) { return ShapedType::getNumElements(shape); }

std::optional<Values> valuesOf(Value v) {
  auto cst = v.getDefiningOp<arith::ConstantOp>();
  if (!cst) return std::nullopt;
  auto dense = llvm::dyn_cast<DenseElementsAttr>(cst.getValue());
  if (!dense) return std::nullopt;
  Values out;
  auto type = llvm::cast<RankedTensorType>(dense.getType());
  out.shape.assign(type.getShape().begin(), type.getShape().end());
  out.splat = dense.isSplat();
  Type elem = type.getElementType();
  auto read = [&](auto range) {
    for (auto x : range) {
      if constexpr (std::is_same_v<decltype(x), APFloat>) out.data.push_back(x.convertToDouble());
      else if constexpr (std::is_same_v<decltype(x), bool>) out.data.push_back(x ? 1.0 : 0.0);
      else if constexpr (std::is_floating_point_v<decltype(x)>) out.data.push_back(double(x));
      else out.data.push_back(double(x.getSExtValue()));
      if (out.splat) break;
    }
  };
  // f32, f64 and bf16 are read straight from the attribute's storage: a
  // constant weight of a million elements would take a second through APFloat.
  if (elem.isF32()) {
    read(dense.getValues<float>());
  } else if (elem.isF64()) {
    read(dense.getValues<double>());
  } else if (elem.isBF16()) {
    ArrayRef<char> raw = dense.getRawData();
    size_t n = out.splat ? 1 : raw.size() / 2;
    out.data.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      uint32_t bits = uint32_t(uint8_t(raw[2 * i])) | uint32_t(uint8_t(raw[2 * i + 1])) << 8;
      bits <<= 16;  // bf16 is the top half of an f32
      float x;
      std::memcpy(&x, &bits, sizeof(x));
      out.data.push_back(double(x));
    }
  } else if (llvm::isa<FloatType>(elem)) read(dense.getValues<APFloat>());
  else if (elem.isInteger(1)) read(dense.getValues<bool>());
  else if (llvm::isa<IntegerType>(elem)) read(dense.getValues<APInt>());
  else return std::nullopt;
  if (out.data.empty()) return std::nullopt;  // an empty tensor: nothing to fold
  return out;
}

// Rounds `v` to `elem` and builds the attribute.
Attribute scalarAttr(Type elem, double v) {
  if (auto f = llvm::dyn_cast<FloatType>(elem)) {
    APFloat x(v);
    bool lost = false;
    x.convert(f.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
    return FloatAttr::get(elem, x);
  }
  if (elem.isInteger(1)) return BoolAttr::get(elem.getContext(), v != 0.0);
  auto it = llvm::cast<IntegerType>(elem);
  double t = std::trunc(v);
  int64_t i = std::isfinite(t) && std::fabs(t) < 9.2e18 ? int64_t(t) : 0;
  return IntegerAttr::get(elem, APInt(it.getWidth(), uint64_t(i), /*isSigned=*/true));
}

DenseElementsAttr makeAttr(RankedTensorType type, const Values& v) {
  Type elem = type.getElementType();
  if (v.splat) return DenseElementsAttr::get(type, scalarAttr(elem, v.data[0]));
  if (elem.isF32()) {
    // A double rounds to the nearest f32 (ties to even) under the C++
    // conversion on IEEE hardware, as APFloat's convert does.
    SmallVector<float> xs(v.data.begin(), v.data.end());
    return DenseElementsAttr::get(type, ArrayRef<float>(xs));
  }
  if (elem.isF64()) return DenseElementsAttr::get(type, ArrayRef<double>(v.data));
  if (elem.isBF16()) {
    SmallVector<char> raw;
    raw.reserve(2 * v.data.size());
    for (double d : v.data) {
      uint16_t bits;
      float f = float(d);
      if (double(f) == d && std::isfinite(f)) {
        // Exactly an f32 (every value read from a bf16 or f32 constant):
        // one rounding, f32 -> bf16, to nearest even.
        uint32_t u;
        std::memcpy(&u, &f, sizeof(u));
        bits = uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
      } else {
        // Rounding through f32 first could round twice: let APFloat round once.
        APInt b = llvm::cast<FloatAttr>(scalarAttr(elem, d)).getValue().bitcastToAPInt();
        bits = uint16_t(b.getZExtValue());
      }
      raw.push_back(char(bits & 0xFF));
      raw.push_back(char(bits >> 8));
    }
    return DenseElementsAttr::getFromRawBuffer(type, raw);
  }
  if (auto f = llvm::dyn_cast<FloatType>(elem)) {
    SmallVector<APFloat> xs;
    xs.reserve(v.data.size());
    for (double d : v.data) xs.push_back(llvm::cast<FloatAttr>(scalarAttr(f, d)).getValue());
    return DenseElementsAttr::get(type, xs);
  }
  if (elem.isInteger(1)) {
    SmallVector<bool> xs;
    for (double d : v.data) xs.push_back(d != 0.0);
    return DenseElementsAttr::get(type, xs);
  }
  SmallVector<APInt> xs;
  for (double d : v.data) xs.push_back(llvm::cast<IntegerAttr>(scalarAttr(elem, d)).getValue());
  return DenseElementsAttr::get(type, xs);
}

// Element strides of `shape` broadcast into `out` (0 along stretched dims).
SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> shape, ArrayRef<int64_t> out) {
  SmallVector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (int64_t i = int64_t(shape.size()) - 1; i >= 0; --i) {
    int64_t d = int64_t(out.size()) - int64_t(shape.size()) + i;
    if (shape[size_t(i)] != 1) strides[size_t(d)] = stride;
    stride *= shape[size_t(i)];
  }
  return strides;
}

// Visits every index of `shape` in row-major order with the matching offset
// into each of the strided operands.
void forEachIndex(ArrayRef<int64_t> shape, ArrayRef<SmallVector<int64_t>> strides,
                  llvm::function_ref<void(ArrayRef<int64_t>)> visit) {
  size_t rank = shape.size(), n = strides.size();
  SmallVector<int64_t> index(rank, 0), offsets(n, 0);
  int64_t total = numElements(shape);
  for (int64_t e = 0; e < total; ++e) {
    visit(offsets);
    for (int64_t d = int64_t(rank) - 1; d >= 0; --d) {
      size_t du = size_t(d);
      ++index[du];
      for (size_t k = 0; k < n; ++k) offsets[k] += strides[k][du];
      if (index[du] < shape[du]) break;
      for (size_t k = 0; k < n; ++k) offsets[k] -= strides[k][du] * shape[du];
      index[du] = 0;
    }
  }
}

struct FoldConstantsPass : impl::FoldConstantsBase<FoldConstantsPass> {
  using FoldConstantsBase::FoldConstantsBase;

  std::optional<Values> evaluate(Operation* op, ArrayRef<Values> in, RankedTensorType resultType) {
    ArrayRef<int64_t> outShape = resultType.getShape();
    int64_t total = numElements(outShape);
    bool allSplat = llvm::all_of(in, [](const Values& v) { return v.splat; });
    Values out;
    out.shape.assign(outShape.begin(), outShape.end());
    if (auto fn = scalarFunction(op)) {
      SmallVector<double> args;
      if (allSplat) {
        for (const Values& v : in) args.push_back(v.data[0]);
        out.splat = true;
        out.data.push_back((*fn)(args));
        return out;
      }
      if (total > maxElements) return std::nullopt;
      SmallVector<SmallVector<int64_t>> strides;
      for (const Values& v : in)
        strides.push_back(v.splat ? SmallVector<int64_t>(outShape.size(), 0) : broadcastStrides(v.shape, outShape));
      out.data.reserve(size_t(total));
      args.resize(in.size());
      forEachIndex(outShape, strides, [&](ArrayRef<int64_t> offs) {
        for (size_t k = 0; k < in.size(); ++k) args[k] = in[k].at(offs[k]);
        out.data.push_back((*fn)(args));
      });
      return out;
    }
    if (llvm::isa<aten::SumDimIntListOp, aten::MeanDimOp, aten::AmaxOp>(op) && aten::reducedDims(op).empty()) {
      out.splat = in[0].splat;  // a reduction of a 0-d tensor is the identity
      out.data = in[0].data;
      return out;
    }
    if (SmallVector<int64_t> dims = aten::reducedDims(op); !dims.empty()) {
      const Values& x = in[0];
      int64_t count = 1;
      for (int64_t d : dims) count *= x.shape[size_t(d)];
      bool isSum = llvm::isa<aten::SumDimIntListOp>(op), isMean = llvm::isa<aten::MeanDimOp>(op);
      bool isMax = llvm::isa<aten::AmaxOp>(op);
      if (!isSum && !isMean && !isMax) return std::nullopt;
      if (x.splat) {
        out.splat = true;
        out.data.push_back(isSum ? x.data[0] * double(count) : x.data[0]);
        return out;
      }
      if (numElements(x.shape) > maxElements) return std::nullopt;
      // Output strides over the input's dims: 0 along reduced dims.
      SmallVector<int64_t> keptShape;
      for (size_t d = 0; d < x.shape.size(); ++d)
        keptShape.push_back(llvm::is_contained(dims, int64_t(d)) ? 1 : x.shape[d]);
      SmallVector<SmallVector<int64_t>> strides{broadcastStrides(keptShape, x.shape),
                                                broadcastStrides(x.shape, x.shape)};
      out.data.assign(size_t(total), isMax ? -HUGE_VAL : 0.0);
      forEachIndex(x.shape, strides, [&](ArrayRef<int64_t> offs) {
        double& acc = out.data[size_t(offs[0])];
        double v = x.data[size_t(offs[1])];
        if (!isMax) acc += v;
        else if (std::isnan(v) || v > acc) acc = std::isnan(acc) ? acc : v;
      });
      if (isMean)
        for (double& v : out.data) v /= double(count);
      return out;
    }
    if (aten::isViewOp(op)) {
      const Values& x = in[0];
      if (x.splat) {
        out.splat = true;
        out.data = x.data;
        return out;
      }
      // A view that would repeat elements stays a view: DMA reads it in place.
      if (total > numElements(x.shape)) return std::nullopt;
      aten::StridedView view;
      std::string error;
      if (!aten::applyView(op, aten::contiguousView(x.shape), view, &error)) return std::nullopt;
      out.data.reserve(size_t(total));
      forEachIndex(outShape, {view.strides}, [&](ArrayRef<int64_t> offs) {
        out.data.push_back(x.data[size_t(view.offset + offs[0])]);
      });
      return out;
    }
    if (auto cat = llvm::dyn_cast<aten::CatOp>(op)) {
      if (total > maxElements) return std::nullopt;
      int64_t dim = int64_t(cat.getDim());  // an I64Attr reads back unsigned
      if (dim < 0) dim += int64_t(outShape.size());
      // Row-major: the output is a sequence of blocks, one per input, for
      // every index of the dims before `dim`.
      int64_t outer = numElements(outShape.take_front(size_t(dim)));
      out.data.reserve(size_t(total));
      for (int64_t o = 0; o < outer; ++o)
        for (const Values& v : in) {
          int64_t block = numElements(ArrayRef<int64_t>(v.shape).drop_front(size_t(dim)));
          for (int64_t i = 0; i < block; ++i) out.data.push_back(v.at(o * block + i));
        }
      return out;
    }
    return std::nullopt;
  }

  void runOnOperation() override {
    SmallVector<Operation*> ops;
    for (Operation& op : getOperation().getBody().front())
      if (op.getDialect() && op.getDialect()->getNamespace() == "aten" && op.getNumResults() == 1) ops.push_back(&op);
    for (Operation* op : ops) {
      auto resultType = llvm::dyn_cast<RankedTensorType>(op->getResult(0).getType());
      if (!resultType || op->getNumOperands() == 0) continue;
      // A narrow integer graph output (ui8, si8, si16) stays a conversion
      // of its i32 value: constants are held in the types the graph computes in.
      if (nc::isNarrowInteger(resultType.getElementType())) continue;
      SmallVector<Values> in;
      bool known = true;
      for (Value v : op->getOperands()) {
        std::optional<Values> x = valuesOf(v);
        if (!x) {
          known = false;
          break;
        }
        in.push_back(std::move(*x));
      }
      if (!known) continue;
      std::optional<Values> out = evaluate(op, in, resultType);
      if (!out) continue;
      OpBuilder b(op);
      auto cst = b.create<arith::ConstantOp>(op->getLoc(), makeAttr(resultType, *out));
      op->getResult(0).replaceAllUsesWith(cst.getResult());
      op->erase();
      ++numFolded;
    }
    SmallVector<Operation*> dead;
    for (Operation& op : getOperation().getBody().front())
      if (llvm::isa<arith::ConstantOp>(op) && op.use_empty()) dead.push_back(&op);
    for (Operation* op : dead) op->erase();
  }
};

}  // namespace
}  // namespace neuroncc
