// Summaries of an NTFF device trace: per-kernel and per-ATen-op device time
// (in the manner of torch.profiler's key_averages table), engine activity,
// HBM traffic. Separate from the tool's main() so tests can check the numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ntff.pb.h"

namespace neuroncc::profile {

struct KernelRow {
  uint32_t index = 0;  // NEFF kernel index
  std::string name;
  std::vector<std::string> source_ops;
  uint64_t calls = 0;             // executions of the kernel captured
  uint64_t device_time_ps = 0;    // its share of its dispatches (see Summarize), all calls
  uint64_t launch_overhead_ps = 0;
  uint64_t instruction_count = 0;  // all calls
  uint64_t hbm_read_bytes = 0;
  uint64_t hbm_write_bytes = 0;
  // Over all calls: the kernel spans' extent (first instruction start to
  // last end), each engine's busy time in them, the DMA queues' busy time
  // summed over queues, and the work done.
  uint64_t span_ps = 0;
  uint64_t engine_busy_ps[4] = {0, 0, 0, 0};
  uint64_t dma_queue_busy_ps = 0;
  uint64_t tensor_engine_flops = 0;
  uint64_t elementwise_ops = 0;
  std::string bound;  // see KernelBound
};

// What limits a kernel, from its profile (docs/runtime.md, "What bounds a
// kernel"): "launch overhead" when the fixed per-dispatch cost is at least
// half its device time; otherwise over its spans, with E the busiest compute
// engine's share of the time and M the larger of the DMA queues' average
// occupancy and its HBM bandwidth utilization: "waiting on dependencies"
// when both are under one half (no resource is kept busy: the engines wait on
// one another or on latency), else "compute" if E >= M, else "memory".
std::string KernelBound(const KernelRow& k, uint32_t dma_queues, double hbm_gbps_per_core);

struct NamedRow {
  std::string name;
  double device_time_ps = 0;  // fractional after attribution
  uint64_t calls = 0;
};

struct Summary {
  std::string neff_name;
  uint64_t neff_hash = 0;
  std::string target;
  uint32_t execution_count = 0;
  uint64_t kernels_per_execution = 0;
  uint64_t dispatch_count = 0;     // dispatches captured, all executions
  uint64_t kernel_span_count = 0;  // kernel executions captured, all executions
  uint64_t total_ps = 0;
  uint64_t launch_overhead_ps = 0;
  uint64_t instruction_count = 0;
  uint64_t hbm_read_bytes = 0;
  uint64_t hbm_write_bytes = 0;
  uint64_t dma_transfer_count = 0;
  uint64_t elementwise_ops = 0;  // one per element processed by a compute instruction but matmul
  uint64_t matmul_count = 0;        // MATMUL instructions executed
  uint64_t tensor_engine_flops = 0; // their floating-point operations, 2 * K * M * N each
  double tensor_peak_flops_per_s = 0;  // BF16 peak: 2 x partitions^2 MACs per TensorEngine cycle
  uint64_t engine_busy_ps[4] = {0, 0, 0, 0};  // tensor, vector, scalar, gpsimd
  uint64_t dma_busy_ps = 0;  // time at least one DMA queue is busy
  double hbm_gbps_per_core = 0;
  double dispatch_overhead_ns = 0;
  uint32_t dma_queues = 0;
  std::vector<KernelRow> kernels;       // NEFF kernel order
  std::vector<NamedRow> kernel_names;   // grouped by kernel name, by time descending
  std::vector<NamedRow> aten_ops;       // grouped by source op name, by time descending
};

// Kernel attribution: a dispatch's device time (launch overhead included) is
// split among its kernels so that the rows add up to the total: each instant
// of the instruction phase is shared equally by the kernels with an
// instruction running then; the launch overhead and idle instants are spread
// in proportion. With one kernel per dispatch, the kernel gets the dispatch.
// ATen-op attribution, per execution of a kernel: with one source op, the op
// gets the kernel's whole device time. With several, the kernel's device time
// is split in proportion to the busy time (end - start, on any engine or DMA
// queue) of the instructions tagged with each op's index; untagged
// instructions and the launch overhead are spread in that same proportion, so
// the ATen rows add up to the total. If no instruction is tagged, the ops
// share equally. A kernel without source ops is reported as "(no source op)".
// Each source_ops entry of a dispatched kernel counts as one call of its name.
Summary Summarize(const ntff::Profile& profile);

std::string RenderText(const Summary& s);
std::string RenderSummaryJson(const Summary& s);
// Every kernel span, instruction and DMA event, times in microseconds.
std::string RenderEventsJson(const ntff::Profile& p);
// A Chrome/Perfetto trace of the device timeline: one track per engine queue
// plus a kernels track.
std::string RenderPerfetto(const ntff::Profile& p);

}  // namespace neuroncc::profile
