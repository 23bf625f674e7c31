// Inputs loaded transposed (LowerToIsa.cpp, loadTransposed): the tile's rows
// are runs of adjacent elements in HBM and its columns are strided, so
// blocks of columns are loaded with the columns on the partitions and
// transposed on the TensorEngine.
// RUN: neuron-opt %s --split-input-file --ncc-form-kernels=fuse=true --ncc-lower-to-isa | FileCheck %s

// A centring over the 128 channels of [1, 128, 16, 32] in the permuted frame:
// rows are the 512 positions, columns the channels (512 apart). The positions
// of consecutive row tiles continue one run, so two row tiles load their
// channels together: runs of 256 positions (512 bytes, where 256 bytes cost
// a DMA descriptor more than their bytes), one transfer for two row tiles,
// each transposing its half. The two row tiles share the load's iteration of
// the memory plan, whose depth counts iterations (and so transfers in
// flight).
// CHECK-LABEL: func.func @channel_centring
// CHECK: %[[G:.*]] = nc.alloc_tile {iteration = 1 : i64} : memref<128x256xbf16, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[G]] {ap = array<i64: 512, 128, 1, 256>, {{.*}} offset = 0 : i64
// CHECK-NEXT: %[[A:.*]] = nc.tile_columns %[[G]][0] : memref<128x256xbf16, 1> -> memref<128x128xbf16, 1>
// CHECK-NEXT: nc.transpose %{{.*}}, %[[A]]
// CHECK-NOT: nc.dma_load
// CHECK: nc.alloc_tile {iteration = 1 : i64} : memref<128x512xbf16, 1>
// CHECK-NOT: nc.dma_load
// CHECK: nc.alloc_tile {iteration = 1 : i64} : memref<128x128xbf16, 1>
// CHECK-NEXT: nc.alloc_psum
// CHECK-NEXT: %[[B:.*]] = nc.tile_columns %[[G]][128] : memref<128x256xbf16, 1> -> memref<128x128xbf16, 1>
// CHECK-NEXT: nc.transpose %{{.*}}, %[[B]]
// CHECK-NOT: nc.dma_load
// CHECK: %[[H:.*]] = nc.alloc_tile {iteration = 2 : i64} : memref<128x256xbf16, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[H]] {ap = array<i64: 512, 128, 1, 256>, {{.*}} offset = 256 : i64
// CHECK: nc.tile_columns %[[H]][128]
// CHECK-NOT: nc.dma_load
// CHECK: return
func.func @channel_centring(%x: tensor<1x128x16x32xbf16>) -> tensor<1x128x16x32xbf16> {
  %m = aten.mean.dim %x {dim = array<i64: 1>, keepdim = true} : tensor<1x128x16x32xbf16> -> tensor<1x1x16x32xbf16>
  %y = aten.sub.Tensor %x, %m : tensor<1x128x16x32xbf16>, tensor<1x1x16x32xbf16> -> tensor<1x128x16x32xbf16>
  return %y : tensor<1x128x16x32xbf16>
}

// -----

// f32: a row tile's run of 128 positions is 512 bytes already, each row tile
// loads its own.
// CHECK-LABEL: func.func @channel_centring_f32
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 512, 128, 1, 128>, {{.*}} offset = 0 : i64
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 512, 128, 1, 128>, {{.*}} offset = 128 : i64
func.func @channel_centring_f32(%x: tensor<1x128x16x32xf32>) -> tensor<1x128x16x32xf32> {
  %m = aten.mean.dim %x {dim = array<i64: 1>, keepdim = true} : tensor<1x128x16x32xf32> -> tensor<1x1x16x32xf32>
  %y = aten.sub.Tensor %x, %m : tensor<1x128x16x32xf32>, tensor<1x1x16x32xf32> -> tensor<1x128x16x32xf32>
  return %y : tensor<1x128x16x32xf32>
}

// -----

// A per-row input of full row tiles whose rows are adjacent in HBM (a scale
// per row of [512, 256]): two row tiles' 256 values load as one run onto a
// partition, and each row tile transposes its 128 onto the partitions,
// where each row tile had loaded them one descriptor per row.
// CHECK-LABEL: func.func @per_row_scale
// CHECK: %[[G:.*]] = nc.alloc_tile {iteration = 1 : i64} : memref<1x256xbf16, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[G]] {ap = array<i64: 0, 1, 1, 256>, {{.*}} offset = 0 : i64
// CHECK-NEXT: %[[A:.*]] = nc.tile_columns %[[G]][0] : memref<1x256xbf16, 1> -> memref<1x128xbf16, 1>
// CHECK-NEXT: nc.transpose %{{.*}}, %[[A]] {{.*}} : memref<128x1xf32, 2>, memref<1x128xbf16, 1>
// CHECK: nc.tile_columns %[[G]][128]
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 0, 1, 1, 256>, {{.*}} offset = 256 : i64
// CHECK-NOT: memref<512x1xbf16>, memref<128x1xbf16
func.func @per_row_scale(%s: tensor<512x1xbf16>, %x: tensor<512x256xbf16>) -> tensor<512x256xbf16> {
  %y = aten.mul.Tensor %x, %s : tensor<512x256xbf16>, tensor<512x1xbf16> -> tensor<512x256xbf16>
  return %y : tensor<512x256xbf16>
}

// -----

// Rows whose segments differ (a per-row value broadcast over a dim between,
// [2, 1, 100, 1] beside [2, 3, 100, 256]: segments of 100 and 28 rows)
// would take a transfer per segment, each paying the fixed cost: the value
// loads as before, one descriptor per row.
// CHECK-LABEL: func.func @uneven_row_segments
// CHECK-NOT: nc.transpose
// CHECK: nc.dma_load %{{.*}} : memref<2x1x100x1xbf16>, memref<128x1xbf16, 1>
func.func @uneven_row_segments(%s: tensor<2x1x100x1xbf16>, %x: tensor<2x3x100x256xbf16>) -> tensor<2x3x100x256xbf16> {
  %y = aten.add.Tensor %x, %s {alpha = 1.0 : f64} : tensor<2x3x100x256xbf16>, tensor<2x1x100x1xbf16> -> tensor<2x3x100x256xbf16>
  return %y : tensor<2x3x100x256xbf16>
}

// -----

// A small kernel's transposed block of short runs (an add of a transposed
// [16, 300, 16]: two row tiles, each block 2048 runs of 32 bytes) goes in
// pieces of 16 partitions, which the queues take side by side, not as one
// transfer of 41 us on one queue.
// CHECK-LABEL: func.func @small_transposed_add
// CHECK-COUNT-8: nc.dma_load %{{.*}} {ap = array<i64: 16, 16, 2048, 2, 4800, 8, 1, 16>, {{.*}} : memref<16x300x16xbf16>, memref<128x256xbf16, 1>
// CHECK-NOT: nc.dma_load %{{.*}} : memref<16x300x16xbf16>, memref<128x256xbf16, 1>
// CHECK: nc.transpose
func.func @small_transposed_add(%x: tensor<16x300x16xbf16>, %b: tensor<16x1x1xbf16>) -> tensor<16x16x300xbf16> {
  %t = aten.transpose.int %x {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<16x300x16xbf16> -> tensor<16x16x300xbf16>
  %y = aten.add.Tensor %t, %b {alpha = 1.0 : f64} : tensor<16x16x300xbf16>, tensor<16x1x1xbf16> -> tensor<16x16x300xbf16>
  return %y : tensor<16x16x300xbf16>
}
