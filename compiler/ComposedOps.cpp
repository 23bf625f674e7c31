//===- ComposedOps.cpp - ATen operators imported as compositions ----------===//
//
// Operators with no op of their own in the aten dialect, each built at import
// from ops that have one (reductions, comparisons, where, views, cat, mm,
// embedding), so that kernel formation, fusion, folding and every lowering
// apply to them unchanged. Each composition follows the eager CPU kernel's
// definition where it is observable: the first index of a maximum (the last
// NaN in a pooling window), NaN propagation, the order of a window's sum,
// reduced-precision reductions computed in f32 and rounded once.
//
//===----------------------------------------------------------------------===//

#include <cmath>
#include <limits>
#include <array>
#include <numeric>

#include "compiler/Composer.h"
#include "llvm/Support/MathExtras.h"

namespace neuroncc::importer {
namespace {


//===----------------------------------------------------------------------===//
// Reductions: max/min with indices, argmax/argmin, amin, var/std, norms, any/all
//===----------------------------------------------------------------------===//

// The maximum (or minimum) of `self` along `dim` (all elements when none) and
// the first index where it lies, as the eager kernels find it: a NaN is the
// extremum, its first occurrence the index. keepdim needs no argument: it only
// shapes the results, which finish() gives their recorded shapes.
LogicalResult extremum(NodeImporter& n, std::optional<int64_t> dim, bool isMax, int valuesResult,
                       int indicesResult) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  if (dim && failed(checkDims(n, {*dim}, typeOf(self).getRank()))) return failure();
  Value x = c.toFloat(self);
  if (!dim || typeOf(x).getRank() == 0) x = c.reshape(x, {typeOf(x).getNumElements()});
  int64_t rank = typeOf(x).getRank();
  int64_t d = dim && typeOf(self).getRank() > 0 ? normalizeDim(*dim, rank) : 0;
  Value y = isMax ? x : c.unary<aten::NegOp>(x);
  Value top = c.amax(y, {d}, true);
  if (valuesResult >= 0 && failed(c.finish(isMax ? top : c.unary<aten::NegOp>(top), size_t(valuesResult))))
    return failure();
  if (indicesResult < 0) return success();
  int64_t length = typeOf(x).getDimSize(d);
  if (length > (int64_t(1) << 24)) return n.error("an index above 2^24 is not exact in f32, the device's index type");
  SmallVector<int64_t> iotaShape(rank, 1);
  iotaShape[d] = length;
  Value positions = c.iota(length, iotaShape);
  Value hit = c.logicalOr(c.compare<aten::EqTensorOp>(y, top), c.isNan(y));
  Value candidates = c.where(hit, positions, c.scalar(double(length), c.f32()));
  Value first = c.amin(candidates, {d}, false);
  return c.finish(first, size_t(indicesResult));
}

LogicalResult maxMinDim(NodeImporter& n, bool isMax) {
  NCC_TRY(dim, n.integer(1, "dim"));
  return extremum(n, dim, isMax, 0, 1);
}

LogicalResult argExtremum(NodeImporter& n, bool isMax) {
  std::optional<int64_t> dim;
  if (const Argument* a = n.arg(1, "dim"); a && a->value_case() != Argument::kNone) {
    NCC_TRY(d, n.integer(1, "dim"));
    dim = d;
  }
  return extremum(n, dim, isMax, -1, 0);
}

LogicalResult amin(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(dims, n.ints(1, "dim", SmallVector<int64_t>{}));
  NCC_TRY(keepdim, n.boolean(2, "keepdim", false));
  if (failed(checkDims(n, dims, typeOf(self).getRank()))) return failure();
  Value x = c.toFloat(self);
  if (typeOf(x).getRank() == 0) return c.finish(c.fresh(x, self));
  return c.finish(c.amin(x, dims, keepdim));
}

// var and std with a correction (var.correction, var.dim's `unbiased`, var's
// over every dim); reduced-precision inputs in f32, rounded once.
LogicalResult varianceOrStd(NodeImporter& n, bool isStd, int form) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  SmallVector<int64_t> dims;
  double correction = 1;
  bool keepdim = false;
  if (form == 0) {  // var.correction(self, dim?, *, correction?, keepdim)
    NCC_TRY(d, n.ints(1, "dim", SmallVector<int64_t>{}));
    NCC_TRY(corr, n.number(2, "correction", 1.0));
    NCC_TRY(k, n.boolean(3, "keepdim", false));
    dims = d, correction = corr, keepdim = k;
  } else if (form == 1) {  // var.dim(self, dim?, unbiased, keepdim)
    NCC_TRY(d, n.ints(1, "dim", SmallVector<int64_t>{}));
    NCC_TRY(unbiased, n.boolean(2, "unbiased", true));
    NCC_TRY(k, n.boolean(3, "keepdim", false));
    dims = d, correction = unbiased ? 1 : 0, keepdim = k;
  } else {  // var(self, unbiased)
    NCC_TRY(unbiased, n.boolean(1, "unbiased", true));
    correction = unbiased ? 1 : 0;
  }
  if (correction != std::trunc(correction)) return n.error("a fractional correction is not supported");
  if (failed(checkDims(n, dims, typeOf(self).getRank()))) return failure();
  NCC_TRY(type, n.resultType());
  Type compute = isReducedFloat(type.getElementType()) ? c.f32() : type.getElementType();
  if (!aten::isFloatType(compute)) return n.error("var/std of an integer result");
  Value x = c.cast(self, compute);
  auto shape = c.reducedShape(typeOf(x), dims, keepdim);
  auto t = RankedTensorType::get(shape, compute);
  auto op = n.b.create<aten::VarMeanCorrectionOp>(n.loc, TypeRange{t, t}, x, n.b.getDenseI64ArrayAttr(dims),
                                                  n.b.getI64IntegerAttr(int64_t(correction)),
                                                  n.b.getBoolAttr(keepdim));
  Value v = op.getVar();
  if (isStd) v = c.unary<aten::SqrtOp>(v);
  return c.finish(v);
}

// Vector p-norms: sqrt(sum x^2), sum |x|, max |x|, min |x|, count of nonzeros,
// or (sum |x|^p)^(1/p); reduced-precision inputs in f32, rounded once.
LogicalResult pNorm(NodeImporter& n, Value self, double p, ArrayRef<int64_t> dims, bool keepdim) {
  Composer c(n);
  NCC_TRY(type, n.resultType());
  if (!aten::isFloatType(type.getElementType())) return n.error("a norm needs a float result");
  Type compute = isReducedFloat(type.getElementType()) ? c.f32() : type.getElementType();
  if (failed(checkDims(n, dims, typeOf(self).getRank()))) return failure();
  Value x = c.cast(self, compute);
  if (typeOf(x).getRank() == 0) x = c.reshape(x, {1});
  Value a = c.unary<aten::AbsOp>(x);
  Value r;
  if (p == 2) r = c.unary<aten::SqrtOp>(c.sum(c.mul(x, x), dims, keepdim));
  else if (p == 1) r = c.sum(a, dims, keepdim);
  else if (std::isinf(p)) r = p > 0 ? c.amax(a, dims, keepdim) : c.amin(a, dims, keepdim);
  else if (p == 0) r = c.sum(c.cast(c.compareScalar<aten::NeScalarOp>(x, 0.0), compute), dims, keepdim);
  else r = c.powScalar(c.sum(c.powScalar(a, p), dims, keepdim), 1.0 / p);
  return c.finish(r);
}

LogicalResult anyOrAll(NodeImporter& n, bool isAny, bool hasDim) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  SmallVector<int64_t> dims;
  bool keepdim = false;
  if (hasDim) {
    NCC_TRY(d, n.ints(1, "dim", SmallVector<int64_t>{}));
    NCC_TRY(k, n.boolean(2, "keepdim", false));
    dims = d, keepdim = k;
    if (failed(checkDims(n, dims, typeOf(self).getRank()))) return failure();
  }
  // any: some element is nonzero (NaN counts); all: no element is zero.
  bool isBool = typeOf(self).getElementType().isInteger(1);
  Value flag = isAny ? (isBool ? self : c.compareScalar<aten::NeScalarOp>(c.toFloat(self), 0.0))
                     : c.compareScalar<aten::EqScalarOp>(isBool ? self : c.toFloat(self), 0.0);
  Value x = c.cast(flag, c.f32());
  if (typeOf(x).getRank() == 0) x = c.reshape(x, {1});
  Value found = c.amax(x, dims, keepdim);
  return c.finish(isAny ? c.compareScalar<aten::GtScalarOp>(found, 0.0)
                        : c.compareScalar<aten::EqScalarOp>(found, 0.0));
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult reciprocal(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  Value x = c.toFloat(self);
  return c.finish(c.div(c.scalar(1.0, c.f32()), x));
}

// sign: 1, -1 or 0 (NaN gives 0, as torch 1.13's CPU kernel does).
LogicalResult sign(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  if (typeOf(self).getElementType().isInteger(1)) return c.finish(c.fresh(self, self));
  Value x = c.toFloat(self);
  Type t = typeOf(x).getElementType();
  Value negative = c.where(c.compareScalar<aten::LtScalarOp>(x, 0.0), c.scalar(-1, t), c.scalar(0, t));
  return c.finish(c.where(c.compareScalar<aten::GtScalarOp>(x, 0.0), c.scalar(1, t), negative));
}

// nan_to_num: NaN, +inf and -inf replaced (by 0 and the dtype's largest
// finite values unless given).
LogicalResult nanToNum(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  Type elem = typeOf(self).getElementType();
  if (!aten::isFloatType(elem)) return c.finish(c.fresh(self, self));
  double largest = APFloat::getLargest(llvm::cast<FloatType>(elem).getFloatSemantics()).convertToDouble();
  NCC_TRY(nan, n.number(1, "nan", 0.0));
  NCC_TRY(posinf, n.number(2, "posinf", largest));
  NCC_TRY(neginf, n.number(3, "neginf", -largest));
  double inf = std::numeric_limits<double>::infinity();
  Value x = c.where(c.isNan(self), c.scalar(nan, elem), self);
  x = c.where(c.compareScalar<aten::EqScalarOp>(self, inf), c.scalar(posinf, elem), x);
  x = c.where(c.compareScalar<aten::EqScalarOp>(self, -inf), c.scalar(neginf, elem), x);
  return c.finish(x);
}

LogicalResult floatClass(NodeImporter& n, StringRef kind) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  if (!aten::isFloatType(typeOf(self).getElementType()))
    return c.finish(c.splat(typeOf(self).getShape(), c.i1(), kind == "isfinite" ? 1 : 0));
  double inf = std::numeric_limits<double>::infinity();
  if (kind == "isnan") return c.finish(c.isNan(self));
  if (kind == "isposinf") return c.finish(c.compareScalar<aten::EqScalarOp>(self, inf));
  if (kind == "isneginf") return c.finish(c.compareScalar<aten::EqScalarOp>(self, -inf));
  Value a = c.unary<aten::AbsOp>(self);
  if (kind == "isinf") return c.finish(c.compareScalar<aten::EqScalarOp>(a, inf));
  return c.finish(c.compareScalar<aten::LtScalarOp>(a, inf));  // isfinite: NaN compares false
}

// pow with a tensor exponent (pow.Tensor_Tensor) or a Scalar base
// (pow.Scalar): the pow ALU op (powf; a Scalar base is the immediate of a
// reversed tensor_scalar), in the result's float dtype.
LogicalResult powTensor(NodeImporter& n, bool scalarBase) {
  Composer c(n);
  NCC_TRY(type, n.resultType());
  Type compute = c.floatOf(type.getElementType());
  NCC_TRY(exponent, n.tensor(1, "exponent"));
  Value base;
  if (scalarBase) {
    NCC_TRY(s, n.number(0, "self"));
    base = c.scalar(s, compute);
  } else {
    NCC_TRY(s, n.tensor(0, "self"));
    base = c.cast(s, compute);
  }
  if (failed(checkBroadcast(n, {base, exponent}))) return failure();
  return c.finish(c.binary<aten::PowTensorTensorOp>(base, c.cast(exponent, compute)));
}

// Division with rounding and the remainders, from the quotient q = a / b in
// f32 (or f32-or-wider: the result's dtype; integers' results are exact
// below 2^24):
//   div(rounding_mode='trunc') = trunc(q), 'floor' (and floor_divide) = floor(q);
//   remainder = a - b * floor(q) (the sign of b), fmod = a - b * trunc(q)
//   (the sign of a).
// For floats, eager computes the floor quotient and the remainders through
// fmod, exactly: where q rounds onto a whole number these may differ from
// eager's by one step of b. In bf16 and f16 the rounded quotients are
// computed as eager's kernels do, each step rounded to the dtype (below).
LogicalResult roundedDivision(NodeImporter& n, StringRef kind, bool scalarOther) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(type, n.resultType());
  // Reduced precision in f32, rounded once.
  Type compute = isReducedFloat(type.getElementType()) ? c.f32() : c.floatOf(type.getElementType());
  Value a = c.cast(self, compute), b;
  if (scalarOther || !n.isTensor(1, "other")) {  // make_fx records `x // 3.0` with a Scalar
    // An integer result is computed in self's dtype (a narrow one wraps the
    // Scalar first); a true division promotes to float instead.
    bool promoted = aten::isFloatType(type.getElementType());
    FailureOr<double> s = promoted ? n.number(1, "other") : scalarWith(n, 1, "other", self);
    if (failed(s)) return failure();
    b = c.scalar(promoted ? asTensorScalar(*s, self) : *s, compute);
  } else {
    NCC_TRY(o, n.tensor(1, "other"));
    b = c.cast(o, compute);
  }
  if (failed(checkBroadcast(n, {a, b}))) return failure();
  std::string mode = kind.str();
  if (kind == "div") {
    NCC_TRY(m, n.string(2, "rounding_mode", ""));
    if (!m.empty() && m != "trunc" && m != "floor") return n.error("rounding_mode must be 'trunc' or 'floor'");
    mode = m.empty() ? "true" : m;
  }
  Value q = c.div(a, b);
  if (mode == "true") return c.finish(q);
  Type elem = type.getElementType();
  if (isReducedFloat(elem) && (mode == "trunc" || mode == "floor")) {
    // Eager's bf16 and f16 kernels round each step to the dtype: trunc
    // takes the rounded quotient; floor is computed from fmod as eager's
    // div_floor does (q = (a - fmod(a, b)) / b, one less where the fmod's
    // sign differs from b's, then floor(q), rounded up from past a half).
    // From f32 (floor(a / b)), 1 to 5% of random bf16 quotients come out
    // one step away from eager's.
    Value rounded = c.cast(q, elem);
    if (mode == "trunc") return c.finish(c.unary<aten::TruncOp>(rounded));
    Value mod = c.cast(c.sub(a, c.mul(b, c.unary<aten::TruncOp>(q))), elem);  // exact for these operands' bits
    Value numerator = c.cast(c.sub(a, c.cast(mod, compute)), elem);
    Value quotient = c.cast(c.div(c.cast(numerator, compute), b), elem);
    Value zero = c.scalar(0.0, elem);
    Value signsDiffer = c.compare<aten::NeTensorOp>(c.compare<aten::LtTensorOp>(mod, zero),
                                                    c.compare<aten::LtTensorOp>(c.cast(b, elem), zero));
    Value adjust = c.logicalAnd(c.compare<aten::NeTensorOp>(mod, zero), signsDiffer);
    quotient = c.where(adjust, c.addScalar(quotient, -1.0), quotient);
    Value whole = c.unary<aten::FloorOp>(quotient);
    Value past = c.compare<aten::GtTensorOp>(c.sub(quotient, whole), c.scalar(0.5, elem));
    whole = c.where(past, c.addScalar(whole, 1.0), whole);
    // A zero quotient takes the sign of a / b.
    Value signedZero = c.mulScalar(rounded, 0.0);
    return c.finish(c.where(c.compare<aten::NeTensorOp>(quotient, zero), whole, signedZero));
  }
  if (mode == "trunc") return c.finish(c.unary<aten::TruncOp>(q));
  if (mode == "floor") return c.finish(c.unary<aten::FloorOp>(q));
  Value whole = mode == "remainder" ? c.unary<aten::FloorOp>(q) : c.unary<aten::TruncOp>(q);
  return c.finish(c.sub(a, c.mul(b, whole)));
}

