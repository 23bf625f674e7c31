// neuron-run: runs a NEFF on the simulated NeuronCore.
//
//   neuron-run model.neff [--input NAME=@file.npy | --input @file.npy]...
//              [--output-dir DIR] [--profile DIR] [--target trn1|trn2] [--timing-only]
//
// A client of the public-style C API only (nrt/nrt.h and friends), like any
// application would be.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "file_util.h"
#include "npy.h"
#include "nrt/nrt.h"
#include "nrt/nrt_ext.h"
#include "nrt/nrt_profile.h"
#include "tensor_io.h"

namespace {

using neuroncc::tools::InputSpec;
using neuroncc::tools::ModelIo;

constexpr const char* kUsage =
    "usage: neuron-run MODEL.neff [options]\n"
    "  --input NAME=@FILE.npy   bind a model input by name (repeatable)\n"
    "  --input @FILE.npy        bind the next model input by position (graph input order)\n"
    "  --output-dir DIR         write DIR/output_<i>.npy for every output, in graph order\n"
    "  --profile DIR            write a profile: DIR/neff_<H>.neff, DIR/<H>_instid_0_vnc_0.ntff,\n"
    "                           DIR/trace.json (view with: neuron-profile view -d DIR)\n"
    "  --target trn1|trn2       the instance to simulate (default: the NEFF's own target)\n"
    "  --timing-only            model the device time and write the profile without computing\n"
    "                           any value (nrt_execute_timing_only): the same modeled time and\n"
    "                           profile as a full run; inputs are optional and outputs are not\n"
    "                           produced\n"
    "  -q, --quiet              print nothing on success\n"
    "bfloat16 inputs are read from float32 .npy files (rounded to nearest even);\n"
    "bfloat16 outputs are written as float32 (exact). int32 and int64 inputs (token ids)\n"
    "are read from .npy files of exactly that type ('<i4', '<i8').\n";

int Fail(const std::string& msg) {
  std::fprintf(stderr, "neuron-run: error: %s\n", msg.c_str());
  return 1;
}

std::string NrtError(const char* what, NRT_STATUS st) {
  return absl::StrCat(what, ": ", nrt_get_status_as_str(st), ": ", nrt_get_last_error_message());
}

struct Options {
  std::string neff;
  std::vector<InputSpec> inputs;
  std::string output_dir;
  std::string profile_dir;
  std::string target;
  bool quiet = false;
  bool timing_only = false;
};

// Returns 0 to continue, or an exit code.
int ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag, std::string* out) -> bool {
      std::string f = flag;
      if (a == f) {
        if (i + 1 >= argc) return false;
        *out = argv[++i];
        return true;
      }
      if (a.rfind(f + "=", 0) == 0) {
        *out = a.substr(f.size() + 1);
        return true;
      }
      return false;
    };
    std::string v;
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return -1;
    } else if (a == "-q" || a == "--quiet") {
      o->quiet = true;
    } else if (a == "--timing-only") {
      o->timing_only = true;
    } else if (a == "--input" || a.rfind("--input=", 0) == 0) {
      if (!value("--input", &v)) return Fail("--input needs a value"), 2;
      InputSpec spec;
      std::string error;
      if (!neuroncc::tools::ParseInputSpec(v, &spec, &error)) return Fail(error), 2;
      o->inputs.push_back(spec);
    } else if (a == "--output-dir" || a.rfind("--output-dir=", 0) == 0) {
      if (!value("--output-dir", &o->output_dir) || o->output_dir.empty()) return Fail("--output-dir needs a value"), 2;
    } else if (a == "--profile" || a.rfind("--profile=", 0) == 0) {
      if (!value("--profile", &o->profile_dir) || o->profile_dir.empty()) return Fail("--profile needs a value"), 2;
    } else if (a == "--target" || a.rfind("--target=", 0) == 0) {
      if (!value("--target", &o->target)) return Fail("--target needs a value"), 2;
      if (o->target != "trn1" && o->target != "trn2")
        return Fail(absl::StrCat("unknown --target '", o->target, "' (expected trn1 or trn2)")), 2;
    } else if (!a.empty() && a[0] == '-') {
      std::fputs(kUsage, stderr);
      return Fail(absl::StrCat("unknown option '", a, "'")), 2;
    } else if (o->neff.empty()) {
      o->neff = a;
    } else {
      return Fail(absl::StrCat("unexpected argument '", a, "' (inputs go with --input NAME=@file.npy)")), 2;
    }
  }
  if (o->neff.empty()) {
    std::fputs(kUsage, stderr);
    return Fail("no model given"), 2;
  }
  if (o->timing_only && !o->output_dir.empty())
    return Fail("--timing-only computes no outputs, so --output-dir has nothing to write"), 2;
  return 0;
}

