// neff-load-bench: nrt_load time of adversarial NEFFs of growing size.
//
//   neff-load-bench [--max-mb N] [--family NAME]
//
// Each family is built to stress one check that nrt_load runs, at sizes
// doubling up to --max-mb (default 100) MB of NEFF. For each size it prints
// the NEFF's bytes and instructions, nrt_load's wall time (or the refusal),
// and the time per MB and per 1000 instructions, whose flatness across
// sizes is the linearity the runtime promises. Families:
//
//   constants    one big constant segment: the SHA-256 and the copy
//   wide         many small kernels with 5-dim access patterns and 64 waits
//                per instruction: parsing, verification, the semaphore replay
//   fragments    one kernel whose vector writes cut a partition's bytes into
//                thousands of distinct segments, and whose scalar reads each
//                span them all after waiting for every write: the race check
//                check's worst case
//   boundaries   one kernel cuts a partition into thousands of segments, then
//                many one-instruction kernels of the same dispatch read them
//                all: the waits the dispatch model adds at kernel boundaries
//   chain        one kernel of alternating engines, each instruction waiting
//                on the previous: the event-driven schedule
//
// The program links the runtime statically (as the tests do) and calls the
// public C API. Exit status 0 unless an argument is bad (2).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "neff_format.h"
#include "nrt/nrt.h"
#include "nrt/nrt_ext.h"
#include "test_neffs.h"

namespace {

using namespace neuroncc;
using namespace neuroncc::testing;
using neff::Executable;

constexpr uint32_t kVectorQ = 1, kScalarQ = 2, kGpsimdQ = 3, kDma0 = 4;

std::string Serialize(const Executable& exe, const std::vector<std::string>& segments) {
  absl::StatusOr<std::string> bytes = neff::SerializeNeff(exe, segments, "bench", "neff-load-bench");
  if (!bytes.ok()) {
    std::fprintf(stderr, "neff-load-bench: cannot build a NEFF: %s\n", std::string(bytes.status().message()).c_str());
    std::exit(1);
  }
  return *bytes;
}

// A graph input x [128, cols] f32 and output z; returns z's index.
uint32_t AddIo(Executable* exe, int64_t cols) {
  AddTensor(exe, "x", neff::INPUT, neff::F32, {128, cols});
  return AddTensor(exe, "z", neff::OUTPUT, neff::F32, {128, cols});
}

neff::Kernel* AddKernel(Executable* exe, const std::string& name) {
  neff::Kernel* k = exe->add_kernels();
  k->set_name(name);
  return k;
}

std::string Constants(uint64_t target) {
  Executable exe = EmptyExecutable("constants");
  const int64_t cols = int64_t(target / 4 / 128);
  uint32_t w = AddTensor(&exe, "w", neff::CONSTANT, neff::F32, {128, cols});
  exe.mutable_tensors(int(w))->set_segment(0);
  const uint32_t z = AddIo(&exe, 64);
  neff::Kernel* k = AddKernel(&exe, "k");
  *k->add_instructions() = DmaLoad(Tile(0, 128, 0, 64, neff::F32), Ap(w, 0, {{cols, 128}, {1, 64}}), 0);
  *k->add_instructions() = DmaStore(Tile(0, 128, 0, 64, neff::F32), Ap(z, 0, {{64, 128}, {1, 64}}), 1,
                                    {W(kDma0, 1)});
  return Serialize(exe, {std::string(size_t(cols) * 128 * 4, '\x01')});
}

std::string Wide(uint64_t target) {
  Executable exe = EmptyExecutable("wide");
  const uint32_t x = AddIo(&exe, 1024) - 1;
  // ~ 430 bytes per instruction: a 5-dim pattern and up to 64 waits.
  const uint64_t per_kernel = 256;
  const uint64_t kernels = std::max<uint64_t>(1, target / (per_kernel * 430));
  for (uint64_t kk = 0; kk < kernels; ++kk) {
    neff::Kernel* k = AddKernel(&exe, "k" + std::to_string(kk));
    for (uint64_t i = 0; i < per_kernel; ++i) {
      const uint32_t q = uint32_t(i % 16);  // DMA queue number
      std::vector<neff::Wait> waits;
      for (uint32_t w = 0; w < 64 && i >= 16; ++w) waits.push_back(W(kDma0 + (w % 16), uint32_t((i - 16) / 16 + 1)));
      *k->add_instructions() = DmaLoad(Tile(0, 128, uint32_t((i % 16) * 4096), 1024, neff::F32),
                                       Ap(x, 0, {{1024, 128}, {512, 2}, {128, 4}, {32, 4}, {1, 32}}), q, waits);
    }
  }
  return Serialize(exe, {});
}

std::string Fragments(uint64_t target) {
  Executable exe = EmptyExecutable("fragments");
  AddIo(&exe, 64);
  neff::Kernel* k = AddKernel(&exe, "fragments");
  const uint32_t kPieces = 8192;   // distinct 4-byte segments per partition
  const uint64_t n = std::max<uint64_t>(64, target / 60);  // ~60 bytes per instruction
  uint32_t writes = 0, reads = 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (i % 2 == 0) {
      // gpsimd iota into one 4-byte slot (a new boundary until all slots
      // exist), after the reads before it.
      std::vector<neff::Wait> waits;
      if (reads) waits.push_back(W(kScalarQ, reads));
      *k->add_instructions() = Iota(Tile(0, 128, (writes % kPieces) * 4, 1, neff::F32), float(i), 0, 0, waits,
                                    neff::GPSIMD);
      ++writes;
    } else {
      // A scalar read of every slot after every write so far: no race.
      *k->add_instructions() = Activation(neff::IDENTITY, Tile(0, 128, kPieces * 4, kPieces, neff::F32),
                                          Tile(0, 128, 0, kPieces, neff::F32), 1.0f, 0.0f, {W(kGpsimdQ, writes)});
      ++reads;
    }
  }
  return Serialize(exe, {});
}

