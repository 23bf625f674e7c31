#!/usr/bin/env python3
"""The simulated NeuronCore gives the same bits whatever the host does.

libnrt splits an instruction's partitions and a matmul's output columns
across worker threads (NEURONCC_RT_THREADS), and runs runs of
partition-local instructions a few partitions at a time (bands; off with
NEURONCC_RT_BANDS=0). Neither may change a single output bit, and a child
process forked after the workers started must still run (alone). Each case is
run by neuron-run in-order on one thread (the reference) and then with 2, 3
and 5 threads, with and without bands; every output file must be identical.

The cases are large enough that the parallel paths run (an instruction of
32k elements or more, windows of many instructions), in f32 and bf16, at
-O2 and -O0 (-O0 keeps intermediates in the HBM arena, whose reuse the band
planner must respect), with random and default-initialised parameters.
"""
import os
import select
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e_common as common  # noqa: E402,F401  (puts tools/python on the path)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import neuroncc  # noqa: E402
from neuroncc import models, toolchain  # noqa: E402

RUN = os.path.join(toolchain.BUILD, "bin", "neuron-run")
SETTINGS = [("1", "0"), ("2", "1"), ("3", "1"), ("5", "1"), ("2", "0"), ("1", "1")]


def rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def attention(q, k, v):
    s = q @ k.transpose(-1, -2) * 0.125
    mask = torch.triu(torch.full((s.shape[-1], s.shape[-1]), float("-inf"), dtype=s.dtype), 1)
    return torch.softmax(s + mask, -1) @ v


def cases():
    g = torch.Generator().manual_seed(7)
    for dt, dname in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        def rnd(*shape):
            return torch.randn(*shape, generator=g).to(dt)
        yield "rmsnorm_%s" % dname, rms_norm, (rnd(512, 1024), torch.ones(1024, dtype=dt))
        yield "softmax_%s" % dname, lambda x: torch.softmax(x, -1), (rnd(384, 768),)
        yield "gelu_layernorm_%s" % dname, lambda x, w, b: F.gelu(F.layer_norm(x, (640,), w, b)), (
            rnd(300, 640), torch.ones(640, dtype=dt), torch.zeros(640, dtype=dt))
        yield "matmul_%s" % dname, lambda a, b: torch.relu(a @ b), (rnd(256, 384), rnd(384, 640))
        yield "attention_%s" % dname, attention, (rnd(2, 256, 64), rnd(2, 256, 64), rnd(2, 256, 64))
        layer = models.LlamaDecoderLayer(hidden=256, heads=4, intermediate=512, max_seq=128).eval().to(dt)
        yield "llama_%s" % dname, layer, (rnd(1, 128, 256),)


class SameBitsOnAnyThreadCount(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="neuroncc-threads-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def run_case(self, name, neff, inputs):
        work = os.path.join(self.tmp, name)
        os.makedirs(work)
        path = os.path.join(work, "model.neff")
        with open(path, "wb") as f:
            f.write(neff)
        args = [RUN, path, "-q"]
        for i, x in enumerate(inputs):
            npy = os.path.join(work, "in%d.npy" % i)
            np.save(npy, x.float().numpy())
            args += ["--input", "@" + npy]
        results = {}
        for threads, bands in SETTINGS:
            out = os.path.join(work, "t%s_b%s" % (threads, bands))
            env = dict(os.environ, NEURONCC_RT_THREADS=threads, NEURONCC_RT_BANDS=bands)
            proc = subprocess.run(args + ["--output-dir", out], env=env, capture_output=True, text=True)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            files = {}
            for f in sorted(os.listdir(out)):
                with open(os.path.join(out, f), "rb") as handle:
                    files[f] = handle.read()
            results[(threads, bands)] = files
        reference = results[SETTINGS[0]]
        self.assertTrue(reference)
        for setting, files in results.items():
            self.assertEqual(sorted(files), sorted(reference))
            for f in files:
                if files[f] != reference[f]:
                    at = next(i for i, (a, b) in enumerate(zip(files[f], reference[f])) if a != b) \
                        if len(files[f]) == len(reference[f]) else "the length"
                    self.fail("%s: %s differs at byte %s with threads=%s bands=%s" %
                              (name, f, at, setting[0], setting[1]))

    def test_workloads(self):
        for name, fn, inputs in cases():
            for opt in (2, 0):
                with self.subTest(case=name, opt=opt):
                    with torch.no_grad():
                        compiled = neuroncc.trace(fn, inputs, opt=opt)
                    self.run_case("%s_O%d" % (name, opt), compiled.neff, inputs)

    def test_bundled_models_default_init(self):
        for name in sorted(models.MODELS):
            for dtype in ("f32", "bf16"):
                with self.subTest(model=name, dtype=dtype):
                    module, inputs = models.MODELS[name].build(models.DTYPES[dtype], init="default")
                    compiled = neuroncc.trace(module, inputs, opt=2)
                    self.run_case("%s_%s" % (name, dtype), compiled.neff, inputs)


class ForkedChild(unittest.TestCase):
    def test_a_child_process_runs_on_its_own(self):
        # The worker threads do not survive fork(): a child that executes the
        # model it inherited must run it alone, with the same bits, and not
        # wait for workers that do not exist in it.
        x = torch.randn(512, 1024, generator=torch.Generator().manual_seed(3))
        compiled = neuroncc.trace(lambda t: torch.softmax(t, -1), (x,), opt=2)
        want = compiled(x).numpy().tobytes()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read)
                ok = compiled(x).numpy().tobytes() == want
                os.write(write, b"same" if ok else b"differs")
            finally:
                os._exit(0)
        os.close(write)
        deadline = 60
        ready, _, _ = select.select([read], [], [], deadline)
        if not ready:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            self.fail("the forked child did not finish its execution within %d s" % deadline)
        answer = os.read(read, 16)
        os.close(read)
        os.waitpid(pid, 0)
        self.assertEqual(answer, b"same")


if __name__ == "__main__":
    unittest.main()
