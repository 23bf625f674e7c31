// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa | FileCheck %s

// Where each output tile of a matmul kernel is a single matmul (K <= 128),
// its stores bound the kernel: they are sized by the whole output (8 MiB
// here), so each [128 x 512] bf16 tile goes out in one 128 KiB transfer
// instead of two of 64 KiB, each paying the fixed 2 us. The last tile is the
// kernel's drain and still splits (passes/LowerToIsa.cpp, emitDma).
// CHECK-LABEL: func.func @single_slice_stores
// CHECK-COUNT-63: nc.dma_store {{.*}}ap = array<i64: 2048, 128, 1, 512>
// CHECK-NOT: nc.dma_store {{.*}}ap = array<i64: 2048, 128, 1, 512>
// CHECK: nc.dma_store {{.*}}ap = array<i64: 2048, 64, 1, 512>
// CHECK: return
func.func @single_slice_stores(%x: tensor<2048x128xbf16>, %w: tensor<128x2048xbf16>) -> tensor<2048x2048xbf16> {
  %y = aten.mm %x, %w : tensor<2048x128xbf16>, tensor<128x2048xbf16> -> tensor<2048x2048xbf16>
  return %y : tensor<2048x2048xbf16>
}

// With two k slices the TensorEngine keeps pace: the stores keep the
// elementwise rule, by the column tile (128 KiB a row tile, in two pieces).
// CHECK-LABEL: func.func @two_slice_stores
// CHECK-NOT: nc.dma_store {{.*}}ap = array<i64: 2048, 128, 1, 512>
// CHECK: nc.dma_store {{.*}}ap = array<i64: 2048, 64, 1, 512>{{.*}}part_start = 0
// CHECK-NEXT: nc.dma_store {{.*}}ap = array<i64: 2048, 64, 1, 512>{{.*}}part_start = 64
// CHECK-NOT: nc.dma_store {{.*}}ap = array<i64: 2048, 128, 1, 512>
// CHECK: return
func.func @two_slice_stores(%x: tensor<2048x256xbf16>, %w: tensor<256x2048xbf16>) -> tensor<2048x2048xbf16> {
  %y = aten.mm %x, %w : tensor<2048x256xbf16>, tensor<256x2048xbf16> -> tensor<2048x2048xbf16>
  return %y : tensor<2048x2048xbf16>
}
