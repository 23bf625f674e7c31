// RUN: neuron-opt %s --split-input-file --ncc-form-kernels=fuse=true --ncc-lower-to-isa=few-bytes=0 | FileCheck %s

// Copy kernels that broadcast (passes/LowerCopies.cpp). Nearest upsampling
// by 2: the returned reshape joins the copy kernel (one kernel, no second
// copy). Rows of 32 go four to a partition, loaded in one run of 128; the
// inner broadcast is two copies along a step of 2, the outer one copies
// each widened row of 64 twice; the tile is stored in one run of 512.
// CHECK-LABEL: func.func @upsample
// CHECK-COUNT-1: nc.kernel
// CHECK: %[[X:.*]] = nc.alloc_tile {{.*}} : memref<128x128xbf16, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[X]] {ap = array<i64: 128, 128, 1, 128>
// CHECK-NEXT: %[[W:.*]] = nc.alloc_tile {{.*}} : memref<128x256xbf16, 1>
// CHECK-NEXT: %[[W0:.*]] = nc.tile_columns %[[W]][0] {step = 2 : i64}
// CHECK-NEXT: nc.tensor_scalar %[[W0]], %[[X]]
// CHECK-NEXT: %[[W1:.*]] = nc.tile_columns %[[W]][1] {step = 2 : i64}
// CHECK-NEXT: nc.tensor_scalar %[[W1]], %[[X]]
// CHECK-NEXT: %[[OUT:.*]] = nc.alloc_tile {{.*}} : memref<128x512xbf16, 1>
// CHECK-COUNT-8: nc.tensor_scalar
// CHECK-NEXT: nc.dma_store %[[OUT]] -> %{{.*}} {ap = array<i64: 512, 64, 1, 512>
// CHECK-NOT: nc.kernel
// CHECK: return
func.func @upsample(%x: tensor<2x64x32x32xbf16>) -> tensor<2x64x64x64xbf16> {
  %a = aten.reshape %x {size = array<i64: 2, 64, 32, 1, 32, 1>} : tensor<2x64x32x32xbf16> -> tensor<2x64x32x1x32x1xbf16>
  %e = aten.expand %a {size = array<i64: 2, 64, 32, 2, 32, 2>} : tensor<2x64x32x1x32x1xbf16> -> tensor<2x64x32x2x32x2xbf16>
  %r = aten.reshape %e {size = array<i64: 2, 64, 64, 64>} : tensor<2x64x32x2x32x2xbf16> -> tensor<2x64x64x64xbf16>
  return %r : tensor<2x64x64x64xbf16>
}

// -----

// Key/value heads repeated for grouped-query attention (expand, clone and
// view, as reshape exports it): each head's rows are too long for a tile,
// so the broadcast dim stays outside it and each tile, loaded once, is
// stored four times, a head (262144 elements) apart.
// CHECK-LABEL: func.func @heads
// CHECK-COUNT-1: nc.kernel
// CHECK: %[[T:.*]] = nc.alloc_tile {{.*}} : memref<128x4096xbf16, 1>
// CHECK-COUNT-4: nc.dma_load %{{.*}} -> %[[T]]
// CHECK-NOT: nc.tensor_scalar
// CHECK: nc.dma_store %[[T]] -> %{{.*}} offset = 0 : i64, part_start = 0
// CHECK: nc.dma_store %[[T]] -> %{{.*}} offset = 262144 : i64, part_start = 0
// CHECK: nc.dma_store %[[T]] -> %{{.*}} offset = 524288 : i64, part_start = 0
// CHECK: nc.dma_store %[[T]] -> %{{.*}} offset = 786432 : i64, part_start = 0
// CHECK-NOT: nc.kernel
// CHECK: return
func.func @heads(%x: tensor<1x8x2048x128xbf16>) -> tensor<1x32x2048x128xbf16> {
  %a = aten.unsqueeze %x {dim = 2 : i64} : tensor<1x8x2048x128xbf16> -> tensor<1x8x1x2048x128xbf16>
  %e = aten.expand %a {size = array<i64: 1, 8, 4, 2048, 128>} : tensor<1x8x1x2048x128xbf16> -> tensor<1x8x4x2048x128xbf16>
  %c = aten.clone %e : tensor<1x8x4x2048x128xbf16> -> tensor<1x8x4x2048x128xbf16>
  %r = aten._unsafe_view %c {size = array<i64: 1, 32, 2048, 128>} : tensor<1x8x4x2048x128xbf16> -> tensor<1x32x2048x128xbf16>
  return %r : tensor<1x32x2048x128xbf16>
}

// -----

// One row broadcast to 512: too few other rows to fill the partitions, so
// the broadcast rows are the tile's rows, each partition loading the same
// row (a partition step of 0).
// CHECK-LABEL: func.func @rows
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 0, 128, 1, 64>
// CHECK-NEXT: nc.dma_store %{{.*}} {ap = array<i64: 64, 128, 1, 64>, {{.*}} offset = 0 : i64
// CHECK-COUNT-3: nc.dma_load %{{.*}} {ap = array<i64: 0, 128, 1, 64>
// CHECK: return
func.func @rows(%x: tensor<1x64xf32>) -> tensor<512x64xf32> {
  %e = aten.expand %x {size = array<i64: 512, 64>} : tensor<1x64xf32> -> tensor<512x64xf32>
  %c = aten.clone %e : tensor<512x64xf32> -> tensor<512x64xf32>
  return %c : tensor<512x64xf32>
}

