#!/usr/bin/env python3
"""Tests of the production-size workloads (tools/python/neuroncc/workloads.py)
that need no compiler: each exports at its full size with fake tracing in
seconds, holds no weight-sized constant and takes every weight as an input;
scaled down to small sizes with real values, the fake-traced graph is the
real-traced one and computes what the builder's code computes (re-evaluated
from the protobuf by neuroncc.graph_eval).

Compiling the full sizes takes tens of seconds each and is measured, not
tested: `python3 -m neuroncc.workloads measure` (see its docstring).
"""
import os
import subprocess
import sys
import tempfile
import shutil
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
PYTHON_DIR = os.path.join(REPO, "tools", "python")
sys.path.insert(0, PYTHON_DIR)

import torch  # noqa: E402

from neuroncc import aten_graph_pb2 as pb  # noqa: E402
from neuroncc import export as ex  # noqa: E402
from neuroncc import graph_eval, workloads  # noqa: E402

# Generous bound for one full-size export on a loaded 2-core machine (it takes
# about 0.3 s): the point is "seconds, not minutes", as a real trace of the
# 7B layer would take.
EXPORT_SECONDS = 20
# The LLaMA layer's buffers (rotary tables and the 2048x2048 boolean mask) are
# 5 MiB; no weight is a constant.
MAX_CONSTANT_BYTES = 6 << 20

SMALL = {
    "matmul": dict(m=32, k=48, n=16),
    "swiglu_ffn": dict(tokens=8, dim=32, hidden=80),
    "rmsnorm": dict(rows=16, dim=64),
    "softmax": dict(batch=2, rows=8, cols=16),
    "llama7b_s2048": dict(seq=16, dim=64, heads=4, ffn=128, max_seq=16),
    "llama7b_s16": dict(seq=4, dim=64, heads=4, ffn=128, max_seq=16),
    "gpt2_medium": dict(seq=16, dim=64, heads=4),
}


