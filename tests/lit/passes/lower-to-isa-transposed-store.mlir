// Results stored transposed (LowerToIsa.cpp, storeTransposed): the tile's
// rows are runs of adjacent elements in HBM and its columns are strided, so
// blocks of columns go through the TensorEngine (transpose into PSUM, copy
// out) and are stored with the columns on the partitions, each run of rows
// one DMA run instead of one run per element.
// RUN: neuron-opt %s --split-input-file --ncc-form-kernels --ncc-lower-to-isa=few-bytes=0 | FileCheck %s

// A projection's output split into heads and stored as K^T per head,
// [batch, heads, head_dim, tokens], as a batched matmul after the rotary
// reads it: a row tile's 128 tokens are two batches of 64 (two runs 16384
// elements apart), its 256 columns two heads of 128 (stride 64, the next
// head 8192 further). One transfer per head: partitions at stride 64, then
// the two runs of 64 tokens.
// CHECK-LABEL: func.func @projection_stored_as_kt
// CHECK: nc.transpose {{.*}} : memref<128x128xf32, 2>, memref<128x128xbf16, 1>
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 64, 128, 16384, 2, 1, 64>, {{.*}} offset = 0 : i64
// CHECK: nc.transpose {{.*}} : memref<128x128xf32, 2>, memref<128x128xbf16, 1>
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 64, 128, 16384, 2, 1, 64>, {{.*}} offset = 8192 : i64
// CHECK-NOT: nc.dma_store
func.func @projection_stored_as_kt(%x: tensor<128x256xbf16>, %w: tensor<256x256xbf16>) -> tensor<2x2x128x64xbf16> {
  %y = aten.mm %x, %w : tensor<128x256xbf16>, tensor<256x256xbf16> -> tensor<128x256xbf16>
  %v = aten.view %y {size = array<i64: 2, 64, 2, 128>} : tensor<128x256xbf16> -> tensor<2x64x2x128xbf16>
  %h = aten.transpose.int %v {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x64x2x128xbf16> -> tensor<2x2x64x128xbf16>
  %e = aten.exp %h : tensor<2x2x64x128xbf16> -> tensor<2x2x64x128xbf16>
  %t = aten.transpose.int %e {dim0 = 2 : i64, dim1 = 3 : i64} : tensor<2x2x64x128xbf16> -> tensor<2x2x128x64xbf16>
  %c = aten.clone %t : tensor<2x2x128x64xbf16> -> tensor<2x2x128x64xbf16>
  return %c : tensor<2x2x128x64xbf16>
}

// -----

// Runs of unequal length: the first row tile holds batch 0's 100 rows and
// batch 1's first 28, stored as two transfers from one transposed block; the
// second row tile, batch 1's last 72 rows, as one.
// CHECK-LABEL: func.func @uneven_runs
// CHECK: nc.transpose {{.*}} : memref<128x128xf32, 2>, memref<128x128xbf16, 1>
// CHECK: %[[T:.*]] = nc.alloc_tile {{.*}} : memref<128x128xbf16, 1>
// CHECK: %[[A:.*]] = nc.tile_columns %[[T]][0] : memref<128x128xbf16, 1> -> memref<128x100xbf16, 1>
// CHECK: nc.dma_store %[[A]] {{.*}} {ap = array<i64: 100, 128, 1, 100>, {{.*}} offset = 0 : i64
// CHECK: %[[B:.*]] = nc.tile_columns %[[T]][100] : memref<128x128xbf16, 1> -> memref<128x28xbf16, 1>
// CHECK: nc.dma_store %[[B]] {{.*}} {ap = array<i64: 100, 128, 1, 28>, {{.*}} offset = 12800 : i64
// CHECK: nc.transpose {{.*}} : memref<128x72xf32, 2>, memref<72x128xbf16, 1>
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 100, 128, 1, 72>, {{.*}} offset = 12828 : i64
// CHECK-NOT: nc.dma_store
func.func @uneven_runs(%x: tensor<2x100x128xbf16>) -> tensor<2x128x100xbf16> {
  %y = aten.exp %x : tensor<2x100x128xbf16> -> tensor<2x100x128xbf16>
  %t = aten.transpose.int %y {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x100x128xbf16> -> tensor<2x128x100xbf16>
  return %t : tensor<2x128x100xbf16>
}

// -----

// A per-row result whose rows are adjacent in HBM (row sums of 512 rows):
// each row tile's [128 x 1] sums are transposed into one partition's run,
// four row tiles gathered into one store of 512 elements, where each row
// tile stored 128 elements of one descriptor each.
// CHECK-LABEL: func.func @row_sums_stored_as_one_run
// CHECK-COUNT-4: nc.transpose {{.*}} : memref<1x128xf32, 2>, memref<128x1xf32, 1>
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 1, 1, 1, 512>, {{.*}} offset = 0 : i64
// CHECK-NOT: nc.dma_store
func.func @row_sums_stored_as_one_run(%x: tensor<512x1024xf32>) -> tensor<512xf32> {
  %s = aten.sum.dim_IntList %x {dim = array<i64: 1>} : tensor<512x1024xf32> -> tensor<512xf32>
  return %s : tensor<512xf32>
}

// -----

// One row tile: its 128 sums go as they are (a few descriptors cost less
// than the transpose's wait).
// CHECK-LABEL: func.func @row_sums_of_one_row_tile
// CHECK-NOT: nc.transpose
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 1, 128, 1, 1>
func.func @row_sums_of_one_row_tile(%x: tensor<128x1024xf32>) -> tensor<128xf32> {
  %s = aten.sum.dim_IntList %x {dim = array<i64: 1>} : tensor<128x1024xf32> -> tensor<128xf32>
  return %s : tensor<128xf32>
}
