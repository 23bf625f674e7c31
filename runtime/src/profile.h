// Building device traces (NTFF) and the system trace (trace.json) from the
// executor's kernel schedules.
#pragma once

#include <cstdint>
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

// The system trace: Chrome trace-event JSON with three lanes, as the public
// profiler shows them. Times are on one session clock in picoseconds.
class SystemTrace {
 public:
  enum Lane { kFramework = 0, kRuntime = 1, kHardware = 2 };

  // `args_json` is a JSON object ("{...}") or empty.
  void Add(Lane lane, std::string name, uint64_t start_ps, uint64_t duration_ps,
           std::string args_json = "");
  // Adds an execution's dispatches from `start_ps` on: per dispatch,
  // `nrta_execute_schedule` on the runtime lane (launch overhead +
  // instructions) and `nc_exec_running` on the hardware lane (instructions
  // only), with one nested slice per kernel (its first instruction's start
  // to its last one's end; kernels of one dispatch may overlap).
  void AddExecution(const neff::Neff& neff, const std::vector<DispatchSchedule>& schedules,
                    uint64_t profile_hash, uint64_t start_ps);
  std::string Render() const;
  size_t size() const { return events_.size(); }

 private:
  struct Event {
    Lane lane;
    std::string name;
    uint64_t start_ps;
    uint64_t duration_ps;
    std::string args_json;
  };
  std::vector<Event> events_;
};

}  // namespace neuroncc::rt
