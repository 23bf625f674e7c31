// RUN: neuron-opt %s --split-input-file --verify-diagnostics

func.func @yield_mismatch(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{yielded values must match the kernel results}}
  %r = nc.kernel "k"(%x) {source_ops = []} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    nc.yield
  }
  return %r : tensor<4xf32>
}

// -----

func.func @result_sources_count(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{result_sources has 2 entries for 1 results}}
  %r = nc.kernel "k"(%x) {result_sources = ["aten.exp", "aten.neg"], source_ops = []} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    nc.yield %a : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @args_mismatch(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{body arguments must match the kernel inputs}}
  %r = nc.kernel "k"(%x) {source_ops = []} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<8xf32>):
    nc.yield %x : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @lowered_arg_count(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{lowered body takes 1 input and 1 output memrefs, got 1}}
  %r = nc.kernel "k"(%x) {source_ops = []} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: memref<4xf32>):
    nc.yield
  }
  return %r : tensor<4xf32>
}

// -----

func.func @lowered_arg_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{lowered body argument 1 must be an HBM memref holding 'tensor<4xf32>'}}
  %r = nc.kernel "k"(%x) {source_ops = []} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: memref<4xf32>, %b: memref<4xbf16>):
    nc.yield
  }
  return %r : tensor<4xf32>
}

// -----

func.func @too_many_partitions() {
  // expected-error @+1 {{result spans 256 partitions; a NeuronCore has 128}}
  %t = nc.alloc_tile : memref<256x4xf32, 1>
  return
}

// -----

func.func @negative_offset() {
  // expected-error @+1 {{offset must be non-negative}}
  %t = nc.alloc_tile {offset = -4 : i64} : memref<4x4xf32, 1>
  return
}

// -----

func.func @not_sbuf(%m: memref<4x4xf32>) {
  %t = nc.alloc_tile : memref<4x4xf32, 1>
  // expected-error @+1 {{in0 must be an SBUF tile (rank-2 memref in memory space 1) or a PSUM tile (memory space 2), got 'memref<4x4xf32>'}}
  nc.tensor_tensor %t, %m, %t {alu = "add"} : memref<4x4xf32, 1>, memref<4x4xf32>, memref<4x4xf32, 1>
  return
}

// -----

func.func @shape_mismatch() {
  %a = nc.alloc_tile : memref<4x4xf32, 1>
  %b = nc.alloc_tile : memref<4x8xf32, 1>
  // expected-error @+1 {{out and in1 tiles must have the same shape}}
  nc.tensor_tensor %a, %a, %b {alu = "add"} : memref<4x4xf32, 1>, memref<4x4xf32, 1>, memref<4x8xf32, 1>
  return
}

// -----

func.func @bad_alu() {
  %a = nc.alloc_tile : memref<4x4xf32, 1>
  // expected-error @+1 {{alu 'xor' is not one of add, sub, mul, div, max, min, is_equal, not_equal, is_lt, is_le, is_gt, is_ge, pow}}
  nc.tensor_tensor %a, %a, %a {alu = "xor"} : memref<4x4xf32, 1>, memref<4x4xf32, 1>, memref<4x4xf32, 1>
  return
}

// -----

func.func @scalar_partitions() {
  %a = nc.alloc_tile : memref<4x4xf32, 1>
  %s = nc.alloc_tile : memref<2x1xf32, 1>
  // expected-error @+1 {{scalar must span the output's 4 partitions}}
  nc.tensor_scalar %a, %a, %s {alu = "mul"} : memref<4x4xf32, 1>, memref<4x4xf32, 1>, memref<2x1xf32, 1>
  return
}

// -----

func.func @bad_func() {
  %a = nc.alloc_tile : memref<4x4xf32, 1>
  // expected-error @+1 {{unknown activation function 'tanhh'}}
  nc.activation %a, %a {func = "tanhh"} : memref<4x4xf32, 1>, memref<4x4xf32, 1>
  return
}

// -----

func.func @reduce_shape() {
  %a = nc.alloc_tile : memref<4x4xf32, 1>
  // expected-error @+1 {{out must be one element per partition of in0}}
  nc.tensor_reduce %a, %a {alu = "add"} : memref<4x4xf32, 1>, memref<4x4xf32, 1>
  return
}

// -----

