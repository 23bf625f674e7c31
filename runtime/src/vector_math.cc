#include "sleef_support.h"
#include "vector_math.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "float_convert.h"
#include "matmul_kernel.h"

namespace neuroncc::rt::vm {

using neff::DType;

namespace {

inline float Bool(bool b) { return b ? 1.0f : 0.0f; }

// MaxF/MinF as selects, so loops of them vectorize.
inline float MaxSel(float a, float b) {
  float r = std::signbit(a) ? b : a;
  r = b != b ? b : r;
  r = a != a ? a : r;
  r = b > a ? b : r;
  return a > b ? a : r;
}

inline float MinSel(float a, float b) {
  float r = std::signbit(a) ? a : b;
  r = b != b ? b : r;
  r = a != a ? a : r;
  r = b < a ? b : r;
  return a < b ? a : r;
}

template <typename F>
inline void Map2(const float* a, const float* b, float* c, uint32_t n, F f) {
  for (uint32_t i = 0; i < n; ++i) c[i] = f(a[i], b[i]);
}

template <typename F>
inline void Map1(const float* a, float* c, uint32_t n, F f) {
  for (uint32_t i = 0; i < n; ++i) c[i] = f(a[i]);
}

// ---------------------------------------------------------------------------
// SLEEF's deterministic single-precision functions over arrays: the "finz"
// variants (fused multiply-add, no flush to zero), 8 lanes with AVX2 + FMA
// when the host has them, else SLEEF's portable scalar build of the same
// algorithm, whose fma() is exact on every host (in software if need be).
// Both give the same bits; the scalar one is only slower.

#ifdef NEURONCC_SLEEF_AVX2
}  // namespace

bool HasAvx2Fma() {
  // NEURONCC_RT_NO_AVX2=1 takes SLEEF's portable path on any host (the same
  // bits, slower): for comparing the two.
  static const bool yes = [] {
    const char* off = std::getenv("NEURONCC_RT_NO_AVX2");
    if (off && std::string(off) == "1") return false;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return yes;
}

bool HasAvx512() {
  // NEURONCC_RT_NO_AVX512=1 keeps SLEEF's 8-lane build on a host that has
  // AVX-512 (the same bits): for comparing the two.
  static const bool yes = [] {
    const char* off = std::getenv("NEURONCC_RT_NO_AVX512");
    if (off && std::string(off) == "1") return false;
    return HasAvx2Fma() && __builtin_cpu_supports("avx512f");
  }();
  return yes;
}

namespace {

#define NEURONCC_SLEEF_MAP1(Name, f16, f8, f1)                                              \
  __attribute__((target("avx512f"))) void Name##Avx512(const float* x, float* y, uint32_t n) { \
    uint32_t i = 0;                                                                        \
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f16(_mm512_loadu_ps(x + i)));     \
    if (i < n) {                                                                           \
      const __mmask16 live = __mmask16((1u << (n - i)) - 1);                               \
      _mm512_mask_storeu_ps(y + i, live, f16(_mm512_maskz_loadu_ps(live, x + i)));         \
    }                                                                                      \
  }                                                                                        \
  __attribute__((target("avx2,fma"))) void Name##Avx2(const float* x, float* y, uint32_t n) { \
    uint32_t i = 0;                                                                        \
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f8(_mm256_loadu_ps(x + i)));        \
    if (i < n) {                                                                           \
      float t[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                               \
      std::memcpy(t, x + i, (n - i) * 4);                                                  \
      _mm256_storeu_ps(t, f8(_mm256_loadu_ps(t)));                                         \
      std::memcpy(y + i, t, (n - i) * 4);                                                  \
    }                                                                                      \
  }                                                                                        \
  void Name(const float* x, float* y, uint32_t n) {                                        \
    if (HasAvx512()) return Name##Avx512(x, y, n);                                         \
    if (HasAvx2Fma()) return Name##Avx2(x, y, n);                                          \
    for (uint32_t i = 0; i < n; ++i) y[i] = f1(x[i]);                                      \
  }

