"""libnrt's C API from Python (ctypes), the way an application uses it:
nrt_init, nrt_load, tensors and tensor sets, nrt_execute, and the profiling
session calls (nrt_inspect_*). One runtime per process, shared by everything
here (`runtime()`); the library is found by `find_libnrt()`.

Only the standard library is needed; numpy and torch are the callers' business.
"""
import ctypes
import ctypes.util
import os
import statistics
import threading
import time

# nrt_tensor_info_t (nrt/nrt_experimental.h).
NRT_TENSOR_NAME_MAX = 256

# nrt_dtype_t (nrt/nrt.h), the public numeric values.
DTYPE_NAMES = {0xA: "float32", 0x7: "float16", 0x6: "bfloat16", 0x8: "int32", 0xC: "int64", 0x4: "int16",
               0x2: "int8", 0x3: "uint8"}  # NRT_DTYPE_UINT8 is also bool: nrt_get_model_tensor_is_bool tells
# nrt_execution_stats_t (nrt/nrt_ext.h).
_STATS_FIELDS = ["device_time_ps", "launch_overhead_ps", "kernel_count", "instruction_count", "hbm_read_bytes",
                 "hbm_write_bytes", "profile_hash", "dispatch_count", "timing_only"]


class LibnrtNotFoundError(RuntimeError):
    """No libnrt shared library where neuron-cc looks for one."""


class NrtError(RuntimeError):
    """An nrt_* call failed; the message is the runtime's."""

    def __init__(self, what, status_name, message):
        super().__init__("%s: %s (%s)" % (what, status_name, message))
        self.status = status_name
        self.message = message


class _TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * NRT_TENSOR_NAME_MAX), ("usage", ctypes.c_int), ("size", ctypes.c_size_t),
                ("dtype", ctypes.c_int), ("shape", ctypes.POINTER(ctypes.c_uint32)), ("ndim", ctypes.c_uint32)]


class _TensorInfoArray(ctypes.Structure):
    _fields_ = [("tensor_count", ctypes.c_uint64), ("tensor_array", _TensorInfo * 0)]


class _ExecutionStats(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in _STATS_FIELDS]


def _repo_build_dir():
    """The build/ of the source tree this package sits in, or None when installed elsewhere."""
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    if os.path.isfile(os.path.join(root, "CMakeLists.txt")) and os.path.isdir(os.path.join(root, "runtime")):
        return os.path.join(root, "build")
    return None


def find_libnrt():
    """The libnrt.so to use: $NEURONCC_LIBNRT, else $NEURONCC_BUILD_DIR/lib,
    else the source tree's build/lib, else the system's library path."""
    tried = []
    explicit = os.environ.get("NEURONCC_LIBNRT")
    if explicit:
        if os.path.isfile(explicit):
            return explicit
        raise LibnrtNotFoundError("NEURONCC_LIBNRT=%s: no such file" % explicit)
    for build in [os.environ.get("NEURONCC_BUILD_DIR"), _repo_build_dir()]:
        if build:
            path = os.path.join(build, "lib", "libnrt.so")
            if os.path.isfile(path):
                return path
            tried.append(path)
    found = ctypes.util.find_library("nrt")
    if found:
        return found
    tried.append("the system library path (ldconfig)")
    raise LibnrtNotFoundError("libnrt.so not found (looked at %s); build neuron-cc (scripts/build.sh), or set "
                              "NEURONCC_BUILD_DIR to its build directory or NEURONCC_LIBNRT to the library"
                              % ", ".join(tried))


