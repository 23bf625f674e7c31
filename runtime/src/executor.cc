#include "executor.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "float_convert.h"
#include "row_kernels.h"
#include "thread_pool.h"
#include "vector_math.h"

namespace neuroncc::rt {

using neff::DType;
using neff::Instruction;
using neff::TileRef;

namespace {

using vm::kBlock;

float LoadScalar(DType dt, const uint8_t* p) {
  float v = 0;
  vm::Widen(dt, p, 1, &v);
  return v;
}

void StoreScalar(DType dt, float v, uint8_t* p) { vm::Narrow(dt, &v, 1, p); }


// Below this many elements an instruction runs on the calling thread: waking
// workers costs more than it saves.
constexpr uint64_t kParallelElements = 1 << 15;

// Calls row(p) for every p in rows, split across the shared pool when
// `parallel` and the instruction is large enough. Rows must write disjoint
// bytes.
template <typename F>
void ForRows(Rows rows, uint64_t elements_per_row, bool parallel, F row) {
  const uint32_t count = rows.end - rows.begin;
  if (!parallel || uint64_t(count) * elements_per_row < kParallelElements || count < 2) {
    for (uint32_t p = rows.begin; p < rows.end; ++p) row(p);
    return;
  }
  uint32_t grain = uint32_t(std::max<uint64_t>(1, (kParallelElements / 4) / std::max<uint64_t>(1, elements_per_row)));
  ThreadPool::Shared().ParallelFor(count, grain, [&](uint32_t begin, uint32_t end) {
    for (uint32_t p = rows.begin + begin; p < rows.begin + end; ++p) row(p);
  });
}

bool RangesOverlap(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1) { return a0 < b1 && b0 < a1; }

uint64_t TileBytes(const TileRef& t) { return neff::TileSpanBytes(t); }

// Whether writing `w` could change what a later read of `r` sees, given that
// rows may run on different threads and a row is processed in blocks of
// kBlock elements. Safe: different memories or no common bytes, or the same
// mapping of element (p, f) to bytes in both tiles (each block is read
// before it is written). Anything else (a shifted copy, a tile written over
// part of its own input) gets its input snapshotted first.
bool ReadWriteHazard(const TileRef& r, const TileRef& w) {
  if (r.space() != w.space()) return false;
  bool overlap = RangesOverlap(r.start_partition(), uint64_t(r.start_partition()) + r.partitions(),
                               w.start_partition(), uint64_t(w.start_partition()) + w.partitions()) &&
                 RangesOverlap(r.byte_offset(), r.byte_offset() + TileBytes(r), w.byte_offset(),
                               w.byte_offset() + TileBytes(w));
  bool same_mapping = r.start_partition() == w.start_partition() && r.byte_offset() == w.byte_offset() &&
                      neff::DTypeSize(r.dtype()) == neff::DTypeSize(w.dtype()) &&
                      neff::TileStep(r) == neff::TileStep(w);
  return overlap && !same_mapping;
}

// Copies `count` elements of ES bytes between SBUF (contiguous) and HBM
// (strided by `stride` elements).
// `stream`: a store into a graph output, which this execution does not read
// back soon: large runs bypass the cache.
template <size_t ES, bool kLoad>
void CopyStrided(uint8_t* sbuf, uint8_t* hbm, int64_t stride, int64_t count, bool stream) {
  if (stride == 1) {
    if (kLoad)
      std::memcpy(sbuf, hbm, size_t(count) * ES);
    else if (stream)
      vm::CopyToHbm(hbm, sbuf, size_t(count) * ES);
    else
      std::memcpy(hbm, sbuf, size_t(count) * ES);
    return;
  }
  for (int64_t j = 0; j < count; ++j) {
    uint8_t* h = hbm + j * stride * int64_t(ES);
    if (kLoad)
      std::memcpy(sbuf + size_t(j) * ES, h, ES);
    else
      std::memcpy(h, sbuf + size_t(j) * ES, ES);
  }
}

// Walks partitions [p0, p1) of a tile along `ap`: calls
// run(sbuf bytes, first HBM element, stride, count) for each innermost run,
// the SBUF side advancing by `tile_es` bytes an element. Partition p's HBM
// base is ap.offset + PartitionOffset(ap, p), or ap.offset + rows[p] *
// dims[0].stride for a gather.
template <typename Run>
void WalkRows(const neff::AccessPattern& ap, const TileRef& tile, size_t tile_es, uint8_t* sbuf,
              uint64_t partition_bytes, uint32_t p0, uint32_t p1, const int64_t* rows, Run run) {
  const int nd = ap.dims_size();  // partition dims + at least one free dim
  const int first_free = neff::PartitionDims(ap);
  int64_t count[8], stride[8], idx[8];
  for (int d = 0; d < nd; ++d) {
    count[d] = ap.dims(d).count();
    stride[d] = ap.dims(d).stride();
    idx[d] = 0;
  }
  const int inner = nd - 1;
  for (uint32_t p = p0; p < p1; ++p) {
    uint8_t* row = sbuf + (uint64_t(tile.start_partition()) + p) * partition_bytes + tile.byte_offset();
    int64_t base = ap.offset() + (rows ? rows[p] * stride[0] : neff::PartitionOffset(ap, p));
    int64_t outer = 0;
    size_t f = 0;
    for (int d = first_free; d < inner; ++d) idx[d] = 0;
    while (true) {
      run(row + f * tile_es, base + outer, stride[inner], count[inner]);
      f += size_t(count[inner]);
      // Odometer over the outer free dims; the one just outside `inner` moves fastest.
      int d = inner - 1;
      for (; d >= first_free; --d) {
        outer += stride[d];
        if (++idx[d] < count[d]) break;
        outer -= stride[d] * count[d];
        idx[d] = 0;
      }
      if (d < first_free) break;
    }
  }
}

// Moves partitions [p0, p1) of a tile between SBUF and HBM along `ap`.
template <size_t ES, bool kLoad>
void DmaRows(const neff::AccessPattern& ap, const TileRef& tile, uint8_t* hbm, uint8_t* sbuf,
             uint64_t partition_bytes, uint32_t p0, uint32_t p1, const int64_t* rows, bool stream) {
  WalkRows(ap, tile, ES, sbuf, partition_bytes, p0, p1, rows,
           [&](uint8_t* at, int64_t element, int64_t stride, int64_t count) {
             CopyStrided<ES, kLoad>(at, hbm + element * int64_t(ES), stride, count, stream);
           });
  if (!kLoad && stream) vm::FinishHbmCopies();
}

// Moves partitions [p0, p1) between a float32 tile and an integer tensor (a
// graph input or output), converting each value: a load to the nearest
// float32, as PyTorch's .float() does (exact up to 2^24 in magnitude); a
// store toward zero, as .long() does (integer results computed on the device
// are whole numbers already), NaN becoming 0 and values past the integer's
// range its extremes (where the C++ cast is undefined). Bools (Int =
// bool, one byte): any nonzero byte loads as 1; a store writes 1 for any
// nonzero value, NaN included, as PyTorch's .bool() does.
template <typename Int, bool kLoad>
void ConvertRows(const neff::AccessPattern& ap, const TileRef& tile, uint8_t* hbm, uint8_t* sbuf,
                 uint64_t partition_bytes, uint32_t p0, uint32_t p1) {
  [[maybe_unused]] constexpr double lo = double(std::numeric_limits<Int>::min());
  // The first value past the largest (2^31, 2^63 as a double, 256, ...).
  [[maybe_unused]] constexpr double hi = double(std::numeric_limits<Int>::max()) + 1.0;
  WalkRows(ap, tile, sizeof(float), sbuf, partition_bytes, p0, p1, nullptr,
           [&](uint8_t* at, int64_t element, int64_t stride, int64_t count) {
             for (int64_t j = 0; j < count; ++j) {
               uint8_t* h = hbm + (element + j * stride) * int64_t(sizeof(Int));
               float x;
               [[maybe_unused]] Int v;
               if constexpr (kLoad && std::is_same_v<Int, bool>) {
                 x = *h != 0 ? 1.0f : 0.0f;
                 std::memcpy(at + size_t(j) * sizeof(float), &x, sizeof(float));
               } else if constexpr (std::is_same_v<Int, bool>) {
                 std::memcpy(&x, at + size_t(j) * sizeof(float), sizeof(float));
                 *h = x != 0.0f ? 1 : 0;  // NaN != 0
               } else if constexpr (kLoad) {
                 std::memcpy(&v, h, sizeof(Int));
                 x = float(v);
                 std::memcpy(at + size_t(j) * sizeof(float), &x, sizeof(float));
               } else {
                 std::memcpy(&x, at + size_t(j) * sizeof(float), sizeof(float));
                 const double t = std::trunc(double(x));
                 v = std::isnan(t) ? Int(0)
                     : t < lo     ? std::numeric_limits<Int>::min()
                     : t >= hi    ? std::numeric_limits<Int>::max()
                                  : Int(t);
                 std::memcpy(h, &v, sizeof(Int));
               }
             }
           });
}

// Whether the partitions of a store write disjoint HBM bytes, so that their
// order cannot matter: each partition dim's stride steps past every element
// the dims inside it reach.
bool StoreRowsDisjoint(const neff::AccessPattern& ap) {
  const int first_free = neff::PartitionDims(ap);
  uint64_t span = 1;
  for (int d = first_free; d < ap.dims_size(); ++d)
    span += uint64_t(ap.dims(d).count() - 1) * uint64_t(std::llabs(ap.dims(d).stride()));
  for (int d = first_free - 1; d >= 0; --d) {
    const uint64_t stride = uint64_t(std::llabs(ap.dims(d).stride()));
    if (ap.dims(d).count() > 1 && stride < span) return false;
    span += uint64_t(ap.dims(d).count() - 1) * stride;
  }
  return true;
}

// Rows of a tile, split across threads when `parallel`: loads write distinct
// SBUF rows; stores only when their HBM rows are disjoint (otherwise the
// last partition's bytes must win, as in the serial order).
template <size_t ES, bool kLoad>
void DmaTile(const neff::AccessPattern& ap, const TileRef& tile, uint8_t* hbm, uint8_t* sbuf,
             uint64_t partition_bytes, Rows rows, bool parallel, const int64_t* index_rows = nullptr,
             bool stream = false) {
  if (!kLoad && !StoreRowsDisjoint(ap)) parallel = false;
  ForRows(rows, tile.num_elements(), parallel, [&](uint32_t p) {
    DmaRows<ES, kLoad>(ap, tile, hbm, sbuf, partition_bytes, p, p + 1, index_rows, stream);
  });
}

}  // namespace

struct Executor::RowSource {
  const uint8_t* base;
  uint64_t stride;
  const uint8_t* row(uint32_t p) const { return base + uint64_t(p) * stride; }
};

struct Executor::RowSink {
  uint8_t* base;
  uint64_t stride;
  uint8_t* row(uint32_t p) const { return base + uint64_t(p) * stride; }
};

Executor::Executor(const neff::Neff& neff, const neff::DeviceParams& device)
    : neff_(neff), device_(device) {}

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(const neff::Neff& neff,
                                                           const neff::DeviceParams& device) {
  std::unique_ptr<Executor> ex(new Executor(neff, device));
  const neff::Executable& exe = neff.executable;
  absl::StatusOr<std::vector<DispatchSchedule>> schedules = ScheduleExecutable(exe, device);
  if (!schedules.ok()) return schedules.status();
  ex->schedules_ = std::move(*schedules);
  ex->PlanWindows();
  ExecutionStats& st = ex->stats_;
  for (const DispatchSchedule& s : ex->schedules_) {
    st.device_time_ps += s.device_time_ps();
    st.launch_overhead_ps += s.launch_overhead_ps;
    st.dispatch_count += 1;
  }
  for (const neff::Kernel& k : exe.kernels()) {
    st.kernel_count += 1;
    st.instruction_count += uint64_t(k.instructions_size());
    for (const Instruction& inst : k.instructions()) {
      if (neff::IsDmaRead(inst.opcode())) st.hbm_read_bytes += neff::DmaHbmBytes(inst, &exe);
      if (inst.opcode() == neff::DMA_STORE) st.hbm_write_bytes += neff::DmaHbmBytes(inst, &exe);
    }
  }
  return ex;
}

absl::Status Executor::AllocateMemories() {
  const neff::Executable& exe = neff_.executable;
  uint64_t sbuf_bytes = uint64_t(device_.partitions) * device_.sbuf_bytes_per_partition;
  uint64_t psum_bytes = uint64_t(device_.partitions) * device_.psum_bytes_per_partition;
  sbuf_.reset(static_cast<uint8_t*>(std::calloc(sbuf_bytes, 1)));
  psum_.reset(static_cast<uint8_t*>(std::calloc(psum_bytes, 1)));
  // At least one byte, so that every arena address is a real pointer.
  uint64_t arena_bytes = std::max<uint64_t>(exe.arena_bytes(), 1);
  arena_.reset(static_cast<uint8_t*>(std::calloc(arena_bytes, 1)));
  if (!sbuf_ || !psum_ || !arena_) {
    sbuf_.reset();
    psum_.reset();
    arena_.reset();
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate the simulated SBUF (", sbuf_bytes, " bytes), PSUM (",
                     psum_bytes, " bytes) and HBM arena (", exe.arena_bytes(), " bytes)"));
  }
  mm_a_.resize(size_t(neff::kMatmulMaxK) * neff::kMatmulMaxM);
  mm_b_.resize(size_t(neff::kMatmulMaxK) * neff::kMatmulMaxN);
  mm_s_.resize(size_t(neff::kMatmulMaxM) * neff::kMatmulMaxN);
  mm_ap_.resize(mm_a_.size());
  mm_bp_.resize(mm_b_.size());
  hbm_.assign(size_t(exe.tensors_size()), nullptr);
  gather_rows_.resize(device_.partitions);
  return absl::OkStatus();
}

