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

// ---------------------------------------------------------------------------
// Activations

// Whether a function calls SLEEF.
bool CallsSleef(neff::ActivationFunc f) {
  switch (f) {
    case neff::EXP:
    case neff::LOG:
    case neff::TANH:
    case neff::SIN:
    case neff::COS:
    case neff::ATAN:
    case neff::ERF:
    case neff::EXPM1:
    case neff::LOG1P:
    case neff::SIGMOID:
    case neff::SILU:
    case neff::GELU:
    case neff::GELU_TANH: return true;
    default: return false;
  }
}

// ---------------------------------------------------------------------------
// The kernels, in two copies (row_kernels_impl.inc).

namespace portable {
#define NEURONCC_ROW_BF16_HW 0
#define NEURONCC_ROW_ENTRY NEURONCC_CLONES
#define NEURONCC_ROW_V4 __attribute__((target("arch=x86-64-v4")))
#include "row_kernels_impl.inc"
#undef NEURONCC_ROW_BF16_HW
#undef NEURONCC_ROW_ENTRY
#undef NEURONCC_ROW_V4
}  // namespace portable

#ifdef NEURONCC_CLONES_AVX512_FMA
namespace bf16_conversion {
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4,avx512bf16")
#define NEURONCC_ROW_BF16_HW 1
#define NEURONCC_ROW_ENTRY
#define NEURONCC_ROW_V4
#include "row_kernels_impl.inc"
#undef NEURONCC_ROW_BF16_HW
#undef NEURONCC_ROW_ENTRY
#undef NEURONCC_ROW_V4
#pragma GCC pop_options
}  // namespace bf16_conversion
#endif

// Whether kernels with a bfloat16 output take the bf16_conversion copy: on
// hosts that take the AVX-512 copy (FmaDivision) and have AVX512-BF16. The
// same bits either way; NEURONCC_RT_NO_AVX512=1 turns it off, for comparing.
bool Bf16Conversion() {
#ifdef NEURONCC_CLONES_AVX512_FMA
  static const bool yes = FmaDivision() && __builtin_cpu_supports("avx512bf16") != 0;
  return yes;
#else
  return false;
#endif
}

// Calls a kernel entry point of the copy for output format `fc`.
#ifdef NEURONCC_CLONES_AVX512_FMA
#define NEURONCC_ROW_CALL(fc, name, ...) \
  ((fc) == kBf16 && Bf16Conversion() ? bf16_conversion::name(__VA_ARGS__) : portable::name(__VA_ARGS__))
#else
#define NEURONCC_ROW_CALL(fc, name, ...) portable::name(__VA_ARGS__)
#endif

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
  if (FusedAlu(op) && fa >= 0 && fb >= 0 && fc >= 0)
    return NEURONCC_ROW_CALL(fc, AluFusedAny, op, fa, fb, fc, a.p, b.p, c.p, n);
  const ConstRun in[2] = {a, b};
  ThroughBlocks<2>(in, c, n, [&](const float* const* x, float* y, uint32_t, uint32_t m) { Alu(op, x[0], x[1], y, m); });
}

void AluScalarRow(neff::AluOp op, ConstRun a, float s, bool reverse, MutRun c, uint32_t n) {
  const int fa = FormatOf(a.dt), fc = FormatOf(c.dt);
  if (FusedAluScalar(op) && fa >= 0 && fc >= 0)
    return NEURONCC_ROW_CALL(fc, AluScalarFusedAny, op, fa, fc, a.p, s, reverse, c.p, n);
  ThroughBlocks<1>(&a, c, n, [&](const float* const* x, float* y, uint32_t, uint32_t m) {
    AluScalar(op, x[0], s, reverse, y, m);
  });
}

void ActivationRow(neff::ActivationFunc f, ConstRun a, float scale, float bias, MutRun c, uint32_t n,
                   LaneSum* accum) {
  const int fa = FormatOf(a.dt), fc = FormatOf(c.dt);
  if (!CallsSleef(f) && fa >= 0 && fc >= 0)
    return NEURONCC_ROW_CALL(fc, ActivationFusedAny, f, fa, fc, a.p, scale, bias, c.p, n,
                             accum ? accum->lanes() : nullptr);
  // With a bfloat16 operand, without the conversion passes; float32 rows
  // take vector_math.cc's Activation on the rows themselves (below).
  if (CallsSleef(f) && fa >= 0 && fc >= 0 && (fa == kBf16 || fc == kBf16))
    return NEURONCC_ROW_CALL(fc, SleefActivationAny, f, fa, fc, a.p, scale, bias, c.p, n, accum);
  ThroughBlocks<1>(&a, c, n, [&](const float* const* x, float* y, uint32_t, uint32_t m) {
    Activation(f, x[0], scale, bias, y, m);
    if (accum) accum->Add(y, m);
  });
}

void SelectRow(ConstRun a, ConstRun b, ConstRun pred, MutRun c, uint32_t n) {
  const int f = FormatOf(c.dt);
  if (f >= 0 && a.dt == c.dt && b.dt == c.dt && pred.dt == c.dt)
    return NEURONCC_ROW_CALL(f, SelectFusedAny, f, a.p, b.p, pred.p, c.p, n);
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