class Libnrt:
    """The C API of one loaded libnrt, initialized once (nrt_init)."""

    def __init__(self, path):
        try:
            self.lib = lib = ctypes.CDLL(path)
        except OSError as e:
            raise LibnrtNotFoundError("libnrt at %s could not be loaded: %s" % (path, e)) from e
        self.path = path
        vp, sz, u64 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint64
        pp = ctypes.POINTER(vp)
        lib.nrt_get_status_as_str.restype = ctypes.c_char_p
        lib.nrt_get_last_error_message.restype = ctypes.c_char_p
        lib.nrt_load.argtypes = [ctypes.c_char_p, sz, ctypes.c_int32, ctypes.c_int32, pp]
        lib.nrt_unload.argtypes = [vp]
        lib.nrt_tensor_allocate.argtypes = [ctypes.c_int, ctypes.c_int, sz, ctypes.c_char_p, pp]
        lib.nrt_tensor_free.argtypes = [pp]
        lib.nrt_tensor_free.restype = None
        lib.nrt_destroy_tensor_set.restype = None
        lib.nrt_tensor_write.argtypes = [vp, vp, sz, sz]
        lib.nrt_tensor_read.argtypes = [vp, vp, sz, sz]
        lib.nrt_allocate_tensor_set.argtypes = [pp]
        lib.nrt_destroy_tensor_set.argtypes = [pp]
        lib.nrt_add_tensor_to_tensor_set.argtypes = [vp, ctypes.c_char_p, vp]
        lib.nrt_execute.argtypes = [vp, vp, vp]
        lib.nrt_get_model_tensor_info.argtypes = [vp, ctypes.POINTER(ctypes.POINTER(_TensorInfoArray))]
        lib.nrt_free_model_tensor_info.argtypes = [ctypes.POINTER(_TensorInfoArray)]
        lib.nrt_get_model_tensor_is_bool.argtypes = [vp, ctypes.c_char_p, ctypes.POINTER(ctypes.c_bool)]
        lib.nrt_get_last_execution_stats.argtypes = [vp, ctypes.POINTER(_ExecutionStats), sz, ctypes.POINTER(sz)]
        lib.nrt_inspect_config_allocate.argtypes = [pp]
        lib.nrt_inspect_config_free.argtypes = [vp]
        lib.nrt_inspect_config_set_output_dir.argtypes = [vp, ctypes.c_char_p]
        lib.nrt_inspect_config_set_enable_inspect.argtypes = [vp, ctypes.c_bool]
        lib.nrt_inspect_begin_with_options.argtypes = [vp]
        lib.nrt_inspect_get_time.argtypes = [ctypes.POINTER(u64)]
        lib.nrt_inspect_add_framework_event.argtypes = [ctypes.c_char_p, u64, u64, ctypes.POINTER(ctypes.c_char_p),
                                                        ctypes.POINTER(ctypes.c_char_p), sz]
        self.check(lib.nrt_init(1, b"", b""), "nrt_init")

    def check(self, status, what):
        if status != 0:
            raise NrtError(what, self.lib.nrt_get_status_as_str(status).decode(),
                           (self.lib.nrt_get_last_error_message() or b"").decode(errors="replace"))

    # Models and tensors.
    def load(self, neff_bytes):
        model = ctypes.c_void_p()
        self.check(self.lib.nrt_load(neff_bytes, len(neff_bytes), 0, -1, ctypes.byref(model)), "nrt_load")
        return model

    def unload(self, model):
        self.check(self.lib.nrt_unload(model), "nrt_unload")

    def tensor_info(self, model):
        """[(name, 'IN'|'OUT', size in bytes, dtype name, shape)] in graph order."""
        arr = ctypes.POINTER(_TensorInfoArray)()
        self.check(self.lib.nrt_get_model_tensor_info(model, ctypes.byref(arr)), "nrt_get_model_tensor_info")
        try:
            infos = ctypes.cast(ctypes.addressof(arr.contents.tensor_array), ctypes.POINTER(_TensorInfo))
            return [(t.name.decode(), "IN" if t.usage == 0 else "OUT", t.size, self._dtype_name(model, t),
                     [t.shape[d] for d in range(t.ndim)])
                    for t in (infos[i] for i in range(arr.contents.tensor_count))]
        finally:
            self.lib.nrt_free_model_tensor_info(arr)

    def _dtype_name(self, model, info):
        name = DTYPE_NAMES.get(info.dtype, "unknown")
        if name == "uint8":
            is_bool = ctypes.c_bool()
            self.check(self.lib.nrt_get_model_tensor_is_bool(model, info.name, ctypes.byref(is_bool)),
                       "nrt_get_model_tensor_is_bool")
            name = "bool" if is_bool.value else name
        return name

    def tensor(self, name, size):
        t = ctypes.c_void_p()
        self.check(self.lib.nrt_tensor_allocate(0, 0, size, name.encode(), ctypes.byref(t)), "nrt_tensor_allocate")
        return t

    def free_tensor(self, t):
        self.lib.nrt_tensor_free(ctypes.byref(t))

    def write(self, tensor, address, size):
        self.check(self.lib.nrt_tensor_write(tensor, address, 0, size), "nrt_tensor_write")

    def read(self, tensor, address, size):
        self.check(self.lib.nrt_tensor_read(tensor, address, 0, size), "nrt_tensor_read")

    def tensor_set(self, tensors):
        s = ctypes.c_void_p()
        self.check(self.lib.nrt_allocate_tensor_set(ctypes.byref(s)), "nrt_allocate_tensor_set")
        for name, t in tensors.items():
            self.check(self.lib.nrt_add_tensor_to_tensor_set(s, name.encode(), t), "nrt_add_tensor_to_tensor_set")
        return s

    def destroy_tensor_set(self, s):
        self.lib.nrt_destroy_tensor_set(ctypes.byref(s))

    def execute(self, model, inputs, outputs):
        self.check(self.lib.nrt_execute(model, inputs, outputs), "nrt_execute")

    def last_execution_stats(self, model):
        stats = _ExecutionStats()
        self.check(self.lib.nrt_get_last_execution_stats(model, ctypes.byref(stats), ctypes.sizeof(stats), None),
                   "nrt_get_last_execution_stats")
        return {name: getattr(stats, name) for name in _STATS_FIELDS}

    # Profiling sessions (nrt/nrt_profile.h, nrt/nrt_ext.h).
    def inspect_begin(self, output_dir):
        opts = ctypes.c_void_p()
        self.check(self.lib.nrt_inspect_config_allocate(ctypes.byref(opts)), "nrt_inspect_config_allocate")
        try:
            self.check(self.lib.nrt_inspect_config_set_output_dir(opts, os.fsencode(output_dir)),
                       "nrt_inspect_config_set_output_dir")
            self.check(self.lib.nrt_inspect_config_set_enable_inspect(opts, True),
                       "nrt_inspect_config_set_enable_inspect")
            self.check(self.lib.nrt_inspect_begin_with_options(opts), "nrt_inspect_begin_with_options")
        finally:
            self.lib.nrt_inspect_config_free(opts)

    def inspect_stop(self):
        self.check(self.lib.nrt_inspect_stop(), "nrt_inspect_stop")

    def inspect_time(self):
        """The session clock in picoseconds, or None when no session is running."""
        t = ctypes.c_uint64()
        return t.value if self.lib.nrt_inspect_get_time(ctypes.byref(t)) == 0 else None

    def add_framework_event(self, name, start_ps, end_ps, args=None):
        args = args or {}
        keys = (ctypes.c_char_p * max(1, len(args)))(*[str(k).encode() for k in args])
        values = (ctypes.c_char_p * max(1, len(args)))(*[str(v).encode() for v in args.values()])
        self.check(self.lib.nrt_inspect_add_framework_event(name.encode(), start_ps, end_ps, keys, values, len(args)),
                   "nrt_inspect_add_framework_event")