__attribute__((target("avx2,fma"))) void PowAvx2(const float* x, const float* e, float* y, uint32_t n) {
  uint32_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, Sleef_finz_powf8_u10avx2(_mm256_loadu_ps(x + i), _mm256_loadu_ps(e + i)));
  for (; i < n; ++i) y[i] = Sleef_finz_powf1_u10purecfma(x[i], e[i]);
}

void PowN(const float* x, const float* e, float* y, uint32_t n) {
  if (HasAvx2Fma()) return PowAvx2(x, e, y, n);
  for (uint32_t i = 0; i < n; ++i) y[i] = Sleef_finz_powf1_u10purecfma(x[i], e[i]);
}
#else
#define NEURONCC_SLEEF_MAP1(Name, f16, f8, f1)          \
  void Name(const float* x, float* y, uint32_t n) {     \
    for (uint32_t i = 0; i < n; ++i) y[i] = f1(x[i]);   \
  }

void PowN(const float* x, const float* e, float* y, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) y[i] = Sleef_finz_powf1_u10purecfma(x[i], e[i]);
}
#endif

// The bounds (maximum error in ulps) are SLEEF's, checked against double
// precision libm over the float range by tests/unit/vector_math_test.cc.
// exp, log and erf: 1.0 ulp.
NEURONCC_SLEEF_MAP1(ExpN, Sleef_finz_expf16_u10avx512f, Sleef_finz_expf8_u10avx2, Sleef_finz_expf1_u10purecfma)
NEURONCC_SLEEF_MAP1(LogN, Sleef_finz_logf16_u10avx512f, Sleef_finz_logf8_u10avx2, Sleef_finz_logf1_u10purecfma)
NEURONCC_SLEEF_MAP1(ErfN, Sleef_finz_erff16_u10avx512f, Sleef_finz_erff8_u10avx2, Sleef_finz_erff1_u10purecfma)
// expm1 and log1p: 1.0 ulp, and exact to the last bit near 0 where exp(x) - 1
// and log(1 + x) would cancel.
NEURONCC_SLEEF_MAP1(Expm1N, Sleef_finz_expm1f16_u10avx512f, Sleef_finz_expm1f8_u10avx2, Sleef_finz_expm1f1_u10purecfma)
NEURONCC_SLEEF_MAP1(Log1pSleefN, Sleef_finz_log1pf16_u10avx512f, Sleef_finz_log1pf8_u10avx2,
                    Sleef_finz_log1pf1_u10purecfma)
// SLEEF's log1pf returns inf for arguments near FLT_MAX (1 + x overflows in
// its reduction). Beyond 2^64, log(1 + x) - log(x) < 2^-64 is far below half
// an ulp of log(x) > 44, so log(x) stands for it.
constexpr float kLog1pAsLog = 0x1p64f;
void Log1pN(const float* x, float* y, uint32_t n) {
  Log1pSleefN(x, y, n);
  for (uint32_t i = 0; i < n; ++i)
    if (x[i] > kLog1pAsLog) y[i] = Sleef_finz_logf1_u10purecfma(x[i]);
}
// sin and cos: 1.0 ulp, whatever the argument (SLEEF reduces large ones exactly).
NEURONCC_SLEEF_MAP1(SinN, Sleef_finz_sinf16_u10avx512f, Sleef_finz_sinf8_u10avx2, Sleef_finz_sinf1_u10purecfma)
NEURONCC_SLEEF_MAP1(CosN, Sleef_finz_cosf16_u10avx512f, Sleef_finz_cosf8_u10avx2, Sleef_finz_cosf1_u10purecfma)
// atan: 1.0 ulp.
NEURONCC_SLEEF_MAP1(AtanN, Sleef_finz_atanf16_u10avx512f, Sleef_finz_atanf8_u10avx2, Sleef_finz_atanf1_u10purecfma)
// 3.5 ulp: SLEEF's 1-ulp tanh costs 2.7x as much (2.75 against 1.02 ns per
// value here), and tanh is the whole cost of gelu(approximate='tanh').
NEURONCC_SLEEF_MAP1(TanhN, Sleef_finz_tanhf16_u35avx512f, Sleef_finz_tanhf8_u35avx2,
                    Sleef_finz_tanhf1_u35purecfma)
