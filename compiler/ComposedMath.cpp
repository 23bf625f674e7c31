//===- ComposedMath.cpp - math operators imported as compositions ---------===//
//
// Elementwise functions (hyperbolic, base-2 logarithms, xlogy, hypot, ...),
// gated and thresholded activations, products and scans (prod, cumprod,
// cummax, logcumsumexp), diagonals, matrix-vector forms and the losses,
// each built from ops that have their own lowering (ComposedOps.cpp has the
// reductions, shape ops, convolution and pooling). Reduced precision is
// computed in f32 and rounded once, as eager's CPU kernels compute it; the
// integer results computed in f32 are exact below 2^24.
//
//===----------------------------------------------------------------------===//

#include <cmath>
#include <limits>
#include <numeric>

#include "compiler/Composer.h"

namespace neuroncc::importer {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kLn2 = 0.69314718055994530942;
constexpr double kLn10 = 2.30258509299404568402;

// The dtype a float function computes in: f32 for bf16/f16 (rounded once at
// the end) and for integer or bool results; the result's own otherwise.
Type computeTypeOf(Composer& c, Type result) {
  return isReducedFloat(result) ? c.f32() : c.floatOf(result);
}

// x < 0, or x is -0.0 (whose reciprocal is -inf). A NaN's sign bit is not
// observable here: a NaN counts as positive.
Value signBit(Composer& c, Value x) {
  if (!aten::isFloatType(typeOf(x).getElementType())) return c.compareScalar<aten::LtScalarOp>(x, 0.0);
  Value negativeZero = c.logicalAnd(c.compareScalar<aten::EqScalarOp>(x, 0.0),
                                    c.compareScalar<aten::LtScalarOp>(c.div(c.scalar(1.0, typeOf(x).getElementType()), x), 0.0));
  return c.logicalOr(c.compareScalar<aten::LtScalarOp>(x, 0.0), negativeZero);
}

//===----------------------------------------------------------------------===//
// Elementwise functions
//===----------------------------------------------------------------------===//

// Unary float functions from exp/expm1/log/log1p/sqrt/sin/cos/pow:
//   log2(x) = log(x) / ln 2, log10(x) = log(x) / ln 10, exp2(x) = pow(2, x)
//   (exact at integers), sinh(x) = (expm1(x) - expm1(-x)) / 2 (accurate near
//   0), cosh(x) = (exp(x) + exp(-x)) / 2, tan(x) = sin(x) / cos(x),
//   asinh(x) = sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2))) (log|x| + ln 2
//   above 2^12), acosh(x) = log1p(t + sqrt(t (t + 2))) with t = x - 1
//   (log x + ln 2 above 2^12), atanh(x) = log1p(2x / (1 - x)) / 2,
//   frac(x) = x - trunc(x), deg2rad/rad2deg: a product with pi/180 or 180/pi;
//   sinc(x) = sin(pi x) / (pi x), 1 at 0 (pi x rounded to bf16 for bf16, as
//   torch 1.13's kernel; else in f32);
//   special_entr(x) = -x log x (0 at
//   0, -inf below, NaN kept); angle(x) = pi below 0, else 0 (NaN kept);
//   from atan: asin(x) = atan(x / sqrt((1 - x)(1 + x))) (+-pi/2 at +-1, NaN
//   beyond), acos(x) = 2 atan(sqrt((1 - x) / (1 + x))) (no cancellation
//   near 1, where pi/2 - asin(x) would lose the result's digits; pi at -1).
// exp(x^2) * erfc(x) for x >= 0 (erfcx), and the exponent it drops: the
// Chebyshev fit of Press et al., "Numerical Recipes in C" (2nd ed.), 6.2,
// `erfcc`, whose fractional error is below 1.2e-7 for every x:
// t = 1 / (1 + x / 2), erfc(x) = t * exp(-x^2 + P(t)) with P of degree 9.
// Keeping exp(-x^2) apart keeps erfc's tail (1.5e-12 at x = 5) and erfcx
// for large x, which 1 - erf(x) would lose.
struct ScaledErfc {
  Value t, exponent;  // erfc(x) = t * exp(exponent - x^2)
};
ScaledErfc scaledErfc(Composer& c, Value z) {
  static constexpr double kP[] = {-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
                                  0.27886807,  -1.13520398, 1.48851587, -0.82215223, 0.17087277};
  Type elem = typeOf(z).getElementType();
  Value t = c.div(c.scalar(1.0, elem), c.addScalar(c.mulScalar(z, 0.5), 1.0));
  Value p = c.scalar(kP[9], elem);
  for (int i = 8; i >= 0; --i) p = c.addScalar(c.mul(p, t), kP[i]);
  return {t, p};
}

Value erfcOf(Composer& c, Value x) {
  Value z = c.unary<aten::AbsOp>(x);
  ScaledErfc e = scaledErfc(c, z);
  Value tail = c.mul(e.t, c.unary<aten::ExpOp>(c.sub(e.exponent, c.mul(z, z))));
  return c.where(c.compareScalar<aten::LtScalarOp>(x, 0.0), c.sub(c.scalar(2.0, typeOf(x).getElementType()), tail), tail);
}

Value erfcxOf(Composer& c, Value x) {
  ScaledErfc e = scaledErfc(c, c.unary<aten::AbsOp>(x));
  Value scaled = c.mul(e.t, c.unary<aten::ExpOp>(e.exponent));
  Value negative = c.sub(c.mulScalar(c.unary<aten::ExpOp>(c.mul(x, x)), 2.0), scaled);  // 2 exp(x^2) - erfcx(|x|)
  return c.where(c.compareScalar<aten::LtScalarOp>(x, 0.0), negative, scaled);
}

// sin(pi x) and cos(pi x) from x's distance to its nearest whole number
// (exact in floating point), so that large |x| keeps its digits.
std::pair<Value, Value> sinCosPi(Composer& c, Value x) {
  Value r = c.mulScalar(c.sub(x, c.unary<aten::RoundOp>(x)), kPi);
  Value parity = c.sub(c.unary<aten::RoundOp>(x), c.mulScalar(c.unary<aten::FloorOp>(c.mulScalar(c.unary<aten::RoundOp>(x), 0.5)), 2.0));
  Value sign = c.where(c.compareScalar<aten::EqScalarOp>(parity, 0.0), c.scalar(1.0, typeOf(x).getElementType()),
                       c.scalar(-1.0, typeOf(x).getElementType()));
  return {c.mul(sign, c.unary<aten::SinOp>(r)), c.mul(sign, c.unary<aten::CosOp>(r))};
}

// lgamma: for x >= 0.5 the Lanczos approximation of "Numerical Recipes in
// C", 6.1 (`gammln`, g = 5, six terms, error below 2e-10), below it the
// reflection lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x); +-inf give
// +inf and the poles (0, -1, ...) +inf, as std::lgamma.
Value lgammaOf(Composer& c, Value x) {
  static constexpr double kCof[] = {76.18009172947146,     -86.50532032941677,     24.01409824083091,
                                    -1.231739572450155,    0.1208650973866179e-2, -0.5395239384953e-5};
  Type elem = typeOf(x).getElementType();
  Value reflect = c.compareScalar<aten::LtScalarOp>(x, 0.5);
  Value y = c.where(reflect, c.sub(c.scalar(1.0, elem), x), x);  // >= 0.5
  Value series = c.scalar(1.000000000190015, elem);
  for (int j = 0; j < 6; ++j) series = c.add(series, c.div(c.scalar(kCof[j], elem), c.addScalar(y, double(j + 1))));
  Value shifted = c.addScalar(y, 5.5);
  Value direct = c.add(c.sub(c.mul(c.addScalar(y, 0.5), c.unary<aten::LogOp>(shifted)), shifted),
                       c.unary<aten::LogOp>(c.div(c.mulScalar(series, 2.5066282746310005), y)));
  Value sine = c.unary<aten::AbsOp>(sinCosPi(c, x).first);
  Value reflected = c.sub(c.unary<aten::LogOp>(c.div(c.scalar(kPi, elem), sine)), direct);
  Value value = c.where(reflect, reflected, direct);
  return c.where(c.compareScalar<aten::EqScalarOp>(c.unary<aten::AbsOp>(x), kInf), c.scalar(kInf, elem), value);
}

// digamma, as torch's calc_digamma: -inf at +0 and +inf at -0, NaN at the
// negative whole numbers; x > 0 through psi(x) = psi(x + 6) - sum 1/(x + k)
// (k < 6) and the asymptotic series at x + 6 (to 1/y^10: below 2e-10);
// other negative x by the reflection psi(x) = psi(1 - x) - pi / tan(pi x).
Value digammaOf(Composer& c, Value x) {
  Type elem = typeOf(x).getElementType();
  Value negative = c.compareScalar<aten::LtScalarOp>(x, 0.0);
  Value p = c.where(negative, c.sub(c.scalar(1.0, elem), x), x);  // > 0
  Value y = c.addScalar(p, 6.0);
  Value inv = c.div(c.scalar(1.0, elem), y), inv2 = c.mul(inv, inv);
  // ln y - 1/(2y) - B2/(2 y^2) - B4/(4 y^4) - ...: 1/12, -1/120, 1/252, -1/240, 1/132
  Value tail = c.scalar(-1.0 / 132, elem);
  for (double b : {1.0 / 240, -1.0 / 252, 1.0 / 120, -1.0 / 12}) tail = c.addScalar(c.mul(tail, inv2), b);
  Value psi = c.add(c.sub(c.unary<aten::LogOp>(y), c.mulScalar(inv, 0.5)), c.mul(tail, inv2));
  for (int k = 5; k >= 0; --k) psi = c.sub(psi, c.div(c.scalar(1.0, elem), c.addScalar(p, double(k))));
  auto [sine, cosine] = sinCosPi(c, x);
  Value reflected = c.sub(psi, c.mulScalar(c.div(cosine, sine), kPi));
  Value value = c.where(negative, reflected, psi);
  Value whole = c.logicalAnd(negative, c.compare<aten::EqTensorOp>(x, c.unary<aten::TruncOp>(x)));
  value = c.where(whole, c.scalar(std::numeric_limits<double>::quiet_NaN(), elem), value);
  Value pole = c.where(signBit(c, x), c.scalar(kInf, elem), c.scalar(-kInf, elem));
  return c.where(c.compareScalar<aten::EqScalarOp>(x, 0.0), pole, value);
}

LogicalResult unaryMath(NodeImporter& n, StringRef kind) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(type, n.resultType());
  if (!aten::isFloatType(type.getElementType()))
    return n.error(kind.str() + " needs a float result");
  Type compute = computeTypeOf(c, type.getElementType());
  Value x = c.cast(self, compute);
  auto half = [&](Value v) { return c.mulScalar(v, 0.5); };
  Value ln2 = c.scalar(kLn2, compute);
  if (kind == "log2") return c.finish(c.mulScalar(c.unary<aten::LogOp>(x), 1.0 / kLn2));
  if (kind == "log10") return c.finish(c.mulScalar(c.unary<aten::LogOp>(x), 1.0 / kLn10));
  if (kind == "exp2") return c.finish(c.binary<aten::PowTensorTensorOp>(c.scalar(2.0, compute), x));
  if (kind == "sinh") {
    Value nx = c.unary<aten::NegOp>(x);
    return c.finish(half(c.sub(c.unary<aten::Expm1Op>(x), c.unary<aten::Expm1Op>(nx))));
  }
  if (kind == "cosh")
    return c.finish(half(c.add(c.unary<aten::ExpOp>(x), c.unary<aten::ExpOp>(c.unary<aten::NegOp>(x)))));
  if (kind == "tan") return c.finish(c.div(c.unary<aten::SinOp>(x), c.unary<aten::CosOp>(x)));
  if (kind == "asinh") {
    Value a = c.unary<aten::AbsOp>(x);
    Value sq = c.mul(a, a);
    Value small = c.unary<aten::Log1pOp>(
        c.add(a, c.div(sq, c.addScalar(c.unary<aten::SqrtOp>(c.addScalar(sq, 1.0)), 1.0))));
    Value large = c.add(c.unary<aten::LogOp>(a), ln2);
    Value magnitude = c.where(c.compareScalar<aten::GtScalarOp>(a, 4096.0), large, small);
    return c.finish(c.where(signBit(c, x), c.unary<aten::NegOp>(magnitude), magnitude));
  }
  if (kind == "acosh") {
    Value t = c.addScalar(x, -1.0);
    Value small = c.unary<aten::Log1pOp>(c.add(t, c.unary<aten::SqrtOp>(c.mul(t, c.addScalar(t, 2.0)))));
    Value large = c.add(c.unary<aten::LogOp>(x), ln2);
    return c.finish(c.where(c.compareScalar<aten::GtScalarOp>(x, 4096.0), large, small));
  }
  if (kind == "atanh") {
    Value ratio = c.div(c.mulScalar(x, 2.0), c.sub(c.scalar(1.0, compute), x));
    return c.finish(half(c.unary<aten::Log1pOp>(ratio)));
  }
  if (kind == "asin") {
    Value one = c.scalar(1.0, compute);
    Value cosine = c.unary<aten::SqrtOp>(c.mul(c.sub(one, x), c.add(one, x)));
    return c.finish(c.unary<aten::AtanOp>(c.div(x, cosine)));
  }
  if (kind == "acos") {
    Value one = c.scalar(1.0, compute);
    Value halfTangent = c.unary<aten::SqrtOp>(c.div(c.sub(one, x), c.add(one, x)));
    return c.finish(c.mulScalar(c.unary<aten::AtanOp>(halfTangent), 2.0));
  }
  if (kind == "sinc") {
    // Torch 1.13's bf16 kernel forms pi * x in bf16 (pi and the product
    // rounded), then sin(product) / product in float32; f16 (which that CPU
    // build lacks) and f32 form the product in float32, as later PyTorch
    // does for every dtype: rounded to f16, pi * x near an integer loses the
    // digits that sin keeps (0.8% off float64 at x = 1.0078, found by
    // graph_fuzz).
    Value product = typeOf(self).getElementType().isBF16()
                        ? c.cast(c.mulScalar(self, asTensorScalar(kPi, self)), compute)
                        : c.mulScalar(x, kPi);
    return c.finish(c.where(c.compareScalar<aten::EqScalarOp>(x, 0.0), c.scalar(1.0, compute),
                            c.div(c.unary<aten::SinOp>(product), product)));
  }
  if (kind == "special_entr") {
    Value value = c.unary<aten::NegOp>(c.mul(x, c.unary<aten::LogOp>(x)));
    value = c.where(c.compareScalar<aten::EqScalarOp>(x, 0.0), c.scalar(0.0, compute), value);
    value = c.where(c.compareScalar<aten::LtScalarOp>(x, 0.0), c.scalar(-kInf, compute), value);
    return c.finish(c.where(c.isNan(x), x, value));
  }
  if (kind == "angle") {
    Value value = c.where(c.compareScalar<aten::LtScalarOp>(x, 0.0), c.scalar(kPi, compute), c.scalar(0.0, compute));
    return c.finish(c.where(c.isNan(x), x, value));
  }
  if (kind == "erfc") return c.finish(erfcOf(c, x));
  if (kind == "special_erfcx") return c.finish(erfcxOf(c, x));
  if (kind == "special_ndtr") return c.finish(c.mulScalar(erfcOf(c, c.mulScalar(x, -M_SQRT1_2)), 0.5));
  if (kind == "special_log_ndtr") {
    // torch's calc_log_ndtr: log(erfcx(-t) / 2) - t^2 below x = -1, else
    // log1p(-erfc(t) / 2), t = x / sqrt(2)
    Value t = c.mulScalar(x, M_SQRT1_2);
    Value low = c.sub(c.unary<aten::LogOp>(c.mulScalar(erfcxOf(c, c.unary<aten::NegOp>(t)), 0.5)), c.mul(t, t));
    Value high = c.unary<aten::Log1pOp>(c.mulScalar(erfcOf(c, t), -0.5));
    return c.finish(c.where(c.compareScalar<aten::LtScalarOp>(x, -1.0), low, high));
  }
  if (kind == "lgamma") return c.finish(lgammaOf(c, x));
  if (kind == "digamma") return c.finish(digammaOf(c, x));
  if (kind == "frac") return c.finish(c.sub(x, c.unary<aten::TruncOp>(x)));
  if (kind == "deg2rad") return c.finish(c.mulScalar(x, kPi / 180.0));
  if (kind == "rad2deg") return c.finish(c.mulScalar(x, 180.0 / kPi));
  return n.error("unknown function " + kind.str());
}

