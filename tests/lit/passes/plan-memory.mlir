// RUN: neuron-opt %examples/rmsnorm/naive.mlir --ncc-form-kernels=fuse=false --ncc-lower-to-isa --ncc-plan-memory | FileCheck %s
// RUN: neuron-opt %s --ncc-form-kernels --ncc-lower-to-isa=row-budget-bytes=1000000000 --ncc-plan-memory --split-input-file --verify-diagnostics -o /dev/null
// RUN: neuron-opt %s --split-input-file --ncc-form-kernels --ncc-lower-to-isa --ncc-plan-memory | FileCheck %s --check-prefix=ROTATE

// Intermediates between the six -O0 kernels share a 4104-byte arena: the
// 4 KiB product of k0 is dead once k1 has read it, so k4 reuses its bytes;
// the graph output (k5) is bound by the caller and takes no arena space.
// CHECK: func.func @main{{.*}}attributes {nc.arena_bytes = 4104 : i64}
// CHECK: nc.kernel "k0_mul"{{.*}}result_offsets = array<i64: 0>
// CHECK: nc.kernel "k1_mean"{{.*}}result_offsets = array<i64: 4096>
// Inside a kernel of one iteration, tiles are held to its end where they
// all fit: the [4 x 1] mean does not take the bytes of the [4 x 512] square
// it reduces (it would wait for the square's last reader; a kernel that
// transposes a [4096, 16] input bank by bank waited so for each bank's
// buffer, 93.5 us against 12.3). Every other kernel places its tiles from
// the top of SBUF down (mirrored), clear of the previous kernel's bytes
// when both fit, so that its first loads need not wait for that kernel at
// the boundary.
// CHECK: nc.alloc_tile {iteration = 1 : i64, offset = 195584 : i64} : memref<4x512xbf16, 1>
// CHECK: nc.alloc_tile {iteration = 1 : i64, offset = 195520 : i64} : memref<4x1xbf16, 1>
// CHECK: nc.kernel "k2_add"{{.*}}result_offsets = array<i64: 0>
// CHECK: nc.kernel "k3_rsqrt"{{.*}}result_offsets = array<i64: 4096>
// CHECK: nc.kernel "k4_mul"{{.*}}result_offsets = array<i64: 0>
// CHECK: nc.kernel "k5_mul"{{.*}}result_offsets = array<i64: -1>

// A whole row of 60000 f32 does not fit a 192 KiB partition (here whole rows
// are forced; by default such a row is reduced chunk by chunk; over more than
// 64 rows, rows are not spread over partitions).
func.func @too_wide(%x: tensor<65x60000xf32>) -> tensor<65x1xf32> {
  // expected-error @+2 {{kernel 'k0_sum' needs 240004 SBUF bytes per partition, more than the 196608 available}}
  // expected-note @+1 {{peak live bytes (a lower bound): 240004}}
  %r = aten.sum.dim_IntList %x {dim = array<i64: -1>, keepdim = true} : tensor<65x60000xf32> -> tensor<65x1xf32>
  return %r : tensor<65x1xf32>
}

// -----

// PSUM tiles rotate over the banks (here every tile of the first row tile
// gets a bank of its own), so a transpose never waits for the copy out of
// the bank a previous one filled. A PSUM tile's column range (four W
// transposes side by side, or x's two full slices) lives in its tile's
// bank.
// ROTATE-LABEL: func.func @rotation
// ROTATE: nc.alloc_psum {offset = [[ACC:[0-9]+]] : i64} : memref<128x512xf32, 2>
// ROTATE: nc.alloc_psum {offset = [[X0:[0-9]+]] : i64} : memref<128x256xf32, 2>
// ROTATE-NOT: offset = [[X0]] : i64} : memref
// ROTATE: nc.alloc_psum {offset = [[W0:[0-9]+]] : i64} : memref<128x512xf32, 2>
// ROTATE-NOT: offset = [[X0]] : i64} : memref
// ROTATE-NOT: offset = [[W0]] : i64} : memref
// ROTATE-NOT: offset = [[ACC]] : i64} : memref
// ROTATE: nc.alloc_psum {offset = {{[0-9]+}} : i64} : memref<44x512xf32, 2>
func.func @rotation(%x: tensor<200x300xf32>, %w: tensor<600x300xf32>) -> tensor<200x600xf32> {
  %t = aten.t %w : tensor<600x300xf32> -> tensor<300x600xf32>
  %y = aten.mm %x, %t : tensor<200x300xf32>, tensor<300x600xf32> -> tensor<200x600xf32>
  return %y : tensor<200x600xf32>
}

// -----

