//===- ComposedIndexing.cpp - ordering and writes, as compositions --------===//
//
// Sorting and selection (sort, topk, kthvalue, median), binary search
// (bucketize, searchsorted), and the writes into a copy (scatter,
// scatter_add, index_put, index_add, slice/select_scatter, fill, and
// masked_fill with a tensor value), plus pixel_shuffle, reflection and
// replication padding, block_diag and cross. Each is built from ops with
// their own lowering: comparisons, where, reductions, views and embedding.
//
// Order: NaN is larger than every number (ascending sorts put NaNs last),
// as eager orders it; equal values keep their index order (a stable sort;
// eager's order among equal values is unspecified).
//
//===----------------------------------------------------------------------===//

#include <cmath>
#include <limits>
#include <numeric>

#include "compiler/Composer.h"

namespace neuroncc::importer {
namespace {

// Compositions that compare every element with every other element of a dim
// (or every index with every position) build tensors of this many elements
// at most.
constexpr int64_t kMaxPairs = int64_t(1) << 28;

// `x` with `dim` moved last, and the permutation that moves it back.
std::pair<Value, SmallVector<int64_t>> dimLast(Composer& c, Value x, int64_t dim) {
  int64_t rank = typeOf(x).getRank();
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim) perm.push_back(d);
  perm.push_back(dim);
  SmallVector<int64_t> inverse(rank);
  for (int64_t i = 0; i < rank; ++i) inverse[perm[i]] = i;
  return {c.permute(x, perm), inverse};
}

// Each element's position in the sorted order of the last dim (f32, exact):
// the count of elements that come before it. Elements compare by a key (NaN
// as +inf) and, on equal keys, by a tie rank t: the index, plus n for a NaN
// (ascending: after an equal +inf) or for a number (descending: NaNs first).
// Two row operands per pair, so that long rows fit the chunked reduction.
Value sortedPositions(Composer& c, Value x, bool descending) {
  int64_t n = typeOf(x).getShape().back(), rank = typeOf(x).getRank();
  Type elem = typeOf(x).getElementType();
  Value isNan = c.isNan(x);
  Value key = c.where(isNan, c.scalar(kInf, elem), x);
  Value late = descending ? c.logicalNot(isNan) : isNan;
  Value tie = c.add(c.iota(n, alongLast(rank, n)), c.where(late, c.scalar(double(n), c.f32()), c.scalar(0.0, c.f32())));
  // pairs [..., i, j], counted over the last dim (a reduction over the
  // innermost dim, which the lowering chunks when rows are long)
  // (the i rows padded to alignedRows, their results dropped)
  int64_t rows = alignedRows(n);
  Value keyI = c.unsqueeze(padDim(c, key, rank - 1, 0, rows - n, 0.0), rank);
  Value tieI = c.unsqueeze(padDim(c, tie, rank - 1, 0, rows - n, 0.0), rank);
  Value keyJ = c.unsqueeze(key, rank - 1), tieJ = c.unsqueeze(tie, rank - 1);
  Value ahead = descending ? c.compare<aten::GtTensorOp>(keyJ, keyI) : c.compare<aten::LtTensorOp>(keyJ, keyI);
  Value tieFirst = c.logicalAnd(c.compare<aten::EqTensorOp>(keyJ, keyI), c.compare<aten::LtTensorOp>(tieJ, tieI));
  Value counts = c.sum(c.cast(c.logicalOr(ahead, tieFirst), c.f32()), {rank}, false);
  return c.slice(counts, rank - 1, 0, n);
}

// The elements at sorted positions [0, count) of the last dim, and their
// indices (f32): the element whose position is r, picked by a comparison
// (one match per r, so the sums are exact).
std::pair<Value, Value> pickSorted(Composer& c, Value x, Value positions, int64_t count) {
  // (the r rows padded to alignedRows, past the last position: no match)
  int64_t n = typeOf(x).getShape().back(), rank = typeOf(x).getRank(), rows = alignedRows(count);
  Value hit = c.compare<aten::EqTensorOp>(c.unsqueeze(positions, rank - 1), c.iota(rows, {rows, 1}));  // [..., r, i]
  Type elem = typeOf(x).getElementType();
  Value values = c.sum(c.where(hit, c.unsqueeze(x, rank - 1), c.scalar(0.0, elem)), {rank}, false);
  Value indices = c.sum(c.where(hit, c.iota(n, {1, n}), c.scalar(0.0, c.f32())), {rank}, false);
  return {c.slice(values, rank - 1, 0, count), c.slice(indices, rank - 1, 0, count)};
}

LogicalResult checkPairs(NodeImporter& n, Value x, int64_t count, StringRef what) {
  int64_t elems = typeOf(x).getNumElements(), length = typeOf(x).getShape().back();
  if (elems * std::max(length, count) > kMaxPairs)
    return n.error(what.str() + " of " + std::to_string(elems) + " elements along a dim of " + std::to_string(length) +
                   ": at most 2^28 pairwise comparisons are supported");
  return success();
}

// Sorted values and indices along `dim` (count of them: all, or topk's k).
FailureOr<std::pair<Value, Value>> sortAlong(NodeImporter& n, Composer& c, Value x, int64_t dim, bool descending,
                                            int64_t count, StringRef what) {
  auto [last, inverse] = dimLast(c, x, dim);
  if (failed(checkPairs(n, last, count, what))) return failure();
  Value positions = sortedPositions(c, last, descending);
  auto [values, indices] = pickSorted(c, last, positions, count);
  return std::make_pair(c.permute(values, inverse), c.permute(indices, inverse));
}

// The input as a float tensor of rank >= 1 and the normalized dim.
FailureOr<std::pair<Value, int64_t>> orderedInput(NodeImporter& n, Composer& c, Value self, int64_t dim0) {
  if (failed(checkDims(n, {dim0}, typeOf(self).getRank()))) return failure();
  Value x = c.toFloat(self);
  if (typeOf(x).getRank() == 0) x = c.reshape(x, {1});
  int64_t dim = normalizeDim(dim0, typeOf(x).getRank());
  if (typeOf(x).getDimSize(dim) > (int64_t(1) << 24)) return n.error("a dim of more than 2^24 elements");
  return std::make_pair(x, dim);
}

// sort(self, dim, descending) and sort.stable(self, stable, dim, descending).
LogicalResult sort(NodeImporter& n, bool hasStable) {
  Composer c(n);
  size_t base = hasStable ? 1 : 0;
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(dim0, n.integer(base + 1, "dim", -1));
  NCC_TRY(descending, n.boolean(base + 2, "descending", false));
  NCC_TRY(in, orderedInput(n, c, self, dim0));
  NCC_TRY(r, sortAlong(n, c, in.first, in.second, descending, typeOf(in.first).getDimSize(in.second), "sort"));
  if (failed(c.finish(r.first, 0))) return failure();
  return c.finish(r.second, 1);
}

// topk(self, k, dim, largest, sorted): the k largest (smallest) in sorted
// order (sorted=False returns them sorted too). Small k selects k times (a
// maximum, its first index, then that element taken out); larger k sorts,
// unless the sort's pairs would pass their limit (a top-50 over a 32000-word
// vocabulary), where up to kMaxSelectionRoundsLongRows selections are made.
constexpr int64_t kMaxSelectionRounds = 16;
constexpr int64_t kMaxSelectionRoundsLongRows = 256;

LogicalResult topk(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(k, n.integer(1, "k"));
  NCC_TRY(dim0, n.integer(2, "dim", -1));
  NCC_TRY(largest, n.boolean(3, "largest", true));
  NCC_TRY(in, orderedInput(n, c, self, dim0));
  auto [x, dim] = in;
  int64_t length = typeOf(x).getDimSize(dim);
  if (k < 0 || k > length) return n.error("topk k=" + std::to_string(k) + " for a dim of " + std::to_string(length));
  if (k == 0) return n.error("topk with k=0 gives empty tensors (0 elements); empty tensors are not supported");
  bool sortFits = typeOf(x).getNumElements() * length <= kMaxPairs;
  if (k > kMaxSelectionRounds && (sortFits || k > kMaxSelectionRoundsLongRows)) {
    NCC_TRY(r, sortAlong(n, c, x, dim, largest, k, "topk"));
    if (failed(c.finish(r.first, 0))) return failure();
    return c.finish(r.second, 1);
  }
  auto [last, inverse] = dimLast(c, x, dim);
  int64_t rank = typeOf(last).getRank();
  Type elem = typeOf(last).getElementType();
  Value positions = c.iota(length, alongLast(rank, length));
  Value isNan = c.isNan(last);
  Value taken = c.splat(typeOf(last).getShape(), c.i1(), 0);
  SmallVector<Value> values, indices;
  double worst = largest ? -kInf : kInf;
  for (int64_t round = 0; round < k; ++round) {
    Value free = c.logicalNot(taken);
    Value freeNumber = c.logicalAnd(free, c.logicalNot(isNan));
    Value freeNan = c.logicalAnd(free, isNan);
    Value key = c.where(freeNumber, last, c.scalar(worst, elem));
    Value best = largest ? c.amax(key, {rank - 1}, true) : c.amin(key, {rank - 1}, true);
    Value anyNan = c.compareScalar<aten::GtScalarOp>(c.sum(c.cast(freeNan, c.f32()), {rank - 1}, true), 0.0);
    Value anyNumber = c.compareScalar<aten::GtScalarOp>(c.sum(c.cast(freeNumber, c.f32()), {rank - 1}, true), 0.0);
    // NaN first when largest, last when smallest.
    Value pickNan = largest ? anyNan : c.logicalNot(anyNumber);
    Value candidate = c.where(pickNan, freeNan, c.logicalAnd(freeNumber, c.compare<aten::EqTensorOp>(last, best)));
    Value index = c.amin(c.where(candidate, positions, c.scalar(double(length), c.f32())), {rank - 1}, true);
    values.push_back(c.where(pickNan, c.scalar(std::nan(""), elem), best));
    indices.push_back(index);
    taken = c.logicalOr(taken, c.compare<aten::EqTensorOp>(positions, index));
  }
  Value v = c.permute(c.cat(values, rank - 1), inverse), i = c.permute(c.cat(indices, rank - 1), inverse);
  if (failed(c.finish(v, 0))) return failure();
  return c.finish(i, 1);
}

// kthvalue(self, k, dim) and median.dim(self, dim): the element at sorted
// position k - 1 (the median: (n - 1) / 2, the lower one) and its index;
// the median of a row with a NaN is NaN at the row's first NaN, as eager
// returns it. median(self): the median of all elements, value only.
// nanmedian (.dim and of all elements): the median of the values that are
// not NaN, at floor((count - 1) / 2); a row of NaNs only gives NaN at 0.
LogicalResult kthOrMedian(NodeImporter& n, StringRef kind) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  Value x;
  int64_t dim = 0, position = 0;
  bool ignoreNan = kind.starts_with("nanmedian");
  if (kind == "median_all" || kind == "nanmedian_all") {
    x = c.reshape(c.toFloat(self), {typeOf(self).getNumElements()});
    if (typeOf(x).getDimSize(0) == 0) return n.error("median of an empty tensor");
  } else {
    NCC_TRY(dim0, n.integer(kind == "kthvalue" ? 2 : 1, "dim", -1));
    NCC_TRY(in, orderedInput(n, c, self, dim0));
    x = in.first;
    dim = in.second;
  }
  int64_t length = typeOf(x).getDimSize(dim);
  if (kind == "kthvalue") {
    NCC_TRY(k, n.integer(1, "k"));
    if (k < 1 || k > length) return n.error("kthvalue k=" + std::to_string(k) + " for a dim of " + std::to_string(length));
    position = k - 1;
  } else {
    position = (length - 1) / 2;
  }
  auto [last, inverse] = dimLast(c, x, dim);
  int64_t rank = typeOf(last).getRank();
  if (failed(checkPairs(n, last, length, kind))) return failure();
  Value positions = sortedPositions(c, last, false);
  Value hit = c.compareScalar<aten::EqScalarOp>(positions, double(position));
  Value valid;  // nanmedian: the row's count of values that are not NaN
  if (ignoreNan) {
    // NaNs sort last: the median of the others is at floor((valid - 1) / 2).
    valid = c.sum(c.cast(c.logicalNot(c.isNan(last)), c.f32()), {rank - 1}, true);
    Value middle = c.unary<aten::FloorOp>(c.mulScalar(c.addScalar(valid, -1.0), 0.5));
    hit = c.compare<aten::EqTensorOp>(positions, middle);
  }
  Type elem = typeOf(last).getElementType();
  Value value = c.sum(c.where(hit, last, c.scalar(0.0, elem)), {rank - 1}, true);
  Value idx = c.iota(length, alongLast(rank, length));
  Value index = c.sum(c.where(hit, idx, c.scalar(0.0, c.f32())), {rank - 1}, true);
  if (ignoreNan) {  // a row of NaNs only: NaN at index 0, as eager
    Value none = c.compareScalar<aten::EqScalarOp>(valid, 0.0);
    value = c.where(none, c.scalar(std::nan(""), elem), value);
    index = c.where(none, c.scalar(0.0, c.f32()), index);
  } else if (kind != "kthvalue") {
    Value isNan = c.isNan(last);
    Value firstNan = c.amin(c.where(isNan, idx, c.scalar(double(length), c.f32())), {rank - 1}, true);
    Value anyNan = c.compareScalar<aten::LtScalarOp>(firstNan, double(length));
    value = c.where(anyNan, c.scalar(std::nan(""), elem), value);
    index = c.where(anyNan, firstNan, index);
  }
  if (failed(c.finish(c.permute(value, inverse), 0))) return failure();
  if (kind.ends_with("_all") || n.node.outputs_size() < 2) return success();
  return c.finish(c.permute(index, inverse), 1);
}

