// RUN: neuron-opt %s --split-input-file --ncc-form-kernels=fuse=true | FileCheck %s
// RUN: neuron-opt %s --split-input-file --ncc-form-kernels="fuse=true report=true" 2>&1 >/dev/null | FileCheck %s --check-prefix=REPORT
// RUN: neuron-opt %s --split-input-file --ncc-form-kernels=fuse=true --ncc-lower-to-isa=few-bytes=0 | FileCheck %s --check-prefix=ISA

// An op that reads a kernel's value through a reshape of its leading dims
// joins when the kernel has an op of as many elements in more dims: the
// lowering keeps that shape, [2, 4, 8, 16] rows of 16, so the per-row
// scale (a group norm's, per sample and group) broadcasts as it did.
// CHECK-LABEL: func.func @more_dims_stay
// CHECK: nc.kernel "k0_fused_mul_reshape_sigmoid"(%arg0, %arg1)
// CHECK-NOT: nc.kernel
// ISA-LABEL: func.func @more_dims_stay
// ISA: nc.dma_load %arg2 -> %[[X:[0-9]+]] {ap = array<i64: 16, 128, 1, 16>
// ISA: nc.dma_load %arg3 -> %[[S:[0-9]+]] {ap = array<i64: 0, 128, 1, 1>, {{.*}}offset = 0
// ISA: nc.activation %{{.*}}, %[[X]] scale %[[S]] {{.*}}func = "sigmoid"
// ISA: nc.dma_load %arg3 -> %{{.*}} {ap = array<i64: 0, 128, 1, 1>, {{.*}}offset = 1 :
func.func @more_dims_stay(%x: tensor<2x4x8x16x16xf32>, %s: tensor<2x4x1x1x1xf32>) -> tensor<2x32x16x16xf32> {
  %y = aten.mul.Tensor %x, %s : tensor<2x4x8x16x16xf32>, tensor<2x4x1x1x1xf32> -> tensor<2x4x8x16x16xf32>
  %v = aten.reshape %y {size = array<i64: 2, 32, 16, 16>} : tensor<2x4x8x16x16xf32> -> tensor<2x32x16x16xf32>
  %r = aten.sigmoid %v : tensor<2x32x16x16xf32> -> tensor<2x32x16x16xf32>
  return %r : tensor<2x32x16x16xf32>
}

// -----

// The other way round, the joining op has more dims and would set the
// lowering's shape, against which [2, 32, 1, 1] does not broadcast: two
// kernels.
// REPORT-NOT: not fused
// REPORT: remark: not fused into kernel of 'aten.mul.Tensor': row spaces differ (4-d vs 3-d
// REPORT-NOT: not fused
// CHECK-LABEL: func.func @fewer_dims_refused
// CHECK: nc.kernel "k0_mul"
// CHECK: nc.kernel "k1_fused_reshape_sigmoid"
func.func @fewer_dims_refused(%x: tensor<2x32x16x16xf32>, %s: tensor<2x32x1x1xf32>) -> tensor<2x4x8x16x16xf32> {
  %y = aten.mul.Tensor %x, %s : tensor<2x32x16x16xf32>, tensor<2x32x1x1xf32> -> tensor<2x32x16x16xf32>
  %v = aten.reshape %y {size = array<i64: 2, 4, 8, 16, 16>} : tensor<2x32x16x16xf32> -> tensor<2x4x8x16x16xf32>
  %r = aten.sigmoid %v : tensor<2x4x8x16x16xf32> -> tensor<2x4x8x16x16xf32>
  return %r : tensor<2x4x8x16x16xf32>
}