#undef NEURONCC_SLEEF_MAP1

}  // namespace

void SleefN(SleefFunc f, const float* x, float* y, uint32_t n) {
  switch (f) {
    case SleefFunc::kExp: return ExpN(x, y, n);
    case SleefFunc::kLog: return LogN(x, y, n);
    case SleefFunc::kErf: return ErfN(x, y, n);
    case SleefFunc::kExpm1: return Expm1N(x, y, n);
    case SleefFunc::kLog1p: return Log1pN(x, y, n);
    case SleefFunc::kTanh: return TanhN(x, y, n);
    case SleefFunc::kSin: return SinN(x, y, n);
    case SleefFunc::kCos: return CosN(x, y, n);
    case SleefFunc::kAtan: return AtanN(x, y, n);
  }
}

namespace {

// The elementwise steps of the activations around the SLEEF calls.
NEURONCC_CLONES void Affine(const float* a, float scale, float bias, float* y, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) y[i] = a[i] * scale + bias;
}

NEURONCC_CLONES void Negate(const float* y, float* t, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) t[i] = -y[i];
}

NEURONCC_CLONES void OneOverOnePlus(const float* e, float* c, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) c[i] = 1.0f / (1.0f + e[i]);
}

NEURONCC_CLONES void TimesOneOverOnePlus(const float* y, const float* e, float* c, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) c[i] = y[i] * (1.0f / (1.0f + e[i]));
}

NEURONCC_CLONES void GeluErfArg(const float* y, float* t, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) t[i] = y[i] * kInvSqrt2;
}

NEURONCC_CLONES void GeluTanhArg(const float* y, float* t, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    float cube = y[i] * y[i] * y[i];
    t[i] = kSqrt2OverPi * (y[i] + 0.044715f * cube);
  }
}

NEURONCC_CLONES void HalfTimesOnePlus(const float* y, const float* t, float* c, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) c[i] = (y[i] * 0.5f) * (1.0f + t[i]);
}

NEURONCC_CLONES void SimpleActivation(neff::ActivationFunc f, const float* y, float* c, uint32_t n) {
  switch (f) {
    case neff::RSQRT: return Map1(y, c, n, [](float v) { return 1.0f / std::sqrt(v); });
    case neff::SQRT: return Map1(y, c, n, [](float v) { return std::sqrt(v); });
    case neff::SQUARE: return Map1(y, c, n, [](float v) { return v * v; });
    case neff::NEGATE: return Map1(y, c, n, [](float v) { return -v; });
    case neff::RECIPROCAL: return Map1(y, c, n, [](float v) { return 1.0f / v; });
    // max(y, +0): NaN propagates and -0 becomes +0, as MAX does.
    case neff::RELU: return Map1(y, c, n, [](float v) { return MaxSel(v, 0.0f); });
    case neff::ABS: return Map1(y, c, n, [](float v) { return std::fabs(v); });
    case neff::FLOOR: return Map1(y, c, n, [](float v) { return std::floor(v); });
    case neff::CEIL: return Map1(y, c, n, [](float v) { return std::ceil(v); });
    case neff::TRUNC: return Map1(y, c, n, [](float v) { return std::trunc(v); });
    // The default rounding mode, to nearest with ties to even (torch.round).
    case neff::ROUND: return Map1(y, c, n, [](float v) { return std::nearbyint(v); });
    default: return Map1(y, c, n, [](float v) { return v; });
  }
}

}  // namespace

float MaxF(float a, float b) { return MaxSel(a, b); }
float MinF(float a, float b) { return MinSel(a, b); }

// ---------------------------------------------------------------------------
// Conversions

