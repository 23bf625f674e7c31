// The libnrt-style C API over the executor. One global lock serializes every
// call: the simulator gains nothing from concurrency, and a single lock makes
// handle validation airtight (a handle checked under the lock cannot be freed
// by another thread before it is used).

#include <sys/eventfd.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "device_model.h"
#include "executor.h"
#include "file_util.h"
#include "neff_format.h"
#include "nrt/nrt.h"
#include "nrt/nrt_async.h"
#include "nrt/nrt_async_sendrecv.h"
#include "nrt/nrt_experimental.h"
#include "nrt/nrt_ext.h"
#include "nrt/nrt_profile.h"
#include "nrt/nrt_sys_trace.h"
#include "ntff_format.h"
#include "json.h"
#include "profile.h"
#include "race_check.h"

#define NRT_API extern "C" __attribute__((visibility("default")))

namespace nn = neuroncc::neff;
namespace rt = neuroncc::rt;
namespace ntff = neuroncc::ntff;

// Bytes a tensor reads and writes: allocated by the runtime (owned), or a
// caller's buffer (nrt_tensor_attach_buffer). Slices share it, so it lives
// as long as the last tensor that points into it.
struct TensorStorage {
  uint8_t* data = nullptr;
  bool owned = false;
  ~TensorStorage() {
    if (owned) std::free(data);
  }
};

struct nrt_tensor {
  std::string name;
  nrt_tensor_placement_t placement = NRT_TENSOR_PLACEMENT_DEVICE;
  size_t size = 0;      // 0: an empty tensor, no storage attached yet
  size_t offset = 0;    // where this tensor starts in `storage` (slices)
  std::shared_ptr<TensorStorage> storage;
  uint64_t completions = 0;  // executions that wrote it as an output
  uint8_t* data() const { return storage ? storage->data + offset : nullptr; }
};

// The neuron-cc release (the compiler stamps the same into NEFFs it writes).
constexpr char kRuntimeVersion[] = "0.1.0";

struct nrt_model {
  void* handle = nullptr;  // what the application holds (see Handles)
  nn::Neff neff;
  const nn::DeviceParams* device = nullptr;
  std::unique_ptr<rt::Executor> executor;
  uint64_t hash = 0;
  int32_t vnc = 0;
  bool executed = false;
  uint64_t last_timing_only = 0;  // 1 if the last execution computed no values
  std::map<std::string, size_t> input_index;   // name -> graph input position
  std::map<std::string, size_t> output_index;  // name -> graph output position
};

// The activities of an inspect session (nrt_inspect_config_set_activity).
enum InspectActivity : uint32_t {
  kSystemProfile = 1,  // trace.json
  kDeviceProfile = 2,  // NEFF copies and NTFFs
  kHostMemory = 4,     // accepted; this runtime writes no host memory profile
  kCpuUtil = 8,        // accepted; this runtime writes no CPU utilization profile
  kAllActivities = 15,
};

struct nrt_inspect_config {
  std::string output_dir = "./output";
  int session_id = 1;
  bool enable_inspect = false;  // as the public header's defaults: nothing captured until enabled
  bool enable_inspect_on_fail = false;
  uint32_t activities = kAllActivities;
  neuroncc::rt::TraceFilter sys_trace;
};

struct nrt_profile_continuous_options {
  std::string output_dir = "./output";
};

struct nrt_sys_trace_config {
  neuroncc::rt::TraceFilter filter;
};

struct nrt_sys_trace_fetch_options {
  uint64_t max_events_per_nc = UINT64_MAX;
  std::optional<uint32_t> nc;
};

namespace {

struct TensorSet {
  std::map<std::string, nrt_tensor_t*> tensors;  // handles: a freed tensor is found out at execution
};

// The handles given to applications are numbers from a counter that never
// repeats, not object addresses: a dead handle stays dead even after the
// allocator has reused its object's memory for a new one.
// One counter for every kind, so a model handle never equals a tensor's.
uintptr_t NextHandle() {
  static uintptr_t next = uintptr_t(1) << 20;  // far from NULL
  return next += 16;                           // aligned like a pointer
}

template <typename T>
class Handles {
 public:
  void* Add(T* object) {
    uintptr_t h = NextHandle();
    live_[h] = object;
    return reinterpret_cast<void*>(h);
  }
  T* Find(const void* handle) const {
    auto it = live_.find(reinterpret_cast<uintptr_t>(handle));
    return it == live_.end() ? nullptr : it->second;
  }
  // Removes the handle; its object, for the caller to delete (null if dead).
  T* Take(const void* handle) {
    auto it = live_.find(reinterpret_cast<uintptr_t>(handle));
    if (it == live_.end()) return nullptr;
    T* object = it->second;
    live_.erase(it);
    return object;
  }
  std::vector<T*> All() const {
    std::vector<T*> v;
    for (const auto& [h, object] : live_) v.push_back(object);
    return v;
  }

 private:
  std::unordered_map<uintptr_t, T*> live_;
};

// nrt_profile_start .. nrt_profile_stop.
struct Capture {
  const nrt_model* model;
  std::string filename;
  ntff::Profile profile;
};

// One model's share of an inspect session; self-contained so it survives unload.
struct InspectModel {
  const nrt_model* model;  // null once unloaded
  std::string image;
  uint64_t hash;
  uint32_t instance;
  int32_t vnc;
  ntff::Profile profile;
};

// A system trace being recorded (an inspect session's, or one started by
// nrt_sys_trace_start) and its clock: host time since it began, except that
// each execution lasts its modeled device time instead of the host time its
// simulation took (skew_ps adds up the difference).
struct TraceSession {
  uint64_t origin_ps = 0;
  int64_t skew_ps = 0;
  rt::SystemTrace trace;
  std::map<const nrt_model*, uint64_t> executions;  // each model's, since the session began
};

struct Inspect {
  std::string dir;
  bool from_environment = false;
  bool capture = true;  // false: nrt_inspect_config_set_enable_inspect was not set; nothing is written
  uint32_t activities = kAllActivities;
  int session_id = 1;
  TraceSession system;
  std::vector<InspectModel> models;
  bool SystemProfile() const { return capture && (activities & kSystemProfile); }
  bool DeviceProfile() const { return capture && (activities & kDeviceProfile); }
};

// Continuous profiling (nrt_profile_continuous_start .. _stop): each
// NeuronCore's latest execution, ready for nrt_profile_continuous_save.
struct Continuous {
  struct Latest {
    const nrt_model* model = nullptr;  // null once unloaded
    std::string image;                 // the NEFF it ran, copied when the model changes
    uint64_t hash = 0;
    ntff::Profile profile;             // that execution alone
  };
  std::map<int32_t, Latest> latest;
};

enum class State { kUninitialized, kInitialized, kClosed };

struct Runtime {
  std::mutex mu;
  State state = State::kUninitialized;
  std::string simulated_target;
  Handles<nrt_model> models;
  Handles<nrt_tensor> tensors;
  Handles<TensorSet> sets;
  std::vector<Capture> captures;
  std::unique_ptr<Inspect> inspect;
  std::unique_ptr<TraceSession> sys_trace;  // nrt_sys_trace_start .. nrt_sys_trace_stop
  std::unique_ptr<Continuous> continuous;
  std::unique_ptr<TraceSession> legacy_trace;  // nrt_trace_start .. nrt_trace_stop
  NRT_ASYNC_EXEC_STATUS_CALLBACK async_callback = nullptr;
  void* async_callback_params = nullptr;
  std::condition_variable completed;  // an execution wrote its outputs
};

// Never destroyed: a static destructor could run while another thread (or an
// atexit handler of the application) is still calling in.
Runtime& R() {
  static Runtime* r = new Runtime;
  return *r;
}

thread_local std::string t_last_error;

bool LogErrors() {
  const char* level = std::getenv("NEURON_RT_LOG_LEVEL");
  if (!level) return false;
  std::string l(level);
  return l == "ERROR" || l == "WARN" || l == "WARNING" || l == "INFO" || l == "DEBUG" || l == "TRACE";
}

NRT_STATUS Fail(NRT_STATUS code, std::string message) {
  t_last_error = std::move(message);
  if (LogErrors())
    std::fprintf(stderr, "nrt: %s: %s\n", nrt_get_status_as_str(code), t_last_error.c_str());
  return code;
}

// Status for calls that need an initialized runtime (caller holds the lock).
NRT_STATUS CheckInitialized(const char* fn) {
  switch (R().state) {
    case State::kInitialized: return NRT_SUCCESS;
    case State::kUninitialized:
      return Fail(NRT_UNINITIALIZED, absl::StrCat(fn, ": nrt_init() has not been called"));
    case State::kClosed:
      return Fail(NRT_CLOSED, absl::StrCat(fn, ": the runtime was closed by nrt_close()"));
  }
  return NRT_FAILURE;
}

// Checks a model handle and, when it is live, replaces it with the model
// itself: the caller's variable holds the object from then on.
template <typename M>
NRT_STATUS CheckModel(M*& model, const char* fn) {
  if (!model) return Fail(NRT_INVALID, absl::StrCat(fn, ": model is NULL"));
  nrt_model* object = R().models.Find(model);
  if (!object) return Fail(NRT_INVALID_HANDLE, absl::StrCat(fn, ": not a loaded model (unloaded already?)"));
  model = object;
  return NRT_SUCCESS;
}

// The same for a tensor handle.
template <typename T>
NRT_STATUS CheckTensor(T*& t, const char* fn) {
  if (!t) return Fail(NRT_INVALID, absl::StrCat(fn, ": tensor is NULL"));
  nrt_tensor* object = R().tensors.Find(t);
  if (!object) return Fail(NRT_INVALID_HANDLE, absl::StrCat(fn, ": not an allocated tensor (freed already?)"));
  t = object;
  return NRT_SUCCESS;
}

NRT_STATUS CheckRange(const nrt_tensor_t* t, size_t offset, size_t size, const char* fn) {
  if (offset > t->size || size > t->size - offset)
    return Fail(NRT_INVALID, absl::StrCat(fn, ": bytes [", offset, ", ", offset, "+", size,
                                          ") outside tensor '", t->name, "' of ", t->size,
                                          " bytes"));
  return NRT_SUCCESS;
}

uint64_t HostNowPs() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count()) *
         1000;
}

// A host instant on the session clock (0 for instants before the session).
uint64_t SessionPs(const TraceSession& in, uint64_t host_ps) {
  int64_t t = int64_t(host_ps - in.origin_ps) + in.skew_ps;
  return t > 0 ? uint64_t(t) : 0;
}

// The system traces being recorded: the inspect session's (when it captures
// a system profile), nrt_sys_trace_start's and nrt_trace_start's.
std::vector<TraceSession*> TraceSessions() {
  std::vector<TraceSession*> v;
  if (R().inspect && R().inspect->SystemProfile()) v.push_back(&R().inspect->system);
  if (R().sys_trace) v.push_back(R().sys_trace.get());
  if (R().legacy_trace) v.push_back(R().legacy_trace.get());
  return v;
}

// Records a host-only call on the framework lane, as long as it took.
void TraceHostCall(const char* name, uint64_t began_ps, std::string args = "", uint32_t nc = 0) {
  for (TraceSession* in : TraceSessions()) {
    uint64_t start = SessionPs(*in, began_ps), end = SessionPs(*in, HostNowPs());
    in->trace.Add(rt::SystemTrace::kFramework, name, name, start, end - start, args, nc);
  }
}

InspectModel& InspectEntry(Inspect& in, const nrt_model* m) {
  for (InspectModel& e : in.models)
    if (e.model == m) return e;
  uint32_t instance = 0;
  for (const InspectModel& e : in.models) instance += e.hash == m->hash;
  in.models.push_back({m, m->neff.image, m->hash, instance, m->vnc, rt::NewProfile(m->neff, *m->device)});
  return in.models.back();
}

// The options of a session nrt_inspect_begin() or NEURON_RT_INSPECT_ENABLE=1
// starts: from the environment variables of the public runtime (a profile
// type is left out when its variable is 0).
nrt_inspect_config InspectOptionsFromEnvironment() {
  nrt_inspect_config options;
  const char* dir = std::getenv("NEURON_RT_INSPECT_OUTPUT_DIR");
  if (dir && *dir) options.output_dir = dir;
  options.enable_inspect = true;
  auto off = [](const char* variable) {
    const char* v = std::getenv(variable);
    return v && std::string(v) == "0";
  };
  if (off("NEURON_RT_INSPECT_SYSTEM_PROFILE")) options.activities &= ~uint32_t(kSystemProfile);
  if (off("NEURON_RT_INSPECT_DEVICE_PROFILE")) options.activities &= ~uint32_t(kDeviceProfile);
  return options;
}

NRT_STATUS BeginInspect(const std::string& dir, const nrt_inspect_config& options) {
  if (R().inspect)
    return Fail(NRT_INVALID, absl::StrCat("nrt_inspect_begin: a session writing to '",
                                          R().inspect->dir, "' is already running"));
  if (dir.empty()) return Fail(NRT_INVALID, "nrt_inspect_begin: empty output directory");
  if (absl::Status st = options.enable_inspect ? neuroncc::files::MakeDirs(dir) : absl::OkStatus(); !st.ok())
    return Fail(NRT_FAILURE, absl::StrCat("nrt_inspect_begin: ", st.message()));
  R().inspect = std::make_unique<Inspect>();
  Inspect& in = *R().inspect;
  in.dir = dir;
  in.capture = options.enable_inspect;
  in.activities = options.activities;
  in.session_id = options.session_id;
  in.system.origin_ps = HostNowPs();
  in.system.trace.SetFilter(options.sys_trace);
  return NRT_SUCCESS;
}

