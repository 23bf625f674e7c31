#!/usr/bin/env python3
"""Math operators, scans, matrix-vector forms and losses that the importer builds
from other ops (compiler/ComposedMath.cpp), in the code that uses them: a
classifier's training losses (cross entropy with weights, ignored labels and
label smoothing, NLL over images, BCE with logits and pos_weight, MSE, smooth L1,
Huber), gated and parametric activations (GLU, PReLU, log-sigmoid, threshold),
elementwise functions at their edges (zeros of both signs, infinities, NaN,
large magnitudes), the error and gamma functions into their tails, products and scans, diagonals, LSTM and GRU layers, and the
exporter's one_hot, repeat_interleave and label-smoothed cross entropy. Each is compiled at -O0 and -O2, run,
and compared with PyTorch eager, in f32 and bf16 where eager has the bf16
kernel; integer results must match exactly.
"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e_common as common  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

DTYPES = common.FLOAT_DTYPES
randn = common.seeded_randn


def with_edges(x):
    """x with signed zeros, infinities, a NaN and large magnitudes in its first row."""
    x = x.clone()
    edges = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e30, -1e30, 1e-30, 100.0, -100.0]
    x.view(-1)[:len(edges)] = torch.tensor(edges)
    return x


class GatedActivation(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 32)
        self.act = nn.PReLU(8)
        self.conv = nn.Conv1d(8, 8, 3, padding=1)

    def forward(self, x):
        h = F.glu(self.proj(x), -1)                       # [B, 8, 16]
        h = self.act(self.conv(h))                        # per-channel PReLU
        return F.logsigmoid(h), nn.PReLU()(h)


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(12, 16, num_layers=2, batch_first=True)
        self.gru = nn.GRU(16, 8, batch_first=True, bidirectional=True)

    def forward(self, x):
        h, (hn, cn) = self.lstm(x)
        g, gn = self.gru(h)
        return g, hn, cn, gn


class MathAndLosses(common.ComparedWithEager):
    def test_reductions_with_a_dtype(self):
        # sum/mean(dtype=...): eager converts the input to that dtype, then reduces (a bf16
        # activation summed in f32; a bool mask counted as int32; floats truncated to int64).
        x = randn(6, 300, seed=50)
        self.check(lambda a: (torch.sum(a, dim=-1, dtype=torch.float32), a.mean(dtype=torch.float32),
                              a.mean((0, 1), keepdim=True, dtype=torch.float32)), (x.bfloat16(),))
        self.check(lambda a: ((a > 0.3).sum(-1, dtype=torch.int32), (a * 5).sum(-1, dtype=torch.int64),
                              a.sum(0, dtype=torch.bfloat16)), (x,))
        # Scans and products with an integer dtype truncate a float input first (these
        # summed and multiplied the floats, then truncated: silently wrong).
        y = randn(4, 6, seed=51) * 3
        self.check(lambda a: (a.cumsum(-1, dtype=torch.int64), a.prod(-1, dtype=torch.int64),
                              torch.cumprod(a, -1, dtype=torch.int32), a.bfloat16().cumsum(0, dtype=torch.float32)),
                   (y,))

    def test_classification_losses(self):
        g = torch.Generator().manual_seed(3)
        logits, labels = randn(6, 5, seed=1) * 3, torch.randint(0, 5, (6,), generator=g)
        labels[2] = -100  # ignored
        weight = torch.rand(5, generator=g) + 0.5
        image, pixels = randn(2, 4, 3, 5, seed=2), torch.randint(0, 4, (2, 3, 5), generator=g)
        pixels[0, 1, 2] = 3
        for dtype in DTYPES:
            x, w, im = logits.to(dtype), weight.to(dtype), image.to(dtype)
            self.check(lambda a, y, c: (F.cross_entropy(a, y), F.cross_entropy(a, y, weight=c),
                                        F.cross_entropy(a, y, reduction="sum"),
                                        F.cross_entropy(a, y, reduction="none"),
                                        F.nll_loss(F.log_softmax(a, -1), y, weight=c, reduction="none"),
                                        F.cross_entropy(a, y, label_smoothing=0.1),
                                        F.cross_entropy(a, y, weight=c, label_smoothing=0.2, reduction="none")),
                       (x, labels, w))
            self.check(lambda a, y: (F.cross_entropy(a, y), F.nll_loss(a.log_softmax(1), y, ignore_index=3),
                                     F.cross_entropy(a, y, ignore_index=1, label_smoothing=0.3)),
                       (im, pixels))

    def test_all_labels_ignored(self):
        """mean over no counted labels is 0 / 0 = NaN, as eager gives."""
        labels = torch.full((4,), -100, dtype=torch.int64)
        self.check(lambda a, y: F.cross_entropy(a, y), (randn(4, 3, seed=3), labels))

    def test_regression_and_binary_losses(self):
        x, y = randn(4, 10, seed=4), randn(4, 10, seed=5)
        pw = torch.rand(10, generator=torch.Generator().manual_seed(6)) + 0.5
        for dtype in DTYPES:  # (eager 1.13 has no bf16 mse_loss on the CPU: the rest only)
            a, b, p = x.to(dtype), y.to(dtype), pw.to(dtype)
            if dtype == torch.bfloat16:
                self.check(lambda u, v, q: (F.smooth_l1_loss(u, v), F.huber_loss(u, v, delta=0.7),
                                            F.binary_cross_entropy_with_logits(u, v.sigmoid(), pos_weight=q)),
                           (a, b, p))
                continue
            self.check(lambda u, v, q: (F.mse_loss(u, v), F.mse_loss(u, v, reduction="none"),
                                        F.smooth_l1_loss(u, v), F.smooth_l1_loss(u, v, beta=0.5),
                                        F.smooth_l1_loss(u, v, beta=0.0), F.huber_loss(u, v, delta=0.7),
                                        F.l1_loss(u, v, reduction="sum"),
                                        F.binary_cross_entropy_with_logits(u * 10, v.sigmoid()),
                                        F.binary_cross_entropy_with_logits(u, (v > 0).to(u.dtype), pos_weight=q,
                                                                           reduction="none"),
                                        F.binary_cross_entropy(u.sigmoid(), v.sigmoid(), weight=q)),
                       (a, b, p))
        # probabilities of exactly 0 and 1: the logs are clamped at -100
        probs = torch.tensor([[0.0, 1.0, 0.5, 1.0]])
        self.check(lambda u, v: F.binary_cross_entropy(u, v, reduction="none"),
                   (probs, torch.tensor([[1.0, 0.0, 1.0, 1.0]])))

    def test_gated_and_parametric_activations(self):
        self.models(GatedActivation, (randn(2, 8, 16, seed=7),))
        # threshold on inputs (a computed value one ulp from the threshold would flip)
        x = randn(3, 20, seed=21)
        x[0, :3] = torch.tensor([0.1, -0.0, float("nan")])
        for dtype in DTYPES:
            self.check(lambda a: (F.threshold(a, 0.1, -2.0), F.threshold(a, -0.5, 7.0), F.relu6(a * 4)),
                       (x.to(dtype),))

    def test_elementwise_functions_at_their_edges(self):
        x = with_edges(randn(4, 24, seed=8) * 3)
        y = with_edges(randn(4, 24, seed=9)).flip(1)
        self.check(lambda a, b: (torch.log2(a.abs()), torch.log10(a.abs()), torch.exp2(a), torch.sinh(a),
                                 torch.cosh(a), torch.asinh(a), torch.acosh(a.abs() + 1), torch.atanh(a.tanh()),
                                 torch.tan(a), torch.frac(a), torch.deg2rad(a), torch.rad2deg(a), torch.signbit(a),
                                 torch.xlogy(a.abs(), b.abs()), torch.xlogy(a, 2.0), torch.hypot(a, b),
                                 torch.copysign(a, b), torch.copysign(a, -1.0), torch.fmax(a, b), torch.fmin(a, b),
                                 torch.heaviside(a, b), torch.logit(a.sigmoid()), torch.logit(a, eps=1e-3)),
                   (x, y))
        for dtype in (torch.bfloat16,):
            a = randn(4, 24, seed=10).to(dtype) * 2
            self.check(lambda u: (torch.log2(u.abs()), torch.exp2(u), torch.sinh(u), torch.cosh(u), torch.asinh(u),
                                  torch.frac(u * 10), torch.hypot(u, u.flip(0)), torch.logit(u.sigmoid())), (a,))
        # exact where eager is: exp2 of integers, log2 of powers of two
        ints = torch.arange(-20, 20, dtype=torch.float32)
        self.check(lambda a: (torch.exp2(a), torch.log2(torch.exp2(a)).round()), (ints,))

    def test_error_and_gamma_functions(self):
        # erfc, erfcx, ndtr and log_ndtr far into their tails, lgamma and
        # digamma across their poles and reflections, mvlgamma; against eager
        # in f32 and bf16, then erfc's and log_ndtr's tails element by element
        # against float64 (1 - erf(x) would be 0 from x = 4 on).
        x = with_edges(torch.cat([torch.linspace(-9, 9, 361), torch.linspace(-30.5, 40, 142)]))
        fns = lambda a: (torch.special.erfc(a), torch.special.erfcx(a.clamp(min=-9)), torch.special.ndtr(a),
                         torch.special.log_ndtr(a), torch.lgamma(a), torch.digamma(a),
                         torch.mvlgamma(a.abs() + 2, 3))
        self.check(fns, (x,))
        self.check(lambda a: (torch.special.erfc(a), torch.lgamma(a), torch.digamma(a)), (x.to(torch.bfloat16),))
        tail = torch.linspace(0, 9, 91)
        outs, _ = common.export_compile_run(lambda a: (torch.special.erfc(a), torch.special.log_ndtr(-a * 4)),
                                            (tail,), self.tmp, "tails", 2)
        for out, ref in zip(outs, (torch.special.erfc(tail.double()), torch.special.log_ndtr(-tail.double() * 4))):
            rel = (torch.from_numpy(out).double() - ref).abs() / ref.abs()
            self.assertLess(float(rel.max()), 1e-4)

    def test_sign_of_zero_through_casts_and_unit_scales(self):
        # An activation without a bias adds -0.0, which keeps -0.0 (+0.0 turned
        # the -0.0 of a cast, a multiply by one or a negation into +0.0);
        # 1 / x shows the sign. x + 0.0 still gives +0.0, as eager.
        x = torch.tensor([0.0, -0.0, 1.5, -2.0])
        self.check(lambda a: (1 / a.bfloat16().float(), 1 / a.half().float(), 1 / (a * 1.0), 1 / (a + 0.0),
                              1 / (a - 0.0), 1 / -(-a), torch.signbit(a.bfloat16()), torch.signbit(a.float() * 3)),
                   (x,))

    def test_inverse_trigonometric_functions(self):
        # atan is one scalar-engine activation; asin, acos and atan2 are built on it.
        x = with_edges(randn(4, 24, seed=12) * 3)
        y = with_edges(randn(4, 24, seed=13)).flip(1)
        unit = torch.tensor([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 0.9999999, -0.9999999, 1e-30, 1.0000001, -1.5,
                             float("nan"), float("inf"), 0.7071068, -0.2, 1e-4])
        signs = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), 1.0, -1.0])
        grid_y, grid_x = signs.repeat_interleave(6), signs.repeat(6)  # every pair of the six
        self.check(lambda a, b: (torch.atan(a), torch.arctan(b), torch.atan2(a, b), torch.atan2(b, a),
                                 torch.asin(a.tanh()), torch.acos(b.tanh()), torch.arcsin(a), torch.arccos(a)),
                   (x, y))
        self.check(lambda u: (torch.asin(u), torch.acos(u), torch.atan(u), torch.atan2(u, u.flip(0))), (unit,))
        self.check(lambda v, w: (torch.atan2(v, w), torch.atan2(w, v)), (grid_y, grid_x))
        # bf16 in, f32 inside (eager's bf16 kernels compute in f32 too)
        a = randn(4, 24, seed=14).to(torch.bfloat16)
        self.check(lambda u: (torch.atan(u * 4), torch.asin(u.tanh()), torch.acos(u.tanh()), torch.atan2(u, u.flip(1))),
                   (a,))
        # integer inputs give float results
        ints = torch.arange(-6, 6).reshape(3, 4)
        self.check(lambda i: (torch.atan(i), torch.atan2(i, i.flip(0)), torch.asin(i / 6)), (ints,))

    def test_shrinks_and_inference_rrelu(self):
        x = with_edges(randn(4, 24, seed=15))
        x.view(-1)[10:14] = torch.tensor([0.5, -0.5, 0.3, -0.3])  # at the thresholds
        for dtype in DTYPES:
            self.check(lambda a: (F.hardshrink(a), F.softshrink(a, 0.3), F.hardshrink(a, 0.3), F.softshrink(a),
                                  F.rrelu(a), F.rrelu(a, 0.1, 0.9), nn.RReLU().eval()(a)), (x.to(dtype),))

    def test_log_sum_exps_sinc_entropy_and_nan_reductions(self):
        x = with_edges(randn(4, 24, seed=16) * 4)
        y = with_edges(randn(4, 24, seed=17) * 4).flip(1)
        p = randn(4, 24, seed=18).abs()
        p.view(-1)[:4] = torch.tensor([0.0, float("nan"), -1.0, float("inf")])
        for dtype in DTYPES:
            self.check(lambda a, b, q: (torch.logaddexp(a, b), torch.logaddexp2(a, b), torch.sinc(a),
                                        torch.special.entr(q), torch.special.xlog1py(a, q), torch.special.xlog1py(2.0, q),
                                        torch.angle(a), torch.nansum(a, 1), torch.nanmean(a), torch.nansum(a),
                                        a.nan_to_num(0.0, 0.0, 0.0).renorm(2, 0, 5.0), b.renorm(1, 1, 3.0),
                                        F.soft_margin_loss(b.nan_to_num(0.0, 0.0, 0.0), torch.sign(a)),
                                        F.soft_margin_loss(b, torch.sign(a), reduction="none")),
                       (x.to(dtype), y.to(dtype), p.to(dtype)))
        # (eager 1.13 has no bf16 aminmax on the CPU)
        self.check(lambda a: (torch.aminmax(a), torch.aminmax(a, dim=1, keepdim=True), torch.aminmax(a, dim=0)), (x,))
        # equal infinities, and renorm with p = inf and 3
        inf = float("inf")
        e = torch.tensor([inf, -inf, inf, -inf, 0.0, 1e30])
        self.check(lambda a: (torch.logaddexp(a, a.flip(0)), torch.logaddexp(a, a), torch.logaddexp2(a, a)), (e,))
        self.check(lambda a: (a.renorm(inf, 1, 1.0), a.renorm(3, 0, 2.0)), (randn(3, 5, seed=19),))
        self.check(lambda i: (torch.aminmax(i, dim=0), torch.angle(i), torch.sinc(i)), (torch.arange(-3, 3),))

    def test_multi_margin_loss_and_affine_grids(self):
        x = randn(5, 7, seed=20)
        x[1, 2] = float("nan")  # a NaN margin counts nothing, as in eager's loop
        labels, w = torch.tensor([0, 6, 3, 3, 1]), torch.rand(7, generator=torch.Generator().manual_seed(3))
        # (eager 1.13 has no bf16 multi_margin_loss on the CPU)
        self.check(lambda a, t, q: (F.multi_margin_loss(a, t), F.multi_margin_loss(a, t, p=2, margin=0.5),
                                    F.multi_margin_loss(a, t, weight=q, reduction="sum"),
                                    F.multi_margin_loss(a, t, reduction="none"), F.multi_margin_loss(a[0], t[:1]),
                                    F.multi_margin_loss(a[2, 0], t[0])), (x, labels, w))
        # (nor bf16 affine_grid)
        theta = randn(3, 2, 3, seed=21)
        self.check(lambda t: (F.affine_grid(t, [3, 1, 4, 5], align_corners=False),
                              F.affine_grid(t, [3, 2, 7, 1], align_corners=True), F.affine_grid(t, [3, 1, 1, 6])),
                   (theta,))

    def test_products_and_scans(self):
        x = randn(3, 9, seed=11) * 1.5
        x[1, 4] = 0.0
        x[2, 2] = float("nan")
        ties = torch.tensor([[1.0, 3.0, 3.0, 2.0, 3.0, float("-inf")], [float("nan"), 1.0, 5.0, float("nan"), 0.0, 9.0]])
        self.check(lambda u: (u.prod(-1), u.prod(0, keepdim=True), u.prod(), u.cumprod(1), u.cumprod(0),
                              torch.logcumsumexp(u, 1), torch.cummax(u, 1), torch.cummin(u, 0)), (x,))
        # eager 1.13 has no bf16 prod on the CPU
        self.check(lambda u: (u.cumprod(1), torch.logcumsumexp(u, 1), torch.cummax(u, 1)), (x.to(torch.bfloat16),))
        self.check(lambda u: (torch.cummax(u, 1), torch.cummin(u, 1), torch.logcumsumexp(u, 1)), (ties,))
        counts = torch.randint(0, 4, (3, 5), generator=torch.Generator().manual_seed(12))
        self.check(lambda c: (c.prod(-1), c.cumprod(1), torch.count_nonzero(c, 1), torch.count_nonzero(c),
                              torch.cummax(c, 0)), (counts,))

    def test_scans_over_long_rows_and_inner_dims(self):
        """Scans (cumsum, cumprod, logcumsumexp) over rows longer than one block of 4096
        (scanned block by block, then each block combined with the blocks before it: 4097
        and 10000 are padded at the end, 8193 is three whole blocks), over inner and
        leading dims (moved last and back), and over a value computed before them (the
        scan's steps share that value's kernel); a NaN and -inf in a later block reach
        only the results after them, and integer position ids stay exact."""
        long = randn(3, 10000, seed=61)
        long[1, 9000] = float("nan")
        long[2, 5000] = float("-inf")
        near_one = 1.0 + 0.001 * randn(2, 8193, seed=62)
        for dtype in DTYPES:
            self.check(lambda a, b: (a.cumsum(-1), torch.logcumsumexp(a, 1), a[:, :4097].cumsum(1),
                                     (a[:2, :6000] * 2 + 1).cumsum(-1), b.cumsum(-1)),
                       (long.to(dtype), near_one.to(dtype)))
        # (f32 only: eager's bf16 cumprod rounds every partial product)
        self.check(lambda b: (b.cumprod(-1), b[:, :4097].cumprod(1)), (near_one,))
        inner = randn(4, 300, 6, seed=63)
        inner[1, 200, 2] = float("nan")
        for dtype in DTYPES:
            self.check(lambda a, c: (a.cumsum(1), a.cumsum(0), torch.logcumsumexp(a, 1), c.cumsum(0),
                                     torch.logcumsumexp(c, 0)),
                       (inner.to(dtype), randn(5000, 3, seed=64).to(dtype)))
        self.check(lambda a: (a.cumprod(1), a.cumprod(0)), (1.0 + 0.01 * inner,))
        mask = torch.rand(2, 9000, generator=torch.Generator().manual_seed(65)) > 0.3
        self.check(lambda m: (m.long().cumsum(-1) - 1, m.int().cumsum(0)), (mask,))
        # A scan of one value per row broadcast along it (opinfo's masked_scatter with a
        # 0-d mask): the kernel holds that value once per row, and each step's slice of it
        # is the value across the columns.
        for flag in (True, False):
            self.check(lambda q, m, src: torch.masked_scatter(q, m, src),
                       (randn(5, 5, seed=67), torch.tensor(flag), randn(5, 5, seed=68)))
        self.check(lambda m, q: (m.expand(3, 500).long().cumsum(-1), m.expand(3, 500).float().cumsum(-1) * q),
                   (torch.tensor([[True], [False], [True]]), randn(3, 500, seed=69)))

    def test_scans_of_few_rows(self):
        """Scans over fewer rows than partitions are cut into blocks (of 512 elements or
        more) until the blocks' rows fill them: one row of 32000 into 62 blocks, two of
        3000 into 5 each, eight of 32000 into 16 each. A NaN, an -inf and a +inf in later
        blocks reach only the results after them; integer counts stay exact."""
        one = randn(32000, seed=70)
        one[20000] = float("-inf")
        two = randn(2, 3000, seed=71)
        two[0, 2500] = float("nan")
        two[1, 1000] = float("inf")
        eight = randn(8, 32000, seed=72)
        for dtype in DTYPES:
            self.check(lambda a, b, c: (a.cumsum(0), torch.logcumsumexp(b, 1), b.cumsum(-1), c.cumsum(1)),
                       (one.to(dtype), two.to(dtype), eight.to(dtype)))
        self.check(lambda b: b.cumprod(-1), (1.0 + 0.001 * randn(2, 3000, seed=73),))
        mask = torch.rand(3, 20000, generator=torch.Generator().manual_seed(74)) > 0.5
        self.check(lambda m: m.long().cumsum(-1), (mask,))

    def test_diagonals_and_matrix_vector_forms(self):
        m, v, w = randn(6, 6, seed=13), randn(6, seed=14), randn(5, seed=15)
        for dtype in DTYPES:
            a, b, c = m.to(dtype), v.to(dtype), w.to(dtype)
            self.check(lambda p, q, r: (torch.diagonal(p), torch.diagonal(p, 2), torch.diagonal(p, -3),
                                        torch.diag(p, 1), torch.diag(q), torch.diag(q, -2),
                                        torch.diag_embed(q[:3]), torch.addmv(q, p, q, beta=0.5, alpha=2.0),
                                        torch.addmv(q, p, q, beta=0.0), torch.mv(p, q),
                                        torch.addr(p[:, :5], q, r, alpha=0.5), torch.outer(q, r)),
                       (a, b, c))
        batch = randn(2, 3, 4, 5, seed=16)
        self.check(lambda p: (p.diagonal(0, 1, 3), p.diagonal(1, -1, -2), torch.trace(p[0, 0]),
                              torch.diag_embed(p[0], 1, 0, 2)), (batch,))  # (no bf16 trace in eager)

    def test_pairwise_distances(self):
        """cdist for p = 2 (eager's mm form above 25 rows, _euclidean_dist; ours is the
        direct one), 1, inf, 0 and 3, batched, and a nearest-codebook lookup (argmin).
        (Eager 1.13 has no bf16 cdist on the CPU.)"""
        x, y, codes = randn(2, 30, 8, seed=22), randn(2, 27, 8, seed=23), randn(12, 8, seed=24)
        self.check(lambda a, b, e: (torch.cdist(a, b), torch.cdist(a[0, :5], b[0, :4]), torch.cdist(a, b, p=1),
                                    torch.cdist(a[0], e, p=float("inf")), torch.cdist(a[1], e, p=3.0),
                                    torch.cdist(a[0], e, p=0.0), torch.cdist(a[0], e).argmin(-1)),
                   (x, y, codes))
        # pdist: every pair i < j of the rows (one pair repeated: distance 0)
        codes[5] = codes[9]
        self.check(lambda e: (F.pdist(e), F.pdist(e, 1), F.pdist(e, 0), F.pdist(e, float("inf")), F.pdist(e, 3.5),
                              F.pdist(e[:2])), (codes,))

    def test_statistics_and_ranges(self):
        x = randn(4, 7, seed=17)
        for dtype in DTYPES:
            self.check(lambda a: (torch.std_mean(a, 1), torch.std_mean(a, (0, 1), unbiased=False),
                                  a * torch.linspace(-1, 1, 7, dtype=a.dtype),
                                  a[0] + torch.linspace(0, 3, 7, dtype=a.dtype)), (x.to(dtype),))
        self.check(lambda a: (a[:, :5] + torch.linspace(2, 10, 5), torch.linspace(0, 10, 6, dtype=torch.int64)),
                   (x,))

    def test_recurrent_layers(self):
        """nn.LSTM (2 layers) and a bidirectional nn.GRU: their cells use unsafe_split."""
        self.models(Recurrent, (randn(2, 5, 12, seed=18),))

    def test_one_hot_and_repeat_interleave(self):
        """Both read values in eager (one_hot its indices' maximum, repeat_interleave its
        repeats); the exporter replaces them while tracing."""
        ids = torch.randint(0, 6, (3, 4), generator=torch.Generator().manual_seed(19))
        table = randn(8, 2, seed=1)
        self.check(lambda i: (F.one_hot(i, 6), F.one_hot(i, num_classes=8).float() @ table), (ids,))
        kv = randn(2, 2, 5, 4, seed=20)  # grouped-query attention: 2 key/value heads for 6 query heads
        for dtype in DTYPES:
            self.check(lambda k: (k.repeat_interleave(3, dim=1), torch.repeat_interleave(k, 2, -1),
                                  torch.repeat_interleave(k[0, 0, 0], 2)), (kv.to(dtype),))


if __name__ == "__main__":
    unittest.main()