uint64_t Executor::PartitionBytes(const TileRef& tile) const {
  return tile.space() == neff::PSUM ? device_.psum_bytes_per_partition
                                    : device_.sbuf_bytes_per_partition;
}

uint8_t* Executor::Row(const TileRef& tile, uint32_t p) const {
  uint8_t* base = tile.space() == neff::PSUM ? psum_.get() : sbuf_.get();
  return base + (uint64_t(tile.start_partition()) + p) * PartitionBytes(tile) + tile.byte_offset();
}

Executor::RowSource Executor::Source(const TileRef& in, const Instruction& inst, int slot) {
  const uint64_t step = neff::TileStep(in);
  bool hazard = ReadWriteHazard(in, inst.out()) || (inst.has_accum() && ReadWriteHazard(in, inst.accum()));
  if (!hazard && step == 1) return {Row(in, 0), PartitionBytes(in)};
  // A copy of the input, contiguous: before the output overwrites it, or
  // gathered along its step.
  const size_t es = neff::DTypeSize(in.dtype());
  const uint64_t bytes = uint64_t(in.num_elements()) * es;
  std::vector<uint8_t>& snap = snapshot_[slot];
  snap.resize(size_t(bytes) * in.partitions());
  for (uint32_t p = 0; p < in.partitions(); ++p) {
    uint8_t* to = snap.data() + p * bytes;
    const uint8_t* from = Row(in, p);
    if (step == 1) {
      std::memcpy(to, from, size_t(bytes));
      continue;
    }
    for (uint32_t i = 0; i < in.num_elements(); ++i) std::memcpy(to + size_t(i) * es, from + i * step * es, es);
  }
  return {snap.data(), bytes};
}