// Writes the profile directory of the running session and ends it.
NRT_STATUS StopInspect() {
  std::unique_ptr<Inspect> in = std::move(R().inspect);
  if (!in) return Fail(NRT_INVALID, "nrt_inspect_stop: no profiling session is running");
  if (!in->capture || !(in->activities & (kSystemProfile | kDeviceProfile))) return NRT_SUCCESS;
  // Marks the directory as being written until its last file is in place, so
  // that a viewer can tell a profile cut short by a kill from a whole one.
  const std::string marker = absl::StrCat(in->dir, "/", ntff::kIncompleteMarker);
  if (absl::Status st = nn::WriteFileAtomic(marker, "written by nrt_inspect_stop, removed when it completes\n");
      !st.ok())
    return Fail(NRT_FAILURE, absl::StrCat("nrt_inspect_stop: ", st.message()));
  for (const InspectModel& e : in->models) {
    // Loaded but never run: no trace to show.
    if (!in->DeviceProfile() || e.profile.execution_count() == 0) continue;
    std::string neff_path = absl::StrCat(in->dir, "/", ntff::NeffFileName(e.hash));
    std::string ntff_path =
        absl::StrCat(in->dir, "/", ntff::NtffFileName(e.hash, e.instance, uint32_t(e.vnc)));
    absl::Status st = nn::WriteFileAtomic(neff_path, e.image);
    if (st.ok()) st = nn::WriteFileAtomic(ntff_path, ntff::SerializeNtff(e.profile));
    if (!st.ok()) return Fail(NRT_FAILURE, absl::StrCat("nrt_inspect_stop: ", st.message()));
  }
  if (in->SystemProfile()) {
    absl::Status st = nn::WriteFileAtomic(absl::StrCat(in->dir, "/trace.json"),
                                          in->system.trace.Render(absl::StrCat("\"session_id\":", in->session_id)));
    if (!st.ok()) return Fail(NRT_FAILURE, absl::StrCat("nrt_inspect_stop: ", st.message()));
  }
  std::remove(marker.c_str());
  return NRT_SUCCESS;
}

void UnloadLocked(nrt_model* m) {
  if (R().continuous)
    for (auto& [vnc, latest] : R().continuous->latest)
      if (latest.model == m) latest.model = nullptr;
  for (TraceSession* in : TraceSessions()) in->executions.erase(m);
  if (R().inspect)
    for (InspectModel& e : R().inspect->models)
      if (e.model == m) e.model = nullptr;
  for (Capture& c : R().captures)
    if (c.model == m) c.model = nullptr;
  R().models.Take(m->handle);
  delete m;
}

// Binds the tensors of `set` to the model's inputs or outputs by name.
NRT_STATUS BindSet(const nrt_model* m, const TensorSet* set, bool inputs,
                   std::vector<nrt_tensor*>* bound) {
  const char* what = inputs ? "input" : "output";
  const auto& index = inputs ? m->input_index : m->output_index;
  const auto& ids = inputs ? m->neff.executable.graph_inputs() : m->neff.executable.graph_outputs();
  auto names = [&] {
    std::vector<std::string> v;
    for (uint32_t id : ids) v.push_back(absl::StrCat("'", m->neff.executable.tensors(int(id)).name(), "'"));
    return v.empty() ? std::string("none") : absl::StrJoin(v, ", ");
  };
  for (const auto& [name, t] : set->tensors) {
    if (!index.count(name))
      return Fail(NRT_INVALID, absl::StrCat("nrt_execute: the ", what, " set has a tensor named '",
                                            name, "', which is not an ", what, " of the model (",
                                            what, "s: ", names(), ")"));
    if (!R().tensors.Find(t))
      return Fail(NRT_INVALID_HANDLE, absl::StrCat("nrt_execute: ", what, " '", name,
                                                   "' was freed while still in the tensor set"));
  }
  bound->assign(size_t(ids.size()), nullptr);
  for (int i = 0; i < ids.size(); ++i) {
    const nn::Tensor& mt = m->neff.executable.tensors(int(ids[i]));
    auto it = set->tensors.find(mt.name());
    if (it == set->tensors.end())
      return Fail(NRT_INVALID, absl::StrCat("nrt_execute: missing ", what, " '", mt.name(),
                                            "' (", what, "s: ", names(), ")"));
    nrt_tensor* t = R().tensors.Find(it->second);  // live: checked above
    if (t->size != mt.size_bytes())
      return Fail(NRT_INVALID, absl::StrCat("nrt_execute: ", what, " '", mt.name(), "': tensor is ", t->size,
                                            " bytes, the model expects ", mt.size_bytes()));
    (*bound)[size_t(i)] = t;
  }
  return NRT_SUCCESS;
}

// Runs one execution, or with `timing_only` only records its modeled timeline
// (which never depends on values): sets, when given, are checked as for a
// full run, but nothing is read or written.
NRT_STATUS ExecuteLocked(nrt_model* m, const TensorSet* in_set, TensorSet* out_set, bool timing_only) {
  uint64_t began = HostNowPs();
  std::vector<nrt_tensor*> ins, outs;
  if (!timing_only || in_set)
    if (NRT_STATUS s = BindSet(m, in_set, true, &ins); s != NRT_SUCCESS) return s;
  if (!timing_only || out_set)
    if (NRT_STATUS s = BindSet(m, out_set, false, &outs); s != NRT_SUCCESS) return s;
  if (!timing_only) {
    std::vector<const void*> in_ptrs;
    std::vector<void*> out_ptrs;
    for (nrt_tensor* t : ins) in_ptrs.push_back(t->data());
    for (nrt_tensor* t : outs) out_ptrs.push_back(t->data());
    if (absl::Status st = m->executor->Run(in_ptrs, out_ptrs); !st.ok()) {
      // A dma_gather index outside its table (or not an integer): the device
      // reports an out-of-bounds access. Nothing is recorded in profiles.
      NRT_STATUS code = absl::IsOutOfRange(st)          ? NRT_EXEC_OOB
                        : absl::IsResourceExhausted(st) ? NRT_RESOURCE
                                                        : NRT_FAILURE;
      return Fail(code, absl::StrCat("nrt_execute: ", st.message()));
    }
  }
  m->executed = true;
  m->last_timing_only = timing_only ? 1 : 0;
  if (!timing_only) {
    for (nrt_tensor* t : outs) ++t->completions;
    R().completed.notify_all();
  }
  for (Capture& c : R().captures)
    if (c.model == m) rt::AppendExecution(m->neff, m->executor->schedules(), &c.profile);
  if (Continuous* c = R().continuous.get()) {
    Continuous::Latest& latest = c->latest[m->vnc];
    if (latest.model != m) {
      latest.model = m;
      latest.image = m->neff.image;
      latest.hash = m->hash;
    }
    latest.profile = rt::NewProfile(m->neff, *m->device);
    rt::AppendExecution(m->neff, m->executor->schedules(), &latest.profile);
  }
  if (Inspect* in = R().inspect.get(); in && in->DeviceProfile())
    rt::AppendExecution(m->neff, m->executor->schedules(), &InspectEntry(*in, m).profile);
  for (TraceSession* in : TraceSessions()) {
    uint64_t dt = m->executor->stats().device_time_ps, start = SessionPs(*in, began);
    in->trace.Add(rt::SystemTrace::kFramework, "nrt_execute", "nrt_execute", start, dt,
                  absl::StrCat("{\"neff\":", neuroncc::json::Quote(m->neff.header.name), ",\"neff_hash\":\"",
                               m->hash, "\",\"execution\":", in->executions[m]++,
                               timing_only ? ",\"timing_only\":true" : "", "}"),
                  uint32_t(m->vnc));
    in->trace.AddExecution(m->neff, m->executor->schedules(), m->hash, start, uint32_t(m->vnc));
    // From now on the clock reads as if the execution had lasted dt.
    in->skew_ps += int64_t(start + dt) - int64_t(SessionPs(*in, HostNowPs()));
  }
  return NRT_SUCCESS;
}

nrt_dtype_t ToNrtDtype(nn::DType d) {
  switch (d) {
    case nn::F32: return NRT_DTYPE_FLOAT32;
    case nn::BF16: return NRT_DTYPE_BFLOAT16;
    case nn::F16: return NRT_DTYPE_FLOAT16;
    case nn::I32: return NRT_DTYPE_INT32;
    case nn::I64: return NRT_DTYPE_INT64;
    case nn::BOOL: return NRT_DTYPE_UINT8;  // PyTorch's bool: one byte, 0 or 1
    case nn::U8: return NRT_DTYPE_UINT8;
    case nn::I8: return NRT_DTYPE_INT8;
    case nn::I16: return NRT_DTYPE_INT16;
    default: return NRT_DTYPE_INVALID;
  }
}

// The u64 at the public header's neff_version_major offset, read before the
// full parse so an old or new NEFF gets the dedicated status code.
bool VersionMismatch(const void* bytes, size_t size, uint64_t* major) {
  if (size < nn::kHeaderSize) return false;
  const uint8_t* p = static_cast<const uint8_t*>(bytes) + 24;
  *major = 0;
  for (int i = 0; i < 8; ++i) *major |= uint64_t(p[i]) << (8 * i);
  return *major != nn::kVersionMajor;
}

}  // namespace

// ---------------------------------------------------------------------------
// Status

NRT_API const char* nrt_get_status_as_str(NRT_STATUS status) {
  switch (status) {
#define NRT_CASE(x) \
  case x: return #x;
    NRT_CASE(NRT_SUCCESS)
    NRT_CASE(NRT_FAILURE)
    NRT_CASE(NRT_INVALID)
    NRT_CASE(NRT_INVALID_HANDLE)
    NRT_CASE(NRT_RESOURCE)
    NRT_CASE(NRT_TIMEOUT)
    NRT_CASE(NRT_HW_ERROR)
    NRT_CASE(NRT_QUEUE_FULL)
    NRT_CASE(NRT_LOAD_NOT_ENOUGH_NC)
    NRT_CASE(NRT_UNSUPPORTED_NEFF_VERSION)
    NRT_CASE(NRT_FAIL_HOST_MEM_ALLOC)
    NRT_CASE(NRT_UNINITIALIZED)
    NRT_CASE(NRT_CLOSED)
    NRT_CASE(NRT_QUEUE_EMPTY)
    NRT_CASE(NRT_EXEC_UNIT_UNRECOVERABLE)
    NRT_CASE(NRT_EXEC_BAD_INPUT)
    NRT_CASE(NRT_EXEC_COMPLETED_WITH_NUM_ERR)
    NRT_CASE(NRT_EXEC_COMPLETED_WITH_ERR)
    NRT_CASE(NRT_EXEC_NC_BUSY)
    NRT_CASE(NRT_EXEC_OOB)
    NRT_CASE(NRT_COLL_PENDING)
    NRT_CASE(NRT_EXEC_HW_ERR_COLLECTIVES)
    NRT_CASE(NRT_EXEC_HW_ERR_HBM_UE)
    NRT_CASE(NRT_EXEC_HW_ERR_NC_UE)
    NRT_CASE(NRT_EXEC_HW_ERR_DMA_ABORT)
    NRT_CASE(NRT_EXEC_SW_NQ_OVERFLOW)
    NRT_CASE(NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE)
    NRT_CASE(NRT_NETWORK_PROXY_FAILURE)
#undef NRT_CASE
  }
  return "NRT_UNKNOWN_STATUS";
}

NRT_API const char* nrt_get_last_error_message(void) { return t_last_error.c_str(); }

// ---------------------------------------------------------------------------
// Runtime lifetime

NRT_API NRT_STATUS nrt_set_simulated_target(const char* target) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (R().state == State::kInitialized)
    return Fail(NRT_INVALID, "nrt_set_simulated_target: call it before nrt_init()");
  std::string t = target ? target : "";
  if (!t.empty() && !nn::DeviceForTarget(t))
    return Fail(NRT_INVALID, absl::StrCat("nrt_set_simulated_target: unknown target '", t,
                                          "' (known: trn1, trn2)"));
  R().simulated_target = t;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_get_instance_info(nrt_instance_info_t* info, size_t instance_info_len) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (!info) return Fail(NRT_INVALID, "nrt_get_instance_info: info is NULL");
  if (instance_info_len < sizeof(nrt_instance_info_t))
    return Fail(NRT_INVALID, absl::StrCat("nrt_get_instance_info: buffer of ", instance_info_len,
                                          " bytes, need ", sizeof(nrt_instance_info_t)));
  std::memset(info, 0, sizeof(*info));
  bool trn2 = R().simulated_target == "trn2";
  info->family = trn2 ? NRT_INSTANCE_TRN2 : NRT_INSTANCE_TRN1;
  info->size = NRT_INSTANCE_SIZE_1XL;
  std::snprintf(info->arch_name, sizeof(info->arch_name), "%s", trn2 ? "trn2" : "trn1");
  std::snprintf(info->device_revision, sizeof(info->device_revision), "sim");
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_init(nrt_framework_type_t framework, const char* fw_version,
                            const char* fal_version) {
  (void)fw_version;
  (void)fal_version;
  std::lock_guard<std::mutex> lock(R().mu);
  if (framework < NRT_FRAMEWORK_TYPE_NO_FW || framework > NRT_FRAMEWORK_TYPE_PRECHECK)
    return Fail(NRT_INVALID, absl::StrCat("nrt_init: invalid framework type ", int(framework)));
  if (R().state == State::kInitialized)
    return Fail(NRT_INVALID, "nrt_init: the runtime is already initialized");
  R().state = State::kInitialized;
  const char* enable = std::getenv("NEURON_RT_INSPECT_ENABLE");
  if (enable && std::string(enable) == "1" && !R().inspect) {
    nrt_inspect_config options = InspectOptionsFromEnvironment();
    if (NRT_STATUS s = BeginInspect(options.output_dir, options); s != NRT_SUCCESS) {
      R().state = State::kUninitialized;
      return s;
    }
    R().inspect->from_environment = true;
  }
  return NRT_SUCCESS;
}