class Workloads(unittest.TestCase):
    def test_full_size_exports_fast_with_weights_as_inputs(self):
        for name, w in workloads.WORKLOADS.items():
            with self.subTest(workload=name):
                start = time.time()
                exp = w.export()
                seconds = time.time() - start
                self.assertLess(seconds, EXPORT_SECONDS)
                graph = exp.graph
                self.assertLessEqual(sum(len(c.data) for c in graph.constants), MAX_CONSTANT_BYTES)
                self.assertFalse(any(c.is_parameter for c in graph.constants))
                self.assertTrue(all(i.meta.dtype == pb.BFLOAT16 for i in graph.inputs))
                self.assertLess(len(graph.SerializeToString()), MAX_CONSTANT_BYTES + (1 << 20))
                fn, _ = w.build()
                if isinstance(fn, torch.nn.Module):
                    params = {ex.sanitize(k): list(p.shape) for k, p in fn.named_parameters()}
                    inputs = {i.name: list(i.meta.shape) for i in graph.inputs}
                    for k, shape in params.items():
                        self.assertEqual(inputs.get(k), shape, k)

    def test_sizes(self):
        graph = workloads.WORKLOADS["llama7b_s2048"].export().graph
        inputs = {i.name: list(i.meta.shape) for i in graph.inputs}
        self.assertEqual(inputs["x"], [1, 2048, 4096])
        self.assertEqual(inputs["q_proj_weight"], [4096, 4096])
        self.assertEqual(inputs["gate_proj_weight"], [11008, 4096])
        self.assertEqual(inputs["down_proj_weight"], [4096, 11008])
        self.assertEqual(list(graph.nodes[-1].outputs[0].shape), [1, 2048, 4096])
        self.assertEqual({c.name: list(c.meta.shape) for c in graph.constants},
                         {"cos_cached": [2048, 128], "sin_cached": [2048, 128], "causal_mask": [2048, 2048]})
        graph = workloads.WORKLOADS["llama7b_s16"].export().graph
        self.assertEqual([i.meta.shape for i in graph.inputs][0], [1, 16, 4096])
        bmm = [n for n in graph.nodes if n.target == "aten::bmm"]
        self.assertEqual(list(bmm[0].outputs[0].shape), [32, 16, 16])
        graph = workloads.WORKLOADS["swiglu_ffn"].export().graph
        self.assertEqual([n.target for n in graph.nodes],
                         ["aten::mm", "aten::silu", "aten::mm", "aten::mul.Tensor", "aten::mm"])
        self.assertEqual([list(i.meta.shape) for i in graph.inputs],
                         [[2048, 4096], [4096, 11008], [4096, 11008], [11008, 4096]])
        graph = workloads.WORKLOADS["softmax"].export().graph
        self.assertEqual([n.target for n in graph.nodes], ["aten::_softmax"])
        self.assertEqual(list(graph.nodes[0].outputs[0].shape), [32, 2048, 2048])
        graph = workloads.WORKLOADS["matmul"].export().graph
        self.assertEqual([(n.target, list(n.outputs[0].shape)) for n in graph.nodes], [("aten::mm", [4096, 4096])])
        graph = workloads.WORKLOADS["rmsnorm"].export().graph
        self.assertEqual(len(graph.nodes), 6)
        self.assertEqual([list(i.meta.shape) for i in graph.inputs], [[8192, 4096], [4096]])
        graph = workloads.WORKLOADS["gpt2_medium"].export().graph
        self.assertEqual([list(i.meta.shape) for i in graph.inputs][:2], [[1, 1024, 1024], [1024]])

    def test_small_sizes_fake_equals_real_and_computes_the_code(self):
        self.assertEqual(set(SMALL), set(workloads.WORKLOADS))
        for name, w in workloads.WORKLOADS.items():
            with self.subTest(workload=name):
                fake = w.export(device="cpu", **SMALL[name])
                real = w.export(device="cpu", tracing_mode="real", **SMALL[name])
                self.assertEqual(fake.graph, real.graph)
                fn, inputs = w.build(device="cpu", **SMALL[name])
                with torch.no_grad():
                    eager = fn(*inputs)
                outs = graph_eval.evaluate(fake.graph, fake.input_values)
                self.assertEqual(len(outs), 1)
                self.assertEqual(outs[0].dtype, torch.bfloat16)
                self.assertTrue(torch.equal(outs[0], eager), name)

    def test_swiglu_is_the_formula(self):
        fn, (x, wg, wu, wd) = workloads.WORKLOADS["swiglu_ffn"].build(device="cpu", **SMALL["swiglu_ffn"])
        xf, wgf, wuf, wdf = (t.double() for t in (x, wg, wu, wd))
        ref = (torch.nn.functional.silu(xf @ wgf) * (xf @ wuf)) @ wdf
        torch.testing.assert_close(fn(x, wg, wu, wd).double(), ref, rtol=0.05, atol=0.05)

    def test_roofline_bench_runs(self):
        """benchmarks/roofline_bench.py compiles, profiles (timing-only) and rates a workload."""
        script = os.path.join(HERE, "..", "..", "benchmarks", "roofline_bench.py")
        proc = subprocess.run([sys.executable, script, "--workloads", "rmsnorm,softmax", "--skip-small"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        rows = {}
        for line in proc.stdout.splitlines():  # the table's row, not the goal's
            if line.startswith(("rmsnorm ", "softmax ")):
                rows.setdefault(line.split()[0], line.split())
        self.assertEqual(sorted(rows), ["rmsnorm", "softmax"])
        self.assertEqual(rows["rmsnorm"][1:3], ["1", "1"])  # one dispatch, one kernel
        # A one-kernel workload cannot beat its kernel's busiest resource.
        self.assertIn("Tex/Kb", proc.stdout)
        for name in ("rmsnorm", "softmax"):
            self.assertGreaterEqual(float(rows[name][8]), 1.0, rows[name])
        self.assertIn("Goals", proc.stdout)
        self.assertRegex(proc.stdout, r"softmax +MBU \(exec\) +>= 80%")
        bad = subprocess.run([sys.executable, script, "--workloads", "nope"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("unknown workload", bad.stderr)

    def test_roofline_bench_sizes_are_workload_sizes(self):
        """roofline_bench.py --sizes: every row names a workload and only sizes it takes, once."""
        sys.path.insert(0, os.path.join(HERE, "..", "..", "benchmarks"))
        try:
            import roofline_bench
        finally:
            sys.path.pop(0)
        names = [name for name, _, _ in roofline_bench.SIZES]
        self.assertEqual(len(names), len(set(names)))
        for name, workload, sizes in roofline_bench.SIZES:
            self.assertLessEqual(len(name), 19, name)  # the table's first column
            self.assertIn(workload, workloads.WORKLOADS, name)
            self.assertLessEqual(set(sizes), set(workloads.WORKLOADS[workload].sizes), name)

    def test_cli(self):
        tmp = tempfile.mkdtemp(prefix="neuroncc-workloads-")
        try:
            env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
            out = os.path.join(tmp, "layer.pb")
            proc = subprocess.run([sys.executable, "-m", "neuroncc.workloads", "export", "llama7b_s16", "-o", out,
                                   "--size", "dim=256", "--size", "ffn=512", "--size", "heads=2"],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            graph = ex.read_graph(out)
            self.assertEqual(list(graph.inputs[0].meta.shape), [1, 16, 256])
            proc = subprocess.run([sys.executable, "-m", "neuroncc.workloads", "list"], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual([line.split()[0] for line in proc.stdout.splitlines()], list(workloads.WORKLOADS))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