NEURONCC_CLONES void Widen(DType dt, const uint8_t* src, uint32_t n, float* dst) {
  switch (dt) {
    case neff::F32:
      std::memcpy(dst, src, size_t(n) * 4);
      return;
    case neff::BF16: {
      // 16 at a time: a bfloat16 is the top half of its float32.
      uint32_t i = 0;
      for (; i + 16 <= n; i += 16) {
        V16 v;
        WidenBf16x16(src + 2 * size_t(i), &v);
        Store16(dst + i, v);
      }
      for (; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * size_t(i), 2);
        dst[i] = Bf16ToFloat(h);
      }
      return;
    }
    case neff::F16:
      for (uint32_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * size_t(i), 2);
        dst[i] = F16ToFloat(h);
      }
      return;
    default:
      return;  // the verifier admits only the three dtypes above
  }
}

NEURONCC_CLONES void Narrow(DType dt, const float* src, uint32_t n, uint8_t* dst) {
  switch (dt) {
    case neff::F32:
      std::memcpy(dst, src, size_t(n) * 4);
      return;
    case neff::BF16: {
      // FloatToBf16, 16 at a time.
      uint32_t i = 0;
      for (; i + 16 <= n; i += 16) {
        const V16 v = Load16(src + i);
        NarrowBf16x16(v, dst + 2 * size_t(i));
      }
      for (; i < n; ++i) {
        uint16_t h = FloatToBf16(src[i]);
        std::memcpy(dst + 2 * size_t(i), &h, 2);
      }
      return;
    }
    case neff::F16:
      for (uint32_t i = 0; i < n; ++i) {
        uint16_t h = FloatToF16(src[i]);
        std::memcpy(dst + 2 * size_t(i), &h, 2);
      }
      return;
    default:
      return;
  }
}

// ---------------------------------------------------------------------------
// ALU

// Comparisons give 1.0 / 0.0; NaN compares false except for NOT_EQUAL
// (the C++ operators behave exactly so).
NEURONCC_CLONES void Alu(neff::AluOp op, const float* a, const float* b, float* c, uint32_t n) {
  switch (op) {
    case neff::ADD: return Map2(a, b, c, n, [](float x, float y) { return x + y; });
    case neff::SUB: return Map2(a, b, c, n, [](float x, float y) { return x - y; });
    case neff::MUL: return Map2(a, b, c, n, [](float x, float y) { return x * y; });
    case neff::DIV: return Map2(a, b, c, n, [](float x, float y) { return x / y; });
    case neff::MAX: return Map2(a, b, c, n, MaxSel);
    case neff::MIN: return Map2(a, b, c, n, MinSel);
    case neff::IS_EQUAL: return Map2(a, b, c, n, [](float x, float y) { return Bool(x == y); });
    case neff::NOT_EQUAL: return Map2(a, b, c, n, [](float x, float y) { return Bool(x != y); });
    case neff::IS_LT: return Map2(a, b, c, n, [](float x, float y) { return Bool(x < y); });
    case neff::IS_LE: return Map2(a, b, c, n, [](float x, float y) { return Bool(x <= y); });
    case neff::IS_GT: return Map2(a, b, c, n, [](float x, float y) { return Bool(x > y); });
    case neff::IS_GE: return Map2(a, b, c, n, [](float x, float y) { return Bool(x >= y); });
    case neff::POW: return PowN(a, b, c, n);
    default: return;
  }
}

