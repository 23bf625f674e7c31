// DMA_GATHER (embedding lookups) in the executor: rows for every table and
// index dtype, row strides wider than the row, multi-dim free patterns,
// partial partitions and index offsets; the execution error for an index
// that is out of range or not an integer (and that the failing gather writes
// nothing); the cost formula and the HBM accounting. Also built with ASan +
// UBSan (runtime_asan_tests), where the executor is instrumented too: a read
// outside the caller's table would be caught there.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "device_model.h"
#include "executor.h"
#include "float_convert.h"
#include "neff_format.h"
#include "test_neffs.h"

namespace neuroncc {
namespace {

using namespace neff;
using namespace testing;

constexpr uint32_t kDma0 = 4;

struct GatherRun {
  absl::Status status;
  std::vector<std::string> outputs;
  rt::ExecutionStats stats;
  std::vector<rt::DispatchSchedule> schedules;
};

// Serializes and parses `exe` (so the verifier sees it), executes it once per
// entry of `runs` (each a full set of graph inputs) on one executor, and
// returns every run. Outputs start as 0xAB bytes.
std::vector<GatherRun> RunAll(const Executable& exe, const std::vector<std::vector<std::string>>& runs) {
  std::vector<GatherRun> out;
  absl::StatusOr<Neff> neff = ParseNeff(Serialize(exe));
  EXPECT_TRUE(neff.ok()) << neff.status();
  if (!neff.ok()) return out;
  auto ex = rt::Executor::Create(*neff, *DeviceForTarget(exe.target()));
  EXPECT_TRUE(ex.ok()) << ex.status();
  if (!ex.ok()) return out;
  for (const std::vector<std::string>& inputs : runs) {
    GatherRun r;
    std::vector<const void*> in;
    for (const std::string& s : inputs) in.push_back(s.data());
    std::vector<void*> outs;
    for (uint32_t id : exe.graph_outputs())
      r.outputs.emplace_back(exe.tensors(int(id)).size_bytes(), '\xab');
    for (std::string& s : r.outputs) outs.push_back(s.data());
    r.status = (*ex)->Run(in, outs);
    r.stats = (*ex)->stats();
    r.schedules = (*ex)->schedules();
    out.push_back(std::move(r));
  }
  return out;
}

GatherRun RunOnce(const Executable& exe, const std::vector<std::string>& inputs) {
  std::vector<GatherRun> r = RunAll(exe, {inputs});
  return r.empty() ? GatherRun{absl::InternalError("did not run"), {}, {}, {}} : r[0];
}

template <typename T>
std::string Raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// Indices stored in `dt`: integers as themselves, floats rounded to the
// float dtype (the tests use values every float dtype holds exactly, plus
// deliberately bad ones).
std::string Indices(DType dt, const std::vector<double>& v) {
  std::string s;
  for (double x : v) {
    switch (dt) {
      case I32: {
        int32_t i = int32_t(x);
        s.append(reinterpret_cast<const char*>(&i), 4);
        break;
      }
      case I64: {
        int64_t i = int64_t(x);
        s.append(reinterpret_cast<const char*>(&i), 8);
        break;
      }
      case F32: {
        float f = float(x);
        s.append(reinterpret_cast<const char*>(&f), 4);
        break;
      }
      case BF16: {
        uint16_t h = rt::FloatToBf16(float(x));
        s.append(reinterpret_cast<const char*>(&h), 2);
        break;
      }
      case F16: {
        uint16_t h = rt::FloatToF16(float(x));
        s.append(reinterpret_cast<const char*>(&h), 2);
        break;
      }
      default:
        ADD_FAILURE() << "no index dtype " << DTypeName(dt);
    }
  }
  return s;
}

// Distinct bytes everywhere, so a row from the wrong place cannot match.
std::string Pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    s[i] = char(x >> 24);
  }
  return s;
}