func.func @dma_converts(%m: memref<4x4xf32>) {
  %a = nc.alloc_tile : memref<4x4xbf16, 1>
  // expected-error @+1 {{DMA does not convert (but for integers and f32 tiles): HBM 'f32' vs tile 'bf16'}}
  nc.dma_load %m -> %a {part_start = 0, offset = 0, ap = array<i64: 4, 4, 1, 4>} : memref<4x4xf32>, memref<4x4xbf16, 1>
  return
}

// -----

// Integers load into (and store from) f32 tiles only.
func.func @dma_integer_into_bf16(%m: memref<4x4xi64>) {
  %a = nc.alloc_tile : memref<4x4xbf16, 1>
  // expected-error @+1 {{DMA does not convert (but for integers and f32 tiles): HBM 'i64' vs tile 'bf16'}}
  nc.dma_load %m -> %a {part_start = 0, offset = 0, ap = array<i64: 4, 4, 1, 4>} : memref<4x4xi64>, memref<4x4xbf16, 1>
  return
}

// -----

func.func @dma_store_into_integers(%m: memref<4x4xi32>) {
  %a = nc.alloc_tile : memref<4x4xf16, 1>
  // expected-error @+1 {{DMA does not convert (but for integers and f32 tiles): HBM 'i32' vs tile 'f16'}}
  nc.dma_store %a -> %m {part_start = 0, offset = 0, ap = array<i64: 4, 4, 1, 4>} : memref<4x4xf16, 1>, memref<4x4xi32>
  return
}

// -----

func.func @dma_pattern(%m: memref<4x4xf32>) {
  %a = nc.alloc_tile : memref<4x4xf32, 1>
  // expected-error @+1 {{access pattern needs (stride, count) pairs for the partition dims and at least one free dim}}
  nc.dma_load %m -> %a {part_start = 0, offset = 0, ap = array<i64: 4, 4>} : memref<4x4xf32>, memref<4x4xf32, 1>
  return
}

// -----

func.func @dma_two_partition_dims_no_free(%m: memref<4x4xf32>) {
  %a = nc.alloc_tile : memref<4x4xf32, 1>
  // expected-error @+1 {{access pattern needs (stride, count) pairs for the partition dims and at least one free dim}}
  nc.dma_load %m -> %a {part_start = 0, offset = 0, ap = array<i64: 8, 2, 4, 2>, partition_dims = 2} : memref<4x4xf32>, memref<4x4xf32, 1>
  return
}

// -----

func.func @dma_three_partition_dims(%m: memref<4x4xf32>) {
  %a = nc.alloc_tile : memref<4x4xf32, 1>
  // expected-error @+1 {{partition_dims must be 1 or 2 (1 for a gather)}}
  nc.dma_store %a -> %m {part_start = 0, offset = 0, ap = array<i64: 8, 2, 4, 2, 1, 1, 1, 4>, partition_dims = 3} : memref<4x4xf32, 1>, memref<4x4xf32>
  return
}

// -----

func.func @dma_two_partition_dims_count(%m: memref<4x4xf32>) {
  %a = nc.alloc_tile : memref<4x4xf32, 1>
  // expected-error @+1 {{partitions [0, 6) are outside the tile's 4}}
  nc.dma_load %m -> %a {part_start = 0, offset = 0, ap = array<i64: 1, 2, 4, 3, 1, 4>, partition_dims = 2} : memref<4x4xf32>, memref<4x4xf32, 1>
  return
}

// -----

func.func @dma_two_partition_dims_reach(%m: memref<4x4xf32>) {
  %a = nc.alloc_tile : memref<4x4xf32, 1>
  // expected-error @+1 {{access pattern reaches elements [0, 19] of an HBM tensor with 16 elements}}
  nc.dma_load %m -> %a {part_start = 0, offset = 0, ap = array<i64: 12, 2, 4, 2, 1, 4>, partition_dims = 2} : memref<4x4xf32>, memref<4x4xf32, 1>
  return
}

// -----

func.func @dma_partitions(%m: memref<4x4xf32>) {
  %a = nc.alloc_tile : memref<4x4xf32, 1>
  // expected-error @+1 {{partitions [2, 6) are outside the tile's 4}}
  nc.dma_load %m -> %a {part_start = 2, offset = 0, ap = array<i64: 4, 4, 1, 4>} : memref<4x4xf32>, memref<4x4xf32, 1>
  return
}

