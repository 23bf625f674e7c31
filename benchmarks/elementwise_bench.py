#!/usr/bin/env python3
"""Elementwise kernels over short rows against their HBM bound.

Unary ops and binary ops with a broadcast operand (over the columns, the
last two dims, a middle dim, the outer dim, a scalar per row) on shapes
whose innermost dims are short, and seeded random ones, each exported
(bf16, weights as constants), compiled at -O2 for trn1 and profiled
timing-only as benchmarks/roofline_bench.py measures its rows: kernels,
T_exec (us, without the fixed per-dispatch cost), the roofline bound.
`--elementwise SEED,N` adds N random graphs (ranks 2 to 5, a second
operand with a random set of dims broadcast, sometimes a transposed or
sliced first operand). `--reference DIR` measures every graph with that
build's tools too and prints the ratio. Nothing here asserts on time.

  /usr/bin/python3 benchmarks/elementwise_bench.py --elementwise 1,40 --reference /tmp/old-build
"""
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import copy_kernels_bench as bench  # noqa: E402

SHAPES = ((32768, 2, 2), (8192, 16, 2), (4096, 2, 64), (1024, 8, 4, 4), (300, 7, 3), (64, 64, 3, 3),
          (16384, 64), (8, 256, 7, 7))


def operand(shape, kept):
    """The shape of a second operand that keeps the dims in `kept` and broadcasts the others."""
    return tuple(s if i in kept else 1 for i, s in enumerate(shape))


def graphs():
    out = {}
    for s in SHAPES:
        r = len(s)
        out["silu %s" % list(s)] = (lambda x: F.silu(x), [s])
        out["x + 1 %s" % list(s)] = (lambda x: x + 1, [s])
        for what, kept in (("columns", {r - 1}), ("last two", {r - 2, r - 1}), ("middle", {r - 2}),
                           ("outer", {0}), ("per row", set(range(r - 1)))):
            out["x * b (%s) %s" % (what, list(s))] = (lambda x, b: x * b, [s, operand(s, kept)])
    return out


def random_elementwise(seed, n):
    rng = random.Random(seed)
    out = {}
    for i in range(n):
        shape = bench.random_shape(rng, 5, [1, 2, 3, 4, 7, 8, 16, 32, 64, 128, 300], 4_000_000)
        rank = len(shape)
        kept = {d for d in range(rank) if rng.random() < 0.5}
        first = list(shape)
        how = rng.choice(["plain", "plain", "transposed", "sliced"])
        if how == "transposed":
            first[-1], first[-2] = first[-2], first[-1]
        elif how == "sliced":
            first[-1] += 1
        op = rng.choice(["add", "mul", "gelu", "where"])

        def f(x, b, how=how, op=op):
            if how == "transposed":
                x = x.transpose(-1, -2)
            elif how == "sliced":
                x = x[..., 1:]
            if op == "add":
                return x + b
            if op == "mul":
                return x * b
            if op == "gelu":
                return F.gelu(x) * b
            return torch.where(x > b, x, b)
        out["random %d %s %s %s %s" % (i, op, tuple(shape), tuple(sorted(kept)), how)] = (
            f, [tuple(first), operand(shape, kept)])
    return out


if __name__ == "__main__":
    bench.run(__doc__, graphs(), __file__, "--elementwise", random_elementwise)