_runtime = None
_runtime_lock = threading.Lock()


def runtime():
    """The process's runtime, loaded and initialized on first use."""
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            _runtime = Libnrt(find_libnrt())
        return _runtime


class NeffRunner:
    """Times a NEFF through libnrt's C API (benchmarks)."""

    def __init__(self, lib_path=None):
        self.rt = runtime()
        if lib_path and os.path.realpath(lib_path) != os.path.realpath(self.rt.path):
            raise RuntimeError("libnrt is already loaded from %s, not %s" % (self.rt.path, lib_path))

    def load(self, neff_path):
        with open(neff_path, "rb") as f:
            return self.rt.load(f.read())

    def tensor_info(self, model):
        """[(name, 'IN'|'OUT', size in bytes, shape)] in graph order (nrt_get_model_tensor_info)."""
        return [(name, usage, size, shape) for name, usage, size, _, shape in self.rt.tensor_info(model)]

    def _filled(self, name, raw):
        t = self.rt.tensor(name, len(raw))
        if raw:
            buf = ctypes.create_string_buffer(raw, len(raw))
            self.rt.write(t, buf, len(raw))
        return t

    def time_execute(self, neff_path, inputs, outputs=None, repeats=5):
        """inputs: name -> raw bytes; outputs: name -> byte size (default: every
        output from the model's tensor info). Returns the median seconds of one
        nrt_execute after a warm-up."""
        model = self.load(neff_path)
        try:
            if outputs is None:
                outputs = {name: size for name, usage, size, _ in self.tensor_info(model) if usage == "OUT"}
            ins = self.rt.tensor_set({n: self._filled(n, raw) for n, raw in inputs.items()})
            outs = self.rt.tensor_set({n: self._filled(n, b"\0" * size) for n, size in outputs.items()})
            seconds = median_time(lambda: self.rt.execute(model, ins, outs), repeats)
        finally:
            self.rt.unload(model)
        return seconds


def median_time(fn, repeats):
    """Median wall time of fn() over `repeats` calls, after one warm-up call."""
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)
