// RMSNorm written as six ATen ops, as a PyTorch user would without a fused op:
//   rms = rsqrt(mean(x * x, -1, keepdim=True) + eps); y = x * rms * weight
// x: 4x512 bf16, weight: 512 bf16, eps: 1e-6 as a 0-d tensor.
func.func @main(%x: tensor<4x512xbf16> {nc.name = "x"}, %weight: tensor<512xbf16> {nc.name = "weight"}) -> tensor<4x512xbf16> {
  %eps = arith.constant dense<1.0e-06> : tensor<f32>
  %sq = aten.mul.Tensor %x, %x : tensor<4x512xbf16>, tensor<4x512xbf16> -> tensor<4x512xbf16>
  %ms = aten.mean.dim %sq {dim = array<i64: -1>, keepdim = true} : tensor<4x512xbf16> -> tensor<4x1xbf16>
  %shifted = aten.add.Tensor %ms, %eps : tensor<4x1xbf16>, tensor<f32> -> tensor<4x1xbf16>
  %rms = aten.rsqrt %shifted : tensor<4x1xbf16> -> tensor<4x1xbf16>
  %normed = aten.mul.Tensor %x, %rms : tensor<4x512xbf16>, tensor<4x1xbf16> -> tensor<4x512xbf16>
  %y = aten.mul.Tensor %normed, %weight : tensor<4x512xbf16>, tensor<512xbf16> -> tensor<4x512xbf16>
  return %y : tensor<4x512xbf16>
}
