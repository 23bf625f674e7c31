#include "executor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "float_convert.h"

namespace neuroncc::rt {

using neff::DType;
using neff::Instruction;
using neff::TileRef;

namespace {

void Widen(DType dt, const uint8_t* src, uint32_t n, float* dst) {
  switch (dt) {
    case neff::F32:
      std::memcpy(dst, src, size_t(n) * 4);
      return;
    case neff::BF16:
      for (uint32_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * size_t(i), 2);
        dst[i] = Bf16ToFloat(h);
      }
      return;
    case neff::F16:
      for (uint32_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * size_t(i), 2);
        dst[i] = F16ToFloat(h);
      }
      return;
    default:
      return;  // the verifier admits only the three dtypes above
  }
}

void Narrow(DType dt, const float* src, uint32_t n, uint8_t* dst) {
  switch (dt) {
    case neff::F32:
      std::memcpy(dst, src, size_t(n) * 4);
      return;
    case neff::BF16:
      for (uint32_t i = 0; i < n; ++i) {
        uint16_t h = FloatToBf16(src[i]);
        std::memcpy(dst + 2 * size_t(i), &h, 2);
      }
      return;
    case neff::F16:
      for (uint32_t i = 0; i < n; ++i) {
        uint16_t h = FloatToF16(src[i]);
        std::memcpy(dst + 2 * size_t(i), &h, 2);
      }
      return;
    default:
      return;
  }
}

float LoadScalar(DType dt, const uint8_t* p) {
  float v = 0;
  Widen(dt, p, 1, &v);
  return v;
}

void StoreScalar(DType dt, float v, uint8_t* p) { Narrow(dt, &v, 1, p); }

// max/min propagate NaN (as torch.maximum / torch.amax do) and order -0 < +0.
inline float MaxF(float a, float b) {
  if (a > b) return a;
  if (b > a) return b;
  if (a != a) return a;
  if (b != b) return b;
  return std::signbit(a) ? b : a;
}

inline float MinF(float a, float b) {
  if (a < b) return a;
  if (b < a) return b;
  if (a != a) return a;
  if (b != b) return b;
  return std::signbit(a) ? a : b;
}

template <typename F>
void Map2(const float* a, const float* b, float* c, uint32_t n, F f) {
  for (uint32_t i = 0; i < n; ++i) c[i] = f(a[i], b[i]);
}

template <typename F>
void Map1(const float* a, float* c, uint32_t n, F f) {
  for (uint32_t i = 0; i < n; ++i) c[i] = f(a[i]);
}

inline float Bool(bool b) { return b ? 1.0f : 0.0f; }

// Comparisons give 1.0 / 0.0; NaN compares false except for NOT_EQUAL
// (the C++ operators behave exactly so).
void ApplyAlu(neff::AluOp op, const float* a, const float* b, float* c, uint32_t n) {
  switch (op) {
    case neff::ADD: return Map2(a, b, c, n, [](float x, float y) { return x + y; });
    case neff::SUB: return Map2(a, b, c, n, [](float x, float y) { return x - y; });
    case neff::MUL: return Map2(a, b, c, n, [](float x, float y) { return x * y; });
    case neff::DIV: return Map2(a, b, c, n, [](float x, float y) { return x / y; });
    case neff::MAX: return Map2(a, b, c, n, MaxF);
    case neff::MIN: return Map2(a, b, c, n, MinF);
    case neff::IS_EQUAL: return Map2(a, b, c, n, [](float x, float y) { return Bool(x == y); });
    case neff::NOT_EQUAL: return Map2(a, b, c, n, [](float x, float y) { return Bool(x != y); });
    case neff::IS_LT: return Map2(a, b, c, n, [](float x, float y) { return Bool(x < y); });
    case neff::IS_LE: return Map2(a, b, c, n, [](float x, float y) { return Bool(x <= y); });
    case neff::IS_GT: return Map2(a, b, c, n, [](float x, float y) { return Bool(x > y); });
    case neff::IS_GE: return Map2(a, b, c, n, [](float x, float y) { return Bool(x >= y); });
    case neff::POW: return Map2(a, b, c, n, [](float x, float y) { return std::pow(x, y); });
    default: return;
  }
}

