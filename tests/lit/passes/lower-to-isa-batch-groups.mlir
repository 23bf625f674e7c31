// Batch groups (passes/LowerMatmul.cpp, groupSmallBatches): a bmm of 32 or
// more small matrices (M <= 64, N <= 128, K <= 1024) takes g whole batches a
// row tile, g = min(128 / M, 512 / N, batches / 8). Each operand is loaded for
// the group at once, as [K x g*n] with batch i at columns i*n: directly
// (B below: partition k, then batches, then n), or in rows and transposed
// where k alone is contiguous (A below; and the rows of a sliced, transposed
// B, whose batch stride does not continue its row stride: two partition
// dims). Each batch's product is computed transposed into columns of one
// [N x g*M] PSUM bank, copied out in f32 and transposed once, so that the
// group's rows are one [g*M x N] row tile, stored with one DMA.
// RUN: neuron-opt %s --ncc-form-kernels=fuse=true --ncc-lower-to-isa | FileCheck %s

// 64 batches of [16 x 16] @ [16 x 16]: 8 groups of 8 batches. (Smaller
// matrices run a batch per partition: lower-to-isa-small-products.mlir.)
// CHECK-LABEL: func.func @groups
// CHECK: %[[AROWS:.*]] = nc.alloc_tile {{.*}} : memref<128x16xf32, 1>
// CHECK: nc.dma_load %{{.*}} -> %[[AROWS]] {ap = array<i64: 16, 128, 1, 16>, {{.*}}offset = 0 : i64
// CHECK: %[[AT:.*]] = nc.alloc_psum : memref<16x128xf32, 2>
// CHECK: nc.transpose %[[AT]], %[[AROWS]]
// CHECK: %[[A:.*]] = nc.alloc_tile {{.*}} : memref<16x128xf32, 1>
// CHECK: nc.tensor_scalar %[[A]], %[[AT]]
// CHECK: %[[B:.*]] = nc.alloc_tile {{.*}} : memref<16x128xf32, 1>
// CHECK: nc.dma_load %{{.*}} -> %[[B]] {ap = array<i64: 16, 16, 256, 8, 1, 16>, {{.*}}offset = 0 : i64
// CHECK: %[[PRODUCTS:.*]] = nc.alloc_psum : memref<16x128xf32, 2>
// CHECK: %[[A0:.*]] = nc.tile_columns %[[A]][0] : memref<16x128xf32, 1> -> memref<16x16xf32, 1>
// CHECK: %[[B0:.*]] = nc.tile_columns %[[B]][0] : memref<16x128xf32, 1> -> memref<16x16xf32, 1>
// CHECK: %[[P0:.*]] = nc.tile_columns %[[PRODUCTS]][0] : memref<16x128xf32, 2> -> memref<16x16xf32, 2>
// CHECK: nc.matmul %[[P0]], %[[B0]], %[[A0]]
// CHECK: %[[A7:.*]] = nc.tile_columns %[[A]][112]
// CHECK: %[[B7:.*]] = nc.tile_columns %[[B]][112]
// CHECK: %[[P7:.*]] = nc.tile_columns %[[PRODUCTS]][112]
// CHECK: nc.matmul %[[P7]], %[[B7]], %[[A7]]
// CHECK-NOT: nc.matmul
// CHECK: %[[COPIED:.*]] = nc.alloc_tile {{.*}} : memref<16x128xf32, 1>
// CHECK: nc.tensor_scalar %[[COPIED]], %[[PRODUCTS]]
// CHECK: %[[ROWS:.*]] = nc.alloc_psum : memref<128x16xf32, 2>
// CHECK: nc.transpose %[[ROWS]], %[[COPIED]]
// CHECK: %[[OUT:.*]] = nc.alloc_tile {{.*}} : memref<128x16xf32, 1>
// CHECK: nc.tensor_scalar %[[OUT]], %[[ROWS]]
// CHECK: nc.dma_store %[[OUT]] -> %{{.*}} {ap = array<i64: 16, 128, 1, 16>, {{.*}}offset = 0 : i64
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 16, 128, 1, 16>, {{.*}}offset = 2048 : i64
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 16, 16, 256, 8, 1, 16>, {{.*}}offset = 2048 : i64
// CHECK: nc.dma_store %{{.*}} {ap = array<i64: 16, 128, 1, 16>, {{.*}}offset = 2048 : i64
func.func @groups(%a: tensor<64x16x16xf32>, %b: tensor<64x16x16xf32>) -> tensor<64x16x16xf32> {
  %y = aten.bmm %a, %b : tensor<64x16x16xf32>, tensor<64x16x16xf32> -> tensor<64x16x16xf32>
  return %y : tensor<64x16x16xf32>
}

