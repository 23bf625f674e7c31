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

// -----

// A matmul with one output column is a product with the column laid along
// the rows and a sum over k, in f32 for bf16 (the column is promoted by the
// product, not cast on its own); addmm scales by alpha and adds beta times
// its input. A bmm lays each batch's column along its rows.
// CHECK-LABEL: func.func @mat_vec
// CHECK: %[[ROW:.*]] = aten.reshape %arg1 {{.*}}size = array<i64: 512>{{.*}} : tensor<512x1xbf16> -> tensor<512xbf16>
// CHECK: %[[A:.*]] = aten._to_copy %arg0 {{.*}} : tensor<64x512xbf16> -> tensor<64x512xf32>
// CHECK: %[[P:.*]] = aten.mul.Tensor %[[A]], %[[ROW]] {{.*}} : tensor<64x512xf32>, tensor<512xbf16> -> tensor<64x512xf32>
// CHECK: %[[S:.*]] = aten.sum.dim_IntList %[[P]] {dim = array<i64: 1>, keepdim = true{{.*}} -> tensor<64x1xf32>
// CHECK: %[[MM:.*]] = aten._to_copy %[[S]] {{.*}} -> tensor<64x1xbf16>
// CHECK: %[[S2:.*]] = aten.sum.dim_IntList
// CHECK: %[[SCALED:.*]] = aten.mul.Scalar %[[S2]], 2.000000e+00
// CHECK: %[[BIASED:.*]] = aten.add.Tensor %[[SCALED]], %arg2 {alpha = 5.000000e-01 : f64
// CHECK: %[[ADDMM:.*]] = aten._to_copy %[[BIASED]] {{.*}} -> tensor<64x1xbf16>
// CHECK: return %[[MM]], %[[ADDMM]]
// CHECK-NOT: aten.mm
// CHECK-LABEL: func.func @batched_mat_vec
// CHECK: %[[ROW:.*]] = aten.reshape %arg1 {{.*}}size = array<i64: 3, 1, 512>{{.*}} -> tensor<3x1x512xf32>
// CHECK: %[[P:.*]] = aten.mul.Tensor %arg0, %[[ROW]]
// CHECK: aten.sum.dim_IntList %[[P]] {dim = array<i64: 2>, keepdim = true
// A transposed matrix stays a matmul: the TensorEngine reads it as it is.
// CHECK-LABEL: func.func @transposed_matrix
// CHECK: aten.mm
func.func @mat_vec(%a: tensor<64x512xbf16>, %v: tensor<512x1xbf16>, %b: tensor<1xbf16>) -> (tensor<64x1xbf16>, tensor<64x1xbf16>) {
  %0 = aten.mm %a, %v : tensor<64x512xbf16>, tensor<512x1xbf16> -> tensor<64x1xbf16>
  %1 = aten.addmm %b, %a, %v {alpha = 2.0 : f64, beta = 0.5 : f64} : tensor<1xbf16>, tensor<64x512xbf16>, tensor<512x1xbf16> -> tensor<64x1xbf16>
  return %0, %1 : tensor<64x1xbf16>, tensor<64x1xbf16>
}
func.func @batched_mat_vec(%a: tensor<3x64x512xf32>, %v: tensor<3x512x1xf32>) -> tensor<3x64x1xf32> {
  %0 = aten.bmm %a, %v : tensor<3x64x512xf32>, tensor<3x512x1xf32> -> tensor<3x64x1xf32>
  return %0 : tensor<3x64x1xf32>
}
func.func @transposed_matrix(%a: tensor<512x64xf32>, %v: tensor<512x1xf32>) -> tensor<64x1xf32> {
  %t = aten.t %a : tensor<512x64xf32> -> tensor<64x512xf32>
  %0 = aten.mm %t, %v : tensor<64x512xf32>, tensor<512x1xf32> -> tensor<64x1xf32>
  return %0 : tensor<64x1xf32>
}

// -----

