// RUN: neuron-opt %s --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa=few-bytes=0 | FileCheck %s

// Kernels over rows shorter than 512 bytes put several consecutive rows on
// each partition (passes/LowerToIsa.cpp). An elementwise kernel packs them
// into its columns (packShortRows): [16384 x 64] bf16 runs as [2048 x 512],
// each partition's eight rows one run of 1 KiB, instead of 128 row tiles of
// 128-byte runs.
// CHECK-LABEL: func.func @packed
// CHECK-NOT: memref<128x64xbf16, 1>
// CHECK: nc.dma_load {{.*}}ap = array<i64: 512, 64, 1, 512>{{.*}}memref<16384x64xbf16>, memref<128x512xbf16, 1>
// CHECK: nc.activation {{.*}}func = "sigmoid"{{.*}}memref<128x512xbf16, 1>
// CHECK: nc.dma_store {{.*}}ap = array<i64: 512, 64, 1, 512>{{.*}}memref<128x512xbf16, 1>, memref<16384x64xbf16>
// CHECK-NOT: memref<128x64xbf16, 1>
// CHECK: return
func.func @packed(%x: tensor<16384x64xbf16>) -> tensor<16384x64xbf16> {
  %s = aten.sigmoid %x : tensor<16384x64xbf16> -> tensor<16384x64xbf16>
  %y = aten.mul.Tensor %x, %s : tensor<16384x64xbf16>, tensor<16384x64xbf16> -> tensor<16384x64xbf16>
  return %y : tensor<16384x64xbf16>
}

// A bias over the columns is the same in each of a partition's rows: one
// row is loaded (128 runs, not 128 x 8) and doubled across the tile, once
// for every row tile.
// CHECK-LABEL: func.func @bias
// CHECK: %[[ROW:.*]] = nc.tile_columns %[[B:[0-9]+]][0] : memref<128x384xf32, 1> -> memref<128x48xf32, 1>
// CHECK: nc.dma_load %{{.*}} -> %[[ROW]] {ap = array<i64: 0, 128, 1, 48>
// CHECK: %[[D1:.*]] = nc.tile_columns %[[B]][48] : memref<128x384xf32, 1> -> memref<128x48xf32, 1>
// CHECK: nc.tensor_scalar %[[D1]]
// CHECK: %[[D2:.*]] = nc.tile_columns %[[B]][96] : memref<128x384xf32, 1> -> memref<128x96xf32, 1>
// CHECK: nc.tensor_scalar %[[D2]]
// CHECK: %[[D3:.*]] = nc.tile_columns %[[B]][192] : memref<128x384xf32, 1> -> memref<128x192xf32, 1>
// CHECK: nc.tensor_scalar %[[D3]]
// CHECK: nc.tensor_tensor %{{.*}}, %{{.*}}, %[[B]] {alu = "add"
// CHECK-NOT: nc.dma_load %{{.*}} -> %{{.*}} {ap = array<i64: 0,
// CHECK: nc.tensor_tensor %{{.*}}, %{{.*}}, %[[B]] {alu = "add"
// CHECK: return
func.func @bias(%x: tensor<16384x48xf32>, %b: tensor<48xf32>) -> tensor<16384x48xf32> {
  %y = aten.add.Tensor %x, %b : tensor<16384x48xf32>, tensor<48xf32> -> tensor<16384x48xf32>
  return %y : tensor<16384x48xf32>
}

// NCHW with a per-channel scale: the rows of a channel pack (all 28 rows of
// 28 to a partition, 8 row tiles); the scale stays one value per partition.
// CHECK-LABEL: func.func @per_channel
// CHECK: nc.dma_load {{.*}}ap = array<i64: 784, 43, 1, 784>{{.*}}memref<128x784xbf16, 1>
// CHECK: nc.tensor_scalar {{.*}}alu = "mul"{{.*}}memref<128x784xbf16, 1>, memref<128x784xbf16, 1>, memref<128x1xbf16, 1>
// CHECK: return
func.func @per_channel(%x: tensor<16x64x28x28xbf16>, %s: tensor<64x1x1xbf16>) -> tensor<16x64x28x28xbf16> {
  %z = aten.mul.Tensor %x, %s : tensor<16x64x28x28xbf16>, tensor<64x1x1xbf16> -> tensor<16x64x28x28xbf16>
  return %z : tensor<16x64x28x28xbf16>
}

