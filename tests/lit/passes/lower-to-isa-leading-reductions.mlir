// A softmax over dim 1 is computed in a frame whose last dim is the reduced
// one (passes/FormKernels.cpp, reduceInPermutedFrame): one kernel, its input
// read through a permutation, its result stored through the inverse one.
// Each row tile is one batch's 128 columns of x; its 512 softmax columns
// are 4 blocks of 128, loaded in one transfer (the blocks side by side on
// the free dim) and transposed on the TensorEngine one by one
// (passes/LowerToIsa.cpp, loadTransposed). The first row tile's blocks are
// transposed back and stored together, since no other row tile continues
// its rows; the last row tile's go out one by one, spread over the queues
// (storeTransposed).
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels=fuse=true | FileCheck %s --check-prefix=FORM
// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels=fuse=true --ncc-lower-to-isa | FileCheck %s
// FORM: nc.kernel "k0_softmax"
// FORM: aten.permute %{{.*}} {dims = array<i64: 0, 2, 1>{{.*}} : tensor<2x512x128xf32> -> tensor<2x128x512xf32>
// FORM: aten.amax {{.*}}dim = array<i64: 2>
// FORM: aten.permute %{{.*}} {dims = array<i64: 0, 2, 1>{{.*}} : tensor<2x128x512xf32> -> tensor<2x512x128xf32>
// FORM-NOT: nc.kernel "k1
// CHECK: nc.dma_load %arg1 -> %[[B:.*]] {ap = array<i64: 128, 128, 16384, 4, 1, 128>, {{.*}}offset = 0 : i64
// CHECK-COUNT-4: nc.transpose
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 128, 128, 16384, 4, 1, 128>, {{.*}}offset = 0 : i64
// CHECK: nc.dma_load %arg1 {{.*}} {ap = array<i64: 128, 128, 16384, 4, 1, 128>, {{.*}}offset = 65536 : i64
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 128, 128, 1, 128>, {{.*}}offset = 65536 : i64
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 128, 128, 1, 128>, {{.*}}offset = 81920 : i64
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 128, 128, 1, 128>, {{.*}}offset = 98304 : i64
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 128, 128, 1, 128>, {{.*}}offset = 114688 : i64
// CHECK-NOT: nc.dma_store
func.func @softmax_dim1(%x: tensor<2x512x128xf32>) -> tensor<2x512x128xf32> {
  %p = aten._softmax %x {dim = 1 : i64, half_to_float = false} : tensor<2x512x128xf32> -> tensor<2x512x128xf32>
  return %p : tensor<2x512x128xf32>
}
