// A cat of a slice of a value the kernel computes (a scan's step: the running
// sums shifted by one column, a zero before them) copies the slice's columns
// from that value's tile, so the kernel holds whole rows in one column tile
// even where its column chunk is shorter (passes/LowerToIsa.cpp,
// catReadsComputedRows; here a chunk of 256 against rows of 1000): the pad
// column is written by iota, the slice copied from the exp's tile at column
// 0 into columns 1.. of the cat's tile, then added.
// RUN: neuron-opt %s --ncc-form-kernels=fuse=true "--ncc-lower-to-isa=max-free-elements=256 few-bytes=0" | FileCheck %s
// CHECK-LABEL: func.func @shifted_computed_rows
// CHECK: nc.kernel "k0_fused_exp_slice_cat_add"
// CHECK: %[[X:.*]] = nc.alloc_tile {{.*}} : memref<8x1000xf32, 1>
// CHECK: nc.dma_load {{.*}} -> %[[X]] {ap = array<i64: 1000, 8, 1, 1000>
// CHECK: %[[E:.*]] = nc.alloc_tile {{.*}} : memref<8x1000xf32, 1>
// CHECK-NEXT: nc.activation %[[E]], %[[X]] {{.*}}func = "exp"
// CHECK: %[[C:.*]] = nc.alloc_tile {{.*}} : memref<8x1000xf32, 1>
// CHECK-NEXT: %[[PAD:.*]] = nc.tile_columns %[[C]][0] {{.*}} -> memref<8x1xf32, 1>
// CHECK-NEXT: nc.iota %[[PAD]]
// CHECK-NEXT: %[[FROM:.*]] = nc.tile_columns %[[E]][0] {{.*}} -> memref<8x999xf32, 1>
// CHECK-NEXT: %[[TO:.*]] = nc.tile_columns %[[C]][1] {{.*}} -> memref<8x999xf32, 1>
// CHECK-NEXT: nc.tensor_scalar %[[TO]], %[[FROM]]
// CHECK: nc.tensor_tensor %{{.*}}, %[[C]], %[[E]] {alu = "add"
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 1000, 8, 1, 1000>
// CHECK-NOT: nc.dma_load
func.func @shifted_computed_rows(%x: tensor<8x1000xf32>) -> tensor<8x1000xf32> {
  %zero = arith.constant dense<0.0> : tensor<8x1xf32>
  %e = aten.exp %x : tensor<8x1000xf32> -> tensor<8x1000xf32>
  %s = aten.slice.Tensor %e {dim = 1 : i64, start = 0 : i64, end = 999 : i64, step = 1 : i64} : tensor<8x1000xf32> -> tensor<8x999xf32>
  %c = aten.cat %zero, %s {dim = 1 : i64} : tensor<8x1xf32>, tensor<8x999xf32> -> tensor<8x1000xf32>
  %y = aten.add.Tensor %c, %e : tensor<8x1000xf32>, tensor<8x1000xf32> -> tensor<8x1000xf32>
  return %y : tensor<8x1000xf32>
}
