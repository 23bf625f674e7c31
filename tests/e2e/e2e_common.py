"""Shared pieces of the PyTorch end-to-end tests (test_models.py, test_opinfo.py,
opinfo_sweep.py): export + compile + run, the comparison with eager, and the
checked-in expected-failure lists, which are enforced both ways.

Expected-failure list format (xfail_*.txt): one case per line, the case's key
fields separated by spaces, then the reason (free text, the first line of the
error as it was when the entry was written); `#` starts a comment line.
"""
import os
import re
import shutil
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "python"))
from neuroncc import toolchain  # noqa: E402

import torch  # noqa: E402  (python3-torch is a test dependency: no silent skip)

from neuroncc import export as ex  # noqa: E402

# f32: max |y - ref| / max |ref| (see test_models.py / test_opinfo.py for bf16).
F32_TOLERANCE = 1e-4


class CaseFailure(AssertionError):
    """A case did not pass; the message's first line is its reason."""


def first_line(text, limit=200):
    for line in str(text).splitlines():
        line = line.strip()
        if line and not line.startswith("Compiler status") and not line.endswith("failed (1):"):
            return line[:limit]
    return str(text).strip()[:limit] or "(no message)"


def strip_paths(text):
    """Drops directories from absolute paths (temporary directories differ from run to run)."""
    return re.sub(r"(?:/[^\s:'\"/]+)+/", "", text)


def compiler_reason(err):
    """The most useful line of a neuron-cc / neuron-run failure: the unsupported
    operators (NCC-E006) or else the first `error` line, without directories."""
    text = re.sub(r"\S+\.(?:pb|pbtxt|mlir): ", "", strip_paths(str(err)))
    ops = re.findall(r"^\s+(\S+::\S+) \(\d+ uses?", text, re.M)
    code = re.search(r"error (NCC-E\d+)", text)
    if ops:
        return "%s unsupported: %s" % (code.group(1) if code else "error", " ".join(ops))
    for line in text.splitlines():
        if "error" in line.lower() and "failed (" not in line:
            return line.strip()[:200]
    return first_line(text)


def compare(out, ref, tol):
    """Checks one output against its eager reference; returns the relative error.

    Floating point: NaN and +-inf must be where the reference has them; over
    the finite elements max |out - ref| / max |ref| <= tol (absolute when the
    reference is all zeros). Integers and bools must match exactly.
    """
    ref = ref.detach()
    expected = tuple(ref.shape)
    out = np.asarray(out)
    if tuple(out.shape) != expected:
        raise CaseFailure("output shape %s, eager %s" % (tuple(out.shape), expected))
    if not (ref.is_floating_point() or ref.is_complex()):
        r = ref.to(torch.int64).numpy() if ref.dtype != torch.bool else ref.numpy()
        if not np.array_equal(out.astype(r.dtype), r):
            bad = int(np.sum(out.astype(r.dtype) != r))
            raise CaseFailure("%d of %d %s elements differ from eager" % (bad, r.size, ref.dtype))
        return 0.0
    r = ref.to(torch.float64).numpy()
    o = out.astype(np.float64)
    if not np.array_equal(np.isnan(o), np.isnan(r)):
        raise CaseFailure("NaN positions differ from eager (%d vs %d NaNs)" % (np.isnan(o).sum(), np.isnan(r).sum()))
    inf_r, inf_o = np.isinf(r), np.isinf(o)
    if not np.array_equal(inf_o, inf_r) or not np.array_equal(o[inf_o], r[inf_r]):
        raise CaseFailure("infinities differ from eager (%d vs %d)" % (inf_o.sum(), inf_r.sum()))
    finite = np.isfinite(r)
    if not finite.any():
        return 0.0
    scale = float(np.max(np.abs(r[finite])))
    err = float(np.max(np.abs(o[finite] - r[finite])))
    rel = err / scale if scale > 0 else err
    if rel > tol:
        raise CaseFailure("numerics: max|y-eager|/max|eager| = %.3g > %.3g" % (rel, tol))
    return rel


def device_array(t):
    """A graph input as neuron-run reads it: bf16 as float32 values, others unchanged."""
    return ex.to_numpy(t)


def export_compile_run(fn, inputs, workdir, name, opt, input_names=None, params="constants", graph_ext=".pb",
                       tracing_mode="real"):
    """Exports fn(*inputs), compiles at -O<opt>, runs; returns (outputs as numpy, AtenExport).

    Raises CaseFailure with the stage and the first error line.
    """
    graph_path = os.path.join(workdir, name + graph_ext)
    try:
        exp = ex.export_aten(fn, inputs, graph_path, params=params, input_names=input_names,
                             tracing_mode=tracing_mode)
    except Exception as e:  # noqa: BLE001 - every exporter failure is a case failure
        raise CaseFailure("export: %s: %s" % (type(e).__name__, first_line(e))) from e
    neff = os.path.join(workdir, name + ".neff")
    try:
        toolchain.compile_graph(graph_path, neff, opt=opt)
    except toolchain.ToolError as e:
        raise CaseFailure("compile: " + compiler_reason(e)) from e
    arrays = {n: device_array(v) for n, v in exp.input_values.items()}
    outdir = os.path.join(workdir, name + "-out")
    try:
        outs = toolchain.run_neff(neff, arrays, outdir, keep_dtypes=True)
    except toolchain.ToolError as e:
        raise CaseFailure("run: " + compiler_reason(e)) from e
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
    if len(outs) != len(exp.graph.outputs):
        raise CaseFailure("run: %d outputs, the graph has %d" % (len(outs), len(exp.graph.outputs)))
    return outs, exp