// alu(in0, s), or alu(s, in0) when `reverse`.
void ApplyAluScalar(neff::AluOp op, const float* a, float s, bool reverse, float* c, uint32_t n) {
  switch (op) {
    case neff::ADD: return Map1(a, c, n, [s](float x) { return x + s; });
    case neff::MUL: return Map1(a, c, n, [s](float x) { return x * s; });
    case neff::MAX: return Map1(a, c, n, [s](float x) { return MaxF(x, s); });
    case neff::MIN: return Map1(a, c, n, [s](float x) { return MinF(x, s); });
    case neff::SUB:
      if (reverse) return Map1(a, c, n, [s](float x) { return s - x; });
      return Map1(a, c, n, [s](float x) { return x - s; });
    case neff::DIV:
      if (reverse) return Map1(a, c, n, [s](float x) { return s / x; });
      return Map1(a, c, n, [s](float x) { return x / s; });
    case neff::BYPASS: return Map1(a, c, n, [](float x) { return x; });
    case neff::IS_EQUAL: return Map1(a, c, n, [s](float x) { return Bool(x == s); });
    case neff::NOT_EQUAL: return Map1(a, c, n, [s](float x) { return Bool(x != s); });
    case neff::IS_LT:
      if (reverse) return Map1(a, c, n, [s](float x) { return Bool(s < x); });
      return Map1(a, c, n, [s](float x) { return Bool(x < s); });
    case neff::IS_LE:
      if (reverse) return Map1(a, c, n, [s](float x) { return Bool(s <= x); });
      return Map1(a, c, n, [s](float x) { return Bool(x <= s); });
    case neff::IS_GT:
      if (reverse) return Map1(a, c, n, [s](float x) { return Bool(s > x); });
      return Map1(a, c, n, [s](float x) { return Bool(x > s); });
    case neff::IS_GE:
      if (reverse) return Map1(a, c, n, [s](float x) { return Bool(s >= x); });
      return Map1(a, c, n, [s](float x) { return Bool(x >= s); });
    case neff::POW:
      if (reverse) return Map1(a, c, n, [s](float x) { return std::pow(s, x); });
      return Map1(a, c, n, [s](float x) { return std::pow(x, s); });
    default: return;
  }
}

// float32 constants of the GELU formulas (correctly rounded).
constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kSqrt2OverPi = 0.79788456080286535588f;

inline float Sigmoid(float y) { return 1.0f / (1.0f + std::exp(-y)); }

// out = func(in * scale + bias). The affine step is a separate multiply and
// add, each rounded to float32 (this file is built with -ffp-contract=off).
void ApplyActivation(neff::ActivationFunc f, const float* a, float scale, float bias, float* c,
                     uint32_t n) {
  switch (f) {
    case neff::IDENTITY: return Map1(a, c, n, [=](float x) { return x * scale + bias; });
    case neff::EXP: return Map1(a, c, n, [=](float x) { return std::exp(x * scale + bias); });
    case neff::RSQRT:
      return Map1(a, c, n, [=](float x) { return 1.0f / std::sqrt(x * scale + bias); });
    case neff::SQRT: return Map1(a, c, n, [=](float x) { return std::sqrt(x * scale + bias); });
    case neff::SQUARE:
      return Map1(a, c, n, [=](float x) {
        float y = x * scale + bias;
        return y * y;
      });
    case neff::NEGATE: return Map1(a, c, n, [=](float x) { return -(x * scale + bias); });
    case neff::RECIPROCAL:
      return Map1(a, c, n, [=](float x) { return 1.0f / (x * scale + bias); });
    case neff::LOG: return Map1(a, c, n, [=](float x) { return std::log(x * scale + bias); });
    case neff::TANH: return Map1(a, c, n, [=](float x) { return std::tanh(x * scale + bias); });
    case neff::SIGMOID: return Map1(a, c, n, [=](float x) { return Sigmoid(x * scale + bias); });
    case neff::RELU:
      // max(y, +0): NaN propagates and -0 becomes +0, as MAX does.
      return Map1(a, c, n, [=](float x) { return MaxF(x * scale + bias, 0.0f); });
    case neff::GELU:
      // (y * 0.5) * (1 + erf(y * (1/sqrt(2)))), each step rounded to float32:
      // PyTorch's CPU formula for gelu(approximate='none').
      return Map1(a, c, n, [=](float x) {
        float y = x * scale + bias;
        return (y * 0.5f) * (1.0f + std::erf(y * kInvSqrt2));
      });
    case neff::GELU_TANH:
      // (y * 0.5) * (1 + tanh(sqrt(2/pi) * (y + 0.044715 * y^3))): PyTorch's
      // CPU formula for gelu(approximate='tanh').
      return Map1(a, c, n, [=](float x) {
        float y = x * scale + bias;
        float cube = y * y * y;
        float inner = kSqrt2OverPi * (y + 0.044715f * cube);
        return (y * 0.5f) * (1.0f + std::tanh(inner));
      });
    case neff::SILU:
      return Map1(a, c, n, [=](float x) {
        float y = x * scale + bias;
        return y * Sigmoid(y);
      });
    case neff::ABS: return Map1(a, c, n, [=](float x) { return std::fabs(x * scale + bias); });
    default: return;
  }
}

