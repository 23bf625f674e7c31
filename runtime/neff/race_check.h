// Finds SBUF and PSUM data races in a kernel: two instructions on different
// queues that touch overlapping bytes of the same on-chip memory (at least one
// writing; SBUF and PSUM are separate memories) while no chain of
// semaphore waits orders them. On the device their order depends on timing,
// so such a program has no well-defined result; the runtime's simulator
// would silently pick one (its modeled start order). nrt_load refuses them;
// the compiler calls this on every kernel it emits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include <vector>

#include "neff.pb.h"

namespace neuroncc::neff {

struct SbufRace {
  uint32_t first;   // instruction indices within the kernel, first < second
  uint32_t second;
  std::string description;
};

// The SBUF and PSUM bytes an instruction touches: exact partition x byte
// rectangles (HBM is not included).
struct OnChipRegion {
  bool write;
  MemorySpace space;  // SBUF and PSUM are separate memories
  uint32_t p0, p1;    // partitions [p0, p1)
  uint64_t b0, b1;    // bytes [b0, b1)
};
std::vector<OnChipRegion> OnChipFootprint(const Instruction& instruction);

// The text of SbufRace::description for instructions `first` and `second` of
// `kernel` (on queues `first_queue`, `second_queue`) whose regions `a` and `b`
// conflict.
std::string DescribeRace(const Kernel& kernel, uint32_t first, uint32_t first_queue, const OnChipRegion& a,
                         uint32_t second, uint32_t second_queue, const OnChipRegion& b);

// Replays only the semaphore protocol (every queue runs in order; an
// instruction issues once each of its waits is met) and appends the kernel's
// instruction indices to `order` in the order they issue: each after its queue
// predecessor and after the instructions its waits name. Returns false, with
// `order` incomplete, if the waits deadlock (or name a queue or count that
// does not exist). Event-driven: O(n + w log q) for n instructions, w waits
// and q queues. VerifyNoDeadlock and FindSbufRaces share it.
bool SemaphoreReplayOrder(const Kernel& kernel, std::vector<uint32_t>* order);

// Happens-before is computed with vector clocks over the semaphore protocol
// (an instruction has seen every completion its queue predecessor had seen,
// plus, for each wait (q, c), q's first c instructions and everything they
// had seen). Footprints are exact partition x byte rectangles, so there are
// no false positives, and every racing pair is found (no false negatives).
// Every kernel is checked, whatever its size: the search is near-linear
// (O(n log n) for usual kernels; see race_check.cc for the worst case).
// Returns races sorted by (first, second); stops after `limit` races (which
// ones are found first follows the semaphore replay order, deterministically).
// A kernel whose waits deadlock has no replay order: it returns no races (the
// verifier refuses such kernels).
std::vector<SbufRace> FindSbufRaces(const Kernel& kernel, size_t limit = 8);

// The search's work (byte segments of its per-byte history visited) is
// bounded by kRaceCheckBaseVisits + kRaceCheckVisitsPerInstruction x the
// kernel's instructions: linear in the kernel, whatever its access pattern.
// Kernels the compiler emits stay far below it (tiles are reused at the same
// offsets, so an access meets one to three segments). A kernel that cuts a
// partition's bytes into thousands of pieces and then touches them all at
// every step would need quadratic work: CheckSbufRaces refuses it
// (InvalidArgument, naming the kernel) instead of grinding through.
inline constexpr uint64_t kRaceCheckBaseVisits = uint64_t(1) << 22;
inline constexpr uint64_t kRaceCheckVisitsPerInstruction = 32;
inline uint64_t RaceCheckBudget(uint64_t instructions) {
  return kRaceCheckBaseVisits + kRaceCheckVisitsPerInstruction * instructions;
}
absl::StatusOr<std::vector<SbufRace>> CheckSbufRaces(const Kernel& kernel, size_t limit = 8);

}  // namespace neuroncc::neff
