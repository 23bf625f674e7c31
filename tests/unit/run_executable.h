// Runs a test executable once on the simulator: serialize, parse (so the
// verifier sees every test program), schedule, execute.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "device_model.h"
#include "executor.h"
#include "neff_format.h"
#include "test_neffs.h"

namespace neuroncc {

struct ExecutableRun {
  std::vector<std::string> outputs;
  rt::ExecutionStats stats;
  std::vector<rt::DispatchSchedule> schedules;
};

// `outputs_init` optionally pre-fills the output buffers (zeros otherwise).
inline ExecutableRun RunExecutable(const neff::Executable& exe, const std::vector<std::string>& inputs,
                                   const std::vector<std::string>& segments = {},
                                   const std::vector<std::string>& outputs_init = {}) {
  ExecutableRun r;
  absl::StatusOr<neff::Neff> neff = neff::ParseNeff(testing::Serialize(exe, segments));
  EXPECT_TRUE(neff.ok()) << neff.status();
  if (!neff.ok()) return r;
  auto ex = rt::Executor::Create(*neff, *neff::DeviceForTarget(exe.target()));
  EXPECT_TRUE(ex.ok()) << ex.status();
  if (!ex.ok()) return r;
  std::vector<const void*> in;
  for (const std::string& s : inputs) in.push_back(s.data());
  for (int i = 0; i < exe.graph_outputs_size(); ++i) {
    const neff::Tensor& t = exe.tensors(int(exe.graph_outputs(i)));
    r.outputs.push_back(size_t(i) < outputs_init.size() ? outputs_init[size_t(i)]
                                                       : std::string(t.size_bytes(), '\0'));
  }
  std::vector<void*> out;
  for (std::string& s : r.outputs) out.push_back(s.data());
  absl::Status st = (*ex)->Run(in, out);
  EXPECT_TRUE(st.ok()) << st;
  r.stats = (*ex)->stats();
  r.schedules = (*ex)->schedules();
  return r;
}

}  // namespace neuroncc