// bucketize(self, boundaries, right) and searchsorted(sorted, self, right,
// side): the count of boundaries b with !(b >= x) (right: !(b > x)) along
// the boundaries' last dim; a NaN x counts every boundary, as eager's binary
// search ends.
LogicalResult binarySearch(NodeImporter& n, bool isBucketize) {
  Composer c(n);
  NCC_TRY(seq, n.tensor(isBucketize ? 1 : 0, isBucketize ? "boundaries" : "sorted_sequence"));
  NCC_TRY(self, n.tensor(isBucketize ? 0 : 1, "self"));
  NCC_TRY(right, n.boolean(3, "right", false));
  if (!isBucketize) {
    NCC_TRY(side, n.string(4, "side", ""));
    if (side == "right") right = true;
    else if (!side.empty() && side != "left") return n.error("searchsorted side '" + side + "'");
  }
  Value x = c.toFloat(self), b = c.toFloat(seq);
  int64_t rank = typeOf(x).getRank(), seqRank = typeOf(b).getRank();
  if (seqRank == 0) return n.error("the boundaries must have at least one dim");
  int64_t m = typeOf(b).getShape().back();
  if (!isBucketize && n.isTensor(5, "sorter")) {  // the sequence is seq[.., sorter[.., k]]
    NCC_TRY(sorter, n.tensor(5, "sorter"));
    if (!isIndexType(typeOf(sorter).getElementType()) || typeOf(sorter).getShape() != typeOf(b).getShape())
      return n.error("searchsorted needs an integer sorter of the sequence's shape");
    if (typeOf(b).getNumElements() * m > kMaxPairs) return n.error("a sorter of more than 2^28 comparisons");
    Value hit = c.compare<aten::EqTensorOp>(c.unsqueeze(c.cast(sorter, c.f32()), seqRank),
                                            c.iota(m, alongLast(seqRank + 1, m)));  // [.., k, m]
    b = c.sum(c.where(hit, c.unsqueeze(b, seqRank - 1), c.scalar(0.0, typeOf(b).getElementType())), {seqRank}, false);
  }
  if (typeOf(x).getNumElements() * m > kMaxPairs) return n.error("more than 2^28 comparisons with the boundaries");
  Type compute = aten::promoteTypes(typeOf(x), typeOf(b));
  x = c.cast(x, compute);
  b = c.cast(b, compute);
  Value cmp;
  if (seqRank == 1) {
    SmallVector<int64_t> shape(rank, 1);
    shape.push_back(m);
    Value xs = c.unsqueeze(x, rank);  // [..., 1] against [1.., m]
    Value bs = c.reshape(b, shape);
    cmp = right ? c.compare<aten::GtTensorOp>(bs, xs) : c.compare<aten::GeTensorOp>(bs, xs);
  } else {
    // the leading dims match; the values' last dim searches the sequence's
    if (rank != seqRank || typeOf(x).getShape().drop_back() != typeOf(b).getShape().drop_back())
      return n.error("searchsorted needs matching leading dims");
    Value xs = c.unsqueeze(x, rank);          // [..., k, 1]
    Value bs = c.unsqueeze(b, seqRank - 1);   // [..., 1, m]
    cmp = right ? c.compare<aten::GtTensorOp>(bs, xs) : c.compare<aten::GeTensorOp>(bs, xs);
  }
  Value count = c.sum(c.cast(c.logicalNot(cmp), c.f32()), {typeOf(cmp).getRank() - 1}, false);
  return c.finish(count);
}

