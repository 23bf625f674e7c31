// After a matmul with a residual add, the RMSNorm's cast of the sum to f32
// and its square first join the matmul's kernel (their producer's), whose
// row space they share; the mean cannot (a reduction does not join a
// matmul's kernel), so the norm's kernel would read both f32 tensors. They
// move into the norm's kernel instead (passes/FormKernels.cpp,
// sinkIntoConsumers), which then reads the bf16 sum: 2 bytes an element
// instead of 8, and the matmul's kernel writes 2 instead of 10.
// RUN: neuron-opt %s --ncc-form-kernels=fuse=true | FileCheck %s
// CHECK: nc.kernel "k0_fused_t_mm_add"({{.*}}) {result_sources = ["aten.add.Tensor"]
// CHECK-SAME: -> tensor<256x512xbf16>
// CHECK: nc.kernel "k1_fused_to_copy_pow_mean_add_etc"({{.*}} : (tensor<256x512xbf16>, tensor<512xbf16>)
// CHECK-NOT: nc.kernel "k2
func.func @residual_norm(%x: tensor<256x512xbf16>, %w: tensor<512x512xbf16>, %g: tensor<512xbf16>) -> (tensor<256x512xbf16>, tensor<256x512xbf16>) {
  %wt = aten.t %w : tensor<512x512xbf16> -> tensor<512x512xbf16>
  %y = aten.mm %x, %wt : tensor<256x512xbf16>, tensor<512x512xbf16> -> tensor<256x512xbf16>
  %h = aten.add.Tensor %x, %y : tensor<256x512xbf16>, tensor<256x512xbf16> -> tensor<256x512xbf16>
  %f = aten._to_copy %h : tensor<256x512xbf16> -> tensor<256x512xf32>
  %sq = aten.pow.Tensor_Scalar %f, 2.0 : tensor<256x512xf32> -> tensor<256x512xf32>
  %m = aten.mean.dim %sq {dim = array<i64: -1>, keepdim = true} : tensor<256x512xf32> -> tensor<256x1xf32>
  %e = aten.add.Scalar %m, 1.0e-6 : tensor<256x1xf32> -> tensor<256x1xf32>
  %r = aten.rsqrt %e : tensor<256x1xf32> -> tensor<256x1xf32>
  %n = aten.mul.Tensor %f, %r : tensor<256x512xf32>, tensor<256x1xf32> -> tensor<256x512xf32>
  %nb = aten._to_copy %n : tensor<256x512xf32> -> tensor<256x512xbf16>
  %o = aten.mul.Tensor %g, %nb : tensor<512xbf16>, tensor<256x512xbf16> -> tensor<256x512xbf16>
  return %h, %o : tensor<256x512xbf16>, tensor<256x512xbf16>
}
