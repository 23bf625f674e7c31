"""Execute a NEFF through libnrt's C API from Python (ctypes), the way an
application would: nrt_init, nrt_load, tensor sets, nrt_execute. Used by the
benchmarks to time host execution in-process.
"""
import ctypes
import statistics
import time

# nrt_tensor_info_t (nrt/nrt_experimental.h).
NRT_TENSOR_NAME_MAX = 256


class _TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * NRT_TENSOR_NAME_MAX), ("usage", ctypes.c_int), ("size", ctypes.c_size_t),
                ("dtype", ctypes.c_int), ("shape", ctypes.POINTER(ctypes.c_uint32)), ("ndim", ctypes.c_uint32)]


class _TensorInfoArray(ctypes.Structure):
    _fields_ = [("tensor_count", ctypes.c_uint64), ("tensor_array", _TensorInfo * 0)]


class NeffRunner:
    """Executes a NEFF through libnrt's C API, the way an application would."""

    def __init__(self, lib_path):
        self.lib = ctypes.CDLL(lib_path)
        vp = ctypes.c_void_p
        self.lib.nrt_get_status_as_str.restype = ctypes.c_char_p
        self.lib.nrt_get_last_error_message.restype = ctypes.c_char_p
        self.lib.nrt_load.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int32, ctypes.c_int32,
                                      ctypes.POINTER(vp)]
        self.lib.nrt_tensor_allocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_size_t,
                                                 ctypes.c_char_p, ctypes.POINTER(vp)]
        self.lib.nrt_tensor_write.argtypes = [vp, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
        self.lib.nrt_tensor_read.argtypes = [vp, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
        self.lib.nrt_allocate_tensor_set.argtypes = [ctypes.POINTER(vp)]
        self.lib.nrt_add_tensor_to_tensor_set.argtypes = [vp, ctypes.c_char_p, vp]
        self.lib.nrt_execute.argtypes = [vp, vp, vp]
        self.lib.nrt_unload.argtypes = [vp]
        self.lib.nrt_get_model_tensor_info.argtypes = [vp, ctypes.POINTER(ctypes.POINTER(_TensorInfoArray))]
        self.lib.nrt_free_model_tensor_info.argtypes = [ctypes.POINTER(_TensorInfoArray)]
        self.check(self.lib.nrt_init(1, b"", b""), "nrt_init")

    def check(self, status, what):
        if status != 0:
            raise RuntimeError("%s: %s (%s)" % (what, self.lib.nrt_get_status_as_str(status).decode(),
                                                (self.lib.nrt_get_last_error_message() or b"").decode()))

    def tensor(self, name, raw):
        t = ctypes.c_void_p()
        self.check(self.lib.nrt_tensor_allocate(0, 0, len(raw), name.encode(), ctypes.byref(t)), "allocate")
        if raw:
            buf = ctypes.create_string_buffer(raw, len(raw))
            self.check(self.lib.nrt_tensor_write(t, buf, 0, len(raw)), "write")
        return t

    def tensor_set(self, tensors):
        s = ctypes.c_void_p()
        self.check(self.lib.nrt_allocate_tensor_set(ctypes.byref(s)), "tensor set")
        for name, t in tensors.items():
            self.check(self.lib.nrt_add_tensor_to_tensor_set(s, name.encode(), t), "add tensor")
        return s

    def load(self, neff_path):
        with open(neff_path, "rb") as f:
            data = f.read()
        model = ctypes.c_void_p()
        self.check(self.lib.nrt_load(data, len(data), 0, -1, ctypes.byref(model)), "nrt_load")
        return model

    def tensor_info(self, model):
        """[(name, 'IN'|'OUT', size in bytes, shape)] in graph order (nrt_get_model_tensor_info)."""
        arr = ctypes.POINTER(_TensorInfoArray)()
        self.check(self.lib.nrt_get_model_tensor_info(model, ctypes.byref(arr)), "nrt_get_model_tensor_info")
        try:
            count = arr.contents.tensor_count
            infos = ctypes.cast(ctypes.addressof(arr.contents.tensor_array), ctypes.POINTER(_TensorInfo))
            out = []
            for i in range(count):
                t = infos[i]
                out.append((t.name.decode(), "IN" if t.usage == 0 else "OUT", t.size,
                            [t.shape[d] for d in range(t.ndim)]))
            return out
        finally:
            self.lib.nrt_free_model_tensor_info(arr)

    def time_execute(self, neff_path, inputs, outputs=None, repeats=5):
        """inputs: name -> raw bytes; outputs: name -> byte size (default: every
        output from the model's tensor info). Returns the median seconds of one
        nrt_execute after a warm-up."""
        model = self.load(neff_path)
        try:
            if outputs is None:
                outputs = {name: size for name, usage, size, _ in self.tensor_info(model) if usage == "OUT"}
            ins = self.tensor_set({n: self.tensor(n, raw) for n, raw in inputs.items()})
            outs = self.tensor_set({n: self.tensor(n, b"\0" * size) for n, size in outputs.items()})
            self.check(self.lib.nrt_execute(model, ins, outs), "nrt_execute")  # warm-up
            samples = []
            for _ in range(repeats):
                start = time.perf_counter()
                self.check(self.lib.nrt_execute(model, ins, outs), "nrt_execute")
                samples.append(time.perf_counter() - start)
        finally:
            self.lib.nrt_unload(model)
        return statistics.median(samples)


def median_time(fn, repeats):
    """Median wall time of fn() over `repeats` calls, after one warm-up call."""
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)
