#!/usr/bin/env python3
"""OpInfo sweep: PyTorch's own sample inputs for every operator neuron-cc supports.

For each overload that `neuron-cc list-operators --framework ATEN` prints, the
OpInfos of torch.testing._internal.common_methods_invocations.op_db whose name
matches it (the overload's base name, with a leading underscore dropped, as a
torch or torch.nn.functional name, or an alias; plus a few explicit entries in
EXTRA_OPINFOS) provide sample inputs on the CPU in f32, bf16, f16, int64 and uint8
(DEFAULT_DTYPES; --dtypes also takes i32 and bool). Each sample
call is traced with the exporter (make_fx); a sample belongs to the overload
when its traced graph contains that overload (so `add` samples that trace to
aten::add.Tensor are not counted for aten::add.Scalar). Up to MAX_SAMPLES
samples per overload and dtype are then compiled at -O2, run, and compared
with eager on the same inputs:
  f32:  max |y - eager| / max |eager| <= 1e-4 (as in test_models.py).
  bf16: <= 2^-7. Eager computes a single op on bf16 inputs in f32 and rounds
        its result once (CPU kernels accumulate bf16 reductions in f32), so
        it is within half a bf16 ulp (2^-9 relative) of the exact value; the
        compiled op also rounds once, after f32 arithmetic, so the two differ
        by at most one ulp, 2^-8 of the element and so of max |eager|.
        2^-7 doubles that for ops that eager composes from two rounded
        steps. A wrong element is off by far more.
  f16:  <= 2^-9, the same two ulps of f16's 11-bit significand.
  integer and bool results: exactly, dtype included; a float result of
        integer inputs (true division, sqrt) as f32. Integers above 2^24
        are inexact on the device (docs/compiler.md), so such samples
        (int pow) are listed as expected failures.
  topk, kthvalue, sort: the values exactly; the order of equal values'
        indices is unspecified, so each index must point at its value.
Samples whose tensors are empty or larger than MAX_ELEMENTS elements, whose
eager call raises, or whose result is not a tensor (or tuple of tensors) are
skipped and counted as skipped, never as passed.

Failures are listed in xfail_opinfo.txt (`op dtype sample reason`, sample an
index or `*` for every sample of that op and dtype); tests/e2e/test_opinfo.py
enforces the list both ways.

Usage:
  /usr/bin/python3 tests/e2e/opinfo_sweep.py [--ops aten::exp,aten::neg]
      [--dtypes f32,bf16,i64,u8] [--max-samples 8] [--opt 2] [--jobs 2] [-v]
      [--update-xfail]
prints passed/total per op and dtype (and the skipped count), then the total.
--update-xfail rewrites xfail_opinfo.txt from this run's failures (only
with the default ops, dtypes and sample cap).
"""
import argparse
import collections
import os
import random
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import e2e_common as common  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from neuroncc import export as ex  # noqa: E402
from neuroncc import toolchain  # noqa: E402

MAX_SAMPLES = 8
MAX_ELEMENTS = 1 << 20
OPT = 2
TOLERANCE = {"f32": common.F32_TOLERANCE, "bf16": 2.0 ** -7, "f16": 2.0 ** -9}
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16, "i64": torch.int64, "i32": torch.int32,
          "u8": torch.uint8, "bool": torch.bool}
# The dtypes test_opinfo.py runs: the float ones, int64 (what integer tensors
# usually are) and uint8 (narrow: wraps on every op). tests/CMakeLists.txt
# registers one ctest entry per dtype of this list.
DEFAULT_DTYPES = ("f32", "bf16", "f16", "i64", "u8")
XFAIL_PATH = os.path.join(HERE, "xfail_opinfo.txt")
XFAIL_HEADER = """# Expected failures of the OpInfo sweep (tests/e2e/opinfo_sweep.py, enforced by
# tests/e2e/test_opinfo.py): `op dtype sample reason`, sample = index or *.
# A listed sample that passes fails the test ("unexpectedly passing"): remove it.
# Regenerate: /usr/bin/python3 tests/e2e/opinfo_sweep.py --update-xfail"""

# Ops whose results hold unspecified values in eager (uninitialized memory).
UNSPECIFIED_VALUES = {"aten::empty_like", "aten::new_empty", "aten::empty.memory_format"}

# Ops whose index result orders equal values in an unspecified way (eager's
# CPU kernels: a partial sort or selection; ours: index order): (position of
# `dim`, its default, position of `keepdim` or None). Their values must match
# eager's exactly; an index must only point at its value in the input.
TIE_ORDERED_INDICES = {
    "aten::topk": (2, -1, None),
    "aten::kthvalue": (2, -1, 3),
    "aten::sort": (1, -1, None),
}

