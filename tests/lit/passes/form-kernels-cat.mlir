// RUN: neuron-opt %s --ncc-form-kernels="fuse=true report=true" 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK
// RUN: neuron-opt %s --ncc-form-kernels="fuse=true" 2>/dev/null | FileCheck %s

// A cat's pieces are loaded into column ranges of the kernel's tiles, so a cat
// of one column cannot be broadcast along a kernel of 128 columns: it is a
// kernel of its own, whichever of the two comes first (graph_fuzz 12121212
// case 274 filled only the first of the 128 columns with the divisor).
// REMARK: remark: not fused into kernel of 'aten.cat': a cat's columns would be broadcast along the kernel's (128 vs 1)
// REMARK: remark: sibling kernel of 'aten.cat' not merged: a cat's columns would be broadcast along the other kernel's
// CHECK-LABEL: func.func @cat_after_wider
// CHECK: nc.kernel "k0_cat"
// CHECK: nc.kernel "k1_fused_exp_div"
func.func @cat_after_wider(%a: tensor<4x1xf32>, %b: tensor<4x128xf32>) -> tensor<4x128xf32> {
  %e = aten.exp %b : tensor<4x128xf32> -> tensor<4x128xf32>
  %c = aten.cat %a {dim = 1 : i64} : tensor<4x1xf32> -> tensor<4x1xf32>
  %d = aten.div.Tensor %e, %c : tensor<4x128xf32>, tensor<4x1xf32> -> tensor<4x128xf32>
  return %d : tensor<4x128xf32>
}

// REMARK: remark: not fused into kernel of 'aten.cat': a cat's columns would be broadcast along the kernel's (128 vs 1)
// CHECK-LABEL: func.func @cat_before_wider
// CHECK: nc.kernel "k0_fused_cat_neg"
// CHECK: nc.kernel "k1_div"
func.func @cat_before_wider(%a: tensor<4x1xf32>, %b: tensor<4x128xf32>) -> tensor<4x128xf32> {
  %c = aten.cat %a {dim = 1 : i64} : tensor<4x1xf32> -> tensor<4x1xf32>
  %n = aten.neg %c : tensor<4x1xf32> -> tensor<4x1xf32>
  %d = aten.div.Tensor %b, %n : tensor<4x128xf32>, tensor<4x1xf32> -> tensor<4x128xf32>
  return %d : tensor<4x128xf32>
}

// A cat of a step-1 slice along the last dim of a value the kernel computes
// (a scan's step: the running sums shifted by one, padding before them)
// joins that kernel: the lowering copies the slice's columns from the
// value's tile, which holds whole rows of up to 4096 elements. Over longer
// rows the cat reads its pieces from HBM, a kernel of its own.
// CHECK-LABEL: func.func @shifted_computed_rows
// CHECK: nc.kernel "k0_fused_exp_slice_cat_add"
// CHECK-NOT: nc.kernel
// CHECK: return
func.func @shifted_computed_rows(%x: tensor<8x1000xf32>) -> tensor<8x1000xf32> {
  %zero = arith.constant dense<0.0> : tensor<8x1xf32>
  %e = aten.exp %x : tensor<8x1000xf32> -> tensor<8x1000xf32>
  %s = aten.slice.Tensor %e {dim = 1 : i64, start = 0 : i64, end = 999 : i64, step = 1 : i64} : tensor<8x1000xf32> -> tensor<8x999xf32>
  %c = aten.cat %zero, %s {dim = 1 : i64} : tensor<8x1xf32>, tensor<8x999xf32> -> tensor<8x1000xf32>
  %y = aten.add.Tensor %c, %e : tensor<8x1000xf32>, tensor<8x1000xf32> -> tensor<8x1000xf32>
  return %y : tensor<8x1000xf32>
}

// REMARK: remark: not fused into kernel of 'aten.exp': a cat reads its operands from HBM
// CHECK-LABEL: func.func @shifted_long_rows
// CHECK: nc.kernel "k0_exp"
// CHECK: nc.kernel "k1_fused_slice_cat_add"
func.func @shifted_long_rows(%x: tensor<8x5000xf32>) -> tensor<8x5000xf32> {
  %zero = arith.constant dense<0.0> : tensor<8x1xf32>
  %e = aten.exp %x : tensor<8x5000xf32> -> tensor<8x5000xf32>
  %s = aten.slice.Tensor %e {dim = 1 : i64, start = 0 : i64, end = 4999 : i64, step = 1 : i64} : tensor<8x5000xf32> -> tensor<8x4999xf32>
  %c = aten.cat %zero, %s {dim = 1 : i64} : tensor<8x1xf32>, tensor<8x4999xf32> -> tensor<8x5000xf32>
  %y = aten.add.Tensor %c, %e : tensor<8x5000xf32>, tensor<8x5000xf32> -> tensor<8x5000xf32>
  return %y : tensor<8x5000xf32>
}
