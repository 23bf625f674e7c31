#!/usr/bin/env python3
"""graph_fuzz: a differential fuzzer of neuron-cc against PyTorch eager.

Each case is a small random graph, written as an nn.Module whose forward is a
sequence of PyTorch calls chosen so that the exporter (tools/python/neuroncc/
export.py, make_fx on torch 1.13) turns them into the ATen overloads that
`neuron-cc list-operators --framework ATEN` prints. The case is exported
(params="constants"), compiled with `neuron-cc compile g.pb --framework ATEN
--target trn1 -O<n>` for every --opt level, run with `neuron-run`, and each
output is compared with eager PyTorch (same dtype) and with a float64
reference computed from the same rounded inputs and parameters.

Usage
-----
  /usr/bin/python3 tests/fuzz/graph_fuzz.py [--seed S] [--cases N] [--jobs J]
      [--opt 0,2] [--dtypes f32,bf16,f16] [--out DIR] [--minimize|--no-minimize]
      [--timeout T | --compile-timeout T --run-timeout T] [--only I[,J...]] [--focus GEN[,GEN...]]
      [--allowed FILE] [--keep] [-v]
  /usr/bin/python3 tests/fuzz/graph_fuzz.py --ctest      # fixed seed, 300 cases, no minimization
  /usr/bin/python3 tests/fuzz/graph_fuzz.py --gen-only --cases 2000   # generator self-check: export only

Case i of seed S is generated from the seed S*1000003+i, so `--seed S --only i`
re-runs exactly that case. The tools come from $NEURONCC_BUILD_DIR/bin (default
build/bin), as in tools/python/neuroncc/toolchain.py.

What a case contains
--------------------
Inputs of rank 0 to 5 whose dims are drawn from {1, 2, 3, 4, 5, 7, 8, 16, 31,
64, 127, 128, 129, 200, 256, 513} (rows not a multiple of 128; 1-sized dims),
at most ~64k elements per tensor; 5% of the cases start from rows of 30000
elements (beyond the SBUF row budget); a quarter start from a matmul operand
with M and K drawn from {1, 7, 127, 128, 129, 513}. Operators:
unary (neg exp log rsqrt sqrt tanh sigmoid relu silu gelu pow abs sin cos clamp),
binary Tensor ops with broadcasting and alpha (and maximum/minimum), Scalar overloads (add/sub/mul/div.Scalar,
rsub.Scalar, Python-scalar operands), comparisons (.Tensor and .Scalar)
feeding where, masked_fill or a cast, masks combined with | & ^ ~ and
logical_or/and/xor/not, causal masks from tril/triu of constants
or from arange comparisons, bool casts of computed floats (x.bool(),
relu(x).bool(), masked x .bool(), (x > c).to(dtype)), sum/mean/amax/var_mean
over any set of dims (int, tuple or list; keepdim both ways; var_mean with
correction 0/1 or unbiased=) and over every dim with no dim argument
(x.sum(), x.mean(), x.amax(), torch.var_mean(x), aten::sum/aten::mean), also
of 0-d values (dim 0/-1), torch.logsumexp (decomposed by the exporter into
amax, abs, eq, masked_fill, sub, exp, sum, log, add), reductions with
keepdim=False brought back by unsqueeze/[..., None]/view or plain broadcasting
and combined with their operand (x - x.amax(-1).unsqueeze(-1),
exp(x - amax), (x - mean) * rsqrt(var + eps)), softmax/log_softmax over any
dim, layer_norm (also native_layer_norm with its mean/rstd results), rms_norm
(also with a weight of another float dtype), mm/addmm/linear/bmm (a fifth of
the bmms of 32 to 1024 small matrices), matmul of 3-D/4-D by 2-D and 4-D by
4-D, attention softmax(scale * q @ k^T [masked]) @ v (queries and keys up
to 513, head dims up to 130; no mask, a constant causal mask by
masked_fill(-inf) or where(finfo.min / -1e4), another mask, or an added bias;
-O2 makes it one flash-attention kernel; `--focus attention` draws it 25
times as often), embedding (int64 or int32 indices), cat (also
of operands of different float dtypes, and of constants made in forward),
split/chunk, select, slice/narrow, tril/triu of computed values, the rotary
embedding on a head-split view (of an input or of a projection),
permute/transpose/t/view/reshape/flatten/unsqueeze/squeeze/expand/clone
between ops, arange/full/ones/zeros/scalar_tensor constants, parameters and
buffers that are random, splat (zeros, ones, full(c)), arange-valued or small
integers (a Linear with zero bias, a LayerNorm weight of ones), and dtype
casts between f32, bf16 and f16. A norm, softmax or activation read only by
a linear or matmul (`--focus prologue`: -O2 computes it in the matmul's
kernel), and values with no elements (`--focus empty`: an empty slice in a
cat, summed over and added back, the input of a K = 0 linear, or a value of
its own). Operators no other generator makes (`--focus catalog`): more
elementwise functions, the discontinuous ones (floor, round, fmod, sign...)
on exact values or far from their jumps, reductions (median, prod, std/var,
norms, argmax of exact values), losses, and structure ops (trace, diag,
rot90, repeat, scatters, addmv/addr/baddbmm, cdist, windows, linspace).
Image and sequence ops on [N, C, H, W] and [N, C, L] values (inputs or
computed ones; `--focus spatial`): conv1d/conv2d (stride, padding 'same' or
numeric, dilation, depthwise groups, with and without bias), max and average
pooling (padding, dilation, ceil mode, count_include_pad, divisor_override),
adaptive average and max pooling, interpolate (nearest, linear, bilinear and
bicubic, align_corners both ways, by scale or size), pad (constant, reflect,
replicate), batch norm in eval mode, group norm (one group or one per
channel), pixel_shuffle, pixel_unshuffle, channel_shuffle and unfold; 3-d
forms of convolution, pooling and interpolation, and transposed convolutions. Values are used more than once; graphs
return several outputs, sometimes a view chain (permute/transpose/reshape...)
of a computed value (with or without its base), a graph input as is, a
constant (made in forward, or a parameter), the same value twice.

aten::rms_norm does not exist in torch 1.13: the generator calls a custom op
`ncfuzz::rms_norm` with the schema and CPU semantics of torch >= 2.5's
aten::rms_norm (input upcast to f32, default eps = f32 machine epsilon, weight
applied before the cast back) and renames the node to aten::rms_norm in the
exported graph. Likewise aten::reshape, which make_fx always decomposes into
_reshape_alias/_unsafe_view, comes from a custom `ncfuzz::reshape`. Every
other overload of the list comes from plain PyTorch calls.

Generator limitations (on purpose): graph inputs are float tensors, int32/int64
embedding indices, small int32/int64 tensors used in arithmetic (g_int_input)
and uint8/int8/int16 tensors (g_narrow_int),
and graph outputs are float only (integer outputs are tested in
tests/e2e/test_fuzz_regressions.py; bool graph I/O is documented as
unsupported); no float64 values,
no empty tensors, no float->int casts of computed values (documented as
unsupported too); comparisons (and bool casts) read either values that are
exact on every side (inputs, constants, arange, small-integer arithmetic,
views of those) or computed values none of whose elements is near the
threshold (Builder.robust_vs: farther than 4x eager's deviation from float64
plus 16 units of roundoff), because a comparison of rounded intermediates
flips on ties and would be noise; reductions with a `dtype=` argument and
softmax with `dtype=` are not generated (the importer refuses reduction
dtypes); ops the exporter maps outside the list (var, max.dim, softplus...)
are not generated; no in-place ops or mutated inputs; 90% of operands depend
on a graph input (computations on parameters or constants alone are rare in
models); f16 eager uses the emulation below for ops without a CPU kernel in
torch 1.13. Every exported graph is checked against the list: a node outside
it counts as export-skip (a generator bug), as does an exporter exception.

Tolerances
----------
For an output y with eager result e (same dtype) and float64 reference r:
    rel(y, e) = max|y - e| / max|e| over the finite elements (absolute when
    e is all zero); NaN and +-inf positions must match exactly; integers exact.
An output passes when rel(y, e) <= TOL or rel(y, r) <= TOL, with TOL chosen
by the lowest-precision float dtype in the output's computation:
  f32  TOL 1e-4   (as tests/e2e: eager f32 is within a few ulps per op of
                   float64; the compiled program sums in another order and
                   uses other transcendental approximations, a few f32 ulps
                   (6e-8) per op; 1e-4 leaves >100x for that, while a wrong
                   element is off by O(1) of the output's scale.)
  bf16 TOL 2^-5   (as tests/e2e/test_models.py: u = 2^-9 per rounding; eager
                   rounds after every op, the compiled program at its kernel
                   boundaries, so each can be several u from float64 and the
                   two differ by at most the sum.)
  f16  TOL 2^-7   (the bf16 bound scaled to f16's u = 2^-11: 16 u.)
Eager for f16/bf16 ops that torch 1.13's CPU lacks ("not implemented for
'Half'": exp, softmax, layer_norm, addmm...) is emulated by a dispatch mode
(LowPrecisionEager below): the op runs in f32 on the same values and its
result is rounded once to the input dtype, as PyTorch's GPU kernels do.
The generator keeps graphs well conditioned so that these bounds hold: every
intermediate value is computed both in eager (case dtype) and in float64 while
the graph is built, and an op is not added when
  - eager and float64 disagree by more than COND = TOL/4 (relative, as above),
    i.e. the graph would amplify rounding beyond what the tolerance allows
    (cancellations, layer norm of near-constant rows, x - big + big...);
  - float64 moves by more than COND once the device's roundings are modelled:
    every op's result moved by the case dtype's unit roundoff (random signs),
    the moved values carried from statement to statement (a first-order
    propagation of rounding). A cancellation amplifies the roundings before it
    even when eager happens to land close to float64 (a variance near 1 minus
    1; a bf16 layer norm's roundings in a projection that cancels, then
    x * rsqrt(x^2 + eps));
  - a value has a NaN, non-finite positions that differ between eager and
    float64, or finite magnitude above 3e4 (f16) / 1e6 (others);
  - a bool or integer value differs between eager and float64 (a comparison
    that would flip under rounding);
  - a sum or mean (and a returned layer-norm mean) cancels so far that the
    device's float32 accumulation (32 interleaved lanes, docs/runtime.md) may
    miss the result by more than COND: sqrt(n) * 2^-24 * sum|x| > COND *
    max|sum x| (the bound of a sequential sum, which covers the lanes).
    Eager sums pairwise and would not show it.
The reference therefore measures the rounding sensitivity of the case, and
an output outside TOL of both eager and float64 is a real mismatch.

Classes
-------
pass; wrong (numerics, NaN/inf positions, shape or output count mismatch);
crash (negative exit status/signal, 'internal compiler error', 'invalid NEFF',
an assertion, 'LLVM ERROR', 'Stack dump', a Python traceback from the tools,
a non-zero exit without an error message, or neuron-cc exiting 0 without
'Compiler status PASS'); refusal (non-zero exit with an `error` message);
allowed refusal (a refusal whose first error line matches one of the
`match:` patterns of docs/unsupported.md, the documented limitations); timeout; export-skip (the exporter failed or
the graph uses an operator outside the list: a generator bug, reported with
its count). A case's class is the worst over its opt levels (crash > wrong >
timeout > refusal > allowed refusal > export-skip > pass). The exit status is
1 when any case is wrong, crash, refusal or timeout.

Minimization (--minimize, the default outside --ctest): for each distinct
failure signature (class + stage + first error line with node names, kernel
names, paths and numbers masked, plus the crashing function from the stack
dump; for wrong: the kind of mismatch), the first failing case (for wrong:
the first --wrong-repros cases, then grouped by the operators left in the
minimized graph, since one 'numerics' signature covers different bugs) is
reduced greedily (drop outputs, bypass or replace ops, shrink each dim
symbol) while the signature stays the same (for wrong: the mismatch persists
on a graph that still passes the conditioning checks). The result is written
under --out as <signature>-case<i>/repro.py (standalone: model, inputs, exact
commands, comparison), commands.sh, graph.pb and the input .npy files, and
case_source.py (the failing program before minimization; the summary flags a
seed that generated another program for the minimizer), with
results.jsonl (every case: class, messages, wall time per stage) and
repros.json. --ctest without --out keeps no files.
"""
import argparse
import collections
import copy
import json
import math
import multiprocessing
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import types
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tools", "python"))

warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from neuroncc import export as ex  # noqa: E402
from neuroncc import toolchain  # noqa: E402

ALLOWED_PATH = os.path.join(HERE, "..", "..", "docs", "unsupported.md")
CTEST_SEED = 20240
CTEST_CASES = 300
ELEMENT_LIMIT = 70000          # elements per tensor (a 513 x 129 operand is 66177)
DTYPE_CHOICES = ("f32", "bf16", "f16")
CLASSES = ("pass", "wrong", "crash", "allowed refusal", "refusal", "timeout", "export-skip")
FAILING = ("wrong", "crash", "refusal", "timeout")
SEVERITY = {"crash": 6, "wrong": 5, "timeout": 4, "refusal": 3, "allowed refusal": 2, "export-skip": 1, "pass": 0}

# ---------------------------------------------------------------------------
# Code shared by the fuzzer and every reproducer it writes (exec'd here, pasted there).

PRELUDE = r'''
import torch
import torch.nn.functional as F
import torch.utils._python_dispatch
import torch.utils._pytree
import numpy as np
aten = torch.ops.aten
F32, BF16, F16, I64, I32 = torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32
REAL_DTYPES = dict(F32=F32, BF16=BF16, F16=F16)


def make_tensor(kind, shape, dtype, seed, arg=None):
    """Deterministic test data: kind normal|unit|pos|int|zeros|ones|full|arange|index."""
    g = torch.Generator().manual_seed(int(seed))
    shape = tuple(int(d) for d in shape)
    if kind == "index":
        return torch.randint(0, int(arg), shape, generator=g, dtype=torch.int64).to(dtype)
    if kind == "normal":
        t = torch.randn(shape, generator=g, dtype=torch.float64) * (1.0 if arg is None else arg)
    elif kind == "unit":
        t = 2 * torch.rand(shape, generator=g, dtype=torch.float64) - 1
    elif kind == "pos":
        t = 0.5 + 1.5 * torch.rand(shape, generator=g, dtype=torch.float64)
    elif kind == "int":
        t = torch.randint(-4, 5, shape, generator=g).to(torch.float64)
    elif kind == "zeros":
        t = torch.zeros(shape, dtype=torch.float64)
    elif kind == "ones":
        t = torch.ones(shape, dtype=torch.float64)
    elif kind == "full":
        t = torch.full(shape, float(arg), dtype=torch.float64)
    elif kind == "arange":
        n = 1
        for d in shape:
            n *= d
        t = (torch.arange(n, dtype=torch.float64) % 64 - 32).reshape(shape) * (1.0 if arg is None else arg)
    else:
        raise ValueError(kind)
    return t.to(dtype)


# torch 1.13's CPU median.dim and nanmedian.dim misread a reduced dim of stride 0 (an
# expanded operand): they return values from outside the row, uninitialized memory among
# them, which differ from run to run (graph_fuzz 97989900 case 296). Both modes below give
# these ops a contiguous copy.
MISREADS_STRIDE0 = (aten.median.dim, aten.nanmedian.dim)


def readable_args(func, args):
    if func in MISREADS_STRIDE0 and args and isinstance(args[0], torch.Tensor):
        return (args[0].contiguous(),) + tuple(args[1:])
    return args


class LowPrecisionEager(torch.utils._python_dispatch.TorchDispatchMode):
    """Eager for f16/bf16 ops that torch 1.13's CPU lacks ('not implemented for Half'):
    computes the op in f32 and rounds its float results once to the input dtype, as
    PyTorch's GPU kernels (and its CPU kernels that exist) do. Ops that have a kernel
    run unchanged, but for readable_args. The float64 references run under it too,
    for readable_args."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        args = readable_args(func, args)
        try:
            return func(*args, **kwargs)
        except (RuntimeError, NotImplementedError) as e:
            # Only a missing kernel ("... not implemented for 'Half'"), never a dtype mismatch.
            low = [d for d, n in ((torch.float16, "Half"), (torch.bfloat16, "BFloat16"))
                   if "not implemented for '%s'" % n in str(e)]
            if not low:
                raise
        low = low[0]
        tmap = torch.utils._pytree.tree_map
        up = lambda t: t.float() if isinstance(t, torch.Tensor) and t.dtype == low else t
        out = func(*tmap(up, args), **tmap(up, kwargs))
        return tmap(lambda t: t.to(low) if isinstance(t, torch.Tensor) and t.dtype == torch.float32 else t, out)


# aten::rms_norm (torch >= 2.4) as a custom op with the same schema and the CPU
# semantics of torch >= 2.5; the fuzzer renames ncfuzz::rms_norm to
# aten::rms_norm in the exported graph.
if not hasattr(torch.ops.ncfuzz, "rms_norm"):
    _ncfuzz_lib = torch.library.Library("ncfuzz", "DEF")
    _ncfuzz_lib.define("rms_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor")

    def _rms_norm_impl(x, normalized_shape, weight=None, eps=None):
        dims = tuple(range(-len(normalized_shape), 0))
        up = x.float() if x.dtype in (torch.bfloat16, torch.float16) else x
        eps = torch.finfo(torch.float32).eps if eps is None else eps
        y = up * torch.rsqrt(up.pow(2).mean(dims, keepdim=True) + eps)
        if weight is not None:
            y = y * weight
        return y.to(x.dtype)

    _ncfuzz_lib.impl("rms_norm", _rms_norm_impl, "CPU")
    # aten::reshape is CompositeImplicit: make_fx records _reshape_alias/_unsafe_view
    # instead. ncfuzz::reshape (a copy with reshape's schema) is renamed to aten::reshape.
    _ncfuzz_lib.define("reshape(Tensor self, int[] shape) -> Tensor")
    _ncfuzz_lib.impl("reshape", lambda x, shape: x.reshape(shape).clone(), "CPU")


def rms_norm(x, normalized_shape, weight=None, eps=None):
    return torch.ops.ncfuzz.rms_norm(x, list(normalized_shape), weight, eps)


def aten_reshape(x, shape):
    return torch.ops.ncfuzz.reshape(x, list(shape))


def rename_custom_ops(graph):
    for node in graph.nodes:
        if node.target.startswith("ncfuzz::"):
            node.target = "aten::" + node.target[len("ncfuzz::"):]


# Tolerances (see the fuzzer's docstring): keyed by the unit roundoff of the
# lowest-precision float dtype an output depends on.
TOL = {"f32": 1e-4, "bf16": 2.0 ** -5, "f16": 2.0 ** -7}


def rel_error(y, e):
    """(kind, value): kind None when comparable, else 'shape'/'nan'/'inf'/'int'."""
    y = np.asarray(y)
    e = np.asarray(e)
    if y.shape != e.shape:
        return "shape", "output shape %s, expected %s" % (y.shape, e.shape)
    if not np.issubdtype(e.dtype, np.floating):
        if not np.array_equal(y.astype(np.float64), e.astype(np.float64)):
            return "int", "%d of %d integer elements differ" % (int(np.sum(y.astype(np.float64) != e)), e.size)
        return None, 0.0
    y = y.astype(np.float64)
    e = e.astype(np.float64)
    if not np.array_equal(np.isnan(y), np.isnan(e)):
        return "nan", "NaN positions differ (%d vs %d NaNs)" % (np.isnan(y).sum(), np.isnan(e).sum())
    iy, ie = np.isinf(y), np.isinf(e)
    if not np.array_equal(iy, ie) or not np.array_equal(y[iy], e[ie]):
        return "inf", "infinities differ (%d vs %d)" % (iy.sum(), ie.sum())
    fin = np.isfinite(e)
    if not fin.any():
        return None, 0.0
    scale = float(np.max(np.abs(e[fin])))
    err = float(np.max(np.abs(y[fin] - e[fin])))
    return None, (err / scale if scale > 0 else err)


def check_output(y, eager, ref, tol):
    """None if y is within tol of eager or of the float64 reference, else (kind, message)."""
    k1, v1 = rel_error(y, eager)
    k2, v2 = rel_error(y, ref)
    if k1 is None and v1 <= tol:
        return None
    if k2 is None and v2 <= tol:
        return None
    if k1 is not None:
        return k1, v1
    if k2 is not None and k2 != "shape":
        return k2, v2 + " (vs float64)"
    return "numerics", "max|y-eager|/max|eager| = %.3g, vs float64 %.3g, > %.3g" % (
        v1, v2 if k2 is None else float("nan"), tol)


def to_device_numpy(t):
    t = t.detach()
    return t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()
'''

P = {}
exec(compile(PRELUDE, "<graph_fuzz prelude>", "exec"), P)
REF_DTYPES = dict(F32=torch.float64, BF16=torch.float64, F16=torch.float64)
DTYPE_NAME = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16",
              torch.int64: "I64", torch.int32: "I32", torch.bool: "torch.bool", torch.int16: "torch.int16",
              torch.int8: "torch.int8", torch.uint8: "torch.uint8"}
CASE_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
PREC_KEY = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}
PREC_ORDER = {"f32": 0, "f16": 1, "bf16": 2}


def worse_prec(a, b):
    return a if PREC_ORDER[a] >= PREC_ORDER[b] else b


COND = {k: v / 4 for k, v in P["TOL"].items()}
UNIT_ROUNDOFF = {"f32": 2.0 ** -24, "bf16": 2.0 ** -9, "f16": 2.0 ** -12}
MAG = {"f32": 1e6, "bf16": 1e6, "f16": 3e4}

# ---------------------------------------------------------------------------
# Symbolic shapes: a dim is a sorted tuple of symbol names (their product),
# () is 1. A symbol is a base size (shrinkable) or derived by an expression
# of other symbols (a cat's sum, a slice's length).

DIM_POOL = [(1, 10), (2, 6), (3, 8), (4, 5), (5, 4), (7, 6), (8, 4), (16, 4), (31, 3), (64, 3),
            (127, 4), (128, 4), (129, 4), (200, 3), (256, 2), (513, 2)]
SMALL_POOL = [(1, 3), (2, 4), (3, 4), (4, 2), (5, 2), (7, 2), (8, 1)]
MATMUL_DIMS = [1, 7, 127, 128, 129, 513]
SMALL_MATMUL_DIMS = [1, 3, 16, 33, 64, 128, 300]
SCALARS = [0.5, 2.0, -1.5, 3, -2, 0.1, 1e-3, 1e-6, 100.0, 0.0, 1.0, -0.25]
EXACT_THRESHOLDS = [0.0, 0.5, -0.5, 1.0, 0.25, -1.0, 2.0]
VAR_RE = re.compile(r"self\.p\d+|\b[xvt]\d+\b")
SYM_RE = re.compile(r"#\{(.*?)\}")


def dim_expr(d):
    return "*".join(d) if d else "1"


def shape_src(shape):
    parts = ["#{%s}" % dim_expr(d) for d in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def dims_list_src(shape):
    return "[" + ", ".join("#{%s}" % dim_expr(d) for d in shape) + "]"


def mul_dim(a, b):
    return tuple(sorted(a + b))


def broadcast(s1, s2):
    out = []
    for i in range(max(len(s1), len(s2))):
        a = s1[len(s1) - 1 - i] if i < len(s1) else ()
        b = s2[len(s2) - 1 - i] if i < len(s2) else ()
        if a == b or b == ():
            out.append(a)
        elif a == ():
            out.append(b)
        else:
            return None
    return tuple(reversed(out))


class Reject(Exception):
    """The candidate op is invalid or ill-conditioned; try another."""


class GenBug(Exception):
    """The generator's symbolic shape disagrees with eager (a bug in this file)."""


class Var:
    def __init__(self, name, kind, shape=None, dtype=None, attrs=None):
        self.name, self.kind, self.shape, self.dtype = name, kind, shape, dtype
        self.attrs = dict(attrs or {})

    def __repr__(self):
        return "Var(%s, %s, %s)" % (self.name, self.shape, self.dtype)


class Program:
    """A case: symbols, inputs, parameters, statements, outputs."""

    def __init__(self, seed, dtype):
        self.seed = seed
        self.dtype = dtype                 # "f32" | "bf16" | "f16"
        self.syms = collections.OrderedDict()   # name -> {"value": int} | {"expr": str}
        self.inputs = []                   # dicts: name, shape, dtype, kind, arg, seed
        self.params = []                   # dicts: name ("self.pK"), shape, dtype, kind, arg, seed, buffer
        self.stmts = []                    # dicts: outs [names], expr
        self.vars = {}                     # name -> Var
        self.outputs = []
        self.counter = 0
        self.notes = []

    def fresh(self, prefix):
        self.counter += 1
        return "%s%d" % (prefix, self.counter)

    def env(self):
        env = {}
        for name, s in self.syms.items():
            if "value" in s:
                env[name] = s["value"]
            else:
                env[name] = int(eval(s["expr"], {"min": min, "max": max}, dict(env)))
        return env

    def render(self, text, env):
        def sub(m):
            v = eval(m.group(1), {"min": min, "max": max, "math": math}, env)
            return repr(v) if isinstance(v, float) else str(int(v))
        return SYM_RE.sub(sub, text)

    def eval_shape(self, shape, env):
        return tuple(int(np.prod([env[a] for a in d])) if d else 1 for d in shape)

    def deps(self, expr):
        return VAR_RE.findall(expr)

    def dce(self):
        live = set(self.outputs)
        keep = []
        for s in reversed(self.stmts):
            if any(o in live for o in s["outs"]):
                keep.append(s)
                live.update(self.deps(s["expr"]))
        self.stmts = list(reversed(keep))
        self.inputs = [i for i in self.inputs if i["name"] in live]
        self.params = [p for p in self.params if p["name"] in live]
        # symbols stay (harmless); drop vars that are gone
        names = {i["name"] for i in self.inputs} | {p["name"] for p in self.params}
        for s in self.stmts:
            names.update(s["outs"])
        self.vars = {k: v for k, v in self.vars.items() if k in names}

    # -- source ---------------------------------------------------------------
    def tensor_ctor(self, spec, env):
        shape = self.eval_shape(spec["shape"], env)
        arg = spec.get("arg")
        if isinstance(arg, str):
            arg = eval(self.render(arg, env))
        return "make_tensor(%r, %r, %s, %d%s)" % (spec["kind"], shape, DTYPE_NAME[spec["dtype"]], spec["seed"],
                                                 "" if arg is None else ", %r" % (arg,))

    def source(self, env):
        lines = ["class Model(torch.nn.Module):", "    def __init__(self):", "        super().__init__()"]
        for p in self.params:
            attr = p["name"].split(".", 1)[1]
            ctor = self.tensor_ctor(p, env)
            if p["buffer"]:
                lines.append("        self.register_buffer(%r, %s)" % (attr, ctor))
            else:
                lines.append("        self.%s = torch.nn.Parameter(%s, requires_grad=False)" % (attr, ctor))
        lines.append("")
        lines.append("    def forward(self%s):" % "".join(", " + i["name"] for i in self.inputs))
        for s in self.stmts:
            lhs = ", ".join(s["outs"])
            lines.append("        %s = %s" % (lhs, self.render(s["expr"], env)))
        lines.append("        return (%s)" % "".join(o + ", " for o in self.outputs).rstrip())
        return "\n".join(lines) + "\n"

    def inputs_source(self, env):
        return "def make_inputs():\n    return (%s)\n" % "".join(
            "\n        %s," % self.tensor_ctor(i, env) for i in self.inputs)

    def make_values(self, spec, env):
        shape = self.eval_shape(spec["shape"], env)
        arg = spec.get("arg")
        if isinstance(arg, str):
            arg = eval(self.render(arg, env))
        return P["make_tensor"](spec["kind"], shape, spec["dtype"], spec["seed"], arg)


# ---------------------------------------------------------------------------
# Evaluation: every statement in eager (case dtype) and float64, with checks.

# Ops whose float results are their inputs' values or exact functions of them: not rounded by
# RoundingModel (ops whose results alias their inputs, views, are recognized by their schema;
# "reshape" is the fuzzer's ncfuzz::reshape, a copy).
EXACT_OPS = {"clone", "_to_copy", "copy", "cat", "stack", "index_select", "gather", "index", "take", "slice",
             "split", "where", "masked_fill", "max", "min", "amax", "amin", "maximum", "minimum", "relu",
             "abs", "neg", "sort", "topk", "kthvalue", "median", "nanmedian", "flip", "roll", "repeat",
             "constant_pad_nd", "floor", "ceil", "round", "trunc", "sign", "sgn", "clamp", "clamp_min",
             "clamp_max", "zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "empty",
             "new_zeros", "new_ones", "new_full", "arange", "tril", "triu", "embedding", "scatter",
             "index_put", "fill", "cummax", "cummin", "max_pool2d_with_indices", "_unsafe_view",
             "reshape"}


def rounded_like(t, u, gen):
    """t (float64) with each element moved by u relative, random signs: one rounding to a dtype
    of unit roundoff u."""
    return t * (1 + u * (torch.randint(0, 2, t.shape, generator=gen, dtype=torch.float64) * 2 - 1))


class RoundingModel(torch.utils._python_dispatch.TorchDispatchMode):
    """float64 evaluation with each op's float result moved by the unit roundoff `u` of the case
    dtype (relative, random signs): its roundings on the device, for check_sensitivity."""

    def __init__(self, u, gen):
        super().__init__()
        self.u, self.gen = u, gen

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*P["readable_args"](func, args), **(kwargs or {}))
        schema = func._schema
        if any(r.alias_info is not None for r in schema.returns) or \
                schema.name.split("::")[-1].rstrip("_") in EXACT_OPS:
            return out

        return torch.utils._pytree.tree_map(
            lambda t: rounded_like(t, self.u, self.gen)
            if isinstance(t, torch.Tensor) and t.dtype == torch.float64 and t.numel() else t, out)