// mvlgamma(x, p): the multivariate log-gamma, sum over j < p of
// lgamma(x - j / 2) plus p (p - 1) / 4 log(pi).
LogicalResult mvlgamma(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(p, n.integer(1, "p"));
  NCC_TRY(type, n.resultType());
  if (p < 1 || p > 1024) return n.error("mvlgamma needs 1 <= p <= 1024");
  if (!aten::isFloatType(type.getElementType())) return n.error("mvlgamma needs a float result");
  Value x = c.cast(self, computeTypeOf(c, type.getElementType()));
  Value sum = lgammaOf(c, x);
  for (int64_t j = 1; j < p; ++j) sum = c.add(sum, lgammaOf(c, c.addScalar(x, -0.5 * double(j))));
  return c.finish(c.addScalar(sum, double(p) * double(p - 1) / 4.0 * std::log(kPi)));
}

LogicalResult signbit(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  if (typeOf(self).getElementType().isInteger(1)) return c.finish(c.splat(typeOf(self).getShape(), c.i1(), 0));
  return c.finish(signBit(c, self));
}

// Two float operands (a Scalar where `scalarPos` says which), cast to the
// result's compute dtype after the broadcast check.
FailureOr<std::pair<Value, Value>> floatPair(NodeImporter& n, Composer& c, Type compute, int scalarPos,
                                             StringRef first, StringRef second) {
  Value x, y;
  if (scalarPos == 0) {
    NCC_TRY(s, n.number(0, first));
    x = c.scalar(s, compute);
  } else {
    NCC_TRY(t, n.tensor(0, first));
    x = t;
  }
  if (scalarPos == 1) {
    NCC_TRY(s, n.number(1, second));
    y = c.scalar(asTensorScalar(s, x), compute);
  } else {
    NCC_TRY(t, n.tensor(1, second));
    y = t;
  }
  if (failed(checkBroadcast(n, {x, y}))) return failure();
  return std::make_pair(c.cast(x, compute), c.cast(y, compute));
}