Executor::RowSink Executor::Sink(const TileRef& out) {
  if (neff::TileStep(out) == 1) return {Row(out, 0), PartitionBytes(out)};
  const uint64_t bytes = uint64_t(out.num_elements()) * neff::DTypeSize(out.dtype());
  sink_.resize(size_t(bytes) * out.partitions());
  return {sink_.data(), bytes};
}

// The inputs were all read into the sink first, so an input that the stepped
// output overlaps is seen as it was.
void Executor::Scatter(const TileRef& out, const RowSink& sink, Rows rows) {
  const uint64_t step = neff::TileStep(out);
  if (step == 1) return;
  const size_t es = neff::DTypeSize(out.dtype());
  for (uint32_t p = rows.begin; p < rows.end; ++p) {
    uint8_t* to = Row(out, p);
    const uint8_t* from = sink.row(p);
    for (uint32_t i = 0; i < out.num_elements(); ++i) std::memcpy(to + i * step * es, from + size_t(i) * es, es);
  }
}

void Executor::ExecDma(const Instruction& inst, Rows rows, bool parallel) {
  const neff::AccessPattern& ap = inst.hbm();
  uint8_t* hbm = hbm_[ap.tensor()];
  uint64_t pb = device_.sbuf_bytes_per_partition;
  const bool load = inst.opcode() == neff::DMA_LOAD;
  const neff::Tensor& tensor = neff_.executable.tensors(int(ap.tensor()));
  if (neff::IsIntegerDType(tensor.dtype())) {
    // To or from float32 (the verifier checked).
    using Convert = void (*)(const neff::AccessPattern&, const TileRef&, uint8_t*, uint8_t*, uint64_t, uint32_t,
                             uint32_t);
    auto pick = [&](auto type) -> Convert {
      using Int = decltype(type);
      return load ? ConvertRows<Int, true> : ConvertRows<Int, false>;
    };
    Convert convert = nullptr;
    switch (tensor.dtype()) {
      case neff::I32: convert = pick(int32_t()); break;
      case neff::I64: convert = pick(int64_t()); break;
      case neff::U8: convert = pick(uint8_t()); break;
      case neff::I8: convert = pick(int8_t()); break;
      case neff::I16: convert = pick(int16_t()); break;
      default: convert = pick(bool()); break;
    }
    const TileRef& tile = load ? inst.out() : inst.in0();
    // A store's partitions may run apart only where their bytes do.
    if (!load && !StoreRowsDisjoint(ap)) parallel = false;
    ForRows(rows, tile.num_elements(), parallel,
            [&](uint32_t p) { convert(ap, tile, hbm, sbuf_.get(), pb, p, p + 1); });
  } else if (load) {
    if (neff::DTypeSize(inst.out().dtype()) == 4)
      DmaTile<4, true>(ap, inst.out(), hbm, sbuf_.get(), pb, rows, parallel);
    else
      DmaTile<2, true>(ap, inst.out(), hbm, sbuf_.get(), pb, rows, parallel);
  } else {
    const bool stream = tensor.kind() == neff::OUTPUT;
    if (neff::DTypeSize(inst.in0().dtype()) == 4)
      DmaTile<4, false>(ap, inst.in0(), hbm, sbuf_.get(), pb, rows, parallel, nullptr, stream);
    else
      DmaTile<2, false>(ap, inst.in0(), hbm, sbuf_.get(), pb, rows, parallel, nullptr, stream);
  }
}

