// The libnrt-style C API: status codes for every kind of misuse, execution
// through tensor sets, tensor info, and the profile files.
#include <dirent.h>
#include <poll.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "neff_format.h"
#include "nrt/nrt.h"
#include "nrt/nrt_async.h"
#include "nrt/nrt_async_sendrecv.h"
#include "nrt/nrt_experimental.h"
#include "nrt/nrt_ext.h"
#include "nrt/nrt_profile.h"
#include "nrt/nrt_sys_trace.h"
#include "ntff_format.h"
#include "test_neffs.h"

namespace neuroncc {
namespace {

using namespace testing;

std::vector<std::string>& TempDirs() {
  static std::vector<std::string> dirs;
  return dirs;
}

// Removes every directory TempDir() made when the test binary ends.
class TempDirCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const std::string& d : TempDirs()) std::filesystem::remove_all(d);
  }
};
const auto* const kCleanup = ::testing::AddGlobalTestEnvironment(new TempDirCleanup);

std::string TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/nrt_api_test.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  char* d = mkdtemp(buf.data());
  EXPECT_NE(d, nullptr);
  if (!d) return "/nonexistent";
  TempDirs().push_back(d);
  return d;
}

std::set<std::string> ListDir(const std::string& dir) {
  std::set<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.insert(e->d_name);
    closedir(d);
  }
  return out;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string LastError() { return nrt_get_last_error_message(); }

class NrtApi : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS) << LastError(); }
  void TearDown() override {
    for (nrt_tensor_t* t : tensors_) nrt_tensor_free(&t);
    nrt_close();
    nrt_set_simulated_target(nullptr);
  }

  nrt_model_t* Load(const std::string& neff) {
    nrt_model_t* m = nullptr;
    EXPECT_EQ(nrt_load(neff.data(), neff.size(), -1, -1, &m), NRT_SUCCESS) << LastError();
    return m;
  }

  nrt_tensor_t* Tensor(size_t size, const char* name = nullptr) {
    nrt_tensor_t* t = nullptr;
    EXPECT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, size, name, &t), NRT_SUCCESS);
    tensors_.push_back(t);
    return t;
  }

  nrt_tensor_t* FloatTensor(const std::vector<float>& v) {
    nrt_tensor_t* t = Tensor(v.size() * 4);
    EXPECT_EQ(nrt_tensor_write(t, v.data(), 0, v.size() * 4), NRT_SUCCESS);
    return t;
  }

  // Input set {x, y} and output set {z} for AddModel(rows, cols).
  void AddSets(size_t rows, size_t cols, nrt_tensor_set_t** in, nrt_tensor_set_t** out,
               nrt_tensor_t** z) {
    std::vector<float> x(rows * cols), y(rows * cols);
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = float(i);
      y[i] = 0.5f * float(i);
    }
    ASSERT_EQ(nrt_allocate_tensor_set(in), NRT_SUCCESS);
    ASSERT_EQ(nrt_allocate_tensor_set(out), NRT_SUCCESS);
    ASSERT_EQ(nrt_add_tensor_to_tensor_set(*in, "x", FloatTensor(x)), NRT_SUCCESS);
    ASSERT_EQ(nrt_add_tensor_to_tensor_set(*in, "y", FloatTensor(y)), NRT_SUCCESS);
    *z = Tensor(rows * cols * 4);
    ASSERT_EQ(nrt_add_tensor_to_tensor_set(*out, "z", *z), NRT_SUCCESS);
  }

  std::vector<nrt_tensor_t*> tensors_;
};

TEST(NrtStatus, PublicNumericValuesAndNames) {
  EXPECT_EQ(NRT_SUCCESS, 0);
  EXPECT_EQ(NRT_FAILURE, 1);
  EXPECT_EQ(NRT_INVALID, 2);
  EXPECT_EQ(NRT_INVALID_HANDLE, 3);
  EXPECT_EQ(NRT_RESOURCE, 4);
  EXPECT_EQ(NRT_TIMEOUT, 5);
  EXPECT_EQ(NRT_HW_ERROR, 6);
  EXPECT_EQ(NRT_QUEUE_FULL, 7);
  EXPECT_EQ(NRT_LOAD_NOT_ENOUGH_NC, 9);
  EXPECT_EQ(NRT_UNSUPPORTED_NEFF_VERSION, 10);
  EXPECT_EQ(NRT_UNINITIALIZED, 13);
  EXPECT_EQ(NRT_CLOSED, 14);
  EXPECT_EQ(NRT_EXEC_BAD_INPUT, 1002);
  EXPECT_EQ(NRT_EXEC_COMPLETED_WITH_NUM_ERR, 1003);
  EXPECT_STREQ(nrt_get_status_as_str(NRT_INVALID_HANDLE), "NRT_INVALID_HANDLE");
  EXPECT_STREQ(nrt_get_status_as_str(NRT_STATUS(12345)), "NRT_UNKNOWN_STATUS");
  EXPECT_EQ(NRT_DTYPE_FLOAT32, 0xA);
  EXPECT_EQ(NRT_DTYPE_BFLOAT16, 0x6);
  EXPECT_EQ(NRT_DTYPE_FLOAT16, 0x7);
}

TEST(NrtLifetime, CallsOutsideInitAndCloseAreRefused) {
  std::string neff = Serialize(AddModel(2, 4));
  nrt_model_t* m = nullptr;
  nrt_tensor_t* t = nullptr;
  EXPECT_EQ(nrt_load(neff.data(), neff.size(), -1, -1, &m), NRT_UNINITIALIZED);
  EXPECT_NE(LastError().find("nrt_init"), std::string::npos) << LastError();
  EXPECT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_HOST, -1, 16, "t", &t), NRT_UNINITIALIZED);
  EXPECT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_INVALID, "", ""), NRT_INVALID);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  EXPECT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_INVALID);  // twice
  ASSERT_EQ(nrt_load(neff.data(), neff.size(), -1, -1, &m), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_HOST, -1, 16, "t", &t), NRT_SUCCESS);
  nrt_close();
  EXPECT_EQ(nrt_unload(m), NRT_CLOSED);
  EXPECT_EQ(nrt_load(neff.data(), neff.size(), -1, -1, &m), NRT_CLOSED);
  // Tensors outlive the runtime: still readable, and freed normally.
  char buf[16];
  EXPECT_EQ(nrt_tensor_read(t, buf, 0, 16), NRT_SUCCESS);
  nrt_tensor_free(&t);
  EXPECT_EQ(t, nullptr);
  // A fresh runtime after close; the old model handle is dead.
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_PYTORCH, "2.1", "1.0"), NRT_SUCCESS);
  EXPECT_EQ(nrt_unload(m), NRT_INVALID_HANDLE);
  nrt_close();
  nrt_close();  // harmless
}

TEST_F(NrtApi, LoadRefusesBadInput) {
  std::string neff = Serialize(AddModel(2, 4));
  nrt_model_t* m = reinterpret_cast<nrt_model_t*>(0x1);
  EXPECT_EQ(nrt_load(nullptr, 10, -1, -1, &m), NRT_INVALID);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(nrt_load(neff.data(), neff.size(), -1, -1, nullptr), NRT_INVALID);
  EXPECT_EQ(nrt_load("garbage", 7, -1, -1, &m), NRT_INVALID);
  EXPECT_NE(LastError().find("shorter than the 1024-byte header"), std::string::npos) << LastError();
  EXPECT_EQ(nrt_load(neff.data(), neff.size() - 1, -1, -1, &m), NRT_INVALID);
  std::string flipped = neff;
  flipped[neff.size() - 3] ^= 0x10;
  EXPECT_EQ(nrt_load(flipped.data(), flipped.size(), -1, -1, &m), NRT_INVALID);
  EXPECT_NE(LastError().find("SHA-256"), std::string::npos) << LastError();
  std::string future = neff;
  future[24] = 9;
  EXPECT_EQ(nrt_load(future.data(), future.size(), -1, -1, &m), NRT_UNSUPPORTED_NEFF_VERSION);
  // Any other file of a header's size or more: not a NEFF, not a version.
  std::string text(2048, 'a');
  EXPECT_EQ(nrt_load(text.data(), text.size(), -1, -1, &m), NRT_INVALID);
  EXPECT_NE(LastError().find("not a NEFF file (bad magic"), std::string::npos) << LastError();
  EXPECT_EQ(nrt_load(neff.data(), neff.size(), 1, -1, &m), NRT_LOAD_NOT_ENOUGH_NC);
  EXPECT_EQ(nrt_load(neff.data(), neff.size(), 0, 2, &m), NRT_LOAD_NOT_ENOUGH_NC);
  EXPECT_EQ(m, nullptr);
}

TEST_F(NrtApi, LoadRefusesNamesNoClientCouldUse) {
  // A NUL is valid UTF-8 to protobuf, so the loader must refuse it itself
  // (bytes that are not UTF-8 fail the protobuf parse before that).
  neff::Executable exe = AddModel(2, 4);
  exe.mutable_tensors(0)->set_name(std::string("x\0y", 3));
  std::string bytes = Serialize(exe);
  nrt_model_t* m = nullptr;
  EXPECT_EQ(nrt_load(bytes.data(), bytes.size(), -1, -1, &m), NRT_INVALID);
  EXPECT_NE(LastError().find("NUL byte or bytes that are not UTF-8"), std::string::npos) << LastError();
  // The header's name is outside the payload hash: checked on its own.
  std::string named = Serialize(AddModel(2, 4));
  named[220] = char(0xff);  // the first byte of the header's name field
  EXPECT_EQ(nrt_load(named.data(), named.size(), -1, -1, &m), NRT_INVALID);
  EXPECT_NE(LastError().find("name is not UTF-8"), std::string::npos) << LastError();
}

