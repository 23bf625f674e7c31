#include "dialects/nc/NcDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;

namespace neuroncc::nc {

void NcDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/nc/NcOps.cpp.inc"
      >();
}

namespace {
bool isTileIn(Type type, unsigned memorySpace) {
  auto m = llvm::dyn_cast<MemRefType>(type);
  if (!m || m.getRank() != 2) return false;
  auto space = llvm::dyn_cast_or_null<IntegerAttr>(m.getMemorySpace());
  return space && space.getInt() == memorySpace;
}
}  // namespace

bool isSbufTile(Type type) { return isTileIn(type, kSbufMemorySpace); }

int64_t tileByteOffset(Value tile) {
  int64_t skipped = 0;
  while (auto view = tile.getDefiningOp<TileColumnsOp>()) {
    skipped += view.getColumn() * int64_t(llvm::cast<MemRefType>(tile.getType()).getElementTypeBitWidth() / 8);
    tile = view.getSource();
  }
  IntegerAttr offset;
  if (auto a = tile.getDefiningOp<AllocTileOp>()) offset = a.getOffsetAttr();
  if (auto a = tile.getDefiningOp<AllocPsumOp>()) offset = a.getOffsetAttr();
  return (offset ? offset.getInt() : 0) + skipped;
}

int64_t tileStep(Value tile) {
  auto view = tile.getDefiningOp<TileColumnsOp>();
  return view && view.getStep() ? int64_t(*view.getStep()) : 1;
}

int64_t tileSpanBytes(Value tile) {
  auto t = llvm::cast<MemRefType>(tile.getType());
  return ((t.getDimSize(1) - 1) * tileStep(tile) + 1) * int64_t(t.getElementTypeBitWidth() / 8);
}

Value tileBuffer(Value tile) {
  while (auto view = tile.getDefiningOp<TileColumnsOp>()) tile = view.getSource();
  return tile;
}
bool isPsumTile(Type type) { return isTileIn(type, kPsumMemorySpace); }

Type deviceElementType(Type elem) {
  if (elem.isF32() || elem.isBF16() || elem.isF16()) return elem;
  return Float32Type::get(elem.getContext());
}

bool isNarrowInteger(Type elem) {
  auto it = llvm::dyn_cast<IntegerType>(elem);
  return it && !it.isSignless() && (it.getWidth() == 8 || it.getWidth() == 16);
}

Type boundaryElementType(Type elem) {
  if (elem.isInteger(32) || elem.isInteger(64) || isNarrowInteger(elem)) return elem;
  if (elem.isInteger(1)) return IntegerType::get(elem.getContext(), 8);
  return deviceElementType(elem);
}

ArrayRef<StringRef> elementwiseAluNames() {
  static constexpr StringRef kNames[] = {"add", "sub", "mul", "div", "max", "min", "is_equal",
                                         "not_equal", "is_lt", "is_le", "is_gt", "is_ge", "pow"};
  return kNames;
}

ArrayRef<StringRef> activationNames() {
  static constexpr StringRef kNames[] = {"identity", "exp", "rsqrt", "sqrt", "square", "negate",
                                         "reciprocal", "log", "tanh", "sigmoid", "relu", "gelu",
                                         "gelu_tanh", "silu", "abs", "sin", "cos", "erf", "expm1", "log1p", "floor", "ceil", "trunc", "round", "atan"};
  return kNames;
}

