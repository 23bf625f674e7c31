#include "neff_format.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "device_model.h"
#include "race_check.h"

namespace neuroncc::neff {
namespace {

// Byte offsets of the public header layout.
constexpr size_t kOffPkgVersion = 0;
constexpr size_t kOffHeaderSize = 8;
constexpr size_t kOffDataSize = 16;
constexpr size_t kOffVersionMajor = 24;
constexpr size_t kOffVersionMinor = 32;
constexpr size_t kOffBuildVersion = 40;   // char[128]
constexpr size_t kOffNumTpb = 168;        // u32
constexpr size_t kOffHash = 172;          // u8[32]
constexpr size_t kOffUuid = 204;          // u8[16]
constexpr size_t kOffName = 220;          // char[256]
constexpr size_t kOffRequestedTpb = 476;  // u32
constexpr size_t kOffTpbPerNode = 480;    // u8[64]
constexpr size_t kOffFeatureBits = 544;   // u64
constexpr size_t kOffLncSize = 552;       // u32
constexpr size_t kBuildVersionLen = 128;
constexpr size_t kNameLen = 256;

// Generous sanity bounds; they keep every size computation far from overflow.
constexpr int64_t kMaxDimExtent = int64_t(1) << 40;
constexpr int kMaxApDims = 5;
// Bound on one access-pattern dim's reach; kMaxApDims of them plus the offset
// stay far below 2^63.
constexpr int64_t kMaxSpan = int64_t(1) << 58;

template <typename T>
void PutLE(std::string& buf, size_t off, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) buf[off + i] = char(uint64_t(value) >> (8 * i) & 0xff);
}

template <typename T>
T GetLE(std::string_view buf, size_t off) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= uint64_t(uint8_t(buf[off + i])) << (8 * i);
  return T(v);
}

std::string GetCString(std::string_view buf, size_t off, size_t len) {
  std::string_view field = buf.substr(off, len);
  size_t end = field.find('\0');
  return std::string(field.substr(0, end == std::string_view::npos ? len : end));
}

size_t AlignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

absl::Status Bad(const std::string& what) {
  return absl::DataLossError(absl::StrCat("invalid NEFF: ", what));
}

// Tiles (SBUF, PSUM) and DMA loads/stores hold floating-point data only.
bool ValidDType(DType d) { return d == F32 || d == BF16 || d == F16; }
// HBM tensors may also be integer: indices read by DMA_GATHER, and graph
// inputs and outputs that DMA loads and stores convert from and into
// float32 tiles.
bool ValidTensorDType(DType d) { return ValidDType(d) || IsIntegerDType(d); }

// Offsets are computed in bytes relative to the whole file, as the padding
// between the executable and the first segment aligns file positions.
size_t FirstSegmentOffset(size_t executable_size) {
  return AlignUp(kHeaderSize + 8 + executable_size, kSegmentAlignment) - kHeaderSize;
}

}  // namespace

bool IsIntegerDType(DType d) { return d == I32 || d == I64 || d == BOOL || d == U8 || d == I8 || d == I16; }

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case F32: return 4;
    case BF16: return 2;
    case F16: return 2;
    case I32: return 4;
    case I64: return 8;
    case BOOL: return 1;
    case U8: return 1;
    case I8: return 1;
    case I16: return 2;
    default: return 0;
  }
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case F32: return "float32";
    case BF16: return "bfloat16";
    case F16: return "float16";
    case I32: return "int32";
    case I64: return "int64";
    case BOOL: return "bool";
    case U8: return "uint8";
    case I8: return "int8";
    case I16: return "int16";
    default: return "invalid";
  }
}

std::string_view Neff::Segment(uint32_t index) const {
  const ConstantSegment& seg = executable.segments(int(index));
  return payload().substr(seg.offset(), seg.size());
}

std::string SerializeHeader(const Header& h) {
  std::string buf(kHeaderSize, '\0');
  PutLE<uint64_t>(buf, kOffPkgVersion, h.pkg_version);
  PutLE<uint64_t>(buf, kOffHeaderSize, h.header_size);
  PutLE<uint64_t>(buf, kOffDataSize, h.data_size);
  PutLE<uint64_t>(buf, kOffVersionMajor, h.neff_version_major);
  PutLE<uint64_t>(buf, kOffVersionMinor, h.neff_version_minor);
  std::memcpy(&buf[kOffBuildVersion], h.neff_build_version.data(),
              std::min(h.neff_build_version.size(), kBuildVersionLen - 1));
  PutLE<uint32_t>(buf, kOffNumTpb, h.num_tpb);
  std::memcpy(&buf[kOffHash], h.hash.data(), h.hash.size());
  // The uuid is the hash's last 16 bytes, whatever h.uuid holds: a header
  // written with a new hash stays consistent.
  std::memcpy(&buf[kOffUuid], h.hash.data() + 16, h.uuid.size());
  std::memcpy(&buf[kOffName], h.name.data(), std::min(h.name.size(), kNameLen - 1));
  PutLE<uint32_t>(buf, kOffRequestedTpb, h.requested_tpb_count);
  std::memcpy(&buf[kOffTpbPerNode], h.tpb_per_node.data(), h.tpb_per_node.size());
  PutLE<uint64_t>(buf, kOffFeatureBits, h.feature_bits);
  PutLE<uint32_t>(buf, kOffLncSize, h.lnc_size);
  return buf;
}

bool LooksLikeNeff(std::string_view bytes) {
  return bytes.size() >= kHeaderSize && GetLE<uint64_t>(bytes, kOffPkgVersion) == kPackageVersion &&
         GetLE<uint64_t>(bytes, kOffHeaderSize) == kHeaderSize;
}

