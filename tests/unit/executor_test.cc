// The executor's numerics (every opcode, dtype rounding, access patterns,
// partial partitions, overlapping tiles) and its timing model (engine
// overlap, waits, cost formulas, launch overhead).
#include "executor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "absl/strings/str_cat.h"
#include "float_convert.h"
#include "run_executable.h"
#include "test_neffs.h"
#include "vector_math.h"

namespace neuroncc {
namespace {

using namespace neff;
using namespace testing;
using rt::DispatchSchedule;

constexpr uint32_t kVectorQ = 1, kScalarQ = 2, kGpsimdQ = 3, kDma0 = 4;

std::string Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

std::vector<float> Floats(const std::string& s) {
  std::vector<float> v(s.size() / 4);
  std::memcpy(v.data(), s.data(), v.size() * 4);
  return v;
}

std::string Bf16Bytes(const std::vector<float>& v) {
  std::string s;
  for (float f : v) {
    uint16_t h = rt::FloatToBf16(f);
    s.append(reinterpret_cast<const char*>(&h), 2);
  }
  return s;
}

std::vector<float> FromBf16(const std::string& s) {
  std::vector<float> v(s.size() / 2);
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, s.data() + 2 * i, 2);
    v[i] = rt::Bf16ToFloat(h);
  }
  return v;
}

using Result = ExecutableRun;

Result RunExe(const Executable& exe, const std::vector<std::string>& inputs,
              const std::vector<std::string>& segments = {},
              const std::vector<std::string>& outputs_init = {}) {
  return RunExecutable(exe, inputs, segments, outputs_init);
}

// One-kernel harness: every input [P, N] of `in_dtypes` is DMA-loaded into
// SBUF tile i (byte offset i * kSlot), `op` runs once all loads are done, and
// tile `kOutSlot` (dtype out_dtype, out_elems per partition) is stored to the
// single output. `op` receives the input tiles and the output tile.
constexpr uint32_t kSlot = 16384;
constexpr uint32_t kOutSlot = 6;

using OpBuilder = std::function<Instruction(const std::vector<TileRef>& in, const TileRef& out)>;

Executable Harness(uint32_t P, uint32_t N, const std::vector<DType>& in_dtypes, DType out_dtype,
                   uint32_t out_elems, const OpBuilder& op) {
  Executable exe = EmptyExecutable("harness");
  Kernel* k = exe.add_kernels();
  k->set_name("op");
  k->add_source_ops("aten.op");
  std::vector<TileRef> tiles;
  std::vector<Wait> waits;
  for (size_t i = 0; i < in_dtypes.size(); ++i) {
    uint32_t id = AddTensor(&exe, "in" + std::to_string(i), INPUT, in_dtypes[i], {P, N});
    TileRef t = Tile(0, P, uint32_t(i) * kSlot, N, in_dtypes[i]);
    tiles.push_back(t);
    *k->add_instructions() = DmaLoad(t, Ap(id, 0, {{N, P}, {1, N}}), uint32_t(i));
    waits.push_back(W(kDma0 + uint32_t(i), 1));
  }
  uint32_t out = AddTensor(&exe, "out", OUTPUT, out_dtype, {P, out_elems});
  TileRef out_tile = Tile(0, P, kOutSlot * kSlot, out_elems, out_dtype);
  Instruction inst = op(tiles, out_tile);
  for (const Wait& w : waits) *inst.add_waits() = w;
  uint32_t q = QueueIndex(inst.engine(), 0);
  *k->add_instructions() = inst;
  *k->add_instructions() =
      DmaStore(out_tile, Ap(out, 0, {{out_elems, P}, {1, out_elems}}), 15, {W(q, 1)});
  return exe;
}

std::vector<float> Iota(size_t n, float start, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * float(i);
  return v;
}

// ---------------------------------------------------------------------------
// Numerics

TEST(ExecutorNumerics, TensorTensorEveryAluOnVectorAndGpsimd) {
  const uint32_t P = 3, N = 5;
  std::vector<float> a = Iota(P * N, -3.5f, 0.75f), b = Iota(P * N, 2.25f, -0.5f);
  b[3] = 0.0f;  // division by zero gives Inf as in IEEE
  struct Case {
    AluOp op;
    std::function<float(float, float)> f;
  };
  std::vector<Case> cases = {
      {ADD, [](float x, float y) { return x + y; }},  {SUB, [](float x, float y) { return x - y; }},
      {MUL, [](float x, float y) { return x * y; }},  {DIV, [](float x, float y) { return x / y; }},
      {MAX, [](float x, float y) { return std::max(x, y); }},
      {MIN, [](float x, float y) { return std::min(x, y); }}};
  for (Engine engine : {VECTOR, GPSIMD}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(AluOp_Name(c.op) + " on " + EngineName(engine));
      Executable exe = Harness(P, N, {F32, F32}, F32, N, [&](auto& in, auto& out) {
        return TensorTensor(c.op, out, in[0], in[1], {}, engine);
      });
      Result r = RunExe(exe, {Bytes(a), Bytes(b)});
      std::vector<float> got = Floats(r.outputs[0]);
      for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(got[i], c.f(a[i], b[i])) << i;
    }
  }
}

TEST(ExecutorNumerics, AnActivationWithScaleBiasAndSumTiles) {
  // NormModel: z = x * rsqrt(q / cols + 1e-6) + q and s = sum(z) per row,
  // q the row's sum of squares; one activation takes the scale and bias
  // from tiles and sums what it writes.
  const int rows = 4, cols = 16;
  std::vector<float> x(rows * cols);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 7) - 3) * 0.25f;
  Result r = RunExe(NormModel(rows, cols), {Bytes(x)});
  ASSERT_EQ(r.outputs.size(), 2u);
  std::vector<float> z = Floats(r.outputs[0]), s = Floats(r.outputs[1]);
  for (int p = 0; p < rows; ++p) {
    double q = 0, sum = 0;
    for (int j = 0; j < cols; ++j) q += double(x[p * cols + j]) * x[p * cols + j];
    const double scale = 1 / std::sqrt(q / cols + 1e-6);
    for (int j = 0; j < cols; ++j) {
      const double want = x[p * cols + j] * scale + q;
      EXPECT_NEAR(z[p * cols + j], want, 1e-5 * (1 + std::abs(want))) << p << " " << j;
      sum += want;
    }
    EXPECT_NEAR(s[p], sum, 1e-4 * (1 + std::abs(sum))) << p;
  }
}

TEST(ExecutorNumerics, MaxAndMinPropagateNaN) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a = {nan, 1.0f, -0.0f, 0.0f}, b = {1.0f, nan, 0.0f, -0.0f};
  for (AluOp op : {MAX, MIN}) {
    Executable exe = Harness(1, 4, {F32, F32}, F32, 4,
                             [&](auto& in, auto& out) { return TensorTensor(op, out, in[0], in[1]); });
    std::vector<float> got = Floats(RunExe(exe, {Bytes(a), Bytes(b)}).outputs[0]);
    EXPECT_TRUE(std::isnan(got[0]));
    EXPECT_TRUE(std::isnan(got[1]));
    // Signed zeros are ordered: max is +0, min is -0, whichever side they come from.
    EXPECT_EQ(std::signbit(got[2]), op == MIN);
    EXPECT_EQ(std::signbit(got[3]), op == MIN);
  }
}

TEST(ExecutorNumerics, TensorScalarWithImmediateReverseAndPerPartitionScalar) {
  const uint32_t P = 4, N = 6;
  std::vector<float> a = Iota(P * N, 1.0f, 0.5f);
  for (bool reverse : {false, true}) {
    for (AluOp op : {ADD, SUB, MUL, DIV, MAX, MIN}) {
      Executable exe = Harness(P, N, {F32}, F32, N, [&](auto& in, auto& out) {
        Instruction i = TensorScalar(op, out, in[0], 3.0f);
        i.set_reverse(reverse);
        return i;
      });
      std::vector<float> got = Floats(RunExe(exe, {Bytes(a)}).outputs[0]);
      for (size_t i = 0; i < a.size(); ++i) {
        float x = reverse ? 3.0f : a[i], y = reverse ? a[i] : 3.0f;
        float want = op == ADD ? x + y : op == SUB ? x - y : op == MUL ? x * y : op == DIV ? x / y
                     : op == MAX ? std::max(x, y) : std::min(x, y);
        EXPECT_EQ(got[i], want) << AluOp_Name(op) << " reverse=" << reverse << " i=" << i;
      }
    }
  }
  // in1 supplies one scalar per partition: its element 0.
  std::vector<float> s = Iota(P * N, 10.0f, 1.0f);
  Executable exe = Harness(P, N, {F32, F32}, F32, N, [&](auto& in, auto& out) {
    Instruction i = TensorScalar(SUB, out, in[0], 99.0f);
    *i.mutable_in1() = in[1];
    return i;
  });
  std::vector<float> got = Floats(RunExe(exe, {Bytes(a), Bytes(s)}).outputs[0]);
  for (uint32_t p = 0; p < P; ++p)
    for (uint32_t f = 0; f < N; ++f) EXPECT_EQ(got[p * N + f], a[p * N + f] - s[p * N]);
}

TEST(ExecutorNumerics, BypassCastsBetweenDtypes) {
  std::vector<float> a = {1.0f, rt::BitsFloat(0x3f808000), rt::BitsFloat(0x3f818000), 1e-40f,
                          65520.0f, -3.0e38f};
  Executable to_bf16 = Harness(1, 6, {F32}, BF16, 6,
                               [](auto& in, auto& out) { return TensorScalar(BYPASS, out, in[0], 0); });
  std::vector<float> got = FromBf16(RunExe(to_bf16, {Bytes(a)}).outputs[0]);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(got[i], rt::Bf16ToFloat(rt::FloatToBf16(a[i]))) << i;
  EXPECT_EQ(got[1], 1.0f);
  EXPECT_EQ(rt::FloatBits(got[2]), 0x3f820000u);

  Executable to_f16 = Harness(1, 6, {F32}, F16, 6,
                              [](auto& in, auto& out) { return TensorScalar(BYPASS, out, in[0], 0); });
  std::string h = RunExe(to_f16, {Bytes(a)}).outputs[0];
  uint16_t h4;
  std::memcpy(&h4, h.data() + 8, 2);
  EXPECT_EQ(h4, 0x7c00);  // 65520 overflows float16 to Inf
}

TEST(ExecutorNumerics, Bf16InputsComputeInF32AndRoundOnce) {
  // 1 + 2^-8 is not a bf16; 1 + 2^-7 is. (1 + 2^-7) * (1 + 2^-7) = 1 + 2^-6 + 2^-14
  // rounds to 1 + 2^-6 in bf16.
  float a = 1.0f + std::ldexp(1.0f, -7);
  Executable exe = Harness(1, 2, {BF16, BF16}, BF16, 2,
                           [](auto& in, auto& out) { return TensorTensor(MUL, out, in[0], in[1]); });
  std::vector<float> got = FromBf16(RunExe(exe, {Bf16Bytes({a, 3.0f}), Bf16Bytes({a, 1.0f / 3})}).outputs[0]);
  EXPECT_EQ(got[0], 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(got[1], rt::Bf16ToFloat(rt::FloatToBf16(3.0f * rt::Bf16ToFloat(rt::FloatToBf16(1.0f / 3)))));
  // Mixed dtypes: bf16 in, f32 out keeps the exact f32 product.
  Executable mixed = Harness(1, 1, {BF16, BF16}, F32, 1,
                             [](auto& in, auto& out) { return TensorTensor(MUL, out, in[0], in[1]); });
  EXPECT_EQ(Floats(RunExe(mixed, {Bf16Bytes({a}), Bf16Bytes({a})}).outputs[0])[0], a * a);
}

// Bit-for-bit equality, any NaN equal to any NaN.
bool Same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || rt::FloatBits(a) == rt::FloatBits(b); }

