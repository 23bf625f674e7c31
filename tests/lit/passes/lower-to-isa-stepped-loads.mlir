// Loads whose innermost dim steps through HBM (passes/LowerToIsa.cpp,
// emitDma): instead of one DMA run per element, the contiguous span of each
// run of steps is loaded into a staging tile, and one tensor_scalar per
// outer index reads every step-th element of it through a stepped
// tile_columns view (neff.proto TileRef.step) into the tile the ops use;
// rows cut short a small gap apart are loaded with their gaps, a span of
// rows at a time, and copied row by row.
// RUN: neuron-opt %s --split-input-file --ncc-form-kernels=fuse=true --ncc-lower-to-isa=few-bytes=0 | FileCheck %s

// x[:, ::2]: rows of 64 read as spans of 63, compacted by step 2.
// CHECK-LABEL: func.func @every_other_column
// CHECK: %[[T:.*]] = nc.alloc_tile {{.*}} : memref<128x32xf32, 1>
// CHECK: %[[S:.*]] = nc.alloc_tile {{.*}} : memref<128x63xf32, 1>
// CHECK: nc.dma_load %{{.*}} -> %[[S]] {ap = array<i64: 64, 128, 1, 63>
// CHECK: %[[V:.*]] = nc.tile_columns %[[S]][0] {step = 2 : i64} : memref<128x63xf32, 1> -> memref<128x32xf32, 1>
// CHECK: nc.tensor_scalar %[[T]], %[[V]] {alu = "mul", {{.*}}imm = 1.000000e+00
// CHECK: nc.tensor_scalar %{{.*}}, %[[T]] {alu = "mul", {{.*}}imm = 2.000000e+00
func.func @every_other_column(%x: tensor<256x64xf32>) -> tensor<256x32xf32> {
  %s = aten.slice.Tensor %x {dim = 1 : i64, start = 0 : i64, end = 64 : i64, step = 2 : i64} : tensor<256x64xf32> -> tensor<256x32xf32>
  %y = aten.mul.Scalar %s, 2.0 : tensor<256x32xf32> -> tensor<256x32xf32>
  return %y : tensor<256x32xf32>
}

// -----

// Two stepped dims under a row sum: four outer rows (step 2 over 8) of 19
// elements each, compacted by step 3 into the four 7-column ranges. The
// kernel's two row tiles leave most DMA queues idle, so each tile's 512
// runs of 76 bytes load in five pieces side by side.
// CHECK-LABEL: func.func @strided_plane_sums
// CHECK: %[[T:.*]] = nc.alloc_tile {{.*}} : memref<128x28xf32, 1>
// CHECK: %[[S:.*]] = nc.alloc_tile {{.*}} : memref<128x76xf32, 1>
// CHECK: nc.dma_load %{{.*}} -> %[[S]] {ap = array<i64: 160, 26, 40, 4, 1, 19>, {{.*}}offset = 1 : i64
// CHECK-COUNT-3: nc.dma_load %{{.*}} -> %[[S]] {ap = array<i64: 160, 26, 40, 4, 1, 19>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[S]] {ap = array<i64: 160, 24, 40, 4, 1, 19>, {{.*}}offset = 16641 : i64
// CHECK: nc.tile_columns %[[S]][0] {step = 3 : i64}
// CHECK: nc.tile_columns %[[S]][19] {step = 3 : i64}
// CHECK: nc.tile_columns %[[S]][38] {step = 3 : i64}
// CHECK: %[[V:.*]] = nc.tile_columns %[[S]][57] {step = 3 : i64} : memref<128x76xf32, 1> -> memref<128x7xf32, 1>
// CHECK: %[[C:.*]] = nc.tile_columns %[[T]][21] : memref<128x28xf32, 1> -> memref<128x7xf32, 1>
// CHECK: nc.tensor_scalar %[[C]], %[[V]]
// CHECK: nc.tensor_reduce %{{.*}}, %[[T]] {alu = "add"
func.func @strided_plane_sums(%x: tensor<256x8x20xf32>) -> tensor<256xf32> {
  %a = aten.slice.Tensor %x {dim = 1 : i64, start = 0 : i64, end = 8 : i64, step = 2 : i64} : tensor<256x8x20xf32> -> tensor<256x4x20xf32>
  %b = aten.slice.Tensor %a {dim = 2 : i64, start = 1 : i64, end = 20 : i64, step = 3 : i64} : tensor<256x4x20xf32> -> tensor<256x4x7xf32>
  %s = aten.sum.dim_IntList %b {dim = array<i64: 1, 2>, keepdim = false} : tensor<256x4x7xf32> -> tensor<256xf32>
  return %s : tensor<256xf32>
}

