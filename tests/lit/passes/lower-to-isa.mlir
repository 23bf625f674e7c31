// RUN: neuron-opt %s --split-input-file --ncc-decompose-composites --ncc-form-kernels --ncc-lower-to-isa=few-bytes=0 | FileCheck %s

// 300 rows: two full 128-partition tiles and a 44-row tail; the weight is
// broadcast over partitions (stride 0) and loaded once per tile height. A
// kernel this small moves each tile in pieces of 19 partitions (at least
// 64 KiB), so that its first tile arrives sooner and more queues share it.
// CHECK-LABEL: func.func @rows_300
// CHECK: ^bb0(%[[X:.*]]: memref<300x1000xf32>, %[[W:.*]]: memref<1000xf32>, %[[Y:.*]]: memref<300x1000xf32>):
// CHECK: nc.dma_load %[[X]] -> %{{.*}} {ap = array<i64: 1000, 19, 1, 1000>, {{.*}}offset = 0 : i64{{.*}} : memref<300x1000xf32>, memref<128x1000xf32, 1>
// CHECK: nc.dma_load %[[W]] -> %[[W128:[0-9]+]] {ap = array<i64: 0, 19, 1, 1000>
// x * x summed over the row is one Square activation with an accumulator.
// CHECK: nc.activation %{{.*}}, %{{.*}} accum %{{.*}} : memref<128x1xf32, 1> {{{.*}}func = "square"{{.*}} : memref<128x1000xf32, 1>, memref<128x1000xf32, 1>
// CHECK-NOT: nc.tensor_reduce
// The mean's 1/1000 and + eps become the rsqrt activation's scale and bias.
// CHECK-NOT: nc.tensor_scalar %{{.*}}, %{{.*}} {alu = "add"
// CHECK: nc.activation %{{.*}}, %{{.*}} {bias = 9.9999999999999995E-7 : f64, {{.*}}func = "rsqrt", scale = 1.000000e-03
// CHECK: nc.tensor_scalar %{{.*}}, %{{.*}}, %{{.*}} {alu = "mul"{{.*}} : memref<128x1000xf32, 1>, memref<128x1000xf32, 1>, memref<128x1xf32, 1>
// CHECK: nc.tensor_tensor %[[OUT0:.*]], %{{.*}}, %[[W128]] {alu = "mul"
// CHECK: nc.dma_store %[[OUT0]] -> %[[Y]] {ap = array<i64: 1000, 19, 1, 1000>, {{.*}}offset = 0 : i64
// CHECK: nc.dma_load %[[X]] -> {{.*}}offset = 128000 : i64
// CHECK-NOT: nc.dma_load %[[W]]
// CHECK: nc.tensor_tensor %{{.*}}, %{{.*}}, %[[W128]] {alu = "mul"
// CHECK: nc.dma_store {{.*}}offset = 128000 : i64
// CHECK: nc.dma_load %[[X]] -> {{.*}} {ap = array<i64: 1000, 22, 1, 1000>, {{.*}}offset = 256000 : i64{{.*}} memref<44x1000xf32, 1>
// CHECK: nc.dma_load %[[W]] -> {{.*}} {ap = array<i64: 0, 22, 1, 1000>
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 1000, 22, 1, 1000>, {{.*}}offset = 256000 : i64
func.func @rows_300(%x: tensor<300x1000xf32>, %w: tensor<1000xf32>) -> tensor<300x1000xf32> {
  %y = aten.rms_norm %x, %w {normalized_shape = array<i64: 1000>, eps = 1.0e-06} : tensor<300x1000xf32>, tensor<1000xf32> -> tensor<300x1000xf32>
  return %y : tensor<300x1000xf32>
}

// -----

