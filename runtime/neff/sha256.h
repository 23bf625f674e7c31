// SHA-256 (FIPS 180-4). The runtime must not depend on OpenSSL or LLVM, and
// the NEFF header needs a payload digest, so a small self-contained one lives here.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

namespace neuroncc::neff {

using Sha256Digest = std::array<uint8_t, 32>;

Sha256Digest Sha256(const void* data, size_t size);

}  // namespace neuroncc::neff
