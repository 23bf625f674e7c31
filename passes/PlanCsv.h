// The public memory-planning benchmark format (as published with MiniMalloc):
// a header naming the columns, then one buffer per line. Required columns
// `id,lower,upper,size` (lifetime [lower, upper), half-open); optional
// `alignment` and `offset` (a planned file). Columns may come in any order.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "passes/OffsetPlanner.h"

namespace neuroncc {

struct PlanCsv {
  std::vector<std::string> ids;
  std::vector<PlannedBuffer> buffers;
  std::vector<int> lines;  // line number of each buffer, for messages
  bool hasAlignment = false;
  bool hasOffset = false;
};

// Parses `text`; on bad input returns "line N: what is wrong" (N = 1 for
// the header). Refuses missing or unknown columns, wrong field counts,
// non-integers, negative sizes, lower >= upper, alignments below 1, negative
// offsets and duplicate ids.
std::optional<std::string> parsePlanCsv(const std::string& text, PlanCsv& out);

// The rows in input order with an `offset` column (plus `alignment` if the
// input had one).
std::string formatPlanCsv(const PlanCsv& plan);

}  // namespace neuroncc
