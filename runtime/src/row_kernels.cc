#include "sleef_support.h"  // NEURONCC_CLONES
#include "row_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "float_convert.h"
#include "matmul_kernel.h"  // the vector types, Load16, Store16, Splat16

namespace neuroncc::rt::vm {

using neff::DType;

namespace {

// Inlined into each caller, so that the code takes the caller's target
// (AVX2 or the baseline).
#define NEURONCC_INLINE inline __attribute__((always_inline))
// The same for lambdas, which GCC would otherwise build for the baseline
// whatever the target of the function around them.
#define NEURONCC_LAMBDA __attribute__((always_inline))

// The storage formats that rows are computed in directly.
enum Fmt { kF32, kBf16 };

// Elements per group: one vector of float32 lanes.
constexpr uint32_t kW = 16;

// kW elements of a format, as float32 lanes.
template <Fmt F>
struct Lanes;
template <>
struct Lanes<kF32> {
  static constexpr size_t kBytes = 4;
  static NEURONCC_INLINE void Load(const uint8_t* p, V16* v) { *v = Load16(p); }
  static NEURONCC_INLINE void Store(uint8_t* p, const V16& v) { Store16(p, v); }
};
template <>
struct Lanes<kBf16> {
  static constexpr size_t kBytes = 2;
  static NEURONCC_INLINE void Load(const uint8_t* p, V16* v) { WidenBf16x16(p, v); }
  static NEURONCC_INLINE void Store(uint8_t* p, const V16& v) { NarrowBf16x16(v, p); }
};

// body(x, &y) for every group of kW elements: x[k] holds the lanes of input
// k (stored in format I[k]), y the output's (stored in O). The last, partial
// group is padded with zeros, computed, and only its real elements are
// stored.
template <Fmt O, Fmt... I, typename Body, size_t... K>
NEURONCC_INLINE void MapRowOf(const uint8_t* const* in, uint8_t* out, uint32_t n, Body body,
                              std::index_sequence<K...>) {
  constexpr size_t BO = Lanes<O>::kBytes;
  V16 x[sizeof...(I) > 0 ? sizeof...(I) : 1], y;
  uint32_t i = 0;
  if constexpr (O == kBf16 && ((I == kBf16) && ...)) {
    // Every operand bfloat16: 2 kW elements at a time, split into even and
    // odd elements (SplitBf16x32), which the elementwise body cannot tell.
    V16 x2[sizeof...(I) > 0 ? sizeof...(I) : 1], y2;
    for (; i + 2 * kW <= n; i += 2 * kW) {
      (SplitBf16x32(in[K] + 2 * i, &x[K], &x2[K]), ...);
      body(x, &y);
      body(x2, &y2);
      JoinBf16x32(y, y2, out + 2 * i);
    }
  }
  for (; i + kW <= n; i += kW) {
    (Lanes<I>::Load(in[K] + i * Lanes<I>::kBytes, &x[K]), ...);
    body(x, &y);
    Lanes<O>::Store(out + i * BO, y);
  }
  if (i == n) return;
  uint8_t pad[sizeof...(I)][4 * kW] = {}, tail[4 * kW];
  (std::memcpy(pad[K], in[K] + i * Lanes<I>::kBytes, (n - i) * Lanes<I>::kBytes), ...);
  (Lanes<I>::Load(pad[K], &x[K]), ...);
  body(x, &y);
  Lanes<O>::Store(tail, y);
  std::memcpy(out + i * BO, tail, (n - i) * BO);
}

template <Fmt O, Fmt... I, typename Body>
NEURONCC_INLINE void MapRow(const uint8_t* const* in, uint8_t* out, uint32_t n, Body body) {
  MapRowOf<O, I...>(in, out, n, body, std::index_sequence_for<decltype(I)...>{});
}

// A row sum's 32 lanes as two vectors for elements split into even and odd
// ones (SplitBf16x32): lanes 0, 2, .., 30 and lanes 1, 3, .., 31.
NEURONCC_INLINE void LoadEvenOddLanes(const float* lanes, V16* even, V16* odd) {
  for (uint32_t j = 0; j < kW; ++j) {
    (*even)[j] = lanes[2 * j];
    (*odd)[j] = lanes[2 * j + 1];
  }
}
NEURONCC_INLINE void StoreEvenOddLanes(const V16& even, const V16& odd, float* lanes) {
  for (uint32_t j = 0; j < kW; ++j) {
    lanes[2 * j] = even[j];
    lanes[2 * j + 1] = odd[j];
  }
}

// MapRow with one input, 32 elements (LaneSum's width) per call of
// body(x, r): x[k] and r[k] hold elements kW k .. kW k + kW - 1 of the 32.
// When `lanes` is given, each float32 result is also added to lanes[f % 32]
// (the row sum's documented order).
template <Fmt I, Fmt O, typename Body>
NEURONCC_INLINE void MapRowSum(const uint8_t* in, uint8_t* out, uint32_t n, float* lanes, Body body) {
  constexpr size_t BI = Lanes<I>::kBytes, BO = Lanes<O>::kBytes;
  constexpr uint32_t W = LaneSum::kLanes;
  constexpr int G = int(W / kW);  // groups per call
  static_assert(W % kW == 0, "whole groups per call");
  V16 s[G] = {}, x[G], r[G];
  uint32_t i = 0;
  if constexpr (I == kBf16 && O == kBf16 && G == 2) {
    // Even and odd elements apart: s[0] holds the even lanes and s[1] the
    // odd ones, each still adding its elements in order.
    if (lanes) LoadEvenOddLanes(lanes, &s[0], &s[1]);
    for (; i + W <= n; i += W) {
      SplitBf16x32(in + 2 * i, &x[0], &x[1]);
      body(x, r);
      JoinBf16x32(r[0], r[1], out + 2 * i);
      if (lanes) {
        s[0] += r[0];
        s[1] += r[1];
      }
    }
    if (lanes) StoreEvenOddLanes(s[0], s[1], lanes);
  } else {
    if (lanes)
      for (int k = 0; k < G; ++k) s[k] = Load16(lanes + kW * k);
    for (; i + W <= n; i += W) {
      for (int k = 0; k < G; ++k) Lanes<I>::Load(in + (i + kW * k) * BI, &x[k]);
      body(x, r);
      for (int k = 0; k < G; ++k) Lanes<O>::Store(out + (i + kW * k) * BO, r[k]);
      if (lanes)
        for (int k = 0; k < G; ++k) s[k] += r[k];
    }
    if (lanes)
      for (int k = 0; k < G; ++k) Store16(lanes + kW * k, s[k]);
  }
  if (i == n) return;
  const uint32_t m = n - i;
  uint8_t pad[W * BI] = {}, tail[W * BO];
  std::memcpy(pad, in + i * BI, m * BI);
  for (int k = 0; k < G; ++k) Lanes<I>::Load(pad + kW * k * BI, &x[k]);
  body(x, r);
  alignas(64) float results[W];
  for (int k = 0; k < G; ++k) {
    Lanes<O>::Store(tail + kW * k * BO, r[k]);
    Store16(results + kW * k, r[k]);
  }
  std::memcpy(out + i * BO, tail, m * BO);
  if (lanes)
    for (uint32_t j = 0; j < m; ++j) lanes[j] += results[j];
}

// ---------------------------------------------------------------------------
// Lane forms of the scalar rules in vector_math.cc.

// MaxF / MinF: NaN propagates, -0 < +0.
NEURONCC_INLINE V16 MaxLanes(const V16& a, const V16& b) {
  V16 r = I16(a) < 0 ? b : a;
  r = b != b ? b : r;
  r = a != a ? a : r;
  r = b > a ? b : r;
  return a > b ? a : r;
}

NEURONCC_INLINE V16 MinLanes(const V16& a, const V16& b) {
  V16 r = I16(a) < 0 ? a : b;
  r = b != b ? b : r;
  r = a != a ? a : r;
  r = b < a ? b : r;
  return a < b ? a : r;
}

// 1.0 where the mask is set, else 0.0.
NEURONCC_INLINE V16 OneOrZero(const I16& mask) { return mask ? Splat16(1.0f) : Splat16(0.0f); }

// The format a dtype is computed in directly, or -1 (float16).
int FormatOf(DType d) { return d == neff::F32 ? kF32 : d == neff::BF16 ? kBf16 : -1; }

// Calls f(tag<F0>, tag<F1>, ...) with each operand's format as a type, for
// formats known at run time (each >= 0).
template <Fmt F>
using FmtTag = std::integral_constant<Fmt, F>;

template <typename Fn>
NEURONCC_INLINE void WithFormats(Fn fn) { fn(); }

template <typename Fn, typename... Rest>
NEURONCC_INLINE void WithFormats(Fn fn, int f, Rest... rest) {
  if (f == kF32)
    WithFormats([&](auto... t) NEURONCC_LAMBDA { fn(FmtTag<kF32>{}, t...); }, rest...);
  else
    WithFormats([&](auto... t) NEURONCC_LAMBDA { fn(FmtTag<kBf16>{}, t...); }, rest...);
}

// ---------------------------------------------------------------------------
// ALU

// Whether AluFused computes `op` (POW and the rest go through float32 blocks).
bool FusedAlu(neff::AluOp op) {
  switch (op) {
    case neff::ADD:
    case neff::SUB:
    case neff::MUL:
    case neff::DIV:
    case neff::MAX:
    case neff::MIN:
    case neff::IS_EQUAL:
    case neff::NOT_EQUAL:
    case neff::IS_LT:
    case neff::IS_LE:
    case neff::IS_GT:
    case neff::IS_GE: return true;
    default: return false;
  }
}

template <Fmt A, Fmt B, Fmt C>
NEURONCC_INLINE void AluFused(neff::AluOp op, const uint8_t* a, const uint8_t* b, uint8_t* c, uint32_t n) {
  const uint8_t* in[2] = {a, b};
  auto map = [&](auto f) NEURONCC_LAMBDA {
    MapRow<C, A, B>(in, c, n, [&](const V16* x, V16* y) NEURONCC_LAMBDA { *y = f(x[0], x[1]); });
  };
  switch (op) {
    case neff::ADD: return map([](const V16& x, const V16& y) NEURONCC_LAMBDA { return x + y; });
    case neff::SUB: return map([](const V16& x, const V16& y) NEURONCC_LAMBDA { return x - y; });
    case neff::MUL: return map([](const V16& x, const V16& y) NEURONCC_LAMBDA { return x * y; });
    case neff::DIV: return map([](const V16& x, const V16& y) NEURONCC_LAMBDA { return x / y; });
    case neff::MAX: return map([](const V16& x, const V16& y) NEURONCC_LAMBDA { return MaxLanes(x, y); });
    case neff::MIN: return map([](const V16& x, const V16& y) NEURONCC_LAMBDA { return MinLanes(x, y); });
    case neff::IS_EQUAL: return map([](const V16& x, const V16& y) NEURONCC_LAMBDA { return OneOrZero(x == y); });
    case neff::NOT_EQUAL: return map([](const V16& x, const V16& y) NEURONCC_LAMBDA { return OneOrZero(x != y); });
    case neff::IS_LT: return map([](const V16& x, const V16& y) NEURONCC_LAMBDA { return OneOrZero(x < y); });
    case neff::IS_LE: return map([](const V16& x, const V16& y) NEURONCC_LAMBDA { return OneOrZero(x <= y); });
    case neff::IS_GT: return map([](const V16& x, const V16& y) NEURONCC_LAMBDA { return OneOrZero(x > y); });
    case neff::IS_GE: return map([](const V16& x, const V16& y) NEURONCC_LAMBDA { return OneOrZero(x >= y); });
    default: return;
  }
}

NEURONCC_CLONES void AluFusedAny(neff::AluOp op, int fa, int fb, int fc, const uint8_t* a, const uint8_t* b,
                                 uint8_t* c, uint32_t n) {
  WithFormats([&](auto ta, auto tb, auto tc) NEURONCC_LAMBDA {
    AluFused<decltype(ta)::value, decltype(tb)::value, decltype(tc)::value>(op, a, b, c, n);
  }, fa, fb, fc);
}

// Whether AluScalarFused computes `op`.
bool FusedAluScalar(neff::AluOp op) { return op == neff::BYPASS || FusedAlu(op); }

// Division of a row by one number s without a division per element, where
// that gives the same bits as the division: q2 below is x / s rounded to
// nearest. With y = RN(1/s) (one division per row), q0 = RN(x y) is within
// 1.5 ulp of x / s; one correction q1 = RN(q0 + RN(x - s q0) y) brings it
// within 1 ulp (the value before rounding is within 2^-46 of x / s,
// relatively); the remainder x - s q1 is then exact in float32, and
// q2 = RN(q1 + (x - s q1) y), each step one fused multiply-add, is the
// correctly rounded quotient (Markstein's theorem: P. Markstein, "Computation
// of elementary functions on the IBM RISC System/6000 processor", IBM J. Res.
// Dev. 34(1), 1990; also Muller et al., Handbook of Floating-Point
// Arithmetic, the chapter on division with an FMA). The theorem assumes no
// underflow or overflow along the way: the fast path is taken only when s
// and every element lie in [2^-60, 2^60] in magnitude (so no zero,
// subnormal, infinity or NaN either); any other row divides element by
// element. Four FMAs and a multiply cost less than one vdivps on 16 lanes.
constexpr uint32_t kFmaDivisionLow = (127 - 60) << 23;   // 2^-60, as float32 bits
constexpr uint32_t kFmaDivisionHigh = (127 + 60) << 23;  // 2^60

bool FmaDivision() {
#ifdef NEURONCC_CLONES_AVX512_FMA
  // The loader takes the AVX-512 copy on exactly the x86-64-v4 hosts. The
  // switches that keep SLEEF off its AVX-512 build (HasAvx512) also divide
  // element by element here (the same bits): for comparing the two.
  static const bool yes = HasAvx512() && __builtin_cpu_supports("x86-64-v4") != 0;
  return yes;
#else
  return false;
#endif
}

bool InFmaDivisionRange(uint32_t bits) { return (bits & 0x7fffffffu) - kFmaDivisionLow <= kFmaDivisionHigh - kFmaDivisionLow; }

// Whether every element of a row lies in the fast path's range.
template <Fmt A>
NEURONCC_INLINE bool RowInFmaDivisionRange(const uint8_t* a, uint32_t n) {
  if constexpr (A == kF32) {
    uint32_t worst = 0;
    for (uint32_t i = 0; i < n; ++i) {
      uint32_t w;
      std::memcpy(&w, a + 4 * size_t(i), 4);
      worst = std::max(worst, (w & 0x7fffffffu) - kFmaDivisionLow);
    }
    return worst <= kFmaDivisionHigh - kFmaDivisionLow;
  } else {
    // bfloat16 is the high half of float32: the same test on 16 bits.
    constexpr uint16_t low = kFmaDivisionLow >> 16, high = kFmaDivisionHigh >> 16;
    uint16_t worst = 0;
    for (uint32_t i = 0; i < n; ++i) {
      uint16_t w;
      std::memcpy(&w, a + 2 * size_t(i), 2);
      worst = std::max(worst, uint16_t((w & 0x7fffu) - low));
    }
    return worst <= high - low;
  }
}

#ifdef NEURONCC_CLONES_AVX512_FMA
// One group's quotients, as above.
__attribute__((target("arch=x86-64-v4"), always_inline)) inline V16 QuotientAvx512(const V16& x, __m512 s, __m512 y) {
  const __m512 q0 = _mm512_mul_ps(x, y);
  const __m512 q1 = _mm512_fmadd_ps(_mm512_fnmadd_ps(q0, s, x), y, q0);
  return _mm512_fmadd_ps(_mm512_fnmadd_ps(q1, s, x), y, q1);
}

// A function of its own, not a lambda inside the cloned kernels: the FMA
// intrinsics compile only in a function built for a target that has them.
template <Fmt A, Fmt C>
__attribute__((target("arch=x86-64-v4"))) void DivideByScalarAvx512(const uint8_t* a, float s, uint8_t* c,
                                                                     uint32_t n) {
  constexpr size_t BA = Lanes<A>::kBytes, BC = Lanes<C>::kBytes;
  const __m512 sv = _mm512_set1_ps(s), yv = _mm512_set1_ps(1.0f / s);
  V16 x;
  uint32_t i = 0;
  for (; i + kW <= n; i += kW) {
    Lanes<A>::Load(a + i * BA, &x);
    Lanes<C>::Store(c + i * BC, QuotientAvx512(x, sv, yv));
  }
  if (i == n) return;
  // The last, partial group: padded with ones (in range), only its real
  // elements stored.
  alignas(64) uint8_t pad[4 * kW], tail[4 * kW];
  const V16 ones = Splat16(1.0f);
  Lanes<A>::Store(pad, ones);
  std::memcpy(pad, a + i * BA, (n - i) * BA);
  Lanes<A>::Load(pad, &x);
  Lanes<C>::Store(tail, QuotientAvx512(x, sv, yv));
  std::memcpy(c + i * BC, tail, (n - i) * BC);
}
#endif

// Divides the row by s with the FMA sequence above where it applies (the
// host takes the AVX-512 copy, s and every element in range); false if not.
// Only into float32: rounding to bfloat16 costs as many vector-port
// operations as the FMAs save (measured: no faster into bfloat16, and 20%
// slower bfloat16 to bfloat16, which the division path splits into even and
// odd elements instead).
template <Fmt A, Fmt C>
NEURONCC_INLINE bool DivideByScalar(const uint8_t* a, float s, uint8_t* c, uint32_t n) {
#ifdef NEURONCC_CLONES_AVX512_FMA
  if constexpr (C != kF32) {
    return false;
  } else {
    uint32_t sb;
    std::memcpy(&sb, &s, 4);
    if (!FmaDivision() || !InFmaDivisionRange(sb) || !RowInFmaDivisionRange<A>(a, n)) return false;
    DivideByScalarAvx512<A, C>(a, s, c, n);
    return true;
  }
#else
  (void)a, (void)s, (void)c, (void)n;
  return false;
#endif
}

template <Fmt A, Fmt C>
NEURONCC_INLINE void AluScalarFused(neff::AluOp op, const uint8_t* a, float s, bool reverse, uint8_t* c,
                                    uint32_t n) {
  const V16 v = Splat16(s);
  // f(x, v), or f(v, x) when reversed.
  auto map = [&](auto f) NEURONCC_LAMBDA {
    if (reverse)
      MapRow<C, A>(&a, c, n, [&](const V16* x, V16* y) NEURONCC_LAMBDA { *y = f(v, x[0]); });
    else
      MapRow<C, A>(&a, c, n, [&](const V16* x, V16* y) NEURONCC_LAMBDA { *y = f(x[0], v); });
  };
  switch (op) {
    case neff::BYPASS: return MapRow<C, A>(&a, c, n, [](const V16* x, V16* y) NEURONCC_LAMBDA { *y = x[0]; });
    // Commutative (MaxF and MinF too: their result never depends on the order).
    case neff::ADD: return MapRow<C, A>(&a, c, n, [&](const V16* x, V16* y) NEURONCC_LAMBDA { *y = x[0] + v; });
    case neff::MUL: return MapRow<C, A>(&a, c, n, [&](const V16* x, V16* y) NEURONCC_LAMBDA { *y = x[0] * v; });
    case neff::MAX: return MapRow<C, A>(&a, c, n, [&](const V16* x, V16* y) NEURONCC_LAMBDA { *y = MaxLanes(x[0], v); });
    case neff::MIN: return MapRow<C, A>(&a, c, n, [&](const V16* x, V16* y) NEURONCC_LAMBDA { *y = MinLanes(x[0], v); });
    case neff::IS_EQUAL: return MapRow<C, A>(&a, c, n, [&](const V16* x, V16* y) NEURONCC_LAMBDA { *y = OneOrZero(x[0] == v); });
    case neff::NOT_EQUAL: return MapRow<C, A>(&a, c, n, [&](const V16* x, V16* y) NEURONCC_LAMBDA { *y = OneOrZero(x[0] != v); });
    case neff::SUB: return map([](const V16& x, const V16& y) NEURONCC_LAMBDA { return x - y; });
    case neff::DIV:
      if (!reverse && DivideByScalar<A, C>(a, s, c, n)) return;
      return map([](const V16& x, const V16& y) NEURONCC_LAMBDA { return x / y; });
    case neff::IS_LT: return map([](const V16& x, const V16& y) NEURONCC_LAMBDA { return OneOrZero(x < y); });
    case neff::IS_LE: return map([](const V16& x, const V16& y) NEURONCC_LAMBDA { return OneOrZero(x <= y); });
    case neff::IS_GT: return map([](const V16& x, const V16& y) NEURONCC_LAMBDA { return OneOrZero(x > y); });
    case neff::IS_GE: return map([](const V16& x, const V16& y) NEURONCC_LAMBDA { return OneOrZero(x >= y); });
    default: return;
  }
}

NEURONCC_CLONES void AluScalarFusedAny(neff::AluOp op, int fa, int fc, const uint8_t* a, float s, bool reverse,
                                       uint8_t* c, uint32_t n) {
  WithFormats([&](auto ta, auto tc) NEURONCC_LAMBDA {
    AluScalarFused<decltype(ta)::value, decltype(tc)::value>(op, a, s, reverse, c, n);
  }, fa, fc);
}

// ---------------------------------------------------------------------------
// Activations

// Whether a function calls SLEEF.
bool CallsSleef(neff::ActivationFunc f) {
  switch (f) {
    case neff::EXP:
    case neff::LOG:
    case neff::TANH:
    case neff::SIGMOID:
    case neff::SILU:
    case neff::GELU:
    case neff::GELU_TANH: return true;
    default: return false;
  }
}

// An activation that calls SLEEF, in three passes per block of the row
// held in L1: y = x * scale + bias and t = pre(y), the inputs read in their
// format; then t = fn(t) by SLEEF, a loop of calls with nothing else live
// across them (a call clobbers every vector register, so fusing it into
// one pass measured no faster); then post(y, t), stored in the output's
// format and summed into `accum` if given. The same steps as vector_math.cc's
// Activation, without its widening and narrowing passes.
template <Fmt I, Fmt O, typename Pre, typename Post>
NEURONCC_INLINE void StagedActivation(const uint8_t* a, uint8_t* c, uint32_t n, float scale, float bias,
                                      SleefFunc fn, LaneSum* accum, Pre pre, Post post) {
  constexpr size_t BI = Lanes<I>::kBytes, BO = Lanes<O>::kBytes;
  // bfloat16 in and out: whole steps of 2 kW elements go split into even
  // and odd elements (SplitBf16x32), each half contiguous in y and t.
  constexpr bool kSplit = I == kBf16 && O == kBf16;
  alignas(64) float y[kBlock], t[kBlock];
  const V16 sv = Splat16(scale), bv = Splat16(bias);
  for (uint32_t f0 = 0; f0 < n; f0 += kBlock) {
    const uint32_t m = std::min(kBlock, n - f0), full = m / kW, groups = (m + kW - 1) / kW;
    const uint32_t paired = kSplit ? m / (2 * kW) * (2 * kW) : 0;
    const uint8_t* src = a + size_t(f0) * BI;
    uint8_t* dst = c + size_t(f0) * BO;
    auto first = [&](const V16& x, uint32_t at) NEURONCC_LAMBDA {
      const V16 vy = x * sv + bv;
      Store16(y + at, vy);
      Store16(t + at, pre(vy));
    };
    for (uint32_t p = 0; p < paired; p += 2 * kW) {
      V16 even, odd;
      SplitBf16x32(src + p * BI, &even, &odd);
      first(even, p);
      first(odd, p + kW);
    }
    for (uint32_t g = paired / kW; g < full; ++g) {
      V16 x;
      Lanes<I>::Load(src + kW * g * BI, &x);
      first(x, kW * g);
    }
    if (full < groups) {  // the last, partial group, from a zero-padded copy
      uint8_t pad[kW * BI] = {};
      std::memcpy(pad, src + kW * full * BI, (m - kW * full) * BI);
      V16 x;
      Lanes<I>::Load(pad, &x);
      first(x, kW * full);
    }
    SleefN(fn, t, t, kW * groups);
    if constexpr (kSplit) {
      V16 even_sum = {}, odd_sum = {};
      float* lanes = accum ? accum->lanes() : nullptr;
      if (lanes) LoadEvenOddLanes(lanes, &even_sum, &odd_sum);
      for (uint32_t p = 0; p < paired; p += 2 * kW) {
        const V16 ye = Load16(y + p), te = Load16(t + p), yo = Load16(y + p + kW), to = Load16(t + p + kW);
        const V16 even = post(ye, te), odd = post(yo, to);
        JoinBf16x32(even, odd, dst + p * BO);
        if (lanes) {
          even_sum += even;
          odd_sum += odd;
        }
      }
      if (lanes) StoreEvenOddLanes(even_sum, odd_sum, lanes);
    }
    for (uint32_t g = paired / kW; g < groups; ++g) {
      const V16 vy = Load16(y + kW * g), vt = Load16(t + kW * g);
      const V16 r = post(vy, vt);
      if (g < full) {
        Lanes<O>::Store(dst + kW * g * BO, r);
      } else {
        uint8_t tail[kW * BO];
        Lanes<O>::Store(tail, r);
        std::memcpy(dst + kW * g * BO, tail, (m - kW * g) * BO);
      }
      if (accum) Store16(y + kW * g, r);  // the float32 results, for the sum
    }
    if (accum && m > paired) accum->Add(y + paired, m - paired);
  }
}

template <Fmt A, Fmt C>
NEURONCC_INLINE void SleefActivation(neff::ActivationFunc func, const uint8_t* a, float scale, float bias,
                                     uint8_t* c, uint32_t n, LaneSum* accum) {
  const V16 one = Splat16(1.0f), half = Splat16(0.5f);
  auto same = [](const V16& y) NEURONCC_LAMBDA { return y; };
  auto negate = [](const V16& y) NEURONCC_LAMBDA { return -y; };
  auto result = [](const V16&, const V16& t) NEURONCC_LAMBDA { return t; };
  auto half_times_one_plus = [&](const V16& y, const V16& t) NEURONCC_LAMBDA { return (y * half) * (one + t); };
  auto staged = [&](SleefFunc fn, auto pre, auto post) NEURONCC_LAMBDA {
    StagedActivation<A, C>(a, c, n, scale, bias, fn, accum, pre, post);
  };
  switch (func) {
    case neff::EXP: return staged(SleefFunc::kExp, same, result);
    case neff::LOG: return staged(SleefFunc::kLog, same, result);
    case neff::TANH: return staged(SleefFunc::kTanh, same, result);
    case neff::SIGMOID:  // 1 / (1 + exp(-y))
      return staged(SleefFunc::kExp, negate,
                    [&](const V16&, const V16& e) NEURONCC_LAMBDA { return one / (one + e); });
    case neff::SILU:  // y * sigmoid(y)
      return staged(SleefFunc::kExp, negate,
                    [&](const V16& y, const V16& e) NEURONCC_LAMBDA { return y * (one / (one + e)); });
    case neff::GELU:
      return staged(SleefFunc::kErf, [](const V16& y) NEURONCC_LAMBDA { return y * Splat16(kInvSqrt2); },
                    half_times_one_plus);
    case neff::GELU_TANH:
      return staged(SleefFunc::kTanh,
                    [](const V16& y) NEURONCC_LAMBDA {
                      const V16 cube = y * y * y;
                      return Splat16(kSqrt2OverPi) * (y + Splat16(0.044715f) * cube);
                    },
                    half_times_one_plus);
    default: return;
  }
}

NEURONCC_CLONES void SleefActivationAny(neff::ActivationFunc func, int fa, int fc, const uint8_t* a, float scale,
                                        float bias, uint8_t* c, uint32_t n, LaneSum* accum) {
  WithFormats([&](auto ta, auto tc) NEURONCC_LAMBDA {
    SleefActivation<decltype(ta)::value, decltype(tc)::value>(func, a, scale, bias, c, n, accum);
  }, fa, fc);
}

// The other functions, as vector_math.cc's Activation computes them: y = x
// * scale + bias, then the function, in one pass in registers.
template <Fmt A, Fmt C>
NEURONCC_INLINE void ActivationFused(neff::ActivationFunc func, const uint8_t* a, float scale, float bias,
                                     uint8_t* c, uint32_t n, float* lanes) {
  const V16 sv = Splat16(scale), bv = Splat16(bias), one = Splat16(1.0f);
  auto map = [&](auto f) NEURONCC_LAMBDA {
    MapRowSum<A, C>(a, c, n, lanes, [&](const V16* x, V16* r) NEURONCC_LAMBDA {
      for (int k = 0; k < int(LaneSum::kLanes / kW); ++k) r[k] = f(x[k] * sv + bv);
    });
  };
  // IEEE square root, correctly rounded (GCC vectorizes the lanes).
  auto sqrt = [](const V16& v) NEURONCC_LAMBDA {
    V16 r;
    for (uint32_t j = 0; j < kW; ++j) r[j] = std::sqrt(v[j]);
    return r;
  };
  switch (func) {
    case neff::RSQRT: return map([&](const V16& y) NEURONCC_LAMBDA { return one / sqrt(y); });
    case neff::SQRT: return map(sqrt);
    case neff::SQUARE: return map([](const V16& y) NEURONCC_LAMBDA { return y * y; });
    case neff::NEGATE: return map([](const V16& y) NEURONCC_LAMBDA { return -y; });
    case neff::RECIPROCAL: return map([&](const V16& y) NEURONCC_LAMBDA { return one / y; });
    case neff::RELU: return map([](const V16& y) NEURONCC_LAMBDA { return MaxLanes(y, Splat16(0.0f)); });
    case neff::ABS: return map([](const V16& y) NEURONCC_LAMBDA { return V16(I16(y) & 0x7fffffff); });
    default: return map([](const V16& y) NEURONCC_LAMBDA { return y; });  // IDENTITY
  }
}

NEURONCC_CLONES void ActivationFusedAny(neff::ActivationFunc func, int fa, int fc, const uint8_t* a, float scale,
                                        float bias, uint8_t* c, uint32_t n, float* lanes) {
  WithFormats([&](auto ta, auto tc) NEURONCC_LAMBDA {
    ActivationFused<decltype(ta)::value, decltype(tc)::value>(func, a, scale, bias, c, n, lanes);
  }, fa, fc);
}

// ---------------------------------------------------------------------------
// Select

template <Fmt F>
NEURONCC_INLINE void SelectFused(const uint8_t* a, const uint8_t* b, const uint8_t* pred, uint8_t* c, uint32_t n) {
  const uint8_t* in[3] = {a, b, pred};
  // A NaN predicate is != 0 and selects a; -0 selects b.
  MapRow<F, F, F, F>(in, c, n, [](const V16* x, V16* y) NEURONCC_LAMBDA { *y = x[2] != Splat16(0.0f) ? x[0] : x[1]; });
}

NEURONCC_CLONES void SelectFusedF32(const uint8_t* a, const uint8_t* b, const uint8_t* pred, uint8_t* c,
                                    uint32_t n) {
  SelectFused<kF32>(a, b, pred, c, n);
}
NEURONCC_CLONES void SelectFusedBf16(const uint8_t* a, const uint8_t* b, const uint8_t* pred, uint8_t* c,
                                     uint32_t n) {
  SelectFused<kBf16>(a, b, pred, c, n);
}

// ---------------------------------------------------------------------------
// Other dtype mixes: float32 blocks through vector_math.h.

struct Blocks {
  alignas(64) float in[3][kBlock];
  alignas(64) float out[kBlock];
};

// compute(ins, out, f0, m) for each block [f0, f0 + m) of the row, with
// ins[k] input k's float32 values and `out` where the results go: the rows
// themselves where they hold aligned float32, else float32 scratch (inputs
// widened into it, the result narrowed from it into c; no output when c.p
// is null).
template <int N, typename Compute>
void ThroughBlocks(const ConstRun* in, MutRun c, uint32_t n, Compute compute) {
  auto direct = [](DType dt, const uint8_t* p) { return dt == neff::F32 && (reinterpret_cast<uintptr_t>(p) & 3) == 0; };
  Blocks b;
  const size_t ec = neff::DTypeSize(c.dt);
  const bool out_direct = c.p && direct(c.dt, c.p);
  for (uint32_t f = 0; f < n; f += kBlock) {
    const uint32_t m = std::min(kBlock, n - f);
    const float* ins[N > 0 ? N : 1];
    for (int k = 0; k < N; ++k) {
      const uint8_t* p = in[k].p + size_t(f) * neff::DTypeSize(in[k].dt);
      if (direct(in[k].dt, in[k].p)) {
        ins[k] = reinterpret_cast<const float*>(p);
      } else {
        Widen(in[k].dt, p, m, b.in[k]);
        ins[k] = b.in[k];
      }
    }
    float* out = out_direct ? reinterpret_cast<float*>(c.p) + f : b.out;
    compute(ins, out, f, m);
    if (c.p && !out_direct) Narrow(c.dt, b.out, m, c.p + size_t(f) * ec);
  }
}

}  // namespace

void AluRow(neff::AluOp op, ConstRun a, ConstRun b, MutRun c, uint32_t n) {
  const int fa = FormatOf(a.dt), fb = FormatOf(b.dt), fc = FormatOf(c.dt);
  if (FusedAlu(op) && fa >= 0 && fb >= 0 && fc >= 0) return AluFusedAny(op, fa, fb, fc, a.p, b.p, c.p, n);
  const ConstRun in[2] = {a, b};
  ThroughBlocks<2>(in, c, n, [&](const float* const* x, float* y, uint32_t, uint32_t m) { Alu(op, x[0], x[1], y, m); });
}

void AluScalarRow(neff::AluOp op, ConstRun a, float s, bool reverse, MutRun c, uint32_t n) {
  const int fa = FormatOf(a.dt), fc = FormatOf(c.dt);
  if (FusedAluScalar(op) && fa >= 0 && fc >= 0) return AluScalarFusedAny(op, fa, fc, a.p, s, reverse, c.p, n);
  ThroughBlocks<1>(&a, c, n, [&](const float* const* x, float* y, uint32_t, uint32_t m) {
    AluScalar(op, x[0], s, reverse, y, m);
  });
}

void ActivationRow(neff::ActivationFunc f, ConstRun a, float scale, float bias, MutRun c, uint32_t n,
                   LaneSum* accum) {
  const int fa = FormatOf(a.dt), fc = FormatOf(c.dt);
  if (!CallsSleef(f) && fa >= 0 && fc >= 0)
    return ActivationFusedAny(f, fa, fc, a.p, scale, bias, c.p, n, accum ? accum->lanes() : nullptr);
  // With a bfloat16 operand, without the conversion passes; float32 rows
  // take vector_math.cc's Activation on the rows themselves (below).
  if (CallsSleef(f) && fa >= 0 && fc >= 0 && (fa == kBf16 || fc == kBf16))
    return SleefActivationAny(f, fa, fc, a.p, scale, bias, c.p, n, accum);
  ThroughBlocks<1>(&a, c, n, [&](const float* const* x, float* y, uint32_t, uint32_t m) {
    Activation(f, x[0], scale, bias, y, m);
    if (accum) accum->Add(y, m);
  });
}

void SelectRow(ConstRun a, ConstRun b, ConstRun pred, MutRun c, uint32_t n) {
  const int f = FormatOf(c.dt);
  if (f == kF32 && a.dt == c.dt && b.dt == c.dt && pred.dt == c.dt) return SelectFusedF32(a.p, b.p, pred.p, c.p, n);
  if (f == kBf16 && a.dt == c.dt && b.dt == c.dt && pred.dt == c.dt) return SelectFusedBf16(a.p, b.p, pred.p, c.p, n);
  const ConstRun in[3] = {a, b, pred};
  ThroughBlocks<3>(in, c, n, [&](const float* const* x, float* y, uint32_t, uint32_t m) NEURONCC_LAMBDA {
    Select(x[0], x[1], x[2], y, m);
  });
}

void SumRow(ConstRun a, uint32_t n, LaneSum* sum) {
  if (a.dt == neff::BF16) return sum->AddBf16(a.p, n);
  ThroughBlocks<1>(&a, MutRun{a.dt, nullptr}, n,
                   [&](const float* const* x, float*, uint32_t, uint32_t m) NEURONCC_LAMBDA { sum->Add(x[0], m); });
}

void ExtremeRow(ConstRun a, uint32_t n, Extreme* extreme) {
  if (a.dt == neff::BF16) return extreme->AddBf16(a.p, n);
  ThroughBlocks<1>(&a, MutRun{a.dt, nullptr}, n,
                   [&](const float* const* x, float*, uint32_t, uint32_t m) NEURONCC_LAMBDA { extreme->Add(x[0], m); });
}

}  // namespace neuroncc::rt::vm
