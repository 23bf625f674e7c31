// The kernel-boundary bookkeeping of the dispatch model (runtime/src/
// boundary_accesses.h) against the plainest history there is: every byte's
// last writer and last accessor on every queue.
#include "boundary_accesses.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace neuroncc {
namespace {

using rt::BoundaryAccesses;
constexpr uint32_t Q = neff::kMaxQueues;

struct Range {
  uint32_t queue;
  uint64_t lo, hi;
  bool write;
};

TEST(BoundaryAccesses, MatchesAByteByByteHistory) {
  std::mt19937_64 rng(20261202);
  for (int trial = 0; trial < 300; ++trial) {
    // Small address spaces make ranges overlap in every way; a large base
    // checks that nothing assumes small addresses.
    const uint64_t base = trial % 3 == 0 ? (uint64_t(5) << 44) : 0;
    const uint64_t bytes = 1 + rng() % (trial % 2 ? 40 : 400);
    const uint32_t queues = 1 + uint32_t(rng() % Q);
    const size_t count = 1 + rng() % 120;
    std::vector<Range> ranges;
    for (size_t i = 0; i < count; ++i) {
      const uint64_t a = rng() % (bytes + 1), b = rng() % (bytes + 1);
      ranges.push_back({uint32_t(rng() % queues), base + std::min(a, b), base + std::max(a, b), rng() % 2 == 0});
    }
    BoundaryAccesses history;
    for (const Range& r : ranges) history.Declare(r.queue, r.lo, r.hi);
    history.Build();
    std::vector<std::array<uint32_t, Q>> last_write(bytes), last_access(bytes);
    for (const Range& r : ranges) {
      // Counts in any order: each byte keeps the largest.
      const uint32_t stamp = 1 + uint32_t(rng() % 1000);
      history.Record(r.queue, r.lo, r.hi, r.write, stamp);
      for (uint64_t b = r.lo - base; b < r.hi - base; ++b) {
        if (r.write) last_write[b][r.queue] = std::max(last_write[b][r.queue], stamp);
        last_access[b][r.queue] = std::max(last_access[b][r.queue], stamp);
      }
      // Queries need not be declared ranges; some reach past every range.
      for (int k = 0; k < 3; ++k) {
        const uint64_t a = rng() % (bytes + 3), b = rng() % (bytes + 3);
        const uint64_t lo = std::min(a, b), hi = std::max(a, b);
        const bool write = rng() % 2 == 0;
        BoundaryAccesses::QueueCounts need{}, want{};
        // A count already there is kept when larger.
        need[0] = want[0] = 500;
        history.Conflicts(base + lo, base + hi, write, &need);
        for (uint64_t x = lo; x < std::min(hi, bytes); ++x)
          for (uint32_t q = 0; q < Q; ++q)
            want[q] = std::max(want[q], write ? last_access[x][q] : last_write[x][q]);
        ASSERT_EQ(need, want) << "trial " << trial << ", query [" << lo << ", " << hi << ")"
                              << (write ? " write" : " read");
      }
    }
  }
}

TEST(BoundaryAccesses, NothingRecordedConflictsWithNothing) {
  BoundaryAccesses history;
  history.Declare(3, 10, 20);
  history.Build();
  BoundaryAccesses::QueueCounts need{};
  history.Conflicts(0, 100, true, &need);
  EXPECT_EQ(need, BoundaryAccesses::QueueCounts{});
  history.Record(3, 10, 20, false, 7);
  history.Conflicts(0, 100, false, &need);  // a read meets no write
  EXPECT_EQ(need, BoundaryAccesses::QueueCounts{});
  history.Conflicts(19, 25, true, &need);  // a write meets the read
  EXPECT_EQ(need[3], 7u);
  need = {};
  history.Conflicts(20, 30, true, &need);  // [10, 20) ends where this begins
  EXPECT_EQ(need, BoundaryAccesses::QueueCounts{});
}

}  // namespace
}  // namespace neuroncc
