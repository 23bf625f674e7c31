// Corrupted and lying NEFF files must be refused with a clear error, never
// crash or read out of bounds. This file is also built with ASan + UBSan
// (runtime_asan_tests), where the format library is instrumented too.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

#include "neff_format.h"
#include "run_executable.h"
#include "test_neffs.h"

namespace neuroncc {
namespace {

using namespace neff;
using namespace testing;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

// A NEFF with a constant segment, so that every region of the layout
// (header, length, executable, padding, segment) is present.
std::string ValidNeff() {
  Executable exe = TwoKernelModel(4, 8);
  uint32_t c = AddTensor(&exe, "bias", CONSTANT, F32, {4});
  exe.mutable_tensors(int(c))->set_segment(0);
  return Serialize(exe, {std::string(16, '\x3f')});
}

TEST(NeffCorruption, TruncationAtEveryLengthIsRefused) {
  std::string bytes = ValidNeff();
  ASSERT_TRUE(ParseNeff(bytes).ok());
  for (size_t len = 0; len < bytes.size(); ++len) {
    absl::StatusOr<Neff> r = ParseNeff(std::string_view(bytes).substr(0, len));
    ASSERT_FALSE(r.ok()) << "accepted a file truncated to " << len << " bytes";
    EXPECT_NE(Message(r.status()).find("invalid NEFF"), std::string::npos) << r.status();
  }
}

TEST(NeffCorruption, AppendedBytesAreRefused) {
  std::string bytes = ValidNeff() + "x";
  absl::StatusOr<Neff> r = ParseNeff(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(Message(r.status()).find("truncated or padded"), std::string::npos) << r.status();
}

// Header fields that only describe the file (not covered by the payload hash,
// not used to locate or check anything): a flip there may still parse, but
// must leave the executable intact.
bool DescriptiveHeaderByte(size_t i) {
  return i < 8 /* pkg_version */ || (i >= 32 && i < 172) /* minor, build version, num_tpb */ ||
         (i >= 204 && i < 556) /* uuid .. lnc_size */;
}

TEST(NeffCorruption, EveryBitFlipIsRefusedOrHarmless) {
  std::string bytes = ValidNeff();
  absl::StatusOr<Neff> good = ParseNeff(bytes);
  ASSERT_TRUE(good.ok());
  std::string good_exe = good->executable.SerializeAsString();
  int refused = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; bit += 3) {  // bits 0, 3, 6 of every byte
      std::string bad = bytes;
      bad[i] = char(bad[i] ^ (1 << bit));
      absl::StatusOr<Neff> r = ParseNeff(bad);
      if (!r.ok()) {
        ++refused;
        EXPECT_FALSE(Message(r.status()).empty());
        continue;
      }
      EXPECT_TRUE(DescriptiveHeaderByte(i)) << "flip of bit " << bit << " at byte " << i << " accepted";
      EXPECT_EQ(r->executable.SerializeAsString(), good_exe);
    }
  }
  EXPECT_GT(refused, int(bytes.size()));
}

void PutLE64(std::string& s, size_t off, uint64_t v) {
  for (int i = 0; i < 8; ++i) s[off + size_t(i)] = char((v >> (8 * i)) & 0xff);
}

void ExpectRefused(const std::string& bytes, const std::string& needle) {
  absl::StatusOr<Neff> r = ParseNeff(bytes);
  ASSERT_FALSE(r.ok()) << "accepted; expected an error mentioning '" << needle << "'";
  EXPECT_NE(Message(r.status()).find(needle), std::string::npos) << r.status();
}

TEST(NeffCorruption, HeaderLiesAreRefused) {
  std::string bytes = ValidNeff();
  size_t payload = bytes.size() - kHeaderSize;
  std::string b = bytes;
  PutLE64(b, 16, payload + 64);
  ExpectRefused(b, "payload bytes but the file has");
  b = bytes;
  PutLE64(b, 16, payload - 1);
  ExpectRefused(b, "payload bytes but the file has");
  b = bytes;
  PutLE64(b, 16, ~uint64_t(0));
  ExpectRefused(b, "payload bytes but the file has");
  b = bytes;
  PutLE64(b, 8, 512);  // the header size is part of what says "this is a NEFF"
  ExpectRefused(b, "not a NEFF file (bad magic");
  b = bytes;
  PutLE64(b, 24, kVersionMajor + 1);
  ExpectRefused(b, "neff_version_major");
  b = bytes;
  b[900] = 1;
  ExpectRefused(b, "reserved header byte");
  // Header fields outside the payload hash hold what the writer writes.
  auto put32 = [](std::string& s, size_t off, uint32_t v) {
    for (int i = 0; i < 4; ++i) s[off + size_t(i)] = char((v >> (8 * i)) & 0xff);
  };
  b = bytes;
  put32(b, 168, 0xffffffffu);  // num_tpb
  ExpectRefused(b, "NeuronCore(s)");
  b = bytes;
  put32(b, 552, 0);  // lnc_size
  ExpectRefused(b, "logical core size 0");
  b = bytes;
  b[210] ^= 1;  // a uuid byte
  ExpectRefused(b, "uuid does not match");
  b = bytes;
  b[544] = 4;  // feature_bits
  ExpectRefused(b, "feature bits");
  b = bytes;
  b[500] = 1;  // tpb_per_node
  ExpectRefused(b, "tpb_per_node");
  // The executable length prefix lies.
  b = bytes;
  PutLE64(b, kHeaderSize, payload);
  // (re-hash so the lie reaches the length check rather than the digest check)
  Header h = *ParseHeader(bytes);
  h.hash = Sha256(b.data() + kHeaderSize, payload);
  b = SerializeHeader(h) + b.substr(kHeaderSize);
  ExpectRefused(b, "executable length");
}

TEST(NeffCorruption, GarbageExecutableWithValidHashIsRefused) {
  std::string payload(8, '\0');
  payload[0] = 16;
  payload += std::string(16, '\xff');
  Header h;
  h.data_size = payload.size();
  h.hash = Sha256(payload.data(), payload.size());
  ExpectRefused(SerializeHeader(h) + payload, "does not parse");
}

// Executables that are well-formed protobuf with a correct hash, each broken
// in one way that only the verifier can see.
struct BadCase {
  const char* name;
  std::function<void(Executable*)> corrupt;
  const char* needle;
};

Instruction* Inst(Executable* e, int kernel, int i) {
  return e->mutable_kernels(kernel)->mutable_instructions(i);
}

const BadCase kBadCases[] = {
    {"dma names a missing tensor", [](Executable* e) { Inst(e, 0, 0)->mutable_hbm()->set_tensor(99); },
     "names tensor 99"},
    {"tile beyond 128 partitions",
     [](Executable* e) { Inst(e, 0, 1)->mutable_out()->set_start_partition(126); }, "partitions"},
    {"tile with zero partitions", [](Executable* e) { Inst(e, 0, 1)->mutable_out()->set_partitions(0); },
     "partitions"},
    {"tile past the SBUF partition",
     [](Executable* e) { Inst(e, 0, 1)->mutable_out()->set_byte_offset(192 * 1024 - 8); }, "SBUF"},
    {"access pattern past the tensor",
     [](Executable* e) { Inst(e, 0, 0)->mutable_hbm()->set_offset(1); }, "reaches elements"},
    {"negative access pattern",
     [](Executable* e) { Inst(e, 0, 0)->mutable_hbm()->set_offset(-1); }, "reaches elements"},
    // Free dims whose counts multiply past 2^63 (2^33 + 8 twice): the element
    // count must be checked without overflowing (the structure-aware fuzzer's
    // first finding; UBSan in runtime_asan_tests reports the overflow).
    {"access pattern counts overflow",
     [](Executable* e) {
       AccessPattern* ap = Inst(e, 0, 0)->mutable_hbm();
       ap->mutable_dims(1)->set_count((int64_t(1) << 33) + 8);
       ap->mutable_dims(1)->set_stride(0);
       Dim* d = ap->add_dims();
       d->set_count((int64_t(1) << 33) + 8);
       d->set_stride(0);
     },
     "access pattern too large"},
    {"access pattern walks the wrong partition count",
     [](Executable* e) { Inst(e, 0, 0)->mutable_hbm()->mutable_dims(0)->set_count(3); }, "walks"},
    {"access pattern covers the wrong element count",
     [](Executable* e) { Inst(e, 0, 0)->mutable_hbm()->mutable_dims(1)->set_count(7); }, "covers"},
    {"access pattern with one dim",
     [](Executable* e) { Inst(e, 0, 0)->mutable_hbm()->mutable_dims()->RemoveLast(); }, "dims"},
    {"dma dtype differs from tensor",
     [](Executable* e) { Inst(e, 0, 0)->mutable_out()->set_dtype(BF16); }, "DMA between"},
    {"store into an input", [](Executable* e) { Inst(e, 0, 2)->mutable_hbm()->set_tensor(0); },
     "read-only"},
    {"wait on a queue that does not exist",
     [](Executable* e) { Inst(e, 0, 1)->mutable_waits(0)->set_queue(99); }, "wait on queue"},
    {"wait for more instructions than the queue has",
     [](Executable* e) { Inst(e, 0, 1)->mutable_waits(0)->set_count(5); }, "which has"},
    {"waits that deadlock",
     [](Executable* e) {
       // The load waits for the multiply, which waits for the load.
       *Inst(e, 0, 0)->add_waits() = W(1, 1);
     },
     "deadlock"},
    {"wait on its own future",
     [](Executable* e) { *Inst(e, 0, 0)->add_waits() = W(4, 1); }, "deadlock"},
    {"source_op out of range", [](Executable* e) { Inst(e, 0, 0)->set_source_op(1); }, "source_op"},
    {"compute on the wrong engine", [](Executable* e) { Inst(e, 0, 1)->set_engine(SCALAR); },
     "vector or gpsimd"},
    {"dma opcode on a compute engine", [](Executable* e) { Inst(e, 0, 0)->set_engine(VECTOR); },
     "on engine"},
    {"dma queue beyond 16", [](Executable* e) { Inst(e, 0, 0)->set_queue(16); }, "DMA queue"},
    {"invalid alu", [](Executable* e) { Inst(e, 0, 1)->set_alu(AluOp(42)); }, "alu"},
    {"operand shapes differ", [](Executable* e) { Inst(e, 0, 1)->mutable_in1()->set_num_elements(4); },
     "differ in shape"},
    {"unknown opcode", [](Executable* e) { Inst(e, 0, 1)->set_opcode(Opcode(77)); }, "opcode"},
    {"graph input list names an output", [](Executable* e) { e->set_graph_inputs(0, 2); },
     "graph input"},
    {"graph output list too short", [](Executable* e) { e->clear_graph_outputs(); }, "graph output"},
    {"intermediate outside the arena", [](Executable* e) { e->set_arena_bytes(8); }, "arena"},
    {"unknown target", [](Executable* e) { e->set_target("trn9"); }, "target"},
    {"size_bytes disagrees with shape", [](Executable* e) { e->mutable_tensors(0)->set_size_bytes(4); },
     "size_bytes"},
    {"constant without a segment",
     [](Executable* e) {
       uint32_t c = AddTensor(e, "c", CONSTANT, F32, {4});
       e->mutable_tensors(int(c))->set_segment(0);
     },
     "constant segment"},
    {"kernel input index out of range", [](Executable* e) { e->mutable_kernels(0)->add_inputs(1000); },
     "input index"},
};

// The ISA additions. MatmulModel(4, 16, 8, F32, 2)'s instructions: 0 load x,
// 1-2 load w chunks, 3-4 transposes, 5-6 PSUM -> SBUF copies, 7-8 matmuls
// (8 accumulates), 9 PSUM -> SBUF copy, 10 store.
Executable MatmulExe() { return MatmulModel(4, 16, 8, F32, 2); }

// One kernel: 0 load x, 1 load y [4, 8] f32; 2 iota (gpsimd) -> pred;
// 3 select (vector) out = pred ? x : y; 4 reduce max; 5 store out.
Executable SelectExe() {
  Executable exe = EmptyExecutable("select");
  uint32_t x = AddTensor(&exe, "x", INPUT, F32, {4, 8});
  uint32_t y = AddTensor(&exe, "y", INPUT, F32, {4, 8});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, F32, {4, 8});
  Kernel* k = exe.add_kernels();
  k->set_name("select");
  auto t = [](uint32_t off) { return Tile(0, 4, off, 8, F32); };
  *k->add_instructions() = DmaLoad(t(0), Ap(x, 0, {{8, 4}, {1, 8}}), 0);
  *k->add_instructions() = DmaLoad(t(64), Ap(y, 0, {{8, 4}, {1, 8}}), 1);
  *k->add_instructions() = Iota(t(128), 0.0f, 1.0f, -1.0f);
  *k->add_instructions() = TensorSelect(t(192), t(0), t(64), t(128), {W(3, 1), W(4, 1), W(5, 1)});
  *k->add_instructions() = TensorReduce(MAX, Tile(0, 4, 256, 1, F32), t(192), {});
  *k->add_instructions() = DmaStore(t(192), Ap(z, 0, {{8, 4}, {1, 8}}), 2, {W(1, 2)});
  return exe;
}

