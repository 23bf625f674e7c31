// Finds SBUF and PSUM data races in a kernel: two instructions on different
// queues that touch overlapping bytes of the same on-chip memory (at least one
// writing; SBUF and PSUM are separate memories) while no chain of
// semaphore waits orders them. On the device their order depends on timing,
// so such a program has no well-defined result; the runtime's simulator
// would silently pick one (its modeled start order). nrt_load refuses them;
// the compiler may call this on what it emits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "neff.pb.h"

namespace neuroncc::neff {

struct SbufRace {
  uint32_t first;   // instruction indices within the kernel, first < second
  uint32_t second;
  std::string description;
};

// Happens-before is computed with vector clocks over the semaphore protocol
// (an instruction has seen every completion its queue predecessor had seen,
// plus, for each wait (q, c), q's first c instructions and everything they
// had seen). Footprints are exact partition x byte rectangles, so there are
// no false positives. Cost: O(n^2) pairs in the worst case; kernels of more
// than `max_instructions` are skipped (returns no races). Stops after `limit`
// races.
// The SBUF and PSUM bytes an instruction touches: exact partition x byte
// rectangles (HBM is not included).
struct OnChipRegion {
  bool write;
  MemorySpace space;  // SBUF and PSUM are separate memories
  uint32_t p0, p1;    // partitions [p0, p1)
  uint64_t b0, b1;    // bytes [b0, b1)
};
std::vector<OnChipRegion> OnChipFootprint(const Instruction& instruction);

std::vector<SbufRace> FindSbufRaces(const Kernel& kernel, size_t limit = 8,
                                    size_t max_instructions = 20000);

}  // namespace neuroncc::neff
