#!/usr/bin/env python3
"""Compile time of stacked decoder layers: `neuron-cc compile -O2` of 1 to 32
LLaMA-style layers (hidden 256, 4 heads, intermediate 688, 1 x 32 tokens,
f32, random weights as constants), with the share of each pass (from
--mlir-timing) and of memory planning.

Prints, per stack: layers, kernels, wall seconds of the compile (median of
--repeats runs), the pass that takes longest, and PlanMemory's share; then
the goals of the memory-planning issue (planning <= 20% of compile time, 32
layers <= 3 s). Nothing is asserted.

Usage: /usr/bin/python3 benchmarks/compile_bench.py [--layers 1,2,4,8,16,32] [--repeats 3] [--keep DIR]
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools", "python"))
import torch  # noqa: E402

from neuroncc import export as ex  # noqa: E402
from neuroncc import models, toolchain  # noqa: E402


def stack(layers):
    torch.manual_seed(0)
    body = torch.nn.Sequential(*[models.LlamaDecoderLayer(hidden=256, heads=4, intermediate=688, max_seq=32)
                                 for _ in range(layers)])
    body = models._randomize(body, 0).eval()
    return body, (torch.randn(1, 32, 256),)


def timed_compile(graph, neff):
    cmd = [toolchain.tool("neuron-cc"), "compile", graph, "--framework", "ATEN", "-O2", "--output", neff,
           "--mlir-timing"]
    start = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    if p.returncode != 0:
        raise RuntimeError("neuron-cc failed:\n" + p.stdout + p.stderr)
    passes = {}
    total = None
    for line in (p.stdout + p.stderr).splitlines():
        m = re.match(r"\s*([\d.]+)\s+\(\s*[\d.]+%\)\s+(.*\S)\s*$", line)
        if m:
            name = m.group(2)
            if name == "Total":
                total = float(m.group(1))
            elif not name.startswith("'"):
                passes[name] = passes.get(name, 0.0) + float(m.group(1))
    return wall, total, passes


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", default="1,2,4,8,16,32")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", metavar="DIR")
    args = parser.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="neuroncc-compile-bench-")
    os.makedirs(work, exist_ok=True)
    rows = []
    try:
        print("Stacked LLaMA-style layers (hidden 256, 1 x 32 tokens, f32), neuron-cc compile -O2")
        print("%6s %8s %10s %10s  %-34s %9s" % ("layers", "kernels", "compile s", "passes s", "longest pass",
                                               "planning"))
        for n in [int(x) for x in args.layers.split(",")]:
            module, inputs = stack(n)
            graph = os.path.join(work, "stack%d.pb" % n)
            ex.export_aten(module, inputs, graph)
            neff = os.path.join(work, "stack%d.neff" % n)
            runs = [timed_compile(graph, neff) for _ in range(args.repeats)]
            wall = statistics.median(r[0] for r in runs)
            total, passes = runs[len(runs) // 2][1], runs[len(runs) // 2][2]
            info = toolchain._run([toolchain.tool("neuron-packager"), "info", neff])
            kernels = int(re.search(r"(\d+) kernels", info).group(1))
            longest = max(passes.items(), key=lambda kv: kv[1]) if passes else ("?", 0.0)
            plan = sum(v for k, v in passes.items() if "PlanMemory" in k or "plan-memory" in k)
            share = plan / total if total else 0.0
            rows.append((n, wall, share))
            print("%6d %8d %10.2f %10.2f  %-34s %8.1f%%" % (n, kernels, wall, total or 0.0,
                                                            "%s (%.2f s)" % (longest[0][:24], longest[1]),
                                                            100 * share))
        print()
        print("Goals (memory-planning issue)")
        worst = max(share for _, _, share in rows)
        print("  memory planning <= 20%% of compile time: worst %.1f%% -> %s" % (100 * worst,
                                                                             "met" if worst <= 0.2 else "not met"))
        for n, wall, _ in rows:
            if n == 32:
                print("  32 layers compile in <= 3 s: %.2f s -> %s" % (wall, "met" if wall <= 3.0 else "not met"))
    finally:
        if not args.keep:
            shutil.rmtree(work, True)


if __name__ == "__main__":
    main()