// Without a reduction, long rows are cut into chunks of at most 4096 elements
// (each 2 MiB load in pieces of 16 partitions, for several DMA queues: the
// kernel has two row tiles, so its transfers are split finer than 512 KiB).
// CHECK-LABEL: func.func @chunks
// CHECK: nc.dma_load {{.*}} {ap = array<i64: 10000, 16, 1, 4096>, {{.*}}offset = 0 : i64
// CHECK: nc.activation {{.*}}func = "exp"
// CHECK: nc.dma_load {{.*}} {ap = array<i64: 10000, 16, 1, 4096>, {{.*}}offset = 4096 : i64
// CHECK: nc.dma_load {{.*}} {ap = array<i64: 10000, {{[0-9]+}}, 1, 1808>, {{.*}}offset = 8192 : i64
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 10000, {{[0-9]+}}, 1, 1808>, {{.*}}offset = 8192 : i64
func.func @chunks(%x: tensor<130x10000xf32>) -> tensor<130x10000xf32> {
  %y = aten.exp %x : tensor<130x10000xf32> -> tensor<130x10000xf32>
  return %y : tensor<130x10000xf32>
}

// -----

// Few long rows are spread over the partitions instead: 4 rows of 10000 are
// 100 rows of 400 (the largest divisor of 10000 with 4 x 25 <= 128), one
// tile; a per-row operand keeps its row stride (0 along the split).
// CHECK-LABEL: func.func @few_long_rows
// CHECK: nc.dma_load %{{.*}} -> {{.*}} {ap = array<i64: 400, 50, 1, 400>, {{.*}}offset = 0 : i64{{.*}} memref<100x400xf32, 1>
// CHECK: nc.dma_load %{{.*}} -> {{.*}} {ap = array<i64: 0, 25, 1, 1>, {{.*}}offset = 0 : i64, part_start = 0
// CHECK: nc.dma_load %{{.*}} -> {{.*}} {ap = array<i64: 0, 25, 1, 1>, {{.*}}offset = 1 : i64, part_start = 25
// CHECK: nc.activation {{.*}}func = "exp"
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 400, 50, 1, 400>, {{.*}}offset = 0 : i64
// CHECK-NOT: nc.dma_load
func.func @few_long_rows(%x: tensor<4x10000xf32>, %b: tensor<4x1xf32>) -> tensor<4x10000xf32> {
  %s = aten.add.Tensor %x, %b : tensor<4x10000xf32>, tensor<4x1xf32> -> tensor<4x10000xf32>
  %y = aten.exp %s : tensor<4x10000xf32> -> tensor<4x10000xf32>
  return %y : tensor<4x10000xf32>
}

// -----

// A middle-dim broadcast: each run of 8 rows reads the same HBM row (stride 0),
// and alpha scales the subtrahend first.
// CHECK-LABEL: func.func @broadcast_runs
// CHECK: nc.dma_load %{{.*}} -> %[[S:.*]] {ap = array<i64: 0, 8, 1, 512>, {{.*}}offset = 0 : i64, part_start = 0 : i64
// CHECK: nc.dma_load %{{.*}} -> %[[S]] {ap = array<i64: 0, 8, 1, 512>, {{.*}}offset = 512 : i64, part_start = 8 : i64
// CHECK: nc.dma_load %{{.*}} -> %[[S]] {ap = array<i64: 0, 8, 1, 512>, {{.*}}offset = 1024 : i64, part_start = 16 : i64
// CHECK: nc.dma_load %{{.*}} -> %[[S]] {ap = array<i64: 0, 8, 1, 512>, {{.*}}offset = 1536 : i64, part_start = 24 : i64
// CHECK: nc.tensor_scalar %[[SCALED:.*]], %[[S]] {alu = "mul", {{.*}}imm = 2.000000e+00
// CHECK: nc.tensor_tensor %{{.*}}, %{{.*}}, %[[SCALED]] {alu = "sub"
func.func @broadcast_runs(%x: tensor<4x8x512xbf16>, %s: tensor<4x1x512xbf16>) -> tensor<4x8x512xbf16> {
  %y = aten.sub.Tensor %x, %s {alpha = 2.0 : f64} : tensor<4x8x512xbf16>, tensor<4x1x512xbf16> -> tensor<4x8x512xbf16>
  return %y : tensor<4x8x512xbf16>
}

