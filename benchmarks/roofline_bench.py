#!/usr/bin/env python3
"""Production-size workloads against the roofline of the modeled NeuronCore.

For each workload (tools/python/neuroncc/workloads.py: bf16, weights as graph
inputs, exported with fake tracing so nothing of model size is allocated) it
exports the graph, compiles it at -O2 for the target, captures one execution
with `neuron-profile capture --timing-only` (the modeled timeline without
computing values, identical to a full execution's) and prints:

  dispatches, kernels, instructions (profile summary);
  modeled device time T over the whole dispatch, and T_exec = T minus the
    fixed per-dispatch cost (launch overhead);
  the roofline bound B = max(F / peak, M / bw), where
    F    = the graph's matmul FLOPs (2*M*N*K of every aten mm/bmm/addmm/
           matmul/linear node, from the exported shapes),
    M    = the minimum HBM bytes: every graph input (weights included),
           constant and output touched once,
    peak = the device model's bf16 TensorEngine peak
           (summary-json tensor_peak_flops_per_s: 2 x 128^2 x clock),
    bw   = the device model's HBM bandwidth per core (hbm_gbps_per_core);
  T_exec / B (1.0 is the roofline);
  T_exec / Kb, where Kb = the kernels' engine bound: over the kernels, the
    sum of each kernel's busiest resource, its tensor, vector, scalar or
    GpSimd engine's instruction time or its DMA bytes over bw (from the
    profile's instruction view; the per-transfer fixed cost is not counted,
    so kernels of small transfers sit far above it). A kernel lasts at least
    that long unless it overlaps its neighbours, so this shows what
    scheduling within the kernels could still gain, where B also counts what
    the device model's costs and the kernels' structure rule out;
  MFU = F / (T * peak) and MBU = M / (T * bw), each over T and over T_exec;
  active % of each engine over T_exec (tensor, vector, scalar, gpsimd, and
    DMA: any queue busy);
  HBM bytes moved (DMA reads + writes) against M;
  wall times of export, compile and timing-only profiling on this machine.

The same table follows for the small end-to-end models
(tools/python/neuroncc/models.py, bf16, real tracing, weights as constants).
Goals (issue 9): the LLaMA-2-7B layer compiles in <= 5 s and profiles in
<= 10 s; nothing here asserts on time. A workload that fails shows its stage
and reason, and the script still exits 0.

With --sizes, a third table measures the same workloads at other sizes
(SIZES below: odd and small matmuls, short and long sequences, other model
widths, batches of 2 and 3 sequences, rows under 512 bytes), so that a size the production table
does not show, and falls off a cliff, is seen.

Usage: /usr/bin/python3 benchmarks/roofline_bench.py [--workloads a,b] [--skip-small]
           [--sizes] [--keep DIR] [--json FILE]
"""
import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools", "python"))
from neuroncc import export as ex  # noqa: E402
from neuroncc import models, toolchain, workloads  # noqa: E402

import torch  # noqa: E402

# (row name, workload, target): the layer also on trn2.
ROWS = [
    ("matmul", "matmul", "trn1"),
    ("swiglu_ffn", "swiglu_ffn", "trn1"),
    ("rmsnorm", "rmsnorm", "trn1"),
    ("softmax", "softmax", "trn1"),
    ("llama7b_s2048", "llama7b_s2048", "trn1"),
    ("llama7b_s2048/trn2", "llama7b_s2048", "trn2"),
    ("llama7b_s16", "llama7b_s16", "trn1"),
    ("llama7b_s16/trn2", "llama7b_s16", "trn2"),
    ("gpt2_medium", "gpt2_medium", "trn1"),
]

# The next issue's goals, over T_exec: (figure, at least), or the HBM
# traffic against the minimum (at most).
GOALS = {
    "matmul": [("mfu_exec", 90.0)],
    "swiglu_ffn": [("mfu_exec", 85.0)],
    "rmsnorm": [("mbu_exec", 80.0)],
    "softmax": [("mbu_exec", 80.0)],
    "llama7b_s2048": [("mfu_exec", 70.0), ("moved_over_min", 1.2)],
    "llama7b_s16": [("mbu_exec", 70.0)],
    "gpt2_medium": [("mfu_exec", 60.0)],
}
GOAL_NAMES = {"mfu_exec": "MFU (exec)", "mbu_exec": "MBU (exec)", "moved_over_min": "HBM bytes / minimum"}

DTYPE_BYTES = {}


