// NEFF and NTFF format library: round trips, determinism, header layout,
// profile hash and file names.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "device_model.h"
#include "file_util.h"
#include "neff_format.h"
#include "ntff_format.h"
#include "test_neffs.h"

namespace neuroncc {
namespace {

using namespace neff;
using namespace testing;

uint64_t ReadLE64(const std::string& s, size_t off) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(uint8_t(s[off + size_t(i)])) << (8 * i);
  return v;
}

TEST(NeffFormat, Sha256KnownAnswers) {
  // FIPS 180-4 examples.
  auto hex = [](const Sha256Digest& d) {
    std::string s;
    for (uint8_t b : d) s += "0123456789abcdef"[b >> 4], s += "0123456789abcdef"[b & 15];
    return s;
  };
  EXPECT_EQ(hex(Sha256("abc", 3)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(Sha256("", 0)), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  std::string million(1000000, 'a');
  EXPECT_EQ(hex(Sha256(million.data(), million.size())),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(NeffFormat, RoundTripPreservesTheExecutable) {
  Executable exe = TwoKernelModel(4, 16);
  std::string bytes = Serialize(exe);
  absl::StatusOr<Neff> neff = ParseNeff(bytes);
  ASSERT_TRUE(neff.ok()) << neff.status();
  exe.set_format_version(kFormatVersion);
  EXPECT_EQ(neff->executable.SerializeAsString(), exe.SerializeAsString());
}

TEST(NeffFormat, SerializationIsDeterministic) {
  std::string a = Serialize(TwoKernelModel(8, 32));
  std::string b = Serialize(TwoKernelModel(8, 32));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, Serialize(TwoKernelModel(8, 16)));
}

TEST(NeffFormat, HeaderFieldsFollowThePublicLayout) {
  std::string bytes = Serialize(AddModel(4, 8));
  ASSERT_GT(bytes.size(), kHeaderSize);
  EXPECT_EQ(ReadLE64(bytes, 0), kPackageVersion);
  EXPECT_EQ(ReadLE64(bytes, 8), kHeaderSize);
  EXPECT_EQ(ReadLE64(bytes, 16), bytes.size() - kHeaderSize);
  EXPECT_EQ(ReadLE64(bytes, 24), kVersionMajor);
  EXPECT_EQ(ReadLE64(bytes, 32), kVersionMinor);
  EXPECT_EQ(std::string(bytes.c_str() + 40), "test-build");
  EXPECT_EQ(std::string(bytes.c_str() + 220), "add");
  Sha256Digest digest = Sha256(bytes.data() + kHeaderSize, bytes.size() - kHeaderSize);
  EXPECT_EQ(0, std::memcmp(bytes.data() + 172, digest.data(), 32));
  absl::StatusOr<Header> h = ParseHeader(bytes);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->hash, digest);
  EXPECT_EQ(h->name, "add");
  EXPECT_EQ(h->data_size, bytes.size() - kHeaderSize);
}

TEST(NeffFormat, ProfileHashIsTheFirstEightHashBytesLittleEndian) {
  std::string bytes = Serialize(AddModel(4, 8));
  absl::StatusOr<Header> h = ParseHeader(bytes);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(ProfileHash(*h), ReadLE64(bytes, 172));
  // A different program gives a different id.
  absl::StatusOr<Header> h2 = ParseHeader(Serialize(AddModel(4, 16)));
  ASSERT_TRUE(h2.ok());
  EXPECT_NE(ProfileHash(*h), ProfileHash(*h2));
}

TEST(NeffFormat, ConstantSegmentsAreAlignedAndReadable) {
  Executable exe = EmptyExecutable("consts");
  uint32_t c = AddTensor(&exe, "c", CONSTANT, F32, {2, 3});
  exe.mutable_tensors(int(c))->set_segment(1);
  std::string seg0(5, 'a'), seg1(24, 'b');
  std::string bytes = Serialize(exe, {seg0, seg1});
  absl::StatusOr<Neff> neff = ParseNeff(bytes);
  ASSERT_TRUE(neff.ok()) << neff.status();
  ASSERT_EQ(neff->executable.segments_size(), 2);
  for (const ConstantSegment& s : neff->executable.segments())
    EXPECT_EQ((kHeaderSize + s.offset()) % kSegmentAlignment, 0u);
  EXPECT_EQ(neff->Segment(0), seg0);
  EXPECT_EQ(neff->Segment(1), seg1);
}

TEST(NeffFormat, VerifierRejectsAnAccessPatternWhoseSpanOverflows) {
  // count * stride overflows int64: must be refused, not wrapped into range.
  Executable exe = AddModel(4, 8);
  Instruction* load = exe.mutable_kernels(0)->mutable_instructions(0);
  AccessPattern* ap = load->mutable_hbm();
  ap->clear_dims();
  Dim* d0 = ap->add_dims();
  d0->set_stride(8);
  d0->set_count(4);
  for (int i = 0; i < 2; ++i) {
    Dim* d = ap->add_dims();
    d->set_stride((int64_t(1) << 40) - 1);
    d->set_count(i == 0 ? 1 : 8);
  }
  ap->mutable_dims(1)->set_count(int64_t(1) << 40);
  ap->mutable_dims(1)->set_stride(-((int64_t(1) << 40) - 1));
  absl::StatusOr<Neff> neff = ParseNeff(SerializeUnverified(exe));
  ASSERT_FALSE(neff.ok());
}

TEST(NeffFormat, VerifierRejectsAShapeWhoseElementCountOverflows) {
  Executable exe = EmptyExecutable();
  Tensor* t = exe.add_tensors();
  t->set_name("huge");
  t->set_kind(INTERMEDIATE);
  t->set_dtype(F32);
  t->add_shape(int64_t(1) << 40);
  t->add_shape(int64_t(1) << 24);  // 2^64 elements: wraps to 0 if unchecked
  t->set_size_bytes(0);
  absl::StatusOr<Neff> neff = ParseNeff(SerializeUnverified(exe));
  ASSERT_FALSE(neff.ok());
  EXPECT_NE(std::string(neff.status().message()).find("too large"), std::string::npos)
      << neff.status();
}

ntff::Profile SmallProfile() {
  ntff::Profile p;
  p.set_format_version(ntff::kNtffFormatVersion);
  p.set_ticks_per_nanosec(kTicksPerNanosecond);
  ntff::FillDeviceParams(Trn1(), p.mutable_device());
  p.set_neff_hash(12345);
  p.set_neff_name("m");
  p.set_execution_count(1);
  ntff::KernelInfo* k = p.add_kernel_info();
  k->set_name("k");
  k->add_source_ops("aten.mul.Tensor");
  ntff::DispatchSpan* d = p.add_dispatch_spans();
  d->set_start(0);
  d->set_launch_end(10);
  d->set_end(30);
  d->set_kernel_span_count(1);
  ntff::KernelSpan* s = p.add_kernel_spans();
  s->set_start(10);
  s->set_end(30);
  ntff::InstructionEvent* e = p.add_instructions();
  e->set_queue(1);
  e->set_opcode(TENSOR_TENSOR);
  e->set_start(10);
  e->set_end(30);
  e->set_source_op(0);
  s->set_instruction_count(1);
  p.set_total_ticks(30);
  return p;
}

TEST(NtffFormat, RoundTripAndPrefix) {
  ntff::Profile p = SmallProfile();
  std::string bytes = ntff::SerializeNtff(p);
  EXPECT_EQ(bytes.substr(0, 4), "NTFF");
  EXPECT_EQ(uint8_t(bytes[4]), ntff::kNtffFileVersion);
  absl::StatusOr<ntff::Profile> back = ntff::ParseNtff(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), p.SerializeAsString());
  EXPECT_EQ(back->device().dispatch_overhead_ns(), Trn1().dispatch_overhead_ns);
}

TEST(NtffFormat, RejectsBadFiles) {
  std::string good = ntff::SerializeNtff(SmallProfile());
  EXPECT_FALSE(ntff::ParseNtff("NTF").ok());
  std::string bad_magic = good;
  bad_magic[0] = 'X';
  EXPECT_FALSE(ntff::ParseNtff(bad_magic).ok());
  std::string bad_version = good;
  bad_version[4] = 9;
  EXPECT_FALSE(ntff::ParseNtff(bad_version).ok());
  for (size_t len = ntff::kNtffPrefixSize + 1; len < good.size(); ++len)
    EXPECT_FALSE(ntff::ParseNtff(good.substr(0, len)).ok()) << "truncated to " << len;

  auto refused = [](ntff::Profile p, const char* why) {
    absl::StatusOr<ntff::Profile> r = ntff::ParseNtff(ntff::SerializeNtff(p));
    EXPECT_FALSE(r.ok()) << why;
  };
  ntff::Profile p = SmallProfile();
  p.mutable_kernel_spans(0)->set_kernel(3);
  refused(p, "span names a missing kernel");
  p = SmallProfile();
  p.mutable_instructions(0)->set_span(2);
  refused(p, "event names a missing span");
  p = SmallProfile();
  p.mutable_instructions(0)->set_source_op(1);
  refused(p, "source_op beyond the kernel's list");
  p = SmallProfile();
  p.mutable_instructions(0)->set_end(5);
  refused(p, "event ends before it starts");
  p = SmallProfile();
  p.mutable_kernel_spans(0)->set_execution(1);
  refused(p, "span names a missing execution");
  p = SmallProfile();
  p.set_ticks_per_nanosec(0);
  refused(p, "no time base");
  p = SmallProfile();
  p.clear_total_ticks();
  refused(p, "no total_ticks: cut short");
  p = SmallProfile();
  p.set_total_ticks(29);
  refused(p, "total_ticks disagrees with the spans");
  p = SmallProfile();
  p.mutable_kernel_spans(0)->set_instruction_count(2);
  refused(p, "span instruction count disagrees with the events");
  p = SmallProfile();
  p.mutable_instructions(0)->set_opcode(DMA_LOAD);
  refused(p, "DMA instruction without a DMA event");
  p = SmallProfile();
  p.mutable_instructions(0)->set_start(5);
  refused(p, "event before its kernel span starts");
  p = SmallProfile();
  p.mutable_kernel_spans(0)->set_start(5);
  p.mutable_instructions(0)->set_start(5);
  refused(p, "kernel span inside its dispatch's launch overhead");
  p = SmallProfile();
  p.mutable_kernel_spans(0)->set_dispatch(1);
  refused(p, "kernel span names another dispatch");
  p = SmallProfile();
  p.mutable_dispatch_spans(0)->set_kernel_span_count(2);
  refused(p, "dispatch lists a missing kernel span");
  p = SmallProfile();
  p.clear_dispatch_spans();
  refused(p, "kernel span outside any dispatch");
  p = SmallProfile();
  p.mutable_dispatch_spans(0)->set_launch_end(40);
  refused(p, "dispatch launch ends after the dispatch");
  p = SmallProfile();
  p.set_execution_count(2);
  refused(p, "fewer spans than executions x kernels");
}

TEST(NtffFormat, ProfileFileNames) {
  EXPECT_EQ(ntff::NeffFileName(42), "neff_42.neff");
  EXPECT_EQ(ntff::NtffFileName(42, 0, 0), "42_instid_0_vnc_0.ntff");
  uint64_t h = 0;
  uint32_t inst = 9, vnc = 9;
  EXPECT_TRUE(ntff::ParseNeffFileName("neff_18446744073709551615.neff", &h));
  EXPECT_EQ(h, 18446744073709551615ull);
  EXPECT_TRUE(ntff::ParseNtffFileName("7_instid_1_vnc_2.ntff", &h, &inst, &vnc));
  EXPECT_EQ(h, 7u);
  EXPECT_EQ(inst, 1u);
  EXPECT_EQ(vnc, 2u);
  for (const char* bad : {"neff_.neff", "neff_01.neff", "neff_1.neffx", "neff_-1.neff",
                          "neff_18446744073709551616.neff", "neff_1a.neff", "x.neff"})
    EXPECT_FALSE(ntff::ParseNeffFileName(bad, &h)) << bad;
  for (const char* bad : {"7_instid_1_vnc_.ntff", "_instid_1_vnc_2.ntff", "7_instid_1_vnc_2.ntf",
                          "7_inst_1_vnc_2.ntff", "7_instid_x_vnc_2.ntff", "trace.json"})
    EXPECT_FALSE(ntff::ParseNtffFileName(bad, &h, &inst, &vnc)) << bad;
}

}  // namespace
}  // namespace neuroncc

