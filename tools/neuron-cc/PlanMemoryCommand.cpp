// `neuron-cc plan-memory`: the compiler's offset planner on a standalone
// instance in the public benchmark CSV format, and an independent check of a
// planned file.
//
//   neuron-cc plan-memory FILE.csv [--time-limit S] [--output PLANNED.csv]
//   neuron-cc plan-memory --verify PLANNED.csv
#include "tools/neuron-cc/PlanMemoryCommand.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "file_util.h"
#include "passes/OffsetPlanner.h"
#include "passes/PlanCsv.h"

namespace neuroncc {
namespace {

constexpr double kDefaultTimeLimit = 10;

const char* kUsage =
    "usage: neuron-cc plan-memory FILE.csv [--time-limit S] [--node-limit N] [--output PLANNED.csv]\n"
    "       neuron-cc plan-memory --verify PLANNED.csv\n"
    "FILE.csv: header 'id,lower,upper,size' (optional 'alignment'), one buffer per line,\n"
    "live over [lower, upper). --time-limit bounds the search after the classic greedy\n"
    "orderings, which always run, each until it can no longer beat a complete plan (default\n"
    "10 s, 0 = heuristics only). --node-limit N bounds it\n"
    "by search nodes instead (the same plan on every run and machine; with both, whichever\n"
    "ends first). --output writes the rows with an 'offset' column. --verify checks that no two\n"
    "buffers live at the same time overlap.\n";

int usage(const std::string& msg) {
  std::fprintf(stderr, "error NCC-E001: %s\n%s", msg.c_str(), kUsage);
  return 2;
}

bool load(const std::string& path, PlanCsv& plan) {
  absl::StatusOr<std::string> text = files::ReadFile(path);
  if (!text.ok()) {
    std::fprintf(stderr, "error NCC-E002: %s\n", std::string(text.status().message()).c_str());
    return false;
  }
  if (std::optional<std::string> err = parsePlanCsv(*text, plan)) {
    std::fprintf(stderr, "error NCC-E002: %s: %s\n", path.c_str(), err->c_str());
    return false;
  }
  return true;
}

int verify(const std::string& path) {
  PlanCsv plan;
  if (!load(path, plan)) return 1;
  if (!plan.hasOffset) {
    std::fprintf(stderr, "error NCC-E002: %s: no 'offset' column; --verify checks a planned file\n", path.c_str());
    return 1;
  }
  if (std::optional<std::string> err = verifyPlan(plan.buffers, 1, 0, &plan.ids)) {
    std::printf("%s: INVALID: %s\n", path.c_str(), err->c_str());
    return 1;
  }
  int64_t arena = 0;
  for (const PlannedBuffer& b : plan.buffers) arena = std::max(arena, b.offset + b.size);
  std::printf("%s: valid: %zu buffers, arena %lld bytes, lower bound %lld bytes\n", path.c_str(),
              plan.buffers.size(), (long long)arena, (long long)peakLiveBytes(plan.buffers));
  return 0;
}

}  // namespace

int runPlanMemory(int argc, char** argv) {
  std::string input, output, verifyPath;
  double seconds = kDefaultTimeLimit;
  bool secondsGiven = false, nodesGiven = false;
  int64_t nodes = 0;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const std::string& flag, std::string& into) {
      if (arg == flag) {
        if (i + 1 >= argc) return false;
        into = argv[++i];
        return true;
      }
      into = arg.substr(flag.size() + 1);
      return true;
    };
    auto is = [&](const std::string& flag) { return arg == flag || arg.rfind(flag + "=", 0) == 0; };
    if (arg == "-h" || arg == "--help") {
      std::printf("%s", kUsage);
      return 0;
    } else if (is("--time-limit")) {
      std::string v;
      if (!value("--time-limit", v)) return usage("--time-limit needs a value");
      char* end = nullptr;
      seconds = std::strtod(v.c_str(), &end);
      secondsGiven = true;
      if (v.empty() || *end != '\0' || !std::isfinite(seconds) || seconds < 0 || seconds > 1e6)
        return usage("--time-limit wants seconds between 0 and 1e6, got '" + v + "'");
    } else if (is("--node-limit")) {
      std::string v;
      if (!value("--node-limit", v)) return usage("--node-limit needs a value");
      char* end = nullptr;
      long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 0 || n > (1LL << 50))
        return usage("--node-limit wants a whole number between 0 and 2^50, got '" + v + "'");
      nodes = n;
      nodesGiven = true;
    } else if (is("--output")) {
      if (!value("--output", output) || output.empty()) return usage("--output needs a file name");
    } else if (is("--verify")) {
      if (!value("--verify", verifyPath) || verifyPath.empty()) return usage("--verify needs a file name");
    } else if (!arg.empty() && arg[0] == '-') {
      return usage("unknown option '" + arg + "'");
    } else if (input.empty()) {
      input = arg;
    } else {
      return usage("more than one input file ('" + input + "', '" + arg + "')");
    }
  }
  if (!verifyPath.empty()) {
    if (!input.empty() || !output.empty()) return usage("--verify takes no other input or --output");
    return verify(verifyPath);
  }
  if (input.empty()) return usage("no input CSV given");

  PlanCsv plan;
  if (!load(input, plan)) return 1;
  PlanOptions options;
  // A node limit alone makes the plan deterministic: no default time limit then.
  options.timeLimitSeconds = nodesGiven && !secondsGiven ? 0 : seconds;
  options.nodeLimit = nodes;
  auto t0 = std::chrono::steady_clock::now();
  PlanResult result = planOffsets(plan.buffers, options);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (std::optional<std::string> err = verifyPlan(plan.buffers, 1, 0, &plan.ids)) {
    std::fprintf(stderr, "error NCC-E003: internal error, the plan does not verify: %s\n", err->c_str());
    return 1;
  }
  plan.hasOffset = true;
  double ratio = result.lowerBound > 0 ? double(result.arena) / double(result.lowerBound) : 1.0;
  std::printf("buffers:     %zu\n", plan.buffers.size());
  std::printf("lower bound: %lld bytes (peak live)\n", (long long)result.lowerBound);
  std::printf("arena:       %lld bytes\n", (long long)result.arena);
  std::printf("ratio:       %.4f\n", ratio);
  std::printf("optimal:     %s\n", result.provenOptimal ? "yes (proven)" : "not proven");
  if (result.reshuffleTries > 0)
    std::printf("method:      %s (%lld search nodes, %d skylines with reshuffled ties)\n", result.method.c_str(),
                (long long)result.searchNodes, result.reshuffleTries);
  else
    std::printf("method:      %s (%lld search nodes)\n", result.method.c_str(), (long long)result.searchNodes);
  std::printf("time:        %.3f s\n", took);
  for (const HeuristicRun& h : result.heuristics) {
    if (h.arena == INT64_MAX) {
      std::printf("heuristic:   %-32s gave up (nearly every buffer overlaps) in %.3f s\n", h.method.c_str(), h.seconds);
      continue;
    }
    if (h.timedOut) {
      std::printf("heuristic:   %-32s ran out of time in %.3f s\n", h.method.c_str(), h.seconds);
      continue;
    }
    std::printf("heuristic:   %-32s %s%lld bytes (ratio %.4f) in %.3f s\n", h.method.c_str(),
                h.stopped ? "stopped above " : "", (long long)h.arena,
                result.lowerBound > 0 ? double(h.arena) / double(result.lowerBound) : 1.0, h.seconds);
  }
  if (!output.empty()) {
    if (absl::Status st = files::WriteFileAtomic(output, formatPlanCsv(plan)); !st.ok()) {
      std::fprintf(stderr, "error NCC-E005: %s\n", std::string(st.message()).c_str());
      return 1;
    }
    std::printf("wrote %s\n", output.c_str());
  }
  return 0;
}

}  // namespace neuroncc