def _dtype_bytes():
    if not DTYPE_BYTES:
        pb = ex.pb
        for name, size in [("FLOAT32", 4), ("FLOAT64", 8), ("FLOAT16", 2), ("BFLOAT16", 2), ("INT64", 8),
                           ("INT32", 4), ("INT16", 2), ("INT8", 1), ("UINT8", 1), ("BOOL", 1)]:
            if hasattr(pb, name):
                DTYPE_BYTES[getattr(pb, name)] = size
    return DTYPE_BYTES


def numel(meta):
    n = 1
    for d in meta.shape:
        n *= d
    return n


def graph_costs(graph):
    """(matmul FLOPs, minimum HBM bytes) of an aten_graph_pb2.Graph."""
    sizes = _dtype_bytes()
    meta = {}
    for p in graph.inputs:
        meta[p.name] = p.meta
    for c in graph.constants:
        meta[c.name] = c.meta
    for n in graph.nodes:
        if len(n.outputs) == 1:
            meta[n.name] = n.outputs[0]
    flops = 0
    for n in graph.nodes:
        target = n.target.split(".")[0]
        if target not in ("aten::mm", "aten::bmm", "aten::addmm", "aten::matmul", "aten::linear", "aten::baddbmm"):
            continue
        tensors = [a.tensor for a in n.args if a.WhichOneof("value") == "tensor"]
        if target in ("aten::addmm", "aten::baddbmm"):
            tensors = tensors[1:]  # the bias
        if not tensors or tensors[0] not in meta or not n.outputs:
            continue
        k = meta[tensors[0]].shape[-1]
        flops += 2 * numel(n.outputs[0]) * k
    def nbytes(m):
        return numel(m) * sizes.get(m.dtype, 4)
    minimum = sum(nbytes(p.meta) for p in graph.inputs) + sum(nbytes(c.meta) for c in graph.constants)
    minimum += sum(nbytes(meta[o]) for o in graph.outputs if o in meta)
    return flops, minimum


def reason(err):
    text = re.sub(r"(?:/[^\s:'\"/]+)+/", "", str(err))
    for line in text.splitlines():
        if "error" in line.lower() and "failed (" not in line:
            return line.strip()[:160]
    return (text.strip().splitlines() or ["(no message)"])[-1][:160]


def measure(name, export_fn, target, workdir):
    """One row: a dict of figures, or {"error": ...}."""
    row = {"name": name, "target": target}
    pb = os.path.join(workdir, name.replace("/", "_") + ".pb")
    neff = pb[:-3] + ".neff"
    ntff = pb[:-3] + ".ntff"
    stage = "export"
    try:
        t0 = time.perf_counter()
        exp = export_fn(pb)
        row["export_s"] = time.perf_counter() - t0
        row["flops"], row["min_bytes"] = graph_costs(exp.graph)
        stage = "compile"
        t0 = time.perf_counter()
        toolchain.compile_graph(pb, neff, opt=2, target=target)
        row["compile_s"] = time.perf_counter() - t0
        stage = "profile"
        t0 = time.perf_counter()
        toolchain.capture_ntff(neff, ntff, timing_only=True)
        s = toolchain.ntff_summary(neff, ntff)
        row["profile_s"] = time.perf_counter() - t0
        stage = "instruction view"
        instructions = toolchain.ntff_instructions(neff, ntff, pb[:-3] + "-instructions.json")
    except Exception as e:  # noqa: BLE001 - any failure is reported in the table
        row["error"] = "%s: %s" % (stage, reason(e))
        return row
    total = s["total_time"]
    launch = s["launch_overhead_time"]
    exec_time = max(total - launch, 1e-18)
    peak, bw = s["tensor_peak_flops_per_s"], s["hbm_gbps_per_core"] * 1e9
    bound = max(row["flops"] / peak, row["min_bytes"] / bw)
    row.update({
        "dispatches": s["dispatch_count"], "kernels": s["kernel_count"], "instructions": s["instruction_count"],
        "time_us": total * 1e6, "exec_us": exec_time * 1e6, "bound_us": bound * 1e6,
        "over_bound": exec_time / bound if bound > 0 else float("inf"),
        "mfu": 100 * row["flops"] / (total * peak), "mfu_exec": 100 * row["flops"] / (exec_time * peak),
        "mbu": 100 * row["min_bytes"] / (total * bw), "mbu_exec": 100 * row["min_bytes"] / (exec_time * bw),
        "moved_bytes": s["hbm_read_bytes"] + s["hbm_write_bytes"],
    })
    row["moved_over_min"] = row["moved_bytes"] / row["min_bytes"] if row["min_bytes"] else 0
    kb = kernel_engine_bound(instructions, bw)
    row["over_kernel_bound"] = exec_time / kb if kb > 0 else float("inf")
    scale = total / exec_time
    for e in ("tensor", "vector", "scalar", "gpsimd"):
        row["active_" + e] = s["%s_engine_active_time_percent" % e] * scale
    row["active_dma"] = s["dma_active_time_percent"] * scale
    return row


