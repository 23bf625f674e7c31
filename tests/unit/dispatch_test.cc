// The dispatch model: kernels launched together pay the fixed cost once, wait
// at kernel boundaries only for the memory they touch, and compute exactly
// what one-dispatch-per-kernel computes; timing-only executions model the
// same timeline and write the same profiles.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "device_model.h"
#include "executor.h"
#include "neff_format.h"
#include "ntff_format.h"
#include "profile.h"
#include "run_executable.h"
#include "test_neffs.h"

namespace neuroncc {
namespace {

using namespace neff;
using namespace testing;

constexpr uint32_t kVectorQ = 1, kDma0 = 4;

using Outcome = ExecutableRun;

Outcome Execute(const Executable& exe, const std::vector<std::string>& inputs) {
  return RunExecutable(exe, inputs);
}

std::string Floats(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * float(i % 97) - 3.0f;
  return std::string(reinterpret_cast<const char*>(v.data()), n * 4);
}

const rt::ScheduledInstruction& Find(const rt::DispatchSchedule& s, uint32_t kernel, uint32_t idx) {
  for (const auto& e : s.order)
    if (e.kernel == kernel && e.instruction == idx) return e;
  ADD_FAILURE() << "kernel " << kernel << " instruction " << idx << " not scheduled";
  return s.order.front();
}

uint64_t LaunchPs() { return uint64_t(std::llround(Trn1().dispatch_overhead_ns * 1000)); }

TEST(DispatchModel, WholeGraphPaysTheLaunchOnceAndComputesTheSame) {
  Executable per_kernel = TwoKernelModel(64, 256);
  Executable whole = per_kernel;
  whole.set_dispatch_model(DISPATCH_WHOLE_GRAPH);
  std::vector<std::string> in = {Floats(64 * 256, 0.25f), Floats(64 * 256, -0.5f)};
  Outcome a = Execute(per_kernel, in), b = Execute(whole, in);
  EXPECT_EQ(a.outputs, b.outputs);
  ASSERT_EQ(a.schedules.size(), 2u);
  ASSERT_EQ(b.schedules.size(), 1u);
  EXPECT_EQ(a.stats.dispatch_count, 2u);
  EXPECT_EQ(b.stats.dispatch_count, 1u);
  EXPECT_EQ(b.stats.kernel_count, 2u);
  EXPECT_EQ(b.stats.launch_overhead_ps, LaunchPs());
  EXPECT_EQ(b.stats.device_time_ps, LaunchPs() + b.schedules[0].makespan_ps);
  // Kernel 1 reads what kernel 0 stored: the boundary costs at least the
  // round trip, so one dispatch is never faster than the instructions allow.
  EXPECT_GE(b.schedules[0].makespan_ps, a.schedules[0].makespan_ps);
  EXPECT_LE(b.schedules[0].makespan_ps, a.schedules[0].makespan_ps + a.schedules[1].makespan_ps);
  EXPECT_EQ(b.stats.hbm_read_bytes, a.stats.hbm_read_bytes);
  const rt::DispatchSchedule& s = b.schedules[0];
  ASSERT_EQ(s.kernels.size(), 2u);
  // Kernel 0: load x, square, store t. Kernel 1: load t, load w (into the
  // SBUF bytes kernel 0's square wrote and its store read), mul, add, store.
  EXPECT_GE(Find(s, 1, 0).start, Find(s, 0, 2).end);  // read after write (HBM t)
  EXPECT_GE(Find(s, 1, 1).start, Find(s, 0, 2).end);  // write after read (SBUF)
  EXPECT_EQ(s.kernels[0].start, 0u);
  EXPECT_EQ(s.kernels[0].end, Find(s, 0, 2).end);
  EXPECT_EQ(s.kernels[1].end, s.makespan_ps);
  EXPECT_EQ(s.kernels[1].instruction_count, 5u);
}

// Kernel 0 squares x into z0; kernel 1 loads y into SBUF bytes kernel 0 never
// touches, negates it and stores z1. Nothing in kernel 1 depends on kernel 0.
Executable IndependentKernels(DispatchModel model) {
  Executable exe = EmptyExecutable("independent");
  const uint32_t P = 128, N = 512, B = N * 4;
  uint32_t x = AddTensor(&exe, "x", INPUT, F32, {P, N});
  uint32_t y = AddTensor(&exe, "y", INPUT, F32, {P, N});
  uint32_t z0 = AddTensor(&exe, "z0", OUTPUT, F32, {P, N});
  uint32_t z1 = AddTensor(&exe, "z1", OUTPUT, F32, {P, N});
  auto ap = [&](uint32_t t) { return Ap(t, 0, {{N, P}, {1, N}}); };
  Kernel* k0 = exe.add_kernels();
  k0->set_name("square");
  *k0->add_instructions() = DmaLoad(Tile(0, P, 0, N, F32), ap(x), 0);
  *k0->add_instructions() =
      TensorTensor(MUL, Tile(0, P, B, N, F32), Tile(0, P, 0, N, F32), Tile(0, P, 0, N, F32), {W(kDma0, 1)});
  *k0->add_instructions() = DmaStore(Tile(0, P, B, N, F32), ap(z0), 0, {W(kVectorQ, 1)});
  Kernel* k1 = exe.add_kernels();
  k1->set_name("negate");
  *k1->add_instructions() = DmaLoad(Tile(0, P, 2 * B, N, F32), ap(y), 1);
  *k1->add_instructions() = TensorScalar(MUL, Tile(0, P, 3 * B, N, F32), Tile(0, P, 2 * B, N, F32), -1.0f,
                                         {W(kDma0 + 1, 1)});
  *k1->add_instructions() = DmaStore(Tile(0, P, 3 * B, N, F32), ap(z1), 1, {W(kVectorQ, 1)});
  exe.set_dispatch_model(model);
  return exe;
}

TEST(DispatchModel, LoadsOfTheNextKernelOverlapThePreviousKernel) {
  std::vector<std::string> in = {Floats(128 * 512, 0.5f), Floats(128 * 512, 2.0f)};
  Outcome one = Execute(IndependentKernels(DISPATCH_WHOLE_GRAPH), in);
  Outcome two = Execute(IndependentKernels(DISPATCH_PER_KERNEL), in);
  EXPECT_EQ(one.outputs, two.outputs);
  ASSERT_EQ(one.schedules.size(), 1u);
  const rt::DispatchSchedule& s = one.schedules[0];
  EXPECT_EQ(Find(s, 1, 0).start, 0u);  // kernel 1's load runs beside kernel 0's
  // The vector engine runs kernel 0's square, then kernel 1's negate.
  EXPECT_GE(Find(s, 1, 1).start, Find(s, 0, 1).end);
  EXPECT_LT(s.makespan_ps, two.schedules[0].makespan_ps + two.schedules[1].makespan_ps);
}

TEST(DispatchModel, ArenaBytesReusedByALaterKernelWaitForEarlierReaders) {
  // Kernel 0 stores t1 and loads it back; kernel 1 stores t2 on the same
  // arena bytes, from a tile it computed without waiting for anything of
  // kernel 0. Its store must still wait for kernel 0's load of t1.
  Executable exe = EmptyExecutable("arena");
  const uint32_t P = 4, N = 64, B = N * 4;
  uint32_t x = AddTensor(&exe, "x", INPUT, F32, {P, N});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, F32, {P, N});
  uint32_t t1 = AddTensor(&exe, "t1", INTERMEDIATE, F32, {P, N});
  uint32_t t2 = AddTensor(&exe, "t2", INTERMEDIATE, F32, {P, N});
  exe.set_arena_bytes(P * B);
  auto ap = [&](uint32_t t) { return Ap(t, 0, {{N, P}, {1, N}}); };
  Kernel* k0 = exe.add_kernels();
  k0->set_name("roundtrip");
  *k0->add_instructions() = DmaLoad(Tile(0, P, 0, N, F32), ap(x), 0);
  *k0->add_instructions() = DmaStore(Tile(0, P, 0, N, F32), ap(t1), 0, {W(kDma0, 1)});
  *k0->add_instructions() = DmaLoad(Tile(0, P, B, N, F32), ap(t1), 0, {W(kDma0, 2)});
  *k0->add_instructions() = DmaStore(Tile(0, P, B, N, F32), ap(z), 0, {W(kDma0, 3)});
  Kernel* k1 = exe.add_kernels();
  k1->set_name("fill");
  *k1->add_instructions() = Iota(Tile(0, P, 2 * B, N, F32), 1.0f, 0.0f, 0.0f);
  *k1->add_instructions() = DmaStore(Tile(0, P, 2 * B, N, F32), ap(t2), 1, {W(3, 1)});
  exe.set_dispatch_model(DISPATCH_WHOLE_GRAPH);
  Outcome r = Execute(exe, {Floats(P * N, 1.0f)});
  ASSERT_EQ(r.schedules.size(), 1u);
  const rt::DispatchSchedule& s = r.schedules[0];
  EXPECT_EQ(Find(s, 1, 0).start, 0u);                  // iota: no conflict with kernel 0
  EXPECT_GE(Find(s, 1, 1).start, Find(s, 0, 2).end);   // store t2 after kernel 0 read t1
  EXPECT_EQ(r.outputs[0], Floats(P * N, 1.0f));        // z got x, not the iota
}

TEST(DispatchModel, PerSourceOpGroupsConsecutiveKernels) {
  Executable exe = TwoKernelModel(4, 16);
  *exe.add_kernels() = exe.kernels(1);
  exe.mutable_kernels(2)->set_name("again");
  exe.set_dispatch_model(DISPATCH_PER_SOURCE_OP);
  exe.mutable_kernels(1)->set_dispatch(0);
  exe.mutable_kernels(2)->set_dispatch(1);
  std::vector<KernelRange> d = Dispatches(exe);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].first, 0);
  EXPECT_EQ(d[0].count, 2);
  EXPECT_EQ(d[1].first, 2);
  EXPECT_EQ(d[1].count, 1);
  Outcome r = Execute(exe, {Floats(64, 1.0f), Floats(64, 0.5f)});
  ASSERT_EQ(r.schedules.size(), 2u);
  EXPECT_EQ(r.stats.dispatch_count, 2u);
  EXPECT_EQ(r.stats.kernel_count, 3u);
  EXPECT_EQ(r.stats.launch_overhead_ps, 2 * LaunchPs());
}

