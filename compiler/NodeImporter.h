//===- NodeImporter.h - reading one ATen graph node's arguments -----------===//
//
// Shared by the importer's registry (GraphImporter.cpp) and the operators it
// imports as compositions of others (ComposedOps.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "aten_graph.pb.h"
#include "dialects/aten/AtenDialect.h"
#include "dialects/aten/TypeRules.h"
#include "dialects/aten/Views.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringMap.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/DenseMap.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

// The importer's own namespace: the MLIR names are used unqualified here and
// in the two files that include this header, nowhere else.
namespace neuroncc::importer {

using namespace mlir;

using graph::Argument;

class NodeImporter;
using Builder = std::function<LogicalResult(NodeImporter&)>;

inline Type elementType(graph::DType dtype, MLIRContext* ctx) {
  switch (dtype) {
    case graph::FLOAT32: return Float32Type::get(ctx);
    case graph::BFLOAT16: return BFloat16Type::get(ctx);
    case graph::FLOAT16: return Float16Type::get(ctx);
    case graph::FLOAT64: return Float64Type::get(ctx);
    case graph::INT64: return IntegerType::get(ctx, 64);
    case graph::INT32: return IntegerType::get(ctx, 32);
    // uint8, int8 and int16 values are computed as int32 (the device as
    // f32), wrapped into their range after each node that makes one
    // (GraphImporter); only graph inputs and outputs keep the narrow type.
    case graph::INT16:
    case graph::INT8:
    case graph::UINT8: return IntegerType::get(ctx, 32);
    case graph::BOOL: return IntegerType::get(ctx, 1);
    default: return Type();
  }
}

// The narrow integer type of a graph input or output (ui8, si8, si16), or
// null for a dtype that is not narrow.
inline IntegerType narrowIntegerType(graph::DType dtype, MLIRContext* ctx) {
  switch (dtype) {
    case graph::UINT8: return IntegerType::get(ctx, 8, IntegerType::Unsigned);
    case graph::INT8: return IntegerType::get(ctx, 8, IntegerType::Signed);
    case graph::INT16: return IntegerType::get(ctx, 16, IntegerType::Signed);
    default: return IntegerType();
  }
}

// Reads one node's arguments and builds its op(s).
class NodeImporter {
 public:
  NodeImporter(const graph::Node& node, OpBuilder& b, Location loc,
               llvm::StringMap<SmallVector<Value>>& values)
      : node(node), b(b), loc(loc), values(values) {}

  const graph::Node& node;
  OpBuilder& b;
  // The values of narrow integer dtypes (set by GraphImporter), for the
  // Python ints eager wraps into a narrow tensor's dtype (scalarWith).
  const llvm::DenseMap<Value, IntegerType>* narrowValues = nullptr;
  Location loc;
  llvm::StringMap<SmallVector<Value>>& values;

  // The argument at schema position `pos` or with keyword `name`.
  const Argument* arg(size_t pos, StringRef name) const {
    for (const Argument& a : node.args())
      if (!a.name().empty() && a.name() == name) return &a;
    size_t positional = 0;
    for (const Argument& a : node.args()) {
      if (!a.name().empty()) continue;
      if (positional++ == pos) return &a;
    }
    return nullptr;
  }