struct IsaBadCase {
  const char* name;
  Executable (*model)();
  std::function<void(Executable*)> corrupt;
  const char* needle;
};

const IsaBadCase kIsaBadCases[] = {
    {"matmul output crosses a PSUM bank", MatmulExe,
     [](Executable* e) { Inst(e, 0, 7)->mutable_out()->set_byte_offset(2048 - 16); }, "bank boundary"},
    {"matmul output crosses into the next bank from a later bank", MatmulExe,
     [](Executable* e) { Inst(e, 0, 7)->mutable_out()->set_byte_offset(5 * 2048 + 2040); }, "bank boundary"},
    {"matmul on the vector engine", MatmulExe, [](Executable* e) { Inst(e, 0, 7)->set_engine(VECTOR); },
     "matmul runs on the tensor engine"},
    {"matmul writes SBUF", MatmulExe, [](Executable* e) { Inst(e, 0, 7)->mutable_out()->set_space(SBUF); },
     "out is in SBUF"},
    {"matmul writes a bf16 PSUM tile", MatmulExe,
     [](Executable* e) { Inst(e, 0, 7)->mutable_out()->set_dtype(BF16); }, "PSUM tiles hold float32"},
    {"matmul reads PSUM", MatmulExe, [](Executable* e) { Inst(e, 0, 7)->mutable_in0()->set_space(PSUM); },
     "from SBUF"},
    {"matmul operand dtypes differ", MatmulExe,
     [](Executable* e) { Inst(e, 0, 7)->mutable_in1()->set_dtype(BF16); }, "differ in dtype"},
    {"matmul partition counts differ", MatmulExe,
     [](Executable* e) { Inst(e, 0, 7)->mutable_in1()->set_partitions(7); }, "contracts over partitions"},
    {"matmul output shape", MatmulExe, [](Executable* e) { Inst(e, 0, 7)->mutable_out()->set_partitions(3); },
     "expected 4x8"},
    {"matmul M above 128", MatmulExe,
     [](Executable* e) { Inst(e, 0, 7)->mutable_in0()->set_num_elements(129); }, "at most 128"},
    {"matmul N above 512", MatmulExe,
     [](Executable* e) {
       Inst(e, 0, 7)->mutable_in1()->set_num_elements(513);
       Inst(e, 0, 7)->mutable_out()->set_num_elements(513);
     },
     "at most 512"},
    {"transpose on the scalar engine", MatmulExe, [](Executable* e) { Inst(e, 0, 3)->set_engine(SCALAR); },
     "transpose runs on the tensor engine"},
    {"transpose wider than 128", MatmulExe,
     [](Executable* e) { Inst(e, 0, 3)->mutable_in0()->set_num_elements(129); }, "at most 128"},
    {"transpose output shape", MatmulExe,
     [](Executable* e) { Inst(e, 0, 3)->mutable_out()->set_partitions(4); }, "expected 8x4"},
    {"transpose output in SBUF", MatmulExe,
     [](Executable* e) { Inst(e, 0, 3)->mutable_out()->set_space(SBUF); }, "out is in SBUF"},
    {"DMA loads into PSUM", MatmulExe, [](Executable* e) { Inst(e, 0, 0)->mutable_out()->set_space(PSUM); },
     "DMA cannot access PSUM"},
    {"DMA stores from PSUM", MatmulExe, [](Executable* e) { Inst(e, 0, 10)->mutable_in0()->set_space(PSUM); },
     "DMA cannot access PSUM"},
    {"vector engine writes PSUM", MatmulExe,
     [](Executable* e) { Inst(e, 0, 9)->mutable_out()->set_space(PSUM); }, "only the tensor engine"},
    {"PSUM tile past 16 KiB", MatmulExe,
     [](Executable* e) { Inst(e, 0, 9)->mutable_in0()->set_byte_offset(16384 - 16); }, "16384-byte PSUM partition"},
    {"invalid memory space", MatmulExe,
     [](Executable* e) { Inst(e, 0, 9)->mutable_in0()->set_space(MemorySpace(5)); }, "invalid memory space"},
    {"accumulate on a non-matmul", MatmulExe, [](Executable* e) { Inst(e, 0, 9)->set_accumulate(true); },
     "only matmul accumulates"},
    {"in2 on a non-select", MatmulExe,
     [](Executable* e) { *Inst(e, 0, 9)->mutable_in2() = Tile(0, 4, 0, 8, F32); }, "only tensor_select and activation read in2"},
    {"invalid engine", MatmulExe, [](Executable* e) { Inst(e, 0, 9)->set_engine(Engine(9)); }, "invalid engine"},
    {"select without a predicate", SelectExe, [](Executable* e) { Inst(e, 0, 3)->clear_in2(); }, "needs in2"},
    {"select operand shapes differ", SelectExe,
     [](Executable* e) { Inst(e, 0, 3)->mutable_in2()->set_num_elements(7); }, "differ in shape"},
    {"select on the scalar engine", SelectExe, [](Executable* e) { Inst(e, 0, 3)->set_engine(SCALAR); },
     "tensor_select runs on vector or gpsimd"},
    {"iota on the tensor engine", SelectExe, [](Executable* e) { Inst(e, 0, 2)->set_engine(TENSOR); },
     "iota runs on gpsimd or vector"},
    {"iota writes PSUM", SelectExe, [](Executable* e) { Inst(e, 0, 2)->mutable_out()->set_space(PSUM); },
     "only the tensor engine"},
    {"gpsimd reads PSUM", SelectExe,
     [](Executable* e) {
       Inst(e, 0, 3)->set_engine(GPSIMD);
       *Inst(e, 0, 3)->mutable_in0() = Psum(0, 4, 0, 8);
     },
     "the gpsimd engine cannot read PSUM"},
    {"tensor_reduce with a comparison", SelectExe, [](Executable* e) { Inst(e, 0, 4)->set_alu(IS_GT); },
     "add, max or min"},
    {"tensor_tensor with bypass", [] { return TwoKernelModel(4, 8); },
     [](Executable* e) { Inst(e, 0, 1)->set_alu(BYPASS); }, "invalid alu op"},
    {"tensor_tensor with an op past pow", [] { return TwoKernelModel(4, 8); },
     [](Executable* e) { Inst(e, 0, 1)->set_alu(AluOp(15)); }, "invalid alu op"},
    {"activation function past round", [] { return TwoKernelModel(4, 8); },
     [](Executable* e) { Inst(e, 1, 3)->set_func(ActivationFunc(ATAN + 1)); }, "invalid activation function"},
    {"activation bias tile over other partitions", [] { return TwoKernelModel(4, 8); },
     [](Executable* e) { *Inst(e, 1, 3)->mutable_in2() = Tile(0, 2, 0, 1, F32); },
     "per-partition operand spans 2 partitions, expected 4"},
    {"activation bias tile past SBUF", [] { return TwoKernelModel(4, 8); },
     [](Executable* e) { *Inst(e, 1, 3)->mutable_in2() = Tile(0, 4, 196608 - 2, 1, F32); }, "SBUF"},
    {"stepped matmul output", MatmulExe, [](Executable* e) { Inst(e, 0, 7)->mutable_out()->set_step(2); },
     "out of matmul steps by 2 elements; only the data inputs and the outputs of elementwise"},
    {"stepped output past SBUF", MatmulExe, [](Executable* e) { Inst(e, 0, 9)->mutable_out()->set_step(1u << 20); },
     "SBUF"},
    {"stepped DMA tile", MatmulExe, [](Executable* e) { Inst(e, 0, 0)->mutable_out()->set_step(3); },
     "out of dma_load steps by 3"},
    {"stepped transpose input", MatmulExe, [](Executable* e) { Inst(e, 0, 3)->mutable_in0()->set_step(2); },
     "in0 of transpose steps by 2"},
    {"stepped select predicate", SelectExe, [](Executable* e) { Inst(e, 0, 3)->mutable_in2()->set_step(2); },
     "in2 of tensor_select steps"},
    {"stepped input past SBUF", [] { return TwoKernelModel(4, 8); },
     [](Executable* e) { Inst(e, 1, 3)->mutable_in0()->set_step(1u << 20); }, "SBUF"},
    {"three partition dims", [] { return TwoKernelModel(4, 8); },
     [](Executable* e) { Inst(e, 0, 0)->mutable_hbm()->set_partition_dims(3); }, "3 partition dims; at most two"},
    {"two partition dims and no free dim", [] { return TwoKernelModel(4, 8); },
     [](Executable* e) { Inst(e, 0, 0)->mutable_hbm()->set_partition_dims(2); }, "access pattern has 2 dims"},
    {"two partition dims walking other partitions", [] { return TwoKernelModel(4, 8); },
     [](Executable* e) {
       neff::AccessPattern* ap = Inst(e, 0, 0)->mutable_hbm();
       *ap = Ap(ap->tensor(), 0, {{16, 2}, {8, 3}, {1, 8}});
       ap->set_partition_dims(2);
     },
     "walks 6 partitions, tile has 4"},
    {"two partition dims past the tensor", [] { return TwoKernelModel(4, 8); },
     [](Executable* e) {
       neff::AccessPattern* ap = Inst(e, 0, 2)->mutable_hbm();
       *ap = Ap(ap->tensor(), 0, {{24, 2}, {8, 2}, {1, 8}});
       ap->set_partition_dims(2);
     },
     "reaches elements [0, 39]"},
};

