"""Small random-weight models for the end-to-end tests, the op-coverage list
and the benchmarks.

Each entry of MODELS is a ModelSpec: `spec.build(dtype, init)` returns
(module, example_inputs) with weights and inputs drawn from fixed seeds, so
every call gives the same numbers. Modules are in eval mode. Sizes are small
(hidden 64-128, sequence 16, batch 1-2) so the CPU-simulated device runs them
in seconds.

  llama   LLaMA-style decoder layer: RMSNorm written out
          (x * rsqrt(mean(x^2) + eps) * w, in f32 as HF LLaMA does),
          q/k/v/o projections without bias, rotary embedding (cos/sin buffers,
          rotate_half with slice, neg and cat), causal attention (matmul,
          masked_fill(-inf) with a boolean buffer, softmax in f32), SiLU-gated
          MLP, two residual adds.
  gpt2    GPT-2 block: LayerNorm, Conv1D projections as addmm(b, x, W), split
          into q/k/v, causal mask built with ones + tril + eq and applied with
          where(mask, scores, full([], min)), softmax, GELU(tanh) MLP.
  tel     torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, ff=128), eval,
          batch_first=False (sequence-major input).
  tel_bf  the same with batch_first=True. Its parameters require grad and the
          export runs with grad enabled, so PyTorch does not take the fused
          inference fast path (aten::_transformer_encoder_layer_fwd).
  mlp     Linear(64, 256) - ReLU - Linear(256, 256) - ReLU - Linear(256, 64).
  rmsnorm the project's headline: RMSNorm as six ATen ops (x*x, mean, + eps,
          rsqrt, x*rms, *weight) on 4x512; the one model the compiler already
          handles end to end, so it keeps the harness's passing path tested.

LlamaDecoderLayer, GPT2Block, RMSNorm, NaiveRMSNorm and Conv1D take
`device=`: with device="meta" their parameters have no storage (buffers are
still computed on the CPU), for fake-mode export with the weights as graph
inputs (neuroncc.workloads builds them at production sizes that way).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---------------------------------------------------------------------------
# LLaMA-style decoder layer

class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6, device=None):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, device=device))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaDecoderLayer(nn.Module):
    def __init__(self, hidden=128, heads=4, intermediate=256, max_seq=32, rope_base=10000.0, device=None):
        # device="meta": parameters without storage (for fake-mode export with
        # the weights as graph inputs); the rotary tables and the causal mask
        # are buffers computed on the CPU either way.
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.input_layernorm = RMSNorm(hidden, device=device)
        self.post_attention_layernorm = RMSNorm(hidden, device=device)
        self.q_proj = nn.Linear(hidden, hidden, bias=False, device=device)
        self.k_proj = nn.Linear(hidden, hidden, bias=False, device=device)
        self.v_proj = nn.Linear(hidden, hidden, bias=False, device=device)
        self.o_proj = nn.Linear(hidden, hidden, bias=False, device=device)
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False, device=device)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False, device=device)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False, device=device)
        inv_freq = 1.0 / (rope_base ** (torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim))
        freqs = torch.outer(torch.arange(max_seq, dtype=torch.float32), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos())
        self.register_buffer("sin_cached", emb.sin())
        self.register_buffer("causal_mask", torch.ones(max_seq, max_seq, dtype=torch.bool).triu(1))

    def attention(self, x):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        cos = self.cos_cached[:s].to(x.dtype)
        sin = self.sin_cached[:s].to(x.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(self.causal_mask[:s, :s], float("-inf"))
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, -1)
        return self.o_proj(out)

    def forward(self, x):
        h = x + self.attention(self.input_layernorm(x))
        m = self.post_attention_layernorm(h)
        return h + self.down_proj(F.silu(self.gate_proj(m)) * self.up_proj(m))


# ---------------------------------------------------------------------------
# GPT-2 block

class Conv1D(nn.Module):
    """HF GPT-2's Conv1D: y = x @ W + b with W stored (in, out)."""

    def __init__(self, nx, nf, device=None):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(nx, nf, device=device) * 0.02)
        self.bias = nn.Parameter(torch.randn(nf, device=device) * 0.02)

    def forward(self, x):
        shape = x.shape[:-1] + (self.weight.shape[1],)
        return torch.addmm(self.bias, x.view(-1, x.shape[-1]), self.weight).view(shape)


