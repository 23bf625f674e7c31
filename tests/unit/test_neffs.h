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
// A float32 PSUM tile.
neff::TileRef Psum(uint32_t start_partition, uint32_t partitions, uint32_t byte_offset,
                   uint32_t num_elements);

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
// TensorEngine: out (PSUM) [M x N] (+)= in0[K x M]^T in1[K x N].
neff::Instruction Matmul(const neff::TileRef& out, const neff::TileRef& in0, const neff::TileRef& in1,
                         bool accumulate = false, std::vector<neff::Wait> waits = {});
neff::Instruction Transpose(const neff::TileRef& out, const neff::TileRef& in0,
                            std::vector<neff::Wait> waits = {});
// out = in2 != 0 ? in0 : in1.
neff::Instruction TensorSelect(const neff::TileRef& out, const neff::TileRef& in0,
                               const neff::TileRef& in1, const neff::TileRef& in2,
                               std::vector<neff::Wait> waits = {},
                               neff::Engine engine = neff::VECTOR);
// out[p, f] = imm + p * scale + f * bias.
neff::Instruction Iota(const neff::TileRef& out, float imm, float scale, float bias,
                       std::vector<neff::Wait> waits = {}, neff::Engine engine = neff::GPSIMD);

// DMA_GATHER: out[p, :] = the row index[index_offset + p] of the table that
// `table` walks (dims[0] = {row stride, partitions}, then the free pattern).
neff::Instruction DmaGather(const neff::TileRef& out, const neff::AccessPattern& table,
                            uint32_t index_tensor, int64_t index_offset, uint64_t index_bound,
                            uint32_t queue, std::vector<neff::Wait> waits = {});

// An executable with target/name/version fields filled and no tensors.
neff::Executable EmptyExecutable(const std::string& name = "test", const std::string& target = "trn1");

// z = x + y for [rows, cols] tensors (rows <= 128): one kernel of two loads,
// one vector add and one store.
neff::Executable AddModel(int64_t rows, int64_t cols, neff::DType dtype = neff::F32);

// One kernel, one dispatch, per row of x [rows, cols] f32 (rows <= 128):
// q = sum(x^2), r = rsqrt(q / cols + 1e-6), z = x * r + q and s = sum(z),
// where one activation computes z with a scale tile (r), a bias tile (q)
// and its row sums (s): every optional operand at once.
neff::Executable NormModel(int64_t rows, int64_t cols);

// Two kernels, O0 style then fused, for profile and attribution tests:
//   kernel "square" (aten.mul.Tensor):                   t = x * x
//   kernel "fused"  (aten.mul.Tensor, aten.add.Tensor):  z = t * w + 1
// x, w, z: [rows, cols] f32; t is an HBM intermediate. In "fused" the
// multiply is tagged source_op 0, the add source_op 1, the DMAs untagged.
neff::Executable TwoKernelModel(int64_t rows, int64_t cols,
                                neff::DispatchModel dispatch = neff::DISPATCH_PER_KERNEL);

// z = x @ w (aten.mm): x [m, k], w [k, n], z [m, n] float32; x and w of
// `dtype`. x is loaded row-major and transposed on the TensorEngine in
// `k_tiles` chunks of k / k_tiles (each through PSUM, then copied back to
// SBUF by the vector engine); the chunks' matmuls accumulate into one PSUM
// tile, which the vector engine copies out. m, k / k_tiles <= 128, n <= 512,
// k_tiles <= 7.
neff::Executable MatmulModel(uint32_t m, uint32_t k, uint32_t n, neff::DType dtype = neff::F32,
                             uint32_t k_tiles = 2);

// Causal masking (aten.where.self): z[p, f] = f <= p ? x[p, f] : -inf for an
// f32 [rows, cols] x (rows <= 128). Two gpsimd iotas build p - f and a -inf
// tile, a vector IS_GE turns p - f into the mask, a vector select applies it.
neff::Executable CausalMaskModel(uint32_t rows, uint32_t cols);

// An embedding lookup (aten.embedding): z[t, :] = weight[ids[t], :] for a
// [vocab, dim] table `weight` of `dtype` (graph input 0) and `tokens` ids of
// `index_dtype` (graph input 1, tokens <= 128); z is [tokens, dim] of dtype.
// One dma_gather (DMA queue 0) into SBUF, one store (queue 1) after it.
neff::Executable EmbeddingModel(uint32_t vocab, uint32_t dim, uint32_t tokens,
                                neff::DType dtype = neff::F32, neff::DType index_dtype = neff::I64);

// SerializeNeff, aborting the test binary on failure.
std::string Serialize(const neff::Executable& exe, const std::vector<std::string>& segments = {});

// Header + payload with a correct hash but WITHOUT running the verifier, so
// that a bad executable reaches ParseNeff's verifier.
std::string SerializeUnverified(neff::Executable exe);

}  // namespace neuroncc::testing