TEST(NeffCorruption, VerifierRefusesBrokenIsaAdditions) {
  for (const IsaBadCase& c : kIsaBadCases) {
    SCOPED_TRACE(c.name);
    Executable exe = c.model();
    ASSERT_TRUE(ParseNeff(SerializeUnverified(exe)).ok());
    c.corrupt(&exe);
    ExpectRefused(SerializeUnverified(exe), c.needle);
  }
}

TEST(NeffCorruption, VerifierAcceptsTheIsaAdditionsAtTheirLimits) {
  // A 128 x 128 x 512 matmul filling the last PSUM bank exactly, a 128 x 128
  // transpose, every new ALU op and activation function.
  Executable exe = EmptyExecutable("limits");
  Kernel* k = exe.add_kernels();
  k->set_name("k");
  *k->add_instructions() =
      Matmul(Psum(0, 128, 7 * 2048, 512), Tile(0, 128, 0, 128, BF16), Tile(0, 128, 256, 512, BF16), true);
  *k->add_instructions() = Transpose(Psum(0, 128, 0, 128), Tile(0, 128, 4096, 128, F16));
  for (AluOp op : {IS_EQUAL, NOT_EQUAL, IS_LT, IS_LE, IS_GT, IS_GE, POW}) {
    *k->add_instructions() = TensorTensor(op, Tile(0, 8, 8192, 4, F32), Psum(0, 8, 0, 4), Tile(0, 8, 0, 4, BF16));
    *k->add_instructions() = TensorScalar(op, Tile(0, 8, 8192, 4, F32), Psum(0, 8, 0, 4), 1.0f);
    *k->add_instructions() = TensorScalar(op, Tile(0, 8, 8192, 4, F32), Tile(0, 8, 0, 4, BF16), 1.0f, {}, GPSIMD);
  }
  for (ActivationFunc f : {LOG, TANH, SIGMOID, RELU, GELU, GELU_TANH, SILU, ABS})
    *k->add_instructions() = Activation(f, Tile(0, 8, 8192, 4, F32), Psum(0, 8, 0, 4), 1.0f, 0.0f);
  *k->add_instructions() = TensorSelect(Tile(0, 8, 8192, 4, BF16), Psum(0, 8, 0, 4), Tile(0, 8, 0, 4, BF16),
                                        Psum(0, 8, 64, 4));
  *k->add_instructions() = TensorSelect(Tile(0, 8, 8192, 4, BF16), Tile(0, 8, 64, 4, BF16), Tile(0, 8, 0, 4, BF16),
                                        Tile(0, 8, 128, 4, BF16), {}, GPSIMD);
  *k->add_instructions() = Iota(Tile(0, 128, 9000, 100, F16), -1.0f, -2.0f, 0.5f, {}, VECTOR);
  absl::StatusOr<Neff> neff = ParseNeff(SerializeUnverified(exe));
  EXPECT_TRUE(neff.ok()) << neff.status();
}

