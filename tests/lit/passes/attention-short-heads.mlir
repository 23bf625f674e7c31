// Short heads that each read their own K and V go several to a pass
// (LowerAttention.cpp, "diagonal packs"): 12 heads of 16 queries over 16 keys
// as [2, 6, 16, 32] are two packs of 6 heads. Each pack loads its 96 query
// rows and 96 keys once, computes all their scores in one [96 x 96] matmul,
// selects -inf off the diagonal blocks (a mask built once per kernel:
// floor(partition / 16) == floor(column / 16)), transposes the pack's
// probabilities in one chunk of its 96 keys ([96 x 96]), and takes each
// head's product with its own V rows: its 16 query columns of the
// transposed probabilities times the pack's [96 x 32] V rows with the other
// heads' rows selected to 0 (a mask built once: floor(partition / 16) ==
// floor(column / 32) over [96 x 6 * 32]), into its columns of one
// [16 x 6 * 32] output tile. V is loaded once a pack (two partition dims:
// 6 heads 512 apart, 16 rows of 32) and the output stored once ([16 rows] x
// [6 heads, 512 apart] x 32).
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels=fuse=true --ncc-lower-to-isa | FileCheck %s
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels=fuse=true --ncc-lower-to-isa | FileCheck %s --check-prefix=PV
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels=fuse=true --ncc-lower-to-isa | FileCheck %s --check-prefix=SPLIT
// CHECK-LABEL: func.func @short_heads
// CHECK: nc.kernel "k0_attention"
// The two packs' 96 rows of Q, then of K, load in one transfer each (the
// second pack's 3072 elements on).
// CHECK: nc.dma_load %[[Q:arg[0-9]+]] -> {{.*}} {ap = array<i64: 32, 96, 3072, 2, 1, 32>, {{.*}}offset = 0 : i64
// CHECK: nc.dma_load %[[K:arg[0-9]+]] -> {{.*}} {ap = array<i64: 32, 96, 3072, 2, 1, 32>, {{.*}}offset = 0 : i64
// CHECK: nc.matmul %[[S0:[0-9]+]], {{.*}} : memref<96x96xf32, 2>, memref<32x96xf32, 1>, memref<32x96xf32, 1>
// CHECK: nc.iota %[[ROW:[0-9]+]] {base = 5.000000e-01 : f64, {{.*}}partition_step = 1.000000e+00 : f64
// CHECK: nc.activation %[[ROW]], %[[ROW]] {{.*}}func = "floor", scale = 6.250000e-02 : f64
// CHECK: nc.iota %[[COL:[0-9]+]] {base = 5.000000e-01 : f64, element_step = 1.000000e+00 : f64
// CHECK: nc.activation %[[COL]], %[[COL]] {{.*}}func = "floor", scale = 6.250000e-02 : f64
// CHECK: nc.tensor_tensor %[[DIAG:[0-9]+]], %[[ROW]], %[[COL]] {alu = "is_equal"
// CHECK: nc.iota %[[NEGINF:[0-9]+]] {base = 0xFFF0000000000000 : f64
// CHECK: nc.tensor_select {{.*}}, %[[NEGINF]], %[[DIAG]] {{.*}} : memref<96x96xf32, 1>
// The second pack: the same mask.
// CHECK-NOT: nc.dma_load %[[Q]]
// CHECK: nc.tensor_select {{.*}}, %[[NEGINF]], %[[DIAG]] {{.*}} : memref<96x96xf32, 1>
// CHECK-NOT: nc.iota
// CHECK: nc.activation {{.*}} func = "exp"
// CHECK: nc.transpose {{.*}} : memref<96x96xf32, 2>, memref<96x96xf32, 1>
// CHECK: nc.transpose {{.*}} : memref<96x96xf32, 2>, memref<96x96xf32, 1>
// CHECK-NOT: nc.transpose
// CHECK-LABEL: func.func @projected
// PV-LABEL: func.func @short_heads
// PV: nc.dma_load %[[V:arg[0-9]+]] -> {{.*}} {ap = array<i64: 512, 6, 32, 16, 1, 32>, {{.*}}offset = 0 : i64, {{.*}}partition_dims = 2 : i64{{.*}} memref<96x32xf32, 1>
// PV: nc.iota %[[ROW:[0-9]+]] {base = 5.000000e-01 : f64, {{.*}}partition_step = 1.000000e+00 : f64{{.*}} : memref<96x192xf32, 1>
// PV: nc.activation %[[ROW]], %[[ROW]] {{.*}}func = "floor", scale = 6.250000e-02 : f64
// PV: nc.iota %[[COL:[0-9]+]] {base = 5.000000e-01 : f64, element_step = 1.000000e+00 : f64{{.*}} : memref<96x192xf32, 1>
// PV: nc.activation %[[COL]], %[[COL]] {{.*}}func = "floor", scale = 3.125000e-02 : f64
// PV: nc.tensor_tensor %[[OWN:[0-9]+]], %[[ROW]], %[[COL]] {alu = "is_equal"
// PV: %[[H0:[0-9]+]] = nc.tile_columns %[[OWN]][0] {{.*}} -> memref<96x32xf32, 1>
// PV: nc.tensor_select {{.*}}, %[[H0]] {{.*}} : memref<96x32xf32, 1>, memref<96x32xf32, 1>, memref<96x32xf32, 1>, memref<96x32xf32, 1>
// PV: nc.matmul {{.*}} : memref<16x32xf32, 2>, memref<96x16xf32, 1>, memref<96x32xf32, 1>
// PV-COUNT-5: nc.matmul {{.*}} : memref<16x32xf32, 2>, memref<96x16xf32, 1>, memref<96x32xf32, 1>
// PV: nc.dma_store {{.*}} {ap = array<i64: 32, 16, 512, 6, 1, 32>, {{.*}}offset = 0 : i64{{.*}} memref<16x192xf32, 1>, memref<2x6x16x32xf32>
// PV: nc.dma_load %[[V]] -> {{.*}} {ap = array<i64: 512, 6, 32, 16, 1, 32>, {{.*}}offset = 3072 : i64
// PV-COUNT-6: nc.matmul {{.*}} : memref<16x32xf32, 2>, memref<96x16xf32, 1>, memref<96x32xf32, 1>
// PV: nc.dma_store {{.*}} {ap = array<i64: 32, 16, 512, 6, 1, 32>, {{.*}}offset = 3072 : i64
// PV-NOT: nc.dma_store
// PV-LABEL: func.func @projected
func.func @short_heads(%q: tensor<2x6x16x32xf32>, %k: tensor<2x6x16x32xf32>, %v: tensor<2x6x16x32xf32>) -> tensor<2x6x16x32xf32> {
  %kt = aten.transpose.int %k {dim0 = 2 : i64, dim1 = 3 : i64} : tensor<2x6x16x32xf32> -> tensor<2x6x32x16xf32>
  %q3 = aten.reshape %q {size = array<i64: 12, 16, 32>} : tensor<2x6x16x32xf32> -> tensor<12x16x32xf32>
  %kt3 = aten.reshape %kt {size = array<i64: 12, 32, 16>} : tensor<2x6x32x16xf32> -> tensor<12x32x16xf32>
  %v3 = aten.reshape %v {size = array<i64: 12, 16, 32>} : tensor<2x6x16x32xf32> -> tensor<12x16x32xf32>
  %s = aten.bmm %q3, %kt3 : tensor<12x16x32xf32>, tensor<12x32x16xf32> -> tensor<12x16x16xf32>
  %x = aten.mul.Scalar %s, 0.125 : tensor<12x16x16xf32> -> tensor<12x16x16xf32>
  %p = aten._softmax %x {dim = -1 : i64} : tensor<12x16x16xf32> -> tensor<12x16x16xf32>
  %o = aten.bmm %p, %v3 : tensor<12x16x16xf32>, tensor<12x16x32xf32> -> tensor<12x16x32xf32>
  %o4 = aten.reshape %o {size = array<i64: 2, 6, 16, 32>} : tensor<12x16x32xf32> -> tensor<2x6x16x32xf32>
  return %o4 : tensor<2x6x16x32xf32>
}