TEST(Gather, RowStrideWiderThanTheRowPartialPartitionsAndIndexOffset) {
  // table [7, 12] f32; each lookup reads 5 elements from column 2 of its row.
  // The gather fills partitions 3..6 from ids[4..7] = {6, 0, 3, 6} (a repeat);
  // the store then writes partitions 0..7, so 0..2 and 7 show the untouched
  // (zeroed) SBUF.
  const uint32_t V = 7, S = 12, D = 5;
  Executable exe = EmptyExecutable("gather");
  uint32_t table = AddTensor(&exe, "table", INPUT, F32, {V, S});
  uint32_t ids = AddTensor(&exe, "ids", INPUT, I32, {10});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, F32, {8, D});
  Kernel* k = exe.add_kernels();
  k->set_name("k");
  *k->add_instructions() = DmaGather(Tile(3, 4, 0, D, F32), Ap(table, 2, {{S, 4}, {1, D}}), ids, 4, V, 2);
  *k->add_instructions() = DmaStore(Tile(0, 8, 0, D, F32), Ap(z, 0, {{D, 8}, {1, D}}), 5, {W(kDma0 + 2, 1)});
  std::vector<float> tv(V * S);
  for (size_t i = 0; i < tv.size(); ++i) tv[i] = float(i) + 0.25f;
  std::vector<int32_t> iv = {9, 9, 9, 9, 6, 0, 3, 6, 9, 9};  // 9s: outside the bound, never read
  GatherRun r = RunOnce(exe, {Raw(tv), Raw(iv)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  std::vector<float> got(8 * D);
  std::memcpy(got.data(), r.outputs[0].data(), got.size() * 4);
  for (uint32_t p = 0; p < 8; ++p)
    for (uint32_t f = 0; f < D; ++f) {
      float want = p >= 3 && p < 7 ? tv[size_t(iv[4 + p - 3]) * S + 2 + f] : 0.0f;
      EXPECT_EQ(got[p * D + f], want) << "p=" << p << " f=" << f;
    }
}

TEST(Gather, EveryTableAndIndexDtypeWithAMultiDimFreePattern) {
  // table [9, 16]; each lookup reads elements {0,1,2, 4,5,6} of its row at
  // column 3 (dims {4, 2} x {1, 3}); P = 5 lookups, ids {8, 2, 0, 2, 5}.
  // DMA copies bytes, so the rows must match bit for bit.
  const uint32_t V = 9, S = 16, P = 5;
  const std::vector<double> idv = {8, 2, 0, 2, 5};
  for (DType td : {F32, BF16, F16}) {
    for (DType id : {I32, I64, F32, BF16, F16}) {
      SCOPED_TRACE(absl::StrCat(DTypeName(td), " table, ", DTypeName(id), " indices"));
      Executable exe = EmptyExecutable("gather");
      uint32_t table = AddTensor(&exe, "table", INPUT, td, {V, S});
      uint32_t ids = AddTensor(&exe, "ids", INPUT, id, {P});
      uint32_t z = AddTensor(&exe, "z", OUTPUT, td, {P, 6});
      Kernel* k = exe.add_kernels();
      k->set_name("k");
      TileRef t = Tile(0, P, 64, 6, td);
      *k->add_instructions() = DmaGather(t, Ap(table, 3, {{S, P}, {4, 2}, {1, 3}}), ids, 0, V, 0);
      *k->add_instructions() = DmaStore(t, Ap(z, 0, {{6, P}, {1, 6}}), 1, {W(kDma0, 1)});
      const size_t es = DTypeSize(td);
      std::string tv = Pattern(V * S * es, uint32_t(td) * 10 + uint32_t(id));
      GatherRun r = RunOnce(exe, {tv, Indices(id, idv)});
      ASSERT_TRUE(r.status.ok()) << r.status;
      for (uint32_t p = 0; p < P; ++p)
        for (uint32_t f = 0; f < 6; ++f) {
          size_t elem = size_t(idv[p]) * S + 3 + (f / 3) * 4 + f % 3;
          EXPECT_EQ(r.outputs[0].substr((p * 6 + f) * es, es), tv.substr(elem * es, es)) << p << " " << f;
        }
    }
  }
}

TEST(Gather, EmbeddingModelLooksUpEveryToken) {
  const uint32_t V = 50, D = 32, T = 128;
  std::vector<float> w(V * D);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(float(i));
  std::vector<int64_t> ids(T);
  for (uint32_t t = 0; t < T; ++t) ids[t] = int64_t((t * 7 + 3) % V);
  ids[0] = 0;
  ids[T - 1] = V - 1;  // both ends of the table
  GatherRun r = RunOnce(EmbeddingModel(V, D, T), {Raw(w), Raw(ids)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  std::vector<float> got(T * D);
  std::memcpy(got.data(), r.outputs[0].data(), got.size() * 4);
  for (uint32_t t = 0; t < T; ++t)
    for (uint32_t f = 0; f < D; ++f) ASSERT_EQ(got[t * D + f], w[size_t(ids[t]) * D + f]) << t << " " << f;
}

// One gather of 4 lookups into a [10, 3] f32 table with index_bound 8 (rows
// 8 and 9 exist but are out of bounds for the instruction), then a store.
Executable BoundedGather(DType index_dtype) {
  Executable exe = EmptyExecutable("bounded");
  uint32_t table = AddTensor(&exe, "table", INPUT, F32, {10, 3});
  uint32_t ids = AddTensor(&exe, "ids", INPUT, index_dtype, {4});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, F32, {4, 3});
  Kernel* k = exe.add_kernels();
  k->set_name("lookup");
  *k->add_instructions() = DmaGather(Tile(0, 4, 0, 3, F32), Ap(table, 0, {{3, 4}, {1, 3}}), ids, 0, 8, 3);
  *k->add_instructions() = DmaStore(Tile(0, 4, 0, 3, F32), Ap(z, 0, {{3, 4}, {1, 3}}), 0, {W(kDma0 + 3, 1)});
  return exe;
}

TEST(Gather, BadIndicesFailTheExecutionWithTheirValue) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  struct Case {
    DType dt;
    double bad;
    const char* text;  // how the message prints the value
    const char* why;
  };
  const Case cases[] = {
      {I32, -1, "row -1 ", "outside the table's rows [0, 8)"},
      {I32, 8, "row 8 ", "outside the table's rows [0, 8)"},  // a table row, but not below index_bound
      {I32, 2147483647.0, "row 2147483647 ", "outside"},
      {I64, 9, "row 9 ", "outside the table's rows [0, 8)"},
      {I64, -9.2233720368547758e18, "row -9223372036854775808 ", "outside"},
      {I64, 4.6116860184273879e18, "row 4611686018427387904 ", "outside"},
      {F32, 2.5, "row 2.5 ", "is not an integer"},
      {F32, nan, "row nan ", "is not an integer"},
      {F32, inf, "row inf ", "is not an integer"},
      {F32, -1, "row -1 ", "outside"},
      {F32, 1e30, "row 1.00000002e+30 ", "outside"},
      {BF16, 0.5, "row 0.5 ", "is not an integer"},
      {BF16, 8, "row 8 ", "outside"},
      {F16, -inf, "row -inf ", "is not an integer"},
      {F16, 100, "row 100 ", "outside"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(DTypeName(c.dt), " ", c.bad));
    GatherRun r = RunOnce(BoundedGather(c.dt), {Pattern(120, 1), Indices(c.dt, {1, 7, c.bad, 0})});
    ASSERT_FALSE(r.status.ok());
    EXPECT_TRUE(absl::IsOutOfRange(r.status)) << r.status;
    std::string msg(r.status.message());
    EXPECT_NE(msg.find("kernel 0 ('lookup') instruction 0 (dma_gather): partition 2 looks up "), std::string::npos)
        << msg;
    EXPECT_NE(msg.find(c.text), std::string::npos) << msg;
    EXPECT_NE(msg.find(absl::StrCat("(element 2 of ", DTypeName(c.dt), " index tensor 'ids')")), std::string::npos)
        << msg;
    EXPECT_NE(msg.find(c.why), std::string::npos) << msg;
    // The execution stopped there: the store never ran.
    EXPECT_EQ(r.outputs[0], std::string(48, '\xab'));
  }
}

TEST(Gather, SignedZeroAndLargestValidIndices) {
  // -0.0 is the integer 0; index_bound - 1 is the last valid row.
  std::string table = Pattern(120, 2);
  for (DType dt : {I32, I64, F32, BF16, F16}) {
    SCOPED_TRACE(DTypeName(dt));
    GatherRun r = RunOnce(BoundedGather(dt), {table, Indices(dt, {-0.0, 7, 0, 3})});
    ASSERT_TRUE(r.status.ok()) << r.status;
    const int rows[] = {0, 7, 0, 3};
    for (int p = 0; p < 4; ++p) EXPECT_EQ(r.outputs[0].substr(size_t(p) * 12, 12), table.substr(size_t(rows[p]) * 12, 12));
  }
}

TEST(Gather, AFailingGatherWritesNothing) {
  // The store reads the tile before the gather writes it (the gather waits
  // for the store), so each run outputs what the previous run gathered, and
  // the first run outputs the zeroed SBUF. A run whose gather fails at
  // partition 2 must leave partitions 0 and 1 untouched too.
  Executable exe = EmptyExecutable("war");
  uint32_t table = AddTensor(&exe, "table", INPUT, F32, {6, 4});
  uint32_t ids = AddTensor(&exe, "ids", INPUT, I64, {3});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, F32, {3, 4});
  Kernel* k = exe.add_kernels();
  k->set_name("k");
  TileRef t = Tile(0, 3, 0, 4, F32);
  *k->add_instructions() = DmaStore(t, Ap(z, 0, {{4, 3}, {1, 4}}), 0);
  *k->add_instructions() = DmaGather(t, Ap(table, 0, {{4, 3}, {1, 4}}), ids, 0, 6, 1, {W(kDma0, 1)});
  std::string tv = Pattern(96, 3);
  std::vector<GatherRun> r = RunAll(exe, {{tv, Raw(std::vector<int64_t>{5, 4, 6})},   // fails at partition 2
                                    {tv, Raw(std::vector<int64_t>{1, 2, 3})},
                                    {tv, Raw(std::vector<int64_t>{0, 0, 0})}});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(absl::IsOutOfRange(r[0].status)) << r[0].status;
  EXPECT_EQ(r[0].outputs[0], std::string(48, '\0'));  // the store ran first: zeroed SBUF
  ASSERT_TRUE(r[1].status.ok()) << r[1].status;
  EXPECT_EQ(r[1].outputs[0], std::string(48, '\0'));  // the failed gather wrote nothing
  ASSERT_TRUE(r[2].status.ok()) << r[2].status;
  EXPECT_EQ(r[2].outputs[0], tv.substr(16, 48));  // rows 1, 2, 3 from run 2
}

