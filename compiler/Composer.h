//===- Composer.h - building an operator from other aten ops ---------------===//
//
// The helpers of the operators imported as compositions (ComposedOps.cpp,
// ComposedMath.cpp, ComposedIndexing.cpp): a builder that infers each op's
// result type as the op's own inference does, and the argument checks they
// share. Only those files include it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <limits>
#include <numeric>

#include "compiler/NodeImporter.h"

namespace neuroncc::importer {

inline RankedTensorType typeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

// Builds ops at the node's location, computing each result type the way the
// ops' own inference does (broadcasting, promotion, reduced dims).
class Composer {
 public:
  explicit Composer(NodeImporter& n) : n(n), b(n.b), loc(n.loc) {}
  NodeImporter& n;
  OpBuilder& b;
  Location loc;
  llvm::DenseMap<Value, Value> integerInputCopies;  // see cat

  Type f32() { return b.getF32Type(); }
  Type i1() { return b.getI1Type(); }

  Value constant(ArrayRef<int64_t> shape, Type elem, ArrayRef<double> values) {
    auto type = RankedTensorType::get(shape, elem);
    SmallVector<Attribute> attrs;
    for (double v : values) attrs.push_back(attrOf(elem, v));
    if (attrs.size() == 1 && type.getNumElements() != 1)
      return b.create<arith::ConstantOp>(loc, DenseElementsAttr::get(type, attrs.front()));
    return b.create<arith::ConstantOp>(loc, DenseElementsAttr::get(type, attrs));
  }
  Value scalar(double v, Type elem) { return constant({}, elem, {v}); }
  Value splat(ArrayRef<int64_t> shape, Type elem, double v) { return constant(shape, elem, {v}); }

  Value cast(Value v, Type elem) {
    auto t = typeOf(v);
    if (t.getElementType() == elem) return v;
    return b.create<aten::ToCopyOp>(loc, t.clone(elem), v);
  }
  // A float dtype to compute in: the tensor's own, or f32 for integers and bools.
  Type floatOf(Type elem) { return aten::isFloatType(elem) ? elem : f32(); }
  Value toFloat(Value v) { return cast(v, floatOf(typeOf(v).getElementType())); }
  // An op asked for an integer dtype (cumsum(x, dtype=torch.int64)) converts
  // a float input to it first, truncating each value, as eager does; the
  // op then computes on those whole numbers.
  Value inIntegerResultDtype(Value v, Type resultElem) {
    bool integer = llvm::isa<IntegerType>(resultElem) && !resultElem.isInteger(1);
    return integer && aten::isFloatType(typeOf(v).getElementType()) ? cast(v, resultElem) : v;
  }

  template <typename OpTy>
  Value unary(Value x) {
    return b.create<OpTy>(loc, typeOf(x), x);
  }
  template <typename OpTy, typename... Attrs>
  Value binary(Value x, Value y, Attrs... attrs) {
    auto shape = *aten::broadcastShapes(typeOf(x).getShape(), typeOf(y).getShape());
    Type elem = aten::promoteTypes(typeOf(x), typeOf(y));
    return b.create<OpTy>(loc, RankedTensorType::get(shape, elem), x, y, attrs...);
  }
  Value add(Value x, Value y, double alpha = 1.0) { return binary<aten::AddTensorOp>(x, y, b.getF64FloatAttr(alpha)); }
  Value sub(Value x, Value y, double alpha = 1.0) { return binary<aten::SubTensorOp>(x, y, b.getF64FloatAttr(alpha)); }
  Value mul(Value x, Value y) { return binary<aten::MulTensorOp>(x, y); }
  Value div(Value x, Value y) { return binary<aten::DivTensorOp>(x, y); }
  Value maximum(Value x, Value y) { return binary<aten::MaximumOp>(x, y); }
  Value minimum(Value x, Value y) { return binary<aten::MinimumOp>(x, y); }
  Value mulScalar(Value x, double s) { return b.create<aten::MulScalarOp>(loc, typeOf(x), x, b.getF64FloatAttr(s)); }
  Value addScalar(Value x, double s) {
    return b.create<aten::AddScalarOp>(loc, typeOf(x), x, b.getF64FloatAttr(s), b.getF64FloatAttr(1.0));
  }
  Value powScalar(Value x, double e) { return b.create<aten::PowTensorScalarOp>(loc, typeOf(x), x, b.getF64FloatAttr(e)); }

