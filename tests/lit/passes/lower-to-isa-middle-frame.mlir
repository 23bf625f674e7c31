// RUN: neuron-opt %s --split-input-file --ncc-form-kernels=fuse=true --ncc-lower-to-isa=few-bytes=0 | FileCheck %s

// Ops around reductions over a middle dim, computed in the input's own
// layout (passes/LowerMiddleFrame.cpp). A softmax over dim 1 of
// [128, 4, 256]: one kernel, each partition one row of A holding its 4
// blocks of 256 (loaded in runs of 256, no transposes); the maximum and the
// sum add the blocks, the subtraction and the division run once per block
// against the reduced [128, 256] tile, writing their blocks of one full
// tile; the exp is one instruction over the whole row.
// CHECK-LABEL: func.func @softmax_channels
// CHECK-COUNT-1: nc.kernel
// CHECK-SAME: nc.middle_frame
// CHECK: %[[X:.*]] = nc.alloc_tile {{.*}} : memref<128x1024xf32, 1>
// CHECK: nc.dma_load %{{.*}} -> %[[X]] {ap = array<i64: 1024, 16, 1, 1024>
// CHECK-NOT: nc.transpose
// CHECK: %[[M:.*]] = nc.alloc_tile {{.*}} : memref<128x256xf32, 1>
// CHECK-COUNT-3: nc.tensor_tensor %[[M]], {{.*}} {alu = "max"
// CHECK: %[[D:.*]] = nc.alloc_tile {{.*}} : memref<128x1024xf32, 1>
// CHECK-COUNT-4: nc.tensor_tensor {{.*}}, %[[M]] {alu = "sub"
// CHECK: nc.activation %{{.*}}, %[[D]] {{.*}}func = "exp"
// CHECK-COUNT-3: {alu = "add"
// CHECK-COUNT-4: {alu = "div"
// CHECK: nc.dma_store {{.*}}ap = array<i64: 1024, 16, 1, 1024>
// CHECK-NOT: nc.kernel
func.func @softmax_channels(%x: tensor<128x4x256xf32>) -> tensor<128x4x256xf32> {
  %m = aten.amax %x {dim = array<i64: 1>, keepdim = true} : tensor<128x4x256xf32> -> tensor<128x1x256xf32>
  %d = aten.sub.Tensor %x, %m : tensor<128x4x256xf32>, tensor<128x1x256xf32> -> tensor<128x4x256xf32>
  %e = aten.exp %d : tensor<128x4x256xf32> -> tensor<128x4x256xf32>
  %s = aten.sum.dim_IntList %e {dim = array<i64: 1>, keepdim = true} : tensor<128x4x256xf32> -> tensor<128x1x256xf32>
  %y = aten.div.Tensor %e, %s : tensor<128x4x256xf32>, tensor<128x1x256xf32> -> tensor<128x4x256xf32>
  return %y : tensor<128x4x256xf32>
}

// -----

// A bf16 softmax as PyTorch exports it (computed in f32 between two casts):
// the quotients, f32 values whose only use is the returned cast, are
// divided straight into bf16 (one rounding, as the cast gives), and the
// cast copies nothing: the division's tile is stored.
// CHECK-LABEL: func.func @softmax_bf16
// CHECK: nc.kernel {{.*}}nc.middle_frame
// CHECK: func = "exp"
// CHECK: %[[Q:.*]] = nc.alloc_tile {{.*}} : memref<128x1024xbf16, 1>
// CHECK-COUNT-4: {alu = "div", {{.*}} : memref<128x256xbf16, 1>, memref<128x256xf32, 1>, memref<128x256xf32, 1>
// CHECK-NOT: nc.tensor_scalar
// CHECK: nc.dma_store %[[Q]]
func.func @softmax_bf16(%x: tensor<128x4x256xbf16>) -> tensor<128x4x256xbf16> {
  %f = aten._to_copy %x {dtype = 6 : i64} : tensor<128x4x256xbf16> -> tensor<128x4x256xf32>
  %m = aten.amax %f {dim = array<i64: 1>, keepdim = true} : tensor<128x4x256xf32> -> tensor<128x1x256xf32>
  %d = aten.sub.Tensor %f, %m : tensor<128x4x256xf32>, tensor<128x1x256xf32> -> tensor<128x4x256xf32>
  %e = aten.exp %d : tensor<128x4x256xf32> -> tensor<128x4x256xf32>
  %s = aten.sum.dim_IntList %e {dim = array<i64: 1>, keepdim = true} : tensor<128x4x256xf32> -> tensor<128x1x256xf32>
  %q = aten.div.Tensor %e, %s : tensor<128x4x256xf32>, tensor<128x1x256xf32> -> tensor<128x4x256xf32>
  %y = aten._to_copy %q {dtype = 15 : i64} : tensor<128x4x256xf32> -> tensor<128x4x256xbf16>
  return %y : tensor<128x4x256xbf16>
}

// -----

