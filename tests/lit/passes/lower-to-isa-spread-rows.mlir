// RUN: neuron-opt %s --ncc-form-kernels --ncc-lower-to-isa=few-bytes=0 | FileCheck %s

// A softmax over two rows of 8192 (a vocabulary-sized row for two tokens)
// is one kernel whose rows are spread over 64 partitions, 32 per row of 256
// elements each (nc::spreadFactor): each reduction reduces its partition's
// part, then combines the 32 partials of its row. The constants of the
// combination (the same-row mask, floor((partition + 0.5) / 32) compared
// along both dims, and the ones and identity tiles) come first, before the
// load. The partials, broadcast along a [64 x 64] tile and transposed, are
// selected by the mask and reduced along the free dim, so that every
// partition of a row holds the row's maximum (then its sum) for the
// elementwise ops that follow.
// CHECK-LABEL: func.func @spread_softmax
// CHECK: nc.kernel "k0_fused_amax_sub_exp_sum_etc"
// CHECK: nc.iota %[[OWN:[0-9]+]] {base = 5.000000e-01 : f64, {{.*}}partition_step = 1.000000e+00
// CHECK: nc.activation %[[OWN]], %[[OWN]] {{{.*}}func = "floor", scale = 3.125000e-02
// CHECK: nc.iota %[[OTHER:[0-9]+]] {base = 5.000000e-01 : f64, element_step = 1.000000e+00
// CHECK: nc.tensor_tensor %[[MASK:[0-9]+]], %[[OWN]], %[[OTHER]] {alu = "is_equal"
// CHECK: nc.iota %[[ONES:[0-9]+]] {base = 1.000000e+00
// CHECK: nc.iota %[[NEGINF:[0-9]+]] {base = 0xFFF0000000000000
// CHECK: nc.dma_load %arg1 -> %[[X:[0-9]+]] {ap = array<i64: 256, 64, 1, 256>, {{.*}}: memref<2x8192xf32>, memref<64x256xf32, 1>
// CHECK: nc.tensor_reduce %[[PART:[0-9]+]], %[[X]] {alu = "max"
// CHECK: nc.tensor_scalar %[[BCAST:[0-9]+]], %[[ONES]], %[[PART]] {alu = "mul"
// CHECK: nc.transpose %[[T:[0-9]+]], %[[BCAST]] {{.*}} : memref<64x64xf32, 2>, memref<64x64xf32, 1>
// CHECK: nc.tensor_select %[[KEPT:[0-9]+]], %[[T]], %[[NEGINF]], %[[MASK]]
// CHECK: nc.tensor_reduce %{{[0-9]+}}, %[[KEPT]] {alu = "max"
// CHECK: nc.activation {{.*}}func = "exp"
// CHECK: nc.transpose
// CHECK: nc.tensor_reduce %{{[0-9]+}}, %{{[0-9]+}} {alu = "add"
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 256, 64, 1, 256>, {{.*}}: memref<64x256xf32, 1>, memref<2x8192xf32>
//
// A per-row result is held by each of its row's 32 partitions: one of them
// stores it (partitions 0 and 32).
// CHECK: nc.kernel "k1_fused_sum_reshape"
// CHECK: nc.dma_store %[[SUM:[0-9]+]] -> %arg2 {ap = array<i64: 0, 1, 1, 1>, {{.*}}offset = 0 : i64, part_start = 0 : i64
// CHECK: nc.dma_store %[[SUM]] -> %arg2 {ap = array<i64: 0, 1, 1, 1>, {{.*}}offset = 1 : i64, part_start = 32 : i64
// CHECK-NOT: nc.dma_store
func.func @spread_softmax(%x: tensor<2x8192xf32>) -> (tensor<2x8192xf32>, tensor<2xf32>) {
  %m = aten.amax %x {dim = array<i64: -1>, keepdim = true} : tensor<2x8192xf32> -> tensor<2x1xf32>
  %d = aten.sub.Tensor %x, %m : tensor<2x8192xf32>, tensor<2x1xf32> -> tensor<2x8192xf32>
  %e = aten.exp %d : tensor<2x8192xf32> -> tensor<2x8192xf32>
  %s = aten.sum.dim_IntList %e {dim = array<i64: -1>, keepdim = true} : tensor<2x8192xf32> -> tensor<2x1xf32>
  %y = aten.div.Tensor %e, %s : tensor<2x8192xf32>, tensor<2x1xf32> -> tensor<2x8192xf32>
  %t = aten.sum.dim_IntList %x {dim = array<i64: -1>, keepdim = false} : tensor<2x8192xf32> -> tensor<2xf32>
  return %y, %t : tensor<2x8192xf32>, tensor<2xf32>
}

