// libFuzzer target: NEFF parsing, verification and execution.
//
// The input is an Executable protobuf. It is framed into a NEFF with a
// correct payload hash (random bytes would almost never pass the SHA-256
// check and never reach the verifier), parsed and verified, and every
// program the verifier accepts is executed: the verifier's promise is that
// the executor needs no bounds checks of its own, and ASan holds it to that.
// An input that starts with the NEFF header's layout (1024 bytes or more) is
// also parsed as a whole file, unframed.
//
// Structure-aware: LLVMFuzzerCustomMutator decodes the Executable, changes one
// field of one message inside it through protobuf reflection (a number to a
// boundary or a neighbour, an enum to any value, a repeated element dropped,
// duplicated or swapped, a string cut or extended) and re-encodes it, so most
// inputs are well-formed protobufs that the hash lets through: only the
// verifier stands between them and the executor. One mutation in four is
// libFuzzer's own byte-level one. (libprotobuf-mutator is not packaged by
// Debian; this is the part of it the target needs.)
#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/message.h>
#include <google/protobuf/reflection.h>

#include <random>

#include "executor.h"
#include "neff_format.h"
#include "race_check.h"

namespace nn = neuroncc::neff;

namespace {

// Keeps each run fast and inside the fuzzer's memory limit.
constexpr uint64_t kMaxBytes = uint64_t(16) << 20;
constexpr int kMaxInstructions = 20000;
// Multiply-accumulates of all matmuls together (a 128 x 128 x 512 matmul is
// 2^23): a verified program may hold thousands of them.
constexpr uint64_t kMaxMatmulMacs = uint64_t(1) << 25;

void RunIfSmall(const nn::Neff& neff) {
  const nn::Executable& exe = neff.executable;
  if (exe.arena_bytes() > kMaxBytes) return;
  int instructions = 0;
  uint64_t macs = 0;
  for (const nn::Kernel& k : exe.kernels()) {
    instructions += k.instructions_size();
    for (const nn::Instruction& inst : k.instructions()) macs += nn::MatmulFlops(inst) / 2;
  }
  if (instructions > kMaxInstructions || macs > kMaxMatmulMacs) return;
  uint64_t io = 0;
  for (const nn::Tensor& t : exe.tensors())
    if (t.kind() == nn::INPUT || t.kind() == nn::OUTPUT) io += t.size_bytes();
  if (io > kMaxBytes) return;
  // nrt_load's race check, over every kernel.
  for (const nn::Kernel& k : exe.kernels()) (void)nn::CheckSbufRaces(k, 1);
  auto ex = neuroncc::rt::Executor::Create(neff, *nn::DeviceForTarget(exe.target()));
  if (!ex.ok()) return;
  std::vector<std::string> in, out;
  std::vector<const void*> in_ptrs;
  std::vector<void*> out_ptrs;
  for (uint32_t id : exe.graph_inputs()) {
    const nn::Tensor& t = exe.tensors(int(id));
    in.emplace_back(t.size_bytes(), '\x3c');
    // Integer inputs are gather indices: small values, so that gathers get
    // past the index check and copy rows (0x3c3c... would always be refused).
    const size_t es = nn::DTypeSize(t.dtype());
    if (t.dtype() == nn::I32 || t.dtype() == nn::I64)
      for (size_t i = 0; i * es < in.back().size(); ++i) {
        std::string& s = in.back();
        std::fill(s.begin() + long(i * es), s.begin() + long((i + 1) * es), '\0');
        s[i * es] = char(i % 3);
      }
  }
  for (uint32_t id : exe.graph_outputs()) out.emplace_back(exe.tensors(int(id)).size_bytes(), '\0');
  for (std::string& s : in) in_ptrs.push_back(s.data());
  for (std::string& s : out) out_ptrs.push_back(s.data());
  // A dma_gather index outside its table fails the run (that is its
  // contract); the executor must get there without reading out of bounds.
  (void)(*ex)->Run(in_ptrs, out_ptrs);
}

}  // namespace