  template <typename OpTy>
  Value compare(Value x, Value y) {
    auto shape = *aten::broadcastShapes(typeOf(x).getShape(), typeOf(y).getShape());
    return b.create<OpTy>(loc, RankedTensorType::get(shape, i1()), x, y);
  }
  template <typename OpTy>
  Value compareScalar(Value x, double s) {
    return b.create<OpTy>(loc, typeOf(x).clone(i1()), x, b.getF64FloatAttr(s));
  }
  Value where(Value c, Value x, Value y) {
    auto xy = *aten::broadcastShapes(typeOf(x).getShape(), typeOf(y).getShape());
    auto shape = *aten::broadcastShapes(typeOf(c).getShape(), xy);
    return b.create<aten::WhereSelfOp>(loc, RankedTensorType::get(shape, aten::promoteTypes(typeOf(x), typeOf(y))), c, x, y);
  }
  Value logicalOr(Value x, Value y) { return where(x, scalar(1, i1()), y); }
  Value logicalNot(Value x) { return where(x, scalar(0, i1()), scalar(1, i1())); }
  // The f32 constant start, start + 1, ... (n values) in `shape`.
  Value iota(int64_t n, ArrayRef<int64_t> shape, double start = 0.0) {
    SmallVector<double> v(n);
    std::iota(v.begin(), v.end(), start);
    return constant(shape, f32(), v);
  }
  Value logicalAnd(Value x, Value y) { return where(x, y, scalar(0, i1())); }
  Value isNan(Value x) { return compare<aten::NeTensorOp>(x, x); }

  // Reduced dims (negative ones counted from the end; none: every dim).
  SmallVector<int64_t> reducedShape(RankedTensorType t, ArrayRef<int64_t> dims, bool keepdim) {
    SmallVector<bool> reduced(t.getRank(), dims.empty());
    for (int64_t d : dims) reduced[d < 0 ? d + t.getRank() : d] = true;
    SmallVector<int64_t> shape;
    for (int64_t i = 0; i < t.getRank(); ++i) {
      if (!reduced[i]) shape.push_back(t.getDimSize(i));
      else if (keepdim) shape.push_back(1);
    }
    return shape;
  }
  template <typename OpTy>
  Value reduce(Value x, ArrayRef<int64_t> dims, bool keepdim) {
    auto t = typeOf(x);
    return b.create<OpTy>(loc, RankedTensorType::get(reducedShape(t, dims, keepdim), t.getElementType()), x,
                          b.getDenseI64ArrayAttr(dims), b.getBoolAttr(keepdim));
  }
  Value sum(Value x, ArrayRef<int64_t> dims, bool keepdim) { return reduce<aten::SumDimIntListOp>(x, dims, keepdim); }
  Value amax(Value x, ArrayRef<int64_t> dims, bool keepdim) { return reduce<aten::AmaxOp>(x, dims, keepdim); }
  Value amin(Value x, ArrayRef<int64_t> dims, bool keepdim) {
    return unary<aten::NegOp>(amax(unary<aten::NegOp>(x), dims, keepdim));
  }

