//===- NcOps.td - the NeuronCore dialect ------------------------*- tablegen -*-===//
//
// Two levels live here. `nc.kernel` groups graph-level work into one device
// dispatch. Inside a lowered kernel, the ISA ops describe what one NeuronCore
// executes: DMA between HBM and SBUF, and engine instructions on SBUF tiles.
//
// Memory is modeled with builtin memrefs: a kernel's HBM tensors are memrefs in
// the default memory space, SBUF tiles are rank-2 memrefs in memory space 1
// whose first dimension is the partition dimension.
//
//===----------------------------------------------------------------------===//

#ifndef NEURON_NC_OPS
#define NEURON_NC_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Nc_Dialect : Dialect {
  let name = "nc";
  let summary = "NeuronCore kernels and instruction set";
  let cppNamespace = "::neuroncc::nc";
}

class Nc_Op<string mnemonic, list<Trait> traits = []> : Op<Nc_Dialect, mnemonic, traits>;

def Nc_KernelOp : Nc_Op<"kernel", [IsolatedFromAbove, SingleBlock,
    SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "one device dispatch";
  let description = [{
    A group of graph ops that runs as one dispatch. `source_ops` records the
    ATen ops it came from, in order, for the profiler's per-op attribution.
    `result_sources`, when present, names the ATen op that computed each
    result (one entry per result), for reports such as
    `neuron-cc --memory-report`: the op (`aten.mul.Tensor`), then
    ` of <composite>` when a decomposition produced it, then ` [<node>]` when
    the op's location names a graph node.

    Before lowering, the body takes the inputs as tensors and yields the
    results. After `ncc-lower-to-isa`, its block arguments are HBM memrefs for
    the inputs followed by the outputs, and it yields nothing.

    ```mlir
    %r = nc.kernel "k0_mul" (%x) : (tensor<4x512xbf16>) -> tensor<4x512xbf16>
        attributes {source_ops = ["aten.mul.Tensor"]} {
    ^bb0(%a: tensor<4x512xbf16>):
      %m = aten.mul.Tensor %a, %a : tensor<4x512xbf16>, tensor<4x512xbf16> -> tensor<4x512xbf16>
      nc.yield %m : tensor<4x512xbf16>
    }
    ```
  }];
  let arguments = (ins StrAttr:$sym_name, Variadic<AnyRankedTensor>:$inputs,
                       StrArrayAttr:$source_ops,
                       OptionalAttr<StrArrayAttr>:$result_sources);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name `(` $inputs `)` attr-dict `:` functional-type($inputs, results) $body
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // True once the body holds ISA ops on memrefs.
    bool isLowered();
  }];
}

