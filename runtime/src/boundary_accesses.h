// The bookkeeping behind the kernel-boundary waits of a multi-kernel dispatch
// (schedule.cc): per queue, the last instruction that wrote, and the last that
// read or wrote, each byte of the dispatch's address space, queried for the
// latest one that touched any byte of a range.
//
// An interval map of per-byte histories (neff::AccessHistory) would need
// quadratic time here: a kernel whose DMAs reach across one tensor with
// strided patterns (a transpose) records thousands of overlapping ranges with
// distinct counts, cutting the bytes into thousands of pieces that every later
// range revisits. So each queue keeps a segment tree over the range ends it
// will record, declared up front: recording and querying are O(log n) each,
// whatever the overlap.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "device_model.h"

namespace neuroncc::rt {

class BoundaryAccesses {
 public:
  using QueueCounts = std::array<uint32_t, neff::kMaxQueues>;

  // First, every range [lo, hi) that queue q will Record.
  void Declare(uint32_t q, uint64_t lo, uint64_t hi);
  // Then, once, before any Record or Conflicts.
  void Build();

  // Queue q's instruction numbered `count` touched [lo, hi), a range declared
  // for q. Counts need not grow: each byte keeps the largest.
  void Record(uint32_t q, uint64_t lo, uint64_t hi, bool write, uint32_t count);

  // Raises (*need)[r], for every queue r, to the largest count r recorded on
  // any byte of [lo, hi) as a write, or, when `write`, as a read or a write.
  void Conflicts(uint64_t lo, uint64_t hi, bool write, QueueCounts* need) const;

 private:
  // A node holds, for writes and for all accesses, `all`: a count every byte
  // under it has reached, and `any`: the largest count any byte under it has.
  struct Node {
    uint32_t write_all = 0, write_any = 0, access_all = 0, access_any = 0;
  };
  struct Tree {
    std::vector<uint64_t> ends;  // sorted, distinct: leaf i is [ends[i], ends[i+1])
    size_t leaves = 0;           // a power of two >= ends.size() - 1
    std::vector<Node> nodes;     // 1-based heap order; leaf i is nodes[leaves + i]
  };
  std::array<Tree, neff::kMaxQueues> trees_;
};

}  // namespace neuroncc::rt
