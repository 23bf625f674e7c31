// A bmm whose right operand stacks windows of one tensor (a convolution's
// im2col: tap t's channels in rows t x C .., each a shifted view of the
// padded, flattened input; passes/WindowOperand.h): ncc-form-kernels puts
// the cat into the bmm's kernel, and the matmul loads the windows from the
// input itself, one K segment per window, accumulated into one PSUM tile.
// Windows of more than 64 rows (80 here) a few columns apart share one load
// of their union ([80 x 100] for windows at columns 0, 1 and 10 of 90
// columns each); each window's slice is a column range of it. The weight,
// broadcast over the batch, is transposed once for both batches.
// RUN: neuron-opt %s --ncc-form-kernels=fuse=true | FileCheck %s --check-prefix=FORM
// RUN: neuron-opt %s --ncc-form-kernels=fuse=true --ncc-lower-to-isa | FileCheck %s
// FORM-LABEL: func.func @taps
// FORM: nc.kernel "k0_fused_slice_unsqueeze_cat_reshape_etc"
// FORM: aten.cat {{.*}}nc.window_operand
// FORM: aten.bmm
// FORM: aten.relu
// FORM-NOT: nc.kernel
// CHECK-LABEL: func.func @taps
// CHECK: %[[U:.*]] = nc.alloc_tile {{.*}} : memref<80x100xf32, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[U]] {ap = array<i64: 100, 80, 1, 100>{{.*}}offset = 0 : i64
// CHECK-NEXT: %[[A:.*]] = nc.tile_columns %[[U]][0] {{.*}} -> memref<80x90xf32, 1>
// CHECK: %[[B:.*]] = nc.tile_columns %[[U]][1] {{.*}} -> memref<80x90xf32, 1>
// CHECK: %[[C:.*]] = nc.tile_columns %[[U]][10] {{.*}} -> memref<80x90xf32, 1>
// CHECK: nc.matmul %[[P:.*]], %{{.*}}, %[[A]] {engine
// CHECK-NEXT: nc.matmul %[[P]], %{{.*}}, %[[B]] {accumulate = true
// CHECK-NEXT: nc.matmul %[[P]], %{{.*}}, %[[C]] {accumulate = true
// CHECK: nc.activation {{.*}}func = "relu"
// The second batch: its windows' union from offset 8000, the weight's
// transposed slices kept (no more transposes).
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 100, 80, 1, 100>{{.*}}offset = 8000 : i64
// CHECK-NOT: nc.transpose
// CHECK: nc.matmul
// CHECK-NEXT: nc.matmul {{.*}}accumulate = true
// CHECK-NEXT: nc.matmul {{.*}}accumulate = true
// CHECK-NOT: nc.matmul
// CHECK: return
func.func @taps(%x: tensor<2x80x100xf32>, %w: tensor<16x240xf32>) -> tensor<2x16x90xf32> {
  %a = aten.slice.Tensor %x {dim = 2 : i64, start = 0 : i64, end = 90 : i64, step = 1 : i64} : tensor<2x80x100xf32> -> tensor<2x80x90xf32>
  %b = aten.slice.Tensor %x {dim = 2 : i64, start = 1 : i64, end = 91 : i64, step = 1 : i64} : tensor<2x80x100xf32> -> tensor<2x80x90xf32>
  %c = aten.slice.Tensor %x {dim = 2 : i64, start = 10 : i64, end = 100 : i64, step = 1 : i64} : tensor<2x80x100xf32> -> tensor<2x80x90xf32>
  %a1 = aten.unsqueeze %a {dim = 1 : i64} : tensor<2x80x90xf32> -> tensor<2x1x80x90xf32>
  %b1 = aten.unsqueeze %b {dim = 1 : i64} : tensor<2x80x90xf32> -> tensor<2x1x80x90xf32>
  %c1 = aten.unsqueeze %c {dim = 1 : i64} : tensor<2x80x90xf32> -> tensor<2x1x80x90xf32>
  %y = aten.cat %a1, %b1, %c1 {dim = 1 : i64} : tensor<2x1x80x90xf32>, tensor<2x1x80x90xf32>, tensor<2x1x80x90xf32> -> tensor<2x3x80x90xf32>
  %cols = aten.reshape %y {size = array<i64: 2, 240, 90>} : tensor<2x3x80x90xf32> -> tensor<2x240x90xf32>
  %w1 = aten.unsqueeze %w {dim = 0 : i64} : tensor<16x240xf32> -> tensor<1x16x240xf32>
  %we = aten.expand %w1 {size = array<i64: 2, 16, 240>} : tensor<1x16x240xf32> -> tensor<2x16x240xf32>
  %o = aten.bmm %we, %cols : tensor<2x16x240xf32>, tensor<2x240x90xf32> -> tensor<2x16x90xf32>
  %r = aten.relu %o : tensor<2x16x90xf32> -> tensor<2x16x90xf32>
  return %r : tensor<2x16x90xf32>
}

