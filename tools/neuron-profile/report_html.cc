#include "report_html.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "device_model.h"
#include "json.h"

namespace neuroncc::profile {

extern const char kReportTemplate[];  // report.html, embedded by embed_report.cmake

namespace {

namespace nn = neuroncc::neff;

// Interned strings: the page looks opcodes, ATen ops and tile shapes up by index.
class Strings {
 public:
  int Id(const std::string& s) {
    auto [it, added] = ids_.emplace(s, int(list_.size()));
    if (added) list_.push_back(s);
    return it->second;
  }
  std::string Json() const {
    std::string out = "[";
    for (size_t i = 0; i < list_.size(); ++i) absl::StrAppend(&out, i ? "," : "", json::Quote(list_[i]));
    return out + "]";
  }

 private:
  std::map<std::string, int> ids_;
  std::vector<std::string> list_;
};

std::string Tile(const char* role, const nn::TileRef& t) {
  if (t.partitions() == 0) return "";
  std::string dtype = nn::DType_Name(t.dtype());
  std::transform(dtype.begin(), dtype.end(), dtype.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return absl::StrCat(role, " ", t.partitions(), "x", t.num_elements(), " ", dtype,
                      t.space() == nn::PSUM ? " PSUM" : " SBUF",
                      t.step() > 1 ? absl::StrCat(" step ", t.step()) : std::string());
}

// "out 128x512 bf16 SBUF, in0 ..." and, for DMA, the HBM access pattern.
std::string Shapes(const nn::Instruction& ins) {
  std::vector<std::string> parts;
  for (auto [role, tile] : {std::pair<const char*, const nn::TileRef*>{"out", &ins.out()},
                            {"in0", &ins.in0()}, {"in1", &ins.in1()}, {"in2", &ins.in2()},
                            {"accum", &ins.accum()}}) {
    std::string s = Tile(role, *tile);
    if (!s.empty()) parts.push_back(s);
  }
  if (ins.has_hbm()) {
    std::string dims;
    for (const nn::Dim& d : ins.hbm().dims()) absl::StrAppend(&dims, dims.empty() ? "" : ",", "[", d.stride(), ",", d.count(), "]");
    // Two partition dims: the first two pairs walk the partitions.
    parts.push_back(absl::StrCat("hbm tensor ", ins.hbm().tensor(), " +", ins.hbm().offset(), " ", dims,
                                 ins.hbm().partition_dims() == 2 ? " (2 partition dims)" : ""));
  }
  std::string out;
  for (const std::string& p : parts) absl::StrAppend(&out, out.empty() ? "" : ", ", p);
  return out;
}

int64_t Ns(uint64_t ticks, double ns_per_tick) { return int64_t(std::llround(double(ticks) * ns_per_tick)); }

std::string ProfileData(const HtmlProfile& hp) {
  const ntff::Profile& p = *hp.profile;
  const double ns_per_tick = 1.0 / double(std::max<uint64_t>(p.ticks_per_nanosec(), 1));
  Strings strings;
  std::string out = absl::StrCat("{\"label\":", json::Quote(hp.label),
                                 ",\"summary\":", RenderSummaryJson(Summarize(p)), ",\"queues\":[");
  const uint32_t queues = nn::kComputeQueues + std::min<uint32_t>(p.device().dma_queues(), 16);
  for (uint32_t q = 0; q < queues; ++q) absl::StrAppend(&out, q ? "," : "", "\"", nn::QueueName(q), "\"");
  absl::StrAppend(&out, "],\"dispatches\":[");
  for (int i = 0; i < p.dispatch_spans_size(); ++i) {
    const ntff::DispatchSpan& d = p.dispatch_spans(i);
    absl::StrAppend(&out, i ? "," : "", "[", Ns(d.start(), ns_per_tick), ",", Ns(d.launch_end(), ns_per_tick), ",",
                    Ns(d.end(), ns_per_tick), ",", d.execution(), "]");
  }
  absl::StrAppend(&out, "],\"kernelSpans\":[");
  for (int i = 0; i < p.kernel_spans_size(); ++i) {
    const ntff::KernelSpan& s = p.kernel_spans(i);
    absl::StrAppend(&out, i ? "," : "", "[", s.kernel(), ",", Ns(s.start(), ns_per_tick), ",",
                    Ns(s.end(), ns_per_tick), ",", s.dispatch(), ",", s.execution(), "]");
  }
  // One row per queue, instructions by start time; columns, starts as deltas.
  std::vector<std::vector<int>> rows(queues);
  for (int i = 0; i < p.instructions_size(); ++i)
    if (p.instructions(i).queue() < queues) rows[p.instructions(i).queue()].push_back(i);
  absl::StrAppend(&out, "],\"rows\":[");
  for (uint32_t q = 0; q < queues; ++q) {
    std::vector<int>& row = rows[q];
    std::stable_sort(row.begin(), row.end(), [&](int a, int b) {
      return p.instructions(a).start() < p.instructions(b).start();
    });
    std::string start, dur, op, src, span, bytes, flops, shape;
    int64_t prev = 0;
    for (size_t j = 0; j < row.size(); ++j) {
      const ntff::InstructionEvent& e = p.instructions(row[j]);
      const uint32_t kernel = p.kernel_spans(int(e.span())).kernel();
      const ntff::KernelInfo& k = p.kernel_info(int(kernel));
      const char* sep = j ? "," : "";
      int64_t s = Ns(e.start(), ns_per_tick);
      absl::StrAppend(&start, sep, s - prev);
      prev = s;
      absl::StrAppend(&dur, sep, Ns(e.end(), ns_per_tick) - s);
      absl::StrAppend(&op, sep, strings.Id(nn::OpcodeName(e.opcode())));
      absl::StrAppend(&src, sep, e.source_op() >= 0 && e.source_op() < k.source_ops_size()
                                     ? strings.Id(k.source_ops(e.source_op()))
                                     : -1);
      absl::StrAppend(&span, sep, e.span());
      absl::StrAppend(&bytes, sep, e.bytes());
      absl::StrAppend(&flops, sep, e.flops());
      int shape_id = -1;
      if (hp.neff && int(kernel) < hp.neff->executable.kernels_size()) {
        const nn::Kernel& nk = hp.neff->executable.kernels(int(kernel));
        if (e.instruction() < uint32_t(nk.instructions_size()))
          shape_id = strings.Id(Shapes(nk.instructions(int(e.instruction()))));
      }
      absl::StrAppend(&shape, sep, shape_id);
    }
    absl::StrAppend(&out, q ? "," : "", "{\"start\":[", start, "],\"dur\":[", dur, "],\"op\":[", op, "],\"src\":[",
                    src, "],\"span\":[", span, "],\"bytes\":[", bytes, "],\"flops\":[", flops, "],\"shape\":[",
                    shape, "]}");
  }
  absl::StrAppend(&out, "],\"strings\":", strings.Json(), "}");
  return out;
}

}  // namespace

std::string HtmlData(const std::vector<HtmlProfile>& profiles, const std::string& system_trace_json) {
  std::string out = "{\"profiles\":[";
  for (size_t i = 0; i < profiles.size(); ++i) absl::StrAppend(&out, i ? ",\n" : "", ProfileData(profiles[i]));
  // The system trace travels as a string: the page parses it, and says so if
  // it cannot, whatever the file holds.
  absl::StrAppend(&out, "],\n\"systemTrace\":",
                  system_trace_json.empty() ? std::string("null") : json::Quote(system_trace_json), "}");
  return out;
}

std::string RenderHtml(const std::vector<HtmlProfile>& profiles, const std::string& system_trace_json) {
  // Inside <script>, "</" could close the element: JSON allows "<\/" instead.
  std::string data = absl::StrReplaceAll(HtmlData(profiles, system_trace_json), {{"</", "<\\/"}});
  std::string page = kReportTemplate;
  const std::string marker = "/*NEURONCC_PROFILE_DATA*/null";
  size_t at = page.find(marker);
  if (at == std::string::npos) return page;  // never: the template carries the marker
  page.replace(at, marker.size(), data);
  return page;
}

}  // namespace neuroncc::profile
