#!/usr/bin/env python3
"""Convolutions and scans against their HBM bound.

Convolutions (3 x 3 with padding, 1 x 1, strided, dilated, grouped,
depthwise, 1-d and 3-d, a 7 x 7 stem over RGB, with a bias and an
activation after them: the windows of compiler/ComposedOps.cpp loaded by
the matmul in passes/LowerMatmul.cpp) and scans (cumsum, cumprod,
logcumsumexp, position ids from a mask; over short and long rows and
leading dims: compiler/Composer.h `scan`), each exported (bf16, inputs and
weights as graph inputs), compiled at -O2 for trn1 and profiled timing-only
as benchmarks/roofline_bench.py measures its rows: kernels, T_exec (us,
without the fixed per-dispatch cost), the roofline bound. `--convs SEED,N`
adds N random convolutions (kernel 1 to 5, stride 1 or 2, padding, dilation
and groups drawn). `--reference DIR` measures every graph with that build's
tools too and prints the ratio. Nothing here asserts on time.

  /usr/bin/python3 benchmarks/convolution_bench.py --convs 1,20 --reference /tmp/old-build
"""
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import copy_kernels_bench as bench  # noqa: E402


def conv(x_shape, w_shape, **kw):
    """A convolution of x by w (bias, ReLU after it), as a graph entry."""
    spatial = len(x_shape) - 2
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[spatial]
    return (lambda x, w, b: torch.relu(fn(x, w, b, **kw)), [x_shape, w_shape, (w_shape[0],)])


def graphs():
    out = {
        "conv 3x3 [8, 64, 56, 56]": conv((8, 64, 56, 56), (64, 64, 3, 3), padding=1),
        "conv 3x3 [8, 128, 28, 28]": conv((8, 128, 28, 28), (128, 128, 3, 3), padding=1),
        "conv 3x3 [8, 256, 14, 14] -> 512": conv((8, 256, 14, 14), (512, 256, 3, 3), padding=1),
        "conv 3x3 [8, 32, 64, 64] -> 32": conv((8, 32, 64, 64), (32, 32, 3, 3), padding=1),
        "conv 3x3 stride 2 [8, 64, 56, 56]": conv((8, 64, 56, 56), (128, 64, 3, 3), padding=1, stride=2),
        "conv 3x3 dilation 2 [4, 64, 32, 32]": conv((4, 64, 32, 32), (64, 64, 3, 3), padding=2, dilation=2),
        "conv 3x3 groups 4 [8, 128, 28, 28]": conv((8, 128, 28, 28), (128, 32, 3, 3), padding=1, groups=4),
        "conv 3x3 depthwise [8, 128, 28, 28]": conv((8, 128, 28, 28), (128, 1, 3, 3), padding=1, groups=128),
        "conv 1x1 [8, 256, 14, 14] -> 512": conv((8, 256, 14, 14), (512, 256, 1, 1)),
        "conv 7x7 stride 2 stem [4, 3, 224, 224]": conv((4, 3, 224, 224), (64, 3, 7, 7), padding=3, stride=2),
        "conv1d k3 [16, 256, 512]": conv((16, 256, 512), (256, 256, 3), padding=1),
        "conv3d 3x3x3 [2, 32, 16, 28, 28]": conv((2, 32, 16, 28, 28), (32, 32, 3, 3, 3), padding=1),
        "cumsum [64, 1024]": (lambda x: torch.cumsum(x, -1), [(64, 1024)]),
        "cumsum [4096, 128]": (lambda x: torch.cumsum(x, -1), [(4096, 128)]),
        "cumsum [8, 32000]": (lambda x: torch.cumsum(x, -1), [(8, 32000)]),
        "cumsum dim 0 [512, 256]": (lambda x: torch.cumsum(x, 0), [(512, 256)]),
        "cumprod [64, 512]": (lambda x: torch.cumprod(x, -1), [(64, 512)]),
        "logcumsumexp [64, 512]": (lambda x: torch.logcumsumexp(x, -1), [(64, 512)]),
        "position ids [8, 2048]": (lambda m: (m > 0).long().cumsum(-1) - 1, [(8, 2048)]),
    }
    return out


def random_convs(seed, n):
    rng = random.Random(seed)
    out = {}
    for i in range(n):
        k = rng.choice([1, 3, 3, 3, 5])
        stride, dilation = rng.choice([1, 1, 2]), rng.choice([1, 1, 2])
        padding = rng.choice([0, (k // 2) * dilation])
        groups = rng.choice([1, 1, 2, 4])
        cin, cout = groups * rng.choice([4, 16, 32, 64]), groups * rng.choice([8, 16, 64])
        size = rng.choice([14, 28, 31, 56])
        batch = rng.choice([1, 2, 8])
        if size + 2 * padding < dilation * (k - 1) + 1:
            padding = (k // 2) * dilation
        out["random %d [%d, %d, %d, %d] k%d s%d d%d p%d g%d -> %d" % (
            i, batch, cin, size, size, k, stride, dilation, padding, groups, cout)] = conv(
                (batch, cin, size, size), (cout, cin // groups, k, k), stride=stride, padding=padding,
                dilation=dilation, groups=groups)
    return out


if __name__ == "__main__":
    bench.run(__doc__, graphs(), __file__, "--convs", random_convs)
