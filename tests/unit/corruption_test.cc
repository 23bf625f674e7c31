// Corrupted and lying NEFF files must be refused with a clear error, never
// crash or read out of bounds. This file is also built with ASan + UBSan
// (runtime_asan_tests), where the format library is instrumented too.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "neff_format.h"
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
  PutLE64(b, 8, 512);
  ExpectRefused(b, "header_size");
  b = bytes;
  PutLE64(b, 24, kVersionMajor + 1);
  ExpectRefused(b, "neff_version_major");
  b = bytes;
  b[900] = 1;
  ExpectRefused(b, "reserved header byte");
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

TEST(NeffCorruption, VerifierRefusesBrokenExecutablesBehindAValidHash) {
  for (const BadCase& c : kBadCases) {
    SCOPED_TRACE(c.name);
    Executable exe = TwoKernelModel(4, 8);
    ASSERT_TRUE(ParseNeff(SerializeUnverified(exe)).ok());
    c.corrupt(&exe);
    ExpectRefused(SerializeUnverified(exe), c.needle);
  }
}

}  // namespace
}  // namespace neuroncc
