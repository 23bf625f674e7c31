// RUN: neuron-opt %s --split-input-file --verify-diagnostics

func.func @not_broadcastable(%a: tensor<4x512xf32>, %b: tensor<3xf32>) -> tensor<4x512xf32> {
  // expected-error @+2 {{operands are not broadcast-compatible: [4, 512] vs [3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = aten.mul.Tensor %a, %b : tensor<4x512xf32>, tensor<3xf32> -> tensor<4x512xf32>
  return %r : tensor<4x512xf32>
}

// -----

func.func @wrong_result_type(%a: tensor<4x512xbf16>, %eps: tensor<f32>) -> tensor<4x512xf32> {
  // expected-error @+2 {{'aten.add.Tensor' op inferred type(s) 'tensor<4x512xbf16>' are incompatible with return type(s) of operation 'tensor<4x512xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = aten.add.Tensor %a, %eps : tensor<4x512xbf16>, tensor<f32> -> tensor<4x512xf32>
  return %r : tensor<4x512xf32>
}

// -----

func.func @integer_operand(%a: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values}}
  %r = aten.neg %a : tensor<4xi32> -> tensor<4xi32>
  return %r : tensor<4xi32>
}

// -----

func.func @dim_out_of_range(%a: tensor<4x512xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{dim 2 is out of range for a rank-2 tensor}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = aten.sum.dim_IntList %a {dim = array<i64: 2>} : tensor<4x512xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @dim_repeated(%a: tensor<4x512xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{dim 1 appears more than once}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = aten.amax %a {dim = array<i64: 1, -1>} : tensor<4x512xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @norm_shape_mismatch(%a: tensor<4x512xf32>) -> tensor<4x512xf32> {
  // expected-error @+2 {{normalized_shape [256] does not match the trailing dims of input shape [4, 512]}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = aten.rms_norm %a {normalized_shape = array<i64: 256>} : tensor<4x512xf32> -> tensor<4x512xf32>
  return %r : tensor<4x512xf32>
}

// -----

func.func @norm_shape_empty(%a: tensor<4x512xf32>) -> tensor<4x512xf32> {
  // expected-error @+2 {{normalized_shape must not be empty}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = aten.rms_norm %a {normalized_shape = array<i64>} : tensor<4x512xf32> -> tensor<4x512xf32>
  return %r : tensor<4x512xf32>
}

// -----

func.func @norm_weight_shape(%a: tensor<4x512xf32>, %w: tensor<4x512xf32>) -> tensor<4x512xf32> {
  // expected-error @+2 {{weight shape [4, 512] must equal normalized_shape [512]}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = aten.rms_norm %a, %w {normalized_shape = array<i64: 512>} : tensor<4x512xf32>, tensor<4x512xf32> -> tensor<4x512xf32>
  return %r : tensor<4x512xf32>
}

// -----

func.func @norm_negative_eps(%a: tensor<4x512xf32>) -> tensor<4x512xf32> {
  // expected-error @+2 {{eps must be non-negative, got -1.000000e+00}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = aten.rms_norm %a {normalized_shape = array<i64: 512>, eps = -1.0} : tensor<4x512xf32> -> tensor<4x512xf32>
  return %r : tensor<4x512xf32>
}

// -----

// A bmm's result may widen bf16 or f16 products to f32, nothing else.
func.func @bmm_narrowed(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>) -> tensor<2x3x5xbf16> {
  // expected-error @+2 {{'aten.bmm' op inferred type(s) 'tensor<2x3x5xf32>' are incompatible with return type(s) of operation 'tensor<2x3x5xbf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = aten.bmm %a, %b : tensor<2x3x4xf32>, tensor<2x4x5xf32> -> tensor<2x3x5xbf16>
  return %r : tensor<2x3x5xbf16>
}

// -----

func.func @bmm_widened_to_f16(%a: tensor<2x3x4xbf16>, %b: tensor<2x4x5xbf16>) -> tensor<2x3x5xf16> {
  // expected-error @+2 {{'aten.bmm' op inferred type(s) 'tensor<2x3x5xbf16>' are incompatible with return type(s) of operation 'tensor<2x3x5xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = aten.bmm %a, %b : tensor<2x3x4xbf16>, tensor<2x4x5xbf16> -> tensor<2x3x5xf16>
  return %r : tensor<2x3x5xf16>
}