// round.decimals: round(x * 10^d) / 10^d, as eager computes it (d < 0
// divides first). torch 1.13's CPU kernel computes in the input's dtype, so
// bf16 rounds each step as eager does; it has no f16 kernel, and f16 is
// computed in f32 as PyTorch's GPU kernel does (an f16 product could land
// on a half and round the other way: 0.31494 * 100 is 31.5 in f16).
LogicalResult roundDecimals(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(decimals, n.integer(1, "decimals", 0));
  Value x = typeOf(self).getElementType().isF16() ? c.cast(self, c.f32()) : c.toFloat(self);
  if (decimals == 0) return c.finish(c.unary<aten::RoundOp>(x));
  double ten = std::pow(10.0, double(std::abs(decimals)));
  auto scaled = [&](Value v, bool up) -> Value {
    if (up == (decimals > 0)) return c.mulScalar(v, ten);
    return n.b.create<aten::DivScalarOp>(n.loc, typeOf(v), v, n.b.getF64FloatAttr(ten));
  };
  return c.finish(scaled(c.unary<aten::RoundOp>(scaled(x, true)), false));
}

// clamp with tensor bounds: max(x, min) then min(., max), NaN propagating.
LogicalResult clampTensor(NodeImporter& n, size_t minPos, size_t maxPos) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(lo, minPos ? optionalTensor(n, minPos, "min") : FailureOr<Value>(Value()));
  NCC_TRY(hi, maxPos ? optionalTensor(n, maxPos, "max") : FailureOr<Value>(Value()));
  if (failed(checkBroadcast(n, {self, lo, hi}))) return failure();
  NCC_TRY(type, n.resultType());
  Type compute = c.floatOf(type.getElementType());
  Value x = c.cast(self, compute);
  if (lo) x = c.maximum(x, c.cast(lo, compute));
  if (hi) x = c.minimum(x, c.cast(hi, compute));
  return c.finish(c.fresh(x, self));
}

// lerp as eager computes it (in f32 for reduced precision): weight below 0.5
// in magnitude steps from self, otherwise back from end.
LogicalResult lerp(NodeImporter& n, bool tensorWeight) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(end, n.tensor(1, "end"));
  if (failed(checkBroadcast(n, {self, end}))) return failure();
  NCC_TRY(type, n.resultType());
  Type compute = isReducedFloat(type.getElementType()) ? c.f32() : type.getElementType();
  Value start = c.cast(self, compute), stop = c.cast(end, compute);
  Value diff = c.sub(stop, start);
  if (!tensorWeight) {
    NCC_TRY(w, n.number(2, "weight"));
    if (std::abs(w) < 0.5) return c.finish(c.add(start, c.mulScalar(diff, w)));
    return c.finish(c.sub(stop, c.mulScalar(diff, 1.0 - w)));
  }
  NCC_TRY(weight0, n.tensor(2, "weight"));
  if (failed(checkBroadcast(n, {self, end, weight0}))) return failure();
  Value w = c.cast(weight0, compute);
  Value low = c.add(start, c.mul(w, diff));
  Value high = c.sub(stop, c.mul(diff, c.sub(c.scalar(1.0, compute), w)));
  Value small = c.compareScalar<aten::LtScalarOp>(c.unary<aten::AbsOp>(w), 0.5);
  return c.finish(c.where(small, low, high));
}

// Activations built on exp/expm1/log1p/tanh, as eager's CPU kernels write
// them (reduced precision computed in f32 and rounded once):
//   softplus: x * beta > threshold ? x : log1p(exp(x * beta)) / beta
//   elu:      x <= 0 ? expm1(x * input_scale) * (alpha * scale) : x * scale
//             (selu exports as elu; celu is elu with input_scale 1 / alpha)
//   mish:     x * tanh(log1p(exp(x)))
LogicalResult activation(NodeImporter& n, StringRef kind) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(type, n.resultType());
  Type compute = isReducedFloat(type.getElementType()) ? c.f32() : c.floatOf(type.getElementType());
  Value x = c.cast(self, compute);
  if (kind == "softplus") {
    NCC_TRY(beta, n.number(1, "beta", 1.0));
    NCC_TRY(threshold, n.number(2, "threshold", 20.0));
    if (beta == 0) return n.error("softplus with beta 0");
    Value xb = beta == 1.0 ? x : c.mulScalar(x, beta);
    Value soft = c.unary<aten::Log1pOp>(c.unary<aten::ExpOp>(xb));
    if (beta != 1.0) soft = n.b.create<aten::DivScalarOp>(n.loc, typeOf(soft), soft, n.b.getF64FloatAttr(beta));
    return c.finish(c.where(c.compareScalar<aten::GtScalarOp>(xb, threshold), x, soft));
  }
  if (kind == "elu" || kind == "celu") {  // celu(x, a) = elu(x, a, 1, 1 / a), as eager computes it
    NCC_TRY(alpha, n.number(1, "alpha", 1.0));
    NCC_TRY(scale, kind == "elu" ? n.number(2, "scale", 1.0) : FailureOr<double>(1.0));
    NCC_TRY(inputScale, kind == "elu" ? n.number(3, "input_scale", 1.0) : FailureOr<double>(1.0 / alpha));
    if (alpha == 0 && kind == "celu") return n.error("celu with alpha 0");
    Value scaledIn = inputScale == 1.0 ? x : c.mulScalar(x, inputScale);
    Value negative = c.mulScalar(c.unary<aten::Expm1Op>(scaledIn), alpha * scale);
    Value positive = scale == 1.0 ? x : c.mulScalar(x, scale);
    return c.finish(c.where(c.compareScalar<aten::LeScalarOp>(x, 0.0), negative, positive));
  }
  // mish
  Value soft = c.unary<aten::Log1pOp>(c.unary<aten::ExpOp>(x));
  return c.finish(c.mul(x, c.unary<aten::TanhOp>(soft)));
}

//===----------------------------------------------------------------------===//
// Shape ops: pad, repeat, roll, flip, index_select, cumsum, *_like
//===----------------------------------------------------------------------===//


LogicalResult constantPad(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(pad, n.ints(1, "pad"));
  NCC_TRY(value, n.number(2, "value", 0.0));
  int64_t rank = typeOf(self).getRank();
  if (pad.size() % 2 != 0 || int64_t(pad.size()) > 2 * rank)
    return n.error("pad needs an even number of values, two per padded dim at most");
  SmallVector<int64_t> dims, left, right;
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    int64_t dim = rank - 1 - int64_t(i);
    if (typeOf(self).getDimSize(dim) + pad[2 * i] + pad[2 * i + 1] <= 0)
      return n.error("pad leaves dim " + std::to_string(dim) + " with no elements");
    dims.push_back(dim);
    left.push_back(pad[2 * i]);
    right.push_back(pad[2 * i + 1]);
  }
  return c.finish(c.fresh(padDims(c, self, dims, left, right, value), self));
}

LogicalResult repeat(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(repeats, n.ints(1, "repeats"));
  auto t = typeOf(self);
  if (int64_t(repeats.size()) < t.getRank()) return n.error("repeat needs a count for every dim");
  if (llvm::any_of(repeats, [](int64_t r) { return r < 1; })) return n.error("repeat counts must be positive");
  SmallVector<int64_t> shape(repeats.size() - size_t(t.getRank()), 1);
  shape.append(t.getShape().begin(), t.getShape().end());
  // One expand of a unit dim inserted before each repeated dim:
  // [.., s, ..] -> [.., 1, s, ..] -> [.., r, s, ..] -> [.., r * s, ..].
  SmallVector<int64_t> withUnits, wide, result;
  for (auto [r, s] : llvm::zip(repeats, shape)) {
    if (r > 1) withUnits.push_back(1), wide.push_back(r);
    withUnits.push_back(s);
    wide.push_back(s);
    result.push_back(r * s);
  }
  Value x = c.reshape(self, withUnits);
  if (wide != withUnits) x = c.reshape(c.expand(x, wide), result);
  return c.finish(c.fresh(x, self));
}

LogicalResult roll(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(shifts, n.ints(1, "shifts"));
  NCC_TRY(dims, n.ints(2, "dims", SmallVector<int64_t>{}));
  Value x = self;
  if (dims.empty()) {
    if (shifts.size() != 1) return n.error("roll without dims takes one shift");
    x = c.reshape(x, {typeOf(x).getNumElements()});
    dims = {0};
  }
  if (shifts.size() != dims.size()) return n.error("roll needs one shift per dim");
  for (auto [shift, dim0] : llvm::zip(shifts, dims)) {
    int64_t dim = normalizeDim(dim0, typeOf(x).getRank());
    if (dim < 0 || dim >= typeOf(x).getRank()) return n.error("roll dim out of range");
    int64_t size = typeOf(x).getDimSize(dim);
    int64_t s = ((shift % size) + size) % size;
    if (s != 0) x = c.cat({c.slice(x, dim, size - s, size), c.slice(x, dim, 0, size - s)}, dim);
  }
  return c.finish(c.fresh(x, self));
}

// Reversal of a short dim as a cat of single-element slices (each a copy);
// a longer one gathers its rows in reverse order (gatherAlong) instead of
// compiling into thousands of pieces.
constexpr int64_t kMaxFlipSlices = 256;

// `x` reversed along each of `dims`.
FailureOr<Value> reversed(NodeImporter& n, Composer& c, Value x, ArrayRef<int64_t> dims) {
  for (int64_t dim0 : dims) {
    int64_t dim = normalizeDim(dim0, typeOf(x).getRank());
    if (dim < 0 || dim >= std::max<int64_t>(typeOf(x).getRank(), 1)) return n.error("flip dim out of range");
    if (typeOf(x).getRank() == 0) break;
    int64_t size = typeOf(x).getDimSize(dim);
    if (size > kMaxFlipSlices) {
      SmallVector<double> backwards(static_cast<size_t>(size));
      for (int64_t i = 0; i < size; ++i) backwards[size_t(i)] = double(size - 1 - i);
      NCC_TRY(gathered, gatherAlong(c, x, dim, c.constant({size}, n.b.getIntegerType(64), backwards)));
      x = gathered;
      continue;
    }
    SmallVector<Value> pieces;
    for (int64_t i = size - 1; i >= 0; --i) pieces.push_back(c.slice(x, dim, i, i + 1));
    x = c.cat(pieces, dim);
  }
  return x;
}

LogicalResult flip(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(dims, n.ints(1, "dims"));
  NCC_TRY(x, reversed(n, c, self, dims));
  return c.finish(c.fresh(x, self));
}

// rot90(x, k, dims) as eager writes it: k = 1 reverses dims[1] then swaps
// the two dims, k = 2 reverses both, k = 3 reverses dims[0] then swaps.
LogicalResult rot90(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(k0, n.integer(1, "k", 1));
  NCC_TRY(dims0, n.ints(2, "dims", SmallVector<int64_t>{0, 1}));
  int64_t rank = typeOf(self).getRank();
  if (dims0.size() != 2) return n.error("rot90 takes two dims");
  if (rank < 2) return n.error("rot90 needs at least two dims");
  int64_t d0 = normalizeDim(dims0[0], rank), d1 = normalizeDim(dims0[1], rank);
  if (d0 < 0 || d0 >= rank || d1 < 0 || d1 >= rank) return n.error("rot90 dim out of range");
  if (d0 == d1) return n.error("rot90 needs two different dims");
  int64_t k = ((k0 % 4) + 4) % 4;
  Value x = self;
  if (k == 2) {
    NCC_TRY(r, reversed(n, c, x, {d0, d1}));
    x = r;
  } else if (k != 0) {
    NCC_TRY(r, reversed(n, c, x, {k == 1 ? d1 : d0}));
    SmallVector<int64_t> perm(static_cast<size_t>(rank));
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[size_t(d0)], perm[size_t(d1)]);
    x = c.permute(r, perm);
  }
  return c.finish(c.fresh(x, self));
}


LogicalResult indexSelect(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(dim0, n.integer(1, "dim"));
  NCC_TRY(index, n.tensor(2, "index"));
  if (!isIndexType(typeOf(index).getElementType())) return n.error("index_select needs integer indices");
  if (typeOf(index).getRank() > 1) return n.error("index_select needs a 0-d or 1-d index");
  Value x = c.toFloat(self);
  if (typeOf(x).getRank() == 0) x = c.reshape(x, {1});
  int64_t dim = normalizeDim(dim0, typeOf(x).getRank());
  if (dim < 0 || dim >= typeOf(x).getRank()) return n.error("index_select dim out of range");
  NCC_TRY(r, gatherAlong(c, x, dim, index));
  return c.finish(r);
}

// index.Tensor (x[idx], x[:, i, j], x[i, :, j]): integer index tensors on
// some dims, broadcast together to a shape B. Their dims are merged into one
// (moved to the front first when they are not adjacent, where eager puts B
// first) and gathered with the flat index sum(idx_k * stride_k); negative
// indices count from the end, and an index out of its dim's range makes the
// flat index out of range too, so the execution fails as eager raises.
LogicalResult indexTensor(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(read, indexList(n, 1));
  SmallVector<int64_t> dims = read.dims;
  SmallVector<Value> indices = read.indices;
  for (Value i : indices)
    if (!isIndexType(typeOf(i).getElementType()))
      return n.error("indexing with a bool mask is not supported (its result's shape depends on the values)");
  if (indices.empty()) return n.error("indexing needs an index tensor");
  if (failed(checkBroadcast(n, indices))) return failure();
  Value x = c.toFloat(self);
  int64_t rank = typeOf(x).getRank();
  if (dims.back() >= rank) return n.error("more indices than dims");
  bool adjacent = dims.back() - dims.front() + 1 == int64_t(dims.size());
  if (!adjacent) {
    SmallVector<int64_t> perm(dims);
    for (int64_t d = 0; d < rank; ++d)
      if (!llvm::is_contained(dims, d)) perm.push_back(d);
    x = c.permute(x, perm);
    for (auto [k, d] : llvm::enumerate(dims)) d = int64_t(k);
  }
  int64_t first = dims.front(), merged = 1;
  for (int64_t d : dims) merged *= typeOf(x).getDimSize(d);
  if (merged > (int64_t(1) << 24)) return n.error("indexed dims of more than 2^24 elements together");
  SmallVector<int64_t> sizes;
  for (int64_t d : dims) sizes.push_back(typeOf(x).getDimSize(d));
  auto [flat, valid] = flatIndexOf(c, sizes, indices);
  if (indices.size() > 1) flat = c.where(valid, flat, c.scalar(double(merged), c.f32()));
  auto broadcastShape = typeOf(flat).getShape();
  SmallVector<int64_t> mergedShape(typeOf(x).getShape().take_front(first));
  mergedShape.push_back(merged);
  mergedShape.append(typeOf(x).getShape().begin() + first + int64_t(dims.size()), typeOf(x).getShape().end());
  Value table = c.reshape(x, mergedShape);
  Type i64 = c.b.getIntegerType(64);
  NCC_TRY(r, gatherAlong(c, table, first, c.cast(flat, i64)));
  SmallVector<int64_t> shape(mergedShape.begin(), mergedShape.begin() + first);
  shape.append(broadcastShape.begin(), broadcastShape.end());
  shape.append(mergedShape.begin() + first + 1, mergedShape.end());
  return c.finish(c.reshape(r, shape));
}

