// The TensorEngine's inner kernel, shared by vector_math.cc (products
// rounded, baseline and AVX2 builds) and matmul_fma.cc (fused, AVX2 + FMA
// build). Every function has internal linkage, so that code built for AVX2
// never stands in for the baseline build of another file.
#pragma once

#include <cstdint>

#include "float_convert.h"

namespace neuroncc::rt::vm {

// The operands of one TensorEngine instruction, widened to float32: A is
// [K][M] and B [K][N], row-major; Ap and Bp hold the same values packed
// (PackMatmulOperands), so that the kernel walks memory contiguously (rows of
// 2 KiB apart would map to a handful of L1 sets and evict each other).
struct MatmulOperands {
  const float* A;
  const float* B;
  const float* Ap;  // per block of output rows [m0, m0 + h): [K][h], at Ap + m0 * K
  const float* Bp;  // per strip of 16 output columns s: [K][16], at Bp + s * 16 * K
  uint32_t K, M, N;
};

namespace {

typedef float V8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));
// The same vector at any address (SBUF rows may start at any byte), for
// loads and stores.
typedef float V8u __attribute__((vector_size(32), aligned(1)));

// Macros rather than functions: a function taking or returning a 32- or
// 64-byte vector has a different ABI with and without AVX, and the baseline
// build has none.
#define Load8(p) (*reinterpret_cast<const V8u*>(p))
#define Store8(p, v) (*reinterpret_cast<V8u*>(p) = (v))
#define Splat8(x) (V8{(x), (x), (x), (x), (x), (x), (x), (x)})

// 16 float32 lanes, for the elementwise row kernels (row_kernels.cc,
// vector_math.cc): one AVX-512 register in the builds for hosts that have
// it, two AVX2 registers (or four SSE2) in the others. Lanes are
// independent, so the width changes no result.
typedef float V16 __attribute__((vector_size(64)));
typedef int32_t I16 __attribute__((vector_size(64)));
typedef float V16u __attribute__((vector_size(64), aligned(1)));
// Lanes of bfloat16 bits and their float32 widths.
typedef uint32_t U32x16 __attribute__((vector_size(64)));
typedef uint16_t U16x16 __attribute__((vector_size(32)));
typedef uint16_t U16x16u __attribute__((vector_size(32), aligned(1)));  // at any byte
#define Load16(p) (*reinterpret_cast<const V16u*>(p))
#define Store16(p, v) (*reinterpret_cast<V16u*>(p) = (v))
#define Splat16(x) (V16{(x), (x), (x), (x), (x), (x), (x), (x), (x), (x), (x), (x), (x), (x), (x), (x)})

// 16 bfloat16 values at any byte, as float32 lanes (a bfloat16 is the top
// half of its float32), and back, rounded to nearest even as FloatToBf16
// does.
inline __attribute__((always_inline)) void WidenBf16x16(const uint8_t* p, V16* v) {
  const U16x16 h = *reinterpret_cast<const U16x16u*>(p);
  *v = V16(__builtin_convertvector(h, U32x16) << 16);
}
inline __attribute__((always_inline)) void NarrowBf16x16(const V16& v, uint8_t* p) {
  U32x16 bits;
  Bf16BitsOf(U32x16(v), &bits);
  *reinterpret_cast<U16x16u*>(p) = __builtin_convertvector(bits, U16x16);
}

// 32 bfloat16 values at any byte as two vectors of float32 lanes without
// moving any across lanes: `even` holds elements 0, 2, .., 30 and `odd`
// elements 1, 3, .., 31 (each 32-bit word holds an even element in its low
// half and the next, odd one in its high half). Elementwise code that stores
// with JoinBf16x32 never sees the order; it saves the widening and packing
// shuffles.
typedef uint32_t U32x16u __attribute__((vector_size(64), aligned(1)));
inline __attribute__((always_inline)) void SplitBf16x32(const uint8_t* p, V16* even, V16* odd) {
  const U32x16 w = *reinterpret_cast<const U32x16u*>(p);
  *even = V16(w << 16);
  *odd = V16(w & 0xffff0000u);
}
// The inverse, rounded to nearest even as FloatToBf16 does.
inline __attribute__((always_inline)) void JoinBf16x32(const V16& even, const V16& odd, uint8_t* p) {
  U32x16 low, high;
  Bf16RoundedHigh(U32x16(even), &low);
  Bf16RoundedHigh(U32x16(odd), &high);
  *reinterpret_cast<U32x16u*>(p) = (low >> 16) | (high & 0xffff0000u);
}