TEST(Gather, IndicesFromAConstantAndTheTableFromAnIntermediate) {
  // Kernel 0 copies the input table into an HBM intermediate; kernel 1
  // gathers from it with constant int32 ids.
  Executable exe = EmptyExecutable("two");
  uint32_t x = AddTensor(&exe, "x", INPUT, BF16, {4, 8});
  uint32_t mid = AddTensor(&exe, "mid", INTERMEDIATE, BF16, {4, 8});
  uint32_t ids = AddTensor(&exe, "ids", CONSTANT, I32, {3});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, BF16, {3, 8});
  exe.set_arena_bytes(64);
  Kernel* k0 = exe.add_kernels();
  k0->set_name("copy");
  *k0->add_instructions() = DmaLoad(Tile(0, 4, 0, 8, BF16), Ap(x, 0, {{8, 4}, {1, 8}}), 0);
  *k0->add_instructions() = DmaStore(Tile(0, 4, 0, 8, BF16), Ap(mid, 0, {{8, 4}, {1, 8}}), 1, {W(kDma0, 1)});
  Kernel* k1 = exe.add_kernels();
  k1->set_name("lookup");
  *k1->add_instructions() = DmaGather(Tile(0, 3, 32, 8, BF16), Ap(mid, 0, {{8, 3}, {1, 8}}), ids, 0, 4, 0);
  *k1->add_instructions() = DmaStore(Tile(0, 3, 32, 8, BF16), Ap(z, 0, {{8, 3}, {1, 8}}), 1, {W(kDma0, 1)});
  std::vector<int32_t> idv = {3, 1, 3};
  absl::StatusOr<Neff> neff = ParseNeff(Serialize(exe, {Raw(idv)}));
  ASSERT_TRUE(neff.ok()) << neff.status();
  auto ex = rt::Executor::Create(*neff, Trn1());
  ASSERT_TRUE(ex.ok());
  std::string xv = Pattern(64, 4), out(48, '\0');
  ASSERT_TRUE((*ex)->Run({xv.data()}, {out.data()}).ok());
  for (int p = 0; p < 3; ++p) EXPECT_EQ(out.substr(size_t(p) * 16, 16), xv.substr(size_t(idv[size_t(p)]) * 16, 16));
}