// Embedding lookups. One kernel: 0 dma_gather (DMA queue 0) of 4 rows of a
// [10, 6] f32 table, 4 columns from column 2 (row stride 6), with int64 ids
// [8] from index_offset 2, index_bound 10; 1 store (queue 1) to z [4, 4].
Executable AddModelBf16() { return AddModel(4, 8, BF16); }

// Both bounds are exact: row 9 ends at the table's last element (2 + 9 * 6
// + 3 = 59), and the ids used are elements 2..5 of 8.
Executable GatherExe() {
  Executable exe = EmptyExecutable("gather");
  uint32_t table = AddTensor(&exe, "table", INPUT, F32, {10, 6});
  uint32_t ids = AddTensor(&exe, "ids", INPUT, I64, {6});
  uint32_t z = AddTensor(&exe, "z", OUTPUT, F32, {4, 4});
  Kernel* k = exe.add_kernels();
  k->set_name("embedding");
  *k->add_instructions() = DmaGather(Tile(0, 4, 0, 4, F32), Ap(table, 2, {{6, 4}, {1, 4}}), ids, 2, 10, 0);
  *k->add_instructions() = DmaStore(Tile(0, 4, 0, 4, F32), Ap(z, 0, {{4, 4}, {1, 4}}), 1, {W(4, 1)});
  return exe;
}

