// The timing model: when every instruction of a dispatch starts and ends.
// Depends only on the program, never on tensor values, so the runtime computes
// it once per loaded model (docs/runtime.md, "Timing model" and "Dispatch
// model").
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "device_model.h"
#include "neff_format.h"

namespace neuroncc::rt {

// One instruction's place on its dispatch's timeline. Times are picoseconds
// (neff::kTicksPerNanosecond ticks per ns) from the moment the dispatch's
// first instruction may issue, i.e. after the launch overhead.
struct ScheduledInstruction {
  uint32_t kernel;       // NEFF kernel index
  uint32_t instruction;  // index into that kernel's instructions
  uint32_t queue;        // neff::QueueIndex()
  uint64_t start;
  uint64_t end;
};

// Where a kernel's instructions lie inside its dispatch.
struct KernelExtent {
  uint64_t start = 0;  // first instruction start (0 for an empty kernel)
  uint64_t end = 0;    // last instruction end
  uint64_t instruction_count = 0;
};

// The modeled timeline of one dispatch: its kernels' instructions on the
// engine queues, one fixed launch cost before them.
struct DispatchSchedule {
  int first_kernel = 0;
  std::vector<KernelExtent> kernels;        // one per kernel of the dispatch
  std::vector<ScheduledInstruction> order;  // simulated start order
  uint64_t launch_overhead_ps = 0;
  uint64_t makespan_ps = 0;  // last instruction end (0 for an empty dispatch)
  uint64_t device_time_ps() const { return launch_overhead_ps + makespan_ps; }
};

// Event-driven simulation of kernels [first, first + count) of `exe` as one
// dispatch. Every queue (four compute engines, then the DMA queues) issues
// the dispatch's instructions in kernel order and, within a kernel, in
// program order, one at a time; an instruction starts at the later of its
// queue becoming free and every semaphore it waits on reaching its count. Its
// waits are the kernel's own (counted from the kernel's first instruction on
// each queue) plus the kernel-boundary waits: for every earlier kernel of the
// dispatch, the last instruction on each other queue that touches memory this
// one touches, one of the two writing (boundary_accesses.h). Durations come
// from InstructionCostPs. Among the queue heads whose start time is known, the
// earliest start runs next, ties going to the lower queue index; that order is
// also the order in which the executor applies the instructions' effects.
// Start times never decrease along it: anything a scheduled instruction
// unblocks starts after it ends. Fails only on a deadlock, which a verified
// NEFF cannot contain.
absl::StatusOr<DispatchSchedule> ScheduleDispatch(const neff::Executable& exe, int first, int count,
                                                  const neff::DeviceParams& device);

// One kernel as a dispatch of its own. `exe`, the kernel's executable, prices
// dma_gather index reads by their dtype (see neff::GatherIndexBytes); without
// it they are priced as int64.
absl::StatusOr<DispatchSchedule> ScheduleKernel(const neff::Kernel& kernel,
                                                const neff::DeviceParams& device,
                                                const neff::Executable* exe = nullptr);

// Every dispatch of `exe` (neff::Dispatches), scheduled.
absl::StatusOr<std::vector<DispatchSchedule>> ScheduleExecutable(const neff::Executable& exe,
                                                                 const neff::DeviceParams& device);

}  // namespace neuroncc::rt