absl::StatusOr<Header> ParseHeader(std::string_view bytes) {
  if (bytes.size() < kHeaderSize)
    return Bad(absl::StrCat("file is ", bytes.size(), " bytes, shorter than the ",
                            kHeaderSize, "-byte header"));
  if (!LooksLikeNeff(bytes))
    return Bad(absl::StrCat("not a NEFF file (bad magic: a NEFF begins with package version ", kPackageVersion,
                            " and header size ", kHeaderSize, ", this file with ",
                            GetLE<uint64_t>(bytes, kOffPkgVersion), " and ",
                            GetLE<uint64_t>(bytes, kOffHeaderSize), ")"));
  Header h;
  h.pkg_version = GetLE<uint64_t>(bytes, kOffPkgVersion);
  h.header_size = GetLE<uint64_t>(bytes, kOffHeaderSize);
  h.data_size = GetLE<uint64_t>(bytes, kOffDataSize);
  h.neff_version_major = GetLE<uint64_t>(bytes, kOffVersionMajor);
  h.neff_version_minor = GetLE<uint64_t>(bytes, kOffVersionMinor);
  h.neff_build_version = GetCString(bytes, kOffBuildVersion, kBuildVersionLen);
  h.num_tpb = GetLE<uint32_t>(bytes, kOffNumTpb);
  std::memcpy(h.hash.data(), bytes.data() + kOffHash, h.hash.size());
  std::memcpy(h.uuid.data(), bytes.data() + kOffUuid, h.uuid.size());
  h.name = GetCString(bytes, kOffName, kNameLen);
  h.requested_tpb_count = GetLE<uint32_t>(bytes, kOffRequestedTpb);
  std::memcpy(h.tpb_per_node.data(), bytes.data() + kOffTpbPerNode, h.tpb_per_node.size());
  h.feature_bits = GetLE<uint64_t>(bytes, kOffFeatureBits);
  h.lnc_size = GetLE<uint32_t>(bytes, kOffLncSize);
  // The bytes after the last field are reserved and written as zeros; a
  // nonzero byte there means corruption (the payload hash does not cover the header).
  for (size_t i = kOffLncSize + 4; i < kHeaderSize; ++i)
    if (bytes[i] != 0)
      return Bad(absl::StrCat("reserved header byte ", i, " is not zero (corrupted header)"));
  if (h.header_size != kHeaderSize)
    return Bad(absl::StrCat("header_size is ", h.header_size, ", expected ", kHeaderSize));
  // Fields the payload hash does not cover: each must hold what this format
  // writes, or the header was changed after the file was made.
  if (h.num_tpb != 1 || h.requested_tpb_count != 1 || h.lnc_size != 1)
    return Bad(absl::StrCat("header asks for ", h.num_tpb, " NeuronCore(s), ", h.requested_tpb_count,
                            " requested, logical core size ", h.lnc_size,
                            "; these NEFFs run on one core (1, 1, 1): corrupted or foreign header"));
  if (h.feature_bits != 0)
    return Bad(absl::StrCat("header feature bits 0x", absl::Hex(h.feature_bits),
                            " name features this format does not have (corrupted header)"));
  for (uint8_t b : h.tpb_per_node)
    if (b != 0) return Bad("header tpb_per_node is not all zero (corrupted header)");
  if (!std::equal(h.uuid.begin(), h.uuid.end(), h.hash.begin() + 16))
    return Bad("header uuid does not match its hash (the uuid is the hash's last 16 bytes): corrupted header");
  if (h.neff_version_major != kVersionMajor)
    return Bad(absl::StrCat("unsupported neff_version_major ", h.neff_version_major,
                            " (this build reads ", kVersionMajor, ")"));
  return h;
}

absl::StatusOr<std::string> SerializeNeff(Executable exe,
                                          const std::vector<std::string>& segments,
                                          std::string_view name,
                                          std::string_view build_version) {
  return SerializeNeff(std::move(exe), std::vector<std::string_view>(segments.begin(), segments.end()), name,
                       build_version);
}

absl::StatusOr<std::string> SerializeNeff(Executable exe,
                                          const std::vector<std::string_view>& segments,
                                          std::string_view name,
                                          std::string_view build_version) {
  exe.set_format_version(kFormatVersion);
  exe.clear_segments();
  // Segment offsets depend on the executable's size, which depends on the
  // offsets' varint widths: iterate until the layout is stable.
  std::string exe_bytes;
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::string before = exe_bytes;
    size_t off = FirstSegmentOffset(exe_bytes.size());
    exe.clear_segments();
    for (std::string_view s : segments) {
      ConstantSegment* seg = exe.add_segments();
      seg->set_offset(off);
      seg->set_size(s.size());
      off = AlignUp(kHeaderSize + off + s.size(), kSegmentAlignment) - kHeaderSize;
    }
    exe_bytes.clear();
    if (!exe.SerializeToString(&exe_bytes))  // deterministic: no map fields
      return absl::InternalError("protobuf serialization failed");
    if (exe_bytes.size() == before.size() && attempt > 0) break;
  }
  // The whole file in one string, sized once: the header's bytes first
  // (written last, once the payload's hash is known), then the payload.
  // Grown piece by piece and then prefixed with the header, a 100 MB model
  // was copied three more times (each copy into fresh pages).
  size_t payload_size = 8 + exe_bytes.size();
  if (exe.segments_size() > 0)
    payload_size = std::max<size_t>(payload_size, exe.segments(exe.segments_size() - 1).offset() +
                                                      segments.back().size());
  std::string file;
  file.reserve(kHeaderSize + payload_size);
  file.resize(kHeaderSize + 8, '\0');
  PutLE<uint64_t>(file, kHeaderSize, exe_bytes.size());
  file += exe_bytes;
  for (int i = 0; i < exe.segments_size(); ++i) {
    file.resize(kHeaderSize + exe.segments(i).offset(), '\0');
    file += segments[size_t(i)];
  }
  const size_t payload_bytes = file.size() - kHeaderSize;
  if (absl::Status st = VerifyExecutable(exe, payload_bytes); !st.ok()) return st;

  Header h;
  h.data_size = payload_bytes;
  h.neff_build_version = std::string(build_version);
  h.hash = Sha256(file.data() + kHeaderSize, payload_bytes);
  std::copy(h.hash.begin() + 16, h.hash.end(), h.uuid.begin());
  h.name = std::string(name);
  file.replace(0, kHeaderSize, SerializeHeader(h));
  return file;
}

