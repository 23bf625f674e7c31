// RUN: neuron-opt %s --split-input-file --ncc-form-kernels=fuse=true --ncc-lower-to-isa=few-bytes=0 | FileCheck %s

// Lone reductions over middle dims, reduced in SBUF rows
// (passes/LowerReductions.cpp). A sum of [8192, 16, 2] over dim 1: no
// matmul per row (FormKernels' sumLeadingDimsByMatmul leaves it alone), the
// returned squeeze joins the kernel, 16 rows go to a partition (512
// contiguous elements loaded in one run), and each of the 2 columns is a
// chain of 15 adds across the 16 packed rows (stepped views of 16 elements
// 32 apart) into an f32 tile (the adds may share the Vector and GpSimd
// engines over the kernel's 4 row tiles, where a tensor_reduce per (row,
// column) would take the vector engine alone), rounded once to bf16 and
// stored in one run of 32.
// CHECK-LABEL: func.func @sum_short_blocks
// CHECK-COUNT-1: nc.kernel
// CHECK-NOT: nc.matmul
// CHECK: %[[ACC:.*]] = nc.alloc_tile {{.*}} : memref<128x32xf32, 1>
// CHECK-NEXT: %[[X:.*]] = nc.alloc_tile {{.*}} : memref<128x512xbf16, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[X]] {ap = array<i64: 512, 64, 1, 512>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[X]] {ap = array<i64: 512, 64, 1, 512>
// CHECK-NEXT: %[[S0:.*]] = nc.tile_columns %[[ACC]][0] {step = 2 : i64} : memref<128x32xf32, 1> -> memref<128x16xf32, 1>
// CHECK-NEXT: %[[B1:.*]] = nc.tile_columns %[[X]][2] {step = 32 : i64} : memref<128x512xbf16, 1> -> memref<128x16xbf16, 1>
// CHECK-NEXT: %[[B0:.*]] = nc.tile_columns %[[X]][0] {step = 32 : i64}
// CHECK-NEXT: nc.tensor_tensor %[[S0]], %[[B0]], %[[B1]] {alu = "add"
// CHECK-NEXT: nc.tile_columns %[[X]][4] {step = 32 : i64}
// CHECK-NEXT: nc.tensor_tensor %[[S0]], %[[S0]], %{{.*}} {alu = "add"
// CHECK-COUNT-13: nc.tensor_tensor %[[S0]], %[[S0]], %{{.*}} {alu = "add"
// CHECK-NEXT: %[[S1:.*]] = nc.tile_columns %[[ACC]][1] {step = 2 : i64}
// CHECK-COUNT-15: nc.tensor_tensor %[[S1]], {{.*}} {alu = "add"
// CHECK-NEXT: %[[OUT:.*]] = nc.alloc_tile {{.*}} : memref<128x32xbf16, 1>
// CHECK-NEXT: nc.tensor_scalar %[[OUT]], %[[ACC]] {alu = "mul", {{.*}} imm = 1.000000e+00
// CHECK-NEXT: nc.dma_store %[[OUT]] -> %{{.*}} {ap = array<i64: 32, 128, 1, 32>
// CHECK-NOT: nc.kernel
// CHECK: return
func.func @sum_short_blocks(%x: tensor<8192x16x2xbf16>) -> tensor<8192x2xbf16> {
  %s = aten.sum.dim_IntList %x {dim = array<i64: 1>, keepdim = false} : tensor<8192x16x2xbf16> -> tensor<8192x2xbf16>
  return %s : tensor<8192x2xbf16>
}

// -----

// Blocks of 2 x 2 f32, 64 rows to a partition: the cheapest reduction runs
// across the rows, one max per column over 64 rows (steps of 4 in the
// input, 2 in the result), each reduced pair written straight into the
// result tile.
// CHECK-LABEL: func.func @amax_across_rows
// CHECK: %[[ACC:.*]] = nc.alloc_tile {{.*}} : memref<128x128xf32, 1>
// CHECK-NEXT: %[[X:.*]] = nc.alloc_tile {{.*}} : memref<128x256xf32, 1>
// CHECK: %[[O0:.*]] = nc.tile_columns %[[ACC]][0] {step = 2 : i64} : memref<128x128xf32, 1> -> memref<128x64xf32, 1>
// CHECK-NEXT: %[[R1:.*]] = nc.tile_columns %[[X]][2] {step = 4 : i64}
// CHECK-NEXT: %[[R0:.*]] = nc.tile_columns %[[X]][0] {step = 4 : i64}
// CHECK-NEXT: nc.tensor_tensor %[[O0]], %[[R0]], %[[R1]] {alu = "max"
// CHECK-NEXT: %[[O1:.*]] = nc.tile_columns %[[ACC]][1] {step = 2 : i64}
// CHECK-NEXT: %[[S1:.*]] = nc.tile_columns %[[X]][3] {step = 4 : i64}
// CHECK-NEXT: %[[S0:.*]] = nc.tile_columns %[[X]][1] {step = 4 : i64}
// CHECK-NEXT: nc.tensor_tensor %[[O1]], %[[S0]], %[[S1]] {alu = "max"
// CHECK-NEXT: nc.dma_store %[[ACC]] -> %{{.*}} {ap = array<i64: 128, 128, 1, 128>
func.func @amax_across_rows(%x: tensor<32768x2x2xf32>) -> tensor<32768x1x2xf32> {
  %s = aten.amax %x {dim = array<i64: 1>, keepdim = true} : tensor<32768x2x2xf32> -> tensor<32768x1x2xf32>
  return %s : tensor<32768x1x2xf32>
}

