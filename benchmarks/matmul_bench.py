#!/usr/bin/env python3
"""Batched matmuls of small matrices against their HBM bound.

`bmm` of many small matrices (the batch groups of passes/LowerMatmul.cpp),
attention scores `q @ k^T` and `softmax(q @ k^T) @ v` over many short heads,
grouped-query attention (key heads repeated for several query heads),
a `baddbmm` and a `bmm` with an epilogue, and seeded random batched matmuls,
each exported (bf16, weights as constants), compiled at -O2 for trn1 and
profiled timing-only as benchmarks/roofline_bench.py measures its rows:
kernels, T_exec (us, without the fixed per-dispatch cost), the roofline
bound. `--matmuls SEED,N` adds N random graphs (1 to 1024 batches of M, K
and N up to 256, sometimes a transposed operand or an epilogue).
`--reference DIR` measures every graph with that build's tools too and
prints the ratio. Nothing here asserts on time.

  /usr/bin/python3 benchmarks/matmul_bench.py --matmuls 1,30 --reference /tmp/old-build
"""
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import copy_kernels_bench as bench  # noqa: E402

BMM_SHAPES = ((1024, 4, 16, 4), (512, 1, 64, 16), (256, 16, 16, 16), (128, 8, 64, 8), (64, 32, 64, 32),
              (64, 64, 128, 128), (32, 16, 128, 16), (16, 64, 64, 64), (8, 128, 128, 128))
HEAD_SHAPES = ((64, 12, 16, 64), (64, 4, 49, 32), (1, 32, 16, 128), (8, 12, 128, 64))


def graphs():
    out = {}
    for b, m, k, n in BMM_SHAPES:
        out["bmm %s" % [b, m, k, n]] = (lambda x, y: torch.bmm(x, y), [(b, m, k), (b, k, n)])
    for b, h, s, d in HEAD_SHAPES:
        out["q @ k^T %s" % [b, h, s, d]] = (lambda q, k: q @ k.transpose(-1, -2), [(b, h, s, d)] * 2)
        out["attention %s" % [b, h, s, d]] = (
            lambda q, k, v: torch.softmax(q @ k.transpose(-1, -2) * 0.125, -1) @ v, [(b, h, s, d)] * 3)
    for h, kv, s, t in ((32, 8, 1, 512), (32, 8, 16, 128), (12, 1, 24, 256)):
        out["grouped attention %s" % [h, kv, s, t]] = (
            lambda q, k, v, h=h, kv=kv: torch.softmax(
                q @ k.repeat_interleave(h // kv, 1).transpose(-1, -2) * 0.125, -1) @ v.repeat_interleave(h // kv, 1),
            [(1, h, s, 128), (1, kv, t, 128), (1, kv, t, 128)])
    out["baddbmm [256, 8, 32, 8]"] = (lambda c, x, y: torch.baddbmm(c, x, y, alpha=0.5),
                                      [(256, 8, 8), (256, 8, 32), (256, 32, 8)])
    out["softmax(bmm) [256, 16, 32, 16]"] = (lambda x, y: torch.softmax(torch.bmm(x, y), -1),
                                             [(256, 16, 32), (256, 32, 16)])
    return out


def random_matmuls(seed, n):
    rng = random.Random(seed)
    sizes = [1, 3, 4, 7, 8, 16, 32, 33, 64, 100, 128, 256]
    out = {}
    for i in range(n):
        b = rng.choice([1, 2, 8, 24, 32, 64, 100, 256, 1024])
        m, k, nn = (rng.choice(sizes) for _ in range(3))
        while b * max(m * k, k * nn, m * nn) > 4_000_000:
            b = max(1, b // 2)
        how = rng.choice(["plain", "plain", "b transposed", "a transposed", "epilogue"])

        def f(x, y, how=how):
            if how == "b transposed":
                return x @ y.transpose(-1, -2)
            if how == "a transposed":
                return x.transpose(-1, -2) @ y
            if how == "epilogue":
                return torch.relu(x @ y + 1)
            return x @ y
        first = (b, k, m) if how == "a transposed" else (b, m, k)
        second = (b, nn, k) if how == "b transposed" else (b, k, nn)
        out["random %d %s %s" % (i, [b, m, k, nn], how)] = (f, [first, second])
    return out


if __name__ == "__main__":
    bench.run(__doc__, graphs(), __file__, "--matmuls", random_matmuls)