// Heads split out of [2, 16, 4 * 32] projections: consecutive heads' rows
// are not one stride apart, but one head's rows in consecutive sequences
// are (128 elements): each pack holds one head of both sequences (packed
// along the batch index's step of 4), loads its 32 query rows at that
// stride, and stores its output into the merged [2, 16, 128] rows. Two
// packs (heads) load their rows of Q together, side by side: runs of 64.
// SPLIT-LABEL: func.func @projected
// SPLIT: nc.dma_load %[[Q:arg[0-9]+]] -> {{.*}} {ap = array<i64: 128, 32, 1, 64>, {{.*}}offset = 0 : i64
// SPLIT: nc.dma_load %[[Q]] -> {{.*}} {ap = array<i64: 128, 32, 1, 64>, {{.*}}offset = 64 : i64
// SPLIT: nc.matmul {{.*}} : memref<32x32xf32, 2>, memref<32x32xbf16, 1>, memref<32x32xbf16, 1>
// SPLIT: nc.dma_load {{.*}} {ap = array<i64: 2048, 2, 128, 16, 1, 32>, {{.*}}offset = 0 : i64, {{.*}}partition_dims = 2 : i64{{.*}} memref<32x32xbf16, 1>
// SPLIT-COUNT-2: nc.matmul {{.*}} : memref<16x32xf32, 2>, memref<32x16xbf16, 1>, memref<32x32xbf16, 1>
// SPLIT: nc.dma_store {{.*}} {ap = array<i64: 128, 16, 2048, 2, 1, 32>, {{.*}}offset = 0 : i64{{.*}} memref<16x64xbf16, 1>, memref<2x16x128xbf16>
func.func @projected(%qi: tensor<2x16x128xbf16>, %ki: tensor<2x16x128xbf16>, %vi: tensor<2x16x128xbf16>) -> tensor<2x16x128xbf16> {
  %q4 = aten.view %qi {size = array<i64: 2, 16, 4, 32>} : tensor<2x16x128xbf16> -> tensor<2x16x4x32xbf16>
  %q = aten.transpose.int %q4 {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x16x4x32xbf16> -> tensor<2x4x16x32xbf16>
  %k4 = aten.view %ki {size = array<i64: 2, 16, 4, 32>} : tensor<2x16x128xbf16> -> tensor<2x16x4x32xbf16>
  %k = aten.transpose.int %k4 {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x16x4x32xbf16> -> tensor<2x4x16x32xbf16>
  %v4 = aten.view %vi {size = array<i64: 2, 16, 4, 32>} : tensor<2x16x128xbf16> -> tensor<2x16x4x32xbf16>
  %v = aten.transpose.int %v4 {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x16x4x32xbf16> -> tensor<2x4x16x32xbf16>
  %kt = aten.transpose.int %k {dim0 = 2 : i64, dim1 = 3 : i64} : tensor<2x4x16x32xbf16> -> tensor<2x4x32x16xbf16>
  %q3 = aten.reshape %q {size = array<i64: 8, 16, 32>} : tensor<2x4x16x32xbf16> -> tensor<8x16x32xbf16>
  %kt3 = aten.reshape %kt {size = array<i64: 8, 32, 16>} : tensor<2x4x32x16xbf16> -> tensor<8x32x16xbf16>
  %v3 = aten.reshape %v {size = array<i64: 8, 16, 32>} : tensor<2x4x16x32xbf16> -> tensor<8x16x32xbf16>
  %s = aten.bmm %q3, %kt3 : tensor<8x16x32xbf16>, tensor<8x32x16xbf16> -> tensor<8x16x16xbf16>
  %p = aten._softmax %s {dim = -1 : i64} : tensor<8x16x16xbf16> -> tensor<8x16x16xbf16>
  %o = aten.bmm %p, %v3 : tensor<8x16x16xbf16>, tensor<8x16x32xbf16> -> tensor<8x16x32xbf16>
  %o4 = aten.reshape %o {size = array<i64: 2, 4, 16, 32>} : tensor<8x16x32xbf16> -> tensor<2x4x16x32xbf16>
  %ot = aten.transpose.int %o4 {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x4x16x32xbf16> -> tensor<2x16x4x32xbf16>
  %r = aten.reshape %ot {size = array<i64: 2, 16, 128>} : tensor<2x16x4x32xbf16> -> tensor<2x16x128xbf16>
  return %r : tensor<2x16x128xbf16>
}