//===----------------------------------------------------------------------===//
// Writes into a copy
//===----------------------------------------------------------------------===//

// Rows of `table` [M, R] written by `values` [P, R] at f32 `rows` [P]
// (rows outside [0, M) write nothing): the last write of a row wins, or
// (accumulate) the writes add up.
FailureOr<Value> writeRows(NodeImporter& n, Composer& c, Value table, Value rows, Value values, bool accumulate) {
  int64_t m = typeOf(table).getDimSize(0), r = typeOf(table).getDimSize(1), p = typeOf(rows).getDimSize(0);
  Type elem = typeOf(table).getElementType();
  values = c.cast(values, elem);
  Value hit = c.compare<aten::EqTensorOp>(c.reshape(rows, {1, p}), c.iota(m, {m, 1}));  // [M, P]
  if (accumulate) {
    if (p * m * r > kMaxPairs) return n.error("an accumulating write of more than 2^28 terms");
    Value terms = c.where(c.unsqueeze(hit, 1), c.unsqueeze(c.permute(values, {1, 0}), 0), c.scalar(0.0, elem));  // [M, R, P]
    return c.add(table, c.sum(terms, {2}, false));
  }
  if (p * m > kMaxPairs) return n.error("a write of more than 2^28 index comparisons");
  Value writer = c.amax(c.where(hit, c.iota(p, {1, p}), c.scalar(-1.0, c.f32())), {1}, false);  // [M]
  Value written = c.compareScalar<aten::GeScalarOp>(writer, 0.0);
  Value safe = c.cast(c.where(written, writer, c.scalar(0.0, c.f32())), n.b.getIntegerType(64));
  NCC_TRY(picked, gatherAlong(c, values, 0, safe));  // [M, R]
  return c.where(c.reshape(written, {m, 1}), picked, table);
}

// What scatter_reduce and index_reduce make of the values written to one
// position: one of sum, prod, mean, amax, amin, over those values and
// (include_self) the position's own value. A position nothing writes keeps
// its value. An integer mean is floored, as eager divides integers.
struct ScatterReduction {
  std::string reduce;  // empty: scatter's last write wins, or "add" (scatter_add)
  bool includeSelf = true;
};

FailureOr<ScatterReduction> scatterReduction(NodeImporter& n, StringRef op, size_t reducePos, size_t includeSelfPos,
                                             bool allowSum) {
  NCC_TRY(reduce, n.string(reducePos, "reduce", ""));
  NCC_TRY(includeSelf, n.boolean(includeSelfPos, "include_self", true));
  bool known = reduce == "prod" || reduce == "mean" || reduce == "amax" || reduce == "amin" || (allowSum && reduce == "sum");
  if (!known)
    return n.error(op.str() + " reduce must be one of " + (allowSum ? "sum, " : "") + "prod, mean, amax, amin (got '" +
                   reduce + "')");
  return ScatterReduction{reduce, includeSelf};
}

// `region` [..., L]: each position's combination of the values `hit`
// [..., rows >= L, j] marks in `srcRow` [..., 1, j].
Value reduceWrites(Composer& c, Value region, Value hit, Value srcRow, const ScatterReduction& r, bool integer) {
  int64_t rank = typeOf(region).getRank(), length = typeOf(region).getShape().back();
  Type elem = typeOf(region).getElementType();
  auto positions = [&](Value v) { return c.slice(v, rank - 1, 0, length); };
  auto among = [&](double others) { return c.where(hit, srcRow, c.scalar(others, elem)); };  // [..., rows, j]
  const double inf = std::numeric_limits<double>::infinity();
  Value written;
  if (r.reduce == "sum" || r.reduce == "mean") {
    written = c.sum(among(0.0), {rank}, false);
  } else if (r.reduce == "prod") {
    Value product = productAlong(c, among(1.0), rank);
    written = c.reshape(product, typeOf(product).getShape().drop_back());
  } else {
    written = r.reduce == "amax" ? c.amax(among(-inf), {rank}, false) : c.amin(among(inf), {rank}, false);
  }
  written = positions(written);
  Value count = positions(c.sum(c.cast(hit, c.f32()), {rank}, false));
  if (r.includeSelf && r.reduce != "mean") {
    if (r.reduce == "sum") return c.add(region, written);
    if (r.reduce == "prod") return c.mul(region, written);
    return r.reduce == "amax" ? c.maximum(region, written) : c.minimum(region, written);
  }
  if (r.reduce == "mean") {
    Value total = r.includeSelf ? c.add(region, written) : written;
    Value divisor = r.includeSelf ? c.addScalar(count, 1.0) : c.maximum(count, c.scalar(1.0, c.f32()));
    written = c.div(total, divisor);
    if (integer) written = c.unary<aten::FloorOp>(written);
    written = c.cast(written, elem);
    if (r.includeSelf) return written;
  }
  return c.where(c.compareScalar<aten::GtScalarOp>(count, 0.0), written, region);
}