// -----

// Steps of 100 would load 100 times the bytes: element runs as before
// (1280 of them, in eight pieces of 16 partitions side by side: the
// kernel's one tile leaves the other queues idle).
// CHECK-LABEL: func.func @wide_steps
// CHECK-COUNT-8: nc.dma_load %{{.*}} {ap = array<i64: 1000, 16, 100, 10>
// CHECK-NOT: step =
func.func @wide_steps(%x: tensor<128x1000xf32>) -> tensor<128x10xf32> {
  %s = aten.slice.Tensor %x {dim = 1 : i64, start = 0 : i64, end = 1000 : i64, step = 100 : i64} : tensor<128x1000xf32> -> tensor<128x10xf32>
  %y = aten.exp %s : tensor<128x10xf32> -> tensor<128x10xf32>
  return %y : tensor<128x10xf32>
}

// -----

// Three windows along a row (a 3-wide pooling with stride 2) differ only in
// their first element: one staging load of the span all three need
// (67 = 65 + 2 elements), and each window's copy reads it from its own
// first element.
// CHECK-LABEL: func.func @windows
// CHECK: %[[S:.*]] = nc.alloc_tile {{.*}} : memref<128x67xf32, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[S]] {ap = array<i64: 67, 128, 1, 67>
// CHECK-NEXT: nc.tile_columns %[[S]][0] {step = 2 : i64}
// CHECK: nc.tile_columns %[[S]][1] {step = 2 : i64}
// CHECK: nc.tile_columns %[[S]][2] {step = 2 : i64}
// CHECK-NOT: nc.dma_load
// CHECK: nc.tensor_tensor
// CHECK: nc.dma_store
func.func @windows(%x: tensor<256x67xf32>) -> tensor<256x33xf32> {
  %a = aten.slice.Tensor %x {dim = 1 : i64, start = 0 : i64, end = 65 : i64, step = 2 : i64} : tensor<256x67xf32> -> tensor<256x33xf32>
  %b = aten.slice.Tensor %x {dim = 1 : i64, start = 1 : i64, end = 66 : i64, step = 2 : i64} : tensor<256x67xf32> -> tensor<256x33xf32>
  %c = aten.slice.Tensor %x {dim = 1 : i64, start = 2 : i64, end = 67 : i64, step = 2 : i64} : tensor<256x67xf32> -> tensor<256x33xf32>
  %m = aten.maximum %a, %b : tensor<256x33xf32>, tensor<256x33xf32> -> tensor<256x33xf32>
  %n = aten.maximum %m, %c : tensor<256x33xf32>, tensor<256x33xf32> -> tensor<256x33xf32>
  return %n : tensor<256x33xf32>
}

// -----

