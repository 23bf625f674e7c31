#!/usr/bin/env python3
"""Regression tests for what the differential graph fuzzer (tests/fuzz/graph_fuzz.py)
and the reports behind issue 8 found: one test per class of failure, each compiled at
-O0 and -O2, run, and compared with PyTorch eager (tolerances as in test_models.py:
f32 1e-4, bf16 2^-5, relative to max |eager|).

Classes: crashes (a splat matmul bias; a 3-D matmul result used twice), wrong results
(a reduction over a dim an earlier reduction in the same kernel collapsed), an internal
error (an invalid NEFF from a one-column matmul in a wider kernel), refusals of valid
graphs (constants, views of computed values, cats, reductions over every dim, tril of a
computed tensor, returned inputs and duplicates, integer inputs in arithmetic), fusion
(sibling branches, returned views), and clear errors for an empty graph, an empty tensor
and float64.
"""
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e_common as common  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from neuroncc import export as ex  # noqa: E402
from neuroncc import toolchain  # noqa: E402

TOL = {torch.float32: common.F32_TOLERANCE, torch.bfloat16: 2.0 ** -5, torch.float16: 2.0 ** -7}


def g(seed=0):
    return torch.Generator().manual_seed(seed)


def randn(*shape, dtype=torch.float32, seed=0):
    return torch.randn(shape, generator=g(seed)).to(dtype)