// -----

// A 0-d constant becomes an immediate. In an elementwise kernel a trailing
// unit dim joins the columns: [4, 1] is one row of 4 columns.
// CHECK-LABEL: func.func @immediate
// CHECK: nc.dma_load {{.*}} {ap = array<i64: 0, 1, 1, 4>{{.*}} : memref<4x1xbf16>, memref<1x4xbf16, 1>
// CHECK: nc.tensor_scalar %{{.*}}, %{{.*}} {alu = "add", {{.*}}imm = 9.9999999747524271E-7 {{.*}} : memref<1x4xbf16, 1>, memref<1x4xbf16, 1>
func.func @immediate(%m: tensor<4x1xbf16>) -> tensor<4x1xbf16> {
  %eps = arith.constant dense<1.0e-06> : tensor<f32>
  %r = aten.add.Tensor %m, %eps : tensor<4x1xbf16>, tensor<f32> -> tensor<4x1xbf16>
  return %r : tensor<4x1xbf16>
}

// -----

// [129, 129, 1] values with a [129, 1] mask broadcast over the rows: the
// columns are the last two dims (129 of them), two row tiles, not 131 row
// tiles of one column each; the mask is the same in every row.
// CHECK-LABEL: func.func @unit_columns
// CHECK-COUNT-2: nc.dma_load {{.*}} : memref<129x129x1xf32>, memref<{{128|1}}x129xf32, 1>
// CHECK-NOT: memref<128x1xf32, 1>
func.func @unit_columns(%x: tensor<129x129x1xf32>, %m: tensor<129x1xi1>) -> tensor<129x129x1xf32> {
  %e = aten.exp %x : tensor<129x129x1xf32> -> tensor<129x129x1xf32>
  %r = aten.masked_fill.Scalar %e, %m, 0.0 : tensor<129x129x1xf32>, tensor<129x1xi1> -> tensor<129x129x1xf32>
  return %r : tensor<129x129x1xf32>
}

// -----

// A row too long to keep whole (here 10007 f32, over the 96 KiB budget for 4
// live copies; a prime length, so it is not spread over partitions) is
// reduced chunk by chunk into a per-row accumulator; the mean scale and the
// per-row ops after it run once, after the last chunk.
// CHECK-LABEL: func.func @long_rows
// CHECK: nc.dma_load {{.*}} {ap = array<i64: 10007, 4, 1, 4096>, {{.*}}offset = 0 : i64
// CHECK: nc.tensor_reduce %[[ACC:.*]], %{{.*}} {alu = "max"
// CHECK: nc.dma_load {{.*}} {ap = array<i64: 10007, 4, 1, 4096>, {{.*}}offset = 4096 : i64
// CHECK: nc.tensor_reduce %[[PART:.*]], %{{.*}} {alu = "max"
// CHECK: nc.tensor_tensor %[[ACC]], %[[ACC]], %[[PART]] {alu = "max"
// CHECK: nc.dma_load {{.*}} {ap = array<i64: 10007, 4, 1, 1815>, {{.*}}offset = 8192 : i64
// CHECK: nc.tensor_tensor %[[ACC]], %[[ACC]], %{{.*}} {alu = "max"
// CHECK: nc.activation %{{.*}}, %[[ACC]] {{{.*}}func = "exp"
// CHECK: nc.dma_store {{.*}} {ap = array<i64: 1, 4, 1, 1>
func.func @long_rows(%x: tensor<4x10007xf32>) -> tensor<4x1xf32> {
  %m = aten.amax %x {dim = array<i64: -1>, keepdim = true} : tensor<4x10007xf32> -> tensor<4x1xf32>
  %e = aten.exp %m : tensor<4x1xf32> -> tensor<4x1xf32>
  return %e : tensor<4x1xf32>
}

// -----

