// RUN: neuron-opt %s --split-input-file --ncc-form-kernels=fuse=true --ncc-lower-to-isa | FileCheck %s

// Lone reductions over middle dims, reduced in SBUF rows
// (passes/LowerReductions.cpp). A sum of [8192, 16, 2] over dim 1: no
// matmul per row (FormKernels' sumLeadingDimsByMatmul leaves it alone), the
// returned squeeze joins the kernel, 16 rows go to a partition (512
// contiguous elements loaded in one run), and each of the 32 (row, column)
// pairs is a tensor_reduce of 16 elements along a step of 2 into an f32
// tile, rounded once to bf16 and stored in one run of 32.
// CHECK-LABEL: func.func @sum_short_blocks
// CHECK-COUNT-1: nc.kernel
// CHECK-NOT: nc.matmul
// CHECK: %[[ACC:.*]] = nc.alloc_tile {{.*}} : memref<128x32xf32, 1>
// CHECK-NEXT: %[[X:.*]] = nc.alloc_tile {{.*}} : memref<128x512xbf16, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[X]] {ap = array<i64: 512, 64, 1, 512>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[X]] {ap = array<i64: 512, 64, 1, 512>
// CHECK-NEXT: %[[C0:.*]] = nc.tile_columns %[[X]][0] {step = 2 : i64} : memref<128x512xbf16, 1> -> memref<128x16xbf16, 1>
// CHECK-NEXT: %[[A0:.*]] = nc.tile_columns %[[ACC]][0] : memref<128x32xf32, 1> -> memref<128x1xf32, 1>
// CHECK-NEXT: nc.tensor_reduce %[[A0]], %[[C0]] {alu = "add"
// CHECK-NEXT: %[[C1:.*]] = nc.tile_columns %[[X]][1] {step = 2 : i64}
// CHECK-NEXT: %[[A1:.*]] = nc.tile_columns %[[ACC]][1]
// CHECK-NEXT: nc.tensor_reduce %[[A1]], %[[C1]] {alu = "add"
// CHECK-NEXT: nc.tile_columns %[[X]][32] {step = 2 : i64}
// CHECK-COUNT-29: nc.tensor_reduce
// CHECK: %[[OUT:.*]] = nc.alloc_tile {{.*}} : memref<128x32xbf16, 1>
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

// Rows of 128 x 128 do not fit a tile of 4096: each tile takes 32 steps of
// the reduced dim (runs of 4096), and the partial sums of the next three are
// added to the first's; the mean scales once, by 1/128.
// CHECK-LABEL: func.func @mean_long_blocks
// CHECK: %[[ACC:.*]] = nc.alloc_tile {iteration = 1 : i64} : memref<128x128xf32, 1>
// CHECK-NEXT: %[[X:.*]] = nc.alloc_tile {{.*}} : memref<128x4096xbf16, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[X]] {ap = array<i64: 16384, 16, 1, 4096>, {{.*}} offset = 0 : i64
// CHECK-COUNT-128: nc.tensor_reduce
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 16384, 16, 1, 4096>, {{.*}} offset = 4096 : i64
// CHECK: %[[PART:.*]] = nc.alloc_tile {iteration = 1 : i64} : memref<128x128xf32, 1>
// CHECK-COUNT-128: nc.tensor_reduce
// CHECK-NEXT: nc.tensor_tensor %[[ACC]], %[[ACC]], %[[PART]] {alu = "add"
// CHECK-COUNT-256: nc.tensor_reduce
// CHECK: nc.tensor_scalar %{{.*}}, %[[ACC]] {alu = "mul", {{.*}} imm = 7.812500e-03
func.func @mean_long_blocks(%x: tensor<256x128x128xbf16>) -> tensor<256x1x128xbf16> {
  %s = aten.mean.dim %x {dim = array<i64: 1>, keepdim = true} : tensor<256x128x128xbf16> -> tensor<256x1x128xbf16>
  return %s : tensor<256x1x128xbf16>
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
