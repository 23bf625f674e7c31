// Short rows widened over leading dims (LowerToIsa.cpp, widenShortRows): a
// value varying along a short middle dim keeps the dims from merging and
// packing, so those dims move onto the columns; the rows step along the
// outer dim, interleaved several to a partition, and the value loads its
// varying elements compact, widened on chip by stepped copies
// (loadBroadcastColumns).
// RUN: neuron-opt %s --split-input-file --ncc-form-kernels=fuse=true --ncc-lower-to-isa=few-bytes=0 | FileCheck %s

// [2048, 2, 2] by a scale over the middle dim: rows of 4 columns, two a
// partition (one run of 8); the scale loads once for the kernel, 2 values a
// partition, and two stepped copies repeat each over its 2 columns.
// CHECK-LABEL: func.func @middle_scale
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 8, 128, 1, 8>, {{.*}} offset = 0 : i64
// CHECK: %[[C:.*]] = nc.alloc_tile {iteration = 1 : i64} : memref<128x2xbf16, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[C]] {ap = array<i64: 0, 128, 1, 2>
// CHECK-NEXT: %[[S0:.*]] = nc.tile_columns %{{.*}}[0] {step = 2 : i64} : memref<128x4xbf16, 1> -> memref<128x2xbf16, 1>
// CHECK-NEXT: nc.tensor_scalar %[[S0]], %[[C]]
// CHECK-NEXT: %[[S1:.*]] = nc.tile_columns %{{.*}}[1] {step = 2 : i64} : memref<128x4xbf16, 1> -> memref<128x2xbf16, 1>
// CHECK-NEXT: nc.tensor_scalar %[[S1]], %[[C]]
// CHECK-NOT: memref<1x2x1xbf16>, memref
// CHECK: return
func.func @middle_scale(%x: tensor<2048x2x2xbf16>, %b: tensor<1x2x1xbf16>) -> tensor<2048x2x2xbf16> {
  %y = aten.mul.Tensor %x, %b : tensor<2048x2x2xbf16>, tensor<1x2x1xbf16> -> tensor<2048x2x2xbf16>
  return %y : tensor<2048x2x2xbf16>
}

// -----

// A scale per sample and middle index ([64, 1, 3, 1] beside [64, 64, 3,
// 3]): the columns are the last two dims; the scale also varies along the
// rows, so each row tile loads its 3 values a partition (two samples of 64
// rows each) and widens them with three stepped copies.
// CHECK-LABEL: func.func @per_sample_middle_scale
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 36, 128, 1, 36>
// CHECK: %[[C:.*]] = nc.alloc_tile {iteration = 1 : i64} : memref<128x3xbf16, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[C]] {ap = array<i64: 3, 8, 0, 16, 1, 3>, {{.*}} partition_dims = 2
// CHECK-COUNT-3: nc.tensor_scalar %{{.*}}, %[[C]]
// CHECK: nc.tensor_tensor
func.func @per_sample_middle_scale(%x: tensor<64x64x3x3xbf16>, %b: tensor<64x1x3x1xbf16>) -> tensor<64x64x3x3xbf16> {
  %y = aten.mul.Tensor %x, %b : tensor<64x64x3x3xbf16>, tensor<64x1x3x1xbf16> -> tensor<64x64x3x3xbf16>
  return %y : tensor<64x64x3x3xbf16>
}
