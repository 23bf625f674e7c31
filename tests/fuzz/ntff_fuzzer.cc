// libFuzzer target: NTFF parsing and neuron-profile's summaries. The reader
// promises that a parsed trace can be indexed without checks; the summary
// code relies on it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ntff_format.h"
#include "summary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  // Fuzz the protobuf behind a valid prefix as well as raw bytes.
  for (const std::string& candidate : {bytes, std::string("NTFF\x01\0\0\0", 8) + bytes}) {
    absl::StatusOr<neuroncc::ntff::Profile> p = neuroncc::ntff::ParseNtff(candidate);
    if (!p.ok()) continue;
    neuroncc::profile::Summary s = neuroncc::profile::Summarize(*p);
    (void)neuroncc::profile::RenderText(s);
    (void)neuroncc::profile::RenderSummaryJson(s);
    (void)neuroncc::profile::RenderEventsJson(*p);
    (void)neuroncc::profile::RenderPerfetto(*p);
  }
  return 0;
}