namespace {

// "%.9g" of a float index: enough digits to tell 2.5 from 2 or 1e+30 from 1e30.
std::string FloatText(float v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", double(v));
  return buf;
}

}  // namespace

// out[p, :] = the table row index[index_offset + p]. Every index is checked
// before anything is written: one that is not an integer in [0, index_bound)
// fails the execution, so the table is only ever read at the rows the
// verifier bounded.
absl::Status Executor::ExecGather(const Instruction& inst, int kernel, uint32_t instruction) {
  const neff::Executable& exe = neff_.executable;
  const TileRef& out = inst.out();
  const neff::Tensor& index = exe.tensors(int(inst.index_tensor()));
  const uint8_t* base = hbm_[inst.index_tensor()];
  const DType dt = index.dtype();
  const size_t es = neff::DTypeSize(dt);
  const uint64_t bound = inst.index_bound();
  for (uint32_t p = 0; p < out.partitions(); ++p) {
    const int64_t e = inst.index_offset() + int64_t(p);
    const uint8_t* at = base + uint64_t(e) * es;
    bool ok = false;
    int64_t row = 0;
    std::string text, why;
    if (dt == neff::I32 || dt == neff::I64) {
      if (dt == neff::I32) {
        int32_t v;
        std::memcpy(&v, at, 4);
        row = v;
      } else {
        std::memcpy(&row, at, 8);
      }
      ok = row >= 0 && uint64_t(row) < bound;
      text = absl::StrCat(row);
    } else {
      float v = LoadScalar(dt, at);
      bool integral = std::isfinite(v) && v == std::trunc(v);
      ok = integral && v >= 0.0f && double(v) < double(bound);
      if (ok) row = int64_t(v);
      text = FloatText(v);
      if (!integral) why = "is not an integer";
    }
    if (!ok) {
      if (why.empty()) why = absl::StrCat("is outside the table's rows [0, ", bound, ")");
      return absl::OutOfRangeError(absl::StrCat(
          "kernel ", kernel, " ('", exe.kernels(kernel).name(), "') instruction ", instruction,
          " (dma_gather): partition ", p, " looks up row ", text, " (element ", e, " of ",
          neff::DTypeName(dt), " index tensor '", index.name(), "'), which ", why));
    }
    gather_rows_[p] = row;
  }
  uint8_t* table = hbm_[inst.hbm().tensor()];
  uint64_t pb = device_.sbuf_bytes_per_partition;
  if (neff::DTypeSize(out.dtype()) == 4)
    DmaTile<4, true>(inst.hbm(), out, table, sbuf_.get(), pb, Rows{0, out.partitions()}, true, gather_rows_.data());
  else
    DmaTile<2, true>(inst.hbm(), out, table, sbuf_.get(), pb, Rows{0, out.partitions()}, true, gather_rows_.data());
  return absl::OkStatus();
}