  Value reshape(Value x, ArrayRef<int64_t> shape) {
    if (typeOf(x).getShape() == shape) return x;
    return b.create<aten::ReshapeOp>(loc, typeOf(x).clone(shape), x, b.getDenseI64ArrayAttr(shape));
  }
  Value permute(Value x, ArrayRef<int64_t> perm) {
    auto t = typeOf(x);
    SmallVector<int64_t> shape;
    bool identity = true;
    for (auto [i, p] : llvm::enumerate(perm)) {
      shape.push_back(t.getDimSize(p));
      identity &= p == int64_t(i);
    }
    if (identity) return x;
    return b.create<aten::PermuteOp>(loc, t.clone(shape), x, b.getDenseI64ArrayAttr(perm));
  }
  Value slice(Value x, int64_t dim, int64_t start, int64_t end, int64_t step = 1) {
    auto t = typeOf(x);
    int64_t size = t.getDimSize(dim);
    if (start == 0 && end >= size && step == 1) return x;
    SmallVector<int64_t> shape(t.getShape());
    shape[dim] = end > start ? (end - start + step - 1) / step : 0;
    return b.create<aten::SliceTensorOp>(loc, t.clone(shape), x, b.getI64IntegerAttr(dim), b.getI64IntegerAttr(start),
                                         b.getI64IntegerAttr(end), b.getI64IntegerAttr(step));
  }
  // (A cat copies HBM as it is, which an integer graph input's dtype does
  // not allow: such pieces are read from a computed copy, see
  // viewOfComputedCopy.)
  Value cat(ArrayRef<Value> xs, int64_t dim) {
    if (xs.size() == 1) return xs.front();
    SmallVector<int64_t> shape(typeOf(xs.front()).getShape());
    shape[dim] = 0;
    SmallVector<Value> pieces;
    for (Value x : xs) {
      shape[dim] += typeOf(x).getDimSize(dim);
      pieces.push_back(viewOfComputedCopy(b, loc, x, integerInputCopies));
    }
    return b.create<aten::CatOp>(loc, typeOf(xs.front()).clone(shape), pieces, b.getI64IntegerAttr(dim));
  }
  Value unsqueeze(Value x, int64_t dim) {
    SmallVector<int64_t> shape(typeOf(x).getShape());
    shape.insert(shape.begin() + dim, 1);
    return b.create<aten::UnsqueezeOp>(loc, typeOf(x).clone(shape), x, b.getI64IntegerAttr(dim));
  }
  Value expand(Value x, ArrayRef<int64_t> shape) {
    if (typeOf(x).getShape() == shape) return x;
    return b.create<aten::ExpandOp>(loc, typeOf(x).clone(shape), x, b.getDenseI64ArrayAttr(shape));
  }
  Value mm(Value x, Value y) {
    auto shape = {typeOf(x).getDimSize(0), typeOf(y).getDimSize(1)};
    return b.create<aten::MmOp>(loc, RankedTensorType::get(shape, typeOf(x).getElementType()), x, y);
  }
  Value addmm(Value bias, Value x, Value y) {
    auto shape = {typeOf(x).getDimSize(0), typeOf(y).getDimSize(1)};
    return b.create<aten::AddmmOp>(loc, RankedTensorType::get(shape, typeOf(x).getElementType()), bias, x, y,
                                   b.getF64FloatAttr(1.0), b.getF64FloatAttr(1.0));
  }
  // A copy where a composition would otherwise return its operand itself.
  Value fresh(Value result, Value operand) {
    return result == operand ? b.create<aten::CloneOp>(loc, typeOf(result), result).getResult() : result;
  }

  // Ends the node: `v` in the node's recorded shape and dtype.
  LogicalResult finish(Value v, size_t result = 0) {
    FailureOr<RankedTensorType> type = n.resultType(result);
    if (failed(type)) return failure();
    if (typeOf(v).getNumElements() != type->getNumElements())
      return n.error("composition gives " + aten::shapeToString(typeOf(v).getShape()) + ", the graph records " +
                     aten::shapeToString(type->getShape()));
    return define(cast(reshape(v, type->getShape()), type->getElementType()), result);
  }
  LogicalResult define(Value v, size_t result = 0) {
    auto& slot = n.values[n.node.name()];
    if (slot.size() <= result) slot.resize(result + 1);
    slot[result] = v;
    return success();
  }

