#!/usr/bin/env python3
"""Models written the way Hugging Face transformers writes them (from memory of
their code, not a dependency): a GPT-2 block with its `bias` buffer sliced for the
causal mask, `torch.finfo(dtype).min` fills, an attention mask from the tokenizer's
0/1 mask and `input_ids.view(-1, n)` before the embedding, tied output weights,
greedy and top-k picks; a BERT encoder with token types, a position-id buffer
sliced to the length, a key padding mask and a label-smoothed loss; a LLaMA block
with rotary halves (`cat(-x2, x1)`), grouped-query attention (expand + reshape and
`repeat_interleave`), an RMSNorm in f32, SwiGLU, a float32 softmax and
temperature / top-k filtering of the last logits; a ViT with a class token and
pre-norm encoder layers. Each at -O0 and -O2 (f32 and bf16 for LLaMA and ViT),
compared with eager.
"""
import math
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e_common as common  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class GPT2Attn(nn.Module):
    def __init__(s, d=32, h=4, n=16):
        super().__init__(); s.h = h; s.c_attn = nn.Linear(d, 3 * d); s.c_proj = nn.Linear(d, d)
        s.register_buffer("bias", torch.tril(torch.ones((n, n), dtype=torch.bool)).view(1, 1, n, n), persistent=False)
        s.register_buffer("masked_bias", torch.tensor(-1e4), persistent=False)
    def forward(s, x, attention_mask):
        B, T, C = x.size()
        q, k, v = s.c_attn(x).split(C, dim=2)
        sh = lambda t: t.view(B, T, s.h, C // s.h).permute(0, 2, 1, 3)
        q, k, v = sh(q), sh(k), sh(v)
        w = torch.matmul(q, k.transpose(-1, -2)) / torch.full([], v.size(-1) ** 0.5, dtype=x.dtype)
        causal = s.bias[:, :, :T, :T]
        mask_value = torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype)
        w = torch.where(causal, w.to(x.dtype), mask_value)
        w = w + attention_mask
        w = F.softmax(w, dim=-1)
        o = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous().view(B, T, C)
        return s.c_proj(o)

class GPT2(nn.Module):
    def __init__(s, V=50, d=32, n=16):
        super().__init__(); s.wte = nn.Embedding(V, d); s.wpe = nn.Embedding(n, d); s.ln = nn.LayerNorm(d); s.attn = GPT2Attn(d, 4, n)
        s.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d)); s.ln2 = nn.LayerNorm(d)
    def forward(s, input_ids, attention_mask):
        shape = input_ids.size(); input_ids = input_ids.view(-1, shape[-1])
        position_ids = torch.arange(0, shape[-1], dtype=torch.long).unsqueeze(0).view(-1, shape[-1])
        am = attention_mask.view(shape[0], -1)[:, None, None, :].to(torch.float32)
        am = (1.0 - am) * torch.finfo(torch.float32).min
        h = s.wte(input_ids) + s.wpe(position_ids)
        h = h + s.attn(s.ln(h), am)
        h = h + s.mlp(s.ln2(h))
        logits = h @ s.wte.weight.t()
        return logits, logits[:, -1].argmax(-1), torch.topk(logits[:, -1], 5).indices

class Bert(nn.Module):
    def __init__(s, V=40, d=32, n=16):
        super().__init__(); s.word = nn.Embedding(V, d, padding_idx=0); s.pos = nn.Embedding(n, d); s.tok = nn.Embedding(2, d); s.ln = nn.LayerNorm(d, eps=1e-12)
        s.register_buffer("position_ids", torch.arange(n).expand((1, -1)), persistent=False)
        s.enc = nn.TransformerEncoderLayer(d, 4, 64, batch_first=True, activation="gelu")
        s.pool = nn.Linear(d, d); s.cls = nn.Linear(d, 3)
    def forward(s, input_ids, token_type_ids, attention_mask):
        T = input_ids.size(1)
        e = s.word(input_ids) + s.pos(s.position_ids[:, :T]) + s.tok(token_type_ids)
        x = s.enc(s.ln(e), src_key_padding_mask=attention_mask == 0)
        pooled = torch.tanh(s.pool(x[:, 0]))
        logits = s.cls(pooled)
        return logits, F.cross_entropy(logits, torch.tensor([0, 2]), label_smoothing=0.1)

def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)