namespace {

bool isHbm(Type type) {
  auto m = llvm::dyn_cast<MemRefType>(type);
  return m && !m.getMemorySpace();
}

// Engine operands may live in SBUF or PSUM (results leave PSUM through the
// vector and scalar engines); DMA and TensorEngine inputs must be in SBUF.
LogicalResult verifyTile(Operation* op, Value v, StringRef name, bool allowPsum = true) {
  if (!isSbufTile(v.getType()) && !(allowPsum && isPsumTile(v.getType())))
    return op->emitOpError() << name << " must be an SBUF tile (rank-2 memref in memory space "
                             << kSbufMemorySpace << (allowPsum ? ") or a PSUM tile (memory space 2" : "")
                             << "), got " << v.getType();
  auto m = llvm::cast<MemRefType>(v.getType());
  if (m.getDimSize(0) < 1 || m.getDimSize(0) > kNumPartitions)
    return op->emitOpError() << name << " spans " << m.getDimSize(0)
                             << " partitions; a NeuronCore has " << kNumPartitions;
  return success();
}

ArrayRef<int64_t> tileShape(Value v) { return llvm::cast<MemRefType>(v.getType()).getShape(); }

LogicalResult verifySameShape(Operation* op, Value a, Value b, StringRef what) {
  if (tileShape(a) != tileShape(b))
    return op->emitOpError() << what << " tiles must have the same shape";
  return success();
}

LogicalResult verifyPerPartitionScalar(Operation* op, Value out, Value scalar, StringRef what) {
  if (failed(verifyTile(op, scalar, what))) return failure();
  if (tileShape(scalar)[0] != tileShape(out)[0])
    return op->emitOpError() << what << " must span the output's " << tileShape(out)[0]
                             << " partitions";
  return success();
}

LogicalResult verifyAlu(Operation* op, StringRef alu, ArrayRef<StringRef> allowed) {
  if (!llvm::is_contained(allowed, alu)) {
    auto diag = op->emitOpError() << "alu '" << alu << "' is not one of ";
    llvm::interleaveComma(allowed, diag);
    return diag;
  }
  return success();
}

// A DMA access pattern is (stride, count) pairs: first the partition walk,
// then the free dims whose counts multiply to the tile's row length.
// The partition dim and up to four free dims (the NEFF format's limit).
constexpr size_t kMaxAccessPatternDims = 5;

// The lowest and highest HBM element an access pattern reaches from `offset`.
std::pair<int64_t, int64_t> apExtent(int64_t offset, ArrayRef<int64_t> ap) {
  int64_t lo = offset, hi = offset;
  for (size_t i = 0; i + 1 < ap.size(); i += 2) {
    int64_t reach = ap[i] * (ap[i + 1] - 1);
    (reach < 0 ? lo : hi) += reach;
  }
  return {lo, hi};
}

// `offset`: the HBM element the pattern starts from (std::nullopt for a
// gather, whose rows come from an index tensor at run time).
LogicalResult verifyDma(Operation* op, Value hbm, Value tile, int64_t part_start,
                        ArrayRef<int64_t> ap, std::optional<int64_t> offset) {
  const int64_t pdims = partitionDims(op);
  if (pdims < 1 || pdims > (llvm::isa<DmaGatherOp>(op) ? 1 : 2))
    return op->emitOpError() << "partition_dims must be 1 or 2 (1 for a gather)";
  if (!isHbm(hbm.getType())) return op->emitOpError() << "HBM operand must be a plain memref";
  if (failed(verifyTile(op, tile, "tile", /*allowPsum=*/false))) return failure();
  auto h = llvm::cast<MemRefType>(hbm.getType());
  auto t = llvm::cast<MemRefType>(tile.getType());
  // The one conversion: integers (graph inputs and outputs) loaded into, or
  // stored from, float32 tiles.
  auto hbmInt = llvm::dyn_cast<IntegerType>(h.getElementType());
  bool converting = llvm::isa<DmaLoadOp, DmaStoreOp>(op) && hbmInt &&
                    (hbmInt.getWidth() == 8 || hbmInt.getWidth() == 16 || hbmInt.getWidth() == 32 ||
                     hbmInt.getWidth() == 64) &&
                    t.getElementType().isF32();
  if (h.getElementType() != t.getElementType() && !converting)
    return op->emitOpError() << "DMA does not convert (but for integers and f32 tiles): HBM "
                             << h.getElementType() << " vs tile " << t.getElementType();
  if (ap.size() > 2 * kMaxAccessPatternDims)
    return op->emitOpError() << "access pattern has " << ap.size() / 2 << " dims; the DMA engines take at most "
                             << kMaxAccessPatternDims;
  if (ap.size() < size_t(2 * pdims + 2) || ap.size() % 2 != 0)
    return op->emitOpError() << "access pattern needs (stride, count) pairs for the partition "
                                "dims and at least one free dim";
  for (size_t i = 1; i < ap.size(); i += 2)
    if (ap[i] < 1) return op->emitOpError() << "access pattern count " << ap[i] << " is not positive";
  int64_t parts = dmaPartitions(ap, pdims), free_elems = 1;
  for (size_t i = size_t(2 * pdims + 1); i < ap.size(); i += 2) free_elems *= ap[i];
  if (part_start < 0 || parts < 1 || part_start + parts > t.getDimSize(0))
    return op->emitOpError() << "partitions [" << part_start << ", " << part_start + parts
                             << ") are outside the tile's " << t.getDimSize(0);
  if (free_elems != t.getDimSize(1))
    return op->emitOpError() << "access pattern moves " << free_elems
                             << " elements per partition, the tile holds " << t.getDimSize(1);
  if (offset) {
    auto [lo, hi] = apExtent(*offset, ap);
    if (lo < 0 || hi >= h.getNumElements())
      return op->emitOpError() << "access pattern reaches elements [" << lo << ", " << hi
                               << "] of an HBM tensor with " << h.getNumElements() << " elements";
  }
  return success();
}

}  // namespace

