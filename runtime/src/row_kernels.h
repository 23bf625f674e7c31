// The executor's elementwise instructions over one row of a tile, reading
// and writing the row in its storage dtypes. Where every operand is float32
// or bfloat16, in any mix, each group of 16 elements is widened, computed
// and narrowed in registers: no pass copies the row into float32 scratch and
// back; the activation functions that call SLEEF run in passes over blocks
// held in L1, the calls apart from the conversions. float16 operands and
// `pow` go through float32 blocks and the functions of vector_math.h
// (directly on the rows where they are float32). Both paths give the same
// bits: the same IEEE operations in the same order, and the same rounding to
// the storage dtype (tests/unit/row_kernels_test.cc); only which of two NaN
// operands comes out is not specified.
#pragma once

#include <cstdint>

#include "neff_format.h"
#include "vector_math.h"

namespace neuroncc::rt::vm {

// n elements of a row in their storage dtype, starting at any byte.
struct ConstRun {
  neff::DType dt;
  const uint8_t* p;
};
struct MutRun {
  neff::DType dt;
  uint8_t* p;
};

// The output may be an input when both map every element to the same bytes
// (each group of elements is read before it is written).

// c = alu(a, b).
void AluRow(neff::AluOp op, ConstRun a, ConstRun b, MutRun c, uint32_t n);
// c = alu(a, s), or alu(s, a) when `reverse`.
void AluScalarRow(neff::AluOp op, ConstRun a, float s, bool reverse, MutRun c, uint32_t n);
// c = func(a * scale + bias); when `accum` is given, the float32 results
// (before rounding to c's dtype) are also added to it, in its lane order.
void ActivationRow(neff::ActivationFunc f, ConstRun a, float scale, float bias, MutRun c, uint32_t n,
                   LaneSum* accum);
// c = pred != 0 ? a : b.
void SelectRow(ConstRun a, ConstRun b, ConstRun pred, MutRun c, uint32_t n);
// Feeds a row to a sum or an extreme (all of it at once).
void SumRow(ConstRun a, uint32_t n, LaneSum* sum);
void ExtremeRow(ConstRun a, uint32_t n, Extreme* extreme);

}  // namespace neuroncc::rt::vm
