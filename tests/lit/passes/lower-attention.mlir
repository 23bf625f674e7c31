// softmax(q @ k^T / 8 masked) @ v as one kernel (passes/AttentionPattern.h,
// passes/LowerAttention.cpp). 2 heads, 200 queries (2 query blocks of 128 +
// 72 rows), 640 keys (a key block of 512 and one of 128), head dim 64.
//
// At -O2 FormKernels makes one nc.attention kernel of the pattern; -O0
// keeps one kernel per op.
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels=fuse=true | FileCheck %s --check-prefix=FORM
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels=fuse=false | grep -c "nc.kernel" | FileCheck %s --check-prefix=O0
// FORM: nc.kernel "k0_attention"({{.*}}) {nc.attention
// FORM-NOT: nc.kernel
// O0: 5
//
// Lowered: per head and query block, two key blocks (the mask is an input,
// so no block is skipped): a scores matmul each (2 heads x 2 query blocks
// x 2 = 8), and per query block 5 products with V (4 + 1 128-key chunks,
// 20): 28 matmuls.
// The scores stay on chip: the only stores are the output's 4 tiles.
// The exp of each block sums its row on the scalar engine (accum).
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels=fuse=true --ncc-lower-to-isa | grep -c "nc.matmul" | FileCheck %s --check-prefix=MM
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels=fuse=true --ncc-lower-to-isa | grep -c "nc.dma_store" | FileCheck %s --check-prefix=ST
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels=fuse=true --ncc-lower-to-isa | FileCheck %s --check-prefix=ISA
// MM: 28
// ST: 4
// ISA: nc.dma_store {{.*}} : memref<128x64xf32, 1>, memref<2x200x64xf32>
// ISA: nc.activation {{.*}} accum {{.*}}func = "exp"
func.func @attention(%q: tensor<2x200x64xf32>, %k: tensor<2x640x64xf32>, %v: tensor<2x640x64xf32>,
                     %mask: tensor<200x640xi1>) -> tensor<2x200x64xf32> {
  %kt = aten.transpose.int %k {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x640x64xf32> -> tensor<2x64x640xf32>
  %s = aten.bmm %q, %kt : tensor<2x200x64xf32>, tensor<2x64x640xf32> -> tensor<2x200x640xf32>
  %x = aten.div.Scalar %s, 8.0 : tensor<2x200x640xf32> -> tensor<2x200x640xf32>
  %xm = aten.masked_fill.Scalar %x, %mask, 0xFFF0000000000000 : tensor<2x200x640xf32>, tensor<200x640xi1> -> tensor<2x200x640xf32>
  %p = aten._softmax %xm {dim = -1 : i64} : tensor<2x200x640xf32> -> tensor<2x200x640xf32>
  %o = aten.bmm %p, %v : tensor<2x200x640xf32>, tensor<2x640x64xf32> -> tensor<2x200x64xf32>
  return %o : tensor<2x200x64xf32>
}