class Runtime {
 public:
  ~Runtime() {
    for (nrt_tensor_t* t : tensors_) nrt_tensor_free(&t);
    if (in_) nrt_destroy_tensor_set(&in_);
    if (out_) nrt_destroy_tensor_set(&out_);
    if (model_) nrt_unload(model_);
    nrt_close();
  }
  nrt_model_t* model_ = nullptr;
  nrt_tensor_set_t* in_ = nullptr;
  nrt_tensor_set_t* out_ = nullptr;
  std::vector<nrt_tensor_t*> tensors_;
};

int Run(const Options& o) {
  absl::StatusOr<std::string> read = neuroncc::files::ReadFile(o.neff);
  if (!read.ok()) return Fail(std::string(read.status().message()));
  std::string neff = std::move(*read), error;
  if (!o.target.empty()) {
    if (NRT_STATUS st = nrt_set_simulated_target(o.target.c_str()); st != NRT_SUCCESS)
      return Fail(NrtError("nrt_set_simulated_target", st));
  }
  if (NRT_STATUS st = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""); st != NRT_SUCCESS)
    return Fail(NrtError("nrt_init", st));
  Runtime rt;
  if (!o.profile_dir.empty()) {
    nrt_inspect_config_t* cfg = nullptr;
    NRT_STATUS st = nrt_inspect_config_allocate(&cfg);
    if (st == NRT_SUCCESS) st = nrt_inspect_config_set_output_dir(cfg, o.profile_dir.c_str());
    if (st == NRT_SUCCESS) st = nrt_inspect_config_set_enable_inspect(cfg, true);
    if (st == NRT_SUCCESS) st = nrt_inspect_begin_with_options(cfg);
    nrt_inspect_config_free(cfg);
    if (st != NRT_SUCCESS) return Fail(NrtError("cannot start profiling", st));
  }
  if (NRT_STATUS st = nrt_load(neff.data(), neff.size(), -1, -1, &rt.model_); st != NRT_SUCCESS)
    return Fail(absl::StrCat("cannot load '", o.neff, "': ", nrt_get_last_error_message()));
  ModelIo io;
  if (!neuroncc::tools::DescribeModel(rt.model_, &io, &error)) return Fail(error);
  std::vector<std::string> input_bytes, notes;
  // A timing-only run reads no values: inputs are bound only when given.
  const bool bind_inputs = !o.timing_only || !o.inputs.empty();
  if (bind_inputs &&
      !neuroncc::tools::LoadInputs(io, o.inputs, /*zero_fill_missing=*/false, &input_bytes, &notes, &error))
    return Fail(error);

  if (nrt_allocate_tensor_set(&rt.in_) != NRT_SUCCESS || nrt_allocate_tensor_set(&rt.out_) != NRT_SUCCESS)
    return Fail("cannot allocate tensor sets");
  auto add = [&](nrt_tensor_set_t* set, const neuroncc::tools::ModelTensor& mt, const std::string* data,
                 nrt_tensor_t** out) -> bool {
    nrt_tensor_t* t = nullptr;
    NRT_STATUS st = neuroncc::tools::AllocateModelTensor(mt, &t);
    if (st != NRT_SUCCESS) return Fail(NrtError("nrt_tensor_allocate", st)), false;
    rt.tensors_.push_back(t);
    if (data && !data->empty() && (st = nrt_tensor_write(t, data->data(), 0, data->size())) != NRT_SUCCESS)
      return Fail(NrtError("nrt_tensor_write", st)), false;
    if ((st = nrt_add_tensor_to_tensor_set(set, mt.name.c_str(), t)) != NRT_SUCCESS)
      return Fail(NrtError("nrt_add_tensor_to_tensor_set", st)), false;
    if (out) *out = t;
    return true;
  };
  if (bind_inputs)
    for (size_t i = 0; i < io.inputs.size(); ++i)
      if (!add(rt.in_, io.inputs[i], &input_bytes[i], nullptr)) return 1;
  std::vector<nrt_tensor_t*> outputs(o.timing_only ? 0 : io.outputs.size(), nullptr);
  for (size_t i = 0; i < outputs.size(); ++i)
    if (!add(rt.out_, io.outputs[i], nullptr, &outputs[i])) return 1;

  if (o.timing_only) {
    if (NRT_STATUS st = nrt_execute_timing_only(rt.model_, bind_inputs ? rt.in_ : nullptr, nullptr, 1);
        st != NRT_SUCCESS)
      return Fail(NrtError("nrt_execute_timing_only", st));
  } else if (NRT_STATUS st = nrt_execute(rt.model_, rt.in_, rt.out_); st != NRT_SUCCESS) {
    return Fail(NrtError("nrt_execute", st));
  }

  if (!o.output_dir.empty())
    if (absl::Status st = neuroncc::files::MakeDirs(o.output_dir); !st.ok()) return Fail(std::string(st.message()));
  std::vector<std::string> lines;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const neuroncc::tools::ModelTensor& t = io.outputs[i];
    std::string bytes(t.size, '\0');
    if (NRT_STATUS st = nrt_tensor_read(outputs[i], bytes.data(), 0, bytes.size()); st != NRT_SUCCESS)
      return Fail(NrtError("nrt_tensor_read", st));
    neuroncc::npy::Array a = neuroncc::tools::TensorBytesToNpy(bytes, t);
    std::string file = absl::StrCat("output_", i, ".npy");
    if (!o.output_dir.empty()) {
      absl::Status st = neuroncc::npy::WriteFileAtomic(absl::StrCat(o.output_dir, "/", file), a);
      if (!st.ok()) return Fail(std::string(st.message()));
    }
    lines.push_back(absl::StrCat("  ", o.output_dir.empty() ? absl::StrCat("output ", i) : file, "  '", t.name,
                                 "' ", neuroncc::npy::ShapeString(t.shape), " ", neuroncc::tools::DtypeName(t),
                                 t.dtype == NRT_DTYPE_BFLOAT16 ? " (saved as float32)" : ""));
  }

  nrt_execution_stats_t stats{};
  if (NRT_STATUS st = nrt_get_last_execution_stats(rt.model_, &stats, sizeof(stats), nullptr); st != NRT_SUCCESS)
    return Fail(NrtError("nrt_get_last_execution_stats", st));
  char target[16] = "", name[256] = "";
  nrt_get_model_target(rt.model_, target, nullptr, sizeof(target));
  nrt_get_model_target(rt.model_, nullptr, name, sizeof(name));

  if (!o.profile_dir.empty()) {
    if (NRT_STATUS st = nrt_unload(rt.model_); st != NRT_SUCCESS) return Fail(NrtError("nrt_unload", st));
    rt.model_ = nullptr;
    if (NRT_STATUS st = nrt_inspect_stop(); st != NRT_SUCCESS) return Fail(NrtError("cannot write the profile", st));
  }
  if (!o.quiet) {
    std::printf("neuron-run: '%s' on simulated %s%s: %llu dispatch%s, %llu kernel%s, %llu instructions\n", name,
                target, o.timing_only ? " (timing only)" : "",
                static_cast<unsigned long long>(stats.dispatch_count), stats.dispatch_count == 1 ? "" : "es",
                static_cast<unsigned long long>(stats.kernel_count), stats.kernel_count == 1 ? "" : "s",
                static_cast<unsigned long long>(stats.instruction_count));
    std::printf("  modeled device time: %.3f us (launch overhead %.3f us, HBM read %llu B, written %llu B)\n",
                double(stats.device_time_ps) / 1e6, double(stats.launch_overhead_ps) / 1e6,
                static_cast<unsigned long long>(stats.hbm_read_bytes),
                static_cast<unsigned long long>(stats.hbm_write_bytes));
    for (const std::string& n : notes) std::printf("  note: %s\n", n.c_str());
    if (o.timing_only) std::printf("  outputs: not computed (--timing-only)\n");
    std::printf("%s", lines.empty() ? "" : (o.output_dir.empty() ? "  outputs (not saved; use --output-dir):\n"
                                                                 : absl::StrCat("  outputs in ", o.output_dir, ":\n").c_str()));
    for (const std::string& l : lines) std::printf("%s\n", l.c_str());
    if (!o.profile_dir.empty())
      std::printf("  profile (hash %llu) in %s\n", static_cast<unsigned long long>(stats.profile_hash),
                  o.profile_dir.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int rc = ParseArgs(argc, argv, &o);
  if (rc != 0) return rc < 0 ? 0 : rc;
  return Run(o);
}