NEURONCC_CLONES void AluScalar(neff::AluOp op, const float* a, float s, bool reverse, float* c, uint32_t n) {
  switch (op) {
    case neff::ADD: return Map1(a, c, n, [s](float x) { return x + s; });
    case neff::MUL: return Map1(a, c, n, [s](float x) { return x * s; });
    case neff::MAX: return Map1(a, c, n, [s](float x) { return MaxSel(x, s); });
    case neff::MIN: return Map1(a, c, n, [s](float x) { return MinSel(x, s); });
    case neff::SUB:
      if (reverse) return Map1(a, c, n, [s](float x) { return s - x; });
      return Map1(a, c, n, [s](float x) { return x - s; });
    case neff::DIV:
      if (reverse) return Map1(a, c, n, [s](float x) { return s / x; });
      return Map1(a, c, n, [s](float x) { return x / s; });
    case neff::BYPASS: return Map1(a, c, n, [](float x) { return x; });
    case neff::IS_EQUAL: return Map1(a, c, n, [s](float x) { return Bool(x == s); });
    case neff::NOT_EQUAL: return Map1(a, c, n, [s](float x) { return Bool(x != s); });
    case neff::IS_LT:
      if (reverse) return Map1(a, c, n, [s](float x) { return Bool(s < x); });
      return Map1(a, c, n, [s](float x) { return Bool(x < s); });
    case neff::IS_LE:
      if (reverse) return Map1(a, c, n, [s](float x) { return Bool(s <= x); });
      return Map1(a, c, n, [s](float x) { return Bool(x <= s); });
    case neff::IS_GT:
      if (reverse) return Map1(a, c, n, [s](float x) { return Bool(s > x); });
      return Map1(a, c, n, [s](float x) { return Bool(x > s); });
    case neff::IS_GE:
      if (reverse) return Map1(a, c, n, [s](float x) { return Bool(s >= x); });
      return Map1(a, c, n, [s](float x) { return Bool(x >= s); });
    case neff::POW: {
      float e[kBlock];
      for (uint32_t i0 = 0; i0 < n; i0 += kBlock) {
        uint32_t m = std::min(kBlock, n - i0);
        std::fill(e, e + m, s);
        if (reverse)
          PowN(e, a + i0, c + i0, m);
        else
          PowN(a + i0, e, c + i0, m);
      }
      return;
    }
    default: return;
  }
}

NEURONCC_CLONES void Select(const float* a, const float* b, const float* pred, float* c, uint32_t n) {
  // A NaN predicate is != 0 and selects a; -0 selects b.
  for (uint32_t i = 0; i < n; ++i) c[i] = pred[i] != 0.0f ? a[i] : b[i];
}

// ---------------------------------------------------------------------------
// Activations: y = a * scale + bias first, then the function, in blocks so
// that the temporaries stay in L1. `c` may be `a`.

void Activation(neff::ActivationFunc f, const float* a, float scale, float bias, float* c, uint32_t n) {
  alignas(64) float y[kBlock], t[kBlock];
  for (uint32_t i0 = 0; i0 < n; i0 += kBlock) {
    const uint32_t m = std::min(kBlock, n - i0);
    const float* in = a + i0;
    float* out = c + i0;
    Affine(in, scale, bias, y, m);
    switch (f) {
      case neff::IDENTITY: std::memcpy(out, y, size_t(m) * 4); break;
      case neff::EXP: ExpN(y, out, m); break;
      case neff::LOG: LogN(y, out, m); break;
      case neff::TANH: TanhN(y, out, m); break;
      case neff::SIN: SinN(y, out, m); break;
      case neff::COS: CosN(y, out, m); break;
      case neff::ATAN: AtanN(y, out, m); break;
      case neff::ERF: ErfN(y, out, m); break;
      case neff::EXPM1: Expm1N(y, out, m); break;
      case neff::LOG1P: Log1pN(y, out, m); break;
      case neff::SIGMOID:  // 1 / (1 + exp(-y))
        Negate(y, t, m);
        ExpN(t, t, m);
        OneOverOnePlus(t, out, m);
        break;
      case neff::SILU:  // y * sigmoid(y)
        Negate(y, t, m);
        ExpN(t, t, m);
        TimesOneOverOnePlus(y, t, out, m);
        break;
      case neff::GELU:
        // (y * 0.5) * (1 + erf(y * (1/sqrt(2)))), each step rounded to
        // float32: PyTorch's CPU formula for gelu(approximate='none').
        GeluErfArg(y, t, m);
        ErfN(t, t, m);
        HalfTimesOnePlus(y, t, out, m);
        break;
      case neff::GELU_TANH:
        // (y * 0.5) * (1 + tanh(sqrt(2/pi) * (y + 0.044715 * y^3))):
        // PyTorch's CPU formula for gelu(approximate='tanh').
        GeluTanhArg(y, t, m);
        TanhN(t, t, m);
        HalfTimesOnePlus(y, t, out, m);
        break;
      default: SimpleActivation(f, y, out, m); break;
    }
  }
}

