// Column blocks of even width (the column blocks of passes/LowerToIsa.cpp).
// x [256 x 1408] @ W.t() with W [3072 x 1408]: 2 row tiles, 6 column tiles
// of 512, 11 k slices (22 KiB a partition of kept moving slices per column
// tile: five fit the 128 KiB of a block). Two blocks of three, not five and
// one: a block of one column tile would load the stationary slices of every
// row tile again for a sixth of the TensorEngine work.
//
// The output tiles in the order they are stored (partition 0's piece of
// each): block 1 is columns 0-1535 of both row tiles, block 2 the rest.
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa | FileCheck %s
// CHECK-LABEL: func.func @even_blocks
// CHECK: nc.dma_store {{.*}} offset = 0 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 512 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 1024 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 393216 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 393728 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 394240 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 1536 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 2048 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 2560 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 394752 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 395264 : i64, part_start = 0 :
// CHECK: nc.dma_store {{.*}} offset = 395776 : i64, part_start = 0 :
// CHECK-NOT: nc.dma_store {{.*}} part_start = 0 :
func.func @even_blocks(%x: tensor<256x1408xf32>, %w: tensor<3072x1408xf32>) -> tensor<256x3072xf32> {
  %t = aten.t %w : tensor<3072x1408xf32> -> tensor<1408x3072xf32>
  %y = aten.mm %x, %t : tensor<256x1408xf32>, tensor<1408x3072xf32> -> tensor<256x3072xf32>
  return %y : tensor<256x3072xf32>
}
