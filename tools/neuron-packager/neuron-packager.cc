// neuron-packager: inspect NEFF files.
//
//   neuron-packager info FILE.neff
//
// Prints the header fields, the executable's summary, the NEFF nodes table
// (the model's inputs and outputs: name, IN/OUT, shape, dtype, size) and the
// kernels. The file is fully verified first; a corrupt one is refused.
#include <cstdio>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "device_model.h"
#include "neff_format.h"
#include "race_check.h"

namespace {

namespace nn = neuroncc::neff;

constexpr const char* kUsage = "usage: neuron-packager info FILE.neff\n";

std::string Hex(const uint8_t* p, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s.push_back(kDigits[p[i] >> 4]);
    s.push_back(kDigits[p[i] & 15]);
  }
  return s;
}

std::string Shape(const nn::Tensor& t) {
  std::string s = "[";
  for (int i = 0; i < t.shape_size(); ++i) absl::StrAppend(&s, i ? ", " : "", t.shape(i));
  return s + "]";
}

void Row(std::string* out, const std::vector<std::string>& cells, const std::vector<size_t>& widths) {
  for (size_t i = 0; i < cells.size(); ++i) {
    std::string c = cells[i];
    if (i + 1 < cells.size()) c.append(widths[i] > c.size() ? widths[i] - c.size() : 0, ' ');
    absl::StrAppend(out, c, i + 1 < cells.size() ? "  " : "");
  }
  *out += "\n";
}

void Table(std::string* out, const std::vector<std::string>& header,
           const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w(header.size());
  for (size_t i = 0; i < header.size(); ++i) w[i] = header[i].size();
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
  Row(out, header, w);
  std::vector<std::string> rule;
  for (size_t x : w) rule.push_back(std::string(x, '-'));
  Row(out, rule, w);
  for (const auto& r : rows) Row(out, r, w);
}

