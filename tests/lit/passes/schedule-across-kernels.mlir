// One dispatch runs its kernels' instruction streams back to back on each
// queue (passes/Schedule.cpp, across-kernels, set at -O1/-O2): a kernel's
// schedule starts with the DMA queues as the kernel before left them. k0
// loads its [128 x 512] tile on queues 0-3 and stores it on 4-7; k1's loads,
// which read a graph input and need nothing of k0, then go to queues 8-11
// (idle) instead of waiting behind k0's transfers on 0-3.
// RUN: neuron-opt %s --ncc-form-kernels=fuse=false --ncc-lower-to-isa=few-bytes=0 --ncc-plan-memory --ncc-schedule=across-kernels=1 | FileCheck %s
// RUN: neuron-opt %s --ncc-form-kernels=fuse=false --ncc-lower-to-isa=few-bytes=0 --ncc-plan-memory --ncc-schedule | FileCheck %s --check-prefix=ALONE
// CHECK: nc.kernel "k0_exp"
// CHECK: nc.dma_load {{.*}}offset = 0 : i64, part_start = 0 : i64, queue = 0 : i64
// CHECK: nc.dma_store {{.*}}offset = 49152 : i64, {{.*}}queue = 7 : i64
// CHECK: nc.kernel "k1_neg"
// CHECK: nc.dma_load {{.*}}offset = 0 : i64, part_start = 0 : i64, queue = 8 : i64
// CHECK: nc.dma_load {{.*}}offset = 49152 : i64, {{.*}}queue = 11 : i64
// Each kernel scheduled alone (-O0, a dispatch per source op) starts on queue 0.
// ALONE: nc.kernel "k1_neg"
// ALONE: nc.dma_load {{.*}}offset = 0 : i64, part_start = 0 : i64, queue = 0 : i64
func.func @two(%x: tensor<128x512xf32>, %y: tensor<128x512xf32>) -> (tensor<128x512xf32>, tensor<128x512xf32>) {
  %a = aten.exp %x : tensor<128x512xf32> -> tensor<128x512xf32>
  %b = aten.neg %y : tensor<128x512xf32> -> tensor<128x512xf32>
  return %a, %b : tensor<128x512xf32>, tensor<128x512xf32>
}
