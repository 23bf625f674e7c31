#!/usr/bin/env python3
"""Matmul kernels whose operand slices are kept across output tiles
(docs/compiler.md, "Views and matmuls"): a row tile's stationary slices are
reused by its column tiles; kernels of plain matmuls run column tiles in
blocks and keep a block's moving slices for every row tile; a kernel whose
kept slices would not fit SBUF is lowered without them. Each case is compiled
at -O2, run, and compared with PyTorch eager (tolerances as in
test_models.py: f32 1e-4, bf16 2^-5, relative to max |eager|), and its
timing-only NTFF must equal a full run's.
"""
import os
import re
import subprocess
import sys
import tempfile
import shutil
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e_common as common  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from neuroncc import toolchain  # noqa: E402

TOL = {torch.float32: common.F32_TOLERANCE, torch.bfloat16: 2.0 ** -5}


def randn(*shape, dtype=torch.float32, seed=0, scale=1.0):
    return (torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * scale).to(dtype)


def zeros_with(shape, index, value):
    """Zeros of `shape` but `value` (an inf or a NaN) at `index`."""
    t = torch.zeros(shape)
    t[index] = value
    return t


class MatmulTiling(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="neuroncc-mmtiling-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def check(self, fn, inputs):
        ref = fn(*inputs)
        name = self.id().split(".")[-1]
        outs, _ = common.export_compile_run(fn, inputs, self.tmp, name, 2)
        self.assertEqual(len(outs), 1)
        common.compare(outs[0], ref, TOL[ref.dtype])
        self.assertTrue(toolchain.timing_only_matches(os.path.join(self.tmp, name + ".neff"), self.tmp))

    def test_narrow_moving_kept_across_row_tiles(self):
        # One column tile (N <= 512) and several row tiles: the moving
        # slices are loaded once and kept for every row tile. A row-major
        # weight (odd K and N), an nn.Linear weight read in rows (transposed
        # by the first row tile) with a bias, and a bmm (slices kept per
        # batch).
        for dtype in (torch.float32, torch.bfloat16):
            with self.subTest(dtype=dtype, case="mm"):
                self.check(lambda x, w: x @ w, (randn(1000, 700, dtype=dtype), randn(700, 48, dtype=dtype, seed=1,
                                                                                      scale=0.05)))
            with self.subTest(dtype=dtype, case="linear"):
                self.check(lambda x, w, b: F.linear(x, w, b),
                           (randn(600, 256, dtype=dtype), randn(300, 256, dtype=dtype, seed=1, scale=0.07),
                            randn(300, dtype=dtype, seed=2)))
            with self.subTest(dtype=dtype, case="bmm"):
                self.check(lambda a, b: torch.bmm(a, b), (randn(3, 300, 200, dtype=dtype), randn(3, 200, 40, dtype=dtype,
                                                                                                  seed=1, scale=0.1)))

    def test_streamed_weights(self):
        # A weight read for few rows (M <= 128) streams: pieces of up to
        # 512 KiB and slices prepared 96 KiB per partition ahead. 64 MiB of
        # bf16 for 16 rows (whole panels), an f32 weight of 3000 x 5000 with
        # a bias for 100 rows (a last k slice of 56 rows, a partial last
        # column tile), and a single row against 8 MiB of f32 (128 KiB
        # pieces, the clamp's low end).
        cases = [(randn(16, 4096, dtype=torch.bfloat16), randn(4096, 8192, dtype=torch.bfloat16, seed=1, scale=0.02),
                  None),
                 (randn(100, 3000), randn(3000, 5000, seed=1, scale=0.02), randn(5000, seed=2)),
                 (randn(1, 2048), randn(2048, 1024, seed=1, scale=0.02), None)]
        for x, w, b in cases:
            with self.subTest(shape=(tuple(x.shape), tuple(w.shape))):
                if b is None:
                    self.check(lambda x, w: x @ w, (x, w))
                else:
                    self.check(lambda x, w, b: torch.addmm(b, x, w), (x, w, b))

    def test_linear_transposed_weight_bias_relu(self):
        # 3 row tiles (300), 5 column tiles (600 = 4 x 128 + 88), 2 k slices.
        for dtype in (torch.float32, torch.bfloat16):
            with self.subTest(dtype=dtype):
                x, w, b = randn(300, 200, dtype=dtype), randn(600, 200, dtype=dtype, seed=1, scale=0.07), \
                    randn(600, dtype=dtype, seed=2)
                self.check(lambda x, w, b: F.relu(F.linear(x, w, b)), (x, w, b))

    def test_linear_bias_on_3d_input_is_one_kernel(self):
        # nn.Linear with a bias on [batch, tokens, features] exports as mm on the flattened
        # rows, a reshape back and the bias added: the add joins the matmul's epilogue (its
        # bias a row of the columns under either leading shape). Zero bias (as initialised
        # by some models) and nn.Linear's own; 2 sequences of 70 tokens.
        for dtype in (torch.float32, torch.bfloat16):
            for zero in (True, False):
                with self.subTest(dtype=dtype, zero_bias=zero):
                    torch.manual_seed(0)
                    layer = torch.nn.Linear(128, 384)
                    if zero:
                        torch.nn.init.zeros_(layer.bias)
                    layer = layer.to(dtype).eval()
                    self.check(layer, (randn(2, 70, 128, dtype=dtype),))
                    neff = os.path.join(self.tmp, self.id().split(".")[-1] + ".neff")
                    info = subprocess.run([toolchain.tool("neuron-packager"), "info", neff], stdout=subprocess.PIPE,
                                          text=True, check=True).stdout
                    self.assertEqual(len(re.findall(r"^\d+\s+\d+\s+(k\d+_\S+)", info, re.M)), 1, info)

    def test_row_major_weight(self):
        # The moving operand read directly (512-column tiles), K = 129.
        x, w = randn(513, 129), randn(129, 700, seed=1, scale=0.09)
        self.check(lambda x, w: x @ w, (x, w))

    def test_swiglu(self):
        x = randn(260, 192, dtype=torch.bfloat16)
        wg, wu = randn(320, 192, dtype=torch.bfloat16, seed=1, scale=0.07), \
            randn(320, 192, dtype=torch.bfloat16, seed=2, scale=0.07)
        wd = randn(192, 320, dtype=torch.bfloat16, seed=3, scale=0.05)
        self.check(lambda x, wg, wu, wd: F.linear(F.silu(F.linear(x, wg)) * F.linear(x, wu), wd), (x, wg, wu, wd))

    def test_batched(self):
        # bmm keeps stationary slices within a batch; moving slices are not kept.
        a, b = randn(3, 200, 64), randn(3, 64, 150, seed=1, scale=0.12)
        self.check(lambda a, b: torch.bmm(a, b), (a, b))

    def test_small_matrices_in_batch_groups(self):
        # Batch groups (LowerMatmul.cpp): 32 or more batches of M <= 64 rows (N <= 128, K <= 1024
        # in slices of 128) run g whole batches a row tile, each operand loaded for the group at once (in rows
        # and transposed where its k is contiguous, across batch strides that do not merge
        # with the row stride), each batch's product computed transposed and the group's
        # rows transposed back, for epilogues over the rows (a bias, a per-row scale, a
        # softmax, a returned transpose, a second result). The last group may be partial;
        # an inf or NaN stays in its batch.
        inf_at = zeros_with((40, 16, 4), (5, 3, 1), float("inf"))
        nan_at = zeros_with((40, 4, 16), (17, 2, 9), float("nan"))
        cases = [
            (lambda a, b: torch.bmm(a, b), (randn(37, 4, 16), randn(37, 16, 4, seed=1))),
            (lambda a, b: torch.bmm(a, b), (torch.ones(64, 16, 16), torch.ones(64, 16, 16))),
            (lambda a, b: torch.bmm(a, b), (randn(300, 1, 8), randn(300, 8, 3, seed=1))),
            (lambda a, b: torch.bmm(a, b), (randn(50, 5, 1), randn(50, 1, 7, seed=1))),
            (lambda a, b: torch.bmm(a, b), (randn(64, 64, 128), randn(64, 128, 128, seed=1, scale=0.1))),
            (lambda a, b: torch.bmm(a, b), (randn(70, 3, 5), randn(70, 5, 11, seed=1))),
            (lambda a, b: torch.bmm(a, b), (randn(40, 8, 300, scale=0.1), randn(40, 300, 8, seed=1))),
            (lambda a, b: a @ b.transpose(1, 2), (randn(40, 8, 129, scale=0.1), randn(40, 24, 129, seed=1))),
            (lambda a, b: a.transpose(1, 2) @ b, (randn(48, 520, 4, scale=0.1), randn(48, 520, 16, seed=1))),
            (lambda q, k: q @ k.transpose(-1, -2), (randn(4, 12, 16, 64), randn(4, 12, 16, 64, seed=1, scale=0.1))),
            (lambda a, b: a.transpose(-1, -2) @ b, (randn(40, 24, 8), randn(40, 24, 5, seed=1))),
            (lambda a, b: a[:, :, 1:17] @ b[:, :16], (randn(40, 8, 20), randn(40, 20, 8, seed=1))),
            (lambda a, b: a[::2] @ b, (randn(96, 4, 16), randn(48, 16, 6, seed=1))),
            (lambda a, b: a[:, ::2] @ b[:, :5].transpose(1, 2), (randn(48, 8, 16), randn(48, 24, 16, seed=1))),
            (lambda a, b: a.permute(1, 0, 2) @ b, (randn(8, 40, 16), randn(40, 16, 8, seed=1))),
            (lambda a, b: a @ b.expand(33, 16, 12), (randn(33, 4, 16), randn(1, 16, 12, seed=1))),
            (lambda x, w: x.view(4, 16, 8, 16).transpose(1, 2) @ w, (randn(4, 16, 128), randn(8, 16, 16, seed=1))),
            (lambda a, b, c: torch.baddbmm(c, a, b), (randn(40, 8, 16), randn(40, 16, 8, seed=1), randn(40, 8, 8, seed=2))),
            (lambda a, b, c: torch.baddbmm(c, a, b, alpha=0.5, beta=2), (randn(40, 8, 16), randn(40, 16, 8, seed=1),
                                                                        torch.zeros(8))),
            (lambda a, b: torch.softmax(torch.bmm(a, b) * 0.3, -1) + 1, (randn(64, 16, 32), randn(64, 32, 16, seed=1))),
            (lambda a, b, c: torch.bmm(a, b) + torch.bmm(a, c), (randn(40, 4, 16), randn(40, 16, 4, seed=1),
                                                                 randn(40, 16, 4, seed=2))),
            (lambda a, b, s: torch.bmm(a, b) * s, (randn(48, 8, 16), randn(48, 16, 8, seed=1), randn(48, 8, 1, seed=2))),
            (lambda a, b: torch.bmm(a, b).transpose(1, 2), (randn(48, 8, 16), randn(48, 16, 24, seed=1))),
            (lambda a, b: (torch.bmm(a, b), torch.relu(torch.bmm(a, b)).sum(-1)),
             (randn(48, 8, 16), randn(48, 16, 24, seed=1))),
            (lambda a, b: torch.bmm(a, b), (randn(40, 4, 16), randn(40, 16, 4, seed=1) + inf_at)),
            (lambda a, b: torch.bmm(a, b), (randn(40, 4, 16) + nan_at, randn(40, 16, 4, seed=1))),
        ]
        self.check_cases("batch_group", cases)

    def check_cases(self, prefix, cases):
        # Each (fn, inputs) in f32 and bf16 at -O0 and -O2: every output compared with eager,
        # and the timing-only NTFF with a full run's.
        for i, (fn, inputs) in enumerate(cases):
            for dtype in (torch.float32, torch.bfloat16):
                args = tuple(t.to(dtype) for t in inputs)
                refs = fn(*args)
                refs = refs if isinstance(refs, tuple) else (refs,)
                for opt in (0, 2):
                    name = "%s_%d_%s_O%d" % (prefix, i, str(dtype)[6:], opt)
                    with self.subTest(case=i, dtype=dtype, opt=opt):
                        outs, _ = common.export_compile_run(fn, args, self.tmp, name, opt)
                        self.assertEqual(len(outs), len(refs))
                        for out, ref in zip(outs, refs):
                            common.compare(out, ref, TOL[dtype])
                        self.assertTrue(toolchain.timing_only_matches(os.path.join(self.tmp, name + ".neff"),
                                                                      self.tmp))

    def test_small_products_a_batch_per_partition(self):
        # Products on partitions (LowerMatmul.cpp, productsOnPartitions): bmms of many small
        # matrices whose transfers would bound them on the TensorEngine run a batch per partition,
        # each operand's matrices one run a partition (transposed and sliced ones as the span they
        # lie in), the products summed in f32 on the vector engines by columns, by rows or by dot
        # products, with epilogues over the [batches x M*N] tiles. A partial last row tile, a
        # batch broadcast operand, K = 1, inf and NaN, and the default-initialised ones and zeros.
        inf_a = zeros_with((100, 128, 4), (7, 30, 2), float("inf"))
        nan_b = zeros_with((1024, 16, 4), (900, 3, 1), float("nan"))
        cases = [
            (lambda a, b: torch.bmm(a, b), (randn(100, 128, 4), randn(100, 4, 4, seed=1))),
            (lambda a, b: torch.bmm(a, b), (randn(1024, 4, 16), randn(1024, 16, 4, seed=1) + nan_b)),
            (lambda a, b: torch.bmm(a, b), (randn(300, 1, 64), randn(300, 64, 16, seed=1))),
            (lambda a, b: torch.bmm(a, b), (randn(200, 64, 1), randn(200, 1, 8, seed=1))),
            (lambda a, b: a.transpose(1, 2) @ b, (randn(100, 4, 128), randn(100, 4, 4, seed=1))),
            (lambda a, b: a[:, :, 1:5] @ b, (randn(100, 128, 16), randn(100, 4, 4, seed=1))),
            (lambda a, b: a @ b.transpose(1, 2), (randn(1024, 4, 16), randn(1024, 4, 16, seed=1))),
            (lambda a, b: a @ b.expand(130, 4, 4), (randn(130, 128, 4), randn(1, 4, 4, seed=1))),
            (lambda a, b, c: torch.relu(torch.bmm(a, b) + c), (randn(100, 128, 4), randn(100, 4, 4, seed=1),
                                                               randn(128, 4, seed=2))),
            (lambda a, b, s: torch.bmm(a, b) * s, (randn(300, 1, 64), randn(300, 64, 16, seed=1),
                                                   randn(300, 1, 1, seed=2))),
            (lambda a, b: torch.relu(a @ b + 1), (randn(1024, 64, 8), randn(1024, 8, 16, seed=1))),
            (lambda a, b: torch.bmm(a, b).transpose(1, 2), (randn(100, 128, 4), randn(100, 4, 4, seed=1))),
            (lambda a, b: torch.bmm(a, b), (torch.ones(100, 128, 4), torch.ones(100, 4, 4))),
            (lambda a, b: torch.bmm(a, b), (randn(100, 128, 4) + inf_a, torch.zeros(100, 4, 4))),
        ]
        self.check_cases("small_products", cases)

    def test_left_operand_stored_transposed_by_its_producer(self):
        # The RMSNorm output feeds only matmuls whose moving slices take two passes
        # (16 k slices x 5 column tiles of 2 KiB > 128 KiB): the RMSNorm kernel stores it
        # transposed, so the matmul kernels read it K-major and transpose nothing; the
        # TensorEngine transposes the operand once (32 blocks), not once per pass.
        x = randn(256, 2048)
        w1, w2 = randn(2048, 2560, seed=1, scale=0.02), randn(2048, 2550, seed=2, scale=0.02)

        def fn(x, w1, w2):
            n = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)
            return (n @ w1)[:, :2550] + n @ w2
        self.check(fn, (x, w1, w2))
        name = self.id().split(".")[-1]
        neff = os.path.join(self.tmp, name + ".neff")
        opcodes = [i["opcode"] for i in toolchain.profile_instructions(neff, self.tmp)]
        self.assertEqual(opcodes.count("transpose"), 256 * 2048 // (128 * 128))

    def test_matmul_epilogue_stored_transposed(self):
        # SwiGLU's down projection: silu(x @ wg) * (x @ wu), computed in a matmul kernel's
        # epilogue, is stored transposed for the down projection (and a 3-d view of it).
        x = randn(2, 150, 256)
        wg, wu = randn(256, 2048, seed=1, scale=0.06), randn(256, 2048, seed=2, scale=0.06)
        wd = randn(2048, 2600, seed=3, scale=0.02)
        self.check(lambda x, wg, wu, wd: (F.silu(x @ wg) * (x @ wu)) @ wd, (x, wg, wu, wd))

    def test_k_major_left_operand_loaded_for_several_row_tiles(self):
        # x given as [K, M] and read transposed: K-major rows of 128 elements. With K = 4352
        # (f32) one column tile's moving slices take 68 KiB, so blocks hold one column tile and
        # the left slices are loaded for four row tiles at once (rows of 512 elements); a
        # partial last group of row tiles (M = 700) keeps the per-row-tile loads.
        xt, w = randn(4352, 700, scale=0.05), randn(4352, 600, seed=1, scale=0.05)
        self.check(lambda xt, w: xt.t() @ w, (xt, w))

    def test_long_contraction_falls_back(self):
        # K = 20000: the stationary slices (80 KiB a partition) are not kept,
        # and one column tile's moving slices would not fit beside the rest.
        x, w = randn(200, 20000, scale=0.05), randn(20000, 130, seed=1, scale=0.05)
        self.check(lambda x, w: x @ w, (x, w))

    def kernels(self):
        name = self.id().split(".")[-1]
        neff = os.path.join(self.tmp, name + ".neff")
        return len({i["span"] for i in toolchain.profile_instructions(neff, self.tmp)})

    def test_baddbmm_reads_reduced_float_operands(self):
        # baddbmm in bf16 sums its products in f32 and rounds once: its bmm reads the bf16
        # operands as they are, its result f32 (a bf16 product is exact in f32), so no kernel
        # casts them to f32 first. BLOOM's attention scores (an ALiBi bias broadcast over the
        # queries, alpha = 1/sqrt(d)) and their softmax are two kernels, with the values one
        # attention kernel; a full self with beta two. Also in f32, with ones and zeros as
        # parameters are initialised.
        for dtype in (torch.float32, torch.bfloat16):
            with self.subTest(dtype=dtype, case="alibi"):
                self.check(lambda c, q, k: torch.softmax(torch.baddbmm(c, q, k.transpose(1, 2), beta=1.0,
                                                                       alpha=0.125), -1),
                           (randn(32, 1, 128, dtype=dtype), randn(32, 128, 64, dtype=dtype, seed=1),
                            randn(32, 128, 64, dtype=dtype, seed=2)))
                self.assertEqual(self.kernels(), 2)
            with self.subTest(dtype=dtype, case="alibi attention"):
                # With the values: one flash-attention kernel (bf16 was five: three casts).
                self.check(lambda c, q, k, v: torch.softmax(torch.baddbmm(c, q, k.transpose(1, 2), beta=1.0,
                                                                          alpha=0.125), -1) @ v,
                           (randn(32, 1, 256, dtype=dtype), randn(32, 256, 64, dtype=dtype, seed=1),
                            randn(32, 256, 64, dtype=dtype, seed=2), randn(32, 256, 64, dtype=dtype, seed=3)))
                self.assertEqual(self.kernels(), 1)
            with self.subTest(dtype=dtype, case="contraction of one and a column"):
                # (Decomposed: an outer product multiplied in f32, a product summed in f32.)
                c, x, y = randn(8, 5, 6, dtype=dtype), randn(8, 5, 1, dtype=dtype, seed=1), randn(8, 1, 6, dtype=dtype,
                                                                                                  seed=2)
                self.check(lambda c, x, y: torch.baddbmm(c, x, y, alpha=0.5), (c, x, y))
                self.check(lambda x, c, z: torch.baddbmm(x, c, z, beta=2.0), (x, c, randn(8, 6, 1, dtype=dtype, seed=3)))
            for init in ("default", "random"):
                with self.subTest(dtype=dtype, case="self", init=init):
                    c = torch.zeros(256, 8, 8, dtype=dtype) if init == "default" else randn(256, 8, 8, dtype=dtype)
                    x = torch.ones(256, 8, 32, dtype=dtype) if init == "default" else randn(256, 8, 32, dtype=dtype,
                                                                                             seed=1)
                    self.check(lambda c, x, y: torch.baddbmm(c, x, y, alpha=0.5, beta=2.0),
                               (c, x, randn(256, 32, 8, dtype=dtype, seed=2)))
                    self.assertEqual(self.kernels(), 1)

    def test_first_row_tiles_paired(self):
        # Weights read K-major (x @ w with w [in, out], GPT-2's Conv1D): the first two row
        # tiles of each column block (of each batch for a bmm) alternate column tile by
        # column tile (tests/lit/passes/lower-to-isa-paired-rows.mlir). With a layer norm
        # prologue and a GELU epilogue, partial last row tiles and column tiles, a bmm
        # whose batch has 2 full row tiles and a partial one, and an epilogue through a
        # head split. Parameters as users have them (ones, zeros) and random.
        for dtype in (torch.float32, torch.bfloat16):
            for init in ("default", "random"):
                with self.subTest(dtype=dtype, init=init, case="prologue"):
                    x = randn(300, 200, dtype=dtype, scale=3.0)
                    g = torch.ones(200, dtype=dtype) if init == "default" else randn(200, dtype=dtype, seed=3)
                    beta = torch.zeros(200, dtype=dtype) if init == "default" else randn(200, dtype=dtype, seed=4)
                    w, bias = randn(200, 1100, dtype=dtype, seed=1, scale=0.07), randn(1100, dtype=dtype, seed=2)
                    if init == "default":
                        bias = torch.zeros(1100, dtype=dtype)

                    def fn(x, g, beta, w, bias):
                        return F.gelu(F.layer_norm(x, (200,), g, beta, 1e-5) @ w + bias)
                    self.check(fn, (x, g, beta, w, bias))
                    self.assertEqual(self.kernels(), 1)
            with self.subTest(dtype=dtype, case="bmm"):
                self.check(lambda a, b: torch.bmm(a, b) * 0.5,
                           (randn(2, 300, 64, dtype=dtype, seed=5), randn(2, 64, 1100, dtype=dtype, seed=6, scale=0.1)))
            with self.subTest(dtype=dtype, case="heads"):
                self.check(lambda x, w: (x @ w).view(260, 16, 64).transpose(0, 1).contiguous() + 1.0,
                           (randn(260, 96, dtype=dtype, seed=7), randn(96, 1024, dtype=dtype, seed=8, scale=0.1)))

    def test_layer_norm_prologue(self):
        # GPT-2's ln -> c_fc -> gelu: the layer norm joins the matmul's kernel as its left
        # operand's prologue (one kernel). 3 row tiles (300, the last partial), K = 200 (two
        # k slices, the second partial), N = 600 (two column tiles). Parameters as
        # nn.LayerNorm initializes them (ones, zeros) and random.
        for dtype in (torch.float32, torch.bfloat16):
            for init in ("default", "random"):
                with self.subTest(dtype=dtype, init=init):
                    x = randn(300, 200, dtype=dtype, scale=3.0)
                    g = torch.ones(200, dtype=dtype) if init == "default" else randn(200, dtype=dtype, seed=3)
                    beta = torch.zeros(200, dtype=dtype) if init == "default" else randn(200, dtype=dtype, seed=4)
                    w, bias = randn(600, 200, dtype=dtype, seed=1, scale=0.07), randn(600, dtype=dtype, seed=2)

                    def fn(x, g, beta, w, bias):
                        return F.gelu(F.linear(F.layer_norm(x, (200,), g, beta, 1e-5), w, bias))
                    self.check(fn, (x, g, beta, w, bias))
                    self.assertEqual(self.kernels(), 1)

    def test_rms_norm_prologue_through_a_reshape(self):
        # An RMSNorm of a [2, 150, 256] activation read by x.view(300, 256) @ w: the
        # reshape keeps the rows, so the norm is the matmul's prologue; the residual
        # add after it reads the activation again from HBM.
        for dtype in (torch.float32, torch.bfloat16):
            with self.subTest(dtype=dtype):
                x, g = randn(2, 150, 256, dtype=dtype), randn(256, dtype=dtype, seed=5)
                w = randn(256, 256, dtype=dtype, seed=1, scale=0.06)

                def fn(x, g, w):
                    xf = x.float()
                    n = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * g
                    return (n.view(300, 256) @ w).view(2, 150, 256) + x
                self.check(fn, (x, g, w))
                self.assertEqual(self.kernels(), 1)

    def test_prologue_with_a_rotary_epilogue(self):
        # A norm before a projection whose head-split result takes the rotary embedding in
        # its epilogue (split columns [heads, 64]): prologue and epilogue in one kernel.
        S, H, D = 200, 4, 64

        def fn(x, g, w, cos, sin):
            xf = x.float()
            n = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * g
            q = F.linear(n, w).view(1, S, H, D).transpose(1, 2)
            return q * cos + torch.cat((-q[..., D // 2:], q[..., :D // 2]), dim=-1) * sin
        for dtype in (torch.float32, torch.bfloat16):
            with self.subTest(dtype=dtype):
                x, g = randn(1, S, H * D, dtype=dtype), randn(H * D, dtype=dtype, seed=1)
                w = randn(H * D, H * D, dtype=dtype, seed=2, scale=0.05)
                cos, sin = randn(S, D, dtype=dtype, seed=3), randn(S, D, dtype=dtype, seed=4)
                self.check(fn, (x, g, w, cos, sin))
                self.assertEqual(self.kernels(), 1)

    def test_norm_read_twice_is_not_a_prologue(self):
        # The normalized value is returned as well, and a second matmul reads it: it is
        # stored by its own kernel; the results are the same.
        x, w1, w2 = randn(200, 160), randn(160, 96, seed=1, scale=0.1), randn(160, 64, seed=2, scale=0.1)

        def fn(x, w1, w2):
            n = F.layer_norm(x, (160,))
            return torch.cat([n @ w1, n @ w2, n[:, :8]], dim=1)
        self.check(fn, (x, w1, w2))
        self.assertGreater(self.kernels(), 1)

    def test_prologue_of_one_row_tile_with_many_column_blocks(self):
        # 64 rows (one row tile): the prologue runs once, whatever the blocks of the
        # 9000 output columns (18 column tiles of 8 k slices).
        x, w = randn(64, 1024, dtype=torch.bfloat16), randn(1024, 9000, dtype=torch.bfloat16, seed=1, scale=0.03)
        self.check(lambda x, w: F.layer_norm(x, (1024,)) @ w, (x, w))
        self.assertEqual(self.kernels(), 1)

    def test_prologue_with_a_long_row(self):
        # K = 6144 (the longest row a prologue takes with the default SBUF budget): 48 k
        # slices of a [128 x 6144] row tile computed in SBUF next to the moving slices.
        x, w = randn(256, 6144, dtype=torch.bfloat16), randn(6144, 640, dtype=torch.bfloat16, seed=1, scale=0.01)
        self.check(lambda x, w: F.layer_norm(x, (6144,)) @ w, (x, w))
        self.assertEqual(self.kernels(), 1)


if __name__ == "__main__":
    common.main()