  FailureOr<Value> tensor(size_t pos, StringRef name) {
    const Argument* a = arg(pos, name);
    if (!a || a->value_case() != Argument::kTensor)
      return error("argument '" + name.str() + "' must be a tensor");
    auto it = values.find(a->tensor());
    if (it == values.end() || it->second.size() != 1)
      return error("argument '" + name.str() + "' names unknown value '" + a->tensor() + "'");
    return it->second.front();
  }
  bool isTensor(size_t pos, StringRef name) const {
    const Argument* a = arg(pos, name);
    return a && a->value_case() == Argument::kTensor;
  }
  FailureOr<double> number(size_t pos, StringRef name, std::optional<double> fallback = std::nullopt) {
    const Argument* a = arg(pos, name);
    if (!a || a->value_case() == Argument::kNone) {
      if (fallback) return *fallback;
      return error("missing number argument '" + name.str() + "'");
    }
    switch (a->value_case()) {
      case Argument::kFloatValue: return a->float_value();
      case Argument::kIntValue: return double(a->int_value());
      case Argument::kBoolValue: return a->bool_value() ? 1.0 : 0.0;
      default: return error("argument '" + name.str() + "' must be a number");
    }
  }
  // A Scalar that eager converts to the dtype the op computes and returns
  // (addmm's beta and alpha, masked_fill's value, threshold's bounds,
  // index_add's alpha, arange's start and step): for an integer result it
  // is truncated toward zero (int64 addmm with beta=1.5 scales by 1,
  // masked_fill with 2.7 writes 2), for a bool result it is its truth value.
  // Float results keep it as given.
  FailureOr<double> numberAsResult(size_t pos, StringRef name, std::optional<double> fallback = std::nullopt) {
    FailureOr<double> v = number(pos, name, fallback);
    if (failed(v) || node.outputs_size() == 0) return v;
    Type elem = elementType(node.outputs(0).dtype(), b.getContext());
    if (!elem || aten::isFloatType(elem)) return v;
    if (elem.isInteger(1)) return *v != 0 ? 1.0 : 0.0;
    return std::trunc(*v);
  }
  bool isFloatScalar(size_t pos, StringRef name) const {
    const Argument* a = arg(pos, name);
    return a && a->value_case() == Argument::kFloatValue;
  }
  FailureOr<int64_t> integer(size_t pos, StringRef name, std::optional<int64_t> fallback = std::nullopt) {
    const Argument* a = arg(pos, name);
    if (!a || a->value_case() == Argument::kNone) {
      if (fallback) return *fallback;
      return error("missing integer argument '" + name.str() + "'");
    }
    if (a->value_case() == Argument::kIntValue) return a->int_value();
    if (a->value_case() == Argument::kBoolValue) return int64_t(a->bool_value());
    return error("argument '" + name.str() + "' must be an integer");
  }
  FailureOr<bool> boolean(size_t pos, StringRef name, bool fallback) {
    const Argument* a = arg(pos, name);
    if (!a || a->value_case() == Argument::kNone) return fallback;
    if (a->value_case() == Argument::kBoolValue) return a->bool_value();
    if (a->value_case() == Argument::kIntValue) return a->int_value() != 0;
    return error("argument '" + name.str() + "' must be a bool");
  }
  FailureOr<SmallVector<int64_t>> ints(size_t pos, StringRef name,
                                       std::optional<SmallVector<int64_t>> fallback = std::nullopt) {
    const Argument* a = arg(pos, name);
    if (!a || a->value_case() == Argument::kNone) {
      if (fallback) return *fallback;
      return error("missing integer list argument '" + name.str() + "'");
    }
    if (a->value_case() == Argument::kIntValue) return SmallVector<int64_t>{a->int_value()};
    if (a->value_case() != Argument::kIntList)
      return error("argument '" + name.str() + "' must be a list of integers");
    return SmallVector<int64_t>(a->int_list().values().begin(), a->int_list().values().end());
  }
  FailureOr<std::string> string(size_t pos, StringRef name, std::string fallback) {
    const Argument* a = arg(pos, name);
    if (!a || a->value_case() == Argument::kNone) return fallback;
    if (a->value_case() != Argument::kStringValue)
      return error("argument '" + name.str() + "' must be a string");
    return a->string_value();
  }

  FailureOr<RankedTensorType> resultType(size_t i = 0) {
    if (int(i) >= node.outputs_size()) return error("node has no metadata for result " + std::to_string(i));
    const graph::TensorMeta& m = node.outputs(int(i));
    Type elem = elementType(m.dtype(), b.getContext());
    if (!elem) return error("result has an unsupported dtype");
    SmallVector<int64_t> shape(m.shape().begin(), m.shape().end());
    for (int64_t d : shape)
      if (d < 0) return error("result has a negative dimension");
    bool fromConstants = llvm::all_of(node.args(), [&](const Argument& a) {
      if (a.value_case() != Argument::kTensor) return true;
      auto it = values.find(a.tensor());
      return it == values.end() || llvm::all_of(it->second, [](Value v) { return v.getDefiningOp<arith::ConstantOp>(); });
    });
    // f64 is computed at compile time only (constants fold); the device
    // computes in f32, bf16 and f16.
    if (elem.isF64() && !fromConstants)
      return error("float64 results are not supported (the device computes in f32, bf16 and f16); "
                   "cast to float32 before exporting");
    return RankedTensorType::get(shape, elem);
  }

