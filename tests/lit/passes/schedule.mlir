// RUN: neuron-opt %s --ncc-form-kernels --ncc-lower-to-isa --ncc-plan-memory --ncc-schedule | FileCheck %s
// RUN: neuron-opt %examples/rmsnorm/naive.mlir --ncc-form-kernels --ncc-lower-to-isa --ncc-plan-memory --ncc-schedule | FileCheck %s --check-prefix=RMS
// RUN: not neuron-opt %s --ncc-form-kernels --ncc-lower-to-isa --ncc-plan-memory --ncc-schedule=target=trn9 2>&1 | FileCheck %s --check-prefix=TARGET

// Semaphore queues: 1 vector, 2 scalar, 3 gpsimd, 4 + q DMA queue q.
// Four row tiles of exp: SBUF holds sixteen iterations' tiles at once (deep
// buffering, ncc-plan-memory), so no tile comes back round: the loads spread
// over DMA queues and carry no wait (a kernel of few row tiles loads each in
// four 64 KiB pieces, ncc-lower-to-isa, so the four tiles take all 16
// queues), each activation waits for its tile's four loads and each tile's
// stores for its activation. Instructions go in the order their inputs are
// ready, so the loads come first.
// CHECK-LABEL: func.func @reuse
// CHECK: nc.dma_load {{.*}}offset = 0 : i64, part_start = 0 : i64, queue = 0 : i64, source_op = -1 : i64}
// CHECK: nc.dma_load {{.*}}offset = 65536 : i64, part_start = 0 : i64, queue = 4 : i64, source_op = -1 : i64}
// CHECK: nc.dma_load {{.*}}offset = 131072 : i64, part_start = 0 : i64, queue = 8 : i64, source_op = -1 : i64}
// CHECK: nc.dma_load {{.*}}offset = 196608 : i64, part_start = 0 : i64, queue = 12 : i64, source_op = -1 : i64}
// CHECK: nc.activation {{.*}}func = "exp", {{.*}}waits = array<i64: 4, 1, 5, 1, 6, 1, 7, 1>}
// CHECK: nc.activation {{.*}}waits = array<i64: 8, 1, 9, 1, 10, 1, 11, 1>}
// CHECK: nc.activation {{.*}}waits = array<i64: 12, 1, 13, 1, 14, 1, 15, 1>}
// CHECK: nc.activation {{.*}}waits = array<i64: 16, 1, 17, 1, 18, 1, 19, 1>}
// CHECK: nc.dma_store {{.*}}queue = 0 : i64, source_op = -1 : i64, waits = array<i64: 2, 1>}
// CHECK: nc.dma_store {{.*}}offset = 65536 : i64, {{.*}}waits = array<i64: 2, 2>}
// CHECK: nc.dma_store {{.*}}offset = 131072 : i64, {{.*}}waits = array<i64: 2, 3>}
// CHECK: nc.dma_store {{.*}}offset = 196608 : i64, {{.*}}waits = array<i64: 2, 4>}
func.func @reuse(%x: tensor<512x512xf32>) -> tensor<512x512xf32> {
  %y = aten.exp %x : tensor<512x512xf32> -> tensor<512x512xf32>
  return %y : tensor<512x512xf32>
}

// Two column tiles of the same rows: their stores write disjoint columns of
// the output, so the second tile's stores wait only for the scalar engine
// (2, 2), not for the first tile's stores, whose bounding intervals
// interleave with theirs.
// CHECK-LABEL: func.func @column_tiles
// CHECK: nc.dma_store {{.*}}offset = 0 : i64, part_start = 0 : i64, queue = 0 : i64, source_op = -1 : i64, waits = array<i64: 2, 1>}
// CHECK: nc.dma_store {{.*}}offset = 4096 : i64, part_start = 0 : i64, queue = 8 : i64, source_op = -1 : i64, waits = array<i64: 2, 2>}
func.func @column_tiles(%x: tensor<128x8192xf32>) -> tensor<128x8192xf32> {
  %y = aten.exp %x : tensor<128x8192xf32> -> tensor<128x8192xf32>
  return %y : tensor<128x8192xf32>
}

