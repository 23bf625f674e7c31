"""Compile a PyTorch module or function with neuron-cc and call it in-process.

    compiled = neuroncc.trace(model, example_inputs, opt=2, target="trn1")
    y = compiled(x)                  # torch tensors in, torch tensors out
    compiled.save("model.ncc")
    again = neuroncc.load("model.ncc")

`trace` exports the function's ATen graph (neuroncc.export), compiles it with
the `neuron-cc` tool and loads the NEFF into libnrt in this process. The
graph is specialized to the example inputs: calls must pass tensors of the
same shapes and dtypes, and get the eager dtypes and shapes back, in the
eager output structure (a tensor, or tuples, lists and dicts of them). Like
torch_neuronx.trace it serves inference: module state is frozen into the
graph as constants, and no gradients flow.
"""
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import zipfile

import torch

from . import export as ex
from . import nrt
from .files import write_atomic

SAVE_FORMAT = "neuroncc.compiled/1"

_NRT_TO_TORCH = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
                 "int32": torch.int32, "int64": torch.int64, "int16": torch.int16, "int8": torch.int8,
                 "uint8": torch.uint8, "bool": torch.bool}
_TORCH_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
                torch.float64: "float64", torch.int64: "int64", torch.int32: "int32", torch.int16: "int16",
                torch.int8: "int8", torch.uint8: "uint8", torch.bool: "bool"}
_TORCH_BY_NAME = {v: k for k, v in _TORCH_NAMES.items()}


class CompileError(RuntimeError):
    """neuron-cc refused the graph. `code` is the NCC-E00n code, `unsupported`
    the operators it lacks (NCC-E006), `message` the compiler's own words."""

    def __init__(self, message, code=None, unsupported=()):
        super().__init__(message)
        self.message = message
        self.code = code
        self.unsupported = list(unsupported)


class ToolNotFoundError(RuntimeError):
    """The neuron-cc compiler executable was not found."""


def find_tool(name):
    """A neuron-cc executable: $NEURONCC_BUILD_DIR/bin, the source tree's
    build/bin, then PATH."""
    tried = []
    for build in [os.environ.get("NEURONCC_BUILD_DIR"), nrt._repo_build_dir()]:
        if build:
            path = os.path.join(build, "bin", name)
            if os.access(path, os.X_OK):
                return path
            tried.append(path)
    found = shutil.which(name)
    if found:
        return found
    raise ToolNotFoundError("%s not found (looked at %s and PATH); build neuron-cc (scripts/build.sh) or set "
                            "NEURONCC_BUILD_DIR" % (name, ", ".join(tried)))


def _compile(graph_path, neff_path, opt, target, temporary=False):
    cmd = [find_tool("neuron-cc"), "compile", graph_path, "--framework", "ATEN", "--target", target, "-O%d" % opt,
           "--output", neff_path]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
    if proc.returncode == 0 and "Compiler status PASS" in proc.stdout:
        return
    text = "\n".join(line for line in (proc.stderr + proc.stdout).splitlines()
                     if line.strip() and not line.startswith("Compiler status"))
    if temporary:  # a file the user never saw: name it for what it is
        text = text.replace(graph_path + ": ", "").replace("'%s'" % graph_path, "the graph").replace(graph_path,
                                                                                                   "the graph")
    code = re.search(r"error (NCC-E\d+)", text)
    unsupported = re.findall(r"^\s+(\S+::\S+) \(\d+ uses?", text, re.M)
    raise CompileError(text or "neuron-cc failed with status %d" % proc.returncode,
                       code.group(1) if code else None, unsupported)


# Output structures: a tensor leaf is "tensor"; containers are encoded as
# JSON so that a saved model returns what the eager function returned.
def _flatten(value, where="output"):
    if isinstance(value, torch.Tensor):
        return [value], "tensor"
    if isinstance(value, (tuple, list)):
        leaves, subs = [], []
        for i, v in enumerate(value):
            l, s = _flatten(v, "%s[%d]" % (where, i))
            leaves += l
            subs.append(s)
        return leaves, {"tuple" if isinstance(value, tuple) else "list": subs}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        leaves, subs = [], []
        for k, v in value.items():
            l, s = _flatten(v, "%s[%r]" % (where, k))
            leaves += l
            subs.append([k, s])
        return leaves, {"dict": subs}
    raise TypeError("%s is a %s; a traced function must return tensors, or tuples, lists and dicts (with str keys) "
                    "of them" % (where, type(value).__name__))


