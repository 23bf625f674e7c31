// Reading, writing and verifying NEFF files. Linked by both the compiler and
// the runtime; depends only on protobuf, Abseil and the C++ library.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "file_util.h"
#include "neff.pb.h"
#include "sha256.h"

namespace neuroncc::neff {

inline constexpr size_t kHeaderSize = 1024;
inline constexpr size_t kSegmentAlignment = 64;
inline constexpr uint64_t kPackageVersion = 1;
inline constexpr uint64_t kVersionMajor = 2;  // our payload layout; bump on breaking change
inline constexpr uint64_t kVersionMinor = 0;
inline constexpr uint32_t kFormatVersion = 1;  // Executable.format_version
// The most dims a Tensor's shape may list (graph inputs and outputs keep theirs;
// the compiler folds the leading dims of a wider intermediate or constant).
inline constexpr int kMaxTensorRank = 8;

// The public NEFF header fields, in file order (all little-endian).
struct Header {
  uint64_t pkg_version = kPackageVersion;
  uint64_t header_size = kHeaderSize;
  uint64_t data_size = 0;  // payload bytes following the header
  uint64_t neff_version_major = kVersionMajor;
  uint64_t neff_version_minor = kVersionMinor;
  std::string neff_build_version;  // at most 127 bytes, NUL padded
  uint32_t num_tpb = 1;
  Sha256Digest hash{};             // SHA-256 of the payload
  std::array<uint8_t, 16> uuid{};  // the hash's last 16 bytes (SerializeHeader writes them; ParseHeader checks)
  std::string name;                // at most 255 bytes
  uint32_t requested_tpb_count = 1;
  std::array<uint8_t, 64> tpb_per_node{};
  uint64_t feature_bits = 0;
  uint32_t lnc_size = 1;
};

// A parsed, verified NEFF. `payload` owns the bytes that segments point into.
struct Neff {
  Header header;
  Executable executable;
  // The whole file as parsed: header, then payload.
  std::string image;

  std::string_view payload() const { return std::string_view(image).substr(kHeaderSize); }
  // Bytes of constant segment `index`; bounds were checked at parse time.
  std::string_view Segment(uint32_t index) const;
};

// Serializes header + payload. `segments[i]` becomes constant segment i; the
// offsets in the executable's segment table are filled in here.
absl::StatusOr<std::string> SerializeNeff(Executable executable,
                                          const std::vector<std::string_view>& segments,
                                          std::string_view name,
                                          std::string_view build_version);
// The same, from segments held as strings.
absl::StatusOr<std::string> SerializeNeff(Executable executable,
                                          const std::vector<std::string>& segments,
                                          std::string_view name,
                                          std::string_view build_version);

std::string SerializeHeader(const Header& header);
// Whether `bytes` start like a NEFF: its first two header fields (package
// version and header size) hold the values every NEFF has, the format's
// magic number in effect.
bool LooksLikeNeff(std::string_view bytes);
absl::StatusOr<Header> ParseHeader(std::string_view bytes);

// Parses and fully verifies a NEFF image: header fields, payload digest,
// protobuf, and every index, shape, access pattern and wait in the program, so
// that an executor can run it without further bounds checks.
absl::StatusOr<Neff> ParseNeff(std::string_view bytes);
// The same, keeping `image` itself (no copy) as Neff::image.
absl::StatusOr<Neff> ParseNeff(std::string&& image);

// Semantic checks on an executable (also used by the compiler before writing).
absl::Status VerifyExecutable(const Executable& executable, size_t payload_size);

// The decimal id shared by `neff_<H>.neff` and `<H>_instid_0_vnc_0.ntff`: the
// first 8 bytes of the header hash read as a little-endian u64.
uint64_t ProfileHash(const Header& header);

// The dispatches of a verified executable, in launch order: each is a run of
// consecutive kernels (Executable.dispatch_model, Kernel.dispatch).
struct KernelRange {
  int first = 0;
  int count = 0;
};
std::vector<KernelRange> Dispatches(const Executable& executable);
const char* DispatchModelName(DispatchModel model);

size_t DTypeSize(DType dtype);
// Elements between consecutive elements of a tile in its partition (1 for a
// contiguous tile, also when `step` is unset).
inline uint64_t TileStep(const TileRef& t) { return t.step() > 1 ? t.step() : 1; }
// Bytes of a partition a tile spans, from its first element to the end of
// its last: num_elements x dtype size when contiguous.
inline uint64_t TileSpanBytes(const TileRef& t) {
  return t.num_elements() == 0 ? 0
                               : ((uint64_t(t.num_elements()) - 1) * TileStep(t) + 1) * DTypeSize(t.dtype());
}
// The leading dims of an access pattern that walk the tile's partitions (1
// or 2; AccessPattern.partition_dims), and partition p's first element.
inline int PartitionDims(const AccessPattern& ap) { return ap.partition_dims() == 2 ? 2 : 1; }
inline int64_t PartitionOffset(const AccessPattern& ap, int64_t p) {
  if (PartitionDims(ap) == 1) return p * ap.dims(0).stride();
  const int64_t inner = ap.dims(1).count();
  return p / inner * ap.dims(0).stride() + p % inner * ap.dims(1).stride();
}
// Integer and bool HBM tensors, which DMAs convert from and into f32 tiles.
bool IsIntegerDType(DType dtype);
const char* DTypeName(DType dtype);

using files::ReadFile;
using files::WriteFileAtomic;

}  // namespace neuroncc::neff
