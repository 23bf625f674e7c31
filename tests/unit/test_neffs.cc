#include "test_neffs.h"

#include <cstdio>
#include <cstdlib>
#include <limits>

#include "device_model.h"

namespace neuroncc::testing {

using namespace neff;

TileRef Tile(uint32_t start_partition, uint32_t partitions, uint32_t byte_offset,
             uint32_t num_elements, DType dtype) {
  TileRef t;
  t.set_start_partition(start_partition);
  t.set_partitions(partitions);
  t.set_byte_offset(byte_offset);
  t.set_num_elements(num_elements);
  t.set_dtype(dtype);
  return t;
}

TileRef Psum(uint32_t start_partition, uint32_t partitions, uint32_t byte_offset,
             uint32_t num_elements) {
  TileRef t = Tile(start_partition, partitions, byte_offset, num_elements, F32);
  t.set_space(PSUM);
  return t;
}

uint32_t AddTensor(Executable* exe, const std::string& name, TensorKind kind, DType dtype,
                   std::vector<int64_t> shape) {
  Tensor* t = exe->add_tensors();
  t->set_name(name);
  t->set_kind(kind);
  t->set_dtype(dtype);
  int64_t n = 1;
  for (int64_t d : shape) {
    t->add_shape(d);
    n *= d;
  }
  t->set_size_bytes(uint64_t(n) * DTypeSize(dtype));
  uint32_t id = uint32_t(exe->tensors_size() - 1);
  if (kind == INPUT) exe->add_graph_inputs(id);
  if (kind == OUTPUT) exe->add_graph_outputs(id);
  return id;
}

AccessPattern Ap(uint32_t tensor, int64_t offset,
                 std::initializer_list<std::pair<int64_t, int64_t>> dims) {
  AccessPattern ap;
  ap.set_tensor(tensor);
  ap.set_offset(offset);
  for (auto [stride, count] : dims) {
    Dim* d = ap.add_dims();
    d->set_stride(stride);
    d->set_count(count);
  }
  return ap;
}

Wait W(uint32_t queue, uint32_t count) {
  Wait w;
  w.set_queue(queue);
  w.set_count(count);
  return w;
}

namespace {
Instruction Base(Opcode op, Engine engine, const std::vector<Wait>& waits) {
  Instruction i;
  i.set_opcode(op);
  i.set_engine(engine);
  i.set_source_op(-1);
  for (const Wait& w : waits) *i.add_waits() = w;
  return i;
}
}  // namespace

Instruction DmaLoad(const TileRef& out, const AccessPattern& ap, uint32_t queue, std::vector<Wait> waits) {
  Instruction i = Base(DMA_LOAD, DMA, waits);
  i.set_queue(queue);
  *i.mutable_out() = out;
  *i.mutable_hbm() = ap;
  return i;
}

Instruction DmaStore(const TileRef& in, const AccessPattern& ap, uint32_t queue, std::vector<Wait> waits) {
  Instruction i = Base(DMA_STORE, DMA, waits);
  i.set_queue(queue);
  *i.mutable_in0() = in;
  *i.mutable_hbm() = ap;
  return i;
}

Instruction TensorTensor(AluOp alu, const TileRef& out, const TileRef& in0, const TileRef& in1,
                         std::vector<Wait> waits, Engine engine) {
  Instruction i = Base(TENSOR_TENSOR, engine, waits);
  i.set_alu(alu);
  *i.mutable_out() = out;
  *i.mutable_in0() = in0;
  *i.mutable_in1() = in1;
  return i;
}

Instruction TensorScalar(AluOp alu, const TileRef& out, const TileRef& in0, float imm,
                         std::vector<Wait> waits, Engine engine) {
  Instruction i = Base(TENSOR_SCALAR, engine, waits);
  i.set_alu(alu);
  i.set_imm(imm);
  *i.mutable_out() = out;
  *i.mutable_in0() = in0;
  return i;
}

Instruction Activation(ActivationFunc func, const TileRef& out, const TileRef& in0, float scale,
                       float bias, std::vector<Wait> waits) {
  Instruction i = Base(ACTIVATION, SCALAR, waits);
  i.set_func(func);
  i.set_scale(scale);
  i.set_bias(bias);
  *i.mutable_out() = out;
  *i.mutable_in0() = in0;
  return i;
}

Instruction TensorReduce(AluOp alu, const TileRef& out, const TileRef& in0, std::vector<Wait> waits,
                         Engine engine) {
  Instruction i = Base(TENSOR_REDUCE, engine, waits);
  i.set_alu(alu);
  *i.mutable_out() = out;
  *i.mutable_in0() = in0;
  return i;
}

Instruction Matmul(const TileRef& out, const TileRef& in0, const TileRef& in1, bool accumulate,
                   std::vector<Wait> waits) {
  Instruction i = Base(MATMUL, TENSOR, waits);
  *i.mutable_out() = out;
  *i.mutable_in0() = in0;
  *i.mutable_in1() = in1;
  i.set_accumulate(accumulate);
  return i;
}

Instruction Transpose(const TileRef& out, const TileRef& in0, std::vector<Wait> waits) {
  Instruction i = Base(TRANSPOSE, TENSOR, waits);
  *i.mutable_out() = out;
  *i.mutable_in0() = in0;
  return i;
}

Instruction TensorSelect(const TileRef& out, const TileRef& in0, const TileRef& in1, const TileRef& in2,
                         std::vector<Wait> waits, Engine engine) {
  Instruction i = Base(TENSOR_SELECT, engine, waits);
  *i.mutable_out() = out;
  *i.mutable_in0() = in0;
  *i.mutable_in1() = in1;
  *i.mutable_in2() = in2;
  return i;
}

Instruction Iota(const TileRef& out, float imm, float scale, float bias, std::vector<Wait> waits,
                 Engine engine) {
  Instruction i = Base(IOTA, engine, waits);
  *i.mutable_out() = out;
  i.set_imm(imm);
  i.set_scale(scale);
  i.set_bias(bias);
  return i;
}

Instruction DmaGather(const TileRef& out, const AccessPattern& table, uint32_t index_tensor,
                      int64_t index_offset, uint64_t index_bound, uint32_t queue, std::vector<Wait> waits) {
  Instruction i = Base(DMA_GATHER, DMA, waits);
  i.set_queue(queue);
  *i.mutable_out() = out;
  *i.mutable_hbm() = table;
  i.set_index_tensor(index_tensor);
  i.set_index_offset(index_offset);
  i.set_index_bound(index_bound);
  return i;
}

Executable EmptyExecutable(const std::string& name, const std::string& target) {
  Executable exe;
  exe.set_format_version(kFormatVersion);
  exe.set_target(target);
  exe.set_name(name);
  exe.set_opt_level("O2");
  exe.set_compiler_version("test");
  return exe;
}

Executable AddModel(int64_t rows, int64_t cols, DType dtype) {
  Executable exe = EmptyExecutable("add");
  uint32_t x = AddTensor(&exe, "x", INPUT, dtype, {rows, cols});
  uint32_t y = AddTensor(&exe, "y", INPUT, dtype, {rows, cols});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, dtype, {rows, cols});
  uint32_t n = uint32_t(cols), bytes = uint32_t(cols * int64_t(DTypeSize(dtype)));
  uint32_t p = uint32_t(rows);
  Kernel* k = exe.add_kernels();
  k->set_name("add");
  k->add_source_ops("aten.add.Tensor");
  k->add_inputs(x);
  k->add_inputs(y);
  k->add_outputs(z);
  k->set_sbuf_bytes_per_partition(3 * bytes);
  *k->add_instructions() = DmaLoad(Tile(0, p, 0, n, dtype), Ap(x, 0, {{cols, rows}, {1, cols}}), 0);
  *k->add_instructions() = DmaLoad(Tile(0, p, bytes, n, dtype), Ap(y, 0, {{cols, rows}, {1, cols}}), 1);
  *k->add_instructions() = TensorTensor(ADD, Tile(0, p, 2 * bytes, n, dtype), Tile(0, p, 0, n, dtype),
                                        Tile(0, p, bytes, n, dtype), {W(4, 1), W(5, 1)});
  *k->add_instructions() =
      DmaStore(Tile(0, p, 2 * bytes, n, dtype), Ap(z, 0, {{cols, rows}, {1, cols}}), 2, {W(1, 1)});
  for (Instruction& i : *k->mutable_instructions()) i.set_source_op(0);
  return exe;
}