// gather(self, dim, index): out[.., j, ..] = self[.., index[.., j, ..], ..],
// as a selection over the dim: where(index == position, self, 0) summed
// along it (one term is nonzero, so the sum is exact); self is first cut to
// the index's extent in the other dims.
constexpr int64_t kMaxGatherTerms = int64_t(1) << 28;

LogicalResult gather(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(dim0, n.integer(1, "dim"));
  NCC_TRY(index, n.tensor(2, "index"));
  if (!isIndexType(typeOf(index).getElementType())) return n.error("gather needs integer indices");
  Value x = c.toFloat(self);
  if (typeOf(x).getRank() == 0) x = c.reshape(x, {1});
  if (typeOf(index).getRank() == 0) index = c.reshape(index, {1});
  int64_t rank = typeOf(x).getRank(), dim = normalizeDim(dim0, rank);
  if (dim < 0 || dim >= rank || typeOf(index).getRank() != rank)
    return n.error("gather needs an index of the input's rank and a dim in range");
  for (int64_t d = 0; d < rank; ++d) {
    if (d == dim) continue;
    if (typeOf(index).getDimSize(d) > typeOf(x).getDimSize(d))
      return n.error("gather index is larger than the input in dim " + std::to_string(d));
    x = c.slice(x, d, 0, typeOf(index).getDimSize(d));
  }
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim) perm.push_back(d);
  perm.push_back(dim);
  Value xl = c.permute(x, perm), il = c.permute(index, perm);
  int64_t length = typeOf(xl).getDimSize(rank - 1);
  if (typeOf(il).getNumElements() * length > kMaxGatherTerms)
    return n.error("gather of " + std::to_string(typeOf(il).getNumElements()) + " elements over a dim of " +
                   std::to_string(length) + ": at most 2^28 comparisons are supported");
  // (the index's rows padded to alignedRows with -1, which picks nothing)
  int64_t count = typeOf(il).getDimSize(rank - 1);
  Value rows = padDim(c, c.cast(il, c.f32()), rank - 1, 0, alignedRows(count) - count, -1.0);
  Value hit = c.compare<aten::EqTensorOp>(c.unsqueeze(rows, rank), c.iota(length, alongLast(rank + 1, length)));
  Value picked = c.where(hit, c.unsqueeze(xl, rank - 1), c.scalar(0.0, typeOf(xl).getElementType()));
  Value sums = c.slice(c.sum(picked, {rank}, false), rank - 1, 0, count);
  SmallVector<int64_t> inverse(rank);
  for (int64_t i = 0; i < rank; ++i) inverse[perm[i]] = i;
  return c.finish(c.permute(sums, inverse));
}

// cumsum: a scan of log2(n) steps along the dim, each adding the running
// sums shifted by 1, 2, 4, ... places (zeros shifted in). Additions only, so
// an inf or NaN reaches exactly the sums after it, as eager's sequential
// sums do (a product with a triangular matrix of ones would spread 0 * inf
// = NaN to the sums before it). In f32 for reduced precision, rounded once
// (eager accumulates in f32); exact on integers below 2^24.
LogicalResult cumsum(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(dim0, n.integer(1, "dim"));
  NCC_TRY(type, n.resultType());
  if (failed(checkDims(n, {dim0}, typeOf(self).getRank()))) return failure();
  Type compute = isReducedFloat(type.getElementType()) ? c.f32() : c.floatOf(type.getElementType());
  Value x = c.cast(c.inIntegerResultDtype(self, type.getElementType()), compute);
  if (typeOf(x).getRank() == 0) return c.finish(c.fresh(x, self));
  int64_t dim = normalizeDim(dim0, typeOf(x).getRank());
  return c.finish(c.fresh(scan(c, x, dim, 0.0, [&](Value a, Value b) { return c.add(a, b); }), self));
}

// unfold(self, dimension, size, step) (Tensor.unfold): the windows of
// `size` elements every `step` along the dim, as a new last dim:
// out[.., i, .., j] = self[.., i * step + j, ..]. Windows of up to 16
// elements are one strided slice per window position, put side by side;
// longer ones one gather of every window's elements, reshaped.
LogicalResult unfold(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(dim0, n.integer(1, "dimension"));
  NCC_TRY(size, n.integer(2, "size"));
  NCC_TRY(step, n.integer(3, "step"));
  Value x = typeOf(self).getRank() == 0 ? c.reshape(self, {1}) : self;
  int64_t rank = typeOf(x).getRank();
  if (failed(checkDims(n, {dim0}, rank))) return failure();
  int64_t dim = normalizeDim(dim0, rank), length = typeOf(x).getDimSize(dim);
  if (step <= 0) return n.error("unfold step must be positive");
  if (size < 0 || size > length)
    return n.error("unfold size " + std::to_string(size) + " does not fit the dim's " + std::to_string(length));
  int64_t count = (length - size) / step + 1;
  if (size <= 16) {
    SmallVector<Value> windows;
    for (int64_t j = 0; j < size; ++j)
      windows.push_back(c.unsqueeze(c.slice(x, dim, j, j + step * (count - 1) + 1, step), rank));
    return c.finish(c.fresh(c.cat(windows, rank), self));
  }
  if (count * size > (int64_t(1) << 24)) return n.error("unfold into more than 2^24 window elements");
  SmallVector<double> index;
  for (int64_t i = 0; i < count; ++i)
    for (int64_t j = 0; j < size; ++j) index.push_back(double(i * step + j));
  NCC_TRY(g, gatherAlong(c, x, dim, c.constant({count * size}, n.b.getIntegerType(64), index)));
  SmallVector<int64_t> split(typeOf(x).getShape()), perm;
  split[size_t(dim)] = count;
  split.insert(split.begin() + dim + 1, size);
  for (int64_t d = 0; d <= rank; ++d)
    if (d != dim + 1) perm.push_back(d);
  perm.push_back(dim + 1);
  return c.finish(c.permute(c.reshape(g, split), perm));
}

// beta * self + alpha * (batch1 @ batch2); reduced precision in f32 (the
// products and the sum) and rounded once, as eager's kernel does.
// addbmm: beta * self + alpha * the sum over the batch of the products,
// one [M, B*K] @ [B*K, N] matmul.
LogicalResult baddbmm(NodeImporter& n, bool sumBatches) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(b1, n.tensor(1, "batch1"));
  NCC_TRY(b2, n.tensor(2, "batch2"));
  NCC_TRY(beta, n.numberAsResult(3, "beta", 1.0));
  NCC_TRY(alpha, n.numberAsResult(4, "alpha", 1.0));
  NCC_TRY(type, n.resultType());
  // Reduced precision and integers (exact below 2^24) in f32.
  Type compute = aten::isFloatType(type.getElementType()) && !isReducedFloat(type.getElementType())
                     ? type.getElementType()
                     : c.f32();
  std::string op = sumBatches ? "addbmm" : "baddbmm";
  if (typeOf(b1).getRank() != 3 || typeOf(b2).getRank() != 3 || typeOf(b1).getDimSize(0) != typeOf(b2).getDimSize(0) ||
      typeOf(b1).getDimSize(2) != typeOf(b2).getDimSize(1))
    return n.error(op + " needs batches [B, M, K] and [B, K, N]");
  int64_t batches = typeOf(b1).getDimSize(0), m = typeOf(b1).getDimSize(1), k = typeOf(b1).getDimSize(2),
          cols = typeOf(b2).getDimSize(2);
  SmallVector<int64_t> shape{batches, m, cols};
  if (sumBatches) shape = {m, cols};
  if (!aten::broadcastShapes(typeOf(self).getShape(), shape))
    return n.error(op + "'s self does not broadcast to the product");
  Value p;
  if (sumBatches)
    p = c.mm(c.reshape(c.permute(c.cast(b1, compute), {1, 0, 2}), {m, batches * k}),
             c.reshape(c.cast(b2, compute), {batches * k, cols}));
  else if (Type e1 = typeOf(b1).getElementType(); aten::isFloatType(e1) && e1 == typeOf(b2).getElementType())
    // Float operands as they are, the products in `compute`: a bf16 or f16
    // product is exact in f32, and the matmul sums in f32 whatever it reads,
    // so casting them first (a kernel each, an HBM round trip) adds nothing.
    p = n.b.create<aten::BmmOp>(n.loc, RankedTensorType::get(shape, compute), b1, b2);
  else
    p = n.b.create<aten::BmmOp>(n.loc, RankedTensorType::get(shape, compute), c.cast(b1, compute), c.cast(b2, compute));
  if (alpha != 1.0) p = c.mulScalar(p, alpha);
  // beta == 0 ignores self (NaN included), as eager does.
  // (A float self is promoted to f32 by the add itself, exactly.)
  if (beta != 0.0) p = c.add(p, aten::isFloatType(typeOf(self).getElementType()) ? self : c.cast(self, compute), beta);
  return c.finish(p);
}

//===----------------------------------------------------------------------===//
// Convolution, pooling and the batch/group norms
//===----------------------------------------------------------------------===//

// The window offsets of a pooling or convolution over the k spatial dims
// after the first `lead` dims: for each offset (row-major over the kernel),
// the strided slice of the padded input it reads, of the output's spatial
// shape. The input must already be padded.
SmallVector<Value> windowSlices(Composer& c, Value padded, int64_t lead, ArrayRef<int64_t> kernel,
                                ArrayRef<int64_t> stride, ArrayRef<int64_t> dilation, ArrayRef<int64_t> out) {
  SmallVector<Value> slices;
  size_t k = kernel.size();
  SmallVector<int64_t> at(k, 0);
  while (true) {
    Value s = padded;
    for (size_t i = 0; i < k; ++i) {
      int64_t start = at[i] * dilation[i];
      s = c.slice(s, lead + int64_t(i), start, start + (out[i] - 1) * stride[i] + 1, stride[i]);
    }
    slices.push_back(s);
    size_t i = k;
    while (i > 0 && ++at[i - 1] == kernel[i - 1]) at[--i] = 0;
    if (i == 0) break;
  }
  return slices;
}

// The output length of a window sweep: with ceil_mode, a last window that
// starts inside the input or its left padding counts, even when it reaches
// past the padded end; so a window longer than the padded input still gives
// one output there (PyTorch's pooling_output_shape, which divides rounding
// down, also for a negative span).
int64_t windowCount(int64_t size, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation, bool ceilMode) {
  int64_t span = size + 2 * pad - dilation * (kernel - 1) - 1;
  int64_t out = llvm::divideFloorSigned(span + (ceilMode ? stride - 1 : 0), stride) + 1;
  if (ceilMode && (out - 1) * stride >= size + pad) --out;
  return out;
}