// The sum of exp(y - max) over a row too long to keep whole is taken chunk
// by chunk in the maximum's kernel (passes/OnlineSum.h): each chunk's
// exponentials against the running maximum so far, clamped to the finite
// floats (one activation with its row sums accumulated), the running sum
// rescaled by exp(r_old - r_new) before adding them, and at the end by
// exp(r - max).
// CHECK-LABEL: func.func @online_softmax_sum
// CHECK: nc.kernel "k0_fused_to_copy_amax_sub_exp_etc"
// CHECK: nc.dma_load {{.*}} -> %[[X0:[0-9]+]] {{.*}}offset = 0 : i64
// CHECK: nc.tensor_reduce %[[MAX:[0-9]+]], %[[X0]] {alu = "max"
// CHECK: nc.tensor_scalar %[[R0:[0-9]+]], %[[MAX]] {alu = "max", {{.*}}imm = -3.4028234663852886E+38
// CHECK: nc.tensor_scalar %[[R0]], %[[R0]] {alu = "min", {{.*}}imm = 3.4028234663852886E+38
// CHECK: nc.tensor_scalar %[[NR0:[0-9]+]], %[[R0]] {alu = "mul", {{.*}}imm = -1.0
// CHECK: nc.activation %{{.*}}, %[[X0]] bias %[[NR0]] : {{.*}} accum %[[SUM:[0-9]+]] : {{.*}}func = "exp"
// CHECK: nc.dma_load {{.*}} -> %[[X1:[0-9]+]] {{.*}}offset = 4096 : i64
// CHECK: nc.tensor_tensor %[[MAX]], %[[MAX]], %{{.*}} {alu = "max"
// CHECK: nc.tensor_scalar %[[R1:[0-9]+]], %[[MAX]] {alu = "max"
// CHECK: nc.tensor_scalar %[[NR1:[0-9]+]], %[[R1]] {alu = "mul", {{.*}}imm = -1.0
// CHECK: nc.activation %{{.*}}, %[[X1]] bias %[[NR1]] : {{.*}} accum %[[PART:[0-9]+]] : {{.*}}func = "exp"
// CHECK: nc.activation %[[RESCALE:[0-9]+]], %[[R0]] bias %[[NR1]] : {{.*}}func = "exp"
// CHECK: nc.tensor_scalar %[[SUM]], %[[SUM]], %[[RESCALE]] {alu = "mul"
// CHECK: nc.tensor_tensor %[[SUM]], %[[SUM]], %[[PART]] {alu = "add"
// CHECK: nc.dma_load {{.*}}offset = 8192 : i64
// CHECK: nc.tensor_scalar %[[NM:[0-9]+]], %[[MAX]] {alu = "mul", {{.*}}imm = -1.0
// CHECK: nc.activation %[[LAST:[0-9]+]], %{{.*}} bias %[[NM]] : {{.*}}func = "exp"
// CHECK: nc.activation %{{.*}}, %[[SUM]] scale %[[LAST]] : {{.*}}func = "log"
// CHECK-NOT: nc.dma_load
func.func @online_softmax_sum(%x: tensor<4x10007xbf16>) -> tensor<4x1xf32> {
  %y = aten._to_copy %x {dtype = 6 : i64} : tensor<4x10007xbf16> -> tensor<4x10007xf32>
  %m = aten.amax %y {dim = array<i64: -1>, keepdim = true} : tensor<4x10007xf32> -> tensor<4x1xf32>
  %d = aten.sub.Tensor %y, %m : tensor<4x10007xf32>, tensor<4x1xf32> -> tensor<4x10007xf32>
  %e = aten.exp %d : tensor<4x10007xf32> -> tensor<4x10007xf32>
  %s = aten.sum.dim_IntList %e {dim = array<i64: -1>, keepdim = true} : tensor<4x10007xf32> -> tensor<4x1xf32>
  %l = aten.log %s : tensor<4x1xf32> -> tensor<4x1xf32>
  return %l : tensor<4x1xf32>
}

// -----