void Executor::ExecTensorTensor(const Instruction& inst, Rows rows, bool parallel) {
  const TileRef& out = inst.out();
  const uint32_t n = out.num_elements();
  const DType d0 = inst.in0().dtype(), d1 = inst.in1().dtype(), dout = out.dtype();
  RowSource s0 = Source(inst.in0(), inst, 0);
  RowSource s1 = Source(inst.in1(), inst, 1);
  RowSink o = Sink(out);
  ForRows(rows, n, parallel, [&](uint32_t p) {
    vm::AluRow(inst.alu(), {d0, s0.row(p)}, {d1, s1.row(p)}, {dout, o.row(p)}, n);
  });
  Scatter(out, o, rows);
}

void Executor::ExecTensorScalar(const Instruction& inst, Rows rows, bool parallel) {
  const TileRef& out = inst.out();
  const uint32_t n = out.num_elements();
  const DType d0 = inst.in0().dtype(), dout = out.dtype();
  RowSource s0 = Source(inst.in0(), inst, 0);
  RowSource s1 = inst.has_in1() ? Source(inst.in1(), inst, 1) : RowSource{nullptr, 0};
  RowSink o = Sink(out);
  ForRows(rows, n, parallel, [&](uint32_t p) {
    const float s = inst.has_in1() ? LoadScalar(inst.in1().dtype(), s1.row(p)) : inst.imm();
    vm::AluScalarRow(inst.alu(), {d0, s0.row(p)}, s, inst.reverse(), {dout, o.row(p)}, n);
  });
  Scatter(out, o, rows);
}

void Executor::ExecActivation(const Instruction& inst, Rows rows, bool parallel) {
  const TileRef& out = inst.out();
  const uint32_t n = out.num_elements();
  const DType d0 = inst.in0().dtype(), dout = out.dtype();
  RowSource s0 = Source(inst.in0(), inst, 0);
  RowSource s1 = inst.has_in1() ? Source(inst.in1(), inst, 1) : RowSource{nullptr, 0};
  RowSource s2 = inst.has_in2() ? Source(inst.in2(), inst, 2) : RowSource{nullptr, 0};
  RowSink o = Sink(out);
  ForRows(rows, n, parallel, [&](uint32_t p) {
    const float scale = inst.has_in1() ? LoadScalar(inst.in1().dtype(), s1.row(p)) : inst.scale();
    const float bias = inst.has_in2() ? LoadScalar(inst.in2().dtype(), s2.row(p)) : inst.bias();
    // The accum sums the float32 results before they are rounded to `out`.
    vm::LaneSum sum;
    vm::ActivationRow(inst.func(), {d0, s0.row(p)}, scale, bias, {dout, o.row(p)}, n,
                      inst.has_accum() ? &sum : nullptr);
    if (inst.has_accum()) StoreScalar(inst.accum().dtype(), sum.Total(), Row(inst.accum(), p));
  });
  Scatter(out, o, rows);
}

void Executor::ExecTensorReduce(const Instruction& inst, Rows rows, bool parallel) {
  const TileRef& in = inst.in0();
  const uint32_t n = in.num_elements();
  RowSource s0 = Source(in, inst, 0);
  ForRows(rows, n, parallel, [&](uint32_t p) {
    const vm::ConstRun row{in.dtype(), s0.row(p)};
    float result;
    if (inst.alu() == neff::ADD) {
      vm::LaneSum sum;
      vm::SumRow(row, n, &sum);
      result = sum.Total();
    } else if (inst.alu() == neff::MAX || inst.alu() == neff::MIN) {
      vm::Extreme extreme(inst.alu() == neff::MAX);
      vm::ExtremeRow(row, n, &extreme);
      result = extreme.Result();
    } else {
      result = LoadScalar(in.dtype(), row.p);  // the verifier admits add, max and min only
    }
    StoreScalar(inst.out().dtype(), result, Row(inst.out(), p));
  });
}

// out[m, n] = accumulate ? out[m, n] + s[m, n] : s[m, n], where
// s[m, n] = sum_k in0[k, m] * in1[k, n] summed in increasing k. Both operands
// are widened to float32 once; output columns are split across threads (each
// sum is computed whole by one thread, so the split never changes a bit).
void Executor::ExecMatmul(const Instruction& inst) {
  const TileRef& in0 = inst.in0();
  const TileRef& in1 = inst.in1();
  const TileRef& out = inst.out();
  const uint32_t K = in0.partitions(), M = in0.num_elements(), N = in1.num_elements();
  float* A = mm_a_.data();  // [K][M]
  float* B = mm_b_.data();  // [K][N], only where N is not a multiple of 16
  float* Ap = mm_ap_.data();
  float* Bp = mm_bp_.data();
  for (uint32_t k = 0; k < K; ++k) vm::Widen(in0.dtype(), Row(in0, k), M, A + size_t(k) * M);
  vm::PackMatmulRows(A, K, M, Ap);
  if (N % 16 != 0)
    for (uint32_t k = 0; k < K; ++k) vm::Widen(in1.dtype(), Row(in1, k), N, B + size_t(k) * N);
  const size_t es1 = neff::DTypeSize(in1.dtype());
  uint8_t* rows = Row(out, 0);
  uint64_t stride = PartitionBytes(out);
  const bool aligned = ((reinterpret_cast<uintptr_t>(rows) | stride) & 3) == 0;
  if (!aligned) {
    // Sums into aligned scratch first, then copied into the PSUM rows.
    rows = reinterpret_cast<uint8_t*>(mm_s_.data());
    stride = uint64_t(N) * 4;
    for (uint32_t m = 0; m < M; ++m)
      std::memcpy(rows + m * stride, Row(out, m), inst.accumulate() ? size_t(N) * 4 : 0);
  }
  // bf16 and f16 have at most 11 significant bits: their products are exact.
  const bool exact = in0.dtype() != neff::F32 && in1.dtype() != neff::F32;
  constexpr uint32_t kStrip = 16;
  const uint32_t strips = (N + kStrip - 1) / kStrip;
  // Each piece widens and packs its own strips of in1.
  auto columns = [&](uint32_t begin, uint32_t end) {
    for (uint32_t s = begin; s < end && (s + 1) * kStrip <= N; ++s)
      vm::PackMatmulStrip(in1.dtype(), Row(in1, 0) + size_t(s) * kStrip * es1, PartitionBytes(in1), K,
                          Bp + size_t(s) * kStrip * K);
    vm::MatmulColumns(A, B, Ap, Bp, K, M, N, begin * kStrip, std::min(N, end * kStrip), exact, inst.accumulate(),
                      rows, stride);
  };
  if (uint64_t(K) * M * N < 4 * kParallelElements)
    columns(0, strips);
  else
    ThreadPool::Shared().ParallelFor(strips, 2, columns);
  if (!aligned)
    for (uint32_t m = 0; m < M; ++m) std::memcpy(Row(out, m), rows + m * stride, size_t(N) * 4);
}