// Binary float functions, as eager's kernels define them:
//   xlogy(x, y) = NaN if y is NaN, 0 if x == 0, x * log(y) otherwise;
//   hypot(a, b) = m * sqrt(1 + (s / m)^2) with m = max(|a|, |b|), s the
//     other (no overflow of the squares; inf when either is inf, NaN
//     included; 0 when both are 0);
//   copysign(a, b) = |a| with b's sign bit;
//   fmax / fmin: the maximum / minimum, a NaN only when both are NaN;
//   heaviside(x, v) = v where x == 0, else x > 0 (0 for NaN);
//   logaddexp(a, b) = m + log1p(exp(-|a - b|)), m = max(a, b), a where both
//     are the same infinity; logaddexp2 the same in base 2;
//   special_xlog1py(x, y) = NaN if y is NaN, 0 if x == 0, x * log1p(y);
//   atan2(y, x): a = atan(|y| / |x|) in [0, pi/2] (0 where both are zero,
//     pi/4 where both are infinite), pi - a where x's sign bit is set, then
//     y's sign bit: so +-0 and +-inf give C's atan2 results, NaN gives NaN.
LogicalResult binaryMath(NodeImporter& n, StringRef kind, int scalarPos = -1) {
  Composer c(n);
  NCC_TRY(type, n.resultType());
  if (!aten::isFloatType(type.getElementType()) && kind != "fmax" && kind != "fmin" && kind != "heaviside")
    return n.error(kind.str() + " needs a float result");
  Type compute = computeTypeOf(c, type.getElementType());
  NCC_TRY(xy, floatPair(n, c, compute, scalarPos, "self", kind == "heaviside" ? "values" : "other"));
  auto [x, y] = xy;
  Value zero = c.scalar(0.0, compute);
  if (kind == "xlogy") {
    Value r = c.where(c.compareScalar<aten::EqScalarOp>(x, 0.0), zero, c.mul(x, c.unary<aten::LogOp>(y)));
    return c.finish(c.where(c.isNan(y), c.scalar(std::nan(""), compute), r));
  }
  if (kind == "special_xlog1py") {
    Value r = c.where(c.compareScalar<aten::EqScalarOp>(x, 0.0), zero, c.mul(x, c.unary<aten::Log1pOp>(y)));
    return c.finish(c.where(c.isNan(y), c.scalar(std::nan(""), compute), r));
  }
  if (kind == "logaddexp" || kind == "logaddexp2") {
    Value m = c.maximum(x, y), gap = c.unary<aten::NegOp>(c.unary<aten::AbsOp>(c.sub(x, y)));
    Value tail = kind == "logaddexp"
                     ? c.unary<aten::Log1pOp>(c.unary<aten::ExpOp>(gap))
                     : c.mulScalar(c.unary<aten::Log1pOp>(c.binary<aten::PowTensorTensorOp>(c.scalar(2.0, compute), gap)),
                                   1.0 / kLn2);
    Value sameInfinity = c.logicalAnd(c.compare<aten::EqTensorOp>(x, y),
                                      c.compareScalar<aten::EqScalarOp>(c.unary<aten::AbsOp>(x), kInf));
    return c.finish(c.where(sameInfinity, x, c.add(m, tail)));
  }
  if (kind == "hypot") {
    Value a = c.unary<aten::AbsOp>(x), b = c.unary<aten::AbsOp>(y);
    Value big = c.maximum(a, b), small = c.minimum(a, b);
    Value ratio = c.div(small, big);
    Value r = c.mul(big, c.unary<aten::SqrtOp>(c.addScalar(c.mul(ratio, ratio), 1.0)));
    r = c.where(c.compareScalar<aten::EqScalarOp>(big, 0.0), zero, r);
    Value anyInf = c.logicalOr(c.compareScalar<aten::EqScalarOp>(a, kInf), c.compareScalar<aten::EqScalarOp>(b, kInf));
    return c.finish(c.where(anyInf, c.scalar(kInf, compute), r));
  }
  if (kind == "copysign") {
    Value a = c.unary<aten::AbsOp>(x);
    return c.finish(c.where(signBit(c, y), c.unary<aten::NegOp>(a), a));
  }
  if (kind == "fmax" || kind == "fmin") {
    Value m = kind == "fmax" ? c.maximum(x, y) : c.minimum(x, y);
    return c.finish(c.where(c.isNan(x), y, c.where(c.isNan(y), x, m)));
  }
  if (kind == "atan2") {
    Value ordinate = x, abscissa = y;  // atan2(self, other): self is the y coordinate
    Value ay = c.unary<aten::AbsOp>(ordinate), ax = c.unary<aten::AbsOp>(abscissa);
    Value a = c.unary<aten::AtanOp>(c.div(ay, ax));
    auto both = [&](double v) {
      return c.logicalAnd(c.compareScalar<aten::EqScalarOp>(ay, v), c.compareScalar<aten::EqScalarOp>(ax, v));
    };
    a = c.where(both(0.0), zero, c.where(both(kInf), c.scalar(kPi / 4, compute), a));
    a = c.where(signBit(c, abscissa), c.sub(c.scalar(kPi, compute), a), a);
    return c.finish(c.where(signBit(c, ordinate), c.unary<aten::NegOp>(a), a));
  }
  if (kind == "heaviside") {
    Value step = c.where(c.compareScalar<aten::GtScalarOp>(x, 0.0), c.scalar(1.0, compute), zero);
    return c.finish(c.where(c.compareScalar<aten::EqScalarOp>(x, 0.0), y, step));
  }
  return n.error("unknown function " + kind.str());
}

// logit(x, eps) = log(z / (1 - z)), z = x clamped to [eps, 1 - eps] when eps
// is given (NaN passes through the clamp, as in eager).
LogicalResult logit(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(type, n.resultType());
  Type compute = computeTypeOf(c, type.getElementType());
  Value x = c.cast(self, compute);
  const Argument* epsArg = n.arg(1, "eps");
  if (epsArg && epsArg->value_case() != Argument::kNone) {
    NCC_TRY(eps, n.number(1, "eps"));
    Value lo = c.scalar(eps, compute), hi = c.scalar(1.0 - eps, compute);
    x = c.where(c.compareScalar<aten::LtScalarOp>(x, eps), lo, c.where(c.compareScalar<aten::GtScalarOp>(x, 1.0 - eps), hi, x));
  }
  return c.finish(c.unary<aten::LogOp>(c.div(x, c.sub(c.scalar(1.0, compute), x))));
}

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

// glu(x, dim) = a * sigmoid(b), a and b the halves of x along dim.
LogicalResult glu(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(dim0, n.integer(1, "dim", -1));
  int64_t rank = typeOf(self).getRank();
  if (rank == 0) return n.error("glu of a 0-d tensor");
  if (failed(checkDims(n, {dim0}, rank))) return failure();
  int64_t dim = normalizeDim(dim0, rank), size = typeOf(self).getDimSize(dim);
  if (size % 2) return n.error("glu halves dim " + std::to_string(dim) + " of odd size " + std::to_string(size));
  Value x = c.toFloat(self);
  Value a = c.slice(x, dim, 0, size / 2), b = c.slice(x, dim, size / 2, size);
  return c.finish(c.mul(a, c.unary<aten::SigmoidOp>(b)));
}

// prelu(x, w) = x > 0 ? x : w * x, w one value or one per channel (dim 1).
LogicalResult prelu(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(weight, n.tensor(1, "weight"));
  int64_t rank = typeOf(self).getRank(), count = typeOf(weight).getNumElements();
  Value w = c.cast(weight, typeOf(self).getElementType());
  if (count == 1) {
    w = c.reshape(w, {});
  } else {
    if (rank < 2 || typeOf(self).getDimSize(1) != count)
      return n.error("prelu weight of " + std::to_string(count) + " elements needs an input with as many channels (dim 1)");
    SmallVector<int64_t> shape(rank, 1);
    shape[1] = count;
    w = c.reshape(w, shape);
  }
  return c.finish(c.where(c.compareScalar<aten::GtScalarOp>(self, 0.0), self, c.mul(w, self)));
}

// log_sigmoid_forward: (min(x, 0) - log1p(exp(-|x|)), exp(-|x|)) as eager's
// CPU kernel computes the output and its buffer.
LogicalResult logSigmoid(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(type, n.resultType());
  Value x = c.cast(self, computeTypeOf(c, type.getElementType()));
  Value z = c.unary<aten::ExpOp>(c.unary<aten::NegOp>(c.unary<aten::AbsOp>(x)));
  Value out = c.sub(c.minimum(x, c.scalar(0.0, typeOf(x).getElementType())), c.unary<aten::Log1pOp>(z));
  if (failed(c.finish(out, 0))) return failure();
  if (n.node.outputs_size() > 1) return c.finish(z, 1);
  return success();
}

// threshold(x, t, v) = x <= t ? v : x (NaN stays).
LogicalResult threshold(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(t, n.numberAsResult(1, "threshold"));
  NCC_TRY(v, n.numberAsResult(2, "value"));
  Type elem = typeOf(self).getElementType();
  Value value = c.scalar(asTensorScalar(v, self), elem);
  return c.finish(c.where(c.compareScalar<aten::LeScalarOp>(self, asTensorScalar(t, self)), value, self));
}

// hardshrink(x, l) = 0 where -l <= x <= l, else x (a NaN stays NaN);
// softshrink(x, l) = x - l above l, x + l below -l, else +0 (a NaN too), as
// eager's kernels: hardshrink's l rounded to the tensor's dtype, softshrink's
// a float32.
LogicalResult shrink(NodeImporter& n, bool soft) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(l0, n.number(1, "lambd", 0.5));
  NCC_TRY(type, n.resultType());
  if (!aten::isFloatType(type.getElementType())) return n.error("shrink needs a float tensor");
  double l = soft ? l0 : asTensorScalar(l0, self);
  Type compute = computeTypeOf(c, type.getElementType());
  Value x = c.cast(self, compute);
  if (!soft) {
    Value inside = c.logicalAnd(c.compareScalar<aten::GeScalarOp>(x, -l), c.compareScalar<aten::LeScalarOp>(x, l));
    return c.finish(c.where(inside, c.scalar(0.0, compute), x));
  }
  Value above = c.compareScalar<aten::GtScalarOp>(x, l), below = c.compareScalar<aten::LtScalarOp>(x, -l);
  Value inside = c.scalar(0.0, compute);
  return c.finish(c.where(above, c.addScalar(x, -l), c.where(below, c.addScalar(x, l), inside)));
}

// rrelu_with_noise in inference (training = false): leaky_relu with the
// mean slope (lower + upper) / 2, as eager; in training its slopes are random.
LogicalResult rreluInference(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(lower, n.number(2, "lower", 1.0 / 8));
  NCC_TRY(upper, n.number(3, "upper", 1.0 / 3));
  NCC_TRY(training, n.boolean(4, "training", false));
  if (training) return n.error("rrelu in training mode draws a random slope per element: not supported");
  NCC_TRY(type, n.resultType());
  if (!aten::isFloatType(type.getElementType())) return n.error("rrelu needs a float tensor");
  Type compute = computeTypeOf(c, type.getElementType());
  Value x = c.cast(self, compute);
  Value slope = c.mulScalar(x, (lower + upper) / 2);
  return c.finish(c.where(c.compareScalar<aten::GtScalarOp>(x, 0.0), x, slope));
}

//===----------------------------------------------------------------------===//
// Products and scans
//===----------------------------------------------------------------------===//

// prod (all elements, or one dim): in f32 for reduced precision, integers
// and bools (exact below 2^24), rounded once.
LogicalResult prod(NodeImporter& n, bool hasDim) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(type, n.resultType());
  Value x = c.cast(c.inIntegerResultDtype(self, type.getElementType()), computeTypeOf(c, type.getElementType()));
  if (!hasDim || typeOf(x).getRank() == 0) {
    x = c.reshape(x, {typeOf(x).getNumElements()});
    if (typeOf(x).getDimSize(0) == 0) return c.finish(c.splat({}, typeOf(x).getElementType(), 1.0));
    return c.finish(productAlong(c, x, 0));
  }
  NCC_TRY(dim0, n.integer(1, "dim"));
  if (failed(checkDims(n, {dim0}, typeOf(x).getRank()))) return failure();
  return c.finish(productAlong(c, x, normalizeDim(dim0, typeOf(x).getRank())));
}

