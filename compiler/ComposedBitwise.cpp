//===- ComposedBitwise.cpp - bitwise ops and shifts of integers -----------===//
//
// The device holds integers as f32 whole numbers (exact below 2^24), so the
// bitwise ops of integer tensors are composed from arithmetic:
//
//  - a value x is split into a sign and a magnitude m >= 0 with x = m when
//    x >= 0 and x = ~m = -m - 1 otherwise (two's complement);
//  - m1 & m2 is the sum over the bits k of 2^k * bit_k(m1) * bit_k(m2), each
//    bit peeled off as q - 2 * floor(q / 2) (every step exact);
//  - m1 | m2 = m1 + m2 - (m1 & m2) and m1 ^ m2 = m1 + m2 - 2 (m1 & m2), and
//    the signs combine by De Morgan's laws (~m1 & m2 = m2 - (m1 & m2), ...);
//  - ~x = -x - 1; x << k = x * 2^k; x >> k = floor(x / 2^k) (arithmetic).
//
// The bits taken are the dtype's: 8 for uint8, 7 and 15 magnitude bits for
// int8 and int16, 24 for int32 and int64 (their values are exact below 2^24
// anyway). A narrow result is wrapped into its range after the node
// (GraphImporter), so uint8 ~x is 255 - x and int8 1 << 7 is -128. Bools
// (masks) take the logical forms in GraphImporter.cpp.
//
//===----------------------------------------------------------------------===//
#include <cmath>

#include "compiler/Composer.h"

