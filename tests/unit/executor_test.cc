// The executor's numerics (every opcode, dtype rounding, access patterns,
// partial partitions, overlapping tiles) and its timing model (engine
// overlap, waits, cost formulas, launch overhead).
#include "executor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "float_convert.h"
#include "test_neffs.h"

namespace neuroncc {
namespace {

using namespace neff;
using namespace testing;
using rt::KernelSchedule;

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

struct Result {
  std::vector<std::string> outputs;
  rt::ExecutionStats stats;
  std::vector<KernelSchedule> schedules;
};

// Serializes, parses (so the verifier sees every test program), executes.
// `outputs_init` optionally pre-fills the output buffers.
Result RunExe(const Executable& exe, const std::vector<std::string>& inputs,
              const std::vector<std::string>& segments = {},
              const std::vector<std::string>& outputs_init = {}) {
  Result r;
  absl::StatusOr<Neff> neff = ParseNeff(Serialize(exe, segments));
  EXPECT_TRUE(neff.ok()) << neff.status();
  if (!neff.ok()) return r;
  auto ex = rt::Executor::Create(*neff, *DeviceForTarget(exe.target()));
  EXPECT_TRUE(ex.ok()) << ex.status();
  if (!ex.ok()) return r;
  std::vector<const void*> in;
  for (const std::string& s : inputs) in.push_back(s.data());
  for (int i = 0; i < exe.graph_outputs_size(); ++i) {
    const Tensor& t = exe.tensors(int(exe.graph_outputs(i)));
    r.outputs.push_back(size_t(i) < outputs_init.size() ? outputs_init[size_t(i)]
                                                       : std::string(t.size_bytes(), '\0'));
  }
  std::vector<void*> out;
  for (std::string& s : r.outputs) out.push_back(s.data());
  (*ex)->Run(in, out);
  r.stats = (*ex)->stats();
  r.schedules = (*ex)->schedules();
  return r;
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

TEST(ExecutorNumerics, ActivationFunctionsScaleBiasAndAccumulate) {
  const uint32_t P = 2, N = 8;
  std::vector<float> a = Iota(P * N, 0.25f, 0.375f);
  const float scale = 1.5f, bias = 0.125f;
  struct Case {
    ActivationFunc f;
    std::function<float(float)> ref;
  };
  std::vector<Case> cases = {
      {IDENTITY, [](float y) { return y; }},
      {EXP, [](float y) { return std::exp(y); }},
      {RSQRT, [](float y) { return 1.0f / std::sqrt(y); }},
      {SQRT, [](float y) { return std::sqrt(y); }},
      {SQUARE, [](float y) { return y * y; }},
      {NEGATE, [](float y) { return -y; }},
      {RECIPROCAL, [](float y) { return 1.0f / y; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(ActivationFunc_Name(c.f));
    // Output tile N elements, accum written into element N of the same output row.
    Executable exe = Harness(P, N, {F32}, F32, N + 1, [&](auto& in, auto& out) {
      TileRef o = out;
      o.set_num_elements(N);
      Instruction i = Activation(c.f, o, in[0], scale, bias);
      TileRef acc = out;
      acc.set_byte_offset(out.byte_offset() + N * 4);
      acc.set_num_elements(1);
      *i.mutable_accum() = acc;
      return i;
    });
    std::vector<float> got = Floats(RunExe(exe, {Bytes(a)}).outputs[0]);
    for (uint32_t p = 0; p < P; ++p) {
      float sum = 0.0f;
      for (uint32_t f = 0; f < N; ++f) {
        volatile float y = a[p * N + f] * scale;  // two roundings, as specified
        float want = c.ref(y + bias);
        EXPECT_EQ(got[p * (N + 1) + f], want) << p << "," << f;
        sum += want;
      }
      EXPECT_EQ(got[p * (N + 1) + N], sum) << "accum of partition " << p;
    }
  }
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
        acc = op == ADD ? acc + v : op == MAX ? std::max(acc, v) : std::min(acc, v);
      }
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
// Timing

uint64_t Ps(double ns) { return uint64_t(std::llround(ns * 1000)); }

const rt::ScheduledInstruction& Find(const KernelSchedule& s, uint32_t idx) {
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
  const KernelSchedule& s = r.schedules[0];
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
  for (const KernelSchedule& s : r.schedules) {
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
