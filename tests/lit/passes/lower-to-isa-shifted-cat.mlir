// A cat of windows of one tensor a few columns apart (a convolution's
// im2col: one shifted view of the padded, flattened input per tap) loads
// each tile once, the union of the windows' columns, and stores every
// window from its column range (passes/LowerToIsa.cpp, lowerCat).
// RUN: neuron-opt %s --ncc-form-kernels=fuse=true --ncc-lower-to-isa | FileCheck %s
// CHECK-LABEL: func.func @taps
// CHECK: %[[T:.*]] = nc.alloc_tile {{.*}} : memref<16x100xf32, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[T]] {ap = array<i64: 100, 16, 1, 100>{{.*}}offset = 0 : i64
// CHECK-NEXT: %[[A:.*]] = nc.tile_columns %[[T]][0] {{.*}} -> memref<16x90xf32, 1>
// CHECK-NEXT: nc.dma_store %[[A]] {{.*}} {ap = array<i64: 90, 8, 1, 90>{{.*}}offset = 0 : i64
// CHECK: %[[B:.*]] = nc.tile_columns %[[T]][1] {{.*}} -> memref<16x90xf32, 1>
// CHECK-NEXT: nc.dma_store %[[B]] {{.*}} {ap = array<i64: 90, 8, 1, 90>{{.*}}offset = 720 : i64
// CHECK: %[[C:.*]] = nc.tile_columns %[[T]][10] {{.*}} -> memref<16x90xf32, 1>
// CHECK-NEXT: nc.dma_store %[[C]] {{.*}} {ap = array<i64: 90, 8, 1, 90>{{.*}}offset = 1440 : i64
// CHECK-NOT: nc.dma_load
func.func @taps(%x: tensor<2x8x100xf32>) -> tensor<2x3x8x90xf32> {
  %a = aten.slice.Tensor %x {dim = 2 : i64, start = 0 : i64, end = 90 : i64, step = 1 : i64} : tensor<2x8x100xf32> -> tensor<2x8x90xf32>
  %b = aten.slice.Tensor %x {dim = 2 : i64, start = 1 : i64, end = 91 : i64, step = 1 : i64} : tensor<2x8x100xf32> -> tensor<2x8x90xf32>
  %c = aten.slice.Tensor %x {dim = 2 : i64, start = 10 : i64, end = 100 : i64, step = 1 : i64} : tensor<2x8x100xf32> -> tensor<2x8x90xf32>
  %a1 = aten.unsqueeze %a {dim = 1 : i64} : tensor<2x8x90xf32> -> tensor<2x1x8x90xf32>
  %b1 = aten.unsqueeze %b {dim = 1 : i64} : tensor<2x8x90xf32> -> tensor<2x1x8x90xf32>
  %c1 = aten.unsqueeze %c {dim = 1 : i64} : tensor<2x8x90xf32> -> tensor<2x1x8x90xf32>
  %y = aten.cat %a1, %b1, %c1 {dim = 1 : i64} : tensor<2x1x8x90xf32>, tensor<2x1x8x90xf32>, tensor<2x1x8x90xf32> -> tensor<2x3x8x90xf32>
  return %y : tensor<2x3x8x90xf32>
}

// The same windows read by an elementwise kernel (a depthwise
// convolution's taps): one load of the union per tile, each window a
// column range of it (passes/LowerToIsa.cpp, sharedWindow).
// CHECK-LABEL: func.func @depthwise_taps
// CHECK: %[[T:.*]] = nc.alloc_tile {{.*}} : memref<16x100xf32, 1>
// CHECK-NEXT: nc.dma_load %{{.*}} -> %[[T]] {ap = array<i64: 100, 16, 1, 100>{{.*}}offset = 0 : i64
// CHECK-NEXT: nc.tile_columns %[[T]][0] {{.*}} -> memref<16x90xf32, 1>
// CHECK: nc.tile_columns %[[T]][1] {{.*}} -> memref<16x90xf32, 1>
// CHECK: nc.tile_columns %[[T]][10] {{.*}} -> memref<16x90xf32, 1>
// CHECK-NOT: nc.dma_load
func.func @depthwise_taps(%x: tensor<16x100xf32>) -> tensor<16x90xf32> {
  %a = aten.slice.Tensor %x {dim = 1 : i64, start = 0 : i64, end = 90 : i64, step = 1 : i64} : tensor<16x100xf32> -> tensor<16x90xf32>
  %b = aten.slice.Tensor %x {dim = 1 : i64, start = 1 : i64, end = 91 : i64, step = 1 : i64} : tensor<16x100xf32> -> tensor<16x90xf32>
  %c = aten.slice.Tensor %x {dim = 1 : i64, start = 10 : i64, end = 100 : i64, step = 1 : i64} : tensor<16x100xf32> -> tensor<16x90xf32>
  %s = aten.add.Tensor %a, %b : tensor<16x90xf32>, tensor<16x90xf32> -> tensor<16x90xf32>
  %y = aten.add.Tensor %s, %c : tensor<16x90xf32>, tensor<16x90xf32> -> tensor<16x90xf32>
  return %y : tensor<16x90xf32>
}
