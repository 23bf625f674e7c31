// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa | FileCheck %s --check-prefix=REUSE
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa=row-budget-bytes=1024 | FileCheck %s --check-prefix=TIGHT

// x [256 x 256] @ W.t() with W [256 x 256]: 2 row tiles, 2 column tiles of
// 128 (the moving operand is transposed on the TensorEngine), 2 k slices.
// The kernel has no reduction, so its column tiles run in blocks, every row
// tile of a block in turn, and the block's moving slices are prepared once:
// W is loaded 4 times (2 k slices x 2 column tiles), not 8, and x once per
// row tile and k slice (4): 8 loads of [128 x 128] slices in all.
// REUSE-LABEL: func.func @moving_reuse
// REUSE-COUNT-8: memref<256x256xf32>, memref<128x128xf32, 1>
// REUSE-NOT: memref<256x256xf32>, memref<128x128xf32, 1>
// REUSE: return

// When the kept slices would make the kernel's tiles too large for SBUF (a
// tiny budget here), the kernel is lowered without keeping them: W is loaded
// for every output tile (8 times) and x once per row tile and k slice (4):
// 12 loads.
// TIGHT-LABEL: func.func @moving_reuse
// TIGHT-COUNT-12: memref<256x256xf32>, memref<128x128xf32, 1>
// TIGHT-NOT: memref<256x256xf32>, memref<128x128xf32, 1>
// TIGHT: return
func.func @moving_reuse(%x: tensor<256x256xf32>, %w: tensor<256x256xf32>) -> tensor<256x256xf32> {
  %t = aten.t %w : tensor<256x256xf32> -> tensor<256x256xf32>
  %y = aten.mm %x, %t : tensor<256x256xf32>, tensor<256x256xf32> -> tensor<256x256xf32>
  return %y : tensor<256x256xf32>
}