// The heights of the blocks of output rows, in order: 6 while 6 fit, then
// 2, then 1.
constexpr uint32_t kMatmulRows = 6;
inline uint32_t BlockHeight(uint32_t m, uint32_t M) { return M - m >= kMatmulRows ? kMatmulRows : M - m >= 2 ? 2 : 1; }

// MR rows x 16 columns of sums kept in registers while k runs 0..K-1.
// `Fma` computes acc + a * b: two roundings, or one (fused) where the
// product is exact anyway.
template <int MR, typename Fma>
__attribute__((always_inline)) inline void MatmulBlock16(const float* a, const float* b, uint32_t K, bool accumulate,
                                                         uint8_t* out, uint64_t out_stride, Fma fma) {
  V8 acc[MR][2];
  {
    const V8 b0 = Load8(b), b1 = Load8(b + 8);
    for (int i = 0; i < MR; ++i) {
      const float av = a[i];
      const V8 ai = Splat8(av);
      acc[i][0] = ai * b0;
      acc[i][1] = ai * b1;
    }
  }
  for (uint32_t k = 1; k < K; ++k) {
    a += MR;
    b += 16;
    const V8 b0 = Load8(b), b1 = Load8(b + 8);
    for (int i = 0; i < MR; ++i) {
      const float av = a[i];
      const V8 ai = Splat8(av);
      acc[i][0] = fma(acc[i][0], ai, b0);
      acc[i][1] = fma(acc[i][1], ai, b1);
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* row = reinterpret_cast<float*>(out + uint64_t(i) * out_stride);
    if (accumulate) {
      Store8(row, Load8(row) + acc[i][0]);
      Store8(row + 8, Load8(row + 8) + acc[i][1]);
    } else {
      Store8(row, acc[i][0]);
      Store8(row + 8, acc[i][1]);
    }
  }
}

// One output element, for the columns left over after the 16-wide strips.
inline void MatmulOne(const MatmulOperands& o, uint32_t m, uint32_t n, bool accumulate, uint8_t* out_rows,
                      uint64_t out_stride) {
  float s = o.A[m] * o.B[n];
  for (uint32_t k = 1; k < o.K; ++k) s += o.A[size_t(k) * o.M + m] * o.B[size_t(k) * o.N + n];
  float* out = reinterpret_cast<float*>(out_rows + uint64_t(m) * out_stride) + n;
  float old;
  __builtin_memcpy(&old, out, 4);
  float v = accumulate ? old + s : s;
  __builtin_memcpy(out, &v, 4);
}

// Output columns [n0, n1); n0 is a multiple of 16.
template <typename Fma>
__attribute__((always_inline)) inline void MatmulStrips(const MatmulOperands& o, uint32_t n0, uint32_t n1,
                                                        bool accumulate, uint8_t* out_rows, uint64_t out_stride,
                                                        Fma fma) {
  const uint32_t K = o.K, M = o.M;
  uint32_t n = n0;
  for (; n + 16 <= n1; n += 16) {
    const float* b = o.Bp + size_t(n) * K;  // strip n / 16
    for (uint32_t m = 0; m < M;) {
      const uint32_t h = BlockHeight(m, M);
      const float* a = o.Ap + size_t(m) * K;
      uint8_t* out = out_rows + uint64_t(m) * out_stride + uint64_t(n) * 4;
      if (h == kMatmulRows)
        MatmulBlock16<kMatmulRows>(a, b, K, accumulate, out, out_stride, fma);
      else if (h == 2)
        MatmulBlock16<2>(a, b, K, accumulate, out, out_stride, fma);
      else
        MatmulBlock16<1>(a, b, K, accumulate, out, out_stride, fma);
      m += h;
    }
  }
  for (; n < n1; ++n)
    for (uint32_t m = 0; m < M; ++m) MatmulOne(o, m, n, accumulate, out_rows, out_stride);
}

}  // namespace
}  // namespace neuroncc::rt::vm