// logaddexp(a, b) = max + log1p(exp(-|a - b|)); equal infinities give
// themselves (their difference is NaN), as eager's helper returns.
Value logAddExp(Composer& c, Value a, Value b) {
  Value r = c.add(c.maximum(a, b),
                  c.unary<aten::Log1pOp>(c.unary<aten::ExpOp>(c.unary<aten::NegOp>(c.unary<aten::AbsOp>(c.sub(a, b)))))); 
  Value sameInf = c.logicalAnd(c.compare<aten::EqTensorOp>(a, b),
                               c.compareScalar<aten::EqScalarOp>(c.unary<aten::AbsOp>(a), kInf));
  return c.where(sameInf, a, r);
}

// cumprod, logcumsumexp: scans in the compute dtype, rounded once.
LogicalResult scanOp(NodeImporter& n, StringRef kind) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(dim0, n.integer(1, "dim"));
  NCC_TRY(type, n.resultType());
  if (failed(checkDims(n, {dim0}, typeOf(self).getRank()))) return failure();
  Value x = c.cast(c.inIntegerResultDtype(self, type.getElementType()), computeTypeOf(c, type.getElementType()));
  if (typeOf(x).getRank() == 0) return c.finish(c.fresh(x, self));
  int64_t dim = normalizeDim(dim0, typeOf(x).getRank());
  if (kind == "cumprod") return c.finish(c.fresh(scan(c, x, dim, 1.0, [&](Value a, Value b) { return c.mul(a, b); }), self));
  return c.finish(c.fresh(scan(c, x, dim, -kInf, [&](Value a, Value b) { return logAddExp(c, a, b); }), self));
}

// cummax / cummin: values and indices. The running winner is the last NaN
// if there is one, else the last occurrence of the extremum (eager's kernel
// takes x when isnan(x) or x >= the running value); a scan of (value,
// index) pairs taking the later one under that rule, which is associative.
LogicalResult cumExtremum(NodeImporter& n, bool isMax) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(dim0, n.integer(1, "dim"));
  if (failed(checkDims(n, {dim0}, typeOf(self).getRank()))) return failure();
  Value x = c.toFloat(self);
  if (typeOf(x).getRank() == 0) x = c.reshape(x, {1});
  int64_t rank = typeOf(x).getRank(), dim = normalizeDim(dim0, rank), length = typeOf(x).getDimSize(dim);
  if (length > (int64_t(1) << 24)) return n.error("cummax/cummin over more than 2^24 elements");
  Value v = isMax ? x : c.unary<aten::NegOp>(x);
  SmallVector<int64_t> iotaShape(rank, 1);
  iotaShape[dim] = length;
  Value idx = c.expand(c.iota(length, iotaShape), typeOf(v).getShape());
  for (int64_t shift = 1; shift < length; shift *= 2) {
    Value ev = padDim(c, c.slice(v, dim, 0, length - shift), dim, shift, 0, -kInf);
    Value ei = padDim(c, c.slice(idx, dim, 0, length - shift), dim, shift, 0, 0.0);
    Value takeLater = c.logicalOr(c.isNan(v), c.compare<aten::GeTensorOp>(v, ev));
    v = c.where(takeLater, v, ev);
    idx = c.where(takeLater, idx, ei);
  }
  if (!isMax) v = c.unary<aten::NegOp>(v);
  if (failed(c.finish(c.fresh(v, x), 0))) return failure();
  return c.finish(idx, 1);
}

//===----------------------------------------------------------------------===//
// Diagonals, matrix-vector forms, counts
//===----------------------------------------------------------------------===//

// The diagonal `offset` of dims (d1, d2), moved last: the two dims flattened
// and sliced with a step of m + 1.
FailureOr<Value> diagonalOf(NodeImporter& n, Composer& c, Value x, int64_t offset, int64_t d1, int64_t d2) {
  int64_t rank = typeOf(x).getRank();
  if (rank < 2) return n.error("diagonal needs at least 2 dims");
  if (failed(checkDims(n, {d1, d2}, rank))) return failure();
  d1 = normalizeDim(d1, rank);
  d2 = normalizeDim(d2, rank);
  if (d1 == d2) return n.error("diagonal dims must differ");
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    if (d != d1 && d != d2) perm.push_back(d);
  perm.push_back(d1);
  perm.push_back(d2);
  x = c.permute(x, perm);
  int64_t rows = typeOf(x).getDimSize(rank - 2), cols = typeOf(x).getDimSize(rank - 1);
  int64_t length = offset >= 0 ? std::min(rows, cols - offset) : std::min(rows + offset, cols);
  if (length <= 0) return n.error("diagonal " + std::to_string(offset) + " is empty (0 elements); empty tensors are not supported");
  SmallVector<int64_t> flat(typeOf(x).getShape().drop_back(2));
  flat.push_back(rows * cols);
  int64_t start = offset >= 0 ? offset : -offset * cols;
  return c.slice(c.reshape(x, flat), rank - 2, start, start + (length - 1) * (cols + 1) + 1, cols + 1);
}

LogicalResult diagonal(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(offset, n.integer(1, "offset", 0));
  NCC_TRY(d1, n.integer(2, "dim1", 0));
  NCC_TRY(d2, n.integer(3, "dim2", 1));
  NCC_TRY(r, diagonalOf(n, c, self, offset, d1, d2));
  return c.finish(c.fresh(r, self));
}

// diagonal_scatter(self, src, offset, dim1, dim2): self with diagonal
// `offset` of dims (dim1, dim2) replaced by src (shaped as diagonal() gives
// it: the other dims, then the diagonal's length), in the plane of those
// two dims moved last.
LogicalResult diagonalScatter(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(src, n.tensor(1, "src"));
  NCC_TRY(k, n.integer(2, "offset", 0));
  NCC_TRY(d1, n.integer(3, "dim1", 0));
  NCC_TRY(d2, n.integer(4, "dim2", 1));
  NCC_TRY(type, n.resultType());
  int64_t rank = typeOf(self).getRank();
  if (rank < 2) return n.error("diagonal_scatter needs at least 2 dims");
  if (failed(checkDims(n, {d1, d2}, rank))) return failure();
  d1 = normalizeDim(d1, rank);
  d2 = normalizeDim(d2, rank);
  if (d1 == d2) return n.error("diagonal_scatter dims must differ");
  int64_t rows = typeOf(self).getDimSize(d1), cols = typeOf(self).getDimSize(d2);
  int64_t length = std::max<int64_t>(0, k >= 0 ? std::min(rows, cols - k) : std::min(rows + k, cols));
  SmallVector<int64_t> perm, expected;
  for (int64_t d = 0; d < rank; ++d)
    if (d != d1 && d != d2) perm.push_back(d), expected.push_back(typeOf(self).getDimSize(d));
  perm.append({d1, d2});
  expected.push_back(length);
  if (typeOf(src).getShape() != ArrayRef<int64_t>(expected))
    return n.error("diagonal_scatter src of shape " + aten::shapeToString(typeOf(src).getShape()) + ", expected " +
                   aten::shapeToString(expected));
  Type elem = type.getElementType();
  Value x = c.cast(self, elem);
  if (length == 0) return c.finish(c.fresh(x, self));
  SmallVector<int64_t> inverse(rank);
  for (int64_t i = 0; i < rank; ++i) inverse[perm[i]] = i;
  // src's element i of the diagonal on row i + max(0, -k), every column
  int64_t top = k < 0 ? -k : 0;
  Value onRows = padDim(c, c.unsqueeze(c.cast(src, elem), rank - 1), rank - 2, top, rows - length - top, 0.0);
  Value hit = c.compare<aten::EqTensorOp>(c.iota(rows, {rows, 1}), c.iota(cols, {1, cols}, double(-k)));
  return c.finish(c.permute(c.where(hit, onRows, c.permute(x, perm)), inverse));
}

// The largest offset of a diagonal a 1-d input is placed on (the matrix's
// side is the input's length plus the offset).
constexpr int64_t kMaxDiagonalOffset = int64_t(1) << 24;

// [.., n + |k|, n + |k|] with the last dim of `x` on diagonal k of the last
// two dims (column - row == k), zeros elsewhere: row i (k >= 0) or column j
// (k < 0) takes element i or j of x, padded with zeros to the side.
Value onDiagonal(Composer& c, Value x, int64_t k) {
  int64_t rank = typeOf(x).getRank() + 1, size = typeOf(x).getShape().back() + std::abs(k);
  Value hit = c.compare<aten::EqTensorOp>(c.iota(size, {size, 1}), c.iota(size, {1, size}, double(-k)));
  Value v = c.unsqueeze(padDim(c, x, rank - 2, 0, std::abs(k), 0.0), k >= 0 ? rank - 1 : rank - 2);
  return c.where(hit, v, c.scalar(0.0, typeOf(x).getElementType()));
}

// diag: a 2-d input's diagonal, or the square matrix with a 1-d input on
// diagonal k (zeros elsewhere).
LogicalResult diag(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(k, n.integer(1, "diagonal", 0));
  int64_t rank = typeOf(self).getRank();
  if (rank == 2) {
    NCC_TRY(r, diagonalOf(n, c, self, k, 0, 1));
    return c.finish(c.fresh(r, self));
  }
  if (rank != 1) return n.error("diag needs a 1-d or 2-d input");
  if (k > kMaxDiagonalOffset || k < -kMaxDiagonalOffset) return n.error("diag offset " + std::to_string(k) + " is out of range");
  return c.finish(onDiagonal(c, self, k));
}

// diag_embed(self, offset, dim1, dim2): the last dim of self on diagonal
// `offset` of a new square pair of dims (dim1, dim2) of the result, zeros
// elsewhere; built in the last two dims, then moved.
LogicalResult diagEmbed(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(k, n.integer(1, "offset", 0));
  NCC_TRY(d1, n.integer(2, "dim1", -2));
  NCC_TRY(d2, n.integer(3, "dim2", -1));
  Value x = typeOf(self).getRank() == 0 ? c.reshape(self, {1}) : self;
  int64_t rank = typeOf(x).getRank() + 1;
  if (failed(checkDims(n, {d1, d2}, rank))) return failure();
  d1 = normalizeDim(d1, rank);
  d2 = normalizeDim(d2, rank);
  if (d1 == d2) return n.error("diag_embed dims must differ");
  if (k > kMaxDiagonalOffset || k < -kMaxDiagonalOffset) return n.error("diag_embed offset " + std::to_string(k) + " is out of range");
  Value square = onDiagonal(c, x, k);
  // result dim d1 is the built rows (rank - 2), d2 its columns (rank - 1)
  SmallVector<int64_t> perm(rank);
  int64_t lead = 0;
  for (int64_t d = 0; d < rank; ++d) perm[d] = d == d1 ? rank - 2 : d == d2 ? rank - 1 : lead++;
  return c.finish(c.permute(square, perm));
}