// The documented float32 row sum (docs/runtime.md), written out plainly: 32
// lanes by f mod 32, each from -0 in increasing f, then combined pairwise.
float LaneSumRef(const std::vector<float>& v) {
  float lanes[32];
  for (float& l : lanes) l = -0.0f;
  for (size_t f = 0; f < v.size(); ++f) lanes[f % 32] += v[f];
  for (int w = 16; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) lanes[j] = lanes[j] + lanes[j + w];
  return lanes[0];
}

// Applies each case's function to partitions x n inputs with `scale` and
// `bias`, the accumulated sum written just past each output row, and checks
// every element and sum bit for bit against the reference (the pre-bias
// product rounded to f32 first, as specified).
struct ActivationCase {
  ActivationFunc f;
  std::function<float(float)> ref;
};

void CheckActivationsWithAccum(uint32_t partitions, uint32_t n, const std::vector<float>& a, float scale,
                               float bias, const std::vector<ActivationCase>& cases) {
  for (const ActivationCase& c : cases) {
    SCOPED_TRACE(ActivationFunc_Name(c.f));
    Executable exe = Harness(partitions, n, {F32}, F32, n + 1, [&](auto& in, auto& out) {
      TileRef o = out;
      o.set_num_elements(n);
      Instruction i = Activation(c.f, o, in[0], scale, bias);
      TileRef acc = out;
      acc.set_byte_offset(out.byte_offset() + n * 4);
      acc.set_num_elements(1);
      *i.mutable_accum() = acc;
      return i;
    });
    std::vector<float> got = Floats(RunExe(exe, {Bytes(a)}).outputs[0]);
    for (uint32_t p = 0; p < partitions; ++p) {
      std::vector<float> row;
      for (uint32_t f = 0; f < n; ++f) {
        volatile float y = a[p * n + f] * scale;  // two roundings, as specified
        float want = c.ref(y + bias);
        EXPECT_TRUE(Same(got[p * (n + 1) + f], want)) << p << "," << f << " got " << got[p * (n + 1) + f]
                                                       << " want " << want;
        row.push_back(want);
      }
      EXPECT_TRUE(Same(got[p * (n + 1) + n], LaneSumRef(row))) << "accum of partition " << p;
    }
  }
}

TEST(ExecutorNumerics, ActivationFunctionsScaleBiasAndAccumulate) {
  const uint32_t P = 2, N = 8;
  CheckActivationsWithAccum(P, N, Iota(P * N, 0.25f, 0.375f), 1.5f, 0.125f,
                            {
                                {IDENTITY, [](float y) { return y; }},
                                {EXP, [](float y) { return rt::vm::ExpRef(y); }},
                                {RSQRT, [](float y) { return 1.0f / std::sqrt(y); }},
                                {SQRT, [](float y) { return std::sqrt(y); }},
                                {SQUARE, [](float y) { return y * y; }},
                                {NEGATE, [](float y) { return -y; }},
                                {RECIPROCAL, [](float y) { return 1.0f / y; }},
                            });
}

TEST(ExecutorNumerics, ActivationScaleFromIn1AndAccumBeforeRounding) {
  // bf16 output, f32 accum: the accum sums unrounded f32 results.
  const uint32_t N = 3;
  std::vector<float> a = {1.0f, 1.0f + std::ldexp(1.0f, -9), 1.0f + std::ldexp(1.0f, -9)};
  std::vector<float> s = {2.0f, 0, 0};
  Executable exe = Harness(1, N, {F32, F32}, F32, 1, [&](auto& in, auto& out) {
    TileRef o = Tile(0, 1, 5 * kSlot, N, BF16);
    Instruction i = Activation(IDENTITY, o, in[0], 100.0f, 0.0f);
    *i.mutable_in1() = in[1];
    *i.mutable_accum() = out;
    return i;
  });
  float got = Floats(RunExe(exe, {Bytes(a), Bytes(s)}).outputs[0])[0];
  EXPECT_EQ(got, 2.0f * a[0] + 2.0f * a[1] + 2.0f * a[2]);  // not 6.0, the bf16-rounded sum
  EXPECT_NE(got, 6.0f);
}

TEST(ExecutorNumerics, ActivationBiasFromIn2) {
  // out[p, f] = exp(x[p, f] * s[p] + b[p]): per-partition scale (in1) and bias (in2)
  // override the instruction's fields; the accum sums the same f32 results.
  const uint32_t P = 3, N = 4;
  std::vector<float> x = Iota(P * N, -1.0f, 0.25f);
  std::vector<float> s = Iota(P * N, 0.5f, 0.125f), b = Iota(P * N, -2.0f, 0.5f);
  for (bool accum : {false, true}) {
    Executable exe = Harness(P, N, {F32, F32, F32}, F32, accum ? 1 : N, [&](auto& in, auto& out) {
      TileRef values = Tile(0, P, 5 * kSlot, N, F32);
      Instruction i = Activation(EXP, accum ? values : out, in[0], 7.0f, 9.0f);
      *i.mutable_in1() = in[1];
      *i.mutable_in2() = in[2];
      if (accum) *i.mutable_accum() = out;
      return i;
    });
    std::vector<float> got = Floats(RunExe(exe, {Bytes(x), Bytes(s), Bytes(b)}).outputs[0]);
    for (uint32_t p = 0; p < P; ++p) {
      std::vector<float> row;
      for (uint32_t f = 0; f < N; ++f) {
        float scaled = x[p * N + f] * s[p * N];
        float want = rt::vm::ExpRef(scaled + b[p * N]);
        row.push_back(want);
        if (!accum) EXPECT_EQ(got[p * N + f], want) << p << "," << f;
      }
      if (accum) EXPECT_EQ(got[p], LaneSumRef(row)) << p;
    }
  }
}

TEST(ExecutorNumerics, SteppedInputsReadEveryStepthElement) {
  // Inputs [P, 12]: in0 read from column 1 by step 3 (4 elements), in1 from
  // column 0 by step 2 (6 elements, the first 4 used by tensor_tensor).
  const uint32_t P = 5, N = 12;
  std::vector<float> a = Iota(P * N, -4.0f, 0.25f), b = Iota(P * N, 3.0f, -0.5f);
  auto stepped = [](TileRef t, uint32_t first, uint32_t n, uint32_t step) {
    t.set_byte_offset(t.byte_offset() + first * 4);
    t.set_num_elements(n);
    t.set_step(step);
    return t;
  };
  Executable add = Harness(P, N, {F32, F32}, F32, 4, [&](auto& in, auto& out) {
    return TensorTensor(ADD, out, stepped(in[0], 1, 4, 3), stepped(in[1], 0, 4, 2), {}, VECTOR);
  });
  Executable act = Harness(P, N, {F32}, F32, 4, [&](auto& in, auto& out) {
    return Activation(EXP, out, stepped(in[0], 1, 4, 3), 1.0f, 0.0f, {});
  });
  Executable sum = Harness(P, N, {F32}, F32, 1,
                           [&](auto& in, auto& out) { return TensorReduce(MAX, out, stepped(in[0], 2, 5, 2), {}, VECTOR); });
  std::vector<float> got_add = Floats(RunExe(add, {Bytes(a), Bytes(b)}).outputs[0]);
  std::vector<float> got_act = Floats(RunExe(act, {Bytes(a)}).outputs[0]);
  std::vector<float> got_max = Floats(RunExe(sum, {Bytes(a)}).outputs[0]);
  for (uint32_t p = 0; p < P; ++p) {
    float m = -INFINITY;
    for (uint32_t i = 0; i < 5; ++i) m = std::max(m, a[p * N + 2 + 2 * i]);
    EXPECT_EQ(got_max[p], m) << p;
    for (uint32_t i = 0; i < 4; ++i) {
      EXPECT_EQ(got_add[p * 4 + i], a[p * N + 1 + 3 * i] + b[p * N + 2 * i]) << p << "," << i;
      EXPECT_EQ(got_act[p * 4 + i], rt::vm::ExpRef(a[p * N + 1 + 3 * i])) << p << "," << i;
    }
  }
}

TEST(ExecutorNumerics, SteppedInputOverwrittenByItsOutputReadsTheOriginal) {
  // Compaction in place: out = columns [0, 6) of the tile, in0 = every other
  // column of the same 12, so the output overwrites elements read later.
  const uint32_t P = 3, N = 12;
  std::vector<float> a = Iota(P * N, 1.0f, 1.0f);
  Executable exe = Harness(P, N, {F32}, F32, N / 2, [&](auto& in, auto& out) {
    TileRef src = in[0];
    src.set_num_elements(N / 2);
    src.set_step(2);
    TileRef dst = in[0];
    dst.set_num_elements(N / 2);
    Instruction copy = TensorScalar(MUL, dst, src, 1.0f, {}, VECTOR);
    (void)out;
    return copy;
  });
  // The harness stores the output slot; store the input tile instead.
  Kernel* k = exe.mutable_kernels(0);
  Instruction* store = k->mutable_instructions(k->instructions_size() - 1);
  TileRef dst = Tile(0, P, 0, N / 2, F32);
  *store->mutable_in0() = dst;
  std::vector<float> got = Floats(RunExe(exe, {Bytes(a)}).outputs[0]);
  for (uint32_t p = 0; p < P; ++p)
    for (uint32_t i = 0; i < N / 2; ++i) EXPECT_EQ(got[p * (N / 2) + i], a[p * N + 2 * i]) << p << "," << i;
}

// Writes `make(input tile)` over the input tile [P, N] and returns the whole
// tile afterwards (the harness's output slot is unused).
template <typename Make>
std::vector<float> RunInPlace(uint32_t P, uint32_t N, const std::vector<float>& a, Make make) {
  Executable exe = Harness(P, N, {F32}, F32, N, [&](const std::vector<TileRef>& in, const TileRef&) {
    return make(in[0]);
  });
  Kernel* k = exe.mutable_kernels(0);
  Instruction* store = k->mutable_instructions(k->instructions_size() - 1);
  *store->mutable_in0() = Tile(0, P, 0, N, F32);
  return Floats(RunExe(exe, {Bytes(a)}).outputs[0]);
}

TEST(ExecutorNumerics, SteppedOutputsWriteEveryStepthElementOnly) {
  // out = columns 1, 4, 7, 10 of the tile; in0 = its columns [0, 4), which
  // the output overwrites in part (column 1): the input is read first.
  const uint32_t P = 3, N = 12;
  std::vector<float> a = Iota(P * N, 1.0f, 1.0f);
  auto stepped = [](TileRef t, uint32_t first, uint32_t n, uint32_t step) {
    t.set_byte_offset(t.byte_offset() + first * 4);
    t.set_num_elements(n);
    t.set_step(step);
    return t;
  };
  auto head = [](TileRef t, uint32_t n) {
    t.set_num_elements(n);
    return t;
  };
  std::vector<float> scaled = RunInPlace(P, N, a, [&](TileRef t) {
    return TensorScalar(MUL, stepped(t, 1, 4, 3), head(t, 4), 2.0f, {}, VECTOR);
  });
  std::vector<float> summed = RunInPlace(P, N, a, [&](TileRef t) {
    return TensorTensor(ADD, stepped(t, 1, 4, 3), head(t, 4), stepped(t, 0, 4, 2), {}, VECTOR);
  });
  std::vector<float> exped = RunInPlace(P, N, a, [&](TileRef t) {
    return Activation(EXP, stepped(t, 2, 5, 2), head(t, 5), 1.0f, 0.0f, {});
  });
  std::vector<float> filled = RunInPlace(P, N, a, [&](TileRef t) { return neuroncc::testing::Iota(stepped(t, 0, 3, 4), -1.0f, 0.0f, 0.5f, {}); });
  for (uint32_t p = 0; p < P; ++p)
    for (uint32_t j = 0; j < N; ++j) {
      const float x = a[p * N + j];
      const bool hit3 = j % 3 == 1, hit2 = j >= 2 && j % 2 == 0 && j < 12, hit4 = j % 4 == 0;
      const uint32_t i3 = j / 3, i2 = (j - 2) / 2, i4 = j / 4;
      EXPECT_EQ(scaled[p * N + j], hit3 ? 2.0f * a[p * N + i3] : x) << p << "," << j;
      EXPECT_EQ(summed[p * N + j], hit3 ? a[p * N + i3] + a[p * N + 2 * i3] : x) << p << "," << j;
      EXPECT_EQ(exped[p * N + j], hit2 && i2 < 5 ? rt::vm::ExpRef(a[p * N + i2]) : x) << p << "," << j;
      EXPECT_EQ(filled[p * N + j], hit4 ? -1.0f + 0.5f * float(i4) : x) << p << "," << j;
    }
}