int64_t partitionDims(Operation* dma) {
  auto pd = dma->getAttrOfType<IntegerAttr>("partition_dims");
  return pd ? pd.getInt() : 1;
}

int64_t dmaPartitions(ArrayRef<int64_t> ap, int64_t partitionDims) {
  int64_t parts = 1;
  for (int64_t i = 0; i < partitionDims && size_t(2 * i + 1) < ap.size(); ++i) parts *= ap[size_t(2 * i + 1)];
  return parts;
}

int64_t dmaPartitions(Operation* dma) {
  return dmaPartitions(dma->getAttrOfType<DenseI64ArrayAttr>("ap").asArrayRef(), partitionDims(dma));
}

bool KernelOp::isLowered() {
  return getBody().front().getNumArguments() != getInputs().size() ||
         llvm::any_of(getBody().front().getArgumentTypes(),
                      [](Type t) { return llvm::isa<MemRefType>(t); });
}

LogicalResult KernelOp::verify() {
  if (auto sources = getResultSources(); sources && sources->size() != getNumResults())
    return emitOpError("result_sources has ") << sources->size() << " entries for "
                                              << getNumResults() << " results";
  Block& body = getBody().front();
  auto yield = llvm::cast<YieldOp>(body.getTerminator());
  if (!isLowered()) {
    if (body.getArgumentTypes() != getInputs().getTypes())
      return emitOpError("body arguments must match the kernel inputs");
    if (yield.getValues().getTypes() != getResultTypes())
      return emitOpError("yielded values must match the kernel results");
    return success();
  }
  size_t n_in = getInputs().size(), n_out = getNumResults();
  if (body.getNumArguments() != n_in + n_out)
    return emitOpError("lowered body takes ") << n_in << " input and " << n_out
                                              << " output memrefs, got " << body.getNumArguments();
  if (yield.getNumOperands() != 0) return emitOpError("lowered body must yield nothing");
  SmallVector<Type> expected(getInputs().getTypes());
  llvm::append_range(expected, getResultTypes());
  for (auto [arg, type] : llvm::zip(body.getArguments(), expected)) {
    auto m = llvm::dyn_cast<MemRefType>(arg.getType());
    auto t = llvm::cast<RankedTensorType>(type);
    bool typeOk = m && (m.getElementType() == deviceElementType(t.getElementType()) ||
                        m.getElementType() == boundaryElementType(t.getElementType()));
    if (!m || m.getShape() != t.getShape() || !typeOk || m.getMemorySpace())
      return emitOpError("lowered body argument ") << arg.getArgNumber()
                                                   << " must be an HBM memref holding " << type;
  }
  return success();
}

LogicalResult AllocTileOp::verify() {
  if (failed(verifyTile(*this, getTile(), "result"))) return failure();
  if (getOffsetAttr() && getOffsetAttr().getInt() < 0) return emitOpError("offset must be non-negative");
  return success();
}