LogicalResult trace(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  if (typeOf(self).getRank() != 2) return n.error("trace needs a 2-d input");
  NCC_TRY(type, n.resultType());
  NCC_TRY(d, diagonalOf(n, c, self, 0, 0, 1));
  Value x = aten::isFloatType(type.getElementType()) ? c.cast(d, type.getElementType()) : c.cast(d, c.f32());
  return c.finish(c.sum(x, {}, false));
}

// addmv(self, mat, vec) = beta * self + alpha * mat @ vec and
// addr(self, v1, v2) = beta * self + alpha * outer(v1, v2), as one addmm
// (beta == 0 ignores self, NaN included, as eager does); integer and bool
// operands in f32.
LogicalResult addmvOrAddr(NodeImporter& n, bool isAddr) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(a, n.tensor(1, isAddr ? "vec1" : "mat"));
  NCC_TRY(v, n.tensor(2, isAddr ? "vec2" : "vec"));
  NCC_TRY(beta, n.numberAsResult(3, "beta", 1.0));
  NCC_TRY(alpha, n.numberAsResult(4, "alpha", 1.0));
  NCC_TRY(type, n.resultType());
  Type compute = aten::isFloatType(type.getElementType()) ? type.getElementType() : c.f32();
  Value lhs, rhs;
  if (isAddr) {
    if (typeOf(a).getRank() != 1 || typeOf(v).getRank() != 1) return n.error("addr needs two 1-d vectors");
    lhs = c.reshape(c.cast(a, compute), {typeOf(a).getDimSize(0), 1});
    rhs = c.reshape(c.cast(v, compute), {1, typeOf(v).getDimSize(0)});
  } else {
    if (typeOf(a).getRank() != 2 || typeOf(v).getRank() != 1 || typeOf(a).getDimSize(1) != typeOf(v).getDimSize(0))
      return n.error("addmv needs a matrix [M, K] and a vector [K]");
    lhs = c.cast(a, compute);
    rhs = c.reshape(c.cast(v, compute), {typeOf(v).getDimSize(0), 1});
  }
  int64_t rows = typeOf(lhs).getDimSize(0), cols = typeOf(rhs).getDimSize(1);
  SmallVector<int64_t> shape{rows, cols};
  Value bias = c.cast(self, compute);
  if (!isAddr) {  // self is [M] (or broadcasts to it): a column
    if (typeOf(bias).getRank() > 1 || !aten::broadcastShapes(typeOf(bias).getShape(), SmallVector<int64_t>{rows}))
      return n.error("addmv's self does not broadcast to the product");
    bias = c.reshape(bias, typeOf(bias).getRank() == 1 ? SmallVector<int64_t>{typeOf(bias).getDimSize(0), 1}
                                                        : SmallVector<int64_t>{1, 1});
  } else if (!aten::broadcastShapes(typeOf(bias).getShape(), shape)) {
    return n.error("addr's self does not broadcast to the product");
  }
  if (beta == 0.0) bias = c.splat({1}, compute, 0.0);
  Value r = n.b.create<aten::AddmmOp>(n.loc, RankedTensorType::get(shape, compute), bias, lhs, rhs,
                                      n.b.getF64FloatAttr(beta == 0.0 ? 1.0 : beta), n.b.getF64FloatAttr(alpha));
  return c.finish(r);
}

// count_nonzero over dims (none: all), as int64.
LogicalResult countNonzero(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(dims, n.ints(1, "dim", SmallVector<int64_t>{}));
  if (failed(checkDims(n, dims, typeOf(self).getRank()))) return failure();
  Value nonzero = c.cast(c.compareScalar<aten::NeScalarOp>(self, 0.0), c.f32());
  if (typeOf(nonzero).getRank() == 0) return c.finish(nonzero);
  return c.finish(c.sum(nonzero, dims, false));
}

// std_mean: the variance and mean of var_mean, the square root of the first.
LogicalResult stdMean(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(dims, n.ints(1, "dim", SmallVector<int64_t>{}));
  NCC_TRY(correction, n.number(2, "correction", 1.0));
  NCC_TRY(keepdim, n.boolean(3, "keepdim", false));
  NCC_TRY(types, n.resultTypes(2));
  if (failed(checkDims(n, dims, typeOf(self).getRank()))) return failure();
  if (correction != std::floor(correction)) return n.error("std_mean with a fractional correction");
  Type elem = llvm::cast<RankedTensorType>(types[0]).getElementType();
  if (!aten::isFloatType(elem)) return n.error("std_mean needs a float result");
  Value x = c.cast(self, elem);
  auto shape = c.reducedShape(typeOf(x), dims, keepdim);
  auto t = RankedTensorType::get(shape, elem);
  auto op = n.b.create<aten::VarMeanCorrectionOp>(n.loc, TypeRange{t, t}, x, n.b.getDenseI64ArrayAttr(dims),
                                                  n.b.getI64IntegerAttr(int64_t(correction)), n.b.getBoolAttr(keepdim));
  if (failed(c.finish(c.unary<aten::SqrtOp>(op.getVar()), 0))) return failure();
  return c.finish(op.getMean(), 1);
}

// Eager's linspace points, as linspace and logspace compute them: the first
// half stepping from start, the second back from end; in float32 for float
// results, in double (not yet truncated) for integers; one step is start.
SmallVector<double> linspacePoints(double start, double end, int64_t steps, bool isFloat) {
  SmallVector<double> values(steps);
  int64_t halfway = steps / 2;
  if (isFloat) {
    float s = float(start), e = float(end), step = steps > 1 ? (e - s) / float(steps - 1) : 0.0f;
    for (int64_t i = 0; i < steps; ++i)
      values[i] = i < halfway ? s + step * float(i) : e - step * float(steps - i - 1);
  } else {
    double step = steps > 1 ? (end - start) / double(steps - 1) : 0.0;
    for (int64_t i = 0; i < steps; ++i)
      values[i] = i < halfway ? start + step * double(i) : end - step * double(steps - i - 1);
  }
  if (steps == 1) values[0] = isFloat ? double(float(start)) : start;
  return values;
}

// linspace(start, end, steps) and logspace(..., base): constants of eager's
// points (integers truncated), or base to those powers (in float32 for
// float results; for integers the power in double, truncated).
LogicalResult linspace(NodeImporter& n, bool log) {
  Composer c(n);
  std::string op = log ? "logspace" : "linspace";
  NCC_TRY(start, n.number(0, "start"));
  NCC_TRY(end, n.number(1, "end"));
  NCC_TRY(steps, n.integer(2, "steps"));
  NCC_TRY(base, log ? n.number(3, "base", 10.0) : FailureOr<double>(10.0));
  NCC_TRY(type, n.resultType());
  if (steps < 0) return n.error(op + " with a negative number of steps");
  if (steps > (int64_t(1) << 26)) return n.error(op + " of more than 2^26 steps");
  bool isFloat = aten::isFloatType(type.getElementType());
  SmallVector<double> values = linspacePoints(start, end, steps, isFloat);
  for (double& v : values) {
    if (log) v = isFloat ? double(std::pow(float(base), float(v))) : std::pow(base, v);
    if (!isFloat) v = std::trunc(v);
  }
  return c.finish(c.constant({steps}, type.getElementType(), values));
}