bool RangesOverlap(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1) { return a0 < b1 && b0 < a1; }

uint64_t TileBytes(const TileRef& t) { return uint64_t(t.num_elements()) * neff::DTypeSize(t.dtype()); }

// Writing row p of `w` cannot disturb a later row of `r` unless the two tiles
// lie in the same memory, map the same row index to different partitions and
// their regions overlap. (Same mapping is safe: a row's inputs are read in
// full before it is written.)
bool CrossRowHazard(const TileRef& r, const TileRef& w) {
  if (r.space() != w.space() || r.start_partition() == w.start_partition()) return false;
  return RangesOverlap(r.start_partition(), uint64_t(r.start_partition()) + r.partitions(),
                       w.start_partition(), uint64_t(w.start_partition()) + w.partitions()) &&
         RangesOverlap(r.byte_offset(), r.byte_offset() + TileBytes(r), w.byte_offset(),
                       w.byte_offset() + TileBytes(w));
}

// Copies `count` elements of ES bytes between SBUF (contiguous) and HBM
// (strided by `stride` elements).
template <size_t ES, bool kLoad>
void CopyStrided(uint8_t* sbuf, uint8_t* hbm, int64_t stride, int64_t count) {
  if (stride == 1) {
    if (kLoad)
      std::memcpy(sbuf, hbm, size_t(count) * ES);
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

// Moves a tile between SBUF and HBM along `ap`. Partition p's HBM base is
// ap.offset + r * dims[0].stride with r = p, or r = rows[p] for a gather.
template <size_t ES, bool kLoad>
void DmaTile(const neff::AccessPattern& ap, const TileRef& tile, uint8_t* hbm, uint8_t* sbuf,
             uint64_t partition_bytes, const int64_t* rows = nullptr) {
  const int nd = ap.dims_size();  // >= 2: partition dim + at least one free dim
  int64_t count[8], stride[8], idx[8];
  for (int d = 0; d < nd; ++d) {
    count[d] = ap.dims(d).count();
    stride[d] = ap.dims(d).stride();
    idx[d] = 0;
  }
  const int inner = nd - 1;
  for (uint32_t p = 0; p < tile.partitions(); ++p) {
    uint8_t* row = sbuf + (uint64_t(tile.start_partition()) + p) * partition_bytes + tile.byte_offset();
    int64_t base = ap.offset() + (rows ? rows[p] : int64_t(p)) * stride[0];
    int64_t outer = 0;
    size_t f = 0;
    for (int d = 1; d < inner; ++d) idx[d] = 0;
    while (true) {
      CopyStrided<ES, kLoad>(row + f * ES, hbm + (base + outer) * int64_t(ES), stride[inner],
                             count[inner]);
      f += size_t(count[inner]);
      // Odometer over the outer free dims; the one just outside `inner` moves fastest.
      int d = inner - 1;
      for (; d >= 1; --d) {
        outer += stride[d];
        if (++idx[d] < count[d]) break;
        outer -= stride[d] * count[d];
        idx[d] = 0;
      }
      if (d < 1) break;
    }
  }
}

}  // namespace

struct Executor::RowSource {
  const uint8_t* base;
  uint64_t stride;
  const uint8_t* row(uint32_t p) const { return base + uint64_t(p) * stride; }
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
  // Widest row: a partition full of 2-byte elements.
  size_t row = size_t(device_.sbuf_bytes_per_partition / 2) + 1;
  a_.resize(row);
  b_.resize(row);
  c_.resize(row);
  d_.resize(row);
  mm_a_.resize(size_t(neff::kMatmulMaxK) * neff::kMatmulMaxM);
  mm_b_.resize(size_t(neff::kMatmulMaxK) * neff::kMatmulMaxN);
  mm_s_.resize(size_t(neff::kMatmulMaxM) * neff::kMatmulMaxN);
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
  bool hazard = CrossRowHazard(in, inst.out()) || (inst.has_accum() && CrossRowHazard(in, inst.accum()));
  if (!hazard) return {Row(in, 0), PartitionBytes(in)};
  uint64_t bytes = TileBytes(in);
  std::vector<uint8_t>& snap = snapshot_[slot];
  snap.resize(size_t(bytes) * in.partitions());
  for (uint32_t p = 0; p < in.partitions(); ++p)
    std::memcpy(snap.data() + p * bytes, Row(in, p), size_t(bytes));
  return {snap.data(), bytes};
}

void Executor::ExecDma(const Instruction& inst) {
  const neff::AccessPattern& ap = inst.hbm();
  uint8_t* hbm = hbm_[ap.tensor()];
  uint64_t pb = device_.sbuf_bytes_per_partition;
  if (inst.opcode() == neff::DMA_LOAD) {
    if (neff::DTypeSize(inst.out().dtype()) == 4)
      DmaTile<4, true>(ap, inst.out(), hbm, sbuf_.get(), pb);
    else
      DmaTile<2, true>(ap, inst.out(), hbm, sbuf_.get(), pb);
  } else {
    if (neff::DTypeSize(inst.in0().dtype()) == 4)
      DmaTile<4, false>(ap, inst.in0(), hbm, sbuf_.get(), pb);
    else
      DmaTile<2, false>(ap, inst.in0(), hbm, sbuf_.get(), pb);
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
    DmaTile<4, true>(inst.hbm(), out, table, sbuf_.get(), pb, gather_rows_.data());
  else
    DmaTile<2, true>(inst.hbm(), out, table, sbuf_.get(), pb, gather_rows_.data());
  return absl::OkStatus();
}

void Executor::ExecTensorTensor(const Instruction& inst) {
  const TileRef& out = inst.out();
  uint32_t n = out.num_elements();
  RowSource s0 = Source(inst.in0(), inst, 0);
  RowSource s1 = Source(inst.in1(), inst, 1);
  for (uint32_t p = 0; p < out.partitions(); ++p) {
    Widen(inst.in0().dtype(), s0.row(p), n, a_.data());
    Widen(inst.in1().dtype(), s1.row(p), n, b_.data());
    ApplyAlu(inst.alu(), a_.data(), b_.data(), c_.data(), n);
    Narrow(out.dtype(), c_.data(), n, Row(out, p));
  }
}

void Executor::ExecTensorScalar(const Instruction& inst) {
  const TileRef& out = inst.out();
  uint32_t n = out.num_elements();
  RowSource s0 = Source(inst.in0(), inst, 0);
  RowSource s1 = inst.has_in1() ? Source(inst.in1(), inst, 1) : RowSource{nullptr, 0};
  for (uint32_t p = 0; p < out.partitions(); ++p) {
    float s = inst.has_in1() ? LoadScalar(inst.in1().dtype(), s1.row(p)) : inst.imm();
    Widen(inst.in0().dtype(), s0.row(p), n, a_.data());
    ApplyAluScalar(inst.alu(), a_.data(), s, inst.reverse(), c_.data(), n);
    Narrow(out.dtype(), c_.data(), n, Row(out, p));
  }
}

void Executor::ExecActivation(const Instruction& inst) {
  const TileRef& out = inst.out();
  uint32_t n = out.num_elements();
  RowSource s0 = Source(inst.in0(), inst, 0);
  RowSource s1 = inst.has_in1() ? Source(inst.in1(), inst, 1) : RowSource{nullptr, 0};
  RowSource s2 = inst.has_in2() ? Source(inst.in2(), inst, 2) : RowSource{nullptr, 0};
  for (uint32_t p = 0; p < out.partitions(); ++p) {
    float scale = inst.has_in1() ? LoadScalar(inst.in1().dtype(), s1.row(p)) : inst.scale();
    float bias = inst.has_in2() ? LoadScalar(inst.in2().dtype(), s2.row(p)) : inst.bias();
    Widen(inst.in0().dtype(), s0.row(p), n, a_.data());
    ApplyActivation(inst.func(), a_.data(), scale, bias, c_.data(), n);
    Narrow(out.dtype(), c_.data(), n, Row(out, p));
    if (inst.has_accum()) {
      // Sequential float32 sum of the unrounded results, f = 0..n-1.
      float sum = 0.0f;
      for (uint32_t i = 0; i < n; ++i) sum += c_[i];
      StoreScalar(inst.accum().dtype(), sum, Row(inst.accum(), p));
    }
  }
}

void Executor::ExecTensorReduce(const Instruction& inst) {
  const TileRef& in = inst.in0();
  uint32_t n = in.num_elements();
  RowSource s0 = Source(in, inst, 0);
  for (uint32_t p = 0; p < in.partitions(); ++p) {
    Widen(in.dtype(), s0.row(p), n, a_.data());
    const float* a = a_.data();
    float acc = a[0];
    switch (inst.alu()) {
      case neff::ADD:
        for (uint32_t i = 1; i < n; ++i) acc += a[i];
        break;
      case neff::MAX:
        for (uint32_t i = 1; i < n; ++i) acc = MaxF(acc, a[i]);
        break;
      case neff::MIN:
        for (uint32_t i = 1; i < n; ++i) acc = MinF(acc, a[i]);
        break;
      default:
        break;
    }
    StoreScalar(inst.out().dtype(), acc, Row(inst.out(), p));
  }
}

namespace {

// s[m][n] = sum_k A[k][m] * B[k][n] for the MB x NB block of outputs at
// (m0, n0): the partial sums stay in registers while k runs 0, 1, ..., K-1,
// each product and each addition rounded to float32 (the file is built with
// -ffp-contract=off). Blocking only changes which sums are kept in registers
// together, never the order of additions within one sum.
template <int MB, int NB>
inline void MatmulBlock(const float* A, const float* B, uint32_t K, uint32_t M, uint32_t N, uint32_t m0,
                        uint32_t n0, float* S) {
  float acc[MB][NB];
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) acc[i][j] = A[m0 + i] * B[n0 + j];
  for (uint32_t k = 1; k < K; ++k) {
    const float* a = A + size_t(k) * M + m0;
    const float* b = B + size_t(k) * N + n0;
    for (int i = 0; i < MB; ++i)
      for (int j = 0; j < NB; ++j) acc[i][j] += a[i] * b[j];
  }
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) S[size_t(m0 + i) * N + n0 + j] = acc[i][j];
}

}  // namespace