class FuzzRegressions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="neuroncc-fuzzreg-")

    def check(self, fn, inputs, opts=(0, 2)):
        """Compiles fn at each opt level, runs it, compares every output with eager;
        returns {opt: kernel count}."""
        ref = fn(*inputs)
        refs = ref if isinstance(ref, (tuple, list)) else (ref,)
        kernels = {}
        for opt in opts:
            name = "%s_O%d" % (self.id().split(".")[-1], opt)
            outs, _ = common.export_compile_run(fn, inputs, self.tmp, name, opt)
            self.assertEqual(len(outs), len(refs))
            for out, r in zip(outs, refs):
                common.compare(out, r, TOL.get(r.dtype, 1e-4))
            info = subprocess.run([toolchain.tool("neuron-packager"), "info", os.path.join(self.tmp, name + ".neff")],
                                  stdout=subprocess.PIPE, text=True, check=True).stdout
            kernels[opt] = int(re.search(r"(\d+) kernels", info).group(1))
        return kernels

    def check_dtypes(self, prefix, cases):
        """Each case (fn, inputs, eager dtypes of its outputs) at -O0 and -O2: every output has
        eager's dtype and matches it (integers and bools exactly)."""
        for n, (fn, inputs, dtypes) in enumerate(cases):
            refs = fn(*inputs)
            refs = refs if isinstance(refs, tuple) else (refs,)
            self.assertEqual([r.dtype for r in refs], dtypes)
            for opt in (0, 2):
                outs, _ = common.export_compile_run(fn, inputs, self.tmp, "%s_%d_O%d" % (prefix, n, opt), opt)
                for out, ref in zip(outs, refs):
                    self.assertEqual(out.dtype, ref.numpy().dtype)
                    common.compare(out, ref, 1e-4)

    def test_mask_logic_ops(self):
        """Masks combined with |, &, ^ and ~ (bitwise ops on bools) and the logical_* ops on any
        dtype (nonzero counts as true, NaN too): bool outputs exact, and a padding mask built
        with | applied to scores. Bitwise ops on integers are refused with a clear error."""
        x, y = randn(6, 40, seed=1), randn(6, 40, seed=2)
        x[0, 0], x[1, 1], y[2, 2] = float("nan"), 0.0, 0.0
        m1, m2 = x > 0, y < 0.5
        pad = torch.ones(6, 40, dtype=torch.int64)
        pad[:, 33:] = 0
        self.check_dtypes("masks", [
            (lambda a, b: (a | b, a & b, a ^ b, ~a), (m1, m2), [torch.bool] * 4),
            (lambda a, b: (torch.logical_and(a, b), torch.logical_or(a, b), torch.logical_xor(a, b),
                           torch.logical_not(a)), (x, y), [torch.bool] * 4),
            (lambda a, b: torch.logical_or(a > 0, b), (x, m2), [torch.bool]),
            (lambda a, p: a.masked_fill((a > 1) | (p == 0), -1e4), (x, pad), [torch.float32]),
            (lambda a, b: (~(a & b)).float() * 2 - 1, (m1, m2), [torch.float32]),
        ])
        # (Bitwise ops of integers: test_narrow_integers.py.)

    def test_clamp_maximum_minimum_split_with_sizes(self):
        """clamp with Scalar bounds (both, min only, max only; NaN stays NaN; an int64 tensor),
        maximum/minimum with broadcasting (NaN propagates), and split_with_sizes as a fused
        q/k/v projection is split."""
        x, y = randn(6, 40, seed=3), randn(6, 1, seed=4)
        x[0, 0], y[3, 0] = float("nan"), float("nan")
        i = torch.arange(-20, 20, dtype=torch.int64).reshape(4, 10)
        self.check_dtypes("clamp", [
            (lambda a: (torch.clamp(a, -0.5, 0.7), a.clamp(min=0.1), a.clamp(max=-0.2)), (x,),
             [torch.float32] * 3),
            (lambda a: a.clamp(-3, 5), (i,), [torch.int64]),
            (lambda a, b: (torch.maximum(a, b), torch.minimum(b, a), torch.maximum(a, a * 0.5)), (x, y),
             [torch.float32] * 3),
        ])
        w = randn(48, 16, seed=5)
        h = randn(10, 16, seed=6)

        def qkv(a, wt):
            q, k, v = (a @ wt.t()).split([16, 16, 16], dim=-1)
            return q * 2 + k, v.split([10, 6], -1)[1]
        for dtype in (torch.float32, torch.bfloat16):
            self.check(qkv, (h.to(dtype), w.to(dtype)))

    def test_cumsum_of_infinities(self):
        """cumsum of masked values (-inf) and NaN: the sums before them stay finite. cumsum
        was a product with a triangular matrix of ones, whose 0 * -inf = NaN spread to every
        sum (graph_fuzz seed 6060606 case 879, focus composed)."""
        x = randn(3, 2, 129, 7, seed=9)
        x[0, 0, 5, 3] = float("-inf")
        x[1, 1, 100, 0] = float("nan")
        x[2, 0, 7, 1], x[2, 0, 9, 1] = float("inf"), float("-inf")
        for dtype in (torch.float32, torch.bfloat16):
            self.check(lambda a: (torch.cumsum(a.masked_fill(a > 1.5, float("-inf")), 3), a.cumsum(2), a.cumsum(-1)),
                       (x.to(dtype),))

    def run_mlir(self, name, text, inputs):
        """Compiles MLIR `text` at -O0 and -O2 and runs it on `inputs` (arrays, their own dtypes);
        returns the first output of each run."""
        path = os.path.join(self.tmp, name + ".mlir")
        with open(path, "w") as f:
            f.write(text)
        outs = []
        for opt in (0, 2):
            neff = toolchain.compile_graph(path, "%s.O%d.neff" % (path, opt), opt=opt)
            outs.append(toolchain.run_neff(neff, inputs, os.path.join(self.tmp, name + "-out"), keep_dtypes=True)[0])
        return outs

    def compile_error(self, fn, inputs, opt=2):
        path = os.path.join(self.tmp, self.id().split(".")[-1] + ".pb")
        ex.export_aten(fn, inputs, path)
        proc = subprocess.run([toolchain.tool("neuron-cc"), "compile", path, "-O%d" % opt, "--output", path + ".neff"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        return proc.stderr

    # -- crashes -------------------------------------------------------------------

    def test_linear_with_splat_bias(self):
        """SIGSEGV in emitDma: nn.Linear with a zero (or any splat) bias."""
        for fill in (0.0, 0.5):
            lin = torch.nn.Linear(16, 8)
            with torch.no_grad():
                lin.bias.fill_(fill)
            self.check(lambda x: lin(x), [randn(5, 16)])

    def test_default_initialised_layers(self):
        """Default parameters: LayerNorm weight of ones and bias of zeros, splat matmul operands."""
        ln = torch.nn.LayerNorm(16)
        self.check(lambda x: torch.relu(ln(x)) @ torch.ones(16, 4), [randn(5, 16)])
        self.check(lambda x: torch.full((3, 4), 2.0) @ x, [randn(4, 8)])

    def test_3d_matmul_result_used_twice(self):
        """SIGSEGV in the nc.kernel verifier: a reshaped matmul result read by two kernels."""
        w = randn(8, 16, seed=1)

        def f(x):
            v = x @ w
            return -v, v
        self.check(f, [randn(3, 4, 8)])

    # -- wrong results -------------------------------------------------------------

    def test_reduction_of_a_reduced_dim(self):
        """A second reduction over a dim the first one collapsed counts it once (was 512x)."""
        x = randn(4, 512)
        self.check(lambda x: x.sum(-1, keepdim=True).sum(-1), [x])
        self.check(lambda x: x.amax(-1, keepdim=True).sum(-1, keepdim=True), [x])
        self.check(lambda x: torch.softmax(x.mean(1, keepdim=True), dim=1), [randn(1000, 5)])
        self.check(lambda x: F.log_softmax(x.sum(1, keepdim=True), dim=1), [randn(3, 9000)])

    def test_input_broadcast_against_per_row_values(self):
        """Refused as 'does not broadcast to the iteration space': an input that broadcasts
        against a reduction's keepdim=False result (the kernel's rows), not its operand."""
        def fn(x, y):
            r = torch.logsumexp(x, -1)  # [1, 2, 2, 1]: one value per row of x
            return r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + 1e-5) * y  # y: [1, 1, 2, 1]
        self.check(fn, [randn(1, 2, 2, 1, 3), randn(1, 1, 2, 1, seed=1).abs() + 0.5])

    def test_logsumexp_of_reduced_precision_sums_in_float32(self):
        """Inf where eager is finite: logsumexp of 90,000 float16 zeros summed exp(0) in float16
        (65504 at most); it is computed in float32 and rounded once, as PyTorch does."""
        for dtype in (torch.float16, torch.bfloat16):
            with self.subTest(dtype=dtype):
                x = torch.zeros(300, 300, dtype=dtype)
                ref = torch.logsumexp(x.float(), dim=(0, 1)).to(dtype)
                for opt in (0, 2):
                    name = "lse_%s_O%d" % (str(dtype).split(".")[-1], opt)
                    outs, _ = common.export_compile_run(lambda x: torch.logsumexp(x, dim=(0, 1)), (x,), self.tmp,
                                                        name, opt)
                    common.compare(outs[0], ref, TOL[dtype])

    def test_soft_margin_loss_of_reduced_precision_in_float32(self):
        """Inf where eager is finite: soft_margin_loss in f16 formed exp(-y x) in f16, which
        overflows from -y x = 11.1 on (graph_fuzz 44171819 case 349: a sum of 426.75 came out
        inf). bf16 and f16 compute it in f32 and round once, as the op's opmath does (torch
        1.13's CPU has no f16 kernel: eager is f32 rounded once)."""
        x = torch.tensor([[12.0, -13.5, 0.25, 30.0, -0.5, 2.0]])
        y = torch.tensor([[-1.0, 1.0, 1.0, -1.0, -1.0, 1.0]])
        for dtype in (torch.float16, torch.bfloat16):
            for reduction in ("sum", "mean", "none"):
                with self.subTest(dtype=dtype, reduction=reduction):
                    def fn(x, y, reduction=reduction):
                        return F.soft_margin_loss(x, y, reduction=reduction)
                    ref = fn(x, y).to(dtype)
                    for opt in (0, 2):
                        name = "soft_margin_%s_%s_O%d" % (str(dtype).split(".")[-1], reduction, opt)
                        outs, _ = common.export_compile_run(fn, (x.to(dtype), y.to(dtype)), self.tmp, name, opt,
                                                            tracing_mode="fake")
                        common.compare(outs[0], ref, TOL[dtype])

    def test_sinc_float16_near_integers(self):
        """sinc in f16 formed pi * x in f16 (as torch 1.13's bf16 kernel does), losing what sin
        keeps near integers: 0.8% off at x = 1.025 (graph_fuzz 8989898 case 418). f16 now forms
        it in f32, as later PyTorch does; torch 1.13's CPU has no f16 sinc, so eager is f32
        rounded once (exported with fake tracing, which does not run it). Each value is
        compared on its own: near its zeros sinc is small."""
        x = torch.tensor([[1.025, 1.0078125, -2.00390625, -0.99951171875, 7.99, 3.0, 0.5, 0.0]],
                         dtype=torch.float16)
        ref = torch.sinc(x.float()).half()
        for opt in (0, 2):
            outs, _ = common.export_compile_run(torch.sinc, (x,), self.tmp, "sinc16_O%d" % opt, opt,
                                                tracing_mode="fake")
            for i in range(x.shape[1]):
                common.compare(outs[0][:, i], ref[:, i], 2.0 ** -7)

    def test_rms_norm_default_eps_bf16(self):
        """rms_norm computes bf16 in f32 with f32's epsilon (PyTorch), not the input dtype's."""
        x = randn(4, 5, dtype=torch.bfloat16) * 0.01
        outs = self.run_mlir("rms", 'func.func @main(%x: tensor<4x5xbf16> {nc.name = "x"}) -> tensor<4x5xbf16> {\n'
                             '  %y = aten.rms_norm %x {normalized_shape = array<i64: 5>} : tensor<4x5xbf16> -> tensor<4x5xbf16>\n'
                             '  return %y : tensor<4x5xbf16>\n}\n', {"x": common.device_array(x)})
        x32 = x.float()
        ref = (x32 * torch.rsqrt((x32 * x32).mean(-1, keepdim=True) + torch.finfo(torch.float32).eps)).bfloat16()
        for out in outs:
            common.compare(out, ref, 2.0 ** -5)

    # -- internal errors -------------------------------------------------------------

    def test_one_column_matmul_in_a_wider_kernel(self):
        """Was 'invalid NEFF: access pattern reaches elements [0, 638] of tensor w'."""
        w = randn(512, 1, seed=2)

        def f(x):
            v0 = x.sum(0, keepdim=True)
            return (v0 @ w) * v0
        self.check(f, [randn(3, 512)])

    # -- refusals of valid graphs ----------------------------------------------------

    def test_constants_of_every_kind(self):
        self.check(lambda x: x + torch.arange(64) * 0.01, [randn(64)])
        self.check(lambda x: x * (torch.arange(8).view(2, 4) * 2), [randn(3, 2, 4)])
        self.check(lambda x: x + torch.exp(torch.full((4, 8), 0.5)).sum(-1, keepdim=True), [randn(4, 8)])
        self.check(lambda x: (x + 1, torch.ones(3, 4) * 2, torch.arange(5) * 0.5), [randn(4)])
        p1, p2 = randn(4, seed=3), randn(4, seed=4)
        self.check(lambda x: x.masked_fill(p2 < p1, -1e4), [randn(2, 4)])
        self.check(lambda x: torch.where(torch.ones(8, 1, dtype=torch.bool).tril(0), x.amax(), x), [randn(3, 8, 1)])

    def test_reductions_over_every_dim(self):
        """Rows too long for SBUF over several dims are staged through HBM."""
        self.check(lambda x: x.mean(dim=(0, 1)), [randn(1000, 512)], opts=(2,))
        self.check(lambda x: x.sum(dim=(1, 2), keepdim=True), [randn(3, 200, 100)], opts=(2,))
        self.check(lambda x: x.sum(), [randn(30, 50)])
        self.check(lambda x: (x.sum(0), x.amax(0), torch.softmax(x, 0)), [torch.tensor(3.0)])

    def test_views_of_computed_values(self):
        self.check(lambda x: (x * 2).permute(1, 0), [randn(4, 64)])
        self.check(lambda x: (x.exp() + 1).transpose(0, 2), [randn(3, 4, 5)])

        def f(x):
            v = (x / (x * x + 1.0)).reshape(127, 3)
            return v, v.transpose(0, 1)
        self.check(f, [randn(127, 3)])
        self.check(lambda x: (x.to(torch.bfloat16).unsqueeze(2).reshape(124, 1) * 0,), [randn(31, 4)])

    def test_cat_of_any_operands(self):
        self.check(lambda x, y: torch.cat([x, y], 1) * 2, [randn(3, 4), randn(3, 2, dtype=torch.bfloat16)])
        self.check(lambda x: torch.cat([x.exp(), x.sum(-1, keepdim=True), torch.ones(3, 1)], 1), [randn(3, 4)])
        self.check(lambda x: torch.cat([torch.zeros(1), x, x], 0), [randn(5)])

    def test_tril_of_a_computed_tensor(self):
        self.check(lambda x: torch.tril(x * 2), [randn(2, 5, 5)])
        self.check(lambda x: torch.triu(x.exp(), 1) + 1, [randn(4, 6)])

    def test_returned_inputs_and_duplicates(self):
        self.check(lambda x, y: (y, x, x * 2), [randn(4, 3), randn(2)])
        self.check(lambda x: ((x * 2,) * 2 + (x, x)), [randn(3, 4)])

    def test_integer_graph_inputs_in_elementwise_ops(self):
        """Seed 969696 case 2615: an integer graph input compared with another value was
        refused (integer inputs were read only as embedding indices). They are now loaded into
        float32 tiles, the DMA converting each value: a 0/1 int64 attention mask used in
        arithmetic and through views (as Hugging Face models take it), masked_fill, int32
        inputs, values up to 2^24, a reduction of the converted mask and a matmul after it."""
        g = torch.Generator().manual_seed(3)
        x = torch.randn(4, 300, generator=g)
        mask = torch.randint(0, 2, (4, 300), generator=g)
        large = torch.randint(-(1 << 24), 1 << 24, (4, 300), generator=g)
        x3 = torch.randn(4, 3, 300, generator=g)
        self.check(lambda x, m: x * m, [x, mask])
        self.check(lambda x, m: x.masked_fill(m == 0, -1e4), [x, mask])
        self.check(lambda x, m: x + (1.0 - m[:, None, :].float()) * -10000.0, [x3, mask])
        self.check(lambda x, m: torch.where(m > 0, x, -x), [x, mask.to(torch.int32)])
        self.check(lambda x, m: m.float() * 0.5 + x, [x, large])
        self.check(lambda x, m: m.float().sum(-1, keepdim=True) + x, [x, mask])
        self.check(lambda x, m: m.float() @ x.t(), [x, mask])
        self.check(lambda x, m: (x * m).to(torch.bfloat16), [x, mask])

    def test_integer_results_returned_and_used(self):
        """Integer results: counts of a comparison (sum of a bool), integer arithmetic on an
        int64 input, int32 casts, results returned as int32/int64 graph outputs (the store
        converting each value) and used by later ops and kernels. The cast back of PyTorch's
        promotion (int -> f32 -> op -> int) is exact when the op keeps whole numbers whole; a
        cast of a fraction stays refused."""
        g = torch.Generator().manual_seed(5)
        x = torch.randn(4, 300, generator=g)
        w = torch.randn(300, 16, generator=g)
        mask = torch.randint(0, 2, (4, 300), generator=g)
        ids = torch.randint(-1000, 1000, (4, 300), generator=g)
        cases = [
            (lambda x: (x > 0).sum(-1), [x], [torch.int64]),
            (lambda x: (x > 0).sum(-1).to(torch.int32), [x], [torch.int32]),
            (lambda m: m * 3 - 1, [mask], [torch.int64]),
            (lambda i, x: (i + 5, x * 2), [ids, x], [torch.int64, torch.float32]),
            (lambda x, m: (m * 2, (m * 2).float() @ w), [x, mask], [torch.int64, torch.float32]),
            (lambda x, m: (m + 1, x * (m + 1)), [x, mask], [torch.int64, torch.float32]),
            (lambda x: ((x > 0).sum(-1, keepdim=True), ((x > 0).long() * 2).float() @ w), [x],
             [torch.int64, torch.float32]),
        ]
        # A computed fraction cast to an integer rounds toward zero (it was refused), and
        # the integer's users read the integer.
        cases += [(lambda x: ((x * 2.5).long(), (x * 2.5).long() * 3 + 1, (x * -7.25).to(torch.int32)), [x],
                   [torch.int64, torch.int64, torch.int32])]
        self.check_dtypes("intres", cases)

    def test_bool_graph_inputs_and_outputs(self):
        """Bool graph inputs (masks a caller passes, one byte each) are loaded into f32 tiles as
        0/1; bool results (comparisons) are returned as bools; a bool input's count is an int64
        result. They were refused at emission."""
        g = torch.Generator().manual_seed(7)
        x = torch.randn(4, 300, generator=g)
        mask = torch.randint(0, 2, (4, 300), generator=g).bool()
        cases = [
            (lambda x, m: x.masked_fill(m, -1e4), [x, mask], [torch.float32]),
            (lambda x, m: torch.where(m, x, x * 2), [x, mask], [torch.float32]),
            (lambda x: x > 0, [x], [torch.bool]),
            (lambda x, m: (torch.where(m, x > 0, x < -1), m.sum(-1)), [x, mask], [torch.bool, torch.int64]),
            (lambda x, m: (x * m, (x * 2 > 1)), [x, mask.view(4, 300)], [torch.float32, torch.bool]),
        ]
        self.check_dtypes("bools", cases)

    def test_long_rows_after_a_reduction_through_a_view(self):
        """Needs the reduced value at every element of a 9000-long row: a kernel boundary."""
        def f(x):
            v = torch.tanh(torch.amax(x, 0).view(-1))
            return F.gelu(torch.add(x, v, alpha=2.0)[2250:6750])
        self.check(f, [randn(9000)])

    def test_full_size_values_under_another_shape(self):
        """Read through strides in the kernel's own shape (a transposed, reshaped value)."""
        def f(x1, x9):
            v6 = (x1 + x1).reshape(2032, 7)
            v10 = torch.where(torch.ones(2032, 7, dtype=torch.bool).tril(-1), 3 - v6, x9)
            return torch.softmax(v6, dim=1), v10.transpose(0, 1)
        self.check(f, [randn(16, 127, 7), randn(2032, 7, seed=5)])

    def test_large_inner_dim(self):
        """A matmul with K = 70000 compiles (SBUF planning no longer searches hopeless lifetimes)."""
        self.check(lambda x, w: x @ w, [randn(4, 70000), randn(70000, 8, seed=6)], opts=(2,))

    def test_reduction_over_many_small_dims(self):
        """Was 'invalid NEFF: access pattern has 6 dims': merged into one free dim."""
        self.check(lambda x: x.mean(dim=(-5, 1, 2, -2, 4), keepdim=True), [randn(2, 2, 2, 2, 2, dtype=torch.bfloat16)])

    def test_half_composites_compute_in_f32(self):
        """var over 66k f16 elements overflowed f16 (inf); an rstd of 1/sqrt(1e-12) too (NaN)."""
        x = randn(129, 513).half()
        for out in self.run_mlir("ln16", 'func.func @main(%x: tensor<2x1xf16> {nc.name = "x"}) -> tensor<2x1xf16> {\n'
                                 '  %y, %m, %r = aten.native_layer_norm %x {normalized_shape = array<i64: 1>, eps = 1.0e-12}'
                                 ' : tensor<2x1xf16> -> tensor<2x1xf16>, tensor<2x1xf16>, tensor<2x1xf16>\n'
                                 '  return %y : tensor<2x1xf16>\n}\n', {"x": x[:2, :1].numpy()}):
            self.assertFalse(bool(torch.isnan(torch.from_numpy(out)).any()), out)
        for out in self.run_mlir("var16", 'func.func @main(%x: tensor<129x513xf16> {nc.name = "x"}) -> tensor<f16> {\n'
                                 '  %v, %m = aten.var_mean.correction %x {dim = array<i64: 0, 1>, correction = 1 : i64}'
                                 ' : tensor<129x513xf16> -> tensor<f16>, tensor<f16>\n'
                                 '  return %v : tensor<f16>\n}\n', {"x": x.numpy()}):
            common.compare(out, torch.var(x.float()).half(), 2.0 ** -7)

    def test_returned_view_of_a_row_constant_value(self):
        self.check(lambda x: (1e-06 - x.expand(2)).reshape(1, 2).transpose(0, 1), [randn(dtype=torch.bfloat16)])

    def test_reductions_over_different_numbers_of_dims_in_one_kernel(self):
        self.check(lambda x: x.sum(dim=(0, 1)).view(1).softmax(0), [randn(2, 2)])

    def test_logsumexp_of_all_minus_inf(self):
        """-inf, not NaN (the exporter's decomposition masks the maxima it subtracts)."""
        x = torch.full((4, 8), float("-inf"))
        x[0, 0] = 1.0
        self.check(lambda x: (torch.logsumexp(x, -1), torch.logsumexp(x, 0)), [x])

    def test_zero_d_operands(self):
        self.check(lambda x: torch.var_mean(x, -1, correction=0, keepdim=True)[1], [torch.tensor(0.5)])
        self.check(lambda x1, x2, x4: x2.masked_fill(x4 < x1.amax(), -10000.0),
                   [randn(1), torch.tensor(0.25), torch.tensor(-3.0)])
        w = randn(1, 2, seed=8)
        self.check(lambda x1, x3, x4: x1 + (x1 @ w.t()).masked_fill(x3 >= x4, 1.0),
                   [randn(2), torch.tensor([0.5]), torch.tensor([1.0])])

    def test_mixed_dtypes_after_a_squeezed_reduction(self):
        """Widening a 0-d mean next to a 0-d f32 operand would change PyTorch's promotion."""
        self.check(lambda x1, x17: torch.mul(torch.var_mean(x1, [0, -1], unbiased=False)[1], x17),
                   [randn(1, 1).half(), torch.tensor(0.75)])

    def test_reductions_of_zero_d_constants(self):
        """Folded as the identity (were refused as operations on constants)."""
        self.check(lambda x: torch.logsumexp(
            (torch.arange(1)[:, None] > torch.arange(1)[None, :]).type_as(x).mean(), -1) + x, [randn(1, 1)])
        self.check(lambda x: torch.var_mean(torch.scalar_tensor(3.0), (0,), correction=1)[1] * x, [randn(1, 1, 1)])

    def test_cat_of_constants_along_a_negative_dim(self):
        """The constant folder read cat's dim as unsigned (SIGSEGV)."""
        self.check(lambda x: torch.cat([(torch.arange(1)[:, None] >= torch.arange(2)[None, :]).type_as(x)] * 2, -1)
                   + x.sum(), [randn(1, 2)])

    def test_returned_transpose_of_a_returned_reshape(self):
        def f(x1, x5):
            v = x1 @ x5
            return v, v.transpose(0, 1)
        self.check(f, [randn(2, 2, 1), randn(1, 1, seed=9)])

    def test_returned_view_of_one_column_values_under_other_rows(self):
        """Seed 2027 case 713: a one-column value whose leading dims split the rows differently
        from the kernel's ([4, 1] in a [2, 2, 1] space) was stored through its returned view with
        a zero partition stride (two rows written to one address)."""
        for dtype in (torch.float32, torch.bfloat16):
            y = randn(1, dtype=dtype, seed=11)
            self.check(lambda x: ((x / 0.001).reshape(4, -1) * y).t().reshape(-1), [randn(2, 2, 1, dtype=dtype)])
            self.check(lambda x: (x.exp().reshape(6, 1) + y).t().reshape(2, 3), [randn(3, 2, 1, dtype=dtype)])
            self.check(lambda x: x.sum(-1, keepdim=True).reshape(2, 6, 1).transpose(0, 1).reshape(-1),
                       [randn(3, 4, 5, dtype=dtype)])

    def test_two_row_sums_of_one_activation(self):
        """Seed 7071 cases 1601, 1980, 2445: var_mean over a long row sums one rsqrt's
        results twice per chunk (the mean, and the mean inside the variance); both sums were
        folded into that activation's one accumulator, so one of them was never written."""
        for dtype in (torch.float32, torch.bfloat16):
            self.check(lambda x: torch.var_mean(torch.rsqrt(x * x + 1.0), -1, correction=0)[0],
                       [randn(6750, dtype=dtype)])
            self.check(lambda x: torch.var_mean(torch.exp(x), -1, correction=1), [randn(3, 5000, dtype=dtype)])

    def test_cat_along_the_last_dim_inside_kernels(self):
        """Seed 9091 cases 7, 13, 264 and seed 10101 case 201: at -O2 a cat along the last dim joins the kernel that
        reads it (its operands loaded into column ranges); a cat computed straight into a returned
        cast's dtype gave a converting DMA, a cat returned twice and a returned view of a cat were
        refused. Also rotate_half on a head-split view, bit for bit."""
        p0 = randn(2, 3, 4, seed=5)
        self.check(lambda x: torch.cat([x, x], dim=0).to(torch.float32), [randn(5, dtype=torch.bfloat16)])
        self.check(lambda x: (lambda c: (c, c))(torch.cat([p0, x], dim=2)), [randn(2, 3, 7)])
        self.check(lambda x: torch.cat([torch.full((1, 1, 1), -2.0), x], dim=-1).view(1, 2), [randn(1, 1, 1)])
        # Seed 10101 case 201: operands one column wide (constant along the row).
        self.check(lambda x, y: torch.cat([x, torch.cat([y.unsqueeze(-1)] * 2, dim=-1)], dim=1),
                   [randn(3, 4), randn(3, seed=2)])
        self.check(lambda x, y: torch.cat([x, y.expand(3, 5)], dim=-1) * 2.0, [randn(3, 4), randn(3, 1, seed=2)])
        for dtype in (torch.float32, torch.bfloat16):
            def rotary(x, cos, sin):
                q = x.view(17, 3, 64).transpose(0, 1)
                return q * cos + torch.cat((-q[..., 32:], q[..., :32]), dim=-1) * sin
            kernels = self.check(rotary, [randn(17, 192, dtype=dtype), randn(17, 64, dtype=dtype),
                                          randn(17, 64, dtype=dtype, seed=3)])
            self.assertEqual(kernels[2], 1)
            # The halves are copied from q's tile, not loaded again: q, cos and sin are loaded
            # once per head (3 x 17 x 64 elements each) and the sign row once per head's rows
            # (as many again as one of them); loading the halves would add q's elements once
            # more. Counted in bytes: a small kernel splits its transfers over idle queues.
            neff = os.path.join(self.tmp, "test_cat_along_the_last_dim_inside_kernels_O2.neff")
            loads = [i for i in toolchain.profile_instructions(neff, self.tmp) if i["opcode"] == "dma_load"]
            elem = torch.finfo(dtype).bits // 8
            self.assertLessEqual(sum(i["bytes"] for i in loads), 4 * 17 * 192 * elem)

    def test_transposed_inputs_of_elementwise_kernels(self):
        """An input read transposed (rows adjacent in memory, columns strided) is loaded with the
        columns on the partitions and transposed on the TensorEngine, not element by element, and
        a value stored transposed likewise; partial tiles, f32 and bf16, a 3-d permute, a softmax
        over the transposed rows."""
        for dtype in (torch.float32, torch.bfloat16):
            self.check(lambda x: x.t() * 2.0, [randn(300, 700, dtype=dtype)])
            self.check(lambda x, y: x.t() + y, [randn(130, 257, dtype=dtype), randn(257, 130, dtype=dtype, seed=1)])
            self.check(lambda x: (x.permute(0, 2, 1) - 1.0).exp(), [randn(3, 200, 150, dtype=dtype)])
            self.check(lambda x: torch.softmax(x.t(), -1), [randn(600, 300, dtype=dtype)])
            self.check(lambda x: x.t().contiguous(), [randn(129, 1000, dtype=dtype)])
            # Stored transposed: returned views and a transpose that must be materialized.
            self.check(lambda x: (x * 2.0).t(), [randn(300, 700, dtype=dtype)])
            self.check(lambda x: x.exp().permute(0, 2, 1), [randn(3, 200, 150, dtype=dtype)])
            self.check(lambda x: torch.softmax(x, -1).t(), [randn(257, 300, dtype=dtype)])
        neff = os.path.join(self.tmp, "test_transposed_inputs_of_elementwise_kernels_O2.neff")
        opcodes = [i["opcode"] for i in toolchain.profile_instructions(neff, self.tmp)]
        self.assertGreater(opcodes.count("transpose"), 0)
        # 129 x 1000 elements read one DMA each would be 129000 loads.
        self.assertLess(opcodes.count("dma_load"), 100)

    def test_matmul_with_a_splat_bias_rounds_once(self):
        """Seed 18181 case 2982: a linear layer whose bias is one element (a splat constant) added
        the bias with a second instruction on the f16 result tile, rounding twice; the row sums
        over 129 rows then drifted 0.9% from eager. Checked bit for bit in bf16 (torch 1.13's
        CPU has no f16 matmul to export): the inputs are multiples of 1/16 whose row sums are
        exact in f32, so the one correctly rounded result is known."""
        g = torch.Generator().manual_seed(6)
        x = (torch.randint(-64, 64, (129, 128), generator=g).float() / 16).to(torch.bfloat16)
        w, bias = torch.ones(1, 128, dtype=torch.bfloat16), torch.full((1,), 0.3, dtype=torch.bfloat16)
        ref = (x.float() @ w.float().t() + bias.float()).to(torch.bfloat16).float().numpy()
        for opt in (0, 2):
            outs, _ = common.export_compile_run(lambda x: F.linear(x, w, bias), [x], self.tmp,
                                                "splat_bias_O%d" % opt, opt)
            self.assertTrue(np.array_equal(outs[0].astype(np.float32), ref), "O%d" % opt)

    def test_strided_stores_before_a_kernel_boundary_load(self):
        """Seed 929292 case 127: a batched matmul stored transposed (every DMA reaching across the
        whole result with a strided pattern) followed by another kernel in the same dispatch.
        nrt_load refused it: the bookkeeping of the kernel-boundary waits cut the bytes into
        thousands of pieces that every later DMA revisited, past its linear bound."""
        for dtype in (torch.float32, torch.bfloat16):
            x1, x21 = randn(513, 2, 1, dtype=dtype), randn(6, 513, 2, 1, dtype=dtype, seed=1)
            self.check(lambda a, b: (torch.matmul(b, b.transpose(-2, -1)).transpose(0, -2) ** 3, a), [x1, x21])

    def test_long_dot_product_broadcast_over_a_long_row(self):
        """Seed 979797 case 758: a [1 x 22500] @ [22500 x 1] addmm times a 22500-vector. The
        kernel's 8074 SBUF tiles include about 7900 of 4 bytes, which 32-byte alignment makes
        take 32 each; the plan tried seven buffering depths that could not fit (1.3-1.9 s of
        placement each, 19 s in all, past the fuzzer's timeout) before one that did. Depths
        whose peak of aligned bytes exceeds SBUF are now skipped without placing anything.
        The [1 x 1] product was also computed again for each of the 45 column tiles (16038
        instructions); per-row values are now computed once per row tile (859)."""
        g = torch.Generator().manual_seed(9)
        x2, x = torch.randn(22500, generator=g), torch.randn(1, 22500, generator=g)
        w, bias = torch.randn(22500, 1, generator=g) / 150, torch.ones(1, 1)
        self.check(lambda x2, x, w: x2 * torch.addmm(bias, x, w, beta=0.5, alpha=0.5), [x2, x, w])
        info = subprocess.run([toolchain.tool("neuron-packager"), "info",
                               os.path.join(self.tmp, "test_long_dot_product_broadcast_over_a_long_row_O2.neff")],
                              stdout=subprocess.PIPE, text=True, check=True).stdout
        instructions = int(re.search(r"(\d+) instructions", info).group(1))
        self.assertLess(instructions, 2000, info)

    def test_softmax_over_two_billion_elements_compiles(self):
        """1 x 2^31 (an 8 GiB row): the row is spread over the partitions and the
        reductions split, so the program stays small (compiled here, not run)."""
        n = 1 << 31
        path = os.path.join(self.tmp, "softmax_2g.mlir")
        with open(path, "w") as f:
            f.write('func.func @main(%%x: tensor<1x%dxf32> {nc.name = "x"}) -> tensor<1x%dxf32> {\n'
                    '  %%y = aten._softmax %%x {dim = -1 : i64, half_to_float = false} : tensor<1x%dxf32> -> tensor<1x%dxf32>\n'
                    '  return %%y : tensor<1x%dxf32>\n}\n' % ((n,) * 5))
        toolchain.compile_graph(path, path + ".neff", opt=2)
        info = subprocess.run([toolchain.tool("neuron-packager"), "info", path + ".neff"], stdout=subprocess.PIPE,
                              text=True, check=True).stdout
        instructions = sum(int(m) for m in re.findall(r"^\d+\s+k\d+_\S+\s+(\d+)", info, re.M))
        # Unsplit, each of the four long kernels alone would unroll 2^31 / 4096 = 524288 chunks.
        self.assertLess(instructions, 1000000, info)

    def test_token_ids_read_through_views(self):
        """Token ids (an integer graph input) read through a view before the embedding, as
        Hugging Face models write `input_ids.view(-1, n)`, and sliced (`ids[:, 1:]`), were
        refused ("an integer graph input can only be read ... as embedding indices"): the
        gather reads an input in place only whole. Such indices are copied as a computed
        value first."""
        torch.manual_seed(0)
        table = randn(30, 8)
        ids = torch.randint(0, 30, (2, 7), generator=g(4))
        self.check(lambda i: (F.embedding(i.view(-1, 7), table), F.embedding(i[:, 1:], table),
                              F.embedding(i.t(), table), torch.index_select(table, 0, i[0]), table[i.reshape(-1)]),
                   [ids])

    def test_gathered_rows_of_one_element_broadcast(self):
        """Embedding rows of one element (a [V, 1] table, or index_select of a [1, 1] value)
        broadcast over wider columns in the same kernel: the gather read the kernel's column
        width from the table, an invalid NEFF at -O2 (graph_fuzz seed 7272727 case 296). It
        gathers one element per row now."""
        table, ids, wide = randn(3, 1), torch.tensor([1, 2]), randn(2, 5, seed=1)
        self.check(lambda t, i, b: (F.embedding(i, t) - b, (t * 2).index_select(0, i) * b), [table, ids, wide])

    def test_cat_of_integer_and_bool_inputs(self):
        """cat of an integer (or bool) graph input, which stays so in HBM, failed in the
        lowering's tile allocation with an MLIR verifier message (F.embedding_bag with
        include_last_offset appends to its offsets this way); it is read as a computed
        value now."""
        offsets, mask = torch.tensor([0, 0, 3, 7]), torch.tensor([True, False, True])
        self.check(lambda o, m: (torch.cat([o, torch.tensor([11])]), torch.cat([o.int(), o.int()]),
                                 torch.cat([m, m]), torch.cat([o, o]).float() * 0.5), [offsets, mask])
        # through views of the input too
        ids = torch.tensor([[0, 0, 3, 7], [1, 2, 3, 4]])
        self.check(lambda i: (torch.cat([i[:, 1:], i[:, :1]], 1), torch.cat([i.t(), i.t()], 0)), [ids])

    def test_integer_inputs_reversed_rolled_and_padded(self):
        """flip, roll and constant_pad_nd of an integer graph input (also rot90, and a flip
        under where, max, sort or atan2) failed in the lowering like cat did: the compositions
        build their cat directly, past the importer's check. The cat of a composition now
        reads such pieces from one computed copy of the input."""
        ids = torch.arange(-6, 6).reshape(3, 4)
        mask, x = ids > 0, randn(3, 4)
        self.check(lambda i, m, a: (i.flip(0) * 2, i.flip(1).float(), torch.roll(i, 1, 0) + 1, F.pad(i, (1, 1)),
                                    torch.rot90(i), torch.where(a > 0, i, i.flip(1)), i.flip(1).max(1)[0],
                                    torch.sort(i.flip(1), 1)[0], torch.atan2(i, i.flip(0)), a * m.flip(0),
                                    F.pad(m, (1, 0)), i.int().roll(2, 1)),
                   [ids, mask, x])

    def test_pooling_windows_that_tile_and_unread_indices(self):
        """A max pool's indices were computed even where the graph never reads them (a 16x16
        global max pool took 13.9 s to compile into a 255 KB NEFF); ops whose values nothing
        reads are dropped after import now. Windows that tile the input are one reshape and
        reduction: a 128x128 average pool was refused (its 16384 window slices needed more
        SBUF than there is)."""
        x = randn(2, 4, 16, 16, seed=40)
        x[0, 0, 0, 0] = float("nan")
        self.check(lambda a: (F.max_pool2d(a, 16), F.max_pool2d(a, (4, 2)), F.avg_pool2d(a, 4, divisor_override=5),
                              F.max_pool3d(a, 2), F.avg_pool3d(a, (2, 4, 4)), F.max_pool2d(a[..., :15, :13], 3)), [x])
        big = randn(1, 2, 128, 128, seed=41)
        self.check(lambda a: (F.avg_pool2d(a, 128), F.max_pool2d(a, 64)), [big], opts=(2,))

    def test_upsampling_to_a_size_the_node_does_not_ask_for(self):
        """A graph whose recorded upsampling result disagrees with its output_size (a mutated
        graph recorded 2^20 rows for an output_size of 4) compiled for minutes into that many
        rows; it is refused with both sizes."""
        from neuroncc import aten_graph_pb2 as pb
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "up.pb")
            ex.export_aten(lambda a: F.interpolate(a, size=(4, 9), mode="bicubic"), (randn(1, 2, 3, 5),), path)
            graph = pb.Graph()
            with open(path, "rb") as f:
                graph.ParseFromString(f.read())
            node = next(n for n in graph.nodes if "bicubic" in n.target)
            node.outputs[0].shape[2] = 1 << 20
            with open(path, "wb") as f:
                f.write(graph.SerializeToString())
            with self.assertRaises(toolchain.ToolError) as cm:
                toolchain.compile_graph(path, os.path.join(d, "up.neff"), opt=2)
            self.assertIn("upsampling to 4 along spatial dim 0, the graph records 1048576", str(cm.exception))

    def test_row_invariant_operand_of_a_long_row(self):
        """A bias over 60000 columns (234 KiB of f32 per partition) was loaded whole and kept
        for every row tile, so `x + bias`, `(x * w).sum(-1)` and a softmax after it needed more
        SBUF than there is; the cross entropy over a 50257-word vocabulary (its class positions
        a constant row) too. Row-invariant loads are kept up to 64 KiB, reloaded past that."""
        x, b = randn(256, 60000), randn(60000, seed=1)
        self.check(lambda a, w: (a + w, (a * w).sum(-1), torch.softmax(a + w, -1)), [x, b], opts=(2,))
        logits, labels = randn(300, 50257, seed=2), torch.randint(0, 50257, (300,), generator=g(3))
        self.check(lambda a, t: F.cross_entropy(a, t), [logits, labels], opts=(2,))

    # -- fusion ----------------------------------------------------------------------

    def test_sibling_branches_fuse(self):
        self.assertEqual(self.check(lambda x: torch.exp(x) * torch.tanh(x), [randn(4, 64)])[2], 1)

        def gelu_tanh(x):
            return 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
        self.assertEqual(self.check(gelu_tanh, [randn(4, 64)])[2], 1)

    def test_returned_view_needs_no_copy_kernel(self):
        self.assertEqual(self.check(lambda x: torch.logsumexp(x, -1), [randn(4, 64)])[2], 1)
        w = randn(64, 16, seed=7)
        self.assertEqual(self.check(lambda x: (x @ w).view(2, 4, 16), [randn(8, 64)])[2], 1)

    def test_attention_output_returned_and_read_through_views(self):
        """An attention kernel returns one value: it stores a returned view of its output
        only when nothing else reads the output (graph_fuzz seed 4040404 case 74 returned the
        output and a strided slice of it: 'the ops of an attention kernel do not form an
        attention')."""
        def f(q, k, v):
            o = torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-1, -2)), dim=-1), v)
            return o[:, ::2], o

        self.check(f, [randn(1, 7, 64), randn(1, 200, 64, seed=3), randn(1, 200, 1, seed=4)])

        def merged(q, k, v):
            o = torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * 0.125, dim=-1), v)
            return o.transpose(0, 1).reshape(130, -1)

        self.assertEqual(self.check(merged, [randn(2, 130, 64), randn(2, 130, 64, seed=3),
                                             randn(2, 130, 64, seed=4)])[2], 1)

    # -- clear errors ----------------------------------------------------------------

    def test_unit_trailing_dims_take_wide_columns(self):
        # graph_fuzz 9696969 case 91: two digammas (about 70 ops each) over
        # [129, 129, 1] ran one column per partition, 131 row tiles, 21,000
        # instructions, and the compiler's race self-check gave up on the
        # kernel (an internal error). The unit dim now joins the columns.
        x = (randn(129, 129, 1).abs() + 0.5).to(torch.bfloat16)
        mask = torch.ones(129, 1, dtype=torch.bool).triu(0)
        self.check(lambda a, m: torch.digamma(torch.digamma(a.abs() + 0.25).abs() + 0.25).masked_fill(m, float("-inf")),
                   [x, mask])
        # graph_fuzz 9898989 case 367: widened past one column tile (4218 > 4096
        # columns), the -O0 scatter kernels got every element but the first
        # wrong; columns are widened only where they fit one tile.
        self.check(lambda a, i: a.scatter(0, i, a.narrow(0, 0, 1)),
                   [randn(1, 4218), torch.zeros(1, 4218, dtype=torch.long)])

    def test_long_chain_before_a_reduction_over_long_rows(self):
        # graph_fuzz 10101010 case 42: a digamma (about 70 ops) over [1, 10000]
        # then a row maximum: whole rows of every intermediate needed 229 KB of
        # SBUF per partition ("needs 229380 SBUF bytes"); the kernel is lowered
        # again in column chunks (4096, then 2048 columns) into the accumulator.
        self.check(lambda a: torch.digamma(a.abs() + 0.25).max(1, keepdim=True)[0], [randn(1, 10000)])

    def test_cat_of_one_column_broadcast_along_wider_rows(self):
        # graph_fuzz 12121212 case 274: at -O2, the divisor cat([v[:, :0], v], 1)
        # of a [4, 1] v joined the [4, 128] division's kernel, which loaded it
        # into the first of 128 columns and divided the rest by what the tile
        # held. A cat left with one piece is now a copy, and a cat never joins
        # a kernel whose columns it would have to be broadcast along.
        w = randn(128, 1)
        self.check(lambda x, b: torch.addmm(b, x.amin(1, True), w.t()) / torch.cat([x[:, :0], x.amin(1, True)], 1),
                   [randn(4, 1), randn(1, 128)])
        self.check(lambda x, y: y.exp() / -torch.cat([x], 1), [randn(4, 1), randn(4, 128)])

    def test_matmul_operand_the_same_along_each_row(self):
        # graph_fuzz 30303030 case 219: at -O2, x[M, 1].expand(-1, K) * 1.0 @ w
        # computed its left operand in the matmul's kernel (a prologue) as one
        # column per row and transposed that one column into the stationary
        # slices: "stationary and moving must share the contraction dim" (one
        # k slice) or "columns [128, 1) are outside the source's 1" (more). The
        # operand is broadcast over its K columns first; an expanded splat and
        # an expanded row reduction take the same path.
        for dtype in (torch.float32, torch.bfloat16):
            for m, k, n in ((1, 2, 1), (200, 300, 70), (3, 700, 600)):
                w = randn(k, n, dtype=dtype, seed=1)
                self.check(lambda x, w: (x.expand(-1, k) * 1.0) @ w, [randn(m, 1, dtype=dtype), w])
                self.check(lambda x, w: torch.exp(x.expand(m, k)) @ w, [randn(1, 1, dtype=dtype), w])
                self.check(lambda x, b, w: torch.addmm(b, torch.relu(x.amax(1, True).expand(-1, k)), w),
                           [randn(m, 4, dtype=dtype), randn(n, dtype=dtype), w])

    def test_ceil_mode_window_longer_than_the_padded_input(self):
        # graph_fuzz 42424242 cases 86 and 157: with ceil_mode, PyTorch gives one
        # output where the window starts inside the input but ends past its
        # padded end (max_pool2d of a 2 x 2 input, kernel 3, dilation 2,
        # padding 1; avg_pool1d of length 2, kernel 3); the importer counted
        # no window there and refused the graph ("pooling window larger than
        # its padded input").
        for dtype in (torch.float32, torch.bfloat16):
            x = randn(1, 2, 2, 3, dtype=dtype)
            self.check(lambda x: F.max_pool2d(x, 3, stride=2, padding=1, dilation=2, ceil_mode=True), [x])
            for cip in (True, False):
                self.check(lambda x: F.avg_pool2d(x, (3, 4), stride=2, ceil_mode=True, count_include_pad=cip), [x])
                self.check(lambda x: F.avg_pool1d(x, 3, stride=2, ceil_mode=True, count_include_pad=cip),
                           [randn(2, 3, 2, dtype=dtype)])

    def test_long_elementwise_chain_over_wide_column_tiles(self):
        # graph_fuzz 86868686 case 555: digamma (about 70 ops once exported) of a row of
        # 12007 (a prime length, not spread over partitions) in column tiles of 4096
        # needed 229 KB of SBUF per partition and was refused at -O2 ("needs 229376 SBUF
        # bytes per partition"); so were rows of 8192 over 130 rows. The lowering now
        # narrows the column tiles of an elementwise kernel that overflows.
        fn = lambda x: torch.digamma(x.abs() + 0.25)
        for shape in ((1, 12007), (130, 8192)):
            self.check(fn, [randn(*shape, seed=5)])
        self.check(lambda x: torch.digamma(x.abs() + 0.25) - x.amax(-1, keepdim=True), [randn(130, 8192, seed=6)])

    def test_f16_round_decimals_computes_in_f32(self):
        # graph_fuzz 55555555 case 973: round(remainder(x, 0.5), decimals=2) of the f16
        # value 0.81494 gave 0.32: the product 0.31494 * 100 was rounded to f16 (31.5)
        # before the round. torch 1.13's CPU has no f16 round, and PyTorch's GPU
        # kernel computes in f32 (bf16 keeps the CPU kernel's bf16 steps, which eager
        # runs and test_composed_ops compares with). Exported as graph_fuzz does, with
        # the missing f16 kernels run in f32 and rounded once.
        sys.path.insert(0, os.path.join(HERE, "..", "fuzz"))
        import graph_fuzz  # noqa: E402

        x = torch.tensor([[0.81494140625], [0.31494140625], [2.675], [-1.2345], [0.125]], dtype=torch.float16)
        fn = lambda x: (torch.round(torch.remainder(x, 0.5), decimals=2), torch.round(x * 7, decimals=1))
        want = (torch.round(torch.remainder(x.float(), 0.5), decimals=2), torch.round(x.float() * 7, decimals=1))
        for opt in (0, 2):
            with torch.no_grad(), graph_fuzz.P["LowPrecisionEager"]():
                outs, _ = common.export_compile_run(fn, [x], self.tmp, "round_f16_O%d" % opt, opt)
            for out, w in zip(outs, want):
                self.assertEqual(out.dtype, np.float16)
                np.testing.assert_array_equal(out, w.half().numpy())

    def test_f16_average_pooling_sums_in_f32(self):
        # graph_fuzz 96969696 case 630: an RMSNorm over one element of an f16
        # avg_pool2d (16 window slices, divisor_override=1) was off by 1.5%: the importer
        # summed the slices in f16, each add rounded, where eager accumulates in f32 and
        # rounds once; the norm magnified the difference for small sums. torch 1.13's
        # CPU has no f16 avg_pool2d: the reference runs it in f32, rounded once. (1025
        # windows of values up to about 30, so that some sums lie near zero.)
        sys.path.insert(0, os.path.join(HERE, "..", "fuzz"))
        import graph_fuzz  # noqa: E402

        x = (randn(1, 1, 4097, 1, seed=7) * 8).half()

        def fn(x):
            v = F.avg_pool2d(x, 4, padding=2, divisor_override=1)
            return (v.float() * torch.rsqrt(v.float().pow(2).mean(-1, keepdim=True) + 1e-3)).to(x.dtype)

        want = fn(x.float()).half()
        for opt in (0, 2):
            with torch.no_grad(), graph_fuzz.P["LowPrecisionEager"]():
                outs, _ = common.export_compile_run(fn, [x], self.tmp, "avg_pool_f16_O%d" % opt, opt)
            common.compare(outs[0], want, 2.0 ** -9)

    def test_generator_models_roundings_inside_and_across_statements(self):
        # graph_fuzz 60606060 case 1234, a false report: v3 = F.linear(F.layer_norm(x), w)
        # in bf16, then v3 * rsqrt(mean(v3^2) + 1e-6) over a dim of 1 (about sign(v3)). One
        # row's dot product cancels to 0.0035; the bf16 roundings of the layer norm (exact on
        # the device: correctly rounded) shift it to 0.0017, and the next statement turns
        # that into 0.86 against eager's 0.96 (eager's own layer norm rounds otherwise and
        # happens to land near float64). The generator's sensitivity check moved only the
        # statement's operands, each by an ulp, so it saw neither the rounding inside the
        # first statement nor how far it carries. It now models every op's rounding and
        # carries the moved values, and does not add the second statement.
        sys.path.insert(0, os.path.join(HERE, "..", "fuzz"))
        import graph_fuzz  # noqa: E402

        b = graph_fuzz.Builder(1, "bf16", graph_fuzz.supported_ops())
        seeds = iter([757894916, 757999645, 758104374, 758313832, 758418561])
        b.next_seed = lambda: next(seeds)
        rows, k, one = b.sym(17), b.sym(129), b.sym(1)
        x = b.new_input(((rows,), (k,)), kind="unit")
        g = b.new_param(((k,),), kind="ones", buffer=False)
        beta = b.new_param(((k,),), kind="zeros", buffer=True)
        w = b.new_param(((one,), (k,)), kind="normal", arg=0.08804509063256238, buffer=False)
        bias = b.new_param(((one,),), kind="zeros", buffer=True)
        v3 = b.add("F.linear(F.layer_norm(%s, (129,), %s, %s, 1e-5), %s, %s)" % (x, g, beta, w, bias),
                   [((rows,), (one,))])
        eager = b.ev.real[v3].float()
        self.assertEqual(float(eager[16, 0]), 0.0036163330078125)  # the same data as the report
        with self.assertRaisesRegex(graph_fuzz.Reject, "ill-conditioned"):
            b.add("%s * torch.rsqrt(%s.pow(2).mean(-1, keepdim=True) + 1e-6)" % (v3, v3), [((rows,), (one,))])

    def test_empty_graph(self):
        path = os.path.join(self.tmp, "empty.pb")
        open(path, "wb").close()
        proc = subprocess.run([toolchain.tool("neuron-cc"), "compile", path, "--output", path + ".neff"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("the graph is empty: it returns no values", proc.stderr)

    def test_float64(self):
        # (Tensors with no elements, once refused here too, compile: test_empty_tensors.py.)
        self.assertIn("float64 graph inputs are not supported",
                      self.compile_error(lambda x: x * 2, [randn(3, 4).double()]))
        self.assertIn("float64 results are not supported",
                      self.compile_error(lambda x: x.double() * 2, [randn(3, 4)]))

    def test_index_fill_beyond_its_comparisons(self):
        """graph_fuzz seed 24242424 case 208: index_fill of 65151 positions by 65151 indices
        compiled at -O0 into a 34 GB arena (its [positions, indices] comparisons unfused),
        which the runtime could not allocate. It is refused at compile time past 2^28
        comparisons, as scatter is; a smaller one still matches eager."""
        x = randn(65151)
        idx = torch.randint(0, 65151, (65151,), generator=torch.Generator().manual_seed(3))
        for opt in (0, 2):
            self.assertIn("index_fill of more than 2^28 index comparisons",
                          self.compile_error(lambda a, i: a.index_fill(0, i, 0.0), [x, idx], opt=opt))
        small = torch.tensor([3, 0, 3, 99], dtype=torch.int64)
        self.check(lambda a, i: a.index_fill(0, i, -2.0), (randn(100, 3), small))

    def test_stack_of_single_rows_flattened(self):
        """graph_fuzz seed 29292929 case 16 (a generator added with the lowering):
        torch.stack([x, y, x, x], -1).flatten(-2) of [1] vectors. The copy kernel returns a
        reshape of its cat; with rows too few to pack, the general lowering took over but
        still skipped that reshape as the packed lowering does, and crashed (SIGSEGV in
        emitDma) on the view it had no layout for."""
        for dtype in (torch.float32, torch.float16):
            for n in (1, 5):
                x, y = randn(n).to(dtype), randn(n, seed=1).to(dtype)
                self.check(lambda a, b: torch.stack([a, b, a, a], dim=-1).flatten(-2), (x, y))


    def test_broadcast_returned_and_viewed(self):
        """graph_fuzz seed 59595959 case 46: repeat_interleave (an expand copy kernel, then
        a view) returned both itself and unsqueezed. The copy kernel took over the returned
        view while another kernel still read the broadcast through it: an internal error
        in ncc-form-kernels. The copy kernel now writes a returned view only where no other
        kernel reads through it."""
        for dtype in (torch.float32, torch.bfloat16):
            x = randn(1, 1, 2).to(dtype)
            self.check(lambda a: (a.repeat_interleave(70, dim=-1).unsqueeze(0), a.repeat_interleave(70, dim=-1)),
                       (x,))
            self.check(lambda a: (lambda r: (r.unsqueeze(0), r, r * 2))(a.repeat_interleave(3, dim=-1)),
                       (randn(4, 5, 6).to(dtype),))

    def test_sums_of_tiny_blocks_stay_small(self):
        """graph_fuzz seed 64646464 case 1378: a layer norm over the trailing [2, 1] of a
        [128, 256, 2, 1] f16 map (f32 here: eager has no f16 layer norm on the CPU, and its
        bf16 one loses the variance of two close values to cancellation), and the sum of squares of an amax over (2, 3). Each sum
        over dim 2 with a kept dim of 1 after it became a matrix product per row (32768
        matmuls of one column): 12.9 s to compile at -O2, a 33 MB NEFF. Such a sum is a
        reduction of adjacent elements, in rows; its program stays a few thousand
        instructions."""
        for dtype in (torch.float32,):
            x = randn(128, 256, 2, 1).to(dtype)
            w = torch.tensor([[1.65723], [-0.40918]]).to(dtype)

            def f(a):
                ln = F.layer_norm(a, (2, 1), weight=w, bias=torch.zeros_like(w))
                rms = (a.float() * torch.rsqrt(a.float().pow(2).mean(-1, keepdim=True) + 1e-5)).to(dtype)
                m = rms.amax(-1).unsqueeze(-1)
                return (m * m).sum((2, 3), keepdim=True).sqrt()[:, ::2], ln.reshape(65536, 1), ln
            self.check(f, (x,))
            info = subprocess.run([toolchain.tool("neuron-packager"), "info",
                                   os.path.join(self.tmp, "test_sums_of_tiny_blocks_stay_small_O2.neff")],
                                  stdout=subprocess.PIPE, text=True, check=True).stdout
            self.assertLess(int(re.search(r"(\d+) instructions", info).group(1)), 20000)

    def test_operand_broadcast_beside_a_group_norm(self):
        """graph_fuzz seed 86868686 case 1112: max(x13, group_norm(x3, 2).masked_fill(x6 >= -1,
        0)) with x13 of [2, 2, 1] broadcast over [1, 2, 2, 2]. The kernel's space is the group
        norm's [N, G, C / G, H, W] = [1, 2, 1, 2, 2], against which [2, 2, 1] does not broadcast:
        -O2 refused the graph ("does not broadcast to the iteration space"). Such an operand is
        read as its expansion to its reader's shape, regrouped as the space's. Also per-channel
        and per-column operands, and groups of several channels; f32 and bf16."""
        for dtype in (torch.float32, torch.bfloat16):
            for shape, groups, operand in (((1, 2, 2, 2), 2, (2, 2, 1)), ((2, 6, 3, 4), 3, (6, 1, 1)),
                                           ((2, 6, 3, 4), 2, (6, 3, 1)), ((2, 8, 5, 5), 4, (5,)),
                                           ((2, 8, 5, 5), 4, (8, 5, 5))):
                with self.subTest(dtype=dtype, shape=shape, operand=operand):
                    w, b = randn(shape[1], seed=1).to(dtype), randn(shape[1], seed=2).to(dtype)
                    x, y, z = randn(*shape).to(dtype), randn(*shape, seed=3).to(dtype), randn(*operand, seed=4).to(dtype)

                    def f(x, y, z):
                        g = F.group_norm(x, groups, w, b, eps=1e-5)
                        return torch.maximum(z, g.masked_fill(y >= -1.0, 0.0)), g * z
                    self.check(f, (x, y, z))

    def test_widening_cast_rounds_to_the_narrow_dtype_first(self):
        """graph_fuzz seed 95959595 case 476: layer_norm(softmax(x) @ ones.t()) in f16: the
        matmul's sums, cast to f32 for the norm and returned by the matmul's kernel, were
        computed straight into f32 (no f16 rounding), and the norm of the nearly constant
        rows (0.99997 where eager has 1.0) amplified the difference by 1 / sqrt(eps). A value
        of a narrower dtype whose only use is a returned widening cast is rounded to its own
        dtype first, as eager does; an f32 value is still computed straight into a narrower
        cast's dtype. bf16 elementwise ops returned as f32, and the case's norm in bf16."""
        dtype = torch.bfloat16
        x, y = randn(6, 40, seed=2).to(dtype), randn(6, 40, seed=3).to(dtype)
        self.check(lambda x, y: ((x * y + x).float(), torch.exp(x).float()), (x, y))
        ones, w, bias = torch.ones(2, 2, dtype=dtype), torch.full((2, 2), 3.0, dtype=dtype), randn(2, 2, seed=4)
        for seed in range(5, 9):
            s = randn(2, 2, seed=seed).to(dtype)
            self.check(lambda s: F.layer_norm(torch.softmax(s, -1) @ ones.t(), [2, 2], w, bias.to(dtype)), (s,))
        self.check(lambda x, y: (x.float() * y.float()).to(dtype), (x, y))

    def test_epilogue_over_columns_split_into_as_many_dims(self):
        """graph_fuzz seed 91929394 case 181: (x.sum(0) / y).t() with x of [2, 2, 2] and y
        of [1, 2] in f16. The sum is [1, 2] @ [2, 4] (a row of ones), reshaped to [2, 2];
        the division joined the matmul's kernel as an epilogue over its columns split in
        two dims, but [2, 2] has no more dims than the matmul's [1, 4], so the lowering
        kept the columns whole and y had no layout: -O2 refused the graph ("does not
        broadcast to the iteration space"). Such an epilogue joins only with scalars and
        rows of all the columns from outside; a split into more dims still joins (a
        [1, 2, 2] result)."""
        for dtype in (torch.float16, torch.float32, torch.bfloat16):
            x, y = randn(2, 2, 2).to(dtype), (randn(1, 2, seed=1).abs() + 0.5).to(dtype)
            self.check(lambda x, y: (torch.sum(x, 0) / y).t().unsqueeze(0).reshape(2, 2), (x, y))
            x, y = randn(3, 4, 6).to(dtype), (randn(6, seed=2).abs() + 0.5).to(dtype)
            self.check(lambda x, y: (torch.sum(x, 0).reshape(1, 4, 6) / y, torch.sum(x, 0) * 2), (x, y))

    def test_widened_result_of_a_middle_frame_kernel(self):
        """graph_fuzz seed 88899091 case 162: torch.mean(x.mean(1, keepdim=True), (0, 1, 2, 3))
        of an f16 [64, 2, 7, 14]. The inner mean and the f32 cast the staged outer mean
        starts with formed a kernel in the input's own layout (LowerMiddleFrame.cpp), whose
        cast kept the mean's f16 tile; it was stored to the f32 result as it was, a DMA that
        does not convert, and -O2 failed with inconsistent IR. A tile of a narrower float is
        copied into the stored dtype first."""
        for dtype in (torch.float16, torch.bfloat16):
            x = randn(64, 2, 7, 14).to(dtype)
            self.check(lambda a: torch.mean(a.mean(1, keepdim=True), (0, 1, 2, 3)), (x,))
            self.check(lambda a: (a - a.mean(1, keepdim=True)).float(), (randn(128, 4, 64).to(dtype),))

    def test_cat_of_matmul_rows_wider_than_a_psum_bank(self):
        """graph_fuzz --ctest case 61 (seed 20240, once g_middle_frame joined the generators):
        torch.cummax of a [7, 513] matmul result. cummax's ladder of slices and cats joined
        the matmul's kernel, its cats reading slices of the product's rows from their tile,
        but a matmul's kernel holds rows one PSUM bank (512 columns) wide at a time: -O2
        failed ("a cat operand that is not in HBM"). Such a cat joins a matmul's kernel only
        with rows of 512 columns or fewer; wider ones read the product from HBM."""
        for dtype in (torch.float32, torch.bfloat16):
            for n in (512, 513, 700):
                x, w = randn(7, 127).to(dtype), (randn(n, 127, seed=1) * 0.09).to(dtype)
                self.check(lambda x, w: torch.cummax(x @ w.t(), 1)[0], (x, w))

    def test_per_row_store_gathered_then_left_by_a_cat(self):
        """graph_fuzz 96979899 case 27 (f16, -O0 and -O2): torch.cat of [2, 1, 1] and
        [2, 129, 1] along dim 1. The copy kernel's first row tile of x's rows (one run in the
        output) gathered its 128 values for a transposed store of several row tiles; the next
        row tile's rows are two runs and the last has 2 rows, so none of them stored the
        gathered values, and the copy kernels' lowering had no final flush: 127 of the
        output's elements were never written. Every kernel body now flushes them at its end."""
        for dtype in (torch.float16, torch.float32, torch.bfloat16):
            for n in (129, 255, 300):
                a, b = randn(2, 1, 1).to(dtype), randn(2, n, 1, seed=1).to(dtype)
                self.check(lambda a, b: torch.cat([a, b], dim=1), (a, b))
                self.check(lambda a, b: torch.cat([b, a], dim=1) * 2, (a, b))

    def test_median_over_an_expanded_dim(self):
        """graph_fuzz 97989900 case 296 (bf16): a 'wrong' result that did not reproduce.
        torch 1.13's CPU median.dim and nanmedian.dim misread a reduced dim of stride 0
        (an expanded operand): values from outside the row, uninitialized memory among
        them, different from run to run. So the fuzzer's eager and float64 values were
        wrong, its conditioning checks passed or rejected the statement by chance, and the
        seed generated different programs. The fuzzer now gives these ops a contiguous
        copy (readable_args); the compiled medians are compared here with eager on one."""
        sys.path.insert(0, os.path.join(HERE, "..", "fuzz"))
        import graph_fuzz  # noqa: E402
        row = torch.tensor([17.0, 2.0, 1.0, 17.0, 1.0, 5.0, 2.0])
        with graph_fuzz.P["LowPrecisionEager"]():
            self.assertTrue(torch.equal(row.expand(3, 7).median(0)[0], row))
            self.assertTrue(torch.equal(row.double().expand(3, 7).nanmedian(0)[0], row.double()))
        graphs = [lambda x: x.expand(3, -1).median(0, keepdim=True)[0],
                  lambda x: x.expand(3, -1).nanmedian(0)[0] * 2,
                  lambda x: x.unsqueeze(1).expand(-1, 5, -1).median(1)[0]]
        for dtype in (torch.float32, torch.bfloat16):
            inputs = [row.to(dtype).unsqueeze(0), randn(1, 7, dtype=dtype), randn(4, 6, dtype=dtype, seed=2)]
            for k, (fn, x) in enumerate(zip(graphs, inputs)):
                with graph_fuzz.P["LowPrecisionEager"]():
                    want = fn(x)
                name = "median_expanded_%d_%s" % (k, str(dtype).split(".")[-1])
                for opt in (0, 2):
                    outs, _ = common.export_compile_run(fn, (x,), self.tmp, "%s_O%d" % (name, opt), opt)
                    common.compare(outs[0], want, TOL[dtype])

    def test_per_row_values_of_several_columns_stored(self):
        """graph_fuzz 40434547 case 207 (-O2, f32 and bf16): a scatter_reduce or
        scatter_add along dim 0 of [4, n] (n >= 1024), composed as per-row maxima or sums of
        an [n, 4, 2] frame, one column of the [n, 4] result at a time. Its value was a
        per-row layout whose tile holds the 4 columns, and the per-row transposed store
        (storeTransposed) stored only the first: it now takes tiles of one column only."""
        g = torch.Generator().manual_seed(4)
        for dtype in (torch.float32, torch.bfloat16):
            for shape in ((4, 1024), (4, 1143), (4, 3, 127, 3)):
                x, y = randn(*shape, dtype=dtype, seed=1), randn(2, *shape[1:], dtype=dtype, seed=2)
                i = torch.randint(0, 4, (2,) + shape[1:], generator=g)
                self.check(lambda a, b, c: a.scatter_reduce(0, b, c, "sum", include_self=True), (x, i, y))
                self.check(lambda a, b, c: a.scatter_reduce(0, b, c, "amax", include_self=True), (x, i, y))
                self.check(lambda a, b: a.scatter_add(0, b, a.narrow(0, 0, 2)), (x, i))


    def test_values_of_more_dims_than_a_neff_tensor_lists(self):
        """graph_fuzz 46020202 case 634 (-O0, bf16): a repeat of a rank-5 tensor expands an
        interleaved [r0, d0, r1, d1, ...] view of rank 10; at -O0 that value is a kernel's
        result in HBM, and the NEFF tensor for it listed 10 dims where the format takes 8
        (the verifier refused the compiler's own NEFF). Its leading dims are now folded."""
        x = randn(1, 1, 2, 2, 4)  # eager avg_pool3d takes no bf16 (torch 1.13)
        self.check(lambda a: F.avg_pool3d(a.repeat(2, 3, 2, 2, 1), 4, stride=2), (x,))
        for dtype in (torch.float32, torch.bfloat16):
            y = randn(2, 3, 2, 2, 3, dtype=dtype, seed=1)
            self.check(lambda a: a.repeat(2, 1, 3, 2, 2).sum(0), (y,))

    def test_zero_dim_copies_and_reductions(self):
        """graph_fuzz 46030303 cases 7 and 22, found by a build with LLVM's assertions and
        ASan: a 0-d graph input returned as is (a copy kernel of rank 0) and amax() of a
        0-d input read one element before an empty dim list (mergeCopiedColumns,
        planMiddleReduction). Release builds read it silently; an assertion build aborts."""
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            x = randn(dtype=dtype)
            self.check(lambda a: a.clone(), (x,))
            self.check(lambda a: a.amax(), (x,))
            self.check(lambda a: (a.sum(), a.mean((0,), True), a.amax(0)), (x,))
            self.check(lambda a, b: (a * b).amax(), (x, randn(dtype=dtype, seed=1)))

    def test_stored_cast_of_a_reused_load(self):
        """graph_fuzz 46060606 case 701 (-O0, bf16), found by ASan: index_reduce over [1, 6666]
        with one index casts a row-invariant index load to f32 and stores it, rows grouped
        several to a partition. The cast passed the load's tile on as its own, and the
        grouped store retargeted that tile into its group (erasing its alloc) while later
        row tiles still read the cached load: a use after free in the compiler. A load that
        later tiles reuse is no longer retargeted."""
        for dtype in (torch.float32, torch.bfloat16):
            x = randn(20000, dtype=dtype)
            i = torch.zeros(1, dtype=torch.int64)

            def fn(a, b):
                v = torch.split(a.reshape(1, 20000), [6666, 13334], 1)[0]
                return v.index_reduce(0, b, v.narrow(0, 0, 1), "amax", include_self=True), v
            self.check(fn, (x, i))

if __name__ == "__main__":
    unittest.main(verbosity=2)
