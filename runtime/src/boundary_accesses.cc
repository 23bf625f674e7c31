#include "boundary_accesses.h"

#include <algorithm>

namespace neuroncc::rt {

namespace {

// Leaves [first, last] of a tree whose bytes overlap [lo, hi); false if none.
bool LeafRange(const std::vector<uint64_t>& ends, uint64_t lo, uint64_t hi, size_t* first, size_t* last) {
  if (ends.size() < 2 || lo >= hi) return false;
  // The first leaf that ends after lo, the last that starts before hi.
  const size_t after = size_t(std::upper_bound(ends.begin(), ends.end(), lo) - ends.begin());
  const size_t before = size_t(std::lower_bound(ends.begin(), ends.end(), hi) - ends.begin());
  if (after == ends.size() || before == 0) return false;
  *first = after == 0 ? 0 : after - 1;
  *last = std::min(before - 1, ends.size() - 2);
  return *first <= *last;
}

}  // namespace

void BoundaryAccesses::Declare(uint32_t q, uint64_t lo, uint64_t hi) {
  if (lo >= hi) return;
  trees_[q].ends.push_back(lo);
  trees_[q].ends.push_back(hi);
}

void BoundaryAccesses::Build() {
  for (Tree& t : trees_) {
    std::sort(t.ends.begin(), t.ends.end());
    t.ends.erase(std::unique(t.ends.begin(), t.ends.end()), t.ends.end());
    if (t.ends.size() < 2) continue;
    t.leaves = 1;
    while (t.leaves < t.ends.size() - 1) t.leaves *= 2;
    t.nodes.assign(2 * t.leaves, Node{});
  }
}

// Iterative segment tree without lazy propagation: the nodes that tile the
// leaf range [l, r] hang off the paths from leaves l and r to the root. A
// query takes `any` of its tiling nodes and `all` of both its paths (a path
// node holds leaf l or r, so its `all` applies to a byte of the range); that
// covers every tiling node of an update that is an ancestor of one of its
// own. An update raises `all` and `any` on its tiling nodes, and `any` on the
// path of its first leaf only: a query that meets the update holds one of its
// end leaves inside the update (and takes `all` along that leaf's path), or
// holds the update's first leaf in a tiling node, which is then either on
// that path or below a tiling node of the update.
void BoundaryAccesses::Record(uint32_t q, uint64_t lo, uint64_t hi, bool write, uint32_t count) {
  Tree& t = trees_[q];
  size_t first, last;
  if (!LeafRange(t.ends, lo, hi, &first, &last)) return;
  auto raise = [&](Node& n, bool whole) {
    if (write) {
      n.write_any = std::max(n.write_any, count);
      if (whole) n.write_all = std::max(n.write_all, count);
    }
    n.access_any = std::max(n.access_any, count);
    if (whole) n.access_all = std::max(n.access_all, count);
  };
  for (size_t l = first + t.leaves, r = last + t.leaves + 1; l < r; l /= 2, r /= 2) {
    if (l & 1) raise(t.nodes[l++], true);
    if (r & 1) raise(t.nodes[--r], true);
  }
  for (size_t i = (first + t.leaves) / 2; i > 0; i /= 2) raise(t.nodes[i], false);
}

void BoundaryAccesses::Conflicts(uint64_t lo, uint64_t hi, bool write, QueueCounts* need) const {
  for (uint32_t q = 0; q < neff::kMaxQueues; ++q) {
    const Tree& t = trees_[q];
    size_t first, last;
    if (!LeafRange(t.ends, lo, hi, &first, &last)) continue;
    uint32_t latest = 0;
    auto take = [&](const Node& n, bool whole) {
      latest = std::max(latest, write ? (whole ? n.access_any : n.access_all) : (whole ? n.write_any : n.write_all));
    };
    for (size_t l = first + t.leaves, r = last + t.leaves + 1; l < r; l /= 2, r /= 2) {
      if (l & 1) take(t.nodes[l++], true);
      if (r & 1) take(t.nodes[--r], true);
    }
    for (size_t i = first + t.leaves; i > 0; i /= 2) take(t.nodes[i], false);
    for (size_t i = last + t.leaves; i > 0; i /= 2) take(t.nodes[i], false);
    (*need)[q] = std::max((*need)[q], latest);
  }
}

}  // namespace neuroncc::rt
