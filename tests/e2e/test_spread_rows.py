#!/usr/bin/env python3
"""Reductions over long rows. A few of them the lowering spreads over several
partitions per row (passes/LowerToIsa.cpp, splitLongRows): a language model's
last step for one to a few tokens (softmax, log-softmax, argmax and cross
entropy over a vocabulary), a norm of one token, per-row sums returned
through views, and rows holding infinities and NaN. Many of them, too long
for SBUF, take several kernels, where the ops that need the reduced values
recompute their elementwise operands (passes/FormKernels.cpp,
recomputeLongRowOperands); rows whose kernel's live values fit SBUF stay
whole in one kernel (wholeRowBytes there), and a kernel with many live rows
is split where they would not fit. Each is compiled at -O0 and -O2, run, and compared
with PyTorch eager in f32 and bf16; a softmax over a vocabulary for a few
tokens is one kernel at -O2.
"""
import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e_common as common  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from neuroncc import toolchain  # noqa: E402

DTYPES = common.FLOAT_DTYPES
randn = common.seeded_randn


class RmsNorm(nn.Module):
    """LLaMA's RMSNorm: in f32, cast back, then the weight."""

    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        v = x.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (x.float() * torch.rsqrt(v + 1e-6)).to(x.dtype)


def with_non_finite_rows(rows, cols, seed):
    """Random rows, the first holding a NaN, the second all -inf, the third a +inf."""
    x = randn(rows, cols, seed=seed) * 3
    x[0, 3] = float("nan")
    x[1] = float("-inf")
    x[2, 5] = float("inf")
    return x


