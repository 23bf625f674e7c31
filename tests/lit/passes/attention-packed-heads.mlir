// Grouped-query decoding: 8 query heads of one row each over 2 key heads of
// 300 tokens, K and V expanded ([1, 2, 300, 64] -> [1, 2, 4, 300, 64] ->
// [1, 8, 300, 64]). The four query heads of a key head read the same K and V
// (K.at(b) equal), so they are packed into one query block of their four
// rows (LowerAttention.cpp, "packed batches"): one load of 4 query rows,
// K^T prepared once (3 transposed chunks), one [4 x 300] scores matmul, and
// one store of 4 output rows per key head.
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels=fuse=true --ncc-lower-to-isa | FileCheck %s
// CHECK: nc.kernel "k0_attention"
// CHECK: nc.dma_load %[[K:arg[0-9]+]] -> {{.*}} {ap = array<i64: 64, 128, 1, 64>, {{.*}}offset = 0 : i64
// CHECK: nc.dma_load %[[K]] -> {{.*}} {ap = array<i64: 64, 128, 1, 64>, {{.*}}offset = 8192 : i64
// CHECK: nc.dma_load %[[K]] -> {{.*}} {ap = array<i64: 64, 44, 1, 64>, {{.*}}offset = 16384 : i64
// CHECK: nc.dma_load %[[Q:arg[0-9]+]] -> {{.*}} {ap = array<i64: 64, 4, 1, 64>, {{.*}}offset = 0 : i64{{.*}} memref<1x8x1x64xf32>, memref<4x64xf32, 1>
// CHECK: nc.matmul {{.*}} : memref<4x300xf32, 2>, memref<64x4xf32, 1>, memref<64x300xf32, 1>
// CHECK-NOT: nc.dma_load %[[Q]]
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 64, 4, 1, 64>, {{.*}}offset = 0 : i64{{.*}} memref<4x64xf32, 1>, memref<1x8x1x64xf32>
// The second key head.
// CHECK: nc.dma_load %[[K]] -> {{.*}} {ap = array<i64: 64, 128, 1, 64>, {{.*}}offset = 19200 : i64
// CHECK: nc.dma_load %[[Q]] -> {{.*}} {ap = array<i64: 64, 4, 1, 64>, {{.*}}offset = 256 : i64
// CHECK: nc.matmul {{.*}} : memref<4x300xf32, 2>, memref<64x4xf32, 1>, memref<64x300xf32, 1>
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 64, 4, 1, 64>, {{.*}}offset = 256 : i64
// CHECK-NOT: nc.dma_load %[[Q]]
// CHECK-NOT: nc.dma_store
func.func @grouped_decode(%q: tensor<1x8x1x64xf32>, %ki: tensor<1x2x300x64xf32>, %vi: tensor<1x2x300x64xf32>) -> tensor<1x8x1x64xf32> {
  %k5 = aten.view %ki {size = array<i64: 1, 2, 1, 300, 64>} : tensor<1x2x300x64xf32> -> tensor<1x2x1x300x64xf32>
  %ke = aten.expand %k5 {size = array<i64: 1, 2, 4, 300, 64>} : tensor<1x2x1x300x64xf32> -> tensor<1x2x4x300x64xf32>
  %k = aten.reshape %ke {size = array<i64: 1, 8, 300, 64>} : tensor<1x2x4x300x64xf32> -> tensor<1x8x300x64xf32>
  %v5 = aten.view %vi {size = array<i64: 1, 2, 1, 300, 64>} : tensor<1x2x300x64xf32> -> tensor<1x2x1x300x64xf32>
  %ve = aten.expand %v5 {size = array<i64: 1, 2, 4, 300, 64>} : tensor<1x2x1x300x64xf32> -> tensor<1x2x4x300x64xf32>
  %v = aten.reshape %ve {size = array<i64: 1, 8, 300, 64>} : tensor<1x2x4x300x64xf32> -> tensor<1x8x300x64xf32>
  %kt = aten.transpose.int %k {dim0 = 2 : i64, dim1 = 3 : i64} : tensor<1x8x300x64xf32> -> tensor<1x8x64x300xf32>
  %q3 = aten.reshape %q {size = array<i64: 8, 1, 64>} : tensor<1x8x1x64xf32> -> tensor<8x1x64xf32>
  %kt3 = aten.reshape %kt {size = array<i64: 8, 64, 300>} : tensor<1x8x64x300xf32> -> tensor<8x64x300xf32>
  %v3 = aten.reshape %v {size = array<i64: 8, 300, 64>} : tensor<1x8x300x64xf32> -> tensor<8x300x64xf32>
  %s = aten.bmm %q3, %kt3 : tensor<8x1x64xf32>, tensor<8x64x300xf32> -> tensor<8x1x300xf32>
  %x = aten.mul.Scalar %s, 0.125 : tensor<8x1x300xf32> -> tensor<8x1x300xf32>
  %p = aten._softmax %x {dim = -1 : i64} : tensor<8x1x300xf32> -> tensor<8x1x300xf32>
  %o = aten.bmm %p, %v3 : tensor<8x1x300xf32>, tensor<8x300x64xf32> -> tensor<8x1x64xf32>
  %o4 = aten.reshape %o {size = array<i64: 1, 8, 1, 64>} : tensor<8x1x64xf32> -> tensor<1x8x1x64xf32>
  return %o4 : tensor<1x8x1x64xf32>
}