// -----

func.func @dma_free(%m: memref<4x4xf32>) {
  %a = nc.alloc_tile : memref<4x4xf32, 1>
  // expected-error @+1 {{access pattern moves 8 elements per partition, the tile holds 4}}
  nc.dma_store %a -> %m {part_start = 0, offset = 0, ap = array<i64: 4, 4, 1, 8>} : memref<4x4xf32, 1>, memref<4x4xf32>
  return
}

// -----

func.func @accum_partitions() {
  %a = nc.alloc_tile : memref<4x4xf32, 1>
  %s = nc.alloc_tile : memref<8x1xf32, 1>
  // expected-error @+1 {{accum must span the output's 4 partitions}}
  nc.activation %a, %a accum %s : memref<8x1xf32, 1> {func = "square"} : memref<4x4xf32, 1>, memref<4x4xf32, 1>
  return
}

// -----

func.func @lowered_yields(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{lowered body must yield nothing}}
  %r = nc.kernel "k"(%x) {source_ops = []} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: memref<4xf32>, %b: memref<4xf32>):
    nc.yield %a : memref<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @dma_from_sbuf() {
  %a = nc.alloc_tile : memref<4x4xf32, 1>
  // expected-error @+1 {{HBM operand must be a plain memref}}
  "nc.dma_load"(%a, %a) {part_start = 0 : i64, offset = 0 : i64, ap = array<i64: 4, 4, 1, 4>} : (memref<4x4xf32, 1>, memref<4x4xf32, 1>) -> ()
  return
}

// -----

func.func @reduce_alu() {
  %a = nc.alloc_tile : memref<4x4xf32, 1>
  %o = nc.alloc_tile : memref<4x1xf32, 1>
  // expected-error @+1 {{alu 'mul' is not one of add, max, min}}
  nc.tensor_reduce %o, %a {alu = "mul"} : memref<4x1xf32, 1>, memref<4x4xf32, 1>
  return
}

// -----

func.func @scale_partitions() {
  %a = nc.alloc_tile : memref<4x4xf32, 1>
  %s = nc.alloc_tile : memref<3x1xf32, 1>
  // expected-error @+1 {{scale_tile must span the output's 4 partitions}}
  nc.activation %a, %a scale %s : memref<3x1xf32, 1> {func = "exp"} : memref<4x4xf32, 1>, memref<4x4xf32, 1>
  return
}

// -----

func.func @matmul_psum() {
  %a = nc.alloc_tile : memref<128x128xbf16, 1>
  %b = nc.alloc_tile : memref<128x512xbf16, 1>
  %o = nc.alloc_tile : memref<128x512xf32, 1>
  // expected-error @+1 {{out must be a PSUM tile (memory space 2), got 'memref<128x512xf32, 1>'}}
  nc.matmul %o, %a, %b : memref<128x512xf32, 1>, memref<128x128xbf16, 1>, memref<128x512xbf16, 1>
  return
}

// -----

func.func @matmul_contraction() {
  %a = nc.alloc_tile : memref<64x128xbf16, 1>
  %b = nc.alloc_tile : memref<128x512xbf16, 1>
  %o = nc.alloc_psum : memref<128x512xf32, 2>
  // expected-error @+1 {{stationary and moving must share the contraction (partition) dim, got 64 and 128}}
  nc.matmul %o, %a, %b : memref<128x512xf32, 2>, memref<64x128xbf16, 1>, memref<128x512xbf16, 1>
  return
}

// -----

func.func @matmul_bank() {
  %a = nc.alloc_tile : memref<128x128xbf16, 1>
  %b = nc.alloc_tile : memref<128x1024xbf16, 1>
  %o = nc.alloc_psum : memref<128x1024xf32, 2>
  // expected-error @+1 {{moving free size 1024 exceeds one 2 KiB PSUM bank (512 f32)}}
  nc.matmul %o, %a, %b : memref<128x1024xf32, 2>, memref<128x128xbf16, 1>, memref<128x1024xbf16, 1>
  return
}

// -----

