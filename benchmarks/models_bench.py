#!/usr/bin/env python3
"""Transformer-block benchmark: the LLaMA-style decoder layer and the GPT-2
block (tools/python/neuroncc/models.py), exported with neuroncc.export.

For each model and dtype it prints:
  - kernels at -O0 and -O2 (profile summary `kernel_count`),
  - matmuls at -O2: the graph's ATen matmul ops (mm, bmm, addmm) and the
    device matmul instructions (`matmul_count` from the summary-json when
    the profiler reports it, else instructions with opcode "matmul" in the
    --output-format json trace of one execution),
  - modeled device time at -O0 and -O2 and the ratio,
  - host wall time of executing the -O2 NEFF through libnrt's C API (ctypes,
    this process; the CPU simulation, not a device) next to PyTorch eager
    (no_grad) on the same inputs, medians after one warm-up.
A model that does not compile (or run) yet gets its failure reason in place
of the numbers; the script still exits 0. Nothing here asserts on time.

Usage: /usr/bin/python3 benchmarks/models_bench.py [--models llama,gpt2]
           [--dtypes f32,bf16] [--repeats N] [--keep DIR]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools", "python"))
from neuroncc import toolchain  # noqa: E402
from neuroncc.nrt import NeffRunner, median_time  # noqa: E402

import torch  # noqa: E402

from neuroncc import export as ex  # noqa: E402
from neuroncc import models  # noqa: E402

MATMUL_TARGETS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::matmul", "aten::baddbmm", "aten::linear")


def reason(err):
    text = re.sub(r"(?:/[^\s:'\"/]+)+/", "", str(err))
    ops = re.findall(r"^\s+(\S+::\S+) \(\d+ uses?", text, re.M)
    if ops:
        return "unsupported operators: " + " ".join(ops)
    for line in text.splitlines():
        if "error" in line.lower() and "failed (" not in line:
            return line.strip()
    return text.strip().splitlines()[-1] if text.strip() else "(no message)"


def device_bytes(t):
    """The raw little-endian bytes libnrt takes for a tensor (bf16 as 2 bytes)."""
    return ex.tensor_bytes(t)


def matmul_instructions(profile_dir, summary):
    if "matmul_count" in summary:
        return int(summary["matmul_count"]), "summary"
    trace = json.loads(toolchain._run([toolchain.tool("neuron-profile"), "view", "-d", profile_dir,
                                       "--output-format", "json"]))
    spans = {i for i, s in enumerate(trace.get("kernel_spans", [])) if s.get("execution", 0) == 0}
    return sum(1 for ins in trace.get("instructions", [])
               if ins.get("opcode") == "matmul" and ins.get("span", 0) in spans), "json"


def bench(name, dtype_name, work, runner, repeats):
    row = {"model": name, "dtype": dtype_name}
    spec = models.MODELS[name]
    module, inputs = spec.build(models.DTYPES[dtype_name])
    graph = os.path.join(work, "%s_%s.pb" % (name, dtype_name))
    exp = ex.export_aten(module, inputs, graph, input_names=spec.input_names)
    row["aten_matmuls"] = sum(c for t, c in exp.targets().items() if t in MATMUL_TARGETS)
    row["aten_nodes"] = len(exp.graph.nodes)
    arrays = {n: ex.to_numpy(v) for n, v in exp.input_values.items()}
    for opt in (0, 2):
        neff = os.path.join(work, "%s_%s_O%d.neff" % (name, dtype_name, opt))
        profile = os.path.join(work, "%s_%s_O%d-profile" % (name, dtype_name, opt))
        try:
            toolchain.compile_graph(graph, neff, opt=opt)
        except toolchain.ToolError as e:
            row["error_O%d" % opt] = "compile -O%d: %s" % (opt, reason(e))
            continue
        try:
            toolchain.run_neff(neff, arrays, os.path.join(work, "out"), profile, keep_dtypes=True)
            summary = toolchain.profile_summary(profile)
        except toolchain.ToolError as e:
            row["error_O%d" % opt] = "run -O%d: %s" % (opt, reason(e))
            continue
        row["kernels_O%d" % opt] = summary["kernel_count"]
        row["device_us_O%d" % opt] = summary["total_time"] * 1e6
        if opt == 2:
            row["matmuls"], row["matmul_source"] = matmul_instructions(profile, summary)
            try:
                row["host_ms"] = runner.time_execute(neff, {n: device_bytes(v) for n, v in exp.input_values.items()},
                                                     repeats=repeats) * 1e3
            except RuntimeError as e:
                row["error_host"] = "libnrt: %s" % e
    with torch.no_grad():
        row["eager_ms"] = median_time(lambda: module(*inputs), repeats) * 1e3
    return row


def fmt(row, key, spec):
    return spec % row[key] if key in row else "-"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="llama,gpt2")
    parser.add_argument("--dtypes", default="f32,bf16")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--keep", metavar="DIR", help="keep graphs, NEFFs and profiles in DIR")
    args = parser.parse_args()
    runner = NeffRunner(os.path.join(toolchain.BUILD, "lib", "libnrt.so"))
    work = args.keep or tempfile.mkdtemp(prefix="neuroncc-models-bench-")
    os.makedirs(work, exist_ok=True)
    rows = []
    try:
        for name in args.models.split(","):
            for dtype_name in args.dtypes.split(","):
                rows.append(bench(name, dtype_name, work, runner, args.repeats))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    header = ("%-12s %6s %6s %8s %8s %12s %12s %7s %12s %10s" % (
        "model", "k -O0", "k -O2", "mm aten", "mm dev", "dev -O0 us", "dev -O2 us", "O0/O2", "host nrt ms",
        "eager ms"))
    print(header)
    print("-" * len(header))
    for r in rows:
        ratio = "%.2f" % (r["device_us_O0"] / r["device_us_O2"]) if "device_us_O0" in r and "device_us_O2" in r \
            else "-"
        print("%-12s %6s %6s %8d %8s %12s %12s %7s %12s %10.3f" % (
            "%s %s" % (r["model"], r["dtype"]), fmt(r, "kernels_O0", "%d"), fmt(r, "kernels_O2", "%d"),
            r["aten_matmuls"], fmt(r, "matmuls", "%d"), fmt(r, "device_us_O0", "%.1f"),
            fmt(r, "device_us_O2", "%.1f"), ratio, fmt(r, "host_ms", "%.3f"), r["eager_ms"]))
    failures = [(r, k) for r in rows for k in ("error_O0", "error_O2", "error_host") if k in r]
    if failures:
        print("\nnot measured:")
        for r, k in failures:
            print("  %s %s: %s" % (r["model"], r["dtype"], r[k]))
    print("\nmm aten: mm/bmm/addmm nodes in the exported graph; mm dev: device matmul instructions at -O2 "
          "(from the profile summary's matmul_count, else counted in the json trace).")
    print("host times: medians of %d runs after one warm-up, this process; eager under torch.no_grad()."
          % args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