// ---------------------------------------------------------------------------
// Reductions

LaneSum::LaneSum() { std::fill(lanes_, lanes_ + kLanes, -0.0f); }

namespace {

// Element i of a run: float32 (at any address), or bfloat16 bits (the top
// half of their float32). ThirtyTwo(i, &p, &q) gives elements i .. i + 31
// as two vectors: lane j of p holds element i + kSpread * j, lane j of q
// element i + kFirstOfQ + kSpread * j.
struct F32Run {
  static constexpr uint32_t kSpread = 1, kFirstOfQ = 16;
  const float* a;
  float One(uint32_t i) const {
    float v;
    std::memcpy(&v, a + i, 4);
    return v;
  }
  void ThirtyTwo(uint32_t i, V16* p, V16* q) const {
    *p = Load16(a + i);
    *q = Load16(a + i + 16);
  }
};
struct Bf16Run {
  const uint8_t* a;
  float One(uint32_t i) const {
    uint16_t h;
    std::memcpy(&h, a + 2 * size_t(i), 2);
    return Bf16ToFloat(h);
  }
  // Even and odd elements apart: no widening shuffles.
  static constexpr uint32_t kSpread = 2, kFirstOfQ = 1;
  void ThirtyTwo(uint32_t i, V16* p, V16* q) const { SplitBf16x32(a + 2 * size_t(i), p, q); }
};

}  // namespace

template <typename Run>
inline __attribute__((always_inline)) void LaneSum::AddRun(const Run& a, uint32_t n) {
  static_assert(kLanes == 32, "two vectors of 16 lanes");
  // s0 and s1 hold the lanes in the order of the run's vectors.
  V16 s0, s1;
  for (uint32_t j = 0; j < 16; ++j) {
    s0[j] = lanes_[Run::kSpread * j];
    s1[j] = lanes_[Run::kFirstOfQ + Run::kSpread * j];
  }
  uint32_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    V16 p, q;
    a.ThirtyTwo(i, &p, &q);
    s0 += p;
    s1 += q;
  }
  for (uint32_t j = 0; j < 16; ++j) {
    lanes_[Run::kSpread * j] = s0[j];
    lanes_[Run::kFirstOfQ + Run::kSpread * j] = s1[j];
  }
  for (uint32_t j = 0; i + j < n; ++j) lanes_[j] += a.One(i + j);
}

NEURONCC_CLONES void LaneSum::Add(const float* a, uint32_t n) { AddRun(F32Run{a}, n); }
NEURONCC_CLONES void LaneSum::AddBf16(const uint8_t* a, uint32_t n) { AddRun(Bf16Run{a}, n); }

float LaneSum::Total() const {
  float l[kLanes];
  std::memcpy(l, lanes_, sizeof(l));
  for (uint32_t w = kLanes / 2; w >= 1; w /= 2)
    for (uint32_t j = 0; j < w; ++j) l[j] = l[j] + l[j + w];
  return l[0];
}