func.func @matmul_out_shape() {
  %a = nc.alloc_tile : memref<128x64xbf16, 1>
  %b = nc.alloc_tile : memref<128x512xbf16, 1>
  %o = nc.alloc_psum : memref<128x512xf32, 2>
  // expected-error @+1 {{out must be [64 x 512], got [128 x 512]}}
  nc.matmul %o, %a, %b : memref<128x512xf32, 2>, memref<128x64xbf16, 1>, memref<128x512xbf16, 1>
  return
}

// -----

func.func @transpose_shape() {
  %a = nc.alloc_tile : memref<128x64xbf16, 1>
  %o = nc.alloc_psum : memref<128x64xf32, 2>
  // expected-error @+1 {{out must be [64 x 128]}}
  nc.transpose %o, %a : memref<128x64xf32, 2>, memref<128x64xbf16, 1>
  return
}

// -----

func.func @select_shape() {
  %a = nc.alloc_tile : memref<4x4xf32, 1>
  %m = nc.alloc_tile : memref<4x1xf32, 1>
  // expected-error @+1 {{out and pred tiles must have the same shape}}
  nc.tensor_select %a, %a, %a, %m : memref<4x4xf32, 1>, memref<4x4xf32, 1>, memref<4x4xf32, 1>, memref<4x1xf32, 1>
  return
}

// -----

func.func @dma_extent(%m: memref<4x4xf32>) {
  %a = nc.alloc_tile : memref<4x4xf32, 1>
  // expected-error @+1 {{access pattern reaches elements [2, 17] of an HBM tensor with 16 elements}}
  nc.dma_load %m -> %a {part_start = 0, offset = 2, ap = array<i64: 4, 4, 1, 4>} : memref<4x4xf32>, memref<4x4xf32, 1>
  return
}

// -----

func.func @dma_negative_extent(%m: memref<4x4xf32>) {
  %a = nc.alloc_tile : memref<4x4xf32, 1>
  // expected-error @+1 {{access pattern reaches elements [-3, 3] of an HBM tensor with 16 elements}}
  nc.dma_store %a -> %m {part_start = 0, offset = 0, ap = array<i64: -1, 4, 1, 4>} : memref<4x4xf32, 1>, memref<4x4xf32>
  return
}

// -----

func.func @tile_columns_range() {
  %a = nc.alloc_psum : memref<128x512xf32, 2>
  // expected-error @+1 {{columns [448, 576) are outside the source's 512}}
  %v = nc.tile_columns %a [448] : memref<128x512xf32, 2> -> memref<128x128xf32, 2>
  return
}

// -----

func.func @tile_columns_type() {
  %a = nc.alloc_tile : memref<128x512xbf16, 1>
  // expected-error @+1 {{result must be a tile of the source's partitions, element type and memory}}
  %v = nc.tile_columns %a [0] : memref<128x512xbf16, 1> -> memref<64x128xbf16, 1>
  return
}

// -----

func.func @tile_columns_source(%m: memref<128x512xf32, 1>) {
  // expected-error @+1 {{source must be an alloc_tile or alloc_psum result, or a column range of one}}
  %v = nc.tile_columns %m [0] : memref<128x512xf32, 1> -> memref<128x128xf32, 1>
  return
}

// -----

func.func @tile_columns_step_range() {
  %a = nc.alloc_tile : memref<128x64xf32, 1>
  // expected-error @+1 {{columns [2, 65) are outside the source's 64}}
  %v = nc.tile_columns %a [2] {step = 2 : i64} : memref<128x64xf32, 1> -> memref<128x32xf32, 1>
  return
}

// -----

func.func @tile_columns_step_positive() {
  %a = nc.alloc_tile : memref<128x64xf32, 1>
  // expected-error @+1 {{step must be positive, got 0}}
  %v = nc.tile_columns %a [0] {step = 0 : i64} : memref<128x64xf32, 1> -> memref<128x32xf32, 1>
  return
}

// -----

func.func @tile_columns_of_stepped() {
  %a = nc.alloc_tile : memref<128x64xf32, 1>
  %v = nc.tile_columns %a [0] {step = 2 : i64} : memref<128x64xf32, 1> -> memref<128x32xf32, 1>
  // expected-error @+1 {{source steps through its columns; a stepped view is read by instructions only}}
  %w = nc.tile_columns %v [0] : memref<128x32xf32, 1> -> memref<128x16xf32, 1>
  return
}
