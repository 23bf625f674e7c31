// RUN: neuron-opt %s --split-input-file --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa | FileCheck %s

// Direct operands in panels: a [128 x 1024] @ b [1024 x 512] (b row-major:
// its columns are contiguous, so its slices need no transpose). A moving
// slice is [128 x 512] bf16 (1 KiB per partition); one DMA loads a panel of
// four consecutive k slices side by side ([128 x 2048], 4 KiB per
// partition, in four DMAs of 32 partitions so that four queues share its
// 512 KiB), and each matmul reads a column range of it. K = 1024 is 8
// slices: 2 panels of b. The pipeline prepares slices ahead: the second
// panel's loads are issued before the first matmul.
// CHECK-LABEL: func.func @direct_panels
// CHECK: nc.dma_load %{{.*}} -> %[[B0:.*]] {ap = array<i64: 512, 32, 65536, 4, 1, 512>, {{.*}}offset = 0 : i64, part_start = 0 : i64{{.*}} : memref<1024x512xbf16>, memref<128x2048xbf16, 1>
// CHECK: nc.dma_load %{{.*}} -> %[[B0]] {ap = array<i64: 512, 32, 65536, 4, 1, 512>, {{.*}}offset = 16384 : i64, part_start = 32 : i64
// CHECK: nc.dma_load %{{.*}} -> %[[B0]] {ap = array<i64: 512, 32, 65536, 4, 1, 512>, {{.*}}offset = 32768 : i64, part_start = 64 : i64
// CHECK: nc.dma_load %{{.*}} -> %[[B0]] {ap = array<i64: 512, 32, 65536, 4, 1, 512>, {{.*}}offset = 49152 : i64, part_start = 96 : i64
// CHECK: %[[S0:.*]] = nc.tile_columns %[[B0]][0] : memref<128x2048xbf16, 1> -> memref<128x512xbf16, 1>
// CHECK: nc.tile_columns %[[B0]][512]
// CHECK: nc.dma_load %{{.*}} -> %[[B1:.*]] {ap = array<i64: 512, 32, 65536, 4, 1, 512>, {{.*}}offset = 262144 : i64
// CHECK: nc.matmul %{{.*}}, %{{.*}}, %[[S0]] {engine = "tensor"
// CHECK-COUNT-7: nc.matmul
// CHECK-NOT: nc.dma_load {{.*}}memref<1024x512xbf16>
// CHECK: return
func.func @direct_panels(%a: tensor<128x1024xbf16>, %b: tensor<1024x512xbf16>) -> tensor<128x512xbf16> {
  %y = aten.mm %a, %b : tensor<128x1024xbf16>, tensor<1024x512xbf16> -> tensor<128x512xbf16>
  return %y : tensor<128x512xbf16>
}

// -----

// Slices whose rows are shorter than 512 bytes are bound by their DMA runs,
// not by the per-transfer cost: one DMA each (here [128 x 64] f32 = 256 B
// rows), so that several queues share them.
// CHECK-LABEL: func.func @short_rows
// CHECK-COUNT-2: nc.dma_load {{.*}} : memref<256x64xf32>, memref<128x64xf32, 1>
// CHECK-NOT: nc.dma_load {{.*}} : memref<256x64xf32>
// CHECK: return
func.func @short_rows(%a: tensor<64x256xf32>, %b: tensor<256x64xf32>) -> tensor<64x64xf32> {
  %at = aten.t %a : tensor<64x256xf32> -> tensor<256x64xf32>
  %att = aten.t %at : tensor<256x64xf32> -> tensor<64x256xf32>
  %y = aten.mm %att, %b : tensor<64x256xf32>, tensor<256x64xf32> -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}

// -----

// One row tile (16 tokens) against an nn.Linear weight stored (out, in):
// each transposed moving slice serves a single output tile, so it is marked
// to rotate among the other such slices (group 1), apart from the panels of
// rows it is transposed from (unit `rotation`), instead of being held
// through whole iterations (ncc-plan-memory). The row tile's stationary
// slices serve every column tile and are not marked.
// CHECK-LABEL: func.func @linear_one_row_tile
// CHECK: nc.alloc_tile {iteration = 1 : i64, rotation} : memref<16x256xbf16, 1>
// CHECK: nc.alloc_tile {iteration = 1 : i64} : memref<128x16xbf16, 1>
// CHECK: nc.alloc_tile {iteration = 1 : i64, rotation} : memref<128x256xbf16, 1>
// CHECK: nc.transpose
// CHECK: nc.alloc_tile {iteration = 1 : i64, rotation = 1 : i64} : memref<128x512xbf16, 1>
// CHECK-NEXT: nc.tensor_scalar {{.*}}imm = 1.000000e+00
// CHECK: nc.matmul
func.func @linear_one_row_tile(%x: tensor<16x256xbf16>, %w: tensor<1024x256xbf16>) -> tensor<16x1024xbf16> {
  %t = aten.t %w : tensor<1024x256xbf16> -> tensor<256x1024xbf16>
  %y = aten.mm %x, %t : tensor<16x256xbf16>, tensor<256x1024xbf16> -> tensor<16x1024xbf16>
  return %y : tensor<16x1024xbf16>
}

// -----

// A weight streamed for 16 tokens (each moving slice serves the single row
// tile): its loads bound the kernel, so its 64 MiB load in pieces of 512
// KiB, a whole panel of four k slices each (one DMA of 128 partitions, not
// four of 32), and all 32 slices of a column tile are prepared before its
// first matmul (96 KiB per partition ahead, against 4 slices otherwise),
// so that enough pieces are in flight for the 16 queues. (@direct_panels
// above, 1 MiB, keeps 128 KiB pieces: a small operand loads over several
// queues at once.)
// CHECK-LABEL: func.func @streamed_weight
// CHECK-COUNT-8: nc.dma_load %{{.*}} {ap = array<i64: 8192, 128, 1048576, 4, 1, 512>, {{.*}}part_start = 0 : i64{{.*}} : memref<4096x8192xbf16>, memref<128x2048xbf16, 1>
// CHECK-NOT: nc.dma_load {{.*}}memref<4096x8192xbf16>
// CHECK: nc.matmul
// CHECK: return
func.func @streamed_weight(%x: tensor<16x4096xbf16>, %w: tensor<4096x8192xbf16>) -> tensor<16x8192xbf16> {
  %y = aten.mm %x, %w : tensor<16x4096xbf16>, tensor<4096x8192xbf16> -> tensor<16x8192xbf16>
  return %y : tensor<16x8192xbf16>
}