// hann_window, hamming_window, blackman_window and bartlett_window: constants
// computed step by step as eager's factories do: arange, then each scaling
// and cosine, the scalars and every result rounded to the result's dtype;
// `periodic` (the default) computes N + 1 points and drops the last.
LogicalResult window(NodeImporter& n, StringRef kind) {
  Composer c(n);
  NCC_TRY(length, n.integer(0, "window_length"));
  NCC_TRY(periodic, n.boolean(1, "periodic", true));
  NCC_TRY(alpha, n.number(2, "alpha", kind == "hann" ? 0.5 : 0.54));
  NCC_TRY(beta, n.number(3, "beta", kind == "hann" ? 0.5 : 0.46));
  NCC_TRY(type, n.resultType());
  Type elem = type.getElementType();
  if (!aten::isFloatType(elem)) return n.error(kind.str() + "_window needs a float dtype");
  if (length < 0 || length > (int64_t(1) << 26)) return n.error(kind.str() + "_window length out of range");
  auto round = [&](double v) {  // to the result's dtype
    APFloat f(v);
    bool lost;
    f.convert(llvm::cast<FloatType>(elem).getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
    return f.convertToDouble();
  };
  auto cosine = [&](double v) { return round(double(std::cos(float(v)))); };
  auto scalar = round;
  SmallVector<double> values;
  int64_t points = length + (periodic && length > 1 ? 1 : 0);
  for (int64_t i = 0; i < length; ++i) {
    if (points == 1) {
      values.push_back(1.0);
      continue;
    }
    double x = round(double(i));
    if (kind == "hann" || kind == "hamming") {
      x = cosine(round(x * scalar(kPi * 2.0 / double(points - 1))));
      values.push_back(round(round(x * scalar(-beta)) + scalar(alpha)));
    } else if (kind == "blackman") {
      x = round(x * scalar(kPi / double(points - 1)));
      double a = round(cosine(round(x * 4.0)) * scalar(0.08)), b = round(cosine(round(x * 2.0)) * 0.5);
      values.push_back(round(round(a - b) + scalar(0.42)));
    } else {  // bartlett
      x = round(x * scalar(2.0 / double(points - 1)));
      values.push_back(i >= (points - 1) / 2 + 1 ? round(2.0 - x) : x);
    }
  }
  return c.finish(c.constant({length}, elem, values));
}

// The p-norm of `d` over `dims` (none: its last dim): p = 2 a square root
// of the sum of squares, 1 the sum of magnitudes, inf the largest, 0 the
// count of nonzero elements, other p sum(|d|^p)^(1/p).
Value pNorm(Composer& c, Value d, double p, ArrayRef<int64_t> dims = {}, bool keepdim = false) {
  SmallVector<int64_t> over(dims);
  if (over.empty()) over.push_back(typeOf(d).getRank() - 1);
  Value mag = c.unary<aten::AbsOp>(d);
  if (p == 2) return c.unary<aten::SqrtOp>(c.sum(c.mul(d, d), over, keepdim));
  if (p == 1) return c.sum(mag, over, keepdim);
  if (std::isinf(p)) return c.amax(mag, over, keepdim);
  if (p == 0) return c.sum(c.cast(c.compareScalar<aten::NeScalarOp>(d, 0.0), typeOf(d).getElementType()), over, keepdim);
  return c.powScalar(c.sum(c.powScalar(mag, p), over, keepdim), 1.0 / p);
}

// _cdist_forward(x1 [.., P, M], x2 [.., R, M], p) and _euclidean_dist (eager's
// p = 2 path for more than 25 rows): the p-norm distance of every pair of
// rows, [.., P, R], from the differences themselves (eager's mm-based form
// for p = 2 on larger inputs trades accuracy for speed; this is the direct
// one).
LogicalResult cdist(NodeImporter& n, bool euclidean) {
  Composer c(n);
  NCC_TRY(a, n.tensor(0, "x1"));
  NCC_TRY(b, n.tensor(1, "x2"));
  NCC_TRY(p, euclidean ? FailureOr<double>(2.0) : n.number(2, "p", 2.0));
  NCC_TRY(type, n.resultType());
  int64_t rank = typeOf(a).getRank();
  if (rank < 2 || typeOf(b).getRank() != rank || typeOf(a).getShape().back() != typeOf(b).getShape().back() ||
      !aten::broadcastShapes(typeOf(a).getShape().drop_back(2), typeOf(b).getShape().drop_back(2)))
    return n.error("cdist needs [.., P, M] and [.., R, M] inputs (batch dims that broadcast)");
  if (!(p >= 0)) return n.error("cdist needs a non-negative p");
  Type compute = computeTypeOf(c, type.getElementType());
  Value x = c.unsqueeze(c.cast(a, compute), rank - 1), y = c.unsqueeze(c.cast(b, compute), rank - 2);
  Value d = c.sub(x, y);  // [.., P, R, M]
  if (typeOf(d).getNumElements() > (int64_t(1) << 28)) return n.error("cdist of more than 2^28 differences");
  return c.finish(pNorm(c, d, p));
}

// _pdist_forward(x [N, M], p): the distance of every pair of rows i < j, in
// row-major order of the pairs ([N (N - 1) / 2]): the rows of each pair
// gathered by constant indices, then their difference's p-norm as cdist.
LogicalResult pdist(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(p, n.number(1, "p", 2.0));
  NCC_TRY(type, n.resultType());
  if (typeOf(self).getRank() != 2) return n.error("pdist needs an [N, M] input");
  if (!(p >= 0)) return n.error("pdist needs a non-negative p");
  int64_t rows = typeOf(self).getDimSize(0), width = typeOf(self).getDimSize(1);
  if (rows < 2) return n.error("pdist of fewer than two rows has no pairs");
  if (rows > (int64_t(1) << 14) || (rows * (rows - 1) / 2) * width > (int64_t(1) << 28))
    return n.error("pdist of more than 2^28 differences");
  SmallVector<double> first, second;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = i + 1; j < rows; ++j) first.push_back(double(i)), second.push_back(double(j));
  int64_t pairs = int64_t(first.size());
  Type compute = computeTypeOf(c, type.getElementType());
  Value x = c.cast(self, compute);
  Type i64 = c.b.getIntegerType(64);
  NCC_TRY(a, gatherAlong(c, x, 0, c.constant({pairs}, i64, first)));
  NCC_TRY(b, gatherAlong(c, x, 0, c.constant({pairs}, i64, second)));
  return c.finish(pNorm(c, c.sub(a, b), p));
}

//===----------------------------------------------------------------------===//
// Losses (reduction: 0 none, 1 mean, 2 sum)
//===----------------------------------------------------------------------===//

FailureOr<int64_t> reductionOf(NodeImporter& n, size_t pos) {
  NCC_TRY(r, n.integer(pos, "reduction", 1));
  if (r < 0 || r > 2) return n.error("reduction " + std::to_string(r) + " (0 none, 1 mean, 2 sum)");
  return r;
}

LogicalResult reduced(Composer& c, Value loss, int64_t reduction) {
  if (reduction == 0) return c.finish(loss);
  if (reduction == 2) return c.finish(c.sum(loss, {}, false));
  return c.finish(c.reduce<aten::MeanDimOp>(loss, {}, false));
}

// multi_margin_loss(x [N, C], [C] or 0-d, y, p, margin, weight): per row the sum
// over classes d != y of max(0, margin - x[y] + x[d])^p (p = 1 or 2), times
// weight[y], over C; a label out of range gives NaN (eager raises).
LogicalResult multiMarginLoss(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(target, n.tensor(1, "target"));
  NCC_TRY(p, n.integer(2, "p", 1));
  NCC_TRY(margin, n.number(3, "margin", 1.0));
  NCC_TRY(weight, optionalTensor(n, 4, "weight"));
  NCC_TRY(reduction, reductionOf(n, 5));
  if (p != 1 && p != 2) return n.error("multi_margin_loss takes p = 1 or 2");
  if (!isIndexType(typeOf(target).getElementType())) return n.error("multi_margin_loss needs integer class indices");
  Value x = c.toFloat(self);
  Type elem = typeOf(x).getElementType();
  int64_t rank = typeOf(x).getRank();
  if (rank > 2) return n.error("multi_margin_loss needs a [C] or [N, C] input");
  int64_t classes = rank == 0 ? 1 : typeOf(x).getDimSize(rank - 1), rows = rank == 2 ? typeOf(x).getDimSize(0) : 1;
  if (classes < 1 || classes > (int64_t(1) << 24)) return n.error("multi_margin_loss needs 1 to 2^24 classes");
  if (typeOf(target).getNumElements() != rows) return n.error("multi_margin_loss needs one label per row");
  if (weight && typeOf(weight).getNumElements() != classes) return n.error("multi_margin_loss needs one weight per class");
  x = c.reshape(x, {rows, classes});
  Value t = c.cast(c.reshape(target, {rows, 1}), c.f32());
  Value outside = c.logicalOr(c.compareScalar<aten::LtScalarOp>(t, 0.0), c.compareScalar<aten::GeScalarOp>(t, double(classes)));
  Value hit = c.compare<aten::EqTensorOp>(t, c.iota(classes, {1, classes}));  // [rows, C]
  Value zero = c.scalar(0.0, elem);
  Value picked = c.sum(c.where(hit, x, zero), {1}, true);  // x[y], [rows, 1]
  Value z = c.add(c.sub(c.scalar(margin, elem), picked), x);
  Value h = p == 1 ? z : c.mul(z, z);
  if (weight) h = c.mul(h, c.sum(c.where(hit, c.reshape(c.cast(weight, elem), {1, classes}), zero), {1}, true));
  h = c.where(c.logicalAnd(c.compareScalar<aten::GtScalarOp>(z, 0.0), c.logicalNot(hit)), h, zero);
  Value loss = c.div(c.sum(h, {1}, true), c.scalar(double(classes), elem));
  loss = c.where(outside, c.scalar(std::nan(""), elem), loss);
  return reduced(c, rank == 2 ? c.reshape(loss, {rows}) : c.reshape(loss, {}), reduction);
}

// mse_loss: (x - y)^2; smooth_l1_loss: |d| < beta ? d^2 / (2 beta) : |d| -
// beta / 2 (beta 0: |d|); huber_loss: |d| < delta ? d^2 / 2 : delta (|d| -
// delta / 2); soft_margin_loss: log1p(exp(-y x)). Each in the inputs'
// dtype, as eager's elementwise kernels, but soft_margin_loss in f32 for
// bf16 and f16, rounded once (the op computed in its opmath type): exp(-y x)
// overflows f16 from -y x = 11.1 on, where the loss is finite (graph_fuzz
// 44171819 case 349: a sum of 426.75 came out inf).
LogicalResult regressionLoss(NodeImporter& n, StringRef kind) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(target, n.tensor(1, "target"));
  NCC_TRY(reduction, reductionOf(n, 2));
  if (failed(checkBroadcast(n, {self, target}))) return failure();
  Value x = c.toFloat(self);
  if (kind == "soft_margin" && isReducedFloat(typeOf(x).getElementType())) x = c.cast(x, c.f32());
  Value y = c.cast(target, typeOf(x).getElementType());
  if (kind == "soft_margin")
    return reduced(c, c.unary<aten::Log1pOp>(c.unary<aten::ExpOp>(c.unary<aten::NegOp>(c.mul(y, x)))), reduction);
  Value d = c.sub(x, y);
  Value sq = c.mul(d, d);
  if (kind == "mse") return reduced(c, sq, reduction);
  Value a = c.unary<aten::AbsOp>(d);
  NCC_TRY(param, n.number(3, kind == "smooth_l1" ? "beta" : "delta", 1.0));
  if (param < 0) return n.error(kind.str() + " with a negative " + (kind == "smooth_l1" ? "beta" : "delta"));
  if (kind == "smooth_l1") {
    if (param == 0) return reduced(c, a, reduction);
    Value inner = c.mulScalar(sq, 0.5 / param);
    return reduced(c, c.where(c.compareScalar<aten::LtScalarOp>(a, param), inner, c.addScalar(a, -0.5 * param)), reduction);
  }
  Value inner = c.mulScalar(sq, 0.5);
  Value outer = c.mulScalar(c.addScalar(a, -0.5 * param), param);
  return reduced(c, c.where(c.compareScalar<aten::LtScalarOp>(a, param), inner, outer), reduction);
}