NRT_API void nrt_close(void) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (R().state != State::kInitialized) return;
  // A session the environment started is written here (the application never
  // calls nrt_inspect_stop); one started by nrt_inspect_begin*() is written
  // only by nrt_inspect_stop(), so an application that fails midway can drop it.
  if (R().inspect && R().inspect->from_environment) StopInspect();
  R().inspect.reset();
  for (nrt_model* m : R().models.All()) UnloadLocked(m);
  R().state = State::kClosed;
}

// ---------------------------------------------------------------------------
// Models

// Parses, verifies and prepares a model: everything that grows with the
// NEFF, run without the runtime-wide lock so that other threads' calls never
// wait for a load.
static NRT_STATUS BuildModel(const void* neff_bytes, size_t size, const std::string& simulated_target,
                      std::unique_ptr<nrt_model>* out) {
  uint64_t major = 0;
  if (nn::LooksLikeNeff(std::string_view(static_cast<const char*>(neff_bytes), size)) &&
      VersionMismatch(neff_bytes, size, &major))
    return Fail(NRT_UNSUPPORTED_NEFF_VERSION,
                absl::StrCat("nrt_load: NEFF version ", major, " is not supported (this runtime reads ",
                             nn::kVersionMajor, ")"));
  auto& m = *out;
  m = std::make_unique<nrt_model>();
  absl::StatusOr<nn::Neff> neff = nn::ParseNeff(std::string_view(static_cast<const char*>(neff_bytes), size));
  if (!neff.ok()) return Fail(NRT_INVALID, absl::StrCat("nrt_load: ", neff.status().message()));
  if (!neuroncc::json::IsValidUtf8(neff->header.name))
    return Fail(NRT_INVALID, "nrt_load: the NEFF header's name is not UTF-8 (the header is not covered by "
                             "the payload hash: a corrupted header)");
  m->neff = std::move(*neff);
  const nn::Executable& exe = m->neff.executable;
  // A race would make the simulated result one of several the device could
  // produce; refuse rather than report numbers the hardware might not match.
  const char* allow = std::getenv("NEURONCC_RT_ALLOW_RACES");
  if (!(allow && std::string(allow) == "1")) {
    for (const nn::Kernel& k : exe.kernels()) {
      absl::StatusOr<std::vector<nn::SbufRace>> races = nn::CheckSbufRaces(k, 1);
      if (!races.ok())
        return Fail(NRT_INVALID, absl::StrCat("nrt_load: ", races.status().message(),
                                              " (NEURONCC_RT_ALLOW_RACES=1 skips the check)"));
      if (!races->empty())
        return Fail(NRT_INVALID, absl::StrCat("nrt_load: ", (*races)[0].description,
                                              " (set NEURONCC_RT_ALLOW_RACES=1 to run it anyway)"));
    }
  }
  if (!simulated_target.empty() && exe.target() != simulated_target)
    return Fail(NRT_INVALID, absl::StrCat("nrt_load: the NEFF was compiled for ", exe.target(),
                                          " but the simulated instance is ", simulated_target));
  // Tensor sets bind by name, so names must identify inputs and outputs.
  for (bool inputs : {true, false}) {
    const auto& ids = inputs ? exe.graph_inputs() : exe.graph_outputs();
    auto& index = inputs ? m->input_index : m->output_index;
    for (int i = 0; i < ids.size(); ++i) {
      const std::string& name = exe.tensors(int(ids[i])).name();
      if (name.empty() || name.size() >= NRT_TENSOR_NAME_MAX)
        return Fail(NRT_INVALID, absl::StrCat("nrt_load: ", inputs ? "input " : "output ", i,
                                              " has an empty name or one of ", NRT_TENSOR_NAME_MAX,
                                              "+ characters"));
      // A C client names tensors by NUL-terminated strings, and names go
      // into JSON: a NUL inside or bytes that are not UTF-8 could never bind.
      if (name.find('\0') != std::string::npos || !neuroncc::json::IsValidUtf8(name))
        return Fail(NRT_INVALID, absl::StrCat("nrt_load: ", inputs ? "input " : "output ", i,
                                              " has a name with a NUL byte or bytes that are not UTF-8"));
      if (!index.emplace(name, size_t(i)).second)
        return Fail(NRT_INVALID, absl::StrCat("nrt_load: two ", inputs ? "inputs" : "outputs",
                                              " are named '", name, "'"));
    }
  }
  m->device = nn::DeviceForTarget(exe.target());
  absl::StatusOr<std::unique_ptr<rt::Executor>> ex = rt::Executor::Create(m->neff, *m->device);
  if (!ex.ok()) {
    NRT_STATUS code = absl::IsResourceExhausted(ex.status()) ? NRT_RESOURCE : NRT_INVALID;
    return Fail(code, absl::StrCat("nrt_load: ", ex.status().message()));
  }
  m->executor = std::move(*ex);
  m->hash = nn::ProfileHash(m->neff.header);
  m->vnc = 0;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_load(const void* neff_bytes, size_t size, int32_t vnc, int32_t vnc_count,
                            nrt_model_t** model) {
  uint64_t began = HostNowPs();
  std::string simulated_target;
  {
    std::lock_guard<std::mutex> lock(R().mu);
    if (NRT_STATUS s = CheckInitialized("nrt_load"); s != NRT_SUCCESS) return s;
    simulated_target = R().simulated_target;
  }
  if (!model) return Fail(NRT_INVALID, "nrt_load: model is NULL");
  *model = nullptr;
  if (!neff_bytes) return Fail(NRT_INVALID, "nrt_load: neff_bytes is NULL");
  if (vnc != -1 && vnc != 0)
    return Fail(NRT_LOAD_NOT_ENOUGH_NC,
                absl::StrCat("nrt_load: VNC ", vnc, " requested; only VNC 0 is simulated"));
  if (vnc_count != -1 && vnc_count != 1)
    return Fail(NRT_LOAD_NOT_ENOUGH_NC,
                absl::StrCat("nrt_load: vnc_count ", vnc_count, " requested; pass -1"));
  std::unique_ptr<nrt_model> m;
  if (NRT_STATUS s = BuildModel(neff_bytes, size, simulated_target, &m); s != NRT_SUCCESS) return s;
  std::lock_guard<std::mutex> lock(R().mu);
  // The runtime may have been closed while the model was being built.
  if (NRT_STATUS s = CheckInitialized("nrt_load"); s != NRT_SUCCESS) return s;
  nrt_model* loaded = m.release();
  loaded->handle = R().models.Add(loaded);
  *model = static_cast<nrt_model_t*>(loaded->handle);
  if (R().inspect && R().inspect->DeviceProfile()) InspectEntry(*R().inspect, loaded);
  TraceHostCall("nrt_load", began,
                absl::StrCat("{\"neff\":", neuroncc::json::Quote(loaded->neff.header.name),
                             ",\"neff_hash\":\"", loaded->hash, "\"}"));
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_unload(nrt_model_t* model) {
  std::lock_guard<std::mutex> lock(R().mu);
  uint64_t began = HostNowPs();
  if (NRT_STATUS s = CheckInitialized("nrt_unload"); s != NRT_SUCCESS) return s;
  if (NRT_STATUS s = CheckModel(model, "nrt_unload"); s != NRT_SUCCESS) return s;
  UnloadLocked(model);
  TraceHostCall("nrt_unload", began);
  return NRT_SUCCESS;
}

static NRT_STATUS ModelCount(const nrt_model_t* model, uint32_t* count, const char* fn) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (NRT_STATUS s = CheckInitialized(fn); s != NRT_SUCCESS) return s;
  if (NRT_STATUS s = CheckModel(model, fn); s != NRT_SUCCESS) return s;
  if (!count) return Fail(NRT_INVALID, absl::StrCat(fn, ": output pointer is NULL"));
  *count = 1;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_get_model_nc_count(const nrt_model_t* model, uint32_t* vnc_count) {
  return ModelCount(model, vnc_count, "nrt_get_model_nc_count");
}
NRT_API NRT_STATUS nrt_get_model_vnc_count(const nrt_model_t* model, uint32_t* vnc_count) {
  return ModelCount(model, vnc_count, "nrt_get_model_vnc_count");
}
NRT_API NRT_STATUS nrt_get_model_instance_count(nrt_model_t* model, uint32_t* instance_count) {
  return ModelCount(model, instance_count, "nrt_get_model_instance_count");
}

static NRT_STATUS CoreCount(uint32_t* count, const char* fn) {
  if (!count) {
    std::lock_guard<std::mutex> lock(R().mu);
    return Fail(NRT_INVALID, absl::StrCat(fn, ": output pointer is NULL"));
  }
  *count = 1;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_get_total_nc_count(uint32_t* c) { return CoreCount(c, "nrt_get_total_nc_count"); }
NRT_API NRT_STATUS nrt_get_total_vnc_count(uint32_t* c) { return CoreCount(c, "nrt_get_total_vnc_count"); }
NRT_API NRT_STATUS nrt_get_visible_nc_count(uint32_t* c) { return CoreCount(c, "nrt_get_visible_nc_count"); }
NRT_API NRT_STATUS nrt_get_visible_vnc_count(uint32_t* c) { return CoreCount(c, "nrt_get_visible_vnc_count"); }

NRT_API NRT_STATUS nrt_get_model_info(const nrt_model_t* model, nrt_model_info_t* info,
                                      size_t info_size_in, size_t* info_size_out) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (NRT_STATUS s = CheckInitialized("nrt_get_model_info"); s != NRT_SUCCESS) return s;
  if (NRT_STATUS s = CheckModel(model, "nrt_get_model_info"); s != NRT_SUCCESS) return s;
  if (!info) return Fail(NRT_INVALID, "nrt_get_model_info: info is NULL");
  nrt_model_info_t full{uint32_t(model->vnc)};
  size_t n = std::min(info_size_in, sizeof(full));
  std::memcpy(info, &full, n);
  if (info_size_out) *info_size_out = n;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_get_model_target(const nrt_model_t* model, char* target, char* name,
                                        size_t len) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (NRT_STATUS s = CheckInitialized("nrt_get_model_target"); s != NRT_SUCCESS) return s;
  if (NRT_STATUS s = CheckModel(model, "nrt_get_model_target"); s != NRT_SUCCESS) return s;
  const std::string& t = model->neff.executable.target();
  const std::string& n = model->neff.header.name;
  if ((target && t.size() >= len) || (name && n.size() >= len))
    return Fail(NRT_RESOURCE, absl::StrCat("nrt_get_model_target: buffers of ", len,
                                           " bytes are too small"));
  if (target) std::memcpy(target, t.c_str(), t.size() + 1);
  if (name) std::memcpy(name, n.c_str(), n.size() + 1);
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_get_model_tensor_is_bool(const nrt_model_t* model, const char* name, bool* is_bool) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (NRT_STATUS s = CheckInitialized("nrt_get_model_tensor_is_bool"); s != NRT_SUCCESS) return s;
  if (NRT_STATUS s = CheckModel(model, "nrt_get_model_tensor_is_bool"); s != NRT_SUCCESS) return s;
  if (!name || !is_bool) return Fail(NRT_INVALID, "nrt_get_model_tensor_is_bool: name or is_bool is NULL");
  const nn::Executable& exe = model->neff.executable;
  for (const auto* ids : {&exe.graph_inputs(), &exe.graph_outputs()})
    for (uint32_t id : *ids)
      if (exe.tensors(int(id)).name() == name) {
        *is_bool = exe.tensors(int(id)).dtype() == nn::BOOL;
        return NRT_SUCCESS;
      }
  return Fail(NRT_INVALID, absl::StrCat("nrt_get_model_tensor_is_bool: the model has no input or output '", name,
                                        "'"));
}

NRT_API NRT_STATUS nrt_get_model_tensor_info(nrt_model_t* model, nrt_tensor_info_array_t** tensor_info) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (NRT_STATUS s = CheckInitialized("nrt_get_model_tensor_info"); s != NRT_SUCCESS) return s;
  if (NRT_STATUS s = CheckModel(model, "nrt_get_model_tensor_info"); s != NRT_SUCCESS) return s;
  if (!tensor_info) return Fail(NRT_INVALID, "nrt_get_model_tensor_info: tensor_info is NULL");
  const nn::Executable& exe = model->neff.executable;
  std::vector<std::pair<const nn::Tensor*, nrt_tensor_usage_t>> list;
  for (uint32_t id : exe.graph_inputs()) list.push_back({&exe.tensors(int(id)), NRT_TENSOR_USAGE_INPUT});
  for (uint32_t id : exe.graph_outputs()) list.push_back({&exe.tensors(int(id)), NRT_TENSOR_USAGE_OUTPUT});
  size_t dims = 0;
  for (const auto& [t, usage] : list) {
    dims += size_t(t->shape_size());
    for (int64_t d : t->shape())
      if (d > int64_t(UINT32_MAX))
        return Fail(NRT_INVALID, absl::StrCat("nrt_get_model_tensor_info: tensor '", t->name(),
                                              "' has a dimension above 2^32"));
  }
  // One block: the header, the entries, then every shape array, so that a
  // single free() releases it all.
  size_t head = sizeof(nrt_tensor_info_array_t) + list.size() * sizeof(nrt_tensor_info_t);
  head = (head + alignof(uint32_t) - 1) / alignof(uint32_t) * alignof(uint32_t);
  auto* arr = static_cast<nrt_tensor_info_array_t*>(std::calloc(1, head + dims * sizeof(uint32_t) + 1));
  if (!arr) return Fail(NRT_RESOURCE, "nrt_get_model_tensor_info: out of memory");
  uint32_t* shapes = reinterpret_cast<uint32_t*>(reinterpret_cast<char*>(arr) + head);
  arr->tensor_count = list.size();
  for (size_t i = 0; i < list.size(); ++i) {
    const nn::Tensor& t = *list[i].first;
    nrt_tensor_info_t& info = arr->tensor_array[i];
    std::snprintf(info.name, sizeof(info.name), "%s", t.name().c_str());
    info.usage = list[i].second;
    info.size = size_t(t.size_bytes());
    info.dtype = ToNrtDtype(t.dtype());
    info.ndim = uint32_t(t.shape_size());
    info.shape = shapes;
    for (int64_t d : t.shape()) *shapes++ = uint32_t(d);
  }
  *tensor_info = arr;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_free_model_tensor_info(nrt_tensor_info_array_t* tensor_info) {
  std::free(tensor_info);
  return NRT_SUCCESS;
}

// ---------------------------------------------------------------------------
// Tensor sets

NRT_API NRT_STATUS nrt_allocate_tensor_set(nrt_tensor_set_t** result) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (!result) return Fail(NRT_INVALID, "nrt_allocate_tensor_set: result is NULL");
  *result = R().sets.Add(new TensorSet);
  return NRT_SUCCESS;
}

NRT_API void nrt_destroy_tensor_set(nrt_tensor_set_t** tensor_set) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (!tensor_set || !*tensor_set) return;
  delete R().sets.Take(*tensor_set);
  *tensor_set = nullptr;
}

