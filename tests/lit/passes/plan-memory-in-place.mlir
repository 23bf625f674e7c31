// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa --ncc-plan-memory | FileCheck %s

// SBUF tiles shared before placement (ncc-plan-memory) when sixteen row-tile
// iterations of the tiles as lowered do not fit (here each row tile's tiles
// are [128 x 4096] f32, 16 KiB per partition): an elementwise result whose
// input is read for the last time is written over that input, and the
// squares RMSNorm computes only for their row sums go to one scratch tile
// that every row tile's activation reuses (they all run on the scalar
// engine, in order). Each row tile then needs one [128 x 4096] tile of its
// own instead of four.
// CHECK-LABEL: func.func @rms
// CHECK: [[X0:%[0-9]+]] = nc.alloc_tile {{.*}}memref<128x4096xf32, 1>
// CHECK: nc.dma_load %{{.*}} -> [[X0]]
// CHECK: [[W:%[0-9]+]] = nc.alloc_tile {{.*}}memref<128x4096xf32, 1>
// CHECK: [[SQ:%[0-9]+]] = nc.alloc_tile {{.*}}memref<128x4096xf32, 1>
// CHECK: nc.activation [[SQ]], [[X0]] accum [[R0:%[0-9]+]]
// CHECK: nc.activation [[R0]], [[R0]] {{.*}}func = "rsqrt"
// CHECK: nc.tensor_scalar [[X0]], [[X0]], [[R0]] {alu = "mul"
// CHECK: nc.tensor_tensor [[X0]], [[X0]], [[W]] {alu = "mul"
// CHECK: nc.dma_store [[X0]] ->
// CHECK: [[X1:%[0-9]+]] = nc.alloc_tile {iteration = 2 : i64{{.*}}memref<128x4096xf32, 1>
// CHECK-NOT: nc.alloc_tile {{.*}}memref<128x4096xf32, 1>
// CHECK: nc.activation [[SQ]], [[X1]] accum [[R1:%[0-9]+]]
// CHECK: nc.tensor_scalar [[X1]], [[X1]], [[R1]] {alu = "mul"
// CHECK: nc.tensor_tensor [[X1]], [[X1]], [[W]] {alu = "mul"
// CHECK: nc.dma_store [[X1]] ->
func.func @rms(%x: tensor<2048x4096xf32>, %w: tensor<4096xf32>) -> tensor<2048x4096xf32> {
  %y = aten.rms_norm %x, %w {normalized_shape = array<i64: 4096>, eps = 1.0e-06} : tensor<2048x4096xf32>, tensor<4096xf32> -> tensor<2048x4096xf32>
  return %y : tensor<2048x4096xf32>
}

// x is read again after exp, so exp gets a tile of its own; the sum, the
// last reader of both, is written over exp's.
// CHECK-LABEL: func.func @kept
// CHECK: [[X:%[0-9]+]] = nc.alloc_tile
// CHECK: [[E:%[0-9]+]] = nc.alloc_tile
// CHECK: nc.activation [[E]], [[X]] {{.*}}func = "exp"
// CHECK: nc.tensor_tensor [[E]], [[E]], [[X]] {alu = "add"
// CHECK: nc.dma_store [[E]] ->
func.func @kept(%x: tensor<2048x4096xf32>) -> tensor<2048x4096xf32> {
  %e = aten.exp %x : tensor<2048x4096xf32> -> tensor<2048x4096xf32>
  %s = aten.add.Tensor %e, %x : tensor<2048x4096xf32>, tensor<2048x4096xf32> -> tensor<2048x4096xf32>
  return %s : tensor<2048x4096xf32>
}

// Sixteen iterations of a small kernel fit as they are: nothing is shared
// (sharing would only add waits).
// CHECK-LABEL: func.func @fits
// CHECK: [[A:%[0-9]+]] = nc.alloc_tile
// CHECK: [[B:%[0-9]+]] = nc.alloc_tile
// CHECK: nc.activation [[B]], [[A]] {{.*}}func = "exp"
func.func @fits(%x: tensor<256x512xf32>) -> tensor<256x512xf32> {
  %e = aten.exp %x : tensor<256x512xf32> -> tensor<256x512xf32>
  return %e : tensor<256x512xf32>
}