namespace neuroncc::importer {
namespace {

// The result's narrow type (ui8, si8, si16; null for int32 and int64, whose
// values are exact below 2^24) and the magnitude bits the ops below read.
IntegerType narrowResult(NodeImporter& n) { return narrowIntegerType(n.node.outputs(0).dtype(), n.b.getContext()); }
int magnitudeBits(IntegerType narrow) { return narrow ? int(narrow.getWidth()) - int(narrow.isSigned()) : 24; }

struct SignMagnitude {
  Value negative;  // i1, or null where no value can be negative (uint8)
  Value magnitude;
};

SignMagnitude split(Composer& c, Value x, bool unsignedType) {
  if (unsignedType) return {Value(), x};
  Value negative = c.compareScalar<aten::LtScalarOp>(x, 0.0);
  return {negative, c.where(negative, c.addScalar(c.unary<aten::NegOp>(x), -1.0), x)};
}

// floor(q / 2) and q's lowest bit, of a whole number q >= 0.
std::pair<Value, Value> peelBit(Composer& c, Value q) {
  Value half = c.unary<aten::FloorOp>(c.mulScalar(q, 0.5));
  return {half, c.sub(q, half, 2.0)};
}

// m1 & m2 of magnitudes below 2^bits; `known` is m2's value when it is a
// constant (then only m1's bits up to m2's highest set bit are read).
Value andOfMagnitudes(Composer& c, Value m1, Value m2, int bits, std::optional<int64_t> known) {
  Value acc = c.mulScalar(m1, 0.0);
  if (known) bits = std::min<int>(bits, *known > 0 ? int(std::floor(std::log2(double(*known)))) + 1 : 0);
  Value q1 = m1, q2 = m2;
  for (int k = 0; k < bits; ++k) {
    auto [next1, bit1] = peelBit(c, q1);
    q1 = next1;
    Value both = bit1;
    if (known) {
      if (((*known >> k) & 1) == 0) continue;
    } else {
      auto [next2, bit2] = peelBit(c, q2);
      q2 = next2;
      both = c.mul(bit1, bit2);
    }
    acc = c.add(acc, both, std::ldexp(1.0, k));
  }
  return acc;
}

// -v - 1: the complement of a magnitude.
Value complement(Composer& c, Value v) { return c.addScalar(c.unary<aten::NegOp>(v), -1.0); }

// a op b (op: and, or, xor) of whole numbers in f32.
Value bitwise(Composer& c, StringRef op, Value a, Value b, IntegerType narrow, std::optional<int64_t> knownB) {
  const bool unsignedType = narrow && narrow.isUnsigned();
  SignMagnitude x = split(c, a, unsignedType), y = split(c, b, unsignedType);
  if (knownB && *knownB < 0) knownB = -*knownB - 1;  // y's magnitude
  Value both = andOfMagnitudes(c, x.magnitude, y.magnitude, magnitudeBits(narrow), knownB);
  Value sum = c.add(x.magnitude, y.magnitude);
  Value either = c.sub(sum, both), differ = c.sub(sum, both, 2.0);
  if (!x.negative) {  // uint8: both non-negative
    return op == "and" ? both : op == "or" ? either : differ;
  }
  Value onlyX = c.sub(x.magnitude, both), onlyY = c.sub(y.magnitude, both);
  if (op == "xor")  // the sign of the result is the xor of the signs
    return c.where(c.compare<aten::NeTensorOp>(x.negative, y.negative), complement(c, differ), differ);
  // Per sign pair (x, y): and = (+ +) both, (- +) onlyY, (+ -) onlyX, (- -) ~either;
  // or = (+ +) either, (- +) ~onlyX, (+ -) ~onlyY, (- -) ~both.
  const bool isAnd = op == "and";
  Value whenYPositive = c.where(x.negative, isAnd ? onlyY : complement(c, onlyX), isAnd ? both : either);
  Value whenYNegative =
      c.where(x.negative, complement(c, isAnd ? either : both), isAnd ? onlyX : complement(c, onlyY));
  return c.where(y.negative, whenYNegative, whenYPositive);
}

// bitwise_and/or/xor of integer tensors (.Tensor) or with an integer Scalar
// (.Scalar); bools go to the logical forms.
LogicalResult integerBitwiseOp(NodeImporter& n, StringRef op, bool scalarOther) {
  Composer c(n);
  NCC_TRY(type, n.resultType());
  NCC_TRY(self, n.tensor(0, "self"));
  const IntegerType narrow = narrowResult(n);
  std::optional<int64_t> known;
  Value other;
  if (scalarOther) {
    NCC_TRY(v, n.number(1, "other"));
    if (v != std::trunc(v)) return n.error("bitwise ops take an integer or bool scalar, not " + std::to_string(v));
    known = int64_t(wrappedInto(narrow, v));  // uint8 x & 511 is x & 255
    other = c.scalar(double(*known), c.f32());
  } else {
    NCC_TRY(o, n.tensor(1, "other"));
    if (failed(checkBroadcast(n, {self, o}))) return failure();
    other = c.cast(o, c.f32());
  }
  if (type.getElementType().isInteger(1)) {  // bool self with a bool Scalar: `m & True`
    Value mask = c.cast(self, c.i1()), flag = c.scalar(known.value_or(0) != 0, c.i1());
    Value r = op == "and" ? c.logicalAnd(mask, flag) : op == "or" ? c.logicalOr(mask, flag)
                                                        : c.compare<aten::NeTensorOp>(mask, flag);
    return c.finish(r);
  }
  if (!llvm::isa<IntegerType>(type.getElementType()))
    return n.error("bitwise ops take integer or bool tensors");
  return c.finish(bitwise(c, op, c.cast(self, c.f32()), other, narrow, known));
}

// 2^k of whole numbers k in [0, 63]: the product of 2^(2^j) over k's bits.
Value powerOfTwo(Composer& c, Value k) {
  Value acc = c.addScalar(c.mulScalar(k, 0.0), 1.0);
  Value q = k;
  for (int j = 0; j < 6; ++j) {
    auto [next, bit] = peelBit(c, q);
    q = next;
    acc = c.mul(acc, c.addScalar(c.mulScalar(bit, std::ldexp(1.0, 1 << j) - 1.0), 1.0));
  }
  return acc;
}

// x << k and x >> k (k a tensor or a Scalar). Amounts outside [0, bits) are
// undefined in C++, and eager's CPU results for them follow the processor;
// here they are clamped to [0, 63].
LogicalResult shiftOp(NodeImporter& n, bool left, bool scalarAmount) {
  Composer c(n);
  NCC_TRY(type, n.resultType());
  if (!llvm::isa<IntegerType>(type.getElementType()) || type.getElementType().isInteger(1))
    return n.error("shifts take integer tensors");
  NCC_TRY(self, n.tensor(0, "self"));
  const IntegerType narrow = narrowResult(n);
  Value x = c.cast(self, c.f32()), power, mod;
  const int width = narrow ? int(narrow.getWidth()) : 0;  // the wrap-around width
  if (scalarAmount) {
    NCC_TRY(v, n.number(1, "other"));
    double k = std::clamp(std::trunc(v), 0.0, 63.0);
    power = c.scalar(std::ldexp(1.0, int(k)), c.f32());
    if (width) mod = c.scalar(std::ldexp(1.0, width - int(k)), c.f32());
  } else {
    NCC_TRY(o, n.tensor(1, "other"));
    if (failed(checkBroadcast(n, {self, o}))) return failure();
    Value k = c.minimum(c.maximum(c.cast(o, c.f32()), c.scalar(0, c.f32())), c.scalar(63, c.f32()));
    power = powerOfTwo(c, k);
    if (width) mod = c.div(c.scalar(std::ldexp(1.0, width), c.f32()), power);
  }
  if (!left) return c.finish(c.unary<aten::FloorOp>(c.div(x, power)));
  // A narrow x keeps only its bits that stay below the width (so that the
  // product stays exact); the node's wrap then gives the sign.
  if (mod) x = c.sub(x, c.mul(mod, c.unary<aten::FloorOp>(c.div(x, mod))));
  return c.finish(c.mul(x, power));
}

}  // namespace

LogicalResult integerBitwise(NodeImporter& n, StringRef op) {
  if (op == "not") {
    Composer c(n);
    NCC_TRY(self, n.tensor(0, "self"));
    return c.finish(complement(c, c.cast(self, c.f32())));
  }
  return integerBitwiseOp(n, op, false);
}

void addComposedBitwiseOps(std::map<std::string, Builder>& table) {
  auto add = [&](const std::string& name, Builder builder) { table.emplace(name, std::move(builder)); };
  for (const char* op : {"and", "or", "xor"})
    add(std::string("aten::bitwise_") + op + ".Scalar", [op](NodeImporter& n) { return integerBitwiseOp(n, op, true); });
  add("aten::__lshift__.Scalar", [](NodeImporter& n) { return shiftOp(n, true, true); });
  add("aten::__lshift__.Tensor", [](NodeImporter& n) { return shiftOp(n, true, false); });
  add("aten::__rshift__.Scalar", [](NodeImporter& n) { return shiftOp(n, false, true); });
  add("aten::__rshift__.Tensor", [](NodeImporter& n) { return shiftOp(n, false, false); });
  add("aten::bitwise_left_shift.Tensor", [](NodeImporter& n) { return shiftOp(n, true, false); });
  add("aten::bitwise_left_shift.Tensor_Scalar", [](NodeImporter& n) { return shiftOp(n, true, true); });
  add("aten::bitwise_right_shift.Tensor", [](NodeImporter& n) { return shiftOp(n, false, false); });
  add("aten::bitwise_right_shift.Tensor_Scalar", [](NodeImporter& n) { return shiftOp(n, false, true); });
}

}  // namespace neuroncc::importer