Executable TwoKernelModel(int64_t rows, int64_t cols, DispatchModel dispatch) {
  Executable exe = EmptyExecutable("two_kernel");
  exe.set_dispatch_model(dispatch);
  uint32_t x = AddTensor(&exe, "x", INPUT, F32, {rows, cols});
  uint32_t w = AddTensor(&exe, "w", INPUT, F32, {rows, cols});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, F32, {rows, cols});
  uint32_t t = AddTensor(&exe, "t", INTERMEDIATE, F32, {rows, cols});
  exe.mutable_tensors(int(t))->set_arena_offset(0);
  exe.set_arena_bytes(uint64_t(rows * cols * 4));
  uint32_t p = uint32_t(rows), n = uint32_t(cols), b = uint32_t(cols * 4);
  auto ap = [&](uint32_t tensor) { return Ap(tensor, 0, {{cols, rows}, {1, cols}}); };

  Kernel* k0 = exe.add_kernels();
  k0->set_name("square");
  k0->add_source_ops("aten.mul.Tensor");
  k0->add_inputs(x);
  k0->add_outputs(t);
  *k0->add_instructions() = DmaLoad(Tile(0, p, 0, n, F32), ap(x), 0);
  *k0->add_instructions() =
      TensorTensor(MUL, Tile(0, p, b, n, F32), Tile(0, p, 0, n, F32), Tile(0, p, 0, n, F32), {W(4, 1)});
  *k0->add_instructions() = DmaStore(Tile(0, p, b, n, F32), ap(t), 0, {W(1, 1)});
  for (Instruction& i : *k0->mutable_instructions()) i.set_source_op(0);

  Kernel* k1 = exe.add_kernels();
  k1->set_name("fused");
  k1->add_source_ops("aten.mul.Tensor");
  k1->add_source_ops("aten.add.Tensor");
  k1->add_inputs(t);
  k1->add_inputs(w);
  k1->add_outputs(z);
  *k1->add_instructions() = DmaLoad(Tile(0, p, 0, n, F32), ap(t), 0);
  *k1->add_instructions() = DmaLoad(Tile(0, p, b, n, F32), ap(w), 1);
  Instruction mul = TensorTensor(MUL, Tile(0, p, 2 * b, n, F32), Tile(0, p, 0, n, F32),
                                 Tile(0, p, b, n, F32), {W(4, 1), W(5, 1)});
  mul.set_source_op(0);
  *k1->add_instructions() = mul;
  Instruction add = Activation(IDENTITY, Tile(0, p, 3 * b, n, F32), Tile(0, p, 2 * b, n, F32), 1.0f,
                               1.0f, {W(1, 1)});
  add.set_source_op(1);
  *k1->add_instructions() = add;
  *k1->add_instructions() = DmaStore(Tile(0, p, 3 * b, n, F32), ap(z), 2, {W(2, 1)});
  return exe;
}

