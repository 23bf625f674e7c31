// SBUF and PSUM race detection over the semaphore protocol.
#include "race_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "device_model.h"
#include "test_neffs.h"

namespace neuroncc {
namespace {

using namespace neff;
using namespace testing;

constexpr uint32_t kVector = 1, kScalar = 2, kGpsimd = 3, kDma0 = 4;

Kernel K(std::vector<Instruction> insts) {
  Kernel k;
  k.set_name("k");
  for (Instruction& i : insts) *k.add_instructions() = i;
  return k;
}

TileRef T(uint32_t p0, uint32_t np, uint32_t off, uint32_t n = 16) { return Tile(p0, np, off, n, F32); }

TEST(SbufRaces, UnorderedWritersOfOneTileRace) {
  Kernel k = K({TensorScalar(ADD, T(0, 4, 0), T(0, 4, 256), 1.0f),
                Activation(EXP, T(0, 4, 0), T(0, 4, 512), 1, 0)});
  std::vector<SbufRace> r = FindSbufRaces(k);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].first, 0u);
  EXPECT_EQ(r[0].second, 1u);
  EXPECT_NE(r[0].description.find("no semaphore wait orders them"), std::string::npos) << r[0].description;
  EXPECT_NE(r[0].description.find("bytes [0, 64)"), std::string::npos) << r[0].description;
}

TEST(SbufRaces, AWaitOrAChainOfWaitsOrdersThem) {
  // vector writes; DMA waits for vector; scalar waits for the DMA: vector
  // happens before scalar through the chain.
  Executable exe = EmptyExecutable();
  uint32_t z = AddTensor(&exe, "z", OUTPUT, F32, {4, 16});
  Kernel k = K({TensorScalar(ADD, T(0, 4, 0), T(0, 4, 256), 1.0f),
                DmaStore(T(0, 4, 0), Ap(z, 0, {{16, 4}, {1, 16}}), 0, {W(kVector, 1)}),
                Activation(EXP, T(0, 4, 0), T(0, 4, 512), 1, 0, {W(kDma0, 1)})});
  EXPECT_TRUE(FindSbufRaces(k).empty());
  // Without the chain's first link, the vector write races with both the DMA
  // read and the scalar write (the scalar still follows the DMA).
  k.mutable_instructions(1)->clear_waits();
  std::vector<SbufRace> r = FindSbufRaces(k);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].first * 10 + r[0].second, 1u);
  EXPECT_EQ(r[1].first * 10 + r[1].second, 2u);
}

TEST(SbufRaces, WaitCountMustCoverTheConflictingInstruction) {
  // The scalar reads what vector's *second* instruction writes but waits for
  // only one vector instruction.
  Kernel k = K({TensorScalar(ADD, T(0, 4, 1024), T(0, 4, 256), 1.0f),
                TensorScalar(MUL, T(0, 4, 0), T(0, 4, 256), 2.0f),
                Activation(EXP, T(0, 4, 512), T(0, 4, 0), 1, 0, {W(kVector, 1)})});
  ASSERT_EQ(FindSbufRaces(k).size(), 1u);
  EXPECT_EQ(FindSbufRaces(k)[0].first, 1u);
  k.mutable_instructions(2)->mutable_waits(0)->set_count(2);
  EXPECT_TRUE(FindSbufRaces(k).empty());
}

TEST(SbufRaces, DisjointRegionsReadsAndOneQueueDoNotRace) {
  Kernel k = K({
      TensorScalar(ADD, T(0, 4, 0), T(0, 4, 256), 1.0f),                // vector writes p0-3 [0,64)
      Activation(EXP, T(4, 4, 0), T(0, 4, 256), 1, 0),                  // scalar: other partitions; both read [256,320)
      TensorScalar(MUL, T(0, 4, 64), T(0, 4, 256), 3.0f, {}, GPSIMD),   // gpsimd: bytes right after
      TensorScalar(MUL, T(0, 4, 0), T(0, 4, 0), 3.0f),                  // vector again: same queue as the first
  });
  EXPECT_TRUE(FindSbufRaces(k).empty());
}

