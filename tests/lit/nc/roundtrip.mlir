// RUN: neuron-opt %s | neuron-opt | FileCheck %s

// CHECK-LABEL: func.func @tensor_kernel
func.func @tensor_kernel(%x: tensor<4x512xbf16>) -> tensor<4x512xbf16> {
  // CHECK: nc.kernel "k0_mul"(%{{.*}}) {result_sources = ["aten.mul.Tensor [mul]"], source_ops = ["aten.mul.Tensor"]} : (tensor<4x512xbf16>) -> tensor<4x512xbf16> {
  // CHECK: ^bb0(%{{.*}}: tensor<4x512xbf16>):
  // CHECK: nc.yield %{{.*}} : tensor<4x512xbf16>
  %r = nc.kernel "k0_mul"(%x) {result_sources = ["aten.mul.Tensor [mul]"], source_ops = ["aten.mul.Tensor"]} : (tensor<4x512xbf16>) -> tensor<4x512xbf16> {
  ^bb0(%a: tensor<4x512xbf16>):
    %m = aten.mul.Tensor %a, %a : tensor<4x512xbf16>, tensor<4x512xbf16> -> tensor<4x512xbf16>
    nc.yield %m : tensor<4x512xbf16>
  }
  return %r : tensor<4x512xbf16>
}

// CHECK-LABEL: func.func @isa_kernel
func.func @isa_kernel(%x: tensor<4x512xbf16>) -> tensor<4x512xbf16> {
  // CHECK: ^bb0(%{{.*}}: memref<4x512xbf16>, %{{.*}}: memref<4x512xbf16>):
  %r = nc.kernel "k0"(%x) {source_ops = ["aten.exp"]} : (tensor<4x512xbf16>) -> tensor<4x512xbf16> {
  ^bb0(%in: memref<4x512xbf16>, %out: memref<4x512xbf16>):
    // CHECK: nc.alloc_tile {offset = 0 : i64} : memref<4x512xbf16, 1>
    %t = nc.alloc_tile {offset = 0 : i64} : memref<4x512xbf16, 1>
    %s = nc.alloc_tile : memref<4x512xf32, 1>
    %r1 = nc.alloc_tile : memref<4x1xf32, 1>
    // CHECK: nc.dma_load %{{.*}} -> %{{.*}} {ap = array<i64: 512, 4, 1, 512>, offset = 0 : i64, part_start = 0 : i64, queue = 3 : i64}
    nc.dma_load %in -> %t {part_start = 0, offset = 0, ap = array<i64: 512, 4, 1, 512>, queue = 3 : i64} : memref<4x512xbf16>, memref<4x512xbf16, 1>
    // CHECK: nc.activation %{{.*}}, %{{.*}} {func = "exp"
    nc.activation %s, %t {func = "exp", waits = array<i64: 7, 1>} : memref<4x512xf32, 1>, memref<4x512xbf16, 1>
    // CHECK: nc.activation %{{.*}}, %{{.*}} scale %{{.*}} : memref<4x1xf32, 1> accum %{{.*}} : memref<4x1xf32, 1> {func = "square"}
    nc.activation %s, %t scale %r1 : memref<4x1xf32, 1> accum %r1 : memref<4x1xf32, 1> {func = "square"} : memref<4x512xf32, 1>, memref<4x512xbf16, 1>
    // CHECK: nc.tensor_reduce %{{.*}}, %{{.*}} {alu = "max"}
    nc.tensor_reduce %r1, %s {alu = "max"} : memref<4x1xf32, 1>, memref<4x512xf32, 1>
    // CHECK: nc.tensor_scalar %{{.*}}, %{{.*}}, %{{.*}} {alu = "sub", reverse = true}
    nc.tensor_scalar %s, %s, %r1 {alu = "sub", reverse = true} : memref<4x512xf32, 1>, memref<4x512xf32, 1>, memref<4x1xf32, 1>
    // CHECK: nc.tensor_tensor %{{.*}}, %{{.*}}, %{{.*}} {alu = "mul"}
    nc.tensor_tensor %t, %s, %t {alu = "mul"} : memref<4x512xbf16, 1>, memref<4x512xf32, 1>, memref<4x512xbf16, 1>
    // CHECK: nc.dma_store %{{.*}} -> %{{.*}}
    nc.dma_store %t -> %out {part_start = 0, offset = 0, ap = array<i64: 512, 4, 1, 512>} : memref<4x512xbf16, 1>, memref<4x512xbf16>
  }
  return %r : tensor<4x512xbf16>
}

// CHECK-LABEL: func.func @engines
func.func @engines() {
  %a = nc.alloc_tile : memref<128x128xbf16, 1>
  %b = nc.alloc_tile : memref<128x512xbf16, 1>
  // CHECK: nc.alloc_psum {offset = 0 : i64} : memref<128x512xf32, 2>
  %acc = nc.alloc_psum {offset = 0 : i64} : memref<128x512xf32, 2>
  // CHECK: nc.matmul %{{.*}}, %{{.*}}, %{{.*}} {accumulate = true} : memref<128x512xf32, 2>, memref<128x128xbf16, 1>, memref<128x512xbf16, 1>
  nc.matmul %acc, %a, %b {accumulate = true} : memref<128x512xf32, 2>, memref<128x128xbf16, 1>, memref<128x512xbf16, 1>
  %t = nc.alloc_psum : memref<128x128xf32, 2>
  // CHECK: nc.transpose
  nc.transpose %t, %a : memref<128x128xf32, 2>, memref<128x128xbf16, 1>
  // CHECK: nc.tile_columns %{{.*}}[384] : memref<128x512xf32, 2> -> memref<128x128xf32, 2>
  %bank = nc.alloc_psum : memref<128x512xf32, 2>
  %quarter = nc.tile_columns %bank [384] : memref<128x512xf32, 2> -> memref<128x128xf32, 2>
  nc.transpose %quarter, %a : memref<128x128xf32, 2>, memref<128x128xbf16, 1>
  // CHECK: nc.tile_columns %{{.*}}[1] {step = 3 : i64} : memref<128x512xf32, 2> -> memref<128x100xf32, 2>
  %thirds = nc.tile_columns %bank [1] {step = 3 : i64} : memref<128x512xf32, 2> -> memref<128x100xf32, 2>
  %s = nc.alloc_tile : memref<128x512xf32, 1>
  // Results leave PSUM through the vector or scalar engine.
  // CHECK: nc.activation %{{.*}}, %{{.*}} {func = "gelu_tanh"} : memref<128x512xf32, 1>, memref<128x512xf32, 2>
  nc.activation %s, %acc {func = "gelu_tanh"} : memref<128x512xf32, 1>, memref<128x512xf32, 2>
  // CHECK: nc.iota %{{.*}} {element_step = 1.000000e+00 : f64, partition_step = -1.000000e+00 : f64}
  nc.iota %s {base = 0.0 : f64, partition_step = -1.0 : f64, element_step = 1.0 : f64} : memref<128x512xf32, 1>
  // CHECK: nc.tensor_scalar %{{.*}}, %{{.*}} {alu = "is_ge"}
  nc.tensor_scalar %s, %s {alu = "is_ge"} : memref<128x512xf32, 1>, memref<128x512xf32, 1>
  // CHECK: nc.tensor_select
  nc.tensor_select %s, %s, %s, %s : memref<128x512xf32, 1>, memref<128x512xf32, 1>, memref<128x512xf32, 1>, memref<128x512xf32, 1>
  return
}
