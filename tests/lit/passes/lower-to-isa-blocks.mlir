// Matmul blocking (passes/LowerMatmul.cpp, the column blocks of
// LowerToIsa.cpp). x [256 x 256] @ W.t() with W [1536 x 256]: 2 row tiles, 3
// column tiles of 512, 2 k slices; both operands are read in rows (panels of
// up to 128 rows x the whole K here) and transposed on the TensorEngine.
//
// With room, one block holds all three column tiles' moving slices: W's 12
// panels are loaded once and transposed once (24 transposes), x once per row
// tile (2 panels, 4 transposes): 28 transposes.
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa | grep -c "dma_load.*memref<1536x256xf32>" | FileCheck %s --check-prefix=N12
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa | grep -c "dma_load.*memref<256x256xf32>" | FileCheck %s --check-prefix=N2
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa | grep -c "nc.transpose" | FileCheck %s --check-prefix=N28
//
// When all three are too large but one column tile's slices fit (a small
// budget here), three blocks of one: W is still loaded once, x once per block
// and row tile (6).
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa=row-budget-bytes=6144 | grep -c "dma_load.*memref<1536x256xf32>" | FileCheck %s --check-prefix=N12
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa=row-budget-bytes=6144 | grep -c "dma_load.*memref<256x256xf32>" | FileCheck %s --check-prefix=N6
//
// With no room, no blocks: W for every output tile (24 panels, 48
// transposes), x once per row tile (2).
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa=row-budget-bytes=1024 | grep -c "dma_load.*memref<1536x256xf32>" | FileCheck %s --check-prefix=N24
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa=row-budget-bytes=1024 | grep -c "dma_load.*memref<256x256xf32>" | FileCheck %s --check-prefix=N2
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa=row-budget-bytes=1024 | grep -c "nc.transpose" | FileCheck %s --check-prefix=N52
// N2: {{^}}2{{$}}
// N6: {{^}}6{{$}}
// N12: {{^}}12{{$}}
// N24: {{^}}24{{$}}
// N28: {{^}}28{{$}}
// N52: {{^}}52{{$}}
func.func @blocks(%x: tensor<256x256xf32>, %w: tensor<1536x256xf32>) -> tensor<256x1536xf32> {
  %t = aten.t %w : tensor<1536x256xf32> -> tensor<256x1536xf32>
  %y = aten.mm %x, %t : tensor<256x256xf32>, tensor<256x1536xf32> -> tensor<256x1536xf32>
  return %y : tensor<256x1536xf32>
}