TEST_F(NrtApi, LoadRefusesAmbiguousTensorNames) {
  neff::Executable exe = AddModel(2, 4);
  exe.mutable_tensors(1)->set_name("x");
  std::string neff = Serialize(exe);
  nrt_model_t* m = nullptr;
  EXPECT_EQ(nrt_load(neff.data(), neff.size(), -1, -1, &m), NRT_INVALID);
  EXPECT_NE(LastError().find("two inputs are named 'x'"), std::string::npos) << LastError();
}

TEST_F(NrtApi, LoadRefusesSbufRaces) {
  // The store no longer waits for the add that produces its tile.
  neff::Executable exe = AddModel(2, 4);
  exe.mutable_kernels(0)->mutable_instructions(3)->clear_waits();
  std::string neff = Serialize(exe);
  nrt_model_t* m = nullptr;
  EXPECT_EQ(nrt_load(neff.data(), neff.size(), -1, -1, &m), NRT_INVALID);
  EXPECT_NE(LastError().find("no semaphore wait orders them"), std::string::npos) << LastError();
  setenv("NEURONCC_RT_ALLOW_RACES", "1", 1);
  EXPECT_EQ(nrt_load(neff.data(), neff.size(), -1, -1, &m), NRT_SUCCESS) << LastError();
  unsetenv("NEURONCC_RT_ALLOW_RACES");
}

TEST(NrtTarget, SimulatedTargetMustMatchTheNeff) {
  EXPECT_EQ(nrt_set_simulated_target("trn7"), NRT_INVALID);
  ASSERT_EQ(nrt_set_simulated_target("trn2"), NRT_SUCCESS);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  EXPECT_EQ(nrt_set_simulated_target("trn1"), NRT_INVALID);  // not while initialized
  nrt_instance_info_t info;
  ASSERT_EQ(nrt_get_instance_info(&info, sizeof(info)), NRT_SUCCESS);
  EXPECT_EQ(info.family, uint32_t(NRT_INSTANCE_TRN2));
  EXPECT_STREQ(info.arch_name, "trn2");
  EXPECT_EQ(nrt_get_instance_info(&info, sizeof(info) - 1), NRT_INVALID);
  std::string neff = Serialize(AddModel(2, 4));  // a trn1 NEFF
  nrt_model_t* m = nullptr;
  EXPECT_EQ(nrt_load(neff.data(), neff.size(), -1, -1, &m), NRT_INVALID);
  EXPECT_NE(LastError().find("compiled for trn1"), std::string::npos) << LastError();
  nrt_close();
  EXPECT_EQ(nrt_set_simulated_target(""), NRT_SUCCESS);
}

TEST_F(NrtApi, ExecuteComputesAndReportsDeviceTime) {
  nrt_model_t* m = Load(Serialize(AddModel(3, 5)));
  ASSERT_NE(m, nullptr);
  nrt_execution_stats_t stats;
  EXPECT_EQ(nrt_get_last_execution_stats(m, &stats, sizeof(stats), nullptr), NRT_INVALID);  // not yet
  nrt_tensor_set_t *in, *out;
  nrt_tensor_t* z;
  AddSets(3, 5, &in, &out, &z);
  ASSERT_EQ(nrt_execute(m, in, out), NRT_SUCCESS) << LastError();
  std::vector<float> got(15);
  ASSERT_EQ(nrt_tensor_read(z, got.data(), 0, 60), NRT_SUCCESS);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], 1.5f * float(i));
  size_t written = 0;
  ASSERT_EQ(nrt_get_last_execution_stats(m, &stats, sizeof(stats), &written), NRT_SUCCESS);
  EXPECT_EQ(written, sizeof(stats));
  EXPECT_EQ(stats.kernel_count, 1u);
  EXPECT_EQ(stats.instruction_count, 4u);
  EXPECT_EQ(stats.launch_overhead_ps, uint64_t(neff::Trn1().dispatch_overhead_ns * 1000));
  EXPECT_GT(stats.device_time_ps, stats.launch_overhead_ps);
  EXPECT_EQ(stats.hbm_read_bytes, 120u);
  EXPECT_EQ(stats.hbm_write_bytes, 60u);
  // A caller with an older, shorter struct gets only its prefix.
  uint64_t first = 0;
  ASSERT_EQ(nrt_get_last_execution_stats(m, reinterpret_cast<nrt_execution_stats_t*>(&first), 8, &written),
            NRT_SUCCESS);
  EXPECT_EQ(written, 8u);
  EXPECT_EQ(first, stats.device_time_ps);
  EXPECT_EQ(nrt_execute_repeat(m, in, out, 3), NRT_SUCCESS);
  EXPECT_EQ(nrt_execute_repeat(m, in, out, 0), NRT_INVALID);
  nrt_destroy_tensor_set(&in);
  nrt_destroy_tensor_set(&out);
  EXPECT_EQ(in, nullptr);
  EXPECT_EQ(nrt_unload(m), NRT_SUCCESS);
  EXPECT_EQ(nrt_unload(m), NRT_INVALID_HANDLE);
}

TEST_F(NrtApi, ExecuteRefusesMismatchedTensorSets) {
  nrt_model_t* m = Load(Serialize(AddModel(2, 4)));
  nrt_tensor_set_t *in, *out;
  nrt_tensor_t* z;
  AddSets(2, 4, &in, &out, &z);
  EXPECT_EQ(nrt_execute(nullptr, in, out), NRT_INVALID);
  EXPECT_EQ(nrt_execute(m, nullptr, out), NRT_INVALID);
  EXPECT_EQ(nrt_execute(m, in, nullptr), NRT_INVALID);
  EXPECT_EQ(nrt_execute(reinterpret_cast<nrt_model_t*>(in), in, out), NRT_INVALID_HANDLE);
  EXPECT_EQ(nrt_execute(m, out, in), NRT_INVALID);  // sets swapped
  EXPECT_NE(LastError().find("not an input"), std::string::npos) << LastError();

  // Wrong size.
  nrt_tensor_t* small = Tensor(8);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(in, "y", small), NRT_SUCCESS);
  EXPECT_EQ(nrt_execute(m, in, out), NRT_INVALID);
  EXPECT_NE(LastError().find("input 'y': tensor is 8 bytes, the model expects 32"), std::string::npos)
      << LastError();
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(in, "y", Tensor(32)), NRT_SUCCESS);
  ASSERT_EQ(nrt_execute(m, in, out), NRT_SUCCESS) << LastError();

  // Unknown name.
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(in, "q", Tensor(32)), NRT_SUCCESS);
  EXPECT_EQ(nrt_execute(m, in, out), NRT_INVALID);
  EXPECT_NE(LastError().find("'q', which is not an input"), std::string::npos) << LastError();

  // Missing input.
  nrt_tensor_set_t* partial;
  ASSERT_EQ(nrt_allocate_tensor_set(&partial), NRT_SUCCESS);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(partial, "x", Tensor(32)), NRT_SUCCESS);
  EXPECT_EQ(nrt_execute(m, partial, out), NRT_INVALID);
  EXPECT_NE(LastError().find("missing input 'y'"), std::string::npos) << LastError();

  // A tensor freed while still in a set.
  nrt_tensor_t* doomed = nullptr;
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_HOST, -1, 32, "doomed", &doomed), NRT_SUCCESS);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(partial, "y", doomed), NRT_SUCCESS);
  nrt_tensor_free(&doomed);
  EXPECT_EQ(nrt_execute(m, partial, out), NRT_INVALID_HANDLE);
  EXPECT_NE(LastError().find("freed"), std::string::npos) << LastError();

  // Dead set handle.
  nrt_tensor_set_t* dead = partial;
  nrt_destroy_tensor_set(&partial);
  EXPECT_EQ(nrt_execute(m, dead, out), NRT_INVALID_HANDLE);
  nrt_destroy_tensor_set(&in);
  nrt_destroy_tensor_set(&out);
}

TEST_F(NrtApi, TensorAccessIsBoundsChecked) {
  nrt_tensor_t* t = Tensor(16, "t");
  char buf[32] = {};
  EXPECT_EQ(nrt_tensor_get_size(t), 16u);
  EXPECT_EQ(nrt_tensor_get_size(nullptr), 0u);
  EXPECT_EQ(nrt_tensor_write(t, buf, 0, 16), NRT_SUCCESS);
  EXPECT_EQ(nrt_tensor_write(t, buf, 8, 9), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_read(t, buf, 17, 0), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_read(t, buf, SIZE_MAX, 2), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_read(t, nullptr, 0, 4), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_read(nullptr, buf, 0, 4), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_memset(t, 4, 0x7f, 8), NRT_SUCCESS);
  EXPECT_EQ(nrt_tensor_read(t, buf, 0, 16), NRT_SUCCESS);
  EXPECT_EQ(buf[4], 0x7f);
  EXPECT_EQ(buf[12], 0);
  nrt_tensor_t* u = Tensor(8);
  EXPECT_EQ(nrt_tensor_copy(t, 4, u, 0, 8), NRT_SUCCESS);
  EXPECT_EQ(nrt_tensor_copy(t, 12, u, 0, 8), NRT_INVALID);
  EXPECT_NE(nrt_tensor_get_va(u), nullptr);
  nrt_tensor_t* bad = nullptr;
  EXPECT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 0, "z", &bad), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 3, 8, "z", &bad), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_allocate(nrt_tensor_placement_t(9), 0, 8, "z", &bad), NRT_INVALID);
  EXPECT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, SIZE_MAX / 2, "huge", &bad), NRT_RESOURCE);
  EXPECT_EQ(bad, nullptr);
  nrt_tensor_free(nullptr);
  nrt_tensor_free(&bad);

  nrt_tensor_set_t* set;
  ASSERT_EQ(nrt_allocate_tensor_set(&set), NRT_SUCCESS);
  EXPECT_EQ(nrt_add_tensor_to_tensor_set(set, "", t), NRT_INVALID);
  EXPECT_EQ(nrt_add_tensor_to_tensor_set(set, "a", reinterpret_cast<nrt_tensor_t*>(buf)),
            NRT_INVALID_HANDLE);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(set, "a", t), NRT_SUCCESS);
  nrt_tensor_t* got = nullptr;
  EXPECT_EQ(nrt_get_tensor_from_tensor_set(set, "a", &got), NRT_SUCCESS);
  EXPECT_EQ(got, t);
  EXPECT_EQ(nrt_get_tensor_from_tensor_set(set, "b", &got), NRT_INVALID);
  nrt_destroy_tensor_set(&set);
  nrt_destroy_tensor_set(&set);  // NULL now: harmless
  nrt_destroy_tensor_set(nullptr);
}