// binary_cross_entropy_with_logits (eager 1.13's formula):
//   m = max(-x, 0), l = log(exp(-m) + exp(-x - m)) + m,
//   loss = (1 - y) x + (1 + (pw - 1) y) l, times weight;
// binary_cross_entropy: -(y max(log x, -100) + (1 - y) max(log(1 - x), -100)),
// times weight.
LogicalResult binaryCrossEntropy(NodeImporter& n, bool withLogits) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(target, n.tensor(1, "target"));
  NCC_TRY(weight, optionalTensor(n, 2, "weight"));
  Value posWeight;
  if (withLogits) {
    NCC_TRY(pw, optionalTensor(n, 3, "pos_weight"));
    posWeight = pw;
  }
  NCC_TRY(reduction, reductionOf(n, withLogits ? 4 : 3));
  if (failed(checkBroadcast(n, {self, target, weight, posWeight}))) return failure();
  Value x = c.toFloat(self);
  Type elem = typeOf(x).getElementType();
  Value y = c.cast(target, elem);
  Value one = c.scalar(1.0, elem);
  Value loss;
  if (withLogits) {
    Value m = c.maximum(c.unary<aten::NegOp>(x), c.scalar(0.0, elem));
    Value l = c.add(c.unary<aten::LogOp>(c.add(c.unary<aten::ExpOp>(c.unary<aten::NegOp>(m)),
                                               c.unary<aten::ExpOp>(c.sub(c.unary<aten::NegOp>(x), m)))),
                    m);
    if (posWeight) l = c.mul(c.addScalar(c.mul(c.addScalar(c.cast(posWeight, elem), -1.0), y), 1.0), l);
    loss = c.add(c.mul(c.sub(one, y), x), l);
  } else {
    Value floor = c.scalar(-100.0, elem);
    Value logX = c.maximum(c.unary<aten::LogOp>(x), floor);
    Value log1mX = c.maximum(c.unary<aten::LogOp>(c.sub(one, x)), floor);
    loss = c.sub(c.mul(c.sub(y, one), log1mX), c.mul(y, logX));
  }
  if (weight) loss = c.mul(loss, c.cast(weight, elem));
  return reduced(c, loss, reduction);
}

// nll_loss_forward / nll_loss2d_forward: self [N, C, ...] (or [C]) and target
// [N, ...] of class indices; each row's log-probability at its label picked
// by a comparison with the class positions (one match, so the sum is exact;
// no flat index, so any vocabulary size), weighted by w[t] (0 for
// ignore_index), negated; mean divides by the weights' sum (the second
// result, total_weight). A label outside [0, C) that is not ignored picks
// NaN, so the loss is NaN where eager raises.
LogicalResult nllLoss(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(target, n.tensor(1, "target"));
  NCC_TRY(weight, optionalTensor(n, 2, "weight"));
  NCC_TRY(reduction, reductionOf(n, 3));
  NCC_TRY(ignore, n.integer(4, "ignore_index", -100));
  if (!isIndexType(typeOf(target).getElementType())) return n.error("nll_loss needs integer class indices");
  Value x = c.toFloat(self);
  Type elem = typeOf(x).getElementType();
  int64_t rank = typeOf(x).getRank();
  if (rank == 0) return n.error("nll_loss of a 0-d input");
  int64_t classes = typeOf(x).getDimSize(rank == 1 ? 0 : 1);
  if (classes > (int64_t(1) << 24)) return n.error("nll_loss over more than 2^24 classes");
  if (weight && typeOf(weight).getNumElements() != classes)
    return n.error("nll_loss weight of " + std::to_string(typeOf(weight).getNumElements()) + " elements for " +
                   std::to_string(classes) + " classes");
  if (rank > 1) {  // classes last, then rows
    SmallVector<int64_t> perm{0};
    for (int64_t d = 2; d < rank; ++d) perm.push_back(d);
    perm.push_back(1);
    x = c.permute(x, perm);
  }
  int64_t rows = typeOf(x).getNumElements() / std::max<int64_t>(classes, 1);
  if (typeOf(target).getNumElements() != rows)
    return n.error("nll_loss target of " + std::to_string(typeOf(target).getNumElements()) + " elements for " +
                   std::to_string(rows) + " rows");
  Value logp = c.reshape(x, {rows, classes});
  Value t = c.cast(c.reshape(target, {rows, 1}), c.f32());
  Value ignored = c.compareScalar<aten::EqScalarOp>(t, double(ignore));
  Value outside = c.logicalOr(c.compareScalar<aten::LtScalarOp>(t, 0.0),
                              c.compareScalar<aten::GeScalarOp>(t, double(classes)));
  outside = c.logicalAnd(outside, c.logicalNot(ignored));
  Value hit = c.compare<aten::EqTensorOp>(t, c.iota(classes, {1, classes}));  // [rows, C]
  Value zero = c.scalar(0.0, elem);
  Value picked = c.sum(c.where(hit, logp, zero), {1}, true);                                // [rows, 1]
  picked = c.where(outside, c.scalar(std::nan(""), elem), picked);
  Value w = c.where(ignored, zero, c.scalar(1.0, elem));
  if (weight) {
    Value wRow = c.reshape(c.cast(weight, elem), {1, classes});
    w = c.where(ignored, zero, c.sum(c.where(hit, wRow, zero), {1}, true));
  }
  Value loss = c.reshape(c.unary<aten::NegOp>(c.mul(picked, w)), {rows});
  Value totalWeight = c.sum(w, {}, false);
  if (reduction == 0) {
    if (failed(c.finish(loss, 0))) return failure();
  } else {
    Value s = c.sum(loss, {}, false);
    if (failed(c.finish(reduction == 2 ? s : c.div(s, totalWeight), 0))) return failure();
  }
  if (n.node.outputs_size() < 2) return success();
  FailureOr<RankedTensorType> tw = n.resultType(1);
  if (failed(tw)) return failure();
  if (tw->getNumElements() != 1) return success();  // eager leaves it unset (reduction none)
  return c.finish(reduction == 0 ? c.splat({}, elem, 0.0) : totalWeight, 1);
}

}  // namespace

// aminmax(x, dim, keepdim) = (amin, amax), over every dim without one.
LogicalResult aminmax(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  const Argument* d = n.arg(1, "dim");
  SmallVector<int64_t> dims;
  if (d && d->value_case() != Argument::kNone) {
    NCC_TRY(dim, n.integer(1, "dim"));
    if (failed(checkDims(n, {dim}, typeOf(self).getRank()))) return failure();
    dims.push_back(normalizeDim(dim, typeOf(self).getRank()));
  }
  NCC_TRY(keepdim, n.boolean(2, "keepdim", false));
  Value x = c.toFloat(self);
  if (typeOf(x).getRank() == 0) x = c.reshape(x, {1});
  if (failed(c.finish(c.amin(x, dims, keepdim), 0))) return failure();
  return c.finish(c.amax(x, dims, keepdim), 1);
}

// nansum(x, dim, keepdim, dtype): the sum with NaNs counted as zeros.
LogicalResult nansum(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(dims, n.ints(1, "dim", SmallVector<int64_t>{}));
  NCC_TRY(keepdim, n.boolean(2, "keepdim", false));
  NCC_TRY(type, n.resultType());
  if (failed(checkDims(n, dims, typeOf(self).getRank()))) return failure();
  for (int64_t& d : dims) d = normalizeDim(d, typeOf(self).getRank());
  Value x = c.cast(self, c.floatOf(type.getElementType()));
  if (typeOf(x).getRank() == 0) x = c.reshape(x, {1});
  Value zeroed = c.where(c.isNan(x), c.scalar(0.0, typeOf(x).getElementType()), x);
  return c.finish(c.sum(zeroed, dims, keepdim));
}

// renorm(x, p, dim, maxnorm): each slice along `dim` whose p-norm (over the
// other dims) exceeds maxnorm is scaled by maxnorm / (norm + 1e-7), as eager.
LogicalResult renorm(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(self, n.tensor(0, "self"));
  NCC_TRY(p, n.number(1, "p"));
  NCC_TRY(dim0, n.integer(2, "dim"));
  NCC_TRY(maxnorm, n.number(3, "maxnorm"));
  NCC_TRY(type, n.resultType());
  if (!aten::isFloatType(type.getElementType())) return n.error("renorm needs a float tensor");
  if (!(p > 0)) return n.error("renorm needs a positive p");
  if (maxnorm < 0) return n.error("renorm needs a non-negative maxnorm");
  int64_t rank = typeOf(self).getRank();
  if (rank < 1) return n.error("renorm needs at least one dim");
  int64_t dim = normalizeDim(dim0, rank);
  if (dim < 0 || dim >= rank) return n.error("renorm dim out of range");
  Type compute = computeTypeOf(c, type.getElementType());
  Value x = c.cast(self, compute);
  SmallVector<int64_t> others;
  for (int64_t i = 0; i < rank; ++i)
    if (i != dim) others.push_back(i);
  // (a 1-d tensor's slices are its elements: their norm is their magnitude)
  Value norm = others.empty() ? c.unary<aten::AbsOp>(x) : pNorm(c, x, p, others, true);
  Value factor = c.where(c.compareScalar<aten::GtScalarOp>(norm, maxnorm),
                         c.div(c.scalar(maxnorm, compute), c.addScalar(norm, 1e-7)), c.scalar(1.0, compute));
  return c.finish(c.mul(x, factor));
}

// affine_grid_generator(theta [N, 2, 3], size [N, C, H, W], align_corners):
// the base grid [H W, 3] of (x, y, 1), x and y eager's linspace(-1, 1) over
// W and H (scaled by (n - 1) / n without align_corners; 0 for one step),
// times theta transposed: [N, H, W, 2]. (2-d grids; 3-d ones are refused.)
LogicalResult affineGrid(NodeImporter& n) {
  Composer c(n);
  NCC_TRY(theta, n.tensor(0, "theta"));
  NCC_TRY(size, n.ints(1, "size"));
  NCC_TRY(alignCorners, n.boolean(2, "align_corners", false));
  NCC_TRY(type, n.resultType());
  if (size.size() != 4) return n.error("affine_grid_generator supports 2-d grids (size [N, C, H, W])");
  int64_t batch = size[0], height = size[2], width = size[3];
  if (batch < 1 || height < 1 || width < 1 || height * width > (int64_t(1) << 24))
    return n.error("affine_grid_generator needs positive sizes, at most 2^24 points");
  if (typeOf(theta).getShape() != ArrayRef<int64_t>{batch, 2, 3})
    return n.error("affine_grid_generator needs theta of shape [N, 2, 3]");
  if (!aten::isFloatType(type.getElementType())) return n.error("affine_grid_generator needs a float theta");
  auto steps = [&](int64_t count) {
    SmallVector<float> v(size_t(count), 0.0f);
    if (count <= 1) return v;
    for (auto [i, point] : llvm::enumerate(linspacePoints(-1.0, 1.0, count, true))) v[i] = float(point);
    if (!alignCorners)
      for (float& f : v) f = f * float(count - 1) / float(count);
    return v;
  };
  SmallVector<float> xs = steps(width), ys = steps(height);
  SmallVector<double> base;
  for (int64_t h = 0; h < height; ++h)
    for (int64_t w = 0; w < width; ++w) base.append({xs[size_t(w)], ys[size_t(h)], 1.0});
  Type elem = type.getElementType();
  Value grid = c.expand(c.constant({1, height * width, 3}, elem, base), {batch, height * width, 3});
  Value thetaT = c.permute(c.cast(theta, elem), {0, 2, 1});
  Value points = c.b.create<aten::BmmOp>(c.loc, RankedTensorType::get({batch, height * width, 2}, elem), grid, thetaT);
  return c.finish(points);
}

