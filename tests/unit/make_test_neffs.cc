// Writes the hand-built test NEFFs into a directory, for the tests that drive
// the C API from C and the command-line tools:
//   add.neff         z = x + y, float32 [4, 8]
//   add_bf16.neff    z = x + y, bfloat16 [4, 8]
//   add_f16.neff     z = x + y, float16 [4, 8]
//   two_kernel.neff  z = (x * x) * w + 1, float32 [4, 16], two kernels
#include <sys/stat.h>

#include <cstdio>
#include <string>

#include "neff_format.h"
#include "test_neffs.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_test_neffs DIR\n");
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
  };
  for (const Item& it : items) {
    absl::Status st = neff::WriteFileAtomic(dir + "/" + it.file, testing::Serialize(it.exe));
    if (!st.ok()) {
      std::fprintf(stderr, "make_test_neffs: %s\n", std::string(st.message()).c_str());
      return 1;
    }
  }
  return 0;
}