# ---------------------------------------------------------------------------
# Test cases compared with eager

# Per dtype: f32 as above; bf16 a few ulps of the largest element (ops composed
# of several rounded bf16 steps).
EAGER_TOLERANCE = {torch.float32: F32_TOLERANCE, torch.bfloat16: 2.0 ** -5}
FLOAT_DTYPES = (torch.float32, torch.bfloat16)
INTEGER_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)


def seeded_randn(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def randomize(module, seed):
    """Random parameters (and positive running variances) instead of the defaults."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
        for name, b in module.named_buffers():
            if name.endswith("running_var"):
                b.copy_(torch.rand(b.shape, generator=gen) + 0.5)
            elif name.endswith("running_mean"):
                b.copy_(torch.randn(b.shape, generator=gen) * 0.2)
    return module


class ComparedWithEager(unittest.TestCase):
    """check(fn, inputs): fn exported, compiled at -O0 and -O2, run, and every
    output compared with eager's (integers and bools exactly)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="neuroncc-e2e-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.count = 0

    def check(self, fn, inputs, opts=(0, 2)):
        with torch.no_grad():
            ref = fn(*inputs)
        refs, _ = torch.utils._pytree.tree_flatten(ref)
        for opt in opts:
            name = "%s_%d_O%d" % (self.id().split(".")[-1], self.count, opt)
            self.count += 1
            with torch.no_grad():
                outs, _ = export_compile_run(fn, inputs, self.tmp, name, opt)
            self.assertEqual(len(outs), len(refs))
            for out, r in zip(outs, refs):
                if r.dtype in INTEGER_DTYPES:
                    self.assertEqual(out.dtype, r.numpy().dtype, name)
                    np.testing.assert_array_equal(out, r.numpy(), err_msg=name)
                else:
                    compare(out, r, EAGER_TOLERANCE[r.dtype])

    def models(self, make, inputs):
        """make() in f32 and bf16, with its default and with random parameters."""
        for dtype in FLOAT_DTYPES:
            for seed in (None, 7):
                torch.manual_seed(0)
                model = make().eval()
                if seed is not None:
                    randomize(model, seed)
                model = model.to(dtype)
                self.check(model, tuple(t.to(dtype) for t in inputs))


# ---------------------------------------------------------------------------
# Expected-failure lists

class XfailList:
    def __init__(self, path, nkeys):
        self.path = path
        self.nkeys = nkeys
        self.entries = {}   # key tuple -> reason
        self.errors = []    # malformed lines
        if os.path.exists(path):
            with open(path) as f:
                for lineno, line in enumerate(f, 1):
                    text = line.strip()
                    if not text or text.startswith("#"):
                        continue
                    parts = text.split(None, nkeys)
                    if len(parts) < nkeys + 1:
                        self.errors.append("%s:%d: expected %d key fields and a reason: %r" % (
                            path, lineno, nkeys, text))
                        continue
                    key = tuple(parts[:nkeys])
                    if key in self.entries:
                        self.errors.append("%s:%d: duplicate entry %s" % (path, lineno, " ".join(key)))
                    self.entries[key] = parts[nkeys]

    def __contains__(self, key):
        return tuple(key) in self.entries

    def write(self, failures, header):
        """Rewrites the file with `failures` (key tuple -> reason), sorted."""
        lines = [header.rstrip("\n"), ""]
        for key in sorted(failures):
            lines.append("%s %s" % (" ".join(key), " ".join(failures[key].split())))
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(self.path), prefix=".xfail")
        with os.fdopen(fd, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, self.path)


UNEXPECTED_PASS = "unexpectedly passing, remove it from the list"


class XfailResult(unittest.TextTestResult):
    """Reports an expected failure that passed as an error, naming the list entry."""

    def addUnexpectedSuccess(self, test):
        entry = getattr(getattr(test, test._testMethodName), "xfail_entry", test.id())
        try:
            raise AssertionError("%s: %s (%s)" % (entry, UNEXPECTED_PASS, getattr(test, "xfail_file", "")))
        except AssertionError:
            self.addError(test, sys.exc_info())


def main():
    runner = unittest.TextTestRunner(verbosity=2, resultclass=XfailResult)
    unittest.main(testRunner=runner, verbosity=2)