LogicalResult DmaLoadOp::verify() {
  return verifyDma(*this, getHbm(), getTile(), getPartStart(), getAp(), getOffset());
}
LogicalResult DmaGatherOp::verify() {
  if (failed(verifyDma(*this, getTable(), getTile(), getPartStart(), getAp(), std::nullopt))) return failure();
  auto idx = llvm::cast<MemRefType>(getIndex().getType());
  if (idx.getMemorySpace()) return emitOpError("the index tensor must be in HBM");
  int64_t n = idx.getNumElements(), off = getIndexOffsetAttr().getInt();
  if (off < 0 || off + getAp()[1] > n)
    return emitOpError("index elements [") << off << ", " << off + getAp()[1] << ") are outside the "
                                           << n << "-element index tensor";
  if (getIndexBoundAttr().getInt() < 1) return emitOpError("index_bound must be positive");
  return success();
}

LogicalResult DmaStoreOp::verify() {
  return verifyDma(*this, getHbm(), getTile(), getPartStart(), getAp(), getOffset());
}

LogicalResult TensorTensorOp::verify() {
  for (auto [v, n] : {std::pair{getOut(), "out"}, {getIn0(), "in0"}, {getIn1(), "in1"}})
    if (failed(verifyTile(*this, v, n))) return failure();
  if (failed(verifySameShape(*this, getOut(), getIn0(), "out and in0")) ||
      failed(verifySameShape(*this, getOut(), getIn1(), "out and in1")))
    return failure();
  return verifyAlu(*this, getAlu(), elementwiseAluNames());
}

LogicalResult TensorScalarOp::verify() {
  if (failed(verifyTile(*this, getOut(), "out")) || failed(verifyTile(*this, getIn0(), "in0")) ||
      failed(verifySameShape(*this, getOut(), getIn0(), "out and in0")))
    return failure();
  if (getScalar() && failed(verifyPerPartitionScalar(*this, getOut(), getScalar(), "scalar")))
    return failure();
  SmallVector<StringRef> names(elementwiseAluNames());
  names.push_back("bypass");
  return verifyAlu(*this, getAlu(), names);
}

LogicalResult ActivationOp::verify() {
  if (failed(verifyTile(*this, getOut(), "out")) || failed(verifyTile(*this, getIn0(), "in0")) ||
      failed(verifySameShape(*this, getOut(), getIn0(), "out and in0")))
    return failure();
  if (getScaleTile() &&
      failed(verifyPerPartitionScalar(*this, getOut(), getScaleTile(), "scale_tile")))
    return failure();
  if (getBiasTile() && failed(verifyPerPartitionScalar(*this, getOut(), getBiasTile(), "bias_tile")))
    return failure();
  if (getAccum() && failed(verifyPerPartitionScalar(*this, getOut(), getAccum(), "accum")))
    return failure();
  if (!llvm::is_contained(activationNames(), getFunc()))
    return emitOpError() << "unknown activation function '" << getFunc() << "'";
  return success();
}

LogicalResult TensorReduceOp::verify() {
  if (failed(verifyTile(*this, getOut(), "out")) || failed(verifyTile(*this, getIn0(), "in0")))
    return failure();
  if (tileShape(getOut())[0] != tileShape(getIn0())[0] || tileShape(getOut())[1] != 1)
    return emitOpError("out must be one element per partition of in0");
  return verifyAlu(*this, getAlu(), {"add", "max", "min"});
}

LogicalResult TensorSelectOp::verify() {
  for (auto [v, n] : {std::pair{getOut(), "out"}, {getOnTrue(), "on_true"}, {getOnFalse(), "on_false"},
                      {getPred(), "pred"}})
    if (failed(verifyTile(*this, v, n))) return failure();
  if (failed(verifySameShape(*this, getOut(), getOnTrue(), "out and on_true")) ||
      failed(verifySameShape(*this, getOut(), getOnFalse(), "out and on_false")) ||
      failed(verifySameShape(*this, getOut(), getPred(), "out and pred")))
    return failure();
  return success();
}