// Pads the spatial dims (after `lead`) by `pad` on the left and enough on the
// right for every window of `out` outputs.
Value padSpatial(Composer& c, Value x, int64_t lead, ArrayRef<int64_t> kernel, ArrayRef<int64_t> stride,
                 ArrayRef<int64_t> pad, ArrayRef<int64_t> dilation, ArrayRef<int64_t> out, double value) {
  SmallVector<int64_t> dims, right;
  for (size_t i = 0; i < kernel.size(); ++i) {
    int64_t dim = lead + int64_t(i), size = typeOf(x).getDimSize(dim);
    int64_t needed = (out[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1;
    // A window may end before the padded right edge: cut what no window
    // reads (a negative pad on the right).
    dims.push_back(dim);
    right.push_back(needed - size - pad[i]);
  }
  return padDims(c, x, dims, pad, right, value);
}

// Windows that tile the input, pooled or convolved, are read as a reshape
// of it beyond this many taps (tiledWindows; convolution's patches): fewer,
// and each tap's strided slice moves longer rows than the reshape's rows of
// one window row.
constexpr int64_t kMinTiledTaps = 64;

// Windows as contiguous ranges. With every stride 1, the padded input's
// spatial dims flattened into one, position q = (z, y, x) of the padded grid
// reads tap t at q + offset(t), offset(t) the tap's flat index. So tap t's
// slice over the first out[0] planes of the padded grid is one contiguous
// range of each [n, c] plane: a convolution computes its output at every
// position of those planes ("wide": the padded width and height beyond
// out[i] included, whose windows wrap into the next row and are cut at the
// end), and every window copy or view is one run per plane instead of a run
// per output row (the im2col of a 3 x 3 convolution over 56 x 56 moved rows
// of 56 elements from rows of 58). The padded planes get enough extra rows
// at the end for the last wide position's window.
//
// A stride s > 1 along a dim splits the padded input into its s phases
// along it (the elements at p = r mod s, r < s): output o reads tap t at
// padded position s * o + d * t, which is element o + (d * t) div s of
// phase (d * t) mod s. So over the phases, each a padded grid of its own,
// the windows are stride-1 ones again (space-to-depth): the phases that
// some tap reads are stacked, one copy of the input instead of a strided
// slice per tap (a 3 x 3 stride-2 convolution's im2col read rows of 28
// elements, each a run per element), and a tap's range starts in its
// phase's grid. The weight keeps its layout: each tap still has one range.
// The phases are stacked outermost, so that each is one contiguous block of
// the copy (stacked after the channels, each copy's row tile held rows of
// several phases and took several stores: a 3 x 3 stride-2 convolution over
// [4, 64, 56, 56], 399.4 us against 272.7).
//
// Not where the wide positions would be more than twice the output (the cut
// positions are computed for nothing).
struct WideWindows {
  Value flat;                     // stride 1: [N, C, padded elements per plane]
  Value phased;                   // strided: [phases, N, C, padded elements per plane]
  SmallVector<int64_t> phase;     // per tap (row-major over the kernel), its phase in `phased`
  SmallVector<int64_t> offsets;   // per tap, its first element in the plane
  int64_t positions = 0;          // wide positions per plane
  SmallVector<int64_t> wideShape; // [out[0], padded sizes of the other dims]

  // Tap t's window of channels [c0, c1): [N, c1 - c0, positions].
  Value window(Composer& c, size_t t, int64_t c0, int64_t c1) const {
    Value planes = flat;
    if (phased) {
      auto shape = typeOf(phased).getShape();
      planes = c.reshape(c.slice(phased, 0, phase[t], phase[t] + 1), shape.drop_front());
    }
    return c.slice(c.slice(planes, 1, c0, c1), 2, offsets[t], offsets[t] + positions);
  }
};

std::optional<WideWindows> wideWindows(Composer& c, Value x, ArrayRef<int64_t> kernel, ArrayRef<int64_t> stride,
                                       ArrayRef<int64_t> pad, ArrayRef<int64_t> dilation, ArrayRef<int64_t> out,
                                       double value) {
  size_t k = kernel.size();
  auto shape = typeOf(x).getShape();
  // Per spatial dim, the extent the windows read in a phase's grid.
  SmallVector<int64_t> padded;
  for (size_t i = 0; i < k; ++i) padded.push_back(out[i] + dilation[i] * (kernel[i] - 1) / stride[i]);
  SmallVector<int64_t> flatStride(k, 1);
  for (size_t i = k - 1; i > 0; --i) flatStride[i - 1] = flatStride[i] * padded[i];
  WideWindows w;
  w.wideShape.push_back(out[0]);
  w.wideShape.append(padded.begin() + 1, padded.end());
  w.positions = ShapedType::getNumElements(w.wideShape);
  int64_t outputs = ShapedType::getNumElements(out);
  if (w.positions > 2 * outputs) return std::nullopt;
  // Beyond the first dim's planes, the last wide position's window reaches
  // sum over the other dims of the last tap's place in the phase grid times
  // the flat stride.
  int64_t reach = 0;
  for (size_t i = 1; i < k; ++i) reach += dilation[i] * (kernel[i] - 1) / stride[i] * flatStride[i];
  int64_t extraPlanes = (reach + flatStride[0] - 1) / flatStride[0];
  int64_t planeElements = (padded[0] + extraPlanes) * flatStride[0];
  // Each tap's phase (row-major over the dims' phases) and its place in the
  // phase's grid.
  SmallVector<int64_t> tapPhase, tapPlace;
  SmallVector<int64_t> at(k, 0);
  while (true) {
    int64_t phase = 0, place = 0;
    for (size_t i = 0; i < k; ++i) {
      int64_t reached = at[i] * dilation[i];
      phase = phase * stride[i] + reached % stride[i];
      place += reached / stride[i] * flatStride[i];
    }
    tapPhase.push_back(phase);
    tapPlace.push_back(place);
    size_t i = k;
    while (i > 0 && ++at[i - 1] == kernel[i - 1]) at[--i] = 0;
    if (i == 0) break;
  }
  SmallVector<int64_t> dims, right;
  for (size_t i = 0; i < k; ++i) {
    int64_t dim = 2 + int64_t(i);
    dims.push_back(dim);
    right.push_back(stride[i] * (padded[i] + (i == 0 ? extraPlanes : 0)) - shape[size_t(dim)] - pad[i]);
  }
  x = padDims(c, x, dims, pad, right, value);
  w.offsets = tapPlace;
  if (llvm::all_of(stride, [](int64_t s) { return s == 1; })) {
    w.flat = c.reshape(x, {shape[0], shape[1], planeElements});
    return w;
  }
  // The phases some tap reads, in order, stacked outermost.
  SmallVector<int64_t> phases(tapPhase);
  llvm::sort(phases);
  phases.erase(std::unique(phases.begin(), phases.end()), phases.end());
  int64_t allPhases = 1;
  for (int64_t s : stride) allPhases *= s;
  if (int64_t(phases.size()) == allPhases) {
    // Every phase is read: the stack is a permute of the padded input split
    // by the strides ([N, C, .., p_i, s_i, ..] -> [.., s_i, .., N, C, .., p_i,
    // ..]): one copy kernel, where the cat of slices stepping in every dim
    // loaded each phase's rows a DMA run apiece, a tile of each phase at a
    // time (3 x 3 stride 2 over [8, 64, 56, 56] bf16: 278.2 us, now 118.4).
    SmallVector<int64_t> split{shape[0], shape[1]}, perm, flat{allPhases, shape[0], shape[1], planeElements};
    for (size_t i = 0; i < k; ++i) split.append({typeOf(x).getDimSize(2 + int64_t(i)) / stride[i], stride[i]});
    for (size_t i = 0; i < k; ++i) perm.push_back(3 + 2 * int64_t(i));
    perm.append({0, 1});
    for (size_t i = 0; i < k; ++i) perm.push_back(2 + 2 * int64_t(i));
    w.phased = c.reshape(c.permute(c.reshape(x, split), perm), flat);
    w.phase.assign(tapPhase.begin(), tapPhase.end());
    return w;
  }
  SmallVector<Value> grids;
  for (int64_t phase : phases) {
    Value grid = x;
    for (size_t i = k; i-- > 0;) {
      int64_t dim = 2 + int64_t(i), r = phase % stride[i];
      phase /= stride[i];
      if (stride[i] > 1) grid = c.slice(grid, dim, r, typeOf(grid).getDimSize(dim), stride[i]);
    }
    grids.push_back(c.unsqueeze(grid, 0));
  }
  w.phased = c.reshape(c.cat(grids, 0), {int64_t(phases.size()), shape[0], shape[1], planeElements});
  for (int64_t p : tapPhase) w.phase.push_back(int64_t(llvm::lower_bound(phases, p) - phases.begin()));
  return w;
}

// The output at wide positions [N, C, positions] cut to [N, C, out...].
SmallVector<int64_t> wideOutputShape(const WideWindows& w, Value r) {
  SmallVector<int64_t> shape{typeOf(r).getDimSize(0), typeOf(r).getDimSize(1)};
  shape.append(w.wideShape);
  return shape;
}

Value cutWide(Composer& c, const WideWindows& w, Value r, ArrayRef<int64_t> out) {
  r = c.reshape(r, wideOutputShape(w, r));
  for (size_t i = 1; i < out.size(); ++i) r = c.slice(r, 2 + int64_t(i), 0, out[i]);
  return r;
}

// Convolution (1-d, 2-d, 3-d; any stride, padding, dilation, groups;
// transposed too). Each tap a contiguous range of the padded planes, or of
// their phases where strided (wideWindows), the weight times their stack as
// one bmm per group, the extra positions cut. Where the wide positions
// would be too many (a kernel almost as large as the input): the window
// slices of the zero-padded input, stacked on the channel dim, times the
// weight as one matmul per group (im2col), the bias as the matmul's addend.
// One input channel per group (depthwise) is a weighted sum of the ranges
// or slices instead.
LogicalResult convolution(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(input, n.tensor(0, "input"));
  NCC_TRY(weight, n.tensor(1, "weight"));
  NCC_TRY(bias, optionalTensor(n, 2, "bias"));
  NCC_TRY(transposed, n.boolean(6, "transposed", false));
  NCC_TRY(groups, n.integer(8, "groups", 1));
  NCC_TRY(type, n.resultType());
  auto it = typeOf(input), wt = typeOf(weight);
  int64_t k = wt.getRank() - 2;
  if (k < 1 || k > 3 || it.getRank() != k + 2)
    return n.error("convolution needs a batched [N, C, spatial...] input with 1 to 3 spatial dims");
  NCC_TRY(stride, spatialInts(n, 3, "stride", size_t(k), SmallVector<int64_t>(k, 1)));
  NCC_TRY(pad, spatialInts(n, 4, "padding", size_t(k), SmallVector<int64_t>(k, 0)));
  NCC_TRY(dilation, spatialInts(n, 5, "dilation", size_t(k), SmallVector<int64_t>(k, 1)));
  constexpr int64_t kMaxSpatialArgument = int64_t(1) << 24;  // beyond any tensor's dim
  for (int64_t i = 0; i < k; ++i)
    if (stride[i] < 1 || dilation[i] < 1 || pad[i] < 0 || stride[i] > kMaxSpatialArgument ||
        dilation[i] > kMaxSpatialArgument || pad[i] > kMaxSpatialArgument)
      return n.error("convolution needs positive strides and dilations and non-negative padding (at most 2^24)");
  // Integer convolutions (valid in eager) run on f32 copies, exact below
  // 2^24; finish() casts the result back.
  Type elem = c.floatOf(type.getElementType());
  Value x = c.cast(input, elem), w = c.cast(weight, elem);
  if (groups < 1) return n.error("convolution needs positive groups");
  if (transposed) {
    // A transposed convolution is a convolution (stride 1, the same
    // dilation) of the input with stride - 1 zeros between its elements,
    // padded by dilation * (kernel - 1) - padding on each side (plus
    // output_padding on the right; negative cuts), with the weight's
    // [in, out / groups] channels swapped per group and its taps reversed.
    NCC_TRY(outputPad, spatialInts(n, 7, "output_padding", size_t(k), SmallVector<int64_t>(k, 0)));
    int64_t cinAll = it.getDimSize(1);
    if (wt.getDimSize(0) != cinAll || cinAll % groups != 0)
      return n.error("transposed convolution channels do not match the weight and groups");
    for (int64_t i = 0; i < k; ++i) {
      if (outputPad[i] < 0 || (outputPad[i] >= stride[i] && outputPad[i] >= dilation[i]))
        return n.error("output_padding must be smaller than the stride or the dilation");
      int64_t dim = 2 + i, size = typeOf(x).getDimSize(dim);
      if (stride[i] > 1) {
        SmallVector<int64_t> spread(typeOf(x).getShape());
        spread[dim] = size * stride[i];
        x = c.reshape(padDim(c, c.unsqueeze(x, dim + 1), dim + 1, 0, stride[i] - 1, 0.0), spread);
        x = c.slice(x, dim, 0, (size - 1) * stride[i] + 1);
      }
      int64_t edge = dilation[i] * (wt.getDimSize(2 + i) - 1) - pad[i];
      if (typeOf(x).getDimSize(dim) + 2 * edge + outputPad[i] < dilation[i] * (wt.getDimSize(2 + i) - 1) + 1)
        return n.error("transposed convolution output is empty");
      x = padDim(c, x, dim, edge, edge + outputPad[i], 0.0);
      pad[i] = 0;
      stride[i] = 1;
    }
    int64_t cinGroup = cinAll / groups, coutGroup = wt.getDimSize(1);
    SmallVector<int64_t> grouped{groups, cinGroup, coutGroup}, swapped{groups * coutGroup, cinGroup};
    grouped.append(wt.getShape().begin() + 2, wt.getShape().end());
    swapped.append(wt.getShape().begin() + 2, wt.getShape().end());
    SmallVector<int64_t> perm{0, 2, 1};
    for (int64_t i = 0; i < k; ++i) perm.push_back(3 + i);
    w = c.reshape(c.permute(c.reshape(w, grouped), perm), swapped);
    for (int64_t i = 0; i < k; ++i) {  // taps reversed
      SmallVector<Value> taps;
      for (int64_t t = wt.getDimSize(2 + i) - 1; t >= 0; --t) taps.push_back(c.slice(w, 2 + i, t, t + 1));
      w = c.cat(taps, 2 + i);
    }
    it = typeOf(x);
    wt = typeOf(w);
  }
  int64_t batch = it.getDimSize(0), cin = it.getDimSize(1), cout = wt.getDimSize(0);
  if (cin % groups != 0 || cout % groups != 0 || wt.getDimSize(1) * groups != cin)
    return n.error("convolution channels do not match the weight and groups");
  if (failed(checkChannels(n, bias, cout, "bias"))) return failure();
  SmallVector<int64_t> kernel(wt.getShape().begin() + 2, wt.getShape().end()), out;
  int64_t positions = batch, taps = 1;
  for (int64_t i = 0; i < k; ++i) {
    out.push_back(windowCount(it.getDimSize(2 + i), kernel[i], stride[i], pad[i], dilation[i], false));
    if (out.back() <= 0) return n.error("convolution window larger than its padded input");
    positions *= out.back(), taps *= kernel[i];
  }
  SmallVector<int64_t> outShape{batch, cout};
  outShape.append(out);
  int64_t cinGroup = cin / groups, coutGroup = cout / groups;
  // A 1 x 1 window strided without padding reads the strided slice of the
  // input: that slice convolved with stride 1 (one copy of it, a strided
  // read, and a bmm giving NCHW; the im2col's permutes of the input and the
  // output cost three times as much: [4, 64, 56, 56] -> 128 channels at
  // stride 2, 152.9 us against 43.7).
  if (llvm::all_of(kernel, [](int64_t t) { return t == 1; }))
    for (int64_t i = 0; i < k; ++i)
      if (stride[i] > 1 && pad[i] == 0) {
        x = c.slice(x, 2 + i, 0, (out[i] - 1) * stride[i] + 1, stride[i]);
        stride[i] = 1;
      }
  // Patches: windows that tile the input (a ViT's 16 x 16 patch embedding)
  // beyond kMinTiledTaps taps are a reshape of it. The columns [N x
  // positions, C x taps] are one permute copy (rows of a window row each),
  // times the weight transposed gives channels-last, permuted to NCHW: as
  // window slices each of the 256 taps took a copy of its own ([2, 3, 224,
  // 224] bf16 to 192 channels: 368.8 us, as patches 108.6).
  bool patches = groups == 1 && taps > kMinTiledTaps;
  for (int64_t i = 0; i < k; ++i) patches &= stride[i] == kernel[i] && pad[i] == 0 && dilation[i] == 1;
  if (patches) {
    SmallVector<int64_t> split{batch, cin}, order{0}, channelsLast{batch}, toNchw{0, k + 1};
    for (int64_t i = 0; i < k; ++i) {
      x = c.slice(x, 2 + i, 0, out[i] * kernel[i]);
      split.append({out[i], kernel[i]});
      order.push_back(2 + 2 * i);
      channelsLast.push_back(out[i]);
      toNchw.push_back(1 + i);
    }
    order.push_back(1);
    for (int64_t i = 0; i < k; ++i) order.push_back(3 + 2 * i);
    channelsLast.push_back(cout);
    Value cols = c.reshape(c.permute(c.reshape(x, split), order), {positions, cin * taps});
    Value wT = c.permute(c.reshape(w, {cout, cin * taps}), {1, 0});
    Value r = bias ? c.addmm(c.reshape(c.cast(bias, elem), {1, cout}), cols, wT) : c.mm(cols, wT);
    return c.finish(c.permute(c.reshape(r, channelsLast), toNchw));
  }
  std::optional<WideWindows> wide = wideWindows(c, x, kernel, stride, pad, dilation, out, 0.0);
  if (cinGroup == 1 && groups > 1) {
    // Depthwise: output channel o reads input channel o / (cout / groups).
    SmallVector<Value> slices;
    if (wide)
      for (size_t t = 0; t < wide->offsets.size(); ++t) slices.push_back(wide->window(c, t, 0, cin));
    else
      slices = windowSlices(c, padSpatial(c, x, 2, kernel, stride, pad, dilation, out, 0.0), 2, kernel, stride,
                            dilation, out);
    SmallVector<int64_t> perChannel(typeOf(slices.front()).getRank() - 2, 1);
    perChannel.insert(perChannel.begin(), cout);
    Value acc;
    for (auto [tap, s] : llvm::enumerate(slices)) {
      if (coutGroup > 1) {
        SmallVector<int64_t> shape(typeOf(s).getShape()), expanded(shape);
        expanded.insert(expanded.begin() + 2, coutGroup);
        shape[1] = cout;
        s = c.reshape(c.expand(c.unsqueeze(s, 2), expanded), shape);
      }
      Value tapWeight = c.reshape(c.slice(c.reshape(w, {cout, taps}), 1, int64_t(tap), int64_t(tap) + 1), perChannel);
      Value term = c.mul(s, tapWeight);
      acc = acc ? c.add(acc, term) : term;
    }
    if (bias) acc = c.add(acc, c.reshape(c.cast(bias, elem), perChannel));
    return c.finish(wide ? cutWide(c, *wide, acc, out) : acc);
  }
  if (wide) {
    // Per group: columns [N, C_g x taps, wide positions], each tap one
    // contiguous window of every input plane, and the weight [C_out_g, C_g
    // x taps] broadcast over the batch times them: the output is NCHW
    // already, at the wide positions, and the cut is a view for whatever
    // reads it.
    //
    // Tap-major rows (tap t's channels in rows t x C_g ..; the weight's
    // [C_g, taps] permuted to match) make each tap's rows one window of the
    // planes, a single stride apart: at -O2 the matmul loads them straight
    // from the padded input (ncc-form-kernels joins the cat into its
    // kernel, passes/WindowOperand.h), a K segment per tap, and no columns
    // go through HBM. Each segment then takes whole K slices of its own
    // (the TensorEngine costs the same per slice of any height), or, of 64
    // rows or fewer, shares one with the next segments (several taps
    // stacked on the partitions, each from its own first element), so only
    // where those slices are at most twice the slices of the stacked columns
    // (3 x 3 over 160 channels: 18 against 12). In a strided convolution
    // the taps of a shared slice lie in different phases, a transfer each:
    // its taps of fewer than 64 channels (an RGB stem, 49 taps of 3
    // channels: up to 42 transfers a slice) keep the channel-major columns
    // (tap t of channel c in row c x taps + t, the weight's order), copied
    // through HBM ([8, 64, 56, 56] bf16, 3 x 3: 360.5 us with the columns,
    // 211.2 loaded by the matmul).
    const int64_t P = 128, stackedSlices = (taps * cinGroup + P - 1) / P;
    const int64_t segmentSlices = 2 * cinGroup <= P ? (taps + P / cinGroup - 1) / (P / cinGroup)
                                                    : taps * ((cinGroup + P - 1) / P);
    const bool tapMajor =
        taps > 1 && segmentSlices <= 2 * stackedSlices && (!wide->phased || cinGroup >= P / 2);
    // The taps' order in the stack. Where m = P / C_g taps share a K slice,
    // each slice takes m taps of consecutive kernel rows at one column (the
    // tap below, a row apart), so that the slices of neighbouring columns
    // hold windows a column apart in each of their partition blocks, which
    // the matmul loads once as their union (passes/LowerMatmul.cpp); in
    // row-major order a 3 x 3 kernel's pairs lie 1 and W - 2 apart, and the
    // pair across two rows shares its load with no other ([8, 64, 56, 56]
    // bf16: the matmul read 18.4 MB, now 16.7). Rows past the last whole
    // block of m stay row-major. Only for a constant weight, whose
    // reordered taps (a cat of a slice per tap) fold; a graph input's would
    // be a copy kernel of a piece per tap.
    SmallVector<int64_t> order;
    for (int64_t t = 0; t < taps; ++t) order.push_back(t);
    if (tapMajor && k >= 2 && 2 * cinGroup <= P && kernel[k - 2] >= P / cinGroup &&
        weight.getDefiningOp<arith::ConstantOp>()) {
      const int64_t m = P / cinGroup, kh = kernel[k - 2], kw = kernel[k - 1], plane = kh * kw;
      order.clear();
      for (int64_t outer = 0; outer < taps / plane; ++outer)
        for (int64_t block = 0; block < kh; block += m)
          for (int64_t kx = 0; kx < kw; ++kx)
            for (int64_t ky = block; ky < std::min(kh, block + m); ++ky) order.push_back(outer * plane + ky * kw + kx);
    }
    const bool reordered = !llvm::equal(order, llvm::seq<int64_t>(0, taps));
    SmallVector<Value> results;
    for (int64_t g = 0; g < groups; ++g) {
      Value cols;
      if (taps == 1) {
        cols = wide->window(c, 0, g * cinGroup, (g + 1) * cinGroup);
      } else {
        SmallVector<Value> columns;
        for (int64_t t : order)
          columns.push_back(
              c.unsqueeze(wide->window(c, size_t(t), g * cinGroup, (g + 1) * cinGroup), tapMajor ? 1 : 2));
        cols = c.reshape(c.cat(columns, tapMajor ? 1 : 2), {batch, taps * cinGroup, wide->positions});
      }
      Value wMat = c.reshape(c.slice(w, 0, g * coutGroup, (g + 1) * coutGroup), {coutGroup, cinGroup * taps});
      if (tapMajor) {
        wMat = c.permute(c.reshape(wMat, {coutGroup, cinGroup, taps}), {0, 2, 1});
        if (reordered) {
          SmallVector<Value> rows;
          for (int64_t t : order) rows.push_back(c.slice(wMat, 1, t, t + 1));
          wMat = c.cat(rows, 1);
        }
        wMat = c.reshape(wMat, {coutGroup, taps * cinGroup});
      }
      wMat = c.expand(c.unsqueeze(wMat, 0), {batch, coutGroup, cinGroup * taps});
      Value r = n.b.create<aten::BmmOp>(n.loc, RankedTensorType::get({batch, coutGroup, wide->positions}, elem),
                                        wMat, cols);
      // The bias is added over the wide output's own shape, [N, C, spatial
      // dims], as the ops after the convolution (a batch norm, an
      // activation) see it, so that where nothing is cut (a 1 x 1 kernel)
      // they may join the matmul's kernel as its epilogue over split columns.
      SmallVector<int64_t> biasShape{coutGroup};
      biasShape.append(wide->wideShape.size(), 1);
      if (bias)
        r = c.add(c.reshape(r, wideOutputShape(*wide, r)),
                  c.reshape(c.slice(c.cast(bias, elem), 0, g * coutGroup, (g + 1) * coutGroup), biasShape));
      results.push_back(cutWide(c, *wide, r, out));
    }
    return c.finish(groups == 1 ? results.front() : c.cat(results, 1));
  }
  SmallVector<Value> slices =
      windowSlices(c, padSpatial(c, x, 2, kernel, stride, pad, dilation, out, 0.0), 2, kernel, stride, dilation, out);
  // Channel-major columns: [N, C_g, out...] per tap -> [C_g, taps, N, out...]
  // -> [C_g * taps, positions] (the order of the weight's [cin_g, kernel...]),
  // then weight [cout_g, C_g * taps] @ columns -> [cout_g, positions]. Only
  // the leading [N, C] dims move, so every copy keeps the slices' rows
  // whole; channels-last columns ([positions, taps * C_g]) were copied
  // element by element from the NCHW input (a ResNet basic block, 4 x 64 x
  // 56 x 56 bf16: 24.1 ms, 19.3 of them in those copies).
  SmallVector<int64_t> channelsFirst{1, 0};
  for (int64_t i = 0; i < k; ++i) channelsFirst.push_back(2 + i);
  SmallVector<Value> results;
  for (int64_t g = 0; g < groups; ++g) {
    SmallVector<Value> columns;
    for (Value s : slices)
      columns.push_back(c.unsqueeze(c.permute(c.slice(s, 1, g * cinGroup, (g + 1) * cinGroup), channelsFirst), 1));
    Value cols = c.reshape(c.cat(columns, 1), {cinGroup * taps, positions});
    Value wMat = c.reshape(c.slice(w, 0, g * coutGroup, (g + 1) * coutGroup), {coutGroup, cinGroup * taps});
    Value r = bias ? c.addmm(c.reshape(c.slice(c.cast(bias, elem), 0, g * coutGroup, (g + 1) * coutGroup),
                                       {coutGroup, 1}),
                             wMat, cols)
                   : c.mm(wMat, cols);
    SmallVector<int64_t> shape{coutGroup, batch};
    shape.append(out);
    results.push_back(c.permute(c.reshape(r, shape), channelsFirst));
  }
  return c.finish(c.cat(results, 1));
}

// The 2-d arguments of im2col and col2im (kernel, dilation, padding,
// stride), each one value for both dims or two.
struct Unfolding {
  SmallVector<int64_t> kernel, dilation, pad, stride;
};

FailureOr<Unfolding> unfoldingArgs(NodeImporter& n, size_t first) {
  Unfolding u;
  NCC_TRY(kernel, spatialInts(n, first, "kernel_size", 2, {}));
  NCC_TRY(dilation, spatialInts(n, first + 1, "dilation", 2, {1, 1}));
  NCC_TRY(pad, spatialInts(n, first + 2, "padding", 2, {0, 0}));
  NCC_TRY(stride, spatialInts(n, first + 3, "stride", 2, {1, 1}));
  constexpr int64_t kMax = int64_t(1) << 24;
  if (kernel.size() != 2) return n.error("unfold needs a 2-d kernel_size");
  for (int i = 0; i < 2; ++i)
    if (kernel[i] < 1 || dilation[i] < 1 || stride[i] < 1 || pad[i] < 0 || kernel[i] > kMax || dilation[i] > kMax ||
        stride[i] > kMax || pad[i] > kMax)
      return n.error("unfold needs positive kernel sizes, dilations and strides and non-negative padding (at most 2^24)");
  u.kernel = kernel, u.dilation = dilation, u.pad = pad, u.stride = stride;
  return u;
}

// im2col (F.unfold): [N, C, H, W] -> [N, C * kh * kw, L], each column one
// window of the zero-padded input, channel-major then kernel row-major.
LogicalResult im2col(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(u, unfoldingArgs(n, 1));
  Value x = self;
  bool batched = typeOf(x).getRank() == 4;
  if (!batched && typeOf(x).getRank() != 3) return n.error("unfold needs a [C, H, W] or [N, C, H, W] input");
  if (!batched) x = c.unsqueeze(x, 0);
  SmallVector<int64_t> out;
  for (int i = 0; i < 2; ++i) {
    out.push_back(windowCount(typeOf(x).getDimSize(2 + i), u.kernel[i], u.stride[i], u.pad[i], u.dilation[i], false));
    if (out.back() <= 0) return n.error("unfold window larger than its padded input");
  }
  SmallVector<Value> slices =
      windowSlices(c, padSpatial(c, x, 2, u.kernel, u.stride, u.pad, u.dilation, out, 0.0), 2, u.kernel, u.stride,
                   u.dilation, out);
  for (Value& s : slices) s = c.unsqueeze(s, 2);  // [N, C, 1, oh, ow]
  Value stacked = c.cat(slices, 2);               // [N, C, taps, oh, ow]
  int64_t batch = typeOf(x).getDimSize(0), channels = typeOf(x).getDimSize(1);
  return c.finish(c.fresh(c.reshape(stacked, {batch, channels * int64_t(slices.size()), out[0] * out[1]}), self));
}

// col2im (F.fold): the inverse layout of im2col, overlapping windows summed:
// each kernel tap's [N, C, oh, ow] block spread by the stride (zeros between),
// shifted to its offset in the padded output, the taps added, the padding
// cut.
LogicalResult col2im(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(size, n.ints(1, "output_size"));
  NCC_TRY(u, unfoldingArgs(n, 2));
  NCC_TRY(type, n.resultType());
  Value x = c.toFloat(self);
  bool batched = typeOf(x).getRank() == 3;
  if (!batched && typeOf(x).getRank() != 2) return n.error("fold needs a [C * k, L] or [N, C * k, L] input");
  if (!batched) x = c.unsqueeze(x, 0);
  if (size.size() != 2 || size[0] < 1 || size[1] < 1 || size[0] > (int64_t(1) << 24) || size[1] > (int64_t(1) << 24))
    return n.error("fold needs two positive output sizes");
  int64_t taps = u.kernel[0] * u.kernel[1], rows = typeOf(x).getDimSize(1);
  SmallVector<int64_t> out;
  for (int i = 0; i < 2; ++i) {
    out.push_back(windowCount(size[i], u.kernel[i], u.stride[i], u.pad[i], u.dilation[i], false));
    if (out.back() <= 0) return n.error("fold window larger than its padded output");
  }
  if (rows % taps != 0 || typeOf(x).getDimSize(2) != out[0] * out[1])
    return n.error("fold input of " + aten::shapeToString(typeOf(x).getShape()) + " does not match the kernel and output size");
  int64_t batch = typeOf(x).getDimSize(0), channels = rows / taps;
  Value blocks = c.reshape(x, {batch, channels, taps, out[0], out[1]});
  int64_t padded[2] = {size[0] + 2 * u.pad[0], size[1] + 2 * u.pad[1]};
  Value sum;
  for (int64_t t = 0; t < taps; ++t) {
    Value b = c.reshape(c.slice(blocks, 2, t, t + 1), {batch, channels, out[0], out[1]});
    int64_t offset[2] = {(t / u.kernel[1]) * u.dilation[0], (t % u.kernel[1]) * u.dilation[1]};
    for (int i = 0; i < 2; ++i) {
      int64_t dim = 2 + i, len = out[i];
      if (u.stride[i] > 1) {  // zeros between the elements
        SmallVector<int64_t> spread(typeOf(b).getShape());
        spread[dim] = len * u.stride[i];
        b = c.reshape(padDim(c, c.unsqueeze(b, dim + 1), dim + 1, 0, u.stride[i] - 1, 0.0), spread);
        b = c.slice(b, dim, 0, (len - 1) * u.stride[i] + 1);
      }
      b = padDim(c, b, dim, offset[i], padded[i] - offset[i] - typeOf(b).getDimSize(dim), 0.0);
    }
    sum = sum ? c.add(sum, b) : b;
  }
  Value cut = c.slice(c.slice(sum, 2, u.pad[0], u.pad[0] + size[0]), 3, u.pad[1], u.pad[1] + size[1]);
  return c.finish(cut);
}

// The spatial arguments of a k-d pooling op (k = 2 or 3).
struct Pooling {
  SmallVector<int64_t> kernel, stride, pad, dilation, out;
  bool ceilMode = false;
};

FailureOr<Pooling> poolingArgs(NodeImporter& n, Value self, bool hasDilation, int64_t k) {
  Pooling p;
  int64_t rank = typeOf(self).getRank();
  if (rank != k + 1 && rank != k + 2)
    return n.error(std::to_string(k) + "-d pooling needs a [C, spatial...] or [N, C, spatial...] input with " +
                   std::to_string(k) + " spatial dims");
  NCC_TRY(kernel, spatialInts(n, 1, "kernel_size", size_t(k), {}));
  if (int64_t(kernel.size()) != k) return n.error("pooling needs a kernel size");
  NCC_TRY(stride, spatialInts(n, 2, "stride", size_t(k), kernel));
  NCC_TRY(pad, spatialInts(n, 3, "padding", size_t(k), SmallVector<int64_t>(size_t(k), 0)));
  SmallVector<int64_t> dilation(size_t(k), 1);
  if (hasDilation) {
    NCC_TRY(d, spatialInts(n, 4, "dilation", size_t(k), SmallVector<int64_t>(size_t(k), 1)));
    dilation = d;
  }
  NCC_TRY(ceilMode, n.boolean(hasDilation ? 5 : 4, "ceil_mode", false));
  for (int64_t i = 0; i < k; ++i) {
    if (kernel[i] < 1 || stride[i] < 1 || dilation[i] < 1 || pad[i] < 0 || 2 * pad[i] > kernel[i] ||
        kernel[i] > (int64_t(1) << 24) || stride[i] > (int64_t(1) << 24) || dilation[i] > (int64_t(1) << 24))
      return n.error("pooling needs positive kernel, stride and dilation, and padding at most half the kernel");
    int64_t o = windowCount(typeOf(self).getDimSize(rank - k + i), kernel[i], stride[i], pad[i], dilation[i], ceilMode);
    if (o <= 0) return n.error("pooling window larger than its padded input");
    p.out.push_back(o);
  }
  p.kernel = kernel, p.stride = stride, p.pad = pad, p.dilation = dilation, p.ceilMode = ceilMode;
  return p;
}

// Windows that tile the input (stride equal to the kernel, no padding or
// dilation, no partial window) as one reduction: the input cut to whole
// windows, each spatial dim split into [windows, kernel], the kernel dims
// reduced by `reduce` (sum or amax). Otherwise a null value.
// Only for windows of more than kMinTiledTaps taps, or a single output per
// row: the reduction reads each output's window as its own row of kernel
// columns, a few elements each, where window slices (each tap a strided
// slice, loaded as its span: LowerToIsa's stepped loads) move whole rows
// (2 x 2 average pooling of [4, 256, 28, 28] bf16: 2943.5 us tiled).

template <typename Reduce>
Value tiledWindows(Composer& c, Value x, int64_t lead, const Pooling& p, Reduce reduce) {
  size_t k = p.kernel.size();
  int64_t taps = 1;
  for (int64_t kernel : p.kernel) taps = std::min<int64_t>(taps * kernel, kMinTiledTaps + 1);
  if (taps <= kMinTiledTaps && p.out.back() > 1) return Value();
  for (size_t i = 0; i < k; ++i)
    if (p.stride[i] != p.kernel[i] || p.pad[i] != 0 || p.dilation[i] != 1 ||
        p.out[i] * p.kernel[i] > typeOf(x).getDimSize(lead + int64_t(i)))
      return Value();
  SmallVector<int64_t> split(typeOf(x).getShape().take_front(size_t(lead))), reduced;
  for (size_t i = 0; i < k; ++i) {
    x = c.slice(x, lead + int64_t(i), 0, p.out[i] * p.kernel[i]);
    split.append({p.out[i], p.kernel[i]});
    reduced.push_back(lead + 2 * int64_t(i) + 1);
  }
  return reduce(c.reshape(x, split), reduced);
}

// A composition of one slice per tap beyond this many taps would take long
// to compile; such windows are refused unless they tile the input.
constexpr int64_t kMaxPoolingTaps = 1 << 14;

LogicalResult checkTaps(NodeImporter& n, const Pooling& p) {
  int64_t taps = 1;
  for (int64_t kernel : p.kernel) taps = std::min<int64_t>(taps * kernel, kMaxPoolingTaps + 1);
  if (taps > kMaxPoolingTaps)
    return n.error("pooling window of more than " + std::to_string(kMaxPoolingTaps) +
                   " elements that does not tile the input (stride = kernel, no padding): use adaptive pooling");
  return success();
}

// Calls f(position) for every position of `extent` in row-major order.
void forEachPosition(ArrayRef<int64_t> extent, llvm::function_ref<void(ArrayRef<int64_t>)> f) {
  SmallVector<int64_t> at(extent.size(), 0);
  while (true) {
    f(at);
    size_t i = extent.size();
    while (i > 0 && ++at[i - 1] == extent[i - 1]) at[--i] = 0;
    if (i == 0) return;
  }
}

// max_pool2d_with_indices and max_pool3d_with_indices: the maximum of the
// window slices of the input padded with -inf (NaN propagating), and the
// flat index into the spatial dims of the first maximum of each window, or
// of its last NaN, as the eager kernel scans; padding never matches.
LogicalResult maxPool(NodeImporter& n, int64_t k) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(p, poolingArgs(n, self, true, k));
  Value x = c.toFloat(self);
  int64_t lead = typeOf(x).getRank() - k;
  ArrayRef<int64_t> sizes = typeOf(x).getShape().drop_front(size_t(lead));
  // (The indices, when the graph reads them, compare each tap with the
  // maximum; unread, they are dead code the pipeline drops.)
  Value top = tiledWindows(c, x, lead, p, [&](Value v, ArrayRef<int64_t> dims) { return c.amax(v, dims, false); });
  if (failed(checkTaps(n, p))) return failure();
  double inf = std::numeric_limits<double>::infinity();
  SmallVector<Value> slices = windowSlices(
      c, padSpatial(c, x, lead, p.kernel, p.stride, p.pad, p.dilation, p.out, -inf), lead, p.kernel, p.stride,
      p.dilation, p.out);
  if (!top) {
    top = slices.front();
    for (Value s : ArrayRef<Value>(slices).drop_front()) top = c.maximum(top, s);
  }
  if (failed(c.finish(top, 0))) return failure();
  if (n.node.outputs_size() < 2) return success();
  // Per tap (in windowSlices' order): the input position each output reads,
  // and whether it is real.
  SmallVector<std::pair<Value, Value>> taps;  // (index map, valid map)
  forEachPosition(p.kernel, [&](ArrayRef<int64_t> tap) {
    SmallVector<double> index, valid;
    forEachPosition(p.out, [&](ArrayRef<int64_t> o) {
      bool real = true;
      int64_t flat = 0;
      for (int64_t i = 0; i < k; ++i) {
        int64_t at = o[i] * p.stride[i] + tap[i] * p.dilation[i] - p.pad[i];
        real = real && at >= 0 && at < sizes[i];
        flat = flat * sizes[i] + at;
      }
      index.push_back(real ? double(flat) : 0.0);
      valid.push_back(real ? 1.0 : 0.0);
    });
    taps.push_back({c.constant(p.out, c.f32(), index), c.constant(p.out, c.i1(), valid)});
  });
  Value chosen = c.scalar(0, c.f32());
  for (size_t t = slices.size(); t-- > 0;)
    chosen = c.where(c.logicalAnd(taps[t].second, c.compare<aten::EqTensorOp>(slices[t], top)), taps[t].first, chosen);
  for (size_t t = 0; t < slices.size(); ++t)
    chosen = c.where(c.logicalAnd(taps[t].second, c.isNan(slices[t])), taps[t].first, chosen);
  return c.finish(c.expand(chosen, typeOf(top).getShape()), 1);
}

// avg_pool2d and avg_pool3d: the window sums over the zero-padded input, in
// the kernel's row-major order, divided by the window size eager uses (the
// kernel clipped to the padded input, or the real elements only without
// count_include_pad, or divisor_override).
LogicalResult avgPool(NodeImporter& n, int64_t k) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(p, poolingArgs(n, self, false, k));
  NCC_TRY(includePad, n.boolean(5, "count_include_pad", true));
  std::optional<int64_t> divisor;
  if (const Argument* a = n.arg(6, "divisor_override"); a && a->value_case() != Argument::kNone) {
    NCC_TRY(d, n.integer(6, "divisor_override"));
    if (d == 0) return n.error("divisor_override must be nonzero");
    divisor = d;
  }
  NCC_TRY(type, n.resultType());
  // A half-precision window is summed in f32 and rounded once at the end,
  // as eager's kernels accumulate (sixteen adds rounded to f16 each were off
  // by 1.5% where a norm over the result magnified them).
  Type elem = c.floatOf(type.getElementType());
  Value x = c.cast(self, elem.isF16() || elem.isBF16() ? c.f32() : elem);
  int64_t lead = typeOf(x).getRank() - k;
  ArrayRef<int64_t> sizes = typeOf(x).getShape().drop_front(size_t(lead));
  int64_t area = 1;
  for (int64_t kernel : p.kernel) area *= kernel;
  Value tiled = tiledWindows(c, x, lead, p, [&](Value v, ArrayRef<int64_t> dims) { return c.sum(v, dims, false); });
  if (tiled) return c.finish(c.div(tiled, c.scalar(double(divisor ? *divisor : area), typeOf(tiled).getElementType())));
  if (failed(checkTaps(n, p))) return failure();
  SmallVector<Value> slices = windowSlices(
      c, padSpatial(c, x, lead, p.kernel, p.stride, p.pad, p.dilation, p.out, 0.0), lead, p.kernel, p.stride,
      p.dilation, p.out);
  Value total = slices.front();
  for (Value s : ArrayRef<Value>(slices).drop_front()) total = c.add(total, s);
  SmallVector<double> counts;
  forEachPosition(p.out, [&](ArrayRef<int64_t> o) {
    int64_t area = 1;
    for (int64_t i = 0; i < k; ++i) {
      int64_t lo = o[i] * p.stride[i] - p.pad[i];
      int64_t hi = std::min(lo + p.kernel[i], sizes[i] + p.pad[i]);
      area *= includePad ? hi - lo : std::min(hi, sizes[i]) - std::max<int64_t>(lo, 0);
    }
    counts.push_back(divisor ? double(*divisor) : double(area));
  });
  return c.finish(c.div(total, c.constant(p.out, c.f32(), counts)));
}