// A norm over rows too long to keep whole (12288 bf16: about 120 KiB a
// partition) whose input fits SBUF (24 KiB) is one kernel with resident
// rows: each row tile's x is loaded once, chunk by chunk, into one tile; pass
// 0 sums its squares over column ranges of that tile, and pass 1 scales the
// same columns by the per-row factor, multiplies by the weight (loaded when
// pass 1 first needs it) and stores the result.
// CHECK-LABEL: func.func @resident_rms_norm
// CHECK: nc.kernel "k0_rms_norm"{{.*}}nc.resident_rows
// CHECK: %[[X:[0-9]+]] = nc.alloc_tile {{.*}} : memref<128x12288xbf16, 1>
// CHECK: %[[X0:[0-9]+]] = nc.tile_columns %[[X]][0]
// CHECK: nc.dma_load %arg{{[0-9]+}} -> %[[X0]] {ap = array<i64: 12288, 16, 1, 4096>, {{.*}}offset = 0 : i64
// CHECK: %[[X1:[0-9]+]] = nc.tile_columns %[[X]][4096]
// CHECK: nc.dma_load %arg{{[0-9]+}} -> %[[X1]] {{.*}}offset = 4096 : i64
// CHECK: %[[X2:[0-9]+]] = nc.tile_columns %[[X]][8192]
// CHECK: nc.dma_load %arg{{[0-9]+}} -> %[[X2]] {{.*}}offset = 8192 : i64
// CHECK: %[[A0:[0-9]+]] = nc.tile_columns %[[X]][0]
// CHECK: nc.activation %{{.*}}, %[[A0]] accum %[[SS:[0-9]+]] : {{.*}}func = "square"
// CHECK: nc.activation %{{.*}} accum %{{.*}}func = "square"
// CHECK: nc.activation %{{.*}} accum %{{.*}}func = "square"
// CHECK: nc.activation %[[R:[0-9]+]], %[[SS]] {{.*}}func = "rsqrt"
// CHECK-NOT: nc.dma_load %arg{{[0-9]+}} -> %{{.*}} {ap = array<i64: 12288,
// CHECK: %[[B0:[0-9]+]] = nc.tile_columns %[[X]][0]
// CHECK: nc.tensor_scalar %[[N:[0-9]+]], %[[B0]], %[[R]] {alu = "mul"
// CHECK: nc.dma_load %arg{{[0-9]+}} -> %[[W:[0-9]+]] {ap = array<i64: 0, 16, 1, 4096>
// CHECK: nc.tensor_tensor %[[Y:[0-9]+]], %[[N]], %[[W]] {alu = "mul"
// CHECK: nc.dma_store %[[Y]] -> %arg{{[0-9]+}} {ap = array<i64: 12288, 16, 1, 4096>, {{.*}}offset = 0 : i64
// CHECK: nc.tile_columns %[[X]][4096]
// CHECK: nc.tile_columns %[[X]][8192]
// CHECK: nc.dma_load %arg{{[0-9]+}} -> %{{.*}} {ap = array<i64: 12288, 16, 1, 4096>, {{.*}}offset = 1572864 : i64
func.func @resident_rms_norm(%x: tensor<256x12288xbf16>, %w: tensor<12288xbf16>) -> tensor<256x12288xbf16> {
  %y = aten.rms_norm %x, %w {normalized_shape = array<i64: 12288>, eps = 1.0e-06} : tensor<256x12288xbf16>, tensor<12288xbf16> -> tensor<256x12288xbf16>
  return %y : tensor<256x12288xbf16>
}

// -----