TEST(SbufRaces, PerPartitionScalarsTouchOnlyElementZero) {
  // gpsimd writes element 1 of a tile whose element 0 the vector op uses as
  // its per-partition scalar: no overlap.
  Instruction ts = TensorScalar(MUL, T(0, 4, 512), T(0, 4, 256), 0);
  *ts.mutable_in1() = T(0, 4, 0, 4);
  Kernel k = K({ts, TensorScalar(ADD, T(0, 4, 4, 1), T(0, 4, 1024, 1), 1.0f, {}, GPSIMD)});
  EXPECT_TRUE(FindSbufRaces(k).empty());
  k.mutable_instructions(1)->mutable_out()->set_byte_offset(0);
  EXPECT_EQ(FindSbufRaces(k).size(), 1u);
}

TEST(SbufRaces, AnActivationWithScaleBiasAndSumHasFiveRegions) {
  // Reads in0, a per-partition scale (in1) and bias (in2); writes out and a
  // per-partition sum (accum). The footprint once held only four regions and
  // the fifth overwrote its count (a crash at load on a compiled model).
  Instruction a = Activation(EXP, T(0, 4, 512), T(0, 4, 256), 1, 0);
  *a.mutable_in1() = T(0, 4, 0, 1);
  *a.mutable_in2() = T(0, 4, 4, 1);
  *a.mutable_accum() = T(0, 4, 8, 1);
  std::vector<OnChipRegion> f = OnChipFootprint(a);
  ASSERT_EQ(f.size(), 5u);
  EXPECT_TRUE(f[4].write);
  EXPECT_EQ(f[4].b0, 8u);
  EXPECT_EQ(f[4].b1, 12u);
  // Another engine writing the sum's bytes races with the activation; writing
  // the bias's bytes races too; bytes none of the five touch do not.
  for (uint32_t offset : {8u, 4u, 1024u}) {
    Kernel k = K({a, TensorScalar(ADD, T(0, 4, offset, 1), T(0, 4, 2048, 1), 1.0f, {}, GPSIMD)});
    EXPECT_EQ(FindSbufRaces(k).size(), offset == 1024u ? 0u : 1u) << offset;
  }
}

TEST(PsumRaces, PsumAndSbufAreSeparateMemories) {
  // A PSUM tile and an SBUF tile at the same partitions and bytes do not
  // overlap: the transpose writes PSUM [0, 64) while the vector engine writes
  // SBUF [0, 64), unordered.
  Kernel k = K({Transpose(Psum(0, 4, 0, 16), T(0, 16, 1024, 4)),
                TensorScalar(ADD, T(0, 4, 0), T(0, 4, 256), 1.0f)});
  EXPECT_TRUE(FindSbufRaces(k).empty());
  // In the same memory they race.
  k.mutable_instructions(1)->mutable_in0()->set_space(PSUM);
  *k.mutable_instructions(1)->mutable_in0() = Psum(0, 4, 32, 16);
  std::vector<SbufRace> r = FindSbufRaces(k);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].description.find("touch PSUM partitions [0, 4) bytes [32, 64)"), std::string::npos)
      << r[0].description;
}

TEST(PsumRaces, ReadingAMatmulResultNeedsAWaitOnTheTensorQueue) {
  TileRef acc = Psum(0, 8, 2048, 32);
  Kernel k = K({Matmul(acc, T(0, 16, 0, 8), T(0, 16, 512, 32)),
                TensorScalar(BYPASS, T(0, 8, 4096, 32), acc, 0.0f)});
  std::vector<SbufRace> r = FindSbufRaces(k);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].description.find("matmul on tensor, writes"), std::string::npos) << r[0].description;
  EXPECT_NE(r[0].description.find("PSUM"), std::string::npos) << r[0].description;
  *k.mutable_instructions(1)->add_waits() = W(0, 1);
  EXPECT_TRUE(FindSbufRaces(k).empty());
}