// Checks a tensor set handle and replaces it with the set itself.
template <typename S>
static NRT_STATUS CheckSet(S*& set, const char* fn) {
  if (!set) return Fail(NRT_INVALID, absl::StrCat(fn, ": tensor set is NULL"));
  TensorSet* object = R().sets.Find(set);
  if (!object) return Fail(NRT_INVALID_HANDLE, absl::StrCat(fn, ": not a live tensor set"));
  set = object;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_add_tensor_to_tensor_set(nrt_tensor_set_t* tensor_set, const char* tensor_name,
                                                nrt_tensor_t* tensor) {
  std::lock_guard<std::mutex> lock(R().mu);
  const char* fn = "nrt_add_tensor_to_tensor_set";
  if (NRT_STATUS s = CheckSet(tensor_set, fn); s != NRT_SUCCESS) return s;
  if (!tensor_name || !*tensor_name) return Fail(NRT_INVALID, absl::StrCat(fn, ": empty tensor name"));
  nrt_tensor_t* handle = tensor;  // the set keeps the handle, checked again at execution
  if (NRT_STATUS s = CheckTensor(tensor, fn); s != NRT_SUCCESS) return s;
  static_cast<TensorSet*>(tensor_set)->tensors[tensor_name] = handle;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_get_tensor_from_tensor_set(nrt_tensor_set_t* tensor_set, const char* tensor_name,
                                                  nrt_tensor_t** tensor) {
  std::lock_guard<std::mutex> lock(R().mu);
  const char* fn = "nrt_get_tensor_from_tensor_set";
  if (NRT_STATUS s = CheckSet(tensor_set, fn); s != NRT_SUCCESS) return s;
  if (!tensor_name || !tensor) return Fail(NRT_INVALID, absl::StrCat(fn, ": NULL argument"));
  auto& tensors = static_cast<TensorSet*>(tensor_set)->tensors;
  auto it = tensors.find(tensor_name);
  if (it == tensors.end())
    return Fail(NRT_INVALID, absl::StrCat(fn, ": no tensor named '", tensor_name, "' in the set"));
  *tensor = it->second;
  return NRT_SUCCESS;
}

// ---------------------------------------------------------------------------
// Execution

namespace {

NRT_STATUS ExecuteRepeat(nrt_model_t* model, const nrt_tensor_set_t* input_set, nrt_tensor_set_t* output_set,
                         int repeat_count, bool timing_only, const char* fn) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (NRT_STATUS s = CheckInitialized(fn); s != NRT_SUCCESS) return s;
  if (NRT_STATUS s = CheckModel(model, fn); s != NRT_SUCCESS) return s;
  if (!timing_only || input_set)
    if (NRT_STATUS s = CheckSet(input_set, fn); s != NRT_SUCCESS) return s;
  if (!timing_only || output_set)
    if (NRT_STATUS s = CheckSet(output_set, fn); s != NRT_SUCCESS) return s;
  if (repeat_count < 1) return Fail(NRT_INVALID, absl::StrCat(fn, ": repeat_count ", repeat_count));
  for (int i = 0; i < repeat_count; ++i) {
    NRT_STATUS s = ExecuteLocked(model, static_cast<const TensorSet*>(input_set),
                                 static_cast<TensorSet*>(output_set), timing_only);
    if (s != NRT_SUCCESS) return s;
  }
  return NRT_SUCCESS;
}

}  // namespace

NRT_API NRT_STATUS nrt_execute_repeat(nrt_model_t* model, const nrt_tensor_set_t* input_set,
                                      nrt_tensor_set_t* output_set, int repeat_count) {
  return ExecuteRepeat(model, input_set, output_set, repeat_count, false, "nrt_execute_repeat");
}

NRT_API NRT_STATUS nrt_execute(nrt_model_t* model, const nrt_tensor_set_t* input_set,
                               nrt_tensor_set_t* output_set) {
  return ExecuteRepeat(model, input_set, output_set, 1, false, "nrt_execute");
}

NRT_API NRT_STATUS nrt_execute_timing_only(nrt_model_t* model, const nrt_tensor_set_t* input_set,
                                           nrt_tensor_set_t* output_set, int repeat_count) {
  return ExecuteRepeat(model, input_set, output_set, repeat_count, true, "nrt_execute_timing_only");
}

NRT_API NRT_STATUS nrt_get_last_execution_stats(const nrt_model_t* model, nrt_execution_stats_t* stats,
                                                size_t stats_size_in, size_t* stats_size_out) {
  std::lock_guard<std::mutex> lock(R().mu);
  const char* fn = "nrt_get_last_execution_stats";
  if (NRT_STATUS s = CheckInitialized(fn); s != NRT_SUCCESS) return s;
  if (NRT_STATUS s = CheckModel(model, fn); s != NRT_SUCCESS) return s;
  if (!stats) return Fail(NRT_INVALID, absl::StrCat(fn, ": stats is NULL"));
  if (!model->executed) return Fail(NRT_INVALID, absl::StrCat(fn, ": the model has not executed yet"));
  const rt::ExecutionStats& e = model->executor->stats();
  nrt_execution_stats_t full{e.device_time_ps,    e.launch_overhead_ps, e.kernel_count,
                             e.instruction_count, e.hbm_read_bytes,     e.hbm_write_bytes,
                             model->hash,         e.dispatch_count,     model->last_timing_only};
  size_t n = std::min(stats_size_in, sizeof(full));
  std::memcpy(stats, &full, n);
  if (stats_size_out) *stats_size_out = n;
  return NRT_SUCCESS;
}

// ---------------------------------------------------------------------------
// Tensors

NRT_API NRT_STATUS nrt_tensor_allocate(nrt_tensor_placement_t tensor_placement, int vnc, size_t size,
                                       const char* name, nrt_tensor_t** tensor) {
  std::lock_guard<std::mutex> lock(R().mu);
  const char* fn = "nrt_tensor_allocate";
  if (NRT_STATUS s = CheckInitialized(fn); s != NRT_SUCCESS) return s;
  if (!tensor) return Fail(NRT_INVALID, absl::StrCat(fn, ": tensor is NULL"));
  *tensor = nullptr;
  if (tensor_placement < NRT_TENSOR_PLACEMENT_DEVICE || tensor_placement > NRT_TENSOR_PLACEMENT_VIRTUAL)
    return Fail(NRT_INVALID, absl::StrCat(fn, ": invalid placement ", int(tensor_placement)));
  if (vnc != -1 && vnc != 0)
    return Fail(NRT_INVALID, absl::StrCat(fn, ": VNC ", vnc, " does not exist (only 0 is simulated)"));
  if (size == 0) return Fail(NRT_INVALID, absl::StrCat(fn, ": size is 0"));
  auto t = std::make_unique<nrt_tensor>();
  t->name = name ? name : "";
  t->placement = tensor_placement;
  t->size = size;
  t->storage = std::make_shared<TensorStorage>();
  t->storage->data = static_cast<uint8_t*>(std::calloc(size, 1));
  t->storage->owned = true;
  if (!t->storage->data)
    return Fail(NRT_RESOURCE, absl::StrCat(fn, ": cannot allocate ", size, " bytes"));
  *tensor = static_cast<nrt_tensor_t*>(R().tensors.Add(t.release()));
  return NRT_SUCCESS;
}

NRT_API void nrt_tensor_free(nrt_tensor_t** tensor) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (!tensor || !*tensor) return;
  delete R().tensors.Take(*tensor);
  *tensor = nullptr;
}

NRT_API NRT_STATUS nrt_tensor_read(const nrt_tensor_t* tensor, void* buf, size_t offset, size_t size) {
  std::lock_guard<std::mutex> lock(R().mu);
  const char* fn = "nrt_tensor_read";
  if (NRT_STATUS s = CheckTensor(tensor, fn); s != NRT_SUCCESS) return s;
  if (!buf && size) return Fail(NRT_INVALID, absl::StrCat(fn, ": buf is NULL"));
  if (NRT_STATUS s = CheckRange(tensor, offset, size, fn); s != NRT_SUCCESS) return s;
  if (size) std::memcpy(buf, tensor->data() + offset, size);
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_tensor_write(nrt_tensor_t* tensor, const void* buf, size_t offset, size_t size) {
  std::lock_guard<std::mutex> lock(R().mu);
  const char* fn = "nrt_tensor_write";
  if (NRT_STATUS s = CheckTensor(tensor, fn); s != NRT_SUCCESS) return s;
  if (!buf && size) return Fail(NRT_INVALID, absl::StrCat(fn, ": buf is NULL"));
  if (NRT_STATUS s = CheckRange(tensor, offset, size, fn); s != NRT_SUCCESS) return s;
  if (size) std::memcpy(tensor->data() + offset, buf, size);
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_tensor_copy(const nrt_tensor_t* src, size_t src_offset, nrt_tensor_t* dst,
                                   size_t dst_offset, size_t size) {
  std::lock_guard<std::mutex> lock(R().mu);
  const char* fn = "nrt_tensor_copy";
  if (NRT_STATUS s = CheckTensor(src, fn); s != NRT_SUCCESS) return s;
  if (NRT_STATUS s = CheckTensor(dst, fn); s != NRT_SUCCESS) return s;
  if (NRT_STATUS s = CheckRange(src, src_offset, size, fn); s != NRT_SUCCESS) return s;
  if (NRT_STATUS s = CheckRange(dst, dst_offset, size, fn); s != NRT_SUCCESS) return s;
  if (size) std::memmove(dst->data() + dst_offset, src->data() + src_offset, size);
  return NRT_SUCCESS;
}

namespace {

NRT_STATUS TensorBatch(const nrt_tensor_batch_t* batches, uint64_t num_batches, bool write, const char* fn) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (NRT_STATUS s = CheckInitialized(fn); s != NRT_SUCCESS) return s;
  if (!batches && num_batches) return Fail(NRT_INVALID, absl::StrCat(fn, ": batches is NULL"));
  for (uint64_t b = 0; b < num_batches; ++b) {
    const nrt_tensor* t = batches[b].tensor;
    const std::string where = absl::StrCat(fn, " (batch ", b, ")");
    if (NRT_STATUS s = CheckTensor(t, where.c_str()); s != NRT_SUCCESS) return s;
    if (!batches[b].ops && batches[b].num_ops)
      return Fail(NRT_INVALID, absl::StrCat(where, ": ops is NULL"));
    for (uint32_t i = 0; i < batches[b].num_ops; ++i) {
      const nrt_tensor_batch_op_t& op = batches[b].ops[i];
      if (!op.buffer && op.size) return Fail(NRT_INVALID, absl::StrCat(where, " op ", i, ": buffer is NULL"));
      if (op.offset > t->size || op.size > t->size - op.offset)
        return Fail(NRT_INVALID, absl::StrCat(where, " op ", i, ": bytes [", op.offset, ", ", op.offset, "+",
                                              op.size, ") outside tensor '", t->name, "' of ", t->size, " bytes"));
    }
  }
  // Everything checked: now copy (the handles resolve as they just did).
  for (uint64_t b = 0; b < num_batches; ++b) {
    const nrt_tensor* t = batches[b].tensor;
    CheckTensor(t, fn);
    for (uint32_t i = 0; i < batches[b].num_ops; ++i) {
      const nrt_tensor_batch_op_t& op = batches[b].ops[i];
      if (!op.size) continue;
      uint8_t* at = t->data() + op.offset;
      if (write)
        std::memmove(at, op.buffer, size_t(op.size));
      else
        std::memmove(op.buffer, at, size_t(op.size));
    }
  }
  return NRT_SUCCESS;
}

}  // namespace

NRT_API NRT_STATUS nrt_tensor_read_batch(const nrt_tensor_batch_t* batches, uint64_t num_batches, bool) {
  return TensorBatch(batches, num_batches, false, "nrt_tensor_read_batch");
}

NRT_API NRT_STATUS nrt_tensor_write_batch(const nrt_tensor_batch_t* batches, uint64_t num_batches, bool) {
  return TensorBatch(batches, num_batches, true, "nrt_tensor_write_batch");
}

NRT_API NRT_STATUS nrt_tensor_memset(nrt_tensor_t* tensor, uint64_t offset, int value, size_t size) {
  std::lock_guard<std::mutex> lock(R().mu);
  const char* fn = "nrt_tensor_memset";
  if (NRT_STATUS s = CheckTensor(tensor, fn); s != NRT_SUCCESS) return s;
  if (offset > SIZE_MAX) return Fail(NRT_INVALID, absl::StrCat(fn, ": offset too large"));
  if (NRT_STATUS s = CheckRange(tensor, size_t(offset), size, fn); s != NRT_SUCCESS) return s;
  if (size) std::memset(tensor->data() + offset, value, size);
  return NRT_SUCCESS;
}

NRT_API size_t nrt_tensor_get_size(const nrt_tensor_t* tensor) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (CheckTensor(tensor, "nrt_tensor_get_size") != NRT_SUCCESS) return 0;
  return tensor->size;
}

