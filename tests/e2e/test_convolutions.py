#!/usr/bin/env python3
"""Convolutions. With every stride 1 a convolution reads each tap as one
contiguous window of the padded input's flattened planes and computes its
output at every position of the padded width (compiler/ComposedOps.cpp,
wideWindows): a batched matmul of the weight with the taps' windows, whose
extra columns are cut by a view; a depthwise one sums the windows times
per-channel weights. A stride splits the padded input into its phases along
each strided dim (space-to-depth) and reads each tap as a window of its
phase. Shapes whose wide positions would be more than twice the output take
the strided window slices. These cases cover both: 1-d, 2-d and 3-d,
strides with every phase read, with phases no tap reads, and with dilation,
padding (none, symmetric, larger than the
kernel's reach), dilation, rectangular kernels, groups and depthwise with a
channel multiplier, biases (zeros, ones, random) and none, transposed
convolutions (a stride-1 convolution of the spread input; f32), batch 1 and
more, a convolution returned as is and one followed by batch norm, an
activation and a residual add (the epilogue over the batched matmul's
rows), integer-valued weights where rounding cannot hide an off-by-one
window. Strided reads (slices whose innermost dim steps, pooling with a
stride) load the contiguous span and keep every step-th element. Each is compiled at -O0 and -O2, run, and compared with PyTorch
eager in f32 and bf16.
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e_common as common  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

DTYPES = common.FLOAT_DTYPES
randn = common.seeded_randn


class Convolutions(common.ComparedWithEager):
    def conv(self, x_shape, w_shape, bias="random", seed=0, **kw):
        conv = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[len(x_shape)]
        for dtype in DTYPES:
            with self.subTest(x=x_shape, w=w_shape, bias=bias, dtype=dtype, **kw):
                x = randn(*x_shape, seed=seed).to(dtype)
                w = (randn(*w_shape, seed=seed + 1) * 0.3).to(dtype)
                inputs = [x, w]
                if bias is None:
                    self.check(lambda a, k: conv(a, k, **kw), inputs)
                    continue
                b = {"zeros": torch.zeros, "ones": torch.ones}.get(bias, lambda n: randn(n, seed=seed + 2))(w_shape[0])
                self.check(lambda a, k, c: conv(a, k, c, **kw), inputs + [b.to(dtype)])

    def test_stride_one_2d(self):
        self.conv((2, 8, 9, 11), (16, 8, 3, 3), padding=1)
        self.conv((1, 3, 16, 16), (8, 3, 3, 3), bias=None)
        self.conv((3, 4, 7, 10), (6, 4, 2, 3), bias="zeros", padding=(1, 2))
        self.conv((2, 5, 12, 9), (7, 5, 3, 3), bias="ones", padding=2, dilation=2)
        self.conv((2, 6, 8, 8), (6, 6, 5, 5), padding=2)
        self.conv((2, 4, 6, 6), (4, 4, 3, 3), padding="same")
        self.conv((2, 4, 9, 7), (5, 4, 1, 1))
        self.conv((2, 4, 9, 7), (5, 4, 1, 1), bias=None, padding=1)

    def test_patches(self):
        # Windows that tile the input beyond 64 taps (patch embeddings) are a
        # reshape of it, a permute copy and one matmul: 2-d with and without
        # bias, an input cut to whole patches, rectangular patches, 1-d and
        # 3-d; 64 taps and grouped patches keep the window slices.
        self.conv((2, 3, 64, 64), (24, 3, 16, 16), stride=16)
        self.conv((1, 3, 70, 45), (8, 3, 16, 16), bias=None, stride=16)
        self.conv((2, 4, 36, 40), (6, 4, 12, 8), bias="zeros", stride=(12, 8))
        self.conv((2, 5, 800), (7, 5, 80), bias="ones", stride=80)
        self.conv((1, 2, 8, 8, 16), (3, 2, 4, 4, 8), stride=(4, 4, 8))
        self.conv((2, 3, 32, 32), (8, 3, 8, 8), stride=8)
        self.conv((1, 4, 32, 32), (8, 2, 16, 16), stride=16, groups=2)
        x = torch.arange(2 * 3 * 32 * 32, dtype=torch.int64).reshape(2, 3, 32, 32) % 7 - 3
        w = torch.arange(4 * 3 * 16 * 16, dtype=torch.int64).reshape(4, 3, 16, 16) % 5 - 2
        self.check(lambda a, k: F.conv2d(a.float(), k.float(), stride=16), [x, w])

    def test_stride_one_1d_and_3d(self):
        self.conv((2, 16, 40), (24, 16, 3), padding=1)
        self.conv((3, 8, 33), (8, 8, 5), bias=None, dilation=3, padding=6)
        self.conv((1, 32, 64), (16, 32, 1))
        self.conv((2, 3, 5, 6, 7), (4, 3, 3, 3, 3), padding=1)
        self.conv((1, 4, 4, 5, 6), (2, 4, 2, 1, 3), bias=None)

    def test_groups_and_depthwise(self):
        self.conv((2, 8, 10, 10), (12, 4, 3, 3), padding=1, groups=2)
        self.conv((2, 12, 7, 9), (12, 3, 3, 3), bias=None, groups=4)
        self.conv((2, 16, 10, 12), (16, 1, 3, 3), padding=1, groups=16)
        self.conv((2, 8, 9, 9), (24, 1, 5, 5), bias="zeros", padding=2, groups=8)
        self.conv((2, 6, 30), (6, 1, 7), padding=3, groups=6)

    def test_strides_and_wide_fallback(self):
        self.conv((2, 8, 17, 15), (16, 8, 3, 3), padding=1, stride=2)
        self.conv((2, 4, 9, 12), (6, 4, 3, 3), stride=(1, 2))
        self.conv((2, 4, 12, 9), (6, 4, 3, 3), bias=None, stride=(2, 1), padding=1)
        self.conv((2, 8, 9, 9), (8, 1, 3, 3), padding=1, stride=2, groups=8)
        # 1 x 1 windows: the strided slice convolved with stride 1 (with
        # padding, the padded positions give the bias alone).
        self.conv((2, 8, 11, 10), (6, 8, 1, 1), stride=2)
        self.conv((2, 8, 11, 10), (6, 4, 1, 1), bias=None, stride=(3, 1), groups=2)
        self.conv((2, 6, 9, 9), (6, 1, 1, 1), stride=2, groups=6)
        self.conv((2, 4, 7, 7), (5, 4, 1, 1), padding=1, stride=2)
        self.conv((3, 8, 25), (4, 8, 1), bias="zeros", stride=4)
        # Wide positions more than twice the output: a 3 x 3 output of a 5 x 5
        # kernel over a 3 x 3 input padded by 2.
        self.conv((2, 4, 3, 3), (5, 4, 5, 5), padding=2)

    def test_strided_phases(self):
        # Each tap reads its phase of the padded input at its place there:
        # every phase read (3 x 3 and 7 x 7, stride 2), phases no tap reads
        # (2 x 2 windows at stride 3, 1 x 1 with padding), a dilation that
        # keeps every tap in one phase (2 at stride 2) or spreads them (3 at
        # stride 2), strides that differ per dim, odd and even sizes, 1-d
        # and 3-d, groups and depthwise.
        self.conv((2, 3, 9, 10), (5, 3, 3, 3), padding=1, stride=2)
        self.conv((1, 3, 17, 16), (4, 3, 7, 7), bias="zeros", padding=3, stride=2)
        self.conv((2, 3, 11, 10), (4, 3, 2, 2), bias=None, stride=3)
        self.conv((2, 4, 8, 9), (4, 4, 3, 3), bias="ones", padding=2, stride=2, dilation=2)
        self.conv((2, 4, 13, 11), (3, 4, 3, 3), padding=1, stride=2, dilation=3)
        self.conv((2, 4, 12, 13), (6, 4, 3, 5), padding=(1, 2), stride=(2, 3))
        self.conv((2, 8, 31), (6, 8, 5), padding=2, stride=2)
        self.conv((1, 3, 7, 8, 9), (4, 3, 3, 3, 3), padding=1, stride=2)
        self.conv((2, 8, 10, 10), (8, 2, 3, 3), padding=1, stride=2, groups=4)
        self.conv((2, 8, 11, 11), (16, 1, 3, 3), bias="zeros", padding=1, stride=2, groups=8)
        for dtype in DTYPES:
            x = torch.arange(2 * 3 * 11 * 12, dtype=torch.float32).reshape(2, 3, 11, 12).remainder(5).to(dtype)
            w = torch.arange(4 * 3 * 3 * 3, dtype=torch.float32).reshape(4, 3, 3, 3).remainder(3).sub(1).to(dtype)
            self.check(lambda a, k: F.conv2d(a, k, padding=1, stride=2), [x, w])
            self.check(lambda a, k: F.conv2d(a, k, padding=(0, 2), stride=(3, 2), dilation=(1, 3)), [x, w])
            self.check(lambda a, k: F.conv2d(a, torch.ones_like(k), stride=2), [x, w])

    def test_rows_of_several_planes(self):
        # Kernels large enough that rows of several planes (a middle-dim
        # slice, a pooling's spread tiles, the im2col of a padded input) move
        # in transfers with two partition dims (passes/LowerToIsa.cpp,
        # emitDma): loads and stores compared element by element.
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                x = randn(64, 6, 64).to(dtype)
                self.check(lambda a: a[:, 1:-1, :] * 2, [x])
                self.check(lambda a: F.avg_pool2d(a, 3, 1, 1), [randn(2, 16, 28, 28).to(dtype)])
        self.conv((4, 16, 20, 20), (8, 16, 3, 3), padding=1)
        self.conv((4, 16, 30, 30), (8, 16, 3, 3), bias="zeros", padding=1, stride=2)

    def test_transposed(self):
        # f32: eager 1.13's bf16 transposed convolution on the CPU is wrong
        # (test_composed_ops compares our bf16 with f32 eager instead).
        x, w, b = randn(2, 6, 7, 8), randn(6, 4, 3, 3, seed=1) * 0.3, randn(4, seed=2)
        self.check(lambda a, k, c: F.conv_transpose2d(a, k, c, stride=2, padding=1, output_padding=1), [x, w, b])
        self.check(lambda a, k: F.conv_transpose1d(a.flatten(2), k[:, :, 1]), [x, w])

    def test_integer_valued_windows(self):
        # Small integers: every product and sum exact in f32 and bf16, so a
        # window one column off is an exact mismatch, not noise.
        for dtype in DTYPES:
            x = torch.arange(2 * 3 * 6 * 7, dtype=torch.float32).reshape(2, 3, 6, 7).remainder(5).to(dtype)
            w = torch.arange(4 * 3 * 3 * 3, dtype=torch.float32).reshape(4, 3, 3, 3).remainder(3).sub(1).to(dtype)
            self.check(lambda a, k: F.conv2d(a, k, padding=1), [x, w])
            self.check(lambda a, k: F.conv2d(a, k[:3, :1], padding=(2, 1), groups=3), [x, w])

    def test_conv_bn_relu_residual(self):
        class Block(torch.nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv1 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
                self.bn1 = torch.nn.BatchNorm2d(c)
                self.conv2 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
                self.bn2 = torch.nn.BatchNorm2d(c)
                self.proj = torch.nn.Conv2d(c, 2 * c, 1)

            def forward(self, x):
                y = F.relu(self.bn1(self.conv1(x)))
                y = F.relu(self.bn2(self.conv2(y)) + x)
                return self.proj(y), y.mean((2, 3))

        self.models(lambda: Block(8), (randn(2, 8, 10, 12),))

    def test_strided_reads(self):
        # Slices whose innermost dim steps load the contiguous span and keep
        # every step-th element (a stepped engine read): steps 2 to 5 with
        # offsets, two stepped dims under a reduction, pooling with stride
        # 2 (NaN and -inf in windows), integer inputs converted by the load,
        # and steps too wide to stage (element runs as before).
        for dtype in DTYPES:
            x = randn(4, 6, 20, 22).to(dtype)
            x[0, 0, 2, 4], x[1, 2, 6, 0] = float("nan"), float("-inf")
            self.check(lambda a: (a[..., ::2] * 3, a[:, :, 1::3, 2::4].exp(), a[..., 1:20:5] + 1), [x])
            self.check(lambda a: a[:, ::2, :, 1::2].sum((-2, -1)), [x])
            self.check(lambda a: (F.max_pool2d(a, 3, 2, 1), F.max_pool2d(a, 2), F.avg_pool2d(a, 3, 2, 1),
                                  F.avg_pool2d(a, 2), F.avg_pool2d(a, (20, 22)), F.max_pool2d(a, (10, 11))), [x])
            self.check(lambda a: F.max_pool1d(a.flatten(2), 4, 3), [x])
            w = randn(500, 300, seed=3).to(dtype)
            self.check(lambda a: a[:, ::100].tanh(), [w])
        i = torch.arange(4 * 64, dtype=torch.int64).reshape(4, 64) * 7 - 500
        self.check(lambda a: (a[:, 1::2].float() * 0.5, a[:, ::3] + 3), [i])

    def test_batched_matmul_split_epilogue(self):
        # The pattern the convolutions make, written directly: a batched
        # matmul whose rows of N are reshaped into two dims, then scaled per
        # row and per column.
        for dtype in DTYPES:
            a, b = randn(3, 16, 8).to(dtype), randn(3, 8, 99, seed=1).to(dtype)
            s, t = randn(16, 1, 1, seed=2).to(dtype), randn(11, seed=3).to(dtype)
            self.check(lambda p, q, u, v: torch.relu(torch.bmm(p, q).reshape(3, 16, 9, 11) * u + v), [a, b, s, t])
            self.check(lambda p, q, u: (torch.bmm(p, q).reshape(3, 16, 9, 11)[..., :7] + u), [a, b, s])

    def test_windows_loaded_by_the_matmul(self):
        """At -O2 the matmul of a stride-1 convolution (or a strided one of 64 channels a
        group or more) loads its taps' windows from the padded input itself, one K segment
        per tap, several stacked to a slice where they have 64 channels or fewer
        (passes/WindowOperand.h): its kernel holds the windows' cat, and the im2col
        columns never go through HBM. Wide channels (160 a group: two K slices per tap),
        more than 128 output channels (two row tiles share the loaded windows), more than
        512 wide positions (several column tiles), batches, groups, dilation, a stride
        (taps in different phases), 1-d and 3-d; an infinity and a NaN in the input reach
        only the outputs whose windows hold them; a bias and a ReLU after."""
        cases = [((2, 160, 20, 30), (200, 160, 3, 3), dict(padding=1)),
                 ((3, 64, 30, 30), (64, 64, 3, 3), dict(padding=1)),
                 ((2, 256, 12, 14), (64, 128, 3, 3), dict(padding=2, dilation=2, groups=2)),
                 ((2, 64, 17, 16), (48, 64, 3, 3), dict(padding=1, stride=2)),
                 ((2, 64, 9, 10), (16, 64, 5, 5), dict(padding=2)),
                 ((2, 64, 700), (32, 64, 3), dict(padding=1)),
                 ((1, 64, 6, 10, 12), (8, 64, 3, 3, 3), dict(padding=1)),
                 # Windows of fewer channels stack on the partitions, several to a
                 # K slice (16 channels: 8 taps a slice), taps a column apart in one
                 # transfer; 3 channels (an RGB layer: 9 taps in one slice).
                 ((2, 16, 12, 12), (8, 16, 3, 3), dict(padding=1)),
                 ((2, 3, 20, 20), (16, 3, 3, 3), dict(padding=1)),
                 ((2, 48, 10, 11), (32, 24, 3, 3), dict(padding=1, groups=2)),
                 # Strided with fewer than 64 channels a group: the taps of a
                 # shared slice would lie in different phases, a transfer each, so
                 # the stacked columns stay.
                 ((2, 16, 13, 12), (8, 16, 3, 3), dict(padding=1, stride=2))]
        name = self.id().split(".")[-1]
        for x_shape, w_shape, kw in cases:
            conv = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[len(x_shape)]
            for dtype in DTYPES:
                with self.subTest(x=x_shape, w=w_shape, dtype=dtype, **kw):
                    x = randn(*x_shape, seed=3)
                    x.view(-1)[7 * x_shape[-1] + 3] = float("inf")
                    x.view(-1)[x.numel() // 2] = float("nan")
                    w = randn(*w_shape, seed=4) * (1.0 / w_shape[1] ** 0.5)
                    b = randn(w_shape[0], seed=5)
                    self.check(lambda a, k, c: torch.relu(conv(a, k, c, **kw)),
                               [x.to(dtype), w.to(dtype), b.to(dtype)])
                    # The -O2 graph's kernels: the windows' cat is in the bmm's kernel.
                    graph = os.path.join(self.tmp, "%s_%d_O2.pb" % (name, self.count - 1))
                    ir = subprocess.run([common.toolchain.tool("neuron-cc"), "compile", graph, "-O2", "--output",
                                         os.path.join(self.tmp, "ir.neff"),
                                         "--mlir-print-ir-after=ncc-form-kernels"],
                                        capture_output=True, text=True, check=True).stderr
                    kernels = [k for k in ir.split("nc.kernel ")[1:] if "aten.bmm" in k.split("nc.yield")[0]]
                    self.assertEqual(len(kernels), kw.get("groups", 1), ir[-2000:])
                    windowed = kw.get("stride", 1) == 1 or x_shape[1] // kw.get("groups", 1) >= 64
                    for k in kernels:
                        if windowed:
                            self.assertIn("nc.window_operand", k.split("nc.yield")[0])
                        else:
                            self.assertNotIn("nc.window_operand", k.split("nc.yield")[0])
                    # A stride whose taps read every phase: the phases are one permute
                    # of the padded input (its copy kernel), not a cat of strided slices.
                    if kw.get("stride", 1) > 1:
                        self.assertIn("aten.permute", ir)

    def test_taps_of_constant_weights_paired_down_the_kernel(self):
        """With a constant weight and two or more taps of fewer than 65 channels to a K
        slice, the stack pairs each tap with the ones below it at the same kernel column
        (compiler/ComposedOps.cpp, the taps' order; the weight's taps reordered to match,
        folded), the rows past the last whole pair row-major: 3 x 3 and 5 x 5 over 64 and
        48 channels, dilation, a stride, groups of 64 channels, 3-d, and a 2 x 2 kernel
        (whole pairs only); modules with their default and random parameters, a batch norm
        and a ReLU after, an infinity in the input."""
        cases = [(lambda: torch.nn.Conv2d(64, 32, 3, padding=1), (2, 64, 12, 13)),
                 (lambda: torch.nn.Conv2d(48, 16, 5, padding=4, dilation=2), (2, 48, 11, 10)),
                 (lambda: torch.nn.Conv2d(64, 40, 3, stride=2, padding=1), (2, 64, 15, 16)),
                 (lambda: torch.nn.Conv2d(128, 64, 3, padding=1, groups=2, bias=False), (1, 128, 9, 9)),
                 (lambda: torch.nn.Conv3d(64, 8, 3, padding=1), (1, 64, 4, 6, 7)),
                 (lambda: torch.nn.Conv2d(64, 16, 2), (3, 64, 9, 8))]
        for make, shape in cases:
            with self.subTest(module=str(make()), shape=shape):
                x = randn(*shape, seed=9)
                x.view(-1)[5 * shape[-1] + 2] = float("inf")
                bn = torch.nn.BatchNorm2d if len(shape) == 4 else torch.nn.BatchNorm3d
                self.models(lambda: torch.nn.Sequential(make(), bn(make().out_channels), torch.nn.ReLU()), (x,))


if __name__ == "__main__":
    common.main()
