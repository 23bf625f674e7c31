// A cat along the last dim of short rows, alone in its kernel
// (passes/LowerToIsa.cpp, rowCatFactor and lowerRowCat): rows of 32 f32
// (128 bytes) go 8 to a partition, so the output tile [128 x 256] is stored
// in one run per partition; the padding (one splat value) is one iota over
// the tile, and the piece, whose rows are consecutive, is loaded 8 rows at a
// time in one run per partition and copied row by row into its columns
// [1 + 32 j, 31 + 32 j).
// RUN: neuron-opt %s --split-input-file --ncc-form-kernels=fuse=true --ncc-lower-to-isa | FileCheck %s
// CHECK-LABEL: func.func @padded_rows
// CHECK: %[[OUT:.*]] = nc.alloc_tile {{.*}} : memref<128x256xf32, 1>
// CHECK-NEXT: nc.iota %[[OUT]]
// CHECK-NEXT: %[[S:.*]] = nc.alloc_tile {{.*}} : memref<128x240xf32, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[S]] {ap = array<i64: 240, 128, 1, 240>
// CHECK: nc.tile_columns %[[OUT]][1] : memref<128x256xf32, 1> -> memref<128x30xf32, 1>
// CHECK: nc.tile_columns %[[OUT]][33] : memref<128x256xf32, 1> -> memref<128x30xf32, 1>
// CHECK: %[[LAST:.*]] = nc.tile_columns %[[OUT]][225] : memref<128x256xf32, 1> -> memref<128x30xf32, 1>
// CHECK-NEXT: nc.tensor_scalar %[[LAST]]
// CHECK-NEXT: nc.dma_store %[[OUT]] -> %{{.*}} {ap = array<i64: 256, 64, 1, 256>, {{.*}}offset = 0 : i64
func.func @padded_rows(%x: tensor<16384x30xf32>) -> tensor<16384x32xf32> {
  %z = arith.constant dense<0.0> : tensor<16384x1xf32>
  %c = aten.cat %z, %x, %z {dim = 1 : i64} : tensor<16384x1xf32>, tensor<16384x30xf32>, tensor<16384x1xf32> -> tensor<16384x32xf32>
  return %c : tensor<16384x32xf32>
}

// -----

// A transposed piece has no consecutive rows: one row per partition, each
// piece loaded into its column range.
// CHECK-LABEL: func.func @transposed_piece
// CHECK: %[[T:.*]] = nc.alloc_tile {{.*}} : memref<128x32xf32, 1>
// CHECK-NOT: nc.iota
// CHECK: nc.dma_load %{{.*}} -> %{{.*}} {ap = array<i64: 1, 128, 16384, 16>
// CHECK: nc.dma_store %[[T]] -> %{{.*}} {ap = array<i64: 32, 128, 1, 32>
func.func @transposed_piece(%x: tensor<16384x16xf32>, %y: tensor<16x16384xf32>) -> tensor<16384x32xf32> {
  %t = aten.t %y : tensor<16x16384xf32> -> tensor<16384x16xf32>
  %c = aten.cat %x, %t {dim = 1 : i64} : tensor<16384x16xf32>, tensor<16384x16xf32> -> tensor<16384x32xf32>
  return %c : tensor<16384x32xf32>
}
