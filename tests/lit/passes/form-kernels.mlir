// RUN: neuron-opt %examples/rmsnorm/naive.mlir --ncc-form-kernels=fuse=false | FileCheck %s --check-prefix=O0
// RUN: neuron-opt %examples/rmsnorm/naive.mlir --ncc-form-kernels=fuse=true | FileCheck %s --check-prefix=O2
// RUN: neuron-opt %s --ncc-form-kernels=fuse=true 2>/dev/null | FileCheck %s --check-prefix=RESID
// RUN: neuron-opt %examples/rmsnorm/fused_op.mlir --ncc-decompose-composites --ncc-form-kernels=fuse=false | FileCheck %s --check-prefix=COMPOSITE
// RUN: neuron-opt %s --ncc-form-kernels="fuse=true report=true" 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: neuron-opt %s --ncc-form-kernels="fuse=true report=true sbuf-budget-bytes=4096" 2>&1 | FileCheck %s --check-prefix=BUDGET

// -O0: one kernel per source op; the three multiplies stay apart.
// result_sources names the op that computed each result.
// O0: nc.kernel "k0_mul"(%arg0) {result_sources = ["aten.mul.Tensor"], source_ops = ["aten.mul.Tensor"]}
// O0: nc.kernel "k1_mean"({{.*}}) {result_sources = ["aten.mean.dim"], source_ops = ["aten.mean.dim"]}
// O0: nc.kernel "k2_add"({{.*}}) {result_sources = ["aten.add.Tensor"], source_ops = ["aten.add.Tensor"]}
// The 0-d eps constant is cloned into the kernel that uses it.
// O0: arith.constant dense<9.99999997E-7> : tensor<f32>
// O0: nc.kernel "k3_rsqrt"({{.*}}) {result_sources = ["aten.rsqrt"], source_ops = ["aten.rsqrt"]}
// O0: nc.kernel "k4_mul"({{.*}}) {result_sources = ["aten.mul.Tensor"], source_ops = ["aten.mul.Tensor"]}
// O0: nc.kernel "k5_mul"({{.*}}) {result_sources = ["aten.mul.Tensor"], source_ops = ["aten.mul.Tensor"]}
// O0-NOT: nc.kernel

// -O2: the reduction, its broadcast back over the row and the elementwise
// chain are one kernel that reads x and weight and writes y.
// O2: %[[K:.*]] = nc.kernel "k0_fused_mul_mean_add_rsqrt"(%arg0, %arg1) {result_sources = ["aten.mul.Tensor"], source_ops = ["aten.mul.Tensor", "aten.mean.dim", "aten.add.Tensor", "aten.rsqrt", "aten.mul.Tensor", "aten.mul.Tensor"]} : (tensor<4x512xbf16>, tensor<512xbf16>) -> tensor<4x512xbf16>
// O2-NOT: nc.kernel
// O2: return %[[K]]

// A decomposed composite is one kernel even at -O0; its result comes from
// the last op of the decomposition.
// COMPOSITE: nc.kernel "k0_rms_norm"(%arg0, %arg1) {nc.source_id = 0 : i64, result_sources = ["aten._to_copy of aten.rms_norm"], source_ops = ["aten.rms_norm"]}
// COMPOSITE-NOT: nc.kernel

// A column reduction alone (its operand and result reach other ops only
// through views) cannot share a kernel, and joining its consumer to the
// first kernel would make the two kernels depend on each other.
// REPORT: remark: cannot share a kernel: reductions over non-trailing dims are not fused
// REPORT: remark: not fused into kernel of 'aten.reshape': the producer kernel cannot be fused
// REPORT: remark: not fused into kernel of 'aten.exp': joining would create a cycle between kernels
// REPORT-LABEL: func.func @diamond
// REPORT: nc.kernel "k0_exp"
// REPORT: nc.kernel "k1_fused_reshape_amax"
// REPORT: nc.kernel "k2_fused_expand_mul"
func.func @diamond(%x: tensor<4x512xf32>) -> tensor<4x512xf32> {
  %a = aten.exp %x : tensor<4x512xf32> -> tensor<4x512xf32>
  %v = aten.reshape %a {size = array<i64: 4, 512>} : tensor<4x512xf32> -> tensor<4x512xf32>
  %b = aten.amax %v {dim = array<i64: 0>, keepdim = true} : tensor<4x512xf32> -> tensor<1x512xf32>
  %e = aten.expand %b {size = array<i64: 4, 512>} : tensor<1x512xf32> -> tensor<4x512xf32>
  %c = aten.mul.Tensor %a, %e : tensor<4x512xf32>, tensor<4x512xf32> -> tensor<4x512xf32>
  return %c : tensor<4x512xf32>
}

