#!/usr/bin/env python3
"""Reductions over dims that are not the trailing ones, with the elementwise
ops around them (passes/FormKernels.cpp, reduceInPermutedFrame): softmax over
dim 0 or 1, a channel norm of NCHW maps (ConvNeXt's channels-first layer
norm), statistics over (N, H, W), several reductions over the same dims in
one computation, values of the permuted computation read by other ops and
returned, inputs broadcast along the reduced or the kept dims. At -O2 such a
computation runs in a frame whose last dims are the reduced ones (inputs read
through a permutation, results written back through the inverse one); -O0
keeps one kernel per op. A lone sum or mean over a run of leading dims is a
matrix product of a row of ones with the operand's [R, C] blocks, and a sum
of a product whose one factor is constant along the kept trailing dims (a
masked mean over tokens) the product of that factor's row with the other's
blocks (sumLeadingDimsByMatmul). Each case is compared with PyTorch eager in
f32 and bf16, with default-like (zeros, ones) and random parameters.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e_common as common  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

DTYPES = common.FLOAT_DTYPES
randn = common.seeded_randn


def channel_norm(x, w, b, eps=1e-6):
    u = x.mean(1, keepdim=True)
    s = (x - u).pow(2).mean(1, keepdim=True)
    x = (x - u) / torch.sqrt(s + eps)
    return w[:, None, None] * x + b[:, None, None]


class LeadingReductions(common.ComparedWithEager):
    def test_softmax_over_leading_dims(self):
        for shape, dim in (((32, 256, 64), 1), ((300, 40), 0), ((4, 130, 3, 50), 1), ((6, 5, 7), 0),
                           ((2, 1000, 129), -2)):
            for dtype in DTYPES:
                with self.subTest(shape=shape, dim=dim, dtype=dtype):
                    x = randn(*shape).to(dtype)
                    self.check(lambda a: (torch.softmax(a, dim), torch.log_softmax(a, dim)), (x,))

    def test_channel_norm(self):
        for shape in ((2, 96, 28, 28), (1, 40, 7, 9), (3, 130, 5, 4)):
            c = shape[1]
            for dtype in DTYPES:
                for w, b in ((torch.ones(c), torch.zeros(c)), (randn(c, seed=1), randn(c, seed=2))):
                    with self.subTest(shape=shape, dtype=dtype, w=float(w.sum())):
                        x = randn(*shape).to(dtype)
                        self.check(channel_norm, (x, w.to(dtype), b.to(dtype)))

    def test_channels_loaded_for_several_row_tiles(self):
        # In the permuted frame, consecutive row tiles whose positions continue
        # one run load their channels in one transfer (LowerToIsa.cpp,
        # loadTransposed): planes of 512 and 1024 positions (whole pairs of
        # row tiles), planes of 300 (row tiles that cross an image: some
        # gathered, some not), 256 channels (two blocks a transfer), and two
        # different views of one input read by one kernel.
        for shape in ((2, 128, 16, 32), (3, 96, 10, 30), (1, 256, 32, 32)):
            c = shape[1]
            for dtype in DTYPES:
                x = randn(*shape).to(dtype)
                for w, b in ((torch.ones(c), torch.zeros(c)), (randn(c, seed=1), randn(c, seed=2))):
                    with self.subTest(shape=shape, dtype=dtype, w=float(w.sum())):
                        self.check(channel_norm, (x, w.to(dtype), b.to(dtype)))
                with self.subTest(shape=shape, dtype=dtype, op="softmax, centring"):
                    self.check(lambda a: (torch.softmax(a, 1), a - a.mean(1, keepdim=True)), (x,))
        for dtype in DTYPES:
            with self.subTest(dtype=dtype, op="two views"):
                x = randn(2, 128, 16, 16).to(dtype)
                self.check(lambda a: torch.softmax(a, 1) + a.transpose(2, 3), (x,))
                self.check(lambda a: a - a.mean(1, keepdim=True) + a.flip(3), (x,))

    def test_statistics_over_several_dims(self):
        # Batch-norm-style statistics over (N, H, W), and over (0, 2) of a 3-d value.
        for dtype in DTYPES:
            with self.subTest(dtype=dtype, dims=(0, 2, 3)):
                x = randn(4, 24, 10, 10).to(dtype)
                g = randn(24, seed=3).to(dtype)

                def bn(a, g):
                    m = a.mean((0, 2, 3), keepdim=True)
                    v = ((a - m) ** 2).mean((0, 2, 3), keepdim=True)
                    return (a - m) * torch.rsqrt(v + 1e-5) * g[None, :, None, None]
                self.check(bn, (x, g))
            with self.subTest(dtype=dtype, dims=(0, 2)):
                x = randn(20, 33, 17).to(dtype)
                self.check(lambda a: a - a.amax((0, 2), keepdim=True) + a.sum((0, 2), keepdim=True) / 100, (x,))

    def test_values_read_outside(self):
        # Intermediate values of the permuted computation also read by other
        # ops, returned, or read through views; a producer shared with them.
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                x = randn(8, 200, 48).to(dtype)
                y = randn(8, 200, 48, seed=5).to(dtype)

                def f(a, c):
                    t = a * 2 + c
                    e = torch.exp(t - t.amax(1, keepdim=True))
                    s = e.sum(1, keepdim=True)
                    return e / s, e.transpose(1, 2) @ c, s.squeeze(1), t.relu().sum(-1)
                self.check(f, (x, y))

    def test_broadcast_inputs(self):
        # Inputs broadcast along the reduced dim, along the kept dims, scalars.
        for dtype in DTYPES:
            for scale in (torch.ones(1, 64, 1), torch.zeros(1, 64, 1), randn(1, 64, 1, seed=7)):
                with self.subTest(dtype=dtype, scale=float(scale.sum())):
                    x = randn(3, 64, 80).to(dtype)
                    bias = randn(3, 1, 80, seed=8).to(dtype)

                    def f(a, s, b):
                        z = a * s + b - 0.5
                        return z * z.mean(1, keepdim=True), z - z.amax(1, keepdim=True)
                    self.check(f, (x, scale.to(dtype), bias))

    def test_non_finite_values(self):
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                x = randn(16, 300, 20).to(dtype)
                x[3, 7, 2] = float("inf")
                x[5, :, 4] = float("-inf")
                x[9, 100, 11] = float("nan")
                self.check(lambda a: torch.softmax(a, 1), (x,))

    def test_sums_as_matmuls(self):
        # Reduced elements below, at and above a partition tile (16, 128,
        # 300), over dim 0, a middle dim and a run of two dims, keepdim or
        # not, sum and mean; inputs all ones, zeros with infinities and NaN,
        # random; a sum into another dtype and an integer sum (not rewritten).
        cases = (((4, 300, 96), (1,)), ((513, 40), (0,)), ((3, 5, 7, 33), (1, 2)), ((6, 50, 20), (0, 1)),
                 ((2, 16, 3, 8), (1,)), ((8, 128, 64), (-2,)))
        for shape, dims in cases:
            for dtype in DTYPES:
                with self.subTest(shape=shape, dims=dims, dtype=dtype):
                    x = randn(*shape).to(dtype)
                    self.check(lambda a: (a.sum(dims), a.mean(dims, keepdim=True)), (x,))
        for dtype in DTYPES:
            with self.subTest(dtype=dtype, values="ones, non-finite"):
                self.check(lambda a: a.sum(1), (torch.ones(4, 200, 24, dtype=dtype),))
                x = torch.zeros(4, 200, 24, dtype=dtype)
                x[1, 5, 3] = float("inf")
                x[2, :, 7] = float("-inf")
                x[2, 9, 7] = float("inf")
                x[3, 100, 11] = float("nan")
                self.check(lambda a: (a.sum(1), a.mean(0)), (x,))
        x = randn(4, 200, 24).to(torch.bfloat16)
        self.check(lambda a: a.sum(1, dtype=torch.float32), (x,))
        self.check(lambda a: (a * 4).to(torch.int32).sum(1), (randn(4, 200, 24),))

    def test_weighted_sums_as_matmuls(self):
        # Masked mean pooling over tokens (weights [B, S, 1]), weights shared
        # by the batch ([S, 1]) or one per batch ([B, 1, 1]), a mask of ones
        # or zeros, and products that stay elementwise: a factor varying
        # along the kept dims, a product read elsewhere too.
        def masked_mean(x, m):
            return (x * m[..., None]).sum(1) / m.sum(1, keepdim=True).clamp(min=1)

        for dtype in DTYPES:
            x = randn(6, 150, 40).to(dtype)
            mask = (torch.arange(150)[None, :] < torch.tensor([150, 1, 77, 140, 3, 100])[:, None]).to(dtype)
            for m in (mask, torch.ones(6, 150, dtype=dtype), torch.zeros(6, 150, dtype=dtype)):
                with self.subTest(dtype=dtype, mask=float(m.sum())):
                    self.check(masked_mean, (x, m))
            with self.subTest(dtype=dtype, weights="shared, per batch, per element"):
                w = randn(150, 1, seed=4).to(dtype)
                self.check(lambda a, w: (a * w).sum(1), (x, w))
                self.check(lambda a, w: (w * a).mean((0, 1)), (x, w[None]))
                self.check(lambda a, w: (a * w).sum(1), (x, randn(6, 1, 1, seed=5).to(dtype)))
                self.check(lambda a, w: (a * w).sum(1), (x, randn(150, 40, seed=6).to(dtype)))
                self.check(lambda a, w: ((a * w).sum(0), (a * w).amax(-1)), (x, w))

    def test_middle_reductions_in_sbuf_rows(self):
        # A lone sum, mean or amax over middle dims of 128 rows or more is
        # reduced in SBUF rows (passes/LowerReductions.cpp): blocks packed
        # several rows to a partition, reduced per column, across the rows
        # or block by block, rows longer than a tile in steps; inputs read
        # through views (a transpose, a slice, a broadcast); dims of 1 after
        # the reduced ones; the ops around a reduction with short blocks as
        # kernels of their own.
        for dtype in DTYPES:
            for shape, dims in (((8192, 16, 2), 1), ((32768, 2, 2), 1), ((300, 7, 3), 1), ((256, 128, 128), 1),
                                ((128, 1024, 32), 1), ((130, 5000, 3), 1), ((200, 3, 6000), 1),
                                ((4, 64, 6, 4), (1, 2)), ((512, 3, 1), 1), ((130, 7, 1, 2), 1)):
                x = randn(*shape).to(dtype)
                with self.subTest(dtype=dtype, shape=shape, dims=dims):
                    self.check(lambda a: (a.sum(dims), a.mean(dims, keepdim=True), a.amax(dims)), (x,))
            with self.subTest(dtype=dtype, input="views"):
                x = randn(256, 6, 10).to(dtype)
                self.check(lambda a: a.transpose(1, 2).sum(1), (x,))
                self.check(lambda a: a[:, 1:, ::2].amax(1), (x,))
                self.check(lambda a: a[:, :, :1].expand(256, 6, 3).mean(1), (x,))
                self.check(lambda a: a.sum(1, dtype=torch.float32), (x,))
            with self.subTest(dtype=dtype, around="elementwise"):
                x = randn(4096, 16, 4).to(dtype)
                self.check(lambda a: (torch.softmax(a, 1), a - a.mean(1, keepdim=True), (a * a).sum(1)), (x,))
                self.check(lambda a, w: (a * w).sum(1), (x, randn(4096, 16, 1, seed=3).to(dtype)))
            with self.subTest(dtype=dtype, values="ones, zeros, non-finite"):
                self.check(lambda a: (a.sum(1), a.amax(1)), (torch.ones(512, 9, 3, dtype=dtype),))
                x = torch.zeros(512, 9, 3, dtype=dtype)
                x[0, 0, 0], x[1, 4, 2], x[2, :, 1] = float("nan"), float("inf"), -float("inf")
                x[3, 3, 0], x[3, 5, 0] = float("inf"), -float("inf")
                x[4] = -0.0
                self.check(lambda a: (a.sum(1), a.mean(1), a.amax(1)), (x,))

    def test_ops_around_middle_reductions_in_own_layout(self):
        # Reductions over middle dims with the elementwise ops around them,
        # computed in the input's own layout (passes/LowerMiddleFrame.cpp):
        # R blocks of a range of C a partition, C split into the rows where
        # the kept dims are few; inputs that vary along the reduced dim only
        # (per-channel weights), along the kept columns only, per row,
        # everywhere, or not at all; ops mixing them block by block or
        # column by column; values returned (through reshapes) and read by
        # later ops; default-like and random parameters, non-finite values.
        for dtype in DTYPES:
            for shape in ((256, 16, 512), (2, 8, 64, 128), (3, 5, 16, 300), (130, 12, 129), (4096, 4, 2),
                          (1024, 16, 3), (64, 32, 2, 2)):
                with self.subTest(dtype=dtype, shape=shape, case="softmax"):
                    x = randn(*shape).to(dtype)
                    self.check(lambda a: (torch.softmax(a, 1), torch.log_softmax(a, 1), a - a.mean(1, keepdim=True),
                                          (a * a).sum(1)), (x,))
            r = 16
            for w, b in ((torch.ones(r), torch.zeros(r)), (randn(r, seed=1), randn(r, seed=2))):
                with self.subTest(dtype=dtype, case="channel norm", w=float(w.sum())):
                    x = randn(8, r, 32, 32).to(dtype)
                    self.check(channel_norm, (x, w.to(dtype), b.to(dtype)))
            for a_, r_, c_ in ((64, 8, 256), (2048, 8, 3)):
                with self.subTest(dtype=dtype, case="inputs of each kind", shape=(a_, r_, c_)):
                    x = randn(a_, r_, c_).to(dtype)
                    y = randn(a_, r_, c_, seed=3).to(dtype)
                    per_channel = randn(1, r_, 1, seed=4).to(dtype)
                    per_column = randn(1, 1, c_, seed=5).to(dtype)
                    per_row = randn(a_, 1, 1, seed=6).to(dtype)

                    def f(a, c, pc, pk, pr):
                        t = a * pc + c
                        e = torch.exp(t - t.amax(1, keepdim=True)) * pk.abs() + pr.abs()
                        s = (e * pc.abs()).sum(1, keepdim=True) + (pk * pr).abs() + 1
                        return (e / s, (s * 0.5 + pc).mean(1), torch.where(e > 0.5, e, pc - 1.0), s.reshape(a_, c_),
                                (pc * pr).sum(1, keepdim=True) + e)
                    self.check(f, (x, y, per_channel, per_column, per_row))
            for a_, r_, c_ in ((256, 8, 256), (128, 16, 128)):
                # A weighted sum over channels, in this layout rather than as
                # a matmul per row: a 0/1 mask (a constant), ones, random.
                x = randn(a_, r_, c_).to(dtype)
                mask = (torch.arange(r_) % 3 == 0).to(dtype)[None, :, None]
                for w in (torch.ones(1, r_, 1, dtype=dtype), randn(r_, 1, seed=8).to(dtype)):
                    with self.subTest(dtype=dtype, case="weighted sum", shape=(a_, r_, c_), w=float(w.sum())):
                        self.check(lambda a, m: ((a * m).sum(1), (a * mask).sum(1)), (x, w))
            for shape in ((128, 96, 384), (8, 128, 32, 64)):
                # Rows of R blocks too long for SBUF: in chunks of channels
                # (one pass, the input read once), each chunk's squares,
                # products with per-channel weights, exponentials and
                # maxima added into the sums.
                x = randn(*shape).to(dtype)
                w = randn(1, shape[1], *([1] * (len(shape) - 2)), seed=9).to(dtype)
                k = randn(*shape[2:], seed=10).to(dtype)

                def g(a, pc, pk):
                    s = (a * a).sum(1)
                    return (s, ((a * pc).sum(1, keepdim=True) + 1).reshape(-1), (a * pk).exp().mean(1) * 2,
                            torch.sqrt(s / shape[1]) + a.amax(1), (a - pc).abs().amax(1, keepdim=True))
                with self.subTest(dtype=dtype, case="chunks", shape=shape):
                    self.check(g, (x, w, k))
                    ones = torch.ones(*shape, dtype=dtype)
                    self.check(g, (ones, torch.zeros_like(w), torch.ones_like(k)))
                    x[0, 3] = float("nan")
                    x[1, :, 0] = float("inf")
                    x[2, 5] = -float("inf")
                    self.check(g, (x, w, k))
            with self.subTest(dtype=dtype, case="read later"):
                x = randn(128, 8, 160).to(dtype)
                w = randn(160, 24, seed=7).to(dtype)
                self.check(lambda a, m: (torch.softmax(a, 1) @ m, (a - a.mean(1, keepdim=True)).exp()), (x, w))
            with self.subTest(dtype=dtype, case="ones, zeros, non-finite"):
                self.check(lambda a: (torch.softmax(a, 1), (a * a).mean(1)), (torch.ones(128, 4, 200, dtype=dtype),))
                x = torch.zeros(128, 4, 200, dtype=dtype)
                x[0, 0, 0], x[1, 2, 5], x[2, :, 7] = float("nan"), float("inf"), -float("inf")
                x[3, 1, 9], x[3, 3, 9] = float("inf"), -float("inf")
                x[4] = -0.0
                self.check(lambda a: (torch.softmax(a, 1), a - a.amax(1, keepdim=True), a.sum(1) * 2), (x,))

    def test_reductions_over_unit_dims(self):
        # A reduction over dims of size 1 only is its operand (a sum or mean
        # plus 0, as eager's turns -0 into 0), reshaped without those dims;
        # alone, returned, or inside a kernel of other ops.
        x = torch.zeros(300, 2, 1)
        x[0, 0, 0], x[1, 1, 0], x[2, 0, 0], x[3, 1, 0] = -0.0, float("nan"), float("inf"), -float("inf")
        x[4:] = randn(296, 2, 1)
        for dtype in DTYPES:
            a = x.to(dtype)
            with self.subTest(dtype=dtype):
                self.check(lambda t: (t.sum(-1), t.mean(2, keepdim=True), t.amax(-1), t.sum(2).neg()), (a,))
                self.check(lambda t: ((t * 2).sum(-1) + 1, torch.softmax(t, -1), (t.amax(-1, keepdim=True) * t).exp()),
                           (a,))
                self.check(lambda t: t[:, :1].mean(1), (randn(70, 3, 5).to(dtype),))
        # The sign of zero, which the comparison above cannot see.
        fn = lambda t: (t.sum(-1), t.mean(-1), t.amax(-1))  # noqa: E731
        neg = torch.full((300, 2, 1), -0.0)
        for opt in (0, 2):
            outs, _ = common.export_compile_run(fn, (neg,), self.tmp, "signed_zero_O%d" % opt, opt)
            for out, ref in zip(outs, fn(neg)):
                np.testing.assert_array_equal(np.signbit(out), np.signbit(ref.numpy()))


if __name__ == "__main__":
    common.main()
