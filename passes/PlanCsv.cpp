//===- PlanCsv.cpp - read and write the memory-planning CSV format ---------===//

#include "passes/PlanCsv.h"

#include <charconv>
#include <unordered_map>

namespace neuroncc {
namespace {

// Bounds that keep every sum the planner forms inside int64.
constexpr int64_t kMaxTime = int64_t(1) << 60;
constexpr int64_t kMaxBytes = int64_t(1) << 50;   // 1 PiB per buffer
constexpr int64_t kMaxTotal = int64_t(1) << 60;   // all buffers together

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> splitFields(const std::string& line) {
  std::vector<std::string> fields;
  size_t from = 0;
  while (true) {
    size_t comma = line.find(',', from);
    fields.push_back(trim(line.substr(from, comma == std::string::npos ? std::string::npos : comma - from)));
    if (comma == std::string::npos) return fields;
    from = comma + 1;
  }
}

// A whole field as a decimal integer, or nullopt.
std::optional<int64_t> parseInteger(const std::string& field) {
  int64_t v = 0;
  const char* end = field.data() + field.size();
  auto [ptr, ec] = std::from_chars(field.data(), end, v);
  if (field.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s.substr(0, 40)) out += (c >= 32 && c < 127) ? c : '?';
  return out + (s.size() > 40 ? "...'" : "'");
}

}  // namespace

std::optional<std::string> parsePlanCsv(const std::string& text, PlanCsv& out) {
  out = PlanCsv();
  enum Column { kId, kLower, kUpper, kSize, kAlignment, kOffset, kColumns };
  const char* names[kColumns] = {"id", "lower", "upper", "size", "alignment", "offset"};
  int position[kColumns] = {-1, -1, -1, -1, -1, -1};
  std::unordered_map<std::string, int> firstLine;
  size_t from = 0;
  int lineNo = 0;
  size_t fieldCount = 0;
  int64_t total = 0;
  while (from < text.size()) {
    size_t nl = text.find('\n', from);
    std::string line = text.substr(from, nl == std::string::npos ? std::string::npos : nl - from);
    from = nl == std::string::npos ? text.size() : nl + 1;
    ++lineNo;
    auto fail = [&](const std::string& msg) { return "line " + std::to_string(lineNo) + ": " + msg; };
    if (line.find('\0') != std::string::npos) return fail("contains a NUL byte; not a text CSV file");
    if (trim(line).empty()) {
      if (lineNo == 1) return fail("empty; expected a header such as 'id,lower,upper,size'");
      continue;
    }
    std::vector<std::string> fields = splitFields(line);
    if (lineNo == 1) {
      fieldCount = fields.size();
      for (size_t f = 0; f < fields.size(); ++f) {
        int c = 0;
        while (c < kColumns && fields[f] != names[c]) ++c;
        if (c == kColumns)
          return fail("unknown column " + quoted(fields[f]) +
                      " (expected id, lower, upper, size, and optionally alignment and offset)");
        if (position[c] >= 0) return fail("column '" + std::string(names[c]) + "' appears twice");
        position[c] = int(f);
      }
      for (int c = kId; c <= kSize; ++c)
        if (position[c] < 0) return fail("missing column '" + std::string(names[c]) + "'");
      out.hasAlignment = position[kAlignment] >= 0;
      out.hasOffset = position[kOffset] >= 0;
      continue;
    }
    if (fields.size() != fieldCount)
      return fail("expected " + std::to_string(fieldCount) + " fields, found " + std::to_string(fields.size()));
    int64_t value[kColumns] = {0, 0, 0, 0, 1, -1};
    for (int c = kLower; c < kColumns; ++c) {
      if (position[c] < 0) continue;
      const std::string& field = fields[size_t(position[c])];
      std::optional<int64_t> v = parseInteger(field);
      if (!v) return fail(std::string(names[c]) + " " + quoted(field) + " is not an integer (or out of range)");
      value[c] = *v;
    }
    const std::string& id = fields[size_t(position[kId])];
    if (id.empty()) return fail("empty id");
    if (value[kLower] < -kMaxTime || value[kLower] > kMaxTime || value[kUpper] < -kMaxTime ||
        value[kUpper] > kMaxTime)
      return fail("lifetime bound out of range (at most 2^60 in magnitude)");
    if (value[kLower] >= value[kUpper])
      return fail("lower " + std::to_string(value[kLower]) + " is not below upper " +
                  std::to_string(value[kUpper]) + " (lifetimes are half-open [lower, upper))");
    if (value[kSize] < 0) return fail("negative size " + std::to_string(value[kSize]));
    if (value[kSize] > kMaxBytes) return fail("size " + std::to_string(value[kSize]) + " exceeds 2^50 bytes");
    if ((total += value[kSize]) > kMaxTotal) return fail("total of all sizes exceeds 2^60 bytes");
    if (value[kAlignment] < 1 || value[kAlignment] > kMaxBytes)
      return fail("alignment " + std::to_string(value[kAlignment]) + " is not between 1 and 2^50");
    if (out.hasOffset && (value[kOffset] < 0 || value[kOffset] > kMaxTotal))
      return fail("offset " + std::to_string(value[kOffset]) + " is out of range");
    auto [it, inserted] = firstLine.emplace(id, lineNo);
    if (!inserted) return fail("duplicate id " + quoted(id) + " (first on line " + std::to_string(it->second) + ")");
    out.ids.push_back(id);
    out.lines.push_back(lineNo);
    out.buffers.push_back({value[kLower], value[kUpper], value[kSize], value[kOffset], value[kAlignment]});
  }
  if (lineNo == 0) return std::string("line 1: empty file; expected a header such as 'id,lower,upper,size'");
  return std::nullopt;
}

std::string formatPlanCsv(const PlanCsv& plan) {
  std::string out = plan.hasAlignment ? "id,lower,upper,size,alignment,offset\n" : "id,lower,upper,size,offset\n";
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const PlannedBuffer& b = plan.buffers[i];
    out += plan.ids[i] + "," + std::to_string(b.start) + "," + std::to_string(b.end) + "," + std::to_string(b.size);
    if (plan.hasAlignment) out += "," + std::to_string(b.alignment);
    out += "," + std::to_string(b.offset) + "\n";
  }
  return out;
}

}  // namespace neuroncc
