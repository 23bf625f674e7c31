#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/nc/NcDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/nc/NcOps.h.inc"

namespace neuroncc::nc {

// Memory space of SBUF tiles (rank-2 memrefs, partitions x elements).
inline constexpr unsigned kSbufMemorySpace = 1;
// Memory space of PSUM tiles (the TensorEngine's f32 accumulators).
inline constexpr unsigned kPsumMemorySpace = 2;
inline constexpr int64_t kPsumBankBytes = 2048;
inline constexpr int64_t kNumPartitions = 128;
// Few long rows spread over the partitions: the largest m dividing `cols`
// with rows * m <= kNumPartitions and at least kMinSpreadRun elements on
// each partition (1 when there is none), so that each row becomes m
// partitions of cols / m elements. Shared by form-kernels (which sizes whole
// rows by it) and the lowering (which splits by it). The floor keeps each
// partition's part of a row one DMA descriptor's worth: a run costs the
// device model's 20 ns however short, and 512 bytes take that long at one
// queue's bandwidth (RMSNorm of one 4096-wide bf16 row on 128 partitions,
// 64 bytes each: its load took 4.6 us, 2.3 us on one partition).
inline constexpr int64_t kMinSpreadRun = 256;
// Reducing kernels spread from this row length (elementwise ones from a
// chunk, maxFree, on): below it the partials' combination costs more than
// the shorter rows save (passes/LowerToIsa.cpp, splitLongRows).
inline constexpr int64_t kMinSpreadReduction = 2048;
inline int64_t spreadFactor(int64_t rows, int64_t cols) {
  int64_t best = 1;
  for (int64_t m = 2; rows > 0 && m * rows <= kNumPartitions && m * kMinSpreadRun <= cols; ++m)
    if (cols % m == 0) best = m;
  return best;
}
// Unit attribute of an nc.kernel that holds one attention (softmax(f(Q @ K))
// @ V, passes/AttentionPattern.h), lowered as a flash attention.
inline constexpr const char kAttentionAttr[] = "nc.attention";
// Unit attribute of an nc.kernel whose rows are too long to stay whole in
// SBUF but whose ops need reduced values at every element (x * rstd after
// the sum of squares): the lowering keeps the row tile's inputs resident in
// SBUF and makes one pass over them, chunk by chunk, per level of
// reductions (passes/FormKernels.cpp, residentRowsFit; passes/LowerResident.cpp).
inline constexpr const char kResidentRowsAttr[] = "nc.resident_rows";
// Unit attribute of an nc.kernel of elementwise ops around reductions over
// one run of middle dims ([A, R, C] reduced over R), computed in the input's
// own layout, R blocks of C columns a partition (passes/FormKernels.cpp,
// keepsNaturalFrame; passes/LowerMiddleFrame.cpp).
inline constexpr const char kMiddleFrameAttr[] = "nc.middle_frame";
// On a cat that stacks windows of one tensor into a bmm's right operand
// (passes/WindowOperand.h): the bmm loads the windows; nothing lowers the cat.
inline constexpr const char kWindowOperandAttr[] = "nc.window_operand";

bool isSbufTile(mlir::Type type);

// The byte offset inside each partition of a tile: the offset
// ncc-plan-memory gave its allocation (SBUF or PSUM; 0 before planning) plus,
// for a tile_columns range, the columns it skips.
int64_t tileByteOffset(mlir::Value tile);
// The element step of a tile's columns (a stepped tile_columns view), 1 if
// contiguous; and the bytes of a partition it spans, first to last element.
int64_t tileStep(mlir::Value tile);
int64_t tileSpanBytes(mlir::Value tile);
// The pairs of a DMA's `ap` that walk partitions (its partition_dims, 1 or
// 2) and the partitions they walk (the product of their counts).
int64_t partitionDims(mlir::Operation* dma);
int64_t dmaPartitions(llvm::ArrayRef<int64_t> ap, int64_t partitionDims);
int64_t dmaPartitions(mlir::Operation* dma);
// The alloc_tile or alloc_psum result a tile (or a column view of one) lives in.
mlir::Value tileBuffer(mlir::Value tile);
bool isPsumTile(mlir::Type type);

// The bias of an activation that adds nothing: -0.0, the additive identity
// (x + -0.0 == x for every x, -0.0 included, where +0.0 would turn -0.0
// into +0.0: a cast of -0.0 would lose its sign).
constexpr double kNoBias = -0.0;

// The element type a tensor value has on the device: floats as they are;
// bools and integers (masks, indices) as f32, exact below 2^24.
mlir::Type deviceElementType(mlir::Type elem);
// The element type a graph input or output has in HBM: int32 and int64 as
// they are, bools as one byte (i8), the rest as deviceElementType. DMAs
// convert the integers from and into f32 tiles.
mlir::Type boundaryElementType(mlir::Type elem);
// PyTorch's uint8, int8 and int16 as graph inputs and outputs: ui8, si8 and
// si16 (signless i8 is a bool in HBM). Inside the graph they are i32.
bool isNarrowInteger(mlir::Type elem);

// ALU operations and activation functions the ISA ops accept.
llvm::ArrayRef<llvm::StringRef> elementwiseAluNames();
llvm::ArrayRef<llvm::StringRef> activationNames();

}  // namespace neuroncc::nc