// The rotation counts a PSUM tile's successors from its last use. The first
// row tile's accumulator lives through its 32 matmuls while the 32 slices
// of x transposed meanwhile (four to a bank) start and die; counted from
// its first use, its bank was free again after its copy out, and the second
// row tile's transposes could take it and wait for the copy. Now the seven
// PSUM tiles after the copy keep off it.
// ROTATE-LABEL: func.func @from_last_use
// ROTATE: %[[ACC:[0-9]+]] = nc.alloc_psum {offset = [[OFF:[0-9]+]] : i64} : memref<128x512xf32, 2>
// ROTATE: nc.{{tensor_scalar|activation}} %{{[0-9]+}}, %[[ACC]] {
// ROTATE-NOT: offset = [[OFF]] : i64} : memref
// ROTATE: nc.alloc_psum
// ROTATE-NOT: offset = [[OFF]] : i64} : memref
// ROTATE: nc.alloc_psum
// ROTATE-NOT: offset = [[OFF]] : i64} : memref
// ROTATE: nc.alloc_psum
// ROTATE-NOT: offset = [[OFF]] : i64} : memref
// ROTATE: nc.alloc_psum
// ROTATE-NOT: offset = [[OFF]] : i64} : memref
// ROTATE: nc.alloc_psum
// ROTATE-NOT: offset = [[OFF]] : i64} : memref
// ROTATE: nc.alloc_psum
// ROTATE-NOT: offset = [[OFF]] : i64} : memref
// ROTATE: nc.alloc_psum
func.func @from_last_use(%x: tensor<256x4096xf32>, %w: tensor<4096x512xf32>) -> tensor<256x512xf32> {
  %y = aten.mm %x, %w : tensor<256x4096xf32>, tensor<4096x512xf32> -> tensor<256x512xf32>
  return %y : tensor<256x512xf32>
}

// -----

// A value stored transposed: per row tile, three 128-column blocks go
// through the TensorEngine into PSUM and are copied out to SBUF. The six
// PSUM tiles (fewer than the rotation depth) each keep a bank, so no
// transpose waits for the copy out of the previous one. The blocks of both
// row tiles gather, per column block, in one [128 x 256] tile allocated with
// the first row tile (LowerToIsa.cpp, storeTransposed), stored once after
// the second: runs of 256 elements instead of two of 128.
// ROTATE-LABEL: func.func @stored_transposed
// ROTATE: %[[G0:.*]] = nc.alloc_tile {iteration = 1 : i64, offset = {{[0-9]+}} : i64} : memref<128x256xbf16, 1>
// ROTATE: nc.alloc_psum {offset = 0 : i64} : memref<128x128xf32, 2>
// ROTATE: %[[G1:.*]] = nc.alloc_tile {iteration = 1 : i64, offset = {{[0-9]+}} : i64} : memref<128x256xbf16, 1>
// ROTATE: nc.alloc_psum {offset = 2048 : i64} : memref<128x128xf32, 2>
// ROTATE: %[[G2:.*]] = nc.alloc_tile {iteration = 1 : i64, offset = {{[0-9]+}} : i64} : memref<128x256xbf16, 1>
// ROTATE: nc.alloc_psum {offset = 4096 : i64} : memref<128x128xf32, 2>
// ROTATE: nc.alloc_psum {offset = 6144 : i64} : memref<128x128xf32, 2>
// ROTATE: nc.dma_store %[[G0]] -> %{{.*}} {ap = array<i64: 256, 128, 1, 256>, {{.*}} offset = 0 : i64
// ROTATE: nc.alloc_psum {offset = 8192 : i64} : memref<128x128xf32, 2>
// ROTATE: nc.dma_store %[[G1]] -> %{{.*}} {ap = array<i64: 256, 128, 1, 256>, {{.*}} offset = 32768 : i64
// ROTATE: nc.alloc_psum {offset = 10240 : i64} : memref<128x128xf32, 2>
// ROTATE: nc.dma_store %[[G2]] -> %{{.*}} {ap = array<i64: 256, 128, 1, 256>, {{.*}} offset = 65536 : i64
func.func @stored_transposed(%x: tensor<256x384xbf16>) -> tensor<384x256xbf16> {
  %y = aten.exp %x : tensor<256x384xbf16> -> tensor<256x384xbf16>
  %t = aten.t %y : tensor<256x384xbf16> -> tensor<384x256xbf16>
  return %t : tensor<384x256xbf16>
}

// -----

// A bf16 softmax over rows of 8192 fits only two row tiles' f32
// exponentials, but the tiles its DMAs fill and drain (x, the quotient) are
// held through two more row tiles, so that the loads run ahead and the
// stores drain while the next row tiles compute: row tile 3's x takes bytes
// of its own, row tile 4's those of row tile 1.
// ROTATE-LABEL: func.func @transferred_deeper
// ROTATE: nc.alloc_tile {iteration = 1 : i64, offset = [[X1:[0-9]+]] : i64} : memref<128x8192xbf16, 1>
// ROTATE-NOT: nc.alloc_tile {iteration = 3 : i64, offset = [[X1]] : i64}
// ROTATE: nc.alloc_tile {iteration = 4 : i64, offset = [[X1]] : i64} : memref<128x8192xbf16, 1>
func.func @transferred_deeper(%x: tensor<512x8192xbf16>) -> tensor<512x8192xbf16> {
  %0 = aten._to_copy %x : tensor<512x8192xbf16> -> tensor<512x8192xf32>
  %1 = aten.amax %0 {dim = array<i64: -1>, keepdim = true} : tensor<512x8192xf32> -> tensor<512x1xf32>
  %2 = aten.sub.Tensor %0, %1 : tensor<512x8192xf32>, tensor<512x1xf32> -> tensor<512x8192xf32>
  %3 = aten.exp %2 : tensor<512x8192xf32> -> tensor<512x8192xf32>
  %4 = aten.sum.dim_IntList %3 {dim = array<i64: -1>, keepdim = true} : tensor<512x8192xf32> -> tensor<512x1xf32>
  %5 = aten.div.Tensor %3, %4 : tensor<512x8192xf32>, tensor<512x1xf32> -> tensor<512x8192xf32>
  %6 = aten._to_copy %5 : tensor<512x8192xf32> -> tensor<512x8192xbf16>
  return %6 : tensor<512x8192xbf16>
}