std::string Boundaries(uint64_t target) {
  Executable exe = EmptyExecutable("boundaries");
  exe.set_dispatch_model(neff::DISPATCH_WHOLE_GRAPH);
  AddIo(&exe, 64);
  const uint32_t kPieces = 8192;
  neff::Kernel* k = AddKernel(&exe, "cut");
  for (uint32_t i = 0; i < kPieces; ++i)
    *k->add_instructions() = Iota(Tile(0, 128, i * 4, 1, neff::F32), float(i), 0, 0, {}, neff::GPSIMD);
  const uint64_t readers = std::max<uint64_t>(8, target / 90);  // ~90 bytes per one-instruction kernel
  for (uint64_t r = 0; r < readers; ++r) {
    k = AddKernel(&exe, "read" + std::to_string(r));
    *k->add_instructions() = Activation(neff::IDENTITY, Tile(0, 128, kPieces * 4, kPieces, neff::F32),
                                        Tile(0, 128, 0, kPieces, neff::F32), 1.0f, 0.0f);
  }
  return Serialize(exe, {});
}

std::string Chain(uint64_t target) {
  Executable exe = EmptyExecutable("chain");
  AddIo(&exe, 64);
  neff::Kernel* k = AddKernel(&exe, "chain");
  const uint64_t n = std::max<uint64_t>(64, target / 50);
  uint32_t count[2] = {0, 0};
  for (uint64_t i = 0; i < n; ++i) {
    const int e = int(i % 2);
    std::vector<neff::Wait> waits;
    if (i > 0) waits.push_back(W(e ? kVectorQ : kScalarQ, count[1 - e]));
    const neff::TileRef t = Tile(0, 128, 0, 64, neff::F32);
    if (e == 0)
      *k->add_instructions() = TensorScalar(neff::ADD, t, t, 1.0f, waits, neff::VECTOR);
    else
      *k->add_instructions() = Activation(neff::IDENTITY, t, t, 1.0f, 1.0f, waits);
    ++count[e];
  }
  return Serialize(exe, {});
}

double LoadSeconds(const std::string& neff, std::string* error) {
  nrt_model_t* model = nullptr;
  auto t0 = std::chrono::steady_clock::now();
  NRT_STATUS s = nrt_load(neff.data(), neff.size(), -1, -1, &model);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (s != NRT_SUCCESS) {
    *error = nrt_get_last_error_message();
    return seconds;
  }
  nrt_unload(model);
  return seconds;
}

uint64_t Instructions(const std::string& neff) {
  absl::StatusOr<neff::Neff> parsed = neff::ParseNeff(std::string_view(neff));
  if (!parsed.ok()) return 0;
  uint64_t n = 0;
  for (const neff::Kernel& k : parsed->executable.kernels()) n += uint64_t(k.instructions_size());
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  double max_mb = 100;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--max-mb") && i + 1 < argc) {
      char* end = nullptr;
      max_mb = std::strtod(argv[++i], &end);
      if (!end || *end || !(max_mb >= 0.1 && max_mb <= 4096)) {
        std::fprintf(stderr, "neff-load-bench: --max-mb takes a size from 0.1 to 4096\n");
        return 2;
      }
    } else if (!std::strcmp(argv[i], "--family") && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: neff-load-bench [--max-mb N] [--family constants|wide|fragments|boundaries|chain]\n");
      return 2;
    }
  }
  const std::vector<std::pair<std::string, std::function<std::string(uint64_t)>>> families = {
      {"constants", Constants}, {"wide", Wide}, {"fragments", Fragments}, {"boundaries", Boundaries},
      {"chain", Chain}};
  if (!only.empty() && std::none_of(families.begin(), families.end(), [&](auto& f) { return f.first == only; })) {
    std::fprintf(stderr, "neff-load-bench: unknown family '%s'\n", only.c_str());
    return 2;
  }
  if (nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "") != NRT_SUCCESS) {
    std::fprintf(stderr, "neff-load-bench: nrt_init: %s\n", nrt_get_last_error_message());
    return 1;
  }
  std::printf("%-10s %12s %12s %10s %10s %12s  %s\n", "family", "NEFF bytes", "instructions", "load s", "s / MB",
              "ms / 1k inst", "result");
  for (const auto& [name, make] : families) {
    if (!only.empty() && name != only) continue;
    for (double mb = 0.78125; mb <= max_mb * 1.0001; mb *= 2) {
      std::string neff = make(uint64_t(mb * (1 << 20)));
      uint64_t n = Instructions(neff);
      std::string error;
      double s = LoadSeconds(neff, &error);
      std::printf("%-10s %12zu %12llu %10.3f %10.4f %12.4f  %s\n", name.c_str(), neff.size(),
                  static_cast<unsigned long long>(n), s, s / (double(neff.size()) / (1 << 20)),
                  n ? s * 1e3 / (double(n) / 1000) : 0.0, error.empty() ? "loaded" : error.substr(0, 120).c_str());
      std::fflush(stdout);
    }
  }
  nrt_close();
  return 0;
}