TEST(DispatchModel, VerifierRefusesBadDispatchNumbers) {
  auto refused = [](const Executable& exe, const char* why) {
    absl::Status st = VerifyExecutable(exe, 0);
    EXPECT_FALSE(st.ok()) << why;
  };
  Executable exe = TwoKernelModel(4, 16);
  exe.set_dispatch_model(DISPATCH_PER_SOURCE_OP);
  exe.mutable_kernels(1)->set_dispatch(1);
  EXPECT_TRUE(VerifyExecutable(exe, 0).ok());
  exe.mutable_kernels(1)->set_dispatch(2);
  refused(exe, "a gap in the dispatch numbers");
  exe.mutable_kernels(0)->set_dispatch(1);
  exe.mutable_kernels(1)->set_dispatch(1);
  refused(exe, "the first dispatch is not 0");
  exe = TwoKernelModel(4, 16);
  exe.set_dispatch_model(DISPATCH_WHOLE_GRAPH);
  exe.mutable_kernels(1)->set_dispatch(1);
  refused(exe, "a whole-graph NEFF numbers dispatches");
  exe = TwoKernelModel(4, 16);
  exe.set_dispatch_model(DispatchModel(7));
  refused(exe, "unknown dispatch model");
}

TEST(DispatchModel, ProfilesNestKernelsInTheirDispatch) {
  Executable exe = TwoKernelModel(8, 32);
  exe.set_dispatch_model(DISPATCH_WHOLE_GRAPH);
  absl::StatusOr<Neff> neff = ParseNeff(Serialize(exe));
  ASSERT_TRUE(neff.ok());
  auto ex = rt::Executor::Create(*neff, Trn1());
  ASSERT_TRUE(ex.ok());
  ntff::Profile p = rt::NewProfile(*neff, Trn1());
  rt::AppendExecution(*neff, (*ex)->schedules(), &p);
  rt::AppendExecution(*neff, (*ex)->schedules(), &p);
  absl::StatusOr<ntff::Profile> back = ntff::ParseNtff(ntff::SerializeNtff(p));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(p.dispatch_spans_size(), 2);
  ASSERT_EQ(p.kernel_spans_size(), 4);
  EXPECT_EQ(p.dispatch_spans(0).launch_end() - p.dispatch_spans(0).start(), LaunchPs());
  EXPECT_EQ(p.dispatch_spans(1).start(), p.dispatch_spans(0).end());
  EXPECT_EQ(p.total_ticks(), 2 * (*ex)->stats().device_time_ps);
  for (const ntff::KernelSpan& k : p.kernel_spans()) {
    const ntff::DispatchSpan& d = p.dispatch_spans(int(k.dispatch()));
    EXPECT_GE(k.start(), d.launch_end());
    EXPECT_LE(k.end(), d.end());
  }

  rt::SystemTrace trace;
  trace.AddExecution(*neff, (*ex)->schedules(), 1, 0);
  std::string json = trace.Render();
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = json.find(what); at != std::string::npos; at = json.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("\"nrta_execute_schedule\""), 1u);
  EXPECT_EQ(count("\"nc_exec_running\""), 1u);
  EXPECT_EQ(count("\"name\":\"square\""), 1u);  // one slice per kernel
  EXPECT_EQ(count("\"name\":\"fused\""), 1u);
}

