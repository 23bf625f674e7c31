// Two sequences of 2 heads of 64 (100 queries, 128 keys), split out of
// [2, tokens, 128] rows and merged back: the bmm's batch of 4 is [2, 2]
// with strides that do not merge (a sequence every 12800 or 16384 elements,
// a head every 64), so the kernel keeps both dims and splits its batch
// index over them where it reads q, k and v and where it stores the merge
// (aten::regroupsLeadingDims, LowerAttention.cpp's MatrixView): one kernel,
// no copy kernels before or after it (passes/FormKernels.cpp).
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels=fuse=true | FileCheck %s --check-prefix=FORM
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels=fuse=true --ncc-lower-to-isa | FileCheck %s
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels=fuse=true --ncc-lower-to-isa | FileCheck %s --check-prefix=ST
// FORM: nc.kernel "k0_attention"{{.*}} -> tensor<2x100x128xf32>
// FORM-NOT: nc.kernel "k1
// Q's rows of batch b = 2 * sequence + head start at sequence * 12800 +
// head * 64. The two heads of a sequence sit side by side (rows of 64 f32,
// 256 bytes): they form a head group, whose Q rows load once, 128 wide,
// and each head reads its 64 columns of that tile.
// CHECK: nc.dma_load %arg3 -> %[[Q0:.*]] {ap = array<i64: 128, 100, 1, 128>, {{.*}} offset = 0 : i64
// CHECK: nc.tile_columns %[[Q0]][0] {{.*}} -> memref<100x64xf32, 1>
// CHECK: nc.tile_columns %[[Q0]][64] {{.*}} -> memref<100x64xf32, 1>
// CHECK: nc.dma_load %arg3 {{.*}} {ap = array<i64: 128, 100, 1, 128>, {{.*}} offset = 12800 : i64
// CHECK-NOT: nc.dma_load %arg3
// The merged output: the group's heads [100 x 64] each, gathered side by
// side into one tile and stored once at its sequence's rows.
// ST: nc.dma_store {{.*}} {ap = array<i64: 128, 100, 1, 128>, {{.*}} offset = 0 : i64{{.*}} memref<2x100x128xf32>
// ST: nc.dma_store {{.*}} {ap = array<i64: 128, 100, 1, 128>, {{.*}} offset = 12800 : i64{{.*}} memref<2x100x128xf32>
// ST-NOT: nc.dma_store
func.func @batched_heads(%qi: tensor<2x100x128xf32>, %ki: tensor<2x128x128xf32>, %vi: tensor<2x128x128xf32>) -> tensor<2x100x128xf32> {
  %q4 = aten.view %qi {size = array<i64: 2, 100, 2, 64>} : tensor<2x100x128xf32> -> tensor<2x100x2x64xf32>
  %q = aten.transpose.int %q4 {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x100x2x64xf32> -> tensor<2x2x100x64xf32>
  %k4 = aten.view %ki {size = array<i64: 2, 128, 2, 64>} : tensor<2x128x128xf32> -> tensor<2x128x2x64xf32>
  %k = aten.transpose.int %k4 {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x128x2x64xf32> -> tensor<2x2x128x64xf32>
  %v4 = aten.view %vi {size = array<i64: 2, 128, 2, 64>} : tensor<2x128x128xf32> -> tensor<2x128x2x64xf32>
  %v = aten.transpose.int %v4 {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x128x2x64xf32> -> tensor<2x2x128x64xf32>
  %kt = aten.transpose.int %k {dim0 = 2 : i64, dim1 = 3 : i64} : tensor<2x2x128x64xf32> -> tensor<2x2x64x128xf32>
  %q3 = aten._unsafe_view %q {size = array<i64: 4, 100, 64>} : tensor<2x2x100x64xf32> -> tensor<4x100x64xf32>
  %kt3 = aten._unsafe_view %kt {size = array<i64: 4, 64, 128>} : tensor<2x2x64x128xf32> -> tensor<4x64x128xf32>
  %v3 = aten._unsafe_view %v {size = array<i64: 4, 128, 64>} : tensor<2x2x128x64xf32> -> tensor<4x128x64xf32>
  %s = aten.bmm %q3, %kt3 : tensor<4x100x64xf32>, tensor<4x64x128xf32> -> tensor<4x100x128xf32>
  %x = aten.div.Scalar %s, 8.0 : tensor<4x100x128xf32> -> tensor<4x100x128xf32>
  %p = aten._softmax %x {dim = -1 : i64} : tensor<4x100x128xf32> -> tensor<4x100x128xf32>
  %o = aten.bmm %p, %v3 : tensor<4x100x128xf32>, tensor<4x128x64xf32> -> tensor<4x100x64xf32>
  %o4 = aten._unsafe_view %o {size = array<i64: 2, 2, 100, 64>} : tensor<4x100x64xf32> -> tensor<2x2x100x64xf32>
  %t = aten.transpose.int %o4 {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x2x100x64xf32> -> tensor<2x100x2x64xf32>
  %m = aten.reshape %t {size = array<i64: 2, 100, 128>} : tensor<2x100x2x64xf32> -> tensor<2x100x128xf32>
  return %m : tensor<2x100x128xf32>
}