TEST_F(NrtApi, ModelTensorInfoListsInputsThenOutputs) {
  neff::Executable exe = AddModel(3, 7, neff::BF16);
  nrt_model_t* m = Load(Serialize(exe));
  nrt_tensor_info_array_t* info = nullptr;
  ASSERT_EQ(nrt_get_model_tensor_info(m, &info), NRT_SUCCESS);
  ASSERT_EQ(info->tensor_count, 3u);
  const char* names[] = {"x", "y", "z"};
  for (int i = 0; i < 3; ++i) {
    const nrt_tensor_info_t& t = info->tensor_array[i];
    EXPECT_STREQ(t.name, names[i]);
    EXPECT_EQ(t.usage, i < 2 ? NRT_TENSOR_USAGE_INPUT : NRT_TENSOR_USAGE_OUTPUT);
    EXPECT_EQ(t.dtype, NRT_DTYPE_BFLOAT16);
    EXPECT_EQ(t.size, 3u * 7 * 2);
    ASSERT_EQ(t.ndim, 2u);
    EXPECT_EQ(t.shape[0], 3u);
    EXPECT_EQ(t.shape[1], 7u);
  }
  EXPECT_EQ(nrt_free_model_tensor_info(info), NRT_SUCCESS);
  EXPECT_EQ(nrt_get_model_tensor_info(m, nullptr), NRT_INVALID);
  char target[8], name[8];
  ASSERT_EQ(nrt_get_model_target(m, target, name, sizeof(target)), NRT_SUCCESS);
  EXPECT_STREQ(target, "trn1");
  EXPECT_STREQ(name, "add");
  EXPECT_EQ(nrt_get_model_target(m, target, nullptr, 3), NRT_RESOURCE);
  uint32_t count = 0;
  EXPECT_EQ(nrt_get_model_nc_count(m, &count), NRT_SUCCESS);
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(nrt_get_total_vnc_count(&count), NRT_SUCCESS);
  EXPECT_EQ(nrt_get_total_vnc_count(nullptr), NRT_INVALID);
}

TEST_F(NrtApi, IntegerTensorsReportThePublicIntDtypes) {
  // nrt.h: NRT_DTYPE_INT32 = 0x8, NRT_DTYPE_INT64 = 0xC (the public values).
  EXPECT_EQ(int(NRT_DTYPE_INT32), 0x8);
  EXPECT_EQ(int(NRT_DTYPE_INT64), 0xC);
  for (neff::DType dt : {neff::I32, neff::I64}) {
    nrt_model_t* m = Load(Serialize(EmbeddingModel(10, 4, 6, neff::BF16, dt)));
    ASSERT_NE(m, nullptr);
    nrt_tensor_info_array_t* info = nullptr;
    ASSERT_EQ(nrt_get_model_tensor_info(m, &info), NRT_SUCCESS);
    ASSERT_EQ(info->tensor_count, 3u);
    const nrt_tensor_info_t& ids = info->tensor_array[1];
    EXPECT_STREQ(ids.name, "ids");
    EXPECT_EQ(ids.usage, NRT_TENSOR_USAGE_INPUT);
    EXPECT_EQ(ids.dtype, dt == neff::I32 ? NRT_DTYPE_INT32 : NRT_DTYPE_INT64);
    EXPECT_EQ(ids.size, dt == neff::I32 ? 24u : 48u);
    ASSERT_EQ(ids.ndim, 1u);
    EXPECT_EQ(ids.shape[0], 6u);
    EXPECT_EQ(info->tensor_array[0].dtype, NRT_DTYPE_BFLOAT16);
    EXPECT_EQ(info->tensor_array[2].dtype, NRT_DTYPE_BFLOAT16);
    nrt_free_model_tensor_info(info);
    EXPECT_EQ(nrt_unload(m), NRT_SUCCESS);
  }
}

TEST_F(NrtApi, BoolAndNarrowIntegerTensorsAreToldApart) {
  // nrt.h: NRT_DTYPE_UINT8 = 0x3, NRT_DTYPE_INT8 = 0x2, NRT_DTYPE_INT16 = 0x4.
  // Bools and uint8 are both NRT_DTYPE_UINT8; nrt_get_model_tensor_is_bool tells.
  neff::Executable exe = EmptyExecutable("narrow");
  const std::vector<neff::DType> dtypes = {neff::BOOL, neff::U8, neff::I8, neff::I16};
  neff::Kernel* k = exe.add_kernels();
  k->set_name("convert");
  for (uint32_t i = 0; i < dtypes.size(); ++i) {
    uint32_t in = AddTensor(&exe, "in" + std::to_string(i), neff::INPUT, dtypes[i], {2, 3});
    uint32_t out = AddTensor(&exe, "out" + std::to_string(i), neff::OUTPUT, dtypes[i], {2, 3});
    neff::TileRef tile = Tile(0, 2, 16 * i, 3, neff::F32);
    *k->add_instructions() = DmaLoad(tile, Ap(in, 0, {{3, 2}, {1, 3}}), i);
    *k->add_instructions() = DmaStore(tile, Ap(out, 0, {{3, 2}, {1, 3}}), 4 + i, {W(4 + i, 1)});  // queue 4: DMA 0
  }
  nrt_model_t* m = Load(Serialize(exe));
  ASSERT_NE(m, nullptr);
  nrt_tensor_info_array_t* info = nullptr;
  ASSERT_EQ(nrt_get_model_tensor_info(m, &info), NRT_SUCCESS);
  ASSERT_EQ(info->tensor_count, 8u);
  const nrt_dtype_t expected[] = {NRT_DTYPE_UINT8, NRT_DTYPE_UINT8, NRT_DTYPE_INT8, NRT_DTYPE_INT16};
  const uint64_t bytes[] = {6, 6, 6, 12};
  for (uint32_t i = 0; i < 8; ++i) {
    const nrt_tensor_info_t& t = info->tensor_array[i];
    EXPECT_EQ(t.dtype, expected[i % 4]) << t.name;
    EXPECT_EQ(t.size, bytes[i % 4]) << t.name;
    bool is_bool = true;
    ASSERT_EQ(nrt_get_model_tensor_is_bool(m, t.name, &is_bool), NRT_SUCCESS);
    EXPECT_EQ(is_bool, i % 4 == 0) << t.name;
  }
  nrt_free_model_tensor_info(info);
  bool is_bool = false;
  EXPECT_EQ(nrt_get_model_tensor_is_bool(m, "nothing", &is_bool), NRT_INVALID);
  EXPECT_NE(LastError().find("has no input or output 'nothing'"), std::string::npos) << LastError();
  EXPECT_EQ(nrt_get_model_tensor_is_bool(m, nullptr, &is_bool), NRT_INVALID);
  EXPECT_EQ(nrt_get_model_tensor_is_bool(m, "in0", nullptr), NRT_INVALID);
  EXPECT_EQ(nrt_unload(m), NRT_SUCCESS);
}