std::vector<KernelRange> Dispatches(const Executable& exe) {
  std::vector<KernelRange> out;
  for (int k = 0; k < exe.kernels_size(); ++k) {
    bool starts = out.empty() || exe.dispatch_model() == DISPATCH_PER_KERNEL ||
                  (exe.dispatch_model() == DISPATCH_PER_SOURCE_OP &&
                   exe.kernels(k).dispatch() != exe.kernels(k - 1).dispatch());
    if (starts) out.push_back({k, 0});
    ++out.back().count;
  }
  return out;
}

const char* DispatchModelName(DispatchModel model) {
  switch (model) {
    case DISPATCH_PER_KERNEL: return "one dispatch per kernel";
    case DISPATCH_PER_SOURCE_OP: return "one dispatch per source ATen op (eager)";
    case DISPATCH_WHOLE_GRAPH: return "the whole graph is one dispatch";
    default: return "unknown";
  }
}

uint64_t ProfileHash(const Header& header) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(header.hash[size_t(i)]) << (8 * i);
  return v;
}

namespace {

Sha256Digest PayloadDigest(std::string_view bytes) {
  return Sha256(bytes.data() + kHeaderSize, bytes.size() - kHeaderSize);
}

// Parses and verifies `image`, keeping it as the Neff's. The payload digest
// is `digest` when the caller computed it already, else computed here once
// the header has been checked.
absl::StatusOr<Neff> ParseImage(std::string&& image, const Sha256Digest* digest);

}  // namespace

absl::StatusOr<Neff> ParseNeff(std::string_view bytes) {
  // A large file is hashed on a second thread while this one copies it: the
  // two passes together take as long as the hash alone.
  constexpr size_t kConcurrentHash = size_t(16) << 20;
  if (bytes.size() < kConcurrentHash || !LooksLikeNeff(bytes)) return ParseImage(std::string(bytes), nullptr);
  Sha256Digest digest{};
  std::thread hasher([&] { digest = PayloadDigest(bytes); });
  std::string image(bytes);
  hasher.join();
  return ParseImage(std::move(image), &digest);
}

absl::StatusOr<Neff> ParseNeff(std::string&& image) { return ParseImage(std::move(image), nullptr); }

namespace {

absl::StatusOr<Neff> ParseImage(std::string&& image, const Sha256Digest* digest) {
  const std::string_view bytes(image);
  absl::StatusOr<Header> header = ParseHeader(bytes);
  if (!header.ok()) return header.status();
  size_t payload_size = bytes.size() - kHeaderSize;
  if (header->data_size != payload_size)
    return Bad(absl::StrCat("header says ", header->data_size, " payload bytes but the file has ",
                            payload_size, " (truncated or padded file)"));
  if ((digest ? *digest : PayloadDigest(bytes)) != header->hash)
    return Bad("payload SHA-256 does not match the header hash (corrupted file)");
  std::string_view payload = bytes.substr(kHeaderSize);
  if (payload.size() < 8) return Bad("payload too short for the executable length");
  uint64_t exe_size = GetLE<uint64_t>(payload, 0);
  if (exe_size > payload.size() - 8)
    return Bad(absl::StrCat("executable length ", exe_size, " exceeds the payload"));
  // protobuf takes an int length; a larger value would wrap negative.
  if (exe_size > uint64_t(std::numeric_limits<int>::max()))
    return Bad(absl::StrCat("executable length ", exe_size, " exceeds the 2 GiB protobuf limit"));
  Neff neff;
  neff.header = *header;
  if (!neff.executable.ParseFromArray(payload.data() + 8, int(exe_size)))
    return Bad("executable protobuf does not parse");
  if (neff.executable.format_version() != kFormatVersion)
    return Bad(absl::StrCat("unsupported executable format_version ",
                            neff.executable.format_version()));
  for (const ConstantSegment& seg : neff.executable.segments()) {
    if (seg.offset() < 8 + exe_size)
      return Bad("constant segment overlaps the executable");
  }
  if (absl::Status st = VerifyExecutable(neff.executable, payload.size()); !st.ok()) return st;
  neff.image = std::move(image);
  return neff;
}

}  // namespace