# OpInfos whose name does not follow from the overload's name.
EXTRA_OPINFOS = {
    "native_layer_norm": ["nn.functional.layer_norm"],
    "_reshape_alias": ["reshape", "view_as", "flatten"],
    "_unsafe_view": ["reshape", "matmul"],
    "_to_copy": ["to", "float", "bfloat16", "double", "type_as"],
    "_softmax": ["softmax"],
    "_log_softmax": ["log_softmax"],
    "split.Tensor": ["split"],
    "slice.Tensor": ["narrow"],
    "select.int": ["select"],
    "expand": ["expand_as", "broadcast_to"],
    "scalar_tensor": ["where", "masked_fill"],
    # Imported as compositions (compiler/ComposedOps.cpp).
    "convolution": ["nn.functional.conv1d", "nn.functional.conv2d"],
    "max_pool2d_with_indices": ["nn.functional.max_pool2d"],
    "avg_pool2d": ["nn.functional.avg_pool2d"],
    "_adaptive_avg_pool2d": ["nn.functional.adaptive_avg_pool2d"],
    "_adaptive_avg_pool3d": ["nn.functional.adaptive_avg_pool3d"],
    "grid_sampler_2d": ["nn.functional.grid_sample"],
    "upsample_nearest2d": ["nn.functional.interpolate", "nn.functional.upsample_nearest"],
    "upsample_bilinear2d": ["nn.functional.interpolate", "nn.functional.upsample_bilinear"],
    "upsample_nearest1d": ["nn.functional.interpolate"],
    "upsample_nearest3d": ["nn.functional.interpolate"],
    "upsample_linear1d": ["nn.functional.interpolate"],
    "upsample_trilinear3d": ["nn.functional.interpolate"],
    "native_batch_norm": ["nn.functional.batch_norm"],
    "native_group_norm": ["nn.functional.group_norm"],
    "constant_pad_nd": ["nn.functional.pad"],
    "linalg_vector_norm": ["linalg.vector_norm", "norm", "nn.functional.normalize"],
    "norm": ["norm", "linalg.vector_norm", "nn.functional.normalize"],
    "clamp_min": ["clamp_min", "clamp"],
    "clamp_max": ["clamp_max", "clamp"],
    "var": ["var", "var_mean"],
    "std": ["std", "std_mean"],
    "isposinf": ["isposinf"],
    "empty.memory_format": ["empty"],
    "index.Tensor": ["__getitem__", "take_along_dim"],
    "gather": ["gather", "take_along_dim"],
    "nll_loss_forward": ["nn.functional.nll_loss", "nn.functional.cross_entropy"],
    "nll_loss2d_forward": ["nn.functional.nll_loss", "nn.functional.cross_entropy"],
    "log_sigmoid_forward": ["nn.functional.logsigmoid"],
    "_prelu_kernel": ["nn.functional.prelu"],
    "unsafe_split": ["unsafe_split", "split"],
    "unsafe_split_with_sizes": ["split_with_sizes", "split"],
    "diagonal": ["diagonal", "diag", "trace", "diag_embed"],
    "count_nonzero": ["count_nonzero"],
    "prod": ["prod"],
    "linspace": ["linspace"],
    "sort": ["sort", "argsort", "msort"],
    "median": ["median"],
    "index_put": ["index_put", "__setitem__"],
    "reflection_pad1d": ["nn.functional.pad"],
    "reflection_pad2d": ["nn.functional.pad"],
    "reflection_pad3d": ["nn.functional.pad"],
    "replication_pad1d": ["nn.functional.pad"],
    "replication_pad2d": ["nn.functional.pad"],
    "replication_pad3d": ["nn.functional.pad"],
    "linalg_cross": ["linalg.cross", "cross"],
    "fill": ["fill"],
    "masked_fill": ["masked_fill"],
    "cummax": ["cummax"],
    "cummin": ["cummin"],
    "_cdist_forward": ["cdist"],
    "_pdist_forward": ["nn.functional.pdist"],
    "upsample_bicubic2d": ["nn.functional.interpolate"],
    "affine_grid_generator": ["nn.functional.affine_grid"],
    "channel_shuffle": ["nn.functional.channel_shuffle"],
    "_trilinear": ["nn.functional.bilinear"],
    "rrelu_with_noise": ["nn.functional.rrelu"],
    "max_pool3d_with_indices": ["nn.functional.max_pool3d"],
    "avg_pool3d": ["nn.functional.avg_pool3d"],
    "_euclidean_dist": ["cdist"],
    "im2col": ["nn.functional.unfold"],
    "col2im": ["nn.functional.fold"],
    "_embedding_bag": ["nn.functional.embedding_bag"],
    "_embedding_bag_forward_only": ["nn.functional.embedding_bag"],
}


