// Executes a verified NEFF on the host: real numerics on a simulated SBUF,
// PSUM and HBM, and an event-driven timing model of the NeuronCore's engine queues.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "device_model.h"
#include "neff_format.h"
#include "schedule.h"

namespace neuroncc::rt {

// Rows [begin, end) of an instruction's tiles (row p lies in partition
// start_partition + p of every tile of a partition-local instruction).
struct Rows {
  uint32_t begin, end;
};

// Per-execution totals, for summaries.
struct ExecutionStats {
  uint64_t device_time_ps = 0;
  uint64_t launch_overhead_ps = 0;
  uint64_t dispatch_count = 0;
  uint64_t kernel_count = 0;
  uint64_t instruction_count = 0;
  uint64_t hbm_read_bytes = 0;
  uint64_t hbm_write_bytes = 0;
};

class Executor {
 public:
  // `neff` must outlive the executor. Schedules every dispatch. The simulated
  // SBUF, PSUM and HBM arena are allocated by the first Run, so a model that
  // is only timed (timing-only executions) never holds them.
  static absl::StatusOr<std::unique_ptr<Executor>> Create(const neff::Neff& neff,
                                                          const neff::DeviceParams& device);

  // Runs every kernel in order. inputs[i] / outputs[i] point at the bytes of
  // graph input / output i (Executable.graph_inputs / graph_outputs order),
  // each exactly Tensor.size_bytes long; the caller checked the sizes.
  // Outputs may alias inputs: that behaves as it would on the device.
  // Errors: ResourceExhausted if the simulated memories cannot be allocated
  // (first Run only); a dma_gather index that is not an integer in
  // [0, index_bound): OutOfRange naming the kernel, instruction, partition
  // and value. The execution stops before that instruction writes anything;
  // outputs then hold whatever the instructions before it (in simulated
  // start order) stored.
  absl::Status Run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs);

  const std::vector<DispatchSchedule>& schedules() const { return schedules_; }
  // Identical for every Run, since timing is data independent.
  const ExecutionStats& stats() const { return stats_; }
  const neff::DeviceParams& device() const { return device_; }

 private:
  Executor(const neff::Neff& neff, const neff::DeviceParams& device);
  absl::Status AllocateMemories();

  struct RowSource;
  struct RowSink;
  // A run of d.order[begin, end): run band by band (`band` partitions at a
  // time) when `banded`, else in order.
  struct Window {
    uint32_t begin, end;
    uint32_t band;
    bool banded;
  };
  void PlanWindows();
  bool UserBuffersDisjoint() const;
  void RunBanded(const std::vector<const neff::Instruction*>& insts, const Window& w);
  // Runs `inst` on `rows` (matmul and transpose: always all rows);
  // `parallel` lets it split the rows across the pool.
  void Execute(const neff::Instruction& inst, Rows rows, bool parallel);
  void ExecDma(const neff::Instruction& inst, Rows rows, bool parallel);
  absl::Status ExecGather(const neff::Instruction& inst, int kernel, uint32_t instruction);
  void ExecTensorTensor(const neff::Instruction& inst, Rows rows, bool parallel);
  void ExecTensorScalar(const neff::Instruction& inst, Rows rows, bool parallel);
  void ExecActivation(const neff::Instruction& inst, Rows rows, bool parallel);
  void ExecTensorReduce(const neff::Instruction& inst, Rows rows, bool parallel);
  void ExecMatmul(const neff::Instruction& inst);
  void ExecTranspose(const neff::Instruction& inst);
  void ExecTensorSelect(const neff::Instruction& inst, Rows rows, bool parallel);
  void ExecIota(const neff::Instruction& inst, Rows rows, bool parallel);
  // Row p of a tile, in SBUF or PSUM as the tile says.
  uint8_t* Row(const neff::TileRef& tile, uint32_t p) const;
  uint64_t PartitionBytes(const neff::TileRef& tile) const;
  RowSource Source(const neff::TileRef& in, const neff::Instruction& inst, int slot);
  // Where an instruction writes row p of `out`: in place, or for a stepped
  // output a contiguous row that Scatter then spreads along the step.
  RowSink Sink(const neff::TileRef& out);
  void Scatter(const neff::TileRef& out, const RowSink& sink, Rows rows);

  const neff::Neff& neff_;
  const neff::DeviceParams& device_;
  std::vector<DispatchSchedule> schedules_;
  std::vector<std::vector<const neff::Instruction*>> ordered_;  // per dispatch, in start order
  std::vector<std::vector<Window>> windows_;                     // per dispatch
  bool any_banded_ = false;                                      // any window of windows_
  ExecutionStats stats_;
  struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  // calloc'd: large zeroed regions cost nothing until touched.
  std::unique_ptr<uint8_t[], FreeDeleter> sbuf_;
  std::unique_ptr<uint8_t[], FreeDeleter> psum_;  // partitions x psum_bytes_per_partition
  std::unique_ptr<uint8_t[], FreeDeleter> arena_;
  std::vector<uint8_t*> hbm_;  // base address of every tensor for the current Run
  // Matmul operands widened to float32 once per instruction: in0 as [K][M],
  // in1 as [K][N] (at most 128 x 128 and 128 x 512); the sums as [M][N].
  std::vector<float> mm_a_, mm_b_, mm_s_;
  std::vector<float> mm_ap_, mm_bp_;  // mm_a_ and mm_b_ packed for the kernel
  // The table row of every partition of the current dma_gather.
  std::vector<int64_t> gather_rows_;
  // Snapshots of input tiles that an instruction's outputs overwrite.
  std::vector<uint8_t> snapshot_[3];
  // A stepped output's rows, contiguous, before they are scattered (Sink).
  std::vector<uint8_t> sink_;
};

}  // namespace neuroncc::rt