uint64_t Ps(double ns) { return uint64_t(std::llround(ns * 1000)); }

TEST(GatherTiming, CostIsADmaOfTheRowsEachItsOwnRunPlusTheIndexRead) {
  // trn1: 2 us + max(P*F*es / 25.6 GB/s, runs x 20 ns) + max(P*index_es / 25.6 GB/s, 20 ns).
  const DeviceParams& d = Trn1();
  const double bw = std::min(27.0, 820.0 / 2 / 16);  // 25.625 GB/s
  auto index_read = [&](double bytes) { return std::max(bytes / bw, 20.0); };
  struct Case {
    uint32_t P, F;
    DType table, index;
    double ns;
  };
  const Case cases[] = {
      // 128 rows of 2 KiB: bandwidth-bound; 1 KiB of int64 indices = 40 ns.
      {128, 512, F32, I64, 2000 + 128.0 * 512 * 4 / bw + 1024 / bw},
      // 512 B of int32 indices: 19.98 ns, so the one-run floor of 20 ns.
      {128, 512, F32, I32, 2000 + 128.0 * 512 * 4 / bw + 20},
      {128, 512, F32, BF16, 2000 + 128.0 * 512 * 4 / bw + 20},
      // 64 B rows: descriptor-bound, 128 runs x 20 ns.
      {128, 16, F32, I64, 2000 + 128 * 20.0 + 1024 / bw},
      {128, 16, F16, F32, 2000 + 128 * 20.0 + index_read(512)},
      {4, 16, BF16, I32, 2000 + 4 * 20.0 + 20},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.P, "x", c.F, " ", DTypeName(c.table), " ", DTypeName(c.index)));
    Executable exe = EmptyExecutable("cost");
    uint32_t table = AddTensor(&exe, "table", INPUT, c.table, {1000, c.F});
    uint32_t ids = AddTensor(&exe, "ids", INPUT, c.index, {c.P});
    Kernel* k = exe.add_kernels();
    k->set_name("k");
    *k->add_instructions() =
        DmaGather(Tile(0, c.P, 0, c.F, c.table), Ap(table, 0, {{c.F, c.P}, {1, c.F}}), ids, 0, 1000, 0);
    const Instruction& g = k->instructions(0);
    EXPECT_EQ(InstructionCostPs(g, d, &exe), Ps(c.ns));
    auto sched = rt::ScheduleKernel(*k, d, &exe);
    ASSERT_TRUE(sched.ok());
    EXPECT_EQ(sched->makespan_ps, Ps(c.ns));
    // Without the executable the index dtype is unknown: int64 is assumed.
    EXPECT_EQ(GatherIndexBytes(g, nullptr), uint64_t(c.P) * 8);
    EXPECT_EQ(GatherIndexBytes(g, &exe), uint64_t(c.P) * DTypeSize(c.index));
    EXPECT_EQ(DmaBytes(g), uint64_t(c.P) * c.F * DTypeSize(c.table));
    EXPECT_EQ(DmaRuns(g), c.P);
  }
  // A strided row is one run per element, per partition.
  Instruction strided = DmaGather(Tile(0, 8, 0, 64, F32), Ap(0, 0, {{128, 8}, {2, 64}}), 1, 0, 10, 0);
  EXPECT_EQ(DmaRuns(strided), 8u * 64);
  EXPECT_EQ(InstructionCostPs(strided, d), Ps(2000 + 8 * 64 * 20.0 + 20));  // 64 B of indices: one run
  // A gather of rows costs more than a load of the same contiguous bytes.
  Instruction load = DmaLoad(Tile(0, 128, 0, 16, F32), Ap(0, 0, {{16, 128}, {1, 16}}), 0);
  Instruction gather = DmaGather(Tile(0, 128, 0, 16, F32), Ap(0, 0, {{16, 128}, {1, 16}}), 1, 0, 128, 0);
  EXPECT_GT(InstructionCostPs(gather, d), InstructionCostPs(load, d));
}

