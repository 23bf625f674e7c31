//===- AtenOps.td - the aten dialect ----------------------------*- tablegen -*-===//
//
// One op per ATen overload, named after it, on builtin ranked tensors. The
// ops are value-semantic: no aliasing, no in-place variants (the exporter
// functionalizes graphs before they get here).
//
//===----------------------------------------------------------------------===//

#ifndef NEURON_ATEN_OPS
#define NEURON_ATEN_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def Aten_Dialect : Dialect {
  let name = "aten";
  let summary = "ATen operator set, one op per overload";
  let description = [{
    Ops mirror PyTorch's ATen overloads (`aten::mul.Tensor` is `aten.mul.Tensor`)
    with PyTorch's broadcasting and type-promotion rules. Scalars that ATen takes
    as `Scalar` are attributes; 0-d tensors are ordinary operands.
  }];
  let cppNamespace = "::neuroncc::aten";
}

def Aten_FloatTensor : RankedTensorOf<[F32, BF16, F16]>;
// Any tensor a graph may carry: floats, integers (indices, iota) and bools (masks).
def Aten_Tensor : RankedTensorOf<[F32, BF16, F16, F64, I64, I32, I1]>;
def Aten_BoolTensor : RankedTensorOf<[I1]>;
// A graph input or output may also be uint8, int8 or int16 (ui8, si8, si16):
// _to_copy converts it to and from i32, the type such values have inside the
// graph.
def Aten_BoundaryTensor : RankedTensorOf<[F32, BF16, F16, F64, I64, I32, I1, UI8, SI8, SI16]>;

class Aten_Op<string mnemonic, list<Trait> traits = []>
    : Op<Aten_Dialect, mnemonic,
         !listconcat(traits, [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>])>;

//===----------------------------------------------------------------------===//
// Elementwise binary ops on two tensors.
//===----------------------------------------------------------------------===//

class Aten_BinaryTensorOp<string mnemonic, string op_summary, string example>
    : Aten_Op<mnemonic> {
  let summary = op_summary;
  let description = !strconcat([{
    Elementwise with PyTorch broadcasting (shapes aligned from the right, size-1
    dimensions stretch) and type promotion: a 0-d tensor operand does not widen
    the result dtype of a tensor with dimensions, mixed bf16/f16 gives f32.

    ```mlir
  }], example, [{
    ```
  }]);
  let arguments = (ins Aten_Tensor:$self, Aten_Tensor:$other);
  let results = (outs Aten_Tensor:$result);
  let assemblyFormat = [{
    $self `,` $other attr-dict `:` type($self) `,` type($other) `->` type($result)
  }];
}

class Aten_BinaryAlphaOp<string mnemonic, string op_summary, string example>
    : Aten_BinaryTensorOp<mnemonic, op_summary, example> {
  let arguments = (ins Aten_Tensor:$self, Aten_Tensor:$other,
                       DefaultValuedAttr<F64Attr, "1.0">:$alpha);
}

def Aten_MulTensorOp : Aten_BinaryTensorOp<"mul.Tensor", "self * other",
  "%r = aten.mul.Tensor %x, %x : tensor<4x512xbf16>, tensor<4x512xbf16> -> tensor<4x512xbf16>">;
def Aten_DivTensorOp : Aten_BinaryTensorOp<"div.Tensor", "self / other",
  "%r = aten.div.Tensor %x, %n : tensor<4x512xf32>, tensor<4x1xf32> -> tensor<4x512xf32>">;
def Aten_MaximumOp : Aten_BinaryTensorOp<"maximum", "max(self, other) elementwise; NaN if either is NaN",
  "%r = aten.maximum %x, %y : tensor<4x512xf32>, tensor<4x1xf32> -> tensor<4x512xf32>">;
def Aten_MinimumOp : Aten_BinaryTensorOp<"minimum", "min(self, other) elementwise; NaN if either is NaN",
  "%r = aten.minimum %x, %y : tensor<4x512xf32>, tensor<4x1xf32> -> tensor<4x512xf32>">;
def Aten_PowTensorTensorOp : Aten_BinaryTensorOp<"pow.Tensor_Tensor", "self ** other elementwise (powf)",
  "%r = aten.pow.Tensor_Tensor %x, %e : tensor<4x512xf32>, tensor<f32> -> tensor<4x512xf32>">;