TEST(PsumRaces, MatmulOperandsAndAccumulationChains) {
  TileRef acc = Psum(0, 8, 0, 32);
  // Accumulating matmuls on the one tensor queue are ordered by the queue.
  Kernel chain = K({Matmul(acc, T(0, 16, 0, 8), T(0, 16, 512, 32)),
                    Matmul(acc, T(0, 16, 0, 8), T(0, 16, 512, 32), true),
                    Matmul(acc, T(0, 16, 0, 8), T(0, 16, 512, 32), true)});
  EXPECT_TRUE(FindSbufRaces(chain).empty());
  // The matmul reads its SBUF operands: an unordered writer of in1 races.
  Kernel k = K({Matmul(acc, T(0, 16, 0, 8), T(0, 16, 512, 32)),
                Activation(EXP, T(8, 4, 600, 4), T(0, 4, 2048), 1, 0)});
  ASSERT_EQ(FindSbufRaces(k).size(), 1u);
  EXPECT_NE(FindSbufRaces(k)[0].description.find("SBUF partitions [8, 12) bytes [600, 616)"), std::string::npos)
      << FindSbufRaces(k)[0].description;
}

TEST(PsumRaces, SelectReadsItsPredicate) {
  Kernel k = K({TensorSelect(T(0, 4, 0), T(0, 4, 64), T(0, 4, 128), T(0, 4, 192)),
                Iota(T(0, 4, 192 + 60, 1), 0, 1, 1)});  // gpsimd writes the predicate's last element
  std::vector<SbufRace> r = FindSbufRaces(k);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].description.find("tensor_select on vector, reads"), std::string::npos) << r[0].description;
  EXPECT_NE(r[0].description.find("iota on gpsimd, writes"), std::string::npos) << r[0].description;
  *k.mutable_instructions(1)->add_waits() = W(kVector, 1);
  EXPECT_TRUE(FindSbufRaces(k).empty());
}

TEST(SbufRaces, AGatherWritesItsTileLikeALoad) {
  // A gather into rows 2..5 of a tile the vector engine reads; then one that
  // only touches partitions 6..7 (no overlap); then one on the same DMA queue
  // as a load of the same bytes (in order, no race).
  Instruction gather = DmaGather(T(2, 4, 128), Ap(0, 0, {{16, 4}, {1, 16}}), 1, 0, 8, 3);
  Kernel k = K({gather, TensorScalar(MUL, T(0, 8, 0), T(0, 8, 128), 2.0f)});
  std::vector<SbufRace> r = FindSbufRaces(k);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].description.find("instruction 0 (dma_gather on dma3, writes)"), std::string::npos)
      << r[0].description;
  EXPECT_NE(r[0].description.find("SBUF partitions [2, 6) bytes [128, 192)"), std::string::npos) << r[0].description;
  *k.mutable_instructions(1)->add_waits() = W(kDma0 + 3, 1);
  EXPECT_TRUE(FindSbufRaces(k).empty());
  // The reverse order: the gather overwrites what the vector engine reads
  // unless it waits for it.
  Kernel war = K({TensorScalar(MUL, T(0, 8, 0), T(0, 8, 128), 2.0f), gather});
  EXPECT_EQ(FindSbufRaces(war).size(), 1u);
  *war.mutable_instructions(1)->add_waits() = W(kVector, 1);
  EXPECT_TRUE(FindSbufRaces(war).empty());
  // Disjoint partitions, and the same queue.
  Kernel apart = K({DmaGather(T(6, 2, 128), Ap(0, 0, {{16, 2}, {1, 16}}), 1, 0, 8, 3),
                    TensorScalar(MUL, T(0, 6, 0), T(0, 6, 128), 2.0f)});
  EXPECT_TRUE(FindSbufRaces(apart).empty());
  Kernel queue = K({DmaLoad(T(2, 4, 128), Ap(0, 0, {{16, 4}, {1, 16}}), 3), gather});
  EXPECT_TRUE(FindSbufRaces(queue).empty());
}