// Rows of 28 cut from rows of 30 (a convolution's wide positions cut to its
// width), 14 rows a partition: one DMA run per row (112 bytes) would cost
// more queue time than 14 copies, so each partition loads its span of 14
// rows, the cut columns with them (13 x 30 + 28 elements), in one run, and
// 14 copies move the rows into the tile the ops use.
// CHECK-LABEL: func.func @cut_rows
// CHECK: %[[T:.*]] = nc.alloc_tile {{.*}} : memref<128x392xf32, 1>
// CHECK-NEXT: %[[S:.*]] = nc.alloc_tile {{.*}} : memref<128x418xf32, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[S]] {ap = array<i64: 420, 43, 1, 418>
// CHECK: %[[FROM0:.*]] = nc.tile_columns %[[S]][0] : memref<128x418xf32, 1> -> memref<128x28xf32, 1>
// CHECK-NEXT: %[[TO0:.*]] = nc.tile_columns %[[T]][0] : memref<128x392xf32, 1> -> memref<128x28xf32, 1>
// CHECK-NEXT: nc.tensor_scalar %[[TO0]], %[[FROM0]] {alu = "mul", {{.*}}imm = 1.000000e+00
// CHECK-NEXT: %[[FROM1:.*]] = nc.tile_columns %[[S]][30] : memref<128x418xf32, 1> -> memref<128x28xf32, 1>
// CHECK-NEXT: nc.tile_columns %[[T]][28] : memref<128x392xf32, 1> -> memref<128x28xf32, 1>
// CHECK: nc.tile_columns %[[S]][390] : memref<128x418xf32, 1> -> memref<128x28xf32, 1>
// CHECK-NEXT: nc.tile_columns %[[T]][364] : memref<128x392xf32, 1> -> memref<128x28xf32, 1>
// CHECK-NEXT: nc.tensor_scalar
// CHECK-NEXT: nc.alloc_tile
// CHECK-NEXT: nc.tensor_scalar %{{.*}}, %[[T]] {alu = "mul", {{.*}}imm = 2.000000e+00
func.func @cut_rows(%x: tensor<8x64x28x30xf32>) -> tensor<8x64x28x28xf32> {
  %s = aten.slice.Tensor %x {dim = 3 : i64, start = 0 : i64, end = 28 : i64, step = 1 : i64} : tensor<8x64x28x30xf32> -> tensor<8x64x28x28xf32>
  %y = aten.mul.Scalar %s, 2.0 : tensor<8x64x28x28xf32> -> tensor<8x64x28x28xf32>
  return %y : tensor<8x64x28x28xf32>
}

// -----

// Short rows read along a step pack several to a partition (packShortRows),
// as many as the stepped staging takes: 8 rows of 32 f32 a partition, both
// slices from one staged run of 8 x 64 elements a partition, each compacted
// by one stepped copy over all 8 rows (the rows' stride is twice their
// length), one maximum over [128 x 256].
// CHECK-LABEL: func.func @column_pairs
// CHECK: %[[A:.*]] = nc.alloc_tile {{.*}} : memref<128x256xf32, 1>
// CHECK-NEXT: %[[S:.*]] = nc.alloc_tile {{.*}} : memref<128x512xf32, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[S]] {ap = array<i64: 512, 64, 1, 512>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[S]] {ap = array<i64: 512, 64, 1, 512>
// CHECK-NEXT: %[[EVEN:.*]] = nc.tile_columns %[[S]][0] {step = 2 : i64} : memref<128x512xf32, 1> -> memref<128x256xf32, 1>
// CHECK-NEXT: nc.tensor_scalar %[[A]], %[[EVEN]]
// CHECK-NEXT: %[[B:.*]] = nc.alloc_tile
// CHECK-NEXT: %[[ODD:.*]] = nc.tile_columns %[[S]][1] {step = 2 : i64} : memref<128x512xf32, 1> -> memref<128x256xf32, 1>
// CHECK-NEXT: nc.tensor_scalar %[[B]], %[[ODD]]
// CHECK-NEXT: %[[M:.*]] = nc.alloc_tile
// CHECK-NEXT: nc.tensor_tensor %[[M]], %[[A]], %[[B]] {alu = "max"
// CHECK-NEXT: nc.dma_store %[[M]] -> %{{.*}} {ap = array<i64: 256, 64, 1, 256>
func.func @column_pairs(%x: tensor<16384x64xf32>) -> tensor<16384x32xf32> {
  %a = aten.slice.Tensor %x {dim = 1 : i64, start = 0 : i64, end = 64 : i64, step = 2 : i64} : tensor<16384x64xf32> -> tensor<16384x32xf32>
  %b = aten.slice.Tensor %x {dim = 1 : i64, start = 1 : i64, end = 64 : i64, step = 2 : i64} : tensor<16384x64xf32> -> tensor<16384x32xf32>
  %m = aten.maximum %a, %b : tensor<16384x32xf32>, tensor<16384x32xf32> -> tensor<16384x32xf32>
  return %m : tensor<16384x32xf32>
}