def Aten_AddTensorOp : Aten_BinaryAlphaOp<"add.Tensor", "self + alpha * other",
  "%r = aten.add.Tensor %m, %eps : tensor<4x1xbf16>, tensor<f32> -> tensor<4x1xbf16>">;
def Aten_SubTensorOp : Aten_BinaryAlphaOp<"sub.Tensor", "self - alpha * other",
  "%r = aten.sub.Tensor %x, %m {alpha = 1.0} : tensor<4x512xf32>, tensor<4x1xf32> -> tensor<4x512xf32>">;

//===----------------------------------------------------------------------===//
// Tensor-scalar ops (ATen `Scalar` arguments become attributes).
//===----------------------------------------------------------------------===//

class Aten_ScalarOp<string mnemonic, string op_summary, string example>
    : Aten_Op<mnemonic> {
  let summary = op_summary;
  let description = !strconcat([{
    A float `Scalar` does not change a floating tensor's dtype.

    ```mlir
  }], example, [{
    ```
  }]);
  let arguments = (ins Aten_FloatTensor:$self, F64Attr:$other);
  let results = (outs Aten_FloatTensor:$result);
  let assemblyFormat = [{
    $self `,` $other attr-dict `:` type($self) `->` type($result)
  }];
}

def Aten_MulScalarOp : Aten_ScalarOp<"mul.Scalar", "self * scalar",
  "%r = aten.mul.Scalar %x, 2.0 : tensor<4x512xf32> -> tensor<4x512xf32>">;
def Aten_AddScalarOp : Aten_ScalarOp<"add.Scalar", "self + alpha * scalar",
  "%r = aten.add.Scalar %x, 1.0e-06 : tensor<4x1xbf16> -> tensor<4x1xbf16>"> {
  let arguments = (ins Aten_FloatTensor:$self, F64Attr:$other,
                       DefaultValuedAttr<F64Attr, "1.0">:$alpha);
}

//===----------------------------------------------------------------------===//
// Elementwise unary ops.
//===----------------------------------------------------------------------===//

class Aten_UnaryOp<string mnemonic, string op_summary> : Aten_Op<mnemonic> {
  let summary = op_summary;
  let description = !strconcat("Elementwise; the result has the operand's type.\n\n",
    "```mlir\n%r = aten.", mnemonic, " %x : tensor<4x1xf32> -> tensor<4x1xf32>\n```");
  let arguments = (ins Aten_FloatTensor:$self);
  let results = (outs Aten_FloatTensor:$result);
  let assemblyFormat = "$self attr-dict `:` type($self) `->` type($result)";
}

def Aten_NegOp : Aten_UnaryOp<"neg", "-self">;
def Aten_ExpOp : Aten_UnaryOp<"exp", "e ** self">;
def Aten_RsqrtOp : Aten_UnaryOp<"rsqrt", "1 / sqrt(self)">;
def Aten_SqrtOp : Aten_UnaryOp<"sqrt", "sqrt(self)">;

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

class Aten_ReductionOp<string mnemonic, string op_summary> : Aten_Op<mnemonic> {
  let summary = op_summary;
  let description = !strconcat([{
    Reduces over `dim` (negative values count from the end; each at most once).
    With `keepdim` the reduced dimensions stay with size 1.

    ```mlir
    %r = aten.}], mnemonic, [{ %x {dim = array<i64: -1>, keepdim = true}
        : tensor<4x512xbf16> -> tensor<4x1xbf16>
    ```
  }]);
  let arguments = (ins Aten_FloatTensor:$self, DenseI64ArrayAttr:$dim,
                       DefaultValuedAttr<BoolAttr, "false">:$keepdim);
  let results = (outs Aten_FloatTensor:$result);
  let assemblyFormat = "$self attr-dict `:` type($self) `->` type($result)";
  let extraClassDeclaration = [{
    // `dim` normalized to [0, rank), sorted.
    ::llvm::SmallVector<int64_t> getReducedDims();
  }];
}