  FailureOr<SmallVector<Type>> resultTypes(size_t count) {
    SmallVector<Type> types;
    for (size_t i = 0; i < count; ++i) {
      FailureOr<RankedTensorType> t = resultType(i);
      if (failed(t)) return failure();
      types.push_back(*t);
    }
    return types;
  }

  // Records `op`'s results as this node's value(s).
  LogicalResult define(Operation* op) {
    auto& slot = values[node.name()];
    slot.assign(op->result_begin(), op->result_end());
    return success();
  }

  template <typename OpTy, typename... Args>
  LogicalResult create(Args&&... args) {
    FailureOr<RankedTensorType> type = resultType();
    if (failed(type)) return failure();
    return define(b.create<OpTy>(loc, *type, std::forward<Args>(args)...));
  }

  // Ops that only take float tensors here (unary math, ops with a Scalar,
  // reductions, softmax) are also defined by PyTorch on integer and bool
  // tensors. Such an operand is cast to the result's float dtype (f32 when
  // the result is an integer, as for arange(n) * 2), and an integer result
  // is cast back, so the graph keeps PyTorch's types at every node.
  template <typename OpTy, typename... Args>
  LogicalResult createOnFloat(Value self, Args&&... args) {
    FailureOr<RankedTensorType> type = resultType();
    if (failed(type)) return failure();
    auto selfType = llvm::cast<RankedTensorType>(self.getType());
    if (aten::isFloatType(selfType.getElementType()) && aten::isFloatType(type->getElementType()))
      return define(b.create<OpTy>(loc, *type, self, std::forward<Args>(args)...));
    Type compute = aten::isFloatType(type->getElementType()) ? type->getElementType() : b.getF32Type();
    if (!aten::isFloatType(selfType.getElementType()))
      self = b.create<aten::ToCopyOp>(loc, selfType.clone(compute), self);
    auto op = b.create<OpTy>(loc, type->clone(compute), self, std::forward<Args>(args)...);
    if (compute == type->getElementType()) return define(op);
    return define(b.create<aten::ToCopyOp>(loc, *type, op->getResult(0)));
  }