const IsaBadCase kGatherBadCases[] = {
    {"table rows past the table", GatherExe, [](Executable* e) { Inst(e, 0, 0)->set_index_bound(11); },
     "reaches elements [2, 65] of tensor 'table' with 60 elements (table rows 0..10)"},
    {"table offset past the table", GatherExe, [](Executable* e) { Inst(e, 0, 0)->mutable_hbm()->set_offset(3); },
     "reaches elements"},
    {"negative row stride reaching before the table", GatherExe,
     [](Executable* e) { Inst(e, 0, 0)->mutable_hbm()->mutable_dims(0)->set_stride(-1); }, "reaches elements [-7"},
    {"index_bound 0", GatherExe, [](Executable* e) { Inst(e, 0, 0)->set_index_bound(0); }, "index_bound 0"},
    {"index_bound above 2^40", GatherExe,
     [](Executable* e) { Inst(e, 0, 0)->set_index_bound((uint64_t(1) << 40) + 1); }, "index_bound"},
    {"index_bound of 2^64 - 1", GatherExe, [](Executable* e) { Inst(e, 0, 0)->set_index_bound(~uint64_t(0)); },
     "index_bound"},
    {"row stride times index_bound overflows", GatherExe,
     [](Executable* e) {
       Inst(e, 0, 0)->set_index_bound(uint64_t(1) << 40);
       Inst(e, 0, 0)->mutable_hbm()->mutable_dims(0)->set_stride((int64_t(1) << 40) - 1);
     },
     "spans too far"},
    {"index_tensor out of range", GatherExe, [](Executable* e) { Inst(e, 0, 0)->set_index_tensor(99); },
     "index_tensor 99 of 3"},
    {"negative index_offset", GatherExe, [](Executable* e) { Inst(e, 0, 0)->set_index_offset(-1); },
     "reads indices [-1, -1+4) of index tensor 'ids' with 6 elements"},
    {"indices past the index tensor", GatherExe, [](Executable* e) { Inst(e, 0, 0)->set_index_offset(3); },
     "reads indices [3, 3+4)"},
    {"index_offset near 2^63", GatherExe,
     [](Executable* e) { Inst(e, 0, 0)->set_index_offset(std::numeric_limits<int64_t>::max() - 1); },
     "reads indices"},
    {"gather on the gpsimd engine", GatherExe, [](Executable* e) { Inst(e, 0, 0)->set_engine(GPSIMD); },
     "opcode dma_gather on engine gpsimd"},
    {"gather on DMA queue 16", GatherExe, [](Executable* e) { Inst(e, 0, 0)->set_queue(16); }, "DMA queue 16"},
    {"gather into PSUM", GatherExe, [](Executable* e) { Inst(e, 0, 0)->mutable_out()->set_space(PSUM); },
     "DMA cannot access PSUM"},
    {"gather into an int64 tile", GatherExe, [](Executable* e) { Inst(e, 0, 0)->mutable_out()->set_dtype(I64); },
     "tile has dtype int64; tiles hold float32, bfloat16 or float16 only"},
    {"gather tile beyond SBUF", GatherExe,
     [](Executable* e) { Inst(e, 0, 0)->mutable_out()->set_byte_offset(192 * 1024 - 8); }, "SBUF"},
    {"gather of another dtype than the table", GatherExe,
     [](Executable* e) { Inst(e, 0, 0)->mutable_out()->set_dtype(BF16); }, "DMA between float32 tensor and bfloat16 tile"},
    {"gather from an integer table", GatherExe, [](Executable* e) { Inst(e, 0, 0)->mutable_hbm()->set_tensor(1); },
     "dma_gather accesses int64 tensor 'ids' as float32 data"},
    {"gather table tensor out of range", GatherExe,
     [](Executable* e) { Inst(e, 0, 0)->mutable_hbm()->set_tensor(7); }, "names tensor 7"},
    {"gather partition count differs from dims[0]", GatherExe,
     [](Executable* e) { Inst(e, 0, 0)->mutable_hbm()->mutable_dims(0)->set_count(3); }, "walks 3 partitions"},
    {"gather free pattern covers the wrong count", GatherExe,
     [](Executable* e) { Inst(e, 0, 0)->mutable_hbm()->mutable_dims(1)->set_count(3); }, "covers 3 elements"},
    {"index fields on a store", GatherExe, [](Executable* e) { Inst(e, 0, 1)->set_index_bound(4); },
     "only dma_gather has index_tensor"},
    {"index_tensor on a store", GatherExe, [](Executable* e) { Inst(e, 0, 1)->set_index_tensor(1); },
     "only dma_gather has index_tensor"},
    {"index_offset on a vector op", [] { return TwoKernelModel(4, 8); },
     [](Executable* e) { Inst(e, 0, 1)->set_index_offset(1); }, "only dma_gather has index_tensor"},
    {"load of an integer tensor into bfloat16", GatherExe,
     [](Executable* e) { *Inst(e, 0, 0) = DmaLoad(Tile(0, 3, 0, 2, BF16), Ap(1, 0, {{2, 3}, {1, 2}}), 0); },
     "dma_load accesses int64 tensor 'ids' as bfloat16 data; integer tensors are read as dma_gather indices "
     "(index_tensor), or loaded into and stored from float32 tiles"},
    {"load into an int32 tile", GatherExe,
     [](Executable* e) {
       uint32_t t = AddTensor(e, "i", INPUT, I32, {4, 4});
       *Inst(e, 0, 0) = DmaLoad(Tile(0, 4, 0, 4, I32), Ap(t, 0, {{4, 4}, {1, 4}}), 0);
     },
     "tile has dtype int32"},
    {"store of bfloat16 into an integer tensor", AddModelBf16,
     [](Executable* e) {
       uint32_t t = AddTensor(e, "zi", OUTPUT, I32, {4, 8});
       Inst(e, 0, 3)->mutable_hbm()->set_tensor(t);
     },
     "dma_store accesses int32 tensor 'zi' as bfloat16 data"},
    {"bool gather indices", GatherExe,
     [](Executable* e) {
       e->mutable_tensors(1)->set_dtype(BOOL);
       e->mutable_tensors(1)->set_size_bytes(6);
     },
     "dma_gather index tensor 'ids' is bool"},
    {"integer tile in a vector op", [] { return TwoKernelModel(4, 8); },
     [](Executable* e) { Inst(e, 0, 1)->mutable_in1()->set_dtype(I32); }, "tile has dtype int32"},
    {"integer tile in a matmul", MatmulExe, [](Executable* e) { Inst(e, 0, 7)->mutable_in0()->set_dtype(I64); },
     "tile has dtype int64"},
    {"tensor dtype past int16", GatherExe, [](Executable* e) { e->mutable_tensors(1)->set_dtype(DType(10)); },
     "has an invalid dtype"},
    {"uint8 gather index", GatherExe,
     [](Executable* e) {
       e->mutable_tensors(1)->set_dtype(U8);
       e->mutable_tensors(1)->set_size_bytes(e->tensors(1).size_bytes() / 8);
     },
     "dma_gather index tensor 'ids' is uint8"},
    {"int64 tensor size counted in 4-byte elements", GatherExe,
     [](Executable* e) { e->mutable_tensors(1)->set_size_bytes(24); }, "size_bytes"},
};

