#!/usr/bin/env python3
"""The in-process Python workflow: neuroncc.trace / call / save / load against
eager for every bundled model in f32 and bf16, its error paths, and
neuroncc.profile (the profile directory, the key_averages table and its sums,
the framework lane, the schedule, the torch.profiler merge).

Tolerances as in test_models.py (max |y - eager| / max |eager|): 1e-4 in f32,
2^-5 in bf16; the reasons are written there.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e_common as common  # noqa: E402

import torch  # noqa: E402

import neuroncc  # noqa: E402
from neuroncc import models, toolchain  # noqa: E402

TOLERANCE = {"f32": common.F32_TOLERANCE, "bf16": 2.0 ** -5}


class Tmp(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="neuroncc-pyapi-")
        self.addCleanup(shutil.rmtree, self.tmp, True)


class TraceMatchesEager(Tmp):
    def check_model(self, name, dtype):
        module, inputs = models.MODELS[name].build(models.DTYPES[dtype])
        refs = models.reference(module, inputs)
        compiled = neuroncc.trace(module, inputs, opt=2)
        out = compiled(*inputs)
        flat = list(out) if isinstance(out, (tuple, list)) else [out]
        self.assertEqual(len(flat), len(refs))
        for y, ref in zip(flat, refs):
            self.assertEqual(y.dtype, ref.dtype)
            self.assertEqual(y.shape, ref.shape)
            common.compare(y.float().numpy() if y.is_floating_point() else y.numpy(), ref, TOLERANCE[dtype])
        path = os.path.join(self.tmp, "%s_%s.ncc" % (name, dtype))
        compiled.save(path)
        again = neuroncc.load(path)
        out2 = again(*inputs)
        flat2 = list(out2) if isinstance(out2, (tuple, list)) else [out2]
        for a, b in zip(flat, flat2):
            self.assertTrue(torch.equal(a, b), "a loaded model must give the same bits")
        self.assertEqual(again.signature["inputs"], compiled.signature["inputs"])

    def test_structures_and_dtypes(self):
        # Tuples, dicts, integer indices and an unused input.
        table = torch.randn(10, 6)

        def fn(x, n, unused):
            return {"y": (x * 2, x.sum(-1)), "n": torch.nn.functional.embedding(n, table)}

        x = torch.linspace(-2, 2, 24).reshape(4, 6)
        n = torch.arange(6, dtype=torch.int64)
        compiled = neuroncc.trace(fn, (x, n, torch.zeros(3)))
        out = compiled(x, n, torch.ones(3))
        ref = fn(x, n, None)
        self.assertEqual(set(out), {"y", "n"})
        self.assertTrue(torch.equal(out["y"][0], ref["y"][0]))
        self.assertIsInstance(out["y"], tuple)
        self.assertTrue(torch.allclose(out["y"][1], ref["y"][1], atol=1e-5))
        self.assertTrue(torch.equal(out["n"], ref["n"]))

    def test_cache_dir_reuses_the_neff(self):
        cache = os.path.join(self.tmp, "cache")
        fn = lambda x: torch.relu(x) + 1  # noqa: E731
        x = torch.randn(4, 8)
        a = neuroncc.trace(fn, (x,), cache_dir=cache)
        self.assertEqual(len(glob.glob(os.path.join(cache, "*.neff"))), 1)
        b = neuroncc.trace(fn, (x,), cache_dir=cache)
        self.assertIn("compile_seconds", a.signature)
        self.assertNotIn("compile_seconds", b.signature)  # not compiled again
        self.assertEqual(a.neff, b.neff)
        self.assertTrue(torch.equal(a(x), b(x)))


def _add_model_tests():
    for name in models.MODELS:
        for dtype in models.DTYPES:
            setattr(TraceMatchesEager, "test_%s_%s" % (name, dtype),
                    lambda self, n=name, d=dtype: self.check_model(n, d))


_add_model_tests()


class Errors(Tmp):
    def test_unsupported_operators_are_all_listed(self):
        def fn(x):
            return torch.special.i1(x) + torch.erfinv(x)

        with self.assertRaises(neuroncc.CompileError) as cm:
            neuroncc.trace(fn, (torch.randn(8),))
        self.assertEqual(cm.exception.code, "NCC-E006")
        self.assertEqual(sorted(cm.exception.unsupported), ["aten::erfinv", "aten::special_i1"])
        self.assertIn("aten::special_i1 (1 use", str(cm.exception))

    def test_wrong_inputs_at_call_time(self):
        compiled = neuroncc.trace(lambda x, y: x * y, (torch.ones(2, 3), torch.ones(2, 3)))
        with self.assertRaisesRegex(ValueError, r"input 'y' is float32\[3, 2\]; the model was traced with "
                                                r"float32\[2, 3\]"):
            compiled(torch.ones(2, 3), torch.ones(3, 2))
        with self.assertRaisesRegex(ValueError, r"input 'x' is bfloat16\[2, 3\]"):
            compiled(torch.ones(2, 3, dtype=torch.bfloat16), torch.ones(2, 3))
        with self.assertRaisesRegex(TypeError, "takes 2 input tensors"):
            compiled(torch.ones(2, 3))
        with self.assertRaisesRegex(TypeError, "is a float, not a tensor"):
            compiled(torch.ones(2, 3), 1.0)

    def test_missing_libnrt(self):
        code = ("import torch, neuroncc\n"
                "try:\n"
                "    neuroncc.trace(lambda x: x + 1, (torch.ones(2),))\n"
                "except neuroncc.LibnrtNotFoundError as e:\n"
                "    print('LibnrtNotFoundError:', e)\n")
        env = dict(os.environ, NEURONCC_LIBNRT=os.path.join(self.tmp, "nowhere", "libnrt.so"),
                   PYTHONPATH=os.path.join(HERE, "..", "..", "tools", "python"))
        p = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("LibnrtNotFoundError: NEURONCC_LIBNRT=", p.stdout)
        self.assertIn("no such file", p.stdout)

    def test_load_rejects_what_save_did_not_write(self):
        bad = os.path.join(self.tmp, "bad.ncc")
        with open(bad, "wb") as f:
            f.write(b"not a zip file at all")
        with self.assertRaisesRegex(ValueError, "not a saved neuroncc model"):
            neuroncc.load(bad)
        compiled = neuroncc.trace(lambda x: x + 1, (torch.ones(2),))
        good = os.path.join(self.tmp, "good.ncc")
        compiled.save(good)
        import zipfile
        with zipfile.ZipFile(good) as z:
            sig = json.loads(z.read("signature.json"))
            neff = z.read("model.neff")
        for broken in [dict(sig, format="other/9"), dict(sig, outputs=[{"dtype": "float32", "shape": [-1]}]),
                       dict(sig, structure={"tuple": ["tensor", "tensor"]})]:
            path = os.path.join(self.tmp, "broken.ncc")
            with zipfile.ZipFile(path, "w") as z:
                z.writestr("signature.json", json.dumps(broken))
                z.writestr("model.neff", neff)
            with self.assertRaisesRegex(ValueError, "not a saved neuroncc model"):
                neuroncc.load(path)
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("signature.json", json.dumps(sig))
            z.writestr("model.neff", neff[:100])
        with self.assertRaisesRegex(neuroncc.NrtError, "nrt_load"):
            neuroncc.load(path)


class Profiling(Tmp):
    @classmethod
    def setUpClass(cls):
        cls.x = torch.randn(4, 512)
        module, _ = models.MODELS["rmsnorm"].build(torch.float32)
        cls.norm = neuroncc.trace(module, (cls.x,), name="rmsnorm")
        cls.mlp_module, (cls.mlp_x,) = models.MODELS["mlp"].build(torch.float32)
        cls.mlp = neuroncc.trace(cls.mlp_module, (cls.mlp_x,), name="mlp")

    def test_two_models_several_calls(self):
        out = os.path.join(self.tmp, "prof")
        with neuroncc.profile(output_dir=out) as prof:
            for _ in range(3):
                self.norm(self.x)
            for _ in range(2):
                self.mlp(self.mlp_x)
        files = sorted(os.listdir(out))
        self.assertEqual(len([f for f in files if f.startswith("neff_")]), 2)
        self.assertEqual(len([f for f in files if f.endswith("_instid_0_vnc_0.ntff")]), 2)
        self.assertIn("trace.json", files)
        for f in files:
            if f.startswith("neff_"):
                h = f[len("neff_"):-len(".neff")]
                self.assertIn("%s_instid_0_vnc_0.ntff" % h, files)
        toolchain._run([toolchain.tool("neuron-profile"), "view", "-d", out])

        rows = {r.key: r for r in prof.key_averages()}
        self.assertEqual(rows["neuroncc::rmsnorm"].count, 3)
        self.assertEqual(rows["neuroncc::mlp"].count, 2)
        self.assertEqual(rows["nrt_execute"].count, 5)
        self.assertEqual(rows["neuroncc::input_copy"].count, 5)
        total = prof.device_time_total_us
        self.assertGreater(total, 0)
        # Self Device adds up to the device time of the executions; only ATen
        # ops hold it; kernels and calls show it as Device total.
        self_device = sum(r.self_device_time_total for r in rows.values())
        self.assertAlmostEqual(self_device, total, delta=1e-3 * total)
        for key, r in rows.items():
            if r.self_device_time_total > 0:
                self.assertTrue(key.startswith("aten::"), key)
        self.assertAlmostEqual(rows["nrt_execute"].device_time_total, total, delta=1e-6 * total)
        self.assertAlmostEqual(rows["neuroncc::rmsnorm"].device_time_total + rows["neuroncc::mlp"].device_time_total,
                               total, delta=1e-6 * total)
        kernels = [k for k in rows if k.startswith("k") and "_" in k]
        self.assertGreaterEqual(len(kernels), 2)
        self.assertAlmostEqual(sum(rows[k].device_time_total for k in kernels), total, delta=1e-3 * total)
        self.assertIn("aten::addmm", rows)
        self.assertIn("aten::rsqrt", rows)

        table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=4)
        lines = table.splitlines()
        for header in ["Name", "Self CPU", "CPU total", "Self Device", "Device total", "# of Calls"]:
            self.assertIn(header, lines[1])
        body = lines[3:3 + 4]
        self.assertEqual(len(body), 4)
        self.assertTrue(all(line.split()[0].startswith("aten::") for line in body), table)
        self.assertIn("Self Device time total:", table)
        with self.assertRaisesRegex(ValueError, "sort_by must be one of"):
            prof.key_averages().table(sort_by="bogus")

        with open(os.path.join(out, "trace.json")) as f:
            trace = json.load(f)
        lanes = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
        spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
        calls = [e for e in spans if e["name"] == "neuroncc::rmsnorm"]
        self.assertEqual(len(calls), 3)
        self.assertTrue(all(lanes[e["pid"]] == "framework" for e in calls))
        copies = [e for e in spans if e["name"] in ("neuroncc::input_copy", "neuroncc::output_copy")]
        self.assertEqual(len(copies), 10)
        # Each call holds its copies and its nrt_execute, which lasts the modeled time.
        executes = sorted((e for e in spans if e["name"] == "nrt_execute"), key=lambda e: e["ts"])
        for call in sorted(calls + [e for e in spans if e["name"] == "neuroncc::mlp"], key=lambda e: e["ts"]):
            inner = [e for e in executes if call["ts"] <= e["ts"] and e["ts"] + e["dur"] <= call["ts"] + call["dur"]
                     + 1e-6]
            self.assertEqual(len(inner), 1, call)

        with self.assertRaisesRegex(FileExistsError, "already holds a profile"):
            with neuroncc.profile(output_dir=out):
                pass
        with neuroncc.profile(output_dir=out, overwrite=True) as again:
            self.norm(self.x)
        self.assertEqual(len(glob.glob(os.path.join(out, "neff_*.neff"))), 1)
        self.assertEqual(again.key_averages()[0].count, 1)

    def test_schedule_records_only_the_active_steps(self):
        out = os.path.join(self.tmp, "sched")
        with neuroncc.profile(output_dir=out, schedule=neuroncc.schedule(wait=1, warmup=1, active=2)) as prof:
            for _ in range(6):
                self.norm(self.x)
                prof.step()
        rows = {r.key: r for r in prof.key_averages()}
        self.assertEqual(rows["neuroncc::rmsnorm"].count, 2)
        with open(os.path.join(out, "trace.json")) as f:
            names = [e["name"] for e in json.load(f)["traceEvents"]]
        self.assertEqual(names.count("nrt_execute"), 2)
        with self.assertRaises(ValueError):
            neuroncc.schedule(active=0)

    def test_torch_profiler_events_are_merged(self):
        from torch.profiler import ProfilerActivity, profile as torch_profile
        for order in ("torch_outside", "torch_inside"):
            out = os.path.join(self.tmp, order)
            if order == "torch_outside":
                with torch_profile(activities=[ProfilerActivity.CPU],
                                   on_trace_ready=neuroncc.torch_trace_handler(out)):
                    with neuroncc.profile(output_dir=out):
                        for _ in range(2):
                            self.norm(torch.tanh(self.x))
            else:
                with neuroncc.profile(output_dir=out):
                    with torch_profile(activities=[ProfilerActivity.CPU],
                                       on_trace_ready=neuroncc.torch_trace_handler(out)):
                        for _ in range(2):
                            self.norm(torch.tanh(self.x))
            with open(os.path.join(out, "trace.json")) as f:
                trace = json.load(f)
            torch_events = [e for e in trace["traceEvents"] if e.get("cat") == "torch.profiler"]
            self.assertEqual(len([e for e in torch_events if e["name"] == "aten::tanh"]), 2, order)
            self.assertTrue(all(e["pid"] == 1 for e in torch_events))
            # The eager tanh ran before each call's nrt_execute on the session clock.
            executes = sorted(e["ts"] for e in trace["traceEvents"] if e["name"] == "nrt_execute")
            tanhs = sorted(e["ts"] for e in torch_events if e["name"] == "aten::tanh")
            self.assertLess(tanhs[0], executes[0])
            self.assertLess(executes[0], tanhs[1])
            self.assertLess(tanhs[1], executes[1])


class Walkthrough(Tmp):
    def test_walkthrough_prints_three_tables_and_writes_reports(self):
        script = os.path.join(HERE, "..", "..", "examples", "profiling", "walkthrough.py")
        p = subprocess.run([sys.executable, script], env=dict(os.environ, NEURONCC_EXAMPLE_OUT=self.tmp),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.count("Self Device time total:"), 3)
        for variant in ("naive_O0", "rms_norm", "naive_O2"):
            self.assertTrue(os.path.isfile(os.path.join(self.tmp, variant, "report.html")), variant)
        ratios = {}
        for line in p.stdout.splitlines():
            parts = line.split()
            if "naive -O0 / this" in line:
                ratios[" ".join(parts[:-8])] = float(parts[-1].rstrip("x"))
        self.assertEqual(set(ratios), {"naive -O0", "rms_norm", "naive -O2"})
        # The headline: fused is about one-sixth of the six-dispatch version.
        self.assertGreater(ratios["naive -O2"], 4.0)
        self.assertGreater(ratios["rms_norm"], 4.0)

    def test_compile_graph(self):
        graph = os.path.join(HERE, "..", "..", "examples", "rmsnorm", "fused_op.mlir")
        compiled = neuroncc.compile_graph(graph, opt=2)
        self.assertEqual([i["name"] for i in compiled.signature["inputs"]], ["x", "weight"])
        x = torch.randn(4, 512).to(torch.bfloat16)
        w = torch.ones(512, dtype=torch.bfloat16)
        y = compiled(x, w)
        ref = (x.float() * torch.rsqrt((x.float() ** 2).mean(-1, keepdim=True) + 1e-6)).to(torch.bfloat16)
        self.assertEqual(y.dtype, torch.bfloat16)
        common.compare(y.float().numpy(), ref, TOLERANCE["bf16"])
        with self.assertRaises(FileNotFoundError):
            neuroncc.compile_graph(os.path.join(self.tmp, "missing.mlir"))
        bad = os.path.join(self.tmp, "bad.mlir")
        with open(bad, "w") as f:
            f.write("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n  return %y : tensor<4xf32>\n}\n")
        with self.assertRaises(neuroncc.CompileError) as cm:
            neuroncc.compile_graph(bad)
        self.assertEqual(cm.exception.code, "NCC-E002")
        self.assertIn("bad.mlir", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
