#!/usr/bin/env python3
"""Matrix-vector products: a matmul with one output column (nn.Linear(k, 1),
a score or value head) is decomposed into a product with the column laid
along the rows and a sum over k, computed in f32 (passes/DecomposeComposites.cpp,
decomposeMatVec). Each case is compiled at -O0 and -O2, run, and compared with
PyTorch eager in f32 and bf16; modules with their default and with random
parameters. A matmul over a contraction of one (an outer product) is an
elementwise multiply of the column by the row (decomposeOuterProduct).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e_common as common  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

DTYPES = common.FLOAT_DTYPES
randn = common.seeded_randn


class MatVec(common.ComparedWithEager):
    def test_linear_to_one_output(self):
        # A value head over tokens, one over a single token, and one on a 3-d input.
        self.models(lambda: nn.Linear(512, 1), (randn(64, 512),))
        self.models(lambda: nn.Linear(4096, 1), (randn(300, 4096, seed=1),))
        self.models(lambda: nn.Linear(4096, 1), (randn(1, 4096, seed=2),))
        self.models(lambda: nn.Linear(768, 1, bias=False), (randn(2, 50, 768, seed=3),))

    def check_mm_and_addmm(self, a, b):
        self.check(lambda a, b: a @ b, (a, b))
        self.check(lambda a, b: torch.addmm(torch.ones(a.shape[0], b.shape[1], dtype=a.dtype), a, b, beta=0.5,
                                            alpha=2.5), (a, b))
        # beta 0 leaves the input out, NaN included, as PyTorch does.
        self.check(lambda a, b: torch.addmm(torch.full((1,), float("nan"), dtype=a.dtype), a, b, beta=0.0), (a, b))

    def test_mm_bmm_addmm(self):
        bias = randn(1, seed=8)
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                a, v = randn(257, 300, seed=4).to(dtype), randn(300, 1, seed=5).to(dtype)
                self.check_mm_and_addmm(a, v)
                self.check(lambda a, v, b: torch.addmm(b, a, v), (a, v, bias.to(dtype)))
                self.check(torch.bmm, (randn(3, 130, 64, seed=6).to(dtype), randn(3, 64, 1, seed=7).to(dtype)))
                # A dot product, and zeros and ones as parameters are.
                self.check(lambda x, y: x @ y, (randn(1, 5000, seed=9).to(dtype), torch.ones(5000, 1, dtype=dtype)))
                self.check(lambda x, y: x @ y, (randn(40, 96, seed=10).to(dtype), torch.zeros(96, 1, dtype=dtype)))

    def test_transposed_or_computed_operands(self):
        # A transposed matrix stays a TensorEngine matmul; a computed matrix and a computed
        # column are read from the kernels that compute them.
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                a, v = randn(300, 200, seed=11).to(dtype), randn(300, 1, seed=12).to(dtype)
                self.check(lambda a, v: a.t() @ v, (a, v))
                self.check(lambda a, v: torch.relu(a.t() * 2) @ torch.tanh(v), (a, v))
                self.check(lambda a, v: (a @ v[:200]).softmax(0), (a, v))

    def test_outer_products(self):
        # mm, bmm and addmm over a contraction of one, HF's rotary table (inverse
        # frequencies times positions, in f32), a transposed column, infinities and NaN
        # (each product on its own, as eager), zeros and ones as parameters are.
        inv_freq = 1.0 / (10000 ** (torch.arange(0, 64, 2).float() / 64))
        positions = torch.arange(300).float()
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                self.check_mm_and_addmm(randn(257, 1, seed=20).to(dtype), randn(1, 300, seed=21).to(dtype))
                self.check(torch.bmm, (randn(256, 64, 1, seed=22).to(dtype), randn(256, 1, 33, seed=23).to(dtype)))
                self.check(lambda a, b: (a.t() @ b) * 2,
                           (randn(1, 40, seed=24).to(dtype), randn(1, 70, seed=25).to(dtype)))
                odd = randn(8, 1, seed=26).to(dtype)
                odd[1, 0], odd[3, 0] = float("inf"), float("nan")
                row = randn(1, 9, seed=27).to(dtype)
                row[0, 2] = 0.0
                self.check(lambda a, b: a @ b, (odd, row))
                self.check(lambda a, b: a @ b, (torch.ones(16, 1, dtype=dtype), torch.zeros(1, 16, dtype=dtype)))
        self.check(lambda f, p: (f[None, :, None] @ p[None, None, :]).transpose(1, 2).cos(), (inv_freq, positions))


if __name__ == "__main__":
    common.main()
