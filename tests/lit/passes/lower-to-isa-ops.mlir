// RUN: neuron-opt %s --split-input-file --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa | FileCheck %s

// x @ W.t() + b, relu: both operands are row-major with k contiguous, so
// their tiles are read as contiguous rows and transposed on the TensorEngine
// (no element-strided DMA, no copy kernel for the view). K = 300 runs as
// 128 + 128 + 44 partitions accumulated in one PSUM tile; with a transposed
// moving operand the output tiles are 128 columns wide (600 = 4 x 128 + 88);
// the bias and relu are the epilogue of the same kernel.
// CHECK-LABEL: func.func @linear
// CHECK: nc.kernel "k0_fused_t_addmm_relu"
// CHECK-NOT: nc.kernel
// CHECK: %[[P:.*]] = nc.alloc_psum {iteration = 1 : i64} : memref<128x128xf32, 2>
// CHECK: nc.dma_load %{{.*}} -> %[[XR:.*]] {ap = array<i64: 300, 128, 1, 128>, {{.*}}offset = 0 : i64{{.*}} : memref<200x300xf32>, memref<128x128xf32, 1>
// CHECK: nc.transpose %[[XT:.*]], %[[XR]]
// CHECK: nc.tensor_scalar %[[A:.*]], %[[XT]] {alu = "bypass"
// CHECK: nc.dma_load %{{.*}} -> %[[WR:.*]] {ap = array<i64: 300, 128, 1, 128>, {{.*}}offset = 0 : i64{{.*}} : memref<600x300xf32>, memref<128x128xf32, 1>
// CHECK: nc.transpose %[[WT:.*]], %[[WR]]
// CHECK: nc.tensor_scalar %[[B:.*]], %[[WT]] {alu = "bypass"
// CHECK: nc.matmul %[[P]], %[[A]], %[[B]] {engine = "tensor", source_op = 1 : i64} : memref<128x128xf32, 2>, memref<128x128xf32, 1>, memref<128x128xf32, 1>
// CHECK: nc.matmul %[[P]], {{.*}} {accumulate = true
// CHECK: nc.matmul %[[P]], {{.*}} {accumulate = true, {{.*}}} : memref<128x128xf32, 2>, memref<44x128xf32, 1>, memref<44x128xf32, 1>
// CHECK: nc.tensor_tensor %{{.*}}, %[[P]], %{{.*}} {alu = "add"
// CHECK: nc.activation {{.*}}func = "relu"
// CHECK: nc.alloc_psum {iteration = 5 : i64} : memref<128x88xf32, 2>
func.func @linear(%x: tensor<200x300xf32>, %w: tensor<600x300xf32>, %b: tensor<600xf32>) -> tensor<200x600xf32> {
  %t = aten.t %w : tensor<600x300xf32> -> tensor<300x600xf32>
  %y = aten.addmm %b, %x, %t : tensor<600xf32>, tensor<200x300xf32>, tensor<300x600xf32> -> tensor<200x600xf32>
  %r = aten.relu %y : tensor<200x600xf32> -> tensor<200x600xf32>
  return %r : tensor<200x600xf32>
}

// -----

// Row tiles of a bmm stay inside one batch; B's rows are contiguous and read
// directly.
// CHECK-LABEL: func.func @batched
// CHECK: nc.dma_load {{.*}} {ap = array<i64: 8, 16, 1, 8>, {{.*}}offset = 0 : i64
// CHECK: nc.transpose
// CHECK: nc.dma_load {{.*}} {ap = array<i64: 16, 8, 1, 16>, {{.*}}offset = 0 : i64
// CHECK: nc.matmul {{.*}} : memref<16x16xf32, 2>, memref<8x16xf32, 1>, memref<8x16xf32, 1>
// CHECK: nc.dma_load {{.*}} {ap = array<i64: 8, 16, 1, 8>, {{.*}}offset = 128 : i64
func.func @batched(%a: tensor<3x16x8xf32>, %b: tensor<3x8x16xf32>) -> tensor<3x16x16xf32> {
  %r = aten.bmm %a, %b : tensor<3x16x8xf32>, tensor<3x8x16xf32> -> tensor<3x16x16xf32>
  return %r : tensor<3x16x16xf32>
}

// -----

// A chain of views becomes one access pattern: select row 1 of a [16, 2, 32]
// view of x (offset 32, rows 64 apart).
// CHECK-LABEL: func.func @views
// CHECK: nc.kernel "k0_fused_view_select_exp"
// CHECK: nc.dma_load {{.*}} {ap = array<i64: 64, 16, 1, 32>, {{.*}}offset = 32 : i64
// CHECK: nc.activation {{.*}}func = "exp"
func.func @views(%x: tensor<16x64xf32>) -> tensor<16x32xf32> {
  %v = aten.view %x {size = array<i64: 16, 2, 32>} : tensor<16x64xf32> -> tensor<16x2x32xf32>
  %s = aten.select.int %v {dim = 1 : i64, index = 1 : i64} : tensor<16x2x32xf32> -> tensor<16x32xf32>
  %e = aten.exp %s : tensor<16x32xf32> -> tensor<16x32xf32>
  return %e : tensor<16x32xf32>
}

