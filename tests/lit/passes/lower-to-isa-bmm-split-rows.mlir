// A batched matmul's epilogue over its rows of N reshaped into two dims
// ([2, 16, 99] -> [2, 16, 9, 11], what a stride-1 convolution's wide
// positions give): the epilogue joins the bmm's kernel over split columns
// [9, 11] (passes/FormKernels.cpp, joinsSplitColumns) and the lowering
// takes the same columns from the bmm's result (its rows are the batch x
// 16 leading dims), so a per-row scale [16, 1, 1] is one value per
// partition and each batch's tile is stored whole. The lowering once took
// the split only from mm and addmm, and this kernel failed with "a view of
// a value computed in the same kernel".
// RUN: neuron-opt %s --ncc-form-kernels=fuse=true --ncc-lower-to-isa | FileCheck %s
// CHECK: nc.kernel "k0_fused_bmm_reshape_mul_relu"
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 1, 16, 1, 1>, {{.*}} : memref<16x1x1xf32>, memref<16x1xf32, 1>
// CHECK: nc.matmul
// CHECK: nc.activation %[[OUT:.*]], %{{.*}} scale %{{.*}} : memref<16x1xf32, 1> {{{.*}}func = "relu"
// CHECK: nc.dma_store %[[OUT]] -> %{{.*}} {ap = array<i64: 99, 16, 1, 99>, {{.*}}offset = 0 : i64{{.*}} : memref<16x99xf32, 1>, memref<2x16x9x11xf32>
// CHECK: nc.matmul
// CHECK: nc.dma_store %{{.*}} {ap = array<i64: 99, 16, 1, 99>, {{.*}}offset = 1584 : i64{{.*}} : memref<16x99xf32, 1>, memref<2x16x9x11xf32>
// CHECK-NOT: nc.kernel "k1
func.func @bmm_split_rows(%a: tensor<2x16x8xf32>, %b: tensor<2x8x99xf32>, %s: tensor<16x1x1xf32>) -> tensor<2x16x9x11xf32> {
  %y = aten.bmm %a, %b : tensor<2x16x8xf32>, tensor<2x8x99xf32> -> tensor<2x16x99xf32>
  %v = aten.reshape %y {size = array<i64: 2, 16, 9, 11>} : tensor<2x16x99xf32> -> tensor<2x16x9x11xf32>
  %m = aten.mul.Tensor %v, %s : tensor<2x16x9x11xf32>, tensor<16x1x1xf32> -> tensor<2x16x9x11xf32>
  %r = aten.relu %m : tensor<2x16x9x11xf32> -> tensor<2x16x9x11xf32>
  return %r : tensor<2x16x9x11xf32>
}