// A zero padding of [1, 64, 14, 14] to [1, 64, 24, 22] (a convolution's):
// the cat's stores write rows of the planes in patterns of different
// strides (the top rows of 32 planes at a time, runs of rows of single
// planes, the interior rows of 8 planes) whose bounding intervals
// interleave. Their elements are compared exactly (none of them meet), so
// each of the 28 stores waits only for the engine that filled its tile
// (semaphores 1 to 3), none for another store (before, the rows of plane 9
// at offset 4840 waited for the top rows of planes 0 to 31 at offset 0, and
// so on down a chain of stores).
// CHECK-LABEL: func.func @padded_planes
// CHECK-COUNT-28: nc.dma_store {{.*}}waits = array<i64: {{[1-3]}}, {{[0-9]+}}>}
// CHECK-NOT: nc.dma_store
func.func @padded_planes(%x: tensor<1x64x14x14xf32>) -> tensor<1x64x24x22xf32> {
  %side = arith.constant dense<0.000000e+00> : tensor<1x64x14x4xf32>
  %rows = aten.cat %side, %x, %side {dim = 3 : i64} : tensor<1x64x14x4xf32>, tensor<1x64x14x14xf32>, tensor<1x64x14x4xf32> -> tensor<1x64x14x22xf32>
  %top = arith.constant dense<0.000000e+00> : tensor<1x64x4x22xf32>
  %bottom = arith.constant dense<0.000000e+00> : tensor<1x64x6x22xf32>
  %y = aten.cat %top, %rows, %bottom {dim = 2 : i64} : tensor<1x64x4x22xf32>, tensor<1x64x14x22xf32>, tensor<1x64x6x22xf32> -> tensor<1x64x24x22xf32>
  return %y : tensor<1x64x24x22xf32>
}

// At -O2 the RMSNorm kernel spreads over the engines: the per-row scale by
// 1/512, the + eps and x * rms move to the scalar engine as identity
// activations with scale and bias; the weight multiply goes to the GpSimd
// engine (free, and its clock is faster than the vector engine's) and waits
// for the scalar engine and the weight's DMA queue; the store waits for the
// GpSimd engine.
// RMS: nc.activation {{.*}} accum {{.*}}engine = "scalar", func = "square"
// RMS: nc.activation {{.*}}engine = "scalar", func = "identity", scale = 0.001953125
// RMS: nc.activation {{.*}}bias = 9.9999999747524271E-7 : f64, engine = "scalar", func = "identity"
// RMS: nc.activation {{.*}}engine = "scalar", func = "rsqrt"
// RMS: nc.activation {{.*}} scale {{.*}}engine = "scalar", func = "identity"
// RMS: nc.tensor_tensor {{.*}}alu = "mul", engine = "gpsimd", source_op = 5 : i64, waits = array<i64: 2, 5, 5, 1>}
// RMS: nc.dma_store {{.*}}waits = array<i64: 3, 1>}

// TARGET: error: unknown target 'trn9'

// x * x of f32 may run on the scalar engine as a Square activation (the same
// bits: the product in f32, rounded once), at N cycles where the vector and
// GpSimd engines take 2N: four row tiles of squares go to the engine that
// finishes each first, the scalar engine twice.
// CHECK-LABEL: func.func @squares
// CHECK: nc.activation %{{.*}}, %[[X0:.*]] {engine = "scalar", func = "square"
// CHECK: nc.tensor_tensor %{{.*}}, %[[X1:.*]], %[[X1]] {alu = "mul", engine = "gpsimd"
// CHECK: nc.activation %{{.*}}, %[[X2:.*]] {engine = "scalar", func = "square"
// CHECK: nc.tensor_tensor %{{.*}}, %[[X3:.*]], %[[X3]] {alu = "mul", engine = "vector"
func.func @squares(%x: tensor<512x512xf32>) -> tensor<512x512xf32> {
  %p = aten.mul.Tensor %x, %x : tensor<512x512xf32>, tensor<512x512xf32> -> tensor<512x512xf32>
  return %p : tensor<512x512xf32>
}

// A transfer of one run per partition is kept as its runs: the padding rows
// of a cat along H (one per channel plane, at the stride of a plane, spanning
// the whole output) and the planes between them (one run of 56 x 56 per
// partition: the copy's columns are the trailing dims contiguous in both
// the input and the output) do not conflict, so each plane's stores wait
// only for their own load instead of for the padding and each other, one
// at a time.
// CHECK-LABEL: func.func @padding_rows
// CHECK: nc.dma_store {{.*}}ap = array<i64: 3248, 128, 1, 56>{{.*}}offset = 0 : i64
// CHECK: nc.dma_store {{.*}}ap = array<i64: 3248, 128, 1, 56>{{.*}}offset = 415744 : i64
// CHECK: nc.dma_store {{.*}}ap = array<i64: 3248, 16, 1, 3136>{{.*}}offset = 56 : i64, part_start = 0 : i64, queue = 6 : i64, source_op = -1 : i64, waits = array<i64: 6, 1>}
// CHECK-NEXT: nc.dma_store {{.*}}ap = array<i64: 3248, 16, 1, 3136>{{.*}}offset = 52024 : i64, part_start = 16 : i64, queue = 7 : i64, source_op = -1 : i64, waits = array<i64: 7, 1>}
func.func @padding_rows(%z: tensor<4x64x1x56xbf16>, %x: tensor<4x64x56x56xbf16>) -> tensor<4x64x58x56xbf16> {
  %y = aten.cat %z, %x, %z {dim = 2 : i64} : tensor<4x64x1x56xbf16>, tensor<4x64x56x56xbf16>, tensor<4x64x1x56xbf16> -> tensor<4x64x58x56xbf16>
  return %y : tensor<4x64x58x56xbf16>
}

