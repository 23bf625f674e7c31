#!/usr/bin/env python3
"""Reductions over middle dims against their HBM bound.

Sums, means and maxima over a middle dim of [A, R, C] (short and long blocks,
few and many rows), the ops around them (softmax over dim 1, a centring, a
sum of squares, a weighted sum), and seeded random ones, each exported
(bf16, weights as constants), compiled at -O2 for trn1 and profiled
timing-only as benchmarks/roofline_bench.py measures its rows: kernels,
T_exec (us, without the fixed per-dispatch cost), the roofline bound.
`--reductions SEED,N` adds N random reductions (ranks 2 to 5, a run of
reduced dims, sum, mean or amax). `--reference DIR` measures every graph
with that build's tools too and prints the ratio. Nothing here asserts on
time.

  /usr/bin/python3 benchmarks/reductions_bench.py --reductions 1,40 --reference /tmp/old-build
"""
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import copy_kernels_bench as bench  # noqa: E402

SHAPES = ((32768, 2, 2), (8192, 16, 2), (1024, 64, 16), (128, 16, 128), (256, 128, 256), (1024, 8, 512),
          (256, 16, 2048), (128, 128, 768), (16, 512, 1024), (4096, 16, 1))


def every_third(x):
    return (torch.arange(x.shape[1]) % 3 == 0).to(x.dtype)[None, :, None]


OPS = {
    "sum(1)": lambda x: x.sum(1),
    "mean(1)": lambda x: x.mean(1),
    "amax(1)": lambda x: x.amax(1),
    "softmax(x, 1)": lambda x: torch.softmax(x, 1),
    "x - mean(1)": lambda x: x - x.mean(1, keepdim=True),
    "(x * x).sum(1)": lambda x: (x * x).sum(1),
    "(x * w).sum(1)": lambda x: (x * every_third(x)).sum(1),
}

# name: (function, input shapes)
GRAPHS = {"%s %s" % (op, list(s)): (fn, [s]) for op, fn in OPS.items() for s in SHAPES}


def random_reductions(seed, n):
    rng = random.Random(seed)
    out = {}
    for i in range(n):
        shape = bench.random_shape(rng, 5, [1, 2, 3, 4, 7, 8, 16, 32, 64, 128, 300], 4_000_000)
        rank = len(shape)
        first = rng.randrange(rank)
        dims = tuple(range(first, rng.randint(first, rank - 1) + 1))
        op = rng.choice(["sum", "mean", "amax"])
        keep = rng.random() < 0.5

        def f(x, op=op, dims=dims, keep=keep):
            return getattr(x, op)(dims, keepdim=keep)
        out["random %d %s %s %s" % (i, op, tuple(shape), dims)] = (f, [tuple(shape)])
    return out


if __name__ == "__main__":
    bench.run(__doc__, GRAPHS, __file__, "--reductions", random_reductions)
