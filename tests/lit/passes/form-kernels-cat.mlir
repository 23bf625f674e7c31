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
