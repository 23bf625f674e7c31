// The TensorEngine's inner kernel, shared by vector_math.cc (products
// rounded, baseline and AVX2 builds) and matmul_fma.cc (fused, AVX2 + FMA
// build). Everything has internal linkage, so that code built for AVX2
// never stands in for the baseline build of another file.
#pragma once

#include <cstdint>

namespace neuroncc::rt::vm {
namespace {

typedef float V8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));
// The same vector at any float's alignment, for loads and stores.
typedef float V8u __attribute__((vector_size(32), aligned(4)));

// Macros rather than functions: a function taking or returning a 32-byte
// vector has a different ABI with and without AVX, and the baseline build
// has none.
#define Load8(p) (*reinterpret_cast<const V8u*>(p))
#define Store8(p, v) (*reinterpret_cast<V8u*>(p) = (v))
#define Splat8(x) (V8{(x), (x), (x), (x), (x), (x), (x), (x)})

// MR rows x 16 columns of sums kept in registers while k runs 0..K-1.
// `Fma` computes acc + a * b: two roundings, or one (fused) where the
// product is exact anyway.
template <int MR, typename Fma>
__attribute__((always_inline)) inline void MatmulBlock16(const float* A, const float* B, uint32_t K, uint32_t M,
                                                         uint32_t N, uint32_t m0, uint32_t n0, bool accumulate,
                                                         uint8_t* out_rows, uint64_t out_stride, Fma fma) {
  V8 acc[MR][2];
  {
    const V8 b0 = Load8(B + n0), b1 = Load8(B + n0 + 8);
    for (int i = 0; i < MR; ++i) {
      const float av = A[m0 + i];
      const V8 a = Splat8(av);
      acc[i][0] = a * b0;
      acc[i][1] = a * b1;
    }
  }
  for (uint32_t k = 1; k < K; ++k) {
    const float* a = A + size_t(k) * M + m0;
    const float* b = B + size_t(k) * N + n0;
    const V8 b0 = Load8(b), b1 = Load8(b + 8);
    for (int i = 0; i < MR; ++i) {
      const float av = a[i];
      const V8 ai = Splat8(av);
      acc[i][0] = fma(acc[i][0], ai, b0);
      acc[i][1] = fma(acc[i][1], ai, b1);
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* row = reinterpret_cast<float*>(out_rows + uint64_t(m0 + i) * out_stride) + n0;
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
inline void MatmulOne(const float* A, const float* B, uint32_t K, uint32_t M, uint32_t N, uint32_t m, uint32_t n,
                      bool accumulate, uint8_t* out_rows, uint64_t out_stride) {
  float s = A[m] * B[n];
  for (uint32_t k = 1; k < K; ++k) s += A[size_t(k) * M + m] * B[size_t(k) * N + n];
  float* out = reinterpret_cast<float*>(out_rows + uint64_t(m) * out_stride) + n;
  float old;
  __builtin_memcpy(&old, out, 4);
  float v = accumulate ? old + s : s;
  __builtin_memcpy(out, &v, 4);
}

template <typename Fma>
__attribute__((always_inline)) inline void MatmulStrips(const float* A, const float* B, uint32_t K, uint32_t M,
                                                        uint32_t N, uint32_t n0, uint32_t n1, bool accumulate,
                                                        uint8_t* out_rows, uint64_t out_stride, Fma fma) {
  constexpr uint32_t kMR = 6;
  uint32_t n = n0;
  for (; n + 16 <= n1; n += 16) {
    uint32_t m = 0;
    for (; m + kMR <= M; m += kMR) MatmulBlock16<kMR>(A, B, K, M, N, m, n, accumulate, out_rows, out_stride, fma);
    for (; m + 2 <= M; m += 2) MatmulBlock16<2>(A, B, K, M, N, m, n, accumulate, out_rows, out_stride, fma);
    for (; m < M; ++m) MatmulBlock16<1>(A, B, K, M, N, m, n, accumulate, out_rows, out_stride, fma);
  }
  for (; n < n1; ++n)
    for (uint32_t m = 0; m < M; ++m) MatmulOne(A, B, K, M, N, m, n, accumulate, out_rows, out_stride);
}

}  // namespace
}  // namespace neuroncc::rt::vm