class Evaluator:
    """Holds the eager and float64 values of a program's vars."""

    def __init__(self, prog, env, level="full"):
        self.prog = prog
        self.env = env
        self.level = level           # "full": conditioning checks; "run": only needs to execute
        self.real = {}
        self.ref = {}
        # float64 values with the device's roundings modelled (the unit roundoff of every op,
        # random signs) and carried through the statements that read them (check_sensitivity)
        self.pert = {}
        self.g_real = dict(P)
        self.g_ref = dict(P)
        self.g_ref.update(REF_DTYPES)
        self.self_real = types.SimpleNamespace()
        self.self_ref = types.SimpleNamespace()

    def add_input(self, spec):
        t = self.prog.make_values(spec, self.env)
        self._check_size(t)
        self.real[spec["name"]] = t
        self.ref[spec["name"]] = t.double() if t.is_floating_point() else t

    def add_param(self, spec):
        t = self.prog.make_values(spec, self.env)
        self._check_size(t)
        attr = spec["name"].split(".", 1)[1]
        setattr(self.self_real, attr, t)
        setattr(self.self_ref, attr, t.double() if t.is_floating_point() else t)

    def _check_size(self, t):
        if t.numel() == 0 or t.numel() > ELEMENT_LIMIT:
            raise Reject("size %s" % (tuple(t.shape),))

    def run_stmt(self, stmt, metas=None):
        """Evaluates one statement; metas (Var list) are checked against the results."""
        expr = self.prog.render(stmt["expr"], self.env)
        loc_real = dict(self.real)
        loc_real["self"] = self.self_real
        loc_ref = dict(self.ref)
        loc_ref["self"] = self.self_ref
        try:
            with torch.no_grad():
                with P["LowPrecisionEager"]():
                    r = eval(expr, self.g_real, loc_real)
                with P["LowPrecisionEager"]():
                    f = eval(expr, self.g_ref, loc_ref)
        except Reject:
            raise
        except Exception as e:  # noqa: BLE001 - an invalid op for these shapes
            raise Reject("eager raises: %s" % str(e).splitlines()[0][:120]) from None
        outs = stmt["outs"]
        if len(outs) == 1:
            r, f = [r], [f]
        else:
            r, f = list(r), list(f)
            if len(r) != len(outs):
                raise Reject("tuple arity")
        for i, name in enumerate(outs):
            var = metas[i] if metas else self.prog.vars.get(name)
            self.check(var, r[i], f[i])
            self.real[name] = r[i]
            self.ref[name] = f[i]
        if self.level == "full":
            self.check_sensitivity(stmt, expr, outs, f, metas)

    def check_sensitivity(self, stmt, expr, outs, f, metas):
        """Rejects a statement whose float64 result moves by more than COND when the roundings
        of the case dtype are modelled: the device and eager may each round a value an ulp
        apart, and a cancellation after it (a variance near 1 minus ones, graph_fuzz 46464646
        case 188) amplifies that beyond the tolerance although eager itself happens to land
        close to float64. The statement is evaluated in float64 again with the result of every
        op inside it moved by the dtype's unit roundoff (half an ulp, random signs: the device's
        rounding; ops that alias, select or exactly transform their inputs are left alone) and
        with its computed operands at the moved values their statements left, which are kept
        in turn for the statements that read this one: a first-order propagation of rounding.
        So a bf16 layer norm's roundings shift the dot product of a projection that cancels (by
        far more than an ulp of its result), and x * rsqrt(x^2 + eps) after it, which turns that
        into an error of the output's order, is not added (graph_fuzz 60606060 case 1234). Exact values (inputs, parameters, exact ops
        of exact values) are the same bits on the device and are not moved."""
        for name in outs:
            self.pert.pop(name, None)
        out_vars = [metas[i] if metas else self.prog.vars.get(name) for i, name in enumerate(outs)]
        if all(v is not None and v.attrs.get("exact") for v in out_vars):
            return
        gen = torch.Generator().manual_seed(len(self.ref) * 7919 + len(expr))
        moved = {}
        for name in self.prog.deps(stmt["expr"]):
            var = self.prog.vars.get(name)
            x = self.ref.get(name)
            if var is None or var.attrs.get("exact") or not isinstance(x, torch.Tensor) or not x.is_floating_point():
                continue
            if name in self.pert:
                moved[name] = self.pert[name]
            else:
                moved[name] = rounded_like(x, UNIT_ROUNDOFF.get(var.attrs.get("prec", self.prog.dtype), 2.0 ** -24), gen)
        precs = [v.attrs.get("prec", self.prog.dtype) for v in out_vars if v is not None]
        u = max(UNIT_ROUNDOFF.get(p, 2.0 ** -24) for p in precs or [self.prog.dtype])
        loc = dict(self.ref)
        loc.update(moved)
        loc["self"] = self.self_ref
        try:
            with torch.no_grad(), RoundingModel(u, gen):
                g = eval(expr, self.g_ref, loc)
        except Exception:  # noqa: BLE001 - evaluated once already; a moved operand left the domain
            raise Reject("ill-conditioned (an operand an ulp away raises)") from None
        g = [g] if len(outs) == 1 else list(g)
        for i, name in enumerate(outs):
            a, b = f[i], g[i]
            if not isinstance(a, torch.Tensor) or not a.is_floating_point() or a.numel() == 0:
                continue
            if not isinstance(b, torch.Tensor) or b.shape != a.shape:
                continue
            fin = torch.isfinite(a) & torch.isfinite(b)
            if fin.any():
                var = out_vars[i]
                prec = var.attrs.get("prec", self.prog.dtype) if var is not None else self.prog.dtype
                scale = float(a[fin].abs().max())
                err = float((a[fin] - b[fin]).abs().max())
                if err > COND[prec] * scale + 1e-30:
                    raise Reject("ill-conditioned (sensitive to the rounding of its operands: %.3g)"
                                 % (err / max(scale, 1e-300)))
            if out_vars[i] is not None and not out_vars[i].attrs.get("exact"):
                self.pert[name] = b

    def check(self, var, r, f):
        if var.kind == "tuple":
            if not isinstance(r, (tuple, list)):
                raise GenBug("%s: expected a tuple" % var.name)
            for x in r:
                self._check_size(x)
            return
        if not isinstance(r, torch.Tensor):
            raise GenBug("%s: not a tensor" % var.name)
        want = self.prog.eval_shape(var.shape, self.env)
        if tuple(r.shape) != want:
            raise GenBug("%s: shape %s, symbolic %s = %s" % (var.name, tuple(r.shape), var.shape, want))
        if var.dtype is not None and r.dtype != var.dtype:
            raise Reject("dtype changed")
        self._check_size(r) if r.dim() > 0 else None
        if self.level != "full":
            return
        if r.dtype == torch.bool or not r.is_floating_point():
            if not torch.equal(r.to(torch.float64), f.to(torch.float64)):
                raise Reject("integer/bool value differs from float64")
            return
        rd = r.double()
        if torch.isnan(rd).any():
            raise Reject("NaN")
        if torch.isnan(f).any():
            raise Reject("NaN in float64")
        inf_r, inf_f = torch.isinf(rd), torch.isinf(f)
        if not torch.equal(inf_r, inf_f) or not torch.equal(rd[inf_r], f[inf_f]):
            raise Reject("non-finite positions differ")
        prec = var.attrs.get("prec", self.prog.dtype)
        fin = torch.isfinite(f)
        if fin.any():
            ff, rr = f[fin], rd[fin]
            scale = float(ff.abs().max())
            if scale > MAG[prec]:
                raise Reject("magnitude")
            err = float((rr - ff).abs().max())
            rel = err / scale if scale > 0 else err
            if rel > COND[prec]:
                raise Reject("ill-conditioned (%.3g)" % rel)


def evaluate_program(prog, env, level="full"):
    ev = Evaluator(prog, env, level)
    for spec in prog.inputs:
        ev.add_input(spec)
    for spec in prog.params:
        ev.add_param(spec)
    for s in prog.stmts:
        ev.run_stmt(s)
    return ev


# ---------------------------------------------------------------------------
# The generator

class Builder:
    def __init__(self, seed, dtype, supported):
        self.rng = random.Random(seed)
        self.prog = Program(seed, dtype)
        self.dt = CASE_DTYPES[dtype]
        self.supported = supported
        self.ev = Evaluator(self.prog, {}, "full")
        self.seed_counter = 0
        self.genbugs = []

    # -- state -----------------------------------------------------------------
    def checkpoint(self):
        p = self.prog
        return (len(p.syms), len(p.inputs), len(p.params), len(p.stmts), set(p.vars), p.counter,
                dict(self.ev.real), dict(self.ev.ref), dict(vars(self.ev.self_real)), dict(vars(self.ev.self_ref)),
                dict(self.ev.env), self.seed_counter)

    def rollback(self, cp):
        p = self.prog
        nsym, nin, npar, nst, names, counter, real, ref, sr, sf, env, sc = cp
        for k in list(p.syms)[nsym:]:
            del p.syms[k]
        del p.inputs[nin:]
        del p.params[npar:]
        del p.stmts[nst:]
        p.vars = {k: v for k, v in p.vars.items() if k in names}
        p.counter = counter
        self.ev.real, self.ev.ref = real, ref
        self.ev.self_real = types.SimpleNamespace(**sr)
        self.ev.self_ref = types.SimpleNamespace(**sf)
        self.ev.env = env
        self.seed_counter = sc

    def next_seed(self):
        self.seed_counter += 1
        return (self.prog.seed * 7919 + self.seed_counter * 104729) % (2 ** 31 - 1)

    # -- symbols -----------------------------------------------------------------
    def sym(self, value):
        name = "D%d" % len(self.prog.syms)
        self.prog.syms[name] = {"value": int(value)}
        self.ev.env[name] = int(value)
        return name

    def derived(self, expr):
        name = "D%d" % len(self.prog.syms)
        self.prog.syms[name] = {"expr": expr}
        env = self.ev.env
        v = int(eval(expr, {"min": min, "max": max}, dict(env)))
        if v <= 0:
            raise Reject("empty derived dim")
        env[name] = v
        return name

    def dim_val(self, d):
        return int(np.prod([self.ev.env[a] for a in d])) if d else 1

    def numel(self, shape):
        return int(np.prod([self.dim_val(d) for d in shape])) if shape else 1

    def draw(self, pool=DIM_POOL, limit=ELEMENT_LIMIT):
        vals = [v for v, _ in pool if v <= limit]
        ws = [w for v, w in pool if v <= limit]
        if not vals:
            return 1
        return self.rng.choices(vals, ws)[0]

    def new_dim(self, pool=DIM_POOL, limit=ELEMENT_LIMIT):
        v = self.draw(pool, limit)
        return () if v == 1 and self.rng.random() < 0.5 else (self.sym(v),)

    def random_shape(self, rank, limit=ELEMENT_LIMIT, pool=DIM_POOL):
        shape = []
        left = limit
        for _ in range(rank):
            d = self.new_dim(pool, max(1, left))
            left //= max(1, self.dim_val(d))
            shape.append(d)
        self.rng.shuffle(shape)
        return tuple(shape)

    # -- vars ---------------------------------------------------------------------
    def new_input(self, shape, dtype=None, kind=None, arg=None):
        dtype = dtype or self.dt
        kind = kind or self.rng.choices(["normal", "unit", "pos", "int"], [6, 2, 2, 2])[0]
        name = self.prog.fresh("x")
        spec = dict(name=name, shape=shape, dtype=dtype, kind=kind, arg=arg, seed=self.next_seed())
        self.ev.add_input(spec)
        self.prog.inputs.append(spec)
        exact = True
        self.prog.vars[name] = Var(name, "tensor", shape, dtype, dict(
            exact=exact, intval=kind in ("int",), contig=True, const=False, input=True, live=True,
            prec=PREC_KEY.get(dtype, self.prog.dtype)))
        self._value_attrs(name)
        return name

    def new_param(self, shape, dtype=None, kind=None, arg=None, buffer=None):
        dtype = dtype or self.dt
        kind = kind or self.rng.choices(["normal", "zeros", "ones", "full", "arange", "int", "unit"],
                                        [6, 1, 1, 1, 1, 1, 1])[0]
        if kind == "full" and arg is None:
            arg = self.rng.choice([0.5, -2.0, 3.0, 0.125])
        if kind == "arange" and arg is None:
            arg = self.rng.choice([1.0, 0.0625])
        name = "self.p%d" % len(self.prog.params)
        while name in self.prog.vars:
            name = "self.p%d" % (int(name[6:]) + 1)
        if buffer is None:
            buffer = self.rng.random() < 0.3
        spec = dict(name=name, shape=shape, dtype=dtype, kind=kind, arg=arg, seed=self.next_seed(), buffer=buffer)
        self.ev.add_param(spec)
        self.prog.params.append(spec)
        attr = name.split(".", 1)[1]
        self.ev.real[name] = getattr(self.ev.self_real, attr)
        self.ev.ref[name] = getattr(self.ev.self_ref, attr)
        intval = kind in ("int", "zeros", "ones") or (kind == "full" and float(arg).is_integer()) or \
            (kind == "arange" and arg == 1.0)
        self.prog.vars[name] = Var(name, "tensor", shape, dtype, dict(
            exact=True, intval=intval, contig=True, const=True, param=True, live=False, prec=PREC_KEY.get(dtype, self.prog.dtype)))
        self._value_attrs(name)
        return name

    def _value_attrs(self, name):
        var = self.prog.vars[name]
        t = self.ev.real[name] if name in self.ev.real else None
        if t is None or not isinstance(t, torch.Tensor):
            return
        if t.is_floating_point():
            td = t.double()
            fin = td[torch.isfinite(td)]
            var.attrs["maxabs"] = float(fin.abs().max()) if fin.numel() else 0.0
            var.attrs["pos"] = bool(fin.numel() == td.numel() and float(td.min()) > 0.05)
            var.attrs["nz"] = bool(fin.numel() == td.numel() and float(td.abs().min()) > 0.1)
            var.attrs["finite"] = bool(fin.numel() == td.numel())
            if var.attrs.get("intval") and var.attrs["maxabs"] > 64:
                var.attrs["intval"] = False
        else:
            var.attrs["maxabs"] = float(t.double().abs().max()) if t.numel() else 0.0

    def add(self, expr, shapes, attrs=None, tuple_n=None, prefix="v"):
        """Adds `outs = expr`; shapes: one symbolic shape per output (or tuple_n for a tuple var)."""
        attrs = dict(attrs or {})
        deps = self.prog.deps(expr)
        for d in deps:
            if d not in self.prog.vars:
                raise GenBug("unknown var %s in %s" % (d, expr))
        prec = attrs.pop("prec", None)      # given: the precision the caller knows (exact operands)
        if prec is None:
            prec = self.prog.dtype
            for d in deps:
                prec = worse_prec(prec, self.prog.vars[d].attrs.get("prec", prec))
        attrs["live"] = any(self.prog.vars[d].attrs.get("live") for d in deps)
        if tuple_n is not None:
            name = self.prog.fresh("t")
            # live like its operands: the tuple's items (var_mean, native_layer_norm, split) are
            # picked and returned as often as any other value.
            metas = [Var(name, "tuple", attrs=dict(n=tuple_n, prec=prec, live=attrs["live"]))]
        else:
            metas = [Var(self.prog.fresh(prefix), "tensor", s, None, dict(attrs)) for s in shapes]
        stmt = dict(outs=[m.name for m in metas], expr=expr)
        self.ev.run_stmt(stmt, metas)
        for m in metas:
            if m.kind == "tensor":
                t = self.ev.real[m.name]
                m.dtype = t.dtype
                if t.is_floating_point():
                    m.attrs["prec"] = worse_prec(prec, PREC_KEY[t.dtype])
                else:
                    m.attrs["prec"] = prec
                m.attrs.setdefault("exact", False)
                m.attrs.setdefault("contig", True)
                m.attrs.setdefault("const", False)
                if m.attrs["exact"]:
                    r, f = self.ev.real[m.name], self.ev.ref[m.name]
                    if not torch.equal(r.double(), f.double()):
                        m.attrs["exact"] = False
                        m.attrs["intval"] = False
            self.prog.vars[m.name] = m
            self._value_attrs(m.name)
        self.prog.stmts.append(stmt)
        return metas[0].name if len(metas) == 1 else [m.name for m in metas]

    def v(self, name):
        return self.prog.vars[name]

    def tensors(self, pred=None):
        out = []
        for name, var in self.prog.vars.items():
            if var.kind != "tensor":
                continue
            if pred is None or pred(var):
                out.append(name)
        return out

    def pick(self, pred=None, recent=True):
        """An existing value; 90% of the time one that depends on a graph input (computing on
        parameters or constants alone is rare in models, and the compiler refuses much of it)."""
        cands = self.tensors(pred)
        if not cands:
            return None
        live = [c for c in cands if self.prog.vars[c].attrs.get("live")]
        if live and self.rng.random() < 0.9:
            cands = live
        if recent:
            weights = [1 + 2 * i for i in range(len(cands))]
            return self.rng.choices(cands, weights)[0]
        return self.rng.choice(cands)

    def check_sum(self, a, dims=None):
        """Rejects a sum (or mean) of `a` over `dims` (None: all) that the device's float32
        accumulation, in sequence as docs/runtime.md specifies, may not get within COND of the
        result: a typical error of sqrt(n) * 2^-24 * sum|x| against max |sum x| (a mean of
        normalized values plus a small constant cancels down to the constant). A computed bf16 or
        f16 operand adds its own rounding: the compiled program and eager may round an element
        one ulp apart (both within half an ulp of the exact value), so u * sqrt(sum x^2), with u
        the dtype's unit roundoff, is a typical difference of the sums (graph_fuzz 18181818 case
        893: a bf16 layer norm's row sum, -0.2568 against eager's -0.2510, two elements one
        ulp apart)."""
        if self.ev.level != "full":
            return
        x = self.ev.ref.get(a)
        if x is None or not x.is_floating_point() or x.dim() == 0:
            return
        rank = x.dim()
        ds = sorted({d % rank for d in dims}) if dims else list(range(rank))
        n = 1
        for d in ds:
            n *= x.shape[d]
        if n <= 1:
            return
        total, spread = x.sum(ds), x.abs().sum(ds)
        bound = float(spread.max()) * math.sqrt(n) * 2.0 ** -24
        unit = {"bf16": 2.0 ** -9, "f16": 2.0 ** -12}.get(self.v(a).attrs.get("prec"))
        if unit and not self.v(a).attrs.get("exact"):
            bound += unit * float(x.pow(2).sum(ds).sqrt().max())
        scale = float(total.abs().max())
        if bound > COND[self.v(a).attrs.get("prec", self.prog.dtype)] * max(scale, 1e-30):
            raise Reject("ill-conditioned sum")

    def pick_float(self, pred=None):
        return self.pick(lambda v: v.dtype is not None and v.dtype.is_floating_point and (pred is None or pred(v)))

    # -- helpers producing values ---------------------------------------------
    def ensure_pos(self, a):
        var = self.v(a)
        if var.attrs.get("pos"):
            return a
        choices = ["torch.sigmoid(%s) + 0.5" % a, "%s * %s + 1.0" % (a, a)]
        if var.attrs.get("maxabs", 99) < 8:
            choices.append("torch.exp(%s)" % a)
        return self.add(self.rng.choice(choices), [var.shape])

    def ensure_nonzero(self, a):
        if self.v(a).attrs.get("nz"):
            return a
        return self.ensure_pos(a)

    def robust_vs(self, a, c=0.0):
        """True when comparing value a with the scalar c cannot flip under rounding: a is exact,
        or every element is farther from c than the rounding the compiled program may do
        differently from eager (4x eager's largest deviation from float64 plus 16 units of
        roundoff of the element)."""
        var = self.v(a)
        if var.attrs.get("exact"):
            return True
        r, f = self.ev.real[a].double(), self.ev.ref[a].double()
        if not bool(torch.isfinite(f).all()):
            return False
        u = {"f32": 2.0 ** -24, "bf16": 2.0 ** -8, "f16": 2.0 ** -11}[var.attrs.get("prec", self.prog.dtype)]
        err = float((r - f).abs().max()) if f.numel() else 0.0
        scale = float(f.abs().max()) if f.numel() else 0.0
        dist = (f - c).abs()
        margin = 4 * err + 16 * u * f.abs() + 1e-6 * scale + 1e-30
        return bool((dist > margin).all())

    def partner(self, a, allow_bigger=True):
        """A value broadcast-compatible with a (new or existing)."""
        sa = self.v(a).shape
        r = self.rng.random()
        if r < 0.3:
            def ok(v):
                if v.name == a or not v.dtype.is_floating_point:
                    return False
                b = broadcast(sa, v.shape)
                return b is not None and (allow_bigger or b == sa) and self.numel(b) <= ELEMENT_LIMIT
            c = self.pick(ok)
            if c is not None:
                return c
        if r < 0.38:
            return a
        bshape = self.derive_broadcast(sa)
        r = self.rng.random()
        if r < 0.35:
            return self.new_input(bshape)
        if r < 0.6:
            return self.new_param(bshape)
        if r < 0.8:
            return self.const_value(bshape)
        # a reduction of a with keepdim (the normalization pattern)
        if not sa:
            return a
        dims = sorted(self.rng.sample(range(len(sa)), self.rng.randint(1, len(sa))))
        kind = self.rng.choice(["sum", "mean", "amax"])
        shape = tuple(() if i in dims else d for i, d in enumerate(sa))
        return self.add("%s.%s(dim=%s, keepdim=True)" % (a, kind, tuple(dims)), [shape],
                        dict(exact=kind == "amax" and self.v(a).attrs.get("exact", False)))

    def derive_broadcast(self, shape):
        s = list(shape)
        drop = self.rng.choice([0, 0, 0, 1, 2])
        s = s[min(drop, len(s)):]
        s = [() if self.rng.random() < 0.3 else d for d in s]
        return tuple(s)

    def const_value(self, shape):
        """A constant made in forward: full/ones/zeros/scalar_tensor/arange."""
        dtn = DTYPE_NAME[self.dt]
        r = self.rng.random()
        if r < 0.2 and shape and shape[-1]:
            n = shape[-1]
            nsrc = "#{%s}" % dim_expr(n)
            variant = self.rng.randrange(5)
            if variant == 0:
                e = "torch.arange(%s, dtype=%s)" % (nsrc, dtn)
            elif variant == 1:
                e = "torch.arange(%s).to(%s)" % (nsrc, dtn)
            elif variant == 2:
                e = "torch.arange(1, %s + 1, dtype=%s)" % (nsrc, dtn)
            elif variant == 3:
                e = "torch.arange(0, 2 * %s, 2, dtype=%s)" % (nsrc, dtn)
            else:
                e = "torch.arange(%s, 0, -1).to(%s)" % (nsrc, dtn)
            if self.rng.random() < 0.5:
                e = "(%s * 0.015625)" % e
            return self.add(e, [(n,)], dict(exact=True, intval=" * 0.0" not in e, const=True))
        if r < 0.35:
            c = self.rng.choice([2.0, -0.5, 0.25, 3.0])
            return self.add("torch.scalar_tensor(%r, dtype=%s)" % (c, dtn), [()], dict(exact=True, intval=float(c).is_integer(), const=True))
        kind = self.rng.choice(["full", "ones", "zeros"])
        if kind == "full":
            c = self.rng.choice([0.5, -2.0, 3.0, 1.5, 1e-3])
            return self.add("torch.full(%s, %r, dtype=%s)" % (shape_src(shape), c, dtn), [shape],
                            dict(exact=True, intval=float(c).is_integer(), const=True))
        return self.add("torch.%s(%s, dtype=%s)" % (kind, shape_src(shape), dtn), [shape],
                        dict(exact=True, intval=True, const=True))

    def to_rank2(self, a):
        """a as a 2-D value (M, K): reshape(-1, K) of a rank >= 2 value, unsqueeze(0) of a vector."""
        var = self.v(a)
        s = var.shape
        if len(s) == 2:
            return a
        if len(s) == 1:
            return self.add("%s.unsqueeze(0)" % a, [((), s[0])], dict(exact=var.attrs.get("exact")))
        if len(s) == 0:
            return self.add("%s.reshape(1, 1)" % a, [((), ())], dict(exact=var.attrs.get("exact")))
        m = ()
        for d in s[:-1]:
            m = mul_dim(m, d)
        return self.add("%s.reshape(-1, #{%s})" % (a, dim_expr(s[-1])), [(m, s[-1])], dict(exact=var.attrs.get("exact")))


# ---------------------------------------------------------------------------
# Op generators: each adds statements through Builder.add or raises Reject.

def g_unary(b):
    a = b.pick_float()
    var = b.v(a)
    ops = ["neg", "exp", "log", "rsqrt", "sqrt", "tanh", "sigmoid", "relu", "silu", "gelu", "pow", "abs", "abs"]
    ops += [o for o in ("sin", "cos", "clamp") if "aten::" + o in b.supported]
    # Imported as compositions (compiler/ComposedOps.cpp).
    ops += [o for o in ("erf", "expm1", "log1p", "softplus", "elu", "reciprocal") if "aten::" + o in b.supported]
    op = b.rng.choice(ops)
    attrs = {}
    # sin and cos pass on their argument's absolute error: keep it small (a
    # large computed argument differs from float64's by more than the tolerance).
    if op in ("sin", "cos") and b.v(a).attrs.get("maxabs", 99) > 8:
        a = b.add("torch.tanh(%s) * 3.0" % a, [var.shape])
    if op in ("log", "rsqrt", "sqrt", "log1p"):
        a = b.ensure_pos(a)
    if op == "reciprocal":
        a = b.ensure_nonzero(a)
    if op in ("exp", "expm1", "softplus", "elu") and b.v(a).attrs.get("maxabs", 99) > 6:
        a = b.add("torch.tanh(%s) * 3.0" % a, [var.shape])
    shape = b.v(a).shape
    if op == "neg":
        e = b.rng.choice(["-%s", "torch.neg(%s)"]) % a
        attrs = dict(exact=b.v(a).attrs.get("exact"), intval=b.v(a).attrs.get("intval"))
    elif op == "relu":
        e = b.rng.choice(["torch.relu(%s)", "F.relu(%s)"]) % a
        attrs = dict(exact=b.v(a).attrs.get("exact"), intval=b.v(a).attrs.get("intval"))
    elif op == "abs":
        e = b.rng.choice(["torch.abs(%s)", "%s.abs()", "abs(%s)"]) % a
        attrs = dict(exact=b.v(a).attrs.get("exact"), intval=b.v(a).attrs.get("intval"))
    elif op == "gelu":
        e = b.rng.choice(["F.gelu(%s)", "F.gelu(%s, approximate='tanh')"]) % a
    elif op == "silu":
        e = "F.silu(%s)" % a
    elif op == "softplus":
        e = b.rng.choice(["F.softplus(%s)", "F.softplus(%s, beta=2.0, threshold=4.0)"]) % a
    elif op == "elu":
        e = b.rng.choice(["F.elu(%s)", "F.elu(%s, alpha=0.5)", "F.selu(%s)", "F.celu(%s, alpha=2.0)"]) % a
    elif op == "reciprocal":
        e = b.rng.choice(["torch.reciprocal(%s)", "%s.reciprocal()"]) % a
    elif op == "clamp":
        lo, hi = b.rng.choice([(-0.5, 0.75), (0.0, None), (None, 1.0), (-1.0, 1.0)])
        e = b.rng.choice(["torch.clamp(%s, %r, %r)" % (a, lo, hi), "%s.clamp(min=%r, max=%r)" % (a, lo, hi)])
        attrs = dict(exact=b.v(a).attrs.get("exact"))
    elif op == "sigmoid":
        e = b.rng.choice(["torch.sigmoid(%s)", "%s.sigmoid()"]) % a
    elif op == "pow":
        p = b.rng.choice([2, 3, 0.5, -1.0, 1.5, -0.5, 2.0])
        if not float(p).is_integer() or p < 0:
            a = b.ensure_pos(a)
        if b.v(a).attrs.get("maxabs", 99) > 30:
            raise Reject("pow of a large value")
        e = b.rng.choice(["%s ** %r", "torch.pow(%s, %r)"]) % (a, p)
        if p in (2, 3) and b.v(a).attrs.get("intval"):
            attrs = dict(exact=b.v(a).attrs.get("exact"), intval=True)
    else:
        e = "torch.%s(%s)" % (op, a)
    b.add(e, [shape], attrs)


