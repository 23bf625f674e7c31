// Copies that read their input across its contiguous dim
// (passes/LowerToIsa.cpp, mergeCopiedColumns and loadTransposed).
// RUN: neuron-opt %s --split-input-file --ncc-form-kernels=fuse=true --ncc-lower-to-isa=few-bytes=0 | FileCheck %s

// NHWC to NCHW: the columns take H x W (one run in both views), so a row
// tile is [C of two images x 196]. Its rows are adjacent in the input in
// two equal segments of 64 (one per image), loaded in one transfer with the
// columns on the partitions, transposed on the TensorEngine, copied out of
// PSUM and stored in one run per partition.
// CHECK-LABEL: func.func @nhwc_to_nchw
// CHECK: %[[T:.*]] = nc.alloc_tile {{.*}} : memref<128x196xf32, 1>
// CHECK-NEXT: %[[P:.*]] = nc.alloc_psum : memref<128x196xf32, 2>
// CHECK-NEXT: %[[C:.*]] = nc.alloc_tile {{.*}} : memref<128x128xf32, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[C]] {ap = array<i64: 64, 128, 12544, 2, 1, 64>
// CHECK: nc.transpose %{{.*}}, %[[C]]
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 64, 68, 12544, 2, 1, 64>
// CHECK: nc.transpose
// CHECK-NEXT: nc.tensor_scalar %[[T]], %[[P]]
// CHECK-NEXT: nc.dma_store %[[T]] -> %{{.*}} {ap = array<i64: 196, 128, 1, 196>
func.func @nhwc_to_nchw(%x: tensor<2x14x14x64xf32>) -> tensor<2x64x14x14xf32> {
  %p = aten.permute %x {dims = array<i64: 0, 3, 1, 2>} : tensor<2x14x14x64xf32> -> tensor<2x64x14x14xf32>
  %c = aten.clone %p : tensor<2x64x14x14xf32> -> tensor<2x64x14x14xf32>
  return %c : tensor<2x64x14x14xf32>
}

// -----

// ViT's flatten(2).transpose(1, 2): the first row tile's 128 tokens are
// image 0's 100 and the first 28 of image 1, two segments of different
// lengths, each loaded into its range of the transposed block.
// CHECK-LABEL: func.func @flatten_transpose
// CHECK: %[[C:.*]] = nc.alloc_tile {{.*}} : memref<128x128xf32, 1>
// CHECK-NEXT: %[[A:.*]] = nc.tile_columns %[[C]][0] : memref<128x128xf32, 1> -> memref<128x100xf32, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[A]] {ap = array<i64: 100, 128, 1, 100>, {{.*}}offset = 0 : i64
// CHECK-NEXT: %[[B:.*]] = nc.tile_columns %[[C]][100] : memref<128x128xf32, 1> -> memref<128x28xf32, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[B]] {ap = array<i64: 100, 128, 1, 28>, {{.*}}offset = 25600 : i64
// CHECK: nc.transpose %{{.*}}, %[[C]]
func.func @flatten_transpose(%x: tensor<2x256x10x10xf32>) -> tensor<2x100x256xf32> {
  %r = aten.reshape %x {size = array<i64: 2, 256, 100>} : tensor<2x256x10x10xf32> -> tensor<2x256x100xf32>
  %t = aten.transpose.int %r {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x256x100xf32> -> tensor<2x100x256xf32>
  %c = aten.clone %t : tensor<2x100x256xf32> -> tensor<2x100x256xf32>
  return %c : tensor<2x100x256xf32>
}

// -----

// The last dim moved to the front: merging the chained columns only while
// 128 rows remain would give [512 x 672] rows of (e, a), adjacent in the
// input along e alone, each read element by element. The copy takes all
// four leading dims as its columns instead, [32 x 2688]: its 32 rows are
// adjacent in the input, loaded as [128 x 128] blocks and transposed on
// the TensorEngine. A position's 32 rows end where the next one's begin,
// so each partition loads four consecutive positions as one run of 128
// (not four runs of 32 positions 128 apart), and four copies stepping by
// four put the transposed blocks in order. (The permute plan would store
// runs of 21 positions, 84 bytes: too short.)
// CHECK-LABEL: func.func @last_dim_first
// CHECK: %[[T:.*]] = nc.alloc_tile {{.*}} : memref<32x2688xf32, 1>
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 128, 128, 1, 128>
// CHECK-COUNT-4: nc.transpose %{{.*}} : memref<32x128xf32, 2>, memref<128x32xf32, 1>
// CHECK: %[[C:.*]] = nc.tile_columns %[[T]][1] {step = 4 : i64} : memref<32x2688xf32, 1> -> memref<32x128xf32, 1>
// CHECK: nc.tensor_scalar %[[C]]
func.func @last_dim_first(%x: tensor<16x8x7x3x32xf32>) -> tensor<32x16x8x7x3xf32> {
  %p = aten.permute %x {dims = array<i64: 4, 0, 1, 2, 3>} : tensor<16x8x7x3x32xf32> -> tensor<32x16x8x7x3xf32>
  %c = aten.clone %p : tensor<32x16x8x7x3xf32> -> tensor<32x16x8x7x3xf32>
  return %c : tensor<32x16x8x7x3xf32>
}

// -----

// Four times as many positions: the permute plan puts 84 consecutive
// positions of all 32 rows on each partition (the output's inner dim on
// the partitions, its outer dim in the columns), loaded as one run of 2688
// elements, copied into the output's order by 32 stepped copies, and
// stored in 32 runs of 84.
// CHECK-LABEL: func.func @last_dim_first_rearranged
// CHECK: %[[IN:.*]] = nc.alloc_tile {{.*}} : memref<128x2688xf32, 1>
// CHECK-COUNT-8: nc.dma_load %{{.*}} -> %[[IN]] {ap = array<i64: 2688, 16, 1, 2688>
// CHECK-COUNT-32: nc.tensor_scalar
// CHECK: nc.dma_store %{{.*}} {ap = array<i64: 84, 8, 10752, 32, 1, 84>
// CHECK-NOT: nc.transpose
// CHECK: return
func.func @last_dim_first_rearranged(%x: tensor<16x8x7x12x32xf32>) -> tensor<32x16x8x7x12xf32> {
  %p = aten.permute %x {dims = array<i64: 4, 0, 1, 2, 3>} : tensor<16x8x7x12x32xf32> -> tensor<32x16x8x7x12xf32>
  %c = aten.clone %p : tensor<32x16x8x7x12xf32> -> tensor<32x16x8x7x12xf32>
  return %c : tensor<32x16x8x7x12xf32>
}