// With the ops around it, a reduction over a leading dim is computed in a
// frame whose last dim is the reduced one: its inputs are read through a
// permutation (one view per input), the result is written through the
// inverse one, and the whole softmax over dim 1 is one kernel.
// RESID-LABEL: func.func @softmax_dim1
// RESID: nc.kernel "k0_fused_permute_exp_amax_sub_etc"
// RESID-NEXT: ^bb0(%[[X:.*]]: tensor<3x40x8xf32>):
// RESID-NEXT: %[[P:.*]] = aten.permute %[[X]] {dims = array<i64: 0, 2, 1>{{.*}} -> tensor<3x8x40xf32>
// RESID-NEXT: %[[E:.*]] = aten.exp %[[P]]
// RESID-NEXT: %[[M:.*]] = aten.amax %[[E]] {dim = array<i64: 2>, keepdim = true{{.*}} -> tensor<3x8x1xf32>
// RESID-NEXT: %[[S:.*]] = aten.sub.Tensor %[[E]], %[[M]]
// RESID-NEXT: %[[N:.*]] = aten.sum.dim_IntList %[[S]] {dim = array<i64: 2>, keepdim = true
// RESID-NEXT: %[[D:.*]] = aten.div.Tensor %[[S]], %[[N]]
// RESID-NEXT: %[[R:.*]] = aten.permute %[[D]] {dims = array<i64: 0, 2, 1>{{.*}} -> tensor<3x40x8xf32>
// RESID-NEXT: nc.yield %[[R]]
// RESID-NOT: nc.kernel
// RESID-LABEL: func.func @
func.func @softmax_dim1(%x: tensor<3x40x8xf32>) -> tensor<3x40x8xf32> {
  %e = aten.exp %x : tensor<3x40x8xf32> -> tensor<3x40x8xf32>
  %m = aten.amax %e {dim = array<i64: 1>, keepdim = true} : tensor<3x40x8xf32> -> tensor<3x1x8xf32>
  %s = aten.sub.Tensor %e, %m : tensor<3x40x8xf32>, tensor<3x1x8xf32> -> tensor<3x40x8xf32>
  %n = aten.sum.dim_IntList %s {dim = array<i64: 1>, keepdim = true} : tensor<3x40x8xf32> -> tensor<3x1x8xf32>
  %d = aten.div.Tensor %s, %n : tensor<3x40x8xf32>, tensor<3x1x8xf32> -> tensor<3x40x8xf32>
  return %d : tensor<3x40x8xf32>
}

// A lone mean over a leading dim: a row of ones times each [R, C] block.
// RESID-SAME: mean_dim1(
// RESID: arith.constant dense<1.000000e+00> : tensor<1x1x40xf32>
// RESID-NEXT: nc.kernel "k0_fused_expand_bmm_mul"
// RESID-NEXT: ^bb0(%[[ONE:.*]]: tensor<1x1x40xf32>, %[[X:.*]]: tensor<3x40x8xf32>):
// RESID-NEXT: %[[ROWS:.*]] = aten.expand %[[ONE]] {{.*}} -> tensor<3x1x40xf32>
// RESID-NEXT: %[[S:.*]] = aten.bmm %[[ROWS]], %[[X]] {{.*}}: tensor<3x1x40xf32>, tensor<3x40x8xf32> -> tensor<3x1x8xf32>
// RESID-NEXT: %[[M:.*]] = aten.mul.Scalar %[[S]], 2.500000e-02
// RESID-NEXT: nc.yield %[[M]]
// RESID-NOT: nc.kernel
// RESID-LABEL: func.func @
func.func @mean_dim1(%x: tensor<3x40x8xf32>) -> tensor<3x1x8xf32> {
  %m = aten.mean.dim %x {dim = array<i64: 1>, keepdim = true} : tensor<3x40x8xf32> -> tensor<3x1x8xf32>
  return %m : tensor<3x1x8xf32>
}

