// Whole-file reads, atomic writes and directory creation, shared by the NEFF
// format library, the .npy reader/writer, the runtime and the tools. Depends on
// Abseil and the C library only.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace neuroncc::files {

absl::StatusOr<std::string> ReadFile(const std::string& path);

// Writes to ".<name>.tmp.<pid>" beside `path`, then renames, so readers never
// see a partial file. Temporary files of `path` left by a writer that was
// killed (its process gone) are removed first.
absl::Status WriteFileAtomic(const std::string& path, std::string_view bytes);

// mkdir -p: creates every missing directory of `path`.
absl::Status MakeDirs(const std::string& path);

}  // namespace neuroncc::files
