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
// Lanes of bfloat16 / float16 bits and their float32 widths (conversions in
// vector_math.cc and row_kernels.cc).
typedef uint32_t U32x8 __attribute__((vector_size(32)));
typedef uint16_t U16x8 __attribute__((vector_size(16)));
typedef uint16_t U16x8u __attribute__((vector_size(16), aligned(1)));  // at any byte

// Macros rather than functions: a function taking or returning a 32-byte
// vector has a different ABI with and without AVX, and the baseline build
// has none.
#define Load8(p) (*reinterpret_cast<const V8u*>(p))
#define Store8(p, v) (*reinterpret_cast<V8u*>(p) = (v))
#define Splat8(x) (V8{(x), (x), (x), (x), (x), (x), (x), (x)})

// 8 bfloat16 values at any byte, as float32 lanes (a bfloat16 is the top
// half of its float32), and back, rounded to nearest even as FloatToBf16
// does (vector_math.cc and row_kernels.cc).
inline __attribute__((always_inline)) void WidenBf16x8(const uint8_t* p, V8* v) {
  const U16x8 h = *reinterpret_cast<const U16x8u*>(p);
  *v = V8(__builtin_convertvector(h, U32x8) << 16);
}
inline __attribute__((always_inline)) void NarrowBf16x8(const V8& v, uint8_t* p) {
  U32x8 bits;
  Bf16BitsOf(U32x8(v), &bits);
  *reinterpret_cast<U16x8u*>(p) = __builtin_convertvector(bits, U16x8);
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
