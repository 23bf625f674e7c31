// RUN: neuron-opt %s --split-input-file --ncc-fold-constants | FileCheck %s

// Elementwise ops on splats stay splats, rounded to the result dtype.
// CHECK-LABEL: func.func @splat_chain
// CHECK-NEXT: %[[C:.*]] = arith.constant dense<2.000000e+00> : tensor<4x8xbf16>
// CHECK-NEXT: %[[R:.*]] = aten.add.Tensor %arg0, %[[C]]
func.func @splat_chain(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %one = arith.constant dense<1.0> : tensor<4x8xbf16>
  %two = aten.mul.Scalar %one, 2.0 : tensor<4x8xbf16> -> tensor<4x8xbf16>
  %r = aten.add.Tensor %x, %two : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
  return %r : tensor<4x8xbf16>
}

// -----

// arange(4) * 0.5 (integer operand cast to float first, as the importer
// writes it) becomes a dense f32 constant.
// CHECK-LABEL: func.func @arange_scale
// CHECK-NEXT: arith.constant dense<[0.000000e+00, 5.000000e-01, 1.000000e+00, 1.500000e+00]> : tensor<4xf32>
// CHECK-NEXT: aten.add.Tensor
func.func @arange_scale(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = arith.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %f = aten._to_copy %a : tensor<4xi64> -> tensor<4xf32>
  %s = aten.mul.Scalar %f, 0.5 : tensor<4xf32> -> tensor<4xf32>
  %r = aten.add.Tensor %x, %s : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// A reduction of a splat multiplies by the reduced count; of a dense
// constant it sums (here over the transpose: 1 + 2, 3 + 4).
// CHECK-LABEL: func.func @reductions
// CHECK-DAG: arith.constant dense<2.400000e+01> : tensor<2x1xf32>
// CHECK-DAG: arith.constant dense<[3.000000e+00, 7.000000e+00]> : tensor<2xf32>
// CHECK-NOT: aten.sum
// CHECK-NOT: aten.t
func.func @reductions(%x: tensor<2x1xf32>) -> (tensor<2x1xf32>, tensor<2xf32>) {
  %c = arith.constant dense<3.0> : tensor<2x8xf32>
  %s = aten.sum.dim_IntList %c {dim = array<i64: -1>, keepdim = true} : tensor<2x8xf32> -> tensor<2x1xf32>
  %r = aten.add.Tensor %x, %s : tensor<2x1xf32>, tensor<2x1xf32> -> tensor<2x1xf32>
  %d = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %t = aten.t %d : tensor<2x2xf32> -> tensor<2x2xf32>
  %u = aten.sum.dim_IntList %t {dim = array<i64: 0>, keepdim = false} : tensor<2x2xf32> -> tensor<2xf32>
  return %r, %u : tensor<2x1xf32>, tensor<2xf32>
}

// -----

// An expand of a dense constant would copy it: it stays a view, read in
// place by the kernel's access pattern.
// CHECK-LABEL: func.func @expand_stays
// CHECK: aten.expand
func.func @expand_stays(%x: tensor<3x2xf32>) -> tensor<3x2xf32> {
  %d = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %e = aten.expand %d {size = array<i64: 3, 2>} : tensor<2xf32> -> tensor<3x2xf32>
  %r = aten.mul.Tensor %x, %e : tensor<3x2xf32>, tensor<3x2xf32> -> tensor<3x2xf32>
  return %r : tensor<3x2xf32>
}