TEST(NeffCorruption, VerifierRefusesBrokenGathersAndIntegerMisuse) {
  for (const IsaBadCase& c : kGatherBadCases) {
    SCOPED_TRACE(c.name);
    Executable exe = c.model();
    ASSERT_TRUE(ParseNeff(SerializeUnverified(exe)).ok());
    c.corrupt(&exe);
    ExpectRefused(SerializeUnverified(exe), c.needle);
  }
}

TEST(NeffCorruption, VerifierAcceptsGathersAtTheirLimits) {
  // GatherExe is exact at both bounds already.
  absl::StatusOr<Neff> base = ParseNeff(SerializeUnverified(GatherExe()));
  ASSERT_TRUE(base.ok()) << base.status();
  // Every index dtype, integer tensors of every kind, a repeated row (stride
  // 0), a negative row stride that ends at element 0, a 2^40-row bound with
  // a single-element table row stride 0, all 128 partitions.
  Executable exe = EmptyExecutable("limits");
  uint32_t table = AddTensor(&exe, "table", INPUT, BF16, {16, 8});
  std::vector<uint32_t> idx;
  for (DType dt : {I32, I64, F32, BF16, F16})
    idx.push_back(AddTensor(&exe, absl::StrCat("ids_", DTypeName(dt)), INPUT, dt, {128}));
  uint32_t c = AddTensor(&exe, "ids_const", CONSTANT, I32, {128});
  uint32_t m = AddTensor(&exe, "ids_mid", INTERMEDIATE, I64, {128});
  AddTensor(&exe, "ids_out", OUTPUT, I64, {3});
  exe.set_arena_bytes(1024);
  idx.push_back(c);
  idx.push_back(m);
  Kernel* k = exe.add_kernels();
  k->set_name("k");
  uint32_t q = 0;
  for (uint32_t id : idx)
    *k->add_instructions() = DmaGather(Tile(0, 128, 0, 8, BF16), Ap(table, 0, {{8, 128}, {1, 8}}), id, 0, 16, q++);
  *k->add_instructions() = DmaGather(Tile(0, 64, 0, 8, BF16), Ap(table, 0, {{0, 64}, {1, 8}}), idx[1], 64,
                                     uint64_t(1) << 40, q++);
  *k->add_instructions() = DmaGather(Tile(0, 1, 0, 8, BF16), Ap(table, 120, {{-8, 1}, {1, 8}}), idx[0], 127, 16, q++);
  // (SerializeNeff runs the same verifier and lays out the constant's segment.)
  auto verify = [](const Executable& e) {
    return SerializeNeff(e, std::vector<std::string>{std::string(512, '\0')}, "limits", "test").status();
  };
  absl::StatusOr<std::string> bytes = SerializeNeff(exe, std::vector<std::string>{std::string(512, '\0')}, "limits", "test");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<Neff> neff = ParseNeff(*bytes);
  EXPECT_TRUE(neff.ok()) << neff.status();
  // One element further on either side is refused.
  const int last = k->instructions_size() - 1;
  Executable wider = exe;
  Inst(&wider, 0, last)->mutable_hbm()->set_offset(119);
  EXPECT_NE(Message(verify(wider)).find("reaches elements [-1, 126]"), std::string::npos) << verify(wider);
  Executable later = exe;
  Inst(&later, 0, last)->set_index_offset(128);
  EXPECT_NE(Message(verify(later)).find("reads indices [128, 128+1)"), std::string::npos) << verify(later);
}

