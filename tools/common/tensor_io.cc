#include "tensor_io.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "float_convert.h"
#include "nrt/nrt_experimental.h"
#include "nrt/nrt_ext.h"

namespace neuroncc::tools {

bool DescribeModel(nrt_model_t* model, ModelIo* io, std::string* error) {
  nrt_tensor_info_array_t* info = nullptr;
  NRT_STATUS st = nrt_get_model_tensor_info(model, &info);
  if (st != NRT_SUCCESS) {
    *error = absl::StrCat("cannot read the model's tensors: ", nrt_get_last_error_message());
    return false;
  }
  for (uint64_t i = 0; i < info->tensor_count; ++i) {
    const nrt_tensor_info_t& ti = info->tensor_array[i];
    ModelTensor t;
    t.name = ti.name;
    t.dtype = ti.dtype;
    t.size = ti.size;
    for (uint32_t d = 0; d < ti.ndim; ++d) t.shape.push_back(ti.shape[d]);
    if (t.dtype == NRT_DTYPE_UINT8 && nrt_get_model_tensor_is_bool(model, ti.name, &t.is_bool) != NRT_SUCCESS) {
      *error = absl::StrCat("cannot read tensor '", t.name, "': ", nrt_get_last_error_message());
      nrt_free_model_tensor_info(info);
      return false;
    }
    (ti.usage == NRT_TENSOR_USAGE_INPUT ? io->inputs : io->outputs).push_back(std::move(t));
  }
  nrt_free_model_tensor_info(info);
  return true;
}

const char* DtypeName(const ModelTensor& t) {
  switch (t.dtype) {
    case NRT_DTYPE_FLOAT32: return "float32";
    case NRT_DTYPE_BFLOAT16: return "bfloat16";
    case NRT_DTYPE_FLOAT16: return "float16";
    case NRT_DTYPE_INT32: return "int32";
    case NRT_DTYPE_INT64: return "int64";
    case NRT_DTYPE_INT16: return "int16";
    case NRT_DTYPE_INT8: return "int8";
    case NRT_DTYPE_UINT8: return t.is_bool ? "bool" : "uint8";
    default: return "unsupported";
  }
}

namespace {

// The .npy element type that holds a tensor of `dtype`; false if none does.
bool NpyTypeFor(const ModelTensor& t, npy::ElementType* type) {
  switch (t.dtype) {
    case NRT_DTYPE_FLOAT32:
    case NRT_DTYPE_BFLOAT16: *type = npy::ElementType::kFloat32; return true;  // numpy has no bfloat16
    case NRT_DTYPE_FLOAT16: *type = npy::ElementType::kFloat16; return true;
    case NRT_DTYPE_INT32: *type = npy::ElementType::kInt32; return true;
    case NRT_DTYPE_INT64: *type = npy::ElementType::kInt64; return true;
    case NRT_DTYPE_INT16: *type = npy::ElementType::kInt16; return true;
    case NRT_DTYPE_INT8: *type = npy::ElementType::kInt8; return true;
    case NRT_DTYPE_UINT8: *type = t.is_bool ? npy::ElementType::kBool : npy::ElementType::kUint8; return true;
    default: return false;
  }
}

}  // namespace

bool NpyToTensorBytes(const npy::Array& a, const ModelTensor& t, std::string* bytes, std::string* error) {
  if (a.shape != t.shape) {
    *error = absl::StrCat("input '", t.name, "': the file has shape ", npy::ShapeString(a.shape),
                          ", the model expects ", npy::ShapeString(t.shape));
    return false;
  }
  // numpy has no bfloat16: bf16 inputs come as float32 and are rounded here.
  // Integers are never converted: a float file for an index input (or the
  // other way round) is a mistake worth reporting, not a cast.
  npy::ElementType want;
  if (!NpyTypeFor(t, &want)) {
    *error = absl::StrCat("input '", t.name, "' has a dtype this tool cannot feed");
    return false;
  }
  if (a.type != want) {
    std::string hint;
    if (t.dtype == NRT_DTYPE_BFLOAT16 && !npy::IsInteger(a.type))
      hint = " (bfloat16 inputs are given as float32)";
    else if (npy::IsInteger(want) != npy::IsInteger(a.type) || npy::IsInteger(want))
      hint = absl::StrCat(" (save it with .astype(numpy.", npy::ElementTypeName(want), "))");
    *error = absl::StrCat("input '", t.name, "': the file holds ", npy::ElementTypeName(a.type), " ('",
                          npy::ElementTypeDescr(a.type), "'), the model's ", DtypeName(t),
                          " input needs ", npy::ElementTypeName(want), " ('", npy::ElementTypeDescr(want),
                          "')", hint);
    return false;
  }
  if (t.dtype == NRT_DTYPE_BFLOAT16) {
    size_t n = a.data.size() / 4;
    bytes->resize(n * 2);
    for (size_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, a.data.data() + 4 * i, 4);
      uint16_t h = rt::FloatToBf16(f);
      std::memcpy(&(*bytes)[2 * i], &h, 2);
    }
  } else {
    *bytes = a.data;
  }
  if (bytes->size() != t.size) {
    *error = absl::StrCat("input '", t.name, "': ", bytes->size(), " bytes, the model expects ", t.size);
    return false;
  }
  return true;
}