int Info(const std::string& path) {
  absl::StatusOr<std::string> bytes = nn::ReadFile(path);
  if (!bytes.ok()) {
    std::fprintf(stderr, "neuron-packager: error: %s\n", std::string(bytes.status().message()).c_str());
    return 1;
  }
  absl::StatusOr<nn::Neff> neff = nn::ParseNeff(*bytes);
  if (!neff.ok()) {
    std::fprintf(stderr, "neuron-packager: error: '%s': %s\n", path.c_str(),
                 std::string(neff.status().message()).c_str());
    return 1;
  }
  const nn::Header& h = neff->header;
  const nn::Executable& exe = neff->executable;
  std::string out;
  absl::StrAppend(&out, "NEFF ", path, " (", bytes->size(), " bytes)\n\nHeader\n");
  std::vector<std::vector<std::string>> fields = {
      {"pkg_version", absl::StrCat(h.pkg_version)},
      {"header_size", absl::StrCat(h.header_size)},
      {"data_size", absl::StrCat(h.data_size)},
      {"neff_version", absl::StrCat(h.neff_version_major, ".", h.neff_version_minor)},
      {"neff_build_version", h.neff_build_version},
      {"num_tpb", absl::StrCat(h.num_tpb)},
      {"hash (sha256 of payload)", Hex(h.hash.data(), h.hash.size())},
      {"uuid", Hex(h.uuid.data(), h.uuid.size())},
      {"name", h.name},
      {"requested_tpb_count", absl::StrCat(h.requested_tpb_count)},
      {"feature_bits", absl::StrCat(h.feature_bits)},
      {"lnc_size", absl::StrCat(h.lnc_size)},
      {"profile hash <H>", absl::StrCat(nn::ProfileHash(h))},
  };
  size_t w = 0;
  for (const auto& f : fields) w = std::max(w, f[0].size());
  for (const auto& f : fields) absl::StrAppend(&out, "  ", f[0], std::string(w - f[0].size() + 2, ' '), f[1], "\n");

  size_t instructions = 0;
  for (const nn::Kernel& k : exe.kernels()) instructions += size_t(k.instructions_size());
  absl::StrAppend(&out, "\nExecutable\n  target ", exe.target(), ", opt level ", exe.opt_level(),
                  ", compiler ", exe.compiler_version(), ", format version ", exe.format_version(), "\n  ",
                  exe.kernels_size(), " kernels, ", instructions, " instructions, ", exe.tensors_size(),
                  " tensors, HBM arena ", exe.arena_bytes(), " bytes, ", exe.segments_size(),
                  " constant segments\n  dispatch model: ", nn::DispatchModelName(exe.dispatch_model()), ", ",
                  nn::Dispatches(exe).size(), nn::Dispatches(exe).size() == 1 ? " dispatch" : " dispatches",
                  " per execution\n");

  absl::StrAppend(&out, "\nNodes\n");
  std::vector<std::vector<std::string>> rows;
  auto add = [&](uint32_t id, const char* dir) {
    const nn::Tensor& t = exe.tensors(int(id));
    rows.push_back({t.name(), dir, Shape(t), nn::DTypeName(t.dtype()), absl::StrCat(t.size_bytes())});
  };
  for (uint32_t id : exe.graph_inputs()) add(id, "IN");
  for (uint32_t id : exe.graph_outputs()) add(id, "OUT");
  Table(&out, {"Name", "IN/OUT", "Shape", "DType", "Size (bytes)"}, rows);

  absl::StrAppend(&out, "\nKernels\n");
  rows.clear();
  std::vector<size_t> dispatch_of(size_t(exe.kernels_size()));
  {
    std::vector<nn::KernelRange> dispatches = nn::Dispatches(exe);
    for (size_t d = 0; d < dispatches.size(); ++d)
      for (int k = dispatches[d].first; k < dispatches[d].first + dispatches[d].count; ++k) dispatch_of[size_t(k)] = d;
  }
  for (int i = 0; i < exe.kernels_size(); ++i) {
    const nn::Kernel& k = exe.kernels(i);
    std::map<std::string, int> per_engine;
    for (const nn::Instruction& inst : k.instructions()) ++per_engine[nn::EngineName(inst.engine())];
    std::string engines;
    for (const auto& [e, n] : per_engine) absl::StrAppend(&engines, engines.empty() ? "" : " ", e, ":", n);
    std::string ops;
    for (int j = 0; j < k.source_ops_size(); ++j) absl::StrAppend(&ops, j ? ", " : "", k.source_ops(j));
    rows.push_back({absl::StrCat(i), absl::StrCat(dispatch_of[size_t(i)]), k.name(), absl::StrCat(k.instructions_size()), engines,
                    absl::StrCat(k.sbuf_bytes_per_partition()), ops});
  }
  Table(&out, {"#", "Dispatch", "Name", "Instructions", "Engines", "SBUF/partition", "Source ops"}, rows);

  size_t races = 0, unchecked = 0;
  std::string race_lines;
  for (const nn::Kernel& k : exe.kernels()) {
    absl::StatusOr<std::vector<nn::SbufRace>> found = nn::CheckSbufRaces(k);
    if (!found.ok()) {
      ++unchecked;
      absl::StrAppend(&race_lines, "  not checked: ", found.status().message(), "\n");
      continue;
    }
    for (const nn::SbufRace& r : *found) {
      ++races;
      absl::StrAppend(&race_lines, "  ", r.description, "\n");
    }
  }
  std::string verdict = races ? absl::StrCat(races, " SBUF/PSUM race(s)") : "no SBUF/PSUM races";
  if (unchecked) absl::StrAppend(&verdict, races ? "; " : " found; ", unchecked, " kernel(s) not checked");
  absl::StrAppend(&out, "\nSemaphore check: ", verdict, "\n", race_lines);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && (std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc != 3 || std::string(argv[1]) != "info") {
    std::fputs(kUsage, stderr);
    return 2;
  }
  return Info(argv[2]);
}