// The scale factors of an upsampling node: the .vec overload's float list at
// `pos`, or the sized overload's scales_h and scales_w at `pos` and after
// (absent: none).
// The scale factors of a k-d upsampling: the .vec overload's
// scale_factors, or the sized overload's scales (scales; scales_h, scales_w;
// scales_d, scales_h, scales_w) from position `pos`; none when absent.
FailureOr<SmallVector<double>> upsampleFactors(NodeImporter& n, bool vec, size_t pos, int64_t k) {
  SmallVector<double> factors;
  if (vec) {
    const Argument* a = n.arg(pos, "scale_factors");
    if (a && a->value_case() == Argument::kFloatList)
      factors.assign(a->float_list().values().begin(), a->float_list().values().end());
    if (!factors.empty() && int64_t(factors.size()) != k) return n.error("scale_factors needs one factor per spatial dim");
    return factors;
  }
  static const char* const kNames[3][3] = {{"scales"}, {"scales_h", "scales_w"}, {"scales_d", "scales_h", "scales_w"}};
  for (int64_t i = 0; i < k; ++i) {
    const char* name = kNames[k - 1][i];
    const Argument* a = n.arg(pos + size_t(i), name);
    if (!a || a->value_case() == Argument::kNone) break;
    NCC_TRY(f, n.number(pos + size_t(i), name));
    factors.push_back(f);
  }
  return factors;
}