TEST(SbufRaces, TheTestModelsAreRaceFree) {
  for (const Executable& exe : {AddModel(4, 8), TwoKernelModel(4, 16), MatmulModel(64, 256, 512, BF16, 2),
                                MatmulModel(128, 896, 64, F32, 7), CausalMaskModel(8, 8), NormModel(4, 16),
                                EmbeddingModel(50, 64, 128, BF16, I32)})
    for (const Kernel& k : exe.kernels()) EXPECT_TRUE(FindSbufRaces(k).empty()) << k.name();
}

// ---------------------------------------------------------------------------
// Differential and scale tests of the near-linear search.

// The quadratic search FindSbufRaces used before it became near-linear: a
// round-robin semaphore replay for the vector clocks, then every pair of
// instructions. Kept as the reference definition of a race.
std::vector<SbufRace> ReferenceRaces(const Kernel& k) {
  using Region = OnChipRegion;
  const size_t n = size_t(k.instructions_size());
  std::vector<SbufRace> races;
  constexpr uint32_t Q = kMaxQueues;
  std::vector<std::vector<uint32_t>> queue(Q);
  std::vector<uint32_t> qof(n), pos(n);
  for (uint32_t i = 0; i < n; ++i) {
    const Instruction& inst = k.instructions(int(i));
    qof[i] = QueueIndex(inst.engine(), inst.queue());
    pos[i] = uint32_t(queue[qof[i]].size());
    queue[qof[i]].push_back(i);
  }
  std::vector<std::array<uint32_t, Q>> seen(n);
  std::vector<size_t> next(Q, 0);
  for (size_t remaining = n; remaining > 0;) {
    bool progressed = false;
    for (uint32_t q = 0; q < Q; ++q) {
      while (next[q] < queue[q].size()) {
        uint32_t i = queue[q][next[q]];
        const Instruction& inst = k.instructions(int(i));
        bool ready = std::all_of(inst.waits().begin(), inst.waits().end(), [&](const Wait& w) {
          return w.queue() < Q && next[w.queue()] >= w.count();
        });
        if (!ready) break;
        std::array<uint32_t, Q> s{};
        if (pos[i] > 0) s = seen[queue[q][pos[i] - 1]];
        s[q] = std::max(s[q], pos[i]);
        for (const Wait& w : inst.waits()) {
          if (w.count() == 0) continue;
          const std::array<uint32_t, Q>& before = seen[queue[w.queue()][w.count() - 1]];
          for (uint32_t r = 0; r < Q; ++r) s[r] = std::max(s[r], before[r]);
          s[w.queue()] = std::max(s[w.queue()], w.count());
        }
        seen[i] = s;
        ++next[q];
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) return races;
  }
  auto ordered = [&](uint32_t a, uint32_t b) { return seen[b][qof[a]] > pos[a]; };
  std::vector<std::vector<Region>> fp(n);
  for (uint32_t i = 0; i < n; ++i) fp[i] = OnChipFootprint(k.instructions(int(i)));
  for (uint32_t a = 0; a < n; ++a)
    for (uint32_t b = a + 1; b < n; ++b) {
      if (qof[a] == qof[b] || ordered(a, b) || ordered(b, a)) continue;
      const Region *ra = nullptr, *rb = nullptr;
      for (const Region& x : fp[a])
        for (const Region& y : fp[b])
          if (!ra && (x.write || y.write) && x.space == y.space && x.p0 < y.p1 && y.p0 < x.p1 && x.b0 < y.b1 &&
              y.b0 < x.b1) {
            ra = &x;
            rb = &y;
          }
      if (!ra) continue;
      races.push_back({a, b, DescribeRace(k, a, qof[a], *ra, b, qof[b], *rb)});
    }
  return races;
}

// The round-robin replay VerifyNoDeadlock used before it became
// event-driven: does every instruction issue?
bool ReferenceReplayCompletes(const Kernel& k) {
  std::vector<std::vector<const Instruction*>> queues(kMaxQueues);
  for (const Instruction& inst : k.instructions()) queues[QueueIndex(inst.engine(), inst.queue())].push_back(&inst);
  std::vector<size_t> done(kMaxQueues, 0);
  for (size_t remaining = size_t(k.instructions_size()); remaining > 0;) {
    bool progressed = false;
    for (uint32_t q = 0; q < kMaxQueues; ++q)
      while (done[q] < queues[q].size()) {
        const Instruction* inst = queues[q][done[q]];
        if (!std::all_of(inst->waits().begin(), inst->waits().end(), [&](const Wait& w) {
              return w.queue() < kMaxQueues && done[w.queue()] >= w.count();
            }))
          break;
        ++done[q];
        --remaining;
        progressed = true;
      }
    if (!progressed) return false;
  }
  return true;
}

// A random kernel over few partitions and bytes (overlaps are frequent) on a
// few queues. Instructions are generated in an issue order and each waits
// only for counts already issued, so the kernel cannot deadlock; the kernel
// then interleaves the queues randomly (program order within each queue is
// the generation order), so index order and happens-before disagree often.
// `partitions`: tiles lie in [0, partitions); `deadlocks`: also allow waits
// for counts not yet issued.
Kernel RandomKernel(uint32_t seed, uint32_t partitions = 6, bool deadlocks = false) {
  std::mt19937 rng(seed);
  auto rnd = [&](uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng); };
  const uint32_t n = rnd(1, 48);
  const std::vector<uint32_t> queues = {0, kVector, kScalar, kGpsimd, kDma0, kDma0 + 1};
  auto tile = [&](bool psum_ok) {
    uint32_t p0 = rnd(0, partitions - 1), np = rnd(1, partitions - p0);
    if (psum_ok && rnd(0, 3) == 0) return Psum(p0, np, 4 * rnd(0, 15), rnd(1, 8));
    if (rnd(0, 3) == 0) return Tile(p0, np, 2 * rnd(0, 31), rnd(1, 12), BF16);
    return Tile(p0, np, 4 * rnd(0, 15), rnd(1, 8), F32);
  };
  const AccessPattern hbm = Ap(0, 0, {{1, 1}});
  std::vector<std::vector<Instruction>> per_queue(kMaxQueues);
  std::vector<uint32_t> issued(kMaxQueues, 0);
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t q = queues[rnd(0, uint32_t(queues.size()) - 1)];
    std::vector<Wait> waits;
    for (uint32_t w = rnd(0, 2); w > 0; --w) {
      const uint32_t r = queues[rnd(0, uint32_t(queues.size()) - 1)];
      uint32_t count = rnd(0, 2) == 0 ? issued[r] : rnd(0, issued[r]);
      if (deadlocks && rnd(0, 9) == 0) count = issued[r] + rnd(1, 2);
      waits.push_back(W(deadlocks && rnd(0, 99) == 0 ? kMaxQueues + 1 : r, count));
    }
    Instruction inst;
    if (q == 0) {
      inst = rnd(0, 2) == 0 ? Transpose(Psum(0, rnd(1, partitions), 4 * rnd(0, 15), rnd(1, 8)), tile(false), waits)
                            : Matmul(tile(true), tile(false), tile(false), rnd(0, 1) == 1, waits);
      if (inst.opcode() == MATMUL) inst.mutable_out()->set_space(PSUM);
    } else if (q == kVector || q == kGpsimd) {
      const Engine e = q == kVector ? VECTOR : GPSIMD;
      switch (rnd(0, 4)) {
        case 0: inst = TensorTensor(ADD, tile(false), tile(true), tile(true), waits, e); break;
        case 1:
          inst = TensorScalar(MUL, tile(false), tile(true), 2.0f, waits, e);
          if (rnd(0, 1)) *inst.mutable_in1() = tile(true);
          break;
        case 2: inst = TensorReduce(ADD, tile(false), tile(true), waits, e); break;
        case 3: inst = TensorSelect(tile(false), tile(true), tile(true), tile(true), waits, e); break;
        default: inst = Iota(tile(false), 0, 1, 1, waits, e); break;
      }
    } else if (q == kScalar) {
      inst = Activation(EXP, tile(false), tile(true), 1, 0, waits);
      if (rnd(0, 2) == 0) *inst.mutable_in1() = tile(true);
      if (rnd(0, 2) == 0) *inst.mutable_accum() = tile(false);
    } else {
      const uint32_t dq = q - kDma0;
      switch (rnd(0, 2)) {
        case 0: inst = DmaLoad(tile(false), hbm, dq, waits); break;
        case 1: inst = DmaStore(tile(true), hbm, dq, waits); break;
        default: inst = DmaGather(tile(false), hbm, 1, 0, 8, dq, waits); break;
      }
    }
    per_queue[q].push_back(inst);
    ++issued[q];
  }
  // Interleave the queues, keeping each queue's order.
  std::vector<uint32_t> slots;
  for (uint32_t q = 0; q < kMaxQueues; ++q) slots.insert(slots.end(), per_queue[q].size(), q);
  std::shuffle(slots.begin(), slots.end(), rng);
  std::vector<Instruction> insts;
  std::vector<size_t> taken(kMaxQueues, 0);
  for (uint32_t q : slots) insts.push_back(per_queue[q][taken[q]++]);
  return K(insts);
}