def g_binary(b):
    a = b.pick_float()
    o = b.partner(a)
    ops = ["add", "sub", "mul", "div", "add_alpha", "sub_alpha"]
    ops += [o for o in ("maximum", "minimum") if "aten::" + o in b.supported]
    op = b.rng.choice(ops)
    if op == "div":
        o = b.ensure_nonzero(o)
    if b.rng.random() < 0.06 and b.v(o).dtype != torch.float32:   # mixed dtypes: promotion to f32
        o = b.add("%s.to(F32)" % o, [b.v(o).shape], dict(exact=b.v(o).attrs.get("exact"), intval=b.v(o).attrs.get("intval")))
    sa, so = b.v(a).shape, b.v(o).shape
    shape = broadcast(sa, so)
    if shape is None:
        raise GenBug("partner not broadcastable")
    x, y = (a, o) if b.rng.random() < 0.7 or op == "div" else (o, a)
    forms = {"add": ["%s + %s", "torch.add(%s, %s)"], "sub": ["%s - %s", "torch.sub(%s, %s)"],
             "mul": ["%s * %s", "torch.mul(%s, %s)"], "div": ["%s / %s", "torch.div(%s, %s)"],
             "add_alpha": ["torch.add(%s, %s, alpha=2.0)", "torch.add(%s, %s, alpha=0.5)"],
             "sub_alpha": ["torch.sub(%s, %s, alpha=2)", "torch.sub(%s, %s, alpha=0.25)"],
             "maximum": ["torch.maximum(%s, %s)", "torch.max(%s, %s)"],
             "minimum": ["torch.minimum(%s, %s)", "torch.min(%s, %s)"]}
    e = b.rng.choice(forms[op]) % (x, y)
    ints = b.v(a).attrs.get("intval") and b.v(o).attrs.get("intval") and op in ("add", "sub", "mul", "maximum", "minimum") and \
        b.v(a).attrs.get("exact") and b.v(o).attrs.get("exact")
    b.add(e, [shape], dict(exact=bool(ints), intval=bool(ints)))


def g_scalar(b):
    a = b.pick_float()
    c = b.rng.choice(SCALARS)
    forms = ["%s + {c}", "%s - {c}", "%s * {c}", "{c} - %s", "torch.rsub(%s, {c})",
             "aten.add.Scalar(%s, {c})", "aten.sub.Scalar(%s, {c})", "aten.mul.Scalar(%s, {c})",
             "torch.add(%s, {c}, alpha=2)"]
    if c != 0:
        forms += ["%s / {c}", "aten.div.Scalar(%s, {c})"]
    form = b.rng.choice(forms)
    e = form.replace("{c}", repr(c)) % a
    ints = b.v(a).attrs.get("intval") and b.v(a).attrs.get("exact") and float(c).is_integer() and "/" not in form \
        and "div" not in form
    b.add(e, [b.v(a).shape], dict(exact=bool(ints), intval=bool(ints)))


def computed_mask(b, target_shape):
    """A bool value broadcastable to target_shape from a computed (rounded) float: x > c, x.bool(),
    relu(x).bool(), masked x .bool(); only when no element is near the threshold (Builder.robust_vs).
    None when there is no such value."""
    x = b.pick_float(lambda v: not v.attrs.get("exact") and broadcast(target_shape, v.shape) == target_shape)
    if x is None:
        return None
    sx = b.v(x).shape
    mode = b.rng.choice(["cmp", "cmp", "bool", "relu_bool", "masked_bool"])
    if mode == "cmp":
        cands = [c for c in EXACT_THRESHOLDS if b.robust_vs(x, c)]
        if not cands:
            return None
        c = b.rng.choice(cands)
        cmp = b.rng.choice(["gt", "ge", "lt", "le", "ne", "eq"])
        sym = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "eq": "==", "ne": "!="}[cmp]
        e = b.rng.choice(["(%s %s %r)" % (x, sym, c), "torch.%s(%s, %r)" % (cmp, x, c), "%s.%s(%r)" % (x, cmp, c)])
        return b.add(e, [sx], dict(exact=True))
    if not b.robust_vs(x, 0.0):
        return None
    if mode == "relu_bool":
        x = b.add("torch.relu(%s)" % x, [sx])
    elif mode == "masked_bool":   # zeros from an exact mask, the rest robustly nonzero
        m = make_mask(b, sx, computed=False)
        if b.rng.random() < 0.5:
            x = b.add("%s.masked_fill(%s, 0.0)" % (x, m), [sx])
        else:
            x = b.add("torch.where(%s, %s, 0.0)" % (m, x), [broadcast(b.v(m).shape, sx)])
    e = b.rng.choice(["%s.bool()", "%s.to(torch.bool)"]) % x
    return b.add(e, [b.v(x).shape], dict(exact=True))


def make_mask(b, target_shape, computed=True):
    """A bool value broadcastable to target_shape (simple_mask), sometimes two of them combined
    with |, &, ^ (or logical_or/and/xor) or one negated with ~ (or logical_not)."""
    m = simple_mask(b, target_shape, computed)
    r = b.rng.random()
    if r < 0.15 and "aten::bitwise_or.Tensor" in b.supported and "aten::logical_or" in b.supported:
        o = simple_mask(b, target_shape, computed)
        shape = broadcast(b.v(m).shape, b.v(o).shape)
        if shape is not None and broadcast(target_shape, shape) == target_shape:
            op = b.rng.choice(["|", "&", "^"])
            fn = {"|": "torch.logical_or", "&": "torch.logical_and", "^": "torch.logical_xor"}[op]
            e = b.rng.choice(["(%s %s %s)" % (m, op, o), "%s(%s, %s)" % (fn, m, o)])
            return b.add(e, [shape], dict(exact=True))
    elif r < 0.22 and "aten::bitwise_not" in b.supported and "aten::logical_not" in b.supported:
        e = b.rng.choice(["(~%s)" % m, "torch.logical_not(%s)" % m])
        return b.add(e, [b.v(m).shape], dict(exact=True))
    return m


def simple_mask(b, target_shape, computed=True):
    """A bool value broadcastable to target_shape: from exact values (inputs, constants, arange,
    small-integer arithmetic) or, when computed, also from a computed float far from the threshold."""
    r = b.rng.random()
    if computed and 0.25 <= r < 0.65:
        m = computed_mask(b, target_shape)
        if m is not None:
            return m
    exact_pred = lambda v: v.attrs.get("exact") and v.kind == "tensor" and v.dtype != torch.bool and \
        broadcast(target_shape, v.shape) == target_shape
    if r < 0.2 and len(target_shape) >= 2 and target_shape[-1] and target_shape[-2]:
        m, n = target_shape[-2], target_shape[-1]
        k = b.rng.choice([0, 0, 1, -1])
        tri = b.rng.choice(["tril", "triu"])
        if b.rng.random() < 0.5:
            e = "torch.ones(#{%s}, #{%s}, dtype=torch.bool).%s(%d)" % (dim_expr(m), dim_expr(n), tri, k)
        else:
            e = "(torch.ones(#{%s}, #{%s}).%s(%d) > 0.5)" % (dim_expr(m), dim_expr(n), tri, k)
        return b.add(e, [(m, n)], dict(exact=True, const=True))
    if r < 0.3 and len(target_shape) >= 2 and target_shape[-1] and target_shape[-2]:
        m, n = target_shape[-2], target_shape[-1]
        op = b.rng.choice([">=", "<=", ">", "<"])
        e = "(torch.arange(#{%s}).unsqueeze(1) %s torch.arange(#{%s}).unsqueeze(0))" % (dim_expr(m), op, dim_expr(n))
        return b.add(e, [(m, n)], dict(exact=True))
    a = b.pick(exact_pred) if r < 0.7 else None
    if a is None:
        a = b.new_input(b.derive_broadcast(target_shape), kind=b.rng.choice(["int", "normal", "unit"]))
    sa = b.v(a).shape
    cmp = b.rng.choice(["gt", "ge", "lt", "le", "eq", "ne"])
    sym = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "eq": "==", "ne": "!="}[cmp]
    if b.rng.random() < 0.5:
        o = b.pick(lambda v: v.attrs.get("exact") and v.dtype != torch.bool and v.name != a and
                   broadcast(sa, v.shape) is not None and broadcast(target_shape, broadcast(sa, v.shape)) == target_shape)
        if o is None:
            o = b.new_input(b.derive_broadcast(sa), kind=b.rng.choice(["int", "normal"]))
        shape = broadcast(sa, b.v(o).shape)
        e = b.rng.choice(["(%s %s %s)" % (a, sym, o), "torch.%s(%s, %s)" % (cmp, a, o)])
    else:
        c = b.rng.choice(EXACT_THRESHOLDS)
        shape = sa
        e = b.rng.choice(["(%s %s %r)" % (a, sym, c), "torch.%s(%s, %r)" % (cmp, a, c)])
    return b.add(e, [shape], dict(exact=True))


def g_compare(b):
    x = b.pick_float(lambda v: True)
    sx = b.v(x).shape
    mask = make_mask(b, sx)
    sm = b.v(mask).shape
    use = b.rng.choice(["where", "where", "masked_fill", "masked_fill", "cast"])
    ex_attrs = dict(exact=b.v(x).attrs.get("exact"), intval=b.v(x).attrs.get("intval"))
    if use == "where":
        r = b.rng.random()
        if r < 0.4:
            c = b.rng.choice([0.0, -1e4, 1.0, -0.5])
            other = repr(c)
            shape = broadcast(sm, sx)
            ex_attrs = dict(exact=ex_attrs["exact"] and c in (0.0, 1.0, -0.5), intval=ex_attrs["intval"] and c in (0.0, 1.0))
        else:
            other = b.partner(x)
            shape = broadcast(broadcast(sm, sx), b.v(other).shape)
            ex_attrs = dict(exact=ex_attrs["exact"] and b.v(other).attrs.get("exact"),
                            intval=ex_attrs["intval"] and b.v(other).attrs.get("intval"))
        if shape is None or b.numel(shape) > ELEMENT_LIMIT:
            raise Reject("where shape")
        args = (mask, x, other) if b.rng.random() < 0.5 else (mask, other, x)
        b.add("torch.where(%s, %s, %s)" % args, [shape], ex_attrs)
    elif use == "masked_fill":
        if broadcast(sx, sm) != sx:
            raise Reject("mask larger than self")
        c = b.rng.choice([0.0, -1e4, float("-inf"), 1.0, -0.5])
        cs = "float('-inf')" if c == float("-inf") else repr(c)
        b.add("%s.masked_fill(%s, %s)" % (x, mask, cs), [sx],
              dict(exact=ex_attrs["exact"] and c in (0.0, 1.0, -0.5), intval=ex_attrs["intval"] and c in (0.0, 1.0)))
    else:
        dtn = DTYPE_NAME[b.v(x).dtype]
        m = b.add(b.rng.choice(["%s.to(%s)" % (mask, dtn), "%s.type_as(%s)" % (mask, x)]), [sm],
                  dict(exact=True, intval=True))
        shape = broadcast(sx, sm)
        b.add("%s * %s" % (x, m), [shape], dict(exact=ex_attrs["exact"], intval=ex_attrs["intval"]))


def reduce_dims(b, rank):
    if rank == 0:
        return []
    if b.rng.random() < 0.03:
        return []
    k = b.rng.choice([1, 1, 1, 2, 2, 3, rank])
    k = min(k, rank)
    dims = sorted(b.rng.sample(range(rank), k))
    return dims


def dims_src(b, dims, rank):
    """dims as an int, a tuple or a list (some negative); a 0-d tensor takes dim 0 or -1."""
    if rank == 0:
        return b.rng.choice(["0", "-1", "(0,)", "[-1]"])
    out = [d - rank if b.rng.random() < 0.3 else d for d in dims]
    if len(out) == 1 and b.rng.random() < 0.5:
        return str(out[0])
    if b.rng.random() < 0.3:
        return "[" + ", ".join(str(d) for d in out) + "]"
    return "(" + ", ".join(str(d) for d in out) + ("," if len(out) == 1 else "") + ")"


def pick_reduce_operand(b):
    """A float value to reduce; 15% of the time a 0-d one when there is one."""
    if b.rng.random() < 0.15:
        a = b.pick_float(lambda v: v.shape == ())
        if a is not None:
            return a
    return b.pick_float()


def reduced_shape(shape, dims, keepdim):
    if not dims:
        return () if not keepdim else tuple(() for _ in shape)
    out = []
    for i, d in enumerate(shape):
        if i in dims:
            if keepdim:
                out.append(())
        else:
            out.append(d)
    return tuple(out)


def g_reduce(b):
    a = pick_reduce_operand(b)
    s = b.v(a).shape
    rank = len(s)
    kinds = ["sum", "mean", "amax", "var_mean", "var_mean", "sum", "mean"]
    kinds += [k for k, op in (("amin", "aten::amin"), ("norm", "aten::linalg_vector_norm")) if op in b.supported]
    kind = b.rng.choice(kinds)
    keep = b.rng.random() < 0.5
    whole = b.rng.random() < 0.3
    ex_attrs = dict(exact=kind in ("amax", "amin") and b.v(a).attrs.get("exact"),
                    intval=kind in ("amax", "amin") and b.v(a).attrs.get("intval"))
    if whole:
        # Over every dim, no dim argument: aten::sum / aten::mean, amax(dim=[]), var_mean(dim=None).
        if kind not in ("amax", "amin"):
            b.check_sum(a)
        if kind == "var_mean":
            corr = b.rng.choice([0, 1])
            keep = keep and b.rng.random() < 0.5
            if keep:
                e = "torch.var_mean(%s, None, correction=%d, keepdim=True)" % (a, corr)
            else:
                e = b.rng.choice(["torch.var_mean(%s, unbiased=%s)" % (a, bool(corr)),
                                  "torch.var_mean(%s, None, correction=%d)" % (a, corr)] +
                                 (["torch.var_mean(%s)" % a] if corr else []))
            out = tuple(() for _ in s) if keep else ()
            t = b.add(e, None, tuple_n=2)
            for i in b.rng.choice([[0], [1], [0, 1], [0, 1]]):
                b.add("%s[%d]" % (t, i), [out])
            return
        forms = {"sum": ["%s.sum()", "torch.sum(%s)"], "mean": ["%s.mean()", "torch.mean(%s)"],
                 "amax": ["%s.amax()", "torch.amax(%s)"], "amin": ["%s.amin()", "%s.min()"],
                 "norm": ["%s.norm()", "torch.linalg.vector_norm(%s)"]}
        b.add(b.rng.choice(forms[kind]) % a, [()], ex_attrs)
        return
    dims = reduce_dims(b, rank) if rank else [0]
    dsrc = dims_src(b, dims, rank) if dims else "[]"
    if not dims and kind in ("var_mean", "norm", "amin"):
        kind = "mean"
    if not dims:
        keep = False   # dim=[] with keepdim: torch keeps nothing either way; avoid ambiguity
    out = reduced_shape(s, dims, keep) if rank else ()
    if kind not in ("amax", "amin"):
        b.check_sum(a, dims)
    if kind == "var_mean":
        corr = b.rng.choice([0, 1])
        form = b.rng.choice(["torch.var_mean(%s, dim=%s, correction=%d, keepdim=%s)",
                             "torch.var_mean(%s, %s, correction=%d, keepdim=%s)",
                             "torch.var_mean(%s, %s, unbiased=%s, keepdim=%s)"])
        if "unbiased" in form:
            e = form % (a, dsrc, bool(corr), keep)
        else:
            e = form % (a, dsrc, corr, keep)
        t = b.add(e, None, tuple_n=2)
        which = b.rng.choice([[0], [1], [0, 1], [0, 1]])
        for i in which:
            b.add("%s[%d]" % (t, i), [out])
        return
    forms = {"sum": ["%s.sum(dim=%s, keepdim=%s)", "torch.sum(%s, %s, keepdim=%s)"],
             "mean": ["%s.mean(dim=%s, keepdim=%s)", "torch.mean(%s, %s, %s)"],
             "amax": ["%s.amax(dim=%s, keepdim=%s)", "torch.amax(%s, %s, %s)"],
             "amin": ["%s.amin(dim=%s, keepdim=%s)", "torch.amin(%s, %s, %s)"],
             "norm": ["%s.norm(dim=%s, keepdim=%s)", "torch.linalg.vector_norm(%s, 2, %s, %s)"]}
    e = b.rng.choice(forms[kind]) % (a, dsrc, keep)
    b.add(e, [out], ex_attrs)


def g_logsumexp(b):
    """torch.logsumexp over some dims (the exporter decomposes it: amax, abs, eq, masked_fill, sub,
    exp, sum, log, add)."""
    a = pick_reduce_operand(b)
    s = b.v(a).shape
    rank = len(s)
    dims = (reduce_dims(b, rank) or [rank - 1]) if rank else [0]
    keep = b.rng.random() < 0.5
    dsrc = dims_src(b, dims, rank)
    if b.rng.random() < 0.5:
        e = "torch.logsumexp(%s, %s, keepdim=%s)" % (a, dsrc, keep)
    else:
        e = "%s.logsumexp(dim=%s, keepdim=%s)" % (a, dsrc, keep)
    b.add(e, [reduced_shape(s, dims, keep) if rank else ()])


def g_reduce_bcast(b):
    """A reduction with keepdim=False brought back to the operand's rank (unsqueeze, [..., None],
    view/reshape with 1s, or plain broadcasting when leading dims were reduced) and combined with
    the operand: x - x.amax(-1).unsqueeze(-1), x / x.sum(0), (x - mean[:, None]) * rsqrt(var + eps)."""
    a, s = pick_ranked(b)
    rank = len(s)
    mode = b.rng.choice(["last", "last", "single", "lead", "multi"])
    if mode == "last":
        dims = [rank - 1]
    elif mode == "single":
        dims = [b.rng.randrange(rank)]
    elif mode == "lead":
        dims = list(range(b.rng.randint(1, rank)))
    else:
        dims = sorted(b.rng.sample(range(rank), b.rng.randint(1, rank)))
    kind = b.rng.choice(["amax", "amax", "sum", "mean", "mean", "var_mean", "logsumexp"])
    dsrc = dims_src(b, dims, rank)
    red = reduced_shape(s, dims, False)
    keep_shape = reduced_shape(s, dims, True)
    if kind in ("sum", "mean"):
        b.check_sum(a, dims)
    if kind == "var_mean":
        t = b.add("torch.var_mean(%s, %s, correction=%d)" % (a, dsrc, b.rng.choice([0, 1])), None, tuple_n=2)
        var = b.add("%s[0]" % t, [red])
        r = b.add("%s[1]" % t, [red])
    elif kind == "logsumexp":
        r = b.add("torch.logsumexp(%s, %s)" % (a, dsrc), [red])
    else:
        r = b.add(b.rng.choice(["%s.{k}(%s)", "torch.{k}(%s, %s)"]).format(k=kind) % (a, dsrc), [red],
                  dict(exact=kind == "amax" and b.v(a).attrs.get("exact")))

    def back(v):
        if mode == "lead" and b.rng.random() < 0.6:
            return v                       # (s[k:]) broadcasts against s as is
        if len(dims) == 1:
            d = dims[0]
            forms = ["%s.unsqueeze(%d)" % (v, d), "%s.unsqueeze(%d)" % (v, d - rank)]
            if d == rank - 1:
                forms.append("%s[..., None]" % v)
            else:
                forms.append("%s[%sNone]" % (v, ":, " * d))
            e = b.rng.choice(forms)
        else:
            sizes = ", ".join("#{%s}" % dim_expr(x) for x in keep_shape)
            e = "%s.%s(%s)" % (v, b.rng.choice(["view", "reshape"]), sizes)
        return b.add(e, [keep_shape], dict(exact=b.v(v).attrs.get("exact")))
    rb = back(r)
    if kind == "var_mean":
        vb = back(var)
        eps = b.rng.choice([1e-5, 1e-3, 0.1])
        y = b.add("%s - %s" % (a, rb), [s])
        b.add(b.rng.choice(["%s * torch.rsqrt(%s + %r)", "%s / torch.sqrt(%s + %r)"]) % (y, vb, eps), [s])
        return
    op = b.rng.choice(["sub", "sub", "exp_sub", "add", "mul", "div"])
    if op == "sub":
        e = b.rng.choice(["%s - %s" % (a, rb), "torch.sub(%s, %s)" % (a, rb), "%s - %s" % (rb, a)])
    elif op == "exp_sub":
        if kind != "amax" and b.v(a).attrs.get("maxabs", 99) > 6:
            raise Reject("exp of a large difference")
        e = "torch.exp(%s - %s)" % (a, rb)
    elif op == "add":
        e = "%s + %s" % (rb, a)
    elif op == "mul":
        e = "%s * %s" % (a, rb)
    else:
        rb = b.ensure_nonzero(rb)
        e = "%s / %s" % (a, rb)
    b.add(e, [broadcast(s, b.v(rb).shape)])


def g_middle_frame(b):
    """Elementwise ops around a reduction over a middle dim of a fresh input shaped for the input's own
    layout (passes/LowerMiddleFrame.cpp: 64 rows or more, few reduced elements; a few kept rows with
    many columns split C into the rows, short blocks pack several rows to a partition), with operands
    that vary along the reduced dim only (a channel weight), along the kept columns only, per row,
    or everywhere."""
    rng = b.rng
    for _ in range(10):
        lead = rng.choice([(64,), (65,), (100,), (128,), (130,), (256,), (2, 64), (8, 9), (1,), (2,), (512,),
                           (1024,), (2048,), (256, 8), (130, 4)])
        red = rng.choice([2, 3, 4, 7, 8, 16])
        cols = rng.choice([(32,), (40,), (64,), (129,), (200,), (256,), (4, 64), (8, 16), (3, 50), (64, 128),
                           (16, 300), (48, 40), (2,), (3,), (4,), (5,), (16,), (2, 2), (3, 1), (1, 7)])
        n = red
        for v in lead + cols:
            n *= v
        if n <= ELEMENT_LIMIT:
            break
    else:
        raise Reject("no middle-frame shape within the element limit")
    one = ()
    shape = tuple((b.sym(v),) for v in lead) + ((b.sym(red),),) + tuple((b.sym(v),) for v in cols)
    d = len(lead)
    x = b.new_input(shape, kind=rng.choice(["normal", "unit"]))
    kept = shape[:d] + (one,) + shape[d + 1:]
    operand_shapes = {
        "channel": tuple(one for _ in lead) + (shape[d],) + tuple(one for _ in cols),
        "column": tuple(one for _ in lead) + (one,) + shape[d + 1:],
        "row": shape[:d] + (one,) + tuple(one for _ in cols),
        "full": shape,
        "kept": kept,
    }

    def operand():
        which = rng.choice(sorted(operand_shapes))
        shape_of = operand_shapes[which]
        if rng.random() < 0.3:
            return b.new_input(shape_of, kind=rng.choice(["normal", "unit"]))
        return b.new_param(shape_of, kind=rng.choice(["ones", "zeros", "normal", "full"]))

    pattern = rng.choice(["softmax", "center", "norm", "rms", "exp_max", "weighted"])
    if pattern == "softmax":
        y = b.add(rng.choice(["torch.softmax(%s, %d)", "torch.log_softmax(%s, %d)"]) % (x, d), [shape])
    elif pattern == "center":
        m = b.add("%s.mean(%d, keepdim=True)" % (x, d), [kept])
        y = b.add("%s - %s" % (x, m), [shape])
    elif pattern == "norm":
        m = b.add("%s.mean(%d, keepdim=True)" % (x, d), [kept])
        c = b.add("%s - %s" % (x, m), [shape])
        v = b.add("(%s * %s).mean(%d, keepdim=True)" % (c, c, d), [kept])
        y = b.add("%s * torch.rsqrt(%s + %r)" % (c, v, rng.choice([1e-5, 1e-3, 0.1])), [shape])
    elif pattern == "rms":
        sq = b.add("%s * %s" % (x, x), [shape])
        b.check_sum(sq, [d])
        r = b.add("torch.rsqrt(%s.mean(%d, keepdim=True) + 1e-5)" % (sq, d), [kept])
        y = b.add("%s * %s" % (x, r), [shape])
    elif pattern == "exp_max":
        y = b.add("torch.exp(%s - %s.amax(%d, keepdim=True))" % (x, x, d), [shape])
    else:
        w = operand()
        p = b.add("%s * %s" % (x, w), [shape])
        b.check_sum(p, [d])
        y = b.add("%s.sum(%d, keepdim=True)" % (p, d), [kept])
    for _ in range(rng.choice([0, 1, 1, 2])):
        w = operand()
        form = rng.choice(["%s * %s", "%s + %s", "%s - %s", "torch.maximum(%s, %s)", "where"])
        if form == "where":
            if not b.robust_vs(y):
                continue
            e = "torch.where(%s > 0, %s, %s)" % (y, y, w)
        else:
            e = form % (y, w)
        y = b.add(e, [broadcast(b.v(y).shape, b.v(w).shape)])


def g_softmax(b):
    a, s = pick_ranked(b)
    d = b.rng.randrange(len(s))
    if b.rng.random() < 0.4:
        d -= len(s)
    log = b.rng.random() < 0.4
    if log:
        e = b.rng.choice(["F.log_softmax(%s, dim=%d)", "torch.log_softmax(%s, %d)", "%s.log_softmax(%d)"]) % (a, d)
    else:
        e = b.rng.choice(["torch.softmax(%s, dim=%d)", "F.softmax(%s, dim=%d)", "%s.softmax(%d)"]) % (a, d)
    b.add(e, [s])


def norm_params(b, nshape, kinds):
    r = b.rng.random()
    if r < 0.2:
        return "None"
    return b.new_param(nshape, kind=b.rng.choice(kinds))


def pick_ranked(b):
    """(a float value of rank >= 1, its shape)."""
    a = b.pick_float(lambda v: len(v.shape) >= 1)
    if a is None:
        raise Reject("no value of rank >= 1")
    return a, b.v(a).shape


def norm_operand(b):
    """(operand, its shape, k, normalized shape): a norm over the last k (1 or 2) dims."""
    a, s = pick_ranked(b)
    k = b.rng.choice([1, 1, 1, 2]) if len(s) >= 2 else 1
    return a, s, k, s[-k:]


def g_layer_norm(b):
    a, s, k, nshape = norm_operand(b)
    eps = b.rng.choice([1e-5, 1e-6, 1e-12, 0.1])
    w = norm_params(b, nshape, ["ones", "normal", "pos", "full"])
    bias = norm_params(b, nshape, ["zeros", "normal", "zeros"])
    if b.rng.random() < 0.2:
        t = b.add("aten.native_layer_norm(%s, %s, %s, %s, %r)" % (a, dims_list_src(nshape), w, bias, eps),
                  None, tuple_n=3)
        stat = tuple(s[:-k]) + tuple(() for _ in nshape)
        which = b.rng.choice([[0], [0, 1], [0, 2], [1, 2], [0, 1, 2]])
        if 1 in which:  # the mean itself is returned
            b.check_sum(a, list(range(-k, 0)))
        for i in which:
            b.add("%s[%d]" % (t, i), [s if i == 0 else stat])
        return
    b.add("F.layer_norm(%s, %s, %s, %s, %r)" % (a, shape_src(nshape), w, bias, eps), [s])


def g_rms_norm(b):
    a, s, k, nshape = norm_operand(b)
    attrs = {}
    if b.rng.random() < 0.35:
        # A weight of another float dtype (a bf16 model's f32 norm weight, ...): the result keeps
        # the input's dtype. The weight's values are exact in f32, so the precision is the input's.
        wdt = b.rng.choice([t for t in (torch.float32, torch.bfloat16, torch.float16) if t != b.v(a).dtype])
        w = b.new_param(nshape, dtype=wdt, kind=b.rng.choice(["ones", "normal", "pos"]))
        attrs["prec"] = b.v(a).attrs.get("prec", b.prog.dtype)
    else:
        w = norm_params(b, nshape, ["ones", "normal", "pos"])
    eps = b.rng.choice(["1e-06", "1e-05", "None", "0.001"])
    b.add("rms_norm(%s, %s, %s, %s)" % (a, shape_src(nshape), w, eps), [s], attrs)