// A matmul over a contraction of one is an outer product: a multiply of the
// column by the row, broadcast, in the matmul's dtype (one product each,
// rounded once, as the matmul rounds it); addmm scales and adds as above,
// in f32 for bf16, rounded once at the end.
// CHECK-LABEL: func.func @outer_products
// CHECK: %[[MM:.*]] = aten.mul.Tensor %arg0, %arg1 {nc.source = "aten.mm"{{.*}} : tensor<64x1xbf16>, tensor<1x300xbf16> -> tensor<64x300xbf16>
// CHECK: %[[A:.*]] = aten._to_copy %arg0 {nc.source = "aten.addmm"{{.*}} -> tensor<64x1xf32>
// CHECK: %[[P:.*]] = aten.mul.Tensor %[[A]], %arg1 {nc.source = "aten.addmm"{{.*}} -> tensor<64x300xf32>
// CHECK: %[[SCALED:.*]] = aten.mul.Scalar %[[P]], 2.000000e+00
// CHECK: %[[SUM:.*]] = aten.add.Tensor %[[SCALED]], %arg3 {alpha = 5.000000e-01 : f64
// CHECK: %[[ADDMM:.*]] = aten._to_copy %[[SUM]] {{.*}} -> tensor<64x300xbf16>
// CHECK: %[[BMM:.*]] = aten.mul.Tensor %arg2, %{{.*}} {nc.source = "aten.bmm"{{.*}} : tensor<5x8x1xf32>, tensor<5x1x8xf32> -> tensor<5x8x8xf32>
// CHECK: return %[[MM]], %[[ADDMM]], %[[BMM]]
// CHECK-NOT: aten.mm
func.func @outer_products(%a: tensor<64x1xbf16>, %b: tensor<1x300xbf16>, %c: tensor<5x8x1xf32>, %bias: tensor<300xbf16>) -> (tensor<64x300xbf16>, tensor<64x300xbf16>, tensor<5x8x8xf32>) {
  %0 = aten.mm %a, %b : tensor<64x1xbf16>, tensor<1x300xbf16> -> tensor<64x300xbf16>
  %1 = aten.addmm %bias, %a, %b {alpha = 2.0 : f64, beta = 0.5 : f64} : tensor<300xbf16>, tensor<64x1xbf16>, tensor<1x300xbf16> -> tensor<64x300xbf16>
  %ct = aten.transpose.int %c {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<5x8x1xf32> -> tensor<5x1x8xf32>
  %2 = aten.bmm %c, %ct : tensor<5x8x1xf32>, tensor<5x1x8xf32> -> tensor<5x8x8xf32>
  return %0, %1, %2 : tensor<64x300xbf16>, tensor<64x300xbf16>, tensor<5x8x8xf32>
}

// -----

// A bmm summing bf16 products into f32 (baddbmm's) multiplies in f32: the
// column widened, each product exact.
// CHECK-LABEL: func.func @widened_outer_product
// CHECK: %[[A:.*]] = aten._to_copy %arg0 {nc.source = "aten.bmm"{{.*}} -> tensor<5x8x1xf32>
// CHECK: %[[P:.*]] = aten.mul.Tensor %[[A]], %arg1 {nc.source = "aten.bmm"{{.*}} : tensor<5x8x1xf32>, tensor<5x1x6xbf16> -> tensor<5x8x6xf32>
// CHECK: return %[[P]]
func.func @widened_outer_product(%a: tensor<5x8x1xbf16>, %b: tensor<5x1x6xbf16>) -> tensor<5x8x6xf32> {
  %0 = aten.bmm %a, %b : tensor<5x8x1xbf16>, tensor<5x1x6xbf16> -> tensor<5x8x6xf32>
  return %0 : tensor<5x8x6xf32>
}

// -----

// A slice that keeps every element of its dim is its input: readers take
// the input; a returned one stays.
// CHECK-LABEL: func.func @identity_slices
// CHECK-SAME: (%[[X:.*]]: tensor<8x64xf32>)
// CHECK-NEXT: %[[HI:.*]] = aten.slice.Tensor %[[X]] {dim = 1 : i64, end = 9223372036854775807 : i64, start = 32 : i64
// CHECK-NEXT: %[[NEG:.*]] = aten.neg %[[X]]
// CHECK-NEXT: %[[KEPT:.*]] = aten.slice.Tensor %[[X]] {dim = -2 : i64
// CHECK-NEXT: return %[[HI]], %[[NEG]], %[[KEPT]]
func.func @identity_slices(%x: tensor<8x64xf32>) -> (tensor<8x32xf32>, tensor<8x64xf32>, tensor<8x64xf32>) {
  %a = aten.slice.Tensor %x {dim = 0 : i64, start = 0 : i64, end = 9223372036854775807 : i64, step = 1 : i64} : tensor<8x64xf32> -> tensor<8x64xf32>
  %hi = aten.slice.Tensor %a {dim = 1 : i64, start = 32 : i64, end = 9223372036854775807 : i64, step = 1 : i64} : tensor<8x64xf32> -> tensor<8x32xf32>
  %b = aten.slice.Tensor %x {dim = 1 : i64, start = -64 : i64, end = 64 : i64, step = 1 : i64} : tensor<8x64xf32> -> tensor<8x64xf32>
  %n = aten.neg %b : tensor<8x64xf32> -> tensor<8x64xf32>
  %kept = aten.slice.Tensor %x {dim = -2 : i64, start = 0 : i64, end = 8 : i64, step = 1 : i64} : tensor<8x64xf32> -> tensor<8x64xf32>
  return %hi, %n, %kept : tensor<8x32xf32>, tensor<8x64xf32>, tensor<8x64xf32>
}
