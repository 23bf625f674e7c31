// The first two row tiles of a column block run column tile by column tile
// (the column blocks of passes/LowerToIsa.cpp): the first row tile's matmuls
// wait for each of the block's moving panels in turn, and the second row
// tile works on every panel already loaded while the next ones arrive.
//
// x [384 x 256] @ W [256 x 1536] (W read directly, K-major): 3 row tiles,
// 3 column tiles of 512, one block. The output tiles in the order they are
// stored (partition 0's piece of each): (row 0, col 0), (row 1, col 0),
// (row 0, col 1), (row 1, col 1), ..., then row 2's column tiles in turn.
// W is loaded once (12 pieces), x once per row tile (3 panels: the second
// row tile's slices are kept while the two row tiles alternate).
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa | FileCheck %s
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa | grep -c "dma_load.*memref<256x1536xf32>" | FileCheck %s --check-prefix=N12
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa | grep -c "dma_load.*memref<384x256xf32>" | FileCheck %s --check-prefix=N6
// N12: {{^}}12{{$}}
// N6: {{^}}6{{$}}
// CHECK-LABEL: func.func @paired
// CHECK: nc.dma_store {{.*}} offset = 0 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 196608 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 512 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 197120 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 1024 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 197632 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 393216 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 393728 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 394240 : i64, part_start = 0 :
// CHECK-NOT: nc.dma_store {{.*}} part_start = 0 :
// CHECK-LABEL: func.func @in_rows
func.func @paired(%x: tensor<384x256xf32>, %w: tensor<256x1536xf32>) -> tensor<384x1536xf32> {
  %y = aten.mm %x, %w : tensor<384x256xf32>, tensor<256x1536xf32> -> tensor<384x1536xf32>
  return %y : tensor<384x1536xf32>
}

// A moving operand read in rows (an nn.Linear weight under .t()) is
// transposed on the TensorEngine by the first row tile, which so has work
// for every panel it waits for: the row tiles keep their order.
// CHECK: nc.dma_store {{.*}} offset = 0 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 512 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 1024 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 196608 : i64, part_start = 0 :
// CHECK-LABEL: func.func @batched
func.func @in_rows(%x: tensor<384x256xf32>, %w: tensor<1536x256xf32>) -> tensor<384x1536xf32> {
  %t = aten.t %w : tensor<1536x256xf32> -> tensor<256x1536xf32>
  %y = aten.mm %x, %t : tensor<384x256xf32>, tensor<256x1536xf32> -> tensor<384x1536xf32>
  return %y : tensor<384x1536xf32>
}

// A bmm's moving slices belong to one batch: the pairs are the first two
// row tiles of each batch (output [2 x 256 x 1024], a batch every 262144
// elements).
// CHECK: nc.dma_store {{.*}} offset = 0 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 131072 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 512 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 131584 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 262144 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 393216 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 262656 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 393728 : i64, part_start = 0 :
// CHECK-NOT: nc.dma_store {{.*}} part_start = 0 :
func.func @batched(%x: tensor<2x256x64xf32>, %w: tensor<2x64x1024xf32>) -> tensor<2x256x1024xf32> {
  %y = aten.bmm %x, %w : tensor<2x256x64xf32>, tensor<2x64x1024xf32> -> tensor<2x256x1024xf32>
  return %y : tensor<2x256x1024xf32>
}
