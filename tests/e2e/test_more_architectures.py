#!/usr/bin/env python3
"""More architectures, each as its authors' code writes it (from memory, not a
dependency): a T5 self-attention block with bucketed relative position biases
(log, where, an embedding of the buckets added to the scores), a ConvNeXt block
(7x7 depthwise convolution, channels-last layer norm, layer scale), a
MobileNetV2 inverted residual (1x1 and depthwise convolutions, batch norm in
eval mode, ReLU6, adaptive pooling), LSTM and GRU cells unrolled over time, a
mixture-of-experts layer with top-2 routing (softmax, topk, renormalized
weights, a scatter into a routing matrix), a Whisper-style encoder front
(strided conv1d, sinusoidal positions, nn.MultiheadAttention with its
weights) and a CLIP contrastive loss (normalize, a learned temperature, cross
entropy both ways) and a DLRM interaction (embedding lookups stacked with a
dense projection, their pairwise dot products, the lower triangle picked out
with tril_indices). Each in f32 and bf16, with default and random parameters,
at -O0 and -O2, compared with eager.
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

class T5Attn(nn.Module):
    def __init__(s, d=32, h=4, buckets=8, maxd=16):
        super().__init__(); s.h=h; s.q=nn.Linear(d,d,bias=False); s.k=nn.Linear(d,d,bias=False); s.v=nn.Linear(d,d,bias=False); s.o=nn.Linear(d,d,bias=False)
        s.rel=nn.Embedding(buckets,h); s.nb=buckets; s.maxd=maxd
        s.ln_w = nn.Parameter(torch.ones(d))
    def bucket(s, rp):
        nb = s.nb // 2
        ret = (rp > 0).to(torch.long) * nb
        n = torch.abs(rp)
        max_exact = nb // 2
        is_small = n < max_exact
        large = max_exact + (torch.log(n.float() / max_exact) / math.log(s.maxd / max_exact) * (nb - max_exact)).to(torch.long)
        large = torch.min(large, torch.full_like(large, nb - 1))
        return ret + torch.where(is_small, n, large)
    def forward(s, x):
        B,T,D = x.shape
        var = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hx = x * torch.rsqrt(var + 1e-6)
        hx = s.ln_w * hx.to(x.dtype)
        ctx = torch.arange(T)[:, None]; mem = torch.arange(T)[None, :]
        bias = s.rel(s.bucket(mem - ctx)).permute(2,0,1).unsqueeze(0)
        sh = lambda t: t.view(B,T,s.h,-1).transpose(1,2)
        q,k,v = sh(s.q(hx)), sh(s.k(hx)), sh(s.v(hx))
        sc = torch.matmul(q, k.transpose(3,2)) + bias
        w = F.softmax(sc.float(), dim=-1).type_as(sc)
        o = torch.matmul(w, v).transpose(1,2).reshape(B,T,D)
        return x + s.o(o)

class ConvNeXtBlock(nn.Module):
    def __init__(s, c=16):
        super().__init__(); s.dw=nn.Conv2d(c,c,7,padding=3,groups=c); s.ln=nn.LayerNorm(c,eps=1e-6); s.p1=nn.Linear(c,4*c); s.p2=nn.Linear(4*c,c); s.g=nn.Parameter(1e-6*torch.ones(c))
    def forward(s, x):
        y = s.dw(x).permute(0,2,3,1)
        y = s.p2(F.gelu(s.p1(s.ln(y))))
        return x + (s.g*y).permute(0,3,1,2)

class MBV2(nn.Module):
    def __init__(s, c=8, e=4):
        super().__init__(); h=c*e
        s.f = nn.Sequential(nn.Conv2d(c,h,1,bias=False), nn.BatchNorm2d(h), nn.ReLU6(), nn.Conv2d(h,h,3,padding=1,groups=h,bias=False), nn.BatchNorm2d(h), nn.ReLU6(), nn.Conv2d(h,c,1,bias=False), nn.BatchNorm2d(c))
        s.pool = nn.AdaptiveAvgPool2d(1); s.fc = nn.Linear(c, 5)
    def forward(s, x):
        y = x + s.f(x)
        return s.fc(s.pool(y).flatten(1)).softmax(-1)

class LSTMUnrolled(nn.Module):
    def __init__(s, i=12, h=16):
        super().__init__(); s.cell=nn.LSTMCell(i,h); s.gru=nn.GRUCell(h,h); s.out=nn.Linear(h,3)
    def forward(s, x):
        B,T,_ = x.shape
        h = torch.zeros(B, s.cell.hidden_size, dtype=x.dtype); c = torch.zeros_like(h); g = torch.zeros_like(h)
        for t in range(T):
            h, c = s.cell(x[:, t], (h, c))
            g = s.gru(h, g)
        return s.out(g)

class MoE(nn.Module):
    def __init__(s, d=16, E=4, k=2):
        super().__init__(); s.router=nn.Linear(d,E,bias=False); s.k=k
        s.w1=nn.Parameter(torch.randn(E,d,32)*0.2); s.w2=nn.Parameter(torch.randn(E,32,d)*0.2)
    def forward(s, x):
        logits = s.router(x)
        probs = logits.softmax(-1)
        topv, topi = probs.topk(s.k, -1)
        topv = topv / topv.sum(-1, keepdim=True)
        out = torch.zeros_like(x)
        for e in range(s.w1.shape[0]):
            wgt = (topv * (topi == e).to(x.dtype)).sum(-1, keepdim=True)
            h = F.silu(x @ s.w1[e]) @ s.w2[e]
            out = out + wgt * h
        # also a scatter-based combination
        onehot = torch.zeros(x.shape[0], s.w1.shape[0], dtype=x.dtype).scatter_(1, topi, topv)
        return out, onehot, topi

class Whisperish(nn.Module):
    def __init__(s, n_mels=8, d=16):
        super().__init__(); s.c1=nn.Conv1d(n_mels,d,3,padding=1); s.c2=nn.Conv1d(d,d,3,stride=2,padding=1); s.ln=nn.LayerNorm(d)
        s.att = nn.MultiheadAttention(d, 2, batch_first=True)
    def forward(s, mel):
        x = F.gelu(s.c1(mel)); x = F.gelu(s.c2(x)).permute(0,2,1)
        T = x.shape[1]
        pos = torch.exp(-math.log(10000) * torch.arange(x.shape[2]//2) / (x.shape[2]//2-1))
        ang = torch.arange(T)[:, None] * pos[None, :]
        x = x + torch.cat([torch.sin(ang), torch.cos(ang)], 1).to(x.dtype)
        y = s.ln(x)
        a, w = s.att(y, y, y, need_weights=True)
        return x + a, w

class CLIPLoss(nn.Module):
    def __init__(s, d=16):
        super().__init__(); s.ip=nn.Linear(24,d,bias=False); s.tp=nn.Linear(20,d,bias=False); s.scale=nn.Parameter(torch.tensor(math.log(1/0.07)))
    def forward(s, img, txt):
        i = F.normalize(s.ip(img), dim=-1); t = F.normalize(s.tp(txt), dim=-1)
        logits = s.scale.exp() * i @ t.t()
        labels = torch.arange(img.shape[0])
        return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2, logits

class DLRMInteraction(nn.Module):
    def __init__(s, tables=3, rows=20, d=8, dense=5):
        super().__init__(); s.emb=nn.ModuleList([nn.Embedding(rows, d) for _ in range(tables)])
        s.bottom=nn.Linear(dense, d); s.top=nn.Linear(d + (tables + 1) * tables // 2, 1)
    def forward(s, dense, idx):
        xs = [F.relu(s.bottom(dense))] + [e(idx[:, i]) for i, e in enumerate(s.emb)]
        T = torch.stack(xs, 1)
        Z = T @ T.transpose(1, 2)
        li, lj = torch.tril_indices(T.shape[1], T.shape[1], offset=-1)
        ui = torch.triu_indices(T.shape[1], T.shape[1], 1, dtype=torch.int32)
        return torch.sigmoid(s.top(torch.cat([xs[0], Z[:, li, lj]], 1))), Z[:, ui[0].long(), ui[1].long()]

class MoreArchitectures(common.ComparedWithEager):
    def run_model(self, make, inputs_fn, dtypes=common.FLOAT_DTYPES):
        for dtype in dtypes:
            for seed in (None, 7):
                torch.manual_seed(0)
                m = make().eval()
                if seed is not None: common.randomize(m, seed)
                m = m.to(dtype)
                with self.subTest(dtype=str(dtype), seed=seed):
                    self.check(m, inputs_fn(dtype))
    def test_t5(self): self.run_model(T5Attn, lambda dt: (common.seeded_randn(2, 13, 32, seed=1).to(dt),))
    def test_convnext(self): self.run_model(ConvNeXtBlock, lambda dt: (common.seeded_randn(2, 16, 9, 11, seed=1).to(dt),))
    def test_mbv2(self): self.run_model(MBV2, lambda dt: (common.seeded_randn(2, 8, 10, 10, seed=1).to(dt),))
    def test_lstm(self): self.run_model(LSTMUnrolled, lambda dt: (common.seeded_randn(3, 5, 12, seed=1).to(dt),))
    def test_moe(self): self.run_model(MoE, lambda dt: (common.seeded_randn(37, 16, seed=1).to(dt),))
    def test_whisper(self): self.run_model(Whisperish, lambda dt: (common.seeded_randn(2, 8, 30, seed=1).to(dt),))
    def test_clip(self): self.run_model(CLIPLoss, lambda dt: (common.seeded_randn(9, 24, seed=1).to(dt), common.seeded_randn(9, 20, seed=2).to(dt)))
    def test_dlrm(self):
        idx = torch.randint(0, 20, (7, 3), generator=torch.Generator().manual_seed(3))
        self.run_model(DLRMInteraction, lambda dt: (common.seeded_randn(7, 5, seed=1).to(dt), idx))

if __name__ == "__main__":
    unittest.main()
