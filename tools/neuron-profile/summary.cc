#include "summary.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "absl/strings/str_cat.h"
#include "device_model.h"
#include "json.h"

namespace neuroncc::profile {
namespace {

constexpr const char* kNoSourceOp = "(no source op)";
constexpr const char* kEngines[4] = {"tensor", "vector", "scalar", "gpsimd"};

void SortRows(std::vector<NamedRow>* rows) {
  std::stable_sort(rows->begin(), rows->end(), [](const NamedRow& a, const NamedRow& b) {
    if (a.device_time_ps != b.device_time_ps) return a.device_time_ps > b.device_time_ps;
    return a.name < b.name;
  });
}

std::vector<NamedRow> Grouped(const std::map<std::string, NamedRow>& m) {
  std::vector<NamedRow> v;
  for (const auto& [name, row] : m) v.push_back(row);
  SortRows(&v);
  return v;
}

double Us(double ps) { return ps / 1e6; }

double Percent(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

// Matmul FLOPs over the whole device time, against the TensorEngine's peak.
double Mfu(const Summary& s) {
  double total_s = double(s.total_ps) * 1e-12;
  return total_s > 0 && s.tensor_peak_flops_per_s > 0
             ? 100.0 * double(s.tensor_engine_flops) / total_s / s.tensor_peak_flops_per_s
             : 0.0;
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string Bytes(uint64_t b) {
  if (b >= (uint64_t(1) << 30)) return Fixed(double(b) / double(uint64_t(1) << 30), 2) + " GiB";
  if (b >= (uint64_t(1) << 20)) return Fixed(double(b) / double(uint64_t(1) << 20), 2) + " MiB";
  if (b >= (uint64_t(1) << 10)) return Fixed(double(b) / double(uint64_t(1) << 10), 2) + " KiB";
  return absl::StrCat(b, " B");
}

void Table(std::string* out, const std::string& title, const std::vector<NamedRow>& rows,
           uint64_t total_ps) {
  size_t w = std::string("Name").size();
  for (const NamedRow& r : rows) w = std::max(w, r.name.size());
  const size_t tw = 23, pw = 14, cw = 11;
  std::string rule = std::string(w, '-') + "  " + std::string(tw, '-') + "  " + std::string(pw, '-') +
                     "  " + std::string(cw, '-') + "\n";
  char line[1024];
  absl::StrAppend(out, title, "\n", rule);
  std::snprintf(line, sizeof(line), "%-*s  %*s  %*s  %*s\n", int(w), "Name", int(tw),
                "Self Device Time (us)", int(pw), "Self Device %", int(cw), "# of Calls");
  absl::StrAppend(out, line, rule);
  for (const NamedRow& r : rows) {
    std::snprintf(line, sizeof(line), "%-*s  %*s  %*s  %*llu\n", int(w), r.name.c_str(), int(tw),
                  Fixed(Us(r.device_time_ps), 3).c_str(), int(pw),
                  (Fixed(Percent(r.device_time_ps, double(total_ps)), 2) + "%").c_str(), int(cw),
                  static_cast<unsigned long long>(r.calls));
    *out += line;
  }
  absl::StrAppend(out, rule, "Self Device Time total: ", Fixed(Us(double(total_ps)), 3), " us\n");
}

// Splits a dispatch's device time among its kernel spans, so that the
// kernel rows add up to the total although kernels of one dispatch overlap:
// every instant of the dispatch's instruction phase is shared equally by the
// kernels that have an instruction running then; the launch overhead, and any
// instant with nothing running, are spread in proportion to those shares
// (equally if every share is zero). With one kernel per dispatch this is the
// kernel's whole dispatch.
template <typename ToPs>
void KernelTimes(const ntff::Profile& p, const ntff::DispatchSpan& d, const std::vector<int>& instructions,
                 const ToPs& ps, std::vector<uint64_t>* time, std::vector<uint64_t>* launch) {
  const uint32_t first = d.first_kernel_span(), n = d.kernel_span_count();
  std::vector<double> share(n, 0.0);
  std::vector<std::pair<uint64_t, int64_t>> events;  // (time, +/-(kernel + 1))
  for (int i : instructions) {
    const ntff::InstructionEvent& e = p.instructions(i);
    const int64_t k = int64_t(e.span() - first) + 1;
    events.push_back({ps(e.start()), k});
    events.push_back({ps(e.end()), -k});
  }
  std::sort(events.begin(), events.end());
  std::vector<uint32_t> running(n, 0);
  uint32_t active = 0;
  uint64_t at = ps(d.launch_end());
  for (const auto& [t, ev] : events) {
    if (t > at && active > 0)
      for (uint32_t k = 0; k < n; ++k)
        if (running[k]) share[k] += double(t - at) / active;
    at = std::max(at, t);
    uint32_t k = uint32_t((ev > 0 ? ev : -ev) - 1);
    if (ev > 0) {
      if (running[k]++ == 0) ++active;
    } else if (--running[k] == 0) {
      --active;
    }
  }
  double covered = 0;
  for (double x : share) covered += x;
  const uint64_t total = ps(d.end()) - ps(d.start());
  const uint64_t overhead = ps(d.launch_end()) - ps(d.start());
  // Integer shares that add up exactly: the last kernel takes the remainder.
  uint64_t given = 0, given_launch = 0;
  for (uint32_t k = 0; k < n; ++k) {
    double f = covered > 0 ? share[k] / covered : 1.0 / n;
    uint64_t t = k + 1 == n ? total - given : std::min<uint64_t>(total - given, uint64_t(double(total) * f + 0.5));
    uint64_t l = k + 1 == n ? overhead - given_launch
                            : std::min<uint64_t>(overhead - given_launch, uint64_t(double(overhead) * f + 0.5));
    (*time)[first + k] = t;
    (*launch)[first + k] = l;
    given += t;
    given_launch += l;
  }
}

}  // namespace

std::string KernelBound(const KernelRow& k, uint32_t dma_queues, double hbm_gbps_per_core) {
  if (k.device_time_ps == 0) return "waiting on dependencies";
  if (2 * k.launch_overhead_ps >= k.device_time_ps) return "launch overhead";
  const double span = double(std::max<uint64_t>(k.span_ps, 1));
  double engine = 0;
  for (uint64_t busy : k.engine_busy_ps) engine = std::max(engine, double(busy) / span);
  double occupancy = dma_queues ? double(k.dma_queue_busy_ps) / (span * dma_queues) : 0.0;
  double bandwidth = hbm_gbps_per_core > 0
                         ? double(k.hbm_read_bytes + k.hbm_write_bytes) / (span * 1e-12) / (hbm_gbps_per_core * 1e9)
                         : 0.0;
  double memory = std::max(occupancy, bandwidth);
  if (engine < 0.5 && memory < 0.5) return "waiting on dependencies";
  return engine >= memory ? "compute" : "memory";
}

Summary Summarize(const ntff::Profile& p) {
  Summary s;
  s.neff_name = p.neff_name();
  s.neff_hash = p.neff_hash();
  s.target = p.target();
  s.execution_count = p.execution_count();
  s.kernels_per_execution = uint64_t(p.kernel_info_size());
  s.dispatch_count = uint64_t(p.dispatch_spans_size());
  s.kernel_span_count = uint64_t(p.kernel_spans_size());
  s.hbm_gbps_per_core = p.device().hbm_gbps_per_core();
  s.dispatch_overhead_ns = p.device().dispatch_overhead_ns();
  s.dma_queues = p.device().dma_queues();
  // The 128 x 128 PE array does one multiply-accumulate per PE per cycle on
  // BF16/F16 (trn1: 2 * 128^2 * 2.8 GHz = 91.8 TFLOPS, the public ~92).
  s.tensor_peak_flops_per_s = 2.0 * double(p.device().partitions()) * double(p.device().partitions()) *
                              p.device().tensor_ghz() * 1e9;
  // Ticks are picoseconds for every trace this runtime writes; convert
  // anyway so a trace with another time base reads right.
  const double to_ps = 1000.0 / double(p.ticks_per_nanosec());
  auto ps = [&](uint64_t ticks) { return uint64_t(double(ticks) * to_ps + 0.5); };
  s.total_ps = ps(p.total_ticks());

  for (int k = 0; k < p.kernel_info_size(); ++k) {
    KernelRow row;
    row.index = uint32_t(k);
    row.name = p.kernel_info(k).name();
    row.source_ops.assign(p.kernel_info(k).source_ops().begin(), p.kernel_info(k).source_ops().end());
    s.kernels.push_back(row);
  }

  // Per span: busy time of the instructions tagged with each source op.
  std::vector<std::vector<double>> tagged(size_t(p.kernel_spans_size()));
  for (int i = 0; i < p.kernel_spans_size(); ++i)
    tagged[size_t(i)].assign(size_t(p.kernel_info(int(p.kernel_spans(i).kernel())).source_ops_size()), 0.0);
  std::vector<std::pair<uint64_t, uint64_t>> dma_intervals;
  for (const ntff::InstructionEvent& e : p.instructions()) {
    uint64_t busy = ps(e.end()) - ps(e.start());
    KernelRow& kr = s.kernels[p.kernel_spans(int(e.span())).kernel()];
    if (e.source_op() >= 0) tagged[e.span()][size_t(e.source_op())] += double(busy);
    if (e.queue() < neff::kComputeQueues) {
      s.engine_busy_ps[e.queue()] += busy;
      kr.engine_busy_ps[e.queue()] += busy;
      if (e.opcode() == neff::MATMUL) {
        ++s.matmul_count;
        s.tensor_engine_flops += e.flops();
        kr.tensor_engine_flops += e.flops();
      } else {
        s.elementwise_ops += e.flops();
        kr.elementwise_ops += e.flops();
      }
    } else {
      kr.dma_queue_busy_ps += busy;
      dma_intervals.push_back({ps(e.start()), ps(e.end())});
      ++s.dma_transfer_count;
      bool load = neff::IsDmaRead(e.opcode());  // dma_load, dma_gather
      (load ? s.hbm_read_bytes : s.hbm_write_bytes) += e.bytes();
      (load ? kr.hbm_read_bytes : kr.hbm_write_bytes) += e.bytes();
    }
  }
  std::sort(dma_intervals.begin(), dma_intervals.end());
  uint64_t cur_start = 0, cur_end = 0;
  bool open = false;
  for (const auto& [a, b] : dma_intervals) {
    if (open && a <= cur_end) {
      cur_end = std::max(cur_end, b);
      continue;
    }
    if (open) s.dma_busy_ps += cur_end - cur_start;
    cur_start = a;
    cur_end = b;
    open = true;
  }
  if (open) s.dma_busy_ps += cur_end - cur_start;

  // Each kernel span's share of its dispatch (KernelTimes), its launch
  // overhead included.
  std::vector<uint64_t> span_time(size_t(p.kernel_spans_size()), 0), span_launch(span_time);
  std::vector<std::vector<int>> instructions_of(size_t(p.dispatch_spans_size()));
  for (int i = 0; i < p.instructions_size(); ++i)
    instructions_of[p.kernel_spans(int(p.instructions(i).span())).dispatch()].push_back(i);
  for (int d = 0; d < p.dispatch_spans_size(); ++d) {
    const ntff::DispatchSpan& ds = p.dispatch_spans(d);
    s.launch_overhead_ps += ps(ds.launch_end()) - ps(ds.start());
    KernelTimes(p, ds, instructions_of[size_t(d)], ps, &span_time, &span_launch);
  }
  std::map<std::string, NamedRow> by_kernel_name, by_op;
  for (int i = 0; i < p.kernel_spans_size(); ++i) {
    const ntff::KernelSpan& span = p.kernel_spans(i);
    const ntff::KernelInfo& info = p.kernel_info(int(span.kernel()));
    KernelRow& kr = s.kernels[span.kernel()];
    uint64_t t = span_time[size_t(i)];
    uint64_t launch = span_launch[size_t(i)];
    kr.calls += 1;
    kr.device_time_ps += t;
    kr.launch_overhead_ps += launch;
    kr.instruction_count += span.instruction_count();
    kr.span_ps += ps(span.end()) - ps(span.start());
    s.instruction_count += span.instruction_count();
    NamedRow& kn = by_kernel_name[info.name()];
    kn.name = info.name();
    kn.device_time_ps += double(t);
    kn.calls += 1;

    const int n = info.source_ops_size();
    if (n == 0) {
      NamedRow& r = by_op[kNoSourceOp];
      r.name = kNoSourceOp;
      r.device_time_ps += double(t);
      r.calls += 1;
      continue;
    }
    const std::vector<double>& w = tagged[size_t(i)];
    double total_w = 0;
    for (double x : w) total_w += x;
    for (int j = 0; j < n; ++j) {
      double share = n == 1 ? 1.0 : total_w > 0 ? w[size_t(j)] / total_w : 1.0 / n;
      NamedRow& r = by_op[info.source_ops(j)];
      r.name = info.source_ops(j);
      r.device_time_ps += double(t) * share;
      r.calls += 1;
    }
  }
  for (KernelRow& kr : s.kernels) kr.bound = KernelBound(kr, s.dma_queues, s.hbm_gbps_per_core);
  s.kernel_names = Grouped(by_kernel_name);
  s.aten_ops = Grouped(by_op);
  return s;
}

std::string RenderText(const Summary& s) {
  std::string out;
  absl::StrAppend(&out, "NEFF '", s.neff_name, "' (profile hash ", s.neff_hash, ", target ", s.target,
                  "): ", s.execution_count, s.execution_count == 1 ? " execution" : " executions", ", ",
                  s.kernels_per_execution, s.kernels_per_execution == 1 ? " kernel" : " kernels",
                  " each\n");
  absl::StrAppend(&out, "Device time: ", Fixed(Us(double(s.total_ps)), 3), " us (", s.dispatch_count,
                  s.dispatch_count == 1 ? " dispatch" : " dispatches", " running ", s.kernel_span_count,
                  s.kernel_span_count == 1 ? " kernel" : " kernels", "; modeled launch overhead ",
                  Fixed(Us(double(s.launch_overhead_ps)), 3), " us at ",
                  Fixed(s.dispatch_overhead_ns / 1000, 3), " us per dispatch)\n");
  absl::StrAppend(&out, "Engines active:");
  for (int e = 0; e < 4; ++e)
    absl::StrAppend(&out, " ", kEngines[e], " ", Fixed(Percent(double(s.engine_busy_ps[e]), double(s.total_ps)), 2),
                    "%", e < 3 ? "," : "");
  absl::StrAppend(&out, "; DMA ", Fixed(Percent(double(s.dma_busy_ps), double(s.total_ps)), 2), "%\n");
  absl::StrAppend(&out, "HBM traffic: ", Bytes(s.hbm_read_bytes), " read, ", Bytes(s.hbm_write_bytes),
                  " written in ", s.dma_transfer_count, " DMA transfers\n");
  if (s.matmul_count > 0) {
    double total_s = double(s.total_ps) * 1e-12;
    absl::StrAppend(&out, "TensorEngine: ", s.matmul_count, s.matmul_count == 1 ? " matmul, " : " matmuls, ",
                    Fixed(double(s.tensor_engine_flops) * 1e-9, 3), " GFLOP, ",
                    Fixed(total_s > 0 ? double(s.tensor_engine_flops) / total_s * 1e-12 : 0, 3),
                    " TFLOPS achieved (MFU ", Fixed(Mfu(s), 2), "% of the bf16 peak)\n");
  }
  out += "\n";
  Table(&out, "Kernels", s.kernel_names, s.total_ps);
  out += "\n";
  Table(&out, "ATen ops (kernel time split by the engine time of each op's instructions)", s.aten_ops,
        s.total_ps);
  return out;
}

std::string RenderSummaryJson(const Summary& s) {
  using json::Number;
  using json::Quote;
  double total_s = double(s.total_ps) * 1e-12;
  uint64_t bytes = s.hbm_read_bytes + s.hbm_write_bytes;
  std::string out = "{\n";
  absl::StrAppend(&out, "  \"neff_name\": ", Quote(s.neff_name), ",\n");
  absl::StrAppend(&out, "  \"neff_hash\": \"", s.neff_hash, "\",\n");
  absl::StrAppend(&out, "  \"target\": ", Quote(s.target), ",\n");
  absl::StrAppend(&out, "  \"execution_count\": ", s.execution_count, ",\n");
  absl::StrAppend(&out, "  \"total_time\": ", Number(total_s, 12), ",\n");
  absl::StrAppend(&out, "  \"total_time_us\": ", Number(Us(double(s.total_ps)), 6), ",\n");
  absl::StrAppend(&out, "  \"kernel_count\": ", s.kernels_per_execution, ",\n");
  absl::StrAppend(&out, "  \"dispatch_count\": ", s.dispatch_count, ",\n");
  absl::StrAppend(&out, "  \"kernel_executions\": ", s.kernel_span_count, ",\n");
  absl::StrAppend(&out, "  \"launch_overhead_time\": ", Number(double(s.launch_overhead_ps) * 1e-12, 12), ",\n");
  absl::StrAppend(&out, "  \"dispatch_overhead_ns\": ", Number(s.dispatch_overhead_ns, 6), ",\n");
  absl::StrAppend(&out, "  \"tensor_peak_flops_per_s\": ", Number(s.tensor_peak_flops_per_s, 6), ",\n");
  absl::StrAppend(&out, "  \"hbm_gbps_per_core\": ", Number(s.hbm_gbps_per_core, 6), ",\n");
  absl::StrAppend(&out, "  \"instruction_count\": ", s.instruction_count, ",\n");
  absl::StrAppend(&out, "  \"hbm_read_bytes\": ", s.hbm_read_bytes, ",\n");
  absl::StrAppend(&out, "  \"hbm_write_bytes\": ", s.hbm_write_bytes, ",\n");
  absl::StrAppend(&out, "  \"dma_transfer_count\": ", s.dma_transfer_count, ",\n");
  for (int e = 0; e < 4; ++e)
    absl::StrAppend(&out, "  \"", kEngines[e], "_engine_active_time_percent\": ",
                    Number(Percent(double(s.engine_busy_ps[e]), double(s.total_ps)), 4), ",\n");
  absl::StrAppend(&out, "  \"dma_active_time_percent\": ",
                  Number(Percent(double(s.dma_busy_ps), double(s.total_ps)), 4), ",\n");
  // Achieved HBM bandwidth over the whole device time, against the core's share of peak.
  double peak_bytes_per_s = s.hbm_gbps_per_core * 1e9;
  absl::StrAppend(&out, "  \"mbu_estimated_percent\": ",
                  Number(total_s > 0 && peak_bytes_per_s > 0 ? 100.0 * double(bytes) / total_s / peak_bytes_per_s : 0, 4),
                  ",\n");
  absl::StrAppend(&out, "  \"mfu_estimated_percent\": ", Number(Mfu(s), 4), ",\n");
  absl::StrAppend(&out, "  \"matmul_count\": ", s.matmul_count, ",\n");
  absl::StrAppend(&out, "  \"tensor_engine_flops\": ", s.tensor_engine_flops, ",\n");
  // Matmul FLOPs per byte of HBM traffic (the roofline x-axis).
  absl::StrAppend(&out, "  \"mm_arithmetic_intensity\": ",
                  Number(bytes ? double(s.tensor_engine_flops) / double(bytes) : 0, 6), ",\n");
  absl::StrAppend(&out, "  \"elementwise_ops\": ", s.elementwise_ops, ",\n");
  absl::StrAppend(&out, "  \"arithmetic_intensity\": ",
                  Number(bytes ? double(s.elementwise_ops) / double(bytes) : 0, 6), ",\n");
  absl::StrAppend(&out, "  \"kernels\": [");
  for (size_t i = 0; i < s.kernels.size(); ++i) {
    const KernelRow& k = s.kernels[i];
    std::string ops;
    for (size_t j = 0; j < k.source_ops.size(); ++j) absl::StrAppend(&ops, j ? ", " : "", Quote(k.source_ops[j]));
    absl::StrAppend(&out, i ? "," : "", "\n    {\"index\": ", k.index, ", \"name\": ", Quote(k.name),
                    ", \"source_ops\": [", ops, "], \"calls\": ", k.calls,
                    ", \"device_time_us\": ", Number(Us(double(k.device_time_ps)), 6),
                    ", \"device_time_percent\": ", Number(Percent(double(k.device_time_ps), double(s.total_ps)), 4),
                    ", \"launch_overhead_us\": ", Number(Us(double(k.launch_overhead_ps)), 6),
                    ", \"instruction_count\": ", k.instruction_count,
                    ", \"hbm_read_bytes\": ", k.hbm_read_bytes, ", \"hbm_write_bytes\": ", k.hbm_write_bytes,
                    ", \"active_us\": ", Number(Us(double(k.span_ps)), 6),
                    ", \"tensor_engine_flops\": ", k.tensor_engine_flops, ", \"elementwise_ops\": ", k.elementwise_ops,
                    ", \"bound\": ", Quote(k.bound), "}");
  }
  absl::StrAppend(&out, "\n  ],\n  \"aten_ops\": [");
  for (size_t i = 0; i < s.aten_ops.size(); ++i) {
    const NamedRow& r = s.aten_ops[i];
    absl::StrAppend(&out, i ? "," : "", "\n    {\"name\": ", Quote(r.name), ", \"calls\": ", r.calls,
                    ", \"device_time_us\": ", Number(Us(r.device_time_ps), 6), ", \"device_time_percent\": ",
                    Number(Percent(r.device_time_ps, double(s.total_ps)), 4), "}");
  }
  absl::StrAppend(&out, "\n  ]\n}\n");
  return out;
}

std::string RenderEventsJson(const ntff::Profile& p) {
  using json::Number;
  using json::Quote;
  const double us = 1.0 / (1000.0 * double(p.ticks_per_nanosec()));
  std::string out = "{\n";
  absl::StrAppend(&out, "  \"neff_name\": ", Quote(p.neff_name()), ",\n  \"neff_hash\": \"", p.neff_hash(),
                  "\",\n  \"target\": ", Quote(p.target()), ",\n  \"ticks_per_nanosec\": ", p.ticks_per_nanosec(),
                  ",\n  \"total_time_us\": ", Number(double(p.total_ticks()) * us, 6), ",\n");
  const ntff::DeviceParams& d = p.device();
  absl::StrAppend(&out, "  \"device\": {\"name\": ", Quote(d.name()), ", \"partitions\": ", d.partitions(),
                  ", \"sbuf_bytes_per_partition\": ", d.sbuf_bytes_per_partition(),
                  ", \"tensor_ghz\": ", Number(d.tensor_ghz()), ", \"vector_ghz\": ", Number(d.vector_ghz()),
                  ", \"scalar_ghz\": ", Number(d.scalar_ghz()), ", \"gpsimd_ghz\": ", Number(d.gpsimd_ghz()),
                  ", \"dma_queues\": ", d.dma_queues(), ", \"dma_queue_gbps\": ", Number(d.dma_queue_gbps()),
                  ", \"hbm_gbps_per_core\": ", Number(d.hbm_gbps_per_core()),
                  ", \"dma_fixed_ns\": ", Number(d.dma_fixed_ns()), ", \"dma_run_ns\": ", Number(d.dma_run_ns()),
                  ", \"psum_bytes_per_partition\": ", d.psum_bytes_per_partition(), ", \"sbuf_access_cycles\": ",
                  d.sbuf_access_cycles(), ", \"dispatch_overhead_ns\": ", Number(d.dispatch_overhead_ns()),
                  "},\n");
  absl::StrAppend(&out, "  \"dispatch_spans\": [");
  for (int i = 0; i < p.dispatch_spans_size(); ++i) {
    const ntff::DispatchSpan& d = p.dispatch_spans(i);
    absl::StrAppend(&out, i ? "," : "", "\n    {\"execution\": ", d.execution(), ", \"start_us\": ",
                    Number(double(d.start()) * us), ", \"launch_end_us\": ", Number(double(d.launch_end()) * us),
                    ", \"end_us\": ", Number(double(d.end()) * us), ", \"first_kernel_span\": ",
                    d.first_kernel_span(), ", \"kernel_span_count\": ", d.kernel_span_count(), "}");
  }
  absl::StrAppend(&out, "\n  ],\n  \"kernel_spans\": [");
  for (int i = 0; i < p.kernel_spans_size(); ++i) {
    const ntff::KernelSpan& s = p.kernel_spans(i);
    absl::StrAppend(&out, i ? "," : "", "\n    {\"kernel\": ", s.kernel(), ", \"name\": ",
                    Quote(p.kernel_info(int(s.kernel())).name()), ", \"execution\": ", s.execution(),
                    ", \"dispatch\": ", s.dispatch(), ", \"start_us\": ", Number(double(s.start()) * us),
                    ", \"end_us\": ", Number(double(s.end()) * us), "}");
  }
  absl::StrAppend(&out, "\n  ],\n  \"instructions\": [");
  for (int i = 0; i < p.instructions_size(); ++i) {
    const ntff::InstructionEvent& e = p.instructions(i);
    const ntff::KernelInfo& k = p.kernel_info(int(p.kernel_spans(int(e.span())).kernel()));
    absl::StrAppend(&out, i ? "," : "", "\n    {\"span\": ", e.span(), ", \"instruction\": ", e.instruction(),
                    ", \"queue\": \"", neff::QueueName(e.queue()), "\", \"opcode\": \"",
                    neff::OpcodeName(e.opcode()), "\", \"start_us\": ", Number(double(e.start()) * us),
                    ", \"end_us\": ", Number(double(e.end()) * us), ", \"source_op\": ",
                    e.source_op() >= 0 ? Quote(k.source_ops(e.source_op())) : std::string("null"),
                    ", \"bytes\": ", e.bytes(), ", \"flops\": ", e.flops(), "}");
  }
  absl::StrAppend(&out, "\n  ],\n  \"dma\": [");
  for (int i = 0; i < p.dma_size(); ++i) {
    const ntff::DmaEvent& d2 = p.dma(i);
    absl::StrAppend(&out, i ? "," : "", "\n    {\"span\": ", d2.span(), ", \"instruction\": ", d2.instruction(),
                    ", \"dma_queue\": ", d2.dma_queue(), ", \"direction\": \"",
                    d2.direction() == ntff::HBM_TO_SBUF ? "hbm_to_sbuf" : "sbuf_to_hbm",
                    "\", \"tensor\": ", d2.tensor(), ", \"bytes\": ", d2.bytes(), ", \"start_us\": ",
                    Number(double(d2.start()) * us), ", \"end_us\": ", Number(double(d2.end()) * us), "}");
  }
  absl::StrAppend(&out, "\n  ]\n}\n");
  return out;
}

std::string RenderPerfetto(const ntff::Profile& p) {
  using json::Number;
  using json::Quote;
  const double us = 1.0 / (1000.0 * double(p.ticks_per_nanosec()));
  std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  absl::StrAppend(&out, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":",
                  Quote(absl::StrCat("NeuronCore (", p.target(), "): ", p.neff_name())), "}}");
  // tid 0: dispatches; tid 1 + queue: each engine / DMA queue; tid 100 + n:
  // kernels, on as many tracks as it takes to keep overlapping kernels of one
  // dispatch apart.
  absl::StrAppend(&out, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"dispatches\"}}");
  std::vector<bool> used(neff::kMaxQueues, false);
  for (const ntff::InstructionEvent& e : p.instructions()) used[e.queue()] = true;
  for (uint32_t q = 0; q < neff::kMaxQueues; ++q)
    if (used[q])
      absl::StrAppend(&out, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":", q + 1,
                      ",\"args\":{\"name\":\"", neff::QueueName(q), "\"}}");
  for (int i = 0; i < p.dispatch_spans_size(); ++i) {
    const ntff::DispatchSpan& d = p.dispatch_spans(i);
    absl::StrAppend(&out, ",\n{\"name\":\"dispatch\",\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":",
                    Number(double(d.start()) * us), ",\"dur\":", Number(double(d.end() - d.start()) * us),
                    ",\"args\":{\"execution\":", d.execution(), ",\"kernels\":", d.kernel_span_count(),
                    ",\"launch_overhead_us\":", Number(double(d.launch_end() - d.start()) * us), "}}");
  }
  std::vector<uint64_t> track_end;  // per kernel track, the end of its last span
  for (const ntff::KernelSpan& s : p.kernel_spans()) {
    const ntff::KernelInfo& k = p.kernel_info(int(s.kernel()));
    size_t track = 0;
    while (track < track_end.size() && track_end[track] > s.start()) ++track;
    if (track == track_end.size()) {
      track_end.push_back(0);
      absl::StrAppend(&out, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":", 100 + track,
                      ",\"args\":{\"name\":\"kernels", track ? absl::StrCat(" ", track + 1) : "", "\"}}");
    }
    track_end[track] = s.end();
    absl::StrAppend(&out, ",\n{\"name\":", Quote(k.name()), ",\"ph\":\"X\",\"pid\":1,\"tid\":", 100 + track,
                    ",\"ts\":", Number(double(s.start()) * us), ",\"dur\":",
                    Number(double(s.end() - s.start()) * us), ",\"args\":{\"execution\":", s.execution(),
                    ",\"dispatch\":", s.dispatch(), "}}");
  }
  for (const ntff::InstructionEvent& e : p.instructions()) {
    const ntff::KernelInfo& k = p.kernel_info(int(p.kernel_spans(int(e.span())).kernel()));
    std::string args = absl::StrCat("{\"kernel\":", Quote(k.name()), ",\"instruction\":", e.instruction());
    if (e.source_op() >= 0) absl::StrAppend(&args, ",\"source_op\":", Quote(k.source_ops(e.source_op())));
    if (e.bytes()) absl::StrAppend(&args, ",\"bytes\":", e.bytes());
    if (e.flops()) absl::StrAppend(&args, ",\"flops\":", e.flops());
    args += "}";
    absl::StrAppend(&out, ",\n{\"name\":\"", neff::OpcodeName(e.opcode()), "\",\"ph\":\"X\",\"pid\":1,\"tid\":",
                    e.queue() + 1, ",\"ts\":", Number(double(e.start()) * us), ",\"dur\":",
                    Number(double(e.end() - e.start()) * us), ",\"args\":", args, "}");
  }
  out += "\n]}\n";
  return out;
}

}  // namespace neuroncc::profile
