// The executor's arithmetic on runs of float32 values: dtype conversion,
// the ALU and activation functions, reductions and the TensorEngine's
// multiply. Every function here gives the same bits on every x86-64 host and
// at every SIMD width: elementwise IEEE operations are exact whatever the
// vector length, the transcendental functions are SLEEF's deterministic
// ("finz": exact fused multiply-add, no flush to zero) variants, and
// reductions follow the fixed order documented in docs/runtime.md. Hot loops
// are compiled three times (AVX-512, AVX2 and the x86-64 baseline) and
// picked when the library loads.
#pragma once

#include <cstdint>

#include "neff_format.h"

namespace neuroncc::rt::vm {

// Elements an instruction handles per step of a row: three blocks of
// float32 scratch fit in L1 with room for the row data.
constexpr uint32_t kBlock = 1024;

// float32 <-> storage dtype (f32, bf16, f16), round to nearest even.
void Widen(neff::DType dt, const uint8_t* src, uint32_t n, float* dst);
void Narrow(neff::DType dt, const float* src, uint32_t n, uint8_t* dst);

// c = alu(a, b) elementwise.
void Alu(neff::AluOp op, const float* a, const float* b, float* c, uint32_t n);
// c = alu(a, s), or alu(s, a) when `reverse`.
void AluScalar(neff::AluOp op, const float* a, float s, bool reverse, float* c, uint32_t n);
// c = func(a * scale + bias), the affine step as two float32 roundings.
void Activation(neff::ActivationFunc f, const float* a, float scale, float bias, float* c, uint32_t n);
// c = pred != 0 ? a : b.
void Select(const float* a, const float* b, const float* pred, float* c, uint32_t n);

// The SLEEF functions the activations apply, y = f(x) over n values (y may
// be x), and the float32 constants of the GELU formulas (correctly rounded).
enum class SleefFunc { kExp, kLog, kErf, kTanh, kSin, kCos, kExpm1, kLog1p, kAtan };
void SleefN(SleefFunc f, const float* x, float* y, uint32_t n);
inline constexpr float kInvSqrt2 = 0.70710678118654752440f;
inline constexpr float kSqrt2OverPi = 0.79788456080286535588f;

// max/min with NaN propagation and -0 < +0 (torch.maximum semantics).
float MaxF(float a, float b);
float MinF(float a, float b);

// The documented float32 sum of a row: 32 lanes, lane j adding the elements
// f = j, j + 32, j + 64, ... in increasing f (each lane starting from -0,
// which leaves any first value unchanged), then the lanes combined pairwise:
// lane j += lane j + 16 for j < 16, then + 8, + 4, + 2, + 1. A row is fed in
// pieces through Add; every piece but the last must hold a multiple of 32
// elements (kBlock does).
class LaneSum {
 public:
  static constexpr uint32_t kLanes = 32;
  LaneSum();
  void Add(const float* a, uint32_t n);
  // The same for n bfloat16 values at any byte.
  void AddBf16(const uint8_t* a, uint32_t n);
  float Total() const;
  // The running lanes, for kernels that add groups of 32 values from
  // registers (row_kernels.cc): lane j takes the group's element j.
  float* lanes() { return lanes_; }

 private:
  template <typename Run>
  void AddRun(const Run& a, uint32_t n);

  alignas(64) float lanes_[kLanes];
};

// Sequential max or min (MaxF / MinF folded from element 0) of a row fed in
// pieces. Equal to the left-to-right fold bit for bit: without NaN the
// result is the row's unique extreme under -0 < +0; with NaN it is the first
// NaN of the row.
class Extreme {
 public:
  explicit Extreme(bool max) : max_(max) {}
  void Add(const float* a, uint32_t n);
  // The same for n bfloat16 values at any byte.
  void AddBf16(const uint8_t* a, uint32_t n);
  float Result() const { return value_; }

 private:
  template <typename Run, typename Fold>
  void AddRun(const Run& a, uint32_t n, Fold fold);

  bool max_;
  bool started_ = false;
  bool nan_ = false;
  float value_ = 0.0f;
};

// The TensorEngine's products for output columns [n0, n1) (n0 a multiple
// of 16): for every m < M,
//   out[m][n] = (accumulate ? out[m][n] + s : s),  s = sum over k < K of A[k][m] * B[k][n]
// with the products and additions rounded to float32 one by one and k
// increasing. A is [K][M] and B [K][N] (row-major, float32; B is read only
// for the columns past the last full strip of 16), Ap and Bp the same packed
// (PackMatmulRows); out row m is float32 at out_rows + m *
// out_stride bytes. `exact_products`: every A*B is exact in float32 (bf16
// and f16 operands), so a fused multiply-add gives the same bits and is used
// where the host has one.
void MatmulColumns(const float* A, const float* B, const float* Ap, const float* Bp, uint32_t K, uint32_t M,
                   uint32_t N, uint32_t n0, uint32_t n1, bool exact_products, bool accumulate, uint8_t* out_rows,
                   uint64_t out_stride);
// Ap (K * M floats): A packed by blocks of output rows. Bp holds, for every
// strip s of 16 output columns, B[k][16s .. 16s + 15] for k = 0..K-1 at
// Bp + 16 s K + 16 k (the caller fills it, strip by strip).
void PackMatmulRows(const float* A, uint32_t K, uint32_t M, float* Ap);
// One strip of Bp: 16 values of dtype `dt` from each of K rows (`row_stride`
// bytes apart, starting at `rows`), widened to [K][16] float32.
void PackMatmulStrip(neff::DType dt, const uint8_t* rows, uint64_t row_stride, uint32_t K, float* strip);

// memcpy for a DMA store into a graph output: large runs go around the
// cache (non-temporal stores), since the execution does not read them back
// soon and a cached write would first read every line it fills. FinishHbmCopies orders those
// writes before anything the thread does next (call it once per batch).
void CopyToHbm(uint8_t* dst, const uint8_t* src, size_t bytes);
void FinishHbmCopies();

// Scalar references for tests: the same primitives one value at a time.
float ExpRef(float x);
float LogRef(float x);
float TanhRef(float x);
float SinRef(float x);
float CosRef(float x);
float ErfRef(float x);
float Expm1Ref(float x);
float AtanRef(float x);
float Log1pRef(float x);
float PowRef(float x, float y);

}  // namespace neuroncc::rt::vm
