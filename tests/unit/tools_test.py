#!/usr/bin/env python3
"""Command-line behaviour of neuron-run, neuron-profile and neuron-packager on
the hand-built test NEFFs (tests/unit/make_test_neffs.cc):
  add.neff, add_bf16.neff, add_f16.neff: z = x + y over [4, 8]
  two_kernel.neff: z = (x * x) * w + 1 over float32 [4, 16], two kernels
  matmul.neff: z = x @ w, bfloat16 x [8, 32] and w [32, 16], float32 z
  causal_mask.neff: z = where(col <= row, x, -inf) over float32 [8, 8]
  embedding.neff: z = weight[ids], float32 weight [10, 8], int64 ids [6]

Usage: tools_test.py BIN_DIR NEFF_DIR [unittest args]
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

BIN = NEFFS = None


def tool(name):
    return os.path.join(BIN, name)


def run(args, expect_rc=0):
    proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if expect_rc is not None and proc.returncode != expect_rc:
        raise AssertionError("%s exited %d (wanted %d)\nstdout:\n%s\nstderr:\n%s"
                             % (" ".join(args), proc.returncode, expect_rc, proc.stdout, proc.stderr))
    return proc


def bf16_round(a):
    a = np.ascontiguousarray(a, dtype=np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)


class Tmp(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tools_test-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def save(self, name, array):
        p = self.path(name)
        np.save(p, array)
        return p

    def neff(self, name):
        return os.path.join(NEFFS, name)

    def embedding_inputs(self):
        """weight [10, 8] float32 and int64 ids [6] for embedding.neff."""
        weight = (np.arange(80, dtype=np.float32).reshape(10, 8) * 0.25 - 7).astype(np.float32)
        ids = np.array([3, 0, 9, 3, 7, 1], dtype=np.int64)
        return weight, ids

    def profile_dir(self, neff, inputs):
        prof = self.path("prof")
        args = [tool("neuron-run"), neff, "--profile", prof]
        for k, v in inputs.items():
            args += ["--input", "%s=@%s" % (k, self.save(k + ".npy", v))]
        run(args)
        return prof


class NeuronRun(Tmp):
    def add_inputs(self, dtype=np.float32):
        x = (np.arange(32, dtype=np.float32).reshape(4, 8) * 0.37 - 3).astype(dtype)
        y = (np.cos(np.arange(32, dtype=np.float32)).reshape(4, 8)).astype(dtype)
        return x, y

    def test_float32_add_and_summary(self):
        x, y = self.add_inputs()
        out = self.path("out", "nested")
        p = run([tool("neuron-run"), self.neff("add.neff"), "--input", "x=@" + self.save("x.npy", x),
                 "--input", "y=@" + self.save("y.npy", y), "--output-dir", out])
        z = np.load(os.path.join(out, "output_0.npy"))
        self.assertEqual(z.dtype, np.float32)
        np.testing.assert_array_equal(z, x + y)
        self.assertIn("modeled device time", p.stdout)
        self.assertIn("output_0.npy", p.stdout)

    def test_positional_inputs_fill_unnamed_ones_in_graph_order(self):
        x, y = self.add_inputs()
        xp, yp = self.save("x.npy", x), self.save("y.npy", y)
        for args in (["--input", "@" + xp, "--input", "@" + yp],
                     ["--input", "@" + xp, "--input", "y=@" + yp],
                     ["--input", "x=@" + xp, "--input", "@" + yp]):
            out = self.path("o")
            run([tool("neuron-run"), self.neff("add.neff"), "--output-dir", out, "-q"] + args)
            np.testing.assert_array_equal(np.load(os.path.join(out, "output_0.npy")), x + y)

    def test_bfloat16_inputs_round_and_outputs_widen_exactly(self):
        x, y = self.add_inputs()
        x[0, 0] = 1.0 + 2.0 ** -9  # not a bfloat16: rounds to 1.0
        out = self.path("o")
        run([tool("neuron-run"), self.neff("add_bf16.neff"), "--input", "x=@" + self.save("x.npy", x),
             "--input", "y=@" + self.save("y.npy", y), "--output-dir", out, "--target", "trn1"])
        z = np.load(os.path.join(out, "output_0.npy"))
        self.assertEqual(z.dtype, np.float32)
        want = bf16_round(bf16_round(x) + bf16_round(y))
        np.testing.assert_array_equal(z, want)
        np.testing.assert_array_equal(z, bf16_round(z))

    def test_float16_model_takes_and_gives_float16(self):
        x, y = self.add_inputs(np.float16)
        out = self.path("o")
        run([tool("neuron-run"), self.neff("add_f16.neff"), "--input", "x=@" + self.save("x.npy", x),
             "--input", "y=@" + self.save("y.npy", y), "--output-dir", out])
        z = np.load(os.path.join(out, "output_0.npy"))
        self.assertEqual(z.dtype, np.float16)
        np.testing.assert_array_equal(z, (x.astype(np.float32) + y.astype(np.float32)).astype(np.float16))

    def test_errors_are_clear_and_exit_nonzero(self):
        x, y = self.add_inputs()
        xp, yp = self.save("x.npy", x), self.save("y.npy", y)
        bad_shape = self.save("bad_shape.npy", np.zeros((4, 7), np.float32))
        f64 = self.save("f64.npy", np.zeros((4, 8)))
        f16 = self.save("f16.npy", np.zeros((4, 8), np.float16))
        fortran = self.save("fortran.npy", np.asfortranarray(np.zeros((4, 8), np.float32)))
        garbage = self.path("garbage.npy")
        with open(garbage, "wb") as f:
            f.write(b"not numpy at all")
        truncated = self.path("truncated.npy")
        with open(xp, "rb") as f, open(truncated, "wb") as g:
            g.write(f.read()[:-5])
        corrupt_neff = self.path("corrupt.neff")
        with open(self.neff("add.neff"), "rb") as f:
            data = bytearray(f.read())
        data[-1] ^= 1
        with open(corrupt_neff, "wb") as f:
            f.write(bytes(data))
        add = self.neff("add.neff")
        cases = [
            ([self.path("missing.neff")], 1, "cannot open"),
            ([corrupt_neff, "--input", "@" + xp, "--input", "@" + yp], 1, "SHA-256"),
            ([add, "--input", "x=@" + xp], 1, "missing input(s) 'y'"),
            ([add], 1, "missing input(s) 'x', 'y'"),
            ([add, "--input", "q=@" + xp, "--input", "y=@" + yp], 1, "no input named 'q'"),
            ([add, "--input", "x=@" + bad_shape, "--input", "y=@" + yp], 1, "shape (4, 7), the model expects (4, 8)"),
            ([add, "--input", "x=@" + f64, "--input", "y=@" + yp], 1, "float64"),
            ([add, "--input", "x=@" + f16, "--input", "y=@" + yp], 1, "holds float16"),
            ([add, "--input", "x=@" + fortran, "--input", "y=@" + yp], 1, "fortran_order"),
            ([add, "--input", "x=@" + garbage, "--input", "y=@" + yp], 1, "not a .npy file"),
            ([add, "--input", "x=@" + truncated, "--input", "y=@" + yp], 1, "truncated"),
            ([add, "--input", "x=@" + self.path("nope.npy"), "--input", "y=@" + yp], 1, "cannot open"),
            ([add, "--input", "x=@" + xp, "--input", "x=@" + yp], 1, "given twice"),
            ([add, "--input", "@" + xp, "--input", "@" + yp, "--input", "@" + yp], 1, "too many inputs"),
            ([add, "--input", "x=" + xp], 2, "expected NAME=@file.npy"),
            ([add, "--target", "trn2", "--input", "@" + xp, "--input", "@" + yp], 1, "compiled for trn1"),
            ([add, "--target", "trn9"], 2, "unknown --target"),
            ([add, "--bogus"], 2, "unknown option"),
            ([], 2, "no model given"),
        ]
        for args, rc, needle in cases:
            with self.subTest(args=args):
                p = run([tool("neuron-run")] + args, expect_rc=rc)
                self.assertIn(needle, p.stderr)
                self.assertTrue(p.stderr.startswith("neuron-run: error:") or "usage" in p.stderr, p.stderr)

    def test_matmul_model_matches_numpy(self):
        x = np.linspace(-3, 3, 8 * 32, dtype=np.float32).reshape(8, 32)
        w = np.cos(np.arange(32 * 16, dtype=np.float32)).reshape(32, 16)
        out = self.path("o")
        run([tool("neuron-run"), self.neff("matmul.neff"), "--input", "x=@" + self.save("x.npy", x),
             "--input", "w=@" + self.save("w.npy", w), "--output-dir", out, "-q"])
        z = np.load(os.path.join(out, "output_0.npy"))
        self.assertEqual(z.dtype, np.float32)
        self.assertEqual(z.shape, (8, 16))
        # bf16 inputs, exact products, f32 sums: close to the float64 product
        # of the rounded inputs (32 terms of magnitude <= 3).
        want = bf16_round(x).astype(np.float64) @ bf16_round(w).astype(np.float64)
        np.testing.assert_allclose(z, want, rtol=0, atol=32 * 3 * 2.0 ** -23 * 4)
        self.assertGreater(np.abs(z - x.astype(np.float64) @ w).max(), 1e-4)  # the inputs were rounded

    def test_causal_mask_model(self):
        x = np.arange(64, dtype=np.float32).reshape(8, 8) - 20
        out = self.path("o")
        run([tool("neuron-run"), self.neff("causal_mask.neff"), "--input", "x=@" + self.save("x.npy", x),
             "--output-dir", out, "-q"])
        z = np.load(os.path.join(out, "output_0.npy"))
        np.testing.assert_array_equal(z, np.where(np.tril(np.ones((8, 8), bool)), x, -np.inf))

    def test_embedding_reads_int64_ids_from_npy(self):
        weight, ids = self.embedding_inputs()
        out = self.path("o")
        p = run([tool("neuron-run"), self.neff("embedding.neff"), "--input", "ids=@" + self.save("ids.npy", ids),
                 "--input", "weight=@" + self.save("w.npy", weight), "--output-dir", out])
        z = np.load(os.path.join(out, "output_0.npy"))
        self.assertEqual(z.dtype, np.float32)
        np.testing.assert_array_equal(z, weight[ids])
        # Reads: 6 rows of 32 bytes and 6 int64 ids; writes: the 6 rows.
        self.assertIn("HBM read %d B, written %d B" % (6 * 32 + 6 * 8, 6 * 32), p.stdout)
        # Positional inputs bind in graph order: weight, then ids.
        run([tool("neuron-run"), self.neff("embedding.neff"), "--input", "@" + self.path("w.npy"),
             "--input", "@" + self.path("ids.npy"), "--output-dir", out, "-q"])
        np.testing.assert_array_equal(np.load(os.path.join(out, "output_0.npy")), weight[ids])

    def test_embedding_dtype_mismatches_and_bad_ids(self):
        weight, ids = self.embedding_inputs()
        wp, ip = self.save("w.npy", weight), self.save("ids.npy", ids)
        emb = self.neff("embedding.neff")
        cases = [
            (ids.astype(np.float32), "ids", "input 'ids': the file holds float32 ('<f4'), the model's int64 input "
                                            "needs int64 ('<i8') (save it with .astype(numpy.int64))"),
            (ids.astype(np.int32), "ids", "the file holds int32 ('<i4'), the model's int64 input needs int64"),
            (weight.astype(np.int64), "weight", "input 'weight': the file holds int64 ('<i8'), the model's float32 "
                                                "input needs float32 ('<f4') (save it with .astype(numpy.float32))"),
            (ids.reshape(2, 3), "ids", "shape (2, 3), the model expects (6,)"),
        ]
        for array, name, needle in cases:
            with self.subTest(needle=needle):
                bad = self.save("bad.npy", array)
                args = ["--input", "weight=@" + (bad if name == "weight" else wp),
                        "--input", "ids=@" + (bad if name == "ids" else ip)]
                p = run([tool("neuron-run"), emb] + args, expect_rc=1)
                self.assertIn(needle, p.stderr)
                self.assertIn("'%s'" % self.path("bad.npy"), p.stderr)
        # An id outside the table: the execution fails as an out-of-bounds access.
        oob = ids.copy()
        oob[4] = 10
        p = run([tool("neuron-run"), emb, "--input", "weight=@" + wp,
                 "--input", "ids=@" + self.save("oob.npy", oob)], expect_rc=1)
        self.assertIn("nrt_execute: NRT_EXEC_OOB: nrt_execute: kernel 0 ('embedding') instruction 0 (dma_gather): "
                      "partition 4 looks up row 10 (element 4 of int64 index tensor 'ids')", p.stderr)

    def test_profile_directory(self):
        x, y = self.add_inputs()
        prof = self.profile_dir(self.neff("add.neff"), {"x": x, "y": y})
        neffs = glob.glob(os.path.join(prof, "neff_*.neff"))
        self.assertEqual(len(neffs), 1)
        h = os.path.basename(neffs[0])[len("neff_"):-len(".neff")]
        self.assertEqual(sorted(os.listdir(prof)),
                         sorted(["neff_%s.neff" % h, "%s_instid_0_vnc_0.ntff" % h, "trace.json"]))
        with open(neffs[0], "rb") as a, open(self.neff("add.neff"), "rb") as b:
            self.assertEqual(a.read(), b.read())
        with open(os.path.join(prof, "%s_instid_0_vnc_0.ntff" % h), "rb") as f:
            self.assertEqual(f.read(4), b"NTFF")
        with open(os.path.join(prof, "trace.json")) as f:
            trace = json.load(f)
        lanes = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
        self.assertEqual(sorted(lanes.values()), ["framework", "hardware", "runtime"])
        spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
        by = lambda n: [e for e in spans if e["name"] == n]
        (execute,) = by("nrt_execute")
        (sched,) = by("nrta_execute_schedule")
        (hw,) = by("nc_exec_running")
        self.assertEqual(lanes[execute["pid"]], "framework")
        self.assertEqual(lanes[sched["pid"]], "runtime")
        self.assertEqual(lanes[hw["pid"]], "hardware")
        self.assertEqual(len(by("nrt_load")), 1)
        # Nesting: the call holds the dispatch, the dispatch holds the kernel run.
        eps = 1e-6
        self.assertLessEqual(execute["ts"], sched["ts"] + eps)
        self.assertGreaterEqual(execute["ts"] + execute["dur"], sched["ts"] + sched["dur"] - eps)
        self.assertLess(sched["ts"], hw["ts"])  # launch overhead first
        self.assertAlmostEqual(sched["ts"] + sched["dur"], hw["ts"] + hw["dur"], places=5)


class NeuronProfile(Tmp):
    def two_kernel_profile(self):
        x = np.linspace(-2, 2, 64, dtype=np.float32).reshape(4, 16)
        w = np.linspace(1, 3, 64, dtype=np.float32).reshape(4, 16)
        return self.profile_dir(self.neff("two_kernel.neff"), {"x": x, "w": w})

    def view(self, *args, rc=0):
        return run([tool("neuron-profile"), "view"] + list(args), expect_rc=rc)

    def test_a_bad_trace_in_a_directory_is_skipped(self):
        prof = self.two_kernel_profile()
        ntff = [f for f in os.listdir(prof) if f.endswith(".ntff")][0]
        h = ntff.split("_")[0]
        # A second trace of the same NEFF, cut short: reported, skipped, the good one shown.
        with open(os.path.join(prof, ntff), "rb") as f:
            data = f.read()
        with open(os.path.join(prof, "%s_instid_1_vnc_0.ntff" % h), "wb") as f:
            f.write(data[: len(data) // 2])
        self.assertNotIn(".profile-incomplete", os.listdir(prof))  # removed once the profile is whole
        open(os.path.join(prof, ".profile-incomplete"), "w").close()  # as a killed writer leaves it
        p = self.view("-d", prof, "--output-format", "summary-json")
        self.assertIn("was not completely written", p.stderr)
        self.assertIn("warning: skipping '%s_instid_1_vnc_0.ntff'" % h, p.stderr)
        self.assertEqual(json.loads(p.stdout)["kernel_count"], 2)
        os.unlink(os.path.join(prof, ntff))
        p = self.view("-d", prof, rc=1)
        self.assertIn("could be read", p.stderr)

    def test_summary_json_and_aten_attribution(self):
        prof = self.two_kernel_profile()
        s = json.loads(self.view("-d", prof, "--output-format", "summary-json").stdout)
        events = json.loads(self.view("-d", prof, "--output-format", "json").stdout)
        self.assertEqual(s["kernel_count"], 2)
        self.assertEqual(s["execution_count"], 1)
        for key in ["total_time", "hbm_read_bytes", "hbm_write_bytes", "dma_transfer_count",
                    "tensor_engine_active_time_percent", "vector_engine_active_time_percent",
                    "scalar_engine_active_time_percent", "gpsimd_engine_active_time_percent"]:
            self.assertIn(key, s)
        self.assertEqual(s["hbm_read_bytes"], 3 * 256)
        self.assertEqual(s["hbm_write_bytes"], 2 * 256)
        self.assertEqual(s["dma_transfer_count"], 5)
        total_us = s["total_time"] * 1e6
        self.assertAlmostEqual(sum(k["device_time_us"] for k in s["kernels"]), total_us, places=3)
        self.assertAlmostEqual(sum(o["device_time_us"] for o in s["aten_ops"]), total_us, places=3)
        self.assertAlmostEqual(total_us, events["total_time_us"], places=3)
        # The fused kernel splits its time by the busy time of each op's
        # instructions: mul = the vector multiply, add = the scalar activation.
        square, fused = s["kernels"]
        self.assertEqual(square["source_ops"], ["aten.mul.Tensor"])
        self.assertEqual(fused["source_ops"], ["aten.mul.Tensor", "aten.add.Tensor"])
        busy = {}
        for e in events["instructions"]:
            if e["span"] == 1 and e["source_op"]:
                busy[e["source_op"]] = busy.get(e["source_op"], 0) + e["end_us"] - e["start_us"]
        share_add = busy["aten.add.Tensor"] / (busy["aten.add.Tensor"] + busy["aten.mul.Tensor"])
        ops = {o["name"]: o for o in s["aten_ops"]}
        self.assertEqual(ops["aten.mul.Tensor"]["calls"], 2)
        self.assertEqual(ops["aten.add.Tensor"]["calls"], 1)
        self.assertAlmostEqual(ops["aten.add.Tensor"]["device_time_us"], fused["device_time_us"] * share_add, places=3)
        self.assertAlmostEqual(ops["aten.mul.Tensor"]["device_time_us"],
                               square["device_time_us"] + fused["device_time_us"] * (1 - share_add), places=3)
        # Vector engine: the two multiplies; its percentage follows from the events.
        vec = sum(e["end_us"] - e["start_us"] for e in events["instructions"] if e["queue"] == "vector")
        self.assertAlmostEqual(s["vector_engine_active_time_percent"], 100 * vec / total_us, places=3)

    def test_matmul_profile_shows_the_tensor_engine(self):
        x = np.ones((8, 32), np.float32)
        w = np.ones((32, 16), np.float32)
        prof = self.profile_dir(self.neff("matmul.neff"), {"x": x, "w": w})
        s = json.loads(self.view("-d", prof, "--output-format", "summary-json").stdout)
        events = json.loads(self.view("-d", prof, "--output-format", "json").stdout)
        self.assertEqual(s["matmul_count"], 2)
        self.assertEqual(s["tensor_engine_flops"], 2 * 2 * 16 * 8 * 16)  # two K tiles of 16
        tensor = [e for e in events["instructions"] if e["queue"] == "tensor"]
        self.assertEqual(sorted(e["opcode"] for e in tensor), ["matmul", "matmul", "transpose", "transpose"])
        busy = sum(e["end_us"] - e["start_us"] for e in tensor)
        self.assertGreater(s["tensor_engine_active_time_percent"], 0)
        self.assertAlmostEqual(s["tensor_engine_active_time_percent"], 100 * busy / (s["total_time"] * 1e6), places=3)
        peak = 2 * 128 * 128 * events["device"]["tensor_ghz"] * 1e9  # bf16 FLOP/s
        self.assertAlmostEqual(s["mfu_estimated_percent"], 100 * s["tensor_engine_flops"] / s["total_time"] / peak,
                               places=4)
        bytes_ = s["hbm_read_bytes"] + s["hbm_write_bytes"]
        self.assertAlmostEqual(s["mm_arithmetic_intensity"], s["tensor_engine_flops"] / bytes_, places=5)
        text = self.view("-d", prof).stdout
        self.assertIn("TensorEngine: 2 matmuls", text)
        p = run([tool("neuron-packager"), "info", self.neff("matmul.neff")])
        self.assertIn("tensor:4", p.stdout)
        self.assertIn("no SBUF/PSUM races", p.stdout)

    def test_summary_text_table(self):
        prof = self.two_kernel_profile()
        text = self.view("-d", prof).stdout
        for needle in ["Self Device Time (us)", "Self Device %", "# of Calls", "square", "fused",
                       "aten.mul.Tensor", "aten.add.Tensor", "Self Device Time total:"]:
            self.assertIn(needle, text)
        mul_line = [l for l in text.splitlines() if l.startswith("aten.mul.Tensor")][0]
        self.assertTrue(mul_line.split()[-1] == "2", mul_line)
        # Rows are sorted by time, descending, within each table.
        ops = [l for l in text.splitlines() if l.startswith("aten.")]
        times = [float(l.split()[1]) for l in ops]
        self.assertEqual(times, sorted(times, reverse=True))

    def test_mismatched_pairs_are_refused(self):
        prof = self.two_kernel_profile()
        (ntff,) = glob.glob(os.path.join(prof, "*.ntff"))
        h = os.path.basename(ntff).split("_")[0]
        p = self.view("-n", self.neff("add.neff"), "-s", ntff, rc=1)
        self.assertIn("does not match", p.stderr)
        self.assertIn(h, p.stderr)
        with open(self.neff("add.neff"), "rb") as f:
            add_bytes = f.read()
        # -d with file names whose <H> differ.
        bad = self.path("bad")
        shutil.copytree(prof, bad)
        os.rename(os.path.join(bad, os.path.basename(ntff)), os.path.join(bad, "42_instid_0_vnc_0.ntff"))
        p = self.view("-d", bad, rc=1)
        self.assertIn("does not match", p.stderr)
        self.assertIn("42", p.stderr)
        self.assertIn(h, p.stderr)
        # -d where the NEFF under the right name is another program.
        swapped = self.path("swapped")
        shutil.copytree(prof, swapped)
        with open(os.path.join(swapped, "neff_%s.neff" % h), "wb") as f:
            f.write(add_bytes)
        p = self.view("-d", swapped, rc=1)
        self.assertIn("does not match", p.stderr)
        # Nothing to pair with at all.
        os.remove(os.path.join(swapped, "neff_%s.neff" % h))
        self.view("-d", swapped, rc=1)
        self.view("-d", self.path("nonexistent"), rc=1)

    def test_capture_then_view_and_other_formats(self):
        ntff = self.path("cap.ntff")
        xp = self.save("x.npy", np.ones((4, 16), np.float32))
        p = run([tool("neuron-profile"), "capture", "-n", self.neff("two_kernel.neff"), "-s", ntff, "x", xp])
        self.assertIn("'w' not given: using zeros", p.stdout)
        s = json.loads(self.view("-n", self.neff("two_kernel.neff"), "-s", ntff,
                                 "--output-format", "summary-json").stdout)
        self.assertEqual(s["kernel_count"], 2)
        out = self.path("perfetto.json")
        self.view("-n", self.neff("two_kernel.neff"), "-s", ntff, "--output-format", "perfetto",
                  "--output-file", out)
        with open(out) as f:
            trace = json.load(f)
        names = {e["name"] for e in trace["traceEvents"]}
        self.assertTrue({"square", "fused", "dma_load", "tensor_tensor", "activation"} <= names, names)
        self.view("-n", self.neff("two_kernel.neff"), "-s", ntff, "--output-format", "bogus", rc=2)
        self.view("-n", self.neff("two_kernel.neff"), rc=2)
        run([tool("neuron-profile"), "frobnicate"], expect_rc=2)


    def test_embedding_capture_and_summary(self):
        _, ids = self.embedding_inputs()
        ntff = self.path("emb.ntff")
        emb = self.neff("embedding.neff")
        p = run([tool("neuron-profile"), "capture", "-n", emb, "-s", ntff, "ids", self.save("ids.npy", ids)])
        self.assertIn("'weight' not given: using zeros", p.stdout)
        s = json.loads(self.view("-n", emb, "-s", ntff, "--output-format", "summary-json").stdout)
        self.assertEqual(s["dma_transfer_count"], 2)
        self.assertEqual(s["hbm_read_bytes"], 6 * 32 + 6 * 8)
        self.assertEqual(s["hbm_write_bytes"], 6 * 32)
        events = json.loads(self.view("-n", emb, "-s", ntff, "--output-format", "json").stdout)
        self.assertEqual([e["opcode"] for e in events["instructions"]], ["dma_gather", "dma_store"])
        self.assertEqual([d["direction"] for d in events["dma"]], ["hbm_to_sbuf", "sbuf_to_hbm"])
        # Zeros are valid ids (row 0); a float file for the int64 input is not.
        run([tool("neuron-profile"), "capture", "-n", emb, "-s", self.path("zeros.ntff")])
        p = run([tool("neuron-profile"), "capture", "-n", emb, "-s", self.path("bad.ntff"), "ids",
                 self.save("f.npy", ids.astype(np.float32))], expect_rc=1)
        self.assertIn("the model's int64 input needs int64", p.stderr)


class NeuronPackager(Tmp):
    def test_info_lists_header_and_nodes(self):
        p = run([tool("neuron-packager"), "info", self.neff("add_bf16.neff")])
        lines = p.stdout.splitlines()
        self.assertIn("Nodes", lines)
        x = [l.split(None, 3) for l in lines if l.startswith("x ")][0]
        self.assertEqual(x[:2], ["x", "IN"])
        self.assertIn("[4, 8]  bfloat16  64", p.stdout)
        self.assertTrue(any(l.startswith("z ") and " OUT " in l for l in lines))
        self.assertIn("header_size", p.stdout)
        self.assertIn("profile hash <H>", p.stdout)

    def test_info_prints_integer_inputs(self):
        p = run([tool("neuron-packager"), "info", self.neff("embedding.neff")])
        lines = p.stdout.splitlines()
        ids = [l.split() for l in lines if l.startswith("ids ")]
        self.assertEqual(ids, [["ids", "IN", "[6]", "int64", "48"]])
        weight = [l.split() for l in lines if l.startswith("weight ")]
        self.assertEqual(weight, [["weight", "IN", "[10,", "8]", "float32", "320"]])
        self.assertIn("dma:2", p.stdout)
        self.assertIn("no SBUF/PSUM races", p.stdout)

    def test_refuses_corrupt_files(self):
        bad = self.path("bad.neff")
        with open(self.neff("add.neff"), "rb") as f:
            data = f.read()
        with open(bad, "wb") as f:
            f.write(data[:-1])
        p = run([tool("neuron-packager"), "info", bad], expect_rc=1)
        self.assertIn("invalid NEFF", p.stderr)
        run([tool("neuron-packager")], expect_rc=2)
        # Not a NEFF at all, and a directory: said as such.
        text = self.path("notes.txt")
        with open(text, "w") as f:
            f.write("not a neff\n" * 200)
        for t in ("neuron-packager", "neuron-run"):
            args = [tool(t), "info", text] if t == "neuron-packager" else [tool(t), text]
            self.assertIn("not a NEFF file (bad magic", run(args, expect_rc=1).stderr)
        self.assertIn("is a directory", run([tool("neuron-run"), self.path("")], expect_rc=1).stderr)


if __name__ == "__main__":
    BIN, NEFFS = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0]] + sys.argv[3:], verbosity=1)
