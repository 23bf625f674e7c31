// The row kernels (runtime/src/row_kernels.h) against the float32 block
// path they replace: operands widened into float32 arrays, computed by
// vector_math.h's Alu / AluScalar / Activation / Select, then narrowed.
// Every op and function, every mix of float32, bfloat16 and float16
// operands, rows of every length class (partial groups of 16, 32 and 64,
// several blocks), operands at odd byte offsets, and values that include
// NaN, infinities, signed zeros and subnormals: the bytes must be equal.
#include "row_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "float_convert.h"

namespace neuroncc {
namespace {

using neff::DType;
using rt::BitsFloat;
namespace vm = rt::vm;

constexpr DType kDtypes[] = {neff::F32, neff::BF16, neff::F16};
constexpr uint32_t kLengths[] = {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1024, 1031, 2100};

// A row's bytes in `dt`, starting `offset` bytes into its buffer.
struct Row {
  DType dt;
  size_t offset;
  std::vector<uint8_t> bytes;
  uint8_t* data() { return bytes.data() + offset; }
  const uint8_t* data() const { return bytes.data() + offset; }
};

// n values: mostly ordinary ones of both signs and several scales, one in
// eight from a list of special cases.
std::vector<float> Values(uint32_t n, std::mt19937* rng) {
  static const float kSpecial[] = {0.0f,          -0.0f,         1.0f,           -1.0f,
                                   BitsFloat(0x7fc00000u),       BitsFloat(0xffc00001u),
                                   BitsFloat(0x7f800000u),       BitsFloat(0xff800000u),
                                   BitsFloat(0x00000001u),       BitsFloat(0x80400000u),
                                   BitsFloat(0x7f7fffffu),       1e-30f,
                                   -88.5f,        90.0f,         0.5f,           3e38f};
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> scale(-6, 6), pick(0, 7), special(0, int(std::size(kSpecial)) - 1);
  std::vector<float> v(n);
  for (float& x : v) x = pick(*rng) == 0 ? kSpecial[special(*rng)] : std::ldexp(unit(*rng), scale(*rng));
  return v;
}

Row MakeRow(DType dt, const std::vector<float>& values, size_t offset) {
  Row r{dt, offset, std::vector<uint8_t>(offset + values.size() * neff::DTypeSize(dt) + 8, 0xa5)};
  vm::Narrow(dt, values.data(), uint32_t(values.size()), r.data());
  return r;
}

Row EmptyRow(DType dt, uint32_t n, size_t offset) {
  return Row{dt, offset, std::vector<uint8_t>(offset + n * neff::DTypeSize(dt) + 8, 0x5a)};
}

std::vector<float> Widened(const Row& r, uint32_t n) {
  std::vector<float> v(n);
  vm::Widen(r.dt, r.data(), n, v.data());
  return v;
}

// "" when equal, else the first element that differs. Two NaNs are equal
// whatever their sign and payload: when both operands of an operation are
// NaN, which one it returns depends on the order the compiler gave the
// operands of a commutative instruction, and the runtime documents none.
std::string FirstDifference(const Row& got, const Row& want, uint32_t n) {
  const size_t es = neff::DTypeSize(got.dt);
  for (size_t i = 0; i < got.bytes.size(); ++i) {
    if (got.bytes[i] == want.bytes[i]) continue;
    if (i < got.offset || i >= got.offset + n * es) return "a byte outside the row changed at " + std::to_string(i);
    const uint32_t e = uint32_t((i - got.offset) / es);
    float g = 0, w = 0;
    vm::Widen(got.dt, got.data() + e * es, 1, &g);
    vm::Widen(want.dt, want.data() + e * es, 1, &w);
    if (std::isnan(g) && std::isnan(w)) continue;
    return "element " + std::to_string(e) + ": " + std::to_string(g) + " against " + std::to_string(w);
  }
  return "";
}

// The same for two float32 results.
bool SameFloat(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, 4) == 0; }

std::string Describe(const std::vector<DType>& dts, uint32_t n, size_t offset) {
  std::string s = "dtypes";
  for (DType d : dts) s += std::string(" ") + neff::DTypeName(d);
  return s + ", n " + std::to_string(n) + ", offset " + std::to_string(offset);
}

// Calls check(dts, n, offset) for every dtype of each of `operands`
// operands (the last is the output), every length and two offsets.
template <typename Check>
void ForEveryShape(int operands, Check check) {
  std::vector<DType> dts(size_t(operands), neff::F32);
  for (int combo = 0; combo < (operands == 4 ? 16 : 1 << (2 * operands)); ++combo) {
    // Four operands (select): float32 or bfloat16 each; otherwise all three dtypes.
    bool valid = true;
    for (int k = 0, c = combo; k < operands; ++k) {
      const int d = operands == 4 ? c % 2 : c % 4;
      c /= operands == 4 ? 2 : 4;
      if (d == 3) valid = false;
      dts[size_t(k)] = kDtypes[d % 3];
    }
    if (!valid) continue;
    for (uint32_t n : kLengths)
      for (size_t offset : {0, 2}) check(dts, n, offset);
  }
}

TEST(RowKernels, AluMatchesTheFloat32BlockPath) {
  std::mt19937 rng(1);
  const neff::AluOp ops[] = {neff::ADD,      neff::SUB,       neff::MUL,   neff::DIV,   neff::MAX,
                             neff::MIN,      neff::IS_EQUAL,  neff::NOT_EQUAL, neff::IS_LT, neff::IS_LE,
                             neff::IS_GT,    neff::IS_GE,     neff::POW};
  ForEveryShape(3, [&](const std::vector<DType>& dts, uint32_t n, size_t offset) {
    std::vector<float> va = Values(n, &rng), vb = Values(n, &rng);
    // Equal pairs, so that the comparisons also see ties.
    for (uint32_t i = 0; i < n; i += 5) vb[i] = va[i];
    const Row a = MakeRow(dts[0], va, offset), b = MakeRow(dts[1], vb, 0);
    const std::vector<float> wa = Widened(a, n), wb = Widened(b, n);
    for (neff::AluOp op : ops) {
      Row got = EmptyRow(dts[2], n, offset), want = EmptyRow(dts[2], n, offset);
      vm::AluRow(op, {a.dt, a.data()}, {b.dt, b.data()}, {got.dt, got.data()}, n);
      std::vector<float> c(n);
      vm::Alu(op, wa.data(), wb.data(), c.data(), n);
      vm::Narrow(want.dt, c.data(), n, want.data());
      ASSERT_EQ("", FirstDifference(got, want, n)) << neff::AluOp_Name(op) << ", " << Describe(dts, n, offset);
    }
  });
}

TEST(RowKernels, AluScalarMatchesTheFloat32BlockPath) {
  std::mt19937 rng(2);
  const neff::AluOp ops[] = {neff::BYPASS, neff::ADD,   neff::SUB,   neff::MUL,   neff::DIV,
                             neff::MAX,    neff::MIN,   neff::IS_EQUAL, neff::NOT_EQUAL, neff::IS_LT,
                             neff::IS_LE,  neff::IS_GT, neff::IS_GE, neff::POW};
  const float scalars[] = {0.5f, -0.0f, 0.0f, 3.0f, BitsFloat(0x7fc00000u), BitsFloat(0xff800000u)};
  ForEveryShape(2, [&](const std::vector<DType>& dts, uint32_t n, size_t offset) {
    const std::vector<float> va = Values(n, &rng);
    const Row a = MakeRow(dts[0], va, offset);
    const std::vector<float> wa = Widened(a, n);
    for (neff::AluOp op : ops)
      for (float s : scalars)
        for (bool reverse : {false, true}) {
          Row got = EmptyRow(dts[1], n, offset), want = EmptyRow(dts[1], n, offset);
          vm::AluScalarRow(op, {a.dt, a.data()}, s, reverse, {got.dt, got.data()}, n);
          std::vector<float> c(n);
          vm::AluScalar(op, wa.data(), s, reverse, c.data(), n);
          vm::Narrow(want.dt, c.data(), n, want.data());
          ASSERT_EQ("", FirstDifference(got, want, n)) << neff::AluOp_Name(op) << " s " << s << (reverse ? " reversed" : "")
                                           << ", " << Describe(dts, n, offset);
        }
  });
}

// Division by one number per row may skip the per-element division (an
// FMA sequence, row_kernels.cc) when the divisor and every element lie in
// [2^-60, 2^60]; it must still give exactly x / s. For every sixteenth
// significand of the divisor (scaled to exponents across the range): the
// hardest quotients there are, within about 2^-48 of a midpoint between
// two floats (where a sequence that is only nearly right rounds the wrong
// way), quotients near representable values, and random ones; from float32
// and from bfloat16. Then rows at the edges of the range.
TEST(RowKernels, DivisionByARowScalarIsCorrectlyRounded) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> significand(0, (1u << 23) - 1);
  std::uniform_int_distribution<int> exponent(-29, 29);
  constexpr uint32_t kRow = 48;  // three groups of 16
  std::vector<float> x(kRow), got(kRow), widened(kRow);
  auto divides = [&](const std::vector<float>& row, DType dt, float s) {
    std::vector<uint8_t> bytes(row.size() * neff::DTypeSize(dt));
    vm::Narrow(dt, row.data(), uint32_t(row.size()), bytes.data());
    vm::Widen(dt, bytes.data(), uint32_t(row.size()), widened.data());
    vm::AluScalarRow(neff::DIV, {dt, bytes.data()}, s, false, {neff::F32, reinterpret_cast<uint8_t*>(got.data())},
                     uint32_t(row.size()));
    // Into bfloat16 too: the float32 quotient, rounded once more.
    std::vector<uint16_t> got16(row.size());
    vm::AluScalarRow(neff::DIV, {neff::F32, reinterpret_cast<const uint8_t*>(widened.data())}, s, false,
                     {neff::BF16, reinterpret_cast<uint8_t*>(got16.data())}, uint32_t(row.size()));
    for (size_t i = 0; i < row.size(); ++i) {
      const float want = widened[i] / s;
      if (std::memcmp(&got[i], &want, 4) != 0 || got16[i] != rt::FloatToBf16(want)) {
        ADD_FAILURE() << neff::DTypeName(dt) << " " << std::hexfloat << widened[i] << " / " << s << " gave "
                      << got[i] << " (bf16 " << got16[i] << "), not " << want;
        return false;
      }
    }
    return true;
  };
  for (uint32_t m = 0; m < (1u << 23); m += 16) {
    // An odd 24-bit divisor S has an inverse modulo 2^25. For small odd r,
    // M = r / S (mod 2^25), when it has 25 bits, makes M S - r a multiple
    // of 2^25: X = (M S - r) / 2^25 is a float, and X / S lies r / (2^25 S)
    // from M / 2^25, a midpoint.
    const uint32_t S = (1u << 23) | m | 1u;
    uint32_t inverse = S;
    for (int k = 0; k < 5; ++k) inverse *= 2u - S * inverse;
    const int es = exponent(rng);
    const float s = std::ldexp(float(S), es - 23);
    uint32_t i = 0;
    for (int32_t r = 1; i < 16 && r < 200; r = r > 0 ? -r : 2 - r) {
      const uint32_t M = (uint32_t(r) * inverse) & ((1u << 25) - 1);
      if (M < (1u << 24)) continue;
      const uint64_t X = (uint64_t(M) * S - uint64_t(int64_t(r))) >> 25;
      x[i++] = std::ldexp(float(X), es - 23 + exponent(rng)) * (r % 4 == 1 ? 1.0f : -1.0f);
    }
    for (; i < kRow; ++i) {
      // Near a representable quotient, or anywhere.
      const float q = std::ldexp(1.0f + float(significand(rng)) * 0x1p-23f, exponent(rng));
      x[i] = i < 32 ? float(double(q) * double(s)) : std::ldexp(1.0f + float(significand(rng)) * 0x1p-23f, exponent(rng));
    }
    if (!divides(x, neff::F32, m % 32 ? s : -s) || !divides(x, neff::BF16, s)) return;
  }
  // The divisor at the edges of the range and past them (those rows divide
  // element by element).
  for (float s : {0x1p-60f, 0x1p60f, std::nextafter(0x1p-60f, 0.0f), std::nextafter(0x1p60f, 1e38f),
                  0x1.fffffep59f, 0x1.000002p-60f, 3.0f, 1.0f, -7.0f})
    if (!divides(x, neff::F32, s)) return;
  // Elements at the edges: exactly 2^-60 and 2^60, and just past them; and
  // ones the FMA sequence gets wrong (infinities, a quotient that
  // overflows), or that underflow, which the row must divide element by
  // element.
  for (float edge : {0x1p-60f, 0x1p60f, std::nextafter(0x1p-60f, 0.0f), std::nextafter(0x1p60f, 1e38f),
                     std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                     std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(), 0.0f, -0.0f}) {
    std::vector<float> row(kRow, 1.25f);
    row[kRow - 1] = edge;
    for (float s : {3.0f, 0x1.8p-59f}) {
      if (!divides(row, neff::F32, s)) return;
      // In place too (the range is then checked before dividing).
      std::vector<float> inplace = row;
      auto* bytes = reinterpret_cast<uint8_t*>(inplace.data());
      vm::AluScalarRow(neff::DIV, {neff::F32, bytes}, s, false, {neff::F32, bytes}, kRow);
      for (uint32_t i = 0; i < kRow; ++i) {
        const float want = row[i] / s;
        ASSERT_EQ(0, std::memcmp(&inplace[i], &want, 4)) << row[i] << " / " << s << " in place";
      }
    }
  }
}

