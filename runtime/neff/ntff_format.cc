#include "ntff_format.h"

#include <charconv>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"

namespace neuroncc::ntff {
namespace {

absl::Status Bad(const std::string& what) {
  return absl::DataLossError(absl::StrCat("invalid NTFF: ", what));
}

// Parses a decimal number that spans all of `text` (no sign, no leading '+').
template <typename T>
bool ParseDecimal(std::string_view text, T* out) {
  if (text.empty() || text.size() > 20) return false;
  if (text.size() > 1 && text[0] == '0') return false;  // one spelling per number
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

bool Consume(std::string_view* s, std::string_view prefix) {
  if (s->substr(0, prefix.size()) != prefix) return false;
  s->remove_prefix(prefix.size());
  return true;
}

}  // namespace

std::string SerializeNtff(const Profile& profile) {
  std::string out(kNtffMagic, sizeof(kNtffMagic));
  for (int i = 0; i < 4; ++i) out.push_back(char((kNtffFileVersion >> (8 * i)) & 0xff));
  profile.AppendToString(&out);
  return out;
}

absl::StatusOr<Profile> ParseNtff(std::string_view bytes) {
  if (bytes.size() < kNtffPrefixSize)
    return Bad(absl::StrCat("file is ", bytes.size(), " bytes, shorter than the 8-byte prefix"));
  if (bytes.substr(0, 4) != std::string_view(kNtffMagic, 4))
    return Bad("missing the 'NTFF' magic (not a trace file)");
  uint32_t file_version = 0;
  for (int i = 0; i < 4; ++i) file_version |= uint32_t(uint8_t(bytes[size_t(4 + i)])) << (8 * i);
  if (file_version != kNtffFileVersion)
    return Bad(absl::StrCat("unsupported file version ", file_version, " (this build reads ",
                            kNtffFileVersion, ")"));
  std::string_view body = bytes.substr(kNtffPrefixSize);
  if (body.size() > size_t(std::numeric_limits<int>::max()))
    return Bad("trace exceeds the 2 GiB protobuf limit");
  Profile p;
  if (!p.ParseFromArray(body.data(), int(body.size()))) return Bad("protobuf does not parse");
  if (p.format_version() != kNtffFormatVersion)
    return Bad(absl::StrCat("unsupported format_version ", p.format_version()));
  if (p.ticks_per_nanosec() == 0) return Bad("ticks_per_nanosec is 0");
  if (!p.has_total_ticks()) return Bad("total_ticks is missing (truncated file)");
  if (uint64_t(p.kernel_spans_size()) != uint64_t(p.execution_count()) * uint64_t(p.kernel_info_size()))
    return Bad(absl::StrCat(p.kernel_spans_size(), " kernel spans for ", p.execution_count(),
                            " executions of ", p.kernel_info_size(), " kernels"));
  // Dispatches follow one another and partition the kernel spans in order;
  // a kernel span lies inside its dispatch, after the launch overhead.
  uint64_t prev_end = 0;
  uint32_t next_span = 0;
  for (int d = 0; d < p.dispatch_spans_size(); ++d) {
    const DispatchSpan& ds = p.dispatch_spans(d);
    if (ds.start() < prev_end) return Bad(absl::StrCat("dispatch span ", d, " overlaps the previous one"));
    if (ds.launch_end() < ds.start() || ds.end() < ds.launch_end())
      return Bad(absl::StrCat("dispatch span ", d, " has a reversed interval"));
    if (ds.execution() >= p.execution_count())
      return Bad(absl::StrCat("dispatch span ", d, " names execution ", ds.execution(), " of ",
                              p.execution_count()));
    if (ds.first_kernel_span() != next_span || ds.kernel_span_count() == 0 ||
        uint64_t(ds.first_kernel_span()) + ds.kernel_span_count() > uint64_t(p.kernel_spans_size()))
      return Bad(absl::StrCat("dispatch span ", d, " does not list the kernel spans that follow the "
                              "previous dispatch's"));
    prev_end = ds.end();
    for (uint32_t i = ds.first_kernel_span(); i < ds.first_kernel_span() + ds.kernel_span_count(); ++i) {
      const KernelSpan& s = p.kernel_spans(int(i));
      if (s.dispatch() != uint32_t(d))
        return Bad(absl::StrCat("kernel span ", i, " names dispatch ", s.dispatch(), ", listed by ", d));
      if (s.kernel() >= uint32_t(p.kernel_info_size()))
        return Bad(absl::StrCat("kernel span ", i, " names kernel ", s.kernel(), " of ",
                                p.kernel_info_size()));
      if (s.execution() != ds.execution())
        return Bad(absl::StrCat("kernel span ", i, " names execution ", s.execution(),
                                ", its dispatch ", ds.execution()));
      if (s.start() < ds.launch_end() || s.end() < s.start() || s.end() > ds.end())
        return Bad(absl::StrCat("kernel span ", i, " lies outside its dispatch"));
    }
    next_span += ds.kernel_span_count();
  }
  if (next_span != uint32_t(p.kernel_spans_size()))
    return Bad(absl::StrCat(p.kernel_spans_size() - int(next_span), " kernel spans belong to no dispatch"));
  if (p.total_ticks() != prev_end)
    return Bad(absl::StrCat("total_ticks ", p.total_ticks(), " differs from the last dispatch's end ",
                            prev_end));
  std::vector<uint64_t> per_span(size_t(p.kernel_spans_size()), 0);
  uint64_t dma_instructions = 0;
  for (int i = 0; i < p.instructions_size(); ++i) {
    const InstructionEvent& e = p.instructions(i);
    if (e.span() >= uint32_t(p.kernel_spans_size()))
      return Bad(absl::StrCat("instruction event ", i, " names span ", e.span()));
    const KernelSpan& span = p.kernel_spans(int(e.span()));
    const KernelInfo& k = p.kernel_info(int(span.kernel()));
    ++per_span[e.span()];
    dma_instructions += neff::IsDma(e.opcode());
    if (e.start() < span.start() || e.end() > span.end())
      return Bad(absl::StrCat("instruction event ", i, " lies outside its kernel span"));
    if (e.source_op() < -1 || e.source_op() >= k.source_ops_size())
      return Bad(absl::StrCat("instruction event ", i, " has source_op ", e.source_op()));
    if (e.queue() >= neff::kMaxQueues)
      return Bad(absl::StrCat("instruction event ", i, " has queue ", e.queue()));
    if (e.end() < e.start())
      return Bad(absl::StrCat("instruction event ", i, " has a reversed interval"));
  }
  for (int i = 0; i < p.kernel_spans_size(); ++i)
    if (per_span[size_t(i)] != p.kernel_spans(i).instruction_count())
      return Bad(absl::StrCat("kernel span ", i, " lists ", p.kernel_spans(i).instruction_count(),
                              " instructions but the trace has ", per_span[size_t(i)]));
  if (uint64_t(p.dma_size()) != dma_instructions)
    return Bad(absl::StrCat(p.dma_size(), " DMA events for ", dma_instructions, " DMA instructions"));
  for (int i = 0; i < p.dma_size(); ++i) {
    const DmaEvent& d = p.dma(i);
    if (d.span() >= uint32_t(p.kernel_spans_size()))
      return Bad(absl::StrCat("DMA event ", i, " names span ", d.span()));
    if (d.dma_queue() >= neff::kMaxQueues - neff::kComputeQueues)
      return Bad(absl::StrCat("DMA event ", i, " has queue ", d.dma_queue()));
    if (d.end() < d.start()) return Bad(absl::StrCat("DMA event ", i, " has a reversed interval"));
  }
  return p;
}

void FillDeviceParams(const neff::DeviceParams& d, DeviceParams* out) {
  out->set_name(d.name);
  out->set_partitions(d.partitions);
  out->set_sbuf_bytes_per_partition(d.sbuf_bytes_per_partition);
  out->set_psum_bytes_per_partition(d.psum_bytes_per_partition);
  out->set_tensor_ghz(d.tensor_ghz);
  out->set_vector_ghz(d.vector_ghz);
  out->set_scalar_ghz(d.scalar_ghz);
  out->set_gpsimd_ghz(d.gpsimd_ghz);
  out->set_dma_queues(d.dma_queues);
  out->set_dma_queue_gbps(d.dma_queue_gbps);
  out->set_hbm_gbps_per_core(d.hbm_gbps_per_core);
  out->set_dma_fixed_ns(d.dma_fixed_ns);
  out->set_sbuf_access_cycles(d.sbuf_access_cycles);
  out->set_dispatch_overhead_ns(d.dispatch_overhead_ns);
  out->set_dma_run_ns(d.dma_run_ns);
}

std::string NeffFileName(uint64_t hash) { return absl::StrCat("neff_", hash, ".neff"); }

std::string NtffFileName(uint64_t hash, uint32_t instance, uint32_t vnc) {
  return absl::StrCat(hash, "_instid_", instance, "_vnc_", vnc, ".ntff");
}

bool ParseNeffFileName(std::string_view name, uint64_t* hash) {
  if (!Consume(&name, "neff_")) return false;
  constexpr std::string_view kExt = ".neff";
  if (name.size() <= kExt.size() || name.substr(name.size() - kExt.size()) != kExt) return false;
  return ParseDecimal(name.substr(0, name.size() - kExt.size()), hash);
}

bool ParseNtffFileName(std::string_view name, uint64_t* hash, uint32_t* instance,
                       uint32_t* vnc) {
  constexpr std::string_view kExt = ".ntff";
  if (name.size() <= kExt.size() || name.substr(name.size() - kExt.size()) != kExt) return false;
  name.remove_suffix(kExt.size());
  size_t a = name.find("_instid_");
  if (a == std::string_view::npos || !ParseDecimal(name.substr(0, a), hash)) return false;
  name.remove_prefix(a + 8);
  size_t b = name.find("_vnc_");
  if (b == std::string_view::npos || !ParseDecimal(name.substr(0, b), instance)) return false;
  return ParseDecimal(name.substr(b + 5), vnc);
}

}  // namespace neuroncc::ntff