namespace {

absl::Status VerifyTile(const TileRef& t, const DeviceParams& dev, const std::string& where) {
  if (IsIntegerDType(t.dtype()))
    return Bad(absl::StrCat(where, ": tile has dtype ", DTypeName(t.dtype()),
                            "; tiles hold float32, bfloat16 or float16 only (integer HBM tensors are "
                            "read as dma_gather indices or converted to float32 by a dma_load)"));
  if (!ValidDType(t.dtype())) return Bad(absl::StrCat(where, ": tile has an invalid dtype"));
  if (t.space() != SBUF && t.space() != PSUM)
    return Bad(absl::StrCat(where, ": tile has an invalid memory space ", int(t.space())));
  const bool psum = t.space() == PSUM;
  if (psum && t.dtype() != F32)
    return Bad(absl::StrCat(where, ": PSUM tiles hold float32, this one is ", DTypeName(t.dtype())));
  if (t.partitions() == 0 || t.start_partition() >= dev.partitions ||
      t.partitions() > dev.partitions - t.start_partition())
    return Bad(absl::StrCat(where, ": tile partitions [", t.start_partition(), ", +",
                            t.partitions(), ") outside 0..", dev.partitions));
  const uint64_t capacity = psum ? dev.psum_bytes_per_partition : dev.sbuf_bytes_per_partition;
  uint64_t end = uint64_t(t.byte_offset()) + TileSpanBytes(t);
  if (t.num_elements() == 0 || end > capacity)
    return Bad(absl::StrCat(where, ": tile bytes [", t.byte_offset(), ", ", end, ") outside the ",
                            capacity, "-byte ", psum ? "PSUM" : "SBUF", " partition"));
  return absl::OkStatus();
}

// Only the tensor engine writes PSUM; the other engines read it (that is how
// matmul results leave PSUM) and write SBUF.
absl::Status WritesSbuf(const TileRef& t, const Instruction& inst, const std::string& where) {
  if (t.space() != SBUF)
    return Bad(absl::StrCat(where, ": ", OpcodeName(inst.opcode()),
                            " writes a PSUM tile; only the tensor engine (matmul, transpose) "
                            "writes PSUM"));
  return absl::OkStatus();
}

// The output of MATMUL / TRANSPOSE: a float32 PSUM tile of rows x cols that
// stays inside one 2 KiB PSUM bank.
absl::Status VerifyPsumOut(const Instruction& inst, uint32_t rows, uint32_t cols,
                           const std::string& where) {
  const TileRef& out = inst.out();
  const char* op = OpcodeName(inst.opcode());
  if (out.space() != PSUM)
    return Bad(absl::StrCat(where, ": ", op, " writes a PSUM tile, but out is in SBUF"));
  if (out.partitions() != rows || out.num_elements() != cols)
    return Bad(absl::StrCat(where, ": ", op, " output tile is ", out.partitions(), "x",
                            out.num_elements(), ", expected ", rows, "x", cols));
  uint64_t in_bank = out.byte_offset() % kPsumBankBytes;
  if (in_bank + uint64_t(cols) * 4 > kPsumBankBytes)
    return Bad(absl::StrCat(where, ": ", op, " output bytes [", out.byte_offset(), ", ",
                            uint64_t(out.byte_offset()) + uint64_t(cols) * 4, ") cross a ",
                            kPsumBankBytes, "-byte PSUM bank boundary"));
  return absl::OkStatus();
}

bool ValidAlu(AluOp op, bool allow_bypass) {
  if (op >= ADD && op <= MIN) return true;
  if (op == BYPASS) return allow_bypass;
  return op >= IS_EQUAL && op <= POW;
}

absl::Status SameShape(const TileRef& a, const TileRef& b, const std::string& where) {
  if (a.partitions() != b.partitions() || a.num_elements() != b.num_elements())
    return Bad(absl::StrCat(where, ": operand tiles differ in shape (", a.partitions(), "x",
                            a.num_elements(), " vs ", b.partitions(), "x", b.num_elements(), ")"));
  return absl::OkStatus();
}

absl::Status SamePartitions(const TileRef& a, const TileRef& b, const std::string& where) {
  if (a.partitions() != b.partitions())
    return Bad(absl::StrCat(where, ": per-partition operand spans ", b.partitions(),
                            " partitions, expected ", a.partitions()));
  return absl::OkStatus();
}

// The HBM side of a DMA. dims[0] walks the tile's partitions; for a
// DMA_GATHER its stride multiplies the looked-up row index instead of the
// partition number, so the bounds are checked for rows 0 .. index_bound - 1
// (the executor refuses any index outside that range).
absl::Status VerifyAccessPattern(const Instruction& inst, const TileRef& tile,
                                 const Executable& exe, const std::string& where) {
  const AccessPattern& ap = inst.hbm();
  const bool gather = inst.opcode() == DMA_GATHER;
  if (ap.tensor() >= uint32_t(exe.tensors_size()))
    return Bad(absl::StrCat(where, ": DMA names tensor ", ap.tensor(), " of ", exe.tensors_size()));
  const Tensor& t = exe.tensors(int(ap.tensor()));
  if (IsIntegerDType(t.dtype())) {
    if (gather || tile.dtype() != F32)
      return Bad(absl::StrCat(where, ": ", OpcodeName(inst.opcode()), " accesses ", DTypeName(t.dtype()),
                              " tensor '", t.name(), "' as ", DTypeName(tile.dtype()),
                              " data; integer tensors are read as dma_gather indices (index_tensor), or "
                              "loaded into and stored from float32 tiles, the DMA converting each value"));
  } else if (t.dtype() != tile.dtype()) {
    return Bad(absl::StrCat(where, ": DMA between ", DTypeName(t.dtype()), " tensor and ",
                            DTypeName(tile.dtype()), " tile"));
  }
  if (ap.partition_dims() > (gather ? 1u : 2u))
    return Bad(absl::StrCat(where, ": access pattern has ", ap.partition_dims(), " partition dims; ",
                            gather ? "a gather takes one" : "at most two"));
  const int partition_dims = PartitionDims(ap);
  if (ap.dims_size() < partition_dims + 1 || ap.dims_size() > kMaxApDims)
    return Bad(absl::StrCat(where, ": access pattern has ", ap.dims_size(), " dims"));
  if (ap.offset() < -kMaxDimExtent || ap.offset() > kMaxDimExtent)
    return Bad(absl::StrCat(where, ": access pattern offset out of range"));
  if (gather && (inst.index_bound() < 1 || inst.index_bound() > uint64_t(kMaxDimExtent)))
    return Bad(absl::StrCat(where, ": dma_gather index_bound ", inst.index_bound(),
                            " outside 1..2^40"));
  int64_t lo = ap.offset(), hi = ap.offset(), free_elems = 1, partitions = 1;
  for (int i = 0; i < ap.dims_size(); ++i) {
    const Dim& d = ap.dims(i);
    if (d.count() < 1 || d.count() > kMaxDimExtent || d.stride() > kMaxDimExtent ||
        d.stride() < -kMaxDimExtent)
      return Bad(absl::StrCat(where, ": access pattern dim ", i, " out of range"));
    // A gather's first dim reaches rows 0 .. index_bound - 1, whatever its count.
    const int64_t count = gather && i == 0 ? int64_t(inst.index_bound()) : d.count();
    // count and stride are each below 2^40, so their product can overflow
    // int64; with the running extremes below 2^62 the sums cannot.
    int64_t span = 0;
    if (__builtin_mul_overflow(count - 1, d.stride(), &span) || span > kMaxSpan ||
        span < -kMaxSpan)
      return Bad(absl::StrCat(where, ": access pattern dim ", i, " spans too far"));
    (span < 0 ? lo : hi) += span;
    // Both factors can be near 2^40: a plain product could wrap around to a
    // small count that matches the tile (found by the structure-aware fuzzer).
    int64_t& elems = i < partition_dims ? partitions : free_elems;
    if (__builtin_mul_overflow(elems, d.count(), &elems) || elems > kMaxDimExtent)
      return Bad(absl::StrCat(where, ": access pattern too large"));
  }
  if (partitions != int64_t(tile.partitions()))
    return Bad(absl::StrCat(where, ": access pattern walks ", partitions, " partitions, tile has ",
                            tile.partitions()));
  if (free_elems != int64_t(tile.num_elements()))
    return Bad(absl::StrCat(where, ": access pattern covers ", free_elems,
                            " elements per partition, tile has ", tile.num_elements()));
  int64_t tensor_elems = int64_t(t.size_bytes() / DTypeSize(t.dtype()));
  if (lo < 0 || hi >= tensor_elems)
    return Bad(absl::StrCat(where, ": access pattern reaches elements [", lo, ", ", hi,
                            "] of tensor '", t.name(), "' with ", tensor_elems, " elements",
                            gather ? absl::StrCat(" (table rows 0..", inst.index_bound() - 1, ")")
                                   : std::string()));
  if (inst.opcode() == DMA_STORE && (t.kind() == INPUT || t.kind() == CONSTANT))
    return Bad(absl::StrCat(where, ": DMA stores into read-only tensor '", t.name(), "'"));
  return absl::OkStatus();
}

absl::Status VerifyInstruction(const Instruction& inst, const Kernel& k, const Executable& exe,
                               const DeviceParams& dev, const std::string& where) {
  if (inst.source_op() < -1 || inst.source_op() >= k.source_ops_size())
    return Bad(absl::StrCat(where, ": source_op index out of range"));
  if (inst.engine() < TENSOR || inst.engine() > DMA)
    return Bad(absl::StrCat(where, ": invalid engine ", int(inst.engine())));
  bool is_dma = inst.opcode() == DMA_LOAD || inst.opcode() == DMA_STORE ||
                inst.opcode() == DMA_GATHER;
  if (is_dma != (inst.engine() == DMA))
    return Bad(absl::StrCat(where, ": opcode ", OpcodeName(inst.opcode()), " on engine ",
                            EngineName(inst.engine())));
  if (is_dma && inst.queue() >= dev.dma_queues)
    return Bad(absl::StrCat(where, ": DMA queue ", inst.queue(), " beyond ", dev.dma_queues));
  if (!is_dma && inst.queue() != 0) return Bad(absl::StrCat(where, ": compute queue must be 0"));
  if (inst.accumulate() && inst.opcode() != MATMUL)
    return Bad(absl::StrCat(where, ": only matmul accumulates into its output"));
  if (inst.has_in2() && inst.opcode() != TENSOR_SELECT && inst.opcode() != ACTIVATION)
    return Bad(absl::StrCat(where, ": only tensor_select and activation read in2"));
  if (inst.opcode() != DMA_GATHER &&
      (inst.index_tensor() != 0 || inst.index_offset() != 0 || inst.index_bound() != 0))
    return Bad(absl::StrCat(where, ": only dma_gather has index_tensor, index_offset, index_bound"));
  // NeuronCore-v2 compute engines (NKI docs): the GpSimd engine has no PSUM
  // access (writes to PSUM are refused for every engine but the tensor engine
  // below).
  if (inst.engine() == GPSIMD)
    for (const TileRef* t : {&inst.in0(), &inst.in1(), &inst.in2()})
      if (t->space() == PSUM) return Bad(absl::StrCat(where, ": the gpsimd engine cannot read PSUM"));
  {
    const Opcode op = inst.opcode();
    const bool in0Steps = op == TENSOR_TENSOR || op == TENSOR_SCALAR || op == ACTIVATION || op == TENSOR_REDUCE;
    const bool in1Steps = op == TENSOR_TENSOR;
    // Elementwise results may be written along a step too (interleaving).
    const bool outSteps = op == TENSOR_TENSOR || op == TENSOR_SCALAR || op == ACTIVATION || op == IOTA;
    for (auto [t, name, allowed] : {std::tuple{&inst.out(), "out", outSteps}, {&inst.in0(), "in0", in0Steps},
                                    {&inst.in1(), "in1", in1Steps}, {&inst.in2(), "in2", false},
                                    {&inst.accum(), "accum", false}})
      if (TileStep(*t) > 1 && !allowed)
        return Bad(absl::StrCat(where, ": ", name, " of ", OpcodeName(op), " steps by ", t->step(),
                                " elements; only the data inputs and the outputs of elementwise instructions may step"));
  }
  switch (inst.opcode()) {
    case DMA_LOAD:
    case DMA_STORE: {
      const TileRef& tile = inst.opcode() == DMA_LOAD ? inst.out() : inst.in0();
      if (absl::Status st = VerifyTile(tile, dev, where); !st.ok()) return st;
      if (tile.space() != SBUF)
        return Bad(absl::StrCat(where, ": DMA cannot access PSUM (it moves HBM <-> SBUF)"));
      return VerifyAccessPattern(inst, tile, exe, where);
    }
    case DMA_GATHER: {
      // out[p, :] = row index[index_offset + p] of the table (inst.hbm()).
      const TileRef& out = inst.out();
      if (absl::Status st = VerifyTile(out, dev, where); !st.ok()) return st;
      if (out.space() != SBUF)
        return Bad(absl::StrCat(where, ": DMA cannot access PSUM (it moves HBM <-> SBUF)"));
      if (inst.index_tensor() >= uint32_t(exe.tensors_size()))
        return Bad(absl::StrCat(where, ": dma_gather index_tensor ", inst.index_tensor(), " of ",
                                exe.tensors_size()));
      const Tensor& idx = exe.tensors(int(inst.index_tensor()));
      if (idx.dtype() != I32 && idx.dtype() != I64 && !ValidDType(idx.dtype()))
        return Bad(absl::StrCat(where, ": dma_gather index tensor '", idx.name(), "' is ", DTypeName(idx.dtype())));
      const int64_t idx_elems = int64_t(idx.size_bytes() / DTypeSize(idx.dtype()));
      // Both sides are below 2^41 here: the sum cannot overflow.
      if (inst.index_offset() < 0 || inst.index_offset() > idx_elems ||
          int64_t(out.partitions()) > idx_elems - inst.index_offset())
        return Bad(absl::StrCat(where, ": dma_gather reads indices [", inst.index_offset(), ", ",
                                inst.index_offset(), "+", out.partitions(), ") of index tensor '",
                                idx.name(), "' with ", idx_elems, " elements"));
      return VerifyAccessPattern(inst, out, exe, where);
    }
    case TENSOR_TENSOR:
      if (inst.engine() != VECTOR && inst.engine() != GPSIMD)
        return Bad(absl::StrCat(where, ": tensor_tensor runs on vector or gpsimd"));
      for (const TileRef* t : {&inst.out(), &inst.in0(), &inst.in1()})
        if (absl::Status st = VerifyTile(*t, dev, where); !st.ok()) return st;
      if (absl::Status st = WritesSbuf(inst.out(), inst, where); !st.ok()) return st;
      if (absl::Status st = SameShape(inst.out(), inst.in0(), where); !st.ok()) return st;
      if (!ValidAlu(inst.alu(), /*allow_bypass=*/false))
        return Bad(absl::StrCat(where, ": invalid alu op ", int(inst.alu()), " for tensor_tensor"));
      return SameShape(inst.out(), inst.in1(), where);
    case TENSOR_SCALAR:
    case ACTIVATION: {
      if (inst.opcode() == ACTIVATION && inst.engine() != SCALAR)
        return Bad(absl::StrCat(where, ": activation runs on the scalar engine"));
      if (inst.opcode() == TENSOR_SCALAR && inst.engine() == TENSOR)
        return Bad(absl::StrCat(where, ": tensor_scalar cannot run on the tensor engine"));
      for (const TileRef* t : {&inst.out(), &inst.in0()})
        if (absl::Status st = VerifyTile(*t, dev, where); !st.ok()) return st;
      if (absl::Status st = WritesSbuf(inst.out(), inst, where); !st.ok()) return st;
      if (absl::Status st = SameShape(inst.out(), inst.in0(), where); !st.ok()) return st;
      if (inst.has_in1()) {
        if (absl::Status st = VerifyTile(inst.in1(), dev, where); !st.ok()) return st;
        if (absl::Status st = SamePartitions(inst.out(), inst.in1(), where); !st.ok()) return st;
      }
      if (inst.has_in2()) {  // an activation's bias tile
        if (absl::Status st = VerifyTile(inst.in2(), dev, where); !st.ok()) return st;
        if (absl::Status st = SamePartitions(inst.out(), inst.in2(), where); !st.ok()) return st;
      }
      if (inst.has_accum()) {
        if (inst.opcode() != ACTIVATION)
          return Bad(absl::StrCat(where, ": only activation accumulates"));
        if (absl::Status st = VerifyTile(inst.accum(), dev, where); !st.ok()) return st;
        if (absl::Status st = WritesSbuf(inst.accum(), inst, where); !st.ok()) return st;
        if (absl::Status st = SamePartitions(inst.out(), inst.accum(), where); !st.ok()) return st;
      }
      if (inst.opcode() == TENSOR_SCALAR && !ValidAlu(inst.alu(), /*allow_bypass=*/true))
        return Bad(absl::StrCat(where, ": invalid alu op ", int(inst.alu()), " for tensor_scalar"));
      if (inst.opcode() == ACTIVATION && (inst.func() <= ACT_INVALID || inst.func() > ATAN))
        return Bad(absl::StrCat(where, ": invalid activation function ", int(inst.func())));
      return absl::OkStatus();
    }
    case TENSOR_REDUCE:
      if (inst.engine() != VECTOR && inst.engine() != GPSIMD)
        return Bad(absl::StrCat(where, ": tensor_reduce runs on vector or gpsimd"));
      for (const TileRef* t : {&inst.out(), &inst.in0()})
        if (absl::Status st = VerifyTile(*t, dev, where); !st.ok()) return st;
      if (absl::Status st = WritesSbuf(inst.out(), inst, where); !st.ok()) return st;
      if (absl::Status st = SamePartitions(inst.in0(), inst.out(), where); !st.ok()) return st;
      if (inst.alu() != ADD && inst.alu() != MAX && inst.alu() != MIN)
        return Bad(absl::StrCat(where, ": tensor_reduce needs add, max or min"));
      return absl::OkStatus();
    case MATMUL: {
      if (inst.engine() != TENSOR)
        return Bad(absl::StrCat(where, ": matmul runs on the tensor engine"));
      for (const TileRef* t : {&inst.out(), &inst.in0(), &inst.in1()})
        if (absl::Status st = VerifyTile(*t, dev, where); !st.ok()) return st;
      const TileRef& a = inst.in0();
      const TileRef& b = inst.in1();
      if (a.space() != SBUF || b.space() != SBUF)
        return Bad(absl::StrCat(where, ": matmul reads in0 and in1 from SBUF"));
      if (a.dtype() != b.dtype())
        return Bad(absl::StrCat(where, ": matmul operands differ in dtype (", DTypeName(a.dtype()),
                                " and ", DTypeName(b.dtype()), ")"));
      if (a.partitions() != b.partitions())
        return Bad(absl::StrCat(where, ": matmul contracts over partitions, but in0 spans ",
                                a.partitions(), " and in1 ", b.partitions()));
      if (a.num_elements() > kMatmulMaxM)
        return Bad(absl::StrCat(where, ": matmul in0 (stationary) has M = ", a.num_elements(),
                                " columns, at most ", kMatmulMaxM));
      if (b.num_elements() > kMatmulMaxN)
        return Bad(absl::StrCat(where, ": matmul in1 (moving) has N = ", b.num_elements(),
                                " columns, at most ", kMatmulMaxN,
                                " (one PSUM bank of float32)"));
      return VerifyPsumOut(inst, a.num_elements(), b.num_elements(), where);
    }
    case TRANSPOSE: {
      if (inst.engine() != TENSOR)
        return Bad(absl::StrCat(where, ": transpose runs on the tensor engine"));
      for (const TileRef* t : {&inst.out(), &inst.in0()})
        if (absl::Status st = VerifyTile(*t, dev, where); !st.ok()) return st;
      const TileRef& a = inst.in0();
      if (a.space() != SBUF) return Bad(absl::StrCat(where, ": transpose reads in0 from SBUF"));
      if (a.num_elements() > dev.partitions)
        return Bad(absl::StrCat(where, ": transpose input has ", a.num_elements(),
                                " columns, at most ", dev.partitions,
                                " (they become output partitions)"));
      return VerifyPsumOut(inst, a.num_elements(), a.partitions(), where);
    }
    case TENSOR_SELECT:
      if (inst.engine() != VECTOR && inst.engine() != GPSIMD)
        return Bad(absl::StrCat(where, ": tensor_select runs on vector or gpsimd"));
      if (!inst.has_in2()) return Bad(absl::StrCat(where, ": tensor_select needs in2 (the predicate)"));
      for (const TileRef* t : {&inst.out(), &inst.in0(), &inst.in1(), &inst.in2()})
        if (absl::Status st = VerifyTile(*t, dev, where); !st.ok()) return st;
      if (absl::Status st = WritesSbuf(inst.out(), inst, where); !st.ok()) return st;
      for (const TileRef* t : {&inst.in0(), &inst.in1(), &inst.in2()})
        if (absl::Status st = SameShape(inst.out(), *t, where); !st.ok()) return st;
      return absl::OkStatus();
    case IOTA:
      if (inst.engine() != GPSIMD && inst.engine() != VECTOR)
        return Bad(absl::StrCat(where, ": iota runs on gpsimd or vector"));
      if (absl::Status st = VerifyTile(inst.out(), dev, where); !st.ok()) return st;
      return WritesSbuf(inst.out(), inst, where);
    default:
      return Bad(absl::StrCat(where, ": unknown opcode ", int(inst.opcode())));
  }
}

// Replays only the semaphore protocol: every queue runs in order, an
// instruction issues once each of its waits is met. If no queue can make
// progress before all are done, the kernel would hang on the device. The
// replay (SemaphoreReplayOrder, shared with the race check) is event-driven:
// O(n + waits * log queues).
absl::Status VerifyNoDeadlock(const Kernel& k, const std::string& where) {
  std::vector<uint32_t> queue_size(kMaxQueues, 0);
  for (const Instruction& inst : k.instructions()) ++queue_size[QueueIndex(inst.engine(), inst.queue())];
  for (const Instruction& inst : k.instructions())
    for (const Wait& w : inst.waits()) {
      if (w.queue() >= kMaxQueues) return Bad(absl::StrCat(where, ": wait on queue ", w.queue()));
      if (w.count() > queue_size[w.queue()])
        return Bad(absl::StrCat(where, ": waits for ", w.count(), " instructions of queue ",
                                QueueName(w.queue()), " which has ", queue_size[w.queue()]));
    }
  std::vector<uint32_t> order;
  if (!SemaphoreReplayOrder(k, &order)) return Bad(absl::StrCat(where, ": semaphore waits deadlock"));
  return absl::OkStatus();
}

}  // namespace

