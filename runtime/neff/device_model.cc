#include "device_model.h"

#include <algorithm>
#include <cmath>

#include "neff_format.h"

namespace neuroncc::neff {

// Sources for the numbers below (public AWS Neuron documentation):
//  [arch-v2] "NeuronCore-v2 Architecture" (Neuron SDK docs, general/arch/
//            neuron-hardware/neuron-core-v2): TensorEngine 128x128 at 2.8 GHz,
//            VectorEngine 1.12 GHz, ScalarEngine 1.4 GHz, GpSimd 1.4 GHz,
//            SBUF 24 MiB (128 partitions x 192 KiB), PSUM 2 MiB (128 x 16 KiB).
//  [trn1]    "Trainium" / trn1 instance docs: 820 GB/s HBM per chip, 2 cores/chip;
//            16 DMA engines per core.
//  [arch-v3] "NeuronCore-v3 Architecture": TensorEngine 2.4 GHz, Vector
//            0.96 GHz, Scalar 1.2 GHz, SBUF 28 MiB (128 x 224 KiB);
//            trn2 chip HBM 2.9 TB/s for 8 cores.
//  [nki-isa] NKI ISA reference (nki.isa.*): per-instruction cycle formulas
//            quoted at each formula below, and ~60 cycles of SBUF access latency.
//            nc_matmul: "initiation interval about max(N, 64) cycles, about 4x
//            for FP32, 64-cycle init latency"; iota: 150 + N.
//  [nki-dma] NKI DMA docs ("Introduction to DMA with NKI", "Guideline to Avoid
//            Under-Utilizing DMA Bandwidth"): a transfer is split into
//            descriptors over contiguous chunks; small fragmented transfers
//            underperform badly, large contiguous payloads are needed for
//            bandwidth. No per-descriptor cost is published.
// Numbers that are NOT public are marked ASSUMPTION with the reasoning.

namespace {

// ASSUMPTION: per-dispatch launch overhead. No public figure exists. The public
// RMSNorm profiling walkthrough measured a single fused 4x512 bf16 kernel at
// 375.5 us of device time while moving ~8 KiB, i.e. almost all of it is fixed
// per-dispatch cost (queue setup, semaphore reset, descriptor fetch, the
// end-of-kernel barrier). We take 360 us so that a tiny kernel's modeled time
// lands near that measurement; six such dispatches then cost ~6x one.
constexpr double kDispatchOverheadNs = 360000.0;

// ASSUMPTION: fixed cost of one DMA transfer (descriptor processing and HBM
// round trip latency). Not published; 2 us is the order of magnitude the NKI
// performance guide's advice to batch small transfers implies.
constexpr double kDmaFixedNs = 2000.0;

// ASSUMPTION: cost of one contiguous run (one DMA descriptor) of an access
// pattern. [nki-dma] says only that fragmented transfers are slow, not how
// slow. We charge each run the time its queue needs to move 512 bytes at the
// trn1 queue rate: 512 B / 25.6 GB/s = 20 ns (a descriptor costing about as
// much as a 512 B payload is the usual "keep chunks >= 512 B" rule of thumb
// for scatter-gather DMA engines, and the order of one HBM round trip that a
// descriptor fetch pays). Consequences: runs of 512 B or more stay
// bandwidth-bound, so row-contiguous loads keep their old cost (RMSNorm's
// 4 x 512 bf16 rows are 1 KiB runs: 4 x 20 ns = 80 ns < 4 KiB / 25.6 GB/s =
// 160 ns); an element-wise gather of 2-byte elements (a transposed load)
// moves 2 B per 20 ns, about 250x slower than a contiguous copy, which is
// why kernels transpose on the TensorEngine instead. Same engines on trn2.
constexpr double kDmaRunNs = 20.0;

const DeviceParams kTrn1 = {
    "trn1",
    /*partitions=*/128,                      // [arch-v2]
    /*sbuf_bytes_per_partition=*/192 * 1024, // [arch-v2]
    /*psum_bytes_per_partition=*/16 * 1024,  // [arch-v2]
    /*tensor_ghz=*/2.8,                      // [arch-v2]
    /*vector_ghz=*/1.12,                     // [arch-v2]
    /*scalar_ghz=*/1.4,                      // [arch-v2]
    /*gpsimd_ghz=*/1.4,                      // [arch-v2]
    /*dma_queues=*/16,                       // [trn1]
    /*dma_queue_gbps=*/27.0,                 // [trn1] ~27 GB/s per DMA engine
    /*hbm_gbps_per_core=*/820.0 / 2,         // [trn1] 820 GB/s chip, 2 cores
    kDmaFixedNs,
    /*sbuf_access_cycles=*/60,               // [nki-isa]
    kDispatchOverheadNs,
    kDmaRunNs,
};

const DeviceParams kTrn2 = {
    "trn2",
    128,                 // [arch-v3]
    224 * 1024,          // [arch-v3]
    16 * 1024,           // [arch-v3] PSUM 2 MiB per core
    2.4,                 // [arch-v3]
    0.96,                // [arch-v3]
    1.2,                 // [arch-v3]
    1.2,                 // [arch-v3] GpSimd runs with the Scalar clock
    16,
    27.0,                // ASSUMPTION: same DMA engines as trn1
    2900.0 / 8,          // [arch-v3] 2.9 TB/s chip, 8 cores
    kDmaFixedNs,
    60,                  // [nki-isa]
    kDispatchOverheadNs,
    kDmaRunNs,
};

bool IsBf16AddMulSub(const Instruction& inst) {
  return inst.in0().dtype() == BF16 && inst.in1().dtype() == BF16 &&
         inst.out().dtype() == BF16 &&
         (inst.alu() == ADD || inst.alu() == MUL || inst.alu() == SUB);
}

// TensorEngine cycles of one pass of `n` moving columns through the PE array:
// [nki-isa] matmul: 64-cycle initiation latency, then an initiation interval
// of max(N, 64) cycles for 2-byte inputs and about 4x that for FP32.
double MatmulCycles(double n, DType in_dtype) {
  double interval = std::max(n, 64.0);
  return 64 + (in_dtype == F32 ? 4 * interval : interval);
}

// Engine cycles for one compute instruction; N = free-dim elements per partition.
double ComputeCycles(const Instruction& inst, Engine engine) {
  double n = inst.in0().num_elements();
  switch (inst.opcode()) {
    case TENSOR_TENSOR: {
      // [nki-isa] tensor_tensor: max(64, 2N); max(64, N) for bf16 add/mul/sub
      // and when one input is read from PSUM (we apply it when exactly one
      // is; two PSUM inputs keep 2N). Comparisons and pow cost as the other
      // ALU ops.
      bool one_psum = (inst.in0().space() == PSUM) != (inst.in1().space() == PSUM);
      return IsBf16AddMulSub(inst) || one_psum ? std::max(64.0, n) : std::max(64.0, 2 * n);
    }
    case TENSOR_SCALAR:
      // [nki-isa] tensor_scalar: max(64, N), whatever the ALU op.
      return std::max(64.0, n);
    case ACTIVATION:
      // [nki-isa] activation: max(64, N) whatever the function (the public
      // formula does not depend on it); reciprocal is a slow iterative op: 8N.
      return inst.func() == RECIPROCAL ? 8 * n : std::max(64.0, n);
    case TENSOR_REDUCE:
      // [nki-isa] tensor_reduce: N, N/2 for bf16 add/max.
      if (inst.in0().dtype() == BF16 && (inst.alu() == ADD || inst.alu() == MAX))
        return std::max(1.0, n / 2);
      return std::max(1.0, n);
    case MATMUL:
      // [nki-isa] N = the moving operand's free size (columns of in1).
      return MatmulCycles(inst.in1().num_elements(), inst.in1().dtype());
    case TRANSPOSE:
      // An identity matmul on the PE array: in0 is the moving operand, its P
      // partitions become the N = P output columns.
      return MatmulCycles(inst.in0().partitions(), inst.in0().dtype());
    case TENSOR_SELECT:
      // ASSUMPTION: no public figure for a three-input select; priced like
      // tensor_tensor's two-input streaming cost, max(64, 2N).
      return std::max(64.0, 2.0 * inst.out().num_elements());
    case IOTA:
      // [nki-isa] iota: 150 + N (N = output elements per partition).
      return 150.0 + inst.out().num_elements();
    default:
      (void)engine;
      return 0;
  }
}

double EngineGhz(Engine engine, const DeviceParams& d) {
  switch (engine) {
    case TENSOR: return d.tensor_ghz;
    case VECTOR: return d.vector_ghz;
    case SCALAR: return d.scalar_ghz;
    case GPSIMD: return d.gpsimd_ghz;
    default: return 1.0;
  }
}

}  // namespace

const DeviceParams& Trn1() { return kTrn1; }
const DeviceParams& Trn2() { return kTrn2; }

const DeviceParams* DeviceForTarget(std::string_view target) {
  if (target == "trn1") return &kTrn1;
  if (target == "trn2") return &kTrn2;
  return nullptr;
}

uint32_t QueueIndex(Engine engine, uint32_t dma_queue) {
  switch (engine) {
    case TENSOR: return 0;
    case VECTOR: return 1;
    case SCALAR: return 2;
    case GPSIMD: return 3;
    default: return kComputeQueues + dma_queue;
  }
}

const char* QueueName(uint32_t queue_index) {
  static const char* kNames[kMaxQueues] = {
      "tensor", "vector", "scalar", "gpsimd", "dma0",  "dma1",  "dma2",
      "dma3",   "dma4",   "dma5",   "dma6",   "dma7",  "dma8",  "dma9",
      "dma10",  "dma11",  "dma12",  "dma13",  "dma14", "dma15"};
  return queue_index < kMaxQueues ? kNames[queue_index] : "invalid";
}

const char* EngineName(Engine engine) {
  switch (engine) {
    case TENSOR: return "tensor";
    case VECTOR: return "vector";
    case SCALAR: return "scalar";
    case GPSIMD: return "gpsimd";
    case DMA: return "dma";
    default: return "invalid";
  }
}

const char* OpcodeName(Opcode opcode) {
  switch (opcode) {
    case DMA_LOAD: return "dma_load";
    case DMA_STORE: return "dma_store";
    case TENSOR_TENSOR: return "tensor_tensor";
    case TENSOR_SCALAR: return "tensor_scalar";
    case ACTIVATION: return "activation";
    case TENSOR_REDUCE: return "tensor_reduce";
    case MATMUL: return "matmul";
    case TRANSPOSE: return "transpose";
    case TENSOR_SELECT: return "tensor_select";
    case IOTA: return "iota";
    case DMA_GATHER: return "dma_gather";
    default: return "invalid";
  }
}

double DmaQueueBytesPerNs(const DeviceParams& d) {
  // GB/s == bytes/ns.
  return std::min(d.dma_queue_gbps, d.hbm_gbps_per_core / d.dma_queues);
}

namespace {

// The SBUF side of a DMA.
const TileRef& DmaTile(const Instruction& inst) {
  return inst.opcode() == DMA_STORE ? inst.in0() : inst.out();
}

}  // namespace

uint64_t DmaBytes(const Instruction& inst, const Executable* exe) {
  const TileRef& tile = DmaTile(inst);
  size_t elem = tile.dtype() == F32 ? 4 : 2;
  if (exe && inst.opcode() != DMA_GATHER && inst.hbm().tensor() < uint32_t(exe->tensors_size())) {
    const DType from = exe->tensors(int(inst.hbm().tensor())).dtype();
    if (from == I64) elem = 8;
    if (from == I32) elem = 4;
    if (from == BOOL || from == U8 || from == I8) elem = 1;
    if (from == I16) elem = 2;
  }
  return uint64_t(tile.partitions()) * tile.num_elements() * elem;
}

uint64_t GatherIndexBytes(const Instruction& inst, const Executable* exe) {
  if (inst.opcode() != DMA_GATHER) return 0;
  uint64_t elem = 8;  // int64: PyTorch's index dtype
  if (exe && inst.index_tensor() < uint32_t(exe->tensors_size())) {
    switch (exe->tensors(int(inst.index_tensor())).dtype()) {
      case F32:
      case I32: elem = 4; break;
      case BF16:
      case F16: elem = 2; break;
      default: break;
    }
  }
  return uint64_t(inst.out().partitions()) * elem;
}

uint64_t DmaHbmBytes(const Instruction& inst, const Executable* exe) {
  return DmaBytes(inst, exe) + GatherIndexBytes(inst, exe);
}

uint64_t DmaRuns(const Instruction& inst) {
  const AccessPattern& ap = inst.hbm();
  const TileRef& tile = DmaTile(inst);
  uint64_t partitions = tile.partitions();
  // Free dims of count > 1, innermost first.
  uint64_t runs = 1, run_len = 0;  // run_len: elements of the run being merged, 0 = none yet
  bool gather = false;
  for (int d = ap.dims_size() - 1; d >= PartitionDims(ap); --d) {
    const Dim& dim = ap.dims(d);
    if (dim.count() <= 1) continue;
    uint64_t count = uint64_t(dim.count());
    if (gather) {
      runs *= count;
    } else if (run_len == 0) {
      if (dim.stride() == 1) {
        run_len = count;
      } else {
        gather = true;  // every element is its own run
        runs *= count;
      }
    } else if (runs == 1 && dim.stride() == int64_t(run_len)) {
      run_len *= count;  // continues the run contiguously
    } else {
      runs *= count;
    }
  }
  return partitions * runs;
}

uint64_t MatmulFlops(const Instruction& inst) {
  if (inst.opcode() != MATMUL) return 0;
  return 2 * uint64_t(inst.in0().partitions()) * inst.in0().num_elements() *
         inst.in1().num_elements();
}

uint64_t CostOnEnginePs(const Instruction& inst, Engine engine, const DeviceParams& d,
                        const Executable* exe) {
  if (IsDma(inst.opcode())) {
    // A DMA is bound by its bytes at the queue's bandwidth or by its
    // descriptors (one per contiguous run), whichever is slower.
    const double bw = DmaQueueBytesPerNs(d);
    double transfer = double(DmaBytes(inst, exe)) / bw;
    double descriptors = double(DmaRuns(inst)) * d.dma_run_ns;
    double ns = d.dma_fixed_ns + std::max(transfer, descriptors);
    // ASSUMPTION (no public figure): a gather first reads its P indices, one
    // contiguous run, and only then knows which rows to fetch, so that read
    // adds its own max(bytes / bandwidth, one run) to the row transfer. Each
    // looked-up row is at least one run (DmaRuns counts runs per partition).
    if (inst.opcode() == DMA_GATHER)
      ns += std::max(double(GatherIndexBytes(inst, exe)) / bw, d.dma_run_ns);
    return uint64_t(std::llround(ns * kTicksPerNanosecond));
  }
  double cycles = ComputeCycles(inst, engine) + d.sbuf_access_cycles;
  double ns = cycles / EngineGhz(engine, d);
  return uint64_t(std::llround(ns * kTicksPerNanosecond));
}

uint64_t InstructionCostPs(const Instruction& inst, const DeviceParams& d, const Executable* exe) {
  return CostOnEnginePs(inst, inst.engine(), d, exe);
}

}  // namespace neuroncc::neff