// A writer killed between creating its temporary file and renaming it leaves
// ".<name>.tmp.<pid>"; the next write of that file removes it when that
// process is gone, and leaves those of live writers alone.
TEST(FileUtil, AtomicWritesRemoveTheTemporariesOfDeadWriters) {
  char tmpl[] = "/tmp/neuroncc-files-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);  // now a pid with no process
  std::string dead = dir + "/.out.bin.tmp." + std::to_string(child);
  std::string live = dir + "/.out.bin.tmp.1";  // init never exits
  std::string other = dir + "/.other.bin.tmp." + std::to_string(child);
  for (const std::string& p : {dead, live, other}) std::fclose(std::fopen(p.c_str(), "wb"));
  ASSERT_TRUE(neuroncc::files::WriteFileAtomic(dir + "/out.bin", "data").ok());
  auto exists = [](const std::string& p) { return access(p.c_str(), F_OK) == 0; };
  EXPECT_FALSE(exists(dead));
  EXPECT_TRUE(exists(live));
  EXPECT_TRUE(exists(other));  // another file's leftovers wait for that file's next write
  EXPECT_EQ(*neuroncc::files::ReadFile(dir + "/out.bin"), "data");
  EXPECT_FALSE(neuroncc::files::ReadFile(dir).ok());  // a directory is not a file
  for (const std::string& p : {live, other, dir + "/out.bin"}) std::remove(p.c_str());
  rmdir(dir.c_str());
}