// _trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim):
// each input with size-1 dims inserted at its expand dims, the three
// multiplied (broadcast), the product summed over sumdim. nn.Bilinear's form
// (x1 [B, I1] at [1, 3], W [O, I1, I2] at [0], x2 [B, I2] at [1, 2], summed
// over [2, 3]) is a matmul of x2 with W's rows then a product with x1 summed
// over I1, which never holds the [B, O, I1, I2] product. Reduced precision
// in f32, rounded once.
LogicalResult trilinear(NodeImporter& n) {
  Composer c(n);
  SmallVector<Value> in;
  SmallVector<SmallVector<int64_t>> expand;
  static const char* const kNames[3] = {"i1", "i2", "i3"};
  static const char* const kExpand[3] = {"expand1", "expand2", "expand3"};
  for (size_t i = 0; i < 3; ++i) {
    NCC_TRY(t, n.tensor(i, kNames[i]));
    NCC_TRY(e, n.ints(3 + i, kExpand[i]));
    in.push_back(t);
    expand.push_back(e);
  }
  NCC_TRY(sumdim, n.ints(6, "sumdim"));
  NCC_TRY(type, n.resultType());
  int64_t rank = typeOf(in[0]).getRank() + int64_t(expand[0].size());
  for (size_t i = 0; i < 3; ++i) {
    SmallVector<int64_t> dims(expand[i]);
    llvm::sort(dims);
    if (typeOf(in[i]).getRank() + int64_t(dims.size()) != rank || std::adjacent_find(dims.begin(), dims.end()) != dims.end() ||
        (!dims.empty() && (dims.front() < 0 || dims.back() >= rank)))
      return n.error("_trilinear expand dims do not match the inputs' ranks");
    for (int64_t d : dims) in[i] = c.unsqueeze(in[i], d);
    in[i] = c.cast(in[i], computeTypeOf(c, type.getElementType()));
  }
  for (int64_t d : sumdim)
    if (d < 0 || d >= rank) return n.error("_trilinear sum dim out of range");
  if (failed(checkBroadcast(n, in))) return failure();
  auto shape = [&](size_t i) { return typeOf(in[i]).getShape(); };
  bool bilinear = rank == 4 && sumdim == SmallVector<int64_t>{2, 3} && expand[0] == SmallVector<int64_t>{1, 3} &&
                  expand[1] == SmallVector<int64_t>{0} && expand[2] == SmallVector<int64_t>{1, 2} &&
                  shape(0)[0] == shape(2)[0] && shape(0)[2] == shape(1)[2] && shape(1)[3] == shape(2)[3];
  if (bilinear) {
    int64_t batch = shape(0)[0], out = shape(1)[1], rows = shape(1)[2], cols = shape(1)[3];
    Value weight = c.reshape(in[1], {out * rows, cols});
    Value projected = c.mm(c.reshape(in[2], {batch, cols}), c.permute(weight, {1, 0}));
    Value x1 = c.reshape(in[0], {batch, 1, rows});
    return c.finish(c.sum(c.mul(c.reshape(projected, {batch, out, rows}), x1), {2}, false));
  }
  Value product = c.mul(c.mul(in[0], in[1]), in[2]);
  return c.finish(sumdim.empty() ? product : c.sum(product, sumdim, false));
}

void addComposedMathOps(std::map<std::string, Builder>& table) {
  auto add = [&](const std::string& name, Builder builder) { table.emplace(name, std::move(builder)); };
  for (const char* kind : {"log2", "log10", "exp2", "sinh", "cosh", "tan", "asinh", "acosh", "atanh", "frac",
                           "deg2rad", "rad2deg", "asin", "acos", "sinc", "special_entr", "angle", "erfc",
                           "special_erfcx", "special_ndtr", "special_log_ndtr", "lgamma", "digamma"})
    add(std::string("aten::") + kind, [kind](NodeImporter& n) { return unaryMath(n, kind); });
  add("aten::signbit", signbit);
  add("aten::mvlgamma", mvlgamma);
  add("aten::xlogy.Tensor", [](NodeImporter& n) { return binaryMath(n, "xlogy"); });
  add("aten::xlogy.Scalar_Other", [](NodeImporter& n) { return binaryMath(n, "xlogy", 1); });
  add("aten::xlogy.Scalar_Self", [](NodeImporter& n) { return binaryMath(n, "xlogy", 0); });
  add("aten::hypot", [](NodeImporter& n) { return binaryMath(n, "hypot"); });
  add("aten::copysign.Tensor", [](NodeImporter& n) { return binaryMath(n, "copysign"); });
  add("aten::copysign.Scalar", [](NodeImporter& n) { return binaryMath(n, "copysign", 1); });
  add("aten::atan2", [](NodeImporter& n) { return binaryMath(n, "atan2"); });
  add("aten::logaddexp", [](NodeImporter& n) { return binaryMath(n, "logaddexp"); });
  add("aten::logaddexp2", [](NodeImporter& n) { return binaryMath(n, "logaddexp2"); });
  add("aten::special_xlog1py", [](NodeImporter& n) { return binaryMath(n, "special_xlog1py"); });
  add("aten::special_xlog1py.self_scalar", [](NodeImporter& n) { return binaryMath(n, "special_xlog1py", 0); });
  add("aten::special_xlog1py.other_scalar", [](NodeImporter& n) { return binaryMath(n, "special_xlog1py", 1); });
  add("aten::aminmax", aminmax);
  add("aten::nansum", nansum);
  add("aten::renorm", renorm);
  add("aten::multi_margin_loss", multiMarginLoss);
  add("aten::affine_grid_generator", affineGrid);
  add("aten::soft_margin_loss", [](NodeImporter& n) { return regressionLoss(n, "soft_margin"); });
  add("aten::fmax", [](NodeImporter& n) { return binaryMath(n, "fmax"); });
  add("aten::fmin", [](NodeImporter& n) { return binaryMath(n, "fmin"); });
  add("aten::heaviside", [](NodeImporter& n) { return binaryMath(n, "heaviside"); });
  add("aten::logit", logit);
  add("aten::glu", glu);
  add("aten::prelu", prelu);
  add("aten::log_sigmoid_forward", logSigmoid);
  add("aten::threshold", threshold);
  add("aten::hardshrink", [](NodeImporter& n) { return shrink(n, false); });
  add("aten::softshrink", [](NodeImporter& n) { return shrink(n, true); });
  add("aten::rrelu_with_noise", rreluInference);
  add("aten::_trilinear", trilinear);
  add("aten::prod", [](NodeImporter& n) { return prod(n, false); });
  add("aten::prod.dim_int", [](NodeImporter& n) { return prod(n, true); });
  add("aten::cumprod", [](NodeImporter& n) { return scanOp(n, "cumprod"); });
  add("aten::logcumsumexp", [](NodeImporter& n) { return scanOp(n, "logcumsumexp"); });
  add("aten::cummax", [](NodeImporter& n) { return cumExtremum(n, true); });
  add("aten::cummin", [](NodeImporter& n) { return cumExtremum(n, false); });
  add("aten::diagonal", diagonal);
  add("aten::diag", diag);
  add("aten::trace", trace);
  add("aten::diag_embed", diagEmbed);
  add("aten::addmv", [](NodeImporter& n) { return addmvOrAddr(n, false); });
  add("aten::addr", [](NodeImporter& n) { return addmvOrAddr(n, true); });
  add("aten::count_nonzero.dim_IntList", countNonzero);
  add("aten::count_nonzero", countNonzero);
  add("aten::std_mean.correction", stdMean);
  add("aten::linspace", [](NodeImporter& n) { return linspace(n, false); });
  add("aten::logspace", [](NodeImporter& n) { return linspace(n, true); });
  for (const char* kind : {"hann", "hamming", "blackman", "bartlett"}) {
    std::string name = std::string("aten::") + kind + "_window";
    add(name, [kind](NodeImporter& n) { return window(n, kind); });
    add(name + ".periodic", [kind](NodeImporter& n) { return window(n, kind); });
  }
  add("aten::hamming_window.periodic_alpha", [](NodeImporter& n) { return window(n, "hamming"); });
  add("aten::hamming_window.periodic_alpha_beta", [](NodeImporter& n) { return window(n, "hamming"); });
  add("aten::diagonal_scatter", diagonalScatter);
  add("aten::_cdist_forward", [](NodeImporter& n) { return cdist(n, false); });
  add("aten::_euclidean_dist", [](NodeImporter& n) { return cdist(n, true); });
  add("aten::_pdist_forward", pdist);
  add("aten::mse_loss", [](NodeImporter& n) { return regressionLoss(n, "mse"); });
  add("aten::smooth_l1_loss", [](NodeImporter& n) { return regressionLoss(n, "smooth_l1"); });
  add("aten::huber_loss", [](NodeImporter& n) { return regressionLoss(n, "huber"); });
  add("aten::binary_cross_entropy_with_logits", [](NodeImporter& n) { return binaryCrossEntropy(n, true); });
  add("aten::binary_cross_entropy", [](NodeImporter& n) { return binaryCrossEntropy(n, false); });
  add("aten::nll_loss_forward", nllLoss);
  add("aten::nll_loss2d_forward", nllLoss);
}

}  // namespace neuroncc::importer