namespace {

// Folds elements [from, n) of a run into *acc (not NaN) as the
// left-to-right MaxF / MinF fold does, in one vectorized pass, if they hold
// no NaN; returns false, leaving *acc alone, if they do. Without NaN the
// fold's result is the extreme value, and only its zero sign needs care: a
// maximum of zero is +0 if any +0 took part (else -0), a minimum of zero -0
// if any -0 did.
template <typename Run>
inline __attribute__((always_inline)) bool FoldExtreme(bool max, float* acc, const Run& a, uint32_t from,
                                                       uint32_t n) {
  const uint32_t kZero = max ? 0u : 0x80000000u;  // the zero that wins
  // Unsigned folds rather than comparison masks: the largest magnitude bits
  // (above +Inf's only for a NaN), and the smallest of bits ^ kZero (0 only
  // for the winning zero).
  V16 m = Splat16(*acc);
  U32x16 magnitude = {}, zero_key = U32x16{} + 0xffffffffu;
  auto fold = [&](const V16& v) __attribute__((always_inline)) {
    const U32x16 bits = U32x16(v);
    const U32x16 mag = bits & 0x7fffffffu, key = bits ^ kZero;
    magnitude = magnitude > mag ? magnitude : mag;
    zero_key = zero_key < key ? zero_key : key;
    m = max ? (m > v ? m : v) : (m < v ? m : v);
  };
  uint32_t i = from;
  if (max) {
    for (; i + 32 <= n; i += 32) {
      V16 p, q;
      a.ThirtyTwo(i, &p, &q);
      fold(p);
      fold(q);
    }
  } else {
    for (; i + 32 <= n; i += 32) {
      V16 p, q;
      a.ThirtyTwo(i, &p, &q);
      fold(p);
      fold(q);
    }
  }
  bool any_nan = false, winning_zero = FloatBits(*acc) == kZero;
  for (int j = 0; j < 16; ++j) {
    any_nan |= magnitude[j] > 0x7f800000u;
    winning_zero |= zero_key[j] == 0;
  }
  float r = *acc;
  for (int j = 0; j < 16; ++j) r = max ? (r > m[j] ? r : m[j]) : (r < m[j] ? r : m[j]);
  for (; i < n; ++i) {
    const float v = a.One(i);
    any_nan |= v != v;
    winning_zero |= FloatBits(v) == uint32_t(kZero);
    r = max ? (r > v ? r : v) : (r < v ? r : v);
  }
  if (any_nan) return false;
  if (r == 0.0f) r = winning_zero ? BitsFloat(uint32_t(kZero)) : -BitsFloat(uint32_t(kZero));
  *acc = r;
  return true;
}

NEURONCC_CLONES bool FoldExtremeF32(bool max, float* acc, const float* a, uint32_t from, uint32_t n) {
  return FoldExtreme(max, acc, F32Run{a}, from, n);
}
NEURONCC_CLONES bool FoldExtremeBf16(bool max, float* acc, const uint8_t* a, uint32_t from, uint32_t n) {
  return FoldExtreme(max, acc, Bf16Run{a}, from, n);
}

}  // namespace

// The first element starts the fold; the vectorized fold takes the rest
// unless they hold a NaN, and then the sequential one keeps the first NaN
// it meets, whatever follows.
template <typename Run, typename Fold>
void Extreme::AddRun(const Run& a, uint32_t n, Fold fold) {
  if (nan_ || n == 0) return;
  uint32_t from = 0;
  if (!started_) {
    value_ = a.One(0);
    started_ = true;
    from = 1;
    if (value_ != value_) {
      nan_ = true;
      return;
    }
  }
  if (fold(max_, &value_, from, n)) return;
  for (uint32_t i = from; i < n; ++i) {
    value_ = max_ ? MaxSel(value_, a.One(i)) : MinSel(value_, a.One(i));
    if (value_ != value_) {
      nan_ = true;
      return;
    }
  }
}

void Extreme::Add(const float* a, uint32_t n) {
  AddRun(F32Run{a}, n, [&](bool max, float* acc, uint32_t from, uint32_t m) {
    return FoldExtremeF32(max, acc, a, from, m);
  });
}

void Extreme::AddBf16(const uint8_t* a, uint32_t n) {
  AddRun(Bf16Run{a}, n, [&](bool max, float* acc, uint32_t from, uint32_t m) {
    return FoldExtremeBf16(max, acc, a, from, m);
  });
}

// ---------------------------------------------------------------------------
// TensorEngine

namespace {

NEURONCC_CLONES void MatmulRounded(const MatmulOperands& o, uint32_t n0, uint32_t n1, bool accumulate,
                                   uint8_t* out_rows, uint64_t out_stride) {
  MatmulStrips(o, n0, n1, accumulate, out_rows, out_stride, [](V8 acc, V8 a, V8 b) { return acc + a * b; });
}

}  // namespace

#if defined(__x86_64__)
// matmul_fma.cc, built for AVX2 + FMA: call only where the host has both.
void MatmulFusedAvx2(const MatmulOperands& operands, uint32_t n0, uint32_t n1, bool accumulate, uint8_t* out_rows,
                     uint64_t out_stride);
#endif