// out[f, p] = in0[p, f], exactly (float32 holds every input value).
void Executor::ExecTranspose(const Instruction& inst) {
  const TileRef& in0 = inst.in0();
  const TileRef& out = inst.out();
  const uint32_t P = in0.partitions(), F = in0.num_elements();
  float* T = mm_a_.data();  // [P][F], P, F <= 128
  for (uint32_t p = 0; p < P; ++p) vm::Widen(in0.dtype(), Row(in0, p), F, T + size_t(p) * F);
  float col[neff::kMatmulMaxK];
  for (uint32_t f = 0; f < F; ++f) {
    for (uint32_t p = 0; p < P; ++p) col[p] = T[size_t(p) * F + f];
    vm::Narrow(out.dtype(), col, P, Row(out, f));
  }
}

void Executor::ExecTensorSelect(const Instruction& inst, Rows rows, bool parallel) {
  const TileRef& out = inst.out();
  const uint32_t n = out.num_elements();
  const DType d0 = inst.in0().dtype(), d1 = inst.in1().dtype(), d2 = inst.in2().dtype(), dout = out.dtype();
  RowSource s0 = Source(inst.in0(), inst, 0);
  RowSource s1 = Source(inst.in1(), inst, 1);
  RowSource s2 = Source(inst.in2(), inst, 2);
  ForRows(rows, n, parallel, [&](uint32_t p) {
    vm::SelectRow({d0, s0.row(p)}, {d1, s1.row(p)}, {d2, s2.row(p)}, {dout, Row(out, p)}, n);
  });
}

// out[p, f] = (imm + p * scale) + f * bias, each operation in float32; p
// counts from the tile's first partition.
void Executor::ExecIota(const Instruction& inst, Rows rows, bool parallel) {
  const TileRef& out = inst.out();
  const uint32_t n = out.num_elements();
  const size_t eo = neff::DTypeSize(out.dtype());
  const float imm = inst.imm(), scale = inst.scale(), bias = inst.bias();
  RowSink o = Sink(out);
  ForRows(rows, n, parallel, [&](uint32_t p) {
    alignas(64) float values[kBlock];
    const float base = imm + float(p) * scale;
    uint8_t* w = o.row(p);
    for (uint32_t f0 = 0; f0 < n; f0 += kBlock) {
      const uint32_t m = std::min(kBlock, n - f0);
      for (uint32_t i = 0; i < m; ++i) values[i] = base + float(f0 + i) * bias;
      vm::Narrow(out.dtype(), values, m, w + f0 * eo);
    }
  });
  Scatter(out, o, rows);
}

void Executor::Execute(const Instruction& inst, Rows rows, bool parallel) {
  switch (inst.opcode()) {
    case neff::DMA_LOAD:
    case neff::DMA_STORE: return ExecDma(inst, rows, parallel);
    case neff::TENSOR_TENSOR: return ExecTensorTensor(inst, rows, parallel);
    case neff::TENSOR_SCALAR: return ExecTensorScalar(inst, rows, parallel);
    case neff::ACTIVATION: return ExecActivation(inst, rows, parallel);
    case neff::TENSOR_REDUCE: return ExecTensorReduce(inst, rows, parallel);
    case neff::MATMUL: return ExecMatmul(inst);
    case neff::TRANSPOSE: return ExecTranspose(inst);
    case neff::TENSOR_SELECT: return ExecTensorSelect(inst, rows, parallel);
    case neff::IOTA: return ExecIota(inst, rows, parallel);
    default: return;
  }
}