TEST_F(NrtApi, GatherLooksUpRowsAndABadIndexIsAnOutOfBoundsExecution) {
  const uint32_t V = 10, D = 4, T = 4;
  nrt_model_t* m = Load(Serialize(EmbeddingModel(V, D, T, neff::F32, neff::I64)));
  ASSERT_NE(m, nullptr);
  std::vector<float> w(V * D);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i) * 0.5f;
  nrt_tensor_t* ids = Tensor(T * 8, "ids");
  nrt_tensor_t* z = Tensor(T * D * 4, "z");
  nrt_tensor_set_t *in, *out;
  ASSERT_EQ(nrt_allocate_tensor_set(&in), NRT_SUCCESS);
  ASSERT_EQ(nrt_allocate_tensor_set(&out), NRT_SUCCESS);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(in, "weight", FloatTensor(w)), NRT_SUCCESS);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(in, "ids", ids), NRT_SUCCESS);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(out, "z", z), NRT_SUCCESS);

  // An index equal to the vocabulary size: NRT_EXEC_OOB, nothing recorded.
  std::vector<int64_t> bad = {1, 2, 10, 3};
  ASSERT_EQ(nrt_tensor_write(ids, bad.data(), 0, 32), NRT_SUCCESS);
  const std::string ntff_path = TempDir() + "/p.ntff";
  ASSERT_EQ(nrt_profile_start(m, ntff_path.c_str()), NRT_SUCCESS);
  EXPECT_EQ(nrt_execute(m, in, out), NRT_EXEC_OOB);
  EXPECT_EQ(LastError(),
            "nrt_execute: kernel 0 ('embedding') instruction 0 (dma_gather): partition 2 looks up row 10 "
            "(element 2 of int64 index tensor 'ids'), which is outside the table's rows [0, 10)");
  nrt_execution_stats_t stats;
  EXPECT_EQ(nrt_get_last_execution_stats(m, &stats, sizeof(stats), nullptr), NRT_INVALID);  // never executed
  bad[2] = -5;
  ASSERT_EQ(nrt_tensor_write(ids, bad.data(), 0, 32), NRT_SUCCESS);
  EXPECT_EQ(nrt_execute_repeat(m, in, out, 3), NRT_EXEC_OOB);
  EXPECT_NE(LastError().find("looks up row -5 "), std::string::npos) << LastError();
  // Scheduled asynchronously, the failed run gets its sequence id and leaves
  // its status in the error tracker.
  nrta_error_tracker_t* tracker = nullptr;
  ASSERT_EQ(nrta_error_tracker_create(0, &tracker), NRT_SUCCESS);
  nrta_seq_t seq = 0;
  EXPECT_EQ(nrta_execute_schedule(m, in, out, 0, tracker, &seq), NRT_SUCCESS);
  const nrta_error_t* failures = nullptr;
  size_t failed = 0;
  ASSERT_EQ(nrta_error_tracker_get_list(tracker, &failures, &failed), NRT_SUCCESS);
  ASSERT_EQ(failed, 1u);
  EXPECT_EQ(failures[0].seq_id, seq);
  EXPECT_EQ(failures[0].error_code, uint64_t(NRT_EXEC_OOB));
  nrta_error_tracker_destroy(tracker);

  // Good indices: rows come back, and the stats count the indices read.
  std::vector<int64_t> good = {9, 0, 9, 4};
  ASSERT_EQ(nrt_tensor_write(ids, good.data(), 0, 32), NRT_SUCCESS);
  ASSERT_EQ(nrt_execute(m, in, out), NRT_SUCCESS) << LastError();
  std::vector<float> got(T * D);
  ASSERT_EQ(nrt_tensor_read(z, got.data(), 0, got.size() * 4), NRT_SUCCESS);
  for (uint32_t t = 0; t < T; ++t)
    for (uint32_t f = 0; f < D; ++f) EXPECT_EQ(got[t * D + f], w[size_t(good[t]) * D + f]);
  ASSERT_EQ(nrt_get_last_execution_stats(m, &stats, sizeof(stats), nullptr), NRT_SUCCESS);
  EXPECT_EQ(stats.hbm_read_bytes, uint64_t(T) * D * 4 + T * 8);
  EXPECT_EQ(stats.hbm_write_bytes, uint64_t(T) * D * 4);
  // The profile holds the one execution that succeeded; the gather is a
  // DMA read of its rows and indices.
  ASSERT_EQ(nrt_profile_stop(ntff_path.c_str()), NRT_SUCCESS);
  absl::StatusOr<ntff::Profile> p = ntff::ParseNtff(Slurp(ntff_path));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->execution_count(), 1u);
  ASSERT_EQ(p->dma_size(), 2);
  EXPECT_EQ(p->dma(0).instruction(), 0u);
  EXPECT_EQ(p->dma(0).direction(), ntff::HBM_TO_SBUF);
  EXPECT_EQ(p->dma(0).tensor(), 0u);  // the table
  EXPECT_EQ(p->dma(0).bytes(), uint64_t(T) * D * 4 + T * 8);
  EXPECT_EQ(p->instructions(0).opcode(), neff::DMA_GATHER);
  EXPECT_EQ(p->instructions(0).bytes(), uint64_t(T) * D * 4 + T * 8);
  nrt_destroy_tensor_set(&in);
  nrt_destroy_tensor_set(&out);
}

TEST_F(NrtApi, NonIntegerFloatIndexIsAnOutOfBoundsExecution) {
  nrt_model_t* m = Load(Serialize(EmbeddingModel(8, 2, 3, neff::F32, neff::F32)));
  ASSERT_NE(m, nullptr);
  nrt_tensor_set_t *in, *out;
  ASSERT_EQ(nrt_allocate_tensor_set(&in), NRT_SUCCESS);
  ASSERT_EQ(nrt_allocate_tensor_set(&out), NRT_SUCCESS);
  nrt_tensor_t* ids = FloatTensor({3.0f, 1.5f, 0.0f});
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(in, "weight", FloatTensor(std::vector<float>(16, 1.0f))), NRT_SUCCESS);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(in, "ids", ids), NRT_SUCCESS);
  ASSERT_EQ(nrt_add_tensor_to_tensor_set(out, "z", Tensor(24)), NRT_SUCCESS);
  EXPECT_EQ(nrt_execute(m, in, out), NRT_EXEC_OOB);
  EXPECT_EQ(LastError(),
            "nrt_execute: kernel 0 ('embedding') instruction 0 (dma_gather): partition 1 looks up row 1.5 "
            "(element 1 of float32 index tensor 'ids'), which is not an integer");
  std::vector<float> fixed = {3.0f, 7.0f, -0.0f};
  ASSERT_EQ(nrt_tensor_write(ids, fixed.data(), 0, 12), NRT_SUCCESS);
  EXPECT_EQ(nrt_execute(m, in, out), NRT_SUCCESS) << LastError();
  nrt_destroy_tensor_set(&in);
  nrt_destroy_tensor_set(&out);
}

TEST_F(NrtApi, LastErrorIsPerThread) {
  nrt_model_t* m = nullptr;
  EXPECT_EQ(nrt_load("x", 1, -1, -1, &m), NRT_INVALID);
  std::string mine = LastError();
  EXPECT_FALSE(mine.empty());
  std::string theirs = "unset";
  std::thread([&] { theirs = nrt_get_last_error_message(); }).join();
  EXPECT_EQ(theirs, "");
  EXPECT_EQ(LastError(), mine);
}

TEST_F(NrtApi, ProfileStartStopWritesAnNtffOfEveryExecution) {
  std::string neff_bytes = Serialize(TwoKernelModel(4, 8));
  nrt_model_t* m = Load(neff_bytes);
  nrt_tensor_set_t *in, *out;
  ASSERT_EQ(nrt_allocate_tensor_set(&in), NRT_SUCCESS);
  ASSERT_EQ(nrt_allocate_tensor_set(&out), NRT_SUCCESS);
  nrt_add_tensor_to_tensor_set(in, "x", Tensor(128));
  nrt_add_tensor_to_tensor_set(in, "w", Tensor(128));
  nrt_add_tensor_to_tensor_set(out, "z", Tensor(128));
  std::string dir = TempDir();
  std::string file = dir + "/p.ntff";
  EXPECT_EQ(nrt_profile_start(m, ""), NRT_INVALID);
  EXPECT_EQ(nrt_profile_stop(file.c_str()), NRT_INVALID);  // never started
  ASSERT_EQ(nrt_profile_start(m, file.c_str()), NRT_SUCCESS);
  EXPECT_EQ(nrt_profile_start(m, (dir + "/other.ntff").c_str()), NRT_INVALID);  // already profiled
  ASSERT_EQ(nrt_execute(m, in, out), NRT_SUCCESS);
  ASSERT_EQ(nrt_execute(m, in, out), NRT_SUCCESS);
  ASSERT_EQ(nrt_profile_stop(file.c_str()), NRT_SUCCESS) << LastError();
  absl::StatusOr<ntff::Profile> p = ntff::ParseNtff(Slurp(file));
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<neff::Header> h = neff::ParseHeader(neff_bytes);
  EXPECT_EQ(p->neff_hash(), neff::ProfileHash(*h));
  EXPECT_EQ(p->execution_count(), 2u);
  EXPECT_EQ(p->kernel_spans_size(), 4);
  EXPECT_EQ(p->instructions_size(), 2 * (3 + 5));
  EXPECT_EQ(p->dma_size(), 2 * (2 + 3));
  EXPECT_EQ(p->ticks_per_nanosec(), 1000u);
  EXPECT_EQ(p->device().name(), "trn1");
  EXPECT_EQ(p->kernel_info(1).source_ops(1), "aten.add.Tensor");
  nrt_execution_stats_t stats;
  ASSERT_EQ(nrt_get_last_execution_stats(m, &stats, sizeof(stats), nullptr), NRT_SUCCESS);
  EXPECT_EQ(p->total_ticks(), 2 * stats.device_time_ps);
  nrt_destroy_tensor_set(&in);
  nrt_destroy_tensor_set(&out);
}

