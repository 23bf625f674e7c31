// The self-contained HTML report of `neuron-profile view --output-format
// html`: one file with the profile data (compact JSON) and the page's script
// (report.html, embedded at build time). No network, no server.
#pragma once

#include <string>
#include <vector>

#include "neff_format.h"
#include "ntff.pb.h"
#include "summary.h"

namespace neuroncc::profile {

struct HtmlProfile {
  std::string label;  // the trace's file name
  const ntff::Profile* profile = nullptr;
  const neff::Neff* neff = nullptr;  // for the tile shapes of each instruction
};

// `system_trace_json`: the profile directory's trace.json, or empty (the
// page then shows the device's dispatches as the only system lane).
std::string RenderHtml(const std::vector<HtmlProfile>& profiles, const std::string& system_trace_json);

// The data the page draws, as JSON (exposed for the tests).
std::string HtmlData(const std::vector<HtmlProfile>& profiles, const std::string& system_trace_json);

}  // namespace neuroncc::profile
