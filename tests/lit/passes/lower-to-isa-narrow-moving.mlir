// A matmul with one column tile (N <= 512) and several row tiles keeps its
// moving slices across the row tiles like a column block does (the column
// blocks of LowerToIsa.cpp): x [512 x 1024] @ w [1024 x 64] loads w's 8 k
// slices once, not once for each of the 4 row tiles (32 loads of 128 runs
// of 128 bytes, each paying the fixed 2 us: a 4096 x 4096 x 16 product was
// DMA-bound at 419 us).
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa | grep -c "dma_load.*memref<1024x64xbf16>" | FileCheck %s --check-prefix=N8
// With no room for kept slices, each row tile loads them again.
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa=row-budget-bytes=512 | grep -c "dma_load.*memref<1024x64xbf16>" | FileCheck %s --check-prefix=N32
// N8: {{^}}8{{$}}
// N32: {{^}}32{{$}}
func.func @narrow_moving(%x: tensor<512x1024xbf16>, %w: tensor<1024x64xbf16>) -> tensor<512x64xbf16> {
  %y = aten.mm %x, %w : tensor<512x1024xbf16>, tensor<1024x64xbf16> -> tensor<512x64xbf16>
  return %y : tensor<512x64xbf16>
}
