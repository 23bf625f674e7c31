#!/usr/bin/env python3
"""End-to-end RMSNorm: compile, run on the simulated NeuronCore, profile, and
compare with a float64 reference and with PyTorch eager.

Tolerances (max |y - ref| over max |ref|, per output):
  f32:  1e-4. The only f32 error source is rounding in a row sum of up to
        4096 squares (relative error below n * 2^-24 = 2.4e-4 in the worst
        case, about sqrt(n) * 2^-24 = 4e-6 for random data) plus a few
        elementwise roundings of 2^-24 each.
  bf16: 2^-5 = 0.03125. bf16 keeps 8 significant bits, so one rounding costs
        up to u = 2^-8 (0.39%) relative. PyTorch eager rounds after each of
        the six ops (x*x, the mean, + eps, rsqrt, x*rms, *weight); to first
        order those errors add up to at most 6u = 2.3% (rsqrt halves the
        relative error of its input, so this is an over-estimate). Inputs are
        exact bf16 values. The fused kernel keeps intermediates in f32 and
        rounds once (u). 2^-5 covers eager's 6u with margin, and also the
        distance between our output and eager's (at most u + 6u = 2.7%).
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "python"))
from neuroncc import toolchain  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover - python3-torch is a test dependency
    torch = None

TOLERANCE = {"f32": 1e-4, "bf16": 2.0 ** -5}
# The last shape has rows too long to keep whole in SBUF (reduced chunk by
# chunk) and a 2-row tail after a full 128-row tile.
SHAPES = [(4, 512, "bf16"), (4096, 4096, "f32"), (1, 128, "bf16"), (300, 1000, "f32"), (130, 7000, "bf16")]
EPS = 1e-6


def rel_error(y, ref):
    return float(np.max(np.abs(y.astype(np.float64) - ref)) / np.max(np.abs(ref)))


def torch_eager_naive(x, w, dtype):
    tdtype = torch.bfloat16 if dtype == "bf16" else torch.float32
    xt = torch.from_numpy(x).to(tdtype)
    wt = torch.from_numpy(w).to(tdtype)
    eps = torch.tensor(EPS, dtype=torch.float32)  # a 0-d tensor, as in the graph
    rms = torch.rsqrt((xt * xt).mean(-1, keepdim=True) + eps)
    return (xt * rms * wt).to(torch.float32).numpy()


class RmsNormEndToEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="neuroncc-e2e-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def build(self, kind, rows, cols, dtype, opt):
        name = "%s_%dx%d_%s_O%d" % (kind, rows, cols, dtype, opt)
        graph = os.path.join(self.tmp, name + ".mlir")
        with open(graph, "w") as f:
            f.write(toolchain.rmsnorm_graph(kind, rows, cols, dtype, EPS))
        neff = os.path.join(self.tmp, name + ".neff")
        toolchain.compile_graph(graph, neff, opt=opt)
        return name, neff

    def run_profiled(self, name, neff, x, w):
        profile = os.path.join(self.tmp, name + "-profile")
        (y,) = toolchain.run_neff(neff, {"x": x, "weight": w}, os.path.join(self.tmp, name + "-out"), profile)
        return y, profile

    def test_example_kernels_and_speedup(self):
        x, w = toolchain.fixed_inputs(4, 512, "bf16")
        results = {}
        for kind, opt in [("naive", 0), ("fused", 0), ("naive", 2)]:
            name, neff = self.build(kind, 4, 512, "bf16", opt)
            _, profile = self.run_profiled(name, neff, x, w)
            results[(kind, opt)] = toolchain.profile_summary(profile)
            table = toolchain.profile_table(profile)
            if (kind, opt) == ("naive", 0):
                # Every kernel and every source op shows up in the table.
                for op in ["aten.mul.Tensor", "aten.mean.dim", "aten.add.Tensor", "aten.rsqrt"]:
                    self.assertIn(op, table)
        naive0 = results[("naive", 0)]
        self.assertEqual(naive0["kernel_count"], 6)
        # The walkthrough's picture: six eager dispatches against one.
        self.assertEqual(naive0["dispatch_count"], 6)
        self.assertEqual(results[("fused", 0)]["dispatch_count"], 1)
        self.assertEqual(results[("naive", 2)]["dispatch_count"], 1)
        mul_kernels = [k for k in naive0["kernels"] if k["source_ops"] == ["aten.mul.Tensor"]]
        self.assertEqual(len(mul_kernels), 3)
        self.assertEqual(results[("fused", 0)]["kernel_count"], 1)
        self.assertEqual(results[("naive", 2)]["kernel_count"], 1)
        ratio = naive0["total_time"] / results[("naive", 2)]["total_time"]
        self.assertGreaterEqual(ratio, 5.0, "naive -O0 / -O2 modeled device time is only %.2f" % ratio)

    def test_numerics_all_shapes(self):
        for rows, cols, dtype in SHAPES:
            x, w = toolchain.fixed_inputs(rows, cols, dtype, seed=rows + cols)
            ref = toolchain.rmsnorm_reference(x, w, EPS)
            eager = torch_eager_naive(x, w, dtype) if torch is not None else None
            if eager is not None:
                self.assertLessEqual(rel_error(eager, ref), TOLERANCE[dtype])
            for kind in ["naive", "fused"]:
                for opt in [0, 2]:
                    with self.subTest(shape=(rows, cols, dtype), kind=kind, opt=opt):
                        name, neff = self.build(kind, rows, cols, dtype, opt)
                        (y,) = toolchain.run_neff(neff, {"x": x, "weight": w},
                                                  os.path.join(self.tmp, name + "-out"))
                        self.assertEqual(y.shape, (rows, cols))
                        if dtype == "bf16":  # outputs are bf16 values widened exactly
                            np.testing.assert_array_equal(y, toolchain.bf16_round(y))
                        self.assertLessEqual(rel_error(y, ref), TOLERANCE[dtype])
                        if eager is not None:
                            self.assertLessEqual(rel_error(y, eager.astype(np.float64)), TOLERANCE[dtype])
                        # Timing-only models the same trace, to the tick.
                        self.assertTrue(toolchain.timing_only_matches(neff, self.tmp))

    def test_profile_pair_and_mismatch(self):
        x, w = toolchain.fixed_inputs(4, 512, "bf16")
        name, neff = self.build("naive", 4, 512, "bf16", 2)
        _, profile = self.run_profiled(name, neff, x, w)
        neffs = glob.glob(os.path.join(profile, "neff_*.neff"))
        ntffs = glob.glob(os.path.join(profile, "*_instid_0_vnc_0.ntff"))
        self.assertEqual(len(neffs), 1)
        self.assertEqual(len(ntffs), 1)
        h = os.path.basename(neffs[0])[len("neff_"):-len(".neff")]
        self.assertTrue(h.isdigit())
        self.assertEqual(os.path.basename(ntffs[0]), "%s_instid_0_vnc_0.ntff" % h)
        with open(neffs[0], "rb") as a, open(neff, "rb") as b:
            self.assertEqual(a.read(), b.read())
        with open(os.path.join(profile, "trace.json")) as f:
            trace = json.load(f)
        events = trace["traceEvents"] if isinstance(trace, dict) else trace
        names = {e.get("name") for e in events}
        self.assertIn("nrta_execute_schedule", names)
        self.assertIn("nc_exec_running", names)

        # An NTFF paired with a different NEFF is refused.
        other_name, other = self.build("naive", 4, 512, "bf16", 0)
        proc = subprocess.run([toolchain.tool("neuron-profile"), "view", "-n", other, "-s", ntffs[0],
                               "--output-format", "summary-text"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("does not match", proc.stderr + proc.stdout)

    def test_deterministic_neff(self):
        for kind, opt in [("naive", 0), ("naive", 2), ("fused", 0)]:
            _, a = self.build(kind, 300, 1000, "f32", opt)
            with open(a, "rb") as f:
                first = f.read()
            _, b = self.build(kind, 300, 1000, "f32", opt)
            with open(b, "rb") as f:
                self.assertEqual(first, f.read())


if __name__ == "__main__":
    unittest.main(verbosity=2)