// The recorded result's spatial sizes must be those the node asks for: its
// output_size (at position 1) when given, else floor(in * factor) per dim
// (eager's output size); a graph whose shapes disagree is refused.
LogicalResult checkUpsampleSize(NodeImporter& n, Value self, RankedTensorType result, ArrayRef<double> factors,
                                int64_t k) {
  NCC_TRY(size, n.ints(1, "output_size", SmallVector<int64_t>{}));
  for (int64_t i = 0; i < k; ++i) {
    int64_t in = typeOf(self).getDimSize(2 + i), out = result.getDimSize(2 + i), expected;
    if (!size.empty()) {
      if (int64_t(size.size()) != k) return n.error("output_size needs one size per spatial dim");
      expected = size[size_t(i)];
    } else if (int64_t(factors.size()) == k) {
      double scaled = double(in) * factors[size_t(i)];
      if (!(scaled >= 1 && scaled < double(int64_t(1) << 40))) return n.error("upsampling to an empty or huge size");
      expected = int64_t(scaled);
    } else {
      return n.error("upsampling needs an output_size or a scale factor per spatial dim");
    }
    if (expected != out)
      return n.error("upsampling to " + std::to_string(expected) + " along spatial dim " + std::to_string(i) +
                     ", the graph records " + std::to_string(out));
  }
  return success();
}

// Eager's float32 ratio of input to output positions along spatial dim i:
// 1 / factor when every factor is given, else in / out.
float upsampleScale(ArrayRef<double> factors, size_t k, int i, int64_t in, int64_t out) {
  if (factors.size() == k && factors[size_t(i)] > 0) return float(1.0 / factors[size_t(i)]);
  return float(in) / float(out);
}

// upsample_nearest{1,2,3}d (.vec and the sized overloads): each output
// position reads the input's min(floor(dst * scale), in - 1) per spatial
// dim, with eager's float32 scale (1 / scale_factor when given, else
// in / out). A whole factor k whose indices are dst / k is an expand and
// reshape; other sizes gather by constant indices.
LogicalResult upsampleNearest(NodeImporter& n, bool vec, int64_t k) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "input"));
  NCC_TRY(type, n.resultType());
  int64_t rank = typeOf(self).getRank();
  if (rank != k + 2 || type.getRank() != k + 2)
    return n.error("nearest upsampling needs an [N, C, " + std::to_string(k) + " spatial dims] input");
  NCC_TRY(factors, upsampleFactors(n, vec, 2, k));
  if (failed(checkUpsampleSize(n, self, type, factors, k))) return failure();
  bool halve = k > 1 && typeOf(self).getDimSize(1) == 1;
  Value x = self;
  // Whole factors become one expand of unit dims inserted after their spatial
  // dims (a copy kernel writing each output row once); other dims gather.
  SmallVector<int64_t> withUnits(typeOf(self).getShape().take_front(2)), wide(withUnits);
  bool anyWhole = false;
  for (int i = 0; i < int(k); ++i) {
    int64_t dim = 2 + i, in = typeOf(x).getDimSize(dim), out = type.getDimSize(dim);
    float scale = upsampleScale(factors, size_t(k), i, in, out);
    SmallVector<double> index;
    bool whole = out >= in && out % in == 0;
    int64_t factor = whole ? out / in : 1;
    for (int64_t dst = 0; dst < out; ++dst) {
      // (eager 1.13's 2-d and 3-d kernels for one channel take dst / 2 for an output twice the
      // input, whatever the factor; with more channels, and in 1-d, they always scale)
      int64_t src = out == in              ? dst
                    : out == 2 * in && halve ? dst >> 1
                                           : std::min<int64_t>(int64_t(std::floor(float(dst) * scale)), in - 1);
      index.push_back(double(src));
      whole &= src == dst / factor;
    }
    if (whole) {  // [.., in, ..] -> [.., in, 1, ..] -> [.., in, factor, ..]
      withUnits.append({in, 1});
      wide.append({in, factor});
      anyWhole |= factor > 1;
      continue;
    }
    NCC_TRY(g, gatherAlong(c, c.toFloat(x), dim, c.constant({out}, c.b.getIntegerType(64), index)));
    x = g;
    withUnits.push_back(out);
    wide.push_back(out);
  }
  if (anyWhole) x = c.reshape(c.expand(c.reshape(x, withUnits), wide), type.getShape());
  return c.finish(c.fresh(x, self));
}

// The cubic convolution weights of eager's bicubic kernel (A = -0.75) for
// the four neighbours of a source position t past its floor, in float32 as
// eager evaluates them.
std::array<float, 4> cubicWeights(float t) {
  const float a = -0.75f;
  auto near = [&](float x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };           // |x| <= 1
  auto far = [&](float x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };     // 1 < |x| < 2
  float x2 = 1.0f - t;
  return {far(t + 1.0f), near(t), near(x2), far(x2 + 1.0f)};
}

// upsample_linear1d, upsample_bilinear2d, upsample_trilinear3d and
// upsample_bicubic2d (.vec and the sized overloads), as eager's CPU kernels:
// per output position along a dim the source position r = align_corners ?
// dst * (in - 1) / (out - 1) : (dst + 0.5) * scale - 0.5 (float32; scale 1 /
// factor when given, else in / out; linear clamps r at 0). Linear reads
// i0 = floor(r) and i0 + 1 (i0 at the last one) with weights 1 - (r - i0)
// and r - i0; cubic reads floor(r) - 1 .. floor(r) + 2, clamped to the
// input, with the cubic convolution weights of r - floor(r). Computed as
// gathers by constant indices and weighted sums with constant weights in
// eager's order (innermost dim first; taps in order: 2-d linear is h0 * (w0
// * x00 + w1 * x01) + h1 * (w0 * x10 + w1 * x11)), in f32 for reduced
// precision, rounded once.
LogicalResult upsampleInterpolated(NodeImporter& n, bool vec, int64_t k, bool cubic) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "input"));
  NCC_TRY(alignCorners, n.boolean(2, "align_corners", false));
  NCC_TRY(type, n.resultType());
  const char* what = cubic ? "bicubic" : "linear";
  if (typeOf(self).getRank() != k + 2 || type.getRank() != k + 2)
    return n.error(std::string(what) + " upsampling needs an [N, C, " + std::to_string(k) + " spatial dims] input");
  NCC_TRY(factors, upsampleFactors(n, vec, 3, k));
  if (failed(checkUpsampleSize(n, self, type, factors, k))) return failure();
  Type compute = isReducedFloat(type.getElementType()) ? c.f32() : type.getElementType();
  if (!aten::isFloatType(compute)) return n.error(std::string(what) + " upsampling needs a float tensor");
  Value x = c.cast(self, compute);
  Type i64 = c.b.getIntegerType(64);
  const size_t taps = cubic ? 4 : 2;
  for (int i = int(k) - 1; i >= 0; --i) {  // innermost first: eager's order of the sums
    int64_t dim = 2 + i, in = typeOf(x).getDimSize(dim), out = type.getDimSize(dim);
    float scale = alignCorners ? (out > 1 ? float(in - 1) / float(out - 1) : 0.0f)
                               : upsampleScale(factors, size_t(k), i, in, out);
    SmallVector<SmallVector<double>> index(taps), weight(taps);
    for (int64_t dst = 0; dst < out; ++dst) {
      float r = alignCorners ? scale * float(dst) : scale * (float(dst) + 0.5f) - 0.5f;
      if (!cubic) {
        r = std::max(r, 0.0f);
        int64_t i0 = std::min<int64_t>(int64_t(r), in - 1);
        int64_t step = i0 < in - 1 ? 1 : 0;
        float lambda1 = r - float(i0), lambda0 = 1.0f - lambda1;
        index[0].push_back(double(i0)), index[1].push_back(double(i0 + step));
        weight[0].push_back(lambda0), weight[1].push_back(lambda1);
        continue;
      }
      float floor = std::floor(r);
      std::array<float, 4> w = cubicWeights(r - floor);
      for (size_t t = 0; t < 4; ++t) {
        int64_t at = std::clamp<int64_t>(int64_t(floor) - 1 + int64_t(t), 0, in - 1);
        index[t].push_back(double(at));
        weight[t].push_back(w[t]);
      }
    }
    SmallVector<int64_t> weightShape(size_t(k) + 2, 1);
    weightShape[size_t(dim)] = out;
    Value sum;
    for (size_t t = 0; t < taps; ++t) {
      NCC_TRY(g, gatherAlong(c, x, dim, c.constant({out}, i64, index[t])));
      Value term = c.mul(g, c.constant(weightShape, compute, weight[t]));
      sum = sum ? c.add(sum, term) : term;
    }
    x = sum;
  }
  return c.finish(x);
}

