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
  // Per contiguous run (one DMA descriptor) of an access pattern; a transfer
  // costs at least runs x dma_run_ns. See DmaRuns.
  double dma_run_ns;
};

const DeviceParams& Trn1();
const DeviceParams& Trn2();
// nullptr for an unknown target name.
const DeviceParams* DeviceForTarget(std::string_view target);

// Instruction queues of one NeuronCore: the four compute engines, then the
// DMA queues. A semaphore per queue counts its completed instructions.
inline constexpr uint32_t kComputeQueues = 4;
// PSUM is split into 8 banks of 2 KiB per partition; one matmul's output
// (at most 512 f32) must lie inside one bank.
inline constexpr uint32_t kPsumBankBytes = 2048;
// TensorEngine limits of one MATMUL: K (contraction, partitions) and M
// (stationary columns) up to the 128x128 PE array, N up to one PSUM bank of f32.
inline constexpr uint32_t kMatmulMaxK = 128;
inline constexpr uint32_t kMatmulMaxM = 128;
inline constexpr uint32_t kMatmulMaxN = kPsumBankBytes / 4;
inline constexpr uint32_t kMaxQueues = kComputeQueues + 16;
uint32_t QueueIndex(Engine engine, uint32_t dma_queue);
const char* QueueName(uint32_t queue_index);  // "tensor", "vector", ..., "dma3"
const char* EngineName(Engine engine);
const char* OpcodeName(Opcode opcode);

// Effective bandwidth of one DMA queue in bytes per nanosecond: a queue cannot
// beat its engine, and the queues together cannot beat the core's HBM share.
double DmaQueueBytesPerNs(const DeviceParams& device);

// Bytes one DMA instruction moves between HBM and its SBUF tile (tile
// elements x element size); for a DMA_GATHER, the table rows it copies. A
// load or store that converts between an integer tensor and a float32 tile
// moves the tensor's bytes (tile elements x the integer size), which takes
// `exe` to know; without it the tile's bytes are counted.
uint64_t DmaBytes(const Instruction& inst, const Executable* exe = nullptr);

// Bytes of HBM a DMA_GATHER reads for its indices: partitions x the index
// tensor's element size, taken from `exe` (8, int64, when `exe` is null or
// lacks the index tensor). 0 for other opcodes.
uint64_t GatherIndexBytes(const Instruction& inst, const Executable* exe);

// All HBM bytes one DMA instruction reads or writes: DmaBytes, plus a
// gather's indices. What execution stats and profiles count as HBM traffic.
uint64_t DmaHbmBytes(const Instruction& inst, const Executable* exe);

// True for DMA_LOAD and DMA_GATHER (HBM -> SBUF); DMA_STORE is the other direction.
inline bool IsDmaRead(Opcode op) { return op == DMA_LOAD || op == DMA_GATHER; }
inline bool IsDma(Opcode op) { return op == DMA_LOAD || op == DMA_STORE || op == DMA_GATHER; }

// Contiguous runs of HBM elements one DMA instruction moves: one or more per
// partition (an SBUF partition is its own memory; a gather's partitions read
// rows chosen at run time, so they are separate runs too). Free dims of count 1 are
// ignored; if the innermost remaining dim has stride 1, it and every outer dim
// that continues it contiguously (stride == elements so far) form one run,
// and the remaining outer dims multiply the number of runs; otherwise every
// element is its own run (a gather, e.g. a transposed load, or a stride-0
// broadcast along the free dim).
uint64_t DmaRuns(const Instruction& inst);

// Floating-point operations of one MATMUL: 2 * K * M * N (0 for other opcodes).
uint64_t MatmulFlops(const Instruction& inst);

// Modeled duration of one instruction in picoseconds (no waiting included).
// `exe` (the instruction's executable) gives a DMA_GATHER's index dtype; see
// GatherIndexBytes for what happens without it.
uint64_t InstructionCostPs(const Instruction& inst, const DeviceParams& device,
                           const Executable* exe = nullptr);

// Modeled cost in picoseconds if `inst` ran on `engine` instead (for the
// compiler's engine choice); same formulas as InstructionCostPs.
uint64_t CostOnEnginePs(const Instruction& inst, Engine engine,
                        const DeviceParams& device, const Executable* exe = nullptr);

inline constexpr uint64_t kTicksPerNanosecond = 1000;  // timeline unit: 1 ps

}  // namespace neuroncc::neff