std::vector<std::tuple<uint32_t, uint32_t, std::string>> Pairs(const std::vector<SbufRace>& races) {
  std::vector<std::tuple<uint32_t, uint32_t, std::string>> out;
  for (const SbufRace& r : races) out.emplace_back(r.first, r.second, r.description);
  return out;
}

TEST(SbufRaces, MatchesTheQuadraticDefinitionOnRandomKernels) {
  size_t total = 0, racy = 0;
  for (uint32_t seed = 0; seed < 4000; ++seed) {
    const Kernel k = RandomKernel(seed, seed % 4 == 3 ? 40 : 6);
    const std::vector<SbufRace> want = ReferenceRaces(k);
    const std::vector<SbufRace> got = FindSbufRaces(k, size_t(-1));
    ASSERT_EQ(Pairs(got), Pairs(want)) << "seed " << seed;
    total += want.size();
    racy += !want.empty();
    // A limit keeps a sorted subset of the races, as many as it allows.
    for (size_t limit : {size_t(1), size_t(2), size_t(5)}) {
      const std::vector<SbufRace> some = FindSbufRaces(k, limit);
      ASSERT_EQ(some.size(), std::min(limit, want.size())) << "seed " << seed;
      for (size_t i = 0; i < some.size(); ++i) {
        ASSERT_TRUE(std::find_if(want.begin(), want.end(), [&](const SbufRace& r) {
                      return r.first == some[i].first && r.second == some[i].second &&
                             r.description == some[i].description;
                    }) != want.end())
            << "seed " << seed;
        if (i > 0) ASSERT_LT(std::make_pair(some[i - 1].first, some[i - 1].second),
                             std::make_pair(some[i].first, some[i].second));
      }
    }
  }
  // The generator must exercise both outcomes.
  EXPECT_GT(racy, 1000u);
  EXPECT_LT(racy, 3900u);
  EXPECT_GT(total, 10000u);
}

