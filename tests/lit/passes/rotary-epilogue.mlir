// The rotary embedding of a projection's heads (view [1, s, heads, d],
// transpose to [1, heads, s, d], then q * cos + rotate_half(q) * sin) runs
// in the projection's kernel (passes/FormKernels.cpp,
// movePermutationsPastEpilogues and joinsSplitColumns): the elementwise ops
// move before the transpose, onto the matmul's [tokens, heads * d] rows,
// and the kernel returns the transposed result as a view. 128 tokens, 8
// heads of 128: two output tiles of 512 columns (four heads each).
//
// Per output tile: cos and sin loaded once for its four heads (stride 0
// over the heads), rotate_half as 8 copies of 64 columns (two halves of
// four heads) from the tile of the product, the result stored through the
// transpose (head stride 128 x 128).
// RUN: neuron-opt %s --ncc-form-kernels=fuse=true | FileCheck %s --check-prefix=FORM
// RUN: neuron-opt %s --ncc-form-kernels=fuse=true --ncc-lower-to-isa | FileCheck %s
// RUN: neuron-opt %s --ncc-form-kernels=fuse=true --ncc-lower-to-isa | grep -c "memref<128x64xf32, 1>, memref<128x64xf32, 1>" | FileCheck %s --check-prefix=HALVES
// FORM: nc.kernel "k0_fused_t_mm_view_expand_etc"
// FORM: aten.mm
// FORM: aten.cat {{.*}} : tensor<1x128x8x64xf32>, tensor<1x128x8x64xf32> -> tensor<1x128x8x128xf32>
// FORM: aten.transpose.int {{.*}} : tensor<1x128x8x128xf32> -> tensor<1x8x128x128xf32>
// FORM-NOT: nc.kernel "k1
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 128, 32, 0, 4, 1, 128>, {{.*}} : memref<128x128xf32>, memref<128x512xf32, 1>
// CHECK: nc.matmul
// CHECK: nc.tile_columns %{{.*}}[64] : memref<128x512xf32, 1> -> memref<128x64xf32, 1>
// CHECK: nc.dma_store %{{.*}} {ap = array<i64: 128, 32, 16384, 4, 1, 128>, {{.*}} : memref<128x512xf32, 1>, memref<1x8x128x128xf32>
// HALVES: 16
func.func @rotary(%x: tensor<128x128xf32>, %w: tensor<1024x128xf32>, %cos: tensor<128x128xf32>, %sin: tensor<128x128xf32>) -> tensor<1x8x128x128xf32> {
  %wt = aten.t %w : tensor<1024x128xf32> -> tensor<128x1024xf32>
  %y = aten.mm %x, %wt : tensor<128x128xf32>, tensor<128x1024xf32> -> tensor<128x1024xf32>
  %h = aten.view %y {size = array<i64: 1, 128, 8, 128>} : tensor<128x1024xf32> -> tensor<1x128x8x128xf32>
  %q = aten.transpose.int %h {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<1x128x8x128xf32> -> tensor<1x8x128x128xf32>
  %qc = aten.mul.Tensor %q, %cos : tensor<1x8x128x128xf32>, tensor<128x128xf32> -> tensor<1x8x128x128xf32>
  %hi = aten.slice.Tensor %q {dim = 3 : i64, start = 64 : i64, end = 128 : i64, step = 1 : i64} : tensor<1x8x128x128xf32> -> tensor<1x8x128x64xf32>
  %lo = aten.slice.Tensor %q {dim = 3 : i64, start = 0 : i64, end = 64 : i64, step = 1 : i64} : tensor<1x8x128x128xf32> -> tensor<1x8x128x64xf32>
  %nhi = aten.neg %hi : tensor<1x8x128x64xf32> -> tensor<1x8x128x64xf32>
  %r = aten.cat %nhi, %lo {dim = -1 : i64} : tensor<1x8x128x64xf32>, tensor<1x8x128x64xf32> -> tensor<1x8x128x128xf32>
  %rs = aten.mul.Tensor %r, %sin : tensor<1x8x128x128xf32>, tensor<128x128xf32> -> tensor<1x8x128x128xf32>
  %o = aten.add.Tensor %qc, %rs : tensor<1x8x128x128xf32>, tensor<1x8x128x128xf32> -> tensor<1x8x128x128xf32>
  return %o : tensor<1x8x128x128xf32>
}
