#!/usr/bin/env python3
"""Attention as one kernel (passes/LowerAttention.cpp): softmax(f(q @ k^T)) @ v
with an online softmax over blocks of 512 keys and 128 query rows.

Each case is exported, compiled at -O0 and -O2, run in full on the simulated
NeuronCore and compared with eager (tolerances of test_models.py: 1e-4 for
f32, 2^-5 for bf16, as max |y - eager| / max |eager|). At -O2 the case must
form one attention kernel; its sequences span several key blocks and query
blocks, with partial last blocks (700 = 512 + 188 keys; 188 = 128 + 60).

Cases: a causal mask as LLaMA applies it (masked_fill of -inf from a
constant boolean buffer, softmax in f32, probabilities cast back), GPT-2's
where(mask, scores, finfo.min), an additive float mask, no mask, cross
attention (queries and keys of different lengths), head dims above 128 and
value widths above 512, a mask that touches some chunks of a key block and
not others (applied to those only), and a mask that leaves rows fully
masked (NaN rows, as eager gives). The -O2 profile shows fewer TensorEngine instructions for
the causal mask than without it (the blocks above the diagonal are skipped).
"""
import math
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e_common as common  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from neuroncc import toolchain  # noqa: E402

TOL = {torch.float32: common.F32_TOLERANCE, torch.bfloat16: 2.0 ** -5}


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


class CausalLlama(torch.nn.Module):
    """LLaMA's attention core: scaled scores, masked_fill(-inf), softmax in f32."""

    def __init__(self, seq):
        super().__init__()
        self.register_buffer("mask", torch.ones(seq, seq, dtype=torch.bool).triu(1))

    def forward(self, q, k, v):
        s = q.shape[-2]
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(self.mask[:s, :s], float("-inf"))
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        return torch.matmul(probs, v)


class CausalGpt2(torch.nn.Module):
    """GPT-2's: where(mask, scores, finfo.min) with a tril buffer."""

    def __init__(self, seq):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones(seq, seq, dtype=torch.bool)))

    def forward(self, q, k, v):
        s = q.shape[-2]
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        fill = torch.full([], torch.finfo(scores.dtype).min, dtype=scores.dtype)
        scores = torch.where(self.bias[:s, :s], scores, fill)
        return torch.matmul(F.softmax(scores, dim=-1), v)


def plain(q, k, v):
    return torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * 0.125, dim=-1), v)


class AttentionEndToEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="neuroncc-attention-")

    def run_case(self, fn, inputs, name):
        """Compiles at -O0 and -O2, compares each with eager; returns the -O2 NEFF's kernel names."""
        ref = fn(*inputs)
        for opt in (0, 2):
            outs, _ = common.export_compile_run(fn, inputs, self.tmp, "%s_O%d" % (name, opt), opt)
            self.assertEqual(len(outs), 1)
            common.compare(outs[0], ref, TOL[ref.dtype])
        info = subprocess.run([toolchain.tool("neuron-packager"), "info", os.path.join(self.tmp, name + "_O2.neff")],
                              stdout=subprocess.PIPE, text=True, check=True).stdout
        return re.findall(r"^\d+\s+\d+\s+(k\d+_\S+)", info, re.M)

    def tensor_instructions(self, name):
        """TensorEngine instructions of the -O2 NEFF's attention kernel (from the profile)."""
        neff = os.path.join(self.tmp, name + "_O2.neff")
        return sum(1 for i in toolchain.profile_instructions(neff, self.tmp) if i["queue"].startswith("tensor"))

    def qkv(self, b, h, s, t, d, dv, dtype, seed=0):
        return [randn(b, h, s, d, seed=seed, dtype=dtype), randn(b, h, t, d, seed=seed + 1, dtype=dtype),
                randn(b, h, t, dv, seed=seed + 2, dtype=dtype)]

    def test_causal_llama_several_key_blocks(self):
        for dtype in (torch.float32, torch.bfloat16):
            with self.subTest(dtype=dtype):
                kernels = self.run_case(CausalLlama(700), self.qkv(1, 2, 700, 700, 64, 64, dtype),
                                        "llama_%s" % str(dtype)[6:])
                self.assertTrue(any(k.endswith("_attention") for k in kernels), kernels)

    def test_causal_gpt2_finfo_min(self):
        for dtype in (torch.float32, torch.bfloat16):
            with self.subTest(dtype=dtype):
                kernels = self.run_case(CausalGpt2(600), self.qkv(2, 1, 600, 600, 32, 32, dtype, seed=3),
                                        "gpt2_%s" % str(dtype)[6:])
                self.assertTrue(any(k.endswith("_attention") for k in kernels), kernels)

    def test_causal_blocks_are_skipped(self):
        inputs = self.qkv(1, 1, 1024, 1024, 64, 64, torch.float32, seed=5)
        self.run_case(CausalLlama(1024), inputs, "skip_causal")
        self.run_case(plain, inputs, "skip_plain")
        causal, full = self.tensor_instructions("skip_causal"), self.tensor_instructions("skip_plain")
        print("  TensorEngine instructions: causal %d, unmasked %d" % (causal, full))
        # 8 query blocks over 2 key blocks: 12 of the 16 blocks are computed.
        self.assertLess(causal, full * 0.85, (causal, full))

    def test_unmasked_cross_attention_and_wide_heads(self):
        # 300 queries over 900 keys; head dim 160 (two contraction slices), values 600 wide (two PSUM banks).
        for dtype in (torch.float32, torch.bfloat16):
            with self.subTest(dtype=dtype):
                kernels = self.run_case(plain, self.qkv(1, 2, 300, 900, 160, 600, dtype, seed=7),
                                        "cross_%s" % str(dtype)[6:])
                self.assertTrue(any(k.endswith("_attention") for k in kernels), kernels)

    def test_additive_mask_input(self):
        def fn(q, k, v, bias):
            return torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / 8.0 + bias, dim=-1), v)
        bias = torch.where(randn(1, 1, 200, 520, seed=9) > 1.0, -10000.0, 0.0)
        inputs = self.qkv(2, 2, 200, 520, 64, 64, torch.float32, seed=11) + [bias]
        kernels = self.run_case(fn, inputs, "additive")
        self.assertTrue(any(k.endswith("_attention") for k in kernels), kernels)

    def test_head_merge_is_stored_by_the_attention_kernel(self):
        """The head merge after attention (transpose or permute, then a reshape into the
        projection's input) is written by the attention kernel straight into the merged
        layout: no copy kernel between it and the output projection."""
        w = randn(2 * 48, 40, seed=9)

        def llama_merge(q, k, v):
            out = CausalLlama(300)(q, k, v)
            return out.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1) @ w

        def gpt2_merge(q, k, v):
            out = CausalGpt2(300)(q, k, v)
            return out.permute(0, 2, 1, 3).contiguous().view(q.shape[0], q.shape[2], -1) @ w

        for fn, name in ((llama_merge, "merge_llama"), (gpt2_merge, "merge_gpt2")):
            for dtype in (torch.float32, torch.bfloat16):
                with self.subTest(fn=name, dtype=dtype):
                    inputs = self.qkv(1, 2, 300, 300, 48, 48, dtype, seed=4)
                    w = w.to(dtype)
                    kernels = self.run_case(fn, inputs, "%s_%s" % (name, str(dtype)[6:]))
                    self.assertEqual(len(kernels), 2, kernels)
                    self.assertTrue(kernels[0].endswith("_attention"), kernels)

    def test_masked_chunks_inside_key_blocks(self):
        """A causal mask with a gap (keys 200..255 of every 256 masked) classes the 128-key
        chunks of a 512-key block as untouched, partly and entirely masked in turn: the mask
        is applied in place to several column ranges of one block (scaled scores), to the
        whole block (the mask straight on the scores, still in PSUM), and with a finite fill
        that cannot be skipped (every chunk computed, the filled ones masked)."""
        t = 700
        keys, queries = torch.arange(t), torch.arange(t)[:, None]
        masked = (keys > queries) | (keys % 256 >= 200)
        masked[:, 0] = False  # every row keeps a key

        def scaled(q, k, v):
            s = (torch.matmul(q, k.transpose(-1, -2)) / 8.0).masked_fill(masked, float("-inf"))
            return torch.matmul(torch.softmax(s.float(), dim=-1).to(q.dtype), v)

        def unscaled(q, k, v):
            s = torch.matmul(q, k.transpose(-1, -2)).masked_fill(masked, float("-inf"))
            return torch.matmul(torch.softmax(s, dim=-1), v)

        def finite(q, k, v):
            s = (torch.matmul(q, k.transpose(-1, -2)) * 0.125).masked_fill(masked, -1e4)
            return torch.matmul(torch.softmax(s, dim=-1), v)

        for fn in (scaled, unscaled, finite):
            for dtype in (torch.float32, torch.bfloat16):
                with self.subTest(fn=fn.__name__, dtype=dtype):
                    inputs = self.qkv(1, 2, t, t, 64, 64, dtype, seed=17)
                    kernels = self.run_case(fn, inputs, "gaps_%s_%s" % (fn.__name__, str(dtype)[6:]))
                    self.assertTrue(any(k.endswith("_attention") for k in kernels), kernels)

    def test_rotary_in_the_projection_epilogue(self):
        """LLaMA's rotary embedding of q and k (head split, then q * cos + rotate_half(q) * sin)
        runs in the projection's kernel, over its output tiles of whole heads: 512 columns of
        four 128-wide heads (two column tiles), 480 of five 96-wide ones, and 512 then 128
        columns of 64-wide ones (with the tables as recent transformers shape them,
        [1, 1, s, d]); 300 and 200 tokens (a partial row tile). The projections of
        q and k, of v, and the attention (which stores the returned head merge through its
        inverse pattern) are then four kernels, with or without a bias on the projections
        (Qwen2's have one)."""
        def rotate_half(x):
            half = x.shape[-1] // 2
            return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

        def make(seq, heads, head_dim, dtype, bias, hf_tables=False):
            inv = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
            emb = torch.outer(torch.arange(seq, dtype=torch.float32), inv)
            emb = torch.cat((emb, emb), dim=-1)
            cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
            if hf_tables:  # as recent transformers pass them: [batch, seq, d], unsqueezed over the heads
                cos, sin = cos[None].unsqueeze(1), sin[None].unsqueeze(1)
            mask = torch.ones(seq, seq, dtype=torch.bool).triu(1)

            def fn(x, wq, wk, wv, b):
                s = x.shape[1]
                def split(w):
                    y = F.linear(x, w, b if bias else None)
                    return y.view(1, s, heads, head_dim).transpose(1, 2)
                q, k, v = split(wq), split(wk), split(wv)
                q = q * cos + rotate_half(q) * sin
                k = k * cos + rotate_half(k) * sin
                scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(head_dim)
                probs = F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1, dtype=torch.float32).to(dtype)
                return torch.matmul(probs, v).transpose(1, 2).reshape(1, s, -1)
            return fn

        for seq, heads, head_dim, bias, hf in ((300, 8, 128, False, False), (200, 10, 96, False, False),
                                               (200, 10, 64, False, True), (200, 4, 64, True, False)):
            hidden = heads * head_dim
            for dtype in (torch.float32, torch.bfloat16):
                with self.subTest(heads=heads, head_dim=head_dim, bias=bias, hf_tables=hf, dtype=dtype):
                    scale = 1.0 / math.sqrt(hidden)
                    inputs = [randn(1, seq, hidden, seed=21, dtype=dtype)] + \
                        [(randn(hidden, hidden, seed=22 + i) * scale).to(dtype) for i in range(3)] + \
                        [randn(hidden, seed=25, dtype=dtype)]
                    name = "rotary_%d_%d_%s_%s" % (heads, head_dim, bias, str(dtype)[6:])
                    kernels = self.run_case(make(seq, heads, head_dim, dtype, bias, hf), inputs, name)
                    self.assertEqual(len(kernels), 4, kernels)

    def test_batched_rotary_heads(self):
        """Batch 2 and 3: the head split of a batch > 1 cannot merge [batch, heads] into the
        batched matmul's one batch dim as a view, so the graph copies K^T per head (a clone of
        [b, h, d, s]), which the projection's kernel stores transposed: each row tile's
        tokens are one run per batch (100 tokens per batch: runs of 100 and 28 rows in the
        first row tile); 128- and 64-wide heads, with a causal mask."""
        def rotate_half(x):
            half = x.shape[-1] // 2
            return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

        def make(batch, seq, heads, head_dim, dtype):
            inv = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
            emb = torch.outer(torch.arange(seq, dtype=torch.float32), inv)
            emb = torch.cat((emb, emb), dim=-1)
            cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
            mask = torch.ones(seq, seq, dtype=torch.bool).triu(1)

            def fn(x, wq, wk, wv):
                def split(w):
                    return F.linear(x, w).view(batch, seq, heads, head_dim).transpose(1, 2)
                q, k, v = split(wq), split(wk), split(wv)
                q = q * cos + rotate_half(q) * sin
                k = k * cos + rotate_half(k) * sin
                scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(head_dim)
                probs = F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1, dtype=torch.float32).to(dtype)
                return torch.matmul(probs, v).transpose(1, 2).reshape(batch, seq, -1)
            return fn

        for batch, seq, heads, head_dim in ((2, 100, 2, 128), (3, 64, 4, 64)):
            hidden = heads * head_dim
            for dtype in (torch.float32, torch.bfloat16):
                with self.subTest(batch=batch, head_dim=head_dim, dtype=dtype):
                    scale = 1.0 / math.sqrt(hidden)
                    inputs = [randn(batch, seq, hidden, seed=31, dtype=dtype)] + \
                        [(randn(hidden, hidden, seed=32 + i) * scale).to(dtype) for i in range(3)]
                    name = "batched_rotary_%d_%d_%s" % (batch, head_dim, str(dtype)[6:])
                    self.run_case(make(batch, seq, heads, head_dim, dtype), inputs, name)

    def test_batched_heads_read_and_stored_through_views(self):
        """Heads split out of [b, s, h * d] for b > 1 have no single batch stride, nor do the
        [kv heads, repeats] of grouped-query attention's repeated keys: the attention kernel
        splits its batch index over such dims where it reads q, k and v and where it stores the
        head merge, instead of copy kernels around it (one kernel in all). Cross attention (150
        queries, 90 keys) with a per-sequence padding mask, and grouped-query attention (2
        key/value heads repeated for 6 query heads, causal) for one and two sequences; f32 and
        bf16."""
        def cross(q_in, kv_in, pad):
            b, s, t = q_in.shape[0], q_in.shape[1], kv_in.shape[1]
            q = q_in.view(b, s, 3, 32).transpose(1, 2)
            k = kv_in[..., :96].reshape(b, t, 3, 32).transpose(1, 2)
            v = kv_in[..., 96:].reshape(b, t, 3, 40).transpose(1, 2)
            scores = (q @ k.transpose(-1, -2)) * 32 ** -0.5
            scores = scores.masked_fill(pad[:, None, None, :], -1e4)
            return (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, 120)

        def grouped(q_in, k_in, v_in):
            b, s = q_in.shape[0], q_in.shape[1]
            q = q_in.view(b, s, 6, 64).transpose(1, 2)
            k = k_in.view(b, s, 2, 64).transpose(1, 2)[:, :, None].expand(b, 2, 3, s, 64).reshape(b, 6, s, 64)
            v = v_in.view(b, s, 2, 64).transpose(1, 2)[:, :, None].expand(b, 2, 3, s, 64).reshape(b, 6, s, 64)
            mask = torch.ones(s, s, dtype=torch.bool).triu(1)
            scores = torch.matmul(q, k.transpose(2, 3)) / 8.0
            probs = F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
            return torch.matmul(probs, v).transpose(1, 2).reshape(b, s, -1)

        pad = torch.zeros(2, 90, dtype=torch.bool)
        pad[0, 70:] = True
        pad[1, 45:] = True
        for dtype in (torch.float32, torch.bfloat16):
            with self.subTest(case="cross", dtype=dtype):
                kernels = self.run_case(cross, [randn(2, 150, 96, seed=41, dtype=dtype),
                                                randn(2, 90, 216, seed=42, dtype=dtype), pad],
                                        "batched_cross_%s" % str(dtype)[6:])
                self.assertEqual(kernels, ["k0_attention"])
            for b in (1, 2):
                with self.subTest(case="grouped", batch=b, dtype=dtype):
                    kernels = self.run_case(grouped, [randn(b, 200, 384, seed=43, dtype=dtype),
                                                      randn(b, 200, 128, seed=44, dtype=dtype),
                                                      randn(b, 200, 128, seed=45, dtype=dtype)],
                                            "batched_grouped_%d_%s" % (b, str(dtype)[6:]))
                    self.assertEqual(kernels, ["k0_attention"])

    def test_keys_shared_by_consecutive_heads(self):
        """Consecutive heads reading the same K and V (grouped-query attention's expanded key
        heads, at decoding and over a short prompt; one memory expanded over a batch of
        queries) keep the K^T and V slices the first of them prepared: fewer TensorEngine
        instructions than the same attention over distinct key heads, and the same results as
        eager. The heads repeated in turn (`repeat`, not `repeat_interleave`) change keys at
        every head and prepare each head's own."""
        def grouped(q, k, v):
            b, h, kv, t = q.shape[0], q.shape[1], k.shape[1], k.shape[2]
            k = k[:, :, None].expand(b, kv, h // kv, t, k.shape[-1]).reshape(b, h, t, k.shape[-1])
            v = v[:, :, None].expand(b, kv, h // kv, t, v.shape[-1]).reshape(b, h, t, v.shape[-1])
            return torch.softmax(q @ k.transpose(-1, -2) * 0.125, -1) @ v

        def in_turn(q, k, v):
            h, kv = q.shape[1], k.shape[1]
            return plain(q, k.repeat(1, h // kv, 1, 1), v.repeat(1, h // kv, 1, 1))

        def memory(q, k, v):
            return plain(q, k.expand(q.shape[0], -1, -1, -1), v.expand(q.shape[0], -1, -1, -1))

        for dtype in (torch.float32, torch.bfloat16):
            for s, t in ((1, 300), (24, 200)):
                with self.subTest(case="grouped", s=s, t=t, dtype=dtype):
                    q = randn(2, 8, s, 64, seed=51, dtype=dtype)
                    k, v = randn(2, 2, t, 64, seed=52, dtype=dtype), randn(2, 2, t, 48, seed=53, dtype=dtype)
                    name = "shared_keys_%d_%s" % (s, str(dtype)[6:])
                    self.assertEqual(self.run_case(grouped, [q, k, v], name), ["k0_attention"])
                    distinct = [q, randn(2, 8, t, 64, seed=52, dtype=dtype), randn(2, 8, t, 48, seed=53, dtype=dtype)]
                    self.run_case(plain, distinct, name + "_distinct")
                    self.assertLess(self.tensor_instructions(name), self.tensor_instructions(name + "_distinct"))
                    self.run_case(in_turn, [q, k, v], name + "_in_turn")
            with self.subTest(case="memory", dtype=dtype):
                self.run_case(memory, [randn(3, 4, 10, 64, seed=54, dtype=dtype), randn(1, 4, 77, 64, seed=55, dtype=dtype),
                                       randn(1, 4, 77, 64, seed=56, dtype=dtype)], "shared_memory_%s" % str(dtype)[6:])

    def test_heads_sharing_keys_packed_into_one_query_block(self):
        """Heads that share K and V with few query rows each are one query block of all their
        rows (up to 128): grouped-query decoding (one row a head; queries as [b, h, 1, d] and
        as a [b, 1, h * d] projection split into heads), multi-query attention over 12 heads
        of 24 rows (packs of 5 and a last one of 2), and short prompts with a causal mask
        (the same for every head) or a padding mask per sequence; f32 and bf16. Fewer
        TensorEngine instructions than the same attention over distinct key heads."""
        def grouped(q, k, v, mask=None, causal=False):
            b, h, s, t = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
            kv = k.shape[1]
            k = k[:, :, None].expand(b, kv, h // kv, t, k.shape[-1]).reshape(b, h, t, k.shape[-1])
            v = v[:, :, None].expand(b, kv, h // kv, t, v.shape[-1]).reshape(b, h, t, v.shape[-1])
            scores = q @ k.transpose(-1, -2) * 0.125
            if causal:
                scores = scores.masked_fill(torch.ones(s, t, dtype=torch.bool).triu(t - s + 1), float("-inf"))
            if mask is not None:
                scores = scores.masked_fill(mask[:, None, None, :], float("-inf"))
            return torch.softmax(scores, -1) @ v

        def projected(x, k, v):
            b = x.shape[0]
            return grouped(x.view(b, 1, 8, 64).transpose(1, 2), k, v).transpose(1, 2).reshape(b, 1, 8 * 64)

        pad = torch.zeros(2, 300, dtype=torch.bool)
        pad[0, 250:] = True
        pad[1, 100:] = True
        for dtype in (torch.float32, torch.bfloat16):
            kv = [randn(2, 2, 300, 64, seed=62, dtype=dtype), randn(2, 2, 300, 64, seed=63, dtype=dtype)]
            cases = [
                ("decode", lambda q, k, v: grouped(q, k, v), [randn(2, 8, 1, 64, seed=61, dtype=dtype)] + kv),
                ("decode_padded", lambda q, k, v: grouped(q, k, v, mask=pad), [randn(2, 8, 1, 64, seed=61, dtype=dtype)] + kv),
                ("decode_projected", projected, [randn(2, 1, 512, seed=64, dtype=dtype)] + kv),
                ("multi_query", lambda q, k, v: grouped(q, k, v),
                 [randn(1, 12, 24, 64, seed=65, dtype=dtype), randn(1, 1, 90, 64, seed=66, dtype=dtype),
                  randn(1, 1, 90, 32, seed=67, dtype=dtype)]),
                ("prompt_causal", lambda q, k, v: grouped(q, k, v, causal=True),
                 [randn(2, 8, 16, 64, seed=68, dtype=dtype), randn(2, 2, 16, 64, seed=69, dtype=dtype),
                  randn(2, 2, 16, 64, seed=70, dtype=dtype)]),
                ("prompt_causal_cached", lambda q, k, v: grouped(q, k, v, causal=True),
                 [randn(2, 8, 5, 64, seed=71, dtype=dtype)] + kv),
            ]
            for label, fn, inputs in cases:
                with self.subTest(case=label, dtype=dtype):
                    name = "packed_%s_%s" % (label, str(dtype)[6:])
                    self.assertEqual(self.run_case(fn, inputs, name), ["k0_attention"])
            with self.subTest(case="fewer instructions", dtype=dtype):
                q = randn(2, 8, 1, 64, seed=61, dtype=dtype)
                distinct = [q, randn(2, 8, 300, 64, seed=62, dtype=dtype), randn(2, 8, 300, 64, seed=63, dtype=dtype)]
                self.run_case(plain, distinct, "packed_distinct_%s" % str(dtype)[6:])
                self.assertLess(2 * self.tensor_instructions("packed_decode_%s" % str(dtype)[6:]),
                                self.tensor_instructions("packed_distinct_%s" % str(dtype)[6:]))

    def test_heads_side_by_side(self):
        """Heads whose rows sit side by side in [b, s, h * d] (BERT's and GPT-2's projections) and
        are shorter than a DMA descriptor's worth share their loads of Q, K and V and the store of
        their outputs, in groups of up to 8 heads (LowerAttention.cpp): 12 heads (groups of 8 and
        4) of 128 and 200 tokens with a padding mask, causal over 300 tokens, outputs returned per
        head (not side by side: stored one by one) and merged; f32 and bf16."""
        def split(t, b, s, h):
            return t.view(b, s, h, -1).transpose(1, 2)

        def padded(q_in, k_in, v_in, pad):
            b, s = q_in.shape[0], q_in.shape[1]
            q, k, v = split(q_in, b, s, 12), split(k_in, b, s, 12), split(v_in, b, s, 12)
            scores = q @ k.transpose(-1, -2) / 8.0 + pad[:, None, None, :]
            return (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, -1)

        def causal(q_in, k_in, v_in):
            b, s = q_in.shape[0], q_in.shape[1]
            q, k, v = split(q_in, b, s, 6), split(k_in, b, s, 6), split(v_in, b, s, 6)
            mask = torch.ones(s, s, dtype=torch.bool).triu(1)
            scores = (q @ k.transpose(-1, -2) / 8.0).masked_fill(mask, float("-inf"))
            return F.softmax(scores, dim=-1) @ v  # per head: [b, h, s, d]

        for dtype in (torch.float32, torch.bfloat16):
            for b, s in ((2, 128), (1, 200)):
                pad = torch.zeros(b, s)
                pad[-1, s - 30:] = -10000.0
                with self.subTest(case="padded", batch=b, seq=s, dtype=dtype):
                    kernels = self.run_case(padded, [randn(b, s, 768, seed=51, dtype=dtype),
                                                     randn(b, s, 768, seed=52, dtype=dtype),
                                                     randn(b, s, 768, seed=53, dtype=dtype), pad.to(dtype)],
                                            "side_padded_%d_%d_%s" % (b, s, str(dtype)[6:]))
                    self.assertEqual(kernels, ["k0_attention"])
            with self.subTest(case="causal", dtype=dtype):
                kernels = self.run_case(causal, [randn(1, 300, 384, seed=54, dtype=dtype),
                                                 randn(1, 300, 384, seed=55, dtype=dtype),
                                                 randn(1, 300, 384, seed=56, dtype=dtype)],
                                        "side_causal_%s" % str(dtype)[6:])
                self.assertIn("k0_attention", kernels)

    def test_short_heads_packed_several_to_a_pass(self):
        """Heads of few rows that each read their own K and V go several to a pass
        (LowerAttention.cpp, diagonal packs): the scores of all the pack's rows against all its
        keys, the blocks off the diagonal set to -inf, each head's product with its own V.
        BERT-sized heads of 16 tokens as [b, h, s, d] and as a [b, s, h * d] projection split
        into heads (packed along the sequences of one head; with a padding mask per sequence
        too), window attention over 49 tokens
        (two heads a pack), cross attention of 10 queries over 24 keys with values 40 wide
        (packs of unequal heads left over), a causal mask and a padding mask per sequence
        (inputs varying along the keys, repeated for each head of a pack), one query a head,
        one key a head, and all-zero queries (uniform probabilities); f32 and bf16. Inf and
        NaN in one head's V, Q or K must not reach the other heads of its pack, and a row
        masked entirely is NaN, as in eager."""
        def split(t, b, s, h):
            return t.view(b, s, h, -1).transpose(1, 2)

        def projected(q_in, k_in, v_in):
            b, s = q_in.shape[0], q_in.shape[1]
            q, k, v = split(q_in, b, s, 4), split(k_in, b, s, 4), split(v_in, b, s, 4)
            return (plain(q, k, v)).transpose(1, 2).reshape(b, s, -1)

        # BERT's padding mask per sequence over heads split out of projections: the packs
        # hold one head of several sequences, whose mask rows differ.
        bert_pad = torch.zeros(6, 16)
        bert_pad[2, 11:] = -10000.0
        bert_pad[5, 4:] = -10000.0

        def projected_padded(q_in, k_in, v_in):
            b, s = q_in.shape[0], q_in.shape[1]
            q, k, v = split(q_in, b, s, 4), split(k_in, b, s, 4), split(v_in, b, s, 4)
            scores = q @ k.transpose(-1, -2) / 8.0 + bert_pad[:, None, None, :].to(q.dtype)
            return (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, -1)

        causal_mask = torch.ones(16, 16, dtype=torch.bool).triu(1)

        def causal(q, k, v):
            scores = (q @ k.transpose(-1, -2) * 0.125).masked_fill(causal_mask, float("-inf"))
            return torch.softmax(scores, -1) @ v

        pad = torch.zeros(6, 16)
        pad[1, 10:] = float("-inf")
        pad[4, 3:] = float("-inf")
        pad[5, :] = float("-inf")  # every key of that sequence masked: NaN rows

        def padded(q, k, v):
            return torch.softmax(q @ k.transpose(-1, -2) * 0.125 + pad[:, None, None, :].to(q.dtype), -1) @ v

        for dtype in (torch.float32, torch.bfloat16):
            nonfinite = self.qkv(2, 8, 16, 16, 32, 32, dtype, seed=91)
            nonfinite[2][0, 3, 5, 7] = float("inf")
            nonfinite[2][1, 6, 2, 0] = float("nan")
            nonfinite[0][1, 1, 4, 9] = float("nan")
            nonfinite[1][0, 5, 11, 2] = float("-inf")
            cases = [
                ("bert_heads", plain, self.qkv(4, 12, 16, 16, 64, 64, dtype, seed=81)),
                ("projected", projected, [randn(6, 16, 4 * 32, seed=82 + i, dtype=dtype) for i in range(3)]),
                ("projected_padded", projected_padded,
                 [randn(6, 16, 4 * 32, seed=93 + i, dtype=dtype) for i in range(3)]),
                ("windows", plain, self.qkv(3, 4, 49, 49, 32, 32, dtype, seed=85)),
                ("cross", plain, self.qkv(1, 19, 10, 24, 24, 40, dtype, seed=86)),
                ("causal", causal, self.qkv(2, 6, 16, 16, 32, 32, dtype, seed=87)),
                ("padded", padded, self.qkv(6, 3, 16, 16, 32, 32, dtype, seed=88)),
                ("one_query", plain, self.qkv(3, 16, 1, 40, 64, 64, dtype, seed=89)),
                ("one_key", plain, self.qkv(2, 10, 6, 1, 16, 16, dtype, seed=90)),
                ("nonfinite", plain, nonfinite),
                ("zero_queries", plain, [torch.zeros(2, 8, 16, 32, dtype=dtype)] + self.qkv(2, 8, 16, 16, 32, 32,
                                                                                             dtype, seed=92)[1:]),
            ]
            for label, fn, inputs in cases:
                with self.subTest(case=label, dtype=dtype):
                    kernels = self.run_case(fn, inputs, "short_heads_%s_%s" % (label, str(dtype)[6:]))
                    # (A softmax over one key is not fused into an attention kernel.)
                    if label != "one_key":
                        self.assertTrue(any(k.endswith("_attention") for k in kernels), kernels)

    def test_fully_masked_rows_are_nan(self):
        mask = torch.zeros(130, 600, dtype=torch.bool)
        mask[5] = True            # every key masked: NaN, as in eager
        mask[100, :550] = True    # only the second key block's keys remain
        mask[128:] = True         # a whole query block: every key block skipped

        def fn(q, k, v):
            s = torch.matmul(q, k.transpose(-1, -2)).masked_fill(mask, float("-inf"))
            return torch.matmul(torch.softmax(s, dim=-1), v)
        inputs = self.qkv(1, 1, 130, 600, 32, 32, torch.float32, seed=13)
        ref = fn(*inputs)
        self.assertTrue(torch.isnan(ref[0, 0, 5]).all() and torch.isnan(ref[0, 0, 128:]).all())
        kernels = self.run_case(fn, inputs, "nanrows")
        self.assertTrue(any(k.endswith("_attention") for k in kernels), kernels)


if __name__ == "__main__":
    unittest.main(verbosity=2)
