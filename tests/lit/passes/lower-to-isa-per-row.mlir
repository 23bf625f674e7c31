// Per-row values are computed once per row tile (passes/LowerToIsa.cpp): a
// [1 x 1024] @ [1024 x 1] product broadcast over a row of 2048 columns (four
// column tiles of 512) takes its 8 k-slice matmuls once, not once per column
// tile (32), and its operands' 8 + 8 slice loads once; the bias, an input
// broadcast along the row, is loaded once too. (The addmm is kept a matmul
// here; by default a product with one output column becomes a sum of
// products, decompose-composites.mlir.)
// RUN: neuron-opt %s --ncc-decompose-composites=legal-ops=aten.addmm --ncc-form-kernels --ncc-lower-to-isa | grep -c "nc.matmul" | FileCheck %s --check-prefix=MM
// RUN: neuron-opt %s --ncc-decompose-composites=legal-ops=aten.addmm --ncc-form-kernels --ncc-lower-to-isa | grep -c "dma_load.*memref<1024x1xf32>" | FileCheck %s --check-prefix=W
// RUN: neuron-opt %s --ncc-decompose-composites=legal-ops=aten.addmm --ncc-form-kernels --ncc-lower-to-isa | grep -c "dma_load.*memref<2048xf32>" | FileCheck %s --check-prefix=V
// RUN: neuron-opt %s --ncc-decompose-composites=legal-ops=aten.addmm --ncc-form-kernels --ncc-lower-to-isa | grep -c "dma_load.*memref<1x1xf32>" | FileCheck %s --check-prefix=ONE
// MM: {{^}}8{{$}}
// ONE: {{^}}1{{$}}
// W: {{^}}8{{$}}
// The broadcast vector is read once per column tile.
// V: {{^}}4{{$}}
func.func @per_row(%v: tensor<2048xf32>, %x: tensor<1x1024xf32>, %w: tensor<1024x1xf32>, %b: tensor<1x1xf32>) -> tensor<1x2048xf32> {
  %d = aten.addmm %b, %x, %w : tensor<1x1xf32>, tensor<1x1024xf32>, tensor<1024x1xf32> -> tensor<1x1xf32>
  %y = aten.mul.Tensor %v, %d : tensor<2048xf32>, tensor<1x1xf32> -> tensor<1x2048xf32>
  return %y : tensor<1x2048xf32>
}