def Aten_MeanDimOp : Aten_ReductionOp<"mean.dim", "arithmetic mean over dims">;
def Aten_SumDimIntListOp : Aten_ReductionOp<"sum.dim_IntList", "sum over dims">;
def Aten_AmaxOp : Aten_ReductionOp<"amax", "maximum over dims">;

//===----------------------------------------------------------------------===//
// Comparisons, selection and more elementwise ops.
//===----------------------------------------------------------------------===//

class Aten_CompareTensorOp<string mnemonic, string op_summary> : Aten_Op<mnemonic> {
  let summary = op_summary;
  let description = !strconcat("Elementwise comparison with broadcasting; the result is a bool tensor.\n\n",
    "```mlir\n%r = aten.", mnemonic, " %a, %b : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xi1>\n```");
  let arguments = (ins Aten_Tensor:$self, Aten_Tensor:$other);
  let results = (outs Aten_BoolTensor:$result);
  let assemblyFormat = [{
    $self `,` $other attr-dict `:` type($self) `,` type($other) `->` type($result)
  }];
}

class Aten_CompareScalarOp<string mnemonic, string op_summary> : Aten_Op<mnemonic> {
  let summary = op_summary;
  let description = !strconcat("Elementwise comparison with a scalar; the result is a bool tensor.\n\n",
    "```mlir\n%r = aten.", mnemonic, " %a, 0.0 : tensor<4x4xf32> -> tensor<4x4xi1>\n```");
  let arguments = (ins Aten_Tensor:$self, F64Attr:$other);
  let results = (outs Aten_BoolTensor:$result);
  let assemblyFormat = "$self `,` $other attr-dict `:` type($self) `->` type($result)";
}

foreach cmp = [["eq", "==", "Eq"], ["ne", "!=", "Ne"], ["lt", "<", "Lt"], ["le", "<=", "Le"],
               ["gt", ">", "Gt"], ["ge", ">=", "Ge"]] in {
  def "Aten_" # cmp[2] # "TensorOp" : Aten_CompareTensorOp<cmp[0] # ".Tensor", "self " # cmp[1] # " other">;
  def "Aten_" # cmp[2] # "ScalarOp" : Aten_CompareScalarOp<cmp[0] # ".Scalar", "self " # cmp[1] # " scalar">;
}

def Aten_WhereSelfOp : Aten_Op<"where.self"> {
  let summary = "condition ? self : other, elementwise";
  let description = [{
    The three operands broadcast together; self and other promote.
    ```mlir
    %r = aten.where.self %c, %a, %b : tensor<4x4xi1>, tensor<4x4xf32>, tensor<f32> -> tensor<4x4xf32>
    ```
  }];
  let arguments = (ins Aten_Tensor:$condition, Aten_Tensor:$self, Aten_Tensor:$other);
  let results = (outs Aten_Tensor:$result);
  let assemblyFormat = [{
    $condition `,` $self `,` $other attr-dict `:` type($condition) `,` type($self) `,` type($other) `->` type($result)
  }];
}

def Aten_MaskedFillScalarOp : Aten_Op<"masked_fill.Scalar"> {
  let summary = "self with `value` where mask is true";
  let description = [{
    The mask broadcasts to self's shape; the result has self's type.
    ```mlir
    %r = aten.masked_fill.Scalar %s, %m, 0xFFF0000000000000 : tensor<8x8xf32>, tensor<8x8xi1> -> tensor<8x8xf32>
    ```
  }];
  let arguments = (ins Aten_Tensor:$self, Aten_Tensor:$mask, F64Attr:$value);
  let results = (outs Aten_Tensor:$result);
  let assemblyFormat = [{
    $self `,` $mask `,` $value attr-dict `:` type($self) `,` type($mask) `->` type($result)
  }];
}

def Aten_SubScalarOp : Aten_ScalarOp<"sub.Scalar", "self - alpha * scalar",
  "%r = aten.sub.Scalar %x, 1.0 : tensor<4x512xf32> -> tensor<4x512xf32>"> {
  let arguments = (ins Aten_FloatTensor:$self, F64Attr:$other,
                       DefaultValuedAttr<F64Attr, "1.0">:$alpha);
}
def Aten_DivScalarOp : Aten_ScalarOp<"div.Scalar", "self / scalar",
  "%r = aten.div.Scalar %x, 8.0 : tensor<4x512xf32> -> tensor<4x512xf32>">;
