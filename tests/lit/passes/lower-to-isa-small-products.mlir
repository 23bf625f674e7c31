// Products on partitions (passes/LowerMatmul.cpp, productsOnPartitions): a
// bmm of small matrices whose TensorEngine lowering is estimated to be bound
// by its transfers (a DMA a batch or batch group and operand, a descriptor
// per short row) runs a batch per partition instead: the rows are the
// batches, the columns a batch's [M x N] product. Each operand's matrices
// load as one run a partition, and stepped column views feed the vector
// engines: by columns (a multiply per k and n over M elements, accumulated
// in f32, the last add rounded into the result), by rows (per k and m over
// N), or by dot products (per m and n: a product over K and its sum),
// whichever the engine cycles favour.
// RUN: neuron-opt %s --ncc-form-kernels=fuse=true --ncc-lower-to-isa=few-bytes=0 | FileCheck %s

// 100 batches of [128 x 4] @ [4 x 4], by columns: A's 512 elements a
// partition in 8 pieces, B's 16 at once; column n of the product (step 4)
// is A's column k (step 4) times B[k, n], k = 0..3.
// CHECK-LABEL: func.func @columns
// CHECK: %[[A:.*]] = nc.alloc_tile {{.*}} : memref<100x512xf32, 1>
// CHECK: nc.dma_load %{{.*}} -> %[[A]] {ap = array<i64: 512, 13, 1, 512>, {{.*}}offset = 0 : i64, part_start = 0 : i64
// CHECK: nc.dma_load %{{.*}} -> %[[A]] {ap = array<i64: 512, 9, 1, 512>, {{.*}}offset = 46592 : i64, part_start = 91 : i64
// CHECK: %[[B:.*]] = nc.alloc_tile {{.*}} : memref<100x16xf32, 1>
// CHECK: nc.dma_load %{{.*}} -> %[[B]] {ap = array<i64: 16, 100, 1, 16>
// CHECK: %[[OUT:.*]] = nc.alloc_tile {{.*}} : memref<100x512xf32, 1>
// CHECK: %[[COL0:.*]] = nc.tile_columns %[[OUT]][0] {step = 4 : i64} : memref<100x512xf32, 1> -> memref<100x128xf32, 1>
// CHECK: %[[SUM:.*]] = nc.alloc_tile {{.*}} : memref<100x128xf32, 1>
// CHECK: %[[B00:.*]] = nc.tile_columns %[[B]][0] : memref<100x16xf32, 1> -> memref<100x1xf32, 1>
// CHECK: %[[A0:.*]] = nc.tile_columns %[[A]][0] {step = 4 : i64} : memref<100x512xf32, 1> -> memref<100x128xf32, 1>
// CHECK: nc.tensor_scalar %[[SUM]], %[[A0]], %[[B00]] {alu = "mul"
// CHECK: %[[B10:.*]] = nc.tile_columns %[[B]][4] : memref<100x16xf32, 1> -> memref<100x1xf32, 1>
// CHECK: %[[A1:.*]] = nc.tile_columns %[[A]][1] {step = 4 : i64}
// CHECK: nc.tensor_scalar %[[P1:.*]], %[[A1]], %[[B10]] {alu = "mul"
// CHECK: nc.tensor_tensor %[[SUM]], %[[SUM]], %[[P1]] {alu = "add"
// CHECK: nc.tile_columns %[[B]][12]
// CHECK: nc.tensor_tensor %[[COL0]], %[[SUM]], %{{.*}} {alu = "add"
// CHECK: nc.tile_columns %[[OUT]][3] {step = 4 : i64}
// CHECK-NOT: nc.matmul
// CHECK: nc.dma_store %[[OUT]] -> %{{.*}} {ap = array<i64: 512, 34, 1, 512>, {{.*}}offset = 0 : i64, part_start = 0 : i64
func.func @columns(%a: tensor<100x128x4xf32>, %b: tensor<100x4x4xf32>) -> tensor<100x128x4xf32> {
  %y = aten.bmm %a, %b : tensor<100x128x4xf32>, tensor<100x4x4xf32> -> tensor<100x128x4xf32>
  return %y : tensor<100x128x4xf32>
}

