// Rows of several planes whose planes are not the rows' stride apart (a
// slice of a middle dim, a padded plane's rows) move in one DMA with two
// partition dims: [plane stride, planes, row stride, rows] and the free dims
// (passes/LowerToIsa.cpp, emitDma), where the kernel would issue more
// transfers than twice the DMA queues. Equal runs only: a row tile that
// starts or ends inside a plane moves its partial planes on their own.
// RUN: neuron-opt %s --ncc-form-kernels=fuse=true --ncc-lower-to-isa=few-bytes=0 | FileCheck %s
// RUN: neuron-opt %s --ncc-form-kernels=fuse=true --ncc-lower-to-isa=few-bytes=0 --ncc-plan-memory --ncc-schedule | FileCheck %s --check-prefix=SCHED

// CHECK-LABEL: func.func @middle_slice
// CHECK: nc.dma_load %{{.*}} -> %{{.*}} {ap = array<i64: 256, 40, 64, 2, 1, 64>, engine = "dma", offset = 64 : i64, part_start = 0 : i64, partition_dims = 2 : i64
// CHECK-NOT: nc.dma_load
// CHECK: nc.dma_store %{{.*}} {ap = array<i64: 64, 80, 1, 64>
// (Scheduled and placed, the attribute stays.)
// SCHED-LABEL: func.func @middle_slice
// SCHED: nc.dma_load {{.*}}partition_dims = 2
func.func @middle_slice(%x: tensor<40x4x64xf32>) -> tensor<40x2x64xf32> {
  %s = aten.slice.Tensor %x {dim = 1 : i64, start = 1 : i64, end = 3 : i64, step = 1 : i64} : tensor<40x4x64xf32> -> tensor<40x2x64xf32>
  %m = aten.mul.Scalar %s, 2.0 : tensor<40x2x64xf32> -> tensor<40x2x64xf32>
  return %m : tensor<40x2x64xf32>
}

// Three planes' rows in a kernel of one row tile: a transfer per plane,
// side by side on three queues (one of all their rows would end later).
// CHECK-LABEL: func.func @few_planes
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 64, 2, 1, 64>, {{.*}}offset = 64 : i64, part_start = 0 : i64, source_op
// CHECK-NEXT: nc.dma_load %{{.*}} {ap = array<i64: 64, 2, 1, 64>, {{.*}}offset = 320 : i64, part_start = 2 : i64, source_op
// CHECK-NEXT: nc.dma_load %{{.*}} {ap = array<i64: 64, 2, 1, 64>, {{.*}}offset = 576 : i64, part_start = 4 : i64, source_op
func.func @few_planes(%x: tensor<3x4x64xf32>) -> tensor<3x2x64xf32> {
  %s = aten.slice.Tensor %x {dim = 1 : i64, start = 1 : i64, end = 3 : i64, step = 1 : i64} : tensor<3x4x64xf32> -> tensor<3x2x64xf32>
  %m = aten.mul.Scalar %s, 2.0 : tensor<3x2x64xf32> -> tensor<3x2x64xf32>
  return %m : tensor<3x2x64xf32>
}

// 201 rows, 3 per plane: the first row tile holds 42 whole planes and two
// rows of the 43rd (one DMA of 42 planes, one of the partial plane); the
// second starts with the 43rd's last row, alone, then 24 whole planes.
// CHECK-LABEL: func.func @partial_planes
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 32, 42, 8, 3, 1, 8>, {{.*}}offset = 0 : i64, part_start = 0 : i64, partition_dims = 2 : i64
// CHECK-NEXT: nc.dma_load %{{.*}} {ap = array<i64: 8, 2, 1, 8>, {{.*}}offset = 1344 : i64, part_start = 126 : i64, source_op
// CHECK: nc.dma_load %{{.*}} {ap = array<i64: 0, 1, 1, 8>, {{.*}}offset = 1360 : i64, part_start = 0 : i64, source_op
// CHECK-NEXT: nc.dma_load %{{.*}} {ap = array<i64: 32, 24, 8, 3, 1, 8>, {{.*}}offset = 1376 : i64, part_start = 1 : i64, partition_dims = 2 : i64
func.func @partial_planes(%x: tensor<67x4x8xf32>) -> tensor<67x3x8xf32> {
  %s = aten.slice.Tensor %x {dim = 1 : i64, start = 0 : i64, end = 3 : i64, step = 1 : i64} : tensor<67x4x8xf32> -> tensor<67x3x8xf32>
  %m = aten.mul.Scalar %s, 2.0 : tensor<67x3x8xf32> -> tensor<67x3x8xf32>
  return %m : tensor<67x3x8xf32>
}