// -----

// A 2 x 2 window's four slices over packed rows (8 a partition): their
// spans share one staging of both input rows of each output row (first
// elements as far apart as keeps the union within the rows' stride of
// 128), one run of 1024 elements a partition; each slice is compacted by a
// stepped copy per packed row.
// CHECK-LABEL: func.func @window_pairs
// CHECK: %[[T:.*]] = nc.alloc_tile {{.*}} : memref<128x256xf32, 1>
// CHECK-NEXT: %[[S:.*]] = nc.alloc_tile {{.*}} : memref<128x1024xf32, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[S]] {ap = array<i64: 1024, 64, 128, 8, 1, 128>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[S]] {ap = array<i64: 1024, 64, 128, 8, 1, 128>
// CHECK-NEXT: nc.tile_columns %[[S]][0] {step = 2 : i64} : memref<128x1024xf32, 1> -> memref<128x32xf32, 1>
// CHECK-NEXT: nc.tile_columns %[[T]][0] : memref<128x256xf32, 1> -> memref<128x32xf32, 1>
// CHECK-NEXT: nc.tensor_scalar
// CHECK-NEXT: nc.tile_columns %[[S]][128] {step = 2 : i64} : memref<128x1024xf32, 1> -> memref<128x32xf32, 1>
// CHECK-NOT: nc.dma_load
// CHECK: nc.tile_columns %[[S]][65] {step = 2 : i64}
// CHECK-NOT: nc.dma_load
// CHECK: nc.tensor_tensor {{.*}}alu = "max"
func.func @window_pairs(%x: tensor<8192x2x64xf32>) -> tensor<8192x32xf32> {
  %r0 = aten.select.int %x {dim = 1 : i64, index = 0 : i64} : tensor<8192x2x64xf32> -> tensor<8192x64xf32>
  %r1 = aten.select.int %x {dim = 1 : i64, index = 1 : i64} : tensor<8192x2x64xf32> -> tensor<8192x64xf32>
  %a = aten.slice.Tensor %r0 {dim = 1 : i64, start = 0 : i64, end = 64 : i64, step = 2 : i64} : tensor<8192x64xf32> -> tensor<8192x32xf32>
  %b = aten.slice.Tensor %r0 {dim = 1 : i64, start = 1 : i64, end = 64 : i64, step = 2 : i64} : tensor<8192x64xf32> -> tensor<8192x32xf32>
  %c = aten.slice.Tensor %r1 {dim = 1 : i64, start = 0 : i64, end = 64 : i64, step = 2 : i64} : tensor<8192x64xf32> -> tensor<8192x32xf32>
  %d = aten.slice.Tensor %r1 {dim = 1 : i64, start = 1 : i64, end = 64 : i64, step = 2 : i64} : tensor<8192x64xf32> -> tensor<8192x32xf32>
  %m1 = aten.maximum %a, %b : tensor<8192x32xf32>, tensor<8192x32xf32> -> tensor<8192x32xf32>
  %m2 = aten.maximum %c, %d : tensor<8192x32xf32>, tensor<8192x32xf32> -> tensor<8192x32xf32>
  %m = aten.maximum %m1, %m2 : tensor<8192x32xf32>, tensor<8192x32xf32> -> tensor<8192x32xf32>
  return %m : tensor<8192x32xf32>
}