// A kernel that needs the reduced value at every element of a long row (a
// bf16 softmax over 8192, which form-kernels keeps whole: two live rows of
// 8192 fit the budget) is not chunked: each row tile is loaded once, its
// maximum and the sum of exponentials taken over the whole row, and the
// quotient stored from the same tiles. The last row tile's stores, the
// kernel's drain, go in 16 pieces (one per DMA queue) instead of 8.
// CHECK-LABEL: func.func @whole_long_rows
// CHECK: nc.kernel "k0_softmax"
// CHECK: nc.dma_load %{{.*}} -> %[[X:[0-9]+]] {ap = array<i64: 8192, 16, 1, 8192>, {{.*}}offset = 0 : i64
// CHECK-NOT: nc.dma_load {{.*}}offset = 8192 : i64
// CHECK: nc.tensor_reduce %{{.*}}, %[[X]] {alu = "max"{{.*}} : memref<128x1xf32, 1>, memref<128x8192xbf16, 1>
// CHECK: nc.activation %[[E:[0-9]+]], %[[X]] bias %{{.*}} accum %[[S:[0-9]+]] : {{.*}}func = "exp"{{.*}} : memref<128x8192xf32, 1>, memref<128x8192xbf16, 1>
// CHECK: nc.tensor_scalar %[[Q:[0-9]+]], %[[E]], %[[S]] {alu = "div"
// CHECK: nc.dma_store %[[Q]] -> %{{.*}} {ap = array<i64: 8192, 16, 1, 8192>, {{.*}}offset = 0 : i64
// CHECK-NOT: nc.dma_store {{.*}}ap = array<i64: 8192, 8, 1, 8192>
// CHECK: nc.dma_store {{.*}}ap = array<i64: 8192, 16, 1, 8192>, {{.*}}part_start = 112 : i64
// CHECK: nc.dma_store {{.*}}ap = array<i64: 8192, 8, 1, 8192>, {{.*}}part_start = 0 : i64
// CHECK-COUNT-14: nc.dma_store {{.*}}ap = array<i64: 8192, 8, 1, 8192>
// CHECK: nc.dma_store {{.*}}ap = array<i64: 8192, 8, 1, 8192>, {{.*}}part_start = 120 : i64
func.func @whole_long_rows(%x: tensor<256x8192xbf16>) -> tensor<256x8192xbf16> {
  %y = aten._softmax %x {dim = -1 : i64, half_to_float = false} : tensor<256x8192xbf16> -> tensor<256x8192xbf16>
  return %y : tensor<256x8192xbf16>
}

// -----

// Integers cross the graph boundary as integers in HBM: the int64 input is
// loaded into an f32 tile (the DMA converts), and the integer results are
// stored from f32 tiles into int64 outputs. The casts back to int64 of
// PyTorch's promotion need no rounding: a sum of a bool, and an integer
// times a whole number, are whole numbers.
// CHECK-LABEL: func.func @integer_io
// CHECK: nc.kernel "k0_fused_gt_to_copy_sum"
// CHECK: nc.dma_store {{.*}} : memref<4x1xf32, 1>, memref<4x1xi64>
// CHECK: nc.kernel "k1_fused_to_copy_mul"
// CHECK: nc.dma_load {{.*}} : memref<4x300xi64>, memref<4x300xf32, 1>
// CHECK: nc.dma_store {{.*}} : memref<4x300xf32, 1>, memref<4x300xi64>
func.func @integer_io(%x: tensor<4x300xf32>, %m: tensor<4x300xi64>) -> (tensor<4x1xi64>, tensor<4x300xi64>) {
  %c = aten.gt.Scalar %x, 0.0 : tensor<4x300xf32> -> tensor<4x300xi1>
  %f = aten._to_copy %c : tensor<4x300xi1> -> tensor<4x300xf32>
  %s = aten.sum.dim_IntList %f {dim = array<i64: -1>, keepdim = true} : tensor<4x300xf32> -> tensor<4x1xf32>
  %n = aten._to_copy %s : tensor<4x1xf32> -> tensor<4x1xi64>
  %mf = aten._to_copy %m : tensor<4x300xi64> -> tensor<4x300xf32>
  %t = aten.mul.Scalar %mf, 3.0 : tensor<4x300xf32> -> tensor<4x300xf32>
  %ti = aten._to_copy %t : tensor<4x300xf32> -> tensor<4x300xi64>
  return %n, %ti : tensor<4x1xi64>, tensor<4x300xi64>
}
