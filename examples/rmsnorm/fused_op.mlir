// The same RMSNorm through PyTorch's built-in fused op (torch.nn.functional.rms_norm).
func.func @main(%x: tensor<4x512xbf16> {nc.name = "x"}, %weight: tensor<512xbf16> {nc.name = "weight"}) -> tensor<4x512xbf16> {
  %y = aten.rms_norm %x, %weight {normalized_shape = array<i64: 512>, eps = 1.0e-06}
      : tensor<4x512xbf16>, tensor<512xbf16> -> tensor<4x512xbf16>
  return %y : tensor<4x512xbf16>
}