TEST(GatherTiming, StatsCountRowsAndIndicesAsHbmReads) {
  const uint32_t V = 20, D = 16, T = 6;
  std::vector<float> w(V * D, 1.0f);
  for (DType id : {I64, I32}) {
    SCOPED_TRACE(DTypeName(id));
    std::string ids = Indices(id, {0, 1, 2, 3, 4, 5});
    GatherRun r = RunOnce(EmbeddingModel(V, D, T, F32, id), {Raw(w), ids});
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.stats.hbm_read_bytes, uint64_t(T) * D * 4 + T * DTypeSize(id));
    EXPECT_EQ(r.stats.hbm_write_bytes, uint64_t(T) * D * 4);
    EXPECT_EQ(r.stats.instruction_count, 2u);
  }
}

// A dma_load of an integer tensor into a float32 tile converts each value to
// the nearest float32, through a strided multi-dim pattern and partial
// partitions; then a store. Values at and past 2^24 round as PyTorch's
// .float() does; the extremes of both widths convert too.
template <typename Int>
void CheckIntegerLoad(DType dt) {
  SCOPED_TRACE(DTypeName(dt));
  // x: [3, 4, 6] integers; the load reads x[:, ::2, 1:5] transposed into a
  // [3 x (2 x 4)] tile: partition p <- x[p], free dims {2 rows of stride 12,
  // 4 columns of stride 1} from offset 1 (rows 0 and 2 of each block).
  std::vector<Int> x(3 * 4 * 6);
  for (size_t i = 0; i < x.size(); ++i) x[i] = Int(int64_t(i) * 37 - 400);
  x[1] = Int((int64_t(1) << 24) + 1);                           // rounds to even: 2^24
  x[2] = Int((int64_t(1) << 24) + 3);                           // rounds up: 2^24 + 4
  x[3] = std::numeric_limits<Int>::max();                       // 2^31 or 2^63 after rounding
  x[4] = std::numeric_limits<Int>::min();                       // exactly -2^31 or -2^63
  x[24 + 13] = Int(-1);
  Executable exe = EmptyExecutable("int_load");
  uint32_t in = AddTensor(&exe, "x", INPUT, dt, {3, 4, 6});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, F32, {3, 8});
  Kernel* k = exe.add_kernels();
  k->set_name("convert");
  *k->add_instructions() = DmaLoad(Tile(0, 3, 0, 8, F32), Ap(in, 1, {{24, 3}, {12, 2}, {1, 4}}), 2);
  *k->add_instructions() = DmaStore(Tile(0, 3, 0, 8, F32), Ap(z, 0, {{8, 3}, {1, 8}}), 0, {W(kDma0 + 2, 1)});
  GatherRun r = RunOnce(exe, {Raw(x)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  std::vector<float> got(3 * 8);
  std::memcpy(got.data(), r.outputs[0].data(), got.size() * 4);
  for (int p = 0; p < 3; ++p)
    for (int j = 0; j < 2; ++j)
      for (int c = 0; c < 4; ++c) {
        const Int v = x[size_t(1 + p * 24 + j * 12 + c)];
        ASSERT_EQ(got[size_t(p * 8 + j * 4 + c)], float(v)) << p << " " << j << " " << c;
      }
  EXPECT_EQ(got[0], 16777216.0f);
  EXPECT_EQ(got[1], 16777220.0f);
  EXPECT_EQ(got[3], -std::ldexp(1.0f, int(sizeof(Int)) * 8 - 1));
  // HBM traffic counts the integers' bytes, and so does the cost.
  EXPECT_EQ(r.stats.hbm_read_bytes, uint64_t(3) * 8 * DTypeSize(dt));
  const Instruction& load = exe.kernels(0).instructions(0);
  EXPECT_GE(InstructionCostPs(load, *DeviceForTarget("trn1"), &exe),
            InstructionCostPs(load, *DeviceForTarget("trn1")));
}

TEST(IntegerLoad, ConvertsEachValueToTheNearestFloat32) {
  CheckIntegerLoad<int32_t>(I32);
  CheckIntegerLoad<int64_t>(I64);
}

// A dma_store of a float32 tile into an integer tensor (a graph output)
// rounds toward zero; NaN becomes 0 and values past the range its extremes.
template <typename Int>
void CheckIntegerStore(DType dt) {
  SCOPED_TRACE(DTypeName(dt));
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.0f, -0.0f, 2.7f, -2.7f, 16777216.0f, -16777215.0f,
                          std::nanf(""), inf, -inf, 1e30f, -1e30f, 3.0f};
  Executable exe = EmptyExecutable("int_store");
  uint32_t in = AddTensor(&exe, "x", INPUT, F32, {2, 6});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, dt, {2, 6});
  Kernel* k = exe.add_kernels();
  k->set_name("convert");
  *k->add_instructions() = DmaLoad(Tile(0, 2, 0, 6, F32), Ap(in, 0, {{6, 2}, {1, 6}}), 0);
  *k->add_instructions() = DmaStore(Tile(0, 2, 0, 6, F32), Ap(z, 0, {{6, 2}, {1, 6}}), 1, {W(kDma0, 1)});
  GatherRun r = RunOnce(exe, {Raw(x)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  std::vector<Int> got(12);
  std::memcpy(got.data(), r.outputs[0].data(), got.size() * sizeof(Int));
  const Int hi = std::numeric_limits<Int>::max(), lo = std::numeric_limits<Int>::min();
  EXPECT_EQ(got, (std::vector<Int>{0, 0, 2, -2, 16777216, -16777215, 0, hi, lo, hi, lo, 3}));
  EXPECT_EQ(r.stats.hbm_write_bytes, uint64_t(12) * DTypeSize(dt));
}

// Bools (one byte): any nonzero byte loads as 1.0; a store writes 1 for any
// nonzero value, NaN included, as PyTorch's .bool() does.
TEST(IntegerLoad, BoolsLoadAsZeroOrOneAndStoreAsNonzero) {
  const float nan = std::nanf("");
  std::vector<uint8_t> mask = {0, 1, 7, 255, 0, 1};
  std::vector<float> x = {0.0f, -0.0f, 0.5f, -3.0f, nan, 1.0f};
  Executable exe = EmptyExecutable("bools");
  uint32_t m = AddTensor(&exe, "m", INPUT, BOOL, {2, 3});
  uint32_t in = AddTensor(&exe, "x", INPUT, F32, {2, 3});
  uint32_t zf = AddTensor(&exe, "zf", OUTPUT, F32, {2, 3});
  uint32_t zb = AddTensor(&exe, "zb", OUTPUT, BOOL, {2, 3});
  Kernel* k = exe.add_kernels();
  k->set_name("convert");
  *k->add_instructions() = DmaLoad(Tile(0, 2, 0, 3, F32), Ap(m, 0, {{3, 2}, {1, 3}}), 0);
  *k->add_instructions() = DmaLoad(Tile(0, 2, 16, 3, F32), Ap(in, 0, {{3, 2}, {1, 3}}), 1);
  *k->add_instructions() = DmaStore(Tile(0, 2, 0, 3, F32), Ap(zf, 0, {{3, 2}, {1, 3}}), 2, {W(kDma0, 1)});
  *k->add_instructions() = DmaStore(Tile(0, 2, 16, 3, F32), Ap(zb, 0, {{3, 2}, {1, 3}}), 3, {W(kDma0 + 1, 1)});
  GatherRun r = RunOnce(exe, {Raw(mask), Raw(x)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  std::vector<float> loaded(6);
  std::memcpy(loaded.data(), r.outputs[0].data(), 24);
  EXPECT_EQ(loaded, (std::vector<float>{0, 1, 1, 1, 0, 1}));
  EXPECT_EQ(r.outputs[1], std::string("\x00\x00\x01\x01\x01\x01", 6));
  EXPECT_EQ(r.stats.hbm_read_bytes, uint64_t(6) * 1 + 6 * 4);
}

TEST(IntegerStore, RoundsTowardZeroAndSaturates) {
  CheckIntegerStore<int32_t>(I32);
  CheckIntegerStore<int64_t>(I64);
}

// uint8, int8 and int16 (graph inputs and outputs): every value loads
// exactly; a store rounds toward zero and saturates (the compiler wraps the
// values into range first, as eager's arithmetic does).
template <typename Int>
void CheckNarrowIntegers(DType dt) {
  SCOPED_TRACE(DTypeName(dt));
  const Int lo = std::numeric_limits<Int>::min(), hi = std::numeric_limits<Int>::max();
  std::vector<Int> x = {lo, Int(lo + 1), Int(0), Int(1), Int(hi - 1), hi};
  std::vector<float> f = {-1e9f, -0.5f, 2.9f, 255.5f, 256.0f, std::nanf("")};
  Executable exe = EmptyExecutable("narrow");
  uint32_t in = AddTensor(&exe, "x", INPUT, dt, {2, 3});
  uint32_t fin = AddTensor(&exe, "f", INPUT, F32, {2, 3});
  uint32_t loaded = AddTensor(&exe, "loaded", OUTPUT, F32, {2, 3});
  uint32_t stored = AddTensor(&exe, "stored", OUTPUT, dt, {2, 3});
  Kernel* k = exe.add_kernels();
  k->set_name("convert");
  *k->add_instructions() = DmaLoad(Tile(0, 2, 0, 3, F32), Ap(in, 0, {{3, 2}, {1, 3}}), 0);
  *k->add_instructions() = DmaLoad(Tile(0, 2, 16, 3, F32), Ap(fin, 0, {{3, 2}, {1, 3}}), 1);
  *k->add_instructions() = DmaStore(Tile(0, 2, 0, 3, F32), Ap(loaded, 0, {{3, 2}, {1, 3}}), 2, {W(kDma0, 1)});
  *k->add_instructions() =
      DmaStore(Tile(0, 2, 16, 3, F32), Ap(stored, 0, {{3, 2}, {1, 3}}), 3, {W(kDma0 + 1, 1)});
  GatherRun r = RunOnce(exe, {Raw(x), Raw(f)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  std::vector<float> got(6);
  std::memcpy(got.data(), r.outputs[0].data(), 24);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(got[i], float(x[i])) << i;
  std::vector<Int> back(6);
  ASSERT_EQ(r.outputs[1].size(), 6 * sizeof(Int));
  std::memcpy(back.data(), r.outputs[1].data(), r.outputs[1].size());
  EXPECT_EQ(back, (std::vector<Int>{lo, Int(0), Int(2), std::min<Int>(hi, Int(std::min(255, int(hi)))),
                                    std::min<Int>(hi, Int(std::min(256, int(hi)))), Int(0)}));
  EXPECT_EQ(r.stats.hbm_read_bytes, uint64_t(6) * sizeof(Int) + 6 * 4);
}

TEST(IntegerLoad, NarrowIntegersLoadExactlyAndStoreSaturated) {
  CheckNarrowIntegers<uint8_t>(U8);
  CheckNarrowIntegers<int8_t>(I8);
  CheckNarrowIntegers<int16_t>(I16);
}

}  // namespace
}  // namespace neuroncc