// -----

// A ViT patch embedding's im2col (a permute whose common innermost run is a
// patch row of 16): each tile takes an image's band of patch rows onto a
// partition (8 images x 14 bands) and one channel's 16 x 224 pixels as its
// columns, one run of 3584 per partition; 224 copies of 16 put them in the
// output's (patch, row, pixel) order, stored in runs of 256; three tiles,
// one per channel. Copied directly, each 32-byte patch row was a DMA run.
// CHECK-LABEL: func.func @patches
// CHECK: %[[IN:.*]] = nc.alloc_tile {{.*}} : memref<112x3584xbf16, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[IN]] {ap = array<i64: 3584, 14, 1, 3584>
// CHECK-COUNT-224: nc.tensor_scalar
// CHECK: nc.dma_store %{{.*}} {ap = array<i64: 10752, 10, 768, 14, 1, 256>
// CHECK: nc.alloc_tile {iteration = 3 : i64} : memref<112x3584xbf16, 1>
// CHECK: nc.alloc_tile {iteration = 3 : i64} : memref<112x3584xbf16, 1>
// CHECK-NOT: nc.alloc_tile
// CHECK: return
func.func @patches(%x: tensor<8x3x224x224xbf16>) -> tensor<8x14x14x3x16x16xbf16> {
  %a = aten.reshape %x {size = array<i64: 8, 3, 14, 16, 14, 16>} : tensor<8x3x224x224xbf16> -> tensor<8x3x14x16x14x16xbf16>
  %p = aten.permute %a {dims = array<i64: 0, 2, 4, 1, 3, 5>} : tensor<8x3x14x16x14x16xbf16> -> tensor<8x14x14x3x16x16xbf16>
  %c = aten.clone %p : tensor<8x14x14x3x16x16xbf16> -> tensor<8x14x14x3x16x16xbf16>
  return %c : tensor<8x14x14x3x16x16xbf16>
}

// -----

// A strided convolution's phases ([N, C, p, s, q, s] to [s, s, N, C, p, q]):
// the partitions take N x C, an inner run of the output's dims, and each
// loads its whole 30 x 30 plane in one run; 60 copies of 15 put its four
// phases in the output's order, stored in four runs of 225. With the
// partitions over a prefix of the output's dims, a tile held a single
// phase, read an element per DMA run.
// CHECK-LABEL: func.func @phases
// CHECK: %[[IN:.*]] = nc.alloc_tile {{.*}} : memref<128x900xbf16, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[IN]] {ap = array<i64: 900, 43, 1, 900>
// CHECK-COUNT-60: nc.tensor_scalar
// CHECK-COUNT-3: nc.dma_store %{{.*}} {ap = array<i64: 225, {{4[23]}}, 28800, 4, 1, 225>
// CHECK-NOT: nc.alloc_tile
// CHECK: return
func.func @phases(%x: tensor<2x64x30x30xbf16>) -> tensor<2x2x2x64x15x15xbf16> {
  %a = aten.reshape %x {size = array<i64: 2, 64, 15, 2, 15, 2>} : tensor<2x64x30x30xbf16> -> tensor<2x64x15x2x15x2xbf16>
  %p = aten.permute %a {dims = array<i64: 3, 5, 0, 1, 2, 4>} : tensor<2x64x15x2x15x2xbf16> -> tensor<2x2x2x64x15x15xbf16>
  %c = aten.clone %p : tensor<2x2x2x64x15x15xbf16> -> tensor<2x2x2x64x15x15xbf16>
  return %c : tensor<2x2x2x64x15x15xbf16>
}

// -----

// A head merge returned through its reshape: the copy kernel of the
// transpose also writes the reshape (one kernel, not a second copy of its
// result). Its runs of 64 elements are short: the permute plan puts 4
// positions on each partition, loads each head's 4 x 64 elements as one
// run of 256, copies them into the output's order, and stores one run of
// 3072 (it had copied the transposed view as [4, 512, 12, 64], loading
// rows of 12 runs of 64).
// CHECK-LABEL: func.func @merged_heads
// CHECK: nc.kernel "k0_fused_transpose_reshape"
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 256, 16, 32768, 12, 1, 256>, {{.*}} : memref<4x12x512x64xbf16>, memref<128x3072xbf16, 1>
// CHECK: nc.tensor_scalar
// CHECK: nc.dma_store %{{.*}} {ap = array<i64: 3072, 16, 1, 3072>, {{.*}} : memref<128x3072xbf16, 1>, memref<4x512x768xbf16>
// CHECK-NOT: nc.kernel
// CHECK: return
func.func @merged_heads(%x: tensor<4x12x512x64xbf16>) -> tensor<4x512x768xbf16> {
  %t = aten.transpose.int %x {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<4x12x512x64xbf16> -> tensor<4x512x12x64xbf16>
  %r = aten.reshape %t {size = array<i64: 4, 512, 768>} : tensor<4x512x12x64xbf16> -> tensor<4x512x768xbf16>
  return %r : tensor<4x512x768xbf16>
}
