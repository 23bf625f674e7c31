// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa=few-bytes=0 | FileCheck %s

// An elementwise kernel computes the same elements over any dims, so dims
// that every value steps through as one are merged before short rows are
// packed (mergeChainedDims, passes/LowerToIsa.cpp). [32768, 2, 2] bf16
// runs as [65536, 2] rows, 64 to a partition: 8 row tiles of [128 x 128]
// in runs of 256 bytes (it had packed the two rows of dim 1: 256 row
// tiles of [128 x 4], 8-byte runs).
// CHECK-LABEL: func.func @contiguous
// CHECK-NOT: memref<128x4xbf16, 1>
// CHECK: nc.dma_load {{.*}}ap = array<i64: 128, 128, 1, 128>{{.*}}memref<32768x2x2xbf16>, memref<128x128xbf16, 1>
// CHECK: nc.activation {{.*}}func = "sigmoid"{{.*}}memref<128x128xbf16, 1>
// CHECK: nc.dma_store {{.*}}ap = array<i64: 128, 128, 1, 128>{{.*}}memref<128x128xbf16, 1>, memref<32768x2x2xbf16>
// CHECK-NOT: memref<128x4xbf16, 1>
// CHECK: return
func.func @contiguous(%x: tensor<32768x2x2xbf16>) -> tensor<32768x2x2xbf16> {
  %s = aten.sigmoid %x : tensor<32768x2x2xbf16> -> tensor<32768x2x2xbf16>
  %y = aten.mul.Tensor %x, %s : tensor<32768x2x2xbf16>, tensor<32768x2x2xbf16> -> tensor<32768x2x2xbf16>
  return %y : tensor<32768x2x2xbf16>
}

// A bias over the last two dims breaks the chain between dims 0 and 1 but
// not between 1 and 2: the rows are [32768 x 4], packed 32 to a partition,
// the bias loaded once as four columns and doubled across the tile.
// CHECK-LABEL: func.func @bias
// CHECK: nc.dma_load {{.*}}ap = array<i64: 128, 128, 1, 128>{{.*}}memref<32768x2x2xbf16>, memref<128x128xbf16, 1>
// CHECK: nc.dma_load {{.*}}ap = array<i64: 0, 128, 1, 4>{{.*}}memref<2x2xbf16>, memref<128x4xbf16, 1>
// CHECK: nc.tensor_tensor {{.*}}alu = "add"{{.*}}memref<128x128xbf16, 1>
// CHECK: nc.dma_store {{.*}}ap = array<i64: 128, 128, 1, 128>{{.*}}memref<128x128xbf16, 1>, memref<32768x2x2xbf16>
// CHECK: return
func.func @bias(%x: tensor<32768x2x2xbf16>, %b: tensor<2x2xbf16>) -> tensor<32768x2x2xbf16> {
  %y = aten.add.Tensor %x, %b : tensor<32768x2x2xbf16>, tensor<2x2xbf16> -> tensor<32768x2x2xbf16>
  return %y : tensor<32768x2x2xbf16>
}

// A value constant along the columns that varies along dim 1 chains with
// neither neighbour: no dims merge; dim 1 moves onto the columns
// (widenShortRows, lower-to-isa-widened-rows.mlir) and the rows of dim 0
// interleave, 32 to a partition in one run; the value loads its 2 values
// once, widened on chip.
// CHECK-LABEL: func.func @middle
// CHECK: nc.dma_load {{.*}}ap = array<i64: 128, 128, 1, 128>{{.*}}memref<32768x2x2xbf16>, memref<128x128xbf16, 1>
// CHECK: nc.dma_load {{.*}}ap = array<i64: 0, 128, 1, 2>{{.*}}memref<2x1xbf16>, memref<128x2xbf16, 1>
// CHECK-NOT: memref<2x1xbf16>, memref
// CHECK: return
func.func @middle(%x: tensor<32768x2x2xbf16>, %b: tensor<2x1xbf16>) -> tensor<32768x2x2xbf16> {
  %y = aten.add.Tensor %x, %b : tensor<32768x2x2xbf16>, tensor<2x1xbf16> -> tensor<32768x2x2xbf16>
  return %y : tensor<32768x2x2xbf16>
}

// A scalar per row over [32768, 2, 2] chains onto the rows (dims 0 and 1
// merge: 65536 rows of 2) and packs too, 64 rows a partition: its 64
// values are one run per partition, copied into the two columns of their
// rows by stepped copies (C = 2 <= g), and the product is one instruction
// over the packed tile.
// CHECK-LABEL: func.func @per_row
// CHECK: nc.dma_load {{.*}}ap = array<i64: 128, 128, 1, 128>{{.*}}memref<32768x2x2xbf16>, memref<128x128xbf16, 1>
// CHECK: nc.dma_load %{{.*}} -> %[[S:.*]] {ap = array<i64: 64, 128, 1, 64>{{.*}}memref<32768x2x1xbf16>, memref<128x64xbf16, 1>
// CHECK: %[[C0:.*]] = nc.tile_columns %[[W:.*]][0] {step = 2 : i64}
// CHECK: nc.tensor_scalar %[[C0]], %[[S]]
// CHECK: %[[C1:.*]] = nc.tile_columns %[[W]][1] {step = 2 : i64}
// CHECK: nc.tensor_scalar %[[C1]], %[[S]]
// CHECK: nc.tensor_tensor %{{.*}}, %{{.*}}, %[[W]] {alu = "mul"{{.*}}memref<128x128xbf16, 1>
// CHECK: return
func.func @per_row(%x: tensor<32768x2x2xbf16>, %s: tensor<32768x2x1xbf16>) -> tensor<32768x2x2xbf16> {
  %y = aten.mul.Tensor %x, %s : tensor<32768x2x2xbf16>, tensor<32768x2x1xbf16> -> tensor<32768x2x2xbf16>
  return %y : tensor<32768x2x2xbf16>
}