class GPT2Block(nn.Module):
    def __init__(self, hidden=128, heads=4, eps=1e-5, device=None):
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.hidden = hidden
        self.ln_1 = nn.LayerNorm(hidden, eps=eps, device=device)
        self.c_attn = Conv1D(hidden, 3 * hidden, device=device)
        self.attn_proj = Conv1D(hidden, hidden, device=device)
        self.ln_2 = nn.LayerNorm(hidden, eps=eps, device=device)
        self.c_fc = Conv1D(hidden, 4 * hidden, device=device)
        self.mlp_proj = Conv1D(4 * hidden, hidden, device=device)

    def split_heads(self, t):
        b, s, _ = t.shape
        return t.view(b, s, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def attention(self, x):
        b, s, _ = x.shape
        q, k, v = self.c_attn(x).split(self.hidden, dim=2)
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        causal = torch.tril(torch.ones(s, s, dtype=x.dtype, device=x.device)).eq(1)
        min_value = torch.full([], torch.finfo(scores.dtype).min, dtype=scores.dtype, device=x.device)
        scores = torch.where(causal, scores, min_value)
        probs = F.softmax(scores, dim=-1)
        out = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous().view(b, s, self.hidden)
        return self.attn_proj(out)

    def forward(self, x):
        h = x + self.attention(self.ln_1(x))
        return h + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(h)), approximate="tanh"))


# ---------------------------------------------------------------------------
# MLP

class MLP(nn.Module):
    def __init__(self, sizes=(64, 256, 256, 64)):
        super().__init__()
        layers = []
        for i in range(len(sizes) - 1):
            layers.append(nn.Linear(sizes[i], sizes[i + 1]))
            if i + 2 < len(sizes):
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class NaiveRMSNorm(nn.Module):
    def __init__(self, dim=512, eps=1e-6, device=None):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, device=device))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.weight


# ---------------------------------------------------------------------------
# Registry

def _randomize(module, seed):
    """Deterministic random weights: every parameter ~ N(0, 1/fan_in), norms' weights ~ 1 + N(0, 0.1)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() >= 2:
                fan_in = p.shape[1] if not isinstance(_owner(module, name), Conv1D) else p.shape[0]
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(fan_in))
            elif name.endswith("weight") and ("norm" in name or name.startswith("ln_") or name == "weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
    return module


def _owner(module, param_name):
    for part in param_name.split(".")[:-1]:
        module = getattr(module, part)
    return module


class ModelSpec:
    def __init__(self, name, make, input_shapes, input_names, seed, description):
        self.name = name
        self.make = make
        self.input_shapes = input_shapes
        self.input_names = input_names
        self.seed = seed
        self.description = description

    def build(self, dtype=torch.float32, init="random"):
        """(module in eval mode, example inputs), both in `dtype`, from fixed seeds.

        init="random": every parameter drawn at random (see _randomize);
        init="default": the parameters PyTorch's constructors give (norm
        weights of ones, zero biases, ...), as users have them.
        """
        if init not in INITS:
            raise ValueError("init must be one of %s" % ", ".join(INITS))
        torch.manual_seed(self.seed)
        module = self.make()
        if init == "random":
            module = _randomize(module, self.seed)
        module = module.eval().to(dtype)
        gen = torch.Generator().manual_seed(self.seed + 1)
        inputs = tuple(torch.randn(shape, generator=gen).to(dtype) for shape in self.input_shapes)
        return module, inputs


MODELS = {
    "llama": ModelSpec("llama", lambda: LlamaDecoderLayer(hidden=128, heads=4, intermediate=256, max_seq=32),
                       [(2, 16, 128)], ["x"], 1, "LLaMA-style decoder layer"),
    "gpt2": ModelSpec("gpt2", lambda: GPT2Block(hidden=128, heads=4),
                      [(2, 16, 128)], ["x"], 2, "GPT-2 block"),
    "tel": ModelSpec("tel", lambda: nn.TransformerEncoderLayer(64, 4, 128, dropout=0.1, batch_first=False),
                     [(16, 2, 64)], ["src"], 3, "nn.TransformerEncoderLayer, batch_first=False"),
    "tel_bf": ModelSpec("tel_bf", lambda: nn.TransformerEncoderLayer(64, 4, 128, dropout=0.1, batch_first=True),
                        [(2, 16, 64)], ["src"], 4, "nn.TransformerEncoderLayer, batch_first=True"),
    "mlp": ModelSpec("mlp", lambda: MLP((64, 256, 256, 64)), [(2, 64)], ["x"], 5, "MLP with ReLU"),
    "rmsnorm": ModelSpec("rmsnorm", lambda: NaiveRMSNorm(512), [(4, 512)], ["x"], 6, "RMSNorm as six ATen ops"),
}

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
INITS = ("random", "default")


def reference(module, inputs):
    """Eager outputs (a flat tuple) under the settings export_aten traces with: grad enabled."""
    with torch.enable_grad():
        out = module(*inputs)
    flat, _ = torch.utils._pytree.tree_flatten(out)
    return tuple(t.detach() for t in flat)