// Rounding to bfloat16, as every kernel with a bfloat16 output does it (on
// hosts with AVX512-BF16, by its conversion instruction, except where a
// group holds a float32 subnormal): the bits of FloatToBf16 for float32
// patterns across the whole range (every 251st, and every pattern of the
// subnormals' top, the largest finite values and the ties in between), and
// for every bfloat16 pattern from a bfloat16 row, whose even and odd
// elements are rounded apart.
TEST(RowKernels, RoundingToBfloat16MatchesFloatToBf16) {
  std::vector<uint32_t> patterns;
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 251) patterns.push_back(uint32_t(u));
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t u = 0x007f0000u; u < 0x00810000u; ++u) patterns.push_back(sign | u);  // subnormal to normal
    for (uint32_t u = 0x7f7f0000u; u < 0x7f810000u; ++u) patterns.push_back(sign | u);  // to Inf, Inf, NaN
    for (uint32_t e = 0; e < 256; ++e)
      for (uint32_t low : {0x7fffu, 0x8000u, 0x8001u, 0x18000u})
        patterns.push_back(sign | e << 23 | low);  // ties and their neighbours
  }
  constexpr uint32_t kChunk = 4096;
  std::vector<uint16_t> got(kChunk);
  for (size_t i0 = 0; i0 < patterns.size(); i0 += kChunk) {
    const uint32_t n = uint32_t(std::min<size_t>(kChunk, patterns.size() - i0));
    vm::AluScalarRow(neff::BYPASS, {neff::F32, reinterpret_cast<const uint8_t*>(patterns.data() + i0)}, 0.0f, false,
                     {neff::BF16, reinterpret_cast<uint8_t*>(got.data())}, n);
    for (uint32_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], rt::FloatToBf16(BitsFloat(patterns[i0 + i])))
          << std::hex << "float32 bits " << patterns[i0 + i];
  }
  std::vector<uint16_t> all(1 << 16), out(1 << 16);
  for (uint32_t h = 0; h < all.size(); ++h) all[h] = uint16_t(h);
  for (neff::AluOp op : {neff::BYPASS, neff::MUL}) {  // MUL by 1: the same value
    vm::AluScalarRow(op, {neff::BF16, reinterpret_cast<const uint8_t*>(all.data())}, 1.0f, false,
                     {neff::BF16, reinterpret_cast<uint8_t*>(out.data())}, uint32_t(all.size()));
    for (uint32_t h = 0; h < all.size(); ++h)
      ASSERT_EQ(out[h], rt::FloatToBf16(rt::Bf16ToFloat(uint16_t(h))))
          << std::hex << neff::AluOp_Name(op) << " bfloat16 bits " << h;
  }
}

