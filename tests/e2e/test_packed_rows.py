#!/usr/bin/env python3
"""Kernels over short rows. Where a row is under 512 bytes the lowering puts
several consecutive rows on each partition (passes/LowerToIsa.cpp): an
elementwise kernel packs them into its columns (packShortRows: the rows'
last leading dim is split and part of it moved onto the columns, every
value keeping its strides); a kernel that reduces its rows or reads per-row
values interleaves its row tiles (interleaveShortRows: row tile j of a
group holds every g-th row, and values read or written in rows move for
the whole group through column ranges of group tiles). These cases cover
what that must keep right: broadcasts over the columns (a bias, loaded once
and copied across the packed rows), per-batch, per-channel and per-row
scalars, sliced and transposed inputs, returned views, integer and bool
inputs one byte wide, odd row counts, trailing unit dims, long chains whose
tiles must be narrowed; reductions (softmax, norms, sums, maxima and their
indices, losses) with per-row and full-width results, keepdim or not,
returned through views, over rows holding infinities and NaN. Each is
compiled at -O0 and -O2, run, and compared with PyTorch eager in f32 and
bf16, with default-like (zeros, ones) and random parameters.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e_common as common  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

DTYPES = common.FLOAT_DTYPES
randn = common.seeded_randn


class PackedRows(common.ComparedWithEager):
    def test_activations_over_narrow_rows(self):
        for shape in ((4096, 64), (8192, 24), (3000, 7), (1000, 24), (129, 3, 10), (2048, 64, 1), (2, 1536, 3),
                      (4096, 1, 64), (2048, 1, 1, 40)):
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
                x = randn(3, 1024, 40).to(dtype)
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
            with self.subTest(dtype=dtype, what="per row, loaded as one run and transposed"):
                # Rows of 512 bytes or more (not packed): the per-row column of
                # full row tiles loads as one run (or one transfer of equal
                # segments) and is transposed onto the partitions.
                x = randn(1000, 256).to(dtype)
                s = randn(1000, 1, seed=2).to(dtype)
                s[5, 0], s[300, 0], s[999, 0] = float("inf"), float("nan"), 0.0
                self.check(lambda a, s: a * s - 1, (x, s))
                self.check(lambda a, s: a / s, (randn(8, 2, 64, 256, seed=3).to(dtype), randn(8, 1, 64, 1, seed=4).to(dtype)))
                self.check(lambda a, s: a + s, (randn(2, 3, 100, 256, seed=5).to(dtype), randn(2, 1, 100, 1, seed=6).to(dtype)))
                self.check(lambda a, s: a * s, (randn(100, 100, 1, seed=7).to(dtype), randn(100, 1, 256, seed=8).to(dtype)))
            with self.subTest(dtype=dtype, what="per channel, NCHW"):
                x = randn(4, 32, 28, 28).to(dtype)
                scale = randn(32, 1, 1, seed=5).to(dtype)
                shift = torch.zeros(32, 1, 1).to(dtype)
                self.check(lambda a, s, t: torch.relu(a * s + t), (x, scale, shift))

    def test_strided_inputs_and_returned_views(self):
        for dtype in DTYPES:
            with self.subTest(dtype=dtype, what="transposed, loaded in pieces"):
                # A small kernel's transposed blocks of 32-byte runs load in
                # pieces of partitions, side by side on the queues.
                x = randn(16, 300, 16).to(dtype)
                x[3, 7, 5], x[15, 299, 15] = float("inf"), float("nan")
                self.check(lambda a, s: a.transpose(-1, -2) + s, (x, randn(16, 1, 1, seed=1).to(dtype)))
                self.check(lambda a: F.gelu(a.transpose(-1, -2)), (randn(2, 300, 32, seed=2).to(dtype),))
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

    def test_rows_cut_short_loaded_with_their_gaps(self):
        # Rows of a view that cuts a few columns off each row (a convolution's wide
        # positions cut to its width) are loaded a span of rows at a time, the cut
        # columns with them, and copied into the tile (passes/LowerToIsa.cpp,
        # emitDma): the cut columns hold NaN and infinities that must not reach
        # the results. Elementwise ops, a returned copy, row sums and a broadcast.
        cases = (
            (lambda a: a[..., :56] * 2 + 1, (8, 64, 56, 58)),
            (lambda a: torch.exp(a[..., 3:37]), (4, 32, 30, 40)),
            (lambda a: (a[:, :, :20].contiguous(), a[:, :, 2:22].sum(-1)), (16, 100, 24)),
            (lambda a: a[..., 1:11] * torch.arange(10.0).to(a.dtype), (2, 3, 7, 9, 12)),
            (lambda a: torch.relu(a[:, :, 1:-1]), (300, 6, 130)),
        )
        for i, (fn, shape) in enumerate(cases):
            for dtype in DTYPES:
                with self.subTest(case=i, dtype=dtype):
                    x = randn(*shape, seed=40 + i)
                    x[..., -1] = float("nan")
                    x[..., 0] = float("-inf") if i in (1, 4) else x[..., 0]
                    x.view(-1)[3 * shape[-1] + 5] = float("inf")
                    self.check(fn, (x.to(dtype),))

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

    def test_reductions_over_short_rows(self):
        for shape in ((4096, 64), (3000, 7), (1000, 24), (3, 1000, 40), (2400, 50, 1), (2048, 1, 48)):
            for dtype in DTYPES:
                with self.subTest(shape=shape, dtype=dtype):
                    x = (randn(*shape) * 3).to(dtype)
                    self.check(lambda a: (F.softmax(a, -1), a.sum(-1), a.amax(-1, keepdim=True)), (x,))
                    self.check(lambda a: (F.log_softmax(a, -1), a.argmax(-1), a.mean(-1).view(-1)), (x,))

    def test_norms_over_short_rows(self):
        # LayerNorm with its default (ones, zeros) and random parameters; an
        # RMSNorm; a per-row statistic returned beside the normalized rows.
        for dtype in DTYPES:
            with self.subTest(dtype=dtype, what="layer norm"):
                self.models(lambda: torch.nn.LayerNorm(48), (randn(4096, 48),))
            with self.subTest(dtype=dtype, what="rms norm"):
                x = randn(2, 1024, 32).to(dtype)
                w = randn(32, seed=9).to(dtype)
                self.check(lambda a, w: (a * torch.rsqrt(a.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(a.dtype) * w,
                                         a.var(-1)), (x, w))

    def test_losses_and_per_row_inputs(self):
        target = torch.randint(0, 10, (4096,), generator=torch.Generator().manual_seed(2))
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                logits = (randn(4096, 10) * 2).to(dtype)
                self.check(lambda a, t: F.cross_entropy(a.float(), t, reduction="none"), (logits, target))
                scale = randn(4096, 1, seed=4).to(dtype)
                self.check(lambda a, s: (a - a.amax(-1, keepdim=True)) * s, (logits, scale))

    def test_non_finite_rows(self):
        x = randn(2048, 32) * 3
        x[0, 3] = float("nan")
        x[1] = float("-inf")
        x[2, 5] = float("inf")
        x[777] = float("-inf")
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                self.check(lambda a: (F.softmax(a, -1), a.amax(-1), torch.logsumexp(a, -1)), (x.to(dtype),))

    def test_transposed_reduction_input(self):
        # A transposed input keeps the kernel's row tiles as they were.
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                x = randn(64, 2048).to(dtype)
                self.check(lambda a: F.softmax(a.t() * 2, -1), (x,))

    def test_cats_of_short_rows(self):
        # A cat along the last dim of short rows, alone in its kernel, puts g
        # rows on each partition: padding (one value, written by iota), pieces
        # of different constants, computed pieces, a piece that is a slice,
        # rows that g does not divide evenly into tiles, a transposed piece
        # (its rows not consecutive: one row a partition as before).
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                x = randn(8, 64, 30, 28).to(dtype)
                y = randn(4096, 20, seed=1).to(dtype)
                self.check(lambda a: (F.pad(a, (1, 1, 1, 1)), F.pad(a, (2, 3), value=-1.5),
                                      F.pad(a, (0, 4), value=float("-inf"))), (x,))
                self.check(lambda a: torch.cat([torch.ones(4096, 3, dtype=a.dtype), a, torch.zeros(4096, 5, dtype=a.dtype)], -1),
                           (y,))
                self.check(lambda a: torch.cat([a.exp(), a[:, 3:11] * 2, a.t().reshape(4096, 20)], -1), (y,))
                self.check(lambda a: torch.cat([a[:, :7], a[:, 7:].t().t()], -1) + 1, (y,))
                z = randn(3000, 14, seed=2).to(dtype)
                self.check(lambda a: F.pad(a, (1, 1)).sin(), (z,))

    def test_rotary_halves_of_short_rows(self):
        # rotate_half of a loaded value in an elementwise kernel over short
        # rows: packed, each cat copies its pieces from the value's tile once
        # per packed row. HF's layout [B, H, S, D] with cos/sin over [S, D]
        # (shared or per batch), the [B, S, H, D] layout, the default-like
        # tables (cos ones, sin zeros), uneven and three-piece cats, slices of
        # the broadcast table itself, two inputs rotated in one kernel, and
        # a cat whose pieces are not all slices of a loaded value.
        def rotate_half(x, h=None):
            h = x.shape[-1] // 2 if h is None else h
            return torch.cat((-x[..., h:], x[..., :h]), dim=-1)

        for dtype in DTYPES:
            q = randn(2, 8, 512, 64).to(dtype)
            k = randn(2, 8, 512, 64, seed=1).to(dtype)
            cos, sin = randn(1, 1, 512, 64, seed=2).to(dtype), randn(1, 1, 512, 64, seed=3).to(dtype)
            with self.subTest(dtype=dtype, what="hf"):
                self.check(lambda q, k, c, s: (q * c + rotate_half(q) * s, k * c + rotate_half(k) * s),
                           (q, k, cos, sin))
            with self.subTest(dtype=dtype, what="default tables"):
                self.check(lambda q, c, s: q * c + rotate_half(q) * s,
                           (q, torch.ones(1, 1, 512, 64).to(dtype), torch.zeros(1, 1, 512, 64).to(dtype)))
            with self.subTest(dtype=dtype, what="per batch tables, uneven halves"):
                cb = randn(2, 1, 512, 64, seed=4).to(dtype)
                self.check(lambda q, c: q * c + rotate_half(q, 24) * c.flip(-1), (q, cb))
            with self.subTest(dtype=dtype, what="bshd"):
                x = randn(1, 1024, 4, 128, seed=5).to(dtype)
                c = randn(1, 1024, 1, 128, seed=6).to(dtype)
                self.check(lambda x, c: x * c + rotate_half(x) * (1 - c), (x, c))
            with self.subTest(dtype=dtype, what="three pieces, table slices"):
                x = randn(16384, 48, seed=7).to(dtype)
                t = randn(48, seed=8).to(dtype)
                self.check(lambda x, t: (torch.cat((x[:, 40:], x[:, 8:40], x[:, :8]), -1) + x,
                                         x * torch.cat((t[16:], t[:16])) - x), (x, t))
            with self.subTest(dtype=dtype, what="a computed piece (not packed)"):
                self.check(lambda q, c: q + torch.cat((q[..., 32:] * c[..., :32], q[..., :32]), -1), (q, cos))

    def test_transposed_copies(self):
        # Copies whose input is read across its contiguous dim: the rows of a
        # tile come in runs of adjacent elements (one per batch where a tile
        # crosses a batch: ViT's flatten(2).transpose(1, 2) every 196 rows)
        # and are loaded with the columns on the partitions and transposed on
        # the TensorEngine; a copy's columns take the trailing dims that are
        # one run in both views (NHWC to NCHW copies [N x C, H x W]). Sliced
        # inputs keep their strides; integers convert as they load.
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                nhwc = randn(2, 14, 14, 96).to(dtype)
                nchw = randn(2, 96, 14, 14, seed=1).to(dtype)
                self.check(lambda a: a.permute(0, 3, 1, 2).contiguous(), (nhwc,))
                self.check(lambda a: a.permute(0, 2, 3, 1).contiguous(), (nchw,))
                self.check(lambda a: a.flatten(2).transpose(1, 2).contiguous(), (nchw,))
                self.check(lambda a: a.flatten(2).transpose(1, 2).contiguous(), (randn(3, 40, 7, 9, seed=2).to(dtype),))
                self.check(lambda a: a.transpose(1, 2).contiguous() * 2, (randn(2, 130, 70, seed=3).to(dtype),))
                self.check(lambda a: a[:, 1:, :, ::2].permute(0, 3, 1, 2).contiguous(), (nhwc,))
                self.check(lambda a: a.permute(0, 3, 1, 2)[:, :, 2:-2].contiguous(), (nhwc,))
                for weight, bias in ((torch.ones(96), torch.zeros(96)), (randn(96, seed=4), randn(96, seed=5))):
                    self.check(lambda a, w, b: F.layer_norm(a.permute(0, 2, 3, 1), (96,), w, b).permute(0, 3, 1, 2)
                               .contiguous(), (nchw, weight.to(dtype), bias.to(dtype)))
        ids = (torch.arange(2 * 9 * 9 * 40, dtype=torch.int64).reshape(2, 9, 9, 40) % 777) - 300
        self.check(lambda a: a.permute(0, 3, 1, 2).contiguous(), (ids,))
        self.check(lambda a: a.flatten(1, 2).transpose(1, 2).contiguous(), (ids.to(torch.int32),))

    def test_dims_merged_before_packing(self):
        # Rows shorter than a run take the dims before them where every value
        # steps through them as one (mergeChainedDims): [4096, 2, 2] is
        # packed as [8192, 2] rows, with a bias over [2, 2] as [4096, 4].
        # Values that break a chain (a slice, a transposed input, a scalar
        # per outer index or per middle index, a returned transpose) keep
        # the dims apart and must still be read right.
        for dtype in DTYPES:
            x = randn(4096, 2, 2).to(dtype)
            with self.subTest(dtype=dtype, what="contiguous"):
                self.check(lambda a: (a + 1, torch.sigmoid(a) * a), (x,))
            for what, bias in (("zeros", torch.zeros(2, 2)), ("ones", torch.ones(2, 2)),
                               ("random", randn(2, 2, seed=3)), ("columns", randn(2, seed=3)),
                               ("middle", randn(2, 1, seed=3)), ("outer", randn(4096, 1, 1, seed=3)),
                               ("outer and columns", randn(4096, 1, 2, seed=3)),
                               ("per row", randn(4096, 2, 1, seed=3)), ("per row, zeros", torch.zeros(4096, 2, 1))):
                with self.subTest(dtype=dtype, bias=what):
                    self.check(lambda a, c: F.gelu(a + c), (x, bias.to(dtype)))
            with self.subTest(dtype=dtype, what="per-row scalars widened across packed rows"):
                # (C <= g: the scalars are copied across their rows; a row of
                # 64 keeps interleaving.)
                s = randn(8192, 16, 1, seed=5).to(dtype)
                self.check(lambda a, c: (torch.where(a > c, a * c, c - a), c * 2), (randn(8192, 16, 2).to(dtype), s))
                self.check(lambda a, c: a / (c.abs() + 1), (randn(1024, 2, 64).to(dtype), randn(1024, 2, 1).to(dtype)))
            with self.subTest(dtype=dtype, what="slice of wider rows"):
                w = randn(4096, 2, 5).to(dtype)
                self.check(lambda a, b: a[:, :, 1:3] * b, (w, x))
            with self.subTest(dtype=dtype, what="transposed outer dims"):
                t = randn(2, 4096, 2).to(dtype)
                self.check(lambda a, b: a.transpose(0, 1) - b, (t, x))
            with self.subTest(dtype=dtype, what="returned views"):
                self.check(lambda a: ((a * 3).reshape(8192, 2), (a - 1).transpose(1, 2), (a + 2).permute(1, 0, 2)),
                           (x,))
            with self.subTest(dtype=dtype, what="unit dims"):
                u = randn(1024, 1, 4, 1, 2).to(dtype)
                b = randn(4, 1, 2, seed=2).to(dtype)
                self.check(lambda a, c: torch.where(a > 0, a * c, c), (u, b))
            with self.subTest(dtype=dtype, what="odd outer dims"):
                o = randn(7, 301, 3, 3).to(dtype)
                self.check(lambda a, c: a * c + 1, (o, randn(3, 3, seed=4).to(dtype)))
        ids = torch.randint(0, 100, (2048, 4, 2), generator=torch.Generator().manual_seed(0)).to(torch.uint8)
        mask = torch.rand(2048, 4, 2, generator=torch.Generator().manual_seed(1)) > 0.5
        self.check(lambda i, m: (torch.where(m, i * 2, i), m & (i > 50)), (ids, mask))

    def test_permutes_of_tiny_blocks(self):
        # Copies that transpose blocks of a few elements (planPermuteCopy):
        # several blocks share a partition, loaded in the input's order and
        # copied into the output's along the blocks, so that the loads and
        # stores move long runs. Odd block counts, sliced inputs, a result
        # returned through a reshape, and a wide transpose that keeps the
        # TensorEngine path.
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                self.check(lambda a: a.transpose(-1, -2).contiguous(), (randn(1024, 8, 4, 4).to(dtype),))
                self.check(lambda a: a.transpose(-1, -2).contiguous(), (randn(2048, 8, 8).to(dtype),))
                self.check(lambda a: a.transpose(-1, -2).contiguous(), (randn(4096, 2, 64).to(dtype),))
                self.check(lambda a: a.permute(0, 3, 1, 2).contiguous(), (randn(768, 4, 3, 5).to(dtype),))
                self.check(lambda a: a[:, :, 1:].transpose(1, 2).contiguous(), (randn(3000, 4, 5).to(dtype),))
                self.check(lambda a: a.transpose(1, 2).reshape(-1, 12), (randn(2048, 3, 4).to(dtype),))
                self.check(lambda a: a.transpose(1, 2).contiguous(), (randn(4, 256, 384).to(dtype),))

    def test_permutes_with_inner_dims_on_partitions(self):
        # Permute copies whose partitions take output dims that are not its
        # outermost (choosePermuteSplit): a strided convolution's phases
        # (N x C on the partitions, each plane loaded whole), pixel_unshuffle
        # and space-to-depth (channels and block rows on the partitions),
        # the last dim moved to the front (the output's inner dim on the
        # partitions); odd sizes, a sliced and a padded input, a phase
        # permute of a computed value, and a result returned through a
        # reshape.
        def phases(a, s=2):
            n, c, h, w = a.shape
            return a.view(n, c, h // s, s, w // s, s).permute(3, 5, 0, 1, 2, 4).contiguous()

        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                self.check(phases, (randn(2, 64, 30, 30).to(dtype),))
                self.check(lambda a: phases(F.pad(a, (1, 1, 1, 1))), (randn(3, 48, 26, 26).to(dtype),))
                self.check(lambda a: phases(a * 2 + 1, 3), (randn(2, 40, 27, 21).to(dtype),))
                self.check(lambda a: F.pixel_unshuffle(a, 2), (randn(4, 32, 64, 64).to(dtype),))
                self.check(lambda a: F.pixel_unshuffle(a[..., 1:], 3), (randn(2, 16, 36, 37).to(dtype),))
                self.check(lambda a: a.view(2, 32, 16, 4, 16, 4).permute(0, 3, 5, 1, 2, 4).reshape(2, 512, 16, 16),
                           (randn(2, 32, 64, 64).to(dtype),))
                self.check(lambda a: a.permute(4, 0, 1, 2, 3).contiguous(), (randn(16, 8, 7, 12, 32).to(dtype),))
                self.check(lambda a: a.t().contiguous(), (randn(16384, 8).to(dtype),))
                self.check(lambda a: a.permute(2, 0, 3, 1).reshape(50, -1), (randn(24, 50, 50, 3).to(dtype),))

    def test_last_dim_moved_to_front(self):
        # A copy whose rows are the input's contiguous dim moved outermost
        # takes fewer than 128 rows where that keeps its rows adjacent in the
        # input (mergeCopiedColumns): [16, 8, 7, 12, 32] with the last dim
        # first copies [32 x 10752] with transposed loads, not [512 x 672]
        # rows of elements 32 apart. Also under a slice, and a case that
        # keeps 128 rows (the moved dim is not the innermost).
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                self.check(lambda a: a.permute(4, 0, 1, 2, 3).contiguous(), (randn(16, 8, 7, 12, 32).to(dtype),))
                self.check(lambda a: a.permute(3, 0, 1, 2).contiguous(), (randn(6, 50, 9, 3).to(dtype),))
                self.check(lambda a: a[:, 1:].permute(2, 0, 1).contiguous(), (randn(300, 41, 20).to(dtype),))
                self.check(lambda a: a.permute(2, 0, 1, 3).contiguous(), (randn(16, 30, 12, 8).to(dtype),))

    def test_tiny_transposed_blocks_copied_out(self):
        # An elementwise op reading a view across its input's contiguous dim
        # in blocks of a few elements reads it from a permute copy
        # (ncc-form-kernels' copiesTinyTransposedBlocks): graph inputs and
        # computed values, a view two ops read, one a matmul also reads, a
        # broadcast operand beside it, and wide blocks that stay in place.
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                x = randn(4096, 2, 64).to(dtype)
                y = randn(4096, 64, 2, seed=1).to(dtype)
                self.check(lambda a, b: a.transpose(-1, -2) + b, (x, y))
                self.check(lambda a, b: F.gelu(b.transpose(-1, -2)) * a, (x, y))
                self.check(lambda a: (a.transpose(1, 2) * 2, torch.exp(a.transpose(1, 2))), (x,))
                self.check(lambda a, b: torch.where(b > 0, torch.exp(a).transpose(1, 2), b), (x, y))
                w = randn(256, 16, 48).to(dtype)
                for bias in (torch.zeros(16), torch.ones(16), randn(16, seed=2)):
                    self.check(lambda a, c: a.transpose(1, 2) + c, (w, bias.to(dtype)))
                m = randn(64, 8).to(dtype)
                self.check(lambda a, b: (a.transpose(1, 2) + 1, a.transpose(1, 2).reshape(-1, 16) @ b.t()),
                           (randn(512, 8, 2).to(dtype), randn(4, 16, seed=3).to(dtype)))
                self.check(lambda a: a.transpose(0, 1) * 3, (m,))
                self.check(lambda a: a.transpose(1, 2) - 1, (randn(4, 256, 384).to(dtype),))

    def test_interleaved_rows(self):
        # Short rows assembled by writing each piece along a step: values
        # stacked along a new last dim and flattened (computed pieces,
        # stepped slices as in GPT-J's rotate_every_two, constants equal or
        # not, pieces of different widths), and a last dim of 1 broadcast
        # and merged (repeat_interleave, nearest upsampling), beside the
        # cases that keep the general lowering (broadcast past 64 copies,
        # integer values).
        def rotate_every_two(a):
            return torch.stack((-a[..., 1::2], a[..., ::2]), -1).flatten(-2)

        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                x = randn(4, 512, 64).to(dtype)
                y = randn(4, 512, 64, seed=1).to(dtype)
                self.check(lambda a, b: torch.stack([a, b], -1).flatten(-2), (x, y))
                self.check(lambda a, b: torch.stack([a.exp(), b, a * b], 3).reshape(4, 512, 192), (x, y))
                self.check(lambda a: torch.stack([a, torch.zeros_like(a)], -1).flatten(-2), (x,))
                self.check(lambda a: torch.stack([torch.ones_like(a), a, torch.full_like(a, -2.5)], -1).flatten(-2),
                           (x,))
                pairs = randn(4, 512, 128, seed=7).to(dtype)
                self.check(lambda a, b: torch.cat([a.unsqueeze(-1), b.reshape(4, 512, 64, 2)], -1).flatten(-2),
                           (x, pairs))
                self.check(rotate_every_two, (x,))
                q = randn(1, 256, 4, 64, seed=2).to(dtype)
                cos, sin = randn(1, 256, 1, 64, seed=3).to(dtype), randn(1, 256, 1, 64, seed=4).to(dtype)
                self.check(lambda a, c, s: a * c + rotate_every_two(a) * s, (q, cos, sin))
                self.check(lambda a: a.repeat_interleave(3, dim=-1), (x,))
                self.check(lambda a: a.repeat_interleave(2, dim=-1) * 2 + 1, (torch.ones(2048, 48, dtype=dtype),))
                img = randn(2, 16, 28, 28, seed=5).to(dtype)
                self.check(lambda a: F.interpolate(a, scale_factor=2, mode="nearest"), (img,))
                self.check(lambda a: F.interpolate(a, scale_factor=3, mode="nearest"), (img[:, :, :10, :10],))
                self.check(lambda a: F.interpolate(a, scale_factor=4, mode="nearest"), (randn(4, 32, 500, seed=6).to(dtype),))
                self.check(lambda a: a.unsqueeze(-1).expand(2048, 4, 100).reshape(2048, 400), (randn(2048, 4).to(dtype),))
        ids = torch.arange(4096 * 8, dtype=torch.int64).reshape(4096, 8) % 1000 - 500
        self.check(lambda a: a.repeat_interleave(2, dim=-1), (ids,))
        self.check(lambda a: torch.stack([a, -a], -1).flatten(-2), (ids.to(torch.int32),))

    def test_short_rows_widened_over_leading_dims(self):
        # Short rows beside a value that varies along a short middle dim
        # (which neither merges the dims nor packs along them): the leading
        # dims move onto the columns, and that value loads compact and is
        # widened on chip (repeats inside and outside its varying dim),
        # once for the kernel or per row tile where it also varies along
        # the rows; a transposed input keeps the old lowering.
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                x = randn(32768, 2, 2).to(dtype)
                b = randn(1, 2, 1, seed=1).to(dtype)
                self.check(lambda a, s: a * s, (x, b))
                self.check(lambda a, s: a * s + 1, (x, torch.ones(1, 2, 1, dtype=dtype)))
                self.check(lambda a, s: a + s, (x, torch.zeros(1, 2, 1, dtype=dtype)))
                self.check(lambda a, s: a * s, (x, torch.tensor([float("inf"), float("nan")]).reshape(1, 2, 1).to(dtype)))
                y = randn(64, 64, 3, 3, seed=2).to(dtype)
                self.check(lambda a, s, t: torch.where(a > 0, a * s, t),
                           (y, randn(1, 1, 3, 1, seed=3).to(dtype), randn(1, 1, 1, 3, seed=4).to(dtype)))
                self.check(lambda a, s: torch.relu(a * s), (y, randn(64, 1, 3, 1, seed=5).to(dtype)))
                z = randn(1024, 8, 4, 4, seed=6).to(dtype)
                self.check(lambda a, s, t: a * s + t,
                           (z, randn(1, 1, 4, 1, seed=7).to(dtype), randn(1, 8, 1, 1, seed=8).to(dtype)))
                v = randn(2048, 3, 2, 2, seed=13).to(dtype)
                self.check(lambda a, s: a * s, (v, randn(1, 1, 2, 1, seed=14).to(dtype)))
                self.check(lambda a, s: a * s[:, :, ::2, :], (v, randn(1, 1, 4, 1, seed=15).to(dtype)))
                self.check(lambda a, s: a + s.transpose(1, 2), (v, randn(1, 2, 3, 1, seed=16).to(dtype)))
                w = randn(8192, 16, 2, seed=9).to(dtype)
                self.check(lambda a, s: F.silu(a) * s, (w, randn(1, 16, 1, seed=10).to(dtype)))
                self.check(lambda a, s: a.transpose(1, 2) * s, (w, randn(1, 1, 16, seed=11).to(dtype)))
                self.check(lambda a, s: (a * s).transpose(0, 1), (w, randn(1, 16, 1, seed=12).to(dtype)))
        ids = torch.arange(32768 * 4, dtype=torch.int64).reshape(32768, 2, 2) % 1000 - 500
        self.check(lambda a, s: a * s, (ids, torch.tensor([3, -2]).reshape(1, 2, 1)))
        self.check(lambda a, s: torch.where(s, a, -a), (ids.to(torch.int32), torch.tensor([True, False]).reshape(1, 2, 1)))

    def test_kernels_that_move_few_bytes(self):
        # Kernels under 800 KiB in all (LowerToIsa.cpp, movesFewBytes): short
        # rows pack or widen into one row tile and a partial one, and each
        # transfer splits by partitions over the idle queues. Odd row counts
        # (a partial last tile, pieces of unequal partitions), broadcasts
        # along each dim, a transposed and a sliced input, reductions and a
        # softmax over short rows, one-byte integers, and shapes on either
        # side of the threshold.
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                x = randn(300, 7, 3).to(dtype)
                self.check(lambda a: torch.sigmoid(a) * 2 + 1, (x,))
                self.check(lambda a, s: a * s, (x, randn(300, 1, 1, seed=1).to(dtype)))
                self.check(lambda a, s: a - s, (x, randn(1, 7, 1, seed=2).to(dtype)))
                self.check(lambda a, s: torch.where(a > 0, a, s), (x, randn(1, 1, 3, seed=3).to(dtype)))
                self.check(lambda a: a.transpose(0, 1) + 1, (x,))
                self.check(lambda a: a[:, 1:6, :] * 3, (x,))
                self.check(lambda a: (a.softmax(-1), a.sum(1), a.amax(0)), (x,))
                y = randn(8, 256, 49, seed=4).to(dtype)
                self.check(lambda a, b: F.gelu(a + b), (y, torch.zeros(49, dtype=dtype)))
                self.check(lambda a, b: a * b, (y, torch.ones(8, 1, 1, dtype=dtype)))
                self.check(lambda a: F.layer_norm(a, (49,)), (y,))
                z = randn(4099, 5, seed=5).to(dtype)
                self.check(lambda a: (a * a).mean(-1, keepdim=True) + a, (z,))
                for rows in (1599, 1601, 3200):  # 800 KiB in all at 1600 rows of 128 f32 in and out
                    w = randn(rows, 128, seed=6).to(dtype)
                    self.check(lambda a: torch.tanh(a) - a, (w,))
        ids = (torch.arange(900 * 13, dtype=torch.int64).reshape(900, 13) % 250).to(torch.uint8)
        self.check(lambda a: a + 3, (ids,))
        self.check(lambda a: (a > 100) & (a < 200), (ids,))


if __name__ == "__main__":
    common.main()