TEST(ExecutorNumerics, TensorReduceAddMaxMin) {
  const uint32_t P = 3, N = 7;
  std::vector<float> a = Iota(P * N, -2.0f, 0.7f);
  a[9] = 100.0f;
  for (AluOp op : {ADD, MAX, MIN}) {
    Executable exe = Harness(P, N, {F32}, F32, 1,
                             [&](auto& in, auto& out) { return TensorReduce(op, out, in[0]); });
    std::vector<float> got = Floats(RunExe(exe, {Bytes(a)}).outputs[0]);
    for (uint32_t p = 0; p < P; ++p) {
      float acc = a[p * N];
      for (uint32_t f = 1; f < N; ++f) {
        float v = a[p * N + f];
        acc = op == MAX ? std::max(acc, v) : std::min(acc, v);
      }
      if (op == ADD) acc = LaneSumRef(std::vector<float>(a.begin() + p * N, a.begin() + (p + 1) * N));
      EXPECT_EQ(got[p], acc) << AluOp_Name(op) << " partition " << p;
    }
  }
}

TEST(ExecutorNumerics, BroadcastAccessPatternsWithStrideZero) {
  // w[N] broadcast over 4 partitions (partition stride 0); c[P] broadcast
  // along the free dim (free stride 0).
  const uint32_t P = 4, N = 5;
  Executable exe = EmptyExecutable("bcast");
  uint32_t w = AddTensor(&exe, "w", INPUT, F32, {N});
  uint32_t c = AddTensor(&exe, "c", INPUT, F32, {P});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, F32, {P, N});
  Kernel* k = exe.add_kernels();
  k->set_name("bcast");
  *k->add_instructions() = DmaLoad(Tile(0, P, 0, N, F32), Ap(w, 0, {{0, P}, {1, N}}), 0);
  *k->add_instructions() = DmaLoad(Tile(0, P, 64, N, F32), Ap(c, 0, {{1, P}, {0, N}}), 1);
  *k->add_instructions() =
      TensorTensor(MUL, Tile(0, P, 128, N, F32), Tile(0, P, 0, N, F32), Tile(0, P, 64, N, F32),
                   {W(kDma0, 1), W(kDma0 + 1, 1)});
  *k->add_instructions() = DmaStore(Tile(0, P, 128, N, F32), Ap(z, 0, {{N, P}, {1, N}}), 2, {W(kVectorQ, 1)});
  std::vector<float> wv = Iota(N, 1, 1), cv = Iota(P, 10, 10);
  std::vector<float> got = Floats(RunExe(exe, {Bytes(wv), Bytes(cv)}).outputs[0]);
  for (uint32_t p = 0; p < P; ++p)
    for (uint32_t f = 0; f < N; ++f) EXPECT_EQ(got[p * N + f], wv[f] * cv[p]);
}

TEST(ExecutorNumerics, MultiDimAndNegativeStridePatterns) {
  // x[2][3][4]; load partition = dim 0, free = (dim 2, dim 1) i.e. a
  // transpose of the inner two dims; store reversed along the free dim.
  Executable exe = EmptyExecutable("transpose");
  uint32_t x = AddTensor(&exe, "x", INPUT, F32, {2, 3, 4});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, F32, {2, 12});
  Kernel* k = exe.add_kernels();
  k->set_name("t");
  *k->add_instructions() = DmaLoad(Tile(0, 2, 0, 12, F32), Ap(x, 0, {{12, 2}, {1, 4}, {4, 3}}), 0);
  *k->add_instructions() = DmaStore(Tile(0, 2, 0, 12, F32), Ap(z, 11, {{12, 2}, {-1, 12}}), 0);
  std::vector<float> xv = Iota(24, 0, 1);
  std::vector<float> got = Floats(RunExe(exe, {Bytes(xv)}).outputs[0]);
  for (uint32_t p = 0; p < 2; ++p)
    for (uint32_t j = 0; j < 4; ++j)
      for (uint32_t i = 0; i < 3; ++i) {
        uint32_t f = j * 3 + i;  // row-major over (4, 3)
        EXPECT_EQ(got[p * 12 + (11 - f)], xv[p * 12 + i * 4 + j]);
      }
}

TEST(ExecutorNumerics, TwoPartitionDims) {
  // Rows 1..2 of each of three [4, 5] planes (a sliced view: planes are 20
  // elements apart, not 2 rows) loaded on partitions 0..5 in one DMA, then
  // stored into the transpose of the rows' order: partition p = (plane i,
  // row j) goes to row j * 3 + i of a [6, 5] output.
  Executable exe = EmptyExecutable("planes");
  uint32_t x = AddTensor(&exe, "x", INPUT, F32, {3, 4, 5});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, F32, {6, 5});
  Kernel* k = exe.add_kernels();
  k->set_name("planes");
  neff::AccessPattern load = Ap(x, 5, {{20, 3}, {5, 2}, {1, 5}});
  load.set_partition_dims(2);
  neff::AccessPattern store = Ap(z, 0, {{5, 3}, {15, 2}, {1, 5}});
  store.set_partition_dims(2);
  *k->add_instructions() = DmaLoad(Tile(1, 6, 0, 5, F32), load, 0);
  *k->add_instructions() = DmaStore(Tile(1, 6, 0, 5, F32), store, 1, {W(kDma0, 1)});
  std::vector<float> xv = Iota(60, 0, 1);
  std::vector<float> got = Floats(RunExe(exe, {Bytes(xv)}).outputs[0]);
  for (uint32_t i = 0; i < 3; ++i)
    for (uint32_t j = 0; j < 2; ++j)
      for (uint32_t f = 0; f < 5; ++f) EXPECT_EQ(got[(j * 3 + i) * 5 + f], xv[i * 20 + (j + 1) * 5 + f]) << i << j << f;
}

TEST(ExecutorNumerics, PartialPartitionsLeaveTheRestUntouched) {
  // Rows 2..4 of an [8, 4] tensor go through partitions 5..7; other rows of
  // the output keep their initial contents.
  const uint32_t N = 4;
  Executable exe = EmptyExecutable("partial");
  uint32_t x = AddTensor(&exe, "x", INPUT, F32, {8, N});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, F32, {8, N});
  Kernel* k = exe.add_kernels();
  k->set_name("partial");
  *k->add_instructions() = DmaLoad(Tile(5, 3, 0, N, F32), Ap(x, 2 * N, {{N, 3}, {1, N}}), 0);
  *k->add_instructions() =
      TensorScalar(MUL, Tile(5, 3, 16, N, F32), Tile(5, 3, 0, N, F32), -2.0f, {W(kDma0, 1)});
  *k->add_instructions() = DmaStore(Tile(5, 3, 16, N, F32), Ap(z, 2 * N, {{N, 3}, {1, N}}), 1, {W(kVectorQ, 1)});
  std::vector<float> xv = Iota(8 * N, 1, 1);
  std::vector<float> init(8 * N, 7.0f);
  std::vector<float> got = Floats(RunExe(exe, {Bytes(xv)}, {}, {Bytes(init)}).outputs[0]);
  for (uint32_t r = 0; r < 8; ++r)
    for (uint32_t f = 0; f < N; ++f)
      EXPECT_EQ(got[r * N + f], (r >= 2 && r < 5) ? -2.0f * xv[r * N + f] : 7.0f) << r;
}

TEST(ExecutorNumerics, OutputOverlappingInputInAnotherPartitionReadsTheOriginal) {
  // out = in0 + 1 with out shifted one partition down over the same bytes:
  // every row must see the input as it was before the instruction.
  const uint32_t N = 2;
  Executable exe = EmptyExecutable("shift");
  uint32_t x = AddTensor(&exe, "x", INPUT, F32, {4, N});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, F32, {4, N});
  Kernel* k = exe.add_kernels();
  k->set_name("shift");
  *k->add_instructions() = DmaLoad(Tile(0, 4, 0, N, F32), Ap(x, 0, {{N, 4}, {1, N}}), 0);
  *k->add_instructions() = TensorScalar(ADD, Tile(1, 4, 0, N, F32), Tile(0, 4, 0, N, F32), 1.0f, {W(kDma0, 1)});
  *k->add_instructions() = DmaStore(Tile(1, 4, 0, N, F32), Ap(z, 0, {{N, 4}, {1, N}}), 1, {W(kVectorQ, 1)});
  std::vector<float> xv = Iota(4 * N, 0, 1);
  std::vector<float> got = Floats(RunExe(exe, {Bytes(xv)}).outputs[0]);
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_EQ(got[i], xv[i] + 1.0f);
}

TEST(ExecutorNumerics, OutputOverlappingInputInTheSamePartitionReadsTheOriginal) {
  // out = in0 * 2 with out one element further along the same partitions,
  // across several of the executor's 1024-element blocks, in f32 (computed
  // in place) and bf16 (through scratch): every element must see the input
  // as it was before the instruction, so z[f] = 2 x[f] (the store reads
  // the shifted tile).
  const uint32_t P = 3, N = 2500;
  for (DType dt : {F32, BF16}) {
    SCOPED_TRACE(DType_Name(dt));
    const uint32_t es = uint32_t(DTypeSize(dt));
    Executable exe = EmptyExecutable("shift");
    uint32_t x = AddTensor(&exe, "x", INPUT, dt, {P, N});
    uint32_t z = AddTensor(&exe, "z", OUTPUT, dt, {P, N});
    Kernel* k = exe.add_kernels();
    k->set_name("shift");
    *k->add_instructions() = DmaLoad(Tile(0, P, 0, N, dt), Ap(x, 0, {{N, P}, {1, N}}), 0);
    *k->add_instructions() = TensorScalar(MUL, Tile(0, P, es, N, dt), Tile(0, P, 0, N, dt), 2.0f, {W(kDma0, 1)});
    *k->add_instructions() = DmaStore(Tile(0, P, es, N, dt), Ap(z, 0, {{N, P}, {1, N}}), 1, {W(kVectorQ, 1)});
    std::vector<float> xv(P * N);  // exact in bf16, and so is 2x
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = float(int(i * 7 % 64) - 32) * 0.5f;
    std::string out = RunExe(exe, {dt == F32 ? Bytes(xv) : Bf16Bytes(xv)}).outputs[0];
    std::vector<float> got = dt == F32 ? Floats(out) : FromBf16(out);
    for (size_t i = 0; i < xv.size(); ++i) ASSERT_EQ(got[i], 2.0f * xv[i]) << i;
  }
}

