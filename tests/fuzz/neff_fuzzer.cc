// libFuzzer target: NEFF parsing, verification and execution.
//
// The input is an Executable protobuf. It is framed into a NEFF with a
// correct payload hash (random bytes would almost never pass the SHA-256
// check and never reach the verifier), parsed and verified, and every
// program the verifier accepts is executed: the verifier's promise is that
// the executor needs no bounds checks of its own, and ASan holds it to that.
// An input that starts with the NEFF header's layout (1024 bytes or more) is
// also parsed as a whole file, unframed.
#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "executor.h"
#include "neff_format.h"

namespace nn = neuroncc::neff;

namespace {

// Keeps each run fast and inside the fuzzer's memory limit.
constexpr uint64_t kMaxBytes = uint64_t(16) << 20;
constexpr int kMaxInstructions = 20000;
// Multiply-accumulates of all matmuls together (a 128 x 128 x 512 matmul is
// 2^23): a verified program may hold thousands of them.
constexpr uint64_t kMaxMatmulMacs = uint64_t(1) << 25;

void RunIfSmall(const nn::Neff& neff) {
  const nn::Executable& exe = neff.executable;
  if (exe.arena_bytes() > kMaxBytes) return;
  int instructions = 0;
  uint64_t macs = 0;
  for (const nn::Kernel& k : exe.kernels()) {
    instructions += k.instructions_size();
    for (const nn::Instruction& inst : k.instructions()) macs += nn::MatmulFlops(inst) / 2;
  }
  if (instructions > kMaxInstructions || macs > kMaxMatmulMacs) return;
  uint64_t io = 0;
  for (const nn::Tensor& t : exe.tensors())
    if (t.kind() == nn::INPUT || t.kind() == nn::OUTPUT) io += t.size_bytes();
  if (io > kMaxBytes) return;
  auto ex = neuroncc::rt::Executor::Create(neff, *nn::DeviceForTarget(exe.target()));
  if (!ex.ok()) return;
  std::vector<std::string> in, out;
  std::vector<const void*> in_ptrs;
  std::vector<void*> out_ptrs;
  for (uint32_t id : exe.graph_inputs()) {
    const nn::Tensor& t = exe.tensors(int(id));
    in.emplace_back(t.size_bytes(), '\x3c');
    // Integer inputs are gather indices: small values, so that gathers get
    // past the index check and copy rows (0x3c3c... would always be refused).
    const size_t es = nn::DTypeSize(t.dtype());
    if (t.dtype() == nn::I32 || t.dtype() == nn::I64)
      for (size_t i = 0; i * es < in.back().size(); ++i) {
        std::string& s = in.back();
        std::fill(s.begin() + long(i * es), s.begin() + long((i + 1) * es), '\0');
        s[i * es] = char(i % 3);
      }
  }
  for (uint32_t id : exe.graph_outputs()) out.emplace_back(exe.tensors(int(id)).size_bytes(), '\0');
  for (std::string& s : in) in_ptrs.push_back(s.data());
  for (std::string& s : out) out_ptrs.push_back(s.data());
  // A dma_gather index outside its table fails the run (that is its
  // contract); the executor must get there without reading out of bounds.
  (void)(*ex)->Run(in_ptrs, out_ptrs);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (size >= nn::kHeaderSize) (void)nn::ParseNeff(bytes);

  std::string payload(8, '\0');
  for (int i = 0; i < 8; ++i) payload[size_t(i)] = char((uint64_t(size) >> (8 * i)) & 0xff);
  payload.append(bytes);
  nn::Header h;
  h.data_size = payload.size();
  h.hash = nn::Sha256(payload.data(), payload.size());
  absl::StatusOr<nn::Neff> neff = nn::ParseNeff(nn::SerializeHeader(h) + payload);
  if (neff.ok()) RunIfSmall(*neff);
  return 0;
}