// scatter(self, dim, index, src | value), scatter_add, scatter_reduce:
// along `dim`, element j of each index row writes position index[.., j,
// ..]; the index's extent in the other dims (at most self's and src's)
// bounds the rows written. The last write of a position wins (eager's CPU
// loop order); scatter_add sums; scatter_reduce combines as
// reduceWrites says. An index outside [0, size) writes nothing (eager
// raises).
LogicalResult scatterInto(NodeImporter& n, Composer& c, Value self, int64_t dim0, Value index, Value src,
                          const ScatterReduction& r) {
  NCC_TRY(type, n.resultType());
  if (!isIndexType(typeOf(index).getElementType())) return n.error("scatter needs integer indices");
  if (failed(checkDims(n, {dim0}, typeOf(self).getRank()))) return failure();
  Type compute = c.floatOf(type.getElementType());
  Value x = c.cast(self, compute);
  if (typeOf(x).getRank() == 0) x = c.reshape(x, {1});
  if (typeOf(index).getRank() == 0) index = c.reshape(index, {1});
  int64_t rank = typeOf(x).getRank(), dim = normalizeDim(dim0, rank);
  if (typeOf(index).getRank() != rank) return n.error("scatter needs an index of the input's rank");
  if (typeOf(index).getNumElements() == 0) return c.finish(c.fresh(x, self));  // nothing written
  if (!src) {  // scatter.value: the value given as a 0-d tensor
    NCC_TRY(v, n.number(3, "value"));
    src = c.splat(typeOf(index).getShape(), compute, asTensorScalar(v, self));
  } else {
    src = c.cast(src, compute);
    if (typeOf(src).getRank() == 0) src = c.reshape(src, {1});
    if (typeOf(src).getRank() != rank) return n.error("scatter needs a src of the input's rank");
  }
  for (int64_t d = 0; d < rank; ++d) {
    int64_t extent = typeOf(index).getDimSize(d);
    if (extent > typeOf(src).getDimSize(d) || (d != dim && extent > typeOf(x).getDimSize(d)))
      return n.error("scatter index is larger than src or self in dim " + std::to_string(d));
    src = c.slice(src, d, 0, extent);
  }
  // the written region of self: the index's extent in the other dims
  Value region = x;
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim) region = c.slice(region, d, 0, typeOf(index).getDimSize(d));
  auto [regionLast, inverse] = dimLast(c, region, dim);
  Value indexLast = dimLast(c, index, dim).first;
  Value srcLast = dimLast(c, src, dim).first;
  int64_t length = typeOf(regionLast).getShape().back(), count = typeOf(indexLast).getShape().back();
  if (typeOf(indexLast).getNumElements() * length > kMaxPairs)
    return n.error("scatter of more than 2^28 index comparisons");
  // pairs [..., p, j] (position, index element), reduced over the last dim;
  // the positions padded to alignedRows, their results dropped
  int64_t rows = alignedRows(length);
  SmallVector<int64_t> pShape(rank - 1, 1);
  pShape.append({rows, 1});
  Value hit = c.compare<aten::EqTensorOp>(c.unsqueeze(c.cast(indexLast, c.f32()), rank - 1), c.iota(rows, pShape));
  auto positions = [&](Value v) { return c.slice(v, rank - 1, 0, length); };
  Value zero = c.scalar(0.0, compute);
  Value srcRow = c.unsqueeze(srcLast, rank - 1);  // [..., 1, j]
  Value written;
  if (r.reduce == "add") {
    written = c.add(regionLast, positions(c.sum(c.where(hit, srcRow, zero), {rank}, false)));
  } else if (!r.reduce.empty()) {
    written = reduceWrites(c, regionLast, hit, srcRow, r, llvm::isa<IntegerType>(type.getElementType()));
  } else {
    Value jIota = c.iota(count, alongLast(rank + 1, count));
    Value writers = c.amax(c.where(hit, jIota, c.scalar(-1.0, c.f32())), {rank}, false);  // [..., p]
    Value mine = c.compare<aten::EqTensorOp>(c.unsqueeze(writers, rank), jIota);            // [..., p, j]
    Value value = positions(c.sum(c.where(mine, srcRow, zero), {rank}, false));
    written = c.where(c.compareScalar<aten::GeScalarOp>(positions(writers), 0.0), value, regionLast);
  }
  Value result = c.permute(written, inverse);
  // put the region back into self (the rest unchanged)
  // (the last dims first, so that each piece of self spans the dims already restored)
  for (int64_t d = rank - 1; d >= 0; --d) {
    int64_t full = typeOf(x).getDimSize(d), part = typeOf(result).getDimSize(d);
    if (d == dim || part == full) continue;
    Value rest = c.slice(x, d, part, full);
    for (int64_t e = 0; e < d; ++e)
      if (e != dim) rest = c.slice(rest, e, 0, typeOf(result).getDimSize(e));
    result = c.cat({result, rest}, d);
  }
  return c.finish(result);
}

LogicalResult scatter(NodeImporter& n, StringRef kind) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(dim, n.integer(1, "dim"));
  NCC_TRY(index, n.tensor(2, "index"));
  Value src;
  if (kind != "value") {
    NCC_TRY(s, n.tensor(3, "src"));
    src = s;
  }
  ScatterReduction r;
  if (kind == "add") r.reduce = "add";
  if (kind == "reduce") {
    NCC_TRY(reduction, scatterReduction(n, "scatter_reduce", 4, 5, true));
    r = reduction;
  }
  return scatterInto(n, c, self, dim, index, src, r);
}

// index_add, index_copy and index_reduce: `source` must have self's shape
// with `dim` replaced by the index's element count. Returns the index as
// f32 [count], negative entries counted from the end of the dim.
FailureOr<Value> indexAlongDim(NodeImporter& n, Composer& c, StringRef op, Value self, int64_t dim, Value index,
                               Value source) {
  int64_t count = typeOf(index).getNumElements();
  SmallVector<int64_t> expected(typeOf(self).getShape());
  expected[size_t(dim)] = count;
  if (typeOf(source).getShape() != ArrayRef<int64_t>(expected))
    return n.error(op.str() + " source of shape " + aten::shapeToString(typeOf(source).getShape()) + ", expected " +
                   aten::shapeToString(expected));
  Value f = c.cast(c.reshape(index, {count}), c.f32());
  double size = double(typeOf(self).getDimSize(dim));
  return c.where(c.compareScalar<aten::LtScalarOp>(f, 0.0), c.addScalar(f, size), f);
}

// index_reduce(self, dim, index, source, reduce, include_self): position j
// of source along dim combined into position index[j] of self (negative
// indices count from the end, as index_add's): a scatter_reduce whose index
// is the 1-d index spread over source's shape.
LogicalResult indexReduce(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(dim0, n.integer(1, "dim"));
  NCC_TRY(index, n.tensor(2, "index"));
  NCC_TRY(source, n.tensor(3, "source"));
  NCC_TRY(r, scatterReduction(n, "index_reduce", 4, 5, false));
  if (!isIndexType(typeOf(index).getElementType()) || typeOf(index).getRank() > 1)
    return n.error("index_reduce needs a 0-d or 1-d integer index");
  if (failed(checkDims(n, {dim0}, typeOf(self).getRank()))) return failure();
  if (typeOf(self).getRank() == 0) self = c.reshape(self, {1});
  if (typeOf(source).getRank() == 0) source = c.reshape(source, {1});
  int64_t rank = typeOf(self).getRank(), dim = normalizeDim(dim0, rank);
  NCC_TRY(f, indexAlongDim(n, c, "index_reduce", self, dim, index, source));
  SmallVector<int64_t> along(rank, 1);
  along[dim] = typeOf(f).getNumElements();
  Value spread = c.expand(c.reshape(c.cast(f, n.b.getIntegerType(64)), along), typeOf(source).getShape());
  return scatterInto(n, c, self, dim, spread, source, r);
}

// slice_scatter(self, src, dim, start, end, step): self with the slice
// replaced by src; select_scatter(self, src, dim, index): one position.
LogicalResult sliceScatter(NodeImporter& n, bool isSelect) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(src, n.tensor(1, "src"));
  NCC_TRY(dim0, n.integer(2, "dim", 0));
  NCC_TRY(type, n.resultType());
  int64_t rank = typeOf(self).getRank();
  if (rank == 0) return n.error("slice_scatter of a 0-d tensor");
  if (failed(checkDims(n, {dim0}, rank))) return failure();
  int64_t dim = normalizeDim(dim0, rank), size = typeOf(self).getDimSize(dim);
  int64_t start = 0, end = size, step = 1;
  Value s = c.cast(src, type.getElementType());
  if (isSelect) {
    NCC_TRY(index, n.integer(3, "index"));
    if (index < -size || index >= size) return n.error("select_scatter index out of range");
    start = index < 0 ? index + size : index;
    end = start + 1;
    if (typeOf(s).getRank() != rank - 1) return n.error("select_scatter needs a src with the dim removed");
    s = c.unsqueeze(s, dim);
  } else {
    NCC_TRY(st, n.integer(3, "start", 0));
    NCC_TRY(en, n.integer(4, "end", size));
    NCC_TRY(sp, n.integer(5, "step", 1));
    if (sp <= 0) return n.error("slice_scatter step must be positive");
    auto clampIndex = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + size : v, 0, size); };
    start = clampIndex(st);
    end = std::max(start, clampIndex(en));
    step = sp;
  }
  int64_t count = end > start ? (end - start + step - 1) / step : 0;
  SmallVector<int64_t> expected(typeOf(self).getShape());
  expected[dim] = count;
  if (typeOf(s).getShape() != ArrayRef<int64_t>(expected))
    return n.error("slice_scatter src of shape " + aten::shapeToString(typeOf(s).getShape()) + " for a slice of " +
                   aten::shapeToString(expected));
  Value x = c.cast(self, type.getElementType());
  if (count == 0) return c.finish(c.fresh(x, self));
  if (step == 1) {
    SmallVector<Value> pieces;
    if (start > 0) pieces.push_back(c.slice(x, dim, 0, start));
    pieces.push_back(s);
    if (end < size) pieces.push_back(c.slice(x, dim, end, size));
    return c.finish(c.fresh(c.cat(pieces, dim), self));
  }
  // positions start + k * step take src[k]: src spread by a gather, then selected
  SmallVector<double> from(size, 0.0);
  SmallVector<double> inSlice(size, 0.0);
  for (int64_t k = 0; k < count; ++k) {
    from[start + k * step] = double(k);
    inSlice[start + k * step] = 1.0;
  }
  Value fromIndex = c.constant({size}, n.b.getIntegerType(64), from);
  NCC_TRY(spread, gatherAlong(c, c.toFloat(s), dim, fromIndex));
  SmallVector<int64_t> maskShape(rank, 1);
  maskShape[dim] = size;
  Value mask = c.constant(maskShape, c.i1(), inSlice);
  return c.finish(c.where(mask, c.cast(spread, type.getElementType()), x));
}

