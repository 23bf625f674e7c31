// Reading and writing NTFF device traces (schema: ntff.proto). Part of the
// format library so that tools can read traces without the runtime.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "device_model.h"
#include "ntff.pb.h"

namespace neuroncc::ntff {

inline constexpr char kNtffMagic[4] = {'N', 'T', 'F', 'F'};
inline constexpr size_t kNtffPrefixSize = 8;      // magic + u32 file version
inline constexpr uint32_t kNtffFileVersion = 1;   // the 8-byte prefix's version
inline constexpr uint32_t kNtffFormatVersion = 2; // Profile.format_version (2: dispatch spans)

// Prefix + protobuf. Deterministic: the schema has no map fields.
std::string SerializeNtff(const Profile& profile);

// Parses and verifies an NTFF image: magic, versions, and that every index
// (span -> kernel, event -> span, source_op, queue) is in range and every
// interval is well formed, so a reader can index without further checks.
absl::StatusOr<Profile> ParseNtff(std::string_view bytes);

void FillDeviceParams(const neff::DeviceParams& device, DeviceParams* out);

// The public profile file names: `neff_<H>.neff` and
// `<H>_instid_<instance>_vnc_<vnc>.ntff`, H a decimal u64.
// Present in a profile directory while nrt_inspect_stop writes it; a
// directory that still holds it was cut short (its writer was killed).
inline constexpr const char* kIncompleteMarker = ".profile-incomplete";
std::string NeffFileName(uint64_t hash);
std::string NtffFileName(uint64_t hash, uint32_t instance, uint32_t vnc);

// Recognise those names (the final path component only); false if `name`
// does not have that exact shape.
bool ParseNeffFileName(std::string_view name, uint64_t* hash);
bool ParseNtffFileName(std::string_view name, uint64_t* hash, uint32_t* instance,
                       uint32_t* vnc);

}  // namespace neuroncc::ntff
