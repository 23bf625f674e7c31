#!/usr/bin/env python3
"""Operators the importer builds from others (compiler/ComposedOps.cpp), in the models
that use them: a small CNN (convolutions with padding, stride and groups, batch norm
in inference and training mode, max and average pooling, argmax), a ViT patch
embedding, a UNet-style block (depthwise convolution, group norm, SiLU), transposed
convolutions (1-d to 3-d, output_padding, groups, dilation), a classifier
head (max/min with indices, argmin), position ids from a padding mask (cumsum), norms
and statistics, the activations built on erf/expm1/log1p, and the shape ops (pad,
repeat, roll, flip, rot90, index_select, baddbmm, addbmm), 3-d adaptive pooling, grid_sample,
isin, logspace, dist, unfold (sliding windows) and the window functions. Each is compiled at -O0 and -O2, run, and
compared with PyTorch eager, in f32 and bf16, with default-initialised and random
parameters; integer results (indices) must match exactly.
"""
import math
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e_common as common  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

TOL = common.EAGER_TOLERANCE
DTYPES = common.FLOAT_DTYPES
randn = common.seeded_randn
randomize = common.randomize


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.grouped = nn.Conv2d(16, 16, 3, padding=2, dilation=2, groups=4)
        self.pool = nn.MaxPool2d(2)
        self.avg = nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.avg(self.grouped(x))
        logits = self.head(x.mean((2, 3)))
        return logits, logits.argmax(-1)


class PatchEmbed(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Conv2d(3, 32, 4, stride=4)
        self.norm = nn.LayerNorm(32)

    def forward(self, x):
        return F.gelu(self.norm(self.proj(x).flatten(2).transpose(1, 2)))


class UNetBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.depthwise = nn.Conv2d(8, 16, 3, padding=1, groups=8)
        self.norm = nn.GroupNorm(4, 16)
        self.pointwise = nn.Conv2d(16, 8, 1)
        self.temporal = nn.Conv1d(8, 8, 3, padding=1)

    def forward(self, x):
        h = self.pointwise(F.silu(self.norm(self.depthwise(x))))
        b, c, hh, ww = h.shape
        t = self.temporal(h.reshape(b, c, hh * ww)).reshape(b, c, hh, ww)
        return x + t


class TransposedConvs(nn.Module):
    def __init__(self):
        super().__init__()
        self.up2 = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.odd = nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2,
                                      dilation=(2, 1), bias=False)
        self.one = nn.ConvTranspose1d(6, 3, 4, stride=3, padding=2, dilation=2, output_padding=1)
        self.vol = nn.ConvTranspose3d(2, 2, 2, stride=(1, 2, 2), groups=2)

    def forward(self, a, b, v):
        return self.odd(self.up2(a)), self.one(b), self.vol(v)


