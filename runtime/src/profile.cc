#include "profile.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "json.h"

namespace neuroncc::rt {

ntff::Profile NewProfile(const neff::Neff& neff, const neff::DeviceParams& device) {
  ntff::Profile p;
  p.set_format_version(ntff::kNtffFormatVersion);
  p.set_ticks_per_nanosec(neff::kTicksPerNanosecond);
  ntff::FillDeviceParams(device, p.mutable_device());
  p.set_neff_hash(neff::ProfileHash(neff.header));
  p.set_neff_name(neff.executable.name().empty() ? neff.header.name : neff.executable.name());
  p.set_target(neff.executable.target());
  for (const neff::Kernel& k : neff.executable.kernels()) {
    ntff::KernelInfo* info = p.add_kernel_info();
    info->set_name(k.name());
    for (const std::string& op : k.source_ops()) info->add_source_ops(op);
  }
  return p;
}

void AppendExecution(const neff::Neff& neff, const std::vector<DispatchSchedule>& schedules,
                     ntff::Profile* profile) {
  const neff::Executable& exe = neff.executable;
  uint32_t execution = profile->execution_count();
  uint64_t t = profile->total_ticks();
  for (const DispatchSchedule& s : schedules) {
    const uint32_t dispatch_index = uint32_t(profile->dispatch_spans_size());
    const uint32_t first_span = uint32_t(profile->kernel_spans_size());
    ntff::DispatchSpan* dispatch = profile->add_dispatch_spans();
    dispatch->set_execution(execution);
    dispatch->set_start(t);
    const uint64_t base = t + s.launch_overhead_ps;
    dispatch->set_launch_end(base);
    dispatch->set_end(base + s.makespan_ps);
    dispatch->set_first_kernel_span(first_span);
    dispatch->set_kernel_span_count(uint32_t(s.kernels.size()));
    for (size_t j = 0; j < s.kernels.size(); ++j) {
      const KernelExtent& x = s.kernels[j];
      ntff::KernelSpan* span = profile->add_kernel_spans();
      span->set_kernel(uint32_t(s.first_kernel + int(j)));
      span->set_execution(execution);
      span->set_dispatch(dispatch_index);
      span->set_start(base + x.start);
      span->set_end(base + x.end);
      span->set_instruction_count(x.instruction_count);
    }
    // Events grouped by kernel span, each group in start order.
    std::vector<std::vector<const ScheduledInstruction*>> by_kernel(s.kernels.size());
    for (const ScheduledInstruction& si : s.order) by_kernel[si.kernel - uint32_t(s.first_kernel)].push_back(&si);
    for (size_t j = 0; j < s.kernels.size(); ++j) {
      const uint32_t span_index = first_span + uint32_t(j);
      const neff::Kernel& kernel = exe.kernels(s.first_kernel + int(j));
      for (const ScheduledInstruction* si : by_kernel[j]) {
        const neff::Instruction& inst = kernel.instructions(int(si->instruction));
        ntff::InstructionEvent* e = profile->add_instructions();
        e->set_span(span_index);
        e->set_instruction(si->instruction);
        e->set_queue(si->queue);
        e->set_opcode(inst.opcode());
        e->set_start(base + si->start);
        e->set_end(base + si->end);
        e->set_source_op(inst.source_op());
        if (neff::IsDma(inst.opcode())) {
          // HBM traffic: a gather's bytes include the indices it reads.
          uint64_t bytes = neff::DmaHbmBytes(inst, &exe);
          e->set_bytes(bytes);
          ntff::DmaEvent* d = profile->add_dma();
          d->set_span(span_index);
          d->set_instruction(si->instruction);
          d->set_dma_queue(inst.queue());
          d->set_direction(neff::IsDmaRead(inst.opcode()) ? ntff::HBM_TO_SBUF : ntff::SBUF_TO_HBM);
          d->set_tensor(inst.hbm().tensor());
          d->set_bytes(bytes);
          d->set_start(base + si->start);
          d->set_end(base + si->end);
        } else if (inst.opcode() == neff::MATMUL) {
          e->set_flops(neff::MatmulFlops(inst));  // 2 * K * M * N
        } else {
          // Elements processed: one operation per input element (per output
          // element for iota, which has no input).
          const neff::TileRef& tile = inst.opcode() == neff::IOTA ? inst.out() : inst.in0();
          e->set_flops(uint64_t(tile.partitions()) * tile.num_elements());
        }
      }
    }
    t = dispatch->end();
  }
  profile->set_total_ticks(t);
  profile->set_execution_count(execution + 1);
}

const std::vector<std::string>& SystemTraceEventTypes() {
  static const std::vector<std::string> kTypes = {"nrt_load",        "nrt_unload",      "nrt_execute",
                                                  "nrta_execute_schedule", "nc_exec_running", "kernel"};
  return kTypes;
}

void SystemTrace::Add(Lane lane, std::string type, std::string name, uint64_t start_ps, uint64_t duration_ps,
                      std::string args_json, uint32_t nc) {
  if (!filter_.Accepts(type, nc)) return;
  uint64_t& held = per_nc_[nc];
  if (held >= filter_.max_events_per_nc) {
    // A full ring buffer drops its NeuronCore's oldest event.
    auto oldest = std::find_if(events_.begin(), events_.end(), [&](const Event& e) { return e.nc == nc; });
    if (oldest == events_.end()) return;  // (a limit of zero keeps nothing)
    events_.erase(oldest);
    --held;
  }
  events_.push_back({lane, std::move(type), std::move(name), start_ps, duration_ps, std::move(args_json), nc});
  ++held;
}

SystemTrace SystemTrace::Take(uint64_t max_per_nc, std::optional<uint32_t> only_nc) {
  SystemTrace taken;
  std::map<uint32_t, uint64_t> count;
  std::deque<Event> kept;
  for (Event& e : events_) {
    if ((!only_nc || e.nc == *only_nc) && count[e.nc] < max_per_nc) {
      ++count[e.nc];
      --per_nc_[e.nc];
      taken.events_.push_back(std::move(e));
    } else {
      kept.push_back(std::move(e));
    }
  }
  events_ = std::move(kept);
  return taken;
}

void SystemTrace::AddExecution(const neff::Neff& neff, const std::vector<DispatchSchedule>& schedules,
                               uint64_t profile_hash, uint64_t start_ps, uint32_t nc) {
  uint64_t t = start_ps;
  for (size_t d = 0; d < schedules.size(); ++d) {
    const DispatchSchedule& s = schedules[d];
    const uint64_t base = t + s.launch_overhead_ps;
    const std::string& first_name = neff.executable.kernels(s.first_kernel).name();
    Add(kRuntime, "nrta_execute_schedule", "nrta_execute_schedule", t, s.device_time_ps(),
        absl::StrCat("{\"dispatch\":", d, ",\"kernels\":", s.kernels.size(), ",\"first_kernel\":",
                     json::Quote(first_name), ",\"neff_hash\":\"", profile_hash, "\"}"),
        nc);
    Add(kHardware, "nc_exec_running", "nc_exec_running", base, s.makespan_ps,
        absl::StrCat("{\"dispatch\":", d, ",\"kernels\":", s.kernels.size(), ",\"neff_hash\":\"",
                     profile_hash, "\"}"),
        nc);
    // Slices on one track must nest, but the kernels of a dispatch may
    // overlap, so each slice starts where the previous one ends if that is
    // later than its first instruction; the args keep the exact extent.
    uint64_t previous_end = base;
    for (size_t j = 0; j < s.kernels.size(); ++j) {
      const int k = s.first_kernel + int(j);
      const KernelExtent& x = s.kernels[j];
      const uint64_t start = std::max(base + x.start, previous_end);
      const uint64_t end = std::max(start, base + x.end);
      previous_end = end;
      Add(kHardware, "kernel", neff.executable.kernels(k).name(), start, end - start,
          absl::StrCat("{\"kernel_index\":", k, ",\"dispatch\":", d, ",\"instructions\":",
                       x.instruction_count, ",\"first_instruction_start_us\":",
                       json::Number(double(base + x.start) / 1e6), ",\"last_instruction_end_us\":",
                       json::Number(double(base + x.end) / 1e6), "}"),
          nc);
    }
    t += s.device_time_ps();
  }
}

std::string SystemTrace::Render(const std::string& other_data) const {
  static const char* kLaneNames[] = {"framework", "runtime", "hardware"};
  std::string out = absl::StrCat(
      "{\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"producer\":\"neuron-cc runtime\","
      "\"clock\":\"session clock: host time since the session began, each execution lasting "
      "its modeled device time\"",
      other_data.empty() ? "" : ",", other_data, "},\n\"traceEvents\":[\n");
  bool first = true;
  auto sep = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  for (int lane = 0; lane < 3; ++lane) {
    sep();
    absl::StrAppend(&out, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":", lane + 1,
                    ",\"args\":{\"name\":\"", kLaneNames[lane], "\"}}");
    sep();
    absl::StrAppend(&out, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":", lane + 1,
                    ",\"args\":{\"sort_index\":", lane, "}}");
    sep();
    absl::StrAppend(&out, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":", lane + 1,
                    ",\"tid\":0,\"args\":{\"name\":\"", lane == 0 ? "host" : "vnc 0", "\"}}");
  }
  for (const Event& e : events_) {
    sep();
    // Chrome trace timestamps are microseconds; 6 decimals keep picoseconds.
    absl::StrAppend(&out, "{\"name\":", json::Quote(e.name), ",\"cat\":\"", kLaneNames[e.lane],
                    "\",\"ph\":\"X\",\"pid\":", int(e.lane) + 1, ",\"tid\":", e.nc, ",\"ts\":",
                    json::Number(double(e.start_ps) / 1e6), ",\"dur\":",
                    json::Number(double(e.duration_ps) / 1e6));
    if (!e.args_json.empty()) absl::StrAppend(&out, ",\"args\":", e.args_json);
    out += "}";
  }
  out += "\n]}\n";
  return out;
}

}  // namespace neuroncc::rt