TEST(NeffCorruption, VerifierRefusesBrokenExecutablesBehindAValidHash) {
  for (const BadCase& c : kBadCases) {
    SCOPED_TRACE(c.name);
    Executable exe = TwoKernelModel(4, 8);
    ASSERT_TRUE(ParseNeff(SerializeUnverified(exe)).ok());
    c.corrupt(&exe);
    ExpectRefused(SerializeUnverified(exe), c.needle);
  }
}

// Found by the NEFF fuzzer (UBSan: a misaligned vector load): tiles may
// start at any byte of a partition. bf16 tiles at odd offsets and f32 tiles
// at offsets of 2 (mod 4), long enough for the vector paths, must compute
// the right values without a misaligned access (this binary runs under
// UBSan and ASan).
TEST(NeffCorruption, TilesAtOddByteOffsetsRunWithoutMisalignedAccess) {
  const uint32_t P = 2, N = 40;
  for (DType dt : {BF16, F32}) {
    SCOPED_TRACE(DType_Name(dt));
    const uint32_t es = uint32_t(DTypeSize(dt)), a = dt == BF16 ? 1 : 2;
    Executable exe = EmptyExecutable("odd");
    uint32_t x = AddTensor(&exe, "x", INPUT, dt, {P, N});
    uint32_t z = AddTensor(&exe, "z", OUTPUT, dt, {P, N});
    Kernel* k = exe.add_kernels();
    k->set_name("odd");
    *k->add_instructions() = DmaLoad(Tile(0, P, a, N, dt), Ap(x, 0, {{N, P}, {1, N}}), 0);
    *k->add_instructions() = Activation(EXP, Tile(0, P, 1024 + a, N, dt), Tile(0, P, a, N, dt), 0.0f, 0.0f,
                                        {W(4, 1)});
    *k->add_instructions() = TensorTensor(ADD, Tile(0, P, 2048 + a, N, dt), Tile(0, P, 1024 + a, N, dt),
                                          Tile(0, P, 1024 + a, N, dt), {W(2, 1)});
    *k->add_instructions() = DmaStore(Tile(0, P, 2048 + a, N, dt), Ap(z, 0, {{N, P}, {1, N}}), 1, {W(1, 1)});
    std::string in(size_t(P) * N * es, '\x3f');
    ExecutableRun r = RunExecutable(exe, {in});
    ASSERT_EQ(r.outputs.size(), 1u);
    // exp(x * 0 + 0) + itself = 2 everywhere.
    for (uint32_t i = 0; i < P * N; ++i) {
      float v;
      if (dt == F32) {
        std::memcpy(&v, r.outputs[0].data() + 4 * i, 4);
      } else {
        uint32_t u = uint32_t(uint8_t(r.outputs[0][2 * i])) << 16 | uint32_t(uint8_t(r.outputs[0][2 * i + 1])) << 24;
        std::memcpy(&v, &u, 4);
      }
      ASSERT_EQ(v, 2.0f) << i;
    }
  }
}

}  // namespace
}  // namespace neuroncc