def kernel_engine_bound(instructions, bw):
    """Kb in seconds (see the module docstring)."""
    busy = {}
    for i in instructions:
        per = busy.setdefault(i["span"], {})
        if i["queue"].startswith("dma"):
            per["dma"] = per.get("dma", 0.0) + i["bytes"] / bw * 1e6
        else:
            per[i["queue"]] = per.get(i["queue"], 0.0) + i["end_us"] - i["start_us"]
    return sum(max(per.values()) for per in busy.values()) * 1e-6


# (row name, workload, sizes) of the --sizes table, all on trn1.
SIZES = [
    ("mm 1000^3", "matmul", dict(m=1000, k=1000, n=1000)),
    ("mm 2048x4096x1024", "matmul", dict(m=2048, k=4096, n=1024)),
    ("mm 4096x1024x4096", "matmul", dict(m=4096, k=1024, n=4096)),
    ("mm 3000x5000x2000", "matmul", dict(m=3000, k=5000, n=2000)),
    ("mm 128x4096x4096", "matmul", dict(m=128, k=4096, n=4096)),
    ("mm 128x11008x4096", "matmul", dict(m=128, k=11008, n=4096)),
    ("mm 8192x2048x2048", "matmul", dict(m=8192, k=2048, n=2048)),
    ("mm 1x4096x4096", "matmul", dict(m=1, k=4096, n=4096)),
    ("mm 4096x4096x1", "matmul", dict(m=4096, k=4096, n=1)),
    ("mm 4096x128x4096", "matmul", dict(m=4096, k=128, n=4096)),
    ("mm 777x333x555", "matmul", dict(m=777, k=333, n=555)),
    ("ffn 512/2048/5504", "swiglu_ffn", dict(tokens=512, dim=2048, hidden=5504)),
    ("ffn 1000/4096/11008", "swiglu_ffn", dict(tokens=1000, dim=4096, hidden=11008)),
    ("ffn 16/4096/11008", "swiglu_ffn", dict(tokens=16, dim=4096, hidden=11008)),
    ("rms 1000x5120", "rmsnorm", dict(rows=1000, dim=5120)),
    ("rms 8192x768", "rmsnorm", dict(rows=8192, dim=768)),
    ("rms 3x100000", "rmsnorm", dict(rows=3, dim=100000)),
    ("smax 12x1024x1000", "softmax", dict(batch=12, rows=1024, cols=1000)),
    ("smax 128x50257", "softmax", dict(batch=1, rows=128, cols=50257)),
    ("smax 1x32000", "softmax", dict(batch=1, rows=1, cols=32000)),
    ("smax 8x512x8192", "softmax", dict(batch=8, rows=512, cols=8192)),
    ("rms 1x4096", "rmsnorm", dict(rows=1, dim=4096)),
    ("rms 2048x12288", "rmsnorm", dict(rows=2048, dim=12288)),
    ("smax 2048x32000", "softmax", dict(batch=1, rows=2048, cols=32000)),
    ("rms 16384x64", "rmsnorm", dict(rows=16384, dim=64)),
    ("smax 32x512x64", "softmax", dict(batch=32, rows=512, cols=64)),
    ("llama s512", "llama7b_s2048", dict(seq=512)),
    ("llama s1000", "llama7b_s2048", dict(seq=1000)),
    ("llama d2048 s128", "llama7b_s2048", dict(seq=128, dim=2048, heads=16, ffn=5504)),
    ("llama d2560 s256", "llama7b_s2048", dict(seq=256, dim=2560, heads=32, ffn=6912)),
    ("llama s1", "llama7b_s2048", dict(seq=1)),
    ("llama b2 s64", "llama7b_s2048", dict(seq=64, batch=2)),
    ("gpt2 d768 s128", "gpt2_medium", dict(seq=128, dim=768, heads=12)),
    ("gpt2 d768 s512", "gpt2_medium", dict(seq=512, dim=768, heads=12)),
    ("gpt2 d1024 s2048", "gpt2_medium", dict(seq=2048)),
    ("gpt2 d1280 s300", "gpt2_medium", dict(seq=300, dim=1280, heads=20)),
    ("gpt2 d1600 s256", "gpt2_medium", dict(seq=256, dim=1600, heads=25)),
    ("gpt2 b3 s200", "gpt2_medium", dict(seq=200, batch=3)),
]