def weight(b, shape, fan_in_dim, dtype=None):
    """A matmul's second operand; `dtype`: the first operand's (PyTorch's matmuls take one dtype)."""
    kind = b.rng.choice(["normal", "normal", "normal", "unit", "int", "ones"])
    arg = None
    if kind == "normal":
        arg = "#{1.0 / max(1, %s) ** 0.5}" % dim_expr(fan_in_dim)
    if b.rng.random() < 0.15:
        return b.new_input(shape, dtype=dtype, kind="unit" if kind != "int" else "int")
    return b.new_param(shape, dtype=dtype, kind=kind, arg=arg)


def g_matmul(b):
    r = b.rng.random()
    if r < 0.3:   # fresh operand with M, K from the matmul set
        m = b.sym(b.rng.choice(MATMUL_DIMS))
        kv = [k for k in MATMUL_DIMS if k * b.dim_val((m,)) <= ELEMENT_LIMIT]
        k = b.sym(b.rng.choice(kv))
        a = b.new_input(((m,), (k,)), kind=b.rng.choice(["normal", "unit"]))
    else:
        a = b.pick_float(lambda v: len(v.shape) >= 1)
        if a is None:
            raise Reject("no operand")
    sa = b.v(a).shape
    kdim = sa[-1]
    nval = b.rng.choice(MATMUL_DIMS)
    if b.dim_val(kdim) * nval > ELEMENT_LIMIT:
        nval = 7
    ndim = (b.sym(nval),) if nval != 1 or b.rng.random() < 0.5 else ()
    rows = b.numel(sa[:-1]) if len(sa) > 1 else 1
    if rows * b.dim_val(ndim) > ELEMENT_LIMIT:
        raise Reject("matmul result too large")
    form = b.rng.choice(["mm", "addmm", "linear", "linear", "matmul_nd"])
    if len(sa) == 1 and form in ("mm", "addmm"):
        a = b.to_rank2(a)
        sa = b.v(a).shape
    if len(sa) > 2 and form in ("mm", "addmm"):
        form = "matmul_nd"
    if len(sa) == 2 and form == "matmul_nd":
        form = "mm"
    if form == "linear":
        W = weight(b, (ndim, kdim), kdim, b.v(a).dtype)
        bias_kind = b.rng.choice(["none", "zeros", "normal", "full"])
        if bias_kind == "none":
            e = "F.linear(%s, %s)" % (a, W)
        else:
            bias = b.new_param((ndim,), dtype=b.v(a).dtype, kind=bias_kind)
            e = "F.linear(%s, %s, %s)" % (a, W, bias)
        b.add(e, [tuple(sa[:-1]) + (ndim,)])
        return
    if b.rng.random() < 0.3:
        W = weight(b, (ndim, kdim), kdim, b.v(a).dtype)
        wsrc = b.rng.choice(["%s.t()", "%s.transpose(0, 1)"]) % W
    else:
        W = weight(b, (kdim, ndim), kdim, b.v(a).dtype)
        wsrc = W
    out = tuple(sa[:-1]) + (ndim,)
    if form == "mm":
        e = b.rng.choice(["%s @ %s", "torch.mm(%s, %s)", "torch.matmul(%s, %s)"]) % (a, wsrc)
    elif form == "addmm":
        bshape = b.rng.choice([(ndim,), (sa[0], ndim), ((), ndim)])
        bias = b.new_param(bshape, dtype=b.v(a).dtype, kind=b.rng.choice(["normal", "zeros", "ones"])) \
            if b.rng.random() < 0.7 else b.new_input(bshape, dtype=b.v(a).dtype)
        if b.rng.random() < 0.5:
            e = "torch.addmm(%s, %s, %s)" % (bias, a, wsrc)
        else:
            e = "torch.addmm(%s, %s, %s, beta=%r, alpha=%r)" % (bias, a, wsrc, b.rng.choice([0.5, 1.0, 2.0]),
                                                               b.rng.choice([1.0, 0.5, -1.0]))
    else:
        e = b.rng.choice(["%s @ %s", "torch.matmul(%s, %s)"]) % (a, wsrc)
    b.add(e, [out])


def g_prologue(b):
    """A row-wise chain (a norm, a softmax, an activation, a per-row value expanded over the row)
    whose only reader is a matmul: at -O1/-O2 it runs in the matmul's kernel as the left operand's
    prologue (a norm before a projection)."""
    if b.rng.random() < 0.3:
        m = b.sym(b.rng.choice(MATMUL_DIMS))
        kv = [k for k in MATMUL_DIMS if k * b.dim_val((m,)) <= ELEMENT_LIMIT]
        a = b.new_input(((m,), (b.sym(b.rng.choice(kv)),)), kind=b.rng.choice(["normal", "unit"]))
    else:
        a, _ = pick_ranked(b)
    sa = b.v(a).shape
    kdim = sa[-1]
    nshape = (kdim,)
    chains = ["F.layer_norm(%%s, %s, %s, %s, 1e-5)" % (shape_src(nshape), norm_params(b, nshape, ["ones", "normal"]),
                                                     norm_params(b, nshape, ["zeros", "normal"])),
              "rms_norm(%%s, %s, %s, 1e-06)" % (shape_src(nshape), norm_params(b, nshape, ["ones", "normal"])),
              "torch.softmax(%s, -1)", "(%s * torch.rsqrt(%s.pow(2).mean(-1, keepdim=True) + 1e-6))",
              "(F.gelu(%s) * 0.5)",
              # the same along each row (a per-row value expanded over K): held as one
              # column per row until the stationary slices need all K
              "(%s.amax(-1, keepdim=True).expand_as(%s) * 0.5)", "torch.sigmoid(%s[..., :1]).expand_as(%s)"]
    chain = b.rng.choice(chains)
    inner = chain % ((a,) * chain.count("%s"))
    nval = b.rng.choice(MATMUL_DIMS)
    if b.dim_val(kdim) * nval > ELEMENT_LIMIT:
        nval = 7
    ndim = (b.sym(nval),)
    rows = b.numel(sa[:-1]) if len(sa) > 1 else 1
    if rows * nval > ELEMENT_LIMIT:
        raise Reject("matmul result too large")
    W = weight(b, (ndim, kdim), kdim, b.v(a).dtype)
    form = b.rng.choice(["linear", "linear_bias", "mm", "flat"])
    if form == "linear":
        e = "F.linear(%s, %s)" % (inner, W)
    elif form == "linear_bias":
        e = "F.linear(%s, %s, %s)" % (inner, W, b.new_param((ndim,), dtype=b.v(a).dtype,
                                                            kind=b.rng.choice(["zeros", "normal"])))
    elif form == "mm" or len(sa) < 2:
        e = "torch.matmul(%s, %s.t())" % (inner, W)
    else:  # rows flattened for a 2-d mm, then the leading dims back
        e = "(%s.reshape(-1, #{%s}) @ %s.t()).view(%s)" % (
            inner, dim_expr(kdim), W, ", ".join("#{%s}" % dim_expr(d) for d in tuple(sa[:-1]) + (ndim,)))
    b.add(e, [tuple(sa[:-1]) + (ndim,)])


def g_empty(b):
    """A value with no elements meeting the rest of the graph: an empty slice in a cat, summed
    over and added back, the input of a K = 0 linear with a bias, or a value of its own that later
    generators may read (empty results fold at import; docs/compiler.md, "Import")."""
    a, s = pick_ranked(b)
    d = len(s) - 1
    pre = ":, " * d
    zero = (b.sym(0),)
    empty = "%s[%s:0]" % (a, pre)
    kind = b.rng.choice(["cat", "sum", "linear", "value"])
    if kind == "cat":
        b.add("torch.cat([%s, %s], %d)" % (empty, a, d), [s])
    elif kind == "sum":
        b.add("%s + %s.sum(%d, keepdim=True)" % (a, empty, d), [s])
    elif kind == "linear":
        ndim = (b.sym(b.rng.choice([1, 7, 129])),)
        w = b.new_param((ndim, zero), dtype=b.v(a).dtype, kind="normal")
        bias = b.new_param((ndim,), dtype=b.v(a).dtype, kind=b.rng.choice(["normal", "zeros"]))
        b.add("F.linear(%s, %s, %s)" % (empty, w, bias), [tuple(s[:-1]) + (ndim,)])
    else:
        b.add("%s * 2.0" % empty, [tuple(s[:-1]) + (zero,)])


def g_bmm(b):
    # A fifth are many small matrices (the batch groups of LowerMatmul.cpp, or a batch per partition
    # where those are estimated slower: 128 or 1024 batches of few columns).
    small = b.rng.random() < 0.2
    sizes = SMALL_MATMUL_DIMS if small else MATMUL_DIMS
    a = None if small else b.pick_float(lambda v: len(v.shape) in (3, 4))
    if a is None or b.rng.random() < 0.3:
        rank = b.rng.choice([3, 4])
        dims = [b.new_dim(SMALL_POOL) for _ in range(rank - 2)]
        if small:
            dims[0] = (b.sym(b.rng.choice([32, 40, 64, 97, 128, 1024])),)
        m = (b.sym(b.rng.choice(sizes)),)
        batch = b.numel(tuple(dims))
        kv = [k for k in sizes if k * b.dim_val(m) * batch <= ELEMENT_LIMIT]
        if not kv:
            raise Reject("bmm too large")
        k = (b.sym(b.rng.choice(kv)),)
        a = b.new_input(tuple(dims) + (m, k), kind=b.rng.choice(["normal", "unit"]))
    sa = b.v(a).shape
    batch, m, k = sa[:-2], sa[-2], sa[-1]
    same_batch = True
    if b.rng.random() < 0.4:  # scores: a @ a^T
        other = b.rng.choice(["%s.transpose(-1, -2)", "%s.transpose(-2, -1)"]) % a
        if len(sa) == 4 and b.rng.random() < 0.5:
            other = "%s.permute(0, 1, 3, 2)" % a
        out = tuple(batch) + (m, m)
    else:
        n = (b.sym(b.rng.choice(sizes)),)
        if b.numel(tuple(batch) + (k, n)) > ELEMENT_LIMIT or b.numel(tuple(batch) + (m, n)) > ELEMENT_LIMIT:
            raise Reject("bmm operand too large")
        wb = tuple(batch)
        if b.rng.random() < 0.3:
            wb = ((),) + tuple(batch[1:])   # a broadcast batch dim
            same_batch = batch[0] == ()
        if b.rng.random() < 0.6:
            other = b.new_param(wb + (k, n), dtype=b.v(a).dtype, kind=b.rng.choice(["normal", "unit"]))
        else:
            other = b.new_input(wb + (k, n), dtype=b.v(a).dtype, kind="unit")
        out = tuple(batch) + (m, n)
    if b.numel(out) > ELEMENT_LIMIT:
        raise Reject("bmm result too large")
    if len(sa) == 3 and same_batch and b.rng.random() < 0.5:
        e = "torch.bmm(%s, %s)" % (a, other)
    else:
        e = b.rng.choice(["%s @ %s", "torch.matmul(%s, %s)"]) % (a, other)
    b.add(e, [out])