TEST(SbufRaces, TheReplayDeadlocksExactlyWhenTheRoundRobinOneDoes) {
  size_t deadlocked = 0;
  for (uint32_t seed = 0; seed < 1000; ++seed) {
    const Kernel k = RandomKernel(seed, 6, /*deadlocks=*/true);
    std::vector<uint32_t> order;
    const bool ok = SemaphoreReplayOrder(k, &order);
    ASSERT_EQ(ok, ReferenceReplayCompletes(k)) << "seed " << seed;
    // The reference replay agrees on which kernels complete (and then on races).
    ASSERT_EQ(Pairs(FindSbufRaces(k, size_t(-1))), Pairs(ReferenceRaces(k))) << "seed " << seed;
    if (!ok) {
      ++deadlocked;
      EXPECT_TRUE(FindSbufRaces(k).empty());
      continue;
    }
    // A complete replay is a permutation in which every instruction follows
    // its queue predecessor and the instructions its waits name.
    ASSERT_EQ(order.size(), size_t(k.instructions_size()));
    std::vector<uint32_t> at(order.size());
    for (uint32_t i = 0; i < order.size(); ++i) at[order[i]] = i;
    std::vector<std::vector<uint32_t>> queue(kMaxQueues);
    for (uint32_t i = 0; i < uint32_t(k.instructions_size()); ++i)
      queue[QueueIndex(k.instructions(int(i)).engine(), k.instructions(int(i)).queue())].push_back(i);
    for (const auto& q : queue)
      for (size_t j = 1; j < q.size(); ++j) ASSERT_LT(at[q[j - 1]], at[q[j]]);
    for (uint32_t i = 0; i < uint32_t(k.instructions_size()); ++i)
      for (const Wait& w : k.instructions(int(i)).waits())
        if (w.count() > 0) ASSERT_LT(at[queue[w.queue()][w.count() - 1]], at[i]) << "seed " << seed;
  }
  EXPECT_GT(deadlocked, 50u);
  EXPECT_LT(deadlocked, 950u);
}