// -----

// Rows of 4096 x 4 do not fit a tile of 4096: each tile takes 1024 steps
// of the reduced dim (runs of 4096), each step an iteration of the memory
// plan (its load need not wait for the reduction of the one before). Blocks
// of 4 are reduced by a tensor_reduce per (row, column) over 1024 elements
// a step. Steps alternate between two accumulators, so that their adds are
// two chains: the first two steps reduce straight into them, the next two
// into a partial sum added to each; the two are added at the end, and the
// mean scales once, by 1/4096.
// CHECK-LABEL: func.func @mean_long_blocks
// CHECK: %[[ACC0:.*]] = nc.alloc_tile {iteration = 1 : i64} : memref<128x4xf32, 1>
// CHECK-NEXT: %[[ACC1:.*]] = nc.alloc_tile {iteration = 1 : i64} : memref<128x4xf32, 1>
// CHECK-NEXT: %[[X:.*]] = nc.alloc_tile {iteration = 1 : i64} : memref<128x4096xbf16, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[X]] {ap = array<i64: 16384, 16, 1, 4096>, {{.*}} offset = 0 : i64
// CHECK: %[[T0:.*]] = nc.tile_columns %[[ACC0]][0]
// CHECK-NEXT: nc.tensor_reduce %[[T0]], %{{.*}} : memref<128x1xf32, 1>, memref<128x1024xbf16, 1>
// CHECK-COUNT-3: nc.tensor_reduce
// CHECK: nc.alloc_tile {iteration = 2 : i64} : memref<128x4096xbf16, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} {ap = array<i64: 16384, 16, 1, 4096>, {{.*}} offset = 4096 : i64
// CHECK: %[[T1:.*]] = nc.tile_columns %[[ACC1]][0]
// CHECK-NEXT: nc.tensor_reduce %[[T1]]
// CHECK-COUNT-3: nc.tensor_reduce
// CHECK: nc.alloc_tile {iteration = 3 : i64} : memref<128x4096xbf16, 1>
// CHECK: %[[PART:.*]] = nc.alloc_tile {iteration = 3 : i64} : memref<128x4xf32, 1>
// CHECK-COUNT-4: nc.tensor_reduce
// CHECK-NEXT: nc.tensor_tensor %[[ACC0]], %[[ACC0]], %[[PART]] {alu = "add"
// CHECK: %[[PART1:.*]] = nc.alloc_tile {iteration = 4 : i64} : memref<128x4xf32, 1>
// CHECK-COUNT-4: nc.tensor_reduce
// CHECK-NEXT: nc.tensor_tensor %[[ACC1]], %[[ACC1]], %[[PART1]] {alu = "add"
// CHECK-NEXT: nc.tensor_tensor %[[ACC0]], %[[ACC0]], %[[ACC1]] {alu = "add"
// CHECK: nc.tensor_scalar %{{.*}}, %[[ACC0]] {alu = "mul", {{.*}} imm = 2.44140625E-4
func.func @mean_long_blocks(%x: tensor<256x4096x4xbf16>) -> tensor<256x1x4xbf16> {
  %s = aten.mean.dim %x {dim = array<i64: 1>, keepdim = true} : tensor<256x4096x4xbf16> -> tensor<256x1x4xbf16>
  return %s : tensor<256x1x4xbf16>
}

// -----