namespace {

namespace pb = google::protobuf;

int64_t Interesting(std::mt19937_64& rng, int64_t old) {
  static const int64_t kValues[] = {0, 1, -1, 2, 7, 8, 15, 16, 31, 32, 63, 64, 127, 128, 255, 256, 511, 512,
                                    1023, 1024, 2047, 2048, 4095, 4096, 65535, 65536, 1 << 20, 1 << 24,
                                    INT32_MAX, INT32_MIN, int64_t(UINT32_MAX), INT64_MAX, INT64_MIN};
  switch (rng() % 3) {
    case 0: return kValues[rng() % (sizeof(kValues) / sizeof(kValues[0]))];
    case 1: return int64_t(uint64_t(old) + rng() % 17 - 8);  // wraps, as unsigned arithmetic does
    default: return int64_t(uint64_t(old) ^ (uint64_t(1) << (rng() % 64)));
  }
}

// Every message reachable from `m`, itself first.
void Collect(pb::Message* m, std::vector<pb::Message*>* out) {
  out->push_back(m);
  const pb::Reflection* r = m->GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  r->ListFields(*m, &fields);
  for (const pb::FieldDescriptor* f : fields) {
    if (f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (f->is_repeated()) {
      for (int i = 0; i < r->FieldSize(*m, f); ++i) Collect(r->MutableRepeatedMessage(m, f, i), out);
    } else {
      Collect(r->MutableMessage(m, f), out);
    }
  }
}

void MutateScalar(std::mt19937_64& rng, pb::Message* m, const pb::FieldDescriptor* f, int index) {
  const pb::Reflection* r = m->GetReflection();
  const bool rep = index >= 0;
  using F = pb::FieldDescriptor;
  switch (f->cpp_type()) {
    case F::CPPTYPE_INT32: {
      int32_t v = int32_t(Interesting(rng, rep ? r->GetRepeatedInt32(*m, f, index) : r->GetInt32(*m, f)));
      rep ? r->SetRepeatedInt32(m, f, index, v) : r->SetInt32(m, f, v);
      break;
    }
    case F::CPPTYPE_INT64: {
      int64_t v = Interesting(rng, rep ? r->GetRepeatedInt64(*m, f, index) : r->GetInt64(*m, f));
      rep ? r->SetRepeatedInt64(m, f, index, v) : r->SetInt64(m, f, v);
      break;
    }
    case F::CPPTYPE_UINT32: {
      uint32_t v = uint32_t(Interesting(rng, rep ? r->GetRepeatedUInt32(*m, f, index) : r->GetUInt32(*m, f)));
      rep ? r->SetRepeatedUInt32(m, f, index, v) : r->SetUInt32(m, f, v);
      break;
    }
    case F::CPPTYPE_UINT64: {
      uint64_t v = uint64_t(Interesting(rng, int64_t(rep ? r->GetRepeatedUInt64(*m, f, index) : r->GetUInt64(*m, f))));
      rep ? r->SetRepeatedUInt64(m, f, index, v) : r->SetUInt64(m, f, v);
      break;
    }
    case F::CPPTYPE_FLOAT:
    case F::CPPTYPE_DOUBLE: {
      static const double kValues[] = {0.0, -0.0, 1.0, -1.0, 1e-30, 1e30, 65504.0, 3.4e38, 1e300,
                                       std::numeric_limits<double>::infinity(),
                                       std::numeric_limits<double>::quiet_NaN()};
      double v = kValues[rng() % (sizeof(kValues) / sizeof(kValues[0]))];
      if (f->cpp_type() == F::CPPTYPE_FLOAT)
        rep ? r->SetRepeatedFloat(m, f, index, float(v)) : r->SetFloat(m, f, float(v));
      else
        rep ? r->SetRepeatedDouble(m, f, index, v) : r->SetDouble(m, f, v);
      break;
    }
    case F::CPPTYPE_BOOL:
      rep ? r->SetRepeatedBool(m, f, index, !r->GetRepeatedBool(*m, f, index)) : r->SetBool(m, f, !r->GetBool(*m, f));
      break;
    case F::CPPTYPE_ENUM: {
      // Any number, named or not: proto3 enums are open.
      int v = rng() % 4 == 0 ? int(Interesting(rng, 0)) : int(rng() % 32);
      rep ? r->SetRepeatedEnumValue(m, f, index, v) : r->SetEnumValue(m, f, v);
      break;
    }
    case F::CPPTYPE_STRING: {
      std::string v = rep ? r->GetRepeatedString(*m, f, index) : r->GetString(*m, f);
      if (!v.empty() && rng() % 2) v.resize(rng() % v.size());
      else v += std::string(1 + rng() % 8, char('a' + rng() % 26));
      rep ? r->SetRepeatedString(m, f, index, v) : r->SetString(m, f, v);
      break;
    }
    default:
      break;
  }
}

// One structural change to one message of `exe`.
void MutateOnce(std::mt19937_64& rng, pb::Message* root) {
  std::vector<pb::Message*> messages;
  Collect(root, &messages);
  pb::Message* m = messages[rng() % messages.size()];
  const pb::Descriptor* d = m->GetDescriptor();
  const pb::Reflection* r = m->GetReflection();
  // One change in four sets an unset message field to a copy of a set field
  // of its type beside it (an instruction's accum or bias tile copied from
  // its out or in0): a well-formed operand that the verifier must take or
  // refuse, where an empty message is refused at once. The fuzzer missed a
  // crash at nrt_load that needed such operands: a footprint with room for
  // one region fewer than an activation with scale, bias and sum tiles.
  if (rng() % 4 == 0) {
    std::vector<std::pair<const pb::FieldDescriptor*, const pb::FieldDescriptor*>> copies;  // (to, from)
    for (int i = 0; i < d->field_count(); ++i) {
      const pb::FieldDescriptor* to = d->field(i);
      if (to->is_repeated() || to->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE || r->HasField(*m, to)) continue;
      for (int j = 0; j < d->field_count(); ++j) {
        const pb::FieldDescriptor* from = d->field(j);
        if (!from->is_repeated() && from->message_type() == to->message_type() && r->HasField(*m, from))
          copies.push_back({to, from});
      }
    }
    if (!copies.empty()) {
      auto [to, from] = copies[rng() % copies.size()];
      r->MutableMessage(m, to)->CopyFrom(r->GetMessage(*m, from));
      return;
    }
  }
  const pb::FieldDescriptor* f = d->field(int(rng() % uint64_t(d->field_count())));
  if (f->is_repeated()) {
    int n = r->FieldSize(*m, f);
    switch (n == 0 ? 3 : rng() % 4) {
      case 0: r->RemoveLast(m, f); return;                                   // drop the last element
      case 1: r->SwapElements(m, f, int(rng() % uint64_t(n)), int(rng() % uint64_t(n))); return;
      case 2:                                                                 // change one element
        if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
          MutateOnce(rng, r->MutableRepeatedMessage(m, f, int(rng() % uint64_t(n))));
        } else {
          MutateScalar(rng, m, f, int(rng() % uint64_t(n)));
        }
        return;
      default:  // a message: add a copy of one (or a new one); a number: change one
        if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
          pb::Message* added = r->AddMessage(m, f);
          if (n > 0) added->CopyFrom(r->GetRepeatedMessage(*m, f, int(rng() % uint64_t(n))));
        } else if (n > 0) {
          MutateScalar(rng, m, f, int(rng() % uint64_t(n)));
        }
        return;
    }
  }
  if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
    if (rng() % 3 == 0) r->ClearField(m, f);
    else MutateOnce(rng, r->MutableMessage(m, f));
    return;
  }
  MutateScalar(rng, m, f, -1);
}

}  // namespace

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Mutated strings are often not UTF-8; protobuf refuses them and would log
  // each refusal.
  pb::SetLogHandler([](pb::LogLevel, const char*, int, const std::string&) {});
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::mt19937_64 rng(seed);
  nn::Executable exe;
  if (rng() % 4 == 0 || !exe.ParseFromArray(data, int(size))) return LLVMFuzzerMutate(data, size, max_size);
  for (int k = 1 + int(rng() % 3); k > 0; --k) MutateOnce(rng, &exe);
  std::string out;
  if (!exe.SerializeToString(&out) || out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::copy(out.begin(), out.end(), data);
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (size >= nn::kHeaderSize) (void)nn::ParseNeff(bytes);

  std::string payload(8, '\0');
  for (int i = 0; i < 8; ++i) payload[size_t(i)] = char((uint64_t(size) >> (8 * i)) & 0xff);
  payload.append(bytes);
  nn::Header h;
  h.data_size = payload.size();
  h.hash = nn::Sha256(payload.data(), payload.size());
  absl::StatusOr<nn::Neff> neff = nn::ParseNeff(nn::SerializeHeader(h) + payload);
  if (neff.ok()) RunIfSmall(*neff);
  return 0;
}