absl::Status VerifyExecutable(const Executable& exe, size_t payload_size) {
  const DeviceParams* dev = DeviceForTarget(exe.target());
  if (!dev) return Bad(absl::StrCat("unknown target '", exe.target(), "'"));
  for (int i = 0; i < exe.segments_size(); ++i) {
    const ConstantSegment& seg = exe.segments(i);
    if ((kHeaderSize + seg.offset()) % kSegmentAlignment != 0)
      return Bad(absl::StrCat("constant segment ", i, " is not 64-byte aligned"));
    if (seg.offset() > payload_size || seg.size() > payload_size - seg.offset())
      return Bad(absl::StrCat("constant segment ", i, " extends past the payload"));
  }
  for (int i = 0; i < exe.tensors_size(); ++i) {
    const Tensor& t = exe.tensors(i);
    std::string where = absl::StrCat("tensor ", i, " ('", t.name(), "')");
    if (!ValidTensorDType(t.dtype())) return Bad(absl::StrCat(where, " has an invalid dtype"));
    if (t.shape_size() > kMaxTensorRank) return Bad(absl::StrCat(where, " has rank above ", kMaxTensorRank));
    int64_t elems = 1;
    for (int64_t d : t.shape()) {
      if (d < 0 || d > kMaxDimExtent) return Bad(absl::StrCat(where, " has a bad dimension"));
      // Both factors are at most 2^40: check before multiplying, not after.
      if (d != 0 && elems > kMaxDimExtent / d) return Bad(absl::StrCat(where, " is too large"));
      elems *= d;
    }
    if (t.size_bytes() != uint64_t(elems) * DTypeSize(t.dtype()))
      return Bad(absl::StrCat(where, " size_bytes does not match its shape"));
    switch (t.kind()) {
      case INPUT:
      case OUTPUT:
        break;
      case INTERMEDIATE:
        if (t.arena_offset() > exe.arena_bytes() ||
            t.size_bytes() > exe.arena_bytes() - t.arena_offset())
          return Bad(absl::StrCat(where, " lies outside the HBM arena"));
        break;
      case CONSTANT:
        if (t.segment() >= uint32_t(exe.segments_size()) ||
            exe.segments(int(t.segment())).size() < t.size_bytes())
          return Bad(absl::StrCat(where, " has no constant segment of its size"));
        break;
      default:
        return Bad(absl::StrCat(where, " has an invalid kind"));
    }
  }
  if (exe.arena_bytes() > (uint64_t(1) << 40)) return Bad("HBM arena too large");
  auto check_io = [&](const google::protobuf::RepeatedField<uint32_t>& ids, TensorKind kind,
                      const char* what) -> absl::Status {
    int expected = 0;
    for (const Tensor& t : exe.tensors()) expected += t.kind() == kind;
    if (ids.size() != expected)
      return Bad(absl::StrCat(what, " list has ", ids.size(), " entries for ", expected, " tensors"));
    std::vector<bool> seen(size_t(exe.tensors_size()), false);
    for (uint32_t id : ids) {
      if (id >= uint32_t(exe.tensors_size()) || exe.tensors(int(id)).kind() != kind || seen[id])
        return Bad(absl::StrCat(what, " list names tensor ", id, " wrongly"));
      seen[id] = true;
    }
    return absl::OkStatus();
  };
  if (absl::Status st = check_io(exe.graph_inputs(), INPUT, "graph input"); !st.ok()) return st;
  if (absl::Status st = check_io(exe.graph_outputs(), OUTPUT, "graph output"); !st.ok()) return st;
  if (!DispatchModel_IsValid(exe.dispatch_model()))
    return Bad(absl::StrCat("unknown dispatch model ", int(exe.dispatch_model())));
  for (int ki = 0; ki < exe.kernels_size(); ++ki) {
    const Kernel& k = exe.kernels(ki);
    const uint32_t previous = ki == 0 ? 0 : exe.kernels(ki - 1).dispatch();
    const bool grouped = exe.dispatch_model() == DISPATCH_PER_SOURCE_OP;
    if (grouped ? (k.dispatch() != previous && (ki == 0 || k.dispatch() != previous + 1))
                : k.dispatch() != 0)
      return Bad(absl::StrCat("kernel ", ki, " has dispatch ", k.dispatch(), " after ", previous,
                              grouped ? " (dispatches number consecutive kernels from 0)"
                                      : " (only per-source-op NEFFs group kernels)"));
    for (uint32_t id : k.inputs())
      if (id >= uint32_t(exe.tensors_size())) return Bad(absl::StrCat("kernel ", ki, " input index"));
    for (uint32_t id : k.outputs())
      if (id >= uint32_t(exe.tensors_size())) return Bad(absl::StrCat("kernel ", ki, " output index"));
    for (int ii = 0; ii < k.instructions_size(); ++ii) {
      std::string where = absl::StrCat("kernel ", ki, " ('", k.name(), "') instruction ", ii);
      if (absl::Status st = VerifyInstruction(k.instructions(ii), k, exe, *dev, where); !st.ok())
        return st;
    }
    if (absl::Status st = VerifyNoDeadlock(k, absl::StrCat("kernel ", ki, " ('", k.name(), "')"));
        !st.ok())
      return st;
  }
  return absl::OkStatus();
}

}  // namespace neuroncc::neff