// Windows of 64 rows or fewer (8 here) stack on the partitions, several to
// a K slice: one [24 x 90] slice for the three windows, each window's rows
// from its own first element (the two a column apart in one transfer with
// two partition dims, the third in one of its own), one matmul per batch.
// FORM-LABEL: func.func @packed_taps
// CHECK-LABEL: func.func @packed_taps
// CHECK: %[[T:.*]] = nc.alloc_tile {{.*}} : memref<24x90xf32, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[T]] {ap = array<i64: 1, 2, 100, 8, 1, 90>{{.*}}offset = 0 : i64, part_start = 0 : i64, partition_dims = 2
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[T]] {ap = array<i64: 100, 8, 1, 90>{{.*}}offset = 10 : i64, part_start = 16 : i64
// CHECK-NEXT: nc.matmul %{{.*}}, %{{.*}}, %[[T]] {engine
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 1, 2, 100, 8, 1, 90>{{.*}}offset = 800 : i64
// CHECK: nc.matmul
// CHECK-NOT: nc.matmul
// CHECK: return
func.func @packed_taps(%x: tensor<2x8x100xf32>, %w: tensor<16x24xf32>) -> tensor<2x16x90xf32> {
  %a = aten.slice.Tensor %x {dim = 2 : i64, start = 0 : i64, end = 90 : i64, step = 1 : i64} : tensor<2x8x100xf32> -> tensor<2x8x90xf32>
  %b = aten.slice.Tensor %x {dim = 2 : i64, start = 1 : i64, end = 91 : i64, step = 1 : i64} : tensor<2x8x100xf32> -> tensor<2x8x90xf32>
  %c = aten.slice.Tensor %x {dim = 2 : i64, start = 10 : i64, end = 100 : i64, step = 1 : i64} : tensor<2x8x100xf32> -> tensor<2x8x90xf32>
  %a1 = aten.unsqueeze %a {dim = 1 : i64} : tensor<2x8x90xf32> -> tensor<2x1x8x90xf32>
  %b1 = aten.unsqueeze %b {dim = 1 : i64} : tensor<2x8x90xf32> -> tensor<2x1x8x90xf32>
  %c1 = aten.unsqueeze %c {dim = 1 : i64} : tensor<2x8x90xf32> -> tensor<2x1x8x90xf32>
  %y = aten.cat %a1, %b1, %c1 {dim = 1 : i64} : tensor<2x1x8x90xf32>, tensor<2x1x8x90xf32>, tensor<2x1x8x90xf32> -> tensor<2x3x8x90xf32>
  %cols = aten.reshape %y {size = array<i64: 2, 24, 90>} : tensor<2x3x8x90xf32> -> tensor<2x24x90xf32>
  %w1 = aten.unsqueeze %w {dim = 0 : i64} : tensor<16x24xf32> -> tensor<1x16x24xf32>
  %we = aten.expand %w1 {size = array<i64: 2, 16, 24>} : tensor<1x16x24xf32> -> tensor<2x16x24xf32>
  %o = aten.bmm %we, %cols : tensor<2x16x24xf32>, tensor<2x24x90xf32> -> tensor<2x16x90xf32>
  return %o : tensor<2x16x90xf32>
}

// Windows of two tensors are no window operand: the cat is a copy kernel
// and the bmm reads its result.
// FORM-LABEL: func.func @two_tensors
// FORM: nc.kernel "k0_fused_slice_unsqueeze_cat"
// FORM-NOT: nc.window_operand
// FORM: nc.kernel "k1_fused_reshape_bmm"
// CHECK-LABEL: func.func @two_tensors
func.func @two_tensors(%x: tensor<2x8x100xf32>, %z: tensor<2x8x100xf32>, %w: tensor<2x16x16xf32>) -> tensor<2x16x90xf32> {
  %a = aten.slice.Tensor %x {dim = 2 : i64, start = 0 : i64, end = 90 : i64, step = 1 : i64} : tensor<2x8x100xf32> -> tensor<2x8x90xf32>
  %b = aten.slice.Tensor %z {dim = 2 : i64, start = 1 : i64, end = 91 : i64, step = 1 : i64} : tensor<2x8x100xf32> -> tensor<2x8x90xf32>
  %a1 = aten.unsqueeze %a {dim = 1 : i64} : tensor<2x8x90xf32> -> tensor<2x1x8x90xf32>
  %b1 = aten.unsqueeze %b {dim = 1 : i64} : tensor<2x8x90xf32> -> tensor<2x1x8x90xf32>
  %y = aten.cat %a1, %b1 {dim = 1 : i64} : tensor<2x1x8x90xf32>, tensor<2x1x8x90xf32> -> tensor<2x2x8x90xf32>
  %cols = aten.reshape %y {size = array<i64: 2, 16, 90>} : tensor<2x2x8x90xf32> -> tensor<2x16x90xf32>
  %o = aten.bmm %w, %cols : tensor<2x16x16xf32>, tensor<2x16x90xf32> -> tensor<2x16x90xf32>
  return %o : tensor<2x16x90xf32>
}
