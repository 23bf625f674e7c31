// x [256 x 256] @ W.t() with W [512 x 256]: 2 row tiles, 4 column tiles of
// 128, 2 k slices. With room, one block holds all four column tiles: W's 8
// slices and x's 4 (2 row tiles x 2 k slices) are loaded once each. When that
// is too large but two column tiles fit (a small budget here), two blocks of
// two: W is still loaded once (8 slices), x once per block (8). With no room,
// no blocks: W for every output tile (16), x once per row tile (4).
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa | grep -c "memref<512x256xf32>, memref<128x128xf32, 1>" | FileCheck %s --check-prefix=W8
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa | grep -c "memref<256x256xf32>, memref<128x128xf32, 1>" | FileCheck %s --check-prefix=X4
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa=row-budget-bytes=2048 | grep -c "memref<512x256xf32>, memref<128x128xf32, 1>" | FileCheck %s --check-prefix=W8
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa=row-budget-bytes=2048 | grep -c "memref<256x256xf32>, memref<128x128xf32, 1>" | FileCheck %s --check-prefix=X8
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa=row-budget-bytes=1024 | grep -c "memref<512x256xf32>, memref<128x128xf32, 1>" | FileCheck %s --check-prefix=W16
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa=row-budget-bytes=1024 | grep -c "memref<256x256xf32>, memref<128x128xf32, 1>" | FileCheck %s --check-prefix=X4
// W8: {{^}}8{{$}}
// W16: {{^}}16{{$}}
// X4: {{^}}4{{$}}
// X8: {{^}}8{{$}}
func.func @moving_blocks(%x: tensor<256x256xf32>, %w: tensor<512x256xf32>) -> tensor<256x512xf32> {
  %t = aten.t %w : tensor<512x256xf32> -> tensor<256x512xf32>
  %y = aten.mm %x, %t : tensor<256x256xf32>, tensor<256x512xf32> -> tensor<256x512xf32>
  return %y : tensor<256x512xf32>
}