namespace {

// The tile whose rows an instruction walks.
const TileRef& MainTile(const Instruction& inst) {
  return inst.opcode() == neff::DMA_STORE || inst.opcode() == neff::TENSOR_REDUCE ? inst.in0() : inst.out();
}

// Every tile an instruction names (null where it has none).
std::array<const TileRef*, 5> TilesOf(const Instruction& inst) {
  return {inst.has_in0() ? &inst.in0() : nullptr, inst.has_in1() ? &inst.in1() : nullptr,
          inst.has_in2() ? &inst.in2() : nullptr, inst.has_out() ? &inst.out() : nullptr,
          inst.has_accum() ? &inst.accum() : nullptr};
}

// Whether an instruction only ever moves data within a partition: row p of
// every tile it touches lies in the same partition, and no row reads bytes
// another row writes. Such instructions can run a few partitions at a time.
bool PartitionLocal(const Instruction& inst) {
  switch (inst.opcode()) {
    case neff::DMA_LOAD:
    case neff::DMA_STORE:
    case neff::TENSOR_TENSOR:
    case neff::TENSOR_SCALAR:
    case neff::ACTIVATION:
    case neff::TENSOR_REDUCE:
    case neff::TENSOR_SELECT:
    case neff::IOTA: break;
    default: return false;  // matmul and transpose cross partitions; a gather may fail midway
  }
  const TileRef& main = MainTile(inst);
  const std::array<const TileRef*, 5> tiles = TilesOf(inst);
  for (const TileRef* t : tiles)
    if (t && (t->start_partition() != main.start_partition() || t->partitions() != main.partitions())) return false;
  // A stepped input is gathered into the instruction's one snapshot (Source).
  for (const TileRef* t : tiles)
    if (t && neff::TileStep(*t) > 1) return false;
  if (inst.opcode() == neff::DMA_STORE) return StoreRowsDisjoint(inst.hbm());
  for (int i = 0; i < 3; ++i) {
    if (!tiles[i] || inst.opcode() == neff::DMA_LOAD) continue;
    if (ReadWriteHazard(*tiles[i], inst.out()) || (inst.has_accum() && ReadWriteHazard(*tiles[i], inst.accum())))
      return false;
  }
  return true;
}

// The HBM bytes a DMA may touch: [lo, hi) within one tensor, or within the
// arena for intermediates (which share it).
struct HbmRegion {
  int64_t space;  // -1: the arena; else the tensor index
  int64_t lo, hi;
};

HbmRegion RegionOf(const Instruction& inst, const neff::Executable& exe) {
  const neff::AccessPattern& ap = inst.hbm();
  const int64_t es = int64_t(neff::DTypeSize(MainTile(inst).dtype()));
  int64_t lo = ap.offset(), hi = ap.offset();
  for (const neff::Dim& d : ap.dims()) {
    int64_t span = (d.count() - 1) * d.stride();  // the verifier bounds every product
    (span < 0 ? lo : hi) += span;
  }
  HbmRegion r{int64_t(ap.tensor()), lo * es, (hi + 1) * es};
  const neff::Tensor& t = exe.tensors(int(ap.tensor()));
  if (t.kind() == neff::INTERMEDIATE) {
    r.space = -1;
    r.lo += int64_t(t.arena_offset());
    r.hi += int64_t(t.arena_offset());
  }
  return r;
}

// A union of byte ranges per space, for overlap queries in O(log n).
class RegionSet {
 public:
  bool Overlaps(const HbmRegion& r) const {
    auto it = set_.lower_bound({r.space, r.hi});  // first range starting at or after r.hi
    if (it == set_.begin()) return false;
    --it;
    return it->first.first == r.space && it->second > r.lo;
  }
  void Add(HbmRegion r) {
    auto it = set_.lower_bound({r.space, r.lo});
    if (it != set_.begin()) {
      auto prev = std::prev(it);
      if (prev->first.first == r.space && prev->second >= r.lo) it = prev;
    }
    while (it != set_.end() && it->first.first == r.space && it->first.second <= r.hi) {
      r.lo = std::min(r.lo, it->first.second);
      r.hi = std::max(r.hi, it->second);
      it = set_.erase(it);
    }
    set_.emplace(std::make_pair(r.space, r.lo), r.hi);
  }
  void Clear() { set_.clear(); }

 private:
  std::map<std::pair<int64_t, int64_t>, int64_t> set_;  // (space, lo) -> hi
};

// A band's working set (per partition bytes x partitions) kept within L2.
constexpr uint64_t kBandBytes = 256 * 1024;

}  // namespace