// grid_sampler_2d(input [N, C, H, W], grid [N, Ho, Wo, 2], interpolation,
// padding, align_corners) (F.grid_sample): each output position reads the
// input at the grid's (x, y), mapped from [-1, 1] to pixel coordinates
// (align_corners: the corner pixels' centres, else their outer edges).
// Bilinear: the four neighbours of the point, weighted by the distances;
// nearest: the pixel the point rounds to (ties to even); bicubic: the 4 x 4
// neighbours with eager's cubic convolution weights (A = -0.75). Padding:
// zeros (a tap outside the input reads 0), border (the point, or with
// bicubic each tap, clamped to the input) or reflection (mirrored at the
// border, then clamped), as eager's CPU kernels. Each tap is a gather from
// the input as an [N * H * W, C] table; reduced precision in f32, rounded
// once.
LogicalResult gridSampler2d(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(input, n.tensor(0, "input"));
  NCC_TRY(grid, n.tensor(1, "grid"));
  NCC_TRY(interpolation, n.integer(2, "interpolation_mode"));
  NCC_TRY(padding, n.integer(3, "padding_mode"));
  NCC_TRY(alignCorners, n.boolean(4, "align_corners", false));
  NCC_TRY(type, n.resultType());
  auto in = typeOf(input).getShape(), g = typeOf(grid).getShape();
  if (in.size() != 4 || g.size() != 4 || g[3] != 2 || g[0] != in[0])
    return n.error("grid_sampler_2d needs an [N, C, H, W] input and an [N, Ho, Wo, 2] grid");
  if (interpolation < 0 || interpolation > 2 || padding < 0 || padding > 2)
    return n.error("grid_sampler_2d interpolation mode " + std::to_string(interpolation) + " or padding mode " +
                   std::to_string(padding) + " is not one of eager's (0 to 2)");
  int64_t batch = in[0], channels = in[1], height = in[2], width = in[3], rows = g[1], cols = g[2];
  if (batch * height * width >= (int64_t(1) << 24)) return n.error("grid_sampler_2d of an input of 2^24 pixels or more");
  Type compute = c.floatOf(isReducedFloat(type.getElementType()) ? c.f32() : type.getElementType());
  Value table = c.reshape(c.permute(c.cast(input, compute), {0, 2, 3, 1}), {batch * height * width, channels});
  Value points = c.cast(grid, c.f32());
  auto coordinate = [&](int64_t which, int64_t size) {  // [N, Ho, Wo] pixel coordinates
    Value v = c.reshape(c.slice(points, 3, which, which + 1), {batch, rows, cols});
    if (alignCorners) return c.mulScalar(c.addScalar(v, 1.0), double(size - 1) / 2.0);
    return c.mulScalar(c.addScalar(c.mulScalar(c.addScalar(v, 1.0), double(size)), -1.0), 0.5);
  };
  auto clampTo = [&](Value v, int64_t size) {
    return c.minimum(c.maximum(v, c.scalar(0.0, c.f32())), c.scalar(double(size - 1), c.f32()));
  };
  // eager's compute_coordinates: the point (or a bicubic tap) after padding
  auto padded = [&](Value v, int64_t size) {
    if (padding == 1) return clampTo(v, size);
    if (padding != 2) return v;
    double low = alignCorners ? 0.0 : -0.5, span = alignCorners ? double(size - 1) : double(size);
    if (span <= 0) return c.splat({batch, rows, cols}, c.f32(), 0.0);
    Value d = c.unary<aten::AbsOp>(c.addScalar(v, -low));
    Value flips = c.unary<aten::FloorOp>(c.mulScalar(d, 1.0 / span));
    Value extra = c.sub(d, c.mulScalar(flips, span));
    Value even = c.compareScalar<aten::EqScalarOp>(
        c.sub(flips, c.mulScalar(c.unary<aten::FloorOp>(c.mulScalar(flips, 0.5)), 2.0)), 0.0);
    Value mirrored = c.where(even, c.addScalar(extra, low), c.addScalar(c.mulScalar(extra, -1.0), span + low));
    return clampTo(mirrored, size);
  };
  Value base = c.iota(batch, {batch, 1, 1}, 0.0);
  // the input at whole-number coordinates (x, y), 0 outside it, as [N, Ho, Wo, C]
  auto tap = [&](Value x, Value y) -> FailureOr<Value> {
    Value inside = c.logicalAnd(
        c.logicalAnd(c.compareScalar<aten::GeScalarOp>(x, 0.0), c.compareScalar<aten::LeScalarOp>(x, double(width - 1))),
        c.logicalAnd(c.compareScalar<aten::GeScalarOp>(y, 0.0), c.compareScalar<aten::LeScalarOp>(y, double(height - 1))));
    Value flat = c.add(c.mulScalar(c.add(c.mulScalar(base, double(height)), clampTo(y, height)), double(width)),
                       clampTo(x, width));
    NCC_TRY(values, gatherAlong(c, table, 0, c.cast(flat, n.b.getIntegerType(64))));
    values = c.reshape(values, {batch, rows, cols, channels});
    return c.where(c.unsqueeze(inside, 3), values, c.scalar(0.0, compute));
  };
  auto weighted = [&](Value sum, Value value, Value weight) {
    Value term = c.mul(value, c.unsqueeze(c.cast(weight, compute), 3));
    return sum ? c.add(sum, term) : term;
  };
  Value x = coordinate(0, width), y = coordinate(1, height), out;
  if (interpolation == 1) {  // nearest
    NCC_TRY(v, tap(c.unary<aten::RoundOp>(padded(x, width)), c.unary<aten::RoundOp>(padded(y, height))));
    out = v;
  } else if (interpolation == 0) {  // bilinear
    x = padded(x, width), y = padded(y, height);
    Value x0 = c.unary<aten::FloorOp>(x), y0 = c.unary<aten::FloorOp>(y);
    Value tx = c.sub(x, x0), ty = c.sub(y, y0);
    Value one = c.scalar(1.0, c.f32());
    Value wx[2] = {c.sub(one, tx), tx}, wy[2] = {c.sub(one, ty), ty};
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t i = 0; i < 2; ++i) {
        NCC_TRY(v, tap(c.addScalar(x0, double(i)), c.addScalar(y0, double(j))));
        out = weighted(out, v, c.mul(wx[i], wy[j]));
      }
  } else {  // bicubic: the taps around the unpadded point, each padded
    Value x0 = c.unary<aten::FloorOp>(x), y0 = c.unary<aten::FloorOp>(y);
    auto weights = [&](Value t) {  // cubicWeights for a tensor of t
      const double a = -0.75;
      auto near = [&](Value v) {  // ((a + 2) v - (a + 3)) v^2 + 1
        return c.addScalar(c.mul(c.addScalar(c.mulScalar(v, a + 2), -(a + 3)), c.mul(v, v)), 1.0);
      };
      auto far = [&](Value v) {  // ((a v - 5a) v + 8a) v - 4a
        return c.addScalar(c.mul(c.addScalar(c.mul(c.addScalar(c.mulScalar(v, a), -5 * a), v), 8 * a), v), -4 * a);
      };
      Value rest = c.sub(c.scalar(1.0, c.f32()), t);
      return std::array<Value, 4>{far(c.addScalar(t, 1.0)), near(t), near(rest), far(c.addScalar(rest, 1.0))};
    };
    std::array<Value, 4> wx = weights(c.sub(x, x0)), wy = weights(c.sub(y, y0));
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t i = 0; i < 4; ++i) {
        Value tx = c.unary<aten::TruncOp>(padded(c.addScalar(x0, double(i - 1)), width));
        Value ty = c.unary<aten::TruncOp>(padded(c.addScalar(y0, double(j - 1)), height));
        NCC_TRY(v, tap(tx, ty));
        out = weighted(out, v, c.mul(wx[i], wy[j]));
      }
  }
  return c.finish(c.permute(out, {0, 3, 1, 2}));
}

// The input rows [floor(i * in / out), ceil((i + 1) * in / out)) that
// output i of adaptive pooling reads.
std::pair<int64_t, int64_t> adaptiveWindow(int64_t i, int64_t in, int64_t out) {
  return {i * in / out, ((i + 1) * in + out - 1) / out};
}

// The output sizes of adaptive pooling over the last k dims of `self`
// ([C, ...] or [N, C, ...]).
FailureOr<SmallVector<int64_t>> adaptiveSizes(NodeImporter& n, Value self, int64_t k) {
  NCC_TRY(size, n.ints(1, "output_size"));
  int64_t rank = typeOf(self).getRank();
  bool positive = llvm::all_of(size, [](int64_t s) { return s >= 1; });
  if ((rank != k + 1 && rank != k + 2) || int64_t(size.size()) != k || !positive)
    return n.error("adaptive pooling needs a " + std::string(k == 2 ? "[C, H, W] or [N, C, H, W]" : "[C, D, H, W] or [N, C, D, H, W]") +
                   " input and " + std::to_string(k) + " output sizes");
  // Each output position along a dim is a slice of its own.
  if (llvm::any_of(size, [](int64_t s) { return s > 4096; }))
    return n.error("adaptive pooling to more than 4096 positions along a dim");
  SmallVector<int64_t> expected(typeOf(self).getShape().take_front(size_t(rank - k)));
  expected.append(size.begin(), size.end());
  NCC_TRY(type, n.resultType());
  if (type.getShape() != ArrayRef<int64_t>(expected))
    return n.error("adaptive pooling to " + aten::shapeToString(expected) + ", the graph records " +
                   aten::shapeToString(type.getShape()));
  return size;
}

// _adaptive_avg_pool2d and _adaptive_avg_pool3d: each output cell averages
// the window adaptiveWindow gives in every spatial dim: per spatial dim in
// turn (moved last), the sums of the windows' slices, then divided by the
// windows' sizes. In f32 for reduced precision, rounded once; a NaN or inf
// stays in its windows.
LogicalResult adaptiveAvgPool(NodeImporter& n, int64_t k) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(size, adaptiveSizes(n, self, k));
  NCC_TRY(type, n.resultType());
  int64_t rank = typeOf(self).getRank(), lead = rank - k;
  Type compute = isReducedFloat(type.getElementType()) ? c.f32() : type.getElementType();
  Value x = c.cast(self, compute);
  SmallVector<int64_t> in(typeOf(x).getShape().drop_front(size_t(lead)));
  for (int64_t i = 0; i < k; ++i) {
    SmallVector<int64_t> swap;
    for (int64_t d = 0; d < rank; ++d) swap.push_back(d);
    std::swap(swap[size_t(lead + i)], swap.back());
    Value last = c.permute(x, swap);
    SmallVector<Value> sums;
    for (int64_t o = 0; o < size[i]; ++o) {
      auto [from, to] = adaptiveWindow(o, in[i], size[i]);
      sums.push_back(c.sum(c.slice(last, rank - 1, from, to), {rank - 1}, true));
    }
    x = c.permute(c.cat(sums, rank - 1), swap);
  }
  SmallVector<double> counts;
  forEachPosition(size, [&](ArrayRef<int64_t> at) {
    int64_t count = 1;
    for (int64_t i = 0; i < k; ++i) {
      auto [from, to] = adaptiveWindow(at[i], in[i], size[i]);
      count *= to - from;
    }
    counts.push_back(double(count));
  });
  return c.finish(c.div(x, c.constant(size, compute, counts)));
}

// adaptive_max_pool2d and adaptive_max_pool3d: per output cell, its window
// (adaptiveWindow in every spatial dim); the maximum (a NaN propagates)
// and, as eager's loop finds it, the first position of the maximum, or the
// last NaN's (positions flat over the spatial dims).
LogicalResult adaptiveMaxPool(NodeImporter& n, int64_t k) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(size, adaptiveSizes(n, self, k));
  int64_t cells = 1;
  for (int64_t s : size) cells *= s;
  if (cells > 4096) return n.error("adaptive max pooling to more than 4096 output cells");
  Value x = c.toFloat(self);
  int64_t rank = typeOf(x).getRank(), lead = rank - k;
  SmallVector<int64_t> in(typeOf(x).getShape().drop_front(size_t(lead)));
  int64_t spatial = 1;
  for (int64_t s : in) spatial *= s;
  SmallVector<int64_t> leadShape(typeOf(x).getShape().take_front(size_t(lead)));
  SmallVector<Value> values, indices;
  forEachPosition(size, [&](ArrayRef<int64_t> at) {
    Value cell = x;
    SmallVector<int64_t> from(k), to(k);
    for (int64_t i = 0; i < k; ++i) {
      std::tie(from[i], to[i]) = adaptiveWindow(at[i], in[i], size[i]);
      cell = c.slice(cell, lead + i, from[i], to[i]);
    }
    SmallVector<double> positions;
    SmallVector<int64_t> window;
    for (int64_t i = 0; i < k; ++i) window.push_back(to[i] - from[i]);
    forEachPosition(window, [&](ArrayRef<int64_t> w) {
      int64_t flat = 0;
      for (int64_t i = 0; i < k; ++i) flat = flat * in[i] + from[i] + w[i];
      positions.push_back(double(flat));
    });
    SmallVector<int64_t> flatShape(leadShape), posShape(size_t(lead), 1);
    flatShape.push_back(int64_t(positions.size()));
    posShape.push_back(int64_t(positions.size()));
    cell = c.reshape(cell, flatShape);
    Value pos = c.constant(posShape, c.f32(), positions);
    Value top = c.amax(cell, {lead}, true);
    Value firstTop = c.amin(c.where(c.compare<aten::EqTensorOp>(cell, top), pos, c.scalar(double(spatial), c.f32())),
                            {lead}, true);
    Value lastNan = c.amax(c.where(c.isNan(cell), pos, c.scalar(-1.0, c.f32())), {lead}, true);
    values.push_back(top);
    indices.push_back(c.where(c.compareScalar<aten::GeScalarOp>(lastNan, 0.0), lastNan, firstTop));
  });
  SmallVector<int64_t> shape(leadShape);
  shape.append(size.begin(), size.end());
  if (failed(c.finish(c.reshape(c.cat(values, lead), shape), 0))) return failure();
  if (n.node.outputs_size() < 2) return success();
  return c.finish(c.reshape(c.cat(indices, lead), shape), 1);
}

// Per-channel [C] values as [C, 1, ...] against an [N, C, ...] tensor.
Value perChannel(Composer& c, Value v, int64_t rank) {
  SmallVector<int64_t> shape{typeOf(v).getNumElements()};
  shape.append(size_t(std::max<int64_t>(rank - 2, 0)), 1);
  return c.reshape(v, shape);
}

