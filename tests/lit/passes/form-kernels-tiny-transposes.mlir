// RUN: neuron-opt %s --ncc-form-kernels | FileCheck %s

// An elementwise op reading a view across its input's contiguous dim in
// blocks of a few elements would load each block transposed on the
// TensorEngine; it reads the view from a copy kernel instead, which the
// lowering rearranges in SBUF (PermutePlan.h). Wide blocks stay in place
// (their transposed loads are efficient), and so does a view too small for
// the permute plan.
// CHECK-LABEL: func.func @tiny
// CHECK: nc.kernel "k0_transpose"
// CHECK: nc.kernel "k1_add"
// CHECK-LABEL: func.func @wide
// CHECK: nc.kernel "k0_fused_transpose_add"
// CHECK-NOT: nc.kernel
// CHECK-LABEL: func.func @small
// CHECK: nc.kernel "k0_fused_transpose_add"
// CHECK-NOT: nc.kernel
// CHECK: return
func.func @tiny(%x: tensor<4096x2x64xbf16>) -> tensor<4096x64x2xbf16> {
  %t = aten.transpose.int %x {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<4096x2x64xbf16> -> tensor<4096x64x2xbf16>
  %c = arith.constant dense<1.0> : tensor<bf16>
  %s = aten.add.Tensor %t, %c : tensor<4096x64x2xbf16>, tensor<bf16> -> tensor<4096x64x2xbf16>
  return %s : tensor<4096x64x2xbf16>
}
func.func @wide(%x: tensor<64x512x512xbf16>) -> tensor<64x512x512xbf16> {
  %t = aten.transpose.int %x {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<64x512x512xbf16> -> tensor<64x512x512xbf16>
  %c = arith.constant dense<1.0> : tensor<bf16>
  %s = aten.add.Tensor %t, %c : tensor<64x512x512xbf16>, tensor<bf16> -> tensor<64x512x512xbf16>
  return %s : tensor<64x512x512xbf16>
}
func.func @small(%x: tensor<7x2xbf16>) -> tensor<2x7xbf16> {
  %t = aten.transpose.int %x {dim0 = 0 : i64, dim1 = 1 : i64} : tensor<7x2xbf16> -> tensor<2x7xbf16>
  %c = arith.constant dense<1.0> : tensor<bf16>
  %s = aten.add.Tensor %t, %c : tensor<2x7xbf16>, tensor<bf16> -> tensor<2x7xbf16>
  return %s : tensor<2x7xbf16>
}
