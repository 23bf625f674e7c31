// SBUF and PSUM race detection over the semaphore protocol.
#include "race_check.h"

#include <gtest/gtest.h>

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
                                MatmulModel(128, 896, 64, F32, 7), CausalMaskModel(8, 8),
                                EmbeddingModel(50, 64, 128, BF16, I32)})
    for (const Kernel& k : exe.kernels()) EXPECT_TRUE(FindSbufRaces(k).empty()) << k.name();
}

}  // namespace
}  // namespace neuroncc