LogicalResult IotaOp::verify() { return verifyTile(*this, getOut(), "out"); }

LogicalResult MatmulOp::verify() {
  if (!isPsumTile(getOut().getType()))
    return emitOpError("out must be a PSUM tile (memory space 2), got ") << getOut().getType();
  if (failed(verifyTile(*this, getStationary(), "stationary", false)) ||
      failed(verifyTile(*this, getMoving(), "moving", false)))
    return failure();
  ArrayRef<int64_t> s = tileShape(getStationary()), m = tileShape(getMoving()), o = tileShape(getOut());
  if (s[0] != m[0])
    return emitOpError("stationary and moving must share the contraction (partition) dim, got ")
           << s[0] << " and " << m[0];
  if (s[1] > kNumPartitions)
    return emitOpError("stationary has ") << s[1] << " columns; the PE array has " << kNumPartitions;
  if (o[0] != s[1] || o[1] != m[1])
    return emitOpError("out must be [") << s[1] << " x " << m[1] << "], got [" << o[0] << " x " << o[1] << "]";
  if (o[1] * 4 > kPsumBankBytes)
    return emitOpError("moving free size ") << o[1] << " exceeds one 2 KiB PSUM bank (512 f32)";
  auto st = llvm::cast<MemRefType>(getStationary().getType()).getElementType();
  if (st != llvm::cast<MemRefType>(getMoving().getType()).getElementType())
    return emitOpError("stationary and moving must have the same element type");
  return success();
}

LogicalResult TransposeOp::verify() {
  if (!isPsumTile(getOut().getType()))
    return emitOpError("out must be a PSUM tile (memory space 2), got ") << getOut().getType();
  if (failed(verifyTile(*this, getIn0(), "in0", false))) return failure();
  ArrayRef<int64_t> i = tileShape(getIn0()), o = tileShape(getOut());
  if (o[0] != i[1] || o[1] != i[0])
    return emitOpError("out must be [") << i[1] << " x " << i[0] << "]";
  if (i[1] > kNumPartitions) return emitOpError("in0 has more than 128 columns");
  return success();
}

LogicalResult TileColumnsOp::verify() {
  Value buffer = tileBuffer(getSource());
  if (!buffer.getDefiningOp<AllocTileOp>() && !buffer.getDefiningOp<AllocPsumOp>())
    return emitOpError("source must be an alloc_tile or alloc_psum result, or a column range of one");
  auto src = llvm::cast<MemRefType>(getSource().getType());
  auto view = llvm::dyn_cast<MemRefType>(getView().getType());
  if (!view || view.getRank() != 2 || view.getElementType() != src.getElementType() ||
      view.getMemorySpace() != src.getMemorySpace() || view.getDimSize(0) != src.getDimSize(0))
    return emitOpError("result must be a tile of the source's partitions, element type and memory, got ")
           << getView().getType();
  int64_t column = getColumn(), n = view.getDimSize(1), step = tileStep(getView());
  if (step < 1) return emitOpError("step must be positive, got ") << step;
  if (auto inner = getSource().getDefiningOp<TileColumnsOp>(); inner && tileStep(inner.getView()) > 1)
    return emitOpError("source steps through its columns; a stepped view is read by instructions only");
  if (column < 0 || n < 1 || column + (n - 1) * step + 1 > src.getDimSize(1))
    return emitOpError("columns [") << column << ", " << column + (n - 1) * step + 1 << ") are outside the source's "
                                    << src.getDimSize(1);
  return success();
}

LogicalResult AllocPsumOp::verify() {
  if (!isPsumTile(getTile().getType())) return emitOpError("result must be in memory space 2");
  auto m = llvm::cast<MemRefType>(getTile().getType());
  if (m.getDimSize(0) > kNumPartitions) return emitOpError("more than 128 partitions");
  if (getOffsetAttr() && getOffsetAttr().getInt() < 0) return emitOpError("offset must be non-negative");
  return success();
}

}  // namespace neuroncc::nc

#include "dialects/nc/NcDialect.cpp.inc"
#define GET_OP_CLASSES
#include "dialects/nc/NcOps.cpp.inc"
