// RUN: neuron-opt %s --split-input-file --ncc-form-kernels="fuse=true sbuf-budget-bytes=16384" --ncc-lower-to-isa="row-budget-bytes=16384" | FileCheck %s

// A middle frame whose row of R blocks does not fit (passes/LowerMiddleFrame.cpp,
// chunks): with 16 KiB a partition, the 16 x 128 f32 squares of a row do
// not, so the kernel runs over the channels in two chunks of 8, each
// loaded in runs of 8 x 128 elements, squared, and added into an
// accumulator of its own (chunks alternate between two, so that their adds
// are two chains), the two added at the end; the sums are stored once. It
// reads its input once: no value of the input's size depends on the sum or
// is returned.
// CHECK-LABEL: func.func @sum_of_squares_in_chunks
// CHECK: nc.kernel "k0_fused_mul_sum_reshape"({{.*}}) {nc.middle_frame
// CHECK: nc.dma_load {{.*}} {ap = array<i64: 2048, 16, 1, 1024>, {{.*}} offset = 0 : i64
// CHECK: nc.tensor_tensor %[[SQ:.*]], %[[X:.*]], %[[X]] {alu = "mul", {{.*}} : memref<128x1024xf32, 1>
// CHECK: nc.tensor_tensor %[[ACC:.*]], %{{.*}}, %{{.*}} {alu = "add", {{.*}} : memref<128x128xf32, 1>
// CHECK-COUNT-6: nc.tensor_tensor %[[ACC]], %[[ACC]], %{{.*}} {alu = "add"
// CHECK: nc.dma_load {{.*}} {ap = array<i64: 2048, 16, 1, 1024>, {{.*}} offset = 1024 : i64
// CHECK: nc.tensor_tensor %{{.*}}, %[[Y:.*]], %[[Y]] {alu = "mul", {{.*}} : memref<128x1024xf32, 1>
// CHECK: nc.tensor_tensor %[[ACC1:.*]], %{{.*}}, %{{.*}} {alu = "add", {{.*}} : memref<128x128xf32, 1>
// CHECK-COUNT-6: nc.tensor_tensor %[[ACC1]], %[[ACC1]], %{{.*}} {alu = "add"
// CHECK-NEXT: nc.tensor_tensor %[[ACC]], %[[ACC]], %[[ACC1]] {alu = "add"
// CHECK-NOT: nc.dma_load
// CHECK: nc.dma_store %[[ACC]]
// CHECK-NOT: nc.dma_store
func.func @sum_of_squares_in_chunks(%x: tensor<128x16x128xf32>) -> tensor<128x128xf32> {
  %p = aten.mul.Tensor %x, %x : tensor<128x16x128xf32>, tensor<128x16x128xf32> -> tensor<128x16x128xf32>
  %s = aten.sum.dim_IntList %p {dim = array<i64: 1>} : tensor<128x16x128xf32> -> tensor<128x128xf32>
  return %s : tensor<128x128xf32>
}

// -----

// A softmax over the same channels would read its input three times in
// chunks (the maximum, the sum of exponentials, the result), so it keeps
// the permuted frame.
// CHECK-LABEL: func.func @softmax_not_in_chunks
// CHECK-NOT: nc.middle_frame
// CHECK: nc.kernel "{{.*}}_fused_permute_amax_sub_exp
func.func @softmax_not_in_chunks(%x: tensor<128x16x128xf32>) -> tensor<128x16x128xf32> {
  %m = aten.amax %x {dim = array<i64: 1>, keepdim = true} : tensor<128x16x128xf32> -> tensor<128x1x128xf32>
  %d = aten.sub.Tensor %x, %m : tensor<128x16x128xf32>, tensor<128x1x128xf32> -> tensor<128x16x128xf32>
  %e = aten.exp %d : tensor<128x16x128xf32> -> tensor<128x16x128xf32>
  %n = aten.sum.dim_IntList %e {dim = array<i64: 1>, keepdim = true} : tensor<128x16x128xf32> -> tensor<128x1x128xf32>
  %s = aten.div.Tensor %e, %n : tensor<128x16x128xf32>, tensor<128x1x128xf32> -> tensor<128x16x128xf32>
  return %s : tensor<128x16x128xf32>
}