Executable NormModel(int64_t rows, int64_t cols) {
  Executable exe = EmptyExecutable("norm");
  exe.set_dispatch_model(DISPATCH_WHOLE_GRAPH);
  uint32_t x = AddTensor(&exe, "x", INPUT, F32, {rows, cols});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, F32, {rows, cols});
  uint32_t s = AddTensor(&exe, "s", OUTPUT, F32, {rows, 1});
  const uint32_t p = uint32_t(rows), n = uint32_t(cols), b = uint32_t(cols * 4);
  Kernel* k = exe.add_kernels();
  k->set_name("norm");
  k->add_source_ops("aten.mul.Tensor");
  k->add_inputs(x);
  k->add_outputs(z);
  k->add_outputs(s);
  k->set_sbuf_bytes_per_partition(3 * b + 12);
  const TileRef in = Tile(0, p, 0, n, F32), squares = Tile(0, p, b, n, F32), out = Tile(0, p, 2 * b, n, F32);
  const TileRef sum = Tile(0, p, 3 * b, 1, F32), scale = Tile(0, p, 3 * b + 4, 1, F32),
                total = Tile(0, p, 3 * b + 8, 1, F32);
  *k->add_instructions() = DmaLoad(in, Ap(x, 0, {{cols, rows}, {1, cols}}), 0);
  Instruction square = Activation(SQUARE, squares, in, 1.0f, 0.0f, {W(4, 1)});
  *square.mutable_accum() = sum;
  *k->add_instructions() = square;
  *k->add_instructions() = Activation(RSQRT, scale, sum, 1.0f / float(cols), 1e-6f);
  Instruction scaled = Activation(IDENTITY, out, in, 1.0f, 0.0f);
  *scaled.mutable_in1() = scale;
  *scaled.mutable_in2() = sum;
  *scaled.mutable_accum() = total;
  *k->add_instructions() = scaled;
  *k->add_instructions() = DmaStore(out, Ap(z, 0, {{cols, rows}, {1, cols}}), 1, {W(2, 3)});
  *k->add_instructions() = DmaStore(total, Ap(s, 0, {{1, rows}, {1, 1}}), 2, {W(2, 3)});
  for (Instruction& i : *k->mutable_instructions()) i.set_source_op(0);
  return exe;
}

