// Hand-built NEFF executables for the runtime tests and the tools tests.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "neff_format.h"

namespace neuroncc::testing {

neff::TileRef Tile(uint32_t start_partition, uint32_t partitions, uint32_t byte_offset,
                   uint32_t num_elements, neff::DType dtype);

// Appends a tensor; size_bytes follows from shape and dtype. Returns its index.
uint32_t AddTensor(neff::Executable* exe, const std::string& name, neff::TensorKind kind,
                   neff::DType dtype, std::vector<int64_t> shape);

// dims: {stride, count}, the partition dim first.
neff::AccessPattern Ap(uint32_t tensor, int64_t offset,
                       std::initializer_list<std::pair<int64_t, int64_t>> dims);

neff::Wait W(uint32_t queue, uint32_t count);

neff::Instruction DmaLoad(const neff::TileRef& out, const neff::AccessPattern& ap, uint32_t queue,
                          std::vector<neff::Wait> waits = {});
neff::Instruction DmaStore(const neff::TileRef& in, const neff::AccessPattern& ap, uint32_t queue,
                           std::vector<neff::Wait> waits = {});
neff::Instruction TensorTensor(neff::AluOp alu, const neff::TileRef& out, const neff::TileRef& in0,
                               const neff::TileRef& in1, std::vector<neff::Wait> waits = {},
                               neff::Engine engine = neff::VECTOR);
neff::Instruction TensorScalar(neff::AluOp alu, const neff::TileRef& out, const neff::TileRef& in0,
                               float imm, std::vector<neff::Wait> waits = {},
                               neff::Engine engine = neff::VECTOR);
neff::Instruction Activation(neff::ActivationFunc func, const neff::TileRef& out,
                             const neff::TileRef& in0, float scale, float bias,
                             std::vector<neff::Wait> waits = {});
neff::Instruction TensorReduce(neff::AluOp alu, const neff::TileRef& out, const neff::TileRef& in0,
                               std::vector<neff::Wait> waits = {},
                               neff::Engine engine = neff::VECTOR);

// An executable with target/name/version fields filled and no tensors.
neff::Executable EmptyExecutable(const std::string& name = "test", const std::string& target = "trn1");

// z = x + y for [rows, cols] tensors (rows <= 128): one kernel of two loads,
// one vector add and one store.
neff::Executable AddModel(int64_t rows, int64_t cols, neff::DType dtype = neff::F32);

// Two kernels, O0 style then fused, for profile and attribution tests:
//   kernel "square" (aten.mul.Tensor):                   t = x * x
//   kernel "fused"  (aten.mul.Tensor, aten.add.Tensor):  z = t * w + 1
// x, w, z: [rows, cols] f32; t is an HBM intermediate. In "fused" the
// multiply is tagged source_op 0, the add source_op 1, the DMAs untagged.
neff::Executable TwoKernelModel(int64_t rows, int64_t cols);

// SerializeNeff, aborting the test binary on failure.
std::string Serialize(const neff::Executable& exe, const std::vector<std::string>& segments = {});

// Header + payload with a correct hash but WITHOUT running the verifier, so
// that a bad executable reaches ParseNeff's verifier.
std::string SerializeUnverified(neff::Executable exe);

}  // namespace neuroncc::testing