  LogicalResult error(const std::string& msg) {
    emitError(loc) << node.target() << ": " << msg;
    return failure();
  }
};

// FailureOr<T> from a helper that already reported its error.
#define NCC_TRY(var, expr)        \
  auto var##_or = (expr);         \
  if (failed(var##_or)) return failure(); \
  auto var = *var##_or;

// A Python number combined with a bf16 or f16 tensor is first converted to
// the tensor's dtype by eager (a "wrapped number" takes the tensor's type):
// bf16 `x * 2.7` multiplies by 2.703125 and `x > 0.1` compares with
// 0.10009765625. The device computes with the converted value too, so that
// comparisons and casts to integers agree with eager at the boundaries.
inline double asTensorScalar(double v, Value tensor) {
  Type elem = llvm::cast<RankedTensorType>(tensor.getType()).getElementType();
  if (!elem.isBF16() && !elem.isF16()) return v;
  bool lost = false;
  APFloat f(v);
  f.convert(llvm::cast<FloatType>(elem).getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
  return f.convertToDouble();
}

// A whole number wrapped into a narrow type's range, as eager converts a
// Python int to uint8/int8/int16 (300 is 44 in uint8, 200 is -56 in int8);
// unchanged for a null type.
inline double wrappedInto(IntegerType narrow, double v) {
  if (!narrow) return v;
  double range = std::ldexp(1.0, int(narrow.getWidth())), low = narrow.isSigned() ? -range / 2 : 0.0;
  return v - range * std::floor((v - low) / range);
}

// The Scalar at `pos` combined with `tensor` in an op that computes in the
// tensor's dtype (a comparison, an integer division or remainder): a Python
// int with a uint8/int8/int16 tensor takes that dtype first, wrapping around
// as eager's conversion does (uint8 `x > -1` compares with 255, `x // 300`
// divides by 44); otherwise as asTensorScalar (a float promotes the op).
inline FailureOr<double> scalarWith(NodeImporter& n, size_t pos, StringRef name, Value tensor) {
  FailureOr<double> v = n.number(pos, name);
  if (failed(v)) return failure();
  IntegerType narrow = n.narrowValues ? n.narrowValues->lookup(tensor) : IntegerType();
  if (!narrow || n.isFloatScalar(pos, name)) return asTensorScalar(*v, tensor);
  return wrappedInto(narrow, *v);
}

// Integer and bool graph inputs stay so in HBM. Elementwise ops and
// reductions load them into f32 tiles (the DMA converts), and the gather
// reads embedding indices in place when they are a whole input; the ops
// that copy HBM as it is (cat) and a gather through a view cannot. For those
// readIntegerInput materializes the value as a computed one (through f32,
// exact below 2^24, as every integer on the device) when it is such an input
// or a view of one (`ids.view(-1, n)`, `ids[:, 1:]`); other values are
// returned as they are. wholeInputInPlace keeps a whole input (the gather).
inline Value readIntegerInput(OpBuilder& b, Location loc, Value v, bool wholeInputInPlace) {
  auto type = llvm::cast<RankedTensorType>(v.getType());
  if (!llvm::isa<IntegerType>(type.getElementType())) return v;
  Value root = v;
  while (Operation* def = root.getDefiningOp()) {
    if (!aten::isViewOp(def) || def->getNumOperands() < 1) return v;
    root = def->getOperand(0);
  }
  if (!llvm::isa<BlockArgument>(root) || (wholeInputInPlace && root == v)) return v;
  Value wide = b.create<aten::ToCopyOp>(loc, type.clone(b.getF32Type()), v);
  return b.create<aten::ToCopyOp>(loc, type, wide);
}

// The same for many views of one input (a composition's slices, each a
// piece of a cat): the views are rebuilt on one computed copy of the input,
// made on first use and kept in `copies`, instead of one copy per view.
inline Value viewOfComputedCopy(OpBuilder& b, Location loc, Value v, llvm::DenseMap<Value, Value>& copies) {
  auto type = llvm::cast<RankedTensorType>(v.getType());
  if (!llvm::isa<IntegerType>(type.getElementType())) return v;
  SmallVector<Operation*> views;
  Value root = v;
  while (Operation* def = root.getDefiningOp()) {
    if (!aten::isViewOp(def) || def->getNumOperands() < 1) return v;
    views.push_back(def);
    root = def->getOperand(0);
  }
  if (!llvm::isa<BlockArgument>(root)) return v;
  Value& copy = copies[root];
  if (!copy) {
    auto rootType = llvm::cast<RankedTensorType>(root.getType());
    Value wide = b.create<aten::ToCopyOp>(loc, rootType.clone(b.getF32Type()), root);
    copy = b.create<aten::ToCopyOp>(loc, rootType, wide);
  }
  Value x = copy;
  for (Operation* view : llvm::reverse(views)) {
    IRMapping mapping;
    mapping.map(view->getOperand(0), x);
    x = b.clone(*view, mapping)->getResult(0);
  }
  return x;
}

// Embedding indices as the gather can read them.
inline Value gatherableIndices(OpBuilder& b, Location loc, Value indices) {
  return readIntegerInput(b, loc, indices, /*wholeInputInPlace=*/true);
}

// The builders of the operators imported as compositions of other aten ops
// (ComposedOps.cpp), added to the importer's registry.
void addComposedOps(std::map<std::string, Builder>& table);
// Math operators, products and scans, diagonals and losses (ComposedMath.cpp).
void addComposedMathOps(std::map<std::string, Builder>& table);
// Sorting and selection, writes into a copy, layout ops (ComposedIndexing.cpp).
void addComposedIndexingOps(std::map<std::string, Builder>& table);
// Bitwise ops with a Scalar, and shifts, of integers (ComposedBitwise.cpp).
void addComposedBitwiseOps(std::map<std::string, Builder>& table);
// bitwise_and/or/xor (op "and", "or", "xor") of integer tensors, and
// bitwise_not ("not") of one (ComposedBitwise.cpp).
LogicalResult integerBitwise(NodeImporter& n, StringRef op);

}  // namespace neuroncc::importer
