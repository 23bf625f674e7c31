// RUN: neuron-opt %s --split-input-file --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa | FileCheck %s

// x @ W.t() + b, relu: both operands are row-major with k contiguous, so
// they are read in rows (one DMA per panel of up to 128 rows, here the whole
// K = 300) and transposed on the TensorEngine, 128 rows at a time (no
// element-strided DMA, no copy kernel for the view). W's four 128-row
// transposes of a k slice fill one PSUM bank side by side, so the moving
// slice and the output tile stay 512 columns wide (600 = 512 + 88). K runs as
// 128 + 128 + 44 partitions accumulated in one PSUM tile; the bias and relu
// are the epilogue of the same kernel. x's two full [128 x 128] slices are
// transposed side by side into one PSUM tile and copied out at once (the
// partial slice of 44 stays on its own).
// CHECK-LABEL: func.func @linear
// CHECK: nc.kernel "k0_fused_t_addmm_relu"
// CHECK-NOT: nc.kernel
// CHECK: %[[P:.*]] = nc.alloc_psum : memref<128x512xf32, 2>
// CHECK: %[[XG:.*]] = nc.alloc_psum : memref<128x256xf32, 2>
// CHECK: %[[XP:.*]] = nc.alloc_tile {iteration = 1 : i64, rotation} : memref<128x300xf32, 1>
// CHECK: nc.dma_load %{{.*}} -> %[[XP]] {ap = array<i64: 300, 128, 1, 300>, {{.*}}offset = 0 : i64{{.*}} : memref<200x300xf32>, memref<128x300xf32, 1>
// CHECK: %[[XS:.*]] = nc.tile_columns %[[XP]][0] : memref<128x300xf32, 1> -> memref<128x128xf32, 1>
// CHECK: %[[XT0:.*]] = nc.tile_columns %[[XG]][0] : memref<128x256xf32, 2> -> memref<128x128xf32, 2>
// CHECK: nc.transpose %[[XT0]], %[[XS]]
// CHECK: %[[XS1:.*]] = nc.tile_columns %[[XP]][128] : memref<128x300xf32, 1> -> memref<128x128xf32, 1>
// CHECK: %[[XT1:.*]] = nc.tile_columns %[[XG]][128] : memref<128x256xf32, 2> -> memref<128x128xf32, 2>
// CHECK: nc.transpose %[[XT1]], %[[XS1]]
// CHECK: nc.tensor_scalar %[[XC:.*]], %[[XG]] {alu = "mul", {{.*}}imm = 1.0{{.*}} : memref<128x256xf32, 1>, memref<128x256xf32, 2>
// CHECK: %[[A:.*]] = nc.tile_columns %[[XC]][0] : memref<128x256xf32, 1> -> memref<128x128xf32, 1>
// CHECK: %[[WT:.*]] = nc.alloc_psum : memref<128x512xf32, 2>
// CHECK: nc.dma_load %{{.*}} -> %[[WP:.*]] {ap = array<i64: 300, 128, 1, 300>, {{.*}}offset = 0 : i64{{.*}} : memref<600x300xf32>, memref<128x300xf32, 1>
// CHECK: %[[WS:.*]] = nc.tile_columns %[[WP]][0]
// CHECK: %[[WT0:.*]] = nc.tile_columns %[[WT]][0] : memref<128x512xf32, 2> -> memref<128x128xf32, 2>
// CHECK: nc.transpose %[[WT0]], %[[WS]]
// CHECK: nc.dma_load {{.*}}offset = 38400 : i64
// CHECK: nc.tile_columns %[[WT]][128]
// CHECK: nc.tile_columns %[[WT]][256]
// CHECK: nc.tile_columns %[[WT]][384]
// CHECK: nc.tensor_scalar %[[B:.*]], %[[WT]] {alu = "mul"
// CHECK: nc.matmul %[[P]], %[[A]], %[[B]] {engine = "tensor", source_op = 1 : i64} : memref<128x512xf32, 2>, memref<128x128xf32, 1>, memref<128x512xf32, 1>
// CHECK: nc.matmul %[[P]], {{.*}} {accumulate = true
// CHECK: nc.matmul %[[P]], {{.*}} {accumulate = true, {{.*}}} : memref<128x512xf32, 2>, memref<44x128xf32, 1>, memref<44x512xf32, 1>
// CHECK: nc.tensor_tensor %{{.*}}, %[[P]], %{{.*}} {alu = "add"
// CHECK: nc.activation {{.*}}func = "relu"
// CHECK: nc.alloc_psum : memref<128x88xf32, 2>
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

// A reshape of a transposed view needs a copy kernel first. Its input is
// read transposed: the 4 rows of x land on 4 partitions (contiguous runs of
// 8), and the TensorEngine transposes them into the [8 x 4] tile.
// CHECK-LABEL: func.func @copy
// CHECK: nc.kernel "k0_t"
// CHECK: nc.dma_load {{.*}} {ap = array<i64: 8, 4, 1, 8>
// CHECK: nc.transpose {{.*}} : memref<8x4xf32, 2>, memref<4x8xf32, 1>
// CHECK: nc.tensor_scalar {{.*}} : memref<8x4xf32, 1>, memref<8x4xf32, 2>
// CHECK: nc.kernel "k1_fused_view_exp"
func.func @copy(%x: tensor<4x8xf32>) -> tensor<32xf32> {
  %t = aten.t %x : tensor<4x8xf32> -> tensor<8x4xf32>
  %r = aten.view %t {size = array<i64: 32>} : tensor<8x4xf32> -> tensor<32xf32>
  %e = aten.exp %r : tensor<32xf32> -> tensor<32xf32>
  return %e : tensor<32xf32>
}

