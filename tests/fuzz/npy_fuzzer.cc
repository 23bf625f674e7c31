// libFuzzer target: .npy parsing. Whatever the header claims, the parser must
// stay inside the buffer, and an accepted array's data must fit its shape.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<neuroncc::npy::Array> a = neuroncc::npy::Parse(bytes, "fuzz.npy");
  if (a.ok()) {
    if (a->data.size() != size_t(a->num_elements()) * neuroncc::npy::ElementSize(a->type)) std::abort();
    // What we write, we read back identically.
    absl::StatusOr<neuroncc::npy::Array> b = neuroncc::npy::Parse(neuroncc::npy::Serialize(*a), "rt");
    if (!b.ok() || b->shape != a->shape || b->data != a->data) std::abort();
  }
  return 0;
}