// B = b[:, :20].transpose(1, 2): k contiguous, loaded in rows, partition
// (i, n) at i * 384 + n * 16 for the group's 6 batches.
// CHECK-LABEL: func.func @rows
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 384, 6, 16, 20, 1, 16>, {{.*}}offset = 0 : i64, {{.*}}partition_dims = 2 : i64{{.*}} : memref<48x24x16xf32>, memref<120x16xf32, 1>
// CHECK: nc.transpose %{{.*}}, %{{.*}} : memref<16x120xf32, 2>, memref<120x16xf32, 1>
// CHECK-COUNT-6: nc.matmul %{{.*}} : memref<20x8xf32, 2>, memref<16x20xf32, 1>, memref<16x8xf32, 1>
// CHECK: nc.transpose %{{.*}}, %{{.*}} : memref<48x20xf32, 2>, memref<20x48xf32, 1>
// CHECK: nc.dma_store %{{.*}} {ap = array<i64: 20, 48, 1, 20>, {{.*}}offset = 0 : i64
func.func @rows(%a: tensor<48x8x16xf32>, %b: tensor<48x24x16xf32>) -> tensor<48x8x20xf32> {
  %s = aten.slice.Tensor %b {dim = 1 : i64, start = 0 : i64, end = 20 : i64, step = 1 : i64} : tensor<48x24x16xf32> -> tensor<48x20x16xf32>
  %t = aten.transpose.int %s {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<48x20x16xf32> -> tensor<48x16x20xf32>
  %y = aten.bmm %a, %t : tensor<48x8x16xf32>, tensor<48x16x20xf32> -> tensor<48x8x20xf32>
  return %y : tensor<48x8x20xf32>
}

// K = 200 in two slices: the group's rows of A are loaded whole, once, and
// transposed slice by slice (columns [0, 128) and [128, 200)); B's slices
// load directly, in pieces of partitions; each batch's second matmul
// accumulates into its columns. (With N = 4, a batch per partition is
// estimated the shorter: lower-to-isa-small-products.mlir.)
// CHECK-LABEL: func.func @slices
// CHECK: %[[ROWS:.*]] = nc.alloc_tile {{.*}} : memref<32x200xf32, 1>
// CHECK: nc.dma_load %{{.*}} -> %[[ROWS]] {ap = array<i64: 200, 32, 1, 200>
// CHECK: %[[FIRST:.*]] = nc.tile_columns %[[ROWS]][0] : memref<32x200xf32, 1> -> memref<32x128xf32, 1>
// CHECK: nc.transpose %{{.*}}, %[[FIRST]] {{.*}}: memref<128x32xf32, 2>, memref<32x128xf32, 1>
// CHECK: %[[SECOND:.*]] = nc.tile_columns %[[ROWS]][128] : memref<32x200xf32, 1> -> memref<32x72xf32, 1>
// CHECK: nc.transpose %{{.*}}, %[[SECOND]] {{.*}}: memref<72x32xf32, 2>, memref<32x72xf32, 1>
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 32, 16, 6400, 8, 1, 32>, {{.*}}offset = 0 : i64, part_start = 0 : i64
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 32, 15, 6400, 8, 1, 32>, {{.*}}offset = 4096 : i64, part_start = 0 : i64
// CHECK: nc.matmul %{{.*}} : memref<32x4xf32, 2>, memref<128x32xf32, 1>, memref<128x4xf32, 1>
// CHECK: nc.matmul %{{.*}} {accumulate = true, {{.*}} : memref<32x4xf32, 2>, memref<72x32xf32, 1>, memref<72x4xf32, 1>
func.func @slices(%a: tensor<64x4x200xf32>, %b: tensor<64x200x32xf32>) -> tensor<64x4x32xf32> {
  %y = aten.bmm %a, %b : tensor<64x4x200xf32>, tensor<64x200x32xf32> -> tensor<64x4x32xf32>
  return %y : tensor<64x4x32xf32>
}

// 16 batches run one by one: a row tile, a matmul and a store each.
// CHECK-LABEL: func.func @few
// CHECK-NOT: nc.alloc_psum : memref<16x{{[0-9][0-9][0-9]+}}xf32, 2>
// CHECK-COUNT-16: nc.matmul %{{.*}} : memref<16x16xf32, 2>, memref<16x16xf32, 1>, memref<16x16xf32, 1>
// CHECK-NOT: nc.matmul
func.func @few(%a: tensor<16x16x16xf32>, %b: tensor<16x16x16xf32>) -> tensor<16x16x16xf32> {
  %y = aten.bmm %a, %b : tensor<16x16x16xf32>, tensor<16x16x16xf32> -> tensor<16x16x16xf32>
  return %y : tensor<16x16x16xf32>
}
