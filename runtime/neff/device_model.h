// The NeuronCore device model: sizes, clocks, bandwidths and per-instruction
// cost formulas. Shared by the compiler (engine assignment) and the runtime
// (the timing simulation), so both agree on what an instruction costs.
#pragma once

#include <cstdint>
#include <string_view>

#include "neff.pb.h"

namespace neuroncc::neff {

struct DeviceParams {
  const char* name;
  uint32_t partitions;
  uint64_t sbuf_bytes_per_partition;
  uint64_t psum_bytes_per_partition;
  double tensor_ghz;
  double vector_ghz;
  double scalar_ghz;
  double gpsimd_ghz;
  uint32_t dma_queues;
  double dma_queue_gbps;      // one DMA engine
  double hbm_gbps_per_core;   // chip HBM bandwidth divided by cores per chip
  double dma_fixed_ns;        // per-transfer setup cost
  uint32_t sbuf_access_cycles;
  double dispatch_overhead_ns;
};

const DeviceParams& Trn1();
const DeviceParams& Trn2();
// nullptr for an unknown target name.
const DeviceParams* DeviceForTarget(std::string_view target);

// Instruction queues of one NeuronCore: the four compute engines, then the
// DMA queues. A semaphore per queue counts its completed instructions.
inline constexpr uint32_t kComputeQueues = 4;
inline constexpr uint32_t kMaxQueues = kComputeQueues + 16;
uint32_t QueueIndex(Engine engine, uint32_t dma_queue);
const char* QueueName(uint32_t queue_index);  // "tensor", "vector", ..., "dma3"
const char* EngineName(Engine engine);
const char* OpcodeName(Opcode opcode);

// Effective bandwidth of one DMA queue in bytes per nanosecond: a queue cannot
// beat its engine, and the queues together cannot beat the core's HBM share.
double DmaQueueBytesPerNs(const DeviceParams& device);

// Bytes one DMA instruction moves (tile elements x element size).
uint64_t DmaBytes(const Instruction& inst);

// Modeled duration of one instruction in picoseconds (no waiting included).
uint64_t InstructionCostPs(const Instruction& inst, const DeviceParams& device);

// Modeled cost in picoseconds if `inst` ran on `engine` instead (for the
// compiler's engine choice); same formulas as InstructionCostPs.
uint64_t CostOnEnginePs(const Instruction& inst, Engine engine,
                        const DeviceParams& device);

inline constexpr uint64_t kTicksPerNanosecond = 1000;  // timeline unit: 1 ps

}  // namespace neuroncc::neff