// Rows of 128 blocks of 768: five blocks to a tile, maxima block by block
// into f32. The steps alternate between two accumulators (one chain of 127
// maxima would keep one engine at a time busy), each step in an iteration
// of its own; the second accumulator starts with the maximum of its first
// two blocks; the last step's three blocks go to the second, then the first
// takes its maximum.
// CHECK-LABEL: func.func @amax_many_blocks
// CHECK: %[[ACC0:.*]] = nc.alloc_tile {iteration = 1 : i64} : memref<128x768xf32, 1>
// CHECK-NEXT: %[[ACC1:.*]] = nc.alloc_tile {iteration = 1 : i64} : memref<128x768xf32, 1>
// CHECK-NEXT: %[[X0:.*]] = nc.alloc_tile {iteration = 1 : i64} : memref<128x3840xbf16, 1>
// CHECK-COUNT-8: nc.dma_load %{{.*}} -> %[[X0]] {ap = array<i64: 98304, 16, 1, 3840>
// CHECK-COUNT-4: nc.tensor_tensor %[[ACC0]], {{.*}} {alu = "max"
// CHECK-NEXT: %[[X1:.*]] = nc.alloc_tile {iteration = 2 : i64} : memref<128x3840xbf16, 1>
// CHECK-COUNT-8: nc.dma_load %{{.*}} -> %[[X1]]
// CHECK: nc.tensor_tensor %[[ACC1]], %{{[0-9]+}}, %{{[0-9]+}} {alu = "max"
// CHECK-COUNT-3: nc.tensor_tensor %[[ACC1]], %[[ACC1]], {{.*}} {alu = "max"
// CHECK-NEXT: nc.alloc_tile {iteration = 3 : i64} : memref<128x3840xbf16, 1>
// CHECK: nc.alloc_tile {iteration = 26 : i64} : memref<128x2304xbf16, 1>
// CHECK: nc.tensor_tensor %[[ACC1]], %[[ACC1]], {{.*}} {alu = "max"
// CHECK-COUNT-2: nc.tensor_tensor %[[ACC1]], %[[ACC1]], {{.*}} {alu = "max"
// CHECK-NEXT: nc.tensor_tensor %[[ACC0]], %[[ACC0]], %[[ACC1]] {alu = "max"
// CHECK-NEXT: nc.alloc_tile {iteration = 26 : i64} : memref<128x768xbf16, 1>
// CHECK-NEXT: nc.tensor_scalar
// CHECK-NEXT: nc.dma_store
// CHECK-NOT: nc.tensor_tensor
// CHECK: return
func.func @amax_many_blocks(%x: tensor<128x128x768xbf16>) -> tensor<128x768xbf16> {
  %s = aten.amax %x {dim = array<i64: 1>, keepdim = false} : tensor<128x128x768xbf16> -> tensor<128x768xbf16>
  return %s : tensor<128x768xbf16>
}

// -----

// Kept dims of size 1 after the reduced one: the reduced elements are
// adjacent, so this is a reduction of rows (four to a partition), neither a
// matmul nor a permuted read.
// CHECK-LABEL: func.func @unit_tail
// CHECK-NOT: nc.matmul
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 64, 128, 1, 64>
// CHECK: nc.tensor_reduce %{{.*}}, %{{.*}} {alu = "add", {{.*}} : memref<128x1xbf16, 1>, memref<128x16xbf16, 1>
func.func @unit_tail(%x: tensor<4096x16x1xbf16>) -> tensor<4096x1x1xbf16> {
  %s = aten.sum.dim_IntList %x {dim = array<i64: 1>, keepdim = true} : tensor<4096x16x1xbf16> -> tensor<4096x1x1xbf16>
  return %s : tensor<4096x1x1xbf16>
}

// -----

// Fewer than 128 rows would leave partitions idle: the sum stays a product
// with a row of ones on the TensorEngine.
// CHECK-LABEL: func.func @few_rows
// CHECK: nc.matmul
// CHECK-NOT: nc.tensor_reduce
// CHECK: return
func.func @few_rows(%x: tensor<16x512x1024xbf16>) -> tensor<16x1024xbf16> {
  %s = aten.sum.dim_IntList %x {dim = array<i64: 1>, keepdim = false} : tensor<16x512x1024xbf16> -> tensor<16x1024xbf16>
  return %s : tensor<16x1024xbf16>
}

// -----

// A transposed input ([A, C, R] read as [A, R, C]): C is not a run, so the
// SBUF rows would load one element per DMA run; the permuted read takes R's
// runs instead (rows of 64 contiguous elements, one reduce each), and no
// matmul.
// CHECK-LABEL: func.func @transposed_input
// CHECK-NOT: nc.matmul
// CHECK-NOT: step =
// CHECK: nc.tensor_reduce %{{.*}}, %{{.*}} {alu = "add", {{.*}} : memref<128x1xbf16, 1>, memref<128x64xbf16, 1>
// CHECK-NOT: nc.matmul
// CHECK: return
func.func @transposed_input(%x: tensor<1024x16x64xbf16>) -> tensor<1024x16xbf16> {
  %t = aten.transpose.int %x {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<1024x16x64xbf16> -> tensor<1024x64x16xbf16>
  %s = aten.sum.dim_IntList %t {dim = array<i64: 1>, keepdim = false} : tensor<1024x64x16xbf16> -> tensor<1024x16xbf16>
  return %s : tensor<1024x16xbf16>
}
