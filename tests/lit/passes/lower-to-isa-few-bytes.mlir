// RUN: neuron-opt %s --ncc-form-kernels --ncc-lower-to-isa | FileCheck %s
// RUN: neuron-opt %s --ncc-form-kernels --ncc-lower-to-isa=few-bytes=0 | FileCheck %s --check-prefix=OFF

// A kernel whose operands and results hold fewer bytes than the DMA queues
// move in one transfer's fixed cost (800 KiB on trn1) is lowered as one
// whose queues are idle (passes/LowerToIsa.cpp, movesFewBytes): its short
// rows pack or widen without keeping 8 row tiles for overlap, and each
// transfer goes in pieces of partitions over the queues its tiles leave.
// sigmoid over [300, 7, 3] bf16: 2100 rows of 6 bytes become 150 rows of 42
// elements, two row tiles; the first tile's load and store each go in four
// pieces of 32 partitions (16 queues, 2 tiles, 2 values).
// CHECK-LABEL: func.func @tiny
// CHECK: nc.dma_load {{.*}}ap = array<i64: 42, 32, 1, 42>{{.*}}offset = 0 : i64, part_start = 0 : i64{{.*}}memref<128x42xbf16, 1>
// CHECK: nc.dma_load {{.*}}ap = array<i64: 42, 32, 1, 42>{{.*}}offset = 1344 : i64, part_start = 32 : i64{{.*}}memref<128x42xbf16, 1>
// CHECK: nc.dma_load {{.*}}offset = 2688 : i64, part_start = 64 : i64
// CHECK: nc.dma_load {{.*}}offset = 4032 : i64, part_start = 96 : i64
// CHECK: nc.activation {{.*}}func = "sigmoid"{{.*}}memref<128x42xbf16, 1>
// CHECK-COUNT-4: nc.dma_store {{.*}}ap = array<i64: 42, 32, 1, 42>
// CHECK: nc.dma_load {{.*}}ap = array<i64: 42, 22, 1, 42>{{.*}}offset = 5376 : i64{{.*}}memref<22x42xbf16, 1>
// CHECK: nc.activation
// CHECK: nc.dma_store {{.*}}ap = array<i64: 42, 22, 1, 42>
// CHECK-NOT: nc.dma_
// CHECK: return
// Without the rule: rows packed two a partition to keep 8 row tiles, 9 row
// tiles of 128-run transfers.
// OFF-LABEL: func.func @tiny
// OFF-COUNT-8: nc.dma_load {{.*}}ap = array<i64: 6, 128, 1, 6>
// OFF: nc.dma_load {{.*}}ap = array<i64: 6, 26, 1, 6>
func.func @tiny(%x: tensor<300x7x3xbf16>) -> tensor<300x7x3xbf16> {
  %s = aten.sigmoid %x : tensor<300x7x3xbf16> -> tensor<300x7x3xbf16>
  return %s : tensor<300x7x3xbf16>
}

// A bias over rows of 49: the 2048 rows widen 16 to a partition, one row
// tile, loaded and stored in five pieces of (at most) 26 partitions; the
// bias is loaded once and widened on chip.
// CHECK-LABEL: func.func @long_rows
// CHECK: nc.dma_load {{.*}}ap = array<i64: 784, 26, 1, 784>{{.*}}part_start = 0 : i64{{.*}}memref<128x784xbf16, 1>
// CHECK: nc.dma_load {{.*}}ap = array<i64: 784, 24, 1, 784>{{.*}}part_start = 104 : i64
// CHECK: nc.dma_load {{.*}}ap = array<i64: 0, 128, 1, 49>{{.*}}memref<49xbf16>, memref<128x49xbf16, 1>
// CHECK-COUNT-5: nc.dma_store {{.*}}ap = array<i64: 784,
// CHECK-NOT: nc.dma_
// CHECK: return
func.func @long_rows(%x: tensor<8x256x49xbf16>, %b: tensor<49xbf16>) -> tensor<8x256x49xbf16> {
  %y = aten.add.Tensor %x, %b : tensor<8x256x49xbf16>, tensor<49xbf16> -> tensor<8x256x49xbf16>
  return %y : tensor<8x256x49xbf16>
}

// 1 MiB in all is not few: 16 row tiles, each moved whole.
// CHECK-LABEL: func.func @large
// CHECK-COUNT-16: nc.dma_load {{.*}}ap = array<i64: 256, 128, 1, 256>
// CHECK-NOT: nc.dma_load
// CHECK: return
func.func @large(%x: tensor<2048x256xbf16>) -> tensor<2048x256xbf16> {
  %s = aten.sigmoid %x : tensor<2048x256xbf16> -> tensor<2048x256xbf16>
  return %s : tensor<2048x256xbf16>
}