TEST(ExecutorNumerics, IntermediatesAndConstantsAcrossKernels) {
  const int64_t R = 4, C = 16;
  std::vector<float> x = Iota(R * C, -1.0f, 0.125f), w = Iota(R * C, 0.5f, 0.25f);
  Result r = RunExe(TwoKernelModel(R, C), {Bytes(x), Bytes(w)});
  std::vector<float> z = Floats(r.outputs[0]);
  for (size_t i = 0; i < z.size(); ++i) EXPECT_EQ(z[i], (x[i] * x[i]) * w[i] + 1.0f);

  // A constant operand read from a segment.
  Executable exe = EmptyExecutable("const");
  uint32_t in = AddTensor(&exe, "x", INPUT, F32, {2, 3});
  uint32_t cst = AddTensor(&exe, "k", CONSTANT, F32, {2, 3});
  exe.mutable_tensors(int(cst))->set_segment(0);
  uint32_t out = AddTensor(&exe, "z", OUTPUT, F32, {2, 3});
  Kernel* k = exe.add_kernels();
  k->set_name("addk");
  *k->add_instructions() = DmaLoad(Tile(0, 2, 0, 3, F32), Ap(in, 0, {{3, 2}, {1, 3}}), 0);
  *k->add_instructions() = DmaLoad(Tile(0, 2, 64, 3, F32), Ap(cst, 0, {{3, 2}, {1, 3}}), 1);
  *k->add_instructions() = TensorTensor(SUB, Tile(0, 2, 128, 3, F32), Tile(0, 2, 0, 3, F32),
                                        Tile(0, 2, 64, 3, F32), {W(kDma0, 1), W(kDma0 + 1, 1)});
  *k->add_instructions() = DmaStore(Tile(0, 2, 128, 3, F32), Ap(out, 0, {{3, 2}, {1, 3}}), 2, {W(kVectorQ, 1)});
  std::vector<float> kv = Iota(6, 100, 1), xv = Iota(6, 1, 1);
  std::vector<float> got = Floats(RunExe(exe, {Bytes(xv)}, {Bytes(kv)}).outputs[0]);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(got[i], xv[i] - kv[i]);
}

// ---------------------------------------------------------------------------
// ISA additions: comparison and pow ALU ops, activation functions, select,
// iota, and the TensorEngine (matmul, transpose) with PSUM.

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Bit-exact equality that also accepts NaN == NaN.
TEST(ExecutorIsa, ComparisonsGiveOneOrZeroAndNaNComparesFalseExceptNotEqual) {
  // Pairs chosen to hit <, ==, >, signed zeros, infinities and NaN on either side.
  std::vector<float> a = {1.0f, 2.0f, 3.0f, -0.0f, kInf, -kInf, kNaN, 1.0f, kNaN, 5.0f};
  std::vector<float> b = {2.0f, 2.0f, 1.0f, 0.0f, kInf, 0.0f, 1.0f, kNaN, kNaN, -5.0f};
  const uint32_t N = uint32_t(a.size());
  struct Case {
    AluOp op;
    std::function<bool(float, float)> f;
  };
  std::vector<Case> cases = {{IS_EQUAL, [](float x, float y) { return x == y; }},
                             {NOT_EQUAL, [](float x, float y) { return x != y; }},
                             {IS_LT, [](float x, float y) { return x < y; }},
                             {IS_LE, [](float x, float y) { return x <= y; }},
                             {IS_GT, [](float x, float y) { return x > y; }},
                             {IS_GE, [](float x, float y) { return x >= y; }}};
  for (Engine engine : {VECTOR, GPSIMD}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(AluOp_Name(c.op) + " on " + EngineName(engine));
      Executable exe = Harness(1, N, {F32, F32}, F32, N, [&](auto& in, auto& out) {
        return TensorTensor(c.op, out, in[0], in[1], {}, engine);
      });
      std::vector<float> got = Floats(RunExe(exe, {Bytes(a), Bytes(b)}).outputs[0]);
      for (uint32_t i = 0; i < N; ++i) EXPECT_EQ(got[i], c.f(a[i], b[i]) ? 1.0f : 0.0f) << i;
    }
  }
  // Spot checks written out, independent of the C++ operators above.
  Executable ne = Harness(1, N, {F32, F32}, F32, N,
                          [](auto& in, auto& out) { return TensorTensor(NOT_EQUAL, out, in[0], in[1]); });
  std::vector<float> got = Floats(RunExe(ne, {Bytes(a), Bytes(b)}).outputs[0]);
  EXPECT_EQ(got, (std::vector<float>{1, 0, 1, 0, 0, 1, 1, 1, 1, 1}));
  Executable eq = Harness(1, N, {F32, F32}, F32, N,
                          [](auto& in, auto& out) { return TensorTensor(IS_EQUAL, out, in[0], in[1]); });
  got = Floats(RunExe(eq, {Bytes(a), Bytes(b)}).outputs[0]);
  EXPECT_EQ(got, (std::vector<float>{0, 1, 0, 1, 1, 0, 0, 0, 0, 0}));  // -0 == +0, Inf == Inf
}

TEST(ExecutorIsa, ComparisonResultsRoundToBf16Exactly) {
  std::vector<float> a = {1.0f, 2.0f, kNaN}, b = {2.0f, 2.0f, 0.0f};
  Executable exe = Harness(1, 3, {BF16, BF16}, BF16, 3,
                           [](auto& in, auto& out) { return TensorTensor(IS_LE, out, in[0], in[1]); });
  EXPECT_EQ(FromBf16(RunExe(exe, {Bf16Bytes(a), Bf16Bytes(b)}).outputs[0]), (std::vector<float>{1, 1, 0}));
}

TEST(ExecutorIsa, TensorScalarComparisonsAndPowWithReverseAndPerPartitionScalar) {
  const uint32_t P = 2, N = 6;
  std::vector<float> a = {-1.0f, 0.5f, 2.0f, 3.0f, kNaN, 4.0f, 0.0f, 1.5f, 2.0f, 9.0f, -kInf, 0.25f};
  for (bool reverse : {false, true}) {
    for (AluOp op : {IS_EQUAL, NOT_EQUAL, IS_LT, IS_LE, IS_GT, IS_GE, POW}) {
      Executable exe = Harness(P, N, {F32}, F32, N, [&](auto& in, auto& out) {
        Instruction i = TensorScalar(op, out, in[0], 2.0f);
        i.set_reverse(reverse);
        return i;
      });
      std::vector<float> got = Floats(RunExe(exe, {Bytes(a)}).outputs[0]);
      for (size_t i = 0; i < a.size(); ++i) {
        float x = reverse ? 2.0f : a[i], y = reverse ? a[i] : 2.0f;
        float want = op == POW        ? std::pow(x, y)
                     : op == IS_EQUAL ? float(x == y)
                     : op == NOT_EQUAL ? float(x != y)
                     : op == IS_LT    ? float(x < y)
                     : op == IS_LE    ? float(x <= y)
                     : op == IS_GT    ? float(x > y)
                                      : float(x >= y);
        EXPECT_TRUE(Same(got[i], want)) << AluOp_Name(op) << " reverse=" << reverse << " i=" << i
                                        << " got " << got[i] << " want " << want;
      }
    }
  }
  // pow with known values: x^2, 2^x (reverse), and a per-partition exponent from in1.
  Executable sq = Harness(1, 3, {F32}, F32, 3, [](auto& in, auto& out) { return TensorScalar(POW, out, in[0], 2.0f); });
  EXPECT_EQ(Floats(RunExe(sq, {Bytes({-3.0f, 0.5f, 4.0f})}).outputs[0]), (std::vector<float>{9.0f, 0.25f, 16.0f}));
  Executable exp2 = Harness(1, 3, {F32}, F32, 3, [](auto& in, auto& out) {
    Instruction i = TensorScalar(POW, out, in[0], 2.0f);
    i.set_reverse(true);
    return i;
  });
  EXPECT_EQ(Floats(RunExe(exp2, {Bytes({-1.0f, 0.0f, 10.0f})}).outputs[0]), (std::vector<float>{0.5f, 1.0f, 1024.0f}));
  Executable per_p = Harness(2, 2, {F32, F32}, F32, 2, [](auto& in, auto& out) {
    Instruction i = TensorScalar(POW, out, in[0], 99.0f);
    *i.mutable_in1() = in[1];
    return i;
  });
  EXPECT_EQ(Floats(RunExe(per_p, {Bytes({2, 3, 2, 3}), Bytes({3, 0, 0.5f, 0})}).outputs[0]),
            (std::vector<float>{8.0f, 27.0f, std::sqrt(2.0f), std::sqrt(3.0f)}));
}

TEST(ExecutorIsa, TensorTensorPow) {
  std::vector<float> a = {2.0f, 9.0f, -8.0f, 0.0f, -2.0f}, b = {10.0f, 0.5f, 1.0f / 3, -1.0f, 3.0f};
  Executable exe = Harness(1, 5, {F32, F32}, F32, 5,
                           [](auto& in, auto& out) { return TensorTensor(POW, out, in[0], in[1], {}, GPSIMD); });
  std::vector<float> got = Floats(RunExe(exe, {Bytes(a), Bytes(b)}).outputs[0]);
  EXPECT_EQ(got[0], 1024.0f);
  EXPECT_EQ(got[1], 3.0f);
  EXPECT_TRUE(std::isnan(got[2]));  // negative base, non-integer exponent
  EXPECT_EQ(got[3], kInf);
  EXPECT_EQ(got[4], -8.0f);
}

TEST(ExecutorIsa, NewActivationFunctionsFollowTheirFormulas) {
  const uint32_t P = 2, N = 9;
  std::vector<float> a = {-6.0f, -2.5f, -1.0f, -0.25f, 0.0f, 0.375f, 1.0f, 2.0f, 5.5f,
                          -0.0f, -20.0f, 20.0f, 0.1f, -0.1f, 3.25f, -3.25f, 100.0f, 1e-3f};
  const float r2 = 0.70710678118654752440f, c = 0.79788456080286535588f;
  CheckActivationsWithAccum(P, N, a, 1.5f, 0.25f, {
      {LOG, [](float y) { return rt::vm::LogRef(y); }},
      {TANH, [](float y) { return rt::vm::TanhRef(y); }},
      {SIGMOID, [](float y) { return 1.0f / (1.0f + rt::vm::ExpRef(-y)); }},
      {RELU, [](float y) { return y > 0.0f ? y : 0.0f; }},
      {GELU, [=](float y) { return (y * 0.5f) * (1.0f + rt::vm::ErfRef(y * r2)); }},
      {GELU_TANH,
       [=](float y) {
         float cube = y * y * y;
         return (y * 0.5f) * (1.0f + rt::vm::TanhRef(c * (y + 0.044715f * cube)));
       }},
      {SILU, [](float y) { return y * (1.0f / (1.0f + rt::vm::ExpRef(-y))); }},
      {ABS, [](float y) { return std::fabs(y); }},
      {ERF, [](float y) { return rt::vm::ErfRef(y); }},
      {EXPM1, [](float y) { return rt::vm::Expm1Ref(y); }},
      {ATAN, [](float y) { return rt::vm::AtanRef(y); }},
      {LOG1P, [](float y) { return rt::vm::Log1pRef(y); }},
      // y = a * 1.5 + 0.25 holds the ties -3.5 and 8.5: ROUND gives -4 and 8.
      {FLOOR, [](float y) { return std::floor(y); }},
      {CEIL, [](float y) { return std::ceil(y); }},
      {TRUNC, [](float y) { return std::trunc(y); }},
      {ROUND, [](float y) { return std::nearbyint(y); }},
  });
}

TEST(ExecutorIsa, ActivationFunctionsAgreeWithKnownValues) {
  // Independent of the formulas: reference values computed in double.
  std::vector<float> x = {-3.0f, -1.0f, 0.0f, 0.5f, 1.0f, 2.0f};
  auto run = [&](ActivationFunc f) {
    Executable exe = Harness(1, uint32_t(x.size()), {F32}, F32, uint32_t(x.size()),
                             [&](auto& in, auto& out) { return Activation(f, out, in[0], 1.0f, 0.0f); });
    return Floats(RunExe(exe, {Bytes(x)}).outputs[0]);
  };
  auto near = [](const std::vector<float>& got, const std::function<double(double)>& ref,
                 const std::vector<float>& xs, const char* what) {
    for (size_t i = 0; i < xs.size(); ++i)
      EXPECT_NEAR(got[i], ref(xs[i]), 4e-7 * std::max(1.0, std::fabs(ref(xs[i])))) << what << " x=" << xs[i];
  };
  near(run(GELU), [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, x, "gelu");
  near(run(GELU_TANH),
       [](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); }, x,
       "gelu_tanh");
  near(run(SIGMOID), [](double v) { return 1 / (1 + std::exp(-v)); }, x, "sigmoid");
  near(run(SILU), [](double v) { return v / (1 + std::exp(-v)); }, x, "silu");
  near(run(TANH), [](double v) { return std::tanh(v); }, x, "tanh");
  std::vector<float> relu = run(RELU);
  EXPECT_EQ(relu, (std::vector<float>{0, 0, 0, 0.5f, 1, 2}));
  std::vector<float> abs = run(ABS);
  EXPECT_EQ(abs, (std::vector<float>{3, 1, 0, 0.5f, 1, 2}));
  std::vector<float> lg = run(LOG);
  EXPECT_TRUE(std::isnan(lg[0]));
  EXPECT_EQ(lg[2], -kInf);
  EXPECT_EQ(lg[4], 0.0f);
  EXPECT_NEAR(lg[5], std::log(2.0), 1e-7);
}