TEST_F(NrtApi, InspectSessionWritesTheProfileDirectory) {
  std::string neff_bytes = Serialize(AddModel(4, 8));
  std::string dir = TempDir() + "/nested/profile";
  nrt_inspect_config_t* opts = nullptr;
  ASSERT_EQ(nrt_inspect_config_allocate(&opts), NRT_SUCCESS);
  EXPECT_EQ(nrt_inspect_config_set_output_dir(opts, ""), NRT_INVALID);
  ASSERT_EQ(nrt_inspect_config_set_output_dir(opts, dir.c_str()), NRT_SUCCESS);
  ASSERT_EQ(nrt_inspect_config_set_enable_inspect(opts, true), NRT_SUCCESS);
  ASSERT_EQ(nrt_inspect_begin_with_options(opts), NRT_SUCCESS) << LastError();
  EXPECT_EQ(nrt_inspect_begin_with_options(opts), NRT_INVALID);  // one session at a time
  nrt_inspect_config_free(opts);
  nrt_model_t* m = Load(neff_bytes);
  nrt_tensor_set_t *in, *out;
  nrt_tensor_t* z;
  AddSets(4, 8, &in, &out, &z);
  ASSERT_EQ(nrt_execute(m, in, out), NRT_SUCCESS);
  ASSERT_EQ(nrt_unload(m), NRT_SUCCESS);  // the session keeps what it needs
  ASSERT_EQ(nrt_inspect_stop(), NRT_SUCCESS) << LastError();
  EXPECT_EQ(nrt_inspect_stop(), NRT_INVALID);

  uint64_t h = neff::ProfileHash(*neff::ParseHeader(neff_bytes));
  std::string H = std::to_string(h);
  EXPECT_EQ(ListDir(dir), (std::set<std::string>{"neff_" + H + ".neff", H + "_instid_0_vnc_0.ntff",
                                                  "trace.json"}));
  EXPECT_EQ(Slurp(dir + "/neff_" + H + ".neff"), neff_bytes);  // byte-identical copy
  absl::StatusOr<ntff::Profile> p = ntff::ParseNtff(Slurp(dir + "/" + H + "_instid_0_vnc_0.ntff"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->neff_hash(), h);
  EXPECT_EQ(p->execution_count(), 1u);
  std::string trace = Slurp(dir + "/trace.json");
  for (const char* s : {"\"framework\"", "\"runtime\"", "\"hardware\"", "\"nrt_load\"",
                        "\"nrt_execute\"", "\"nrta_execute_schedule\"", "\"nc_exec_running\"",
                        "\"traceEvents\""})
    EXPECT_NE(trace.find(s), std::string::npos) << s;
  nrt_destroy_tensor_set(&in);
  nrt_destroy_tensor_set(&out);
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The public header's defaults: a session begun without
// nrt_inspect_config_set_enable_inspect(true) captures nothing.
TEST_F(NrtApi, InspectOptionsControlWhatIsWritten) {
  std::string neff_bytes = Serialize(AddModel(4, 8));
  uint64_t h = neff::ProfileHash(*neff::ParseHeader(neff_bytes));
  std::string H = std::to_string(h);
  nrt_model_t* m = Load(neff_bytes);
  nrt_tensor_set_t *in, *out;
  nrt_tensor_t* z;
  AddSets(4, 8, &in, &out, &z);
  auto session = [&](const std::string& dir, auto configure) {
    nrt_inspect_config_t* opts = nullptr;
    EXPECT_EQ(nrt_inspect_config_allocate(&opts), NRT_SUCCESS);
    EXPECT_EQ(nrt_inspect_config_set_output_dir(opts, dir.c_str()), NRT_SUCCESS);
    configure(opts);
    EXPECT_EQ(nrt_inspect_begin_with_options(opts), NRT_SUCCESS) << LastError();
    nrt_inspect_config_free(opts);
    EXPECT_EQ(nrt_execute(m, in, out), NRT_SUCCESS);
    EXPECT_EQ(nrt_execute(m, in, out), NRT_SUCCESS);
    EXPECT_EQ(nrt_inspect_stop(), NRT_SUCCESS) << LastError();
  };
  std::string off = TempDir() + "/inspect_off";
  session(off, [](nrt_inspect_config_t*) {});
  EXPECT_FALSE(std::filesystem::exists(off));

  std::string device_only = TempDir() + "/device_only";
  session(device_only, [](nrt_inspect_config_t* o) {
    EXPECT_EQ(nrt_inspect_config_set_enable_inspect(o, true), NRT_SUCCESS);
    EXPECT_EQ(nrt_inspect_config_set_activity(o, "system_profile", false), NRT_SUCCESS);
    EXPECT_EQ(nrt_inspect_config_set_activity(o, "gpu_util", true), NRT_INVALID);
  });
  EXPECT_EQ(ListDir(device_only), (std::set<std::string>{"neff_" + H + ".neff", H + "_instid_0_vnc_0.ntff"}));

  std::string system_only = TempDir() + "/system_only";
  session(system_only, [](nrt_inspect_config_t* o) {
    EXPECT_EQ(nrt_inspect_config_set_enable_inspect(o, true), NRT_SUCCESS);
    EXPECT_EQ(nrt_inspect_config_set_activity(o, "all", false), NRT_SUCCESS);
    EXPECT_EQ(nrt_inspect_config_set_activity(o, "system_profile", true), NRT_SUCCESS);
    const char** types = nullptr;
    size_t count = 0;
    EXPECT_EQ(nrt_inspect_config_get_enabled_activity_types(o, &types, &count), NRT_SUCCESS);
    ASSERT_EQ(count, 1u);
    EXPECT_STREQ(types[0], "system_profile");
    nrt_inspect_config_free_activity_types(types, count);
    EXPECT_EQ(nrt_inspect_config_set_session_id(o, 7), NRT_SUCCESS);
    EXPECT_EQ(nrt_inspect_config_set_capture_enabled_for_event_type_string(o, "kernel", false), NRT_SUCCESS);
    EXPECT_EQ(nrt_inspect_config_set_capture_enabled_for_event_type_string(o, "no_such_type", false),
              NRT_INVALID);
    // Of the two executions' three events each, the newest four.
    EXPECT_EQ(nrt_inspect_config_set_sys_trace_max_events_per_nc(o, 4), NRT_SUCCESS);
  });
  EXPECT_EQ(ListDir(system_only), (std::set<std::string>{"trace.json"}));
  std::string trace = Slurp(system_only + "/trace.json");
  EXPECT_NE(trace.find("\"session_id\":7"), std::string::npos);
  EXPECT_EQ(Count(trace, "\"ph\":\"X\""), 4u) << trace;
  EXPECT_EQ(Count(trace, "\"nrt_execute\""), 1u);  // the second execution's; the first one's dropped
  EXPECT_EQ(Count(trace, "\"nc_exec_running\""), 2u);
  EXPECT_EQ(trace.find("\"k0_"), std::string::npos);  // kernels left out

  const char** all = nullptr;
  size_t count = 0;
  ASSERT_EQ(nrt_inspect_config_get_all_activity_types(&all, &count), NRT_SUCCESS);
  EXPECT_EQ(count, 4u);
  nrt_inspect_config_free_activity_types(all, count);
  EXPECT_EQ(NRT_EXEC_UNIT_UNRECOVERABLE, 101);
  ASSERT_EQ(nrt_unload(m), NRT_SUCCESS);
  nrt_destroy_tensor_set(&in);
  nrt_destroy_tensor_set(&out);
}

TEST_F(NrtApi, SystemTraceCapturesAndFetchesEvents) {
  char* buffer = nullptr;
  size_t size = 0;
  EXPECT_EQ(nrt_sys_trace_fetch_events(&buffer, &size, nullptr), NRT_INVALID);  // not started
  EXPECT_EQ(nrt_sys_trace_stop(), NRT_INVALID);
  const char** types = nullptr;
  size_t count = 0;
  ASSERT_EQ(nrt_sys_trace_get_event_types(&types, &count), NRT_SUCCESS);
  std::set<std::string> names(types, types + count);
  nrt_sys_trace_free_event_types(types, count);
  EXPECT_EQ(names, (std::set<std::string>{"nrt_load", "nrt_unload", "nrt_execute", "nrta_execute_schedule",
                                          "nc_exec_running", "kernel"}));

  nrt_sys_trace_config_t* cfg = nullptr;
  ASSERT_EQ(nrt_sys_trace_config_allocate(&cfg), NRT_SUCCESS);
  EXPECT_EQ(nrt_sys_trace_config_set_capture_enabled_for_event_type(cfg, "nrt_load", false), NRT_SUCCESS);
  EXPECT_EQ(nrt_sys_trace_config_set_capture_enabled_for_event_type(cfg, "bogus", true), NRT_INVALID);
  ASSERT_EQ(nrt_sys_trace_config_get_enabled_event_types(cfg, &types, &count), NRT_SUCCESS);
  EXPECT_EQ(count, 5u);
  nrt_sys_trace_free_event_types(types, count);
  ASSERT_EQ(nrt_sys_trace_start(cfg), NRT_SUCCESS) << LastError();
  EXPECT_EQ(nrt_sys_trace_start(cfg), NRT_INVALID);  // one capture at a time
  nrt_sys_trace_config_free(cfg);

  nrt_model_t* m = Load(Serialize(AddModel(4, 8)));
  nrt_tensor_set_t *in, *out;
  nrt_tensor_t* z;
  AddSets(4, 8, &in, &out, &z);
  ASSERT_EQ(nrt_execute(m, in, out), NRT_SUCCESS);
  ASSERT_EQ(nrt_execute(m, in, out), NRT_SUCCESS);

  // Another NeuronCore has no events; the fetch hands out none and keeps the rest.
  nrt_sys_trace_fetch_options_t* fetch = nullptr;
  ASSERT_EQ(nrt_sys_trace_fetch_options_allocate(&fetch), NRT_SUCCESS);
  nrt_sys_trace_fetch_options_set_nc_idx(fetch, 1);
  ASSERT_EQ(nrt_sys_trace_fetch_events(&buffer, &size, fetch), NRT_SUCCESS) << LastError();
  EXPECT_EQ(Count(buffer, "\"ph\":\"X\""), 0u);
  EXPECT_EQ(size, std::strlen(buffer));
  nrt_sys_trace_buffer_free(buffer);

  // The two oldest events of NeuronCore 0: the first execution's nrt_execute and its dispatch.
  nrt_sys_trace_fetch_options_set_defaults(fetch);
  nrt_sys_trace_fetch_options_set_max_events_per_nc(fetch, 2);
  ASSERT_EQ(nrt_sys_trace_fetch_events(&buffer, &size, fetch), NRT_SUCCESS);
  std::string first(buffer, size);
  nrt_sys_trace_buffer_free(buffer);
  EXPECT_EQ(Count(first, "\"ph\":\"X\""), 2u) << first;
  EXPECT_NE(first.find("\"nrt_execute\""), std::string::npos);
  EXPECT_NE(first.find("\"traceEvents\""), std::string::npos);
  EXPECT_EQ(first.find("\"nrt_load\""), std::string::npos);  // disabled

  // The rest, once: per execution nrt_execute, its dispatch, nc_exec_running
  // and one kernel (4 events), 8 in all, 2 fetched before.
  ASSERT_EQ(nrt_sys_trace_fetch_events(&buffer, &size, nullptr), NRT_SUCCESS);
  std::string rest(buffer, size);
  nrt_sys_trace_buffer_free(buffer);
  EXPECT_EQ(Count(rest, "\"ph\":\"X\""), 6u) << rest;
  EXPECT_EQ(Count(rest, "\"nrt_execute\""), 1u);
  ASSERT_EQ(nrt_sys_trace_fetch_events(&buffer, &size, nullptr), NRT_SUCCESS);
  EXPECT_EQ(Count(buffer, "\"ph\":\"X\""), 0u);
  nrt_sys_trace_buffer_free(buffer);
  nrt_sys_trace_fetch_options_free(fetch);

  ASSERT_EQ(nrt_unload(m), NRT_SUCCESS);
  ASSERT_EQ(nrt_sys_trace_fetch_events(&buffer, &size, nullptr), NRT_SUCCESS);
  EXPECT_EQ(Count(buffer, "\"nrt_unload\""), 1u);
  nrt_sys_trace_buffer_free(buffer);
  EXPECT_EQ(nrt_sys_trace_stop(), NRT_SUCCESS);
  EXPECT_EQ(nrt_sys_trace_fetch_events(&buffer, &size, nullptr), NRT_INVALID);
  nrt_destroy_tensor_set(&in);
  nrt_destroy_tensor_set(&out);
}

TEST_F(NrtApi, ContinuousProfilingSavesTheLatestExecution) {
  std::string neff_bytes = Serialize(AddModel(4, 8));
  std::string H = std::to_string(neff::ProfileHash(*neff::ParseHeader(neff_bytes)));
  nrt_profile_continuous_options_t* opts = nullptr;
  ASSERT_EQ(nrt_profile_continuous_options_allocate(&opts), NRT_SUCCESS);
  std::string dir = TempDir() + "/continuous";
  EXPECT_EQ(nrt_profile_continuous_options_set_output_dir(opts, ""), NRT_INVALID);
  ASSERT_EQ(nrt_profile_continuous_options_set_output_dir(opts, dir.c_str()), NRT_SUCCESS);
  EXPECT_EQ(nrt_profile_continuous_save(0, opts), NRT_INVALID);  // not running
  EXPECT_EQ(nrt_profile_continuous_stop(), NRT_INVALID);
  ASSERT_EQ(nrt_profile_continuous_start(opts), NRT_SUCCESS);
  EXPECT_EQ(nrt_profile_continuous_start(opts), NRT_INVALID);
  EXPECT_EQ(nrt_profile_continuous_save(0, opts), NRT_INVALID);  // nothing executed yet
  nrt_model_t* m = Load(neff_bytes);
  nrt_tensor_set_t *in, *out;
  nrt_tensor_t* z;
  AddSets(4, 8, &in, &out, &z);
  ASSERT_EQ(nrt_execute(m, in, out), NRT_SUCCESS);
  ASSERT_EQ(nrt_execute(m, in, out), NRT_SUCCESS);
  ASSERT_EQ(nrt_profile_continuous_save(0, opts), NRT_SUCCESS) << LastError();
  ASSERT_EQ(nrt_unload(m), NRT_SUCCESS);                          // what was kept stays
  ASSERT_EQ(nrt_profile_continuous_save(0, opts), NRT_SUCCESS);  // a second file, not over the first
  EXPECT_EQ(nrt_profile_continuous_save(1, opts), NRT_INVALID);
  EXPECT_EQ(ListDir(dir), (std::set<std::string>{"neff_" + H + ".neff", H + "_instid_0_vnc_0.ntff",
                                                  H + "_instid_1_vnc_0.ntff"}));
  EXPECT_EQ(Slurp(dir + "/neff_" + H + ".neff"), neff_bytes);
  absl::StatusOr<ntff::Profile> p = ntff::ParseNtff(Slurp(dir + "/" + H + "_instid_0_vnc_0.ntff"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->execution_count(), 1u);  // the latest execution alone
  ASSERT_EQ(nrt_profile_continuous_stop(), NRT_SUCCESS);
  nrt_profile_continuous_options_free(opts);
  nrt_destroy_tensor_set(&in);
  nrt_destroy_tensor_set(&out);
}

TEST_F(NrtApi, ExperimentalCallsOfAWorldOfOneDevice) {
  // Legacy tracing writes trace.json's format to the file it is given.
  EXPECT_EQ(nrt_trace_stop("x.json"), NRT_INVALID);
  ASSERT_EQ(nrt_trace_start(true), NRT_SUCCESS);
  EXPECT_EQ(nrt_trace_start(false), NRT_INVALID);
  nrt_model_t* m = Load(Serialize(AddModel(4, 8)));
  nrt_tensor_set_t *in, *out;
  nrt_tensor_t* z;
  AddSets(4, 8, &in, &out, &z);
  ASSERT_EQ(nrt_execute(m, in, out), NRT_SUCCESS);
  std::string file = TempDir() + "/legacy_trace.json";
  ASSERT_EQ(nrt_trace_stop(file.c_str()), NRT_SUCCESS) << LastError();
  std::string trace = Slurp(file);
  EXPECT_EQ(Count(trace, "\"nrt_execute\""), 1u);
  EXPECT_EQ(Count(trace, "\"nc_exec_running\""), 1u);
  EXPECT_EQ(nrt_trace_stop(file.c_str()), NRT_INVALID);

  // Copies into a tensor's storage, and nowhere else.
  float values[4] = {1, 2, 3, 4}, elsewhere[4] = {0, 0, 0, 0};
  auto* va = static_cast<float*>(nrt_tensor_get_va(z));
  ASSERT_NE(va, nullptr);
  ASSERT_EQ(nrt_memcpy_to_device(va + 1, values, sizeof values), NRT_SUCCESS) << LastError();
  EXPECT_EQ(va[1], 1.0f);
  EXPECT_EQ(va[4], 4.0f);
  EXPECT_EQ(nrt_memcpy_to_device(va + 30, values, sizeof values), NRT_INVALID);  // runs past its end
  EXPECT_EQ(nrt_memcpy_to_device(elsewhere, values, sizeof values), NRT_INVALID);
  EXPECT_EQ(elsewhere[0], 0.0f);

  float input[3] = {5, 6, 7}, gathered[3] = {0, 0, 0};
  EXPECT_EQ(nrt_all_gather(0, 0, 1, sizeof input, input, gathered), NRT_SUCCESS);
  EXPECT_EQ(gathered[2], 7.0f);
  EXPECT_EQ(nrt_all_gather(0, 0, 2, sizeof input, input, gathered), NRT_INVALID);
  EXPECT_EQ(nrt_barrier(-1, 0, 1), NRT_SUCCESS);
  EXPECT_EQ(nrt_barrier(0, 1, 2), NRT_INVALID);
  EXPECT_EQ(nrt_register_async_exec_callback(nullptr, nullptr), NRT_SUCCESS);
  EXPECT_EQ(nrt_async_drain_queued_execs(0), NRT_SUCCESS);
  EXPECT_EQ(nrt_async_drain_queued_execs(3), NRT_INVALID);
  // No network and no microcode: refusals that say so, never a crash.
  int limit = -1;
  EXPECT_EQ(nrt_async_sendrecv_get_max_num_communicators_per_lnc(&limit), NRT_SUCCESS);
  EXPECT_EQ(limit, 0);
  nrt_async_sendrecv_comm_t* comm = reinterpret_cast<nrt_async_sendrecv_comm_t*>(&limit);
  EXPECT_EQ(nrt_async_sendrecv_connect("127.0.0.1", 0, 0, &comm), NRT_INVALID);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(LastError().find("no network"), std::string::npos) << LastError();
  EXPECT_EQ(nrt_set_pool_eng_ucode(nullptr), NRT_INVALID);
  int nccl_err = 0;
  char why[128] = "";
  EXPECT_EQ(nrt_get_libnccl_net(&nccl_err, why, sizeof why), nullptr);
  EXPECT_EQ(nccl_err, 1);
  EXPECT_NE(std::string(why).find("no network plugin"), std::string::npos) << why;
  ASSERT_EQ(nrt_unload(m), NRT_SUCCESS);
  nrt_destroy_tensor_set(&in);
  nrt_destroy_tensor_set(&out);
}

// nrt_async.h: requests run when scheduled; sequence ids, completion and
// the error tracker behave as for requests that completed at once.
TEST_F(NrtApi, AsyncRequestsRunInOrderAndReportFailures) {
  nrt_model_t* m = Load(Serialize(AddModel(4, 8)));
  nrt_tensor_set_t *in, *out;
  nrt_tensor_t* z;
  AddSets(4, 8, &in, &out, &z);
  nrta_error_tracker_t* errors = nullptr;
  EXPECT_EQ(nrta_error_tracker_create(1, &errors), NRT_INVALID);
  ASSERT_EQ(nrta_error_tracker_create(0, &errors), NRT_SUCCESS);
  nrta_seq_t none = 0, s1 = 0, s2 = 0, s3 = 0;
  // The last sequence handed out on the queue (0 before any request; the
  // numbering is the process's, so an earlier test in this process may have
  // advanced it).
  ASSERT_EQ(nrta_get_sequence(0, NRTA_XU_COMPUTE, 0, &none), NRT_SUCCESS);
  const uint64_t before = NRTA_SEQ_GET_SEQ_NUM(none);
  ASSERT_EQ(nrta_execute_schedule(m, in, out, 0, errors, &s1), NRT_SUCCESS) << LastError();
  ASSERT_EQ(nrta_execute_schedule(m, in, out, 0, errors, &s2), NRT_SUCCESS);
  EXPECT_EQ(nrta_execute_schedule(m, in, out, 1, errors, &s3), NRT_INVALID);  // compute: queue 0 only
  EXPECT_EQ(NRTA_SEQ_GET_SEQ_NUM(s1), before + 1);
  EXPECT_EQ(NRTA_SEQ_GET_SEQ_NUM(s2), before + 2);
  EXPECT_EQ(NRTA_SEQ_GET_XU_ID(s1), NRTA_SEQ_GET_XU_ID(s2));
  nrta_seq_t last = 0;
  ASSERT_EQ(nrta_get_sequence(0, NRTA_XU_COMPUTE, 0, &last), NRT_SUCCESS);
  EXPECT_EQ(last, s2);
  bool done = false;
  ASSERT_EQ(nrta_is_completed(s2, &done), NRT_SUCCESS);
  EXPECT_TRUE(done);
  EXPECT_EQ(nrta_is_completed(s2 + 1, &done), NRT_INVALID);  // never handed out
  int fd = -1;
  ASSERT_EQ(nrta_get_completion_handle(s1, &fd), NRT_SUCCESS);
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 1);  // readable: complete
  close(fd);

  // Tensor requests: a write, a copy and a read, on their own units.
  std::vector<float> values(32), back(32, 0.0f);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i) - 3.5f;
  nrt_tensor_t* other = Tensor(values.size() * 4, "other");
  nrta_seq_t w = 0, c = 0, r = 0;
  ASSERT_EQ(nrta_tensor_write(other, values.data(), 0, 128, 3, errors, &w), NRT_SUCCESS);
  ASSERT_EQ(nrta_tensor_copy(other, 0, z, 0, 128, 0, errors, &c), NRT_SUCCESS);
  ASSERT_EQ(nrta_tensor_read(back.data(), z, 0, 128, 0, errors, &r), NRT_SUCCESS);
  EXPECT_EQ(back, values);
  EXPECT_NE(NRTA_SEQ_GET_XU_ID(w), NRTA_SEQ_GET_XU_ID(r));
  EXPECT_EQ(nrta_tensor_read(back.data(), z, 100, 128, 0, errors, &r), NRT_INVALID);  // out of range: refused
  EXPECT_EQ(nrta_tensor_write(other, values.data(), 0, 4, 256, errors, &w), NRT_INVALID);

  // A collective of one rank copies each input to its output.
  uint32_t group[1] = {0};
  nrt_cc_comm_t comm{group, 0, 1, 0, 1, 0};
  nrt_tensor_t* ins[1] = {other};
  nrt_tensor_t* outs[1] = {z};
  nrt_tensor_list_t input{ins, 1}, output{outs, 1};
  nrt_cc_context_t* ctx = nullptr;
  ASSERT_EQ(nrta_cc_prepare(&comm, &input, &output, NRT_DTYPE_FLOAT32, NRT_OP_ADD, NRT_CC_ALLREDUCE, &ctx),
            NRT_SUCCESS)
      << LastError();
  nrta_seq_t cc = 0;
  ASSERT_EQ(nrta_cc_schedule(&ctx, 0, errors, &cc), NRT_SUCCESS);
  EXPECT_EQ(ctx, nullptr);
  comm.rank_n = 2;
  EXPECT_EQ(nrta_cc_prepare(&comm, &input, &output, NRT_DTYPE_FLOAT32, NRT_OP_ADD, NRT_CC_ALLREDUCE, &ctx),
            NRT_INVALID);

  const nrta_error_t* list = nullptr;
  size_t count = 7;
  ASSERT_EQ(nrta_error_tracker_get_list(errors, &list, &count), NRT_SUCCESS);
  EXPECT_EQ(count, 0u);  // nothing failed while running
  nrta_error_tracker_destroy(errors);
  ASSERT_EQ(nrt_unload(m), NRT_SUCCESS);
  nrt_destroy_tensor_set(&in);
  nrt_destroy_tensor_set(&out);
}

TEST_F(NrtApi, InspectClockAndFrameworkEvents) {
  uint64_t now = 0;
  EXPECT_EQ(nrt_inspect_get_time(&now), NRT_INVALID);  // no session
  EXPECT_EQ(nrt_inspect_add_framework_event("x", 0, 1, nullptr, nullptr, 0), NRT_INVALID);
  std::string dir = TempDir() + "/framework_events";
  nrt_inspect_config_t* opts = nullptr;
  ASSERT_EQ(nrt_inspect_config_allocate(&opts), NRT_SUCCESS);
  ASSERT_EQ(nrt_inspect_config_set_output_dir(opts, dir.c_str()), NRT_SUCCESS);
  ASSERT_EQ(nrt_inspect_config_set_enable_inspect(opts, true), NRT_SUCCESS);
  ASSERT_EQ(nrt_inspect_begin_with_options(opts), NRT_SUCCESS) << LastError();
  nrt_inspect_config_free(opts);
  nrt_model_t* m = Load(Serialize(AddModel(4, 8)));
  nrt_tensor_set_t *in, *out;
  nrt_tensor_t* z;
  AddSets(4, 8, &in, &out, &z);
  uint64_t before = 0, after = 0;
  ASSERT_EQ(nrt_inspect_get_time(&before), NRT_SUCCESS);
  ASSERT_EQ(nrt_execute(m, in, out), NRT_SUCCESS);
  ASSERT_EQ(nrt_inspect_get_time(&after), NRT_SUCCESS);
  nrt_execution_stats_t stats;
  ASSERT_EQ(nrt_get_last_execution_stats(m, &stats, sizeof(stats), nullptr), NRT_SUCCESS);
  // The execution lasts its modeled time on the session clock, whatever its
  // simulation took; the host calls around it add their (small) host time.
  EXPECT_GE(after - before, stats.device_time_ps);
  EXPECT_LT(after - before, stats.device_time_ps + uint64_t(1e12));

  const char* keys[] = {"model", "bytes"};
  const char* values[] = {"caf\xc3\xa9 \"quoted\"", ""};
  EXPECT_EQ(nrt_inspect_add_framework_event("neuroncc::call", before, after, keys, values, 2), NRT_SUCCESS)
      << LastError();
  EXPECT_EQ(nrt_inspect_add_framework_event("late", after, before, nullptr, nullptr, 0), NRT_INVALID);
  EXPECT_EQ(nrt_inspect_add_framework_event("", 0, 1, nullptr, nullptr, 0), NRT_INVALID);
  EXPECT_EQ(nrt_inspect_add_framework_event("bad\xff", 0, 1, nullptr, nullptr, 0), NRT_INVALID);
  EXPECT_EQ(nrt_inspect_add_framework_event("x", 0, 1, keys, nullptr, 1), NRT_INVALID);
  const char* empty_key[] = {""};
  EXPECT_EQ(nrt_inspect_add_framework_event("x", 0, 1, empty_key, values, 1), NRT_INVALID);
  std::string huge(5000, 'a');
  EXPECT_EQ(nrt_inspect_add_framework_event(huge.c_str(), 0, 1, nullptr, nullptr, 0), NRT_INVALID);
  ASSERT_EQ(nrt_unload(m), NRT_SUCCESS);
  ASSERT_EQ(nrt_inspect_stop(), NRT_SUCCESS) << LastError();
  std::string trace = Slurp(dir + "/trace.json");
  EXPECT_NE(trace.find("\"neuroncc::call\""), std::string::npos);
  EXPECT_NE(trace.find("{\"model\":\"caf\xc3\xa9 \\\"quoted\\\"\",\"bytes\":\"\"}"), std::string::npos) << trace;
  EXPECT_EQ(trace.find("late"), std::string::npos);
  nrt_destroy_tensor_set(&in);
  nrt_destroy_tensor_set(&out);
}

TEST_F(NrtApi, EmptyProfilesAreNotWritten) {
  nrt_model_t* m = Load(Serialize(AddModel(2, 2)));
  std::string file = TempDir() + "/empty.ntff";
  ASSERT_EQ(nrt_profile_start(m, file.c_str()), NRT_SUCCESS);
  EXPECT_EQ(nrt_profile_stop(file.c_str()), NRT_INVALID);
  EXPECT_NE(LastError().find("no execution was captured"), std::string::npos) << LastError();
  EXPECT_FALSE(std::filesystem::exists(file));
  EXPECT_EQ(nrt_profile_stop(file.c_str()), NRT_INVALID);  // that capture has ended
  ASSERT_EQ(nrt_unload(m), NRT_SUCCESS);
}

TEST_F(NrtApi, OutputCompletionWaitsForAnotherThreadsExecution) {
  nrt_model_t* m = Load(Serialize(AddModel(4, 8)));
  nrt_tensor_set_t *in, *out;
  nrt_tensor_t* z;
  AddSets(4, 8, &in, &out, &z);
  EXPECT_EQ(nrt_tensor_check_output_completion(z, 0, 1), NRT_TIMEOUT);
  NRT_STATUS waited = NRT_FAILURE;
  std::thread waiter([&] { waited = nrt_tensor_check_output_completion(z, 10000000, 1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(nrt_execute(m, in, out), NRT_SUCCESS);
  waiter.join();
  EXPECT_EQ(waited, NRT_SUCCESS);
  EXPECT_EQ(nrt_tensor_check_output_completion(nullptr, 0, 1), NRT_INVALID);
  nrt_destroy_tensor_set(&in);
  nrt_destroy_tensor_set(&out);
  ASSERT_EQ(nrt_unload(m), NRT_SUCCESS);
}

TEST_F(NrtApi, SlicesShareStorageThatOutlivesTheSource) {
  nrt_tensor_t *src = nullptr, *slice = nullptr, *empty = nullptr;
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, "src", &src), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_allocate_slice(src, 16, 32, "s", &slice), NRT_SUCCESS);
  EXPECT_EQ(nrt_tensor_allocate_slice(src, 40, 32, "s", &empty), NRT_INVALID);
  uint32_t v = 0xdeadbeef, back = 0;
  ASSERT_EQ(nrt_tensor_write(slice, &v, 4, 4), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_read(src, &back, 20, 4), NRT_SUCCESS);
  EXPECT_EQ(back, v);
  nrt_tensor_free(&src);
  back = 0;
  ASSERT_EQ(nrt_tensor_read(slice, &back, 4, 4), NRT_SUCCESS);  // still readable: shared storage
  EXPECT_EQ(back, v);
  ASSERT_EQ(nrt_tensor_allocate_empty("e", &empty), NRT_SUCCESS);
  EXPECT_EQ(nrt_tensor_get_size(empty), 0u);
  EXPECT_EQ(nrt_tensor_get_va(empty), nullptr);
  EXPECT_EQ(nrt_tensor_read(empty, &back, 0, 4), NRT_INVALID);
  uint8_t mine[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_EQ(nrt_tensor_attach_buffer(empty, mine, sizeof mine), NRT_SUCCESS);
  EXPECT_EQ(nrt_tensor_get_va(empty), mine);
  ASSERT_EQ(nrt_tensor_read(empty, &back, 4, 4), NRT_SUCCESS);
  EXPECT_EQ(std::memcmp(&back, mine + 4, 4), 0);
  nrt_tensor_free(&slice);
  nrt_tensor_free(&empty);
  EXPECT_EQ(nrt_tensor_attach_buffer(empty, mine, 8), NRT_INVALID);  // NULL after free
}

// A dead handle stays dead when the allocator reuses its object's memory:
// free and allocate many times (glibc hands the same chunk back at once), and
// the old handle must never name the new object.
TEST_F(NrtApi, StaleHandlesStayInvalidAfterTheirMemoryIsReused) {
  std::string bytes = Serialize(AddModel(2, 4));
  for (int trial = 0; trial < 100; ++trial) {
    nrt_tensor_t* dead = nullptr;
    ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 32, "a", &dead), NRT_SUCCESS);
    nrt_tensor_t* copy = dead;
    nrt_tensor_free(&dead);
    nrt_tensor_t* fresh = nullptr;
    ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 32, "b", &fresh), NRT_SUCCESS);
    EXPECT_NE(copy, fresh);
    uint8_t buf[32];
    EXPECT_EQ(nrt_tensor_read(copy, buf, 0, sizeof buf), NRT_INVALID_HANDLE);
    EXPECT_EQ(nrt_tensor_get_size(copy), 0u);
    nrt_tensor_free(&fresh);

    nrt_model_t* old_model = Load(bytes);
    ASSERT_EQ(nrt_unload(old_model), NRT_SUCCESS);
    nrt_model_t* new_model = Load(bytes);
    EXPECT_NE(old_model, new_model);
    uint32_t count = 0;
    EXPECT_EQ(nrt_get_model_nc_count(old_model, &count), NRT_INVALID_HANDLE);
    EXPECT_EQ(nrt_unload(old_model), NRT_INVALID_HANDLE);
    ASSERT_EQ(nrt_unload(new_model), NRT_SUCCESS);

    nrt_tensor_set_t* old_set = nullptr;
    ASSERT_EQ(nrt_allocate_tensor_set(&old_set), NRT_SUCCESS);
    nrt_tensor_set_t* set_copy = old_set;
    nrt_destroy_tensor_set(&old_set);
    nrt_tensor_set_t* new_set = nullptr;
    ASSERT_EQ(nrt_allocate_tensor_set(&new_set), NRT_SUCCESS);
    nrt_tensor_t* t = nullptr;
    EXPECT_EQ(nrt_get_tensor_from_tensor_set(set_copy, "x", &t), NRT_INVALID_HANDLE);
    nrt_destroy_tensor_set(&new_set);
  }
}