TEST(SbufRaces, EmptyTilesTouchNothing) {
  // A tile of no partitions (or no elements) lies "inside" another's
  // partition (or byte) range but touches no byte of it. The verifier refuses
  // such tiles; the check must not report them either.
  Kernel k = K({TensorScalar(ADD, T(0, 8, 0), T(0, 8, 256), 1.0f),
                Activation(EXP, T(4, 0, 0), T(0, 8, 512), 1, 0)});
  EXPECT_TRUE(FindSbufRaces(k).empty());
  *k.mutable_instructions(1)->mutable_out() = T(0, 8, 16, 0);
  EXPECT_TRUE(FindSbufRaces(k).empty());
  *k.mutable_instructions(1)->mutable_out() = T(0, 8, 16, 1);
  EXPECT_EQ(FindSbufRaces(k).size(), 1u);
}

// Load -> compute -> store chains on `slots` rotating tile pairs, as a
// production kernel streams tiles: chain j loads A[j % slots] on dma(j % 4),
// computes B = f(A) on vector or scalar (alternately) and stores B on
// dma(4 + j % 4). A load waits for the store that last read its slot's chain;
// the compute waits for its load and for that store (it overwrites B); the
// store waits for the compute. `unsynchronized`: the chain whose compute does
// not wait for its load.
Kernel ChainKernel(uint32_t chains, int64_t unsynchronized = -1) {
  constexpr uint32_t kSlots = 8;
  std::vector<Instruction> insts;
  insts.reserve(size_t(chains) * 3);
  std::vector<uint32_t> issued(kMaxQueues, 0);
  std::vector<Wait> store_done(kSlots);  // the last store of each slot
  std::vector<bool> stored(kSlots, false);
  const AccessPattern hbm = Ap(0, 0, {{1, 1}});
  for (uint32_t j = 0; j < chains; ++j) {
    const uint32_t s = j % kSlots;
    const TileRef a = T(0, 128, s * 2048, 128);
    const TileRef b = T(s % 2 ? 64 : 0, 64, 32768 + s * 1024, 128);
    std::vector<Wait> after_store;
    if (stored[s]) after_store.push_back(store_done[s]);
    const uint32_t lq = j % 4, cq = j % 2 ? kScalar : kVector, sq = 4 + j % 4;
    insts.push_back(DmaLoad(a, hbm, lq, after_store));
    const Wait loaded = W(kDma0 + lq, ++issued[kDma0 + lq]);
    std::vector<Wait> compute_waits = after_store;
    if (int64_t(j) != unsynchronized) compute_waits.push_back(loaded);
    insts.push_back(cq == kVector ? TensorScalar(MUL, b, a, 2.0f, compute_waits)
                                  : Activation(EXP, b, a, 1, 0, compute_waits));
    const Wait computed = W(cq, ++issued[cq]);
    insts.push_back(DmaStore(b, hbm, sq, {computed}));
    store_done[s] = W(kDma0 + sq, ++issued[kDma0 + sq]);
    stored[s] = true;
  }
  return K(insts);
}