def Nc_YieldOp : Nc_Op<"yield", [Pure, Terminator, HasParent<"KernelOp">]> {
  let summary = "kernel terminator";
  let description = [{
    Returns the kernel's tensor results (none once lowered).
    ```mlir
    nc.yield %m : tensor<4x512xbf16>
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
  let builders = [OpBuilder<(ins), [{ build($_builder, $_state, ::mlir::ValueRange()); }]>];
}

def Nc_Tile : MemRefRankOf<[F32, BF16, F16], [2]>;
// A PSUM tile: rank-2 f32 memref in memory space 2.
def Nc_PsumTile : MemRefRankOf<[F32], [2]>;
def Nc_Hbm : MemRefOf<[F32, BF16, F16]>;
// What a dma_load reads or a dma_store writes: float data, or integers (i8:
// bools; ui8, si8, si16: PyTorch's uint8, int8, int16) converted from or into
// f32 tiles (graph inputs and outputs).
def Nc_HbmData : MemRefOf<[F32, BF16, F16, I32, I64, I8, UI8, SI8, SI16]>;

def Nc_AllocTileOp : Nc_Op<"alloc_tile"> {
  let summary = "an SBUF tile buffer";
  let description = [{
    A `[partitions x elements]` buffer in SBUF (memory space 1). `offset`, the
    byte address inside every partition, is set by `ncc-plan-memory`.
    ```mlir
    %t = nc.alloc_tile {offset = 0 : i64} : memref<128x512xf32, 1>
    ```
  }];
  let arguments = (ins OptionalAttr<I64Attr>:$offset);
  let results = (outs Nc_Tile:$tile);
  let assemblyFormat = "attr-dict `:` type($tile)";
  let hasVerifier = 1;
}

// Attributes common to instructions; set by the scheduler and lowering:
//   engine: "vector" | "scalar" | "gpsimd" | "dma"; queue: DMA queue;
//   waits: flattened (queue, count) semaphore waits; source_op: index into the
//   enclosing kernel's source_ops, -1 when shared.
class Nc_InstOp<string mnemonic, string op_summary, string example> : Nc_Op<mnemonic> {
  let summary = op_summary;
  let description = !strconcat(op_summary, "\n```mlir\n", example, "\n```");
  let hasVerifier = 1;
}

// `ap`: (stride, count) pairs, first those that walk the partitions (one,
// or two with partition_dims = 2: partition p at (p / c1) * s0 + (p % c1) *
// s1), then the free dims, outermost first (neff.proto AccessPattern).
def Nc_DmaLoadOp : Nc_InstOp<"dma_load", "copy an HBM access pattern into tile partitions",
    "nc.dma_load %hbm -> %t {part_start = 0 : i64, offset = 0 : i64, ap = array<i64: 512, 4, 1, 512>} : memref<4x512xbf16>, memref<4x512xbf16, 1>"> {
  let arguments = (ins Nc_HbmData:$hbm, Nc_Tile:$tile, I64Attr:$part_start, I64Attr:$offset,
                       DenseI64ArrayAttr:$ap, OptionalAttr<I64Attr>:$partition_dims);
  let assemblyFormat = "$hbm `->` $tile attr-dict `:` type($hbm) `,` type($tile)";
  let builders = [OpBuilder<(ins "::mlir::Value":$hbm, "::mlir::Value":$tile, "::mlir::IntegerAttr":$part_start, "::mlir::IntegerAttr":$offset,
                                 "::mlir::DenseI64ArrayAttr":$ap),
    [{ build($_builder, $_state, hbm, tile, part_start, offset, ap, ::mlir::IntegerAttr()); }]>];
}

def Nc_DmaStoreOp : Nc_InstOp<"dma_store", "copy tile partitions to an HBM access pattern",
    "nc.dma_store %t -> %hbm {part_start = 0 : i64, offset = 0 : i64, ap = array<i64: 512, 4, 1, 512>} : memref<4x512xbf16, 1>, memref<4x512xbf16>"> {
  let arguments = (ins Nc_Tile:$tile, Nc_HbmData:$hbm, I64Attr:$part_start, I64Attr:$offset,
                       DenseI64ArrayAttr:$ap, OptionalAttr<I64Attr>:$partition_dims);
  let assemblyFormat = "$tile `->` $hbm attr-dict `:` type($tile) `,` type($hbm)";
  let builders = [OpBuilder<(ins "::mlir::Value":$tile, "::mlir::Value":$hbm, "::mlir::IntegerAttr":$part_start, "::mlir::IntegerAttr":$offset,
                                 "::mlir::DenseI64ArrayAttr":$ap),
    [{ build($_builder, $_state, tile, hbm, part_start, offset, ap, ::mlir::IntegerAttr()); }]>];
}

def Nc_DmaGatherOp : Nc_InstOp<"dma_gather",
    "copy table rows picked by an HBM index tensor into tile partitions",
    "nc.dma_gather %table[%ids] -> %t {part_start = 0 : i64, offset = 0 : i64, ap = array<i64: 64, 32, 1, 64>, index_offset = 0 : i64, index_bound = 1000 : i64} : memref<1000x64xf32>, memref<2x16xi64>, memref<32x64xf32, 1>"> {
  let arguments = (ins Nc_Hbm:$table, AnyMemRef:$index, Nc_Tile:$tile, I64Attr:$part_start, I64Attr:$offset,
                       DenseI64ArrayAttr:$ap, I64Attr:$index_offset, I64Attr:$index_bound);
  let assemblyFormat = [{
    $table `[` $index `]` `->` $tile attr-dict `:` type($table) `,` type($index) `,` type($tile)
  }];
}

def Nc_TensorTensorOp : Nc_InstOp<"tensor_tensor", "out = alu(in0, in1), elementwise",
    "nc.tensor_tensor %o, %a, %b {alu = \"mul\"} : memref<4x512xf32, 1>, memref<4x512xbf16, 1>, memref<4x512xbf16, 1>"> {
  let arguments = (ins Nc_Tile:$out, Nc_Tile:$in0, Nc_Tile:$in1, StrAttr:$alu);
  let assemblyFormat = "$out `,` $in0 `,` $in1 attr-dict `:` type($out) `,` type($in0) `,` type($in1)";
}

def Nc_TensorScalarOp : Nc_InstOp<"tensor_scalar",
    "out = alu(in0, s) with s = scalar[p, 0] or the immediate `imm`; `reverse` swaps the operands",
    "nc.tensor_scalar %o, %a {alu = \"add\", imm = 1.0e-06 : f64} : memref<4x1xf32, 1>, memref<4x1xf32, 1>"> {
  let arguments = (ins Nc_Tile:$out, Nc_Tile:$in0, Optional<Nc_Tile>:$scalar, StrAttr:$alu,
                       DefaultValuedAttr<F64Attr, "0.0">:$imm,
                       DefaultValuedAttr<BoolAttr, "false">:$reverse);
  let assemblyFormat = "$out `,` $in0 (`,` $scalar^)? attr-dict `:` type($out) `,` type($in0) (`,` type($scalar)^)?";
}

def Nc_ActivationOp : Nc_Op<"activation", [AttrSizedOperandSegments]> {
  let summary = "out = func(in0 * scale + bias) on the scalar engine";
  let description = [{
    `scale` is the per-partition value `scale_tile[p, 0]` when that operand is
    given, else the `scale` attribute; `bias` likewise is `bias_tile[p, 0]`
    or the `bias` attribute (by default -0.0, which adds nothing: -0.0 stays
    -0.0). With `accum`, the engine also writes the sum
    over the free dim of the results to `accum[p, 0]`.
    ```mlir
    nc.activation %o, %a accum %s : memref<4x1xf32, 1> {func = "square"} : memref<4x512xf32, 1>, memref<4x512xbf16, 1>
    ```
  }];
  let arguments = (ins Nc_Tile:$out, Nc_Tile:$in0, Optional<Nc_Tile>:$scale_tile,
                       Optional<Nc_Tile>:$bias_tile, Optional<Nc_Tile>:$accum, StrAttr:$func,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale,
                       DefaultValuedAttr<F64Attr, "-0.0">:$bias);
  let assemblyFormat = [{
    $out `,` $in0 (`scale` $scale_tile^ `:` type($scale_tile))? (`bias` $bias_tile^ `:` type($bias_tile))?
    (`accum` $accum^ `:` type($accum))?
    attr-dict `:` type($out) `,` type($in0)
  }];
  let builders = [
    // func(in0 + bias_tile[p, 0]) without a scale, nor a bias where no tile
    // is given; its row sums into accum when given.
    OpBuilder<(ins "::mlir::Value":$out, "::mlir::Value":$in0, "::llvm::StringRef":$func,
                   CArg<"::mlir::Value", "{}">:$bias_tile, CArg<"::mlir::Value", "{}">:$accum), [{
      build($_builder, $_state, out, in0, ::mlir::Value(), bias_tile, accum, $_builder.getStringAttr(func),
            $_builder.getF64FloatAttr(1.0), $_builder.getF64FloatAttr(kNoBias));
    }]>
  ];
  let hasVerifier = 1;
}

def Nc_TensorReduceOp : Nc_InstOp<"tensor_reduce", "out[p, 0] = reduce(alu) over the free dim of in0",
    "nc.tensor_reduce %o, %a {alu = \"add\"} : memref<4x1xf32, 1>, memref<4x512xf32, 1>"> {
  let arguments = (ins Nc_Tile:$out, Nc_Tile:$in0, StrAttr:$alu);
  let assemblyFormat = "$out `,` $in0 attr-dict `:` type($out) `,` type($in0)";
}

def Nc_TensorSelectOp : Nc_InstOp<"tensor_select", "out = pred != 0 ? on_true : on_false, elementwise",
    "nc.tensor_select %o, %a, %b, %m : memref<8x8xf32, 1>, memref<8x8xf32, 1>, memref<8x8xf32, 1>, memref<8x8xf32, 1>"> {
  let arguments = (ins Nc_Tile:$out, Nc_Tile:$on_true, Nc_Tile:$on_false, Nc_Tile:$pred);
  let assemblyFormat = [{
    $out `,` $on_true `,` $on_false `,` $pred attr-dict `:` type($out) `,` type($on_true) `,` type($on_false) `,` type($pred)
  }];
}

def Nc_IotaOp : Nc_InstOp<"iota", "out[p, f] = base + p * partition_step + f * element_step",
    "nc.iota %o {base = 0.0 : f64, partition_step = 1.0 : f64, element_step = 0.0 : f64} : memref<8x8xf32, 1>"> {
  let arguments = (ins Nc_Tile:$out, DefaultValuedAttr<F64Attr, "0.0">:$base,
                       DefaultValuedAttr<F64Attr, "0.0">:$partition_step,
                       DefaultValuedAttr<F64Attr, "0.0">:$element_step);
  let assemblyFormat = "$out attr-dict `:` type($out)";
}

def Nc_MatmulOp : Nc_InstOp<"matmul",
    "TensorEngine: out[m, n] (+)= sum_k stationary[k, m] * moving[k, n], into PSUM",
    "nc.matmul %acc, %a, %b {accumulate = false} : memref<128x512xf32, 2>, memref<128x128xbf16, 1>, memref<128x512xbf16, 1>"> {
  let arguments = (ins Nc_PsumTile:$out, Nc_Tile:$stationary, Nc_Tile:$moving,
                       DefaultValuedAttr<BoolAttr, "false">:$accumulate);
  let assemblyFormat = [{
    $out `,` $stationary `,` $moving attr-dict `:` type($out) `,` type($stationary) `,` type($moving)
  }];
}

def Nc_TransposeOp : Nc_InstOp<"transpose", "TensorEngine: out[f, p] = in0[p, f], into PSUM",
    "nc.transpose %o, %a : memref<64x128xf32, 2>, memref<128x64xbf16, 1>"> {
  let arguments = (ins Nc_PsumTile:$out, Nc_Tile:$in0);
  let assemblyFormat = "$out `,` $in0 attr-dict `:` type($out) `,` type($in0)";
}

def Nc_AllocPsumOp : Nc_Op<"alloc_psum"> {
  let summary = "a PSUM tile buffer";
  let description = [{
    A `[partitions x elements]` f32 buffer in PSUM (memory space 2), the
    TensorEngine's accumulator memory. `offset` is set by `ncc-plan-memory`.
    ```mlir
    %t = nc.alloc_psum : memref<128x512xf32, 2>
    ```
  }];
  let arguments = (ins OptionalAttr<I64Attr>:$offset);
  let results = (outs Nc_PsumTile:$tile);
  let assemblyFormat = "attr-dict `:` type($tile)";
  let hasVerifier = 1;
}

def Nc_TileColumnsOp : Nc_Op<"tile_columns", [Pure]> {
  let summary = "a column range of a tile, itself a tile (no instruction)";
  let description = [{
    Columns `[column, column + n)` of every partition of `source` (an
    `alloc_tile` or `alloc_psum`, or a column range of one), where `n` is the
    result's column count. Instructions that take the result read or write
    those bytes of the source's buffer: several TensorEngine transposes can
    fill one PSUM bank side by side, and one DMA can load a panel whose
    column ranges feed several instructions.
    ```mlir
    %v = nc.tile_columns %t [128] : memref<128x512xf32, 2> -> memref<128x128xf32, 2>
    ```
    With `step` s > 1 the view is the columns `column + i * s` (i < n): a
    data input or the output of elementwise instructions only (neff.proto
    `TileRef.step`), never the source of another view. A strided slice of a
    row is loaded as its contiguous span and compacted by one such read,
    instead of one DMA run per element; short rows are interleaved by
    writing each piece along a step.
  }];
  let arguments = (ins AnyMemRef:$source, I64Attr:$column, OptionalAttr<I64Attr>:$step);
  let results = (outs AnyMemRef:$view);
  let assemblyFormat = "$source `[` $column `]` attr-dict `:` type($source) `->` type($view)";
  let hasVerifier = 1;
}

#endif // NEURON_NC_OPS