// index_put(self, indices, values, accumulate): a bool mask (of self's
// leading dims) with a single value is a where; integer index tensors write
// the rows their (broadcast) indices name, negative ones from the end, as
// index.Tensor reads them (values broadcast to the indexed shape). An index
// out of range writes nothing (eager raises).
LogicalResult indexPut(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(values, n.tensor(2, "values"));
  NCC_TRY(accumulate, n.boolean(3, "accumulate", false));
  NCC_TRY(type, n.resultType());
  NCC_TRY(read, indexList(n, 1));
  SmallVector<int64_t> dims = read.dims;
  SmallVector<Value> indices = read.indices;
  if (indices.empty()) return n.error("index_put needs an index tensor");
  Type compute = c.floatOf(type.getElementType());
  Value x = c.cast(self, compute);
  int64_t rank = typeOf(x).getRank();
  Value v = c.cast(values, compute);
  if (llvm::any_of(indices, [](Value i) { return typeOf(i).getElementType().isInteger(1); })) {
    if (indices.size() != 1 || dims.front() != 0)
      return n.error("index_put with a bool mask mixed with other indices is not supported");
    Value mask = indices.front();
    auto ms = typeOf(mask).getShape();
    if (int64_t(ms.size()) > rank || ms != typeOf(x).getShape().take_front(ms.size()))
      return n.error("index_put mask of shape " + aten::shapeToString(ms) + " for self of shape " +
                     aten::shapeToString(typeOf(x).getShape()));
    if (typeOf(v).getNumElements() != 1 &&
        !(typeOf(v).getRank() >= 1 && typeOf(v).getRank() <= rank - int64_t(ms.size()) &&
          aten::broadcastShapes(typeOf(v).getShape(), typeOf(x).getShape().drop_front(ms.size()))))
      return n.error("index_put with a bool mask needs one value or a value per masked row (a result whose shape "
                     "depends on the mask's values otherwise)");
    if (typeOf(v).getNumElements() == 1) v = c.reshape(v, {});
    SmallVector<int64_t> maskShape(ms);
    maskShape.append(rank - ms.size(), 1);
    Value m = c.reshape(mask, maskShape);
    Value written = accumulate ? c.add(x, c.where(m, v, c.scalar(0.0, compute))) : c.where(m, v, x);
    return c.finish(c.expand(written, typeOf(x).getShape()));
  }
  for (Value i : indices)
    if (!isIndexType(typeOf(i).getElementType())) return n.error("index_put needs integer or bool indices");
  if (failed(checkBroadcast(n, indices))) return failure();
  if (dims.back() >= rank) return n.error("more indices than dims");
  bool adjacent = dims.back() - dims.front() + 1 == int64_t(dims.size());
  SmallVector<int64_t> perm(dims);
  for (int64_t d = 0; d < rank; ++d)
    if (!llvm::is_contained(dims, d)) perm.push_back(d);
  SmallVector<int64_t> inverse(rank);
  for (int64_t i = 0; i < rank; ++i) inverse[perm[i]] = i;
  Value front = c.permute(x, perm);
  int64_t merged = 1;
  for (int64_t d : dims) merged *= typeOf(x).getDimSize(d);
  if (merged > (int64_t(1) << 24)) return n.error("indexed dims of more than 2^24 elements together");
  SmallVector<int64_t> sizes;
  for (int64_t d : dims) sizes.push_back(typeOf(x).getDimSize(d));
  auto [named, valid] = flatIndexOf(c, sizes, indices);
  Value flat = c.where(valid, named, c.scalar(-1.0, c.f32()));
  auto broadcast = typeOf(flat).getShape();
  // the values as eager lays them out: B in place of the indexed dims
  // (adjacent) or first (otherwise); moved to B first
  SmallVector<int64_t> rest;
  for (int64_t d = 0; d < rank; ++d)
    if (!llvm::is_contained(dims, d)) rest.push_back(typeOf(x).getDimSize(d));
  SmallVector<int64_t> laid;
  int64_t first = dims.front(), b = int64_t(broadcast.size());
  if (adjacent) {
    laid.append(typeOf(x).getShape().begin(), typeOf(x).getShape().begin() + first);
    laid.append(broadcast.begin(), broadcast.end());
    laid.append(typeOf(x).getShape().begin() + dims.back() + 1, typeOf(x).getShape().end());
  } else {
    laid.append(broadcast.begin(), broadcast.end());
    laid.append(rest.begin(), rest.end());
  }
  auto vb = aten::broadcastShapes(typeOf(v).getShape(), laid);
  if (!vb || *vb != ArrayRef<int64_t>(laid))
    return n.error("index_put values of shape " + aten::shapeToString(typeOf(v).getShape()) +
                   " do not broadcast to the indexed shape " + aten::shapeToString(laid));
  v = c.expand(v, laid);
  if (adjacent && first > 0) {
    SmallVector<int64_t> vperm;
    for (int64_t i = 0; i < b; ++i) vperm.push_back(first + i);
    for (int64_t i = 0; i < int64_t(laid.size()); ++i)
      if (i < first || i >= first + b) vperm.push_back(i);
    v = c.permute(v, vperm);
  }
  int64_t points = typeOf(flat).getNumElements(), restSize = 1;
  for (int64_t s : rest) restSize *= s;
  Value table = c.reshape(front, {merged, restSize});
  NCC_TRY(written, writeRows(n, c, table, c.reshape(flat, {points}), c.reshape(v, {points, restSize}), accumulate));
  return c.finish(c.permute(c.reshape(written, typeOf(front).getShape()), inverse));
}

// index_add(self, dim, index, source, alpha): source's positions along dim
// added (times alpha) to the positions index names; index_copy(self, dim,
// index, source): written there instead (of repeated indices the last
// wins; eager leaves that order unspecified).
LogicalResult indexAdd(NodeImporter& n, bool copy) {
  Composer c(n);
  std::string op = copy ? "index_copy" : "index_add";
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(dim0, n.integer(1, "dim"));
  NCC_TRY(index, n.tensor(2, "index"));
  NCC_TRY(source, n.tensor(3, "source"));
  NCC_TRY(alpha, copy ? FailureOr<double>(1.0) : n.numberAsResult(4, "alpha", 1.0));
  NCC_TRY(type, n.resultType());
  if (!isIndexType(typeOf(index).getElementType()) || typeOf(index).getRank() > 1)
    return n.error(op + " needs a 0-d or 1-d integer index");
  if (failed(checkDims(n, {dim0}, typeOf(self).getRank()))) return failure();
  Type compute = c.floatOf(type.getElementType());
  Value x = c.cast(self, compute), s = c.cast(source, compute);
  if (typeOf(x).getRank() == 0) x = c.reshape(x, {1});
  if (typeOf(s).getRank() == 0) s = c.reshape(s, {1});
  int64_t rank = typeOf(x).getRank(), dim = normalizeDim(dim0, rank);
  int64_t count = typeOf(index).getNumElements();
  NCC_TRY(f, indexAlongDim(n, c, op, x, dim, index, s));
  if (count == 0) return c.finish(c.fresh(x, self));  // nothing written
  if (alpha != 1.0) s = c.mulScalar(s, alpha);
  auto [front, inverse] = [&] {
    SmallVector<int64_t> perm{dim};
    for (int64_t d = 0; d < rank; ++d)
      if (d != dim) perm.push_back(d);
    SmallVector<int64_t> inv(rank);
    for (int64_t i = 0; i < rank; ++i) inv[perm[i]] = i;
    return std::make_pair(perm, inv);
  }();
  Value xf = c.permute(x, front), sf = c.permute(s, front);
  int64_t rows = typeOf(xf).getDimSize(0), restSize = typeOf(xf).getNumElements() / std::max<int64_t>(rows, 1);
  NCC_TRY(written, writeRows(n, c, c.reshape(xf, {rows, restSize}), f, c.reshape(sf, {count, restSize}), !copy));
  return c.finish(c.permute(c.reshape(written, typeOf(xf).getShape()), inverse));
}