TEST(ExecutorIsa, ReluAndAbsEdgeCases) {
  std::vector<float> a = {kNaN, -0.0f, -kInf, kInf};
  Executable relu = Harness(1, 4, {F32}, F32, 4, [](auto& in, auto& out) { return Activation(RELU, out, in[0], 1, 0); });
  std::vector<float> got = Floats(RunExe(relu, {Bytes(a)}).outputs[0]);
  EXPECT_TRUE(std::isnan(got[0]));  // NaN propagates, as torch.relu
  EXPECT_EQ(rt::FloatBits(got[1]), 0u);  // -0 -> +0
  EXPECT_EQ(got[2], 0.0f);
  EXPECT_EQ(got[3], kInf);
  Executable abs = Harness(1, 4, {F32}, F32, 4, [](auto& in, auto& out) { return Activation(ABS, out, in[0], 1, 0); });
  got = Floats(RunExe(abs, {Bytes(a)}).outputs[0]);
  EXPECT_TRUE(std::isnan(got[0]));
  EXPECT_EQ(rt::FloatBits(got[1]), 0u);
  EXPECT_EQ(got[2], kInf);
}

TEST(ExecutorIsa, SelectKeepsNaNAndInfOfTheUnselectedBranchOut) {
  // Attention-style masking: out = mask ? scores : -inf. The unselected
  // branch holds NaN and Inf, which must not leak into the result.
  const uint32_t P = 2, N = 5;
  std::vector<float> scores = {1.5f, kNaN, -2.0f, kInf, 0.25f, kNaN, 3.0f, -kInf, 7.0f, -0.0f};
  std::vector<float> neg_inf(P * N, -kInf);
  neg_inf[0] = kNaN;  // the other branch may be NaN too where the mask is set
  std::vector<float> mask = {1.0f, 0.0f, 2.0f, -0.0f, kNaN, 0.0f, -1.0f, 0.0f, kInf, 1e-30f};
  for (Engine engine : {VECTOR, GPSIMD}) {
    SCOPED_TRACE(EngineName(engine));
    Executable exe = Harness(P, N, {F32, F32, F32}, F32, N, [&](auto& in, auto& out) {
      return TensorSelect(out, in[0], in[1], in[2], {}, engine);
    });
    std::vector<float> got = Floats(RunExe(exe, {Bytes(scores), Bytes(neg_inf), Bytes(mask)}).outputs[0]);
    // mask != 0 (NaN and tiny values count as nonzero, -0 does not)
    std::vector<float> want = {1.5f, -kInf, -2.0f, -kInf, 0.25f, -kInf, 3.0f, -kInf, 7.0f, -0.0f};
    for (uint32_t i = 0; i < P * N; ++i) EXPECT_TRUE(Same(got[i], want[i])) << i << " got " << got[i];
  }
}

TEST(ExecutorIsa, SelectWithMixedDtypesRoundsOnce) {
  // bf16 data, f32 predicate, bf16 output: values pass through unchanged.
  std::vector<float> a = {1.0f, 2.0f, 3.0f}, b = {-1.0f, -2.0f, -3.0f}, m = {0.0f, 1.0f, 0.0f};
  Executable exe = Harness(1, 3, {BF16, BF16, F32}, BF16, 3, [](auto& in, auto& out) {
    return TensorSelect(out, in[0], in[1], in[2]);
  });
  EXPECT_EQ(FromBf16(RunExe(exe, {Bf16Bytes(a), Bf16Bytes(b), Bytes(m)}).outputs[0]),
            (std::vector<float>{-1.0f, 2.0f, -3.0f}));
}

TEST(ExecutorIsa, SelectPredicateOverlappedByTheOutputInAnotherPartitionIsSnapshotted) {
  // out is the predicate tile shifted one partition down: every row must use
  // the predicate as it was before the instruction.
  const uint32_t N = 2;
  Executable exe = EmptyExecutable("sel_shift");
  uint32_t x = AddTensor(&exe, "x", INPUT, F32, {4, N});
  uint32_t m = AddTensor(&exe, "m", INPUT, F32, {4, N});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, F32, {4, N});
  Kernel* k = exe.add_kernels();
  k->set_name("sel");
  *k->add_instructions() = DmaLoad(Tile(0, 4, 0, N, F32), Ap(x, 0, {{N, 4}, {1, N}}), 0);
  *k->add_instructions() = DmaLoad(Tile(0, 4, 64, N, F32), Ap(m, 0, {{N, 4}, {1, N}}), 1);
  // in0 = x, in1 = m itself (so a clobbered predicate row would show), in2 = m.
  *k->add_instructions() = TensorSelect(Tile(1, 4, 64, N, F32), Tile(0, 4, 0, N, F32), Tile(0, 4, 64, N, F32),
                                        Tile(0, 4, 64, N, F32), {W(kDma0, 1), W(kDma0 + 1, 1)});
  *k->add_instructions() = DmaStore(Tile(1, 4, 64, N, F32), Ap(z, 0, {{N, 4}, {1, N}}), 2, {W(kVectorQ, 1)});
  std::vector<float> xv = {10, 11, 12, 13, 14, 15, 16, 17}, mv = {0, 5, 6, 0, 0, 7, 8, 0};
  std::vector<float> got = Floats(RunExe(exe, {Bytes(xv), Bytes(mv)}).outputs[0]);
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_EQ(got[i], mv[i] != 0 ? xv[i] : mv[i]) << i;
}

TEST(ExecutorIsa, IotaWithNegativeStepsPartitionOffsetAndDtypes) {
  // out[p, f] = imm + p * scale + f * bias on partitions 5..7 (p counts from 0).
  const uint32_t P = 3, N = 6;
  auto build = [&](DType dt, float imm, float scale, float bias, Engine engine) {
    Executable exe = EmptyExecutable("iota");
    uint32_t z = AddTensor(&exe, "z", OUTPUT, dt, {P, N});
    Kernel* k = exe.add_kernels();
    k->set_name("iota");
    *k->add_instructions() = testing::Iota(Tile(5, P, 256, N, dt), imm, scale, bias, {}, engine);
    *k->add_instructions() =
        DmaStore(Tile(5, P, 256, N, dt), Ap(z, 0, {{N, P}, {1, N}}), 0, {W(QueueIndex(engine, 0), 1)});
    return exe;
  };
  for (Engine engine : {GPSIMD, VECTOR}) {
    std::vector<float> got = Floats(RunExe(build(F32, 100.0f, -10.0f, -3.0f, engine), {}).outputs[0]);
    for (uint32_t p = 0; p < P; ++p)
      for (uint32_t f = 0; f < N; ++f)
        EXPECT_EQ(got[p * N + f], 100.0f - 10.0f * float(p) - 3.0f * float(f)) << p << "," << f;
  }
  // Fractional steps: (imm + p * scale) + f * bias, each rounded in f32.
  std::vector<float> got = Floats(RunExe(build(F32, 0.1f, 0.2f, -0.3f, GPSIMD), {}).outputs[0]);
  for (uint32_t p = 0; p < P; ++p)
    for (uint32_t f = 0; f < N; ++f) {
      volatile float base = 0.1f + float(p) * 0.2f;
      volatile float step = float(f) * -0.3f;
      EXPECT_EQ(got[p * N + f], base + step) << p << "," << f;
    }
  // bf16 output rounds once: 257 is not a bf16 (ties to even -> 256), 259 -> 260.
  std::vector<float> b = FromBf16(RunExe(build(BF16, 255.0f, 0.0f, 1.0f, GPSIMD), {}).outputs[0]);
  EXPECT_EQ(b[0], 255.0f);
  EXPECT_EQ(b[1], 256.0f);
  EXPECT_EQ(b[2], 256.0f);
  EXPECT_EQ(b[3], 258.0f);
  EXPECT_EQ(b[4], 260.0f);
}

// ---- TensorEngine

// z[M, N] = sum over t < T of A_t^T B_t: A is [T*K, M] and B [T*K, N] in HBM
// (row block t is tile t), each tile is one matmul accumulating into a PSUM
// tile at `psum_offset` (the first one overwrites unless `accumulate_first`),
// then the vector engine copies PSUM to SBUF (f32) and it is stored.
Executable MatmulHarness(uint32_t K, uint32_t M, uint32_t N, uint32_t T, DType dt, uint32_t psum_offset = 0,
                         bool accumulate_first = false, uint32_t psum_partition = 0) {
  Executable exe = EmptyExecutable("mm");
  uint32_t a = AddTensor(&exe, "a", INPUT, dt, {T * K, M});
  uint32_t b = AddTensor(&exe, "b", INPUT, dt, {T * K, N});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, F32, {M, N});
  Kernel* k = exe.add_kernels();
  k->set_name("mm");
  const uint32_t es = uint32_t(DTypeSize(dt));
  const uint32_t a_bytes = M * es, b_bytes = N * es;
  for (uint32_t t = 0; t < T; ++t) {
    *k->add_instructions() = DmaLoad(Tile(0, K, t * a_bytes, M, dt), Ap(a, int64_t(t) * K * M, {{M, K}, {1, M}}), 0);
    *k->add_instructions() = DmaLoad(Tile(0, K, T * a_bytes + t * b_bytes, N, dt),
                                     Ap(b, int64_t(t) * K * N, {{N, K}, {1, N}}), 1);
  }
  TileRef acc = Psum(psum_partition, M, psum_offset, N);
  for (uint32_t t = 0; t < T; ++t)
    *k->add_instructions() = Matmul(acc, Tile(0, K, t * a_bytes, M, dt), Tile(0, K, T * a_bytes + t * b_bytes, N, dt),
                                    t > 0 || accumulate_first, {W(kDma0, t + 1), W(kDma0 + 1, t + 1)});
  TileRef res = Tile(0, M, T * (a_bytes + b_bytes), N, F32);
  *k->add_instructions() = TensorScalar(BYPASS, res, acc, 0.0f, {W(0, T)});
  *k->add_instructions() = DmaStore(res, Ap(z, 0, {{N, M}, {1, N}}), 2, {W(kVectorQ, 1)});
  return exe;
}

// The specified numerics: per tile, products rounded to f32 and summed in
// increasing k; each tile's sum then added to the running output.
std::vector<float> MatmulRef(const std::vector<float>& A, const std::vector<float>& B, uint32_t K, uint32_t M,
                             uint32_t N, uint32_t T) {
  std::vector<float> z(size_t(M) * N, 0.0f);
  for (uint32_t t = 0; t < T; ++t)
    for (uint32_t m = 0; m < M; ++m)
      for (uint32_t n = 0; n < N; ++n) {
        size_t r = size_t(t) * K;
        volatile float s = A[r * M + m] * B[r * N + n];
        for (uint32_t k = 1; k < K; ++k) {
          volatile float prod = A[(r + k) * M + m] * B[(r + k) * N + n];
          s = s + prod;
        }
        float& out = z[size_t(m) * N + n];
        out = t == 0 ? float(s) : out + s;
      }
  return z;
}

std::vector<float> Rounded(std::vector<float> v, DType dt) {
  if (dt == BF16)
    for (float& f : v) f = rt::Bf16ToFloat(rt::FloatToBf16(f));
  if (dt == F16)
    for (float& f : v) f = rt::F16ToFloat(rt::FloatToF16(f));
  return v;
}