TEST(NrtInspectEnv, EnvironmentEnablesProfilingFromInitToClose) {
  std::string dir = TempDir() + "/env";
  setenv("NEURON_RT_INSPECT_ENABLE", "1", 1);
  setenv("NEURON_RT_INSPECT_OUTPUT_DIR", dir.c_str(), 1);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  unsetenv("NEURON_RT_INSPECT_ENABLE");
  unsetenv("NEURON_RT_INSPECT_OUTPUT_DIR");
  std::string neff_bytes = Serialize(AddModel(2, 2));
  nrt_model_t* m = nullptr;
  ASSERT_EQ(nrt_load(neff_bytes.data(), neff_bytes.size(), -1, -1, &m), NRT_SUCCESS);
  nrt_close();
  // The model never ran: the session has its trace.json and no empty trace.
  std::set<std::string> files = ListDir(dir);
  EXPECT_EQ(files, std::set<std::string>{"trace.json"});
  EXPECT_NE(Slurp(dir + "/trace.json").find("\"nrt_load\""), std::string::npos);
}

// ---------------------------------------------------------------------------
// Timing-only executions: the same timeline, stats and profile as a full
// run, with no value computed. (Last in the binary: it closes the runtime.)

std::string ProfileOf(nrt_model_t* m, bool timing_only, const nrt_tensor_set_t* in, nrt_tensor_set_t* out,
                      const std::string& path) {
  EXPECT_EQ(nrt_profile_start(m, path.c_str()), NRT_SUCCESS) << LastError();
  NRT_STATUS st = timing_only ? nrt_execute_timing_only(m, in, out, 2) : nrt_execute_repeat(m, in, out, 2);
  EXPECT_EQ(st, NRT_SUCCESS) << LastError();
  EXPECT_EQ(nrt_profile_stop(path.c_str()), NRT_SUCCESS) << LastError();
  absl::StatusOr<std::string> bytes = neff::ReadFile(path);
  EXPECT_TRUE(bytes.ok());
  std::remove(path.c_str());
  return bytes.ok() ? *bytes : "";
}