// A masked sum over tokens: the mask's row times each block, before the
// frame would take the product; the product itself goes.
// RESID-SAME: masked_sum(
// RESID: nc.kernel "k0_fused_reshape_bmm"
// RESID-NEXT: ^bb0(%[[W:.*]]: tensor<3x40x1xbf16>, %[[X:.*]]: tensor<3x40x8xbf16>):
// RESID-NEXT: %[[R:.*]] = aten.reshape %[[W]] {{.*}} -> tensor<3x1x40xbf16>
// RESID-NEXT: %[[S:.*]] = aten.bmm %[[R]], %[[X]] {{.*}}: tensor<3x1x40xbf16>, tensor<3x40x8xbf16> -> tensor<3x1x8xbf16>
// RESID-NOT: aten.mul
// RESID: nc.yield
// RESID-NOT: nc.kernel
// RESID-LABEL: func.func @
func.func @masked_sum(%x: tensor<3x40x8xbf16>, %w: tensor<3x40x1xbf16>) -> tensor<3x8xbf16> {
  %p = aten.mul.Tensor %x, %w : tensor<3x40x8xbf16>, tensor<3x40x1xbf16> -> tensor<3x40x8xbf16>
  %s = aten.sum.dim_IntList %p {dim = array<i64: 1>} : tensor<3x40x8xbf16> -> tensor<3x8xbf16>
  return %s : tensor<3x8xbf16>
}

// A weighted sum over channels with blocks of 512 columns: the product and
// the sum in the input's own layout (a middle frame) cost far less than a
// matmul per row of 1024 (281.5 us against 46.6 on trn1).
// RESID-SAME: channel_weighted_sum(
// RESID: nc.kernel "k0_fused_mul_sum_reshape"({{.*}}) {nc.middle_frame
// RESID-NOT: aten.bmm
// RESID: nc.yield
// RESID-LABEL: func.func @
func.func @channel_weighted_sum(%x: tensor<1024x8x512xbf16>, %w: tensor<1x8x1xbf16>) -> tensor<1024x512xbf16> {
  %p = aten.mul.Tensor %x, %w : tensor<1024x8x512xbf16>, tensor<1x8x1xbf16> -> tensor<1024x8x512xbf16>
  %s = aten.sum.dim_IntList %p {dim = array<i64: 1>} : tensor<1024x8x512xbf16> -> tensor<1024x512xbf16>
  return %s : tensor<1024x512xbf16>
}

// A reduction over long rows still fuses with its elementwise producer: the
// row is reduced chunk by chunk, so the budget does not apply.
// Remarks come first, before the IR.
// BUDGET: remark: not fused into kernel of 'aten.amax': whole rows of 4096 elements would need about 32768 bytes per partition; the SBUF budget leaves 0 (4096 less 4096 for per-row values and constants)
// BUDGET-LABEL: func.func @wide_rows
// BUDGET: nc.kernel "k0_fused_exp_sum"
// BUDGET-NOT: nc.kernel
func.func @wide_rows(%x: tensor<4x4096xf32>) -> tensor<4x1xf32> {
  %a = aten.exp %x : tensor<4x4096xf32> -> tensor<4x4096xf32>
  %b = aten.sum.dim_IntList %a {dim = array<i64: -1>, keepdim = true} : tensor<4x4096xf32> -> tensor<4x1xf32>
  return %b : tensor<4x1xf32>
}

// Subtracting the row maximum needs the reduced value at every element, so
// the whole row must sit in SBUF: over budget, it becomes a second kernel.
// BUDGET-LABEL: func.func @needs_whole_row
// BUDGET: nc.kernel "k0_amax"
// BUDGET: nc.kernel "k1_sub"
func.func @needs_whole_row(%x: tensor<65x4096xf32>) -> tensor<65x4096xf32> {
  %m = aten.amax %x {dim = array<i64: -1>, keepdim = true} : tensor<65x4096xf32> -> tensor<65x1xf32>
  %d = aten.sub.Tensor %x, %m : tensor<65x4096xf32>, tensor<65x1xf32> -> tensor<65x4096xf32>
  return %d : tensor<65x4096xf32>
}