NEURONCC_CLONES void PackMatmulStrip(DType dt, const uint8_t* rows, uint64_t row_stride, uint32_t K, float* strip) {
  for (uint32_t k = 0; k < K; ++k) {
    const uint8_t* src = rows + uint64_t(k) * row_stride;
    float* dst = strip + size_t(k) * 16;
    if (dt == neff::F32) {
      Store8(dst, Load8(reinterpret_cast<const float*>(src)));
      Store8(dst + 8, Load8(reinterpret_cast<const float*>(src) + 8));
    } else {
      Widen(dt, src, 16, dst);
    }
  }
}

void PackMatmulRows(const float* A, uint32_t K, uint32_t M, float* Ap) {
  for (uint32_t m = 0; m < M;) {
    const uint32_t h = BlockHeight(m, M);
    float* panel = Ap + size_t(m) * K;
    for (uint32_t k = 0; k < K; ++k)
      for (uint32_t i = 0; i < h; ++i) panel[size_t(k) * h + i] = A[size_t(k) * M + m + i];
    m += h;
  }
}

void MatmulColumns(const float* A, const float* B, const float* Ap, const float* Bp, uint32_t K, uint32_t M,
                   uint32_t N, uint32_t n0, uint32_t n1, bool exact_products, bool accumulate, uint8_t* out_rows,
                   uint64_t out_stride) {
  const MatmulOperands o{A, B, Ap, Bp, K, M, N};
#if defined(__x86_64__)
  static const bool fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (exact_products && fma) return MatmulFusedAvx2(o, n0, n1, accumulate, out_rows, out_stride);
#endif
  MatmulRounded(o, n0, n1, accumulate, out_rows, out_stride);
}

// ---------------------------------------------------------------------------
// DMA stores

#if defined(__x86_64__)
namespace {
// A whole cache line per store where the host has AVX-512.
__attribute__((target("avx512f"))) void StreamLines512(uint8_t* dst, const uint8_t* src, size_t bytes) {
  const size_t head = (64 - (reinterpret_cast<uintptr_t>(dst) & 63)) & 63;
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + 64 <= bytes; i += 64)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i), _mm512_loadu_si512(src + i));
  std::memcpy(dst + i, src + i, bytes - i);
}
}  // namespace
#endif

void CopyToHbm(uint8_t* dst, const uint8_t* src, size_t bytes) {
#if defined(__x86_64__)
  constexpr size_t kStreamBytes = 4096;  // below this the lines are as well cached
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (bytes >= kStreamBytes && avx512) return StreamLines512(dst, src, bytes);
  if (bytes >= kStreamBytes) {
    const size_t head = (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15;
    std::memcpy(dst, src, head);
    size_t i = head;
    for (; i + 64 <= bytes; i += 64)
      for (size_t j = 0; j < 64; j += 16)
        _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + j),
                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + j)));
    std::memcpy(dst + i, src + i, bytes - i);
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

void FinishHbmCopies() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

// ---------------------------------------------------------------------------
// Scalar references: SLEEF's portable build of the same functions.

float ExpRef(float x) { return Sleef_finz_expf1_u10purecfma(x); }
float LogRef(float x) { return Sleef_finz_logf1_u10purecfma(x); }
float TanhRef(float x) { return Sleef_finz_tanhf1_u35purecfma(x); }
float SinRef(float x) { return Sleef_finz_sinf1_u10purecfma(x); }
float CosRef(float x) { return Sleef_finz_cosf1_u10purecfma(x); }
float Expm1Ref(float x) { return Sleef_finz_expm1f1_u10purecfma(x); }
float AtanRef(float x) { return Sleef_finz_atanf1_u10purecfma(x); }
float Log1pRef(float x) {
  return x > kLog1pAsLog ? Sleef_finz_logf1_u10purecfma(x) : Sleef_finz_log1pf1_u10purecfma(x);
}
float ErfRef(float x) { return Sleef_finz_erff1_u10purecfma(x); }
float PowRef(float x, float y) { return Sleef_finz_powf1_u10purecfma(x, y); }

}  // namespace neuroncc::rt::vm