NRT_API void* nrt_tensor_get_va(const nrt_tensor_t* tensor) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (CheckTensor(tensor, "nrt_tensor_get_va") != NRT_SUCCESS) return nullptr;
  return tensor->data();
}

NRT_API NRT_STATUS nrt_tensor_allocate_empty(const char* name, nrt_tensor_t** tensor) {
  std::lock_guard<std::mutex> lock(R().mu);
  const char* fn = "nrt_tensor_allocate_empty";
  if (NRT_STATUS s = CheckInitialized(fn); s != NRT_SUCCESS) return s;
  if (!tensor) return Fail(NRT_INVALID, absl::StrCat(fn, ": tensor is NULL"));
  auto t = std::make_unique<nrt_tensor>();
  t->name = name ? name : "";
  *tensor = static_cast<nrt_tensor_t*>(R().tensors.Add(t.release()));
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_tensor_attach_buffer(nrt_tensor_t* tensor, void* buffer, size_t size) {
  std::lock_guard<std::mutex> lock(R().mu);
  const char* fn = "nrt_tensor_attach_buffer";
  if (NRT_STATUS s = CheckTensor(tensor, fn); s != NRT_SUCCESS) return s;
  if (!buffer) return Fail(NRT_INVALID, absl::StrCat(fn, ": buffer is NULL"));
  if (size == 0) return Fail(NRT_INVALID, absl::StrCat(fn, ": size is 0"));
  // The storage it had goes when no slice points into it any more.
  tensor->storage = std::make_shared<TensorStorage>();
  tensor->storage->data = static_cast<uint8_t*>(buffer);
  tensor->storage->owned = false;
  tensor->offset = 0;
  tensor->size = size;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_tensor_allocate_slice(const nrt_tensor_t* tensor_source, size_t offset, size_t size,
                                             const char* name, nrt_tensor_t** tensor_slice) {
  std::lock_guard<std::mutex> lock(R().mu);
  const char* fn = "nrt_tensor_allocate_slice";
  if (NRT_STATUS s = CheckInitialized(fn); s != NRT_SUCCESS) return s;
  if (!tensor_slice) return Fail(NRT_INVALID, absl::StrCat(fn, ": tensor_slice is NULL"));
  *tensor_slice = nullptr;
  if (NRT_STATUS s = CheckTensor(tensor_source, fn); s != NRT_SUCCESS) return s;
  if (!tensor_source->storage) return Fail(NRT_INVALID, absl::StrCat(fn, ": the source tensor has no storage"));
  if (size == 0) return Fail(NRT_INVALID, absl::StrCat(fn, ": size is 0"));
  if (NRT_STATUS s = CheckRange(tensor_source, offset, size, fn); s != NRT_SUCCESS) return s;
  auto t = std::make_unique<nrt_tensor>();
  t->name = name ? name : "";
  t->placement = tensor_source->placement;
  t->storage = tensor_source->storage;
  t->offset = tensor_source->offset + offset;
  t->size = size;
  *tensor_slice = static_cast<nrt_tensor_t*>(R().tensors.Add(t.release()));
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_tensor_check_output_completion(const nrt_tensor_t* output_tensor, int64_t timeout,
                                                      uint64_t expected_completion_count) {
  std::unique_lock<std::mutex> lock(R().mu);
  const char* fn = "nrt_tensor_check_output_completion";
  const nrt_tensor_t* handle = output_tensor;
  if (NRT_STATUS s = CheckTensor(output_tensor, fn); s != NRT_SUCCESS) return s;
  // Executions are synchronous here, so the count can only grow through
  // another thread's nrt_execute; wait for that up to `timeout` microseconds
  // (forever if negative), the handle checked again after every wake-up.
  auto reached = [&] {
    return !R().tensors.Find(handle) || output_tensor->completions >= expected_completion_count;
  };
  if (timeout < 0) {
    R().completed.wait(lock, reached);
  } else {
    R().completed.wait_for(lock, std::chrono::microseconds(timeout), reached);
  }
  if (!R().tensors.Find(handle))
    return Fail(NRT_INVALID_HANDLE, absl::StrCat(fn, ": the tensor was freed while waiting"));
  if (output_tensor->completions < expected_completion_count)
    return Fail(NRT_TIMEOUT, absl::StrCat(fn, ": ", output_tensor->completions, " of ", expected_completion_count,
                                          " executions completed within ", timeout, " us"));
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_tensor_reset_output_completion(nrt_tensor_t* output_tensor) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (NRT_STATUS s = CheckTensor(output_tensor, "nrt_tensor_reset_output_completion"); s != NRT_SUCCESS) return s;
  output_tensor->completions = 0;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_get_version(nrt_version_t* ver, size_t size) {
  if (!ver) return Fail(NRT_INVALID, "nrt_get_version: ver is NULL");
  nrt_version_t v{};
  v.rt_major = NRT_MAJOR_VERSION;
  v.rt_minor = NRT_MINOR_VERSION;
  std::snprintf(v.rt_detail, sizeof(v.rt_detail), "neuron-cc simulated NeuronCore runtime %s", kRuntimeVersion);
  std::snprintf(v.git_hash, sizeof(v.git_hash), "%s", "");
  std::memcpy(ver, &v, std::min(size, sizeof(v)));  // a smaller struct of an older caller gets its part
  return NRT_SUCCESS;
}

// ---------------------------------------------------------------------------
// Profiling

NRT_API NRT_STATUS nrt_profile_start(nrt_model_t* model, const char* filename) {
  std::lock_guard<std::mutex> lock(R().mu);
  const char* fn = "nrt_profile_start";
  if (NRT_STATUS s = CheckInitialized(fn); s != NRT_SUCCESS) return s;
  if (NRT_STATUS s = CheckModel(model, fn); s != NRT_SUCCESS) return s;
  if (!filename || !*filename) return Fail(NRT_INVALID, absl::StrCat(fn, ": empty filename"));
  for (const Capture& c : R().captures) {
    if (c.model == model)
      return Fail(NRT_INVALID, absl::StrCat(fn, ": the model is already being profiled into '",
                                            c.filename, "'"));
    if (c.filename == filename)
      return Fail(NRT_INVALID, absl::StrCat(fn, ": '", filename, "' is already a profile target"));
  }
  R().captures.push_back({model, filename, rt::NewProfile(model->neff, *model->device)});
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_profile_stop(const char* filename) {
  std::lock_guard<std::mutex> lock(R().mu);
  const char* fn = "nrt_profile_stop";
  if (!filename) return Fail(NRT_INVALID, absl::StrCat(fn, ": filename is NULL"));
  auto& caps = R().captures;
  auto it = std::find_if(caps.begin(), caps.end(), [&](const Capture& c) { return c.filename == filename; });
  if (it == caps.end())
    return Fail(NRT_INVALID, absl::StrCat(fn, ": no nrt_profile_start() wrote to '", filename, "'"));
  if (it->profile.execution_count() == 0) {
    // A trace of nothing would be a file no viewer can show: none is written.
    caps.erase(it);
    return Fail(NRT_INVALID, absl::StrCat(fn, ": no execution was captured since nrt_profile_start(); nothing "
                                              "was written to '", filename, "'"));
  }
  std::string bytes = ntff::SerializeNtff(it->profile);
  caps.erase(it);
  if (absl::Status st = nn::WriteFileAtomic(filename, bytes); !st.ok())
    return Fail(NRT_FAILURE, absl::StrCat(fn, ": ", st.message()));
  return NRT_SUCCESS;
}

namespace {

// The options objects of the profiling calls: allocated with their defaults.
template <typename Options>
NRT_STATUS AllocateOptions(Options** options, const char* fn) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (!options) return Fail(NRT_INVALID, absl::StrCat(fn, ": options is NULL"));
  *options = new (std::nothrow) Options;
  return *options ? NRT_SUCCESS : Fail(NRT_RESOURCE, absl::StrCat(fn, ": out of memory"));
}

template <typename Options>
NRT_STATUS SetOutputDir(Options* options, const char* output_dir, const char* fn) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (!options) return Fail(NRT_INVALID, absl::StrCat(fn, ": options is NULL"));
  if (!output_dir || !*output_dir) return Fail(NRT_INVALID, absl::StrCat(fn, ": empty directory"));
  options->output_dir = output_dir;
  return NRT_SUCCESS;
}

// Ends a capture held in `slot`; NRT_INVALID when none is running.
template <typename Capture>
NRT_STATUS EndCapture(std::unique_ptr<Capture>& slot, const char* fn, const char* what) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (!slot) return Fail(NRT_INVALID, absl::StrCat(fn, ": ", what, " is not running"));
  slot.reset();
  return NRT_SUCCESS;
}

}  // namespace

NRT_API NRT_STATUS nrt_profile_continuous_options_allocate(nrt_profile_continuous_options_t** options) {
  return AllocateOptions(options, "nrt_profile_continuous_options_allocate");
}

NRT_API NRT_STATUS nrt_profile_continuous_options_free(nrt_profile_continuous_options_t* options) {
  delete options;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_profile_continuous_options_set_output_dir(nrt_profile_continuous_options_t* options,
                                                                const char* output_dir) {
  return SetOutputDir(options, output_dir, "nrt_profile_continuous_options_set_output_dir");
}

NRT_API NRT_STATUS nrt_profile_continuous_start(nrt_profile_continuous_options_t* options) {
  (void)options;  // (the output directory is the one given to each save)
  std::lock_guard<std::mutex> lock(R().mu);
  if (R().continuous) return Fail(NRT_INVALID, "nrt_profile_continuous_start: continuous profiling is already running");
  if (R().inspect && R().inspect->DeviceProfile())
    return Fail(NRT_INVALID, "nrt_profile_continuous_start: an inspect session is capturing device profiles");
  R().continuous = std::make_unique<Continuous>();
  return NRT_SUCCESS;
}

// Writes the latest execution on `vnc` as <H>_instid_<i>_vnc_<vnc>.ntff, i the
// first index not taken in the directory, beside a copy of its NEFF.
NRT_API NRT_STATUS nrt_profile_continuous_save(uint32_t vnc, nrt_profile_continuous_options_t* options) {
  std::lock_guard<std::mutex> lock(R().mu);
  const char* fn = "nrt_profile_continuous_save";
  if (!R().continuous) return Fail(NRT_INVALID, absl::StrCat(fn, ": continuous profiling is not running"));
  auto it = vnc <= uint32_t(INT32_MAX) ? R().continuous->latest.find(int32_t(vnc)) : R().continuous->latest.end();
  if (it == R().continuous->latest.end())
    return Fail(NRT_INVALID, absl::StrCat(fn, ": nothing executed on VNC ", vnc,
                                          " since continuous profiling started"));
  const Continuous::Latest& latest = it->second;
  const nrt_profile_continuous_options defaults;
  const std::string& dir = (options ? *options : defaults).output_dir;
  if (absl::Status st = neuroncc::files::MakeDirs(dir); !st.ok())
    return Fail(NRT_FAILURE, absl::StrCat(fn, ": ", st.message()));
  std::string ntff_path;
  for (uint32_t instance = 0;; ++instance) {
    ntff_path = absl::StrCat(dir, "/", ntff::NtffFileName(latest.hash, instance, vnc));
    struct stat info;
    if (stat(ntff_path.c_str(), &info) != 0) break;
  }
  absl::Status st = nn::WriteFileAtomic(absl::StrCat(dir, "/", ntff::NeffFileName(latest.hash)), latest.image);
  if (st.ok()) st = nn::WriteFileAtomic(ntff_path, ntff::SerializeNtff(latest.profile));
  if (!st.ok()) return Fail(NRT_FAILURE, absl::StrCat(fn, ": ", st.message()));
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_profile_continuous_stop(void) {
  return EndCapture(R().continuous, "nrt_profile_continuous_stop", "continuous profiling");
}

NRT_API NRT_STATUS nrt_inspect_config_allocate(nrt_inspect_config_t** options) {
  return AllocateOptions(options, "nrt_inspect_config_allocate");
}

NRT_API NRT_STATUS nrt_inspect_config_set_defaults(nrt_inspect_config_t* options) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (!options) return Fail(NRT_INVALID, "nrt_inspect_config_set_defaults: options is NULL");
  *options = nrt_inspect_config{};
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_inspect_config_free(nrt_inspect_config_t* options) {
  delete options;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_inspect_config_set_output_dir(nrt_inspect_config_t* options,
                                                     const char* output_dir) {
  return SetOutputDir(options, output_dir, "nrt_inspect_config_set_output_dir");
}

NRT_API NRT_STATUS nrt_inspect_begin_with_options(nrt_inspect_config_t* options) {
  std::lock_guard<std::mutex> lock(R().mu);
  const nrt_inspect_config defaults;
  return BeginInspect(options ? options->output_dir : defaults.output_dir, options ? *options : defaults);
}

NRT_API NRT_STATUS nrt_inspect_begin(void) {
  std::lock_guard<std::mutex> lock(R().mu);
  nrt_inspect_config options = InspectOptionsFromEnvironment();
  return BeginInspect(options.output_dir, options);
}

NRT_API NRT_STATUS nrt_inspect_stop(void) {
  std::lock_guard<std::mutex> lock(R().mu);
  return StopInspect();
}

NRT_API NRT_STATUS nrt_inspect_get_time(uint64_t* session_ps) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (!session_ps) return Fail(NRT_INVALID, "nrt_inspect_get_time: output pointer is NULL");
  if (!R().inspect) return Fail(NRT_INVALID, "nrt_inspect_get_time: no profiling session is running");
  *session_ps = SessionPs(R().inspect->system, HostNowPs());
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_inspect_add_framework_event(const char* name, uint64_t start_ps, uint64_t end_ps,
                                                   const char* const* arg_keys,
                                                   const char* const* arg_values, size_t arg_count) {
  static constexpr const char* kFn = "nrt_inspect_add_framework_event";
  static constexpr size_t kMaxString = 4096, kMaxArgs = 64;
  auto bad = [](const char* s, bool may_be_empty) {
    if (!s) return true;
    std::string_view v(s, strnlen(s, kMaxString + 1));
    return (v.empty() && !may_be_empty) || v.size() > kMaxString || !neuroncc::json::IsValidUtf8(v);
  };
  std::lock_guard<std::mutex> lock(R().mu);
  if (!R().inspect) return Fail(NRT_INVALID, absl::StrCat(kFn, ": no profiling session is running"));
  if (bad(name, false))
    return Fail(NRT_INVALID, absl::StrCat(kFn, ": the name must be non-empty UTF-8 of at most ",
                                          kMaxString, " bytes"));
  if (end_ps < start_ps)
    return Fail(NRT_INVALID, absl::StrCat(kFn, ": '", name, "' ends (", end_ps, " ps) before it starts (",
                                          start_ps, " ps)"));
  if (arg_count > kMaxArgs) return Fail(NRT_INVALID, absl::StrCat(kFn, ": more than ", kMaxArgs, " arguments"));
  if (arg_count && (!arg_keys || !arg_values))
    return Fail(NRT_INVALID, absl::StrCat(kFn, ": argument arrays are NULL"));
  std::string args;
  for (size_t i = 0; i < arg_count; ++i) {
    if (bad(arg_keys[i], false) || bad(arg_values[i], true))
      return Fail(NRT_INVALID, absl::StrCat(kFn, ": argument ", i, ": keys must be non-empty and values ",
                                            "UTF-8, each at most ", kMaxString, " bytes"));
    absl::StrAppend(&args, i ? "," : "{", neuroncc::json::Quote(arg_keys[i]), ":",
                    neuroncc::json::Quote(arg_values[i]));
  }
  if (!args.empty()) args += "}";
  if (R().inspect->SystemProfile())
    R().inspect->system.trace.Add(rt::SystemTrace::kFramework, "application", name, start_ps, end_ps - start_ps,
                                  std::move(args));
  return NRT_SUCCESS;
}

namespace {

const std::vector<std::pair<std::string, uint32_t>>& ActivityTypes() {
  static const std::vector<std::pair<std::string, uint32_t>> kTypes = {
      {"system_profile", kSystemProfile}, {"device_profile", kDeviceProfile}, {"host_memory", kHostMemory},
      {"cpu_util", kCpuUtil}};
  return kTypes;
}

// A malloc'ed array of malloc'ed copies, as the public API hands out
// string lists (the caller may free them with free() or the matching
// nrt_*_free_* function).
NRT_STATUS StringList(const std::vector<std::string>& names, const char*** out, size_t* count, const char* fn) {
  if (!out || !count) return Fail(NRT_INVALID, absl::StrCat(fn, ": output pointer is NULL"));
  *out = nullptr;
  *count = 0;
  auto** list = static_cast<const char**>(std::calloc(names.empty() ? 1 : names.size(), sizeof(char*)));
  if (!list) return Fail(NRT_RESOURCE, absl::StrCat(fn, ": out of memory"));
  for (size_t i = 0; i < names.size(); ++i) {
    list[i] = strdup(names[i].c_str());
    if (!list[i]) {
      for (size_t j = 0; j < i; ++j) std::free(const_cast<char*>(list[j]));
      std::free(list);
      return Fail(NRT_RESOURCE, absl::StrCat(fn, ": out of memory"));
    }
  }
  *out = list;
  *count = names.size();
  return NRT_SUCCESS;
}

void FreeStringList(const char** list, size_t count) {
  if (!list) return;
  for (size_t i = 0; i < count; ++i) std::free(const_cast<char*>(list[i]));
  std::free(list);
}

NRT_STATUS SetEventType(rt::TraceFilter& filter, const char* event_type, bool enabled, const char* fn) {
  const std::vector<std::string>& types = rt::SystemTraceEventTypes();
  if (!event_type || std::find(types.begin(), types.end(), event_type) == types.end())
    return Fail(NRT_INVALID, absl::StrCat(fn, ": unknown event type '", event_type ? event_type : "(null)",
                                          "' (types: ", absl::StrJoin(types, ", "), ")"));
  if (enabled) filter.disabled_types.erase(event_type);
  else filter.disabled_types.insert(event_type);
  return NRT_SUCCESS;
}

void SetNc(rt::TraceFilter& filter, uint32_t nc, bool enabled) {
  if (enabled) filter.disabled_ncs.erase(nc);
  else filter.disabled_ncs.insert(nc);
}

std::vector<std::string> EnabledEventTypes(const rt::TraceFilter& filter) {
  std::vector<std::string> v;
  for (const std::string& t : rt::SystemTraceEventTypes())
    if (!filter.disabled_types.count(t)) v.push_back(t);
  return v;
}

}  // namespace

#define NRT_CHECK_OPTIONS(fn)                                              \
  std::lock_guard<std::mutex> lock(R().mu);                                \
  if (!options) return Fail(NRT_INVALID, fn ": options is NULL")

NRT_API NRT_STATUS nrt_inspect_config_set_session_id(nrt_inspect_config_t* options, int session_id) {
  NRT_CHECK_OPTIONS("nrt_inspect_config_set_session_id");
  options->session_id = session_id;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_inspect_config_set_sys_trace_max_events_per_nc(nrt_inspect_config_t* options,
                                                                      uint64_t sys_trace_max_events_per_nc) {
  NRT_CHECK_OPTIONS("nrt_inspect_config_set_sys_trace_max_events_per_nc");
  options->sys_trace.max_events_per_nc =
      sys_trace_max_events_per_nc ? sys_trace_max_events_per_nc : rt::TraceFilter::kDefaultMaxEventsPerNc;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_inspect_config_set_capture_enabled_for_nc(nrt_inspect_config_t* options, uint32_t nc_idx,
                                                                bool enabled) {
  NRT_CHECK_OPTIONS("nrt_inspect_config_set_capture_enabled_for_nc");
  SetNc(options->sys_trace, nc_idx, enabled);
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_inspect_config_set_capture_enabled_for_event_type_string(nrt_inspect_config_t* options,
                                                                               const char* event_type,
                                                                               bool enabled) {
  NRT_CHECK_OPTIONS("nrt_inspect_config_set_capture_enabled_for_event_type_string");
  return SetEventType(options->sys_trace, event_type, enabled,
                      "nrt_inspect_config_set_capture_enabled_for_event_type_string");
}

NRT_API NRT_STATUS nrt_inspect_config_set_enable_inspect(nrt_inspect_config_t* options, bool enable_inspect) {
  NRT_CHECK_OPTIONS("nrt_inspect_config_set_enable_inspect");
  options->enable_inspect = enable_inspect;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_inspect_config_set_enable_inspect_on_fail(nrt_inspect_config_t* options,
                                                                bool enable_inspect_on_fail) {
  NRT_CHECK_OPTIONS("nrt_inspect_config_set_enable_inspect_on_fail");
  options->enable_inspect_on_fail = enable_inspect_on_fail;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_inspect_config_set_activity(nrt_inspect_config_t* options, const char* activity_type,
                                                  bool enabled) {
  NRT_CHECK_OPTIONS("nrt_inspect_config_set_activity");
  uint32_t bits = 0;
  if (activity_type && std::string(activity_type) == "all") bits = kAllActivities;
  for (const auto& [name, bit] : ActivityTypes())
    if (activity_type && name == activity_type) bits = bit;
  if (!bits)
    return Fail(NRT_INVALID, absl::StrCat("nrt_inspect_config_set_activity: unknown activity type '",
                                          activity_type ? activity_type : "(null)",
                                          "' (system_profile, device_profile, host_memory, cpu_util, all)"));
  if (enabled) options->activities |= bits;
  else options->activities &= ~bits;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_inspect_config_get_all_activity_types(const char*** activity_types, size_t* count) {
  std::lock_guard<std::mutex> lock(R().mu);
  std::vector<std::string> names;
  for (const auto& [name, bit] : ActivityTypes()) names.push_back(name);
  return StringList(names, activity_types, count, "nrt_inspect_config_get_all_activity_types");
}

NRT_API NRT_STATUS nrt_inspect_config_get_enabled_activity_types(nrt_inspect_config_t* options,
                                                                const char*** activity_types, size_t* count) {
  NRT_CHECK_OPTIONS("nrt_inspect_config_get_enabled_activity_types");
  std::vector<std::string> names;
  for (const auto& [name, bit] : ActivityTypes())
    if (options->activities & bit) names.push_back(name);
  return StringList(names, activity_types, count, "nrt_inspect_config_get_enabled_activity_types");
}

NRT_API void nrt_inspect_config_free_activity_types(const char** activity_types, size_t count) {
  FreeStringList(activity_types, count);
}

// ---------------------------------------------------------------------------
// System trace (nrt/nrt_sys_trace.h): the events a trace.json would hold,
// kept in memory per NeuronCore and handed out as the same JSON.

NRT_API NRT_STATUS nrt_sys_trace_config_allocate(nrt_sys_trace_config_t** options) {
  return AllocateOptions(options, "nrt_sys_trace_config_allocate");
}

NRT_API void nrt_sys_trace_config_set_defaults(nrt_sys_trace_config_t* options) {
  if (options) *options = nrt_sys_trace_config{};
}

NRT_API void nrt_sys_trace_config_free(nrt_sys_trace_config_t* options) { delete options; }

NRT_API void nrt_sys_trace_config_set_max_events_per_nc(nrt_sys_trace_config_t* options,
                                                        uint64_t max_events_per_nc) {
  if (options)
    options->filter.max_events_per_nc = max_events_per_nc ? max_events_per_nc : rt::TraceFilter::kDefaultMaxEventsPerNc;
}

NRT_API void nrt_sys_trace_config_set_capture_enabled_for_nc(nrt_sys_trace_config_t* options, uint32_t nc_idx,
                                                            bool enabled) {
  if (options) SetNc(options->filter, nc_idx, enabled);
}

NRT_API NRT_STATUS nrt_sys_trace_config_set_capture_enabled_for_event_type(nrt_sys_trace_config_t* options,
                                                                          const char* event_type, bool enabled) {
  NRT_CHECK_OPTIONS("nrt_sys_trace_config_set_capture_enabled_for_event_type");
  return SetEventType(options->filter, event_type, enabled, "nrt_sys_trace_config_set_capture_enabled_for_event_type");
}

NRT_API NRT_STATUS nrt_sys_trace_get_event_types(const char*** event_types, size_t* count) {
  std::lock_guard<std::mutex> lock(R().mu);
  return StringList(rt::SystemTraceEventTypes(), event_types, count, "nrt_sys_trace_get_event_types");
}

NRT_API void nrt_sys_trace_free_event_types(const char** event_types, size_t count) {
  FreeStringList(event_types, count);
}

NRT_API NRT_STATUS nrt_sys_trace_config_get_enabled_event_types(nrt_sys_trace_config_t* options,
                                                               const char*** event_types, size_t* count) {
  NRT_CHECK_OPTIONS("nrt_sys_trace_config_get_enabled_event_types");
  return StringList(EnabledEventTypes(options->filter), event_types, count,
                    "nrt_sys_trace_config_get_enabled_event_types");
}

NRT_API NRT_STATUS nrt_sys_trace_start(nrt_sys_trace_config_t* options) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (R().sys_trace) return Fail(NRT_INVALID, "nrt_sys_trace_start: a system trace capture is already running");
  auto session = std::make_unique<TraceSession>();
  session->origin_ps = HostNowPs();
  session->trace.SetFilter(options ? options->filter : rt::TraceFilter{});
  R().sys_trace = std::move(session);
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_sys_trace_stop(void) {
  return EndCapture(R().sys_trace, "nrt_sys_trace_stop", "a system trace capture");
}

NRT_API NRT_STATUS nrt_sys_trace_fetch_options_allocate(nrt_sys_trace_fetch_options_t** options) {
  return AllocateOptions(options, "nrt_sys_trace_fetch_options_allocate");
}

NRT_API void nrt_sys_trace_fetch_options_set_defaults(nrt_sys_trace_fetch_options_t* options) {
  if (options) *options = nrt_sys_trace_fetch_options{};
}

NRT_API void nrt_sys_trace_fetch_options_free(nrt_sys_trace_fetch_options_t* options) { delete options; }

NRT_API void nrt_sys_trace_fetch_options_set_max_events_per_nc(nrt_sys_trace_fetch_options_t* options,
                                                              uint64_t max_events_per_nc) {
  if (options) options->max_events_per_nc = max_events_per_nc;
}

NRT_API void nrt_sys_trace_fetch_options_set_nc_idx(nrt_sys_trace_fetch_options_t* options, uint64_t nc_idx) {
  if (options) options->nc = nc_idx > UINT32_MAX ? UINT32_MAX : uint32_t(nc_idx);
}

NRT_API NRT_STATUS nrt_sys_trace_fetch_events(char** buffer, size_t* written_size,
                                             const nrt_sys_trace_fetch_options_t* options) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (!buffer || !written_size) return Fail(NRT_INVALID, "nrt_sys_trace_fetch_events: output pointer is NULL");
  *buffer = nullptr;
  *written_size = 0;
  if (!R().sys_trace) return Fail(NRT_INVALID, "nrt_sys_trace_fetch_events: no system trace capture is running");
  const nrt_sys_trace_fetch_options defaults;
  const nrt_sys_trace_fetch_options& o = options ? *options : defaults;
  std::string json = R().sys_trace->trace.Take(o.max_events_per_nc, o.nc).Render();
  char* out = static_cast<char*>(std::malloc(json.size() + 1));
  if (!out) return Fail(NRT_RESOURCE, "nrt_sys_trace_fetch_events: out of memory");
  std::memcpy(out, json.c_str(), json.size() + 1);
  *buffer = out;
  *written_size = json.size();
  return NRT_SUCCESS;
}

NRT_API void nrt_sys_trace_buffer_free(char* buffer) { std::free(buffer); }

#undef NRT_CHECK_OPTIONS

// ---------------------------------------------------------------------------
// The rest of the public surface (see nrt.h): a world of one device.

namespace {

NRT_STATUS Unsupported(const char* fn, const char* why) {
  return Fail(NRT_INVALID, absl::StrCat(fn, ": not supported by the simulated NeuronCore (", why, ")"));
}

NRT_STATUS CheckWorldOfOne(const char* fn, int64_t vnc, uint32_t device_id, uint32_t device_count) {
  if (vnc != -1 && vnc != 0)
    return Fail(NRT_INVALID, absl::StrCat(fn, ": VNC ", vnc, " does not exist (only 0 is simulated)"));
  if (device_count != 1 || device_id != 0)
    return Fail(NRT_INVALID, absl::StrCat(fn, ": device ", device_id, " of ", device_count,
                                          ": one device is simulated, so collectives span a world of one "
                                          "(device 0 of 1)"));
  return NRT_SUCCESS;
}

}  // namespace

NRT_API NRT_STATUS nrt_load_collectives(const void* neff_bytes, size_t size, int32_t vnc, int32_t vnc_count,
                                        uint32_t ctx_device_id, uint32_t ctx_device_count, nrt_model_t** model) {
  if (model) *model = nullptr;
  if (NRT_STATUS s = CheckWorldOfOne("nrt_load_collectives", vnc, ctx_device_id, ctx_device_count);
      s != NRT_SUCCESS)
    return s;
  return nrt_load(neff_bytes, size, vnc, vnc_count, model);
}

NRT_API NRT_STATUS nrt_build_global_comm(int32_t vnc, uint32_t g_device_id, uint32_t g_device_count) {
  {
    std::lock_guard<std::mutex> lock(R().mu);
    if (NRT_STATUS s = CheckInitialized("nrt_build_global_comm"); s != NRT_SUCCESS) return s;
  }
  return CheckWorldOfOne("nrt_build_global_comm", vnc, g_device_id, g_device_count);
}

NRT_API NRT_STATUS nrt_cc_global_comm_init(uint32_t vnc, uint32_t g_device_id, uint32_t g_device_count) {
  {
    std::lock_guard<std::mutex> lock(R().mu);
    if (NRT_STATUS s = CheckInitialized("nrt_cc_global_comm_init"); s != NRT_SUCCESS) return s;
  }
  return CheckWorldOfOne("nrt_cc_global_comm_init", int64_t(vnc), g_device_id, g_device_count);
}

NRT_API NRT_STATUS nrt_barrier(int32_t vnc, uint32_t g_device_id, uint32_t g_device_count) {
  {
    std::lock_guard<std::mutex> lock(R().mu);
    if (NRT_STATUS s = CheckInitialized("nrt_barrier"); s != NRT_SUCCESS) return s;
  }
  return CheckWorldOfOne("nrt_barrier", vnc, g_device_id, g_device_count);
}

NRT_API NRT_STATUS nrt_all_gather(int32_t vnc, uint32_t g_device_id, uint32_t g_device_count,
                                  uint32_t rank_input_size, void* input, void* output) {
  {
    std::lock_guard<std::mutex> lock(R().mu);
    if (NRT_STATUS s = CheckInitialized("nrt_all_gather"); s != NRT_SUCCESS) return s;
  }
  if (NRT_STATUS s = CheckWorldOfOne("nrt_all_gather", vnc, g_device_id, g_device_count); s != NRT_SUCCESS)
    return s;
  if (rank_input_size && (!input || !output))
    return Fail(NRT_INVALID, "nrt_all_gather: input or output is NULL");
  if (rank_input_size) std::memmove(output, input, rank_input_size);
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_register_async_exec_callback(NRT_ASYNC_EXEC_STATUS_CALLBACK callback, void* params) {
  std::lock_guard<std::mutex> lock(R().mu);
  R().async_callback = callback;
  R().async_callback_params = params;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_async_drain_queued_execs(int32_t vnc) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (NRT_STATUS s = CheckInitialized("nrt_async_drain_queued_execs"); s != NRT_SUCCESS) return s;
  if (vnc != 0)
    return Fail(NRT_INVALID, absl::StrCat("nrt_async_drain_queued_execs: VNC ", vnc, " does not exist (only 0 is simulated)"));
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_memcpy_to_device(void* dest, const void* src, size_t size) {
  std::lock_guard<std::mutex> lock(R().mu);
  const char* fn = "nrt_memcpy_to_device";
  if (NRT_STATUS s = CheckInitialized(fn); s != NRT_SUCCESS) return s;
  if (size == 0) return NRT_SUCCESS;
  if (!dest || !src) return Fail(NRT_INVALID, absl::StrCat(fn, ": dest or src is NULL"));
  const auto d = reinterpret_cast<uintptr_t>(dest);
  for (const nrt_tensor* t : R().tensors.All()) {
    const auto begin = reinterpret_cast<uintptr_t>(t->data());
    if (!t->data() || d < begin || d - begin > t->size || size > t->size - (d - begin)) continue;
    std::memmove(dest, src, size);
    return NRT_SUCCESS;
  }
  return Fail(NRT_INVALID, absl::StrCat(fn, ": [dest, dest + ", size, ") is not within an allocated tensor"));
}

NRT_API NRT_STATUS nrt_trace_start(bool trace_mem) {
  (void)trace_mem;  // no memory allocation events are recorded
  std::lock_guard<std::mutex> lock(R().mu);
  if (R().legacy_trace) return Fail(NRT_INVALID, "nrt_trace_start: tracing is already running");
  R().legacy_trace = std::make_unique<TraceSession>();
  R().legacy_trace->origin_ps = HostNowPs();
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_trace_stop(const char* filename) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (!R().legacy_trace) return Fail(NRT_INVALID, "nrt_trace_stop: tracing is not running");
  if (!filename || !*filename) return Fail(NRT_INVALID, "nrt_trace_stop: empty filename");
  // On a failed write the tracing goes on, its events kept for another try.
  if (absl::Status st = nn::WriteFileAtomic(filename, R().legacy_trace->trace.Render()); !st.ok())
    return Fail(NRT_FAILURE, absl::StrCat("nrt_trace_stop: ", st.message()));
  R().legacy_trace.reset();
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_tensor_get_device_allocation_info(const nrt_tensor_t* tensor,
                                                         nrt_tensor_device_allocation_info_t* alloc_info) {
  std::lock_guard<std::mutex> lock(R().mu);
  const char* fn = "nrt_tensor_get_device_allocation_info";
  if (NRT_STATUS s = CheckTensor(tensor, fn); s != NRT_SUCCESS) return s;
  if (!alloc_info) return Fail(NRT_INVALID, absl::StrCat(fn, ": alloc_info is NULL"));
  if (!tensor->data()) return Fail(NRT_INVALID, absl::StrCat(fn, ": the tensor has no storage attached"));
  alloc_info->physical_address = reinterpret_cast<uint64_t>(tensor->data());
  alloc_info->size = tensor->size;
  alloc_info->hbm_index = 0;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_get_vnc_memory_stats(uint32_t vnc, nrt_vnc_memory_stats_t* stats, size_t stats_size_in,
                                            size_t* stats_size_out) {
  std::lock_guard<std::mutex> lock(R().mu);
  const char* fn = "nrt_get_vnc_memory_stats";
  if (NRT_STATUS s = CheckInitialized(fn); s != NRT_SUCCESS) return s;
  if (vnc != 0) return Fail(NRT_INVALID, absl::StrCat(fn, ": VNC ", vnc, " does not exist (only 0 is simulated)"));
  if (!stats) return Fail(NRT_INVALID, absl::StrCat(fn, ": stats is NULL"));
  nrt_vnc_memory_stats_t full{0, size_t(16) << 30};  // trn1: 32 GiB of HBM per chip, two NeuronCores
  // Each owned storage once, however many slices share it: its extent is the
  // furthest byte any tensor over it reaches.
  std::map<const TensorStorage*, size_t> storages;
  for (const nrt_tensor* t : R().tensors.All())
    if (t->placement == NRT_TENSOR_PLACEMENT_DEVICE && t->storage && t->storage->owned) {
      size_t& extent = storages[t->storage.get()];
      extent = std::max(extent, t->offset + t->size);
    }
  for (const auto& [storage, extent] : storages) full.bytes_used += extent;
  for (const nrt_model* m : R().models.All()) {
    full.bytes_used += m->neff.executable.arena_bytes();
    for (const nn::ConstantSegment& seg : m->neff.executable.segments()) full.bytes_used += seg.size();
  }
  size_t n = std::min(stats_size_in, sizeof(full));
  std::memcpy(stats, &full, n);
  if (stats_size_out) *stats_size_out = n;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_host_device_id_get(int neuron_dev, uint32_t* host_device_id) {
  const char* fn = "nrt_host_device_id_get";
  if (!host_device_id) return Fail(NRT_INVALID, absl::StrCat(fn, ": host_device_id is NULL"));
  if (neuron_dev != 0)
    return Fail(NRT_INVALID, absl::StrCat(fn, ": device ", neuron_dev, " does not exist (one device is simulated)"));
  *host_device_id = 0;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_host_device_id_rid_map_get(uint32_t* count, uint32_t* host_did_to_rid_map) {
  const char* fn = "nrt_host_device_id_rid_map_get";
  if (!count || !host_did_to_rid_map) return Fail(NRT_INVALID, absl::StrCat(fn, ": count or the map is NULL"));
  if (*count < 1) return Fail(NRT_INVALID, absl::StrCat(fn, ": the map has no room for the one device"));
  host_did_to_rid_map[0] = 0;
  *count = 1;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_set_pool_eng_ucode(const nrt_ucode_info*) {
  return Unsupported("nrt_set_pool_eng_ucode", "the simulated engines load no microcode");
}

NRT_API void* nrt_get_libnccl_net(int* err, char* err_msg, size_t err_msg_size) {
  static constexpr char kWhy[] = "nrt_get_libnccl_net: the simulated device has no network plugin";
  if (err) *err = 1;
  if (err_msg && err_msg_size) std::snprintf(err_msg, err_msg_size, "%s", kWhy);
  Fail(NRT_INVALID, kWhy);
  return nullptr;
}

// Point-to-point transfers between hosts (nrt_async_sendrecv.h): no network.
NRT_API NRT_STATUS nrt_async_sendrecv_get_max_num_communicators_per_lnc(int* num) {
  if (!num) return Fail(NRT_INVALID, "nrt_async_sendrecv_get_max_num_communicators_per_lnc: num is NULL");
  *num = 0;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrt_async_sendrecv_get_max_num_pending_request(int* num) {
  if (!num) return Fail(NRT_INVALID, "nrt_async_sendrecv_get_max_num_pending_request: num is NULL");
  *num = 0;
  return NRT_SUCCESS;
}

namespace {
constexpr char kNoNetwork[] = "the simulated device has no network to send tensors over";
}  // namespace

NRT_API NRT_STATUS nrt_async_sendrecv_init(int) { return Unsupported("nrt_async_sendrecv_init", kNoNetwork); }
NRT_API NRT_STATUS nrt_async_sendrecv_close(int) { return Unsupported("nrt_async_sendrecv_close", kNoNetwork); }
NRT_API NRT_STATUS nrt_async_sendrecv_flush(int) { return Unsupported("nrt_async_sendrecv_flush", kNoNetwork); }

NRT_API NRT_STATUS nrt_async_sendrecv_connect(const char*, int, int, nrt_async_sendrecv_comm_t** send_comm) {
  if (send_comm) *send_comm = nullptr;
  return Unsupported("nrt_async_sendrecv_connect", kNoNetwork);
}

NRT_API NRT_STATUS nrt_async_sendrecv_accept(const char*, int, int, nrt_async_sendrecv_comm_t** recv_comm) {
  if (recv_comm) *recv_comm = nullptr;
  return Unsupported("nrt_async_sendrecv_accept", kNoNetwork);
}

NRT_API NRT_STATUS nrt_async_sendrecv_test_comm(nrt_async_sendrecv_comm_t*, bool* done) {
  if (done) *done = false;
  return Unsupported("nrt_async_sendrecv_test_comm", kNoNetwork);
}

NRT_API NRT_STATUS nrt_async_sendrecv_send_tensor(nrt_tensor_t*, size_t, size_t, nrt_async_sendrecv_comm_t*,
                                                  nrt_async_sendrecv_request_t** request) {
  if (request) *request = nullptr;
  return Unsupported("nrt_async_sendrecv_send_tensor", kNoNetwork);
}

NRT_API NRT_STATUS nrt_async_sendrecv_recv_tensor(nrt_tensor_t*, size_t, size_t, nrt_async_sendrecv_comm_t*,
                                                  nrt_async_sendrecv_request_t** request) {
  if (request) *request = nullptr;
  return Unsupported("nrt_async_sendrecv_recv_tensor", kNoNetwork);
}

NRT_API NRT_STATUS nrt_async_sendrecv_test_request(nrt_async_sendrecv_request_t*, bool* done, size_t* size) {
  if (done) *done = false;
  if (size) *size = 0;
  return Unsupported("nrt_async_sendrecv_test_request", kNoNetwork);
}

NRT_API NRT_STATUS nrt_get_dmabuf_fd(uint64_t, uint64_t, int* fd) {
  if (fd) *fd = -1;
  return Unsupported("nrt_get_dmabuf_fd", "tensors live in host memory; there is no device memory to export");
}

NRT_API NRT_STATUS nrt_get_hbm_mmap_va(int, int, void** addr, size_t* size) {
  if (addr) *addr = nullptr;
  if (size) *size = 0;
  return Unsupported("nrt_get_hbm_mmap_va", "the simulated HBM is not a device region that can be mapped");
}

NRT_API NRT_STATUS nrt_get_attached_efa_bdf(const void*, char*, size_t*) {
  return Unsupported("nrt_get_attached_efa_bdf", "no EFA network adapter is attached to a simulated device");
}

// ---------------------------------------------------------------------------
// Asynchronous requests (nrt/nrt_async.h): each runs to completion when it
// is scheduled.

struct nrta_error_tracker {
  std::vector<nrta_error_t> errors;
};

struct nrt_cc_context {
  std::vector<std::pair<nrt_tensor_t*, nrt_tensor_t*>> pairs;  // input -> output handles
  std::vector<size_t> bytes;
};

namespace {

constexpr int kMaxAsyncQueue = 255;

struct AsyncRequests {
  std::mutex mu;                       // held while a request runs: each unit's order is strict
  std::map<uint16_t, uint64_t> last;  // execution unit id -> last sequence number handed out
};

AsyncRequests& Async() {
  static AsyncRequests* a = new AsyncRequests;
  return *a;
}

uint16_t XuId(nrta_xu_t xu, int queue) { return uint16_t((uint32_t(xu) << 8) | uint32_t(queue)); }

// Statuses that refuse a request (nothing ran) rather than report a failed run.
bool Refusal(NRT_STATUS s) {
  return s == NRT_INVALID || s == NRT_INVALID_HANDLE || s == NRT_UNINITIALIZED || s == NRT_CLOSED;
}

template <typename Work>
NRT_STATUS Schedule(nrta_xu_t xu, int queue, bool queueZeroOnly, nrta_error_tracker_t* err, nrta_seq_t* req,
                    const char* fn, Work work) {
  if (queue < 0 || queue > (queueZeroOnly ? 0 : kMaxAsyncQueue)) {
    std::lock_guard<std::mutex> lock(R().mu);
    return Fail(NRT_INVALID, absl::StrCat(fn, ": queue ", queue, queueZeroOnly ? " (must be 0)" : " (0 to 255)"));
  }
  std::lock_guard<std::mutex> lock(Async().mu);
  NRT_STATUS status = work();
  if (Refusal(status)) return status;
  const uint16_t id = XuId(xu, queue);
  const nrta_seq_t seq = (nrta_seq_t(id) << 48) | ++Async().last[id];
  if (req) *req = seq;
  if (status != NRT_SUCCESS && err) err->errors.push_back({seq, uint64_t(status)});
  return NRT_SUCCESS;
}

// Whether `seq` was handed out.
bool KnownSequence(nrta_seq_t seq) {
  std::lock_guard<std::mutex> lock(Async().mu);
  auto it = Async().last.find(uint16_t(NRTA_SEQ_GET_XU_ID(seq)));
  uint64_t n = NRTA_SEQ_GET_SEQ_NUM(seq);
  return it != Async().last.end() && n >= 1 && n <= it->second;
}

NRT_STATUS InvalidSequence(const char* fn, nrta_seq_t seq) {
  std::lock_guard<std::mutex> lock(R().mu);
  return Fail(NRT_INVALID, absl::StrCat(fn, ": sequence id ", seq, " was never handed out"));
}

}  // namespace

NRT_API NRT_STATUS nrta_tensor_write(nrt_tensor_t* tensor, const void* buf, uint64_t offset, uint64_t size, int queue,
                                     nrta_error_tracker_t* err, nrta_seq_t* req_sequence) {
  return Schedule(NRTA_XU_TENSOR_WRITE, queue, false, err, req_sequence, "nrta_tensor_write",
                  [&] { return nrt_tensor_write(tensor, buf, size_t(offset), size_t(size)); });
}

NRT_API NRT_STATUS nrta_tensor_read(void* buf, nrt_tensor_t* tensor, uint64_t offset, uint64_t size, int queue,
                                    nrta_error_tracker_t* err, nrta_seq_t* req_sequence) {
  return Schedule(NRTA_XU_TENSOR_READ, queue, false, err, req_sequence, "nrta_tensor_read",
                  [&] { return nrt_tensor_read(tensor, buf, size_t(offset), size_t(size)); });
}

NRT_API NRT_STATUS nrta_tensor_copy(nrt_tensor_t* src, uint64_t src_offset, nrt_tensor_t* dst, uint64_t dst_offset,
                                    uint64_t size, int queue, nrta_error_tracker_t* err, nrta_seq_t* req_sequence) {
  return Schedule(NRTA_XU_TENSOR_OP, queue, false, err, req_sequence, "nrta_tensor_copy", [&] {
    return nrt_tensor_copy(src, size_t(src_offset), dst, size_t(dst_offset), size_t(size));
  });
}

NRT_API NRT_STATUS nrta_execute_schedule(nrt_model_t* model, const nrt_tensor_set_t* input, nrt_tensor_set_t* output,
                                         int queue, nrta_error_tracker_t* err, nrta_seq_t* req_sequence) {
  return Schedule(NRTA_XU_COMPUTE, queue, true, err, req_sequence, "nrta_execute_schedule",
                  [&] { return nrt_execute(model, input, output); });
}

NRT_API NRT_STATUS nrta_cc_prepare(nrt_cc_comm_t* comm, nrt_tensor_list_t* input, nrt_tensor_list_t* output,
                                   nrt_dtype_t dtype, nrt_op_type_t op, nrt_cc_op_type_t cc_op,
                                   nrt_cc_context_t** cc_ctx) {
  const char* fn = "nrta_cc_prepare";
  std::lock_guard<std::mutex> lock(R().mu);
  if (!cc_ctx) return Fail(NRT_INVALID, absl::StrCat(fn, ": cc_ctx is NULL"));
  *cc_ctx = nullptr;
  if (NRT_STATUS s = CheckInitialized(fn); s != NRT_SUCCESS) return s;
  if (!comm || !input || !output) return Fail(NRT_INVALID, absl::StrCat(fn, ": comm, input or output is NULL"));
  if (comm->rank_n != 1 || comm->rank != 0 || !comm->replica_group || comm->replica_group[0] != 0 ||
      comm->ctx_device_count != 1 || comm->ctx_device_id != 0 || comm->vnc != 0)
    return Fail(NRT_INVALID, absl::StrCat(fn, ": rank ", comm->rank, " of ", comm->rank_n, ", device ",
                                          comm->ctx_device_id, " of ", comm->ctx_device_count,
                                          ": one device is simulated, so collectives span a world of one "
                                          "(rank 0 of 1, device 0 of 1, VNC 0)"));
  if (cc_op != NRT_CC_ALLGATHER && cc_op != NRT_CC_ALLREDUCE && cc_op != NRT_CC_REDUCESCATTER)
    return Fail(NRT_INVALID, absl::StrCat(fn, ": unknown collective ", int(cc_op)));
  if (cc_op != NRT_CC_ALLGATHER && op != NRT_OP_ADD && op != NRT_OP_FMA && op != NRT_OP_MAX && op != NRT_OP_MIN)
    return Fail(NRT_INVALID, absl::StrCat(fn, ": unknown reduction ", int(op)));
  (void)dtype;  // one rank: the bytes are copied, whatever their type
  if (input->num_tensors != output->num_tensors || (input->num_tensors && (!input->tensors || !output->tensors)))
    return Fail(NRT_INVALID, absl::StrCat(fn, ": ", input->num_tensors, " inputs and ", output->num_tensors,
                                          " outputs (one output for each input)"));
  auto ctx = std::make_unique<nrt_cc_context>();
  for (size_t i = 0; i < input->num_tensors; ++i) {
    const nrt_tensor* in = input->tensors[i];
    const nrt_tensor* out = output->tensors[i];
    if (NRT_STATUS s = CheckTensor(in, fn); s != NRT_SUCCESS) return s;
    if (NRT_STATUS s = CheckTensor(out, fn); s != NRT_SUCCESS) return s;
    if (in->size != out->size)
      return Fail(NRT_INVALID, absl::StrCat(fn, ": tensor pair ", i, ": ", in->size, " input bytes, ", out->size,
                                            " output bytes (one rank: the same)"));
    ctx->pairs.push_back({input->tensors[i], output->tensors[i]});
    ctx->bytes.push_back(in->size);
  }
  *cc_ctx = ctx.release();
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrta_cc_schedule(nrt_cc_context_t** cc_ctx, int queue, nrta_error_tracker_t* err,
                                    nrta_seq_t* req_sequence) {
  if (!cc_ctx || !*cc_ctx) {
    std::lock_guard<std::mutex> lock(R().mu);
    return Fail(NRT_INVALID, "nrta_cc_schedule: no collective context");
  }
  NRT_STATUS s = Schedule(NRTA_XU_COLLECTIVES, queue, true, err, req_sequence, "nrta_cc_schedule", [&] {
    for (size_t i = 0; i < (*cc_ctx)->pairs.size(); ++i)
      if (NRT_STATUS c = nrt_tensor_copy((*cc_ctx)->pairs[i].first, 0, (*cc_ctx)->pairs[i].second, 0,
                                         (*cc_ctx)->bytes[i]);
          c != NRT_SUCCESS)
        return c;
    return NRT_SUCCESS;
  });
  if (s == NRT_SUCCESS) {  // a refused request keeps its context for another try
    delete *cc_ctx;
    *cc_ctx = nullptr;
  }
  return s;
}

NRT_API NRT_STATUS nrta_is_completed(nrta_seq_t seq, bool* is_completed) {
  if (!is_completed) {
    std::lock_guard<std::mutex> lock(R().mu);
    return Fail(NRT_INVALID, "nrta_is_completed: is_completed is NULL");
  }
  *is_completed = false;
  if (!KnownSequence(seq)) return InvalidSequence("nrta_is_completed", seq);
  *is_completed = true;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrta_get_sequence(uint32_t lnc, nrta_xu_t xu, int queue, nrta_seq_t* seq) {
  if (!seq || lnc != 0 || int(xu) < 0 || xu >= NRTA_XU_TYPE_NUM || queue < 0 || queue > kMaxAsyncQueue) {
    std::lock_guard<std::mutex> lock(R().mu);
    return Fail(NRT_INVALID, absl::StrCat("nrta_get_sequence: LNC ", lnc, ", unit ", int(xu), ", queue ", queue,
                                          seq ? "" : ", seq NULL", ": LNC 0, a unit below NRTA_XU_TYPE_NUM and "
                                          "queue 0 to 255 exist"));
  }
  std::lock_guard<std::mutex> lock(Async().mu);
  const uint16_t id = XuId(xu, queue);
  auto it = Async().last.find(id);
  *seq = (nrta_seq_t(id) << 48) | (it == Async().last.end() ? 0 : it->second);
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrta_get_completion_handle(nrta_seq_t seq, int* fd) {
  if (!fd) {
    std::lock_guard<std::mutex> lock(R().mu);
    return Fail(NRT_INVALID, "nrta_get_completion_handle: fd is NULL");
  }
  *fd = -1;
  if (!KnownSequence(seq)) return InvalidSequence("nrta_get_completion_handle", seq);
  int handle = eventfd(1, EFD_CLOEXEC);  // readable from the start: the request is complete
  if (handle < 0) {
    std::lock_guard<std::mutex> lock(R().mu);
    return Fail(NRT_RESOURCE, absl::StrCat("nrta_get_completion_handle: eventfd: ", std::strerror(errno)));
  }
  *fd = handle;
  return NRT_SUCCESS;
}

NRT_API NRT_STATUS nrta_error_tracker_create(uint32_t lnc_idx, nrta_error_tracker_t** error_tracker) {
  std::lock_guard<std::mutex> lock(R().mu);
  if (!error_tracker) return Fail(NRT_INVALID, "nrta_error_tracker_create: error_tracker is NULL");
  *error_tracker = nullptr;
  if (lnc_idx != 0)
    return Fail(NRT_INVALID, absl::StrCat("nrta_error_tracker_create: LNC ", lnc_idx, " does not exist (only 0)"));
  *error_tracker = new (std::nothrow) nrta_error_tracker;
  return *error_tracker ? NRT_SUCCESS : Fail(NRT_RESOURCE, "nrta_error_tracker_create: out of memory");
}

NRT_API void nrta_error_tracker_destroy(nrta_error_tracker_t* error_tracker) {
  std::lock_guard<std::mutex> lock(Async().mu);  // not while a request writes to it
  delete error_tracker;
}

NRT_API NRT_STATUS nrta_error_tracker_get_list(nrta_error_tracker_t* error_tracker, const nrta_error_t** list,
                                               size_t* error_count) {
  if (!error_tracker || !list || !error_count) {
    std::lock_guard<std::mutex> lock(R().mu);
    return Fail(NRT_INVALID, "nrta_error_tracker_get_list: an argument is NULL");
  }
  std::lock_guard<std::mutex> lock(Async().mu);
  *list = error_tracker->errors.empty() ? nullptr : error_tracker->errors.data();
  *error_count = error_tracker->errors.size();
  return NRT_SUCCESS;
}