// Over 64 rows or fewer, the lowering spreads each row over several
// partitions (here 16 of 256 elements: nc::spreadFactor), so a part of a row
// fits the budget and the subtraction stays in the kernel.
// BUDGET-LABEL: func.func @spread_whole_row
// BUDGET: nc.kernel "k0_fused_amax_sub"
// BUDGET-NOT: nc.kernel
// BUDGET: func.func @residual
func.func @spread_whole_row(%x: tensor<4x4096xf32>) -> tensor<4x4096xf32> {
  %m = aten.amax %x {dim = array<i64: -1>, keepdim = true} : tensor<4x4096xf32> -> tensor<4x1xf32>
  %d = aten.sub.Tensor %x, %m : tensor<4x4096xf32>, tensor<4x1xf32> -> tensor<4x4096xf32>
  return %d : tensor<4x4096xf32>
}

// A residual add after a reshape of a matmul's result joins the matmul's
// kernel: the rows are the same, only their leading shape differs.
// RESID-LABEL: func.func @residual
// RESID: nc.kernel "k0_fused_mm_unsafe_view_add"
// RESID-NOT: nc.kernel
func.func @residual(%x: tensor<32x64xf32>, %w: tensor<64x128xf32>, %r: tensor<2x16x128xf32>) -> tensor<2x16x128xf32> {
  %m = aten.mm %x, %w : tensor<32x64xf32>, tensor<64x128xf32> -> tensor<32x128xf32>
  %v = aten._unsafe_view %m {size = array<i64: 2, 16, 128>} : tensor<32x128xf32> -> tensor<2x16x128xf32>
  %a = aten.add.Tensor %v, %r : tensor<2x16x128xf32>, tensor<2x16x128xf32> -> tensor<2x16x128xf32>
  return %a : tensor<2x16x128xf32>
}

// The same rows under another leading shape do not join a kernel whose ops
// read an operand reduced along a leading dim: [2, 1, 1, 2] broadcasts
// against rows [2, 2, 1] but not against [2, 1, 2, 1], and the kernel's
// space could take either (graph fuzzer, seed 494949, cases 1677 and 1929).
// RESID-LABEL: func.func @reshaped_rows_and_a_reduced_operand
// RESID: nc.kernel "k0_fused_sub_to_copy"(
// RESID: aten.sub.Tensor
// RESID: nc.kernel "k1_fused_reshape_mul"
func.func @reshaped_rows_and_a_reduced_operand(%a: tensor<2x2x1x2xf32>, %m: tensor<2x1x1x2xf32>, %x: tensor<2x1x2x1x2xf16>) -> tensor<2x1x2x1x2xf16> {
  %s = aten.sub.Tensor %a, %m : tensor<2x2x1x2xf32>, tensor<2x1x1x2xf32> -> tensor<2x2x1x2xf32>
  %c = aten._to_copy %s : tensor<2x2x1x2xf32> -> tensor<2x2x1x2xf16>
  %r = aten.reshape %c {size = array<i64: 2, 1, 2, 1, 2>} : tensor<2x2x1x2xf16> -> tensor<2x1x2x1x2xf16>
  %p = aten.mul.Tensor %r, %x : tensor<2x1x2x1x2xf16>, tensor<2x1x2x1x2xf16> -> tensor<2x1x2x1x2xf16>
  return %p : tensor<2x1x2x1x2xf16>
}