// out[m, n] = accumulate ? out[m, n] + s[m, n] : s[m, n], where
// s[m, n] = sum_k in0[k, m] * in1[k, n] summed in increasing k. Both operands
// are widened to float32 once; the sums are computed in 4 x 8 register
// blocks, walking n-strips of in1 so that a strip stays in L1 across m.
void Executor::ExecMatmul(const Instruction& inst) {
  const TileRef& in0 = inst.in0();
  const TileRef& in1 = inst.in1();
  const TileRef& out = inst.out();
  const uint32_t K = in0.partitions(), M = in0.num_elements(), N = in1.num_elements();
  float* A = mm_a_.data();  // [K][M]
  float* B = mm_b_.data();  // [K][N]
  float* S = mm_s_.data();  // [M][N]
  for (uint32_t k = 0; k < K; ++k) {
    Widen(in0.dtype(), Row(in0, k), M, A + size_t(k) * M);
    Widen(in1.dtype(), Row(in1, k), N, B + size_t(k) * N);
  }
  constexpr uint32_t kMB = 4, kNB = 8;
  const uint32_t m_full = M / kMB * kMB, n_full = N / kNB * kNB;
  for (uint32_t n0 = 0; n0 < n_full; n0 += kNB) {
    for (uint32_t m0 = 0; m0 < m_full; m0 += kMB) MatmulBlock<kMB, kNB>(A, B, K, M, N, m0, n0, S);
    for (uint32_t m0 = m_full; m0 < M; ++m0) MatmulBlock<1, kNB>(A, B, K, M, N, m0, n0, S);
  }
  for (uint32_t n0 = n_full; n0 < N; ++n0) {
    for (uint32_t m0 = 0; m0 < m_full; m0 += kMB) MatmulBlock<kMB, 1>(A, B, K, M, N, m0, n0, S);
    for (uint32_t m0 = m_full; m0 < M; ++m0) MatmulBlock<1, 1>(A, B, K, M, N, m0, n0, S);
  }
  float* old = d_.data();
  for (uint32_t m = 0; m < M; ++m) {
    float* s = S + size_t(m) * N;
    uint8_t* row = Row(out, m);
    if (inst.accumulate()) {
      Widen(neff::F32, row, N, old);
      for (uint32_t n = 0; n < N; ++n) s[n] = old[n] + s[n];
    }
    Narrow(neff::F32, s, N, row);
  }
}