std::string DtypeBytes(const std::vector<float>& v, DType dt) {
  if (dt == F32) return Bytes(v);
  if (dt == BF16) return Bf16Bytes(v);
  std::string s;
  for (float f : v) {
    uint16_t h = rt::FloatToF16(f);
    s.append(reinterpret_cast<const char*>(&h), 2);
  }
  return s;
}

std::vector<float> Pseudo(size_t n, uint32_t seed, float scale) {
  std::vector<float> v(n);
  uint32_t x = seed;
  for (float& f : v) {
    x = x * 1664525u + 1013904223u;
    f = (float(x >> 8) / float(1u << 24) - 0.5f) * scale;
  }
  return v;
}

TEST(ExecutorTensorEngine, MatmulFollowsTheSpecifiedSumInEveryDtype) {
  const uint32_t K = 24, M = 7, N = 33;
  for (DType dt : {F32, BF16, F16}) {
    SCOPED_TRACE(DTypeName(dt));
    std::vector<float> A = Rounded(Pseudo(K * M, 1, 4.0f), dt), B = Rounded(Pseudo(K * N, 2, 4.0f), dt);
    Result r = RunExe(MatmulHarness(K, M, N, 1, dt), {DtypeBytes(A, dt), DtypeBytes(B, dt)});
    std::vector<float> got = Floats(r.outputs[0]);
    std::vector<float> want = MatmulRef(A, B, K, M, N, 1);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << i;
    // And close to the exact result (computed in double).
    for (uint32_t m = 0; m < M; ++m)
      for (uint32_t n = 0; n < N; ++n) {
        double s = 0;
        for (uint32_t k = 0; k < K; ++k) s += double(A[k * M + m]) * B[k * N + n];
        EXPECT_NEAR(got[m * N + n], s, 1e-5 * K * 4) << m << "," << n;
      }
  }
}

TEST(ExecutorTensorEngine, Bf16InputsAccumulateInF32) {
  // sum of K = 64 products (1 + 2^-7)^2 = 1 + 2^-6 + 2^-14, exact in f32 per
  // product; a bf16 accumulator would lose the low bits at every step.
  const uint32_t K = 64, M = 1, N = 2;
  float v = 1.0f + std::ldexp(1.0f, -7);
  std::vector<float> A(K * M, v), B(K * N, v);
  std::vector<float> got = Floats(RunExe(MatmulHarness(K, M, N, 1, BF16), {Bf16Bytes(A), Bf16Bytes(B)}).outputs[0]);
  float want = 0;
  for (uint32_t k = 0; k < K; ++k) want += v * v;
  EXPECT_EQ(got[0], want);
  EXPECT_EQ(got[0], 64.0f * (1.0f + std::ldexp(1.0f, -6) + std::ldexp(1.0f, -14)));  // exact: small K
  EXPECT_NE(got[0], rt::Bf16ToFloat(rt::FloatToBf16(got[0])));  // not representable in bf16
}

TEST(ExecutorTensorEngine, SumOrderIsIncreasingKAndTilesAddTheirSumsToTheOutput) {
  // One column, K = 3 per tile. Tile 0: products 1e8, 1, -1e8: in increasing
  // k order (1e8 + 1) rounds to 1e8, so the sum is exactly 0 (another order
  // would give 1).
  const uint32_t K = 3, M = 1, N = 1;
  {
    std::vector<float> A = {1e8f, 1.0f, -1e8f}, B = {1.0f, 1.0f, 1.0f};
    std::vector<float> got = Floats(RunExe(MatmulHarness(K, M, N, 1, F32), {Bytes(A), Bytes(B)}).outputs[0]);
    EXPECT_EQ(got[0], 0.0f);
  }
  // Two tiles: tile 0 sums to -1e8; tile 1 has 1e8, 1, 0: its own sum
  // (1e8 + 1 -> 1e8) is added to the output: -1e8 + 1e8 = 0. Adding each
  // product into the output in turn would give (-1e8 + 1e8) + 1 = 1.
  {
    std::vector<float> A = {-1e8f, 0.0f, 0.0f, 1e8f, 1.0f, 0.0f}, B(6, 1.0f);
    std::vector<float> got = Floats(RunExe(MatmulHarness(K, M, N, 2, F32), {Bytes(A), Bytes(B)}).outputs[0]);
    EXPECT_EQ(got[0], 0.0f);
  }
}

TEST(ExecutorTensorEngine, AccumulateOverSeveralKTilesInPsum) {
  const uint32_t K = 128, M = 16, N = 96, T = 3;
  for (DType dt : {BF16, F32}) {
    SCOPED_TRACE(DTypeName(dt));
    std::vector<float> A = Rounded(Pseudo(T * K * M, 3, 2.0f), dt), B = Rounded(Pseudo(T * K * N, 4, 2.0f), dt);
    // In the last bank, at partition 32: partitions and banks are honoured.
    Executable exe = MatmulHarness(K, M, N, T, dt, 7 * kPsumBankBytes + 256, false, 32);
    std::vector<float> got = Floats(RunExe(exe, {DtypeBytes(A, dt), DtypeBytes(B, dt)}).outputs[0]);
    std::vector<float> want = MatmulRef(A, B, K, M, N, T);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << i;
  }
}

TEST(ExecutorTensorEngine, FirstMatmulOverwritesPsumUnlessItAccumulates) {
  // The executor keeps PSUM between executions (like SBUF). Run twice on one
  // executor: without accumulate the result is the same both times; with
  // accumulate on the first matmul the second run adds onto the first.
  const uint32_t K = 4, M = 2, N = 3;
  std::vector<float> A = Iota(K * M, 1, 1), B = Iota(K * N, -2, 0.5f);
  std::vector<float> once = MatmulRef(A, B, K, M, N, 1);
  for (bool acc_first : {false, true}) {
    absl::StatusOr<Neff> neff = ParseNeff(Serialize(MatmulHarness(K, M, N, 1, F32, 0, acc_first)));
    ASSERT_TRUE(neff.ok()) << neff.status();
    auto ex = rt::Executor::Create(*neff, Trn1());
    ASSERT_TRUE(ex.ok());
    std::string a = Bytes(A), b = Bytes(B), z1(M * N * 4, '\0'), z2(M * N * 4, '\0');
    ASSERT_TRUE((*ex)->Run({a.data(), b.data()}, {z1.data()}).ok());
    ASSERT_TRUE((*ex)->Run({a.data(), b.data()}, {z2.data()}).ok());
    EXPECT_EQ(Floats(z1), once);
    for (size_t i = 0; i < once.size(); ++i) EXPECT_EQ(Floats(z2)[i], acc_first ? once[i] + once[i] : once[i]) << i;
  }
}

TEST(ExecutorTensorEngine, FullSizeTileMatchesAnExactReference) {
  // The typical 128 x 128 x 512 bf16 tile.
  const uint32_t K = 128, M = 128, N = 512;
  std::vector<float> A = Rounded(Pseudo(K * M, 5, 2.0f), BF16), B = Rounded(Pseudo(K * N, 6, 2.0f), BF16);
  std::vector<float> got = Floats(RunExe(MatmulHarness(K, M, N, 1, BF16), {Bf16Bytes(A), Bf16Bytes(B)}).outputs[0]);
  std::vector<float> want = MatmulRef(A, B, K, M, N, 1);
  size_t mismatches = 0;
  for (size_t i = 0; i < got.size(); ++i) mismatches += got[i] != want[i];
  EXPECT_EQ(mismatches, 0u);
}

TEST(ExecutorTensorEngine, TransposeIsExactAcrossPartitionOffsets) {
  // in0: partitions 3..7 (P = 5) x F = 4, bf16 or f32, with NaN, Inf and -0;
  // out: PSUM [4 x 5] at partition 10, copied out by the vector engine.
  const uint32_t P = 5, F = 4;
  std::vector<float> x = {1.0f, -0.0f, kNaN, kInf, -kInf, 2.5f, 3.0f, -4.0f, 1e-3f, 5.0f,
                          6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 0.0f};
  for (DType dt : {F32, BF16}) {
    SCOPED_TRACE(DTypeName(dt));
    std::vector<float> xr = Rounded(x, dt);
    Executable exe = EmptyExecutable("transpose");
    uint32_t in = AddTensor(&exe, "x", INPUT, dt, {P, F});
    uint32_t z = AddTensor(&exe, "z", OUTPUT, F32, {F, P});
    Kernel* k = exe.add_kernels();
    k->set_name("t");
    *k->add_instructions() = DmaLoad(Tile(3, P, 64, F, dt), Ap(in, 0, {{F, P}, {1, F}}), 0);
    *k->add_instructions() = Transpose(Psum(10, F, 3 * kPsumBankBytes + 8, P), Tile(3, P, 64, F, dt), {W(kDma0, 1)});
    *k->add_instructions() =
        TensorScalar(BYPASS, Tile(0, F, 1024, P, F32), Psum(10, F, 3 * kPsumBankBytes + 8, P), 0, {W(0, 1)});
    *k->add_instructions() = DmaStore(Tile(0, F, 1024, P, F32), Ap(z, 0, {{P, F}, {1, P}}), 1, {W(kVectorQ, 1)});
    std::vector<float> got = Floats(RunExe(exe, {DtypeBytes(x, dt)}).outputs[0]);
    for (uint32_t p = 0; p < P; ++p)
      for (uint32_t f = 0; f < F; ++f) EXPECT_TRUE(Same(got[f * P + p], xr[p * F + f])) << p << "," << f;
  }
}

TEST(ExecutorTensorEngine, VectorAndScalarReadPsumInputs) {
  // out = psum + sbuf (tensor_tensor with one PSUM input), and exp(psum) on
  // the scalar engine with a per-partition scale from PSUM.
  const uint32_t K = 2, M = 2, N = 3;
  Executable exe = EmptyExecutable("psum_in");
  uint32_t a = AddTensor(&exe, "a", INPUT, F32, {K, M});
  uint32_t b = AddTensor(&exe, "b", INPUT, F32, {K, N});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, F32, {M, 2 * N});
  Kernel* k = exe.add_kernels();
  k->set_name("k");
  *k->add_instructions() = DmaLoad(Tile(0, K, 0, M, F32), Ap(a, 0, {{M, K}, {1, M}}), 0);
  *k->add_instructions() = DmaLoad(Tile(0, K, 64, N, F32), Ap(b, 0, {{N, K}, {1, N}}), 1);
  TileRef acc = Psum(0, M, 0, N);
  *k->add_instructions() = Matmul(acc, Tile(0, K, 0, M, F32), Tile(0, K, 64, N, F32), false, {W(kDma0, 1), W(kDma0 + 1, 1)});
  // SBUF tile for the add: b's first M rows.
  *k->add_instructions() = TensorTensor(ADD, Tile(0, M, 128, N, F32), acc, Tile(0, M, 64, N, F32), {W(0, 1)});
  Instruction act = Activation(EXP, Tile(0, M, 128 + N * 4, N, F32), acc, 1.0f, 0.0f, {W(0, 1)});
  *act.mutable_in1() = Psum(0, M, 0, 1);
  *k->add_instructions() = act;
  *k->add_instructions() =
      DmaStore(Tile(0, M, 128, 2 * N, F32), Ap(z, 0, {{2 * N, M}, {1, 2 * N}}), 2, {W(kVectorQ, 1), W(kScalarQ, 1)});
  std::vector<float> A = {1, 2, 3, 4}, B = {0.5f, -1, 0.25f, 2, 0, -0.5f};
  std::vector<float> mm = MatmulRef(A, B, K, M, N, 1);
  std::vector<float> got = Floats(RunExe(exe, {Bytes(A), Bytes(B)}).outputs[0]);
  for (uint32_t m = 0; m < M; ++m)
    for (uint32_t n = 0; n < N; ++n) {
      EXPECT_EQ(got[m * 2 * N + n], mm[m * N + n] + B[m * N + n]);
      volatile float y = mm[m * N + n] * mm[m * N];
      EXPECT_EQ(got[m * 2 * N + N + n], rt::vm::ExpRef(float(y) + 0.0f));
    }
}

