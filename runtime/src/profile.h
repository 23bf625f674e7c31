// Building device traces (NTFF) and the system trace (trace.json) from the
// executor's kernel schedules.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "executor.h"
#include "neff_format.h"
#include "ntff_format.h"

namespace neuroncc::rt {

// An empty trace for `neff` simulated on `device`: header fields and the
// kernel table, no executions yet.
ntff::Profile NewProfile(const neff::Neff& neff, const neff::DeviceParams& device);

// Appends one execution (its dispatches back to back, each with its kernels)
// after the trace's current end (Profile.total_ticks), which it then advances.
void AppendExecution(const neff::Neff& neff, const std::vector<DispatchSchedule>& schedules,
                     ntff::Profile* profile);

// What a system trace keeps (nrt_sys_trace.h, nrt_inspect_config_*): events
// of disabled NeuronCores or types are not recorded, and each NeuronCore
// keeps its newest `max_events_per_nc` events (a ring buffer).
struct TraceFilter {
  static constexpr uint64_t kDefaultMaxEventsPerNc = uint64_t(1) << 20;
  uint64_t max_events_per_nc = kDefaultMaxEventsPerNc;
  std::set<uint32_t> disabled_ncs;
  std::set<std::string> disabled_types;
  bool Accepts(const std::string& type, uint32_t nc) const {
    return !disabled_ncs.count(nc) && !disabled_types.count(type);
  }
};

// The event types the runtime records, as nrt_sys_trace_get_event_types
// lists them: the host calls, a dispatch on the runtime lane, a dispatch's
// instructions on the hardware lane, and one kernel's slice within it.
// (Events an application adds, nrt_inspect_add_framework_event, have the
// type "application" and are always kept.)
const std::vector<std::string>& SystemTraceEventTypes();

// The system trace: Chrome trace-event JSON with three lanes, as the public
// profiler shows them. Times are on one session clock in picoseconds.
class SystemTrace {
 public:
  enum Lane { kFramework = 0, kRuntime = 1, kHardware = 2 };

  void SetFilter(TraceFilter filter) { filter_ = std::move(filter); }
  // `args_json` is a JSON object ("{...}") or empty. `type`: one of
  // SystemTraceEventTypes() or "application".
  void Add(Lane lane, std::string type, std::string name, uint64_t start_ps, uint64_t duration_ps,
           std::string args_json = "", uint32_t nc = 0);
  // Adds an execution's dispatches from `start_ps` on: per dispatch,
  // `nrta_execute_schedule` on the runtime lane (launch overhead +
  // instructions) and `nc_exec_running` on the hardware lane (instructions
  // only), with one nested slice per kernel (its first instruction's start
  // to its last one's end; kernels of one dispatch may overlap).
  void AddExecution(const neff::Neff& neff, const std::vector<DispatchSchedule>& schedules,
                    uint64_t profile_hash, uint64_t start_ps, uint32_t nc = 0);
  // `other_data`: extra members of the "otherData" object ("\"key\":value,..."), or empty.
  std::string Render(const std::string& other_data = "") const;
  // Moves out the oldest events, at most `max_per_nc` of each NeuronCore
  // (of NeuronCore `only_nc` alone if set), in the order they were added.
  SystemTrace Take(uint64_t max_per_nc, std::optional<uint32_t> only_nc);
  size_t size() const { return events_.size(); }

 private:
  struct Event {
    Lane lane;
    std::string type;
    std::string name;
    uint64_t start_ps;
    uint64_t duration_ps;
    std::string args_json;
    uint32_t nc;
  };
  TraceFilter filter_;
  std::deque<Event> events_;
  std::map<uint32_t, uint64_t> per_nc_;  // events held per NeuronCore
};

}  // namespace neuroncc::rt