TEST(RowKernels, ActivationsAndTheirAccumMatchTheFloat32BlockPath) {
  std::mt19937 rng(3);
  const neff::ActivationFunc funcs[] = {neff::IDENTITY, neff::EXP,     neff::RSQRT,      neff::SQRT,
                                        neff::SQUARE,   neff::NEGATE,  neff::RECIPROCAL, neff::LOG,
                                        neff::TANH,     neff::SIGMOID, neff::RELU,       neff::GELU,
                                        neff::GELU_TANH, neff::SILU,   neff::ABS};
  const float affine[][2] = {{1.0f, 0.0f}, {-0.75f, 0.25f}, {3.0f, -0.0f}};
  ForEveryShape(2, [&](const std::vector<DType>& dts, uint32_t n, size_t offset) {
    const std::vector<float> va = Values(n, &rng);
    const Row a = MakeRow(dts[0], va, offset);
    const std::vector<float> wa = Widened(a, n);
    for (neff::ActivationFunc f : funcs)
      for (const auto& sb : affine) {
        Row got = EmptyRow(dts[1], n, offset), want = EmptyRow(dts[1], n, offset);
        vm::LaneSum got_sum, want_sum;
        vm::ActivationRow(f, {a.dt, a.data()}, sb[0], sb[1], {got.dt, got.data()}, n, &got_sum);
        std::vector<float> c(n);
        // The block path feeds its sum a block (a multiple of 32) at a time.
        for (uint32_t f0 = 0; f0 < n; f0 += vm::kBlock) {
          const uint32_t m = std::min(vm::kBlock, n - f0);
          vm::Activation(f, wa.data() + f0, sb[0], sb[1], c.data() + f0, m);
          want_sum.Add(c.data() + f0, m);
        }
        vm::Narrow(want.dt, c.data(), n, want.data());
        const std::string what = neff::ActivationFunc_Name(f) + ", " + Describe(dts, n, offset);
        ASSERT_EQ("", FirstDifference(got, want, n)) << what;
        const float gs = got_sum.Total(), ws = want_sum.Total();
        ASSERT_TRUE(SameFloat(gs, ws)) << what << ": accum " << gs << " against " << ws;
        // Without an accum, the same output.
        Row plain = EmptyRow(dts[1], n, offset);
        vm::ActivationRow(f, {a.dt, a.data()}, sb[0], sb[1], {plain.dt, plain.data()}, n, nullptr);
        ASSERT_EQ("", FirstDifference(plain, want, n)) << what << " (no accum)";
      }
  });
}