// native_batch_norm: with running statistics (inference), x * scale + shift
// with scale = weight / sqrt(var + eps) and shift = bias - mean * scale per
// channel (folded when they are constants); in training mode, the batch's
// own statistics over every dim but the channels. The saved mean and
// inverse std (results 1 and 2) are the batch's, or empty in inference.
LogicalResult batchNorm(NodeImporter& n, bool legitNoTraining) {
  Composer c(n);
  NCC_TRY(input, n.tensor(0, "input"));
  NCC_TRY(weight, optionalTensor(n, 1, "weight"));
  NCC_TRY(bias, optionalTensor(n, 2, "bias"));
  NCC_TRY(runningMean, optionalTensor(n, 3, "running_mean"));
  NCC_TRY(runningVar, optionalTensor(n, 4, "running_var"));
  bool training = false;
  if (!legitNoTraining) {
    NCC_TRY(t, n.boolean(5, "training", false));
    training = t;
  }
  NCC_TRY(eps, n.number(legitNoTraining ? 6 : 7, "eps"));
  NCC_TRY(type, n.resultType());
  int64_t rank = typeOf(input).getRank();
  if (rank < 2) return n.error("batch norm needs an [N, C, ...] input");
  for (auto [v, what] : {std::pair<Value, const char*>{weight, "weight"}, {bias, "bias"}, {runningMean, "running_mean"},
                         {runningVar, "running_var"}})
    if (failed(checkChannels(n, v, typeOf(input).getDimSize(1), what))) return failure();
  Type elem = type.getElementType();
  if (!aten::isFloatType(elem)) return n.error("batch norm needs float tensors");
  // Reduced precision computes in f32 and rounds once, as eager does.
  Type stats = isReducedFloat(elem) ? c.f32() : elem;
  Value x = c.cast(input, stats);
  Value mean, invStd;
  if (training || !runningMean || !runningVar) {
    SmallVector<int64_t> dims{0};
    for (int64_t i = 2; i < rank; ++i) dims.push_back(i);
    auto st = RankedTensorType::get({typeOf(x).getDimSize(1)}, stats);
    auto vm = n.b.create<aten::VarMeanCorrectionOp>(n.loc, TypeRange{st, st}, x, n.b.getDenseI64ArrayAttr(dims),
                                                    n.b.getI64IntegerAttr(0), n.b.getBoolAttr(false));
    mean = vm.getMean();
    invStd = c.unary<aten::RsqrtOp>(c.addScalar(vm.getVar(), eps));
  } else {
    mean = c.cast(runningMean, stats);
    invStd = c.unary<aten::RsqrtOp>(c.addScalar(c.cast(runningVar, stats), eps));
  }
  Value scale = weight ? c.mul(invStd, c.cast(weight, stats)) : invStd;
  Value shift = c.unary<aten::NegOp>(c.mul(mean, scale));
  if (bias) shift = c.add(shift, c.cast(bias, stats));
  Value y = c.add(c.mul(x, perChannel(c, scale, rank)), perChannel(c, shift, rank));
  if (failed(c.finish(y, 0))) return failure();
  for (int r = 1; r < 3 && r < n.node.outputs_size(); ++r) {
    const graph::TensorMeta& m = n.node.outputs(r);
    SmallVector<int64_t> shape(m.shape().begin(), m.shape().end());
    Type t = elementType(m.dtype(), n.b.getContext());
    if (!t) return n.error("result has an unsupported dtype");
    if (llvm::any_of(shape, [](int64_t d) { return d == 0; })) {
      (void)c.define(c.constant(shape, t, {}), size_t(r));  // empty in inference: never read on the device
      continue;
    }
    if (failed(c.finish(r == 1 ? mean : invStd, size_t(r)))) return failure();
  }
  return success();
}

// native_group_norm: the channels split into groups, each normalized over its
// channels and positions (statistics in f32 for reduced precision), then the
// per-channel weight and bias; results 1 and 2 are the [N, groups] mean and
// inverse std.
LogicalResult groupNorm(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(input, n.tensor(0, "input"));
  NCC_TRY(weight, optionalTensor(n, 1, "weight"));
  NCC_TRY(bias, optionalTensor(n, 2, "bias"));
  NCC_TRY(groups, n.integer(6, "group"));
  NCC_TRY(eps, n.number(7, "eps"));
  NCC_TRY(type, n.resultType());
  auto it = typeOf(input);
  if (it.getRank() < 2) return n.error("group norm needs an [N, C, ...] input");
  int64_t batch = it.getDimSize(0), channels = it.getDimSize(1);
  if (groups < 1 || channels % groups != 0) return n.error("group norm: the channels do not divide into groups");
  if (failed(checkChannels(n, weight, channels, "weight")) || failed(checkChannels(n, bias, channels, "bias")))
    return failure();
  Type elem = type.getElementType();
  if (!aten::isFloatType(elem)) return n.error("group norm needs float tensors");
  Type stats = isReducedFloat(elem) ? c.f32() : elem;  // rounded once at the end, as eager
  const int64_t perGroup = channels / groups;
  const int64_t positions = it.getNumElements() / std::max<int64_t>(batch * channels, 1);
  // (Each cast after the view, so that it is an op of the kernel reading it.)
  Value x = c.cast(c.reshape(input, {batch, groups, perGroup * positions}), stats);
  auto st = RankedTensorType::get({batch, groups, 1}, stats);
  auto vm = n.b.create<aten::VarMeanCorrectionOp>(n.loc, TypeRange{st, st}, x, n.b.getDenseI64ArrayAttr({2}),
                                                  n.b.getI64IntegerAttr(0), n.b.getBoolAttr(true));
  Value invStd = c.unary<aten::RsqrtOp>(c.addScalar(vm.getVar(), eps));
  // As eager's kernel: per (sample, channel) scale = rstd * weight and
  // shift = bias - scale * mean, then x * scale + shift. Computed over
  // [N, G, C / G, spatial dims] (the input's rows, each group's statistics
  // a view broadcast over its channels), so that they are per-row values of
  // the kernel that normalizes: an expand of the [N, G] statistics to [N, C]
  // would be a copy each. The input is cast again there, so that neither
  // kernel reads an f32 copy of it, and the result is rounded before its
  // view as [N, C, ...], which keeps the rows, so that the ops after the
  // norm (its activation) may join its kernel.
  SmallVector<int64_t> grouped{batch, groups, perGroup}, statShape{batch, groups, 1}, channelShape{groups, perGroup};
  for (int64_t d : it.getShape().drop_front(2)) {
    grouped.push_back(d);
    statShape.push_back(1);
    channelShape.push_back(1);
  }
  auto perGroupStat = [&](Value v) { return c.reshape(v, statShape); };
  auto perChannel = [&](Value v) { return c.reshape(c.cast(v, stats), channelShape); };
  Value scale = perGroupStat(invStd);
  if (weight) scale = c.mul(scale, perChannel(weight));
  Value shift = c.unary<aten::NegOp>(c.mul(scale, perGroupStat(vm.getMean())));
  if (bias) shift = c.add(shift, perChannel(bias));
  Value y = c.cast(c.add(c.mul(c.cast(c.reshape(input, grouped), stats), scale), shift), elem);
  if (failed(c.finish(y, 0))) return failure();
  if (n.node.outputs_size() > 1 && failed(c.finish(vm.getMean(), 1))) return failure();
  if (n.node.outputs_size() > 2 && failed(c.finish(invStd, 2))) return failure();
  return success();
}

}  // namespace

void addComposedOps(std::map<std::string, Builder>& table) {
  auto add = [&](const char* name, Builder builder) { table.emplace(name, std::move(builder)); };
  add("aten::max.dim", [](NodeImporter& n) { return maxMinDim(n, true); });
  add("aten::min.dim", [](NodeImporter& n) { return maxMinDim(n, false); });
  add("aten::max", [](NodeImporter& n) { return extremum(n, std::nullopt, true, 0, -1); });
  add("aten::min", [](NodeImporter& n) { return extremum(n, std::nullopt, false, 0, -1); });
  add("aten::argmax", [](NodeImporter& n) { return argExtremum(n, true); });
  add("aten::argmin", [](NodeImporter& n) { return argExtremum(n, false); });
  add("aten::amin", amin);
  add("aten::var.correction", [](NodeImporter& n) { return varianceOrStd(n, false, 0); });
  add("aten::var.dim", [](NodeImporter& n) { return varianceOrStd(n, false, 1); });
  add("aten::var", [](NodeImporter& n) { return varianceOrStd(n, false, 2); });
  add("aten::std.correction", [](NodeImporter& n) { return varianceOrStd(n, true, 0); });
  add("aten::std.dim", [](NodeImporter& n) { return varianceOrStd(n, true, 1); });
  add("aten::std", [](NodeImporter& n) { return varianceOrStd(n, true, 2); });
  add("aten::linalg_vector_norm", [](NodeImporter& n) -> LogicalResult {
    NCC_TRY(self, n.tensor(0, "self"));
    NCC_TRY(ord, n.number(1, "ord", 2.0));
    NCC_TRY(dims, n.ints(2, "dim", SmallVector<int64_t>{}));
    NCC_TRY(keepdim, n.boolean(3, "keepdim", false));
    return pNorm(n, self, ord, dims, keepdim);
  });
  add("aten::norm.ScalarOpt_dim", [](NodeImporter& n) -> LogicalResult {
    NCC_TRY(self, n.tensor(0, "self"));
    NCC_TRY(p, n.number(1, "p", 2.0));
    NCC_TRY(dims, n.ints(2, "dim", SmallVector<int64_t>{}));
    NCC_TRY(keepdim, n.boolean(3, "keepdim", false));
    return pNorm(n, self, p, dims, keepdim);
  });
  add("aten::norm.Scalar", [](NodeImporter& n) -> LogicalResult {
    NCC_TRY(self, n.tensor(0, "self"));
    NCC_TRY(p, n.number(1, "p", 2.0));
    return pNorm(n, self, p, {}, false);
  });
  add("aten::any.dim", [](NodeImporter& n) { return anyOrAll(n, true, true); });
  add("aten::any", [](NodeImporter& n) { return anyOrAll(n, true, false); });
  add("aten::all.dim", [](NodeImporter& n) { return anyOrAll(n, false, true); });
  add("aten::all", [](NodeImporter& n) { return anyOrAll(n, false, false); });
  add("aten::reciprocal", reciprocal);
  add("aten::div.Tensor_mode", [](NodeImporter& n) { return roundedDivision(n, "div", false); });
  add("aten::div.Scalar_mode", [](NodeImporter& n) { return roundedDivision(n, "div", true); });
  add("aten::floor_divide", [](NodeImporter& n) { return roundedDivision(n, "floor", false); });
  add("aten::floor_divide.Scalar", [](NodeImporter& n) { return roundedDivision(n, "floor", true); });
  add("aten::remainder.Tensor", [](NodeImporter& n) { return roundedDivision(n, "remainder", false); });
  add("aten::remainder.Scalar", [](NodeImporter& n) { return roundedDivision(n, "remainder", true); });
  add("aten::fmod.Tensor", [](NodeImporter& n) { return roundedDivision(n, "fmod", false); });
  add("aten::fmod.Scalar", [](NodeImporter& n) { return roundedDivision(n, "fmod", true); });
  add("aten::round.decimals", roundDecimals);
  add("aten::pow.Tensor_Tensor", [](NodeImporter& n) { return powTensor(n, false); });
  add("aten::pow.Scalar", [](NodeImporter& n) { return powTensor(n, true); });
  add("aten::softplus", [](NodeImporter& n) { return activation(n, "softplus"); });
  add("aten::elu", [](NodeImporter& n) { return activation(n, "elu"); });
  add("aten::mish", [](NodeImporter& n) { return activation(n, "mish"); });
  add("aten::celu", [](NodeImporter& n) { return activation(n, "celu"); });
  add("aten::nan_to_num", nanToNum);
  add("aten::sign", sign);
  add("aten::sgn", sign);  // sign for real tensors
  add("aten::dist", [](NodeImporter& n) -> LogicalResult {
    Composer c(n);
    NCC_TRY(self, n.tensor(0, "self"));
    NCC_TRY(other, n.tensor(1, "other"));
    NCC_TRY(p, n.number(2, "p", 2.0));
    NCC_TRY(type, n.resultType());
    if (failed(checkBroadcast(n, {self, other}))) return failure();
    Type compute = isReducedFloat(type.getElementType()) ? c.f32() : c.floatOf(type.getElementType());
    return pNorm(n, c.sub(c.cast(self, compute), c.cast(other, compute)), p, {}, false);
  });
  for (const char* kind : {"isnan", "isinf", "isfinite", "isposinf", "isneginf"})
    add((std::string("aten::") + kind).c_str(), [kind](NodeImporter& n) { return floatClass(n, kind); });
  add("aten::clamp.Tensor", [](NodeImporter& n) { return clampTensor(n, 1, 2); });
  add("aten::clamp_min.Tensor", [](NodeImporter& n) { return clampTensor(n, 1, 0); });
  add("aten::clamp_max.Tensor", [](NodeImporter& n) { return clampTensor(n, 0, 1); });
  add("aten::lerp.Scalar", [](NodeImporter& n) { return lerp(n, false); });
  add("aten::lerp.Tensor", [](NodeImporter& n) { return lerp(n, true); });
  add("aten::constant_pad_nd", constantPad);
  add("aten::repeat", repeat);
  add("aten::roll", roll);
  add("aten::flip", flip);
  add("aten::rot90", rot90);
  add("aten::upsample_bicubic2d.vec", [](NodeImporter& n) { return upsampleInterpolated(n, true, 2, true); });
  add("aten::upsample_bicubic2d", [](NodeImporter& n) { return upsampleInterpolated(n, false, 2, true); });
  add("aten::index_select", indexSelect);
  add("aten::index.Tensor", indexTensor);
  add("aten::gather", gather);
  add("aten::cumsum", cumsum);
  add("aten::unfold", unfold);
  add("aten::rsub.Tensor", [](NodeImporter& n) -> LogicalResult {  // other - alpha * self
    Composer c(n);
    NCC_TRY(self, n.tensor(0, "self"));
    NCC_TRY(other, n.tensor(1, "other"));
    NCC_TRY(alpha, n.number(2, "alpha", 1.0));
    if (failed(checkBroadcast(n, {self, other}))) return failure();
    return c.finish(c.sub(other, self, alpha));
  });
  add("aten::baddbmm", [](NodeImporter& n) { return baddbmm(n, false); });
  add("aten::addbmm", [](NodeImporter& n) { return baddbmm(n, true); });
  add("aten::convolution", convolution);
  add("aten::max_pool2d_with_indices", [](NodeImporter& n) { return maxPool(n, 2); });
  add("aten::max_pool3d_with_indices", [](NodeImporter& n) { return maxPool(n, 3); });
  add("aten::avg_pool2d", [](NodeImporter& n) { return avgPool(n, 2); });
  add("aten::avg_pool3d", [](NodeImporter& n) { return avgPool(n, 3); });
  add("aten::_adaptive_avg_pool2d", [](NodeImporter& n) { return adaptiveAvgPool(n, 2); });
  add("aten::_adaptive_avg_pool3d", [](NodeImporter& n) { return adaptiveAvgPool(n, 3); });
  add("aten::adaptive_max_pool2d", [](NodeImporter& n) { return adaptiveMaxPool(n, 2); });
  add("aten::adaptive_max_pool3d", [](NodeImporter& n) { return adaptiveMaxPool(n, 3); });
  add("aten::im2col", im2col);
  add("aten::grid_sampler_2d", gridSampler2d);
  add("aten::col2im", col2im);
  for (int64_t k : {1, 2, 3}) {
    std::string nearest = "aten::upsample_nearest" + std::to_string(k) + "d";
    std::string linear = std::string("aten::upsample_") + (k == 1 ? "linear1d" : k == 2 ? "bilinear2d" : "trilinear3d");
    add((nearest + ".vec").c_str(), [k](NodeImporter& n) { return upsampleNearest(n, true, k); });
    add(nearest.c_str(), [k](NodeImporter& n) { return upsampleNearest(n, false, k); });
    add((linear + ".vec").c_str(), [k](NodeImporter& n) { return upsampleInterpolated(n, true, k, false); });
    add(linear.c_str(), [k](NodeImporter& n) { return upsampleInterpolated(n, false, k, false); });
  }
  add("aten::native_batch_norm", [](NodeImporter& n) { return batchNorm(n, false); });
  add("aten::_native_batch_norm_legit_no_training", [](NodeImporter& n) { return batchNorm(n, true); });
  add("aten::native_group_norm", groupNorm);
}

}  // namespace neuroncc::importer
