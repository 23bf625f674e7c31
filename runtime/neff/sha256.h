// SHA-256 of the NEFF payload (the header's digest), through OpenSSL's
// libcrypto EVP interface: a maintained, vectorized implementation.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

namespace neuroncc::neff {

using Sha256Digest = std::array<uint8_t, 32>;

Sha256Digest Sha256(const void* data, size_t size);

}  // namespace neuroncc::neff
