#include "passes/OffsetPlanner.h"

#include <random>

#include "gtest/gtest.h"

namespace neuroncc {
namespace {

TEST(OffsetPlanner, DisjointLifetimesShareOffsetZero) {
  std::vector<PlannedBuffer> b = {{0, 2, 100}, {2, 4, 100}, {4, 6, 100}};
  EXPECT_EQ(planOffsets(b, PlanOptions{1}).arena, 100);
  for (const PlannedBuffer& x : b) EXPECT_EQ(x.offset, 0);
  EXPECT_FALSE(verifyPlan(b, 1, 100).has_value());
}

TEST(OffsetPlanner, OverlappingLifetimesStack) {
  std::vector<PlannedBuffer> b = {{0, 3, 64}, {1, 4, 32}, {2, 5, 16}};
  int64_t peak = planOffsets(b, PlanOptions{1}).arena;
  EXPECT_EQ(peak, 112);
  EXPECT_EQ(peakLiveBytes(b), 112);
  EXPECT_FALSE(verifyPlan(b, 1, 0).has_value());
}

TEST(OffsetPlanner, AlignmentIsHonoured) {
  std::vector<PlannedBuffer> b = {{0, 2, 3}, {0, 2, 5}, {1, 3, 7}};
  planOffsets(b, PlanOptions{64}).arena;
  for (const PlannedBuffer& x : b) EXPECT_EQ(x.offset % 64, 0);
  EXPECT_FALSE(verifyPlan(b, 64, 0).has_value());
}

TEST(OffsetPlanner, HalfOpenLifetimesMayTouch) {
  // [0, 2) and [2, 4) are never live together, even though 2 is an endpoint.
  std::vector<PlannedBuffer> b = {{0, 2, 10, 0}, {2, 4, 10, 0}};
  EXPECT_FALSE(verifyPlan(b, 1, 10).has_value());
}

TEST(OffsetPlanner, VerifierFindsOverlap) {
  std::vector<PlannedBuffer> b = {{0, 3, 10, 0}, {2, 5, 10, 5}};
  auto err = verifyPlan(b, 1, 0);
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->find("overlap at bytes [5, 10)"), std::string::npos) << *err;
}

TEST(OffsetPlanner, VerifierFindsCapacityMisalignmentAndMissingOffset) {
  std::vector<PlannedBuffer> over = {{0, 1, 10, 95}};
  EXPECT_TRUE(verifyPlan(over, 1, 100).has_value());
  std::vector<PlannedBuffer> misaligned = {{0, 1, 10, 3}};
  EXPECT_TRUE(verifyPlan(misaligned, 4, 0).has_value());
  std::vector<PlannedBuffer> unplaced = {{0, 1, 10, -1}};
  EXPECT_TRUE(verifyPlan(unplaced, 1, 0).has_value());
}

// Random instances: every plan verifies and never beats the lower bound.
TEST(OffsetPlanner, RandomPlansAreValid) {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<PlannedBuffer> b;
    int n = 1 + int(rng() % 60);
    for (int i = 0; i < n; ++i) {
      int64_t start = int64_t(rng() % 100);
      int64_t len = 1 + int64_t(rng() % (trial % 2 ? 5 : 80));
      b.push_back({start, start + len, 1 + int64_t(rng() % 4096)});
    }
    int64_t lower = peakLiveBytes(b);
    int64_t peak = planOffsets(b, PlanOptions{32}).arena;
    auto err = verifyPlan(b, 32, peak);
    ASSERT_FALSE(err.has_value()) << "trial " << trial << ": " << *err;
    EXPECT_GE(peak, lower);
  }
}

}  // namespace
}  // namespace neuroncc
