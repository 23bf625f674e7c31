// RUN: neuron-opt %s | neuron-opt | FileCheck %s
// Every aten op prints and parses back unchanged; the declared result types
// also exercise PyTorch's broadcasting and type-promotion rules.

// CHECK-LABEL: func.func @binary
func.func @binary(%x: tensor<4x512xbf16>, %eps: tensor<f32>, %h: tensor<512xf16>, %f: tensor<4x1xf32>) {
  // CHECK: aten.mul.Tensor %{{.*}}, %{{.*}} : tensor<4x512xbf16>, tensor<4x512xbf16> -> tensor<4x512xbf16>
  %0 = aten.mul.Tensor %x, %x : tensor<4x512xbf16>, tensor<4x512xbf16> -> tensor<4x512xbf16>
  // A 0-d f32 tensor does not widen a bf16 tensor with dimensions.
  // CHECK: aten.add.Tensor %{{.*}}, %{{.*}} : tensor<4x512xbf16>, tensor<f32> -> tensor<4x512xbf16>
  %1 = aten.add.Tensor %x, %eps : tensor<4x512xbf16>, tensor<f32> -> tensor<4x512xbf16>
  // bf16 with f16 meets at f32; shapes broadcast from the right.
  // CHECK: aten.sub.Tensor %{{.*}}, %{{.*}} {alpha = 2.000000e+00 : f64} : tensor<4x512xbf16>, tensor<512xf16> -> tensor<4x512xf32>
  %2 = aten.sub.Tensor %x, %h {alpha = 2.0 : f64} : tensor<4x512xbf16>, tensor<512xf16> -> tensor<4x512xf32>
  // CHECK: aten.div.Tensor %{{.*}}, %{{.*}} : tensor<4x512xbf16>, tensor<4x1xf32> -> tensor<4x512xf32>
  %3 = aten.div.Tensor %x, %f : tensor<4x512xbf16>, tensor<4x1xf32> -> tensor<4x512xf32>
  // Two 0-d tensors promote like any two tensors.
  // CHECK: aten.mul.Tensor %{{.*}}, %{{.*}} : tensor<f32>, tensor<f32> -> tensor<f32>
  %4 = aten.mul.Tensor %eps, %eps : tensor<f32>, tensor<f32> -> tensor<f32>
  return
}

// CHECK-LABEL: func.func @scalar_and_unary
func.func @scalar_and_unary(%x: tensor<4x512xf32>) {
  // CHECK: aten.mul.Scalar %{{.*}}, 2.000000e+00 : tensor<4x512xf32> -> tensor<4x512xf32>
  %0 = aten.mul.Scalar %x, 2.0 : tensor<4x512xf32> -> tensor<4x512xf32>
  // CHECK: aten.add.Scalar %{{.*}}, 9.9999999999999995E-7 {alpha = 3.000000e+00 : f64} : tensor<4x512xf32> -> tensor<4x512xf32>
  %1 = aten.add.Scalar %x, 1.0e-6 {alpha = 3.0 : f64} : tensor<4x512xf32> -> tensor<4x512xf32>
  // CHECK: aten.neg
  %2 = aten.neg %x : tensor<4x512xf32> -> tensor<4x512xf32>
  // CHECK: aten.exp
  %3 = aten.exp %x : tensor<4x512xf32> -> tensor<4x512xf32>
  // CHECK: aten.rsqrt
  %4 = aten.rsqrt %x : tensor<4x512xf32> -> tensor<4x512xf32>
  // CHECK: aten.sqrt
  %5 = aten.sqrt %x : tensor<4x512xf32> -> tensor<4x512xf32>
  return
}

// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<2x4x512xbf16>) {
  // CHECK: aten.mean.dim %{{.*}} {dim = array<i64: -1>, keepdim = true} : tensor<2x4x512xbf16> -> tensor<2x4x1xbf16>
  %0 = aten.mean.dim %x {dim = array<i64: -1>, keepdim = true} : tensor<2x4x512xbf16> -> tensor<2x4x1xbf16>
  // CHECK: aten.sum.dim_IntList %{{.*}} {dim = array<i64: 1, 2>} : tensor<2x4x512xbf16> -> tensor<2xbf16>
  %1 = aten.sum.dim_IntList %x {dim = array<i64: 1, 2>} : tensor<2x4x512xbf16> -> tensor<2xbf16>
  // An empty dim list reduces everything.
  // CHECK: aten.amax %{{.*}} {dim = array<i64>} : tensor<2x4x512xbf16> -> tensor<bf16>
  %2 = aten.amax %x {dim = array<i64>} : tensor<2x4x512xbf16> -> tensor<bf16>
  return
}

// CHECK-LABEL: func.func @rms_norm
func.func @rms_norm(%x: tensor<4x512xbf16>, %w: tensor<512xbf16>) {
  // CHECK: aten.rms_norm %{{.*}}, %{{.*}} {eps = 9.9999999999999995E-7 : f64, normalized_shape = array<i64: 512>} : tensor<4x512xbf16>, tensor<512xbf16> -> tensor<4x512xbf16>
  %0 = aten.rms_norm %x, %w {normalized_shape = array<i64: 512>, eps = 1.0e-06 : f64} : tensor<4x512xbf16>, tensor<512xbf16> -> tensor<4x512xbf16>
  // CHECK: aten.rms_norm %{{.*}} {normalized_shape = array<i64: 512>} : tensor<4x512xbf16> -> tensor<4x512xbf16>
  %1 = aten.rms_norm %x {normalized_shape = array<i64: 512>} : tensor<4x512xbf16> -> tensor<4x512xbf16>
  return
}

// bf16 or f16 products summed into an f32 result, unrounded.
// CHECK-LABEL: func.func @bmm_widened
func.func @bmm_widened(%a: tensor<2x3x4xbf16>, %b: tensor<2x4x5xbf16>, %c: tensor<2x3x4xf16>, %d: tensor<2x4x5xf16>) {
  // CHECK: aten.bmm %{{.*}}, %{{.*}} : tensor<2x3x4xbf16>, tensor<2x4x5xbf16> -> tensor<2x3x5xf32>
  %0 = aten.bmm %a, %b : tensor<2x3x4xbf16>, tensor<2x4x5xbf16> -> tensor<2x3x5xf32>
  // CHECK: aten.bmm %{{.*}}, %{{.*}} : tensor<2x3x4xf16>, tensor<2x4x5xf16> -> tensor<2x3x5xf32>
  %1 = aten.bmm %c, %d : tensor<2x3x4xf16>, tensor<2x4x5xf16> -> tensor<2x3x5xf32>
  return
}