// -----

// A reshape of a transposed view needs a copy kernel first.
// CHECK-LABEL: func.func @copy
// CHECK: nc.kernel "k0_t"
// CHECK: nc.dma_load {{.*}} {ap = array<i64: 1, 8, 8, 4>
// CHECK: nc.kernel "k1_fused_view_exp"
func.func @copy(%x: tensor<4x8xf32>) -> tensor<32xf32> {
  %t = aten.t %x : tensor<4x8xf32> -> tensor<8x4xf32>
  %r = aten.view %t {size = array<i64: 32>} : tensor<8x4xf32> -> tensor<32xf32>
  %e = aten.exp %r : tensor<32xf32> -> tensor<32xf32>
  return %e : tensor<32xf32>
}

// -----

// cat: each input is copied into its slab of the output.
// CHECK-LABEL: func.func @concat
// CHECK: nc.kernel "k0_cat"
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 11, 4, 1, 8>, {{.*}}offset = 0 : i64
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 11, 4, 1, 3>, {{.*}}offset = 8 : i64
func.func @concat(%x: tensor<4x8xf32>, %y: tensor<4x3xf32>) -> tensor<4x11xf32> {
  %c = aten.cat %x, %y {dim = 1 : i64} : tensor<4x8xf32>, tensor<4x3xf32> -> tensor<4x11xf32>
  return %c : tensor<4x11xf32>
}

// -----

// masked_fill: iota writes the fill value, a select picks per element.
// CHECK-LABEL: func.func @mask
// CHECK: nc.tensor_scalar %[[M:.*]], %{{.*}} {alu = "is_gt"
// CHECK: nc.iota %[[FILL:.*]] {base = 0xFFF0000000000000 : f64
// CHECK: nc.tensor_select %{{.*}}, %[[FILL]], %{{.*}}, %[[M]]
func.func @mask(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %m = aten.gt.Scalar %x, 0.0 : tensor<8x8xf32> -> tensor<8x8xi1>
  %f = aten.masked_fill.Scalar %x, %m, 0xFFF0000000000000 : tensor<8x8xf32>, tensor<8x8xi1> -> tensor<8x8xf32>
  return %f : tensor<8x8xf32>
}

// -----

// An embedding is a gather of table rows by the HBM index tensor.
// CHECK-LABEL: func.func @embed
// CHECK: ^bb0(%[[W:.*]]: memref<100x64xf32>, %[[IDS:.*]]: memref<2x16xi64>
// CHECK: nc.dma_gather %[[W]][%[[IDS]]] -> %{{.*}} {ap = array<i64: 64, 32, 1, 64>, {{.*}}index_bound = 100 : i64, index_offset = 0 : i64
func.func @embed(%ids: tensor<2x16xi64>, %w: tensor<100x64xf32>) -> tensor<2x16x64xf32> {
  %e = aten.embedding %w, %ids : tensor<100x64xf32>, tensor<2x16xi64> -> tensor<2x16x64xf32>
  return %e : tensor<2x16x64xf32>
}

// -----

// An op on immediates only (what constant folding leaves to no one here) is
// an immediate, and a returned immediate is written from a filled tile.
// CHECK-LABEL: func.func @const_only
// CHECK: nc.iota {{.*}}base = 7.3890{{[0-9]*}}
// CHECK: nc.dma_store
func.func @const_only() -> tensor<4xf32> {
  %a = arith.constant dense<2.0> : tensor<4xf32>
  %r = aten.exp %a : tensor<4xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// A row tile's stationary slices are loaded and transposed once and reused by
// every column tile: x [128 x 256] @ W.t() with W [384 x 256] has 3 column
// tiles of 128 and 2 k slices: x is loaded twice, not 6 times; W's slices are
// loaded for every column tile.
// CHECK-LABEL: func.func @stationary_reuse
// CHECK: memref<128x256xf32>, memref<128x128xf32, 1>
// CHECK: memref<384x256xf32>, memref<128x128xf32, 1>
// CHECK: memref<128x256xf32>, memref<128x128xf32, 1>
// CHECK: memref<384x256xf32>, memref<128x128xf32, 1>
// CHECK-NOT: memref<128x256xf32>, memref<128x128xf32, 1>
// CHECK-COUNT-4: memref<384x256xf32>, memref<128x128xf32, 1>
// CHECK-NOT: memref<128x256xf32>, memref<128x128xf32, 1>
// CHECK: return
func.func @stationary_reuse(%x: tensor<128x256xf32>, %w: tensor<384x256xf32>) -> tensor<128x384xf32> {
  %t = aten.t %w : tensor<384x256xf32> -> tensor<256x384xf32>
  %y = aten.mm %x, %t : tensor<128x256xf32>, tensor<256x384xf32> -> tensor<128x384xf32>
  return %y : tensor<128x384xf32>
}
