#include "sha256.h"

#include <openssl/evp.h>

#include <cstdlib>

namespace neuroncc::neff {

Sha256Digest Sha256(const void* data, size_t size) {
  Sha256Digest digest{};
  unsigned int length = 0;
  // EVP_Digest fails only if libcrypto cannot allocate its context or lacks
  // SHA-256; a wrong digest would silently accept or refuse every NEFF, so
  // that is fatal rather than an error to pass on.
  if (EVP_Digest(data, size, digest.data(), &length, EVP_sha256(), nullptr) != 1 || length != digest.size())
    std::abort();
  return digest;
}

}  // namespace neuroncc::neff