// 1024 batches of [4 x 16] @ [16 x 4] in 8 row tiles of 128 batches, by dot
// products: row m of A (16 contiguous columns) times column n of B (step
// 4) into f32, summed into element (m, n) of the bf16 product.
// CHECK-LABEL: func.func @dots
// CHECK: %[[A:.*]] = nc.alloc_tile {{.*}} : memref<128x64xbf16, 1>
// CHECK: nc.dma_load %{{.*}} -> %[[A]] {ap = array<i64: 64, 128, 1, 64>
// CHECK: %[[B:.*]] = nc.alloc_tile {{.*}} : memref<128x64xbf16, 1>
// CHECK: nc.dma_load %{{.*}} -> %[[B]] {ap = array<i64: 64, 128, 1, 64>
// CHECK: %[[OUT:.*]] = nc.alloc_tile {{.*}} : memref<128x16xbf16, 1>
// CHECK: %[[P:.*]] = nc.alloc_tile {{.*}} : memref<128x16xf32, 1>
// CHECK: %[[COLUMN:.*]] = nc.tile_columns %[[B]][0] {step = 4 : i64} : memref<128x64xbf16, 1> -> memref<128x16xbf16, 1>
// CHECK: %[[ROW:.*]] = nc.tile_columns %[[A]][0] : memref<128x64xbf16, 1> -> memref<128x16xbf16, 1>
// CHECK: nc.tensor_tensor %[[P]], %[[ROW]], %[[COLUMN]] {alu = "mul"
// CHECK: %[[E:.*]] = nc.tile_columns %[[OUT]][0] : memref<128x16xbf16, 1> -> memref<128x1xbf16, 1>
// CHECK: nc.tensor_reduce %[[E]], %[[P]] {alu = "add"
// CHECK: nc.tile_columns %[[B]][1] {step = 4 : i64}
// CHECK: nc.tile_columns %[[A]][0] :
// CHECK: nc.tile_columns %[[OUT]][1] :
// CHECK: nc.tile_columns %[[A]][48] :
// CHECK: nc.tile_columns %[[OUT]][15] :
// CHECK: nc.tensor_reduce
// CHECK: nc.dma_store %[[OUT]] -> %{{.*}} {ap = array<i64: 16, 128, 1, 16>, {{.*}}offset = 0 : i64
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 64, 128, 1, 64>, {{.*}}offset = 8192 : i64
// CHECK-NOT: nc.matmul
// CHECK: nc.dma_store %{{.*}} {ap = array<i64: 16, 128, 1, 16>, {{.*}}offset = 14336 : i64
func.func @dots(%a: tensor<1024x4x16xbf16>, %b: tensor<1024x16x4xbf16>) -> tensor<1024x4x4xbf16> {
  %y = aten.bmm %a, %b : tensor<1024x4x16xbf16>, tensor<1024x16x4xbf16> -> tensor<1024x4x4xbf16>
  return %y : tensor<1024x4x4xbf16>
}