TEST(ExecutorIsa, CausalMaskModel) {
  const uint32_t R = 5, C = 7;
  std::vector<float> x = Iota(R * C, -3.0f, 0.5f);
  x[0] = kNaN;  // kept where selected
  x[6] = kNaN;  // masked away
  std::vector<float> got = Floats(RunExe(CausalMaskModel(R, C), {Bytes(x)}).outputs[0]);
  for (uint32_t p = 0; p < R; ++p)
    for (uint32_t f = 0; f < C; ++f)
      EXPECT_TRUE(Same(got[p * C + f], f <= p ? x[p * C + f] : -kInf)) << p << "," << f;
}

TEST(ExecutorTensorEngine, MatmulModelComputesXTimesW) {
  struct Shape {
    uint32_t M, K, N, tiles;
    DType dt;
  };
  for (const Shape& sh : {Shape{6, 40, 20, 2, F32}, Shape{6, 40, 20, 2, BF16}, Shape{128, 896, 64, 7, F32},
                          Shape{64, 256, 512, 2, BF16}}) {
    const uint32_t M = sh.M, K = sh.K, N = sh.N;
    const DType dt = sh.dt;
    SCOPED_TRACE(absl::StrCat(M, "x", K, "x", N, " ", DTypeName(dt)));
    std::vector<float> x = Rounded(Pseudo(M * K, 7, 3.0f), dt), w = Rounded(Pseudo(K * N, 8, 3.0f), dt);
    std::vector<float> got =
        Floats(RunExe(MatmulModel(M, K, N, dt, sh.tiles), {DtypeBytes(x, dt), DtypeBytes(w, dt)}).outputs[0]);
    // x^T as the stationary operand, K in `tiles` tiles.
    std::vector<float> xt(K * M);
    for (uint32_t m = 0; m < M; ++m)
      for (uint32_t k = 0; k < K; ++k) xt[k * M + m] = x[m * K + k];
    std::vector<float> want = MatmulRef(xt, w, K / sh.tiles, M, N, sh.tiles);
    ASSERT_EQ(got.size(), want.size());
    size_t mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i) mismatches += got[i] != want[i];
    EXPECT_EQ(mismatches, 0u);
  }
}

// ---------------------------------------------------------------------------
// Timing

uint64_t Ps(double ns) { return uint64_t(std::llround(ns * 1000)); }

const rt::ScheduledInstruction& Find(const DispatchSchedule& s, uint32_t idx) {
  for (const auto& e : s.order)
    if (e.instruction == idx) return e;
  ADD_FAILURE() << "instruction " << idx << " not scheduled";
  return s.order.front();
}

TEST(ExecutorTiming, DmaCostFollowsTheDocumentedFormula) {
  // trn1: 2 us fixed + bytes / min(27 GB/s, 820/2/16 GB/s) per queue.
  const uint32_t P = 128, N = 1024;
  Executable exe = EmptyExecutable("dma");
  uint32_t x = AddTensor(&exe, "x", INPUT, F32, {P, N});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, F32, {P, N});
  Kernel* k = exe.add_kernels();
  k->set_name("copy");
  *k->add_instructions() = DmaLoad(Tile(0, P, 0, N, F32), Ap(x, 0, {{N, P}, {1, N}}), 0);
  *k->add_instructions() = DmaStore(Tile(0, P, 0, N, F32), Ap(z, 0, {{N, P}, {1, N}}), 1, {W(kDma0, 1)});
  Result r = RunExe(exe, {std::string(P * N * 4, '\0')});
  const DispatchSchedule& s = r.schedules[0];
  double bytes = double(P) * N * 4;
  double per_queue = std::min(27.0, 820.0 / 2 / 16);
  uint64_t dma = Ps(2000.0 + bytes / per_queue);
  EXPECT_EQ(Find(s, 0).start, 0u);
  EXPECT_EQ(Find(s, 0).end, dma);
  EXPECT_EQ(Find(s, 1).start, dma);  // the store waits for the load's semaphore
  EXPECT_EQ(s.makespan_ps, 2 * dma);
  EXPECT_EQ(r.stats.hbm_read_bytes, uint64_t(bytes));
  EXPECT_EQ(r.stats.hbm_write_bytes, uint64_t(bytes));
}

TEST(ExecutorTiming, ComputeCostFormulas) {
  const DeviceParams& d = Trn1();
  auto cost = [&](const Instruction& i) { return InstructionCostPs(i, d); };
  TileRef f32 = Tile(0, 128, 0, 1024, F32), bf16 = Tile(0, 128, 0, 1024, BF16);
  // tensor_tensor: max(64, 2N) cycles (+60 access) at 1.12 GHz; bf16 add: max(64, N).
  EXPECT_EQ(cost(TensorTensor(MUL, f32, f32, f32)), Ps((2048 + 60) / 1.12));
  EXPECT_EQ(cost(TensorTensor(ADD, bf16, bf16, bf16)), Ps((1024 + 60) / 1.12));
  EXPECT_EQ(cost(TensorTensor(ADD, Tile(0, 1, 0, 8, F32), Tile(0, 1, 0, 8, F32), Tile(0, 1, 0, 8, F32))),
            Ps((64 + 60) / 1.12));
  // activation on the scalar engine (1.4 GHz): max(64, N); reciprocal 8N.
  EXPECT_EQ(cost(Activation(EXP, f32, f32, 1, 0)), Ps((1024 + 60) / 1.4));
  EXPECT_EQ(cost(Activation(RECIPROCAL, f32, f32, 1, 0)), Ps((8 * 1024 + 60) / 1.4));
  // tensor_reduce: N, N/2 for bf16 add.
  EXPECT_EQ(cost(TensorReduce(ADD, Tile(0, 128, 0, 1, F32), f32)), Ps((1024 + 60) / 1.12));
  EXPECT_EQ(cost(TensorReduce(ADD, Tile(0, 128, 0, 1, BF16), bf16)), Ps((512 + 60) / 1.12));
  // The same instruction on gpsimd runs at its 1.4 GHz clock.
  EXPECT_EQ(cost(TensorTensor(MUL, f32, f32, f32, {}, GPSIMD)), Ps((2048 + 60) / 1.4));
}

TEST(ExecutorTiming, TensorEngineCostFormulas) {
  // [nki-isa] matmul: 64 cycles of initiation latency + max(N, 64) per
  // 2-byte input pass, 4x that for f32; plus 60 cycles of access latency; at
  // the TensorEngine's 2.8 GHz (trn1) / 2.4 GHz (trn2).
  auto mm = [](uint32_t K, uint32_t M, uint32_t N, DType dt) {
    return Matmul(Psum(0, M, 0, N), Tile(0, K, 0, M, dt), Tile(0, K, 4096, N, dt));
  };
  const DeviceParams& d = Trn1();
  EXPECT_EQ(InstructionCostPs(mm(128, 128, 512, BF16), d), Ps((64 + 512 + 60) / 2.8));
  EXPECT_EQ(InstructionCostPs(mm(128, 128, 512, F16), d), Ps((64 + 512 + 60) / 2.8));
  EXPECT_EQ(InstructionCostPs(mm(128, 128, 512, F32), d), Ps((64 + 4 * 512 + 60) / 2.8));
  EXPECT_EQ(InstructionCostPs(mm(128, 128, 512, BF16), Trn2()), Ps((64 + 512 + 60) / 2.4));
  // N below 64 still pays the 64-cycle interval; K and M do not change the cost.
  EXPECT_EQ(InstructionCostPs(mm(8, 4, 16, BF16), d), Ps((64 + 64 + 60) / 2.8));
  EXPECT_EQ(InstructionCostPs(mm(8, 4, 16, BF16), d), InstructionCostPs(mm(128, 128, 64, BF16), d));
  // f32 vs bf16 at full width: (64 + 2048 + 60) / (64 + 512 + 60) = 3.4x.
  double ratio = double(InstructionCostPs(mm(128, 128, 512, F32), d)) /
                 double(InstructionCostPs(mm(128, 128, 512, BF16), d));
  EXPECT_NEAR(ratio, 2172.0 / 636.0, 1e-3);
  // transpose = identity matmul with N = the input's partitions.
  EXPECT_EQ(InstructionCostPs(Transpose(Psum(0, 32, 0, 128), Tile(0, 128, 0, 32, BF16)), d),
            Ps((64 + 128 + 60) / 2.8));
  EXPECT_EQ(InstructionCostPs(Transpose(Psum(0, 32, 0, 128), Tile(0, 128, 0, 32, F32)), d),
            Ps((64 + 4 * 128 + 60) / 2.8));
  EXPECT_EQ(InstructionCostPs(Transpose(Psum(0, 128, 0, 16), Tile(0, 16, 0, 128, BF16)), d),
            Ps((64 + 64 + 60) / 2.8));
  // Modeled BF16 peak: 128 x 128 MACs per cycle at 2.8 GHz ~ 91.8 TFLOPS, the
  // public ~92; a full tile at its initiation interval reaches it.
  double flops = double(MatmulFlops(mm(128, 128, 512, BF16)));
  EXPECT_EQ(flops, 2.0 * 128 * 128 * 512);
  EXPECT_NEAR(flops / (512 / 2.8) * 1e-3, 91.75, 0.01);  // TFLOPS over the interval alone
  EXPECT_EQ(MatmulFlops(TensorTensor(ADD, Tile(0, 1, 0, 4, F32), Tile(0, 1, 0, 4, F32), Tile(0, 1, 0, 4, F32))), 0u);
}

TEST(ExecutorTiming, IotaSelectAndNewOpsCosts) {
  const DeviceParams& d = Trn1();
  TileRef f32 = Tile(0, 128, 0, 1000, F32);
  // [nki-isa] iota: 150 + N cycles, on gpsimd (1.4 GHz) or vector (1.12 GHz).
  EXPECT_EQ(InstructionCostPs(testing::Iota(f32, 0, 1, 1), d), Ps((150 + 1000 + 60) / 1.4));
  EXPECT_EQ(InstructionCostPs(testing::Iota(Tile(0, 1, 0, 8, F32), 0, 1, 1, {}, VECTOR), d), Ps((150 + 8 + 60) / 1.12));
  // tensor_select: ASSUMPTION max(64, 2N), like tensor_tensor.
  EXPECT_EQ(InstructionCostPs(TensorSelect(f32, f32, f32, f32), d), Ps((2000 + 60) / 1.12));
  EXPECT_EQ(InstructionCostPs(TensorSelect(Tile(0, 1, 0, 8, F32), Tile(0, 1, 0, 8, F32), Tile(0, 1, 0, 8, F32),
                                           Tile(0, 1, 0, 8, F32), {}, GPSIMD), d),
            Ps((64 + 60) / 1.4));
  // New ALU ops cost as their instruction kind; new functions as activation.
  for (AluOp op : {IS_EQUAL, NOT_EQUAL, IS_LT, IS_LE, IS_GT, IS_GE, POW}) {
    EXPECT_EQ(InstructionCostPs(TensorTensor(op, f32, f32, f32), d), InstructionCostPs(TensorTensor(MUL, f32, f32, f32), d));
    EXPECT_EQ(InstructionCostPs(TensorScalar(op, f32, f32, 1), d), Ps((1000 + 60) / 1.12));
  }
  for (ActivationFunc f : {LOG, TANH, SIGMOID, RELU, GELU, GELU_TANH, SILU, ABS})
    EXPECT_EQ(InstructionCostPs(Activation(f, f32, f32, 1, 0), d), Ps((1000 + 60) / 1.4)) << ActivationFunc_Name(f);
  // tensor_tensor with one PSUM input: max(64, N) instead of max(64, 2N).
  TileRef ps = Psum(0, 128, 0, 1000);
  EXPECT_EQ(InstructionCostPs(TensorTensor(MUL, f32, ps, f32), d), Ps((1000 + 60) / 1.12));
  EXPECT_EQ(InstructionCostPs(TensorTensor(MUL, f32, f32, ps), d), Ps((1000 + 60) / 1.12));
  EXPECT_EQ(InstructionCostPs(TensorTensor(MUL, f32, ps, ps), d), Ps((2000 + 60) / 1.12));
}