// -----

// cat along the last dim: each input is loaded into its column range of
// one tile and the rows are stored whole, one run each.
// CHECK-LABEL: func.func @concat
// CHECK: nc.kernel "k0_cat"
// CHECK: %[[T:.*]] = nc.alloc_tile {{.*}} : memref<4x11xf32, 1>
// CHECK: %[[X:.*]] = nc.tile_columns %[[T]][0] : memref<4x11xf32, 1> -> memref<4x8xf32, 1>
// CHECK: nc.dma_load %{{.*}} -> %[[X]] {ap = array<i64: 8, 4, 1, 8>
// CHECK: %[[Y:.*]] = nc.tile_columns %[[T]][8] : memref<4x11xf32, 1> -> memref<4x3xf32, 1>
// CHECK: nc.dma_load %{{.*}} -> %[[Y]] {ap = array<i64: 3, 4, 1, 3>
// CHECK: nc.dma_store %[[T]] -> %{{.*}} {ap = array<i64: 11, 4, 1, 11>, {{.*}}offset = 0 : i64
// CHECK-NOT: nc.dma_store
func.func @concat(%x: tensor<4x8xf32>, %y: tensor<4x3xf32>) -> tensor<4x11xf32> {
  %c = aten.cat %x, %y {dim = 1 : i64} : tensor<4x8xf32>, tensor<4x3xf32> -> tensor<4x11xf32>
  return %c : tensor<4x11xf32>
}

// -----

// cat along another dim: each input is copied into its slab of the output.
// CHECK-LABEL: func.func @concat_rows
// CHECK: nc.kernel "k0_cat"
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 8, 4, 1, 8>, {{.*}}offset = 0 : i64
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 8, 3, 1, 8>, {{.*}}offset = 32 : i64
func.func @concat_rows(%x: tensor<4x8xf32>, %y: tensor<3x8xf32>) -> tensor<7x8xf32> {
  %c = aten.cat %x, %y {dim = 0 : i64} : tensor<4x8xf32>, tensor<3x8xf32> -> tensor<7x8xf32>
  return %c : tensor<7x8xf32>
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

// The fill tile holds only a constant: written once, read by every row tile
// (rows of 512 bytes: two row tiles, not packed).
// CHECK-LABEL: func.func @mask_rows
// CHECK: nc.iota %[[FILL:.*]] {base = 0xFFF0000000000000 : f64
// CHECK: nc.tensor_select %{{.*}}, %[[FILL]], %{{.*}}, %{{.*}}
// CHECK-NOT: nc.iota
// CHECK: nc.tensor_select %{{.*}}, %[[FILL]], %{{.*}}, %{{.*}}
func.func @mask_rows(%x: tensor<256x128xf32>) -> tensor<256x128xf32> {
  %m = aten.gt.Scalar %x, 0.0 : tensor<256x128xf32> -> tensor<256x128xi1>
  %f = aten.masked_fill.Scalar %x, %m, 0xFFF0000000000000 : tensor<256x128xf32>, tensor<256x128xi1> -> tensor<256x128xf32>
  return %f : tensor<256x128xf32>
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
// every column tile: x [128 x 256] @ W.t() with W [1536 x 256] has 3 column
// tiles of 512 and 2 k slices: x's panel is loaded once and its 2 slices
// transposed once, not for each column tile; W's 12 panels of 128 rows are
// loaded once each (every column tile has its own) and give 24 transposes.
// CHECK-LABEL: func.func @stationary_reuse
// CHECK-COUNT-1: nc.dma_load {{.*}} : memref<128x256xf32>, memref<128x256xf32, 1>
// CHECK-NOT: nc.dma_load {{.*}} : memref<128x256xf32>,
// CHECK: return
func.func @stationary_reuse(%x: tensor<128x256xf32>, %w: tensor<1536x256xf32>) -> tensor<128x1536xf32> {
  %t = aten.t %w : tensor<1536x256xf32> -> tensor<256x1536xf32>
  %y = aten.mm %x, %t : tensor<128x256xf32>, tensor<256x1536xf32> -> tensor<128x1536xf32>
  return %y : tensor<128x1536xf32>
}

// -----

// A fraction cast to an integer is rounded toward zero (the trunc activation)
// so that the integer's users in the kernel read whole numbers; a cast of a
// value whole by construction (floor) needs no rounding.
// CHECK-LABEL: func.func @fraction_to_integer
// CHECK: nc.activation {{.*}}func = "trunc"
// CHECK: nc.activation {{.*}}func = "floor"
// CHECK-NOT: func = "trunc"
// CHECK: return
func.func @fraction_to_integer(%m: tensor<4x300xi64>) -> (tensor<4x300xi64>, tensor<4x300xi64>) {
  %mf = aten._to_copy %m : tensor<4x300xi64> -> tensor<4x300xf32>
  %t = aten.mul.Scalar %mf, 2.5 : tensor<4x300xf32> -> tensor<4x300xf32>
  %ti = aten._to_copy %t : tensor<4x300xf32> -> tensor<4x300xi64>
  %f = aten.floor %t : tensor<4x300xf32> -> tensor<4x300xf32>
  %fi = aten._to_copy %f : tensor<4x300xf32> -> tensor<4x300xi64>
  return %ti, %fi : tensor<4x300xi64>, tensor<4x300xi64>
}
