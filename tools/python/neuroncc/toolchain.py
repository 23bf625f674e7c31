"""Drive the neuron-cc command-line tools from Python (tests, benchmarks, examples).

Only numpy is needed here; PyTorch is imported by the callers that need it.
"""
import json
import os
import subprocess
import tempfile

import numpy as np

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BUILD = os.environ.get("NEURONCC_BUILD_DIR", os.path.join(REPO, "build"))
BIN = os.path.join(BUILD, "bin")


def tool(name):
    return os.path.join(BIN, name)


class ToolError(RuntimeError):
    pass


def _run(cmd):
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as e:  # missing or not executable (for example while it is being rebuilt)
        raise ToolError("%s could not be started: %s" % (cmd[0], e)) from e
    if proc.returncode != 0:
        raise ToolError("%s failed (%d):\n%s%s" % (" ".join(cmd), proc.returncode, proc.stdout, proc.stderr))
    return proc.stdout


def compile_graph(graph, neff, opt=2, target="trn1"):
    out = _run([tool("neuron-cc"), "compile", graph, "--framework", "ATEN", "--target", target,
                "-O%d" % opt, "--output", neff])
    if "Compiler status PASS" not in out:
        raise ToolError("neuron-cc did not report PASS:\n" + out)
    return neff


def run_neff(neff, inputs, output_dir, profile_dir=None, keep_dtypes=False):
    """Runs `neff` on named arrays; returns the outputs in graph order.

    Inputs are written as float32 unless keep_dtypes, which keeps each array's
    own dtype (integer and bool tensors; bf16 tensors are passed as float32).
    """
    os.makedirs(output_dir, exist_ok=True)
    cmd = [tool("neuron-run"), neff, "--output-dir", output_dir]
    for name, array in inputs.items():
        path = os.path.join(output_dir, "input_%s.npy" % name)
        # np.asarray keeps 0-d arrays 0-d (np.ascontiguousarray makes them (1,)).
        if keep_dtypes:
            np.save(path, np.asarray(array, order="C"))
        else:
            np.save(path, np.asarray(array, dtype=np.float32, order="C"))
        cmd += ["--input", "%s=@%s" % (name, path)]
    if profile_dir:
        cmd += ["--profile", profile_dir]
    _run(cmd)
    outputs = []
    i = 0
    while os.path.exists(os.path.join(output_dir, "output_%d.npy" % i)):
        outputs.append(np.load(os.path.join(output_dir, "output_%d.npy" % i)))
        i += 1
    return outputs


def capture_ntff(neff, ntff, timing_only=False):
    """neuron-profile capture of one execution (inputs zero); returns the NTFF bytes."""
    cmd = [tool("neuron-profile"), "capture", "-n", neff, "-s", ntff]
    if timing_only:
        cmd.append("--timing-only")
    _run(cmd)
    with open(ntff, "rb") as f:
        return f.read()


def timing_only_matches(neff, scratch):
    """True when a timing-only capture of `neff` is byte-identical to a full one.

    The captures stay in `scratch` as full.ntff and timing.ntff."""
    full = capture_ntff(neff, os.path.join(scratch, "full.ntff"))
    timed = capture_ntff(neff, os.path.join(scratch, "timing.ntff"), timing_only=True)
    return full == timed


def profile_instructions(neff, scratch):
    """The instructions of a timing-only capture of `neff` (neuron-profile's JSON view:
    queue, opcode, start and end, bytes, source op), in issue order per queue."""
    base = os.path.join(scratch, os.path.splitext(os.path.basename(neff))[0] + "-instructions")
    capture_ntff(neff, base + ".ntff", timing_only=True)
    return ntff_instructions(neff, base + ".ntff", base + ".json")


def ntff_instructions(neff, ntff, json_path):
    """The instructions of an existing capture (neuron-profile's JSON view, also
    written to `json_path`)."""
    _run([tool("neuron-profile"), "view", "-n", neff, "-s", ntff, "--output-format", "json",
          "--output-file", json_path])
    with open(json_path) as f:
        return json.load(f)["instructions"]


def ntff_summary(neff, ntff):
    """summary-json of one NEFF and its NTFF, as a dict."""
    return json.loads(_run([tool("neuron-profile"), "view", "-n", neff, "-s", ntff,
                            "--output-format", "summary-json"]))


def profile_summary(profile_dir):
    return json.loads(_run([tool("neuron-profile"), "view", "-d", profile_dir,
                            "--output-format", "summary-json"]))


def profile_table(profile_dir):
    return _run([tool("neuron-profile"), "view", "-d", profile_dir,
                 "--output-format", "summary-text"])


def bf16_round(a):
    """Rounds float32 values to the nearest bfloat16 (ties to even), kept as float32."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    out = rounded.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(a), a, out)


MLIR_DTYPES = {"bf16": "bf16", "f32": "f32", "f16": "f16"}


def rmsnorm_graph(kind, rows, cols, dtype, eps=1e-6):
    """MLIR text of RMSNorm over the last dim: 'naive' (six ATen ops) or 'fused' (aten.rms_norm)."""
    t = MLIR_DTYPES[dtype]
    x = "tensor<%dx%dx%s>" % (rows, cols, t)
    r = "tensor<%dx1x%s>" % (rows, t)
    w = "tensor<%dx%s>" % (cols, t)
    head = ('func.func @main(%%x: %s {nc.name = "x"}, %%weight: %s {nc.name = "weight"}) -> %s {\n'
            % (x, w, x))
    if kind == "fused":
        body = ("  %%y = aten.rms_norm %%x, %%weight {normalized_shape = array<i64: %d>, eps = %.9e}"
                " : %s, %s -> %s\n" % (cols, eps, x, w, x))
    elif kind == "naive":
        body = (
            "  %%eps = arith.constant dense<%.9e> : tensor<f32>\n"
            "  %%sq = aten.mul.Tensor %%x, %%x : {x}, {x} -> {x}\n"
            "  %%ms = aten.mean.dim %%sq {{dim = array<i64: -1>, keepdim = true}} : {x} -> {r}\n"
            "  %%shifted = aten.add.Tensor %%ms, %%eps : {r}, tensor<f32> -> {r}\n"
            "  %%rms = aten.rsqrt %%shifted : {r} -> {r}\n"
            "  %%normed = aten.mul.Tensor %%x, %%rms : {x}, {r} -> {x}\n"
            "  %%y = aten.mul.Tensor %%normed, %%weight : {x}, {w} -> {x}\n" % eps
        ).replace("%%", "%").format(x=x, r=r, w=w)
    else:
        raise ValueError(kind)
    return head + body + "  return %%y : %s\n}\n" % x


def rmsnorm_reference(x, w, eps=1e-6):
    """Float64 RMSNorm over the last dim."""
    x = x.astype(np.float64)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w.astype(np.float64)


def fixed_inputs(rows, cols, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    w = (1.0 + 0.1 * rng.standard_normal(cols)).astype(np.float32)
    if dtype == "bf16":
        x, w = bf16_round(x), bf16_round(w)
    return x, w


def scratch_dir(prefix="neuroncc-"):
    return tempfile.mkdtemp(prefix=prefix)
