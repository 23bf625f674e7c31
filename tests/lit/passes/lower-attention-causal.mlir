// A causal mask that folds to a constant (key index above query index:
// masked with -inf) lets the attention skip the chunks above the diagonal
// and mask only the diagonal ones (passes/LowerAttention.cpp). 1 head, 256
// queries and keys (2 query blocks, 2 chunks of 128 keys), head dim 64.
//
// Query block 0 computes chunk 0 (chunk 1 is all masked); query block 1
// computes chunks 0 and 1 as one key block, chunk 0 untouched by the mask.
// So 2 score matmuls and 1 + 2 products with V: 5 matmuls. The mask is one
// select over the 128 diagonal columns per query block, written in place
// over the scaled scores, 2 in all.
// RUN: neuron-opt %s --ncc-fold-constants --ncc-decompose-composites --ncc-form-kernels=fuse=true --ncc-lower-to-isa | FileCheck %s
// RUN: neuron-opt %s --ncc-fold-constants --ncc-decompose-composites --ncc-form-kernels=fuse=true --ncc-lower-to-isa | grep -c "nc.matmul" | FileCheck %s --check-prefix=MM
// RUN: neuron-opt %s --ncc-fold-constants --ncc-decompose-composites --ncc-form-kernels=fuse=true --ncc-lower-to-isa | grep -c "nc.tensor_select" | FileCheck %s --check-prefix=SEL
// MM: 5
// SEL: 2
// CHECK: nc.kernel "k0_attention"
// Query block 1: the scores of its 256 keys, scaled, then the diagonal
// chunk's columns masked in place.
// CHECK: %[[S:.*]] = nc.alloc_tile {{.*}} : memref<128x256xf32, 1>
// CHECK: nc.tensor_scalar {{.*}} : memref<128x256xf32, 1>, memref<128x256xf32, 2>
// CHECK: %[[D:.*]] = nc.tile_columns %[[S]][128] : memref<128x256xf32, 1> -> memref<128x128xf32, 1>
// CHECK: nc.tensor_select %[[D]], {{.*}}, %[[D]]
// CHECK: nc.tensor_reduce %{{.*}}, %[[S]] {alu = "max"
func.func @causal(%q: tensor<1x256x64xf32>, %k: tensor<1x256x64xf32>, %v: tensor<1x256x64xf32>) -> tensor<1x256x64xf32> {
  %i = arith.constant dense<[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63,64,65,66,67,68,69,70,71,72,73,74,75,76,77,78,79,80,81,82,83,84,85,86,87,88,89,90,91,92,93,94,95,96,97,98,99,100,101,102,103,104,105,106,107,108,109,110,111,112,113,114,115,116,117,118,119,120,121,122,123,124,125,126,127,128,129,130,131,132,133,134,135,136,137,138,139,140,141,142,143,144,145,146,147,148,149,150,151,152,153,154,155,156,157,158,159,160,161,162,163,164,165,166,167,168,169,170,171,172,173,174,175,176,177,178,179,180,181,182,183,184,185,186,187,188,189,190,191,192,193,194,195,196,197,198,199,200,201,202,203,204,205,206,207,208,209,210,211,212,213,214,215,216,217,218,219,220,221,222,223,224,225,226,227,228,229,230,231,232,233,234,235,236,237,238,239,240,241,242,243,244,245,246,247,248,249,250,251,252,253,254,255]> : tensor<256xi64>
  %rows = aten.view %i {size = array<i64: 256, 1>} : tensor<256xi64> -> tensor<256x1xi64>
  %cols = aten.view %i {size = array<i64: 1, 256>} : tensor<256xi64> -> tensor<1x256xi64>
  %mask = aten.gt.Tensor %cols, %rows : tensor<1x256xi64>, tensor<256x1xi64> -> tensor<256x256xi1>
  %kt = aten.transpose.int %k {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<1x256x64xf32> -> tensor<1x64x256xf32>
  %s = aten.bmm %q, %kt : tensor<1x256x64xf32>, tensor<1x64x256xf32> -> tensor<1x256x256xf32>
  %x = aten.div.Scalar %s, 8.0 : tensor<1x256x256xf32> -> tensor<1x256x256xf32>
  %xm = aten.masked_fill.Scalar %x, %mask, 0xFFF0000000000000 : tensor<1x256x256xf32>, tensor<256x256xi1> -> tensor<1x256x256xf32>
  %p = aten._softmax %xm {dim = -1 : i64} : tensor<1x256x256xf32> -> tensor<1x256x256xf32>
  %o = aten.bmm %p, %v : tensor<1x256x256xf32>, tensor<1x256x64xf32> -> tensor<1x256x64xf32>
  return %o : tensor<1x256x64xf32>
}
