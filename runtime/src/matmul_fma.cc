// The TensorEngine kernel with fused multiply-adds, for operands whose
// products are exact in float32 (bf16, f16): one rounding per step is then
// the same as the specified two. Built with -mavx2 -mfma; vector_math.cc
// calls it only on hosts that have both.
#include <immintrin.h>

#include "matmul_kernel.h"

namespace neuroncc::rt::vm {

void MatmulFusedAvx2(const MatmulOperands& operands, uint32_t n0, uint32_t n1, bool accumulate, uint8_t* out_rows,
                     uint64_t out_stride) {
  MatmulStrips(operands, n0, n1, accumulate, out_rows, out_stride,
               [](V8 acc, V8 a, V8 b) { return V8(_mm256_fmadd_ps(__m256(a), __m256(b), __m256(acc))); });
}

}  // namespace neuroncc::rt::vm