class ComposedOps(common.ComparedWithEager):
    def test_cnn(self):
        self.models(SmallCnn, (randn(2, 3, 16, 16, seed=1),))

    def test_transposed_convolution(self):
        """ConvTranspose 1-d/2-d/3-d (stride, padding, output_padding, dilation, groups, no
        bias): a zero-spread, padded input convolved with the swapped, reversed weight.
        Eager 1.13's bf16 transposed convolution on the CPU runs a plain convolution
        (wrong shape, or it refuses the weight), so bf16 is traced with fake tensors (the
        shapes from the meta functions) and compared with f32 eager."""
        for seed in (None, 3):
            torch.manual_seed(0)
            model = TransposedConvs().eval()
            if seed is not None:
                randomize(model, seed)
            inputs = (randn(2, 8, 5, 4, seed=30), randn(2, 6, 7, seed=31), randn(1, 2, 3, 4, 2, seed=32))
            self.check(model, inputs)
            with torch.no_grad():
                refs = model(*inputs)
                outs, _ = common.export_compile_run(model.to(torch.bfloat16), tuple(t.to(torch.bfloat16) for t in inputs),
                                                    self.tmp, "transposed_bf16_%s" % seed, 2, tracing_mode="fake")
            for out, r in zip(outs, refs):
                common.compare(out, r, TOL[torch.bfloat16])

    def test_resampling(self):
        """Nearest and bilinear upsampling (align_corners both ways) by whole and fractional
        factors and to given sizes (down too), and adaptive average pooling to sizes that do and do not divide the input; a NaN and
        an inf stay in their windows."""
        x = randn(2, 3, 6, 8, seed=26)
        x[0, 0, 1, 1], x[1, 2, 0, 0] = float("inf"), float("nan")
        for dtype in DTYPES:
            self.check(lambda a: (F.interpolate(a, scale_factor=2, mode="nearest"),
                                  F.interpolate(a, scale_factor=1.5, mode="nearest"),
                                  F.interpolate(a, size=(5, 7), mode="nearest"),
                                  F.interpolate(a, scale_factor=(3, 0.5), mode="nearest"),
                                  F.adaptive_avg_pool2d(a, (3, 2)), F.adaptive_avg_pool2d(a, (5, 3)),
                                  F.adaptive_avg_pool2d(a[0], 4)), (x.to(dtype),))
            y = randn(2, 3, 5, 7, seed=27).to(dtype)
            self.check(lambda a: (F.interpolate(a, scale_factor=2, mode="bilinear", align_corners=False),
                                  F.interpolate(a, size=(9, 4), mode="bilinear", align_corners=True),
                                  F.interpolate(a, scale_factor=1.5, mode="bilinear"),
                                  F.interpolate(a, size=(1, 1), mode="bilinear", align_corners=True)), (y,))

    def test_bicubic_resampling(self):
        """Bicubic upsampling (eager's cubic convolution, A = -0.75, with neighbours clamped
        to the input) by whole and fractional factors, to sizes up and down, align_corners
        both ways, as Hugging Face's ViT resizes its position embeddings. bf16 against f32
        eager: eager's bf16 kernel rounds its weights and each step (4.7% off f32 on this
        input, ours rounds once)."""
        y = randn(2, 3, 5, 7, seed=33)
        y[1, 2, 2, 3] = float("inf")

        def resample(a):
            return (F.interpolate(a, scale_factor=2, mode="bicubic"),
                    F.interpolate(a, size=(8, 11), mode="bicubic"),
                    F.interpolate(a, size=(3, 4), mode="bicubic", align_corners=True),
                    F.interpolate(a, scale_factor=(14 / 5, 16 / 7), mode="bicubic"),
                    F.interpolate(a[:1, :, :, :1], size=(4, 3), mode="bicubic"))
        self.check(resample, (y,))
        finite = y.nan_to_num(0.0, 0.0, 0.0)
        refs = resample(finite)
        for opt in (0, 2):
            outs, _ = common.export_compile_run(resample, (finite.to(torch.bfloat16),), self.tmp, "bicubic_bf16_%d" % opt, opt)
            for out, r in zip(outs, refs):
                common.compare(out, r, TOL[torch.bfloat16])

    def test_resampling_1d_and_3d(self):
        """Nearest (a factor of 2.3 onto twice the size reads floor(dst / 2.3), except in
        eager's 2-d and 3-d kernels for one channel, which read dst / 2), linear and
        trilinear upsampling. bf16: nearest only (eager's bf16 linear kernels round each
        step; ours rounds once)."""
        s, v = randn(2, 3, 3, seed=28), randn(1, 2, 3, 2, 4, seed=29)
        for dtype in DTYPES:
            self.check(lambda a, b: (F.interpolate(a, scale_factor=2.3, mode="nearest"),
                                     F.interpolate(a, size=7, mode="nearest"),
                                     F.interpolate(b, scale_factor=2.3, mode="nearest"),
                                     F.interpolate(b[:, :1], scale_factor=2.3, mode="nearest"),
                                     F.interpolate(b[0, :, 0], scale_factor=2.3, mode="nearest"),
                                     F.interpolate(b[0, :1, 0].unsqueeze(0), scale_factor=2.3, mode="nearest"),
                                     F.interpolate(b, size=(2, 5, 3), mode="nearest")), (s.to(dtype), v.to(dtype)))
        self.check(lambda a, b: (F.interpolate(a, scale_factor=2.5, mode="linear"),
                                 F.interpolate(a, size=8, mode="linear", align_corners=True),
                                 F.interpolate(b, scale_factor=(2, 1.5, 0.5), mode="trilinear"),
                                 F.interpolate(b, size=(4, 4, 5), mode="trilinear", align_corners=True)), (s, v))

    def test_adaptive_max_pooling_unfold_and_fold(self):
        """adaptive_max_pool2d with indices (first maximum, last NaN, ties from rounded
        values, a row of -inf), F.unfold (im2col) and F.fold (col2im, overlapping windows
        summed) with padding, dilation and stride."""
        x = randn(2, 3, 7, 9, seed=33).round()
        x[0, 1, 2, 3] = float("nan")
        x[1, 0, :2] = float("-inf")
        for dtype in DTYPES:
            self.check(lambda a: (F.adaptive_max_pool2d(a, (3, 4), return_indices=True),
                                  F.adaptive_max_pool2d(a[0], 1, return_indices=True),
                                  F.adaptive_max_pool2d(a, (7, 2))), (x.to(dtype),))
            y = randn(2, 3, 6, 7, seed=34).to(dtype)
            self.check(lambda a: (F.unfold(a, 3, padding=1), F.unfold(a, (2, 3), dilation=(2, 1), stride=(2, 2)),
                                  F.fold(F.unfold(a, 3, padding=1), (6, 7), 3, padding=1),
                                  F.fold(F.unfold(a, (2, 2), stride=2), (6, 7), (2, 2), stride=2)), (y,))

    def test_embedding_bags(self):
        """nn.EmbeddingBag in sum, mean and max mode, with offsets (an empty bag,
        include_last_offset), a padding index, per-sample weights and a 2-d input (fixed
        bags, flattened through a view), default and random weights."""
        g = torch.Generator().manual_seed(35)
        flat = torch.randint(0, 20, (11,), generator=g)
        flat[4] = 2
        offsets = torch.tensor([0, 0, 3, 7])
        fixed = torch.randint(0, 20, (4, 3), generator=g)
        psw = torch.rand(11, generator=g)
        for seed in (None, 5):
            torch.manual_seed(0)
            bags = [nn.EmbeddingBag(20, 8, mode=m, padding_idx=2).eval() for m in ("sum", "mean", "max")]
            if seed is not None:
                for b in bags:
                    randomize(b, seed)
            w = bags[0].weight
            self.check(lambda i, o, f: (bags[0](i, o), bags[1](i, o), bags[2](i, o), bags[1](f), bags[2](f),
                                        F.embedding_bag(i, w, o, mode="sum", per_sample_weights=psw),
                                        F.embedding_bag(i, w, torch.cat([o, torch.tensor([11])]), mode="mean",
                                                        include_last_offset=True)),
                       (flat, offsets, fixed))

    def test_batch_norm_training_mode(self):
        w, b = randn(6, seed=3), randn(6, seed=4)  # no running statistics: the batch's own
        for dtype in DTYPES:
            self.check(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True, eps=1e-3),
                       (randn(4, 6, 5, 5, seed=2).to(dtype), w.to(dtype), b.to(dtype)))

    def test_patch_embedding(self):
        self.models(PatchEmbed, (randn(2, 3, 16, 16, seed=3),))

    def test_unet_block(self):
        self.models(UNetBlock, (randn(1, 8, 6, 6, seed=4),))

    def test_group_norms(self):
        # GroupNorm over [N, C], [N, C, L], [N, C, H, W] and [N, C, D, H, W];
        # one group, one channel a group and in between; with its default
        # (ones, zeros), random and no affine parameters; followed by the
        # SiLU that joins its kernel, and sized so that the normalizing
        # kernel packs its short rows; its mean and rstd results.
        cases = (((6, 12), 3), ((2, 16, 40), 4), ((2, 32, 24, 24), 8), ((1, 64, 16, 16), 64), ((2, 8, 4, 6, 5), 1),
                 ((4, 128, 32, 32), 32))
        for shape, groups in cases:
            with self.subTest(shape=shape, groups=groups):
                x = randn(*shape, seed=len(shape)) * 3 + 1
                self.models(lambda: nn.Sequential(nn.GroupNorm(groups, shape[1]), nn.SiLU()), (x,))
                for dtype in DTYPES:
                    self.check(lambda a: F.group_norm(a, groups, eps=1e-3), (x.to(dtype),))
        x = randn(2, 12, 5, 7, seed=11)
        w, b = randn(12, seed=12), randn(12, seed=13)
        for dtype in DTYPES:
            self.check(lambda a, w, b: torch.ops.aten.native_group_norm(a, w, b, 2, 12, 35, 3, 1e-5),
                       (x.to(dtype), w.to(dtype), b.to(dtype)))
        # Inputs that are views: transposed, channels last, sliced, expanded.
        w16, b16 = randn(16, seed=14), randn(16, seed=15)
        for dtype in DTYPES:
            p = tuple(t.to(dtype) for t in (w16, b16))
            self.check(lambda a, w, b: F.group_norm(a.transpose(1, 2), 4, w, b), (randn(2, 6, 16, 12).to(dtype),) + p)
            self.check(lambda a, w, b: F.silu(F.group_norm(a.permute(0, 3, 1, 2), 4, w, b)),
                       (randn(2, 5, 7, 16).to(dtype),) + p)
            self.check(lambda a, w, b: F.group_norm(a[:, :, 1:-1], 8, w, b), (randn(2, 16, 9, 5).to(dtype),) + p)
            self.check(lambda a, w, b: F.group_norm(a.expand(3, 16, 4, 4), 2, w, b), (randn(1, 16, 4, 4).to(dtype),) + p)

    def test_pooling_edge_cases(self):
        x = randn(1, 2, 7, 9, seed=5)
        x[0, 0, 1, 1] = float("nan")
        x[0, 1, 3:6, 3:6] = float("-inf")
        self.check(lambda a: (F.max_pool2d(a, 3, 2, 1, ceil_mode=True, return_indices=True),
                              F.max_pool2d(a, (2, 3), (1, 2), (1, 0), dilation=(2, 1), return_indices=True),
                              F.avg_pool2d(a.nan_to_num(0.0, 0.0, 0.0), 3, 2, 1, ceil_mode=True),
                              F.avg_pool2d(a.nan_to_num(0.0, 0.0, 0.0), 2, divisor_override=3)),
                   (x,))

    def test_3d_pooling_and_channel_mixing(self):
        v = randn(2, 2, 5, 6, 7, seed=20)
        v[0, 0, 1, 1, 1] = float("nan")
        v[1, 1, 2:4, 2:4, 2:4] = float("-inf")
        self.check(lambda a: (F.max_pool3d(a, 2, return_indices=True),
                              F.max_pool3d(a, (2, 3, 2), (1, 2, 2), (1, 1, 0), dilation=(1, 1, 2), ceil_mode=True,
                                           return_indices=True),
                              F.max_pool3d(a[0], 3, 2, 1, return_indices=True)), (v,))
        w = v.nan_to_num(0.0, 0.0, 0.0)
        # (eager 1.13 has no bf16 avg_pool3d on the CPU)
        self.check(lambda a: (F.avg_pool3d(a, 3, 2, 1), F.avg_pool3d(a, 2, ceil_mode=True, count_include_pad=False),
                              F.avg_pool3d(a[1], 2, divisor_override=3), nn.LocalResponseNorm(3)(a[0])), (w,))
        for dtype in DTYPES:
            self.check(lambda a: (F.channel_shuffle(a.reshape(2, 4, 5, 21), 2), F.channel_shuffle(a, 1)),
                       (w.to(dtype),))
        # nn.Bilinear (aten::_trilinear), batched and with leading dims
        torch.manual_seed(0)
        bilinear = nn.Bilinear(9, 11, 5)
        p, q = randn(4, 9, seed=21), randn(4, 11, seed=22)
        for dtype in DTYPES:
            m = bilinear.to(dtype)
            self.check(lambda a, b: (m(a, b), m(a.reshape(2, 2, 9), b.reshape(2, 2, 11)), F.bilinear(a, b, m.weight)),
                       (p.to(dtype), q.to(dtype)))

    def test_adaptive_pooling_3d(self):
        # video-style [N, C, T, H, W]: uneven windows in every dim, a [C, D, H, W]
        # input, and the indices of the maxima (flat over T, H, W); f32 only
        # (torch 1.13's CPU kernels have no bf16 form)
        x = randn(2, 3, 5, 7, 6, seed=60)
        self.check(lambda a: (F.adaptive_avg_pool3d(a, (2, 3, 4)), F.adaptive_avg_pool3d(a[0], 1),
                              F.adaptive_max_pool3d(a, (3, 2, 4), return_indices=True)),
                   (x,))

    def test_grid_sample(self):
        # every interpolation, padding and align_corners, with points outside
        # [-1, 1], on a pixel centre and on the corner (-O2 only: 18 graphs);
        # then a spatial transformer's warp (affine_grid, then grid_sample)
        g = torch.Generator().manual_seed(64)
        x = torch.randn(2, 3, 5, 7, generator=g)
        grid = torch.rand(2, 4, 6, 2, generator=g) * 2.6 - 1.3
        grid[0, 0, 0] = torch.tensor([1.0, -1.0])
        grid[0, 0, 1] = torch.tensor([0.0, 0.0])
        for mode in ("bilinear", "nearest", "bicubic"):
            for pad in ("zeros", "border", "reflection"):
                for corners in (False, True):
                    with self.subTest(mode=mode, padding=pad, align_corners=corners):
                        self.check(lambda a, p: F.grid_sample(a, p, mode=mode, padding_mode=pad, align_corners=corners),
                                   (x, grid), opts=(2,))
        theta = torch.tensor([[[0.9, 0.1, 0.05], [-0.1, 0.8, 0.0]]]).repeat(2, 1, 1)
        self.check(lambda a, t: F.grid_sample(a, F.affine_grid(t, a.shape, align_corners=False), align_corners=False),
                   (randn(2, 3, 8, 8, seed=65), theta))

    def test_unfold_windows(self):
        # audio framing (400-sample frames every 160: one gather), 2-d patches
        # (unfold twice), short overlapping and gapped windows, a negative
        # dim, the whole dim as one window; and rsub of two tensors
        audio = randn(2, 2000, seed=66)
        img = randn(1, 3, 8, 12, seed=67)
        x = randn(3, 10, 4, seed=68)
        for dtype in DTYPES:
            self.check(lambda a, i, v: (a.unfold(-1, 400, 160) * torch.hann_window(400, dtype=a.dtype),
                                        i.unfold(2, 4, 4).unfold(3, 4, 4).reshape(1, 3, -1, 16),
                                        v.unfold(1, 3, 2), v.unfold(1, 2, 5), v.unfold(-1, 4, 1), v.unfold(0, 1, 1),
                                        torch.rsub(v, v[0], alpha=2)),
                       (audio.to(dtype), img.to(dtype), x.to(dtype)))

    def test_window_functions(self):
        # periodic and symmetric, lengths 1, 2, odd and long, a hamming window
        # with its own coefficients; bf16 as eager rounds each step
        for dtype in DTYPES:
            self.check(lambda a: tuple(f(n, periodic=p, dtype=dtype) * a for n in (1, 2, 7, 1024) for p in (True, False)
                                       for f in (torch.hann_window, torch.hamming_window, torch.blackman_window,
                                                 torch.bartlett_window)) + (torch.hamming_window(9, False, 0.6, 0.3, dtype=dtype) * a,),
                       (torch.tensor(1.0, dtype=dtype),))

    def test_batched_products_and_distances(self):
        b1, b2, m = randn(4, 5, 6, seed=61), randn(4, 6, 3, seed=62), randn(5, 3, seed=63)
        for dtype in DTYPES:
            self.check(lambda a, b, c: (torch.addbmm(c, a, b), torch.addbmm(c[0], a, b, beta=0.5, alpha=2.0),
                                        torch.dist(a, a.flip(0)), torch.dist(c, c[:1], 1), torch.dist(c, c * 2, 3),
                                        torch.dist(a, b.transpose(1, 2)[:, :1], float("inf")), torch.sgn(c)),
                       (b1.to(dtype), b2.to(dtype), m.to(dtype)))

    def test_value_sets_and_log_spaced_constants(self):
        ids = torch.tensor([[3, 7, 1, 7], [0, 2, 9, 4]])
        stop = torch.tensor([7, 4, 11])
        x = torch.tensor([0.5, float("nan"), -1.0, 2.0])
        self.check(lambda i, s, v: (torch.isin(i, s), torch.isin(i, s, invert=True), torch.isin(i, 9),
                                    torch.isin(v, torch.tensor([2.0, float("nan")])), torch.isin(i, s[:0]),
                                    torch.logspace(0, 3, 7) * v.nan_to_num().sum(), torch.logspace(-2, 2, 5, base=2.0),
                                    torch.logspace(0, 4, 5, dtype=torch.int64), torch.logspace(1, 3, 1) * v.nan_to_num().sum(),
                                    torch.logspace(2, 5, 1, dtype=torch.int64)),
                   (ids, stop, x))

    def test_classifier_head(self):
        x = randn(4, 33, seed=6)
        x[1, 5] = x[1, 9] = x.max() + 1  # ties: the first index
        x[2, 3] = float("nan")
        for dtype in DTYPES:
            self.check(lambda a: (a.max(-1), a.min(0, keepdim=True), a.argmin(-1), a.argmax(), a.amin((0, 1)),
                                  a.max(), torch.max(a, a.flip(0))), (x.to(dtype),))
        i = torch.randint(-50, 50, (3, 7), generator=torch.Generator().manual_seed(1))
        self.check(lambda a: (a.argmax(1), a.max(0).values, a.amin(-1)), (i,))

    def test_position_ids_from_a_padding_mask(self):
        mask = torch.ones(3, 300, dtype=torch.int64)
        mask[1, :40] = 0
        mask[2, 250:] = 0
        table = randn(300, 16, seed=8)

        def positions(m):
            ids = m.cumsum(-1) - 1
            ids = ids.masked_fill(m == 0, 1)
            return ids, F.embedding(ids, table)
        self.check(positions, (mask,))
        x = randn(2, 5, 260, seed=9)
        for dtype in DTYPES:
            self.check(lambda a: (a.cumsum(-1), a.cumsum(1)), (x.to(dtype),))

    def test_norms_and_statistics(self):
        x = randn(4, 24, seed=10)
        for dtype in DTYPES:
            self.check(lambda a: (F.normalize(a, dim=-1), a.norm(dim=0), a.norm(p=1, dim=-1, keepdim=True),
                                  torch.linalg.vector_norm(a, float("inf"), dim=1), a.var(-1), a.std(0, unbiased=False),
                                  F.cosine_similarity(a, a.roll(1, 0), dim=-1)), (x.to(dtype),))

    def test_activations(self):
        x = randn(8, 40, seed=11) * 4
        x[0, :6] = torch.tensor([0.0, -0.0, 1e-6, -1e-6, 30.0, -30.0])
        for dtype in DTYPES:
            self.check(lambda a: (F.softplus(a), F.softplus(a, beta=2.0, threshold=5.0), F.elu(a), F.selu(a),
                                  F.celu(a, alpha=0.5), torch.erf(a), torch.expm1(a),
                                  torch.log1p(a.abs()), torch.special.erf(a * 0.1)), (x.to(dtype),))
        self.check(F.mish, (x,))  # eager has no bf16 mish on the CPU

    def test_gather_and_indexing(self):
        """gather along any dim (the index smaller than the input in the other dims), and
        x[idx] / x[:, idx] / x[i, j] / x[i, :, j] with integer index tensors of any shape
        (broadcast together; separated ones put their shape first), negative ones included."""
        x = randn(4, 7, 9, seed=23)
        g = torch.Generator().manual_seed(4)
        last = torch.randint(0, 9, (4, 7, 3), generator=g)
        mid = torch.randint(0, 7, (2, 5, 9), generator=g)
        ids = torch.tensor([[0, -1], [3, 2]])
        for dtype in DTYPES:
            self.check(lambda a, i, j, k: (a.gather(-1, i), torch.gather(a, 1, j), a[k], a[:, k], a[..., k.flatten()],
                                           torch.take_along_dim(a, i, dim=2), a[k, k % 7], a[k[0], :, k],
                                           a[:, k[1:], k[:, :1]]),
                       (x.to(dtype), last, mid, ids))
        logits, labels = randn(2, 5, 50, seed=24), torch.randint(0, 50, (2, 5), generator=g)
        self.check(lambda l, y: F.log_softmax(l, -1).gather(-1, y.unsqueeze(-1)).squeeze(-1), (logits, labels))

    def test_transformer_fast_paths(self):
        """Under no_grad, nn.MultiheadAttention and nn.TransformerEncoderLayer run fused
        ops (_native_multi_head_attention, _transformer_encoder_layer_fwd) that the exporter
        decomposes: attention weights (averaged and per head), key padding masks, post- and
        pre-norm layers with relu and gelu, a two-layer encoder; f32 and bf16."""
        x = randn(2, 10, 32, seed=25)
        pad = torch.zeros(2, 10, dtype=torch.bool)
        pad[1, 6:] = True
        for dtype in DTYPES:
            torch.manual_seed(1)
            mha = nn.MultiheadAttention(32, 4, batch_first=True).eval().to(dtype)
            layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval().to(dtype)
            pre = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, norm_first=True,
                                             activation="gelu").eval().to(dtype)
            stack = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), 2,
                                          enable_nested_tensor=False).eval().to(dtype)
            a = x.to(dtype)
            self.check(lambda q: (mha(q, q, q), mha(q, q, q, key_padding_mask=pad, average_attn_weights=False),
                                  mha(q, q, q, need_weights=False)[0]), (a,))
            self.check(lambda s: (layer(s), layer(s, src_key_padding_mask=pad), pre(s), stack(s),
                                  stack(s, src_key_padding_mask=pad)), (a,))

    def test_pow_with_tensor_exponents(self):
        x, e = randn(4, 16, seed=19), randn(4, 1, seed=20)
        for dtype in DTYPES:
            self.check(lambda a, b: (torch.pow(a.abs() + 0.5, b), torch.pow(2.0, a), 10 ** (a * 0.5),
                                     torch.pow(a, 2 * torch.ones_like(b)), a ** torch.tensor(3.0)),
                       (x.to(dtype), e.to(dtype)))

    def test_rounding_and_integer_division(self):
        """floor/ceil/trunc/round (ties to even), division with rounding modes, remainder and
        fmod on floats and on integers (exact), and a computed float cast to an integer
        (rounded toward zero: T5's relative-position buckets)."""
        x = randn(6, 20, seed=21) * 5
        x[0, :6] = torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 2.4999])
        y = randn(1, 20, seed=22).abs() + 0.5
        for dtype in DTYPES:
            self.check(lambda a, b: (a.floor(), a.ceil(), a.trunc(), a.round(), torch.round(a, decimals=1),
                                     torch.div(a, b, rounding_mode="trunc"), torch.div(a, b, rounding_mode="floor"),
                                     a // 3.0, torch.remainder(a, b), a % -2.5, torch.fmod(a, b), torch.fmod(a, 1.5)),
                       (x.to(dtype), y.to(dtype)))
        # bf16 quotients as eager rounds them (each step in the dtype; f16 as
        # well, in the OpInfo sweep): many random ones, some large, some near
        # whole numbers, divisors of both signs, zero quotients of either sign.
        a = randn(64, 256, seed=23) * 8
        b = randn(64, 256, seed=24)
        a[1] *= 200
        b[2] = 0.01 * b[2].sign()
        a[3] = b[3] * torch.arange(256.0)
        a[4, :4], b[4, :4] = torch.tensor([0.0, -0.0, 0.25, -0.25]), torch.tensor([3.0, 3.0, -7.0, 7.0])
        # (Whole numbers, compared exactly as integers: a quotient one step
        # off is a small error beside the largest one.)
        self.check(lambda a, b: tuple(q.to(torch.int32) for q in (
            torch.div(a, b, rounding_mode="trunc"), torch.div(a, b, rounding_mode="floor"), a // b,
            torch.div(a, 3.0, rounding_mode="floor"))) + (torch.div(a[4], b[4], rounding_mode="floor"),),
                   (a.bfloat16(), b.bfloat16()))
        i = torch.randint(-100, 100, (4, 30), generator=torch.Generator().manual_seed(2))
        j = torch.randint(1, 9, (4, 30), generator=torch.Generator().manual_seed(3))
        self.check(lambda p, q: (p // q, p // 4, p % q, p % -3, torch.fmod(p, q), torch.div(p, q, rounding_mode="trunc"),
                                 p.float().round().long()), (i, j))

        def buckets(relative, num_buckets=32, max_distance=128):
            # T5's relative_position_bucket (bidirectional).
            num_buckets //= 2
            out = (relative > 0).to(torch.long) * num_buckets
            n = torch.abs(relative)
            max_exact = num_buckets // 2
            is_small = n < max_exact
            large = max_exact + (torch.log(n.float() / max_exact) / math.log(max_distance / max_exact)
                                 * (num_buckets - max_exact)).to(torch.long)
            large = torch.min(large, torch.full_like(large, num_buckets - 1))
            return out + torch.where(is_small, n, large)
        q = torch.arange(40)[:, None]
        k = torch.arange(48)[None, :]
        self.check(lambda r: buckets(r), (k - q,))
        self.check(lambda a: ((a * 2.5).long(), (a * 7.0).to(torch.int32) + 1), (x,))

    def test_shape_ops(self):
        x = randn(2, 6, 10, seed=12)
        idx, rows = torch.tensor([4, 0, 0, 9, 2]), torch.tensor([1, 0, 1])
        for dtype in DTYPES:
            self.check(lambda a, i, r: (F.pad(a, (2, -3, 1, 0), value=-1.5), a.repeat(2, 1, 1, 3),
                                        a.roll((2, -1), (1, 2)), a.roll(5), a.flip(0, 2), a.index_select(2, i),
                                        a.index_select(0, r), a.index_select(1, torch.tensor([5, 1])),
                                        torch.rot90(a), torch.rot90(a, 2, [0, 2]), torch.rot90(a, -1, [2, 1])),
                       (x.to(dtype), idx, rows))
        # Dims longer than 256 are reversed by a gather of their rows (graph_fuzz 48484848
        # case 472: rot90 of a [513, n] value was refused).
        long = randn(2, 300, 3, seed=17)
        for dtype in DTYPES:
            self.check(lambda a: (a.flip(1), a.flip(0, 1, 2).exp(), torch.rot90(a[0], 1, (0, 1)),
                                  a.flip(1).cumsum(1).flip(1)), (long.to(dtype),))
        self.check(lambda a: (a.flip(0), (a > 0).flip(0)), (torch.randint(-999, 999, (700,)),))
        b1, b2, c = randn(3, 4, 5, seed=13), randn(3, 5, 6, seed=14), randn(4, 6, seed=15)
        full = randn(3, 4, 6, seed=16)
        full[0, 0, 0] = float("nan")  # beta == 0 ignores self
        for dtype in DTYPES:
            p, q, r, s = (t.to(dtype) for t in (b1, b2, c, full))
            self.check(lambda p, q, r: (torch.baddbmm(r, p, q), torch.baddbmm(r, p, q, beta=0.25, alpha=2.0)),
                       (p, q, r))
            # Eager 1.13's baddbmm with beta == 0 reads uninitialized memory (NaNs now and
            # then), so that case is compared with alpha * bmm instead.
            with torch.no_grad():
                outs, _ = common.export_compile_run(lambda p, q, s: torch.baddbmm(s, p, q, beta=0.0, alpha=0.5),
                                                    (p, q, s), self.tmp, "baddbmm_beta0_%s" % str(dtype)[6:], 2)
            common.compare(outs[0], 0.5 * torch.bmm(p.float(), q.float()).to(dtype), TOL[dtype])

    def test_copies_rearranged_in_sbuf(self):
        # Copy kernels rearranged in SBUF (passes/LowerCopies.cpp), compared exactly:
        # nearest upsampling by whole factors in 1-d to 3-d (short rows packed
        # several to a partition), repeat and tile (broadcast dims outside the
        # tile's columns stored once per index), repeat_interleave, key/value
        # heads repeated for grouped-query attention (rows longer than a tile),
        # one row broadcast to many (rows that load the same input), inputs that
        # are views (transposed, sliced), a returned reshape whose broadcast
        # another kernel also reads, and a sum of an upsampled value.
        def heads(k, n):
            b, h, s, d = k.shape
            return k[:, :, None].expand(b, h, n, s, d).reshape(b, h * n, s, d)

        cases = (
            (lambda a: F.interpolate(a, scale_factor=2, mode="nearest"), (32, 16, 12, 10)),
            (lambda a: F.interpolate(a, scale_factor=(3, 2), mode="nearest"), (2, 5, 7, 9)),
            (lambda a: F.interpolate(a, size=(24, 15), mode="nearest"), (2, 3, 12, 5)),
            (lambda a: F.interpolate(a, scale_factor=2, mode="nearest"), (1, 4, 6, 5, 7)),
            (lambda a: F.interpolate(a, scale_factor=3, mode="nearest"), (3, 7, 33)),
            (lambda a: F.interpolate(a.transpose(2, 3)[:, :, 1:], scale_factor=2, mode="nearest"), (2, 8, 12, 10)),
            (lambda a: (a.repeat(1, 2, 3), a.repeat(2, 1, 1, 2), a.tile((4, 1))), (5, 8, 9)),
            (lambda a: (a.repeat_interleave(3, dim=1), a.repeat_interleave(2, dim=-1)), (6, 20, 7)),
            (lambda a: heads(a, 4), (1, 4, 64, 32)),
            (lambda a: heads(a, 2), (1, 2, 1024, 128)),
            (lambda a: (a.expand(300, 64).contiguous(), a.expand(3, 4, 50, 64).reshape(-1)), (1, 64)),
            (lambda a: (a[:, :, None].expand(-1, -1, 3).flatten(1), a[:, :, None].expand(-1, -1, 3) * 2), (40, 50)),
            # Permutes with short common runs, rearranged in SBUF: a patch embedding's
            # im2col (a tile per channel, the reshape into rows written by the copy),
            # 8-element rows regrouped, single elements (pixel shuffles), a window
            # partition and a head merge returned through reshapes.
            (lambda a: a.reshape(8, 3, 14, 16, 14, 16).permute(0, 2, 4, 1, 3, 5).reshape(1568, 768), (8, 3, 224, 224)),
            (lambda a: a.reshape(64, 16, 4, 8).permute(0, 2, 1, 3).contiguous(), (64, 16, 32)),
            (lambda a: (F.pixel_shuffle(a, 2), F.pixel_unshuffle(a, 2)), (2, 64, 20, 20)),
            (lambda a: a.view(2, 8, 7, 8, 7, 24).permute(0, 1, 3, 2, 4, 5).reshape(-1, 49, 24), (2, 56, 56, 24)),
            (lambda a: a.transpose(1, 2).reshape(4, 64, 96), (4, 12, 64, 8)),
        )
        for i, (fn, shape) in enumerate(cases):
            for dtype in DTYPES:
                x = randn(*shape, seed=30 + i).to(dtype)
                with torch.no_grad():
                    refs, _ = torch.utils._pytree.tree_flatten(fn(x))
                for opt in (0, 2):
                    with self.subTest(case=i, dtype=dtype, opt=opt), torch.no_grad():
                        outs, _ = common.export_compile_run(fn, (x,), self.tmp, "broadcast_%d_%s_O%d" %
                                                            (i, str(dtype)[6:], opt), opt)
                        self.assertEqual(len(outs), len(refs))
                        for out, ref in zip(outs, refs):
                            common.compare(out, ref, 0.0)
        for dtype in DTYPES:
            x, y = randn(2, 8, 6, 6, seed=50).to(dtype), randn(2, 8, 12, 12, seed=51).to(dtype)
            self.check(lambda a, b: F.interpolate(a, scale_factor=2, mode="nearest") + b, (x, y))

    def test_pooling_over_packed_rows(self):
        # Window slices that step along their rows, over enough rows to pack
        # several to a partition (passes/LowerToIsa.cpp packShortRows, emitDma's
        # stepped loads): each packed row's span is staged, the spans of one
        # row's windows share one load (a 2 x 2 window's two input rows in one
        # run), and a copy per packed row compacts each slice. Max and average
        # pooling (2 x 2, 3 x 3 stride 2 with padding, ceil mode over an odd
        # size, the indices), strided slices; NaN and infinities in the input.
        for dtype in DTYPES:
            x = randn(4, 32, 64, 64, seed=70)
            x[0, 0, 0, 0], x[1, 2, 3, 4], x[2, 5, 7, 9] = float("nan"), float("inf"), float("-inf")
            odd = randn(4, 32, 65, 65, seed=71)
            odd[3, 1, 64, 64] = float("nan")
            with self.subTest(dtype=dtype):
                self.check(lambda a: (F.max_pool2d(a, 2), F.avg_pool2d(a, 2), F.max_pool2d(a, 3, 2, 1),
                                      a[:, :, ::2, ::2] * 2), (x.to(dtype),))
                self.check(lambda a: F.max_pool2d(a, 2, ceil_mode=True, return_indices=True), (odd.to(dtype),))

    def test_nested_cats_in_one_copy_kernel(self):
        # A cat along a later dim read only by a copy kernel's cat is assembled in
        # SBUF in the tile the outer cat stores (ncc-form-kernels nestedCatGroup,
        # LowerToIsa.cpp lowerCat): a pad over H and W is one kernel, not two.
        # Compared exactly at -O0 and -O2 in f32, bf16 and f16, with the -O2
        # graph's kernel count: uneven and negative pads, a value other than
        # zero, three padded dims (the innermost two nest), a pad over C and H
        # (the inner cat's rows are H x W), planes longer than a column chunk
        # (tiles of whole padded rows) over fewer than 128 of them, rows too long
        # to nest (5000 + 2), cats of inputs and of slices, splats of two values,
        # transposed pieces (nested where the inner cat is along the last dim, not
        # where its rows would be two dims of a transposed view), and a pad of a
        # computed value that a later op reads.
        cat = torch.cat
        cases = (
            (lambda a: F.pad(a, (1, 1, 1, 1)), [(2, 8, 10, 12)], 1),
            (lambda a: F.pad(a, (2, 0, 1, 3), value=1.5), [(2, 8, 10, 12)], 1),
            (lambda a: F.pad(a, (-1, 2, 1, -2)), [(3, 5, 9, 7)], 1),
            (lambda a: F.pad(a, (1, 2, 1, 1, 1, 1)), [(2, 3, 4, 5, 6)], 2),
            (lambda a: F.pad(a, (0, 0, 1, 1, 2, 0)), [(2, 3, 4, 5)], 1),
            (lambda a: F.pad(a, (1, 1, 2, 1)), [(1, 3, 100, 90)], 1),
            (lambda a: F.pad(a, (1, 1, 1, 1)), [(2, 3, 3, 5000)], 2),
            (lambda a, b, c: cat([a, cat([b, c[..., 1:5]], -1)], 1), [(2, 3, 4, 7), (2, 5, 4, 3), (2, 5, 4, 6)], 1),
            (lambda a: cat([torch.zeros(3, 1, 6, 12, dtype=a.dtype),
                            cat([torch.full_like(a, 2.0), a, torch.ones_like(a)], 3)], 1), [(3, 2, 6, 4)], 1),
            (lambda a, b: cat([a, cat([b.transpose(2, 3), b.transpose(2, 3)], 3)], 2), [(2, 3, 5, 8), (2, 3, 4, 5)],
             1),
            (lambda a, b: cat([a, cat([b.transpose(2, 3), b.transpose(2, 3)], 2)], 1), [(2, 3, 10, 4), (2, 3, 4, 5)],
             2),
            (lambda a: F.pad(a * 2, (1, 1, 1, 1)) - 1, [(4, 16, 9, 9)], 3),
        )
        name = self.id().split(".")[-1]
        for i, (fn, shapes, kernels) in enumerate(cases):
            for dtype in DTYPES + (torch.float16,):
                xs = tuple(randn(*shape, seed=60 + i + k).to(dtype) for k, shape in enumerate(shapes))
                xs[0].view(-1)[1] = float("nan")
                xs[0].view(-1)[-1] = float("-inf")
                with torch.no_grad():
                    ref = fn(*xs)
                for opt in (0, 2):
                    case = "%s_%d_%s_O%d" % (name, i, str(dtype)[6:], opt)
                    with self.subTest(case=i, dtype=dtype, opt=opt), torch.no_grad():
                        outs, _ = common.export_compile_run(fn, xs, self.tmp, case, opt)
                        common.compare(outs[0], ref, 0.0)
                        if opt == 2:
                            ir = subprocess.run([common.toolchain.tool("neuron-cc"), "compile",
                                                 os.path.join(self.tmp, case + ".pb"), "-O2", "--output",
                                                 os.path.join(self.tmp, "ir.neff"),
                                                 "--mlir-print-ir-after=ncc-form-kernels"],
                                                capture_output=True, text=True, check=True).stderr
                            self.assertEqual(ir.count("nc.kernel "), kernels, ir[-3000:])
        # Integers are not nested (the rows are assembled by float copies).
        self.check(lambda a: F.pad(a, (1, 2, 2, 1), value=3), (torch.randint(-2**20, 2**20, (2, 3, 5, 6)),))

    def test_masks_and_bounds(self):
        x = randn(5, 12, seed=16)
        x[0, 0], x[1, 1], x[2, 2] = float("nan"), float("inf"), float("-inf")
        lo, hi = randn(1, 12, seed=17) - 1, randn(5, 1, seed=18) + 1
        self.check(lambda a, l, h: (a.isnan(), a.isinf(), a.isfinite(), (a > 1).any(-1), (a > -3).all(0),
                                    a.any(), torch.clamp(a, l, h), a.clamp(min=l), a.clamp_min(0.2),
                                    a.clamp_max(-0.1), torch.lerp(l, h, 0.3), torch.lerp(l, h, 0.8),
                                    torch.lerp(l, h, a.sigmoid()), a.sign(), a.reciprocal(),
                                    torch.zeros_like(a) + torch.full_like(a, 2.0)),
                   (x, lo, hi))


if __name__ == "__main__":
    unittest.main()
