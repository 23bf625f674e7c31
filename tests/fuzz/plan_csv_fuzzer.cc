// libFuzzer target: the memory-planning CSV reader, then the planner and the
// verifier on whatever it accepts. An accepted file must plan without a
// crash or an overflow (UBSan), the plan must verify, and what the writer
// produces must read back to the same buffers.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "passes/OffsetPlanner.h"
#include "passes/PlanCsv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  neuroncc::PlanCsv plan;
  if (neuroncc::parsePlanCsv(text, plan)) return 0;
  neuroncc::PlanOptions options;
  options.nodeLimit = 2000;            // deterministic and bounded
  options.exactSearchMaxBuffers = 64;  // larger inputs take the repair path
  neuroncc::PlanResult r = neuroncc::planOffsets(plan.buffers, options);
  if (neuroncc::verifyPlan(plan.buffers, 1, 0)) std::abort();
  if (r.arena < r.lowerBound) std::abort();
  neuroncc::PlanCsv again;
  if (neuroncc::parsePlanCsv(neuroncc::formatPlanCsv(plan), again)) std::abort();
  if (again.buffers.size() != plan.buffers.size()) std::abort();
  for (size_t i = 0; i < plan.buffers.size(); ++i)
    if (again.buffers[i].offset != plan.buffers[i].offset || again.ids[i] != plan.ids[i]) std::abort();
  return 0;
}