// Two images of 64 x 128 positions: C splits into the rows (each partition
// an image and a run of 128 positions), so that 128 partitions take part.
// A per-channel weight ([4, 1, 1]) is loaded once a partition ([128, 4],
// the same 4 elements on every partition) and multiplies each block as its
// per-row scalar (tensor_scalar with column r).
// CHECK-LABEL: func.func @channel_weight
// CHECK: nc.dma_load %{{.*}} -> %{{.*}} {ap = array<i64: 128, 64, 8192, 4, 1, 128>
// CHECK: nc.tensor_scalar {{.*}} {alu = "mul", {{.*}}imm = 2.500000e-01
// CHECK-COUNT-4: {alu = "sub"
// CHECK: %[[W:.*]] = nc.alloc_tile {{.*}} : memref<128x4xbf16, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[W]] {ap = array<i64: 0, 128, 1, 4>
// CHECK-COUNT-4: nc.tensor_scalar {{.*}} {alu = "mul", engine = "vector", source_op = 2 : i64} : memref<128x128xbf16, 1>, memref<128x128xbf16, 1>, memref<128x1xbf16, 1>
// CHECK: nc.dma_store {{.*}}ap = array<i64: 128, 64, 8192, 4, 1, 128>
func.func @channel_weight(%x: tensor<2x4x64x128xbf16>, %w: tensor<4x1x1xbf16>) -> tensor<2x4x64x128xbf16> {
  %m = aten.mean.dim %x {dim = array<i64: 1>, keepdim = true} : tensor<2x4x64x128xbf16> -> tensor<2x1x64x128xbf16>
  %d = aten.sub.Tensor %x, %m : tensor<2x4x64x128xbf16>, tensor<2x1x64x128xbf16> -> tensor<2x4x64x128xbf16>
  %y = aten.mul.Tensor %d, %w : tensor<2x4x64x128xbf16>, tensor<4x1x1xbf16> -> tensor<2x4x64x128xbf16>
  return %y : tensor<2x4x64x128xbf16>
}

// -----

// More reduced elements (64) than columns (32): the maximum reduces each
// column along a step of 32, and the subtraction runs once per column, the
// column's maximum as its per-row scalar, over a stepped view.
// CHECK-LABEL: func.func @per_column
// CHECK-COUNT-32: nc.tensor_reduce {{.*}} {alu = "max"
// CHECK: nc.tile_columns %{{.*}}[0] {step = 32 : i64} : memref<128x2048xf32, 1> -> memref<128x64xf32, 1>
// CHECK: nc.tensor_scalar {{.*}} {alu = "sub"
// CHECK-COUNT-31: nc.tensor_scalar {{.*}} {alu = "sub"
func.func @per_column(%x: tensor<128x64x32xf32>) -> tensor<128x64x32xf32> {
  %m = aten.amax %x {dim = array<i64: 1>, keepdim = true} : tensor<128x64x32xf32> -> tensor<128x1x32xf32>
  %d = aten.sub.Tensor %x, %m : tensor<128x64x32xf32>, tensor<128x1x32xf32> -> tensor<128x64x32xf32>
  return %d : tensor<128x64x32xf32>
}

// -----

// Short blocks ([4096, 4, 2] reduced over its 4): 32 rows go to a partition
// (256 contiguous elements, one run). The mean adds across the packed rows
// (a stepped view of each (step, column) over the 32 rows, 3 adds for each
// of the 2 columns) and scales once; the subtraction runs once per (step,
// column) over the 32 packed rows: the input along a step of 8 (4 x 2), the
// mean along a step of 2, written into the result along a step of 8.
// CHECK-LABEL: func.func @short_blocks
// CHECK: %[[X:.*]] = nc.alloc_tile {{.*}} : memref<128x256xf32, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[X]] {ap = array<i64: 256, 64, 1, 256>
// CHECK: %[[ACC:.*]] = nc.alloc_tile {{.*}} : memref<128x64xf32, 1>
// CHECK-COUNT-6: {alu = "add"
// CHECK: %[[M:.*]] = nc.alloc_tile {{.*}} : memref<128x64xf32, 1>
// CHECK-NEXT: nc.tensor_scalar %[[M]], %[[ACC]] {alu = "mul", {{.*}}imm = 2.500000e-01
// CHECK: %[[XS:.*]] = nc.tile_columns %[[X]][1] {step = 8 : i64} : memref<128x256xf32, 1> -> memref<128x32xf32, 1>
// CHECK-NEXT: %[[MS:.*]] = nc.tile_columns %[[M]][1] {step = 2 : i64} : memref<128x64xf32, 1> -> memref<128x32xf32, 1>
// CHECK-NEXT: %[[DS:.*]] = nc.tile_columns %[[D:.*]][1] {step = 8 : i64} : memref<128x256xf32, 1> -> memref<128x32xf32, 1>
// CHECK-NEXT: nc.tensor_tensor %[[DS]], %[[XS]], %[[MS]] {alu = "sub"
// CHECK-COUNT-6: {alu = "sub"
// CHECK: nc.dma_store %[[D]] -> %{{.*}} {ap = array<i64: 256, 64, 1, 256>
func.func @short_blocks(%x: tensor<4096x4x2xf32>) -> tensor<4096x4x2xf32> {
  %m = aten.mean.dim %x {dim = array<i64: 1>, keepdim = true} : tensor<4096x4x2xf32> -> tensor<4096x1x2xf32>
  %d = aten.sub.Tensor %x, %m : tensor<4096x4x2xf32>, tensor<4096x1x2xf32> -> tensor<4096x4x2xf32>
  return %d : tensor<4096x4x2xf32>
}