class SpreadRows(common.ComparedWithEager):
    def kernels(self, opt=2):
        """Kernels of the NEFF the last check compiled at -O<opt>."""
        name = "%s_%d_O%d" % (self.id().split(".")[-1], self.count - 1, opt)
        info = subprocess.run([toolchain.tool("neuron-packager"), "info", os.path.join(self.tmp, name + ".neff")],
                              stdout=subprocess.PIPE, text=True, check=True).stdout
        return len(re.findall(r"^\d+\s+\d+\s+(k\d+_\S+)", info, re.M))

    def test_vocabulary_softmax_is_one_kernel(self):
        # 32000 words for 1 and 3 tokens; GPT-2's 50257 (29 partitions of 1733).
        for rows, vocab in ((1, 32000), (3, 32000), (1, 50257)):
            for dtype in DTYPES:
                with self.subTest(rows=rows, vocab=vocab, dtype=dtype):
                    logits = (randn(rows, vocab) * 4).to(dtype)
                    self.check(lambda x: F.softmax(x, -1), (logits,), opts=(2,))
                    self.assertEqual(self.kernels(), 1)
                    self.check(lambda x: (F.log_softmax(x, -1), x.argmax(-1)), (logits,))

    def test_last_token_sampling_step(self):
        # Temperature, top-1 probability and index, and the loss against a target.
        def step(logits, target):
            probs = F.softmax(logits / 0.7, dim=-1)
            top, index = probs.max(-1)
            return top, index, F.cross_entropy(logits.float(), target)

        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                self.check(step, ((randn(2, 32000, seed=3) * 3).to(dtype), torch.tensor([5, 31999])))

    def test_norms_of_one_token(self):
        # A decoder's norms for one token: default parameters (ones and zeros) and random
        # ones, f32 and bf16 (common.models).
        self.models(lambda: nn.LayerNorm(4096), (randn(1, 1, 4096),))
        self.models(lambda: RmsNorm(5120), (randn(1, 5120, seed=1),))
        self.models(lambda: nn.LayerNorm(8192), (randn(2, 3, 8192, seed=2),))

    def test_per_row_results_through_views(self):
        # Per-row values (one per row, held by each of the row's partitions) returned
        # without keepdim, through a view, and expanded over the row.
        def f(x):
            s = x.sum(-1)
            m = x.amax(-1, keepdim=True)
            return s, x.mean(-1).view(2, 3, 1), m.expand_as(x), x - m

        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                self.check(f, (randn(2, 3, 6000, seed=4).to(dtype),))

    def test_per_row_results_of_many_spread_rows(self):
        # More spread rows than DMA queues (17 to 64): their per-row values are gathered
        # onto one partition and stored in one transfer where they lie evenly spaced;
        # through a transposed view (not evenly spaced) a store a row. Non-finite rows
        # among them.
        def f(x):
            return (x.amax(-1), x.sum(-1, keepdim=True), torch.logsumexp(x, -1)[::2],
                    x.reshape(4, 16, -1).amin(-1).t(), x.mean(-1).view(8, 8) + 1)

        x = with_non_finite_rows(64, 3000, seed=15)
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                self.check(f, (x.to(dtype),))
                self.check(lambda x: (x.argmax(-1), x.amax(-1)), ((randn(17, 4096, seed=16) * 3).to(dtype),))

    def test_reductions_over_a_long_column(self):
        # Kept dims of size 1 after the reduced one ([N, 1] over dim 0): alone in a kernel,
        # such a reduction spreads like a long row. A log-softmax over dim 0 of [52000, 1]
        # (graph_fuzz 40434547 case 356) needed 256 KB of SBUF per partition at -O0 and
        # was refused. Ones and zeros too.
        column = randn(52000, 1, seed=17) * 3
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                self.check(lambda x: F.log_softmax(x, 0), (column.to(dtype),))
                self.check(lambda x: (x.sum(0), x.amax(0, keepdim=True), x.argmax(0)), (column.to(dtype),))
                self.check(lambda x: (x.mean(1), x.sum(1, keepdim=True)), (randn(3, 20000, 1, seed=18).to(dtype),))
                self.check(lambda x: x.amin(1, keepdim=True), (randn(3, 20000, 1, 1, seed=19).to(dtype),))
                self.check(lambda x: x.sum((1, 3)), (randn(2, 300, 1, 70, 1, seed=20).to(dtype),))
                self.check(lambda x: (x.sum(0), x.amax(0)), (torch.ones(70000, 1, dtype=dtype),))
                self.check(lambda x: (x.sum(0), x.amax(0)), (torch.zeros(70000, 1, dtype=dtype),))

    def test_non_finite_rows(self):
        # One row holds +inf, one NaN, one only -inf (its softmax is NaN), one is masked
        # but for a single element; the other rows must not see them.
        x = randn(5, 12288, seed=5)
        x[0, 7] = float("inf")
        x[1, 4000] = float("nan")
        x[2] = float("-inf")
        x[3, 1:] = float("-inf")
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                self.check(lambda x: (F.softmax(x, -1), x.amax(-1), x.sum(-1)), (x.to(dtype),))

    def test_long_rows_over_many_rows(self):
        # Rows too long for SBUF and too many to spread: the kernels after the reductions
        # compute x - max, exp(x - max) and x - mean again from x. Non-finite rows too.
        x = with_non_finite_rows(70, 9000, seed=6)
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                xd = x.to(dtype)
                self.check(lambda x: (F.softmax(x, -1), F.log_softmax(x, -1)), (xd,))
                self.check(lambda lg, t: F.cross_entropy(lg.float(), t),
                           ((randn(100, 32000, seed=8) * 2).to(dtype), torch.randint(0, 32000, (100,))))
        self.models(lambda: nn.LayerNorm(7000), (randn(2, 65, 7000, seed=7),))

    def test_whole_long_rows(self):
        # Rows of 8192 and 11000 over more rows than the spread takes: a softmax keeps two
        # live rows, so it stays one kernel; a norm of LLaMA-2-70B's width too.
        x = with_non_finite_rows(130, 8192, seed=9)
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                self.check(lambda x: F.softmax(x, -1), (x.to(dtype),), opts=(2,))
                self.assertEqual(self.kernels(), 1)
                self.check(lambda x: (F.softmax(x, -1), F.log_softmax(x, -1)), (x.to(dtype),))
                self.check(lambda x: F.softmax(x, -1), ((randn(3, 65, 11000, seed=10) * 2).to(dtype),))

        self.models(lambda: RmsNorm(8192), (randn(130, 8192, seed=11),))
        self.models(lambda: nn.LayerNorm(8192), (randn(2, 70, 8192, seed=12),))

    def test_many_live_long_rows(self):
        # Five full-width inputs live until the end of a row of 6144 f32: more than half
        # of a partition, so the kernel is split where its rows would not fit (this
        # failed to compile when only the row's length was counted).
        def f(a, b, c, d, e):
            s = a * b + c
            return (s - s.amax(-1, keepdim=True)) * a * b * c * d * e + d / e

        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                self.check(f, tuple((randn(130, 6144, seed=i) + 3).to(dtype) for i in range(5)))

    def test_online_normalizer(self):
        # Rows too long to stay whole in SBUF: the sum of exp(x - max) is taken chunk by
        # chunk against a running maximum in the maximum's kernel, so a softmax is two
        # kernels and a logsumexp one. Rows whose maximum comes early, late, after
        # chunks of -inf, or is +-inf or NaN.
        def rows(count, cols, seed):
            x = with_non_finite_rows(count, cols, seed)
            x[3, :5000] = float("-inf")
            x[4] = torch.linspace(-50, 50, cols)
            x[5, 0] = 40
            x[6, :-1] = float("-inf")
            x[7, 100], x[7, -100] = float("-inf"), float("inf")
            return x

        def normalizers(x):
            return (F.softmax(x, -1), F.log_softmax(x, -1), torch.logsumexp(x, -1),
                    F.softmax(x / 0.7, -1).amax(-1))

        for count, cols in ((70, 12288), (130, 32000)):
            x = rows(count, cols, seed=count)
            for dtype in DTYPES:
                with self.subTest(rows=count, cols=cols, dtype=dtype):
                    xd = x.to(dtype)
                    self.check(normalizers, (xd,))
                    self.check(lambda x: F.softmax(x, -1), (xd,), opts=(2,))
                    # (rows of 12288 stay resident in SBUF: one kernel; 32000 do not)
                    self.assertEqual(self.kernels(), 1 if cols == 12288 else 2)
                    self.check(lambda x: torch.logsumexp(x, -1, keepdim=True), (xd,), opts=(2,))
                    self.assertEqual(self.kernels(), 1)
        # Two rows of 2^20, each spread over 64 partitions and chunked there. Against
        # eager in f64: eager's f32 sums of 2^20 exponentials are off by 1.6e-4.
        x = randn(2, 1 << 20, seed=13) * 4
        x[1, : 1 << 19] = float("-inf")

        def spread(x):
            return F.softmax(x, -1), torch.logsumexp(x, -1)

        refs = [r.float() for r in spread(x.double())]
        for opt in (0, 2):
            outs, _ = common.export_compile_run(spread, (x,), self.tmp, "spread_O%d" % opt, opt)
            for out, ref in zip(outs, refs):
                common.compare(out, ref, common.F32_TOLERANCE)
        self.check(lambda lg, t: F.cross_entropy(lg, t),
                   ((randn(100, 32000, seed=14) * 2).to(torch.bfloat16).float(), torch.randint(0, 32000, (100,))))

    def test_sibling_reductions_over_long_rows(self):
        # Reductions of one long row in kernels that meet in a per-row op merge into one
        # chunked kernel; min-max scaling then needs one more for x - min.
        x = with_non_finite_rows(70, 12288, seed=15)
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                xd = x.to(dtype)
                self.check(lambda x: x.amax(-1) - x.amin(-1) + x.float().mean(-1), (xd,))
                self.assertEqual(self.kernels(), 1)
                self.check(lambda x: (x - x.amin(-1, keepdim=True)) / (x.amax(-1, keepdim=True) -
                                                                       x.amin(-1, keepdim=True)), (xd,))

    def test_resident_long_rows(self):
        # Rows too long to stay whole whose inputs fit SBUF (GPT-3's 12288, 16384 and 20000
        # in bf16): one kernel that keeps x resident and passes over it once per level of
        # reductions: RMSNorm twice, LayerNorm three times, softmax twice.
        for cols in (12288, 20000):
            x = with_non_finite_rows(70, cols, seed=16).to(torch.bfloat16)
            self.check(lambda x: F.layer_norm(x, (cols,)), (x,), opts=(2,))
            self.assertEqual(self.kernels(), 1)
            self.check(lambda x: (F.softmax(x, -1), F.log_softmax(x / 2, -1)), (x,))
            self.assertEqual(self.kernels(), 2)  # one for each
        self.models(lambda: RmsNorm(12288), (randn(130, 12288, seed=17),))
        self.models(lambda: nn.LayerNorm(12288), (randn(2, 70, 12288, seed=18),))
        # At 16384 whether a norm stays resident depends on its live values and on
        # its weight counting once for the row tiles in flight: either way it matches.
        self.models(lambda: RmsNorm(16384), (randn(130, 16384, seed=21),))
        self.models(lambda: nn.LayerNorm(16384), (randn(130, 16384, seed=22),))
        x, w = randn(130, 16384, seed=23).to(torch.bfloat16), randn(16384, seed=24).to(torch.bfloat16)
        self.check(lambda x, w: F.layer_norm(x, (16384,), w, w * 0.5), (x, w))
        # Three levels by hand, a residual input read in the last pass, and a per-row result.
        def chain(x, r):
            d = x - x.mean(-1, keepdim=True)
            s = d / d.abs().amax(-1, keepdim=True)
            return s * s.sum(-1, keepdim=True) + r, d.square().mean(-1)

        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                x, r = randn(70, 16384, seed=19).to(dtype), randn(70, 16384, seed=20).to(dtype)
                self.check(chain, (x, r))


if __name__ == "__main__":
    common.main()
