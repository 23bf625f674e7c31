// A pad over H and W is two cats: along W, then along H of that. At -O2 the
// copy kernel of the outer cat takes the inner one in (ncc-form-kernels,
// nestedCatGroup) and assembles its rows in SBUF (passes/LowerToIsa.cpp,
// lowerCat and assembleNestedCat): each [2, 64] plane on a partition, the
// tile of its 6 padded rows [128 x 60] filled with the pad value by one
// iota, the input's rows loaded in one run of 48 per partition and copied
// row by row into columns [1 + 10 j, 9 + 10 j), the tile stored once; the
// outer cat's splat rows are filled, not loaded.
// RUN: neuron-opt %s --split-input-file --ncc-form-kernels=fuse=true --ncc-lower-to-isa=few-bytes=0 | FileCheck %s
// RUN: neuron-opt %s --split-input-file --ncc-form-kernels=fuse=true | FileCheck %s --check-prefix=KERNELS
// KERNELS-LABEL: func.func @padded_planes
// KERNELS: nc.kernel "k0_fused_cat"
// KERNELS-NOT: nc.kernel
// KERNELS: return
// CHECK-LABEL: func.func @padded_planes
// CHECK-NOT: nc.dma_load %arg1
// CHECK-NOT: nc.dma_load %arg3
// CHECK: %[[TILE:.*]] = nc.alloc_tile {{.*}} : memref<128x60xf32, 1>
// CHECK-NEXT: nc.iota %[[TILE]]
// CHECK-NEXT: %[[ROWS:.*]] = nc.alloc_tile {{.*}} : memref<128x48xf32, 1>
// CHECK-NEXT: nc.dma_load %arg2 -> %[[ROWS]] {ap = array<i64: 48, 128, 1, 48>
// CHECK: nc.tile_columns %[[TILE]][1] : memref<128x60xf32, 1> -> memref<128x8xf32, 1>
// CHECK: nc.tile_columns %[[ROWS]][40] : memref<128x48xf32, 1> -> memref<128x8xf32, 1>
// CHECK-NEXT: %[[LAST:.*]] = nc.tile_columns %[[TILE]][51] : memref<128x60xf32, 1> -> memref<128x8xf32, 1>
// CHECK-NEXT: nc.tensor_scalar %[[LAST]]
// CHECK-NEXT: nc.dma_store %[[TILE]] -> %{{.*}} {ap = array<i64: 80, 128, 1, 60>, {{.*}}offset = 10 : i64
// CHECK-NOT: nc.dma_load
// CHECK: return
func.func @padded_planes(%x: tensor<2x64x6x8xf32>) -> tensor<2x64x8x10xf32> {
  %zw = arith.constant dense<0.0> : tensor<2x64x6x1xf32>
  %zh = arith.constant dense<0.0> : tensor<2x64x1x10xf32>
  %w = aten.cat %zw, %x, %zw {dim = 3 : i64} : tensor<2x64x6x1xf32>, tensor<2x64x6x8xf32>, tensor<2x64x6x1xf32> -> tensor<2x64x6x10xf32>
  %h = aten.cat %zh, %w, %zh {dim = 2 : i64} : tensor<2x64x1x10xf32>, tensor<2x64x6x10xf32>, tensor<2x64x1x10xf32> -> tensor<2x64x8x10xf32>
  return %h : tensor<2x64x8x10xf32>
}

// -----

// An inner cat that something else reads too is stored: two kernels.
// KERNELS-LABEL: func.func @inner_read_twice
// KERNELS: nc.kernel "k0_cat"
// KERNELS: nc.kernel "k1_cat"
func.func @inner_read_twice(%x: tensor<2x64x6x8xf32>) -> (tensor<2x64x8x10xf32>, tensor<2x64x6x10xf32>) {
  %zw = arith.constant dense<0.0> : tensor<2x64x6x1xf32>
  %zh = arith.constant dense<0.0> : tensor<2x64x1x10xf32>
  %w = aten.cat %zw, %x, %zw {dim = 3 : i64} : tensor<2x64x6x1xf32>, tensor<2x64x6x8xf32>, tensor<2x64x6x1xf32> -> tensor<2x64x6x10xf32>
  %h = aten.cat %zh, %w, %zh {dim = 2 : i64} : tensor<2x64x1x10xf32>, tensor<2x64x6x10xf32>, tensor<2x64x1x10xf32> -> tensor<2x64x8x10xf32>
  return %h, %w : tensor<2x64x8x10xf32>, tensor<2x64x6x10xf32>
}

// -----

// Not nested: an inner cat along an earlier dim than the outer one's.
// KERNELS-LABEL: func.func @inner_along_an_earlier_dim
// KERNELS: nc.kernel "k0_cat"
// KERNELS: nc.kernel "k1_cat"
func.func @inner_along_an_earlier_dim(%x: tensor<2x64x6x8xf32>) -> tensor<2x64x8x9xf32> {
  %zh = arith.constant dense<0.0> : tensor<2x64x1x8xf32>
  %h = aten.cat %zh, %x, %zh {dim = 2 : i64} : tensor<2x64x1x8xf32>, tensor<2x64x6x8xf32>, tensor<2x64x1x8xf32> -> tensor<2x64x8x8xf32>
  %zw = arith.constant dense<0.0> : tensor<2x64x8x1xf32>
  %w = aten.cat %h, %zw {dim = 3 : i64} : tensor<2x64x8x8xf32>, tensor<2x64x8x1xf32> -> tensor<2x64x8x9xf32>
  return %w : tensor<2x64x8x9xf32>
}

