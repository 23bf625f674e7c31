// RUN: neuron-opt %s --ncc-decompose-composites --split-input-file | FileCheck %s
// RUN: neuron-opt %s --ncc-decompose-composites=legal-ops=aten.rms_norm --split-input-file | FileCheck %s --check-prefix=LEGAL

// A bf16 input is computed in f32 and the result cast back, as PyTorch does.
// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME: (%[[X:.*]]: tensor<4x512xbf16>, %[[W:.*]]: tensor<512xbf16>)
// CHECK: %[[X32:.*]] = aten._to_copy %[[X]] {nc.source = "aten.rms_norm", nc.source_id = 0 : i64} : tensor<4x512xbf16> -> tensor<4x512xf32>
// CHECK: %[[SQ:.*]] = aten.mul.Tensor %[[X32]], %[[X32]] {nc.source = "aten.rms_norm", nc.source_id = 0 : i64}
// CHECK: %[[MS:.*]] = aten.mean.dim %[[SQ]] {dim = array<i64: 1>, keepdim = true, nc.source = "aten.rms_norm", nc.source_id = 0 : i64} : tensor<4x512xf32> -> tensor<4x1xf32>
// CHECK: %[[SH:.*]] = aten.add.Scalar %[[MS]], 9.9999999999999995E-7 {{.*}}nc.source_id = 0
// CHECK: %[[R:.*]] = aten.rsqrt %[[SH]]
// CHECK: %[[N:.*]] = aten.mul.Tensor %[[X32]], %[[R]] {{.*}}: tensor<4x512xf32>, tensor<4x1xf32> -> tensor<4x512xf32>
// CHECK: %[[N2:.*]] = aten.mul.Tensor %[[N]], %[[W]] {{.*}}: tensor<4x512xf32>, tensor<512xbf16> -> tensor<4x512xf32>
// CHECK: %[[Y:.*]] = aten._to_copy %[[N2]] {{.*}}: tensor<4x512xf32> -> tensor<4x512xbf16>
// CHECK: return %[[Y]]
// LEGAL-LABEL: func.func @rms_norm
// LEGAL: aten.rms_norm
func.func @rms_norm(%x: tensor<4x512xbf16>, %w: tensor<512xbf16>) -> tensor<4x512xbf16> {
  %y = aten.rms_norm %x, %w {normalized_shape = array<i64: 512>, eps = 1.0e-06} : tensor<4x512xbf16>, tensor<512xbf16> -> tensor<4x512xbf16>
  return %y : tensor<4x512xbf16>
}

// -----

// Without weight or eps: f32's machine epsilon (PyTorch computes in f32),
// and two normalized dims.
// Each composite gets its own source id.
// CHECK-LABEL: func.func @no_weight
// CHECK: aten.mean.dim %{{.*}} {dim = array<i64: 1, 2>, keepdim = true, nc.source = "aten.rms_norm", nc.source_id = 0 : i64} : tensor<2x4x8xf32> -> tensor<2x1x1xf32>
// CHECK: aten.add.Scalar %{{.*}}, 1.1920928955078125E-7
// CHECK: aten.mul.Tensor {{.*}}nc.source_id = 0
// CHECK-NOT: nc.source_id = 0
// CHECK: aten.mul.Tensor {{.*}}nc.source_id = 1
// CHECK: return
func.func @no_weight(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %y = aten.rms_norm %x {normalized_shape = array<i64: 4, 8>} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %z = aten.rms_norm %y {normalized_shape = array<i64: 8>} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  return %z : tensor<2x4x8xf32>
}

// -----

// softmax, layer norm and var_mean expand into reductions over the last dim
// and elementwise ops, each tagged with its composite.
// CHECK-LABEL: func.func @norms
// CHECK: %[[M:.*]] = aten.amax %arg0 {dim = array<i64: -1>, keepdim = true, nc.source = "aten._softmax"
// CHECK: %[[S:.*]] = aten.sub.Tensor %arg0, %[[M]]
// CHECK: %[[E:.*]] = aten.exp %[[S]]
// CHECK: %[[Z:.*]] = aten.sum.dim_IntList %[[E]] {dim = array<i64: -1>, keepdim = true
// CHECK: %[[P:.*]] = aten.div.Tensor %[[E]], %[[Z]]
// CHECK: %[[MU:.*]] = aten.mean.dim %[[P]] {dim = array<i64: 1>, keepdim = true, nc.source = "aten.native_layer_norm"
// CHECK: %[[C:.*]] = aten.sub.Tensor %[[P]], %[[MU]]
// CHECK: aten.mul.Tensor %[[C]], %[[C]]
// CHECK: %[[V:.*]] = aten.mean.dim
// CHECK: aten.add.Scalar %[[V]], 1.000000e-05
// CHECK: %[[R:.*]] = aten.rsqrt
// CHECK: %[[N:.*]] = aten.mul.Tensor %[[C]], %[[R]]
// CHECK: %[[NW:.*]] = aten.mul.Tensor %[[N]], %arg1
// CHECK: %[[NB:.*]] = aten.add.Tensor %[[NW]], %arg2
// CHECK: aten.sum.dim_IntList {{.*}}nc.source = "aten.var_mean.correction"
// CHECK: aten.div.Scalar %{{.*}}, 6.300000e+01
// CHECK: return %[[NB]], %[[MU]], %[[R]]
func.func @norms(%x: tensor<16x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>) -> (tensor<16x64xf32>, tensor<16x1xf32>, tensor<16x1xf32>, tensor<16x1xf32>) {
  %s = aten._softmax %x {dim = -1 : i64} : tensor<16x64xf32> -> tensor<16x64xf32>
  %o, %m, %r = aten.native_layer_norm %s weight %w : tensor<64xf32> bias %b : tensor<64xf32> {normalized_shape = array<i64: 64>, eps = 1.0e-05 : f64} : tensor<16x64xf32> -> tensor<16x64xf32>, tensor<16x1xf32>, tensor<16x1xf32>
  %v, %mm = aten.var_mean.correction %x {dim = array<i64: -1>, correction = 1 : i64, keepdim = true} : tensor<16x64xf32> -> tensor<16x1xf32>, tensor<16x1xf32>
  return %o, %m, %r, %v : tensor<16x64xf32>, tensor<16x1xf32>, tensor<16x1xf32>, tensor<16x1xf32>
}