def _unflatten(structure, leaves):
    if structure == "tensor":
        return next(leaves)
    (kind, subs), = structure.items()
    if kind == "dict":
        return {k: _unflatten(s, leaves) for k, s in subs}
    items = [_unflatten(s, leaves) for s in subs]
    return tuple(items) if kind == "tuple" else items


class CompiledModel:
    """A NEFF loaded into libnrt, callable with torch tensors (see the module doc)."""

    def __init__(self, neff, signature, name=None):
        """signature: as trace() or load() make it; None takes the NEFF's own
        (compile_graph)."""
        self.neff = bytes(neff)
        self._rt = nrt.runtime()
        self._lock = threading.Lock()
        self._model = self._rt.load(self.neff)
        self._tensors = []
        try:
            listed = self._rt.tensor_info(self._model)
            if signature is None:
                signature = _neff_signature(listed, name)
            self.signature = signature
            self.name = signature["name"]
            info = {name: (usage, size, dtype, shape) for name, usage, size, dtype, shape in listed}
            self._inputs = []  # (index, name, device dtype, nrt tensor, bytes) of the inputs the NEFF reads
            for i, spec in enumerate(signature["inputs"]):
                if spec["name"] not in info:
                    continue  # an input the graph does not use
                usage, size, dtype, _ = info[spec["name"]]
                self._inputs.append((i, spec["name"], _NRT_TO_TORCH[dtype], self._tensor(spec["name"], size), size))
            outs = [(name, size, dtype) for name, (usage, size, dtype, _) in info.items() if usage == "OUT"]
            if len(outs) != len(signature["outputs"]):
                raise CompileError("the NEFF has %d outputs, the traced function %d" %
                                   (len(outs), len(signature["outputs"])))
            self._outputs = [(name, _NRT_TO_TORCH[dtype], self._tensor(name, size), size) for name, size, dtype in outs]
            self._in_set = self._rt.tensor_set({name: t for _, name, _, t, _ in self._inputs})
            self._out_set = self._rt.tensor_set({name: t for name, _, t, _ in self._outputs})
            self.profile_hash = None
        except BaseException:
            self._release()
            raise

    def _tensor(self, name, size):
        t = self._rt.tensor(name, size)
        self._tensors.append(t)
        return t

    def _release(self):
        for attr in ("_in_set", "_out_set"):
            if getattr(self, attr, None) is not None:
                self._rt.destroy_tensor_set(getattr(self, attr))
                setattr(self, attr, None)
        for t in self._tensors:
            self._rt.free_tensor(t)
        self._tensors = []
        if self._model is not None:
            self._rt.unload(self._model)
            self._model = None

    def __del__(self):
        try:
            self._release()
        except Exception:  # interpreter shutdown: the library may be gone already
            pass

    def _check_inputs(self, args):
        specs = self.signature["inputs"]
        if len(args) != len(specs):
            raise TypeError("%s takes %d input tensors (%s), got %d" % (
                self.name, len(specs), ", ".join(s["name"] for s in specs), len(args)))
        for arg, spec in zip(args, specs):
            if not isinstance(arg, torch.Tensor):
                raise TypeError("%s: input '%s' is a %s, not a tensor" % (self.name, spec["name"], type(arg).__name__))
            dtype = _TORCH_NAMES.get(arg.dtype, str(arg.dtype))
            if dtype != spec["dtype"] or list(arg.shape) != spec["shape"]:
                raise ValueError("%s: input '%s' is %s%s; the model was traced with %s%s (trace again for other "
                                 "shapes or dtypes)" % (self.name, spec["name"], dtype, list(arg.shape),
                                                        spec["dtype"], spec["shape"]))

    def __call__(self, *args):
        if torch.autograd._profiler_enabled():
            # Under torch.profiler the call is one of its events too.
            with torch.autograd.profiler.record_function("neuroncc::%s" % self.name):
                return self._call(args)
        return self._call(args)

    def _call(self, args):
        from . import profiler
        rec = profiler.recorder()
        mark = rec.mark if rec else None
        t_call = mark() if rec else None
        self._check_inputs(args)
        with self._lock:
            t_copy = mark() if rec else None
            keep = []
            for i, name, device_dtype, tensor, size in self._inputs:
                x = args[i].detach()
                if x.device.type != "cpu":
                    x = x.cpu()
                if x.dtype != device_dtype:
                    x = x.to(device_dtype)  # bools and integers the device computes as f32
                x = x.contiguous()
                keep.append(x)
                self._rt.write(tensor, x.data_ptr(), size)
            t_exec = mark() if rec else None
            self._rt.execute(self._model, self._in_set, self._out_set)
            t_done = mark() if rec else None
            results = []
            for (name, device_dtype, tensor, size), spec in zip(self._outputs, self.signature["outputs"]):
                y = torch.empty(spec["shape"], dtype=device_dtype)
                if y.numel() * y.element_size() != size:
                    raise RuntimeError("%s: output '%s' is %d bytes in the NEFF, %s%s in eager" % (
                        self.name, name, size, spec["dtype"], spec["shape"]))
                self._rt.read(tensor, y.data_ptr(), size)
                eager = _TORCH_BY_NAME[spec["dtype"]]
                if eager != device_dtype:
                    y = y.to(eager)
                results.append(y)
            t_read = mark() if rec else None
            stats = self._rt.last_execution_stats(self._model) if rec else None
        out = _unflatten(self.signature["structure"], iter(results))
        if rec:
            rec.record_call(self, stats, call=t_call, copy=t_copy, execute=t_exec, done=t_done, read=t_read,
                            end=mark())
        return out

    def save(self, path):
        """Writes the NEFF and the call signature to one file (a zip), atomically."""
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as z:
            z.writestr("signature.json", json.dumps(dict(self.signature, format=SAVE_FORMAT), indent=1))
            z.writestr("model.neff", self.neff)
        write_atomic(path, buffer.getvalue())

    def __repr__(self):
        return "CompiledModel(%s: %s -> %d outputs)" % (
            self.name, ", ".join("%s %s%s" % (s["name"], s["dtype"], s["shape"]) for s in self.signature["inputs"]),
            len(self.signature["outputs"]))


