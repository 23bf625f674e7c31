// neuron-profile: capture and view device profiles (NTFF) of NEFFs.
//
//   neuron-profile view -d DIR | -n FILE.neff -s FILE.ntff
//                  [--output-format summary-text|summary-json|json|perfetto|html]
//                  [--output-file FILE]
//   neuron-profile capture -n FILE.neff -s OUT.ntff
//                  [--input NAME=@FILE.npy | NAME FILE.npy]...
//
// A trace is only shown next to the NEFF it was recorded from: the profile
// hash stored in the NTFF must equal the NEFF's (and, in a profile directory,
// the <H> of `neff_<H>.neff` must equal that of `<H>_instid_<i>_vnc_<n>.ntff`).
#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "neff_format.h"
#include "nrt/nrt.h"
#include "nrt/nrt_ext.h"
#include "nrt/nrt_profile.h"
#include "ntff_format.h"
#include "report_html.h"
#include "summary.h"
#include "tensor_io.h"

namespace {

namespace nn = neuroncc::neff;
namespace ntff = neuroncc::ntff;

constexpr const char* kUsage =
    "usage:\n"
    "  neuron-profile view -d DIR [options]\n"
    "  neuron-profile view -n FILE.neff -s FILE.ntff [options]\n"
    "      --output-format summary-text (default) | summary-json | json | perfetto | html\n"
    "                           html: one self-contained page (timelines, tables, roofline)\n"
    "      --output-file FILE   write there (atomically) instead of stdout\n"
    "  neuron-profile capture -n FILE.neff -s OUT.ntff [--input NAME=@FILE.npy | NAME FILE.npy]...\n"
    "                         [--timing-only]\n"
    "      runs the NEFF once on the simulated NeuronCore (inputs not given are zeros)\n"
    "      and writes its device trace; --timing-only models the same trace without\n"
    "      computing any value (inputs are then optional and not read)\n";

int Fail(const std::string& msg) {
  std::fprintf(stderr, "neuron-profile: error: %s\n", msg.c_str());
  return 1;
}

struct Pair {
  std::string neff_path;
  std::string ntff_path;
  // Hashes from the file names (-d mode only).
  bool from_dir = false;
  uint64_t neff_name_hash = 0;
  uint64_t ntff_name_hash = 0;
};

std::string Basename(const std::string& p) {
  size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

bool PairsFromDir(const std::string& dir, std::vector<Pair>* pairs, std::string* error) {
  DIR* d = opendir(dir.c_str());
  if (!d) {
    *error = absl::StrCat("cannot open directory '", dir, "'");
    return false;
  }
  std::vector<std::pair<uint64_t, std::string>> neffs, ntffs;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    uint64_t h;
    uint32_t inst, vnc;
    if (ntff::ParseNeffFileName(name, &h)) neffs.push_back({h, name});
    if (ntff::ParseNtffFileName(name, &h, &inst, &vnc)) ntffs.push_back({h, name});
  }
  closedir(d);
  std::sort(neffs.begin(), neffs.end());
  std::sort(ntffs.begin(), ntffs.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  if (ntffs.empty()) {
    *error = absl::StrCat("no <H>_instid_<i>_vnc_<n>.ntff trace in '", dir, "'");
    return false;
  }
  if (neffs.empty()) {
    *error = absl::StrCat("no neff_<H>.neff in '", dir, "' to pair the trace with");
    return false;
  }
  for (const auto& [h, name] : ntffs) {
    Pair p;
    p.from_dir = true;
    p.ntff_path = absl::StrCat(dir, "/", name);
    p.ntff_name_hash = h;
    auto it = std::find_if(neffs.begin(), neffs.end(), [&](const auto& n) { return n.first == h; });
    if (it == neffs.end()) {
      std::string have;
      for (const auto& n : neffs) absl::StrAppend(&have, have.empty() ? "" : ", ", n.second);
      *error = absl::StrCat("the trace '", name, "' has profile hash ", h, " in its name, which does not match ",
                            "any NEFF in '", dir, "' (", have, ")");
      return false;
    }
    p.neff_path = absl::StrCat(dir, "/", it->second);
    p.neff_name_hash = it->first;
    pairs->push_back(p);
  }
  return true;
}

// Loads both files and checks that the trace belongs to the NEFF.
bool LoadPair(const Pair& pair, ntff::Profile* profile, nn::Neff* neff_out, std::string* error) {
  absl::StatusOr<std::string> neff_bytes = nn::ReadFile(pair.neff_path);
  if (!neff_bytes.ok()) return *error = std::string(neff_bytes.status().message()), false;
  absl::StatusOr<nn::Neff> neff = nn::ParseNeff(*neff_bytes);
  if (!neff.ok()) return *error = absl::StrCat("'", pair.neff_path, "': ", neff.status().message()), false;
  absl::StatusOr<std::string> ntff_bytes = nn::ReadFile(pair.ntff_path);
  if (!ntff_bytes.ok()) return *error = std::string(ntff_bytes.status().message()), false;
  absl::StatusOr<ntff::Profile> p = ntff::ParseNtff(*ntff_bytes);
  if (!p.ok()) return *error = absl::StrCat("'", pair.ntff_path, "': ", p.status().message()), false;
  uint64_t neff_hash = nn::ProfileHash(neff->header);
  if (pair.from_dir && pair.neff_name_hash != neff_hash) {
    *error = absl::StrCat("'", Basename(pair.neff_path), "' is named for profile hash ", pair.neff_name_hash,
                          " but its contents hash to ", neff_hash, ": the file name does not match the NEFF");
    return false;
  }
  if (p->neff_hash() != neff_hash) {
    *error = absl::StrCat("the trace '", Basename(pair.ntff_path), "' was recorded from the NEFF with profile hash ",
                          p->neff_hash(), ", but '", Basename(pair.neff_path), "' has profile hash ", neff_hash,
                          ": the trace does not match this NEFF");
    return false;
  }
  const nn::Executable& exe = neff->executable;
  bool same_kernels = p->kernel_info_size() == exe.kernels_size();
  for (int k = 0; same_kernels && k < exe.kernels_size(); ++k)
    same_kernels = p->kernel_info(k).name() == exe.kernels(k).name();
  if (!same_kernels) {
    *error = absl::StrCat("the trace '", Basename(pair.ntff_path), "' lists kernels that do not match '",
                          Basename(pair.neff_path), "' although the hashes agree (edited file?)");
    return false;
  }
  *profile = std::move(*p);
  *neff_out = std::move(*neff);
  return true;
}

int View(int argc, char** argv) {
  std::string dir, neff, ntff_path, format = "summary-text", output_file;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto need = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    bool ok = true;
    if (a == "-d" || a == "--directory") {
      ok = need(&dir);
    } else if (a == "-n" || a == "--neff") {
      ok = need(&neff);
    } else if (a == "-s" || a == "--session-file" || a == "--ntff") {
      ok = need(&ntff_path);
    } else if (a == "--output-format") {
      ok = need(&format);
    } else if (a.rfind("--output-format=", 0) == 0) {
      format = a.substr(16);
    } else if (a == "-o" || a == "--output-file") {
      ok = need(&output_file);
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      std::fputs(kUsage, stderr);
      return Fail(absl::StrCat("unknown argument '", a, "'")), 2;
    }
    if (!ok) return Fail(absl::StrCat(a, " needs a value")), 2;
  }
  if (format != "summary-text" && format != "summary-json" && format != "json" && format != "perfetto" &&
      format != "html")
    return Fail(absl::StrCat("unknown --output-format '", format,
                             "' (summary-text, summary-json, json, perfetto, html)")), 2;
  std::vector<Pair> pairs;
  std::string error;
  if (!dir.empty()) {
    if (!neff.empty() || !ntff_path.empty()) return Fail("give either -d DIR or -n FILE.neff -s FILE.ntff"), 2;
    if (!PairsFromDir(dir, &pairs, &error)) return Fail(error);
    if (nn::ReadFile(absl::StrCat(dir, "/", ntff::kIncompleteMarker)).ok())
      std::fprintf(stderr,
                   "neuron-profile: warning: '%s' was not completely written (its writer stopped before the "
                   "end): traces or trace.json may be missing\n",
                   dir.c_str());
  } else {
    if (neff.empty() || ntff_path.empty()) {
      std::fputs(kUsage, stderr);
      return Fail("view needs -d DIR, or both -n FILE.neff and -s FILE.ntff"), 2;
    }
    pairs.push_back({neff, ntff_path});
  }
  std::vector<ntff::Profile> profiles;
  std::vector<nn::Neff> neffs;
  std::vector<Pair> shown;
  for (const Pair& pair : pairs) {
    ntff::Profile p;
    nn::Neff n;
    if (!LoadPair(pair, &p, &n, &error)) {
      // In a directory, one bad trace is reported and the others still shown.
      if (!pair.from_dir) return Fail(error);
      std::fprintf(stderr, "neuron-profile: warning: skipping '%s': %s\n", Basename(pair.ntff_path).c_str(),
                   error.c_str());
      continue;
    }
    profiles.push_back(std::move(p));
    neffs.push_back(std::move(n));
    shown.push_back(pair);
  }
  if (profiles.empty()) return Fail(absl::StrCat("no trace in '", dir, "' could be read"));
  pairs = shown;

  std::string out;
  if (format == "html") {
    std::vector<neuroncc::profile::HtmlProfile> pages;
    for (size_t i = 0; i < profiles.size(); ++i) pages.push_back({Basename(pairs[i].ntff_path), &profiles[i], &neffs[i]});
    std::string system_trace;
    if (!dir.empty()) {
      // A directory written by the runtime has its system trace beside the pairs.
      absl::StatusOr<std::string> trace = nn::ReadFile(dir + "/trace.json");
      if (trace.ok()) system_trace = std::move(*trace);
    }
    out = neuroncc::profile::RenderHtml(pages, system_trace);
  }
  bool many = profiles.size() > 1;
  if (many && (format == "summary-json" || format == "json")) out += "[\n";
  for (size_t i = 0; i < profiles.size() && format != "html"; ++i) {
    const ntff::Profile& p = profiles[i];
    if (format == "summary-text") {
      if (many) absl::StrAppend(&out, i ? "\n" : "", "== ", Basename(pairs[i].ntff_path), "\n");
      out += neuroncc::profile::RenderText(neuroncc::profile::Summarize(p));
    } else if (format == "summary-json") {
      absl::StrAppend(&out, i ? ",\n" : "", neuroncc::profile::RenderSummaryJson(neuroncc::profile::Summarize(p)));
    } else if (format == "json") {
      absl::StrAppend(&out, i ? ",\n" : "", neuroncc::profile::RenderEventsJson(p));
    } else {
      if (many) return Fail("--output-format perfetto takes one trace; use -n and -s to pick it"), 2;
      out = neuroncc::profile::RenderPerfetto(p);
    }
  }
  if (many && (format == "summary-json" || format == "json")) out += "]\n";
  if (output_file.empty()) {
    std::fwrite(out.data(), 1, out.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  }
  if (absl::Status st = nn::WriteFileAtomic(output_file, out); !st.ok()) return Fail(std::string(st.message()));
  return 0;
}

int Capture(int argc, char** argv) {
  std::string neff_path, ntff_path;
  std::vector<neuroncc::tools::InputSpec> specs;
  std::string error;
  bool timing_only = false;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--timing-only") {
      timing_only = true;
      continue;
    }
    if ((a == "-n" || a == "-s" || a == "--input") && i + 1 >= argc) return Fail(a + " needs a value"), 2;
    if (a == "-n") {
      neff_path = argv[++i];
    } else if (a == "-s") {
      ntff_path = argv[++i];
    } else if (a == "--input") {
      neuroncc::tools::InputSpec spec;
      if (!neuroncc::tools::ParseInputSpec(argv[++i], &spec, &error)) return Fail(error), 2;
      specs.push_back(spec);
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (!a.empty() && a[0] != '-' && i + 1 < argc) {
      specs.push_back({a, argv[++i]});  // NAME FILE.npy
    } else {
      std::fputs(kUsage, stderr);
      return Fail(absl::StrCat("unexpected argument '", a, "'")), 2;
    }
  }
  if (neff_path.empty() || ntff_path.empty()) return Fail("capture needs -n FILE.neff and -s OUT.ntff"), 2;
  absl::StatusOr<std::string> bytes = nn::ReadFile(neff_path);
  if (!bytes.ok()) return Fail(std::string(bytes.status().message()));
  if (nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "") != NRT_SUCCESS) return Fail(nrt_get_last_error_message());
  struct Closer {
    nrt_model_t* model = nullptr;
    nrt_tensor_set_t* in = nullptr;
    nrt_tensor_set_t* out = nullptr;
    std::vector<nrt_tensor_t*> tensors;
    ~Closer() {
      for (nrt_tensor_t* t : tensors) nrt_tensor_free(&t);
      nrt_destroy_tensor_set(&in);
      nrt_destroy_tensor_set(&out);
      if (model) nrt_unload(model);
      nrt_close();
    }
  } c;
  if (nrt_load(bytes->data(), bytes->size(), -1, -1, &c.model) != NRT_SUCCESS)
    return Fail(absl::StrCat("cannot load '", neff_path, "': ", nrt_get_last_error_message()));
  neuroncc::tools::ModelIo io;
  std::vector<std::string> data, notes;
  // A timing-only capture reads no values: nothing is bound unless given.
  const bool bind = !timing_only || !specs.empty();
  if (!neuroncc::tools::DescribeModel(c.model, &io, &error) ||
      (bind && !neuroncc::tools::LoadInputs(io, specs, /*zero_fill_missing=*/true, &data, &notes, &error)))
    return Fail(error);
  if (nrt_allocate_tensor_set(&c.in) != NRT_SUCCESS || nrt_allocate_tensor_set(&c.out) != NRT_SUCCESS)
    return Fail(nrt_get_last_error_message());
  // Inputs, then outputs; a timing-only capture binds given inputs only.
  const int passes = !bind ? 0 : timing_only ? 1 : 2;
  for (int pass = 0; pass < passes; ++pass) {
    const auto& list = pass == 0 ? io.inputs : io.outputs;
    for (size_t i = 0; i < list.size(); ++i) {
      nrt_tensor_t* t = nullptr;
      if (neuroncc::tools::AllocateModelTensor(list[i], &t) != NRT_SUCCESS)
        return Fail(nrt_get_last_error_message());
      c.tensors.push_back(t);
      if (pass == 0 && !data[i].empty() && nrt_tensor_write(t, data[i].data(), 0, data[i].size()) != NRT_SUCCESS)
        return Fail(nrt_get_last_error_message());
      if (nrt_add_tensor_to_tensor_set(pass == 0 ? c.in : c.out, list[i].name.c_str(), t) != NRT_SUCCESS)
        return Fail(nrt_get_last_error_message());
    }
  }
  if (nrt_profile_start(c.model, ntff_path.c_str()) != NRT_SUCCESS)
    return Fail(nrt_get_last_error_message());
  NRT_STATUS st = timing_only ? nrt_execute_timing_only(c.model, bind ? c.in : nullptr, nullptr, 1)
                              : nrt_execute(c.model, c.in, c.out);
  if (st != NRT_SUCCESS || nrt_profile_stop(ntff_path.c_str()) != NRT_SUCCESS)
    return Fail(nrt_get_last_error_message());
  for (const std::string& n : notes) std::printf("note: %s\n", n.c_str());
  std::printf("wrote %s\n", ntff_path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  if (cmd == "view") return View(argc, argv);
  if (cmd == "capture") return Capture(argc, argv);
  std::fputs(kUsage, stderr);
  return Fail(absl::StrCat("unknown command '", cmd, "' (view, capture)")), 2;
}