def print_table(title, rows):
    print("\n" + title)
    head = ("%-19s %4s %4s %7s %11s %11s %11s %8s %7s %6s %6s %6s %6s  %-26s %11s %6s %6s %6s %7s"
            % ("workload", "disp", "kern", "instr", "T (us)", "T_exec", "bound", "Tex/B", "Tex/Kb", "MFU", "MFUex",
               "MBU", "MBUex", "active% T/V/S/G/DMA (exec)", "HBM MiB", "x min", "cmp s", "prof s", "export"))
    print(head)
    print("-" * len(head))
    for r in rows:
        if "error" in r:
            print("%-19s %s" % (r["name"], r["error"]))
            continue
        active = "%.0f/%.0f/%.0f/%.0f/%.0f" % (r["active_tensor"], r["active_vector"], r["active_scalar"],
                                              r["active_gpsimd"], r["active_dma"])
        print("%-19s %4d %4d %7d %11.1f %11.1f %11.1f %8.2f %7.3f %5.1f%% %5.1f%% %5.1f%% %5.1f%%  %-26s %11.1f %6.2f %6.2f %6.2f %7.2f"
              % (r["name"], r["dispatches"], r["kernels"], r["instructions"], r["time_us"], r["exec_us"],
                 r["bound_us"], r["over_bound"], r["over_kernel_bound"], r["mfu"], r["mfu_exec"], r["mbu"], r["mbu_exec"], active,
                 r["moved_bytes"] / 2**20, r["moved_over_min"], r["compile_s"], r["profile_s"], r["export_s"]))


def print_goals(rows):
    print("\nGoals (the code-generation issue; MFU and MBU over T_exec)")
    print("%-19s %-20s %8s %9s  %s" % ("workload", "figure", "goal", "achieved", "met"))
    for r in rows:
        base = r["name"].split("/")[0]
        for key, goal in GOALS.get(base, []):
            if "error" in r:
                print("%-19s %-20s %8s %9s  %s" % (r["name"], GOAL_NAMES[key],
                                                   "", "-", "no (" + r["error"] + ")"))
                continue
            value = r[key]
            at_most = key == "moved_over_min"
            met = value <= goal if at_most else value >= goal
            print("%-19s %-20s %8s %9s  %s" % (r["name"], GOAL_NAMES[key], ("<= %.1fx" if at_most else ">= %.0f%%") % goal,
                                               ("%.2fx" if at_most else "%.1f%%") % value, "yes" if met else "no"))


def small_model_export(name):
    def export(path):
        spec = models.MODELS[name]
        module, inputs = spec.build(torch.bfloat16)
        return ex.export_aten(module, inputs, path, params="constants", input_names=spec.input_names)
    return export


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default=",".join(r[0] for r in ROWS),
                    help="comma-separated rows of the production table")
    ap.add_argument("--skip-small", action="store_true", help="skip the small e2e models' table")
    ap.add_argument("--sizes", action="store_true", help="also measure the workloads at the SIZES below")
    ap.add_argument("--keep", help="keep graphs, NEFFs and NTFFs in this directory")
    ap.add_argument("--json", help="also write every row as JSON here")
    args = ap.parse_args(argv)
    wanted = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in wanted if w not in {r[0] for r in ROWS}]
    if unknown:
        ap.error("unknown workload(s) %s (known: %s)" % (", ".join(unknown), ", ".join(r[0] for r in ROWS)))
    workdir = args.keep or tempfile.mkdtemp(prefix="neuroncc-roofline-")
    os.makedirs(workdir, exist_ok=True)
    try:
        rows = []
        for name, workload, target in ROWS:
            if name in wanted:
                w = workloads.WORKLOADS[workload]
                rows.append(measure(name, w.export, target, workdir))
                print("  measured %s" % name, file=sys.stderr, flush=True)
        print_table("Production workloads (bf16, -O2, timing-only profile; T_exec = T without the %s launch)"
                    % "fixed per-dispatch", rows)
        print_goals(rows)
        small = []
        if not args.skip_small:
            for name in models.MODELS:
                small.append(measure(name, small_model_export(name), "trn1", workdir))
            print_table("Small end-to-end models (bf16, -O2, trn1)", small)
        sized = []
        if args.sizes:
            for name, workload, sizes in SIZES:
                w = workloads.WORKLOADS[workload]
                file_name = re.sub(r"[^A-Za-z0-9]+", "_", name)
                sized.append(measure(file_name, lambda path, w=w, sizes=sizes: w.export(path, **sizes), "trn1",
                                     workdir))
                sized[-1]["name"] = name
            print_table("Other sizes (bf16, -O2, trn1)", sized)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"production": rows, "small": small, "sizes": sized}, f, indent=1)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
