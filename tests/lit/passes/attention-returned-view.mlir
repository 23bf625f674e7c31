// An attention whose output the graph returns through the head merge
// (transpose, then a reshape into [tokens, heads * d]) stores it through
// the merge's inverse access pattern itself: one kernel, no copy kernel
// after it (passes/FormKernels.cpp, the returned views; LowerAttention.cpp
// returns one view of its output). 2 heads of 64, 128 queries and keys.
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels=fuse=true | FileCheck %s --check-prefix=FORM
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels=fuse=true --ncc-lower-to-isa | FileCheck %s
// FORM: nc.kernel "k0_attention"{{.*}} -> tensor<1x128x128xf32>
// FORM-NOT: nc.kernel "k1
// Each head's [128 x 64] block goes to columns h * 64 of the merged rows.
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 128, 128, 1, 64>, {{.*}} offset = 0 : i64{{.*}} memref<1x128x128xf32>
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 128, 128, 1, 64>, {{.*}} offset = 64 : i64{{.*}} memref<1x128x128xf32>
func.func @merged(%q: tensor<2x128x64xf32>, %k: tensor<2x128x64xf32>, %v: tensor<2x128x64xf32>) -> tensor<1x128x128xf32> {
  %kt = aten.transpose.int %k {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x128x64xf32> -> tensor<2x64x128xf32>
  %s = aten.bmm %q, %kt : tensor<2x128x64xf32>, tensor<2x64x128xf32> -> tensor<2x128x128xf32>
  %x = aten.div.Scalar %s, 8.0 : tensor<2x128x128xf32> -> tensor<2x128x128xf32>
  %p = aten._softmax %x {dim = -1 : i64} : tensor<2x128x128xf32> -> tensor<2x128x128xf32>
  %o = aten.bmm %p, %v : tensor<2x128x128xf32>, tensor<2x128x64xf32> -> tensor<2x128x64xf32>
  %o4 = aten.view %o {size = array<i64: 1, 2, 128, 64>} : tensor<2x128x64xf32> -> tensor<1x2x128x64xf32>
  %t = aten.transpose.int %o4 {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<1x2x128x64xf32> -> tensor<1x128x2x64xf32>
  %m = aten.reshape %t {size = array<i64: 1, 128, 128>} : tensor<1x128x2x64xf32> -> tensor<1x128x128xf32>
  return %m : tensor<1x128x128xf32>
}