def Aten_RsubScalarOp : Aten_ScalarOp<"rsub.Scalar", "scalar - alpha * self",
  "%r = aten.rsub.Scalar %x, 1.0 : tensor<4x512xf32> -> tensor<4x512xf32>"> {
  let arguments = (ins Aten_FloatTensor:$self, F64Attr:$other,
                       DefaultValuedAttr<F64Attr, "1.0">:$alpha);
}
def Aten_PowTensorScalarOp : Aten_ScalarOp<"pow.Tensor_Scalar", "self ** exponent",
  "%r = aten.pow.Tensor_Scalar %x, 2.0 : tensor<4x512xf32> -> tensor<4x512xf32>">;

def Aten_LogOp : Aten_UnaryOp<"log", "natural logarithm">;
def Aten_TanhOp : Aten_UnaryOp<"tanh", "hyperbolic tangent">;
def Aten_SigmoidOp : Aten_UnaryOp<"sigmoid", "1 / (1 + e ** -self)">;
def Aten_ReluOp : Aten_UnaryOp<"relu", "max(self, 0)">;
def Aten_SiluOp : Aten_UnaryOp<"silu", "self * sigmoid(self)">;
def Aten_AbsOp : Aten_UnaryOp<"abs", "|self|">;
def Aten_SinOp : Aten_UnaryOp<"sin", "sine (radians)">;
def Aten_CosOp : Aten_UnaryOp<"cos", "cosine (radians)">;
def Aten_AtanOp : Aten_UnaryOp<"atan", "inverse tangent, in (-pi/2, pi/2)">;
def Aten_ErfOp : Aten_UnaryOp<"erf", "the error function">;
def Aten_Expm1Op : Aten_UnaryOp<"expm1", "e ** self - 1">;
def Aten_Log1pOp : Aten_UnaryOp<"log1p", "natural logarithm of 1 + self">;
def Aten_FloorOp : Aten_UnaryOp<"floor", "the largest whole number not above self">;
def Aten_CeilOp : Aten_UnaryOp<"ceil", "the smallest whole number not below self">;
def Aten_TruncOp : Aten_UnaryOp<"trunc", "self rounded toward zero">;
def Aten_RoundOp : Aten_UnaryOp<"round", "self rounded to the nearest whole number, ties to even">;
def Aten_GeluOp : Aten_Op<"gelu"> {
  let summary = "Gaussian error linear unit";
  let description = [{
    `approximate` is "none" (the erf form) or "tanh".
    ```mlir
    %r = aten.gelu %x {approximate = "tanh"} : tensor<4x512xf32> -> tensor<4x512xf32>
    ```
  }];
  let arguments = (ins Aten_FloatTensor:$self, DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs Aten_FloatTensor:$result);
  let assemblyFormat = "$self attr-dict `:` type($self) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Composite ops.
//===----------------------------------------------------------------------===//

def Aten_RmsNormOp : Aten_Op<"rms_norm"> {
  let summary = "root-mean-square normalization over the trailing dims";
  let description = [{
    `input * rsqrt(mean(input^2, trailing normalized_shape dims) + eps) * weight`.
    When `eps` is absent PyTorch uses the dtype's machine epsilon.

    ```mlir
    %r = aten.rms_norm %x, %w {normalized_shape = array<i64: 512>, eps = 1.0e-06}
        : tensor<4x512xbf16>, tensor<512xbf16> -> tensor<4x512xbf16>
    ```
  }];
  let arguments = (ins Aten_FloatTensor:$input, Optional<Aten_FloatTensor>:$weight,
                       DenseI64ArrayAttr:$normalized_shape, OptionalAttr<F64Attr>:$eps);
  let results = (outs Aten_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`,` $weight^)? attr-dict `:` type($input) (`,` type($weight)^)? `->` type($result)
  }];
}