def _neff_signature(tensor_info, name):
    for tname, usage, size, dtype, shape in tensor_info:
        if dtype not in _NRT_TO_TORCH:
            raise TypeError("tensor '%s' of the NEFF has dtype %s, which neuroncc cannot pass" % (tname, dtype))
    ins = [{"name": n, "dtype": d, "shape": list(s)} for n, u, _, d, s in tensor_info if u == "IN"]
    outs = [{"dtype": d, "shape": list(s)} for _, u, _, d, s in tensor_info if u == "OUT"]
    structure = "tensor" if len(outs) == 1 else {"tuple": ["tensor"] * len(outs)}
    return {"name": name or "graph", "inputs": ins, "outputs": outs, "structure": structure}


def compile_graph(graph_path, opt=2, target="trn1", name=None):
    """Compiles a graph file (`.mlir` in the aten dialect, or `.pb` / `.pbtxt`
    as neuroncc.export writes it) and loads it. The call signature is the
    NEFF's: its inputs in graph order with the NEFF's dtypes and shapes; one
    output gives a tensor, several a tuple. Raises CompileError as trace()."""
    if opt not in (0, 1, 2):
        raise ValueError("opt must be 0, 1 or 2, not %r" % (opt,))
    if not os.path.isfile(graph_path):
        raise FileNotFoundError("%s: no such graph file" % graph_path)
    nrt.runtime()
    with tempfile.TemporaryDirectory(prefix="neuroncc-compile-") as tmp:
        neff_path = os.path.join(tmp, "model.neff")
        _compile(os.path.abspath(graph_path), neff_path, opt, target)
        with open(neff_path, "rb") as f:
            neff = f.read()
    return CompiledModel(neff, None, name or os.path.splitext(os.path.basename(graph_path))[0])


def _check_signature(sig, path):
    def bad(why):
        return ValueError("%s: not a saved neuroncc model (%s)" % (path, why))

    if not isinstance(sig, dict) or sig.get("format") != SAVE_FORMAT:
        raise bad("format is %r, expected %r" % (sig.get("format") if isinstance(sig, dict) else None, SAVE_FORMAT))
    if not isinstance(sig.get("name"), str):
        raise bad("no name")
    for key in ("inputs", "outputs"):
        entries = sig.get(key)
        if not isinstance(entries, list):
            raise bad("no %s list" % key)
        for e in entries:
            if (not isinstance(e, dict) or e.get("dtype") not in _TORCH_BY_NAME or not isinstance(e.get("shape"), list)
                    or not all(isinstance(d, int) and d >= 0 for d in e["shape"])
                    or (key == "inputs" and not isinstance(e.get("name"), str))):
                raise bad("a malformed %s entry: %r" % (key[:-1], e))

    def count(structure):
        if structure == "tensor":
            return 1
        if not isinstance(structure, dict) or len(structure) != 1:
            raise bad("a malformed output structure")
        (kind, subs), = structure.items()
        if kind in ("tuple", "list") and isinstance(subs, list):
            return sum(count(s) for s in subs)
        if kind == "dict" and isinstance(subs, list) and all(isinstance(s, list) and len(s) == 2 for s in subs):
            return sum(count(s[1]) for s in subs)
        raise bad("a malformed output structure")

    if count(sig.get("structure")) != len(sig["outputs"]):
        raise bad("the output structure does not match the outputs")