// Splits each dispatch's start order into windows. A window of
// partition-local instructions can run band by band (all of its
// instructions on partitions [0, b), then [b, 2b), ...) and gives the same
// result as running it in order, provided no DMA in it reads HBM bytes that
// another DMA in it writes, and no two of its stores write the same bytes:
// then every value an instruction reads was produced by an earlier
// instruction in the same partition, or was there before the window began.
// Bands are independent, so they also run on different threads.
void Executor::PlanWindows() {
  const neff::Executable& exe = neff_.executable;
  windows_.clear();
  for (const DispatchSchedule& d : schedules_) {
    std::vector<Window>& out = windows_.emplace_back();
    std::vector<const Instruction*>& insts = ordered_.emplace_back();
    for (const ScheduledInstruction& si : d.order)
      insts.push_back(&exe.kernels(int(si.kernel)).instructions(int(si.instruction)));
    RegionSet loads, stores;
    Window w{0, 0, 0, false};
    uint64_t elements = 0;  // of partition-local work in w
    uint64_t lo[2] = {UINT64_MAX, UINT64_MAX}, hi[2] = {0, 0};  // SBUF, PSUM byte span per partition
    auto close = [&] {
      if (w.end > w.begin) {
        uint64_t span = 0;
        for (int m = 0; m < 2; ++m)
          if (hi[m] > lo[m]) span += hi[m] - lo[m];
        w.band = uint32_t(std::clamp<uint64_t>(kBandBytes / std::max<uint64_t>(span, 1), 1, device_.partitions));
        // Small or single-instruction runs are not worth the bands.
        w.banded = w.end - w.begin > 1 && elements >= kParallelElements;
        any_banded_ |= w.banded;
        out.push_back(w);
      }
      w = Window{w.end, w.end, 0, false};
      elements = 0;
      loads.Clear();
      stores.Clear();
      lo[0] = lo[1] = UINT64_MAX;
      hi[0] = hi[1] = 0;
    };
    for (uint32_t i = 0; i < insts.size(); ++i) {
      const Instruction& inst = *insts[i];
      if (!PartitionLocal(inst)) {
        close();
        out.push_back(Window{i, i + 1, 0, false});  // runs alone, in order
        w = Window{i + 1, i + 1, 0, false};
        continue;
      }
      const bool load = inst.opcode() == neff::DMA_LOAD, store = inst.opcode() == neff::DMA_STORE;
      HbmRegion r{};
      if (load || store) {
        r = RegionOf(inst, exe);
        if (stores.Overlaps(r) || (store && loads.Overlaps(r))) close();
        (load ? loads : stores).Add(r);
      }
      for (const TileRef* t : TilesOf(inst)) {
        if (!t) continue;
        int m = t->space() == neff::PSUM ? 1 : 0;
        lo[m] = std::min<uint64_t>(lo[m], t->byte_offset());
        hi[m] = std::max<uint64_t>(hi[m], t->byte_offset() + TileBytes(*t));
      }
      w.end = i + 1;
      elements += uint64_t(MainTile(inst).partitions()) * MainTile(inst).num_elements();
    }
    close();
  }
}

void Executor::RunBanded(const std::vector<const Instruction*>& insts, const Window& w) {
  const uint32_t P = device_.partitions;
  const uint32_t bands = (P + w.band - 1) / w.band;
  ThreadPool::Shared().ParallelFor(bands, 1, [&](uint32_t b0, uint32_t b1) {
    for (uint32_t b = b0; b < b1; ++b) {
      const uint32_t lo = b * w.band, hi = std::min(P, lo + w.band);
      for (uint32_t i = w.begin; i < w.end; ++i) {
        const Instruction& inst = *insts[i];
        const TileRef& t = MainTile(inst);
        const uint32_t s = t.start_partition(), e = s + t.partitions();
        const uint32_t first = std::max(lo, s), last = std::min(hi, e);
        if (first < last) Execute(inst, Rows{first - s, last - s}, false);
      }
    }
  });
}

// Windows assume distinct graph tensors occupy distinct bytes; a caller may
// alias an output with an input (hbm_ holds this run's addresses).
bool Executor::UserBuffersDisjoint() const {
  const neff::Executable& exe = neff_.executable;
  std::vector<std::pair<uintptr_t, uintptr_t>> user;
  for (const auto* ids : {&exe.graph_inputs(), &exe.graph_outputs()})
    for (uint32_t id : *ids) {
      uintptr_t p = reinterpret_cast<uintptr_t>(hbm_[id]);
      user.emplace_back(p, p + exe.tensors(int(id)).size_bytes());
    }
  std::sort(user.begin(), user.end());
  for (size_t i = 1; i < user.size(); ++i)
    if (user[i].first < user[i - 1].second) return false;
  return true;
}

absl::Status Executor::Run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs) {
  if (!sbuf_)
    if (absl::Status st = AllocateMemories(); !st.ok()) return st;
  const neff::Executable& exe = neff_.executable;
  for (int i = 0; i < exe.tensors_size(); ++i) {
    const neff::Tensor& t = exe.tensors(i);
    if (t.kind() == neff::INTERMEDIATE) hbm_[size_t(i)] = arena_.get() + t.arena_offset();
    // Stores into constants are refused by the verifier, so dropping const is safe.
    if (t.kind() == neff::CONSTANT)
      hbm_[size_t(i)] = reinterpret_cast<uint8_t*>(const_cast<char*>(neff_.Segment(t.segment()).data()));
  }
  for (int i = 0; i < exe.graph_inputs_size(); ++i)
    hbm_[exe.graph_inputs(i)] = static_cast<uint8_t*>(const_cast<void*>(inputs[size_t(i)]));
  for (int i = 0; i < exe.graph_outputs_size(); ++i)
    hbm_[exe.graph_outputs(i)] = static_cast<uint8_t*>(outputs[size_t(i)]);
  // NEURONCC_RT_BANDS=0 runs every instruction in start order: the same
  // bits, slower; for comparing the two paths.
  static const bool bands_enabled = [] {
    const char* env = std::getenv("NEURONCC_RT_BANDS");
    return !(env && std::string(env) == "0");
  }();
  const bool banding = any_banded_ && bands_enabled && UserBuffersDisjoint();

  for (size_t di = 0; di < schedules_.size(); ++di) {
    const DispatchSchedule& d = schedules_[di];
    const std::vector<const Instruction*>& insts = ordered_[di];
    for (const Window& w : windows_[di]) {
      if (banding && w.banded) {
        RunBanded(insts, w);
        continue;
      }
      for (uint32_t i = w.begin; i < w.end; ++i) {
        const Instruction& inst = *insts[i];
        if (inst.opcode() == neff::DMA_GATHER) {
          const ScheduledInstruction& s = d.order[i];
          if (absl::Status st = ExecGather(inst, int(s.kernel), s.instruction); !st.ok()) return st;
        } else {
          Execute(inst, Rows{0, MainTile(inst).partitions()}, true);
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace neuroncc::rt