// A transposed operand loads as the span its matrix lies in: A's column k
// is then 128 contiguous columns.
// CHECK-LABEL: func.func @transposed
// CHECK: %[[A:.*]] = nc.alloc_tile {{.*}} : memref<100x512xf32, 1>
// CHECK: nc.dma_load %{{.*}} -> %[[A]] {ap = array<i64: 512, 13, 1, 512>
// CHECK: nc.tile_columns %[[A]][0] : memref<100x512xf32, 1> -> memref<100x128xf32, 1>
// CHECK: nc.tile_columns %[[A]][128] : memref<100x512xf32, 1> -> memref<100x128xf32, 1>
func.func @transposed(%a: tensor<100x4x128xf32>, %b: tensor<100x4x4xf32>) -> tensor<100x128x4xf32> {
  %t = aten.transpose.int %a {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<100x4x128xf32> -> tensor<100x128x4xf32>
  %y = aten.bmm %t, %b : tensor<100x128x4xf32>, tensor<100x4x4xf32> -> tensor<100x128x4xf32>
  return %y : tensor<100x128x4xf32>
}

// A slice of longer rows: its span (2036 elements) costs less than its 128
// runs of 4, so it loads whole and A's column k steps by 16 from column k.
// CHECK-LABEL: func.func @sliced
// CHECK: %[[A:.*]] = nc.alloc_tile {{.*}} : memref<100x2036xf32, 1>
// CHECK: nc.dma_load %{{.*}} -> %[[A]] {ap = array<i64: 2048, 13, 1, 2036>, {{.*}}offset = 1 : i64
// CHECK: nc.tile_columns %[[A]][0] {step = 16 : i64} : memref<100x2036xf32, 1> -> memref<100x128xf32, 1>
// CHECK: nc.tile_columns %[[A]][1] {step = 16 : i64} : memref<100x2036xf32, 1> -> memref<100x128xf32, 1>
func.func @sliced(%a: tensor<100x128x16xf32>, %b: tensor<100x4x4xf32>) -> tensor<100x128x4xf32> {
  %s = aten.slice.Tensor %a {dim = 2 : i64, start = 1 : i64, end = 5 : i64, step = 1 : i64} : tensor<100x128x16xf32> -> tensor<100x128x4xf32>
  %y = aten.bmm %s, %b : tensor<100x128x4xf32>, tensor<100x4x4xf32> -> tensor<100x128x4xf32>
  return %y : tensor<100x128x4xf32>
}

// An epilogue over the product runs on the same [batches x M*N] tiles; its
// bias, broadcast over the batches, loads as a row of 512 columns.
// CHECK-LABEL: func.func @epilogue
// CHECK-NOT: nc.matmul
// CHECK: %[[BIAS:.*]] = nc.alloc_tile {{.*}} : memref<100x512xf32, 1>
// CHECK: nc.dma_load %{{.*}} -> %[[BIAS]] {ap = array<i64: 0, 34, 1, 512>
// CHECK: nc.tensor_tensor %[[SUM:.*]], %{{.*}}, %[[BIAS]] {alu = "add"
// CHECK: nc.activation %[[OUT:.*]], %[[SUM]] {{.*}}func = "relu"
// CHECK: nc.dma_store %[[OUT]]
func.func @epilogue(%a: tensor<100x128x4xf32>, %b: tensor<100x4x4xf32>, %c: tensor<128x4xf32>) -> tensor<100x128x4xf32> {
  %y = aten.bmm %a, %b : tensor<100x128x4xf32>, tensor<100x4x4xf32> -> tensor<100x128x4xf32>
  %z = aten.add.Tensor %y, %c {alpha = 1.0 : f64} : tensor<100x128x4xf32>, tensor<128x4xf32> -> tensor<100x128x4xf32>
  %r = aten.relu %z : tensor<100x128x4xf32> -> tensor<100x128x4xf32>
  return %r : tensor<100x128x4xf32>
}

// Matrices large enough to keep the TensorEngine busy stay there: 256
// batches of [16 x 16] @ [16 x 16] (estimated 32 us as batch groups, 51 a
// batch per partition).
// CHECK-LABEL: func.func @stays
// CHECK: nc.matmul
func.func @stays(%a: tensor<256x16x16xbf16>, %b: tensor<256x16x16xbf16>) -> tensor<256x16x16xbf16> {
  %y = aten.bmm %a, %b : tensor<256x16x16xbf16>, tensor<256x16x16xbf16> -> tensor<256x16x16xbf16>
  return %y : tensor<256x16x16xbf16>
}

// bf16 operands summed into an f32 result (a composite's unrounded
// products, baddbmm's): the operands load as bf16, the product tile is f32.
// CHECK-LABEL: func.func @widened
// CHECK: nc.alloc_tile {{.*}} : memref<100x512xbf16, 1>
// CHECK: nc.alloc_tile {{.*}} : memref<100x16xbf16, 1>
// CHECK: %[[OUT:.*]] = nc.alloc_tile {{.*}} : memref<100x512xf32, 1>
// CHECK: nc.dma_store %[[OUT]] -> {{.*}} : memref<100x512xf32, 1>, memref<100x128x4xf32>
func.func @widened(%a: tensor<100x128x4xbf16>, %b: tensor<100x4x4xbf16>) -> tensor<100x128x4xf32> {
  %y = aten.bmm %a, %b : tensor<100x128x4xbf16>, tensor<100x4x4xbf16> -> tensor<100x128x4xf32>
  return %y : tensor<100x128x4xf32>
}