// Random programs: every kernel is serialized by its own waits (each
// instruction waits for everything issued before it in the kernel), kernels
// carry no waits on each other, and tiles, arena tensors and outputs overlap
// on purpose. Run as one dispatch, the derived kernel-boundary waits must
// give exactly the results of one dispatch per kernel.
Executable RandomProgram(uint32_t seed) {
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  auto rnd = [&](uint32_t n) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return uint32_t(state % n);
  };
  Executable exe = EmptyExecutable("random");
  const uint32_t P = 4, N = 16, B = N * 4;
  std::vector<uint32_t> readable, writable;
  for (const char* name : {"x0", "x1"}) readable.push_back(AddTensor(&exe, name, INPUT, F32, {P, N}));
  for (const char* name : {"z0", "z1"}) writable.push_back(AddTensor(&exe, name, OUTPUT, F32, {P, N}));
  // Three intermediates on two arena slots: t0 and t2 share bytes.
  const uint64_t slots[3] = {0, P * B, 0};
  for (int i = 0; i < 3; ++i) {
    uint32_t t = AddTensor(&exe, "t" + std::to_string(i), INTERMEDIATE, F32, {P, N});
    exe.mutable_tensors(int(t))->set_arena_offset(slots[i]);
    writable.push_back(t);
  }
  exe.set_arena_bytes(2 * P * B);
  for (uint32_t t : writable) readable.push_back(t);
  // SBUF tiles at overlapping offsets.
  const uint32_t offsets[5] = {0, 32, 64, 128, 192};
  auto tile = [&] { return Tile(0, P, offsets[rnd(5)], N, F32); };
  auto ap = [&](uint32_t t) { return Ap(t, 0, {{N, P}, {1, N}}); };
  const uint32_t kernels = 2 + rnd(4);
  for (uint32_t k = 0; k < kernels; ++k) {
    Kernel* kernel = exe.add_kernels();
    kernel->set_name("k" + std::to_string(k));
    std::vector<uint32_t> issued(kMaxQueues, 0);
    const uint32_t count = 2 + rnd(8);
    for (uint32_t i = 0; i < count; ++i) {
      Instruction inst;
      switch (rnd(5)) {
        case 0: inst = DmaLoad(tile(), ap(readable[rnd(uint32_t(readable.size()))]), rnd(4)); break;
        case 1: inst = DmaStore(tile(), ap(writable[rnd(uint32_t(writable.size()))]), rnd(4)); break;
        case 2: inst = TensorTensor(ADD, tile(), tile(), tile()); break;
        case 3: inst = TensorScalar(MUL, tile(), tile(), 0.5f + float(rnd(4)), {}, rnd(2) ? VECTOR : GPSIMD); break;
        default: inst = Activation(IDENTITY, tile(), tile(), 2.0f, 1.0f); break;
      }
      const uint32_t q = QueueIndex(inst.engine(), inst.queue());
      for (uint32_t r = 0; r < kMaxQueues; ++r)
        if (r != q && issued[r] > 0) *inst.add_waits() = W(r, issued[r]);
      ++issued[q];
      *kernel->add_instructions() = inst;
    }
  }
  return exe;
}

TEST(DispatchModel, RandomProgramsComputeWhatOneDispatchPerKernelComputes) {
  size_t overlapped = 0;
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    Executable per_kernel = RandomProgram(seed);
    Executable whole = per_kernel;
    whole.set_dispatch_model(DISPATCH_WHOLE_GRAPH);
    std::vector<std::string> in = {Floats(64, 0.25f + float(seed % 7)), Floats(64, -1.5f)};
    Outcome a = Execute(per_kernel, in), b = Execute(whole, in);
    ASSERT_EQ(a.outputs, b.outputs) << "seed " << seed;
    ASSERT_EQ(b.schedules.size(), 1u);
    uint64_t serial = 0;
    for (const rt::DispatchSchedule& s : a.schedules) serial += s.makespan_ps;
    EXPECT_LE(b.schedules[0].makespan_ps, serial) << "seed " << seed;
    overlapped += b.schedules[0].makespan_ps < serial;
  }
  EXPECT_GT(overlapped, 0u);  // independent work of adjacent kernels does overlap
}

}  // namespace
}  // namespace neuroncc