class Aten_SoftmaxLikeOp<string mnemonic, string op_summary> : Aten_Op<mnemonic> {
  let summary = op_summary;
  let description = !strconcat(op_summary, " over `dim`; `half_to_float` must be false.\n\n",
    "```mlir\n%r = aten.", mnemonic, " %x {dim = -1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>\n```");
  let arguments = (ins Aten_FloatTensor:$self, I64Attr:$dim,
                       DefaultValuedAttr<BoolAttr, "false">:$half_to_float);
  let results = (outs Aten_FloatTensor:$result);
  let assemblyFormat = "$self attr-dict `:` type($self) `->` type($result)";
}

def Aten_SoftmaxOp : Aten_SoftmaxLikeOp<"_softmax", "exp(x - max) / sum(exp(x - max))">;
def Aten_LogSoftmaxOp : Aten_SoftmaxLikeOp<"_log_softmax", "x - max - log(sum(exp(x - max)))">;

def Aten_NativeLayerNormOp : Aten_Op<"native_layer_norm", [AttrSizedOperandSegments]> {
  let summary = "layer normalization over the trailing dims, with its mean and rstd";
  let description = [{
    `out = (input - mean) * rsqrt(var + eps) * weight + bias` over the trailing
    `normalized_shape` dims (biased variance). `mean` and `rstd` keep the
    normalized dims with size 1.
    ```mlir
    %o, %m, %r = aten.native_layer_norm %x, %w, %b {normalized_shape = array<i64: 64>, eps = 1.0e-05}
        : tensor<8x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<8x64xf32>, tensor<8x1xf32>, tensor<8x1xf32>
    ```
  }];
  let arguments = (ins Aten_FloatTensor:$input, Optional<Aten_FloatTensor>:$weight,
                       Optional<Aten_FloatTensor>:$bias, DenseI64ArrayAttr:$normalized_shape, F64Attr:$eps);
  let results = (outs Aten_FloatTensor:$out, Aten_FloatTensor:$mean, Aten_FloatTensor:$rstd);
  let assemblyFormat = [{
    $input (`weight` $weight^ `:` type($weight))? (`bias` $bias^ `:` type($bias))? attr-dict `:`
    type($input) `->` type($out) `,` type($mean) `,` type($rstd)
  }];
}

def Aten_VarMeanCorrectionOp : Aten_Op<"var_mean.correction"> {
  let summary = "variance (with a correction) and mean over dims";
  let description = [{
    `var = sum((x - mean)^2) / (N - correction)` over `dim`.
    ```mlir
    %v, %m = aten.var_mean.correction %x {dim = array<i64: -1>, correction = 0 : i64, keepdim = true}
        : tensor<8x64xf32> -> tensor<8x1xf32>, tensor<8x1xf32>
    ```
  }];
  let arguments = (ins Aten_FloatTensor:$self, DenseI64ArrayAttr:$dim,
                       DefaultValuedAttr<I64Attr, "1">:$correction,
                       DefaultValuedAttr<BoolAttr, "false">:$keepdim);
  let results = (outs Aten_FloatTensor:$var, Aten_FloatTensor:$mean);
  let assemblyFormat = "$self attr-dict `:` type($self) `->` type($var) `,` type($mean)";
  let extraClassDeclaration = [{
    ::llvm::SmallVector<int64_t> getReducedDims();
  }];
}

//===----------------------------------------------------------------------===//
// Views and data movement. Every view is an affine re-indexing of its input
// (new shape, strides and offset over the same elements); the compiler folds
// chains of views into DMA access patterns.
//===----------------------------------------------------------------------===//

class Aten_ViewOp<string mnemonic, string op_summary, dag attrs, string example>
    : Aten_Op<mnemonic> {
  let summary = op_summary;
  let description = !strconcat(op_summary, "\n\n```mlir\n", example, "\n```");
  let arguments = !con((ins Aten_Tensor:$self), attrs);
  let results = (outs Aten_Tensor:$result);
  let assemblyFormat = "$self attr-dict `:` type($self) `->` type($result)";
}

def Aten_TransposeIntOp : Aten_ViewOp<"transpose.int", "swaps two dims", (ins I64Attr:$dim0, I64Attr:$dim1),
  "%r = aten.transpose.int %x {dim0 = 0 : i64, dim1 = 1 : i64} : tensor<4x8xf32> -> tensor<8x4xf32>">;
