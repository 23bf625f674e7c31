// Writes the hand-built test NEFFs into a directory, for the tests that drive
// the C API from C and the command-line tools:
//   add.neff         z = x + y, float32 [4, 8]
//   add_bf16.neff    z = x + y, bfloat16 [4, 8]
//   add_f16.neff     z = x + y, float16 [4, 8]
//   two_kernel.neff  z = (x * x) * w + 1, float32 [4, 16], two kernels
//   matmul.neff      z = x @ w, bfloat16 x [8, 32] and w [32, 16], float32 z
//                    (TensorEngine transposes and accumulating matmuls in PSUM)
//   causal_mask.neff z = where(col <= row, x, -inf), float32 [8, 8] (iota, select)
//   embedding.neff   z = weight[ids]: float32 weight [10, 8], int64 ids [6],
//                    float32 z [6, 8] (one dma_gather)
// With a second directory, also writes fuzzing seeds there:
//   neff/*.pb (the Executable protobuf of each), npy/*.npy, ntff/*.ntff
#include <sys/stat.h>

#include <cstdio>
#include <string>

#include "executor.h"
#include "neff_format.h"
#include "npy.h"
#include "ntff_format.h"
#include "profile.h"
#include "test_neffs.h"

namespace {

bool Write(const std::string& path, const std::string& bytes) {
  absl::Status st = neuroncc::neff::WriteFileAtomic(path, bytes);
  if (!st.ok()) std::fprintf(stderr, "make_test_neffs: %s\n", std::string(st.message()).c_str());
  return st.ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: make_test_neffs DIR [SEED_DIR]\n");
    return 2;
  }
  using namespace neuroncc;
  std::string dir = argv[1];
  ::mkdir(dir.c_str(), 0777);  // an existing directory is fine
  struct Item {
    const char* file;
    neff::Executable exe;
  } items[] = {
      {"add.neff", testing::AddModel(4, 8)},
      {"add_bf16.neff", testing::AddModel(4, 8, neff::BF16)},
      {"add_f16.neff", testing::AddModel(4, 8, neff::F16)},
      {"two_kernel.neff", testing::TwoKernelModel(4, 16)},
      {"two_kernel_one_dispatch.neff", testing::TwoKernelModel(4, 16, neff::DISPATCH_WHOLE_GRAPH)},
      {"norm.neff", testing::NormModel(4, 16)},
      {"matmul.neff", testing::MatmulModel(8, 32, 16, neff::BF16, 2)},
      {"causal_mask.neff", testing::CausalMaskModel(8, 8)},
      {"embedding.neff", testing::EmbeddingModel(10, 8, 6, neff::F32, neff::I64)},
  };
  for (const Item& it : items)
    if (!Write(dir + "/" + it.file, testing::Serialize(it.exe))) return 1;
  if (argc < 3) return 0;

  std::string seeds = argv[2];
  for (const char* sub : {"", "/neff", "/npy", "/ntff"}) ::mkdir((seeds + sub).c_str(), 0777);
  for (const Item& it : items) {
    neff::Executable exe = it.exe;
    exe.set_format_version(neff::kFormatVersion);
    if (!Write(seeds + "/neff/" + it.file + ".pb", exe.SerializeAsString())) return 1;
    // An NTFF of one execution.
    absl::StatusOr<neff::Neff> parsed = neff::ParseNeff(testing::Serialize(it.exe));
    if (!parsed.ok()) return 1;
    const neff::DeviceParams& device = *neff::DeviceForTarget(exe.target());
    auto ex = rt::Executor::Create(*parsed, device);
    if (!ex.ok()) return 1;
    ntff::Profile p = rt::NewProfile(*parsed, device);
    rt::AppendExecution(*parsed, (*ex)->schedules(), &p);
    if (!Write(seeds + "/ntff/" + it.file + ".ntff", ntff::SerializeNtff(p))) return 1;
  }
  npy::Array a;
  a.shape = {2, 3};
  a.data.assign(24, '\x40');
  if (!Write(seeds + "/npy/f32.npy", npy::Serialize(a))) return 1;
  a.type = npy::ElementType::kFloat16;
  a.shape = {3};
  a.data.assign(6, '\x3c');
  if (!Write(seeds + "/npy/f16.npy", npy::Serialize(a))) return 1;
  a.type = npy::ElementType::kInt64;  // token ids
  a.shape = {2, 2};
  a.data.assign(32, '\0');
  a.data[8] = 7;
  if (!Write(seeds + "/npy/i64.npy", npy::Serialize(a))) return 1;
  a.type = npy::ElementType::kInt32;
  a.shape = {3};
  a.data.assign(12, '\1');
  if (!Write(seeds + "/npy/i32.npy", npy::Serialize(a))) return 1;
  return 0;
}