def g_embedding(b):
    V = b.sym(b.rng.choice([1, 7, 32, 129, 513]))
    E = b.sym(b.rng.choice([1, 3, 16, 64, 127, 128]))
    ishape = b.random_shape(b.rng.choice([1, 1, 2, 2, 3]), limit=max(1, ELEMENT_LIMIT // b.dim_val((E,))),
                            pool=SMALL_POOL + [(16, 2), (128, 1), (129, 1)])
    if b.numel(ishape) * b.dim_val((E,)) > ELEMENT_LIMIT or b.dim_val((V,)) * b.dim_val((E,)) > ELEMENT_LIMIT:
        raise Reject("embedding too large")
    idx = b.new_input(ishape, dtype=b.rng.choice([torch.int64, torch.int64, torch.int32]), kind="index",
                      arg="#{%s}" % V)
    b.v(idx).attrs.update(exact=True, intval=False)
    W = b.new_param(((V,), (E,)), kind=b.rng.choice(["normal", "unit", "arange"])) if b.rng.random() < 0.8 else \
        b.new_input(((V,), (E,)))
    pad = ", padding_idx=0" if b.rng.random() < 0.2 else ""
    b.add("F.embedding(%s, %s%s)" % (idx, W, pad), [tuple(ishape) + ((E,),)], dict(exact=b.v(W).attrs.get("exact")))


def g_cat(b):
    a, s = pick_ranked(b)
    d = b.rng.randrange(len(s))
    pieces = [a]
    sizes = [s[d]]
    other_dt = lambda: b.rng.choice([t for t in (torch.float32, torch.bfloat16, torch.float16) if t != b.v(a).dtype])
    for _ in range(b.rng.choice([1, 1, 2])):
        r = b.rng.random()
        if r < 0.2:
            p = a
            ps = s[d]
        elif r < 0.35:
            p = b.add("%s * %r" % (a, b.rng.choice([2.0, -1.0, 0.5])), [s])
            ps = s[d]
        elif r < 0.5:   # a computed operand of another float dtype: cat promotes
            dt = other_dt()
            if dt == torch.float16 and b.v(a).attrs.get("maxabs", 0) > 3e4:
                raise Reject("f16 overflow")
            p = b.add("%s.to(%s)" % (a, DTYPE_NAME[dt]), [s], dict(exact=b.v(a).attrs.get("exact"),
                                                                 intval=b.v(a).attrs.get("intval")))
            ps = s[d]
        else:
            nd = b.new_dim(SMALL_POOL + [(64, 1), (129, 1)])
            shp = tuple(nd if i == d else x for i, x in enumerate(s))
            if b.numel(shp) > ELEMENT_LIMIT:
                raise Reject("cat piece too large")
            dt = other_dt() if b.rng.random() < 0.2 else None
            r2 = b.rng.random()
            if r2 < 0.3:    # a constant made in forward
                dtn = DTYPE_NAME[dt or b.v(a).dtype]
                c = b.rng.choice(["torch.zeros(%s, dtype=%s)", "torch.ones(%s, dtype=%s)",
                                  "torch.full(%s, -2.0, dtype=%s)", "torch.full(%s, 0.5, dtype=%s)"])
                p = b.add(c % (shape_src(shp), dtn), [shp], dict(exact=True, intval="0.5" not in c, const=True))
            elif r2 < 0.7:
                p = b.new_input(shp, dtype=dt)
            else:
                p = b.new_param(shp, dtype=dt)
            ps = nd
        pieces.append(p)
        sizes.append(ps)
    b.rng.shuffle(pieces)
    total = b.derived(" + ".join("(%s)" % dim_expr(x) for x in sizes))
    out = tuple((total,) if i == d else x for i, x in enumerate(s))
    dsrc = d - len(s) if b.rng.random() < 0.3 else d
    ex_ = all(b.v(p).attrs.get("exact") for p in pieces)
    b.add("torch.cat([%s], dim=%d)" % (", ".join(pieces), dsrc), [out],
          dict(exact=ex_, intval=ex_ and all(b.v(p).attrs.get("intval") for p in pieces)))


def g_split(b):
    a, s = pick_ranked(b)
    d = b.rng.randrange(len(s))
    E = dim_expr(s[d])
    k = b.rng.choice([2, 3, 4])
    S = b.derived("-(-(%s) // %d)" % (E, k))       # ceil(E / k)
    last = b.derived("(%s) - %s * (-(-(%s) // %s) - 1)" % (E, S, E, S))
    dsrc = d - len(s) if b.rng.random() < 0.3 else d
    if b.rng.random() < 0.5:
        t = b.add("torch.split(%s, #{%s}, dim=%d)" % (a, S, dsrc), None, tuple_n=-1)
    else:
        t = b.add("torch.chunk(%s, %d, dim=%d)" % (a, k, dsrc), None, tuple_n=-1)
    attrs = dict(exact=b.v(a).attrs.get("exact"), intval=b.v(a).attrs.get("intval"),
                 contig=d == 0)
    for which in b.rng.choice([["0"], ["-1"], ["0", "-1"]]):
        size = S if which == "0" else last
        b.add("%s[%s]" % (t, which), [tuple((size,) if i == d else x for i, x in enumerate(s))], attrs)


def g_composed(b):
    """Operators the importer builds from others (compiler/ComposedOps.cpp) on a computed value:
    cumsum, flip, roll, max along a dim, std, clamp and lerp with a tensor partner."""
    a, s = pick_ranked(b)
    d = b.rng.randrange(len(s))
    ops = [o for o, t in (("cumsum", "aten::cumsum"), ("flip", "aten::flip"), ("roll", "aten::roll"),
                          ("maxdim", "aten::max.dim"), ("std", "aten::std.correction"),
                          ("clamp", "aten::clamp.Tensor"), ("lerp", "aten::lerp.Scalar")) if t in b.supported]
    if not ops:
        raise Reject("no composed ops")
    op = b.rng.choice(ops)
    keep_exact = dict(exact=b.v(a).attrs.get("exact"), intval=b.v(a).attrs.get("intval"))
    if op == "cumsum":
        b.check_sum(a, [d])
        b.add("torch.cumsum(%s, %d)" % (a, d), [s])
    elif op == "flip":
        b.add("%s.flip(%d)" % (a, d), [s], keep_exact)
    elif op == "roll":
        b.add("%s.roll(%d, %d)" % (a, b.rng.choice([1, -2, 5]), d), [s], keep_exact)
    elif op == "maxdim":
        keep = b.rng.random() < 0.5
        b.add("%s.max(%d, keepdim=%s)[0]" % (a, d, keep), [reduced_shape(s, [d], keep)], keep_exact)
    elif op == "std":
        keep = b.rng.random() < 0.5
        b.check_sum(a, [d])
        b.add("%s.std(%d, unbiased=False, keepdim=%s)" % (a, d, keep), [reduced_shape(s, [d], keep)])
    else:
        o = b.partner(a)
        if broadcast(s, b.v(o).shape) != s:
            raise Reject("partner widens the shape")
        if op == "clamp":
            b.add(b.rng.choice(["torch.clamp(%s, min=%s)", "torch.clamp(%s, max=%s)"]) % (a, o), [s])
        else:
            b.add("torch.lerp(%s, %s, %r)" % (a, o, b.rng.choice([0.25, 0.75])), [s])


def g_ordered(b):
    """Sorting, selection, scans and products (compiler/ComposedIndexing.cpp and
    ComposedMath.cpp) on a computed value, compared by their values (indices of equal
    values may differ from eager's, whose order among ties is unspecified): sort, topk,
    median and kthvalue along a dim, cummax, cumprod and logcumsumexp, prod."""
    a, s = pick_ranked(b)
    d = b.rng.randrange(len(s))
    n = b.dim_val(s[d])
    ops = [o for o, t in (("sort", "aten::sort"), ("topk", "aten::topk"), ("median", "aten::median.dim"),
                          ("kth", "aten::kthvalue"), ("cummax", "aten::cummax"), ("cumprod", "aten::cumprod"),
                          ("lcse", "aten::logcumsumexp"), ("prod", "aten::prod.dim_int")) if t in b.supported]
    if not ops:
        raise Reject("no ordering ops")
    op = b.rng.choice(ops)
    if op in ("sort", "median", "kth") and b.numel(s) * n > (1 << 21):
        raise Reject("too many pairs to compare")
    if op in ("cumprod", "prod") and n > 24:
        raise Reject("a long product (overflow depends on the order)")
    keep_exact = dict(exact=b.v(a).attrs.get("exact"), intval=b.v(a).attrs.get("intval"))
    keep = b.rng.random() < 0.5
    if op == "sort":
        b.add("torch.sort(%s, %d, descending=%s)[0]" % (a, d, b.rng.random() < 0.5), [s], keep_exact)
    elif op == "topk":
        k = b.derived("min(%d, %s)" % (b.rng.choice([1, 2, 5, 20]), dim_expr(s[d])))
        b.add("torch.topk(%s, #{%s}, %d, largest=%s)[0]" % (a, k, d, b.rng.random() < 0.7),
              [tuple((k,) if i == d else x for i, x in enumerate(s))], keep_exact)
    elif op == "median":
        b.add("%s.median(%d, keepdim=%s)[0]" % (a, d, keep), [reduced_shape(s, [d], keep)], keep_exact)
    elif op == "kth":
        k = b.derived("max(1, (%s) // 3)" % dim_expr(s[d]))
        b.add("%s.kthvalue(#{%s}, %d, keepdim=%s)[0]" % (a, k, d, keep), [reduced_shape(s, [d], keep)], keep_exact)
    elif op == "cummax":
        b.add("torch.cummax(%s, %d)[0]" % (a, d), [s], keep_exact)
    elif op == "cumprod":
        b.add("torch.cumprod(%s.tanh() + 1, %d)" % (a, d), [s])
    elif op == "lcse":
        b.add("torch.logcumsumexp(%s, %d)" % (a, d), [s])
    else:
        b.add("(%s.tanh() + 1).prod(%d, keepdim=%s)" % (a, d, keep), [reduced_shape(s, [d], keep)])


def g_math(b):
    """Elementwise functions and gated activations composed at import (ComposedMath.cpp)
    on computed values: log2, asinh, atan, asin, acos, sinc, softshrink, the error and gamma
    functions (erfc, erfcx, ndtr, log_ndtr, lgamma, digamma, mvlgamma), hypot, atan2, logaddexp and xlogy
    with a partner, glu, prelu-style
    where, threshold-free smooth ones only (no value where a rounding flips the result)."""
    a, s = pick_ranked(b)
    ops = [o for o, t in (("log2", "aten::log2"), ("asinh", "aten::asinh"), ("hypot", "aten::hypot"),
                          ("xlogy", "aten::xlogy.Tensor"), ("glu", "aten::glu"), ("logsig", "aten::log_sigmoid_forward"),
                          ("cosh", "aten::cosh"), ("atan", "aten::atan"), ("asin", "aten::asin"),
                          ("acos", "aten::acos"), ("atan2", "aten::atan2"), ("sinc", "aten::sinc"),
                          ("softshrink", "aten::softshrink"), ("logaddexp", "aten::logaddexp"),
                          ("erfc", "aten::erfc"), ("erfcx", "aten::special_erfcx"), ("ndtr", "aten::special_ndtr"),
                          ("log_ndtr", "aten::special_log_ndtr"), ("lgamma", "aten::lgamma"),
                          ("digamma", "aten::digamma"), ("mvlgamma", "aten::mvlgamma")) if t in b.supported]
    if not ops:
        raise Reject("no math ops")
    op = b.rng.choice(ops)
    if op == "log2":
        b.add("torch.log2(%s.abs() + 1)" % a, [s])
    elif op == "asinh":
        b.add("torch.asinh(%s)" % a, [s])
    elif op == "cosh":
        b.add("torch.cosh(%s.tanh() * 3)" % a, [s])
    elif op == "atan":
        b.add("torch.atan(%s)" % a, [s])
    elif op == "sinc":
        b.add("torch.sinc(%s)" % a, [s])
    elif op in ("erfc", "ndtr", "log_ndtr"):
        b.add("torch.special.%s(%s)" % (op, a), [s])
    elif op == "erfcx":  # overflows below -9
        b.add("torch.special.erfcx(%s.clamp(min=-5))" % a, [s])
    elif op in ("lgamma", "digamma"):  # away from the poles at 0, -1, ...
        b.add("torch.%s(%s.abs() + 0.25)" % (op, a), [s])
    elif op == "mvlgamma":
        b.add("torch.mvlgamma(%s.abs() + 1.5, 2)" % a, [s])
    elif op == "softshrink":  # continuous at +-lambda, unlike hardshrink
        b.add("torch.nn.functional.softshrink(%s, 0.3)" % a, [s])
    elif op in ("asin", "acos"):
        b.add("torch.%s(%s.tanh() * 0.9)" % (op, a), [s])
    elif op == "logsig":
        b.add("torch.nn.functional.logsigmoid(%s)" % a, [s])
    elif op == "glu":
        d = b.rng.randrange(len(s))
        if b.dim_val(s[d]) % 2:
            raise Reject("glu of an odd dim")
        half = b.derived("(%s) // 2" % dim_expr(s[d]))
        b.add("torch.nn.functional.glu(%s, %d)" % (a, d), [tuple((half,) if i == d else x for i, x in enumerate(s))])
    else:
        o = b.partner(a)
        if broadcast(s, b.v(o).shape) != s:
            raise Reject("partner widens the shape")
        if op == "hypot":
            b.add("torch.hypot(%s, %s)" % (a, o), [s])
        elif op == "logaddexp":
            b.add("torch.logaddexp(%s, %s)" % (a, o), [s])
        elif op == "atan2":  # y > 0: no jump of 2 pi where x changes sign
            b.add("torch.atan2(%s.abs() + 0.5, %s)" % (o, a), [s])
        else:
            b.add("torch.xlogy(%s, %s.abs() + 0.5)" % (a, o), [s])


def g_indexing(b):
    """Reads and writes through integer index inputs (compiler/ComposedOps.cpp and
    ComposedIndexing.cpp): gather, index_select, x[idx], scatter_add, scatter_reduce
    (every reduction, with and without self), masked_scatter, isin of index inputs, scatter with one index per row (no
    repeated position), index_put with accumulation, and cross entropy
    of a computed [N, C] value against label inputs."""
    a, s = pick_ranked(b)
    d = b.rng.randrange(len(s))
    E = dim_expr(s[d])
    idtype = b.rng.choice([torch.int64, torch.int64, torch.int32])
    ops = [o for o, t in (("gather", "aten::gather"), ("select", "aten::index_select"), ("index", "aten::index.Tensor"),
                          ("scatter_add", "aten::scatter_add"), ("scatter", "aten::scatter.src"),
                          ("scatter_reduce", "aten::scatter_reduce.two"), ("put", "aten::index_put"),
                          ("masked_scatter", "aten::masked_scatter"), ("isin", "aten::isin.Tensor_Tensor"), ("xent", "aten::nll_loss_forward")) if t in b.supported]
    if not ops:
        raise Reject("no indexing ops")
    op = b.rng.choice(ops)
    keep_exact = dict(exact=b.v(a).attrs.get("exact"), intval=b.v(a).attrs.get("intval"))
    if op in ("gather", "scatter_add", "scatter", "scatter_reduce"):
        k = b.derived("1") if op == "scatter" else b.derived("max(1, (%s) // %d)" % (E, b.rng.choice([1, 2, 3])))
        ishape = tuple((k,) if i == d else x for i, x in enumerate(s))
        if b.numel(ishape) * b.dim_val(s[d]) > (1 << 21):
            raise Reject("too many index comparisons")
        idx = b.new_input(ishape, dtype=idtype, kind="index", arg="#{%s}" % E)
        b.v(idx).attrs.update(exact=True, intval=False)
        if op == "gather":
            b.add("torch.gather(%s, %d, %s)" % (a, d, idx), [ishape], keep_exact)
        elif op == "scatter_reduce":
            red = b.rng.choice(["sum", "prod", "mean", "amax", "amin"])
            src = "%s.narrow(%d, 0, #{%s})" % (a, d, k)
            b.add("%s.scatter_reduce(%d, %s, %s, %r, include_self=%r)" % (a, d, idx, src, red, b.rng.random() < 0.5),
                  [s], keep_exact if red in ("amax", "amin") else {})
        else:
            src = "%s.narrow(%d, 0, #{%s})" % (a, d, k)
            fn = "scatter_add" if op == "scatter_add" else "scatter"
            b.add("%s.%s(%d, %s, %s)" % (a, fn, d, idx, src), [s], keep_exact)
    elif op == "masked_scatter":
        # the source has as many elements as self: enough for any mask
        b.add("%s.masked_scatter(%s > 0, %s * 0.5)" % (a, a, a), [s])
    elif op == "isin":
        k = b.derived("max(1, (%s) // %d)" % (E, b.rng.choice([1, 2, 4])))
        tests = b.new_input(((k,),), dtype=idtype, kind="index", arg="#{%s}" % E)
        b.v(tests).attrs.update(exact=True, intval=False)
        ids = b.new_input((s[d],), dtype=idtype, kind="index", arg="#{%s}" % E)
        b.v(ids).attrs.update(exact=True, intval=False)
        b.add("torch.isin(%s, %s, invert=%r).float()" % (ids, tests, b.rng.random() < 0.5), [(s[d],)])
    elif op in ("select", "index", "put"):
        k = b.derived("max(1, (%s) // %d)" % (E, b.rng.choice([1, 2, 4])))
        idx = b.new_input(((k,),), dtype=idtype, kind="index", arg="#{%s}" % E)
        b.v(idx).attrs.update(exact=True, intval=False)
        if op == "select":
            b.add("%s.index_select(%d, %s)" % (a, d, idx), [tuple((k,) if i == d else x for i, x in enumerate(s))],
                  keep_exact)
        elif op == "index":
            b.add("%s[%s%s]" % (a, ":, " * d, idx), [tuple((k,) if i == d else x for i, x in enumerate(s))],
                  keep_exact)
        else:
            if b.numel(s) // max(1, b.dim_val(s[d])) * b.dim_val((k,)) * b.dim_val(s[d]) > (1 << 21):
                raise Reject("too many index comparisons")
            vals = "%s.narrow(%d, 0, #{%s})" % (a, d, k)
            if d == 0:
                b.add("torch.index_put(%s, (%s,), %s, accumulate=True)" % (a, idx, vals), [s])
            else:
                b.add("%s.index_add(%d, %s, %s)" % (a, d, idx, vals), [s])
    else:
        if len(s) != 2 or b.dim_val(s[1]) < 2:
            raise Reject("cross entropy needs [N, C]")
        labels = b.new_input((s[0],), dtype=torch.int64, kind="index", arg="#{%s}" % dim_expr(s[1]))
        b.v(labels).attrs.update(exact=True, intval=False)
        red = b.rng.choice(["mean", "sum", "none"])
        b.check_sum(a, [1])
        b.add("F.cross_entropy(%s, %s, reduction=%r)" % (a, labels, red), [(s[0],) if red == "none" else ()])


def g_layout(b):
    """Padding modes, diagonals, windows and products composed at import: reflection and
    replication padding of the last dims, diagonal of two dims, diag_embed, unfold
    (sliding windows, short and long), cross."""
    a, s = pick_ranked(b)
    ops = [o for o, t in (("reflect", "aten::reflection_pad1d"), ("replicate", "aten::replication_pad1d"),
                          ("diagonal", "aten::diagonal"), ("embed", "aten::diag_embed"),
                          ("unfold", "aten::unfold")) if t in b.supported]
    if not ops:
        raise Reject("no layout ops")
    op = b.rng.choice(ops)
    keep_exact = dict(exact=b.v(a).attrs.get("exact"), intval=b.v(a).attrs.get("intval"))
    if op in ("reflect", "replicate"):
        # (torch takes reflect/replicate on [C, W], [N, C, W] and the 2-d / 3-d forms)
        if len(s) < 2 or len(s) > 3:
            raise Reject("padding modes need rank 2 or 3")
        W = b.dim_val(s[-1])
        left, right = b.rng.choice([0, 1, 2]), b.rng.choice([1, 3])
        if op == "reflect" and max(left, right) >= W:
            raise Reject("reflection pad as large as the dim")
        w = b.derived("(%s) + %d" % (dim_expr(s[-1]), left + right))
        b.add("F.pad(%s, (%d, %d), mode=%r)" % (a, left, right, op), [tuple(s[:-1]) + ((w,),)], keep_exact)
    elif op == "unfold":  # windows of `size` every `step` along a dim, as a new last dim
        d = b.rng.randrange(len(s))
        L = b.dim_val(s[d])
        size = b.rng.randint(1, min(L, 24))
        step = b.rng.choice([1, 2, 3, size])
        if b.numel(s) // max(L, 1) * ((L - size) // step + 1) * size > (1 << 20):
            raise Reject("unfold too large")
        count = b.derived("((%s) - %d) // %d + 1" % (dim_expr(s[d]), size, step))
        out = tuple((count,) if i == d else x for i, x in enumerate(s)) + ((b.derived(str(size)),),)
        b.add("%s.unfold(%d, %d, %d)" % (a, d, size, step), [out], keep_exact)
    elif op == "diagonal":
        if len(s) < 2:
            raise Reject("diagonal needs 2 dims")
        d1, d2 = b.rng.sample(range(len(s)), 2)
        n = b.derived("min(%s, %s)" % (dim_expr(s[d1]), dim_expr(s[d2])))
        rest = tuple(x for i, x in enumerate(s) if i not in (d1, d2))
        b.add("torch.diagonal(%s, 0, %d, %d)" % (a, d1, d2), [rest + ((n,),)], keep_exact)
    else:
        if b.dim_val(s[-1]) > 64 or b.numel(s) * b.dim_val(s[-1]) > (1 << 20):
            raise Reject("diag_embed too large")
        b.add("torch.diag_embed(%s)" % a, [tuple(s) + (s[-1],)], keep_exact)


def g_select(b):
    a, s = pick_ranked(b)
    d = b.rng.randrange(len(s))
    idx = b.rng.choice(["0", "-1", "#{(%s) // 2}" % dim_expr(s[d])])
    if b.rng.random() < 0.5:
        e = "%s.select(%d, %s)" % (a, d, idx)
    else:
        e = "%s[%s%s]" % (a, ":, " * d, idx)
    attrs = dict(exact=b.v(a).attrs.get("exact"), intval=b.v(a).attrs.get("intval"), contig=d == 0)
    b.add(e, [tuple(x for i, x in enumerate(s) if i != d)], attrs)


def g_slice(b):
    a, s = pick_ranked(b)
    d = b.rng.randrange(len(s))
    E = dim_expr(s[d])
    if b.dim_val(s[d]) < 2 and b.rng.random() < 0.8:
        raise Reject("slice of a 1-sized dim")
    variant = b.rng.randrange(5)
    pre = ":, " * d
    if variant == 0:
        n = b.derived("(%s) - 1" % E)
        e = "%s[%s1:]" % (a, pre)
    elif variant == 1:
        n = b.derived("-(-(%s) // 2)" % E)
        e = "%s[%s::2]" % (a, pre)
    elif variant == 2:
        n = b.derived("-(-(%s) // 2)" % E)
        e = "%s.narrow(%d, 0, #{%s})" % (a, d, n)
    elif variant == 3:
        n = b.derived("min(3, %s)" % E)
        e = "%s[%s-3:]" % (a, pre)
    else:
        n = b.derived("(%s) // 2" % E)
        e = "%s[%s#{(%s) // 4}:#{(%s) // 4 + (%s) // 2}]" % (a, pre, E, E, E)
    attrs = dict(exact=b.v(a).attrs.get("exact"), intval=b.v(a).attrs.get("intval"), contig=d == 0)
    b.add(e, [tuple((n,) if i == d else x for i, x in enumerate(s))], attrs)


CHAIN_VIEWS = ("unsqueeze", "squeeze", "permute", "transpose", "t", "merge", "flatten", "reshape", "split_dim")


def g_view(b, a=None, only=None):
    """A view (or clone) of a, by default a picked float value; only: the view kinds allowed."""
    if a is None:
        a = b.pick(lambda v: v.kind == "tensor" and v.dtype is not None and v.dtype.is_floating_point)
    var = b.v(a)
    s = var.shape
    rank = len(s)
    attrs = dict(exact=var.attrs.get("exact"), intval=var.attrs.get("intval"), const=var.attrs.get("const"))
    ops = ["unsqueeze", "reshape", "flatten", "clone"]
    if rank >= 2:
        ops += ["permute", "transpose", "merge", "merge"]
    if rank == 2:
        ops += ["t"]
    if any(d == () for d in s):
        ops += ["squeeze", "expand", "expand"]
    if any(len(d) >= 2 for d in s):
        ops += ["split_dim", "split_dim"]
    if rank <= 4:
        ops += ["expand_new"]
    if only is not None:
        ops = [o for o in ops if o in only]
    op = b.rng.choice(ops)
    contig = var.attrs.get("contig", True)
    if op == "unsqueeze":
        d = b.rng.randint(0, rank)
        e = "%s.unsqueeze(%d)" % (a, d - (rank + 1) if b.rng.random() < 0.3 else d)
        shape = s[:d] + ((),) + s[d:]
        attrs["contig"] = contig
    elif op == "squeeze":
        ones = [i for i, d in enumerate(s) if d == ()]
        d = b.rng.choice(ones)
        e = "%s.squeeze(%d)" % (a, d)
        shape = s[:d] + s[d + 1:]
        attrs["contig"] = contig
    elif op == "permute":
        perm = list(range(rank))
        while perm == list(range(rank)):
            b.rng.shuffle(perm)
        e = "%s.permute(%s)" % (a, ", ".join(map(str, perm)))
        shape = tuple(s[i] for i in perm)
        attrs["contig"] = False
    elif op == "transpose":
        i, j = b.rng.sample(range(rank), 2)
        e = "%s.transpose(%d, %d)" % (a, i, j - rank if b.rng.random() < 0.3 else j)
        shape = list(s)
        shape[i], shape[j] = shape[j], shape[i]
        shape = tuple(shape)
        attrs["contig"] = False
    elif op == "t":
        e = "%s.t()" % a
        shape = (s[1], s[0])
        attrs["contig"] = False
    elif op in ("merge", "flatten", "reshape", "split_dim"):
        if op == "merge":
            i = b.rng.randrange(rank - 1)
            shape = s[:i] + (mul_dim(s[i], s[i + 1]),) + s[i + 2:]
        elif op == "flatten":
            m = ()
            for d in s:
                m = mul_dim(m, d)
            shape = (m,)
        elif op == "reshape":
            if rank == 0:
                shape = ((),)
            else:
                m = ()
                for d in s[:-1]:
                    m = mul_dim(m, d)
                shape = (m, s[-1])
        else:
            i = b.rng.choice([i for i, d in enumerate(s) if len(d) >= 2])
            atoms = list(s[i])
            b.rng.shuffle(atoms)
            cut = b.rng.randint(1, len(atoms) - 1)
            shape = s[:i] + (tuple(sorted(atoms[:cut])), tuple(sorted(atoms[cut:]))) + s[i + 1:]
        if op == "flatten" and b.rng.random() < 0.5:
            e = "%s.flatten()" % a
        else:
            use_view = contig and b.rng.random() < 0.5
            sizes = ", ".join("#{%s}" % dim_expr(d) for d in shape)
            if shape and b.rng.random() < 0.3:
                j = b.rng.randrange(len(shape))
                sizes = ", ".join("-1" if k == j else "#{%s}" % dim_expr(d) for k, d in enumerate(shape))
            e = "%s.%s(%s)" % (a, "view" if use_view else "reshape", sizes)
            if b.rng.random() < 0.1 and "-1" not in sizes:
                e = "aten_reshape(%s, [%s])" % (a, sizes)
        attrs["contig"] = True
    elif op == "clone":
        e = b.rng.choice(["%s.clone()", "%s.contiguous()"]) % a
        attrs["contig"] = True
        shape = s
    elif op == "expand":
        ones = [i for i, d in enumerate(s) if d == ()]
        i = b.rng.choice(ones)
        nd = b.new_dim(SMALL_POOL + [(129, 1), (64, 1)])
        shape = tuple(nd if k == i else d for k, d in enumerate(s))
        sizes = ", ".join("#{%s}" % dim_expr(nd) if k == i else "-1" for k in range(rank))
        e = "%s.expand(%s)" % (a, sizes)
        attrs["contig"] = False
    else:  # expand_new: a new leading dim
        nd = b.new_dim(SMALL_POOL)
        shape = (nd,) + s
        e = "%s.expand(%s)" % (a, ", ".join(["#{%s}" % dim_expr(nd)] + ["-1"] * rank))
        attrs["contig"] = False
    if b.numel(shape) > ELEMENT_LIMIT:
        raise Reject("view too large")
    return b.add(e, [shape], attrs)


def g_cast(b):
    a = b.pick_float()
    var = b.v(a)
    dt = var.dtype
    targets = [t for t in (torch.float32, torch.bfloat16, torch.float16) if t != dt]
    to = b.rng.choice(targets)
    if to == torch.float16 and var.attrs.get("maxabs", 0) > 3e4:
        raise Reject("f16 overflow")
    # Only .to(NAME) / type_as: the float64 reference rebinds F32/BF16/F16 (a .float() would round it).
    forms = ["%s.to(%s)" % (a, DTYPE_NAME[to]), "%s.to(dtype=%s)" % (a, DTYPE_NAME[to])]
    c = b.add(b.rng.choice(forms), [var.shape], dict(exact=var.attrs.get("exact"), intval=var.attrs.get("intval")))
    if b.rng.random() < 0.6:   # and back, through another op
        c2 = b.add("%s * 2.0" % c, [var.shape])
        b.add("%s.to(%s)" % (c2, DTYPE_NAME[dt]), [var.shape])


def g_const_op(b):
    """A constant (arange/full/ones/zeros/scalar_tensor) combined with a value."""
    a = b.pick_float()
    s = b.v(a).shape
    c = b.const_value(b.derive_broadcast(s))
    form = b.rng.choice(["%s + %s", "%s * %s", "%s - %s"])
    shape = broadcast(s, b.v(c).shape)
    b.add(form % (a, c), [shape])


def g_tril_data(b):
    """tril/triu of a computed value (not only of constant masks)."""
    a = b.pick_float(lambda v: len(v.shape) >= 2)
    if a is None:
        raise Reject("no value of rank >= 2")
    k = b.rng.choice([0, 1, -1])
    e = "torch.%s(%s, %d)" % (b.rng.choice(["tril", "triu"]), a, k)
    b.add(e, [b.v(a).shape])


# (16 and 49: heads short enough to go several to a pass, LowerAttention.cpp's diagonal packs.)
ATTENTION_DIMS = [1, 7, 16, 49, 64, 128, 129, 200, 513]


def g_attention(b):
    """softmax(f(q @ k^T)) @ v, which -O2 lowers as one flash-attention kernel: several
    query and key blocks, a scale, then no mask, a constant causal mask (masked_fill of -inf or
    where with a large negative fill), a mask from make_mask, or an additive bias input; with
    two batch dims, q, k and v may be heads split out of [b, rows, h * d] inputs (k and v
    repeated from fewer heads, as grouped-query attention does), and the result merged back into
    [b, s, h * dv]; or [b, h, rows, d] inputs with k and v expanded from fewer heads, or one k
    and v expanded over the first batch dim."""
    batch = tuple(b.new_dim(SMALL_POOL) for _ in range(b.rng.choice([1, 2])))
    # Grouped-query attention: the heads as [kv heads, repeats], k and v repeated from kv heads.
    grouped = len(batch) == 2 and b.rng.random() < 0.35
    if grouped:
        KVH, REP = b.new_dim(SMALL_POOL), b.new_dim(SMALL_POOL)
        batch = (batch[0], KVH + REP)
    nb = b.numel(batch)
    s, t = b.rng.choice(ATTENTION_DIMS), b.rng.choice(ATTENTION_DIMS)
    d, dv = b.rng.choice([1, 16, 64, 129]), b.rng.choice([1, 16, 64, 130])
    if nb * max(s * t, s * d, t * d, t * dv, s * dv) > ELEMENT_LIMIT:
        raise Reject("attention too large")
    S, T, D, DV = (b.sym(s),), (b.sym(t),), (b.sym(d),), (b.sym(dv),)
    kinds = ["normal", "unit"]
    split = len(batch) == 2 and b.rng.random() < 0.5
    if split:
        # Heads split out of [b, rows, h * d] (projections viewed per head): for b > 1 the
        # batched matmul's [b * h] batch has no single stride.
        B0, H = batch

        def heads(rows, width):
            x = b.new_input((B0, rows, H + width), kind=b.rng.choice(kinds))
            return b.add("%s.view%s.transpose(1, 2)" % (x, shape_src((B0, rows, H, width))),
                         [(B0, H, rows, width)])
        if grouped:
            # HF's repeat_kv: [b, kvh, rows, d] -> [b, kvh, rep, rows, d] -> [b, kvh * rep, rows, d].
            def repeated(rows, width):
                x = b.new_input((B0, rows, KVH + width), kind=b.rng.choice(kinds))
                x = b.add("%s.view%s.transpose(1, 2)" % (x, shape_src((B0, rows, KVH, width))),
                          [(B0, KVH, rows, width)])
                return b.add("%s[:, :, None].expand%s.reshape%s" % (
                    x, shape_src((B0, KVH, REP, rows, width)), shape_src((B0, H, rows, width))),
                    [(B0, H, rows, width)])
            q, k, v = heads(S, D), repeated(T, D), repeated(T, DV)
        else:
            q, k, v = heads(S, D), heads(T, D), heads(T, DV)
    elif grouped:
        # [b, h, rows, d] heads over fewer key heads, expanded (packed into shared query blocks).
        B0, H = batch
        q = b.new_input(batch + (S, D), kind=b.rng.choice(kinds))

        def repeated(rows, width):
            x = b.new_input((B0, KVH, rows, width), kind=b.rng.choice(kinds))
            return b.add("%s[:, :, None].expand%s.reshape%s" % (
                x, shape_src((B0, KVH, REP, rows, width)), shape_src((B0, H, rows, width))),
                [(B0, H, rows, width)])
        k, v = repeated(T, D), repeated(T, DV)
    elif b.rng.random() < 0.2:
        # One K and V for every batch of queries (a shared memory), expanded.
        q = b.new_input(batch + (S, D), kind=b.rng.choice(kinds))
        one = ((),) + batch[1:]
        k = b.add("%s.expand%s" % (b.new_input(one + (T, D), kind=b.rng.choice(kinds)), shape_src(batch + (T, D))),
                  [batch + (T, D)])
        v = b.add("%s.expand%s" % (b.new_input(one + (T, DV), kind=b.rng.choice(kinds)), shape_src(batch + (T, DV))),
                  [batch + (T, DV)])
    else:
        q = b.new_input(batch + (S, D), kind=b.rng.choice(kinds))
        k = b.new_input(batch + (T, D), kind=b.rng.choice(kinds))
        v = b.new_input(batch + (T, DV), kind=b.rng.choice(kinds))
    shape = batch + (S, T)
    x = b.add("torch.matmul(%s, %s.transpose(-1, -2))" % (q, k), [shape])
    x = b.add(b.rng.choice(["%s / 8.0", "%s * 0.125", "%s * 0.3"]) % x, [shape])
    r = b.rng.random()
    if r < 0.45:
        tri, diag = b.rng.choice([("triu", 1), ("tril", -1), ("triu", 0)])
        m = b.add("torch.ones(#{%s}, #{%s}, dtype=torch.bool).%s(%d)" % (dim_expr(S), dim_expr(T), tri, diag),
                  [(S, T)], dict(exact=True, const=True))
        if b.rng.random() < 0.6:
            x = b.add("%s.masked_fill(%s, float('-inf'))" % (x, m), [shape])
        else:
            fill = b.rng.choice(["torch.finfo(%s.dtype).min" % x, "-1e4"])
            x = b.add("torch.where(%s, torch.full([], %s, dtype=%s.dtype), %s)" % (m, fill, x, x), [shape])
    elif r < 0.6:
        m = make_mask(b, shape)
        x = b.add("%s.masked_fill(%s, -1e4)" % (x, m), [shape])
    elif r < 0.75:
        bias = b.new_input(b.derive_broadcast(shape), kind=b.rng.choice(["normal", "zeros"]))
        x = b.add("%s + %s" % (x, bias), [shape])
    p = b.add(b.rng.choice(["torch.softmax(%s, dim=-1)", "F.softmax(%s, dim=-1)", "%s.softmax(-1)"]) % x, [shape])
    o = b.add("torch.matmul(%s, %s)" % (p, v), [batch + (S, DV)])
    if split and b.rng.random() < 0.5:  # the head merge
        b.add("%s.transpose(1, 2).reshape%s" % (o, shape_src((B0, S, H + DV))), [(B0, S, H + DV)])


def g_rotary(b):
    """The rotary embedding on a head-split view (of an input, or of a projection's output):
    q * cos + rotate_half(q) * sin, rotate_half
    being cat((-x2, x1), dim=-1) of the halves of the last dim (which -O2 reads as one cat of
    slices into column ranges, the negation a product with a constant sign row), and cat along
    the last dim of negated and plain slices in other orders."""
    s, h = b.rng.choice([1, 3, 17, 130, 300]), b.rng.choice([1, 2, 4])
    d = b.rng.choice([2, 8, 64, 128])
    if s * h * d > ELEMENT_LIMIT:
        raise Reject("rotary too large")
    S, H, D = (b.sym(s),), (b.sym(h),), (b.sym(d),)
    E = dim_expr(D)
    if b.rng.random() < 0.4:
        # A projection split into heads, with or without a bias: -O2 runs the rotary in the
        # matmul's kernel, over split columns, for heads of 32 or more.
        k = b.rng.choice([8, 64, 130])
        if max(s, h * d) * k > ELEMENT_LIMIT:
            raise Reject("rotary projection too large")
        K = (b.sym(k),)
        a = b.new_input((S, K), kind=b.rng.choice(["normal", "unit"]))
        w = b.new_input((H + D, K), kind="normal")
        if b.rng.random() < 0.3:
            bias = b.new_input((H + D,), kind=b.rng.choice(["normal", "zeros"]))
            y = b.add("torch.addmm(%s, %s, %s.t())" % (bias, a, w), [(S, H + D)])
        else:
            y = b.add("%s @ %s.t()" % (a, w), [(S, H + D)])
        x = b.add("%s.view%s" % (y, shape_src((S, H, D))), [(S, H, D)])
    else:
        x = b.new_input((S, H, D), kind=b.rng.choice(["normal", "unit"]))
    q = b.add("%s.transpose(0, 1)" % x, [(H, S, D)]) if b.rng.random() < 0.7 else x
    shape = (H, S, D) if q != x else (S, H, D)
    lo, hi = "%s[..., :#{(%s) // 2}]" % (q, E), "%s[..., #{(%s) // 2}:]" % (q, E)
    r = b.rng.random()
    if r < 0.6:
        rot = b.add("torch.cat((-%s, %s), dim=-1)" % (hi, lo), [shape])
    elif r < 0.8:
        rot = b.add("torch.cat((%s, -%s), dim=-1)" % (hi, lo), [shape])
    else:
        rot = b.add("torch.cat((-%s, -%s), dim=-1)" % (lo, hi), [shape])
    tab = (S, D) if q != x else (S, H, D)  # the tables broadcast over the heads of the view
    cos = b.new_input(tab, kind=b.rng.choice(["normal", "ones"]))
    sin = b.new_input(tab, kind=b.rng.choice(["normal", "zeros"]))
    b.add("%s * %s + %s * %s" % (q, cos, rot, sin), [shape])


def g_interleave(b):
    """Rows interleaved along the last dim: values stacked along a new last dim and
    flattened (the value itself, computed ones, constants, a fresh input), GPT-J's
    rotate_every_two (stack of stepped slices), and a last dim of 1 broadcast and merged
    (repeat_interleave, nearest upsampling of [N, C, L] and [N, C, H, W])."""
    a, s = pick_ranked(b)
    var = b.v(a)
    last = s[-1]
    r = b.rng.random()
    ex_ = var.attrs.get("exact")
    if r < 0.45:
        n = b.rng.choice([2, 2, 3, 4])
        pieces = []
        for _ in range(n):
            k = b.rng.random()
            if k < 0.3:
                pieces.append(a)
            elif k < 0.55:
                pieces.append(b.add("%s * %r" % (a, b.rng.choice([2.0, -1.0, 0.5])), [s]))
            elif k < 0.8:
                c = b.rng.choice(["torch.zeros_like(%s)", "torch.ones_like(%s)", "torch.full_like(%s, -2.0)"])
                pieces.append(b.add(c % a, [s], dict(exact=True, intval=True, const=True)))
            else:
                pieces.append(b.new_input(s, dtype=var.dtype))
        total = b.derived("(%s) * %d" % (dim_expr(last), n))
        b.add("torch.stack([%s], dim=-1).flatten(-2)" % ", ".join(pieces), [s[:-1] + ((total,),)],
              dict(exact=ex_))
    elif r < 0.6:
        if b.dim_val(last) % 2:
            raise Reject("odd last dim")
        b.add("torch.stack((-%s[..., 1::2], %s[..., ::2]), -1).flatten(-2)" % (a, a), [s], dict(exact=ex_))
    elif r < 0.8:
        k = b.rng.choice([2, 3, 4, 70])
        if b.numel(s) * k > ELEMENT_LIMIT:
            raise Reject("repeat too large")
        total = b.derived("(%s) * %d" % (dim_expr(last), k))
        b.add("%s.repeat_interleave(%d, dim=-1)" % (a, k), [s[:-1] + ((total,),)], dict(exact=ex_))
    else:
        k = b.rng.choice([2, 3])
        if len(s) not in (3, 4) or b.numel(s) * k ** (len(s) - 2) > ELEMENT_LIMIT:
            raise Reject("upsampling needs [N, C, L] or [N, C, H, W]")
        up = tuple((b.derived("(%s) * %d" % (dim_expr(d), k)),) for d in s[2:])
        b.add("F.interpolate(%s, scale_factor=%d, mode='nearest')" % (a, k), [s[:2] + up],
              dict(exact=ex_))


def g_int_input(b):
    """Integer graph inputs (int64 or int32, small values as masks and counts are) in
    arithmetic: promoted against a float value, compared, masked_fill's mask, cast, and integer
    arithmetic cast to float (the compiler's cast back of a whole-number result)."""
    shape = b.random_shape(b.rng.choice([1, 2, 3]))
    m = b.new_input(shape, dtype=b.rng.choice([torch.int64, torch.int64, torch.int32]), kind="int")
    x = b.new_input(shape, kind=b.rng.choice(["normal", "unit"]))
    r = b.rng.random()
    if r < 0.25:
        b.add("%s * %s" % (x, m), [shape])
    elif r < 0.45:
        b.add("torch.where(%s > 0, %s, -%s)" % (m, x, x), [shape])
    elif r < 0.6:
        b.add("%s.masked_fill(%s == 0, -3.0)" % (x, m), [shape])
    elif r < 0.8:
        b.add("%s.to(%s.dtype) * 0.5 + %s" % (m, x, x), [shape])
    else:
        b.add("(%s * 3 - 1).to(%s.dtype) + %s" % (m, x, x), [shape])


def g_narrow_int(b):
    """uint8, int8 and int16 graph inputs (images, quantized data): read as floats (an image
    scaled to [0, 1]), arithmetic and bitwise ops that wrap around in the narrow type (4-bit
    fields unpacked with shifts and masks), comparisons and sums
    (int64), a float mask cast into the narrow type, and ints out of the narrow range
    (Python ints and 0-d int64 tensors, which eager wraps into it); each integer result is cast to the
    case's float dtype (graph outputs are float)."""
    fdt = DTYPE_NAME[b.dt]
    shape = b.random_shape(b.rng.choice([1, 2, 3]))
    dt = b.rng.choice([torch.uint8, torch.uint8, torch.int8, torch.int16])
    top = {torch.uint8: 256, torch.int8: 128, torch.int16: 32768}[dt]
    m = b.new_input(shape, dtype=dt, kind="index", arg=top)
    r = b.rng.random()
    if r < 0.3:
        x = b.pick_float(lambda v: v.shape == shape) or b.new_input(shape, kind=b.rng.choice(["normal", "unit"]))
        b.add("(%s.to(%s.dtype) / %d - 0.5) * %s" % (m, x, top - 1, x), [shape])
    elif r < 0.55:
        m2 = b.new_input(shape, dtype=dt, kind="index", arg=top)
        forms = ["%s + %s * 3" % (m, m2), "%s - %s" % (m, m2), "-%s + 7" % m, "%s & %s" % (m, m2),
                 "%s | %s" % (m, m2), "%s ^ %s" % (m, m2), "~%s" % m, "(%s >> 4) & 15" % m, "%s << 3" % m,
                 "%s >> (%s & 3)" % (m, m2)]
        if dt != torch.int16:  # int16 products pass 2^24, past which the device's f32 is not exact
            forms.append("%s * %s" % (m, m2))
        e = b.rng.choice(forms)
        b.add("(%s).to(%s)" % (e, fdt), [shape])
    elif r < 0.7:
        if r < 0.6:
            b.add("(%s > %d).sum().to(%s)" % (m, top // 2, fdt), [()])
        else:
            b.add("%s.%s(-1).to(%s)" % (m, b.rng.choice(["sum", "amax"]), fdt), [shape[:-1]])
    elif r < 0.85:
        x = b.pick_float(lambda v: v.shape == shape) or b.new_input(shape, kind="normal")
        b.add("((%s > 0).to(%s) * %d).to(%s)" % (x, DTYPE_NAME[dt], b.rng.choice([3, 100, 255]), fdt), [shape])
    elif r < 0.92:
        b.add("torch.where(%s > %d, %s, %s // 3).to(%s)" % (m, top // 3, m, m, fdt), [shape])
    else:
        # an int outside the narrow range (or a 0-d int64 tensor of one) takes the narrow dtype first
        k = b.rng.choice([-1, 300, -200, 2 * top + 9, top + 1])
        other = b.rng.choice(["%d" % k, "torch.tensor(%d)" % k])
        forms = ["(%s > %s)" % (m, other), "(%s == %s)" % (m, other), "(%s // %s)" % (m, other),
                 "(%s %% %s)" % (m, other), "torch.maximum(%s, torch.tensor(%d))" % (m, k),
                 "torch.minimum(%s, torch.tensor(%d))" % (m, k)]
        b.add("%s.to(%s)" % (b.rng.choice(forms), fdt), [shape])


SPATIAL_DIMS = [(1, 2), (2, 2), (3, 3), (4, 2), (5, 3), (7, 3), (8, 2), (16, 2), (31, 1), (64, 0.5), (129, 0.3)]
SPATIAL_CHANNELS = [(1, 3), (2, 2), (3, 3), (4, 2), (8, 2), (16, 1), (129, 0.3)]
SPATIAL_MACS = 1 << 22        # multiply-adds of one convolution


def spatial_out(b, d, k, stride=1, pad=0, dil=1, ceil=False):
    """The symbolic output length of a window of k taps over dim d (PyTorch's conv/pool formula)."""
    E, e = dim_expr(d), dil * (k - 1) + 1
    if not ceil:
        return (b.derived("((%s) + %d - %d) // %d + 1" % (E, 2 * pad, e, stride)),)
    q = "(-(-((%s) + %d - %d) // %d))" % (E, 2 * pad, e, stride)
    # ceil mode: the last window must start inside the input or its left padding
    return (b.derived("%s + 1 - (1 if %s * %d >= (%s) + %d else 0)" % (q, q, stride, E, pad)),)


def const_dim(b, n):
    return () if n == 1 else (b.derived(str(n)),)


def g_spatial(b):
    """Image and sequence ops on an [N, C, H, W] or [N, C, L] value (often a computed one, so that
    they meet fusion): convolution (stride, padding, dilation, groups, bias), max and average
    pooling (padding, ceil mode), adaptive pooling, interpolation, padding modes, batch and group
    norm, pixel shuffle and unfold."""
    a = b.pick_float(lambda v: len(v.shape) in (3, 4, 5) and b.numel(v.shape) <= 20000)
    if a is None or b.rng.random() < 0.3:
        rank = b.rng.choice([3, 4, 4, 5])
        n = b.new_dim(SMALL_POOL)
        c = b.new_dim(SPATIAL_CHANNELS)
        sp = tuple(b.new_dim(SPATIAL_DIMS if rank < 5 else SMALL_POOL) for _ in range(rank - 2))
        if b.numel((n, c) + sp) > 20000:
            raise Reject("spatial input too large")
        a = b.new_input((n, c) + sp, kind=b.rng.choice(["normal", "unit", "pos"]))
    s, dt = b.v(a).shape, b.v(a).dtype
    rank = len(s)
    N, C, spatial = s[0], s[1], s[2:]
    nsp = len(spatial)
    fn = {1: "1d", 2: "2d", 3: "3d"}[nsp]
    cval = b.dim_val(C)
    keep_exact = dict(exact=b.v(a).attrs.get("exact"), intval=b.v(a).attrs.get("intval"))
    ops = [o for o, t in (("conv", "aten::convolution"), ("maxpool", "aten::max_pool2d_with_indices"),
                          ("avgpool", "aten::avg_pool2d"), ("adaptive", "aten::_adaptive_avg_pool2d"),
                          ("interp", "aten::upsample_nearest2d"), ("pad", "aten::constant_pad_nd"),
                          ("group_norm", "aten::native_group_norm"),
                          ("batch_norm", "aten::_native_batch_norm_legit_no_training"),
                          ("pixel_shuffle", "aten::pixel_shuffle"), ("unfold", "aten::im2col"))
           if t in b.supported]
    if nsp == 1:
        ops = [o for o in ops if o not in ("adaptive", "pixel_shuffle", "unfold")]
    if nsp == 3:
        ops = [o for o in ops if o not in ("pixel_shuffle", "unfold")]
        if b.numel(spatial) > 2000:
            raise Reject("3-d value too large")
    if not ops:
        raise Reject("no spatial ops")
    op = b.rng.choice(ops)
    if op == "conv" and b.rng.random() < 0.25:
        # transposed: out = (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1
        k = b.rng.choice([1, 2, 3])
        stride, dil = b.rng.choice([1, 2, 3]), b.rng.choice([1, 1, 2])
        pad = b.rng.choice([0, 0, 1])
        opad = b.rng.choice([0, stride - 1]) if stride > 1 else 0
        groups = "1"
        cout = b.new_dim(SPATIAL_CHANNELS)
        out_sp = tuple((b.derived("((%s) - 1) * %d - %d + %d" % (dim_expr(d), stride, 2 * pad,
                                                                    dil * (k - 1) + opad + 1)),) for d in spatial)
        oshape = (N, cout) + out_sp
        if b.numel(oshape) * cval * k ** nsp > SPATIAL_MACS or b.numel(oshape) > ELEMENT_LIMIT:
            raise Reject("convolution too large")
        kd = const_dim(b, k)
        w = b.new_param(dtype=dt, shape=(C, cout) + (kd,) * nsp, kind="normal",
                        arg="#{1.0 / max(1, %s) ** 0.5}" % dim_expr(C))
        bias = "None" if b.rng.random() < 0.4 else b.new_param(dtype=dt, shape=(cout,), kind=b.rng.choice(["zeros", "normal"]))
        b.add("F.conv_transpose%s(%s, %s, %s, stride=%d, padding=%d, output_padding=%d, groups=%s, dilation=%d)"
              % (fn, a, w, bias, stride, pad, opad, groups, dil), [oshape])
    elif op == "conv":
        k = b.rng.choice([1, 1, 2, 3, 3, 5])
        stride, dil = b.rng.choice([1, 1, 2, 3]), b.rng.choice([1, 1, 1, 2])
        same = stride == 1 and b.rng.random() < 0.2
        pad = 0 if same else b.rng.choice([0, 0, 1, k // 2, k])
        depthwise = cval > 1 and b.rng.random() < 0.3
        if depthwise:
            mult = b.rng.choice([1, 1, 2])
            cout, cin_g, groups = mul_dim(C, const_dim(b, mult)), (), "#{%s}" % dim_expr(C)
        else:
            cout, cin_g, groups = b.new_dim(SPATIAL_CHANNELS + [(33, 1)]), C, "1"
        out_sp = spatial if same else tuple(spatial_out(b, d, k, stride, pad, dil) for d in spatial)
        oshape = (N, cout) + out_sp
        kd = const_dim(b, k)
        macs = b.numel(oshape) * b.dim_val(cin_g) * k ** nsp
        if macs > SPATIAL_MACS:
            raise Reject("convolution too large")
        wkind = b.rng.choice(["normal", "normal", "ones", "unit"])
        fan = "%s*%d" % (dim_expr(cin_g), k ** nsp)
        w = b.new_param(dtype=dt, shape=(cout, cin_g) + (kd,) * nsp, kind=wkind,
                        arg="#{1.0 / max(1, %s) ** 0.5}" % fan if wkind == "normal" else None)
        bias = "None" if b.rng.random() < 0.3 else b.new_param(dtype=dt, shape=(cout,), kind=b.rng.choice(["zeros", "normal"]))
        padding = "'same'" if same else str(pad)
        b.add("F.conv%s(%s, %s, %s, stride=%d, padding=%s, dilation=%d, groups=%s)"
              % (fn, a, w, bias, stride, padding, dil, groups), [oshape])
    elif op in ("maxpool", "avgpool"):
        k = b.rng.choice([1, 2, 2, 3, 4])
        stride = b.rng.choice([None, 1, 2, 3])
        st = k if stride is None else stride
        pad = b.rng.choice([0, 0, k // 2])
        ceil = b.rng.random() < 0.3
        if op == "maxpool":
            dil = b.rng.choice([1, 1, 2])
            out_sp = tuple(spatial_out(b, d, k, st, pad, dil, ceil) for d in spatial)
            b.add("F.max_pool%s(%s, %d, stride=%s, padding=%d, dilation=%d, ceil_mode=%r)"
                  % (fn, a, k, stride, pad, dil, ceil), [(N, C) + out_sp], keep_exact)
        else:
            out_sp = tuple(spatial_out(b, d, k, st, pad, 1, ceil) for d in spatial)
            extra = ""
            if nsp == 2 and b.rng.random() < 0.2:
                extra = ", divisor_override=%d" % b.rng.choice([1, 3])
            b.add("F.avg_pool%s(%s, %d, stride=%s, padding=%d, ceil_mode=%r, count_include_pad=%r%s)"
                  % (fn, a, k, stride, pad, ceil, b.rng.random() < 0.5, extra), [(N, C) + out_sp])
    elif op == "adaptive":
        osz = [b.rng.choice([1, 1, 2, 3, 5]) for _ in spatial]
        out_sp = tuple(const_dim(b, o) for o in osz)
        if b.rng.random() < 0.5:
            b.add("F.adaptive_avg_pool%s(%s, %r)" % (fn, a, tuple(osz)), [(N, C) + out_sp])
        else:
            b.add("F.adaptive_max_pool%s(%s, %r)" % (fn, a, tuple(osz)), [(N, C) + out_sp], keep_exact)
    elif op == "interp":
        modes = {1: ["nearest", "linear"], 2: ["nearest", "bilinear", "bilinear", "bicubic"],
                 3: ["nearest", "trilinear"]}[nsp]
        mode = b.rng.choice(modes)
        if b.rng.random() < 0.5:
            sf = b.rng.choice([2, 3])
            out_sp = tuple((b.derived("(%s) * %d" % (dim_expr(d), sf)),) for d in spatial)
            size = "scale_factor=%d" % sf
        else:
            osz = [b.rng.choice([1, 2, 5, 9, 17]) for _ in spatial]
            out_sp = tuple(const_dim(b, o) for o in osz)
            size = "size=%r" % (tuple(osz),)
        align = "" if mode == "nearest" else ", align_corners=%r" % (b.rng.random() < 0.5)
        b.add("F.interpolate(%s, %s, mode=%r%s)" % (a, size, mode, align), [(N, C) + out_sp],
              keep_exact if mode == "nearest" else {})
    elif op == "pad":
        mode = b.rng.choice(["constant", "constant", "reflect", "replicate"])
        pads = [b.rng.choice([0, 1, 2]) for _ in range(2 * nsp)]
        if mode == "reflect" and any(p >= b.dim_val(spatial[nsp - 1 - i // 2]) for i, p in enumerate(pads)):
            raise Reject("reflect padding as wide as the input")
        out_sp = tuple((b.derived("(%s) + %d" % (dim_expr(d), pads[2 * (nsp - 1 - i)] + pads[2 * (nsp - 1 - i) + 1])),)
                       for i, d in enumerate(spatial))
        value = ", value=%r" % b.rng.choice([0.0, 1.0, -2.5]) if mode == "constant" else ""
        b.add("F.pad(%s, %r, mode=%r%s)" % (a, tuple(pads), mode, value), [(N, C) + out_sp], keep_exact)
    elif op == "group_norm":
        if b.numel(spatial) * (1 if b.rng.random() < 0.5 else cval) < 2:
            raise Reject("group of one element")
        groups = "1" if b.rng.random() < 0.5 else "#{%s}" % dim_expr(C)
        w = b.new_param(dtype=dt, shape=(C,), kind=b.rng.choice(["ones", "normal", "pos"]))
        bias = b.new_param(dtype=dt, shape=(C,), kind=b.rng.choice(["zeros", "normal"]))
        b.check_sum(a, list(range(1, rank)))
        b.add("F.group_norm(%s, %s, %s, %s, eps=%r)" % (a, groups, w, bias, b.rng.choice([1e-5, 1e-3])), [s])
    elif op == "batch_norm":
        mean = b.new_param(dtype=dt, shape=(C,), kind=b.rng.choice(["zeros", "normal"]), buffer=True)
        var = b.new_param(dtype=dt, shape=(C,), kind=b.rng.choice(["ones", "pos"]), buffer=True)
        w = "None" if b.rng.random() < 0.2 else b.new_param(dtype=dt, shape=(C,), kind=b.rng.choice(["ones", "normal"]))
        bias = "None" if b.rng.random() < 0.2 else b.new_param(dtype=dt, shape=(C,), kind=b.rng.choice(["zeros", "normal"]))
        b.add("F.batch_norm(%s, %s, %s, %s, %s, False, 0.1, %r)" % (a, mean, var, w, bias, 1e-5), [s])
    elif op == "pixel_shuffle":
        r = 2
        form = b.rng.choice(["shuffle", "unshuffle", "channels"])
        if form == "unshuffle":
            if any(b.dim_val(d) % r for d in spatial):
                raise Reject("spatial dims not even")
            cd = mul_dim(C, const_dim(b, r * r))
            out_sp = tuple((b.derived("(%s) // %d" % (dim_expr(d), r)),) for d in spatial)
            b.add("F.pixel_unshuffle(%s, %d)" % (a, r), [(N, cd) + out_sp], keep_exact)
            return
        if cval % (r * r):
            raise Reject("channels not a multiple of 4")
        if form == "channels":
            b.add("F.channel_shuffle(%s, %d)" % (a, r), [s], keep_exact)
            return
        cd = (b.derived("(%s) // %d" % (dim_expr(C), r * r)),)
        out_sp = tuple((b.derived("(%s) * %d" % (dim_expr(d), r)),) for d in spatial)
        b.add("F.pixel_shuffle(%s, %d)" % (a, r), [(N, cd) + out_sp], keep_exact)
    else:  # unfold (im2col)
        k = b.rng.choice([1, 2, 3])
        stride, pad, dil = b.rng.choice([1, 2]), b.rng.choice([0, 1]), b.rng.choice([1, 1, 2])
        hw = [spatial_out(b, d, k, stride, pad, dil) for d in spatial]
        oshape = (N, mul_dim(C, const_dim(b, k * k)), mul_dim(hw[0], hw[1]))
        if b.numel(oshape) > ELEMENT_LIMIT:
            raise Reject("unfold too large")
        b.add("F.unfold(%s, %d, dilation=%d, padding=%d, stride=%d)" % (a, k, dil, pad, stride), [oshape],
              keep_exact)



def g_catalog(b):
    """Listed operators the other generators leave out, on computed values: more elementwise
    functions (tan, sinh, acosh, atanh, log10, exp2, deg2rad, rad2deg, mish, logit, clamp_min/max,
    fmax/fmin, copysign, lerp with a tensor weight, logaddexp2, entr, xlog1py, prelu, rrelu in
    eval, nan_to_num), the discontinuous ones only where no rounding can flip them (floor, ceil,
    round, trunc, frac, fmod, remainder, floor division and sign of exact values; hardshrink,
    threshold, heaviside and count_nonzero of values far from their thresholds), reductions
    (median, nansum, prod, std/var with dims, aminmax, p-norms, dist, argmax/argmin of exact
    values), losses (mse, huber, smooth L1, soft margin, binary cross entropy with and without
    logits), and structure ops (trace, diag, rot90, repeat, cummin, block_diag, cross, a
    triangle gathered by tril_indices/triu_indices, the
    scatter forms of select/slice/diagonal, addmv/addr/baddbmm/addbmm, cdist, windows and
    linspace/logspace/eye added to a value); and (catalog_more) max/min of two tensors, pow
    with a scalar base or a tensor exponent, rsub, NaN and inf tests of log of values away from
    zero, take, index_fill, index_reduce, scatter of a value, masked_fill with a 0-d tensor,
    std_mean, nanmedian, renorm, split with sizes, searchsorted/bucketize and round(decimals)
    and remainder/fmod by a tensor of exact values, bitwise ops and shifts of integer inputs,
    embedding_bag, multi-margin and 2-d NLL losses, pdist, bilinear, grid_sample."""
    a, s = pick_ranked(b)
    var = b.v(a)
    exact = bool(var.attrs.get("exact"))
    keep = dict(exact=exact, intval=var.attrs.get("intval"))
    ops = ["tan", "sinh", "acosh", "atanh", "log10", "exp2", "deg2rad", "rad2deg", "mish", "logit",
           "clamp_min", "clamp_max", "fmax", "fmin", "copysign", "lerp_t", "logaddexp2", "entr", "xlog1py",
           "prelu", "rrelu", "nan_to_num", "median", "nansum", "prod", "std", "aminmax", "norm", "dist",
           "mse", "huber", "smooth_l1", "soft_margin", "bce", "bce_logits", "repeat", "cummin", "rot90",
           "windows", "hardshrink", "threshold", "heaviside", "count_nonzero", "sign"]
    if exact:
        ops += ["floor", "ceil", "round", "trunc", "frac", "fmod", "remainder", "floor_divide", "argmax"]
    if len(s) == 2:
        ops += ["trace", "diag", "addmv", "addr", "block_diag", "cdist", "eye", "diagonal_scatter",
                "select_scatter", "slice_scatter", "triangle_indices"]
    ops += ["max_other", "pow_scalar", "pow_tt", "rsub_t", "isnan", "isinf", "take", "index_fill", "index_reduce",
            "scatter_value", "masked_fill_t", "std_mean", "nanmedian", "renorm", "split_sizes", "bitwise",
            "embedding_bag"]
    if exact:
        ops += ["remainder_t", "round_dec", "searchsorted"]
    if len(s) == 2:
        ops += ["multi_margin", "pdist", "bilinear"]
    if len(s) == 4:
        ops += ["grid_sample", "nll2d"]
    if len(s) == 3:
        ops += ["baddbmm", "addbmm"]
    if len(s) >= 1 and b.dim_val(s[-1]) == 3:
        ops += ["cross"]
    if len(s) == 1:
        ops += ["diag"]
    op = b.rng.choice(ops)
    d = b.rng.randrange(len(s))
    if op in ("tan", "sinh", "exp2"):
        b.add("torch.%s(%s.tanh() * %s)" % (op, a, "1.2" if op == "tan" else "3.0"), [s])
    elif op == "acosh":
        b.add("torch.acosh(%s.abs() + 1.25)" % a, [s])
    elif op == "atanh":
        b.add("torch.atanh(%s.tanh() * 0.9)" % a, [s])
    elif op == "log10":
        b.add("torch.log10(%s)" % b.ensure_pos(a), [s])
    elif op in ("deg2rad", "rad2deg"):
        b.add("torch.%s(%s)" % (op, a), [s])
    elif op == "mish":
        b.add("F.mish(%s)" % a, [s])
    elif op == "logit":
        b.add("torch.logit(torch.sigmoid(%s) * 0.9 + 0.05)" % a, [s])
    elif op in ("clamp_min", "clamp_max"):
        b.add("%s.%s(%r)" % (a, op, b.rng.choice([-0.5, 0.0, 0.25])), [s], dict(exact=exact))
    elif op == "nan_to_num":
        b.add("torch.nan_to_num(%s, nan=0.0, posinf=1.0, neginf=-1.0)" % a, [s], keep)
    elif op in ("fmax", "fmin", "copysign", "lerp_t", "logaddexp2", "xlog1py", "heaviside"):
        o = b.partner(a)
        if broadcast(s, b.v(o).shape) != s:
            raise Reject("partner widens the shape")
        if op in ("fmax", "fmin"):
            b.add("torch.%s(%s, %s)" % (op, a, o), [s])
        elif op == "copysign":  # the sign of o decides: keep it away from 0
            if not b.robust_vs(o, 0.0):
                raise Reject("copysign of a sign near zero")
            b.add("torch.copysign(%s, %s)" % (a, o), [s])
        elif op == "lerp_t":
            b.add("torch.lerp(%s, %s, torch.sigmoid(%s))" % (a, o, o), [s])
        elif op == "logaddexp2":
            b.add("torch.logaddexp2(%s, %s)" % (a, o), [s])
        elif op == "xlog1py":
            b.add("torch.special.xlog1py(%s, %s.abs())" % (a, o), [s])
        else:
            if not b.robust_vs(a, 0.0):
                raise Reject("heaviside near zero")
            b.add("torch.heaviside(%s, %s)" % (a, o), [s])
    elif op == "entr":
        b.add("torch.special.entr(%s)" % b.ensure_pos(a), [s])
    elif op == "prelu":
        if len(s) < 2:
            raise Reject("prelu needs channels")
        w = b.new_param((s[1],), dtype=var.dtype, kind=b.rng.choice(["full", "normal"]), arg=0.25)
        b.add("F.prelu(%s, %s)" % (a, w), [s])
    elif op == "rrelu":
        b.add("F.rrelu(%s, 0.1, 0.3, training=False)" % a, [s])
    elif op == "median":
        if b.rng.random() < 0.5:
            b.add("%s.median()" % a, [()], keep)
        else:
            kd = b.rng.random() < 0.5
            b.add("%s.median(%d, keepdim=%r)[0]" % (a, d, kd), [reduced_shape(s, [d], kd)], keep)
    elif op == "nansum":
        b.check_sum(a, [d])
        b.add("torch.nansum(%s, %d)" % (a, d), [reduced_shape(s, [d], False)])
    elif op == "prod":
        if b.dim_val(s[d]) > 64:
            raise Reject("a long product")
        b.add("torch.prod(%s.tanh() + 1.0, %d)" % (a, d), [reduced_shape(s, [d], False)])
    elif op == "std":
        if b.dim_val(s[d]) < 2:
            raise Reject("std of one element")
        b.check_sum(a, [d])
        fn = b.rng.choice(["std", "var"])
        kd = b.rng.random() < 0.5
        b.add("torch.%s(%s, %d, correction=%d, keepdim=%r)" % (fn, a, d, b.rng.choice([0, 1]), kd),
              [reduced_shape(s, [d], kd)])
    elif op == "aminmax":
        t = b.add("torch.aminmax(%s, dim=%d)" % (a, d), None, tuple_n=2)
        b.add("%s[%d]" % (t, b.rng.choice([0, 1])), [reduced_shape(s, [d], False)], keep)
    elif op == "norm":
        pn = b.rng.choice([1, 2, "float('inf')", 3])
        b.check_sum(a, [d])
        b.add("torch.linalg.vector_norm(%s, %s, dim=%d)" % (a, pn, d) if b.rng.random() < 0.5 else
              "torch.norm(%s, p=%s, dim=%d)" % (a, pn, d), [reduced_shape(s, [d], False)])
    elif op == "dist":
        o = b.partner(a, allow_bigger=False)
        b.add("torch.dist(%s, %s, %r)" % (a, o, b.rng.choice([1.0, 2.0])), [()])
    elif op in ("mse", "huber", "smooth_l1", "soft_margin", "bce", "bce_logits"):
        o = b.partner(a, allow_bigger=False)
        if b.v(o).shape != s:
            o = b.add("%s.expand(%s)" % (o, shape_src(s)), [s])
        red = b.rng.choice(["mean", "sum", "none"])
        out = [s] if red == "none" else [()]
        if op == "mse":
            b.add("F.mse_loss(%s, %s, reduction=%r)" % (a, o, red), out)
        elif op == "huber":
            b.add("F.huber_loss(%s, %s, reduction=%r, delta=%r)" % (a, o, red, b.rng.choice([1.0, 0.5])), out)
        elif op == "smooth_l1":
            b.add("F.smooth_l1_loss(%s, %s, reduction=%r, beta=%r)" % (a, o, red, b.rng.choice([1.0, 0.5])), out)
        elif op == "soft_margin":
            b.add("F.soft_margin_loss(%s, torch.sign(%s) + (%s == 0).to(%s.dtype), reduction=%r)"
                  % (a, "torch.tanh(%s)" % o, o, a, red), out)
        elif op == "bce":
            b.add("F.binary_cross_entropy(torch.sigmoid(%s) * 0.98 + 0.01, torch.sigmoid(%s), reduction=%r)"
                  % (a, o, red), out)
        else:
            b.add("F.binary_cross_entropy_with_logits(%s, torch.sigmoid(%s), reduction=%r)" % (a, o, red), out)
    elif op == "repeat":
        reps = [b.rng.choice([1, 1, 2, 3]) for _ in s]
        shape = tuple(x if r == 1 else mul_dim(x, const_dim(b, r)) for x, r in zip(s, reps))
        if b.numel(shape) > ELEMENT_LIMIT:
            raise Reject("repeat too large")
        b.add("%s.repeat(%s)" % (a, ", ".join(map(str, reps))), [shape], keep)
    elif op == "cummin":
        b.add("torch.cummin(%s, %d)[0]" % (a, d), [s], keep)
    elif op == "rot90":
        if len(s) < 2:
            raise Reject("rot90 needs two dims")
        k = b.rng.choice([1, 2, 3, -1])
        shape = s if k % 2 == 0 else s[:-2] + (s[-1], s[-2])
        b.add("torch.rot90(%s, %d, (%d, %d))" % (a, k, len(s) - 2, len(s) - 1), [shape], keep)
    elif op == "windows":
        n = s[-1]
        w = b.rng.choice(["torch.hann_window(#{%s})", "torch.hamming_window(#{%s}, periodic=False)",
                          "torch.blackman_window(#{%s})", "torch.bartlett_window(#{%s})",
                          "torch.linspace(-1.0, 2.0, #{%s})", "torch.logspace(-1.0, 1.0, #{%s})",
                          "torch.arange(#{%s}) * 0.5"]) % dim_expr(n)
        b.add("%s * (%s).to(%s.dtype)" % (a, w, a), [s])
    elif op == "hardshrink":
        lam = b.rng.choice([0.5, 0.25])
        if not (b.robust_vs(a, lam) and b.robust_vs(a, -lam)):
            raise Reject("hardshrink near its threshold")
        b.add("F.hardshrink(%s, %r)" % (a, lam), [s], keep)
    elif op == "threshold":
        th = b.rng.choice([0.0, 0.5, -0.5])
        if not b.robust_vs(a, th):
            raise Reject("threshold near its threshold")
        b.add("F.threshold(%s, %r, %r)" % (a, th, b.rng.choice([0.0, -1.0, 2.0])), [s])
    elif op == "count_nonzero":
        if not b.robust_vs(a, 0.0):
            raise Reject("count_nonzero near zero")
        x = b.add("torch.relu(%s)" % a, [s], keep)
        b.add("torch.count_nonzero(%s, dim=%d).to(%s.dtype)" % (x, d, a), [reduced_shape(s, [d], False)],
              dict(exact=True, intval=True))
    elif op == "sign":
        if not (exact or b.robust_vs(a, 0.0)):
            raise Reject("sign near zero")
        b.add("torch.%s(%s)" % (b.rng.choice(["sign", "sgn"]), a), [s], dict(exact=True, intval=True))
    elif op in ("floor", "ceil", "round", "trunc", "frac"):
        b.add("torch.%s(%s)" % (op, a), [s], dict(exact=True, intval=op != "frac"))
    elif op in ("fmod", "remainder", "floor_divide"):
        c = b.rng.choice([2.0, 0.5, -3.0])
        if op == "floor_divide":
            b.add("torch.div(%s, %r, rounding_mode=%r)" % (a, c, b.rng.choice(["floor", "trunc"])), [s],
                  dict(exact=True))
        else:
            b.add("torch.%s(%s, %r)" % (op, a, c), [s], dict(exact=True))
    elif op == "argmax":
        kd = b.rng.random() < 0.5
        b.add("%s.%s(%d, keepdim=%r).to(%s.dtype)" % (a, b.rng.choice(["argmax", "argmin"]), d, kd, a),
              [reduced_shape(s, [d], kd)], dict(exact=True, intval=True))
    elif op == "trace":
        b.add("torch.trace(%s)" % a, [()])
    elif op == "diag":
        if len(s) == 1:
            b.add("torch.diag(%s, %d)" % (a, 0), [(s[0], s[0])], keep)
        else:
            m = b.derived("min(%s, %s)" % (dim_expr(s[0]), dim_expr(s[1])))
            b.add("torch.diag(%s)" % a, [((m,),)], keep)
    elif op == "addmv":
        v = b.new_input((s[1],), dtype=var.dtype, kind="unit")
        bias = b.new_param((s[0],), dtype=var.dtype, kind=b.rng.choice(["zeros", "normal"]))
        b.add("torch.addmv(%s, %s, %s, beta=%r, alpha=%r)" % (bias, a, v, b.rng.choice([1.0, 0.5]), 1.0), [(s[0],)])
    elif op == "addr":
        u = b.new_input((s[0],), dtype=var.dtype, kind="unit")
        v = b.new_input((s[1],), dtype=var.dtype, kind="unit")
        b.add("torch.addr(%s, %s, %s, alpha=%r)" % (a, u, v, b.rng.choice([1.0, -0.5])), [s])
    elif op in ("baddbmm", "addbmm"):
        k = b.new_dim(SMALL_POOL)
        x = b.new_input((s[0], s[1], k), dtype=var.dtype, kind="unit")
        y = b.new_input((s[0], k, s[2]), dtype=var.dtype, kind="unit")
        if op == "baddbmm":
            b.add("torch.baddbmm(%s, %s, %s, beta=0.5)" % (a, x, y), [s])
        else:
            b.add("torch.addbmm(%s[0], %s, %s)" % (a, x, y), [s[1:]])
    elif op == "block_diag":
        o = b.pick_float(lambda v: len(v.shape) == 2 and v.dtype == var.dtype)
        if o is None:
            raise Reject("no second matrix")
        so = b.v(o).shape
        shape = tuple((b.derived("%s + %s" % (dim_expr(x), dim_expr(y))),) for x, y in zip(s, so))
        if b.numel(shape) > ELEMENT_LIMIT:
            raise Reject("block_diag too large")
        b.add("torch.block_diag(%s, %s)" % (a, o), [shape])
    elif op == "cdist":
        if b.dim_val(s[1]) > 64 or b.dim_val(s[0]) > 200:
            raise Reject("cdist too large")
        o = b.new_input((b.new_dim(SMALL_POOL), s[1]), dtype=var.dtype, kind="unit")
        b.add("torch.cdist(%s, %s, p=%r)" % (a, o, b.rng.choice([1.0, 2.0])), [(s[0], b.v(o).shape[0])])
    elif op == "eye":
        b.add("%s + torch.eye(#{%s}, #{%s}).to(%s.dtype)" % (a, dim_expr(s[0]), dim_expr(s[1]), a), [s])
    elif op == "triangle_indices":
        # The lower or upper triangle of the leading square, diagonal kept or
        # not, gathered by tril_indices/triu_indices (m (m +- 1) / 2 of them).
        m = "min(%s, %s)" % (dim_expr(s[0]), dim_expr(s[1]))
        fn, diag = b.rng.choice(["tril_indices", "triu_indices"]), b.rng.choice([0, 1])
        off = 0 if diag else (-1 if fn == "tril_indices" else 1)
        n = b.derived("%s * (%s %s) // 2" % (m, m, "+ 1" if diag else "- 1"))
        idx = "torch.%s(#{%s}, #{%s}, %d%s)" % (fn, m, m, off, b.rng.choice(["", ", dtype=torch.int32"]))
        b.add("%s[%s[0].long(), %s[1].long()]" % (a, idx, idx), [((n,),)], keep)
    elif op == "diagonal_scatter":
        m = b.derived("min(%s, %s)" % (dim_expr(s[0]), dim_expr(s[1])))
        src = b.new_input(((m,),), dtype=var.dtype, kind="unit")
        b.add("torch.diagonal_scatter(%s, %s)" % (a, src), [s])
    elif op == "select_scatter":
        src = b.new_input((s[1],), dtype=var.dtype, kind="unit")
        b.add("torch.select_scatter(%s, %s, 0, %d)" % (a, src, b.rng.choice([0, -1])), [s])
    elif op == "slice_scatter":
        n = b.dim_val(s[1])
        if n < 2:
            raise Reject("slice_scatter of one column")
        k = b.derived("(%s) // 2" % dim_expr(s[1]))
        src = b.new_input((s[0], (k,)), dtype=var.dtype, kind="unit")
        b.add("torch.slice_scatter(%s, %s, 1, 0, #{%s})" % (a, src, k), [s])
    elif op == "cross":
        o = b.partner(a, allow_bigger=False)
        if b.v(o).shape != s:
            raise Reject("cross needs equal shapes")
        b.add("torch.linalg.cross(%s, %s)" % (a, o), [s])
    else:
        catalog_more(b, op, a, s, d, keep)


def catalog_more(b, op, a, s, d, keep):
    """The rest of g_catalog: binary forms with tensors, tests for NaN and inf, index writes,
    sorted-boundary searches, bitwise integer ops, bags, pair distances, sampling grids."""
    var = b.v(a)
    dt = var.dtype
    E = dim_expr(s[d])
    if op == "max_other":
        o = b.partner(a)
        shape = broadcast(s, b.v(o).shape)
        if shape is None or b.numel(shape) > ELEMENT_LIMIT:
            raise Reject("max shape")
        b.add("torch.%s(%s, %s)" % (b.rng.choice(["max", "min"]), a, o), [shape])
    elif op == "pow_scalar":
        b.add("%r ** torch.tanh(%s)" % (b.rng.choice([2.0, 0.5, 3]), a), [s])
    elif op == "pow_tt":
        o = b.partner(a, allow_bigger=False)
        b.add("torch.pow(%s.abs() + 0.5, torch.tanh(%s) * 2)" % (a, o), [s])
    elif op == "rsub_t":
        o = b.partner(a, allow_bigger=False)
        b.add("torch.rsub(%s, %s, alpha=%r)" % (a, o, b.rng.choice([1, 2.0])), [s])
    elif op in ("isnan", "isinf"):
        if not b.robust_vs(a, 0.0):
            raise Reject("NaN test near zero")
        if op == "isnan":
            fn = b.rng.choice(["torch.isnan(torch.log(%s))", "torch.isfinite(torch.log(%s))"])
        else:
            fn = b.rng.choice(["torch.isinf(torch.log(torch.relu(%s)))", "torch.isneginf(torch.log(torch.relu(%s)))",
                               "torch.isposinf(-torch.log(torch.relu(%s)))"])
        b.add("(%s).to(%s.dtype)" % (fn % a, a), [s], dict(exact=True, intval=True))
    elif op == "take":
        k = b.new_dim(SMALL_POOL)
        idx = b.new_input((k,), dtype=torch.int64, kind="index", arg="#{%s}" % "*".join(dim_expr(x) for x in s))
        b.v(idx).attrs.update(exact=True, intval=False)
        b.add("torch.take(%s, %s)" % (a, idx), [(k,)], keep)
    elif op in ("index_fill", "index_reduce", "scatter_value"):
        k = b.derived("max(1, (%s) // %d)" % (E, b.rng.choice([1, 2, 3])))
        if op == "scatter_value":
            ishape = tuple((k,) if i == d else x for i, x in enumerate(s))
            if b.numel(ishape) * b.dim_val(s[d]) > (1 << 21):
                raise Reject("too many index comparisons")
            idx = b.new_input(ishape, dtype=torch.int64, kind="index", arg="#{%s}" % E)
            b.v(idx).attrs.update(exact=True, intval=False)
            b.add("%s.scatter(%d, %s, %r)" % (a, d, idx, b.rng.choice([2.5, 0.0, -1.0])), [s], keep)
            return
        idx = b.new_input(((k,),), dtype=torch.int64, kind="index", arg="#{%s}" % E)
        b.v(idx).attrs.update(exact=True, intval=False)
        if op == "index_fill":
            b.add("%s.index_fill(%d, %s, %r)" % (a, d, idx, b.rng.choice([1.5, 0.0, -3.0])), [s], keep)
        else:
            red = b.rng.choice(["amax", "amin", "mean", "prod"])
            src = "%s.narrow(%d, 0, #{%s})" % (a, d, k)
            if red == "prod":
                src = "(torch.tanh(%s) + 1.0)" % src
            b.add("%s.index_reduce(%d, %s, %s, %r, include_self=%r)" % (a, d, idx, src, red, b.rng.random() < 0.5),
                  [s], keep if red in ("amax", "amin") else {})
    elif op == "masked_fill_t":
        m = make_mask(b, s)
        b.add("%s.masked_fill(%s, torch.tensor(%r, dtype=%s.dtype))" % (a, m, b.rng.choice([1.5, -2.0]), a), [s])
    elif op == "std_mean":
        if b.dim_val(s[d]) < 2:
            raise Reject("std of one element")
        b.check_sum(a, [d])
        t = b.add("torch.std_mean(%s, %d, correction=%d)" % (a, d, b.rng.choice([0, 1])), None, tuple_n=2)
        b.add("%s[%d]" % (t, b.rng.choice([0, 1])), [reduced_shape(s, [d], False)])
    elif op == "nanmedian":
        b.add("%s.nanmedian(%d)[0]" % (a, d), [reduced_shape(s, [d], False)], keep)
    elif op == "renorm":
        if len(s) < 2:
            raise Reject("renorm of a vector")
        b.add("torch.renorm(%s, %r, %d, %r)" % (a, b.rng.choice([1.0, 2.0]), d, b.rng.choice([1.0, 5.0])), [s])
    elif op == "split_sizes":
        n = b.dim_val(s[d])
        if n < 2:
            raise Reject("split of one element")
        k = b.derived("max(1, (%s) // 3)" % E)
        rest = b.derived("(%s) - %s" % (E, k))
        i = b.rng.choice([0, 1])
        shape = tuple(((k,) if i == 0 else (rest,)) if j == d else x for j, x in enumerate(s))
        b.add("torch.split(%s, [#{%s}, #{%s}], %d)[%d]" % (a, k, rest, d, i), [shape], keep)
    elif op == "searchsorted":
        nb = b.rng.choice([1, 3, 8, 33])
        bounds = b.new_param(((b.sym(nb),),), dtype=dt, kind="arange", arg=b.rng.choice([1.0, 0.0625]))
        b.v(bounds).attrs.update(exact=True)
        right = b.rng.random() < 0.5
        if b.rng.random() < 0.5:
            e = "torch.bucketize(%s, %s - 2.0, right=%r)" % (a, bounds, right)
        else:
            e = "torch.searchsorted(%s - 2.0, %s.contiguous(), right=%r)" % (bounds, a, right)
        b.add("(%s).to(%s.dtype)" % (e, a), [s], dict(exact=True, intval=True))
    elif op == "remainder_t":
        c = b.new_param(s[-1:], dtype=dt, kind="full", arg=b.rng.choice([2.0, -3.0, 0.5]))
        b.add("torch.%s(%s, %s)" % (b.rng.choice(["remainder", "fmod"]), a, c), [s], dict(exact=True))
    elif op == "round_dec":
        b.add("torch.round(%s, decimals=%d)" % (a, b.rng.choice([1, 2, -1])), [s], dict(exact=True))
    elif op == "bitwise":
        x = b.new_input(s, dtype=torch.int64, kind="int")
        y = b.new_input(s, dtype=torch.int64, kind="int")
        e = b.rng.choice(["(%s & %s)", "(%s | %s)", "(%s ^ %s)", "(~%s + %s)", "(%s << (%s.abs() %% 3))",
                          "(%s >> (%s.abs() %% 3))", "(%s << 2) + %s", "(%s >> 1) + %s", "(%s | 5) ^ %s"]) % (x, y)
        b.add("%s + (%s).to(%s.dtype) * 0.25" % (a, e, a), [s])
    elif op == "embedding_bag":
        V, D = b.new_dim(SMALL_POOL + [(50, 1)]), b.new_dim(SMALL_POOL + [(64, 1)])
        if not V:
            raise Reject("a table of one row")
        B, L = b.new_dim(SMALL_POOL), b.new_dim(SMALL_POOL)
        idx = b.new_input((B, L), dtype=torch.int64, kind="index", arg="#{%s}" % dim_expr(V))
        b.v(idx).attrs.update(exact=True, intval=False)
        w = b.new_param((V, D), dtype=dt, kind=b.rng.choice(["normal", "unit"]))
        mode = b.rng.choice(["sum", "mean", "max"])
        b.add("F.embedding_bag(%s, %s, mode=%r)" % (idx, w, mode), [(B, D)], dict(exact=mode == "max"))
    elif op == "multi_margin":
        idx = b.new_input((s[0],), dtype=torch.int64, kind="index", arg="#{%s}" % dim_expr(s[1]))
        b.v(idx).attrs.update(exact=True, intval=False)
        b.add("F.multi_margin_loss(%s, %s, p=%d, margin=%r)" % (a, idx, b.rng.choice([1, 2]), 1.0), [()])
    elif op == "pdist":
        if b.dim_val(s[0]) > 64 or b.dim_val(s[0]) < 2 or b.dim_val(s[1]) > 64:
            raise Reject("pdist size")
        n = b.derived("(%s) * ((%s) - 1) // 2" % (dim_expr(s[0]), dim_expr(s[0])))
        b.add("F.pdist(%s, p=%r)" % (a, b.rng.choice([1.0, 2.0])), [((n,),)])
    elif op == "bilinear":
        if b.dim_val(s[1]) > 64:
            raise Reject("bilinear too large")
        o = b.new_dim(SMALL_POOL)
        x2 = b.new_input((s[0], b.new_dim(SMALL_POOL)), dtype=dt, kind="unit")
        w = b.new_param((o, s[1], b.v(x2).shape[1]), dtype=dt, kind="normal", arg=0.3)
        bias = b.new_param((o,), dtype=dt, kind=b.rng.choice(["zeros", "normal"]))
        b.add("F.bilinear(%s, %s, %s, %s)" % (a, x2, w, bias), [(s[0], o)])
    elif op == "grid_sample":
        ho, wo = b.new_dim(SMALL_POOL), b.new_dim(SMALL_POOL)
        g = b.new_input((s[0], ho, wo, const_dim(b, 2)), dtype=dt, kind="unit")
        b.add("F.grid_sample(%s, torch.tanh(%s) * 1.1, mode='bilinear', padding_mode=%r, align_corners=%r)"
              % (a, g, b.rng.choice(["zeros", "border"]), b.rng.random() < 0.5), [(s[0], s[1], ho, wo)])
    elif op == "nll2d":
        idx = b.new_input((s[0], s[2], s[3]), dtype=torch.int64, kind="index", arg="#{%s}" % dim_expr(s[1]))
        b.v(idx).attrs.update(exact=True, intval=False)
        b.add("F.nll_loss(torch.log_softmax(%s, 1), %s)" % (a, idx), [()])
    else:
        raise GenBug("catalog op %s" % op)

GENERATORS = [
    (10, g_unary, ()), (12, g_binary, ()), (7, g_scalar, ()), (8, g_compare, ()),
    (9, g_reduce, ()), (5, g_softmax, ()), (4, g_layer_norm, ("aten::native_layer_norm",)),
    (3, g_rms_norm, ("aten::rms_norm",)), (9, g_matmul, ("aten::mm",)), (4, g_bmm, ("aten::bmm",)),
    (3, g_embedding, ("aten::embedding",)), (4, g_cat, ("aten::cat",)), (3, g_split, ("aten::split.Tensor",)),
    (3, g_select, ("aten::select.int",)), (4, g_slice, ("aten::slice.Tensor",)), (11, g_view, ()),
    (3, g_cast, ("aten::_to_copy",)), (3, g_const_op, ()), (2.5, g_tril_data, ("aten::tril",)),
    (2.5, g_logsumexp, ("aten::amax", "aten::abs", "aten::log")), (4, g_reduce_bcast, ()),
    (2, g_attention, ("aten::bmm",)),
    (2, g_rotary, ("aten::cat", "aten::neg")),
    (2, g_interleave, ("aten::cat", "aten::expand")),
    (1.5, g_int_input, ()),
    (1, g_narrow_int, ()),
    (3, g_composed, ()),
    (2, g_ordered, ()),
    (2, g_math, ()),
    (2, g_indexing, ()),
    (1.5, g_layout, ()),
    (2, g_prologue, ("aten::mm", "aten::native_layer_norm")),
    (0.5, g_empty, ("aten::cat",)),
    (2, g_spatial, ()),
    (3, g_catalog, ()),
    (1.5, g_middle_frame, ()),
]


def generate(seed, dtype, supported, stats=None, focus=()):
    """The program of one case (deterministic in seed and focus)."""
    for attempt in range(20):
        b = Builder(seed * 31 + attempt, dtype, supported)
        b.prog.seed = seed
        try:
            prog = _generate(b, stats, focus)
        except Reject:
            continue
        if prog is not None:
            return prog
    raise RuntimeError("generator could not make a case for seed %d" % seed)


def _generate(b, stats, focus=()):
    rng = b.rng
    gens = [(w * (25 if g.__name__[2:] in focus else 1), g) for w, g, needs in GENERATORS
            if all(n in b.supported for n in needs)]
    kind = rng.random()
    if kind < 0.025:      # many long rows: whole in SBUF or not (FormKernels' wholeRowBytes)
        rows = b.sym(rng.choice([65, 70, 129]))
        long = b.sym(rng.choice([6144, 8192, 9420, 11776, 12288]))
        b.new_input(((rows,), (long,)), kind=rng.choice(["normal", "unit"]))
    elif kind < 0.08:     # long rows: beyond the SBUF row budget, or spread over partitions
        long = b.sym(rng.choice([30000, 20000, 9000, 4096, 2560, 12007]))
        lead = [b.new_dim([(1, 2), (2, 1), (3, 1), (5, 1)]) for _ in range(rng.choice([0, 1, 1, 2]))]
        shape = tuple(d for d in lead if d) + ((long,),)
        if b.numel(shape) > ELEMENT_LIMIT:
            shape = ((long,),)
        b.new_input(shape, kind=rng.choice(["normal", "unit"]))
    elif kind < 0.3:      # a matmul operand
        m = b.sym(rng.choice(MATMUL_DIMS))
        kv = [k for k in MATMUL_DIMS if k * b.dim_val((m,)) <= ELEMENT_LIMIT]
        k = b.sym(rng.choice(kv))
        b.new_input(((m,), (k,)), kind=rng.choice(["normal", "unit"]))
    else:
        rank = rng.choices([0, 1, 2, 3, 4, 5], [1, 4, 8, 6, 4, 2])[0]
        b.new_input(b.random_shape(rank))
    if rng.random() < 0.4:
        a = b.tensors()[0]
        b.new_input(b.derive_broadcast(b.v(a).shape) if rng.random() < 0.5 else b.v(a).shape)
    nops = rng.choices(range(1, 13), [3, 5, 7, 8, 8, 7, 6, 5, 4, 3, 2, 2])[0]
    done = 0
    tries = 0
    while done < nops and tries < nops * 15:
        tries += 1
        g = rng.choices([g for _, g in gens], [w for w, _ in gens])[0]
        cp = b.checkpoint()
        try:
            g(b)
            done += 1
            if stats is not None:
                stats["gen:" + g.__name__] += 1
        except Reject as e:
            b.rollback(cp)
            if stats is not None:
                stats["reject:" + str(e).split("(")[0][:40]] += 1
        except GenBug as e:
            b.rollback(cp)
            b.genbugs.append("%s: %s" % (g.__name__, e))
            if stats is not None:
                stats["GENBUG %s: %s" % (g.__name__, str(e)[:100])] += 1
    choose_outputs(b)
    prog = b.prog
    prog.dce()
    if not prog.outputs:
        raise Reject("no outputs")
    return prog


def choose_outputs(b):
    """The graph's outputs: the last value, some intermediates, and now and then a view chain of a
    computed value, a graph input as is, a constant (made in forward or a parameter), the same
    value twice. Float values only (bool/integer outputs are documented as unsupported)."""
    rng = b.rng
    prog = b.prog
    produced = [s["outs"][0] for s in prog.stmts if prog.vars[s["outs"][0]].kind == "tensor"]
    floats = [n for n in produced if prog.vars[n].dtype.is_floating_point]
    live = [n for n in floats if prog.vars[n].attrs.get("live")]
    if live and rng.random() < 0.95:
        floats = live
    outs = []
    if floats:
        outs.append(floats[-1])
    extra = [n for n in floats[:-1]]
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        if extra:
            outs.append(rng.choice(extra))
    computed = [n for n in floats if not prog.vars[n].attrs.get("input")]
    if computed and rng.random() < 0.3:
        # A view chain of a computed value as an output (permute/transpose/reshape...); sometimes
        # its base is returned too.
        a = rng.choice(computed)
        cp = b.checkpoint()
        try:
            v = a
            for _ in range(rng.choice([1, 1, 2, 3])):
                v = g_view(b, v, CHAIN_VIEWS)
            outs.append(v)
            if rng.random() < 0.3 and a not in outs:
                outs.append(a)
        except (Reject, GenBug):
            b.rollback(cp)
    if rng.random() < 0.08:
        ins = [i["name"] for i in prog.inputs if i["dtype"].is_floating_point]
        if ins:
            outs.append(rng.choice(ins))   # an input returned as is
    if rng.random() < 0.06:                # a constant: made in forward, or a parameter as is
        cp = b.checkpoint()
        try:
            base = prog.vars[rng.choice(floats)].shape if floats else ((),)
            shape = b.derive_broadcast(base)
            if rng.random() < 0.5:
                outs.append(b.const_value(shape))
            else:
                outs.append(b.new_param(shape, kind=rng.choice(["normal", "ones", "arange", "full"])))
        except (Reject, GenBug):
            b.rollback(cp)
    if not outs:
        ins = [i["name"] for i in prog.inputs if i["dtype"].is_floating_point]
        if ins:   # nothing computed: at least one op
            a = ins[0]
            outs.append(b.add("%s * 2.0" % a, [prog.vars[a].shape]))
    seen = []
    for o in outs:
        if o not in seen:
            seen.append(o)
    if seen and rng.random() < 0.08:       # the same value twice
        seen.insert(rng.randrange(len(seen) + 1), rng.choice(seen))
    prog.outputs = seen


# ---------------------------------------------------------------------------
# Running a case

class ToolRun:
    def __init__(self, cmd, rc, out, err, seconds, timed_out):
        self.cmd, self.rc, self.out, self.err, self.seconds, self.timed_out = cmd, rc, out, err, seconds, timed_out

    @property
    def text(self):
        return (self.out or "") + (self.err or "")


def run_tool(cmd, timeout):
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout,
                              errors="replace")
        return ToolRun(cmd, proc.returncode, proc.stdout, proc.stderr, time.time() - t0, False)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return ToolRun(cmd, None, out, err, time.time() - t0, True)
    except OSError as e:
        return ToolRun(cmd, 127, "", "could not start %s: %s" % (cmd[0], e), time.time() - t0, False)


CRASH_RE = re.compile(r"internal compiler error|invalid NEFF|Assertion [`'].*failed|LLVM ERROR|Stack dump|"
                      r"Traceback \(most recent call last\)|Segmentation fault|terminate called|UNREACHABLE|"
                      r"AddressSanitizer|Aborted|core dumped", re.I)
# Lines that say what went wrong (the stack dump's preamble does not).
CRASH_LINE_RE = re.compile(r"[Ii]nternal compiler error|invalid NEFF|Assertion [`'].*failed|LLVM ERROR|"
                           r"terminate called|UNREACHABLE|AddressSanitizer|^[A-Z]\w*(Error|Exception)\b")
FRAME_RE = re.compile(r"^\s*#\d+\s+0x[0-9a-fA-F]+\s+(?:in\s+)?(\S.*)$")
SIGNALS = {4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 11: "SIGSEGV"}


def strip_paths(text):
    return re.sub(r"(?:/[^\s:'\"/]+)+/", "", text)


def crash_function(text):
    """The first stack frame in our own code: not in a system library, not the signal handler, not main."""
    for line in text.splitlines():
        m = FRAME_RE.match(line)
        if not m:
            continue
        body = m.group(1)
        if re.search(r"\(/(usr/)?lib/|libc\.so|ld-linux|linux-vdso|\bcsu/|__libc_start|_start\b", body):
            continue
        name = body.replace("(anonymous namespace)", "")
        name = re.sub(r"\(.*", "", name).replace("::::", "::").strip()
        if not name or name.startswith("0x") or name in ("main",) or "llvm::sys::" in name:
            continue
        return name[:160]
    return None


def first_error_line(text):
    text = strip_paths(text)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if CRASH_LINE_RE.search(ln):
            return ln[:240]
    # A located diagnostic ("graph.pb: node 'x': error: ...") before a summary ("error NCC-E003:
    # compilation of 'graph.pb' failed"), whichever stream it came on.
    ranked = []
    for n, ln in enumerate(lines):
        if not re.search(r"\berror\b", ln, re.I):
            continue
        rank = 0 if re.search(r": error: ", ln) else 2 if re.search(r"compilation of .* failed", ln) else 1
        ranked.append((rank, n, ln))
    if ranked:
        return min(ranked)[2][:240]
    for ln in lines:
        if not ln.startswith(("PLEASE submit", "Stack dump", "Compiler status", "0.", "#")):
            return ln[:240]
    return "(no output)"


def normalize(line):
    line = strip_paths(line)
    line = re.sub(r"\S+\.(?:pb|neff|npy)\b:?", "FILE", line)
    line = re.sub(r"(node|value|input|constant|output) '[^']*'", r"\1 '_'", line)
    line = re.sub(r"'k\d+_[\w.]*'", "'k_'", line)          # kernel names differ between -O0 and -O2
    line = re.sub(r"0x[0-9a-fA-F]+", "0xN", line)
    line = re.sub(r"(?<![A-Za-z_])\d+(\.\d+)?(e[-+]?\d+)?", "N", line)
    return line.strip()


def classify_tool(run, stage, allowed):
    """None when the tool succeeded, else (class, stage, first line, signature)."""
    if run.timed_out:
        return ("timeout", stage, "timed out after %.0f s" % run.seconds, "timeout %s" % stage)
    text = run.text
    crashed = (run.rc is not None and run.rc < 0) or CRASH_RE.search(text)
    if run.rc == 0 and not crashed:
        if stage == "compile" and "Compiler status PASS" not in run.out:
            line = first_error_line(text)
            return ("crash", stage, "exit 0 without 'Compiler status PASS': " + line,
                    "crash %s: no PASS: %s" % (stage, normalize(line)))
        return None
    if crashed:
        fn = crash_function(text)
        lines = [ln.strip() for ln in strip_paths(text).splitlines() if CRASH_LINE_RE.search(ln.strip())]
        if lines:
            line = lines[0][:240]
        elif run.rc is not None and run.rc < 0:
            line = "killed by signal %d (%s)" % (-run.rc, SIGNALS.get(-run.rc, "?"))
        else:
            line = first_error_line(text)
        where = (" in " + fn) if fn else ""
        return ("crash", stage, line + where, "crash %s: %s%s" % (stage, normalize(line), where))
    if re.search(r"\berror\b", text, re.I):
        line = first_error_line(text)
        cls = "allowed refusal" if allowed.matches(line) else "refusal"
        return (cls, stage, line, "%s %s: %s" % ("refusal", stage, normalize(line)))
    line = first_error_line(text)
    return ("crash", stage, "exit %s without an error message: %s" % (run.rc, line),
            "crash %s: exit %s without error" % (stage, run.rc))


class Allowed:
    """The documented limitations: every `match: `REGEX`` line of docs/unsupported.md (the
    regular expression between backquotes), searched in the refusal's first error line
    (directories stripped)."""

    def __init__(self, path):
        self.path = path
        self.patterns = []
        if path and os.path.exists(path):
            with open(path) as f:
                for line in f:
                    m = re.search(r"match: `([^`]+)`", line)
                    if m:
                        self.patterns.append(re.compile(m.group(1)))

    def matches(self, line):
        return any(p.search(line) for p in self.patterns)


def build_model(prog, env):
    src = prog.source(env)
    g = dict(P)
    exec(compile(src, "<graph_fuzz case %d>" % prog.seed, "exec"), g)
    model = g["Model"]().eval()
    inputs = tuple(prog.make_values(i, env) for i in prog.inputs)
    return g, model, inputs, src


def reference_outputs(g, model, inputs):
    """The float64 reference: the same module with F32/BF16/F16 bound to float64, on the rounded values."""
    saved = {k: g[k] for k in REF_DTYPES}
    g.update(REF_DTYPES)
    try:
        ref = g["Model"]().eval()
        ref.load_state_dict({k: v.double() if v.is_floating_point() else v for k, v in model.state_dict().items()})
        with torch.no_grad(), P["LowPrecisionEager"]():
            return ref(*[x.double() if x.is_floating_point() else x for x in inputs])
    finally:
        g.update(saved)


class Outcome:
    def __init__(self, cls, stage="", msg="", sig="", opt=None):
        self.cls, self.stage, self.msg, self.sig, self.opt = cls, stage, msg, sig, opt
        self.times = {}
        self.rel = None

    def as_dict(self):
        return dict(cls=self.cls, stage=self.stage, msg=self.msg, sig=self.sig, opt=self.opt, times=self.times,
                    rel=self.rel)


def output_prec(prog, name):
    var = prog.vars.get(name)
    p = var.attrs.get("prec", prog.dtype) if var else prog.dtype
    if var is not None and var.dtype is not None and var.dtype.is_floating_point:
        p = worse_prec(p, PREC_KEY[var.dtype])
    return p


def export_case(prog, env, workdir, supported):
    """Exports the program; returns (exp, eager outputs, reference outputs, seconds) or raises ExportSkip."""
    t0 = time.time()
    try:
        g, model, inputs, _ = build_model(prog, env)
        with torch.no_grad(), P["LowPrecisionEager"]():
            eager = model(*inputs)
        ref = reference_outputs(g, model, inputs)
        with torch.no_grad(), P["LowPrecisionEager"]():
            exp = ex.export_aten(model, inputs, None, params="constants")
    except Exception as e:  # noqa: BLE001
        raise ExportSkip("export: %s: %s" % (type(e).__name__, str(e).strip().splitlines()[0][:200] if str(e).strip() else ""))
    P["rename_custom_ops"](exp.graph)
    bad = sorted({n.target for n in exp.graph.nodes if n.target != "getitem" and n.target not in supported})
    if bad:
        raise ExportSkip("export: operator outside the list: %s" % " ".join(bad))
    ex.write_graph(exp.graph, os.path.join(workdir, "graph.pb"))
    names = list(exp.input_values)
    for n, v in exp.input_values.items():
        np.save(os.path.join(workdir, "%s.npy" % n), np.asarray(P["to_device_numpy"](v), order="C"))
    return exp, names, list(eager), list(ref), time.time() - t0


class ExportSkip(Exception):
    pass


def compile_cmd(workdir, opt):
    return [toolchain.tool("neuron-cc"), "compile", os.path.join(workdir, "graph.pb"), "--framework", "ATEN",
            "--target", "trn1", "-O%d" % opt, "--output", os.path.join(workdir, "graph.O%d.neff" % opt)]


def run_cmd(workdir, opt, names):
    cmd = [toolchain.tool("neuron-run"), os.path.join(workdir, "graph.O%d.neff" % opt),
           "--output-dir", os.path.join(workdir, "out.O%d" % opt), "-q"]
    for n in names:
        cmd += ["--input", "%s=@%s" % (n, os.path.join(workdir, "%s.npy" % n))]
    return cmd


def compile_and_check(prog, workdir, opt, names, eager, ref, cfg, allowed):
    o = Outcome("pass", opt=opt)
    c = run_tool(compile_cmd(workdir, opt), cfg.compile_timeout)
    o.times["compile"] = c.seconds
    bad = classify_tool(c, "compile", allowed)
    if bad:
        o.cls, o.stage, o.msg, o.sig = bad
        return o
    outdir = os.path.join(workdir, "out.O%d" % opt)
    shutil.rmtree(outdir, ignore_errors=True)
    os.makedirs(outdir)
    r = run_tool(run_cmd(workdir, opt, names), cfg.run_timeout)
    o.times["run"] = r.seconds
    bad = classify_tool(r, "run", allowed)
    if bad:
        o.cls, o.stage, o.msg, o.sig = bad
        return o
    outs = []
    i = 0
    while os.path.exists(os.path.join(outdir, "output_%d.npy" % i)):
        outs.append(np.load(os.path.join(outdir, "output_%d.npy" % i)))
        i += 1
    if len(outs) != len(eager):
        o.cls, o.stage, o.msg, o.sig = "wrong", "compare", "%d outputs, eager has %d" % (len(outs), len(eager)), \
            "wrong: output count"
        return o
    worst = 0.0
    for i, (y, e, f) in enumerate(zip(outs, eager, ref)):
        tol = P["TOL"][output_prec(prog, prog.outputs[i])]
        e_np = e.detach().double().numpy() if e.is_floating_point() else e.numpy()
        f_np = f.detach().double().numpy() if f.is_floating_point() else f.numpy()
        bad = P["check_output"](y, e_np, f_np, tol)
        if bad:
            kind, msg = bad
            o.cls, o.stage, o.msg, o.sig = "wrong", "compare", "output %d (%s, %s): %s" % (
                i, tuple(e.shape), str(e.dtype).replace("torch.", ""), msg), "wrong: %s" % kind
            return o
        k, v = P["rel_error"](y, e_np)
        if k is None:
            worst = max(worst, v)
    o.rel = worst
    return o


def run_program(prog, cfg, allowed, supported, opts, workdir, env=None):
    """Exports, compiles and runs prog at each opt level; returns (outcomes, export info)."""
    env = env or prog.env()
    info = {}
    try:
        exp, names, eager, ref, t_export = export_case(prog, env, workdir, supported)
    except ExportSkip as e:
        o = Outcome("export-skip", "export", str(e), "export-skip: " + normalize(str(e)))
        return [o], info
    info["export"] = t_export
    info["targets"] = sorted({n.target for n in exp.graph.nodes})
    info["input_names"] = names
    outcomes = [compile_and_check(prog, workdir, opt, names, eager, ref, cfg, allowed) for opt in opts]
    for o in outcomes:
        o.times["export"] = t_export
    return outcomes, info


def case_seed(seed, i):
    return seed * 1000003 + i


def case_dtype(seed, i, dtypes):
    return random.Random(case_seed(seed, i) ^ 0x5bd1e995).choice(dtypes)


_SUPPORTED = None


def supported_ops():
    global _SUPPORTED
    if _SUPPORTED is None:
        r = run_tool([toolchain.tool("neuron-cc"), "list-operators", "--framework", "ATEN"], 60)
        if r.rc != 0:
            raise SystemExit("graph_fuzz: neuron-cc list-operators failed: %s" % r.text.strip()[:300])
        _SUPPORTED = frozenset(line.strip() for line in r.out.splitlines() if line.strip())
    return _SUPPORTED


# A case's Python side (the generator, eager, the float64 reference, the
# export) and the tools it runs may use at most this much address space: a
# case that needed 24 GB got its pool worker killed by the kernel, and the
# pool then waited forever for that worker's result. Over the limit, the
# allocation fails and the case reports the error (export-skip, or a crash
# of the tool that ran out).
CASE_ADDRESS_SPACE = 8 << 30


def limit_case_memory():
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft > CASE_ADDRESS_SPACE:
        limit = CASE_ADDRESS_SPACE if hard == resource.RLIM_INFINITY else min(CASE_ADDRESS_SPACE, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def run_one_case(args):
    i, cfg = args
    torch.set_num_threads(1)
    limit_case_memory()
    allowed = Allowed(cfg.allowed)
    supported = supported_ops()
    seed = case_seed(cfg.seed, i)
    dtype = case_dtype(cfg.seed, i, cfg.dtypes)
    t0 = time.time()
    rec = dict(case=i, seed=seed, dtype=dtype)
    try:
        prog = generate(seed, dtype, supported, focus=cfg.focus)
    except Exception as e:  # noqa: BLE001
        rec.update(cls="export-skip", outcomes=[dict(cls="export-skip", stage="generate",
                                                      msg="generator: %s: %s" % (type(e).__name__, e),
                                                      sig="export-skip: generator failed", opt=None, times={})])
        return rec
    rec["gen_s"] = time.time() - t0
    rec["n_stmts"] = len(prog.stmts)
    workdir = tempfile.mkdtemp(prefix="case%d-" % i, dir=cfg.work)
    try:
        outcomes, info = run_program(prog, cfg, allowed, supported, cfg.opts, workdir)
    except MemoryError as e:
        rec.update(cls="export-skip", outcomes=[dict(cls="export-skip", stage="export",
                                                      msg="out of memory (%s): %s" % (type(e).__name__, e),
                                                      sig="export-skip: out of memory", opt=None, times={})])
        return rec
    finally:
        if not cfg.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    rec["targets"] = info.get("targets", [])
    rec["outcomes"] = [o.as_dict() for o in outcomes]
    rec["cls"] = max((o.cls for o in outcomes), key=lambda c: SEVERITY[c])
    if rec["cls"] in FAILING:
        rec["source"] = prog.source(prog.env())   # the minimizer checks its regeneration against it
    rec["wall_s"] = time.time() - t0
    if cfg.verbose and rec["cls"] != "pass":
        bad = [o for o in outcomes if o.cls != "pass"]
        print("  case %d (%s): %s -O%s %s: %s" % (i, dtype, bad[0].cls, bad[0].opt, bad[0].stage, bad[0].msg),
              flush=True)
    return rec


# ---------------------------------------------------------------------------
# Minimization

class Minimizer:
    def __init__(self, prog, opt, sig, cfg, allowed, supported, workdir, deadline):
        self.prog = prog
        self.opt = opt
        self.sig = sig
        self.cfg = cfg
        self.allowed = allowed
        self.supported = supported
        self.workdir = workdir
        self.deadline = deadline
        self.tries = 0
        self.max_tries = 1500
        self.last = None

    def still_fails(self, cand):
        if time.time() > self.deadline or self.tries >= self.max_tries:
            return False
        self.tries += 1
        try:
            cand.dce()
            if not cand.outputs:
                return False
            env = cand.env()
            if any(v <= 0 for v in env.values()):
                return False
            level = "full" if self.sig.startswith("wrong") else "run"
            evaluate_program(cand, env, level)
        except (Reject, GenBug, Exception):  # noqa: BLE001
            return False
        d = tempfile.mkdtemp(prefix="min-", dir=self.workdir)
        try:
            outcomes, _ = run_program(cand, self.cfg, self.allowed, self.supported, [self.opt], d)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        o = outcomes[0]
        if o.sig == self.sig:
            self.last = o
            return True
        return False

    def try_apply(self, mutate):
        cand = copy.deepcopy(self.prog)
        try:
            if mutate(cand) is False:
                return False
        except (Reject, GenBug, KeyError, IndexError, ValueError):
            return False
        if self.still_fails(cand):
            self.prog = cand
            return True
        return False

    def run(self):
        changed = True
        while changed and time.time() < self.deadline and self.tries < self.max_tries:
            changed = False
            # 1. drop outputs
            i = 0
            while i < len(self.prog.outputs) and len(self.prog.outputs) > 1:
                def drop(c, i=i):
                    del c.outputs[i]
                if self.try_apply(drop):
                    changed = True
                else:
                    i += 1
            # 2. bypass statements (latest first)
            for idx in range(len(self.prog.stmts) - 1, -1, -1):
                if idx >= len(self.prog.stmts):
                    continue
                st = self.prog.stmts[idx]
                out = st["outs"][0]
                var = self.prog.vars.get(out)
                if var is None or var.kind != "tensor" or len(st["outs"]) != 1:
                    continue
                cands = [d for d in dict.fromkeys(self.prog.deps(st["expr"]))
                         if self.prog.vars.get(d) is not None and self.prog.vars[d].kind == "tensor"
                         and self.prog.vars[d].shape == var.shape and self.prog.vars[d].dtype == var.dtype]
                done = False
                for d in cands:
                    if self.try_apply(lambda c, out=out, d=d: replace_var(c, out, d)):
                        changed = done = True
                        break
                if not done and var.dtype is not None and var.dtype.is_floating_point and \
                        not var.attrs.get("input") and self.prog.deps(st["expr"]):
                    if self.try_apply(lambda c, out=out: replace_with_input(c, out)):
                        changed = True
            # 3. shrink symbols
            for name in list(self.prog.syms):
                s = self.prog.syms.get(name)
                if s is None or "value" not in s:
                    continue
                cur = s["value"]
                steps = {1, 2, 3, 4, 7, cur // 4, cur // 2, (3 * cur) // 4}
                if cur <= 16:
                    steps.add(cur - 1)
                for v in sorted(steps):
                    if v < 1 or v >= cur:
                        continue
                    def setv(c, name=name, v=v):
                        c.syms[name]["value"] = v
                    if self.try_apply(setv):
                        changed = True
                        break
        self.prog.dce()
        return self.prog


def replace_var(c, old, new):
    pat = re.compile(r"(?<![\w.])%s\b" % re.escape(old))
    for s in c.stmts:
        if old in s["outs"]:
            continue
        s["expr"] = pat.sub(new, s["expr"])
    c.outputs = [new if o == old else o for o in c.outputs]
    c.dce()


def replace_with_input(c, old):
    var = c.vars[old]
    name = c.fresh("x")
    while name in c.vars:
        name = c.fresh("x")
    spec = dict(name=name, shape=var.shape, dtype=var.dtype, kind="normal", arg=None,
                seed=(c.seed * 13 + c.counter * 7) % (2 ** 31 - 1))
    c.inputs.append(spec)
    c.vars[name] = Var(name, "tensor", var.shape, var.dtype, dict(exact=True, contig=True, input=True,
                                                                  prec=var.attrs.get("prec", c.dtype)))
    replace_var(c, old, name)


def slug(text, n=60):
    s = re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")
    return s[:n] or "failure"


REPRO_MAIN = r'''

def reference(model, inputs):
    """float64 evaluation of the same rounded parameters and inputs."""
    saved = {k: globals()[k] for k in ("F32", "BF16", "F16")}
    globals().update(F32=torch.float64, BF16=torch.float64, F16=torch.float64)
    try:
        ref = Model().eval()
        ref.load_state_dict({k: v.double() if v.is_floating_point() else v for k, v in model.state_dict().items()})
        with torch.no_grad(), LowPrecisionEager():   # readable_args
            return ref(*[x.double() if x.is_floating_point() else x for x in inputs])
    finally:
        globals().update(saved)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    build = os.environ.get("NEURONCC_BUILD_DIR", os.path.join(REPO, "build"))
    model = Model().eval()
    inputs = make_inputs()
    with torch.no_grad(), LowPrecisionEager():   # f16/bf16 ops torch 1.13's CPU lacks: f32 + one rounding
        eager = model(*inputs)
        exp = export_aten(model, inputs, None, params="constants")
    ref = reference(model, inputs)
    rename_custom_ops(exp.graph)
    write_graph(exp.graph, os.path.join(here, "graph.pb"))
    cmd_in = []
    for name, value in exp.input_values.items():
        np.save(os.path.join(here, name + ".npy"), np.asarray(to_device_numpy(value), order="C"))
        cmd_in += ["--input", "%s=@%s" % (name, os.path.join(here, name + ".npy"))]
    neff = os.path.join(here, "graph.O%d.neff" % OPT)
    out = os.path.join(here, "out")
    os.makedirs(out, exist_ok=True)
    for cmd in ([os.path.join(build, "bin", "neuron-cc"), "compile", os.path.join(here, "graph.pb"), "--framework",
                 "ATEN", "--target", "trn1", "-O%d" % OPT, "--output", neff],
                [os.path.join(build, "bin", "neuron-run"), neff, "--output-dir", out] + cmd_in):
        print("$ " + " ".join(cmd), flush=True)
        proc = subprocess.run(cmd)
        if proc.returncode != 0:
            print("FAILED: exit status %d" % proc.returncode)
            return 1
    ok = True
    for i, (e, f) in enumerate(zip(eager, ref)):
        y = np.load(os.path.join(out, "output_%d.npy" % i))
        bad = check_output(y, e.double().numpy(), f.double().numpy(), TOL[OUT_PREC[i]])
        k, v = rel_error(y, e.double().numpy())
        print("output %d %s: %s" % (i, tuple(e.shape), "ok (rel %.3g)" % v if bad is None else "MISMATCH: %s" % (bad[1],)))
        if bad is not None and e.numel() <= 16:
            print("  device  %s\n  eager   %s\n  float64 %s" % (np.asarray(y).ravel().tolist(),
                                                          e.double().flatten().tolist(), f.double().flatten().tolist()))
        ok = ok and bad is None
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
'''


def write_repro(prog, outcome, directory, original_case, cfg, supported):
    os.makedirs(directory, exist_ok=True)
    env = prog.env()
    allowed = Allowed(cfg.allowed)
    # Re-export into the directory (graph.pb and input .npy files), and record the exact commands.
    outcomes, info = run_program(prog, cfg, allowed, supported, [outcome.opt], directory, env)
    final = outcomes[0]
    names = info.get("input_names", [])
    rel_cmds = ["neuron-cc compile graph.pb --framework ATEN --target trn1 -O%d --output graph.O%d.neff"
                % (outcome.opt, outcome.opt),
                "neuron-run graph.O%d.neff --output-dir out %s" % (
                    outcome.opt, " ".join("--input %s=@%s.npy" % (n, n) for n in names))]
    shapes = ", ".join("%s: %s %s" % (i["name"], prog.eval_shape(i["shape"], env),
                                      str(i["dtype"]).replace("torch.", "")) for i in prog.inputs)
    out_prec = [output_prec(prog, o) for o in prog.outputs]
    doc = ['"""graph_fuzz reproducer (minimized).',
           "",
           "class:     %s (%s, -O%d)" % (final.cls, final.stage, outcome.opt),
           "error:     %s" % final.msg,
           "signature: %s" % final.sig,
           "case dtype %s; inputs %s" % (prog.dtype, shapes),
           "from:      graph_fuzz.py --seed %d --only %d%s (case seed %d), then minimized" % (
               cfg.seed, original_case, " --focus " + ",".join(cfg.focus) if cfg.focus else "", prog.seed),
           "",
           "Commands, in this directory, with NEURONCC_BUILD_DIR's bin/ on PATH:",
           ] + ["  " + c for c in rel_cmds] + [
           "`/usr/bin/python3 repro.py` re-exports graph.pb from the model below, runs both",
           "commands and compares every output with eager and float64 (tolerances: graph_fuzz.py).",
           '"""']
    text = "\n".join(doc) + "\n"
    text += "import os\nimport subprocess\nimport sys\n\n"
    text += "REPO = %r\nsys.path.insert(0, os.path.join(REPO, \"tools\", \"python\"))\n" % REPO
    text += "from neuroncc.export import export_aten, write_graph  # noqa: E402\n"
    text += PRELUDE
    text += "\n\nOPT = %d\nOUT_PREC = %r\n\n\n" % (outcome.opt, out_prec)
    text += prog.source(env) + "\n\n" + prog.inputs_source(env)
    text += REPRO_MAIN
    with open(os.path.join(directory, "repro.py"), "w") as f:
        f.write(text)
    with open(os.path.join(directory, "commands.sh"), "w") as f:
        f.write("#!/bin/sh\n# %s\nset -x\ncd \"$(dirname \"$0\")\"\nB=${NEURONCC_BUILD_DIR:-%s}/bin\n" % (
            final.msg.replace("\n", " "), os.path.join(REPO, "build")))
        for c in rel_cmds:
            f.write("$B/" + c + "\n")
    return final, prog.source(env), shapes, info.get("targets", [])


def minimize_one(args):
    rec, cfg = args
    torch.set_num_threads(1)
    limit_case_memory()
    supported = supported_ops()
    allowed = Allowed(cfg.allowed)
    bad = [o for o in rec["outcomes"] if o["sig"] == rec["min_sig"]][0]
    prog = generate(rec["seed"], rec["dtype"], supported, focus=cfg.focus)
    regenerated = prog.source(prog.env()) == rec.get("source")
    opt = bad["opt"]
    workdir = tempfile.mkdtemp(prefix="min%d-" % rec["case"], dir=cfg.work)
    t0 = time.time()
    try:
        m = Minimizer(prog, opt, rec["min_sig"], cfg, allowed, supported, workdir, time.time() + cfg.minimize_budget)
        if cfg.minimize:
            prog = m.run()
        d = os.path.join(cfg.out, "%s-case%d" % (slug(rec["min_sig"]), rec["case"]))
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        # The failing program as the run generated it, before minimization.
        with open(os.path.join(d, "case_source.py"), "w") as f:
            f.write(rec.get("source", ""))
        o = Outcome(bad["cls"], bad["stage"], bad["msg"], bad["sig"], opt)
        final, src, shapes, targets = write_repro(prog, o, d, rec["case"], cfg, supported)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return dict(case=rec["case"], sig=rec["min_sig"], dir=d, cls=final.cls, msg=final.msg, opt=opt,
                dtype=rec["dtype"], source=src, shapes=shapes, tries=m.tries, seconds=time.time() - t0,
                stmts=len(prog.stmts), still=final.sig == rec["min_sig"], regenerated=regenerated, targets=targets,
                error=final.msg)


# ---------------------------------------------------------------------------
# Driver

def parse_args(argv):
    p = argparse.ArgumentParser(description="Differential graph fuzzer: neuron-cc vs PyTorch eager.",
                                epilog="See the module docstring for what is generated and how results are judged.")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--cases", type=int, default=200)
    p.add_argument("--only", help="comma-separated case indices to run")
    p.add_argument("--focus", default="", help="comma-separated generators (without g_, e.g. attention) "
                   "drawn 25 times as often; part of what a case index means")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--opt", default="0,2")
    p.add_argument("--dtypes", default="f32,bf16,f16")
    p.add_argument("--out", help="output directory (reproducers, results.jsonl); default: a new temp dir")
    p.add_argument("--minimize", dest="minimize", action="store_true", default=None)
    p.add_argument("--no-minimize", dest="minimize", action="store_false")
    p.add_argument("--minimize-budget", type=float, default=240.0, help="seconds per failure signature")
    p.add_argument("--repros-per-signature", type=int, default=1,
                   help="failing cases minimized per signature (default 1; wrong: --wrong-repros)")
    p.add_argument("--wrong-repros", type=int, default=8,
                   help="wrong cases minimized per signature, grouped afterwards by the minimized graph's "
                        "operators (one 'numerics' signature hides different bugs); default 8")
    p.add_argument("--timeout", type=float, help="compile and run timeout (s)")
    p.add_argument("--compile-timeout", type=float, default=20.0)
    p.add_argument("--run-timeout", type=float, default=20.0)
    p.add_argument("--allowed", default=ALLOWED_PATH, help="allowed-refusals file")
    p.add_argument("--ctest", action="store_true", help="fixed seed, %d cases, no minimization" % CTEST_CASES)
    p.add_argument("--gen-only", action="store_true", help="generate and export only (generator self-check)")
    p.add_argument("--keep", action="store_true", help="keep every case's work directory (under --out)")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    if args.ctest:
        args.seed = CTEST_SEED
        args.cases = CTEST_CASES
        args.minimize = False
        args.only = None
    if args.minimize is None:
        args.minimize = True
    if args.timeout:
        args.compile_timeout = args.run_timeout = args.timeout
    args.opts = [int(x) for x in args.opt.split(",") if x.strip()]
    args.dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    args.focus = tuple(f.strip() for f in args.focus.split(",") if f.strip())
    for d in args.dtypes:
        if d not in CASE_DTYPES:
            p.error("--dtypes: %s is not one of %s" % (d, ", ".join(CASE_DTYPES)))
    return args


def gen_only(args):
    supported = supported_ops()
    stats = collections.Counter()
    skips = collections.Counter()
    coverage = collections.Counter()
    work = tempfile.mkdtemp(prefix="graph_fuzz_gen-")
    idx = [int(x) for x in args.only.split(",")] if args.only else range(args.cases)
    t0 = time.time()
    for i in idx:
        seed = case_seed(args.seed, i)
        dtype = case_dtype(args.seed, i, args.dtypes)
        prog = generate(seed, dtype, supported, stats, focus=args.focus)
        try:
            exp, _, _, _, _ = export_case(prog, prog.env(), work, supported)
            coverage.update(n.target for n in exp.graph.nodes)
        except ExportSkip as e:
            skips[str(e)[:160]] += 1
            if args.verbose:
                print("case %d: %s\n%s" % (i, e, prog.source(prog.env())))
    shutil.rmtree(work, ignore_errors=True)
    print("generated %d cases in %.1f s" % (len(idx), time.time() - t0))
    for k, v in sorted(stats.items()):
        print("  %6d %s" % (v, k))
    print("export-skip %d:" % sum(skips.values()))
    for k, v in skips.most_common():
        print("  %6d %s" % (v, k))
    missing = sorted(supported - set(coverage))
    print("coverage: %d of %d supported overloads; never generated: %s" % (
        len(supported & set(coverage)), len(supported), " ".join(missing) or "none"))
    bugs = [k for k in stats if k.startswith("GENBUG")]
    return 1 if bugs else 0


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.gen_only:
        return gen_only(args)
    supported = supported_ops()
    # --ctest without --out: nothing is left behind (re-run with --out DIR for reproducers).
    scratch = args.ctest and not args.out
    out = args.out or tempfile.mkdtemp(prefix="graph_fuzz-")
    os.makedirs(out, exist_ok=True)
    args.out = os.path.abspath(out)
    args.work = tempfile.mkdtemp(prefix="work-", dir=args.out)
    allowed = Allowed(args.allowed)
    cases = [int(x) for x in args.only.split(",")] if args.only else list(range(args.cases))
    print("graph_fuzz: seed %d, %d cases, -O%s, dtypes %s, %d jobs, tools %s, out %s" % (
        args.seed, len(cases), ",".join(map(str, args.opts)), ",".join(args.dtypes), args.jobs, toolchain.BIN,
        args.out), flush=True)
    print("graph_fuzz: %d supported operators; %d allowed-refusal patterns from %s" % (
        len(supported), len(allowed.patterns), args.allowed), flush=True)
    t0 = time.time()
    records = []
    work_items = [(i, args) for i in cases]
    progress_every = max(1, len(cases) // 20)
    if args.jobs > 1:
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(args.jobs) as pool:
            for n, rec in enumerate(pool.imap_unordered(run_one_case, work_items), 1):
                records.append(rec)
                if n % progress_every == 0:
                    print("  ... %d/%d cases, %.0f s" % (n, len(cases), time.time() - t0), flush=True)
    else:
        for n, item in enumerate(work_items, 1):
            records.append(run_one_case(item))
            if n % progress_every == 0:
                print("  ... %d/%d cases, %.0f s" % (n, len(cases), time.time() - t0), flush=True)
    records.sort(key=lambda r: r["case"])
    with open(os.path.join(args.out, "results.jsonl"), "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")

    counts = collections.Counter(r["cls"] for r in records)
    ncompiles = sum(1 for r in records for o in r["outcomes"] if o["stage"] not in ("export", "generate"))
    # failure signatures
    sigs = collections.OrderedDict()
    for r in records:
        for o in r["outcomes"]:
            if o["cls"] in ("pass",):
                continue
            key = (o["cls"], o["sig"])
            entry = sigs.setdefault(key, dict(cases=[], opts=set(), dtypes=set(), msg=o["msg"]))
            if r["case"] not in entry["cases"]:
                entry["cases"].append(r["case"])
            entry["opts"].add(o["opt"])
            entry["dtypes"].add(r["dtype"])
    coverage = collections.Counter(t for r in records for t in r.get("targets", []))
    stage_times = collections.defaultdict(list)
    for r in records:
        for o in r["outcomes"]:
            for k, v in o["times"].items():
                stage_times[k if k == "export" else "%s -O%s" % (k, o["opt"])].append(v)

    repros = []
    if sigs and not scratch:
        todo = []
        for (cls, sig), entry in sigs.items():
            if cls not in FAILING and cls != "export-skip":
                continue
            if cls == "export-skip":
                continue
            for c in entry["cases"][:args.wrong_repros if cls == "wrong" else args.repros_per_signature]:
                rec = dict(next(r for r in records if r["case"] == c))
                rec["min_sig"] = sig
                todo.append((rec, args))
        if todo:
            print("graph_fuzz: %s %d failure signature(s)..." % ("minimizing" if args.minimize else "writing",
                                                                 len(todo)), flush=True)
        if args.jobs > 1 and len(todo) > 1:
            ctx = multiprocessing.get_context("fork")
            with ctx.Pool(min(args.jobs, len(todo))) as pool:
                repros = list(pool.imap_unordered(minimize_one, todo))
        else:
            repros = [minimize_one(t) for t in todo]
        with open(os.path.join(args.out, "repros.json"), "w") as f:
            json.dump(repros, f, indent=1)
    if args.keep:
        print("graph_fuzz: case work directories kept under %s" % args.work)
    else:
        shutil.rmtree(args.work, ignore_errors=True)
    if scratch:
        shutil.rmtree(args.out, ignore_errors=True)
        args.out = "(not kept: --ctest without --out)"

    print()
    print("stage wall time (s): " + "; ".join("%s mean %.2f max %.2f" % (k, np.mean(v), np.max(v))
                                             for k, v in sorted(stage_times.items())))
    missing = sorted(supported - set(coverage))
    print("coverage: %d of %d supported overloads appeared in exported graphs%s" % (
        len(supported & set(coverage)), len(supported), "; never: " + " ".join(missing) if missing else ""))
    if sigs:
        print("failure signatures:")
        for (cls, sig), entry in sorted(sigs.items(), key=lambda kv: (-SEVERITY[kv[0][0]], -len(kv[1]["cases"]))):
            print("  [%s] %d case(s) (e.g. case %d, -O%s, %s): %s" % (
                cls, len(entry["cases"]), entry["cases"][0], "/".join(str(o) for o in sorted(entry["opts"], key=str)),
                "/".join(sorted(entry["dtypes"])), entry["msg"][:200]))
        if repros:
            print("reproducers (minimized: %s), grouped by signature and the minimized graph's operators:" % (
                "yes" if args.minimize else "no"))
            groups = collections.OrderedDict()
            for rp in sorted(repros, key=lambda r: (r["sig"], r["case"])):
                key = (rp["sig"], tuple(t for t in rp["targets"] if t != "getitem"))
                groups.setdefault(key, []).append(rp)
            for (sig, targets), rps in groups.items():
                rp = rps[0]
                print("  %s -O%d %s: %s\n      ops: %s\n      cases %s; %s (%d stmts, %d tries, %.0f s)%s%s" % (
                    rp["cls"], rp["opt"], rp["dtype"], rp["error"][:200], " ".join(targets),
                    ",".join(str(r["case"]) for r in rps), rp["dir"], rp["stmts"], rp["tries"], rp["seconds"],
                    "" if rp["still"] else " [the written reproducer gives another result]",
                    "" if rp["regenerated"] else " [GENERATOR NOT DETERMINISTIC: the seed gave another program;"
                    " the failing one is case_source.py]"))
    print()
    for c in CLASSES:
        print("  %-16s %6d" % (c, counts.get(c, 0)))
    print("graph_fuzz: %d cases (%d compiles): %d pass, %d wrong, %d crash, %d allowed refusal, %d refusal, "
          "%d timeout, %d export-skip (%.0f s; results in %s)" % (
              len(records), ncompiles, counts["pass"], counts["wrong"], counts["crash"], counts["allowed refusal"],
              counts["refusal"], counts["timeout"], counts["export-skip"], time.time() - t0, args.out), flush=True)
    return 1 if any(counts[c] for c in FAILING) else 0


if __name__ == "__main__":
    sys.exit(main())