Instruction Load(const TileRef& t, const AccessPattern& ap) { return DmaLoad(t, ap, 0); }

TEST(ExecutorTiming, DmaRunsCountContiguousPieces) {
  TileRef t = Tile(0, 4, 0, 512, BF16);
  // Row-contiguous: one run per partition.
  EXPECT_EQ(DmaRuns(Load(t, Ap(0, 0, {{512, 4}, {1, 512}}))), 4u);
  // Outer dims that continue the run merge into it; count-1 dims are ignored.
  EXPECT_EQ(DmaRuns(Load(t, Ap(0, 0, {{512, 4}, {64, 8}, {1, 64}}))), 4u);
  EXPECT_EQ(DmaRuns(Load(t, Ap(0, 0, {{512, 4}, {64, 8}, {7, 1}, {1, 64}}))), 4u);
  // A gap between blocks: 8 runs of 64 per partition.
  EXPECT_EQ(DmaRuns(Load(t, Ap(0, 0, {{1024, 4}, {128, 8}, {1, 64}}))), 32u);
  // Stride-0 partition broadcast still needs a descriptor per partition.
  EXPECT_EQ(DmaRuns(Load(t, Ap(0, 0, {{0, 4}, {1, 512}}))), 4u);
  // Inner stride != 1 (a transposed load, a free-dim broadcast, a reversed
  // copy): every element is its own run.
  EXPECT_EQ(DmaRuns(Load(t, Ap(0, 0, {{1, 4}, {4, 512}}))), 4u * 512);
  EXPECT_EQ(DmaRuns(Load(t, Ap(0, 0, {{1, 4}, {0, 512}}))), 4u * 512);
  EXPECT_EQ(DmaRuns(Load(t, Ap(0, 511, {{512, 4}, {-1, 512}}))), 4u * 512);
  EXPECT_EQ(DmaRuns(Load(t, Ap(0, 0, {{512, 4}, {1, 8}, {8, 64}}))), 4u * 512);
  // A single-element row is one run.
  EXPECT_EQ(DmaRuns(Load(Tile(0, 4, 0, 1, F32), Ap(0, 0, {{1, 4}, {1, 1}}))), 4u);
  // Two partition dims: still runs per partition, the second dim not a free one.
  neff::AccessPattern planes = Ap(0, 0, {{4096, 2}, {512, 2}, {1, 512}});
  planes.set_partition_dims(2);
  EXPECT_EQ(DmaRuns(Load(t, planes)), 4u);
  planes = Ap(0, 0, {{8192, 2}, {1024, 2}, {128, 8}, {1, 64}});
  planes.set_partition_dims(2);
  EXPECT_EQ(DmaRuns(Load(t, planes)), 32u);
}

TEST(ExecutorTiming, StridedDmaIsSlowerThanContiguous) {
  // trn1: 2 us + max(bytes / 25.6 GB/s, runs x 20 ns).
  const DeviceParams& d = Trn1();
  const double per_queue = std::min(27.0, 820.0 / 2 / 16);
  EXPECT_EQ(d.dma_run_ns, 20.0);
  // RMSNorm's 4 x 512 bf16 rows: bandwidth-bound, the cost it always had.
  TileRef rows = Tile(0, 4, 0, 512, BF16);
  uint64_t contiguous = InstructionCostPs(Load(rows, Ap(0, 0, {{512, 4}, {1, 512}})), d);
  EXPECT_EQ(contiguous, Ps(2000.0 + 4096 / per_queue));
  // The same bytes loaded transposed ([512, 4] in HBM): one run per element.
  uint64_t transposed = InstructionCostPs(Load(rows, Ap(0, 0, {{1, 4}, {4, 512}})), d);
  EXPECT_EQ(transposed, Ps(2000.0 + 2048 * 20.0));
  EXPECT_GT(transposed, 10 * contiguous);
  // 128 x 512 bf16 (1 KiB rows): bandwidth-bound, 128 KiB / 25.6 GB/s = 5.12 us
  // > 128 x 20 ns; transposed, 65536 runs.
  TileRef wide = Tile(0, 128, 0, 512, BF16);
  EXPECT_EQ(InstructionCostPs(Load(wide, Ap(0, 0, {{512, 128}, {1, 512}})), d), Ps(2000.0 + 131072 / per_queue));
  EXPECT_EQ(InstructionCostPs(Load(wide, Ap(0, 0, {{1, 128}, {128, 512}})), d), Ps(2000.0 + 65536 * 20.0));
  // Rows under 512 B are descriptor-bound: 128 x 128 bf16 (256 B rows) is
  // 128 runs x 20 ns = 2.56 us, more than its 1.28 us of bandwidth time.
  TileRef sq = Tile(0, 128, 0, 128, BF16);
  EXPECT_EQ(InstructionCostPs(Load(sq, Ap(0, 0, {{128, 128}, {1, 128}})), d), Ps(2000.0 + 128 * 20.0));
  EXPECT_EQ(InstructionCostPs(Load(sq, Ap(0, 0, {{1, 128}, {128, 128}})), d), Ps(2000.0 + 16384 * 20.0));
  // In a schedule, the strided load delays its consumer accordingly.
  Executable exe = EmptyExecutable("dma_layout");
  uint32_t x = AddTensor(&exe, "x", INPUT, BF16, {512, 4});
  Kernel* k = exe.add_kernels();
  k->set_name("k");
  *k->add_instructions() = DmaLoad(rows, Ap(x, 0, {{1, 4}, {4, 512}}), 0);
  *k->add_instructions() = TensorScalar(MUL, Tile(0, 4, 2048, 512, BF16), rows, 2.0f, {W(kDma0, 1)});
  auto sched = rt::ScheduleKernel(exe.kernels(0), d);
  ASSERT_TRUE(sched.ok());
  EXPECT_EQ(Find(*sched, 1).start, transposed);
}

TEST(ExecutorTiming, MatmulChainOverlapsWithTheVectorEngine) {
  // MatmulModel: transposes and matmuls on the tensor queue interleave with
  // the vector engine's PSUM copies as the waits allow.
  Executable exe = MatmulModel(64, 256, 512, BF16, 2);
  auto sched = rt::ScheduleKernel(exe.kernels(0), Trn1());
  ASSERT_TRUE(sched.ok());
  const Kernel& k = exe.kernels(0);
  // Instructions: 0 load x, 1-2 load w, 3-4 transpose, 5-6 copy, 7-8 matmul, 9 copy, 10 store.
  EXPECT_EQ(Find(*sched, 3).start, Find(*sched, 0).end);
  EXPECT_EQ(Find(*sched, 4).start, Find(*sched, 3).end);       // the tensor queue is in order
  EXPECT_EQ(Find(*sched, 5).start, Find(*sched, 3).end);       // copy 0 overlaps transpose 1
  EXPECT_GE(Find(*sched, 7).start, Find(*sched, 5).end);
  EXPECT_EQ(Find(*sched, 8).end - Find(*sched, 8).start, InstructionCostPs(k.instructions(8), Trn1()));
  EXPECT_EQ(Find(*sched, 9).start, Find(*sched, 8).end);
  EXPECT_EQ(sched->makespan_ps, Find(*sched, 10).end);
}

Executable ComputeOnly(std::vector<Instruction> insts) {
  Executable exe = EmptyExecutable("compute");
  Kernel* k = exe.add_kernels();
  k->set_name("k");
  for (Instruction& i : insts) *k->add_instructions() = i;
  return exe;
}

TEST(ExecutorTiming, EnginesOverlapAndQueuesAreInOrder) {
  TileRef t = Tile(0, 128, 0, 512, F32), u = Tile(0, 128, 4096, 512, F32);
  Instruction v1 = TensorTensor(ADD, t, t, t);
  Instruction s1 = Activation(EXP, u, u, 1, 0);
  Instruction v2 = TensorTensor(MUL, t, t, t);
  auto sched = rt::ScheduleKernel(ComputeOnly({v1, s1, v2}).kernels(0), Trn1());
  ASSERT_TRUE(sched.ok());
  uint64_t cv = InstructionCostPs(v1, Trn1()), cs = InstructionCostPs(s1, Trn1());
  EXPECT_EQ(Find(*sched, 0).start, 0u);
  EXPECT_EQ(Find(*sched, 1).start, 0u);  // scalar runs concurrently with vector
  EXPECT_EQ(Find(*sched, 2).start, cv);  // vector's second waits for its first
  EXPECT_EQ(sched->makespan_ps, std::max(cs, cv + InstructionCostPs(v2, Trn1())));
  // Ties at t=0 go to the lower queue index: vector (1) before scalar (2).
  EXPECT_EQ(sched->order[0].instruction, 0u);
  EXPECT_EQ(sched->order[1].instruction, 1u);
}

TEST(ExecutorTiming, WaitsDelayUntilTheSemaphoreCount) {
  TileRef t = Tile(0, 128, 0, 512, F32), u = Tile(0, 128, 4096, 512, F32);
  Instruction v1 = TensorTensor(ADD, t, t, t);
  Instruction v2 = TensorTensor(MUL, t, t, t);
  Instruction s1 = Activation(EXP, u, t, 1, 0, {W(kVectorQ, 2)});  // after both vector ops
  Instruction g1 = TensorScalar(ADD, u, u, 1.0f, {W(kScalarQ, 1)}, GPSIMD);
  auto sched = rt::ScheduleKernel(ComputeOnly({v1, v2, s1, g1}).kernels(0), Trn1());
  ASSERT_TRUE(sched.ok());
  uint64_t v_end = Find(*sched, 1).end;
  EXPECT_EQ(v_end, InstructionCostPs(v1, Trn1()) + InstructionCostPs(v2, Trn1()));
  EXPECT_EQ(Find(*sched, 2).start, v_end);
  EXPECT_EQ(Find(*sched, 3).start, Find(*sched, 2).end);
  EXPECT_EQ(Find(*sched, 3).end, sched->makespan_ps);
  // Simulated start order never goes back in time.
  for (size_t i = 1; i < sched->order.size(); ++i)
    EXPECT_LE(sched->order[i - 1].start, sched->order[i].start);
}

TEST(ExecutorTiming, LaunchOverheadIsCountedOncePerKernel) {
  Result r = RunExe(TwoKernelModel(4, 16), {std::string(256, '\0'), std::string(256, '\0')});
  ASSERT_EQ(r.schedules.size(), 2u);
  uint64_t overhead = Ps(Trn1().dispatch_overhead_ns);
  EXPECT_GT(overhead, 0u);
  for (const DispatchSchedule& s : r.schedules) {
    EXPECT_EQ(s.launch_overhead_ps, overhead);
    EXPECT_EQ(s.device_time_ps(), overhead + s.makespan_ps);
  }
  EXPECT_EQ(r.stats.kernel_count, 2u);
  EXPECT_EQ(r.stats.launch_overhead_ps, 2 * overhead);
  EXPECT_EQ(r.stats.device_time_ps, 2 * overhead + r.schedules[0].makespan_ps + r.schedules[1].makespan_ps);
  // An empty kernel still pays the launch.
  auto empty = rt::ScheduleKernel(Kernel(), Trn1());
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->device_time_ps(), overhead);
}

TEST(ExecutorTiming, TimingDoesNotDependOnData) {
  Executable exe = TwoKernelModel(4, 16);
  Result a = RunExe(exe, {std::string(256, '\0'), std::string(256, '\0')});
  Result b = RunExe(exe, {std::string(256, '\x41'), std::string(256, '\x7f')});
  EXPECT_EQ(a.stats.device_time_ps, b.stats.device_time_ps);
}

}  // namespace
}  // namespace neuroncc