// masked_scatter(self, mask, source): the positions where the mask
// (broadcast against self) is true take source's elements in order (both
// read row-major); the others keep self's. Each true position's place in
// source is the count of true positions before it (a scan).
LogicalResult maskedScatter(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(mask, n.tensor(1, "mask"));
  NCC_TRY(source, n.tensor(2, "source"));
  NCC_TRY(type, n.resultType());
  if (!typeOf(mask).getElementType().isInteger(1)) return n.error("masked_scatter needs a bool mask");
  if (failed(checkBroadcast(n, {self, mask}))) return failure();
  Type elem = type.getElementType();
  int64_t total = type.getNumElements(), available = typeOf(source).getNumElements();
  Value x = c.reshape(c.expand(c.cast(self, elem), type.getShape()), {total});
  // eager refuses a mask with more true positions than source has elements
  if (available == 0) return c.finish(c.fresh(x, self));
  Value m = c.reshape(c.expand(mask, type.getShape()), {total});
  Value before = c.addScalar(scan(c, c.cast(m, c.f32()), 0, 0.0, [&](Value a, Value b) { return c.add(a, b); }), -1.0);
  Value at = c.minimum(c.maximum(before, c.scalar(0.0, c.f32())), c.scalar(double(available - 1), c.f32()));
  NCC_TRY(taken, gatherAlong(c, c.reshape(c.cast(source, elem), {available}), 0, c.cast(at, n.b.getIntegerType(64))));
  return c.finish(c.where(m, taken, x));
}

// isin(elements, test_elements, assume_unique, invert) (either may be a
// number): whether each element equals some test element, every pair
// compared in the dtype both promote to (a NaN equals nothing).
LogicalResult isIn(NodeImporter& n, bool tensorElements, bool tensorTests) {
  Composer c(n);
  NCC_TRY(type, n.resultType());
  NCC_TRY(invert, n.boolean(3, "invert", false));
  Value elements, tests;
  if (tensorElements) {
    NCC_TRY(e, n.tensor(0, "elements"));
    elements = e;
  }
  if (tensorTests) {
    NCC_TRY(t, n.tensor(1, "test_elements"));
    tests = t;
  }
  if (!elements) {
    NCC_TRY(v, n.number(0, "element"));
    elements = c.scalar(v, c.f32());
  }
  if (!tests) {
    NCC_TRY(v, n.number(1, "test_element"));
    tests = c.scalar(v, c.f32());
  }
  Type compute = c.floatOf(aten::promoteTypes(typeOf(elements), typeOf(tests)));
  int64_t count = typeOf(tests).getNumElements(), rank = typeOf(elements).getRank();
  if (count == 0) return c.finish(c.splat(type.getShape(), c.i1(), invert ? 1.0 : 0.0));
  if (typeOf(elements).getNumElements() * count > kMaxPairs) return n.error("isin of more than 2^28 comparisons");
  SmallVector<int64_t> testShape(size_t(rank), 1);
  testShape.push_back(count);
  Value equal = c.compare<aten::EqTensorOp>(c.unsqueeze(c.cast(elements, compute), rank),
                                            c.reshape(c.cast(tests, compute), testShape));
  Value found = c.amax(c.cast(equal, c.f32()), {rank}, false);
  return c.finish(invert ? c.compareScalar<aten::EqScalarOp>(found, 0.0) : c.compareScalar<aten::GtScalarOp>(found, 0.0));
}

// fill.Tensor(self, value) and masked_fill.Tensor(self, mask, value): a 0-d
// value tensor, cast to self's dtype.
LogicalResult fillWithTensor(NodeImporter& n, bool masked) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(value, n.tensor(masked ? 2 : 1, "value"));
  if (typeOf(value).getNumElements() != 1) return n.error("the fill value must be a 0-d tensor");
  Type elem = typeOf(self).getElementType();
  Value v = c.reshape(c.cast(value, elem), {});
  if (!masked) return c.finish(c.expand(v, typeOf(self).getShape()));
  NCC_TRY(mask, n.tensor(1, "mask"));
  if (!typeOf(mask).getElementType().isInteger(1)) return n.error("masked_fill needs a bool mask");
  if (failed(checkBroadcast(n, {self, mask}))) return failure();
  return c.finish(c.where(mask, v, self));
}

// _embedding_bag (and _embedding_bag_forward_only): the rows of `weight`
// that `indices` name (a gather: an index out of range fails the execution),
// grouped into bags by `offsets` (bag b holds positions [offsets[b],
// offsets[b + 1])), padding_idx rows left out, times per_sample_weights (sum
// mode), then per bag their sum (a matmul with the bags' 0/1 membership
// matrix), mean (empty bags give 0) or maximum (empty bags give 0). Only the
// first result (the bags) is defined.
LogicalResult embeddingBag(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(weight, n.tensor(0, "weight"));
  NCC_TRY(indices, n.tensor(1, "indices"));
  NCC_TRY(offsets, n.tensor(2, "offsets"));
  NCC_TRY(mode, n.integer(4, "mode", 0));
  NCC_TRY(psw, optionalTensor(n, 6, "per_sample_weights"));
  NCC_TRY(includeLast, n.boolean(7, "include_last_offset", false));
  NCC_TRY(padding, n.integer(8, "padding_idx", -1));
  NCC_TRY(type, n.resultType());
  if (typeOf(weight).getRank() != 2 || typeOf(indices).getRank() != 1 || typeOf(offsets).getRank() != 1 ||
      !isIndexType(typeOf(indices).getElementType()) || !isIndexType(typeOf(offsets).getElementType()))
    return n.error("embedding_bag needs a [V, D] weight and 1-d integer indices and offsets");
  if (mode < 0 || mode > 2) return n.error("embedding_bag mode " + std::to_string(mode) + " (0 sum, 1 mean, 2 max)");
  if (psw && (mode != 0 || typeOf(psw).getShape() != typeOf(indices).getShape()))
    return n.error("per_sample_weights need sum mode and one weight per index");
  int64_t points = typeOf(indices).getDimSize(0), dim = typeOf(weight).getDimSize(1);
  int64_t bags = typeOf(offsets).getDimSize(0) - (includeLast ? 1 : 0);
  if (bags < 1) return n.error("embedding_bag needs at least one bag");
  if (bags * points > kMaxPairs || (mode == 2 && bags * points * dim > kMaxPairs))
    return n.error("embedding_bag of more than 2^28 bag-membership terms");
  Type elem = type.getElementType();
  if (!aten::isFloatType(elem)) return n.error("embedding_bag needs a float weight");
  auto rowsType = RankedTensorType::get({points, dim}, typeOf(weight).getElementType());
  Value rows = c.cast(n.b.create<aten::EmbeddingOp>(n.loc, rowsType, weight, gatherableIndices(n.b, n.loc, indices),
                                                    n.b.getI64IntegerAttr(-1)),
                      elem);
  // The bag of each position: the count of offsets at or before it, minus 1
  // (with include_last_offset, positions at or past the last offset count
  // every offset and belong to no bag). The integer inputs are read whole,
  // cast first (an integer graph input is not read through a view).
  Value position = c.iota(points, {1, points});
  int64_t starts = typeOf(offsets).getDimSize(0);
  Value offsetColumn = c.reshape(c.cast(offsets, c.f32()), {starts, 1});
  Value bagOf = c.addScalar(c.sum(c.cast(c.compare<aten::LeTensorOp>(offsetColumn, position), c.f32()), {0}, true), -1.0);
  Value member = c.compare<aten::EqTensorOp>(bagOf, c.iota(bags, {bags, 1}));  // [B, P]
  if (padding >= 0)
    member = c.logicalAnd(member, c.compareScalar<aten::NeScalarOp>(c.reshape(c.cast(indices, c.f32()), {1, points}),
                                                                 double(padding)));
  if (psw) rows = c.mul(rows, c.reshape(c.cast(psw, elem), {points, 1}));
  Value count = c.sum(c.cast(member, c.f32()), {1}, true);  // [B, 1]
  Value empty = c.compareScalar<aten::EqScalarOp>(count, 0.0);
  if (mode == 2) {
    Value candidates = c.where(c.unsqueeze(member, 2), c.unsqueeze(rows, 0), c.scalar(-kInf, elem));  // [B, P, D]
    Value top = c.amax(candidates, {1}, false);
    return c.finish(c.where(empty, c.scalar(0.0, elem), top));
  }
  Value sums = c.mm(c.cast(member, elem), rows);  // [B, D]
  if (mode == 0) return c.finish(sums);
  Value divisor = c.cast(c.where(empty, c.scalar(1.0, c.f32()), count), elem);
  return c.finish(c.div(sums, divisor));
}