TEST(RowKernels, SelectMatchesTheFloat32BlockPath) {
  std::mt19937 rng(4);
  ForEveryShape(4, [&](const std::vector<DType>& dts, uint32_t n, size_t offset) {
    std::vector<float> vp = Values(n, &rng);
    for (uint32_t i = 0; i < n; i += 3) vp[i] = 0.0f;
    const Row a = MakeRow(dts[0], Values(n, &rng), offset), b = MakeRow(dts[1], Values(n, &rng), 0),
              p = MakeRow(dts[2], vp, offset);
    Row got = EmptyRow(dts[3], n, offset), want = EmptyRow(dts[3], n, offset);
    vm::SelectRow({a.dt, a.data()}, {b.dt, b.data()}, {p.dt, p.data()}, {got.dt, got.data()}, n);
    const std::vector<float> wa = Widened(a, n), wb = Widened(b, n), wp = Widened(p, n);
    std::vector<float> c(n);
    vm::Select(wa.data(), wb.data(), wp.data(), c.data(), n);
    vm::Narrow(want.dt, c.data(), n, want.data());
    ASSERT_EQ("", FirstDifference(got, want, n)) << Describe(dts, n, offset);
  });
}

TEST(RowKernels, SumsAndExtremesMatchTheFloat32BlockPath) {
  std::mt19937 rng(5);
  for (DType dt : kDtypes)
    for (uint32_t n : kLengths)
      for (size_t offset : {0, 2})
        for (bool specials : {false, true}) {
          std::vector<float> v = Values(n, &rng);
          if (!specials)
            for (float& x : v)
              if (!std::isfinite(x)) x = 1.0f;
          const Row a = MakeRow(dt, v, offset);
          const std::vector<float> w = Widened(a, n);
          vm::LaneSum got, want;
          vm::SumRow({a.dt, a.data()}, n, &got);
          for (uint32_t f0 = 0; f0 < n; f0 += vm::kBlock) want.Add(w.data() + f0, std::min(vm::kBlock, n - f0));
          const float gs = got.Total(), ws = want.Total();
          ASSERT_TRUE(SameFloat(gs, ws)) << Describe({dt}, n, offset);
          for (bool max : {false, true}) {
            vm::Extreme ge(max), we(max);
            vm::ExtremeRow({a.dt, a.data()}, n, &ge);
            we.Add(w.data(), n);
            const float gr = ge.Result(), wr = we.Result();
            ASSERT_TRUE(SameFloat(gr, wr)) << (max ? "max, " : "min, ") << Describe({dt}, n, offset);
          }
        }
}

}  // namespace
}  // namespace neuroncc
