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

// -----

// Two values stacked along a new last dim and flattened interleave one
// column each: the cat (through the reshape it returns) packs 128 rows of two
// on a partition, and each piece is one copy written along a step of 2
// rather than 128 copies of one column.
// CHECK-LABEL: func.func @stacked
// CHECK: %[[OUT:.*]] = nc.alloc_tile {{.*}} : memref<128x256xf32, 1>
// CHECK-NEXT: %[[X:.*]] = nc.alloc_tile {{.*}} : memref<128x128xf32, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[X]] {ap = array<i64: 128, 128, 1, 128>
// CHECK-NEXT: %[[EVEN:.*]] = nc.tile_columns %[[OUT]][0] {step = 2 : i64} : memref<128x256xf32, 1> -> memref<128x128xf32, 1>
// CHECK-NEXT: nc.tensor_scalar %[[EVEN]], %[[X]]
// CHECK: %[[ODD:.*]] = nc.tile_columns %[[OUT]][1] {step = 2 : i64}
// CHECK-NEXT: nc.tensor_scalar %[[ODD]]
// CHECK-NEXT: nc.dma_store %[[OUT]] -> %{{.*}} {ap = array<i64: 256, 128, 1, 256>
func.func @stacked(%x: tensor<16x2048x64xf32>, %y: tensor<16x2048x64xf32>) -> tensor<16x2048x128xf32> {
  %a = aten.unsqueeze %x {dim = 3 : i64} : tensor<16x2048x64xf32> -> tensor<16x2048x64x1xf32>
  %b = aten.unsqueeze %y {dim = 3 : i64} : tensor<16x2048x64xf32> -> tensor<16x2048x64x1xf32>
  %c = aten.cat %a, %b {dim = -1 : i64} : tensor<16x2048x64x1xf32>, tensor<16x2048x64x1xf32> -> tensor<16x2048x64x2xf32>
  %r = aten.reshape %c {size = array<i64: 16, 2048, 128>} : tensor<16x2048x64x2xf32> -> tensor<16x2048x128xf32>
  return %r : tensor<16x2048x128xf32>
}

// -----

// A last dim of 1 broadcast to 3 (repeat_interleave): each row tile is
// loaded once and written three times along a step of 3
// (lower-to-isa-copies.mlir has the other broadcasts).
// CHECK-LABEL: func.func @repeated
// CHECK: %[[X:.*]] = nc.alloc_tile {{.*}} : memref<128x256xf32, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[X]] {ap = array<i64: 256, 64, 1, 256>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[X]] {ap = array<i64: 256, 64, 1, 256>
// CHECK-NEXT: %[[OUT:.*]] = nc.alloc_tile {{.*}} : memref<128x768xf32, 1>
// CHECK-NEXT: %[[C0:.*]] = nc.tile_columns %[[OUT]][0] {step = 3 : i64}
// CHECK-NEXT: nc.tensor_scalar %[[C0]], %[[X]]
// CHECK-NEXT: %[[C1:.*]] = nc.tile_columns %[[OUT]][1] {step = 3 : i64}
// CHECK-NEXT: nc.tensor_scalar %[[C1]], %[[X]]
// CHECK-NEXT: %[[C2:.*]] = nc.tile_columns %[[OUT]][2] {step = 3 : i64}
// CHECK-NEXT: nc.tensor_scalar %[[C2]], %[[X]]
// CHECK-NEXT: nc.dma_store %[[OUT]] -> %{{.*}} {ap = array<i64: 768, 64, 1, 768>
func.func @repeated(%x: tensor<4096x256xf32>) -> tensor<4096x768xf32> {
  %a = aten.unsqueeze %x {dim = 2 : i64} : tensor<4096x256xf32> -> tensor<4096x256x1xf32>
  %e = aten.expand %a {size = array<i64: 4096, 256, 3>} : tensor<4096x256x1xf32> -> tensor<4096x256x3xf32>
  %r = aten.reshape %e {size = array<i64: 4096, 768>} : tensor<4096x256x3xf32> -> tensor<4096x768xf32>
  return %r : tensor<4096x768xf32>
}