TEST(SbufRaces, LargeKernelsAreChecked) {
  // ~200k instructions: well beyond what a quadratic search could check.
  const uint32_t chains = 200000 / 3;
  const Kernel k = ChainKernel(chains);
  ASSERT_GT(k.instructions_size(), 199000);
  std::vector<uint32_t> order;
  EXPECT_TRUE(SemaphoreReplayOrder(k, &order));
  EXPECT_TRUE(FindSbufRaces(k).empty());
  // One missing wait, in the middle: exactly one race, its load and compute.
  const uint32_t j = chains / 2 + 1;
  const Kernel racy = ChainKernel(chains, j);
  std::vector<SbufRace> r = FindSbufRaces(racy, 100);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].first, 3 * j);
  EXPECT_EQ(r[0].second, 3 * j + 1);
  EXPECT_NE(r[0].description.find(absl::StrCat("instruction ", 3 * j, " (dma_load on dma", j % 4,
                                                ", writes) and instruction ", 3 * j + 1, " (",
                                                j % 2 ? "activation on scalar" : "tensor_scalar on vector",
                                                ", reads) both touch SBUF partitions [0, 128) bytes [",
                                                j % 8 * 2048, ", ", j % 8 * 2048 + 512, ")")),
            std::string::npos)
      << r[0].description;
  // A small chain kernel agrees with the reference.
  for (int64_t u : {int64_t(-1), int64_t(3), int64_t(20)}) {
    const Kernel small = ChainKernel(40, u);
    EXPECT_EQ(Pairs(FindSbufRaces(small, size_t(-1))), Pairs(ReferenceRaces(small))) << u;
  }
}

// gpsimd writes cut each partition into `pieces` 4-byte segments, and
// after every write a scalar read spans all of them (ordered by waits both
// ways: race-free): every read revisits every segment.
Kernel FragmentingKernel(uint32_t pieces, uint32_t reads) {
  std::vector<Instruction> insts;
  uint32_t writes = 0, done = 0;
  for (uint32_t i = 0; i < reads; ++i) {
    std::vector<Wait> w;
    if (done) w.push_back(W(kScalar, done));
    insts.push_back(Iota(Tile(0, 128, (writes % pieces) * 4, 1, F32), 0, 0, 0, w, GPSIMD));
    ++writes;
    insts.push_back(Activation(IDENTITY, Tile(0, 128, pieces * 4, pieces, F32), Tile(0, 128, 0, pieces, F32), 1, 0,
                               {W(kGpsimd, writes)}));
    ++done;
  }
  return K(insts);
}

TEST(SbufRaces, WorkIsBoundedLinearlyInTheKernel) {
  // Ordinary kernels pass the bounded check with the same answer.
  Kernel ok = FragmentingKernel(16, 200);
  absl::StatusOr<std::vector<SbufRace>> checked = CheckSbufRaces(ok);
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_TRUE(checked->empty());
  ok.mutable_instructions(2)->clear_waits();  // the second write no longer waits for the first read
  checked = CheckSbufRaces(ok, 1);
  ASSERT_TRUE(checked.ok());
  ASSERT_EQ(checked->size(), 1u);
  EXPECT_EQ((*checked)[0].second, 2u);

  // 2048 pieces revisited by 6000 reads: about 10 million steps against a
  // bound of 4.2 million + 32 per instruction. Refused with a message, not
  // ground through.
  Kernel bad = FragmentingKernel(2048, 6000);
  checked = CheckSbufRaces(bad);
  ASSERT_FALSE(checked.ok());
  EXPECT_EQ(checked.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(checked.status().message().find("kernel 'k': the SBUF/PSUM race check would need more than"),
            std::string::npos)
      << checked.status();
}

}  // namespace
}  // namespace neuroncc