 private:
  Attribute attrOf(Type elem, double v) {
    if (elem.isInteger(1)) return b.getBoolAttr(v != 0);
    if (auto it = llvm::dyn_cast<IntegerType>(elem)) return b.getIntegerAttr(it, int64_t(v));
    return b.getFloatAttr(elem, v);
  }
};

constexpr double kInf = std::numeric_limits<double>::infinity();

// [1, ..., 1, n] of the given rank.
inline SmallVector<int64_t> alongLast(int64_t rank, int64_t n) {
  SmallVector<int64_t> shape(rank - 1, 1);
  shape.push_back(n);
  return shape;
}

inline int64_t normalizeDim(int64_t d, int64_t rank) { return d < 0 ? d + std::max<int64_t>(rank, 1) : d; }

// An optional tensor argument (None or absent: a null Value).
inline FailureOr<Value> optionalTensor(NodeImporter& n, size_t pos, StringRef name) {
  if (!n.isTensor(pos, name)) return Value();
  return n.tensor(pos, name);
}

// An int[k] argument: one int stands for all k, an empty list takes `fallback`.
inline FailureOr<SmallVector<int64_t>> spatialInts(NodeImporter& n, size_t pos, StringRef name, size_t k,
                                            ArrayRef<int64_t> fallback) {
  FailureOr<SmallVector<int64_t>> v = n.ints(pos, name, SmallVector<int64_t>{});
  if (failed(v)) return failure();
  if (v->empty()) return SmallVector<int64_t>(fallback);
  if (v->size() == 1) return SmallVector<int64_t>(k, v->front());
  if (v->size() != k) return n.error("argument '" + name.str() + "' needs " + std::to_string(k) + " values");
  return *v;
}

inline bool isReducedFloat(Type t) { return t.isBF16() || t.isF16(); }

// Operands read from the graph that an op combines elementwise must
// broadcast together (a malformed graph is refused, not built).
inline LogicalResult checkBroadcast(NodeImporter& n, ArrayRef<Value> values) {
  SmallVector<int64_t> shape;
  for (Value v : values) {
    if (!v) continue;
    auto next = aten::broadcastShapes(shape, typeOf(v).getShape());
    if (!next)
      return n.error("operand of shape " + aten::shapeToString(typeOf(v).getShape()) + " does not broadcast with " +
                     aten::shapeToString(shape));
    shape = *next;
  }
  return success();
}

// A per-channel parameter read from the graph must have one value per channel.
inline LogicalResult checkChannels(NodeImporter& n, Value v, int64_t channels, StringRef what) {
  if (v && typeOf(v).getNumElements() != channels)
    return n.error(what.str() + " has " + std::to_string(typeOf(v).getNumElements()) + " elements for " +
                   std::to_string(channels) + " channels");
  return success();
}

// Reduced dims read from the graph: each within [-rank, rank) (a 0-d tensor
// counts as rank 1, as PyTorch's dim wrapping does).
inline LogicalResult checkDims(NodeImporter& n, ArrayRef<int64_t> dims, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  for (int64_t d : dims)
    if (d < -r || d >= r) return n.error("dim " + std::to_string(d) + " is out of range for rank " + std::to_string(rank));
  return success();
}

// Pads of (left, right) per dim from the last one; negative pads cut.
inline Value padDim(Composer& c, Value x, int64_t dim, int64_t left, int64_t right, double value) {
  int64_t size = typeOf(x).getDimSize(dim);
  x = c.slice(x, dim, std::max<int64_t>(0, -left), size - std::max<int64_t>(0, -right));
  SmallVector<Value> pieces;
  Type elem = typeOf(x).getElementType();
  auto piece = [&](int64_t length) {
    SmallVector<int64_t> shape(typeOf(x).getShape());
    shape[dim] = length;
    return c.splat(shape, elem, value);
  };
  if (left > 0) pieces.push_back(piece(left));
  pieces.push_back(x);
  if (right > 0) pieces.push_back(piece(right));
  return c.cat(pieces, dim);
}

// Pads each of `dims` by left[i] and right[i] elements of `value` (a
// negative amount crops): every crop first, then the pads from the innermost
// dim out, so that each pad's cat reads the one before it directly (a copy
// kernel then assembles the nested cats in one pass: ncc-form-kernels).
inline Value padDims(Composer& c, Value x, ArrayRef<int64_t> dims, ArrayRef<int64_t> left, ArrayRef<int64_t> right,
                     double value) {
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t size = typeOf(x).getDimSize(dims[i]);
    x = c.slice(x, dims[i], std::max<int64_t>(0, -left[i]), size - std::max<int64_t>(0, -right[i]));
  }
  SmallVector<size_t> order(dims.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  llvm::stable_sort(order, [&](size_t a, size_t b) { return dims[a] > dims[b]; });
  for (size_t i : order)
    x = padDim(c, x, dims[i], std::max<int64_t>(0, left[i]), std::max<int64_t>(0, right[i]), value);
  return x;
}

// An inclusive scan along `dim` with an associative `combine(earlier,
// later)`: log2(n) steps, each combining every element with the one `shift`
// places before it (the identity `pad` shifted in). Each result combines
// exactly the elements up to it, so an inf or NaN reaches only the results
// after it (a product with a triangular matrix of ones would spread
// 0 * inf = NaN to those before).
//
// The steps run along the last dim (another dim is moved there and back):
// each step's cat then copies a slice of the previous step's rows, which
// one kernel holds whole up to kScanBlock elements (ncc-form-kernels), so
// the steps share it. A longer dim is scanned in blocks of at most that
// many (padded with the identity at its end): each block on its own, then
// each block's results combined with the scan of the blocks before it
// (their last results, scanned and shifted by one block). A dim longer
// than kMaxUnfilledScan elements scanned for fewer rows than partitions
// is cut into more blocks, down to kMinScanBlock elements, so that the
// blocks' rows fill the partitions: each step then runs on them all (a
// cumsum over [8, 32000] took 8 blocks of 4000 on 64 partitions, 12 steps:
// 215.7 us, 16 blocks 143.1; over [2, 3000] 81.1 us in one kernel, 48.5 in
// the blocks' six). Shorter dims keep their one kernel: the blocks' kernels
// cost about what the steps save (a cumsum over [64, 1024], 31.2 us, took
// 63.3 in two blocks; over [8, 2048] 54.3, 55.2 in four).
constexpr int64_t kScanBlock = 4096, kMinScanBlock = 512, kMaxUnfilledScan = 2048;
constexpr int64_t kScanPartitions = 128;  // a NeuronCore's SBUF partitions
template <typename Combine>
Value scan(Composer& c, Value x, int64_t dim, double pad, Combine combine) {
  const int64_t rank = typeOf(x).getRank(), last = rank - 1;
  if (dim != last) {
    SmallVector<int64_t> perm, inverse(size_t(rank), 0);
    for (int64_t d = 0; d < rank; ++d)
      if (d != dim) perm.push_back(d);
    perm.push_back(dim);
    for (int64_t i = 0; i < rank; ++i) inverse[size_t(perm[size_t(i)])] = i;
    return c.permute(scan(c, c.permute(x, perm), last, pad, combine), inverse);
  }
  const int64_t length = typeOf(x).getDimSize(dim);
  const int64_t scanned = typeOf(x).getNumElements() / std::max<int64_t>(length, 1);  // the rows scanned
  const int64_t fillingBlocks = scanned > 0 && scanned < kScanPartitions && length > kMaxUnfilledScan
                                    ? std::min(kScanPartitions / scanned, length / kMinScanBlock)
                                    : 1;
  if (length > kScanBlock || fillingBlocks > 1) {
    const int64_t blocks = std::max((length + kScanBlock - 1) / kScanBlock, fillingBlocks),
                  width = (length + blocks - 1) / blocks;
    SmallVector<int64_t> shape(typeOf(x).getShape()), rows(shape);
    shape.back() = blocks;
    shape.push_back(width);
    rows.back() = blocks * width;
    Value within = scan(c, c.reshape(padDim(c, x, last, 0, blocks * width - length, pad), shape), rank, pad, combine);
    // The blocks' last results as rows of their own ([.., 1, blocks]: a
    // [.., blocks] shape would be a per-row value of the blocks' rows,
    // which form-kernels reshapes back to [.., blocks, 1]).
    SmallVector<int64_t> totalsShape(shape.begin(), shape.end() - 1), perBlock(shape);
    totalsShape.insert(totalsShape.end() - 1, 1);
    perBlock.back() = 1;
    Value totals = scan(c, c.reshape(c.slice(within, rank, width - 1, width), totalsShape), rank, pad, combine);
    Value before = padDim(c, c.slice(totals, rank, 0, blocks - 1), rank, 1, 0, pad);
    Value whole = c.reshape(combine(c.reshape(before, perBlock), within), rows);
    return c.slice(whole, last, 0, length);
  }
  for (int64_t shift = 1; shift < length; shift *= 2)
    x = combine(padDim(c, c.slice(x, dim, 0, length - shift), dim, shift, 0, pad), x);
  return x;
}

// The product along `dim` as a tree: the dim padded with ones to a power of
// two, then halved log2(n) times by multiplying its halves.
inline Value productAlong(Composer& c, Value x, int64_t dim) {
  int64_t size = typeOf(x).getDimSize(dim), width = 1;
  while (width < size) width *= 2;
  if (width != size) x = padDim(c, x, dim, 0, width - size, 1.0);
  for (; width > 1; width /= 2) x = c.mul(c.slice(x, dim, 0, width / 2), c.slice(x, dim, width / 2, width));
  return x;
}

// Rows of `x` along `dim` picked by the integer `index` (any shape, read
// flat): the dim moved to the front, the rest flattened into the rows of an
// embedding table, gathered, and moved back; the result has the dim
// replaced by the index's element count. The gather moves float rows, so
// integer and bool values go through f32 (exact below 2^24) and back.
inline FailureOr<Value> gatherAlong(Composer& c, Value x, int64_t dim, Value index) {
  Type elem = typeOf(x).getElementType();
  if (!aten::isFloatType(elem)) {
    FailureOr<Value> picked = gatherAlong(c, c.cast(x, c.f32()), dim, index);
    if (failed(picked)) return failure();
    return c.cast(*picked, elem);
  }
  int64_t rank = typeOf(x).getRank();
  SmallVector<int64_t> perm{dim};
  for (int64_t i = 0; i < rank; ++i)
    if (i != dim) perm.push_back(i);
  Value front = c.permute(x, perm);
  int64_t rows = typeOf(front).getDimSize(0), rest = typeOf(front).getNumElements() / std::max<int64_t>(rows, 1);
  Value table = c.reshape(front, {rows, rest});
  Value flatIndex = gatherableIndices(c.b, c.loc, c.reshape(index, {typeOf(index).getNumElements()}));
  int64_t picked = typeOf(flatIndex).getDimSize(0);
  auto gatheredType = RankedTensorType::get({picked, rest}, typeOf(table).getElementType());
  Value gathered = c.b.create<aten::EmbeddingOp>(c.loc, gatheredType, table, flatIndex, c.b.getI64IntegerAttr(-1));
  SmallVector<int64_t> shape(typeOf(front).getShape());
  shape[0] = picked;
  SmallVector<int64_t> inverse(rank);
  for (int64_t i = 0; i < rank; ++i) inverse[perm[i]] = i;
  return c.permute(c.reshape(gathered, shape), inverse);
}

// The row count to compute pairwise comparisons over ([.., rows, n] with an
// operand [.., 1, n] per batch): `rows` rounded up so that row tiles of 128
// partitions hold whole batches (a multiple of 128, or a power of two below
// it). With batches crossing tile boundaries at a different partition in
// every tile, the broadcast loads' partition ranges cut SBUF into pieces
// that the NEFF race check revisits at every access, and it refuses such
// kernels (a sort of [200, 513], a gather of [96, 1025]).
inline int64_t alignedRows(int64_t n) {
  constexpr int64_t kPartitions = 128;
  if (n >= kPartitions) return (n + kPartitions - 1) / kPartitions * kPartitions;
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

// The flat position (f32) of the points that integer index tensors name in
// dims of the given sizes taken together (row-major), the index tensors
// broadcast together and negative indices counted from the end, and whether
// each point lies in range.
inline std::pair<Value, Value> flatIndexOf(Composer& c, ArrayRef<int64_t> sizes, ArrayRef<Value> indices) {
  int64_t stride = 1;
  for (int64_t s : sizes) stride *= s;
  Value flat, valid;
  for (auto [size, idx] : llvm::zip(sizes, indices)) {
    stride /= size;
    Value f = c.cast(idx, c.f32());
    f = c.where(c.compareScalar<aten::LtScalarOp>(f, 0.0), c.addScalar(f, double(size)), f);
    Value ok = c.logicalAnd(c.compareScalar<aten::GeScalarOp>(f, 0.0), c.compareScalar<aten::LtScalarOp>(f, double(size)));
    Value term = stride == 1 ? f : c.mulScalar(f, double(stride));
    flat = flat ? c.add(flat, term) : term;
    valid = valid ? c.logicalAnd(valid, ok) : ok;
  }
  return {flat, valid};
}

// The index tensors of an index list argument (index.Tensor, index_put:
// one optional tensor per leading dim) and the dims they index.
struct IndexList {
  SmallVector<int64_t> dims;
  SmallVector<Value> indices;
};

inline FailureOr<IndexList> indexList(NodeImporter& n, size_t pos) {
  const Argument* list = n.arg(pos, "indices");
  if (!list || list->value_case() != Argument::kTensorList) return n.error("argument 'indices' must be a list");
  IndexList r;
  for (auto [i, name] : llvm::enumerate(list->tensor_list().values())) {
    if (name.empty()) continue;
    auto it = n.values.find(name);
    if (it == n.values.end() || it->second.size() != 1) return n.error("index names unknown value '" + name + "'");
    r.dims.push_back(int64_t(i));
    r.indices.push_back(it->second.front());
  }
  return r;
}

inline bool isIndexType(Type t) { return llvm::isa<IntegerType>(t) && !t.isInteger(1); }

}  // namespace neuroncc::importer