def load(path):
    """A model written by CompiledModel.save, loaded into libnrt."""
    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
            if not {"signature.json", "model.neff"} <= names:
                raise ValueError("%s: not a saved neuroncc model (members %s)" % (path, sorted(names)))
            sig = json.loads(z.read("signature.json").decode("utf-8"))
            neff = z.read("model.neff")
    except (zipfile.BadZipFile, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError("%s: not a saved neuroncc model (%s)" % (path, e)) from None
    _check_signature(sig, path)
    sig.pop("format")
    return CompiledModel(neff, sig)


def _default_name(fn):
    if isinstance(fn, torch.nn.Module):
        return type(fn).__name__
    return getattr(fn, "__name__", type(fn).__name__)


def trace(fn, example_inputs, opt=2, target="trn1", cache_dir=None, name=None):
    """Compiles `fn(*example_inputs)` (an nn.Module or a function of tensors)
    for `target` at -O`opt` and loads it; returns a CompiledModel.

    cache_dir: where compiled NEFFs are kept, keyed by the graph, level and
    target, and reused on later traces (default: compile in a temporary
    directory every time). Raises CompileError with the compiler's message
    (every unsupported operator listed), ExportError when the function
    cannot be exported, ToolNotFoundError or nrt.LibnrtNotFoundError when
    neuron-cc is not built."""
    if opt not in (0, 1, 2):
        raise ValueError("opt must be 0, 1 or 2, not %r" % (opt,))
    if target not in ("trn1", "trn2"):
        raise ValueError("target must be 'trn1' or 'trn2', not %r" % (target,))
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    nrt.runtime()  # fail early, before any work, when libnrt is missing
    was_training = isinstance(fn, torch.nn.Module) and fn.training
    if was_training:
        fn.eval()
    try:
        with torch.no_grad():
            eager = fn(*example_inputs)
        leaves, structure = _flatten(eager)
        exp = ex.export_aten(fn, example_inputs, params="constants")
    finally:
        if was_training:
            fn.train()
    graph_bytes = exp.graph.SerializeToString()
    input_names = [p.name for p in exp.graph.inputs]
    signature = {
        "name": name or _default_name(fn),
        "inputs": [{"name": n, "dtype": _TORCH_NAMES.get(x.dtype, str(x.dtype)), "shape": list(x.shape)}
                   for n, x in zip(input_names, example_inputs)],
        "outputs": [{"dtype": _TORCH_NAMES.get(y.dtype, str(y.dtype)), "shape": list(y.shape)} for y in leaves],
        "structure": structure,
        "opt": opt,
        "target": target,
    }
    for spec in signature["inputs"] + signature["outputs"]:
        if spec["dtype"] not in _TORCH_BY_NAME:
            raise TypeError("%s tensors are not supported by neuroncc.trace" % spec["dtype"])
    key = hashlib.sha256(graph_bytes + ("|O%d|%s" % (opt, target)).encode()).hexdigest()
    cached = os.path.join(cache_dir, key + ".neff") if cache_dir else None
    if cached and os.path.isfile(cached):
        with open(cached, "rb") as f:
            neff = f.read()
    else:
        with tempfile.TemporaryDirectory(prefix="neuroncc-trace-") as tmp:
            graph_path = os.path.join(tmp, "graph.pb")
            with open(graph_path, "wb") as f:
                f.write(graph_bytes)
            neff_path = os.path.join(tmp, "model.neff")
            started = time.perf_counter()
            _compile(graph_path, neff_path, opt, target, temporary=True)
            signature["compile_seconds"] = round(time.perf_counter() - started, 3)
            with open(neff_path, "rb") as f:
                neff = f.read()
        if cached:
            os.makedirs(cache_dir, exist_ok=True)
            write_atomic(cached, neff)
    return CompiledModel(neff, signature)