// More than 64 rows are not spread (each row keeps a partition of its own;
// a spread needs at least two per row), and neither is a row shorter than
// nc::kMinSpreadReduction.
// CHECK-LABEL: func.func @not_spread
// CHECK-NOT: nc.transpose
// CHECK: return
func.func @not_spread(%x: tensor<65x8192xf32>, %y: tensor<4x2000xf32>) -> (tensor<65x1xf32>, tensor<4x1xf32>) {
  %a = aten.sum.dim_IntList %x {dim = array<i64: -1>, keepdim = true} : tensor<65x8192xf32> -> tensor<65x1xf32>
  %b = aten.sum.dim_IntList %y {dim = array<i64: -1>, keepdim = true} : tensor<4x2000xf32> -> tensor<4x1xf32>
  return %a, %b : tensor<65x1xf32>, tensor<4x1xf32>
}

// More rows than DMA queues: the per-row values of 32 rows spread over 4
// partitions each are transposed onto one partition, every 4th kept, and
// stored in one transfer (a transfer a row paid the DMA's fixed cost 32
// times). 16 rows keep a store a row, side by side on the queues.
// CHECK-LABEL: func.func @spread_rows_stored_together
// CHECK: nc.kernel
// CHECK: nc.tensor_reduce %[[TOTAL:[0-9]+]], %{{[0-9]+}} {alu = "max"{{.*}}: memref<128x1xf32, 1>, memref<128x128xf32, 1>
// CHECK: nc.transpose %[[T:[0-9]+]], %[[TOTAL]] {{.*}}: memref<1x128xf32, 2>, memref<128x1xf32, 1>
// CHECK: %[[EVERY4:[0-9]+]] = nc.tile_columns %[[T]][0] {step = 4 : i64} : memref<1x128xf32, 2> -> memref<1x32xf32, 2>
// CHECK: nc.tensor_scalar %[[ROW:[0-9]+]], %[[EVERY4]] {alu = "mul"
// CHECK: nc.dma_store %[[ROW]] -> %arg{{[0-9]+}} {ap = array<i64: 0, 1, 1, 32>, {{.*}}offset = 0 : i64, part_start = 0 : i64{{.*}}: memref<1x32xf32, 1>, memref<32xf32>
// CHECK-NOT: nc.dma_store
// CHECK: nc.kernel
// CHECK-COUNT-16: nc.dma_store {{.*}} {ap = array<i64: 0, 1, 1, 1>
// CHECK-NOT: nc.dma_store
// CHECK: return
func.func @spread_rows_stored_together(%x: tensor<32x3000xf32>, %y: tensor<16x3000xf32>) -> (tensor<32xf32>, tensor<16xf32>) {
  %a = aten.amax %x {dim = array<i64: -1>, keepdim = false} : tensor<32x3000xf32> -> tensor<32xf32>
  %b = aten.sum.dim_IntList %y {dim = array<i64: -1>, keepdim = false} : tensor<16x3000xf32> -> tensor<16xf32>
  return %a, %b : tensor<32xf32>, tensor<16xf32>
}

// A lone reduction whose kept dims after the reduced ones are all 1 takes
// the space [kept..., reduced...], so that its one long column spreads: the
// sum over dim 0 of [52000, 1] held all 52000 elements on one partition
// (208 KB, more than SBUF has). 125 partitions of 416, loaded in pieces.
// CHECK-LABEL: func.func @reduced_column_spread
// CHECK: nc.dma_load %arg1 -> %[[X:[0-9]+]] {ap = array<i64: 416, 42, 1, 416>, {{.*}}: memref<52000x1xf32>, memref<125x416xf32, 1>
// CHECK: nc.tensor_reduce %{{[0-9]+}}, %[[X]] {alu = "add"
// CHECK: return
func.func @reduced_column_spread(%x: tensor<52000x1xf32>) -> tensor<1x1xf32> {
  %a = aten.sum.dim_IntList %x {dim = array<i64: 0>, keepdim = true} : tensor<52000x1xf32> -> tensor<1x1xf32>
  return %a : tensor<1x1xf32>
}
