// Memory-planner quality on the public offset-assignment benchmark format
// (`id,lower,upper,size`, half-open lifetimes), e.g. the MiniMalloc
// "challenging" instances in ../shared/bench/memplan/challenging. Prints, per
// file: buffers, the lower bound (peak live bytes), the planner's peak, the
// ratio, whether the plan verifies, and the planning time.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "passes/OffsetPlanner.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: memplan-bench FILE.csv...\n");
    return 2;
  }
  std::printf("%-20s %8s %12s %12s %8s %8s %10s\n", "instance", "buffers", "lower bound", "peak",
              "ratio", "valid", "ms");
  double seconds = 10;
  for (int a = 1; a < argc; ++a) {
    if (std::string(argv[a]) == "--time-limit" && a + 1 < argc) {
      seconds = std::stod(argv[++a]);
      continue;
    }
    std::ifstream in(argv[a]);
    if (!in) {
      std::fprintf(stderr, "cannot open %s\n", argv[a]);
      return 1;
    }
    std::vector<neuroncc::PlannedBuffer> buffers;
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      std::stringstream ss(line);
      std::string f[4];
      for (auto& x : f) std::getline(ss, x, ',');
      try {
        buffers.push_back({std::stoll(f[1]), std::stoll(f[2]), std::stoll(f[3])});
      } catch (const std::exception&) {
        std::fprintf(stderr, "%s: bad line '%s'\n", argv[a], line.c_str());
        return 1;
      }
    }
    int64_t lower = neuroncc::peakLiveBytes(buffers);
    auto t0 = std::chrono::steady_clock::now();
    neuroncc::PlanOptions options;
    options.timeLimitSeconds = seconds;
    neuroncc::PlanResult r = neuroncc::planOffsets(buffers, options);
    int64_t peak = r.arena;
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    bool valid = !neuroncc::verifyPlan(buffers, 1, 0).has_value();
    std::string name = argv[a];
    name = name.substr(name.find_last_of('/') + 1);
    std::printf("%-20s %8zu %12lld %12lld %8.4f %8s %10.2f %s%s nodes=%lld\n", name.c_str(), buffers.size(),
                (long long)lower, (long long)peak, double(peak) / double(lower), valid ? "yes" : "NO", ms,
                r.method.c_str(), r.provenOptimal ? " (optimal)" : "", (long long)r.searchNodes);
  }
  return 0;
}