// out[f, p] = in0[p, f], exactly (float32 holds every input value).
void Executor::ExecTranspose(const Instruction& inst) {
  const TileRef& in0 = inst.in0();
  const TileRef& out = inst.out();
  const uint32_t P = in0.partitions(), F = in0.num_elements();
  float* T = mm_a_.data();  // [P][F], P, F <= 128
  for (uint32_t p = 0; p < P; ++p) Widen(in0.dtype(), Row(in0, p), F, T + size_t(p) * F);
  float* col = c_.data();
  for (uint32_t f = 0; f < F; ++f) {
    for (uint32_t p = 0; p < P; ++p) col[p] = T[size_t(p) * F + f];
    Narrow(out.dtype(), col, P, Row(out, f));
  }
}

void Executor::ExecTensorSelect(const Instruction& inst) {
  const TileRef& out = inst.out();
  uint32_t n = out.num_elements();
  RowSource s0 = Source(inst.in0(), inst, 0);
  RowSource s1 = Source(inst.in1(), inst, 1);
  RowSource s2 = Source(inst.in2(), inst, 2);
  for (uint32_t p = 0; p < out.partitions(); ++p) {
    Widen(inst.in0().dtype(), s0.row(p), n, a_.data());
    Widen(inst.in1().dtype(), s1.row(p), n, b_.data());
    Widen(inst.in2().dtype(), s2.row(p), n, d_.data());
    const float *a = a_.data(), *b = b_.data(), *pred = d_.data();
    float* c = c_.data();
    // A NaN predicate is != 0 and selects in0; -0 selects in1.
    for (uint32_t i = 0; i < n; ++i) c[i] = pred[i] != 0.0f ? a[i] : b[i];
    Narrow(out.dtype(), c, n, Row(out, p));
  }
}