Executable MatmulModel(uint32_t m, uint32_t k, uint32_t n, DType dtype, uint32_t k_tiles) {
  Executable exe = EmptyExecutable("matmul");
  uint32_t x = AddTensor(&exe, "x", INPUT, dtype, {m, k});
  uint32_t w = AddTensor(&exe, "w", INPUT, dtype, {k, n});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, F32, {m, n});
  const uint32_t es = uint32_t(DTypeSize(dtype)), kc = k / k_tiles;
  Kernel* kern = exe.add_kernels();
  kern->set_name("mm");
  kern->add_source_ops("aten.mm");
  kern->add_inputs(x);
  kern->add_inputs(w);
  kern->add_outputs(z);
  // SBUF: x [m x k] at 0; w chunk c [kc x n] at wbase + c * n * es; x^T chunk c
  // [kc x m] at tbase + c * m * es; z [m x n] f32 at zbase.
  // PSUM: z in bank 0, transposed chunk c in bank c + 1.
  const uint32_t wbase = k * es, tbase = wbase + k_tiles * n * es, zbase = tbase + k_tiles * m * es;
  kern->set_sbuf_bytes_per_partition(zbase + n * 4);
  const uint32_t kTensor = 0, kVector = 1, kDma0 = 4;
  *kern->add_instructions() = DmaLoad(Tile(0, m, 0, k, dtype), Ap(x, 0, {{k, m}, {1, k}}), 0);
  for (uint32_t c = 0; c < k_tiles; ++c)
    *kern->add_instructions() = DmaLoad(Tile(0, kc, wbase + c * n * es, n, dtype),
                                        Ap(w, int64_t(c) * kc * n, {{n, kc}, {1, n}}), 1 + c);
  for (uint32_t c = 0; c < k_tiles; ++c)
    *kern->add_instructions() = Transpose(Psum(0, kc, (c + 1) * kPsumBankBytes, m),
                                          Tile(0, m, c * kc * es, kc, dtype), {W(kDma0, 1)});
  for (uint32_t c = 0; c < k_tiles; ++c)
    *kern->add_instructions() = TensorScalar(BYPASS, Tile(0, kc, tbase + c * m * es, m, dtype),
                                             Psum(0, kc, (c + 1) * kPsumBankBytes, m), 0.0f,
                                             {W(kTensor, c + 1)});
  for (uint32_t c = 0; c < k_tiles; ++c)
    *kern->add_instructions() =
        Matmul(Psum(0, m, 0, n), Tile(0, kc, tbase + c * m * es, m, dtype),
               Tile(0, kc, wbase + c * n * es, n, dtype), c > 0, {W(kVector, c + 1), W(kDma0 + 1 + c, 1)});
  *kern->add_instructions() =
      TensorScalar(BYPASS, Tile(0, m, zbase, n, F32), Psum(0, m, 0, n), 0.0f, {W(kTensor, 2 * k_tiles)});
  *kern->add_instructions() =
      DmaStore(Tile(0, m, zbase, n, F32), Ap(z, 0, {{n, m}, {1, n}}), 0, {W(kVector, k_tiles + 1)});
  for (Instruction& i : *kern->mutable_instructions()) i.set_source_op(0);
  return exe;
}

