#!/usr/bin/env python3
"""Elementwise kernels over short rows. Where a row is under 512 bytes the
lowering packs several consecutive rows into each partition
(passes/LowerToIsa.cpp, packShortRows): the rows' last leading dim is split
and part of it moved onto the columns, and every value keeps its strides.
These cases cover what that must keep right: broadcasts over the columns
(a bias, loaded once and copied across the packed rows), per-batch and
per-channel scalars, per-row values (which keep the kernel unpacked), sliced
and transposed inputs, returned views, integer and bool inputs one byte
wide, odd row counts, trailing unit dims and long chains whose tiles must
be narrowed. Each is compiled at -O0 and -O2, run, and compared with
PyTorch eager in f32 and bf16, with default-like (zeros, ones) and random
parameters.
"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e_common as common  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

DTYPES = common.FLOAT_DTYPES
randn = common.seeded_randn


class PackedRows(common.ComparedWithEager):
    def test_activations_over_narrow_rows(self):
        for shape in ((4096, 64), (1000, 24), (999, 7), (129, 3, 10), (300, 64, 1), (2, 1536, 3)):
            for dtype in DTYPES:
                with self.subTest(shape=shape, dtype=dtype):
                    x = randn(*shape).to(dtype)
                    y = randn(*shape, seed=1).to(dtype)
                    self.check(lambda a, b: (F.silu(a) * b, a + b), (x, y))

    def test_column_broadcasts(self):
        # A bias over the columns: zeros, ones and random; also one per batch.
        for dtype in DTYPES:
            for bias in (torch.zeros(48), torch.ones(48), randn(48, seed=3)):
                with self.subTest(dtype=dtype, bias=float(bias.sum())):
                    x = randn(2048, 48).to(dtype)
                    self.check(lambda a, c: F.gelu(a + c), (x, bias.to(dtype)))
            with self.subTest(dtype=dtype, per_batch=True):
                x = randn(3, 512, 40).to(dtype)
                c = randn(3, 1, 40, seed=4).to(dtype)
                self.check(lambda a, c: a * c - 1, (x, c))

    def test_row_scalars(self):
        for dtype in DTYPES:
            with self.subTest(dtype=dtype, what="per batch"):
                x = randn(4, 640, 32).to(dtype)
                s = randn(4, 1, 1, seed=2).to(dtype)
                self.check(lambda a, s: torch.relu(a * s + s), (x, s))
            with self.subTest(dtype=dtype, what="per row (not packed)"):
                x = randn(2048, 32).to(dtype)
                s = randn(2048, 1, seed=2).to(dtype)
                self.check(lambda a, s: a * s + 2, (x, s))
            with self.subTest(dtype=dtype, what="per channel, NCHW"):
                x = randn(2, 32, 28, 28).to(dtype)
                scale = randn(32, 1, 1, seed=5).to(dtype)
                shift = torch.zeros(32, 1, 1).to(dtype)
                self.check(lambda a, s, t: torch.relu(a * s + t), (x, scale, shift))

    def test_strided_inputs_and_returned_views(self):
        for dtype in DTYPES:
            with self.subTest(dtype=dtype, what="slice"):
                x = randn(4096, 128).to(dtype)
                y = randn(4096, 64, seed=1).to(dtype)
                self.check(lambda a, b: a[:, 32:96] * b, (x, y))
            with self.subTest(dtype=dtype, what="transposed input"):
                x = randn(64, 2048).to(dtype)
                y = randn(2048, 64, seed=1).to(dtype)
                self.check(lambda a, b: a.t() + b, (x, y))
            with self.subTest(dtype=dtype, what="returned views"):
                x = randn(2048, 32).to(dtype)
                self.check(lambda a: ((a * 2).view(64, 32, 32), torch.exp(a).t()), (x,))

    def test_narrow_integer_inputs(self):
        ids = torch.randint(0, 200, (4096, 16), generator=torch.Generator().manual_seed(0)).to(torch.uint8)
        mask = torch.rand(4096, 16, generator=torch.Generator().manual_seed(1)) > 0.5
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                x = randn(4096, 16).to(dtype)
                self.check(lambda i, m, a: (torch.where(m, a, i.to(a.dtype)), i * 2, m & (i > 100)), (ids, mask, x))

    def test_long_chain_is_narrowed(self):
        # A digamma is a long chain: packed f32 tiles of 4 rows of 100 overflow
        # SBUF and are narrowed.
        x = randn(8192, 100).abs() + 0.5
        self.check(torch.special.digamma, (x,))
        self.check(lambda a: torch.special.digamma(a) * a, (x.to(torch.bfloat16),))


if __name__ == "__main__":
    common.main()