// An op located at a graph node (as the .pb importer sets it) gives its name;
// a kernel with several results has one entry per result.
// RESID-LABEL: func.func @named
// RESID: nc.kernel "k0_fused_exp_sum"(%arg0) {result_sources = ["aten.exp [exp_1]", "aten.sum.dim_IntList [sum_2]"]
func.func @named(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>) {
  %a = aten.exp %x : tensor<4x8xf32> -> tensor<4x8xf32> loc("exp_1")
  %b = aten.sum.dim_IntList %a {dim = array<i64: -1>, keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32> loc("sum_2")
  return %a, %b : tensor<4x8xf32>, tensor<4x1xf32>
}

// -----

// Sibling kernels whose results meet in one elementwise op become one
// kernel; every kernel start has a reason in the report.
// RUN: neuron-opt %s --split-input-file --ncc-form-kernels="fuse=true report=true" 2>&1 | FileCheck %s --check-prefix=SIBLING
// SIBLING: remark: starts a kernel: it reads no value computed in another kernel
// SIBLING: remark: starts a kernel: it reads no value computed in another kernel
// SIBLING-LABEL: func.func @siblings
// SIBLING: nc.kernel "k0_fused_exp_tanh_mul"
// SIBLING-NOT: nc.kernel
// SIBLING: return
func.func @siblings(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %a = aten.exp %x : tensor<4x64xf32> -> tensor<4x64xf32>
  %b = aten.tanh %x : tensor<4x64xf32> -> tensor<4x64xf32>
  %c = aten.mul.Tensor %a, %b : tensor<4x64xf32>, tensor<4x64xf32> -> tensor<4x64xf32>
  return %c : tensor<4x64xf32>
}

// -----

// A reduction without keepdim and the ops on its result run in the rows of
// the reducing kernel; the returned value is stored through the reshape.
// RUN: neuron-opt %s --split-input-file --ncc-form-kernels 2>&1 | FileCheck %s --check-prefix=SINK
// SINK-LABEL: func.func @sink
// SINK: nc.kernel "k0_fused_sum_log_reshape"
// SINK: aten.sum.dim_IntList {{.*}}keepdim = true{{.*}} -> tensor<4x1xf32>
// SINK: aten.log {{.*}} : tensor<4x1xf32> -> tensor<4x1xf32>
// SINK: aten.reshape {{.*}} : tensor<4x1xf32> -> tensor<4xf32>
// SINK-NOT: nc.kernel
// SINK: return
func.func @sink(%x: tensor<4x64xf32>) -> tensor<4xf32> {
  %s = aten.sum.dim_IntList %x {dim = array<i64: -1>, keepdim = false} : tensor<4x64xf32> -> tensor<4xf32>
  %l = aten.log %s : tensor<4xf32> -> tensor<4xf32>
  return %l : tensor<4xf32>
}

// A softmax over rows too long for SBUF (50257 f32, 128 rows: too many to
// spread) is two kernels: the maximum with the sum of exponentials (summed
// against a running maximum chunk by chunk, passes/OnlineSum.h), then the
// division. The division needs exp(x - max) at every element; instead of
// reading it from HBM (4 bytes an element each way), it computes it again
// from x and the maximum, so the first kernel returns only per-row values.
// RESID-LABEL: func.func @recompute_long_rows
// RESID: nc.kernel "k0_fused_amax_sub_exp_sum"(%arg0) {{.*}} -> (tensor<128x1xf32>, tensor<128x1xf32>)
// RESID: nc.kernel "k1_fused_sub_exp_div"(%arg0, %0#0, %0#1) {{.*}}: (tensor<128x50257xf32>, tensor<128x1xf32>, tensor<128x1xf32>) -> tensor<128x50257xf32>
func.func @recompute_long_rows(%x: tensor<128x50257xf32>) -> tensor<128x50257xf32> {
  %m = aten.amax %x {dim = array<i64: -1>, keepdim = true} : tensor<128x50257xf32> -> tensor<128x1xf32>
  %d = aten.sub.Tensor %x, %m : tensor<128x50257xf32>, tensor<128x1xf32> -> tensor<128x50257xf32>
  %e = aten.exp %d : tensor<128x50257xf32> -> tensor<128x50257xf32>
  %s = aten.sum.dim_IntList %e {dim = array<i64: -1>, keepdim = true} : tensor<128x50257xf32> -> tensor<128x1xf32>
  %y = aten.div.Tensor %e, %s : tensor<128x50257xf32>, tensor<128x1xf32> -> tensor<128x50257xf32>
  return %y : tensor<128x50257xf32>
}

// Whether a row stays whole is estimated from the kernel's live full-width
// values (wholeRowBytes), not from the row's length alone: a softmax over
// 8192 f32 holds two of them at a time (x and x - max, then the
// exponentials and the quotient), 64 KiB per partition, so it is one kernel.
// RESID-LABEL: func.func @whole_long_rows
// RESID: nc.kernel "k0_fused_amax_sub_exp_sum_etc"(%arg0)
// RESID-NOT: nc.kernel
func.func @whole_long_rows(%x: tensor<65x8192xf32>) -> tensor<65x8192xf32> {
  %m = aten.amax %x {dim = array<i64: -1>, keepdim = true} : tensor<65x8192xf32> -> tensor<65x1xf32>
  %d = aten.sub.Tensor %x, %m : tensor<65x8192xf32>, tensor<65x1xf32> -> tensor<65x8192xf32>
  %e = aten.exp %d : tensor<65x8192xf32> -> tensor<65x8192xf32>
  %s = aten.sum.dim_IntList %e {dim = array<i64: -1>, keepdim = true} : tensor<65x8192xf32> -> tensor<65x1xf32>
  %y = aten.div.Tensor %e, %s : tensor<65x8192xf32>, tensor<65x1xf32> -> tensor<65x8192xf32>
  return %y : tensor<65x8192xf32>
}

// Over 12288 f32 the same two live values take the whole budget, but x
// itself (48 KiB a partition) and a chunk's share of them fit: the kernel
// stays one, lowered in passes over x resident in SBUF (nc.resident_rows;
// residentRowsFit).
// RESID-LABEL: func.func @whole_rows_over_budget
// RESID: nc.kernel "k0_fused_amax_sub_exp_sum_etc"(%arg0) {nc.resident_rows,
// RESID-NOT: nc.kernel
func.func @whole_rows_over_budget(%x: tensor<65x12288xf32>) -> tensor<65x12288xf32> {
  %m = aten.amax %x {dim = array<i64: -1>, keepdim = true} : tensor<65x12288xf32> -> tensor<65x1xf32>
  %d = aten.sub.Tensor %x, %m : tensor<65x12288xf32>, tensor<65x1xf32> -> tensor<65x12288xf32>
  %e = aten.exp %d : tensor<65x12288xf32> -> tensor<65x12288xf32>
  %s = aten.sum.dim_IntList %e {dim = array<i64: -1>, keepdim = true} : tensor<65x12288xf32> -> tensor<65x1xf32>
  %y = aten.div.Tensor %e, %s : tensor<65x12288xf32>, tensor<65x1xf32> -> tensor<65x12288xf32>
  return %y : tensor<65x12288xf32>
}

// A logsumexp over long rows is one kernel: its sum of exponentials is
// taken against the maximum with infinities masked (c, a per-row value
// computed after the maximum), which the online sum applies at the end.
// RESID-LABEL: func.func @online_logsumexp
// RESID: nc.kernel "k0_fused_amax_abs_eq_masked_fill_etc"(%arg0)
// RESID-NOT: nc.kernel
func.func @online_logsumexp(%x: tensor<65x12288xf32>) -> tensor<65x1xf32> {
  %m = aten.amax %x {dim = array<i64: -1>, keepdim = true} : tensor<65x12288xf32> -> tensor<65x1xf32>
  %a = aten.abs %m : tensor<65x1xf32> -> tensor<65x1xf32>
  %i = aten.eq.Scalar %a, 0x7FF0000000000000 : tensor<65x1xf32> -> tensor<65x1xi1>
  %c = aten.masked_fill.Scalar %m, %i, 0.000000e+00 : tensor<65x1xf32>, tensor<65x1xi1> -> tensor<65x1xf32>
  %d = aten.sub.Tensor %x, %c : tensor<65x12288xf32>, tensor<65x1xf32> -> tensor<65x12288xf32>
  %e = aten.exp %d : tensor<65x12288xf32> -> tensor<65x12288xf32>
  %s = aten.sum.dim_IntList %e {dim = array<i64: -1>, keepdim = true} : tensor<65x12288xf32> -> tensor<65x1xf32>
  %l = aten.log %s : tensor<65x1xf32> -> tensor<65x1xf32>
  %r = aten.add.Tensor %l, %c : tensor<65x1xf32>, tensor<65x1xf32> -> tensor<65x1xf32>
  return %r : tensor<65x1xf32>
}

// Not an online sum: exp(x - max) in bf16 (its sum would be of rounded
// values), and x - max read by another op. Over rows of 50257, too long for
// x to stay resident either, both keep three kernels.
// RESID-LABEL: func.func @not_online
// RESID: nc.kernel "k0_amax"(%arg0)
// RESID: nc.kernel "k1_fused_sub_exp_sum"
// RESID: nc.kernel "k2_fused_sub_exp_div"
// RESID: nc.kernel "k3_amax"
// RESID: nc.kernel "k4_fused_sub
// RESID-NOT: nc.kernel
func.func @not_online(%x: tensor<65x50257xbf16>, %y: tensor<65x50257xf32>) -> (tensor<65x50257xbf16>, tensor<65x1xf32>) {
  %m = aten.amax %x {dim = array<i64: -1>, keepdim = true} : tensor<65x50257xbf16> -> tensor<65x1xbf16>
  %d = aten.sub.Tensor %x, %m : tensor<65x50257xbf16>, tensor<65x1xbf16> -> tensor<65x50257xbf16>
  %e = aten.exp %d : tensor<65x50257xbf16> -> tensor<65x50257xbf16>
  %s = aten.sum.dim_IntList %e {dim = array<i64: -1>, keepdim = true} : tensor<65x50257xbf16> -> tensor<65x1xbf16>
  %q = aten.div.Tensor %e, %s : tensor<65x50257xbf16>, tensor<65x1xbf16> -> tensor<65x50257xbf16>
  %my = aten.amax %y {dim = array<i64: -1>, keepdim = true} : tensor<65x50257xf32> -> tensor<65x1xf32>
  %dy = aten.sub.Tensor %y, %my : tensor<65x50257xf32>, tensor<65x1xf32> -> tensor<65x50257xf32>
  %ey = aten.exp %dy : tensor<65x50257xf32> -> tensor<65x50257xf32>
  %sy = aten.sum.dim_IntList %ey {dim = array<i64: -1>, keepdim = true} : tensor<65x50257xf32> -> tensor<65x1xf32>
  %ty = aten.sum.dim_IntList %dy {dim = array<i64: -1>, keepdim = true} : tensor<65x50257xf32> -> tensor<65x1xf32>
  %r = aten.add.Tensor %sy, %ty : tensor<65x1xf32>, tensor<65x1xf32> -> tensor<65x1xf32>
  return %q, %r : tensor<65x50257xbf16>, tensor<65x1xf32>
}

// Sibling reductions over rows too long to keep whole merge all the same:
// a kernel of reductions and per-row ops is chunked over rows of any length,
// so x is read once for both maxima.
// RESID-LABEL: func.func @long_row_siblings
// RESID: nc.kernel "k0_fused_amax_neg_add"(%arg0) {{.*}}source_ops = ["aten.amax", "aten.neg", "aten.amax", "aten.add.Tensor"]
// RESID-NOT: nc.kernel
func.func @long_row_siblings(%x: tensor<65x12288xf32>) -> tensor<65x1xf32> {
  %a = aten.amax %x {dim = array<i64: -1>, keepdim = true} : tensor<65x12288xf32> -> tensor<65x1xf32>
  %n = aten.neg %x : tensor<65x12288xf32> -> tensor<65x12288xf32>
  %b = aten.amax %n {dim = array<i64: -1>, keepdim = true} : tensor<65x12288xf32> -> tensor<65x1xf32>
  %r = aten.add.Tensor %a, %b : tensor<65x1xf32>, tensor<65x1xf32> -> tensor<65x1xf32>
  return %r : tensor<65x1xf32>
}

// Shorter rows with many live full-width values do not fit whole either:
// a, b, a + b and its difference from the maximum are four f32 rows of 6144
// live at once, 96 KiB per partition, so once the product with b would keep
// b live that long, it starts a kernel of its own.
// RESID-LABEL: func.func @many_live_rows
// RESID: nc.kernel "k0_fused_add_amax_sub_mul"(%arg0, %arg1)
// RESID: nc.kernel "k1_fused_mul"(%0, %arg1, %arg2)
func.func @many_live_rows(%a: tensor<65x6144xf32>, %b: tensor<65x6144xf32>, %c: tensor<65x6144xf32>) -> tensor<65x6144xf32> {
  %s = aten.add.Tensor %a, %b : tensor<65x6144xf32>, tensor<65x6144xf32> -> tensor<65x6144xf32>
  %m = aten.amax %s {dim = array<i64: -1>, keepdim = true} : tensor<65x6144xf32> -> tensor<65x1xf32>
  %d = aten.sub.Tensor %s, %m : tensor<65x6144xf32>, tensor<65x1xf32> -> tensor<65x6144xf32>
  %p = aten.mul.Tensor %d, %a : tensor<65x6144xf32>, tensor<65x6144xf32> -> tensor<65x6144xf32>
  %q = aten.mul.Tensor %p, %b : tensor<65x6144xf32>, tensor<65x6144xf32> -> tensor<65x6144xf32>
  %r = aten.mul.Tensor %q, %c : tensor<65x6144xf32>, tensor<65x6144xf32> -> tensor<65x6144xf32>
  return %r : tensor<65x6144xf32>
}
