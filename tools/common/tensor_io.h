// Moving .npy data in and out of model tensors through the public C API
// (nrt/nrt.h) only. Shared by neuron-run and neuron-profile capture.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "npy.h"
#include "nrt/nrt.h"

namespace neuroncc::tools {

struct ModelTensor {
  std::string name;
  nrt_dtype_t dtype = NRT_DTYPE_INVALID;
  std::vector<int64_t> shape;
  size_t size = 0;  // bytes
  bool is_bool = false;  // NRT_DTYPE_UINT8 holding PyTorch bools (nrt_get_model_tensor_is_bool)
};

struct ModelIo {
  std::vector<ModelTensor> inputs;   // graph input order
  std::vector<ModelTensor> outputs;  // graph output order
};

// From nrt_get_model_tensor_info. False with `error` set on failure.
bool DescribeModel(nrt_model_t* model, ModelIo* io, std::string* error);

const char* DtypeName(const ModelTensor& t);  // "float32", "bfloat16", ..., "uint8", "bool"

// The bytes of `t` from an .npy array: same shape, and float32 data for
// float32 and bfloat16 tensors (bfloat16 rounds to nearest even), float16
// data for float16 tensors, int32 ('<i4') for int32 and int64 ('<i8') for
// int64 tensors (never converted between widths or to and from floats).
// False with a message naming the tensor otherwise.
bool NpyToTensorBytes(const npy::Array& array, const ModelTensor& t, std::string* bytes,
                      std::string* error);

// The .npy form of a tensor's bytes: bfloat16 widens exactly to float32;
// every other dtype keeps its bytes.
npy::Array TensorBytesToNpy(const std::string& bytes, const ModelTensor& t);

// Describes one "NAME=@file.npy" / "@file.npy" argument.
struct InputSpec {
  std::string name;  // empty: positional
  std::string path;
};
bool ParseInputSpec(const std::string& arg, InputSpec* spec, std::string* error);

// Resolves the specs against the model's inputs (named ones by name, then
// positional ones, in order, onto the inputs not named, in graph input
// order), reads and converts every
// file. Inputs without a spec are an error unless zero_fill_missing.
// Returns the bytes of every input in graph input order.
bool LoadInputs(const ModelIo& io, const std::vector<InputSpec>& specs, bool zero_fill_missing,
                std::vector<std::string>* bytes, std::vector<std::string>* notes, std::string* error);

// A tensor for one model input or output: nrt_tensor_allocate, or for a
// tensor with no elements (0 bytes, which nrt_tensor_allocate refuses) an
// empty tensor (nrt_tensor_allocate_empty) with no storage.
NRT_STATUS AllocateModelTensor(const ModelTensor& t, nrt_tensor_t** tensor);



}  // namespace neuroncc::tools