TEST(TimingOnly, SameTimelineStatsAndProfileAsAFullRun) {
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  for (neff::DispatchModel model : {neff::DISPATCH_PER_KERNEL, neff::DISPATCH_WHOLE_GRAPH}) {
    neff::Executable exe = TwoKernelModel(16, 64);
    exe.set_dispatch_model(model);
    std::string bytes = Serialize(exe);
    nrt_model_t* m = nullptr;
    ASSERT_EQ(nrt_load(bytes.data(), bytes.size(), -1, -1, &m), NRT_SUCCESS) << LastError();
    nrt_tensor_set_t *in = nullptr, *out = nullptr;
    ASSERT_EQ(nrt_allocate_tensor_set(&in), NRT_SUCCESS);
    ASSERT_EQ(nrt_allocate_tensor_set(&out), NRT_SUCCESS);
    std::vector<nrt_tensor_t*> tensors;
    for (const char* name : {"x", "w", "z"}) {
      nrt_tensor_t* t = nullptr;
      ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 16 * 64 * 4, name, &t), NRT_SUCCESS);
      std::string init(16 * 64 * 4, '\x3f');
      ASSERT_EQ(nrt_tensor_write(t, init.data(), 0, init.size()), NRT_SUCCESS);
      ASSERT_EQ(nrt_add_tensor_to_tensor_set(std::string(name) == "z" ? out : in, name, t), NRT_SUCCESS);
      tensors.push_back(t);
    }
    std::string path = ::testing::TempDir() + "/timing_only.ntff";
    std::string full = ProfileOf(m, false, in, out, path);
    nrt_execution_stats_t a{}, b{};
    ASSERT_EQ(nrt_get_last_execution_stats(m, &a, sizeof(a), nullptr), NRT_SUCCESS);
    EXPECT_EQ(a.timing_only, 0u);
    // Outputs are not touched: z keeps a marker.
    std::string marker(16 * 64 * 4, '\x5a');
    ASSERT_EQ(nrt_tensor_write(tensors[2], marker.data(), 0, marker.size()), NRT_SUCCESS);
    std::string timed = ProfileOf(m, true, nullptr, nullptr, path);
    ASSERT_EQ(nrt_get_last_execution_stats(m, &b, sizeof(b), nullptr), NRT_SUCCESS);
    EXPECT_EQ(b.timing_only, 1u);
    EXPECT_FALSE(full.empty());
    EXPECT_EQ(full, timed);  // byte-identical NTFF
    EXPECT_EQ(std::memcmp(&a, &b, offsetof(nrt_execution_stats_t, timing_only)), 0);
    EXPECT_EQ(a.dispatch_count, model == neff::DISPATCH_WHOLE_GRAPH ? 1u : 2u);
    EXPECT_EQ(a.kernel_count, 2u);
    std::string z(marker.size(), '\0');
    ASSERT_EQ(nrt_tensor_read(tensors[2], z.data(), 0, z.size()), NRT_SUCCESS);
    EXPECT_EQ(z, marker);
    // Sets that are given are checked as nrt_execute checks them.
    nrt_tensor_set_t* partial = nullptr;
    ASSERT_EQ(nrt_allocate_tensor_set(&partial), NRT_SUCCESS);
    ASSERT_EQ(nrt_add_tensor_to_tensor_set(partial, "x", tensors[0]), NRT_SUCCESS);
    EXPECT_EQ(nrt_execute_timing_only(m, partial, nullptr, 1), NRT_INVALID);
    EXPECT_NE(LastError().find("missing input 'w'"), std::string::npos) << LastError();
    EXPECT_EQ(nrt_execute_timing_only(m, in, out, 0), NRT_INVALID);
    EXPECT_EQ(nrt_execute_timing_only(nullptr, nullptr, nullptr, 1), NRT_INVALID);
    nrt_destroy_tensor_set(&partial);
    nrt_destroy_tensor_set(&in);
    nrt_destroy_tensor_set(&out);
    for (nrt_tensor_t* t : tensors) nrt_tensor_free(&t);
    nrt_unload(m);
  }
  nrt_close();
}

}  // namespace
}  // namespace neuroncc