Executable CausalMaskModel(uint32_t rows, uint32_t cols) {
  Executable exe = EmptyExecutable("causal_mask");
  uint32_t x = AddTensor(&exe, "x", INPUT, F32, {rows, cols});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, F32, {rows, cols});
  Kernel* k = exe.add_kernels();
  k->set_name("where");
  k->add_source_ops("aten.where.self");
  k->add_inputs(x);
  k->add_outputs(z);
  const uint32_t b = cols * 4;
  auto t = [&](uint32_t slot) { return Tile(0, rows, slot * b, cols, F32); };
  k->set_sbuf_bytes_per_partition(5 * b);
  const uint32_t kVector = 1, kGpsimd = 3, kDma0 = 4;
  const float inf = std::numeric_limits<float>::infinity();
  *k->add_instructions() = DmaLoad(t(0), Ap(x, 0, {{cols, rows}, {1, cols}}), 0);
  *k->add_instructions() = Iota(t(1), 0.0f, 1.0f, -1.0f);   // p - f
  *k->add_instructions() = Iota(t(2), -inf, 0.0f, 0.0f);    // -inf everywhere
  *k->add_instructions() = TensorScalar(IS_GE, t(3), t(1), 0.0f, {W(kGpsimd, 1)});
  *k->add_instructions() = TensorSelect(t(4), t(0), t(2), t(3), {W(kDma0, 1), W(kGpsimd, 2)});
  *k->add_instructions() = DmaStore(t(4), Ap(z, 0, {{cols, rows}, {1, cols}}), 1, {W(kVector, 2)});
  for (Instruction& i : *k->mutable_instructions()) i.set_source_op(0);
  return exe;
}

Executable EmbeddingModel(uint32_t vocab, uint32_t dim, uint32_t tokens, DType dtype, DType index_dtype) {
  Executable exe = EmptyExecutable("embedding");
  uint32_t weight = AddTensor(&exe, "weight", INPUT, dtype, {vocab, dim});
  uint32_t ids = AddTensor(&exe, "ids", INPUT, index_dtype, {tokens});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, dtype, {tokens, dim});
  Kernel* k = exe.add_kernels();
  k->set_name("embedding");
  k->add_source_ops("aten.embedding");
  k->add_inputs(weight);
  k->add_inputs(ids);
  k->add_outputs(z);
  k->set_sbuf_bytes_per_partition(dim * DTypeSize(dtype));
  const TileRef rows = Tile(0, tokens, 0, dim, dtype);
  *k->add_instructions() = DmaGather(rows, Ap(weight, 0, {{dim, tokens}, {1, dim}}), ids, 0, vocab, 0);
  *k->add_instructions() = DmaStore(rows, Ap(z, 0, {{dim, tokens}, {1, dim}}), 1, {W(4, 1)});
  for (Instruction& i : *k->mutable_instructions()) i.set_source_op(0);
  return exe;
}

std::string Serialize(const Executable& exe, const std::vector<std::string>& segments) {
  absl::StatusOr<std::string> s = SerializeNeff(exe, segments, exe.name(), "test-build");
  if (!s.ok()) {
    std::fprintf(stderr, "test NEFF does not serialize: %s\n", std::string(s.status().message()).c_str());
    std::abort();
  }
  return *s;
}

std::string SerializeUnverified(Executable exe) {
  exe.set_format_version(kFormatVersion);
  std::string body;
  exe.SerializeToString(&body);
  std::string payload(8, '\0');
  for (int i = 0; i < 8; ++i) payload[size_t(i)] = char((uint64_t(body.size()) >> (8 * i)) & 0xff);
  payload += body;
  Header h;
  h.data_size = payload.size();
  h.hash = Sha256(payload.data(), payload.size());
  h.name = exe.name();
  return SerializeHeader(h) + payload;
}

}  // namespace neuroncc::testing