def supported_ops():
    out = subprocess.run([toolchain.tool("neuron-cc"), "list-operators", "--framework", "ATEN"],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def load_op_db():
    """op_db, importing it with the expecttest stand-in on sys.path for the import only."""
    stubs = os.path.join(HERE, "stubs")
    sys.path.insert(0, stubs)
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    finally:
        sys.path.remove(stubs)
    return op_db


def opinfos_for(op, op_db):
    """OpInfos that may produce the ATen overload `op` ("aten::add.Tensor")."""
    name = op.split("::", 1)[1]
    base = name.split(".")[0]
    names = {base, base.lstrip("_"), "nn.functional." + base, "nn.functional." + base.lstrip("_")}
    names.update(EXTRA_OPINFOS.get(name, []))
    names.update(EXTRA_OPINFOS.get(base, []))
    found = []
    for info in op_db:
        aliases = {a.name for a in getattr(info, "aliases", ())}
        if info.name in names or getattr(info, "aten_name", None) in (base,) or aliases & names:
            found.append(info)
    return found


class Sample:
    """One sample call of one OpInfo, traced and with its eager result."""

    def __init__(self, op, dtype, index, info, exp, eager):
        self.op, self.dtype, self.index = op, dtype, index
        self.info = info
        self.exp = exp
        self.eager = eager

    @property
    def key(self):
        return (self.op, self.dtype, str(self.index))

    def label(self):
        name = self.info.name + ("." + self.info.variant_test_name if self.info.variant_test_name else "")
        return "%s %s #%d (%s)" % (self.op, self.dtype, self.index, name)


def _as_call(info, sample):
    """(fn(*tensors), tensors) for sample; tensors are every tensor leaf of input, args, kwargs."""
    flat, spec = torch.utils._pytree.tree_flatten((sample.input, tuple(sample.args), dict(sample.kwargs)))
    positions = [i for i, v in enumerate(flat) if isinstance(v, torch.Tensor)]
    tensors = tuple(flat[i].detach().clone() for i in positions)
    op = info.op

    def fn(*ts):
        leaves = list(flat)
        for i, t in zip(positions, ts):
            leaves[i] = t
        inp, args, kwargs = torch.utils._pytree.tree_unflatten(leaves, spec)
        return op(inp, *args, **kwargs)

    return fn, tensors


def collect(op, op_db, dtype_name, max_samples=MAX_SAMPLES, skipped=None):
    """Samples for `op` at `dtype_name`; reasons for skipped samples go to `skipped` (a Counter)."""
    dtype = DTYPES[dtype_name]
    skipped = skipped if skipped is not None else collections.Counter()
    samples = []
    for info in opinfos_for(op, op_db):
        try:
            if dtype not in info.supported_dtypes("cpu"):
                continue
        except Exception:  # noqa: BLE001
            continue
        # Some sample generators draw from Python's and NumPy's generators too
        # (huber_loss's delta: random.uniform), not only torch's.
        torch.manual_seed(0)
        random.seed(0)
        np.random.seed(0)
        try:
            generated = list(info.sample_inputs("cpu", dtype, requires_grad=False))
        except Exception:  # noqa: BLE001 - an OpInfo that cannot make samples here has none
            continue
        for sample in generated:
            if len(samples) >= max_samples:
                return samples
            fn, tensors = _as_call(info, sample)
            if not tensors:
                continue
            if any(t.numel() == 0 or t.numel() > MAX_ELEMENTS for t in tensors):
                skipped["empty or over %d elements" % MAX_ELEMENTS] += 1
                continue
            try:
                with torch.no_grad():
                    eager = fn(*[t.clone() for t in tensors])
            except Exception:  # noqa: BLE001
                skipped["eager raises"] += 1
                continue
            flat_out, _ = torch.utils._pytree.tree_flatten(eager)
            if not flat_out or not all(isinstance(t, torch.Tensor) for t in flat_out):
                skipped["non-tensor result"] += 1
                continue
            if any(t.numel() == 0 or t.numel() > MAX_ELEMENTS for t in flat_out):
                skipped["empty or over %d elements" % MAX_ELEMENTS] += 1
                continue
            try:
                exp = ex.export_aten(fn, tensors, None, params="constants")
            except Exception as e:  # noqa: BLE001
                exp = e  # an export failure is this sample's failure, if it is this op's sample
                targets = None
            else:
                targets = exp.targets()
            if targets is not None and op not in targets:
                continue  # another overload's sample
            samples.append(Sample(op, dtype_name, len(samples), info, exp,
                                  tuple(t.detach() for t in flat_out)))
    return samples


def run_sample(sample, workdir, opt=OPT):
    """Compiles and runs one sample; returns the max relative error or raises CaseFailure."""
    if isinstance(sample.exp, Exception):
        raise common.CaseFailure("export: %s: %s" % (type(sample.exp).__name__, common.first_line(sample.exp)))
    name = "%s_%s_%d" % (sample.op.replace("::", "_").replace(".", "_"), sample.dtype, sample.index)
    graph = os.path.join(workdir, name + ".pb")
    ex.write_graph(sample.exp.graph, graph)
    neff = os.path.join(workdir, name + ".neff")
    try:
        toolchain.compile_graph(graph, neff, opt=opt)
    except toolchain.ToolError as e:
        raise common.CaseFailure("compile: " + common.compiler_reason(e)) from e
    outdir = os.path.join(workdir, name + "-out")
    try:
        arrays = {n: common.device_array(v) for n, v in sample.exp.input_values.items()}
        outs = toolchain.run_neff(neff, arrays, outdir, keep_dtypes=True)
    except toolchain.ToolError as e:
        raise common.CaseFailure("run: " + common.compiler_reason(e)) from e
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
    if len(outs) != len(sample.eager):
        raise common.CaseFailure("run: %d outputs, eager has %d" % (len(outs), len(sample.eager)))
    if sample.op in UNSPECIFIED_VALUES:  # only the shapes and dtypes are defined
        for y, r in zip(outs, sample.eager):
            if tuple(y.shape) != tuple(r.shape) or y.dtype != common.device_array(r).dtype:
                raise common.CaseFailure("%s %s, eager %s %s" % (y.shape, y.dtype, tuple(r.shape), r.dtype))
        return 0.0
    if sample.op in TIE_ORDERED_INDICES and len(outs) == 2:
        checked = _check_tie_ordered(sample, outs)
        if checked is not None:
            return checked
    # Integer and bool results must match exactly (compare's rule); a float
    # result of integer inputs (true division, sqrt) is held to f32's tolerance.
    tol = TOLERANCE.get(sample.dtype, common.F32_TOLERANCE)
    for y, r in zip(outs, sample.eager):
        if not (r.is_floating_point() or r.is_complex()) and y.dtype != common.device_array(r).dtype:
            raise common.CaseFailure("output dtype %s, eager %s" % (y.dtype, r.dtype))
    return max([common.compare(y, r, tol) for y, r in zip(outs, sample.eager)] or [0.0])


def _int_arg(node, pos, name, default):
    named = [a for a in node.args if a.name == name]
    positional = [a for a in node.args if not a.name]
    arg = named[0] if named else (positional[pos] if pos < len(positional) else None)
    if arg is None or arg.WhichOneof("value") in (None, "none"):
        return default
    return getattr(arg, arg.WhichOneof("value"))


def _check_tie_ordered(sample, outs):
    """(values, indices) of a tie-ordered op: the values exactly as eager's, each
    index pointing at its value in the input. None when the op's input is not
    a graph input (then the outputs are compared as any other op's)."""
    dim_pos, dim_default, keepdim_pos = TIE_ORDERED_INDICES[sample.op]
    node = next(n for n in sample.exp.graph.nodes if n.target == sample.op)
    source = node.args[0].tensor
    if source not in sample.exp.input_values:
        return None
    x = sample.exp.input_values[source]
    err = common.compare(outs[0], sample.eager[0], TOLERANCE.get(sample.dtype, common.F32_TOLERANCE))
    if outs[1].dtype != np.int64:
        raise common.CaseFailure("index output dtype %s, eager int64" % outs[1].dtype)
    if x.dim() == 0:
        if not (outs[1] == 0).all():
            raise common.CaseFailure("index of a 0-d input is not 0")
        return err
    dim = _int_arg(node, dim_pos, "dim", dim_default) % x.dim()
    keepdim = keepdim_pos is not None and _int_arg(node, keepdim_pos, "keepdim", False)
    index = torch.from_numpy(np.asarray(outs[1]))
    if keepdim_pos is not None and not keepdim:
        index = index.unsqueeze(dim)
    if index.numel() and (index.min() < 0 or index.max() >= x.shape[dim]):
        raise common.CaseFailure("an index is out of range")
    pointed = torch.gather(x, dim, index)
    if keepdim_pos is not None and not keepdim:
        pointed = pointed.squeeze(dim)
    values = sample.eager[0]
    same = (pointed == values) | (torch.isnan(pointed) & torch.isnan(values)) if values.is_floating_point() \
        else pointed == values
    if not bool(same.all()):
        raise common.CaseFailure("%d of %d indices do not point at their value" % (int((~same).sum()), same.numel()))
    return err


def expected_failure(xfail, sample):
    return sample.key in xfail or (sample.op, sample.dtype, "*") in xfail


def enumerate_cases(ops=None, dtypes=DEFAULT_DTYPES, max_samples=MAX_SAMPLES):
    """[(op, dtype, [Sample], skipped Counter)] for the supported ops that have OpInfo samples,
    and the supported ops with no OpInfo at all."""
    op_db = load_op_db()
    ops = ops or supported_ops()
    cases, without = [], []
    for op in ops:
        if not opinfos_for(op, op_db):
            without.append(op)
            continue
        for d in dtypes:
            skipped = collections.Counter()
            cases.append((op, d, collect(op, op_db, d, max_samples, skipped), skipped))
    return cases, without


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", help="comma-separated overloads (default: all that neuron-cc lists)")
    parser.add_argument("--dtypes", default=",".join(DEFAULT_DTYPES), help="of " + ",".join(DTYPES))
    parser.add_argument("--max-samples", type=int, default=MAX_SAMPLES)
    parser.add_argument("--opt", type=int, default=OPT)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("-v", "--verbose", action="store_true", help="print every failure")
    parser.add_argument("--update-xfail", action="store_true")
    args = parser.parse_args(argv)
    if args.update_xfail and (args.ops or args.dtypes != ",".join(DEFAULT_DTYPES) or args.max_samples != MAX_SAMPLES):
        parser.error("--update-xfail needs the default --ops, --dtypes and --max-samples")

    cases, without = enumerate_cases(args.ops.split(",") if args.ops else None, args.dtypes.split(","),
                                     args.max_samples)
    xfail = common.XfailList(XFAIL_PATH, 3)
    work = tempfile.mkdtemp(prefix="neuroncc-opinfo-")
    failures = {}
    totals = collections.Counter()
    try:
        samples = [s for _, _, ss, _ in cases for s in ss]

        def attempt(sample):
            try:
                run_sample(sample, work, args.opt)
                return sample, None
            except common.CaseFailure as e:
                return sample, common.first_line(e, 300)

        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            results = dict((s.key, r) for s, r in pool.map(attempt, samples))
        print("%-28s %-5s %8s %8s %9s  %s" % ("op", "dtype", "passed", "total", "skipped", "first failure"))
        for op, dtype, ss, skipped in cases:
            failed = [(s, results[s.key]) for s in ss if results[s.key] is not None]
            nskip = sum(skipped.values())
            totals.update(passed=len(ss) - len(failed), total=len(ss), skipped=nskip)
            first = "#%d %s" % (failed[0][0].index, failed[0][1][:90]) if failed else ""
            if not ss:
                first = "no OpInfo sample traces to this overload"
            print("%-28s %-5s %8d %8d %9d  %s" % (op, dtype, len(ss) - len(failed), len(ss), nskip, first))
            for s, reason in failed:
                failures[s.key] = reason
                if args.verbose:
                    print("    %s: %s" % (s.label(), reason))
        unexpected = [k for k in xfail.entries if k in results and results[k] is None]
        print("\n%d passed, %d failed, %d skipped (of %d samples); %d ops without an OpInfo: %s" % (
            totals["passed"], totals["total"] - totals["passed"], totals["skipped"], totals["total"],
            len(without), " ".join(without)))
        if unexpected:
            print("listed in %s but passing: %s" % (os.path.basename(XFAIL_PATH),
                                                   ", ".join(" ".join(k) for k in sorted(unexpected))))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.update_xfail:
        # Collapse an op and dtype whose every sample fails with one reason into a `*` entry.
        grouped = collections.defaultdict(dict)
        for (op, dtype, idx), reason in failures.items():
            grouped[(op, dtype)][idx] = reason
        entries = {}
        for op, dtype, ss, _ in cases:
            got = grouped.get((op, dtype), {})
            if ss and len(got) == len(ss) and len(set(got.values())) == 1:
                entries[(op, dtype, "*")] = next(iter(got.values()))
            else:
                for idx, reason in got.items():
                    entries[(op, dtype, idx)] = reason
        xfail.write(entries, XFAIL_HEADER)
        print("wrote %d entries to %s" % (len(entries), XFAIL_PATH))
    return 0


if __name__ == "__main__":
    sys.exit(main())