npy::Array TensorBytesToNpy(const std::string& bytes, const ModelTensor& t) {
  npy::Array a;
  a.shape = t.shape;
  if (t.dtype != NRT_DTYPE_FLOAT32 && t.dtype != NRT_DTYPE_BFLOAT16 && NpyTypeFor(t, &a.type)) {
    a.data = bytes;
  } else if (t.dtype == NRT_DTYPE_BFLOAT16) {
    a.type = npy::ElementType::kFloat32;
    size_t n = bytes.size() / 2;
    a.data.resize(n * 4);
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      float f = rt::Bf16ToFloat(h);
      std::memcpy(&a.data[4 * i], &f, 4);
    }
  } else {
    a.type = npy::ElementType::kFloat32;
    a.data = bytes;
  }
  return a;
}

bool ParseInputSpec(const std::string& arg, InputSpec* spec, std::string* error) {
  if (!arg.empty() && arg[0] == '@') {
    spec->name.clear();
    spec->path = arg.substr(1);
  } else {
    size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 >= arg.size() || arg[eq + 1] != '@') {
      *error = absl::StrCat("bad --input '", arg, "': expected NAME=@file.npy or @file.npy");
      return false;
    }
    spec->name = arg.substr(0, eq);
    spec->path = arg.substr(eq + 2);
  }
  if (spec->path.empty()) {
    *error = absl::StrCat("bad --input '", arg, "': no file name after '@'");
    return false;
  }
  return true;
}

bool LoadInputs(const ModelIo& io, const std::vector<InputSpec>& specs, bool zero_fill_missing,
                std::vector<std::string>* bytes, std::vector<std::string>* notes, std::string* error) {
  std::vector<const InputSpec*> chosen(io.inputs.size(), nullptr);
  auto names = [&] {
    std::string s;
    for (size_t i = 0; i < io.inputs.size(); ++i) absl::StrAppend(&s, i ? ", " : "", "'", io.inputs[i].name, "'");
    return s.empty() ? std::string("none") : s;
  };
  // Named inputs first; then positional ones take the inputs left unnamed, in
  // graph input order, so the two forms mix regardless of argument order.
  for (const InputSpec& spec : specs) {
    if (spec.name.empty()) continue;
    size_t idx = io.inputs.size();
    for (size_t i = 0; i < io.inputs.size(); ++i)
      if (io.inputs[i].name == spec.name) idx = i;
    if (idx == io.inputs.size()) {
      *error = absl::StrCat("the model has no input named '", spec.name, "' (inputs: ", names(), ")");
      return false;
    }
    if (chosen[idx]) {
      *error = absl::StrCat("input '", io.inputs[idx].name, "' is given twice ('", chosen[idx]->path, "' and '",
                            spec.path, "')");
      return false;
    }
    chosen[idx] = &spec;
  }
  size_t next = 0;
  for (const InputSpec& spec : specs) {
    if (!spec.name.empty()) continue;
    while (next < io.inputs.size() && chosen[next]) ++next;
    if (next == io.inputs.size()) {
      *error = absl::StrCat("too many inputs: '", spec.path, "' has no model input left to bind (inputs: ",
                            names(), ")");
      return false;
    }
    chosen[next] = &spec;
  }
  std::string missing;
  for (size_t i = 0; i < io.inputs.size(); ++i)
    if (!chosen[i]) absl::StrAppend(&missing, missing.empty() ? "" : ", ", "'", io.inputs[i].name, "'");
  if (!missing.empty() && !zero_fill_missing) {
    *error = absl::StrCat("missing input(s) ", missing, "; pass --input NAME=@file.npy for each");
    return false;
  }
  bytes->assign(io.inputs.size(), std::string());
  for (size_t i = 0; i < io.inputs.size(); ++i) {
    const ModelTensor& t = io.inputs[i];
    if (!chosen[i]) {
      (*bytes)[i].assign(t.size, '\0');
      notes->push_back(absl::StrCat("input '", t.name, "' not given: using zeros"));
      continue;
    }
    absl::StatusOr<npy::Array> a = npy::ReadFile(chosen[i]->path);
    if (!a.ok()) {
      *error = absl::StrCat("input '", t.name, "': ", a.status().message());
      return false;
    }
    if (!NpyToTensorBytes(*a, t, &(*bytes)[i], error)) {
      absl::StrAppend(error, " ('", chosen[i]->path, "')");
      return false;
    }
  }
  return true;
}

NRT_STATUS AllocateModelTensor(const ModelTensor& t, nrt_tensor_t** tensor) {
  if (t.size == 0) return nrt_tensor_allocate_empty(t.name.c_str(), tensor);
  return nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, t.size, t.name.c_str(), tensor);
}

}  // namespace neuroncc::tools
