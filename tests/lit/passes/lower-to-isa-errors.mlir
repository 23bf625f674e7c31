// RUN: neuron-opt %s --split-input-file --verify-diagnostics --ncc-form-kernels --ncc-lower-to-isa -o /dev/null

// Form-kernels never builds this kernel; written by hand, it is refused.
func.func @reduction_not_alone(%x: tensor<4x512xf32>) -> tensor<512xf32> {
  %r = nc.kernel "k"(%x) {source_ops = []} : (tensor<4x512xf32>) -> tensor<512xf32> {
  ^bb0(%a: tensor<4x512xf32>):
    %e = aten.exp %a : tensor<4x512xf32> -> tensor<4x512xf32>
    // expected-error @+1 {{reductions over non-trailing dims are only supported alone in a kernel (dims [0] of a rank-2 tensor)}}
    %s = aten.sum.dim_IntList %e {dim = array<i64: 0>} : tensor<4x512xf32> -> tensor<512xf32>
    nc.yield %s : tensor<512xf32>
  }
  return %r : tensor<512xf32>
}

// -----

func.func @too_large(%x: tensor<1099511627776x4xf32>) -> tensor<1099511627776x4xf32> {
  // expected-error @+1 {{kernel iteration space [1099511627776, 4] is too large (more than 2^40 elements)}}
  %r = aten.exp %x : tensor<1099511627776x4xf32> -> tensor<1099511627776x4xf32>
  return %r : tensor<1099511627776x4xf32>
}

// -----

func.func @too_many_tiles(%x: tensor<268435456x4xf32>) -> tensor<268435456x4xf32> {
  // expected-error @+1 {{kernel needs 2097152 row-tile iterations; programs are unrolled and at most 2^20 are supported}}
  %r = aten.exp %x : tensor<268435456x4xf32> -> tensor<268435456x4xf32>
  return %r : tensor<268435456x4xf32>
}

