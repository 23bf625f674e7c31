// RUN: neuron-opt %s --split-input-file --ncc-form-kernels --ncc-lower-to-isa | FileCheck %s

// A sum of squares over the 128 channels of [256, 128, 256] bf16, in the
// middle frame: two row tiles of three chunks of 43 channels. Reducing a
// chunk takes the Vector engine alone longer (256 tensor_reduce, 18.6 us)
// than its loads take the DMA queues (7.9 us), so the chunks' chains of
// adds overlap: the reduction is priced over the Vector and GpSimd engines
// together, and adds whole blocks of 256 channels' values (42 adds a chunk
// into its accumulator) rather than reducing each column on the Vector
// engine.
// CHECK-LABEL: func.func @compute_bound_sum_of_squares
// CHECK: nc.kernel {{.*}}nc.middle_frame
// CHECK: nc.dma_load {{.*}} : memref<256x128x256xbf16>, memref<128x11008xbf16, 1>
// CHECK: nc.tensor_tensor %[[SQ:[0-9]+]], %[[X:[0-9]+]], %[[X]] {alu = "mul"
// CHECK: nc.tensor_tensor %[[ACC:[0-9]+]], %{{[0-9]+}}, %{{[0-9]+}} {alu = "add"{{.*}}: memref<128x256xf32, 1>
// CHECK-COUNT-41: nc.tensor_tensor %[[ACC]], %[[ACC]], %{{[0-9]+}} {alu = "add"
// CHECK-NOT: nc.tensor_reduce
// CHECK: return
func.func @compute_bound_sum_of_squares(%x: tensor<256x128x256xbf16>) -> tensor<256x256xbf16> {
  %s = aten.mul.Tensor %x, %x : tensor<256x128x256xbf16>, tensor<256x128x256xbf16> -> tensor<256x128x256xbf16>
  %y = aten.sum.dim_IntList %s {dim = array<i64: 1>, keepdim = false} : tensor<256x128x256xbf16> -> tensor<256x256xbf16>
  return %y : tensor<256x256xbf16>
}

// -----

// Over the 512 channels of [16, 512, 1024], a chunk's loads (runs of 128
// elements) take the DMA queues longer (17.8 us) than its reduction takes
// the Vector engine (11.8 us): each chunk's adds would wait for its loads,
// one chain at a time, so the reduction keeps the Vector engine's price
// and reduces each column with a tensor_reduce.
// CHECK-LABEL: func.func @load_bound_sum_of_squares
// CHECK: nc.kernel {{.*}}nc.middle_frame
// CHECK: nc.tensor_tensor %{{[0-9]+}}, %[[X:[0-9]+]], %[[X]] {alu = "mul"
// CHECK-COUNT-128: nc.tensor_reduce %{{[0-9]+}}, %{{[0-9]+}} {alu = "add"
// CHECK: return
func.func @load_bound_sum_of_squares(%x: tensor<16x512x1024xbf16>) -> tensor<16x1024xbf16> {
  %s = aten.mul.Tensor %x, %x : tensor<16x512x1024xbf16>, tensor<16x512x1024xbf16> -> tensor<16x512x1024xbf16>
  %y = aten.sum.dim_IntList %s {dim = array<i64: 1>, keepdim = false} : tensor<16x512x1024xbf16> -> tensor<16x1024xbf16>
  return %y : tensor<16x1024xbf16>
}