//===----------------------------------------------------------------------===//
// Layout ops
//===----------------------------------------------------------------------===//

// pixel_shuffle: [.., C r^2, H, W] -> [.., C, H r, W r]; pixel_unshuffle
// the inverse.
LogicalResult pixelShuffle(NodeImporter& n, bool unshuffle) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(r, n.integer(1, unshuffle ? "downscale_factor" : "upscale_factor"));
  int64_t rank = typeOf(self).getRank();
  if (rank < 3 || r <= 0) return n.error("pixel_shuffle needs at least 3 dims and a positive factor");
  auto shape = typeOf(self).getShape();
  SmallVector<int64_t> lead(shape.begin(), shape.end() - 3);
  int64_t ch = shape[rank - 3], h = shape[rank - 2], w = shape[rank - 1], l = int64_t(lead.size());
  if (r > std::max({ch, h, w, int64_t(1)}))  // (and r * r cannot overflow)
    return n.error("pixel_shuffle factor " + std::to_string(r) + " larger than the dims it divides");
  SmallVector<int64_t> split(lead), perm;
  for (int64_t i = 0; i < l; ++i) perm.push_back(i);
  if (!unshuffle) {
    if (ch % (r * r)) return n.error("pixel_shuffle channels not divisible by the factor squared");
    split.append({ch / (r * r), r, r, h, w});  // c, r1, r2, h, w -> c, h, r1, w, r2
    for (int64_t i : {0, 3, 1, 4, 2}) perm.push_back(l + i);
  } else {
    if (h % r || w % r) return n.error("pixel_unshuffle size not divisible by the factor");
    split.append({ch, h / r, r, w / r, r});  // c, h, r1, w, r2 -> c, r1, r2, h, w
    for (int64_t i : {0, 2, 4, 1, 3}) perm.push_back(l + i);
  }
  return c.finish(c.fresh(c.permute(c.reshape(self, split), perm), self));
}

// take(x, index): x read flat at `index` (negative ones from the end), in
// the index's shape; an index out of range reads what the gather reads
// there (eager raises).
LogicalResult take(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(index, n.tensor(1, "index"));
  if (!isIndexType(typeOf(index).getElementType())) return n.error("take needs integer indices");
  int64_t count = typeOf(self).getNumElements();
  if (count == 0) return n.error("take from an empty tensor");
  Value flat = c.reshape(c.toFloat(self), {count});
  auto [position, valid] = flatIndexOf(c, {count}, {index});
  (void)valid;
  Value wrapped = c.cast(position, c.b.getI64Type());
  NCC_TRY(picked, gatherAlong(c, flat, 0, wrapped));
  return c.finish(picked);
}

// index_fill(x, dim, index, value): x with the positions of `index` along
// `dim` (negative ones from the end) set to `value` (a number or a 0-d
// tensor); positions out of range fill nothing (eager raises).
LogicalResult indexFill(NodeImporter& n, bool tensorValue) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(dim0, n.integer(1, "dim"));
  NCC_TRY(index, n.tensor(2, "index"));
  NCC_TRY(type, n.resultType());
  if (!isIndexType(typeOf(index).getElementType())) return n.error("index_fill needs integer indices");
  if (typeOf(index).getRank() > 1) return n.error("index_fill needs a 0-d or 1-d index");
  if (failed(checkDims(n, {dim0}, typeOf(self).getRank()))) return failure();
  int64_t dim = normalizeDim(dim0, typeOf(self).getRank());
  Value x = typeOf(self).getRank() == 0 ? c.reshape(self, {1}) : self;
  Type elem = type.getElementType();
  Value value;
  if (tensorValue) {
    NCC_TRY(v, n.tensor(3, "value"));
    if (typeOf(v).getNumElements() != 1) return n.error("index_fill needs a 0-d value tensor");
    value = c.cast(c.reshape(v, {}), elem);
  } else {
    NCC_TRY(v, n.number(3, "value"));
    value = c.scalar(asTensorScalar(v, x), elem);
  }
  int64_t size = typeOf(x).getDimSize(dim), count = std::max<int64_t>(typeOf(index).getNumElements(), 1);
  // (Unfused, at -O0, the [size, count] comparisons are a tensor of their
  // own: 65151 positions by as many indices took 34 GB.)
  if (size * count > kMaxPairs) return n.error("index_fill of more than 2^28 index comparisons");
  auto [position, valid] = flatIndexOf(c, {size}, {c.reshape(index, {count})});
  // [size, count]: position i is one of the indices
  Value hits = c.logicalAnd(c.compare<aten::EqTensorOp>(c.iota(size, {size, 1}), c.reshape(position, {1, count})),
                            c.reshape(valid, {1, count}));
  Value any = c.compareScalar<aten::GtScalarOp>(c.sum(c.cast(hits, c.f32()), {1}, false), 0.0);
  SmallVector<int64_t> along(size_t(typeOf(x).getRank()), 1);
  along[size_t(dim)] = size;
  return c.finish(c.where(c.reshape(any, along), value, c.cast(x, elem)));
}

// eye(n, m): ones where the row equals the column.
LogicalResult eye(NodeImporter& n, bool hasColumns) {
  Composer c(n);
  NCC_TRY(rows, n.integer(0, "n"));
  int64_t cols = rows;
  if (hasColumns) {
    NCC_TRY(m, n.integer(1, "m"));
    cols = m;
  }
  if (rows < 1 || cols < 1 || rows > (int64_t(1) << 24) || cols > (int64_t(1) << 24))
    return n.error("eye needs sizes from 1 to 2^24");
  NCC_TRY(type, n.resultType());
  Value diagonal = c.compare<aten::EqTensorOp>(c.iota(rows, {rows, 1}), c.iota(cols, {1, cols}));
  return c.finish(c.cast(diagonal, type.getElementType()));
}

// channel_shuffle(x, g): [N, C, ..] -> [N, g, C / g, ..], the two swapped,
// then [N, C, ..] again.
LogicalResult channelShuffle(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(groups, n.integer(1, "groups"));
  auto shape = typeOf(self).getShape();
  int64_t rank = typeOf(self).getRank();
  if (rank < 3) return n.error("channel_shuffle needs at least 3 dims");
  if (groups <= 0 || shape[1] % groups) return n.error("channel_shuffle needs a positive group count dividing the channels");
  SmallVector<int64_t> split{shape[0], groups, shape[1] / groups}, perm{0, 2, 1};
  for (int64_t i = 2; i < rank; ++i) {
    split.push_back(shape[size_t(i)]);
    perm.push_back(i + 1);
  }
  return c.finish(c.fresh(c.permute(c.reshape(self, split), perm), self));
}