// out[p, f] = (imm + p * scale) + f * bias, each operation in float32; p
// counts from the tile's first partition.
void Executor::ExecIota(const Instruction& inst) {
  const TileRef& out = inst.out();
  uint32_t n = out.num_elements();
  const float imm = inst.imm(), scale = inst.scale(), bias = inst.bias();
  float* c = c_.data();
  for (uint32_t p = 0; p < out.partitions(); ++p) {
    const float base = imm + float(p) * scale;
    for (uint32_t f = 0; f < n; ++f) c[f] = base + float(f) * bias;
    Narrow(out.dtype(), c, n, Row(out, p));
  }
}

void Executor::Execute(const Instruction& inst) {
  switch (inst.opcode()) {
    case neff::DMA_LOAD:
    case neff::DMA_STORE: return ExecDma(inst);
    case neff::TENSOR_TENSOR: return ExecTensorTensor(inst);
    case neff::TENSOR_SCALAR: return ExecTensorScalar(inst);
    case neff::ACTIVATION: return ExecActivation(inst);
    case neff::TENSOR_REDUCE: return ExecTensorReduce(inst);
    case neff::MATMUL: return ExecMatmul(inst);
    case neff::TRANSPOSE: return ExecTranspose(inst);
    case neff::TENSOR_SELECT: return ExecTensorSelect(inst);
    case neff::IOTA: return ExecIota(inst);
    default: return;
  }
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
  for (const DispatchSchedule& d : schedules_) {
    for (const ScheduledInstruction& s : d.order) {
      const Instruction& inst = exe.kernels(int(s.kernel)).instructions(int(s.instruction));
      if (inst.opcode() == neff::DMA_GATHER) {
        if (absl::Status st = ExecGather(inst, int(s.kernel), s.instruction); !st.ok()) return st;
      } else {
        Execute(inst);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace neuroncc::rt
