// A matmul's prologue (passes/FormKernels.cpp, formPrologues; the lowering's
// prologue in passes/LowerToIsa.cpp). An RMSNorm whose only reader is the
// left operand of x_norm @ W joins the matmul's kernel: one kernel, which
// reads x and never stores the normalized value. Each of the 2 row tiles
// computes its [128 x 256] operand in SBUF and transposes its 2 k slices on
// the TensorEngine (4 transposes; W is read directly, K-major).
// RUN: neuron-opt %s --ncc-form-kernels --split-input-file | FileCheck %s
// RUN: neuron-opt %s --ncc-form-kernels --ncc-lower-to-isa --split-input-file | FileCheck %s --check-prefix=ISA
// CHECK-LABEL: func.func @norm_prologue
// CHECK: nc.kernel "k0_fused_mul_mean_add_rsqrt_etc"(%arg0, %arg1, %arg2) {result_sources = ["aten.mm"]
// CHECK-NOT: nc.kernel "k1
// ISA-LABEL: func.func @norm_prologue
// ISA-COUNT-4: nc.transpose
// ISA-NOT: nc.transpose
// ISA-NOT: nc.dma_store {{.*}} memref<256x256xf32>
func.func @norm_prologue(%x: tensor<256x256xf32>, %g: tensor<256xf32>, %w: tensor<256x1536xf32>) -> tensor<256x1536xf32> {
  %sq = aten.mul.Tensor %x, %x : tensor<256x256xf32>, tensor<256x256xf32> -> tensor<256x256xf32>
  %m = aten.mean.dim %sq {dim = array<i64: -1>, keepdim = true} : tensor<256x256xf32> -> tensor<256x1xf32>
  %e = aten.add.Scalar %m, 1.0e-6 : tensor<256x1xf32> -> tensor<256x1xf32>
  %r = aten.rsqrt %e : tensor<256x1xf32> -> tensor<256x1xf32>
  %n = aten.mul.Tensor %x, %r : tensor<256x256xf32>, tensor<256x1xf32> -> tensor<256x256xf32>
  %o = aten.mul.Tensor %n, %g : tensor<256x256xf32>, tensor<256xf32> -> tensor<256x256xf32>
  %y = aten.mm %o, %w : tensor<256x256xf32>, tensor<256x1536xf32> -> tensor<256x1536xf32>
  return %y : tensor<256x1536xf32>
}

// -----

// The normalized value is also returned: the norm keeps its kernel and
// stores it; the matmul reads it from HBM.
// CHECK-LABEL: func.func @norm_returned
// CHECK: nc.kernel "k0_fused_mul_mean_add_rsqrt"(%arg0)
// CHECK: nc.kernel "k1_mm"
// ISA-LABEL: func.func @norm_returned
// ISA: nc.dma_store {{.*}} memref<256x256xf32>
func.func @norm_returned(%x: tensor<256x256xf32>, %w: tensor<256x1536xf32>) -> (tensor<256x1536xf32>, tensor<256x256xf32>) {
  %sq = aten.mul.Tensor %x, %x : tensor<256x256xf32>, tensor<256x256xf32> -> tensor<256x256xf32>
  %m = aten.mean.dim %sq {dim = array<i64: -1>, keepdim = true} : tensor<256x256xf32> -> tensor<256x1xf32>
  %e = aten.add.Scalar %m, 1.0e-6 : tensor<256x1xf32> -> tensor<256x1xf32>
  %r = aten.rsqrt %e : tensor<256x1xf32> -> tensor<256x1xf32>
  %n = aten.mul.Tensor %x, %r : tensor<256x256xf32>, tensor<256x1xf32> -> tensor<256x256xf32>
  %y = aten.mm %n, %w : tensor<256x256xf32>, tensor<256x1536xf32> -> tensor<256x1536xf32>
  return %y, %n : tensor<256x1536xf32>, tensor<256x256xf32>
}

// -----

// Moving slices in more than one block (K = 2048 bf16, 16 k slices of 1 KiB
// per column tile: 9 column tiles take 144 KiB a partition, over the 128 KiB
// a block keeps): the operand would be computed once per block, so the norm
// stays a kernel of its own (which stores it transposed for the matmul).
// CHECK-LABEL: func.func @several_blocks
// CHECK: nc.kernel "k0_
// CHECK: nc.kernel "k1_
func.func @several_blocks(%x: tensor<256x2048xbf16>, %w: tensor<2048x4608xbf16>) -> tensor<256x4608xbf16> {
  %sq = aten.mul.Tensor %x, %x : tensor<256x2048xbf16>, tensor<256x2048xbf16> -> tensor<256x2048xbf16>
  %m = aten.mean.dim %sq {dim = array<i64: -1>, keepdim = true} : tensor<256x2048xbf16> -> tensor<256x1xbf16>
  %r = aten.rsqrt %m : tensor<256x1xbf16> -> tensor<256x1xbf16>
  %n = aten.mul.Tensor %x, %r : tensor<256x2048xbf16>, tensor<256x1xbf16> -> tensor<256x2048xbf16>
  %y = aten.mm %n, %w : tensor<256x2048xbf16>, tensor<2048x4608xbf16> -> tensor<256x4608xbf16>
  return %y : tensor<256x4608xbf16>
}

// -----

// A prologue whose operand is the same along each row (a [200, 1] value
// expanded over K = 300, then scaled): the scaled value is held as one
// column per row, and is broadcast over the 300 columns (an iota and a
// per-row add) before the 3 k slices of each of the 2 row tiles are
// transposed (graph_fuzz 30303030 case 219: the stationary slices were
// built from the one column, "stationary and moving must share the
// contraction (partition) dim").
// CHECK-LABEL: func.func @row_invariant_operand
// CHECK: nc.kernel "k0_fused_expand_mul_mm"
// ISA-LABEL: func.func @row_invariant_operand
// ISA: nc.tensor_scalar{{.*}}memref<128x1xf32, 1>, memref<128x1xf32, 1>
// ISA: nc.iota{{.*}}memref<128x300xf32, 1>
// ISA: nc.tensor_scalar{{.*}}alu = "add"{{.*}}memref<128x300xf32, 1>, memref<128x300xf32, 1>, memref<128x1xf32, 1>
// ISA-COUNT-3: nc.transpose
// ISA: nc.matmul
func.func @row_invariant_operand(%x: tensor<200x1xf32>, %w: tensor<300x64xf32>) -> tensor<200x64xf32> {
  %e = aten.expand %x {size = array<i64: -1, 300>} : tensor<200x1xf32> -> tensor<200x300xf32>
  %s = aten.mul.Scalar %e, 2.0 : tensor<200x300xf32> -> tensor<200x300xf32>
  %y = aten.mm %s, %w : tensor<200x300xf32>, tensor<300x64xf32> -> tensor<200x64xf32>
  return %y : tensor<200x64xf32>
}