// A transfer in a few segments of runs is one region per segment: a channel
// norm of [3, 16, 8, 24] maps (reduced over C in a permuted frame, stored
// transposed: passes/FormKernels.cpp) has a row tile over the last 64
// positions of image 0 and the first 64 of image 1, stored in one transfer
// of two segments. As one bounding interval it would cover the next row
// tile's runs (image 1's positions 64 to 191 of every channel), whose store
// would then wait for it; kept as its runs, the two are independent, and
// that store (ready first) goes first.
// CHECK-LABEL: func.func @segments
// CHECK: nc.dma_store {{.*}}ap = array<i64: 192, 16, 1, 128>{{.*}}offset = 3136 : i64
// CHECK: nc.dma_store {{.*}}ap = array<i64: 192, 16, 2944, 2, 1, 64>{{.*}}offset = 128 : i64
func.func @segments(%x: tensor<3x16x8x24xf32>) -> tensor<3x16x8x24xf32> {
  %m = aten.mean.dim %x {dim = array<i64: 1>, keepdim = true} : tensor<3x16x8x24xf32> -> tensor<3x1x8x24xf32>
  %d = aten.sub.Tensor %x, %m : tensor<3x16x8x24xf32>, tensor<3x1x8x24xf32> -> tensor<3x16x8x24xf32>
  return %d : tensor<3x16x8x24xf32>
}

// Transfers of one access pattern at offsets that interleave but never meet
// (a patch embedding's im2col, a tile per channel, lower-to-isa-copies.mlir:
// each store's runs of 256 lie between the other channels' runs) do not
// wait for each other: the second channel's first store waits for the
// engines' copies only, no DMA queue.
// CHECK-LABEL: func.func @interleaved_tiles
// CHECK: nc.dma_store {{.*}}offset = 256 : i64, part_start = 0 : i64, {{.*}}waits = array<i64: 1, {{[0-9]+}}, 2, {{[0-9]+}}, 3, {{[0-9]+}}>}
func.func @interleaved_tiles(%x: tensor<8x3x224x224xbf16>) -> tensor<8x14x14x3x16x16xbf16> {
  %a = aten.reshape %x {size = array<i64: 8, 3, 14, 16, 14, 16>} : tensor<8x3x224x224xbf16> -> tensor<8x3x14x16x14x16xbf16>
  %p = aten.permute %a {dims = array<i64: 0, 2, 4, 1, 3, 5>} : tensor<8x3x14x16x14x16xbf16> -> tensor<8x14x14x3x16x16xbf16>
  %c = aten.clone %p : tensor<8x14x14x3x16x16xbf16> -> tensor<8x14x14x3x16x16xbf16>
  return %c : tensor<8x14x14x3x16x16xbf16>
}

// Pieces of one store whose patterns differ only in their partition counts
// (10, 10 and 8 rows of a permute copy's tile, its rows in segments of 28)
// are told apart exactly too: the third piece waits for the engines' copies
// only, not for the first two pieces' queues, and no later store chains
// behind it (with its bounding interval, every store of the kernel waited
// for the one before).
// CHECK-LABEL: func.func @uneven_pieces
// CHECK: nc.dma_store {{.*}}ap = array<i64: 64, 10, 28672, 32, 1792, 2, 1, 64>{{.*}}offset = 0 : i64, {{.*}}waits = array<i64: 2, [[N:[0-9]+]]>}
// CHECK-NEXT: nc.dma_store {{.*}}ap = array<i64: 64, 10, 28672, 32, 1792, 2, 1, 64>{{.*}}offset = 640 : i64, {{.*}}waits = array<i64: 2, [[N]]>}
// CHECK-NEXT: nc.dma_store {{.*}}ap = array<i64: 64, 8, 28672, 32, 1792, 2, 1, 64>{{.*}}offset = 1280 : i64, {{.*}}waits = array<i64: 2, [[N]]>}
// CHECK-NEXT: nc.dma_store {{.*}}offset = 3584 : i64, {{.*}}waits = array<i64: 2, [[N]]>}
func.func @uneven_pieces(%x: tensor<8x8x7x32x32x2xbf16>) -> tensor<32x8x2x7x8x32xbf16> {
  %p = aten.permute %x {dims = array<i64: 4, 0, 5, 2, 1, 3>} : tensor<8x8x7x32x32x2xbf16> -> tensor<32x8x2x7x8x32xbf16>
  %c = aten.clone %p : tensor<32x8x2x7x8x32xbf16> -> tensor<32x8x2x7x8x32xbf16>
  return %c : tensor<32x8x2x7x8x32xbf16>
}