def Aten_TOp : Aten_ViewOp<"t", "transposes a matrix (a 0-d or 1-d tensor is unchanged)", (ins),
  "%r = aten.t %w : tensor<64x32xf32> -> tensor<32x64xf32>">;
def Aten_PermuteOp : Aten_ViewOp<"permute", "reorders the dims", (ins DenseI64ArrayAttr:$dims),
  "%r = aten.permute %x {dims = array<i64: 0, 2, 1>} : tensor<2x4x8xf32> -> tensor<2x8x4xf32>">;
def Aten_UnsqueezeOp : Aten_ViewOp<"unsqueeze", "inserts a dim of size 1", (ins I64Attr:$dim),
  "%r = aten.unsqueeze %x {dim = 1 : i64} : tensor<4x8xf32> -> tensor<4x1x8xf32>">;
def Aten_SqueezeDimOp : Aten_ViewOp<"squeeze.dim", "removes a dim of size 1 (other sizes are kept)",
  (ins I64Attr:$dim), "%r = aten.squeeze.dim %x {dim = 1 : i64} : tensor<4x1x8xf32> -> tensor<4x8xf32>">;
def Aten_ExpandOp : Aten_ViewOp<"expand", "broadcasts size-1 dims (-1 keeps a size)",
  (ins DenseI64ArrayAttr:$size),
  "%r = aten.expand %x {size = array<i64: 4, -1>} : tensor<1x8xf32> -> tensor<4x8xf32>">;
def Aten_SliceTensorOp : Aten_ViewOp<"slice.Tensor", "elements start, start + step, ... below end of a dim",
  (ins I64Attr:$dim, I64Attr:$start, I64Attr:$end, I64Attr:$step),
  "%r = aten.slice.Tensor %x {dim = 1 : i64, start = 0 : i64, end = 4 : i64, step = 1 : i64} : tensor<4x8xf32> -> tensor<4x4xf32>">;
def Aten_SelectIntOp : Aten_ViewOp<"select.int", "one index of a dim, which is removed",
  (ins I64Attr:$dim, I64Attr:$index),
  "%r = aten.select.int %x {dim = 0 : i64, index = 2 : i64} : tensor<4x8xf32> -> tensor<8xf32>">;
def Aten_ViewShapeOp : Aten_ViewOp<"view", "the same elements in another shape (-1 is inferred)",
  (ins DenseI64ArrayAttr:$size), "%r = aten.view %x {size = array<i64: 2, -1>} : tensor<4x8xf32> -> tensor<2x16xf32>">;
def Aten_UnsafeViewOp : Aten_ViewOp<"_unsafe_view", "the same elements in another shape",
  (ins DenseI64ArrayAttr:$size), "%r = aten._unsafe_view %x {size = array<i64: 32>} : tensor<4x8xf32> -> tensor<32xf32>">;
def Aten_ReshapeOp : Aten_ViewOp<"reshape", "the same elements in another shape (-1 is inferred)",
  (ins DenseI64ArrayAttr:$size), "%r = aten.reshape %x {size = array<i64: 8, 4>} : tensor<4x8xf32> -> tensor<8x4xf32>">;
def Aten_ReshapeAliasOp : Aten_ViewOp<"_reshape_alias", "the same elements in another shape (contiguous strides)",
  (ins DenseI64ArrayAttr:$size, DenseI64ArrayAttr:$stride),
  "%r = aten._reshape_alias %x {size = array<i64: 32>, stride = array<i64: 1>} : tensor<4x8xf32> -> tensor<32xf32>">;
def Aten_CloneOp : Aten_ViewOp<"clone", "a copy", (ins),
  "%r = aten.clone %x : tensor<4x8xf32> -> tensor<4x8xf32>">;