class Llama(nn.Module):
    def __init__(s, V=64, d=32, h=4, kvh=2, n=16):
        super().__init__(); s.h, s.kvh, s.hd = h, kvh, d // h
        s.emb = nn.Embedding(V, d); s.q = nn.Linear(d, d, bias=False); s.k = nn.Linear(d, kvh * s.hd, bias=False); s.v = nn.Linear(d, kvh * s.hd, bias=False)
        s.o = nn.Linear(d, d, bias=False); s.w = nn.Parameter(torch.ones(d)); s.gate = nn.Linear(d, 64, bias=False); s.up = nn.Linear(d, 64, bias=False); s.down = nn.Linear(64, d, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, s.hd, 2).float() / s.hd)); t = torch.arange(n).float(); fr = torch.outer(t, inv); emb = torch.cat((fr, fr), -1)
        s.register_buffer("cos", emb.cos(), persistent=False); s.register_buffer("sin", emb.sin(), persistent=False)
    def rms(s, x):
        var = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        return s.w * (x * torch.rsqrt(var + 1e-6)).to(x.dtype)
    def forward(s, ids, temperature):
        B, T = ids.shape
        x = s.emb(ids); hs = s.rms(x)
        q = s.q(hs).view(B, T, s.h, s.hd).transpose(1, 2); k = s.k(hs).view(B, T, s.kvh, s.hd).transpose(1, 2); v = s.v(hs).view(B, T, s.kvh, s.hd).transpose(1, 2)
        cos, sin = s.cos[:T][None, None], s.sin[:T][None, None]
        q = q * cos + rotate_half(q) * sin; k = k * cos + rotate_half(k) * sin
        rep = s.h // s.kvh
        k = k[:, :, None].expand(B, s.kvh, rep, T, s.hd).reshape(B, s.h, T, s.hd); v = torch.repeat_interleave(v, rep, dim=1)
        mask = torch.triu(torch.full((T, T), torch.finfo(torch.float32).min), diagonal=1)
        att = torch.softmax(q @ k.transpose(2, 3) / math.sqrt(s.hd) + mask, dim=-1, dtype=torch.float32).to(q.dtype)
        o = (att @ v).transpose(1, 2).reshape(B, T, -1)
        x = x + s.o(o)
        x = x + s.down(F.silu(s.gate(s.rms(x))) * s.up(s.rms(x)))
        logits = x @ s.emb.weight.T
        last = logits[:, -1, :] / temperature
        kth = torch.topk(last, 5)[0][..., -1, None]
        filtered = last.masked_fill(last < kth, float("-inf"))
        return F.softmax(filtered, -1), filtered.argmax(-1)

class ViT(nn.Module):
    def __init__(s, d=32):
        super().__init__(); s.patch = nn.Conv2d(3, d, 4, 4); s.cls = nn.Parameter(torch.zeros(1, 1, d)); s.pos = nn.Parameter(torch.randn(1, 17, d) * 0.02)
        s.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 4, 64, batch_first=True, norm_first=True, activation="gelu"), 2, enable_nested_tensor=False)
        s.head = nn.Linear(d, 10)
    def forward(s, img):
        x = s.patch(img).flatten(2).transpose(1, 2)
        x = torch.cat([s.cls.expand(x.shape[0], -1, -1), x], dim=1) + s.pos
        x = s.enc(x)
        return s.head(x[:, 0]).log_softmax(-1)


class HuggingFaceStyle(common.ComparedWithEager):
    def setUp(self):
        super().setUp()
        torch.manual_seed(0)
        self.ids = torch.randint(1, 40, (2, 12), generator=torch.Generator().manual_seed(1))
        self.mask = torch.ones(2, 12, dtype=torch.long)
        self.mask[1, 9:] = 0

    def test_gpt2(self):
        self.check(GPT2().eval(), (self.ids, self.mask))

    def test_bert(self):
        token_types = torch.zeros(2, 12, dtype=torch.long)
        token_types[:, 6:] = 1
        self.check(Bert().eval(), (self.ids, token_types, self.mask))

    def test_llama(self):
        for dtype in common.FLOAT_DTYPES:
            torch.manual_seed(0)
            self.check(Llama().eval().to(dtype), (self.ids[:, :10], torch.tensor(0.7, dtype=dtype)))

    def test_vit(self):
        for dtype in common.FLOAT_DTYPES:
            torch.manual_seed(0)
            self.check(ViT().eval().to(dtype), (common.seeded_randn(2, 3, 16, 16, seed=2).to(dtype),))


if __name__ == "__main__":
    unittest.main()