// reflection_pad{1,2,3}d and replication_pad{1,2,3}d: pads (left, right)
// per dim from the last; a reflection mirrors without the edge element
// (pad < size), a replication repeats the edge.
LogicalResult modePad(NodeImporter& n, bool reflect) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(pads, n.ints(1, "padding"));
  int64_t rank = typeOf(self).getRank();
  if (pads.size() % 2 || int64_t(pads.size()) / 2 > rank) return n.error("padding needs (left, right) pairs per dim");
  Value x = self;
  for (size_t i = 0; i < pads.size() / 2; ++i) {
    int64_t dim = rank - 1 - int64_t(i), size = typeOf(x).getDimSize(dim);
    int64_t left = pads[2 * i], right = pads[2 * i + 1];
    if (left < 0 || right < 0) {
      x = c.slice(x, dim, std::max<int64_t>(0, -left), size - std::max<int64_t>(0, -right));
      size = typeOf(x).getDimSize(dim);
      left = std::max<int64_t>(left, 0);
      right = std::max<int64_t>(right, 0);
    }
    if (reflect && (left >= size || right >= size))
      return n.error("reflection padding of " + std::to_string(std::max(left, right)) + " for a dim of " +
                     std::to_string(size) + " (it must be smaller)");
    if (!reflect && size == 0 && (left || right)) return n.error("replication padding of an empty dim");
    SmallVector<Value> pieces;
    auto mirrored = [&](int64_t from, int64_t to) {  // x[from:to] reversed, one slice per element
      SmallVector<Value> parts;
      for (int64_t k = to - 1; k >= from; --k) parts.push_back(c.slice(x, dim, k, k + 1));
      return c.cat(parts, dim);
    };
    auto repeated = [&](int64_t at, int64_t count) {
      SmallVector<int64_t> shape(typeOf(x).getShape());
      shape[dim] = count;
      return c.expand(c.slice(x, dim, at, at + 1), shape);
    };
    if (left) pieces.push_back(reflect ? mirrored(1, left + 1) : repeated(0, left));
    pieces.push_back(x);
    if (right) pieces.push_back(reflect ? mirrored(size - 1 - right, size - 1) : repeated(size - 1, right));
    x = c.cat(pieces, dim);
  }
  return c.finish(c.fresh(x, self));
}

// block_diag(tensors): each (0-, 1- or 2-d, as a [1, n] or [r, c] block)
// placed along the diagonal, zeros elsewhere.
LogicalResult blockDiag(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(type, n.resultType());
  const Argument* list = n.arg(0, "tensors");
  if (!list || list->value_case() != Argument::kTensorList) return n.error("argument 'tensors' must be a list");
  SmallVector<Value> blocks;
  int64_t cols = 0;
  for (const std::string& name : list->tensor_list().values()) {
    auto it = n.values.find(name);
    if (it == n.values.end() || it->second.size() != 1) return n.error("names unknown value '" + name + "'");
    Value t = c.cast(it->second.front(), type.getElementType());
    int64_t r = typeOf(t).getRank();
    if (r > 2) return n.error("block_diag of a tensor with more than 2 dims");
    if (r == 0) t = c.reshape(t, {1, 1});
    if (r == 1) t = c.reshape(t, {1, typeOf(t).getDimSize(0)});
    blocks.push_back(t);
    cols += typeOf(t).getDimSize(1);
  }
  SmallVector<Value> rows;
  int64_t before = 0;
  for (Value t : blocks) {
    int64_t w = typeOf(t).getDimSize(1);
    if (typeOf(t).getDimSize(0) > 0) rows.push_back(padDim(c, t, 1, before, cols - before - w, 0.0));
    before += w;
  }
  if (rows.empty()) return n.error("block_diag of empty blocks");
  return c.finish(c.cat(rows, 0));
}

// linalg_cross(a, b, dim): the cross product of 3-vectors along dim.
LogicalResult cross(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(a, n.tensor(0, "self"));
  NCC_TRY(b, n.tensor(1, "other"));
  NCC_TRY(dim0, n.integer(2, "dim", -1));
  NCC_TRY(type, n.resultType());
  if (failed(checkBroadcast(n, {a, b}))) return failure();
  auto shape = *aten::broadcastShapes(typeOf(a).getShape(), typeOf(b).getShape());
  int64_t rank = int64_t(shape.size());
  if (failed(checkDims(n, {dim0}, rank)) || rank == 0) return failure();
  int64_t dim = normalizeDim(dim0, rank);
  if (shape[dim] != 3) return n.error("cross needs 3 elements along dim " + std::to_string(dim));
  Type compute = c.floatOf(type.getElementType());
  Value x = c.expand(c.cast(a, compute), shape), y = c.expand(c.cast(b, compute), shape);
  auto at = [&](Value v, int64_t i) { return c.slice(v, dim, i, i + 1); };
  SmallVector<Value> parts;
  for (int64_t i = 0; i < 3; ++i) {
    int64_t j = (i + 1) % 3, k = (i + 2) % 3;
    parts.push_back(c.sub(c.mul(at(x, j), at(y, k)), c.mul(at(x, k), at(y, j))));
  }
  return c.finish(c.cat(parts, dim));
}

}  // namespace

void addComposedIndexingOps(std::map<std::string, Builder>& table) {
  auto add = [&](const std::string& name, Builder builder) { table.emplace(name, std::move(builder)); };
  add("aten::sort", [](NodeImporter& n) { return sort(n, false); });
  add("aten::sort.stable", [](NodeImporter& n) { return sort(n, true); });
  add("aten::topk", topk);
  add("aten::kthvalue", [](NodeImporter& n) { return kthOrMedian(n, "kthvalue"); });
  add("aten::median.dim", [](NodeImporter& n) { return kthOrMedian(n, "median"); });
  add("aten::median", [](NodeImporter& n) { return kthOrMedian(n, "median_all"); });
  add("aten::nanmedian.dim", [](NodeImporter& n) { return kthOrMedian(n, "nanmedian"); });
  add("aten::nanmedian", [](NodeImporter& n) { return kthOrMedian(n, "nanmedian_all"); });
  add("aten::bucketize.Tensor", [](NodeImporter& n) { return binarySearch(n, true); });
  add("aten::searchsorted.Tensor", [](NodeImporter& n) { return binarySearch(n, false); });
  add("aten::scatter.value", [](NodeImporter& n) { return scatter(n, "value"); });
  add("aten::scatter.src", [](NodeImporter& n) { return scatter(n, "src"); });
  add("aten::scatter_add", [](NodeImporter& n) { return scatter(n, "add"); });
  add("aten::scatter_reduce.two", [](NodeImporter& n) { return scatter(n, "reduce"); });
  add("aten::index_reduce", indexReduce);
  add("aten::slice_scatter", [](NodeImporter& n) { return sliceScatter(n, false); });
  add("aten::select_scatter", [](NodeImporter& n) { return sliceScatter(n, true); });
  add("aten::index_put", indexPut);
  add("aten::index_add", [](NodeImporter& n) { return indexAdd(n, false); });
  add("aten::index_copy", [](NodeImporter& n) { return indexAdd(n, true); });
  add("aten::masked_scatter", maskedScatter);
  add("aten::isin.Tensor_Tensor", [](NodeImporter& n) { return isIn(n, true, true); });
  add("aten::isin.Tensor_Scalar", [](NodeImporter& n) { return isIn(n, true, false); });
  add("aten::isin.Scalar_Tensor", [](NodeImporter& n) { return isIn(n, false, true); });
  add("aten::fill.Tensor", [](NodeImporter& n) { return fillWithTensor(n, false); });
  add("aten::masked_fill.Tensor", [](NodeImporter& n) { return fillWithTensor(n, true); });
  add("aten::pixel_shuffle", [](NodeImporter& n) { return pixelShuffle(n, false); });
  add("aten::channel_shuffle", channelShuffle);
  add("aten::take", take);
  add("aten::index_fill.int_Scalar", [](NodeImporter& n) { return indexFill(n, false); });
  add("aten::index_fill.int_Tensor", [](NodeImporter& n) { return indexFill(n, true); });
  add("aten::eye", [](NodeImporter& n) { return eye(n, false); });
  add("aten::eye.m", [](NodeImporter& n) { return eye(n, true); });
  add("aten::pixel_unshuffle", [](NodeImporter& n) { return pixelShuffle(n, true); });
  for (const char* d : {"1d", "2d", "3d"}) {
    add(std::string("aten::reflection_pad") + d, [](NodeImporter& n) { return modePad(n, true); });
    add(std::string("aten::replication_pad") + d, [](NodeImporter& n) { return modePad(n, false); });
  }
  add("aten::block_diag", blockDiag);
  add("aten::_embedding_bag", embeddingBag);
  add("aten::_embedding_bag_forward_only", embeddingBag);
  add("aten::linalg_cross", cross);
}

}  // namespace neuroncc::importer