def Aten_ToCopyOp : Op<Aten_Dialect, "_to_copy", [Pure]> {
  let summary = "a copy converted to another dtype";
  let description = [{
    Rounds to nearest even when narrowing; bools become 0 or 1. Reads a
    narrow integer graph input into i32, or converts an i32 value (already
    in the narrow type's range) to a narrow graph output.
    ```mlir
    %r = aten._to_copy %x : tensor<4x8xf32> -> tensor<4x8xbf16>
    ```
  }];
  let arguments = (ins Aten_BoundaryTensor:$self);
  let results = (outs Aten_BoundaryTensor:$result);
  let assemblyFormat = "$self attr-dict `:` type($self) `->` type($result)";
  let hasVerifier = 1;
}

def Aten_CatOp : Aten_Op<"cat"> {
  let summary = "concatenation along a dim";
  let description = [{
    ```mlir
    %r = aten.cat %a, %b {dim = 1 : i64} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x16xf32>
    ```
  }];
  let arguments = (ins Variadic<Aten_Tensor>:$tensors, I64Attr:$dim);
  let results = (outs Aten_Tensor:$result);
  let assemblyFormat = "$tensors attr-dict `:` type($tensors) `->` type($result)";
}

def Aten_EmbeddingOp : Aten_Op<"embedding"> {
  let summary = "rows of `weight` picked by integer `indices`";
  let description = [{
    The result has shape `indices.shape + [D]` for a `[V, D]` weight. An index
    outside [0, V) fails the execution.
    ```mlir
    %r = aten.embedding %w, %ids : tensor<1000x64xf32>, tensor<2x16xi64> -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Aten_FloatTensor:$weight, Aten_Tensor:$indices,
                       DefaultValuedAttr<I64Attr, "-1">:$padding_idx);
  let results = (outs Aten_FloatTensor:$result);
  let assemblyFormat = "$weight `,` $indices attr-dict `:` type($weight) `,` type($indices) `->` type($result)";
}

//===----------------------------------------------------------------------===//
// Matrix products (TensorEngine).
//===----------------------------------------------------------------------===//

def Aten_MmOp : Aten_Op<"mm"> {
  let summary = "matrix product [M, K] x [K, N]";
  let description = [{
    ```mlir
    %r = aten.mm %a, %b : tensor<16x64xbf16>, tensor<64x32xbf16> -> tensor<16x32xbf16>
    ```
  }];
  let arguments = (ins Aten_FloatTensor:$self, Aten_FloatTensor:$mat2);
  let results = (outs Aten_FloatTensor:$result);
  let assemblyFormat = "$self `,` $mat2 attr-dict `:` type($self) `,` type($mat2) `->` type($result)";
}

def Aten_BmmOp : Aten_Op<"bmm"> {
  let summary = "batched matrix product [B, M, K] x [B, K, N]";
  let description = [{
    The result has the operands' dtype, or f32 for bf16 or f16 operands: the
    products summed in f32 and not rounded (a composite such as `baddbmm`
    scales and adds them before rounding once; its operands need no cast).
    ```mlir
    %r = aten.bmm %a, %b : tensor<4x16x8xf32>, tensor<4x8x16xf32> -> tensor<4x16x16xf32>
    ```
  }];
  let arguments = (ins Aten_FloatTensor:$self, Aten_FloatTensor:$mat2);
  let results = (outs Aten_FloatTensor:$result);
  let assemblyFormat = "$self `,` $mat2 attr-dict `:` type($self) `,` type($mat2) `->` type($result)";
  let extraClassDeclaration = [{
    static bool isCompatibleReturnTypes(::mlir::TypeRange inferred, ::mlir::TypeRange actual);
  }];
}

def Aten_AddmmOp : Aten_Op<"addmm"> {
  let summary = "beta * self + alpha * (mat1 x mat2)";
  let description = [{
    `self` (the bias) broadcasts to [M, N].
    ```mlir
    %r = aten.addmm %bias, %x, %w : tensor<32xf32>, tensor<16x64xf32>, tensor<64x32xf32> -> tensor<16x32xf32>
    ```
  }];
  let arguments = (ins Aten_FloatTensor:$self, Aten_FloatTensor:$mat1, Aten_FloatTensor:$mat2,
                       DefaultValuedAttr<F64Attr, "1.0">:$beta, DefaultValuedAttr<F64Attr, "1.0">:$alpha);
  let results = (outs Aten_FloatTensor:$result);
  let assemblyFormat = [{
    $self `,` $mat1 `,` $mat2 attr-dict `:` type($self) `,` type($mat1) `,` type($mat2) `->` type($result)
  }];
}

#endif // NEURON_ATEN_OPS