// Not packed: a per-row scalar would vary inside a partition. The row tiles
// interleave instead: the group's eight rows per partition are loaded in one
// [128 x 256] tile (its scalars in one [128 x 8] tile), row tile j reads
// columns [32 j, 32 j + 32) (column j of the scalars) and its product goes
// straight into the group's output tile, stored once.
// CHECK-LABEL: func.func @per_row
// CHECK: %[[X:.*]] = nc.alloc_tile {{.*}} : memref<128x256xf32, 1>
// CHECK: nc.dma_load %{{.*}} -> %[[X]] {ap = array<i64: 256, 64, 1, 256>
// CHECK: %[[X0:.*]] = nc.tile_columns %[[X]][0] : memref<128x256xf32, 1> -> memref<128x32xf32, 1>
// CHECK: %[[S:.*]] = nc.alloc_tile {{.*}} : memref<128x8xf32, 1>
// CHECK: nc.dma_load %{{.*}} -> %[[S]] {ap = array<i64: 8, 128, 1, 8>
// CHECK: %[[S0:.*]] = nc.tile_columns %[[S]][0] : memref<128x8xf32, 1> -> memref<128x1xf32, 1>
// CHECK: %[[Y:.*]] = nc.alloc_tile {{.*}} : memref<128x256xf32, 1>
// CHECK: %[[Y0:.*]] = nc.tile_columns %[[Y]][0]
// CHECK: nc.tensor_scalar %[[Y0]], %[[X0]], %[[S0]] {alu = "mul"
// CHECK: %[[X7:.*]] = nc.tile_columns %[[X]][224]
// CHECK: %[[S7:.*]] = nc.tile_columns %[[S]][7]
// CHECK: %[[Y7:.*]] = nc.tile_columns %[[Y]][224]
// CHECK: nc.tensor_scalar %[[Y7]], %[[X7]], %[[S7]] {alu = "mul"
// CHECK: nc.dma_store %[[Y]] -> %{{.*}} {ap = array<i64: 256, 64, 1, 256>
// CHECK: return
func.func @per_row(%x: tensor<16384x32xf32>, %s: tensor<16384x1xf32>) -> tensor<16384x32xf32> {
  %y = aten.mul.Tensor %x, %s : tensor<16384x32xf32>, tensor<16384x1xf32> -> tensor<16384x32xf32>
  return %y : tensor<16384x32xf32>
}

// A reduction interleaves too: its per-row results fill a [128 x 8] group
// tile, stored as one run of eight sums per partition.
// CHECK-LABEL: func.func @row_sums
// CHECK: %[[G:.*]] = nc.alloc_tile {{.*}} : memref<128x8xf32, 1>
// CHECK: %[[G0:.*]] = nc.tile_columns %[[G]][0] : memref<128x8xf32, 1> -> memref<128x1xf32, 1>
// CHECK: nc.tensor_reduce %[[G0]], %{{.*}} {alu = "add"
// CHECK: %[[G7:.*]] = nc.tile_columns %[[G]][7] : memref<128x8xf32, 1> -> memref<128x1xf32, 1>
// CHECK: nc.tensor_reduce %[[G7]], %{{.*}} {alu = "add"
// CHECK: nc.dma_store %[[G]] -> %{{.*}} {ap = array<i64: 8, 128, 1, 8>
// CHECK: return
func.func @row_sums(%x: tensor<16384x32xf32>) -> tensor<16384xf32> {
  %y = aten.sum.dim_IntList %x {dim = array<i64: -1>, keepdim = false} : tensor<16384x32xf32> -> tensor<16384xf32>
  return %y : tensor<16384xf32>
}

// L is the innermost leading dim longer than 1: dims of 1 after it do not
// stop either way (8 rows of [16384, 1, 64] bf16 a partition, 4 of f32).
// CHECK-LABEL: func.func @unit_dims
// CHECK: nc.dma_load {{.*}}ap = array<i64: 512, 64, 1, 512>{{.*}}memref<16384x1x64xbf16>, memref<128x512xbf16, 1>
// CHECK: return
// CHECK-LABEL: func.func @unit_dims_sum
// CHECK: nc.dma_load {{.*}}ap = array<i64: 256, 64, 1, 256>{{.*}}memref<4096x1x64xf32>, memref<128x256xf32, 1>
// CHECK: nc.dma_store {{.*}}ap = array<i64: 4, 128, 1, 4>{{.*}}memref<4096x1xf32>
// CHECK: return
func.func @unit_dims(%x: tensor<16384x1x64xbf16>) -> tensor<16384x1x64xbf16> {
  %s = aten.sigmoid %x : tensor<16384x1x64xbf16> -> tensor<16384x1x64xbf16>
  return %s : tensor<16384x1x64xbf16>
}
func.func @unit_dims_sum(%x: tensor<4096x1x64xf32>) -> tensor<4096x1xf32> {
  %y = aten.sum.dim_IntList %x {dim = array<i64: -1>, keepdim = false} : tensor<4096x1x64xf32> -> tensor<4096x1xf32>
  return %y : tensor<4096x1xf32>
}

// Too few rows: packed 2 to a partition, [2048 x 32] would be 8 row tiles of
// 256-byte runs, and packing needs at least 8 row tiles left (kernels of
// fewer overlap too little): as it was, 16 row tiles of 128 bytes.
// CHECK-LABEL: func.func @few_rows
// CHECK-NOT: memref<128x64xf32, 1>
// CHECK: nc.activation {{.*}}memref<128x32xf32, 1>, memref<128x32xf32, 1>
// CHECK-NOT: memref<128x64xf32, 1>
// CHECK: return
func.func @few_rows(%x: tensor<1024x32xf32>) -> tensor<1024x32xf32> {
  %s = aten.sigmoid %x : tensor<1024x32xf32> -> tensor<1024x32xf32>
  return %s : tensor<1024x32xf32>
}

// A transposed input would keep the kernel from packing (its packed rows
// would be element-wise runs); read in tiny transposed blocks (64 f32
// columns), it comes from a copy kernel of its own (ncc-form-kernels,
// PermutePlan.h), and the add over contiguous rows packs 4 to a partition.
// CHECK-LABEL: func.func @transposed
// CHECK: nc.kernel "k0_t"
// CHECK: nc.kernel "k1_add"
// CHECK: nc.dma_load {{.*}}ap = array<i64: 256, 64, 1, 256>{{.*}}memref<128x256xf32, 1>
// CHECK-NOT: memref<128x64xf32, 1>
// CHECK: return
func.func @transposed(%x: tensor<64x16384xf32>, %y: tensor<16384x64xf32>) -> tensor<16384x64xf32> {
  %t = aten.t %x : tensor<64x16384xf32> -> tensor<16384x64xf32>
  %z = aten.add.Tensor %t, %y : tensor<16384x64xf32>, tensor<16384x64xf32> -> tensor<16384x64xf32>
  return %z : tensor<16384x64xf32>
}

// rotate_half of a loaded input in an elementwise kernel packs as well: the
// cat copies each half from the input's packed tile once per packed row
// (eight rows of 64 a partition, two copies of 32 columns each) instead of
// loading the halves. `x[:, 32:]` traces to a slice of all of dim 0 first,
// which ncc-decompose-composites drops, so the halves slice %x itself.
// CHECK-LABEL: func.func @rotate_half
// CHECK: nc.dma_load %[[X:arg[0-9]+]] -> %[[XT:[0-9]+]] {ap = array<i64: 512, 64, 1, 512>{{.*}}memref<128x512xbf16, 1>
// CHECK-NOT: memref<128x32xbf16, 1>
// CHECK: %[[HI0:.*]] = nc.tile_columns %[[XT]][32] : memref<128x512xbf16, 1> -> memref<128x32xbf16, 1>
// CHECK: %[[TO0:.*]] = nc.tile_columns %[[R:[0-9]+]][0] : memref<128x512xbf16, 1> -> memref<128x32xbf16, 1>
// CHECK: nc.tensor_scalar %[[TO0]], %[[HI0]]
// CHECK: %[[HI1:.*]] = nc.tile_columns %[[XT]][96]
// CHECK: %[[TO1:.*]] = nc.tile_columns %[[R]][64]
// CHECK: nc.tensor_scalar %[[TO1]], %[[HI1]]
// CHECK: %[[LO7:.*]] = nc.tile_columns %[[XT]][448]
// CHECK: %[[TO7:.*]] = nc.tile_columns %[[R]][480]
// CHECK: nc.tensor_scalar %[[TO7]], %[[LO7]]
// CHECK-NOT: nc.dma_load %[[X]] -> %{{.*}}memref<128x32xbf16, 1>
// CHECK: nc.dma_store {{.*}}ap = array<i64: 512, 64, 1, 512>{{.*}}memref<128x512xbf16, 1>, memref<16384x64xbf16>
// CHECK: return
func.func @rotate_half(%x: tensor<16384x64xbf16>, %c: tensor<16384x64xbf16>) -> tensor<16384x64xbf16> {
  %whole = aten.slice.Tensor %x {dim = 0 : i64, start = 0 : i64, end = 9223372036854775807 : i64, step = 1 : i64} : tensor<16384x64xbf16> -> tensor<16384x64xbf16>
  %hi = aten.slice.Tensor %whole {dim = 1 : i64, start = 32 : i64, end = 9223372036854775807 : i64, step = 1 : i64} : tensor<16384x64xbf16> -> tensor<16384x32xbf16>
  %lo = aten.slice.Tensor %whole {dim = 1 : i64, start = 0 : i64, end = 32 : i64, step = 1 : i64} : tensor<16384x64xbf16> -> tensor<16384x32xbf16>
  %r = aten.cat %hi, %lo {dim = 1 : i64} : tensor<16384x32xbf16>, tensor<16384x32xbf16> -> tensor<16384x64xbf16>
  %a = aten.mul.Tensor %x, %c : tensor<16384x64xbf16>, tensor<16384x64xbf16> -> tensor<16384x64xbf16>
  %b = aten.add.Tensor %a, %r : tensor<16384x64xbf16>, tensor<16384x64xbf16> -> tensor<16384x64xbf16>
  return %b : tensor<16384x64xbf16>
}
